"""LDA schedules.

* ``model`` (STRADS): the vocabulary is cut into M = W (s + 1) slices, balanced by token
  count, for W workers and staleness s. In round r worker p samples its tokens of slice
  ``g W + (p + r // (s+1)) % W`` with ``g = r % (s+1)``, and the slice's word-topic table
  travels with the task; the updated table comes back in the partial. The s + 1 rounds in
  flight at once use the s + 1 disjoint groups of slices, so each slice is held by
  exactly one worker at any time, and a round only gets slices whose last round has been
  aggregated. One sweep = M rounds. Only the topic totals are shared (and may be s
  rounds stale).
* ``data`` (YahooLDA-style baseline): every round is a sweep in which each worker
  samples all its tokens against its own copy of the whole word-topic table; the copies
  are reconciled when the round is aggregated.

Staleness beyond what a schedule can use is refused (DataError, one line naming the
largest useful value), never clamped: the engine keeps ``staleness + 1`` rounds in
flight whatever the schedule does, so the schedule cannot run with less than it was
given. ``model``: at most ``V // W - 1`` (at least 0), so that the W (s + 1) slices are
no more than the V words: every further slice is empty, adds an empty round to every
sweep and a round in flight to every worker. ``data``: at most ``sweeps - 1`` (at least
0): a run has only ``sweeps`` rounds to keep in flight.
"""
from ...engine import DataError, Schedule


def _refuse(staleness, most, why, flag):
    raise DataError(f"{flag['staleness']} {staleness} is more than this run can use: at "
                    f"most {most} ({why})")


class ModelParallel(Schedule):
    @staticmethod
    def max_staleness(n_workers, n_words, sweeps):
        return max(0, n_words // n_workers - 1)

    @classmethod
    def check_staleness(cls, staleness, n_workers, n_words, sweeps, flag):
        most = cls.max_staleness(n_workers, n_words, sweeps)
        if staleness > most:
            _refuse(staleness, most, f"the model schedule cuts workers x (staleness + 1) "
                    f"vocabulary slices, which must be no more than the {n_words} words "
                    f"for {n_workers} worker{'s' if n_workers > 1 else ''}", flag)

    def __init__(self, agg, n_workers, staleness, sweeps):
        self.check_staleness(staleness, n_workers, agg.V, sweeps, {"staleness": "staleness"})
        self.agg, self.W, self.s1, self.sweeps = agg, n_workers, staleness + 1, sweeps
        self.per_sweep = n_workers * self.s1
        self.total_rounds = sweeps * self.per_sweep

    def slice_of(self, worker, round):
        return (round % self.s1) * self.W + (worker + round // self.s1) % self.W

    def schedule(self, round):
        if round >= self.total_rounds:
            return None
        agg = self.agg
        agg.start()
        last = round % self.per_sweep == self.per_sweep - 1
        tasks = []
        for p in range(self.W):
            m = self.slice_of(p, round)
            if agg.out[m]:
                raise RuntimeError(f"vocabulary slice {m} is still in flight in round "
                                   f"{round}: the schedule was made for a smaller staleness "
                                   "than the engine runs with")
            agg.out[m] = True
            tasks.append({"mode": "model", "round": round, "slice": m,
                          "nwk": agg.tables[m], "ll": last})
        return tasks


class DataParallel(Schedule):
    @staticmethod
    def max_staleness(n_workers, n_words, sweeps):
        return max(0, sweeps - 1)

    @classmethod
    def check_staleness(cls, staleness, n_workers, n_words, sweeps, flag):
        most = cls.max_staleness(n_workers, n_words, sweeps)
        if staleness > most:
            _refuse(staleness, most, f"the data schedule runs one round a sweep, and "
                    f"{sweeps} sweep{'s' if sweeps != 1 else ''} can keep at most "
                    f"{most + 1} round{'s' if most else ''} in flight", flag)

    def __init__(self, agg, n_workers, staleness, sweeps):
        self.check_staleness(staleness, n_workers, agg.V, sweeps, {"staleness": "staleness"})
        self.agg, self.total_rounds = agg, sweeps  # a sweep a round

    def schedule(self, round):
        if round >= self.total_rounds:
            return None
        self.agg.start()
        return {"mode": "data", "round": round, "ll": True}


SCHEDULES = {"model": ModelParallel, "data": DataParallel}
