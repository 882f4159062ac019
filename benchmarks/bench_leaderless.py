"""Who runs the scheduler: the three layouts side by side, under mpiexec.
Method and figures: docs/benchmarks.md."""
import argparse
import json
import os
import tempfile
from pathlib import Path

import numpy as np

from _common import ROOT, best_of, listed, run_cli

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


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--part", choices=("modes", "rebalance", "schedulers"), action="append")
    a = ap.parse_args()
    parts = a.part or ["modes", "rebalance", "schedulers"]
    print(f"{os.cpu_count()} cores here", flush=True)
    results = {}
    with tempfile.TemporaryDirectory() as tmp:
        for part in parts:
            globals()[part](a.repeat, tmp, results)
    print(json.dumps(results))


if __name__ == "__main__":
    main()
