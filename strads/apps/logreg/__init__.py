"""Sparse logistic regression by scheduled coordinate descent (STRADS, Kim et al. 2016).

Minimises (1/n) sum_i log(1 + exp(-y_i x_i'w)) + lambda ||w||_1 (no intercept), labels
any two values mapped to -1/+1 (the smaller to -1). Samples (rows) are split across
workers, balanced by non-zeros; each keeps its rows column-major, its labels and its
margins x_i'w. The scheduler chooses the coordinates of each round: by default working
sets solved by prox-Newton steps from the block's weighted Gram matrix, with a line
search on the workers' exact losses; or STRADS priority sampling with a dependency
filter, and the round-robin and random baselines, with one Newton step per coordinate.
A duality gap (the logistic dual at the rescaled point, as celer and skglm) stops the
run: gap <= tol * objective.
"""
import math

import numpy as np
import scipy.sparse as sp

from ... import engine
from ...engine import DataError
from ..lasso import _Later, row_block, split_rows
from . import kernels as K
from . import data
from .aggregate import LogRegAggregate
from .data import check, load, make_problem
from .schedule import SCHEDULES, Priority, WorkingSet, max_staleness
from .update import LogRegUpdate

__all__ = ["fit", "lambda_max", "objective", "load", "check", "make_problem",
           "make_setup", "make_file_setup", "LogRegUpdate", "LogRegAggregate", "SCHEDULES", "max_staleness"]

MiB = 1 << 20
GRAM_BUDGET = 512  # MiB: one round's Gram matrices in any one process, at most
WS_MIN = 32  # the smallest working set (when that many coordinates are candidates)


def _labels(y):
    y = np.asarray(y, dtype=np.float64).ravel()
    classes = np.unique(y)
    if classes.shape[0] != 2:
        raise DataError(f"y has {classes.shape[0]} distinct labels: need exactly two")
    return np.where(y == classes[1], 1.0, -1.0)


def lambda_max(X, y):
    """The smallest lambda for which w = 0 is optimal: ||X' y||_inf / (2 n), y in
    {-1, +1} (the gradient of the loss at 0 is -X'y / (2n))."""
    ypm = _labels(y)
    return float(np.abs(X.T @ ypm).max() / (2 * X.shape[0]))


def objective(X, y, coef, lam):
    """(1/n) sum_i log(1 + exp(-y_i x_i'coef)) + lam ||coef||_1, y any two labels."""
    z = _labels(y) * np.asarray(X @ coef).ravel()
    return float(np.logaddexp(0.0, -z).mean()) + lam * float(np.abs(coef).sum())


def gram_block_cap(n_workers, budget=GRAM_BUDGET):
    """The most coordinates of a working set: its Gram takes 8 m^2 bytes, and a round
    may hold W + 2 of them in one process (one per worker, their sum, the kept one)."""
    return max(1, math.isqrt(int(budget * MiB / (8 * (n_workers + 2)))))


def make_setup(data, lam=None, lambda_ratio=0.1, schedule="working-set", block=256, rho=0.1,
               floor=0.1, full_every=None, seed=0, *, tol=1e-6, name="data",
               ws_min=WS_MIN, reuse_hessian=True, gram_budget=GRAM_BUDGET):
    """``setup(ctx)`` for :func:`strads.run`; ``data()`` gives ``(X, y)`` (y: any
    two label values) and is only called on the scheduler rank. ``tol``: the gap's
    stopping tolerance (also given to the engine: the aggregate drops the update of the
    round that certifies the model)."""
    _check_flags(lam, lambda_ratio, schedule, block, rho, floor, full_every, ws_min)

    def setup(ctx):
        n_workers, staleness = ctx.n_workers, ctx.staleness
        X, y, classes = check(*data(), name=name)
        n, p = X.shape
        if n_workers > n:
            raise DataError(f"{n_workers} workers for {n} samples: each worker needs rows")
        q0 = X.T @ y
        lam_ = lam if lam is not None else lambda_ratio * float(np.abs(q0).max()) / (2 * n)
        sq_norms = K.csc_sq_norms(X.indptr, X.data) if sp.issparse(X) \
            else np.einsum("ij,ij->j", X, X)
        agg = LogRegAggregate(n, sq_norms, lam_, tol, min_size=ws_min,
                              block_cap=gram_block_cap(n_workers, gram_budget),
                              reuse=reuse_hessian)
        agg.classes = classes
        sched = _schedule(agg, schedule, block, full_every, seed, X, rho, floor, staleness)
        cuts = split_rows(X, n_workers)
        shards = [dict(row_block(X, a, b), y=y[a:b]) for a, b in zip(cuts[:-1], cuts[1:])]
        return sched, agg, shards

    return setup


