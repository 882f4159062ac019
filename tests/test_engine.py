"""The engine and the custom app, in one process."""
import sys
from pathlib import Path

import numpy as np
import pytest

import strads
from conftest import FakeClock
from strads import transport

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "examples"))
import ridge  # noqa: E402


def test_custom_ridge_app_matches_closed_form():
    rng = np.random.default_rng(0)
    X = rng.standard_normal((300, 24))
    y = X @ rng.standard_normal(24) + rng.standard_normal(300)
    for workers in (1, 3):
        res = ridge.fit(X, y, lam=0.1, block=5, workers=workers, max_rounds=400, tol=0,
                        quiet=True)
        exact = np.linalg.solve(X.T @ X + 300 * 0.1 * np.eye(24), X.T @ y)
        np.testing.assert_allclose(res.model["coef"], exact, rtol=1e-8, atol=1e-10)
        assert res.rounds == 400


def test_codec_sends_arrays_as_buffers_not_pickles():
    import scipy.sparse as sp
    big = np.arange(100_000, dtype=np.float64)
    msg = {"a": big, "F": np.asfortranarray(np.ones((50, 40))), "s": sp.random(50, 50, 0.1,
           format="csc", random_state=0), "k": 3}
    head, bufs = transport.encode(msg)
    assert len(head) < 2000  # the pickle holds the structure only
    assert sum(len(b) for b in bufs) >= big.nbytes
    back = transport.unpack(transport.pack(msg))
    np.testing.assert_array_equal(back["a"], big)
    assert back["F"].flags.f_contiguous
    assert (back["s"] != msg["s"]).nnz == 0 and back["k"] == 3
    back["a"][0] = 5  # received arrays are writable


@pytest.mark.parametrize("counts, parts", [([100, 1, 1], 3), ([1] * 10, 3), ([0, 0, 9, 0], 2),
                                           ([5], 1), ([3, 1, 4, 1, 5, 9, 2, 6], 4)])
def test_split_balanced_gives_every_part_rows(counts, parts):
    cuts = strads.split_balanced(np.array(counts), parts)
    assert cuts[0] == 0 and cuts[-1] == len(counts) and len(cuts) == parts + 1
    assert (np.diff(cuts) >= 1).all()  # a worker with no rows would have nothing to do
    sums = np.add.reduceat(np.array(counts), cuts[:-1])
    assert sums.max() <= sum(counts) / parts + max(counts)  # about equal


def test_in_process_messages_are_copies_except_read_only_arrays():
    import scipy.sparse as sp
    seen = []
    tp = transport.InProcess(1)
    tp.handlers = [lambda msg: seen.append(msg)]
    mine = np.arange(5.0)
    frozen = np.arange(5.0).view()
    frozen.flags.writeable = False
    tp.send(0, {"a": mine, "f": frozen, "l": [mine], "s": sp.eye(3, format="csr")})
    got = seen[0]
    mine[0] = 99.0  # the sender changes its array after sending: the receiver's is its own
    assert got["a"][0] == 0.0 and got["l"][0][0] == 0.0 and got["a"].flags.writeable
    assert got["f"] is frozen  # read-only: the sender promised it never changes
    assert (got["s"] != sp.eye(3)).nnz == 0


@pytest.mark.parametrize("bad, match", [
    (dict(staleness=-1), "staleness"), (dict(workers=0), "workers"),
    (dict(max_rounds=-2), "max_rounds"), (dict(time_limit=0), "time_limit"),
])
def test_run_rejects_bad_settings(bad, match):
    with pytest.raises(strads.DataError, match=match):
        ridge.fit(np.ones((4, 2)), np.ones(4), **bad)


def test_a_result_older_than_the_staleness_bound_is_refused(monkeypatch):
    handle = strads.worker.WorkerHost.handle

    def lagging(self, msg):
        reply = handle(self, msg)
        if isinstance(reply, strads.worker.RoundResult) and reply.round > 5:
            reply = reply._replace(oldest=reply.oldest - 2)  # claim older parameters
        return reply

    monkeypatch.setattr(strads.worker.WorkerHost, "handle", lagging)
    rng = np.random.default_rng(0)
    X, y = rng.standard_normal((60, 6)), rng.standard_normal(60)
    with pytest.raises(strads.StalenessError, match="rounds stale"):
        ridge.fit(X, y, staleness=1, max_rounds=50, tol=0, quiet=True, workers=2)


