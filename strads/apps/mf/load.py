"""Parallel loading: every worker reads its part of the rating file (or generates its
part of the built-in problem), and the workers agree on the rest with collectives.

Steps, each worker alike (``peers``: the workers' collectives, called in one order):

1. read: a plain file's byte range (a gzip file: every worker decompresses it and keeps
   every W-th block); one allgather of what each found (counts, lines, its first bad
   line, its sum of squares), from which the ratings' global positions and line numbers
   follow by an exclusive scan, and the earliest error is raised by the worker that
   holds it (the others wait in a collective for the job's end);
2. ids: an allgather of each worker's distinct raw ids, merged: raw -> dense maps,
   numbered in increasing raw id as in one process;
3. rows: the users cut into contiguous blocks balanced by their ratings (an allreduce of
   counts), and every rating moved to its user's worker (W-1 ring shifts); there
   duplicates are found (sorted by user, item, position) and resolved;
4. held-out split: decided per rating from ``seed`` and its global position (a hash), so
   it does not depend on the number of workers; a held-out rating whose user (local) or
   item (an allreduce of training counts) would have no training rating stays;
5. columns: the items cut by their training counts, each training rating moved to its
   item's worker too; the mean is the correctly rounded sum of all ratings (math.fsum
   of every worker's exact partials), the same whatever the split among workers;
6. start: H from one step of randomized subspace iteration, R'R Z: R Z by each user's
   worker, gathered; R' (R Z) by each item's worker, over its users in order, gathered;
   every worker then orthonormalises the same numbers.
"""
import math

import numpy as np
import scipy.sparse as sp

from ... import engine
from ...engine import DataError
from . import kernels as K
from . import parse as P
from .data import (_lookup, _too_many, held_out, make_problem_part, max_ratings, read_part,
                   validation_seed)


def _wait_for_end(peers):
    """Another worker raises the job's error: wait in a collective until it ends (under
    MPI the raising rank aborts the job; in one process the collective is broken)."""
    peers.allgather(None)
    raise RuntimeError("a worker's error did not end the job")


def _raise_one(peers, worker, message):
    if peers.rank == worker:
        raise DataError(message)
    _wait_for_end(peers)


class _Read:
    """A worker's part of one file, with its global positions and lines."""

    def __init__(self, peers, lay, what):
        self.lay, self.path = lay, lay.path
        p = read_part(lay, peers.rank, peers.size)
        with np.errstate(over="ignore", invalid="ignore"):
            ss = float(np.dot(p.r, p.r))
        big = int(np.argmax(np.abs(p.r))) if p.n else -1
        facts = peers.allgather({
            "n": p.n, "lines": p.lines, "seen": p.seen, "err": p.err,
            "too_many": p.too_many, "ss": ss,
            "big": None if big < 0 else (abs(float(p.r[big])), float(p.r[big]),
                                         int(p.l[big]), int(p.pos[big]))})
        W, me = peers.size, peers.rank
        if p.whole:
            lbase = pbase = [0] * W
        else:
            lbase = np.concatenate([[0], np.cumsum([f["lines"] for f in facts])]).tolist()
            pbase = np.concatenate([[0], np.cumsum([f["n"] for f in facts])]).tolist()
        errs = [(lay.line0 + lbase[w] + f["err"][0], w, f["err"][1])
                for w, f in enumerate(facts) if f["err"] is not None]
        if errs:
            line, w, text = min(errs)
            _raise_one(peers, w, f"{self.path}:{line}: {text}")
        self.total = sum(f["n"] for f in facts)
        limit = max_ratings()
        if any(f["too_many"] for f in facts) or (limit is not None and self.total > limit):
            _raise_one(peers, 0, str(_too_many(lay.src if hasattr(lay, "src") else lay,
                                               limit)))
        if lay.mtx and self.total != lay.nnz:
            _raise_one(peers, 0, f"{self.path}: the size line (line {lay.size_line}) "
                                 f"announces {lay.nnz} entries, the file has {self.total}")
        self.u, self.i, self.r = p.u, p.i, p.r
        self.lines = p.l + (lay.line0 + lbase[me])
        self.pos = p.pos + pbase[me]
        self.facts = facts
        self.lbase, self.pbase = lbase, pbase

    def check_squares(self, peers):
        with np.errstate(over="ignore", invalid="ignore"):
            total = sum(f["ss"] for f in self.facts)
        if not np.isfinite(total):
            cands = [(-f["big"][0], f["big"][3] + self.pbase[w], w)
                     for w, f in enumerate(self.facts) if f["big"] is not None]
            _, _, w = min(cands)
            _, val, line, _ = self.facts[w]["big"]
            line += self.lay.line0 + self.lbase[w]
            _raise_one(peers, w, f"{self.path}:{line}: rating {val} is too large: the sum "
                                 "of squared ratings overflows")

    def line_of(self, peers, positions):
        """The lines of these global positions (whoever read them), on every worker."""
        found = {}
        for q in positions:
            k = np.searchsorted(self.pos, q)
            if k < self.pos.shape[0] and self.pos[k] == q:
                found[int(q)] = int(self.lines[k])
        merged = {}
        for g in peers.allgather(found):
            merged.update(g)
        return merged


