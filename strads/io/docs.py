"""Plain text documents, one a line (lines end at ``\\n`` or a lone ``\\r``): the words
of the regular expression ``L(L|[0-9'])*(L|[0-9])|L`` on the lower-cased line, of 2
characters or more, stop words dropped (:func:`tokenize`; what a letter ``L`` is:
docs/apps/lda.md, "Plain text"). :func:`scan` reads a worker's blocks with a numba
kernel over the UTF-8 bytes; a line it cannot judge alone (a NUL byte, a non-ASCII
character that lower-casing changes) goes through :func:`tokenize`."""
import functools
import re

import numpy as np
from numba import njit

from .numbers import NB
from .source import count_lines, line_at
from .uci import nul

_FNV = np.uint64(0xcbf29ce484222325)
_PRIME = np.uint64(0x100000001b3)
# non-ASCII characters that are not letters (the regular expression's and the kernel's)
_NOT_LETTERS = [(0x80, 0xBF), (0xD7, 0xD7), (0xF7, 0xF7), (0x1680, 0x1680),
                (0x2000, 0x206F), (0x2190, 0x2BFF), (0x2E00, 0x2E7F), (0x3000, 0x303F),
                (0xD800, 0xDFFF), (0xFEFF, 0xFEFF), (0xFFFD, 0xFFFD), (0x1F000, 0x1FAFF)]


def _class(ascii_ranges):
    """A regex class: these ASCII ranges and the non-ASCII letters."""
    return "[^" + "".join(f"{re.escape(chr(a))}-{re.escape(chr(b))}"
                          for a, b in ascii_ranges + _NOT_LETTERS) + "]"


_L = _class([(0, 0x60), (0x7B, 0x7F)])  # a-z and the non-ASCII letters
_W = _class([(0, 0x26), (0x28, 0x2F), (0x3A, 0x60), (0x7B, 0x7F)])  # and 0-9 '
_E = _class([(0, 0x2F), (0x3A, 0x60), (0x7B, 0x7F)])  # and 0-9
_WORD = re.compile(f"{_L}{_W}*{_E}|{_L}")


def tokenize(line, stop_words):
    return [w for w in _WORD.findall(line.lower()) if len(w) > 1 and w not in stop_words]


@functools.cache
def upper():
    """The non-ASCII characters that lower-casing changes (sorted code points): a line
    holding one goes through :func:`tokenize`. (None beyond U+1FFFF in Unicode.)"""
    return np.array([c for c in range(0x80, 0x20000) if chr(c).lower() != chr(c)], np.int64)


@njit(inline="always", **NB)
def _utf8(b, i, end):
    """(bytes, code point) of the UTF-8 sequence at b[i] (>= 0x80); (0, 0) if it is not
    one (as Python decodes: no overlong forms, surrogates or code points past U+10FFFF)."""
    c = np.int64(b[i])
    if c < 0xC2 or c > 0xF4:
        return 0, 0
    k = 2 if c < 0xE0 else 3 if c < 0xF0 else 4
    if i + k > end:
        return 0, 0
    lo, hi = 0x80, 0xBF
    if c == 0xE0:
        lo = 0xA0
    elif c == 0xED:
        hi = 0x9F
    elif c == 0xF0:
        lo = 0x90
    elif c == 0xF4:
        hi = 0x8F
    c1 = np.int64(b[i + 1])
    if c1 < lo or c1 > hi:
        return 0, 0
    cp = (c & (0x1F if k == 2 else 0x0F if k == 3 else 0x07)) << 6 | (c1 & 0x3F)
    for j in range(i + 2, i + k):
        cj = np.int64(b[j])
        if cj < 0x80 or cj > 0xBF:
            return 0, 0
        cp = cp << 6 | (cj & 0x3F)
    return k, cp


_NOT = np.array(_NOT_LETTERS, np.int64)