def test_time_limit_and_schedule_end(monkeypatch):
    class Forever(strads.Schedule):
        def schedule(self, round):
            return {} if round < 1_000_000_000 else None

    clock = FakeClock(monkeypatch, strads.driver, frozen=True)

    class Count(strads.Aggregate):
        def aggregate(self, round, task, partials):
            self.updates += 1
            if self.updates == 10:  # the clock passes the limit at round 10's result
                clock.skip(1000)

    class Nothing(strads.Update):
        def update(self, task):
            return {}

    res = strads.run(lambda ctx: (Forever(), Count(), [{}] * ctx.n_workers), Nothing, workers=2,
                     max_rounds=10**9, time_limit=100, quiet=True)
    assert res.stop_reason == "time_limit"
    assert res.rounds == res.updates == 10  # stopped at the clock's jump: no round after

    class Three(Forever):
        def schedule(self, round):
            return {} if round < 3 else None

    res = strads.run(lambda ctx: (Three(), Count(), [{}] * ctx.n_workers), Nothing, quiet=True)
    assert res.stop_reason == "schedule_done" and res.rounds == 3 and res.updates == 3


def test_mpi_size_detection_reads_the_launcher(monkeypatch):
    for var in ("PMI_SIZE", "OMPI_COMM_WORLD_SIZE", "PMIX_SIZE"):
        monkeypatch.delenv(var, raising=False)
    assert transport.mpi_world_size() == 0
    monkeypatch.setenv("PMI_SIZE", "4")
    assert transport.mpi_world_size() == 4


def test_threaded_workers_give_the_sequential_result_bit_for_bit():
    """In one process each worker runs on a thread of its own; the model, the trace of
    versions and the objective are those of the workers run one after the other (for
    apps whose workers do not meet in collectives: those cannot run one after the
    other; tests/test_mpi.py compares them with mpiexec)."""
    import threading

    from strads.apps import lasso

    rng = np.random.default_rng(3)
    X = rng.standard_normal((200, 30))
    y = X @ rng.standard_normal(30) + rng.standard_normal(200)
    runs = {
        "ridge": lambda **kw: ridge.fit(X, y, block=4, max_rounds=60, tol=0, **kw),
        "lasso": lambda **kw: lasso.fit(X, y, lambda_ratio=0.05, schedule="priority",
                                        block=8, max_rounds=300, tol=0, **kw),
    }
    seen = set()
    orig = strads.worker.WorkerHost.handle

    def spy(self, msg):
        seen.add(threading.current_thread().name)
        return orig(self, msg)

    for name, fit in runs.items():
        for staleness in (0, 1):
            seq = fit(workers=3, staleness=staleness, threads=False, quiet=True)
            strads.worker.WorkerHost.handle = spy
            try:
                par = fit(workers=3, staleness=staleness, threads=True, quiet=True)
            finally:
                strads.worker.WorkerHost.handle = orig
            assert seq.model.keys() == par.model.keys()
            for k in seq.model:
                np.testing.assert_array_equal(seq.model[k], par.model[k], err_msg=(name, k))
            np.testing.assert_array_equal(seq.versions, par.versions)
            assert seq.objective == par.objective or np.isnan(seq.objective)
    assert {f"strads-worker-{w}_0" for w in range(3)} <= seen


def test_run_has_no_round_limit_by_default():
    class Upto(strads.Schedule):
        def schedule(self, round):
            return {} if round < 250 else None

    class Count(strads.Aggregate):
        def aggregate(self, round, task, partials):
            self.updates += 1

    class Nothing(strads.Update):
        def update(self, task):
            return 0

    res = strads.run(lambda ctx: (Upto(), Count(), [{}] * ctx.n_workers), Nothing, quiet=True)
    assert res.rounds == 250 and res.stop_reason == "schedule_done"  # not cut at 100


@pytest.mark.parametrize("module", ["strads.apps.lasso", "strads.apps.mf",
                                    "strads.apps.logreg", "strads.apps.lda"])
