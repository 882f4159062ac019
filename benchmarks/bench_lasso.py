"""The Lasso and (``--app logreg``) the sparse logistic regression: time to reach
f* (1 + 1e-6), side by side with scikit-learn, skglm and celer (logreg: skglm and
scikit-learn's liblinear and saga). Method and figures: docs/benchmarks.md."""
import argparse
import json
import subprocess
import tempfile
import time
import warnings
from pathlib import Path

import numpy as np

from _common import (installed, l1_logistic, one_and_mpi, peer_time, read_trace, run_cli,
                     timed_cli, to_target)
from strads.apps import lasso, logreg
from strads.apps.lasso.data import make_problem
from strads.apps.logreg.data import make_problem as logreg_problem

RTOL = 1e-6
FITS = {lasso: (RTOL / 10, {"max_rounds": 3}), logreg: (RTOL, {"tol": 1e-3})}  # tol, warm-up
STAR_TOL = {lasso: 1e-13, logreg: 1e-10}
ALL = ("working-set", "priority", "round-robin", "random")


def strads_star(app, X, y, lam):
    """strads' objective at tol 1e-13 (Lasso) or 1e-10 (logreg), after a warm-up."""
    app.fit(X, y, lam=lam, tol=1e-3, quiet=True)
    return app.fit(X, y, lam=lam, tol=STAR_TOL[app], max_rounds=10**6, quiet=True).objective


def lasso_peers(X, y, lam):
    """-> (name -> (make(tol), the seconds its fits may take)), f*'s reference:
    scikit-learn's objective at tol 1e-10."""
    from celer import Lasso as CLasso
    from skglm import Lasso as GLasso
    from sklearn.linear_model import Lasso as SKLasso

    makers = {
        "scikit-learn": lambda tol: SKLasso(alpha=lam, fit_intercept=False, tol=tol,
                                            max_iter=100000),
        "skglm": lambda tol: GLasso(alpha=lam, fit_intercept=False, tol=tol, max_iter=1000),
        "celer": lambda tol: CLasso(alpha=lam, fit_intercept=False, tol=tol, max_iter=1000)}
    for make in makers.values():
        make(1e-2).fit(X[:50], y[:50])  # warm-up (numba in skglm/celer)
    ref = makers["scikit-learn"](1e-10).fit(X, y)
    return ({k: (make, float("inf")) for k, make in makers.items()},
            {"scikit-learn": lasso.objective(X, y, ref.coef_, lam)})


def logreg_peers(X, y, lam, saga=True):
    """-> (name -> (make(tol), the seconds its fits may take)), f*'s references: the
    objectives of liblinear (its iterations bounded: at tol 1e-10 it may spin on
    rounding), skglm and strads at tol 1e-10."""
    from skglm import SparseLogisticRegression

    C = 1 / (X.shape[0] * lam)
    makers = {"skglm": lambda tol: SparseLogisticRegression(
        alpha=lam, fit_intercept=False, tol=tol, max_iter=100),
        "liblinear": lambda tol, max_iter=1000: l1_logistic(
            solver="liblinear", C=C, fit_intercept=False, tol=tol, max_iter=max_iter),
        "saga": lambda tol: l1_logistic(solver="saga", C=C, fit_intercept=False, tol=tol,
                                        max_iter=100)}
    makers["skglm"](1e-2).fit(X[:50], y[:50])  # numba warm-up of skglm
    refs = {k: logreg.objective(X, y, make(1e-10).fit(X, y).coef_.ravel(), lam)
            for k, make in (("liblinear", lambda tol: makers["liblinear"](tol, 100)),
                            ("skglm", makers["skglm"]))}
    refs["strads"] = strads_star(logreg, X, y, lam)
    budget = {"skglm": 120.0, "liblinear": 120.0, "saga": 60.0}
    return {k: (make, budget[k]) for k, make in makers.items() if saga or k != "saga"}, refs


