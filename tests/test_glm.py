"""What the Lasso and sparse logistic regression do alike, for both datafits: the command
line (its outputs, a data file, bad flags, --help), priority's filter on the workers
with parallel loading, and a resume with parallel loading; the datafit check."""
import json
import subprocess
import sys
import threading

import numpy as np
import pytest

import strads
from strads import transport
from strads.apps import glm, lasso, logreg
from strads.apps.lasso.data import make_problem as lasso_problem
from strads.apps.logreg.data import make_problem as logreg_problem

from conftest import ROOT, child_env, run_cli, world

APPS = {"lasso": (lasso, lasso_problem), "logreg": (logreg, logreg_problem)}


def read_parts(data, path, target=None, W=2, norms=False):
    """Every worker's ``data.read_part()``, each on a thread with the in-process
    collectives (as ``--workers W``): the parts, or the DataError the run ends with;
    ``norms``: the shard asks for the columns' norms (priority's filter)."""
    group = transport._Group(W)
    out = [None] * W
    desc = dict(data.shard(path, target), **({"norms": True} if norms else {}))

    def work(w):
        try:
            out[w] = data.read_part(transport._ThreadPeers(group, w, W), desc)
        except BaseException as e:  # noqa: BLE001 (as the engine: release the others)
            group.fail(e)
    threads = [threading.Thread(target=work, args=(w,)) for w in range(W)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    if group.error is not None:
        raise group.error
    return out


def svm_text(X, y):
    """LIBSVM text of (X, y), every value as repr() writes it (bit for bit)."""
    import scipy.sparse as sp

    X = sp.csr_matrix(X)
    lines = []
    for i in range(X.shape[0]):
        a, b = X.indptr[i], X.indptr[i + 1]
        feats = " ".join(f"{j + 1}:{float(v)!r}"
                         for j, v in zip(X.indices[a:b], X.data[a:b]))
        lines.append(f"{float(y[i])!r} {feats}".rstrip())
    return ("\n".join(lines) + "\n").encode()


def fit_cli(app, args, out, np_=None):
    """The CLI's model and summary, run in one process or under ``mpiexec -n np_``."""
    p = run_cli([f"strads.apps.{app}", *args, "--quiet", "--out", str(out)], np=np_,
                timeout=240)
    assert p.returncode == 0, p.stderr[-3000:]
    return np.load(out / "model.npz"), json.loads((out / "summary.json").read_text())


# -- the command line -------------------------------------------------------------------
@pytest.mark.parametrize("app, n, p, flags, rel", [
    ("lasso", 200, 500, [], 1e-9),
    ("logreg", 300, 800, ["--lambda-ratio", "0.05"], 1e-10)])
def test_cli_writes_outputs(tmp_path, app, n, p, flags, rel):
    mod, make_problem = APPS[app]
    out = tmp_path / "out"
    proc = run_cli([f"strads.apps.{app}", "--n-samples", str(n), "--n-features", str(p),
                    "--quiet", "--out", str(out), "--tol", "1e-8", *flags])
    assert proc.returncode == 0, proc.stderr
    summary = json.loads((out / "summary.json").read_text())
    assert summary == json.loads(proc.stdout.strip().splitlines()[-1])
    for key in ("app", "ranks", "workers", "staleness", "rounds", "updates", "wall_s",
                "objective", "lambda", "nnz_coef", "duality_gap", "traffic"):
        assert key in summary
    assert summary["app"] == app and summary["stop_reason"] == "tol"
    assert summary["duality_gap"] <= 1e-8 * summary["objective"]
    header = (out / "trace.csv").read_text().splitlines()[0].split(",")
    assert header == ["round", "wall_s", "updates", "objective", "duality_gap", "nnz_coef"]
    model = np.load(out / "model.npz")
    X, y, _ = make_problem(n, p)
    ratio = 0.05 if flags else 0.1
    assert float(model["lambda"]) == pytest.approx(ratio * mod.lambda_max(X, y), rel=1e-12)
    assert mod.objective(X, y, model["coef"], float(model["lambda"])) == \
        pytest.approx(summary["objective"], rel=rel)
    assert summary["nnz_coef"] == np.count_nonzero(model["coef"]) > 0
    if app == "logreg":
        np.testing.assert_array_equal(model["classes"], [-1, 1])


def test_cli_reads_data_file(tmp_path):
    """LIBSVM files: the Lasso's at scikit-learn's optimum; logistic regression's with
    0/1 labels at liblinear's, the labels kept in the model."""
    from sklearn.datasets import dump_svmlight_file
    from sklearn.linear_model import Lasso

    from test_logreg import liblinear

    X, y, _ = lasso_problem(100, 50, density=0.2, seed=6)
    dump_svmlight_file(X, y, str(tmp_path / "d.svm"))
    p = run_cli(["strads.apps.lasso", "--data", str(tmp_path / "d.svm"), "--quiet",
                 "--lambda", "0.01", "--tol", "1e-9"])
    assert p.returncode == 0, p.stderr
    coef = Lasso(alpha=0.01, fit_intercept=False, tol=1e-12, max_iter=100000).fit(X, y).coef_
    summary = json.loads(p.stdout.strip().splitlines()[-1])
    assert summary["objective"] == pytest.approx(lasso.objective(X, y, coef, 0.01), rel=1e-6)

    X, y, _ = logreg_problem(150, 60, density=0.2, seed=7)
    dump_svmlight_file(X, (y > 0).astype(int), str(tmp_path / "c.svm"))
    out = tmp_path / "out"
    p = run_cli(["strads.apps.logreg", "--data", str(tmp_path / "c.svm"), "--quiet",
                 "--lambda", "0.01", "--tol", "1e-9", "--workers", "2", "--out", str(out)])
    assert p.returncode == 0, p.stderr
    summary = json.loads(p.stdout.strip().splitlines()[-1])
    f_ref = logreg.objective(X, y, liblinear(X, y, 0.01), 0.01)
    assert abs(summary["objective"] - f_ref) <= 1e-6 * f_ref
    np.testing.assert_array_equal(np.load(out / "model.npz")["classes"], [0, 1])


@pytest.mark.parametrize("app, flags, message", [
    ("lasso", ["--block", "0"], "--block: a positive integer must be > 0"),
    ("lasso", ["--staleness", "-1"], "--staleness: a non-negative integer must be >= 0"),
    ("lasso", ["--rho", "2"], "--rho: must be between 0 and 1"),
    ("lasso", ["--schedule", "magic"], "invalid choice: 'magic'"),
    ("lasso", ["--data", "/nonexistent.svm"], "/nonexistent.svm: no such file"),
    ("logreg", ["--lambda", "0"], "--lambda: a positive number must be > 0"),
    ("logreg", ["--block", "0"], "--block: a positive integer must be > 0"),
    ("logreg", ["--rho", "2"], "--rho: must be between 0 and 1"),
    ("logreg", ["--schedule", "magic"], "invalid choice: 'magic'"),
    ("logreg", ["--target", "y.txt"], "--target needs --data"),
])
def test_cli_rejects_bad_flags_with_one_line(app, flags, message):
    p = run_cli([f"strads.apps.{app}", "--quiet", *flags])
    assert p.returncode == 2
    assert message in p.stderr
    assert "Traceback" not in p.stderr


@pytest.mark.parametrize("app", [lasso, logreg])
@pytest.mark.parametrize("kw, message", [
    (dict(schedule="magic"), "schedule must be one of priority, random, round-robin, "
     "working-set, got 'magic'"),
    (dict(block=0), "block must be an integer >= 1, got 0"),
    (dict(rho=1.5), "rho must be in [0, 1], got 1.5"),
    (dict(floor=-0.1), "floor must be in [0, 1], got -0.1"),
    (dict(lambda_ratio=0), "lambda_ratio must be a finite number > 0, got 0"),
    (dict(lambda_ratio=float("inf")), "lambda_ratio must be a finite number > 0, got inf"),
    (dict(full_every=0), "full_every must be an integer >= 1, got 0"),
    (dict(gram_budget=-1), "gram_budget must be a finite number > 0 (MiB), got -1"),
])
def test_make_setup_refuses_bad_parameters_by_name(app, kw, message):
    X, y = np.ones((4, 3)), np.array([0.0, 1.0, 0.0, 1.0])
    with pytest.raises(strads.DataError) as e:
        app.make_setup(lambda: (X, y), **kw)
    assert str(e.value) == message


@pytest.mark.parametrize("app, flags, texts", [
    ("lasso", ("--rho", "--n-samples", "--log-interval", "--gram-budget"), ()),
    ("logreg", ("--lambda", "--lambda-ratio", "--schedule", "--rho", "--target",
                "--n-samples", "--dense", "--log-interval", "--workers"),
     ("working-set", "lambda_max"))])
def test_cli_help_lists_every_flag(app, flags, texts):
    import importlib

    p = run_cli([f"strads.apps.{app}", "--help"])
    assert p.returncode == 0
    build_parser = importlib.import_module(f"strads.apps.{app}.__main__").build_parser
    every = [o for a in build_parser()._actions for o in a.option_strings]
    for flag in flags:
        assert flag in every
    for flag in every:
        assert flag in p.stdout
    for text in texts:
        assert text in p.stdout


# -- parallel loading ---------------------------------------------------------------------
@pytest.mark.long
@pytest.mark.timeout(300)
@pytest.mark.parametrize("app", ["lasso", "logreg"])
def test_priority_filter_runs_on_the_workers(tmp_path, app, monkeypatch):
    """With --data the scheduler holds no X: the workers sum the candidates' Gram matrix
    and choose the block and its groups. Every round's groups are mutually |correlation|
    <= rho, and some have several members; the model reaches scikit-learn's
    (liblinear's) objective, and is the same bits under MPI. (The filter's rounds:
    without the exact rounds on the workers' held pool.)"""
    monkeypatch.setattr(glm.schedule.Priority, "exact_pool", False)
    mod, make_problem = APPS[app]
    if app == "lasso":
        X, y, _ = make_problem(200, 300, density=0.05, corr=0.7, seed=3)
        ratio, kw = 0.05, {}
    else:
        X, y, _ = make_problem(200, 300, density=0.05, corr=0.7, n_informative=20, seed=3)
        ratio, kw = 0.1, dict(tol=1e-9)
    path = str(tmp_path / "d.svm")
    (tmp_path / "d.svm").write_bytes(svm_text(X, y))
    Xr, yr = mod.load(path)
    lam, rho = ratio * mod.lambda_max(Xr, yr), 0.2
    setup = mod.make_file_setup(path, lam=lam, schedule="priority", block=32, rho=rho, **kw)
    blocks = []

    def spying(ctx):
        sched, agg, shards = setup(ctx)
        inner = agg.aggregate

        def aggregate(round, task, partials):
            if "cols" in partials[0]:
                for key in ("cols", "groups"):
                    assert all(pt.get(key, b"").tobytes() ==
                               partials[0].get(key, b"").tobytes() for pt in partials)
                assert np.isin(partials[0]["cols"], task["cols"]).all()
                cols = partials[0]["cols"]
                blocks.append((cols, partials[0].get("groups",
                                                     np.arange(cols.shape[0] + 1))))
            return inner(round, task, partials)
        agg.aggregate = aggregate
        return sched, agg, shards
    res = strads.run(spying, mod.DATAFIT.Update, workers=3, tol=1e-9, max_rounds=100_000,
                     quiet=True)
    assert res.stop_reason == "tol" and len(blocks) > 5
    Xd = Xr.toarray()
    nrm = np.linalg.norm(Xd, axis=0)
    for cols, gptr in blocks:
        C = np.abs(Xd[:, cols].T @ Xd[:, cols]) / np.outer(nrm[cols], nrm[cols])
        group = np.repeat(np.arange(gptr.shape[0] - 1), np.diff(gptr))
        C[group[:, None] == group[None, :]] = 0  # (a group is solved together)
        assert C.max() <= rho + 1e-12
    assert any(np.diff(gptr).max() > 1 for _, gptr in blocks)
    if app == "lasso":
        from sklearn.linear_model import Lasso
        sk = Lasso(alpha=lam, fit_intercept=False, tol=1e-12, max_iter=100_000).fit(Xr, yr)
        f_ref = lasso.objective(Xr, yr, sk.coef_, lam)
    else:
        from test_logreg import liblinear
        f_ref = logreg.objective(Xr, yr, liblinear(Xr, yr, lam), lam)
    assert abs(mod.objective(Xr, yr, res.model["coef"], lam) - f_ref) <= 1e-6 * f_ref
    args = ["--data", path, "--schedule", "priority", "--block", "32", "--rho", str(rho),
            "--lambda", repr(lam), "--tol", "1e-9"]
    one, s1 = fit_cli(app, args + ["--workers", "2"], tmp_path / "one")
    mpi, s2 = fit_cli(app, args, tmp_path / "mpi", np_=3)
    assert one["coef"].tobytes() == mpi["coef"].tobytes() and s1["rounds"] == s2["rounds"]
    # (the command line's rounds: exact ones once the workers hold the pool's Gram)
    assert abs(mod.objective(Xr, yr, one["coef"], lam) - f_ref) <= 1e-6 * f_ref


@pytest.mark.parametrize("kind, kernels", [
    ("sparse", "K.tree_build, K.tree_set, K.priority_candidates, KG.group_steps"),
    ("dense", "K.tree_set, K.priority_candidates, KG.group_steps, KG.gram_gather")])
def test_priority_loads_its_kernels_before_the_loop(kind, kernels):
    """A fresh process's first block round used to load priority's scheduler kernels
    (numba's cache, ~0.1 s inside the timed loop): the schedule loads them when it is
    made, with the types the run then uses (no kernel gets a second signature)."""
    code = (
        "import json\n"
        "from strads.apps import lasso\n"
        "from strads.apps.glm import groups as KG, kernels as K, schedule as S\n"
        f"ks = ({kernels})\n"
        "first, schedule = [], S.Priority.schedule\n"
        "def spy(self, round):\n"
        "    first.append(first[0] if first else [len(k.signatures) for k in ks])\n"
        "    return schedule(self, round)\n"
        "S.Priority.schedule = spy\n"
        f"X, y = lasso.near_duplicates(200, 400, group=4, density=0.05, seed=0,\n"
        f"                             dense={kind == 'dense'})\n"
        "lasso.fit(X, y, lam=0.1 * lasso.lambda_max(X, y), schedule='priority', workers=2,\n"
        "          max_rounds=20, quiet=True)\n"
        "print(json.dumps([first[0], [len(k.signatures) for k in ks]]))\n")
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       timeout=300, env=child_env(), cwd=str(ROOT))
    assert p.returncode == 0, p.stderr
    ones = [1] * (kernels.count(",") + 1)
    assert json.loads(p.stdout.splitlines()[-1]) == [ones, ones]


