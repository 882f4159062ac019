"""MF worker: the residuals of its users' ratings by row and of its items' ratings by
column, its own factor rows, and synced copies of both full factors.

The row residuals reflect the worker's own W entries and the synced H; the column
residuals the synced W and its own H entries. A sync (new columns of W or H) is
therefore owed to the residual copy of the *other* side; it is kept pending and folded
into the next update of that side, in the same pass over the ratings.
"""
import numpy as np

from ...engine import Update
from . import kernels as K

SIDES = ("W", "H")


class _Side:
    """One residual copy: CSR over the worker's users (side W) or CSC over its items (H)."""

    def __init__(self, indptr, idx, res, own, reg):
        self.indptr, self.idx, self.res = indptr, idx, res
        self.own, self.reg = own, reg
        self.pending = None  # (cols, delta) of the other side, not yet in res

    def flush(self):
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
        self.sides = [
            _Side(*shard["rows"], np.ascontiguousarray(W[:, u0:u1]), shard["reg_rows"]),
            _Side(*shard["cols"], np.ascontiguousarray(H[:, i0:i1]), shard["reg_cols"])]

    @classmethod
    def warmup(cls):
        indptr, idx = np.array([0, 1], np.int64), np.zeros(1, np.int32)
        res, own, other = np.ones(1), np.ones((2, 1)), np.ones((2, 1))
        reg, cols = np.ones(1), np.zeros(1, np.int64)
        K.ccd_step(indptr, idx, res, own, 0, other, reg, other[0], 1, True)
        K.apply_cols(indptr, idx, res, own, cols, other)
        K.als_step(indptr, idx, res, own, cols, other, reg)
        K.test_update(idx, idx, res, cols, other, other)
        K.predict_pairs(own, other, idx, idx, res)

    def apply(self, sync):
        s = SIDES.index(sync["side"])
        cols, vals = sync["cols"], sync["vals"]
        delta = vals - self.sync[s][cols]
        self.sync[s][cols] = vals
        target = self.sides[1 - s]
        target.flush()
        target.pending = (cols, delta)

    def update(self, task):
        s = SIDES.index(task["side"])
        side, other, cols = self.sides[s], self.sync[1 - s], task["cols"]
        if task["method"] == "ccd":
            p = side.pending
            fuse = p is not None and p[0].shape[0] == 1
            if not fuse:
                side.flush()
            d, tp = (p[1][0], int(p[0][0])) if fuse else (other[0], 0)
            rss = K.ccd_step(side.indptr, side.idx, side.res, side.own, int(cols[0]), other,
                             side.reg, d, tp, fuse)
            side.pending = None
        else:
            side.flush()
            rss = K.als_step(side.indptr, side.idx, side.res, side.own, cols, other, side.reg)
        return {"vals": side.own[cols], "rss": rss}
