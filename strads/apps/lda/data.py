"""LDA corpora: readers (UCI bag-of-words, LDA-C, plain text) and the built-in corpus.

Reading is parallel (:func:`read_part`): each worker parses its own byte range with the
numba kernels of parse.py and the workers agree on the corpus with their collectives;
:func:`load` is one worker reading it all. The built-in corpus is drawn per document
(:func:`corpus_part`: each worker draws its own documents).

A corpus is ``(X, vocab)``: X a (documents x words) CSR matrix of int64 counts, vocab a
list of words (or None when the input names none). Repeated (document, word) pairs are
summed. Empty documents are kept (their rows are zero: they get no tokens and add
nothing to the likelihood). Every reader raises :class:`strads.DataError` naming the
file, the line and the problem.
"""
import gzip
import io
import math
import os
import re
import zlib

import numpy as np
import scipy.sparse as sp

from ...engine import DataError
from ...parts import line_number, line_range
from . import parse as _P
from numba import njit as _njit

STOP_WORDS = frozenset("""
a about above after again against all am an and any are as at be because been before
being below between both but by can could did do does doing down during each few for from
further had has have having he her here hers herself him himself his how i if in into is
it its itself just me more most my myself no nor not now of off on once only or other our
ours ourselves out over own same she should so some such than that the their theirs them
themselves then there these they this those through to too under until up very was we
were what when where which while who whom why will with would you your yours yourself
yourselves also may might must said says shall us upon within without yet
""".split())

_WORD = re.compile(r"[a-z][a-z0-9']*[a-z0-9]|[a-z]")

#: the largest number of documents, words or topics, and the largest count of one
#: (document, word) entry, word or document: ids, topics and counts are 32-bit
INT32_MAX = 2 ** 31 - 1
#: bytes a run needs per token at its peak (the workers sorting their tokens), per
#: (document, word) entry while a file is read (the readers' arrays and the CSR matrix
#: built from them), per document and per word, scheduler and workers together
#: (tracemalloc peaks of runs of 4M tokens: README, "Bad input"). The readers refuse a
#: corpus (so far) whose arrays alone would not fit in memory; make_setup then checks
#: the whole run (strads.apps.lda.memory_estimate)
BYTES_PER_TOKEN = 56
BYTES_PER_ENTRY = 48
BYTES_PER_DOC = 64
BYTES_PER_WORD = 16
_BOM = b"\xef\xbb\xbf"
_COMPRESSED = ((b"BZh", "bzip2"), (b"\xfd7zXZ\x00", "xz"), (b"\x28\xb5\x2f\xfd", "zstd"),
               (b"PK\x03\x04", "zip"))


def phys_mem():
    """Physical memory of this machine in bytes (None where the system does not say)."""
    try:
        n = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return None
    return n if n > 0 else None


def gib(n):
    """Bytes as a short human figure."""
    for unit, size in (("TiB", 2 ** 40), ("GiB", 2 ** 30), ("MiB", 2 ** 20)):
        if n >= size:
            return f"{n / size:.1f} {unit}"
    return f"{n} bytes"


def _too_big(need):
    mem = phys_mem()
    return mem is not None and need > mem


def _mem_msg(need):
    return f"about {gib(need)}, more than this machine's {gib(phys_mem())} of memory"


def _int(tok, path, lineno, what):
    try:
        v = int(tok)
    except ValueError:
        raise DataError(f"{path}:{lineno}: {what} {tok.decode(errors='replace')!r} is not an "
                        "integer") from None
    return v


def _open(path, what):
    """``path`` as a binary stream of its contents, gunzipped when it starts with the gzip
    magic bytes (1f 8b), with up to 8 KiB of them peeked; other compressed formats, NUL
    bytes (binary data), directories and unreadable files are refused."""
    if os.path.isdir(path):
        raise DataError(f"{path}: is a directory, not a {what}")
    if not os.path.exists(path):
        raise DataError(f"{path}: no such {what}")
    if not os.path.isfile(path):
        raise DataError(f"{path}: not a regular file (a {what} must be one)")
    try:
        f = open(path, "rb")
        if f.peek(2)[:2] == b"\x1f\x8b":
            f.close()
            f = io.BufferedReader(gzip.open(path, "rb"), 1 << 16)
        head = f.peek(1 << 13)[:1 << 13]
    except (OSError, EOFError, zlib.error) as e:  # unreadable, or a corrupt gzip header
        why = e.strerror if isinstance(e, OSError) and e.strerror else e
        raise DataError(f"{path}: cannot read the {what}: {why}") from None
    for magic, name in _COMPRESSED:
        if head.startswith(magic):
            f.close()
            raise DataError(f"{path}: {name}-compressed data; decompress it first (gzip is "
                            "read directly)")
    nul = head.find(b"\0")
    if nul >= 0:
        f.close()
        lineno = head.count(b"\n", 0, nul) + 1
        raise DataError(f"{path}:{lineno}: binary data (a NUL byte), not a text {what}")
    return f, head


def _reader(path, what="file", text=False):
    """``path`` opened for reading line by line: gzip read transparently, a UTF-8
    byte-order mark at the start dropped. ``text``: str lines (UTF-8, undecodable bytes
    replaced, universal newlines), else bytes lines split at b'\\n' (the first 8 KiB were
    checked for NUL bytes; further ones fail the integer parse). Wrap the loop in
    ``try: ... except READ_ERRORS as e: raise _read_error(...)``: corrupt or truncated
    gzip data is found only while reading."""
    f, head = _open(path, what)
    if text:
        return io.TextIOWrapper(f, encoding="utf-8-sig", errors="replace")
    if head.startswith(_BOM):
        f.read(len(_BOM))
    return f


