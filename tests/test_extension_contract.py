"""The extension contract, as a user writing a custom app from README.md's "Your own
app" and docs/extending.md meets it: each mistake users make (a piece that is not a
strads class, setup's answer of the wrong shape, per-worker lists of the wrong length, a
shard that cannot travel, state that cannot be checkpointed or resumed, a model that
cannot be written) is refused before any work in one error naming the hook, or works;
arrays that pieces share resume as one; split_balanced never gives a row twice. The last
test runs under mpiexec -n 4 (a subprocess)."""
import sys
from pathlib import Path

import numpy as np
import pytest

import strads
from strads.checkpoint import CheckpointError

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "examples"))
import ridge  # noqa: E402


# -- a toy that counts, on the public API only ----------------------------------------
class Rounds(strads.Schedule):
    def __init__(self, n):
        self.n = n

    def schedule(self, round):
        return {"k": np.array([round])} if round < self.n else None


class Count(strads.Update):
    def __init__(self, shard):
        self.w, self.total = shard["w"], 0.0

    def update(self, task):
        return {"c": np.array([self.w + 1.0])}

    def apply(self, sync):
        self.total += float(sync["s"][0])

    def collect(self):
        return {"total": self.total}


class Sum(strads.Aggregate):
    def __init__(self):
        self.s = 0.0

    def aggregate(self, round, task, partials):
        s = sum(p["c"][0] for p in partials)
        self.s += s
        self.updates += 1
        return {"s": np.array([s])}

    def objective(self):
        return self.s

    def finish(self, collected):
        return {"totals": np.array([c["total"] for c in collected])}


def shards(ctx):
    return [{"w": w} for w in range(ctx.n_workers)]


# -- 1. pieces that are not strads classes -------------------------------------------
class PlainUpdate:  # forgot "(strads.Update)": everything else as the docs say
    def __init__(self, shard):
        self.w = shard["w"]

    def update(self, task):
        return {"c": np.array([1.0])}

    def apply(self, sync):
        pass

    def collect(self):
        return {}


class PlainSchedule:  # forgot "(strads.Schedule)"
    def schedule(self, round):
        return {"k": np.array([round])} if round < 3 else None


class PlainSum:  # forgot "(strads.Aggregate)"
    updates = 0

    def aggregate(self, round, task, partials):
        return {"s": np.array([1.0])}


@pytest.mark.parametrize("case", ["update", "schedule", "aggregate", "schedule class"])
def test_a_piece_that_is_not_a_strads_class_is_refused_naming_it(case):
    update, sched, agg = Count, (lambda: Rounds(3)), Sum
    if case == "update":
        update, name, base = PlainUpdate, "PlainUpdate", "strads.Update"
    elif case == "schedule":
        sched, name, base = PlainSchedule, "PlainSchedule", "strads.Schedule"
    elif case == "aggregate":
        agg, name, base = PlainSum, "PlainSum", "strads.Aggregate"
    else:
        sched, name, base = (lambda: Rounds), "Rounds", "strads.Schedule"
    with pytest.raises(TypeError, match=rf"{name}.*{base}"):
        strads.run(lambda ctx: (sched(), agg(), shards(ctx)), update, workers=2,
                   max_rounds=3, quiet=True)


# -- 2. setup's answer of the wrong shape ----------------------------------------------
@pytest.mark.parametrize("answer", ["None", "two values", "generator of shards"])
def test_setup_returning_the_wrong_shape_is_refused_naming_setup(answer):
    def setup(ctx):
        if answer == "None":
            return None
        if answer == "two values":
            return Rounds(3), Sum()
        return Rounds(3), Sum(), ({"w": w} for w in range(ctx.n_workers))

    with pytest.raises((TypeError, ValueError), match="setup"):
        strads.run(setup, Count, workers=2, max_rounds=3, quiet=True)


# -- 3. a per-worker list of the wrong length -------------------------------------------
class ThreeTasks(Rounds):
    def schedule(self, round):
        return [{"k": np.array([round])}] * 3 if round < self.n else None


