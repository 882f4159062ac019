"""UCI bag-of-words: a docword file (three header lines D, W, NNZ, then ``docID wordID
count`` lines, 1-based ids; blank lines skipped) and its vocabulary (one word a line);
the corpus readers' shared refusals. Notes: docs/architecture.md."""
import numpy as np
from numba import njit

from ..errors import DataError
from .numbers import NB, scan_int_inline
from .source import Text, line_at

INT32_MAX = 2 ** 31 - 1
# The corpus readers' words for other compressions and a broken stream
WORDS = {"foreign": "{path}: {short}-compressed data; decompress it first (gzip is read "
                    "directly)",
         "packed_only": True, "empty": "{path}: empty file (empty corpus)",
         "corrupt": "{where}: cannot read the {what}: {e}"}


def open_text(path, what="file"):
    return Text(path, what, words=WORDS)


def integer(tok, path, lineno, what):
    try:
        return int(tok)
    except ValueError:
        raise DataError(f"{path}:{lineno}: {what} {tok.decode(errors='replace')!r} is not "
                        "an integer") from None


def nul(path, lineno, what="file"):
    return DataError(f"{path}:{lineno}: binary data (a NUL byte), not a text {what}")


def bad_count(c, path, lineno):
    if c < 1:
        raise DataError(f"{path}:{lineno}: count {c} must be a positive integer")
    raise DataError(f"{path}:{lineno}: count {c} is too large: at most {INT32_MAX} "
                    "(counts are 32-bit)")


@njit(**NB)
def ws(c):
    """bytes.split()'s white space but the newline: space, \\t, \\v, \\f, \\r."""
    return c == 32 or c == 9 or c == 11 or c == 12 or c == 13


@njit(inline="always", **NB)
def field_end(b, i, end):
    return i >= end or b[i] == 10 or ws(b[i])


@njit(inline="always", **NB)
def skip_ws(b, i, end):
    """(the first byte from i that is no white space, whether the line ends there)."""
    while i < end and ws(b[i]):
        i += 1
    return i, i >= end or b[i] == 10


def read_vocab(path):
    """The words of a vocabulary file, one a line (UTF-8, blanks stripped, undecodable
    bytes replaced); trailing empty lines dropped."""
    src, words = open_text(path, "vocabulary file"), None
    if not src.gz:  # in one read, unless a NUL or \r needs the lines as they stream
        with src.open() as f:
            text = f.read()[src.bom:]
        if b"\0" not in text and b"\r" not in text:
            raws = text.split(b"\n")
            if text.endswith(b"\n"):
                raws.pop()
            words = [r.decode("utf-8", errors="replace").strip() for r in raws]
    if words is None:
        words = []
        for lineno, _, raw in src.lines(True):
            if b"\0" in raw:
                raise nul(path, lineno, "vocabulary file")
            words.append(raw.decode("utf-8", errors="replace").strip())
    while words and not words[-1]:
        words.pop()
    if not words:
        raise DataError(f"{path}: empty vocabulary")
    if len(words) > INT32_MAX:
        raise DataError(f"{path}: {len(words)} words; at most {INT32_MAX} are supported")
    return words


def header(src, check, vocab_len=None, vocab_path=None):
    """(D, W, NNZ, NNZ's line, the first byte after them) of the docword file ``src``:
    three lines of one integer (blank lines skipped). ``check(line, documents, entries,
    tokens, words)`` refuses sizes beyond memory."""
    path, values = src.path, []
    for lineno, off, raw in src.lines():
        if b"\0" in raw:
            raise nul(path, lineno)
        parts = raw.split()
        if not parts:
            continue
        name = ("D", "W", "NNZ")[len(values)]
        if len(parts) != 1:
            raise DataError(f"{path}:{lineno}: header line must hold one integer "
                            "(D, W, NNZ)")
        v = integer(parts[0], path, lineno, name)
        if v < 0:
            raise DataError(f"{path}:{lineno}: header value {v} is negative")
        if name != "NNZ" and v > INT32_MAX:
            raise DataError(f"{path}:{lineno}: {name} = {v} is too large: at most "
                            f"{INT32_MAX} {('documents', 'words')[len(values)]} "
                            "(ids are 32-bit)")
        values.append(v)
        # (every entry holds a token at least)
        check(lineno, values[0], v if name == "NNZ" else 0, v if name == "NNZ" else 0,
              values[1] if len(values) > 1 else 0)
        if name == "W" and vocab_len is not None and v != vocab_len:
            raise DataError(f"{path}:{lineno}: W = {v} but {vocab_path} lists "
                            f"{vocab_len} words")
        if name == "NNZ":
            return values[0], values[1], values[2], lineno, off + len(raw) + 1
    raise DataError(f"{path}: missing header (D, W, NNZ); is this a UCI docword file?")


