"""Lasso worker: its rows of X (column-major), its y and its residual r = y - X b; the
block's Gram matrix for the working set's exact solves; rows moved by rebalancing."""
import time

import numpy as np
import scipy.sparse as sp

from ..glm import kernels as GK
from ..glm.update import NO_WEIGHTS, GLMUpdate, warm_rows
from . import kernels as K
from . import data


class LassoUpdate(GLMUpdate):
    data = data

    def load_state(self, state):
        """As GLMUpdate's; the kept Gram (its columns index X) is one of this run's."""
        super().load_state(state)
        kept = self.gram_cache
        cols, G = kept if isinstance(kept, tuple) and len(kept) == 2 else (None, None)
        if not (isinstance(cols, np.ndarray) and cols.dtype == np.int64 and cols.ndim == 1
                and (np.diff(cols) > 0).all() and (cols.shape[0] == 0 or (
                    cols[0] >= 0 and cols[-1] < self.n_features))
                and isinstance(G, np.ndarray) and G.dtype == np.float64
                and G.shape == (cols.shape[0],) * 2):
            raise ValueError("gram_cache: not a Gram of this run's columns")

    def __init__(self, shard):
        super().__init__(shard)
        self.r = self.y.copy()
        self.resharded()
        if "start" in shard:  # a warm start
            self.apply(shard["start"])

    # -- rebalancing: rows (samples) handed to a neighbour (strads.Update.give/take) --
    row_state = ("r",)  # a resume on another number of workers carries the residual

    def resharded(self):
        self.rss = float(self.r @ self.r)
        self.gram_cache = NO_CACHE

    def collect(self):
        # the residual's squares at the final model, exactly: the final objective
        return {"rss": np.float64(self.r @ self.r)}

    def _rows(self):
        """This worker's rows of X, as a matrix that slices by row."""
        if self.sparse:
            indptr, idx, data = self.X
            return sp.csc_matrix((data, idx, indptr),
                                 shape=(self.n_rows, self.n_features)).tocsr()
        return self.X[0]

    def _keep(self, X, y, r):
        self._keep_rows(X, y)
        self.r = r
        self.resharded()

    def give(self, end, count):
        X, n = self._rows(), self.n_rows
        out, keep = ((slice(0, count), slice(count, n)) if end == "head"
                     else (slice(n - count, n), slice(0, n - count)))
        rows = {"X": X[out], "y": self.y[out].copy(), "r": self.r[out].copy()}
        self._keep(X[keep], self.y[keep].copy(), self.r[keep].copy())
        return rows

    def take(self, end, rows):
        parts = [rows, {"X": self._rows(), "y": self.y, "r": self.r}]
        if end == "tail":
            parts.reverse()
        stack = sp.vstack if self.sparse else np.vstack
        self._keep(stack([p["X"] for p in parts]), np.concatenate([p["y"] for p in parts]),
                   np.concatenate([p["r"] for p in parts]))

    @classmethod
    def warmup(cls):
        super().warmup()
        r, cols, d = np.zeros(2), np.zeros(1, np.int64), np.zeros(1)
        csc, dense = warm_rows()
        K.step_sparse(*csc, r, cols, d)
        rows = GK.gram_sparse_rows(*csc, cols, 2)
        k = np.diff(rows[0]).astype(np.float64)
        K.gram_sparse_col_costs(csc[0], csc[1], cols, k)
        GK.gram_cols(*csc, cols, *rows, NO_WEIGHTS, 0, 1, np.zeros(1), np.full(1, -1),
                     np.zeros(1, np.int64), np.zeros(1), np.zeros(2, np.int64), 0)
        K.step_dense(*dense, r, cols, d)

    def apply(self, sync):
        step = K.step_sparse if self.sparse else K.step_dense
        self.rss += step(*self.X, self.r, sync["cols"], sync["delta"])
        if sync.get("shift"):  # (an intercept: the aggregate's implicit centring)
            self.r += sync["shift"]
            self.rss = float(self.r @ self.r)

    def update(self, task):
        out = {}
        if task.get("full"):
            cols = task["cols"] if task["cols"] is not None else np.arange(self.n_features)
        elif not task.get("gram"):  # a Jacobi round (priority: maybe groups, or a filter)
            cols, out = self._jacobi_block(task)
        else:
            cols = task["cols"]
        g = self.grad(self.r, cols)
        if task.get("full"):
            self.rss = float(self.r @ self.r)  # drop the drift of the running sum
            return {"g": g, "rss": self.rss, "ry": float(self.r @ self.y),
                    "rs": float(self.r.sum())}
        if not task.get("gram"):
            return {"g": g, "rss": self.rss, **out}
        # working-set: the block's Gram over this worker's rows too, for an exact solve
        if not task.get("cache", True):
            self.gram_cache = NO_CACHE
        part = self.gram_part(cols, task.get("deadline"), task.get("dense_cap"))
        if part is None:  # the deadline passed while it was built: the round is void
            return {"g": g, "rss": self.rss, "late": True}
        return {"g": g, "rss": self.rss, **part}

    def gram_part(self, cols, deadline=None, dense_cap=None):
        """The block's Gram over this worker's rows: ``{"G": G}``, or its non-zeros when
        they take under half the bytes, ``{"Gi": flat indices, "Gv": values}``; sparse X,
        when the factor X_B (over every worker) has under FACTOR_SHARE of the Gram's
        non-zeros or entries, or the block over ``dense_cap`` columns: X_B's CSC rows
        ``{"Fp", "Fi", "Fv", "Fn"}``. None if the clock passed ``deadline`` first (it is
        built in pieces of about PIECE_OPS multiply-adds)."""
        m = cols.shape[0]
        late = (lambda: time.time() > deadline) if deadline is not None else (lambda: False)
        if self.sparse:
            count = np.zeros(self.n_rows, dtype=np.int64)
            local = GK.block_counts(self.X[0], self.X[1], cols, count)
            nnz_f, nnz_g = self.peers.allreduce(np.array(local, dtype=np.float64))
            if (dense_cap is not None and m > dense_cap) or \
                    nnz_f < FACTOR_SHARE * min(nnz_g, float(m) * m):
                return self._factor(cols, NO_WEIGHTS)
            if 16 * float(local[1]) < 4.0 * m * m:  # (sum k_i^2 bounds the non-zeros)
                rows = GK.gram_sparse_rows(*self.X, cols, self.n_rows)
                k = np.diff(rows[0]).astype(np.float64)
                return self._gram_sparse_compact(cols, rows, k, late)
            G = self._gram_sparse_dense(cols, late)
        else:
            G = self._gram_dense(cols, late, one_piece=deadline is None)
        if G is None:
            return None
        if 16 * np.count_nonzero(G) < 4 * G.size:  # (counted: dense X's is mostly full)
            nz = np.flatnonzero(G)
            return {"Gi": nz, "Gv": G.reshape(-1)[nz]}
        return {"G": G}

    def gram(self, cols, deadline=None):
        """X_B' X_B over this worker's rows, dense (or None, as :meth:`gram_part`), with
        the previous block's entries reused (:meth:`_cached`)."""
        late = (lambda: time.time() > deadline) if deadline is not None else (lambda: False)
        if self.sparse:
            return self._gram_sparse_dense(cols, late)
        return self._gram_dense(cols, late)

    def _gram_sparse_compact(self, cols, rows, k, late):
        m = cols.shape[0]
        n_max = int(k @ k)
        idx, vals, ptr = np.empty(n_max, np.int64), np.empty(n_max), np.zeros(m + 1, np.int64)
        acc, mark = np.empty(m), np.full(m, -1, np.int64)

        def piece(start, stop):  # (columns; row a's entries end at ptr[a + 1])
            GK.gram_cols(*self.X, cols, *rows, NO_WEIGHTS, start, stop, acc, mark, idx, vals,
                         ptr, ptr[start])
        if not _in_pieces(K.gram_sparse_col_costs(self.X[0], self.X[1], cols, k), piece,
                          late):
            return None
        n_out = ptr[m]
        # flat indices a m + b of the entries, row a's at ptr[a]:ptr[a + 1]
        flat = np.repeat(np.arange(m, dtype=np.int64) * m, np.diff(ptr)) + idx[:n_out]
        return {"Gi": flat, "Gv": vals[:n_out]}

    def _gram_sparse_dense(self, cols, late):
        G, new = self._cached(cols)
        m, n_new = cols.shape[0], new.shape[0]
        if n_new:
            rows = GK.gram_sparse_rows(*self.X, cols, self.n_rows)
            k = np.diff(rows[0]).astype(np.float64)
            rank = np.full(m, -1, np.int64)  # (the new columns' rows of G: the same sums)
            rank[new] = np.arange(n_new)
            Gn = np.zeros((n_new, m))
            if not _in_pieces(k * k, lambda a, b: GK.gram_sparse_add(
                    *rows, Gn, a, b, NO_WEIGHTS, rank), late):  # (rows)
                return None
            G[new, :] = Gn
            G[:, new] = Gn.T
        if G.nbytes <= CACHE_BYTES:
            self.gram_cache = (cols.copy(), G)
        return G

    def _cached(self, cols):
        """A Gram for ``cols`` with the previous block's entries filled in (successive
        working sets overlap; an entry is a sum over the rows in order either way), and
        the positions of the columns it lacks."""
        m = cols.shape[0]
        old_cols, old = self.gram_cache
        self.gram_cache = NO_CACHE  # freed once copied
        pos = np.searchsorted(old_cols, cols)
        pos[pos == old_cols.shape[0]] = 0
        hit = old_cols[pos] == cols if old_cols.shape[0] else np.zeros(m, bool)
        if hit.all():  # (the same block, or fewer of its columns)
            return (old if m == old_cols.shape[0] else old.take(pos, 0).take(pos, 1),
                    pos[:0])
        G = np.empty((m, m))
        GK.gram_keep(old, pos, hit, G)
        return G, np.flatnonzero(~hit)

    def _gram_dense(self, cols, late, one_piece=False):
        m = cols.shape[0]
        X = self.X[0]
        G, new = self._cached(cols)
        n = max(self.n_rows, 1)
        # the columns gathered `width` at a time (GATHER_BYTES); a piece of new columns
        # is about PIECE_OPS multiply-adds (at least 16 columns, for BLAS)
        width = int(max(1, min(m, GATHER_BYTES // (8 * n))))
        piece = int(max(1, min(max(16, PIECE_OPS // (n * max(m, 1))), width)))
        whole = m == X.shape[1] and (cols == np.arange(m)).all()  # (X itself: no copy)
        Xb = (X if whole else X[:, cols]) if width == m else None
        if one_piece and Xb is not None and new.shape[0] == m:  # (X_B'X_B: BLAS's syrk,
            G = Xb.T @ Xb  # half the multiply-adds; no clock to look at between pieces)
            new = new[:0]
        for s in range(0, new.shape[0], piece):
            P = new[s:s + piece]
            if Xb is not None:
                G[:, P] = Xb.T @ Xb[:, P]
            else:
                XP = X[:, cols[P]]
                for a in range(0, m, width):
                    G[a:a + width, P] = X[:, cols[a:a + width]].T @ XP
            G[P, :] = G[:, P].T
            if s + piece < new.shape[0] and late():
                return None
        self.gram_cache = (cols.copy(), G)
        return G


def _in_pieces(work, run, late):
    """``run(start, stop)`` over pieces of about PIECE_OPS of ``work`` (each item's, + 1),
    looking at the clock between them; False if it passed the deadline first."""
    cum = np.concatenate([[0.0], np.cumsum(work + 1.0)])  # work before each item
    n, start = work.shape[0], 0
    while start < n:
        stop = int(np.searchsorted(cum, cum[start] + PIECE_OPS, side="right")) - 1
        stop = min(max(stop, start + 1), n)
        run(start, stop)
        start = stop
        if start < n and late():
            return False
    return True


NO_CACHE = (np.empty(0, np.int64), np.empty((0, 0)))  # (no previous block's Gram)
# a piece of a worker's Gram matrix between two looks at the clock (multiply-adds), and
# the most memory its gathered dense columns may take
PIECE_OPS = 50_000_000
GATHER_BYTES = 64 << 20
# the most a sparse X's Gram kept for the next block may take (beyond the budget's
# W + 2 Grams a round; dense X's, whose columns cost n multiply-adds each, is always kept)
CACHE_BYTES = 64 << 20
# sparse X: the block's factor X_B instead of its Gram when it has fewer non-zeros than
# this share of the Gram's (a coordinate descent pass costs either's non-zeros)
FACTOR_SHARE = 0.5
