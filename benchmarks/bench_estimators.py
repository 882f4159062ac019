"""The GLM estimators against scikit-learn, side by side in one run (issue 29).
Method and figures: docs/benchmarks.md."""
import argparse
import time
import warnings

import numpy as np
import scipy.sparse as sp
from sklearn import linear_model as sk
from sklearn.base import clone
from sklearn.model_selection import GridSearchCV, KFold

from _common import TOLS, best_of, l1_logistic, timed
import strads
from strads.apps.lasso.data import make_zipf_problem


#: --problem: Zipf problems unlike the default one (issue 29's imbalanced losers, with
#: --label-quantile 0.9 or 0.98); each overrides --small's shape
PROBLEMS = {"zipf": {}, "2k": dict(n=2000, p=8000, seed=5), "3k": dict(n=3000, p=8000, seed=7),
            "5k": dict(n=5000, p=20000, per_row=30, seed=12),
            "interp": dict(n=500, p=2000, n_informative=2000, seed=3)}


def lasso_objective(X, y, est, alpha):
    r = y - X @ np.ravel(est.coef_) - est.intercept_
    return 0.5 * float(r @ r) / X.shape[0] + alpha * float(np.abs(est.coef_).sum())


def logreg_objective(X, s, est, alpha, scaling):
    """(1/n) sum log(1 + exp(-s (Xw + c))) + alpha (|w|_1 + |c| / scaling)."""
    z = s * (X @ np.ravel(est.coef_) + est.intercept_[0])
    return float(np.logaddexp(0, -z).mean()) + alpha * (
        float(np.abs(est.coef_).sum()) + abs(float(est.intercept_[0])) / scaling)


def dense_problem(n, p, seed=0):
    """Dense columns sharing a factor (correlation about 0.12), y = X w + 5 + noise with
    50 non-zeros in w; and alpha_max with an intercept."""
    rng = np.random.default_rng(seed)
    X = 0.8 * rng.standard_normal((n, p)) + 0.3 * rng.standard_normal((n, 1))
    w = np.zeros(p)
    w[rng.choice(p, 50, replace=False)] = rng.standard_normal(50)
    y = X @ w + 5.0 + 0.5 * rng.standard_normal(n)
    return X, y, np.abs((X - X.mean(axis=0)).T @ (y - y.mean())).max() / n


def side_by_side(title, a, b, X, y, repeat, objective=None, names=("strads", "sklearn")):
    """Estimators (fitted as fresh clones) or functions of (X, y) ``a`` and ``b``, timed
    alternately, the best of ``repeat`` each."""
    def run(m):
        t, est = timed(lambda: clone(m).fit(X, y) if hasattr(m, "fit") else m(X, y))
        return {"wall_s": t, "est": est}
    times, best = best_of(repeat, {k: lambda m=m: run(m) for k, m in zip(names, (a, b))})
    (a, b), (ta, tb) = times, [min(v) for v in times.values()]
    line = f"{title:<44} {a} {ta:8.2f} s  {b} {tb:8.2f} s  ratio {ta / tb:6.2f}"
    if objective is not None:
        ra, rb = best[a]["est"], best[b]["est"]
        fa, fb = objective(ra), objective(rb)
        low = min(fa, fb)
        line += f"  objective {fa:.10g} / {fb:.10g} (excess {fa / low - 1:.1e} / " \
                f"{fb / low - 1:.1e})  nnz {np.count_nonzero(ra.coef_)} / " \
                f"{np.count_nonzero(rb.coef_)}"
    print(line, flush=True)
    return ta, objective(best[a]["est"]) if objective is not None else None


def same_optimum(ta, target, make, X, y, objective, budget=120.0):
    """scikit-learn to strads' optimum: its fits ``make(tol)`` (max_iter unbounded) at
    decreasing tols, timed to the first whose objective is within 1e-6 of ``target``
    (strads' own tol), against strads' ``ta`` seconds (issue 29's "the same optimum")."""
    spent = 0.0
    for tol in TOLS:
        t, est = timed(lambda: make(tol).fit(X, y))
        spent += t
        if objective(est) <= target * (1 + 1e-6) or spent > budget:
            break
    reached = objective(est) <= target * (1 + 1e-6)
    print(f"  sklearn to strads' objective (+1e-6): {t:.2f} s at tol {tol:g}, n_iter "
          f"{est.n_iter_}, ratio {ta / t if reached else float('nan'):.2f}"
          f"{'' if reached else ' (not reached)'}", flush=True)


