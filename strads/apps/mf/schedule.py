"""MF schedules. A round updates one block of factor columns on one side for all users
(side W) or all items (side H); every worker does its own rows of that side.

* ``ccd`` (CCD++, Yu et al. 2012): rank by rank, column t of W then column t of H,
  ``inner`` times, for t = 0..k-1 (the bias columns first, one side each).
  Dependency structure: W's column t and H's column t conflict (each is solved against
  the other), columns of one side do not (a worker updates its residual in place, so
  they run as Gauss-Seidel). With staleness s, up to s+1 rounds are in flight, so the
  columns go in groups of ``group = s + 1`` rounds: W's group, then H's group; H's
  column t is then never computed before W's column t was applied.
  ``block`` columns per round (default 1) cut the number of rounds, and so the per-round
  latency under MPI, by that factor: a worker updates them one after the other (a side's
  columns do not interact), so a block of b is the same arithmetic as a group of b
  single-column rounds.
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

    def __init__(self, layout, iters, inner=1, group=1, block=1):
        self.inner, self.group, self.block = int(inner), int(group), int(block)
        super().__init__(layout, iters)

    def rounds(self, lay):
        seq = []
        if lay.biases:
            seq += [("W", np.array([lay.user_bias])), ("H", np.array([lay.item_bias]))]
        b, chunk = self.block, self.block * self.group
        for c0 in range(0, lay.rank, chunk):
            cols = np.arange(c0, min(c0 + chunk, lay.rank))
            blocks = [cols[i:i + b] for i in range(0, cols.shape[0], b)]
            seq += ([("W", x) for x in blocks] + [("H", x) for x in blocks]) * self.inner
        return seq


class ALS(_Sweep):
    method = "als"

    def rounds(self, lay):
        return [("W", lay.free["W"]), ("H", lay.free["H"])]


SCHEDULES = {"ccd": CCD, "als": ALS}
