"""Moving messages between the scheduler and the workers: the only module that uses MPI.

A message is any picklable Python structure. It is pickled with protocol 5 and
out-of-band buffers, so the pickle itself holds only the structure (keys, dtypes,
shapes, small scalars) while every contiguous NumPy array -- also those inside
scipy.sparse matrices -- travels as a raw buffer (``Isend``/``Irecv`` of bytes), never copied into
the pickle (a strided view is pickled by value).

Two transports share one interface:

* :class:`InProcess` simulates W workers in the calling process. A message to a worker
  is handled at once and its reply queued, so a run is deterministic and does the same
  arithmetic, in the same order, as under MPI.
* :class:`MPITransport` puts the scheduler on rank 0 and one worker on each other rank.

Waiting is polite: MPICH's blocking calls poll a core at full speed, which with more
ranks than cores starves the ranks that compute. When every rank is on one Linux host,
each has a *doorbell* (an anonymous pipe, which no file backs, opened by its peers
through /proc): a sender rings the receiver's after posting a message,
with the number of messages it has posted to it so far, and a rank waiting for a message
sleeps in ``select`` until that sender has rung, using no CPU, then tests with short
sleeps for the microseconds until MPI shows the message (polling with sleeps cost the MF
scheduler 0.17 s of CPU in a 2.5 s run and added up to a sleep's length to every hop).
Elsewhere (ranks on several hosts) a wait tests the request, yielding the core between
tests for the first millisecond (only when the host has a core for every rank), then
sleeping with exponential back-off from 10 us to 200 us. A transfer under way is tested
without sleeping for up to 50 ms: without MPICH's single-copy transfers (CMA) the data
moves in small steps, each needing both sides' MPI calls, and a receiver nudges a sender
asleep on its doorbell. ``STRADS_YIELD_S`` and ``STRADS_MAX_SLEEP`` set the two
thresholds, ``STRADS_DOORBELL=0`` turns doorbells off.
"""
import os
import pickle
import select
import socket
import sys
import time
import traceback
from collections import deque

import numpy as np

TAG = 11
_ALIGN = 64
YIELD_S = float(os.environ.get('STRADS_YIELD_S', 1e-3))
MAX_SLEEP = float(os.environ.get('STRADS_MAX_SLEEP', 2e-4))
# A sleeper wakes at least this often without a ring (a ring is lost only when the
# receiver's pipe is full; every 2 ms measurably slowed the worker sharing a core with
# the scheduler).
BELL_TIMEOUT = 2e-2
NUDGE_S = 1e-4
# the longest a rank keeps testing, without sleeping, a transfer under way
TRANSFER_SPIN_S = 0.05


def encode(obj):
    """Split ``obj`` into a small pickle and the list of its array buffers."""
    bufs = []
    head = pickle.dumps(obj, protocol=5, buffer_callback=bufs.append)
    return head, [b.raw() for b in bufs]


def decode(head, bufs):
    return pickle.loads(head, buffers=bufs)


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
    return decode(parts[0].tobytes(), [memoryview(p) for p in parts[1:]])


def _copy(obj):
    """What a receiver sees: the same structure with its own copies of the arrays (a
    read-only array is the sender's promise that it never changes, and is shared).
    Plain containers of arrays and scalars are copied directly (the common case, and
    several times cheaper than a pickle round trip); anything else goes through one."""
    if isinstance(obj, np.ndarray):
        if not obj.flags.writeable and obj.dtype != object:
            return obj  # the sender marked it never to change (a shard's data): shared
        return obj.copy(order="K") if obj.dtype != object else _pickled(obj)
    if isinstance(obj, (int, float, str, bool, bytes, type(None), np.generic)):
        return obj
    if type(obj) is dict:
        return {k: _copy(v) for k, v in obj.items()}
    if type(obj) in (list, tuple):
        return type(obj)(_copy(v) for v in obj)
    return _pickled(obj)


def _pickled(obj):
    head, bufs = encode(obj)
    return decode(head, [bytearray(b) for b in bufs])


def mpi_world_size():
    """World size announced by the launcher, without initialising MPI (0: not launched)."""
    for var in ("PMI_SIZE", "OMPI_COMM_WORLD_SIZE", "PMIX_SIZE"):
        if os.environ.get(var, "").isdigit():
            return int(os.environ[var])
    return 0


def new_traffic():
    """What a rank has sent and received (whole frames: pickle, buffers, framing)."""
    return {"bytes_sent": 0, "bytes_received": 0, "messages_sent": 0, "messages_received": 0}


