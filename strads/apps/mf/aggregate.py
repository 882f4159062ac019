"""MF on the scheduler rank: both full factors, the objective and the held-out error.

Objective: sum over training ratings of (r - mu - w_u.h_i)^2 + sum_u reg_u ||w_u||^2 +
sum_i reg_i ||h_i||^2, with reg = lambda (or lambda times the row's rating count).
Workers return their rows' new entries of the round's columns and the sum of squared
residuals of their rows; the aggregate assembles the columns (worker order) and sends
them back to everyone.
"""
import math
import time

import numpy as np

from ...engine import Aggregate
from . import kernels as K


class MFAggregate(Aggregate):
    def __init__(self, layout, W, H, reg, problem, mean, rows):
        self.lay = layout
        m, n = problem.shape
        # transposed (one row per factor column), as the rounds deliver them: a round's
        # columns are then contiguous writes; one extra entry per column: the factor of
        # an unseen id (cold start, policy mean)
        self.FT = {"W": np.zeros((layout.kk, m + 1)), "H": np.zeros((layout.kk, n + 1))}
        self.FT["W"][:, :m], self.FT["H"][:, :n] = W, H
        for s, c in layout.fixed.items():
            self.FT[s][c] = 1.0
        self.size = {"W": m, "H": n}
        self.reg = reg  # side -> per-row reg
        # the ids and counts, not the problem: its training triplets are in the workers'
        # shards and in ``rows``, and would stay alive on the scheduler for the whole run
        self.shape, self.cold = (m, n), problem.cold
        self.ids = (problem.user_ids, problem.item_ids)
        self.train = rows  # the training ratings less the mean, by user (CSR)
        # held-out pairs by user, then item: the scoring reads the factors in order
        order = np.lexsort((problem.test_items, problem.test_users))
        self.test = tuple(a[order] for a in (problem.test_users, problem.test_items,
                                             problem.test_ratings))
        self.mean = mean
        self.sq = {s: np.array([K.wsumsq(reg[s], self.FT[s][t, :self.size[s]])
                                for t in range(layout.kk)]) for s in ("W", "H")}
        self.rss = K.wsumsq(None, rows[2])
        self.n_train = rows[2].shape[0]
        self.err = None
        self._checked = 0  # iteration objectives already compared
        self.last_test_rmse = float("nan")
        self._scored_at, self._score_cost = -math.inf, 0.0
        self.updates = 0
        self.iters, self.iter_objective, self.iter_test_rmse = 0, [], []
        self.target_test_rmse = None
        self._final = None

    def rows(self):
        """Both factors row-major (one row per user or item), for the final scoring."""
        return tuple(np.ascontiguousarray(self.FT[s].T) for s in ("W", "H"))

    def _test_err(self):
        tu, ti, tr = self.test
        out = np.empty(tu.shape[0])
        K.predict_pairs(self.FT["W"], self.FT["H"], tu, ti, out)
        return tr - self.mean - out

    def aggregate(self, round, task, partials):
        s, cols = task["side"], task["cols"]
        vals = np.concatenate([p["vals"] for p in partials], axis=1)
        n = self.size[s]
        if vals.shape != (cols.shape[0], n):
            raise RuntimeError(f"round {round}: assembled {vals.shape}, "
                               f"expected {(cols.shape[0], n)}")
        F = self.FT[s]
        F[cols, :n] = vals
        self.err = None  # scored again from the factors when asked for
        for c in cols:
            self.sq[s][c] = K.wsumsq(self.reg[s], F[c, :n])
        if partials[0]["rss"] is not None:
            self.rss = sum(p["rss"] for p in partials)
        self.updates += cols.shape[0] * n
        if task["end"]:
            self.iters = task["iter"] + 1
            self.iter_objective.append(self.objective())
            self.iter_test_rmse.append(self.test_rmse())
        return {"side": s, "cols": cols, "vals": vals}

    def objective(self):
        if self._final is not None:
            return self._final
        reg = sum(self.sq[s][self.lay.free[s]].sum() for s in ("W", "H"))
        return self.rss + reg

    def train_rmse(self):
        return math.sqrt(self.rss / self.n_train)

    def test_rmse(self):
        """Held-out RMSE of the current model, scored afresh at most once per round (it
        costs held-out ratings x rank): at iteration ends, and for trace rows as
        :meth:`trace` allows."""
        if self.err is None:
            t0 = time.perf_counter()
            self.err = self._test_err()
            self._scored_at = time.perf_counter()
            self._score_cost = self._scored_at - t0
        e = self.err
        self.last_test_rmse = (math.sqrt(K.wsumsq(None, e) / e.shape[0]) if e.shape[0]
                               else float("nan"))
        return self.last_test_rmse

    def converged(self, tol):
        """Relative objective change over the last outer iteration at most ``tol`` (> 0),
        checked once per iteration; or the last scored held-out RMSE (trace rows,
        iteration ends) at or below ``target_test_rmse``, whatever ``tol``."""
        if self.target_test_rmse is not None and \
                self.last_test_rmse <= self.target_test_rmse:
            return True
        o = self.iter_objective
        if tol <= 0:
            return False
        if len(o) < 2 or self._checked == len(o):
            return False
        self._checked = len(o)
        return abs(o[-2] - o[-1]) <= tol * max(abs(o[-1]), 1e-300)

    def trace(self):
        """A trace row. Its held-out RMSE is scored afresh only while scoring stays
        under 5% of the time since the last scoring; otherwise it repeats the last
        scored value (every iteration end is scored). Scoring costs held-out ratings x
        rank: 70 ms at 1M x 33 here, against a 20 ms round and 0.1 s between rows."""
        now = time.perf_counter()
        if self.err is None and now - self._scored_at < 20 * self._score_cost:
            rmse = self.last_test_rmse
        else:
            rmse = self.test_rmse()
        return {"iter": self.iters, "train_rmse": self.train_rmse(), "test_rmse": rmse}

    def finish(self, collected):
        lay = self.lay
        m, n = self.shape
        # exact figures of the final model (the running ones drift by rounding, and are
        # stale with staleness > 0)
        W, H = self.rows()
        self.rss = K.rss_rows(*self.train, W, H)
        self.err = self._test_err()
        self._final = None
        self._final = self.objective()
        zeros = lambda k: np.zeros(k)  # noqa: E731
        return {"W": W[:m, :lay.rank].copy(), "H": H[:n, :lay.rank].copy(),
                "user_bias": W[:m, lay.user_bias].copy() if lay.biases else zeros(m),
                "item_bias": H[:n, lay.item_bias].copy() if lay.biases else zeros(n),
                "mean": np.float64(self.mean), "user_ids": self.ids[0],
                "item_ids": self.ids[1], "lambda": np.float64(lay.lam),
                "rank": np.int64(lay.rank)}

    def summary(self):
        m, n = self.shape
        return {"rank": self.lay.rank, "lambda": self.lay.lam, "train_rmse": self.train_rmse(),
                "test_rmse": self.test_rmse(), "iterations": self.iters,
                "n_users": m, "n_items": n, "n_train": self.n_train,
                "n_test": int(self.test[0].shape[0]), "cold_start_test": self.cold,
                "objective_per_iter": _finite(self.iter_objective),
                "test_rmse_per_iter": _finite(self.iter_test_rmse)}


def _finite(xs):
    return [float(x) if math.isfinite(x) else None for x in xs]