class ThreeSyncs(Sum):
    def aggregate(self, round, task, partials):
        return [super().aggregate(round, task, partials)] * 3


@pytest.mark.parametrize("hook", ["ThreeTasks.schedule", "ThreeSyncs.aggregate"])
def test_a_per_worker_list_of_the_wrong_length_names_its_hook(hook):
    sched = ThreeTasks if hook.startswith("ThreeTasks") else Rounds
    agg = ThreeSyncs if hook.startswith("ThreeSyncs") else Sum
    with pytest.raises(ValueError, match=hook.replace(".", r"\.")):
        strads.run(lambda ctx: (sched(3), agg(), shards(ctx)), Count, workers=2,
                   quiet=True)


# -- 4. a shard that cannot travel -------------------------------------------------------
def test_a_shard_that_cannot_be_sent_is_refused_naming_shard_and_key():
    import threading

    def setup(ctx):
        return Rounds(3), Sum(), [{"w": w, "guard": threading.Lock()}
                                  for w in range(ctx.n_workers)]

    with pytest.raises(Exception, match=r"shard.*guard|guard.*shard"):
        strads.run(setup, Count, workers=2, quiet=True)


# -- 5. a reserved attribute name: Update.rows ----------------------------------------
class RowIndices(strads.Update):
    """Keeps the indices of its rows of a table every worker reads, as ``self.rows``:
    the docs describe ``rows`` only as an optional attribute for --rebalance."""
    done = []

    def __init__(self, shard):
        self.rows, self.x = shard["rows"], shard["x"]

    def update(self, task):
        RowIndices.done.append(task["k"][0])
        return {"c": np.array([self.x[self.rows].sum()])}


def test_an_update_rows_attribute_of_row_indices_with_checkpoints(tmp_path):
    x = np.arange(10.0)
    RowIndices.done.clear()

    class Agg(Sum):
        def aggregate(self, round, task, partials):
            self.updates += 1

        def finish(self, collected):
            return {}

    def setup(ctx):
        return Rounds(10), Agg(), [{"rows": r, "x": x} for r in
                                   np.array_split(np.arange(10), ctx.n_workers)]
    # refused before any round (with checkpoints, strads reads rows as a count)
    with pytest.raises(TypeError, match=r"RowIndices\.rows is a ndarray"):
        strads.run(setup, RowIndices, workers=2, quiet=True, out=str(tmp_path / "o"),
                   checkpoint_every=3600, max_rounds=3)
    assert not RowIndices.done


# -- 6. checkpoint state that the resume refuses ---------------------------------------
class BestWord(Sum):
    def __init__(self):
        super().__init__()
        self.words = np.array(["alpha", "beta"])
        self.best = self.words[0]  # a NumPy string scalar (np.str_)

    def aggregate(self, round, task, partials):
        self.best = self.words[round % 2]
        return super().aggregate(round, task, partials)


def test_a_numpy_string_in_the_state_resumes(tmp_path):
    def setup(ctx):
        return Rounds(6), BestWord(), shards(ctx)
    full = strads.run(setup, Count, workers=2, quiet=True)
    out = str(tmp_path / "o")
    strads.run(setup, Count, workers=2, quiet=True, out=out, checkpoint_every=3600,
               max_rounds=3)
    res = strads.run(setup, Count, workers=2, quiet=True, out=out, resume=True)
    assert res.rounds == 6 and res.objective == full.objective
    np.testing.assert_array_equal(res.model["totals"], full.model["totals"])


# -- 7. a schedule that reads the aggregate's array: the resume loses the link --------
class Descent(strads.Aggregate):
    def __init__(self, p):
        self.w, self.f = np.zeros(p), np.nan

    def aggregate(self, round, task, partials):
        g = sum(p["g"] for p in partials)
        self.w -= 1e-3 * g  # in place: the schedule reads the same array
        self.f = float(g @ g)
        self.updates += 1

    def objective(self):
        return self.f

    def finish(self, collected):
        return {"w": self.w}


