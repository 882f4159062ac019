"""Lasso with bounded memory and time: the working-set Gram budget (blocks cut into
pieces), the time limit honoured within a round, the Jacobi block clamp and the
staleness bound."""
import json
import math
import resource
import subprocess
import sys
import textwrap
import threading

import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.linear_model import Lasso

import strads
from strads.apps import lasso
from strads.apps.glm import kernels as K
from strads.apps.lasso import aggregate, update
from strads.apps.lasso.aggregate import LassoAggregate
from strads.apps.lasso.data import make_problem

from conftest import ROOT, FakeClock, child_env, mpiexec, run_cli


def problem(kind):
    # the problems (and the tolerances) of tests/test_lasso.py
    if kind == "dense":
        X, y, _ = make_problem(120, 300, corr=0.5, n_informative=20, dense=True, seed=1)
    else:
        X, y, _ = make_problem(200, 800, density=0.05, corr=0.5, n_informative=30, seed=2)
    return X, y, 0.05 * lasso.lambda_max(X, y)


class _Recorder(strads.Schedule):
    def __init__(self, inner):
        self.inner, self.tasks = inner, []

    def schedule(self, round):
        task = self.inner.schedule(round)
        if task is not None:
            self.tasks.append(task)
        return task


def _spy(setup, keep):
    def spying(ctx):
        sched, agg, shards = setup(ctx)
        keep["sched"], keep["agg"] = _Recorder(sched), agg
        return keep["sched"], agg, shards
    return spying


# -- the Gram budget ------------------------------------------------------------------
def test_block_cap_formula_and_default_budget(monkeypatch):
    # 8 m^2 bytes a Gram, W + 2 of them in one process
    assert lasso.gram_block_cap(512, 2) == int(np.sqrt(512 * 2 ** 20 / 32))
    assert lasso.gram_block_cap(1e-9, 4) == 1
    assert lasso.default_gram_budget() <= 512
    # under `ulimit -v 3500000` the default is an eighth of the address space
    monkeypatch.setattr(resource, "getrlimit", lambda what: (3_500_000 * 1024,) * 2)
    assert lasso.default_gram_budget() == pytest.approx(3_500_000 * 1024 / 8 / 2 ** 20)


@pytest.mark.parametrize("kind", ["dense", "sparse"])
@pytest.mark.parametrize("staleness", [0, 1])
def test_small_budget_cuts_blocks_and_still_reaches_the_optimum(kind, staleness):
    X, y, lam = problem(kind)
    workers = 2
    budget = 0.03  # MiB: blocks of at most gram_block_cap(0.03, 2) = 28 coordinates
    cap = lasso.gram_block_cap(budget, workers)
    keep = {}
    setup = lasso.make_setup(lambda: (X, y), lam=lam, gram_budget=budget)
    res = strads.run(_spy(setup, keep), lasso.LassoUpdate, workers=workers,
                     staleness=staleness, tol=1e-10, max_rounds=200_000, quiet=True)
    blocks = [t["cols"] for t in keep["sched"].tasks if t.get("gram")]
    assert res.stop_reason == "tol"
    assert res.extra["gram_block_cap"] == cap
    # a block beyond the cap goes as its factor X_B (sparse X), within the budget
    factor_cap = budget * 2 ** 20 / lasso.FACTOR_BYTES
    big = [b for b in blocks if len(b) > cap]
    assert not big if kind == "dense" else \
        all(np.diff(X.indptr)[b].sum() <= factor_cap for b in big)
    # the working sets were larger than the cap: solved in pieces
    assert res.extra["gram_pieces"] > 0
    assert res.extra["nnz_coef"] > cap
    sk = Lasso(alpha=lam, fit_intercept=False, tol=1e-12, max_iter=1_000_000).fit(X, y)
    f_sk = lasso.objective(X, y, sk.coef_, lam)
    f = lasso.objective(X, y, res.model["coef"], lam)
    assert abs(f - f_sk) <= 1e-6 * f_sk
    assert res.extra["duality_gap"] <= 1e-9 * f
    assert res.objective == pytest.approx(f, rel=1e-6)


