"""scikit-learn estimators (strads.estimators): scikit-learn's own estimator checks, the
Lasso against sklearn.linear_model.Lasso, MF against its own model, LDA's fold-in."""
import subprocess
import sys
import re
import textwrap
import warnings

import numpy as np
import pytest
import scipy.sparse as sp

pytest.importorskip("sklearn")

from sklearn.base import clone  # noqa: E402
from sklearn.exceptions import ConvergenceWarning, NotFittedError  # noqa: E402
from sklearn.linear_model import Lasso as SkLasso  # noqa: E402
from sklearn.utils.estimator_checks import parametrize_with_checks  # noqa: E402

from strads.apps import lda as lda_app  # noqa: E402
from strads.apps import mf as mf_app  # noqa: E402
from strads.apps.lda import foldin  # noqa: E402
from strads.estimators import (LDA, Lasso, LassoCV, MatrixFactorization,  # noqa: E402
                               SparseLogisticRegression, SparseLogisticRegressionCV,
                               lasso_path)

from conftest import ROOT, child_env, l1_logistic, run_cli  # noqa: E402


def test_import_strads_does_not_import_sklearn():
    code = "import sys, strads; import strads.apps.lda.foldin; print('sklearn' in sys.modules)"
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       timeout=120, env=child_env(), cwd=ROOT)
    assert p.returncode == 0, p.stderr
    assert p.stdout.strip() == "False"


# -- scikit-learn's checks -----------------------------------------------------------------
@parametrize_with_checks([Lasso(), SparseLogisticRegression(), LassoCV(n_alphas=3, cv=2),
                          SparseLogisticRegressionCV(n_alphas=3, cv=2)])
def test_sklearn_estimator_checks(estimator, check):
    check(estimator)


def test_sklearn_array_api_check_in_a_fresh_interpreter():
    """check_array_api_input needs SCIPY_ARRAY_API=1 before scipy is imported (the
    check above skips itself without it): run it there, for each of its namespaces."""
    code = textwrap.dedent("""
        from sklearn.utils.estimator_checks import estimator_checks_generator
        from strads.estimators import Lasso, SparseLogisticRegression
        status = []
        for est in (Lasso(), SparseLogisticRegression()):
            for e, check in estimator_checks_generator(est, legacy=True):
                if getattr(check, "func", check).__name__ == "check_array_api_input":
                    check(e)
                    status.append(type(e).__name__)
        print("API", status)
    """)
    env = {**child_env(), "SCIPY_ARRAY_API": "1"}
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       timeout=300, env=env, cwd=ROOT)
    assert p.returncode == 0, p.stderr
    assert "API ['Lasso', 'SparseLogisticRegression']" in p.stdout, p.stdout


# -- parameters ----------------------------------------------------------------------------
@pytest.mark.parametrize("est, changes", [
    (Lasso(), dict(alpha=0.3, fit_intercept=False, schedule="priority", tol=1e-9,
                   max_iter=50, n_jobs=2, staleness=1, random_state=3)),
    (MatrixFactorization(), dict(n_components=4, alpha=0.1, weighted=False, biases="full",
                                 schedule="als", max_iter=7, tol=0.0, n_jobs=-1,
                                 early_stopping=False, validation_fraction=0.2,
                                 n_iter_no_change=3, random_state=5)),
    (LDA(), dict(n_components=4, doc_topic_prior=0.5, topic_word_prior=0.2, max_iter=9,
                 random_state=1, n_jobs=2, max_doc_update_iter=11)),
])
def test_get_set_params_and_clone_round_trip(est, changes):
    params = est.get_params()
    assert set(changes) <= set(params)
    assert est.set_params(**changes) is est
    assert {k: est.get_params()[k] for k in changes} == changes
    twin = clone(est)
    assert twin is not est and twin.get_params() == est.get_params()
    assert type(est)(**params).get_params() == params
    assert repr(twin).startswith(type(est).__name__ + "(")


# -- Lasso ---------------------------------------------------------------------------------
def lasso_problem(n, p, density, offset, seed):
    """Sparse non-negative-ish features (strongly correlated with the constant, the hard
    case for an intercept) and a target with an offset."""
    rng = np.random.default_rng(seed)
    X = sp.random(n, p, density=density, format="csr", random_state=seed,
                  data_rvs=lambda k: 1 + rng.random(k))
    w = np.zeros(p)
    w[rng.choice(p, 6, replace=False)] = 2 * rng.standard_normal(6)
    y = X @ w + offset + 0.1 * rng.standard_normal(n)
    return X, y


PROBLEMS = [(120, 40, 0.3, 3.0, 0), (80, 150, 0.1, -2.0, 1), (200, 30, 0.5, 0.5, 2)]


@pytest.mark.parametrize("problem", PROBLEMS)
@pytest.mark.parametrize("fit_intercept", [True, False])
@pytest.mark.parametrize("sparse", [False, True])
@pytest.mark.parametrize("ratio", [0.02, 0.2])
def test_lasso_matches_sklearn(problem, fit_intercept, sparse, ratio):
    X, y = lasso_problem(*problem)
    Xd = X.toarray()
    yc = y - y.mean() if fit_intercept else y
    Xc = Xd - Xd.mean(axis=0) if fit_intercept else Xd
    alpha = ratio * np.abs(Xc.T @ yc).max() / X.shape[0]
    ref = SkLasso(alpha=alpha, fit_intercept=fit_intercept, tol=1e-10,
                  max_iter=1_000_000).fit(Xd, y)
    est = Lasso(alpha=alpha, fit_intercept=fit_intercept, tol=1e-10)
    assert est.fit(X if sparse else Xd, y) is est
    scale = np.abs(ref.coef_).max()
    np.testing.assert_allclose(est.coef_, ref.coef_, rtol=1e-5, atol=1e-7 * scale)
    assert est.intercept_ == pytest.approx(ref.intercept_, rel=1e-5, abs=1e-7 * scale)
    assert np.array_equal(est.coef_ != 0, ref.coef_ != 0)
    assert est.n_iter_ >= 1 and 0 <= est.dual_gap_ <= 1e-9 * y.var()
    np.testing.assert_allclose(est.predict(X), ref.predict(Xd), rtol=1e-6,
                               atol=1e-6 * np.abs(y).max())
    assert est.score(Xd, y) == pytest.approx(ref.score(Xd, y), abs=1e-8)


