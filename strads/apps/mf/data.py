"""Rating data: readers (MatrixMarket, delimited triplets), id remapping, the held-out
split and the built-in synthetic problem.

Readers return :class:`Triplets` with the raw ids as written in the file; any problem
raises :class:`strads.DataError` naming the file, the line and what is wrong. A file may
be gzip-compressed (told by its magic bytes) and start with a UTF-8 byte-order mark; it
reads exactly as the plain file. The byte parser (:mod:`.parse`, numba) reads clean lines;
anything it cannot vouch for is parsed again line by line, with the same rules, so the
error names the first bad line. Nothing is allocated from a size a file declares, and
no more ratings are read than this machine's memory can fit.
"""
import contextlib
import gzip
import io
import math
import os
import zlib
from array import array
from dataclasses import dataclass, replace

import numpy as np

from ...engine import DataError
from . import kernels as K
from . import parse as P

DUPLICATES = ("error", "last", "mean")
COLD_START = ("error", "skip", "mean")


@dataclass
class Triplets:
    """Ratings with raw integer ids; ``lines[k]`` is the file line of entry k (None for
    arrays given in Python)."""
    users: np.ndarray
    items: np.ndarray
    ratings: np.ndarray
    path: str = "ratings"
    lines: np.ndarray = None
    reparse: object = None  # () -> the same Triplets with lines, for messages
    pos: np.ndarray = None  # each entry's position among the file's ratings (the split's)

    def where(self, k):
        if self.lines is None:
            return f"{self.path}: entry {k}"
        return f"{self.path}:{int(self.lines[k])}"

    def __len__(self):
        return self.ratings.shape[0]

    def with_lines(self):
        """The same entries with their line numbers (the fast path has none: the file is
        parsed again line by line), for messages."""
        if self.lines is not None or self.reparse is None:
            return self
        full = self.reparse()
        if not all(np.array_equal(getattr(full, k), getattr(self, k))
                   for k in ("users", "items", "ratings")):
            raise DataError(f"{self.path}: the file changed while it was read")
        return full


def from_arrays(users, items, ratings, name="ratings"):
    """Triplets from Python arrays, checked like a file (ids integers, ratings finite)."""
    u, i = np.asarray(users), np.asarray(items)
    r = np.asarray(ratings, dtype=np.float64).ravel()
    if u.shape != (r.shape[0],) or i.shape != (r.shape[0],):
        raise DataError(f"{name}: users {u.shape}, items {i.shape} and ratings "
                        f"{r.shape} must be 1-D of one length")
    for arr, what in ((u, "user"), (i, "item")):
        if arr.dtype.kind not in "iuf" and arr.size:
            raise DataError(f"{name}: {what} ids must be integers, got dtype {arr.dtype}")
        if arr.dtype.kind == "f" and arr.size:
            # beyond 2^53 a float id may not be the integer that was meant
            bad = ~np.isfinite(arr) | (arr != np.round(arr)) | (np.abs(arr) >= 2.0 ** 53)
            if bad.any():
                k = int(np.flatnonzero(bad)[0])
                raise DataError(f"{name}: entry {k}: {what} id {arr[k]} is not an integer "
                                "(exactly, as a float: pass integer arrays)")
        if arr.dtype.kind == "u" and arr.size and int(arr.max()) >= _INT64:
            k = int(np.argmax(arr))
            raise DataError(f"{name}: entry {k}: {what} id {arr[k]} does not fit in a 64-bit "
                            "integer")
    t = Triplets(u.astype(np.int64), i.astype(np.int64), r, name)
    _check_values(t)
    return t


def _check_values(t):
    bad = np.flatnonzero(~np.isfinite(t.ratings))
    if bad.size:
        raise DataError(f"{t.where(bad[0])}: rating is {t.ratings[bad[0]]}, not finite")
    if len(t) == 0:
        raise DataError(f"{t.path}: no ratings")
    with np.errstate(over="ignore", invalid="ignore"):
        big = not np.isfinite(np.dot(t.ratings, t.ratings))
    if big:  # the squared errors (the objective) would overflow
        k = int(np.argmax(np.abs(t.ratings)))
        raise DataError(f"{t.with_lines().where(k)}: rating {t.ratings[k]} is too large: "
                        "the sum of squared ratings overflows")


# -- readers -------------------------------------------------------------------------------
# Every reader goes through one _Source: a plain or gzip-compressed file (told by its magic
# bytes, not its name), a UTF-8 byte-order mark skipped, lines split as universal newlines
# (\n, \r\n, \r). The byte parser (parse.py, ASCII only) and the line by line rules
# (parse_line) see the same lines and accept the same fields: whatever the byte parser
# cannot read is parsed again line by line, which names the first bad line.
_BOM = b"\xef\xbb\xbf"
_GZIP = b"\x1f\x8b"
_FOREIGN = ((b"BZh", "bzip2-compressed"), (b"\xfd7zXZ\x00", "xz-compressed"),
            (b"\x28\xb5\x2f\xfd", "zstd-compressed"), (b"PK\x03\x04", "a zip archive"),
            (b"7z\xbc\xaf\x27\x1c", "a 7z archive"), (b"\x93NUMPY", "a NumPy .npy file"),
            (b"\xff\xfe", "UTF-16 text"), (b"\xfe\xff", "UTF-16 text"))
_READ_ERRORS = (OSError, EOFError, zlib.error)  # gzip: corrupt or truncated
_ID_DTYPE = [("u", np.int64), ("i", np.int64), ("r", np.float64)]
_INT64 = 1 << 63
_SNIFF = 8192  # bytes looked at for binary data
_LONG_LINE = P.LONG_LINE  # a line this long or longer: not a rating file
BYTES_PER_RATING = 200  # peak memory of reading + preparing + fitting, per rating


def physical_memory():
    """Bytes of physical memory (``SC_PHYS_PAGES * SC_PAGE_SIZE``), or None if unknown."""
    try:
        return os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return None


