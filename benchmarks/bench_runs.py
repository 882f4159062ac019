"""The apps' command lines, measured from summary.json: ``threads`` (every core in one
process: ``--workers 2`` against ``--workers 1``), ``ranks`` (rank 0's share of memory and
traffic), ``scaling`` (bytes per round and memory as the workers grow, against the model of
docs/scaling.md), ``checkpoint`` (what checkpoints cost) and ``leaderless`` (who runs the
scheduler: the three layouts side by side, under mpiexec). Method and figures:
docs/benchmarks.md."""
import argparse
import json
import os
import tempfile
from pathlib import Path

import numpy as np

from _common import ROOT, best_of, lasso_svm, listed, run_cli, timed_cli


def mf(m, n, nnz, k, *more):
    return ["strads.apps.mf", "--n-users", str(m), "--n-items", str(n), "--n-ratings",
            str(nnz), "--rank", str(k), "--tol", "0", "--bias", "mean", "--early-stop", "0",
            *more]


def lda(D, V, L, K, *more):
    return ["strads.apps.lda", "--n-docs", str(D), "--n-words", str(V), "--doc-length",
            str(L), "--topics", str(K), "--tol", "0", "--top-words", "0", *more]


WEIGHTED = ("--lambda", "0.05", "--weighted-lambda")


def threads(a, s, tmp):
    """LDA at K = 1,000 and MF CCD++ on 5M ratings, loop time."""
    runs = {"lda": lda(s(20000), s(20000), 200, 1000, "--true-topics", "50", "--sweeps", "5"),
            "mf": mf(s(200000), s(20000), s(5000000), 32, *WEIGHTED, "--iters", "3")}
    for app in a.only.split(","):
        times, _ = best_of(a.repeat, {w: lambda w=w: timed_cli(runs[app] + ["--workers", w])[1]
                                      for w in (1, 2)})
        one, two = min(times[1]), min(times[2])
        print(f"{app}: --workers 1 {one:.2f}s, --workers 2 (threads) {two:.2f}s: "
              f"{two / one:.2f}x the time ({os.cpu_count()} cores; best of {a.repeat}: "
              f"{listed(times[1])} / {listed(times[2])})", flush=True)


def rss_range(t):
    rss = [e["peak_rss_mb"] for e in t]
    return f"peak RSS rank 0 {rss[0]:.0f} MB, workers {min(rss[1:]):.0f}-{max(rss[1:]):.0f} MB"


def ranks(a, s, tmp):
    """Peak memory and traffic of every rank, for the three apps."""
    runs = {"mf": mf(s(200000), s(20000), s(5000000), 32, "--iters", "2"),
            "lda": lda(s(20000), s(20000), 200, 1000, "--sweeps", "2"),
            "lasso": ["strads.apps.lasso", "--max-rounds", "20"]}
    for app in a.only.split(","):
        args = runs[app] + (["--data", lasso_svm(os.path.join(tmp, "lasso.svm"), s(50_000),
                                                s(100_000), 0.001)] if app == "lasso" else [])
        for n in map(int, a.np.split(",")):
            t = run_cli(args, os.path.join(tmp, f"{app}-{n}"), np=n)["traffic"]
            mb = lambda b: f"{b / 1e6:.0f}"  # noqa: E731
            print(f"{app} -n {n}: {rss_range(t)}; MB sent/received: "
                  + ", ".join(f"rank {e['rank']} {mb(e['bytes_sent'])}/"
                              f"{mb(e['bytes_received'])}" for e in t), flush=True)


def scaling(a, s, tmp):
    """Bytes a worker receives per round: measured between a short and a longer run, and
    predicted (docs/scaling.md)."""
    M, LD = dict(m=s(20_000), n=s(5_000), nnz=s(500_000), k=16), \
        dict(D=s(2_000), V=s(5_000), L=100, K=100)
    runs = {"mf": (mf(*M.values()), "--iters", (1, 3)),
            "lda": (lda(*LD.values()), "--sweeps", (1, 3))}

    def model(app, W, out):
        if app == "mf":
            # one factor column of one side a round, allgathered: (W-1)/W of it arrives
            return 8 * (W - 1) / W * (M["m"] + M["n"]) / 2
        # a slice (V / W words) of the packed word-topic table from the ring neighbour: 6
        # bytes a non-zero (the final model's count) and 8 a word; the others' topic-total
        # changes, 8 bytes a topic
        nnz = np.count_nonzero(np.load(Path(out, "model.npz"))["word_topic"])
        return (6 * nnz + 8 * LD["V"]) / W + 8 * (W - 1) * LD["K"]

    for app in a.only.split(","):
        args, flag, counts = runs[app]
        for n in map(int, a.np.split(",")):
            outs = [os.path.join(tmp, f"{app}-{n}-{c}") for c in counts]
            s1, s2 = [run_cli(args + [flag, str(c)], o, np=n) for c, o in zip(counts, outs)]

            def per_round(key):  # each rank's bytes a round, the longer run less the shorter
                return [(b[key] - a_[key]) / (s2["rounds"] - s1["rounds"])
                        for a_, b in zip(s1["traffic"], s2["traffic"])]
            recv = per_round("bytes_received")
            rank0 = per_round("bytes_sent")[0] + recv[0]
            print(f"{app} -n {n}: rank 0 {rank0:,.0f} B/round (sent+received); "
                  f"workers received {min(recv[1:]):,.0f}-{max(recv[1:]):,.0f} "
                  f"B/round (model {model(app, n - 1, outs[-1]):,.0f}); "
                  f"{rss_range(s2['traffic'])}", flush=True)


