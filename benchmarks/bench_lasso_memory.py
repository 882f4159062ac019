"""Lasso with bounded memory and time: the acceptance case of "Robustness: bounded memory
and time".

A 100,000 x 200,000 LIBSVM-shaped sparse problem (5M non-zeros, uniform values, random
labels +-1: the support grows large, so the working-set blocks would need Gram matrices
of gigabytes) is written to /tmp as .npz (CSR arrays and y), then run as

    ulimit -v 3500000; mpiexec -n 3 python -m strads.apps.lasso --data /tmp/big.npz \\
        --time-limit 60 --quiet

for each --lambda-ratio given. Prints, per run: exit code, wall time, and the peak
resident memory of every rank (GNU time -v around each rank, if /usr/bin/time exists;
else resource.getrusage of each rank's process, read by a small wrapper).

    python benchmarks/bench_lasso_memory.py                     # ratios 0.1 and 0.01
    python benchmarks/bench_lasso_memory.py --ratios 0.1 --limit-kb 3500000 --np 3
    python benchmarks/bench_lasso_memory.py --trivial           # only: does a run start?

Parallel loading (--data LIBSVM: every worker reads its own byte range, rank 0 never
holds the data): ``--parallel-load`` writes a ~40 MB LIBSVM file (25,000 x 50,000 at
density 0.002, make_problem + dump_svmlight_file) and runs ``mpiexec -n 5`` on it for
--rounds rounds; prints every rank's peak RSS from summary.json's ``traffic`` and each
worker's parse speed (its part's bytes / the time read_part took, timed in-process).

    python benchmarks/bench_lasso_memory.py --parallel-load [--np 5] [--rounds 20]
"""
import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]

# run by every rank when /usr/bin/time is missing: the rank's own peak RSS, to a file
_WRAPPER = r"""
import os, resource, runpy, sys
out = sys.argv.pop(1)
sys.argv = sys.argv[1:]
code = 0
try:
    runpy.run_module(sys.argv[0], run_name="__main__", alter_sys=True)
except SystemExit as e:
    code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
finally:
    rank = os.environ.get("PMI_RANK", os.environ.get("OMPI_COMM_WORLD_RANK", "0"))
    with open(f"{out}.{rank}", "w") as f:
        f.write(str(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss))
sys.exit(code)
"""


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


def mpiexec():
    exe = Path(sys.executable).parent / "mpiexec"
    return str(exe) if exe.exists() else shutil.which("mpiexec")


def run(n_ranks, limit_kb, args, timeout):
    """One mpiexec run under `ulimit -v limit_kb`: (exit code, wall s, [peak RSS MiB per
    rank], summary dict or None, stderr tail)."""
    tmp = tempfile.mkdtemp(prefix="bench_lasso_memory_")
    gnu_time = os.path.exists("/usr/bin/time")
    if gnu_time:
        rank_cmd = ("/usr/bin/time -v -o {tmp}/rss.$PMI_RANK {py} -m strads.apps.lasso "
                    "{args}").format(tmp=tmp, py=sys.executable, args=" ".join(args))
        cmd = [mpiexec(), "-n", str(n_ranks), "sh", "-c", rank_cmd]
    else:
        wrapper = os.path.join(tmp, "wrap.py")
        with open(wrapper, "w") as f:
            f.write(_WRAPPER)
        cmd = [mpiexec(), "-n", str(n_ranks), sys.executable, wrapper,
               os.path.join(tmp, "rss"), "strads.apps.lasso", *args]
    shell = f"ulimit -v {limit_kb}; exec " + " ".join(f"'{c}'" for c in cmd)
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("PMI_", "MPI_", "OMPI_", "PMIX_", "HYDRA"))}
    t = time.perf_counter()
    try:
        p = subprocess.run(["bash", "-c", shell], capture_output=True, text=True,
                           timeout=timeout, cwd=ROOT, env=env)
        code, out, err = p.returncode, p.stdout, p.stderr
    except subprocess.TimeoutExpired as e:
        code, out, err = "timeout", e.stdout or "", e.stderr or ""
        out, err = (s.decode() if isinstance(s, bytes) else s for s in (out, err))
    wall = time.perf_counter() - t
    rss = []
    for r in range(n_ranks):
        path = os.path.join(tmp, f"rss.{r}")
        try:
            text = open(path).read()
        except OSError:
            rss.append(float("nan"))
            continue
        m = re.search(r"Maximum resident set size \(kbytes\): (\d+)", text)
        kb = int(m.group(1)) if m else int(text.strip() or 0)
        rss.append(kb / 1024)
    shutil.rmtree(tmp, ignore_errors=True)
    summary = None
    for line in out.splitlines()[::-1]:
        if line.startswith("{"):
            summary = json.loads(line)
            break
    return code, wall, rss, summary, err[-2000:]


def make_svm(path, n=25_000, p=50_000, density=0.002, seed=0):
    if os.path.exists(path):
        return
    from sklearn.datasets import dump_svmlight_file
    from strads.apps.lasso import make_problem

    X, y, _ = make_problem(n, p, density=density, n_informative=200, seed=seed)
    dump_svmlight_file(X, y, path + ".tmp")
    os.replace(path + ".tmp", path)


def parse_speed(path, W):
    """MB/s of each of W workers' read_part over its own byte range, in one process (the
    workers on threads; each timed alone, after a warm-up that compiles the parsers)."""
    import threading

    from strads import transport
    from strads.io import source
    from strads.apps.lasso import data as lasso_data

    desc = lasso_data.shard(path, None)

    def once():
        group = transport._Group(W)
        took = [0.0] * W

        def work(w):
            t = time.perf_counter()
            lasso_data.read_part(transport._ThreadPeers(group, w, W), desc)
            took[w] = time.perf_counter() - t
        ts = [threading.Thread(target=work, args=(w,)) for w in range(W)]
        for t in ts:
            t.start()
        for t in ts:
            t.join()
        return took
    once()
    took = once()
    sizes = [(lambda lo_hi: lo_hi[1] - lo_hi[0])(source.line_range(path, w, W))
             for w in range(W)]
    return [s / t / 1e6 for s, t in zip(sizes, took)]


def parallel_load(a):
    path = "/tmp/bench_lasso_parallel.svm"
    t = time.perf_counter()
    make_svm(path)
    size = os.path.getsize(path)
    print(f"data: {path} ({size / 1e6:.0f} MB, {time.perf_counter() - t:.1f} s to make "
          "or find)")
    out = tempfile.mkdtemp(prefix="bench_lasso_parallel_")
    cmd = [mpiexec(), "-n", str(a.np), sys.executable, "-m", "strads.apps.lasso", "--data",
           path, "--max-rounds", str(a.rounds), "--quiet", "--out", out]
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("PMI_", "MPI_", "OMPI_", "PMIX_", "HYDRA"))}
    t = time.perf_counter()
    p = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, env=env, timeout=900)
    wall = time.perf_counter() - t
    print(f"mpiexec -n {a.np} ... --data {path} --max-rounds {a.rounds}: exit "
          f"{p.returncode}, {wall:.1f} s")
    if p.returncode:
        print(p.stderr[-3000:])
        return
    s = json.load(open(os.path.join(out, "summary.json")))
    shutil.rmtree(out, ignore_errors=True)
    for r in s["traffic"]:
        print(f"  rank {r['rank']}: peak RSS {r['peak_rss_mb']:.1f} MiB")
    rss = [r["peak_rss_mb"] for r in s["traffic"]]
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

    t = time.perf_counter()
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