def _schedule(agg, schedule, block, full_every, seed, X, rho, floor, staleness):
    """The schedule of ``agg`` (complete: its size is known); ``X`` only for priority
    (None: the workers run its filter)."""
    every = full_every or agg.p
    if schedule == "working-set":
        return WorkingSet(agg, block, staleness)
    if schedule == "priority":
        return Priority(agg, block, every, seed, X, rho, floor, staleness)
    return SCHEDULES[schedule](agg, block, every, seed, staleness)


def make_file_setup(path, target=None, lam=None, lambda_ratio=0.1, schedule="working-set",
                    block=256, rho=0.1, floor=0.1, full_every=None, seed=0, *, tol=1e-6,
                    name=None, ws_min=WS_MIN, reuse_hessian=True, gram_budget=GRAM_BUDGET):
    """``setup(ctx)`` for ``--data PATH``: every worker reads its own part of the file
    (:mod:`.data`, the Lasso app's reader: LIBSVM and MatrixMarket coordinate text,
    plain or gzip), the workers agree on the two labels, and rank 0 completes its
    aggregate and schedule from what worker 0 reports (n, the column norms, X'y, the
    labels). ``.npz`` and dense MatrixMarket files are read on rank 0 and split
    (:func:`make_setup`). X's empty columns are left out of the solve (their
    coefficients are 0).

    The priority schedule's dependency filter, which reads columns of X on the scheduler
    when it has them, runs on the workers here: a round's task holds the candidates, the
    workers sum their Gram matrix (an allreduce) and keep the same ones, in the same
    greedy order, and return the Newton sums of those with the columns chosen."""
    _check_flags(lam, lambda_ratio, schedule, block, rho, floor, full_every, ws_min)
    name = name or path
    whole = make_setup(lambda: load(path, target), lam, lambda_ratio, schedule, block, rho,
                       floor, full_every, seed, tol=tol, name=name, ws_min=ws_min,
                       reuse_hessian=reuse_hessian, gram_budget=gram_budget)

    def setup(ctx):
        if data.needs_rank0(path):
            return whole(ctx)
        agg = LogRegAggregate.later(lam, lambda_ratio, tol, min_size=ws_min,
                                    block_cap=gram_block_cap(ctx.n_workers, gram_budget),
                                    reuse=reuse_hessian)
        sched = _Later(lambda: _schedule(agg, schedule, block, full_every, seed, None, rho,
                                         floor, ctx.staleness))
        return sched, agg, [data.shard(path, target, name)] * ctx.n_workers

    return setup


def _check_flags(lam, lambda_ratio, schedule, block, rho, floor, full_every, ws_min):
    if schedule not in SCHEDULES:
        raise DataError(f"unknown schedule {schedule!r}; choose from {sorted(SCHEDULES)}")
    if block < 1:
        raise DataError(f"block must be >= 1, got {block}")
    if not 0 <= rho <= 1:
        raise DataError(f"rho must be in [0, 1], got {rho}")
    if not 0 <= floor <= 1:
        raise DataError(f"floor must be in [0, 1], got {floor}")
    if lam is not None and not (lam > 0 and math.isfinite(lam)):
        raise DataError(f"lambda must be a finite number > 0, got {lam} (without a "
                        "penalty the duality gap has no feasible dual point, and on "
                        "separable data no minimiser exists)")
    if lam is None and not (lambda_ratio > 0 and math.isfinite(lambda_ratio)):
        raise DataError(f"lambda ratio must be > 0, got {lambda_ratio}")
    if full_every is not None and full_every < 1:
        raise DataError(f"full_every must be >= 1, got {full_every}")
    if not ws_min >= 1:
        raise DataError(f"ws_min must be >= 1, got {ws_min}")


def fit(X, y, *, lam=None, lambda_ratio=0.1, schedule="working-set", block=256, rho=0.1,
        floor=0.1, full_every=None, seed=0, tol=1e-6, max_rounds=100000, ws_min=WS_MIN,
        reuse_hessian=True, **run_kw):
    """Fit sparse logistic regression; returns :class:`strads.Result` on the scheduler
    rank (``model['coef']``, ``model['classes']``: the two label values, -1 and +1 in
    that order, ``model['lambda']``), None on the workers. ``run_kw`` goes to
    :func:`strads.run` (workers, staleness, time_limit, out, quiet, mpi, ...)."""
    setup = make_setup(lambda: (X, y), lam, lambda_ratio, schedule, block, rho, floor,
                       full_every, seed, tol=tol, ws_min=ws_min,
                       reuse_hessian=reuse_hessian)
    return engine.run(setup, LogRegUpdate, tol=tol, max_rounds=max_rounds, app="logreg",
                      seed=seed, **run_kw)
