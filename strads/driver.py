"""The scheduler's loop (dispatch, collect, staleness, stopping rules, checkpoints,
rebalancing) and :func:`run`, which starts it on every rank. Staleness, versions, the
round order of aggregation and the tree of the workers: docs/architecture.md."""
import importlib
import json
import math
import numbers
import os
import pickle
import signal
import sys
import threading
import time
import zlib
from collections import deque

import numpy as np
from threadpoolctl import ThreadpoolController

from . import api
from . import checkpoint as _ckpt
from . import outputs as _outputs
from . import params as _params
from . import rebalance as _rebal
from . import transport as _transport
from . import worker as W
from ._wait import stall_watch
from .errors import DataError, StalenessError
from .io import memory


def _launch():
    from . import launch  # (not at import: ``python -m strads.launch`` would warn)
    return launch


DIVERGE_FACTOR = 1e6  # "diverged": this many times its scale away from its best
#: stops where a run with checkpoints takes a last one, for a resume to go on from
RESUMABLE = ("interrupted", "max_rounds", "time_limit")


class ScheduleDivergence(RuntimeError):
    """Leaderless scheduling: the ranks did not schedule the same work."""


def _unsendable(shard):
    """`` at key K`` of the first entry of a dict shard that pickle refuses, or ''."""
    for k, v in shard.items() if isinstance(shard, dict) else ():
        try:
            pickle.dumps(v, protocol=pickle.HIGHEST_PROTOCOL)
        except Exception:  # (what pickle raises varies with the object)
            return f" (at key {k!r})"
    return ""


def _shape(made):
    """What setup returned, in a few words (for its refusal)."""
    if isinstance(made, (tuple, list)):
        return f"a tuple of {len(made)}" + (
            f" whose shards are a {type(made[2]).__name__}" if len(made) == 3 else "")
    return "None" if made is None else f"a {type(made).__name__}"


