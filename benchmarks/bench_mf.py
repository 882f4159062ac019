"""Matrix factorization: strads CCD++ (and ALS) against LIBMF's SGD, side by side
(``--part peer``; ``real``: MovieLens 100k), and on more cores (``mpi``: one worker
against ``mpiexec -n 3``; ``scaling``: also against two worker threads in one process).
Method and figures: docs/benchmarks.md."""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
import zipfile
from pathlib import Path

from _common import ROOT, best_of, installed, libmf_run, listed, run_cli, timed
import strads
from strads.apps import mf
from strads.apps.mf import data as D


def fit(p, rank, lam, run=None, **kw):
    """strads on ``p`` in this process, one worker (``kw``: mf.make_setup's, ``run``: more
    of strads.run's) -> (seconds of the whole call, its result)."""
    setup = mf.make_setup(lambda: p, rank=rank, lam=lam, **kw)
    return timed(strads.run, setup, mf.MFUpdate, **{"workers": 1, "quiet": True, "tol": 0.0,
                                                    "app": "mf", **(run or {})})


# ---------------------------------------------------------------- peer: the built-in problem
def peer(a):
    t0 = time.perf_counter()
    tri = mf.make_problem(a.users, a.items, a.ratings, rank=10, noise=0.5, alpha=0.7, seed=0)
    p = D.prepare(tri, test_fraction=0.1, seed=0)
    n = p.ratings.shape[0]
    print(f"problem: {p.shape[0]} users x {p.shape[1]} items, {n} training and "
          f"{p.test_ratings.shape[0]} held-out ratings, rank {a.rank}, lambda {a.lam} per "
          f"rating (built in {time.perf_counter() - t0:.1f}s)", flush=True)
    # the runs alternate and each figure is the best of --repeat: on a shared machine
    # the load changes from one run to the next, and the best run is the least disturbed
    lm, runs = [], {"ccd": [], "als": []}
    for rep in range(a.repeat):
        lm.append(libmf_run(p, a.rank, a.lam, 20, a.eta))
        for schedule in runs:
            # weighted lambda (lambda times each row's rating count): the default, as
            # LIBMF's; until LIBMF's held-out RMSE
            runs[schedule].append(fit(p, a.rank, a.lam, dict(
                max_rounds=10 ** 9, time_limit=20 * lm[-1][0], tol=1e-12, log_interval=0.05),
                schedule=schedule, iters=None, target_test_rmse=lm[-1][1], bias="mean"))
    lm_wall, lm_rmse = min(lm)
    lm_rate = n * a.rank * 20 / lm_wall
    print(f"libmf SGD, 1 thread, 20 iterations: {lm_wall:.2f}s (best of {a.repeat}: "
          f"{listed(w for w, _ in lm)}), test RMSE {lm_rmse:.4f}, "
          f"{lm_rate / 1e6:.0f}M rating x rank updates/s/core", flush=True)
    out = {"libmf_s": lm_wall, "libmf_test_rmse": lm_rmse, "libmf_rate": lm_rate}
    for schedule, rs in runs.items():
        wall, res = min(rs, key=lambda x: x[0])
        iters = res.rounds / (2 * a.rank if schedule == "ccd" else 2)
        rmse = res.extra["test_rmse"]
        reached = all(r.stop_reason == "tol" for _, r in rs)
        rate = n * a.rank * iters / res.wall_s
        print(f"strads {schedule:3s}, 1 worker: {'reached' if reached else 'did NOT reach'} "
              f"it in {wall:.2f}s (best of {a.repeat}: {listed(w for w, _ in rs)}; fit() "
              f"call; loop {res.wall_s:.2f}s, {iters:.2f} outer iterations, test RMSE "
              f"{rmse:.4f}) = {wall / lm_wall:.2f}x libmf's time; {rate / 1e6:.0f}M rating x "
              f"rank updates/s/core = {rate / lm_rate:.2f}x libmf's", flush=True)
        out[schedule] = {"s": wall, "loop_s": res.wall_s, "iters": iters, "test_rmse": rmse,
                         "reached": reached, "ratio": wall / lm_wall, "rate": rate}
    # early stopping: where the held-out RMSE stops improving (one run, not a race)
    wall, res = fit(p, a.rank, a.lam, iters=30, early_stop=2, bias="mean")
    x = res.extra
    print(f"strads ccd, 1 worker, early stop 2 (up to 30 iterations): best test RMSE "
          f"{x['test_rmse']:.4f} at iteration {x['best_iteration']} of {x['iterations']} "
          f"({'stopped early' if x['early_stopped'] else 'ran to 30'}), {wall:.2f}s",
          flush=True)
    out["ccd_early_stop"] = {"s": wall, "best_iteration": x["best_iteration"],
                             "iterations": x["iterations"], "test_rmse": x["test_rmse"],
                             "early_stopped": x["early_stopped"]}
    return out


