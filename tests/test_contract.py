"""What every app promises, checked for each (lasso, logreg, mf, lda, the ridge example):
one process with W workers equals ``mpiexec -n W+1`` bit for bit, from the command line
and from ``fit()`` (pytest --with-mpi); a bad line in a later worker's part is one line
naming file and line, exit 2, in one process and under MPI; the scheduler rank reads no
data. App-specific checks of the same runs ride along (``check``)."""
import gzip
import json
import sys
from pathlib import Path

import numpy as np
import pytest
import scipy.io
import scipy.sparse
from sklearn.datasets import dump_svmlight_file
from sklearn.linear_model import Lasso

from strads.apps import lasso, lda, logreg, mf
from strads.apps.lasso.data import make_problem

from conftest import ROOT, run_cli, world

sys.path.insert(0, str(ROOT / "examples"))
import ridge  # noqa: E402  the custom app, written only against the public API

# summary keys that describe the run, not the model: they may differ between the two
RUN_KEYS = {"ranks", "wall_s", "traffic", "tokens_per_s", "updates_per_s",
            "validation_wall_s"}


def cli(app, args, out=None, np_=None):
    """Run the app's CLI (in one process, or under ``mpiexec -n np_``); -> (model, summary).
    Its outputs are complete: model.npz, summary.json (also the first line on stdout),
    trace.csv (a row a logged round)."""
    p = run_cli([f"strads.apps.{app}", *map(str, args), "--quiet", "--out", str(out)],
                np=np_, timeout=300)
    assert p.returncode == 0, p.stderr[-3000:]
    with np.load(out / "model.npz") as z:
        model = {k: z[k] for k in z.files}
    summary = json.loads((out / "summary.json").read_text())
    printed = json.loads(next(ln for ln in p.stdout.splitlines() if ln.startswith("{")))
    assert printed.keys() == summary.keys() and all(same(printed[k], summary[k])
                                                    for k in summary)
    trace = (out / "trace.csv").read_text().splitlines()
    assert trace[0].startswith("round,wall_s,") and len(trace) >= 2
    return model, summary


def same(a, b):
    try:
        return np.array_equal(a, b, equal_nan=True)
    except TypeError:  # (not numbers)
        return a == b


@pytest.mark.parametrize("app", ["lasso", "logreg", "mf", "lda"])
def test_help_names_every_flag(app):
    import importlib

    p = run_cli([f"strads.apps.{app}", "--help"])
    assert p.returncode == 0 and p.stdout.startswith("usage:")
    parser = importlib.import_module(f"strads.apps.{app}.__main__").build_parser()
    for flag in (o for a in parser._actions for o in a.option_strings):
        assert flag in p.stdout, flag


# -- the runs: (app, CLI args, worker counts, app-specific check of the runs) ----------
# An app's first input runs with 1 and 3 workers (no boundary between workers' parts, and
# two); its other formats with W=2 (one boundary), unless its check compares the models
# across W (mf's: 1 and 3 too).
SWEEP, ONE_SPLIT = (1, 3), (2,)


def glm_data(tmp, app, fmt, X, y):
    if fmt == "svm":
        dump_svmlight_file(X, y, str(tmp / "d.svm"))
        return [tmp / "d.svm"]
    scipy.io.mmwrite(str(tmp / "X.mtx"), X, precision=17)
    (tmp / "y.txt").write_text("".join(f"{float(v)!r}\n" for v in y))
    return [tmp / "X.mtx", "--target", tmp / "y.txt"]


def lasso_run(tmp, fmt):
    X, y, _ = make_problem(300, 400, density=0.03, seed=6)
    data = glm_data(tmp, "lasso", fmt, X, y)

    def check(runs):
        Xr, yr = lasso.load(*map(str, data[::2]))
        lam = 0.05 * lasso.lambda_max(Xr, yr)
        sk = Lasso(alpha=lam, fit_intercept=False, tol=1e-12, max_iter=100_000).fit(Xr, yr)
        f_sk = lasso.objective(Xr, yr, sk.coef_, lam)
        for model, s in runs.values():
            assert s["lambda"] == pytest.approx(lam, rel=1e-12)
            assert lasso.objective(Xr, yr, model["coef"], lam) == pytest.approx(f_sk, rel=1e-7)
    return (["--data", *data, "--lambda-ratio", "0.05", "--tol", "1e-10"],
            SWEEP if fmt == "svm" else ONE_SPLIT, check)


