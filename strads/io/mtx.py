"""MatrixMarket as a sample-by-feature matrix: coordinate or array; real, integer or
pattern; general, symmetric or skew-symmetric. Duplicate entries are refused, not summed.
Notes: docs/architecture.md."""
import numpy as np
from numba import njit

from ..errors import DataError
from ..transport import Peers
from .agree import agree, attempt, group_starts, grouped, owners, refuse, route
from .numbers import BIG, NB, py_float, scan_float_inline, scan_int, scan_int_inline
from .source import Text, line_at, line_number, line_range
from .svmlight import (WORDS, by_name, check_size, csc, open_text, refuse_control, short,
                       union)

_SYM = {"general": 0, "symmetric": 1, "skew-symmetric": 2}


@njit(**NB)
def _is_space(c):
    return c == 32 or 9 <= c <= 13


@njit(inline="always", **NB)
def _line(b, pos, n):
    """The line at pos: (its first byte past blanks, its end, whether it holds a control
    byte); the first byte is the end for a blank or ``%`` comment line."""
    i, bad = pos, False
    while i < n and b[i] != 10:
        bad = bad or (b[i] < 32 and (b[i] < 9 or b[i] > 13))
        i += 1
    j = pos
    while j < i and _is_space(b[j]):
        j += 1
    return (i if j < i and b[j] == 37 else j), i, bad


@njit(_nrt=False, **NB)  # (it allocates nothing: the scanners are inlined)
def _scan(b, n_rows, n_cols, n_tok, ints, sym, declared, rows, cols, vals, fb):
    """One pass over the data lines of ``b`` (coordinate: ``n_tok`` = 3, or 2 for
    pattern; array: 1; ``ints``: an integer field): the entries of the lines it accepts
    as 0-based (row, column, value), mirrored for (skew-)symmetric (room: two a line);
    array values, in order, into ``vals``; the tokens left to Python (float(); int() for
    a saturated integer) into ``fb`` (slot, first byte, end, negate), as many as fit.
    Returns (error code, line, its first byte, bad token's field, entries, stored, how
    many tokens are left to Python). Codes: 1 control byte, 2 wrong number of tokens, 3
    not an integer, 4 index out of range, 5 not a number, 6 not finite, 7 more than
    ``declared`` entries, 8 a diagonal entry of a skew-symmetric matrix."""
    n = b.shape[0]
    n_fb = line = pos = entries = k = 0
    while pos < n:
        line += 1
        ls = pos
        i, le, bad = _line(b, pos, n)
        pos = le + 1
        if bad:
            return 1, line, ls, 0, entries, k, n_fb
        if i >= le:  # blank, or a % comment
            continue
        ti = row = col = st = vs = ve = 0
        v = 1.0
        while i < le:
            ts = i
            while i < le and not _is_space(b[i]):
                i += 1
            if ti < n_tok:
                if ti < 2 and n_tok > 1:
                    e, ok, x = scan_int_inline(b, ts, i)
                    if not ok or e != i:
                        return 3, line, ls, ti, entries, k, n_fb
                    if x < 1 or x > (n_rows if ti == 0 else n_cols):
                        return 4, line, ls, ti, entries, k, n_fb
                    if ti == 0:
                        row = x - 1
                    else:
                        col = x - 1
                elif ints:  # an integer field's value: 1.5 is not read as 1.5 (or 1)
                    e, ok, x = scan_int_inline(b, ts, i)
                    if not ok or e != i:
                        return 3, line, ls, ti, entries, k, n_fb
                    v = float(x)
                    if x >= BIG or x <= -BIG:  # saturated: Python's int() reads it
                        st, vs, ve = 1, ts, i
                else:
                    e, st, v = scan_float_inline(b, ts, i)
                    if st < 0 or e != i:
                        return 5, line, ls, ti, entries, k, n_fb
                    if st == 2:
                        return 6, line, ls, ti, entries, k, n_fb
                    vs, ve = ts, i
            ti += 1
            while i < le and _is_space(b[i]):
                i += 1
        if ti != n_tok:
            return 2, line, ls, ti, entries, k, n_fb
        if sym == 2 and row == col and n_tok > 1:
            return 8, line, ls, 0, entries, k, n_fb
        entries += 1
        if entries > declared:
            return 7, line, ls, 0, entries, k, n_fb
        mirrored = sym != 0 and row != col and n_tok > 1
        rows[k] = row
        cols[k] = col
        vals[k] = v
        k += 1
        if mirrored:
            rows[k] = col
            cols[k] = row
            vals[k] = -v if sym == 2 else v
            k += 1
        if st == 1:
            for q in range(k - (2 if mirrored else 1), k):
                if n_fb < fb.shape[0]:
                    fb[n_fb, 0] = q
                    fb[n_fb, 1] = vs
                    fb[n_fb, 2] = ve
                    fb[n_fb, 3] = 1 if mirrored and sym == 2 and q == k - 1 else 0
                n_fb += 1
    return 0, line, 0, 0, entries, k, n_fb