def compare(app, name, X, y, lam, peers=None, schedules=ALL, time_limit=120, repeat=1,
            **kw):
    """Time every schedule of ``app`` (``kw``: more of its fit's arguments) and the
    ``peers`` ((peers, refs) of lasso_peers or logreg_peers) to f*(1 + RTOL), f* the least
    of the references, else (no peers: near-duplicate columns, on which their coordinate
    descent crawls) strads' own. Peers: the whole fit at the first of decreasing
    tolerances that reaches the target; strads: the set-up and the loop to the first
    logged round there (:func:`_common.to_target`)."""
    peers, refs = peers or ({}, {"strads": strads_star(app, X, y, lam)})
    f_star = min(refs.values())
    target = f_star * (1 + RTOL)
    best = f" (best of {repeat})" if repeat > 1 else ""
    print(f"\n== {name}: X {X.shape}" + (f", {X.nnz:,} non-zeros" if hasattr(X, "nnz")
                                          else "") +
          f", lambda {lam:.4g} (lambda_max / {app.lambda_max(X, y) / lam:.0f}), target "
          f"f*(1+{RTOL:g}){best}, f* = {f_star:.12g} (from {min(refs, key=refs.get)})")
    times = {}
    for peer, (make, budget) in peers.items():
        runs = [peer_time(make, lambda w: app.objective(X, y, w, lam), X, y, target, budget)
                for _ in range(repeat)]
        t, tol = min([r for r in runs if r[0] == r[0]] or runs[:1])
        times[peer] = t
        if t == t:
            print(f"  {peer:22s} {t:8.3f} s  (tol {tol:g})")
        else:
            print(f"  {peer:22s}      --   (target not reached; best relative error "
                  f"{(tol - f_star) / f_star:.1e})")
    tol, warm = FITS[app]
    rows, runs, hits = {}, {}, {}
    for rep in range(repeat):  # the schedules take turns
        for sched in schedules:
            # the same trajectory every time: after the first run, stop at the target
            stop = hits[sched]["round"] + 1 if hits.get(sched) else 10**7
            t, hit, total, res = to_target(lambda **k: app.fit(X, y, lam=lam, **k), target,
                                           warm, tol=tol, max_rounds=stop, schedule=sched,
                                           time_limit=time_limit, **kw)
            old_t, old_u = rows.get(sched, (np.nan, np.nan))
            rows[sched] = (np.fmin(t, old_t), hit["updates"] if hit else old_u)  # nan: missed
            if rep == 0:
                runs[sched], hits[sched] = (res, total), hit
    for sched in schedules:
        (t, u), (res, total), hit = rows[sched], runs[sched], hits[sched]
        at = (f"target at round {hit['round']} of {res.rounds}" if hit else
              f"target not reached in {time_limit} s, {res.rounds} rounds")
        full = res.extra.get("full_rounds")
        print(f"  strads {sched:12s} {t:8.3f} s  {u:>10} updates  ({at}"
              + (f", {full} full" if full is not None else "") + f"; the whole fit: "
              f"{res.updates} updates, {total:.3f} s, {res.stop_reason})")
    if "working-set" in rows and times:
        t = rows["working-set"][0]
        print(f"  ratio strads working-set / best peer {t / np.nanmin(list(times.values())):.2f}"
              + "".join(f"   / {k} {t / v:.2f}" for k, v in times.items()))
    if "priority" in rows:
        t = rows["priority"][0]
        for sched in ("round-robin", "random"):
            if sched in rows and rows[sched][0] != rows[sched][0]:
                print(f"  priority vs {sched}: {sched} did not reach the target")
            elif sched in rows:
                print(f"  priority vs {sched}: time {t / rows[sched][0]:.2f}x, "
                      f"updates {rows['priority'][1] / rows[sched][1]:.2f}x")