def test_default_budget_leaves_small_problems_uncut():
    X, y, lam = problem("sparse")
    res = lasso.fit(X, y, lam=lam, tol=1e-10, quiet=True)
    assert res.stop_reason == "tol" and res.extra["gram_pieces"] == 0


def test_bad_budget_is_one_data_error():
    X, y, lam = problem("sparse")
    for bad in (0, -1, float("nan"), float("inf")):
        with pytest.raises(strads.DataError,
                           match=r"^gram_budget must be a finite number > 0 \(MiB\), got "):
            lasso.fit(X, y, lam=lam, gram_budget=bad, quiet=True)


_DRIVER = textwrap.dedent("""
    import json, sys
    from strads.apps import lasso
    X, y = lasso.load(sys.argv[1])
    res = lasso.fit(X, y, lambda_ratio=0.1, tol=1e-14, quiet=True)  # the default budget
    if res is not None:
        print(json.dumps({k: (v.item() if hasattr(v, "item") else v)
                          for k, v in res.summary().items()}))
""")


@pytest.mark.timeout(120)
def test_large_support_under_mpi_in_bounded_address_space(tmp_path):
    """10,000 x 20,000 sparse, random labels: the support grows to ~6,000 and the
    working sets to ~8,000, whose dense Gram matrix (0.5 GB) would not fit in the 1 GB
    of address space each rank gets (a rank starts at about 0.6 GB). Within the default
    budget (an eighth of the address space) those blocks go as their factor X_B (or
    pieces), and the run reaches its tol, exit 0, in bounds (no time limit: how far a
    limited run gets depends on the machine's load)."""
    rng = np.random.default_rng(1)
    X = sp.random(10_000, 20_000, density=500_000 / 2e8, format="csr", random_state=rng)
    y = rng.choice([-1.0, 1.0], size=10_000)
    data = tmp_path / "mid.npz"
    np.savez(data, data=X.data, indices=X.indices, indptr=X.indptr,
             shape=np.array(X.shape), format=np.array("csr"), y=y)
    (tmp_path / "drive.py").write_text(_DRIVER)
    address_space = 1_000_000_000

    def bounded():
        resource.setrlimit(resource.RLIMIT_AS, (address_space, address_space))

    p = subprocess.run([mpiexec(), "-n", "3", sys.executable, str(tmp_path / "drive.py"),
                        str(data)], capture_output=True, text=True, timeout=100, cwd=ROOT,
                       env=child_env(), preexec_fn=bounded)
    assert p.returncode == 0, p.stderr[-3000:]
    s = json.loads(p.stdout.strip().splitlines()[-1])
    assert s["stop_reason"] == "tol"
    assert s["gram_block_cap"] == lasso.gram_block_cap(address_space / 8 / 2 ** 20, 2)
    assert s["nnz_coef"] > s["gram_block_cap"]  # blocks beyond the dense cap were solved
    for rank in s.get("traffic", []):  # the engine's per-rank figures, where it has them
        assert rank["peak_rss_mb"] < address_space / 2 ** 20


