"""The ranks that the driver commands: a worker (the app's Update on its shard) and, with
``--schedulers K``, a scheduler rank (one of the K schedules); messages are the named
records below, handled by type."""
import os
import sys
import time
from collections import namedtuple
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from . import checkpoint as _ckpt
from . import transport as _transport
from .api import Schedule, Update
from ._wait import stall_watch
from .io import memory
from .io.agree import refuse


# the driver's requests to the workers, their replies and a scheduler rank's messages;
# what each field holds: docs/architecture.md, "strads/worker.py: the messages"
Warmup, Init, Step, Checkpoint, Restore, Timing, Rebalance, Collect = (
    namedtuple(*r) for r in (
        ("Warmup", ""), ("Init", "shard warm digest rebalance"),
        ("Step", "round syncs task each"), ("Checkpoint", "folder tag"),
        ("Restore", "folder parts round reshard"), ("Timing", ""), ("Rebalance", "old new"),
        ("Collect", "")))
Ready, RoundResult, Timed, Moved, Collected = (namedtuple(*r) for r in (
    ("Ready", "report"), ("RoundResult", "round newest oldest signum partials written"),
    ("Timed", "busy rows"), ("Moved", "rows"), ("Collected", "model usage written")))
Begin, Plan, Part, Stop = (namedtuple(*r) for r in (
    ("Begin", "schedule reports"), ("Plan", "round news"), ("Part", "task signum"),
    ("Stop", "")))


