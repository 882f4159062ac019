"""LDA-C: one document a line, ``N id:count ...`` with 0-based word ids and N the number
of pairs; a blank line between documents is an empty document, blank lines after the
last one are ignored. :func:`scan` reads a worker's blocks as :func:`strads.io.uci.scan`
does (a numba kernel, the reference parser of a line it cannot judge)."""
import numpy as np
from numba import njit

from ..errors import DataError
from .numbers import NB, scan_int_inline
from .source import count_lines, line_at
from .uci import INT32_MAX, bad_count, field_end, integer, nul, skip_ws


@njit(_nrt=False, **NB)
def _scan(b, i, end, line, id_limit, limit, docs, words, counts, n, tokens, last):
    """Lines ``N id:count ...``: entry (line, id, count) from index n; ``line`` counts
    every line (blank ones too), ``last`` is the last non-blank one. Ids must be below
    ``id_limit``. Returns (status, line start, next line, line, n, tokens, last)."""
    while i < end:
        start = i
        i, eol = skip_ws(b, i, end)
        if eol:  # a blank line
            if i < end:
                i += 1
            line += 1
            continue
        i, ok, N = scan_int_inline(b, i, end)
        if not ok or N < 0 or not field_end(b, i, end):
            return 1, start, start, line, n, tokens, last
        n0, t0, k = n, tokens, 0
        bad = False
        while True:
            i, eol = skip_ws(b, i, end)
            if eol:
                break
            i, ok, w = scan_int_inline(b, i, end)
            if not ok or w < 0 or i >= end or b[i] != 58:  # ':'
                bad = True
                break
            i, ok, c = scan_int_inline(b, i + 1, end)
            if not ok or not field_end(b, i, end) or w >= id_limit or c < 1 or c > INT32_MAX:
                bad = True
                break
            docs[n] = line
            words[n] = w
            counts[n] = c
            n += 1
            tokens += c
            k += 1
        if bad or k != N:
            return 1, start, start, line, n0, t0, last
        if i < end:
            i += 1
        last = line
        line += 1
        if tokens > limit:
            return 2, start, i, line, n, tokens, last
    return 0, i, i, line, n, tokens, last


def parse_line(raw, path, lineno, n_words):
    """The reference parser of one line: [(id, count), ...], None when blank."""
    if b"\0" in raw:
        raise nul(path, lineno)
    parts = raw.split()
    if not parts:
        return None
    n = integer(parts[0], path, lineno, "term count N")
    if n != len(parts) - 1:
        raise DataError(f"{path}:{lineno}: N = {n} but {len(parts) - 1} id:count "
                        "pairs follow")
    pairs = []
    for tok in parts[1:]:
        w, sep, c = tok.partition(b":")
        if not sep:
            raise DataError(f"{path}:{lineno}: {tok.decode(errors='replace')!r} is "
                            "not id:count")
        w = integer(w, path, lineno, "word id")
        c = integer(c, path, lineno, "count")
        if w < 0:
            raise DataError(f"{path}:{lineno}: word id {w} is negative")
        if n_words is not None and w >= n_words:
            raise DataError(f"{path}:{lineno}: word id {w} outside the vocabulary "
                            f"0..{n_words - 1}")
        if w >= INT32_MAX:
            raise DataError(f"{path}:{lineno}: word id {w} is too large: at most "
                            f"{INT32_MAX - 1} (ids are 32-bit)")
        if not 1 <= c <= INT32_MAX:
            bad_count(c, path, lineno)
        pairs.append((w, c))
    return pairs


def scan(blocks, path, n_words, limit, check, line=0):
    """This worker's entries: [(docs = line index, ids, counts) of a block], its tokens,
    lines, last non-blank line (-1: none), from line ``line`` on, and None (no table:
    :func:`strads.io.docs.scan`)."""
    id_limit = INT32_MAX if n_words is None else n_words
    out, tokens, entries, last = [], 0, 0, -1
    for blk in blocks:
        b = blk.data
        if not blk.keep:
            line += count_lines(b, False)
            continue
        cap = (b.shape[0] + 1) // 4 + 1  # a pair holds 4 bytes at least: ' 0:1'
        docs = np.empty(cap, np.int64)
        words, counts = np.empty(cap, np.int32), np.empty(cap, np.int32)
        i, n = 0, 0
        while True:
            st, ls, nxt, line, n, tokens, last = _scan(
                b, i, b.shape[0], line, id_limit, limit, docs, words, counts, n, tokens, last)
            if st == 0:
                break
            lineno = blk.line(ls)
            if st == 1:
                raw = line_at(b, ls)
                nxt = min(ls + len(raw) + 1, b.shape[0])
                pairs = parse_line(raw, path, lineno, n_words)
                if pairs is not None:
                    for w, c in pairs:
                        docs[n], words[n], counts[n] = line, w, c
                        n += 1
                        tokens += c
                    last = line
                line += 1
            if tokens > limit:
                check(lineno, last + 1, entries + n, tokens)
                limit = tokens
            i = nxt
        out.append((docs[:n], words[:n], counts[:n]))
        entries += n
    return out, tokens, line, last, None