READ_ERRORS = (OSError, EOFError, zlib.error)


def _read_error(path, lineno, what, e):
    return DataError(f"{path}:{lineno + 1}: cannot read the {what}: {e}")


def _nul(path, lineno, what):
    return DataError(f"{path}:{lineno}: binary data (a NUL byte), not a text {what}")


def _is_empty(path, what):
    f, head = _open(path, what)
    f.close()
    return not head


def read_vocab(path):
    what = "vocabulary file"
    words = []
    lineno = 0
    try:
        with _reader(path, what, text=True) as f:
            for lineno, line in enumerate(f, 1):
                if "\0" in line:
                    raise _nul(path, lineno, what)
                words.append(line.strip())
    except READ_ERRORS as e:
        raise _read_error(path, lineno, what, e) from None
    while words and not words[-1]:
        words.pop()
    if not words:
        raise DataError(f"{path}: empty vocabulary")
    if len(words) > INT32_MAX:
        raise DataError(f"{path}: {len(words)} words; at most {INT32_MAX} are supported")
    return words


def _check_size(path, lineno, n_docs, n_entries, n_tokens, n_words=0):
    """Refuse a corpus (so far) whose arrays would not fit in this machine's memory."""
    need = (n_docs * BYTES_PER_DOC + n_words * BYTES_PER_WORD  # reading, or the run
            + max(n_entries * BYTES_PER_ENTRY, n_entries * 12 + n_tokens * BYTES_PER_TOKEN))
    if _too_big(need):
        where = f"{path}:{lineno}" if lineno else path
        what = [f"{n:,} {one if n == 1 else many}" for n, one, many in (
            (n_docs, "document", "documents"), (n_words, "word", "words"),
            (n_entries, "(document, word) entry", "(document, word) entries"),
            (n_tokens, "token", "tokens")) if n]
        raise DataError(f"{where}: {', '.join(what)} would need {_mem_msg(need)}")


def _token_limit(n_docs, n_words):
    """Tokens below which a corpus of n_docs, n_words surely fits (each entry holds a
    token at least, so entries <= tokens): the readers call _check_size only above it."""
    mem = phys_mem()
    if mem is None:
        return math.inf
    return (mem - n_docs * BYTES_PER_DOC - n_words * BYTES_PER_WORD) // (
        max(BYTES_PER_ENTRY, 12 + BYTES_PER_TOKEN))


def _bad_count(c, path, lineno):
    if c < 1:
        raise DataError(f"{path}:{lineno}: count {c} must be a positive integer")
    raise DataError(f"{path}:{lineno}: count {c} is too large: at most {INT32_MAX} "
                    "(counts are 32-bit)")


# --------------------------------------------------------------------------------------
# Parallel reading: every worker parses its own part of the file (see read_part)
# --------------------------------------------------------------------------------------
#: bytes a block of whole lines holds (the parsers' arrays are sized from it)
BLOCK = 16 << 20
_PIECE = 1 << 16  # gzip: bytes decompressed at a time


class _Block:
    """Whole lines of the input: ``data`` (uint8) from byte ``offset`` (of the file, or
    of the decompressed stream), ``keep``: this worker parses it; ``nl0``: newlines
    before it (gzip, counted as it streams; None: counted in the file when needed)."""

    __slots__ = ("data", "offset", "keep", "nl0", "path")

    def __init__(self, path, data, offset, keep=True, nl0=None):
        self.path, self.data, self.offset, self.keep, self.nl0 = path, data, offset, keep, nl0

    def lineno(self, o):
        """The 1-based line number of byte ``o`` of the block."""
        if self.nl0 is None:
            return line_number(self.path, self.offset + o)
        return self.nl0 + int(np.count_nonzero(self.data[:o] == 10)) + 1


def _plain_blocks(path, lo, hi, size=BLOCK):
    """Blocks of whole lines of the file's bytes [lo, hi) (hi: a line start or the end)."""
    with open(path, "rb") as f:
        f.seek(lo)
        pos, rest = lo, np.zeros(0, np.uint8)
        while pos < hi:
            data = np.frombuffer(f.read(min(size, hi - pos)), np.uint8)
            if not data.shape[0]:
                break
            start = pos - rest.shape[0]
            pos += data.shape[0]
            buf = np.concatenate([rest, data]) if rest.shape[0] else data
            if pos >= hi:
                rest = np.zeros(0, np.uint8)
                yield _Block(path, buf, start)
                break
            nl = np.flatnonzero(buf[-min(buf.shape[0], 1 << 20):] == 10)
            if not nl.shape[0]:
                k = np.flatnonzero(buf == 10)
                if not k.shape[0]:  # one long line: read on
                    rest = buf
                    continue
                k = int(k[-1])
            else:
                k = buf.shape[0] - min(buf.shape[0], 1 << 20) + int(nl[-1])
            yield _Block(path, buf[:k + 1], start)
            rest = buf[k + 1:].copy()
        if rest.shape[0]:
            yield _Block(path, rest, pos - rest.shape[0])


