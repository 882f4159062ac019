"""MF on more cores: one worker against two worker threads in one process (``--workers 2``)
and against ``mpiexec -n 3`` (two worker ranks exchanging a round's columns among
themselves), CCD++ on the built-in problem, weighted lambda 0.05, staleness 0. Method and
figures: docs/benchmarks.md."""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _common import MPIEXEC, ROOT, best_of, child_env, listed

COMMON = ["--rank", "32", "--lambda", "0.05", "--weighted-lambda", "--schedule", "ccd",
          "--staleness", "0", "--tol", "0", "--log-interval", "1", "--quiet", "--bias",
          "mean", "--early-stop", "0"]
SHAPES = {"10M": ["--n-users", "250000", "--n-items", "100000", "--n-ratings", "10000000"],
          "5M": ["--n-users", "200000", "--n-items", "20000", "--n-ratings", "5000000"]}
RUNS = {"one": "1 worker, one process", "threads": "--workers 2 (threads, one process)",
        "mpi": "mpiexec -n 3 (2 workers)"}
KERNELS = ("ccd_step", "ccd_tiles", "ccd_block")


def run(label, tree, flags, out, profile):
    env = child_env()
    if tree != ROOT:
        env["PYTHONPATH"] = str(tree)
    pre = [MPIEXEC, "-n", "3"] if label == "mpi" else []
    extra = {"one": ["--workers", "1"], "threads": ["--workers", "2"], "mpi": []}[label]
    prog = ([str(Path(__file__).resolve()), "--child", out] if profile
            else ["-m", "strads.apps.mf"])
    cmd = pre + [sys.executable, *prog, *flags, *extra, "--out", out]
    subprocess.run(cmd, check=True, env=env, cwd=tree, stdout=subprocess.DEVNULL)
    s = json.loads(Path(out, "summary.json").read_text())
    if profile:
        s["profile"] = [json.loads(f.read_text())
                        for f in sorted(Path(out).glob("profile-*.json"))]
    return s


def child(out, args):
    """The app with timers around a worker's parts (one file of figures per process)."""
    import threading

    from strads import transport
    from strads.apps.mf import kernels as K
    from strads.apps.mf import update as U
    from strads.apps.mf.__main__ import main as mf_main

    threads, events, lock = {}, {"kernel": [], "update": []}, threading.Lock()
    inside = threading.local()  # in a round's update (not setup's or warm-up's calls)

    def acc(name, cpu, wall=0.0, n=1):
        with lock:
            d = threads.setdefault(threading.current_thread().name, {})
            c = d.setdefault(name, [0, 0.0, 0.0, 0])
            c[0] += 1
            c[1] += cpu
            c[2] += wall
            c[3] += n

    def timed(obj, name, label, ratings=None, timeline=False):
        f = getattr(obj, name)

        def g(*a, **kw):
            top = label == "update"
            if not (top or getattr(inside, "on", False)):
                return f(*a, **kw)
            inside.on = True
            c0, w0 = time.thread_time(), time.perf_counter()
            try:
                return f(*a, **kw)
            finally:
                c1, w1 = time.thread_time(), time.perf_counter()
                inside.on = not top
                acc(label, c1 - c0, w1 - w0, ratings(a) if ratings else 1)
                if timeline:
                    events[label].append((w0, w1))
        setattr(obj, name, g)

    for k in KERNELS:
        if hasattr(K, k):
            timed(K, k, "kernel", lambda a: a[1].shape[0], timeline=True)
    for cls in (transport.Peers, *transport.Peers.__subclasses__()):
        if "allgather" in vars(cls):
            timed(cls, "allgather", "exchange")
    timed(U.MFUpdate, "update", "update", timeline=True)
    mf_main(args)
    rank = os.environ.get("PMI_RANK", "0")
    prof = {"threads": {(f"rank {rank} " if "PMI_RANK" in os.environ else "") + k: v
                        for k, v in threads.items()}}
    if events["update"]:  # the loop: from the first round's update to the last's
        busy, end = 0.0, 0.0
        for w0, w1 in sorted(events["kernel"]):  # the union of the kernels' intervals
            if w1 > end:
                busy += w1 - max(w0, end)
                end = w1
        prof["kernel_span"] = [min(w for w, _ in events["update"]),
                               max(w for _, w in events["update"]), busy]
    Path(out).mkdir(parents=True, exist_ok=True)  # (a worker rank may end first)
    Path(out, f"profile-{rank}.json").write_text(json.dumps(prof))