def test_the_workers_gram_is_held_to_the_filters_budget(tmp_path):
    """The workers' filter sums its candidates' Gram matrix, which costs about the square
    of their non-zeros over the rows: on thick columns (density 0.3) many times the
    block's update at 320 candidates. The schedule holds it to the scheduler's filter's
    budget, priced before they are sent; where it cannot afford the block (and kept all
    it was asked for), the round is a plain Jacobi round (no Gram) of the whole block.
    The Lasso still reaches scikit-learn's optimum, the same bits under MPI."""
    from sklearn.linear_model import Lasso

    X, y, path = _sparse_file(tmp_path / "t.svm", 600, 1200, 0.3, 0.05, seed=1)
    lam = lasso.lambda_max(X, y) / 10
    setup = lasso.make_file_setup(path, lam=lam, schedule="priority", block=256)
    sent = []

    def spying(ctx):
        sched, agg, shards = setup(ctx)
        inner = agg.aggregate

        def aggregate(round, task, partials):
            if not task.get("full"):
                sent.append((task["cols"].shape[0], "select" in task))
            return inner(round, task, partials)
        agg.aggregate = aggregate
        return sched, agg, shards
    res = strads.run(spying, lasso.DATAFIT.Update, workers=3, tol=1e-10,
                     max_rounds=100_000, quiet=True)
    filtered = [m for m, select in sent if select]
    plain = [m for m, select in sent if not select]
    # priced before they are sent (320 at the first round unpriced), then halved
    assert res.stop_reason == "tol" and max(filtered) < 250 and \
        max(filtered[2:], default=0) <= 160
    assert plain and max(plain) == 256  # (the block; no Gram summed)
    sk = Lasso(alpha=lam, fit_intercept=False, tol=1e-12, max_iter=100_000).fit(X, y)
    f_ref = lasso.objective(X, y, sk.coef_, lam)
    assert lasso.objective(X, y, res.model["coef"], lam) <= f_ref * (1 + 1e-6)
    args = ["--data", path, "--schedule", "priority", "--lambda", repr(lam), "--tol", "1e-9"]
    one, s1 = fit_cli("lasso", args + ["--workers", "3"], tmp_path / "one")
    mpi, s2 = fit_cli("lasso", args, tmp_path / "mpi", np_=4)
    assert one["coef"].tobytes() == mpi["coef"].tobytes() and s1["rounds"] == s2["rounds"]


