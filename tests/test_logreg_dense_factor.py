"""Dense X with p > n: a working set of more columns than twice a worker's rows is sent
as the factor D^1/2 X_B, not its Gram (issue 29); the optimum is liblinear's."""
import numpy as np
import pytest

from strads.apps import logreg
from strads.apps.logreg import update as U
from strads.apps.logreg.data import make_problem

from conftest import l1_logistic


@pytest.mark.parametrize("workers", [1, 2])
def test_dense_p_above_n_sends_factors_and_reaches_liblinear(workers, monkeypatch):
    X, y, _ = make_problem(60, 400, corr=0.3, n_informative=20, dense=True, seed=4)
    lam = 0.02 * logreg.lambda_max(X, y)
    dense_factors = []
    factor = U.LogRegUpdate._factor

    def spy(self, cols, wts):
        out = factor(self, cols, wts)
        if not self.sparse:
            dense_factors.append(cols.shape[0])
            # every row of every column, as the sparse kernel would store a full column
            F = np.zeros((self.n_rows, cols.shape[0]))
            for k in range(cols.shape[0]):
                span = slice(out["Fp"][k], out["Fp"][k + 1])
                F[out["Fi"][span], k] = out["Fv"][span]
            np.testing.assert_array_equal(F, self.X[0][:, cols] * np.sqrt(wts)[:, None])
        return out

    monkeypatch.setattr(U.LogRegUpdate, "_factor", spy)
    res = logreg.fit(X, y, lam=lam, workers=workers, tol=1e-10, quiet=True)
    assert dense_factors and max(dense_factors) > 2 * -(-X.shape[0] // workers)
    ref = l1_logistic(solver="liblinear", C=1 / (X.shape[0] * lam), fit_intercept=False,
                      tol=1e-12, max_iter=10**6, random_state=0).fit(X, y).coef_.ravel()
    f, f_ref = (logreg.objective(X, y, c, lam) for c in (res.model["coef"], ref))
    assert res.stop_reason == "tol"
    assert f <= f_ref * (1 + 1e-8)
    # KKT: |x_j' grad| <= lam off the support, = lam with the opposite sign on it
    coef = res.model["coef"]
    g = X.T @ (-y / (1 + np.exp(y * (X @ coef)))) / X.shape[0]
    on = coef != 0
    assert np.abs(g[~on]).max() <= lam * (1 + 1e-6)
    np.testing.assert_allclose(g[on], -lam * np.sign(coef[on]), rtol=1e-4, atol=1e-9)


@pytest.mark.mpi(min_size=2)
def test_dense_factors_under_mpi_are_the_in_process_run_bit_for_bit():
    """The form is decided by each worker's rows: as many workers decide alike."""
    from mpi4py import MPI

    X, y, _ = make_problem(60, 400, corr=0.3, n_informative=20, dense=True, seed=4)
    lam = 0.02 * logreg.lambda_max(X, y)
    res = logreg.fit(X, y, lam=lam, tol=1e-10, quiet=True)
    if MPI.COMM_WORLD.Get_rank() != 0:
        assert res is None
        return
    one = logreg.fit(X, y, lam=lam, workers=MPI.COMM_WORLD.Get_size() - 1, tol=1e-10,
                     quiet=True, mpi=False)
    assert res.rounds == one.rounds
    np.testing.assert_array_equal(res.model["coef"], one.model["coef"])
