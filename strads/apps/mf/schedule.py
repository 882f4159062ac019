"""MF schedules: ``ccd`` (CCD++: column t of W then of H, in blocks and groups) and ``als``;
one sweep an outer iteration, its last round marked ``end`` (docs/apps/mf.md)."""
import math

import numpy as np

from ...api import Schedule
from ...errors import DataError


class _Sweep(Schedule):
    method = None
    checkpoint_skip = ("layout", "sweep")  # setup() makes them again

    def __init__(self, layout, iters, staleness=0):
        self.iters, self.layout, self.staleness = iters, layout, staleness
        self.sweep = self.rounds(layout)

    def load_state(self, state):
        """A resumed run may ask for more iterations (--iters), not fewer: the checkpoint
        may be past them."""
        was = state.get("iters")
        if (self.iters or math.inf) < (was or math.inf):
            raise ValueError(f"{self.iters} iterations (--iters), fewer than the "
                             f"checkpointed run's {was}: a resumed run may ask for more")
        super().load_state({**state, "iters": self.iters})

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
