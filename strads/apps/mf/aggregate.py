"""MF on the scheduler rank: the objective's pieces, the held-out error and early stopping,
nothing of the data's or the model's size (docs/apps/mf.md)."""
import math

import numpy as np

from ...api import Aggregate
from ...transport import ordered_sum


class MFAggregate(Aggregate):
    # the layout and the data's sizes: setup() gives them again
    checkpoint_skip = ("lay", "shape", "mean", "cold", "n_train", "n_test")
    checkpoint_nullable = ("target_test_rmse",)  # (a stopping rule: load_state takes this run's)

    def __init__(self, layout, shape, mean, n_train, n_test, cold, rss, sq, test_rmse):
        """``sq``: side -> each column's penalty at the start; ``rss``, ``test_rmse``:
        the starting model's figures (setup computes them, where the data is)."""
        self.lay = layout
        self.shape, self.mean, self.cold = shape, mean, cold
        self.n_train, self.n_test = n_train, n_test
        self.sq = None if sq is None else {s: np.array(sq[s], dtype=np.float64)
                                           for s in ("W", "H")}
        self.rss = rss
        self.last_test_rmse = test_rmse  # the last scored model's (exact after finish)
        # no score between iteration ends until one has come back and told its cost
        self._asked_at, self._score_cost = self.clock(), math.inf
        self._rows_since_ask = False
        self._checked = 0  # iteration objectives already compared
        self.updates = 0
        self.iters, self.iter_objective, self.iter_test_rmse = 0, [], []
        self.target_test_rmse = None
        self._final = None
        self._last_round = -1
        self._last_end = None  # (round, iteration) of the last iteration end
        # early stopping: the patience (None: off), the best iteration and its held-out sum
        self.early_stop = None
        self.best_iteration, self.best_sse, self.early_stopped = None, math.inf, False
        self.report = {}  # figures of an earlier run to add to the summary (validated)

    def load_state(self, state):  # the first run's figures are this run's (it may have
        # gone further on resume); the target is a stopping rule: this run's flag
        super().load_state({**state, "report": self.report,
                            "target_test_rmse": self.target_test_rmse})
        # what a fresh aggregate has None or [] of (parallel loading: the workers'
        # reports give it), which the loader cannot compare: checked here
        k, its = self.lay.kk, self.iters
        if not (isinstance(self.sq, dict) and sorted(self.sq) == ["H", "W"] and all(
                isinstance(v, np.ndarray) and v.shape == (k,) and v.dtype == np.float64
                and (v >= 0).all() and np.isfinite(v).all() for v in self.sq.values())):
            raise ValueError(f"sq: not each side's {k} column penalties")
        if not (_figure(self.rss) and self.rss >= 0 and _figure(self.last_test_rmse)
                and not self.last_test_rmse < 0):
            raise ValueError("rss, last_test_rmse: not a sum of squares and an RMSE")
        if not all(isinstance(v, list) and len(v) == its and all(map(_figure, v))
                   for v in (self.iter_objective, self.iter_test_rmse)) or not all(
                math.isfinite(x) for x in self.iter_objective):
            raise ValueError(f"iter_objective, iter_test_rmse: not {its} figures (one an "
                             "iteration)")
        last, best = self._last_end, self.best_iteration
        if not ((self._final is None or _figure(self._final))
                and (best is None or _count(best) and 1 <= best <= its)
                and (last is None or isinstance(last, (tuple, list)) and len(last) == 2
                     and all(map(_count, last)))):
            raise ValueError("_final, best_iteration, _last_end: not an objective, an "
                             "iteration and a (round, iteration)")

    def begin(self, reports):
        """With parallel loading (the shape still None) the starting figures come from
        the workers' reports: their sums, added in worker order."""
        if self.shape is not None or not reports or reports[0] is None:
            return
        r0 = reports[0]
        self.shape, self.mean, self.cold = tuple(r0["shape"]), r0["mean"], r0["cold"]
        self.n_train, self.n_test = r0["n_train"], r0["n_test"]
        self.sq = {"W": ordered_sum([r["sqW"] for r in reports]),
                   "H": np.array(r0["sqH"], dtype=np.float64)}
        self.rss = sum(r["rss"] for r in reports)
        self.last_test_rmse = self._rmse(sum(r["sse"] for r in reports))

    def aggregate(self, round, task, partials):
        p = partials[0]  # worker 0's, for all (the others return None)
        s, cols = task["side"], task["cols"]
        self._scored(p["test"])
        self.sq[s][cols] = p["sq"]
        if p["rss"] is not None:
            self.rss = p["rss"]
        self.updates += cols.shape[0] * self.shape[0 if s == "W" else 1]
        self._last_round = round
        now = self.clock()  # (leaderless: the ranks' agreed time)
        if task["end"]:  # the workers score it anyway
            self.iters = it = task["iter"] + 1
            self.iter_objective.append(self.objective())
            self.iter_test_rmse.append(float("nan"))  # until the workers' scores come in
            self._last_end = (round, it)
            self._asked_at, self._rows_since_ask = now, False
            if p.get("end_test") is not None:  # early stopping: this end's score, now
                self._scored([p["end_test"]], end=True)
            return None
        # between iteration ends, a score is only worth its cost when someone will look
        # at it: a trace row logged since the last one, or a target to stop at
        wanted = self._rows_since_ask or self.target_test_rmse is not None
        if wanted and now - self._asked_at >= 20 * self._score_cost:
            self._asked_at, self._rows_since_ask = now, False
            return {"score": True}
        return None

    def _scored(self, scores, end=False):
        """Take the workers' held-out sums: (iteration or None, sum of squared errors,
        the slowest worker's seconds), oldest first; ``end``: an iteration end's, added
        up by the workers, the best so far if strictly lower (as on the workers)."""
        for it, sse, cost in scores:
            self._score_cost = cost
            self._record(self._rmse(sse), it)
            if end and sse < self.best_sse:
                self.best_sse, self.best_iteration = sse, it

    def _rmse(self, sse):
        return math.sqrt(sse / self.n_test) if self.n_test else float("nan")

    def _record(self, rmse, it):
        self.last_test_rmse = rmse
        if it is not None:
            self.iter_test_rmse[it - 1] = rmse

    def objective(self):
        if self._final is not None:
            return self._final
        return self.rss + sum(self.sq[s][self.lay.free[s]].sum() for s in ("W", "H"))

    def train_rmse(self):
        return math.sqrt(self.rss / self.n_train)

    def converged(self, tol):
        """The objective's relative change over the last iteration at most ``tol``; or,
        whatever ``tol``, the held-out RMSE at its target or (early stopping) N
        iterations since the best."""
        if self.target_test_rmse is not None and \
                self.last_test_rmse <= self.target_test_rmse:
            return True
        if self.early_stop is not None and not self.n_test:
            return True  # no validation rating to stop on (the first of validated's runs)
        if self.early_stop is not None and self.best_iteration is not None and \
                self.iters - self.best_iteration >= self.early_stop:
            self.early_stopped = True
            return True
        o = self.iter_objective
        if tol <= 0 or len(o) < 2 or self._checked == len(o):
            return False
        self._checked = len(o)
        return abs(o[-2] - o[-1]) <= tol * max(abs(o[-1]), 1e-300)

    def trace(self):
        """A trace row: its held-out RMSE is the last scored one."""
        self._rows_since_ask = True
        return {"iter": self.iters, "train_rmse": self.train_rmse(),
                "test_rmse": self.last_test_rmse}

    def finish(self, collected):
        """The model file from the workers' rows (worker order), and the exact figures of
        the final model from their sums (the running ones are those of each round)."""
        lay = self.lay
        m, n = self.shape
        shapes = [(lay.kk, sum(c[s].shape[1] for c in collected))
                  if all(c[s].shape[0] == lay.kk for c in collected) else None
                  for s in ("W", "H")]
        if shapes != [(lay.kk, m), (lay.kk, n)]:
            raise RuntimeError(f"the workers' rows make W and H {shapes}, expected "
                               f"{[(lay.kk, m), (lay.kk, n)]}")
        # the model's arrays straight from the workers' rows (no whole copy of the
        # factors as they were)
        out = {}
        for s, size in (("W", m), ("H", n)):
            F, off = np.empty((size, lay.rank)), 0
            bias = np.zeros(size)
            for c in collected:
                k = c[s].shape[1]
                F[off:off + k] = c[s][:lay.rank].T
                if lay.biases:
                    bias[off:off + k] = c[s][lay.user_bias if s == "W" else lay.item_bias]
                off += k
            out[s] = (F, bias)
            self.sq[s] = ordered_sum([c["sq"][s] for c in collected])
        self.rss = sum(c["rss"] for c in collected)
        rmse = self._rmse(sum(c["sse"] for c in collected))
        best = [c["best_iteration"] for c in collected]
        if self.early_stop is not None:
            # the best iteration's model (the workers' decision, on the same sums); every
            # iteration end's score came back with its round
            if any(b != self.best_iteration for b in best):
                raise RuntimeError(f"the workers' best iterations {best} differ from the "
                                   f"scheduler's {self.best_iteration}")
            self.last_test_rmse = rmse
        else:
            # the score of the last iteration end never came back if no round followed
            # it: it is this one
            last = self._last_end
            self._record(rmse, last[1] if last and last[0] == self._last_round else None)
        self._final = None
        self._final = self.objective()
        ids = [np.concatenate([c[k] for c in collected]) for k in ("user_ids", "item_ids")]
        return {"W": out["W"][0], "H": out["H"][0],
                "user_bias": out["W"][1], "item_bias": out["H"][1],
                "mean": np.float64(self.mean), "user_ids": ids[0], "item_ids": ids[1],
                "lambda": np.float64(lay.lam), "rank": np.int64(lay.rank)}

    def summary(self):
        m, n = self.shape
        return {"rank": self.lay.rank, "lambda": self.lay.lam, "train_rmse": self.train_rmse(),
                "test_rmse": self.last_test_rmse, "iterations": self.iters,
                "n_users": m, "n_items": n, "n_train": self.n_train,
                "n_test": self.n_test, "cold_start_test": self.cold,
                "objective_per_iter": _finite(self.iter_objective),
                "test_rmse_per_iter": _finite(self.iter_test_rmse),
                **({} if self.early_stop is None else {
                    "early_stop": self.early_stop, "best_iteration": self.best_iteration,
                    "early_stopped": self.early_stopped}), **self.report}


def _finite(xs):
    return [float(x) if math.isfinite(x) else None for x in xs]


def _figure(x):
    """A float of a checkpoint (NaN: an iteration not scored yet)."""
    return isinstance(x, (float, np.floating)) and not math.isinf(x)


def _count(x):
    return isinstance(x, (int, np.integer)) and not isinstance(x, bool) and x >= 0