def liblinear(n, a, scaling, **kw):
    """scikit-learn's L1 logistic regression at strads' alpha ``a`` (C = 1 / (n a))."""
    return l1_logistic(solver="liblinear", C=1 / (n * a), intercept_scaling=scaling, **kw)


def logreg_cpu(X, labels, alphas, scaling, folds):
    """The logreg grid's fits one by one: CPU seconds (time.process_time: the machine may
    be shared) of strads then liblinear on each training fold (``folds`` 0: all rows),
    each fit's objective excess over the lower of the two, and the totals."""
    splits = list(KFold(folds).split(X)) if folds else [(np.arange(X.shape[0]), None)]
    total = np.zeros(2)
    for f, (train, _) in enumerate(splits):
        Xt, lt = X[train], labels[train]
        s, n = np.where(lt, 1.0, -1.0), Xt.shape[0]
        for a in alphas:
            est, t = [], []
            for make in (lambda: strads.SparseLogisticRegression(
                    alpha=a, intercept_scaling=scaling), lambda: liblinear(n, a, scaling)):
                t0 = time.process_time()
                est.append(make().fit(Xt, lt))
                t.append(time.process_time() - t0)
            obj = [logreg_objective(Xt, s, e, a, scaling) for e in est]
            total += t
            print(f"fold {f} alpha {a:.2e}  strads {t[0]:6.3f} s  liblinear {t[1]:6.3f} s"
                  f"  excess {obj[0] / min(obj) - 1:.1e} / {obj[1] / min(obj) - 1:.1e}"
                  f"  nnz {np.count_nonzero(est[0].coef_)}", flush=True)
    print(f"CPU total  strads {total[0]:.2f} s  liblinear {total[1]:.2f} s  ratio "
          f"{total[0] / total[1]:.2f}", flush=True)


def dense_cpu(repeat):
    """Small dense fits (issue 29's 1,000 x 300, 3,000 x 1,000, 500 x 2,000) at alpha_max
    / 10 and / 100: each pair's CPU seconds (time.process_time, strads then scikit-learn,
    alternately, the best of ``repeat``), the ratio and each objective's excess."""
    total = np.zeros(2)
    for n, p in ((1000, 300), (3000, 1000), (500, 2000)):
        X, y, amax = dense_problem(n, p)
        labels = y > np.median(y)
        s = np.where(labels, 1.0, -1.0)
        lmax = np.abs((X - X.mean(axis=0)).T @ (labels - labels.mean())).max() / n
        for ratio in (10, 100):
            a = amax / ratio
            la = lmax / ratio
            for name, pair, obj in (
                    ("Lasso", (strads.Lasso(alpha=a), sk.Lasso(alpha=a)), lambda e, y=y, a=a:
                     lasso_objective(X, y, e, a)),
                    ("logreg", (strads.SparseLogisticRegression(alpha=la, intercept_scaling=
                                100.0), liblinear(n, la, 100.0)), lambda e, la=la:
                     logreg_objective(X, s, e, la, 100.0))):
                target = y if name == "Lasso" else labels
                t, est = [np.inf, np.inf], [None, None]
                for _ in range(repeat):
                    for k, m in enumerate(pair):
                        t0 = time.process_time()
                        e = clone(m).fit(X, target)
                        t[k] = min(t[k], time.process_time() - t0)
                        est[k] = e
                f = [obj(e) for e in est]
                total += t
                print(f"{name:6} dense {n} x {p} alpha_max/{ratio}  strads {t[0] * 1e3:7.1f} "
                      f"ms  sklearn {t[1] * 1e3:7.1f} ms  ratio {t[0] / t[1]:5.2f}  excess "
                      f"{f[0] / min(f) - 1:.1e} / {f[1] / min(f) - 1:.1e}", flush=True)
    print(f"CPU total  strads {total[0]:.2f} s  sklearn {total[1]:.2f} s  ratio "
          f"{total[0] / total[1]:.2f}", flush=True)


def cpu_fit(m, X, y, repeat, fits=1):
    """A fresh clone of ``m`` fitted ``fits`` times, ``repeat`` times: (the least CPU
    seconds a fit, time.process_time: the machine may be shared; the last fit)."""
    best = np.inf
    for _ in range(repeat):
        t0 = time.process_time()
        for _ in range(fits):
            est = clone(m).fit(X, y)
        best = min(best, (time.process_time() - t0) / fits)
    return best, est


