"""scikit-learn estimators on the strads engine: :class:`Lasso`,
:class:`MatrixFactorization` and :class:`LDA`.

Each ``fit`` validates its input with scikit-learn's helpers and then calls the app's own
``fit()`` (:func:`strads.apps.lasso.fit`, :func:`strads.apps.mf.fit`,
:func:`strads.apps.lda.fit`), which runs on :func:`strads.run`: the same schedules,
kernels and results as the command lines, in one process (``n_jobs`` workers, each on a
thread of its own) or under ``mpiexec``.

Under ``mpiexec -n N`` every rank runs the same script: rank 0 schedules, ranks 1..N-1
are the workers (``n_jobs`` is then ignored: there are N-1 workers). Every rank must call
``fit`` with the same arguments; the data is read on rank 0 only (the workers receive
their shards from it). When the run ends, rank 0 broadcasts the fitted attributes, so
``fit`` returns the same fitted estimator on every rank and the code after it
(``predict``, ``transform``, printing) runs unchanged everywhere; guard output that
should happen once with ``if MPI.COMM_WORLD.rank == 0``. An exception on any rank ends
the whole job (its traceback, then ``MPI_Abort``), as in :func:`strads.run`.

This module imports scikit-learn; ``import strads`` does not (``strads.Lasso`` and the
others are loaded on first use).
"""
import contextlib
import numbers
import os
import warnings

import numpy as np
import scipy.sparse as sp
from sklearn.base import (BaseEstimator, ClassifierMixin, ClassNamePrefixFeaturesOutMixin,
                          RegressorMixin, TransformerMixin)
from sklearn.exceptions import ConvergenceWarning
from sklearn.utils import check_random_state
from sklearn.utils.extmath import safe_sparse_dot
from sklearn.utils.multiclass import check_classification_targets, type_of_target
from sklearn.utils.validation import (check_array, check_is_fitted, check_non_negative,
                                      validate_data)

from .transport import mpi_job

__all__ = ["Lasso", "MatrixFactorization", "LDA"]


# -- shared helpers ------------------------------------------------------------------------
def _n_workers(n_jobs, *caps):
    """Workers in one process: None -> 1, -1 -> os.cpu_count(), -2 -> one less, ...
    (joblib's convention), at most ``min(caps)`` (what the app can split the data into)."""
    if n_jobs is None:
        n = 1
    elif isinstance(n_jobs, numbers.Integral) and not isinstance(n_jobs, bool) and n_jobs != 0:
        n = int(n_jobs) if n_jobs > 0 else max(1, (os.cpu_count() or 1) + 1 + int(n_jobs))
    else:
        raise ValueError(f"n_jobs must be None or a non-zero integer, got {n_jobs!r}")
    return max(1, min([n] + [int(c) for c in caps]))


def _seed(random_state):
    """The app's seed: an int as it is (>= 0), else one drawn from the RandomState or
    Generator (None: numpy's global RandomState, as scikit-learn does)."""
    if isinstance(random_state, numbers.Integral) and not isinstance(random_state, bool):
        if random_state < 0:
            raise ValueError(f"random_state must be >= 0, got {random_state}")
        return int(random_state)
    if isinstance(random_state, np.random.Generator):
        return int(random_state.integers(0, 2 ** 31 - 1))
    return int(check_random_state(random_state).randint(0, 2 ** 31 - 1))


def _check_number(name, value, low=None, integer=False, inclusive=True):
    kind = numbers.Integral if integer else numbers.Real
    if not isinstance(value, kind) or isinstance(value, bool) or not np.isfinite(value):
        raise ValueError(f"{name} must be a finite {'integer' if integer else 'number'}, "
                         f"got {value!r}")
    if low is not None and (value < low or (not inclusive and value == low)):
        raise ValueError(f"{name} must be {'>=' if inclusive else '>'} {low}, got {value!r}")


def _check_choice(name, value, choices):
    if not isinstance(value, str) or value not in choices:
        raise ValueError(f"{name} must be one of {sorted(choices)}, got {value!r}")


@contextlib.contextmanager
def _whole_job(job):
    """Under MPI, an exception ends the whole job (traceback, then MPI_Abort), since the
    other ranks wait in a collective call; in one process it propagates."""
    if job is None:
        yield
        return
    try:
        yield
    except BaseException as exc:  # noqa: BLE001 -- never leave the other ranks waiting
        job.abort(exc)


def _collective(fit_scheduler, serve):
    """Run a fit on every rank and return the fitted attributes everywhere.

    ``fit_scheduler(run)`` runs on rank 0 (or alone, in one process) and returns the
    fitted attributes; it starts each engine run with ``run(fn, *args, **kw)``. Under
    MPI, ``serve()`` is what a worker rank does for each of those runs (the same app
    ``fit()`` with its own arguments: only rank 0's data is used), told by a broadcast
    whether another run follows; then rank 0 broadcasts the attributes."""
    job = mpi_job()
    if job is None:
        return fit_scheduler(lambda fn, *a, **kw: fn(*a, **kw))
    with _whole_job(job):
        if job.rank == 0:
            def run(fn, *a, **kw):
                job.bcast(True)
                return fn(*a, **kw)

            attrs = fit_scheduler(run)
            job.bcast(False)
        else:
            while job.bcast(None):
                serve()
            attrs = None
        return job.bcast(attrs)


def _set(est, attrs):
    for k, v in attrs.items():
        setattr(est, k, v)
    return est