@njit(inline="always", **NB)
def _uni_letter(cp):
    """A non-ASCII code point counts as a letter: not in _NOT_LETTERS."""
    for k in range(_NOT.shape[0]):
        if _NOT[k, 0] <= cp <= _NOT[k, 1]:
            return False
    return True


@njit(inline="always", **NB)
def _changes(cp, upper):
    """Whether lower-casing changes code point cp (sorted ``upper``)."""
    k = np.searchsorted(upper, cp)
    return k < upper.shape[0] and upper[k] == cp


@njit(inline="always", **NB)
def _uni_space(cp):
    """Whether non-ASCII code point cp is white space (str.isspace)."""
    return (cp == 0x85 or cp == 0xA0 or cp == 0x1680 or 0x2000 <= cp <= 0x200A or
            cp == 0x2028 or cp == 0x2029 or cp == 0x202F or cp == 0x205F or cp == 0x3000)


@njit(**NB)
def _lower(c):
    return c + 32 if 65 <= c <= 90 else c


@njit(inline="always", **NB)
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


@njit(_nrt=False, **NB)
def _scan(b, i, end, line, n_stop, limit, table, wstart, wlen, arena, n_ids, arena_n,
              tdoc, tword, n, last, upper):
    """Plain text, a document a line (lines end at b'\\n' or a lone b'\\r'): the words
    of :data:`_WORD` on the lower-cased line, of 2 characters or more, their ids below
    ``n_stop`` (stop words) dropped -> tokens (line, word id). Returns (status, line
    start, next line, line, n_ids, arena_n, n, last); status 1: the line is the
    reference's (a NUL, a character in ``upper``)."""
    while i < end:
        start = i
        n0 = n
        nonblank = False
        while i < end:
            c = b[i]
            if c == 10 or (c == 13 and (i + 1 >= end or b[i + 1] != 10)):
                break
            if c >= 128:
                k, cp = _utf8(b, i, end)
                if k and _uni_space(cp):
                    i += k
                    continue
                nonblank = True
                if k == 0:  # an undecodable byte: U+FFFD, no letter
                    i += 1
                    continue
                if _changes(cp, upper):
                    return 1, start, start, line, n_ids, arena_n, n0, last
                if not _uni_letter(cp):
                    i += k
                    continue
            else:
                if c == 0:
                    return 1, start, start, line, n_ids, arena_n, n0, last
                if not (c == 32 or 9 <= c <= 13 or 28 <= c <= 31):
                    nonblank = True
                if not 97 <= _lower(c) <= 122:  # a-z
                    i += 1
                    continue
            s = i
            e = i  # one past the last letter or digit
            chars = 0  # characters up to e
            j, m = i, 0
            while j < end:
                cj = b[j]
                if cj >= 128:
                    k, cp = _utf8(b, j, end)
                    if k == 0 or not _uni_letter(cp):
                        break
                    if _changes(cp, upper):
                        return 1, start, start, line, n_ids, arena_n, n0, last
                    j += k
                    m += 1
                    e, chars = j, m
                    continue
                lc = _lower(cj)
                if not (97 <= lc <= 122 or 48 <= lc <= 57 or lc == 39):  # a-z 0-9 '
                    break
                j += 1
                m += 1
                if lc != 39:
                    e, chars = j, m
            i = e
            if chars < 2:
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


@njit(**NB)
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


