"""The STRADS loop: schedule -> update on every worker -> aggregate, with bounded staleness.

The engine knows nothing of any app. An app gives three objects:

* a :class:`Schedule` (on the scheduler rank) that picks the next block of work,
* an :class:`Update` class (one instance per worker, holding that worker's shard) that
  turns a block into a partial result, and applies the aggregated changes it is sent,
* an :class:`Aggregate` (on the scheduler rank) that combines the partial results of a
  round, updates what scheduling needs and says what the workers must apply.

Control plane and data plane. The scheduler sends each round's task to every worker
and gets their partial results back, combined along a tree of the workers (one message
each way per round on rank 0, whatever the number of workers). Bulky exchanges (factor
columns, vocabulary slices, partial sums) go among the workers themselves, through
their collectives (``Update.peers``): a worker may keep part of the model, exchange it
with its peers inside ``update`` and return nothing (None) to the scheduler, or a
partial that its peers have already summed.

Consistency. With ``staleness=s`` up to ``s + 1`` rounds are in flight: the schedule of
round r is made, and the workers compute round r, after rounds ``0 .. r-s-1`` have been
aggregated and applied. Workers count the syncs they applied (their *version*) and
return it with every result; the engine records ``(round, newest version, oldest
version)`` over the workers and raises if ``round - version`` ever exceeds ``s``. Results are aggregated strictly in round
order, so a run is deterministic for a given seed, staleness and worker count, whatever
the transport.

Robustness. ``checkpoint_every`` writes every rank's state at a round boundary
(:mod:`strads.checkpoint`) and ``resume`` continues from it; SIGINT and SIGTERM stop the
run at the end of the current round with outputs written as for any stop; outputs
replace the previous ones in one step; a diverging objective stops the run.
"""
import csv
import json
import math
import os
import shutil
import signal
import sys
import tempfile
import threading
import time
import zlib
from collections import deque
from dataclasses import dataclass, field

import numpy as np

from threadpoolctl import threadpool_limits

from . import checkpoint as _ckpt
from . import _wait
from . import transport as _transport
from .errors import DataError, StalenessError

#: the objective "diverged" once it is this many times its scale away from its best
DIVERGE_FACTOR = 1e6


# --------------------------------------------------------------------------------------
# The three pieces of an app
# --------------------------------------------------------------------------------------
class _Piece:
    """What the three pieces share: their state, for checkpoints, and their clock."""

    #: attributes that setup() rebuilds identically (data), left out of checkpoints
    checkpoint_skip = ()

    #: The time (seconds since the epoch) a schedule's or an aggregate's decisions read.
    #: In a leaderless run the engine replaces it by the ranks' agreed time (the latest
    #: of their clocks at the last round's results), so that every rank decides alike.
    clock = staticmethod(time.time)

    def state(self):
        """What a checkpoint keeps: by default every attribute that can change (arrays,
        numbers, strings, random generators and containers of them), but read-only
        arrays, the other pieces and the names in ``checkpoint_skip``."""
        return _ckpt.picked(self)

    def load_state(self, state):
        """Restore what :meth:`state` returned, on an object fresh from setup()."""
        self.__dict__.update(state)


@dataclass(frozen=True)
class Context:
    """What ``setup(ctx)`` is told of the run: the number of workers, the staleness (a
    schedule may keep dependent blocks that far apart), the run's seed, and the number
    of scheduler ranks (``--schedulers``: setup then returns one schedule per scheduler
    rank, see :meth:`Schedule.combine`)."""
    n_workers: int
    staleness: int = 0
    seed: int = 0
    n_schedulers: int = 1


class Schedule(_Piece):
    """Chooses what the workers do next. Lives on the scheduler rank; reads the
    aggregate's state, never writes it. ``total_rounds``, if the schedule knows how many
    rounds it will make, gives the progress line its ETA."""

    total_rounds = None

    def begin(self, reports):
        """Called once before the first round (and before a resume restores the state)
        with every worker's :meth:`Update.report`, in worker order."""

    def schedule(self, round):
        """Return the task for ``round``: one message for every worker, or a list with
        one message per worker, or None when there is nothing left to do."""
        raise NotImplementedError

    # -- several scheduler ranks (``--schedulers K``): optional. setup() returns K
    # schedules, each scheduling its part (a range of coordinates); they run on ranks
    # 0..K-1 at the same time and read no aggregate, only what it tells them.
    def feedback(self, news):
        """With several schedulers: what the aggregate told this schedule after a round
        (:meth:`Aggregate.feedback`), in round order, before its next ``schedule``."""

    @staticmethod
    def combine(parts):
        """With several schedulers: one round's task from their ``schedule(round)``
        answers, in scheduler order (None: the run ends)."""
        raise NotImplementedError


class Update(_Piece):
    """One worker's share of the data and the kernel that works on it.

    Constructed on the worker from its shard (whatever the app's setup put in it; arrays
    arrive as buffers; or a description, a file's byte range, that the worker reads
    itself). ``apply`` receives each aggregated sync in order, ``update`` computes the
    partial result of one task, ``collect`` returns the worker's part of the final model.
    ``self.peers`` (set before ``__init__`` runs) are the workers' collectives
    (:class:`strads.transport.Peers`: ``rank``, ``size``, ``allgather``, ``allreduce``,
    ``bcast``, ``shift``), which every worker calls in the same order.
    """

    peers = _transport.Peers()

    def __init__(self, shard):
        self.shard = shard

    def report(self):
        """Small facts for the scheduler once this worker is set up (its rows' count, a
        dimension it read): the schedule's and the aggregate's ``begin`` get them."""
        return None

    # -- rebalancing (``--rebalance``): optional; an app that moves rows defines all three
    #: the number of rows (samples, documents) this worker holds, or None: cannot move
    rows = None

    def give(self, end, count):
        """Remove this worker's first (``end="head"``) or last (``"tail"``) ``count`` rows
        and return them (any picklable structure: arrays travel as buffers)."""
        raise NotImplementedError

    def take(self, end, rows):
        """Add rows another worker gave, before its first row (``"head"``) or after its
        last (``"tail"``): the rows stay in one contiguous order over the workers."""
        raise NotImplementedError

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


