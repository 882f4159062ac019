"""Waiting without spinning a core away from the ranks that compute (docs/architecture.md,
"strads/_wait.py")."""
import contextlib
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


def wait(test, spin=True, watch=None):
    """Poll ``test()`` until true: yield the core for the first millisecond (only with
    ``spin``: a core for every rank), then sleep with exponential back-off."""
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


def stall_watch(app, seconds, round, rank, whom):
    """A wait's ``watch()``: every ``seconds`` of the wait, say whom this rank awaits."""
    t0 = time.perf_counter()
    due = [t0 + seconds]

    def watch():
        now = time.perf_counter()
        if now >= due[0]:
            due[0] = now + seconds
            what = f" to answer round {round}" if round is not None else ""
            sys.stderr.write(f"[{app}] rank {rank} waiting {now - t0:.1f} s for "
                             f"{whom}{what}\n")
            sys.stderr.flush()
    return watch


def spin_until(test, seconds):
    """Test, yielding the core between tests, until true (-> True) or ``seconds`` pass."""
    t0 = time.perf_counter()
    while not test():
        if time.perf_counter() - t0 > seconds:
            return False
        os.sched_yield()
    return True


def transfer(test, spin):
    """Wait for a transfer under way: no ring will come for the rest of it, and without
    single-copy transfers (CMA) the data moves in small steps needing both sides."""
    if not spin_until(test, TRANSFER_SPIN_S):
        wait(test, spin)


def _cores():
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else \
        os.cpu_count() or 1


class Waiter:
    """One rank's waits for point-to-point messages on ``comm``: asleep on its doorbell
    where every rank has one, else polling; ``sends_done()`` (the caller's) moves this
    rank's own sends along when a receiver asks. Collective over ``comm``."""

    def __init__(self, comm, hosts, spin, sends_done, doorbell=True):
        with contextlib.suppress(Exception):  # (not Linux: sleeps are merely coarser)
            import ctypes  # Linux rounds sleeps up by the timer slack (50 us): ask for 1 us
            ctypes.CDLL(None).prctl(29, 1000, 0, 0, 0)  # PR_SET_TIMERSLACK, ns
        self.rank, size = comm.Get_rank(), comm.Get_size()
        self.spin = spin
        self._sends_done = sends_done
        # messages per peer: posted to us (as its rings said), received, sent to it
        self._posted, self._received, self._sent = ([0] * size for _ in range(3))
        self._bell, self._peers = None, {}
        self.doorbells = doorbell and _doorbells(self, comm, hosts)

    def _ring(self, dest, who, count):
        if self.doorbells:
            # (full, or that rank waits no more)
            with contextlib.suppress(BlockingIOError, BrokenPipeError):
                os.write(self._peers[dest], np.array([who, count], "<i4").tobytes())

    def sent(self, dest):
        """A message to ``dest`` was posted: ring its bell."""
        self._sent[dest] += 1
        self._ring(dest, self.rank, self._sent[dest])

    def message(self, source, test, watch=None):
        """Wait until ``test()`` (a probe for ``source``'s next message) is true; the
        message then counts as received."""
        while self.doorbells and not test():
            if self._posted[source] > self._received[source]:
                break  # rung: the message is microseconds away (MPI still moving it)
            if not select.select([self._bell[0]], [], [], BELL_TIMEOUT)[0]:
                if watch is not None:
                    watch()
                continue
            # every ring so far (8 bytes, written at once), as (sender, messages it has
            # posted to us), or (-1 - rank, 0): a receiver waits for our MPI to move a
            # send of ours along
            try:
                rings = np.frombuffer(os.read(self._bell[0], 1 << 16), "<i4").reshape(-1, 2)
            except BlockingIOError:
                continue
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
            if time.perf_counter() - nudged > NUDGE_S:
                nudged = time.perf_counter()
                self._ring(source, -1 - self.rank, 0)
            return False

        transfer(received, self.spin)

    def close(self):
        for fd in [*(self._bell or ()), *self._peers.values()]:
            os.close(fd)
        self._bell, self._peers, self.doorbells = None, {}, False


def _doorbells(waiter, comm, hosts):
    """Give ``waiter`` a doorbell, an anonymous pipe (a rank killed at any moment leaves
    nothing behind), and open its peers' through ``/proc/PID/fd/N``, when every rank is
    on one Linux host; -> whether every rank could (collective: the same answer)."""
    from mpi4py import MPI

    ok = len(set(hosts)) == 1 and sys.platform.startswith("linux")
    try:
        if ok:
            waiter._bell = os.pipe()  # we keep the write end too: never an end-of-file
            os.set_blocking(waiter._bell[0], False)
    except OSError:
        ok = False
    if comm.allreduce(ok, op=MPI.LAND):
        ends = comm.allgather((os.getpid(), waiter._bell[0]))
        try:
            for r, (pid, fd) in enumerate(ends):
                if r != comm.Get_rank():
                    waiter._peers[r] = os.open(f"/proc/{pid}/fd/{fd}",
                                               os.O_WRONLY | os.O_NONBLOCK)
        except OSError:
            ok = False
        if comm.allreduce(ok, op=MPI.LAND):  # every rank has opened its peers'
            return True
    waiter.close()
    return False
