"""The workers agree on the first problem any of them found in their part of a file, and
send each row they read to the worker that keeps it (:func:`route`).
Notes: docs/architecture.md."""
import re

import numpy as np
from numba import njit

from ..errors import DataError
from .numbers import NB


def refuse(peers, message, worker=0):
    """A problem every worker knows of: ``worker`` raises it, the others wait."""
    if peers.rank != worker:
        peers.allgather(None)  # never met: ``worker`` has failed
    raise DataError(str(message))


def alike(peers, fn, *args):
    """``fn(*args)``, which every worker computes alike: its DataError raised by worker 0."""
    try:
        return fn(*args)
    except DataError as e:
        refuse(peers, e)


def _line(message):
    m = re.match(r".*?:(\d+): ", message)
    return int(m.group(1)) if m else 0


def agree(peers, err, key=None):
    """Every worker's problem (None, or a message or DataError); the first in ``key``'s
    order (default: the line its message names, 0 for none), the lowest worker's on a
    tie, is raised by the worker that found it. None anywhere: go on."""
    mine = None if err is None else (_line(str(err)) if key is None else key, str(err))
    found = [(e[0], w, e[1]) for w, e in enumerate(peers.allgather(mine)) if e is not None]
    if found:
        _, w, msg = min(found)
        refuse(peers, msg, w)


def attempt(peers, fn, *args):
    """``fn(*args)`` on every worker, a DataError any of them met agreed on."""
    try:
        out, err = fn(*args), None
    except DataError as e:
        out, err = None, e
    agree(peers, err)
    return out


def route(peers, dest, arrays):
    """Row k of every array (None: none; 1-D) to worker ``dest[k]``; returns the rows
    this worker receives, in source worker order. One array at a time; the list's arrays
    are dropped as they are sent (a caller that keeps no other reference frees them)."""
    W = peers.size
    if W == 1:
        return list(arrays)
    counts = peers.alltoall(list(tally(dest, W)))
    out = []
    for j, a in enumerate(arrays):
        arrays[j] = None
        if a is None:
            out.append(None)
            continue
        got = np.empty(int(sum(counts)), a.dtype)
        nxt = np.concatenate([[0], np.cumsum(counts)])
        for pieces in exchange(peers, dest.shape[0], lambda s, e: (dest[s:e], [a[s:e]])):
            for w, (p,) in enumerate(pieces):
                got[nxt[w]:nxt[w] + p.shape[0]] = p
                nxt[w] += p.shape[0]
        del a
        out.append(got)
    return out


CHUNK = 1 << 18  # rows a worker sends at a time


def route_slices(peers, bounds, sends, a, place):
    """:func:`route` for rows in their workers' order: rows bounds[w] .. bounds[w + 1] -
    1 of ``a`` go to worker w (``sends``: every worker's np.diff(bounds), allgathered);
    ``place(row, piece)`` puts each piece received at its first row's place."""
    W, me = peers.size, peers.rank
    at = np.concatenate([[0], np.cumsum([s[me] for s in sends])]).astype(np.int64)
    place(int(at[me]), a[bounds[me]:bounds[me + 1]])
    most = max([s[w] for v, s in enumerate(sends) for w in range(W) if w != v] + [0])
    for r in range(0, most, CHUNK):
        ends = [min(bounds[w] + r + CHUNK, bounds[w + 1]) for w in range(W)]
        got = peers.alltoall([None if w == me else a[min(bounds[w] + r, ends[w]):ends[w]]
                              for w in range(W)])
        for w, p in enumerate(got):
            if w != me and p.shape[0]:
                place(int(at[w]), p)
                at[w] += p.shape[0]


def exchange(peers, n, chunk):
    """Rows 0..n-1 of this worker to the others, CHUNK rows at a time: ``chunk(s, e)``
    gives rows s..e-1's destinations and arrays; yields, for each chunk, what every
    worker sent this one (worker order; a tuple of pieces each), valid until the next
    chunk (the grouped copies reuse their buffers)."""
    W = peers.size
    bufs = {}
    for s in range(0, max(peers.allgather(n)), CHUNK):
        e = min(s + CHUNK, n)
        dest, arrays = chunk(min(s, e), e)
        starts = group_starts(dest, W)  # each's first row
        # (grouped already where the rows are in their destinations' order)
        sent = arrays if ascending(dest, dest) else [grouped(dest, starts, x, bufs.get(k))
                                                      for k, x in enumerate(arrays)]
        if sent is not arrays:
            bufs = dict(enumerate(sent))
        del dest, arrays
        yield peers.alltoall([tuple(x[starts[o]:starts[o + 1]] for x in sent)
                              for o in range(W)])


