"""The generalised linear models' estimators: :class:`Lasso` and
:class:`SparseLogisticRegression`, on the strads Lasso and logistic regression apps,
sharing :class:`_LinearModel`."""
import warnings
from numbers import Integral, Real

import numpy as np
import scipy.sparse as sp
from scipy.special import expit
from sklearn.base import BaseEstimator, ClassifierMixin, RegressorMixin, _fit_context
from sklearn.exceptions import ConvergenceWarning
from sklearn.utils._param_validation import Interval
from sklearn.utils.extmath import safe_sparse_dot
from sklearn.utils.multiclass import check_classification_targets, type_of_target
from sklearn.utils.validation import check_is_fitted, validate_data

from ..apps import lasso
from ..apps.glm.setup import PARAMS as GLM
from ..io.svmlight import check_size
from ..params import ENGINE, sklearn_constraints
from ._base import N_JOBS, RANDOM_STATE, _Checked, _collective, collective, _n_workers, _seed
from ._persist import Persistent, _set

_POSITIVE = [Interval(Real, 0, None, closed="neither")]
_LASSO = ("fit_intercept", "schedule", "tol", "max_iter", "n_jobs", "random_state")  # LassoCV's
_LOGREG = _LASSO + ("intercept_scaling",)  # SparseLogisticRegressionCV's


class _LinearModel(Persistent, _Checked, BaseEstimator):
    """What the two share: sparse input, the constraints of their common parameters, the
    app's arguments, the warning of a run short of tol, and X @ coef + intercept."""

    # strads.run's declarations (at least one round), the family's schedule, and its
    # penalty (the Lasso's: lambda >= 0), which each datafit checks by a rule of its own
    _parameter_constraints = {
        **sklearn_constraints(ENGINE, dict(tol="tol", max_iter="max_rounds"),
                              max_iter=dict(low=1, none=False)),
        **sklearn_constraints(GLM, dict(schedule="schedule")),
        "alpha": [Interval(Real, 0, None, closed="left")], "fit_intercept": ["boolean"],
        "warm_start": ["boolean"], "n_jobs": N_JOBS, "random_state": RANDOM_STATE}

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.sparse = True
        return tags

    def _app_kwargs(self, X):
        return dict(lam=float(self.alpha), schedule=self.schedule,
                    seed=_seed(self.random_state), tol=float(self.tol),
                    max_rounds=int(self.max_iter),
                    workers=_n_workers(self.n_jobs, X.shape[0]), quiet=True)

    def _warn_unconverged(self, res, detail=""):
        if self.tol > 0 and res.stop_reason != "tol":
            warnings.warn(f"{type(self).__name__} did not converge: the run stopped by "
                          f"{res.stop_reason!r} after {res.rounds} rounds{detail}; raise "
                          "max_iter or tol", ConvergenceWarning)

    def _coef0(self, X):
        """The coefficients a warm start starts from (None: from 0)."""
        coef = getattr(self, "coef_", None) if self.warm_start else None
        if coef is None or np.size(coef) != X.shape[1]:
            return None
        return np.ravel(coef).astype(np.float64)

    def predict(self, X):
        """``X @ coef_ + intercept_`` for new samples (the classifier's decision function)."""
        check_is_fitted(self, "coef_")
        X = validate_data(self, X, accept_sparse=["csr", "csc", "coo"],
                          dtype=[np.float64, np.float32], reset=False)
        coef, intercept = np.ravel(self.coef_), np.ravel(self.intercept_)[0]
        return np.asarray(safe_sparse_dot(X, coef, dense_output=True)).ravel() + intercept


