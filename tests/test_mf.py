"""Matrix factorization app: against a NumPy reference, invariants, readers, bad input."""
import csv
import json
import re

import numpy as np
import pytest

import strads
from strads.apps import mf
from strads.apps.mf import data as D

import faults
from conftest import FakeClock, run_cli

LAM = 1.0  # the unweighted objective's lambda (weighted=False)
LAM_W = 0.05  # the weighted (default) objective's: times each row's rating count


def small_problem(m=40, n=30, k=3, density=0.5, seed=1):
    rng = np.random.default_rng(seed)
    U, V = rng.standard_normal((m, k)), rng.standard_normal((n, k))
    mask = rng.random((m, n)) < density
    u, i = np.nonzero(mask)
    r = 3 + (U[u] * V[i]).sum(1) + 0.1 * rng.standard_normal(u.size)
    return u, i, r


def penalties(u, i, lam, weighted, m=None, n=None):
    """Each user's and item's penalty: lam times its number of ratings (weighted, the
    app's default) or lam."""
    m = u.max() + 1 if m is None else m
    n = i.max() + 1 if n is None else n
    if weighted:
        return lam * np.bincount(u, minlength=m), lam * np.bincount(i, minlength=n)
    return np.full(m, float(lam)), np.full(n, float(lam))


def numpy_objective(u, i, r, W, H, lam, mu=0.0, bu=None, bi=None, weighted=False):
    bu = np.zeros(W.shape[0]) if bu is None else bu
    bi = np.zeros(H.shape[0]) if bi is None else bi
    e = r - mu - bu[u] - bi[i] - (W[u] * H[i]).sum(1)
    ru, ri = penalties(u, i, lam, weighted, W.shape[0], H.shape[0])
    return e @ e + ru @ ((W ** 2).sum(1) + bu ** 2) + ri @ ((H ** 2).sum(1) + bi ** 2)


def numpy_als(u, i, r, k, lam, bias, max_iter=5000, weighted=False):
    """Dense masked ALS (with exact bias steps), run until the objective stops moving;
    ``weighted``: each row's penalty is lam times its number of ratings."""
    m, n = u.max() + 1, i.max() + 1
    ru, ri = penalties(u, i, lam, weighted, m, n)
    mask = np.zeros((m, n), bool)
    mask[u, i] = True
    mu = r.mean() if bias != "none" else 0.0
    R = np.zeros((m, n))
    R[u, i] = r - mu
    g = np.random.default_rng(5)
    W, H = g.standard_normal((m, k)), g.standard_normal((n, k))
    bu, bi = np.zeros(m), np.zeros(n)
    full, prev = bias == "full", None
    for _ in range(max_iter):
        T = R - (bu[:, None] + bi[None, :]) * full
        for a in range(m):
            Ha = H[mask[a]]
            W[a] = np.linalg.solve(Ha.T @ Ha + ru[a] * np.eye(k), Ha.T @ T[a, mask[a]])
        for b in range(n):
            Wb = W[mask[:, b]]
            H[b] = np.linalg.solve(Wb.T @ Wb + ri[b] * np.eye(k), Wb.T @ T[mask[:, b], b])
        if full:
            bu = ((R - W @ H.T - bi) * mask).sum(1) / (mask.sum(1) + ru)
            bi = ((R - W @ H.T - bu[:, None]) * mask).sum(0) / (mask.sum(0) + ri)
        f = numpy_objective(u, i, r, W, H, lam, mu, bu, bi, weighted)
        if prev is not None and abs(prev - f) <= 1e-15 * f:
            break
        prev = f
    return f


@pytest.mark.parametrize("bias", ["mean", "full"])
@pytest.mark.parametrize("schedule", ["ccd", "als"])
@pytest.mark.parametrize("weighted", [False, True], ids=["unweighted", "weighted"])
def test_reaches_numpy_reference_objective(schedule, bias, weighted):
    u, i, r = small_problem()
    lam = LAM if not weighted else LAM_W
    ref = numpy_als(u, i, r, 3, lam, bias, weighted=weighted)
    # the weighted objective is the default: not passed
    # the objective's minimiser: early stopping (the default) off
    res = mf.fit(u, i, r, rank=3, lam=lam, bias=bias, schedule=schedule, iters=5000,
                 tol=1e-14, workers=3, quiet=True, early_stop=None,
                 **({} if weighted else {"weighted": False}))
    assert res.stop_reason == "tol"
    assert abs(res.objective - ref) <= 1e-6 * ref
    M = res.model
    mine = numpy_objective(u, i, r, M["W"], M["H"], lam, M["mean"], M["user_bias"],
                           M["item_bias"], weighted)
    assert mine == pytest.approx(res.objective, rel=1e-12)
    np.testing.assert_allclose(mf.predict(M, u, i),
                               M["mean"] + M["user_bias"][u] + M["item_bias"][i]
                               + (M["W"][u] * M["H"][i]).sum(1), rtol=1e-12)


@pytest.mark.parametrize("schedule", ["ccd", "als"])
def test_default_minimises_the_weighted_objective(schedule):
    """With no weighting option the model is a stationary point of the per-rating
    weighted objective (lambda n_u, lambda n_i), not of the unweighted one: the gradient
    in every w_u, h_i and bias vanishes."""
    u, i, r = small_problem(seed=3)
    lam = 0.1
    res = mf.fit(u, i, r, rank=3, lam=lam, bias="full", schedule=schedule, iters=5000,
                 tol=1e-14, workers=2, quiet=True, early_stop=None)
    M = res.model
    W, H, bu, bi = M["W"], M["H"], M["user_bias"], M["item_bias"]
    e = r - M["mean"] - bu[u] - bi[i] - (W[u] * H[i]).sum(1)
    cu, ci = np.bincount(u), np.bincount(i)
    # half the gradient of the weighted objective
    gW = lam * cu[:, None] * W - np.stack([np.bincount(u, e * H[i, t]) for t in range(3)], 1)
    gH = lam * ci[:, None] * H - np.stack([np.bincount(i, e * W[u, t]) for t in range(3)], 1)
    gbu, gbi = lam * cu * bu - np.bincount(u, e), lam * ci * bi - np.bincount(i, e)
    scale = np.abs(np.bincount(u, np.abs(r - M["mean"]))).max()
    for g in (gW, gH, gbu, gbi):
        assert np.abs(g).max() <= 1e-6 * scale
    # the unweighted objective's gradient does not vanish there
    assert np.abs(lam * W - (lam * cu[:, None] * W - gW)).max() > 1e-2 * scale
    assert res.objective == pytest.approx(
        numpy_objective(u, i, r, W, H, lam, M["mean"], bu, bi, weighted=True), rel=1e-12)
    assert abs(res.objective - numpy_als(u, i, r, 3, lam, "full", weighted=True)) \
        <= 1e-6 * res.objective


@pytest.mark.parametrize("schedule,inner", [("ccd", 1), ("ccd", 3), ("als", 1)])
def test_objective_non_increasing_per_iteration(schedule, inner):
    t = mf.make_problem(500, 300, 6000, rank=4, seed=3)
    res = mf.fit(t.users, t.items, t.ratings, rank=6, lam=0.5, bias="full",
                 schedule=schedule, inner=inner, iters=12, tol=0, workers=3, quiet=True,
                 early_stop=None)
    obj = np.array(res.extra["objective_per_iter"])
    assert len(obj) == 12
    assert (np.diff(obj) <= 1e-12 * obj[:-1]).all(), obj
    assert res.objective == pytest.approx(obj[-1], rel=1e-9)


