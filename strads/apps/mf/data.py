"""Rating data: reading (:mod:`strads.io.ratings`: MatrixMarket or delimited triplets),
deduplication, the held-out split, id remapping and the built-in synthetic problem; in
one process (:func:`prepare`) or each worker its share (:func:`prepare_part`).
Notes: docs/apps/mf.md."""
import math
from dataclasses import dataclass, replace

import numpy as np
from numba import njit

from ... import api
from ...errors import DataError
from ...params import check
from ...io import memory, numbers, ratings as rating_io
from ...io.agree import (alike, columns, dense_ids, distinct, exact_partials, in_place, owners,
                         pair_order, refuse, route, same_pairs, tally)
from ...transport import Peers
from . import kernels as K

DUPLICATES = ("error", "last", "mean")
COLD_START = ("error", "skip", "mean")
_COLD = ("has no training rating (cold start); pass cold_start='skip' or 'mean' "
         "(--cold-start) to drop such ratings or predict them from the mean and known biases")

@dataclass
class Triplets:
    """Ratings with raw integer ids; ``lines[k]`` is the file line of entry k (None for
    arrays given in Python)."""
    users: np.ndarray
    items: np.ndarray
    ratings: np.ndarray
    path: str = "ratings"
    lines: np.ndarray = None
    pos: np.ndarray = None  # each entry's position among the file's ratings (the split's)

    def where(self, k):
        return _where(self.path, self.line_of(None, [k]), k)

    def line_of(self, peers, positions):  # (as a file's rating_io.Ratings, entries' lines)
        return {} if self.lines is None else {p: int(self.lines[p]) for p in positions}

    def __len__(self):
        return self.ratings.shape[0]


def from_arrays(users, items, ratings, name="ratings"):
    """Triplets from Python arrays, checked like a file (ids integers, ratings finite)."""
    u, i = np.asarray(users), np.asarray(items)
    r = np.asarray(ratings, dtype=np.float64).ravel()
    if u.shape != (r.shape[0],) or i.shape != (r.shape[0],):
        raise DataError(f"{name}: users {u.shape}, items {i.shape} and ratings "
                        f"{r.shape} must be 1-D of one length")
    t = Triplets(check_ids(u, "user", name), check_ids(i, "item", name), r, name)
    _check_values(t)
    return t


def check_ids(arr, what, name):
    """``arr``'s ids as int64, the one rule of what an id is (fit's and predict's):
    integers, or floats that are exactly integers; anything else refused in one line."""
    if arr.dtype.kind not in "iuf" and arr.size:
        raise DataError(f"{name}: {what} ids must be integers, got dtype {arr.dtype}")
    if arr.dtype.kind == "f" and arr.size:
        # beyond 2^53 a float id may not be the integer that was meant
        bad = ~np.isfinite(arr) | (arr != np.round(arr)) | (np.abs(arr) >= 2.0 ** 53)
        if bad.any():
            k = int(np.flatnonzero(bad)[0])
            raise DataError(f"{name}: entry {k}: {what} id {arr[k]} is not an integer "
                            "below 2^53 (exactly, as a float: pass integer arrays)")
    if arr.dtype.kind == "u" and arr.size and int(arr.max()) >= rating_io.INT64:
        k = int(np.argmax(arr))
        raise DataError(f"{name}: entry {k}: {what} id {arr[k]} does not fit in a 64-bit "
                        "integer")
    return arr.astype(np.int64)


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
        raise DataError(f"{t.where(k)}: rating {t.ratings[k]} is too large: "
                        "the sum of squared ratings overflows")


def read_ratings(path):
    """Read a rating file, MatrixMarket or delimited triplets, plain or gzip-compressed
    (the formats: :mod:`strads.io.ratings`, docs/apps/mf.md)."""
    lay = rating_io.Layout(path)
    got = rating_io.read(lay)
    return Triplets(got.u.astype(np.int64), got.i.astype(np.int64), got.r, lay.path,
                    got.lines, pos=got.positions())