# ---------------------------------------------------------------- real: MovieLens 100k
WHEEL, MEMBER = "recbole==1.2.1", "recbole/dataset_example/ml-100k/ml-100k.inter"
RANK, ITERS, LAMBDAS = 40, 50, (0.02, 0.05, 0.1, 0.2)
BLOCK = RANK  # every factor column of a side in one round


def movielens_100k():
    """MovieLens 100k's 100,000 ratings (raw ids, the file's order) by strads' reader, from
    ml-100k.inter in the cache folder, fetched with pip the first time (the RecBole wheel
    alone, nothing installed)."""
    d = os.environ.get("STRADS_BENCH_CACHE")
    path = Path(d) if d else Path.home() / ".cache" / "strads-bench"
    path /= "ml-100k.inter"
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory() as tmp:
            cmd = [sys.executable, "-m", "pip", "download", WHEEL, "--no-deps",
                   "--only-binary=:all:", "-d", tmp, "-q"]
            r = subprocess.run(cmd, capture_output=True, text=True)
            wheels = list(Path(tmp).glob("recbole-*.whl"))
            if r.returncode != 0 or not wheels:
                sys.exit("error: could not fetch MovieLens 100k: `" + " ".join(cmd[2:])
                         + "` failed (is the package registry reachable?). Put "
                         "ml-100k.inter (tab-separated user, item, rating, timestamp with a "
                         f"header line) in {path.parent} or set STRADS_BENCH_CACHE.\n"
                         + (r.stderr or r.stdout).strip()[-2000:])
            with zipfile.ZipFile(wheels[0]) as z:
                path.with_suffix(".part").write_bytes(z.read(MEMBER))
            path.with_suffix(".part").replace(path)
    t = D.read_ratings(str(path))
    if t.ratings.shape[0] != 100000:
        sys.exit(f"error: {path}: {t.ratings.shape[0]} ratings, expected 100,000")
    return t


def libmf(p, lam, iters):
    wall, rmse = libmf_run(p, RANK, lam, iters)
    return {"s": wall, "test_rmse": rmse, "iters": iters}


def figures(wall, loop_s, res):
    x = res.extra
    return {"s": wall, "loop_s": loop_s, "test_rmse": x["test_rmse"],
            "iters": x["iterations"], "best_iteration": x.get("best_iteration")}


def strads_run(p, lam, tol=0.0, val=None, **kw):
    """CCD++ on p, scored on p's test ratings; with ``val`` (p with a validation split of
    its training ratings): early stopping on that split first, then a refit on all of
    p's training ratings for the best iteration count (the time: both runs)."""
    if val is None:
        wall, res = fit(p, RANK, lam, {"tol": tol}, **kw)
        return figures(wall, res.wall_s, res)
    a = strads_run(val, lam, tol, iters=ITERS, early_stop=2, **kw)
    b = strads_run(p, lam, tol, iters=a["best_iteration"], **kw)
    return dict(b, s=a["s"] + b["s"], loop_s=a["loop_s"] + b["loop_s"],
                val_rmse=a["test_rmse"], val_iters=a["iters"])


def strads_defaults(p, lam, **kw):
    """``mf.fit`` with its defaults but for rank and lambda (``kw``: the exceptions), on
    p's training ratings (its ids are 0..m-1: the remap is the identity), scored on p's
    test ratings."""
    wall, res = timed(mf.fit, p.users, p.items, p.ratings, rank=RANK, lam=lam, workers=1,
                      test=(p.test_users, p.test_items, p.test_ratings), quiet=True, **kw)
    return figures(wall, res.wall_s + res.extra.get("validation_wall_s", 0), res)


