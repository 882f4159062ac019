"""MF on the scheduler rank: both full factors, the objective and the held-out error.

Objective: sum over training ratings of (r - mu - w_u.h_i)^2 + sum_u reg_u ||w_u||^2 +
sum_i reg_i ||h_i||^2, with reg = lambda (or lambda times the row's rating count).
Workers return their rows' new entries of the round's columns and the sum of squared
residuals of their rows; the aggregate assembles the columns (worker order) and sends
them back to everyone.

Held-out scoring costs held-out ratings x rank (1M x 32: 80-120 ms here), a tenth of an
outer iteration's work, so the workers do it, each on its share of the held-out pairs,
from their synced factors: a sync marked ``score`` asks each worker to score the state
it leaves, and the sums come back with the next results. Every iteration end is scored;
other rounds only for a trace row logged since the last request or a target RMSE to stop
at, and while scoring stays under 5% of the time since the last request.
"""
import math
import time
from collections import deque

import numpy as np

from ...engine import Aggregate
from . import kernels as K


class MFAggregate(Aggregate):
    # the problem's shape, ids, ratings and held-out pairs: setup() rebuilds them
    checkpoint_skip = ("lay", "reg", "ids", "train", "test", "cold_test")

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
        # held-out pairs of unseen users or items (cold start, policy mean) are few, and
        # scored here: the workers' factors have no entry for them
        cold = (self.test[0] == m) | (self.test[1] == n)
        self.cold_test = tuple(a[cold] for a in self.test)
        # the starting model's score; when W starts at 0 (as make_setup's, biases too),
        # every prediction is the mean
        e = self.test[2] - mean if not W.any() else self._test_err(*self.test)
        self.last_test_rmse = (math.sqrt(K.wsumsq(None, e) / e.shape[0]) if e.shape[0]
                               else float("nan"))
        self._asks = deque()  # scores asked for: (round, iteration or None, cold part)
        # no score between iteration ends until one has come back and told its cost
        self._asked_at, self._score_cost = time.perf_counter(), math.inf
        self._rows_since_ask = False
        self._checked = 0  # iteration objectives already compared
        self.updates = 0
        self.iters, self.iter_objective, self.iter_test_rmse = 0, [], []
        self.target_test_rmse = None
        self._final = None
        self._last_round = -1

    def test_shares(self, n_workers):
        """Each worker's share of the held-out pairs it can score (users, items, rating
        less the mean), in contiguous runs of the (user, item) order."""
        m, n = self.shape
        tu, ti, tr = self.test
        warm = (tu < m) & (ti < n)
        parts = np.array_split(np.flatnonzero(warm), n_workers)
        return [(tu[k].astype(np.int32), ti[k].astype(np.int32), tr[k] - self.mean)
                for k in parts]

    def rows(self):
        """Both factors row-major (one row per user or item), for the final scoring."""
        return tuple(np.ascontiguousarray(self.FT[s].T) for s in ("W", "H"))

    def _test_err(self, users, items, ratings):
        out = np.empty(users.shape[0])
        K.predict_pairs(self.FT["W"], self.FT["H"], users, items, out)
        return ratings - self.mean - out

    def aggregate(self, round, task, partials):
        s, cols = task["side"], task["cols"]
        vals = np.concatenate([p["vals"] for p in partials], axis=1)
        n = self.size[s]
        if vals.shape != (cols.shape[0], n):
            raise RuntimeError(f"round {round}: assembled {vals.shape}, "
                               f"expected {(cols.shape[0], n)}")
        self._scored([p["test"] for p in partials])
        F = self.FT[s]
        F[cols, :n] = vals
        for c in cols:
            self.sq[s][c] = K.wsumsq(self.reg[s], F[c, :n])
        if partials[0]["rss"] is not None:
            self.rss = sum(p["rss"] for p in partials)
        self.updates += cols.shape[0] * n
        self._last_round = round
        it = None
        if task["end"]:
            self.iters = it = task["iter"] + 1
            self.iter_objective.append(self.objective())
            self.iter_test_rmse.append(float("nan"))  # until the workers' scores come in
        sync = {"side": s, "cols": cols, "vals": vals}
        now = time.perf_counter()
        # between iteration ends, a score is only worth its cost when someone will look
        # at it: a trace row logged since the last one, or a target to stop at
        wanted = self._rows_since_ask or self.target_test_rmse is not None
        if it is not None or (wanted and now - self._asked_at >= 20 * self._score_cost):
            self._asked_at, self._rows_since_ask = now, False
            cu, ci, cr = self.cold_test
            cold = K.wsumsq(None, self._test_err(cu, ci, cr)) if cu.shape[0] else 0.0
            self._asks.append((round, it, cold))
            sync["score"] = True
        return sync

    def _scored(self, scores):
        """Take the workers' held-out sums (one list per worker, one entry per scored
        sync, oldest first)."""
        for k in range(len(scores[0])):
            _, it, cold = self._asks.popleft()
            sse = cold + sum(w[k][0] for w in scores)
            self._score_cost = max(w[k][1] for w in scores)
            self._record(math.sqrt(sse / self.test[2].shape[0]) if self.test[2].shape[0]
                         else float("nan"), it)

    def _record(self, rmse, it):
        self.last_test_rmse = rmse
        if it is not None:
            self.iter_test_rmse[it - 1] = rmse

    def objective(self):
        if self._final is not None:
            return self._final
        reg = sum(self.sq[s][self.lay.free[s]].sum() for s in ("W", "H"))
        return self.rss + reg

    def train_rmse(self):
        return math.sqrt(self.rss / self.n_train)

    def test_rmse(self):
        """Held-out RMSE of the last scored model (see the module's docstring): the
        starting model's until the workers' first scores come in, the final model's
        exactly after :meth:`finish`."""
        return self.last_test_rmse

    def converged(self, tol):
        """Relative objective change over the last outer iteration at most ``tol`` (> 0),
        checked once per iteration; or the last held-out score (see the module's
        docstring) at or below ``target_test_rmse``, whatever ``tol``."""
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
        """A trace row: its held-out RMSE is the last scored one."""
        self._rows_since_ask = True
        return {"iter": self.iters, "train_rmse": self.train_rmse(),
                "test_rmse": self.last_test_rmse}

    def finish(self, collected):
        lay = self.lay
        m, n = self.shape
        # exact figures of the final model (the running ones drift by rounding, and are
        # stale with staleness > 0)
        W, H = self.rows()
        self.rss = K.rss_rows(*self.train, W, H)
        e = self._test_err(*self.test)
        rmse = math.sqrt(K.wsumsq(None, e) / e.shape[0]) if e.shape[0] else float("nan")
        # scores asked for and never returned (no results came after them): those of the
        # final state are this one
        last = [it for r, it, _ in self._asks if r == self._last_round]
        self._record(rmse, last[0] if last else None)
        self._asks.clear()
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