class Aggregate(_Piece):
    """Combines the partial results of a round. Lives on the scheduler rank."""

    def begin(self, reports):
        """As :meth:`Schedule.begin`; called first."""

    #: number of parameter updates so far (the app increments it)
    updates = 0
    #: the objective is maximised (a log-likelihood): divergence is a fall, not a rise
    maximize = False

    def aggregate(self, round, task, partials):
        """Combine the per-worker ``partials`` (a list, in worker order; None for a worker
        that returned None) of ``round``. Return the sync every worker must apply (one
        message, a list of one per worker, or None)."""
        raise NotImplementedError

    def objective(self):
        """The objective of the current model (for logs, traces and ``tol``)."""
        return float("nan")

    def feedback(self, round, task, sync):
        """With several schedulers: what they must know of aggregated ``round`` (one
        message for all of them, a list of one per scheduler, or None)."""
        return None

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
    """Turns engine messages into calls on the app's Update object (worker ``w``)."""

    def __init__(self, update_cls, signals, w, peers, traffic=None, rank=None):
        self.update_cls = update_cls
        self.signals = signals
        self.w, self.peers = w, peers
        self.traffic = traffic  # this rank's counters, under MPI
        self.update = None
        self.version = 0
        self.digest = None  # of the shard, when checkpoints are on: checked on resume
        self._writer = None  # the thread writing this worker's checkpoint part
        self._written = []  # (worker, tag, manifest entry) of parts on disk, not yet told
        self.busy = 0.0  # seconds of update() work since the last rebalance
        # STRADS_FAULT=slow:RANK:FACTOR: FACTOR on that MPI rank (one process: worker)
        self.slow = _slow_fault(w if rank is None else rank)

    def handle(self, msg):
        kind = msg[0]
        if kind == "warmup":
            self.update_cls.warmup()
            return ("warm",)
        if kind == "init":
            _, shard, warm, digest, rebalance = msg
            if warm:
                self.update_cls.warmup()
            if digest:
                self.digest = _ckpt.digest(shard)
            update = self.update_cls.__new__(self.update_cls)
            update.peers = self.peers  # before __init__: it may read its part with them
            update.__init__(shard)
            self.update = update
            if rebalance and update.rows is None:
                raise DataError(f"--rebalance: {type(update).__name__} cannot hand rows "
                                "over (it defines no rows, give and take)")
            if digest:  # refuse a state that cannot be checkpointed now, not mid-run
                _ckpt.encode(update.state(), type(update).__name__)
            return ("ready", update.report())
        if kind == "step":
            _, round, syncs, task, each = msg
            if each:  # one part per worker
                syncs, task = syncs[self.w], task[self.w]
            for sync in syncs:
                if sync is not None:
                    self.update.apply(sync)
                self.version += 1
            if round is None:  # syncs only
                return None
            t0, waited = time.perf_counter(), self.peers.waited
            partial = self.update.update(task) if task is not None else None
            # its own work: less the time it waited for the others in their collectives
            dt = time.perf_counter() - t0 - (self.peers.waited - waited)
            if self.slow != 1:  # FACTOR times as long per unit of work
                time.sleep((self.slow - 1) * dt)
                dt *= self.slow
            self.busy += dt
            return (round, self.version, self.version, self.signals.signum,
                    [] if partial is None else [(self.w, partial)], self._durable())
        if kind == "checkpoint":
            # a copy of the state now; written to disk while the run goes on, and told
            # to the scheduler with a later result, which then writes the manifest
            _, folder, tag = msg
            self._join_writer()
            host = {"version": self.version, "digest": self.digest}
            pieces = _ckpt.snapshot({
                "update": _ckpt.encode(self.update.state(), type(self.update).__name__),
                "host": _ckpt.encode(host, "worker")})
            self._writer = _Writer(folder, f"{tag}-worker{self.w}.npz", pieces,
                                   (self.w, tag))
            return None
        if kind == "restore":
            _, folder, entries = msg
            w = self.w
            parts = _ckpt.read_part(folder, entries[w + 1])
            host = _ckpt.decode(*parts["host"])
            if host["digest"] != self.digest:
                raise _ckpt.CheckpointError(
                    f"{folder}: worker {w}'s data differs from the checkpointed run's "
                    "(was the input changed?)")
            self.update.load_state(_ckpt.decode(*parts["update"]))
            self.version = host["version"]
            return ("restored",)
        if kind == "timing":
            busy, self.busy = self.busy, 0.0
            return ("timing", busy, self.update.rows)
        if kind == "rebalance":
            self._rebalance(*msg[1:])
            return ("rebalanced", self.update.rows)
        if kind == "collect":
            self._join_writer()
            return ("collected", self.update.collect(),
                    None if self.traffic is None else _rank_usage(self.traffic),
                    self._durable())
        raise RuntimeError(f"unknown engine message {kind!r}")

    def _rebalance(self, old, new):
        """Move rows to and from the neighbours so that worker w holds ``new[w]`` rows:
        cut k moves from sum(old[:k]) to sum(new[:k]), never past a neighbour's range."""
        w, up, peers = self.w, self.update, self.peers
        c_old, c_new = np.cumsum([0] + list(old)), np.cumsum([0] + list(new))
        left = int(c_new[w] - c_old[w])  # > 0: give my first rows to w - 1
        right = int(c_new[w + 1] - c_old[w + 1])  # > 0: take w + 1's first rows
        to_right = up.give("tail", -right) if right < 0 else None
        to_left = up.give("head", left) if left > 0 else None
        from_left = peers.shift(to_right, 1)  # what w - 1 gives away at its tail
        from_right = peers.shift(to_left, -1)  # what w + 1 gives away at its head
        if left < 0:
            up.take("head", from_left)
        if right > 0:
            up.take("tail", from_right)
        if up.rows != new[w]:
            raise RuntimeError(f"worker {w} holds {up.rows} rows after rebalancing, "
                               f"expected {new[w]}")

    def _join_writer(self):
        if self._writer is not None:
            self._written.append(self._writer.join())
            self._writer = None

    def _durable(self):
        """The parts written since the last result (a writer that failed raises here)."""
        if self._writer is not None and not self._writer.is_alive():
            self._join_writer()
        done, self._written = self._written, []
        return done


class _SchedulerHost:
    """Turns engine messages into calls on one of the schedules of ``--schedulers K``."""

    schedule = None

    def handle(self, msg):
        kind = msg[0]
        if kind == "init":
            _, self.schedule, reports = msg
            self.schedule.begin(reports)
            return ("ready",)
        if kind == "schedule":
            _, round, news = msg
            for n in news:
                self.schedule.feedback(n)
            return ("part", self.schedule.schedule(round))
        raise RuntimeError(f"unknown engine message {kind!r}")