def _gzip_blocks(path, skip, part, n_parts, size=BLOCK):
    """Every block of the decompressed stream after its first ``skip`` bytes, in order;
    block c is this worker's (``keep``) when c % n_parts == part. Each worker streams the
    whole file (a gzip stream cannot be entered in the middle), parsing only its
    blocks. A truncated or corrupt stream raises DataError naming the line reached."""
    nl, got = 0, 0
    pieces, have, c = [], 0, 0
    try:
        with gzip.open(path, "rb") as f:
            while skip > got:
                head = f.read(min(_PIECE, skip - got))
                if not head:
                    break
                got += len(head)
                nl += head.count(b"\n")
            offset = got
            while True:
                piece = f.read(_PIECE)
                if piece:
                    pieces.append(piece)
                    have += len(piece)
                if have < size and piece:
                    continue
                if not have:
                    return
                buf = np.frombuffer(b"".join(pieces), np.uint8)
                pieces, have = [], 0
                k = buf.shape[0] - 1
                if piece:  # cut after the last newline; the rest starts the next block
                    hits = np.flatnonzero(buf == 10)
                    if not hits.shape[0]:
                        pieces, have = [buf.tobytes()], buf.shape[0]
                        size *= 2  # one long line
                        continue
                    k = int(hits[-1])
                    if k + 1 < buf.shape[0]:
                        pieces, have = [buf[k + 1:].tobytes()], buf.shape[0] - k - 1
                blk = _Block(path, buf[:k + 1], offset, c % n_parts == part, nl)
                yield blk
                nl += int(np.count_nonzero(blk.data == 10))
                offset += k + 1
                c += 1
                if not piece and not have:
                    return
    except READ_ERRORS as e:
        nl += sum(p.count(b"\n") for p in pieces)
        raise _read_error(path, nl, "file", e) from None


def _line_bytes(b, ls, text=False):
    """The line starting at ls of block b, and the start of the next one."""
    e = ls
    n = b.shape[0]
    while e < n and b[e] != 10 and not (text and b[e] == 13 and (e + 1 >= n or b[e + 1] != 10)):
        e += 1
    return b[ls:e].tobytes(), min(e + 1, n)


def _uci_line(raw, path, lineno, n_docs, n_words):
    """The reference parser of one UCI data line: (d, w, c) 1-based, None when blank."""
    if b"\0" in raw:
        raise _nul(path, lineno, "file")
    parts = raw.split()
    if not parts:
        return None
    if len(parts) != 3:
        raise DataError(f"{path}:{lineno}: expected 'docID wordID count', got "
                        f"{len(parts)} fields")
    d = _int(parts[0], path, lineno, "docID")
    w = _int(parts[1], path, lineno, "wordID")
    c = _int(parts[2], path, lineno, "count")
    if not 1 <= d <= n_docs:
        raise DataError(f"{path}:{lineno}: docID {d} outside 1..{n_docs}")
    if not 1 <= w <= n_words:
        raise DataError(f"{path}:{lineno}: wordID {w} outside the vocabulary "
                        f"1..{n_words}")
    if not 1 <= c <= INT32_MAX:
        _bad_count(c, path, lineno)
    return d, w, c


def _ldac_line(raw, path, lineno, n_words):
    """The reference parser of one LDA-C line: [(id, count), ...], None when blank."""
    if b"\0" in raw:
        raise _nul(path, lineno, "file")
    parts = raw.split()
    if not parts:
        return None
    n = _int(parts[0], path, lineno, "term count N")
    if n != len(parts) - 1:
        raise DataError(f"{path}:{lineno}: N = {n} but {len(parts) - 1} id:count "
                        "pairs follow")
    pairs = []
    for tok in parts[1:]:
        w, sep, c = tok.partition(b":")
        if not sep:
            raise DataError(f"{path}:{lineno}: {tok.decode(errors='replace')!r} is "
                            "not id:count")
        w = _int(w, path, lineno, "word id")
        c = _int(c, path, lineno, "count")
        if w < 0:
            raise DataError(f"{path}:{lineno}: word id {w} is negative")
        if n_words is not None and w >= n_words:
            raise DataError(f"{path}:{lineno}: word id {w} outside the vocabulary "
                            f"0..{n_words - 1}")
        if w >= INT32_MAX:
            raise DataError(f"{path}:{lineno}: word id {w} is too large: at most "
                            f"{INT32_MAX - 1} (ids are 32-bit)")
        if not 1 <= c <= INT32_MAX:
            _bad_count(c, path, lineno)
        pairs.append((w, c))
    return pairs


def _uci_header(path, f, vocab_len, vocab_path):
    """(D, W, NNZ, bytes read, lines read) of a UCI file's three header lines (blank lines
    skipped), read from ``f`` (after a BOM)."""
    header, pos, lineno = [], 0, 0
    while len(header) < 3:
        raw = f.readline()
        if not raw:
            raise DataError(f"{path}: missing header (D, W, NNZ); is this a UCI docword "
                            "file?")
        lineno += 1
        pos += len(raw)
        if b"\0" in raw:
            raise _nul(path, lineno, "file")
        parts = raw.split()
        if not parts:
            continue
        name = ("D", "W", "NNZ")[len(header)]
        if len(parts) != 1:
            raise DataError(f"{path}:{lineno}: header line must hold one integer "
                            "(D, W, NNZ)")
        v = _int(parts[0], path, lineno, name)
        if v < 0:
            raise DataError(f"{path}:{lineno}: header value {v} is negative")
        if name != "NNZ" and v > INT32_MAX:
            raise DataError(f"{path}:{lineno}: {name} = {v} is too large: at most "
                            f"{INT32_MAX} {('documents', 'words')[len(header)]} "
                            "(ids are 32-bit)")
        header.append(v)
        if name == "D":
            _check_size(path, lineno, v, 0, 0)
        elif name == "W":
            _check_size(path, lineno, header[0], 0, 0, v)
        if name == "W" and vocab_len is not None and v != vocab_len:
            raise DataError(f"{path}:{lineno}: W = {v} but {vocab_path} lists "
                            f"{vocab_len} words")
        if name == "NNZ":  # every entry holds a token at least
            _check_size(path, lineno, header[0], v, v, header[1])
    return header[0], header[1], header[2], pos, lineno


