"""numba kernels of the LDA readers: UCI, LDA-C and plain text over raw bytes.

Each kernel parses whole lines of a byte buffer ``b[i:end]`` into preallocated arrays
and returns where it stopped. It takes only what it can judge alone (plain digits,
ids and counts in range); at any other line (a sign, an underscore, a NUL byte, a wrong
number of fields, an id out of range, a character it does not lower-case itself) it
stops with status 1 and the line's start, and the Python reference parser of that line
(data.py) either raises the one-line error or adds the line and lets the kernel go on.
Status 2: the line just read brought the tokens above ``limit`` (the caller checks the
memory). Status 3 (text): the word table is full (the caller grows it and goes on).
"""
import numpy as np
from numba import njit

_nb = dict(cache=True, nogil=True)
INT32_MAX = 2 ** 31 - 1
_FNV = np.uint64(0xcbf29ce484222325)
_PRIME = np.uint64(0x100000001b3)


@njit(**_nb)
def _ws(c):
    """bytes.split()'s white space but the newline: space, \\t, \\v, \\f, \\r."""
    return c == 32 or c == 9 or c == 11 or c == 12 or c == 13


@njit(**_nb)
def _digits(b, i, end):
    """(value, number of digits, next index) of the digits at b[i:]; at most 18 count."""
    v = 0
    nd = 0
    while i < end and 48 <= b[i] <= 57:
        if nd < 18:
            v = v * 10 + (b[i] - 48)
        nd += 1
        i += 1
    return v, nd, i


@njit(**_nb)
def _field_end(b, i, end):
    return i >= end or b[i] == 10 or _ws(b[i])


@njit(**_nb)
def uci_scan(b, i, end, n_docs, n_words, limit, docs, words, counts, n, tokens):
    """``docID wordID count`` lines (blank lines skipped) -> docs, words (0-based),
    counts from index n. Returns (status, line start, next line, n, tokens)."""
    while i < end:
        start = i
        nf = 0
        v0 = v1 = v2 = 0
        bad = False
        while True:
            while i < end and _ws(b[i]):
                i += 1
            if i >= end or b[i] == 10:
                break
            v, nd, i = _digits(b, i, end)
            if nd == 0 or nd > 18 or not _field_end(b, i, end):
                bad = True
                break
            if nf == 0:
                v0 = v
            elif nf == 1:
                v1 = v
            else:
                v2 = v
            nf += 1
        if bad or (nf != 0 and nf != 3):
            return 1, start, start, n, tokens
        if i < end:
            i += 1  # the newline
        if nf == 0:
            continue
        if not (1 <= v0 <= n_docs and 1 <= v1 <= n_words and 1 <= v2 <= INT32_MAX):
            return 1, start, start, n, tokens
        docs[n] = v0 - 1
        words[n] = v1 - 1
        counts[n] = v2
        n += 1
        tokens += v2
        if tokens > limit:
            return 2, start, i, n, tokens
    return 0, i, i, n, tokens


@njit(**_nb)
def ldac_scan(b, i, end, line, id_limit, limit, docs, words, counts, n, tokens, last):
    """LDA-C lines ``N id:count ...``: entry (line, id, count) from index n; ``line``
    counts every line (blank ones too), ``last`` is the last non-blank one. Ids must be
    below ``id_limit``. Returns (status, line start, next line, line, n, tokens, last)."""
    while i < end:
        start = i
        while i < end and _ws(b[i]):
            i += 1
        if i >= end or b[i] == 10:  # a blank line
            if i < end:
                i += 1
            line += 1
            continue
        N, nd, i = _digits(b, i, end)
        if nd == 0 or nd > 18 or not _field_end(b, i, end):
            return 1, start, start, line, n, tokens, last
        n0, t0, k = n, tokens, 0
        bad = False
        while True:
            while i < end and _ws(b[i]):
                i += 1
            if i >= end or b[i] == 10:
                break
            w, nd, i = _digits(b, i, end)
            if nd == 0 or nd > 18 or i >= end or b[i] != 58:  # ':'
                bad = True
                break
            c, nd, i = _digits(b, i + 1, end)
            if nd == 0 or nd > 18 or not _field_end(b, i, end) or w >= id_limit or \
                    c < 1 or c > INT32_MAX:
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