# -- cleaning, remapping, splitting --------------------------------------------------------
def dedupe(t, policy="error"):
    """Duplicate (user, item) pairs: ``error`` names both lines; ``last`` keeps the one
    written last (a re-rating); ``mean`` averages them (the workers' rules, in one
    process: :func:`_dedupe`)."""
    u, i = (unique_inverse(ids)[1] for ids in (t.users, t.items))
    groups = _pair_groups(u, 0, int(u.max(initial=-1)) + 1, i, int(i.max(initial=-1)) + 1,
                          None)
    if not groups[1].any():
        return t
    keep, r = _dedupe(Peers(), t, policy, groups, np.arange(len(t)), t.ratings,
                      lambda j: (t.users[j], t.items[j]))
    return Triplets(t.users[keep], t.items[keep], r, t.path,
                    t.lines[keep] if t.lines is not None else None,
                    pos=t.pos[keep] if t.pos is not None else keep.astype(np.int64))


KEEP_ONE = "pass duplicates='last' or 'mean' (--duplicates) to keep one"


def _duplicate(where, user, item, first):
    return (f"{where}: duplicate rating of user {user}, item {item} (first at {first}); "
            + KEEP_ONE)


def _collapse(order, dup, r, policy):
    """A pair's ratings (``order``: by pair, then position; ``dup``: same_pairs) as one:
    (the index of its last, its rating by ``policy``)."""
    start = np.concatenate([[True], ~dup])
    group = np.cumsum(start) - 1
    keep = order[np.flatnonzero(np.concatenate([start[1:], [True]]))]
    if policy == "last":
        return keep, r[keep]
    return keep, np.bincount(group, weights=r[order]) / np.bincount(group)


def unique_inverse(ids):
    """``np.unique(ids, return_inverse=True)`` (the inverse int32), by tables where the
    ids span no more than a few times their count (1..m, in every rating file we know)."""
    out = distinct(ids)
    return out, dense_ids(out, ids)


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


@njit(**numbers.NB)
def _held_out(seed, pos, fraction, out):
    """out[k] = rating at global position pos[k] is held out: a splitmix64 hash of
    (seed, position) below ``fraction`` -- the same whoever reads it."""
    for k in range(pos.shape[0]):
        z = np.uint64(seed) * np.uint64(0x9E3779B97F4A7C15) + np.uint64(pos[k]) \
            + np.uint64(0x632BE59BD9B4E019)
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        z = z ^ (z >> np.uint64(31))
        out[k] = float(z >> np.uint64(11)) * (1.0 / 9007199254740992.0) < fraction


def held_out(seed, pos, fraction):
    out = np.empty(pos.shape[0], np.bool_)
    _held_out(np.int64(int(seed) & 0x7FFFFFFFFFFFFFFF), np.ascontiguousarray(pos, np.int64),
               float(fraction), out)
    return out


def validation_seed(seed):
    """The validation split's seed: another hash than the test split's of the same
    ``seed``, so the two choices are independent."""
    return (int(seed) ^ 0x56414C4944) & 0x7FFFFFFFFFFFFFFF


def prepare(train, test=None, test_fraction=0.0, seed=0, duplicates="error",
            cold_start="error", validation=0.0):
    """Deduplicate, split (``test_fraction`` when no ``test``), remap ids to 0..m-1 and
    0..n-1 from the training ratings, and map the held-out ones onto them.
    ``validation`` > 0 (early stopping's first run): that share of the training ratings
    (chosen as the test split, independently) is held out; the test set is set aside."""
    from . import PARAMS
    check(PARAMS, dict(duplicates=duplicates, cold_start=cold_start,
                       test_fraction=test_fraction, validation_fraction=validation))
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
    if test is None:
        test = Triplets(np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0))
    tu, ku = lookup(user_ids, test.users)
    ti, ki = lookup(item_ids, test.items)
    unseen = ~(ku & ki)
    cold = int(unseen.sum())
    if cold and cold_start == "error":
        k = int(np.flatnonzero(unseen)[0])
        what = (f"user {test.users[k]}" if not ku[k] else f"item {test.items[k]}")
        raise DataError(f"{test.where(k)}: {what} {_COLD}")
    tu = np.where(ku, tu, m).astype(np.int32)
    ti = np.where(ki, ti, n).astype(np.int32)
    tr = test.ratings
    if cold and cold_start == "skip":
        tu, ti, tr = tu[~unseen], ti[~unseen], tr[~unseen]
    if val is not None:  # every validation user and item kept a training rating
        tu = lookup(user_ids, val.users)[0].astype(np.int32)
        ti = lookup(item_ids, val.items)[0].astype(np.int32)
        tr, cold = val.ratings, 0
    return Problem(user_ids, item_ids, users.astype(np.int32), items.astype(np.int32),
                   np.ascontiguousarray(train.ratings, dtype=np.float64), tu, ti,
                   np.ascontiguousarray(tr, dtype=np.float64), cold)