def main():
    # one core per solver, peers included: BLAS must not use the second core for anyone
    from threadpoolctl import threadpool_limits

    threadpool_limits(limits=1)
    warnings.filterwarnings("ignore")  # liblinear's and saga's convergence warnings
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--app", choices=("lasso", "logreg"), default="lasso")
    ap.add_argument("--small", action="store_true")
    ap.add_argument("--mpi", action="store_true")
    ap.add_argument("--mpi-only", action="store_true")
    ap.add_argument("--no-saga", action="store_true", help="logreg: without saga")
    ap.add_argument("--repeat", type=int, default=1, metavar="N",
                    help="time every fit N times, taking turns, and report the best")
    ap.add_argument("--problems", help="which of the problems (a) to (f) to run, and "
                    "'file': (d) from LIBSVM in one process and under mpiexec (default: "
                    "all; logreg: (a) to (c)); (g) to (x), small ones in one process "
                    "(SMALL), only when named")
    args = ap.parse_args()
    k = 10 if args.small else 1
    problems = set((args.problems or "a,b,c,d,e,f,file").split(","))
    with_peers = set("abc" if args.app == "lasso" else "ab") & problems
    if with_peers and not args.mpi_only and not installed(
            "skglm", *["celer"] * (args.app == "lasso"),
            what=f"problems {','.join(sorted(with_peers))} skipped"):
        problems -= with_peers
    if not args.mpi_only:
        (peers if args.app == "lasso" else logreg_problems)(k, args.repeat, problems, args)
        if "file" in problems and args.app == "lasso":
            from_file(k, args.repeat)
    if args.mpi or args.mpi_only:
        (mpi if args.app == "lasso" else logreg_mpi)(k)


