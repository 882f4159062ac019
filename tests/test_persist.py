"""strads.load: estimators back from est.save(DIR) and from a command line's --out DIR;
pickle; MatrixFactorization.score; what load refuses (one DataError naming the file)."""
import json
import os
import pickle
import shutil
import warnings

import numpy as np
import pytest
import scipy.sparse as sp

pytest.importorskip("sklearn")

import strads  # noqa: E402
from strads.apps.lda import make_corpus  # noqa: E402
from strads.errors import DataError  # noqa: E402

from conftest import ROOT  # noqa: E402


def _regression():
    rng = np.random.default_rng(0)
    X = sp.random(60, 30, density=0.3, format="csr", random_state=1)
    y = X @ rng.standard_normal(30) + 0.5
    return X, y


def _ratings():
    R = sp.random(40, 30, density=0.3, format="coo", random_state=0)
    R.data = 1 + 4 * R.data
    return R.tocsr()


def _fitted():
    """(estimator, its fit's data, a function of the estimator that must come back the
    same) for the four estimators."""
    X, y = _regression()
    lasso = strads.Lasso(alpha=0.01).fit(X, y)
    labels = np.where(y > np.median(y), "spam", "ham")
    logreg = strads.SparseLogisticRegression(alpha=0.01).fit(X, labels)
    R = _ratings()
    mf = strads.MatrixFactorization(n_components=2, max_iter=5, random_state=0).fit(R)
    R = R.tocoo()
    R = (R.row, R.col, R.data)  # score takes the ratings, not the matrix
    C, _, _ = make_corpus(n_docs=30, n_words=40, n_topics=3, doc_length=20, seed=0)
    lda = strads.LDA(n_components=3, max_iter=5, random_state=0,
                     max_doc_update_iter=10).fit(C)
    users, items = np.array([0, 1, 39, 1000]), np.array([0, 29, 3, 2])
    return [
        (lasso, lambda e: e.predict(X)),
        (logreg, lambda e: (e.predict(X), e.predict_proba(X))),
        (mf, lambda e: (e.predict(users, items), e.recommend(1, n=5), e.score(R))),
        (lda, lambda e: (e.transform(C[:5]), e.doc_topic_, e.top_words(n=3))),
    ]


def _same(a, b):
    if isinstance(a, (tuple, list)):
        assert len(a) == len(b)
        for x, z in zip(a, b):
            _same(x, z)
    else:
        np.testing.assert_array_equal(a, b)


@pytest.fixture(scope="module")
def fitted():
    return _fitted()


def test_save_load_and_pickle_give_the_same_predictions(fitted, tmp_path):
    for k, (est, use) in enumerate(fitted):
        out = tmp_path / str(k)
        est.save(out)
        assert sorted(os.listdir(out)) == ["model.npz", "summary.json"]
        back = strads.load(out)
        assert type(back) is type(est)
        assert back.get_params() == est.get_params()
        _same(use(back), use(est))
        again = pickle.loads(pickle.dumps(est))
        _same(use(again), use(est))
        # saving a loaded model gives the same folder's model again
        back.save(tmp_path / f"{k}-again")
        with np.load(out / "model.npz") as a, np.load(tmp_path / f"{k}-again" / "model.npz") as b:
            assert sorted(a.files) == sorted(b.files)
            for key in a.files:
                np.testing.assert_array_equal(a[key], b[key])


def test_loaded_logreg_maps_its_classes(fitted, tmp_path):
    est = fitted[1][0]
    est.save(tmp_path)
    back = strads.load(tmp_path)
    assert back.classes_.tolist() == ["ham", "spam"]
    X, _ = _regression()
    assert set(back.predict(X)) <= {"ham", "spam"}


def test_mf_score_is_negative_rmse_and_drives_grid_search(fitted):
    from sklearn.model_selection import GridSearchCV

    mf = fitted[2][0]
    R = sp.coo_matrix(_ratings())
    err = mf.predict(R.row, R.col) - R.data
    assert mf.score((R.row, R.col, R.data)) == pytest.approx(-np.sqrt(np.mean(err ** 2)))
    assert mf.score(np.c_[R.row, R.col, R.data]) == mf.score((R.row, R.col, R.data))
    with pytest.raises(TypeError, match="renumber"):  # a split renumbers its rows
        mf.score(R)
    grid = GridSearchCV(strads.MatrixFactorization(n_components=2, max_iter=3,
                                                   early_stopping=False, random_state=0),
                        {"alpha": [0.05, 0.5]}, cv=2).fit(np.c_[R.row, R.col, R.data])
    assert grid.best_params_["alpha"] in (0.05, 0.5)


