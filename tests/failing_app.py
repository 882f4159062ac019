"""A tiny app that raises on purpose: python failing_app.py {worker,scheduler,setup}."""
import sys

import numpy as np

import strads

WHERE = sys.argv[1]


class Sched(strads.Schedule):
    def schedule(self, round):
        return {"x": np.ones(3)}


class Upd(strads.Update):
    def update(self, task):
        if WHERE == "worker" and self.shard["w"] == 1 and self.rounds_done() > 3:
            raise ValueError("boom on worker 1")
        return {"s": task["x"].sum()}

    def rounds_done(self):
        self.n = getattr(self, "n", 0) + 1
        return self.n


class Agg(strads.Aggregate):
    def aggregate(self, round, task, partials):
        if WHERE == "scheduler" and round == 5:
            raise RuntimeError("boom on the scheduler")
        return None


def setup(ctx):
    if WHERE == "setup":
        raise strads.DataError("input.txt:7: count -3 is negative")
    return Sched(), Agg(), [{"w": w} for w in range(ctx.n_workers)]


strads.run(setup, Upd, max_rounds=10_000_000, quiet=True)
