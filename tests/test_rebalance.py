"""--rebalance: workers' seconds of work gathered, rows moved from slow to fast."""
import numpy as np
import pytest

import strads
from strads import driver

import rebalance_app
from conftest import world


def test_plan_gives_shares_by_speed_and_moves_rows_between_neighbours_only():
    assert driver.plan([100, 100], [1.0, 1.05]) is None  # balanced enough
    assert driver.plan([100, 100], [0.0, 1.0]) is None  # no work measured
    new = driver.plan([100, 100, 100], [1.0, 4.0, 1.0])  # worker 1 four times slower
    assert sum(new) == 300 and new[1] < 100 and new[0] > 100 and new[2] > 100
    # a cut never passes a neighbour's old range, and every worker keeps a row
    new = driver.plan([10, 10, 10], [1.0, 1000.0, 1.0])
    assert new == [19, 1, 10] or (min(new) >= 1 and sum(new) == 30)
    cuts = np.cumsum([0, 10, 10, 10])
    got = np.cumsum([0] + new)
    assert all(cuts[k - 1] < got[k] < cuts[k + 1] for k in range(1, 3))


def test_plan_moves_in_proportion_to_the_speeds_and_only_when_it_pays():
    # one step to the shares of the speeds (100, 33, 100 rows a second), not half-way
    assert driver.plan([100, 100, 100], [1.0, 3.0, 1.0]) == [129, 42, 129]
    # a round of 3 s becomes one of 1.29 s: worth it over 100 rounds to come, not over 1
    # (two cuts of 29 rows: 2 rounds of 58 rows' work, 2 * 58 * 15 s / 300 / 3 = 1.9 s,
    # to be saved twice over)
    assert driver.plan([100, 100, 100], [3.0, 9.0, 3.0], 3, 100) == [129, 42, 129]
    assert driver.plan([100, 100, 100], [3.0, 9.0, 3.0], 3, 1) is None
    assert driver.plan([100, 100, 100], [3.0, 9.0, 3.0], 3, 2) is None  # 3.4 s < 3.9 s
    assert driver.plan([100, 100, 100], [3.0, 9.0, 3.0], 3, 3) is not None
    assert driver.plan([100, 100, 100], [3.0, 9.0, 3.0], 3, 100, move_cost=1000) is None


def _check(res, X, y, slow):
    exact = np.linalg.solve(X.T @ X + X.shape[0] * 0.1 * np.eye(X.shape[1]), X.T @ y)
    np.testing.assert_allclose(res.model["coef"], exact, rtol=1e-8, atol=1e-10)
    rows = res.extra["rows_per_worker"]
    assert res.extra["rebalances"] >= 1 and sum(rows) == X.shape[0]
    share = X.shape[0] // len(rows)  # where setup put them
    # against the others' mean, not their minimum: on a loaded machine a preempted
    # fast worker is measured slow for a while, and its rows wander too
    others = (sum(rows) - rows[slow]) / (len(rows) - 1)
    assert rows[slow] < share // 2 and rows[slow] < others / 2


def test_rebalance_moves_rows_off_a_slow_worker_in_one_process(monkeypatch):
    monkeypatch.setenv("STRADS_TEST_HOOK", "faults:slow:1:6")  # worker 1
    X, y = rebalance_app.problem()
    res = rebalance_app.fit(X, y, workers=3, max_rounds=400, tol=0, quiet=True,
                            rebalance=True, rebalance_every=0.05)
    _check(res, X, y, slow=1)


def test_rebalance_needs_an_app_that_moves_rows_and_no_checkpoints(tmp_path):
    import ridge
    X, y = rebalance_app.problem()
    with pytest.raises(strads.DataError, match="cannot hand rows over"):
        ridge.fit(X, y, workers=2, max_rounds=5, quiet=True, rebalance=True)
    with pytest.raises(strads.DataError, match="cannot be used together"):
        rebalance_app.fit(X, y, workers=2, max_rounds=5, quiet=True, rebalance=True,
                          checkpoint_every=1.0, out=str(tmp_path))


@pytest.mark.mpi(min_size=3)
@pytest.mark.parametrize("scheduler", ["rank", "replicated"])
def test_rebalance_under_mpi(monkeypatch, scheduler):
    rank, size = world()
    slow = 1  # worker 1: rank 2 with a scheduler rank, rank 1 without
    monkeypatch.setenv("STRADS_TEST_HOOK", f"faults:slow:{slow}:6")
    X, y = rebalance_app.problem()
    res = rebalance_app.fit(X, y, max_rounds=400, tol=0, quiet=True, rebalance=True,
                            rebalance_every=0.05, scheduler=scheduler)
    if res is None:
        assert scheduler == "rank" and rank > 0
        return
    _check(res, X, y, slow=slow)


@pytest.mark.parametrize("dense", [False, True])
def test_lasso_moves_samples_off_a_slow_worker_and_still_reaches_the_optimum(monkeypatch,
                                                                          dense):
    from sklearn.linear_model import Lasso

    from strads.apps import lasso
    from strads.apps.lasso.data import make_problem

    monkeypatch.setenv("STRADS_TEST_HOOK", "faults:slow:1:6")
    X, y, _ = make_problem(600, 200, density=0.05, corr=0.3, n_informative=20,
                           dense=dense, seed=3)
    lam = 0.05 * lasso.lambda_max(X, y)
    # a fixed number of rounds (no tolerance): long enough for several rebalances on
    # any machine, whatever converges first
    res = lasso.fit(X, y, lam=lam, schedule="priority", block=16, workers=3, tol=0,
                    max_rounds=6_000, quiet=True, rebalance=True, rebalance_every=0.02)
    rows = res.extra["rows_per_worker"]
    # off the slow worker (at tiny rows a round's fixed cost dominates, so how the
    # others split is noise)
    assert res.extra["rebalances"] >= 1 and sum(rows) == 600
    # (a loaded machine slows the others too: under load one run ended at [1, 2, 597],
    # one with the slow worker at 112 of its 200)
    assert rows[1] < 150 and rows[1] < 0.75 * (rows[0] + rows[2]) / 2
    sk = Lasso(alpha=lam, fit_intercept=False, tol=1e-12, max_iter=1_000_000).fit(X, y)
    f, f_sk = (lasso.objective(X, y, b, lam) for b in (res.model["coef"], sk.coef_))
    assert abs(f - f_sk) <= 1e-6 * f_sk


def test_plan_fits_a_round_s_fixed_cost_from_two_measurements():
    """Rounds of 1 s + 10 ms a row, and 3 s + 30 ms a row on the slow worker: from one
    measurement the shares go by speed; from two, the fixed costs are known and the
    slow worker keeps next to nothing (its fixed 3 s is more than the others' rounds)."""
    first = driver.plan([100, 100, 100], [2.0, 6.0, 2.0])
    assert first == [129, 42, 129]
    t = [1 + 0.01 * 129, 3 + 0.03 * 42, 1 + 0.01 * 129]
    assert driver.plan(first, t, before=([100, 100, 100], [2.0, 6.0, 2.0])) == [150, 1, 149]
    assert driver.plan(first, t)[1] > 1  # without the earlier one: by speed again
