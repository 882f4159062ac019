"""Each worker's part of a line-based file, for parallel loading.

Worker w of W takes the lines whose first byte lies in the w-th of W equal byte ranges
of ``[begin, end)`` (``begin``: the first data byte, after a header), so the parts
cover every line exactly once, whatever the line lengths, and no worker reads more
than its range and the rest of its last line. A line number for an error message is
counted only when there is an error (:func:`line_number`).
"""
import os

_CHUNK = 1 << 16


def _next_line_start(f, pos, end):
    """The first offset >= pos that starts a line (pos itself if the byte before it is a
    newline), at most ``end``."""
    if pos <= 0:
        return 0
    f.seek(pos - 1)
    while pos - 1 < end:
        chunk = f.read(_CHUNK)
        if not chunk:
            return end
        k = chunk.find(b"\n")
        if k >= 0:
            return min(pos + k, end)
        pos += len(chunk)
    return end


def line_range(path, part, n_parts, begin=0, end=None):
    """``(lo, hi)``: the bytes of part ``part`` of ``n_parts`` of ``path``'s lines in
    ``[begin, end)`` (``end`` None: the file's size). ``lo`` is a line start (or
    ``end``), ``hi`` the next part's ``lo``: parts are contiguous, possibly empty."""
    if not 0 <= part < n_parts:
        raise ValueError(f"part {part} of {n_parts}")
    size = os.path.getsize(path)
    end = size if end is None else min(end, size)
    span = max(end - begin, 0)
    cuts = [begin + span * k // n_parts for k in (part, part + 1)]
    with open(path, "rb") as f:
        lo, hi = (c if c == begin else _next_line_start(f, c, end) for c in cuts)
    return lo, max(lo, hi)


def line_number(path, offset):
    """The 1-based number of the line holding byte ``offset`` (for error messages: it
    reads the file up to there)."""
    n, done = 1, 0
    with open(path, "rb") as f:
        while done < offset:
            chunk = f.read(min(_CHUNK * 16, offset - done))
            if not chunk:
                break
            n += chunk.count(b"\n")
            done += len(chunk)
    return n
