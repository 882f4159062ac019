"""--rebalance: workers' seconds of work gathered, rows moved from slow to fast."""
import numpy as np
import pytest

import strads
from strads import rebalance

import rebalance_app
from conftest import world


def _plan(rows, t, **kw):
    return rebalance.plan([(rows, t)], **kw)


def test_plan_gives_shares_by_speed_and_keeps_a_row_on_every_worker():
    assert _plan([100, 100], [1.0, 1.05]) is None  # balanced enough
    assert _plan([100, 100], [0.0, 1.0]) is None  # no work measured
    new = _plan([100, 100, 100], [1.0, 4.0, 1.0])  # worker 1 four times slower
    assert sum(new) == 300 and new[1] < 100 and new[0] > 100 and new[2] > 100
    assert _plan([10, 10, 10], [1.0, 1000.0, 1.0]) == [15, 1, 14]


def test_steps_pass_rows_through_a_neighbour_and_keep_every_cut_in_range():
    rng = np.random.default_rng(0)
    for _ in range(200):
        W = int(rng.integers(2, 6))
        rows, new = (list(rng.multinomial(40 - W, np.ones(W) / W) + 1) for _ in range(2))
        held = rows
        for old, step in rebalance.steps(rows, new):
            assert old == held and sum(step) == 40 and min(step) >= 1
            cuts, got = np.cumsum([0] + old), np.cumsum([0] + step)
            assert all(cuts[k - 1] < got[k] < cuts[k + 1] for k in range(1, W))
            held = step
        assert held == new
    # worker 2's rows reach worker 0 through worker 1, one move each
    assert [s for _, s in rebalance.steps([10, 10, 10], [28, 1, 1])] == [[19, 10, 1],
                                                                         [28, 1, 1]]


def test_plan_moves_in_proportion_to_the_speeds_and_only_when_it_pays():
    # one step to the shares of the speeds (100, 33, 100 rows a second), not half-way
    assert _plan([100, 100, 100], [1.0, 3.0, 1.0]) == [129, 42, 129]
    # a round of 3 s becomes one of 1.29 s: worth it over 100 rounds to come, not over 1
    # (two cuts of 29 rows: 2 rounds of 58 rows' work, 2 * 58 * 5 s / 300 = 1.9 s,
    # to be saved twice over)
    assert _plan([100, 100, 100], [1.0, 3.0, 1.0], ahead=100) == [129, 42, 129]
    assert _plan([100, 100, 100], [1.0, 3.0, 1.0], ahead=1) is None
    assert _plan([100, 100, 100], [1.0, 3.0, 1.0], ahead=2) is None  # 3.4 s < 3.9 s
    assert _plan([100, 100, 100], [1.0, 3.0, 1.0], ahead=3) is not None
    # once a move has been timed: at least what it cost (here 100 s for 10 rows)
    assert _plan([100, 100, 100], [1.0, 3.0, 1.0], ahead=100, moved=(100.0, 10)) is None
    assert _plan([100, 100, 100], [1.0, 3.0, 1.0], ahead=100, moved=(1.0, 10)) is not None
    # and a small gain does not pay a move at all: it may be the measurements' noise
    assert _plan([100, 100, 100], [1.0, 1.12, 1.12], ahead=10 ** 6, moved=(0.0, 1)) is None


def _check(res, X, y, slow):
    exact = np.linalg.solve(X.T @ X + X.shape[0] * 0.1 * np.eye(X.shape[1]), X.T @ y)
    np.testing.assert_allclose(res.model["coef"], exact, rtol=1e-8, atol=1e-10)
    rows = res.extra["rows_per_worker"]
    assert res.extra["rebalances"] >= 1 and sum(rows) == X.shape[0]
    share = X.shape[0] // len(rows)  # where setup put them
    # shares by speed (faults.slow counts the seconds of work: no noise of the load)
    others = (sum(rows) - rows[slow]) / (len(rows) - 1)
    assert rows[slow] < share // 2 and abs(rows[slow] - others / 6) <= 2


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
    from strads.apps import logreg  # rows, but no give and take (was a crash mid-run)
    with pytest.raises(strads.DataError, match="LogRegUpdate cannot hand rows over"):
        labels = np.where(y > np.median(y), 1.0, -1.0)
        strads.run(logreg.make_setup(lambda: (X, labels)), logreg.DATAFIT.Update,
                   workers=2, max_rounds=50, quiet=True, rebalance=True)
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
    # off the slow worker, by speed (faults.slow counts the seconds of work)
    assert res.extra["rebalances"] >= 1 and sum(rows) == 600
    assert rows[1] < 150 and abs(rows[1] - (rows[0] + rows[2]) / 2 / 6) <= 2
    sk = Lasso(alpha=lam, fit_intercept=False, tol=1e-12, max_iter=1_000_000).fit(X, y)
    f, f_sk = (lasso.objective(X, y, b, lam) for b in (res.model["coef"], sk.coef_))
    assert abs(f - f_sk) <= 1e-6 * f_sk


