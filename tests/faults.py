"""Faults for the tests, injected through the engine's one test hook
(``STRADS_TEST_HOOK=faults:NAME:ARG...``, :func:`strads.driver._test_hook`; this folder
must be on the path: pytest puts it there, a child process gets it in PYTHONPATH)."""
import os
import threading
import time

from strads import DataError

HERE = os.path.dirname(os.path.abspath(__file__))


def env(hook):
    """The variables that give a child process (an mpiexec job) this hook."""
    path = os.pathsep.join(p for p in (HERE, os.environ.get("PYTHONPATH")) if p)
    return {"STRADS_TEST_HOOK": f"faults:{hook}", "PYTHONPATH": path}


class _WorkClock:
    """``time`` for strads.worker and strads.transport: in a thread that counts its work
    (:func:`slow`), perf_counter() is that count; anywhere else the real clocks."""

    def __init__(self):
        self.local = threading.local()

    def perf_counter(self):
        t = getattr(self.local, "t", None)
        return time.perf_counter() if t is None else t

    def __getattr__(self, name):
        return getattr(time, name)


CLOCK = _WorkClock()
ROW_S = 1e-3  # the counted seconds of a row's work in a round


def slow(setup, update, worker, factor):
    """Worker ``worker`` takes ``factor`` times as long per row as the others: each
    worker's seconds of work are counted (ROW_S a row a round, times ``factor`` on that
    worker) instead of measured, so what the rebalancing sees does not depend on the
    machine's load."""
    from strads import transport, worker as host

    worker, factor = int(worker), float(factor)
    if not factor >= 1:
        raise DataError(f"faults:slow: the factor must be >= 1, got {factor}")
    host.time = transport.time = CLOCK

    class Slow(update):
        def __init__(self, *a, **kw):
            CLOCK.local.t = 0.0  # (on the worker's own thread)
            super().__init__(*a, **kw)

        def update(self, task):
            partial = super().update(task)
            CLOCK.local.t += ROW_S * self.rows * (factor if self.peers.rank == worker else 1)
            return partial

        def collect(self):
            CLOCK.local.t = None  # the run ends: real clocks again
            return super().collect()

    Slow.__name__ = Slow.__qualname__ = update.__name__
    return setup, Slow


def slower(setup, update, worker, factor):
    """Worker ``worker`` really takes ``factor`` times as long per unit of work, as a
    slower core would (the benchmarks' fault; the tests count work instead, :func:`slow`):
    after each update it waits out the rest of that time (its waits in collectives left
    out), sleeping all but the last millisecond and spinning that (a sub-millisecond sleep
    lasts far longer)."""
    worker, factor = int(worker), float(factor)
    if not factor >= 1:
        raise DataError(f"faults:slower: the factor must be >= 1, got {factor}")

    class Slower(update):
        def update(self, task):
            t0, waited = time.perf_counter(), self.peers.waited
            partial = super().update(task)
            if self.peers.rank == worker:
                work = time.perf_counter() - t0 - (self.peers.waited - waited)
                until = time.perf_counter() + (factor - 1) * work
                left = until - time.perf_counter()  # (once: a loaded machine pauses us)
                if left > 1e-3:
                    time.sleep(left - 1e-3)
                while time.perf_counter() < until:
                    pass
            return partial

    Slower.__name__ = Slower.__qualname__ = update.__name__
    return setup, Slower


def diverge(setup, update, rank, round):
    """MPI rank ``rank`` of a leaderless run schedules round ``round`` differently (the
    task with one more key, as a schedule fed other inputs would)."""
    rank, round = int(rank), int(round)

    def perturbed(task):
        if isinstance(task, list):
            return [perturbed(task[0])] + task[1:]
        return {**task, "strads_fault": 1} if isinstance(task, dict) else (task, "fault")

    def hooked(ctx):
        schedule, aggregate, shards = setup(ctx)
        if int(os.environ.get("PMI_RANK", 0)) == rank:
            inner = schedule.schedule
            schedule.schedule = lambda r: perturbed(inner(r)) if r == round else inner(r)
        return schedule, aggregate, shards

    return hooked, update


def no_doorbells(setup, update):
    """Every rank polls instead of sleeping on a doorbell (every rank runs the hook)."""
    from strads import _wait
    _wait._doorbells = lambda waiter, comm, hosts: False
    return setup, update