class Driver:
    """The scheduler rank's loop, in three steps: :meth:`init` (setup, the workers'
    shards, a checkpoint to resume from), :meth:`pipeline` (rounds until a stopping
    rule) and :meth:`shutdown` (the workers' parts of the model, the result)."""

    def __init__(self, tp, setup, update, *, staleness, max_rounds, time_limit, tol, app,
                 quiet, log_interval, out, checkpoint_every, resume, flags, stall_warn,
                 signals, seed, rebalance=False, rebalance_every=5.0, schedulers=1,
                 label=None):
        self.tp, self.setup, self.update_cls = tp, setup, update
        self.W, self.seed, self.K = tp.n_workers, seed, schedulers
        # leaderless: every rank runs this loop on agreed state (transport.Replicated)
        self.rep = getattr(tp, "replicated", False)
        self.writes = not self.rep or tp.rank == 0  # the scheduler's part, the manifest
        self.digests, self.digest, self.digest_checks = {}, 0, 0
        self.rebal, self.rebal_every = rebalance, rebalance_every
        self.rebalances, self.rows = 0, None
        self.rebal_round = 0  # the round of the last measurement (0: none yet)
        self.measured = []  # the last measurements: (rows, seconds a round)
        self.move_took = None  # the last move's (seconds, rows that crossed a cut)
        if self.rep:
            tp.flags = self._flags
        self.staleness, self.max_rounds, self.time_limit, self.tol = (
            staleness, max_rounds, time_limit, tol)
        self.app, self.quiet, self.log_interval = app, quiet, log_interval
        self.label = label or app
        self.every, self.resume, self.flags = checkpoint_every, resume, flags
        self.stall_warn, self.signals = stall_warn, signals
        self.folder = os.path.join(out, "checkpoint") if out else None
        self.trace, self.versions = [], []
        self.pending = [[] for _ in range(self.W)]  # syncs not yet sent, per worker
        self.inflight = deque()  # (round, task) dispatched, not yet aggregated
        self.held = deque()  # results of rounds in flight received at a checkpoint
        self.receiving = None  # the round whose results are being received
        # a checkpoint taken where a stopping rule first held a round back (:meth:`_dispatch`)
        self.stop_ckpt = False
        self.r_next = self.done = 0
        self.stopping, self.reason = False, "max_rounds"
        self.elapsed0 = 0.0  # wall time of the run before it was resumed
        self.last_log = -math.inf
        self.first = self.best = None  # the objective's first non-zero and best values
        self.signum = 0
        self.ckpt_round = None  # the round of the last checkpoint begun
        self.ckpt_wait = None  # a checkpoint begun whose workers' parts are not all written
        self.superseded = set()  # checkpoints a last one replaced before they were written
        self.synced = False  # an aggregate has returned a sync

    def init(self):
        manifest = None
        if self.resume:
            manifest = _ckpt.read_manifest(self.folder)
            self._check_resume(manifest)
            if self.every is None:
                self.every = manifest["checkpoint_every"]
        ctx = api.Context(self.W, self.staleness, self.seed, self.K)
        _outputs.COMPILES.watch(self.label, self.quiet, self.tp.is_mpi)
        made = self.setup(ctx)
        if not (isinstance(made, (tuple, list)) and len(made) == 3
                and isinstance(made[2], (list, tuple))):
            raise TypeError("setup(ctx) must return (schedule, aggregate, shards), shards a "
                            f"list of one per worker; it returned {_shape(made)}")
        self.schedule, self.aggregate, shards = made
        if len(shards) != self.W:
            raise ValueError(f"setup returned {len(shards)} shards for {self.W} workers")
        if self.K > 1:
            parts = self.schedule
            if isinstance(parts, api.Schedule):
                raise DataError(f"--schedulers {self.K}: {self.label}'s schedule does not "
                                "split over scheduler ranks; use --schedulers 1")
            if len(parts) != self.K:
                raise ValueError(f"setup returned {len(parts)} schedules for {self.K} "
                                 "schedulers")
            self.schedule = W.Split(parts, self.tp, self.signals)
        api.check_app(self.app, self.schedule.first if self.K > 1 else self.schedule,
                      self.update_cls, self.aggregate)
        agg = type(self.aggregate)
        if self.tol > 0 and agg.objective is api.Aggregate.objective and \
                agg.converged is api.Aggregate.converged:
            raise ValueError(f"tol={self.tol}: {agg.__name__} defines neither objective() "
                             "nor converged(), so tol can never stop the run (pass tol=0, "
                             "or define one)")
        digest = bool(self.every or self.resume)
        # the files' content, for a resume on another number of workers (on the same,
        # each worker's digest of its shard checks it)
        self.inputs = _ckpt.inputs(shards) if digest else []
        if manifest is not None and self.reshard and manifest["inputs"] != self.inputs:
            raise _ckpt.CheckpointError(f"{self.folder}: the input data differs from the "
                                        "checkpointed run's (was the input changed?)")
        # The first worker compiles every kernel alone, the others load its cache; every
        # shard is sent before any reply is waited for (the workers' set-up may meet).
        mpi = self.tp.is_mpi
        if mpi and not self.rep:  # (leaderless: every rank warms its own worker up)
            self.tp.send(0, W.Warmup())
            self.tp.recv(0)
        # (in one process, once per Update class: a warm-up thread is a small fit's cost)
        warm = mpi or self.update_cls not in _WARM
        for w in range(self.W):
            try:
                self.tp.send(w, W.Init(shards[w], warm and (mpi or w == 0), digest,
                                       self.rebal))
            except (pickle.PicklingError, TypeError, AttributeError) as e:
                raise TypeError(f"setup's shard for worker {w}{_unsendable(shards[w])} "
                                f"cannot be sent to it: {e}") from None
            shards[w] = None  # the worker holds it now: the scheduler keeps no copy
        shards = None
        reports = [self.tp.recv(w).report for w in range(self.W)]
        if not mpi:
            _WARM.add(self.update_cls)
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
        self.progress = _outputs.Progress(
            self.label, self.quiet, min(self.max_rounds, total or self.max_rounds),
            self.time_limit)

    def _check_resume(self, m):
        was = {**m["flags"], **m["engine"]}
        if was["app"] != self.app:  # (then every flag differs: say only this)
            raise _ckpt.another_app(self.folder, was["app"], self.app)
        now = {**(self.flags or {}), "app": self.app, "workers": self.W,
               "staleness": self.staleness}
        # another number of workers: the app's Update moves its state (api.Update.reshard)
        self.reshard = was.get("workers") != self.W
        cls = self.update_cls
        if self.reshard and (cls.reshard is not api.Update.reshard or cls.row_state):
            was["workers"] = self.W
        def shown(v):  # (None: the flag was not given)
            return "default" if v is None else repr(v)
        diff = [f"{k} {shown(now.get(k))} (was {shown(was.get(k))})"
                for k in sorted(set(was) | set(now))
                if k not in _params.RESUME_MAY_CHANGE and was.get(k) != now.get(k)]
        if diff:
            why = ("" if was.get("workers") == self.W else
                   f" ({cls.__name__} cannot move its state to another number of workers: "
                   "it defines neither row_state nor reshard)")
            raise _ckpt.CheckpointError(f"{self.folder}: cannot resume, these differ from "
                                        f"the checkpointed run: {', '.join(diff)}{why}")

    def _restore(self, m):
        parts = _ckpt.read_part(self.folder, m["parts"][0])
        # every piece checked against the fresh setup's state before any is loaded
        where = os.path.join(self.folder, m["parts"][0]["file"])
        schedule, aggregate = (_ckpt.restore(parts, k, p, where) for k, p in (
            ("schedule", self.schedule), ("aggregate", self.aggregate)))
        loop = _ckpt.restore_loop(parts, self._loop(), m["round"], where,
                                   self.staleness, m["engine"]["workers"])
        _ckpt.load(self.schedule, schedule, where)
        _ckpt.load(self.aggregate, aggregate, where)
        self.r_next = self.done = loop["done"]
        for r, task, newest, oldest, got in loop["inflight"]:
            self.inflight.append((r, task))
            self.held.append((r, newest, oldest, 0, got, []))
        self.r_next += len(self.inflight)
        self.trace = loop["trace"]
        self.versions = [tuple(v) for v in loop["versions"].tolist()]
        self.elapsed0 = loop["elapsed"]
        self.first, self.best = loop["first"], loop["best"]
        self.last_log = loop["last_log"]
        if self.reshard:
            # (the rounds in flight first: resume_on knows a checkpoint with none)
            while self.held:
                self._aggregate(*self.inflight.popleft(), self.held.popleft(),
                                m["engine"]["workers"])
            for piece in (self.schedule, self.aggregate):
                piece.resume_on(self.W, self.done)
        self.tp.broadcast(W.Restore(self.folder, m["parts"], m["round"], self.reshard))
        for w in range(self.W):
            self.tp.recv(w)

    def pipeline(self):
        draining = False  # a rebalance is due: let the rounds in flight finish first
        while True:
            if not draining:
                self._dispatch()
            if not self.inflight:
                break
            self._collect_round()
            if not self.stopping and self.every and self._checkpoint_due():
                self.checkpoint()  # (the rounds in flight stay so: the run is unchanged)
            if not self.stopping and self.rebal and self._rebalance_due():
                draining = True
            if draining and not self.inflight:
                self.rebalance()
                draining = False

    def _now(self):  # (leaderless: by the agreed clock)
        if self.rep:
            return self.agreed_now - self.wall0
        return time.perf_counter() - self.t0

    def _checkpoint_due(self):
        return self.ckpt_wait is None and self._now() - self.last_ckpt >= self.every

    def _rebalance_due(self):  # (the rule: strads.rebalance.FIRST_REBALANCE)
        since = self.done - self.rebal_round
        return since >= max(_rebal.FIRST_REBALANCE, self.rebal_round) or (
            self.rebal_round and self._now() - self.last_rebal >= self.rebal_every)

    def rebalance(self):
        """At a round boundary: the workers' seconds of work since the last time, and rows
        moved from the slow to the fast when that pays (:func:`strads.rebalance.plan`)."""
        if any(self.pending):
            self._step(None, None)
        self.tp.broadcast(W.Timing())
        got = [self.tp.recv(w) for w in range(self.W)]
        rows, busy = [g.rows for g in got], [g.busy for g in got]
        rounds = max(1, self.done - self.rebal_round)
        total = min(self.max_rounds, self.schedule.total_rounds or self.max_rounds)
        # the rounds a move would pay over: those left, or (unknown) as many as so far
        ahead = total - self.done if total < sys.maxsize else self.done
        self.measured = (self.measured + [(rows, [b / rounds for b in busy])]
                         )[-_rebal.KEEP:]
        new = _rebal.plan(self.measured, ahead, self.move_took)
        self.rows = rows
        if new is not None:
            t0 = time.perf_counter()
            for old, step in _rebal.steps(rows, new):
                self.tp.broadcast(W.Rebalance(old, step))
                self.rows = [self.tp.recv(w).rows for w in range(self.W)]
            took = time.perf_counter() - t0
            if self.rep:  # every rank the same figure
                took = max(self.tp.allgather(took))
            self.move_took = (took, int(np.abs(np.cumsum(rows) - np.cumsum(new)).sum()))
            self.rebalances += 1
        self.rebal_round = self.done
        self.last_rebal = self._now()

    def _flags(self):
        """Leaderless, shared with a round's results: this rank's signal, clock and the
        digest of what it scheduled for that round."""
        return (self.signals.signum, time.time(), self.digests.pop(self.receiving))

    def _dispatch(self):
        while len(self.inflight) <= self.staleness:
            if self.signals.signum and not self.stopping and not self.rep:  # (leaderless:
                self._stop("interrupted")  # agreed, in _collect_round)
                self.signum = self.signals.signum
            if self.stopping or self.r_next >= self.max_rounds:
                # where the uninterrupted run would dispatch a round: its rounds in flight,
                # so a resume from here is that run (else from the end: a drained pipeline)
                if (self.every and self.staleness and not self.stop_ckpt and self.inflight
                        and self.reason in RESUMABLE):
                    if self.ckpt_round != self.done:  # (else one was just taken here)
                        self.checkpoint()
                    self.stop_ckpt = True
                break
            task = self.schedule.schedule(self.r_next)
            if task is None:
                self._stop("schedule_done")
                break
            if self.rep:
                self.digests[self.r_next] = _ckpt.digest(task)
            self._step(self.r_next, task)
            self.inflight.append((self.r_next, task))
            self.r_next += 1

    def _step(self, round, task):
        """Send every worker the syncs it has not applied yet and ``task`` (one message
        for all of them when they are the same)."""
        tasks = W.per_worker(task, self.W, f"{type(self.schedule).__name__}.schedule")
        pend = self.pending
        if all(t is tasks[0] and len(p) == len(pend[0])
               and all(x is y for x, y in zip(p, pend[0])) for t, p in zip(tasks, pend)):
            self.tp.broadcast(W.Step(round, pend[0], tasks[0], False))
        else:
            self.tp.broadcast(W.Step(round, pend, tasks, True))
        self.pending = [[] for _ in range(self.W)]

    def _stop(self, reason):
        if not self.stopping:
            self.stopping, self.reason = True, reason

    def _receive(self, r):
        """Round ``r``'s results from the workers (the next to come), checked."""
        self.receiving = r
        got = self.tp.gather(W.merge, self._watch(r))
        if self.rep:
            self._check_digests(r)
            self.agreed_now = max(self.agreed_now, self.tp.agreed[1])
        self._written(got[5])
        if got[0] != r:
            raise RuntimeError(f"the workers answered round {got[0]}, expected {r}")
        return got

    def _aggregate(self, r, task, got, workers=None):
        """Round ``r``'s results (of ``workers``, default this run's) aggregated."""
        _, newest, oldest, _, parts, _ = got
        if r - oldest > self.staleness:
            raise StalenessError(f"round {r} was computed by a worker at version "
                                 f"{oldest}: {r - oldest} rounds stale > {self.staleness}")
        self.versions.append((r, newest, oldest))
        partials = [None] * (workers or self.W)
        for w, partial in parts:
            partials[w] = partial
        sync = self.aggregate.aggregate(r, task, partials)
        if sync is not None and not self.synced and not (
                isinstance(sync, list) and all(s is None for s in sync)):
            # the first (not a list of None: nothing to apply): can the workers apply it?
            api.check_sync(self.aggregate, self.update_cls)
            self.synced = True
        for w, s in enumerate(W.per_worker(sync, self.W,
                                           f"{type(self.aggregate).__name__}.aggregate")):
            self.pending[w].append(s)
        self.done = r + 1
        return sync

    def _collect_round(self):
        r, task = self.inflight[0]
        got = self.held.popleft() if self.held else self._receive(r)
        self.inflight.popleft()
        sync = self._aggregate(r, task, got)
        if self.K > 1:
            self.schedule.hear(self.aggregate.feedback(r, task, sync))
        signum = got[3]
        _launch().note_round(self.done)
        now = self._now()
        objective = self.aggregate.objective()
        if not isinstance(objective, numbers.Real):
            raise TypeError(f"{type(self.aggregate).__name__}.objective() returned "
                            f"{type(objective).__name__}, not a number")
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
        digests = [f[2] for f in self.tp.allgather_flags]
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
        return stall_watch(self.app, self.stall_warn, r, 0,
                             f"the workers (rank {self.K} and those it waits for)")

    def _diverged(self, objective):
        """NaN or infinite after a finite value, or further from the best value, in the
        worse direction, than DIVERGE_FACTOR times the objective's scale."""
        if not math.isfinite(objective):
            return self.first is not None
        worse = -objective if self.aggregate.maximize else objective
        if self.first is None:
            self.best = worse
        if not self.first:  # the scale's: the first value that is not 0
            self.first = worse
        self.best = min(self.best, worse)
        scale = max(abs(self.first), abs(self.best), 1e-300)
        return worse - self.best > DIVERGE_FACTOR * scale

    def _log(self, now):
        agg = self.aggregate
        row = {"round": self.done, "wall_s": round(now, 6), "updates": agg.updates,
               "objective": agg.objective()}
        extra = agg.trace()
        api.check_hook(agg, "trace", extra, row)
        row.update(extra)
        self.trace.append(row)

    def checkpoint(self):
        """Every rank's state at this round boundary, the pending syncs applied first; the
        rounds in flight stay so, their results received now (the workers are past them)
        and kept with their tasks. The workers write theirs while the run goes on; the
        manifest follows when every part is on disk (:meth:`_written`)."""
        tp, tag = self.tp, f"r{self.done:012d}"
        if self.ckpt_wait is not None:  # (at shutdown: the last one replaces it)
            self.superseded.add(self.ckpt_wait["tag"])
        while len(self.held) < len(self.inflight):
            self.held.append(self._receive(self.inflight[len(self.held)][0]))
        if any(self.pending):
            self._step(None, None)
        tp.broadcast(W.Checkpoint(self.folder, tag))
        loop = self._loop()
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

    def _loop(self):  # the loop's state, as a checkpoint keeps it
        return {"done": self.done, "elapsed": self._now() if self.done else self.elapsed0,
                "trace": json.dumps(self.trace, default=lambda v: v.item()),  # (NumPy's)
                "versions": np.array(self.versions, np.int64).reshape(-1, 3),
                "first": self.first, "best": self.best,
                "last_log": self.last_log,
                # the rounds in flight: (round, task, newest, oldest, [(worker, partial)])
                "inflight": [(r, task, h[1], h[2], h[4])
                             for (r, task), h in zip(self.inflight, self.held)]}

    def _written(self, written):  # workers' parts now on disk: the manifest once all are
        wait = self.ckpt_wait
        for w, tag, entry in written:
            if tag in self.superseded:
                continue
            if wait is None or tag != wait["tag"]:
                raise RuntimeError(f"worker {w} wrote checkpoint {tag}, none was pending")
            wait["parts"][w + 1] = entry
        if wait is not None and all(p is not None for p in wait["parts"]):
            if self.writes:
                _ckpt.write_manifest(self.folder, {
                    "round": wait["round"], "parts": wait["parts"],
                    "checkpoint_every": self.every, "flags": self.flags or {},
                    "inputs": self.inputs,
                    "engine": {"app": self.app, "workers": self.W,
                               "staleness": self.staleness}, "time": time.time()})
            self.ckpt_wait = None

    def shutdown(self):
        tp = self.tp
        if self.every and self.reason in RESUMABLE and self.ckpt_round != self.done \
                and not self.stop_ckpt:
            self.checkpoint()  # where it stopped: resumed, it goes on from here
        if any(self.pending):
            self._step(None, None)
        tp.broadcast(W.Collect())
        if self.K > 1:
            self.schedule.stop()
        # rank 0's, then each worker rank's (under MPI; one entry in one process), up to
        # the collect request: what every rank sent, some rank received
        traffic = [] if self.rep else [W.rank_usage(tp.traffic)]  # (leaderless: the workers')
        replies = [tp.recv(w) for w in range(self.W)]
        if self.K > 1:  # then the other scheduler ranks'
            traffic += self.schedule.close()
        collected = [r.model for r in replies]
        traffic += [r.usage for r in replies if r.usage is not None]
        self._written([x for r in replies for x in r.written])  # every part is written now
        if self.ckpt_wait is not None:
            raise RuntimeError("a checkpoint's parts were never all written")
        for rank, entry in enumerate(traffic):
            entry["rank"] = rank
        wall = time.perf_counter() - self.t0
        agg = self.aggregate
        model = agg.finish(collected)
        api.check_hook(agg, "finish", model, ())
        # the last row is the final model's, as the summary (finish may score it exactly)
        if self.trace and self.trace[-1]["round"] == self.done:
            self.trace.pop()
        self._log(wall)
        self.progress.show(wall, self.done, agg.updates, agg.objective(), final=True)
        extra = agg.summary()
        api.check_hook(agg, "summary", extra, api.Result.ENGINE)
        extra = dict(extra)
        if self.rebal:
            extra.update(rebalances=self.rebalances, rows_per_worker=self.rows)
        if self.rep:
            extra.update(scheduler="replicated", schedule_digest=f"{self.digest:08x}",
                         digest_checks=self.digest_checks)
        if self.K > 1:
            extra.update(schedulers=self.K)
        return api.Result(app=self.app, ranks=tp.size if tp.is_mpi else 1, workers=self.W,
                      staleness=self.staleness, rounds=self.done, updates=int(agg.updates),
                      wall_s=wall, objective=float(agg.objective()),
                      stop_reason=self.reason, model=model, extra=extra,
                      trace=self.trace, signal=self.signum, traffic=traffic,
                      versions=np.array(self.versions, dtype=np.int64).reshape(-1, 3))