class _Split(Schedule):
    """The driver's schedule with ``--schedulers K``: schedule 0 runs here, schedule k
    on rank k (in one process: here too, each with copies of what it is sent, as under
    MPI). A round asks every one for its part, at the same time, with the aggregate's
    news since its last part, and combines their answers."""

    def __init__(self, parts, tp):
        self.parts, self.tp, self.K = list(parts), tp, len(parts)
        self.combine = type(parts[0]).combine
        self.first = parts[0]
        self.hosts = [_SchedulerHost() for _ in range(self.K)]
        self.news = [[] for _ in range(self.K)]
        self.replies = {}

    def _send(self, k, msg):
        if k and self.tp.is_mpi:
            self.tp.to_scheduler(k, msg)
        else:  # what it would have received: its own copy (schedule 0's too)
            self.replies[k] = self.hosts[k].handle(_transport._copy(msg))

    def _recv(self, k):
        if k and self.tp.is_mpi:
            return self.tp.from_scheduler(k)
        reply = self.replies.pop(k)
        return _transport._copy(reply) if k else reply

    def begin(self, reports):
        for k in range(self.K - 1, -1, -1):  # the others first: they start at once
            self._send(k, ("init", self.parts[k], reports))
            self.parts[k] = None  # scheduler k holds it now
        for k in range(self.K):
            self._recv(k)

    @property
    def total_rounds(self):
        return self.first.total_rounds

    def hear(self, news):
        for k, n in enumerate(_per_worker(news, self.K)):
            if n is not None:
                self.news[k].append(n)

    def schedule(self, round):
        for k in range(self.K - 1, -1, -1):
            self._send(k, ("schedule", round, self.news[k]))
            self.news[k] = []
        return self.combine([self._recv(k)[1] for k in range(self.K)])

    def close(self):
        """The scheduler ranks' traffic, once they have stopped (MPI)."""
        if not self.tp.is_mpi:
            return []
        for k in range(1, self.K):
            self.tp.to_scheduler(k, ("stop",))
        return [self.tp.from_scheduler(k) for k in range(1, self.K)]


def _schedule_serve(tp):
    """A scheduler rank's loop (``--schedulers K``, ranks 1..K-1)."""
    host = _SchedulerHost()
    while True:
        msg = tp.recv_scheduling()
        if msg[0] == "stop":
            tp.reply_scheduling(_rank_usage(tp.traffic))
            return
        tp.reply_scheduling(host.handle(msg))


class _Writer(threading.Thread):
    """Writes one checkpoint part in the background; ``join()`` returns (who, tag,
    manifest entry) or raises the writer's error."""

    def __init__(self, folder, name, pieces, who):
        super().__init__(name="strads-checkpoint", daemon=True)
        self.args_, self.who, self.entry, self.error = (folder, name, pieces), who, None, None
        self.start()

    def run(self):
        try:
            self.entry = _ckpt.write_part(*self.args_)
        except BaseException as exc:  # told on the next result: the run then ends
            self.error = exc
        self.args_ = None  # the snapshot's memory goes as soon as it is on disk

    def join(self, timeout=None):
        super().join(timeout)
        if self.error is not None:
            raise self.error
        return (*self.who, self.entry)


def _merge(parts):
    """Combine workers' results of one round (each: round, newest and oldest version,
    signal, [(worker, partial)], [checkpoint parts written]), in any grouping: along the
    tree or all at once."""
    return (parts[0][0], max(p[1] for p in parts), min(p[2] for p in parts),
            max(p[3] for p in parts), sorted((x for p in parts for x in p[4]),
                                             key=lambda x: x[0]),
            [x for p in parts for x in p[5]])


def _rank_usage(traffic):
    """A rank's traffic so far and its peak resident memory."""
    import resource
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KiB on Linux, B on macOS
    return {**traffic, "peak_rss_mb": round(rss / (2**20 if sys.platform == "darwin"
                                                   else 2**10), 1)}


class _Signals:
    """SIGINT and SIGTERM set ``signum``; the loop stops at the end of the round. A
    second one raises KeyboardInterrupt (abort now). Only in the main thread."""

    def __init__(self):
        self.signum = 0
        self._old = {}

    def __enter__(self):
        if threading.current_thread() is threading.main_thread():
            for sig in (signal.SIGINT, signal.SIGTERM):
                self._old[sig] = signal.signal(sig, self._handle)
        return self

    def _handle(self, signum, frame):
        if self.signum:
            raise KeyboardInterrupt
        self.signum = signum

    def __exit__(self, *exc):
        for sig, old in self._old.items():
            signal.signal(sig, old)


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
    signal: int = 0  # the signal that stopped the run (stop_reason "interrupted")
    traffic: list = field(default_factory=list)  # per rank: bytes, messages, peak RSS
    rank: int = 0  # leaderless: the rank that holds this copy (rank 0 prints and writes)

    def summary(self):
        s = {k: getattr(self, k) for k in
             ("app", "ranks", "workers", "staleness", "rounds", "updates", "wall_s",
              "objective", "stop_reason")}
        s["updates_per_s"] = self.updates / self.wall_s if self.wall_s > 0 else 0.0
        s["max_staleness_seen"] = int((self.versions[:, 0] - self.versions[:, 2]).max()
                                      if len(self.versions) else 0)
        s["traffic"] = self.traffic
        s.update(self.extra)
        return s

    def write(self, out):
        """Write summary.json, trace.csv and model.npz into ``out``, all or nothing:
        into a new folder beside it, which then takes the place of ``out`` in one step;
        whatever else ``out`` held (a checkpoint, your files) is moved into it."""
        out = os.path.abspath(out)
        parent = os.path.dirname(out)
        os.makedirs(parent, exist_ok=True)
        tmp = tempfile.mkdtemp(prefix=f".{os.path.basename(out)}.tmp-", dir=parent)
        try:
            umask = os.umask(0)
            os.umask(umask)
            os.chmod(tmp, 0o777 & ~umask)  # as os.makedirs would have made it
            with _durable(os.path.join(tmp, "summary.json"), "w") as f:
                json.dump(_jsonable(self.summary()), f, indent=2)
                f.write("\n")
            cols = []
            for row in self.trace:
                cols += [k for k in row if k not in cols]
            with _durable(os.path.join(tmp, "trace.csv"), "w", newline="") as f:
                w = csv.DictWriter(f, fieldnames=cols)
                w.writeheader()
                w.writerows(self.trace)
            with _durable(os.path.join(tmp, "model.npz"), "wb") as f:
                np.savez(f, **self.model)
            _ckpt._fsync_dir(tmp)
            if not os.path.lexists(out):
                os.rename(tmp, out)
            else:
                _exchange(tmp, out)  # out: the new results; tmp: the old folder
                for name in os.listdir(tmp):
                    if name not in OUTPUTS:
                        os.rename(os.path.join(tmp, name), os.path.join(out, name))
            _ckpt._fsync_dir(parent)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)


OUTPUTS = ("summary.json", "trace.csv", "model.npz")