def test_the_sparse_filter_prices_its_steps_through_the_rows(monkeypatch):
    """The scheduler's sparse filter steps through its kept columns' rows, each step a
    dependent load (CHASE streamed multiply-adds): on thick columns (density 0.3) its
    in-kernel stop holds what it keeps (60-74 unpriced), its budget halves the block it
    may fill (its steps cost ~20 times the update's), and the Lasso still reaches
    scikit-learn's optimum."""
    import scipy.sparse as sp
    from sklearn.linear_model import Lasso

    from strads.apps.glm import groups as KG
    from strads.apps.glm.schedule import Priority
    rng = np.random.default_rng(2)
    X = sp.random(300, 900, density=0.3, format="csc", random_state=rng,
                  data_rvs=rng.standard_normal)
    y = X @ (rng.standard_normal(900) * (rng.random(900) < 0.05)) + rng.standard_normal(300)
    lam = lasso.lambda_max(X, y) / 10
    kept, block_sparse = [], KG.block_sparse

    def recording(*args):
        out = block_sparse(*args)
        kept.append(out[0])
        return out
    monkeypatch.setattr(KG, "block_sparse", recording)
    caps, afford = [], Priority._afford
    monkeypatch.setattr(Priority, "_afford", lambda self, *a: (
        afford(self, *a), caps.append(self.filter_cap)))
    res = lasso.fit(X, y, lam=lam, schedule="priority", tol=1e-10, max_rounds=100_000,
                    quiet=True)
    assert res.stop_reason == "tol" and kept and max(kept) <= 48
    assert 0 < caps[-1] < 256  # (and the plain rounds: test_lasso_priority)
    sk = Lasso(alpha=lam, fit_intercept=False, tol=1e-12, max_iter=100_000).fit(X, y)
    f_ref = lasso.objective(X, y, sk.coef_, lam)
    assert lasso.objective(X, y, res.model["coef"], lam) <= f_ref * (1 + 1e-6)