def lasso_interp_run(tmp, fmt):
    """p >> n near interpolation (support ~ n): the factor blocks' passes stall and go on
    dense with the face's Newton steps (LassoAggregate._solve), on rank 0 alike."""
    rng = np.random.default_rng(0)
    X = scipy.sparse.random(300, 1500, density=0.03, format="csr", random_state=rng,
                            data_rvs=rng.standard_normal)
    data = glm_data(tmp, "lasso", fmt, X, X @ rng.standard_normal(1500) + 0.1 *
                    rng.standard_normal(300))

    def check(runs):  # (LARS's exact path: scikit-learn's CD ends 1e6 epochs short)
        from sklearn.linear_model import LassoLars

        Xr, yr = lasso.load(*map(str, data[::2]))
        lam = 1e-4 * lasso.lambda_max(Xr, yr)
        ref = LassoLars(alpha=lam, fit_intercept=False, max_iter=10**5).fit(Xr.toarray(), yr)
        for model, s in runs.values():
            assert lasso.objective(Xr, yr, model["coef"], lam) <= lasso.objective(
                Xr, yr, ref.coef_, lam) * (1 + 1e-9)
    return (["--data", *data, "--lambda-ratio", "1e-4", "--tol", "1e-9"], ONE_SPLIT, check)


def logreg_run(tmp, fmt):
    from test_logreg import liblinear
    X, y, _ = make_problem(300, 600, density=0.05, corr=0.5, n_informative=30, seed=2)
    data = glm_data(tmp, "logreg", fmt, X, np.where(y > 0, 1, 0))

    def check(runs):
        Xr, yr = logreg.load(*map(str, data[::2]))
        lam = 0.1 * logreg.lambda_max(Xr, yr)
        mem = logreg.fit(Xr, yr, lambda_ratio=0.1, tol=1e-10, workers=2, quiet=True)
        # liblinear on the in-memory copy (37 iterations); on the file's copy its random
        # coordinate order spins for minutes (485,753 iterations, 166 s)
        f_ref = logreg.objective(Xr, yr, liblinear(X, np.where(y > 0, 1, -1), lam), lam)
        for one, s in runs.values():
            assert s["stop_reason"] == "tol"
            assert float(one["lambda"]) == pytest.approx(lam, rel=1e-12)
            np.testing.assert_array_equal(one["classes"], [0, 1])
            assert one["coef"].shape == (X.shape[1],)
            f = logreg.objective(Xr, yr, one["coef"], float(one["lambda"]))
            assert f == pytest.approx(s["objective"], rel=1e-12)
            assert f == pytest.approx(mem.objective, rel=1e-9)
            assert abs(f - f_ref) <= 1e-6 * f_ref
            np.testing.assert_allclose(one["coef"], mem.model["coef"], atol=1e-6)
    return (["--data", *data, "--lambda-ratio", "0.1", "--tol", "1e-10"],
            SWEEP if fmt == "svm" else ONE_SPLIT, check)


def mf_run(tmp, wrap):
    from test_mf_parallel import udata
    f = tmp / "u.data"
    udata(f)
    if wrap == "gzip":
        f.write_bytes(gzip.compress(f.read_bytes()))
    if wrap == "crlf-bom":
        f.write_bytes(b"\xef\xbb\xbf" + f.read_bytes().replace(b"\n", b"\r\n"))

    def check(runs):  # the model does not depend on W
        first = runs[1][0]
        for model, _ in runs.values():
            for k in ("W", "H", "user_ids", "item_ids"):
                np.testing.assert_array_equal(model[k], first[k], err_msg=k)
    return (["--data", f, "--test-fraction", "0.1", "--rank", "3", "--iters", "3", "--tol",
             "0", "--bias", "full"], SWEEP, check)


def lda_run(tmp, source):
    from test_lda_parallel import write_corpus
    files = write_corpus(tmp)
    args = {"uci": ["--data", files / "docword.c.txt"],
            "text": ["--data", files / "c.txt.gz", "--min-count", "1"],
            "builtin": ["--n-docs", "150", "--n-words", "90", "--doc-length", "20"]}[source]

    def check(runs):
        for model, s in runs.values():
            assert model["word_topic"].sum() == s["tokens"]
    return (["--sweeps", "3", "--topics", "4", "--top-words", "0", "--staleness", "1",
             *args], SWEEP if source == "uci" else ONE_SPLIT, check)


