"""MF with the model on the workers: they exchange a round's columns among themselves
(the data plane), the scheduler keeps only small figures and its traffic per round does
not grow with the number of workers."""
import json

import numpy as np
import pytest

import strads
from strads.apps import mf
from strads.apps.mf import __main__ as mf_cli

from conftest import run_cli
from test_mf import LAM, numpy_als, small_problem

CLI = ["strads.apps.mf", "--n-users", "400", "--n-items", "200", "--n-ratings", "5000",
       "--rank", "4", "--tol", "0", "--quiet"]


@pytest.mark.parametrize("schedule", ["ccd", "als"])
def test_staleness_changes_nothing_and_reaches_the_reference(schedule):
    # the columns are exchanged inside the round: every round is solved against all the
    # rounds before it, whatever the staleness
    u, i, r = small_problem()
    ref = numpy_als(u, i, r, 3, LAM, "full")
    runs = [mf.fit(u, i, r, rank=3, lam=LAM, weighted=False, bias="full", schedule=schedule,
                   iters=5000, tol=1e-14, workers=3, staleness=s, quiet=True,
                   early_stop=None)  # the objective's minimiser
            for s in (0, 1, 2)]
    for s, res in enumerate(runs):
        assert res.stop_reason == "tol"
        assert res.summary()["max_staleness_seen"] == s
        assert abs(res.objective - ref) <= 1e-6 * ref
    # a fixed number of rounds (with tol, a stale run stops a few rounds later)
    runs = [mf.fit(u, i, r, rank=3, lam=LAM, bias="full", schedule=schedule, iters=7,
                   tol=0, workers=3, staleness=s, quiet=True, test_fraction=0.2)
            for s in (0, 1, 2)]
    for res in runs[1:]:
        for key in ("W", "H", "user_bias", "item_bias"):
            np.testing.assert_array_equal(res.model[key], runs[0].model[key], err_msg=key)
        for key in ("objective_per_iter", "test_rmse_per_iter", "test_rmse"):
            assert res.extra[key] == runs[0].extra[key], key
        assert res.objective == runs[0].objective


def _arrays(obj, seen=None):
    """Every NumPy array reachable from obj's attributes and containers."""
    seen = set() if seen is None else seen
    if id(obj) in seen:
        return
    seen.add(id(obj))
    if isinstance(obj, np.ndarray):
        yield obj
    elif isinstance(obj, dict):
        for v in obj.values():
            yield from _arrays(v, seen)
    elif isinstance(obj, (list, tuple, set)) or type(obj).__name__ == "deque":
        for v in obj:
            yield from _arrays(v, seen)
    elif hasattr(obj, "__dict__"):
        for v in vars(obj).values():
            yield from _arrays(v, seen)


@pytest.mark.parametrize("schedule", ["ccd", "als"])
def test_the_scheduler_keeps_nothing_of_the_data_or_model_size(schedule):
    t = mf.make_problem(3000, 1500, 20000, seed=1)
    p = mf.prepare(t, test_fraction=0.1)
    setup = mf.make_setup(lambda: p, rank=6, bias="full", schedule=schedule, iters=2)
    sched, agg, shards = setup(strads.Context(3))
    kk = 6 + 2
    for piece in (sched, agg):
        big = [a.shape for a in _arrays(piece) if a.size > 2 * kk]
        assert not big, (type(piece).__name__, big)
    # and the whole run's results: the model file as before, from the workers' rows
    res = strads.run(mf.make_setup(lambda: p, rank=6, bias="full", schedule=schedule,
                                   iters=2), mf.MFUpdate, workers=3, quiet=True)
    M = res.model
    assert M["W"].shape == (p.shape[0], 6) and M["H"].shape == (p.shape[1], 6)
    assert M["W"].flags.c_contiguous and M["H"].flags.c_contiguous
    np.testing.assert_array_equal(M["user_ids"], p.user_ids)
    np.testing.assert_array_equal(M["item_ids"], p.item_ids)
    assert res.extra["n_test"] == p.test_ratings.shape[0] > 0
    e = p.test_ratings - mf.predict(M, p.user_ids[p.test_users], p.item_ids[p.test_items])
    assert res.extra["test_rmse"] == pytest.approx(np.sqrt(np.mean(e ** 2)), rel=1e-10)


def _in_process(args, workers):
    a = mf_cli.build_parser().parse_args(args[1:] + ["--workers", str(workers)])
    return mf_cli.run(a)