def small_cpu(repeat, fits=20):
    """Small Lasso fits, where a fit's fixed cost and its rounds weigh (issue 29): diabetes
    (442 x 10) and a tall Zipf 10,000 x 5,000 (10 a row), with and without intercept; CPU
    ms a fit (the mean of ``fits``), strads then scikit-learn, the best of ``repeat``."""
    from sklearn.datasets import load_diabetes

    Xz, yz = make_zipf_problem(n=10000, p=5000, per_row=10, n_informative=2000, seed=4)
    for name, X, y, a, fi in (("diabetes 442 x 10", *load_diabetes(return_X_y=True), 0.1, True),
                              ("Zipf 10,000 x 5,000", Xz, yz, 1e-3, False),
                              ("Zipf 10,000 x 5,000", Xz, yz, 1e-3, True)):
        t = [cpu_fit(m, X, y, repeat, fits)[0] for m in (
            strads.Lasso(alpha=a, fit_intercept=fi), sk.Lasso(alpha=a, fit_intercept=fi))]
        print(f"Lasso {name} alpha {a:g} fit_intercept={fi}  strads {t[0] * 1e3:7.3f} ms  "
              f"sklearn {t[1] * 1e3:7.3f} ms  ratio {t[0] / t[1]:5.2f}", flush=True)


#: issue 29's sweep: Zipf problems of several aspects (make_zipf_problem's arguments)
SWEEP = [dict(n=3000, p=1000, per_row=20, n_informative=100, seed=1),
         dict(n=2000, p=20000, per_row=60, n_informative=1000, seed=2),
         dict(n=800, p=10000, per_row=100, n_informative=300, seed=3),
         dict(n=10000, p=5000, per_row=10, n_informative=2000, seed=4),
         dict(n=300, p=50000, per_row=200, n_informative=50, seed=5)]


