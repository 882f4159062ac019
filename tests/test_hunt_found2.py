"""Strict xfails for defects of the public Python API found by the fourth hunt (hunt4):
each test fails on the code it was written against for the reason it names, and
passes once the defect is fixed (then drop its xfail mark)."""
import numpy as np
import pytest


def _ratings(seed=0):
    """(users, items, ratings) of distinct pairs: 12 users, 5 items."""
    rng = np.random.default_rng(seed)
    u, i = np.divmod(rng.choice(60, size=40, replace=False), 5)
    return u, i + 100, rng.integers(1, 6, u.shape[0]).astype(np.float64)


def _logreg_problem(seed=1011):
    """A small dense binary problem with columns of scales 0.01 to 100 (the fourth hunt's
    fuzz): seed 1011, 15 x 17, on which the priority schedule diverges; seed 1040,
    16 x 49, on which round-robin stays at its first rounds' objective."""
    rng = np.random.default_rng(seed)
    n, p = int(rng.integers(2, 50)), int(rng.integers(1, 60))
    X = rng.standard_normal((n, p)) * 10 ** rng.uniform(-2, 2, p)
    if rng.random() < 0.3:
        X[:, rng.integers(0, p)] = rng.standard_normal()
    rng.random()  # (the fuzz's draw of a sparse layout: dense here)
    z = (X @ (rng.standard_normal(p) * (rng.random(p) < 0.3))
         + rng.standard_normal(n) * 10 ** rng.uniform(-2, 1) + rng.standard_normal())
    y = (z > np.quantile(z, rng.uniform(0.05, 0.95))).astype(int)
    rng.random()  # (fit_intercept: True)
    isc = float(10 ** rng.uniform(-1, 2))
    s = 2.0 * y - 1
    alpha = np.abs(X.T @ (s * 0.5)).max() / n * 10 ** rng.uniform(-3, 0.2)
    return X, y, float(alpha), isc


def _logreg_objective(X, y, coef, intercept, alpha, isc):
    s = 2.0 * y - 1
    return (np.mean(np.logaddexp(0, -s * (X @ coef + intercept)))
            + alpha * (np.abs(coef).sum() + abs(intercept) / isc))


@pytest.mark.xfail(strict=True, reason="SparseLogisticRegression(schedule='priority') "
                   "diverges on a 15x17 dense problem: objective 1.4e28 (liblinear's 0.266), "
                   "returned as the fitted model")
def test_logreg_priority_reaches_liblinear_optimum():
    import warnings

    from sklearn.linear_model import LogisticRegression
    from strads.estimators import SparseLogisticRegression

    X, y, alpha, isc = _logreg_problem()
    assert X.shape == (15, 17)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ref = LogisticRegression(penalty="l1", solver="liblinear", C=1 / (len(y) * alpha),
                                 intercept_scaling=isc, tol=1e-12, max_iter=100000).fit(X, y)
        est = SparseLogisticRegression(alpha=alpha, intercept_scaling=isc,
                                       schedule="priority", random_state=0).fit(X, y)
    f_ref = _logreg_objective(X, y, ref.coef_.ravel(), ref.intercept_[0], alpha, isc)
    f = _logreg_objective(X, y, est.coef_.ravel(), est.intercept_[0], alpha, isc)
    # docs/apps/logreg.md: every schedule within 1e-6 relative of liblinear's objective
    # (the default tol, 1e-5 of the null model's objective, allows a little more)
    assert f <= f_ref + 1e-5 * np.log(2), (f, f_ref)


@pytest.mark.xfail(strict=True, reason="SparseLogisticRegression(schedule='round-robin') on a "
                   "16x49 dense problem stays at objective 7.97e4 from round 100 to 100000 "
                   "(liblinear's 0.0175, coef=0's log 2), and is not stopped as diverged")
def test_logreg_round_robin_leaves_its_overshoot():
    import warnings

    from strads.estimators import SparseLogisticRegression

    X, y, alpha, isc = _logreg_problem(1040)
    assert X.shape == (16, 49)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        est = SparseLogisticRegression(alpha=alpha, intercept_scaling=isc,
                                       schedule="round-robin", random_state=0,
                                       max_iter=2000).fit(X, y)
    f = _logreg_objective(X, y, est.coef_.ravel(), est.intercept_[0], alpha, isc)
    # the schedule "random" reaches 0.0175 in 145 rounds; a descent method's least is to
    # end no worse than where it started (coef = 0, intercept = 0: log 2)
    assert f <= np.log(2), f