# -- Lasso ---------------------------------------------------------------------------------
class Lasso(RegressorMixin, BaseEstimator):
    """Lasso by scheduled parallel coordinate descent (the strads Lasso app).

    Minimises ``1 / (2 n_samples) ||y - X w - c||^2 + alpha ||w||_1``, the objective of
    :class:`sklearn.linear_model.Lasso`, with the intercept ``c`` unpenalised (0 without
    ``fit_intercept``). The fit is :func:`strads.apps.lasso.fit`, which has no
    intercept, so:

    * dense ``X``: the app solves the problem on centered ``X`` and ``y`` (one run; the
      centered copy is the one copy the app would make of a C-ordered ``X`` anyway),
      and ``intercept_ = mean(y) - mean(X) @ coef_``;
    * sparse ``X`` is never centered (that would make it dense). The optimum is the
      point where ``c = mean(y - X w(c))``, ``w(c)`` the no-intercept Lasso on
      ``(X, y - c)``. ``G(c) = c - mean(y) + mean(X) @ w(c)`` is continuous,
      non-decreasing and piecewise linear in ``c`` (slope in [0, 1], constant while the
      signs of ``w(c)`` do not change). A first run solves ``[X, s 1]`` (one constant
      column appended, a copy of X; its coefficient's penalty ``alpha |c| / s`` is
      negligible: ``|G| <= 1e-6`` of y's scale at its answer, more at tol < 2e-9), which
      starts next to the root; then a safeguarded secant search on ``G`` (regula falsi
      with the Illinois rule once the root is bracketed) runs the app on
      ``(X, y - c)`` and stops when a linear step between two points of one sign
      pattern lands on that pattern again: the exact root. Usually 3-5 runs in all;
      the answer is the optimum with intercept to the solver's tolerance, as for
      dense input.

    Parameters
    ----------
    alpha : float, default=1.0
        L1 penalty (the app's ``lambda``), >= 0.
    fit_intercept : bool, default=True
        Fit an unpenalised intercept.
    schedule : {"working-set", "priority", "round-robin", "random"}, default="working-set"
        The app's schedule (see the README's Lasso section).
    tol : float, default=1e-6
        Stop when the duality gap is at most ``tol`` times the objective (the app's
        rule; 0 turns it off and the run goes on for ``max_iter`` rounds).
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

    Attributes
    ----------
    coef_ : ndarray of shape (n_features,)
        The coefficients.
    intercept_ : float
        The intercept (0.0 without ``fit_intercept``).
    n_iter_ : int
        Rounds of the engine (summed over the runs of the intercept search for
        sparse ``X``).
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

    MAX_SOLVES = 50  # runs of the intercept search for sparse X, at most

    def __init__(self, alpha=1.0, fit_intercept=True, schedule="working-set", tol=1e-6,
                 max_iter=100000, n_jobs=None, staleness=0, random_state=None):
        self.alpha = alpha
        self.fit_intercept = fit_intercept
        self.schedule = schedule
        self.tol = tol
        self.max_iter = max_iter
        self.n_jobs = n_jobs
        self.staleness = staleness
        self.random_state = random_state

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.sparse = True
        return tags

    def fit(self, X, y):
        """Fit the model.

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features)
            Training data (any scipy.sparse format; used as CSC).
        y : array-like of shape (n_samples,)
            Target values.

        Returns
        -------
        self : object
            The fitted estimator (on every rank under ``mpiexec``).
        """
        from .apps import lasso

        X, y = validate_data(self, X, y, accept_sparse="csc", dtype=np.float64,
                             y_numeric=True, multi_output=False)
        _check_number("alpha", self.alpha, 0)
        _check_number("tol", self.tol, 0)
        _check_number("max_iter", self.max_iter, 1, integer=True)
        _check_number("staleness", self.staleness, 0, integer=True)
        if not isinstance(self.fit_intercept, (bool, np.bool_)):
            raise ValueError(f"fit_intercept must be True or False, got {self.fit_intercept!r}")
        _check_choice("schedule", self.schedule, lasso.SCHEDULES)
        most = lasso.max_staleness(X.shape[1], 256)  # the app's bound, at its block 256
        if self.staleness > most:
            raise ValueError(f"staleness {self.staleness} is above the useful maximum "
                             f"{most} for {X.shape[1]} features (rounds in flight hold "
                             "disjoint coordinates)")
        if sp.issparse(X) and not X.has_canonical_format:
            X = X.copy()  # the app sums duplicates in place: not in the caller's matrix
            X.sum_duplicates()
        kw = dict(lam=float(self.alpha), schedule=self.schedule, seed=_seed(self.random_state),
                  tol=float(self.tol), max_rounds=int(self.max_iter),
                  workers=_n_workers(self.n_jobs, X.shape[0]),
                  staleness=int(self.staleness), quiet=True)
        attrs = _collective(lambda run: self._fit_scheduler(run, lasso.fit, X, y, kw),
                            lambda: lasso.fit(X, y, **kw))
        return _set(self, attrs)

    def _fit_scheduler(self, run, fit, X, y, kw):
        results = []

        def solve(Xs, ys):
            res = run(fit, Xs, ys, **kw)
            results.append(res)
            return res

        if not self.fit_intercept:
            used = solve(X, y)
            coef, intercept = used.model["coef"], 0.0
        elif not sp.issparse(X):
            x_mean, y_mean = X.mean(axis=0), float(y.mean())
            Xc = np.array(X, order="F")  # the one copy: centered in place
            Xc -= x_mean
            used = solve(Xc, y - y_mean)
            coef = used.model["coef"]
            intercept = y_mean - float(x_mean @ coef)
        else:
            coef, intercept, used = self._sparse_intercept(solve, X, y)
        if self.tol > 0 and used.stop_reason != "tol":
            warnings.warn(f"Lasso did not converge: the run stopped by {used.stop_reason!r} "
                          f"after {used.rounds} rounds with duality gap "
                          f"{float(used.extra.get('duality_gap', np.nan)):.3g}; raise "
                          "max_iter or tol", ConvergenceWarning)
        return {"coef_": coef, "intercept_": float(intercept),
                "n_iter_": int(sum(r.rounds for r in results)),
                "dual_gap_": float(used.extra.get("duality_gap", np.nan))}

    def _sparse_intercept(self, solve, X, y):
        """The Lasso with intercept on sparse X, X uncentered: the root of
        G(c) = c - mean(y) + mean(X) @ w(c) (see the class docstring). Returns the
        coefficients, the intercept and the run they come from."""
        x_mean = np.asarray(X.mean(axis=0)).ravel()
        y_mean = float(y.mean())
        floor = 1e-13 * max(abs(y_mean), float(y.std()), np.finfo(float).tiny)
        cs, gs, coefs, signs, runs = [], [], [], [], []

        def record(c, res, coef):
            cs.append(c)
            gs.append(c - y_mean + float(x_mean @ coef))
            coefs.append(coef)
            signs.append(np.sign(coef))
            runs.append(res)
            return len(cs) - 1

        def evaluate(c):
            res = solve(X, y - c)
            return record(c, res, res.model["coef"])

        def unconverged(k):  # a run short of tol: G is no more exact than its w
            return self.tol > 0 and runs[k].stop_reason != "tol"

        # Start: the Lasso on [X, s 1], the constant column penalised only by
        # alpha |c| / s: its w is w(c) at its c exactly, and |G| there is at most
        # alpha / s = delta times y's scale, so the start is next to the root, usually
        # on its linear piece. delta is 1e-6, or more at a small tol: that run's gap
        # rule reads the constant column's s 1'r, whose float rounding (about
        # eps sum |r|) s multiplies, and that must stay well below tol.
        scale = max(abs(y_mean), float(y.std()))
        delta = 1e-6 if self.tol == 0 else \
            float(np.clip(10 * np.finfo(float).eps / self.tol, 1e-6, 1e-2))
        s = 1.0 if self.alpha == 0 or scale == 0 else \
            float(np.clip(self.alpha / (delta * scale), 1.0, 1e12))
        ones = sp.csc_matrix(np.full((X.shape[0], 1), s))
        res = solve(sp.hstack([X, ones], format="csc"), y)
        aug = res.model["coef"]
        record(s * aug[-1], res, aug[:-1])
        cur, prev = 0, None
        weight = {}  # Illinois rule: factors on the G of a bracket end kept twice
        side = None  # which end of the bracket the last step replaced
        done = abs(gs[cur]) <= floor
        while not done and len(cs) < self.MAX_SOLVES and not unconverged(cur):
            neg = [k for k in range(len(cs)) if gs[k] < 0]
            pos = [k for k in range(len(cs)) if gs[k] > 0]
            bracket = bool(neg and pos)
            if bracket:  # regula falsi with the Illinois rule
                lo = max(neg, key=lambda k: cs[k])
                hi = min(pos, key=lambda k: cs[k])
                if cs[lo] >= cs[hi]:  # G is monotone: only solver noise does this
                    break
                glo, ghi = gs[lo] * weight.get(lo, 1.0), gs[hi] * weight.get(hi, 1.0)
                c = cs[lo] - glo * (cs[hi] - cs[lo]) / (ghi - glo)
                if not cs[lo] < c < cs[hi]:
                    c = 0.5 * (cs[lo] + cs[hi])
                if not cs[lo] < c < cs[hi]:  # as narrow as floats go
                    break
                base = (lo, hi) if lo not in weight and hi not in weight else None
            elif prev is None:  # G has slope <= 1: this step never passes the root
                c, base = cs[cur] - gs[cur], None
            else:  # G had the same sign twice: secant, or twice the step where G is flat
                dc = cs[cur] - cs[prev]
                slope = (gs[cur] - gs[prev]) / dc
                step = gs[cur] / slope if slope > 0 else 2 * abs(dc) * np.sign(gs[cur])
                c, base = cs[cur] - step, (prev, cur)
            if not np.isfinite(c) or c == cs[cur]:
                break
            prev, cur = cur, evaluate(c)
            if bracket and gs[cur] != 0:
                new_side = "lo" if gs[cur] < 0 else "hi"
                if new_side == side:  # the other end was kept twice: halve its G
                    keep = hi if new_side == "lo" else lo
                    weight[keep] = weight.get(keep, 1.0) * 0.5
                side = new_side
            # done: |G| at rounding level, or a linear step between two points of one
            # sign pattern that lands on it again (G is linear there: the exact root,
            # up to the solver's tolerance)
            done = abs(gs[cur]) <= floor or (
                base is not None and all(np.array_equal(signs[k], signs[cur]) for k in base)
                and abs(gs[cur]) <= 0.5 * min(abs(gs[k]) for k in base))
        best = min(range(len(cs)), key=lambda k: abs(gs[k]))
        if not done and len(cs) >= self.MAX_SOLVES:
            warnings.warn(f"Lasso: the intercept search for sparse X stopped after "
                          f"{len(cs)} runs with |mean residual| {abs(gs[best]):.3g}",
                          ConvergenceWarning)
        coef = coefs[best]
        return coef, y_mean - float(x_mean @ coef), runs[best]

    def predict(self, X):
        """Predict with the linear model.

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features)
            Samples.

        Returns
        -------
        y_pred : ndarray of shape (n_samples,)
            ``X @ coef_ + intercept_``.
        """
        check_is_fitted(self, "coef_")
        X = validate_data(self, X, accept_sparse=["csr", "csc", "coo"],
                          dtype=[np.float64, np.float32], reset=False)
        return np.asarray(safe_sparse_dot(X, self.coef_, dense_output=True)).ravel() \
            + self.intercept_


# -- sparse logistic regression -----------------------------------------------------------
class SparseLogisticRegression(ClassifierMixin, BaseEstimator):
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
    schedule : {"working-set", "priority", "round-robin", "random"}, default="working-set"
        The app's schedule (see the README's logistic regression section).
    tol : float, default=1e-6
        Stop when the duality gap is at most ``tol`` times the objective.
    max_iter : int, default=100000
        Most rounds of the engine.
    n_jobs : int, default=None
        Workers in one process, each on a thread of its own: None -> 1, -1 -> all cores.
        Ignored under ``mpiexec`` (N-1 workers).
    random_state : int, RandomState instance or None, default=None
        The app's seed (randomised schedules only).

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
    n_features_in_ : int
        Number of features seen during fit.
    feature_names_in_ : ndarray of shape (n_features_in_,)
        Names of the features seen during fit (only when X has string column names).

    See Also
    --------
    sklearn.linear_model.LogisticRegression : penalty="l1", solver="liblinear",
        C = 1 / (n alpha) gives the same minimiser without intercept.
    """

    def __init__(self, alpha=0.01, fit_intercept=True, intercept_scaling=100.0,
                 schedule="working-set", tol=1e-6, max_iter=100000, n_jobs=None,
                 random_state=None):
        self.alpha = alpha
        self.fit_intercept = fit_intercept
        self.intercept_scaling = intercept_scaling
        self.schedule = schedule
        self.tol = tol
        self.max_iter = max_iter
        self.n_jobs = n_jobs
        self.random_state = random_state

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.sparse = True
        tags.classifier_tags.multi_class = False
        return tags

    def fit(self, X, y):
        """Fit the model.

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features)
            Training data.
        y : array-like of shape (n_samples,)
            Labels of exactly two classes.

        Returns
        -------
        self : object
            The fitted estimator (on every rank under ``mpiexec``).
        """
        from .apps import logreg

        X, y = validate_data(self, X, y, accept_sparse="csc", dtype=np.float64)
        check_classification_targets(y)
        kind = type_of_target(y)
        if kind != "binary":
            raise ValueError("Only binary classification is supported. The type of the "
                             f"target is {kind}.")
        classes = np.unique(y)
        if classes.shape[0] != 2:
            raise ValueError(f"SparseLogisticRegression needs samples of exactly two "
                             f"classes; got {classes.shape[0]} class(es): {classes[:5]}")
        _check_number("alpha", self.alpha, 0, inclusive=False)
        _check_number("intercept_scaling", self.intercept_scaling, 0, inclusive=False)
        _check_number("tol", self.tol, 0)
        _check_number("max_iter", self.max_iter, 1, integer=True)
        if not isinstance(self.fit_intercept, (bool, np.bool_)):
            raise ValueError(f"fit_intercept must be True or False, got {self.fit_intercept!r}")
        _check_choice("schedule", self.schedule, logreg.SCHEDULES)
        signs = np.where(y == classes[1], 1.0, -1.0)
        Xa = X
        if self.fit_intercept:
            col = np.full((X.shape[0], 1), float(self.intercept_scaling))
            Xa = sp.hstack([X, sp.csc_matrix(col)], format="csc") if sp.issparse(X) \
                else np.hstack([X, col])
        kw = dict(lam=float(self.alpha), schedule=self.schedule,
                  seed=_seed(self.random_state), tol=float(self.tol),
                  max_rounds=int(self.max_iter),
                  workers=_n_workers(self.n_jobs, X.shape[0]), quiet=True)

        def fit_scheduler(run):
            res = run(logreg.fit, Xa, signs, **kw)
            w = np.asarray(res.model["coef"], dtype=np.float64)
            if self.tol > 0 and res.stop_reason != "tol":
                warnings.warn(f"SparseLogisticRegression did not converge: the run stopped "
                              f"by {res.stop_reason!r} after {res.rounds} rounds; raise "
                              "max_iter or tol", ConvergenceWarning)
            c = w[-1] * self.intercept_scaling if self.fit_intercept else 0.0
            w = w[:-1] if self.fit_intercept else w
            return {"classes_": classes, "coef_": w.reshape(1, -1),
                    "intercept_": np.array([float(c)]), "n_iter_": int(res.rounds)}

        attrs = _collective(fit_scheduler, lambda: logreg.fit(Xa, signs, **kw))
        return _set(self, attrs)

    def decision_function(self, X):
        """``X @ coef_ + intercept_``: positive for ``classes_[1]``."""
        check_is_fitted(self, "coef_")
        X = validate_data(self, X, accept_sparse=["csr", "csc", "coo"],
                          dtype=[np.float64, np.float32], reset=False)
        return np.asarray(safe_sparse_dot(X, self.coef_[0], dense_output=True)).ravel() \
            + self.intercept_[0]

    def predict(self, X):
        """The class of each sample."""
        check_is_fitted(self, "coef_")
        return self.classes_[(self.decision_function(X) > 0).astype(np.intp)]

    def predict_proba(self, X):
        """Probabilities of ``classes_[0]`` and ``classes_[1]`` (columns)."""
        d = self.decision_function(X)
        p1 = np.where(d >= 0, 1 / (1 + np.exp(-np.abs(d))), np.exp(-np.abs(d)) /
                      (1 + np.exp(-np.abs(d))))
        return np.column_stack([1 - p1, p1])

    def predict_log_proba(self, X):
        """Logarithms of :meth:`predict_proba`."""
        d = self.decision_function(X)
        # log sigmoid(d) = -log1p(exp(-d)), stably
        lp1 = -np.logaddexp(0, -d)
        lp0 = -np.logaddexp(0, d)
        return np.column_stack([lp0, lp1])


