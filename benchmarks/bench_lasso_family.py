"""Issue 30's general case: a family of sparse problems with near-duplicate columns,
written as LIBSVM text and solved by the CLI (``python -m strads.apps.lasso --data``) with
priority, round-robin and random, in one process with 3 workers and under
``mpiexec -n 4``: time (the loop's, from trace.csv) and rounds to f*(1 + 1e-6), f* the
least of strads' working-set at tol 1e-13 and skglm's objective at tol 1e-10. Results:
docs/scaling.md's end."""
import argparse
import json
import tempfile
from pathlib import Path

import numpy as np
import scipy.sparse as sp

from bench_lasso import RTOL, file_run, strads_star
from strads.apps import lasso

#: name -> (near_duplicates' arguments and this script's: ``skew`` (log-normal sigma of
#: the columns' scales), ``binary`` (0/1 values; a duplicate drops each of its base's
#: entries with probability ``noise`` and adds as many elsewhere), ``mixed`` (group sizes
#: drawn from 2, 3, 4, 6, 8), ``shuffle`` (columns in random order), ``positive`` (|values|)), lambda_max / this
FAMILY = {
    "g2": (dict(group=2, density=0.01, noise=0.01), 10),
    "g3": (dict(group=3, density=0.005, noise=0.05), 5),
    "g4": (dict(group=4, density=0.01, noise=0.01), 100),
    "g6": (dict(group=6, density=0.02, noise=0.01), 30),
    "g8": (dict(group=8, density=0.01, noise=0.001), 20),
    "mix": (dict(mixed=True, density=0.01, noise=0.01, shuffle=True), 10),
    "skew": (dict(group=4, density=0.01, noise=0.02, skew=1.0), 20),
    "bin": (dict(group=4, density=0.01, noise=0.05, binary=True), 10),
    "bin8": (dict(group=8, density=0.003, noise=0.02, binary=True, shuffle=True), 50),
    "tall": (dict(n_samples=3000, n_features=10_000, group=6, density=0.01, noise=0.01), 10),
    "wide": (dict(n_samples=1000, n_features=30_000, group=3, density=0.02, noise=0.01),
             20),
    "g8h": (dict(group=8, density=0.01, noise=0.001), 100),
    "g6h": (dict(group=6, density=0.02, noise=0.01, skew=1.0, shuffle=True), 100),
    "dup": (dict(group=4, density=0.01, noise=0.0), 20),
    "binh": (dict(group=4, density=0.01, noise=0.05, binary=True), 100),
    "bind": (dict(group=4, density=0.1, noise=0.05, binary=True), 10),
    "pos": (dict(group=4, density=0.05, noise=0.02, positive=True), 20),
    "dup8": (dict(group=8, density=0.01, noise=0.0), 20),
    "g16": (dict(group=16, density=0.01, noise=0.01), 10),
    "g4l": (dict(group=4, density=0.01, noise=0.01), 2),
    "g4k": (dict(group=4, density=0.01, noise=0.01), 1000),
    "skew2": (dict(group=4, density=0.01, noise=0.02, skew=2.0, shuffle=True), 20),
    "tallsp": (dict(n_samples=10_000, n_features=2000, group=4, density=0.01, noise=0.01),
               20),
    "thick": (dict(n_samples=1000, n_features=4000, group=2, density=0.2, noise=0.05), 10),
    "big": (dict(n_samples=5000, n_features=50_000, group=4, density=0.004, noise=0.01),
            10),
}


SLOW = ("g4k", "big")  # (g4k: f* alone, working-set at tol 1e-13, took 15 minutes)


def make(kw, seed=0):
    """A family member: (X CSC, y)."""
    kw = dict(kw)
    skew, binary = kw.pop("skew", 0.0), kw.pop("binary", False)
    mixed, shuffle = kw.pop("mixed", False), kw.pop("shuffle", False)
    positive = kw.pop("positive", False)
    n, p = kw.pop("n_samples", 1500), kw.pop("n_features", 20_000)
    rng = np.random.default_rng(seed + 1)
    if mixed or binary:
        X = _groups(n, p, rng, kw["density"], kw["noise"], binary, kw.get("group"))
    else:
        X, _ = lasso.near_duplicates(n, p, seed=seed, **kw)
    if positive:
        X.data = np.abs(X.data)
    if skew:
        X = X @ sp.diags(np.exp(skew * rng.standard_normal(X.shape[1])))
    if shuffle:
        X = X[:, rng.permutation(X.shape[1])]
    X = sp.csc_matrix(X)
    X.sort_indices()
    w = np.zeros(X.shape[1])
    idx = rng.choice(X.shape[1], 100, replace=False)
    w[idx] = rng.standard_normal(100)
    y = X @ w + 0.1 * rng.standard_normal(n)
    return X, y


