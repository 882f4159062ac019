"""Strict xfails for defects found by the eleventh hunt (hunt11: real data files in their
published layouts, read by the apps' readers and command lines against scipy.io.mmread,
sklearn's load_svmlight_file, pandas, the `lda` package and scikit-learn's models; the
scripts were /tmp/h11/*.py). Each test fails on the code it was written against for the
reason it names, and passes once the defect is fixed (then drop its xfail mark)."""
import re

import pytest

import strads
from strads.apps.lda import data as lda_data

UCI = "3\n5\n{nnz}\n1 1 2\n1 3 1\n2 2 4\n2 5 1\n3 1 1\n3 4 3\n"  # docword.kos.txt's layout


@pytest.mark.xfail(strict=True, reason="UCI bag-of-words (docword.kos.txt: D, W, NNZ "
                   "header lines) whose NNZ line (line 3) disagrees with the entries that "
                   "follow is refused as 'docword.kos.txt: header says NNZ = 7 but 6 "
                   "entries follow', without a line, where docs/apps/lda.md's Bad input "
                   "promises 'path:line: problem' (MatrixMarket's count refusal names its "
                   "size line); it should name line 3")
@pytest.mark.parametrize("nnz", [7, 5])
def test_uci_nnz_mismatch_names_its_header_line(tmp_path, nnz):
    (tmp_path / "docword.kos.txt").write_text(UCI.format(nnz=nnz))
    (tmp_path / "vocab.kos.txt").write_text("a\nb\nc\nd\ne\n")
    path = str(tmp_path / "docword.kos.txt")
    with pytest.raises(strads.DataError) as e:
        lda_data.load(path)
    msg = str(e.value)
    assert f"NNZ = {nnz}" in msg and "\n" not in msg  # the refusal itself is right
    assert re.search(re.escape(path) + r":3: |line 3\b", msg), msg