class Lasso(RegressorMixin, _LinearModel):
    """Lasso by scheduled parallel coordinate descent (the strads Lasso app).

    Minimises ``1 / (2 n_samples) ||y - X w - c||^2 + alpha ||w||_1``, the objective of
    :class:`sklearn.linear_model.Lasso`, with the intercept ``c`` unpenalised (0 without
    ``fit_intercept``). The fit is :func:`strads.apps.lasso.fit`, one run, which
    centres X implicitly for the intercept (sparse X stays sparse).

    Parameters
    ----------
    alpha : float, default=1.0
        L1 penalty (the app's ``lambda``), >= 0.
    fit_intercept : bool, default=True
        Fit an unpenalised intercept.
    schedule : {"working-set", "priority", "round-robin", "random"}, default="working-set"
        The app's schedule (see the README's Lasso section).
    tol : float, default=1e-6
        Stop when the duality gap is at most ``tol`` times the null model's objective,
        ``||y - mean(y)||^2 / (2 n)`` (``||y||^2 / (2 n)`` without ``fit_intercept``), as
        scikit-learn's Lasso scales its tol (whose default, 1e-4, is 100 times this); the
        CLI's ``--tol`` scales the objective instead, which near interpolation (a small
        alpha, the objective far below the null model's) asks for far more. 0 turns it
        off and the run goes on for ``max_iter`` rounds.
    max_iter : int, default=100000
        Most rounds of the engine (per run).
    n_jobs : int, default=None
        Workers in one process, each on a thread of its own: None -> 1, -1 -> all
        cores (joblib's convention); at most ``n_samples``. Ignored under ``mpiexec``
        (N-1 workers).
    staleness : int, default=0
        Rounds the scheduler may run ahead of the workers (0: bulk-synchronous).
    random_state : int, RandomState instance or None, default=None
        The app's seed (randomised schedules only): an int is used as it is, an int is
        drawn from a RandomState or Generator, and None draws one from numpy's global
        RandomState.
    warm_start : bool, default=False
        Start from the last fit's ``coef_`` (same number of features), as scikit-learn's.

    Attributes
    ----------
    coef_ : ndarray of shape (n_features,)
        The coefficients.
    intercept_ : float
        The intercept (0.0 without ``fit_intercept``).
    n_iter_ : int
        Rounds of the engine.
    dual_gap_ : float
        Duality gap of the last run, in the objective's scale ``1/(2n) ||.||^2 + ...``
        (the scale of scikit-learn's ``dual_gap_``).
    n_features_in_ : int
        Number of features seen during fit.
    feature_names_in_ : ndarray of shape (n_features_in_,)
        Names of the features seen during fit (only when X has string column names).

    See Also
    --------
    sklearn.linear_model.Lasso : the same optimum, by cyclic coordinate descent.

    Examples
    --------
    >>> import numpy as np
    >>> from strads.estimators import Lasso
    >>> X = np.random.default_rng(0).standard_normal((100, 20))
    >>> y = X[:, 0] - 2 * X[:, 3] + 1
    >>> est = Lasso(alpha=0.05).fit(X, y)
    >>> np.flatnonzero(np.abs(est.coef_) > 0.5).tolist()
    [0, 3]
    """

    def __init__(self, alpha=1.0, fit_intercept=True, schedule="working-set", tol=1e-6,
                 max_iter=100000, n_jobs=None, staleness=0, random_state=None,
                 warm_start=False):
        self._set_params(locals())

    _parameter_constraints = {**_LinearModel._parameter_constraints,
                              **sklearn_constraints(ENGINE, dict(staleness="staleness"))}

    @collective
    @_fit_context(prefer_skip_nested_validation=True)
    def fit(self, X, y):
        """Fit to X (n_samples, n_features; any scipy.sparse format, used as CSC) and
        targets y; -> self, on every rank under ``mpiexec``."""
        X, y = _validated(self, X, y, y_numeric=True, multi_output=False)
        X, kw = self._run_args(X)

        def fitted(res):
            gap = float(res.extra.get("duality_gap", np.nan))
            self._warn_unconverged(res, f" with duality gap {gap:.3g}")
            return {"coef_": res.model["coef"],
                    "intercept_": float(res.model.get("intercept", 0.0)),
                    "n_iter_": int(res.rounds), "dual_gap_": gap}

        return _set(self, _collective(lasso.fit, (X, y), kw, fitted))

    def _run_args(self, X):
        """X as the app takes it (validated) and the app's arguments."""
        most = lasso.max_staleness(X.shape[1], 256)  # the app's bound, at its block 256
        if self.staleness > most:
            raise ValueError(f"staleness {self.staleness} is above the useful maximum "
                             f"{most} for {X.shape[1]} features (rounds in flight hold "
                             "disjoint coordinates)")
        if sp.issparse(X) and not X.has_canonical_format:
            X = X.copy()  # the app sums duplicates in place: not in the caller's matrix
            X.sum_duplicates()
        return X, dict(self._app_kwargs(X), staleness=int(self.staleness),
                       intercept=bool(self.fit_intercept), coef0=self._coef0(X),
                       gap_ref="null")


