"""Bytes per round and peak memory per rank as the workers grow, against the model of
docs/scaling.md, from summary.json's ``traffic``. Method and figures: docs/benchmarks.md."""
import argparse
import os
import tempfile
from pathlib import Path

from _common import run_cli

MF = dict(m=20_000, n=5_000, nnz=500_000, k=16)
LDA = dict(D=2_000, V=5_000, L=100, K=100)
RUNS = {
    "mf": (["strads.apps.mf", "--n-users", str(MF["m"]), "--n-items", str(MF["n"]),
            "--n-ratings", str(MF["nnz"]), "--rank", str(MF["k"]), "--tol", "0",
            "--bias", "mean", "--early-stop", "0"],
           "--iters", (1, 3)),
    "lda": (["strads.apps.lda", "--n-docs", str(LDA["D"]), "--n-words", str(LDA["V"]),
             "--doc-length", str(LDA["L"]), "--topics", str(LDA["K"]), "--tol", "0",
             "--top-words", "0"], "--sweeps", (1, 3)),
}


def model(app, W, out):
    """Predicted bytes one worker receives per round (docs/scaling.md)."""
    if app == "mf":
        # one factor column of one side a round, allgathered: (W-1)/W of it arrives
        return 8 * (W - 1) / W * (MF["m"] + MF["n"]) / 2
    # a slice (V / W words) of the packed word-topic table from the ring neighbour: 6
    # bytes a non-zero (the final model's count) and 8 a word; the others' topic-total
    # changes, 8 bytes a topic
    import numpy as np
    nnz = np.count_nonzero(np.load(Path(out, "model.npz"))["word_topic"])
    return (6 * nnz + 8 * LDA["V"]) / W + 8 * (W - 1) * LDA["K"]


def run(args, n, out):
    s = run_cli(args, out, np=n)
    return s["rounds"], s["traffic"]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--only", default="mf,lda")
    ap.add_argument("--np", default="3,5,8")
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        for app in a.only.split(","):
            args, flag, counts = RUNS[app]
            for n in map(int, a.np.split(",")):
                outs = [os.path.join(tmp, f"{app}-{n}-{c}") for c in counts]
                legs = [run(args + [flag, str(c)], n, o)
                        for c, o in zip(counts, outs)]
                out = outs[-1]
                (r1, t1), (r2, t2) = legs
                per = [((b["bytes_sent"] + b["bytes_received"]) -
                        (a_["bytes_sent"] + a_["bytes_received"])) / (r2 - r1)
                       for a_, b in zip(t1, t2)]
                recv = [(b["bytes_received"] - a_["bytes_received"]) / (r2 - r1)
                        for a_, b in zip(t1, t2)]
                W = n - 1
                rss = [e["peak_rss_mb"] for e in t2]
                print(f"{app} -n {n}: rank 0 {per[0]:,.0f} B/round (sent+received); "
                      f"workers received {min(recv[1:]):,.0f}-{max(recv[1:]):,.0f} "
                      f"B/round (model {model(app, W, out):,.0f}); peak RSS rank 0 "
                      f"{rss[0]:.0f} MB, workers {min(rss[1:]):.0f}-{max(rss[1:]):.0f} MB",
                      flush=True)


if __name__ == "__main__":
    main()
