"""Lasso on the scheduler rank: the coefficients, priorities and duality gap.

Objective 1/(2n) ||y - X b||^2 + lambda ||b||_1. The workers return x_j' r over their
rows; the sum over workers gives each chosen coordinate its exact minimiser against the
residual of the version the round was computed at.
"""
import numpy as np

from ...engine import Aggregate
from . import kernels as K


class LassoAggregate(Aggregate):
    def __init__(self, sq_norms, n_samples, lam, y_sq):
        self.n, self.lam, self.y_sq = n_samples, float(lam), float(y_sq)
        self.thresh = n_samples * self.lam
        self.sq_norms = sq_norms
        p = sq_norms.shape[0]
        self.beta = np.zeros(p)
        self.busy = np.zeros(p, dtype=np.bool_)  # coordinates in an unaggregated round
        self.prio = np.zeros(p)
        self.tree = K.tree_build(self.prio)
        self.l1 = 0.0
        self.l1_at = [0.0]  # ||b||_1 after each aggregated round: l1_at[version]
        self.done = 0  # rounds aggregated
        self.updates = 0
        self.primal = 0.5 * self.y_sq / n_samples
        self.gap = np.inf
        self.gap_version = -1
        self.objective_rises = 0
        self.step = 1.0  # relaxation of the coordinate steps, lowered by the schedule

    def objective(self):
        return self.primal

    def aggregate(self, round, task, partials):
        g = partials[0]["g"].copy()
        for part in partials[1:]:
            g += part["g"]
        rss = sum(part["rss"] for part in partials)
        version = task["version"]
        primal = 0.5 * rss / self.n + self.lam * self.l1_at[version]
        if primal > self.primal * (1 + 1e-9) and version > 0:
            self.objective_rises += 1
        self.primal = primal
        self.done += 1
        if task.get("full"):
            self._full(g, rss, sum(part["ry"] for part in partials), version)
            self.l1_at.append(self.l1)
            return None
        cols = task["cols"]
        delta = np.empty(cols.shape[0])
        self.l1 += K.soft_threshold_block(self.beta, cols, g, self.sq_norms, self.thresh,
                                          self.step, delta)
        self.l1_at.append(self.l1)
        self.busy[cols] = False
        self.updates += cols.shape[0]
        K.tree_set(self.tree, cols, self.sq_norms[cols] * delta * delta)
        moved = delta != 0.0
        return {"cols": cols[moved], "delta": delta[moved]}

    def _full(self, g, rss, ry, version):
        """Duality gap at this version, and every coordinate's priority refreshed."""
        scale = max(self.thresh, np.abs(g).max())  # theta = r / scale is dual feasible
        dual = (-0.5 * self.n * self.lam ** 2 * rss / scale ** 2 + self.lam * ry / scale)
        self.gap = max(self.primal - dual, 0.0)
        self.gap_version = version
        K.would_change(self.beta, g, self.sq_norms, self.thresh, self.prio)
        self.tree = K.tree_build(self.prio)

    def converged(self, tol):
        return self.gap <= tol * max(self.primal, 1e-300)

    def trace(self):
        return {"duality_gap": self.gap, "nnz_coef": int(np.count_nonzero(self.beta))}

    def finish(self, collected):
        return {"coef": self.beta.copy(), "lambda": np.float64(self.lam)}

    def summary(self):
        return {"lambda": self.lam, "nnz_coef": int(np.count_nonzero(self.beta)),
                "duality_gap": self.gap, "objective_rises": self.objective_rises}
