"""Sparse logistic regression by scheduled coordinate descent (STRADS, Kim et al. 2016):
the logistic loss's datafit over the generalised linear models' set-up, schedules and
command line (:mod:`strads.apps.glm`). Notes: docs/apps/logreg.md.
"""
import math

import numpy as np
import scipy.sparse as sp

from ...errors import DataError
from ..glm.schedule import (SCHEDULES, PlannedWorkingSet, ShuffledPriority,
                            max_staleness)
from ..glm.setup import Datafit, check_gap_ref, gram_block_cap, gram_budget
from . import data
from .aggregate import LogRegAggregate, null_loss
from .data import check, load, make_problem
from .update import LogRegUpdate

__all__ = ["fit", "lambda_max", "objective", "load", "check", "make_problem",
           "make_setup", "make_file_setup", "LogRegUpdate", "LogRegAggregate", "SCHEDULES",
           "max_staleness"]

WS_MIN = 32  # the smallest working set (when that many coordinates are candidates)


def _labels(y):
    y = np.asarray(y, dtype=np.float64).ravel()
    classes = np.unique(y)
    if classes.shape[0] != 2:
        raise DataError(f"y has {classes.shape[0]} distinct labels: need exactly two")
    return np.where(y == classes[1], 1.0, -1.0)


def lambda_max(X, y):
    """The smallest lambda for which w = 0 is optimal: ||X' y||_inf / (2 n), y in
    {-1, +1}."""
    return LogRegAggregate.lambda_for(1.0, X.T @ _labels(y), X.shape[0])


def objective(X, y, coef, lam):
    """(1/n) sum_i log(1 + exp(-y_i x_i'coef)) + lam ||coef||_1, y any two labels."""
    z = _labels(y) * np.asarray(X @ coef).ravel()
    return float(np.logaddexp(0.0, -z).mean()) + lam * float(np.abs(coef).sum())


class Logistic(Datafit):
    """The logistic loss's datafit: working sets solved by prox-Newton steps the aggregate
    plans; the labels' two values kept in the model."""
    name = "logreg"
    Aggregate, Update = LogRegAggregate, LogRegUpdate
    data = data
    priority = ShuffledPriority
    options = {"tol": 1e-6, "name": "data", "ws_min": WS_MIN, "reuse_hessian": True,
               "gram_budget": None, "coef0": None, "intercept_column": False,
               "gap_ref": "objective"}
    help = dict(
        description="Sparse logistic regression, min (1/n) sum_i log(1 + exp(-y_i x_i'w)) "
        "+ lambda ||w||_1 (labels: any two values, the smaller -> -1), by scheduled "
        "parallel coordinate descent.",
        target="labels for a .mtx or sparse .npz --data: .npy or one per line",
        lambda_ratio="lambda as a fraction of lambda_max = ||X'y||_inf / (2n), y in "
        "{-1, +1} (when --lambda is not given)",
        schedule="working-set: priority-chosen working sets solved by prox-Newton steps "
        "from their weighted Gram matrix, with a line search; priority: STRADS priority "
        "sampling + dependency filter (--rho), one Newton step per coordinate; "
        "round-robin, random: baselines",
        full_every="",
        snr="||X w|| / ||noise|| before the labels are taken as signs")

    @staticmethod
    def check_lambda(lam):
        if not (lam > 0 and math.isfinite(lam)):
            raise DataError(f"lambda must be a finite number > 0, got {lam} (without a "
                            "penalty the duality gap has no feasible dual point, and on "
                            "separable data no minimiser exists)")

    @staticmethod
    def cli_options(args, name):
        return dict(name=name)

    def problem(self, data_fn, options):
        X, y, classes = check(*data_fn(), name=options["name"])
        return X, y, {"classes": classes}

    def shard(self, path, target, options):
        return data.shard(path, target, options["name"])

    @staticmethod
    def _kw(ctx, o):
        """The aggregate's options, ``gap_ref`` checked."""
        check_gap_ref(o)
        return dict(min_size=o["ws_min"], block_cap=gram_block_cap(gram_budget(o), ctx.n_workers),
                    reuse=o["reuse_hessian"], intercept=o["intercept_column"])

    def aggregate(self, X, y, sq_norms, lam, ctx, o):
        kw, n = self._kw(ctx, o), X.shape[0]
        null = null_loss(n, float(np.sum(y)), kw["intercept"]) \
            if o["gap_ref"] == "null" else None
        agg = LogRegAggregate(n, sq_norms, lam, o["tol"], **kw, null=null)
        counts = np.diff(X.indptr) if sp.issparse(X) else np.full(X.shape[1], X.shape[0])
        agg.col_share, agg.x_nnz = counts / max(counts.sum(), 1), float(counts.sum())
        return agg

    def later(self, lam, lambda_ratio, ctx, o):
        if o["coef0"] is not None:
            raise DataError("logreg: a warm start needs the data read on rank 0")
        return LogRegAggregate.later(lam, lambda_ratio, o["tol"], o["gap_ref"],
                                     **self._kw(ctx, o))

    @staticmethod
    def working_set(agg, block, ctx, options):
        return PlannedWorkingSet(agg, block, ctx.staleness)


DATAFIT = Logistic()
fit, make_setup, make_file_setup = DATAFIT.fit, DATAFIT.make_setup, DATAFIT.make_file_setup
