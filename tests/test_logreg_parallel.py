"""Logistic regression parallel loading (--data): each worker reads its own part of the
file with the Lasso app's reader, and the workers agree on the two labels, the column
norms and X'y. The parts, put together, are the whole-file reader's matrix and -1/+1
labels for any number of workers; a bad line or a third label anywhere gets the
whole-file reader's one line. (The CLI's model under mpiexec, its optimum against
liblinear's: tests/test_contract.py.)"""
import functools

import numpy as np
import pytest
import scipy.io
import scipy.sparse as sp

import strads
from strads.apps import logreg
from strads.apps.logreg import data as logreg_data
from strads.apps.logreg.data import make_problem

from conftest import run_cli
from test_glm import fit_cli, read_parts, svm_text

X0, Y0, _ = make_problem(60, 25, density=0.2, seed=11)
L0 = np.where(Y0 > 0, 7, 3)  # any two label values: 3 -> -1, 7 -> +1

read_parts = functools.partial(read_parts, logreg_data)  # every worker's part of a file
_fit = functools.partial(fit_cli, "logreg")


def write(tmp_path, name, data):
    p = tmp_path / name
    p.write_bytes(data)
    return str(p)


def same_as_check(path, target=None, workers=(1, 2, 3)):
    """For every W, the parts put together are load() + check()'s X and -1/+1 labels
    and the facts are right; or every W raises their message (returned)."""
    try:
        X, y, classes = logreg.check(*logreg.load(path, target), name=path)
    except strads.DataError as e:
        for W in workers:
            with pytest.raises(strads.DataError) as mine:
                read_parts(path, target, W)
            assert str(mine.value) == str(e), W
        return str(e)
    X = sp.csc_matrix(X)
    for W in workers:
        parts = read_parts(path, target, W)
        f = parts[0]["facts"]
        cols = np.flatnonzero(np.diff(X.indptr))
        assert (f["kept"] is None) == (cols.shape[0] == X.shape[1])
        blocks = [sp.csc_matrix((pt["csc"][2], pt["csc"][1], pt["csc"][0]),
                                shape=(pt["n_rows"], pt["csc"][0].shape[0] - 1))
                  for pt in parts]
        Xp = sp.vstack(blocks, format="csc")
        Xk = X[:, cols]
        assert Xp.shape == Xk.shape and (Xp != Xk).nnz == 0
        yp = np.concatenate([pt["y"] for pt in parts])
        assert yp.tobytes() == y.tobytes()
        assert f["n"] == X.shape[0] and f["n_features"] == X.shape[1]
        np.testing.assert_array_equal(f["classes"], classes)
        np.testing.assert_allclose(f["sq_norms"], np.asarray(Xk.multiply(Xk).sum(0)).ravel(),
                                   rtol=1e-12)
        np.testing.assert_allclose(f["q0"], Xk.T @ y, rtol=1e-10, atol=1e-12)
        assert all("sq_norms" not in pt for pt in parts)
        # asked for (priority's filter), every worker holds the summed norms
        for pt in read_parts(path, target, W, norms=True):
            assert pt["sq_norms"].tobytes() == f["sq_norms"].tobytes()
    return None


# -- the parts are the whole file -----------------------------------------------------
def test_libsvm_and_mtx_parts_are_the_whole_file(tmp_path):
    plain = svm_text(X0, L0)
    assert same_as_check(write(tmp_path, "d.svm", plain)) is None
    assert same_as_check(write(tmp_path, "pm.svm", svm_text(X0, Y0))) is None
    wide = b"1 1:0.5 50000:1.5\n0 2:1 3:2\n1 3:1\n0 1:2\n"  # empty columns left out
    assert same_as_check(write(tmp_path, "wide.svm", wide)) is None
    path = str(tmp_path / "X.mtx")
    scipy.io.mmwrite(path, X0, precision=17)
    ytxt = write(tmp_path, "y.txt", "".join(f"{v}\n" for v in L0).encode())
    np.save(tmp_path / "y.npy", L0.astype(float))
    for target in (ytxt, str(tmp_path / "y.npy")):
        assert same_as_check(path, target) is None