@njit(**NB)
def _csc_sort(indptr, indices, data):
    """Sort each column's rows; returns (column, row) of the first duplicate, or (-1, -1)."""
    for c in range(indptr.shape[0] - 1):
        a, z = indptr[c], indptr[c + 1]
        ordered = True
        for q in range(a + 1, z):
            if indices[q] <= indices[q - 1]:
                ordered = False
                break
        if not ordered:
            order = np.argsort(indices[a:z], kind="mergesort")
            indices[a:z] = indices[a:z][order]
            data[a:z] = data[a:z][order]
            for q in range(a + 1, z):
                if indices[q] == indices[q - 1]:
                    return c, indices[q]
    return -1, -1


@njit(**NB)
def _lines_of(b, start, line0, row, col, sym):
    """The first two data lines holding entry (row, col) (1-based), or its mirror."""
    n = b.shape[0]
    line = line0
    pos = start
    first = 0
    while pos < n:
        line += 1
        i, le, _ = _line(b, pos, n)
        pos = le + 1
        if i >= le:
            continue
        i, _, r = scan_int(b, i, le)
        while i < le and _is_space(b[i]):
            i += 1
        i, _, c = scan_int(b, i, le)
        if (r == row and c == col) or (sym and r == col and c == row):
            if first:
                return first, line
            first = line
    return first, 0


@njit(**NB)
def _dense_from_triangle(vals, m, skew):
    """The symmetric (skew: antisymmetric) m x m matrix, F-order, from its lower
    triangle in column-major order (skew: without the diagonal)."""
    X = np.zeros((m, m)).T
    k = 0
    for j in range(m):
        for i in range(j + 1 if skew else j, m):
            X[i, j] = vals[k]
            X[j, i] = -vals[k] if skew else vals[k]
            k += 1
    return X