@njit(_nrt=False, **NB)
def _scan(b, i, end, n_docs, n_words, limit, docs, words, counts, n, tokens):
    """``docID wordID count`` lines (blank lines skipped) -> docs, words (0-based),
    counts from index n. Returns (status, line start, next line, n, tokens): status 1,
    a line for the reference parser; 2, the tokens passed ``limit``."""
    while i < end:
        start = i
        nf = v0 = v1 = v2 = 0
        ok = True
        i, eol = skip_ws(b, i, end)
        while ok and not eol:  # the fields: docID, wordID, count
            i, ok, v = scan_int_inline(b, i, end)
            ok = ok and field_end(b, i, end)
            if nf == 0:
                v0 = v
            elif nf == 1:
                v1 = v
            else:
                v2 = v
            nf += 1
            i, eol = skip_ws(b, i, end)
        if not ok or (nf != 0 and nf != 3):
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


def parse_line(raw, path, lineno, n_docs, n_words):
    """The reference parser of one data line: (d, w, c) 1-based, None when blank."""
    if b"\0" in raw:
        raise nul(path, lineno)
    parts = raw.split()
    if not parts:
        return None
    if len(parts) != 3:
        raise DataError(f"{path}:{lineno}: expected 'docID wordID count', got "
                        f"{len(parts)} fields")
    d = integer(parts[0], path, lineno, "docID")
    w = integer(parts[1], path, lineno, "wordID")
    c = integer(parts[2], path, lineno, "count")
    if not 1 <= d <= n_docs:
        raise DataError(f"{path}:{lineno}: docID {d} outside 1..{n_docs}")
    if not 1 <= w <= n_words:
        raise DataError(f"{path}:{lineno}: wordID {w} outside the vocabulary "
                        f"1..{n_words}")
    if not 1 <= c <= INT32_MAX:
        bad_count(c, path, lineno)
    return d, w, c


def scan(blocks, path, n_docs, n_words, limit, check, size=None):
    """This worker's entries: [(docs, words, counts), 0-based, one piece], tokens, and
    (as :func:`strads.io.ldac.scan`'s) 0 lines, -1 last line, None. ``size``: about
    the bytes this worker reads (None: unknown)."""
    tokens, n, seen, cap = 0, 0, 0, 0
    docs, words, counts = (np.empty(0, np.int32) for _ in range(3))
    for blk in blocks:
        if not blk.keep:
            continue
        b = blk.data
        most = n + (b.shape[0] + 1) // 6 + 1  # a line holds 6 bytes at least: '1 1 1\n'
        if most > cap:  # room for the rest as dense as the lines so far
            rest = 0 if size is None or not seen else int(n / seen * max(size - seen, 0))
            cap = max(most + rest + rest // 8, cap + cap // 2)
            for a in (docs, words, counts):  # (in place where the allocator can)
                a.resize(cap, refcheck=False)
        i = 0
        while True:
            st, ls, nxt, n, tokens = _scan(b, i, b.shape[0], n_docs, n_words, limit, docs,
                                           words, counts, n, tokens)
            if st == 0:
                break
            lineno = blk.line(ls)
            if st == 1:  # the reference judges the line: raises, or takes it
                raw = line_at(b, ls)
                nxt = min(ls + len(raw) + 1, b.shape[0])
                got = parse_line(raw, path, lineno, n_docs, n_words)
                if got is not None:
                    docs[n], words[n], counts[n] = got[0] - 1, got[1] - 1, got[2]
                    n += 1
                    tokens += got[2]
            if tokens > limit:  # from here on every line is checked
                check(lineno, n_docs, n, tokens, n_words)
                limit = tokens
            i = nxt
        seen += b.shape[0]
    return [(docs[:n], words[:n], counts[:n])], tokens, 0, -1, None