def _scan_uci(blocks, path, n_docs, n_words):
    """This worker's entries of a UCI file: (docs, words, counts) arrays, 0-based."""
    limit = _token_limit(n_docs, n_words)
    out, tokens, entries = [], 0, 0
    for blk in blocks:
        if not blk.keep:
            continue
        b = blk.data
        cap = (b.shape[0] + 1) // 6 + 1  # a line holds 6 bytes at least: '1 1 1\n'
        docs, words, counts = (np.empty(cap, np.int32) for _ in range(3))
        i, n = 0, 0
        while True:
            st, ls, nxt, n, tokens = _P.uci_scan(b, i, b.shape[0], n_docs, n_words, limit,
                                                 docs, words, counts, n, tokens)
            if st == 0:
                break
            lineno = blk.lineno(ls)
            if st == 1:  # the reference judges the line: raises, or takes it
                raw, nxt = _line_bytes(b, ls)
                got = _uci_line(raw, path, lineno, n_docs, n_words)
                if got is not None:
                    docs[n], words[n], counts[n] = got[0] - 1, got[1] - 1, got[2]
                    n += 1
                    tokens += got[2]
            if tokens > limit:  # from here on every line is checked
                _check_size(path, lineno, n_docs, entries + n, tokens, n_words)
                limit = tokens
            i = nxt
        out.append((docs[:n], words[:n], counts[:n]))
        entries += n
    return out, tokens


def _scan_ldac(blocks, path, n_words, line=0, text=False):
    """This worker's entries of an LDA-C file: (docs = line index, ids, counts), its
    lines and its last non-blank line (-1: none), from line ``line`` on."""
    limit = _token_limit(0, 0)
    id_limit = INT32_MAX if n_words is None else n_words
    out, tokens, entries, last = [], 0, 0, -1
    for blk in blocks:
        b = blk.data
        if not blk.keep:
            line += _P.count_lines(b, False)
            continue
        cap = (b.shape[0] + 1) // 4 + 1  # a pair holds 4 bytes at least: ' 0:1'
        docs = np.empty(cap, np.int64)
        words, counts = np.empty(cap, np.int32), np.empty(cap, np.int32)
        i, n = 0, 0
        while True:
            st, ls, nxt, line, n, tokens, last = _P.ldac_scan(
                b, i, b.shape[0], line, id_limit, limit, docs, words, counts, n, tokens, last)
            if st == 0:
                break
            lineno = blk.lineno(ls)
            if st == 1:
                raw, nxt = _line_bytes(b, ls)
                pairs = _ldac_line(raw, path, lineno, n_words)
                if pairs is not None:
                    for w, c in pairs:
                        docs[n], words[n], counts[n] = line, w, c
                        n += 1
                        tokens += c
                    last = line
                line += 1
            if tokens > limit:
                _check_size(path, lineno, last + 1, entries + n, tokens)
                limit = tokens
            i = nxt
        out.append((docs[:n], words[:n], counts[:n]))
        entries += n
    return out, tokens, line, last


class _Words:
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
        st, ls, nxt, line, self.n_ids, self.arena_n, n, last = _P.text_scan(
            b, i, b.shape[0], line, self.n_stop, limit, self.table, self.wstart, self.wlen,
            self.arena, self.n_ids, self.arena_n, tdoc, tword, n, last)
        return st, ls, nxt, line, n, last

    def grow(self, need_tokens, tdoc, tword, n):
        """After status 3: a larger table, arena or token arrays."""
        if 2 * (self.n_ids + 1) > self.table.shape[0] or self.n_ids >= self.wstart.shape[0]:
            self.table = np.full(2 * self.table.shape[0], -1, np.int64)
            _P.rehash(self.table, self.wstart, self.wlen, self.arena, self.n_ids)
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


def _scan_text(blocks, path, stop_words, line=0):
    """This worker's tokens of a plain-text file: (docs = line index, word ids of its
    table), the table, its lines and its last non-blank line."""
    table = _Words(stop_words)
    limit = _token_limit(0, 0)
    out, tokens, last = [], 0, -1
    for blk in blocks:
        b = blk.data
        if not blk.keep:
            line += _P.count_lines(b, True)
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
            lineno = blk.lineno(ls)
            if st == 1:  # NUL, or a character the reference lower-cases to a letter
                raw, nxt = _line_bytes(b, ls, text=True)
                text = raw.decode("utf-8", errors="replace")
                if "\0" in text:
                    raise _nul(path, lineno, "file")
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
                _check_size(path, lineno, last + 1, tokens + n, tokens + n)
                limit = tokens + n
            i = nxt
        out.append((tdoc[:n].copy(), tword[:n].copy()))
        tokens += n
    return out, tokens, table, line, last


def _refuse_all(peers, exc):
    """Every worker found the same refusal: worker 0 raises it, the others wait for the
    job's end (under MPI rank 0's abort; in one process the failed collective)."""
    if peers.rank == 0:
        raise exc
    peers.allgather(None)  # never met: worker 0 has failed
    raise exc


def _agree(peers, err):
    """Every worker's refusal so far (``err``: None or (line, DataError)): the one of the
    earliest line (the first worker's on a tie) is raised by the worker that found it;
    the others wait for the job's end. Nothing found: go on."""
    got = peers.allgather(None if err is None else (err[0], str(err[1])))
    bad = [(g[0], w, g[1]) for w, g in enumerate(got) if g is not None]
    if not bad:
        return
    _, w, msg = min(bad)
    if w == peers.rank:
        raise err[1]
    peers.allgather(None)  # never met: worker w has failed
    raise DataError(msg)


def _err_line(e):
    """The line number a DataError names (``path:line: ...``), else 0."""
    m = re.match(r".*?:(\d+): ", str(e))
    return int(m.group(1)) if m else 0


