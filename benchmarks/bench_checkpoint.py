"""What checkpoints cost: the MF 10M and LDA K = 1,000 runs of bench_mf.py and bench_lda.py
under ``mpiexec -n 3``, with and without ``--checkpoint-every``. Method and figures:
docs/benchmarks.md."""
import argparse
import os
import tempfile
from pathlib import Path

from _common import ROOT, run_cli

RUNS = {
    "mf": ["strads.apps.mf", "--n-users", "250000", "--n-items", "100000", "--n-ratings",
           "10000000", "--rank", "32", "--lambda", "0.05", "--weighted-lambda", "--tol", "0",
           "--bias", "mean", "--early-stop", "0",
           "--log-interval", "1"],
    "lda": ["strads.apps.lda", "--n-docs", "20000", "--n-words", "20000", "--doc-length",
            "200", "--true-topics", "50", "--alpha", "0.1", "--beta", "0.01", "--topics",
            "1000", "--tol", "0", "--top-words", "0", "--log-interval", "1"],
}


def run(args, out, every):
    s = run_cli(args + (["--checkpoint-every", every] if every else []), out, np=3)
    folder = Path(out, "checkpoint")
    size = sum(f.stat().st_size for f in folder.iterdir()) if folder.exists() else 0
    return s["wall_s"], size


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--every", type=float, default=5.0, help="seconds between checkpoints")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--only", default="mf,lda")
    ap.add_argument("--mf-iters", type=int, default=8)
    ap.add_argument("--lda-sweeps", type=int, default=10)
    a = ap.parse_args()
    extra = {"mf": ["--iters", str(a.mf_iters)], "lda": ["--sweeps", str(a.lda_sweeps)]}
    for app in a.only.split(","):
        args = RUNS[app] + extra[app]
        times = {0: [], a.every: []}
        size = 0
        with tempfile.TemporaryDirectory(dir=ROOT) as tmp:
            for rep in range(a.repeat):
                for every in (a.every, 0):
                    out = os.path.join(tmp, f"{every}-{rep}")
                    wall, sz = run(args, out, every)
                    times[every].append(wall)
                    size = max(size, sz)
        base, with_ = min(times[0]), min(times[a.every])
        print(f"{app}: mpiexec -n 3, loop {base:.2f}s without checkpoints, {with_:.2f}s with "
              f"one every {a.every:g}s ({with_ / base - 1:+.1%}; best of {a.repeat}: "
              f"without {', '.join(f'{t:.2f}' for t in times[0])}; with "
              f"{', '.join(f'{t:.2f}' for t in times[a.every])}); a checkpoint is "
              f"{size / 1e6:.0f} MB on disk", flush=True)


if __name__ == "__main__":
    main()