def lookup(ids, raw):
    pos = np.minimum(np.searchsorted(ids, raw), ids.shape[0] - 1)
    return pos, ids[pos] == raw


# -- the built-in problem ------------------------------------------------------------------
_GEN_USERS = 4096  # users per chunk of the built-in problem (each its own random stream)


def problem_plan(n_users, n_items, n_ratings, rank, noise, alpha, seed):
    """What every worker computes alike: the popularities and each user's degree."""
    if min(n_users, n_items, n_ratings, rank) < 1:
        raise DataError("the built-in problem needs users, items, ratings and rank >= 1")
    if not (math.isfinite(noise) and noise >= 0 and math.isfinite(alpha) and alpha >= 0):
        raise DataError(f"the built-in problem needs a finite noise >= 0 (--noise) and "
                        f"alpha >= 0 (--alpha), got {noise} and {alpha}")
    if n_ratings > 0.5 * n_users * n_items:
        raise DataError(f"{n_ratings} ratings for {n_users} x {n_items}: at most half of "
                        "the pairs can be rated")
    need = (n_users + n_items) * (40 + 16 * rank) + rating_io.BYTES_PER_RATING * n_ratings
    if n_users * n_items >= rating_io.INT64:
        raise DataError(f"the built-in problem: {n_users} x {n_items} (--n-users x "
                        "--n-items) pairs do not fit in 64-bit integers")
    too = memory.beyond(need)
    if too:
        raise DataError(f"the built-in problem of {n_users} users (--n-users), {n_items} "
                        f"items (--n-items), {n_ratings} ratings (--n-ratings) and true rank "
                        f"{rank} (--true-rank) needs {too}")
    rng = np.random.default_rng([seed, 0x6D66, 1])

    def popularity(k):
        with np.errstate(under="ignore"):
            w = (np.arange(k) + 1.0) ** -alpha
        rng.shuffle(w)
        return w / w.sum()

    pu, pi = popularity(n_users), popularity(n_items)
    # the distinct pairs that draws by popularity can be expected to reach: a too
    # skewed --alpha is refused here, never drawn forever
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


def make_problem(n_users=3000, n_items=1500, n_ratings=60000, rank=8, noise=0.5,
                 alpha=0.7, seed=0, part=0, n_parts=1):
    """Deterministic low-rank-plus-noise ratings with power-law degrees: popularities
    (k+1)^-alpha shuffled over the ids; each user's number of ratings by popularity (a
    multinomial, capped at the items), its items by popularity without repeats; r = 3 +
    u.v / sqrt(rank) + noise * N(0, 1), u, v standard normal. Returns :class:`Triplets`
    of part ``part`` of ``n_parts``: chunks of users, each from its own random stream (the
    same problem however many parts; ``pos``: positions in the whole problem)."""
    pu, pi, cdf, deg = problem_plan(n_users, n_items, n_ratings, rank, noise, alpha, seed)
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


