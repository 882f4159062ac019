"""Ridge regression by exact block coordinate descent: a complete strads app written only
against the public API (min 1/(2n) ||y - X b||^2 + lam/2 ||b||^2).

Each round takes the next block of coefficients; every worker returns, over its rows,
X_B' r and the block's Gram X_B' X_B; the scheduler solves the block exactly and sends
the change back, and the workers update their residuals. Run it:
    python examples/ridge.py --workers 2        # one process, 2 simulated workers
    mpiexec -n 4 python examples/ridge.py       # scheduler + 3 MPI workers
It takes every engine flag of the built-in apps (strads.cli): --out, --staleness,
--checkpoint-every, --resume, ...
"""
import numpy as np

import strads
from strads.cli import run_app
from strads.params import Param


class Cyclic(strads.Schedule):
    def __init__(self, n_features, block):
        self.p, self.block = n_features, block

    def schedule(self, round):
        start = round * self.block % self.p
        return {"cols": np.arange(start, min(start + self.block, self.p))}


class RidgeUpdate(strads.Update):
    checkpoint_skip = ("X",)  # the data: setup() makes it again on --resume

    def __init__(self, shard):
        self.X, self.r = shard["X"], shard["y"].copy()  # residual y - X b, with b = 0

    def apply(self, sync):
        self.r -= self.X[:, sync["cols"]] @ sync["delta"]

    def update(self, task):
        Xb = self.X[:, task["cols"]]
        return {"g": Xb.T @ self.r, "G": Xb.T @ Xb, "rss": self.r @ self.r}


class RidgeAggregate(strads.Aggregate):
    def __init__(self, n_samples, n_features, lam):
        self.n, self.lam, self.coef, self.f = n_samples, lam, np.zeros(n_features), np.nan

    def aggregate(self, round, task, partials):
        g, G = sum(p["g"] for p in partials), sum(p["G"] for p in partials)
        cols, old = task["cols"], self.coef[task["cols"]]
        # the objective at the coefficients the workers' residual belongs to
        self.f = sum(p["rss"] for p in partials) / (2 * self.n) + self.lam / 2 * self.coef @ self.coef
        # exact block minimiser: (G + n lam I) b = X_B' (r + X_B b_old)
        new = np.linalg.solve(G + self.n * self.lam * np.eye(len(cols)), g + G @ old)
        self.coef[cols] = new
        self.updates += len(cols)
        return {"cols": cols, "delta": new - old}

    def objective(self):
        return self.f

    def finish(self, collected):
        return {"coef": self.coef}


def fit(X, y, lam=0.1, block=8, **run_kw):
    def setup(ctx):
        rows = np.array_split(np.arange(X.shape[0]), ctx.n_workers)
        shards = [{"X": np.asfortranarray(X[r]), "y": y[r]} for r in rows]
        return Cyclic(X.shape[1], block), RidgeAggregate(*X.shape, lam), shards

    return strads.run(setup, RidgeUpdate, app="ridge", **run_kw)


# the command line: the engine's flags, and these
PARAMS = (Param("lam", 0.1, "the penalty", low=0, closed="neither"),
          Param("block", 8, "coordinates a round", low=1))


def main(argv=None):
    def fit_args(args, **run_kw):
        if args.data:
            raise strads.DataError("--data: this example builds its own problem")
        rng = np.random.default_rng(args.seed)
        X = rng.standard_normal((1000, 64))
        y = X @ rng.standard_normal(64) + rng.standard_normal(1000)
        return fit(X, y, args.lam, args.block, **run_kw)

    return run_app("examples/ridge.py", __doc__.split("\n\n")[0], PARAMS, fit_args,
                   max_rounds=500, tol=1e-12, argv=argv)


if __name__ == "__main__":
    main()