def _cli(app, argv):
    if app in ("lasso", "logreg"):
        import importlib
        main = importlib.import_module(f"strads.apps.{app}.__main__").main
    elif app == "mf":
        from strads.apps.mf.__main__ import main
    else:
        from strads.apps.lda.__main__ import main
    return main(argv + ["--quiet"])


def test_load_reads_a_command_line_run(tmp_path, capsys):
    out = str(tmp_path / "lasso")
    _cli("lasso", ["--n-samples", "80", "--n-features", "40", "--out", out])
    est = strads.load(out)
    X = np.random.default_rng(0).standard_normal((3, 40))
    with np.load(os.path.join(out, "model.npz")) as m:
        np.testing.assert_array_equal(est.predict(X), X @ m["coef"])
        assert est.alpha == float(m["lambda"]) and not est.fit_intercept

    out = str(tmp_path / "logreg")
    _cli("logreg", ["--n-samples", "80", "--n-features", "40", "--out", out])
    est = strads.load(out)
    with np.load(os.path.join(out, "model.npz")) as m:
        d = X @ m["coef"]
        np.testing.assert_array_equal(est.predict(X), m["classes"][(d > 0).astype(int)])

    out = str(tmp_path / "mf")
    _cli("mf", ["--n-users", "60", "--n-items", "40", "--n-ratings", "900", "--rank", "3",
                "--out", out])
    est = strads.load(out)
    assert est.n_components == 3
    items, scores = est.recommend(int(est.user_ids_[0]), n=4, filter_seen=False)
    assert len(items) == 4 and (np.diff(scores) <= 0).all()
    np.testing.assert_allclose(est.predict(np.repeat(est.user_ids_[0], 4), items), scores)
    with pytest.raises(ValueError, match="filter_seen=False"):
        est.recommend(int(est.user_ids_[0]))

    out = str(tmp_path / "lda")
    _cli("lda", ["--n-docs", "40", "--n-words", "50", "--doc-length", "20", "--topics", "3",
                 "--sweeps", "4", "--top-words", "0", "--out", out])
    est = strads.load(out)
    C, _, _ = make_corpus(n_docs=5, n_words=50, n_topics=3, doc_length=20, seed=1)
    theta = est.transform(C)
    assert theta.shape == (5, 3)
    np.testing.assert_allclose(theta.sum(axis=1), 1)
    np.testing.assert_array_equal(theta, strads.load(out).transform(C))
    capsys.readouterr()


def _saved(tmp_path, fitted, k=0):
    out = tmp_path / "m"
    fitted[k][0].save(out)
    return out, dict(np.load(out / "model.npz"))


def _rewrite(out, model):
    with open(out / "model.npz", "wb") as f:
        np.savez(f, **model)


def test_load_refuses_bad_folders_with_one_line_naming_the_file(tmp_path, fitted):
    with pytest.raises(DataError, match="no such folder"):
        strads.load(tmp_path / "nowhere")
    (tmp_path / "empty").mkdir()
    with pytest.raises(DataError, match=r"empty/model.npz: no such file"):
        strads.load(tmp_path / "empty")

    out, model = _saved(tmp_path, fitted)
    _rewrite(out, {**model, "coef": np.array([object(), 1], dtype=object)})
    with pytest.raises(DataError, match=r"model.npz: coef: an object array"):
        strads.load(out)
    _rewrite(out, {**model, "coef": model["coef"].reshape(-1, 1)})
    with pytest.raises(DataError, match=r"model.npz: coef: shape \(30, 1\)"):
        strads.load(out)
    _rewrite(out, {**model, "coef": np.array(["a", "b"])})
    with pytest.raises(DataError, match=r"model.npz: coef: dtype <U1"):
        strads.load(out)
    _rewrite(out, {**model, "coef": np.full(30, np.nan)})
    with pytest.raises(DataError, match=r"model.npz: coef: non-finite"):
        strads.load(out)
    _rewrite(out, {k: v for k, v in model.items() if k != "lambda"})
    with pytest.raises(DataError, match=r"model.npz: lambda: missing"):
        strads.load(out)
    (out / "model.npz").write_bytes(b"PK not a zip")
    with pytest.raises(DataError, match=r"model.npz: not a .npz archive"):
        strads.load(out)

    _rewrite(out, model)
    summary = json.loads((out / "summary.json").read_text())
    for bad, why in (({**summary, "app": "svm"}, "app 'svm' is not one of"),
                     ({**summary, "params": {"bogus": 1}}, "not parameters of Lasso"),
                     ({**summary, "params": {"alpha": "x"}}, "params: alpha 'x' is not"),
                     ({**summary, "params": {"fit_intercept": 1}}, "fit_intercept 1"),
                     ({**summary, "app": ["lasso"]}, r"app \['lasso'\] is not one of"),
                     ({**summary, "app": {"a": 1}}, "app {'a': 1} is not one of"),
                     ({**summary, "params": {"tol": float("nan")}}, "'tol' parameter of Lasso"),
                     ({**summary, "params": {"alpha": -1.0}}, "'alpha' parameter of Lasso")):
        (out / "summary.json").write_text(json.dumps(bad))
        with pytest.raises(DataError, match=why):
            strads.load(out)
    (out / "summary.json").write_text("{")
    with pytest.raises(DataError, match="summary.json: not a JSON summary"):
        strads.load(out)