class WorkerHost:
    """Worker ``w``: turns the driver's requests into calls on the app's Update."""

    def __init__(self, update_cls, signals, w, peers, traffic=None):
        self.update_cls, self.signals = update_cls, signals
        self.w, self.peers = w, peers
        self.traffic = traffic  # this rank's counters, under MPI
        self.update = None
        self.version = 0
        self.digest = None  # of the shard, when checkpoints are on: checked on resume
        self._writer = None  # the future of this worker's checkpoint part, being written
        self._written = []  # (worker, tag, manifest entry) of parts on disk, not yet told
        self.busy = []  # seconds of update() work a round since the last Timing

    def handle(self, msg):  # a Step to step(), a Collect to collect(), ...
        return getattr(self, type(msg).__name__.lower())(msg)

    def warmup(self, msg):
        self.update_cls.warmup()
        return Ready(None)

    def init(self, msg):
        # the kernels load (numba's cache: work under the GIL) while the shard is read
        # (the parsers release it): off the load's critical path
        if not msg.warm:
            return self._init(msg)
        with ThreadPoolExecutor(1, thread_name_prefix="strads-warmup") as pool:
            warm = pool.submit(self.update_cls.warmup)
            ready = self._init(msg)  # (an error here waits for the warm-up, then wins)
            warm.result()
        return ready

    def _init(self, msg):
        if msg.digest:
            self.digest = _ckpt.digest(msg.shard)
        update = self.update_cls.__new__(self.update_cls)
        update.peers = self.peers  # before __init__: it may read its part with them
        with memory.returning_freed_memory():  # (the load's freed arrays: not its peak)
            update.__init__(msg.shard)
        self.update = update
        cls = type(update)
        if (msg.digest or msg.rebalance) and update.rows is not None and (
                isinstance(update.rows, bool) or not isinstance(update.rows, (int, np.integer))):
            raise TypeError(f"{cls.__name__}.rows is a {type(update.rows).__name__}: strads "
                            "reads Update.rows as the number of rows this worker holds "
                            "(--rebalance, checkpoints): give yours another name")
        if msg.rebalance and (update.rows is None or cls.give is Update.give
                              or cls.take is Update.take):
            refuse(self.peers, f"--rebalance: {cls.__name__} cannot hand rows over (it "
                   "defines no rows, give and take)")  # (every worker meets it: said once)
        if msg.digest:  # refuse a state that cannot be checkpointed now, not mid-run
            _ckpt.encode(update.state(), type(update).__name__)
        return Ready(update.report())

    def step(self, msg):
        syncs, task = msg.syncs, msg.task
        if msg.each:  # one part per worker
            syncs, task = syncs[self.w], task[self.w]
        for sync in syncs:
            if sync is not None:
                self.update.apply(sync)
            self.version += 1
        if msg.round is None:  # syncs only
            return None
        partial = None
        if task is not None:
            t0, waited = time.perf_counter(), self.peers.waited
            partial = self.update.update(task)
            # its own work: less the time it waited for the others in their collectives
            self.busy.append(time.perf_counter() - t0 - (self.peers.waited - waited))
        return RoundResult(msg.round, self.version, self.version, self.signals.signum,
                           [] if partial is None else [(self.w, partial)], self._durable())

    def checkpoint(self, msg):
        """A copy of the state now, written while the run goes on and told to the driver
        with a later result."""
        self._join_writer()
        rows = None if self.update.rows is None else int(self.update.rows)
        pieces = _ckpt.snapshot({
            "update": _ckpt.encode(self.update.state(), type(self.update).__name__),
            "host": _ckpt.encode(self._host(), "worker")})
        w, tag = self.w, msg.tag

        def write():  # an error is told with the next result: the run then ends
            entry = _ckpt.write_part(msg.folder, f"{tag}-worker{w}.npz", pieces)
            return w, tag, {**entry, "rows": rows}

        # (the pool drops write, and the snapshot with it, once it is on disk; its thread
        # is joined at exit: a run that ends in an error still finishes or removes the part)
        pool = ThreadPoolExecutor(1, thread_name_prefix="strads-checkpoint")
        self._writer = pool.submit(write)
        pool.shutdown(wait=False)

    def _host(self):
        return {"version": self.version, "digest": self.digest, "worker": self.w}

    def restore(self, msg):
        if msg.reshard:
            return self._reshard(msg)
        host, state = self._read(msg, self.w)
        if host["digest"] != self.digest:
            raise _ckpt.CheckpointError(
                f"{msg.folder}: worker {self.w}'s data differs from the checkpointed run's "
                "(was the input changed?)")
        _ckpt.load(self.update, state, os.path.join(msg.folder, msg.parts[self.w + 1]["file"]))
        self.version = host["version"]
        return Ready(None)

    def _read(self, msg, k, sizes=True):
        """The host and update state of worker ``k``'s part, checked against this fresh
        worker's state (``sizes`` False: but for array sizes) before anything is loaded,
        and for its worker and round."""
        entry = msg.parts[k + 1]
        parts = _ckpt.read_part(msg.folder, entry)
        where = os.path.join(msg.folder, entry["file"])
        host = _ckpt.restore(parts, "host", self._host(), where)
        state = _ckpt.restore(parts, "update", self.update, where, sizes=sizes)
        if host["worker"] != k or host["version"] != msg.round:
            raise _ckpt.CheckpointError(
                f"{where}: worker {host['worker']!r} at version {host['version']!r}, not "
                f"worker {k} at round {msg.round} (parts swapped or edited?)")
        return host, state

    def _reshard(self, msg):
        """A checkpoint of another number of workers: the old parts that hold rows of
        this worker's (all of them for an app without rows), checked but for their
        arrays' sizes, go to the app's :meth:`~strads.Update.reshard`."""
        up, entries = self.update, msg.parts[1:]
        old = [e.get("rows") for e in entries]
        mine = self.peers.allgather(up.rows)
        if up.rows is not None:
            if None in old or sum(old) != sum(mine):
                raise _ckpt.CheckpointError(
                    f"{msg.folder}: the checkpoint holds {sum(r or 0 for r in old)} rows, "
                    f"this run's data {sum(mine)}: the input differs from the checkpointed "
                    "run's")
            first = sum(mine[:self.w])
            starts = np.cumsum([0] + old[:-1]).tolist()
            keep = [k for k, (s, n) in enumerate(zip(starts, old))
                    if s < first + up.rows and s + n > first]
        else:
            first, starts, keep = None, [None] * len(entries), range(len(entries))
        fresh, name = up.state(), type(up).__name__
        try:
            olds, err = [(starts[k], old[k], self._read(msg, k, sizes=False)[1])
                         for k in keep], None
        except _ckpt.CheckpointError as e:
            olds, err = None, e
        # (workers that read the same bad part: the first of them says so, alone)
        failed = self.peers.allgather(err is not None)
        if err is not None and failed.index(True) == self.w:
            raise err
        if any(failed):
            return Ready(None)  # (the run ends with that worker's error)
        try:
            with np.errstate(all="ignore"):  # (forged values: refused by load_state below)
                up.reshard(olds, first)
        except (ValueError, IndexError, KeyError, TypeError, OverflowError) as e:
            # (parts that do not add up; values of the wrong kind where the fresh state
            # has none to compare with)
            raise _ckpt.CheckpointError(f"{msg.folder}: the checkpoint does not fit this "
                                        f"run on {len(mine)} workers ({e})") from None
        where = f"{msg.folder} on {len(mine)} workers"
        state = up.state()
        _ckpt.restore({"update": _ckpt.encode(state, name)}, "update", fresh, where,
                      tuple(getattr(up, "checkpoint_sized", ())))
        _ckpt.load(up, state, where)  # (the app's checks of its values, as a plain resume)
        self.version = msg.round
        return Ready(None)

    def timing(self, msg):
        # the median round's, times the rounds: a burst of another job's load is not
        # taken for a slow worker
        busy, self.busy = self.busy, []
        return Timed(float(np.median(busy)) * len(busy) if busy else 0.0, self.update.rows)

    def rebalance(self, msg):
        """Move rows to and from the neighbours so that worker w holds ``new[w]`` rows:
        cut k moves from sum(old[:k]) to sum(new[:k]), never past a neighbour's range."""
        w, up, peers, new = self.w, self.update, self.peers, msg.new
        c_old, c_new = np.cumsum([0] + list(msg.old)), np.cumsum([0] + list(new))
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
        return Moved(up.rows)

    def collect(self, msg):
        self._join_writer()
        # the last request: the Update's arrays go before rank 0 puts the model together
        model, self.update = self.update.collect(), None
        return Collected(model,
                         None if self.traffic is None else rank_usage(self.traffic),
                         self._durable())

    def _join_writer(self):
        if self._writer is not None:
            writer, self._writer = self._writer, None
            self._written.append(writer.result())

    def _durable(self):
        """The parts written since the last result (a writer that failed raises here)."""
        if self._writer is not None and self._writer.done():
            self._join_writer()
        done, self._written = self._written, []
        return done


