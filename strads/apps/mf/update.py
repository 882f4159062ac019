"""MF worker: the residuals of its users' ratings by row and of its items' ratings by
column, its own factor rows, and synced copies of both full factors.

The row residuals reflect the worker's own W entries and the synced H; the column
residuals the synced W and its own H entries. A sync (new columns of W or H) is
therefore owed to the residual copy of the *other* side; it is kept pending and folded
into the next update of that side, in the same pass over the ratings.
"""
import time

import numpy as np

from ...engine import Update
from . import kernels as K

SIDES = ("W", "H")


class _Side:
    """One residual copy: CSR over the worker's users (side W) or CSC over its items (H).

    ``res`` is the residual of the worker's own entries and the synced other side, but
    for the other side's last synced change (``pending``), which the next step of this
    side folds in while it reads the ratings anyway."""

    def __init__(self, indptr, idx, res, own, reg):
        self.indptr, self.idx, self.res = indptr, idx, res
        self.own, self.reg = own, reg
        self.pending = None  # (cols, delta) of the other side, not yet in res
        self.G = None  # the gather buffer of ccd steps
        longest = int(np.diff(indptr).max()) if indptr.shape[0] > 1 else 0
        self.scratch = np.empty(max(longest, 1))  # a row's gathered column, per step

    def apply_pending(self):
        if self.pending is not None:
            cols, delta = self.pending
            K.apply_cols(self.indptr, self.idx, self.res, self.own, cols, delta)
            self.pending = None


class MFUpdate(Update):
    def __init__(self, shard):
        W, H = shard["W"], shard["H"]  # full initial factors, transposed (rank x m|n)
        u0, u1 = shard["users"]
        i0, i1 = shard["items"]
        self.sync = [W, H]
        self.test = shard["test"]  # this worker's share of the held-out pairs
        self.scores = []  # (sum of squared errors, seconds) of the syncs marked "score"
        self.sides = [
            _Side(*shard["rows"], W[:, u0:u1].copy(), shard["reg_rows"]),
            _Side(*shard["cols"], H[:, i0:i1].copy(), shard["reg_cols"])]

    def state(self):
        # the ratings' layout (indptr, idx), the regularisation and the held-out share are
        # the shard's, rebuilt by setup(); G and scratch are buffers
        return {"sync": self.sync, "scores": self.scores,
                "sides": [{"res": s.res, "own": s.own, "pending": s.pending}
                          for s in self.sides]}

    def load_state(self, state):
        self.sync, self.scores = state["sync"], state["scores"]
        for side, st in zip(self.sides, state["sides"]):
            side.res, side.own, side.pending = st["res"], st["own"], st["pending"]

    @classmethod
    def warmup(cls):
        indptr, idx = np.array([0, 1], np.int64), np.zeros(1, np.int32)
        res, own, other = np.ones(1), np.ones((2, 1)), np.ones((2, 1))
        reg, cols = np.ones(1), np.zeros(1, np.int64)
        K.ccd_step(indptr, idx, res, own, 0, np.ones((1, 2)), reg, cols, np.ones(1))
        K.apply_cols(indptr, idx, res, own, cols, other)
        K.als_step(indptr, idx, res, own, cols, other, reg)
        K.predict_pairs(own, other, idx, idx, res)
        K.wsumsq(None, res)

    def apply(self, sync):
        s = SIDES.index(sync["side"])
        cols, vals = sync["cols"], sync["vals"]
        delta = vals - self.sync[s][cols]
        self.sync[s][cols] = vals
        target = self.sides[1 - s]
        target.apply_pending()  # the next step folds in only the latest sync
        target.pending = (cols, delta)
        if sync.get("score"):  # the held-out error of the model as of this sync
            t0 = time.perf_counter()
            users, items, ratings = self.test
            out = np.empty(users.shape[0])
            K.predict_pairs(self.sync[0], self.sync[1], users, items, out)
            out -= ratings
            self.scores.append((K.wsumsq(None, out), time.perf_counter() - t0))

    def update(self, task):
        s = SIDES.index(task["side"])
        side, other, cols = self.sides[s], self.sync[1 - s], task["cols"]
        rss = None  # an empty round (padding between dependent columns) changes nothing
        if task["method"] == "ccd":
            # the columns one after the other (Gauss-Seidel); the first folds in the
            # other side's last sync
            for t in cols:
                p = side.pending
                tps = p[0] if p is not None else np.zeros(0, np.int64)
                # one buffer per side, reused: a fresh one per step would cost a page
                # fault per 4 KiB of the other side's size, which more workers don't share
                shape = (other.shape[1], 1 + tps.shape[0])
                if side.G is None or side.G.shape != shape:
                    side.G = np.empty(shape)
                G = side.G
                G[:, 0] = other[t]
                if p is not None:
                    G[:, 1:] = p[1].T
                rss = K.ccd_step(side.indptr, side.idx, side.res, side.own, int(t), G,
                                 side.reg, tps, side.scratch)
                side.pending = None
        else:
            side.apply_pending()
            rss = K.als_step(side.indptr, side.idx, side.res, side.own, cols, other, side.reg)
        scores, self.scores = self.scores, []
        return {"vals": side.own[cols], "rss": rss, "test": scores}