class InProcess:
    """W simulated workers in this process; ``handlers[w](msg)`` returns the reply or None.

    With ``threads`` each worker runs on a thread of its own (numba kernels that release
    the GIL then use a core each): a message is copied, queued to its worker's thread,
    and the scheduler goes on; ``recv(w)`` waits for that worker's next reply. Each
    worker still handles its messages in order and the engine aggregates in worker
    order, so the arithmetic is that of the sequential run, bit for bit. Nothing crosses
    a process boundary, so its traffic stays zero."""

    is_mpi = False

    def __init__(self, n_workers, threads=False):
        self.traffic = new_traffic()
        self.n_workers = n_workers
        self.handlers = [None] * n_workers
        self._replies = [deque() for _ in range(n_workers)]
        self._pools = None
        if threads and n_workers > 1:
            from concurrent.futures import ThreadPoolExecutor
            self._pools = [ThreadPoolExecutor(1, thread_name_prefix=f"strads-worker-{w}")
                           for w in range(n_workers)]

    def _handle(self, w, msg):
        reply = self.handlers[w](msg)
        return None if reply is None else _copy(reply)

    def send(self, w, msg):
        if self._pools is not None:
            self._replies[w].append(self._pools[w].submit(self._handle, w, _copy(msg)))
            return
        reply = self._handle(w, _copy(msg))
        if reply is not None:
            self._replies[w].append(reply)

    def send_all(self, msg):
        for w in range(self.n_workers):
            self.send(w, msg)

    def recv(self, w, watch=None):
        if self._pools is None:
            return self._replies[w].popleft()
        while True:  # a step without a task answers nothing: skip its None
            reply = self._replies[w].popleft().result()
            if reply is not None:
                return reply

    def close(self, wait=True):
        """Stop the worker threads; ``wait=False`` (an error, a second Ctrl-C) leaves a
        kernel still running to finish on its own."""
        for pool in self._pools or ():
            pool.shutdown(wait=wait, cancel_futures=True)
        self._pools = None


class Watch:
    """Calls ``warn(seconds waited)`` every ``seconds`` of one wait (a stalled peer)."""

    def __init__(self, seconds, warn):
        self.seconds, self.warn = seconds, warn
        self.t0 = time.perf_counter()
        self.next = self.t0 + seconds

    def __call__(self):
        now = time.perf_counter()
        if now >= self.next:
            self.next = now + self.seconds
            self.warn(now - self.t0)


def _wait(test, spin=True, watch=None):
    """Poll ``test()`` until true without spinning a core: yield the core while the wait
    is short (a reply is often microseconds away; only with ``spin``, a core for every
    rank), then sleep with back-off."""
    if test():
        return
    t0 = time.perf_counter()
    delay = 1e-5
    while not test():
        if spin and time.perf_counter() - t0 < YIELD_S:
            os.sched_yield()
        else:
            time.sleep(delay)
            delay = min(2 * delay, MAX_SLEEP)
            if watch is not None:
                watch()


def _spin_until(test, seconds):
    """Test, yielding the core between tests, until true (-> True) or ``seconds`` pass."""
    t0 = time.perf_counter()
    while not test():
        if time.perf_counter() - t0 > seconds:
            return False
        os.sched_yield()
    return True


class _Bells:
    """This rank's doorbell and its peers': anonymous pipes, which no file backs, so a
    rank killed at any moment leaves nothing behind (named pipes in the temp directory
    were left there when a rank died during start-up). A peer opens a rank's pipe
    through ``/proc/PID/fd/N`` (Linux). A pipe holds 64 KiB, 8,192 rings (Linux's
    datagram sockets, tried too, queue only 10, fewer than a staleness can put in
    flight)."""

    def __init__(self):
        self.mine, self._keep = os.pipe()  # our own write end: never an end-of-file
        os.set_blocking(self.mine, False)
        self.peers = {}

    def open_peers(self, ends, rank):
        """``ends``: every rank's (pid, read end)."""
        for r, (pid, fd) in enumerate(ends):
            if r != rank:
                self.peers[r] = os.open(f"/proc/{pid}/fd/{fd}", os.O_WRONLY | os.O_NONBLOCK)

    def fileno(self):
        return self.mine

    def ring(self, dest, who, count):
        try:
            os.write(self.peers[dest], np.array([who, count], dtype="<i4").tobytes())
        # full of rings the receiver has not read yet, or closed: that rank no longer
        # waits for anything
        except (BlockingIOError, BrokenPipeError):
            pass

    def rings(self):
        """Every ring so far (whole ones: 8 bytes each, written at once), as (sender,
        count) rows."""
        try:
            got = os.read(self.mine, 1 << 16)
        except BlockingIOError:
            got = b""
        return np.frombuffer(got, dtype="<i4").reshape(-1, 2)

    def close(self):
        for fd in [self.mine, self._keep, *self.peers.values()]:
            os.close(fd)
        self.peers = {}


