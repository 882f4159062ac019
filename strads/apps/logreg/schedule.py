"""Logistic regression schedules.

* ``working-set`` (default): priority-chosen working sets (the support and the worst
  violators of the optimality conditions after each full round) solved by prox-Newton
  steps from the block's weighted Gram matrix, with a line search on the workers' exact
  losses (see :class:`WorkingSet` and :mod:`.aggregate`).
* ``priority`` (STRADS): candidates sampled with probability growing with the
  Hessian-weighted squared change of their last update, mixed with a uniform floor, kept
  only if their absolute correlation with every one already kept is <= rho; one Newton
  step per coordinate, in parallel (Jacobi).
* ``round-robin``: the next block of coordinates in order (Jacobi).
* ``random``: a uniformly random block (Jacobi).

Every schedule attaches the dual scale of the last full round to its next task (the
duality gap, see :mod:`.aggregate`). Coordinates of a round still in flight are never
chosen again until it is aggregated; a staleness above :func:`max_staleness` could only
add empty rounds and is refused at the first call.
"""
from collections import deque

import numpy as np
import scipy.sparse as sp

from ...engine import DataError, Schedule
from . import kernels as K

CALM_ROUNDS = 20  # rounds without an objective rise before the block or step grows back


def max_staleness(n_features, block):
    """Rounds in flight hold disjoint coordinates: ceil(n_features / block) of them (and
    the full round) cover every feature."""
    block = max(1, min(int(block), int(n_features)))
    return -(-int(n_features) // block)


class _Checked(Schedule):
    """What the logreg schedules share: the staleness check, and the task plans and
    dual requests they take from the aggregate (read, never written: each is numbered,
    and the schedule keeps the number of the last it took)."""
    staleness = 0
    _started = False
    checkpoint_skip = ("_started",)
    _plans_taken = 0
    _duals_taken = 0
    last_full = None  # Jacobi: the last full round dispatched

    def _start(self, p, block):
        self._started = True
        top = max_staleness(p, block)
        if self.staleness > top:
            raise DataError(
                f"staleness {self.staleness} is above the useful maximum {top} = "
                f"ceil({p} features / block {min(block, p)}): rounds in flight hold "
                f"disjoint coordinates, so more could only be empty (use at most {top})")

    def _take_plan(self):
        """The aggregate's next task if this schedule has not taken it yet, else None."""
        agg = self.agg
        if agg.plans == self._plans_taken or agg.next is None:
            return None
        self._plans_taken = agg.plans
        return dict(agg.next)

    def _attach_dual(self, task):
        """Ask for the dual's entropy sum in ``task`` if a full round is waiting for it,
        and no later full round has gone out since (the workers keep the margins of
        their last full round only)."""
        agg = self.agg
        if agg.duals > self._duals_taken:
            self._duals_taken = agg.duals
            if self.last_full is None or self.last_full == agg.dual_round:
                task["dual"] = agg.dual_c
        return task


class WorkingSet(_Checked):
    """Full round -> working set -> prox-Newton steps on it (Gram round, trial rounds),
    until its worst violation is EPS_TOL of the full round's -> full round. Each step
    depends on the last, so one round is in flight at a time: with a staleness the
    schedule sends empty rounds while it waits."""

    def __init__(self, agg, block=256, staleness=0):
        self.agg, self.block, self.staleness = agg, block, staleness

    def schedule(self, round):
        agg = self.agg
        if not self._started:
            self._start(agg.p, self.block)
        if agg.exhausted:
            return None
        task = self._take_plan()
        if task is None:
            task = {"kind": "wait"}
        task["version"] = agg.done
        return self._attach_dual(task)


class _Jacobi(_Checked):
    def __init__(self, agg, block, full_every, seed, staleness=0):
        self.staleness = staleness
        self.agg = agg
        self.p = agg.p
        self.busy = np.zeros(agg.p, dtype=np.bool_)  # in an unaggregated round
        self._flight = deque()  # (round, its coordinates) not yet aggregated
        self.step = 1.0  # relaxation of the Jacobi steps
        self.block = max(1, min(int(block), self.p))
        self.max_block, self.rises, self.calm = self.block, 0, 0
        self.full_every = int(full_every)
        self.rng = np.random.default_rng(seed)
        self.since_full = None  # updates scheduled since the last full round

    def schedule(self, round):
        agg = self.agg
        if not self._started:
            self._start(self.p, self.block)
        done = agg.done  # the aggregate has taken rounds 0 .. done - 1: free their columns
        while self._flight and self._flight[0][0] < done:
            self.busy[self._flight.popleft()[1]] = False
        if agg.objective_rises > self.rises:
            # parallel (or stale) Newton steps interfere: halve the block; at one
            # coordinate, the step
            self.rises, self.calm = agg.objective_rises, 0
            if self.block > 1:
                self.block //= 2
            else:
                self.step = max(self.step / 2, 1 / 1024)
        else:
            self.calm += 1
            if self.calm >= CALM_ROUNDS:
                self.calm = 0
                if self.step < 1:
                    self.step = min(1.0, 2 * self.step)
                else:
                    self.block = min(self.block + max(1, self.block // 4), self.max_block)
        if self.since_full is None or self.since_full >= self.full_every:
            self.since_full = 0
            task = self._attach_dual({"kind": "full", "hess": True, "version": agg.done})
            self.last_full = round
            return task
        cols = self.choose(min(self.block, self.p))
        self.since_full += cols.shape[0]
        self.busy[cols] = True
        self._flight.append((round, cols))
        return self._attach_dual({"kind": "block", "cols": cols, "version": agg.done,
                                  "step": self.step})

    def free(self, cols):
        return cols[~self.busy[cols]]


class RoundRobin(_Jacobi):
    pos = 0

    def choose(self, b):
        cols = (self.pos + np.arange(b)) % self.p
        self.pos = int((self.pos + b) % self.p)
        return np.unique(self.free(cols))


class Random(_Jacobi):
    def choose(self, b):
        return np.unique(self.free(self.rng.integers(0, self.p, b)))


class Priority(_Jacobi):
    # the scheduler's copy of X (setup() gives it again) and scratch left as found
    checkpoint_skip = _Jacobi.checkpoint_skip + ("cols", "head", "seen")

    def __init__(self, agg, block, full_every, seed, X, rho, floor, staleness=0):
        super().__init__(agg, block, full_every, seed, staleness)
        self.rho, self.floor = float(rho), float(floor)
        self.remote = X is None  # parallel loading: the workers hold X and filter
        if self.remote:
            self.cols = self.head = None
        elif sp.issparse(X):
            self.cols = (X.indptr, X.indices, X.data)
            self.head = np.full(X.shape[0], -1, dtype=np.int64)
        else:
            self.cols = (X,)
            self.head = None
        self.seen = np.zeros(self.p, dtype=np.bool_)

    def schedule(self, round):
        task = super().schedule(round)
        if self.remote and task["kind"] == "block":
            # the workers sum the candidates' Gram matrix and keep, in the same greedy
            # order, those with |correlation| <= rho with every one kept before them
            task["select"] = (self.rho, self._b)
        return task

    def choose(self, b):
        n_cand = 5 * b // 4
        cand = np.empty(n_cand, dtype=np.int64)
        tree = self.agg.tree
        n_prio = self.rng.binomial(n_cand, 1 - self.floor) if tree[1] > 0 else 0
        n_prio = K.tree_sample_distinct(tree, self.rng.random(n_prio), cand, self.seen)
        cand[n_prio:] = self.rng.integers(0, self.p, n_cand - n_prio)
        self.rng.shuffle(cand)
        if self.remote:  # distinct, free, non-empty candidates, in draw order
            self._b = b
            cand = cand[~self.busy[cand]]
            _, first = np.unique(cand, return_index=True)
            cand = cand[np.sort(first)]
            return cand[self.agg.norms[cand] > 0]
        if self.head is not None:
            cols = K.select_sparse(*self.cols, self.agg.norms, cand, self.rho, b,
                                   self.busy, self.head)
        else:
            cols = K.select_dense(*self.cols, self.agg.norms, cand, self.rho, b,
                                  self.busy)
        return np.sort(cols)


SCHEDULES = {"working-set": WorkingSet, "priority": Priority, "round-robin": RoundRobin,
             "random": Random}