def logreg_problems(k, repeat, problems, args):
    if "a" in problems:
        X, y, _ = logreg_problem(5000 // k, 100_000 // k, density=0.002 * k,
                                 n_informative=200 // k, corr=0.5, seed=0)
        lam = logreg.lambda_max(X, y) / 20
        compare(logreg, "(a) sparse", X, y, lam, logreg_peers(X, y, lam, not args.no_saga),
                ("working-set",), repeat=repeat)
    if "b" in problems:
        X, y, _ = logreg_problem(2000 // k, 5000 // k, n_informative=200 // k, corr=0.6,
                                 dense=True, seed=0)
        lam = logreg.lambda_max(X, y) / 20
        compare(logreg, "(b) dense AR(1)", X, y, lam,
                logreg_peers(X, y, lam, not args.no_saga), ("working-set",), repeat=repeat)
    if "c" in problems:  # the STRADS schedules side by side, where they all finish
        X, y, _ = logreg_problem(1000 // k, 500 // k, n_informative=50 // k, corr=0.5,
                                 dense=True, seed=0)
        compare(logreg, "(c) Jacobi schedules, dense, block 32", X, y,
                logreg.lambda_max(X, y) / 20, time_limit=60, repeat=repeat, block=32)


def logreg_mpi(k):
    flags = ["--n-samples", str(5000 // k), "--n-features", str(100_000 // k),
             "--density", str(0.002 * k), "--n-informative", str(200 // k),
             "--lambda-ratio", "0.05", "--tol", "1e-6"]
    print(f"\n== MPI: problem (a) from the CLI, {' '.join(flags)} (loop wall_s)")
    one_and_mpi(["strads.apps.logreg", *flags])


def peers(k, repeat, problems, args):
    if "a" in problems:
        X, y, _ = make_problem(5000 // k, 200_000 // k, density=0.002 * k,
                               n_informative=200 // k, corr=0.5, seed=0)
        lam = 0.05 * lasso.lambda_max(X, y)
        compare(lasso, "(a) sparse", X, y, lam, lasso_peers(X, y, lam), repeat=repeat)
    if "b" in problems:
        X, y, _ = make_problem(2000 // k, 10_000 // k, n_informative=1000 // k, corr=0.6,
                               snr=3, dense=True, seed=0)
        lam = lasso.lambda_max(X, y) / 100
        compare(lasso, "(b) dense AR(1)", X, y, lam, lasso_peers(X, y, lam), time_limit=60,
                repeat=repeat)
    if "c" in problems:
        # the Jacobi schedules side by side, where they all finish: smaller, correlated
        X, y, _ = make_problem(500 // k, 2000 // k, n_informative=100 // k, corr=0.6,
                               snr=3, dense=True, seed=0)
        lam = lasso.lambda_max(X, y) / 20
        compare(lasso, "(c) dense AR(1), Jacobi schedules", X, y, lam,
                lasso_peers(X, y, lam), ALL[1:], repeat=repeat)
    # near-duplicate columns (issue 30): the Jacobi schedules against priority's groups
    for name, kw in CORRELATED.items():
        if name[1] in problems:
            X, y = lasso.near_duplicates(**_scaled(kw, k))
            compare(lasso, f"{name} {_describe(kw)}, Jacobi schedules", X, y,
                    lasso.lambda_max(X, y) / 10, None, ALL[1:], time_limit=30, repeat=repeat)
    # small problems in one process, where a round's fixed cost weighs most (issue 30)
    for name, (kw, div) in SMALL.items():
        if name[1] in problems:
            X, y = lasso.near_duplicates(**kw) if "group" in kw else \
                make_problem(**{"seed": 0, **kw})[:2]
            compare(lasso, f"{name} {kw}, lambda_max/{div}, Jacobi schedules", X, y,
                    lasso.lambda_max(X, y) / div, None, ALL[1:], time_limit=30,
                    repeat=repeat)


#: (make_problem's arguments, or near_duplicates' with "group", lambda_max / this):
#: (g)-(i) issue 30's, (j)-(l) others, (m)-(o) tall ones (X'X bought by the filter), (p)
#: square and strongly correlated, (q)-(t) dense with p 4-10 times n (where priority's
#: Jacobi rounds took longer than round-robin's), (u)-(x) where it lost or tied: sparse
#: at density 0.3, exact duplicates (dense), sparse and tall, thick with a support near n
SMALL = {
    "(g)": (dict(n_samples=100, n_features=2000, corr=0.0, dense=True), 10),
    "(h)": (dict(n_samples=300, n_features=3000, corr=0.3, dense=True), 10),
    "(i)": (dict(n_samples=250, n_features=5000, corr=0.6, density=0.05), 10),
    "(j)": (dict(n_samples=1000, n_features=20_000, corr=0.0, density=0.005,
                 n_informative=50), 20),
    "(k)": (dict(n_samples=60, n_features=600, corr=0.9, dense=True, n_informative=10), 5),
    "(l)": (dict(n_samples=2000, n_features=300, corr=0.5, dense=True), 50),
    "(m)": (dict(n_samples=5000, n_features=100, corr=0.5, dense=True), 50),
    "(n)": (dict(n_samples=4000, n_features=600, group=4, noise=0.05, n_informative=30,
                 dense=True), 20),
    "(o)": (dict(n_samples=20_000, n_features=500, corr=0.5, density=0.02), 50),
    "(p)": (dict(n_samples=1000, n_features=1000, corr=0.7, dense=True), 30),
    "(q)": (dict(n_samples=200, n_features=2000, corr=0.3, dense=True, seed=1), 10),
    "(r)": (dict(n_samples=250, n_features=2500, corr=0.0, dense=True, seed=3), 10),
    "(s)": (dict(n_samples=500, n_features=2000, corr=0.3, dense=True, seed=6), 10),
    "(t)": (dict(n_samples=200, n_features=2000, corr=0.3, dense=True, seed=7), 30),
    "(u)": (dict(n_samples=1000, n_features=3000, density=0.3), 10),
    "(v)": (dict(n_samples=400, n_features=2000, group=4, noise=0.0, dense=True), 20),
    "(w)": (dict(n_samples=20_000, n_features=300, density=0.05), 20),
    "(x)": (dict(n_samples=600, n_features=2500, density=0.25, corr=0.3, seed=4), 100),
}


#: the correlated problems: groups of near-duplicate columns (lasso.near_duplicates),
#: lambda_max / 10; (d) is issue 30's
CORRELATED = {
    "(d)": dict(n_samples=1500, n_features=20_000, group=4, density=0.01, noise=0.01),
    "(e)": dict(n_samples=3000, n_features=40_000, group=8, density=0.005, noise=0.1),
    "(f)": dict(n_samples=1000, n_features=2000, group=2, noise=0.01, dense=True),
}


def _scaled(kw, k):
    return dict(kw, n_samples=kw["n_samples"] // k, n_features=kw["n_features"] // k,
                n_informative=100 // k)


def _describe(kw):
    kind = "dense" if kw.get("dense") else "sparse"
    return (f"{kind} {kw['n_samples']:,} x {kw['n_features']:,}, near-duplicate groups of "
            f"{kw['group']}, noise {kw['noise']}")


def from_file(k, repeat=1):
    """Issue 30's target: (d) read from LIBSVM (the workers' filter), priority to
    f*(1 + RTOL) within 120 s, in one process with 3 workers and under mpiexec -n 4;
    times from trace.csv (the loop's, at the first round at target) and of the whole
    command."""
    from sklearn.datasets import dump_svmlight_file

    X, y = lasso.near_duplicates(**_scaled(CORRELATED["(d)"], k))
    lam = lasso.lambda_max(X, y) / 10
    target = strads_star(lasso, X, y, lam) * (1 + RTOL)
    print(f"\n== (d) from LIBSVM, priority, target f*(1+{RTOL:g}), --time-limit 120")
    with tempfile.TemporaryDirectory() as tmp:
        path = str(Path(tmp) / "d.svm")
        dump_svmlight_file(X, y, path)
        for rep in range(repeat):
            for np_ in (0, 4):
                w, r, t, s = file_run(path, lam, "priority", np_, 120, target, tmp)
                at = f"round {r}, {w:.3f} s" if w == w else "not reached"
                sent = max(r["bytes_sent"] for r in s["traffic"])
                how = f"mpiexec -n {np_}" if np_ else "one process, 3 workers"
                print(f"  {how:24s} target at {at}; {s['rounds']} rounds to gap "
                      f"{s['duality_gap']:.2g} ({s['stop_reason']}), loop {s['wall_s']:.3f} "
                      f"s, whole command {t:.2f} s, most bytes a rank sent {sent:,}")


def file_run(path, lam, sched, np_, limit, target, tmp):
    """The CLI on the LIBSVM file ``path`` (``--workers 3``, or under ``mpiexec -n np_``)
    to tol 1e-10 or ``limit`` seconds -> (the loop's seconds at the first round at
    ``target``, else nan; that round, else the rounds run; the whole command's seconds;
    its summary)."""
    flags = ["strads.apps.lasso", "--data", path, "--schedule", sched, "--lambda",
             repr(lam), "--tol", "1e-10", "--time-limit", str(limit), "--log-interval", "0",
             "--max-rounds", str(10**8)] + ([] if np_ else ["--workers", "3"])
    out = Path(tmp) / "out"
    t0 = time.perf_counter()
    try:
        s = run_cli(flags, out, np_, stderr=subprocess.DEVNULL)
    except subprocess.CalledProcessError:  # (diverged: exit 3, its outputs written)
        s = json.loads((out / "summary.json").read_text())
    whole = time.perf_counter() - t0
    tr = read_trace(out / "trace.csv")
    hit = np.flatnonzero(tr["objective"] <= target)[:1]
    if hit.size:
        return tr["wall_s"][hit[0]], int(tr["round"][hit[0]]), whole, s
    return float("nan"), s["rounds"], whole, s


def mpi(k):
    # problem (b) with 10x the samples: dense 20,000 x 10,000 (1.6 GB)
    flags = ["--dense", "--n-samples", str(20_000 // k), "--n-features", str(10_000 // k),
             "--n-informative", str(1000 // k), "--corr", "0.6", "--snr", "3",
             "--lambda-ratio", "0.01", "--tol", "1e-6"]
    print(f"\n== MPI: problem (b) x10 samples, {' '.join(flags)} (loop wall_s)")
    one_and_mpi(["strads.apps.lasso", *flags])
    print("== default problem, whole mpiexec command (start-up included):")
    base = None
    for n in (3, 8, 16):
        t, res = timed_cli(["strads.apps.lasso"], np=n)
        base = base or t
        print(f"  mpiexec -n {n:2d}: {t:.2f} s (loop {res['wall_s']:.3f} s, "
              f"{res['rounds']} rounds): {t / base:.2f}x of -n 3")


if __name__ == "__main__":
    main()