def _doorbells(comm, hosts):
    """This rank's :class:`_Bells` when every rank runs on one Linux host (``hosts``:
    each rank's) and can open the others' pipes, else None; every rank gets the same
    answer (collective)."""
    from mpi4py import MPI

    rank = comm.Get_rank()
    ok = (len(set(hosts)) == 1 and sys.platform.startswith("linux")
          and os.environ.get("STRADS_DOORBELL", "1") != "0")
    bells = None
    if ok:
        try:
            bells = _Bells()
        except OSError:
            ok = False
    ok = comm.allreduce(ok, op=MPI.LAND)
    if ok:
        ends = comm.allgather((os.getpid(), bells.mine))
        try:
            bells.open_peers(ends, rank)
        except OSError:
            ok = False
        ok = comm.allreduce(ok, op=MPI.LAND)  # also: every rank has opened its peers'
    if not ok and bells is not None:
        bells.close()
        bells = None
    return bells


def _cores():
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


def _fine_timer_slack():
    # Linux rounds sleeps up by the timer slack (50 us by default); ask for 1 us.
    try:
        import ctypes
        ctypes.CDLL(None).prctl(29, 1000, 0, 0, 0)  # PR_SET_TIMERSLACK, ns
    except Exception:  # not Linux: sleeps are merely coarser
        pass


