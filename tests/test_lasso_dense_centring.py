"""Dense X with an intercept is centred in a copy made once (issue 29): the caller's
array, already in the kernels' layout, is left as it was; constant columns get 0."""
import numpy as np
from sklearn.linear_model import Lasso as SkLasso

import strads


def test_fortran_float64_x_is_not_centred_in_place_and_constant_columns_get_zero():
    rng = np.random.default_rng(3)
    X = np.asfortranarray(rng.standard_normal((80, 12)) + 5.0)
    X[:, 4] = 7.25  # constant: first and last rows agree, so checked whole
    X[0, 7] = X[-1, 7]  # first and last rows agree, not constant
    y = X[:, [0, 7]] @ np.array([2.0, -1.0]) + rng.standard_normal(80)
    before = X.copy()
    est = strads.Lasso(alpha=0.01, tol=1e-10).fit(X, y)
    np.testing.assert_array_equal(X, before)
    ref = SkLasso(alpha=0.01, tol=1e-12, max_iter=10**6).fit(X, y)
    assert est.coef_[4] == 0.0
    np.testing.assert_allclose(est.coef_, ref.coef_, rtol=0, atol=1e-6)
    assert abs(est.intercept_ - ref.intercept_) <= 1e-6 * abs(ref.intercept_)