# -- priority on correlated problems ---------------------------------------------------
_FAMILY = dict(sparse=dict(n_samples=300, n_features=2400, density=0.02, n_informative=30),
               dense=dict(n_samples=150, n_features=400, n_informative=20))
# rounds to f*(1 + 1e-6), at most (measured: Lasso 15-68, logistic 75-670; without the
# groups neither got there within 20,000 rounds at noise 0.01)
_ROUNDS = {"lasso": 150, "logreg": 1500}


def _near_duplicates(app, kind, group, noise):
    X, y = lasso.near_duplicates(group=group, noise=noise, dense=kind == "dense",
                                 seed=group, **_FAMILY[kind])
    mod = APPS[app][0]
    if app == "logreg":
        y = np.sign(y)
    lam = 0.1 * mod.lambda_max(X, y)
    # f*: the working-set schedule at tol 1e-13 (its exact block solves do not zig-zag)
    ref = mod.fit(X, y, lam=lam, tol=1e-13, max_rounds=100_000, quiet=True, mpi=False)
    return X, y, lam, mod.objective(X, y, ref.model["coef"], lam)


def _rounds_to(res, target):
    hit = [row["round"] for row in res.trace if row["objective"] <= target]
    return hit[0] if hit else None


@pytest.mark.parametrize("app", ["lasso", "logreg"])
@pytest.mark.parametrize("kind", ["sparse", "dense"])
@pytest.mark.parametrize("group", [2, 4, 8])
@pytest.mark.parametrize("noise", [0.01, 0.1])
def test_priority_converges_on_near_duplicate_groups(app, kind, group, noise):
    """Groups of near-duplicate columns: coordinate steps zig-zag on them (and the filter
    used to keep one a round); priority's groups are solved exactly, so it reaches
    f*(1 + 1e-6) within a bounded number of rounds, in one process with 3 workers."""
    X, y, lam, f_star = _near_duplicates(app, kind, group, noise)
    mod = APPS[app][0]
    res = mod.fit(X, y, lam=lam, schedule="priority", workers=3, tol=1e-8,
                  max_rounds=_ROUNDS[app], quiet=True, log_interval=0)
    rounds = _rounds_to(res, f_star * (1 + 1e-6))
    assert rounds is not None and rounds <= _ROUNDS[app]
    assert res.extra["grouped_updates"] > 0


