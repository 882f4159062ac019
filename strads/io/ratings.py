"""Rating files: delimited ``user item rating [...]`` lines (MovieLens u.data, ratings.csv)
or MatrixMarket ``coordinate real|integer general`` (row = user, column = item), with
the raw integer ids as written. Read whole (:func:`read`) or a worker's part
(:func:`read_part`; the workers agree on the first bad line, the ratings' positions and
their lines: :func:`gather`) (docs/architecture.md)."""
import math
import re

import numpy as np
from numba import njit

from ..errors import DataError
from ..transport import Peers
from . import memory
from .agree import agree, refuse
from .numbers import BIG, NB, scan_float_inline, scan_int_inline
from .source import Content, Name, Text, line_range

LONG_LINE = 1 << 20  # a line this long or longer: not a rating file
LONG = f"a line longer than {LONG_LINE} characters: not a rating file"
BANNER = "a MatrixMarket banner must start the file's first line"
BYTES_PER_RATING = 80  # peak memory to read, prepare and fit a rating (docs/scaling.md)
INT64 = 1 << 63
_CHUNK = 8 << 20  # bytes parsed at a time


def max_ratings():
    """The most ratings this machine's memory can read, prepare and fit (None: no cap)."""
    mem = memory.physical_memory()
    return None if mem is None else max(mem // BYTES_PER_RATING, 1)


def too_many(path, limit, what=None):
    return DataError(f"{path}: {what or f'more than {limit} ratings'}: {memory.whose()} "
                     f"{memory.fmt_bytes(memory.physical_memory())} of memory holds at most "
                     f"{limit} (about {BYTES_PER_RATING} bytes a rating to read, prepare and "
                     "fit)")


# -- the byte parser ---------------------------------------------------------------------
@njit(**NB)
def _is_ws(c):
    # what str.strip() and str.split() take as blanks among ASCII bytes
    return c == 32 or (c >= 9 and c <= 13) or (c >= 28 and c <= 31)


@njit(inline="always", **NB)
def _blanks(b, p, n, delim):
    """The first byte from p that is no blank (a line end, \\n or \\r, and ``delim``
    stop it)."""
    while p < n and b[p] != 10 and b[p] != 13 and b[p] != delim and _is_ws(b[p]):
        p += 1
    return p


@njit(inline="always", **NB)
def _next_field(b, t, n, delim, last):
    """After a number ending at t, where the next field starts (blanks skipped), or -1
    when the number does not end its field (``last``: the third field, which only has to
    end; then the first byte after its blanks)."""
    if delim == 0:
        if t < n and not _is_ws(b[t]):
            return -1
        if last:
            return t
        if t >= n or b[t] == 10 or b[t] == 13:
            return -1
        return _blanks(b, t, n, 0)
    t = _blanks(b, t, n, delim)
    if last:
        return t if t >= n or b[t] == delim or b[t] == 10 or b[t] == 13 else -1
    if t >= n or b[t] != delim:
        return -1
    return _blanks(b, t + 1, n, delim)


@njit(inline="always", **NB)
def _id_field(b, p, n, delim):
    """An id at p, up to 2^62 (beyond: the line by line rules), and where the next field
    starts: (that, ok, the id)."""
    e, ok, v = scan_int_inline(b, p, n)
    ok = ok and abs(v) < BIG
    if ok:
        e = _next_field(b, e, n, delim, False)
        ok = e >= 0
    return e, ok, v


@njit(_nrt=False, **NB)
def _parse_block(b, start, stop, delim, mtx_m, mtx_n, out_u, out_i, out_r, out_l, count,
                 line0, fb, lim):
    """Parse the lines that start in ``b[start:stop]`` (each ends within ``b``) into
    ``out_*[count:]`` (``out_l``, unless empty: the line's index, ``line0`` for the
    first). It stops after a line it leaves to the line-by-line rules, with ``fb`` = (its
    start, its end, its index), before a line with an id beyond ``lim`` (the id arrays'
    width), or when ``out`` is full. Returns (where it stopped, count, 0 / 1 (``fb``
    set) / 2 (an id too wide), lines passed)."""
    n = b.shape[0]
    cap = out_u.shape[0]
    pos = start
    line = line0
    while pos < stop:
        if count >= cap:
            break
        s = _blanks(b, pos, n, -1)
        c = b[s] if s < n else 10
        rating = c != 10 and c != 13 and c != 35 and c != 37  # neither blank nor a comment
        banner = c == 37 and s + 1 < n and b[s + 1] == 37  # '%%': a misplaced banner?
        ok = rating
        u = i = 0
        r = 0.0
        e = s
        if ok:
            e, ok, u = _id_field(b, s, n, delim)
        if ok:
            e, ok, i = _id_field(b, e, n, delim)
        if ok:
            e, st, r = scan_float_inline(b, e, n)
            ok = st == 0
        if ok:
            e = _next_field(b, e, n, delim, True)
            ok = e >= 0
        e = max(e, s)
        ascii = True
        while e < n:
            c = b[e]
            if c == 10 or c == 13:
                break
            if c >= 128:
                ascii = False
            e += 1
        nxt = e + 1
        if e < n and b[e] == 13 and e + 1 < n and b[e + 1] == 10:
            nxt = e + 2
        if rating or banner:
            ok = ok and ascii and e - pos < LONG_LINE
            if ok and mtx_m > 0:
                ok = u >= 1 and u <= mtx_m and i >= 1 and i <= mtx_n
            if ok and (u > lim or u < -lim - 1 or i > lim or i < -lim - 1):
                return pos, count, 2, line - line0
            if ok:
                out_u[count] = u
                out_i[count] = i
                out_r[count] = r
                if out_l.shape[0]:
                    out_l[count] = line
                count += 1
            else:
                fb[0] = pos
                fb[1] = e
                fb[2] = line
                return min(nxt, n), count, 1, line + 1 - line0
        line += 1
        pos = nxt
    return min(pos, n), count, 0, line - line0


# -- the line by line rules (the reference, and the messages) -----------------------------
class LineError(Exception):
    """What is wrong with one line (the caller names the file and line)."""


def decode(tok):
    return tok.encode("latin-1").decode("utf-8", errors="replace")


def _number(tok, conv):
    """``conv(tok)`` (int or float), None if it is no number as np.loadtxt reads them:
    int() and float() also take 1_000."""
    try:
        return conv(tok) if "_" not in tok else None
    except ValueError:
        return None


def _id(tok, what):
    v = _number(tok, int)
    if v is None:
        raise LineError(f"{what} {decode(tok)!r} is not an integer")
    if not -INT64 <= v < INT64:
        raise LineError(f"{what} id {v} does not fit in a 64-bit integer")
    return v


def _split(line, delim):
    return line.split(delim) if delim else line.split()


def parse_line(raw, delim, bounds=None):
    """One line (str, latin-1 decoded, without its line end) by the line-by-line rules:
    None for a blank or comment line, else (user, item, rating); :class:`LineError`
    says what is wrong. ``bounds``: a MatrixMarket file's (rows, columns)."""
    if len(raw) >= LONG_LINE:
        raise LineError(LONG)
    line = raw.strip()
    if line[:14].lower() == "%%matrixmarket":
        raise LineError(BANNER)
    if not line or line[0] in "#%":
        return None
    parts = _split(line, delim)
    if not raw.isascii():  # fine in the ignored fields only (np.loadtxt sees ASCII)
        blanks = delim is None and ("\x85" in line or "\xa0" in line)  # str.split's
        bad = [c for c in (line if blanks else "".join(parts[:3])) if not c.isascii()]
        if bad:
            raise LineError(f"non-ASCII byte 0x{ord(bad[0]):02x} in a rating line's first "
                            "three fields (ids and ratings are ASCII numbers)")
    if len(parts) < 3:
        hint = (" (a '::'-separated file such as MovieLens ratings.dat: replace '::' "
                "by tabs)" if "::" in line else " (only tabs, commas or blanks separate "
                "fields)" if ";" in line or "|" in line else "")
        raise LineError(f"expected 'user item rating', found {len(parts)} field(s){hint}")
    u = _id(parts[0].strip(), "user")
    i = _id(parts[1].strip(), "item")
    tok = parts[2].strip()
    r = _number(tok, float)
    if r is None:
        raise LineError(f"rating {decode(tok)!r} is not a number")
    if not math.isfinite(r):
        raise LineError(f"rating is {r}, not finite")
    if bounds is not None:
        for v, hi, what in ((u, bounds[0], "row"), (i, bounds[1], "column")):
            if not 1 <= v <= hi:
                raise LineError(f"{what} {v} is outside 1..{hi}")
    return u, i, r


_ROLES = {w: role for role, words in (
    ("user", "user users uid u customer reviewer rater"),
    ("item", "item items iid i movie product book artist song track business asin isbn"),
    ("rating", "rating ratings score stars star rate value r overall"),
    ("time", "time timestamp date datetime t ts")) for w in words.split()}


def _role(name):
    """A column name's role, by its last word that has one (``userId``: user,
    ``star_rating``: rating, ``unixReviewTime``: time, ``rater_id``: none)."""
    words = re.findall(r"[A-Z]?[a-z]+|[A-Z]+(?![a-z])", name)
    return next((_ROLES[w.lower()] for w in reversed(words) if w.lower() in _ROLES), None)


def named_order(names):
    """The positions of the user, item and rating columns as ``names`` say: (0, 1, 2)
    where they say nothing against that order, else where they name all three; None:
    named elsewhere, not all three."""
    roles = [_role(str(n)) for n in names]
    want = ("user", "item", "rating")
    if all(r in (w, None) for r, w in zip(roles, want)) and (
            roles[2] == "rating" or "rating" not in roles[3:]):
        return 0, 1, 2
    return tuple(roles.index(w) for w in want) if all(w in roles for w in want) else None


def _check_header(path, lineno, names):
    """A header whose names put the columns elsewhere than user, item, rating (MovieLens'
    order) is refused: the first three columns are read whatever their names."""
    if named_order(names) == (0, 1, 2):
        return
    roles, want = [_role(n) for n in names], ("user", "item", "rating")
    where = [roles.index(w) + 1 if w in roles else None for w in want]
    hint = (" (e.g. awk -F, -v OFS=, '{print " + ",".join(f"${k}" for k in where) +
            "}' for a comma-separated file)" if None not in where else "")
    raise DataError(f"{path}:{lineno}: the header names the columns "
                    f"{', '.join(map(repr, names[:6]))}; the first three columns are read "
                    f"as user, item and rating in that order: reorder the columns{hint}")


class Layout:
    """Where a rating file's ratings are (the workers' parts are cut from ``begin``),
    from the lines before the first rating; a worker is sent it."""

    def __init__(self, path):
        src = Text(path, "rating file")
        path = self.path = Name(src.path)
        if not src.gz and path.lower().endswith(".gz"):
            raise DataError(f"{path}: named .gz but not gzip-compressed (no 1f 8b magic "
                            "bytes)")
        if not src.head:
            raise DataError(f"{path}: no ratings (empty file"
                            f"{' after decompression' if src.gz else ''})")
        self.gz, self.size = src.gz, src.size
        self.content = Content(path)  # (what a resume checks: the shard's digest)
        self.mtx = src.head[:14].lower() == b"%%matrixmarket"
        self.bounds, self.nnz, self.size_line = None, None, None
        lines = ((k, off, raw.decode("latin-1")) for k, off, raw in
                 src.lines(True, cap=LONG_LINE + 2))
        (self._mtx if self.mtx else self._delimited)(lines)
        lines.close()

    def _delimited(self, lines):
        first, header = None, False
        for lineno, off, raw in lines:
            if len(raw) >= LONG_LINE:
                raise DataError(f"{self.path}:{lineno}: {LONG}")
            line = raw.strip()
            if "%%matrixmarket" in line[:40].lower():  # not at the start of line 1
                raise DataError(f"{self.path}:{lineno}: {BANNER}")
            if not line or line[0] in "#%":
                continue
            self.delim = "\t" if "\t" in line else "," if "," in line else None
            parts = _split(line, self.delim)
            if (not header and len(parts) >= 3 and
                    all(_number(p.strip(), float) is None for p in parts[:3])):
                header = True  # column names
                _check_header(self.path, lineno, [p.strip() for p in parts])
                continue
            first = (lineno, off)
            break
        if first is None:
            what = "only a header" if header else "empty file"
            raise DataError(f"{self.path}: no ratings ({what})")
        self.line0, self.begin = first

    def _mtx(self, lines):
        path = self.path
        toks = next(lines)[2].lower().split()
        if len(toks) < 5 or toks[0] != "%%matrixmarket" or toks[1] != "matrix":
            raise DataError(f"{path}:1: not a MatrixMarket banner "
                            "('%%MatrixMarket matrix coordinate real general')")
        if toks[2] != "coordinate":
            raise DataError(f"{path}:1: {decode(toks[2])} format holds no sparse ratings; "
                            "need 'coordinate'")
        if toks[3] not in ("real", "integer", "double"):
            raise DataError(f"{path}:1: field {decode(toks[3])!r}: ratings need 'real' or "
                            "'integer' values")
        if toks[4] != "general":
            raise DataError(f"{path}:1: symmetry {decode(toks[4])!r}: a rating matrix is "
                            "'general'")
        size = None
        for lineno, off, raw in lines:
            line = raw.strip()
            if line and not line.startswith("%"):
                size = line.split()
                break
        if size is None:
            raise DataError(f"{path}: no size line (empty file)")
        where = f"{path}:{lineno}"
        if len(size) != 3 or not all(x.lstrip("+").isdigit() and x.isascii() for x in size):
            raise DataError(f"{where}: size line must be 'rows columns entries' (three "
                            f"non-negative integers), got {decode(' '.join(size))!r}")
        m, n, nnz = (int(x) for x in size)
        if max(m, n, nnz) >= INT64:
            raise DataError(f"{where}: size {m} x {n} with {nnz} entries does not fit in "
                            "64-bit integers")
        if m < 1 or n < 1:
            raise DataError(f"{where}: a {m} x {n} matrix holds no ratings")
        if nnz == 0:
            raise DataError(f"{where}: no ratings (0 entries)")
        if nnz > m * n:
            raise DataError(f"{where}: {nnz} entries announced, more than the {m} x {n} = "
                            f"{m * n} cells of the matrix")
        if not self.gz and 6 * nnz - 1 > self.size:  # an entry takes at least '1 1 1\n'
            raise DataError(f"{where}: {nnz} entries announced; a file of {self.size} bytes "
                            f"holds at most {(self.size + 1) // 6}")
        limit = max_ratings()
        if limit is not None and nnz > limit:
            raise too_many(path, limit, f"line {lineno}: {nnz} entries announced")
        self.bounds, self.nnz, self.size_line, self.delim = (m, n), nnz, lineno, None
        self.line0 = lineno + 1
        nxt = next(lines, None)
        self.begin = nxt[1] if nxt is not None else None  # None: no line after it


# -- one worker's part ---------------------------------------------------------------------
I32 = (1 << 31) - 1


class Part:
    """A worker's ratings as read: raw ids ``u``, ``i`` (int32, int64 once an id needs
    it), ratings ``r``, each one's line index ``l`` when asked for (``lines``; from the
    part's first line, or the file's first rating line for gzip), the lines and
    ratings passed (``lines``, ``seen``), ``segments`` (first index here, position of
    that rating among the file's), and the first error: (line index, what is wrong), or
    ``too_many`` ratings for this machine."""

    def __init__(self, cap=0, lines=False):
        self.u, self.i = np.empty(cap, np.int32), np.empty(cap, np.int32)
        self.r, self.l = np.empty(cap), np.empty(cap if lines else 0, np.int64)
        self.track = lines
        self.n = self.lines = self.seen = 0
        self.segments = []
        self.left = None  # bytes of the part not yet parsed (None: not known, gzip)
        self.done = 0  # bytes of its blocks parsed
        self.err, self.too_many = None, False

    def _arrays(self):
        return ("u", "i", "r", "l") if self.track else ("u", "i", "r")

    def room(self, k, more=0):
        """Room for k more ratings (``more``: what the rest of the part will need)."""
        if self.n + k > self.u.shape[0]:  # in place where the allocator can: no copy
            cap = max(self.u.shape[0] + self.u.shape[0] // 2 if not more else 0,
                      self.n + max(k, more))
            for name in self._arrays():
                getattr(self, name).resize(cap, refcheck=False)

    def widen(self):
        """int64 ids, for an id beyond int32's."""
        self.u, self.i = self.u.astype(np.int64), self.i.astype(np.int64)

    def add(self, row, line):
        if self.u.dtype == np.int32 and not (-I32 - 1 <= row[0] <= I32 and
                                             -I32 - 1 <= row[1] <= I32):
            self.widen()
        self.room(1)
        self.u[self.n], self.i[self.n], self.r[self.n] = row
        if self.track:
            self.l[self.n] = line
        self.n += 1

    def finish(self):
        for name in self._arrays():
            getattr(self, name).resize(self.n, refcheck=False)
        return self


def _parse_into(part, b, lay, keep, limit):
    """Parse the lines of block ``b`` into ``part`` (``keep`` False: count them and find
    errors only). Returns False once an error is found."""
    delim, (bm, bn) = ord(lay.delim or "\0"), lay.bounds or (0, 0)  # (0: blanks)
    fb = np.zeros(3, np.int64)
    out = part if keep else Part()
    n0 = out.n
    if keep:
        part.segments.append((part.n, part.seen))
    pos, stop = 0, b.shape[0]
    while pos < stop:
        done = pos + (part.done if keep else 0)  # bytes a rating so far (a line: >= 6)
        est = max(done // out.n, 1) if out.n else 6
        more = 0 if part.left is None or not out.n else (part.left - pos) * 21 // (20 * est)
        out.room((stop - pos) // est + 16, more)
        cap = out.u.shape[0]
        if limit is not None:  # stop at the first rating beyond the limit
            cap = min(cap, n0 + max(limit - part.seen, 0) + 1)
        lim = I32 if out.u.dtype == np.int32 else INT64 - 1
        pos, out.n, fell, lines = _parse_block(b, pos, stop, delim, bm, bn, out.u[:cap],
                                               out.i[:cap], out.r[:cap], out.l[:cap],
                                               out.n, part.lines, fb, lim)
        part.lines += lines
        if fell == 2:
            out.widen()
        elif fell:
            s, e, line = (int(x) for x in fb)
            try:
                row = parse_line(b[s:e].tobytes().decode("latin-1"), lay.delim, lay.bounds)
            except LineError as exc:
                part.err = (line, str(exc))
                return False
            if row is not None:
                out.add(row, line)
        if limit is not None and part.seen + out.n - n0 > limit:
            part.too_many = True
            return False
    part.seen += out.n - n0
    part.done += b.shape[0] if keep else 0
    return True


def read_part(lay, part, n_parts, limit="auto", lines=False, visit=None):
    """Worker ``part``'s ratings of the file ``lay`` describes (a :class:`Layout`): a
    plain file's byte range; of a gzip file, every n_parts-th block (counting the others'
    ratings and lines). ``lines``: each rating's line index too; ``visit(p)`` after each
    block (False: stop)."""
    limit = max_ratings() if limit == "auto" else limit
    if lay.begin is None:
        return Part().finish()
    src, left, cap = Text(lay.path, "rating file"), None, 0
    if not lay.gz:
        lo, hi = line_range(src.map(), part, n_parts, lay.begin, universal=True)
        # room for the lines the head's line length predicts, and a quarter more
        left, ends = hi - lo, src.head.count(b"\n") + 1
        cap = left * ends * 5 // (4 * len(src.head)) + 1024
    p = Part(cap, lines)
    p.left = left
    try:
        for blk in src.blocks(lay.begin, part, n_parts, True, LONG_LINE + 2, _CHUNK):
            if not _parse_into(p, blk.data, lay, blk.keep, limit):
                break
            if p.left is not None:
                p.left -= blk.data.shape[0]
            if visit is not None and visit(p) is False:
                break
    except DataError as e:  # a corrupt stream, after the lines before it
        if p.err is None:
            p.err = (e.line - lay.line0, str(e)[len(f"{lay.path}:{e.line}: "):])
    return p.finish()


class Ratings:
    """A worker's ratings of a file, as every worker agreed on them: raw ids ``u``,
    ``i``, ratings ``r``; their positions among the file's ratings (:meth:`positions`);
    ``lines``, their lines, only when asked for (else :meth:`line_of` reads the part
    again); ``n`` ratings here, ``total`` in all; ``path``."""

    pos = lines = lay = None  # pos: the positions as an array (else from ``segments``)

    def positions(self):
        if self.pos is not None:
            return self.pos
        n = self.n
        out = np.empty(n, np.int64)
        bounds = self.segments + [(n, None)]
        for (a, p), (b, _) in zip(bounds[:-1], bounds[1:]):
            out[a:b] = np.arange(p, p + b - a)
        return out

    def position(self, k):  # (for a message)
        return int(self.positions()[k])

    def line_of(self, peers, positions):
        """The lines of these positions (whoever read them), on every worker."""
        pos = self.positions()  # (rising: a part's blocks are in file order)
        at = np.minimum(np.searchsorted(pos, positions), max(pos.shape[0] - 1, 0))
        found = {int(q): int(k) for q, k in zip(positions, at.tolist())
                 if pos.shape[0] and pos[k] == q}
        if found and self.lines is not None:
            found = {q: int(self.lines[k]) for q, k in found.items()}
        elif found:  # read the part again, keeping the lines of one block at a time
            want, got, base = sorted(set(found.values())), {}, [0]

            def visit(p):
                for k in want:
                    if base[0] <= k < base[0] + p.n:
                        got[k] = int(p.l[k - base[0]]) + self.line_base
                base[0] += p.n
                p.n, p.segments = 0, []
                return base[0] <= want[-1]
            read_part(self.lay, self.part, self.n_parts, None, True, visit)
            found = {q: got[k] for q, k in found.items()}
        return {q: line for g in peers.allgather(found) for q, line in g.items()}


def gather(peers, lay, lines=False):
    """This worker's :class:`Ratings` of the file ``lay`` describes (``lines``: with each
    rating's line); the first bad line of the file (wherever it lies) raised by the
    worker that read it."""
    me = peers.rank
    p = read_part(lay, me, peers.size, lines=lines)
    facts = peers.allgather((p.n, p.lines, p.too_many))
    lbase = pbase = [0] * peers.size
    if not lay.gz:  # positions and lines follow the earlier parts'
        lbase = np.concatenate([[0], np.cumsum([f[1] for f in facts])]).tolist()
        pbase = np.concatenate([[0], np.cumsum([f[0] for f in facts])]).tolist()
    line = None if p.err is None else lay.line0 + lbase[me] + p.err[0]
    agree(peers, None if line is None else f"{lay.path}:{line}: {p.err[1]}", key=line)
    out = Ratings()
    out.total, out.path = sum(f[0] for f in facts), lay.path
    limit = max_ratings()
    if any(f[2] for f in facts) or (limit is not None and out.total > limit):
        refuse(peers, too_many(lay.path, limit))
    if lay.mtx and out.total != lay.nnz:
        refuse(peers, f"{lay.path}: the size line (line {lay.size_line}) announces "
               f"{lay.nnz} entries, the file has {out.total}")
    out.u, out.i, out.r, out.n = p.u, p.i, p.r, p.n
    out.lay, out.part, out.n_parts = lay, peers.rank, peers.size
    out.line_base = lay.line0 + lbase[me]
    out.segments = [(a, q + pbase[me]) for a, q in p.segments]
    if lines:
        out.lines = p.l + out.line_base
    return out


def read(lay):
    """Every rating of the file ``lay`` (a :class:`Layout`) describes, in one process,
    with their lines."""
    return gather(Peers(), lay, lines=True)
