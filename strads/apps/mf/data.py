"""Rating data: readers (MatrixMarket, delimited triplets), id remapping, the held-out
split and the built-in synthetic problem.

Readers return :class:`Triplets` with the raw ids as written in the file; any problem
raises :class:`strads.DataError` naming the file, the line and what is wrong. A file may
be gzip-compressed (told by its magic bytes) and start with a UTF-8 byte-order mark; it
reads exactly as the plain file. The fast path (``np.loadtxt``) reads clean files;
anything it cannot vouch for is parsed again line by line, with the same rules, so the
error names the first bad line. Nothing is allocated from a size a file declares, and
no more ratings are read than this machine's memory can fit.
"""
import contextlib
import gzip
import io
import math
import os
import warnings
import zlib
from array import array
from dataclasses import dataclass

import numpy as np

from ...engine import DataError
from . import kernels as K

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
# (\n, \r\n, \r). The fast path (np.loadtxt, ids parsed as int64, ASCII only) and the line
# by line parse see the same lines and accept the same fields: whatever the fast path
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
_LONG_LINE = 1 << 20  # a line read line by line longer than this: not a rating file
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


def _parse_lines(src, delim, skip):
    """Line by line: exact errors, and the line number of every entry."""
    src = _source(src)
    limit = max_ratings()
    us, its, rs, lines = array("q"), array("q"), array("d"), array("q")
    for lineno, raw in src.lines():
        line = raw.strip()
        if lineno <= skip or not line or line[0] in "#%":
            continue
        where = f"{src.path}:{lineno}"
        parts = _split(line, delim)
        if not raw.isascii():  # fine in the ignored fields only (np.loadtxt sees ASCII)
            blanks = delim is None and ("\x85" in line or "\xa0" in line)  # str.split's
            bad = [c for c in (line if blanks else "".join(parts[:3])) if not c.isascii()]
            if bad:
                raise DataError(f"{where}: non-ASCII byte 0x{ord(bad[0]):02x} in a rating "
                                "line's first three fields (ids and ratings are ASCII "
                                "numbers)")
        if len(parts) < 3:
            hint = (" (a '::'-separated file such as MovieLens ratings.dat: replace '::' "
                    "by tabs)" if "::" in line else " (only tabs, commas or blanks separate "
                    "fields)" if ";" in line or "|" in line else "")
            raise DataError(f"{where}: expected 'user item rating', found "
                            f"{len(parts)} field(s){hint}")
        us.append(_id(parts[0].strip(), "user", where))
        its.append(_id(parts[1].strip(), "item", where))
        rs.append(_rating(parts[2].strip(), where))
        lines.append(lineno)
        if limit is not None and len(rs) > limit:
            raise _too_many(src, limit)
    return Triplets(np.frombuffer(us, np.int64).copy(), np.frombuffer(its, np.int64).copy(),
                    np.frombuffer(rs, np.float64).copy(), src.path,
                    np.frombuffer(lines, np.int64).copy())


def _data_lines(f):
    """The lines of ``f`` that are neither blank nor comments (as :func:`_parse_lines`
    tells them)."""
    for line in f:
        c = line[:1]
        if c in "#%" or c.isspace():  # also "": c in "#%" is then true
            s = line.strip()
            if not s or s[0] in "#%":
                continue
        yield line


def _fast(src, delim, skip, filtered=False):
    """np.loadtxt (ids as int64, ratings as float64, ASCII text), trusted only when every
    rating is finite; returns None to ask for the line by line parse. ``skip``: lines
    before the first rating, or with ``filtered`` (comment and blank lines taken out
    first, a little slower) the other lines among them: the header or size line."""
    limit = max_ratings()
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            with src.text("ascii") as f:
                a = np.loadtxt(_data_lines(f) if filtered else f, delimiter=delim,
                               skiprows=skip, usecols=(0, 1, 2), comments=None,
                               quotechar=None, ndmin=1, dtype=_ID_DTYPE,
                               max_rows=None if limit is None else limit + 1)
    except (ValueError, IndexError):  # UnicodeDecodeError is a ValueError
        return None
    except _READ_ERRORS:  # corrupt gzip: the line by line parse says where
        return None
    if limit is not None and a.shape[0] > limit:
        raise _too_many(src, limit)
    r = np.ascontiguousarray(a["r"])
    if a.shape[0] == 0 or not np.isfinite(r).all():
        return None
    return Triplets(np.ascontiguousarray(a["u"]), np.ascontiguousarray(a["i"]), r, src.path)


