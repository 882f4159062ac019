"""Strict xfails for defects found by the twelfth hunt (hunt12: a user writing custom apps
from README.md's "Your own app" and docs/extending.md alone, then making the mistakes
users make). Each test fails on the code it was written against for the reason it names,
and passes once the defect is fixed (then drop its xfail mark). In one process but the
last (mpiexec -n 4, a subprocess); 5 and 6 were also seen the same way under mpiexec -n 3."""
import sys
import warnings
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


@pytest.mark.xfail(strict=True, reason="a piece that does not subclass strads.Update / "
                   "Schedule / Aggregate (or setup returning the Schedule class, not an "
                   "instance) passes check_app and dies deep in the engine: AttributeError "
                   "'no attribute warmup' (worker.py) or 'begin' (driver.py), or "
                   "'Schedule.begin() missing 1 required positional argument'; run() itself "
                   "says 'update must be a subclass of strads.Update' but checks only for "
                   "an instance. Should be one TypeError naming the class and the base")
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
@pytest.mark.xfail(strict=True, reason="setup returning None (a forgotten return), two "
                   "values, or its shards as a generator fails in driver.init's unpacking "
                   "with Python's 'cannot unpack non-iterable NoneType object', 'not enough "
                   "values to unpack (expected 3, got 2)', \"object of type 'generator' has "
                   "no len()\": nothing names setup or what it must return; should be one "
                   "error naming setup and (schedule, aggregate, shards)")
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


@pytest.mark.xfail(strict=True, reason="a schedule() or aggregate() that returns a "
                   "per-worker list of 3 parts for 2 workers ends the run with 'a "
                   "per-worker message has 3 parts for 2 workers' (driver.per_worker) in "
                   "both cases: the hook that returned it is not named")
@pytest.mark.parametrize("hook", ["ThreeTasks.schedule", "ThreeSyncs.aggregate"])
def test_a_per_worker_list_of_the_wrong_length_names_its_hook(hook):
    sched = ThreeTasks if hook.startswith("ThreeTasks") else Rounds
    agg = ThreeSyncs if hook.startswith("ThreeSyncs") else Sum
    with pytest.raises(ValueError, match=hook.replace(".", r"\.")):
        strads.run(lambda ctx: (sched(3), agg(), shards(ctx)), Count, workers=2,
                   quiet=True)


# -- 4. a shard that cannot travel -------------------------------------------------------
@pytest.mark.xfail(strict=True, reason="a shard holding a lock (or a lambda, an open "
                   "file) ends the run with pickle's \"cannot pickle '_thread.lock' "
                   "object\" from transport.encode (also under mpiexec, from rank 0): "
                   "nothing names setup's shard, the worker or the key; should be one "
                   "error naming them")
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


@pytest.mark.xfail(strict=True, reason="an Update whose self.rows is an index array (not "
                   "--rebalance's row count) runs, but with --checkpoint-every the run dies "
                   "after its work, at the checkpoint, with 'only 0-dimensional arrays can "
                   "be converted to Python scalars' (worker.py int(self.update.rows)); "
                   "should run, or be refused before any round naming Update.rows")
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
    try:  # (stopped by max_rounds: a last checkpoint, for a resume to go on from)
        res = strads.run(setup, RowIndices, workers=2, quiet=True, out=str(tmp_path / "o"),
                         checkpoint_every=3600, max_rounds=3)
    except Exception as e:
        assert "rows" in str(e) and not RowIndices.done, (RowIndices.done, e)
    else:
        assert res.rounds == 3


# -- 6. checkpoint state that the resume refuses ---------------------------------------
class BestWord(Sum):
    def __init__(self):
        super().__init__()
        self.words = np.array(["alpha", "beta"])
        self.best = self.words[0]  # a NumPy string scalar (np.str_)

    def aggregate(self, round, task, partials):
        self.best = self.words[round % 2]
        return super().aggregate(round, task, partials)


@pytest.mark.xfail(strict=True, reason="an aggregate holding a NumPy string scalar "
                   "(np.str_, what indexing a string array gives; also np.datetime64) is "
                   "checkpointed without complaint, then --resume refuses its own "
                   "checkpoint: 'aggregate.best: malformed ({'v': np.str_('alpha')}) does "
                   "not fit this run'; docs/failures.md: a state that cannot be checkpointed "
                   "is refused before any work")