class _durable:
    """open() for writing that flushes to disk before closing."""

    def __init__(self, path, mode, **kw):
        self.f = open(path, mode, **kw)

    def __enter__(self):
        return self.f

    def __exit__(self, *exc):
        try:
            if exc[0] is None:
                self.f.flush()
                os.fsync(self.f.fileno())
        finally:
            self.f.close()


def _exchange(a, b):
    """Swap two folders in one step (Linux renameat2 RENAME_EXCHANGE); elsewhere, two
    renames."""
    try:
        import ctypes
        libc = ctypes.CDLL(None, use_errno=True)
        if libc.renameat2(-100, os.fsencode(a), -100, os.fsencode(b), 2) == 0:
            return
    except (OSError, AttributeError):
        pass
    old = a + ".old"
    os.rename(b, old)
    os.rename(a, b)
    os.rename(old, a)


def check_out(out):
    """Refuse an output folder that cannot be written, before any work (one line)."""
    if out is None:
        return
    if not isinstance(out, (str, os.PathLike)) or not os.fspath(out):
        raise DataError(f"--out {out!r}: not a folder name")
    path = os.path.abspath(out)
    if os.path.lexists(path) and not os.path.isdir(path):
        raise DataError(f"--out {out}: exists and is not a folder")
    probe = path
    while not os.path.lexists(probe):
        probe = os.path.dirname(probe)
    if not os.path.isdir(probe):
        raise DataError(f"--out {out}: {probe} is a file, not a folder")
    need = [p for p in (path, os.path.dirname(path)) if os.path.isdir(p)] or [probe]
    for p in need:  # really try: permission bits do not stop root, a read-only mount does
        try:
            os.rmdir(tempfile.mkdtemp(prefix=".strads-probe-", dir=p))
        except OSError as e:
            raise DataError(f"--out {out}: cannot write in {p}: {e.strerror}") from None


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
        if self.max_rounds and self.max_rounds < sys.maxsize and round > 0:
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


#: flags a resumed run may change: they stop or show the run, not what it computes
RESUME_MAY_DIFFER = frozenset({"--max-rounds", "--time-limit", "--tol", "--checkpoint-every",
                               "--quiet", "--log-interval", "--resume", "--stall-warn",
                               "--workers", "--out"})


