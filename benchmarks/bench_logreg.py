"""Sparse logistic regression: time to reach f* (1 + 1e-6), side by side with skglm and
scikit-learn (liblinear, saga). Method and figures: docs/benchmarks.md."""
import argparse
import warnings

import numpy as np

from _common import one_and_mpi, peer_time, to_target
from strads.apps import logreg
from strads.apps.logreg.data import make_problem

RTOL = 1e-6


def ours(X, y, lam, target, time_limit=120, **kw):
    """-> (seconds to target, the whole fit's seconds, result)."""
    t, _, total, res = to_target(lambda **k: logreg.fit(X, y, lam=lam, **k), target,
                                 {"tol": 1e-3}, tol=RTOL, max_rounds=10**7,
                                 time_limit=time_limit, **kw)
    return t, total, res


def compare(name, X, y, lam, schedules=("working-set",), time_limit=120, saga=True):
    from skglm import SparseLogisticRegression
    from sklearn.linear_model import LogisticRegression

    n = X.shape[0]

    def liblinear(tol, max_iter=1000):
        return LogisticRegression(penalty="l1", solver="liblinear", C=1 / (n * lam),
                                  fit_intercept=False, tol=tol, max_iter=max_iter)

    def glm(tol):
        return SparseLogisticRegression(alpha=lam, fit_intercept=False, tol=tol,
                                        max_iter=100)

    def sag(tol):
        return LogisticRegression(penalty="l1", solver="saga", C=1 / (n * lam),
                                  fit_intercept=False, tol=tol, max_iter=100)

    glm(1e-2).fit(X[:50], y[:50])  # numba warm-up of skglm
    ref = liblinear(1e-10, 100).fit(X, y)  # (bounded: it may spin on rounding)
    refs = {"liblinear": logreg.objective(X, y, ref.coef_.ravel(), lam),
            "skglm": logreg.objective(X, y, glm(1e-10).fit(X, y).coef_.ravel(), lam)}
    logreg.fit(X, y, lam=lam, tol=1e-3, quiet=True)
    refs["strads"] = logreg.fit(X, y, lam=lam, tol=1e-10, quiet=True).objective
    f_star = min(refs.values())
    target = f_star * (1 + RTOL)
    print(f"\n== {name}: X {X.shape}" + (f", {X.nnz:,} non-zeros" if hasattr(X, "nnz")
                                          else "") +
          f", lambda {lam:.4g} (lambda_max / {logreg.lambda_max(X, y) / lam:.0f}), "
          f"target f*(1+{RTOL:g}), f* = {f_star:.12g} (from {min(refs, key=refs.get)})")
    peers = {"skglm": glm, "liblinear": liblinear, **({"saga": sag} if saga else {})}
    peers = {k: peer_time(make, lambda w: logreg.objective(X, y, w, lam), X, y, target,
                          60.0 if k == "saga" else 120.0) for k, make in peers.items()}
    for peer, (t, tol) in peers.items():
        if t == t:
            print(f"  {peer:22s} {t:8.3f} s  (tol {tol:g})")
        else:
            print(f"  {peer:22s}      --   (target not reached; best relative error "
                  f"{(tol - f_star) / f_star:.1e})")
    rows = {}
    for sched in schedules:
        t, total, res = ours(X, y, lam, target, schedule=sched, time_limit=time_limit)
        rows[sched] = t
        note = "" if t == t else f"  (target not reached in {time_limit} s)"
        print(f"  strads {sched:15s} {t:8.3f} s  ({res.rounds} rounds, "
              f"{res.extra['full_rounds']} full; whole fit to gap <= {RTOL:g} f: "
              f"{total:.3f} s, {res.stop_reason}){note}")
    best = np.nanmin([t for t, _ in peers.values()])
    for sched, t in rows.items():
        print(f"  ratio strads {sched} / best peer {t / best:.2f}   / skglm "
              f"{t / peers['skglm'][0]:.2f}   / liblinear {t / peers['liblinear'][0]:.2f}")


def jacobi(k):
    """The STRADS schedules side by side, where they all finish: a small dense problem."""
    X, y, _ = make_problem(1000 // k, 500 // k, n_informative=50 // k, corr=0.5,
                           dense=True, seed=0)
    lam = logreg.lambda_max(X, y) / 20
    logreg.fit(X, y, lam=lam, tol=1e-3, quiet=True)
    f_star = logreg.fit(X, y, lam=lam, tol=1e-10, quiet=True).objective
    target = f_star * (1 + RTOL)
    print(f"\n== (c) Jacobi schedules: dense X {X.shape}, lambda_max / 20, block 32")
    for sched in ("working-set", "priority", "round-robin", "random"):
        t, total, res = ours(X, y, lam, target, schedule=sched, block=32, time_limit=60)
        print(f"  strads {sched:12s} {t:8.3f} s  {res.updates:>9} updates  "
              f"({res.rounds} rounds; to the gap: {total:.2f} s, {res.stop_reason})")


def main():
    from threadpoolctl import threadpool_limits

    threadpool_limits(limits=1)
    warnings.filterwarnings("ignore")  # liblinear's and saga's convergence warnings
    ap = argparse.ArgumentParser()
    ap.add_argument("--small", action="store_true")
    ap.add_argument("--no-saga", action="store_true")
    ap.add_argument("--mpi", action="store_true")
    args = ap.parse_args()
    k = 10 if args.small else 1
    X, y, _ = make_problem(5000 // k, 100_000 // k, density=0.002 * k,
                           n_informative=200 // k, corr=0.5, seed=0)
    compare("(a) sparse", X, y, logreg.lambda_max(X, y) / 20, saga=not args.no_saga)
    X, y, _ = make_problem(2000 // k, 5000 // k, n_informative=200 // k, corr=0.6,
                           dense=True, seed=0)
    compare("(b) dense AR(1)", X, y, logreg.lambda_max(X, y) / 20, saga=not args.no_saga)
    jacobi(k)
    if args.mpi:
        flags = ["--n-samples", str(5000 // k), "--n-features", str(100_000 // k),
                 "--density", str(0.002 * k), "--n-informative", str(200 // k),
                 "--lambda-ratio", "0.05", "--tol", "1e-6"]
        print(f"\n== MPI: problem (a) from the CLI, {' '.join(flags)} (loop wall_s)")
        one_and_mpi(["strads.apps.logreg", *flags])


if __name__ == "__main__":
    main()