@pytest.mark.parametrize("at", [0, 20, 45, 59])  # in worker 0's part .. the last one's
def test_a_third_label_anywhere_is_refused_as_the_whole_file(tmp_path, at):
    labels = L0.astype(float)
    labels[at] = 5.0
    msg = same_as_check(write(tmp_path, "d.svm", svm_text(X0, labels)))
    assert msg is not None and "3 distinct labels (3, 5, 7)" in msg
    many = np.arange(60, dtype=float)  # a regression target: 60 distinct values
    msg = same_as_check(write(tmp_path, "r.svm", svm_text(X0, many)))
    assert "60 distinct labels (0, 1, 2, 3, 4, ...)" in msg and "sample 3 has a third" in msg


def test_a_single_label_is_refused(tmp_path):
    msg = same_as_check(write(tmp_path, "d.svm", svm_text(X0, np.ones(60))))
    assert msg.endswith("every label is 1: logistic regression needs samples of two "
                        "classes")


@pytest.mark.parametrize("line", [1, 25, 60])
def test_a_bad_line_in_any_part_gives_the_whole_file_message(tmp_path, line):
    lines = svm_text(X0, L0).splitlines(keepends=True)
    lines[line - 1] = b"1 2:x\n"
    msg = same_as_check(write(tmp_path, "d.svm", b"".join(lines)))
    assert msg == f"{tmp_path / 'd.svm'}:{line}: '2:x' is not index:value"


# -- the command line ------------------------------------------------------------------
def _refused(args, np_=None):
    p = run_cli(["strads.apps.logreg", *args, "--quiet", "--max-rounds", "3"], np=np_,
                timeout=200)
    assert p.returncode == 2, p.stderr
    assert "Traceback" not in p.stderr, p.stderr
    errs = [ln for ln in p.stderr.splitlines() if "error:" in ln]
    assert len(errs) == 1, p.stderr
    return errs[0]


@pytest.mark.timeout(300)
def test_cli_third_label_is_one_line_also_under_mpi(tmp_path):
    labels = L0.astype(float)
    labels[40] = 5.0
    path = write(tmp_path, "three.svm", svm_text(X0, labels))
    expected = (f"error: {path}: 3 distinct labels (3, 5, 7): logistic regression needs "
                "exactly two (sample 41 has a third, 5)")
    assert _refused(["--data", path, "--workers", "3"]).endswith(expected)
    assert _refused(["--data", path], np_=4).endswith(expected)


def test_empty_columns_and_npz_on_rank0(tmp_path):
    """Features absent from the file are left out of the solve and 0 in the model; an
    .npz file is still read on rank 0 and split (the same optimum)."""
    far = write(tmp_path, "far.svm", b"1 3:0.5 5000:1.5\n0 2:1.0 3:0.25\n1 2:-0.5\n"
                                      b"0 3:2 4:1\n")
    model, s = _fit(["--data", far, "--lambda", "0.01", "--workers", "2", "--tol", "1e-10"],
                    tmp_path / "far")
    Xr, yr = logreg.load(far)
    mem = logreg.fit(Xr, yr, lam=0.01, tol=1e-10, workers=2, quiet=True)
    assert model["coef"].shape == (5000,) and np.count_nonzero(model["coef"]) > 0
    assert s["objective"] == pytest.approx(mem.objective, rel=1e-9)
    np.savez(tmp_path / "d.npz", X=X0.toarray(), y=L0)
    a, _ = _fit(["--data", str(tmp_path / "d.npz"), "--workers", "2", "--tol", "1e-10"],
                tmp_path / "npz")
    b, _ = _fit(["--data", write(tmp_path, "d.svm", svm_text(X0, L0)), "--workers", "2",
                 "--tol", "1e-10"], tmp_path / "svm")
    np.testing.assert_allclose(a["coef"], b["coef"], atol=1e-7)
    np.testing.assert_array_equal(a["classes"], b["classes"])