RUNS = {"lasso-svm": (lasso_run, "svm"), "lasso-mtx": (lasso_run, "mtx"),
        "lasso-interp": (lasso_interp_run, "svm"),
        "logreg-svm": (logreg_run, "svm"), "logreg-mtx": (logreg_run, "mtx"),
        "mf-plain": (mf_run, "plain"), "mf-gzip": (mf_run, "gzip"),
        "mf-crlf-bom": (mf_run, "crlf-bom"), "lda-uci": (lda_run, "uci"),
        "lda-text": (lda_run, "text"), "lda-builtin": (lda_run, "builtin")}


@pytest.mark.long
@pytest.mark.timeout(900)
@pytest.mark.parametrize("run", sorted(RUNS))
def test_one_process_equals_mpiexec_bit_for_bit(run, tmp_path):
    app = run.split("-")[0]
    make, variant = RUNS[run]
    args, workers, check = make(tmp_path, variant)
    runs = {}
    for W in workers:
        one, s1 = cli(app, [*args, "--workers", W], tmp_path / f"one{W}")
        mpi, s2 = cli(app, args, tmp_path / f"mpi{W}", np_=W + 1)
        assert sorted(one) == sorted(mpi)
        for k in one:
            assert one[k].dtype == mpi[k].dtype and one[k].tobytes() == mpi[k].tobytes(), (W, k)
        assert sorted(s1) == sorted(s2)
        for k in set(s1) - RUN_KEYS:
            assert same(s1[k], s2[k]), (W, k, s1[k], s2[k])
        assert s2["ranks"] == W + 1 and s1["workers"] == s2["workers"] == W
        runs[W] = one, s1
    check(runs)


# -- a bad line in a later worker's part: (app, file name, text, line, problem) --------
BAD = {
    "lasso": ("d.svm", "".join(f"{(-1) ** k} {k % 5 + 1}:0.5 7:1.25\n" if k != 51 else
                               "1 2:x\n" for k in range(1, 61)),
              51, "'2:x' is not index:value"),
    "logreg": ("d.svm", "".join(f"{k % 2} {k % 5 + 1}:0.5 7:1.25\n" if k != 51 else
                                "1 2:x\n" for k in range(1, 61)),
               51, "'2:x' is not index:value"),
    "mf": ("r.tsv", "".join(f"{k}\t{k % 7}\t3\n" if k != 51 else "7\t8\tx\n"
                            for k in range(1, 61)), 51, "rating 'x' is not a number"),
    "mf-duplicate": ("r.tsv", "".join(f"{k}\t{k % 7}\t3\n" for k in range(1, 60))
                     + "1\t1\t4\n", 60, "duplicate rating of user 1, item 1 (first at "
                     "line 1); pass duplicates='last' or 'mean' (--duplicates) to keep one"),
    "lda": ("late.ldac", "".join(f"1 {k % 9}:1\n" if k != 1801 else "1 3:-4\n"
                                 for k in range(1, 2001)),
            1801, "count -4 must be a positive integer"),
    "lda-zero": ("c.ldac", "1 0:1\n" * 40 + "1 0:0\n", 41,
                 "count 0 must be a positive integer"),
}


@pytest.mark.timeout(600)
@pytest.mark.parametrize("case", sorted(BAD))
def test_a_bad_line_is_one_line_and_exit_2_also_under_mpi(case, tmp_path):
    app = case.split("-")[0]
    name, text, line, problem = BAD[case]
    f = tmp_path / name
    f.write_text(text)
    for np_, workers in ((None, ["--workers", "3"]), (4, [])):
        p = run_cli([f"strads.apps.{app}", "--data", str(f), *workers, "--quiet"], np=np_,
                    timeout=300)
        assert p.returncode == 2, (np_, p.stderr[-3000:])
        assert "Traceback" not in p.stderr, p.stderr
        errors = [ln for ln in p.stderr.splitlines() if "error" in ln]
        assert len(errors) == 1, p.stderr
        # one prefix, as argparse's, whatever the launch
        assert errors[0] == f"python -m strads.apps.{app}: error: {f}:{line}: {problem}", \
            (np_, errors[0])


# -- the scheduler rank reads no data ---------------------------------------------------
def big_lasso(tmp):
    X, y, _ = make_problem(20_000, 20_000, density=0.003, n_informative=50, seed=0)
    dump_svmlight_file(X, y, str(tmp / "x.svm"))  # 20 MB
    return 3, [["--data", tmp / "x.svm", "--max-rounds", "10"]]