def test_help_shows_a_default_for_every_flag(module):
    import importlib
    p = importlib.import_module(module + ".__main__").build_parser()
    from strads.cli import STATED

    text = " ".join(p.format_help().split())
    f = p._get_formatter()
    for action in p._actions:
        if action.option_strings and action.dest != "help":
            shown = f._expand_help(action)  # as --help shows it
            assert len(STATED.findall(shown)) == 1, (action.option_strings, shown)
            assert "(default: None)" not in shown  # None is said "none"
    assert "(needs --out) (default: none)" in text  # once, not "default: none) (default"


def test_runs_from_the_folder_holding_a_clone_named_strads(tmp_path):
    """`python -m strads.apps.lasso` beside a checkout named strads: with the default
    editable install that folder is an empty namespace package, found first."""
    import subprocess
    from conftest import ROOT, child_env
    (tmp_path / "strads").symlink_to(ROOT, target_is_directory=True)
    p = subprocess.run([sys.executable, "-m", "strads.apps.lasso", "--help"], cwd=tmp_path,
                       capture_output=True, text=True, timeout=120, env=child_env())
    assert p.returncode == 0, p.stderr
    assert "usage: python -m strads.apps.lasso" in p.stdout


@pytest.mark.parametrize("workers", [1, 2, 3, 4])
def test_workers_collectives_match_numpy(workers):
    """The data plane in one process (threads meeting at barriers): allreduce in worker
    order, allgather, bcast from any root, ring shifts by 1 and 2; only worker 0 reports."""
    import peer_app

    res, agg = peer_app.fit(workers=workers)
    x, last = peer_app.reference(workers)
    np.testing.assert_array_equal(res.model["x"], x)  # the same additions, in order
    np.testing.assert_array_equal(res.model["total"], last["total"])
    np.testing.assert_array_equal(res.model["heads"], last["heads"])
    assert res.model["b"] == last["b"]
    assert agg.reports == [{"rows": 5, "rank": w} for w in range(workers)]


def test_collectives_need_worker_threads_and_a_failing_worker_ends_the_run():
    import peer_app

    with pytest.raises(RuntimeError, match="need worker threads"):
        peer_app.fit(workers=2, threads=False)

    class Fails(peer_app.Mixing):
        def update(self, task):
            if self.peers.rank == 1 and task["r"] == 3:
                raise ValueError("worker 1 fails in round 3")
            return super().update(task)

    def setup(ctx):
        return peer_app.Rounds(7), peer_app.Keep(), peer_app.shards(ctx.n_workers)
    # the others wait for worker 1 in a collective: they stop, and its error is the one
    with pytest.raises(ValueError, match="worker 1 fails in round 3"):
        strads.run(setup, Fails, workers=3, quiet=True)


@pytest.mark.parametrize("spec", ["garbage", "faults:nope", "no_such_module:f", "faults:"])
def test_an_invalid_test_hook_is_refused_in_one_line(monkeypatch, spec):
    monkeypatch.setenv("STRADS_TEST_HOOK", spec)
    with pytest.raises(strads.DataError, match=f"STRADS_TEST_HOOK={spec!r}: expected "
                                               "MODULE:FUNCTION"):
        ridge.fit(np.ones((4, 2)), np.ones(4), max_rounds=2, quiet=True)


def test_an_incomplete_app_is_refused_before_any_work_naming_every_missing_method():
    class NoPlan(strads.Schedule):
        pass

    class NoKernel(strads.Update):
        pass

    class NoSum(strads.Aggregate):
        pass

    made = []

    def setup(ctx):
        made.append(ctx)
        return NoPlan(), NoSum(), [{}] * ctx.n_workers

    with pytest.raises(TypeError, match=r"the app 'custom' is not complete: missing "
                                        r"NoPlan.schedule and NoKernel.update and "
                                        r"NoSum.aggregate"):
        strads.run(setup, NoKernel, workers=2, quiet=True)
    with pytest.raises(TypeError, match=r"missing NoKernel.update \(see"):
        strads.run(lambda ctx: (ridge.Cyclic(4, 2), ridge.RidgeAggregate(8, 4, 0.1),
                                [{}] * ctx.n_workers), NoKernel, quiet=True)


