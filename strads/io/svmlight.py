"""LIBSVM / svmlight text: ``label index:value ...`` per line, ``#`` comments, ``qid:``
tokens skipped; indices 1-based unless a 0 index appears (then all are 0-based), rising
along a line. Read whole (:func:`read`) or a worker's part (:func:`read_part`).
Notes: docs/architecture.md."""
import re

import numpy as np
import scipy.sparse as sp
from numba import njit

from ..errors import DataError
from ..transport import Peers
from . import memory
from .agree import agree, attempt, refuse
from .numbers import BIG, NB, py_float, scan_float_inline, scan_int_inline
from .source import WORDS as SOURCE_WORDS, Text, forget, line_at, line_number, line_range

# The matrix readers' words for a NUL byte and a broken gzip file
WORDS = {"nul": "{where}: binary data (byte 0x00), not a text file",
         "corrupt": "{path}: not a valid gzip file: {e}"}

# -- sizes: refuse what cannot fit, before allocating it ----------------------------------
# What a problem costs once loaded and solved, per unit, in bytes (docs/: the solver's
# peak RSS per feature):
PER_FEATURE = 64  # indptr, then the solver's coefficients, squared norms, norms,
#                   priorities, screening flags and a full round's gradient (float64 each)
PER_NONZERO = 24  # a CSC entry (8-byte value, 4- or 8-byte row index) and a worker's copy
PER_SAMPLE = 32  # y, the workers' residuals and targets
PER_DENSE = 16  # a dense entry and a worker's copy of it
FILL_BLOCK = 4 << 20  # bytes a pass reads between two releases of a mapped text's pages