def big_mf(tmp):
    from test_mf_parallel import udata
    udata(tmp / "u.data", m=3000, n=500, count=200_000)
    return 3, [["--data", tmp / "u.data", "--rank", "4", "--iters", "1"]]


def big_lda(tmp):
    f = tmp / "docword.r.txt"
    X, _, _ = lda.make_corpus(3000, 2000, 60, 10, 0.1, 0.05, 2)
    coo = X.tocoo()
    f.write_text(f"{X.shape[0]}\n{X.shape[1]}\n{coo.nnz}\n" + "".join(
        f"{r + 1} {c + 1} {v}\n" for r, c, v in zip(coo.row, coo.col, coo.data)))
    common = ["--sweeps", "1", "--topics", "200", "--top-words", "0"]
    return 5, [common + ["--n-docs", "3000", "--n-words", "3000", "--doc-length", "60"],
               common + ["--data", f]]


@pytest.mark.timeout(900)
@pytest.mark.parametrize("app, make", [("lasso", big_lasso), ("mf", big_mf), ("lda", big_lda)])
def test_the_scheduler_rank_reads_no_data_and_stays_smallest(app, make, tmp_path):
    """Rank 0 only looks at the file's name (or the lines before the data): its peak RSS
    is at most the smallest worker's."""
    np_, runs = make(tmp_path)
    for k, args in enumerate(runs):
        _, s = cli(app, args, tmp_path / f"o{k}", np_=np_)
        rss = [t["peak_rss_mb"] for t in s["traffic"]]
        assert len(rss) == np_ and rss[0] <= min(rss[1:]), rss


# -- fit() under mpiexec: every rank calls it, rank 0 compares with one process ----------
def lasso_fit(kind, schedule, staleness):
    if kind == "dense":  # n >= p: well conditioned, the baselines converge too
        X, y, _ = make_problem(200, 100, corr=0.3, n_informative=15, dense=True, seed=1)
    else:
        X, y, _ = make_problem(300, 300, density=0.05, corr=0.3, n_informative=20, seed=2)
    lam = 0.05 * lasso.lambda_max(X, y)

    def check(res):
        sk = Lasso(alpha=lam, fit_intercept=False, tol=1e-12, max_iter=1_000_000).fit(X, y)
        f_sk = lasso.objective(X, y, sk.coef_, lam)
        assert abs(lasso.objective(X, y, res.model["coef"], lam) - f_sk) <= 1e-6 * f_sk
        assert (res.versions[:, 0] - res.versions[:, 2]).max() == staleness
    return lambda **kw: lasso.fit(X, y, lam=lam, schedule=schedule, block=32,
                                  staleness=staleness, tol=1e-9, max_rounds=100_000,
                                  quiet=True, seed=7, **kw), check


def logreg_fit(kind, schedule):
    from test_logreg import problem, reference
    X, y, lam = problem(kind)

    def check(res):
        assert res.stop_reason == "tol"
        f_ref = reference(kind)[1]
        assert abs(logreg.objective(X, y, res.model["coef"], lam) - f_ref) <= 1e-6 * f_ref
    return lambda **kw: logreg.fit(X, y, lam=lam, schedule=schedule, block=32, tol=1e-9,
                                   quiet=True, seed=7, **kw), check


def mf_fit(schedule, staleness, bias):
    t = mf.make_problem(600, 300, 8000, seed=7)
    return lambda **kw: mf.fit(t.users, t.items, t.ratings, rank=5, lam=0.5, schedule=schedule,
                               bias=bias, iters=4, tol=0, seed=3, test_fraction=0.1,
                               staleness=staleness, quiet=True, **kw), lambda res: None


def lda_fit(schedule, staleness):
    X, _, _ = lda.make_corpus(120, 80, 30, 4, 0.2, 0.1, 3)
    fit = lambda **kw: lda.fit(X, n_topics=5, sweeps=3, schedule=schedule,  # noqa: E731
                               staleness=staleness, quiet=True, check=True,
                               log_interval=0.0, **kw)  # invariants after every round

    def check(res):  # every sweep's log-likelihood, added up by the workers, to the bit
        ref = fit(workers=res.workers, mpi=False)
        assert [r["loglik"] for r in res.trace] == [r["loglik"] for r in ref.trace]
        assert np.isclose(res.trace[-1]["loglik"], ref.model["loglik"], rtol=1e-12)
        assert res.summary()["max_staleness_seen"] == staleness
    return fit, check