def _try(peers, fn, *args):
    """fn(*args), the workers agreeing on the first refusal any of them met."""
    try:
        out, err = fn(*args), None
    except DataError as e:
        out, err = None, (_err_line(e), e)
    _agree(peers, err)
    return out


class Part:
    """One worker's documents, read by :func:`read_part`: documents ``d0 .. d0 + len(
    lengths)`` as CSR rows (``indptr``, ``indices`` word ids sorted within a row,
    ``counts``), and the corpus's global facts: ``n_docs``, ``n_words``, ``n_tokens``,
    ``nnz`` (distinct (document, word) entries) and ``vocab`` (or None)."""

    def __init__(self, d0, indptr, indices, counts, n_docs, n_words, n_tokens, nnz, vocab,
                 lengths=None):
        self.d0, self.indptr, self.indices, self.counts = d0, indptr, indices, counts
        self.n_docs, self.n_words, self.n_tokens, self.nnz = n_docs, n_words, n_tokens, nnz
        self.vocab = vocab
        if lengths is None:
            cs = np.concatenate([[0], np.cumsum(counts, dtype=np.int64)])
            lengths = cs[indptr[1:]] - cs[indptr[:-1]]
        self.lengths = np.asarray(lengths, np.int64)


def _rows(docs, words, counts, d0, n_local, n_words=None):
    """CSR rows d0 .. d0 + n_local of entries (duplicates summed, ids sorted); counts
    None: one each."""
    if counts is None:
        counts = np.ones(docs.shape[0], np.int32)
    return _P.rows(docs, words, counts, d0, n_local)


def _route(peers, docs, words, counts, lengths):
    """Every entry to the worker owning its document (contiguous documents balanced by
    tokens, :func:`strads.engine.split_balanced`), by W - 1 ring shifts; -> the cuts and
    this worker's entries."""
    from ...engine import split_balanced

    W, me = peers.size, peers.rank
    cuts = split_balanced(lengths, W)
    if W == 1:
        return cuts, docs, words, counts
    owner = np.searchsorted(cuts, docs, side="right") - 1
    order = np.argsort(owner, kind="stable")
    bounds = np.searchsorted(owner[order], np.arange(W + 1))
    def part(j):  # the entries for worker j
        sel = order[bounds[j]:bounds[j + 1]]
        return tuple(None if a is None else a[sel] for a in (docs, words, counts))

    got = [None] * W
    got[me] = part(me)
    for k in range(1, W):
        got[(me - k) % W] = peers.shift(part((me + k) % W), k)

    def cat(i):  # in worker order
        return None if got[0][i] is None else np.concatenate([g[i] for g in got])

    return cuts, cat(0), cat(1), cat(2)


def _open_part(path, fmt, vocab):
    """Checks every worker makes alike before reading: the file, the format, the
    vocabulary (read here; its length)."""
    if fmt not in FORMATS:
        raise DataError(f"unknown format {fmt!r}; choose from {FORMATS}")
    if _is_empty(path, "file"):
        raise DataError(f"{path}: empty file (empty corpus)")
    base = _strip_gz(os.path.basename(path)).lower()
    if fmt == "auto":
        fmt = ("uci" if base.startswith("docword") else
               "ldac" if base.endswith((".ldac", ".dat")) else "text")
    if fmt == "text":
        if vocab:
            raise DataError(f"{vocab}: a vocabulary file is for UCI and LDA-C data; {path} "
                            "is read as plain text, whose vocabulary is its own words")
        words = None
    else:
        vocab = vocab or _guess_vocab(path)
        words = read_vocab(vocab) if vocab else None
    f, head = _open(path, "file")  # binary data, other compressions: refused here
    f.close()
    with open(path, "rb") as raw:
        gz = raw.read(2) == b"\x1f\x8b"
    begin = len(_BOM) if head.startswith(_BOM) else 0
    header = None
    if fmt == "uci":
        f, _ = _open(path, "file")
        try:
            with f:
                if begin:
                    f.read(begin)
                D, Wn, nnz, pos, lines = _uci_header(path, f, None if words is None else
                                                     len(words), vocab)
        except READ_ERRORS as e:
            raise _read_error(path, 0, "file", e) from None
        header = (D, Wn, nnz, begin + pos)
    return fmt, gz, begin, header, words


