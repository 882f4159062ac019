"""Defects found by a read-only hunt on the file readers (valid but unusual files,
compared with independent references). Each test is xfail(strict): it fails on the
current code for the reason given, and passes once the defect is fixed."""
import numpy as np
import pytest
import scipy.io

from strads.errors import DataError
from strads.io import mtx


@pytest.mark.xfail(strict=True, reason="MatrixMarket integer values >= 2^62 are silently "
                   "saturated to +-2^62 (scipy.io.mmread reads 5e18 exactly)")
def test_mtx_integer_value_beyond_2_62_is_not_saturated(tmp_path):
    path = tmp_path / "big.mtx"
    path.write_text("%%MatrixMarket matrix array integer general\n2 1\n"
                    "5000000000000000000\n3\n")
    ref = np.asarray(scipy.io.mmread(str(path)), dtype=np.float64)  # [[5e18], [3]]
    assert ref[0, 0] == 5e18
    X = np.asarray(mtx.read(str(path)))
    assert X[0, 0] == ref[0, 0]  # strads: 4.611686018427388e18 (2^62)


@pytest.mark.xfail(strict=True, reason="a MatrixMarket integer value beyond int64 is read "
                   "as +-2^62 instead of refused (scipy.io.mmread: 'Integer out of range')")
def test_mtx_integer_value_beyond_int64_is_refused(tmp_path):
    path = tmp_path / "huge.mtx"
    path.write_text("%%MatrixMarket matrix coordinate integer general\n2 2 2\n"
                    "1 1 -100000000000000000000\n2 2 7\n")
    with pytest.raises(Exception):  # the reference refuses the file
        scipy.io.mmread(str(path))
    try:
        X = mtx.read(str(path)).toarray()
    except DataError:
        return  # a refusal is right
    assert X[0, 0] == -1e20  # strads: -4.611686018427388e18 (-2^62), silently


@pytest.mark.xfail(strict=True, reason="a \\r\\n file whose \\r is the 65,536th byte (the "
                   "sniffed head's last) is refused as lone-\\r (classic Mac) text")
def test_crlf_split_by_the_sniff_boundary_is_not_lone_cr(tmp_path):
    from sklearn.datasets import load_svmlight_file
    from strads.io import svmlight

    first = "1 " + " ".join(f"{j}:1" for j in range(1, 9000))
    first = first + " " * (65535 - len(first))  # the \r is byte 65,536: the head's last
    path = tmp_path / "crlf.svm"
    path.write_bytes((first + "\r\n0 1:2\r\n").encode())
    Xr, yr = load_svmlight_file(str(path))  # (2, 8999)
    X, y = svmlight.read(str(path))  # DataError: lines end with a lone carriage return
    assert X.shape == Xr.shape and (X != Xr.tocsc()).nnz == 0
    assert np.array_equal(y, yr)


@pytest.mark.xfail(strict=True, reason="a 'real hermitian' MatrixMarket file (a symmetric "
                   "real matrix) is refused as complex; scipy.io.mmread reads it")
def test_mtx_real_hermitian_is_read_as_symmetric(tmp_path):
    path = tmp_path / "rh.mtx"
    path.write_text("%%MatrixMarket matrix coordinate real hermitian\n3 3 2\n2 1 5\n3 3 1\n")
    ref = scipy.io.mmread(str(path)).toarray()  # [[0 5 0] [5 0 0] [0 0 1]]
    X = mtx.read(str(path))  # DataError: complex MatrixMarket matrices are not supported
    assert np.array_equal(X.toarray(), ref)


@pytest.mark.xfail(strict=True, reason="a plain-text corpus whose first bytes are 'BZh' is "
                   "refused as bzip2 data (3 bytes of magic; bzip2 has 'BZh1'-'BZh9' + "
                   "a block magic)")
def test_text_corpus_starting_with_BZh_is_not_bzip2(tmp_path):
    from strads.apps.lda import data as lda_data

    path = tmp_path / "docs.txt"
    path.write_text("BZhang and Smith wrote papers about topics\n"
                    "Smith wrote more papers about topics\n")
    X, vocab = lda_data.load(str(path), "text", None, 1)  # DataError: bzip2-compressed
    # the hand reading: stop words dropped, words of 2 characters or more
    assert vocab == ["bzhang", "papers", "smith", "topics", "wrote"]
    assert X.toarray().tolist() == [[1, 1, 1, 1, 1], [0, 1, 1, 1, 1]]


@pytest.mark.xfail(strict=True, reason="--format auto takes an LDA-C file that starts with "
                   "three empty documents ('0' lines) for UCI and refuses line 4 without "
                   "naming the guess or --format")
def test_ldac_starting_with_three_empty_documents_auto(tmp_path):
    from strads.apps.lda import data as lda_data

    path = tmp_path / "corpus.ldac"
    path.write_text("0\n0\n0\n3 0:1 1:1 2:1\n2 0:2 2:1\n")
    # the hand reading: line d + 1 is document d, 'N id:count ...', 0-based ids
    want = [[0, 0, 0], [0, 0, 0], [0, 0, 0], [1, 1, 1], [2, 0, 1]]
    X, _ = lda_data.load(str(path), "ldac")
    assert X.toarray().tolist() == want  # (read right when the format is given)
    try:
        X, _ = lda_data.load(str(path))  # the default: --format auto
    except DataError as e:
        # a refusal must at least say the format was a guess (docs/apps/lda.md)
        assert "--format" in str(e), str(e)  # got: ':4: expected 'docID wordID count''
    else:
        assert X.toarray().tolist() == want