def _read(src, delim, skip, skip_rows):
    """Fast, then fast without comment lines (``skip_rows``: the lines among the first
    ``skip`` that are not blank or comments), then line by line."""
    t = (_fast(src, delim, skip) or _fast(src, delim, skip_rows, filtered=True)
         or _parse_lines(src, delim, skip))
    t.reparse = lambda: _parse_lines(src, delim, skip)
    return t


def read_delimited(path):
    """``user item rating [timestamp ...]`` per line, tab, comma or blank separated (told
    by the first rating line), with an optional header line before the first rating (a
    line whose first three fields are all not numbers, as in MovieLens ``ratings.csv``);
    ``#`` and ``%`` start comment lines; blank lines are skipped; fields after the third
    are ignored."""
    src = _source(path)
    first, header = None, False
    with contextlib.closing(src.lines()) as lines:
        for lineno, raw in lines:
            line = raw.strip()
            if "%%matrixmarket" in line[:40].lower():  # not at the start of line 1
                raise DataError(f"{src.path}:{lineno}: a MatrixMarket banner must start the "
                                "file's first line")
            if not line or line[0] in "#%":
                continue
            parts = _split(line, "\t" if "\t" in line else "," if "," in line else None)
            if (not header and len(parts) >= 3 and
                    not any(_is_number(p.strip()) for p in parts[:3])):
                header = True  # column names
                continue
            first = (lineno, line)
            break
    if first is None:
        what = "only a header" if header else "empty file"
        raise DataError(f"{src.path}: no ratings ({what})")
    lineno, line = first
    delim = "\t" if "\t" in line else "," if "," in line else None
    # every line before the first rating is blank, a comment or the header
    return _read(src, delim, lineno - 1, int(header))


def _mtx_header(path, lines):
    """The banner (line 1), checked, and the size line: (its number, its fields)."""
    _, banner = next(lines)
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
    lineno, size = 1, None
    for lineno, raw in lines:
        line = raw.strip()
        if line and not line.startswith("%"):
            size = line.split()
            break
    return lineno, size


def read_mtx(path):
    """MatrixMarket ``coordinate real|integer general``: row = user, column = item, both
    1-based and within the declared size (which only bounds the ids: nothing is sized by
    it); the size line's entry count must match the entries."""
    src = _source(path)
    path = src.path
    with contextlib.closing(src.lines()) as lines:
        lineno, size = _mtx_header(path, lines)
    if size is None:
        raise DataError(f"{path}: no size line (empty file)")
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
    t = _read(src, None, lineno, 1)
    if len(t) != nnz:
        raise DataError(f"{path}: the size line (line {lineno}) announces {nnz} entries, "
                        f"the file has {len(t)}")
    for arr, hi, what in ((t.users, m, "row"), (t.items, n, "column")):
        bad = np.flatnonzero((arr < 1) | (arr > hi))
        if bad.size:
            raise DataError(f"{t.with_lines().where(bad[0])}: {what} {arr[bad[0]]} is "
                            f"outside 1..{hi}")
    return t


def read_ratings(path):
    """Read a rating file: MatrixMarket (``%%MatrixMarket`` banner) or delimited triplets,
    plain or gzip-compressed (told by the magic bytes), with or without a UTF-8 BOM."""
    src = _Source(path)
    return read_mtx(src) if src.mtx else read_delimited(src)


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
    return Triplets(t.users[keep], t.items[keep], r, t.path, lines)


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
    """Hold out about ``fraction`` of the ratings, chosen by ``seed``. A held-out rating
    whose user or item would keep no training rating stays in training, so the split
    itself never makes a cold start."""
    rng = np.random.default_rng([seed, 0x6D66])
    test = rng.random(len(t)) < fraction
    for ids in (t.users, t.items):
        _, inv = unique_inverse(ids)
        seen = np.bincount(inv[~test], minlength=inv.max() + 1) > 0
        test &= seen[inv]
    keep = lambda m: Triplets(t.users[m], t.items[m], t.ratings[m], t.path,  # noqa: E731
                              None if t.lines is None else t.lines[m])
    return keep(~test), keep(test)