_WARM = set()  # the Update classes whose kernels this process has loaded
_POOLS = {}  # the thread pools' controller, by len(sys.modules) when it was made


def _one_thread():
    """threadpool_limits(1), from a controller kept while no module is imported (its
    scan of the loaded libraries is a short fit's fixed cost)."""
    key = len(sys.modules)
    if key not in _POOLS:
        _POOLS.clear()
        _POOLS[key] = ThreadpoolController()
    return _POOLS[key].limit(limits=1)


class Signals:
    """SIGINT and SIGTERM set ``signum`` (the loop stops at the end of the round), a second
    raises KeyboardInterrupt. Only in the main thread."""

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


def run(setup, update, *, workers=None, staleness=0, max_rounds=None, time_limit=None,
        tol=0.0, out=None, quiet=False, app="custom", log_interval=0.1, mpi=None,
        checkpoint_every=None, resume=False, stall_warn=300.0, flags=None, threads=True,
        seed=0, scheduler="rank", rebalance=False, rebalance_every=5.0, schedulers=1,
        label=None):
    """Run an app, in this process (``workers`` simulated workers, each on a thread of
    its own with ``threads``, bit for bit the same) or, launched by ``mpiexec -n N``, on
    N ranks (``mpi``: None detects ``mpiexec``, False forces one process). The
    parameters are declared, with their meaning, in :data:`strads.params.ENGINE`.

    ``setup(ctx)`` runs on the scheduler rank (``scheduler="replicated"``: on every
    rank), is told the run's :class:`Context` and returns ``(schedule, aggregate,
    shards)``, one shard per worker (K schedules with ``schedulers`` K:
    :meth:`Schedule.combine`); ``update`` is the :class:`Update` subclass the workers
    make from their shard. ``label``: the progress line's name (default: ``app``).
    ``flags``: the command line's, which a ``resume`` must repeat but for
    :data:`strads.params.RESUME_MAY_CHANGE`. A signal or a diverged objective stops the
    run at the end of the round (docs/failures.md).

    Returns the :class:`Result`; under MPI, None on every rank but 0 (with
    ``"replicated"``: on every rank, ``result.rank`` says which; rank 0 writes ``out``).
    Under MPI an exception on any rank prints its traceback (a :class:`DataError`: one
    line) and aborts the whole job.
    """
    # (out: any path, checked where it is written)
    _params.check(_params.ENGINE, {k: v for k, v in locals().items() if k != "out"})
    if max_rounds is None:  # no limit: the schedule, tol or time_limit ends the run
        max_rounds = sys.maxsize
    if out is not None and not os.fspath(out):
        raise DataError("--out '': not a folder name")
    if (checkpoint_every or resume) and not out:
        raise DataError("checkpoints need an output folder: pass --out DIR")
    if rebalance and checkpoint_every:
        raise DataError("--rebalance and --checkpoint-every cannot be used together yet "
                        "(a checkpoint keeps the rows where setup put them)")
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
              schedulers=int(schedulers), label=label or app)

    if mpi is None:
        mpi = _transport.mpi_world_size() > 1
    if mpi and schedulers > 1 and schedulers >= _transport.mpi_world_size():
        raise DataError(f"--schedulers {schedulers} under mpiexec -n "
                        f"{_transport.mpi_world_size()}: no rank is left for a worker "
                        f"(ranks 0..{schedulers - 1} schedule)")
    setup, update = _test_hook(setup, update)
    if not (isinstance(update, type) and issubclass(update, api.Update)):
        # (each worker makes its own from its shard)
        raise TypeError((f"{update.__name__} is not a strads.Update: subclass it (class "
                         f"{update.__name__}(strads.Update))") if isinstance(update, type) else
                        "update must be a subclass of strads.Update, got an instance of "
                        f"{type(update).__name__}")
    refused = _transport.start_together(stall=(app, stall_warn)) if mpi else None
    if refused:  # another rank refused before its run (that rank says why)
        e = DataError(refused[1])
        e.rank = refused[0]
        raise e
    if mpi and os.environ.get("STRADS_LAUNCH"):  # the launcher watches for a lost rank
        _launch().heartbeat()
    memory.keep_freed_memory()
    # One worker is one core: BLAS calls inside kernels (a Gram matrix, a solve) must not
    # start threads of their own, which under mpiexec would oversubscribe the cores.
    with _one_thread(), Signals() as signals:
        if not mpi:
            result = _in_process(setup, update, workers, threads, signals, kw)
        else:
            result = _under_mpi(setup, update, scheduler, signals, kw)
    if result is not None and result.rank == 0 and result.stop_reason in (
            "interrupted", "diverged"):  # (leaderless: every rank has the result)
        what = (f"interrupted by {signal.Signals(result.signal).name}"
                if result.stop_reason == "interrupted" else
                f"stopped: the objective diverged ({result.objective:.6g})")
        sys.stderr.write(f"[{app}] {what} at round {result.rounds}"
                         + (f"; outputs in {out}" if out else "") + "\n")
    return result