def sweep_cpu(repeat):
    """Issue 29's sweep, one fit's CPU seconds (the best of ``repeat``), strads then the
    peer, and each objective's excess over the lower: the Lasso (with and without
    intercept) on the SWEEP problems at alpha 1e-3, 1e-4, 1e-5; logistic regression
    (labels y > median) against liblinear on three of them, a uniform sparse 1,000 x
    5,000 and a dense 500 x 300, at alpha_max / 10, 100 and 1,000. Where one stopped
    more than 1e-6 above the other's objective, also its time to that objective."""
    def row(label, pair, X, y, objective):
        t, f = zip(*((t, objective(e)) for t, e in (cpu_fit(m, X, y, repeat) for m in pair)))
        print(f"{label:<40} strads {t[0] * 1e3:8.1f} ms  peer {t[1] * 1e3:8.1f} ms  ratio "
              f"{t[0] / t[1]:5.2f}  excess {f[0] / min(f) - 1:.1e} / {f[1] / min(f) - 1:.1e}",
              flush=True)
        # the same optimum: the one that stopped short, again at smaller tols (max_iter
        # unbounded, one fit each, 60 s at most) until within 1e-6 of the other's objective
        short, spent = int(f[1] > f[0]), 0.0
        ts = t[short]  # (fits over a few seconds: timed once)
        if f[short] > f[1 - short] * (1 + 1e-6):
            for tol in (tol for tol in TOLS if tol < pair[short].tol):
                m = clone(pair[short]).set_params(tol=tol, max_iter=10**7)
                ts, e = cpu_fit(m, X, y, repeat if ts * repeat < 5 else 1)
                spent += ts
                reached = objective(e) <= f[1 - short] * (1 + 1e-6)
                if reached or spent > 60:
                    break
            tt = list(t)
            tt[short] = ts if reached else float("nan")
            print(f"{'':<40} the same optimum: {('strads', 'peer')[short]} {ts * 1e3:.1f} ms"
                  f" at tol {tol:g}{'' if reached else ' (not reached)'}, ratio "
                  f"{tt[0] / tt[1]:5.2f}", flush=True)

    zipf = [make_zipf_problem(**kw) for kw in SWEEP]
    for (X, y), (n, p) in zip(zipf, [(kw["n"], kw["p"]) for kw in SWEEP]):
        for a in (1e-3, 1e-4, 1e-5):
            for fi in (True, False):
                row(f"Lasso {n} x {p} alpha {a:g} intercept {fi}",
                    (strads.Lasso(alpha=a, fit_intercept=fi), sk.Lasso(alpha=a, fit_intercept=fi)),
                    X, y, lambda e, X=X, y=y, a=a: lasso_objective(X, y, e, a))
    rng = np.random.default_rng(6)
    U = sp.random(1000, 5000, density=0.01, random_state=6, format="csc")
    yu = U @ (rng.standard_normal(5000) * (rng.random(5000) < 0.04)) + rng.standard_normal(1000)
    D = rng.standard_normal((500, 300))
    for name, (X, y) in (("Zipf 3,000 x 1,000", zipf[0]), ("Zipf 2,000 x 20,000", zipf[1]),
                         ("Zipf 10,000 x 5,000", zipf[3]), ("uniform 1,000 x 5,000", (U, yu)),
                         ("dense 500 x 300", (D, rng.standard_normal(500)))):
        labels = y > np.median(y)
        s, n = np.where(labels, 1.0, -1.0), X.shape[0]
        amax = float(np.abs(X.T @ s).max()) / (2 * n)
        for ratio in (10, 100, 1000):
            a = amax / ratio
            row(f"logreg {name} alpha_max/{ratio}", (strads.SparseLogisticRegression(
                alpha=a, intercept_scaling=100.0), liblinear(n, a, 100.0)), X, labels,
                lambda e, X=X, s=s, a=a: logreg_objective(X, s, e, a, 100.0))


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cases", default="fit,grid,path,logreg",
                    help="comma-separated, of fit, grid, path, logreg, dense (2,000 x "
                    "500 and 500 x 5,000 dense, small alphas), densepath (lasso_path, "
                    "200 x 50, 2,000 x 500, 500 x 2,000 and 200 x 10,000 dense) and "
                    "densecpu (Lasso and logreg fits' CPU time, 1,000 x 300, 3,000 x "
                    "1,000 and 500 x 2,000 dense), smallcpu (small Lasso fits' CPU time: "
                    "diabetes, a tall Zipf), sweep (issue 29's: the Lasso on five Zipf "
                    "shapes, logreg on five problems, CPU); with logreg, logregcv: "
                    "SparseLogisticRegressionCV against LogisticRegressionCV (default: "
                    "%(default)s)")
    ap.add_argument("--repeat", type=int, default=1, help="time each fit N times "
                    "and report the best (default: 1)")
    ap.add_argument("--small", action="store_true", help="1,500 x 6,000 instead")
    ap.add_argument("--problem", choices=PROBLEMS, default="zipf",
                    help="2k: 2,000 x 8,000, 3k: 3,000 x 8,000, 5k: 5,000 x 20,000 "
                    "(30 draws a row), other seeds; interp: 500 x 2,000, every column "
                    "informative (near interpolation at small alphas)")
    ap.add_argument("--same-optimum", action="store_true", help="fit: also scikit-learn "
                    "to strads' objective (at decreasing tols, max_iter unbounded)")
    ap.add_argument("--alpha", type=float, default=1e-5, help="the Lasso's (fit)")
    ap.add_argument("--cpu-folds", type=int, default=None, metavar="K",
                    help="logreg: instead of wall time, each grid fit's CPU seconds, "
                    "strads then liblinear on each of KFold(K)'s training sets (0: all "
                    "rows, alphas 1e-3, 1e-4, 1e-5)")
    ap.add_argument("--label-quantile", type=float, default=0.5, metavar="Q",
                    help="logreg: the positive class is y above its Q-quantile (0.9: "
                    "one sample in ten)")
    args = ap.parse_args(argv)
    cases = set(args.cases.split(","))
    warnings.filterwarnings("ignore", module="sklearn")  # (the peers' loose fits' warnings)
    if cases == {"densecpu"}:  # (no Zipf problem needed)
        for n, p in ((200, 60), (400, 300)):  # JIT compilation: one Gram, working sets
            strads.Lasso(alpha=0.1).fit(*dense_problem(n, p)[:2])
        Xc, yc, _ = dense_problem(200, 60)
        strads.SparseLogisticRegression().fit(Xc, yc > np.median(yc))
        return dense_cpu(args.repeat)
    if cases == {"sweep"}:
        Xw, yw = make_zipf_problem(n=200, p=500)  # (numba's cache loaded, not timed)
        for Xa in (Xw, Xw.toarray()):
            strads.Lasso(alpha=0.01).fit(Xa, yw)
            strads.SparseLogisticRegression().fit(Xa, yw > np.median(yw))
        return sweep_cpu(args.repeat)
    if cases == {"smallcpu"}:
        strads.Lasso(alpha=0.1).fit(*dense_problem(200, 60)[:2])  # (JIT, not timed)
        return small_cpu(args.repeat)
    shape = dict(n=1500, p=6000) if args.small else {}
    X, y = make_zipf_problem(**{**shape, **PROBLEMS[args.problem]})
    print(f"X {X.shape[0]} x {X.shape[1]}, {X.nnz} non-zeros, "
          f"{int((np.diff(X.indptr) > 0).sum())} non-empty columns", flush=True)
    strads.Lasso(alpha=0.1).fit(X[:200], y[:200])  # JIT compilation, not timed
    strads.SparseLogisticRegression().fit(X[:200], y[:200] > np.median(y[:200]))
    alpha = args.alpha

    if "fit" in cases:
        for fi in (True, False):
            objective = lambda est: lasso_objective(X, y, est, alpha)  # noqa: E731
            ta, fa = side_by_side(f"Lasso alpha {alpha:g} fit_intercept={fi}",
                                  strads.Lasso(alpha=alpha, fit_intercept=fi),
                                  sk.Lasso(alpha=alpha, fit_intercept=fi), X, y,
                                  args.repeat, objective)
            if args.same_optimum:
                same_optimum(ta, fa, lambda tol: sk.Lasso(
                    alpha=alpha, fit_intercept=fi, tol=tol, max_iter=10**7), X, y, objective)
    shapes = ((2000, 500, 1e3), (2000, 500, 1e4), (500, 5000, 1e3))
    for n, p, ratio in shapes if "dense" in cases else ():
        Xd, yd, amax = dense_problem(n, p)
        side_by_side(f"Lasso dense {n} x {p} alpha_max/{ratio:g}",
                     strads.Lasso(alpha=amax / ratio), sk.Lasso(alpha=amax / ratio), Xd, yd,
                     args.repeat, lambda est: lasso_objective(Xd, yd, est, amax / ratio))
    grid = {"alpha": list(np.geomspace(1e-3, 1e-5, 5))}
    if "grid" in cases:
        side_by_side("Lasso GridSearchCV 5 alphas x 3 folds",
                     GridSearchCV(strads.Lasso(), grid, cv=3),
                     GridSearchCV(sk.Lasso(), grid, cv=3), X, y, args.repeat)
    if "path" in cases:
        side_by_side("LassoCV 100 alphas (eps 1e-3) x 3 folds", strads.LassoCV(cv=3),
                     sk.LassoCV(cv=3), X, y, args.repeat)
        side_by_side("lasso_path 100 alphas (eps 1e-3)", strads.lasso_path, sk.lasso_path,
                     X, y, args.repeat)
    for n, p in ((200, 50), (2000, 500), (500, 2000), (200, 10000)) \
            if "densepath" in cases else ():  # (p <= n: scikit-learn's path on one Gram)
        Xd, yd, _ = dense_problem(n, p)
        side_by_side(f"lasso_path dense {n} x {p}", strads.lasso_path, sk.lasso_path,
                     Xd, yd, args.repeat)
    if "logreg" in cases:
        labels = y > np.quantile(y, args.label_quantile)
        s = np.where(labels, 1.0, -1.0)
        scaling, n = 100.0, X.shape[0]
        if args.cpu_folds is not None:
            alphas = grid["alpha"] if args.cpu_folds else [1e-3, 1e-4, 1e-5]
            return logreg_cpu(X, labels, alphas, scaling, args.cpu_folds)
        names = ("strads", "liblinear")
        for a in (1e-3, 1e-4):
            side_by_side(f"SparseLogisticRegression alpha {a:g}",
                         strads.SparseLogisticRegression(alpha=a, intercept_scaling=scaling),
                         liblinear(n, a, scaling), X, labels, args.repeat,
                         lambda est: logreg_objective(X, s, est, a, scaling), names)
        C = [1 / (2 * n / 3 * a) for a in grid["alpha"]]  # (n of a training fold)
        if "logregcv" in cases:  # (the same 20-alpha grid and folds; liblinear cold)
            cv = strads.SparseLogisticRegressionCV(n_alphas=20, cv=3, intercept_scaling=
                                                   scaling)
            alphas = cv.fit(X, labels).alphas_
            side_by_side("SparseLogisticRegressionCV 20 alphas x 3 folds", cv,
                         l1_logistic(cross_validated=True, Cs=list(1 / (2 * n / 3 * alphas)),
                                     cv=3, solver="liblinear", intercept_scaling=scaling),
                         X, labels, args.repeat, names=names)
        side_by_side("logreg GridSearchCV 5 alphas x 3 folds", GridSearchCV(
            strads.SparseLogisticRegression(intercept_scaling=scaling), grid, cv=3),
            GridSearchCV(l1_logistic(solver="liblinear", intercept_scaling=scaling),
                         {"C": C}, cv=3),
            X, labels, args.repeat, names=names)

if __name__ == "__main__":
    main()
