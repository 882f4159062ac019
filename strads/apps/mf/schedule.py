"""MF schedules. A round updates one block of factor columns on one side for all users
(side W) or all items (side H); every worker does its own rows of that side.

* ``ccd`` (CCD++, Yu et al. 2012): rank by rank, column t of W then column t of H,
  ``inner`` times, for t = 0..k-1 (the bias columns first, one side each).
* ``als``: all of W, then all of H (alternating least squares), on the same data layout.

One outer iteration is one sweep; the last round of a sweep is marked ``end``.
"""
import numpy as np

from ...engine import Schedule


class _Sweep(Schedule):
    method = None

    def __init__(self, layout, iters):
        self.iters = iters
        self.sweep = self.rounds(layout)

    def schedule(self, round):
        it, pos = divmod(round, len(self.sweep))
        if self.iters is not None and it >= self.iters:
            return None
        side, cols = self.sweep[pos]
        return {"side": side, "cols": cols, "method": self.method, "iter": it,
                "end": pos == len(self.sweep) - 1}


class CCD(_Sweep):
    method = "ccd"

    def __init__(self, layout, iters, inner=1):
        self.inner = int(inner)
        super().__init__(layout, iters)

    def rounds(self, lay):
        one = lambda c: np.array([c], np.int64)  # noqa: E731
        seq = []
        if lay.biases:
            seq += [("W", one(lay.user_bias)), ("H", one(lay.item_bias))]
        for t in range(lay.rank):
            seq += [("W", one(t)), ("H", one(t))] * self.inner
        return seq


class ALS(_Sweep):
    method = "als"

    def rounds(self, lay):
        return [("W", lay.free["W"]), ("H", lay.free["H"])]


SCHEDULES = {"ccd": CCD, "als": ALS}