def test_plan_fits_a_round_s_fixed_cost_from_the_measurements():
    """Rounds of 1 s + 10 ms a row, and 3 s + 30 ms a row on the slow worker: from one
    measurement the shares go by speed; from two, the fixed costs are known and the
    slow worker keeps next to nothing (its fixed 3 s is more than the others' rounds)."""
    first = ([100, 100, 100], [2.0, 6.0, 2.0])
    assert rebalance.plan([first]) == [129, 42, 129]
    t = [1 + 0.01 * 129, 3 + 0.03 * 42, 1 + 0.01 * 129]
    s, kappa = rebalance.fit([first, ([129, 42, 129], t)])
    assert kappa == 100 and np.allclose(s, [0.01, 0.03, 0.01])
    assert rebalance.plan([first, ([129, 42, 129], t)]) == [150, 1, 149]
    assert rebalance.plan([([129, 42, 129], t)])[1] > 1  # the last alone: by speed
    # a measurement the model fits (the rows' time in proportion to them): no move
    assert rebalance.plan([first, ([129, 42, 129], [2.58, 2.52, 2.58])]) is None


def test_plan_pools_the_measurements_so_one_noisy_one_does_not_undo_a_move():
    """After the move to the speeds' shares, one measurement in which the slow worker
    looks faster than it is (the machine's load): its pooled speed stays near 1/3 of
    the others', the model's rounds stay within 10% and nothing moves back; the same
    measurement alone would move a third of the slow worker's rows back to it."""
    first = ([100, 100, 100], [1.0, 3.0, 1.0])
    noisy = ([129, 42, 129], [1.3, 0.9, 1.4])
    assert rebalance.plan([first, noisy]) is None
    assert rebalance.plan([noisy])[1] > 55


def test_plan_takes_each_worker_s_median_measurement_not_its_busiest():
    """Measured in LDA runs (seconds a round, slow worker 1): after two moves the slow
    worker's round is half the others', so it gets rows back, although its first
    measurement, with three times the rows, had it 4x slower (a sum over the
    measurements would let that one outweigh the two later ones)."""
    seen = [([1328, 1334, 1338], [11.17e-3, 36.67e-3, 8.37e-3]),
            ([1509, 462, 2029], [8.91e-3, 6.54e-3, 13.27e-3]),
            ([1670, 491, 1839], [12.83e-3, 6.19e-3, 12.11e-3])]
    new = rebalance.plan(seen, ahead=100, moved=(0.015, 351))
    assert new is not None and 700 < new[1] < 950
    assert rebalance.plan(seen[-1:], ahead=100, moved=(0.015, 351))[1] > new[1]  # pooled
    # Lasso: three windows agree and a fourth is disturbed (every worker 4-10x):
    # nothing moves (its move would cost 0.8 s)
    rows = [12585, 4151, 13264]
    seen = [(rows, [t * 1e-3 for t in ts]) for ts in (
        [0.07, 0.09, 0.07], [0.08, 0.1, 0.09], [0.07, 0.11, 0.08], [0.73, 1.16, 0.3])]
    assert rebalance.plan(seen, ahead=2477, moved=(0.137, 5866)) is None
    assert rebalance.plan(seen[-1:], ahead=2477, moved=(0.137, 5866)) is not None


def test_plan_in_a_closed_loop_with_noisy_measurements_ends_near_the_speeds_shares():
    """Worker 1 3x slow; each measurement's seconds off by a lognormal factor (sigma
    0.25) and, one time in ten per worker, 3x (a burst of another job's load); the
    measurements after 5, 10, 20, ... of 400 rounds, as the driver takes them. Of 100
    runs at least 3 in 4 end within 25% of the speeds' share (571 of 4,000 rows; 83 do,
    68 with a rows-weighted pool of the measurements), their median within 5%."""
    per_row = np.array([1.0, 3.0, 1.0]) * 1e-5
    ends = []
    for seed in range(100):
        rng = np.random.default_rng(seed)
        rows, seen, moved, done = [1333, 1334, 1333], [], None, rebalance.FIRST_REBALANCE
        while done < 400:
            t = per_row * rows * np.exp(rng.normal(0, 0.25, 3))
            t *= np.where(rng.random(3) < 0.1, 3, 1)
            seen = (seen + [(rows, list(t))])[-rebalance.KEEP:]
            new = rebalance.plan(seen, 400 - done, moved)
            if new is not None:
                crossed = int(np.abs(np.cumsum(rows) - np.cumsum(new)).sum())
                moved, rows = (crossed * 1e-6, crossed), new
            done *= 2
        ends.append(rows[1])
    ends = np.array(ends)
    assert np.mean(np.abs(ends / 571 - 1) < 0.25) >= 0.75
    assert abs(np.median(ends) / 571 - 1) < 0.05