#: names the hook of :func:`_test_hook`
TEST_HOOK = "STRADS_TEST_HOOK"


def _test_hook(setup, update):
    """For tests only, where monkeypatch cannot reach (the ranks of an ``mpiexec`` job):
    ``STRADS_TEST_HOOK=MODULE:FUNCTION[:ARG...]`` runs ``FUNCTION(setup, update, *ARGS)``,
    which returns the ``(setup, update)`` to run instead (tests/faults.py)."""
    spec = os.environ.get(TEST_HOOK)
    if not spec:
        return setup, update
    module, _, name = spec.partition(":")
    name, *args = name.split(":")
    try:
        hook = getattr(importlib.import_module(module), name, None) if name else None
    except ImportError:
        hook = None
    if not callable(hook):
        raise DataError(f"{TEST_HOOK}={spec!r}: expected MODULE:FUNCTION[:ARG...] naming "
                        "a function that Python can import")
    return hook(setup, update, *args)


def _drive(tp, setup, update, **kw):
    driver = Driver(tp, setup, update, **kw)
    driver.init()
    driver.pipeline()
    return driver.shutdown()


def _in_process(setup, update, workers, threads, signals, kw):
    workers = 1 if workers is None else workers
    limit = _transport.max_threads() if threads and workers > 1 else None  # (2 files)
    if limit is not None and workers > limit:  # (before a pool a worker: minutes, GBs)
        raise DataError(f"workers {workers}: more worker threads than this process may "
                        f"start ({limit:,}: ulimit -u, or the kernel's threads-max or pid_max)")
    _outputs.check_out(kw["out"])
    tp = _transport.InProcess(int(workers), threads=threads)
    tp.handlers = [W.WorkerHost(update, signals, w, tp.peers(w)).handle
                   for w in range(tp.n_workers)]
    try:
        result = _drive(tp, setup, update, signals=signals, **kw)
    except BaseException:
        tp.close(wait=False)
        raise
    tp.close()
    if kw["out"]:
        result.write(kw["out"])
    return result


