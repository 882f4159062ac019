"""Lasso worker: its rows of X (column-major), its y and its residual r = y - X b."""
import numpy as np

from ...engine import Update
from . import kernels as K


class LassoUpdate(Update):
    def __init__(self, shard):
        self.y = shard["y"]
        self.sparse = "csc" in shard
        if self.sparse:
            self.X = shard["csc"]
            self.n_rows, self.n_features = shard["n_rows"], self.X[0].shape[0] - 1
        else:
            self.X = (np.asfortranarray(shard["X"]),)
            self.n_rows, self.n_features = self.X[0].shape
        self.gram_cache = (np.empty(0, np.int64), np.empty((0, 0)))
        self.r = self.y.copy()
        self.rss = float(self.r @ self.r)

    @classmethod
    def warmup(cls):
        r, cols, d = np.zeros(2), np.zeros(1, np.int64), np.zeros(1)
        # scipy's usual index dtype; others (int64 beyond 2^31 non-zeros) compile on use
        csc = (np.array([0, 1], np.int32), np.zeros(1, np.int32), np.ones(1))
        for fn, X in ((K.grad_sparse, csc), (K.grad_dense, (np.ones((2, 1), order="F"),))):
            fn(*X, r, cols, d)
        K.step_sparse(*csc, r, cols, d)
        K.gram_sparse(*csc, cols, 2)
        K.step_dense(np.ones((2, 1), order="F"), r, cols, d)

    def apply(self, sync):
        step = K.step_sparse if self.sparse else K.step_dense
        self.rss += step(*self.X, self.r, sync["cols"], sync["delta"])

    def update(self, task):
        grad = K.grad_sparse if self.sparse else K.grad_dense
        if task.get("full"):
            cols = task["cols"] if task["cols"] is not None else np.arange(self.n_features)
            g = np.empty(cols.shape[0])
            grad(*self.X, self.r, cols, g)
            self.rss = float(self.r @ self.r)  # drop the drift of the running sum
            return {"g": g, "rss": self.rss, "ry": float(self.r @ self.y)}
        cols = task["cols"]
        g = np.empty(cols.shape[0])
        grad(*self.X, self.r, cols, g)
        if task.get("gram"):  # the block's Gram over this worker's rows, for an exact solve
            return {"g": g, "rss": self.rss, "G": self.gram(cols)}
        return {"g": g, "rss": self.rss}

    def gram(self, cols):
        """X_B' X_B over this worker's rows. Sparse: row by row, from scratch (cheap).
        Dense: reusing the previous block's entries, since successive working sets mostly
        overlap and each new column costs a pass over the rows for every block column."""
        if self.sparse:
            return K.gram_sparse(*self.X, cols, self.n_rows)
        old_cols, old = self.gram_cache
        pos = np.searchsorted(old_cols, cols)
        pos[pos == old_cols.shape[0]] = 0
        hit = old_cols[pos] == cols if old_cols.shape[0] else np.zeros(cols.shape[0], bool)
        G = np.empty((cols.shape[0], cols.shape[0]))
        G[np.ix_(hit, hit)] = old[np.ix_(pos[hit], pos[hit])]
        new = np.flatnonzero(~hit)
        if new.shape[0]:
            Xb = self.X[0][:, cols]
            part = Xb.T @ Xb[:, new]
            G[:, new] = part
            G[new, :] = part.T
        self.gram_cache = (cols.copy(), G)
        return G