def ridge_fit(staleness):
    rng = np.random.default_rng(0)
    X = rng.standard_normal((300, 24))
    y = X @ rng.standard_normal(24) + rng.standard_normal(300)

    def check(res):
        exact = np.linalg.solve(X.T @ X + 300 * 0.1 * np.eye(24), X.T @ y)
        np.testing.assert_allclose(res.model["coef"], exact, rtol=1e-8, atol=1e-10)
    return lambda **kw: ridge.fit(X, y, lam=0.1, block=5, max_rounds=400, tol=0, quiet=True,
                                  staleness=staleness, **kw), check


FITS = {
    **{f"lasso-{k}-{s}-{st}": (lasso_fit, k, s, st) for k in ("dense", "sparse")
       for s in ("working-set", "priority", "round-robin", "random") for st in (0, 2)},
    **{f"logreg-{k}-{s}": (logreg_fit, k, s) for k in ("dense", "sparse")
       for s in ("working-set", "priority", "round-robin", "random")},
    **{f"mf-{s}-{st}-{b}": (mf_fit, s, st, b)
       for s, st, b in (("ccd", 0, "full"), ("ccd", 1, "mean"), ("als", 0, "mean"))},
    **{f"lda-{s}-{st}": (lda_fit, s, st) for s, st in (("model", 0), ("model", 1),
                                                      ("model", 2), ("data", 0), ("data", 2))},
    **{f"ridge-{st}": (ridge_fit, st) for st in (0, 2)},
}


@pytest.mark.mpi(min_size=2)
@pytest.mark.parametrize("case", sorted(FITS))
def test_fit_under_mpi_equals_one_process(case):
    rank, size = world()
    make, *params = FITS[case]
    fit, check = make(*params)
    res = fit()
    if rank != 0:
        assert res is None
        return
    local = fit(workers=size - 1, mpi=False)
    assert res.ranks == size and res.workers == local.workers == size - 1
    assert sorted(res.model) == sorted(local.model)
    for k in res.model:
        np.testing.assert_array_equal(res.model[k], local.model[k], err_msg=k)
    assert res.rounds == local.rounds and res.stop_reason == local.stop_reason
    assert res.objective == local.objective or res.objective != res.objective
    np.testing.assert_array_equal(res.versions, local.versions)
    for k in set(res.extra) - RUN_KEYS:
        assert same(res.extra[k], local.extra[k]), (k, res.extra[k], local.extra[k])
    check(res)


# -- resume == uninterrupted at any staleness ---------------------------------------------
def _glm(app, schedule, staleness):
    if app == "lasso":  # (test_exact_rounds_resume_bit_for_bit's problem: exact rounds)
        X, y, _ = make_problem(100, 1000, corr=0.3, dense=True, seed=1)
    if app == "lasso.sparse":  # (the filter's cache and X'X: bought at once, not state)
        X, y, _ = make_problem(100, 300, corr=0.3, seed=1)
    if app == "lasso.small":  # (dense, p <= 256: the first round solves from one Gram)
        X, y, _ = make_problem(200, 40, corr=0.3, n_informative=8, dense=True, seed=1)
    if app.startswith("lasso"):
        kw = dict(lambda_ratio=0.1) if schedule == "priority" else dict(block=32)
        return lambda **k: lasso.fit(X, y, schedule=schedule, tol=0, staleness=staleness,
                                     quiet=True, seed=7, **kw, **k), 30
    from test_logreg import problem
    X, y, lam = problem("dense")
    return lambda **k: logreg.fit(X, y, lam=lam, schedule=schedule, block=32, tol=0,
                                  staleness=staleness, quiet=True, seed=7, **k), 30


def _mf(schedule, staleness):
    t = mf.make_problem(300, 150, 4000, seed=7)
    return lambda **k: mf.fit(t.users, t.items, t.ratings, rank=4, lam=0.5,
                              schedule=schedule, iters=4, tol=0, seed=3, early_stop=0,
                              staleness=staleness, quiet=True, **k), 10 ** 9


def _lda(schedule, staleness):
    X, _, _ = lda.make_corpus(120, 80, 30, 4, 0.2, 0.1, 3)
    sweeps = 16 if schedule == "data" else 4  # (a round a sweep: past the 12th)
    return lambda **k: lda.fit(X, n_topics=5, sweeps=sweeps, schedule=schedule,
                               staleness=staleness, quiet=True, **k), None