def test_load_checks_the_shapes_of_each_app(tmp_path, fitted):
    out, model = _saved(tmp_path, fitted, 2)  # MF
    _rewrite(out, {**model, "H": model["H"][:, :1]})
    with pytest.raises(DataError, match=r"model.npz: H: shape"):
        strads.load(out)
    _rewrite(out, {**model, "user_ids": model["user_ids"][::-1]})
    with pytest.raises(DataError, match=r"user_ids: not sorted"):
        strads.load(out)
    out, model = _saved(tmp_path, fitted, 3)  # LDA
    _rewrite(out, {**model, "word_topic": -model["word_topic"] - 1})
    with pytest.raises(DataError, match=r"word_topic: values below 0"):
        strads.load(out)
    _rewrite(out, {**model, "beta": np.float64(0)})
    with pytest.raises(DataError, match=r"beta: 0.0: a prior must be > 0"):
        strads.load(out)
    out, model = _saved(tmp_path, fitted, 1)  # logreg
    _rewrite(out, {**model, "classes": model["classes"][::-1]})
    with pytest.raises(DataError, match=r"classes: .*not two sorted"):
        strads.load(out)


def test_load_refuses_an_array_larger_than_its_bytes(tmp_path, fitted):
    """A header that declares more than the file holds is refused before allocating."""
    import io
    import zipfile

    out, model = _saved(tmp_path, fitted)
    buf = io.BytesIO()
    np.lib.format.write_array_header_1_0(buf, {"descr": "<f8", "fortran_order": False,
                                               "shape": (10 ** 12,)})
    with zipfile.ZipFile(out / "model.npz", "w") as z:
        for k, v in model.items():
            if k != "coef":
                with z.open(k + ".npy", "w") as f:
                    np.lib.format.write_array(f, v)
        z.writestr("coef.npy", buf.getvalue() + b"\0" * 8)
    with pytest.raises(DataError, match=r"coef: shape \(1000000000000,\) needs more bytes"):
        strads.load(out)


@pytest.mark.mpi(min_size=2)
def test_save_under_mpiexec_writes_once_and_every_rank_loads_it(tmp_path):
    """Every rank fits and saves (rank 0 writes), then every rank loads the folder."""
    from mpi4py import MPI

    comm = MPI.COMM_WORLD
    out = comm.bcast(str(tmp_path / "saved") if comm.rank == 0 else None)
    X, y = _regression()
    est = strads.Lasso(alpha=0.01).fit(X, y)
    est.save(out)
    comm.Barrier()
    back = strads.load(out)
    np.testing.assert_array_equal(back.predict(X), est.predict(X))
    assert sorted(os.listdir(out)) == ["model.npz", "summary.json"]


# -- forged arrays and summaries, saves of every fit (the hunt of 2026-12-06) ---------
def _xy(n=30, p=10, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, p))
    return X, X[:, :3] @ np.ones(3) + 0.1 * rng.standard_normal(n)


