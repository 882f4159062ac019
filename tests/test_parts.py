"""Parallel loading's byte ranges: every line in exactly one part."""
import pytest

from strads import parts


@pytest.mark.parametrize("n_parts", [1, 2, 3, 5, 17])
@pytest.mark.parametrize("text", [b"a\nbb\nccc\n", b"a\nbb\nccc", b"x" * 1000 + b"\ny\n",
                                  b"\n\n\n", b"one line without newline",
                                  b"".join(b"%d %d\n" % (i, i * i) for i in range(500))])
def test_parts_cover_every_line_once(tmp_path, n_parts, text):
    path = tmp_path / "f.txt"
    path.write_bytes(b"HEADER\n" + text)
    begin = len(b"HEADER\n")
    got, last = [], begin
    for k in range(n_parts):
        lo, hi = parts.line_range(str(path), k, n_parts, begin)
        assert lo == last and lo <= hi  # contiguous
        # a line start, or the end (an empty part)
        assert lo in (begin, begin + len(text)) or text[lo - begin - 1:lo - begin] == b"\n"
        got.append(path.read_bytes()[lo:hi])
        last = hi
    assert last == len(b"HEADER\n" + text)
    assert b"".join(got) == text
    full = [c for c in got if c]
    assert all(c.endswith(b"\n") for c in full[:-1])  # whole lines only


def test_line_number(tmp_path):
    path = tmp_path / "f.txt"
    path.write_bytes(b"a\nbb\nccc\n")
    assert [parts.line_number(str(path), k) for k in (0, 1, 2, 4, 5, 8)] == [1, 1, 2, 2, 3, 3]