CONFIGS = {
    "strads ccd, bias full (default model), 50 it": dict(iters=ITERS),
    "strads ccd, bias mean (LIBMF's model), 50 it": dict(iters=ITERS, bias="mean"),
    "strads ccd, bias full, block 40, 50 it": dict(iters=ITERS, bias="full", block=BLOCK),
    "strads ccd, bias full, block 40, tol 1e-4 (<= 50 it)": dict(iters=ITERS, bias="full",
                                                                block=BLOCK, tol=1e-4),
    "strads ccd, bias full, block 40, validation early stop + refit": dict(
        bias="full", block=BLOCK, val=True),
}
DEFAULTS = {  # name: (the flag it differs by, mf.fit's arguments)
    "strads defaults": ("", {}),
    "strads defaults + bias mean": ("--bias mean", dict(bias="mean")),
    "strads defaults + no early stopping": ("--early-stop 0", dict(early_stop=None))}


def verdict(x, ref):
    return "as good or better" if x["test_rmse"] <= ref["test_rmse"] else "worse"


def real(a):
    p = D.prepare(movielens_100k(), test_fraction=0.2, seed=0)
    # the validation split: 10% of the training ratings (ids stay the same: every user
    # and item keeps a training rating, so the remap is the identity)
    p_val = D.prepare(D.from_arrays(p.users, p.items, p.ratings, "ratings"),
                      test_fraction=0.1, seed=1)
    assert p_val.shape == p.shape
    print(f"MovieLens 100k: {p.shape[0]} users x {p.shape[1]} items, "
          f"{p.ratings.shape[0]} training and {p.test_ratings.shape[0]} held-out ratings "
          f"(validation for early stopping: {p_val.test_ratings.shape[0]} of the training "
          f"ratings); rank {RANK}, one thread each, best of {a.repeat} alternating runs",
          flush=True)
    mf.MFUpdate.warmup()
    grid = {"LIBMF SGD, 50 it": lambda lam: libmf(p, lam, ITERS),
            **{name: lambda lam, c=dict(c): strads_run(
                p, lam, **dict(c, val=p_val if c.get("val") else None))
               for name, c in CONFIGS.items()},
            "LIBMF defaults (20 it)": lambda lam: libmf(p, lam, 20),
            **{name: lambda lam, kw=kw: strads_defaults(p, lam, **kw)
               for name, (_, kw) in DEFAULTS.items()}}
    runs = {}  # (name, lam) -> list of runs
    for rep in range(a.repeat):
        for lam in LAMBDAS:
            for name, go in grid.items():
                runs.setdefault((name, lam), []).append(go(lam))
        print(f"  run {rep + 1} of {a.repeat} done", flush=True)

    best = {k: min(v, key=lambda x: x["s"]) for k, v in runs.items()}
    out = {"rank": RANK, "iters": ITERS, "repeat": a.repeat, "grid": {}, "defaults": {}}
    print(f"\nrank {RANK}, up to {ITERS} iterations; time: best of {a.repeat} (s), "
          f"RMSE on the 20% held-out ratings")
    for name in ["LIBMF SGD, 50 it", *CONFIGS]:
        print(f"{name}:")
        for lam in LAMBDAS:
            b = best[(name, lam)]
            times = ", ".join(f"{x['s']:.3f}" for x in runs[(name, lam)])
            extra = f", loop {b['loop_s']:.3f}s, {b['iters']} it" if "loop_s" in b else ""
            if "val_rmse" in b:
                extra += (f" (validation: best at {b['iters']} of {b['val_iters']}, "
                          f"val RMSE {b['val_rmse']:.4f})")
            print(f"  lambda {lam:<5}: test RMSE {b['test_rmse']:.4f}  {b['s']:.3f}s "
                  f"(runs {times}){extra}")
            out["grid"].setdefault(name, {})[lam] = dict(b)
    lm_lam = min(LAMBDAS, key=lambda lam: best[("LIBMF SGD, 50 it", lam)]["test_rmse"])
    lm = best[("LIBMF SGD, 50 it", lm_lam)]
    print(f"\nbest over the grid: LIBMF {lm['test_rmse']:.4f} at lambda {lm_lam} in "
          f"{lm['s']:.3f}s")
    for name in CONFIGS:
        lam = min(LAMBDAS, key=lambda lam: best[(name, lam)]["test_rmse"])
        b = best[(name, lam)]
        print(f"  {name}: {b['test_rmse']:.4f} at lambda {lam} ({verdict(b, lm)}) in "
              f"{b['s']:.3f}s = {b['s'] / lm['s']:.2f}x LIBMF's time")
        out["grid"][name]["best"] = {"lambda": lam, "test_rmse": b["test_rmse"],
                                     "s": b["s"], "ratio": b["s"] / lm["s"]}
    print("\ndefaults (only rank and lambda given), test RMSE and time:")
    keys = dict(zip(DEFAULTS, ("strads", "strads_bias_mean", "strads_no_early_stop")))
    for lam in LAMBDAS:
        lmd = best[("LIBMF defaults (20 it)", lam)]
        out["defaults"][lam] = {"libmf": dict(lmd)}
        for name, (flag, _) in DEFAULTS.items():
            sf = out["defaults"][lam][keys[name]] = dict(best[(name, lam)])
            if not flag:
                print(f"  lambda {lam:<5}: LIBMF {lmd['test_rmse']:.4f} {lmd['s']:.3f}s, "
                      f"strads {sf['test_rmse']:.4f} {sf['s']:.3f}s ({sf['iters']} it, early "
                      f"stopping) = {sf['s'] / lmd['s']:.2f}x LIBMF's time; strads "
                      f"{verdict(sf, lmd)}")
            else:
                print(f"  {'':13s}  strads with {flag}: {sf['test_rmse']:.4f} {sf['s']:.3f}s "
                      f"({sf['iters']} it) = {sf['s'] / lmd['s']:.2f}x; {verdict(sf, lmd)}")
    return out


