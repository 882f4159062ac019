"""Under mpiexec -n N (pytest --with-mpi): every rank runs these tests together. Rank 0
checks the result against an in-process run of the same seed and worker count, and
against independent references. (fit() of each app: tests/test_contract.py.)"""
import subprocess
import sys

import numpy as np
import pytest

from strads.apps import lasso
from strads.apps.lasso.data import make_problem

from conftest import ROOT, child_env, mpiexec, world


def _problem(kind):
    # n >= p: well conditioned, so even the baselines converge in ~1,000 rounds
    if kind == "dense":
        X, y, _ = make_problem(200, 100, corr=0.3, n_informative=15, dense=True, seed=1)
    else:
        X, y, _ = make_problem(300, 300, density=0.05, corr=0.3, n_informative=20, seed=2)
    return X, y, 0.05 * lasso.lambda_max(X, y)


@pytest.mark.mpi(min_size=2)
@pytest.mark.parametrize("doorbell", [True, False])
def test_transport_keeps_order_and_sleeps_on_doorbells(doorbell):
    """Bursts of messages of every size (eager to rendezvous) both ways arrive complete
    and in order, with the ranks sleeping on doorbells or polling; a broadcast reaches
    every worker down the tree and their replies come back combined."""
    import os

    from mpi4py import MPI

    from strads import transport

    comm = MPI.COMM_WORLD.Dup()
    tp = transport.MPITransport(comm, doorbell=doorbell)
    try:
        # the test job runs on one host, so doorbells are made when asked for
        assert tp._waiter.doorbells == doorbell
        if doorbell:  # an anonymous pipe, opened by the peers through /proc
            assert os.readlink(f"/proc/self/fd/{tp._waiter._bell[0]}").startswith("pipe:")
        sizes = [0, 1, 1000, 20_000, 300_000, 7]
        big = np.arange(300_000.0)

        def combine(parts):  # lists of (worker, array): joined, in worker order
            return sorted((x for p in parts for x in p), key=lambda x: x[0])

        if tp.rank == 0:
            for w in range(tp.n_workers):
                for k, n in enumerate(sizes):
                    tp.send(w, ("msg", k, np.arange(n, dtype=np.float64) + w))
            tp.broadcast(("all", len(sizes), big))  # one frame, down the workers' tree
            for w in range(tp.n_workers):
                for k, n in enumerate(sizes + [300_000]):  # each answered with two
                    for part in range(2):
                        tag, kk, pp, x = tp.recv(w)
                        assert (tag, kk, pp) == ("echo", k, part)
                        base = np.arange(n) + (w if k < len(sizes) else 0)
                        np.testing.assert_array_equal(x, base + part)
            got = tp.gather(combine)  # one message, up the tree
            assert [w for w, _ in got] == list(range(tp.n_workers))
            for w, x in got:
                np.testing.assert_array_equal(x, big + w)
        else:
            for k, n in enumerate(sizes + [300_000]):
                tag, kk, x = tp.recv_task() if k < len(sizes) else tp.recv_broadcast()
                assert (tag, kk) == ("msg" if k < len(sizes) else "all", k)
                assert x.shape == (n,)
                tp.reply(("echo", k, 0, x))
                tp.reply(("echo", k, 1, x + 1))
            tp.reply_gathered([(tp.worker, x + tp.worker)], combine)
        tp.close()
    finally:
        comm.Free()


@pytest.mark.mpi(min_size=2)
def test_traffic_accounting_balances():
    """summary.json's traffic: one entry per rank; every byte and message that some rank
    sent, some rank received (counted up to the collect request)."""
    rank, size = world()
    X, y, lam = _problem("sparse")
    res = lasso.fit(X, y, lam=lam, quiet=True)
    if rank != 0:
        return
    t = res.summary()["traffic"]
    assert [e["rank"] for e in t] == list(range(size))
    for a, b in (("bytes_sent", "bytes_received"), ("messages_sent", "messages_received")):
        assert sum(e[a] for e in t) == sum(e[b] for e in t) > 0
    assert all(e["peak_rss_mb"] > 10 for e in t)
    # rank 0 sends every worker its shard: at least the data's bytes
    assert t[0]["bytes_sent"] >= X.data.nbytes + X.indices.nbytes
    one = lasso.fit(X, y, lam=lam, quiet=True, mpi=False, workers=size - 1)
    assert len(one.summary()["traffic"]) == 1 and one.summary()["traffic"][0]["bytes_sent"] == 0


@pytest.mark.mpi(min_size=2)
def test_estimators_under_mpi_give_every_rank_the_fitted_model():
    """The notebook code, unchanged under mpiexec: every rank calls fit(); every rank gets
    the fitted estimator, the same as in one process with n_jobs = size - 1."""
    import strads
    from sklearn.linear_model import Lasso as SkLasso

    rank, size = world()
    X, y, _ = make_problem(200, 100, corr=0.3, n_informative=15, dense=True, seed=1)
    alpha = 0.05 * lasso.lambda_max(X, y)
    est = strads.Lasso(alpha=alpha, tol=1e-10, random_state=0).fit(X, y)
    ref = strads.estimators.Lasso(alpha=alpha, tol=1e-10, random_state=0,
                                  n_jobs=size - 1)
    from strads import transport
    saved = transport.mpi_world_size
    transport.mpi_world_size = lambda: 0  # this rank alone, in one process
    try:
        ref.fit(X, y)
    finally:
        transport.mpi_world_size = saved
    np.testing.assert_array_equal(est.coef_, ref.coef_)
    assert est.intercept_ == ref.intercept_
    sk = SkLasso(alpha=alpha, tol=1e-12, max_iter=10**6).fit(X, y)
    np.testing.assert_allclose(est.coef_, sk.coef_, rtol=1e-5, atol=1e-8)


