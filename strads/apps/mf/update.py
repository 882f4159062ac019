"""MF worker: the residuals of its ratings by row and by column, its factor rows and synced
copies of both factors; the workers exchange a round's columns among themselves
(docs/apps/mf.md)."""
import time

import numpy as np

from ...api import Update
from ...transport import ordered_sum
from . import kernels as K

SIDES = ("W", "H")


class _Side:
    """One residual copy: CSR over the worker's users (side W) or CSC over its items (H),
    the other side's last change ``pending`` (docs/apps/mf.md)."""

    def __init__(self, indptr, idx, res, own, reg):
        self.indptr, self.idx, self.res = indptr, idx, res
        self.own, self.reg = own, reg
        self.pending = None  # (cols, delta) of the other side, not yet in res
        self.G = None  # the gather table of ccd_step
        self.scratch = None  # a row's gathered column, per ccd_step
        self.ptr = None  # the tiled layout's segments (kernels.tile_layout), or rows
        self.pos = self.order = None  # each row's place in a tile, the tile's rows
        self.tiles = True  # False once a round needed the rows
        # tiled: the deferred steps, ccd_tiles' gather table, the rows' sums
        self.steps = self.T = self.acc = None
        self.deferred = False  # steps holds steps not yet in res

    @property
    def segments(self):
        return self.indptr if self.ptr is None else self.ptr

    def tile(self, n_other):
        """The tiled layout, if the other side's table outgrows a tile and a row's
        ratings in a tile are several on average (a segment has a cost of its own)."""
        if self.ptr is not None or not self.tiles or n_other <= K.TILE_ROWS:
            return
        self.tiles = False  # one try: a layout refused stays refused
        segments = -(-n_other // K.TILE_ROWS) * (self.indptr.shape[0] - 1)
        if 8 * segments > self.idx.shape[0]:
            return
        pos, order = K.tile_order(self.indptr)
        ptr = K.tile_layout(self.indptr, self.idx, n_other, K.TILE_ROWS, pos)
        if ptr.shape[0] == 0:
            return
        self.ptr, self.pos, self.order, self.tiles = ptr, pos, order, True
        self._retile(True)
        m = self.own.shape[1]
        self.steps, self.T, self.acc = np.zeros(m), np.zeros((n_other, 3)), np.empty((m, 4))

    def settle(self):
        """The deferred steps into res."""
        if self.deferred:
            K.apply_steps(self.ptr, self.idx, self.res, self.steps, self.T)
            self.deferred = False

    def rows(self, keep=False):
        """The rows' layout again (``keep``: tiled again by the next ccd step)."""
        self.settle()
        if self.ptr is not None:
            self._retile(False)
            self.ptr = self.pos = self.order = self.steps = self.T = self.acc = None
        self.tiles = self.tiles and keep

    def _retile(self, to_tiles):
        # one array at a time: the old one is freed before the next is copied
        self.idx = K.retile(self.indptr, self.ptr, self.pos, self.idx, to_tiles)
        self.res = K.retile(self.indptr, self.ptr, self.pos, self.res, to_tiles)

    def res_rows(self):
        """res, all steps in, in the rows' order (a checkpoint's)."""
        self.settle()
        if self.ptr is None:
            return self.res
        return K.retile(self.indptr, self.ptr, self.pos, self.res, False)

    def apply_pending(self):
        if self.pending is not None:
            self.settle()
            cols, delta = self.pending
            K.apply_cols(self.segments, self.idx, self.res, self.own, cols, delta, self.order)
            self.pending = None

    def ccd(self, t, v):
        """One ccd step of column t against the other side's column ``v`` (synced: its
        extra cold-start entry last)."""
        n = v.shape[0] - 1
        p = self.pending
        if p is not None and p[0].shape[0] > 1:  # (a block of the other side's)
            self.rows()
        self.tile(n)
        if self.ptr is not None:
            tp, d = (-1, v) if p is None else (int(p[0][0]), p[1][0])
            # (the table keeps v beside the steps now deferred)
            rss = K.ccd_tiles(self.ptr, self.idx, self.res, self.own, self.pos, t, v, tp, d,
                              self.T, self.reg, self.steps, self.acc)
            self.deferred = True
        else:
            tps, delta = (_NONE, _NONE2) if p is None else p
            # one table per side, reused: a fresh one per step would cost a page fault
            # per 4 KiB of the other side's size, which more workers don't share
            shape = (n, 1 + tps.shape[0])
            if self.G is None or self.G.shape != shape:
                self.G = np.empty(shape)
            if self.scratch is None:
                longest = int(np.diff(self.indptr).max()) if self.indptr.shape[0] > 1 else 0
                self.scratch = np.empty(max(longest, 1))
            K.fill_table(self.G, v, delta)
            rss = K.ccd_step(self.indptr, self.idx, self.res, self.own, t, self.G,
                             self.reg, tps, self.scratch)
        self.pending = None
        return rss


_NONE, _NONE2 = np.zeros(0, np.int64), np.zeros((0, 0))


class MFUpdate(Update):
    def __init__(self, shard):
        self._report = None
        owned = "load" in shard  # the ratings are this worker's alone: no copy
        if owned:  # a description: read (or generate) this worker's part
            from .data import prepare_part
            shard, self._report = prepare_part(self.peers, shard["load"])
        self.early_stop = shard.get("early_stop")
        lay = shard["layout"]
        m, n = shard["shape"]
        (u0, u1), (i0, i1) = self.ranges = shard["users"], shard["items"]
        H = shard["H"]  # the starting H, transposed (kk x n + 1)
        if not H.flags.writeable:
            H = H.copy()
        W = np.zeros((lay.kk, m + 1))  # W starts at 0 (make_setup's start)
        for s, c in lay.fixed.items():
            (W if s == "W" else H)[c] = 1.0
        self.size = (m, n)
        self.sync = [W, H]
        indptr, idx, y = shard["rows"]
        self.test = shard["test"]  # this worker's share of the held-out pairs
        self.ids = (shard["user_ids"], shard["item_ids"])
        self.scores = []  # (iteration or None, sse, seconds): sent with the next round
        self.score_next = False  # the scheduler asked for a score after the next round
        # early stopping: the best held-out sum over all workers so far, and (iteration,
        # this worker's rows of W, of H, its held-out share's squared error) then
        self.best_sse, self.best = float("inf"), None
        # y: the training ratings less the mean; W = 0 at the start, so they are the
        # starting residuals
        self.sides = [
            _Side(indptr, idx, y if owned else y.copy(), W[:, u0:u1].copy(),
                  shard["reg_rows"]),
            _Side(*shard["cols"], H[:, i0:i1].copy(), shard["reg_cols"])]

    def report(self):
        """What this worker read (the scheduler keeps the sums): see data.prepare_part."""
        return self._report

    def state(self):
        # the rest is the shard's (rebuilt by setup()), buffers, or the synced factors
        # (every worker's own rows, gathered again on load); res in the rows' order
        return {"scores": self.scores, "score_next": self.score_next,
                "sides": [{"res": s.res_rows(), "own": s.own, "pending": s.pending}
                          for s in self.sides],
                "best_sse": self.best_sse, "best": self.best}

    def load_state(self, state):
        kk, (u0, u1), (i0, i1) = self.sync[0].shape[0], *self.ranges
        for s, st in enumerate(state["sides"]):  # (None in a fresh state: unchecked)
            p = st["pending"]  # the other side's (columns, changes) not yet in res
            if p is not None and not (
                    isinstance(p, tuple) and len(p) == 2 and
                    all(isinstance(a, np.ndarray) for a in p) and p[0].dtype == np.int64 and
                    p[0].ndim == 1 and p[1].dtype == np.float64 and
                    p[1].shape == (p[0].shape[0], self.size[1 - s]) and
                    ((p[0] >= 0) & (p[0] < kk)).all()):
                raise ValueError(f"sides/{s}/pending: not columns of this run's and their "
                                 "changes")
        b = state["best"]  # (iteration, W's rows, H's rows, held-out error)
        if b is not None and not (
                isinstance(b, list) and len(b) == 4 and
                isinstance(b[0], (int, np.integer)) and
                all(isinstance(a, np.ndarray) and a.dtype == np.float64 for a in b[1:3]) and
                b[1].shape == (kk, u1 - u0) and b[2].shape == (kk, i1 - i0) and
                isinstance(b[3], float)):
            raise ValueError("best: not an iteration's factors of this run's")
        if not all(isinstance(x, tuple) and len(x) == 3 and
                   (x[0] is None or isinstance(x[0], (int, np.integer))) and
                   all(isinstance(v, (float, np.floating)) for v in x[1:])
                   for x in state["scores"]):
            raise ValueError("scores: not (iteration, error, seconds) rows")
        self.scores = state["scores"]
        self.score_next = state["score_next"]
        self.best_sse, self.best = state["best_sse"], state["best"]
        for side, st in zip(self.sides, state["sides"]):
            side.rows(keep=True)
            side.res, side.own, side.pending = st["res"], st["own"], st["pending"]
        for s, side in enumerate(self.sides):  # (collective: every worker loads at once)
            F, off = self.sync[s], 0
            for part in self.peers.allgather(side.own):
                F[:, off:off + part.shape[1]] = part
                off += part.shape[1]
            if off != self.size[s]:
                raise RuntimeError(f"the workers' rows of side {s} add up to {off}, "
                                   f"expected {self.size[s]}")

    def reshard(self, olds, first):
        """A checkpoint of another number of workers: the factors are the old workers'
        rows side by side; the residuals, the scores due and the best iteration's error
        on this worker's share are computed again."""
        fresh = [side.res.copy() for side in self.sides]  # the ratings: W is 0 at the start
        best = olds[0][2]["best"]
        full = [[], []]
        for s, side in enumerate(self.sides):
            F = self.sync[s]
            F[:, :self.size[s]] = np.concatenate([o["sides"][s]["own"] for *_, o in olds],
                                                 axis=1)
            lo, hi = self.ranges[s]
            side.own, side.pending = F[:, lo:hi].copy(), None
            if best is not None:
                full[s] = np.concatenate([o["best"][1 + s] for *_, o in olds], axis=1)
        for s, side in enumerate(self.sides):
            lo = self.ranges[s][0]
            mine = lo + np.repeat(np.arange(side.indptr.shape[0] - 1), np.diff(side.indptr))
            pairs = (mine, side.idx) if s == 0 else (side.idx, mine)
            side.res = np.empty(side.idx.shape[0])
            K.predict_pairs(self.sync[0], self.sync[1], *pairs, side.res)
            np.subtract(fresh[s], side.res, out=side.res)
        old = olds[0][2]
        self.score_next = old["score_next"]
        self.scores = [(it, *self._score()) for it, _, _ in old["scores"]]
        self.best_sse, self.best = old["best_sse"], None
        if best is not None:
            (u0, u1), (i0, i1) = self.ranges
            self.best = [best[0], full[0][:, u0:u1].copy(), full[1][:, i0:i1].copy(),
                         self._score(full)[0]]

    @classmethod
    def warmup(cls):
        indptr, idx = np.array([0, 1], np.int64), np.zeros(1, np.int32)
        res, own, other = np.ones(1), np.ones((2, 1)), np.ones((2, 1))
        reg, cols = np.ones(1), np.zeros(1, np.int64)
        K.ccd_step(indptr, idx, res, own, 0, np.ones((1, 2)), reg, cols, np.ones(1))
        K.ccd_block(indptr, idx, res, own, np.zeros(2, np.int64), other, reg, cols, other,
                    K.BLOCK_TILE)
        K.apply_cols(indptr, idx, res, own, cols, other, None)
        pos, order = K.tile_order(indptr)
        ptr = K.tile_layout(indptr, idx, 1, 1, pos)
        K.retile(indptr, ptr, pos, K.retile(indptr, ptr, pos, idx, True), False)
        K.retile(indptr, ptr, pos, res, True)
        K.apply_cols(ptr, idx, res, own, cols, other, order)
        G, steps = np.ones((1, 2)), np.zeros(1)
        K.fill_table(G, res, other[:1])
        T = np.zeros((1, 3))
        K.ccd_tiles(ptr, idx, res, own, pos, 0, res, 0, res, T, reg, steps, np.empty((1, 4)))
        K.apply_steps(ptr, idx, res, steps, T)
        K.als_step(indptr, idx, res, own, cols, other, reg)
        K.predict_pairs(own, other, idx, idx, res)
        K.rss_rows(indptr, idx, res, *[np.ones((1, 2))] * 4, None)
        K.rss_rows(ptr, idx, res, *[np.ones((1, 2))] * 4, pos)
        K.wsumsq(None, res)
        K.wsumsq(reg, res)

    def apply(self, sync):
        if sync.get("score"):  # the held-out error of the model after the next round
            self.score_next = True

    def update(self, task):
        s = SIDES.index(task["side"])
        side, other, cols = self.sides[s], self.sync[1 - s], task["cols"]
        n_other = self.size[1 - s]
        rss = None  # an empty round (padding between dependent columns) changes nothing
        if task["method"] == "ccd" and cols.shape[0] == 1:
            rss = side.ccd(int(cols[0]), other[cols[0]])
        elif task["method"] == "ccd" and cols.shape[0] > 1:
            # a block: the columns one after the other (Gauss-Seidel), tile by tile, the
            # first folding in the other side's last round (ccd_block)
            side.rows()
            p = side.pending or (np.zeros(0, np.int64), np.zeros((0, n_other)))
            rss = K.ccd_block(side.indptr, side.idx, side.res, side.own, cols, other,
                              side.reg, p[0], p[1], K.BLOCK_TILE)
            side.pending = None
        elif task["method"] != "ccd":
            side.rows()
            side.apply_pending()
            rss = K.als_step(side.indptr, side.idx, side.res, side.own, cols, other, side.reg)
        sq = np.array([K.wsumsq(side.reg, side.own[c]) for c in cols])
        scores, self.scores = self.scores, []
        vals = side.own[cols]  # a copy, never written: read-only, threads share it
        vals.flags.writeable = False
        mine = {"vals": vals, "rss": rss, "sq": sq, "test": scores}
        # alone, the exchange is the worker's own fresh values
        got = [mine] if self.peers.size == 1 else self.peers.allgather(mine)
        self._take(s, cols, [g["vals"] for g in got])
        end = None
        if task["end"] and self.early_stop:  # scored and added up now, sent now
            self.score_next = False
            end = self._score_end(task["iter"] + 1)
        elif task["end"] or self.score_next:  # scored now, sent with the next round
            self.score_next = False
            self.scores.append((task["iter"] + 1 if task["end"] else None,
                                *self._score()))
        if self.peers.rank:
            return None
        # worker 0 speaks for all: the sums in worker order, the same on every worker
        return {"rss": None if rss is None else sum(g["rss"] for g in got),
                "sq": ordered_sum([g["sq"] for g in got]),
                "test": [(it, sum(g["test"][k][1] for g in got),
                          max(g["test"][k][2] for g in got))
                         for k, (it, _, _) in enumerate(got[0]["test"])],
                "end_test": end}

    def _score_end(self, it):
        """Early stopping, at iteration ``it``'s end: the workers' held-out sums added up
        (worker order), a strictly lower one kept as the best; -> (it, sum, seconds)."""
        sse, cost = self._score()
        got = self.peers.allgather((sse, cost))
        total = sum(g[0] for g in got)
        if total < self.best_sse:
            self.best_sse = total
            rows, cols = self.sides
            if self.best is None:
                self.best = [it, rows.own.copy(), cols.own.copy(), sse]
            else:
                self.best[0], self.best[3] = it, sse
                np.copyto(self.best[1], rows.own)
                np.copyto(self.best[2], cols.own)
        return it, total, max(g[1] for g in got)

    def _take(self, s, cols, parts):
        """The round's columns of side s, from every worker's rows (worker order): into
        the synced copy, and owed to the residual copy of the other side. Slice by slice,
        never assembled apart: a round's columns are copied once."""
        n, F = self.size[s], self.sync[s]
        delta = np.empty((cols.shape[0], n))
        off = 0
        for part in parts:
            k = part.shape[1]
            if part.shape[0] != cols.shape[0] or off + k > n:
                raise RuntimeError(f"a worker sent rows {part.shape} at {off} of side {s} "
                                   f"({cols.shape[0]} columns of {n})")
            for j, c in enumerate(cols):
                np.subtract(part[j], F[c, off:off + k], out=delta[j, off:off + k])
                F[c, off:off + k] = part[j]
            off += k
        if off != n:
            raise RuntimeError(f"the workers sent {off} rows of side {s}, expected {n}")
        target = self.sides[1 - s]
        target.apply_pending()  # the next step folds in only the latest round's
        target.pending = (cols, delta)

    def _score(self, factors=None):
        """(sum of squared held-out errors of this worker's share under ``factors`` (W, H;
        default: the synced copies), seconds)."""
        t0 = time.perf_counter()
        users, items, ratings = self.test
        out = np.empty(users.shape[0])
        K.predict_pairs(*(factors or self.sync), users, items, out)
        out -= ratings
        return K.wsumsq(None, out), time.perf_counter() - t0

    def collect(self):
        """This worker's rows of W and H, their penalties, its training RSS and held-out
        error: of the best iteration's model with early stopping, else of the model now."""
        rows, cols = self.sides
        if self.early_stop:
            # every worker takes part (the same test on all: each has seen every end)
            best = self.best
            parts = self.peers.allgather(None if best is None else best[2])
        # the RSS from the residuals, all changes in (the run is over); of the best
        # iteration's model: the residuals plus the model now less the best one
        rows.settle()
        rows.apply_pending()
        if self.early_stop and best is not None:
            it, own_W, own_H, sse = best
            fac = [np.ascontiguousarray(F.T) for F in
                   (rows.own, self.sync[1], own_W, np.concatenate(parts, axis=1))]
            del parts
        else:
            it, own_W, own_H, sse = None, rows.own, cols.own, None
            fac = [np.zeros((rows.own.shape[1], 0)), np.zeros((1, 0))] * 2
        rss = K.rss_rows(rows.segments, rows.idx, rows.res, *fac, rows.pos)
        del fac
        sq = {name: np.array([K.wsumsq(side.reg, own[c]) for c in range(own.shape[0])])
              for name, side, own in zip(SIDES, self.sides, (own_W, own_H))}
        return {"W": own_W, "H": own_H, "sq": sq, "rss": rss,
                "sse": self._score()[0] if sse is None else sse, "best_iteration": it,
                "user_ids": self.ids[0], "item_ids": self.ids[1]}