def profile_lines(s):
    """Per worker thread (or rank): CPU seconds a round of its kernels, update, the rest,
    the kernels' ns a rating, the exchange's wall wait."""
    rounds = max(s["rounds"], 1)
    out = []
    for prof in s["profile"]:
        for name, d in sorted(prof["threads"].items()):
            if "update" not in d:
                continue
            k = d.get("kernel", [0, 0.0, 0.0, 1])
            up = d["update"]
            ex = d.get("exchange", [0, 0.0, 0.0, 0])
            out.append(f"{name}: update {1e3 * up[1] / rounds:.2f} ms CPU a round "
                       f"(wall {1e3 * up[2] / rounds:.2f}), kernels "
                       f"{1e3 * k[1] / rounds:.2f} ms CPU ({1e9 * k[1] / max(k[3], 1):.2f} ns "
                       f"a rating), rest {1e3 * (up[1] - k[1] - ex[1]) / rounds:.2f} ms CPU, "
                       f"exchange {1e3 * ex[2] / rounds:.2f} ms wall")
        if "kernel_span" in prof:
            t0, t1, busy = prof["kernel_span"]
            out.append(f"no kernel running {1e3 * (t1 - t0 - busy) / rounds:.2f} ms a round "
                       f"of {1e3 * (t1 - t0) / rounds:.2f}")
    return out


def usage(s):
    rounds = max(s["rounds"], 1)
    parts = []
    for e in s["traffic"]:
        line = (f"rank {e['rank']}: peak RSS {e['peak_rss_mb']:.0f} MB, sent "
                f"{e['bytes_sent'] / 1e6:.1f} MB, received {e['bytes_received'] / 1e6:.1f} MB")
        if e["rank"] == 0 and s["ranks"] > 1:
            line += (f" ({(e['bytes_sent'] + e['bytes_received']) / rounds / 1e3:.1f} kB a "
                     f"round over {s['rounds']} rounds, setup and model included)")
        parts.append(line)
    return "; ".join(parts)


def main():
    if len(sys.argv) > 2 and sys.argv[1] == "--child":
        return child(sys.argv[2], sys.argv[3:])
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--iters", type=int, default=4)
    ap.add_argument("--shape", choices=sorted(SHAPES), default="10M")
    ap.add_argument("--runs", default="one,threads,mpi", help="of: " + ", ".join(RUNS))
    ap.add_argument("--tree", help="another checkout to run alternately (old vs new)")
    ap.add_argument("--profile", action="store_true", help="CPU time of a round's parts")
    a = ap.parse_args()
    flags = SHAPES[a.shape] + COMMON + ["--iters", str(a.iters)]
    trees = [ROOT] + ([Path(a.tree).resolve()] if a.tree else [])
    runs = [(t, k) for k in a.runs.split(",") for t in trees]
    with tempfile.TemporaryDirectory() as tmp:
        times, best = best_of(a.repeat, {r: lambda r=r: run(
            r[1], r[0], flags, tempfile.mkdtemp(dir=tmp), a.profile) for r in runs})
    for r in runs:
        s = best[r]
        print(f"[{r[0]}] {RUNS[r[1]]}: loop {min(times[r]):.2f}s (best of {a.repeat}: "
              f"{listed(times[r])}), {s['rounds']} rounds, "
              f"test RMSE {s['test_rmse']:.4f}, objective {s['objective']!r}", flush=True)
        print(f"    {usage(s)}", flush=True)
        for line in profile_lines(s) if a.profile else ():
            print(f"    {line}", flush=True)
    result = {}
    for t in trees:
        one = min(times.get((t, "one"), [float("nan")]))
        for k, name in (("threads", "--workers 2"), ("mpi", "mpiexec -n 3")):
            if (t, k) in times and (t, "one") in times:
                x = min(times[(t, k)])
                print(f"[{t}] {name}: {x / one:.2f}x the time of 1 worker ({one / x:.2f}x "
                      f"faster; {os.cpu_count()} cores here)", flush=True)
                result[f"{t}:{k}"] = x / one
    print(json.dumps({"ratios": result,
                      "times": {f"{t}:{k}": v for (t, k), v in times.items()}}))


if __name__ == "__main__":
    main()