def max_features():
    mem = memory.physical_memory()
    return BIG if mem is None else max(mem // PER_FEATURE, 1)


def check_size(name, n_samples, n_features, nnz=None, extra=0, lead=""):
    """Refuse a problem whose solve cannot fit in physical memory: sparse (``nnz``
    non-zeros) or dense (``nnz`` None); ``extra`` bytes already held (a decompressed
    file). Python integers throughout, so absurd sizes cannot overflow."""
    n_samples, n_features = int(n_samples), int(n_features)
    if nnz is None:
        need = n_samples * n_features * PER_DENSE + n_features * PER_FEATURE
        what = f"a dense {n_samples:,} x {n_features:,} matrix"
    else:
        need = (int(nnz) * PER_NONZERO + n_features * PER_FEATURE
                + n_samples * PER_SAMPLE)
        what = f"{n_samples:,} samples x {n_features:,} features with {int(nnz):,} non-zeros"
    need += extra
    mem = memory.physical_memory()
    if mem is not None and need > mem:
        raise DataError(f"{name}: {lead}{what}, which would need about "
                        f"{memory.fmt_bytes(need)} of memory (the matrix, the workers' "
                        "copies and the solver's per-feature arrays), more than "
                        f"{memory.physical_words(mem)}")


#: how the matrix and target readers are chosen: by the file's name, not its content
MATRIX_NAMES = "*.mtx, *.mm: MatrixMarket; *.npz: NumPy; else LIBSVM"
TARGET_NAMES = "*.npy: NumPy; else one number a line"
NAMED = {"LIBSVM": ("LIBSVM", MATRIX_NAMES), "MatrixMarket": ("MatrixMarket", MATRIX_NAMES),
         ".npz": (".npz", MATRIX_NAMES), "target": ("a text target", TARGET_NAMES),
         ".npy": (".npy", TARGET_NAMES)}


def by_name(kind):
    """The end of an error that a misnamed file may cause: the format its name chose."""
    return " (read as %s by its name: %s; each also .gz)" % NAMED[kind]


def open_text(path, kind):
    """``(Text, bytes)`` of a matrix reader's text input (``kind``: LIBSVM, target,
    MatrixMarket)."""
    src = Text(path, kind=f"{kind} text", words=dict(
        WORDS, foreign=SOURCE_WORDS["foreign"] + by_name(kind))).newlines()
    if kind != "MatrixMarket" and src.head[:14].lower() == b"%%matrixmarket":
        raise DataError(f"{path}:1: a MatrixMarket banner, not {kind} text{by_name(kind)}")
    buf = src.map()
    if src.gz and buf.shape[0] == 0:
        raise DataError(f"{path}: empty file (after gzip decompression)")
    return src, buf


# -- the two numba passes -----------------------------------------------------------------
def state():
    """Pass 1's state at the start: position, its line's first byte, line, rows,
    non-zeros, max index, min index, the line's last index and tokens."""
    return np.array([0, 0, 1, 0, 0, -1, BIG, -1, 0], np.int64)


@njit(_nrt=False, **NB)  # (it allocates nothing: the scanners are inlined)
def _svm_count(b, single, limit, counts, s):
    """Pass 1: validate every line (as :func:`parse_line`, or :func:`parse_target_line`
    if ``single``) and count each index's entries in ``counts``, from :func:`state` ``s``
    on, left where it stopped. Returns 0 at the end, the line of the first bad line, -1
    if a count overflowed the dtype of ``counts``, or -2 - j if index j needs more."""
    n = b.shape[0]
    top = np.iinfo(counts.dtype).max
    i, ls, line, rows, nnz = s[0], s[1], s[2], s[3], s[4]
    max_j, min_j, last, tok = s[5], s[6], s[7], s[8]
    code = 0
    while i < n:
        c = b[i]
        if c == 10:
            if tok:
                rows += 1
            tok = 0
            last = -1
            line += 1
            i += 1
            ls = i
            continue
        if c == 32 or 9 <= c <= 13:
            i += 1
            continue
        if c == 35:  # a comment, to the end of the line (control bytes still refused)
            while i < n and b[i] != 10:
                if b[i] < 32 and (b[i] < 9 or b[i] > 13):
                    code = line
                    break
                i += 1
            if code:
                break
            continue
        ts = i
        j = -1
        if tok > 0:
            if single:
                code = line
                break
            if (c == 113 and i + 2 < n and b[i + 1] == 105 and b[i + 2] == 100
                    and (i + 3 == n or b[i + 3] == 58 or b[i + 3] == 32 or b[i + 3] == 35
                         or 9 <= b[i + 3] <= 13)):
                i, ctrl = _token_end(b, i + 3, n)  # qid, qid:anything
                if ctrl:
                    code = line
                    break
                continue
            e, ok, j = scan_int_inline(b, i, n)
            if not ok or e >= n or b[e] != 58 or j < 0 or j <= last or j > limit:
                code = line
                break
            i = e + 1
        e, st, _ = scan_float_inline(b, i, n, False)
        if st < 0 or st > 1 or (e < n and not (b[e] == 32 or 9 <= b[e] <= 13 or b[e] == 35)):
            code = line  # not a finite number, ending at a delimiter
            break
        i = e
        if j >= 0:
            if j + 1 >= counts.shape[0]:  # one spare entry: indptr's last, in place
                i, code = ts, -2 - j
                break
            if counts[j] == top:
                code = -1
                break
            counts[j] += 1
            nnz += 1
            last = j
            max_j = max(max_j, j)
            min_j = min(min_j, j)
        tok += 1
    if code == 0 and tok:
        rows += 1
        tok = 0
    s[0], s[1], s[2], s[3], s[4] = i, ls, line, rows, nnz
    s[5], s[6], s[7], s[8] = max_j, min_j, last, tok
    return code


@njit(inline="always", **NB)
def _token_end(b, i, n):
    """(the end of the token at i, whether it holds a control byte)."""
    ctrl = False
    while i < n and not (b[i] == 32 or 9 <= b[i] <= 13 or b[i] == 35):
        ctrl = ctrl or b[i] < 32
        i += 1
    return i, ctrl


@njit(_nrt=False, **NB)
def _svm_fill(b, start, stop, row, base, cell_run, runs, front, fronts, indices, data, local,
              labels, fb, n_fb):
    """Pass 2 over the whole lines of bytes [start, stop) pass 1 accepted, ``row`` the
    first's: labels, and the entries, each appended to its run of columns (``front[k]``:
    run k's next free slot, advanced; its column within the run in ``local``) or put in
    its column's next free slot in ``fronts`` (:func:`_runs`). The tokens left to
    Python's float() go to the rows of ``fb`` from row ``n_fb`` on (slot, or -1 - row
    for a label; first byte; end), as many as fit; returns the next row and how many
    such tokens there are."""
    n = b.shape[0]
    i = start
    tok = 0
    while i < stop:
        c = b[i]
        if c == 10:
            row += 1 if tok else 0
            tok = 0
            i += 1
        elif c == 35:
            while i < n and b[i] != 10:
                i += 1
        elif c == 32 or 9 <= c <= 13:
            i += 1
        elif tok > 0 and c == 113:  # qid
            i, _ = _token_end(b, i, n)
        else:
            at = -1 - row
            if tok > 0:
                e, _, j = scan_int_inline(b, i, n)
                i = e + 1
                j -= base
                k = cell_run[j >> CELL_BITS]
                if k >= 0:
                    at = front[k]
                    front[k] = at + 1
                    local[at] = j - runs[k, 0]
                else:
                    at = fronts[-1 - k, j & CELL_MASK]
                    fronts[-1 - k, j & CELL_MASK] = at + 1
                indices[at] = row
            tok += 1
            e, st, v = scan_float_inline(b, i, n)
            if at < 0:
                labels[row] = v
            else:
                data[at] = v
            if st:
                if n_fb < fb.shape[0]:
                    fb[n_fb, 0] = at
                    fb[n_fb, 1] = i
                    fb[n_fb, 2] = e
                n_fb += 1
            i = e
    return row, n_fb


# Pass 2 appends each entry to its run of columns (a few hundred streams the cache holds,
# not a cache miss an entry), each run then put in column order. Runs are made of cells
# of 2^CELL_BITS columns; a cell of more than RUN entries is filled in place.
CELL_BITS = 6
CELL_MASK = (1 << CELL_BITS) - 1
RUN = 1 << 15  # entries a run holds at most
RUN_CELLS = 1 << (16 - CELL_BITS)  # a run's columns: at most 2^16 (``local`` is uint16)


@njit(**NB)
def _runs(starts, size):
    """The columns' cells (``starts``: each column's first slot, then the total) as runs
    of consecutive cells of at most ``size`` entries, or alone and filled in place:
    (each cell's run k, or -1 - d for the d-th filled in place; each run's first and end
    column; the first column of each cell filled in place)."""
    p = starts.shape[0] - 1
    n_cells = (p + CELL_MASK) >> CELL_BITS
    cell_run = np.empty(n_cells, np.int32)
    k = d = -1
    held, cells = 0, RUN_CELLS  # (the first cell opens a run)
    for q in range(n_cells):
        m = starts[min((q + 1) << CELL_BITS, p)] - starts[q << CELL_BITS]
        if m > size:
            d += 1
            cell_run[q] = -1 - d
            cells = RUN_CELLS  # (a run ends here)
            continue
        if cells == RUN_CELLS or held + m > size:
            k += 1
            held = cells = 0
        held += m
        cells += 1
        cell_run[q] = k
    runs, alone = np.empty((k + 1, 2), np.int64), np.empty(d + 1, np.int64)
    for q in range(n_cells - 1, -1, -1):
        r = cell_run[q]
        if r >= 0:
            runs[r, 0] = q << CELL_BITS
            if q + 1 == n_cells or cell_run[q + 1] != r:
                runs[r, 1] = min((q + 1) << CELL_BITS, p)
        else:
            alone[-1 - r] = q << CELL_BITS
    return cell_run, runs, alone


@njit(**NB)
def _sort_runs(starts, runs, indices, data, local):
    """Each run's entries (in row order) to their columns, the rows kept in order."""
    big = 0
    for k in range(runs.shape[0]):
        big = max(big, starts[runs[k, 1]] - starts[runs[k, 0]])
    rows, vals = np.empty(big, indices.dtype), np.empty(big)
    front = np.empty(RUN_CELLS << CELL_BITS, np.int64)
    for k in range(runs.shape[0]):
        c0, c1 = runs[k, 0], runs[k, 1]
        lo, hi = starts[c0], starts[c1]
        if c1 - c0 < 2 or hi - lo < 2:
            continue
        rows[:hi - lo] = indices[lo:hi]
        vals[:hi - lo] = data[lo:hi]
        front[:c1 - c0] = starts[c0:c1]
        for t in range(hi - lo):
            c = local[lo + t]
            at = front[c]
            front[c] = at + 1
            indices[at] = rows[t]
            data[at] = vals[t]


_COUNTS = np.int32  # the dtype pass 1 counts in first


def _count(b, single, limit):
    """Pass 1 over ``b``: (the first bad line or 0, its first byte, rows, non-zeros, max
    index, min index, counts): int32 counts (then indptr, in place), int64 if a column
    holds 2^31 entries; grown as the indices need. In blocks, as pass 2."""
    blocks = max(1, b.shape[0] // FILL_BLOCK)
    for dtype in (_COUNTS, np.int64):
        counts, s = np.zeros(16, dtype), state()
        for k in range(blocks):
            lo, hi = line_range(b, k, blocks)
            code = _svm_count(b[:hi], single, limit, counts, s)
            while code <= -2:
                counts.resize(min(max(2 * counts.shape[0], -code), limit + 2), refcheck=False)
                code = _svm_count(b[:hi], single, limit, counts, s)
            if code:
                break
            forget(b, lo, hi)
        if code != -1:
            return code, int(s[1]), int(s[3]), int(s[4]), int(s[5]), int(s[6]), counts


def _fill(b, base, starts, indices, data, labels, cap):
    """Pass 2 over ``b`` (``starts``: each column's first slot, then the total), in blocks
    of FILL_BLOCK bytes whose pages leave this process's memory once filled."""
    cell_run, runs, alone = _runs(starts, RUN)
    local = np.empty(indices.shape[0], np.uint16)
    cols = np.minimum(alone[:, None] + np.arange(CELL_MASK + 1), starts.shape[0] - 1)
    forget(b, 0, b.shape[0])
    blocks = max(1, b.shape[0] // FILL_BLOCK)
    while True:
        front, fronts = starts[runs[:, 0]].astype(np.int64), starts[cols].astype(np.int64)
        fb = np.empty((cap, 3), dtype=np.int64)
        row = n_fb = 0
        for k in range(blocks):
            lo, hi = line_range(b, k, blocks)
            row, n_fb = _svm_fill(b, lo, hi, row, base, cell_run, runs, front, fronts,
                                  indices, data, local, labels, fb, n_fb)
            forget(b, lo, hi)
        if n_fb <= cap:
            break
        cap = n_fb  # more tokens for float() than room: again, with room
    del cell_run, front, fronts
    for at, s, e in fb[:n_fb].tolist():
        v = float(b[s:e].tobytes())
        if at < 0:
            labels[-1 - at] = v
        else:
            data[at] = v
    _sort_runs(starts, runs, indices, data, local)


# -- the reference parser of a line (the messages) ----------------------------------------
_CTRL = re.compile(rb"[\x00-\x08\x0e-\x1f]")


def short(tok):
    s = tok.decode(errors="replace")
    return s if len(s) <= 60 else s[:57] + "..."


def refuse_control(path, lineno, raw):
    m = _CTRL.search(raw)
    if m:
        raise DataError(f"{path}:{lineno}: binary data (byte 0x{m.group()[0]:02x}), "
                        "not a text file")


def parse_line(path, lineno, raw, limit=None):
    """The reference parser of one LIBSVM line (the numba passes agree with it; it words
    the first bad one): None for a blank line, else ``(label, [(index, value), ...])``."""
    limit = max_features() if limit is None else limit
    refuse_control(path, lineno, raw)
    line = raw.split(b"#", 1)[0].strip()
    if not line:
        return None
    parts = line.split()
    try:
        label = py_float(parts[0])
    except ValueError:
        raise DataError(f"{path}:{lineno}: label {short(parts[0])!r} is not a number"
                        ) from None
    if not np.isfinite(label):
        raise DataError(f"{path}:{lineno}: label is {label}, not finite")
    last, pairs = -1, []
    for tok in parts[1:]:
        idx, sep, val = tok.partition(b":")
        if idx == b"qid":
            continue
        try:
            if not sep:
                raise ValueError
            j, v = py_float(idx, int), py_float(val)
        except ValueError:
            raise DataError(f"{path}:{lineno}: {short(tok)!r} is not index:value") from None
        if j < 0:
            raise DataError(f"{path}:{lineno}: feature index {j} is negative")
        if j <= last:
            raise DataError(f"{path}:{lineno}: feature indices must increase "
                            f"({j} after {last})")
        if j > limit:
            raise DataError(f"{path}:{lineno}: feature index {j} is too large: {j:,} features "
                            f"would need about {memory.fmt_bytes(j * PER_FEATURE)} of memory "
                            f"(the solver keeps {PER_FEATURE} bytes per feature), more than "
                            f"{memory.physical_words(memory.physical_memory() or 0)}")
        if not np.isfinite(v):
            raise DataError(f"{path}:{lineno}: feature {j} has value {v}, not finite")
        last = j
        pairs.append((j, v))
    return label, pairs


def parse_target_line(path, lineno, raw):
    """The reference parser of one line of a text target: None (blank) or the value."""
    refuse_control(path, lineno, raw)
    s = raw.split(b"#", 1)[0].strip()
    if not s:
        return None
    try:
        v = py_float(s)
    except ValueError:
        raise DataError(f"{path}:{lineno}: {short(s)!r} is not a number") from None
    if not np.isfinite(v):
        raise DataError(f"{path}:{lineno}: target is {v}, not finite")
    return v


def bad_line(path, buf, lo, line, ls, single, limit=None):
    """The message of the bad line ``line`` (its first byte ``ls``) of the part of
    ``buf`` from byte ``lo``, named by its line in the file."""
    true = line_number(buf, lo) + line - 1
    raw = line_at(buf[lo:], ls)
    try:
        if single:
            parse_target_line(path, true, raw)
        else:
            parse_line(path, true, raw, limit)
        return f"{path}:{true}: cannot parse this line"
    except DataError as e:
        return str(e)


def union(peers, counts):
    """The columns non-empty on any worker (sorted), or None if every one is; ``counts``:
    this worker's entries of each column. A column travels as a bit."""
    p = counts.shape[0]
    seen = np.bitwise_or.reduce(peers.allgather(np.packbits(counts != 0)))
    kept = np.flatnonzero(np.unpackbits(seen, count=p))
    return None if kept.shape[0] == p else kept.astype(np.int32 if p < 2**31 else np.int64)


# -- whole file, or a worker's part ---------------------------------------------------------
def read_part(peers, path, whole=False):
    """This worker's lines of the file as every worker agreed on them: ``csc`` (indptr,
    indices, data; the kept columns only, unless ``whole``), ``n_rows``, ``y`` (the
    labels), ``first`` (this worker's first row), ``n`` (samples), ``n_features`` and
    ``kept`` (the columns non-empty on some worker; None if every one is, or ``whole``)."""
    w, W = peers.rank, peers.size
    src, buf = attempt(peers, open_text, path, "LIBSVM")
    lo, hi = line_range(buf, w, W, src.bom)
    b = buf[lo:hi]
    limit = max_features()
    line, ls, rows, nnz, max_j, min_j, counts = _count(b, False, limit)
    agree(peers, bad_line(path, buf, lo, line, ls, False, limit) if line else None)
    facts = peers.allgather((rows, nnz, max_j, min_j))
    n = sum(f[0] for f in facts)
    total = sum(f[1] for f in facts)
    if not n or not total:
        refuse(peers, f"{path}: no samples (empty file)" if not n else
               f"{path}: no features (every sample is empty)")
    base = 0 if min(f[3] for f in facts) == 0 else 1
    p = int(max(f[2] for f in facts)) + 1 - base
    attempt(peers, check_size, path, n, p, total, buf.shape[0] if src.gz else 0)
    if W > n:
        refuse(peers, f"{W} workers for {n} samples: each worker needs rows")
    if counts.shape[0] < base + p + 1:
        counts.resize(base + p + 1, refcheck=False)  # (zero-filled)
    if max(rows, p, nnz) >= 2**31 - 1 and counts.dtype != np.int64:
        counts = counts.astype(np.int64)  # the prefix sums exceed int32
    indptr = counts[base:base + p + 1]  # (its last, beyond every index, is 0)
    kept = None if whole else union(peers, indptr[:-1])
    width = None if kept is None else indptr[kept]
    indices, data, labels = np.empty(nnz, counts.dtype), np.empty(nnz), np.empty(rows)
    np.cumsum(indptr[:-1], out=indptr[1:])  # in place: each column's start
    indptr[0] = 0
    _fill(b, base, indptr, indices, data, labels, nnz // 64 + 1024)
    if kept is None:
        if counts.shape[0] > 1.25 * (base + p + 1) + 1024:  # growth left spare capacity
            indptr = indptr.copy()
    else:
        indptr = np.zeros(width.shape[0] + 1, counts.dtype)
        np.cumsum(width, out=indptr[1:])
    first = sum(f[0] for f in facts[:w])
    return {"csc": (indptr, indices, data), "n_rows": rows, "y": labels, "first": first,
            "n": n, "n_features": p, "kept": kept}


def read(path):
    """``(X, y)`` of the whole file: X CSC (sorted indices), y the labels."""
    part = read_part(Peers(), path, whole=True)
    return csc(part), part["y"]


def csc(part):
    """The CSC matrix (sorted indices) of a whole file's :func:`read_part`."""
    indptr, indices, data = part["csc"]
    X = sp.csc_matrix((data, indices, indptr), shape=(part["n"], part["n_features"]),
                      copy=False)
    X.has_sorted_indices = True
    return X