def checkpoint(a, s, tmp):
    """The MF 10M and LDA K = 1,000 runs of bench_mf.py and bench_lda.py under
    ``mpiexec -n 3``, with and without ``--checkpoint-every``."""
    runs = {"mf": mf(s(250000), s(100000), s(10000000), 32, *WEIGHTED, "--log-interval",
                     "1", "--iters", str(a.mf_iters)),
            "lda": lda(s(20000), s(20000), 200, 1000, "--true-topics", "50", "--alpha", "0.1",
                       "--beta", "0.01", "--log-interval", "1", "--sweeps",
                       str(a.lda_sweeps))}
    for app in a.only.split(","):
        size = [0]

        def run(every):
            out = tempfile.mkdtemp(dir=tmp)
            s = run_cli(runs[app] + (["--checkpoint-every", every] if every else []), out,
                        np=3)
            folder = Path(out, "checkpoint")
            if folder.exists():
                size[0] = max(size[0], sum(f.stat().st_size for f in folder.iterdir()))
            return s
        times, _ = best_of(a.repeat, {e: lambda e=e: run(e) for e in (a.every, 0)})
        base, with_ = min(times[0]), min(times[a.every])
        print(f"{app}: mpiexec -n 3, loop {base:.2f}s without checkpoints, {with_:.2f}s with "
              f"one every {a.every:g}s ({with_ / base - 1:+.1%}; best of {a.repeat}: "
              f"without {listed(times[0])}; with {listed(times[a.every])}); a checkpoint is "
              f"{size[0] / 1e6:.0f} MB on disk", flush=True)


MODES = {  # app: flags (built-in problems, a fixed amount of work)
    "lasso": ["--schedule", "priority", "--n-features", "20000", "--max-rounds", "3000",
              "--tol", "0"],
    "mf": ["--n-users", "100000", "--n-items", "20000", "--n-ratings", "3000000",
           "--iters", "5", "--tol", "0", "--bias", "mean"],
    "lda": ["--n-docs", "20000", "--n-words", "5000", "--sweeps", "10", "--topics", "100"],
}
REBALANCE = {
    "lda": ["--n-docs", "4000", "--sweeps", "40", "--topics", "100"],  # the run
    "lasso": ["--schedule", "round-robin", "--n-samples", "30000", "--n-features", "4000",
              "--density", "0.02", "--max-rounds", "5000", "--tol", "0"],
}


def run(app, n, flags, out, env=None):
    return run_cli([f"strads.apps.{app}", *flags, "--log-interval", "1"], out, np=n, env=env)


def show(label, times, s):
    print(f"  {label}: {min(times):.2f} s (best of {len(times)}: "
          f"{listed(times)}), {s['rounds']} rounds, objective "
          f"{s['objective']:.10g}", flush=True)


def same_model(a, b):
    za, zb = np.load(Path(a, "model.npz")), np.load(Path(b, "model.npz"))
    return sorted(za.files) == sorted(zb.files) and all(
        np.array_equal(za[k], zb[k]) for k in za.files)


def modes(repeat, tmp, results):
    print("replicated (mpiexec -n 2) vs rank (mpiexec -n 3), two workers each:", flush=True)
    for app, flags in MODES.items():
        dirs = {m: os.path.join(tmp, f"{app}-{m}") for m in ("rank", "replicated")}
        times, best = best_of(repeat, {
            "rank": lambda: run(app, 3, flags, dirs["rank"]),
            "replicated": lambda: run(app, 2, flags + ["--scheduler", "replicated"],
                                      dirs["replicated"])})
        print(f"{app} {' '.join(flags)}:", flush=True)
        for m in dirs:
            show(m, times[m], best[m])
        ratio = min(times["rank"]) / min(times["replicated"])
        same = same_model(*dirs.values())
        print(f"  replicated is {ratio:.2f}x the speed of rank; same model bit for bit: "
              f"{'yes' if same else 'NO'}", flush=True)
        results[f"modes_{app}"] = {"rank_s": min(times["rank"]),
                                   "replicated_s": min(times["replicated"]),
                                   "speed_ratio": ratio, "same_model": same}