@pytest.mark.parametrize("sparse", [False, True])
def test_lasso_warm_start_path_and_cv_match_sklearn(sparse):
    from sklearn.linear_model import LassoCV as SkLassoCV
    from sklearn.linear_model import lasso_path as sk_lasso_path

    X, y = lasso_problem(120, 40, 0.3, 3.0, 0)
    Xd = X.toarray()
    data = X if sparse else Xd
    # warm start: from another alpha's coefficients to the same optimum, in fewer rounds
    ref = SkLasso(alpha=0.05, tol=1e-10, max_iter=1_000_000).fit(Xd, y)
    cold = Lasso(alpha=0.05, tol=1e-10).fit(data, y)
    warm = Lasso(alpha=0.2, tol=1e-10, warm_start=True).fit(data, y)
    warm.set_params(alpha=0.05).fit(data, y)
    for est in (cold, warm):
        np.testing.assert_allclose(est.coef_, ref.coef_, rtol=1e-6, atol=1e-9)
        assert est.intercept_ == pytest.approx(ref.intercept_, rel=1e-7)
    assert warm.n_iter_ <= cold.n_iter_
    # the path: scikit-learn's grid and coefficients (no intercept, as its lasso_path)
    alphas, coefs, gaps = lasso_path(data, y, n_alphas=12, tol=1e-10)
    sk_alphas, sk_coefs, _ = sk_lasso_path(Xd, y, alphas=alphas, tol=1e-12,
                                           max_iter=1_000_000)
    np.testing.assert_allclose(alphas, np.sort(alphas)[::-1])
    np.testing.assert_allclose(coefs, sk_coefs, rtol=1e-5, atol=1e-8)
    assert coefs.shape == (40, 12) and (gaps >= 0).all()
    # cross-validation along the path: scikit-learn's alpha, errors and final model
    cv = LassoCV(alphas=15, cv=3, tol=1e-10).fit(data, y)  # (scikit-learn's call; n_alphas too)
    sk = SkLassoCV(alphas=15, cv=3, tol=1e-12, max_iter=1_000_000).fit(Xd, y)
    np.testing.assert_allclose(cv.alphas_, sk.alphas_, rtol=1e-12)
    np.testing.assert_allclose(cv.mse_path_, sk.mse_path_, rtol=1e-6)
    assert cv.alpha_ == pytest.approx(sk.alpha_, rel=1e-12)
    np.testing.assert_allclose(cv.coef_, sk.coef_, rtol=1e-6, atol=1e-9)
    assert cv.intercept_ == pytest.approx(sk.intercept_, rel=1e-7)
    np.testing.assert_allclose(cv.predict(data), sk.predict(Xd), rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("sparse,fit_intercept", [(False, True), (True, True), (True, False)])
def test_logreg_cv_scores_each_fold_as_liblinear(sparse, fit_intercept):
    """SparseLogisticRegressionCV: every fold's held-out score along the path is
    liblinear's at C = 1 / (n_train alpha) (the same objective, warm starts or not), the
    grid starts where every coefficient is 0, and the final model is a plain fit at
    alpha_."""
    from sklearn.metrics import get_scorer
    from sklearn.model_selection import StratifiedKFold

    rng = np.random.default_rng(0)
    X = rng.standard_normal((300, 20)) * (rng.random((300, 20)) < 0.5)
    y = np.where(X[:, :4] @ [1.0, -1.0, 0.5, 2.0] + rng.standard_normal(300) > 0.3, "b", "a")
    data = sp.csr_matrix(X) if sparse else X
    kw = dict(fit_intercept=fit_intercept, tol=1e-10)
    cv = SparseLogisticRegressionCV(cv=3, n_alphas=8, scoring="neg_log_loss", **kw)
    cv.fit(data, y)
    scorer, ref = get_scorer("neg_log_loss"), np.empty((8, 3))
    for f, (train, test) in enumerate(StratifiedKFold(3).split(X, y)):
        for k, a in enumerate(cv.alphas_):
            m = l1_logistic(solver="liblinear", C=1 / (len(train) * a), tol=1e-9,
                            fit_intercept=fit_intercept, intercept_scaling=100.0,
                            max_iter=10_000).fit(X[train], y[train])
            ref[k, f] = scorer(m, X[test], y[test])
    np.testing.assert_allclose(cv.score_path_, ref, rtol=0, atol=1e-7)
    assert cv.alpha_ == cv.alphas_[np.argmax(ref.mean(axis=1))]
    assert np.allclose(cv.alphas_, np.geomspace(cv.alphas_[0], cv.alphas_[0] * 1e-3, 8))
    top = SparseLogisticRegression(alpha=cv.alphas_[0], **kw).fit(data, y)
    assert np.abs(top.coef_).max() <= (0 if not fit_intercept else 1e-3)
    final = SparseLogisticRegression(alpha=cv.alpha_, **kw).fit(data, y)
    np.testing.assert_array_equal(cv.coef_, final.coef_)
    np.testing.assert_array_equal(cv.predict_proba(data), final.predict_proba(data))
    assert list(cv.classes_) == ["a", "b"] and set(cv.predict(data)) <= {"a", "b"}
    # the default scoring: accuracy (as LogisticRegressionCV's), the same path
    acc = SparseLogisticRegressionCV(cv=3, n_alphas=8, **kw).fit(data, y)
    for f, (train, test) in enumerate(StratifiedKFold(3).split(X, y)):
        est = SparseLogisticRegression(alpha=acc.alphas_[3], **kw).fit(data[train], y[train])
        assert acc.score_path_[3, f] == pytest.approx(est.score(data[test], y[test]))
    with pytest.raises(ValueError, match="alphas must be > 0"):
        SparseLogisticRegressionCV(alphas=[0.1, 0.0], cv=2).fit(data, y)


@pytest.mark.parametrize("sparse", [False, True])
@pytest.mark.parametrize("fit_intercept", [False, True])
def test_lasso_path_in_one_run_reaches_sklearn_at_every_alpha(sparse, fit_intercept):
    # the path's alphas in one run (each lambda from the last one's solution): at each,
    # scikit-learn's optimum; alphas above alpha_max (w = 0), an empty column (sparse X
    # leaves it out of the solve) and the intercept's implicit centring on the way
    from strads.estimators.glm import _path

    X, y = lasso_problem(150, 50, 0.3, 2.0, 4)
    X = X.tolil()
    X[:, 7] = 0
    Xd = X.toarray()
    data = X.tocsc() if sparse else Xd
    Xc = Xd - Xd.mean(axis=0) if fit_intercept else Xd
    yc = y - y.mean() if fit_intercept else y
    amax = np.abs(Xc.T @ yc).max() / X.shape[0]
    alphas = np.concatenate([[4 * amax, 2 * amax], np.geomspace(amax, amax / 300, 25)])
    coefs, intercepts, gaps, rounds = _path(data, y, alphas, dict(
        fit_intercept=fit_intercept, tol=1e-9))
    # (dense: every alpha from the Gram of the first round, the next one checks the last)
    assert coefs.shape == (50, 27) and (gaps >= 0).all() and rounds >= (27 if sparse else 1)
    assert not coefs[:, :3].any() and not coefs[7].any()
    refs = _path_no_worse_than_sklearn(Xd, y, alphas, coefs, intercepts, fit_intercept, 1e-8)
    for k, ref in enumerate(refs):
        np.testing.assert_allclose(coefs[:, k], ref.coef_, rtol=1e-4, atol=1e-6)
        assert intercepts[k] == pytest.approx(ref.intercept_, rel=1e-5, abs=1e-6)
    # out of rounds: each alpha stops at max_iter, with scikit-learn's warning
    with pytest.warns(ConvergenceWarning, match="did not converge"):
        short = _path(data, y, alphas, dict(fit_intercept=fit_intercept, tol=1e-9,
                                            max_iter=1))[0]
    assert short.shape == (50, 27) and np.isfinite(short).all()


@pytest.mark.parametrize("fit_intercept", [False, True])
def test_dense_path_from_the_gram_with_duplicate_and_constant_columns(fit_intercept):
    # a dense path (p <= n) solved from its Gram in the first round: faces of duplicate
    # columns (singular: no Newton step there) and a constant column (with an intercept,
    # a centred 0) on the way; scikit-learn's objective at every alpha
    from strads.estimators.glm import _path

    rng = np.random.default_rng(6)
    X = rng.standard_normal((90, 30)) + 0.5 * rng.standard_normal((90, 1))
    X[:, 5], X[:, 11] = X[:, 4], 3.0
    y = X[:, :8] @ rng.standard_normal(8) + 2.0 + 0.3 * rng.standard_normal(90)
    alphas = np.geomspace(1.0, 1e-4, 40)
    coefs, intercepts, gaps, rounds = _path(X, y, alphas, dict(
        fit_intercept=fit_intercept, tol=1e-10))
    assert rounds <= 10 and (gaps >= 0).all()
    _path_no_worse_than_sklearn(X, y, alphas, coefs, intercepts, fit_intercept, 1e-9)


@pytest.mark.parametrize("fit_intercept", [False, True])
def test_small_dense_fit_is_solved_from_one_gram_in_two_rounds(fit_intercept):
    # dense, p <= 256 and p <= n: the first working set would hold every column, so the
    # first round solves it from its Gram to tol and the second (a full round) checks it;
    # duplicate and constant columns on the way. p = 257: the plain working sets
    rng = np.random.default_rng(8)
    for p, small in ((40, True), (257, False)):
        X = rng.standard_normal((300, p)) + 0.5 * rng.standard_normal((300, 1))
        X[:, 5], X[:, 11] = X[:, 4], 3.0
        y = X[:, :8] @ rng.standard_normal(8) + 2.0 + 0.3 * rng.standard_normal(300)
        for alpha in (0.1, 1e-3):
            est = Lasso(alpha=alpha, fit_intercept=fit_intercept, tol=1e-10).fit(X, y)
            assert (est.n_iter_ == 2) == small, (p, alpha, est.n_iter_)
            assert est.dual_gap_ >= 0
            _path_no_worse_than_sklearn(X, y, [alpha], est.coef_[:, None],
                                        [est.intercept_], fit_intercept, 1e-9)


def _path_no_worse_than_sklearn(X, y, alphas, coefs, intercepts, fit_intercept, rel):
    """At each alpha strads' objective is at most scikit-learn's (tol 1e-12) times 1 +
    rel; -> scikit-learn's fits."""
    refs = []
    for k, alpha in enumerate(alphas):
        ref = SkLasso(alpha=alpha, fit_intercept=fit_intercept, tol=1e-12,
                      max_iter=1_000_000).fit(X, y)
        mine = 0.5 * np.mean((y - X @ coefs[:, k] - intercepts[k]) ** 2) + \
            alpha * np.abs(coefs[:, k]).sum()
        theirs = 0.5 * np.mean((y - ref.predict(X)) ** 2) + alpha * np.abs(ref.coef_).sum()
        assert mine <= theirs * (1 + rel)
        refs.append(ref)
    return refs


def test_lasso_sparse_intercept_leaves_input_alone_and_matches_dense():
    X, y = lasso_problem(150, 60, 0.2, 4.0, 3)
    coo = sp.coo_matrix(X)
    # a non-canonical COO: every entry split in two (duplicates sum, as scipy's)
    dup = sp.coo_matrix((np.concatenate([coo.data / 2, coo.data / 2]),
                         (np.tile(coo.row, 2), np.tile(coo.col, 2))), shape=X.shape)
    before = (dup.data.copy(), dup.row.copy(), dup.col.copy())
    a = Lasso(alpha=0.01, tol=1e-10).fit(dup, y)
    assert all(np.array_equal(u, v) for u, v in zip(before, (dup.data, dup.row, dup.col)))
    b = Lasso(alpha=0.01, tol=1e-10).fit(X.toarray(), y)
    np.testing.assert_allclose(a.coef_, b.coef_, rtol=1e-6, atol=1e-9)
    assert a.intercept_ == pytest.approx(b.intercept_, rel=1e-7)


@pytest.mark.parametrize("mean, seed", [(1e4, 0), (1e6, 1), (-3e5, 2)])
def test_lasso_intercept_on_columns_of_large_mean_matches_sklearn(mean, seed):
    """Dense columns whose mean dwarfs their spread (prices in cents, timestamps) are
    centred in a copy, as scikit-learn's (X'X - n mu mu' cancelled: coefficients off by
    ~2 at mean 1e6): the fit, a warm start, the path, LassoCV, the app; sparse: refused."""
    from sklearn.linear_model import LassoCV as SkLassoCV
    from strads.apps import lasso as app
    from strads.estimators.glm import _path

    rng = np.random.default_rng(seed)
    X = rng.normal(size=(150, 8)) * rng.uniform(0.5, 2, 8) + mean * rng.uniform(0.5, 2, 8)
    X[:, 5] = mean  # a constant column
    y = (X - X.mean(0)) @ np.r_[1, -2, 0.5, 0, 0, 0, 0.3, 0] + 5 + 0.1 * rng.normal(size=150)
    X0, alphas = X.copy(), np.array([0.1, 0.03, 0.01])
    refs = [SkLasso(alpha=a, tol=1e-14, max_iter=10**6).fit(X, y) for a in alphas]

    def close(coef, intercept, ref):
        np.testing.assert_allclose(coef, ref.coef_, rtol=0, atol=1e-8)
        np.testing.assert_allclose(X @ coef + intercept, ref.predict(X), rtol=0, atol=1e-6)

    est = Lasso(alpha=0.03, tol=1e-12).fit(X, y)
    assert np.array_equal(X, X0)  # (centred in a copy)
    close(est.coef_, est.intercept_, refs[1])
    est.set_params(warm_start=True, alpha=0.01).fit(X, y)
    close(est.coef_, est.intercept_, refs[2])
    coefs, intercepts, _, _ = _path(X, y, alphas, dict(fit_intercept=True, tol=1e-12))
    for k, ref in enumerate(refs):
        close(coefs[:, k], intercepts[k], ref)
    cv = LassoCV(alphas=alphas, cv=3, tol=1e-12).fit(X, y)
    sk = SkLassoCV(alphas=alphas, cv=3, tol=1e-14, max_iter=10**6).fit(X, y)
    assert cv.alpha_ == sk.alpha_
    close(cv.coef_, cv.intercept_, sk)
    res = app.fit(X, y, lam=0.01, intercept=True, tol=1e-12, quiet=True)
    close(res.model["coef"], res.model["intercept"], refs[2])
    with pytest.raises(ValueError, match="mean .* times its spread"):
        Lasso(alpha=0.01).fit(sp.csc_matrix(X), y)


@pytest.mark.parametrize("sparse", [False, True])
@pytest.mark.parametrize("schedule, fit_intercept", [
    ("working-set", True), ("working-set", False), ("round-robin", True)])
def test_lasso_alpha_0_is_least_squares_and_stops(sparse, fit_intercept, schedule):
    """alpha = 0: the least-squares fit (np.linalg.lstsq), stopped by the first-order
    condition as soon as it holds (it ran max_iter rounds: no dual point), no warning.
    (Round-robin's Jacobi steps on the uncentred columns' collinearity: no convergence.)"""
    for seed, (n, p) in enumerate([(80, 15), (200, 40)]):
        X, y = lasso_problem(n, p, 0.5, 2.0, seed)
        Xd = X.toarray()
        A = np.hstack([Xd, np.ones((n, 1))]) if fit_intercept else Xd
        ref = np.linalg.lstsq(A, y, rcond=None)[0]
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            est = Lasso(alpha=0, fit_intercept=fit_intercept, schedule=schedule,
                        tol=1e-10, max_iter=5000).fit(X if sparse else Xd, y)
        np.testing.assert_allclose(est.coef_, ref[:p], rtol=1e-4, atol=1e-4)  # ~sqrt(tol)
        assert est.intercept_ == pytest.approx(ref[p] if fit_intercept else 0.0, abs=1e-4)
        assert est.n_iter_ < 5000


def test_lasso_workers_schedules_and_random_state():
    X, y = lasso_problem(120, 40, 0.3, 1.0, 4)
    ref = Lasso(alpha=0.01, tol=1e-10).fit(X, y)
    Xd = X.toarray()  # centered by fit: the Jacobi schedules' easy case
    for data, kw in ((X, dict(n_jobs=2)), (X, dict(n_jobs=-1)),
                     (X, dict(schedule="priority", random_state=7)),
                     (X, dict(schedule="priority", random_state=np.random.RandomState(1))),
                     (Xd, dict(schedule="random", random_state=np.random.default_rng(2))),
                     (Xd, dict(schedule="round-robin", staleness=1, n_jobs=2))):
        est = Lasso(alpha=0.01, tol=1e-10, **kw).fit(data, y)
        np.testing.assert_allclose(est.coef_, ref.coef_, rtol=1e-5, atol=1e-7, err_msg=kw)
        assert est.intercept_ == pytest.approx(ref.intercept_, rel=1e-6)
    a = Lasso(alpha=0.01, schedule="priority", random_state=3, tol=1e-8).fit(X, y)
    b = Lasso(alpha=0.01, schedule="priority", random_state=3, tol=1e-8).fit(X, y)
    assert np.array_equal(a.coef_, b.coef_) and a.n_iter_ == b.n_iter_


def test_one_process_warms_an_apps_kernels_up_once_not_each_fit(monkeypatch):
    """Cross-validation is many small fits: the warm-up (a thread loading the kernels)
    runs in the first in-process fit of an Update class, not again; a failed one, again."""
    from strads import driver
    from strads.apps.lasso import LassoUpdate

    X, y = lasso_problem(60, 20, 0.3, 1.0, 5)
    calls = []

    def warmup(cls):
        calls.append(cls)
        if len(calls) == 1:
            raise RuntimeError("the first warm-up fails")
    monkeypatch.setattr(driver, "_WARM", set())
    monkeypatch.setattr(LassoUpdate, "warmup", classmethod(warmup))
    with pytest.raises(RuntimeError, match="the first warm-up fails"):
        Lasso(alpha=0.01).fit(X, y)
    fits = [Lasso(alpha=0.01).fit(X, y) for _ in range(3)]
    assert calls == [LassoUpdate, LassoUpdate]
    assert all(np.array_equal(f.coef_, fits[0].coef_) for f in fits)


GLM_BAD = dict(alpha=[-1, np.inf, "1"], schedule=["nope", None], tol=[np.nan, -1.0],
               max_iter=[0, 1.5, True, None], fit_intercept=["yes", 1], n_jobs=[0, 1.5],
               random_state=[-3, "x"])
BAD = [(Lasso, dict(GLM_BAD, staleness=[-1, 0.5], warm_start=[None])),
       (SparseLogisticRegression, dict(GLM_BAD, alpha=[0, -1.0], intercept_scaling=[0, -1])),
       (LassoCV, dict(eps=[0, -1e-3], n_alphas=[0, 2.5], cv=["x"], tol=[-1], max_iter=[0])),
       (SparseLogisticRegressionCV, dict(eps=[0], n_alphas=[0], cv=["x"], scoring=[3],
                                         intercept_scaling=[0], tol=[-1], max_iter=[0])),
       (MatrixFactorization, dict(
           n_components=[0, 2.5, True], alpha=[-0.1, np.nan], max_iter=[0, None],
           tol=[-1], weighted=["yes"], early_stopping=["yes"], n_iter_no_change=[0, None],
           validation_fraction=[0.0, 1.0, -0.5], biases=["both"], schedule=["sgd"],
           n_jobs=[0], random_state=[-1])),
       (LDA, dict(n_components=[0, 2.5], max_iter=[0, -1], max_doc_update_iter=[-1, 1.5],
                  doc_topic_prior=[0, -0.1, "0.1"], topic_word_prior=[0, np.inf],
                  n_jobs=[0], random_state=[-2]))]


@pytest.mark.parametrize("Est, name, value", [(E, n, v) for E, bad in BAD
                                              for n, vs in bad.items() for v in vs],
                         ids=repr)
def test_every_bad_parameter_is_refused_naming_it_and_its_value(Est, name, value):
    """scikit-learn's InvalidParameterError (a ValueError), before any work."""
    X = np.array([[1.0, 2.0], [3.0, 1.0], [0.0, 1.0], [2.0, 2.0]])
    data = (X, np.array([0, 1, 0, 1])) if Est not in (MatrixFactorization, LDA) else \
        (sp.csr_matrix(X),)
    with pytest.raises(ValueError, match=rf"'{name}' parameter of {Est.__name__} must .*"
                                         rf"Got {re.escape(repr(value))} instead"):
        Est(**{name: value}).fit(*data)


def test_lasso_bad_parameters_and_convergence_warning():
    X, y = lasso_problem(50, 10, 0.5, 0.0, 5)
    with pytest.raises(ValueError, match="staleness 2 is above the useful maximum"):
        Lasso(staleness=2).fit(X, y)
    with pytest.raises(NotFittedError):
        Lasso().predict(X)
    with pytest.warns(Warning, match="did not converge"):
        Lasso(alpha=1e-4, tol=1e-14, max_iter=2, schedule="round-robin").fit(X, y)


# -- matrix factorization ------------------------------------------------------------------
def ratings(m=50, n=35, k=3, density=0.4, seed=1):
    rng = np.random.default_rng(seed)
    U, V = rng.standard_normal((m, k)), rng.standard_normal((n, k))
    u, i = np.nonzero(rng.random((m, n)) < density)
    r = 3 + (U[u] * V[i]).sum(1) + 0.1 * rng.standard_normal(u.size)
    return u, i, r


def test_mf_defaults_are_the_apps():
    """The estimator's, fit()'s and the CLI's defaults of the model are the app's one
    declaration (scikit-learn wants literal defaults in __init__)."""
    import inspect

    from strads.apps.mf.__main__ import build_parser
    est = MatrixFactorization()
    fit_defaults = inspect.signature(mf_app.fit).parameters
    args = build_parser().parse_args([])
    assert est.biases == fit_defaults["bias"].default == args.bias == mf_app.BIAS_DEFAULT
    assert est.weighted == fit_defaults["weighted"].default == mf_app.WEIGHTED
    assert est.alpha == fit_defaults["lam"].default == args.lam
    assert est.n_components == fit_defaults["rank"].default == args.rank
    assert est.early_stopping is True
    assert est.n_iter_no_change == fit_defaults["early_stop"].default == args.early_stop \
        == mf_app.EARLY_STOP
    assert est.validation_fraction == fit_defaults["validation"].default \
        == args.validation_fraction == mf_app.VALIDATION


@pytest.mark.parametrize("biases", ["none", "mean", "full"])
def test_mf_is_the_app_model_and_predict_is_its_formula(biases):
    u, i, r = ratings()
    users, items = 1000 + 7 * u, 3 * i - 50  # arbitrary ids, remapped by the app
    est = MatrixFactorization(n_components=3, alpha=0.05, biases=biases, max_iter=30,
                              random_state=4).fit((users, items, r))
    res = mf_app.fit(users, items, r, rank=3, lam=0.05, bias=biases, iters=30,
                     weighted=True, seed=4, quiet=True)
    M = res.model
    assert np.array_equal(est.user_factors_, M["W"]) and np.array_equal(est.item_factors_,
                                                                          M["H"])
    assert np.array_equal(est.user_ids_, np.unique(users))
    assert np.array_equal(est.item_ids_, np.unique(items))
    assert est.objective_ == res.objective and est.n_iter_ >= 1
    pu, pi = np.searchsorted(est.user_ids_, users), np.searchsorted(est.item_ids_, items)
    want = (est.global_mean_ + est.user_bias_[pu] + est.item_bias_[pi]
            + (est.user_factors_[pu] * est.item_factors_[pi]).sum(1))
    np.testing.assert_allclose(est.predict(users, items), want, rtol=1e-12)
    if biases == "full":
        assert np.abs(est.user_bias_).max() > 0
    else:
        assert not est.user_bias_.any() and not est.item_bias_.any()
    assert np.sqrt(np.mean((est.predict(users, items) - r) ** 2)) < 0.5
    # unseen ids: the mean and whatever biases are known
    got = est.predict([999, users[0]], [items[0], 10 ** 9])
    np.testing.assert_allclose(got, [est.global_mean_ + est.item_bias_[pi[0]],
                                     est.global_mean_ + est.user_bias_[pu[0]]])


def test_mf_recommend_order_and_filter_seen():
    u, i, r = ratings(seed=2)
    R = sp.csr_matrix((r, (u, i)), shape=(u.max() + 4, i.max() + 1))  # 3 empty users
    est = MatrixFactorization(n_components=3, alpha=0.05, biases="full",
                              random_state=0).fit(R)
    assert np.array_equal(est.user_ids_, np.unique(u))
    for user in (0, 7, int(u.max())):
        pos = int(np.searchsorted(est.user_ids_, user))
        full = (est.global_mean_ + est.user_bias_[pos] + est.item_bias_
                + est.item_factors_ @ est.user_factors_[pos])
        items, scores = est.recommend(user, n=len(full), filter_seen=False)
        assert np.array_equal(np.sort(items), est.item_ids_)
        assert np.all(np.diff(scores) <= 0)
        np.testing.assert_allclose(scores, full[np.searchsorted(est.item_ids_, items)])
        np.testing.assert_allclose(est.predict(np.full(items.shape, user), items), scores,
                                   rtol=1e-12)
        seen = set(i[u == user])
        items, scores = est.recommend(user, n=5)
        assert len(items) == 5 and not seen & set(items.tolist())
        unseen = np.array([j for j in range(len(full)) if est.item_ids_[j] not in seen])
        best = unseen[np.argsort(-full[unseen], kind="stable")[:5]]
        assert np.array_equal(items, est.item_ids_[best])
        items, _ = est.recommend(user, n=10 ** 6)
        assert len(items) == len(full) - len(seen)
    with pytest.raises(ValueError, match="not in the training data"):
        est.recommend(int(u.max()) + 2)
    for bad in (-1, True, 2.0):  # a bool is not a count (True == 1)
        with pytest.raises(ValueError, match=rf"'n' parameter of .*recommend must .* Got "
                                             rf"{bad!r} "):
            est.recommend(int(u[0]), n=bad)
    # the empty users' predictions: mean and item bias
    np.testing.assert_allclose(est.predict([u.max() + 2], [0]),
                               est.global_mean_ + est.item_bias_[0])


def test_mf_input_validation():
    u, i, r = ratings()
    with pytest.raises(ValueError, match="[Dd]uplicate|twice|repeated"):
        MatrixFactorization().fit((np.r_[u, u[:1]], np.r_[i, i[:1]], np.r_[r, r[:1]]))
    with pytest.raises(TypeError, match="scipy.sparse"):
        MatrixFactorization().fit(np.ones((4, 4)))
    with pytest.raises(ValueError):
        MatrixFactorization().fit(sp.csr_matrix((3, 3)))
    with pytest.raises(NotFittedError):
        MatrixFactorization().recommend(0)


@pytest.mark.parametrize("early_stopping", [True, False])
def test_mf_early_stopping_is_the_apps(early_stopping):
    t = mf_app.make_problem(400, 200, 8000)
    est = MatrixFactorization(alpha=0.005, max_iter=12, tol=0.0, random_state=0,
                              early_stopping=early_stopping, validation_fraction=0.2,
                              n_iter_no_change=1).fit((t.users, t.items, t.ratings))
    res = mf_app.fit(t.users, t.items, t.ratings, lam=0.005, iters=12, tol=0.0, seed=0,
                     quiet=True, early_stop=1 if early_stopping else None, validation=0.2)
    assert np.array_equal(est.user_factors_, res.model["W"])
    assert est.n_iter_ == res.extra["iterations"]
    if early_stopping:
        assert est.n_iter_ == res.extra["best_iteration"] < 12
        assert est.validation_rmse_ == res.extra["validation_rmse"] > 0
    else:
        assert est.n_iter_ == 12 and est.validation_rmse_ is None


# -- LDA -----------------------------------------------------------------------------------
def separated_corpus(n_docs=300, K=4, words_per_topic=30, length=60, seed=0):
    """Each topic owns its own block of words; each document mixes mostly one topic."""
    rng = np.random.default_rng(seed)
    V = K * words_per_topic
    X = np.zeros((n_docs, V), np.int64)
    for d in range(n_docs):
        theta = rng.dirichlet(np.full(K, 0.1))
        z = rng.choice(K, length, p=theta)
        w = z * words_per_topic + rng.integers(0, words_per_topic, length)
        np.add.at(X[d], w, 1)
    return sp.csr_matrix(X), V


def test_lda_transform_recovers_topics_of_top_word_documents():
    X, V = separated_corpus()
    est = LDA(n_components=4, max_iter=60, random_state=0).fit(X)
    assert est.components_.shape == (4, V)
    counts = est.components_ - est.topic_word_prior_
    np.testing.assert_allclose(counts, np.round(counts), atol=1e-9)
    assert round(counts.sum()) == X.sum()  # every token counted once
    T = est.transform(X)
    np.testing.assert_allclose(T.sum(axis=1), 1.0)
    assert T.shape == (X.shape[0], 4) and (T > 0).all()
    top = est.top_words(n=10)
    assert len(top) == 4 and all(len(t) == 10 for t in top)
    for bad in (0, True, 2.0):  # a bool is not a count (True == 1)
        with pytest.raises(ValueError, match=rf"'n' parameter of .*top_words .* Got {bad!r} "):
            est.top_words(n=bad)
    for k in range(4):
        doc = np.zeros((1, V), np.int64)
        doc[0, [int(w) for w in top[k]]] = 3
        mix = est.transform(doc)[0]
        assert mix.argmax() == k and mix[k] > 0.8
    vocab = [f"w{j}" for j in range(V)]
    assert est.top_words(vocab, 3)[0] == [f"w{w}" for w in top[0][:3]]
    with pytest.raises(ValueError, match=r"'n' parameter of .*top_words must .* Got 0 "):
        est.top_words(vocab, 0)
    # well separated: each fitted topic owns one block of words
    blocks = {int(w) // 30 for t in top for w in t[:5]}
    assert blocks == {0, 1, 2, 3}


def test_lda_deterministic_with_random_state():
    X, _ = separated_corpus(n_docs=120, seed=1)
    a = LDA(n_components=4, max_iter=20, random_state=3).fit(X)
    b = LDA(n_components=4, max_iter=20, random_state=3).fit(X)
    c = LDA(n_components=4, max_iter=20, random_state=4).fit(X)
    assert np.array_equal(a.components_, b.components_)
    assert not np.array_equal(a.components_, c.components_)
    assert np.array_equal(a.transform(X), b.transform(X))
    assert np.array_equal(a.transform(X), a.transform(X))  # a fitted model: fixed seed
    a.set_params(n_jobs=2)  # fold-in threads: the same mixtures
    assert np.array_equal(a.transform(X), b.transform(X))
    a.set_params(n_jobs=None)  # fit's workers: the chain depends on their number
    np.testing.assert_allclose(a.fit_transform(X), b.doc_topic_)
    np.testing.assert_allclose(b.doc_topic_.sum(axis=1), 1.0)


def test_lda_is_the_app_model_and_scores():
    X, _ = separated_corpus(n_docs=100, seed=2)
    est = LDA(n_components=4, max_iter=15, doc_topic_prior=0.2, topic_word_prior=0.05,
              random_state=9).fit(X)
    res = lda_app.fit(X, n_topics=4, alpha=0.2, beta=0.05, sweeps=15, seed=9, quiet=True)
    np.testing.assert_array_equal(est.components_, res.model["word_topic"].T + 0.05)
    assert est.loglik_ == float(res.model["loglik"]) and est.n_iter_ == 15
    ll = est.score(X)
    assert ll < 0
    assert est.perplexity(X) == pytest.approx(np.exp(-ll / X.sum()))
    # defaults: the app's priors
    d = LDA(n_components=4, max_iter=2, random_state=0).fit(X)
    assert (d.doc_topic_prior_, d.topic_word_prior_) == (0.1, 0.01)


def test_lda_input_validation():
    X, V = separated_corpus(n_docs=30)
    est = LDA(n_components=3, max_iter=3, random_state=0)
    for bad in (-X.toarray(), X.toarray() + 0.5, np.full((3, V), np.nan)):
        with pytest.raises(ValueError):
            est.fit(bad)
    with pytest.raises(NotFittedError):
        est.transform(X)
    est.fit(X)
    with pytest.raises(ValueError, match="features"):
        est.transform(X[:, :-1])
    T = est.transform(np.zeros((2, V), np.int64))  # empty documents: the prior mean
    np.testing.assert_allclose(T, 1 / 3)
    with pytest.raises(ValueError):
        est.perplexity(np.zeros((2, V), np.int64))


def test_fold_in_kernel_matches_the_exact_posterior_of_one_token():
    """One token: every sweep draws z from p(z | w) = phi[w, :] / sum (the doc count of
    the other tokens is empty), so E[theta_k] = (alpha + p(k | w)) / (1 + K alpha)."""
    rng = np.random.default_rng(0)
    K, V, alpha = 4, 6, 0.3
    phi = rng.dirichlet(np.ones(V), K).T.copy()  # (V, K)
    doc_ptr = np.array([0, 1, 1, 2], np.int64)  # a one-token doc, an empty one, another
    words = np.array([2, 5], np.int32)
    theta = foldin.fold_in(doc_ptr, words, phi, alpha, 40000, 11)
    for d, w in ((0, 2), (2, 5)):
        want = (alpha + phi[w] / phi[w].sum()) / (1 + K * alpha)
        np.testing.assert_allclose(theta[d], want, atol=0.01)
    np.testing.assert_allclose(theta[1], 1 / K)
    # the same documents, split over threads or elsewhere: the same per-document streams
    again = foldin.fold_in_threads(doc_ptr, words, phi, alpha, 40000, 11, n_threads=3)
    assert np.array_equal(theta, again)
    tail = foldin.fold_in(doc_ptr[2:] - doc_ptr[2], words[1:], phi, alpha, 40000, 11)
    assert np.array_equal(theta[2:], tail)
    assert not np.array_equal(theta, foldin.fold_in(doc_ptr, words, phi, alpha, 40000, 12))


def test_estimators_do_not_warn_on_clean_input():
    X, y = lasso_problem(60, 20, 0.3, 1.0, 6)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        Lasso(alpha=0.01).fit(X, y).predict(X)


# -- sparse logistic regression --------------------------------------------------------------
@pytest.mark.parametrize("sparse", [False, True])
def test_sparse_logistic_regression_matches_liblinear_and_maps_labels(sparse):
    rng = np.random.default_rng(4)
    X = rng.standard_normal((300, 40))
    w = np.zeros(40)
    w[:5] = [2.0, -1.5, 1.0, 0.5, -2.0]
    y01 = (X @ w + 0.5 * rng.standard_normal(300) > 0)
    labels = np.where(y01, "spam", "ham")  # any two values
    Xf = sp.csc_matrix(X) if sparse else X
    alpha = 0.01
    est = SparseLogisticRegression(alpha=alpha, fit_intercept=False, tol=1e-10).fit(
        Xf, labels)
    assert list(est.classes_) == ["ham", "spam"] and est.coef_.shape == (1, 40)
    ref = l1_logistic(solver="liblinear", C=1 / (300 * alpha), fit_intercept=False,
                      tol=1e-10, max_iter=10**6).fit(X, y01)

    def f(coef):
        z = np.where(y01, 1.0, -1.0) * (X @ coef)
        return np.logaddexp(0, -z).mean() + alpha * np.abs(coef).sum()
    assert abs(f(est.coef_[0]) - f(ref.coef_[0])) <= 1e-6 * f(ref.coef_[0])
    np.testing.assert_allclose(est.coef_[0], ref.coef_[0], atol=1e-4)
    d = est.decision_function(Xf)
    np.testing.assert_array_equal(est.predict(Xf), np.where(d > 0, "spam", "ham"))
    p = est.predict_proba(Xf)
    np.testing.assert_allclose(p.sum(axis=1), 1.0)
    np.testing.assert_allclose(p[:, 1], 1 / (1 + np.exp(-d)), rtol=1e-12)
    assert est.score(Xf, labels) > 0.85


@pytest.mark.parametrize("sparse", [False, True])
def test_sparse_logistic_regression_intercept_and_warm_start_match_liblinear(sparse):
    """With an intercept: liblinear's model at the same intercept_scaling (both penalise
    the constant column's weight, alpha |c| / scaling); a warm start from another alpha
    reaches it too."""
    rng = np.random.default_rng(6)
    X, _ = lasso_problem(300, 60, 0.2, 0.0, 6)
    y01 = X @ rng.standard_normal(60) + 0.5 * rng.standard_normal(300) > 1.0
    Xf = X if sparse else X.toarray()
    alpha, scaling = 0.005, 10.0
    ref = l1_logistic(solver="liblinear", C=1 / (300 * alpha), intercept_scaling=scaling,
                      tol=1e-7, max_iter=10**4).fit(X, y01)
    cold = SparseLogisticRegression(alpha=alpha, intercept_scaling=scaling, tol=1e-10)
    warm = SparseLogisticRegression(alpha=0.05, intercept_scaling=scaling, tol=1e-10,
                                    warm_start=True).fit(Xf, y01)
    warm.set_params(alpha=alpha)
    for est in (cold, warm):
        est.fit(Xf, y01)
        np.testing.assert_allclose(est.coef_, ref.coef_, atol=1e-5)
        np.testing.assert_allclose(est.intercept_, ref.intercept_, atol=1e-5)


def test_sparse_logistic_regression_fits_an_intercept():
    rng = np.random.default_rng(5)
    X = rng.standard_normal((400, 10))
    y = (X[:, 0] + 1.5 + 0.3 * rng.standard_normal(400) > 0).astype(int)  # mostly 1
    with_c = SparseLogisticRegression(alpha=0.001).fit(X, y)
    without = SparseLogisticRegression(alpha=0.001, fit_intercept=False).fit(X, y)
    assert with_c.intercept_[0] > 1.0 and without.intercept_[0] == 0.0
    assert with_c.score(X, y) > without.score(X, y)
    with pytest.raises(ValueError, match="Only binary classification"):
        SparseLogisticRegression().fit(X, np.arange(400) % 3)


def test_mf_default_objective_is_the_apps_weighted_default():
    # one default for both: lambda times each row's number of ratings
    u, i, r = ratings()
    est = MatrixFactorization(n_components=3, alpha=0.05, max_iter=5,
                              random_state=4).fit((u, i, r))
    res = mf_app.fit(u, i, r, rank=3, lam=0.05, iters=5, seed=4, quiet=True)
    unweighted = mf_app.fit(u, i, r, rank=3, lam=0.05, iters=5, seed=4, quiet=True,
                            weighted=False)
    assert est.weighted is True and mf_app.WEIGHTED is True
    assert np.array_equal(est.user_factors_, res.model["W"])
    assert not np.allclose(est.user_factors_, unweighted.model["W"])


# -- refusals before any fit, the rounding of a gap near 0 (the hunt of 2026-12-06) ------
def _small_regression():
    rng = np.random.default_rng(0)
    X = rng.standard_normal((30, 10))
    return X, X[:, :3] @ np.ones(3) + 0.1 * rng.standard_normal(30)


def test_lasso_path_refuses_a_negative_alpha():
    X, y = _small_regression()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises(ValueError):
            lasso_path(X, y, alphas=[0.1, -0.01], max_iter=5)


def test_lasso_cv_refuses_a_negative_alpha_before_any_fit():
    X, y = _small_regression()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises(ValueError):
            LassoCV(alphas=[0.1, -1.0], cv=2, max_iter=5).fit(X, y)


def test_mf_estimator_duplicate_message_names_what_the_estimator_takes():
    users, items, ratings = [0, 1, 0], [0, 1, 0], [3.0, 4.0, 5.0]
    est = MatrixFactorization(n_components=2, random_state=0)
    with pytest.raises(ValueError) as e:
        est.fit((users, items, ratings))
    assert "duplicates" in est.get_params() or "duplicates=" not in str(e.value)


def test_lasso_stops_by_tol_when_the_objective_is_near_zero():
    """Where the objective is near 0 (a tiny alpha, p > n: the fit interpolates) the
    run ends by tol (at worst the gap's rounding), not by max_iter."""
    rng = np.random.default_rng(0)
    X, y = rng.standard_normal((10, 200)), rng.standard_normal(10)
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConvergenceWarning)
        est = Lasso(alpha=1e-12, max_iter=200).fit(X, y)
    assert est.n_iter_ < 200
    sk = SkLasso(alpha=1e-12, max_iter=100_000).fit(X, y)
    assert np.abs(X @ est.coef_ + est.intercept_ - y).max() <= \
        max(1e-9, np.abs(X @ sk.coef_ + sk.intercept_ - y).max())


def test_lasso_tol_scales_the_null_models_objective(monkeypatch):
    """The estimators' tol scales the null model's objective ||y - mean(y)||^2 / 2n, as
    scikit-learn's (the app's gap_ref "null"); the app's default, the CLI's, scales the
    objective: near interpolation (here the objective is ~4e-4 of the null model's) that
    asks for more rounds, to a gap within tol of the objective."""
    from strads.apps import lasso

    rng = np.random.default_rng(0)
    X = sp.random(60, 400, density=0.1, format="csc", random_state=rng,
                  data_rvs=rng.standard_normal)
    y = X @ rng.standard_normal(400) + 0.1 * rng.standard_normal(60) + 2.0
    null = 0.5 * float(np.mean((y - y.mean()) ** 2))
    Xd = X.toarray()
    alpha = 1e-4 * np.abs((Xd - Xd.mean(axis=0)).T @ (y - y.mean())).max() / 60
    seen = []
    real = lasso.fit
    monkeypatch.setattr(lasso, "fit", lambda *a, **k: seen.append(k["gap_ref"]) or
                        real(*a, **k))
    est = Lasso(alpha=alpha, tol=1e-6).fit(X, y)
    assert seen == ["null"] and est.dual_gap_ <= 1e-6 * null
    runs = {ref: real(X, y, lam=alpha, intercept=True, tol=1e-6, gap_ref=ref, quiet=True)
            for ref in ("null", "objective")}
    assert runs["objective"].objective < 1e-3 * null
    assert runs["null"].extra["duality_gap"] <= 1e-6 * null
    assert runs["objective"].extra["duality_gap"] <= 1e-6 * runs["objective"].objective
    assert runs["null"].rounds < runs["objective"].rounds
    with pytest.raises(Exception, match="gap_ref must be 'objective' or 'null'"):
        real(X, y, lam=alpha, gap_ref="objectve", quiet=True)


# -- under mpiexec: one set of parameters (the hunt of 2026-12-06, second) ------------
_ALPHA_PER_RANK = """
import numpy as np
import sklearn.linear_model as lm
import strads
from mpi4py import MPI
from strads.apps import lasso
X, y, _ = lasso.make_problem(100, 50, density=0.2, seed=0)
alpha = [0.1, 0.5, 0.5][MPI.COMM_WORLD.Get_rank()]  # a sweep, one alpha a rank
est = strads.Lasso(alpha=alpha, tol=1e-10).fit(X, y)
ref = lm.Lasso(alpha=alpha, tol=1e-12, max_iter=100000).fit(X.toarray(), y)
print("same" if np.allclose(est.coef_, ref.coef_, atol=1e-5) else "MISMATCH", flush=True)
"""


@pytest.mark.timeout(120)
def test_mpi_estimator_params_that_differ_between_ranks(tmp_path):
    (tmp_path / "alpha_per_rank.py").write_text(_ALPHA_PER_RANK)
    p = run_cli(["alpha_per_rank"], np=3, timeout=100, cwd=tmp_path)
    assert p.returncode != 0 and "MISMATCH" not in p.stdout, p.stdout + p.stderr
    assert "rank 1: Lasso(alpha=0.5), rank 0: alpha=0.1: under mpiexec" in p.stderr


def test_mf_dataframe_columns_are_read_by_their_names():
    """A DataFrame named item, user, rating (another order) is fitted by the names (it
    was read by position: the items fitted as users, silently); names that put a column
    elsewhere without naming all three are refused."""
    pd = pytest.importorskip("pandas")
    rng = np.random.default_rng(0)
    u, i = np.divmod(rng.choice(60, size=40, replace=False), 5)
    i, r = i + 100, rng.integers(1, 6, u.shape[0]).astype(np.float64)
    kw = dict(n_components=2, early_stopping=False, max_iter=3, random_state=0)
    ref = MatrixFactorization(**kw).fit((u, i, r))
    est = MatrixFactorization(**kw).fit(pd.DataFrame({"item": i, "user": u,
                                                             "rating": r}))
    np.testing.assert_array_equal(est.user_ids_, np.unique(u))
    np.testing.assert_array_equal(est.user_factors_, ref.user_factors_)
    df = pd.DataFrame({"movieId": i, "userId": u, "rating": r})
    assert est.score(df) == ref.score((u, i, r))
    with pytest.raises(ValueError, match="the columns are named 'item', 'x', 'rating': "
                       "name them user, item and rating, or give them in that order"):
        MatrixFactorization(**kw).fit(pd.DataFrame({"item": i, "x": u, "rating": r}))



def test_a_fit_whose_run_diverged_raises_and_keeps_no_model():
    """(It was returned with a ConvergenceWarning advising a larger max_iter.)"""
    from types import SimpleNamespace

    from strads.estimators._base import _collective

    def fit():
        return SimpleNamespace(stop_reason="diverged", objective=1.4e28, rounds=14)

    def fitted(res):
        raise AssertionError("a diverged run's model was taken")

    with pytest.raises(FloatingPointError, match="the fit diverged: objective 1.4e\\+28 at "
                       "round 14; no model is kept"):
        _collective(fit, (), {}, fitted)
    ok = SimpleNamespace(stop_reason="tol", objective=1.0, rounds=3)
    assert _collective(lambda: ok, (), {}, lambda res: res.rounds) == 3


def test_lda_transform_of_a_document_does_not_depend_on_its_batch():
    """A document's mixture is the same alone, in another row, in another batch, and
    with its words' columns permuted (it was seeded by its row: up to 0.0035 apart)."""
    C, _, _ = lda_app.make_corpus(n_docs=60, n_words=40, n_topics=3, seed=2)
    est = LDA(n_components=3, max_iter=20, random_state=0).fit(C)
    T = est.transform(C[:20])
    for i in (0, 7, 19):
        np.testing.assert_array_equal(est.transform(C[i:i + 1]), T[i:i + 1])
    rows = [5, 3, 11]
    np.testing.assert_array_equal(est.transform(C[rows]), T[rows])
    unsorted = sp.csr_matrix(C[:20])
    unsorted.indices, unsorted.data = unsorted.indices[::-1].copy(), unsorted.data[::-1].copy()
    unsorted.indptr = unsorted.indptr[-1] - unsorted.indptr[::-1]
    unsorted = unsorted[::-1]  # (rows reversed back: each row's entries now unsorted)
    np.testing.assert_array_equal(est.transform(unsorted), T)

