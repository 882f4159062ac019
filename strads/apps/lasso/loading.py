"""Parallel loading of a ``--data`` file: each worker reads its own part.

LIBSVM text and MatrixMarket coordinate files are split into byte ranges of whole lines
(:func:`strads.parts.line_range`; after the header for MatrixMarket) and worker w
parses the w-th with the numba passes of :mod:`.data`, over its slice of the memory
map. The workers then agree, with their collectives (``peers``), on what only the
whole file settles:

* the first bad line (the earliest in the file, as a whole-file read would name it;
  line numbers are the file's: counted from the start only when there is an error);
* LIBSVM: the rows (worker w's rows follow worker w-1's), the number of features
  (largest index, and the 0/1-based rule: a 0 index anywhere makes every index
  0-based), the non-zeros, the memory check;
* MatrixMarket: the entries against the header's count; then every entry (mirrored for
  symmetric matrices) moves to the worker owning its row, rows being split in
  contiguous blocks balanced by their entries (counted with an allreduce), in a
  ring of shifts (an all-to-all); duplicates are then refused on their owner;
* the non-empty columns (the union of every worker's: the solve keeps those only),
  the columns' squared norms, X'y (lambda_max) and y'y, summed in worker order.

Worker 0 reports the facts of size n_features once; rank 0 completes its aggregate and
schedule from them (``begin``). A target file (``--target``) is split as the data: a
text target by byte ranges, its values then sent to the workers owning their rows; a
.npy target is read whole by every worker (8 bytes a sample) and sliced.

Gzip files cannot be split by bytes: every worker decompresses the whole file into
memory and parses only its part of it (the text is held once per worker; the matrix
still only in parts). ``.npz`` files and dense (array) MatrixMarket files are read on
rank 0 as before, which splits them into shards (see :func:`needs_rank0`).

Errors: the worker that finds the first problem raises it (one line, ``FILE:LINE:
problem``), the others wait in a collective that the job's end releases.
"""
import os

import numpy as np
import scipy.sparse as sp
from numba import njit

from ... import engine
from ... import parts as _parts
from ...engine import DataError
from . import data as D
from . import kernels as K

_nb = dict(cache=True, nogil=True)
_BIG = 1 << 62


# -- which files are read in parts ----------------------------------------------------
def kind_of(path):
    """'mtx', 'npz' or 'svm', by the name (a .gz suffix aside), as :func:`data.load`."""
    low = path.lower()
    if low.endswith(".gz"):
        low = low[:-3]
    if low.endswith((".mtx", ".mm")):
        return "mtx"
    if low.endswith(".npz"):
        return "npz"
    return "svm"


def needs_rank0(path):
    """True for the inputs rank 0 reads whole and splits into shards: .npz (a zip of
    binary arrays: no line to split at, and a CSR/CSC file's rows need its whole index
    array) and dense MatrixMarket (``array`` format: values in column-major order). On
    rank 0 only the file's first line is read to tell."""
    D._check_path(path)
    kind = kind_of(path)
    if kind == "npz":
        return True
    if kind != "mtx":
        return False
    try:
        with open(path, "rb") as f:
            gz = f.read(2) == b"\x1f\x8b"
        if gz:
            import gzip
            with gzip.open(path, "rb") as f:
                head = f.read(4096)
        else:
            with open(path, "rb") as f:
                head = f.read(4096)
    except (OSError, EOFError, ValueError):
        return False  # the workers read it and say what is wrong
    if head.startswith(D._BOM):
        head = head[3:]
    words = head.split(b"\n", 1)[0].lower().split()
    return len(words) == 5 and words[0] == b"%%matrixmarket" and words[2] == b"array"


def shard(path, target):
    """The description every worker gets: it reads its part itself. Size and mtime are
    in it so that a resumed run's check of the shard notices a changed file."""
    def stamp(p):
        try:
            st = os.stat(p)
            return [int(st.st_size), int(st.st_mtime_ns)]
        except OSError:
            return None
    return {"file": os.path.abspath(path), "target": target,
            "stamp": [stamp(path), stamp(target) if target else None]}


