"""Moving messages between the scheduler and the workers (the control plane: send,
broadcast, combining gather along a tree of the workers) and among the workers (the data
plane, :class:`Peers`): the only module that uses MPI. :class:`InProcess` runs the workers
on threads with MPI's arithmetic bit for bit; :class:`MPITransport` puts them on ranks
(docs/architecture.md)."""
import contextlib
import os
import pickle
import socket
import sys
import threading
import time
import traceback
from collections import deque

import numpy as np

from ._wait import Waiter, _cores, stall_watch, transfer, wait

TAG = 11  # control plane: rank 0 and a worker, one to one
TREE = 12  # control plane: the rounds, along the workers' tree
SCHED = 13  # rank 0 and another scheduler rank (``schedulers`` > 1)
PROG = ""  # the program's name that starts a one-line error (set by strads.cli.main)
_ALIGN = 64


def encode(obj):
    """Split ``obj`` into a small pickle and the list of its array buffers."""
    bufs = []
    return pickle.dumps(obj, protocol=5, buffer_callback=bufs.append), [b.raw() for b in bufs]


def pack(obj):
    """One contiguous frame: sizes, the pickle, then each buffer at a 64-byte boundary."""
    head, bufs = encode(obj)
    sizes = [len(head)] + [len(b) for b in bufs]
    offsets, pos = [], 8 * (len(sizes) + 1)
    for n in sizes:
        offsets.append(pos)
        pos = -(-(pos + n) // _ALIGN) * _ALIGN
    frame = np.empty(pos, dtype=np.uint8)
    frame[:8 * (len(sizes) + 1)].view(np.int64)[:] = [len(sizes)] + sizes
    for off, n, b in zip(offsets, sizes, [head] + bufs):
        frame[off:off + n] = np.frombuffer(b, dtype=np.uint8)
    return frame


def unpack(frame):
    """Inverse of :func:`pack`; arrays are views into ``frame`` (no copy)."""
    count = int(frame[:8].view(np.int64)[0])
    sizes = frame[8:8 * (count + 1)].view(np.int64)
    parts, pos = [], 8 * (count + 1)
    for n in sizes:
        parts.append(frame[pos:pos + n])
        pos = -(-(pos + n) // _ALIGN) * _ALIGN
    return pickle.loads(parts[0].tobytes(), buffers=[memoryview(p) for p in parts[1:]])


_SCALARS = (int, float, str, bool, bytes, type(None), np.generic)
# the exact types taken without a call (subclasses and other numpy scalars: isinstance)
_PLAIN = frozenset(_SCALARS[:-1] + (np.float64, np.int64))


def _copy(obj):
    """What a receiver sees (docs/architecture.md, "_copy")."""
    t = type(obj)
    if t in _PLAIN:
        return obj
    if t is dict:
        return {k: v if type(v) in _PLAIN else _copy(v) for k, v in obj.items()}
    if t is list or t is tuple:
        out = [v if type(v) in _PLAIN else _copy(v) for v in obj]
        return out if t is list else tuple(out)
    if issubclass(t, tuple) and hasattr(t, "_fields"):  # the engine's named records
        return t(*[v if type(v) in _PLAIN else _copy(v) for v in obj])
    if isinstance(obj, np.ndarray):
        if not obj.flags.writeable and obj.dtype != object:
            return obj  # the sender marked it never to change (a shard's data): shared
        return obj.copy(order="K") if obj.dtype != object else _pickled(obj)
    if isinstance(obj, _SCALARS):
        return obj
    return _pickled(obj)


def _pickled(obj):
    head, bufs = encode(obj)
    return pickle.loads(head, buffers=[bytearray(b) for b in bufs])


def mpi_world_size():
    return launched("SIZE")


def launched(what):
    """The MPI launcher's announcement of ``what`` (RANK, SIZE), read without initialising
    MPI (0: not launched)."""
    for var in (f"PMI_{what}", f"OMPI_COMM_WORLD_{what}", f"PMIX_{what}"):
        if os.environ.get(var, "").isdigit():
            return int(os.environ[var])
    return 0


def new_traffic():
    """What a rank has sent and received (whole frames: pickle, buffers, framing). A
    collective counts as if every rank had sent its part to every other directly."""
    return {"bytes_sent": 0, "bytes_received": 0, "messages_sent": 0, "messages_received": 0}


def _count(traffic, sent=0, received=0, n_sent=0, n_received=0):
    traffic["bytes_sent"] += int(sent)
    traffic["bytes_received"] += int(received)
    traffic["messages_sent"] += int(n_sent)
    traffic["messages_received"] += int(n_received)


class Peers:
    """The workers' data plane, as an Update sees it (``self.peers``): ``rank`` (this
    worker's index) and ``size`` (the number of workers), and collectives that every
    worker must call, in the same order. Messages are any picklable structure; arrays
    travel as buffers and every worker receives its own copies."""

    rank = 0
    size = 1
    #: seconds spent waiting in these collectives (a worker's own work is the rest)
    waited = 0.0

    def allgather(self, obj):
        """Every worker's ``obj``, in worker order."""
        return [obj]

    def allreduce(self, array):
        """The sum of every worker's ``array``, added in worker order: every worker holds
        the same floats, in one process and under MPI."""
        return ordered_sum(self.allgather(array))

    def bcast(self, obj, root=0):
        """Worker ``root``'s ``obj``."""
        return obj

    def shift(self, obj, k=1):
        """Pass ``obj`` k places round the ring: worker w sends to w + k and receives
        from w - k (modulo ``size``), as STRADS hands vocabulary slices on."""
        return obj

    def alltoall(self, pieces):
        """``pieces[o]`` (one per worker) goes to worker o; returns what every worker
        sent this one, in worker order. Sent in ``size - 1`` shifts round the ring (each
        counted as traffic); the list is emptied as its pieces go, freeing them."""
        w, W = self.rank, self.size
        got = [None] * W
        got[w], pieces[w] = pieces[w], None
        for k in range(1, W):
            o = (w + k) % W
            got[(w - k) % W] = self.shift(pieces[o], k)
            pieces[o] = None
        return got


def ordered_sum(parts):
    """The parts' sum in their (the workers') order, in a new array."""
    out = np.array(parts[0], copy=True)
    for p in parts[1:]:
        out += p
    return out


class _Group:
    """The threads of one process's simulated workers, meeting at a barrier. A worker
    that fails breaks the barrier, so the others stop waiting (its error is kept)."""

    def __init__(self, n):
        self.barrier = threading.Barrier(n)
        self.slots = [None] * n
        self.error = None

    def fail(self, exc):
        if self.error is None:
            self.error = exc
        self.barrier.abort()


def on_threads(n, fn, timeout=None):
    """``fn(peers)`` of workers 0..n-1, each on a thread with the in-process collectives
    (as ``--workers n``): their results, or the first error a worker raised (which
    released the others)."""
    group, out = _Group(n), [None] * n

    def work(w):
        try:
            out[w] = fn(_ThreadPeers(group, w, n))
        except BaseException as e:  # noqa: BLE001 (as the engine: release the others)
            group.fail(e)
    ts = [threading.Thread(target=work, args=(w,), daemon=True) for w in range(n)]
    for t in ts:
        t.start()
    for t in ts:
        t.join(timeout)
    if group.error is not None:
        raise group.error
    if any(t.is_alive() for t in ts):
        raise TimeoutError(f"on_threads: a worker still runs after {timeout} s")
    return out


class _ThreadPeers(Peers):
    def __init__(self, group, rank, size):
        self.group, self.rank, self.size = group, rank, size

    def _meet(self, obj):
        """Every worker's obj (copied once, as if sent), then every worker's view of all."""
        if self.size == 1:
            return [_copy(obj)]
        g = self.group
        if g is None:
            raise RuntimeError("the workers' collectives (self.peers) need worker threads: "
                               "run with threads=True")
        g.slots[self.rank] = _copy(obj)
        t0 = time.perf_counter()
        g.barrier.wait()
        got = list(g.slots)
        g.barrier.wait()  # nobody overwrites a slot before every worker has read it
        g.slots[self.rank] = None  # the receivers hold what they took; no third copy kept
        self.waited += time.perf_counter() - t0
        return got

    def allgather(self, obj):
        return [x if w == self.rank else _copy(x) for w, x in enumerate(self._meet(obj))]

    def bcast(self, obj, root=0):
        got = self._meet(obj if self.rank == root else None)
        return got[root] if self.rank == root else _copy(got[root])

    def shift(self, obj, k=1):
        return self._meet(obj)[(self.rank - k) % self.size]


def max_threads():
    """The threads this process may start, at most (``ulimit -u``, the kernel's
    threads-max and pid_max: a thread takes an id; the lowest), or None where the system
    does not say."""
    out = []
    with contextlib.suppress(ImportError, ValueError, OSError, AttributeError):
        import resource

        soft = resource.getrlimit(resource.RLIMIT_NPROC)[0]
        if soft != resource.RLIM_INFINITY and soft > 0:
            out.append(soft)
    for name in ("threads-max", "pid_max"):
        with contextlib.suppress(OSError, ValueError), open(f"/proc/sys/kernel/{name}") as f:
            out.append(int(f.read()))
    return min(out) if out else None


class InProcess:
    """W simulated workers in this process; ``handlers[w](msg)`` returns the reply or None
    (docs/architecture.md, "InProcess")."""

    is_mpi = False

    def __init__(self, n_workers, threads=False):
        self.traffic = new_traffic()
        self.n_workers = n_workers
        self.handlers = [None] * n_workers
        self._replies = [deque() for _ in range(n_workers)]
        self._pools = self._group = None
        if threads and n_workers > 1:
            from concurrent.futures import ThreadPoolExecutor
            self._pools = [ThreadPoolExecutor(1, thread_name_prefix=f"strads-worker-{w}")
                           for w in range(n_workers)]
            self._group = _Group(n_workers)

    def peers(self, w):
        return _ThreadPeers(self._group, w, self.n_workers)

    def _handle(self, w, msg):
        try:
            reply = self.handlers[w](msg)
        except BaseException as exc:
            if self._group is not None:
                self._group.fail(exc)
            raise
        return None if reply is None else _copy(reply)

    def send(self, w, msg):
        if self._pools is not None:
            self._replies[w].append(self._pools[w].submit(self._handle, w, _copy(msg)))
            return
        reply = self._handle(w, _copy(msg))
        if reply is not None:
            self._replies[w].append(reply)

    def broadcast(self, msg):
        for w in range(self.n_workers):
            self.send(w, msg)

    def recv(self, w):
        if self._pools is None:
            return self._replies[w].popleft()
        while True:  # a step without a task answers nothing: skip its None
            fut = self._replies[w].popleft()
            try:
                reply = fut.result()
            except threading.BrokenBarrierError:
                # another worker failed while this one waited for it: report that error
                if self._group is not None and self._group.error is not None:
                    raise self._group.error from None
                raise
            if reply is not None:
                return reply

    def gather(self, combine, watch=None):
        """Every worker's reply to the last broadcast, combined (worker order)."""
        return combine([self.recv(w) for w in range(self.n_workers)])

    def close(self, wait=True):
        """Stop the worker threads; ``wait=False`` (an error, a second Ctrl-C) leaves a
        kernel still running to finish on its own."""
        if self._group is not None and not wait:
            self._group.barrier.abort()
        for pool in self._pools or ():
            pool.shutdown(wait=wait, cancel_futures=True)
        self._pools = None


class Job:
    """The whole MPI job (``comm``, default COMM_WORLD): a broadcast from rank 0 (for
    the few collective steps outside the engine's loop: an estimator telling the worker
    ranks whether another fit follows, giving every rank the model) and the job's end."""

    def __init__(self, comm=None):
        from mpi4py import MPI

        self.MPI = MPI
        self.comm = comm if comm is not None else MPI.COMM_WORLD
        self.rank, self.size = self.comm.Get_rank(), self.comm.Get_size()

    def bcast(self, obj, watch=None):
        """Rank 0's ``obj``; ``watch()`` is called while this rank waits for the others
        (:func:`strads._wait.stall_watch`)."""
        _polite_barrier(self.comm, watch)
        return self.comm.bcast(obj, root=0)

    def abort(self, exc, code=1, brief=False):
        """End every rank of the job now, after printing why on this rank's stderr: its
        traceback, or (``brief``: bad input) its message alone."""
        if brief:
            print(f"{PROG + ': ' if PROG else ''}error: {exc}", file=sys.stderr)
        else:
            tb = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
            print(f"### rank {self.rank} of {self.size} on {socket.gethostname()}\n{tb}",
                  file=sys.stderr)
        sys.stderr.flush()
        sys.stdout.flush()
        # Give the launcher a moment to forward what we printed: MPI_Abort kills the job
        # at once, and output still in the launcher's pipes would be lost.
        time.sleep(0.3)
        with contextlib.suppress(OSError):  # what went wrong is said: not MPICH's
            os.dup2(os.open(os.devnull, os.O_WRONLY), 2)  # "Abort(2) on node ..." after it
        try:
            self.comm.Abort(code)
        finally:  # MPI_Abort may return before the launcher kills us: never unwind
            os._exit(code)


class _OnMPI(Job):
    """What the two transports under MPI share: this rank's traffic, whether it may
    spin."""

    is_mpi = True

    def __init__(self, comm, stall=None):
        from .launch import mapped_shm
        from .outputs import unlink

        super().__init__(comm)
        self.traffic = new_traffic()
        _polite_barrier(self.comm, _start_watch(stall, self.rank))
        # MPICH's shared-memory files, mapped by every rank of the host now: unlinked, they
        # go with the last rank, even when a rank is killed
        unlink(mapped_shm("/proc/self/maps"))
        self.hosts = self.comm.allgather(socket.gethostname())
        # yielding between tests only helps when no other rank of this host needs the core
        self._spin = self.hosts.count(self.hosts[self.rank]) <= _cores()


class MPITransport(_OnMPI):
    """Rank 0 is the scheduler, rank w+1 runs worker w; with ``schedulers`` K > 1,
    ranks 1..K-1 schedule too (they talk to rank 0 alone) and rank w+K runs worker w."""

    def __init__(self, comm=None, doorbell=True, schedulers=1, stall=None):
        super().__init__(comm, stall)
        self.offset = schedulers  # worker w's rank is w + offset
        self.n_workers = self.size - schedulers
        self.round, self._comms = 0, [self.comm]  # (the round a worker rank has seen)
        if self.n_workers < 1:
            raise ValueError(f"{schedulers} scheduler ranks in {self.size}: no worker")
        self._pending = []  # sends not yet known complete, with the buffers they read
        self._waiter = Waiter(self.comm, self.hosts, self._spin, self._sends_done,
                              doorbell)
        # the workers' own communicator, for their data plane
        _polite_barrier(self.comm)
        wcomm = self.comm.Split(0 if self.rank >= self.offset else self.MPI.UNDEFINED,
                                self.rank)
        w = self.worker = self.rank - self.offset
        if w >= 0:  # the workers' binary tree (parent -1: rank 0)
            self.parent = (w - 1) // 2 if w else -1
            self.children = [c for c in (2 * w + 1, 2 * w + 2) if c < self.n_workers]
            self.peers = _MPIPeers(wcomm, self.traffic, self._spin)
            self._comms.append(wcomm)

    def _wrank(self, w):
        """The rank of worker ``w`` (-1: rank 0, the tree's parent of its root)."""
        return 0 if w < 0 else w + self.offset

    def _sends_done(self):
        self._pending = [p for p in self._pending if not p[0].Test()]
        return not self._pending

    # -- point to point ------------------------------------------------------------
    def _send_to(self, dest, msg, frame=None, tag=TAG):
        frame = pack(msg) if frame is None else frame
        self._pending.append((self.comm.Isend([frame, self.MPI.BYTE], dest=dest, tag=tag),
                              frame))
        _count(self.traffic, sent=frame.nbytes, n_sent=1)
        self._waiter.sent(dest)
        self._sends_done()  # forget those complete; the rest progress in later waits

    def _recv_from(self, source, watch=None, tag=TAG, raw=False):
        status = self.MPI.Status()
        found = []

        def probe():  # a matched message leaves the queue: never match a second
            if not found:
                m = self.comm.improbe(source=source, tag=tag, status=status)
                if m is not None:
                    found.append(m)
            return bool(found)

        self._waiter.message(source, probe, watch)
        frame = np.empty(status.Get_count(self.MPI.BYTE), dtype=np.uint8)
        _count(self.traffic, received=frame.nbytes, n_received=1)
        self._waiter.receiving(source, found[0].Irecv([frame, self.MPI.BYTE]).Test)
        return frame if raw else unpack(frame)

    # -- scheduler side ------------------------------------------------------------
    def send(self, w, msg):
        """A message for worker ``w`` alone (its shard, a checkpoint's part name)."""
        self._send_to(self._wrank(w), msg)

    def recv(self, w):
        """Worker ``w``'s next direct reply."""
        return self._recv_from(self._wrank(w))

    def broadcast(self, msg):
        """One message for every worker: one frame to the tree's root, worker 0."""
        self._send_to(self._wrank(0), msg, tag=TREE)

    def gather(self, combine, watch=None):
        """The workers' replies to the last broadcast, combined along the tree."""
        return self._recv_from(self._wrank(0), watch, tag=TREE)

    def to_scheduler(self, k, msg):
        """A message for scheduler rank ``k`` (rank 0 to 1..K-1, and each of them to 0)."""
        self._send_to(k, msg, tag=SCHED)

    def from_scheduler(self, k):
        return self._recv_from(k, tag=SCHED)

    # -- worker side ---------------------------------------------------------------
    def recv_task(self):
        """The next message sent to this worker alone."""
        return self._recv_from(0)

    def reply(self, msg):
        self._send_to(0, msg)

    def recv_broadcast(self, watch=None):
        """The next broadcast, passed on to this worker's children in the tree;
        ``watch(parent)`` gives the wait's watch (its parent: -1 for rank 0)."""
        frame = self._recv_from(self._wrank(self.parent), watch and watch(self.parent),
                                tag=TREE, raw=True)
        for c in self.children:
            self._send_to(self._wrank(c), None, frame, tag=TREE)
        msg = unpack(frame)
        if isinstance(getattr(msg, "round", None), int):  # a Step: the round under way
            self.round = msg.round
        return msg

    def reply_gathered(self, msg, combine, watch=None):
        """Combine this worker's reply with its children's, and pass it up the tree."""
        parts = [msg] + [self._recv_from(self._wrank(c), watch and watch(c), tag=TREE)
                         for c in self.children]
        self._send_to(self._wrank(self.parent), combine(parts), tag=TREE)

    def close(self):
        for req, _ in self._pending:
            wait(req.Test, self._spin)
        self._pending = []
        self._waiter.close()

    def revoke(self):
        """A rank is lost (ULFM): end every operation of every rank on this transport's
        communicators, wherever it waits; forget the sends to the lost."""
        _revoke(self._comms)
        self._pending = []
        self._waiter.close()


class Replicated(_OnMPI):
    """No scheduler rank: every rank is worker ``rank`` and runs the scheduler's loop too
    (docs/architecture.md, "Replicated")."""

    replicated = True

    def __init__(self, comm=None, stall=None):
        super().__init__(comm, stall)
        self.n_workers, self.worker = self.size, self.rank
        self.peers = _MPIPeers(self.comm.Dup(), self.traffic, self._spin)
        self._agree = _MPIPeers(self.comm.Dup(), self.traffic, self._spin)
        self.handler = None
        self.flags = lambda: ()
        self.agreed = ()
        self._mine = deque()  # this rank's replies not yet shared
        self._shared = []

    def send(self, w, msg):
        if w == self.worker:
            self.broadcast(msg)

    def broadcast(self, msg):  # (this rank's worker, at once)
        reply = self.handler(msg)
        if reply is not None:
            self._mine.append(reply)

    def recv(self, w):
        """Worker ``w``'s reply; the loop asks for them in worker order, and the first
        shares every rank's."""
        if w == 0:
            self._shared = self._agree.allgather(self._mine.popleft())
        return self._shared[w]

    def gather(self, combine, watch=None):
        got = self._agree.allgather((self._mine.popleft(), tuple(self.flags())))
        self.allgather_flags = [f for _, f in got]
        self.agreed = tuple(max(col) for col in zip(*self.allgather_flags))
        return combine([r for r, _ in got])

    def allgather(self, obj):
        """Every rank's ``obj`` (the loop's own agreement checks)."""
        return self._agree.allgather(obj)

    def close(self):
        """Rank 0 may still be writing the outputs: every rank waits for the others."""
        _polite_barrier(self.comm)

    def revoke(self):
        _revoke([self.comm, self.peers.comm, self._agree.comm])


class _MPIPeers(Peers):
    """The data plane on the workers' communicator: MPI's non-blocking collectives on
    frames, waited for politely (a transfer under way is tested without sleeping)."""

    def __init__(self, comm, traffic, spin):
        from mpi4py import MPI
        self.MPI, self.comm, self.traffic, self.spin = MPI, comm, traffic, spin
        self.rank, self.size = comm.Get_rank(), comm.Get_size()

    def _wait(self, test):
        t0 = time.perf_counter()
        transfer(test, self.spin)
        self.waited += time.perf_counter() - t0

    def allgather(self, obj):
        frame = pack(obj)
        if self.size == 1:
            return [unpack(frame)]
        mine, sizes = np.array([frame.nbytes], np.int64), np.empty(self.size, np.int64)
        self._wait(self.comm.Iallgather(mine, sizes).Test)
        displs = np.concatenate([[0], np.cumsum(sizes)[:-1]])
        buf = np.empty(int(sizes.sum()), np.uint8)
        self._wait(self.comm.Iallgatherv([frame, self.MPI.BYTE],
                                         [buf, (sizes, displs), self.MPI.BYTE]).Test)
        n = self.size - 1
        _count(self.traffic, sent=frame.nbytes * n, received=buf.nbytes - frame.nbytes,
               n_sent=n, n_received=n)
        return [unpack(buf[d:d + s]) for d, s in zip(displs, sizes)]

    def bcast(self, obj, root=0):
        mine = self.rank == root
        frame = pack(obj) if mine else None
        if self.size == 1:
            return unpack(frame)
        size = np.array([frame.nbytes if mine else 0], np.int64)
        self._wait(self.comm.Ibcast(size, root=root).Test)
        if not mine:
            frame = np.empty(int(size[0]), np.uint8)
        self._wait(self.comm.Ibcast([frame, self.MPI.BYTE], root=root).Test)
        n = self.size - 1
        _count(self.traffic, sent=frame.nbytes * n if mine else 0,
               received=0 if mine else frame.nbytes, n_sent=n if mine else 0,
               n_received=0 if mine else 1)
        return unpack(frame)

    def shift(self, obj, k=1):
        frame = pack(obj)
        if self.size == 1:
            return unpack(frame)
        dest, source = (self.rank + k) % self.size, (self.rank - k) % self.size
        mine, size = np.array([frame.nbytes], np.int64), np.empty(1, np.int64)
        reqs = [self.comm.Isend(mine, dest, tag=1), self.comm.Irecv(size, source, tag=1)]
        self._wait(reqs[1].Test)
        got = np.empty(int(size[0]), np.uint8)
        reqs += [self.comm.Isend([frame, self.MPI.BYTE], dest, tag=2),
                 self.comm.Irecv([got, self.MPI.BYTE], source, tag=2)]
        # (mine, frame and got live until here: the sends read them)
        self._wait(lambda: self.MPI.Request.Testall(reqs))
        _count(self.traffic, sent=frame.nbytes, received=got.nbytes, n_sent=1, n_received=1)
        return unpack(got)


#: whom a rank waits for at a run's or a fit's start (the warning's words)
EVERY_RANK = ("every rank to start {call} (under mpiexec each rank makes the same call: "
              "a rank that skips it, say behind `if rank == 0`, leaves the others waiting)")


def _start_watch(stall, rank):
    """``stall``: (app, seconds, None: no warning): the wait's watch at a run's start."""
    return stall and stall[1] and stall_watch(*stall, None, rank,
                                              EVERY_RANK.format(call="the run"))


def _polite_barrier(comm, watch=None):
    """Wait for every rank without spinning (MPICH's blocking collectives poll a core at
    full speed, taking it from the rank they wait for)."""
    wait(comm.Ibarrier().Test, spin=False, watch=watch)


# -- User-Level Failure Mitigation (docs/elastic.md) ---------------------------------------
def ulfm():
    """Whether a lost rank is reported to the survivors, who may go on: an MPI with ULFM
    (mpi4py's Comm.Shrink) started with it on (Open MPI 5: ``mpiexec --with-ft ulfm``)."""
    from mpi4py import MPI

    on = os.environ.get("OMPI_MCA_mpi_ft_enable", "").lower() in ("1", "true", "yes")
    return on and hasattr(MPI.Comm, "Shrink") and hasattr(MPI, "ERR_PROC_FAILED")


def abort_on_uncaught():
    """Under ``mpiexec``: an exception no code catches ends the whole job (as ``python -m
    mpi4py`` does), rather than leaving the other ranks waiting for this one for ever."""
    default = sys.excepthook

    def hook(*exc):
        default(*exc)
        sys.stderr.flush()
        from mpi4py import MPI  # (initialises MPI if this rank had not yet)

        MPI.COMM_WORLD.Abort(1)

    sys.excepthook = hook


_started = False  # whether this process has agreed to start (start_together) already


def start_together(refusal=None, stall=None):
    """Every rank of an ``mpiexec`` job, once, before its first run: ``refusal`` is the
    line this rank refuses to start with (None: it starts). Returns ``(rank, line)`` of
    the lowest rank that refused, or None. A rank refusing before it reaches the run says
    so here, from the command line's error path, so that the others do not wait for it
    in the transport for ever. Later calls, and runs not under mpiexec, gather nothing
    (a refusal is then rank 0's to say: every rank met it). ``stall``: as
    :class:`MPITransport`'s."""
    global _started
    if _started or mpi_world_size() < 2:
        return None if refusal is None else (0, refusal)
    _started = True
    from mpi4py import MPI

    _polite_barrier(MPI.COMM_WORLD, _start_watch(stall, MPI.COMM_WORLD.Get_rank()))
    return next(((r, m) for r, m in enumerate(MPI.COMM_WORLD.allgather(refusal))
                 if m is not None), None)


def world():
    """The communicator a run starts on: with ULFM a copy of COMM_WORLD, which a lost rank
    revokes (COMM_WORLD itself stays for MPI_Finalize)."""
    from mpi4py import MPI

    return MPI.COMM_WORLD.Dup() if ulfm() else MPI.COMM_WORLD


def rank_lost(exc):
    """Whether ``exc`` (or what it was raised from) is MPI's report of a lost rank: a
    failed peer, or a communicator another survivor revoked on hearing of one."""
    from mpi4py import MPI

    lost = {getattr(MPI, k) for k in ("ERR_PROC_FAILED", "ERR_PROC_FAILED_PENDING",
                                      "ERR_REVOKED") if hasattr(MPI, k)}
    while exc is not None:
        if isinstance(exc, MPI.Exception) and exc.Get_error_class() in lost:
            return True
        exc = exc.__cause__ or exc.__context__
    return False


def _revoke(comms):
    from mpi4py import MPI

    for c in comms:
        if c != MPI.COMM_NULL:
            with contextlib.suppress(MPI.Exception):  # revoked already
                c.Revoke()


def shrink(comm, reached, checkpoint):
    """The survivors' communicator after a lost rank (``comm`` revoked and shrunk), and
    their agreement on the round ``reached`` (the largest) and the new rank 0's
    ``checkpoint()``; -> (communicator, the COMM_WORLD ranks lost, round, checkpoint)."""
    from mpi4py import MPI

    world, lost = MPI.COMM_WORLD.Get_group(), set()
    while True:
        _revoke([comm])
        new = comm.Shrink()
        was, now = (set(g.Translate_ranks(range(g.Get_size()), world))
                    for g in (comm.Get_group(), new.Get_group()))
        lost |= was - now
        try:
            new.Agree(1)
            reached = new.allreduce(reached, op=MPI.MAX)
            at = new.bcast(checkpoint() if new.Get_rank() == 0 else None)
            break
        except MPI.Exception as exc:  # another lost meanwhile: shrink again
            if not rank_lost(exc):
                raise
            comm = new
    _finalize_alone()
    return new, sorted(lost), reached, at


def _finalize_alone():
    """Open MPI 5's MPI_Finalize waits for every process of the job, the lost ones too,
    for ever (open-mpi/ompi#11404); its switch to skip that wait is no MCA parameter:
    set it where the library holds it."""
    import ctypes

    for lib in (None, "libmpi.so.40", "libmpi.so"):
        with contextlib.suppress(OSError, ValueError):
            ctypes.c_bool.in_dll(ctypes.CDLL(lib), "ompi_async_mpi_finalize").value = True
            return


def mpi_job():
    """A :class:`Job` when launched by ``mpiexec`` with more than one rank, else None."""
    return Job() if mpi_world_size() > 1 else None