class Reads(strads.Schedule):
    def __init__(self, w):
        self.w = w  # the aggregate's coefficients: read, never written

    def schedule(self, round):
        return {"w": self.w}


class Gradient(strads.Update):
    checkpoint_skip = ("X",)

    def __init__(self, shard):
        self.X, self.y = shard["X"], shard["y"]

    def update(self, task):
        return {"g": self.X.T @ (self.X @ task["w"] - self.y)}


def test_a_schedule_sharing_the_aggregates_array_resumes_bit_for_bit(tmp_path):
    rng = np.random.default_rng(0)
    X, y = rng.standard_normal((120, 8)), rng.standard_normal(120)

    def setup(ctx):
        agg = Descent(8)
        return Reads(agg.w), agg, [{"X": X[r], "y": y[r]} for r in
                                   np.array_split(np.arange(120), ctx.n_workers)]
    full = strads.run(setup, Gradient, workers=2, quiet=True, max_rounds=40)
    out = str(tmp_path / "o")
    strads.run(setup, Gradient, workers=2, quiet=True, max_rounds=15, out=out,
               checkpoint_every=3600)
    res = strads.run(setup, Gradient, workers=2, quiet=True, max_rounds=40, out=out,
                     resume=True)
    assert res.objective == full.objective
    np.testing.assert_array_equal(res.model["w"], full.model["w"])


# -- 8. tol that can never fire --------------------------------------------------------
class NoObjective(strads.Aggregate):  # objective() is optional; converged() the default
    def aggregate(self, round, task, partials):
        self.updates += 1


class Forever(strads.Schedule):
    def schedule(self, round):
        return {}


class One(strads.Update):
    def update(self, task):
        return {"c": 1.0}


def test_tol_without_an_objective_is_refused():
    with pytest.raises(ValueError, match=r"tol=0\.001: NoObjective defines neither "
                                         r"objective\(\) nor converged\(\)"):
        strads.run(lambda ctx: (Forever(), NoObjective(), [{}] * ctx.n_workers),
                   One, workers=2, tol=1e-3, max_rounds=50, quiet=True)


# -- 9. strads.cli.run_app's error line -------------------------------------------------
def test_run_app_bad_input_line_names_the_script_as_argparse_does(capsys):
    with pytest.raises(SystemExit) as e:
        ridge.main(["--data", "nothing.csv", "--quiet"])
    assert e.value.code == 2
    assert capsys.readouterr().err == ("python examples/ridge.py: error: --data: this "
                                       "example builds its own problem\n")


# -- 10. a per-worker sync of None for every worker -------------------------------------
class NothingToApply(strads.Aggregate):
    def __init__(self, n_workers):
        self.W, self.seen = n_workers, 0

    def aggregate(self, round, task, partials):
        self.seen += len(partials)
        self.updates += 1
        return [None] * self.W  # a list per worker: None, nothing for that worker


class NoApply(strads.Update):  # needs no sync: does not define apply
    def update(self, task):
        return {"c": 1.0}


def test_a_per_worker_list_of_none_needs_no_apply():
    res = strads.run(lambda ctx: (Rounds(4), NothingToApply(ctx.n_workers),
                                  shards(ctx)), NoApply, workers=2, quiet=True)
    assert res.rounds == 4


# -- 11. row_state without rows: a resume on another number of workers ----------------
class RowStateOnly(ridge.RidgeUpdate):
    row_state = ("r",)  # the residual runs over this worker's rows; rows: forgotten


def _ridge_run(update, workers, **kw):
    rng = np.random.default_rng(0)
    X, y = rng.standard_normal((60, 6)), rng.standard_normal(60)

    def setup(ctx):
        return ridge.Cyclic(6, 2), ridge.RidgeAggregate(60, 6, 0.1), [
            {"X": np.asfortranarray(X[r]), "y": y[r]}
            for r in np.array_split(np.arange(60), ctx.n_workers)]
    return strads.run(setup, update, app="ridge", workers=workers, quiet=True, **kw)