class _Generated:
    """A worker's part of the built-in problem (chunks of users from the seed)."""

    def __init__(self, peers, spec):
        t = make_problem_part(*spec, part=peers.rank, n_parts=peers.size)
        self.path, self.u, self.i, self.r, self.pos = "built-in", t.users, t.items, \
            t.ratings, t.pos
        self.lines = None
        self.total = sum(peers.allgather(t.ratings.shape[0]))

    def check_squares(self, peers):
        pass

    def line_of(self, peers, positions):
        return {}


def _exchange(peers, dest, arrays):
    """Move row k of every array to worker dest[k]: W-1 ring shifts; what arrives is
    in source worker order (each source's rows in their order)."""
    W, me = peers.size, peers.rank
    order = np.argsort(dest.astype(np.int16 if W < 32000 else np.int64), kind="stable")
    cuts = np.concatenate([[0], np.cumsum(np.bincount(dest, minlength=W))])
    sorted_arrays = [a[order] for a in arrays]
    del order
    buckets = [[a[cuts[w]:cuts[w + 1]] for a in sorted_arrays] for w in range(W)]
    del sorted_arrays
    got = [None] * W
    got[me] = buckets[me]
    for k in range(1, W):
        got[(me - k) % W] = peers.shift(buckets[(me + k) % W], k)
        buckets[(me + k) % W] = None
    return [np.concatenate([g[j] for g in got]) for j in range(len(arrays))]


def _dense(ids, raw):
    pos, known = _lookup(ids, raw)
    return pos, known


def _owner_hash(raw, W):
    z = raw.astype(np.uint64) * np.uint64(0x9E3779B97F4A7C15)
    z ^= z >> np.uint64(31)
    return (z % np.uint64(W)).astype(np.int64)


def _dup_groups(key, pos):
    """Sort by (key, position): (order, start-of-group mask, dup mask) of the sorted."""
    if pos.shape[0] > 1 and not (pos[1:] > pos[:-1]).all():
        o = np.argsort(pos, kind="stable")
    else:
        o = None
    k = key if o is None else key[o]
    order = np.argsort(k, kind="stable")
    if o is not None:
        order = o[order]
    ks = key[order]
    dup = ks[1:] == ks[:-1]
    return order, dup


