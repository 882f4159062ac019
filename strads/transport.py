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
ranks than cores starves the ranks that compute. Every wait here tests the request,
yielding the core between tests for the first millisecond, then sleeping with
exponential back-off from 10 us to 200 us (``STRADS_YIELD_S``, ``STRADS_MAX_SLEEP``).
"""
import os
import pickle
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


class InProcess:
    """W simulated workers in this process; ``handlers[w](msg)`` returns the reply or None."""

    is_mpi = False

    def __init__(self, n_workers):
        self.n_workers = n_workers
        self.handlers = [None] * n_workers
        self._replies = [deque() for _ in range(n_workers)]

    def send(self, w, msg):
        reply = self.handlers[w](_copy(msg))
        if reply is not None:
            self._replies[w].append(_copy(reply))

    def recv(self, w):
        return self._replies[w].popleft()


def _wait(test):
    """Poll ``test()`` until true without spinning a core: yield the core while the wait
    is short (a reply is often microseconds away), then sleep with back-off."""
    if test():
        return
    t0 = time.perf_counter()
    delay = 1e-5
    while not test():
        if time.perf_counter() - t0 < YIELD_S:
            os.sched_yield()
        else:
            time.sleep(delay)
            delay = min(2 * delay, MAX_SLEEP)


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

    def __init__(self, comm=None):
        from mpi4py import MPI

        self.MPI = MPI
        _fine_timer_slack()
        self.comm = comm if comm is not None else MPI.COMM_WORLD
        self.rank = self.comm.Get_rank()
        self.size = self.comm.Get_size()
        self.n_workers = self.size - 1
        self._pending = []  # sends not yet known complete, with the buffers they read

    # -- point to point ------------------------------------------------------------
    def _send_to(self, dest, msg):
        frame = pack(msg)
        self._pending.append((self.comm.Isend([frame, self.MPI.BYTE], dest=dest, tag=TAG), frame))
        # Forget the sends that have completed; the rest progress in later waits.
        self._pending = [p for p in self._pending if not p[0].Test()]

    def _recv_from(self, source):
        status = self.MPI.Status()
        found = []

        def probe():
            m = self.comm.improbe(source=source, tag=TAG, status=status)
            if m is not None:
                found.append(m)
            return bool(found)

        _wait(probe)
        frame = np.empty(status.Get_count(self.MPI.BYTE), dtype=np.uint8)
        req = found[0].Irecv([frame, self.MPI.BYTE])
        _wait(req.Test)
        return unpack(frame)

    # -- scheduler side ------------------------------------------------------------
    def send(self, w, msg):
        self._send_to(w + 1, msg)

    def recv(self, w):
        return self._recv_from(w + 1)

    # -- worker side ---------------------------------------------------------------
    def recv_task(self):
        return self._recv_from(0)

    def reply(self, msg):
        self._send_to(0, msg)

    def close(self):
        for req, _ in self._pending:
            _wait(req.Test)
        self._pending = []

    def abort(self, exc, code=1, brief=False):
        """End every rank of the job now, after printing why on this rank's stderr: its
        traceback, or (``brief``: bad input) its message alone."""
        if brief:
            print(f"error: {exc}", file=sys.stderr)
        else:
            tb = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
            print(f"### rank {self.rank} of {self.size} on {socket.gethostname()}\n{tb}",
                  file=sys.stderr)
        sys.stderr.flush()
        sys.stdout.flush()
        # Give the launcher a moment to forward what we printed: MPI_Abort kills the
        # job at once, and output still in the launcher's pipes would be lost.
        time.sleep(0.3)
        try:
            self.comm.Abort(code)
        finally:  # MPI_Abort may return before the launcher kills us: never unwind
            os._exit(code)