class SparseLogisticRegression(ClassifierMixin, _LinearModel):
    """L1-penalised logistic regression by scheduled coordinate descent (the strads logreg
    app).

    Minimises ``(1/n) sum_i log(1 + exp(-y_i (x_i' w + c))) + alpha ||w||_1`` over two
    classes (y in {-1, +1}: ``classes_[0]`` is -1). The intercept ``c`` is fitted as the
    coefficient of a constant column of value ``intercept_scaling`` appended to X, so
    its penalty is ``alpha |c| / intercept_scaling``: nearly, not exactly, unpenalised
    (as liblinear's intercept).

    Parameters
    ----------
    alpha : float, default=0.01
        L1 penalty (the app's ``lambda``), > 0.
    fit_intercept : bool, default=True
        Fit an intercept (see above).
    intercept_scaling : float, default=100.0
        Value of the appended constant column.
    tol : float, default=1e-5
        Stop when the duality gap is at most ``tol`` times the null model's objective
        (the intercept-only model's mean loss, the entropy of the class shares; log 2
        without ``fit_intercept``), as scikit-learn's Lasso scales its tol by the null
        model's: the logistic loss's dual point is the gradient scaled into the
        constraints, so on nearly separable data (alpha ||w||_1 most of the objective)
        the gap stays far above the objective's own error (docs/benchmarks.md, logistic
        regression).
    schedule, max_iter, n_jobs, random_state, warm_start
        As for :class:`Lasso` (the schedules: the README's logistic regression section).

    Attributes
    ----------
    classes_ : ndarray of shape (2,)
        The two class labels, sorted.
    coef_ : ndarray of shape (1, n_features)
        The coefficients.
    intercept_ : ndarray of shape (1,)
        The intercept (0.0 without ``fit_intercept``).
    n_iter_ : int
        Rounds of the engine.
    n_features_in_, feature_names_in_
        As for :class:`Lasso`.

    See Also
    --------
    sklearn.linear_model.LogisticRegression : penalty="l1", solver="liblinear",
        C = 1 / (n alpha) gives the same minimiser without intercept.
    """

    def __init__(self, alpha=0.01, fit_intercept=True, intercept_scaling=100.0,
                 schedule="working-set", tol=1e-5, max_iter=100000, n_jobs=None,
                 random_state=None, warm_start=False):
        self._set_params(locals())

    # the logistic loss's lambda is > 0: at 0, separable data has no minimiser
    _parameter_constraints = {**_LinearModel._parameter_constraints, "alpha": _POSITIVE,
                              "intercept_scaling": _POSITIVE}

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.classifier_tags.multi_class = False
        return tags

    @collective
    @_fit_context(prefer_skip_nested_validation=True)
    def fit(self, X, y):
        """Fit to X (n_samples, n_features) and labels y of exactly two classes; ->
        self, on every rank under ``mpiexec``."""
        from ..apps import logreg

        X, y = _validated(self, X, y)
        # (type_of_target costs ~0.4 ms a fit: boolean or integer labels of at most two
        # values are "binary" by its rules)
        kind = "binary" if y.dtype.kind in "biu" and np.unique(y).shape[0] <= 2 else \
            type_of_target(y, input_name="y")
        if kind != "binary":
            check_classification_targets(y)  # (its refusal of a regression target first)
            raise ValueError("Only binary classification is supported. The type of the "
                             f"target is {kind}.")
        classes = np.unique(y)
        if classes.shape[0] != 2:
            raise ValueError(f"SparseLogisticRegression needs samples of exactly two "
                             f"classes; got {classes.shape[0]} class(es): {classes[:5]}")
        signs = np.where(y == classes[1], 1.0, -1.0)
        Xa = _with_column(X, float(self.intercept_scaling)) if self.fit_intercept else X
        kw = dict(self._app_kwargs(X), intercept_column=self.fit_intercept, gap_ref="null")
        coef0 = self._coef0(X)
        if coef0 is not None:
            c0 = float(np.ravel(self.intercept_)[0]) / self.intercept_scaling
            kw["coef0"] = np.append(coef0, c0) if self.fit_intercept else coef0
        elif self.fit_intercept:  # from the null model: its intercept, the classes' log-odds
            p = float(np.mean(signs > 0))
            kw["coef0"] = np.append(np.zeros(X.shape[1]),
                                    np.log(p / (1 - p)) / self.intercept_scaling)

        def fitted(res):
            w = np.asarray(res.model["coef"], dtype=np.float64)
            self._warn_unconverged(res)
            c = w[-1] * self.intercept_scaling if self.fit_intercept else 0.0
            w = w[:-1] if self.fit_intercept else w
            return {"classes_": classes, "coef_": w.reshape(1, -1),
                    "intercept_": np.array([float(c)]), "n_iter_": int(res.rounds)}

        return _set(self, _collective(logreg.fit, (Xa, signs), kw, fitted))

    def decision_function(self, X):
        """``X @ coef_ + intercept_``: positive for ``classes_[1]``."""
        return _LinearModel.predict(self, X)

    def predict(self, X):
        """The class of each sample."""
        check_is_fitted(self, "coef_")
        return self.classes_[(self.decision_function(X) > 0).astype(np.intp)]

    def predict_proba(self, X):
        """Probabilities of ``classes_[0]`` and ``classes_[1]`` (columns)."""
        p1 = expit(self.decision_function(X))
        return np.column_stack([1 - p1, p1])

    def predict_log_proba(self, X):
        """Logarithms of :meth:`predict_proba`."""
        d = self.decision_function(X)  # log sigmoid(d) = -log1p(exp(-d)), stably:
        return np.column_stack([-np.logaddexp(0, d), -np.logaddexp(0, -d)])


