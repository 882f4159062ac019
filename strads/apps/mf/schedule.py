"""MF schedules. A round updates one block of factor columns on one side for all users
(side W) or all items (side H); every worker does its own rows of that side.

* ``ccd`` (CCD++, Yu et al. 2012): rank by rank, column t of W then column t of H,
  ``inner`` times, for t = 0..k-1 (the bias columns first, one side each; with
  ``block`` > 1 and one inner pass, each leads its side's first block instead).
  Dependency structure: W's column t and H's column t conflict (each is solved against
  the other), columns of one side do not (a worker updates its residual in place, so
  they run as Gauss-Seidel). The workers exchange a round's columns inside the round,
  and each handles its rounds in order, so every round is solved against all rounds
  before it whatever the staleness: no grouping by staleness is needed, and the model
  does not depend on it (staleness only lets the scheduler's work overlap the next
  rounds). ``group`` (default 1) still orders the columns in groups of that many
  rounds: W's group, then H's group (a short last group joins the one before; with
  fewer columns than the group, empty rounds pad the gap). A staleness of twice the
  number of column blocks or more is refused: more rounds in flight gain nothing.
  ``block`` columns per round (default 1) cut the number of rounds, and so the per-round
  latency under MPI, by that factor: a worker updates them one after the other (a side's
  columns do not interact), so a block of b makes the same updates as a group of b
  single-column rounds (up to rounding).
* ``als``: all of W, then all of H (alternating least squares), on the same data layout.

One outer iteration is one sweep; the last round of a sweep is marked ``end``.
"""
import numpy as np

from ...api import Schedule
from ...errors import DataError


class _Sweep(Schedule):
    method = None
    checkpoint_skip = ("layout", "sweep")  # setup() makes them again

    def __init__(self, layout, iters, staleness=0):
        self.iters, self.layout, self.staleness = iters, layout, staleness
        self.sweep = self.rounds(layout)

    @property
    def total_rounds(self):
        return None if self.iters is None else self.iters * len(self.sweep)

    def schedule(self, round):
        it, pos = divmod(round, len(self.sweep))
        if self.iters is not None and it >= self.iters:
            return None
        side, cols = self.sweep[pos]
        return {"side": side, "cols": cols, "method": self.method, "iter": it,
                "end": pos == len(self.sweep) - 1}


class CCD(_Sweep):
    method = "ccd"

    def __init__(self, layout, iters, inner=1, group=1, block=1, staleness=0):
        self.inner, self.group, self.block = int(inner), int(group), int(block)
        super().__init__(layout, iters, staleness)

    def rounds(self, lay):
        seq = []
        b, g = self.block, self.group
        # with blocks (and one pass each), a side's bias column leads its first block: one
        # pass over the ratings a side fewer; else the bias columns have rounds of their own
        lead = lay.biases and b > 1 and self.inner == 1
        if lay.biases and not lead:
            seq += [("W", np.array([lay.user_bias])), ("H", np.array([lay.item_bias]))]
        blocks = [np.arange(t, min(t + b, lay.rank)) for t in range(0, lay.rank, b)]
        if self.staleness >= 2 * len(blocks):  # more would add only empty rounds
            raise DataError(f"staleness {self.staleness}: at most {2 * len(blocks) - 1} is "
                            f"useful with rank {lay.rank} and block {b} (rounds in flight "
                            "beyond a sweep's columns gain nothing)")
        # chunks of g rounds per side; a short remainder joins the chunk before it
        chunks = [blocks[i:i + g] for i in range(0, len(blocks), g)]
        if len(chunks) > 1 and len(chunks[-1]) < g:
            last = chunks.pop()
            chunks[-1] = chunks[-1] + last
        noop = np.zeros(0, np.int64)
        for chunk in chunks:
            pad = [noop] * (g - len(chunk))  # only when the rank is below the group
            seq += ([("W", x) for x in chunk + pad] + [("H", x) for x in chunk]) * self.inner
        if lead:
            w, h = (next(k for k, (side, _) in enumerate(seq) if side == x) for x in "WH")
            seq[w] = ("W", np.concatenate([[lay.user_bias], seq[w][1]]).astype(np.int64))
            seq[h] = ("H", np.concatenate([[lay.item_bias], seq[h][1]]).astype(np.int64))
        return seq


class ALS(_Sweep):
    method = "als"

    def rounds(self, lay):
        return [("W", lay.free["W"]), ("H", lay.free["H"])]


SCHEDULES = {"ccd": CCD, "als": ALS}
