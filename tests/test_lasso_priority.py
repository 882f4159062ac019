"""The priority schedule's parts: candidates, the dense filter's cache, and full rounds
that come when the priorities are spent."""
import numpy as np
import pytest

import strads
from strads.apps import lasso
from strads.apps.glm import groups as KG
from strads.apps.glm import kernels as K
from strads.apps.glm import schedule as S
from strads.apps.lasso.data import make_problem


def test_candidates_are_priority_draws_then_uniform():
    rng = np.random.default_rng(0)
    p = 500
    prio = np.zeros(p)
    heavy = rng.choice(p, 40, replace=False)
    prio[heavy] = rng.random(40) + 0.1
    tree = K.tree_build(prio)
    before = tree.copy()
    seen = np.zeros(p, bool)
    cand = np.empty(60, np.int64)
    u = rng.random(120)
    used = K.priority_candidates(tree, u, 60, 50, p, seen, cand)
    # the 40 leaves with a priority come first (distinct: heavy leaves leave the tree
    # once drawn), the rest are uniform draws, each from one uniform
    m = int(np.isin(cand, heavy).sum())
    assert len(set(cand[:m].tolist())) == m and np.isin(cand[:m], heavy).all()
    assert m >= 35 and used == 50 + (60 - m)
    assert ((cand >= 0) & (cand < p)).all()
    assert np.array_equal(tree, before) and not seen.any()
    # no priority at all (every leaf 0): every candidate uniform, no draw from the tree
    empty = K.tree_build(np.zeros(p))
    assert K.priority_candidates(empty, u, 60, 50, p, seen, cand) == 60
    np.testing.assert_array_equal(cand, np.minimum((u[:60] * p).astype(np.int64), p - 1))


