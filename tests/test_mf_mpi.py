"""MF's early stopping under mpiexec: every rank calls fit(); rank 0 compares with an
in-process run of the same seed and worker count (size - 1). (fit() without it:
tests/test_contract.py.)"""
import numpy as np
import pytest

from strads.apps import mf

from conftest import world


@pytest.mark.mpi(min_size=2)
@pytest.mark.parametrize("schedule,staleness,validation", [
    ("ccd", 0, 0.1), ("ccd", 1, 0.1), ("als", 0, 0.1), ("ccd", 0, 0.0)])
def test_mpi_early_stop_matches_in_process(schedule, staleness, validation):
    """fit(early_stop=2) under mpiexec: the same best iteration, stop and model, bit for
    bit, as in one process with as many workers (validation 0.1: the validation run and
    the refit, every rank told the first run's end; 0: the held-out set stops the run)."""
    rank, size = world()
    t = mf.make_problem(400, 200, 8000)
    kw = dict(rank=8, lam=0.005, schedule=schedule, iters=12, tol=0, test_fraction=0.1,
              staleness=staleness, early_stop=2, validation=validation, quiet=True)
    res = mf.fit(t.users, t.items, t.ratings, **kw)
    if rank != 0:
        assert res is None
        return
    ref = mf.fit(t.users, t.items, t.ratings, workers=size - 1, mpi=False, **kw)
    assert res.extra["early_stopped"]
    assert res.stop_reason == ("tol" if not validation else "schedule_done")
    for key in ("best_iteration", "iterations", "test_rmse", "train_rmse",
                "test_rmse_per_iter", *(("validation_rmse", "validation_iterations")
                                        if validation else ())):
        assert res.extra[key] == ref.extra[key], key
    for key in ("W", "H", "user_bias", "item_bias"):
        np.testing.assert_array_equal(res.model[key], ref.model[key], err_msg=key)
    assert res.objective == ref.objective
