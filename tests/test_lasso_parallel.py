"""Lasso parallel loading (--data): each worker reads its own part of the file.

The parts, put together, are the whole-file reader's matrix and target, for any number
of workers, and a bad file gets the whole-file reader's one line (the first bad line of
the file, wherever it lies). (The CLI under mpiexec: tests/test_contract.py.)"""
import functools
import gzip
import random

import numpy as np
import pytest
import scipy.io
import scipy.sparse as sp

import strads
from strads.apps.lasso import data as lasso_data
from strads.apps.lasso.data import load, make_problem

from test_glm import fit_cli, read_parts
from test_lasso_inputs import BOM, _finite, _tokens, svm_bytes

X0, Y0, _ = make_problem(60, 25, density=0.2, seed=11)
TARGET = "".join(f"{float(v)!r}\n" for v in Y0).encode()


read_parts = functools.partial(read_parts, lasso_data)  # every worker's part of a file


def _fit(args, out, np_=None):
    model, summary = fit_cli("lasso", args, out, np_)
    return model["coef"], summary


def write(tmp_path, name, data):
    p = tmp_path / name
    p.write_bytes(data)
    return str(p)


def assembled(parts):
    """(X, y) of the parts put together: X over every feature, as load() reads it."""
    f = parts[0]["facts"]
    p, kept = f["n_features"], f["kept"]
    blocks = []
    for part in parts:
        indptr, indices, data = part["csc"]
        blocks.append(sp.csc_matrix((data, indices, indptr),
                                    shape=(part["n_rows"], indptr.shape[0] - 1)))
    X = sp.vstack(blocks, format="csc")
    if kept is not None:
        full = sp.lil_matrix((X.shape[0], p))
        full[:, kept] = X
        X = full.tocsc()
    X.sort_indices()
    return X, np.concatenate([part["y"] for part in parts])


def same_as_load(path, target=None, workers=(1, 2, 3)):
    """The parts for every W equal load()'s (X, y), and the facts are right; or every W
    raises load()'s message."""
    try:
        X, y = load(path, target)
    except strads.DataError as e:
        for W in workers:
            with pytest.raises(strads.DataError) as mine:
                read_parts(path, target, W)
            assert str(mine.value) == str(e), W
        return str(e)
    for W in workers:
        if W > X.shape[0]:  # (refused: each worker needs rows)
            with pytest.raises(strads.DataError, match="each worker needs rows"):
                read_parts(path, target, W)
            continue
        parts = read_parts(path, target, W)
        Xp, yp = assembled(parts)
        assert Xp.shape == X.shape and yp.tobytes() == y.tobytes()
        assert (Xp != X).nnz == 0
        f = parts[0]["facts"]
        assert f["n"] == X.shape[0] == sum(pt["n_rows"] for pt in parts)
        cols = np.flatnonzero(np.diff(X.indptr)) if sp.issparse(X) else np.arange(X.shape[1])
        assert (f["kept"] is None) == (cols.shape[0] == X.shape[1])
        if f["kept"] is not None:
            np.testing.assert_array_equal(f["kept"], cols)
        Xk = X[:, cols]
        np.testing.assert_allclose(f["sq_norms"], np.asarray(Xk.multiply(Xk).sum(0)).ravel(),
                                   rtol=1e-12)
        np.testing.assert_allclose(f["xty"], Xk.T @ y, rtol=1e-10, atol=1e-12)
        if sp.issparse(Xk):
            np.testing.assert_array_equal(f["col_nnz"], np.diff(sp.csc_matrix(Xk).indptr))
        assert f["yy"] == pytest.approx(float(y @ y), rel=1e-12)
        assert [pt["first"] for pt in parts] == list(np.cumsum([0] + [pt["n_rows"]
                                                                for pt in parts])[:-1])
    return None