def _with_column(X, value):
    """X (CSC or dense) with a constant column appended; CSC built directly (scipy's
    hstack converts the column and checks the blocks: a tenth of a small fit's set-up)."""
    n = X.shape[0]
    if not sp.issparse(X):
        return np.hstack([X, np.full((n, 1), value)])
    nnz = X.nnz
    idx = np.int64 if nnz + n > np.iinfo(np.int32).max else X.indices.dtype
    return sp.csc_matrix((np.concatenate([X.data[:nnz], np.full(n, value)]),
                          np.concatenate([X.indices[:nnz], np.arange(n)]).astype(idx),
                          np.append(X.indptr, nnz + n).astype(idx)), shape=(n, X.shape[1] + 1))


# -- the regularisation path ----------------------------------------------------------------
def _alpha_grid(X, y, fit_intercept, eps, n_alphas, alphas=None):
    """``alphas`` largest first, or (None) scikit-learn's grid: n_alphas from alpha_max =
    max |Xc'yc| / n down to eps times it, evenly on a log scale (Xc, yc: centred with an
    intercept). An int ``alphas`` is the grid's length (as scikit-learn's since 1.7)."""
    if isinstance(alphas, Integral) and not isinstance(alphas, bool):
        n_alphas, alphas = alphas, None
    if alphas is not None:
        alphas = np.asarray(alphas, dtype=np.float64).ravel()
        bad = np.flatnonzero(~(alphas >= 0) | ~np.isfinite(alphas))
        if bad.size or not alphas.size:  # (as scikit-learn's words)
            raise ValueError(f"alphas[{bad[0]}] == {alphas[bad[0]]}, must be >= 0.0 and "
                             "finite" if bad.size else "alphas is empty")
        return np.sort(alphas)[::-1]
    n = X.shape[0]
    yc = y - y.mean() if fit_intercept else y
    xty = np.asarray(safe_sparse_dot(X.T, yc)).ravel()
    if fit_intercept:
        xty -= np.asarray(X.mean(axis=0)).ravel() * yc.sum()
    alpha_max = np.abs(xty).max() / n
    if alpha_max <= np.finfo(float).resolution:
        return np.full(n_alphas, np.finfo(float).resolution)
    return np.geomspace(alpha_max, alpha_max * eps, num=n_alphas)


