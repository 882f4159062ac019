"""The ridge app of examples/ridge.py with rows that can move between workers (``rows``,
``give``, ``take``), for the --rebalance tests."""
import sys
from pathlib import Path

import numpy as np

import strads

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "examples"))
import ridge  # noqa: E402


class MovingRidge(ridge.RidgeUpdate):
    @property
    def rows(self):
        return self.X.shape[0]

    def give(self, end, count):
        cut = slice(0, count) if end == "head" else slice(self.rows - count, self.rows)
        keep = slice(count, self.rows) if end == "head" else slice(0, self.rows - count)
        out = {"X": np.asfortranarray(self.X[cut]), "r": self.r[cut].copy()}
        self.X, self.r = np.asfortranarray(self.X[keep]), self.r[keep].copy()
        return out

    def take(self, end, rows):
        parts = [rows, {"X": self.X, "r": self.r}][::1 if end == "head" else -1]
        self.X = np.asfortranarray(np.vstack([p["X"] for p in parts]))
        self.r = np.concatenate([p["r"] for p in parts])


def problem(n=600, p=24, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, p))
    return X, X @ rng.standard_normal(p) + rng.standard_normal(n)


def fit(X, y, lam=0.1, block=6, **run_kw):
    def setup(ctx):
        rows = np.array_split(np.arange(X.shape[0]), ctx.n_workers)
        shards = [{"X": np.asfortranarray(X[r]), "y": y[r]} for r in rows]
        return ridge.Cyclic(X.shape[1], block), ridge.RidgeAggregate(*X.shape, lam), shards

    return strads.run(setup, MovingRidge, app="ridge", **run_kw)