class _Driver:
    """The scheduler rank's loop, in three steps: :meth:`init` (setup, the workers'
    shards, a checkpoint to resume from), :meth:`pipeline` (rounds until a stopping
    rule) and :meth:`shutdown` (the workers' parts of the model, the result)."""

    def __init__(self, tp, setup, *, staleness, max_rounds, time_limit, tol, app, quiet,
                 log_interval, out, checkpoint_every, resume, flags, stall_warn, signals,
                 seed, rebalance=False, rebalance_every=5.0, schedulers=1):
        self.tp, self.setup, self.W, self.seed = tp, setup, tp.n_workers, seed
        self.K = schedulers
        # leaderless: every rank runs this loop on agreed state (transport.Replicated)
        self.rep = getattr(tp, "replicated", False)
        self.writes = not self.rep or tp.rank == 0  # the scheduler's part, the manifest
        self.digests, self.digest, self.digest_checks = {}, 0, 0
        self.fault = _fault(tp) if self.rep else None
        self.rebal, self.rebal_every = rebalance, rebalance_every
        self.rebalances, self.rows = 0, None
        if self.rep:
            tp.flags = self._flags
        self.staleness, self.max_rounds, self.time_limit, self.tol = (
            staleness, max_rounds, time_limit, tol)
        self.app, self.quiet, self.log_interval = app, quiet, log_interval
        self.every, self.resume, self.flags = checkpoint_every, resume, flags
        self.stall_warn, self.signals = stall_warn, signals
        self.folder = os.path.join(out, "checkpoint") if out else None
        self.trace, self.versions = [], []
        self.pending = [[] for _ in range(self.W)]  # syncs not yet sent, per worker
        self.inflight = deque()
        self.r_next = self.done = 0
        self.stopping, self.reason = False, "max_rounds"
        self.elapsed0 = 0.0  # wall time of the run before it was resumed
        self.last_log = -math.inf
        self.first = self.best = None  # the objective's first and best finite values
        self.signum = 0
        self.ckpt_round = None  # the round of the last checkpoint begun
        self.ckpt_wait = None  # a checkpoint begun whose workers' parts are not all written

    # -- init ------------------------------------------------------------------------
    def init(self):
        manifest = None
        if self.resume:
            manifest = _ckpt.read_manifest(self.folder)
            self._check_resume(manifest)
            if self.every is None:
                self.every = manifest["checkpoint_every"]
        ctx = Context(self.W, self.staleness, self.seed, self.K)
        self.schedule, self.aggregate, shards = self.setup(ctx)
        if len(shards) != self.W:
            raise ValueError(f"setup returned {len(shards)} shards for {self.W} workers")
        if self.K > 1:
            parts = self.schedule
            if isinstance(parts, Schedule):
                raise DataError(f"--schedulers {self.K}: this app's schedule does not split "
                                f"over scheduler ranks ({type(parts).__name__}); use "
                                "--schedulers 1")
            if len(parts) != self.K:
                raise ValueError(f"setup returned {len(parts)} schedules for {self.K} "
                                 "schedulers")
            self.schedule = _Split(parts, self.tp)
        digest = bool(self.every or self.resume)
        # The first worker compiles every kernel alone; the others then load them from
        # its on-disk cache (in one process, the kernels are then there already). Then
        # every worker gets its shard before any is waited for: setting up, the workers
        # may meet in their collectives.
        mpi = self.tp.is_mpi
        if mpi and not self.rep:  # (leaderless: every rank warms its own worker up)
            self.tp.send(0, ("warmup",))
            self.tp.recv(0)
        for w in range(self.W):
            self.tp.send(w, ("init", shards[w], mpi or w == 0, digest, self.rebal))
            shards[w] = None  # the worker holds it now: the scheduler keeps no copy
        shards = None
        reports = [self.tp.recv(w)[1] for w in range(self.W)]
        self.aggregate.begin(reports)
        self.schedule.begin(reports)
        if manifest is not None:
            self._restore(manifest)
        elif self.every:  # refuse a state that cannot be checkpointed now, not mid-run
            for piece in (self.schedule, self.aggregate):
                _ckpt.encode(piece.state(), type(piece).__name__)
        self.t0 = time.perf_counter() - self.elapsed0
        if self.rep:  # the ranks' agreed clock: the latest of their clocks
            self.agreed_now = max(self.tp.allgather(time.time()))
            self.wall0 = self.agreed_now - self.elapsed0
            self.schedule.clock = self.aggregate.clock = lambda: self.agreed_now
        self.last_ckpt = self.last_rebal = self._now()
        total = self.schedule.total_rounds  # after the staleness: it may depend on it
        self.progress = _Progress(self.app, self.quiet,
                                  min(self.max_rounds, total or self.max_rounds),
                                  self.time_limit)

    def _identity(self):
        return {"app": self.app, "workers": self.W, "staleness": self.staleness}

    def _check_resume(self, m):
        was, now = {**m["flags"], **m["engine"]}, {**(self.flags or {}), **self._identity()}
        diff = [f"{k} {now.get(k)!r} (was {was.get(k)!r})" for k in sorted(set(was) | set(now))
                if k not in RESUME_MAY_DIFFER and was.get(k) != now.get(k)]
        if diff:
            raise _ckpt.CheckpointError(f"{self.folder}: cannot resume, these differ from "
                                        f"the checkpointed run: {', '.join(diff)}")

    def _restore(self, m):
        parts = _ckpt.read_part(self.folder, m["parts"][0])
        self.schedule.load_state(_ckpt.decode(*parts["schedule"]))
        self.aggregate.load_state(_ckpt.decode(*parts["aggregate"]))
        loop = _ckpt.decode(*parts["engine"])
        self.r_next = self.done = loop["done"]
        self.trace = json.loads(loop["trace"])
        self.versions = [tuple(v) for v in loop["versions"].tolist()]
        self.elapsed0 = loop["elapsed"]
        self.first, self.best = loop["first"], loop["best"]
        self.last_log = loop["last_log"]
        self.tp.broadcast(("restore", self.folder, m["parts"]))
        for w in range(self.W):
            self.tp.recv(w)

    # -- pipeline --------------------------------------------------------------------
    def pipeline(self):
        draining = False  # a checkpoint is due: let the rounds in flight finish first
        while True:
            if not draining:
                self._dispatch()
            if not self.inflight:
                break
            self._collect_round()
            if not self.stopping and ((self.every and self._checkpoint_due())
                                      or (self.rebal and self._rebalance_due())):
                draining = True
            if draining and not self.inflight:
                if self.every and self._checkpoint_due():
                    self.checkpoint()
                if self.rebal and self._rebalance_due():
                    self.rebalance()
                draining = False

    def _now(self):
        """Seconds of the run so far: in a leaderless run, by the agreed clock."""
        if self.rep:
            return self.agreed_now - self.wall0
        return time.perf_counter() - self.t0

    def _checkpoint_due(self):
        return self.ckpt_wait is None and self._now() - self.last_ckpt >= self.every

    def _rebalance_due(self):
        return self._now() - self.last_rebal >= self.rebal_every

    def rebalance(self):
        """At a round boundary: every worker's seconds of work since the last time, and
        rows moved from the slow to the fast (:func:`_plan`; a rule on the agreed
        measurements, so every rank of a leaderless run makes the same plan)."""
        if any(self.pending):
            self._step(None, None)
        self.tp.broadcast(("timing",))
        got = [self.tp.recv(w) for w in range(self.W)]
        rows, busy = [g[2] for g in got], [g[1] for g in got]
        new = _plan(rows, busy)
        self.rows = rows
        if new is not None:
            self.tp.broadcast(("rebalance", rows, new))
            self.rows = [self.tp.recv(w)[1] for w in range(self.W)]
            self.rebalances += 1
        self.last_rebal = self._now()

    def _flags(self):
        """Leaderless: this rank's signal and clock now, and the digest of what it
        scheduled for the round being gathered (shared with its results; the first two
        agreed as the largest over the ranks)."""
        return (self.signals.signum, time.time(), self.digests.pop(self.inflight[0][0]))

    def _dispatch(self):
        while (not self.stopping and self.r_next < self.max_rounds
               and len(self.inflight) <= self.staleness):
            if self.signals.signum and not self.rep:  # (leaderless: agreed, below)
                self._stop("interrupted")
                self.signum = self.signals.signum
                break
            task = self.schedule.schedule(self.r_next)
            if task is None:
                self._stop("schedule_done")
                break
            if self.rep:
                if self.fault == self.r_next:
                    task = _perturbed(task)
                self.digests[self.r_next] = _ckpt.digest(task)
            self._step(self.r_next, task)
            self.inflight.append((self.r_next, task))
            self.r_next += 1

    def _step(self, round, task):
        """Send every worker the syncs it has not applied yet and ``task`` (one message
        for all of them when they are the same)."""
        tasks, pend = _per_worker(task, self.W), self.pending
        if all(t is tasks[0] and _same(p, pend[0]) for t, p in zip(tasks, pend)):
            self.tp.broadcast(("step", round, pend[0], tasks[0], False))
        else:
            self.tp.broadcast(("step", round, pend, tasks, True))
        self.pending = [[] for _ in range(self.W)]

    def _stop(self, reason):
        if not self.stopping:
            self.stopping, self.reason = True, reason

    def _collect_round(self):
        r, task = self.inflight[0]
        rr, newest, oldest, signum, got, written = self.tp.gather(_merge, self._watch(r))
        self.inflight.popleft()
        if self.rep:
            self._check_digests(r)
            self.agreed_now = max(self.agreed_now, self.tp.agreed[1])
        self._written(written)
        if rr != r:
            raise RuntimeError(f"the workers answered round {rr}, expected {r}")
        if r - oldest > self.staleness:
            raise StalenessError(f"round {r} was computed by a worker at version "
                                 f"{oldest}: {r - oldest} rounds stale > {self.staleness}")
        self.versions.append((r, newest, oldest))
        partials = [None] * self.W
        for w, partial in got:
            partials[w] = partial
        sync = self.aggregate.aggregate(r, task, partials)
        if self.K > 1:
            self.schedule.hear(self.aggregate.feedback(r, task, sync))
        for w, s in enumerate(_per_worker(sync, self.W)):
            self.pending[w].append(s)
        self.done = r + 1
        now = self._now()
        objective = self.aggregate.objective()
        signum = signum if self.rep else self.signals.signum or signum
        if signum:
            self._stop("interrupted")
            self.signum = self.signum or signum
        elif self._diverged(objective):
            self._stop("diverged")
        elif not self.stopping:
            if self.aggregate.converged(self.tol):
                self._stop("tol")
            elif self.time_limit and now >= self.time_limit:
                self._stop("time_limit")
        if now - self.last_log >= self.log_interval or self.done == 1:
            self.last_log = now
            self._log(now)
        self.progress.show(now, self.done, self.aggregate.updates, objective)

    def _check_digests(self, r):
        """Leaderless: every rank scheduled the same round r, or the job ends here."""
        rows = self.tp.allgather_flags
        digests = [f[2] for f in rows]
        if len(set(digests)) > 1:
            ref = max(set(digests), key=digests.count)  # the most ranks' (rank 0's on a tie)
            if digests.count(ref) == digests.count(digests[0]):
                ref = digests[0]
            odd = [k for k, d in enumerate(digests) if d != ref]
            raise ScheduleDivergence(
                f"the schedules diverged at round {r}: the ranks scheduled different "
                f"work: rank(s) {', '.join(map(str, odd))} differ from rank(s) "
                f"{', '.join(str(k) for k, d in enumerate(digests) if d == ref)} "
                f"(schedule digests {', '.join(f'{d:08x}' for d in digests)})")
        self.digest = zlib.crc32(digests[0].to_bytes(4, "little"), self.digest)
        self.digest_checks += 1

    def _watch(self, r):
        if not self.stall_warn or not self.tp.is_mpi:
            return None
        return _stall_watch(self.app, self.stall_warn, r, 0, f"the workers (rank {self.K} and "
                            "those it waits for)")

    def _diverged(self, objective):
        """NaN or infinite after a finite value, or further from the best value, in the
        worse direction, than DIVERGE_FACTOR times the objective's scale."""
        if not math.isfinite(objective):
            return self.first is not None
        worse = -objective if self.aggregate.maximize else objective
        if self.first is None:
            self.first = self.best = worse
        self.best = min(self.best, worse)
        scale = max(abs(self.first), abs(self.best), 1e-300)
        return worse - self.best > DIVERGE_FACTOR * scale

    def _log(self, now):
        agg = self.aggregate
        row = {"round": self.done, "wall_s": round(now, 6), "updates": agg.updates,
               "objective": agg.objective()}
        row.update(agg.trace())
        self.trace.append(row)

    # -- checkpoints -----------------------------------------------------------------
    def checkpoint(self):
        """Every rank's state at this round boundary (no round in flight). The pending
        syncs are applied first: the workers would apply them before the next task. The
        workers copy their state and write it while the run goes on; the manifest, which
        makes the checkpoint the one to resume from, follows when every part is on disk
        (:meth:`_written`), and no checkpoint begins before the last one is complete."""
        tp, tag = self.tp, f"r{self.done:012d}"
        if any(self.pending):
            self._step(None, None)
        tp.broadcast(("checkpoint", self.folder, tag))
        loop = {"done": self.done, "elapsed": self._now(),
                "trace": json.dumps([{k: v.item() if isinstance(v, np.generic) else v
                                      for k, v in row.items()} for row in self.trace]),
                "versions": np.array(self.versions, np.int64).reshape(-1, 3),
                "first": self.first, "best": self.best,
                "last_log": self.last_log}
        pieces = {
            "schedule": _ckpt.encode(self.schedule.state(), type(self.schedule).__name__),
            "aggregate": _ckpt.encode(self.aggregate.state(),
                                      type(self.aggregate).__name__),
            "engine": _ckpt.encode(loop, "engine")}
        # leaderless: every rank holds the same state; rank 0 writes it
        parts = [_ckpt.write_part(self.folder, f"{tag}-scheduler.npz", pieces)
                 if self.writes else {}]
        self.ckpt_wait = {"tag": tag, "round": self.done, "parts": parts + [None] * self.W}
        self.last_ckpt = self._now()
        self.ckpt_round = self.done

    def _written(self, written):
        """Workers' parts now on disk: the manifest once all of them are."""
        wait = self.ckpt_wait
        for w, tag, entry in written:
            if wait is None or tag != wait["tag"]:
                raise RuntimeError(f"worker {w} wrote checkpoint {tag}, none was pending")
            wait["parts"][w + 1] = entry
        if wait is not None and all(p is not None for p in wait["parts"]):
            if self.writes:
                _ckpt.write_manifest(self.folder, {
                    "round": wait["round"], "parts": wait["parts"],
                    "checkpoint_every": self.every, "flags": self.flags or {},
                    "engine": self._identity(), "time": time.time()})
            self.ckpt_wait = None

    # -- shutdown --------------------------------------------------------------------
    def shutdown(self):
        tp = self.tp
        if self.every and self.reason == "interrupted" and self.ckpt_round != self.done:
            self.checkpoint()  # where it stopped: resumed, it goes on from here
        if any(self.pending):
            self._step(None, None)
        tp.broadcast(("collect",))
        # rank 0's, then each worker rank's (under MPI; one entry in one process), up to
        # the collect request: what every rank sent, some rank received
        traffic = [] if self.rep else [_rank_usage(tp.traffic)]  # (leaderless: the workers')
        replies = [tp.recv(w) for w in range(self.W)]
        if self.K > 1:  # then the other scheduler ranks'
            traffic += self.schedule.close()
        collected = [r[1] for r in replies]
        traffic += [r[2] for r in replies if r[2] is not None]
        self._written([x for r in replies for x in r[3]])  # every part is written now
        if self.ckpt_wait is not None:
            raise RuntimeError("a checkpoint's parts were never all written")
        for rank, entry in enumerate(traffic):
            entry["rank"] = rank
        wall = time.perf_counter() - self.t0
        agg = self.aggregate
        model = agg.finish(collected)
        # the last row is the final model's, as the summary (finish may score it exactly)
        if self.trace and self.trace[-1]["round"] == self.done:
            self.trace.pop()
        self._log(wall)
        self.progress.show(wall, self.done, agg.updates, agg.objective(), final=True)
        extra = dict(agg.summary())
        if self.rebal:
            extra.update(rebalances=self.rebalances, rows_per_worker=self.rows)
        if self.rep:
            extra.update(scheduler="replicated", schedule_digest=f"{self.digest:08x}",
                         digest_checks=self.digest_checks)
        if self.K > 1:
            extra.update(schedulers=self.K)
        return Result(app=self.app, ranks=tp.size if tp.is_mpi else 1, workers=self.W,
                      staleness=self.staleness, rounds=self.done, updates=int(agg.updates),
                      wall_s=wall, objective=float(agg.objective()),
                      stop_reason=self.reason, model=model, extra=extra,
                      trace=self.trace, signal=self.signum, traffic=traffic,
                      versions=np.array(self.versions, dtype=np.int64).reshape(-1, 3))