@pytest.mark.mpi(min_size=3)
@pytest.mark.parametrize("app", ["lasso", "logreg"])
def test_priority_groups_from_a_file_under_mpi(tmp_path, app):
    """The file path (the workers' filter) under mpiexec: bit for bit the run in one
    process with as many workers, with one scheduler rank, two (--schedulers 2) and
    none (leaderless); f*(1 + 1e-6) within the bounded rounds."""
    from mpi4py import MPI

    comm = MPI.COMM_WORLD
    rank, size = world()
    X, y, lam, f_star = _near_duplicates(app, "sparse", 4, 0.01)
    path = comm.bcast(str(tmp_path / "d.svm"))
    if rank == 0:
        (tmp_path / "d.svm").write_bytes(svm_text(X, y))
    comm.Barrier()
    mod = APPS[app][0]
    Xr, yr = mod.load(path)
    kw = dict(lam=lam, schedule="priority")
    run = dict(tol=1e-8, max_rounds=_ROUNDS[app], quiet=True, log_interval=0)
    splits = ({"schedulers": 2}, size - 2) if app == "lasso" else None  # (the Lasso's)
    for how, W in filter(None, (({}, size - 1), splits, ({"scheduler": "replicated"}, size))):
        res = strads.run(mod.make_file_setup(path, **kw), mod.DATAFIT.Update, **how, **run)
        if how.get("scheduler") != "replicated" and rank != 0:
            assert res is None
            continue
        one = strads.run(mod.make_file_setup(path, **kw), mod.DATAFIT.Update, workers=W,
                         mpi=False, **how, **run)
        assert res.model["coef"].tobytes() == one.model["coef"].tobytes(), how
        assert res.rounds == one.rounds
        f = mod.objective(Xr, yr, res.model["coef"], lam)
        rounds = _rounds_to(res, f_star * (1 + 1e-6))
        assert rounds is not None and rounds <= _ROUNDS[app] and f <= f_star * (1 + 1e-6)


