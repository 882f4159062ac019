"""The STRADS loop: schedule -> update on every worker -> aggregate, with bounded staleness.

The engine knows nothing of any app. An app gives three objects:

* a :class:`Schedule` (on the scheduler rank) that picks the next block of work,
* an :class:`Update` class (one instance per worker, holding that worker's shard) that
  turns a block into a partial result, and applies the aggregated changes it is sent,
* an :class:`Aggregate` (on the scheduler rank) that combines the partial results of a
  round, updates the model and says what the workers must apply.

Consistency. With ``staleness=s`` up to ``s + 1`` rounds are in flight: the schedule of
round r is made, and the workers compute round r, after rounds ``0 .. r-s-1`` have been
aggregated and applied. Workers count the syncs they applied (their *version*) and
return it with every result; the engine records ``(round, worker, version)`` and raises
if ``round - version`` ever exceeds ``s``. Results are aggregated strictly in round
order, so a run is deterministic for a given seed, staleness and worker count, whatever
the transport.
"""
import csv
import json
import math
import os
import sys
import time
from collections import deque
from dataclasses import dataclass, field

import numpy as np

from threadpoolctl import threadpool_limits

from . import transport as _transport


class DataError(ValueError):
    """Bad input (a file, a shape, a flag): the message names where and what."""


class StalenessError(RuntimeError):
    """A worker computed on parameters older than the staleness bound allows."""


# --------------------------------------------------------------------------------------
# The three pieces of an app
# --------------------------------------------------------------------------------------
class Schedule:
    """Chooses what the workers do next. Lives on the scheduler rank. The engine sets
    ``self.staleness`` before the first call. ``total_rounds``, if the schedule knows
    how many rounds it will make, gives the progress line its ETA."""

    staleness = 0
    total_rounds = None

    def schedule(self, round):
        """Return the task for ``round``: one message for every worker, or a list with
        one message per worker, or None when there is nothing left to do."""
        raise NotImplementedError


class Update:
    """One worker's share of the data and the kernel that works on it.

    Constructed on the worker from its shard (whatever the app's setup put in it; arrays
    arrive as buffers). ``apply`` receives each aggregated sync in order, ``update``
    computes the partial result of one task, ``collect`` returns the worker's part of
    the final model.
    """

    def __init__(self, shard):
        self.shard = shard

    @classmethod
    def warmup(cls):
        """Compile every kernel (numba, ``cache=True``). The first worker runs this
        before the others start, so they load the on-disk cache instead of all
        compiling at once."""

    def apply(self, sync):
        pass

    def update(self, task):
        raise NotImplementedError

    def collect(self):
        return {}


class Aggregate:
    """Combines the partial results of a round. Lives on the scheduler rank."""

    #: number of parameter updates so far (the app increments it)
    updates = 0

    def aggregate(self, round, task, partials):
        """Combine the per-worker ``partials`` (a list, in worker order) of ``round``.
        Return the sync every worker must apply (one message, a list of one per worker,
        or None)."""
        raise NotImplementedError

    def objective(self):
        """The objective of the current model (for logs, traces and ``tol``)."""
        return float("nan")

    def converged(self, tol):
        """Asked after every aggregated round until the run is stopping, whatever
        ``tol``: ``tol <= 0`` turns a tolerance rule off, not an app's own targets.
        Default rule: the objective moved by at most ``tol`` (relative) over the last 20
        rounds -- a window, since one round may touch only parameters that are already
        optimal. Apps with a duality gap or similar override this."""
        if tol <= 0:
            return False
        hist = self.__dict__.setdefault("_objectives", deque(maxlen=21))
        hist.append(self.objective())
        if len(hist) < hist.maxlen or not all(map(math.isfinite, hist)):
            return False
        return abs(hist[0] - hist[-1]) <= tol * max(abs(hist[-1]), 1e-300)

    def trace(self):
        """Extra columns for this round's row of trace.csv."""
        return {}

    def finish(self, collected):
        """Return the final model (name -> array) from each worker's ``collect()``."""
        return {}

    def summary(self):
        """Extra figures for summary.json."""
        return {}