class SchedulerHost:
    """One of the schedules of ``--schedulers K``; its answers carry its rank's signal
    (a SIGTERM to a scheduler rank stops the run at a round, as to any rank)."""

    schedule = None

    def __init__(self, signals=None):
        self.signals = signals

    def handle(self, msg):
        if type(msg) is Begin:
            self.schedule = msg.schedule
            self.schedule.begin(msg.reports)
            return Ready(None)
        for n in msg.news:  # a Plan
            self.schedule.feedback(n)
        return Part(self.schedule.schedule(msg.round), self.signals and self.signals.signum)


def per_worker(msg, n, hook="a hook"):
    if isinstance(msg, list):
        if len(msg) != n:
            raise ValueError(f"{hook} returned a per-worker list of {len(msg)} parts for "
                             f"{n} workers")
        return msg
    return [msg] * n


class Split(Schedule):
    """The driver's schedule with ``--schedulers K``: schedule 0 runs here, schedule k
    on rank k (in one process: here too, on copies, as under MPI); a round asks every one
    for its part at once, with the aggregate's news, and combines their answers; a
    scheduler rank's signal becomes this rank's."""

    def __init__(self, parts, tp, signals):
        self.parts, self.tp, self.K, self.signals = list(parts), tp, len(parts), signals
        self.combine = type(parts[0]).combine
        self.first = parts[0]
        self.hosts = [SchedulerHost() for _ in range(self.K)]
        self.news = [[] for _ in range(self.K)]

    def _ask(self, msgs):
        """Each scheduler's answer to its message, all asked at once (the others first)."""
        mpi, mine = self.tp.is_mpi, {}
        for k in range(self.K - 1, -1, -1):
            if k and mpi:
                self.tp.to_scheduler(k, msgs[k])
            else:  # (the answer too: a copy)
                mine[k] = self.hosts[k].handle(_transport._copy(msgs[k]) if k else msgs[k])
                mine[k] = _transport._copy(mine[k]) if k else mine[k]
        return [self.tp.from_scheduler(k) if k and mpi else mine[k] for k in range(self.K)]

    def begin(self, reports):
        self._ask([Begin(p, reports) for p in self.parts])
        self.parts = None  # the scheduler ranks hold them now

    @property
    def total_rounds(self):
        return self.first.total_rounds

    def hear(self, news):
        for k, n in enumerate(per_worker(news, self.K, "the aggregate's feedback")):
            if n is not None:
                self.news[k].append(n)

    def schedule(self, round):
        answers = self._ask([Plan(round, n) for n in self.news])
        self.news = [[] for _ in range(self.K)]
        self.signals.signum = self.signals.signum or max(a.signum or 0 for a in answers)
        return self.combine([a.task for a in answers])

    def stop(self):  # the other scheduler ranks stop (before rank 0's count, which has it)
        if self.tp.is_mpi:
            for k in range(1, self.K):
                self.tp.to_scheduler(k, Stop())

    def close(self):  # their traffic, once they have stopped
        return [self.tp.from_scheduler(k) for k in range(1, self.K)] if self.tp.is_mpi else []


