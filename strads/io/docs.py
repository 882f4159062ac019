"""Plain text documents, one a line (lines end at ``\\n`` or a lone ``\\r``): the words
of the regular expression ``[a-z][a-z0-9']*[a-z0-9]|[a-z]`` on the lower-cased line, of 2
characters or more, stop words dropped (:func:`tokenize`). :func:`scan` reads a worker's
blocks with a numba kernel (its own word table, open addressing over an arena of the
lower-cased words); a line it cannot judge alone (a NUL byte, a character that
lower-cases to an ASCII letter) goes through :func:`tokenize`.
"""
import re

import numpy as np
from numba import njit

from .source import count_lines
from .uci import line_bytes, nul

_nb = dict(cache=True, nogil=True)
_FNV = np.uint64(0xcbf29ce484222325)
_PRIME = np.uint64(0x100000001b3)
_WORD = re.compile(r"[a-z][a-z0-9']*[a-z0-9]|[a-z]")


def tokenize(line, stop_words):
    return [w for w in _WORD.findall(line.lower()) if len(w) > 1 and w not in stop_words]


@njit(inline="always", **_nb)
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


@njit(inline="always", **_nb)
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


@njit(_nrt=False, **_nb)
def _scan(b, i, end, line, n_stop, limit, table, wstart, wlen, arena, n_ids, arena_n,
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


class Words:
    """A worker's word table for plain text (numba open addressing over an arena of the
    lower-cased words), seeded with the stop words (ids below ``n_stop``)."""

    def __init__(self, stop_words):
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
            self.arena, self.n_ids, self.arena_n, tdoc, tword, n, last)
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
    their number, the table (:class:`Words`), its lines and its last non-blank line."""
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
            if st == 1:  # NUL, or a character the reference lower-cases to a letter
                raw, nxt = line_bytes(b, ls, True)
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
    return out, tokens, table, line, last