def read_part(path, fmt="auto", vocab=None, min_count=2, peers=None,
              stop_words=STOP_WORDS):
    """This worker's part of a corpus file (see :func:`load` for the formats), read in
    parallel: each worker parses the lines of its byte range (:func:`strads.parts.
    line_range`; gzip: every worker streams the file and parses every W-th block), the
    workers agree on the global facts with their collectives (documents, vocabulary,
    tokens; for text the vocabulary from every worker's word counts), and every entry
    goes to the worker owning its document (contiguous documents balanced by tokens).
    ``peers``: the workers' collectives (None: one worker reads it all). Every worker
    returns a :class:`Part`; a refusal (one line, ``path:line: problem``) is raised by
    the worker that found it, the earliest in the file when several did."""
    from ...transport import Peers

    peers = peers or Peers()
    W, me = peers.size, peers.rank
    fmt, gz, begin, header, words = _try(peers, _open_part, path, fmt, vocab)
    text = fmt == "text"
    if fmt == "uci":
        begin = header[3]

    def blocks():
        if gz:
            return _gzip_blocks(path, begin, me, W)
        lo, hi = line_range(path, me, W, begin=begin)
        return _plain_blocks(path, lo, hi)

    def scan():
        if fmt == "uci":
            out, tokens = _scan_uci(blocks(), path, header[0], header[1])
            return out, tokens, 0, -1, None
        if fmt == "ldac":
            out, tokens, lines, last = _scan_ldac(blocks(), path, None if words is None
                                                  else len(words))
            return out, tokens, lines, last, None
        out, tokens, table, lines, last = _scan_text(blocks(), path, stop_words)
        return out, tokens, lines, last, table

    out, tokens, lines, last, table = _try(peers, scan)
    docs = np.concatenate([o[0] for o in out]) if out else np.zeros(0, np.int64)
    ids = np.concatenate([o[1] for o in out]) if out else np.zeros(0, np.int32)
    counts = None if text else (np.concatenate([o[2] for o in out]) if out else
                                np.zeros(0, np.int32))
    del out
    local_vocab = None
    if text:  # this worker's words and how often each is seen
        n = np.bincount(ids, minlength=table.n_ids)[table.n_stop:].tolist()
        local_vocab = (table.words(), n)
    facts = {"lines": lines, "last": last, "entries": int(ids.shape[0]), "tokens": tokens,
             "max_id": int(ids.max(initial=-1)), "vocab": local_vocab}
    every = peers.allgather(facts)
    # documents: line d + 1 is document d (LDA-C, text); a part's lines follow the
    # earlier parts' (a gzip stream's every worker counted itself)
    before = 0 if gz else sum(f["lines"] for f in every[:me])
    if fmt != "uci" and before:
        docs += before
    ends = [(0 if gz else sum(f["lines"] for f in every[:w])) + f["last"]
            for w, f in enumerate(every) if f["last"] >= 0]
    entries = sum(f["entries"] for f in every)
    n_tokens = sum(f["tokens"] for f in every)
    try:
        if fmt == "uci":
            n_docs, n_words = header[0], header[1]
            if entries != header[2]:
                raise DataError(f"{path}: header says NNZ = {header[2]} but {entries} "
                                "entries follow")
            vocab_out = words
        elif fmt == "ldac":
            n_docs = max(ends) + 1 if ends else 0
            n_words = len(words) if words is not None else \
                max(f["max_id"] for f in every) + 1
            if n_docs > INT32_MAX:
                raise DataError(f"{path}:{INT32_MAX + 1}: more than {INT32_MAX} documents "
                                "(ids are 32-bit)")
            vocab_out = words
        else:
            n_docs = max(ends) + 1 if ends else 0
            total = {}
            for f in every:
                for w, c in zip(*f["vocab"]):
                    total[w] = total.get(w, 0) + c
            vocab_out = sorted(w for w, c in total.items() if c >= min_count)
            if not vocab_out:
                raise DataError(f"{path}: empty corpus (no word occurs {min_count} times "
                                "or more)")
            index = {w: i for i, w in enumerate(vocab_out)}
            n_words = len(vocab_out)
        if n_docs == 0:
            raise DataError(f"{path}: empty corpus (no documents)")
        if n_docs > INT32_MAX:
            raise DataError(f"{path}: {n_docs} documents: at most {INT32_MAX} (ids are "
                            "32-bit)")
        _check_size(path, 0, n_docs, entries, n_tokens, n_words)
        if entries == 0:
            raise DataError(f"{path}: empty corpus (no tokens)")
    except DataError as e:
        _refuse_all(peers, e)
    if text:  # this worker's word ids -> the corpus's (-1: below min_count)
        full = np.full(table.n_ids, -1, np.int64)
        full[table.n_stop:] = [index.get(w, -1) for w in local_vocab[0]]
        g = full[ids]
        keep = g >= 0
        docs, ids = docs[keep], g[keep].astype(np.int32)
        del g, keep, index, total
        entries_kept = peers.allgather(int(ids.shape[0]))
        if sum(entries_kept) == 0:
            _refuse_all(peers, DataError(f"{path}: empty corpus (no tokens)"))
        n_tokens = sum(entries_kept)
    if W > n_docs:
        _refuse_all(peers, DataError(f"{W} workers for {n_docs} documents: each worker "
                                     "needs documents"))
    lengths = np.zeros(n_docs, np.int64)
    if counts is None:
        lengths += np.bincount(docs, minlength=n_docs)
    else:
        _P.accumulate(docs, counts, lengths)
    lengths = peers.allreduce(lengths)
    cuts, docs, ids, counts = _route(peers, docs, ids, counts, lengths)
    d0, d1 = int(cuts[me]), int(cuts[me + 1])
    del lengths
    indptr, indices, cnt, sums = _rows(docs, ids, counts, d0, d1 - d0)
    del docs, ids, counts
    nnz = sum(peers.allgather(int(indices.shape[0])))
    return Part(d0, indptr, indices, cnt, n_docs, n_words, n_tokens, nnz, vocab_out, sums)


def warmup():
    """Compile the readers' kernels (numba, cached on disk) on tiny inputs."""
    b = np.frombuffer(b"1 1 1\n", np.uint8)
    i32, i64 = np.zeros(2, np.int32), np.zeros(2, np.int64)
    _P.uci_scan(b, 0, b.shape[0], 1, 1, 10, i32, i32.copy(), i32.copy(), 0, 0)
    b = np.frombuffer(b"1 0:1\n", np.uint8)
    _P.ldac_scan(b, 0, b.shape[0], 0, 1, 10, i64, i32, i32.copy(), 0, 0, -1)
    _P.count_lines(b, True)
    _P.accumulate(i64, i32, np.zeros(2, np.int64))
    _P.accumulate(i32, i64, np.zeros(2, np.int64))
    _P.accumulate(i32, i32, np.zeros(2, np.int64))
    w = _Words(("ab",))
    w.scan(np.frombuffer(b"ab cd\n", np.uint8), 0, 0, 10, i64, i32, 0, -1)
    _P.rehash(np.full(8, -1, np.int64), w.wstart, w.wlen, w.arena, w.n_ids)
    _draw_words(np.ones((1, 2)), i64, np.zeros(2), i64.copy())


