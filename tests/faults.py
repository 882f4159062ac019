"""Faults for the tests, injected through the engine's one test hook
(``STRADS_TEST_HOOK=faults:NAME:ARG...``, :func:`strads.driver._test_hook`; this folder
must be on the path: pytest puts it there, a child process gets it in PYTHONPATH)."""
import os
import time

from strads import DataError

HERE = os.path.dirname(os.path.abspath(__file__))


def env(hook):
    """The variables that give a child process (an mpiexec job) this hook."""
    path = os.pathsep.join(p for p in (HERE, os.environ.get("PYTHONPATH")) if p)
    return {"STRADS_TEST_HOOK": f"faults:{hook}", "PYTHONPATH": path}


def slow(setup, update, worker, factor):
    """Worker ``worker`` takes ``factor`` times as long per unit of work: it sleeps after
    each update for the rest of that time (its waits in collectives left out)."""
    worker, factor = int(worker), float(factor)
    if not factor >= 1:
        raise DataError(f"faults:slow: the factor must be >= 1, got {factor}")

    class Slow(update):
        def update(self, task):
            t0, waited = time.perf_counter(), self.peers.waited
            partial = super().update(task)
            if self.peers.rank == worker:
                work = time.perf_counter() - t0 - (self.peers.waited - waited)
                time.sleep((factor - 1) * work)
            return partial

    Slow.__name__ = Slow.__qualname__ = update.__name__
    return setup, Slow


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