# -- matrix factorization ------------------------------------------------------------------
class MatrixFactorization(BaseEstimator):
    """Explicit-feedback matrix factorization by scheduled CCD++ (the strads MF app).

    Minimises ``sum over ratings (r_ui - mu - b_u - b_i - w_u . h_i)^2 + sum_u reg_u
    (||w_u||^2 [+ b_u^2]) + sum_i reg_i (||h_i||^2 [+ b_i^2])`` (see
    :mod:`strads.apps.mf`), where by default (``weighted=True``) ``reg_u = alpha * n_u``
    and ``reg_i = alpha * n_i``, ``n_u`` (``n_i``) the number of training ratings of user
    ``u`` (item ``i``): the per-rating weighted lambda of LIBMF, ALS-WR and Spark's ALS;
    with ``weighted=False``, ``reg_u = reg_i = alpha``.

    Parameters
    ----------
    n_components : int, default=8
        Rank ``k`` of the factors (the app's ``rank``).
    alpha : float, default=0.1
        L2 penalty (the app's ``lam``), >= 0 (0.1: LIBMF's default, per rating).
    weighted : bool, default=True
        Penalise each user and item by ``alpha`` times its number of training ratings
        (the app's ``weighted``, ``--lambda-weighting count``); False: by ``alpha``
        alone (``--lambda-weighting none``).
    biases : {"none", "mean", "full"}, default="full"
        The app's ``bias`` (its default, ``strads.apps.mf.BIAS_DEFAULT``): no offset, the
        global mean ``mu``, or ``mu`` plus fitted user and item biases.
    schedule : {"ccd", "als"}, default="ccd"
        CCD++ rank-one updates, or alternating least squares.
    max_iter : int, default=20
        Outer iterations (sweeps over all factor columns; the app's ``iters``), at most.
    early_stopping : bool, default=True
        Hold out ``validation_fraction`` of the ratings, stop once their RMSE has not
        improved for ``n_iter_no_change`` iterations, then refit on all the ratings for
        the best iteration count (the app's ``early_stop``, :func:`strads.apps.mf.validated`).
        False: ``max_iter`` iterations (or to ``tol``) of the objective's minimisation,
        which over-fits at a small ``alpha``.
    validation_fraction : float, default=0.1
        With ``early_stopping``: the share of the ratings held out, in (0, 1).
    n_iter_no_change : int, default=2
        With ``early_stopping``: iterations without a better validation RMSE before the
        first run stops.
    tol : float, default=1e-6
        Stop when the objective changes by less than ``tol`` (relative) over an outer
        iteration.
    n_jobs : int, default=None
        Workers in one process (None -> 1, -1 -> all cores), at most the number of
        users and of items. Ignored under ``mpiexec``.
    random_state : int, RandomState instance or None, default=None
        Seed of the starting factors (the app's ``seed``): an int is used as it is, an
        int is drawn from a RandomState or Generator, None draws one from numpy's
        global RandomState.

    Attributes
    ----------
    user_factors_ : ndarray of shape (n_users, n_components)
        ``W``; row ``u`` belongs to user ``user_ids_[u]``.
    item_factors_ : ndarray of shape (n_items, n_components)
        ``H``; row ``i`` belongs to item ``item_ids_[i]``.
    user_bias_, item_bias_ : ndarray of shape (n_users,), (n_items,)
        Biases (zeros unless ``biases="full"``).
    global_mean_ : float
        ``mu`` (0 with ``biases="none"``).
    user_ids_, item_ids_ : ndarray
        The original ids of the users and items seen in training, sorted; the app
        remaps them to ``0..n_users-1`` and ``0..n_items-1``, and :meth:`predict` and
        :meth:`recommend` take the original ids.
    n_iter_ : int
        Outer iterations of the fitted model (with early stopping: the best iteration).
    validation_rmse_ : float or None
        With early stopping: the held-out ratings' RMSE at the best iteration (None
        without early stopping, or where no rating could be held out).
    objective_ : float
        The objective at the end.

    Examples
    --------
    >>> import scipy.sparse as sp
    >>> from strads.estimators import MatrixFactorization
    >>> R = sp.random(50, 40, density=0.3, format="csr", random_state=0)
    >>> R.data = 1 + 4 * R.data  # ratings from 1 to 5
    >>> mf = MatrixFactorization(n_components=2, random_state=0).fit(R)
    >>> items, scores = mf.recommend(0, n=3)
    >>> len(items)
    3
    """

    def __init__(self, n_components=8, alpha=0.1, weighted=True, biases="full",
                 schedule="ccd", max_iter=20, early_stopping=True, validation_fraction=0.1,
                 n_iter_no_change=2, tol=1e-6, n_jobs=None, random_state=None):
        self.n_components = n_components
        self.alpha = alpha
        self.weighted = weighted
        self.biases = biases
        self.schedule = schedule
        self.max_iter = max_iter
        self.early_stopping = early_stopping
        self.validation_fraction = validation_fraction
        self.n_iter_no_change = n_iter_no_change
        self.tol = tol
        self.n_jobs = n_jobs
        self.random_state = random_state

    @staticmethod
    def _triplets(R):
        if sp.issparse(R):
            R = check_array(R, accept_sparse="coo", dtype=np.float64, ensure_min_samples=1,
                            ensure_min_features=1, input_name="R")
            R = sp.coo_matrix(R)
            if R.nnz == 0:
                raise ValueError("R has no explicit entries: no ratings to fit")
            return R.row.astype(np.int64), R.col.astype(np.int64), R.data
        if isinstance(R, (tuple, list)) and len(R) == 3:
            users, items, ratings = (check_array(a, ensure_2d=False, dtype=None,
                                                 input_name=name)
                                     for a, name in zip(R, ("users", "items", "ratings")))
            ratings = check_array(ratings, ensure_2d=False, dtype=np.float64,
                                  input_name="ratings")
            if not (users.ndim == items.ndim == ratings.ndim == 1):
                raise ValueError("users, items and ratings must be 1-D")
            return users, items, ratings
        raise TypeError("MatrixFactorization.fit takes a scipy.sparse users x items matrix "
                        "(its explicit entries are the ratings) or a tuple (users, items, "
                        f"ratings) of 1-D arrays, got {type(R).__name__}")

    def fit(self, R, y=None):
        """Fit the factors.

        Parameters
        ----------
        R : scipy.sparse matrix of shape (n_users, n_items), or tuple (users, items, ratings)
            The ratings: a sparse matrix's explicit entries (an explicit 0 is a rating
            of 0; row and column indices are the user and item ids), or three 1-D
            arrays with arbitrary integer ids. A (user, item) pair given twice is
            refused.
        y : None
            Ignored.

        Returns
        -------
        self : object
            The fitted estimator (on every rank under ``mpiexec``).
        """
        from .apps import mf

        users, items, ratings = self._triplets(R)
        _check_number("n_components", self.n_components, 1, integer=True)
        _check_number("alpha", self.alpha, 0)
        _check_number("max_iter", self.max_iter, 1, integer=True)
        _check_number("tol", self.tol, 0)
        for name in ("weighted", "early_stopping"):
            if not isinstance(getattr(self, name), (bool, np.bool_)):
                raise ValueError(f"{name} must be True or False, got "
                                 f"{getattr(self, name)!r}")
        if self.early_stopping:
            _check_number("n_iter_no_change", self.n_iter_no_change, 1, integer=True)
            v = self.validation_fraction
            if isinstance(v, bool) or not isinstance(v, numbers.Real) or not 0 < v < 1:
                raise ValueError(f"validation_fraction must be in (0, 1), got {v!r}")
        _check_choice("biases", self.biases, mf.BIAS)
        _check_choice("schedule", self.schedule, mf.SCHEDULES)
        n_u = np.unique(users).shape[0] if users.size else 0
        n_i = np.unique(items).shape[0] if items.size else 0
        kw = dict(rank=int(self.n_components), lam=float(self.alpha),
                  schedule=self.schedule, iters=int(self.max_iter), bias=self.biases,
                  weighted=bool(self.weighted), seed=_seed(self.random_state),
                  tol=float(self.tol), duplicates="error", cold_start="error",
                  early_stop=int(self.n_iter_no_change) if self.early_stopping else None,
                  validation=float(self.validation_fraction) if self.early_stopping else 0.0,
                  workers=_n_workers(self.n_jobs, max(n_u, 1), max(n_i, 1)), quiet=True)

        def scheduler(run):
            res = run(mf.fit, users, items, ratings, **kw)
            M = res.model
            uids, iids = M["user_ids"], M["item_ids"]
            # the training pairs by user (internal ids), for recommend(filter_seen=True)
            u = np.searchsorted(uids, np.asarray(users))
            i = np.searchsorted(iids, np.asarray(items))
            seen = sp.csr_matrix((np.ones(u.shape[0], np.int8), (u, i)),
                                 shape=(uids.shape[0], iids.shape[0]))
            seen.sort_indices()
            return {"user_factors_": M["W"], "item_factors_": M["H"],
                    "user_bias_": M["user_bias"], "item_bias_": M["item_bias"],
                    "global_mean_": float(M["mean"]), "user_ids_": uids, "item_ids_": iids,
                    "n_iter_": int(res.extra.get("iterations", 0)),
                    "validation_rmse_": res.extra.get("validation_rmse"),
                    "objective_": float(res.objective),
                    "_seen_indptr": seen.indptr, "_seen_items": seen.indices}

        attrs = _collective(scheduler, lambda: mf.fit(users, items, ratings, **kw))
        return _set(self, attrs)

    def _model(self):
        return {"W": self.user_factors_, "H": self.item_factors_,
                "user_bias": self.user_bias_, "item_bias": self.item_bias_,
                "mean": self.global_mean_, "user_ids": self.user_ids_,
                "item_ids": self.item_ids_}

    def predict(self, users, items):
        """Predicted ratings of (user, item) pairs.

        Parameters
        ----------
        users, items : array-like of shape (n_pairs,)
            Original ids. An id not seen in training contributes nothing: its pair is
            scored by the global mean and the biases that are known.

        Returns
        -------
        ratings : ndarray of shape (n_pairs,)
            ``mu + b_u + b_i + w_u . h_i``.
        """
        from .apps import mf

        check_is_fitted(self, "user_factors_")
        users = check_array(users, ensure_2d=False, dtype=None, ensure_min_samples=0,
                            input_name="users").ravel()
        items = check_array(items, ensure_2d=False, dtype=None, ensure_min_samples=0,
                            input_name="items").ravel()
        return mf.predict(self._model(), users, items, unknown="mean")

    def recommend(self, user, n=10, filter_seen=True):
        """The ``n`` items with the highest predicted rating for one user, best first.

        Parameters
        ----------
        user : int
            Original id of a user seen in training (else ValueError: an unseen user has
            no factors to rank items by).
        n : int, default=10
            Number of items (fewer when fewer are left).
        filter_seen : bool, default=True
            Leave out the items the user rated in training.

        Returns
        -------
        items : ndarray of shape (n,)
            Original item ids, best first (ties: lower id first).
        scores : ndarray of shape (n,)
            Their predicted ratings.
        """
        from .apps.mf.data import _lookup

        check_is_fitted(self, "user_factors_")
        _check_number("n", n, 0, integer=True)
        if not np.isscalar(user):
            raise ValueError(f"recommend takes one user id, got {user!r}")
        pos, known = _lookup(self.user_ids_, np.array([user]))
        if not known[0]:
            raise ValueError(f"user {user!r} was not in the training data: recommend "
                             "needs a user with factors (predict() scores unseen ids by "
                             "the mean and biases)")
        u = int(pos[0])
        scores = (self.item_factors_ @ self.user_factors_[u] + self.global_mean_
                  + self.user_bias_[u] + self.item_bias_)
        candidates = np.arange(scores.shape[0])
        if filter_seen:
            seen = self._seen_items[self._seen_indptr[u]:self._seen_indptr[u + 1]]
            keep = np.ones(scores.shape[0], bool)
            keep[seen] = False
            candidates = candidates[keep]
        order = candidates[np.argsort(-scores[candidates], kind="stable")[:int(n)]]
        return self.item_ids_[order], scores[order]