def fmt_bytes(b):
    for unit, size in (("TB", 1e12), ("GB", 1e9), ("MB", 1e6)):
        if b >= size:
            return f"{b / size:.3g} {unit}"
    return f"{int(b)} bytes"


def max_ratings():
    """The most ratings this machine's memory can read, prepare and fit (None: no cap)."""
    mem = physical_memory()
    return None if mem is None else max(mem // BYTES_PER_RATING, 1)


class _Source:
    """A rating file, checked to be a readable regular file holding text (plain or gzip),
    before anything is parsed."""

    def __init__(self, path):
        self.path = path = os.fspath(path)
        if os.path.isdir(path):
            raise DataError(f"{path}: is a directory, not a rating file")
        if not os.path.exists(path):
            raise DataError(f"{path}: no such file")
        if not os.path.isfile(path):
            raise DataError(f"{path}: not a regular file")
        try:
            self.size = os.path.getsize(path)
            with open(path, "rb") as f:
                magic = f.read(8)
        except OSError as e:
            raise DataError(f"{path}: cannot read ({e.strerror or e})") from None
        if self.size == 0:
            raise DataError(f"{path}: empty file")
        self.gz = magic[:2] == _GZIP
        if not self.gz:
            self._foreign(magic, "")
            if path.lower().endswith(".gz"):
                raise DataError(f"{path}: named .gz but not gzip-compressed (no 1f 8b magic "
                                "bytes)")
        try:
            with self.binary() as f:
                head = f.read(_SNIFF)
        except _READ_ERRORS as e:
            raise DataError(f"{path}: {self._failed(e)}") from None
        if not head:
            raise DataError(f"{path}: no ratings (empty file"
                            f"{' after decompression' if self.gz else ''})")
        if self.gz:
            self._foreign(head, " inside the gzip data")
            if head[:2] == _GZIP:
                raise DataError(f"{path}: gzip-compressed twice; decompress it once")
        nul = head.find(b"\0")
        if nul >= 0:
            line = head[:nul].count(b"\n") + 1
            raise DataError(f"{path}:{line}: binary data (a NUL byte), not a text rating "
                            "file")
        self.mtx = head[:14].lower() == b"%%matrixmarket"

    def _foreign(self, head, where):
        for magic, what in _FOREIGN:
            if head.startswith(magic):
                hint = ("save it as UTF-8" if "UTF" in what else
                        "only plain or gzip-compressed text is read")
                raise DataError(f"{self.path}: {what}{where}, not a text rating file; {hint}")

    def binary(self):
        """The file's bytes (decompressed), past a UTF-8 byte-order mark."""
        f = gzip.open(self.path, "rb") if self.gz else open(self.path, "rb")
        try:
            if f.read(3) != _BOM:
                f.seek(0)
        except BaseException:
            f.close()
            raise
        return f

    @contextlib.contextmanager
    def raw(self):
        """(the decompressed stream, past a byte-order mark; the mark's length)."""
        f = _Source.open_raw(self.path, self.gz)
        try:
            bom = 3 if f.read(3) == _BOM else 0
            f.seek(bom)
            yield f, bom
        finally:
            f.close()

    @staticmethod
    def open_raw(path, gz):
        return gzip.open(path, "rb") if gz else open(path, "rb")

    def text(self, encoding):
        """Lines as str (universal newlines): ``ascii`` for the fast path (anything else
        fails it), ``latin-1`` (never fails) for the line by line parse."""
        return io.TextIOWrapper(self.binary(), encoding=encoding, errors="strict",
                                newline=None)

    def lines(self):
        """(line number, line) pairs; a read or decompression error names the line it
        stopped at."""
        lineno = 0
        with self.text("latin-1") as f:
            try:
                while True:
                    line = f.readline(_LONG_LINE)
                    if not line:
                        return
                    lineno += 1
                    if len(line) >= _LONG_LINE and not line.endswith("\n"):
                        raise DataError(f"{self.path}:{lineno}: a line longer than "
                                        f"{_LONG_LINE} characters: not a rating file")
                    yield lineno, line
            except _READ_ERRORS as e:
                raise DataError(f"{self.path}:{lineno + 1}: {self._failed(e)}") from None

    def _failed(self, e):
        return f"corrupt gzip data ({e})" if self.gz else f"cannot read ({e})"


def _source(path):
    return path if isinstance(path, _Source) else _Source(path)


def _decode(tok):
    return tok.encode("latin-1").decode("utf-8", errors="replace")


def _id(tok, what, where):
    try:
        v = int(tok) if "_" not in tok else None  # int() takes 1_000; np.loadtxt does not
    except ValueError:
        v = None
    if v is None:
        raise DataError(f"{where}: {what} {_decode(tok)!r} is not an integer")
    if not -_INT64 <= v < _INT64:
        raise DataError(f"{where}: {what} id {v} does not fit in a 64-bit integer")
    return v


def _rating(tok, where):
    try:
        r = float(tok) if "_" not in tok else None
    except ValueError:
        r = None
    if r is None:
        raise DataError(f"{where}: rating {_decode(tok)!r} is not a number")
    if not math.isfinite(r):
        raise DataError(f"{where}: rating is {r}, not finite")
    return r


def _is_number(tok):
    try:
        float(tok)
        return "_" not in tok
    except ValueError:
        return False


def _split(line, delim):
    return line.split(delim) if delim else line.split()


def _too_many(src, limit, what=None):
    mem = physical_memory()
    return DataError(f"{src.path}: {what or f'more than {limit} ratings'}: this machine's "
                     f"{fmt_bytes(mem)} of memory holds at most {limit} (about "
                     f"{BYTES_PER_RATING} bytes a rating to read, prepare and fit)")


class _LineError(Exception):
    """What is wrong with one line (the caller names the file and line)."""


def parse_line(raw, delim, bounds=None):
    """One line (str, latin-1 decoded, without its line end) by the line-by-line rules:
    None for a blank or comment line, else (user, item, rating); :class:`_LineError`
    says what is wrong. ``bounds``: a MatrixMarket file's (rows, columns)."""
    if len(raw) >= _LONG_LINE:
        raise _LineError(f"a line longer than {_LONG_LINE} characters: not a rating file")
    line = raw.strip()
    if not line or line[0] in "#%":
        return None
    parts = _split(line, delim)
    if not raw.isascii():  # fine in the ignored fields only (np.loadtxt sees ASCII)
        blanks = delim is None and ("\x85" in line or "\xa0" in line)  # str.split's
        bad = [c for c in (line if blanks else "".join(parts[:3])) if not c.isascii()]
        if bad:
            raise _LineError(f"non-ASCII byte 0x{ord(bad[0]):02x} in a rating line's first "
                             "three fields (ids and ratings are ASCII numbers)")
    if len(parts) < 3:
        hint = (" (a '::'-separated file such as MovieLens ratings.dat: replace '::' "
                "by tabs)" if "::" in line else " (only tabs, commas or blanks separate "
                "fields)" if ";" in line or "|" in line else "")
        raise _LineError(f"expected 'user item rating', found {len(parts)} field(s){hint}")
    try:
        u = _id(parts[0].strip(), "user", "")
        i = _id(parts[1].strip(), "item", "")
        r = _rating(parts[2].strip(), "")
    except DataError as e:
        raise _LineError(str(e)[2:]) from None  # the message less its empty "where: "
    if bounds is not None:
        for v, hi, what in ((u, bounds[0], "row"), (i, bounds[1], "column")):
            if not 1 <= v <= hi:
                raise _LineError(f"{what} {v} is outside 1..{hi}")
    return u, i, r


def _parse_lines(src, delim, skip, bounds=None):
    """Line by line (the reference for the byte parser): exact errors, and the line
    number of every entry."""
    src = _source(src)
    limit = max_ratings()
    us, its, rs, lines = array("q"), array("q"), array("d"), array("q")
    for lineno, raw in src.lines():
        if lineno <= skip:
            continue
        try:
            got = parse_line(raw.rstrip("\n"), delim, bounds)
        except _LineError as e:
            raise DataError(f"{src.path}:{lineno}: {e}") from None
        if got is None:
            continue
        us.append(got[0])
        its.append(got[1])
        rs.append(got[2])
        lines.append(lineno)
        if limit is not None and len(rs) > limit:
            raise _too_many(src, limit)
    return Triplets(np.frombuffer(us, np.int64).copy(), np.frombuffer(its, np.int64).copy(),
                    np.frombuffer(rs, np.float64).copy(), src.path,
                    np.frombuffer(lines, np.int64).copy())


# -- where the ratings start: a few lines read on one rank -------------------------------
_CHUNK = 8 << 20  # bytes parsed at a time
_GZ_READ = 1 << 16  # decompressed bytes read at a time (a read error loses at most these)


def _byte_lines(src, f, base=0):
    """(line number, offset of the line in the stream, the line without its end as
    latin-1 text) from ``f`` at offset ``base`` (past a byte-order mark) of the
    decompressed stream; universal newlines."""
    buf, lineno, eof = b"", 0, False
    while True:
        cut = P.last_cut(np.frombuffer(buf, np.uint8)) if buf and not eof else len(buf)
        if not eof and (cut == 0 or len(buf) < _GZ_READ):
            if len(buf) - cut > _LONG_LINE + 2:  # no line end within a long line
                raise DataError(f"{src.path}:{lineno + 1}: a line longer than {_LONG_LINE} "
                                "characters: not a rating file")
            try:
                more = f.read(_GZ_READ)
            except _READ_ERRORS as e:
                raise DataError(f"{src.path}:{lineno + 1}: {src._failed(e)}") from None
            if not more:
                eof = True
            buf += more
            continue
        pos = 0
        while pos < cut:
            end = pos
            while end < cut and buf[end] not in (10, 13):
                end += 1
            nxt = end + 1
            if end < len(buf) and buf[end] == 13 and end + 1 < len(buf) and buf[end + 1] == 10:
                nxt = end + 2
            lineno += 1
            yield lineno, base + pos, buf[pos:end].decode("latin-1")
            pos = nxt
        if eof:
            return
        base += cut
        buf = buf[cut:]


class Layout:
    """Where a rating file's ratings are (the part of a file each worker reads is cut
    from ``begin``): found by reading the lines before the first rating."""

    def __init__(self, path):
        src = self.src = _Source(path)
        self.path, self.gz, self.mtx, self.size = src.path, src.gz, src.mtx, src.size
        self.bounds, self.nnz, self.size_line = None, None, None
        with src.raw() as (f, bom):
            lines = _byte_lines(src, f, bom)
            try:
                if self.mtx:
                    self._mtx(lines)
                else:
                    self._delimited(lines)
            finally:
                lines.close()

    def __getstate__(self):  # what a worker is sent: no open source
        return {k: v for k, v in self.__dict__.items() if k != "src"}

    def _delimited(self, lines):
        first, header = None, False
        for lineno, off, raw in lines:
            if len(raw) >= _LONG_LINE:
                raise DataError(f"{self.path}:{lineno}: a line longer than {_LONG_LINE} "
                                "characters: not a rating file")
            line = raw.strip()
            if "%%matrixmarket" in line[:40].lower():  # not at the start of line 1
                raise DataError(f"{self.path}:{lineno}: a MatrixMarket banner must start "
                                "the file's first line")
            if not line or line[0] in "#%":
                continue
            parts = _split(line, "\t" if "\t" in line else "," if "," in line else None)
            if (not header and len(parts) >= 3 and
                    not any(_is_number(p.strip()) for p in parts[:3])):
                header = True  # column names
                continue
            first = (lineno, off, line)
            break
        if first is None:
            what = "only a header" if header else "empty file"
            raise DataError(f"{self.path}: no ratings ({what})")
        self.line0, self.begin, line = first
        self.delim = "\t" if "\t" in line else "," if "," in line else None

    def _mtx(self, lines):
        path = self.path
        _, _, banner = next(lines)
        _mtx_banner(path, banner)
        size = None
        for lineno, off, raw in lines:
            line = raw.strip()
            if line and not line.startswith("%"):
                size = line.split()
                break
        if size is None:
            raise DataError(f"{path}: no size line (empty file)")
        m, n, nnz = _mtx_size(self.src, lineno, size)
        self.bounds, self.nnz, self.size_line, self.delim = (m, n), nnz, lineno, None
        self.line0 = lineno + 1
        nxt = next(lines, None)
        self.begin = nxt[1] if nxt is not None else None  # None: no line after it

    @property
    def delim_code(self):
        return {None: 0, "\t": 9, ",": 44}[self.delim]

    def where(self, line):
        return f"{self.path}:{int(line)}"


def _mtx_banner(path, banner):
    toks = banner.lower().split()
    if len(toks) < 5 or toks[0] != "%%matrixmarket" or toks[1] != "matrix":
        raise DataError(f"{path}:1: not a MatrixMarket banner "
                        "('%%MatrixMarket matrix coordinate real general')")
    if toks[2] != "coordinate":
        raise DataError(f"{path}:1: {_decode(toks[2])} format holds no sparse ratings; "
                        "need 'coordinate'")
    if toks[3] not in ("real", "integer", "double"):
        raise DataError(f"{path}:1: field {_decode(toks[3])!r}: ratings need 'real' or "
                        "'integer' values")
    if toks[4] != "general":
        raise DataError(f"{path}:1: symmetry {_decode(toks[4])!r}: a rating matrix is "
                        "'general'")


def _mtx_size(src, lineno, size):
    path = src.path
    where = f"{path}:{lineno}"
    if len(size) != 3 or not all(x.lstrip("+").isdigit() and x.isascii() for x in size):
        raise DataError(f"{where}: size line must be 'rows columns entries' (three "
                        f"non-negative integers), got {_decode(' '.join(size))!r}")
    m, n, nnz = (int(x) for x in size)
    if max(m, n, nnz) >= _INT64:
        raise DataError(f"{where}: size {m} x {n} with {nnz} entries does not fit in 64-bit "
                        "integers")
    if m < 1 or n < 1:
        raise DataError(f"{where}: a {m} x {n} matrix holds no ratings")
    if nnz == 0:
        raise DataError(f"{where}: no ratings (0 entries)")
    if nnz > m * n:
        raise DataError(f"{where}: {nnz} entries announced, more than the {m} x {n} = "
                        f"{m * n} cells of the matrix")
    if not src.gz and 6 * nnz - 1 > src.size:  # an entry takes at least '1 1 1\n'
        raise DataError(f"{where}: {nnz} entries announced; a file of {src.size} bytes "
                        f"holds at most {(src.size + 1) // 6}")
    limit = max_ratings()
    if limit is not None and nnz > limit:
        raise _too_many(src, limit, f"line {lineno}: {nnz} entries announced")
    return m, n, nnz


# -- one worker's part ---------------------------------------------------------------------
def _line_start(f, pos, end):
    """The first offset >= pos (> 0) that starts a line (universal newlines), at most
    ``end``."""
    base = pos - 1
    f.seek(base)
    data = f.read(1 << 16)
    while True:
        for k in range(len(data) - 1):
            c = data[k]
            if c == 10 or (c == 13 and data[k + 1] != 10):
                return min(base + k + 1, end)
        if base + len(data) >= end or len(data) < 2:
            return end
        base += len(data) - 1
        data = data[-1:] + f.read(1 << 16)


def line_range(path, part, n_parts, begin, end):
    """Part ``part`` of ``n_parts`` of the lines in [begin, end) of a plain file: the
    lines whose first byte lies in that share of the bytes (universal newlines), so the
    parts cover every line once."""
    span = max(end - begin, 0)
    cuts = [begin + span * k // n_parts for k in (part, part + 1)]
    with open(path, "rb") as f:
        lo, hi = (c if c <= begin or c >= end else _line_start(f, c, end) for c in cuts)
    return lo, max(lo, hi)


class Part:
    """A worker's ratings as read: raw ids ``u``, ``i``, ratings ``r``, each one's line
    index ``l`` and position ``pos`` (counted from the part's first line and rating, or
    from the file's first rating line when ``whole``), the lines and ratings passed
    (``lines``, ``seen``), and the first error: (line index, what is wrong), or
    ``too_many`` ratings for this machine."""

    def __init__(self, cap=0):
        self.u, self.i = np.empty(cap, np.int64), np.empty(cap, np.int64)
        self.r, self.l = np.empty(cap), np.empty(cap, np.int64)
        self.n = self.lines = self.seen = 0
        self.segments = []  # (first index here, position of that rating)
        self.err, self.too_many, self.whole = None, False, False
        self.pos = None

    def room(self, k):
        if self.n + k > self.u.shape[0]:
            cap = max(2 * self.u.shape[0], self.n + k)
            for name in ("u", "i", "r", "l"):
                a = getattr(self, name)
                b = np.empty(cap, a.dtype)
                b[:self.n] = a[:self.n]
                setattr(self, name, b)

    def finish(self):
        for name in ("u", "i", "r", "l"):
            setattr(self, name, getattr(self, name)[:self.n])
        pos = np.empty(self.n, np.int64)
        bounds = self.segments + [(self.n, None)]
        for (a, p), (b, _) in zip(bounds[:-1], bounds[1:]):
            pos[a:b] = np.arange(p, p + b - a)
        self.pos = pos
        return self


def _parse_into(part, buf, lay, keep, limit):
    """Parse the complete lines of ``buf`` into ``part`` (``keep`` False: count them and
    find errors only). Returns False once an error is found."""
    b = np.frombuffer(buf, np.uint8)
    delim, (bm, bn) = lay.delim_code, lay.bounds or (0, 0)
    fb = np.zeros(3, np.int64)
    out = part if keep else Part(b.shape[0] // 6 + 2)
    n0 = out.n
    if keep:
        part.segments.append((part.n, part.seen))
    pos, stop = 0, b.shape[0]
    while pos < stop:
        out.room((stop - pos) // 6 + 2)
        cap = out.u.shape[0]
        if limit is not None:  # stop at the first rating beyond the limit
            cap = min(cap, n0 + max(limit - part.seen, 0) + 1)
        pos, out.n, fell, lines = P.parse_block(b, pos, stop, delim, bm, bn, out.u[:cap],
                                                out.i[:cap], out.r[:cap], out.l[:cap],
                                                out.n, part.lines, fb, P._P10)
        part.lines += lines
        if fell:
            s, e, line = (int(x) for x in fb)
            try:
                row = parse_line(buf[s:e].decode("latin-1"), lay.delim, lay.bounds)
            except _LineError as exc:
                part.err = (line, str(exc))
                return False
            if row is not None:
                out.room(1)
                out.u[out.n], out.i[out.n], out.r[out.n] = row
                out.l[out.n] = line
                out.n += 1
        if limit is not None and part.seen + out.n - n0 > limit:
            part.too_many = True
            return False
    part.seen += out.n - n0
    return True


def read_part(lay, part, n_parts, limit="auto"):
    """Worker ``part``'s ratings of the file ``lay`` describes (a :class:`Layout`):
    a plain file's byte range, parsed in blocks; a gzip file (which cannot be cut by
    bytes) is decompressed whole by every worker, which keeps every n_parts-th block
    from its own on (the blocks are the same for all)."""
    limit = max_ratings() if limit == "auto" else limit
    p = Part()
    if lay.begin is None:
        return p.finish()
    if not lay.gz:
        lo, hi = line_range(lay.path, part, n_parts, lay.begin, lay.size)
        p.room(min(hi - lo, _CHUNK) // 6 + 2)
        try:
            with open(lay.path, "rb") as f:
                f.seek(lo)
                carry, at = b"", lo
                while at < hi or carry:
                    data = f.read(min(_CHUNK, hi - at)) if at < hi else b""
                    at += len(data)
                    buf = carry + data
                    if at < hi and data:
                        cut = P.last_cut(np.frombuffer(buf, np.uint8))
                        if cut == 0:
                            if len(buf) > _LONG_LINE + 2:
                                p.err = (p.lines, f"a line longer than {_LONG_LINE} "
                                                  "characters: not a rating file")
                                break
                            carry = buf
                            continue
                    else:
                        cut = len(buf)
                    carry = buf[cut:]
                    if not _parse_into(p, buf[:cut], lay, True, limit):
                        break
                    if not data:
                        break
        except OSError as e:
            p.err = (p.lines, f"cannot read ({e})")
        return p.finish()
    p.whole = True
    block, carry = 0, b""
    with _Source.open_raw(lay.path, True) as f:
        try:
            skip = lay.begin
            while skip > 0:
                got = f.read(min(skip, _GZ_READ))
                if not got:
                    break
                skip -= len(got)
            eof = False
            while not eof:
                buf = carry
                while len(buf) < _CHUNK and not eof:
                    try:
                        more = f.read(_GZ_READ)
                    except _READ_ERRORS as e:
                        if _parse_into(p, buf[:P.last_cut(np.frombuffer(buf, np.uint8))]
                                       if buf else b"", lay, block % n_parts == part,
                                       limit):
                            p.err = (p.lines, f"corrupt gzip data ({e})")
                        return p.finish()
                    eof = not more
                    buf += more
                cut = len(buf) if eof else P.last_cut(np.frombuffer(buf, np.uint8))
                if cut == 0 and not eof:
                    if len(buf) > _LONG_LINE + 2:
                        p.err = (p.lines, f"a line longer than {_LONG_LINE} characters: "
                                          "not a rating file")
                        break
                    carry = buf
                    continue
                carry = buf[cut:]
                if not _parse_into(p, buf[:cut], lay, block % n_parts == part, limit):
                    break
                block += 1
        except OSError as e:
            p.err = (p.lines, f"corrupt gzip data ({e})")
    return p.finish()


def read_whole(lay):
    """Every rating of the file ``lay`` (a :class:`Layout`) describes, in one process."""
    p = read_part(lay, 0, 1)
    if p.err is not None:
        raise DataError(f"{lay.where(lay.line0 + p.err[0])}: {p.err[1]}")
    if p.too_many:
        raise _too_many(lay.src, max_ratings())
    t = Triplets(p.u, p.i, p.r, lay.path, lay.line0 + p.l, pos=p.pos)
    skip, src = lay.line0 - 1, lay.src
    t.reparse = lambda: _parse_lines(src, lay.delim, skip, lay.bounds)
    return t


def read_delimited(path):
    """``user item rating [timestamp ...]`` per line, tab, comma or blank separated (told
    by the first rating line), with an optional header line before the first rating (a
    line whose first three fields are all not numbers, as in MovieLens ``ratings.csv``);
    ``#`` and ``%`` start comment lines; blank lines are skipped; fields after the third
    are ignored."""
    lay = path if isinstance(path, Layout) else Layout(path)
    return read_whole(lay)


def read_mtx(path):
    """MatrixMarket ``coordinate real|integer general``: row = user, column = item, both
    1-based and within the declared size (which only bounds the ids: nothing is sized by
    it); the size line's entry count must match the entries."""
    lay = path if isinstance(path, Layout) else Layout(path)
    t = read_whole(lay)
    if len(t) != lay.nnz:
        raise DataError(f"{lay.path}: the size line (line {lay.size_line}) announces "
                        f"{lay.nnz} entries, the file has {len(t)}")
    return t


def read_ratings(path):
    """Read a rating file: MatrixMarket (``%%MatrixMarket`` banner) or delimited triplets,
    plain or gzip-compressed (told by the magic bytes), with or without a UTF-8 BOM."""
    lay = Layout(path)
    return read_mtx(lay) if lay.mtx else read_delimited(lay)


# -- cleaning, remapping, splitting --------------------------------------------------------
def dedupe(t, policy="error"):
    """Duplicate (user, item) pairs: ``error`` names both lines; ``last`` keeps the one
    written last (a re-rating); ``mean`` averages them."""
    n = len(t)
    key = _pair_keys(t.users, t.items)
    if key is not None:  # the usual case, no duplicates: one sort of one key tells
        key.sort()
        if not (key[1:] == key[:-1]).any():
            return t
    order = np.lexsort((np.arange(n), t.items, t.users))
    u, i = t.users[order], t.items[order]
    dup = (u[1:] == u[:-1]) & (i[1:] == i[:-1])
    if not dup.any():
        return t
    if policy == "error":
        later, earlier = order[1:][dup], order[:-1][dup]
        k = int(np.argmin(later))
        full = t.with_lines()  # line numbers, for the message
        first = (f"line {int(full.lines[earlier[k]])}" if full.lines is not None
                 else f"entry {int(earlier[k])}")
        raise DataError(f"{full.where(later[k])}: duplicate rating of user {t.users[later[k]]}"
                        f", item {t.items[later[k]]} (first at {first}); pass duplicates="
                        "'last' or 'mean' (--duplicates) to keep one")
    start = np.concatenate([[True], ~dup])
    group = np.cumsum(start) - 1
    keep = order[np.flatnonzero(np.concatenate([start[1:], [True]]))]  # last of each group
    if policy == "last":
        r = t.ratings[keep]
    else:
        r = np.bincount(group, weights=t.ratings[order]) / np.bincount(group)
    # the values are this read's; only the line numbers (for later messages) come from
    # parsing again
    full = t.with_lines()
    lines = full.lines[keep] if full.lines is not None else None
    return Triplets(t.users[keep], t.items[keep], r, t.path, lines,
                    pos=t.pos[keep] if t.pos is not None else keep)


def _pair_keys(users, items):
    """One int64 key per (user, item) pair when the ids allow it (non-negative, product
    of the ranges below 2^62), else None."""
    if not users.shape[0] or users.dtype.kind not in "iu" or items.dtype.kind not in "iu":
        return None
    if min(int(users.min()), int(items.min())) < 0:
        return None
    span = int(items.max()) + 1
    if (int(users.max()) + 1) * span >= 1 << 62:
        return None
    return users.astype(np.int64) * span + items


def unique_inverse(ids):
    """``np.unique(ids, return_inverse=True)``, in linear time when the ids are
    non-negative integers no larger than a few times their count (1..m, as in every
    rating file we know), by a sort otherwise."""
    if ids.shape[0] and ids.dtype.kind in "iu":
        lo, hi = int(ids.min()), int(ids.max())
        if lo >= 0 and hi < 4 * ids.shape[0] + (1 << 20):
            present = np.zeros(hi + 1, bool)
            present[ids] = True
            pos = np.cumsum(present) - 1
            return np.flatnonzero(present).astype(ids.dtype), pos[ids]
    return np.unique(ids, return_inverse=True)


@dataclass
class Problem:
    """Remapped ratings: users 0..m-1, items 0..n-1 (``user_ids[k]`` is the raw id of user
    k). Held-out ratings of unseen ids (cold start, policy ``mean``) point at index m
    (or n), a row that predicts no interaction."""
    user_ids: np.ndarray
    item_ids: np.ndarray
    users: np.ndarray
    items: np.ndarray
    ratings: np.ndarray
    test_users: np.ndarray
    test_items: np.ndarray
    test_ratings: np.ndarray
    cold: int = 0  # held-out ratings with an unseen user or item (kept or skipped)

    @property
    def shape(self):
        return self.user_ids.shape[0], self.item_ids.shape[0]


def split(t, fraction, seed):
    """Hold out about ``fraction`` of the ratings, chosen by ``seed`` and each rating's
    position in the file (``t.pos``, else its index): the same choice whoever reads
    which part. A held-out rating whose user or item would keep no training rating stays
    in training, so the split itself never makes a cold start."""
    test = held_out(seed, t.pos if t.pos is not None else np.arange(len(t)), fraction)
    for ids in (t.users, t.items):
        _, inv = unique_inverse(ids)
        seen = np.bincount(inv[~test], minlength=inv.max() + 1) > 0
        test &= seen[inv]
    keep = lambda m: Triplets(t.users[m], t.items[m], t.ratings[m], t.path,  # noqa: E731
                              None if t.lines is None else t.lines[m],
                              pos=None if t.pos is None else t.pos[m])
    return keep(~test), keep(test)


def held_out(seed, pos, fraction):
    out = np.empty(pos.shape[0], np.bool_)
    P.held_out(np.int64(int(seed) & 0x7FFFFFFFFFFFFFFF), np.ascontiguousarray(pos, np.int64),
               float(fraction), out)
    return out


def check_fraction(name, f):
    """A held-out share (test, validation): in [0, 1)."""
    if not 0 <= f < 1:
        raise DataError(f"{name} must be in [0, 1), got {f}")


def validation_seed(seed):
    """The validation split's seed: another hash than the test split's of the same
    ``seed``, so the two choices are independent."""
    return (int(seed) ^ 0x56414C4944) & 0x7FFFFFFFFFFFFFFF


def prepare(train, test=None, test_fraction=0.0, seed=0, duplicates="error",
            cold_start="error", validation=0.0):
    """Deduplicate, split (``test_fraction`` when no ``test``), remap ids to 0..m-1 and
    0..n-1 from the training ratings, and map the held-out ones onto them.

    ``validation`` > 0: the problem of early stopping's first run: that share of the
    training ratings (chosen by ``seed`` and position, as the test split, but
    independently of it) is the held-out set, and the test set, checked as usual, is set
    aside."""
    if duplicates not in DUPLICATES:
        raise DataError(f"duplicates must be one of {DUPLICATES}, got {duplicates!r}")
    if cold_start not in COLD_START:
        raise DataError(f"cold_start must be one of {COLD_START}, got {cold_start!r}")
    check_fraction("test fraction", test_fraction)
    check_fraction("validation fraction", validation)
    _check_values(train)
    if train.pos is None:  # the splits choose by position among the file's ratings
        train = replace(train, pos=np.arange(len(train)))
    train = dedupe(train, duplicates)
    if test is not None:
        _check_values(test)
        test = dedupe(test, duplicates)
    elif test_fraction > 0:
        train, test = split(train, test_fraction, seed)
    val = None
    if validation > 0:
        train, val = split(train, validation, validation_seed(seed))
    user_ids, users = unique_inverse(train.users)
    item_ids, items = unique_inverse(train.items)
    m, n = user_ids.shape[0], item_ids.shape[0]
    cold = 0
    if test is None or len(test) == 0:
        tu = ti = np.zeros(0, np.int32)
        tr = np.zeros(0)
    else:
        tu, ku = _lookup(user_ids, test.users)
        ti, ki = _lookup(item_ids, test.items)
        unseen = ~(ku & ki)
        cold = int(unseen.sum())
        if cold and cold_start == "error":
            k = int(np.flatnonzero(unseen)[0])
            full = test.with_lines()
            what = (f"user {test.users[k]}" if not ku[k] else f"item {test.items[k]}")
            raise DataError(f"{full.where(k)}: {what} has no training rating (cold start); "
                            "pass cold_start='skip' or 'mean' (--cold-start) to drop such "
                            "ratings or predict them from the mean and known biases")
        tu = np.where(ku, tu, m).astype(np.int32)
        ti = np.where(ki, ti, n).astype(np.int32)
        tr = test.ratings
        if cold and cold_start == "skip":
            tu, ti, tr = tu[~unseen], ti[~unseen], tr[~unseen]
    if val is not None:  # every validation user and item kept a training rating
        tu = _lookup(user_ids, val.users)[0].astype(np.int32)
        ti = _lookup(item_ids, val.items)[0].astype(np.int32)
        tr, cold = val.ratings, 0
    return Problem(user_ids, item_ids, users.astype(np.int32), items.astype(np.int32),
                   np.ascontiguousarray(train.ratings, dtype=np.float64), tu, ti,
                   np.ascontiguousarray(tr, dtype=np.float64), cold)


def _lookup(ids, raw):
    pos = np.minimum(np.searchsorted(ids, raw), ids.shape[0] - 1)
    return pos, ids[pos] == raw


# -- the built-in problem ------------------------------------------------------------------
_GEN_USERS = 4096  # users per chunk of the built-in problem (each its own random stream)


def _problem_plan(n_users, n_items, n_ratings, rank, noise, alpha, seed):
    """What every worker computes alike: the popularities and each user's degree."""
    if min(n_users, n_items, n_ratings, rank) < 1:
        raise DataError("the built-in problem needs users, items, ratings and rank >= 1")
    if not (math.isfinite(noise) and noise >= 0 and math.isfinite(alpha) and alpha >= 0):
        raise DataError(f"the built-in problem needs a finite noise >= 0 (--noise) and "
                        f"alpha >= 0 (--alpha), got {noise} and {alpha}")
    if n_ratings > 0.5 * n_users * n_items:
        raise DataError(f"{n_ratings} ratings for {n_users} x {n_items}: at most half of "
                        "the pairs can be rated")
    need = (n_users + n_items) * (40 + 16 * rank) + BYTES_PER_RATING * n_ratings
    mem = physical_memory()
    if n_users * n_items >= _INT64:
        raise DataError(f"the built-in problem: {n_users} x {n_items} (--n-users x "
                        "--n-items) pairs do not fit in 64-bit integers")
    if mem is not None and need > mem:
        raise DataError(f"the built-in problem of {n_users} users (--n-users), {n_items} "
                        f"items (--n-items), {n_ratings} ratings (--n-ratings) and true rank "
                        f"{rank} (--true-rank) needs about {fmt_bytes(need)}, more than this "
                        f"machine's {fmt_bytes(mem)} of memory")
    rng = np.random.default_rng([seed, 0x6D66, 1])

    def popularity(k):
        with np.errstate(under="ignore"):
            w = (np.arange(k) + 1.0) ** -alpha
        rng.shuffle(w)
        return w / w.sum()

    pu, pi = popularity(n_users), popularity(n_items)
    # the distinct pairs that draws by popularity can be expected to reach (as many
    # draws as the rejection sampling of old was allowed): a too skewed --alpha is
    # refused here, never drawn forever
    budget = 100 * n_ratings + 10 ** 7
    expect = _expected_pairs(pu, pi, budget)
    if expect < n_ratings:
        raise DataError(f"the built-in problem: only {int(round(expect))} distinct (user, "
                        f"item) pairs of the {n_ratings} asked for (--n-ratings) can be "
                        f"expected from {budget} draws: popularity exponent {alpha} "
                        f"(--alpha) is too skewed for {n_users} x {n_items}; lower --alpha "
                        "or --n-ratings")
    cap = int((pi > 0).sum())
    deg = rng.multinomial(n_ratings, pu).astype(np.int64)
    while (deg > cap).any():  # a user rates each item at most once
        over = deg > cap
        extra = int((deg[over] - cap).sum())
        deg[over] = cap
        room = (deg < cap) & (pu > 0)
        w = pu * room
        deg += rng.multinomial(extra, w / w.sum())
    cdf = np.cumsum(pi)
    cdf /= cdf[-1]
    return pu, pi, cdf, deg


def _expected_pairs(pu, pi, draws):
    """sum over (u, i) of 1 - (1 - p_u p_i)^draws, over log-spaced bins of p."""
    def bins(p):
        p = p[p > 0]
        b = np.floor(np.log10(p) * 20).astype(np.int64)
        keys, inv = np.unique(b, return_inverse=True)
        return np.bincount(inv), np.bincount(inv, weights=p) / np.bincount(inv)
    cu, mu = bins(pu)
    ci, mi = bins(pi)
    with np.errstate(under="ignore"):
        f = -np.expm1(-draws * np.outer(mu, mi))
    return float(cu @ f @ ci)


def make_problem_part(n_users=3000, n_items=1500, n_ratings=60000, rank=8, noise=0.5,
                      alpha=0.7, seed=0, part=0, n_parts=1):
    """Part ``part`` of ``n_parts`` of :func:`make_problem`: its chunks of users, each
    drawn from a random stream of its own, so the problem does not depend on how many
    parts it is made in. ``pos``: each rating's position in the whole problem."""
    pu, pi, cdf, deg = _problem_plan(n_users, n_items, n_ratings, rank, noise, alpha, seed)
    V = np.random.default_rng([seed, 0x6D66, 4]).standard_normal((n_items, rank))
    VT = np.ascontiguousarray(V.T)
    del V
    n_chunks = -(-n_users // _GEN_USERS)
    c0, c1 = n_chunks * part // n_parts, n_chunks * (part + 1) // n_parts
    per_chunk = np.add.reduceat(deg, np.arange(0, n_users, _GEN_USERS))
    offsets = np.concatenate([[0], np.cumsum(per_chunk)])
    us, its, rs, ps = [], [], [], []
    for c in range(c0, c1):
        users = np.arange(c * _GEN_USERS, min((c + 1) * _GEN_USERS, n_users))
        rng = np.random.default_rng([seed, 0x6D66, 5, c])
        keys = _chunk_pairs(rng, users, deg[users], cdf, pi, n_items)
        keys = keys[rng.permutation(keys.shape[0])]  # in no order of user or item
        u, i = keys // n_items, keys % n_items
        U = rng.standard_normal((users.shape[0], rank))
        r = np.empty(keys.shape[0])
        K.predict_pairs(np.ascontiguousarray(U.T), VT, u - users[0], i, r)
        r = 3.0 + r / np.sqrt(rank)
        r += noise * rng.standard_normal(keys.shape[0])
        us.append(u)
        its.append(i)
        rs.append(r)
        ps.append(np.arange(offsets[c], offsets[c] + keys.shape[0]))
    cat = lambda xs, dt: np.concatenate(xs).astype(dt) if xs else np.zeros(0, dt)  # noqa
    return Triplets(cat(us, np.int64), cat(its, np.int64), cat(rs, np.float64), "built-in",
                    pos=cat(ps, np.int64))


def _chunk_pairs(rng, users, deg, cdf, pi, n_items):
    """``deg[k]`` distinct items for each user, drawn by popularity: rounds of draws
    (repeats dropped), then for a user still short (a popular user on skewed items),
    the rest by weighted sampling without replacement (exponential keys). Returns the
    sorted keys user * n_items + item."""
    keys = np.zeros(0, np.int64)
    have = np.zeros(users.shape[0], np.int64)
    for _ in range(8):
        short = have < deg
        if not short.any():
            break
        want = np.ceil(1.2 * (deg[short] - have[short])).astype(np.int64) + 2
        uu = np.repeat(users[short], want)
        draw = np.empty(uu.shape[0], np.int64)
        K.inverse_cdf(cdf, rng.random(uu.shape[0]), draw)
        allk = np.concatenate([keys, uu * n_items + draw])
        _, first = np.unique(allk, return_index=True)
        allk = allk[np.sort(first)]  # first occurrences, in draw order
        lu = allk // n_items - users[0]
        order = np.argsort(lu, kind="stable")
        ranks = np.empty(allk.shape[0], np.int64)
        cnt = np.bincount(lu, minlength=users.shape[0])
        starts = np.concatenate([[0], np.cumsum(cnt)[:-1]])
        ranks[order] = np.arange(allk.shape[0]) - np.repeat(starts, cnt)
        keys = allk[ranks < deg[lu]]
        have = np.minimum(cnt, deg)
    short = np.flatnonzero(have < deg)
    if short.shape[0]:
        extra = []
        positive = np.flatnonzero(pi > 0)
        for k in short:
            mine = keys[keys // n_items == users[k]] % n_items
            free = np.setdiff1d(positive, mine)
            e = np.log(rng.random(free.shape[0])) / pi[free]
            take = free[np.argsort(-e, kind="stable")[:deg[k] - have[k]]]
            extra.append(users[k] * n_items + take)
        keys = np.concatenate([keys] + extra)
    keys.sort()
    return keys


def make_problem(n_users=3000, n_items=1500, n_ratings=60000, rank=8, noise=0.5,
                 alpha=0.7, seed=0):
    """Deterministic low-rank-plus-noise ratings with power-law degrees.

    User and item popularities follow Zipf weights (k+1)^-alpha, shuffled over the ids;
    each user's number of ratings is drawn by popularity (a multinomial, capped at the
    items), and its items by item popularity without repeats, from a random stream of
    its chunk of users (so any number of workers can each make its own users'). r = 3 +
    u.v / sqrt(rank) + noise * N(0, 1) with u, v standard normal. Returns
    :class:`Triplets` (every part of :func:`make_problem_part`).
    """
    return make_problem_part(n_users, n_items, n_ratings, rank, noise, alpha, seed)
