"""What an app is made of: a :class:`Schedule`, an :class:`Update` per worker and an
:class:`Aggregate`, made by ``setup(ctx)``; the contract: docs/extending.md."""
import math
import time
from collections import deque
from dataclasses import dataclass, field

import numpy as np

from . import checkpoint as _ckpt
from . import outputs as _outputs
from . import transport as _transport


class _Piece:
    """What the three pieces share: their state, for checkpoints, and their clock."""

    #: attributes that setup() rebuilds identically (data), left out of checkpoints
    checkpoint_skip = ()

    #: The time (seconds since the epoch) a schedule's or an aggregate's decisions read
    #: (in a leaderless run: the ranks' agreed time, so that every rank decides alike).
    clock = staticmethod(time.time)

    def state(self):
        """What a checkpoint keeps: by default every attribute that can change
        (:func:`strads.checkpoint.picked`)."""
        return _ckpt.picked(self)

    def resume_on(self, n_workers, round):
        """After :meth:`load_state` of a checkpoint written by another number of
        workers at ``round``: a schedule or aggregate whose state depends on it adapts."""

    def load_state(self, state):
        """Restore what :meth:`state` returned, on an object fresh from setup(): an array
        into the one setup() made where it fits, so that an array two pieces share (a
        schedule reading the aggregate's) stays one; anything else rebound."""
        for k, v in state.items():
            cur = self.__dict__.get(k)
            if (type(v) is np.ndarray and type(cur) is np.ndarray and cur.flags.writeable
                    and (cur.shape, cur.dtype) == (v.shape, v.dtype)):
                cur[...] = v
            else:
                self.__dict__[k] = v


@dataclass(frozen=True)
class Context:
    """What ``setup(ctx)`` is told of the run (docs/extending.md, "The contract")."""
    n_workers: int
    staleness: int = 0
    seed: int = 0
    n_schedulers: int = 1


class Schedule(_Piece):
    """Chooses what the workers do next, on the scheduler rank; reads the aggregate's
    state, never writes it. ``total_rounds``, if known, gives the progress line its ETA."""

    total_rounds = None

    def begin(self, reports):
        """Called once before the first round (and before a resume restores the state)
        with every worker's :meth:`Update.report`, in worker order."""

    def schedule(self, round):
        """Return the task for ``round``: one message for every worker, or a list with
        one message per worker, or None when there is nothing left to do."""
        raise NotImplementedError

    # -- several scheduler ranks (``--schedulers K``): optional (docs/extending.md)
    def feedback(self, news):
        """With several schedulers: what the aggregate told this schedule after a round
        (:meth:`Aggregate.feedback`), in round order, before its next ``schedule``."""

    @staticmethod
    def combine(parts):
        """With several schedulers: one round's task from their ``schedule(round)``
        answers, in scheduler order (None: the run ends)."""
        raise NotImplementedError


class Update(_Piece):
    """One worker's share of the data and the kernel that works on it, made on the worker
    from its shard. ``apply`` receives each aggregated sync in order, ``update`` computes
    the partial result of one task, ``collect`` returns the worker's part of the model.
    ``self.peers`` (set before ``__init__``): the workers' collectives
    (:class:`strads.transport.Peers`)."""

    peers = _transport.Peers()

    def __init__(self, shard):
        self.shard = shard

    def report(self):
        """Small facts for the scheduler once this worker is set up (its rows' count, a
        dimension it read): the schedule's and the aggregate's ``begin`` get them."""

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

    # -- resuming on another number of workers: optional
    #: the state arrays whose first axis runs over this worker's rows, in order: what
    #: the default :meth:`reshard` carries over (the rest is this worker's fresh state)
    row_state = None

    def reshard(self, olds, first):
        """Resume from a checkpoint written by another number of workers, on an Update
        fresh from its new shard. ``olds``: ``(first row, rows, state)`` of each old
        worker whose rows overlap this worker's (``first``: its first row over all
        workers; for an app without ``rows``, every old worker's, ``first`` None). Every
        worker calls it at once. Default: each array of ``row_state`` cut from the old
        workers' (:func:`rows_of`), then :meth:`resharded`."""
        if self.row_state is None or self.rows is None:
            raise _ckpt.CheckpointError(
                f"{type(self).__name__} cannot move its state to another number of "
                "workers: " + ("it defines row_state but not rows (the number of rows "
                               "this worker holds)" if self.row_state else
                               "it defines neither row_state nor reshard"))
        for name in self.row_state:
            setattr(self, name, rows_of(olds, first, self.rows, name))
        self.resharded()

    def resharded(self):
        """After the default :meth:`reshard`: derive what depends on the row state."""

    @classmethod
    def warmup(cls):
        """Compile every kernel (numba, ``cache=True``); the first worker runs it first."""

    def apply(self, sync):
        pass

    def update(self, task):
        raise NotImplementedError

    def collect(self):
        return {}


def rows_of(olds, first, n, name):
    """Rows ``first .. first + n`` of the state array ``name`` of old workers' parts
    (``(first row, rows, state)`` in order, as :meth:`Update.reshard` gets them)."""
    pieces = []
    for start, count, state in olds:
        a = state[name]
        if a.shape[0] != count:
            raise ValueError(f"{name}: {a.shape[0]} rows in a part of {count}")
        lo, hi = max(first - start, 0), min(first + n - start, a.shape[0])
        if hi > lo:
            pieces.append(a[lo:hi])
    out = np.concatenate(pieces) if pieces else np.empty((0,) + a.shape[1:], a.dtype)
    if out.shape[0] != n:
        raise ValueError(f"{name}: {out.shape[0]} rows from the checkpoint for {n}")
    return out


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

    def converged(self, tol):
        """Asked after every aggregated round until the run is stopping, whatever ``tol``.
        Default: the objective moved by at most ``tol`` (relative) over the last 20
        rounds (a window: one round may touch only parameters already optimal)."""
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