@pytest.mark.parametrize("app", ["lasso", "logreg"])
def test_resume_from_a_checkpoint_with_parallel_loading(tmp_path, app):
    """The workers read their parts again on resume; the schedule built in begin() is
    restored; the model is the uninterrupted run's, bit for bit."""
    mod, make_problem = APPS[app]
    X0, Y0, _ = make_problem(60, 25, density=0.2, seed=11)
    labels = Y0 if app == "lasso" else np.where(Y0 > 0, 7, 3)
    path = str(tmp_path / "d.svm")
    (tmp_path / "d.svm").write_bytes(svm_text(X0, labels))
    kw = dict(gram_budget=0.001) if app == "lasso" else dict(tol=1e-10, ws_min=4)

    def go(out, **run_kw):
        setup = mod.make_file_setup(path, lambda_ratio=0.05, **kw)
        return strads.run(setup, mod.DATAFIT.Update, workers=2, tol=1e-10, quiet=True,
                          out=str(out), **run_kw)

    full = go(tmp_path / "full", max_rounds=100_000)
    # (20 rounds, not 6: a checkpoint still being written when a run stops at
    # max_rounds is lost, and 6 Lasso rounds can end within the first one's writing)
    part = go(tmp_path / "part", max_rounds=20, checkpoint_every=1e-3)
    assert part.stop_reason == "max_rounds"
    resumed = go(tmp_path / "part", max_rounds=100_000, resume=True)
    assert resumed.stop_reason == "tol" and resumed.rounds == full.rounds
    assert resumed.model["coef"].tobytes() == full.model["coef"].tobytes()
    if app == "logreg":
        np.testing.assert_array_equal(resumed.model["classes"], [3, 7])


