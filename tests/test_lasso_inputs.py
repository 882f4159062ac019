"""Lasso readers on hard inputs: a UTF-8 BOM, gzip, CRLF read exactly as the plain file;
garbage, missing or oversized input is refused with one line (``FILE:LINE: problem``,
exit status 2, no traceback) before anything is allocated or fitted; the numba LIBSVM
parser agrees with its Python reference line by line and with float() bit for bit."""
import bz2
import json
import gzip
import random
import re
import struct
import zipfile

import numpy as np
import pytest
import scipy.io
import scipy.sparse as sp

import strads
from strads.io import memory, mtx
from strads.io import svmlight as S
from strads.io.numbers import py_float
from strads.transport import on_threads
from strads.apps.lasso.data import load, make_problem

from conftest import run_cli

BOM = b"\xef\xbb\xbf"
MTX = b"%%MatrixMarket matrix coordinate real general\n"


def svm_bytes(X, y):
    """LIBSVM text of (X, y), 1-based, values as repr (17 significant digits)."""
    X = sp.csr_matrix(X)
    lines = []
    for i in range(X.shape[0]):
        a, b = X.indptr[i], X.indptr[i + 1]
        pairs = " ".join(f"{j + 1}:{float(v)!r}" for j, v in zip(X.indices[a:b], X.data[a:b]))
        lines.append(f"{float(y[i])!r} {pairs}\n")
    return "".join(lines).encode()


def write(tmp_path, name, data):
    p = tmp_path / name
    p.write_bytes(data)
    return str(p)


def same(a, b):
    """X and y equal bit for bit (CSC: indptr, indices, data; dense: values)."""
    (Xa, ya), (Xb, yb) = a, b
    assert ya.tobytes() == yb.tobytes()
    if sp.issparse(Xa):
        assert Xa.shape == Xb.shape
        for k in ("indptr", "indices", "data"):
            assert getattr(Xa, k).tobytes() == getattr(Xb, k).tobytes(), k
    else:
        assert Xa.shape == Xb.shape and Xa.tobytes(order="F") == Xb.tobytes(order="F")


def refused(args, expected):
    p = run_cli(["strads.apps.lasso", *args, "--max-rounds", "3", "--quiet"], timeout=120)
    assert p.returncode == 2, p.stderr
    assert "Traceback" not in p.stderr, p.stderr
    last = p.stderr.strip().splitlines()[-1]
    assert expected in last, p.stderr
    return last


X0, Y0, _ = make_problem(40, 25, density=0.2, seed=11)
PLAIN = svm_bytes(X0, Y0)


# -- BOM, gzip, CRLF: exactly the plain file ----------------------------------------------
def test_bom_gzip_and_crlf_read_as_the_plain_file(tmp_path):
    ref = load(write(tmp_path, "d.svm", PLAIN))
    np.testing.assert_array_equal(ref[0].toarray(), X0.toarray())  # and values as float()
    assert ref[1].tobytes() == Y0.tobytes()
    for name, data in [("bom.svm", BOM + PLAIN), ("d.svm.gz", gzip.compress(PLAIN)),
                       ("hidden.txt", gzip.compress(PLAIN)),  # gzip without the suffix
                       ("bom.svm.gz", gzip.compress(BOM + PLAIN)),
                       ("two_members.svm.gz", gzip.compress(PLAIN[:500]) +
                        gzip.compress(PLAIN[500:])),
                       ("crlf.svm", PLAIN.replace(b"\n", b"\r\n"))]:
        same(load(write(tmp_path, name, data)), ref)


def test_bom_and_gzip_cli_models_equal_the_plain_one(tmp_path):
    models = []
    for name, data in [("d.svm", PLAIN), ("bom.svm", BOM + PLAIN),
                       ("d.svm.gz", gzip.compress(BOM + PLAIN))]:
        out = tmp_path / ("out_" + name)
        p = run_cli(["strads.apps.lasso", "--data", write(tmp_path, name, data),
                     "--max-rounds", "3", "--quiet", "--out", str(out)])
        assert p.returncode == 0, p.stderr
        models.append(np.load(out / "model.npz")["coef"])
    assert models[0].shape == (25,) and np.any(models[0])
    for m in models[1:]:
        assert m.tobytes() == models[0].tobytes()


def test_mtx_and_target_with_bom_and_gzip(tmp_path):
    scipy.io.mmwrite(str(tmp_path / "X.mtx"), X0)
    mtx = (tmp_path / "X.mtx").read_bytes()
    target = "".join(f"{float(v)!r}\n" for v in Y0).encode()
    ref = load(str(tmp_path / "X.mtx"), write(tmp_path, "y.txt", target))
    np.testing.assert_array_equal(ref[0].toarray(), X0.toarray())
    assert ref[1].tobytes() == Y0.tobytes()
    for xname, xdata, yname, ydata in [
            ("b.mtx", BOM + mtx, "b.txt", BOM + target),
            ("g.mtx.gz", gzip.compress(mtx), "g.txt.gz", gzip.compress(target)),
            ("bg.mtx.gz", gzip.compress(BOM + mtx), "bg.txt", gzip.compress(BOM + target)),
            ("crlf.mtx", mtx.replace(b"\n", b"\r\n"), "crlf.txt",
             target.replace(b"\n", b"\r\n"))]:
        same(load(write(tmp_path, xname, xdata), write(tmp_path, yname, ydata)), ref)
    np.save(tmp_path / "y.npy", Y0)
    ynpy = gzip.compress((tmp_path / "y.npy").read_bytes())
    same(load(str(tmp_path / "X.mtx"), write(tmp_path, "y.npy.gz", ynpy)), ref)