# -- agreeing on errors -----------------------------------------------------------------
class _Wait(Exception):
    """Another worker found the first problem and raises it; this one waits."""


def agree(peers, err):
    """Every worker's problem (None, or ``(key, message)``: the key orders them, a byte
    offset in the file or 0 for the whole file's), then the first one is raised by the
    worker that found it (the lowest worker on a tie); the others wait in a collective
    that never completes: under MPI the raising rank ends the job, in one process the
    failing thread releases them."""
    found = [(e[0], w, e[1]) for w, e in enumerate(peers.allgather(err)) if e is not None]
    if not found:
        return
    key, w, msg = min(found)
    if w == peers.rank:
        raise DataError(msg)
    peers.allgather(None)
    raise DataError(msg)  # not reached: the job has ended


def attempt(peers, fn, *a):
    """``fn(*a)`` on every worker, its DataError (the same on all: a whole-file problem)
    agreed on as :func:`agree`'s."""
    try:
        out, err = fn(*a), None
    except DataError as e:
        out, err = None, (0, str(e))
    agree(peers, err)
    return out


def refuse_on_first(peers, msg):
    """A problem every worker sees (a global count): worker 0 raises it."""
    agree(peers, (0, msg) if msg else None)


# -- byte ranges --------------------------------------------------------------------------
def part_range(path, buf, begin, gz, part, n_parts):
    """Worker ``part``'s bytes of ``buf`` from ``begin``: :func:`strads.parts.line_range`
    of the file, or the same rule over the decompressed bytes of a gzip file."""
    if not gz:
        return _parts.line_range(path, part, n_parts, begin, buf.shape[0])
    end = buf.shape[0]
    span = max(end - begin, 0)

    def start_at(c):
        if c == begin:
            return c
        hit = np.flatnonzero(buf[c - 1:end] == 10)  # (each worker holds the text)
        return min(c + int(hit[0]), end) if hit.size else end
    lo, hi = (start_at(begin + span * k // n_parts) for k in (part, part + 1))
    return lo, max(lo, hi)


def line_of(path, buf, gz, offset):
    """The file's line number of byte ``offset`` (error messages only)."""
    if not gz:
        return _parts.line_number(path, offset)
    n, step = 1, 1 << 24
    for a in range(0, offset, step):
        n += int(np.count_nonzero(buf[a:min(a + step, offset)] == 10))
    return n


def _ring(peers, pieces):
    """All-to-all: ``pieces[o]`` goes to worker o; returns what every worker sent this
    one, in worker order (size - 1 shifts round the ring)."""
    w, W = peers.rank, peers.size
    got = [None] * W
    got[w] = pieces[w]
    for k in range(1, W):
        got[(w - k) % W] = peers.shift(pieces[(w + k) % W], k)
    return got


def _read_only(*arrays):
    for a in arrays:
        a.flags.writeable = False
    return arrays


# -- LIBSVM -------------------------------------------------------------------------------
def _svm_count(b):
    limit = D._max_features()
    res = D._svm_count(b, 0, False, limit, np.zeros(16, D._COUNTS))
    if res[0] < 0:
        res = D._svm_count(b, 0, False, limit, np.zeros(16, np.int64))
    return limit, res


def _bad_line(path, buf, gz, lo, b, line, ls, single, limit=None):
    """(key, message) of the bad line ``line`` of the part starting at byte ``lo``."""
    true = line_of(path, buf, gz, lo) + line - 1
    raw = D._line_at(b, ls)
    try:
        if single:
            D.parse_target_line(path, true, raw)
        else:
            D.parse_svm_line(path, true, raw, limit)
        msg = f"{path}:{true}: cannot parse this line"
    except DataError as e:
        msg = str(e)
    return lo + ls, msg


def _svm_part(peers, path):
    w, W = peers.rank, peers.size

    def open_it():
        buf, start, gz = D.read_bytes(path)
        D._refuse_binary(path, buf, start, "LIBSVM")
        return buf, start, gz
    buf, start, gz = attempt(peers, open_it)
    lo, hi = part_range(path, buf, start, gz, w, W)
    b = buf[lo:hi]
    limit, (line, ls, rows, nnz, max_j, _, min_j, counts) = _svm_count(b)
    agree(peers, _bad_line(path, buf, gz, lo, b, line, ls, False, limit) if line else None)
    facts = peers.allgather((rows, nnz, max_j, min_j))
    n = sum(f[0] for f in facts)
    total = sum(f[1] for f in facts)
    refuse_on_first(peers, f"{path}: no samples (empty file)" if not n else
                    f"{path}: no features (every sample is empty)" if not total else None)
    base = 0 if min(f[3] for f in facts) == 0 else 1
    p = int(max(f[2] for f in facts)) + 1 - base
    attempt(peers, D.check_size, path, n, p, total, buf.shape[0] if gz else 0)
    refuse_on_first(peers, f"{W} workers for {n} samples: each worker needs rows"
                    if W > n else None)
    if counts.shape[0] < base + p + 1:
        grown = np.zeros(base + p + 1, counts.dtype)
        grown[:counts.shape[0]] = counts
        counts = grown
    ptr = counts[base:base + p]
    kept = _union(peers, np.flatnonzero(ptr), p)
    wide = max(rows, p, nnz) >= 2**31 - 1
    itype = np.int64 if wide or counts.dtype == np.int64 else np.int32
    width = ptr if kept is None else ptr[kept]
    indptr = np.zeros(width.shape[0] + 1, itype)
    np.cumsum(width, out=indptr[1:])
    del width
    indices = np.empty(nnz, itype)
    data = np.empty(nnz)
    labels = np.empty(rows)
    ptr = ptr.astype(itype) if ptr.dtype != itype else ptr
    D._starts(ptr)
    cap = nnz // 64 + 1024
    while True:
        fb = np.empty((cap, 3), np.int64)
        n_fb = D._svm_fill(b, 0, base, ptr, indices, data, labels, fb)
        if n_fb <= cap:
            break
        D._ends_to_starts(ptr)
        cap = n_fb
    D._fix_fallbacks(b, fb[:n_fb], data, labels)
    del counts, ptr, fb
    first = sum(f[0] for f in facts[:w])  # this worker's first row
    return (indptr, indices, data), rows, labels, n, p, kept, first


def _union(peers, cols, p):
    """The columns non-empty on any worker (sorted), or None if every one is."""
    kept = np.unique(np.concatenate(peers.allgather(cols.astype(np.int64))))
    return None if kept.shape[0] == p else kept


# -- MatrixMarket coordinate ------------------------------------------------------------
@njit(**_nb)
def _mtx_scan(b, n_rows, n_cols, n_tok, sym, rows, cols, vals):
    """One pass over a part's lines: :func:`data._mtx_count`'s checks, and the entries
    of the lines it accepts, as 0-based (row, column, value), mirrored for (skew-)symmetric (room: two a line); the tokens left to float() as (slot, first byte, end, negate).
    Returns (error code, line, first byte, field, entries, stored, fallbacks)."""
    n = b.shape[0]
    fb = np.empty((16, 4), dtype=np.int64)
    n_fb = 0
    line = 0
    pos = 0
    entries = 0
    k = 0
    while pos < n:
        line += 1
        ls = pos
        le, _, bad = D._line_end(b, pos, n)
        pos = le + 1
        if bad:
            return 1, line, ls, 0, entries, k, fb[:n_fb]
        i = ls
        while i < le and D._is_space(b[i]):
            i += 1
        if i >= le or b[i] == 37:
            continue
        ti = 0
        row = 0
        col = 0
        v = 1.0
        ok = True
        vs = 0
        ve = 0
        while i < le:
            ts = i
            while i < le and not D._is_space(b[i]):
                i += 1
            te = i
            if ti < n_tok:
                if ti < 2:
                    good, x = D._scan_int(b, ts, te)
                    if not good:
                        return 3, line, ls, ti, entries, k, fb[:n_fb]
                    if x < 1 or x > (n_rows if ti == 0 else n_cols):
                        return 4, line, ls, ti, entries, k, fb[:n_fb]
                    if ti == 0:
                        row = x - 1
                    else:
                        col = x - 1
                else:
                    c = D._scan_float(b, ts, te)
                    if c < 0:
                        return 5, line, ls, ti, entries, k, fb[:n_fb]
                    if c > 0:
                        return 6, line, ls, ti, entries, k, fb[:n_fb]
                    ok, v = D._to_float(b, ts, te)
                    vs, ve = ts, te
            ti += 1
            while i < le and D._is_space(b[i]):
                i += 1
        if ti != n_tok:
            return 2, line, ls, ti, entries, k, fb[:n_fb]
        if sym == 2 and row == col:
            return 8, line, ls, 0, entries, k, fb[:n_fb]
        entries += 1
        rows[k] = row
        cols[k] = col
        vals[k] = v
        k += 1
        q2 = -1
        if sym and row != col:
            q2 = k
            rows[k] = col
            cols[k] = row
            vals[k] = -v if sym == 2 else v
            k += 1
        if not ok:
            for t in range(2):
                q = (k - 2 if q2 >= 0 else k - 1) if t == 0 else q2
                if q < 0:
                    continue
                if n_fb == fb.shape[0]:
                    grown = np.empty((2 * n_fb, 4), dtype=np.int64)
                    grown[:n_fb] = fb
                    fb = grown
                fb[n_fb, 0] = q
                fb[n_fb, 1] = vs
                fb[n_fb, 2] = ve
                fb[n_fb, 3] = 1 if (t == 1 and sym == 2) else 0
                n_fb += 1
    return 0, line, 0, 0, entries, k, fb[:n_fb]


@njit(**_nb)
def _coo_to_csc(rows, cols, vals, p):
    """CSC arrays (indptr int64) of entries given in any order: each column's entries
    in arrival order (then sorted, as the whole-file reader's, by data._csc_sort)."""
    indptr = np.zeros(p + 1, dtype=np.int64)
    for k in range(cols.shape[0]):
        indptr[cols[k] + 1] += 1
    for c in range(p):
        indptr[c + 1] += indptr[c]
    ptr = indptr[:-1].copy()
    indices = np.empty(rows.shape[0], dtype=rows.dtype)
    data = np.empty(rows.shape[0])
    for k in range(cols.shape[0]):
        q = ptr[cols[k]]
        ptr[cols[k]] = q + 1
        indices[q] = rows[k]
        data[q] = vals[k]
    return indptr, indices, data


def _mtx_part(peers, path):
    w, W = peers.rank, peers.size

    def open_it():
        buf, start, gz = D.read_bytes(path)
        head = D._mtx_header(path, buf, start)
        fmt, field, sym, (m, p, declared), hline, pos = head
        if fmt != "coordinate":  # (rank 0 reads array files; a changed file)
            raise DataError(f"{path}: a dense (array) MatrixMarket file is read whole")
        if m == 0 or p == 0:
            raise DataError(f"{path}: empty data: X has shape ({m}, {p})")
        symc = {"general": 0, "symmetric": 1, "skew-symmetric": 2}[sym]
        D.check_size(f"{path}:{hline}", m, p, declared * (2 if symc else 1),
                     extra=buf.shape[0] if gz else 0, lead="the header declares ")
        return buf, gz, field, symc, m, p, declared, hline, pos
    buf, gz, field, symc, m, p, declared, hline, pos = attempt(peers, open_it)
    n_tok = 2 if field == "pattern" else 3
    lo, hi = part_range(path, buf, pos, gz, w, W)
    b = buf[lo:hi]
    cap = (int(np.count_nonzero(b == 10)) + 1) * (2 if symc else 1)  # two entries a line
    itype = np.int64 if max(m, p) >= 2**31 - 1 else np.int32
    rows, cols, vals = np.empty(cap, itype), np.empty(cap, itype), np.empty(cap)
    code, line, ls, field_no, entries, k, fb = _mtx_scan(b, m, p, n_tok, symc, rows, cols,
                                                         vals)
    got = peers.allgather((code, entries))
    before = 0
    for v, (c, e) in enumerate(got):  # the first problem in file order
        if before + e > declared:  # more entries than declared, in v's part
            if v == w:
                code, line, ls, field_no, _ = D._mtx_count(
                    b, 0, 0, m, p, n_tok, symc, declared - before, np.zeros(p, np.int64))
            break
        if c:
            break
        before += e
    else:
        v = None
    err = None
    if v == w:
        try:
            D._mtx_error(path, code, line_of(path, buf, gz, lo) + line - 1,
                         D._line_at(b, ls), field_no, n_tok, m, p, declared, hline)
        except DataError as e:
            err = (0, str(e))
    agree(peers, err)
    total = sum(e for _, e in got)
    refuse_on_first(peers, f"{path}: the header (line {hline}) declares {declared:,} "
                    f"entries, the file has {total:,}" if total < declared else None)
    refuse_on_first(peers, f"{W} workers for {m} samples: each worker needs rows"
                    if W > m else None)
    for at, s_, e_, neg in fb.tolist():
        x = float(b[s_:e_].tobytes())
        vals[at] = -x if neg else x
    rows, cols, vals = rows[:k], cols[:k], vals[:k]
    # rows in contiguous blocks, balanced by their entries (agreed: the counts summed)
    cuts = engine.split_balanced(peers.allreduce(np.bincount(rows, minlength=m)), W)
    owner = np.searchsorted(cuts, rows, side="right") - 1
    order = np.argsort(owner, kind="stable")
    at = np.searchsorted(owner[order], np.arange(W + 1))
    pieces = [tuple(a[order[at[o]:at[o + 1]]] for a in (rows, cols, vals)) for o in range(W)]
    del rows, cols, vals, owner, order
    got = _ring(peers, pieces)
    del pieces
    rows = np.concatenate([g[0] for g in got]) - itype(cuts[w])
    cols = np.concatenate([g[1] for g in got])
    vals = np.concatenate([g[2] for g in got])
    del got
    indptr, indices, data = _coo_to_csc(rows, cols, vals, p)
    del rows, cols, vals
    c, r = D._csc_sort(indptr, indices, data)  # rows sorted in each column
    err = None
    if c >= 0:
        r = int(r) + int(cuts[w])
        first, second = D._mtx_lines_of(buf, pos, hline, r + 1, c + 1, symc)
        mirror = " (mirrored: the matrix is symmetric)" if symc else ""
        err = ((c, r), f"{path}:{second}: entry (row {r + 1}, column {c + 1}) is given "
                       f"twice{mirror}, also on line {first}; duplicates are not summed")
    agree(peers, err)
    counts = np.diff(indptr)
    kept = _union(peers, np.flatnonzero(counts), p)
    if kept is not None:
        counts = counts[kept]
    indptr = np.zeros(counts.shape[0] + 1, itype)
    np.cumsum(counts, out=indptr[1:])
    n_rows = int(cuts[w + 1] - cuts[w])
    return (indptr, indices, data), n_rows, None, m, p, kept, int(cuts[w]), cuts


# -- targets --------------------------------------------------------------------------------
def _target_part(peers, path, cuts):
    """y[cuts[w]:cuts[w + 1]] from a target file (``cuts``: every worker's first row,
    and the number of samples last)."""
    w, W = peers.rank, peers.size
    n = int(cuts[-1])
    low = path.lower()
    if low.endswith((".npy", ".npy.gz")):  # binary: n floats, read whole by every worker
        def whole():
            y = D._load_npy(path)
            if y.size != n:
                raise DataError(f"{path}: {y.size} targets for {n} samples")
            return y
        y = attempt(peers, whole)
        return np.ascontiguousarray(y[cuts[w]:cuts[w + 1]])

    def open_it():
        buf, start, gz = D.read_bytes(path)
        D._refuse_binary(path, buf, start, "target")
        return buf, start, gz
    buf, start, gz = attempt(peers, open_it)
    lo, hi = part_range(path, buf, start, gz, w, W)
    b = buf[lo:hi]
    line, ls, rows, *_ = D._svm_count(b, 0, True, D._max_features(), np.zeros(16, D._COUNTS))
    agree(peers, _bad_line(path, buf, gz, lo, b, line, ls, True) if line else None)
    y = np.empty(rows)
    fb = np.empty((rows, 3), np.int64)
    n_fb = D._svm_fill(b, 0, 0, np.zeros(1, np.int32), np.zeros(0, np.int32), np.zeros(0),
                       y, fb)
    D._fix_fallbacks(b, fb[:n_fb], y, y)
    counts = peers.allgather(rows)
    total = sum(counts)
    refuse_on_first(peers, f"{path}: {total} targets for {n} samples" if total != n else None)
    mine = sum(counts[:w])  # my values are targets mine .. mine + rows - 1
    pieces = [y[max(cuts[o] - mine, 0):max(min(cuts[o + 1] - mine, rows), 0)]
              for o in range(W)]
    return np.concatenate(_ring(peers, pieces))


# -- a worker's part, and the facts it reports --------------------------------------------
def read_rows(peers, shard):
    """This worker's rows of ``shard["file"]`` (and of its target), as every worker
    agreed on them: ``csc`` (the kept columns only), ``n_rows``, ``y`` (the file's
    values), ``first`` (this worker's first row), ``n`` (samples), ``n_features`` (the
    file's columns) and ``kept`` (the non-empty ones, None if every one is). The Lasso's
    :func:`read_part` and the logistic regression app's build on it."""
    path, target = shard["file"], shard.get("target")
    if kind_of(path) == "mtx":
        csc, n_rows, y, n, p, kept, first, cuts = _mtx_part(peers, path)
    else:
        csc, n_rows, y, n, p, kept, first = _svm_part(peers, path)
        cuts = None
    if target is not None:
        if cuts is None:
            cuts = np.cumsum([0] + peers.allgather(n_rows))
        y = _target_part(peers, target, cuts)
    else:
        refuse_on_first(peers, f"{path}: holds no target vector; pass it with --target "
                        "FILE" if y is None else None)
    return {"csc": csc, "n_rows": n_rows, "y": y, "first": first, "n": n,
            "n_features": p, "kept": kept}


def read_part(peers, shard):
    """This worker's rows of ``shard["file"]`` (and of its target): a shard as
    :func:`strads.apps.lasso.row_block` makes them, with ``y``, and the facts worker 0
    reports (``facts``; the other workers' is their row count)."""
    rows = read_rows(peers, shard)
    n_rows, y, first, n, p, kept = (rows[k] for k in ("n_rows", "y", "first", "n",
                                                      "n_features", "kept"))
    indptr, indices, data = rows["csc"]
    del rows
    sq = peers.allreduce(K.csc_sq_norms(indptr, data))
    X = sp.csc_matrix((data, indices, indptr), shape=(n_rows, indptr.shape[0] - 1),
                      copy=False)
    xty = peers.allreduce(np.asarray(X.T @ y, dtype=np.float64))
    yy = float(peers.allreduce(np.array([float(y @ y)]))[0])
    if peers.rank == 0:
        facts = {"n": int(n), "n_features": int(p), "kept": kept, "sq_norms": sq,
                 "xty": xty, "yy": yy, "n_rows": n_rows}
    else:
        facts = {"n_rows": n_rows}
    _read_only(indptr, indices, data, y)
    return {"csc": (indptr, indices, data), "n_rows": n_rows, "y": y, "first": first,
            "facts": facts, "sq_norms": sq}
