"""Lasso by scheduled parallel coordinate descent (STRADS, Lee et al. 2014).

Minimises 1/(2n) ||y - X b||^2 + lambda ||b||_1 (no intercept). Samples (rows) are split
across workers, balanced by non-zeros; the scheduler chooses the coordinates of each
round, sums the workers' partial inner products, soft-thresholds and sends the changes
back, and every worker updates its residual.
"""
import math

import numpy as np
import scipy.sparse as sp

from ... import engine
from ...engine import DataError
from ...io.memory import memory_limits
from . import kernels as K
from . import data
from .aggregate import LassoAggregate
from .data import check, load, make_problem
from . import split
from .schedule import SCHEDULES, Priority, max_staleness
from .update import LassoUpdate

__all__ = ["fit", "lambda_max", "objective", "load", "make_problem", "LassoUpdate",
           "LassoAggregate", "SCHEDULES", "make_setup", "make_file_setup",
           "default_gram_budget", "gram_block_cap", "max_staleness"]

MiB = 1 << 20
GRAM_BUDGET_MAX = 512  # MiB: the default Gram budget, unless memory is scarcer


def default_gram_budget():
    """The default ``gram_budget`` in MiB: GRAM_BUDGET_MAX (512), or an eighth of the
    memory this process may use (:func:`strads.io.memory.memory_limits`), if less."""
    limits = memory_limits()
    return min([GRAM_BUDGET_MAX] + [b / 8 / MiB for b in limits])


def gram_block_cap(gram_budget, n_workers):
    """The most coordinates of one working-set block: its Gram matrix takes 8 m^2 bytes,
    and one round may need W + 2 of them in one process (the scheduler receives one from
    each of the W workers and sums them in place; a worker holds its own, the frame it
    is sent in and, dense, the previous block's, kept for the overlap), so
    m = floor(sqrt(gram_budget MiB / (8 (W + 2)))), at least 1."""
    return max(1, int(math.isqrt(int(gram_budget * MiB / (8 * (n_workers + 2))))))


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


def _check_flags(schedule, block, rho, floor, lam, lambda_ratio, gram_budget, time_limit):
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
    if gram_budget is not None and not (gram_budget > 0 and math.isfinite(gram_budget)):
        raise DataError(f"gram budget must be a positive number of MiB, got {gram_budget}")
    if time_limit is not None and not time_limit > 0:
        raise DataError(f"time_limit must be > 0 seconds, got {time_limit}")


def _schedule(agg, schedule, block, full_every, seed, X, rho, floor, time_limit, staleness,
              gram_budget, n_workers):
    """The schedule of ``agg`` (complete: its size is known); ``X`` only for priority."""
    every = full_every or agg.beta.shape[0]
    if schedule == "priority":
        return Priority(agg, block, every, seed, X, rho, floor, time_limit, staleness)
    if schedule == "working-set":
        budget = gram_budget if gram_budget is not None else default_gram_budget()
        agg.block_cap = gram_block_cap(budget, n_workers)
        return SCHEDULES[schedule](agg, max_block=agg.block_cap, block=block,
                                   time_limit=time_limit, staleness=staleness)
    return SCHEDULES[schedule](agg, block, every, seed, time_limit, staleness)


def _part(view, k, p, schedule, block, seed, rho, floor, time_limit, staleness):
    """Scheduler k's schedule of its range (``--schedulers``; :class:`split.Part` builds
    it where it runs): the range's share of the block, a seed of its own; priority's
    dependency filter on the workers. Its full rounds are the part's to decide
    (full_every: unused)."""
    b = max(1, round(block * view.beta.shape[0] / p))
    seed = np.random.SeedSequence([seed, k])
    if schedule == "priority":
        return Priority(view, b, 1, seed, None, rho, floor, time_limit, staleness)
    return SCHEDULES[schedule](view, b, 1, seed, time_limit, staleness)


def _parts(agg, ctx, schedule, block, full_every, seed, rho, floor, time_limit,
           sq_norms=None):
    """The K schedules of ``--schedulers K``, one per range of coordinates."""
    if schedule == "working-set":
        raise DataError(f"--schedulers {ctx.n_schedulers}: the working-set schedule "
                        "solves its blocks exactly on rank 0 and does not split; use "
                        "--schedule priority, round-robin or random, or --schedulers 1")
    agg.n_parts = K_ = ctx.n_schedulers
    args = (schedule, block, seed, rho, floor, time_limit, ctx.staleness)
    return [split.Part(k, K_, _part, args, full_every, sq_norms) for k in range(K_)]