def serve(tp, update_cls, signals, app, stall_warn):
    """A worker rank's loop: its shard (and a warm-up) sent to it alone, then the
    broadcasts down the workers' tree, a round's result up it."""
    host = WorkerHost(update_cls, signals, tp.worker, tp.peers, tp.traffic)
    while True:
        msg = tp.recv_task()
        tp.reply(host.handle(msg))
        if type(msg) is Init:
            break
    def whom(w):
        return "rank 0 (the scheduler)" if w < 0 else f"worker {w} (rank {w + tp.offset})"
    while True:  # (a stalled scheduler is named by its workers, as they are by it)
        msg = tp.recv_broadcast(stall_warn and (
            lambda p: stall_watch(app, stall_warn, None, tp.rank, whom(p))))
        reply = host.handle(msg)
        if type(msg) is Step:
            if reply is not None:
                tp.reply_gathered(reply, merge, stall_warn and (
                    lambda c, r=reply.round: stall_watch(app, stall_warn, r, tp.rank,
                                                         whom(c))))
        elif reply is not None:
            tp.reply(reply)
        if type(msg) is Collect:
            return


def schedule_serve(tp, signals):
    """A scheduler rank's loop (``--schedulers K``, ranks 1..K-1)."""
    host = SchedulerHost(signals)
    while True:
        msg = tp.from_scheduler(0)
        if type(msg) is Stop:
            tp.to_scheduler(0, rank_usage(tp.traffic))
            return
        tp.to_scheduler(0, host.handle(msg))


def merge(parts):
    """Workers' RoundResults of one round combined, in any grouping."""
    return RoundResult(parts[0].round, max(p.newest for p in parts),
                       min(p.oldest for p in parts), max(p.signum for p in parts),
                       sorted((x for p in parts for x in p.partials), key=lambda x: x[0]),
                       [x for p in parts for x in p.written])


def rank_usage(traffic):
    """A rank's traffic so far and its peak resident memory."""
    import resource
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KiB on Linux, B on macOS
    return {**traffic, "peak_rss_mb": round(rss / (2**20 if sys.platform == "darwin"
                                                   else 2**10), 1)}