def _under_mpi(setup, update, scheduler, signals, kw):
    """Every rank of the job: the driver on rank 0 (leaderless: on every rank), the
    others serving it. An exception on any rank ends the job; with ULFM a lost rank does
    not (:func:`launch.recover`)."""
    out, rep = kw["out"], scheduler == "replicated"
    comm = _transport.world()
    while True:
        tp = None
        try:
            stall = (kw["app"], kw["stall_warn"])
            tp = _transport.Replicated(comm, stall) if rep else _transport.MPITransport(
                comm, schedulers=kw["schedulers"], stall=stall)
            result = None
            if rep:
                tp.handler = W.WorkerHost(update, signals, tp.rank, tp.peers,
                                          tp.traffic).handle
            if rep or tp.rank == 0:
                _outputs.check_out(out)
                result = _drive(tp, setup, update, signals=signals,
                                **{**kw, "quiet": kw["quiet"] or tp.rank > 0})
                result.rank = tp.rank
                if _launch().recoveries:
                    result.extra["recoveries"] = _launch().recoveries
                if out and tp.rank == 0:  # (leaderless: rank 0 writes)
                    result.write(out)
            elif tp.rank < kw["schedulers"]:
                W.schedule_serve(tp, signals)
            else:
                W.serve(tp, update, signals, kw["app"], kw["stall_warn"])
            tp.close()
            return result
        except BaseException as exc:  # any rank: end the whole job, never hang
            if _transport.rank_lost(exc) and _transport.ulfm():
                comm, resume = _launch().recover(comm, tp, kw)
                kw = {**kw, "resume": resume}
                continue
            if tp is None:
                raise
            if isinstance(exc, KeyboardInterrupt):
                tp.abort("interrupted again: aborting", 130, brief=True)
            if isinstance(exc, ScheduleDivergence) and tp.rank:
                time.sleep(1.0)  # every rank found it: rank 0 says so, once
                os._exit(1)
            brief = isinstance(exc, (DataError, ScheduleDivergence))
            if rep and tp.rank and isinstance(exc, DataError):
                time.sleep(2.0)  # every rank ran the same setup: rank 0 says it, once
            tp.abort(exc, 2 if isinstance(exc, DataError) else 1, brief=brief)

