"""MF worker: the residuals of its users' ratings by row and of its items' ratings by
column, its own factor rows, and synced copies of both full factors (the model lives on
the workers; the scheduler keeps only the objective's pieces).

A round updates some columns of one side: every worker solves its own rows of them,
then the workers exchange their rows' new values (one allgather, which also carries the
small figures: RSS, the columns' penalties, held-out scores) and each assembles the full
columns in worker order. The row residuals reflect the worker's own W entries and the
synced H; the column residuals the synced W and its own H entries. A round's new columns
are therefore owed to the residual copy of the *other* side; they are kept pending and
folded into the next update of that side, in the same pass over the ratings.

Each synced factor has one extra entry per column (index m or n): the factor of an
unseen id (cold start, policy mean), 0 but for the fixed bias column's 1, so a worker
scores cold held-out pairs like the others.

Early stopping (shard ``early_stop``): at every iteration end the workers score their
shares and add them up at once (one more small allgather per iteration, in worker
order, so every worker and the scheduler see the same sum); a worker whose iteration
beats the best so far copies its own rows of W and H (its part of the model: twice the
factor rows' memory). :meth:`MFUpdate.collect` then sends the best rows, their
penalties, the exact RSS (from the best H, gathered among the workers) and the held-out
error of the best iteration.
"""
import time

import numpy as np