def _replace_arrays(folder, **arrays):
    """model.npz of ``folder`` with ``arrays`` replaced (None: removed)."""
    path = os.path.join(folder, "model.npz")
    with np.load(path) as z:
        model = {k: z[k] for k in z.files}
    for k, v in arrays.items():
        if v is None:
            model.pop(k, None)
        else:
            model[k] = v
    np.savez(path, **model)


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    """A small fitted MF and LDA, saved: {app: folder}."""
    from strads.apps import lda, mf

    base = tmp_path_factory.mktemp("saved")
    p = mf.make_problem(n_users=30, n_items=20, n_ratings=300, seed=0)
    strads.MatrixFactorization(n_components=3, random_state=0).fit(
        (p.users, p.items, p.ratings)).save(base / "mf")
    C, _, _ = lda.make_corpus(n_docs=30, n_words=40, n_topics=3, seed=0)
    strads.LDA(n_components=3, random_state=0, max_iter=5).fit(C).save(base / "lda")
    return {"mf": base / "mf", "lda": base / "lda"}


def _copy(saved, app, tmp_path):
    d = tmp_path / app
    shutil.copytree(saved[app], d)
    return d


def test_load_refuses_an_lda_prior_fit_refuses(saved, tmp_path):
    d = _copy(saved, "lda", tmp_path)
    _replace_arrays(d, alpha=np.float64(1e308))
    try:
        est = strads.load(d)
    except strads.DataError:
        return
    theta = est.transform(np.ones((2, est.n_features_in_), dtype=np.int64))
    assert np.allclose(theta.sum(axis=1), 1.0)


def test_load_refuses_an_lda_model_without_topics(saved, tmp_path):
    d = _copy(saved, "lda", tmp_path)
    V = strads.load(d).n_features_in_
    _replace_arrays(d, word_topic=np.zeros((V, 0), np.int64), doc_mixture=np.zeros((30, 0)))
    with pytest.raises(strads.DataError):
        strads.load(d)


def test_load_refuses_lda_mixtures_that_are_not_distributions(saved, tmp_path):
    d = _copy(saved, "lda", tmp_path)
    mix = strads.load(d).doc_topic_
    _replace_arrays(d, doc_mixture=-mix)
    with pytest.raises(strads.DataError):
        strads.load(d)


def test_loaded_mf_without_users_predicts_or_is_refused(saved, tmp_path):
    d = _copy(saved, "mf", tmp_path)
    k = strads.load(d).user_factors_.shape[1]
    _replace_arrays(d, W=np.zeros((0, k)), user_bias=np.zeros(0), user_ids=np.zeros(0, np.int64),
             seen_indptr=np.zeros(1, np.int64), seen_items=np.zeros(0, np.int64))
    try:
        est = strads.load(d)
    except strads.DataError:
        return
    assert np.isfinite(est.predict([0], [0])).all()


def test_mf_recommend_refuses_a_bool_user_as_predict_does(saved):
    est = strads.load(saved["mf"])
    with pytest.raises(Exception):
        est.predict([True], [est.item_ids_[0]])
    with pytest.raises((ValueError, TypeError)):
        est.recommend(True, n=2, filter_seen=False)

# -- load: summary.json as hostile input (a traceback, a hang, all memory) ---------------
def _lasso_folder(tmp_path):
    X, y = _xy()
    d = tmp_path / "lasso"
    strads.Lasso(alpha=0.05).fit(X, y).save(d)
    return d


def test_load_refuses_a_deeply_nested_summary(tmp_path):
    d = _lasso_folder(tmp_path)
    (d / "summary.json").write_text("[" * 200000)
    with pytest.raises(strads.DataError):
        strads.load(d)


@pytest.mark.timeout(60)  # (a hang fails here, not by a clock the test reads)
def test_load_does_not_hang_on_a_fifo_summary(tmp_path):
    d = _lasso_folder(tmp_path)
    fifo = d / "summary.json"
    fifo.unlink()
    os.mkfifo(fifo)
    with pytest.raises(DataError, match="summary.json: .*not a regular file"):
        strads.load(d)