# -- the parts are the whole file ---------------------------------------------------------
def test_libsvm_parts_are_the_whole_file(tmp_path):
    plain = svm_bytes(X0, Y0)
    for name, data in [("d.svm", plain), ("bom.svm", BOM + plain),
                       ("d.svm.gz", gzip.compress(BOM + plain)),
                       ("crlf.svm", plain.replace(b"\n", b"\r\n")),
                       ("zero.svm", b"1 qid:7 0:1.5 2:-2#c\n\n-1 1:1e-3\n\n# x\n2 5:1\n"),
                       ("wide.svm", b"1 1:0.5 50000:1.5\n-1 2:1 3:2\n0.5 3:1\n")]:
        assert same_as_load(write(tmp_path, name, data)) is None, name


def test_mtx_parts_are_the_whole_file(tmp_path):
    rng = np.random.default_rng(5)
    S = sp.random(30, 30, density=0.2, random_state=rng, format="csc")
    target = "".join(f"{float(v)!r}\n" for v in rng.standard_normal(30)).encode()
    ypath = write(tmp_path, "y.txt", b"# targets\n" + target.replace(b"\n", b"\n\n", 3))
    np.save(tmp_path / "y.npy", rng.standard_normal(30))
    cases = [(S, {}), (sp.tril(S + S.T).tocsc(), {"symmetry": "symmetric"}),
             (sp.tril(S - S.T, k=-1).tocsc(), {"symmetry": "skew-symmetric"}),
             (S.astype(bool).astype(float), {"field": "pattern"}),
             (sp.csc_matrix(np.round(S.toarray() * 100)), {"field": "integer"})]
    for k, (A, kw) in enumerate(cases):
        path = str(tmp_path / f"a{k}.mtx")
        scipy.io.mmwrite(path, A, **kw)
        for y in (ypath, str(tmp_path / "y.npy")):
            assert same_as_load(path, y) is None, kw
    gz = write(tmp_path, "g.mtx.gz", gzip.compress(open(path, "rb").read()))
    assert same_as_load(gz, write(tmp_path, "g.txt.gz", gzip.compress(target))) is None
    # a target for a LIBSVM file replaces its labels, split as its rows
    assert same_as_load(write(tmp_path, "d.svm", svm_bytes(X0, Y0)),
                        write(tmp_path, "t.txt", TARGET[::-1][1:][::-1] + b"\n")) is None


@pytest.mark.filterwarnings("ignore::RuntimeWarning")  # values near 1e308 overflow y'y
def test_random_files_read_or_refused_as_the_whole_file(tmp_path):
    """Random LIBSVM files, some with bad lines anywhere: every W reads load()'s
    matrix, or names load()'s first bad line (whichever worker's part holds it)."""
    rng = random.Random(12)
    toks = _tokens(rng, 400)
    valid = [t for t in toks if _finite(t)]
    errors = agree = 0
    for k in range(60):
        lines = []
        for _ in range(rng.randint(1, 30)):
            j, parts = rng.randint(-1, 1), [rng.choice(valid[:40] + [b"1", b"-1"])]
            for _ in range(rng.randint(0, 6)):
                j += 1 if rng.random() > 0.01 else 0
                v = rng.choice(toks if rng.random() < 0.01 else valid)
                parts.append(b"%d:%s" % (j, v))
            lines.append(b" ".join(parts) if rng.random() > 0.05 else b"# c")
        path = write(tmp_path, f"r{k}.svm", b"\n".join(lines) + b"\n")
        if same_as_load(path) is None:
            agree += 1
        else:
            errors += 1
    assert agree > 10 and errors > 10