def test_npz_gzipped_reads_as_plain(tmp_path):
    np.savez(tmp_path / "d.npz", X=X0.toarray(), y=Y0)
    ref = load(str(tmp_path / "d.npz"))
    same(load(write(tmp_path, "d.npz.gz", gzip.compress((tmp_path / "d.npz").read_bytes()))),
         ref)


# -- broken compression, binary garbage ---------------------------------------------------
def test_broken_gzip_and_other_compressions_are_one_line(tmp_path):
    gz = gzip.compress(PLAIN)
    with pytest.raises(strads.DataError, match=r"t\.svm\.gz: not a valid gzip file"):
        load(write(tmp_path, "t.svm.gz", gz[:len(gz) // 2]))  # truncated
    bad_crc = bytearray(gz)
    bad_crc[-8] ^= 0xFF
    with pytest.raises(strads.DataError, match=r"c\.svm\.gz: not a valid gzip file.*CRC"):
        load(write(tmp_path, "c.svm.gz", bytes(bad_crc)))
    with pytest.raises(strads.DataError, match=r"z\.svm: bzip2-compressed"):
        load(write(tmp_path, "z.svm", bz2.compress(PLAIN)))
    with pytest.raises(strads.DataError, match=r"e\.svm\.gz: empty file \(after gzip"):
        load(write(tmp_path, "e.svm.gz", gzip.compress(b"")))


def test_gzip_larger_than_memory_is_refused(tmp_path, monkeypatch):
    path = write(tmp_path, "big.svm.gz", gzip.compress(PLAIN * 50))
    monkeypatch.setattr(memory, "physical_memory", lambda: 100_000)
    with pytest.raises(strads.DataError, match="decompresses to more than this machine's"):
        load(path)


RANDOM = np.random.default_rng(0).integers(0, 256, 5000, dtype=np.uint8).tobytes()


@pytest.mark.parametrize("name, data, expected", [
    ("r.svm", RANDOM, f"r.svm:{RANDOM[:RANDOM.index(0)].count(10) + 1}: binary data (byte 0x00)"),
    ("n.svm", b"\x93NUMPY\x01\x00v\x00{'descr': '<f8'}", "n.svm: a NumPy .npy file, not LIBSVM"),
    ("u.svm", "1 1:2\n".encode("utf-16"), "u.svm: UTF-16 text"),
    ("late.svm", b"1 1:2\n2 1:3 # fine\n3 1:4 \x01\n", "late.svm:3: binary data (byte 0x01)"),
])
def test_binary_garbage_is_one_line(tmp_path, name, data, expected):
    with pytest.raises(strads.DataError) as e:
        load(write(tmp_path, name, data))
    assert expected in str(e.value) and "\n" not in str(e.value)


def test_garbage_without_control_bytes_is_one_short_line(tmp_path):
    rng = random.Random(1)
    junk = bytes(rng.choice(b"abc\xff\xfe\x80:#.-+e9 ") for _ in range(20000))
    with pytest.raises(strads.DataError) as e:
        load(write(tmp_path, "j.svm", b"X" * 5000 + junk))
    msg = str(e.value)
    assert "j.svm:1: label 'XXXX" in msg and msg.endswith("...' is not a number")
    assert len(msg) < 200 + len(str(tmp_path))


# -- missing files, directories, binary targets (CLI: one line, exit 2) ---------------------
def test_cli_missing_directory_and_binary_inputs(tmp_path):
    scipy.io.mmwrite(str(tmp_path / "X.mtx"), X0)
    mtx = str(tmp_path / "X.mtx")
    (tmp_path / "dir").mkdir()
    np.save(tmp_path / "y.npy", Y0)
    binary = write(tmp_path, "y.bin", bytes(range(256)) * 4)
    refused(["--data", str(tmp_path / "dir")], f"{tmp_path / 'dir'}: is a directory")
    refused(["--data", mtx, "--target", str(tmp_path / "nope.txt")],
            f"{tmp_path / 'nope.txt'}: no such file")
    refused(["--data", mtx, "--target", str(tmp_path / "dir")],
            f"{tmp_path / 'dir'}: is a directory, not a file")
    refused(["--data", mtx, "--target", binary], f"{binary}:1: binary data (byte 0x00)")
    refused(["--data", mtx, "--target", str(tmp_path / "y.npy.txt")], "no such file")
    (tmp_path / "y.npy.txt").write_bytes((tmp_path / "y.npy").read_bytes())
    refused(["--data", mtx, "--target", str(tmp_path / "y.npy.txt")],
            "y.npy.txt: a NumPy .npy file, not target text")
    refused(["--data", str(tmp_path / "y.npy")], "y.npy: a NumPy .npy file, not LIBSVM text")


def test_cli_flags(tmp_path):
    last = refused(["--lambda", "inf"], "argument --lambda: must be a finite number, got inf")
    assert last.startswith("python -m strads.apps.lasso: error:")
    refused(["--lambda-ratio", "1e999"], "must be a finite number")
    refused(["--target", str(tmp_path / "y.txt")], "--target needs --data")
    refused(["--data", ""], "argument --data: empty path")


@pytest.mark.parametrize("app", ["lasso", "logreg"])
def test_target_is_refused_where_the_data_holds_y(tmp_path, capsys, app):
    """--target would replace the labels of a LIBSVM file or an .npz with y: refused in one
    line naming both files and why, before any file is read; with MatrixMarket or a
    save_npz matrix it is y."""
    from strads.apps.glm.cli import main
    from strads.apps.lasso import DATAFIT as LASSO
    from strads.apps.logreg import DATAFIT as LOGREG

    y = write(tmp_path, "y.txt", b"1\n")
    svm = write(tmp_path, "d.svm.gz", gzip.compress(PLAIN))
    np.savez(tmp_path / "xy.npz", X=X0.toarray(), y=Y0)
    for data, why in [(svm, "its LIBSVM labels"), (str(tmp_path / "xy.npz"), "its array y")]:
        with pytest.raises(SystemExit) as e:
            main(LASSO if app == "lasso" else LOGREG, ["--data", data, "--target", y])
        assert e.value.code == 2
        assert capsys.readouterr().err == (
            f"python -m strads.apps.{app}: error: --target {y} would replace the y that "
            f"--data {data} holds ({why}): --target is for MatrixMarket and save_npz data "
            "only\n")
    from strads.apps.glm.cli import own_target

    sp.save_npz(tmp_path / "X.npz", X0)
    assert own_target(str(tmp_path / "X.npz")) is None
    assert own_target(str(tmp_path / "X.mtx")) is None


def test_a_misnamed_file_says_the_format_its_name_chose(tmp_path):
    """The matrix readers go by the name: a file of another format says which its name
    chose, and the rule."""
    rule = "*.mtx, *.mm: MatrixMarket; *.npz: NumPy; else LIBSVM; each also .gz)"
    mm = write(tmp_path, "m.mtx", MTX + b"2 2 1\n1 1 1.5\n")
    np.savez(tmp_path / "xy.npz", X=X0.toarray(), y=Y0)
    for name, body, said in [
            ("m.txt", open(mm, "rb").read(), ":1: a MatrixMarket banner, not LIBSVM text "
             "(read as LIBSVM by its name: "),
            ("xy.svm.gz", gzip.compress(open(tmp_path / "xy.npz", "rb").read()),
             ": a zip archive inside the gzip data, not LIBSVM text; only plain or "
             "gzip-compressed text is read (read as LIBSVM by its name: "),
            ("s.mtx", PLAIN, ":1: not a MatrixMarket file"),
            ("s.npz", PLAIN, ": cannot read as .npz")]:
        with pytest.raises(strads.DataError) as e:
            load(write(tmp_path, name, body))
        assert str(e.value).startswith(str(tmp_path / name) + said), str(e.value)
        assert str(e.value).endswith(rule) and "read as " in str(e.value)
    with pytest.raises(strads.DataError, match=r"banner, not target text \(read as a text "
                       r"target by its name: \*.npy: NumPy; else one number a line; each"):
        load(mm, write(tmp_path, "y.txt", MTX))


def test_target_lines(tmp_path):
    X = str(tmp_path / "X.mtx")
    scipy.io.mmwrite(X, X0[:3])
    for text, expected in [
            ("1\n2\n", "y.txt: 2 targets for 3 samples"),
            ("1\n2 3\n4\n", "y.txt:2: '2 3' is not a number"),
            ("1\n# c\n\ninf\n2\n", "y.txt:4: target is inf, not finite"),
            ("1\n1_0\n2\n", "y.txt:2: '1_0' is not a number"),
            ("1\n2\n1e400\n", "y.txt:3: target is inf, not finite")]:
        with pytest.raises(strads.DataError, match=expected):
            load(X, write(tmp_path, "y.txt", text.encode()))
    X_, y = load(X, write(tmp_path, "y.txt", b"\xef\xbb\xbf 1.5 # one\r\n\n-2e-3\n+.25"))
    assert y.tolist() == [1.5, -0.002, 0.25]


# -- sizes: refused before allocation ------------------------------------------------------
@pytest.mark.parametrize("index", [10 ** 12, 10 ** 20, 2 ** 63, 10 ** 400])
def test_absurd_feature_index_is_refused_on_its_line(tmp_path, index):
    path = write(tmp_path, "d.svm", f"1 1:2\n2 3:1 {index}:2.5\n".encode())
    with pytest.raises(strads.DataError) as e:
        load(path)
    msg = str(e.value)
    assert msg.startswith(f"{path}:2: feature index {index} is too large: ")
    assert "more than this machine's physical memory" in msg and "\n" not in msg


def test_feature_limit_follows_physical_memory(tmp_path, monkeypatch):
    monkeypatch.setattr(memory, "physical_memory", lambda: 64 * 1100)  # room for 1100 features
    ok = load(write(tmp_path, "ok.svm", b"1 1:2\n2 1000:1\n"))
    assert ok[0].shape == (2, 1000)
    with pytest.raises(strads.DataError, match=r"big\.svm:2: feature index 1101 is too large: "
                                               r"1,101 features would need about 0\.0672 MiB"):
        load(write(tmp_path, "big.svm", b"1 1:2\n2 1101:1\n"))
    # within the per-index limit, but not with the samples and non-zeros on top
    with pytest.raises(strads.DataError, match=r"mid\.svm: 2 samples x 1,100 features with 2 "
                                               r"non-zeros, which would need about"):
        load(write(tmp_path, "mid.svm", b"1 1:2\n2 1100:1\n"))


def test_feature_index_of_5e7_costs_only_its_indptr(tmp_path):
    path = write(tmp_path, "wide.svm", b"1 1:0.5 50000000:1.5\n-1 2:1 3:2\n")
    X, y = load(path)
    assert X.shape == (2, 50_000_000) and X.nnz == 4
    assert X.indptr.dtype == np.int32 and X.indptr[-1] == 4 and X.indptr[3] == 3
    assert X.indices.tolist() == [0, 1, 1, 0] and y.tolist() == [1.0, -1.0]


def test_a_column_count_overflowing_int32_is_counted_again_in_int64(tmp_path, monkeypatch):
    text = b"".join(b"%d 1:%d 2:0.5\n" % (k, k) for k in range(300))
    path = write(tmp_path, "tall.svm", text)
    ref = load(path)
    monkeypatch.setattr(S, "_COUNTS", np.int8)  # overflows at 127 entries in a column
    b = np.frombuffer(text, dtype=np.uint8)
    assert S._svm_count(b, False, 10, np.zeros(16, np.int8), S.state()) == -1
    calls, count = [], S._svm_count
    monkeypatch.setattr(S, "_svm_count", lambda *a: calls.append(a[3].dtype) or count(*a))
    X, y = load(path)
    assert calls == [np.int8, np.int64] and X.indptr.tolist() == [0, 300, 600]
    assert X.toarray().tobytes() == ref[0].toarray().tobytes() and y.tobytes() == ref[1].tobytes()


def test_mtx_absurd_headers_are_refused(tmp_path):
    for body, expected in [
            (b"1000000000000 1000000000000 3\n1 1 1\n2 2 2\n3 3 3\n",
             "big.mtx:2: the header declares 1,000,000,000,000 samples x "
             "1,000,000,000,000 features with 3 non-zeros, which would need about"),
            (b"3 2 7\n1 1 1\n", "big.mtx:2: 7 entries declared, more than a general 3 x 2"),
            (b"3 2\n1 1 1\n", "big.mtx:2: the size line must be ROWS COLUMNS ENTRIES")]:
        with pytest.raises(strads.DataError, match=expected):
            load(write(tmp_path, "big.mtx", MTX + body))
    dense = b"%%MatrixMarket matrix array real general\n1000000 1000000\n1\n"
    with pytest.raises(strads.DataError, match=r"the header declares a dense 1,000,000 x "
                                               r"1,000,000 matrix, which would need"):
        load(write(tmp_path, "big.mtx", dense))


# -- MatrixMarket: same matrices as scipy, bad lines named ---------------------------------
def test_mtx_variants_match_scipy(tmp_path):
    rng = np.random.default_rng(5)
    S = sp.random(12, 12, density=0.3, random_state=rng, format="csc")
    sym = sp.tril(S + S.T).tocsc()
    skew = sp.tril(S - S.T, k=-1).tocsc()
    dense = rng.standard_normal((7, 5))
    cases = [(S, {}), (sym, {"symmetry": "symmetric"}), (skew, {"symmetry": "skew-symmetric"}),
             (dense, {}), (np.tril(dense[:5] + dense[:5].T), {"symmetry": "symmetric"}),
             (S.astype(bool).astype(float), {"field": "pattern"}),
             (sp.csc_matrix(np.round(S.toarray() * 100)), {"field": "integer"})]
    for k, (A, kw) in enumerate(cases):
        path = str(tmp_path / f"a{k}.mtx")
        scipy.io.mmwrite(path, A, **kw)
        mine = mtx.read(path)
        ref = scipy.io.mmread(path)
        ref = ref.toarray() if sp.issparse(ref) else ref
        got = mine.toarray() if sp.issparse(mine) else mine
        assert got.shape == ref.shape and got.tobytes() == np.asarray(ref, float).tobytes(), kw


@pytest.mark.parametrize("body, expected", [
    (b"3 2 3\n1 1 1.5\n2 2 2 7\n3 1 -1\n", ":4: expected 'row column value', got 4 fields"),
    (b"3 2 3\n1 1 1.5\n2 2 2\n", ": the header (line 2) declares 3 entries, the file has 2"),
    (b"3 2 2\n1 1 1.5\n2 2 2\n3 1 1\n", ":5: more entries than the 2 the header declares"),
    (b"3 2 3\n1 1 1.5\n2 2 2\n1 1 1\n", ":5: entry (row 1, column 1) is given twice, also on "
                                        "line 3; duplicates are not summed"),
    (b"3 2 3\n1 1 1.5\n4 2 2\n1 2 1\n", ":4: row index 4 is out of range 1..3"),
    (b"3 2 3\n1 1 1.5\n2 0 2\n1 2 1\n", ":4: column index 0 is out of range 1..2"),
    (b"3 2 3\n1 1 1.5\n2 x 2\n1 2 1\n", ":4: column index 'x' is not an integer"),
    (b"3 2 3\n% c\n1 1 1.5\n2 2 1e400\n1 2 1\n", ":5: entry (row 2, column 2) is inf, not finite"),
    (b"3 2 3\n1 1 1.5\n2 2 nan\n1 2 1\n", ":4: entry (row 2, column 2) is nan, not finite"),
    (b"3 2 3\n1 1 1.5\n2 2 0x1\n1 2 1\n", ":4: value '0x1' is not a number"),
    (b"3 2 3\n1 1 1.5\n2 2 \x00\n1 2 1\n", ":4: binary data (byte 0x00)"),
])
def test_bad_mtx_names_file_and_line(tmp_path, body, expected):
    path = write(tmp_path, "X.mtx", MTX + body)
    with pytest.raises(strads.DataError) as e:
        load(path, write(tmp_path, "y.txt", b"1\n2\n3\n"))
    assert str(e.value) == path + expected or str(e.value).startswith(path + expected)


def test_mtx_header_problems(tmp_path):
    for text, expected in [
            (b"%MatrixMarket matrix coordinate real general\n1 1 1\n1 1 1\n",
             "X.mtx:1: not a MatrixMarket file"),
            (b"%%MatrixMarket matrix coordinate complex general\n1 1 1\n1 1 1 0\n",
             "X.mtx:1: complex MatrixMarket matrices are not supported"),
            (b"%%MatrixMarket matrix coordinate real symmetric\n2 3 1\n1 1 1\n",
             "X.mtx:2: a symmetric matrix must be square"),
            (b"%%MatrixMarket matrix coordinate real symmetric\n2 2 2\n2 1 1\n1 2 1\n",
             "X.mtx:4: entry (row 2, column 1) is given twice (mirrored"),
            (b"%%MatrixMarket matrix coordinate real skew-symmetric\n2 2 1\n1 1 1\n",
             "X.mtx:3: diagonal entry (1, 1) in a skew-symmetric matrix"),
            (b"%%MatrixMarket matrix coordinate integer general\n2 2 2\n1 1 2\n2 2 1.5\n",
             "X.mtx:4: value '1.5' is not an integer"),
            (b"%%MatrixMarket matrix array integer general\n1 2\n3\n4.0\n",
             "X.mtx:4: value '4.0' is not an integer"),
            (BOM + b"garbage\n", "X.mtx:1: not a MatrixMarket file")]:
        with pytest.raises(strads.DataError, match=re.escape(expected)):
            mtx.read(write(tmp_path, "X.mtx", text))


# -- .npz ------------------------------------------------------------------------------------
def test_npz_corrupt_or_unsafe_is_one_line(tmp_path):
    np.savez(tmp_path / "d.npz", X=X0.toarray(), y=Y0)
    raw = (tmp_path / "d.npz").read_bytes()
    with pytest.raises(strads.DataError, match=r"t\.npz: cannot read as \.npz: BadZipFile"):
        load(write(tmp_path, "t.npz", raw[:len(raw) // 2]))
    flipped = bytearray(raw)
    flipped[len(raw) // 3] ^= 0xFF  # inside X's data: the zip CRC no longer matches
    with pytest.raises(strads.DataError, match=r"f\.npz: cannot read as \.npz"):
        load(write(tmp_path, "f.npz", bytes(flipped)))
    np.savez(tmp_path / "o.npz", X=np.array([[1, 2]], dtype=object), y=np.ones(1))
    with pytest.raises(strads.DataError, match=r"o\.npz: array 'X' holds Python objects"):
        load(str(tmp_path / "o.npz"))
    np.savez(tmp_path / "c.npz", X=np.ones((2, 2)) * 1j, y=np.ones(2))
    with pytest.raises(strads.DataError, match=r"c\.npz: X has dtype complex128"):
        load(str(tmp_path / "c.npz"))
    with pytest.raises(strads.DataError, match="complex"):
        strads.apps.lasso.fit(np.ones((3, 2)) * 1j, np.ones(3))


def test_npz_header_declaring_a_huge_array_is_refused_unread(tmp_path):
    from numpy.lib import format as npf

    path = tmp_path / "h.npz"
    with zipfile.ZipFile(path, "w") as z:
        with z.open("X.npy", "w") as f:  # a header for 1e6 x 1e6 float64, no data
            npf.write_array_header_1_0(f, {"descr": "<f8", "fortran_order": False,
                                           "shape": (10 ** 6, 10 ** 6)})
        with z.open("y.npy", "w") as f:
            np.save(f, np.ones(3))
    with pytest.raises(strads.DataError, match=r"h\.npz: a dense 1,000,000 x 1,000,000 "
                                               r"matrix, which would need about"):
        load(str(path))


# -- the numba parser: the reference parser's verdict on every line, float()'s values --------
def _tokens(rng, n):
    out = []
    for _ in range(n):
        r = rng.random()
        if r < 0.25:
            x = struct.unpack("<d", struct.pack("<Q", rng.getrandbits(64)))[0]
            out.append(repr(x))
        elif r < 0.45:
            out.append("%.*g" % (rng.randint(1, 25), rng.gauss(0, 1) * 10 ** rng.randint(-40, 40)))
        elif r < 0.6:
            d = "".join(rng.choice("0123456789") for _ in range(rng.randint(1, 45)))
            if rng.random() < 0.6:
                p = rng.randint(0, len(d))
                d = d[:p] + "." + d[p:]
            if rng.random() < 0.5:
                d += rng.choice("eE") + rng.choice(["", "+", "-"]) + str(rng.randint(0, 350))
            out.append(rng.choice(["", "+", "-"]) + d)
        elif r < 0.8:
            base = rng.choice(["1.5", "inf", "nan", "-Infinity", "1e5", ".5", "5.", "0x1p3",
                               "1_0", "1e", "e5", "--1", "+", ".", "1.2.3", "nan(1)", "infinit",
                               "1d5", "1e+", "1e-5x", "NaN", "iNF", "+INFINITY", "1:2", "\xa01"])
            if rng.random() < 0.5:
                i = rng.randint(0, len(base))
                base = base[:i] + rng.choice("0123456789.eE+-_xina:") + base[i:]
            out.append(base)
        else:  # the edges: overflow, subnormals, halfway cases, 19+ digits
            ovf = str(2 ** 1024 - 2 ** 970)
            out.append(rng.choice([
                "1.7976931348623157e308", "1.7976931348623158e308", "1.7976931348623159e308",
                "1.8e308", "17976931348623158e292", ovf, str(2 ** 1024 - 2 ** 970 - 1),
                ovf + ".0000001", "0." + ovf + "e309", "0.0" + ovf + "e310", "9" * 309,
                "4.9e-324", "2.4703282292062327e-324", "2.4703282292062328e-324", "1e-400",
                "2.2250738585072011e-308", "2.2250738585072014e-308", "9007199254740993",
                "9007199254740992.5", "1.00000000000000011102230246251565404236316680908203125",
                "1.00000000000000011102230246251565404236316680908203124", "0." + "0" * 400 + "1",
                "1" + "0" * 400 + "e-400", "123456789012345678901234567890", "-0", "-0.0e-5"]))
    return [t.encode("utf-8") for t in out]


def test_values_equal_python_float_bit_for_bit(tmp_path):
    rng = random.Random(2024)
    toks = _tokens(rng, 30000)
    good = []
    for t in toks:
        try:
            v = py_float(t)
        except ValueError:
            continue
        if np.isfinite(v):
            good.append((t, v))
    assert len(good) > 15000
    # as labels and as feature values, one feature per line (1:value)
    text = b"".join(b"%s 1:%s\n" % (t, t) for t, _ in good)
    X, y = S.read(write(tmp_path, "v.svm", text))
    want = np.array([v for _, v in good])
    assert y.tobytes() == want.tobytes()
    assert X.shape == (len(good), 1) and X.data.tobytes() == want.tobytes()
    zero_sign = [t for t, v in good if v == 0 and str(v).startswith("-")]
    at = [k for k, (t, _) in enumerate(good) if t in zero_sign]
    assert zero_sign and np.signbit(y[at]).all() and np.signbit(X.data[at]).all()


def test_numba_passes_agree_with_the_reference_on_every_line(tmp_path):
    """Each line alone: the numba pass 1 flags it exactly when parse_svm_line (or, for a
    target, parse_target_line) raises, and the values then match the reference."""
    rng = random.Random(7)
    toks = _tokens(rng, 3000)
    lines = []
    for _ in range(3000):
        parts = [rng.choice(toks)]
        j = rng.randint(-1, 3)
        for _ in range(rng.randint(0, 4)):
            j += rng.choice([1, 1, 3, 0, -1]) if rng.random() < 0.1 else 1
            r = rng.random()
            if r < 0.05:
                parts.append(rng.choice([b"qid:3", b"qid", b"qidx:1", b"qid:", b"QID:1"]))
            elif r < 0.1:
                parts.append(rng.choice([b"3", b":4", b"a:1", b"+2:1", b"1_0:2", b"2:",
                                         b"0%d:1" % j]))
            else:
                parts.append(b"%d:%s" % (j, rng.choice(toks)))
        line = rng.choice([b" ", b"\t", b"  \x0b"]).join(parts)
        line += rng.choice([b"", b"", b" # c", b"#x:y", b"\r", b" \x07"])
        lines.append(line)
    limit = S.max_features()
    for single in (False, True):
        for line in lines:
            b = np.frombuffer(line + b"\n", dtype=np.uint8)
            bad_line = S._count(b, single, limit)[0]
            try:
                (S.parse_target_line if single else
                 lambda *a: S.parse_line(*a, limit))("f", 1, line)
                ok = True
            except strads.DataError:
                ok = False
            assert (bad_line == 0) == ok, (single, line)


def _finite(tok):
    try:
        return bool(np.isfinite(py_float(tok)))
    except ValueError:
        return False


def _reference_read(path):
    raw = open(path, "rb").read()
    raw = raw[3:] if raw.startswith(BOM) else raw
    labels, rows, cols, vals = [], [], [], []
    for lineno, line in enumerate(raw.split(b"\n"), 1):
        got = S.parse_line(path, lineno, line)
        if got is None:
            continue
        label, pairs = got
        for j, v in pairs:
            rows.append(len(labels))
            cols.append(j)
            vals.append(v)
        labels.append(label)
    if not labels:
        raise strads.DataError(f"{path}: no samples (empty file)")
    if not cols:
        raise strads.DataError(f"{path}: no features (every sample is empty)")
    cols = np.array(cols)
    cols -= 1 if cols.min() > 0 else 0
    X = sp.csc_matrix((vals, (rows, cols)), shape=(len(labels), cols.max() + 1))
    X.sort_indices()
    return X, np.array(labels)


def test_random_files_read_as_the_reference(tmp_path):
    rng = random.Random(11)
    toks = _tokens(rng, 400)
    valid = [t for t in toks if _finite(t)]
    agree = errors = 0
    for k in range(150):
        lines = []
        for _ in range(rng.randint(1, 12)):
            r = rng.random()
            if r < 0.08:
                lines.append(b"")
            elif r < 0.12:
                lines.append(b"# a comment 1:2")
            else:
                j, parts = rng.randint(-1, 1), [rng.choice(toks[:40] + [b"1", b"-1"])]
                for _ in range(rng.randint(0, 6)):
                    j += 1 if rng.random() > 0.03 else 0
                    v = rng.choice(toks if rng.random() < 0.04 else valid)
                    parts.append(b"%d:%s" % (j, v) if rng.random() > 0.03 else b"qid:1")
                lines.append(b" ".join(parts))
        text = b"\n".join(lines) + rng.choice([b"", b"\n"])
        if rng.random() < 0.2:
            text = BOM + text
        path = write(tmp_path, f"r{k}.svm", text)
        try:
            ref = _reference_read(path)
        except strads.DataError as e:
            with pytest.raises(strads.DataError) as mine:
                S.read(path)
            assert str(mine.value) == str(e)
            errors += 1
            continue
        same(S.read(path), ref)
        agree += 1
    assert agree > 20 and errors > 20


@pytest.mark.parametrize("run", [1, 40, S.RUN])
def test_runs_of_columns_read_as_the_reference(tmp_path, monkeypatch, run):
    """Pass 2's runs of columns (at most ``S.RUN`` entries and 2^16 columns; a cell of
    more entries filled in place) cut anywhere read as the reference, the values left to
    float() among them, whole and on three workers."""
    monkeypatch.setattr(S, "RUN", run)
    rng = np.random.default_rng(run)
    lines = []
    for _ in range(300):
        cols = np.union1d(np.flatnonzero(rng.random(8) < 0.8),
                          rng.choice(200_000, 20, replace=False))
        vals = [b"1e-320" if rng.random() < 0.05 else repr(float(v)).encode()
                for v in rng.normal(size=cols.size)]
        label = b"1e-320" if rng.random() < 0.05 else b"%d" % rng.integers(-3, 4)
        lines.append(b" ".join([label] + [b"%d:%s" % (j + 1, v) for j, v in zip(cols, vals)]))
    path = write(tmp_path, "runs.svm", b"\n".join(lines) + b"\n")
    ref = _reference_read(path)
    same(S.read(path), ref)
    X, y = ref
    for part in on_threads(3, lambda peers: S.read_part(peers, path)):
        rows = slice(part["first"], part["first"] + part["n_rows"])
        kept = np.arange(X.shape[1]) if part["kept"] is None else part["kept"]
        want = X[rows][:, kept].tocsc()
        want.sort_indices()
        got = sp.csc_matrix(part["csc"][::-1], shape=want.shape)
        same((got, part["y"]), (want, y[rows]))


def test_line_messages_and_semantics(tmp_path):
    for text, where in [
            (b"1 1:2\n2 qid:1 2:x\n", r"d\.svm:2: '2:x' is not index:value"),
            (b"1 1:2\n2 1_0:1\n", r"d\.svm:2: '1_0:1' is not index:value"),
            (b"1 1:2\r\n\r\n2 3:1e999\r\n", r"d\.svm:3: feature 3 has value inf, not finite"),
            (b"1 1:2 # ok\n# 1 2:x\n-inf 1:3\n", r"d\.svm:3: label is -inf, not finite"),
            (b"1 1:2\n1 3:4 3:5\n", r"d\.svm:2: feature indices must increase \(3 after 3\)")]:
        with pytest.raises(strads.DataError, match=where):
            load(write(tmp_path, "d.svm", text))
    X, y = load(write(tmp_path, "z.svm", b"1 qid:7 0:1.5 2:-2#c\n\n-1 1:1e-3\n"))
    assert X.toarray().tolist() == [[1.5, 0, -2], [0, 0.001, 0]] and y.tolist() == [1, -1]
    X, y = load(write(tmp_path, "o.svm", b"1 1:1.5 3:-2\n-1 2:1e-3\n"))
    assert X.toarray().tolist() == [[1.5, 0, -2], [0, 0.001, 0]]


def test_a_far_feature_index_costs_no_state_per_absent_feature(tmp_path):
    """Two lines naming feature 5*10^7: the solve keeps only the non-empty columns (the
    others are 0 at the optimum) and the model is that of the compact problem."""
    far, near = tmp_path / "far.svm", tmp_path / "near.svm"
    far.write_text("1 3:0.5 50000000:1.5\n-1 2:1.0 3:0.25\n0.5 2:-0.5\n")
    near.write_text("1 2:0.5 3:1.5\n-1 1:1.0 2:0.25\n0.5 1:-0.5\n")
    outs = []
    for f in (far, near):
        out = tmp_path / f.stem
        p = run_cli(["strads.apps.lasso", "--data", str(f), "--lambda", "0.01", "--quiet",
                     "--out", str(out)])
        assert p.returncode == 0, p.stderr
        outs.append((np.load(out / "model.npz")["coef"],
                     json.loads((out / "summary.json").read_text())))
    (cf, sf), (cn, sn) = outs
    assert cf.shape == (50_000_000,) and cn.shape == (3,)
    np.testing.assert_array_equal(cf[[1, 2, 49_999_999]], cn)
    assert np.count_nonzero(cf) == np.count_nonzero(cn) > 0
    assert sf["objective"] == sn["objective"]
    assert sf["screened"] >= 50_000_000 - 3
    assert sf["traffic"][0]["peak_rss_mb"] < 1500  # was 2.1 GB: 38 bytes a feature


def test_a_relative_path_is_named_as_given(tmp_path, monkeypatch):
    # (the workers' errors named the absolute path, unlike the other apps' and the docs')
    from strads.apps import lasso

    monkeypatch.chdir(tmp_path)
    (tmp_path / "train.svm").write_bytes(b"1 1:2\n2 3:abc\n")
    with pytest.raises(strads.DataError, match=r"^train\.svm:2: '3:abc' is not index:value"):
        strads.run(lasso.make_file_setup("train.svm"), lasso.DATAFIT.Update, workers=2,
                   quiet=True)


def test_mtx_integer_value_beyond_2_62_is_not_saturated(tmp_path):
    # defects found by a hunt against independent readers (scipy, scikit-learn)
    path = tmp_path / "big.mtx"
    path.write_text("%%MatrixMarket matrix array integer general\n2 1\n"
                    "5000000000000000000\n3\n")
    ref = np.asarray(scipy.io.mmread(str(path)), dtype=np.float64)  # [[5e18], [3]]
    assert ref[0, 0] == 5e18
    X = np.asarray(mtx.read(str(path)))
    assert X[0, 0] == ref[0, 0]  # (was 2^62: the scanner saturates there)


def test_mtx_integer_value_beyond_int64_is_read_exactly(tmp_path):
    path = tmp_path / "huge.mtx"  # (scipy.io.mmread refuses it: "Integer out of range")
    path.write_text("%%MatrixMarket matrix coordinate integer general\n2 2 2\n"
                    "1 1 -100000000000000000000\n2 2 7\n")
    X = mtx.read(str(path)).toarray()
    assert X[0, 0] == -1e20 and X[1, 1] == 7  # (was -2^62, silently)


def test_crlf_split_by_the_sniff_boundary_is_not_lone_cr(tmp_path):
    from sklearn.datasets import load_svmlight_file

    first = "1 " + " ".join(f"{j}:1" for j in range(1, 9000))
    first = first + " " * (65535 - len(first))  # the \r is byte 65,536: the head's last
    path = tmp_path / "crlf.svm"
    path.write_bytes((first + "\r\n0 1:2\r\n").encode())
    Xr, yr = load_svmlight_file(str(path))  # (2, 8999)
    X, y = S.read(str(path))  # (was refused: lines end with a lone \r)
    assert X.shape == Xr.shape and (X != Xr.tocsc()).nnz == 0
    assert np.array_equal(y, yr)


def test_mtx_real_hermitian_is_read_as_symmetric(tmp_path):
    path = tmp_path / "rh.mtx"
    path.write_text("%%MatrixMarket matrix coordinate real hermitian\n3 3 2\n2 1 5\n3 3 1\n")
    ref = scipy.io.mmread(str(path)).toarray()  # [[0 5 0] [5 0 0] [0 0 1]]
    X = mtx.read(str(path))  # (was refused as complex)
    assert np.array_equal(X.toarray(), ref)