def check_app(app, schedule, update_cls, aggregate):
    """Refuse, before any work, an app that lacks a method the engine calls: one error
    naming every one missing."""
    for obj, base in ((schedule, Schedule), (aggregate, Aggregate)):
        if isinstance(obj, type):
            raise TypeError(f"setup returned the class {obj.__name__}, not an instance of "
                            f"it (a strads.{base.__name__})")
        if not isinstance(obj, base):
            raise TypeError(f"{type(obj).__name__} is not a strads.{base.__name__}: "
                            f"subclass it (class {type(obj).__name__}(strads.{base.__name__}))")
    missing = []
    for obj, base, name in ((schedule, Schedule, "schedule"), (update_cls, Update, "update"),
                            (aggregate, Aggregate, "aggregate")):
        cls = obj if isinstance(obj, type) else type(obj)
        if getattr(cls, name, None) in (None, getattr(base, name)):
            missing.append(f"{cls.__name__}.{name}")
    if missing:
        raise TypeError(f"the app {app!r} is not complete: missing {' and '.join(missing)} "
                        "(see strads.Schedule, strads.Update and strads.Aggregate)")


def check_hook(aggregate, hook, got, taken):
    """What an Aggregate's ``hook`` (trace, summary, finish) returned: a dict with none
    of the engine's own keys ``taken`` (it would replace them), a trace's values CSV
    cells, a model's arrays without objects."""
    name = f"{type(aggregate).__name__}.{hook}()"
    if not isinstance(got, dict):
        raise TypeError(f"{name} returned {type(got).__name__}, not a dict")
    clash = sorted(map(str, set(got) & set(taken)))
    if clash:
        raise TypeError(f"{name} returned {clash[0]!r}, one of the engine's own fields")
    for k, v in got.items() if hook == "trace" else ():
        if not (v is None or isinstance(v, (int, float, str, np.number, np.bool_))):
            raise TypeError(f"{name} returned {type(v).__name__} for {k!r}: a trace.csv "
                            "cell is a number or a string")
    for k in got if hook == "finish" else ():
        if not isinstance(k, str):
            raise TypeError(f"{name} returned the key {k!r}: model.npz names each array "
                            "by a str")
    for k, v in got.items() if hook == "finish" else ():
        try:
            ok = not np.asarray(v).dtype.hasobject
        except ValueError:  # (a ragged list)
            ok = False
        if not ok:
            raise TypeError(f"{name} returned objects for {k!r}: model.npz holds arrays "
                            "of numbers or strings (no pickles)")


def check_sync(aggregate, update_cls):
    """A sync that the workers would not apply: refused, naming the hook."""
    if update_cls.apply is Update.apply:
        raise TypeError(f"{type(aggregate).__name__}.aggregate returned a sync for the "
                        f"workers, but {update_cls.__name__} does not define apply(sync): "
                        "they would ignore it")


def split_balanced(counts, n_parts):
    """Contiguous blocks of rows (documents, users, samples) with about equal sums of
    ``counts`` (their non-zeros, ratings or tokens), each at least one row long when
    there are enough rows; returns the n_parts + 1 offsets. For an app's setup()."""
    n = counts.shape[0]
    cum = np.concatenate([[0], np.cumsum(counts)])
    cuts = np.searchsorted(cum, np.linspace(0, cum[-1], n_parts + 1), side="right") - 1
    cuts[0], cuts[-1] = 0, n
    if n < n_parts:  # (some parts empty: offsets non-decreasing in [0, n])
        return np.maximum.accumulate(np.clip(cuts, 0, n)).astype(np.int64)
    for k in range(1, n_parts):
        cuts[k] = min(max(cuts[k], cuts[k - 1] + 1), n - (n_parts - k))
    return cuts.astype(np.int64)


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
    versions: np.ndarray = None  # a row a round: (round, newest, oldest version)
    signal: int = 0  # the signal that stopped the run (stop_reason "interrupted")
    traffic: list = field(default_factory=list)  # per rank: bytes, messages, peak RSS
    rank: int = 0  # leaderless: the rank that holds this copy (rank 0 prints and writes)

    FIELDS = ("app", "ranks", "workers", "staleness", "rounds", "updates", "wall_s",
              "objective", "stop_reason")
    #: summary.json's fields of the engine's own: no app's summary() replaces them
    ENGINE = FIELDS + ("updates_per_s", "max_staleness_seen", "traffic", "rebalances",
                       "rows_per_worker", "scheduler", "schedule_digest", "digest_checks",
                       "schedulers", "recoveries")

    def summary(self):
        s = {k: getattr(self, k) for k in self.FIELDS}
        s["updates_per_s"] = self.updates / self.wall_s if self.wall_s > 0 else 0.0
        s["max_staleness_seen"] = int((self.versions[:, 0] - self.versions[:, 2]).max()
                                      if len(self.versions) else 0)
        s["traffic"] = self.traffic
        s.update(self.extra)
        return s

    def write(self, out):
        """Write summary.json, trace.csv and model.npz into ``out``, all or nothing."""
        _outputs.write(out, self.summary(), self.trace, self.model)