@njit(**_nb)
def count_lines(b, text):
    """Lines starting in b: line breaks (b'\\n'; with ``text`` a lone b'\\r' too) plus
    an unterminated last line."""
    n = 0
    end = b.shape[0]
    for i in range(end):
        c = b[i]
        if c == 10 or (text and c == 13 and (i + 1 >= end or b[i + 1] != 10)):
            n += 1
    if end and not (b[end - 1] == 10 or (text and b[end - 1] == 13)):
        n += 1
    return n


@njit(**_nb)
def _uni_space(b, i, end):
    """Bytes of the Unicode white space (str.isspace) encoded at b[i:], else 0."""
    c = b[i]
    c1 = b[i + 1] if i + 1 < end else 0
    c2 = b[i + 2] if i + 2 < end else 0
    if c == 0xC2 and (c1 == 0x85 or c1 == 0xA0):
        return 2
    if c == 0xE1 and c1 == 0x9A and c2 == 0x80:
        return 3
    if c == 0xE2 and c1 == 0x80 and (0x80 <= c2 <= 0x8A or c2 == 0xA8 or c2 == 0xA9 or
                                     c2 == 0xAF):
        return 3
    if c == 0xE2 and c1 == 0x81 and c2 == 0x9F:
        return 3
    if c == 0xE3 and c1 == 0x80 and c2 == 0x80:
        return 3
    return 0


@njit(**_nb)
def _lower(c):
    return c + 32 if 65 <= c <= 90 else c


@njit(**_nb)
def _alpha(c):
    return 97 <= c <= 122


@njit(**_nb)
def _inword(c):
    return 97 <= c <= 122 or 48 <= c <= 57 or c == 39


@njit(**_nb)
def _word_id(b, s, e, table, wstart, wlen, arena, n_ids, arena_n):
    """The id of the word b[s:e] (lower-cased) in the open-addressing table, added if
    new; -1: the table or the arena is full."""
    h = _FNV
    for j in range(s, e):
        h = (h ^ np.uint64(_lower(b[j]))) * _PRIME
    mask = table.shape[0] - 1
    slot = np.int64(h & np.uint64(mask))
    L = e - s
    while True:
        wid = table[slot]
        if wid < 0:
            break
        if wlen[wid] == L:
            a = wstart[wid]
            same = True
            for j in range(L):
                if arena[a + j] != _lower(b[s + j]):
                    same = False
                    break
            if same:
                return wid, n_ids, arena_n
        slot = (slot + 1) & mask
    if 2 * (n_ids + 1) > table.shape[0] or n_ids >= wstart.shape[0] or \
            arena_n + L > arena.shape[0]:
        return -1, n_ids, arena_n
    table[slot] = n_ids
    wstart[n_ids] = arena_n
    wlen[n_ids] = L
    for j in range(L):
        arena[arena_n + j] = _lower(b[s + j])
    return n_ids, n_ids + 1, arena_n + L