def _matrix_of(part):
    X = sp.csr_matrix((part.counts, part.indices, part.indptr),
                      shape=(part.n_docs, part.n_words))
    return X


def read_uci(path, vocab_path=None):
    """UCI bag-of-words: three header lines D, W, NNZ, then ``docID wordID count`` lines
    (1-based ids). Blank lines are skipped."""
    p = read_part(path, "uci", vocab_path)
    return _matrix_of(p), p.vocab


def read_ldac(path, vocab_path=None):
    """LDA-C: one document per line, ``N id:count ...`` with 0-based word ids and N the
    number of pairs. A blank line between documents is an empty document (as ``0``);
    blank lines after the last document are ignored."""
    p = read_part(path, "ldac", vocab_path)
    return _matrix_of(p), p.vocab


def tokenize(line, stop_words=STOP_WORDS):
    return [w for w in _WORD.findall(line.lower()) if len(w) > 1 and w not in stop_words]


def read_text(path, min_count=2, stop_words=STOP_WORDS):
    """Plain text, one document per line: lowercase words of letters and digits (starting
    with a letter, at least 2 characters), stop words dropped, and words seen fewer than
    ``min_count`` times in the whole corpus dropped. Vocabulary in alphabetical order.
    Blank lines between documents are empty documents; blank lines at the end are
    ignored."""
    p = read_part(path, "text", None, min_count, stop_words=stop_words)
    return _matrix_of(p), p.vocab


def _strip_gz(name):
    return name[:-3] if name.lower().endswith(".gz") else name


def _guess_vocab(path):
    base = _strip_gz(os.path.basename(path))
    folder = os.path.dirname(path)
    stem = os.path.splitext(base)[0]
    cands = [stem + ".tokens", stem + ".vocab", "vocab.txt"]
    if base.startswith("docword."):
        cands.insert(0, "vocab." + base[len("docword."):])
    for c in cands:
        for name in (c, c + ".gz"):
            p = os.path.join(folder, name)
            if os.path.isfile(p):
                return p
    return None


FORMATS = ("auto", "uci", "ldac", "text")


def load(path, fmt="auto", vocab=None, min_count=2):
    """Read a corpus; ``fmt`` auto: ``docword.*`` is UCI, ``*.ldac`` (or ``*.dat``) LDA-C,
    anything else plain text (a ``.gz`` suffix is looked through). ``vocab``: word list
    file (UCI/LDA-C; by default looked for beside ``path``: vocab.<name>.txt,
    <stem>.tokens, <stem>.vocab, vocab.txt, each also gzipped). Any input may be
    gzip-compressed (detected by its first bytes) and may start with a UTF-8 BOM.
    Returns ``(X, vocab)``, the whole corpus (one worker's :func:`read_part`)."""
    p = read_part(path, fmt, vocab, min_count)
    return _matrix_of(p), p.vocab


def check(X, vocab=None, name="data"):
    """Validate a user-given corpus (counts matrix, dense or sparse) -> int64 CSR."""
    if sp.issparse(X):
        X = sp.csr_matrix(X)
        vals = X.data
    else:
        X = np.asarray(X)
        if X.ndim != 2:
            raise DataError(f"{name}: counts must be 2-D (documents x words), got shape "
                            f"{X.shape}")
        vals = X
    if X.shape[0] == 0 or X.shape[1] == 0:
        raise DataError(f"{name}: empty corpus: counts have shape {X.shape}")
    vals = np.asarray(vals)
    if vals.dtype.kind not in "iuf" or not np.isfinite(vals).all() or \
            (vals != np.round(vals)).any():
        raise DataError(f"{name}: counts must be finite integers")
    if (vals < 0).any():
        raise DataError(f"{name}: counts must be non-negative")
    X = sp.csr_matrix(X, dtype=np.int64)
    X.sum_duplicates()
    X.eliminate_zeros()
    X.sort_indices()
    if X.nnz == 0:
        raise DataError(f"{name}: empty corpus (no tokens)")
    if vocab is not None and len(vocab) != X.shape[1]:
        raise DataError(f"{name}: {len(vocab)} vocabulary words for {X.shape[1]} columns")
    return X


_CORPUS_NAMES = {"n_docs": "n_docs", "n_words": "n_words", "doc_length": "doc_length",
                 "n_topics": "n_topics"}


def check_corpus_size(n_docs, n_words, doc_length, n_topics, names=_CORPUS_NAMES):
    """Refuse (DataError) a built-in corpus whose generation would not fit in memory:
    the float64 topics (K x V) and document mixtures (D x K) with their cumulative
    tables and temporaries, about 32 bytes an entry, and about 80 bytes a token."""
    if min(n_docs, n_words, doc_length, n_topics) < 1:
        raise DataError("the built-in corpus needs docs, words, doc length and topics >= 1")
    for key, v in (("n_docs", n_docs), ("n_words", n_words), ("n_topics", n_topics)):
        if v > INT32_MAX:
            raise DataError(f"{names[key]} {v} is too large for the built-in corpus: at "
                            f"most {INT32_MAX}")
    topics, mixtures = 32 * n_topics * n_words, 32 * n_docs * n_topics
    tokens = 80 * n_docs * doc_length
    need = topics + mixtures + tokens
    if _too_big(need):
        part = max((topics, f"{names['n_topics']} {n_topics} x {names['n_words']} "
                    f"{n_words} (its topics)"),
                   (mixtures, f"{names['n_docs']} {n_docs} x {names['n_topics']} "
                    f"{n_topics} (its documents' topic mixtures)"),
                   (tokens, f"{names['n_docs']} {n_docs} x {names['doc_length']} "
                    f"{doc_length} (its tokens)"))
        raise DataError(f"the built-in corpus of {part[1]} needs {_mem_msg(need)}")