def test_weighted_lambda_objective():
    u, i, r = small_problem(seed=2)
    res = mf.fit(u, i, r, rank=3, lam=0.1, bias="none", iters=30, tol=0,
                 quiet=True)  # weighted: the default
    M = res.model
    cu, ci = np.bincount(u), np.bincount(i)
    e = r - (M["W"][u] * M["H"][i]).sum(1)
    f = e @ e + 0.1 * (cu @ (M["W"] ** 2).sum(1) + ci @ (M["H"] ** 2).sum(1))
    assert res.objective == pytest.approx(f, rel=1e-10)
    obj = np.array(res.extra["objective_per_iter"])
    assert (np.diff(obj) <= 1e-12 * obj[:-1]).all()


def test_model_does_not_depend_on_worker_count():
    # every row's update reads only the synced other side: the partition cannot matter
    t = mf.make_problem(400, 200, 5000, seed=4)
    models = [mf.fit(t.users, t.items, t.ratings, rank=5, iters=4, tol=0, workers=w,
                     quiet=True).model for w in (1, 2, 5)]
    for M in models[1:]:
        np.testing.assert_allclose(M["W"], models[0]["W"], rtol=1e-12, atol=1e-14)
        np.testing.assert_allclose(M["H"], models[0]["H"], rtol=1e-12, atol=1e-14)


def test_staleness_bounded_and_still_fits():
    t = mf.make_problem(400, 200, 6000, rank=3, noise=0.1, seed=5)
    kw = dict(rank=3, lam=1.0, bias="full", iters=30, tol=0, workers=3, quiet=True,
              test_fraction=0.1)
    sync = mf.fit(t.users, t.items, t.ratings, **kw)
    stale = mf.fit(t.users, t.items, t.ratings, staleness=2, **kw)
    assert stale.summary()["max_staleness_seen"] == 2
    assert stale.objective == pytest.approx(sync.objective, rel=0.05)
    assert stale.extra["test_rmse"] < 1.5 * sync.extra["test_rmse"]


def test_test_rmse_and_train_rmse_match_numpy():
    t = mf.make_problem(300, 200, 5000, rank=3, seed=6)
    res = mf.fit(t.users, t.items, t.ratings, rank=4, iters=5, tol=0, test_fraction=0.2,
                 seed=9, bias="full", quiet=True)
    tr, te = D.split(t, 0.2, 9)
    e_tr = tr.ratings - mf.predict(res.model, tr.users, tr.items)
    e_te = te.ratings - mf.predict(res.model, te.users, te.items)
    assert res.extra["train_rmse"] == pytest.approx(np.sqrt(np.mean(e_tr ** 2)), rel=1e-10)
    assert res.extra["test_rmse"] == pytest.approx(np.sqrt(np.mean(e_te ** 2)), rel=1e-10)
    # the last trace row is scored from the final factors (an iteration end)
    assert res.trace[-1]["test_rmse"] == pytest.approx(res.extra["test_rmse"], rel=1e-9)
    assert res.extra["n_test"] == len(te)


def test_expensive_held_out_scoring_is_rationed(monkeypatch):
    """Rounds between iteration ends are scored only while scoring stays under 5% of
    the time since the last scoring; iteration ends are always scored, exactly."""
    from strads.apps.mf import kernels as K, update
    from strads.apps.mf.aggregate import MFAggregate
    clock = FakeClock(monkeypatch, update, frozen=True)  # the workers time their scoring on it
    monkeypatch.setattr(MFAggregate, "clock", staticmethod(clock.time))
    calls = []
    real, aggregate = K.predict_pairs, MFAggregate.aggregate

    def slow(*a):
        calls.append(1)
        clock.skip(1.0)  # scoring a large held-out set
        return real(*a)

    def a_second_a_round(self, *a):
        clock.skip(1.0)
        return aggregate(self, *a)

    monkeypatch.setattr(K, "predict_pairs", slow)
    monkeypatch.setattr(MFAggregate, "aggregate", a_second_a_round)
    t = mf.make_problem(300, 200, 5000, rank=3, seed=6)
    res = mf.fit(t.users, t.items, t.ratings, rank=4, iters=3, tol=0, test_fraction=0.2,
                 seed=9, quiet=True, log_interval=0)
    rows = len(res.trace)
    assert rows > 20 and len(calls) < rows / 2  # without rationing: one per row
    assert res.extra["iterations"] == 3 and len(res.extra["test_rmse_per_iter"]) == 3
    tr, te = D.split(t, 0.2, 9)
    e_te = te.ratings - mf.predict(res.model, te.users, te.items)
    assert res.extra["test_rmse"] == pytest.approx(np.sqrt(np.mean(e_te ** 2)), rel=1e-10)
    # the rows in between repeat the last score
    assert len({r["test_rmse"] for r in res.trace}) <= len(calls)


@pytest.mark.parametrize("workers,staleness", [(1, 0), (3, 0), (2, 1)])
def test_workers_score_each_iteration_exactly(workers, staleness):
    """The workers score the held-out set at every iteration end (their shares, from
    their synced factors; unseen users' pairs too, from the factors' extra entry): each
    figure is the exact RMSE of the model after that many iterations."""
    t = mf.make_problem(300, 200, 5000, rank=3, seed=6)
    rng = np.random.default_rng(0)
    test = (np.concatenate([t.users[:300], [10_000, 10_001]]),  # two unseen users
            np.concatenate([t.items[:300], t.items[:2]]),
            np.concatenate([t.ratings[:300] + rng.standard_normal(300), [3.0, 4.0]]))
    tr = (t.users[300:], t.items[300:], t.ratings[300:])
    kw = dict(rank=4, tol=0, test=test, cold_start="mean", bias="full", workers=workers,
              staleness=staleness, quiet=True, log_interval=0)
    res = mf.fit(*tr, iters=3, **kw)
    per_iter = res.extra["test_rmse_per_iter"]
    assert len(per_iter) == 3 and res.extra["cold_start_test"] == 2
    for it in (1, 2, 3):
        M = mf.fit(*tr, iters=it, **kw).model
        e = test[2] - mf.predict(M, test[0], test[1], unknown="mean")
        assert per_iter[it - 1] == pytest.approx(np.sqrt(np.mean(e ** 2)), rel=1e-10)
    # trace rows: the starting model's score (every prediction the mean) until the first
    # one comes back, the final model's in the last row
    e0 = test[2] - np.mean(tr[2])
    assert res.trace[0]["test_rmse"] == pytest.approx(np.sqrt(np.mean(e0 ** 2)))
    assert res.trace[-1]["test_rmse"] == res.extra["test_rmse"] == per_iter[-1]