def test_a_sync_that_the_workers_cannot_apply_is_refused_naming_the_hook():
    class Forgetful(ridge.RidgeUpdate):
        apply = strads.Update.apply  # as if the app had not written it

    rng = np.random.default_rng(0)
    X, y = rng.standard_normal((40, 4)), rng.standard_normal(40)

    def setup(ctx):
        rows = np.array_split(np.arange(40), ctx.n_workers)
        return ridge.Cyclic(4, 2), ridge.RidgeAggregate(40, 4, 0.1), [
            {"X": X[r], "y": y[r]} for r in rows]

    with pytest.raises(TypeError, match="RidgeAggregate.aggregate returned a sync for the "
                                        "workers, but Forgetful does not define "
                                        r"apply\(sync\)"):
        strads.run(setup, Forgetful, workers=2, max_rounds=5, quiet=True)


def _ridge_setup(agg_cls):
    rng = np.random.default_rng(0)
    X, y = rng.standard_normal((40, 4)), rng.standard_normal(40)

    def setup(ctx):
        rows = np.array_split(np.arange(40), ctx.n_workers)
        return ridge.Cyclic(4, 2), agg_cls(40, 4, 0.1), [
            {"X": X[r], "y": y[r]} for r in rows]
    return setup


@pytest.mark.parametrize("hook, value, match", [
    ("trace", {"round": 99}, r"trace\(\) returned 'round', one of the engine's own"),
    ("trace", {"objective": -1.0}, r"trace\(\) returned 'objective', one of the engine"),
    ("trace", {"per_block": np.ones(3)}, r"trace\(\) returned ndarray for 'per_block': a "
                                         "trace.csv cell is a number or a string"),
    ("summary", {"rounds": 7}, r"summary\(\) returned 'rounds', one of the engine's own"),
    ("summary", {"stop_reason": "mine"}, r"summary\(\) returned 'stop_reason'"),
    ("summary", [("a", 1)], r"summary\(\) returned list, not a dict"),
    ("finish", {"coef": np.array([{}, 1])}, r"finish\(\) returned objects for 'coef'"),
    ("finish", {"coef": [[1.0], [1.0, 2.0]]}, r"finish\(\) returned objects for 'coef'"),
])
def test_an_aggregate_hook_may_not_replace_the_engines_fields(tmp_path, hook, value, match):
    Bad = type("Bad", (ridge.RidgeAggregate,), {hook: lambda self, *a: value})
    with pytest.raises(TypeError, match="Bad." + match):
        strads.run(_ridge_setup(Bad), ridge.RidgeUpdate, workers=2, max_rounds=5,
                   quiet=True, out=str(tmp_path / "o"))
    assert not (tmp_path / "o" / "summary.json").exists()  # (not rewritten silently)


def test_an_update_instance_or_an_objective_not_a_number_is_refused_in_one_line():
    with pytest.raises(TypeError, match="^update must be a subclass of strads.Update, got an "
                                        "instance of RidgeUpdate$"):
        strads.run(_ridge_setup(ridge.RidgeAggregate), ridge.RidgeUpdate(
            {"X": 0, "y": np.ones(1)}), max_rounds=5, quiet=True)
    Words = type("Words", (ridge.RidgeAggregate,), {"objective": lambda self: "0.5"})
    with pytest.raises(TypeError, match=r"^Words.objective\(\) returned str, not a number$"):
        strads.run(_ridge_setup(Words), ridge.RidgeUpdate, max_rounds=5, quiet=True)


def test_strads_cli_is_an_attribute_of_strads():
    import subprocess
    code = "import strads; print(strads.cli.parser('x.py').prog, strads.cli.run_app.__name__)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.stdout == "python x.py run_app\n", out.stderr


def test_a_summary_of_numpy_arrays_is_written_as_lists(tmp_path):
    import json

    class Arrays(ridge.RidgeAggregate):
        def summary(self):
            return {"per_block": np.array([1.0, np.nan]), "n": np.int64(3),
                    "nested": [np.float32(0.5), {"x": np.arange(2)}]}

    strads.run(_ridge_setup(Arrays), ridge.RidgeUpdate, workers=2, max_rounds=5, quiet=True,
               out=str(tmp_path / "o"))
    s = json.loads((tmp_path / "o" / "summary.json").read_text())
    assert s["per_block"] == [1.0, None] and s["n"] == 3
    assert s["nested"] == [0.5, {"x": [0, 1]}] and s["rounds"] == 5


