"""Waiting without spinning a core away from the ranks that compute (MPICH's blocking
calls poll a core at full speed, which with more ranks than cores starves the others).

A wait tests its request, yielding the core between tests for the first millisecond
when the host has a core for every rank, then sleeps with exponential back-off
(:func:`wait`). A transfer under way is tested without sleeping for a while
(:func:`transfer`): without single-copy transfers (CMA) the data moves in small steps,
each needing both sides' MPI calls. When every rank is on one Linux host, a rank waiting
for a message sleeps on its *doorbell* instead, an anonymous pipe that a sender rings
after posting (:class:`Waiter`): no CPU while asleep, woken at once (benchmarks/
bench_transport.py: doorbells against polling with more ranks than cores).
"""
import os
import select
import sys
import time

import numpy as np

YIELD_S = 1e-3  # how long a wait yields the core between tests, where it may
MAX_SLEEP = 2e-4  # the longest sleep between tests
BELL_TIMEOUT = 2e-2  # a sleeper wakes this often without a ring (a full pipe drops rings)
NUDGE_S = 1e-4  # how often a receiver rings a sender whose transfer it waits for
TRANSFER_SPIN_S = 0.05  # the longest a rank tests a transfer under way without sleeping


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


def wait(test, spin=True, watch=None):
    """Poll ``test()`` until true: yield the core while the wait is short (only with
    ``spin``: a core for every rank), then sleep with back-off."""
    if test():
        return
    t0, delay = time.perf_counter(), 1e-5
    while not test():
        if spin and time.perf_counter() - t0 < YIELD_S:
            os.sched_yield()
            continue
        time.sleep(delay)
        delay = min(2 * delay, MAX_SLEEP)
        if watch is not None:
            watch()


def spin_until(test, seconds):
    """Test, yielding the core between tests, until true (-> True) or ``seconds`` pass."""
    t0 = time.perf_counter()
    while not test():
        if time.perf_counter() - t0 > seconds:
            return False
        os.sched_yield()
    return True


def transfer(test, spin):
    """Wait for a transfer under way: no ring will come for the rest of it."""
    if not spin_until(test, TRANSFER_SPIN_S):
        wait(test, spin)


def _cores():
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else \
        os.cpu_count() or 1


class Waiter:
    """One rank's waits for point-to-point messages on ``comm``: asleep on its doorbell
    where every rank has one, else polling (:func:`wait`). ``sends_done()`` (the
    caller's) moves this rank's own sends along when a receiver asks for it. Collective
    (every rank of ``comm`` constructs one)."""

    def __init__(self, comm, hosts, sends_done, doorbell=True):
        try:  # Linux rounds sleeps up by the timer slack (50 us by default); ask for 1 us
            import ctypes
            ctypes.CDLL(None).prctl(29, 1000, 0, 0, 0)  # PR_SET_TIMERSLACK, ns
        except Exception:  # not Linux: sleeps are merely coarser
            pass
        self.rank, size = comm.Get_rank(), comm.Get_size()
        # yielding between tests only helps when no other rank of this host needs the core
        self.spin = hosts.count(hosts[self.rank]) <= _cores()
        self._bells = _doorbells(comm, hosts) if doorbell else None
        self._sends_done = sends_done
        # messages per peer: posted to us (as its rings said), received, sent to it
        self._posted, self._received, self._sent = ([0] * size for _ in range(3))

    def sent(self, dest):
        """A message to ``dest`` was posted: ring its bell."""
        self._sent[dest] += 1
        if self._bells is not None:
            self._bells.ring(dest, self.rank, self._sent[dest])

    def message(self, source, test, watch=None):
        """Wait until ``test()`` (a probe for ``source``'s next message) is true; the
        message then counts as received."""
        bells = self._bells
        while bells is not None and not test():
            if self._posted[source] > self._received[source]:
                break  # rung: the message is microseconds away (MPI still moving it)
            if not select.select([bells.mine], [], [], BELL_TIMEOUT)[0]:
                if watch is not None:
                    watch()
                continue
            # every ring so far, as (sender, messages it has posted to us), or (-1 -
            # rank, 0): a receiver waits for our MPI to move a send of ours along
            rings = bells.rings()
            if (rings[:, 0] < 0).any():
                spin_until(self._sends_done, TRANSFER_SPIN_S)
            for r, k in rings[rings[:, 0] >= 0]:
                self._posted[r] = max(self._posted[r], k)
        wait(test, self.spin, watch)
        self._received[source] += 1

    def receiving(self, source, test):
        """Wait for a transfer from ``source`` under way, nudging it now and then: without
        single-copy transfers a large message moves only while the sender calls MPI too,
        and it may sleep on its doorbell."""
        nudged = time.perf_counter()

        def received():
            nonlocal nudged
            if test():
                return True
            if self._bells is not None and time.perf_counter() - nudged > NUDGE_S:
                nudged = time.perf_counter()
                self._bells.ring(source, -1 - self.rank, 0)
            return False

        transfer(received, self.spin)

    def close(self):
        if self._bells is not None:
            self._bells.close()
            self._bells = None


class _Bells:
    """This rank's doorbell and its peers': anonymous pipes, which no file backs, so a
    rank killed at any moment leaves nothing behind; a peer opens a rank's pipe through
    ``/proc/PID/fd/N`` (Linux). A pipe holds 8,192 rings of 8 bytes."""

    def __init__(self):
        self.mine, self._keep = os.pipe()  # our own write end: never an end-of-file
        os.set_blocking(self.mine, False)
        self.peers = {}

    def open_peers(self, ends, rank):
        """``ends``: every rank's (pid, read end)."""
        for r, (pid, fd) in enumerate(ends):
            if r != rank:
                self.peers[r] = os.open(f"/proc/{pid}/fd/{fd}", os.O_WRONLY | os.O_NONBLOCK)

    def ring(self, dest, who, count):
        try:
            os.write(self.peers[dest], np.array([who, count], dtype="<i4").tobytes())
        except (BlockingIOError, BrokenPipeError):  # full, or that rank waits no more
            pass

    def rings(self):
        """Every ring so far (whole ones: 8 bytes, written at once), as (who, count) rows."""
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
    """This rank's :class:`_Bells` when every rank runs on one Linux host and can open
    the others' pipes, else None; every rank gets the same answer (collective)."""
    from mpi4py import MPI

    ok = len(set(hosts)) == 1 and sys.platform.startswith("linux")
    try:
        bells = _Bells() if ok else None
    except OSError:
        bells, ok = None, False
    if comm.allreduce(ok, op=MPI.LAND):
        try:
            bells.open_peers(comm.allgather((os.getpid(), bells.mine)), comm.Get_rank())
        except OSError:
            ok = False
        if comm.allreduce(ok, op=MPI.LAND):  # every rank has opened its peers'
            return bells
    if bells is not None:
        bells.close()
    return None