def test_row_state_without_rows_is_refused_naming_rows(tmp_path):
    out = str(tmp_path / "o")
    _ridge_run(RowStateOnly, 2, max_rounds=5, out=out, checkpoint_every=3600)
    with pytest.raises(CheckpointError, match=r"RowStateOnly.*rows"):
        _ridge_run(RowStateOnly, 3, max_rounds=10, out=out, resume=True)


# -- 12. a model with keys that are not names ---------------------------------------------
class ByIndex(Sum):
    def finish(self, collected):
        return {0: np.zeros(2), 1: np.ones(3)}  # the factors by number


def test_a_model_keyed_by_numbers_is_refused_naming_finish(tmp_path):
    with pytest.raises(TypeError, match=r"ByIndex\.finish\(\).*0"):
        strads.run(lambda ctx: (Rounds(2), ByIndex(), shards(ctx)), Count, workers=2,
                   quiet=True, out=str(tmp_path / "o"))


# -- 13. strads.split_balanced with more workers than rows ---------------------------
@pytest.mark.parametrize("n, parts", [(2, 4), (3, 6), (1, 3)])
def test_split_balanced_never_gives_a_row_twice(n, parts):
    cuts = strads.split_balanced(np.ones(n), parts)
    rows = [r for w in range(parts) for r in range(n)[cuts[w]:cuts[w + 1]]]
    assert len(cuts) == parts + 1 and cuts[0] == 0 and cuts[-1] == n
    assert np.all(np.diff(cuts) >= 0), cuts
    assert sorted(rows) == list(range(n))


# -- 14. checkpoint_skip written as a string ------------------------------------------
class SparseRows(Count):
    checkpoint_skip = ("data")  # (a string, not a tuple: the comma forgotten)

    def __init__(self, shard):
        super().__init__(shard)
        self.data = shard["data"]


def test_checkpoint_skip_as_a_string_is_one_name_or_refused_as_such(tmp_path):
    import scipy.sparse as sp

    def setup(ctx):
        return Rounds(3), Sum(), [{"w": w, "data": sp.eye(4, format="csr")}
                                  for w in range(ctx.n_workers)]
    res = strads.run(setup, SparseRows, workers=2, quiet=True, out=str(tmp_path / "o"),
                     checkpoint_every=3600, max_rounds=2)  # ("data": one name)
    assert res.rounds == 2


# -- 15. an overridden state() that is not a dict ---------------------------------------
class TupleState(Count):
    def state(self):  # "override state() and load_state(state)" (docs/extending.md)
        return (self.total,)

    def load_state(self, state):
        (self.total,) = state


def test_a_state_that_is_not_a_dict_is_refused_naming_state(tmp_path):
    with pytest.raises(TypeError, match=r"TupleState\.state\(\).*dict"):
        strads.run(lambda ctx: (Rounds(4), Sum(), shards(ctx)), TupleState, workers=2,
                   quiet=True, out=str(tmp_path / "o"), checkpoint_every=3600, max_rounds=2)


# -- 16. under mpiexec: a refusal every worker rank meets is said by each ----------------
@pytest.mark.timeout(300)
def test_under_mpiexec_a_refusal_of_every_worker_is_said_once():
    import subprocess

    from conftest import ROOT, child_env, mpiexec
    env = {**child_env(), "PYTHONPATH": str(ROOT)}
    p = subprocess.run([mpiexec(), "-n", "4", sys.executable, "examples/ridge.py",
                        "--rebalance", "--quiet", "--max-rounds", "5"], cwd=ROOT, env=env,
                       capture_output=True, text=True, timeout=240)
    assert p.returncode == 2, p.stderr
    assert p.stderr.count("\n") == 1 and "--rebalance: RidgeUpdate cannot hand rows over" \
        in p.stderr, p.stderr
