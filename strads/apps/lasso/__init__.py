"""Lasso by scheduled parallel coordinate descent (STRADS, Lee et al. 2014).
Notes: docs/apps/lasso.md."""
import numpy as np
import scipy.sparse as sp

from ... import params
from ...errors import DataError
from ..glm.schedule import SCHEDULES, Priority, max_staleness
from ..glm.setup import (GRAM_BUDGET, MiB, Datafit, check_gap_ref, default_gram_budget,
                         gram_block_cap, gram_budget)
from . import data
from .aggregate import LassoAggregate
from .data import load, make_problem
from .schedule import WORKING_SET_MIN, WorkingSet
from .update import LassoUpdate

__all__ = ["fit", "lambda_max", "objective", "load", "make_problem", "near_duplicates",
           "LassoUpdate", "LassoAggregate", "SCHEDULES", "make_setup", "make_file_setup",
           "default_gram_budget", "gram_block_cap", "max_staleness", "path_from_gram"]


def lambda_max(X, y):
    """Smallest lambda for which b = 0 is optimal."""
    return float(np.abs(X.T @ y).max() / X.shape[0])


def near_duplicates(n_samples=1500, n_features=20000, group=4, density=0.01, noise=0.01,
                    n_informative=100, dense=False, seed=0):
    """A correlated problem: X's columns in contiguous groups of ``group`` near-duplicates
    (a base column plus ``noise`` N(0, 1) on its non-zeros); y = X w + 0.1 N(0, 1), w
    with ``n_informative`` N(0, 1) non-zeros. Returns (X, y), X CSC or Fortran-ordered."""
    rng = np.random.default_rng(seed)
    base = n_features // group
    if dense:
        B = rng.standard_normal((n_samples, base))
        X = np.hstack([B + noise * rng.standard_normal(B.shape) for _ in range(group)])
    else:
        B = sp.random(n_samples, base, density=density, format="csc", random_state=rng,
                      data_rvs=rng.standard_normal)
        parts = []
        for _ in range(group):
            C = B.copy()
            C.data = C.data + noise * rng.standard_normal(C.data.shape)
            parts.append(C)
        X = sp.hstack(parts, format="csc")
    X = X[:, np.arange(base * group).reshape(group, base).T.ravel()]  # groups contiguous
    w = np.zeros(X.shape[1])
    idx = rng.choice(X.shape[1], n_informative, replace=False)
    w[idx] = rng.standard_normal(n_informative)
    y = X @ w + 0.1 * rng.standard_normal(n_samples)
    if dense:
        return np.asfortranarray(X), y
    X.sort_indices()
    return X, y


def objective(X, y, coef, lam):
    r = y - X @ coef
    return 0.5 * float(r @ r) / X.shape[0] + lam * float(np.abs(coef).sum())