class ScheduleDivergence(RuntimeError):
    """Leaderless scheduling: the ranks did not schedule the same work."""


def _fault(tp):
    """The round at which STRADS_FAULT=diverge:RANK:ROUND makes this rank perturb what
    it schedules (for tests and demos), or None."""
    spec = os.environ.get("STRADS_FAULT", "")
    kind, _, rest = spec.partition(":")
    if kind != "diverge":
        return None
    try:
        rank, round = map(int, rest.split(":"))
    except ValueError:
        raise DataError(f"STRADS_FAULT={spec!r}: expected diverge:RANK:ROUND") from None
    return round if rank == tp.rank else None


def _slow_fault(me):
    """STRADS_FAULT=slow:RANK:FACTOR: the factor by which the worker on RANK (under
    MPI; in one process, worker RANK) takes longer per unit of work, else 1."""
    spec = os.environ.get("STRADS_FAULT", "")
    kind, _, rest = spec.partition(":")
    if kind != "slow":
        return 1
    try:
        rank, factor = rest.split(":")
        rank, factor = int(rank), float(factor)
    except ValueError:
        raise DataError(f"STRADS_FAULT={spec!r}: expected slow:RANK:FACTOR") from None
    if not factor >= 1:
        raise DataError(f"STRADS_FAULT={spec!r}: the factor must be >= 1")
    return factor if me == rank else 1


