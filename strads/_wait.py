"""Waiting without spinning a core: the transport's one ``wait`` strategy, kept here so
the transport reads as message passing.

MPICH's blocking calls poll a core at full speed, which with more ranks than cores
starves the ranks that compute. When every rank is on one Linux host, each has a
*doorbell* (an anonymous pipe, which no file backs, opened by its peers through /proc):
a sender rings the receiver's after posting a message, with the number of messages it
has posted to it so far, and a rank waiting for a message sleeps in ``select`` until
that sender has rung, using no CPU, then tests with short sleeps for the microseconds
until MPI shows the message (polling with sleeps cost the MF scheduler 0.17 s of CPU in
a 2.5 s run and added up to a sleep's length to every hop). Elsewhere (ranks on several
hosts, and collectives) a wait tests the request, yielding the core between tests for
the first millisecond (only when the host has a core for every rank), then sleeping with
exponential back-off from 10 us to 200 us. A transfer under way is tested without
sleeping for up to 50 ms: without MPICH's single-copy transfers (CMA) the data moves in
small steps, each needing both sides' MPI calls, and a receiver nudges a sender asleep
on its doorbell. ``STRADS_YIELD_S`` and ``STRADS_MAX_SLEEP`` set the two thresholds,
``STRADS_DOORBELL=0`` turns doorbells off.
"""
import os
import select
import sys
import time

import numpy as np

YIELD_S = float(os.environ.get('STRADS_YIELD_S', 1e-3))
MAX_SLEEP = float(os.environ.get('STRADS_MAX_SLEEP', 2e-4))
# A sleeper wakes at least this often without a ring (a ring is lost only when the
# receiver's pipe is full; every 2 ms measurably slowed the worker sharing a core with
# the scheduler).
BELL_TIMEOUT = 2e-2
NUDGE_S = 1e-4
# the longest a rank keeps testing, without sleeping, a transfer under way
TRANSFER_SPIN_S = 0.05


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


def spin_until(test, seconds):
    """Test, yielding the core between tests, until true (-> True) or ``seconds`` pass."""
    t0 = time.perf_counter()
    while not test():
        if time.perf_counter() - t0 > seconds:
            return False
        os.sched_yield()
    return True


def transfer(test, spin):
    """Wait for a transfer under way: no ring will come for the rest of it. Test
    without sleeping for a while: without single-copy transfers the data moves in small
    steps, each needing both sides (2 MB: 0.3 ms with both testing, 43 ms with 0.1 ms
    sleeps)."""
    if not spin_until(test, TRANSFER_SPIN_S):
        wait(test, spin)


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


class Waiter:
    """One rank's waits for point-to-point messages on ``comm``: asleep on its doorbell
    where every rank has one, else polling politely (:func:`wait`). ``sends_done()``
    (the caller's) moves this rank's own sends along when a receiver asks for it.
    Collective (every rank of ``comm`` constructs one)."""

    def __init__(self, comm, hosts, sends_done, doorbell=True):
        _fine_timer_slack()
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
        self._wait_message(source, test, watch)
        self._received[source] += 1

    def receiving(self, source, test):
        """Wait for a transfer from ``source`` under way, nudging it now and then: without
        single-copy transfers (CMA) a large message moves only while the sender calls
        MPI too, and it may sleep on its doorbell."""
        nudged = time.perf_counter()

        def received():
            nonlocal nudged
            if test():
                return True
            now = time.perf_counter()
            if now - nudged > NUDGE_S and self._bells is not None:
                nudged = now
                self._bells.ring(source, -1 - self.rank, 0)
            return False

        transfer(received, self.spin)

    def _wait_message(self, source, test, watch):
        if self._bells is None:
            return wait(test, self.spin, watch)
        mine = self._bells
        while not test():
            if self._posted[source] > self._received[source]:
                # rung: the message is microseconds away (the sender's MPI or ours may
                # still be moving it; measured 5-60 us), or a descheduled moment
                return wait(test, self.spin, watch)
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
                spin_until(self._sends_done, TRANSFER_SPIN_S)
            for r, k in rings[rings[:, 0] >= 0]:
                self._posted[r] = max(self._posted[r], k)

    def close(self):
        if self._bells is not None:
            self._bells.close()
            self._bells = None


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
