"""The working set's certify round: a full round whose gap may already be within tol
(its lower bound, from q and w, is) waits for the dual's entropy before solving the next
working set's direction."""
import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.base import clone

import strads
from strads.apps import logreg
from strads.apps.lasso.data import make_zipf_problem
from strads.apps.logreg import aggregate
from strads.estimators.glm import _with_column


def _problem(quantile, seed):
    X, y = make_zipf_problem(900, 3000, seed=seed)
    X = sp.hstack([X, np.full((X.shape[0], 1), 100.0)]).tocsc()
    return X, np.where(y > np.quantile(y, quantile), 1.0, -1.0)


@pytest.mark.parametrize("quantile, seed, lam", [(0.95, 4, 1e-5), (0.5, 6, 1e-4)])
def test_certify_round_ends_the_run_on_the_same_model_with_less_work(monkeypatch,
                                                                     quantile, seed, lam):
    """The run ends on a certify round (the plain dual at the last full round's point),
    with the model, rounds and gap of the run that solves the last direction first, and
    fewer CD passes; a bound that always says "may" (every full round waits) misses and
    goes on to the working set it held: the same model again."""
    X, y = _problem(quantile, seed)
    kinds, run = [], aggregate.LogRegAggregate._round

    def spy(self, round, task, partials):
        kinds.append(task["kind"])
        return run(self, round, task, partials)
    monkeypatch.setattr(aggregate.LogRegAggregate, "_round", spy)
    kw = dict(lam=lam, tol=1e-6, quiet=True, intercept_column=True, gap_ref="null")
    res = logreg.fit(X, y, **kw)
    assert res.stop_reason == "tol" and kinds[-1] == "certify"
    assert kinds.count("certify") == 1  # (no miss)
    may = aggregate.LogRegAggregate._may_certify
    monkeypatch.setattr(aggregate.LogRegAggregate, "_may_certify", lambda self, q: False)
    kinds.clear()
    old = logreg.fit(X, y, **kw)
    assert "certify" not in kinds
    assert np.array_equal(res.model["coef"], old.model["coef"])
    assert res.rounds == old.rounds and res.extra["duality_gap"] == old.extra["duality_gap"]
    assert res.extra["cd_passes"] < old.extra["cd_passes"]
    monkeypatch.setattr(aggregate.LogRegAggregate, "_may_certify",
                        lambda self, q: self.fulls > 1 or may(self, q))
    kinds.clear()
    every = logreg.fit(X, y, **kw)
    # (full rounds: a "full" task's, or a trial's at t = 1 that solved its block)
    assert every.stop_reason == "tol" and \
        kinds.count("certify") == every.extra["full_rounds"] - 1
    assert np.array_equal(every.model["coef"], old.model["coef"])


def test_may_certify_is_a_lower_bound_of_the_gap(monkeypatch):
    """At every full round the bound the aggregate tests, P - D(1) + (1 - c) D'(1), is at
    most the gap the next round computes from the workers' entropies (D concave in c)."""
    X, y = _problem(0.9, 8)
    seen, full, run = [], aggregate.LogRegAggregate._full, aggregate.LogRegAggregate._round

    def at_full(self, round, task, partials):
        out = full(self, round, task, partials)
        q = sum(p["q"] for p in partials)
        a = float(q @ self.w)
        seen.append([(self.thresh * self.l1 - a + (1 - self.dual_c) * a) / self.n, None])
        return out

    def at_round(self, round, task, partials):
        out = run(self, round, task, partials)
        if "dual" in task:
            seen[-1][1] = self.gap
        return out
    monkeypatch.setattr(aggregate.LogRegAggregate, "_full", at_full)
    monkeypatch.setattr(aggregate.LogRegAggregate, "_round", at_round)
    monkeypatch.setattr(aggregate.LogRegAggregate, "_extrapolate", lambda self, q, p: None)
    logreg.fit(X, y, lam=3e-5, tol=1e-8, quiet=True, intercept_column=True)
    pairs = [(low, gap) for low, gap in seen if gap is not None]
    assert len(pairs) >= 4
    for low, gap in pairs:
        assert low <= gap * (1 + 1e-9) + 1e-15


@pytest.mark.parametrize("fmt", ["csc", "csr", "coo"])
def test_intercept_column_is_scipys_hstack(fmt):
    """The estimator's X with its constant column, built directly, is scipy's hstack."""
    X, _ = make_zipf_problem(50, 400, seed=1)
    X = X.asformat(fmt).tocsc()
    got, want = _with_column(X, 7.5), sp.hstack([X, np.full((50, 1), 7.5)], format="csc")
    assert got.shape == want.shape and (got != want).nnz == 0
    assert got.indices.dtype == X.indices.dtype
    dense = X.toarray()
    assert np.array_equal(_with_column(dense, 7.5), np.hstack([dense, np.full((50, 1), 7.5)]))
    est = strads.SparseLogisticRegression(alpha=1e-3, tol=1e-12)
    clf, ref = (clone(est).fit(A, np.arange(50) % 3 == 0) for A in (X, dense))
    assert np.allclose(clf.coef_, ref.coef_, atol=1e-6)