@njit(**NB)
def _place(items, i0, users, vals, nxt, cu, cy):
    for k in range(items.shape[0]):
        j = items[k] - i0
        cu[nxt[j]] = users[k]
        cy[nxt[j]] = vals[k]
        nxt[j] += 1


@njit(**NB)
def _rows_of(indptr, a, r0, out):
    """out[k] = r0 + the row of entry a + k (``indptr``: the rows' starts)."""
    j = np.searchsorted(indptr, a, side="right") - 1
    for k in range(out.shape[0]):
        while indptr[j + 1] <= a + k:
            j += 1
        out[k] = r0 + j


def columns(peers, io, u0, counts, n, indptr, items, vals):
    """The CSC copy (items io[me]..io[me + 1] - 1, each item's users in order) of every
    worker's rows (CSR: users u0.., items, values), sent to the items' owners a chunk at
    a time and placed at once."""
    W, me = peers.size, peers.rank
    i0, i1 = int(io[me]), int(io[me + 1])
    cptr = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
    mine = tally(items, n)
    got = peers.alltoall([mine[io[d]:io[d + 1]] for d in range(W)])
    nxt = np.empty((W, i1 - i0), np.int64)
    nxt[0] = cptr[:-1]
    for w in range(1, W):
        nxt[w] = nxt[w - 1] + got[w - 1]
    del mine, got
    cu = np.empty(cptr[-1], np.int32)
    cy = np.empty(cptr[-1])

    ubuf = np.empty(min(CHUNK, items.shape[0]), np.int32)  # (each chunk's, as exchange's)

    def chunk(a, b):
        users = ubuf[:b - a]
        _rows_of(indptr, a, u0, users)
        return owners(io, items[a:b]), [items[a:b], users, vals[a:b]]

    for pieces in exchange(peers, items.shape[0], chunk):
        for w, (pi, pu, py) in enumerate(pieces):
            _place(pi, i0, pu, py, nxt[w], cu, cy)
    return cptr, cu, cy


@njit(**NB)
def tally_into(ids, lo, out, weights=None):
    """out[id - lo] += 1 for each id (``weights``: += its weight; int64 ``out``, where
    np.bincount would copy the ids to intp first)."""
    for k in range(ids.shape[0]):
        out[ids[k] - lo] += 1 if weights is None else weights[k]


def tally(ids, n, lo=0, weights=None):
    """``np.bincount(ids - lo, weights, minlength=n)`` for ids lo..lo+n-1 (int64),
    without numpy's copy of the ids as intp."""
    out = np.zeros(n, np.int64)
    tally_into(ids, lo, out, weights)
    return out


def group_starts(keys, n, lo=0):
    """Each group's first index (and the end) when entries of keys lo..lo+n-1 are
    grouped by key (n + 1, int64)."""
    out = np.zeros(n + 1, np.int64)
    tally_into(keys, lo - 1, out, None)  # (None as tally's: one specialisation)
    return np.cumsum(out, out=out)


@njit(**NB)
def scatter(keys, lo, starts, a, out):
    """out: ``a`` grouped by key (:func:`group_starts`), each group in arrival order (a
    counting sort)."""
    nxt = starts[:-1].copy()
    for k in range(keys.shape[0]):
        d = keys[k] - lo
        out[nxt[d]] = a[k]
        nxt[d] += 1


def grouped(keys, starts, a, buf=None):
    """``a[np.argsort(keys, kind='stable')]`` by a counting sort, written in ``buf``
    where it fits."""
    fits = buf is not None and buf.dtype == a.dtype and buf.shape[0] >= a.shape[0]
    out = buf[:a.shape[0]] if fits else np.empty(a.shape[0], a.dtype)
    scatter(keys, 0, starts, a, out)
    return out


@njit(**NB)
def _stable_by(keys, lo, n, order, out, first):
    """out: ``order`` (``first``: 0, 1, 2, ...) stably sorted by its entries' keys, ids
    lo..lo+n-1 (a counting sort)."""
    nxt = np.zeros(n + 1, np.int64)
    tally_into(keys, lo - 1, nxt, None)
    for t in range(n):
        nxt[t + 1] += nxt[t]
    for t in range(out.shape[0]):
        k = t if first else order[t]
        out[nxt[keys[k] - lo]] = k
        nxt[keys[k] - lo] += 1