# -- LDA -----------------------------------------------------------------------------------
class LDA(ClassNamePrefixFeaturesOutMixin, TransformerMixin, BaseEstimator):
    """Latent Dirichlet allocation by model-parallel collapsed Gibbs sampling (the strads
    LDA app).

    Parameters
    ----------
    n_components : int, default=10
        Number of topics K.
    doc_topic_prior : float, default=None
        Symmetric document-topic prior alpha; None: the app's default 0.1 (the command
        line's ``--alpha``; not scikit-learn's 1/K, a variational-Bayes convention).
    topic_word_prior : float, default=None
        Symmetric topic-word prior beta; None: the app's default 0.01 (``--beta``).
    max_iter : int, default=50
        Gibbs sweeps over the corpus (the app's ``sweeps``).
    random_state : int, RandomState instance or None, default=None
        Seed of the sampler (fit) and of the fold-in (transform): the same int gives
        the same model and the same transforms (same ``n_jobs``).
    n_jobs : int, default=None
        Workers in one process for fit (at most the number of documents and of words;
        ignored under ``mpiexec``), and threads for the fold-in of :meth:`transform`
        (whose result does not depend on them). None -> 1, -1 -> all cores.
    max_doc_update_iter : int, default=100
        Gibbs sweeps of the fold-in per document in :meth:`transform` (the first half
        is burn-in, the counts of the second half are averaged).

    Attributes
    ----------
    components_ : ndarray of shape (n_components, n_features)
        Topic-word pseudo-counts ``n_kw + topic_word_prior``, unnormalised, as
        scikit-learn's ``LatentDirichletAllocation.components_``; the topic-word
        distributions are ``components_ / components_.sum(axis=1)[:, None]``.
    doc_topic_ : ndarray of shape (n_documents, n_components)
        The training documents' topic mixtures ``(n_dk + alpha) / (n_d + K alpha)``
        from the final state of the chain (what :meth:`fit_transform` returns).
    doc_topic_prior_, topic_word_prior_ : float
        The priors used.
    n_iter_ : int
        Sweeps run.
    loglik_ : float
        Joint log-likelihood ``log p(w, z)`` of the final state.
    n_features_in_ : int
        Vocabulary size seen during fit.

    Examples
    --------
    >>> from strads.apps.lda import make_corpus
    >>> from strads.estimators import LDA
    >>> X, _, _ = make_corpus(n_docs=200, n_words=100, n_topics=5, seed=0)
    >>> lda = LDA(n_components=5, random_state=0).fit(X)
    >>> lda.transform(X[:3]).sum(axis=1).round(6).tolist()
    [1.0, 1.0, 1.0]
    """

    def __init__(self, n_components=10, doc_topic_prior=None, topic_word_prior=None,
                 max_iter=50, random_state=None, n_jobs=None, max_doc_update_iter=100):
        self.n_components = n_components
        self.doc_topic_prior = doc_topic_prior
        self.topic_word_prior = topic_word_prior
        self.max_iter = max_iter
        self.random_state = random_state
        self.n_jobs = n_jobs
        self.max_doc_update_iter = max_doc_update_iter

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.sparse = True
        tags.input_tags.positive_only = True
        tags.transformer_tags.preserves_dtype = ["float64"]
        return tags

    @property
    def _n_features_out(self):
        return self.components_.shape[0]

    def _counts(self, X, reset, whom):
        """Validated document-term counts as an int64 CSR matrix (canonical)."""
        X = validate_data(self, X, accept_sparse="csr", dtype=None, reset=reset)
        if X.dtype.kind not in "iuf":
            X = X.astype(np.float64)
        check_non_negative(X, whom)
        vals = X.data if sp.issparse(X) else X
        if vals.dtype.kind == "f" and (vals != np.round(vals)).any():
            raise ValueError(f"{whom}: X must hold integer counts")
        X = sp.csr_matrix(X, dtype=np.int64, copy=True)  # never the caller's arrays
        X.sum_duplicates()
        X.eliminate_zeros()
        return X

    def fit(self, X, y=None):
        """Fit the topics.

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_documents, n_features)
            Document-term counts (non-negative integers).
        y : None
            Ignored.

        Returns
        -------
        self : object
            The fitted estimator (on every rank under ``mpiexec``).
        """
        from .apps import lda

        X = self._counts(X, True, "LDA.fit")
        _check_number("n_components", self.n_components, 1, integer=True)
        _check_number("max_iter", self.max_iter, 1, integer=True)
        _check_number("max_doc_update_iter", self.max_doc_update_iter, 0, integer=True)
        alpha = 0.1 if self.doc_topic_prior is None else self.doc_topic_prior
        beta = 0.01 if self.topic_word_prior is None else self.topic_word_prior
        _check_number("doc_topic_prior", alpha, 0, inclusive=False)
        _check_number("topic_word_prior", beta, 0, inclusive=False)
        seed = _seed(self.random_state)
        kw = dict(n_topics=int(self.n_components), alpha=float(alpha), beta=float(beta),
                  sweeps=int(self.max_iter), seed=seed, quiet=True,
                  workers=_n_workers(self.n_jobs, X.shape[0], X.shape[1]))

        def scheduler(run):
            res = run(lda.fit, X, **kw)
            M = res.model
            K = kw["n_topics"]
            ndk = M["doc_topic"].astype(np.float64)
            doc_topic = (ndk + alpha) / (ndk.sum(axis=1, keepdims=True) + K * alpha)
            return {"components_": M["word_topic"].T.astype(np.float64) + beta,
                    "doc_topic_": doc_topic, "doc_topic_prior_": float(alpha),
                    "topic_word_prior_": float(beta), "n_iter_": int(self.max_iter),
                    "loglik_": float(M["loglik"]),
                    # the fold-in's seed: transform() is deterministic for a fitted model
                    "_transform_seed": int(np.random.default_rng([seed, 0x666F6C64])
                                           .integers(0, 2 ** 62))}

        attrs = _collective(scheduler, lambda: lda.fit(X, **kw))
        return _set(self, attrs)

    def fit_transform(self, X, y=None):
        """Fit, and return the training documents' topic mixtures (``doc_topic_``,
        from the chain itself rather than a fold-in).

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_documents, n_features)
            Document-term counts.
        y : None
            Ignored.

        Returns
        -------
        doc_topic : ndarray of shape (n_documents, n_components)
            Rows sum to 1.
        """
        return self.fit(X).doc_topic_.copy()

    def _topics(self):
        """phi[w, k] = p(w | k), word-major (the fold-in kernel's layout)."""
        return np.ascontiguousarray((self.components_
                                     / self.components_.sum(axis=1, keepdims=True)).T)

    def transform(self, X):
        """Topic mixtures of documents by collapsed Gibbs fold-in against the fitted
        topics (held fixed; :func:`strads.apps.lda.foldin.fold_in`).

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_documents, n_features)
            Document-term counts over the training vocabulary.

        Returns
        -------
        doc_topic : ndarray of shape (n_documents, n_components)
            ``(mean n_dk + alpha) / (n_d + K alpha)`` over the fold-in's sweeps after
            burn-in; rows sum to 1 (an empty document: 1/K each). The same for the same
            fitted model and X.
        """
        from .apps.lda import foldin

        check_is_fitted(self, "components_")
        X = self._counts(X, False, "LDA.transform")
        doc_ptr, words = foldin.tokens(X)
        return foldin.fold_in_threads(doc_ptr, words, self._topics(),
                                      float(self.doc_topic_prior_),
                                      int(self.max_doc_update_iter), self._transform_seed,
                                      _n_workers(self.n_jobs, max(X.shape[0], 1)))

    def _loglik(self, X):
        from .apps.lda import foldin

        check_is_fitted(self, "components_")
        X = self._counts(X, False, "LDA.score")
        doc_ptr, words = foldin.tokens(X)
        phi = self._topics()
        theta = foldin.fold_in_threads(doc_ptr, words, phi, float(self.doc_topic_prior_),
                                       int(self.max_doc_update_iter), self._transform_seed,
                                       _n_workers(self.n_jobs, max(X.shape[0], 1)))
        ll = foldin.doc_loglik(X.indptr.astype(np.int64), X.indices.astype(np.int64),
                               X.data.astype(np.float64), theta, phi)
        return float(ll.sum()), int(doc_ptr[-1])

    def score(self, X, y=None):
        """Approximate log-likelihood of documents.

        ``sum_d sum_w c_dw log(theta_d . phi_w)``, with the fitted topics ``phi`` and
        each document's mixture ``theta_d`` from :meth:`transform`. Since theta_d is
        estimated from the same document, this plug-in value is higher than the exact
        marginal log p(w_d); use it to compare models on held-out documents.

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_documents, n_features)
            Document-term counts.
        y : None
            Ignored.

        Returns
        -------
        score : float
            The log-likelihood (natural log).
        """
        return self._loglik(X)[0]

    def perplexity(self, X):
        """``exp(-score(X) / number of tokens in X)``.

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_documents, n_features)
            Document-term counts (at least one token).

        Returns
        -------
        perplexity : float
        """
        ll, n_tokens = self._loglik(X)
        if n_tokens == 0:
            raise ValueError("perplexity needs documents with at least one token")
        return float(np.exp(-ll / n_tokens))

    def top_words(self, vocab=None, n=10):
        """The ``n`` most probable words of every topic.

        Parameters
        ----------
        vocab : sequence of str, default=None
            The word of every column of X; None: word ids (as strings).
        n : int, default=10
            Words per topic.

        Returns
        -------
        words : list of lists of str
            One list per topic, most probable first.
        """
        from .apps.lda import top_words

        check_is_fitted(self, "components_")
        _check_number("n", n, 1, integer=True)
        if vocab is not None and len(vocab) != self.components_.shape[1]:
            raise ValueError(f"{len(vocab)} vocabulary words for "
                             f"{self.components_.shape[1]} features")
        return top_words(self.components_.T, vocab, n)