RESUMES = {
    **{f"{a}-{s}-{st}": (_glm, a, s, st) for a in ("lasso", "logreg")
       for s in ("priority", "round-robin", "random") for st in (1, 2)},
    **{f"lasso.sparse-priority-{st}": (_glm, "lasso.sparse", "priority", st) for st in (0, 1)},
    **{f"lasso.small-working-set-{st}": (_glm, "lasso.small", "working-set", st)
       for st in (0, 1)},
    **{f"mf-ccd-{st}": (_mf, "ccd", st) for st in (1, 2)},
    **{f"lda-{s}-{st}": (_lda, s, st) for s in ("model", "data") for st in (1, 2)},
}


def _legs(case, tmp_path, every=1e-6, **kw):
    """The uninterrupted run, and one checkpointed at every round boundary (``every``
    3600: only where it stops), stopped at its 12th round and resumed: -> (uninterrupted
    result, resumed result)."""
    make, *params = RESUMES[case]
    fit, rounds = make(*params)
    stop = {} if rounds is None else {"max_rounds": rounds}
    full = fit(workers=kw.get("workers", 2), mpi=False, out=str(tmp_path / "full"),
               **stop)
    part = str(tmp_path / "part")
    first = fit(out=part, checkpoint_every=every, **{**stop, "max_rounds": 12}, **kw)
    resumed = fit(out=part, resume=True, **stop, **kw)
    if first is not None:
        assert first.rounds == 12 < resumed.rounds == full.rounds
    return full, resumed


def _same_model(a, b):
    assert sorted(a.model) == sorted(b.model)
    for k in a.model:
        np.testing.assert_array_equal(a.model[k], b.model[k], err_msg=k)


@pytest.mark.parametrize("case", sorted(RESUMES))
def test_resume_at_staleness_equals_uninterrupted(case, tmp_path):
    """A checkpoint at every round boundary, with rounds in flight, changes nothing: the
    run resumed from its 12th ends with the uninterrupted run's model, bit for bit."""
    full, resumed = _legs(case, tmp_path, workers=2, mpi=False)
    _same_model(full, resumed)
    np.testing.assert_array_equal(full.versions, resumed.versions)


@pytest.mark.parametrize("case", ["lasso-priority-1", "logreg-priority-2", "mf-ccd-1",
                                  "lda-model-2"])
def test_resume_at_staleness_from_the_stop_equals_uninterrupted(case, tmp_path):
    """Only the checkpoint of the stop (where it first held a round back, the rounds in
    flight those of the uninterrupted run): the same bits."""
    full, resumed = _legs(case, tmp_path, every=3600, workers=2, mpi=False)
    _same_model(full, resumed)
    np.testing.assert_array_equal(full.versions, resumed.versions)


@pytest.mark.mpi(min_size=2)
@pytest.mark.parametrize("case", ["lasso-priority-1", "lda-model-2"])  # (the others: above)
def test_resume_at_staleness_under_mpi_equals_uninterrupted(case, tmp_path):
    """Both legs under mpiexec, the uninterrupted run in one process (the same bits)."""
    from mpi4py import MPI

    rank, size = world()
    tmp = Path(MPI.COMM_WORLD.bcast(str(tmp_path)))  # (rank 0's folder: it writes)
    full, resumed = _legs(case, tmp, workers=size - 1)
    if rank == 0:
        assert full.workers == resumed.workers == size - 1
        _same_model(full, resumed)
        np.testing.assert_array_equal(full.versions, resumed.versions)


@pytest.mark.parametrize("case", ["lasso-priority-1", "lda-model-2"])
def test_resume_with_rounds_in_flight_on_other_workers(case, tmp_path):
    """A checkpoint with rounds in flight resumed on 3 workers, not its 2: those rounds
    are aggregated first (the old workers' results), then the run goes on."""
    make, *params = RESUMES[case]
    fit, rounds = make(*params)
    stop = {} if rounds is None else {"max_rounds": rounds}
    part = str(tmp_path / "part")
    fit(workers=2, mpi=False, out=part, checkpoint_every=1e-6, **{**stop, "max_rounds": 12})
    m = json.loads((tmp_path / "part" / "checkpoint" / "manifest.json").read_text())
    with np.load(tmp_path / "part" / "checkpoint" / m["parts"][0]["file"]) as z:
        assert '"inflight": {"list": [{' in str(z["__meta__"])  # (rounds in flight)
    res = fit(workers=3, mpi=False, out=part, resume=True, **stop)
    assert res.workers == 3 and res.stop_reason in ("max_rounds", "schedule_done")
    assert res.versions[:, 0].tolist() == list(range(res.rounds))