class MPITransport:
    """Rank 0 is the scheduler, rank w+1 runs worker w."""

    is_mpi = True

    def __init__(self, comm=None, doorbell=True):
        from mpi4py import MPI

        self.MPI = MPI
        _fine_timer_slack()
        self.comm = comm if comm is not None else MPI.COMM_WORLD
        self.rank = self.comm.Get_rank()
        self.size = self.comm.Get_size()
        self.n_workers = self.size - 1
        self._pending = []  # sends not yet known complete, with the buffers they read
        _polite_barrier(self.comm)
        hosts = self.comm.allgather(socket.gethostname())
        # yielding between tests only helps when no other rank of this host needs the core
        self._spin = hosts.count(hosts[self.rank]) <= _cores()
        self._bells = _doorbells(self.comm, hosts) if doorbell else None
        # messages per peer: posted to us (as its rings said), received, sent to it
        self._posted, self._received, self._sent = ([0] * self.size for _ in range(3))
        self.traffic = new_traffic()

    def _wait_message(self, source, test, watch=None):
        """Wait for a message from ``source``: asleep on the doorbell where there is one."""
        if self._bells is None:
            return _wait(test, self._spin, watch)
        mine = self._bells
        while not test():
            if self._posted[source] > self._received[source]:
                # rung: the message is microseconds away (the sender's MPI or ours may
                # still be moving it; measured 5-60 us), or a descheduled moment
                return _wait(test, self._spin, watch)
            rung, _, _ = select.select([mine], [], [], BELL_TIMEOUT)
            if not rung:
                if watch is not None:
                    watch()
                continue
            # every ring so far (8 bytes each, written at once): (sender,
            # how many messages it has posted to us), or (-1 - rank, 0), a nudge: a
            # receiver waits for our MPI to move a send of ours along (no single-copy
            # transfers). Rings for other senders count for their own waits.
            rings = mine.rings()
            if (rings[:, 0] < 0).any():
                # a receiver is moving a send of ours: without single-copy transfers the
                # data moves only while both sides call MPI, so keep calling until done
                _spin_until(self._sends_done, TRANSFER_SPIN_S)
            for r, k in rings[rings[:, 0] >= 0]:
                self._posted[r] = max(self._posted[r], k)

    def _sends_done(self):
        self._pending = [p for p in self._pending if not p[0].Test()]
        return not self._pending

    # -- point to point ------------------------------------------------------------
    def _send_to(self, dest, msg, frame=None):
        frame = pack(msg) if frame is None else frame
        self._pending.append((self.comm.Isend([frame, self.MPI.BYTE], dest=dest, tag=TAG), frame))
        self._sent[dest] += 1
        self.traffic["bytes_sent"] += frame.nbytes
        self.traffic["messages_sent"] += 1
        self._ring_bell(dest, self.rank, self._sent[dest])
        self._sends_done()  # forget those complete; the rest progress in later waits

    def _ring_bell(self, dest, who, count=0):
        if self._bells is not None:
            self._bells.ring(dest, who, count)

    def _recv_from(self, source, watch=None):
        status = self.MPI.Status()
        found = []

        def probe():  # a matched message leaves the queue: never match a second
            if not found:
                m = self.comm.improbe(source=source, tag=TAG, status=status)
                if m is not None:
                    found.append(m)
            return bool(found)

        self._wait_message(source, probe, watch)
        self._received[source] += 1
        frame = np.empty(status.Get_count(self.MPI.BYTE), dtype=np.uint8)
        self.traffic["bytes_received"] += frame.nbytes
        self.traffic["messages_received"] += 1
        req = found[0].Irecv([frame, self.MPI.BYTE])
        nudged = time.perf_counter()

        def received():
            # Without single-copy transfers (CMA) a large message moves only while the
            # sender calls MPI too: if it sleeps on its doorbell, nudge it now and then
            nonlocal nudged
            if req.Test():
                return True
            now = time.perf_counter()
            if now - nudged > NUDGE_S:
                nudged = now
                self._ring_bell(source, -1 - self.rank)
            return False

        # under way: no ring will come for the rest of it. Test without sleeping for a
        # while: without single-copy transfers the data moves in small steps, each
        # needing both sides (2 MB: 0.3 ms with both testing, 43 ms with 0.1 ms sleeps)
        if not _spin_until(received, TRANSFER_SPIN_S):
            _wait(received, self._spin)
        return unpack(frame)

    # -- scheduler side ------------------------------------------------------------
    def send(self, w, msg):
        self._send_to(w + 1, msg)

    def send_all(self, msg):
        """The same message to every worker, packed once."""
        frame = pack(msg)
        for w in range(self.n_workers):
            self._send_to(w + 1, None, frame)

    def recv(self, w, watch=None):
        """The next message from worker ``w``; ``watch()`` is called now and then while
        waiting (a :class:`Watch`)."""
        return self._recv_from(w + 1, watch)

    # -- worker side ---------------------------------------------------------------
    def recv_task(self):
        return self._recv_from(0)

    def reply(self, msg):
        self._send_to(0, msg)

    def close(self):
        for req, _ in self._pending:
            _wait(req.Test, self._spin)
        self._pending = []
        if self._bells is not None:
            self._bells.close()
            self._bells = None

    def abort(self, exc, code=1, brief=False):
        """End every rank of the job now, after printing why on this rank's stderr: its
        traceback, or (``brief``: bad input) its message alone."""
        _abort(self.comm, exc, code, brief)


def _polite_barrier(comm):
    """Wait for every rank without spinning: MPICH's blocking collectives poll a core at
    full speed, so ranks that reach a collective early (rank 0 still busy before a fit
    every rank calls) would take the cores from the rank they wait for."""
    _wait(comm.Ibarrier().Test, spin=False)


def _abort(comm, exc, code=1, brief=False):
    rank, size = comm.Get_rank(), comm.Get_size()
    if brief:
        print(f"error: {exc}", file=sys.stderr)
    else:
        tb = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
        print(f"### rank {rank} of {size} on {socket.gethostname()}\n{tb}", file=sys.stderr)
    sys.stderr.flush()
    sys.stdout.flush()
    # Give the launcher a moment to forward what we printed: MPI_Abort kills the job at
    # once, and output still in the launcher's pipes would be lost.
    time.sleep(0.3)
    try:
        comm.Abort(code)
    finally:  # MPI_Abort may return before the launcher kills us: never unwind
        os._exit(code)


class Job:
    """The whole MPI job, for the few collective steps outside the engine's loop (an
    estimator telling the worker ranks whether another fit follows, and giving every
    rank the fitted model): a broadcast from rank 0, and the job's end on an error."""

    def __init__(self):
        from mpi4py import MPI

        self.comm = MPI.COMM_WORLD
        self.rank, self.size = self.comm.Get_rank(), self.comm.Get_size()

    def bcast(self, obj):
        _polite_barrier(self.comm)
        return self.comm.bcast(obj, root=0)

    def abort(self, exc):
        _abort(self.comm, exc)


def mpi_job():
    """A :class:`Job` when launched by ``mpiexec`` with more than one rank, else None."""
    return Job() if mpi_world_size() > 1 else None
