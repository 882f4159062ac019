"""Parallel loading's byte ranges: every line in exactly one part."""
import numpy as np
import pytest

from strads.io import source


@pytest.mark.parametrize("n_parts", [1, 2, 3, 5, 17])
@pytest.mark.parametrize("text", [b"a\nbb\nccc\n", b"a\nbb\nccc", b"x" * 1000 + b"\ny\n",
                                  b"\n\n\n", b"one line without newline",
                                  b"".join(b"%d %d\n" % (i, i * i) for i in range(500))])
@pytest.mark.parametrize("ends", ["\n", "\r\n", "\r"])
def test_parts_cover_every_line_once(tmp_path, n_parts, text, ends):
    text = text.replace(b"\n", ends.encode())
    universal = ends != "\n"
    path = tmp_path / "f.txt"
    path.write_bytes(b"HEADER" + ends.encode() + text)
    begin = len(b"HEADER" + ends.encode())
    got, last = [], begin
    for k in range(n_parts):
        lo, hi = source.line_range(str(path), k, n_parts, begin, universal=universal)
        assert lo == last and lo <= hi  # contiguous
        # a line start, or the end (an empty part)
        prev, cur = text[lo - begin - 1:lo - begin], text[lo - begin:lo - begin + 1]
        assert lo in (begin, begin + len(text)) or prev == b"\n" or (
            prev == b"\r" and cur != b"\n")
        got.append(path.read_bytes()[lo:hi])
        last = hi
    assert last == len(b"HEADER" + ends.encode() + text)
    assert b"".join(got) == text
    full = [c for c in got if c]
    assert all(c.endswith(ends.encode()) for c in full[:-1])  # whole lines only
    # the same cuts over the bytes in memory (a decompressed gzip file)
    buf = np.frombuffer(path.read_bytes(), np.uint8)
    assert [source.line_range(buf, k, n_parts, begin, universal=universal)
            for k in range(n_parts)] == [source.line_range(str(path), k, n_parts, begin,
                                                           universal=universal)
                                         for k in range(n_parts)]


@pytest.mark.parametrize("ends", ["\n", "\r\n", "\r"])
def test_line_number(tmp_path, ends):
    path = tmp_path / "f.txt"
    path.write_bytes(b"a\nbb\nccc\n".replace(b"\n", ends.encode()))
    w = len(ends) - 1  # each line end's extra byte
    offsets = (0, 1 + w, 2 + w, 4 + w, 5 + 2 * w, 8 + 2 * w)
    assert [source.line_number(str(path), k, ends != "\n") for k in offsets] == \
        [1, 1, 2, 2, 3, 3]