def test_a_custom_app_gets_the_standard_command_line(tmp_path, capsys):
    import json
    res = ridge.main(["--workers", "2", "--max-rounds", "30", "--quiet", "--lam", "0.5",
                      "--out", str(tmp_path / "o")])
    assert res.rounds == 30 and res.workers == 2
    assert json.loads(capsys.readouterr().out)["rounds"] == 30
    assert (tmp_path / "o" / "model.npz").exists()
    with pytest.raises(SystemExit) as e:
        ridge.main(["--block", "0"])
    assert e.value.code == 2 and "argument --block" in capsys.readouterr().err


def test_parameters_are_declared_once_for_the_cli_run_and_estimators():
    from sklearn.utils._param_validation import (InvalidParameterError,
                                                 validate_parameter_constraints)

    from strads import params

    eng = {p.name: p for p in params.ENGINE}
    assert params.RESUME_MAY_CHANGE == {p.flag for p in params.ENGINE if p.resume}
    assert "--staleness" not in params.RESUME_MAY_CHANGE and "--tol" in params.RESUME_MAY_CHANGE
    with pytest.raises(strads.DataError, match=r"^--staleness must be an integer >= 0, "
                                               r"got -1$"):
        params.check(params.ENGINE, {"staleness": -1}, cli=True)
    with pytest.raises(strads.DataError, match=r"^time_limit must be a finite number > 0 "
                                               r"\(seconds\), got inf$"):
        params.check(params.ENGINE, {"time_limit": float("inf")})
    params.check(params.ENGINE, {"time_limit": None, "scheduler": "rank", "quiet": 1})
    c = params.sklearn_constraints(params.ENGINE)
    validate_parameter_constraints(c, {"staleness": 2, "time_limit": None, "out": None,
                                       "scheduler": "replicated"}, "run")
    for bad in ({"staleness": -1}, {"scheduler": "x"}, {"time_limit": float("inf")}):
        with pytest.raises(InvalidParameterError):
            validate_parameter_constraints(c, bad, "run")
    assert eng["max_rounds"].problem(0) is None and eng["schedulers"].problem(0)
    # an estimator's names, and where it allows other values (at least one round, no None)
    c = params.sklearn_constraints(params.ENGINE, {"max_iter": "max_rounds"},
                                   max_iter=dict(low=1, none=False))
    assert set(c) == {"max_iter"}
    validate_parameter_constraints(c, {"max_iter": 1}, "fit")
    for bad in (0, None, 1.5):
        with pytest.raises(InvalidParameterError, match=r"'max_iter' parameter of fit"):
            validate_parameter_constraints(c, {"max_iter": bad}, "fit")


def test_runs_keep_blas_to_one_thread_with_the_controller_kept():
    """Every run limits the loaded thread pools (BLAS) to one thread and restores them
    after, the second time from the controller made by the first (no rescan)."""
    from threadpoolctl import threadpool_info
    from strads import driver
    before = [p["num_threads"] for p in threadpool_info()]
    assert before  # (numpy's BLAS is loaded)
    for _ in range(2):
        with driver._one_thread():
            assert all(p["num_threads"] == 1 for p in threadpool_info())
        assert [p["num_threads"] for p in threadpool_info()] == before
    assert len(driver._POOLS) == 1


def test_a_warm_up_error_ends_the_run_and_a_set_up_error_comes_first():
    """Worker 0 loads its kernels (``warmup``) on a thread while its shard is set up:
    an error in either ends the run with that error; in both, the set-up's."""
    rng = np.random.default_rng(0)
    X, y = rng.standard_normal((40, 6)), rng.standard_normal(40)

    class BadWarmUp(ridge.RidgeUpdate):
        @classmethod
        def warmup(cls):
            raise RuntimeError("the warm-up fails")

    class BadBoth(BadWarmUp):
        def __init__(self, shard):
            raise ValueError("the set-up fails")

    def setup(ctx):
        rows = np.array_split(np.arange(40), ctx.n_workers)
        return (ridge.Cyclic(6, 2), ridge.RidgeAggregate(40, 6, 0.1),
                [{"X": np.asfortranarray(X[r]), "y": y[r]} for r in rows])
    with pytest.raises(RuntimeError, match="the warm-up fails"):
        strads.run(setup, BadWarmUp, workers=2, max_rounds=5, quiet=True)
    with pytest.raises(ValueError, match="the set-up fails"):
        strads.run(setup, BadBoth, workers=2, max_rounds=5, quiet=True)
