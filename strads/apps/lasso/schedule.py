"""Lasso schedules. Each round updates a block of coordinates in parallel (every worker
computes their inner products over its rows); a full round now and then computes all of
them, for the duality gap and fresh priorities.

* ``priority`` (STRADS): sample candidates with probability growing with the squared
  change of their last update, mixed with a uniform floor so none starves; keep a
  candidate only if its absolute correlation with every one already kept is <= rho.
* ``round-robin``: the next block of coordinates in order.
* ``random``: a uniformly random block (Shotgun).
* ``working-set``: the support plus the worst violators after each full round, solved
  exactly on the scheduler from the block's Gram matrix (see :class:`WorkingSet`).

Coordinates of a round still in flight (staleness > 0) are never chosen again until it is
aggregated: their minimiser must be computed against the coefficient it will replace.
"""
import numpy as np
import scipy.sparse as sp

from ...engine import Schedule
from . import kernels as K

CALM_ROUNDS = 20  # rounds without an objective rise before the block or step grows back


class _Base(Schedule):
    def __init__(self, agg, block, full_every, seed):
        self.agg, self.block = agg, int(block)
        self.max_block, self.rises, self.calm = self.block, 0, 0
        self.p = agg.beta.shape[0]
        self.full_every = int(full_every)
        self.rng = np.random.default_rng(seed)
        self.since_full = None  # updates scheduled since the last full round

    def schedule(self, round):
        agg = self.agg
        if agg.objective_rises > self.rises:
            # The objective went up: the updates of one round, or of the rounds in
            # flight, interfere too much. Halve the block; at one coordinate, the step.
            self.rises, self.calm = agg.objective_rises, 0
            if self.block > 1:
                self.block //= 2
            else:
                agg.step = max(agg.step / 2, 1 / 1024)
        else:
            self.calm += 1
            if self.calm >= CALM_ROUNDS:  # grow back gently once it has been calm a while
                self.calm = 0
                if agg.step < 1:
                    agg.step = min(1.0, 2 * agg.step)
                else:
                    self.block = min(self.block + max(1, self.block // 4), self.max_block)
        if self.since_full is None or self.since_full >= self.full_every:
            self.since_full = 0
            return agg.full_task()
        cols = self.choose(min(self.block, self.p))
        self.since_full += cols.shape[0]
        agg.busy[cols] = True
        return {"cols": cols, "version": agg.done}

    def free(self, cols):
        return cols[~self.agg.busy[cols]]


class RoundRobin(_Base):
    pos = 0

    def choose(self, b):
        cols = (self.pos + np.arange(b)) % self.p
        self.pos = int((self.pos + b) % self.p)
        return np.unique(self.free(cols))


class Random(_Base):
    def choose(self, b):
        return np.unique(self.free(self.rng.integers(0, self.p, b)))


class Priority(_Base):
    def __init__(self, agg, block, full_every, seed, X, rho, floor):
        super().__init__(agg, block, full_every, seed)
        self.rho, self.floor = float(rho), float(floor)
        if sp.issparse(X):
            self.cols = (X.indptr, X.indices, X.data)
            head = np.full(X.shape[0], -1, dtype=np.int64)
            self.select = lambda *a: K.select_sparse(*a, head)
        else:
            self.cols = (X,)
            self.select = K.select_dense
        self.seen = np.zeros(self.p, dtype=np.bool_)  # scratch of the distinct draws

    def choose(self, b):
        # a quarter more candidates than the block: each one costs the scheduler random
        # reads of its column, and with distinct draws few are lost to the filter (on
        # problem (a) of the benchmark, 2b candidates took 1.09x round-robin's time and
        # 1.25b 0.92x, for the same number of updates within 15%)
        n_cand = 5 * b // 4
        cand = np.empty(n_cand, dtype=np.int64)
        tree = self.agg.tree
        n_prio = self.rng.binomial(n_cand, 1 - self.floor) if tree[1] > 0 else 0
        # distinct draws: with peaked priorities, draws with replacement repeat the few
        # top coordinates and the block ends up a fraction of its size
        n_prio = K.tree_sample_distinct(tree, self.rng.random(n_prio), cand, self.seen)
        cand[n_prio:] = self.rng.integers(0, self.p, n_cand - n_prio)
        self.rng.shuffle(cand)
        # busy doubles as the filter's "already taken" mask
        cols = self.select(*self.cols, self.agg.norms, cand, self.rho, b, self.agg.busy)
        return np.sort(cols)


class WorkingSet(Schedule):
    """Working sets (as skglm and celer), scheduled by priority: after each full round
    the block is the current support plus the coordinates whose minimiser moves most
    (for a zero coefficient: its violation of the optimality condition), twice the
    support in size; the workers also return the block's Gram matrix and the scheduler
    solves the block exactly, so correlated coordinates in one block are safe. Full
    rounds and block rounds alternate."""

    def __init__(self, agg, min_size=256):
        self.agg, self.min_size = agg, min_size
        self.used = 0  # full rounds already turned into a block
        self.pending_full = True  # a full round is due (the first round is one)

    def schedule(self, round):
        agg = self.agg
        if agg.fulls > self.used and not agg.busy.any():
            self.used = agg.fulls
            nonzero = agg.beta != 0
            size = max(self.min_size, 2 * int(np.count_nonzero(nonzero)))
            pool = np.flatnonzero(nonzero | (agg.prio > 0))
            if pool.shape[0] > size:
                score = agg.prio[pool]
                score[nonzero[pool]] = np.inf
                pool = pool[np.argpartition(-score, size - 1)[:size]]
            cols = np.sort(pool)
            if cols.shape[0]:
                agg.busy[cols] = True
                self.pending_full = True
                return {"cols": cols, "gram": True, "version": agg.done}
        if self.pending_full:
            self.pending_full = False
            return agg.full_task()
        return {"cols": np.empty(0, np.int64), "version": agg.done}  # waiting (staleness)


SCHEDULES = {"priority": Priority, "round-robin": RoundRobin, "random": Random,
             "working-set": WorkingSet}
