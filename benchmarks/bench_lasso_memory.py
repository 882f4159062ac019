"""Lasso with bounded memory and time: the acceptance case of "Robustness: bounded memory
and time". Method and figures: docs/benchmarks.md."""
import argparse
import json
import os
import shlex
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

import numpy as np

from _common import ROOT, child_env, cli, lasso_svm, timed


def make_data(path, n=100_000, p=200_000, nnz=5_000_000, seed=0):
    import scipy.sparse as sp

    if os.path.exists(path):
        return
    rng = np.random.default_rng(seed)
    X = sp.random(n, p, density=nnz / (n * p), format="csr", random_state=rng)
    y = rng.choice([-1.0, 1.0], size=n)
    # the layout of scipy.sparse.save_npz, plus y: what `--data file.npz` reads
    tmp = path + ".tmp.npz"
    np.savez(tmp, data=X.data, indices=X.indices, indptr=X.indptr,
             shape=np.array(X.shape), format=np.array("csr"), y=y)
    os.replace(tmp, path)


def run(n_ranks, limit_kb, args, timeout):
    """One mpiexec run under `ulimit -v limit_kb`: (exit code, wall s, [peak RSS MiB per
    rank], summary dict or None, stderr tail)."""
    tmp = tempfile.mkdtemp(prefix="bench_lasso_memory_")
    cmd = cli(["strads.apps.lasso", *args], tmp, n_ranks, quiet=False)
    t = time.perf_counter()
    try:
        p = subprocess.run(["bash", "-c", f"ulimit -v {limit_kb}; exec {shlex.join(cmd)}"],
                           capture_output=True, text=True, timeout=timeout, cwd=ROOT,
                           env=child_env())
        code, err = p.returncode, p.stderr
    except subprocess.TimeoutExpired as e:
        code, err = "timeout", e.stderr or ""
        err = err.decode() if isinstance(err, bytes) else err
    wall = time.perf_counter() - t
    try:  # each rank's peak RSS, from the run's summary
        summary = json.loads(Path(tmp, "summary.json").read_text())
        rss = [e["peak_rss_mb"] for e in summary["traffic"]]
    except (OSError, ValueError, KeyError):
        summary, rss = None, [float("nan")] * n_ranks
    shutil.rmtree(tmp, ignore_errors=True)
    return code, wall, rss, summary, err[-2000:]


def parse_speed(path, W):
    """MB/s of each of W workers' read_part over its own byte range, in one process (the
    workers on threads; each timed alone, after a warm-up that compiles the parsers)."""
    from strads import transport
    from strads.io import source
    from strads.apps.lasso import data as lasso_data

    desc = lasso_data.shard(path, None)

    def once(peers):
        return timed(lasso_data.read_part, peers, desc)[0]
    transport.on_threads(W, once)
    took = transport.on_threads(W, once)
    sizes = [hi - lo for lo, hi in (source.line_range(path, w, W) for w in range(W))]
    return [s / t / 1e6 for s, t in zip(sizes, took)]


def parallel_load(a):
    path = "/tmp/bench_lasso_parallel.svm"
    t = time.perf_counter()
    lasso_svm(path, 25_000, 50_000, 0.002)
    size = os.path.getsize(path)
    print(f"data: {path} ({size / 1e6:.0f} MB, {time.perf_counter() - t:.1f} s to make "
          "or find)")
    code, wall, rss, _, err = run(a.np, "unlimited", ["--data", path, "--max-rounds",
                                                     str(a.rounds), "--quiet"], 900)
    print(f"mpiexec -n {a.np} ... --data {path} --max-rounds {a.rounds}: exit "
          f"{code}, {wall:.1f} s")
    if code:
        print(err)
        return
    for r, x in enumerate(rss):
        print(f"  rank {r}: peak RSS {x:.1f} MiB")
    print(f"  rank 0 {rss[0]:.1f} MiB <= smallest worker {min(rss[1:]):.1f} MiB: "
          f"{rss[0] <= min(rss[1:])}")
    W = a.np - 1
    speeds = parse_speed(path, W)
    print(f"  parse speed per worker (read_part, {W} threads, MB/s): "
          + ", ".join(f"{v:.0f}" for v in speeds))
    print(f"  parse speed, one worker reading the whole file: {parse_speed(path, 1)[0]:.0f} "
          "MB/s")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", default="/tmp/big.npz")
    ap.add_argument("--np", type=int, default=3)
    ap.add_argument("--limit-kb", type=int, default=3_500_000, help="ulimit -v per rank")
    ap.add_argument("--time-limit", type=float, default=60)
    ap.add_argument("--ratios", type=float, nargs="+", default=[0.1, 0.01])
    ap.add_argument("--extra", default="", help="more flags for the app, quoted")
    ap.add_argument("--trivial", action="store_true",
                    help="only check that a small built-in run starts under the limit")
    ap.add_argument("--parallel-load", action="store_true",
                    help="rank 0's and the workers' peak RSS with --data LIBSVM (np 5)")
    ap.add_argument("--rounds", type=int, default=20, help="--parallel-load: rounds")
    a = ap.parse_args()
    if a.parallel_load:
        if a.np == 3:
            a.np = 5
        parallel_load(a)
        return

    code, wall, rss, summary, err = run(a.np, a.limit_kb, ["--max-rounds", "5", "--quiet"],
                                        timeout=120)
    print(f"trivial run (built-in problem, 5 rounds) under ulimit -v {a.limit_kb}: "
          f"exit {code}, {wall:.1f} s, peak RSS per rank (MiB) "
          + ", ".join(f"{x:.0f}" for x in rss))
    if code != 0:
        print(err)
    if a.trivial:
        return
    t = time.perf_counter()
    make_data(a.data)
    print(f"data: {a.data} ({os.path.getsize(a.data) / 1e6:.0f} MB, "
          f"{time.perf_counter() - t:.1f} s to make or find)")
    for ratio in a.ratios:
        args = ["--data", a.data, "--time-limit", str(a.time_limit), "--quiet",
                "--lambda-ratio", str(ratio), *a.extra.split()]
        code, wall, rss, summary, err = run(a.np, a.limit_kb, args,
                                            timeout=4 * a.time_limit + 120)
        print(f"\nmpiexec -n {a.np} ... {' '.join(args)}  (ulimit -v {a.limit_kb})")
        print(f"  exit code {code}, wall {wall:.1f} s, peak RSS per rank (MiB): "
              + ", ".join(f"rank {r}: {x:.0f}" for r, x in enumerate(rss)))
        if summary:
            keys = ("rounds", "wall_s", "stop_reason", "objective", "duality_gap",
                    "nnz_coef", "gram_block_cap", "gram_pieces", "late_rounds")
            print("  " + ", ".join(f"{k} {summary.get(k)}" for k in keys))
        if code != 0:
            print("  stderr: " + err.replace("\n", "\n  "))


if __name__ == "__main__":
    main()