def make_setup(data, lam=None, lambda_ratio=0.1, schedule="working-set", block=256, rho=0.1,
               floor=0.1, full_every=None, seed=0, *, gram_budget=None, time_limit=None):
    """``setup(ctx)`` for :func:`strads.run`; ``data()`` gives ``(X, y)`` and is
    only called on the scheduler rank.

    ``gram_budget`` (MiB; None: :func:`default_gram_budget`): working-set blocks are cut
    to :func:`gram_block_cap` coordinates, so that one round's Gram matrices fit in it
    in any one process. ``time_limit`` (seconds; pass the run's): the clock starts at
    the first round, and block rounds return what they have once it has run out."""
    _check_flags(schedule, block, rho, floor, lam, lambda_ratio, gram_budget, time_limit)

    def setup(ctx):
        n_workers, staleness = ctx.n_workers, ctx.staleness
        X, y = check(*data())
        n, p_all = X.shape
        if n_workers > n:
            raise DataError(f"{n_workers} workers for {n} samples: each worker needs rows")
        # an empty column's coefficient is 0 at the optimum: solve the others only, so a
        # file that names feature 5*10^7 once costs no state per absent feature
        kept = None
        if sp.issparse(X) and X.nnz and np.diff(X.indptr).min() == 0:
            kept = np.flatnonzero(np.diff(X.indptr))
            X = X[:, kept]
        lam_ = lam if lam is not None else lambda_ratio * lambda_max(X, y)
        sq_norms = K.csc_sq_norms(X.indptr, X.data) if sp.issparse(X) \
            else np.einsum("ij,ij->j", X, X)
        agg = LassoAggregate(sq_norms, n, lam_, float(y @ y))
        agg.kept, agg.n_features = kept, p_all
        if ctx.n_schedulers > 1:
            sched = _parts(agg, ctx, schedule, block, full_every, seed, rho, floor,
                           time_limit, sq_norms)
        else:
            sched = _schedule(agg, schedule, block, full_every, seed, X, rho, floor,
                              time_limit, staleness, gram_budget, n_workers)
        cuts = split_rows(X, n_workers)
        shards = [dict(row_block(X, a, b), y=y[a:b]) for a, b in zip(cuts[:-1], cuts[1:])]
        if ctx.n_schedulers > 1 and schedule == "priority":  # (the filter's norms)
            for shard in shards:
                shard["sq_norms"] = _read_only(sq_norms)
        return sched, agg, shards

    return setup


class _Later(engine.Schedule):
    """A schedule built in ``begin``, once the aggregate knows the problem's size from
    the workers' reports (parallel loading: the scheduler never reads the file)."""

    def __init__(self, build):
        self.build, self.inner = build, None

    def begin(self, reports):
        self.inner = self.build()
        self.inner.begin(reports)

    @property
    def total_rounds(self):
        return getattr(self.inner, "total_rounds", None)

    def schedule(self, round):
        return self.inner.schedule(round)

    def state(self):
        return self.inner.state()

    def load_state(self, state):
        self.inner.load_state(state)


def make_file_setup(path, target=None, lam=None, lambda_ratio=0.1, schedule="working-set",
                    block=256, rho=0.1, floor=0.1, full_every=None, seed=0, *,
                    gram_budget=None, time_limit=None):
    """``setup(ctx)`` for ``--data PATH``: every worker reads its own part of the file
    (:mod:`.data`: LIBSVM and MatrixMarket coordinate text, plain or gzip) and rank 0
    completes its aggregate and schedule from what the workers report. ``.npz`` and
    dense MatrixMarket files are read on rank 0 and split (:func:`make_setup`).

    The priority schedule's dependency filter, which reads columns of X on the scheduler
    when it has them, runs on the workers here: a round's task holds the candidates, the
    workers sum their Gram matrix (an allreduce) and keep the same ones, in the same
    greedy order, and return the gradient of those with the columns chosen."""
    _check_flags(schedule, block, rho, floor, lam, lambda_ratio, gram_budget, time_limit)
    whole = make_setup(lambda: load(path, target), lam, lambda_ratio, schedule, block, rho,
                       floor, full_every, seed, gram_budget=gram_budget,
                       time_limit=time_limit)

    def setup(ctx):
        if data.needs_rank0(path):
            return whole(ctx)
        agg = LassoAggregate.later(lam, lambda_ratio)
        if ctx.n_schedulers > 1:  # (their ranges' norms from worker 0's report)
            return (_parts(agg, ctx, schedule, block, full_every, seed, rho, floor,
                           time_limit), agg, [data.shard(path, target)] * ctx.n_workers)
        sched = _Later(lambda: _schedule(agg, schedule, block, full_every, seed, None, rho,
                                         floor, time_limit, ctx.staleness, gram_budget,
                                         ctx.n_workers))
        desc = data.shard(path, target)
        return sched, agg, [desc] * ctx.n_workers

    return setup


def fit(X, y, *, lam=None, lambda_ratio=0.1, schedule="working-set", block=256, rho=0.1,
        floor=0.1, full_every=None, seed=0, tol=1e-6, max_rounds=100000, gram_budget=None,
        **run_kw):
    """Fit the Lasso; returns :class:`strads.Result` (``model['coef']``) on the scheduler
    rank. ``run_kw`` goes to :func:`strads.run` (workers, staleness, time_limit, ...);
    ``time_limit`` also to the schedule, so that a long block round stops in time."""
    setup = make_setup(lambda: (X, y), lam, lambda_ratio, schedule, block, rho, floor,
                       full_every, seed, gram_budget=gram_budget,
                       time_limit=run_kw.get("time_limit"))
    return engine.run(setup, LassoUpdate, tol=tol, max_rounds=max_rounds, app="lasso",
                      seed=seed, **run_kw)