# --------------------------------------------------------------------------------------
# Worker side
# --------------------------------------------------------------------------------------
class _WorkerHost:
    """Turns engine messages into calls on the app's Update object."""

    def __init__(self, update_cls):
        self.update_cls = update_cls
        self.update = None
        self.version = 0

    def handle(self, msg):
        kind = msg[0]
        if kind == "init":
            _, shard, warm = msg
            if warm:
                self.update_cls.warmup()
            self.update = self.update_cls(shard)
            return ("ready",)
        if kind == "step":
            _, round, syncs, task = msg
            for sync in syncs:
                if sync is not None:
                    self.update.apply(sync)
                self.version += 1
            if task is None:
                return None
            return ("result", round, self.version, self.update.update(task))
        if kind == "collect":
            return ("collected", self.update.collect())
        raise RuntimeError(f"unknown engine message {kind!r}")


# --------------------------------------------------------------------------------------
# Results and outputs
# --------------------------------------------------------------------------------------
@dataclass
class Result:
    app: str
    ranks: int
    workers: int
    staleness: int
    rounds: int
    updates: int
    wall_s: float
    objective: float
    stop_reason: str
    model: dict = field(default_factory=dict)
    extra: dict = field(default_factory=dict)
    trace: list = field(default_factory=list)
    versions: np.ndarray = None  # (round, worker, version) for every result

    def summary(self):
        s = {k: getattr(self, k) for k in
             ("app", "ranks", "workers", "staleness", "rounds", "updates", "wall_s",
              "objective", "stop_reason")}
        s["updates_per_s"] = self.updates / self.wall_s if self.wall_s > 0 else 0.0
        s["max_staleness_seen"] = int((self.versions[:, 0] - self.versions[:, 2]).max()
                                      if len(self.versions) else 0)
        s.update(self.extra)
        return s

    def write(self, out):
        os.makedirs(out, exist_ok=True)
        with open(os.path.join(out, "summary.json"), "w") as f:
            json.dump(_jsonable(self.summary()), f, indent=2)
            f.write("\n")
        cols = []
        for row in self.trace:
            cols += [k for k in row if k not in cols]
        with open(os.path.join(out, "trace.csv"), "w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=cols)
            w.writeheader()
            w.writerows(self.trace)
        np.savez(os.path.join(out, "model.npz"), **self.model)


def _jsonable(d):
    out = {}
    for k, v in d.items():
        if isinstance(v, np.generic):
            v = v.item()
        if isinstance(v, float) and not math.isfinite(v):
            v = None
        out[k] = v
    return out


class _Progress:
    """One live line on stderr: round, updates/s, objective, elapsed, ETA."""

    def __init__(self, app, quiet, max_rounds, time_limit):
        self.app, self.quiet = app, quiet
        self.max_rounds, self.time_limit = max_rounds, time_limit
        self.tty = sys.stderr.isatty()
        self.last = 0.0

    def show(self, now, round, updates, objective, final=False):
        if self.quiet or (not final and now - self.last < (0.5 if self.tty else 2.0)):
            return
        self.last = now
        rate = updates / now if now > 0 else 0.0
        eta = []
        if self.time_limit:
            eta.append(self.time_limit - now)
        if self.max_rounds and round > 0:
            eta.append(now / round * (self.max_rounds - round))
        eta_s = f"  eta<={max(0.0, min(eta)):.0f}s" if eta and not final else ""
        line = (f"[{self.app}] round {round}  {rate:,.0f} updates/s  "
                f"objective {objective:.10g}  {now:.1f}s{eta_s}")
        if self.tty:
            sys.stderr.write("\r" + line + ("\n" if final else ""))
        else:
            sys.stderr.write(line + "\n")
        sys.stderr.flush()


def split_balanced(counts, n_parts):
    """Contiguous blocks of rows (documents, users, samples) with about equal sums of
    ``counts`` (their non-zeros, ratings or tokens), each at least one row long when
    there are enough rows; returns the n_parts + 1 offsets. For an app's setup()."""
    n = counts.shape[0]
    cum = np.concatenate([[0], np.cumsum(counts)])
    cuts = np.searchsorted(cum, np.linspace(0, cum[-1], n_parts + 1), side="right") - 1
    cuts[0], cuts[-1] = 0, n
    for k in range(1, n_parts):
        cuts[k] = min(max(cuts[k], cuts[k - 1] + 1), n - (n_parts - k))
    return cuts.astype(np.int64)


# --------------------------------------------------------------------------------------
# The loop
# --------------------------------------------------------------------------------------
def _per_worker(msg, n):
    if isinstance(msg, list):
        if len(msg) != n:
            raise ValueError(f"a per-worker message has {len(msg)} parts for {n} workers")
        return msg
    return [msg] * n


def _same(a, b):
    return len(a) == len(b) and all(x is y for x, y in zip(a, b))


def _drive(tp, setup, *, staleness, max_rounds, time_limit, tol, app, quiet,
           log_interval):
    W = tp.n_workers
    schedule, aggregate, shards = setup(W)
    if len(shards) != W:
        raise ValueError(f"setup returned {len(shards)} shards for {W} workers")
    # The first worker compiles every kernel alone; the others then load them from its
    # on-disk cache (in one process, the kernels are already there).
    tp.send(0, ("init", shards[0], True))
    tp.recv(0)
    for w in range(1, W):
        tp.send(w, ("init", shards[w], tp.is_mpi))
    for w in range(1, W):
        tp.recv(w)
    del shards  # the workers hold them now: the scheduler need not keep a copy

    schedule.staleness = staleness  # a schedule may keep dependent blocks this far apart
    total = schedule.total_rounds  # read after the staleness is set: it may depend on it
    progress = _Progress(app, quiet, min(max_rounds, total or max_rounds), time_limit)
    trace, versions = [], []
    pending = [[] for _ in range(W)]  # syncs not yet sent, per worker
    inflight = deque()
    r_next, done, reason = 0, 0, "max_rounds"
    stopping = max_rounds <= 0
    t0 = time.perf_counter()
    last_log = -math.inf

    def log(now):
        row = {"round": done, "wall_s": round(now, 6), "updates": aggregate.updates,
               "objective": aggregate.objective()}
        row.update(aggregate.trace())
        trace.append(row)

    while True:
        while not stopping and r_next < max_rounds and len(inflight) <= staleness:
            task = schedule.schedule(r_next)
            if task is None:
                stopping, reason = True, "schedule_done"
                break
            tasks = _per_worker(task, W)
            if all(t is tasks[0] and _same(p, pending[0]) for t, p in zip(tasks, pending)):
                tp.send_all(("step", r_next, pending[0], tasks[0]))  # packed once
            else:
                for w in range(W):
                    tp.send(w, ("step", r_next, pending[w], tasks[w]))
            pending = [[] for _ in range(W)]
            inflight.append((r_next, task))
            r_next += 1
        if not inflight:
            break
        r, task = inflight.popleft()
        partials = []
        for w in range(W):
            kind, rr, version, partial = tp.recv(w)
            if rr != r:
                raise RuntimeError(f"worker {w} answered round {rr}, expected {r}")
            if r - version > staleness:
                raise StalenessError(f"round {r} was computed by worker {w} at version "
                                     f"{version}: {r - version} rounds stale > {staleness}")
            versions.append((r, w, version))
            partials.append(partial)
        sync = aggregate.aggregate(r, task, partials)
        for w, s in enumerate(_per_worker(sync, W)):
            pending[w].append(s)
        done = r + 1
        now = time.perf_counter() - t0
        if not stopping:
            if aggregate.converged(tol):
                stopping, reason = True, "tol"
            elif time_limit and now >= time_limit:
                stopping, reason = True, "time_limit"
        if now - last_log >= log_interval or done == 1:
            last_log = now
            log(now)
        progress.show(now, done, aggregate.updates, aggregate.objective())

    for w in range(W):
        if pending[w]:
            tp.send(w, ("step", None, pending[w], None))
        tp.send(w, ("collect",))
    collected = [tp.recv(w)[1] for w in range(W)]
    wall = time.perf_counter() - t0
    model = aggregate.finish(collected)
    # the last row is the final model's, as the summary (finish may score it exactly)
    if trace and trace[-1]["round"] == done:
        trace.pop()
    log(wall)
    progress.show(wall, done, aggregate.updates, aggregate.objective(), final=True)
    return Result(app=app, ranks=tp.size if tp.is_mpi else 1, workers=W,
                  staleness=staleness, rounds=done, updates=int(aggregate.updates),
                  wall_s=wall, objective=float(aggregate.objective()), stop_reason=reason,
                  model=model, extra=dict(aggregate.summary()), trace=trace,
                  versions=np.array(versions, dtype=np.int64).reshape(-1, 3))


def _serve(tp, update_cls):
    host = _WorkerHost(update_cls)
    while True:
        msg = tp.recv_task()
        reply = host.handle(msg)
        if reply is not None:
            tp.reply(reply)
        if msg[0] == "collect":
            return


def run(setup, update, *, workers=None, staleness=0, max_rounds=100, time_limit=None,
        tol=0.0, out=None, quiet=False, app="custom", log_interval=0.1, mpi=None):
    """Run an app, in this process or, when launched by ``mpiexec -n N`` (N > 1), on N
    ranks: rank 0 schedules and aggregates, ranks 1..N-1 are the workers.

    ``setup(n_workers)`` runs on the scheduler rank only and returns
    ``(schedule, aggregate, shards)`` with one shard per worker; ``update`` is the
    :class:`Update` subclass the workers instantiate from their shard. ``workers`` is
    the number of simulated workers in one process (ignored under MPI).

    ``mpi``: None detects ``mpiexec`` from its environment; False forces one process.

    Returns a :class:`Result` on the scheduler rank and None on the workers. Under MPI
    an exception on any rank prints that rank's traceback (a :class:`DataError`: one
    line) and aborts the whole job.
    """
    if staleness < 0 or int(staleness) != staleness:
        raise DataError(f"staleness must be an integer >= 0, got {staleness}")
    if max_rounds < 0:
        raise DataError(f"max_rounds must be >= 0, got {max_rounds}")
    if time_limit is not None and time_limit <= 0:
        raise DataError(f"time_limit must be > 0 seconds, got {time_limit}")
    if tol < 0:
        raise DataError(f"tol must be >= 0, got {tol}")
    kw = dict(staleness=int(staleness), max_rounds=int(max_rounds), time_limit=time_limit,
              tol=tol, app=app, quiet=quiet, log_interval=log_interval)

    if mpi is None:
        mpi = _transport.mpi_world_size() > 1
    _keep_freed_memory()
    # One worker is one core: BLAS calls inside kernels (a Gram matrix, a solve) must not
    # start threads of their own, which under mpiexec would oversubscribe the cores.
    with threadpool_limits(limits=1):
        return _run(setup, update, workers, mpi, out, kw)


def _keep_freed_memory():
    """Every round allocates and frees arrays of the same few sizes (messages, gather
    buffers). glibc unmaps each freed block of a few MiB, or trims it off the heap, and
    the next round faults its pages in again, 4 KiB at a time: a fixed cost per round
    that more workers do not share (measured: the MF scheduler spent 90% of its message
    packing in page faults). Keep blocks below 64 MiB in the heap instead; larger ones
    (the data) are still returned to the system when freed. glibc only; elsewhere a no-op."""
    try:
        import ctypes
        libc = ctypes.CDLL(None)
        libc.mallopt(-3, 64 << 20)  # M_MMAP_THRESHOLD
        libc.mallopt(-1, 256 << 20)  # M_TRIM_THRESHOLD
    except (OSError, AttributeError):
        pass


def _run(setup, update, workers, mpi, out, kw):
    if mpi:
        tp = _transport.MPITransport()
        try:
            if tp.rank == 0:
                result = _drive(tp, setup, **kw)
                if out:
                    result.write(out)
            else:
                _serve(tp, update)
                result = None
            tp.close()
            return result
        except BaseException as exc:  # any rank: end the whole job, never hang
            data_error = isinstance(exc, DataError)
            tp.abort(exc, 2 if data_error else 1, brief=data_error)

    workers = 1 if workers is None else workers
    if int(workers) != workers or workers < 1:
        raise DataError(f"workers must be an integer >= 1, got {workers}")
    tp = _transport.InProcess(int(workers))
    tp.handlers = [_WorkerHost(update).handle for _ in range(tp.n_workers)]
    result = _drive(tp, setup, **kw)
    if out:
        result.write(out)
    return result
