"""Several scheduler ranks (``--schedulers K``): ranks 0..K-1 schedule a part each, at the
same time. The Lasso's parts own coordinate ranges (its iterates differ from one
scheduler's; its optimum does not); LDA's name the slices of their groups of workers
(one scheduler's run, bit for bit). Under mpiexec, the model is that of one process with
as many schedulers and workers, bit for bit."""
import json

import numpy as np
import pytest
from sklearn.linear_model import Lasso as SkLasso

import strads
from strads.apps import lasso, lda, logreg, mf
from strads.apps.lasso.data import make_problem

from conftest import run_cli, world


def _lasso_problem():
    X, y, _ = make_problem(300, 1000, density=0.03, corr=0.5, n_informative=20, seed=4)
    return X, y, 0.05 * lasso.lambda_max(X, y)


@pytest.mark.parametrize("schedule", ["priority", "round-robin", "random"])
@pytest.mark.parametrize("K", [2, 3])
def test_lasso_split_over_schedulers_reaches_the_optimum(schedule, K):
    X, y, lam = _lasso_problem()
    ref = SkLasso(alpha=lam, fit_intercept=False, tol=1e-12, max_iter=100000).fit(
        X.toarray(), y).coef_
    res = lasso.fit(X, y, lam=lam, schedule=schedule, block=48, tol=1e-10,
                    max_rounds=40000, workers=2, schedulers=K, quiet=True)
    assert res.stop_reason == "tol" and res.extra["schedulers"] == K
    assert res.extra["duality_gap"] <= 1e-10 * res.objective
    np.testing.assert_allclose(res.model["coef"], ref, atol=1e-6)
    one = lasso.fit(X, y, lam=lam, schedule=schedule, block=48, tol=1e-10,
                    max_rounds=40000, workers=2, quiet=True)
    assert abs(res.objective - one.objective) <= 1e-9 * one.objective
    assert res.rounds != one.rounds or not np.array_equal(res.model["coef"],
                                                          one.model["coef"])


def test_lasso_split_with_parallel_loading(tmp_path):
    """With --data the workers read the file and filter the union of the candidates;
    the schedulers learn the column norms from worker 0's report."""
    from sklearn.datasets import dump_svmlight_file

    X, y, lam = _lasso_problem()
    dump_svmlight_file(X, y, str(tmp_path / "d.svm"))
    out = []
    for K in (1, 2):
        p = run_cli(["strads.apps.lasso", "--data", str(tmp_path / "d.svm"), "--schedule",
                     "priority", "--schedulers", str(K), "--workers", "2", "--lambda",
                     repr(lam), "--tol", "1e-10", "--quiet"])
        assert p.returncode == 0, p.stderr
        out.append(json.loads(p.stdout))
    assert out[1]["stop_reason"] == "tol" and out[1]["schedulers"] == 2
    assert abs(out[1]["objective"] - out[0]["objective"]) <= 1e-9 * out[0]["objective"]


@pytest.mark.parametrize("staleness", [0, 1])
@pytest.mark.parametrize("schedule", ["model", "data"])
def test_lda_groups_are_one_schedulers_run_bit_for_bit(staleness, schedule):
    rng = np.random.default_rng(1)
    C = (rng.random((60, 90)) < 0.1) * rng.integers(1, 4, (60, 90))
    kw = dict(n_topics=5, sweeps=3, staleness=staleness, schedule=schedule, quiet=True,
              workers=3)
    one = lda.fit(C, **kw)
    for K in (2, 3, 4):  # (4: one scheduler with no workers of its own)
        res = lda.fit(C, schedulers=K, **kw)
        for k in one.model:
            np.testing.assert_array_equal(res.model[k], one.model[k], err_msg=(K, k))
        assert res.objective == one.objective and res.rounds == one.rounds


def test_what_does_not_split_is_refused_in_one_line():
    X, y, lam = _lasso_problem()
    t = mf.make_problem(200, 100, 2000, seed=1)
    with pytest.raises(strads.DataError, match="working-set schedule .* does not split"):
        lasso.fit(X, y, lam=lam, schedulers=2, quiet=True)
    with pytest.raises(strads.DataError, match="^--schedulers 2: mf's schedule does not "
                       "split over scheduler ranks; use --schedulers 1$"):
        mf.fit(t.users, t.items, t.ratings, rank=2, iters=1, schedulers=2, quiet=True)
    Xl, yl = logreg.data.make_problem(60, 30, seed=1)[:2]
    for schedule in ("working-set", "priority"):  # (the refusal named a private class)
        with pytest.raises(strads.DataError, match="^--schedulers 2: logreg's schedules do "
                           "not split over scheduler ranks \\(lasso's and lda's do\\); use "
                           "--schedulers 1$"):
            logreg.fit(Xl, yl, lam=0.01, schedule=schedule, schedulers=2, quiet=True)
    with pytest.raises(strads.DataError, match="--schedulers applies to --scheduler rank"):
        lasso.fit(X, y, lam=lam, schedule="priority", schedulers=2, scheduler="replicated")
    with pytest.raises(strads.DataError, match="schedulers must be an integer >= 1"):
        lasso.fit(X, y, lam=lam, schedule="priority", schedulers=0)


def test_too_many_scheduler_ranks_is_one_line():
    p = run_cli(["strads.apps.lasso", "--schedule", "priority", "--schedulers", "2",
                 "--quiet", "--max-rounds", "5"], np=2, timeout=120)
    assert p.returncode == 2
    assert "no rank is left for a worker" in p.stderr
    assert "Traceback" not in p.stderr


@pytest.mark.mpi(min_size=3)
def test_schedulers_under_mpi_equal_one_process():
    rank, size = world()
    W = size - 2
    X, y, lam = _lasso_problem()
    rng = np.random.default_rng(1)
    C = (rng.random((60, 90)) < 0.1) * rng.integers(1, 4, (60, 90))
    runs = {
        "lasso-priority": lambda **kw: lasso.fit(X, y, lam=lam, schedule="priority",
                                                 block=48, tol=1e-9, quiet=True, **kw),
        "lasso-rr": lambda **kw: lasso.fit(X, y, lam=lam, schedule="round-robin",
                                           block=48, tol=0, max_rounds=300, quiet=True,
                                           staleness=1, **kw),
        "lda": lambda **kw: lda.fit(C, n_topics=5, sweeps=3, quiet=True, **kw),
    }
    for name, fit in runs.items():
        res = fit(schedulers=2)
        if rank != 0:
            assert res is None
            continue
        assert res.ranks == size and res.workers == W and res.extra["schedulers"] == 2
        assert [t["rank"] for t in res.traffic] == list(range(size))
        assert res.traffic[1]["messages_received"] >= res.rounds  # scheduler 1 worked
        one = fit(workers=W, mpi=False, schedulers=2)
        for k in one.model:
            np.testing.assert_array_equal(res.model[k], one.model[k], err_msg=(name, k))
        assert res.rounds == one.rounds and res.objective == one.objective