def test_a_numpy_string_in_the_state_resumes(tmp_path):
    def setup(ctx):
        return Rounds(6), BestWord(), shards(ctx)
    full = strads.run(setup, Count, workers=2, quiet=True)
    out = str(tmp_path / "o")
    try:
        strads.run(setup, Count, workers=2, quiet=True, out=out, checkpoint_every=3600,
                   max_rounds=3)
    except CheckpointError as e:  # (refused up front, naming it: fixed too)
        assert "BestWord.best" in str(e)
        return
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


@pytest.mark.xfail(strict=True, reason="a schedule holding the aggregate's array (it "
                   "reads the aggregate's state, as the contract says) resumes silently "
                   "wrong: each piece's copy is restored apart, the schedule's stays at the "
                   "checkpoint's values and every later task is stale (objective 57 for "
                   "the uninterrupted 0.85 at staleness 0, where docs/failures.md promises "
                   "the same model bit for bit); should resume the shared array as one, or "
                   "refuse the state naming it")
def test_a_schedule_sharing_the_aggregates_array_resumes_bit_for_bit(tmp_path):
    rng = np.random.default_rng(0)
    X, y = rng.standard_normal((120, 8)), rng.standard_normal(120)

    def setup(ctx):
        agg = Descent(8)
        return Reads(agg.w), agg, [{"X": X[r], "y": y[r]} for r in
                                   np.array_split(np.arange(120), ctx.n_workers)]
    full = strads.run(setup, Gradient, workers=2, quiet=True, max_rounds=40)
    out = str(tmp_path / "o")
    try:
        strads.run(setup, Gradient, workers=2, quiet=True, max_rounds=15, out=out,
                   checkpoint_every=3600)
    except CheckpointError as e:  # (refused up front, naming it: fixed too)
        assert "Reads.w" in str(e) or "Descent.w" in str(e)
        return
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


@pytest.mark.xfail(strict=True, reason="run(tol=1e-3) with an aggregate that defines "
                   "neither objective() nor converged() (both optional) runs to max_rounds "
                   "(with none: for ever) without a word: the default converged() compares "
                   "the default NaN objective; should be refused before any round naming "
                   "tol and objective() (or at least warned)")
def test_tol_without_an_objective_is_refused_or_warned():
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        try:
            res = strads.run(lambda ctx: (Forever(), NoObjective(), [{}] * ctx.n_workers),
                             One, workers=2, tol=1e-3, max_rounds=50, quiet=True)
        except Exception as e:
            assert "objective" in str(e) and "tol" in str(e)
            return
    assert any("objective" in str(w.message) for w in seen), (res.stop_reason, res.rounds)


# -- 9. strads.cli.run_app's error line -------------------------------------------------
@pytest.mark.xfail(strict=True, reason="run_app('examples/ridge.py', ...) prints bad input "
                   "as 'python -m ridge: error: ...' (it passes main the basename), while "
                   "argparse's own errors and --help say 'python examples/ridge.py'; "
                   "docs/extending.md: one line with argparse's prefix")
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


@pytest.mark.xfail(strict=True, reason="an aggregate that returns a per-worker list of "
                   "None (no sync for any worker, as docs/extending.md allows: a list per "
                   "worker, a worker's None applies nothing) to an Update without apply is "
                   "refused: 'NothingToApply.aggregate returned a sync for the workers, but "
                   "NoApply does not define apply(sync): they would ignore it' "
                   "(api.check_sync tests the list, not its parts); the workers have "
                   "nothing to apply")
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


@pytest.mark.xfail(strict=True, reason="an Update that declares row_state but not rows "
                   "passes the resume's check on another number of workers, then every "
                   "worker's default reshard raises a bare NotImplementedError() (no "
                   "message, api.py Update.reshard) after setup and the shards; should be "
                   "refused before, in one line naming rows, as an Update with neither "
                   "row_state nor reshard is (docs/elastic.md)")
def test_row_state_without_rows_is_refused_naming_rows(tmp_path):
    out = str(tmp_path / "o")
    _ridge_run(RowStateOnly, 2, max_rounds=5, out=out, checkpoint_every=3600)
    with pytest.raises(CheckpointError, match=r"RowStateOnly.*rows"):
        _ridge_run(RowStateOnly, 3, max_rounds=10, out=out, resume=True)