@njit(**_nb)
def text_scan(b, i, end, line, n_stop, limit, table, wstart, wlen, arena, n_ids, arena_n,
              tdoc, tword, n, last):
    """Plain text, a document a line (lines end at b'\\n' or a lone b'\\r'): the words
    of the regular expression ``[a-z][a-z0-9']*[a-z0-9]|[a-z]`` on the lower-cased line,
    of 2 characters or more, their ids below ``n_stop`` (stop words) dropped -> tokens
    (line, word id). Returns (status, line start, next line, line, n_ids, arena_n, n,
    last)."""
    while i < end:
        start = i
        n0 = n
        nonblank = False
        while i < end:
            c = b[i]
            if c == 10 or (c == 13 and (i + 1 >= end or b[i + 1] != 10)):
                break
            if c >= 128:
                u = _uni_space(b, i, end)
                if u:
                    i += u
                    continue
                nonblank = True
                # U+0130 and U+212A lower-case to ASCII letters: the reference decides
                if (c == 0xC4 and i + 1 < end and b[i + 1] == 0xB0) or (
                        c == 0xE2 and i + 2 < end and b[i + 1] == 0x84 and
                        b[i + 2] == 0xAA):
                    return 1, start, start, line, n_ids, arena_n, n0, last
                i += 1
                continue
            if c == 0:
                return 1, start, start, line, n_ids, arena_n, n0, last
            if not (c == 32 or 9 <= c <= 13 or 28 <= c <= 31):
                nonblank = True
            lc = _lower(c)
            if not _alpha(lc):
                i += 1
                continue
            s = i
            e = i + 1  # one past the last letter or digit
            j = i + 1
            while j < end:
                cj = _lower(b[j])
                if not _inword(cj):
                    break
                j += 1
                if cj != 39:
                    e = j
            i = e
            if e - s < 2:
                continue
            wid, n_ids, arena_n = _word_id(b, s, e, table, wstart, wlen, arena, n_ids,
                                           arena_n)
            if wid < 0:
                return 3, start, start, line, n_ids, arena_n, n0, last
            if wid >= n_stop:
                if n >= tdoc.shape[0]:
                    return 3, start, start, line, n_ids, arena_n, n0, last
                tdoc[n] = line
                tword[n] = wid
                n += 1
        if i < end:
            i += 1  # the line break
        if nonblank:
            last = line
        line += 1
        if n > limit:
            return 2, start, i, line, n_ids, arena_n, n, last
    return 0, i, i, line, n_ids, arena_n, n, last


@njit(**_nb)
def rehash(table, wstart, wlen, arena, n_ids):
    """Put words 0 .. n_ids - 1 (in the arena) into a new, empty table."""
    mask = table.shape[0] - 1
    for wid in range(n_ids):
        h = _FNV
        for j in range(wstart[wid], wstart[wid] + wlen[wid]):
            h = (h ^ np.uint64(arena[j])) * _PRIME
        slot = np.int64(h & np.uint64(mask))
        while table[slot] >= 0:
            slot = (slot + 1) & mask
        table[slot] = wid


@njit(**_nb)
def accumulate(idx, weights, out):
    """out[idx[t]] += weights[t] (int64)."""
    for t in range(idx.shape[0]):
        out[idx[t]] += weights[t]


@njit(**_nb)
def rows(docs, words, counts, d0, n_local):
    """CSR rows d0 .. d0 + n_local of entries (document, word, count) in any order:
    bucketed by document, each row's words sorted and repeats summed. Returns (indptr,
    word ids, counts, row sums)."""
    n = docs.shape[0]
    start = np.zeros(n_local + 1, np.int64)
    for t in range(n):
        start[docs[t] - d0 + 1] += 1
    for r in range(n_local):
        start[r + 1] += start[r]
    fill = start[:-1].copy()
    w = np.empty(n, np.int32)
    c = np.empty(n, np.int64)
    for t in range(n):
        r = docs[t] - d0
        q = fill[r]
        w[q] = words[t]
        c[q] = counts[t]
        fill[r] = q + 1
    indptr = np.zeros(n_local + 1, np.int64)
    sums = np.zeros(n_local, np.int64)
    q = 0
    for r in range(n_local):
        a, b = start[r], start[r + 1]
        ordered = True
        for t in range(a + 1, b):
            if w[t] < w[t - 1]:
                ordered = False
                break
        if not ordered:
            o = np.argsort(w[a:b]) + a
            ws, cs = w[o], c[o]
            w[a:b] = ws
            c[a:b] = cs
        for t in range(a, b):
            if t > a and w[t] == w[q - 1]:
                c[q - 1] += c[t]
            else:
                w[q] = w[t]
                c[q] = c[t]
                q += 1
        indptr[r + 1] = q
    for r in range(n_local):
        s = 0
        for t in range(indptr[r], indptr[r + 1]):
            s += c[t]
        sums[r] = s
    return indptr, w[:q].copy(), c[:q].copy(), sums