def _plan(rows, busy, balanced=1.1, damping=0.5):
    """New rows per worker from their rows and seconds of work: shares proportional to
    their speeds (rows per second), each cut moved ``damping`` of the way there (a
    round's time is not all per row, and measurements are noisy: a full step
    overshoots and lets rows wander between equally fast workers), and kept inside its
    neighbours' old ranges (rows move between neighbours only, every worker keeps one);
    None when the slowest is within ``balanced`` of the fastest, or a worker did no work."""
    rows, busy = np.asarray(rows, np.float64), np.asarray(busy, np.float64)
    if len(rows) < 2 or (busy <= 0).any() or busy.max() <= balanced * busy.min():
        return None
    speed = rows / busy
    ideal = np.concatenate([[0.0], np.cumsum(rows.sum() * speed / speed.sum())])
    start = np.concatenate([[0.0], np.cumsum(rows)])
    target = start + damping * (ideal - start)
    old = np.concatenate([[0], np.cumsum(rows)]).astype(np.int64)
    cuts = old.copy()
    for k in range(1, len(rows)):
        cuts[k] = min(max(int(round(target[k])), old[k - 1] + 1, cuts[k - 1] + 1),
                      old[k + 1] - 1)
    new = np.diff(cuts).astype(np.int64)
    return None if (new == rows).all() else [int(x) for x in new]


def _perturbed(task):
    """What a schedule fed different inputs would have made: the task with one more key
    (a list of per-worker tasks: the first one's)."""
    if isinstance(task, list):
        return [_perturbed(task[0])] + task[1:]
    if isinstance(task, dict):
        return {**task, "strads_fault": 1}
    return (task, "strads_fault")


def _drive(tp, setup, **kw):
    driver = _Driver(tp, setup, **kw)
    driver.init()
    driver.pipeline()
    return driver.shutdown()


def _serve(tp, update_cls, signals, app, stall_warn):
    """A worker rank's loop: its shard (and a warm-up) sent to it alone, then the
    broadcasts, passed down the workers' tree; a round's result goes up the tree."""
    host = _WorkerHost(update_cls, signals, tp.worker, tp.peers, tp.traffic, tp.rank)
    while True:
        msg = tp.recv_task()
        tp.reply(host.handle(msg))
        if msg[0] == "init":
            break

    while True:
        msg = tp.recv_broadcast()
        reply = host.handle(msg)
        if msg[0] == "step":
            if reply is not None:
                tp.reply_gathered(reply, _merge, stall_warn and (
                    lambda c, r=reply[0]: _stall_watch(
                        app, stall_warn, r, tp.rank, f"worker {c} (rank {c + tp.offset})")))
        elif reply is not None:
            tp.reply(reply)
        if msg[0] == "collect":
            return


def _stall_watch(app, seconds, round, rank, whom):
    def warn(waited):
        what = f" to answer round {round}" if round is not None else ""
        sys.stderr.write(f"[{app}] rank {rank} waiting {waited:.1f} s for {whom}{what}\n")
        sys.stderr.flush()
    return _wait.Watch(seconds, warn)


