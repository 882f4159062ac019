"""The Lasso's working sets (as skglm and celer): blocks solved exactly on the scheduler
from their Gram (or X_B's factor). Notes: docs/apps/lasso.md."""
import numpy as np

from ..glm.schedule import _Clocked, working_set

WORKING_SET_MIN = 256  # a working set's columns, at least


class WorkingSet(_Clocked):
    """Working sets (as skglm and celer): after each full round the support plus the
    coordinates whose minimiser moves most, twice the support in size, solved exactly
    on the scheduler from the block's Gram (its factor X_B for sparse X when that is
    smaller). A block beyond ``max_block`` (and ``factor_cap`` non-zeros) is cut into
    pieces by priority, solved one after the other; then the next full round."""

    def __init__(self, agg, min_size=WORKING_SET_MIN, max_block=None, block=256,
                 time_limit=None, staleness=0, factor_cap=None):
        self._init(agg, block, time_limit, staleness)  # block: the staleness bound only
        self.factor_cap = factor_cap if getattr(agg, "col_nnz", None) is not None else None
        self.max_block = int(max_block) if max_block else None
        self.min_size = min(min_size, self.max_block) if self.max_block else min_size
        self.used = 0  # full rounds already turned into a block
        self.pending_full = True  # a full round is due (the first round is one)
        self.pieces = []  # pieces of the current working set still to solve
        self.n_pieces = 0  # pieces of the current working set (1: not cut)

    def schedule(self, round):
        agg = self.agg
        self._begin_round(round)
        if self.pieces:
            if self.busy.any():  # the previous piece is in flight: its changes come first
                return self._wait()
            return self._block(self.pieces.pop(0))
        if agg.fulls > self.used and not self.busy.any():
            self.used = agg.fulls
            nonzero = agg.w != 0
            size = max(self.min_size, 2 * int(np.count_nonzero(nonzero)))
            pool, score = working_set(nonzero, agg.prio, size)
            pool = self._or_every(pool, nonzero, size)
            cap = self.max_block
            if cap and pool.shape[0] > cap and (self.factor_cap is None or  # (factor?)
                                                self.agg.col_nnz[pool].sum() > self.factor_cap):
                # by priority, the support first, ties by index; each piece sorted
                order = pool[np.lexsort((pool, -score))]
                self.pieces = [np.sort(p) for p in self._cut(order)]
                self.n_pieces = len(self.pieces)
                return self._block(self.pieces.pop(0))
            cols = np.sort(pool)
            if cols.shape[0]:
                self.n_pieces = 1
                return self._block(cols)
        if self.pending_full:
            self.pending_full = False
            return agg.full_task()
        return self._wait()

    def _or_every(self, pool, nonzero, size):
        """Every coordinate not screened out, where they are fewer than the rows (a
        problem coordinate descent solves fast: X's columns independent, as a rule), the
        working set's ``size`` is half of them or more, and their block is a sparse X_B
        with under half as many non-zeros as entries in its Gram (solved from X_B, a pass
        costs its non-zeros; a dense X's Gram costs n m^2 to build) that needs no cut:
        that block, the whole problem, is solved once to the run's tol (the aggregate's
        rule) instead of over rounds of looser solves of a block not much smaller."""
        nnz = getattr(self.agg, "col_nnz", None)
        screened = getattr(self.agg, "screened", None)
        if nnz is None or screened is None:
            return pool
        live = np.flatnonzero(nonzero | ~screened)
        m, cost = live.shape[0], float(nnz[live].sum())
        if 2 * size < m or m >= self.agg.n or 2 * cost >= float(m) * m:
            return pool
        cut = self.max_block and m > self.max_block and (
            self.factor_cap is None or cost > self.factor_cap)
        return pool if cut else live

    def _cut(self, order):
        """Pieces of ``order``: each the longest run whose dense Gram (``max_block``
        columns) or factor (``factor_cap`` non-zeros) fits."""
        cap, out, a = self.max_block, [], 0
        if self.factor_cap is not None:
            nnz = np.concatenate([[0], np.cumsum(self.agg.col_nnz[order])])
        while a < order.shape[0]:
            b = a + cap
            if self.factor_cap is not None:
                b = max(b, int(np.searchsorted(nnz, nnz[a] + self.factor_cap,
                                               side="right")) - 1)
            out.append(order[a:b])
            a = b
        return out

    def _wait(self):
        return {"cols": np.empty(0, np.int64), "version": self.agg.done}  # (staleness)

    def _block(self, cols):
        agg = self.agg
        self._hold(cols)
        if not self.pieces:  # the last piece: the next full round may follow it
            self.pending_full = True
        task = {"cols": cols, "gram": True, "version": agg.done, "dense_cap": self.max_block}
        if self.n_pieces > 1:
            # pieces do not overlap: a worker's cached Gram of the last one is no help
            task.update(piece=True, cache=False)
        if self.wall_deadline is not None:
            task["deadline"] = self.wall_deadline
        return task
