"""Rating data: readers (MatrixMarket, delimited triplets), id remapping, the held-out
split and the built-in synthetic problem.

Readers return :class:`Triplets` with the raw ids as written in the file; any problem
raises :class:`strads.DataError` naming the file, the line and what is wrong. The fast
path (``np.loadtxt``) reads clean files; anything it cannot vouch for is parsed again
line by line, so the error names the first bad line.
"""
import os
import warnings
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


def from_arrays(users, items, ratings, name="ratings"):
    """Triplets from Python arrays, checked like a file (ids integers, ratings finite)."""
    u, i = np.asarray(users), np.asarray(items)
    r = np.asarray(ratings, dtype=np.float64).ravel()
    if u.shape != (r.shape[0],) or i.shape != (r.shape[0],):
        raise DataError(f"{name}: users {u.shape}, items {i.shape} and ratings "
                        f"{r.shape} must be 1-D of one length")
    for arr, what in ((u, "user"), (i, "item")):
        if arr.dtype.kind == "f" and arr.size and not (np.isfinite(arr).all()
                                                       and (arr == np.round(arr)).all()):
            k = int(np.flatnonzero(~np.isfinite(arr) | (arr != np.round(arr)))[0])
            raise DataError(f"{name}: entry {k}: {what} id {arr[k]} is not an integer")
        if arr.dtype.kind not in "iuf" and arr.size:
            raise DataError(f"{name}: {what} ids must be integers, got dtype {arr.dtype}")
    t = Triplets(u.astype(np.int64), i.astype(np.int64), r, name)
    _check_values(t)
    return t


def _check_values(t):
    bad = np.flatnonzero(~np.isfinite(t.ratings))
    if bad.size:
        raise DataError(f"{t.where(bad[0])}: rating is {t.ratings[bad[0]]}, not finite")
    if len(t) == 0:
        raise DataError(f"{t.path}: no ratings")


# -- readers -------------------------------------------------------------------------------
def _field(tok, what, where):
    try:
        return int(tok) if what != "rating" else float(tok)
    except ValueError:
        pass
    kind = "an integer" if what != "rating" else "a number"
    raise DataError(f"{where}: {what} {tok.decode(errors='replace')!r} is not {kind}")


def _parse_lines(path, delim, skip):
    """Line by line: exact errors, and the line number of every entry."""
    us, its, rs, lines = [], [], [], []
    with open(path, "rb") as f:
        for lineno, raw in enumerate(f, 1):
            line = raw.strip()
            if lineno <= skip or not line or line[:1] in (b"#", b"%"):
                continue
            parts = line.split(delim) if delim else line.split()
            where = f"{path}:{lineno}"
            if len(parts) < 3:
                raise DataError(f"{where}: expected 'user item rating', found "
                                f"{len(parts)} field(s)")
            us.append(_field(parts[0].strip(), "user", where))
            its.append(_field(parts[1].strip(), "item", where))
            r = _field(parts[2].strip(), "rating", where)
            if not np.isfinite(r):
                raise DataError(f"{where}: rating is {r}, not finite")
            rs.append(r)
            lines.append(lineno)
    return Triplets(np.array(us, dtype=np.int64), np.array(its, dtype=np.int64),
                    np.array(rs, dtype=np.float64), path, np.array(lines, dtype=np.int64))