@pytest.mark.mpi(min_size=2)
def test_lasso_path_under_mpi_is_one_run_as_in_one_process():
    """lasso_path's alphas in one run under mpiexec: every rank gets the path, bit for
    bit that of one process with n_jobs = size - 1."""
    import strads

    rank, size = world()
    X, y, _ = make_problem(200, 100, corr=0.3, n_informative=15, dense=True, seed=1)
    alphas, coefs, gaps = strads.lasso_path(X, y, n_alphas=10, tol=1e-8)
    from strads import transport
    saved = transport.mpi_world_size
    transport.mpi_world_size = lambda: 0  # this rank alone, in one process
    try:
        ref = strads.lasso_path(X, y, n_alphas=10, tol=1e-8, n_jobs=size - 1)
    finally:
        transport.mpi_world_size = saved
    for a, b in zip((alphas, coefs, gaps), ref):
        np.testing.assert_array_equal(a, b)
    assert coefs.shape == (100, 10) and coefs[:, -1].any()


# an estimator's fit under mpiexec -n 3 with bad data on rank 1 only (X None: data loaded
# on rank 0; NaN on one rank): its validation raises there, while the others wait
FAILING_FIT = """
import sys
import numpy as np
import scipy.sparse as sp
import strads
from mpi4py import MPI
rng = np.random.default_rng(0)
X = rng.normal(size=(40, 6)); y = X[:, 0] + 0.1 * rng.normal(size=40)
R = sp.random(30, 20, density=0.3, format="coo", random_state=0)
bad = MPI.COMM_WORLD.Get_rank() == 1
if bad:
    X = R = None
{}
print("fit ended", flush=True)
"""
FITS = {"lasso": "strads.Lasso(alpha=0.01).fit(X, y)",
        "logreg_nan": "yb = y > 0\nif bad:\n    X = np.full((40, 6), np.nan)\n"
                      "strads.SparseLogisticRegression().fit(X, yb)",
        "lasso_cv": "strads.LassoCV(n_alphas=3, cv=2).fit(X, y)",
        "logreg_cv": "strads.SparseLogisticRegressionCV(n_alphas=3, cv=2).fit(X, y > 0)",
        "lasso_path": "strads.lasso_path(X, y, n_alphas=3)",
        "mf": "strads.MatrixFactorization(max_iter=2).fit(R)",
        "lda": "strads.LDA(n_components=2, max_iter=2).fit(None if bad else "
               "sp.csr_matrix((rng.random((10, 8)) * 3).astype(int)))"}


@pytest.mark.timeout(200)
@pytest.mark.parametrize("fit", sorted(FITS))
def test_a_fit_failing_on_one_rank_ends_the_job(fit, tmp_path):
    """The project's rule: an exception on any rank ends the whole job with its traceback
    (validation included: the raising rank used to exit while the others hung)."""
    script = tmp_path / "fit.py"
    script.write_text(FAILING_FIT.format(FITS[fit]))
    p = subprocess.run([mpiexec(), "-n", "3", sys.executable, str(script)], cwd=ROOT,
                       capture_output=True, text=True, timeout=150, env=child_env())
    assert p.returncode != 0 and "fit ended" not in p.stdout
    assert "### rank 1 of 3" in p.stderr and "Traceback" in p.stderr


@pytest.mark.mpi(min_size=2)
def test_workers_collectives_under_mpi_match_one_process():
    """The data plane on the workers' communicator: the same floats as the threads of
    one process and as NumPy; rank 0 sends one message a round and receives one."""
    import peer_app

    rank, size = world()
    res, agg = peer_app.fit(rounds=40)
    if rank != 0:
        assert res is None
        return
    local, _ = peer_app.fit(rounds=40, workers=size - 1, mpi=False)
    x, last = peer_app.reference(size - 1, rounds=40)
    for model in (res.model, local.model):
        np.testing.assert_array_equal(model["x"], x)
        np.testing.assert_array_equal(model["total"], last["total"])
        np.testing.assert_array_equal(model["heads"], last["heads"])
    assert agg.reports == [{"rows": 5, "rank": w} for w in range(size - 1)]
    t = res.summary()["traffic"]
    for a, b in (("bytes_sent", "bytes_received"), ("messages_sent", "messages_received")):
        assert sum(e[a] for e in t) == sum(e[b] for e in t) > 0
    # rank 0: the warm-up, the shards (one message each), then one message each way a
    # round, the last round's syncs and the collect request
    assert t[0]["messages_sent"] == 1 + (size - 1) + 40 + 1 + 1
    assert t[0]["messages_received"] == 1 + (size - 1) + 40