def _path(X, y, alphas, params):
    """Lasso fits over ``alphas`` (decreasing), each warm-started from the one before, in
    one run of the app (its set-up and the engine's paid once): (coefs (n_features,
    n_alphas), intercepts, dual gaps, rounds)."""
    est = Lasso(alpha=float(alphas[0]), **params)
    est._validate_params()
    X, kw = est._run_args(X)
    # max_iter is each alpha's, as scikit-learn's
    kw.update(path=alphas, path_rounds=kw["max_rounds"],
              max_rounds=kw["max_rounds"] * len(alphas))

    def fitted(res):
        m = res.model
        late = np.flatnonzero(~m["path_solved"])
        if est.tol > 0 and late.shape[0]:
            warnings.warn(f"lasso path did not converge at {late.shape[0]} of "
                          f"{len(alphas)} alphas (the first {alphas[late[0]]:.3g}, "
                          f"duality gap {m['path_gap'][late[0]]:.3g}); raise max_iter or "
                          "tol", ConvergenceWarning)
        return {"coefs": m["path_coef"], "gaps": m["path_gap"],
                "rounds": int(m["path_rounds"].sum()),
                "intercepts": m.get("path_intercept", np.zeros(len(alphas)))}

    out = _collective(lasso.fit, (X, y), kw, fitted)
    return out["coefs"], out["intercepts"], out["gaps"], out["rounds"]


@collective
def lasso_path(X, y, *, eps=1e-3, n_alphas=100, alphas=None, **params):
    """The Lasso over a grid of alphas, largest first, each fit warm-started from the
    last, as :func:`sklearn.linear_model.lasso_path` (no intercept, unless
    ``fit_intercept=True`` is among ``params``, the :class:`Lasso`'s parameters; its
    ``max_iter`` is each alpha's). One run of the app solves them all.

    Returns ``(alphas, coefs, dual_gaps)``: coefs of shape (n_features, n_alphas)."""
    X, y = _validated(Lasso(), X, y, y_numeric=True, multi_output=False)
    params = {"fit_intercept": False, **params}
    alphas = _alpha_grid(X, y, params["fit_intercept"], eps, n_alphas, alphas)
    coefs, _, gaps, _ = _path(X, y, alphas, params)
    return alphas, coefs, gaps