# -- the time limit within a round ----------------------------------------------------
@pytest.mark.timeout(120)
def test_time_limit_stops_a_long_gram_round(monkeypatch):
    """Dense 12,000 x 2,000 with a first working set of all 2,000 coordinates: the
    workers' Gram is built in hundreds of pieces, looking at the clock between them; with
    a 0.5 s limit the round is dropped: its Gram given up at the first look past the
    deadline, and the run stops at the limit. The clocks are frozen and move 0.2 s a
    look, so what is asserted holds whatever the machine's speed or load."""
    X, y, _ = make_problem(12_000, 2_000, corr=0.5, n_informative=50, dense=True, seed=5)
    limit = 0.5
    setup = lasso.make_setup(lambda: (X, y), lambda_ratio=0.01, time_limit=limit)

    def one_big_block(ctx):
        sched, agg, shards = setup(ctx)
        sched.min_size = 2_000  # the first block: every coordinate that violates
        return sched, agg, shards

    clock = FakeClock(monkeypatch, update, aggregate, strads.driver, frozen=True)
    frozen, deadline, late_looks = clock.time, {}, []
    monkeypatch.setattr(strads.Schedule, "clock", staticmethod(lambda: frozen()))

    def look():  # the Gram's look at the clock: counted once past the build's deadline
        now = frozen()
        late_looks[-1] += now > (deadline.get(threading.get_ident()) or math.inf)
        clock.skip(0.2)
        return now
    clock.time, gram_part = look, lasso.LassoUpdate.gram_part

    def watched(self, cols, deadline_=None, *rest):
        deadline[threading.get_ident()] = deadline_
        late_looks.append(0)
        return gram_part(self, cols, deadline_, *rest)
    monkeypatch.setattr(lasso.LassoUpdate, "gram_part", watched)
    res = strads.run(one_big_block, lasso.LassoUpdate, time_limit=limit, tol=0,
                     max_rounds=1000, quiet=True)
    assert res.stop_reason == "time_limit"
    assert max(late_looks) == 1  # given up at once, not built to the end
    assert res.extra["late_rounds"] >= 1  # the round was dropped, not waited for
    assert np.isfinite(res.objective)