def header(path, buf, start):
    """(format, field, symmetry, [rows, cols, entries], size line, first data byte)."""
    pos, lineno, n = start, 0, buf.shape[0]

    def next_line(cap=None):
        nonlocal pos, lineno
        if pos >= n:
            return None
        raw = line_at(buf, pos, cap)
        pos += len(raw) + 1
        lineno += 1
        return raw

    banner = next_line(4096) or b""  # (a binary file may have no newline for long)
    words = banner.lower().split()
    if len(words) != 5 or words[0] != b"%%matrixmarket" or words[1] != b"matrix":
        raise DataError(f"{path}:1: not a MatrixMarket file: the first line must be "
                        "'%%MatrixMarket matrix FORMAT FIELD SYMMETRY', got "
                        f"{short(banner)!r}{by_name('MatrixMarket')}")
    fmt, field, sym = (w.decode(errors="replace") for w in words[2:])
    if fmt not in ("coordinate", "array"):
        raise DataError(f"{path}:1: unknown MatrixMarket format {fmt!r} "
                        "(coordinate or array)")
    if field == "complex":
        raise DataError(f"{path}:1: complex MatrixMarket matrices are not supported")
    if sym == "hermitian":  # real (or integer) values: the conjugate is the value itself
        sym = "symmetric"
    if field not in ("real", "double", "integer", "pattern") or (
            field == "pattern" and fmt == "array"):
        raise DataError(f"{path}:1: unknown MatrixMarket field {field!r} for {fmt} "
                        "(real, integer, or pattern for coordinate)")
    if sym not in _SYM:
        raise DataError(f"{path}:1: unknown MatrixMarket symmetry {sym!r} "
                        "(general, symmetric or skew-symmetric)")
    while True:
        raw = next_line()
        if raw is None:
            raise DataError(f"{path}: no size line after the MatrixMarket header")
        refuse_control(path, lineno, raw)
        s = raw.strip()
        if s and not s.startswith(b"%"):
            break
    want = 3 if fmt == "coordinate" else 2
    try:
        size = [py_float(t, int) for t in s.split()]
        if len(size) != want or min(size) < 0:
            raise ValueError
    except ValueError:
        raise DataError(f"{path}:{lineno}: the size line must be "
                        f"{'ROWS COLUMNS ENTRIES' if want == 3 else 'ROWS COLUMNS'} "
                        f"(non-negative integers), got {short(s)!r}") from None
    m, p = size[:2]
    if sym != "general" and m != p:
        raise DataError(f"{path}:{lineno}: a {sym} matrix must be square, got {m} x {p}")
    most = (m * p if sym == "general" else m * (m + 1) // 2 if sym == "symmetric"
            else m * (m - 1) // 2)
    if fmt == "coordinate" and size[2] > most:
        raise DataError(f"{path}:{lineno}: {size[2]:,} entries declared, more than a "
                        f"{sym} {m:,} x {p:,} matrix holds")
    if fmt == "array":
        size.append(most)
    return fmt, field, sym, size, lineno, pos


def is_dense(path):
    """Whether the file is an ``array`` (dense) MatrixMarket file: its first line tells."""
    src = Text(path, words=WORDS, binary=True)
    words = src.head.split(b"\n", 1)[0].lower().split()
    return len(words) == 5 and words[0] == b"%%matrixmarket" and words[2] == b"array"


def _error(path, code, line, raw, field_no, n_tok, m, p, declared, hline):
    where = f"{path}:{line}"
    toks = raw.split()
    tok = short(toks[field_no]) if field_no < len(toks) else ""
    what = ("row index", "column index", "value", "")[min(field_no, 3)] if n_tok > 1 \
        else "value"
    if code == 1:
        refuse_control(path, line, raw)
    if code == 2:
        want = {3: "'row column value'", 2: "'row column' (pattern)", 1: "one value"}[n_tok]
        return (f"{where}: expected {want}, got {len(toks)} fields: "
                f"{short(raw.strip())!r}")
    if code == 3:
        return f"{where}: {what} {tok!r} is not an integer"
    if code == 4:
        return f"{where}: {what} {tok} is out of range 1..{m if field_no == 0 else p}"
    if code == 5:
        return f"{where}: {what} {tok!r} is not a number"
    if code == 6:
        at = f"entry (row {toks[0].decode()}, column {toks[1].decode()})" if n_tok > 1 \
            else "value"
        return f"{where}: {at} is {py_float(toks[field_no])}, not finite"
    if code == 7:
        return (f"{where}: more entries than the {declared:,} the header declares "
                f"(line {hline})")
    if code == 8:
        return (f"{where}: diagonal entry ({toks[0].decode()}, {toks[1].decode()}) "
                "in a skew-symmetric matrix")
    return f"{where}: cannot parse this line"


def _open(path, whole):
    src, buf = open_text(path, "MatrixMarket")
    fmt, field, sym, (m, p, declared), hline, pos = header(path, buf, src.bom)
    where, extra, symc = f"{path}:{hline}", buf.shape[0] if src.gz else 0, _SYM[sym]
    if fmt == "coordinate":
        check_size(where, m, p, declared * (2 if symc else 1), extra, "the header declares ")
        if m == 0 or p == 0:
            raise DataError(f"{path}: empty data: X has shape ({m}, {p})")
    elif whole:
        check_size(where, m, p, None, extra, "the header declares ")
    else:  # (rank 0 reads array files whole: the file changed)
        raise DataError(f"{path}: a dense (array) MatrixMarket file is read whole")
    n_tok = 1 if fmt == "array" else 2 if field == "pattern" else 3
    return buf, n_tok, field == "integer", symc, m, p, declared, hline, pos


def read_part(peers, path, whole=False):
    """This worker's rows of a coordinate file, as :func:`strads.io.svmlight.read_part`
    gives them, with ``cuts`` (every worker's first row, and the rows last); ``whole``
    (one worker): every column, and a dense file as ``X``."""
    w, W = peers.rank, peers.size
    buf, n_tok, ints, symc, m, p, declared, hline, pos = attempt(peers, _open, path, whole)
    lo, hi = line_range(buf, w, W, pos)
    b = buf[lo:hi]
    cap = (int(np.count_nonzero(b == 10)) + 1) * (2 if symc else 1)  # two entries a line
    itype = np.int64 if max(m, p, cap) >= 2**31 - 1 else np.int32
    rows, cols, vals = np.empty(cap, itype), np.empty(cap, itype), np.empty(cap)
    fb = np.empty((cap // 64 + 1024, 4), np.int64)
    while True:
        code, line, ls, field_no, entries, k, n_fb = _scan(b, m, p, n_tok, ints, symc, 1 << 62,
                                                           rows, cols, vals, fb)
        if n_fb <= fb.shape[0]:
            break
        fb = np.empty((n_fb, 4), np.int64)  # more tokens for float() than room: again
    got = peers.allgather((code, entries))
    before, first = 0, None
    for v, (c, e) in enumerate(got):  # the first problem in file order
        if before + e > declared:  # more entries than declared, in v's part
            if v == w:
                code, line, ls, field_no, *_ = _scan(b, m, p, n_tok, ints, symc,
                                                     declared - before, rows, cols, vals, fb)
            first = v
            break
        if c:
            first = v
            break
        before += e
    agree(peers, _error(path, code, line_number(buf, lo) + line - 1, line_at(b, ls),
                        field_no, n_tok, m, p, declared, hline) if first == w else None)
    total = sum(e for _, e in got)
    if total < declared:
        refuse(peers, f"{path}: the header (line {hline}) declares {declared:,} "
               f"{'values' if n_tok == 1 else 'entries'}, the file has {total:,}")
    for at, s_, e_, neg in fb[:n_fb].tolist():
        x = float(py_float(b[s_:e_].tobytes(), int if ints else float))
        vals[at] = -x if neg else x
    if n_tok == 1:  # dense (one worker): values in column-major order
        X = _dense_from_triangle(vals, m, symc == 2) if symc else vals[:k].reshape(p, m).T
        return {"X": X, "n": m, "n_features": p}
    if W > m:
        refuse(peers, f"{W} workers for {m} samples: each worker needs rows")
    rows, cols, vals = rows[:k], cols[:k], vals[:k]
    cuts = np.array([0, m])
    if W > 1:  # rows in contiguous blocks, balanced by their entries
        from ..api import split_balanced

        cuts = split_balanced(peers.allreduce(np.bincount(rows, minlength=m)), W)
        rows, cols, vals = route(peers, owners(cuts, rows), [rows, cols, vals])
        rows -= itype(cuts[w])
    indptr = group_starts(cols, p)  # CSC, each column's rows in arrival order
    indices, data = grouped(cols, indptr, rows), grouped(cols, indptr, vals)
    del rows, cols, vals
    c, r = _csc_sort(indptr, indices, data)  # rows sorted in each column
    err = None
    if c >= 0:
        r = int(r) + int(cuts[w])
        first, second = _lines_of(buf, pos, hline, r + 1, c + 1, symc)
        mirror = " (mirrored: the matrix is symmetric)" if symc else ""
        err = (f"{path}:{second}: entry (row {r + 1}, column {c + 1}) is given twice{mirror}"
               f", also on line {first}; duplicates are not summed")
    agree(peers, err, key=(c, r) if err else None)
    counts = np.diff(indptr)
    kept = None if whole else union(peers, counts)
    if kept is not None:
        counts = counts[kept]
    itype = np.int64 if max(m, p, indices.shape[0]) >= 2**31 - 1 else np.int32
    indptr = np.zeros(counts.shape[0] + 1, itype)
    np.cumsum(counts, out=indptr[1:])
    return {"csc": (indptr, indices, data), "n_rows": int(cuts[w + 1] - cuts[w]), "y": None,
            "first": int(cuts[w]), "n": m, "n_features": p, "kept": kept, "cuts": cuts}


def read(path):
    """The whole file: a CSC matrix (sorted indices), or a dense F-order array."""
    part = read_part(Peers(), path, whole=True)
    return part["X"] if "X" in part else csc(part)