# -- 12. a model with keys that are not names ---------------------------------------------
class ByIndex(Sum):
    def finish(self, collected):
        return {0: np.zeros(2), 1: np.ones(3)}  # the factors by number


@pytest.mark.xfail(strict=True, reason="finish() returning a model keyed by numbers passes "
                   "api.check_hook (which checks values only) and the run's work, then "
                   "writing model.npz fails with np.savez's 'keywords must be strings' "
                   "(outputs.py): the Result is lost and nothing names finish(); should be "
                   "refused as the other bad models are, naming finish() and the key")
def test_a_model_keyed_by_numbers_is_refused_naming_finish(tmp_path):
    with pytest.raises(TypeError, match=r"ByIndex\.finish\(\).*0"):
        strads.run(lambda ctx: (Rounds(2), ByIndex(), shards(ctx)), Count, workers=2,
                   quiet=True, out=str(tmp_path / "o"))


# -- 13. strads.split_balanced with more workers than rows ---------------------------
@pytest.mark.xfail(strict=True, reason="strads.split_balanced(np.ones(2), 4) returns the "
                   "offsets [0, -1, 0, 1, 2]: negative and decreasing, so setup's slices "
                   "X[cuts[w]:cuts[w + 1]] give worker 0 row 0 (X[0:-1]) and worker 2 row 0 "
                   "again: a row counted twice, silently (n=3 of 6 parts: [0, -2, -1, 0, 1, "
                   "2, 3]); should be non-decreasing offsets in [0, n] (some parts empty) "
                   "or a refusal naming n_parts")
@pytest.mark.parametrize("n, parts", [(2, 4), (3, 6), (1, 3)])
def test_split_balanced_never_gives_a_row_twice(n, parts):
    try:
        cuts = strads.split_balanced(np.ones(n), parts)
    except ValueError as e:
        assert "part" in str(e)
        return
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


@pytest.mark.xfail(strict=True, reason="checkpoint_skip = ('data') (the one-name tuple's "
                   "comma forgotten: a string) is taken as the letters {'d', 'a', 't'}: "
                   "the run is refused with 'cannot checkpoint SparseRows.data of type "
                   "csr_matrix: name it in SparseRows.checkpoint_skip', which it is; "
                   "should take the string as one name, or say checkpoint_skip must be a "
                   "tuple of names")
def test_checkpoint_skip_as_a_string_is_one_name_or_refused_as_such(tmp_path):
    import scipy.sparse as sp

    def setup(ctx):
        return Rounds(3), Sum(), [{"w": w, "data": sp.eye(4, format="csr")}
                                  for w in range(ctx.n_workers)]
    try:
        res = strads.run(setup, SparseRows, workers=2, quiet=True, out=str(tmp_path / "o"),
                         checkpoint_every=3600, max_rounds=2)
    except Exception as e:
        assert "tuple" in str(e), e
    else:
        assert res.rounds == 2


# -- 15. an overridden state() that is not a dict ---------------------------------------
class TupleState(Count):
    def state(self):  # "override state() and load_state(state)" (docs/extending.md)
        return (self.total,)

    def load_state(self, state):
        (self.total,) = state


@pytest.mark.xfail(strict=True, reason="an Update whose overridden state() returns a tuple "
                   "(docs/extending.md says only 'state() returns what a checkpoint keeps') "
                   "is refused with \"'tuple' object has no attribute 'items'\" from "
                   "checkpoint.encode (a list, None, an array alike): neither state() nor "
                   "the dict it must return is named")
def test_a_state_that_is_not_a_dict_is_refused_naming_state(tmp_path):
    with pytest.raises(TypeError, match=r"TupleState\.state\(\).*dict"):
        strads.run(lambda ctx: (Rounds(4), Sum(), shards(ctx)), TupleState, workers=2,
                   quiet=True, out=str(tmp_path / "o"), checkpoint_every=3600, max_rounds=2)


# -- 16. under mpiexec: a refusal every worker rank meets is said by each ----------------
@pytest.mark.timeout(300)
@pytest.mark.xfail(strict=True, reason="mpiexec -n 4 python examples/ridge.py --rebalance "
                   "(an Update without rows/give/take: refused in every worker's Init) "
                   "prints its one-line refusal 3 times, once per worker rank (MF's "
                   "--rebalance alike; a DataError that every worker's __init__ raises: one "
                   "line per worker too); the other refusals before the run are said once "
                   "(test_usability), docs/extending.md: one line")
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