def _dedupe(peers, src, policy, key, pos, r, raw_u, raw_i):
    """Duplicates among this worker's entries (all of a pair's are here): ``error``
    raises naming both lines (the earliest second occurrence over all workers), else
    the kept entries' indices (into the given arrays, sorted by key) and ratings."""
    order, dup = _dup_groups(key, pos)
    cand = None
    if dup.any():
        later, earlier = pos[order][1:][dup], pos[order][:-1][dup]
        k = int(np.argmin(later))
        j = order[1:][dup][k]
        cand = (int(later[k]), int(earlier[k]), int(raw_u[j]), int(raw_i[j]))
    if policy == "error":
        cands = [c for c in peers.allgather(cand) if c is not None]
        if cands:
            later, earlier, uu, ii = min(cands)
            lines = src.line_of(peers, [later, earlier])
            where = (f"{src.path}:{lines[later]}" if later in lines
                     else f"{src.path}: entry {later}")
            first = (f"line {lines[earlier]}" if earlier in lines else f"entry {earlier}")
            _raise_one(peers, 0, f"{where}: duplicate rating of user {uu}, item {ii} "
                                 f"(first at {first}); pass duplicates='last' or 'mean' "
                                 "(--duplicates) to keep one")
        return order, r[order]
    if not dup.any():
        return order, r[order]
    start = np.concatenate([[True], ~dup])
    group = np.cumsum(start) - 1
    last = np.flatnonzero(np.concatenate([start[1:], [True]]))
    keep = order[last]
    if policy == "last":
        vals = r[keep]
    else:
        vals = np.bincount(group, weights=r[order]) / np.bincount(group)
    return keep, vals