# ---------------------------------------------------------------- mpi, scaling: more cores
SHAPES = {"10M": ["--n-users", "250000", "--n-items", "100000", "--n-ratings", "10000000"],
          "5M": ["--n-users", "200000", "--n-items", "20000", "--n-ratings", "5000000"],
          "1M": ["--n-users", "25000", "--n-items", "10000", "--n-ratings", "1000000"]}
RUNS = {  # label, mpiexec -n, flags
    "one": ("1 worker, one process", None, ["--workers", "1"]),
    "threads": ("--workers 2 (threads, one process)", None, ["--workers", "2"]),
    "mpi": ("mpiexec -n 3 (2 workers)", 3, []),
    "stale": ("mpiexec -n 3 (2 workers), staleness 1", 3, ["--staleness", "1"])}
KERNELS = ("ccd_step", "ccd_tiles", "ccd_block")


def run(kind, tree, flags, out, profile):
    _, n, extra = RUNS[kind]
    env = {"PYTHONPATH": str(tree)} if tree != ROOT else {}
    prog = [str(Path(__file__).resolve()), "--child", out] if profile else ["strads.apps.mf"]
    s = run_cli(prog + flags + extra, out, np=n, env=env, cwd=tree)
    if profile:
        s["profile"] = [json.loads(f.read_text())
                        for f in sorted(Path(out).glob("profile-*.json"))]
    return s


