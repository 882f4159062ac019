"""LDA schedules: ``model`` (STRADS: vocabulary slices rotating among the workers) and
``data`` (YahooLDA-style); a staleness beyond the useful maximum is refused, never clamped
(docs/apps/lda.md)."""
import numpy as np

from ...api import Schedule
from ...errors import DataError


def slice_of(worker, round, n_workers, s1):
    """The vocabulary slice worker ``worker`` samples in ``round`` (model schedule, s1 =
    staleness + 1). Worker w - 1 samples it next, in round + s1."""
    return (round % s1) * n_workers + (worker + round // s1) % n_workers


class _LDASchedule(Schedule):
    # a resumed run may ask for more (or fewer) sweeps: setup gives them again
    checkpoint_skip = ("sweeps", "staleness_flag")
    staleness_flag = "staleness"  # its name in messages (the flag, on the command line)
    needs_words = True  # its staleness bound depends on the vocabulary's size
    offset = 0  # the round the workers' layout started at (resumed on other workers)
    sweeps0 = 0  # sweeps done before it

    def __init__(self, n_words, n_workers, staleness, sweeps, flag=None):
        self.W, self.s1, self.sweeps = n_workers, staleness + 1, sweeps
        self.staleness_flag = (flag or {}).get("staleness", self.staleness_flag)
        self.begin([{"n_words": n_words}])
        self.per_sweep = self.rounds_per_sweep(n_workers, self.s1)

    @property
    def total_rounds(self):
        return self.offset + max(0, self.sweeps - self.sweeps0) * self.per_sweep

    def schedule(self, round):
        phase = round - self.offset
        if round >= self.total_rounds:
            return None
        task = {"round": round, "ll": phase % self.per_sweep == self.per_sweep - 1}
        if self.offset:  # the slices rotate from the layout's start
            task["phase"] = phase
        return task

    def load_state(self, state):
        """A checkpoint's layout, checked: this run's staleness, rounds a sweep as the
        workers and staleness make them, offset and sweeps done counts."""
        s1 = self.s1
        super().load_state(state)
        count = [isinstance(v, (int, np.integer)) and v >= least for v, least in (
            (self.W, 1), (self.offset, 0), (self.sweeps0, 0))]
        if self.s1 != s1 or not all(count) or \
                self.per_sweep != self.rounds_per_sweep(self.W, self.s1):
            raise ValueError("the layout (workers, staleness, rounds a sweep, first round, "
                             "sweeps done) is not one this run makes")

    def resume_on(self, n_workers, round):
        """The layout starts again at ``round`` (the slices are cut for the new number
        of workers): a sweep begun before it counts as not done."""
        self.sweeps0 += (round - self.offset) // self.per_sweep
        self.offset, self.W = round, n_workers
        self.per_sweep = self.rounds_per_sweep(n_workers, self.s1)

    def begin(self, reports):
        """The vocabulary's size, once known (from the workers when they read the
        corpus; they refused a staleness beyond it already, naming the flag)."""
        V = reports[0]["n_words"]
        if V is not None or not self.needs_words:
            self.check_staleness(self.s1 - 1, self.W, V, self.sweeps,
                                 {"staleness": self.staleness_flag})

    @classmethod
    def check_staleness(cls, staleness, n_workers, n_words, sweeps, flag):
        """Refuse a staleness beyond the schedule's :meth:`limit`, naming it by ``flag``."""
        most, why = cls.limit(n_workers, n_words, sweeps)
        if staleness > most:
            raise DataError(f"{flag['staleness']} {staleness} is more than this run can "
                            f"use: at most {most} ({why})")


class ModelParallel(_LDASchedule):
    @staticmethod
    def limit(n_workers, n_words, sweeps):
        """The largest useful staleness, and why."""
        return max(0, n_words // n_workers - 1), (
            f"the model schedule cuts workers x (staleness + 1) vocabulary slices, which "
            f"must be no more than the {n_words} words for {n_workers} "
            f"worker{'s' if n_workers > 1 else ''}")

    @staticmethod
    def rounds_per_sweep(n_workers, s1):
        return n_workers * s1

    def slice_of(self, worker, round):
        return slice_of(worker, round - self.offset, self.W, self.s1)


class DataParallel(_LDASchedule):
    needs_words = False
    @staticmethod
    def limit(n_workers, n_words, sweeps):
        most = max(0, sweeps - 1)
        return most, (f"the data schedule runs one round a sweep, and {sweeps} "
                      f"sweep{'s' if sweeps != 1 else ''} can keep at most {most + 1} "
                      f"round{'s' if most else ''} in flight")

    @staticmethod
    def rounds_per_sweep(n_workers, s1):
        return 1  # a sweep a round


class Group(Schedule):
    """``--schedulers K``: scheduler k names the slice each worker of its group samples; the
    slices' rotation is fixed by the ring, so the run is one scheduler's, bit for bit."""

    def __init__(self, inner, k, n_parts):
        self.inner, self.k, self.n_parts = inner, k, n_parts

    @property
    def total_rounds(self):
        return self.inner.total_rounds

    def begin(self, reports):
        self.inner.begin(reports)

    def schedule(self, round):
        task = self.inner.schedule(round)
        if task is None:
            return None
        W, k, n = self.inner.W, self.k, self.n_parts
        group = range(k * W // n, (k + 1) * W // n)
        if isinstance(self.inner, ModelParallel):
            return [{**task, "slice": self.inner.slice_of(w, round)} for w in group]
        return [task for _ in group]

    @staticmethod
    def combine(parts):
        if any(p is None for p in parts):
            return None
        return [t for p in parts for t in p]


SCHEDULES = {"model": ModelParallel, "data": DataParallel}