# -- each worker's share (parallel loading) ------------------------------------------------
def _given(peers, t):
    """A worker's part as a source: ratings given in Python (``t``: its slice, ``pos``
    their positions; copied, the load works in place; messages name entries) or the
    built-in problem's (a tuple: its arguments; chunks of users from the seed)."""
    fresh = not isinstance(t, Triplets)
    if fresh:
        t = make_problem(*t, part=peers.rank, n_parts=peers.size)
    out = rating_io.Ratings()
    out.path, out.pos = t.path, t.pos
    out.u, out.i, out.r = (a if fresh else a.copy() for a in (t.users, t.items, t.ratings))
    out.total = sum(peers.allgather(t.ratings.shape[0]))
    out.line_of = lambda peers, positions: {}
    return out


def _check_squares(peers, src):
    """The sum of squared ratings must not overflow (the objective): the largest rating
    (the first of them in the file) is named, by the worker that read it."""
    with np.errstate(over="ignore", invalid="ignore"):
        ss = float(np.dot(src.r, src.r))
        total = sum(peers.allgather(ss))
    if not np.isfinite(total):
        k = int(np.argmax(np.abs(src.r))) if src.r.shape[0] else -1
        facts = peers.allgather(None if k < 0 else (-abs(float(src.r[k])), src.position(k),
                                                    float(src.r[k])))
        big, w = min((f, w) for w, f in enumerate(facts) if f is not None)
        line = src.line_of(peers, [big[1]])[big[1]]
        refuse(peers, f"{src.path}:{line}: rating {big[2]} is too large: the sum of "
               "squared ratings overflows", w)


def _pair_groups(u, u0, nu, i, n, pos):
    """Sort by (user u0..u0+nu-1, item 0..n-1, position), by counting sorts: (order, dup
    mask of the sorted)."""
    o = None  # (pos None: the rows are in position order)
    if pos is not None and pos.shape[0] > 1 and not (pos[1:] > pos[:-1]).all():  # gzip's
        o = np.argsort(pos, kind="stable")
        u, i = u[o], i[o]
    order = pair_order(u, u0, nu, i, n)
    dup = same_pairs(u, i, order)
    return (order if o is None else o[order]), dup


def _dedupe(peers, src, policy, groups, pos, r, raw):
    """Duplicates among this worker's entries (all of a pair's are here; ``groups``:
    :func:`_pair_groups`): ``error`` raises naming both lines (the earliest second
    occurrence over all workers), else the kept entries' indices and their ratings (None:
    ``r[keep]``). ``raw(j)``: entry j's raw (user, item)."""
    order, dup = groups
    cand = None
    if dup.any():
        later, earlier = pos[order[1:][dup]], pos[order[:-1][dup]]
        k = int(np.argmin(later))
        cand = (int(later[k]), int(earlier[k])) + tuple(raw(order[1:][dup][k]))
    if policy == "error":
        cands = [c for c in peers.allgather(cand) if c is not None]
        if cands:
            later, earlier, uu, ii = min(cands)
            lines = src.line_of(peers, [later, earlier])
            first = (f"line {lines[earlier]}" if earlier in lines else f"entry {earlier}")
            refuse(peers, _duplicate(_where(src.path, lines, later), uu, ii, first))
        return order, None
    if not dup.any():
        return order, None
    return _collapse(order, dup, r, policy)


def _where(path, lines, p):  # the rating at position p: its line, when lines has it
    return f"{path}:{lines[p]}" if p in lines else f"{path}: entry {p}"


_TILE = 1 << 20  # bytes of Y's rows a pass of _products reads


