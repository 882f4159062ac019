"""A Jacobi schedule over K scheduler ranks (``--schedulers K``), as STRADS' several
schedulers: scheduler k runs the chosen schedule on the k-th contiguous range of
coordinates with its share of ``--block``, learning its priorities from the aggregate's
news (:func:`news`); a round updates the union of the K blocks (priority's filter on the
workers, over the candidates interleaved). Full rounds come by the aggregate's counts,
which every scheduler reads alike; a round's step is the smallest of the K steps.
"""
import numpy as np

from ...api import Schedule
from . import kernels as K
from .schedule import REFRESH


def ranges(p, n_parts):
    """The coordinate ranges of ``n_parts`` schedulers: boundaries 0 = b_0 < ... = p."""
    return np.array([k * p // n_parts for k in range(n_parts + 1)], dtype=np.int64)


class View:
    """What a schedule reads of the aggregate, for one range of coordinates: kept up to
    date from the aggregate's news instead of read from it."""

    def __init__(self, sq_norms, n):
        p = sq_norms.shape[0]
        self.n = n  # the samples (the filter's default threshold)
        self.norms = np.sqrt(sq_norms)
        self.w = np.broadcast_to(0.0, (p,))  # (a schedule reads its shape only)
        self.prio = np.zeros(p)
        self._tree = None
        self.done = self.objective_rises = self.updates = self.fulls = 0
        self.updates_at_full = 0  # the aggregate's updates when the last full round ended
        # every coordinate's priority mass now, after the last full round, and the
        # coordinates that full round gave a priority to (all ranges: the aggregate's)
        self.mass = self.mass0 = 0.0
        self.active0 = 0
        self.full_cols = None  # a full round's coordinates (scheduler 0; None: all)

    @property
    def tree(self):
        if self._tree is None:
            self._tree = K.tree_build(self.prio)
        return self._tree

    duals = 0  # (no dual to attach: the Lasso's)

    def full_task(self):
        return {"full": True, "cols": self.full_cols, "version": self.done}

    def block_task(self, cols, step):
        return {"cols": cols, "version": self.done, "step": step}

    def hear(self, news):
        self.done, self.objective_rises = news["done"], news["rises"]
        self.updates, self.mass = news["updates"], news["mass"]
        if "prio" in news:  # a full round: every priority anew
            self.prio, self._tree = news["prio"], None
            self.fulls += 1
            self.updates_at_full = self.updates
            self.mass0, self.active0 = news["mass0"], news["active0"]
            self.full_cols = news.get("full_cols")
        elif self._tree is not None:
            K.tree_set(self._tree, news["cols"], news["vals"])


class Part(Schedule):
    """Scheduler k's schedule, built where it runs (``begin``) by ``make(view, k, p,
    *args)`` from the squared column norms (given, or worker 0's report)."""

    def __init__(self, k, n_parts, make, args, full_every, sq_norms=None, n=None):
        self.k, self.n_parts, self.make, self.args = k, n_parts, make, args
        self.full_every, self.sq_norms, self.n = full_every, sq_norms, n
        self.inner = self.view = None
        self.full_round = None  # the round of the last full round scheduled

    def begin(self, reports):
        sq = self.sq_norms if self.sq_norms is not None else reports[0]["sq_norms"]
        n = self.n if self.n is not None else reports[0]["n"]
        p = sq.shape[0]
        self.lo, hi = (int(b) for b in ranges(p, self.n_parts)[self.k:self.k + 2])
        self.view = View(np.ascontiguousarray(sq[self.lo:hi]), int(n))
        self.full_every = self.full_every or p
        self.inner = self.make(self.view, self.k, p, *self.args)
        self.inner._refresh_due = lambda: False  # (this part decides, below, for all)
        self.inner._heard = lambda: None  # (nor from the union's updates)
        self.refresh = self.args[0] == "priority"
        self.sq_norms = None

    def feedback(self, news):
        self.view.hear(news)

    def schedule(self, round):
        v, inner = self.view, self.inner
        since = v.updates - v.updates_at_full
        full = self.full_round is None or (v.done > self.full_round and (
            since >= self.full_every or (self.refresh and v.mass0 > 0.0 and since >=
                                         max(v.active0, 1) and v.mass <= REFRESH * v.mass0)))
        if full:
            self.full_round = round
        inner.since_full = inner.full_every if full else 0  # (its own rule, overridden)
        task = inner.schedule(round)
        if not task.get("full"):
            task["cols"] = task["cols"] + self.lo
        return task

    @staticmethod
    def combine(parts):
        if parts[0].get("full"):  # they agree on full rounds
            return parts[0]
        cols = [t["cols"] for t in parts]
        task = {"cols": np.concatenate(cols), "version": parts[0]["version"],
                "step": min(t["step"] for t in parts)}
        if "select" in parts[0]:  # candidates for the workers' filter: interleaved
            turn = np.concatenate([np.arange(c.shape[0]) for c in cols])
            part = np.repeat(np.arange(len(cols)), [c.shape[0] for c in cols])
            task["cols"] = task["cols"][np.lexsort((part, turn))]
            task["select"] = (parts[0]["select"][0], sum(t["select"][1] for t in parts))
        return task


def news(agg, task, n_parts):
    """The aggregate's ``feedback``: the round's counts for every scheduler, and the
    priorities of its range (after a full round all, else ``agg.last``'s)."""
    p = agg.w.shape[0]
    b = ranges(p, n_parts)
    if task.get("full"):
        agg.live = agg.prio.copy()
        agg.mass = float(agg.live.sum())
        full = {"mass0": agg.mass, "active0": int(np.count_nonzero(agg.live))}
    else:
        cols, vals = agg.last
        agg.mass += float(vals.sum() - agg.live[cols].sum())
        agg.live[cols] = vals
    base = {"done": agg.done, "rises": agg.objective_rises, "updates": agg.updates,
            "mass": agg.mass}
    if task.get("full"):
        out = [{**base, **full, "prio": agg.prio[b[k]:b[k + 1]].copy()}
               for k in range(n_parts)]
        out[0]["full_cols"] = agg.full_task()["cols"]  # (its full task is the round's)
        return out
    owner = np.searchsorted(b, cols, side="right") - 1
    out = []
    for k in range(n_parts):
        mine = owner == k
        out.append({**base, "cols": cols[mine] - b[k], "vals": vals[mine]})
    return out