def test_block_solve_returns_at_the_deadline(monkeypatch):
    """A block solve that would run 100,000 passes (tol < 0: never converged) returns
    once the task's deadline passes, with the iterate of a one-piece solve of the
    same number of passes (the pieces do the same arithmetic)."""
    m = 1500
    idx = np.arange(m)
    G = 0.999 ** np.abs(idx[:, None] - idx[None, :])  # ill-conditioned: slow descent
    rng = np.random.default_rng(0)
    q0 = rng.standard_normal(m) * 10
    agg = LassoAggregate(np.diag(G).copy(), m, 1e-3, 1.0)
    b, q = np.zeros(m), q0.copy()
    clock = FakeClock(monkeypatch, aggregate)
    clock.time = iter(range(100_000)).__next__  # a second a look at the clock
    passes = agg._solve(G, q, b, -1.0, 100_000, deadline=3)
    assert passes == 4 * (aggregate.SOLVE_OPS // m ** 2)  # the 4th look: deadline passed
    b1, q1 = np.zeros(m), q0.copy()
    assert K.gram_cd(G, q1, b1, agg.thresh, -1.0, passes) == passes
    np.testing.assert_array_equal(b, b1)
    np.testing.assert_array_equal(q, q1)


def test_sparse_gram_in_pieces_matches_scipy(monkeypatch):
    from strads.apps.lasso import update

    X, y, _ = make_problem(300, 200, density=0.1, seed=3)
    w = lasso.LassoUpdate({"csc": (X.indptr, X.indices, X.data), "n_rows": 300, "y": y})
    cols = np.arange(0, 200, 3)
    Xb = X[:, cols].toarray()
    monkeypatch.setattr(update, "PIECE_OPS", 50)  # many pieces
    rows = update.GK.gram_sparse_rows
    np.testing.assert_allclose(w.gram(cols), Xb.T @ Xb, rtol=1e-12, atol=1e-13)
    cols2 = np.arange(1, 200, 2)  # overlaps the cached block: its entries reused, exactly
    fresh = lasso.LassoUpdate({"csc": (X.indptr, X.indices, X.data), "n_rows": 300, "y": y})
    assert np.array_equal(w.gram(cols2), fresh.gram(cols2))
    built = []
    monkeypatch.setattr(update.GK, "gram_sparse_rows", lambda *a: built.append(a) or rows(*a))
    assert np.array_equal(w.gram(cols2[::2]), fresh.gram(cols2)[::2, ::2])  # (a sub-block)
    assert not built  # (nothing computed again)
    monkeypatch.setattr(update, "CACHE_BYTES", 0)  # (a Gram over it is not kept)
    w.gram(cols2)
    assert np.array_equal(w.gram(cols2), fresh.gram(cols2)) and len(built) == 2
    # late (a deadline long past): given up after a piece (columns the cache lacks)
    assert w.gram(np.arange(0, 200, 5), deadline=0.0) is None
    Xd = X.toarray()
    wd = lasso.LassoUpdate({"X": Xd, "y": y})
    monkeypatch.setattr(update, "GATHER_BYTES", 300 * 8 * 5)  # 5 columns at a time
    np.testing.assert_allclose(wd.gram(cols), Xb.T @ Xb, rtol=1e-12, atol=1e-12)
    cols2 = np.arange(1, 200, 2)  # overlaps the cached block
    np.testing.assert_allclose(wd.gram(cols2), Xd[:, cols2].T @ Xd[:, cols2], rtol=1e-12,
                               atol=1e-12)


def test_sparse_gram_sends_only_its_non_zeros(monkeypatch):
    from strads.apps.lasso import update

    X, y, _ = make_problem(300, 2000, density=0.005, corr=0.0, seed=4)
    w = lasso.LassoUpdate({"csc": (X.indptr, X.indices, X.data), "n_rows": 300, "y": y})
    cols = np.arange(0, 2000, 3)
    m = len(cols)
    # by default the factor X_B goes (fewer non-zeros than the Gram): X_B' X_B is G
    part = w.gram_part(cols)
    F = sp.csc_matrix((part["Fv"], part["Fi"], part["Fp"]), shape=(part["Fn"], m))
    np.testing.assert_allclose((F.T @ F).toarray(), w.gram(cols), rtol=1e-12, atol=1e-13)
    monkeypatch.setattr(update, "FACTOR_SHARE", 0.0)  # the Gram's own compact form
    monkeypatch.setattr(update, "PIECE_OPS", 50)  # many pieces
    part = w.gram_part(cols)
    assert set(part) == {"Gi", "Gv"} and len(part["Gi"]) < 0.1 * m * m
    G = np.zeros((m, m))
    G.reshape(-1)[part["Gi"]] = part["Gv"]
    np.testing.assert_array_equal(G, w.gram(cols))  # bit for bit the dense build's
    Xb = X[:, cols].toarray()
    np.testing.assert_allclose(G, Xb.T @ Xb, rtol=1e-12, atol=1e-13)
    assert w.gram_part(cols, deadline=0.0) is None  # late: after a piece
    monkeypatch.setattr(update, "PIECE_OPS", 10 ** 9)
    assert w.gram_part(cols, deadline=0.0) is not None  # one piece: done


# -- Jacobi block clamp ---------------------------------------------------------------
@pytest.mark.parametrize("schedule", ["priority", "round-robin", "random"])
def test_jacobi_block_is_clamped_to_the_features(schedule):
    X, y, lam = problem("dense")  # 300 features
    keep = {}
    setup = lasso.make_setup(lambda: (X, y), lam=lam, schedule=schedule, block=10 ** 6)
    rises = []

    class Watch(_Recorder):
        def schedule(self, round):
            task = super().schedule(round)
            if task is not None and not task.get("full"):
                rises.append((keep["agg"].objective_rises, len(task["cols"])))
            return task

    def watching(ctx):
        sched, agg, shards = setup(ctx)
        keep["sched"], keep["agg"] = Watch(sched), agg
        return keep["sched"], agg, shards

    res = strads.run(watching, lasso.LassoUpdate, max_rounds=300, tol=1e-8, quiet=True)
    sched = keep["sched"].inner
    assert sched.max_block == 300 and sched.block <= 300
    assert max(n for _, n in rises) <= 300
    assert np.isfinite(res.objective)
    if schedule != "priority":  # (its dependency filter keeps the objective from rising)
        # every coordinate at once overshoots on these correlated columns; the first
        # block after the first rise is half the features, not min(10^6 / 2, 300)
        first = next(k for k, (r, _) in enumerate(rises) if r > 0)
        assert rises[first][1] <= 150


# -- staleness ------------------------------------------------------------------------
def test_max_staleness_rule():
    assert lasso.max_staleness(800, 256) == 4
    assert lasso.max_staleness(800, 800) == 1
    assert lasso.max_staleness(800, 10 ** 6) == 1  # the block is clamped first
    assert lasso.max_staleness(800, 1) == 800


@pytest.mark.parametrize("schedule", ["working-set", "priority", "round-robin", "random"])
def test_staleness_above_the_useful_maximum_is_refused(schedule, monkeypatch):
    X, y, lam = problem("sparse")  # 800 features
    steps = []
    monkeypatch.setattr(strads.driver.Driver, "_step", lambda *a: steps.append(a))
    with pytest.raises(strads.DataError, match=r"useful maximum 50 = ceil\(800 features "
                                               r"/ block 16\)"):
        lasso.fit(X, y, lam=lam, schedule=schedule, block=16, staleness=10 ** 9,
                  quiet=True)
    with pytest.raises(strads.DataError, match="useful maximum 50"):
        lasso.fit(X, y, lam=lam, schedule=schedule, block=16, staleness=51, quiet=True)
    assert steps == []  # refused up front, not after 100,000 rounds
    monkeypatch.undo()
    # at the maximum it runs, and uses it
    res = lasso.fit(X, y, lam=lam, schedule=schedule, block=16, staleness=50, tol=0,
                    max_rounds=300, quiet=True)
    assert res.summary()["max_staleness_seen"] == 50 and np.isfinite(res.objective)


def test_cli_refuses_huge_staleness_with_one_line():
    p = run_cli(["strads.apps.lasso", "--staleness", "1000000000", "--quiet"], timeout=60)
    assert p.returncode == 2
    assert "useful maximum 40 = ceil(10000 features / block 256)" in p.stderr
    assert "Traceback" not in p.stderr and len(p.stderr.strip().splitlines()) == 1


@pytest.mark.timeout(120)
def test_cli_refuses_huge_staleness_under_mpi():
    p = run_cli(["strads.apps.lasso", "--staleness", "1000000000", "--quiet"], np=3,
                timeout=100)
    assert p.returncode == 2
    assert "useful maximum 40" in p.stderr and "Traceback" not in p.stderr


# -- checkpoints ----------------------------------------------------------------------
def test_resume_mid_pieces_gives_the_uninterrupted_model(tmp_path):
    """A checkpoint between the pieces of a cut working set: the resumed run solves the
    remaining pieces and ends with the uninterrupted run's model, bit for bit; the time
    limit is not part of the state (a resumed run may change it), the time used is."""
    X, y, lam = problem("sparse")
    keep = {}

    def go(out, time_limit=None, **kw):
        setup = lasso.make_setup(lambda: (X, y), lam=lam, gram_budget=0.03,
                                 time_limit=time_limit)

        def keeping(ctx):  # (no recorder around it: the schedule is checkpointed)
            sched, agg, shards = setup(ctx)
            keep["sched"], state, keep["used"] = sched, sched.state, []

            def recording():  # the time used, as each checkpoint took it
                st = state()
                keep["used"].append(st.get("_used"))  # (none before the first round)
                return st
            sched.state = recording
            return sched, agg, shards
        return strads.run(keeping, lasso.LassoUpdate, workers=2, tol=1e-10,
                          quiet=True, out=str(out), time_limit=time_limit, **kw)

    full = go(tmp_path / "full", max_rounds=200_000)
    part = go(tmp_path / "part", 1000.0, max_rounds=13, checkpoint_every=1e-3)
    used = keep["used"]
    assert part.stop_reason == "max_rounds" and part.extra["gram_pieces"] > 0
    assert keep["sched"].pieces  # stopped between two pieces of a working set
    resumed = go(tmp_path / "part", 600.0, max_rounds=200_000, resume=True,
                 checkpoint_every=3600)
    assert resumed.stop_reason == "tol" and resumed.rounds == full.rounds
    np.testing.assert_array_equal(resumed.model["coef"], full.model["coef"])
    sched = keep["sched"]
    # the time used before the resume: the first leg's last checkpoint's
    assert sched.time_limit == 600.0 and sched._used == used[-1] > 0