@pytest.mark.parametrize("merge", [False, True])
@pytest.mark.parametrize("rho", [0.05, 0.2, 0.5, 1.0])
def test_the_dense_filter_cache_keeps_the_same_columns(rho, merge):
    """The cached filter keeps exactly what the uncached one keeps, in the same groups,
    round after round, with coordinates taken by rounds in flight and empty columns
    among the candidates; every pair it caches is right. Either rule (rejecting, or
    merging, the candidates that conflict with several groups)."""
    X, _, _ = make_problem(80, 300, corr=0.7, dense=True, seed=4)
    X[:, 17] = 0.0
    norms = np.linalg.norm(X, axis=0)
    p = X.shape[1]
    words = -(-p // 64)
    known = np.zeros((p, words), np.uint64)
    conf = np.zeros((p, words), np.uint64)
    rng = np.random.default_rng(1)
    C = np.abs(X.T @ X)
    for _ in range(200):
        cand = rng.integers(0, p, 80)
        cand[::7] = 17
        taken = rng.random(p) < 0.05
        b = int(rng.integers(1, 60))
        cap = int(rng.integers(1, 5))
        def block(taken, cache):  # (the block's columns, its group boundaries)
            out = np.empty(2 * b + 1, np.int64)
            m, n_ptr, _, _ = KG.block_dense(X, norms, cand, rho, b, taken, *cache, cap,
                                            np.inf, 0.0, out, merge)
            return out[:m], out[m:m + n_ptr]
        want = block(taken.copy(), KG.NO_CACHE)
        t2 = taken.copy()
        got = block(t2, (known, conf))
        for g, w in zip(got, want):
            np.testing.assert_array_equal(g, w)
        assert np.array_equal(t2, taken)  # the taken mask restored
        assert np.diff(got[1]).max(initial=1) <= cap
    def unpack(a):
        return np.unpackbits(a.view(np.uint8), axis=1, bitorder="little")[:, :p] == 1
    bits, cbits = unpack(known), unpack(conf)
    assert bits.any() == (rho < 1)  # (rho 1: no filter, nothing computed)
    assert (bits == bits.T).all() and not (cbits & ~bits).any()
    i, j = np.nonzero(bits)
    np.testing.assert_array_equal(cbits[i, j], C[i, j] > rho * norms[i] * norms[j])
    # filled at once from X'X (with G, or by blocks of rows without): every pair known,
    # the same decisions, symmetric; G's lower triangle is X'X's
    for G in (np.zeros((p, p)), None):
        old = KG.FILL_BYTES
        try:
            KG.FILL_BYTES = 8 * p * 37  # (blocks of 37 rows)
            KG.fill_cache(X, norms, rho, known, conf, G)
        finally:
            KG.FILL_BYTES = old
        bits, cbits = unpack(known), unpack(conf)
        assert bits.all() and (cbits == cbits.T).all()
        want = C > rho * np.outer(norms, norms)
        np.fill_diagonal(want, False)
        np.testing.assert_array_equal(cbits, want)
        if G is not None:
            low = np.tril_indices(p, -1)
            np.testing.assert_allclose(G[low], (X.T @ X)[low], rtol=1e-12, atol=1e-12)
        got = block(taken.copy(), (known, conf))
        for g, w in zip(got, block(taken.copy(), KG.NO_CACHE)):
            np.testing.assert_array_equal(g, w)


@pytest.mark.parametrize("seed", range(4))
def test_merged_groups_keep_the_filter_s_promise(seed):
    """Either rule (rejecting or, after an objective rise, merging the candidates that
    conflict with several groups): every group has at most ``cap`` members and any two
    coordinates of different groups have |corr| <= rho."""
    X, _, _ = make_problem(60, 400, corr=0.6, dense=True, seed=seed)
    norms = np.linalg.norm(X, axis=0)
    C = np.abs(X.T @ X) > 0.2 * np.outer(norms, norms)
    rng = np.random.default_rng(seed)
    sizes = {False: [], True: []}
    for _ in range(50):
        cand = rng.permutation(400)[:120]
        b, cap = int(rng.integers(5, 80)), int(rng.integers(1, 8))
        for merge in (False, True):
            out = np.empty(2 * b + 1, np.int64)
            m, n_ptr, _, _ = KG.block_dense(X, norms, cand, 0.2, b, np.zeros(400, bool),
                                            *KG.NO_CACHE, cap, np.inf, 0.0, out, merge)
            cols, gptr = out[:m], out[m:m + n_ptr] if n_ptr else np.arange(m + 1)
            label = np.repeat(np.arange(gptr.shape[0] - 1), np.diff(gptr))
            assert np.diff(gptr).max(initial=0) <= cap
            across = label[:, None] != label[None, :]
            assert not (C[np.ix_(cols, cols)] & across).any()
            sizes[merge].append(np.diff(gptr).max(initial=0))
    assert sum(sizes[True]) > sum(sizes[False])  # (merged groups: larger ones)


@pytest.mark.parametrize("exact", [True, False])
def test_priority_converges_on_a_family_of_correlated_dense_problems(monkeypatch, exact):
    """Dense problems where the Jacobi groups interfere (few rows, many columns, AR(1)
    or near-duplicate columns, column norms 10^U(-2, 2)): priority reaches
    scikit-learn's optimum, with the pool's Gram (exact rounds) or without it (Jacobi
    rounds of groups: on those with an objective rise it merged groups)."""
    from sklearn.linear_model import Lasso
    monkeypatch.setattr(S.Priority, "exact_pool", exact)
    merged = 0
    for n, p, corr, div, scale in ((60, 600, 0.0, 10, False), (80, 800, 0.5, 10, False),
                                   (50, 500, 0.9, 5, False), (80, 800, 0.3, 10, True)):
        X, y, _ = make_problem(n, p, corr=corr, n_informative=10, dense=True, seed=p)
        if scale:
            X = np.asfortranarray(X * 10 ** np.random.default_rng(0).uniform(-2, 2, p))
        lam = lasso.lambda_max(X, y) / div
        aggs = []
        setup = lasso.make_setup(lambda: (X, y), lam=lam, schedule="priority")
        res = strads.run(lambda ctx: aggs.append(setup(ctx)) or aggs[-1], lasso.LassoUpdate,
                         tol=1e-10, max_rounds=50_000, quiet=True)
        agg = aggs[0][1]
        sk = Lasso(alpha=lam, fit_intercept=False, tol=1e-12, max_iter=100_000).fit(X, y)
        f_sk = lasso.objective(X, y, sk.coef_, lam)
        assert lasso.objective(X, y, res.model["coef"], lam) == pytest.approx(f_sk,
                                                                              rel=1e-7)
        merged += agg.objective_rises > 0
    assert merged or exact


def _tasks(X, y, tol=1e-9, **kw):
    setup = lasso.make_setup(lambda: (X, y), schedule="priority", **kw)
    rec = {}

    def recording(ctx):
        sched, agg, shards = setup(ctx)
        inner = sched.schedule

        def schedule(round):
            task = inner(round)
            rec.setdefault("tasks", []).append(
                ("full" if task.get("full") else task["cols"].shape[0]))
            return task
        sched.schedule = schedule
        rec["sched"] = sched
        return sched, agg, shards
    res = strads.run(recording, lasso.LassoUpdate, tol=tol, max_rounds=50_000, quiet=True,
                     log_interval=0)  # (a trace row every round)
    return res, rec["tasks"], rec["sched"].full_every


def _spying(setup, scheds, seen):
    """``setup`` with its schedule's tasks shown to ``seen(sched, task)`` as they go out,
    the schedules kept in ``scheds``."""
    def spying(ctx):
        sched, agg, shards = setup(ctx)
        inner = sched.schedule
        scheds.append(sched)

        def schedule(round):
            task = inner(round)
            seen(sched, task)
            return task
        sched.schedule = schedule
        return sched, agg, shards
    return spying


def _gaps(tasks):
    """The updates between one full round and the next, from a run's task list."""
    gaps, n = [], 0
    for t in tasks[1:]:
        if t == "full":
            gaps.append(n)
            n = 0
        else:
            n += t
    return gaps


def test_full_rounds_come_when_the_priorities_are_spent():
    X, y, _ = make_problem(400, 4000, density=0.01, corr=0.5, n_informative=40, seed=5)
    res, tasks, every = _tasks(X, y, lambda_ratio=0.05, block=64)
    assert res.stop_reason == "tol" and every == np.count_nonzero(X.getnnz(axis=0))
    gaps = _gaps(tasks)
    # most full rounds come well before full_every (the non-empty features) updates,
    # none after it
    assert len(gaps) >= 3 and max(gaps) <= every + 64
    assert sum(g < every / 2 for g in gaps) >= len(gaps) // 2
    # with the refresh off, the full rounds are full_every updates apart
    old = S.REFRESH
    try:
        S.REFRESH = 0.0
        res0, tasks0, _ = _tasks(X, y, lambda_ratio=0.05, block=64)
    finally:
        S.REFRESH = old
    assert res0.stop_reason == "tol"
    assert res.rounds < res0.rounds  # (the point of it)
    assert all(g >= every for g in _gaps(tasks0))


def test_full_every_still_bounds_the_full_rounds():
    X, y, _ = make_problem(300, 1000, density=0.02, corr=0.5, n_informative=20, seed=6)
    res, tasks, every = _tasks(X, y, lambda_ratio=0.05, block=32, full_every=150)
    assert every == 150
    assert max(_gaps(tasks)) <= 150 + 32
    f = lasso.objective(X, y, res.model["coef"], res.model["lambda"])
    assert res.stop_reason == "tol" and np.isfinite(f)


def test_the_filter_cache_is_left_out_of_checkpoints_and_refused_when_too_large(monkeypatch):
    monkeypatch.setattr(S.Priority, "exact_pool", False)  # (the filter's rounds)
    X, y, _ = make_problem(60, 200, corr=0.5, dense=True, seed=2)
    setup = lasso.make_setup(lambda: (X, y), schedule="priority", lambda_ratio=0.1)
    sched, agg, _ = setup(strads.api.Context(n_workers=1))
    sched.schedule(0)  # (a full round)
    agg.aggregate(0, agg.full_task(), [{"g": X.T @ y, "rss": float(y @ y),
                                       "ry": float(y @ y)}])
    sched.schedule(1)
    assert sched._known is not None and sched._known.shape == (200, 4)
    state = sched.state()
    assert not {"_known", "_conf", "_gptr", "_head", "cols"} & set(state)
    old = S.FILTER_CACHE_BYTES
    try:
        S.FILTER_CACHE_BYTES = 1000
        sched2, _, _ = setup(strads.api.Context(n_workers=1))
        assert not sched2._cache() and sched2._known is None
    finally:
        S.FILTER_CACHE_BYTES = old


def test_without_the_filter_it_still_converges(monkeypatch):
    """rho 1 (no dependency filter): rounds of the heaviest movers overshoot; halving the
    step with the block on each rise keeps the run from diverging."""
    monkeypatch.setattr(S.Priority, "exact_pool", False)  # (Jacobi rounds)
    X, y, _ = make_problem(50, 200, n_informative=10, corr=0.6, snr=3, dense=True, seed=0)
    lam = lasso.lambda_max(X, y) / 20
    res = lasso.fit(X, y, lam=lam, schedule="priority", rho=1.0, tol=1e-6,
                    max_rounds=200_000, quiet=True, log_interval=0)
    assert res.stop_reason == "tol" and res.extra["objective_rises"] > 0
    from sklearn.linear_model import Lasso
    sk = Lasso(alpha=lam, fit_intercept=False, tol=1e-12, max_iter=100_000).fit(X, y)
    f_sk = lasso.objective(X, y, sk.coef_, lam)
    assert lasso.objective(X, y, res.model["coef"], lam) == pytest.approx(f_sk, rel=1e-5)



def test_the_filter_may_cost_what_its_updates_cost(monkeypatch):
    """The block the dependency filter may fill halves when its inner products cost more
    than twice AFFORD times (a pass over the kept columns + a round's fixed cost), and
    grows back by a quarter below half that, between 1 and the block; within a round it
    stops at twice that, the first round too (on dense data with many rows every pair is
    new at first); the rounds grow as the cache fills."""
    monkeypatch.setattr(S.Priority, "exact_pool", False)  # (the filter's rounds)
    from types import SimpleNamespace
    s = SimpleNamespace(filter_cap=None, max_block=64)
    one = 1000  # a pass over the kept columns
    afford = S.AFFORD * (one + S.ROUND_COST)
    steps = [(2 * afford + 1, 32), (2 * afford + 1, 16), (afford, 16), (afford / 2 - 1, 20),
             (0, 25), (0, 31), (0, 38), (0, 47), (0, 58), (0, 64), (0, 64)]
    for work, cap in steps:
        S.Priority._afford(s, work, one)
        assert s.filter_cap == cap
    for _ in range(10):
        S.Priority._afford(s, 10 ** 9, one)
    assert s.filter_cap == 1
    X, y, _ = make_problem(3000, 400, corr=0.6, n_informative=100, dense=True, seed=3)
    monkeypatch.setattr(S, "FILL_ENTRY", np.inf)  # (pairs one by one: X'X never pays)
    rounds, block_dense = [], KG.block_dense

    def recording(*args):
        out = block_dense(*args)
        rounds.append(out)
        return out
    monkeypatch.setattr(KG, "block_dense", recording)
    res, tasks, _ = _tasks(X, y, lambda_ratio=0.01, block=256)
    assert res.stop_reason == "tol"
    for m, _, work, update in rounds:  # (the last candidate checked: at most update)
        assert work <= 2 * S.AFFORD * (update + S.ROUND_COST) + update
    assert rounds[0][2] > S.AFFORD * (rounds[0][3] + S.ROUND_COST)  # all pairs new
    blocks = [t for t in tasks if t != "full"]
    assert max(blocks[len(blocks) // 2:]) >= 2 * min(blocks)  # the cache filled


def test_the_filter_buys_x_x_when_it_would_meet_its_pairs_anyway(monkeypatch):
    """Rent or buy: with few columns and many rows (dense or sparse) X'X costs less than
    a few rounds of the filter's pairs, so it is computed at the first block round (no
    pair by the kernel after it) and the groups' Gram matrices come with the task,
    X_g'X_g; with many columns and few rows it is not (pairs one by one, the workers'
    groups). Either way the optimum is scikit-learn's."""
    from sklearn.linear_model import Lasso
    for n, p, corr, div, buys, dense in ((2000, 120, 0.6, 20, True, True),
                                         (100, 1200, 0.3, 5, False, True),
                                         (6000, 150, 0.6, 20, True, False)):
        X, y, _ = make_problem(n, p, corr=corr, n_informative=20, snr=3, dense=dense,
                               density=0.03, seed=7)
        lam = lasso.lambda_max(X, y) / div
        rounds, grams, scheds = [], [], []
        monkeypatch.setattr(S.Priority, "exact_pool", False)  # (the filter's rounds)
        for kernel in ("block_dense", "block_sparse"):  # (sparse: until it buys)
            monkeypatch.setattr(KG, kernel, lambda *a, f=getattr(KG, kernel):
                                rounds.append(f(*a)) or rounds[-1])
        setup = lasso.make_setup(lambda: (X, y), lam=lam, schedule="priority")
        recording = _spying(setup, scheds, lambda sched, task: "groups" in task and grams.append(
            (task["cols"], task["groups"], task.get("Gs"))))
        res = strads.run(recording, lasso.LassoUpdate, tol=1e-8, max_rounds=50_000,
                         quiet=True, workers=2)
        assert res.stop_reason == "tol" and rounds and grams
        assert (rounds[0][2] == 0) == buys and all(r[2] == 0 for r in rounds) == buys
        for cols, gptr, Gs in grams:
            assert (Gs is not None) == buys
            if buys:  # the groups' X_g'X_g, one after the other
                want = [np.asarray((X[:, cols[a:b]].T @ X[:, cols[a:b]]).todense()
                                   if not dense else X[:, cols[a:b]].T @ X[:, cols[a:b]]).ravel()
                        for a, b in zip(gptr[:-1], gptr[1:]) if b - a > 1]
                np.testing.assert_allclose(Gs, np.concatenate(want), rtol=1e-12)
        if buys:  # every pair's decision, from X'X
            sched = scheds[0]
            bits = np.unpackbits(sched._conf.view(np.uint8), axis=1,
                                 bitorder="little")[:, :p] == 1
            C = X.T @ X
            C = np.abs(C.toarray() if not dense else C)
            norms = np.sqrt(np.diag(C))
            want = C > sched.rho * np.outer(norms, norms)
            np.fill_diagonal(want, False)
            np.testing.assert_array_equal(bits, want)
        sk = Lasso(alpha=lam, fit_intercept=False, tol=1e-12, max_iter=100_000).fit(X, y)
        f_sk = lasso.objective(X, y, sk.coef_, lam)
        f = lasso.objective(X, y, res.model["coef"], lam)
        assert f == pytest.approx(f_sk, rel=1e-7)
        monkeypatch.undo()


def test_the_default_threshold_is_above_the_noise_of_few_rows():
    """By default the filter's threshold is the larger of 0.1 and 2/sqrt(n): with 120
    rows, independent columns' sample correlations have a standard deviation of 0.09,
    so at 0.1 the filter rejects candidates for noise and keeps small blocks; at 0.18
    it keeps larger ones and comes within 1e-6 of the optimum in fewer rounds. A given
    rho is kept."""
    from sklearn.linear_model import Lasso
    assert S.filter_rho(None, 100) == pytest.approx(0.2)
    assert S.filter_rho(None, 10_000) == S.RHO == 0.1
    assert S.filter_rho(0.05, 100) == 0.05
    X, y, _ = make_problem(120, 2000, n_informative=60, corr=0.6, snr=3, dense=True, seed=3)
    lam = lasso.lambda_max(X, y) / 10
    sk = Lasso(alpha=lam, fit_intercept=False, tol=1e-12, max_iter=100_000).fit(X, y)
    target = lasso.objective(X, y, sk.coef_, lam) * (1 + 1e-6)
    runs = {}
    for rho in (None, 0.1):
        res, tasks, _ = _tasks(X, y, tol=1e-6, lam=lam, rho=rho)
        assert res.stop_reason == "tol"
        first = min(r["round"] for r in res.trace if r["objective"] <= target)
        runs[rho] = (first, np.mean([t for t in tasks if t != "full"]))
    assert runs[None][1] > 1.5 * runs[0.1][1]  # larger blocks
    assert runs[None][0] < 0.8 * runs[0.1][0]  # fewer rounds to the optimum


def test_exact_rounds_on_the_pool_reach_the_optimum_in_fewer_rounds(monkeypatch):
    """Dense, p >> n, correlated (issue 30's shapes where Jacobi rounds cost as much as
    round-robin's): once the pool's Gram is bought, a block round is one group whose
    Gram matrix is X_B'X_B (its steps see each other); the run reaches scikit-learn's
    optimum in fewer rounds than the filter's Jacobi rounds throughout take (or than
    the 2,000 they are given here)."""
    from sklearn.linear_model import Lasso
    for n, p, corr, div, seed in ((100, 1000, 0.3, 10, 1), (120, 600, 0.0, 10, 3),
                                  (80, 800, 0.3, 30, 7)):
        X, y, _ = make_problem(n, p, corr=corr, dense=True, seed=seed)
        lam = lasso.lambda_max(X, y) / div
        sk = Lasso(alpha=lam, fit_intercept=False, tol=1e-12, max_iter=100_000).fit(X, y)
        f_sk = lasso.objective(X, y, sk.coef_, lam)
        rounds = {}
        for exact in (True, False):
            monkeypatch.setattr(S.Priority, "exact_pool", exact)
            setup = lasso.make_setup(lambda: (X, y), lam=lam, schedule="priority")
            grams = []

            def recording(ctx):
                sched, agg, shards = setup(ctx)
                inner = sched.schedule

                def schedule(round):
                    task = inner(round)
                    if "Gs" in task:
                        grams.append((task["cols"], task["groups"], task["Gs"]))
                    return task
                sched.schedule = schedule
                return sched, agg, shards
            res = strads.run(recording, lasso.LassoUpdate, tol=1e-10, max_rounds=2000,
                             quiet=True)
            rounds[exact] = res.rounds
            if not exact:  # (Gs there: the groups' Gram from X'X, once the filter bought it)
                continue
            assert res.stop_reason == "tol"
            f = lasso.objective(X, y, res.model["coef"], lam)
            assert f == pytest.approx(f_sk, rel=1e-7)
            assert grams
            for cols, gptr, Gs in grams:
                assert gptr.tolist() == [0, cols.shape[0]]
                np.testing.assert_allclose(Gs, (X[:, cols].T @ X[:, cols]).ravel(),
                                           rtol=1e-12, atol=1e-12 * n)
        assert rounds[True] < rounds[False]


def test_exact_rounds_resume_bit_for_bit(tmp_path):
    """The pool's Gram matrix is in the checkpoint: a run resumed among exact rounds
    ends with the uninterrupted run's coefficients, bit for bit."""
    X, y, _ = make_problem(100, 1000, corr=0.3, dense=True, seed=1)
    kw = dict(schedule="priority", lambda_ratio=0.1, tol=0, quiet=True, workers=2)
    full = lasso.fit(X, y, max_rounds=30, out=str(tmp_path / "full"), **kw)
    part = tmp_path / "part"
    first = lasso.fit(X, y, max_rounds=12, out=str(part), checkpoint_every=1e-6, **kw)
    assert first.extra["grouped_updates"] > 0
    res = lasso.fit(X, y, max_rounds=30, out=str(part), resume=True, **kw)
    np.testing.assert_array_equal(res.model["coef"], full.model["coef"])


def test_the_workers_filter_is_asked_for_what_it_keeps(tmp_path, monkeypatch):
    """With --data the workers filter, and the schedule learns what they kept from the
    aggregate's updates: it sends at most twice that plus 64 candidates, as it asks of
    its own filter (not 5/4 of the block each round: on binary columns, all correlated
    above rho, the workers kept about 16 of 320 and summed the Gram matrix of all). (The
    filter's rounds: without the exact rounds on the workers' held pool.)"""
    monkeypatch.setattr(S.Priority, "exact_pool", False)
    import scipy.sparse as sp
    from sklearn.datasets import dump_svmlight_file

    rng = np.random.default_rng(0)
    X = sp.random(200, 600, density=0.3, format="csr", random_state=rng)
    X.data[:] = 1.0
    y = X @ rng.standard_normal(600) + rng.standard_normal(200)
    path = str(tmp_path / "b.svm")
    dump_svmlight_file(X, y, path)
    lam = lasso.lambda_max(X, y) / 20
    setup = lasso.make_file_setup(path, lam=lam, schedule="priority", block=256)
    rounds = []  # (candidates sent, kept) of each block round

    def spying(ctx):
        sched, agg, shards = setup(ctx)
        inner = agg.aggregate

        def aggregate(round, task, partials):
            if not task.get("full"):
                rounds.append((task["cols"].shape[0], partials[0]["cols"].shape[0]))
            return inner(round, task, partials)
        agg.aggregate = aggregate
        return sched, agg, shards
    res = strads.run(spying, lasso.DATAFIT.Update, workers=3, tol=0, max_rounds=200,
                     quiet=True)
    assert len(rounds) > 100 and res.objective < 0.5 * (y @ y) / 200
    kept = np.array([k for _, k in rounds])
    assert kept.max() < 100  # (the point: far fewer than the block)
    for (_, k), (sent, _) in zip(rounds, rounds[1:]):
        assert sent <= 2 * k + 64


def test_plain_rounds_where_the_sparse_filter_cannot_afford_the_block():
    """On thick sparse columns (density 0.3) the scheduler's filter can afford only part
    of the block: the rest of the block is not left idle, a plain Jacobi round of the
    whole block goes instead (no groups, more coordinates than the filter's cap); a
    rise after plain rounds halves their block (not the filter's, nor the step), and
    the Lasso reaches scikit-learn's optimum."""
    from sklearn.linear_model import Lasso

    X, y, _ = make_problem(300, 1200, density=0.3, corr=0.5, seed=1)
    lam = lasso.lambda_max(X, y) / 10
    setup = lasso.make_setup(lambda: (X, y), lam=lam, schedule="priority")
    rounds, scheds = [], []  # (coordinates, groups?, the filter's cap, the plain cap)
    spying = _spying(setup, scheds, lambda sched, task: task.get("full") or rounds.append(
        (task["cols"].shape[0], "groups" in task, sched.filter_cap, sched._plain_cap)))
    res = strads.run(spying, lasso.LassoUpdate, tol=1e-10, max_rounds=100_000,
                     quiet=True, workers=2)
    assert res.stop_reason == "tol" and res.extra["objective_rises"] > 0
    plain = [(n, top) for n, groups, cap, top in rounds if not groups and n > cap]
    assert plain and max(n for n, _ in plain) == 256 and all(n <= top for n, top in plain)
    assert scheds[0]._plain_cap < 256 and scheds[0].step == 1.0
    sk = Lasso(alpha=lam, fit_intercept=False, tol=1e-12, max_iter=100_000).fit(X, y)
    f_ref = lasso.objective(X, y, sk.coef_, lam)
    assert lasso.objective(X, y, res.model["coef"], lam) <= f_ref * (1 + 1e-6)


def test_the_workers_hold_the_pools_gram(tmp_path, monkeypatch):
    """With --data, once the filter has spent the price of the pool's Gram (what the last
    full round found moving), the workers keep it and the uniform candidates come from
    the pool: a round's candidates cost no Gram computed afresh, and the Lasso still
    reaches scikit-learn's optimum, as one that sums every candidate's Gram each round."""
    from sklearn.datasets import dump_svmlight_file
    from sklearn.linear_model import Lasso

    X, y, _ = make_problem(300, 1000, density=0.25, corr=0.3, n_informative=200, seed=4)
    dump_svmlight_file(X, y, path := str(tmp_path / "t.svm"))
    lam = lasso.lambda_max(X, y) / 20
    entries, pools = [], []
    gram, add = K.gram_sparse, K.gram_sparse_add
    monkeypatch.setattr(K, "gram_sparse", lambda *a: entries.append(a[3].shape[0] ** 2)
                        or gram(*a))
    monkeypatch.setattr(K, "gram_sparse_add", lambda *a: entries.append(a[3].size)
                        or add(*a))

    def run():
        entries.clear()
        setup = lasso.make_file_setup(path, lam=lam, schedule="priority", block=256)

        def spying(ctx):
            sched, agg, shards = setup(ctx)
            inner = agg.aggregate

            def aggregate(round, task, partials):
                if "pool" in task:
                    pools.append(round)
                return inner(round, task, partials)
            agg.aggregate = aggregate
            return sched, agg, shards
        res = strads.run(spying, lasso.DATAFIT.Update, workers=3, tol=1e-8,
                         max_rounds=100_000, quiet=True)
        return res, sum(entries)
    sk = Lasso(alpha=lam, fit_intercept=False, tol=1e-12, max_iter=100_000).fit(X, y)
    f_ref = lasso.objective(X, y, sk.coef_, lam)
    held, n_held = run()
    assert pools
    monkeypatch.setattr(S.Priority, "_hold_pool", lambda self: None)
    pools.clear()
    fresh, n_fresh = run()
    assert not pools and n_held < n_fresh / 2
    for res in (held, fresh):
        assert res.stop_reason == "tol" and res.objective <= f_ref * (1 + 1e-6)


def _wide(n, p, seed):
    """n x p Gaussian (n << p), y from 4 columns plus a little noise."""
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, p))
    return X, X[:, :4] @ [1.0, -1.0, 2.0, 0.5] + 0.01 * rng.standard_normal(n)


def _wide_8_by_200():
    """8 x 200 Gaussian, y from 3 columns (hunt8's fuzzer's family 'n<<p', seed 1)."""
    rng = np.random.default_rng(1)
    rng.standard_normal((40, 15)), rng.standard_normal(40), rng.uniform(-3, 3, 15)
    rng.standard_normal(40)  # (the draws before it)
    X = rng.standard_normal((8, 200))
    return X, X[:, :3] @ [1, -1, 2] + 0.01 * rng.standard_normal(8)


STALE_FAMILY = {  # (X, y), lambda_max / this
    "hunt8 8x200": (_wide_8_by_200, 1e6), "10x300 s0": (lambda: _wide(10, 300, 0), 1e6),
    "10x300 s1": (lambda: _wide(10, 300, 1), 1e6), "10x300 s2": (lambda: _wide(10, 300, 2), 1e3),
    "pairs 40x400": (lambda: lasso.near_duplicates(40, 400, group=2, noise=0.01,
                                                    n_informative=10, dense=True, seed=2), 1e3),
    "fours 40x400": (lambda: lasso.near_duplicates(40, 400, group=4, noise=0.01,
                                                    n_informative=10, dense=True, seed=4), 1e3),
    "sparse fours 60x400": (lambda: lasso.near_duplicates(60, 400, group=4, density=0.2,
                                                           noise=0.01, n_informative=10,
                                                           seed=4), 1e3)}


@pytest.mark.parametrize("workers", [1, 2])
@pytest.mark.parametrize("name", list(STALE_FAMILY))
def test_priority_with_staleness_reaches_the_optimum_of_wide_and_correlated_data(name, workers):
    """Staleness 1 (hunt8: stopped by max_iter with a ConvergenceWarning, its steps
    judged against the round in flight, block and step halved to 1 and 1/16): a round's
    x_j' r is moved by the steps of the round in flight through their Gram, so it steps
    as if after them. The objective is LARS's (an exact path, independent) to 1e-10."""
    import warnings

    from sklearn.exceptions import ConvergenceWarning
    from sklearn.linear_model import LassoLars

    from strads.estimators import Lasso

    make, div = STALE_FAMILY[name]
    X, y = make()
    Xd = X.toarray() if hasattr(X, "toarray") else X
    n, Xc, yc = len(y), Xd - Xd.mean(axis=0), y - y.mean()
    alpha = np.abs(Xc.T @ yc).max() / n / div

    def f(w, c):
        return 0.5 * np.mean((y - Xd @ w - c) ** 2) + alpha * np.abs(w).sum()
    ref = LassoLars(alpha=alpha, max_iter=10_000).fit(Xd, y)
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConvergenceWarning)
        # (tol scales the null model's objective: 200 to 5e5 times the optimum's here)
        est = Lasso(alpha=alpha, schedule="priority", staleness=1, n_jobs=workers,
                    max_iter=20_000, random_state=0, tol=1e-12).fit(X, y)
    f_ref = f(ref.coef_, ref.intercept_)
    assert f(est.coef_, est.intercept_) <= f_ref * (1 + 1e-10)
