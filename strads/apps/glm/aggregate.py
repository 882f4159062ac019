"""What the generalised linear models' aggregates share (on the scheduler rank): the
coefficients, their l1 norm and non-zeros, the objective at each round's version, the
priorities and their sum tree, the Jacobi rounds' steps; the workers' sums are summed in
worker order. A datafit's aggregate defines ``full_task``, ``block_task``, ``_round``,
``converged``, ``summary``, ``lambda_for`` and ``complete`` (with parallel loading).
"""
from collections import deque

import numpy as np
import scipy.sparse as sp

from ...api import Aggregate
from . import groups as KG
from . import kernels as K
from . import split


class GLMAggregate(Aggregate):
    kept = None  # the columns solved, when X's empty columns were left out
    n_features = None  # X's columns, empty ones too
    # setup() (or begin(), from the workers' reports) sets them again
    checkpoint_skip = ("kept", "n_features", "_pending", "n_parts", "last", "n",
                       "sq_norms", "norms")
    _pending = None  # setup's arguments until begin() completes a later() aggregate
    n_parts = 1  # scheduler ranks (--schedulers): > 1, the schedules learn from feedback()
    last = None  # (coordinates, new priorities) of the last Jacobi round, for feedback()
    duals = 0  # dual points the schedule should send (the logistic loss's gap)
    dual_acc = None  # and an extrapolated one's (weights, scale), sent beside it
    grouped = 0  # priority: updates that joined a group (solved with others, exactly)
    mu = None  # X's column means, when the datafit centres X implicitly (an intercept)
    # a datafit whose Jacobi steps can overshoot: its curvature per unit of a column's
    # squared norm, at most (the steps are then judged: _checked_steps)
    curv_bound = None
    anchor = None  # the last accepted Jacobi round: (version, objective, cols, q)
    trial = ()  # the steps since: (version they are seen at, cols, delta, safe)
    reject_at = 0  # rounds computed before this version saw a rejected point
    check_loaded = None  # a datafit's checks of its loaded state: a method raising ValueError

    @property
    def rise(self):
        """A Jacobi round's objective rise beyond its rounding (relative), which rejects
        the steps before it: the objective is a sum of n terms, to about n epsilons (at
        a looser bound a round's unstable mode grows by accepted rises below it)."""
        return self.n * EPS

    @classmethod
    def later(cls, *args, **kw):
        """An aggregate completed in :meth:`begin` from worker 0's report (parallel
        loading): ``complete(facts, *args, **kw)``."""
        agg = cls.__new__(cls)
        agg._pending = (args, kw)
        return agg

    def begin(self, reports):
        if self._pending is None:
            return
        args, kw = self._pending
        f = reports[0]
        self.complete(f, *args, **kw)
        self.kept, self.n_features = f["kept"], f["n_features"]

    def _init(self, n_samples, sq_norms, lam, primal):
        """The state every datafit keeps; ``primal``: the objective at w = 0."""
        self.n, self.lam = n_samples, float(lam)
        self.thresh = n_samples * self.lam
        self.sq_norms = sq_norms
        self.norms = np.sqrt(sq_norms)
        p = sq_norms.shape[0]
        self.w = np.zeros(p)
        self.prio = np.zeros(p)
        self._tree = None  # sum tree over prio, built when a schedule samples from it
        self.l1 = 0.0
        self.nnz = 0  # non-zeros in w, kept up to date: counting them costs a pass
        # ||w||_1 after each aggregated round from version l1_base on: l1_at[v - l1_base]
        # (tasks' versions never decrease, so older ones are dropped as they pass)
        self.l1_at, self.l1_base = deque([0.0]), 0
        self.done = 0  # rounds aggregated
        self.updates = 0
        self.primal = primal
        self.gap = np.inf
        self.fulls = 0  # full rounds aggregated
        self.objective_rises = 0

    def warm(self, w0):
        """Start from coefficients ``w0`` (a warm start); returns the sync that takes the
        workers there from 0."""
        self.w[:] = w0
        self.l1 = float(np.abs(w0).sum())
        self.l1_at = deque([self.l1])
        self.nnz = int(np.count_nonzero(w0))
        cols = np.flatnonzero(w0)
        return self._sync(cols, w0[cols])

    def _sync(self, cols, delta):
        """The sync that moves coordinates ``cols`` by ``delta``."""
        sync = {"cols": cols, "delta": delta}
        if self.mu is not None:  # (the workers' residual stays centred)
            sync["shift"] = float(self.mu[cols] @ delta)
        return sync

    def aggregate(self, round, task, partials):
        self.done += 1
        sync = self._round(round, task, partials)  # (the datafit's)
        self.l1_at.append(self.l1)  # the penalty at this version, for _primal_at
        return sync

    def objective(self):
        return self.primal

    def _primal_at(self, version, value):
        """The objective at ``version``: the datafit's ``value`` there plus the penalty
        of that version's coefficients."""
        while self.l1_base < version:
            self.l1_at.popleft()
            self.l1_base += 1
        return value + self.lam * self.l1_at[0]

    def _observe(self, primal, version):
        """A round's objective: a rise (beyond rounding) is counted, for the schedules."""
        if primal > self.primal * (1 + RISE) and version > 0:
            self.objective_rises += 1
        self.primal = primal

    def _checked_steps(self, task, partials, primal, q, h):
        """A Jacobi round whose steps can overshoot (``curv_bound``): its objective judges
        the steps before it (:meth:`_judge`); if they stand, its own are taken and wait
        to be judged. A round computed at a point a rejection left is dropped."""
        version = task["version"]
        if version < self.reject_at:
            return None
        cols = partials[0].get("cols", task["cols"])
        back = self._judge(primal, version, cols, q)
        if back is not None:
            return back
        if "Gx" in task:
            q = self._unstale(task, version, cols, q)
        sync = self._steps(task, partials, q, h)
        if sync["cols"].shape[0]:
            self.trial = list(self.trial) + [(self.done, sync["cols"], sync["delta"], False)]
        return sync

    def _unstale(self, task, version, cols, q):
        """``q`` (x_j' r of ``cols`` at ``version``) moved by the steps taken since (the
        rounds in flight when it was scheduled, on ``xcols``) through their Gram with it
        (``Gx``: a quadratic datafit's, exact): the round steps as if it came after them."""
        xcols, d = task["xcols"], np.zeros(task["xcols"].shape[0])
        for stamp, moved, delta, _ in self.trial:
            if stamp > version:
                pos = np.minimum(np.searchsorted(xcols, moved), xcols.shape[0] - 1)
                if not np.array_equal(xcols[pos], moved):
                    return q  # (steps it was not told of: judged as they are)
                d[pos] += delta
        if not d.any():
            return q
        gx = task["Gx"]
        if self.mu is not None:  # (X centred implicitly)
            gx = gx - self.n * np.outer(self.mu[cols], self.mu[xcols])
        return q - gx @ d

    def _judge(self, primal, version, cols, q):
        """The objective at ``version`` (q of ``cols`` there) judges the steps seen
        by then since the last accepted point (the anchor): no rise beyond rounding
        accepts them, the anchor moves here. A rise reverts every step since the anchor
        and takes a safe step instead, on those coordinates from the anchor's q: each
        coordinate's curvature bound times their number majorises the loss (Cauchy-
        Schwarz), so it cannot rise (a rejected safe step is only reverted). Returns the
        rejection's sync, or None."""
        anchor = self.anchor
        if anchor is not None and version < anchor[0]:  # (stale: the anchor is newer)
            return None
        seen = [t for t in self.trial if t[0] <= version]
        if anchor is None or not seen or primal <= anchor[1] * (1 + self.rise):
            self.anchor = (version, primal, cols.copy(), q.copy())
            self.trial = [t for t in self.trial if t[0] > version]
            self.primal = primal
            return None
        self.objective_rises += 1
        steps, self.trial = self.trial, []
        moved, inv = np.unique(np.concatenate([t[1] for t in steps]), return_inverse=True)
        old = self.w[moved]
        self.w[moved] -= np.bincount(inv, np.concatenate([t[2] for t in steps]),
                                     moved.shape[0])
        # the moved coordinates whose q the anchor knows
        sel, _, at = np.intersect1d(moved, anchor[2], assume_unique=True, return_indices=True)
        if sel.shape[0] and not all(t[3] for t in steps):
            curv = self.curv_bound * sel.shape[0] * self.sq_norms[sel]
            delta = np.empty(sel.shape[0])
            K.coordinate_steps(self.w, sel, anchor[3][at], curv, self.thresh, 1.0, delta)
            self.trial = [(self.done, sel, delta, True)]
        self.reject_at, self.primal = self.done, anchor[1]
        change = self.w[moved] - old
        self.l1 += float(np.abs(self.w[moved]).sum() - np.abs(old).sum())
        self.nnz += np.count_nonzero(self.w[moved]) - np.count_nonzero(old)
        keep = change != 0.0
        return self._sync(moved[keep], change[keep])

    def _settle(self, primal):
        """At the end of a fit whose final point's objective is ``primal``: Jacobi steps
        not judged yet that raised it are reverted (the model is the last accepted
        point). Returns the model's objective."""
        if not self.trial or primal <= self.anchor[1] * (1 + self.rise):
            return primal
        for _, cols, delta, _ in self.trial:
            self.w[cols] -= delta
        self.l1, self.nnz = float(np.abs(self.w).sum()), int(np.count_nonzero(self.w))
        return self.anchor[1]

    def _model(self, loss):
        """At the end of a fit: the model (the last accepted point, :meth:`_settle`) and
        its objective, from ``loss``, the datafit's sum at the final point."""
        self.primal = self._settle(loss / self.n + self.lam * float(np.abs(self.w).sum()))
        return {"coef": self.coef(), "lambda": np.float64(self.lam)}

    def _steps(self, task, partials, q, h):
        """A Jacobi round's coordinate steps on its block (the task's, or the workers'
        filter's); with priority's groups, each group's exact step from its Gram (the
        task's or worker 0's ``Gs``, or the workers' ``Gg`` summed here)."""
        cols = partials[0].get("cols", task["cols"])
        gptr = partials[0].get("groups", task.get("groups"))
        step = task.get("step", 1.0)
        before = np.count_nonzero(self.w[cols])
        delta = np.empty(cols.shape[0])
        if gptr is None:
            self.l1 += K.coordinate_steps(self.w, cols, q, h, self.thresh, step, delta)
        else:
            gram = task["Gs"] if "Gs" in task else partials[0]["Gs"] if \
                "Gs" in partials[0] else _sum(partials, "Gg")
            if self.mu is not None:
                gram = _centre_groups(gram, self.mu[cols], gptr, self.n)
            self.l1 += KG.group_steps(self.w, cols, gptr, q, h, gram, self.thresh, step,
                                     delta, KG.GROUP_RTOL, KG.GROUP_PASSES)
            self.grouped += cols.shape[0] - (gptr.shape[0] - 1)
        self.updates += cols.shape[0]
        return self._moved(cols, before, delta, h)

    def _moved(self, cols, before, delta, h):
        """After a block's changes ``delta`` (``before``: its non-zeros then): the
        non-zeros, the priorities h d^2 in the sum tree; the sync with the coordinates
        that moved."""
        self.nnz += np.count_nonzero(self.w[cols]) - before
        if self._tree is not None or self.n_parts > 1:
            vals = h * delta * delta
            if self._tree is not None:
                K.tree_set(self._tree, cols, vals)
            if self.n_parts > 1:
                self.last = (cols, vals)
        moved = delta != 0.0
        return self._sync(cols[moved], delta[moved])

    def feedback(self, round, task, sync):
        return split.news(self, task, self.n_parts)

    def load_state(self, state):
        super().load_state(state)
        big = [k for k, v in state.items() if isinstance(v, (int, np.integer))
               and not isinstance(v, (bool, np.bool_)) and abs(int(v)) >= 2 ** 62]
        if big:
            raise ValueError(f"{big[0]}: not a count of this run")
        if not (np.isfinite(self.w).all() and np.isfinite(self.prio).all()):
            raise ValueError("w, prio: not finite")
        if not (isinstance(self.l1_at, deque) and 0 <= self.l1_base <= self.done and
                len(self.l1_at) == self.done - self.l1_base + 1):
            raise ValueError("l1_at: not the penalty at each version from l1_base on")
        if self.check_loaded is not None:
            self.check_loaded()
        t = self._tree  # (the schedule descends it to a coordinate): its leaves' sums
        if t is not None and not np.array_equal(t, K.tree_build(
                t[t.shape[0] // 2:][:self.w.shape[0]])):
            raise ValueError("_tree: not a sum tree over this run's coordinates")

    tree = split.View.tree  # (the sum tree over prio, built when a schedule samples)

    def trace(self):
        return {"duality_gap": self.gap, "nnz_coef": self.nnz}

    def coef(self):
        """The model's coefficients over every feature (the empty columns, left out of
        the solve, are 0)."""
        if self.kept is None:
            return self.w.copy()
        coef = np.zeros(self.n_features)
        coef[self.kept] = self.w
        return coef


RISE = 1e-9  # an objective rise the schedules count (relative)
EPS = float(np.finfo(np.float64).eps)


def _sum(partials, key):
    """Sum of the partials' arrays ``key``, in worker order (into the first: each round's
    partials are its own copies)."""
    out = partials[0][key]
    for part in partials[1:]:
        out += part[key]
    return out


def _gram_sum(partials, m):
    """The workers' Gram matrices summed densely in worker order: whole (``G``), their
    non-zeros (``Gv`` at flat ``Gi``, or CSR ``Gp``, ``Gi``) or factors (``F*``)."""
    G = None
    for p in partials:
        if "G" in p and G is None:
            G = p["G"]
            continue
        if G is None:
            G = np.zeros((m, m))
        if "G" in p:
            G += p["G"]
        elif "Fp" in p:
            F = sp.csc_matrix((p["Fv"], p["Fi"], p["Fp"]), shape=(int(p["Fn"]), m))
            G += (F.T @ F).toarray()
        else:  # (each entry once within a worker's matrix)
            flat = p["Gi"] if "Gp" not in p else \
                np.repeat(np.arange(m, dtype=np.int64) * m, np.diff(p["Gp"])) + p["Gi"]
            G.reshape(-1)[flat] += p["Gv"]
    return G


def _centre_groups(gram, mu, gptr, n):
    """Groups' Gram matrices (:func:`kernels.group_steps`' layout) less n mu_g mu_g'."""
    gram, off = gram.copy(), 0
    for a, b in zip(gptr[:-1], gptr[1:]):
        if b - a > 1:
            gram[off:off + (b - a) ** 2] -= n * np.outer(mu[a:b], mu[a:b]).ravel()
            off += (b - a) ** 2
    return gram


def _stack(partials, m, kp, ki, kv):
    """The workers' CSR (or CSC) parts (keys ``kp``, ``ki``, ``kv``) concatenated: (their
    pointers (W, m + 1) into them, the indices, the values)."""
    ptrs = np.empty((len(partials), m + 1), dtype=np.int64)
    base = 0
    for w, p in enumerate(partials):
        ptrs[w] = p[kp] + base
        base += p[ki].shape[0]
    return (ptrs, np.concatenate([p[ki] for p in partials]),
            np.concatenate([p[kv] for p in partials]))


def _factor(partials, m):
    """The workers' factors D^1/2 X_B stacked in worker order."""
    n_rows = np.array([int(p["Fn"]) for p in partials], dtype=np.int64)
    offsets = np.concatenate([[0], np.cumsum(n_rows)[:-1]]).astype(np.int64)
    stacked = K.factor_stack(*_stack(partials, m, "Fp", "Fi", "Fv"), offsets)
    return ("factor", *stacked, int(n_rows.sum()))