# -- the datafit ----------------------------------------------------------------------
def test_a_datafit_missing_pieces_is_named_at_once():
    class Half(glm.Datafit):
        name = "half"
        Aggregate = object

    with pytest.raises(TypeError, match="datafit Half lacks Update, data, priority"):
        Half()
    with pytest.raises(TypeError, match="unexpected option 'gram_budgett'"):
        lasso.make_setup(lambda: None, gram_budgett=1)


@pytest.mark.parametrize("workers", [1, 2])
def test_dense_p_above_n_sends_factors_and_reaches_liblinear(workers, monkeypatch):
    """Dense X with p > n: a working set of more columns than twice a worker's rows is
    sent as the factor D^1/2 X_B, not its Gram; the optimum is liblinear's."""
    from strads.apps.logreg.update import LogRegUpdate
    from conftest import l1_logistic

    X, y, _ = logreg_problem(60, 400, corr=0.3, n_informative=20, dense=True, seed=4)
    lam = 0.02 * logreg.lambda_max(X, y)
    dense_factors = []
    factor = LogRegUpdate._factor

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

    monkeypatch.setattr(LogRegUpdate, "_factor", spy)
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
@pytest.mark.parametrize("case", ["dense factors", "kept Gram"])
def test_dense_logreg_under_mpi_is_the_in_process_run_bit_for_bit(case):
    """Dense factors: the form is decided by each worker's rows, so as many workers decide
    alike in one process and under mpiexec. A kept Gram: steps whose quadratic model
    matched build none, alike too."""
    from mpi4py import MPI

    if case == "dense factors":
        X, y, _ = logreg_problem(60, 400, corr=0.3, n_informative=20, dense=True, seed=4)
        lam, tol = 0.02 * logreg.lambda_max(X, y), 1e-10
    else:
        from test_logreg import kept_gram_problem
        (X, y, lam), tol = kept_gram_problem(), 1e-8
    res = logreg.fit(X, y, lam=lam, tol=tol, quiet=True)
    if MPI.COMM_WORLD.Get_rank() != 0:
        assert res is None
        return
    one = logreg.fit(X, y, lam=lam, workers=MPI.COMM_WORLD.Get_size() - 1, tol=tol,
                     quiet=True, mpi=False)
    assert res.rounds == one.rounds
    assert case == "dense factors" or res.extra["gram_kept"] > 0
    np.testing.assert_array_equal(res.model["coef"], one.model["coef"])