def _groups(n, p, rng, density, noise, binary, group):
    """Groups of near-duplicates, sizes ``group`` or drawn from 2, 3, 4, 6, 8."""
    cols, j = [], 0
    while j < p:
        k = min(group or int(rng.choice([2, 3, 4, 6, 8])), p - j)
        nnz = max(1, rng.binomial(n, density))
        rows = rng.choice(n, nnz, replace=False)
        vals = np.ones(nnz) if binary else rng.standard_normal(nnz)
        for _ in range(k):
            if binary:
                keep = rng.random(nnz) >= noise
                extra = rng.choice(n, nnz - keep.sum(), replace=False)
                r = np.union1d(rows[keep], extra)
                cols.append((r, np.ones(r.shape[0])))
            else:
                cols.append((rows, vals + noise * rng.standard_normal(nnz)))
        j += k
    indptr = np.concatenate([[0], np.cumsum([r.shape[0] for r, _ in cols])])
    return sp.csc_matrix((np.concatenate([v for _, v in cols]),
                          np.concatenate([r for r, _ in cols]), indptr), shape=(n, p))


def f_star(X, y, lam):
    """The least of strads' working-set at tol 1e-13 and skglm's at tol 1e-10."""
    best = strads_star(lasso, X, y, lam)
    try:
        from skglm import Lasso
        m = Lasso(alpha=lam, fit_intercept=False, tol=1e-10, max_iter=1000).fit(X, y)
        best = min(best, lasso.objective(X, y, m.coef_, lam))
    except ImportError:
        pass
    return best


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--problems", default=",".join(k for k in FAMILY if k not in SLOW),
                    help=f"of {', '.join(FAMILY)} (default: all but {', '.join(SLOW)})")
    ap.add_argument("--schedules", default="priority,round-robin,random")
    ap.add_argument("--modes", default="1,4", help="1: one process, 3 workers; "
                    "4: mpiexec -n 4")
    ap.add_argument("--limit", type=float, default=120, help="priority's --time-limit")
    ap.add_argument("--baseline-limit", type=float, default=20,
                    help="round-robin's and random's --time-limit")
    ap.add_argument("--seed", type=int, default=0, help="of the problems")
    ap.add_argument("--json", help="append one line a run here")
    args = ap.parse_args()
    modes = [int(m) for m in args.modes.split(",")]
    for name in args.problems.split(","):
        kw, div = FAMILY[name]
        X, y = make(kw, args.seed)
        lam = lasso.lambda_max(X, y) / div
        target = f_star(X, y, lam) * (1 + RTOL)
        print(f"\n== {name}: {kw}, X {X.shape}, {X.nnz:,} non-zeros, lambda_max/{div}",
              flush=True)
        with tempfile.TemporaryDirectory() as tmp:
            from sklearn.datasets import dump_svmlight_file
            path = str(Path(tmp) / f"{name}.svm")
            dump_svmlight_file(X, y, path)
            for mode in modes:
                res = {}
                for sched in args.schedules.split(","):
                    limit = args.limit if sched == "priority" else args.baseline_limit
                    t, r, whole, s = file_run(path, lam, sched, 4 if mode == 4 else 0,
                                              limit, target, tmp)
                    res[sched] = t
                    how = "mpiexec -n 4" if mode == 4 else "3 workers"
                    at = f"{t:8.3f} s, round {r:6d}" if t == t else \
                        f"   -- (not in {limit:g} s, {r} rounds)"
                    print(f"  {how:13s} {sched:12s} {at}; whole command {whole:6.2f} s, "
                          f"{s['stop_reason']}", flush=True)
                    if args.json:
                        with open(args.json, "a") as f:
                            f.write(json.dumps(dict(problem=name, mode=mode, sched=sched,
                                                    t=t, rounds=r, whole=whole)) + "\n")
                p = res.get("priority")
                for b in ("round-robin", "random"):
                    if b in res and p is not None:
                        ratio = "baseline missed" if res[b] != res[b] else \
                            f"{p / res[b]:.2f}x"
                        print(f"    priority / {b}: {ratio}")


if __name__ == "__main__":
    main()