class Quadratic(Datafit):
    """The Lasso's datafit: 1/(2n) ||y - Xb||^2, block rounds solved exactly, Gap Safe
    screening, empty columns left out, ``--schedulers K``."""
    name = "lasso"
    Aggregate, Update = LassoAggregate, LassoUpdate
    data = data
    priority = Priority
    drop_empty = splits = True
    options = {"gram_budget": None, "time_limit": None, "intercept": False, "coef0": None,
               "path": None, "path_rounds": 100000, "tol": 1e-6, "gap_ref": "objective"}
    help = dict(
        description="Lasso, min 1/(2n)||y - Xb||^2 + lambda||b||_1, by scheduled parallel "
        "coordinate descent.",
        target="y for a .mtx or sparse .npz --data: .npy or one number per line",
        lambda_ratio="lambda as a fraction of lambda_max (when --lambda is not given)",
        schedule="working-set: priority-chosen blocks solved exactly from their Gram "
        "matrix; priority: STRADS priority sampling + dependency filter (--rho); "
        "round-robin, random (Shotgun): baselines",
        full_every=", at most; priority also makes one once the last one's priorities are "
        "spent")

    @staticmethod
    def check_lambda(lam):
        if lam < 0:
            raise DataError(f"lambda must be >= 0, got {lam}")

    def add_flags(self, group):
        params.add_flags(group, [GRAM_BUDGET])

    @staticmethod
    def cli_options(args, name):
        return dict(gram_budget=args.gram_budget, time_limit=args.time_limit)

    def problem(self, data, options):
        """With ``intercept``: y centred (its mean kept for the intercept), and dense X
        too, in a copy (as scikit-learn's): an implicit centring (X'X - n mu mu') cancels
        where a column's mean dwarfs its spread; constant columns exactly 0."""
        given = data()
        X, y = self.data.check(*given)
        if not options["intercept"]:
            return X, y, {}
        y_mean, attrs = float(y.mean()), {}
        if not sp.issparse(X):
            if np.may_share_memory(X, given[0]):  # (check made no copy: centred in one)
                X = X.copy(order="F")
            mean = attrs["x_mean"] = X.mean(axis=0)
            # constant columns: those whose first and last entries agree, checked whole
            maybe = np.flatnonzero(X[0] == X[-1])
            const = maybe[(X[:, maybe] == X[0, maybe]).all(axis=0)]
            X -= mean
            X[:, const] = 0.0
        return X, y - y_mean, dict(attrs, y_mean=y_mean)

    @staticmethod
    def aggregate(X, y, sq_norms, lam, ctx, options):
        n, mu = X.shape[0], None
        if options["intercept"] and sp.issparse(X):  # centred implicitly (stays sparse)
            mu = np.asarray(X.sum(axis=0)).ravel() / n
            sq_norms = _centred_sq_norms(X, mu, sq_norms) if X.nnz else sq_norms
        agg = LassoAggregate(sq_norms, n, lam, float(y @ y),
                             np.diff(X.indptr) if sp.issparse(X) else None, mu)
        agg.x_mean, agg.gap_null = mu, check_gap_ref(options)
        agg.run_tol = float(options["tol"])  # (GramPath's first round solves to it)
        if options["path"] is not None:
            agg.walk_path(options["path"], options["tol"], options["path_rounds"])
        return agg

    @staticmethod
    def later(lam, lambda_ratio, ctx, options):
        if options["intercept"] or options["coef0"] is not None or \
                options["path"] is not None:
            raise DataError("lasso: an intercept, a warm start or a path needs the data "
                            "read on rank 0")
        agg = LassoAggregate.later(lam, lambda_ratio)
        agg.gap_null = check_gap_ref(options)
        return agg

    @staticmethod
    def working_set(agg, block, ctx, options):
        budget = gram_budget(options)
        agg.block_cap = gram_block_cap(budget, ctx.n_workers)
        # a path, or one fit whose first working set would hold every column anyway
        p = agg.w.shape[0]
        gram = (agg.path is not None or p <= WORKING_SET_MIN) and \
            path_from_gram(agg.col_nnz is None, agg.n, p, agg.block_cap)
        return (GramPath if gram else WorkingSet)(agg, max_block=agg.block_cap, block=block,
                          time_limit=options["time_limit"], staleness=ctx.staleness,
                          factor_cap=budget * MiB / FACTOR_BYTES)


def _centred_sq_norms(X, mu, sq_norms):
    """Sparse X's centred column norms ||x_j||^2 - n mu_j^2 (0: constant); DataError where
    the implicit centring (X'X - n mu mu') would lose more than half the digits (a column's
    mean above 1e4 times its spread): a wrong model is worse than none."""
    n, nnz, starts = X.shape[0], np.diff(X.indptr), X.indptr[:-1]  # (no empty column)
    dev = X.data - np.repeat(mu, nnz)  # ||x_j - mu_j||^2 summed without cancellation
    exact = np.add.reduceat(dev * dev, starts) + (n - nnz) * mu * mu
    const = nnz == n  # (a constant column is full)
    if const.any():
        const &= np.maximum.reduceat(X.data, starts) == np.minimum.reduceat(X.data, starts)
    bad = np.flatnonzero(~const & (sq_norms > CENTRING_LIMIT * exact))
    if bad.shape[0]:
        j = int(bad[0])
        raise DataError(f"lasso: sparse X with an intercept: column {j}'s mean {mu[j]:.6g} "
                        f"is over {np.sqrt(CENTRING_LIMIT):.0g} times its spread (std "
                        f"{np.sqrt(exact[j] / n):.3g}), beyond the implicit centring's "
                        "precision; centre it (dense X is centred in a copy)")
    centred = sq_norms - n * mu * mu
    return np.where(centred > 1e-12 * sq_norms, centred, 0.0)  # (constants)


CENTRING_LIMIT = 1e8  # ||x_j||^2 / ||x_j - mu_j||^2: half of float64's 16 digits lost


def path_from_gram(dense, n, p, cap=None):
    """Whether a path is solved from its Gram at once (:class:`GramPath`): dense, no more
    columns than rows (scikit-learn's precompute="auto"), the whole Gram within ``cap``."""
    return dense and p <= (n if cap is None else min(n, cap))


class GramPath(WorkingSet):
    """A dense path's working sets (or a small dense fit's) whose first round is a block
    of every column, from whose Gram the aggregate solves every lambda
    (:meth:`LassoAggregate._walk_gram`)."""
    sent = False

    def schedule(self, round):
        if self.sent:
            return super().schedule(round)
        self._begin_round(round)
        self.sent = True
        return dict(self._block(np.arange(self.agg.w.shape[0])), path_gram=True)


# a non-zero of a block's factor: its row and value on a worker, as received, as stacked
FACTOR_BYTES = 3 * 16
DATAFIT = Quadratic()
fit, make_setup, make_file_setup = DATAFIT.fit, DATAFIT.make_setup, DATAFIT.make_file_setup
