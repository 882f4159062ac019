"""A custom app whose workers hold the model and meet in their collectives (``self.peers``):
each worker keeps a vector; every round they sum them, gather, broadcast and pass them
round the ring, and only worker 0 reports to the scheduler. :func:`reference` computes
the same with NumPy alone."""
import numpy as np

import strads


class Rounds(strads.Schedule):
    def __init__(self, n):
        self.n = n

    def schedule(self, round):
        return {"r": round} if round < self.n else None


class Mixing(strads.Update):
    def __init__(self, shard):
        self.x = shard["x"].copy()

    def report(self):
        return {"rows": int(self.x.shape[0]), "rank": self.peers.rank}

    def update(self, task):
        r, peers = task["r"], self.peers
        total = peers.allreduce(self.x * (r + 1))
        heads = peers.allgather(self.x[:2])
        root = r % peers.size
        b = peers.bcast(self.x.sum() if peers.rank == root else None, root=root)
        got = peers.shift(self.x, k=1 + r % 2)
        self.x = self.x + 1e-3 * got + 1e-6 * b
        if peers.rank:
            return None
        return {"total": total, "heads": np.concatenate(heads), "b": b}

    def collect(self):
        return {"x": self.x}


class Keep(strads.Aggregate):
    def __init__(self):
        self.seen, self.reports = [], None

    def begin(self, reports):
        self.reports = reports

    def aggregate(self, round, task, partials):
        assert all(p is None for p in partials[1:])
        self.seen.append(partials[0])
        self.updates += 1

    def objective(self):
        return float(self.seen[-1]["total"].sum()) if self.seen else float("nan")

    def finish(self, collected):
        return {"x": np.concatenate([c["x"] for c in collected]),
                "total": self.seen[-1]["total"], "heads": self.seen[-1]["heads"],
                "b": np.float64(self.seen[-1]["b"])}


def shards(n_workers, length=5, seed=0):
    rng = np.random.default_rng(seed)
    return [{"x": rng.standard_normal(length)} for _ in range(n_workers)]


def fit(rounds=7, **run_kw):
    keep = {}

    def setup(ctx):
        keep["agg"] = Keep()
        return Rounds(rounds), keep["agg"], shards(ctx.n_workers)
    res = strads.run(setup, Mixing, quiet=True, app="peers", **run_kw)
    return res, keep.get("agg")


def reference(n_workers, rounds=7):
    xs = [s["x"].copy() for s in shards(n_workers)]
    out = None
    for r in range(rounds):
        total = xs[0] * (r + 1)
        for x in xs[1:]:
            total = total + x * (r + 1)
        heads = np.concatenate([x[:2] for x in xs])
        b = xs[r % n_workers].sum()
        k = 1 + r % 2
        xs = [xs[w] + 1e-3 * xs[(w - k) % n_workers] + 1e-6 * b for w in range(n_workers)]
        out = {"total": total, "heads": heads, "b": b}
    return np.concatenate(xs), out