@pytest.mark.parametrize("k", [1, 2, 7, 1000, 100_000])
def test_generator_draws_match_searchsorted(k):
    from strads.apps.mf import kernels as K
    rng = np.random.default_rng(k)
    w = (np.arange(k) + 1.0) ** -0.7
    rng.shuffle(w)
    cdf = np.cumsum(w) / w.sum()
    u = rng.random(100_000)
    u[:4] = [0.0, np.nextafter(1.0, 0.0), cdf[0], cdf[k // 2]]  # edges, exact steps
    out = np.empty(u.shape[0], np.int64)
    K.inverse_cdf(cdf, u, out)
    assert np.array_equal(out, np.minimum(np.searchsorted(cdf, u, side="right"), k - 1))


# -- data ----------------------------------------------------------------------------------
def test_split_is_deterministic_and_never_cold():
    t = mf.make_problem(500, 300, 4000, seed=0)
    a_tr, a_te = D.split(t, 0.3, 1)
    b_tr, b_te = D.split(t, 0.3, 1)
    c_tr, c_te = D.split(t, 0.3, 2)
    np.testing.assert_array_equal(a_te.ratings, b_te.ratings)
    assert not np.array_equal(a_te.ratings, c_te.ratings)
    assert 0.2 < len(a_te) / len(t) < 0.3
    assert np.isin(a_te.users, a_tr.users).all() and np.isin(a_te.items, a_tr.items).all()


def test_built_in_problem_power_law_and_deterministic():
    a = mf.make_problem(5000, 2000, 50000, seed=0)
    b = mf.make_problem(5000, 2000, 50000, seed=0)
    np.testing.assert_array_equal(a.ratings, b.ratings)
    assert len(a) == 50000
    assert np.unique(a.users * 2000 + a.items).size == 50000
    deg = np.bincount(a.users)
    assert deg.max() > 20 * deg.mean()  # heavy tail, not Poisson-like


def write_formats(tmp_path, u, i, r):
    """The same ratings as u.data (tab), ratings.csv (header) and MatrixMarket."""
    uid, iid = 1000 + 7 * u, 5 + 3 * i  # arbitrary raw ids
    p1 = tmp_path / "u.data"
    p1.write_text("".join(f"{a}\t{b}\t{float(c)!r}\t88125{k}\n"
                          for k, (a, b, c) in enumerate(zip(uid, iid, r))))
    p2 = tmp_path / "ratings.csv"
    p2.write_text("userId,movieId,rating,timestamp\n" + "".join(
        f"{a},{b},{float(c)!r},1\n" for a, b, c in zip(uid, iid, r)))
    p3 = tmp_path / "r.mtx"
    p3.write_text(f"%%MatrixMarket matrix coordinate real general\n% ratings\n"
                  f"{u.max() + 1} {i.max() + 1} {len(r)}\n" + "".join(
                      f"{a + 1} {b + 1} {float(c)!r}\n" for a, b, c in zip(u, i, r)))
    return p1, p2, p3


def test_readers_agree_and_remap_ids(tmp_path):
    u, i, r = small_problem(m=25, n=20)
    models = []
    for path in write_formats(tmp_path, u, i, r):
        t = D.read_ratings(str(path))
        assert len(t) == len(r)
        np.testing.assert_array_equal(t.ratings, r)
        p = D.prepare(t)
        assert p.shape == (np.unique(u).size, np.unique(i).size)
        setup = mf.make_setup(lambda: p, rank=2, iters=3)
        res = strads.run(setup, mf.MFUpdate, workers=2, quiet=True, max_rounds=10 ** 6)
        models.append(res.model)
    for M in models[1:]:
        np.testing.assert_array_equal(M["W"], models[0]["W"])
    np.testing.assert_array_equal(models[0]["user_ids"], np.unique(1000 + 7 * u))
    np.testing.assert_array_equal(models[2]["user_ids"], np.unique(u + 1))


@pytest.mark.parametrize("text,message", [
    ("1\t2\t3.5\n1\tx\t4\n", "f:2: item 'x' is not an integer"),
    ("1\t2\t3.5\n1\t3\tgood\n", "f:2: rating 'good' is not a number"),
    ("1\t2\t3.5\n\n1\t3\tnan\n", "f:3: rating is nan, not finite"),
    ("1,2,inf\n", "f:1: rating is inf, not finite"),
    ("1 2\n", "f:1: expected 'user item rating', found 2 field(s)"),
    ("u,i,r\n", "f: no ratings (only a header)"),
    ("# nothing\n\n", "f: no ratings (empty file)"),
    ("", "f: empty file"),
    ("1\t2\t3\n4\t5\t1\n1\t2\t4\n", "f:3: duplicate rating of user 1, item 2 (first at "
                                    "line 1)"),
    ("%%MatrixMarket matrix coordinate real general\n2 2 2\n1 1 3\n3 1 2\n",
     "f:4: row 3 is outside 1..2"),
    ("%%MatrixMarket matrix coordinate real general\n2 2 3\n1 1 3\n2 1 2\n",
     "announces 3 entries, the file has 2"),
    ("%%MatrixMarket matrix coordinate pattern general\n2 2 1\n1 1\n", "f:1: field"),
    ("%%MatrixMarket matrix array real general\n2 2\n1\n2\n3\n4\n", "f:1: array format"),
])
def test_bad_input_names_file_and_line(tmp_path, monkeypatch, text, message):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "f").write_text(text)
    with pytest.raises(strads.DataError) as e:
        D.prepare(D.read_ratings("f"))
    assert message in str(e.value)


def test_duplicates_last_and_mean(tmp_path):
    p = tmp_path / "d.tsv"
    p.write_text("1\t2\t3\n4\t5\t1\n1\t2\t5\n1\t2\t4\n")
    last = D.prepare(D.read_ratings(str(p)), duplicates="last")
    mean = D.prepare(D.read_ratings(str(p)), duplicates="mean")
    assert sorted(last.ratings) == [1.0, 4.0]
    assert sorted(mean.ratings) == [1.0, 4.0]  # (3 + 5 + 4) / 3
    p.write_text("1\t2\t3\n4\t5\t1\n1\t2\t5\n")
    assert sorted(D.prepare(D.read_ratings(str(p)), duplicates="last").ratings) == [1, 5]
    assert sorted(D.prepare(D.read_ratings(str(p)), duplicates="mean").ratings) == [1, 4]


def test_cold_start_policies(tmp_path):
    tr, te = tmp_path / "train.tsv", tmp_path / "test.tsv"
    tr.write_text("1\t10\t4\n2\t10\t2\n2\t11\t3\n")
    te.write_text("1\t11\t5\n3\t10\t1\n")
    with pytest.raises(strads.DataError, match=r"test.tsv:2: user 3 has no training "
                                               r"rating \(cold start\)"):
        D.prepare(D.read_ratings(str(tr)), D.read_ratings(str(te)))
    skip = D.prepare(D.read_ratings(str(tr)), D.read_ratings(str(te)), cold_start="skip")
    assert skip.test_ratings.tolist() == [5.0] and skip.cold == 1
    keep = D.prepare(D.read_ratings(str(tr)), D.read_ratings(str(te)), cold_start="mean")
    assert keep.test_users.tolist() == [0, 2]  # user 3 -> the extra row m = 2
    res = mf.fit([1, 2, 2], [10, 10, 11], [4., 2., 3.], test=([1, 3], [11, 10], [5., 1.]),
                 cold_start="mean", bias="full", rank=1, iters=3, quiet=True)
    pred = mf.predict(res.model, [1, 3], [11, 10], unknown="mean")
    M = res.model
    assert pred[1] == pytest.approx(M["mean"] + M["item_bias"][0])
    e = np.array([5.0, 1.0]) - pred
    assert res.extra["test_rmse"] == pytest.approx(np.sqrt(e @ e / 2))
    with pytest.raises(strads.DataError, match="user 3 was not in the training data"):
        mf.predict(res.model, [3], [10])


def test_bad_arguments():
    u, i, r = small_problem()
    with pytest.raises(strads.DataError, match="workers"):
        mf.fit(u[:5], i[:5], r[:5], workers=10, quiet=True)
    with pytest.raises(strads.DataError, match="schedule"):
        mf.fit(u, i, r, schedule="sgd")
    with pytest.raises(strads.DataError, match="entry 1: rating is nan"):
        mf.fit([1, 2], [1, 2], [1.0, np.nan])
    with pytest.raises(strads.DataError, match="user id 1.5 is not an integer"):
        mf.fit([1, 1.5], [1, 2], [1.0, 2.0])


# -- command line --------------------------------------------------------------------------
def test_cli_outputs(tmp_path):
    p = run_cli(["strads.apps.mf", "--n-users", "400", "--n-items", "200", "--n-ratings",
                 "5000", "--rank", "4", "--iters", "3", "--workers", "2", "--quiet",
                 "--bias", "full", "--out", str(tmp_path)])
    assert p.returncode == 0, p.stderr
    s = json.loads((tmp_path / "summary.json").read_text())
    for key in ("rank", "lambda", "train_rmse", "test_rmse", "objective", "updates"):
        assert key in s
    assert s["rank"] == 4 and s["iterations"] == 3 and s["n_test"] > 0
    rows = list(csv.DictReader(open(tmp_path / "trace.csv")))
    assert rows and "test_rmse" in rows[0] and float(rows[-1]["test_rmse"]) > 0
    z = np.load(tmp_path / "model.npz")
    assert z["W"].shape == (s["n_users"], 4) and z["H"].shape == (s["n_items"], 4)
    assert z["user_ids"].shape == (s["n_users"],)
    assert mf.predict(z, z["user_ids"][:3], z["item_ids"][:3]).shape == (3,)


def test_cli_bad_input_one_line(tmp_path):
    f = tmp_path / "bad.csv"
    f.write_text("user,item,rating\n1,2,3\n1,2,abc\n")
    p = run_cli(["strads.apps.mf", "--data", str(f), "--quiet"])
    assert p.returncode == 2
    assert p.stderr.strip() == (f"python -m strads.apps.mf: error: {f}:3: rating 'abc' is "
                                "not a number")
    p = run_cli(["strads.apps.mf", "--rank", "0"])
    assert p.returncode == 2 and "--rank" in p.stderr


@pytest.mark.parametrize("env", [{}, {"MPIR_CVAR_CH4_CMA_ENABLE": "0"},
                                 faults.env("no_doorbells")],
                         ids=["default", "no-single-copy", "no-doorbells"])
def test_cli_under_mpiexec_matches_in_process(tmp_path, env):
    # columns of 160 kB: large messages (rendezvous), which without MPICH's single-copy
    # transfers need both sides' MPI calls while they move
    args = ["strads.apps.mf", "--n-users", "20000", "--n-items", "5000", "--n-ratings",
            "100000", "--iters", "3", "--quiet"]
    p = run_cli(args + ["--out", str(tmp_path / "mpi")], np=3, env=env, timeout=120)
    assert p.returncode == 0, p.stderr
    q = run_cli(args + ["--workers", "2", "--out", str(tmp_path / "one")])
    assert q.returncode == 0, q.stderr
    a, b = (np.load(tmp_path / d / "model.npz") for d in ("mpi", "one"))
    np.testing.assert_allclose(a["W"], b["W"], rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(a["H"], b["H"], rtol=1e-12, atol=1e-15)
    s = json.loads((tmp_path / "mpi" / "summary.json").read_text())
    assert s["ranks"] == 3 and s["workers"] == 2


@pytest.mark.parametrize("schedule", ["ccd", "als"])
def test_lambda_zero_rank_deficient_rows_stay_finite(schedule):
    # users with one rating and rank 3: their least-squares problems are singular
    u, i, r = np.array([0, 1, 1, 2, 2, 2]), np.array([0, 0, 1, 0, 1, 2]), \
        np.array([1.0, 2.0, 3.0, 4.0, 5.0, 1.0])
    res = mf.fit(u, i, r, rank=3, lam=0.0, schedule=schedule, iters=5, tol=0, quiet=True)
    assert np.isfinite(res.model["W"]).all() and np.isfinite(res.model["H"]).all()
    assert np.isfinite(res.objective)


def test_block_of_columns_is_a_group_of_single_column_rounds():
    t = mf.make_problem(400, 200, 5000, seed=8)
    p = D.prepare(t)
    # no bias columns: 8 columns a side, two blocks of 4
    runs = [strads.run(mf.make_setup(lambda: p, rank=8, iters=3, bias="mean", **kw),
                       mf.MFUpdate, workers=3, quiet=True, max_rounds=10 ** 6)
            for kw in (dict(block=4), dict(group=4))]
    assert runs[0].rounds * 4 == runs[1].rounds
    for key in ("W", "H"):
        np.testing.assert_allclose(runs[0].model[key], runs[1].model[key], rtol=1e-9,
                                   atol=1e-12)


def test_svd_start_scale_balances_the_ratings_energy():
    """The svd start's rows of H have norm (rss / rank)^(1/4), rss the training ratings'
    squares less the mean, rounded to a quarter power of 2 (1 where rss is 0 or not
    finite); the default is that scale, and its first iteration gets further than unit
    rows'."""
    assert mf.svd_scale(64.0, 4) == 2.0  # (64 / 4)^(1/4)
    assert mf.svd_scale(64.0 * 1.3, 4) == 2.0  # within an eighth power of 2: rounded
    assert mf.svd_scale(128.0, 4) == 2.0 ** 1.25
    assert mf.svd_scale(0.0, 4) == 1.0 and mf.svd_scale(np.inf, 4) == 1.0
    t = mf.make_problem(300, 100, 5000)
    e = t.ratings - t.ratings.mean()
    kw = dict(rank=4, iters=2, tol=0, quiet=True, early_stop=None)
    default = mf.fit(t.users, t.items, t.ratings, **kw)
    scale = mf.svd_scale(float(np.sum(e * e)), 4)
    assert scale != 1.0  # (a scale of its own, not the fallback)
    explicit = mf.fit(t.users, t.items, t.ratings, init_scale=scale, **kw)
    np.testing.assert_array_equal(default.model["W"], explicit.model["W"])
    unit = mf.fit(t.users, t.items, t.ratings, init_scale=1.0, **kw)
    assert default.extra["objective_per_iter"][0] < unit.extra["objective_per_iter"][0]


@pytest.mark.parametrize("kw,workers", [
    (dict(block=4, bias="full"), 1), (dict(block=4, bias="full"), 3), (dict(block=8), 2),
    (dict(block=3, inner=2, bias="full"), 1), (dict(block=8, early_stop=1), 3)])
def test_block_kernel_equals_its_columns_one_after_the_other(monkeypatch, kw, workers):
    """ccd_block (a block's columns tile by tile of rows) makes the numbers of ccd_step
    called for each column in turn, bit for bit, with several tiles too."""
    from strads.apps.mf import kernels as K
    t = mf.make_problem(700, 300, 9000, seed=3)
    p = D.prepare(t, test_fraction=0.1, seed=0)

    def columns(indptr, idx, res, own, cols, other, reg, tps, delta, tile):
        rss, n = None, delta.shape[1]
        scratch = np.empty(max(int(np.diff(indptr).max()), 1))
        for c, t in enumerate(cols):
            if c == 0:  # the first folds in the other side's pending changes
                G, fold = np.column_stack([other[t, :n], delta.T]), tps
            else:
                G, fold = other[t, :n][:, None], np.zeros(0, np.int64)
            rss = K.ccd_step(indptr, idx, res, own, int(t), np.ascontiguousarray(G), reg,
                             fold, scratch)
        return rss

    def fit():
        return strads.run(mf.make_setup(lambda: p, rank=8, iters=4, **kw), mf.MFUpdate,
                          workers=workers, quiet=True, tol=0)

    monkeypatch.setattr(K, "BLOCK_TILE", 64)  # several tiles per side
    fused = fit()
    monkeypatch.setattr(K, "ccd_block", columns)
    ref = fit()
    for key in ref.model:
        np.testing.assert_array_equal(fused.model[key], ref.model[key])
    assert fused.extra["objective_per_iter"] == ref.extra["objective_per_iter"]
    assert fused.extra["test_rmse"] == ref.extra["test_rmse"]


@pytest.mark.parametrize("kw,workers", [
    (dict(), 1), (dict(), 3), (dict(inner=2, bias="mean", staleness=1), 2),
    (dict(group=3, bias="none"), 2), (dict(rank=5, block=2, inner=2), 2),
    (dict(schedule="als"), 2), (dict(early_stop=2), 3)])
def test_tiled_layout_changes_no_bit(monkeypatch, tmp_path, kw, workers):
    """Tile by tile of the other side's rows (kernels.ccd_tiles, the steps left to the
    next pass) the numbers are those of the rows' layout, bit for bit: with pending
    columns, inner passes, groups, blocks after tiled bias rounds (they put the rows
    back), ALS, early stopping;
    and a run stopped with checkpoints and resumed is the uninterrupted one."""
    from strads.apps.mf import kernels as K
    p = D.prepare(mf.make_problem(400, 200, 30000, seed=5), test_fraction=0.1, seed=2)
    kw = {"rank": 4, **kw}
    staleness = kw.pop("staleness", 0)
    calls = []
    real = K.ccd_tiles

    def counted(*a):
        calls.extend([1] if a[3].shape[1] > 1 else [])  # (not the warm-up's)
        return real(*a)

    monkeypatch.setattr(K, "ccd_tiles", counted)

    def fit(tile, **run):
        monkeypatch.setattr(K, "TILE_ROWS", tile)
        return strads.run(mf.make_setup(lambda: p, iters=3, **kw), mf.MFUpdate,
                          workers=workers, staleness=staleness, quiet=True, tol=0,
                          log_interval=0, **run)  # a trace row every round

    rows = fit(10 ** 9)
    assert not calls
    for tile in (37, 300):  # several tiles a side; tiles on side H only (W: 200 items)
        tiled = fit(tile)
        assert calls or kw.get("schedule") == "als"  # (ALS keeps the rows)
        for key in rows.model:
            np.testing.assert_array_equal(tiled.model[key], rows.model[key], err_msg=key)
        assert tiled.extra["objective_per_iter"] == rows.extra["objective_per_iter"]
        assert tiled.extra["test_rmse"] == rows.extra["test_rmse"]
        assert [r["objective"] for r in tiled.trace] == [r["objective"] for r in rows.trace]
    if kw.get("schedule") == "als":
        return
    out = str(tmp_path / "part")
    part = fit(37, out=out, max_rounds=9, checkpoint_every=1e-9)
    assert part.stop_reason == "max_rounds"
    resumed = fit(37, out=out, resume=True)
    assert resumed.rounds == rows.rounds
    for key in rows.model:
        np.testing.assert_array_equal(resumed.model[key], rows.model[key], err_msg=key)


@pytest.mark.parametrize("rank,group,block,inner,bias", [
    (8, 1, 1, 1, False), (8, 3, 1, 1, True), (8, 3, 2, 2, False), (7, 4, 2, 1, True),
    (2, 4, 1, 1, False), (5, 10, 3, 3, True), (8, 1, 4, 1, True), (8, 1, 8, 1, True)])
def test_ccd_sweep_covers_every_column_and_keeps_partners_apart(rank, group, block, inner,
                                                               bias):
    from strads.apps.mf.schedule import CCD
    lay = mf.Layout(rank, 1.0, bias)
    seq = CCD(lay, None, inner, group, block).sweep
    for side in ("W", "H"):
        done = np.concatenate([c for s, c in seq if s == side])
        expect = np.repeat(np.arange(rank), inner)
        if bias:
            expect = np.append(expect, lay.user_bias if side == "W" else lay.item_bias)
        assert sorted(done) == sorted(expect)
    if bias:  # with blocks (one pass each), a bias column leads its side's first block
        lead = block > 1 and inner == 1
        for side, b in (("W", lay.user_bias), ("H", lay.item_bias)):
            first = next(c for s, c in seq if s == side)
            assert list(first) == ([b, *range(min(block, rank))] if lead else [b])
    # H's column t is computed at least `group` rounds after W's column t (of the same
    # pass)
    for pos, (side, cols) in enumerate(seq):
        for t in cols:
            if side == "H" and t < rank:
                w = max(q for q in range(pos) if seq[q][0] == "W" and t in seq[q][1])
                assert pos - w >= group


# -- lambda weighting and early stopping ---------------------------------------------------
def test_cli_lambda_weighting(tmp_path):
    """--lambda-weighting count is the default (--weighted-lambda a no-op that says so);
    none is fit(weighted=False)."""
    base = ["strads.apps.mf", "--n-users", "400", "--n-items", "200", "--n-ratings", "5000",
            "--rank", "4", "--iters", "3", "--quiet", "--lambda", "0.05"]
    t = mf.make_problem(400, 200, 5000)
    models = {}
    for name, extra in (("default", []), ("old", ["--weighted-lambda"]),
                        ("count", ["--lambda-weighting", "count"]),
                        ("none", ["--lambda-weighting", "none"])):
        p = run_cli(base + extra + ["--out", str(tmp_path / name)])
        assert p.returncode == 0, p.stderr
        models[name] = np.load(tmp_path / name / "model.npz")
    for name in ("old", "count"):
        np.testing.assert_array_equal(models[name]["W"], models["default"]["W"])
    for name, weighted in (("default", True), ("none", False)):
        ref = mf.fit(t.users, t.items, t.ratings, rank=4, lam=0.05, weighted=weighted,
                     iters=3, test_fraction=0.1, quiet=True)
        np.testing.assert_allclose(models[name]["W"], ref.model["W"], rtol=1e-12,
                                   atol=1e-14)
    assert not np.allclose(models["none"]["W"], models["default"]["W"])
    p = run_cli(base + ["--weighted-lambda", "--lambda-weighting", "none"])
    assert p.returncode == 2
    assert p.stderr.strip().endswith("--weighted-lambda contradicts --lambda-weighting none")
    h = run_cli(["strads.apps.mf", "--help"]).stdout
    assert "--lambda-weighting count is the default" in " ".join(h.split())


# the built-in problem's CLI size and an over-fitting lambda: the held-out RMSE is best
# after 2 or 3 iterations, then rises
ES_CLI = ["strads.apps.mf", "--n-users", "400", "--n-items", "200", "--n-ratings", "8000",
          "--lambda", "0.005", "--iters", "12", "--tol", "0", "--quiet", "--init-scale", "1",
          "--validation-fraction", "0"]
# early stopping on the held-out set itself (validation 0); off unless a test asks; both
# start from unit rows of H (from the default scale ALS's held-out RMSE falls for 12
# iterations)
ES_KW = dict(rank=8, lam=0.005, iters=12, tol=0, test_fraction=0.1, quiet=True,
             validation=0.0, early_stop=None, init_scale=1.0)


@pytest.mark.parametrize("schedule,workers,staleness", [("ccd", 1, 0), ("ccd", 3, 1),
                                                        ("als", 2, 0)])
def test_early_stop_returns_the_best_iteration(schedule, workers, staleness):
    t = mf.make_problem(400, 200, 8000)
    kw = dict(ES_KW, schedule=schedule, workers=workers)
    full = mf.fit(t.users, t.items, t.ratings, **kw)
    per_iter = np.array(full.extra["test_rmse_per_iter"])
    best = int(np.argmin(per_iter)) + 1  # the first of equal minima
    assert best + 2 < 12
    res = mf.fit(t.users, t.items, t.ratings, staleness=staleness, **dict(kw, early_stop=2))
    x = res.extra
    assert res.stop_reason == "tol" and x["early_stopped"] is True
    assert x["best_iteration"] == best and x["iterations"] == best + 2 and x["early_stop"] == 2
    assert x["test_rmse_per_iter"] == full.extra["test_rmse_per_iter"][:best + 2]
    # the model is the best iteration's, bit for bit, and so are its figures
    ref = mf.fit(t.users, t.items, t.ratings, **dict(kw, iters=best))
    for key in ("W", "H", "user_bias", "item_bias"):
        np.testing.assert_array_equal(res.model[key], ref.model[key], err_msg=key)
    # (the training error from the residuals now plus the change since the best: to
    # rounding)
    assert res.objective == pytest.approx(ref.objective, rel=1e-12)
    assert x["test_rmse"] == ref.extra["test_rmse"] == per_iter[best - 1]
    assert x["train_rmse"] == pytest.approx(ref.extra["train_rmse"], rel=1e-12)
    assert res.trace[-1]["test_rmse"] == x["test_rmse"]
    # not triggered: the run goes on to --iters, and still returns the best model
    slow = mf.fit(t.users, t.items, t.ratings, **dict(kw, early_stop=100))
    assert slow.extra["early_stopped"] is False and slow.extra["iterations"] == 12
    assert slow.extra["best_iteration"] == best and slow.stop_reason == "schedule_done"
    np.testing.assert_array_equal(slow.model["W"], ref.model["W"])


def test_early_stop_needs_a_held_out_set(tmp_path):
    t = mf.make_problem(400, 200, 8000)
    with pytest.raises(strads.DataError, match="early_stop 2 with validation 0 stops on "
                       "the held-out set"):
        mf.fit(t.users, t.items, t.ratings, early_stop=2, validation=0, quiet=True)
    for bad in (-1, 1.5, True):
        with pytest.raises(strads.DataError, match=r"early_stop must be an integer >= 0 "
                           r"\(iterations; 0 or None: off\)"):
            mf.fit(t.users, t.items, t.ratings, early_stop=bad, quiet=True)
    with pytest.raises(strads.DataError, match=r"validation fraction must be in \[0, 1\)"):
        mf.fit(t.users, t.items, t.ratings, validation=1.0, quiet=True)
    f = tmp_path / "r.tsv"
    f.write_text("".join(f"{a}\t{b}\t{c}\n" for a, b, c in
                         zip(t.users[:500], t.items[:500], t.ratings[:500])))
    p = run_cli(["strads.apps.mf", "--data", str(f), "--early-stop", "2", "--quiet",
                 "--validation-fraction", "0"])
    assert p.returncode == 2
    assert p.stderr.strip() == ("python -m strads.apps.mf: error: --early-stop 2 with "
                                "--validation-fraction 0 stops on the held-out set: give "
                                "--test-fraction or --test-data")
    p = run_cli(ES_CLI + ["--early-stop", "2", "--test-fraction", "0"])
    assert p.returncode == 2 and len(p.stderr.strip().splitlines()) == 1
    p = run_cli(["strads.apps.mf", "--early-stop", "-1"])
    assert p.returncode == 2 and "--early-stop" in p.stderr
    p = run_cli(["strads.apps.mf", "--validation-fraction", "1"])
    assert p.returncode == 2 and "--validation-fraction must be in [0, 1), got 1" in p.stderr


def test_early_stop_cli_under_mpiexec_and_resumed_equals_in_process(tmp_path):
    args = ES_CLI + ["--early-stop", "2"]
    p = run_cli(args + ["--workers", "2", "--out", str(tmp_path / "one")])
    assert p.returncode == 0, p.stderr
    p = run_cli(args + ["--out", str(tmp_path / "mpi")], np=3, timeout=120)
    assert p.returncode == 0, p.stderr
    # stopped with checkpoints (legs of more rounds, each resumed, until one after the
    # first iteration end, 16 rounds, holds a best copy: a loaded machine may finish a
    # checkpoint late), then resumed to the end
    part = tmp_path / "part"
    for k, rounds in enumerate((40, 44, 48, 52, 56, 60)):
        p = run_cli(args + ["--workers", "2", "--out", str(part), "--max-rounds",
                            str(rounds), "--checkpoint-every", "0.001"]
                    + (["--resume"] if k else []))
        assert p.returncode == 0, p.stderr
        if json.loads((part / "checkpoint" / "manifest.json").read_text())["round"] > 16:
            break
    assert json.loads((part / "checkpoint" / "manifest.json").read_text())["round"] > 16
    p = run_cli(args + ["--workers", "2", "--out", str(part), "--resume"])
    assert p.returncode == 0, p.stderr
    s = {d: json.loads((tmp_path / d / "summary.json").read_text())
         for d in ("one", "mpi", "part")}
    assert s["one"]["early_stopped"] is True and s["one"]["stop_reason"] == "tol"
    assert s["one"]["iterations"] == s["one"]["best_iteration"] + 2
    for d in ("mpi", "part"):
        for key in ("best_iteration", "iterations", "early_stopped", "test_rmse",
                    "train_rmse", "objective", "test_rmse_per_iter", "rounds"):
            assert s[d][key] == s["one"][key], (d, key)
    a = np.load(tmp_path / "one" / "model.npz")
    for d in ("mpi", "part"):
        b = np.load(tmp_path / d / "model.npz")
        for key in a.files:
            np.testing.assert_array_equal(b[key], a[key], err_msg=(d, key))
    # and the built-in problem's model equals fit()'s at its best iteration
    t = mf.make_problem(400, 200, 8000)
    ref = mf.fit(t.users, t.items, t.ratings, **dict(ES_KW, workers=2,
                                                     iters=s["one"]["best_iteration"]))
    np.testing.assert_allclose(a["W"], ref.model["W"], rtol=1e-12, atol=1e-14)
    assert s["one"]["test_rmse"] == pytest.approx(ref.extra["test_rmse"], rel=1e-12)


# early stopping by default: a validation run, then a refit (ES_KW less validation=0)
VAL_KW = dict(rank=8, lam=0.005, iters=12, tol=0, test_fraction=0.1, quiet=True, init_scale=1.0)


def test_validation_split_is_a_share_of_the_training_ratings():
    t = mf.make_problem(400, 200, 8000)
    tr = mf.from_arrays(t.users, t.items, t.ratings, "ratings")
    p0 = mf.prepare(tr, test_fraction=0.1, seed=0)
    p1 = mf.prepare(tr, test_fraction=0.1, seed=0, validation=0.1)
    assert p1.shape == p0.shape
    key = lambda u, i, r: set(zip(u.tolist(), i.tolist(), r.tolist()))  # noqa: E731
    train0 = key(p0.users, p0.items, p0.ratings)
    train1 = key(p1.users, p1.items, p1.ratings)
    val = key(p1.test_users, p1.test_items, p1.test_ratings)
    test = key(p0.test_users, p0.test_items, p0.test_ratings)
    # the validation ratings are training ratings, none of the test set, the rest train
    assert val and not val & train1 and not val & test and val | train1 == train0
    assert 0.08 < len(val) / len(train0) < 0.12
    # every validation user and item keeps a training rating
    assert set(p1.test_users.tolist()) <= set(p1.users.tolist())
    assert set(p1.test_items.tolist()) <= set(p1.items.tolist())
    # chosen independently of the test split: not the test split of another fraction
    p2 = mf.prepare(tr, test_fraction=0.2, seed=0)
    assert len(val & key(p2.test_users, p2.test_items, p2.test_ratings)) < 0.3 * len(val)


@pytest.mark.parametrize("workers", [1, 3])
def test_early_stopping_by_default_is_a_validation_run_then_a_refit(workers):
    t = mf.make_problem(400, 200, 8000)
    res = mf.fit(t.users, t.items, t.ratings, workers=workers, **VAL_KW)  # the defaults
    x = res.extra
    # the first run by hand: the validation split's RMSE at every iteration end
    p1 = mf.prepare(mf.from_arrays(t.users, t.items, t.ratings, "ratings"),
                    test_fraction=0.1, seed=0, validation=mf.VALIDATION)
    setup = mf.make_setup(lambda: p1, rank=8, lam=0.005, iters=12, early_stop=100,
                          init_scale=1.0)
    val = strads.run(setup, mf.MFUpdate, workers=workers, tol=0, quiet=True, app="mf")
    per_iter = np.array(val.extra["test_rmse_per_iter"])
    best = int(np.argmin(per_iter)) + 1
    assert best + mf.EARLY_STOP < 12  # the problem over-fits: early stopping stops
    assert x["best_iteration"] == best and x["early_stopped"] is True
    assert x["validation_iterations"] == best + mf.EARLY_STOP
    assert x["validation_rmse"] == per_iter[best - 1]
    assert x["validation_ratings"] == p1.test_ratings.shape[0]
    assert x["validation_fraction"] == mf.VALIDATION and "validation_wall_s" in x
    # the model: all the training ratings, best iterations, bit for bit
    ref = mf.fit(t.users, t.items, t.ratings, workers=workers,
                 **dict(VAL_KW, iters=best, early_stop=None))
    assert x["iterations"] == best and res.rounds == ref.rounds
    for key in ("W", "H", "user_bias", "item_bias"):
        np.testing.assert_array_equal(res.model[key], ref.model[key], err_msg=key)
    assert x["test_rmse"] == ref.extra["test_rmse"] and x["n_train"] == ref.extra["n_train"]
    # and it guards against the over-fitting minimiser on the test set
    plain = mf.fit(t.users, t.items, t.ratings, workers=workers,
                   **dict(VAL_KW, early_stop=None))
    assert x["test_rmse"] < plain.extra["test_rmse"]


def test_early_stopping_with_no_rating_to_hold_out_runs_the_iterations():
    # every user has one rating: none can be held out for validation
    u, i = np.arange(30), np.arange(30) % 7
    r = 1.0 + (np.arange(30) % 5)
    res = mf.fit(u, i, r, rank=2, iters=4, tol=0, quiet=True)
    x = res.extra
    assert x["validation_ratings"] == 0 and x["best_iteration"] is None
    assert x["early_stopped"] is False and x["iterations"] == 4
    ref = mf.fit(u, i, r, rank=2, iters=4, tol=0, quiet=True, early_stop=None)
    np.testing.assert_array_equal(res.model["W"], ref.model["W"])


def test_early_stopping_cli_under_mpiexec_and_resumed_in_each_run(tmp_path):
    assert ES_CLI[-2:] == ["--validation-fraction", "0"]
    args = ES_CLI[:-2]  # the default validation fraction
    p = run_cli(args + ["--workers", "2", "--out", str(tmp_path / "one")])
    assert p.returncode == 0, p.stderr
    p = run_cli(args + ["--out", str(tmp_path / "mpi")], np=3, timeout=120)
    assert p.returncode == 0, p.stderr
    one = json.loads((tmp_path / "one" / "summary.json").read_text())
    first = json.loads((tmp_path / "one" / "validation" / "summary.json").read_text())
    assert first["stop_reason"] == "tol" and first["early_stopped"] is True
    assert one["best_iteration"] == first["best_iteration"] == one["iterations"]
    assert one["validation_rmse"] == first["test_rmse"]
    # legs: the first run stopped by --max-rounds (its result, no second run) ...
    part = tmp_path / "part"
    # a checkpoint due at every round boundary: the second run's 5 rounds can take
    # less than a millisecond
    leg = args + ["--workers", "2", "--out", str(part), "--checkpoint-every", "1e-9"]
    p = run_cli(leg + ["--max-rounds", "9"])
    assert p.returncode == 0, p.stderr
    assert "validation run stopped (max_rounds)" in p.stderr and "--resume" in p.stderr
    assert json.loads(p.stdout)["validation_run"] is True
    assert not (part / "summary.json").exists()
    assert json.loads((part / "validation" / "summary.json").read_text())["stop_reason"] \
        == "max_rounds"
    # ... resumed to its end, then the second run stopped: --max-rounds counts both ...
    p = run_cli(leg + ["--resume", "--max-rounds", str(first["rounds"] + 5)])
    assert p.returncode == 0, p.stderr
    s = json.loads((part / "summary.json").read_text())
    assert s["stop_reason"] == "max_rounds" and s["rounds"] == 5
    assert (part / "checkpoint").is_dir()
    # ... and resumed to the end: the first run is not run again
    p = run_cli(args + ["--workers", "2", "--out", str(part), "--resume"])
    assert p.returncode == 0, p.stderr
    for d in ("mpi", "part"):
        s = json.loads((tmp_path / d / "summary.json").read_text())
        for key in ("best_iteration", "iterations", "early_stopped", "test_rmse",
                    "train_rmse", "objective", "rounds", "validation_rmse",
                    "validation_iterations", "validation_ratings"):
            assert s[key] == one[key], (d, key)
        a, b = np.load(tmp_path / "one" / "model.npz"), np.load(tmp_path / d / "model.npz")
        for key in a.files:
            np.testing.assert_array_equal(b[key], a[key], err_msg=(d, key))
    # nothing to resume: refused in one line, as a single run's
    p = run_cli(args + ["--out", str(tmp_path / "none"), "--resume"])
    assert p.returncode == 2 and p.stderr.strip().endswith("no checkpoint to resume from")
    # the parallel loader holds out the same validation ratings as fit()
    t = mf.make_problem(400, 200, 8000)
    ref = mf.fit(t.users, t.items, t.ratings, workers=2, **VAL_KW)
    assert ref.extra["best_iteration"] == one["best_iteration"]
    assert ref.extra["validation_ratings"] == one["validation_ratings"]
    assert ref.extra["validation_rmse"] == pytest.approx(one["validation_rmse"], rel=1e-12)
    np.testing.assert_allclose(np.load(tmp_path / "one" / "model.npz")["W"], ref.model["W"],
                               rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize("extra", [["--early-stop", "0"], ["--early-stop", "2"],
                                   ["--early-stop", "2", "--validation-fraction", "0"]],
                         ids=["one-run", "validation-run", "on-held-out"])
def test_a_finished_run_goes_on_with_more_iters_to_the_uninterrupted_run(tmp_path, extra):
    """--iters may grow on --resume (as LDA's --sweeps): a finished run of 1 iteration
    (early stopping's first run ended by its schedule, not by early stopping, and its
    refit of 1 iteration: both go on) taken on to 12 ends where an uninterrupted run of
    12 does, bit for bit; fewer is refused."""
    args = ES_CLI[:-2] + ["--workers", "2", "--test-fraction", "0.1"] + extra
    p = run_cli(args + ["--out", str(tmp_path / "one")])
    assert p.returncode == 0, p.stderr
    part = [*args, "--out", str(tmp_path / "part")]
    p = run_cli(part + ["--iters", "1", "--checkpoint-every", "1e-9"])
    assert p.returncode == 0, p.stderr
    assert json.loads(p.stdout)["stop_reason"] == "schedule_done"
    p = run_cli(part + ["--iters", "12", "--resume"])
    assert p.returncode == 0, p.stderr
    one, res = (json.loads((tmp_path / d / "summary.json").read_text())
                for d in ("one", "part"))
    assert one["iterations"] > 1 and one.get("validation_iterations", 2) > 1
    for key in ("iterations", "rounds", "objective", "train_rmse", "test_rmse",
                "test_rmse_per_iter", "best_iteration", "early_stopped",
                "validation_iterations", "validation_rmse"):
        assert res.get(key) == one.get(key), key
    a, b = (np.load(tmp_path / d / "model.npz") for d in ("one", "part"))
    for key in a.files:
        np.testing.assert_array_equal(b[key], a[key], err_msg=key)
    p = run_cli(part + ["--iters", "2", "--resume"])
    assert p.returncode == 2 and p.stderr.count("\n") == 1
    assert re.search(r"2 iterations \(--iters\), fewer than .*: a resumed run may ask for "
                     "more$", p.stderr.strip())


# -- the estimator's inputs ------------------------------------------------------------------
def test_estimator_cross_validation_splits_the_ratings():
    """GridSearchCV on an (n_ratings, 3) array of (user, item, rating) rows splits the
    ratings: its fold scores are a by-hand split's, fit on the fold's training ratings and
    scored on its test ratings (a test user or item without training ratings: mean and
    known biases)."""
    from sklearn.base import clone
    from sklearn.model_selection import GridSearchCV, KFold
    t = mf.make_problem(200, 100, 3000)
    X = np.c_[t.users, t.items, t.ratings]
    est = strads.MatrixFactorization(n_components=3, max_iter=4, early_stopping=False,
                                     random_state=0)
    cv, alphas = KFold(3, shuffle=True, random_state=0), [0.02, 0.5]
    grid = GridSearchCV(est, {"alpha": alphas}, cv=cv, error_score="raise").fit(X)
    for k, alpha in enumerate(alphas):
        by_hand = []
        for tr, te in cv.split(X):
            m = clone(est).set_params(alpha=alpha).fit(
                (t.users[tr], t.items[tr], t.ratings[tr]))
            err = m.predict(t.users[te], t.items[te]) - t.ratings[te]
            by_hand.append(-np.sqrt(np.mean(err ** 2)))
        assert [grid.cv_results_[f"split{j}_test_score"][k] for j in range(3)] == by_hand
    assert grid.best_params_["alpha"] == alphas[int(np.argmax(grid.cv_results_[
        "mean_test_score"]))]
    ref = clone(est).set_params(**grid.best_params_).fit((t.users, t.items, t.ratings))
    np.testing.assert_array_equal(grid.best_estimator_.user_factors_, ref.user_factors_)


def test_estimator_score_refuses_a_sparse_matrix_whose_rows_a_split_renumbered():
    """A split of a users x items matrix's rows renumbers its users (a test fold's user
    k is another user's row k): score refuses any sparse matrix, in one line, and says
    what to pass instead."""
    import scipy.sparse as sp
    from sklearn.model_selection import KFold, cross_val_score
    u, i, r = small_problem()[:3]
    R = sp.csr_matrix((r, (u, i)))
    est = strads.MatrixFactorization(n_components=2, max_iter=3, early_stopping=False,
                                     random_state=0)
    with pytest.raises(TypeError, match=r"renumber.*\(users, items, ratings\).*\(n_ratings, "
                                        r"3\) array"):
        cross_val_score(est, R, cv=KFold(2), error_score="raise")
    est.fit(R)  # fit still takes one
    with pytest.raises(TypeError, match="^score does not take a sparse matrix"):
        est.score(R)
    coo = R.tocoo()
    assert est.score((coo.row, coo.col, coo.data)) == est.score(np.c_[coo.row, coo.col,
                                                                       coo.data])


def test_estimator_takes_an_array_of_rating_rows():
    u, i, r = small_problem()[:3]
    kw = dict(n_components=2, max_iter=3, early_stopping=False, random_state=0)
    a = strads.MatrixFactorization(**kw).fit((u, i, r))
    b = strads.MatrixFactorization(**kw).fit(np.c_[u, i, r])
    c = strads.MatrixFactorization(**kw).fit(np.c_[u, i, r].tolist())  # floats, integral
    for m in (b, c):
        np.testing.assert_array_equal(m.user_factors_, a.user_factors_)
        np.testing.assert_array_equal(m.user_ids_, a.user_ids_)
    assert b.score(np.c_[u, i, r]) == a.score((u, i, r))
    for bad, match in ((np.c_[u + 0.5, i, r], "user id 0.5 is not an integer"),
                       (np.c_[u, i, r].astype(str), "user ids must be integers")):
        for call in (b.fit, b.score):
            with pytest.raises(ValueError, match=match) as e:
                call(bad)
            assert "\n" not in str(e.value)
    for bad in (np.ones((4, 4)), np.c_[u, i], "1 2 3"):
        with pytest.raises(TypeError, match=r"\(n_ratings, 3\) array"):
            b.fit(bad)


@pytest.mark.parametrize("users, items, what", [
    (["1", "2"], ["10", "30"], "user ids must be integers"),
    ([1, 2], ["10", "30"], "item ids must be integers"),
    ([1.5], [10], "user id 1.5 is not an integer"),
    ([1], [np.nan], "item.* ([Nn]a[Nn]|contains NaN)"),
    ([True], [10], "user ids must be integers")])
def test_predict_refuses_the_ids_fit_refuses(users, items, what):
    """An id fit would refuse is refused by predict too (one rule), not scored as an
    unseen id; an unseen integer id (as an integral float too) is the mean and the known
    biases."""
    u, i, r = np.array([1, 1, 2, 2, 3, 3]), np.array([10, 20, 10, 30, 20, 30]), \
        np.array([5., 1., 5., 1., 4., 2.])
    est = strads.MatrixFactorization(n_components=2, random_state=0).fit((u, i, r))
    res = mf.fit(u, i, r, rank=2, quiet=True)
    for call in (lambda: est.predict(users, items),
                 lambda: mf.predict(res.model, users, items, unknown="mean")):
        with pytest.raises(ValueError, match=what) as e:
            call()
        assert "\n" not in str(e.value)
    with pytest.raises(ValueError, match=what):
        est.fit((np.array(users * 6)[:6], np.array(items * 6)[:6], r))
    np.testing.assert_array_equal(est.predict([1, 2.0], [10, 30]), est.predict([1, 2], [10, 30]))
    assert est.predict([99], [20])[0] == est.global_mean_ + est.item_bias_[1]