def rebalance(repeat, tmp, results):
    print("mpiexec -n 3 --scheduler replicated, worker 1 3x as slow:", flush=True)
    env = {"STRADS_TEST_HOOK": "faults:slower:1:3", "PYTHONPATH": str(ROOT / "tests")}
    for app, flags in REBALANCE.items():
        base = flags + ["--scheduler", "replicated"]
        times, best = best_of(repeat, {
            "without": lambda: run(app, 3, base, os.path.join(tmp, f"{app}-no"), env),
            "with": lambda: run(app, 3, base + ["--rebalance"],
                                os.path.join(tmp, f"{app}-re"), env)})
        print(f"{app} {' '.join(flags)}:", flush=True)
        for m in times:
            show(f"{m} --rebalance", times[m], best[m])
        ratio = min(times["with"]) / min(times["without"])
        a, b = best["with"]["objective"], best["without"]["objective"]
        rel = abs(a - b) / abs(b)
        print(f"  with/without: {ratio:.2f}x the wall time; objective differs by "
              f"{100 * rel:.3f}%; {best['with'].get('rebalances')} rebalances, rows per "
              f"worker {best['with'].get('rows_per_worker')}", flush=True)
        results[f"rebalance_{app}"] = {"with_s": min(times["with"]),
                                       "without_s": min(times["without"]),
                                       "time_ratio": ratio, "objective_rel_diff": rel}


def schedulers(repeat, tmp, results):
    flags = ["--schedule", "priority", "--n-features", "200000", "--n-samples", "2000",
             "--density", "0.002", "--tol", "1e-6", "--max-rounds", "20000"]
    print(f"lasso {' '.join(flags)}, two workers, --schedulers K (mpiexec -n K+2):",
          flush=True)
    runs = {K: (lambda K=K: run("lasso", K + 2, flags + ["--schedulers", str(K)],
                                os.path.join(tmp, f"sched{K}"))) for K in (1, 2, 3)}
    times, best = best_of(repeat, runs)
    for K in runs:
        s = best[K]
        rss = ", ".join(f"{e['peak_rss_mb']:.0f}" for e in s["traffic"])
        show(f"K={K}", times[K], s)
        print(f"    peak RSS by rank (MB): {rss}; duality gap {s['duality_gap']:.3g}",
              flush=True)
        results[f"schedulers_{K}"] = {"wall_s": min(times[K]), "rounds": s["rounds"],
                                      "rss_mb": [e["peak_rss_mb"] for e in s["traffic"]]}


def leaderless(a, s, tmp):
    """Who runs the scheduler: the three layouts side by side (its ``--part``s)."""
    print(f"{os.cpu_count()} cores here", flush=True)
    results = {}
    for part in a.part or ["modes", "rebalance", "schedulers"]:
        globals()[part](a.repeat, tmp, results)
    print(json.dumps(results))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--scale", type=float, default=1.0,
                    help="times every data size (0.01: a quick check that it runs)")
    sub = ap.add_subparsers(dest="what", required=True)
    for name, only, extra in (("threads", "lda,mf", ()), ("ranks", "mf,lda,lasso", ("3,5",)),
                              ("scaling", "mf,lda", ("3,5,8",)), ("checkpoint", "mf,lda", ())):
        p = sub.add_parser(name, help=globals()[name].__doc__.split("\n")[0])
        p.add_argument("--only", default=only)
        if extra:
            p.add_argument("--np", default=extra[0])
        else:
            p.add_argument("--repeat", type=int, default=3)
    p = sub.add_parser("leaderless", help=leaderless.__doc__.split("\n")[0])
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--part", choices=("modes", "rebalance", "schedulers"), action="append")
    c = sub.choices["checkpoint"]
    c.add_argument("--every", type=float, default=5.0, help="seconds between checkpoints")
    c.add_argument("--mf-iters", type=int, default=8)
    c.add_argument("--lda-sweeps", type=int, default=10)
    a = ap.parse_args()

    def s(x):
        return max(int(x * a.scale), 10)
    # checkpoints go to the checkout's disk, not a /tmp that may be memory
    with tempfile.TemporaryDirectory(dir=ROOT if a.what == "checkpoint" else None) as tmp:
        globals()[a.what](a, s, tmp)


if __name__ == "__main__":
    main()
