"""Lasso by scheduled parallel coordinate descent (STRADS, Lee et al. 2014).

Minimises 1/(2n) ||y - X b||^2 + lambda ||b||_1 (no intercept). Samples (rows) are split
across workers, balanced by non-zeros; the scheduler chooses the coordinates of each
round, sums the workers' partial inner products, soft-thresholds and sends the changes
back, and every worker updates its residual.
"""
import numpy as np
import scipy.sparse as sp

from ... import engine
from ...engine import DataError
from . import kernels as K
from .aggregate import LassoAggregate
from .data import check, load, make_problem
from .schedule import SCHEDULES, Priority
from .update import LassoUpdate

__all__ = ["fit", "lambda_max", "objective", "load", "make_problem", "LassoUpdate",
           "LassoAggregate", "SCHEDULES"]


def lambda_max(X, y):
    """Smallest lambda for which b = 0 is optimal."""
    return float(np.abs(X.T @ y).max() / X.shape[0])


def objective(X, y, coef, lam):
    r = y - X @ coef
    return 0.5 * float(r @ r) / X.shape[0] + lam * float(np.abs(coef).sum())


def split_rows(X, n_parts):
    """Boundaries of contiguous row blocks with about equal numbers of non-zeros."""
    n = X.shape[0]
    counts = np.bincount(X.indices, minlength=n) if sp.issparse(X) else np.ones(n)
    return engine.split_balanced(counts, n_parts)


def row_block(X, start, stop):
    """A worker's shard of X: rows start:stop, Fortran-order dense or a CSC triplet
    ``(indptr, indices, data)``, as read-only arrays: the worker never writes them, so
    the in-process transport may hand them over without a copy."""
    if not sp.issparse(X):
        return {"X": _read_only(np.asfortranarray(X[start:stop]))}
    if start == 0 and stop == X.shape[0]:
        csc = (X.indptr, X.indices, X.data)
    else:
        csc = K.csc_rows(X.indptr, X.indices, X.data, start, stop)
    return {"csc": tuple(_read_only(a) for a in csc), "n_rows": stop - start}


def _read_only(a):
    v = a.view()
    v.flags.writeable = False
    return v


def make_setup(data, lam=None, lambda_ratio=0.1, schedule="working-set", block=256, rho=0.1,
               floor=0.1, full_every=None, seed=0):
    """``setup(n_workers)`` for :func:`strads.run`; ``data()`` gives ``(X, y)`` and is
    only called on the scheduler rank."""
    if schedule not in SCHEDULES:
        raise DataError(f"unknown schedule {schedule!r}; choose from {sorted(SCHEDULES)}")
    if block < 1:
        raise DataError(f"block must be >= 1, got {block}")
    if not 0 <= rho <= 1:
        raise DataError(f"rho must be in [0, 1], got {rho}")
    if not 0 <= floor <= 1:
        raise DataError(f"floor must be in [0, 1], got {floor}")
    if lam is not None and lam < 0:
        raise DataError(f"lambda must be >= 0, got {lam}")
    if lam is None and not lambda_ratio > 0:
        raise DataError(f"lambda ratio must be > 0, got {lambda_ratio}")

    def setup(n_workers):
        X, y = check(*data())
        n, p = X.shape
        if n_workers > n:
            raise DataError(f"{n_workers} workers for {n} samples: each worker needs rows")
        lam_ = lam if lam is not None else lambda_ratio * lambda_max(X, y)
        sq_norms = K.csc_sq_norms(X.indptr, X.data) if sp.issparse(X) \
            else np.einsum("ij,ij->j", X, X)
        agg = LassoAggregate(sq_norms, n, lam_, float(y @ y))
        every = full_every or p
        if schedule == "priority":
            sched = Priority(agg, block, every, seed, X, rho, floor)
        elif schedule == "working-set":
            sched = SCHEDULES[schedule](agg)
        else:
            sched = SCHEDULES[schedule](agg, block, every, seed)
        cuts = split_rows(X, n_workers)
        shards = [dict(row_block(X, a, b), y=y[a:b]) for a, b in zip(cuts[:-1], cuts[1:])]
        return sched, agg, shards

    return setup


def fit(X, y, *, lam=None, lambda_ratio=0.1, schedule="working-set", block=256, rho=0.1,
        floor=0.1, full_every=None, seed=0, tol=1e-6, max_rounds=100000, **run_kw):
    """Fit the Lasso; returns :class:`strads.Result` (``model['coef']``) on the scheduler
    rank. ``run_kw`` goes to :func:`strads.run` (workers, staleness, time_limit, ...)."""
    setup = make_setup(lambda: (X, y), lam, lambda_ratio, schedule, block, rho, floor,
                       full_every, seed)
    return engine.run(setup, LassoUpdate, tol=tol, max_rounds=max_rounds, app="lasso",
                      **run_kw)