def more_cores(a, shape, kinds, iters):
    """The CLI's runs ``kinds`` (of RUNS) on the built-in problem ``shape``, CCD++,
    staleness 0 (but ``stale``), alternating, each the best of --repeat; with --tree,
    another checkout's strads too."""
    flags = SHAPES[shape] + [
        "--rank", str(a.rank), "--lambda", str(a.lam), "--weighted-lambda", "--schedule",
        "ccd", "--staleness", "0", "--tol", "0", "--log-interval", "1", "--bias", "mean",
        "--early-stop", "0", "--iters", str(iters)]
    trees = [ROOT] + ([Path(a.tree).resolve()] if a.tree else [])
    runs = [(t, k) for k in kinds for t in trees]
    with tempfile.TemporaryDirectory() as tmp:
        times, best = best_of(a.repeat, {r: lambda r=r: run(
            r[1], r[0], flags, tempfile.mkdtemp(dir=tmp), a.profile) for r in runs})
    for r in runs:
        s, t = best[r], min(times[r])
        print(f"[{r[0]}] {RUNS[r[1]][0]}: loop {t:.2f}s (best of {a.repeat}: "
              f"{listed(times[r])}), {t / s['iterations']:.2f}s per outer iteration, "
              f"{s['rounds']} rounds, {s['n_train']} training ratings, test RMSE "
              f"{s['test_rmse']:.4f} after {s['iterations']}, objective {s['objective']!r}",
              flush=True)
        print(f"    {usage(s)}", flush=True)
        for line in profile_lines(s) if a.profile else ():
            print(f"    {line}", flush=True)
    result = {}
    for t in trees:
        one = min(times.get((t, "one"), [float("nan")]))
        for k in kinds:
            if k != "one" and "one" in kinds:
                x = min(times[(t, k)])
                print(f"[{t}] {RUNS[k][0]}: {x / one:.2f}x the time of 1 worker "
                      f"({one / x:.2f}x faster; {os.cpu_count()} cores here)", flush=True)
                result[f"{t}:{k}"] = x / one
    return {"ratios": result, "times": {f"{t}:{k}": v for (t, k), v in times.items()}}


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
            for j, v in enumerate((1, cpu, wall, n)):
                c[j] += v

    def timed(obj, name, label, ratings=None, timeline=False):
        f = getattr(obj, name)

        def g(*a, **kw):
            top = label == "update"
            if not (top or getattr(inside, "on", False)):
                return f(*a, **kw)
            inside.on = True
            if top:  # (update(self, task): the side its kernels are counted under)
                inside.side = a[1]["side"]
            c0, w0 = time.thread_time(), time.perf_counter()
            try:
                return f(*a, **kw)
            finally:
                c1, w1 = time.thread_time(), time.perf_counter()
                inside.on = not top
                acc(label, c1 - c0, w1 - w0, ratings(a) if ratings else 1)
                if label == "kernel":
                    acc(f"kernel {inside.side}", c1 - c0, w1 - w0, ratings(a))
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
                       f"exchange {1e3 * ex[2] / rounds:.2f} ms wall; a side's kernels "
                       + ", ".join(f"{s} {1e3 * d[f'kernel {s}'][1] / d[f'kernel {s}'][0]:.2f}"
                                   for s in "WH" if f"kernel {s}" in d)
                       + " ms CPU a call")
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
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--part", choices=("all", "peer", "mpi", "real", "scaling"),
                    default="all", help="all: peer and mpi")
    ap.add_argument("--small", action="store_true", help="peer, mpi: a 10x smaller problem")
    ap.add_argument("--rank", type=int, default=32)
    ap.add_argument("--lambda", dest="lam", type=float, default=0.05)
    ap.add_argument("--eta", type=float, default=0.1, help="libmf learning rate")
    ap.add_argument("--repeat", type=int, help="alternating runs of each configuration "
                    "(the best counts; default 5, real and scaling 3)")
    ap.add_argument("--iters", type=int, help="mpi, scaling: outer iterations (2, 4)")
    ap.add_argument("--json", help="write the figures here (else the last line)")
    ap.add_argument("--shape", choices=sorted(SHAPES), default="10M", help="scaling")
    ap.add_argument("--runs", default="one,threads,mpi",
                    help="scaling, of: " + ", ".join(RUNS))
    ap.add_argument("--tree", help="mpi, scaling: another checkout to run alternately "
                    "(old vs new)")
    ap.add_argument("--profile", action="store_true",
                    help="mpi, scaling: CPU time of a round's parts")
    a = ap.parse_args()
    a.users, a.items, a.ratings = (5000, 2000, 200_000) if a.small else \
        (50_000, 20_000, 2_000_000)
    a.repeat = a.repeat or (3 if a.part in ("real", "scaling") else 5)
    out = {}
    if a.part in ("all", "peer") and installed("libmf", what="peer skipped"):
        out["peer"] = peer(a)
    if a.part in ("all", "mpi"):
        out["mpi"] = more_cores(a, "1M" if a.small else "10M", ("one", "mpi", "stale"),
                                a.iters or 2)
    if a.part == "real" and installed("libmf", what="real skipped"):
        out["real"] = real(a)
    if a.part == "scaling":
        out["scaling"] = more_cores(a, a.shape, a.runs.split(","), a.iters or 4)
    if a.json:
        Path(a.json).write_text(json.dumps(out, indent=1, default=float))
    else:
        print(json.dumps(out, default=float))


if __name__ == "__main__":
    main()