@pytest.mark.mpi(min_size=2)
@pytest.mark.parametrize("schedule", ["priority"])  # (its steps are the three schedules')
def test_logreg_jacobi_intercept_under_mpi_and_resumed_is_one_run(schedule, tmp_path):
    """The intercept eliminated from the Jacobi rounds (its column's weighted products
    with each block, summed over the workers): mpiexec, one process and a run resumed
    from a checkpoint give one model, bit for bit."""
    from mpi4py import MPI

    from test_logreg import _imbalanced_1_to_100

    X, y = _imbalanced_1_to_100()
    X = np.c_[X, np.full(y.shape[0], 100.0)]  # (the estimator's intercept column)
    kw = dict(lambda_ratio=0.05, schedule=schedule, block=4, tol=0.0, quiet=True,
              intercept_column=True, seed=3)
    res = logreg.fit(X, y, max_rounds=120, **kw)
    if MPI.COMM_WORLD.Get_rank() != 0:
        assert res is None
        return
    W = MPI.COMM_WORLD.Get_size() - 1
    one = logreg.fit(X, y, workers=W, max_rounds=120, mpi=False, **kw)
    assert res.rounds == one.rounds == 120 and one.model["coef"][-1] != 0.0
    np.testing.assert_array_equal(res.model["coef"], one.model["coef"])
    out = str(tmp_path / "run")
    logreg.fit(X, y, workers=W, max_rounds=60, out=out, checkpoint_every=1e-9, mpi=False, **kw)
    again = logreg.fit(X, y, workers=W, max_rounds=120, out=out, resume=True, mpi=False, **kw)
    np.testing.assert_array_equal(again.model["coef"], one.model["coef"])


def test_exact_rounds_keep_a_support_larger_than_the_block(tmp_path):
    """Once the workers hold the pool's Gram, a support larger than the block goes into
    every exact block whole (split between rounds, its correlated pieces would only move
    by block coordinate descent); the optimum is scikit-learn's."""
    from sklearn.linear_model import Lasso

    from strads.apps.glm.schedule import Priority

    X, y, path = _sparse_file(tmp_path / "s.svm", 200, 400, 0.25, 0.3, seed=3)
    lam = lasso.lambda_max(X, y) / 100
    blocks, exact = [], Priority._exact_block

    def spy(self, cols):
        support = self._pool[self.agg.w[self._pool] != 0]
        blocks.append((support[~self.busy[support]], cols))
        return exact(self, cols)

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(Priority, "_exact_block", spy)
        res = strads.run(lasso.make_file_setup(path, lam=lam, schedule="priority",
                                               block=32), lasso.DATAFIT.Update, workers=2,
                         tol=1e-10, max_rounds=100_000, quiet=True)
    big = [(s, c) for s, c in blocks if s.shape[0] > 32]
    assert big and all(np.isin(s, c).all() for s, c in big)
    sk = Lasso(alpha=lam, fit_intercept=False, tol=1e-12, max_iter=100_000).fit(X, y)
    assert res.stop_reason == "tol"
    assert lasso.objective(X, y, res.model["coef"], lam) <= \
        lasso.objective(X, y, sk.coef_, lam) * (1 + 1e-6)


def _sparse_file(path, n, p, density, share, seed):
    """A sparse regression problem (``share`` of the columns informative), written to
    ``path`` as LIBSVM: (X, y, path)."""
    import scipy.sparse as sp
    from sklearn.datasets import dump_svmlight_file

    rng = np.random.default_rng(seed)
    X = sp.random(n, p, density=density, format="csr", random_state=rng,
                  data_rvs=rng.standard_normal)
    y = X @ (rng.standard_normal(p) * (rng.random(p) < share)) + rng.standard_normal(n)
    dump_svmlight_file(X, y, str(path))
    return X, y, str(path)