def _fast(path, delim, skip):
    """np.loadtxt, trusted only when every id is an exact integer and every rating finite;
    returns None to ask for the line-by-line parse."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            a = np.loadtxt(path, delimiter=delim.decode() if delim else None, skiprows=skip,
                           usecols=(0, 1, 2), comments=("#", "%"), ndmin=2,
                           dtype=np.float64)
    except (ValueError, IndexError):
        return None
    ids = a[:, :2]
    if (a.shape[0] == 0 or not np.isfinite(a).all() or (np.abs(ids) >= 2 ** 53).any()
            or (ids != np.round(ids)).any()):
        return None
    return Triplets(ids[:, 0].astype(np.int64), ids[:, 1].astype(np.int64),
                    np.ascontiguousarray(a[:, 2]), path)


def _with_lines(t, delim, skip):
    """The same entries, with line numbers (for messages about duplicates or ids)."""
    return t if t.lines is not None else _parse_lines(t.path, delim, skip)


def read_delimited(path):
    """``user item rating [timestamp ...]`` per line, tab, comma or blank separated, with
    an optional header line (MovieLens ``u.data`` and ``ratings.csv``); ``#`` and ``%``
    start comment lines."""
    first, first_no = None, 0
    with open(path, "rb") as f:
        for lineno, raw in enumerate(f, 1):
            line = raw.strip()
            if line and line[:1] not in (b"#", b"%"):
                first, first_no = line, lineno
                break
    if first is None:
        raise DataError(f"{path}: no ratings (empty file)")
    delim = b"\t" if b"\t" in first else b"," if b"," in first else None
    parts = first.split(delim) if delim else first.split()
    skip = 0
    try:
        [float(p) for p in parts[:3]]
    except ValueError:
        skip = first_no  # a header: column names
    t = _fast(path, delim, skip) or _parse_lines(path, delim, skip)
    if len(t) == 0:
        raise DataError(f"{path}: no ratings (only a header)")
    t.reparse = lambda: _with_lines(t, delim, skip)
    return t


def read_mtx(path):
    """MatrixMarket ``coordinate real|integer general``: row = user, column = item, both
    1-based and within the declared size."""
    with open(path, "rb") as f:
        banner = f.readline()
        toks = banner.lower().split()
        if len(toks) < 5 or toks[0] != b"%%matrixmarket" or toks[1] != b"matrix":
            raise DataError(f"{path}:1: not a MatrixMarket banner "
                            "('%%MatrixMarket matrix coordinate real general')")
        if toks[2] != b"coordinate":
            raise DataError(f"{path}:1: {toks[2].decode()} format holds no sparse ratings; "
                            "need 'coordinate'")
        if toks[3] not in (b"real", b"integer", b"double"):
            raise DataError(f"{path}:1: field {toks[3].decode()!r}: ratings need 'real' or "
                            "'integer' values")
        if toks[4] != b"general":
            raise DataError(f"{path}:1: symmetry {toks[4].decode()!r}: a rating matrix is "
                            "'general'")
        lineno, size = 1, None
        for raw in f:
            lineno += 1
            line = raw.strip()
            if line and not line.startswith(b"%"):
                size = line.split()
                break
    if size is None:
        raise DataError(f"{path}: no size line (empty file)")
    try:
        m, n, nnz = (int(x) for x in size)
    except ValueError:
        raise DataError(f"{path}:{lineno}: size line must be 'rows columns entries', got "
                        f"{b' '.join(size).decode(errors='replace')!r}") from None
    if nnz == 0:
        raise DataError(f"{path}:{lineno}: no ratings (0 entries)")
    t = _fast(path, None, lineno) or _parse_lines(path, None, lineno)
    if len(t) != nnz:
        raise DataError(f"{path}: the size line (line {lineno}) announces {nnz} entries, "
                        f"the file has {len(t)}")
    for arr, hi, what in ((t.users, m, "row"), (t.items, n, "column")):
        bad = np.flatnonzero((arr < 1) | (arr > hi))
        if bad.size:
            t = _with_lines(t, None, lineno)
            raise DataError(f"{t.where(bad[0])}: {what} {arr[bad[0]]} is outside 1..{hi}")
    t.reparse = lambda: _with_lines(t, None, lineno)
    return t


def read_ratings(path):
    """Read a rating file: MatrixMarket (``%%MatrixMarket`` banner) or delimited triplets."""
    if not os.path.isfile(path):
        raise DataError(f"{path}: no such file")
    if os.path.getsize(path) == 0:
        raise DataError(f"{path}: empty file")
    with open(path, "rb") as f:
        mtx = f.read(14).lower() == b"%%matrixmarket"
    return read_mtx(path) if mtx else read_delimited(path)


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
    t = t.reparse() if t.reparse else t  # line numbers, for messages
    if policy == "error":
        later, earlier = order[1:][dup], order[:-1][dup]
        k = int(np.argmin(later))
        full = t
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
    lines = t.lines[keep] if t.lines is not None else None
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
            full = test.reparse() if test.reparse else test
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
    if n_ratings > 0.5 * n_users * n_items:
        raise DataError(f"{n_ratings} ratings for {n_users} x {n_items}: at most half of "
                        "the pairs can be rated")
    rng = np.random.default_rng([seed, 0x6D66, 1])

    def cdf(k):
        w = (np.arange(k) + 1.0) ** -alpha
        rng.shuffle(w)
        c = np.cumsum(w)
        return c / c[-1]

    cu, ci = cdf(n_users), cdf(n_items)
    keys = np.zeros(0, np.int64)
    while keys.shape[0] < n_ratings:
        draw = int(1.2 * (n_ratings - keys.shape[0])) + 100
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