from ...api import Update
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
        self._report = None
        self.early_stop = shard.get("early_stop")
        if "load" in shard:  # a description: read (or generate) this worker's part
            from .data import prepare_part
            shard, self._report = prepare_part(self.peers, shard["load"])
            self.early_stop = shard.get("early_stop")
        lay = shard["layout"]
        m, n = shard["shape"]
        (u0, u1), (i0, i1) = shard["users"], shard["items"]
        H = shard["H"]  # the starting H, transposed (kk x n + 1)
        if not H.flags.writeable:
            H = H.copy()
        W = np.zeros((lay.kk, m + 1))  # W starts at 0 (make_setup's start)
        for s, c in lay.fixed.items():
            (W if s == "W" else H)[c] = 1.0
        self.size = (m, n)
        self.sync = [W, H]
        indptr, idx, y = shard["rows"]
        # the training ratings less the mean, for the exact final RSS: W = 0 at the start,
        # so they are also the starting residuals
        self.y = y
        self.test = shard["test"]  # this worker's share of the held-out pairs
        self.ids = (shard["user_ids"], shard["item_ids"])
        self.scores = []  # (iteration or None, sse, seconds): sent with the next round
        self.score_next = False  # the scheduler asked for a score after the next round
        # early stopping: the best held-out sum over all workers so far, and (iteration,
        # this worker's rows of W, of H, its held-out share's squared error) then
        self.best_sse, self.best = float("inf"), None
        self.sides = [
            _Side(indptr, idx, y.copy(), W[:, u0:u1].copy(), shard["reg_rows"]),
            _Side(*shard["cols"], H[:, i0:i1].copy(), shard["reg_cols"])]

    def report(self):
        """What this worker read (the scheduler keeps the sums): see data.prepare_part."""
        return self._report

    def state(self):
        # the ratings' layout (indptr, idx), the ratings, the regularisation, the ids and
        # the held-out share are the shard's, rebuilt by setup(); G and scratch are
        # buffers; the synced factors are every worker's own rows side by side (each
        # round's columns are assembled from them), gathered again on load
        return {"scores": self.scores, "score_next": self.score_next,
                "sides": [{"res": s.res, "own": s.own, "pending": s.pending}
                          for s in self.sides],
                "best_sse": self.best_sse, "best": self.best}

    def load_state(self, state):
        self.scores = state["scores"]
        self.score_next = state["score_next"]
        self.best_sse, self.best = state["best_sse"], state["best"]
        for side, st in zip(self.sides, state["sides"]):
            side.res, side.own, side.pending = st["res"], st["own"], st["pending"]
        for s, side in enumerate(self.sides):  # (collective: every worker loads at once)
            F, off = self.sync[s], 0
            for part in self.peers.allgather(side.own):
                F[:, off:off + part.shape[1]] = part
                off += part.shape[1]
            if off != self.size[s]:
                raise RuntimeError(f"the workers' rows of side {s} add up to {off}, "
                                   f"expected {self.size[s]}")

    @classmethod
    def warmup(cls):
        indptr, idx = np.array([0, 1], np.int64), np.zeros(1, np.int32)
        res, own, other = np.ones(1), np.ones((2, 1)), np.ones((2, 1))
        reg, cols = np.ones(1), np.zeros(1, np.int64)
        K.ccd_step(indptr, idx, res, own, 0, np.ones((1, 2)), reg, cols, np.ones(1))
        K.ccd_block(indptr, idx, res, own, np.zeros(2, np.int64), other, reg, cols, other,
                    K.BLOCK_TILE)
        K.apply_cols(indptr, idx, res, own, cols, other)
        K.als_step(indptr, idx, res, own, cols, other, reg)
        K.predict_pairs(own, other, idx, idx, res)
        K.rss_rows(indptr, idx, res, np.ones((1, 2)), np.ones((1, 2)))
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
        if task["method"] == "ccd" and cols.shape[0] > 1:
            # a block: the columns one after the other (Gauss-Seidel), tile by tile, the
            # first folding in the other side's last round (ccd_block)
            p = side.pending
            if p is None:
                p = (np.zeros(0, np.int64), np.zeros((0, n_other)))
            rss = K.ccd_block(side.indptr, side.idx, side.res, side.own, cols, other,
                              side.reg, p[0], p[1], K.BLOCK_TILE)
            side.pending = None
        elif task["method"] == "ccd":
            # the columns one after the other (Gauss-Seidel); the first folds in the
            # other side's last round
            for t in cols:
                p = side.pending
                tps = p[0] if p is not None else np.zeros(0, np.int64)
                # one buffer per side, reused: a fresh one per step would cost a page
                # fault per 4 KiB of the other side's size, which more workers don't share
                shape = (n_other, 1 + tps.shape[0])
                if side.G is None or side.G.shape != shape:
                    side.G = np.empty(shape)
                G = side.G
                G[:, 0] = other[t, :n_other]
                if p is not None:
                    G[:, 1:] = p[1].T
                rss = K.ccd_step(side.indptr, side.idx, side.res, side.own, int(t), G,
                                 side.reg, tps, side.scratch)
                side.pending = None
        else:
            side.apply_pending()
            rss = K.als_step(side.indptr, side.idx, side.res, side.own, cols, other, side.reg)
        sq = np.array([K.wsumsq(side.reg, side.own[c]) for c in cols])
        scores, self.scores = self.scores, []
        mine = {"vals": side.own[cols], "rss": rss, "sq": sq, "test": scores}
        # alone, the exchange is the worker's own fresh values (side.own[cols] is a copy)
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
        total = got[0]["sq"].copy()
        for g in got[1:]:
            total += g["sq"]
        return {"rss": None if rss is None else sum(g["rss"] for g in got), "sq": total,
                "test": [(it, sum(g["test"][k][1] for g in got),
                          max(g["test"][k][2] for g in got))
                         for k, (it, _, _) in enumerate(got[0]["test"])],
                "end_test": end}

    def _score_end(self, it):
        """Early stopping, at iteration ``it``'s end: every worker's held-out share
        scored and added up (worker order, as the scheduler would); a new best (strictly
        lower sum) is kept. Returns (it, the sum, the slowest worker's seconds)."""
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

    def _score(self):
        """(sum of squared held-out errors of this worker's share, seconds)."""
        t0 = time.perf_counter()
        users, items, ratings = self.test
        out = np.empty(users.shape[0])
        K.predict_pairs(self.sync[0], self.sync[1], users, items, out)
        out -= ratings
        return K.wsumsq(None, out), time.perf_counter() - t0

    def collect(self):
        """This worker's rows of W and H, their penalties per column, and the exact RSS of
        its training rows and squared error of its held-out share: of the best
        iteration's model with early stopping (once an iteration has ended), else of the
        model now."""
        rows, cols = self.sides
        if self.early_stop:
            # every worker takes part (the same test on all: each has seen every end)
            best = self.best
            parts = self.peers.allgather(None if best is None else best[2])
        if self.early_stop and best is not None:
            it, own_W, own_H, sse = best
            H = np.ascontiguousarray(np.concatenate(parts, axis=1).T)
            del parts
        else:
            it, own_W, own_H, sse = None, rows.own, cols.own, None
            H = np.ascontiguousarray(self.sync[1].T)
        W = np.ascontiguousarray(own_W.T)
        rss = K.rss_rows(rows.indptr, rows.idx, self.y, W, H)
        del W, H
        sq = {name: np.array([K.wsumsq(side.reg, own[c]) for c in range(own.shape[0])])
              for name, side, own in zip(SIDES, self.sides, (own_W, own_H))}
        return {"W": own_W, "H": own_H, "sq": sq, "rss": rss,
                "sse": self._score()[0] if sse is None else sse, "best_iteration": it,
                "user_ids": self.ids[0], "item_ids": self.ids[1]}