@njit(**NB)
def ascending(rows, cols):
    """Whether the (row, column) pairs are in order; (a, a): whether ``a`` is."""
    for k in range(1, rows.shape[0]):
        if rows[k] < rows[k - 1] or (rows[k] == rows[k - 1] and cols[k] < cols[k - 1]):
            return False
    return True


def pair_order(rows, r0, n_rows, cols, n_cols):
    """``np.lexsort((cols, rows))`` for rows r0..r0+n_rows-1 and columns 0..n_cols-1, by
    two counting sorts (int32 below 2^31 pairs), or one pass for pairs in order."""
    dt = np.int32 if rows.shape[0] < 1 << 31 else np.int64
    if ascending(rows, cols):
        return np.arange(rows.shape[0], dtype=dt)
    o1, o2 = (np.empty(rows.shape[0], dt) for _ in range(2))
    _stable_by(cols, 0, n_cols, o1, o1, True)
    _stable_by(rows, r0, n_rows, o1, o2, False)
    return o2


@njit(**NB)
def in_place(order):
    """Whether ``order`` is 0, 1, ..., n - 1 (a sort that moves nothing)."""
    for k in range(order.shape[0]):
        if order[k] != k:
            return False
    return True


@njit(**NB)
def same_pairs(rows, cols, order):
    """Whether each pair in ``order`` repeats the one before it (one fewer than pairs)."""
    out = np.empty(max(order.shape[0] - 1, 0), np.bool_)
    for t in range(out.shape[0]):
        a, b = order[t], order[t + 1]
        out[t] = rows[a] == rows[b] and cols[a] == cols[b]
    return out


def owners(cuts, ids):
    """``np.searchsorted(cuts, ids, side='right') - 1`` by a table, as int16 (int64
    beyond 2^15 owners)."""
    W = cuts.shape[0] - 1
    table = np.repeat(np.arange(W, dtype=np.int16 if W < 1 << 15 else np.int64),
                      np.diff(cuts))
    return table[ids]


@njit(**NB)
def _mark(ids, lo, present):
    for k in range(ids.shape[0]):
        present[ids[k] - lo] = True


def distinct(ids):
    """``np.unique(ids)``: by a table of the ids present when they span no more than a
    few times their count, else by a sort."""
    if ids.shape[0] and ids.dtype.kind in "iu":
        lo, hi = int(ids.min()), int(ids.max())
        if hi - lo < 4 * ids.shape[0] + (1 << 20):
            present = np.zeros(hi - lo + 1, np.bool_)
            _mark(ids, lo, present)
            return (np.flatnonzero(present) + lo).astype(ids.dtype)
    return np.unique(ids)


@njit(**NB)
def _by_table(ids, lo, hi, table, out):
    for k in range(ids.shape[0]):
        v = ids[k]
        out[k] = table[v - lo] if lo <= v <= hi else -1


def dense_ids(sorted_ids, ids, reuse=False):
    """The index of each of ``ids`` in ``sorted_ids``, int32, -1 for an id not there (by
    a table, as :func:`distinct`); ``reuse``: written over int32 ``ids``."""
    out = ids if reuse and ids.dtype == np.int32 else np.empty(ids.shape[0], np.int32)
    if not (ids.shape[0] and sorted_ids.shape[0]):
        out[:] = -1
        return out
    lo, hi = int(sorted_ids[0]), int(sorted_ids[-1])
    if hi - lo < 4 * max(ids.shape[0], sorted_ids.shape[0]) + (1 << 20):
        table = np.full(hi - lo + 1, -1, np.int32)
        table[sorted_ids - lo] = np.arange(sorted_ids.shape[0], dtype=np.int32)
        _by_table(ids, lo, hi, table, out)
        return out
    pos = np.minimum(np.searchsorted(sorted_ids, ids), sorted_ids.shape[0] - 1)
    out[:] = np.where(sorted_ids[pos] == ids, pos, -1)
    return out


@njit(**NB)
def exact_partials(x):
    """Non-overlapping partials whose exact sum is sum(x) (Shewchuk's msum, as
    math.fsum): math.fsum of every worker's is the correctly rounded sum of all."""
    parts = np.zeros(64)
    n = 0
    for k in range(x.shape[0]):
        v = x[k]
        i = 0
        for j in range(n):
            y = parts[j]
            if abs(v) < abs(y):
                v, y = y, v
            hi = v + y
            lo = y - (hi - v)
            if lo != 0.0:
                parts[i] = lo
                i += 1
            v = hi
        if i >= 64:  # cannot happen for finite doubles (at most ~40 partials)
            i = 63
        parts[i] = v
        n = i + 1
    return parts[:n].copy()