def _products(csr, lo, hi, Y, P, cur=None):
    """P[j] += vals[q] Y[idx[q] - lo] over row j's entries (``csr``: ptr, idx, vals, each
    row's indices in order) of indices lo..hi-1 (K.add_products), in passes over a block
    of Y's rows that stays in cache: the same sums in the same order (scipy's)."""
    ptr, idx, vals = csr
    cur = ptr[:-1].copy() if cur is None else cur
    step = max(1, _TILE // (8 * max(Y.shape[1], 1)))
    for a in range(lo, hi, step):
        b = min(a + step, hi)
        K.add_products(ptr, idx, vals, a, b, Y[a - lo:b - lo], cur, P)


def _held_file(peers, tsrc, user_ids, item_ids, uo, o):
    """This worker's ratings of the test file ``tsrc``: each to its user's worker (an
    unseen user's by a hash of its raw id), duplicates and cold starts by the policies.
    Ids: the dense index, m (n) for an unseen one. Returns ((users, items, ratings), the
    cold starts over all workers)."""
    W, me = peers.size, peers.rank
    m, n = user_ids.shape[0], item_ids.shape[0]
    ids = []  # (dense ids, the unseen raw ids): an unseen id is m (n) + its rank among them
    for raw, known in ((tsrc.u, user_ids), (tsrc.i, item_ids)):
        d = dense_ids(known, raw)
        new = np.unique(np.concatenate(peers.allgather(distinct(raw[d < 0]))))
        new = new.astype(np.int64)
        if new.shape[0]:
            if known.shape[0] + new.shape[0] > rating_io.I32:
                d = d.astype(np.int64)
            bad = d < 0
            d[bad] = known.shape[0] + np.searchsorted(new, raw[bad])
        ids.append((d, new))
    (tu, new_u), (ti, new_i) = ids
    dest = owners(uo, np.minimum(tu, m - 1))
    cold_u = np.flatnonzero(tu >= m)
    z = tsrc.u[cold_u].astype(np.int64).astype(np.uint64) * np.uint64(0x9E3779B97F4A7C15)
    z ^= z >> np.uint64(31)
    dest[cold_u] = (z % np.uint64(W)).astype(np.int64)
    del ids, cold_u, z
    tu, ti, tr, tpos = route(peers, dest, [tu, ti, tsrc.r, tsrc.positions()])
    del dest
    u0, u1 = int(uo[me]), int(uo[me + 1])
    raw_u = lambda x: user_ids[x] if x < m else new_u[x - m]  # noqa: E731
    raw_i = lambda x: item_ids[x] if x < n else new_i[x - n]  # noqa: E731
    rows = np.where(tu < m, tu - u0, tu - m + (u1 - u0))  # this worker's users, then unseen
    keep, vals = _dedupe(peers, tsrc, o["duplicates"],
                         _pair_groups(rows, 0, u1 - u0 + new_u.shape[0], ti,
                                      n + new_i.shape[0], tpos), tpos, tr,
                         lambda j: (raw_u(tu[j]), raw_i(ti[j])))
    del rows
    tu, ti, tpos = tu[keep], ti[keep], tpos[keep]
    tr = tr[keep] if vals is None else vals
    unseen = (tu >= m) | (ti >= n)
    c = int(unseen.sum())
    first = None
    if c:
        k = int(np.argmin(np.where(unseen, tpos, np.iinfo(np.int64).max)))
        first = (int(tpos[k]), "user" if tu[k] >= m else "item",
                 int(raw_u(tu[k])) if tu[k] >= m else int(raw_i(ti[k])))
    got = peers.allgather((c, first))
    cold = sum(g[0] for g in got)
    if cold and o["cold_start"] == "error":
        p, what, raw = min(g[1] for g in got if g[1] is not None)
        refuse(peers, f"{_where(tsrc.path, tsrc.line_of(peers, [p]), p)}: {what} {raw} {_COLD}")
    tu = np.minimum(tu, m).astype(np.int32)
    ti = np.minimum(ti, n).astype(np.int32)
    if c and o["cold_start"] == "skip":
        tu, ti, tr = tu[~unseen], ti[~unseen], tr[~unseen]
    return (tu, ti, tr), cold


def prepare_part(peers, desc):
    """This worker's shard and report from the descriptions ``desc`` (files, or its slice
    of ratings given in Python): it reads its part and agrees with the others on ids,
    duplicates, the split, the mean and the start."""
    W, me = peers.size, peers.rank
    o = desc["options"]
    lay_tr, lay_te = desc["train"], desc["test"]
    given = isinstance(lay_tr, Triplets)  # (in Python: fit()'s arrays)
    src = (_given(peers, desc["builtin"] if lay_tr is None else lay_tr)
           if lay_tr is None or given else rating_io.gather(peers, lay_tr))
    tsrc = None if lay_te is None else _given(peers, lay_te) if given else \
        rating_io.gather(peers, lay_te)
    for s in (src, tsrc):
        if s is not None and s.lay is not None:
            _check_squares(peers, s)

    # -- ids: the distinct raw ids of every worker, merged
    got = peers.allgather((distinct(src.u), distinct(src.i)))
    user_ids = np.unique(np.concatenate([g[0] for g in got])).astype(np.int64)
    item_ids = np.unique(np.concatenate([g[1] for g in got])).astype(np.int64)
    del got
    m, n = user_ids.shape[0], item_ids.shape[0]
    from . import _check_factor_memory, _check_workers, Layout as FL, penalties, start
    # the peak of the load is in the routes below: the raw ids go, the dense ones are
    # int32 and the destinations int16, before the ratings move
    u = dense_ids(user_ids, src.u, reuse=True)
    src.u = None
    i = dense_ids(item_ids, src.i, reuse=True)
    src.i = None
    if W > min(m, n):  # (before the users are cut into W blocks)
        if o["duplicates"] == "error":  # a duplicate's line first: all on worker 0
            pos = src.positions()
            got = peers.allgather((u, i, pos))
            if me:
                got = [(u[:0], i[:0], pos[:0])]
            uu, ii, pp = (np.concatenate([g[k] for g in got]) for k in range(3))
            del got
            _dedupe(peers, src, "error", _pair_groups(uu, 0, m, ii, n, pp), pp, pp,
                    lambda j: (user_ids[uu[j]], item_ids[ii[j]]))
        alike(peers, _check_workers, W, m, n)

    # -- rows: users in blocks balanced by their ratings, each rating to its user's
    counts = peers.allreduce(tally(u, m))
    uo = api.split_balanced(counts, W)
    del counts
    u0, u1 = int(uo[me]), int(uo[me + 1])
    dest = owners(uo, u)
    # the positions travel where the split needs them or the rows come out of file order
    # (gzip's blocks); else a plain file's parts, in worker order, keep the routed rows in
    # position order, and the positions follow only when a duplicate needs them
    need = (src.lay is None or src.lay.gz or bool(o.get("validation"))
            or (tsrc is None and o["test_fraction"] > 0))
    rows = [u, i, src.r, src.positions() if need else None]
    del u, i
    src.r = None
    u, i, r, pos = route(peers, dest, rows)
    del rows
    groups = _pair_groups(u, u0, u1 - u0, i, n, pos)
    if pos is None and any(peers.allgather(bool(groups[1].any()))):
        pos = route(peers, dest, [src.positions()])[0]
    del dest
    keep, vals = _dedupe(peers, src, o["duplicates"], groups, pos, r,
                         lambda j: (user_ids[u[j]], item_ids[i[j]]))
    del groups
    if vals is not None or not in_place(keep):  # (a file in (user, item) order: as it is)
        u = u[keep]
        i = i[keep]
        pos = None if pos is None else pos[keep]
        r = r[keep] if vals is None else vals
    del keep, vals

    # -- held-out ratings: a file, or a share of these chosen by seed and position
    test = None
    cold = 0
    if tsrc is not None:
        test, cold = _held_file(peers, tsrc, user_ids, item_ids, uo, o)
        tsrc = None
    frac = o["test_fraction"]

    def hold_out(seed, frac, u, i, r, pos):  # its user and item keep a training rating
        held = held_out(seed, pos, frac)
        ul = u - u0
        seen = np.bincount(ul[~held], minlength=u1 - u0) > 0
        held &= seen[ul]
        seen_i = peers.allreduce(np.bincount(i[~held], minlength=n).astype(np.int64)) > 0
        held &= seen_i[i]
        return (u[held].astype(np.int32), i[held], r[held]), ~held

    if test is None and frac > 0:
        test, train = hold_out(o["seed"], frac, u, i, r, pos)
        u, i, r, pos = u[train], i[train], r[train], pos[train]
    elif test is None:
        test = (np.zeros(0, np.int32), np.zeros(0, np.int32), np.zeros(0))
    if o.get("validation"):  # early stopping's first run: the test set is set aside
        test, train = hold_out(validation_seed(o["seed"]), o["validation"], u, i, r, pos)
        u, i, r = u[train], i[train], r[train]
        cold = 0
    del pos
    src = None

    # -- what the data's size allows (after the data's own errors, as in one process)
    alike(peers, _check_factor_memory, o["rank"], o["bias"] == "full", m, n, W,
          o["schedule"], o["block"], o.get("early_stop"))

    # -- counts, the mean, the penalties' weights
    cu = tally(u, u1 - u0, u0)
    ci = peers.allreduce(tally(i, n))
    parts = exact_partials(r) if o["bias"] != "none" else np.zeros(0)
    got = peers.allgather((r.shape[0], parts, int(cu.max()) if cu.shape[0] else 0,
                           test[2].shape[0]))
    n_train = sum(g[0] for g in got)
    n_test = sum(g[3] for g in got)
    if o.get("early_stop") is not None and not o.get("validation") and n_test == 0:
        refuse(peers, (f"early stopping ({o['early_stop']} iterations)" if given else
                       f"--early-stop {o['early_stop']}") + " needs held-out ratings: the "
               "held-out set is empty")
    mean = math.fsum(np.concatenate([g[1] for g in got])) / n_train \
        if o["bias"] != "none" else 0.0
    lam = o["lam"]
    reg_rows, reg_H = alike(peers, penalties, lam, o["weighted"], cu, ci,
                            max(g[2] for g in got))
    io = api.split_balanced(ci, W)
    i0, i1 = int(io[me]), int(io[me + 1])

    # -- rows (CSR, sorted by user then item: the dedupe's order) and columns (CSC)
    del u
    y = r
    y -= mean
    rows = (np.concatenate([[0], np.cumsum(cu)]).astype(np.int64),
            i.astype(np.int32, copy=False), y)
    del r, i
    cols = columns(peers, io, u0, ci[i0:i1], n, *rows)
    te_u, te_i, te_r = test
    # np.lexsort((te_i, te_u))
    o2 = pair_order(te_u, 0, m + 1, te_i, n + 1) if te_u.shape[0] else slice(None)
    test = (te_u[o2].astype(np.int32), te_i[o2].astype(np.int32), te_r[o2] - mean)

    # -- the start of H
    lay = FL(int(o["rank"]), float(lam), o["bias"] == "full")
    rss = peers.allgather(K.wsumsq(None, y))  # (worker order: the same sum on every rank)

    def gram(Z):
        # R Z' and then C Y, one worker's rows of Y at a time: scipy's sums (csr_matvecs),
        # bit for bit, without its copies of Z' and of Y
        Y = np.zeros((u1 - u0, lay.rank))
        _products(rows, 0, n, np.ascontiguousarray(Z.T), Y)
        Y.flags.writeable = False  # never written again: worker threads share it, no copies
        Pc = np.zeros((i1 - i0, lay.rank))
        cur = cols[0][:-1].copy()
        for w in range(W):
            _products(cols, int(uo[w]), int(uo[w + 1]),
                      peers.bcast(Y if w == me else None, w), Pc, cur)
        del Y
        return np.concatenate(peers.allgather(Pc)).T

    H, (sqW, sqH) = alike(peers, start, lay, o["seed"], o["init"], o["init_scale"],
                          reg_rows, reg_H, lam, sum(rss), gram)
    report = {"shape": (m, n), "mean": mean, "n_train": n_train, "n_test": n_test,
              "cold": desc.get("cold", cold), "rss": rss[me], "sqW": sqW,
              "sqH": sqH if me == 0 else None, "sse": K.wsumsq(None, test[2])}
    shard = {"layout": lay, "shape": (m, n), "H": H, "users": (u0, u1), "items": (i0, i1),
             "rows": rows, "cols": cols, "reg_rows": reg_rows,
             "reg_cols": reg_H[i0:i1].copy(), "test": test,
             "user_ids": user_ids[u0:u1].copy(), "item_ids": item_ids[i0:i1].copy(),
             "early_stop": o.get("early_stop")}
    return shard, report