def run(setup, update, *, workers=None, staleness=0, max_rounds=None, time_limit=None,
        tol=0.0, out=None, quiet=False, app="custom", log_interval=0.1, mpi=None,
        checkpoint_every=None, resume=False, stall_warn=300.0, flags=None, threads=True,
        seed=0, scheduler="rank", rebalance=False, rebalance_every=5.0, schedulers=1):
    """Run an app, in this process or, when launched by ``mpiexec -n N`` (N > 1), on N
    ranks: rank 0 schedules and aggregates, ranks 1..N-1 are the workers.

    ``setup(ctx)`` runs on the scheduler rank only, is told the run's :class:`Context`
    (``ctx.n_workers``, ``ctx.staleness``, ``ctx.seed``: ``seed``) and returns
    ``(schedule, aggregate, shards)`` with one shard per worker; ``update`` is the
    :class:`Update` subclass the workers instantiate from their shard. ``workers`` is
    the number of simulated workers in one process (ignored under MPI).

    ``mpi``: None detects ``mpiexec`` from its environment; False forces one process.
    ``max_rounds`` None: no limit on rounds (the schedule, ``tol`` or ``time_limit``
    ends the run).

    ``checkpoint_every`` (seconds, needs ``out``) writes every rank's state to
    ``out/checkpoint/`` at a round boundary; ``resume`` continues from it (``flags``, the
    command line's, must match the checkpointed run's but for stopping rules and
    output settings; a resume without ``checkpoint_every`` keeps the run's). SIGINT and
    SIGTERM stop at the end of the round: stop_reason "interrupted", outputs written; a
    second one aborts. A NaN, infinite or runaway objective stops the run ("diverged").
    ``stall_warn``: seconds a scheduler waits for a worker before saying so (MPI).
    ``threads``: in one process, run each of the ``workers`` on a thread of its own
    (the same result bit for bit; kernels that release the GIL run in parallel).

    ``rebalance``: every ``rebalance_every`` seconds (at a round boundary) the workers'
    seconds of work are gathered and rows move from slow workers to fast ones (the app's
    Update defines ``rows``, ``give`` and ``take``).

    ``scheduler``: under MPI, ``"rank"`` (rank 0 schedules, the others are workers) or
    ``"replicated"`` (leaderless: all N ranks are workers and each runs the schedule and
    the aggregate on state agreed through collectives; each round every rank's digest of
    what it scheduled is compared, and a difference ends the job naming the round and
    the ranks; ``setup`` then runs on every rank). In one process both are the same.

    ``schedulers`` (K, ``"rank"`` only): ranks 0..K-1 schedule, ranks K..N-1 are the
    workers. ``setup`` (on rank 0) is told ``ctx.n_schedulers`` and returns K schedules,
    one per scheduler rank (a part of the parameters each); each round every one
    schedules its part at the same time, from what the aggregate (on rank 0) told it
    (:meth:`Aggregate.feedback`, :meth:`Schedule.feedback`), and :meth:`Schedule.combine`
    makes the round's task. In one process the K schedules run in turn, with the same
    result bit for bit.

    Returns a :class:`Result` on the scheduler rank (leaderless: on every rank) and None
    on the workers. Under MPI
    an exception on any rank prints that rank's traceback (a :class:`DataError`: one
    line) and aborts the whole job.
    """
    if staleness < 0 or int(staleness) != staleness:
        raise DataError(f"staleness must be an integer >= 0, got {staleness}")
    if max_rounds is None:  # no limit: the schedule, tol or time_limit ends the run
        max_rounds = sys.maxsize
    if max_rounds < 0 or int(max_rounds) != max_rounds:
        raise DataError(f"max_rounds must be an integer >= 0, got {max_rounds}")
    for name, v in (("time_limit", time_limit), ("checkpoint_every", checkpoint_every),
                    ("stall_warn", stall_warn)):
        if v is not None and not (v > 0 and math.isfinite(v)):
            raise DataError(f"{name} must be a finite number > 0 (seconds), got {v}")
    if not tol >= 0 or not math.isfinite(tol):
        raise DataError(f"tol must be a finite number >= 0, got {tol}")
    if out is not None and not os.fspath(out):
        raise DataError("--out '': not a folder name")
    if (checkpoint_every or resume) and not out:
        raise DataError("checkpoints need an output folder: pass --out DIR")
    if rebalance and checkpoint_every:
        raise DataError("--rebalance and --checkpoint-every cannot be used together yet "
                        "(a checkpoint keeps the rows where setup put them)")
    if not (rebalance_every > 0 and math.isfinite(rebalance_every)):
        raise DataError(f"rebalance_every must be a finite number > 0 (seconds), got "
                        f"{rebalance_every}")
    if scheduler not in SCHEDULERS:
        raise DataError(f"scheduler must be one of {', '.join(SCHEDULERS)}, got {scheduler!r}")
    if int(schedulers) != schedulers or schedulers < 1:
        raise DataError(f"schedulers must be an integer >= 1, got {schedulers}")
    if schedulers > 1 and scheduler == "replicated":
        raise DataError("--schedulers applies to --scheduler rank (with replicated, every "
                        "rank schedules)")
    if schedulers > 1 and (checkpoint_every or resume):
        raise DataError("--schedulers > 1 and checkpoints cannot be used together yet (a "
                        "checkpoint holds one schedule)")
    kw = dict(staleness=int(staleness), max_rounds=int(max_rounds), time_limit=time_limit,
              tol=tol, app=app, quiet=quiet, log_interval=log_interval,
              out=os.path.abspath(out) if out else None, checkpoint_every=checkpoint_every,
              resume=bool(resume), flags=flags, stall_warn=stall_warn, seed=seed,
              rebalance=bool(rebalance), rebalance_every=float(rebalance_every),
              schedulers=int(schedulers))

    if mpi is None:
        mpi = _transport.mpi_world_size() > 1
    if mpi and schedulers > 1 and scheduler == "rank" and \
            schedulers >= _transport.mpi_world_size():
        raise DataError(f"--schedulers {schedulers} under mpiexec -n "
                        f"{_transport.mpi_world_size()}: no rank is left for a worker "
                        f"(ranks 0..{schedulers - 1} schedule)")
    _keep_freed_memory()
    # One worker is one core: BLAS calls inside kernels (a Gram matrix, a solve) must not
    # start threads of their own, which under mpiexec would oversubscribe the cores.
    with threadpool_limits(limits=1), _Signals() as signals:
        result = _run(setup, update, workers, mpi, kw, signals, threads, scheduler)
    if result is not None and result.stop_reason in ("interrupted", "diverged"):
        what = (f"interrupted by {signal.Signals(result.signal).name}"
                if result.stop_reason == "interrupted" else
                f"stopped: the objective diverged ({result.objective:.6g})")
        sys.stderr.write(f"[{app}] {what} at round {result.rounds}"
                         + (f"; outputs in {out}" if out else "") + "\n")
    return result


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


SCHEDULERS = ("rank", "replicated")


def _run(setup, update, workers, mpi, kw, signals, threads, scheduler="rank"):
    out = kw["out"]
    if mpi and scheduler == "replicated":
        tp = _transport.Replicated()
        try:
            check_out(out)
            host = _WorkerHost(update, signals, tp.rank, tp.peers, tp.traffic, tp.rank)
            tp.handler = host.handle
            if tp.rank:
                kw = {**kw, "quiet": True}  # rank 0 shows the progress
            result = _drive(tp, setup, signals=signals, **kw)
            result.rank = tp.rank
            if out and tp.rank == 0:
                result.write(out)
            tp.close()
            return result
        except BaseException as exc:
            if isinstance(exc, KeyboardInterrupt):
                tp.abort("interrupted again: aborting", 130, brief=True)
            if isinstance(exc, ScheduleDivergence) and tp.rank:
                time.sleep(1.0)  # every rank found it: rank 0 says so, once
                os._exit(1)
            brief = isinstance(exc, (DataError, ScheduleDivergence))
            tp.abort(exc, 2 if isinstance(exc, DataError) else 1, brief=brief)
    if mpi:
        tp = _transport.MPITransport(schedulers=kw["schedulers"])
        try:
            if tp.rank == 0:
                check_out(out)
                result = _drive(tp, setup, signals=signals, **kw)
                if out:
                    result.write(out)
            elif tp.rank < kw["schedulers"]:
                _schedule_serve(tp)
                result = None
            else:
                _serve(tp, update, signals, kw["app"], kw["stall_warn"])
                result = None
            tp.close()
            return result
        except BaseException as exc:  # any rank: end the whole job, never hang
            if isinstance(exc, KeyboardInterrupt):
                tp.abort("interrupted again: aborting", 130, brief=True)
            data_error = isinstance(exc, DataError)
            tp.abort(exc, 2 if data_error else 1, brief=data_error)

    workers = 1 if workers is None else workers
    if int(workers) != workers or workers < 1:
        raise DataError(f"workers must be an integer >= 1, got {workers}")
    check_out(out)
    tp = _transport.InProcess(int(workers), threads=threads)
    tp.handlers = [_WorkerHost(update, signals, w, tp.peers(w)).handle
                   for w in range(tp.n_workers)]
    try:
        result = _drive(tp, setup, signals=signals, **kw)
    except BaseException:
        tp.close(wait=False)
        raise
    tp.close()
    if out:
        result.write(out)
    return result