class LassoCV(RegressorMixin, _LinearModel):
    """Lasso with alpha chosen by cross-validation along a regularisation path (each
    fold's path warm-started from large to small alpha), as
    :class:`sklearn.linear_model.LassoCV`; then a fit on all the data at the best alpha.

    Parameters
    ----------
    eps, n_alphas, alphas
        The grid, as :func:`lasso_path` (alphas None: ``n_alphas`` from alpha_max down
        to ``eps`` alpha_max; an int: that many, as scikit-learn's since 1.7).
    cv : int, cross-validation generator or iterable, default=5
        The folds (scikit-learn's ``check_cv``: an int is a KFold).
    fit_intercept, schedule, tol, max_iter, n_jobs, random_state
        As for :class:`Lasso`.

    Attributes
    ----------
    alpha_ : float
        The alpha of the least mean squared error over the folds.
    alphas_ : ndarray of shape (n_alphas,)
        The grid, largest first.
    mse_path_ : ndarray of shape (n_alphas, n_folds)
        Each fold's test mean squared error along the path.
    coef_, intercept_, dual_gap_, n_iter_, n_features_in_, feature_names_in_
        Of the final fit, as for :class:`Lasso`.
    """

    def __init__(self, *, eps=1e-3, n_alphas=100, alphas=None, fit_intercept=True,
                 cv=5, schedule="working-set", tol=1e-6, max_iter=100000, n_jobs=None,
                 random_state=None):
        self._set_params(locals())

    _parameter_constraints = {
        **{k: v for k, v in _LinearModel._parameter_constraints.items()
           if k not in ("alpha", "warm_start")}, "eps": _POSITIVE, "cv": ["cv_object"],
        "n_alphas": [Interval(Integral, 1, None, closed="left")],
        "alphas": [Interval(Integral, 1, None, closed="left"), "array-like", None]}

    @collective
    @_fit_context(prefer_skip_nested_validation=True)
    def fit(self, X, y):
        """Fit the path on each fold, choose alpha, fit on all of ``X``, ``y``."""
        from sklearn.model_selection import check_cv

        X, y = _validated(self, X, y, y_numeric=True, multi_output=False)
        params = {k: getattr(self, k) for k in _LASSO}
        alphas = _alpha_grid(X, y, self.fit_intercept, self.eps, self.n_alphas, self.alphas)
        folds = list(check_cv(self.cv).split(X, y))
        mse = np.empty((len(alphas), len(folds)))
        for f, (train, test) in enumerate(folds):
            coefs, intercepts, _, _ = _path(X[train], y[train], alphas, params)
            pred = np.asarray(safe_sparse_dot(X[test], coefs)) + intercepts
            mse[:, f] = ((pred - y[test][:, None]) ** 2).mean(axis=0)
        best = int(np.argmin(mse.mean(axis=1)))
        if not lasso.path_from_gram(not sp.issparse(X), *X.shape):
            final = Lasso(alpha=float(alphas[best]), **params).fit(X, y)
            fitted = {"coef_": final.coef_, "intercept_": final.intercept_,
                      "dual_gap_": final.dual_gap_, "n_iter_": final.n_iter_}
        else:  # the path down to alpha_, as the folds' (from one Gram)
            coefs, intercepts, gaps, rounds = _path(X, y, alphas[:best + 1], params)
            fitted = {"coef_": coefs[:, -1], "intercept_": float(intercepts[-1]),
                      "dual_gap_": float(gaps[-1]), "n_iter_": rounds}
        return _set(self, {"alpha_": float(alphas[best]), "alphas_": alphas,
                           "mse_path_": mse, **fitted})

    def _saved_as(self):
        return _final_fit(self, Lasso, _LASSO, "mse_path_")


def _final_fit(cv, cls, names, path):
    """A CV estimator's final fit as a ``cls`` at ``alpha_``, which ``save`` writes and
    :func:`strads.load` returns (the same predictions; not the folds' ``path``)."""
    est = cls(alpha=cv.alpha_, **{k: getattr(cv, k) for k in names})
    return _set(est, {k: v for k, v in vars(cv).items() if k.endswith("_")
                      and k not in ("alpha_", "alphas_", path)})