def test_load_does_not_read_an_endless_summary(tmp_path):
    import subprocess
    import sys

    d = _lasso_folder(tmp_path)
    (d / "summary.json").unlink()
    os.symlink("/dev/zero", d / "summary.json")
    code = ("import strads, sys\ntry:\n    strads.load(sys.argv[1])\n"
            "except strads.DataError as e:\n    print(e)\n    sys.exit(2)\n")
    import resource

    def limit():
        resource.setrlimit(resource.RLIMIT_AS, (2 << 30, resource.RLIM_INFINITY))

    p = subprocess.run([sys.executable, "-c", code, str(d)], capture_output=True, text=True,
                       timeout=60, preexec_fn=limit,
                       env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert p.returncode == 2 and "Traceback" not in p.stderr, p.stderr[-500:]


def test_lasso_cv_save_loads_as_its_final_lasso(tmp_path):
    X, y = _xy()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        est = strads.LassoCV(cv=2, n_alphas=3).fit(X, y)
    est.save(tmp_path / "cv")
    loaded = strads.load(tmp_path / "cv")
    assert type(loaded) is strads.Lasso and loaded.alpha == est.alpha_
    np.testing.assert_array_equal(loaded.predict(X), est.predict(X))


def test_logreg_cv_save_loads_as_its_final_fit(tmp_path):
    X, y = _xy()
    est = strads.SparseLogisticRegressionCV(cv=2, n_alphas=3).fit(X, y > 0)
    est.save(tmp_path / "cv")
    loaded = strads.load(tmp_path / "cv")
    assert type(loaded) is strads.SparseLogisticRegression and loaded.alpha == est.alpha_
    np.testing.assert_array_equal(loaded.predict_proba(X), est.predict_proba(X))
    np.testing.assert_array_equal(loaded.classes_, est.classes_)


def test_logreg_with_string_labels_of_a_pandas_column_saves(tmp_path):
    X, y = _xy()
    labels = np.where(y > 0, "yes", "no").astype(object)  # as a pandas column holds them
    est = strads.SparseLogisticRegression(alpha=0.01).fit(X, labels)
    est.save(tmp_path / "clf")
    loaded = strads.load(tmp_path / "clf")
    assert loaded.predict(X).tolist() == est.predict(X).tolist()


def test_lda_save_keeps_the_feature_names(tmp_path):
    pd = pytest.importorskip("pandas")
    rng = np.random.default_rng(0)
    df = pd.DataFrame(rng.poisson(1.0, (20, 12)), columns=[f"w{i}" for i in range(12)])
    est = strads.LDA(n_components=2, random_state=0, max_iter=3).fit(df)
    est.save(tmp_path / "lda")
    loaded = strads.load(tmp_path / "lda")
    with pytest.raises(ValueError):
        est.transform(df[df.columns[::-1]])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises(ValueError):
            loaded.transform(df[df.columns[::-1]])


# -- params against the model, the folder's mode (the hunt of 2026-12-06, second) ----
def _lasso_saved(tmp_path):
    rng = np.random.default_rng(0)
    X = sp.random(40, 10, density=0.5, format="csr", random_state=1)
    y = X @ rng.standard_normal(10) + 0.5
    out = tmp_path / "lasso"
    strads.Lasso(alpha=0.01).fit(X, y).save(out)
    return out


def _edit_params(out, **params):
    s = json.loads((out / "summary.json").read_text())
    s["params"].update(params)
    (out / "summary.json").write_text(json.dumps(s))


@pytest.mark.timeout(60)
def test_load_refuses_fit_intercept_false_with_an_intercept(tmp_path):
    out = _lasso_saved(tmp_path)
    _edit_params(out, fit_intercept=False)
    with pytest.raises(DataError):
        strads.load(out)


@pytest.mark.timeout(60)
def test_load_refuses_an_alpha_other_than_the_models_lambda(tmp_path):
    out = _lasso_saved(tmp_path)
    _edit_params(out, alpha=0.5)
    with pytest.raises(DataError):
        strads.load(out)


@pytest.mark.timeout(60)
def test_load_refuses_a_negative_validation_rmse(tmp_path):
    R = sp.random(30, 20, density=0.4, format="coo", random_state=0)
    R.data = 1 + 4 * R.data
    out = tmp_path / "mf"
    strads.MatrixFactorization(n_components=2, random_state=0, max_iter=3).fit(
        R.tocsr()).save(out)
    m = dict(np.load(out / "model.npz"))
    m["validation_rmse"] = np.float64(-1.0)
    np.savez(out / "model.npz", **m)
    with pytest.raises(DataError):
        strads.load(out)


@pytest.mark.timeout(60)
def test_save_keeps_the_folders_mode(tmp_path):
    out = tmp_path / "saved"
    out.mkdir()
    out.chmod(0o700)
    X = sp.random(30, 8, density=0.5, format="csr", random_state=1)
    strads.Lasso(alpha=0.01).fit(X, np.arange(30.0)).save(out)
    assert oct(out.stat().st_mode & 0o7777) == oct(0o700)