def prepare(train, test=None, test_fraction=0.0, seed=0, duplicates="error",
            cold_start="error"):
    """Deduplicate, split (``test_fraction`` when no ``test``), remap ids to 0..m-1 and
    0..n-1 from the training ratings, and map the held-out ones onto them."""
    if duplicates not in DUPLICATES:
        raise DataError(f"duplicates must be one of {DUPLICATES}, got {duplicates!r}")
    if cold_start not in COLD_START:
        raise DataError(f"cold_start must be one of {COLD_START}, got {cold_start!r}")
    if not 0 <= test_fraction < 1:
        raise DataError(f"test fraction must be in [0, 1), got {test_fraction}")
    _check_values(train)
    train = dedupe(train, duplicates)
    if test is not None:
        _check_values(test)
        test = dedupe(test, duplicates)
    elif test_fraction > 0:
        train, test = split(train, test_fraction, seed)
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
    return Problem(user_ids, item_ids, users.astype(np.int32), items.astype(np.int32),
                   np.ascontiguousarray(train.ratings, dtype=np.float64), tu, ti,
                   np.ascontiguousarray(tr, dtype=np.float64), cold)


def _lookup(ids, raw):
    pos = np.minimum(np.searchsorted(ids, raw), ids.shape[0] - 1)
    return pos, ids[pos] == raw


# -- the built-in problem ------------------------------------------------------------------
def make_problem(n_users=3000, n_items=1500, n_ratings=60000, rank=8, noise=0.5,
                 alpha=0.7, seed=0):
    """Deterministic low-rank-plus-noise ratings with power-law degrees.

    User and item popularities follow Zipf weights (k+1)^-alpha, shuffled over the ids;
    each rating picks its user and item by popularity (repeats dropped, so the count is
    exact). r = 3 + u.v / sqrt(rank) + noise * N(0, 1) with u, v standard normal.
    Returns :class:`Triplets`.
    """
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

    def cdf(k):
        w = (np.arange(k) + 1.0) ** -alpha
        rng.shuffle(w)
        c = np.cumsum(w)
        return c / c[-1]

    cu, ci = cdf(n_users), cdf(n_items)
    keys = np.zeros(0, np.int64)
    # with very skewed popularity (a large alpha) the distinct pairs may never come (the
    # defaults take 1-4 rounds and 1.2-1.3 draws a rating; alpha 1 on a small, dense
    # problem about 30 rounds and 6 draws a rating): stop once the draws and sorts pass
    # 100 a rating (plus 10^7)
    work, budget, draws = 0, 100 * n_ratings + 10 ** 7, 0
    while keys.shape[0] < n_ratings:
        if work > budget:
            raise DataError(f"the built-in problem: only {keys.shape[0]} distinct (user, "
                            f"item) pairs of the {n_ratings} asked for (--n-ratings) after "
                            f"{draws} draws: popularity exponent {alpha} (--alpha) is too "
                            f"skewed for {n_users} x {n_items}; lower --alpha or "
                            "--n-ratings")
        draw = int(1.2 * (n_ratings - keys.shape[0])) + 100
        work += 2 * draw + keys.shape[0]
        draws += draw
        u, i = np.empty(draw, np.int64), np.empty(draw, np.int64)
        K.inverse_cdf(cu, rng.random(draw), u)
        K.inverse_cdf(ci, rng.random(draw), i)
        keys = np.concatenate([keys, u.astype(np.int64) * n_items + i])
        _, first = np.unique(keys, return_index=True)
        keys = keys[np.sort(first)]  # first occurrences, in draw order
    keys = keys[:n_ratings]
    u, i = keys // n_items, keys % n_items
    U = rng.standard_normal((n_users, rank))
    V = rng.standard_normal((n_items, rank))
    r = np.empty(n_ratings)
    K.predict_pairs(np.ascontiguousarray(U.T), np.ascontiguousarray(V.T), u, i, r)
    r = 3.0 + r / np.sqrt(rank)
    r += noise * rng.standard_normal(n_ratings)
    return Triplets(u, i, r, "built-in")