class Words:
    """A worker's word table for plain text (numba open addressing over an arena of the
    lower-cased words), seeded with the stop words (ids below ``n_stop``)."""

    def __init__(self, stop_words):
        self.upper = upper()
        self.table = np.full(1 << 12, -1, np.int64)
        self.wstart = np.zeros(1 << 11, np.int64)
        self.wlen = np.zeros(1 << 11, np.int64)
        self.arena = np.zeros(1 << 15, np.uint8)
        self.n_ids = self.arena_n = 0
        self.n_stop = 1 << 62
        seeds = sorted(w for w in stop_words if len(w) > 1 and _WORD.fullmatch(w))
        self.scan(np.frombuffer(" ".join(seeds).encode() + b"\n", np.uint8), 0, 0, 1 << 62,
                  np.zeros(1, np.int64), np.zeros(1, np.int32), 0, -1)
        self.n_stop = self.n_ids

    def scan(self, b, i, line, limit, tdoc, tword, n, last):
        st, ls, nxt, line, self.n_ids, self.arena_n, n, last = _scan(
            b, i, b.shape[0], line, self.n_stop, limit, self.table, self.wstart, self.wlen,
            self.arena, self.n_ids, self.arena_n, tdoc, tword, n, last, self.upper)
        return st, ls, nxt, line, n, last

    def grow(self, need_tokens, tdoc, tword, n):
        """After status 3: a larger table, arena or token arrays."""
        if 2 * (self.n_ids + 1) > self.table.shape[0] or self.n_ids >= self.wstart.shape[0]:
            self.table = np.full(2 * self.table.shape[0], -1, np.int64)
            rehash(self.table, self.wstart, self.wlen, self.arena, self.n_ids)
            self.wstart = np.concatenate([self.wstart, np.zeros_like(self.wstart)])
            self.wlen = np.concatenate([self.wlen, np.zeros_like(self.wlen)])
        if self.arena_n + (1 << 14) > self.arena.shape[0]:
            self.arena = np.concatenate([self.arena, np.zeros_like(self.arena)])
        if n + need_tokens > tdoc.shape[0]:
            tdoc = np.concatenate([tdoc, np.zeros(tdoc.shape[0] + need_tokens, np.int64)])
            tword = np.concatenate([tword, np.zeros(tword.shape[0] + need_tokens, np.int32)])
        return tdoc, tword

    def words(self):
        """The words of ids n_stop .. n_ids - 1."""
        a = self.arena
        return [a[s:s + n].tobytes().decode() for s, n in zip(
            self.wstart[self.n_stop:self.n_ids].tolist(),
            self.wlen[self.n_stop:self.n_ids].tolist())]


def scan(blocks, path, stop_words, limit, check, line=0):
    """This worker's tokens: [(docs = line index, word ids of its table) of a block],
    their number, its lines, its last non-blank line and the table (:class:`Words`)."""
    table = Words(stop_words)
    out, tokens, last = [], 0, -1
    for blk in blocks:
        b = blk.data
        if not blk.keep:
            line += count_lines(b, True)
            continue
        cap = (b.shape[0] + 1) // 3 + 1
        tdoc, tword = np.empty(cap, np.int64), np.empty(cap, np.int32)
        i, n = 0, 0
        while True:
            st, ls, nxt, line, n, last = table.scan(b, i, line, limit - tokens, tdoc, tword,
                                                    n, last)
            if st == 0:
                break
            if st == 3:
                tdoc, tword = table.grow(1 << 16, tdoc, tword, n)
                i = ls
                continue
            lineno = blk.line(ls)
            if st == 1:  # NUL, or a character that lower-casing changes
                raw = line_at(b, ls, universal=True)
                nxt = min(ls + len(raw) + 1, b.shape[0])
                text = raw.decode("utf-8", errors="replace")
                if "\0" in text:
                    raise nul(path, lineno)
                words = tokenize(text, stop_words)
                syn = np.frombuffer(" ".join(words).encode() + b"\n", np.uint8)
                while True:
                    st2, _, _, line2, n2, _ = table.scan(syn, 0, line, 1 << 62, tdoc, tword,
                                                         n, last)
                    if st2 != 3:
                        break
                    tdoc, tword = table.grow(len(words) + 1, tdoc, tword, n)
                n, last, line = n2, line, line2
            if tokens + n > limit:
                check(lineno, last + 1, tokens + n, tokens + n)
                limit = tokens + n
            i = nxt
        out.append((tdoc[:n].copy(), tword[:n].copy()))
        tokens += n
    return out, tokens, line, last, table
