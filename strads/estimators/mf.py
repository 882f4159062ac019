"""The matrix factorization estimator (:class:`MatrixFactorization`)."""
from numbers import Integral

import numpy as np
import scipy.sparse as sp
from sklearn.base import BaseEstimator, _fit_context
from sklearn.utils._param_validation import validate_params
from sklearn.utils.validation import check_array, check_is_fitted

from ..apps import mf
from ..params import ENGINE, sklearn_constraints
from ._base import Count, N_JOBS, RANDOM_STATE, _Checked, _collective, _n_workers, _seed
from ._persist import Persistent, _set


class MatrixFactorization(Persistent, _Checked, BaseEstimator):
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
        self._set_params(locals())

    # the app's declarations under the estimator's names; with early stopping, its first
    # run holds out some ratings and waits at least one iteration
    _parameter_constraints = {
        **sklearn_constraints(mf.PARAMS + ENGINE, dict(
            n_components="rank", alpha="lam", biases="bias", schedule="schedule",
            max_iter="iters", n_iter_no_change="early_stop",
            validation_fraction="validation_fraction", tol="tol"),
            max_iter=dict(none=False), n_iter_no_change=dict(low=1, none=False),
            validation_fraction=dict(closed="neither")),
        "weighted": ["boolean"], "early_stopping": ["boolean"], "n_jobs": N_JOBS,
        "random_state": RANDOM_STATE}

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

    @_fit_context(prefer_skip_nested_validation=True)
    def fit(self, R, y=None):
        """Fit the factors to ratings R; -> self, on every rank under ``mpiexec``. R: a
        scipy.sparse (n_users, n_items) matrix's explicit entries (an explicit 0 is a
        rating of 0; row and column indices are the ids), or a tuple (users, items,
        ratings) of 1-D arrays with arbitrary integer ids. A pair given twice is refused."""
        users, items, ratings = self._triplets(R)
        kw = dict(rank=int(self.n_components), lam=float(self.alpha),
                  schedule=self.schedule, iters=int(self.max_iter), bias=self.biases,
                  weighted=bool(self.weighted), seed=_seed(self.random_state),
                  tol=float(self.tol), duplicates="error", cold_start="error",
                  early_stop=int(self.n_iter_no_change) if self.early_stopping else None,
                  validation=float(self.validation_fraction) if self.early_stopping else 0.0,
                  workers=_n_workers(self.n_jobs, *(len(np.unique(a)) for a in (users, items))),
                  quiet=True)

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
        """Predicted ratings ``mu + b_u + b_i + w_u . h_i`` of (user, item) pairs (original
        ids; an id not seen in training contributes nothing: its pair is scored by the
        global mean and the biases that are known)."""
        check_is_fitted(self, "user_factors_")
        users = check_array(users, ensure_2d=False, dtype=None, ensure_min_samples=0,
                            input_name="users").ravel()
        items = check_array(items, ensure_2d=False, dtype=None, ensure_min_samples=0,
                            input_name="items").ravel()
        return mf.predict(self._model(), users, items, unknown="mean")

    def score(self, R, y=None):
        """``-sqrt(mean((predict(users, items) - ratings) ** 2))`` on ratings R as
        :meth:`fit` takes them (higher is better, as scikit-learn's scorers, so that
        ``GridSearchCV`` can choose)."""
        users, items, ratings = self._triplets(R)
        if ratings.shape[0] == 0:
            raise ValueError("score needs at least one rating")
        err = self.predict(users, items) - ratings
        return -float(np.sqrt(np.mean(err * err)))

    @validate_params({"n": [Count(Integral, 0, None, closed="left")]},
                     prefer_skip_nested_validation=True)
    def recommend(self, user, n=10, filter_seen=True):
        """(items, scores): the ``n`` items (original ids; fewer when fewer are left) with
        the highest predicted rating for ``user`` (an original id seen in training, else
        ValueError: an unseen user has no factors to rank items by), best first (ties:
        lower id first). ``filter_seen``: leave out the items the user rated in training
        (a model loaded from a command line's ``--out`` does not know them: pass False)."""
        check_is_fitted(self, "user_factors_")
        if not np.isscalar(user):
            raise ValueError(f"recommend takes one user id, got {user!r}")
        pos, known = mf._lookup(self.user_ids_, np.array([user]))
        if not known[0]:
            raise ValueError(f"user {user!r} was not in the training data: recommend "
                             "needs a user with factors (predict() scores unseen ids by "
                             "the mean and biases)")
        u = int(pos[0])
        scores = (self.item_factors_ @ self.user_factors_[u] + self.global_mean_
                  + self.user_bias_[u] + self.item_bias_)
        candidates = np.arange(scores.shape[0])
        if filter_seen:
            if self._seen_indptr is None:
                raise ValueError("this model does not know which items each user rated "
                                 "(loaded from a command line's --out): pass "
                                 "filter_seen=False")
            seen = self._seen_items[self._seen_indptr[u]:self._seen_indptr[u + 1]]
            keep = np.ones(scores.shape[0], bool)
            keep[seen] = False
            candidates = candidates[keep]
        order = candidates[np.argsort(-scores[candidates], kind="stable")[:int(n)]]
        return self.item_ids_[order], scores[order]
