"""The matrix factorization estimator (:class:`MatrixFactorization`)."""
from numbers import Integral

import numpy as np
import scipy.sparse as sp
from sklearn.base import BaseEstimator, _fit_context
from sklearn.utils._param_validation import validate_params
from sklearn.utils.validation import check_array, check_is_fitted

from ..apps import mf
from ..apps.mf.data import KEEP_ONE
from ..io.ratings import named_order
from ..errors import DataError
from ..params import ENGINE, sklearn_constraints
from ._base import Count, N_JOBS, RANDOM_STATE, _Checked, _collective, collective, _n_workers, _seed
from ._persist import Persistent, _set


class MatrixFactorization(Persistent, _Checked, BaseEstimator):
    """Explicit-feedback matrix factorization by scheduled CCD++ (the strads MF app); its
    objective, parameters and attributes: docs/apps/mf.md, "Estimator reference"."""

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
        if isinstance(R, tuple) and len(R) == 3:
            users, items, ratings = (check_array(a, ensure_2d=False, dtype=dtype,
                                                 input_name=name)
                                     for a, name, dtype in zip(R, ("users", "items", "ratings"),
                                                               (None, None, np.float64)))
            if not (users.ndim == items.ndim == ratings.ndim == 1):
                raise ValueError("users, items and ratings must be 1-D")
            return users, items, ratings
        names = getattr(R, "columns", None)  # a DataFrame's: by name where they say
        if names is not None and len(names) == 3:
            where = named_order(list(names))
            if where is None:
                raise ValueError(f"the columns are named {', '.join(map(repr, names))}: "
                                 "name them user, item and rating, or give them in that "
                                 "order")
            R = R.iloc[:, list(where)]
        X = None if isinstance(R, (str, bytes, dict)) else check_array(
            R, dtype=None, ensure_min_samples=0, input_name="X")
        if X is None or X.shape[1] != 3:
            raise TypeError("MatrixFactorization takes a scipy.sparse users x items matrix "
                            "(its explicit entries are the ratings), a tuple (users, items, "
                            "ratings) of 1-D arrays or an (n_ratings, 3) array of (user, "
                            f"item, rating) rows, got {type(R).__name__}"
                            + ("" if X is None else f" of shape {X.shape}"))
        # the ids are checked as fit's and predict's (integral), the ratings as numbers
        return X[:, 0], X[:, 1], check_array(X[:, 2], ensure_2d=False, dtype=np.float64,
                                             ensure_min_samples=0, input_name="ratings")

    @collective
    @_fit_context(prefer_skip_nested_validation=True)
    def fit(self, R, y=None):
        """Fit the factors to ratings R; -> self, on every rank under ``mpiexec``. R: a
        scipy.sparse (n_users, n_items) matrix's explicit entries (an explicit 0 is a
        rating of 0; row and column indices are the ids), a tuple (users, items, ratings)
        of 1-D arrays, or an (n_ratings, 3) array-like of (user, item, rating) rows (what
        scikit-learn's splitters split by rating); ids: arbitrary integers (a float id
        exactly integral). A pair given twice is refused."""
        users, items, ratings = self._triplets(R)
        kw = dict(rank=int(self.n_components), lam=float(self.alpha),
                  schedule=self.schedule, iters=int(self.max_iter), bias=self.biases,
                  weighted=bool(self.weighted), seed=_seed(self.random_state),
                  tol=float(self.tol), duplicates="error", cold_start="error",
                  early_stop=int(self.n_iter_no_change) if self.early_stopping else None,
                  validation=float(self.validation_fraction) if self.early_stopping else 0.0,
                  workers=_n_workers(self.n_jobs, *(len(np.unique(a)) for a in (users, items))),
                  quiet=True)

        def fitted(res):
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

        try:
            return _set(self, _collective(mf.fit, (users, items, ratings), kw, fitted))
        except DataError as e:  # (mf.fit's words name its duplicates keyword)
            if KEEP_ONE not in str(e):
                raise
            raise DataError(str(e).replace(KEEP_ONE, "keep one rating a pair (the last, or "
                                           "their mean) before fit")) from None

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
        users, items = (check_array(a, ensure_2d=False, dtype=None, ensure_min_samples=0,
                                    input_name=name).ravel()
                        for a, name in ((users, "users"), (items, "items")))
        return mf.predict(self._model(), users, items, unknown="mean")

    def score(self, X, y=None):
        """``-sqrt(mean((predict(users, items) - ratings) ** 2))`` on ratings X, a tuple
        (users, items, ratings) or an (n_ratings, 3) array (higher is better, as
        scikit-learn's scorers: ``GridSearchCV`` on such an array splits the ratings). A
        sparse matrix is refused: a split of its rows renumbers the users."""
        if sp.issparse(X):
            raise TypeError("score does not take a sparse matrix: its row numbers may not "
                            "be the user ids (scikit-learn's splitters renumber the rows "
                            "they take); pass (users, items, ratings), e.g. (R.row, R.col, "
                            "R.data) of R.tocoo(), or an (n_ratings, 3) array of (user, "
                            "item, rating) rows")
        users, items, ratings = self._triplets(X)
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
        if not np.isscalar(user) or isinstance(user, (bool, np.bool_)):
            raise ValueError(f"recommend takes one user id, got {user!r}")
        pos, known = mf.lookup(self.user_ids_, np.array([user]))
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