class SparseLogisticRegressionCV(SparseLogisticRegression):
    """:class:`SparseLogisticRegression` with alpha chosen by cross-validation along a
    regularisation path (each fold's fits warm-started from large to small alpha), as
    :class:`sklearn.linear_model.LogisticRegressionCV` with an L1 penalty; then a fit on
    all the data at the best alpha.

    Parameters
    ----------
    eps, n_alphas, alphas
        The grid, as :class:`LassoCV`'s, from alpha_max = ``||X'(t - p)||_inf / n`` (t: 1
        for ``classes_[1]``, else 0; p: that class's share, or 1/2 without
        ``fit_intercept``), where every coefficient is 0 (with an intercept, whose
        penalty alpha / intercept_scaling moves it a little, one may be just above 0);
        given alphas must be > 0.
    cv : int, cross-validation generator or iterable, default=5
        The folds (scikit-learn's ``check_cv`` for a classifier: an int is a
        StratifiedKFold).
    scoring : str, callable or None, default=None
        A fold's score on its held-out samples, higher is better (scikit-learn's
        ``check_scoring``; None: accuracy, as LogisticRegressionCV's).
    fit_intercept, intercept_scaling, schedule, tol, max_iter, n_jobs, random_state
        As for :class:`SparseLogisticRegression`.

    Attributes
    ----------
    alpha_ : float
        The alpha of the best mean score over the folds (the largest of equal ones).
    alphas_ : ndarray of shape (n_alphas,)
        The grid, largest first.
    score_path_ : ndarray of shape (n_alphas, n_folds)
        Each fold's held-out score along the path.
    classes_, coef_, intercept_, n_iter_, n_features_in_, feature_names_in_
        Of the final fit, as for :class:`SparseLogisticRegression`.
    """

    def __init__(self, *, eps=1e-3, n_alphas=100, alphas=None, fit_intercept=True,
                 intercept_scaling=100.0, cv=5, scoring=None, schedule="working-set",
                 tol=1e-5, max_iter=100000, n_jobs=None, random_state=None):
        self._set_params(locals())

    _parameter_constraints = {
        **{k: v for k, v in SparseLogisticRegression._parameter_constraints.items()
           if k not in ("alpha", "warm_start")},
        **{k: LassoCV._parameter_constraints[k] for k in ("eps", "n_alphas", "alphas", "cv")},
        "scoring": [str, callable, None]}

    @collective
    @_fit_context(prefer_skip_nested_validation=True)
    def fit(self, X, y):
        """Fit the path on each fold, choose alpha, fit on all of ``X``, ``y``."""
        from sklearn.metrics import check_scoring
        from sklearn.model_selection import check_cv

        X, y = _validated(self, X, y)
        params = {k: getattr(self, k) for k in _LOGREG}
        classes = np.unique(y)
        t = (y == classes[-1]) - 0.5  # (alpha_max: _alpha_grid centres it with an intercept)
        alphas = _alpha_grid(X, t, self.fit_intercept, self.eps, self.n_alphas, self.alphas)
        if not alphas[-1] > 0:
            raise ValueError(f"alphas must be > 0 for the logistic loss; got {alphas[-1]}")
        scorer = check_scoring(SparseLogisticRegression(), scoring=self.scoring)
        folds = list(check_cv(self.cv, y, classifier=True).split(X, y))
        scores = np.empty((len(alphas), len(folds)))
        for f, (train, test) in enumerate(folds):
            est = SparseLogisticRegression(warm_start=True, **params)
            for k, a in enumerate(alphas):
                est.set_params(alpha=float(a)).fit(X[train], y[train])
                scores[k, f] = scorer(est, X[test], y[test])
        best = int(np.argmax(scores.mean(axis=1)))
        final = SparseLogisticRegression(alpha=float(alphas[best]), **params).fit(X, y)
        return _set(self, {"alpha_": float(alphas[best]), "alphas_": alphas,
                           "score_path_": scores, "classes_": final.classes_,
                           "coef_": final.coef_, "intercept_": final.intercept_,
                           "n_iter_": final.n_iter_})

    def _saved_as(self):
        return _final_fit(self, SparseLogisticRegression, _LOGREG, "score_path_")


def _validated(est, X, y, **kw):
    """scikit-learn's validate_data for a fit (X as CSC), once X's size is known to fit:
    a sparse X of 10^12 columns is refused by the solve's size check, before the CSC
    conversion asks for its indptr."""
    if sp.issparse(X) and len(X.shape) == 2:
        check_size("X", *X.shape, nnz=X.nnz)
    return validate_data(est, X, y, accept_sparse="csc", dtype=np.float64, **kw)