@pytest.mark.parametrize("text, expected", [
    (b"1 1:2\n" * 20 + b"2 3:abc\n" + b"1 1:2\n" * 5 + b"x 1:1\n",
     "d.svm:21: '3:abc' is not index:value"),  # two bad lines: the first is named
    (b"1 1:2\n" * 30 + b"1 2:1 1:3\n", "d.svm:31: feature indices must increase"),
    (b"# only\n" * 40, "d.svm: no samples (empty file)"),
    (b"1\n" * 40, "d.svm: no features (every sample is empty)"),
    (b"1 1:2\n" * 30 + b"1 1:inf\n", "d.svm:31: feature 1 has value inf"),
])
def test_bad_lines_in_any_part_give_the_whole_file_message(tmp_path, text, expected):
    msg = same_as_load(write(tmp_path, "d.svm", text))
    assert msg is not None and expected in msg


@pytest.mark.parametrize("body, expected", [
    (b"3 2 3\n1 1 1.5\n2 2 2\n", "declares 3 entries, the file has 2"),
    (b"3 2 2\n1 1 1.5\n2 2 2\n3 1 1\n", ":5: more entries than the 2 the header declares"),
    (b"3 2 3\n1 1 1.5\n2 2 2\n1 1 1\n", ":5: entry (row 1, column 1) is given twice, also "
                                        "on line 3"),
    (b"3 2 3\n1 1 1.5\n4 2 2\n1 2 1\n", ":4: row index 4 is out of range 1..3"),
    (b"3 2 5\n1 1 1.5\n2 2 2\n3 2 1\n2 1 5\n2 x 1\n", ":7: column index 'x' is not"),
    (b"3 2 4\n1 1 1.5\n2 2 2\n3 2 1\n2 1 5\n2 1 1\n", ":7: more entries than the 4"),
])
def test_bad_mtx_in_any_part_gives_the_whole_file_message(tmp_path, body, expected):
    path = write(tmp_path, "X.mtx", b"%%MatrixMarket matrix coordinate real general\n" + body)
    msg = same_as_load(path, write(tmp_path, "y.txt", b"1\n2\n3\n"))
    assert msg is not None and expected in msg


def test_bad_targets_in_any_part(tmp_path):
    path = str(tmp_path / "X.mtx")
    scipy.io.mmwrite(path, X0)
    lines = TARGET.splitlines(keepends=True)
    for text, expected in [(TARGET + b"1\n", "y.txt: 61 targets for 60 samples"),
                           (b"".join(lines[:50] + [b"foo\n"] + lines[50:]),
                            "y.txt:51: 'foo' is not a number"),
                           (b"".join(lines[:-1] + [b"1.5.5\n"]), "y.txt:60: '1.5.5' is not")]:
        msg = same_as_load(path, write(tmp_path, "y.txt", text))
        assert msg is not None and expected in msg, msg
    msg = same_as_load(path)
    assert "holds no target vector" in msg


def test_empty_parts_are_fine(tmp_path):
    """A few long lines and many workers: some parts hold no line at all."""
    long = b"1 " + b" ".join(b"%d:1.5" % j for j in range(1, 400)) + b"\n"
    assert same_as_load(write(tmp_path, "l.svm", long + b"2 1:1\n" + b"-1 2:3\n"),
                        workers=(3,)) is None


# -- the command line ------------------------------------------------------------------
def test_cli_gzip_and_empty_columns(tmp_path):
    plain = svm_bytes(X0, Y0)
    ref, s = _fit(["--data", write(tmp_path, "d.svm", plain), "--workers", "3"], tmp_path / "a")
    gz, _ = _fit(["--data", write(tmp_path, "d.svm.gz", gzip.compress(plain)), "--workers",
                  "3"], tmp_path / "b")
    assert ref.tobytes() == gz.tobytes() and s["stop_reason"] == "tol"
    far = write(tmp_path, "far.svm", b"1 3:0.5 50000000:1.5\n-1 2:1.0 3:0.25\n0.5 2:-0.5\n")
    coef, s = _fit(["--data", far, "--lambda", "0.01", "--workers", "2"], tmp_path / "c")
    assert coef.shape == (50_000_000,) and np.count_nonzero(coef) > 0
    assert s["screened"] >= 50_000_000 - 3