@pytest.mark.parametrize("schedule,staleness", [("ccd", 1), ("als", 0)])
def test_in_process_with_1_2_3_workers_is_mpi_bit_for_bit(tmp_path, schedule, staleness):
    """mpiexec -n w+1 and w workers in one process: the same bits (model, figures); and
    the model does not depend on the number of workers at all (each row's update reads
    only its own ratings and the other side's assembled columns)."""
    args = CLI + ["--iters", "3", "--bias", "full", "--schedule", schedule,
                  "--staleness", str(staleness)]
    models = []
    for w in (1, 2, 3):
        p = run_cli(args + ["--out", str(tmp_path / str(w))], np=w + 1, timeout=120)
        assert p.returncode == 0, p.stderr
        with np.load(tmp_path / str(w) / "model.npz") as z:
            mpi = {k: z[k] for k in z.files}
        s = json.loads((tmp_path / str(w) / "summary.json").read_text())
        one = _in_process(args, w)
        assert s["ranks"] == w + 1 and s["workers"] == w
        assert mpi.keys() == one.model.keys()
        for k in mpi:
            np.testing.assert_array_equal(mpi[k], one.model[k], err_msg=k)
        for k in ("objective", "train_rmse", "test_rmse", "objective_per_iter",
                  "test_rmse_per_iter"):
            assert s[k] == one.summary()[k], k
        models.append(mpi)
    for M in models[1:]:
        for k in ("W", "H", "user_bias", "item_bias"):
            np.testing.assert_array_equal(M[k], models[0][k], err_msg=k)


@pytest.mark.long
def test_rank_0_traffic_per_round_does_not_grow_with_the_workers(tmp_path):
    """Per round rank 0 sends one message (down the workers' tree) and receives one (their
    combined replies: worker 0's small sums), of the same size for 2 and 3 workers:
    the columns go among the workers."""
    per_round = {}
    for n in (3, 4):
        got = []
        for iters in (2, 4):
            out = tmp_path / f"{n}-{iters}"
            p = run_cli(CLI + ["--iters", str(iters), "--out", str(out)], np=n, timeout=120)
            assert p.returncode == 0, p.stderr
            s = json.loads((out / "summary.json").read_text())
            assert s["ranks"] == n
            got.append((s["rounds"], s["traffic"][0]))
        (r1, a), (r2, b) = got
        assert r2 > r1
        d = {k: (b[k] - a[k]) / (r2 - r1) for k in
             ("bytes_sent", "bytes_received", "messages_sent", "messages_received")}
        assert d["messages_sent"] == 1 and d["messages_received"] == 1, d
        per_round[n] = d
    for k in ("bytes_sent", "bytes_received"):
        small, large = per_round[3][k], per_round[4][k]
        # a column is 400 users x 8 bytes; a round's messages are far smaller
        assert 0 < small < 1000 and large == pytest.approx(small, rel=0.1), per_round


def test_tiled_layout_under_mpiexec_is_the_rows_bit_for_bit(tmp_path, monkeypatch):
    """More users than a tile (kernels.TILE_ROWS): the item side's ratings are read tile
    by tile; under mpiexec -n 3 the model and figures are those of 2 workers in one
    process with the rows' layout, bit for bit."""
    from strads.apps.mf import kernels as K
    args = ["strads.apps.mf", "--n-users", str(K.TILE_ROWS + 7000), "--n-items", "300",
            "--n-ratings", "400000", "--rank", "3", "--iters", "2", "--tol", "0",
            "--early-stop", "0", "--quiet"]
    p = run_cli(args + ["--out", str(tmp_path)], np=3, timeout=300)
    assert p.returncode == 0, p.stderr
    s = json.loads((tmp_path / "summary.json").read_text())
    calls = []
    real = K.ccd_tiles

    def counted(*a):
        calls.append(a[3].shape[1])
        return real(*a)

    monkeypatch.setattr(K, "ccd_tiles", counted)  # (a[3]: the worker's own rows)
    _in_process(args, 2)
    assert max(calls) > 1  # the item side tiled (the warm-up's call has one row)
    monkeypatch.setattr(K, "TILE_ROWS", 10 ** 9)
    calls.clear()
    rows = _in_process(args, 2)
    assert all(c == 1 for c in calls)  # (the warm-up's only: once a process, if here)
    with np.load(tmp_path / "model.npz") as z:
        for k in z.files:
            np.testing.assert_array_equal(z[k], rows.model[k], err_msg=k)
    for k in ("objective", "train_rmse", "test_rmse", "objective_per_iter"):
        assert s[k] == rows.summary()[k], k