def corpus_lengths(n_docs, doc_length, seed):
    """The built-in corpus's document lengths: Poisson(doc_length), at least 1, from
    the stream (seed, 1): the same for any number of workers."""
    rng = np.random.default_rng([seed, 1])
    return np.maximum(rng.poisson(doc_length, n_docs), 1).astype(np.int64)


def corpus_topics(n_words, n_topics, beta, seed, cumulative=False):
    """The built-in corpus's true topics phi_k ~ Dir(beta) (K x V float64), one row at
    a time from the stream (seed, 0); ``cumulative``: each row's normalised running
    sum instead (what drawing words needs; no second K x V array)."""
    rng = np.random.default_rng([seed, 0])
    phi = np.empty((n_topics, n_words))
    prior = np.full(n_words, beta)
    for k in range(n_topics):
        phi[k] = rng.dirichlet(prior)
        if cumulative:
            np.cumsum(phi[k], out=phi[k])
            phi[k] /= phi[k, -1]
    return phi


@_njit(cache=True, nogil=True)
def _draw_words(cum, z, u, out):
    V = cum.shape[1]
    for t in range(z.shape[0]):
        row = cum[z[t]]
        lo, hi = 0, V - 1
        while lo < hi:  # the first word whose running sum exceeds u
            mid = (lo + hi) >> 1
            if row[mid] > u[t]:
                hi = mid
            else:
                lo = mid + 1
        out[t] = lo


def corpus_docs(cum, lengths, d0, d1, alpha, seed, theta=None):
    """Documents d0 .. d1 of the built-in corpus as CSR rows (indptr, word ids, counts):
    document d draws theta_d ~ Dir(alpha), then z ~ theta_d and w ~ phi_z for each of
    its tokens, from its own stream (seed, 2, d), so it is the same whichever worker
    draws it. ``cum``: :func:`corpus_topics` (cumulative); ``theta``: if given, the
    documents' mixtures are written to its rows."""
    K = cum.shape[0]
    lengths = lengths[d0:d1]
    tok = np.concatenate([[0], np.cumsum(lengths)])
    z = np.empty(int(tok[-1]), np.int64)
    u = np.empty(int(tok[-1]))
    prior = np.full(K, alpha)
    for i, d in enumerate(range(d0, d1)):
        rng = np.random.default_rng([seed, 2, d])
        th = rng.dirichlet(prior)
        if theta is not None:
            theta[i] = th
        ct = np.cumsum(th)
        ct /= ct[-1]
        a, b = tok[i], tok[i + 1]
        z[a:b] = np.minimum(np.searchsorted(ct, rng.random(b - a), side="right"), K - 1)
        u[a:b] = rng.random(b - a)
    w = np.empty(z.shape[0], np.int64)
    _draw_words(cum, z, u, w)
    del z, u
    doc = np.repeat(np.arange(d1 - d0, dtype=np.int64), lengths)
    return _rows(doc, w, None, 0, d1 - d0)


def corpus_part(n_docs, n_words, doc_length, n_topics, alpha, beta, seed, peers=None):
    """This worker's documents of the built-in corpus (a :class:`Part`): contiguous
    documents balanced by tokens, drawn by the worker itself (see corpus_docs)."""
    from ...engine import split_balanced
    from ...transport import Peers

    peers = peers or Peers()
    check_corpus_size(n_docs, n_words, doc_length, n_topics)
    lengths = corpus_lengths(n_docs, doc_length, seed)
    if peers.size > n_docs:
        _refuse_all(peers, DataError(f"{peers.size} workers for {n_docs} documents: each "
                                     "worker needs documents"))
    cuts = split_balanced(lengths, peers.size)
    d0, d1 = int(cuts[peers.rank]), int(cuts[peers.rank + 1])
    cum = corpus_topics(n_words, n_topics, beta, seed, cumulative=True)
    indptr, indices, counts, sums = corpus_docs(cum, lengths, d0, d1, alpha, seed)
    del cum
    nnz = sum(peers.allgather(int(indices.shape[0])))
    return Part(d0, indptr, indices, counts, n_docs, n_words, int(lengths.sum()), nnz, None,
                sums)


def make_corpus(n_docs=1000, n_words=1000, doc_length=100, n_topics=10, alpha=0.1,
                beta=0.05, seed=0):
    """The built-in corpus, drawn from the LDA generative process: topics
    phi_k ~ Dir(beta), theta_d ~ Dir(alpha), length ~ Poisson(doc_length) (at least 1),
    then z ~ theta_d, w ~ phi_z for every token. Returns ``(X, phi, theta)``;
    deterministic in ``seed``, and the documents the workers of a run draw themselves
    (:func:`corpus_part`). Refuses a corpus that would not fit in memory."""
    check_corpus_size(n_docs, n_words, doc_length, n_topics)
    phi = corpus_topics(n_words, n_topics, beta, seed)
    cum = np.cumsum(phi, axis=1)
    cum /= cum[:, -1:]
    theta = np.empty((n_docs, n_topics))
    lengths = corpus_lengths(n_docs, doc_length, seed)
    indptr, indices, counts, _ = corpus_docs(cum, lengths, 0, n_docs, alpha, seed, theta)
    X = sp.csr_matrix((counts, indices, indptr), shape=(n_docs, n_words))
    return X, phi, theta