def load(peers, desc):
    """This worker's shard (as make_setup's shards) and its report, from the file
    descriptions in ``desc`` (see :func:`strads.apps.mf.make_parallel_setup`)."""
    W, me = peers.size, peers.rank
    o = desc["options"]
    lay_tr = desc["train"]
    src = _Generated(peers, desc["builtin"]) if lay_tr is None else \
        _Read(peers, lay_tr, "ratings")
    tsrc = _Read(peers, desc["test"], "test") if desc["test"] is not None else None
    src.check_squares(peers)
    if tsrc is not None:
        tsrc.check_squares(peers)

    # -- ids: the distinct raw ids of every worker, merged
    got = peers.allgather((np.unique(src.u), np.unique(src.i)))
    user_ids = np.unique(np.concatenate([g[0] for g in got]))
    item_ids = np.unique(np.concatenate([g[1] for g in got]))
    del got
    m, n = user_ids.shape[0], item_ids.shape[0]
    from . import _check_factor_memory, Layout as FL
    u = np.searchsorted(user_ids, src.u)
    i = np.searchsorted(item_ids, src.i).astype(np.int32)

    # -- rows: users in blocks balanced by their ratings, each rating to its user's
    counts = peers.allreduce(np.bincount(u, minlength=m).astype(np.int64))
    uo = engine.split_balanced(counts, W)
    del counts
    u0, u1 = int(uo[me]), int(uo[me + 1])
    dest = np.searchsorted(uo, u, side="right") - 1
    u, i, r, pos = _exchange(peers, dest, [u.astype(np.int32), i, src.r, src.pos])
    del dest
    src.u = src.i = src.r = None
    ul = (u - u0).astype(np.int64)
    key = ul * n + i
    keep, r = _dedupe(peers, src, o["duplicates"], key, pos,
                      r, user_ids[u], item_ids[i])
    u, i, pos = u[keep], i[keep], pos[keep]
    del key, keep, ul

    # -- held-out ratings: a file, or a share of these chosen by seed and position
    test = None
    cold = 0
    if tsrc is not None:
        tu, ku = _dense(user_ids, tsrc.u)
        ti, ki = _dense(item_ids, tsrc.i)
        tdest = np.where(ku, np.searchsorted(uo, tu, side="right") - 1,
                         _owner_hash(tsrc.u, W))
        tu_raw, ti_raw, tr, tpos = _exchange(peers, tdest, [tsrc.u, tsrc.i, tsrc.r,
                                                            tsrc.pos])
        # duplicates: by raw pair (an unseen id has no dense index)
        key2 = np.lexsort((ti_raw, tu_raw))
        rank_pairs = np.empty(key2.shape[0], np.int64)
        if key2.shape[0]:
            su, si = tu_raw[key2], ti_raw[key2]
            new = np.concatenate([[True], (su[1:] != su[:-1]) | (si[1:] != si[:-1])])
            rank_pairs[key2] = np.cumsum(new) - 1
        keep, tr = _dedupe(peers, tsrc, o["duplicates"], rank_pairs, tpos, tr,
                           tu_raw, ti_raw)
        tu_raw, ti_raw, tpos = tu_raw[keep], ti_raw[keep], tpos[keep]
        tu, ku = _dense(user_ids, tu_raw)
        ti, ki = _dense(item_ids, ti_raw)
        unseen = ~(ku & ki)
        c = int(unseen.sum())
        first = None
        if c:
            k = int(np.argmin(np.where(unseen, tpos, np.iinfo(np.int64).max)))
            first = (int(tpos[k]), "user" if not ku[k] else "item",
                     int(tu_raw[k]) if not ku[k] else int(ti_raw[k]))
        got = peers.allgather((c, first))
        cold = sum(g[0] for g in got)
        if cold and o["cold_start"] == "error":
            p, what, raw = min(g[1] for g in got if g[1] is not None)
            lines = tsrc.line_of(peers, [p])
            where = f"{tsrc.path}:{lines[p]}" if p in lines else f"{tsrc.path}: entry {p}"
            _raise_one(peers, 0, f"{where}: {what} {raw} has no training rating (cold "
                                 "start); pass cold_start='skip' or 'mean' (--cold-start) "
                                 "to drop such ratings or predict them from the mean and "
                                 "known biases")
        tu = np.where(ku, tu, m).astype(np.int32)
        ti = np.where(ki, ti, n).astype(np.int32)
        if c and o["cold_start"] == "skip":
            tu, ti, tr = tu[~unseen], ti[~unseen], tr[~unseen]
        test = (tu, ti, tr)
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
    if W > min(m, n):
        _raise_one(peers, 0, f"{W} workers for {m} users and {n} items: each worker "
                             "needs users and items")
    try:
        _check_factor_memory(o["rank"], o["bias"] == "full", m, n, W, o["schedule"],
                             o["block"], o.get("early_stop"))
    except DataError as e:
        _raise_one(peers, 0, str(e))

    # -- counts, the mean, the penalties' weights
    cu = np.bincount(u - u0, minlength=u1 - u0)
    ci = peers.allreduce(np.bincount(i, minlength=n).astype(np.int64))
    parts = P.exact_partials(r) if o["bias"] != "none" else np.zeros(0)
    got = peers.allgather((r.shape[0], parts, int(cu.max()) if cu.shape[0] else 0,
                           test[2].shape[0]))
    n_train = sum(g[0] for g in got)
    n_test = sum(g[3] for g in got)
    if o.get("early_stop") is not None and not o.get("validation") and n_test == 0:
        _raise_one(peers, 0, f"--early-stop {o['early_stop']} needs held-out ratings: the "
                             "held-out set is empty")
    mean = math.fsum(np.concatenate([g[1] for g in got])) / n_train \
        if o["bias"] != "none" else 0.0
    lam, weighted = o["lam"], o["weighted"]
    with np.errstate(over="ignore"):
        reg_rows = lam * cu if weighted else np.full(u1 - u0, float(lam))
        reg_H = lam * ci if weighted else np.full(n, float(lam))
        bad = weighted and not (np.isfinite(lam * float(max(g[2] for g in got)))
                                and np.isfinite(reg_H).all())
    if bad:
        _raise_one(peers, 0, f"lambda {lam} (--lambda) times a row's up to "
                             f"{max(max(g[2] for g in got), int(ci.max()))} ratings "
                             "(--lambda-weighting count) overflows")
    io = engine.split_balanced(ci, W)
    i0, i1 = int(io[me]), int(io[me + 1])

    # -- rows (CSR, sorted by user then item: the dedupe's order) and columns (CSC)
    y = r - mean
    del r
    ul = (u - u0).astype(np.int64)
    indptr = np.concatenate([[0], np.cumsum(np.bincount(ul, minlength=u1 - u0))])
    rows = (indptr.astype(np.int64), i.astype(np.int32), y)
    cdest = np.searchsorted(io, i, side="right") - 1
    ci_, cu_, cy = _exchange(peers, cdest, [i, u.astype(np.int32), y])
    del cdest, ul
    order = np.argsort((ci_.astype(np.int64) - i0) * m + cu_, kind="stable")
    ci_, cu_, cy = ci_[order], cu_[order], cy[order]
    del order
    cptr = np.concatenate([[0], np.cumsum(np.bincount(ci_ - i0, minlength=i1 - i0))])
    cols = (cptr.astype(np.int64), cu_.astype(np.int32), cy)
    del ci_
    te_u, te_i, te_r = test
    if te_u.shape[0]:
        o2 = np.lexsort((te_i, te_u))
        test = (te_u[o2].astype(np.int32), te_i[o2].astype(np.int32), te_r[o2] - mean)
    else:
        test = (te_u.astype(np.int32), te_i.astype(np.int32), te_r - mean)

    # -- the start of H
    lay = FL(int(o["rank"]), float(lam), o["bias"] == "full")
    rng = np.random.default_rng([o["seed"], 0x6D66, 2])
    Z = rng.standard_normal((lay.rank, n)) / np.sqrt(n)
    if o["init"] == "svd":
        R = sp.csr_matrix((rows[2], rows[1], rows[0]), shape=(u1 - u0, n))
        Y = np.ascontiguousarray(R @ Z.T)
        del R
        Y = np.concatenate(peers.allgather(Y))
        C = sp.csr_matrix((cols[2], cols[1], cols[0]), shape=(i1 - i0, m))
        Pc = np.ascontiguousarray(C @ Y)
        del C, Y
        Z = np.ascontiguousarray(np.concatenate(peers.allgather(Pc)).T)
        del Pc
        K.orthonormalize(Z)
    scale = o["init_scale"] if o["init_scale"] is not None else \
        (1.0 if o["init"] == "svd" else np.sqrt(n / lay.rank))
    H = np.zeros((lay.kk, n + 1))
    H[:lay.rank, :n] = scale * Z
    del Z
    with np.errstate(over="ignore", invalid="ignore"):
        penalty = float(reg_H @ (H[:lay.rank, :n] ** 2).sum(axis=0))
    if not np.isfinite(penalty):
        _raise_one(peers, 0, f"lambda {lam} (--lambda) and starting scale {scale} "
                             "(--init-scale): the starting penalty lambda ||H||^2 "
                             "overflows")
    if lay.biases:
        H[lay.user_bias] = 1.0
    sqH = np.array([K.wsumsq(reg_H, H[t, :n]) for t in range(lay.kk)])
    sqW = np.zeros(lay.kk)
    if lay.biases:
        sqW[lay.item_bias] = K.wsumsq(reg_rows, np.ones(u1 - u0))
    report = {"shape": (m, n), "mean": mean, "n_train": n_train, "n_test": n_test,
              "cold": cold, "rss": K.wsumsq(None, y), "sqW": sqW,
              "sqH": sqH if me == 0 else None, "sse": K.wsumsq(None, test[2])}
    shard = {"layout": lay, "shape": (m, n), "H": H, "users": (u0, u1), "items": (i0, i1),
             "rows": rows, "cols": cols, "reg_rows": reg_rows,
             "reg_cols": reg_H[i0:i1].copy(), "test": test,
             "user_ids": user_ids[u0:u1].copy(), "item_ids": item_ids[i0:i1].copy(),
             "early_stop": o.get("early_stop")}
    return shard, report
