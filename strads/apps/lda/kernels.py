"""LDA kernels: free numba functions over plain arrays, compiled once and cached on disk;
the sampler (exact collapsed Gibbs, F+LDA's split and sum tree): docs/apps/lda.md."""
import math

import numpy as np
from numba import njit

from .prefetch import prefetch as _prefetch

_opts = dict(cache=True, nogil=True)

_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_M1 = np.uint64(0xBF58476D1CE4E5B9)
_M2 = np.uint64(0x94D049BB133111EB)
_TO_UNIT = 1.0 / 9007199254740992.0  # 2^-53
# the list walks index with unsigned integers: numba then skips its check for negative
# (from-the-end) indices inside the loops
_U0, _U1 = np.uint64(0), np.uint64(1)


@njit(**_opts)
def _mix64(x):
    # splitmix64's finaliser: a bijection of 64-bit integers that spreads every bit
    x = (x ^ (x >> np.uint64(30))) * _M1
    x = (x ^ (x >> np.uint64(27))) * _M2
    return x ^ (x >> np.uint64(31))


@njit(**_opts)
def _next(s):
    s = s + _GOLDEN
    return s, float(_mix64(s) >> np.uint64(11)) * _TO_UNIT


@njit(**_opts)
def round_seed(key, worker, round):
    """The sampler's seed of one worker in one round from the run's key (uint64)."""
    h = _mix64(key + np.uint64(worker + 1) * _GOLDEN)
    return _mix64(h + np.uint64(round + 1) * _GOLDEN)


@njit(**_opts)
def _tree_set(tree, leaf, value):
    i = leaf
    d = value - tree[i]
    while i >= 1:
        tree[i] += d
        i >>= 1


@njit(**_opts)
def _tree_build(tree, counts, beta, inv):
    """The leaves (counts_k + beta) inv_k, then each level's sums. Through views of
    each level: indices from 0 let LLVM vectorise the loops (``tree[P + k]`` is
    checked for a negative index and is not vectorised)."""
    P = tree.shape[0] // 2
    K = inv.shape[0]
    leaves = tree[P:]
    for k in range(K):
        leaves[k] = (counts[k] + beta) * inv[k]
    leaves[K:] = 0.0
    n = P // 2
    while n >= 1:
        dst, src = tree[n:2 * n], tree[2 * n:4 * n]
        for k in range(n):
            dst[k] = src[2 * k] + src[2 * k + 1]
        n //= 2


@njit(**_opts)
def _tree_draw(tree, u, n_leaves, K):
    # first leaf whose running sum exceeds u
    i = 1
    while i < n_leaves:
        left = tree[2 * i]
        if u < left:
            i = 2 * i
        else:
            u -= left
            i = 2 * i + 1
    k = i - n_leaves
    return k if k < K else K - 1  # rounding at the very top end


@njit(**_opts)
def _first_above(cum, n, u):
    """The first k with u < cum[k] (cum: increasing partial sums, u below cum[n - 1])."""
    lo, hi = 0, n - 1
    while lo < hi:
        mid = (lo + hi) >> 1
        if cum[mid] > u:
            hi = mid
        else:
            lo = mid + 1
    return lo


#: a word with at most this many tokens in a block is sampled without a tree (sample_block)
SHORT_RUN = 8


# ------------------------------------------------------------- the slice in hand, packed
# (a sampler given ``packed`` works on the slice packed: docs/apps/lda.md, "the slice in
# hand, packed")
@njit(**_opts)
def _pk_copy(packed, r0, r1, o):
    indptr, idx, cnt, out_ptr, out_idx, out_cnt = packed[:6]
    out_ptr[r0] = o  # (set already, but for row 0)
    for r in range(r0, r1):
        for q in range(indptr[r], indptr[r + 1]):
            out_idx[o] = idx[q]
            out_cnt[o] = cnt[q]
            o += 1
        out_ptr[r + 1] = o
    return o


@njit(**_opts)
def _pk_scatter(packed, r, nwk):
    indptr, idx, cnt = packed[:3]
    for q in range(indptr[r], indptr[r + 1]):
        nwk[0, idx[q]] = cnt[q]


@njit(**_opts)
def _pk_emit(packed, r, z, i, j, nwk, o):
    """Row r packed after the run of tokens i .. j - 1 (in the buffer's one row), and the
    row set back to zero."""
    indptr, idx, cnt, out_ptr, out_idx, out_cnt, mark, extra = packed
    a, b = indptr[r], indptr[r + 1]
    for q in range(a, b):
        mark[idx[q]] = 1
    m = 0  # the topics the tokens took that were not among the row's, sorted
    for t in range(i, j):
        k = z[t]
        if mark[k] == 0:
            mark[k] = 1
            e = m  # insertion sort: a run adds few new topics
            while e > 0 and extra[e - 1] > k:
                extra[e] = extra[e - 1]
                e -= 1
            extra[e] = k
            m += 1
    q, e = a, 0  # merge the two sorted lists
    while q < b or e < m:
        if e == m or (q < b and idx[q] < extra[e]):
            k = idx[q]
            q += 1
        else:
            k = extra[e]
            e += 1
        mark[k] = 0
        c = nwk[0, k]
        if c != 0:
            out_idx[o] = k
            out_cnt[o] = c
            o += 1
            nwk[0, k] = 0
    out_ptr[r + 1] = o
    return o


@njit(**_opts)
def _row_in(packed, r_next, row, nwk, o):
    """With ``packed``, before a row's tokens: the rows before it copied out and its own
    scattered into ``nwk``'s first row; -> (o, the row of ``nwk`` that holds row
    ``row``): one row of K serves every row in turn, where a buffer of every row would
    have all its pages touched by a round (V / W x K x 4 bytes)."""
    if packed is not None:
        o = _pk_copy(packed, r_next, row, o)
        _pk_scatter(packed, row, nwk)
        return o, 0
    return o, row


@njit(**_opts)
def _pk_rest(packed, r_next, o):
    """The rows after the last run copied out (with ``packed``): -> o."""
    if packed is not None:
        o = _pk_copy(packed, r_next, packed[0].shape[0] - 1, o)
    return o


def packed_io(packed, n_tokens, mark, extra):
    """The ``packed`` argument of a sampler for the packed slice ``packed`` and
    ``n_tokens`` tokens; -> (argument, function of the sampler's result giving the
    packed slice after sampling)."""
    indptr, idx, cnt = packed
    cap = idx.shape[0] + n_tokens
    out = (np.empty_like(indptr), np.empty(cap, idx.dtype), np.empty(cap, cnt.dtype))
    # (views: the fresh arrays' pages beyond o were never touched)
    return ((indptr, idx, cnt, *out, mark, extra),
            lambda o: (out[0], out[1][:o], out[2][:o]))


@njit(**_opts)
def sample_block(wptr, docs, z, dmeta, dlist, nwk, nk, alpha, beta, vbeta, seed, tree, cum,
                 packed=None, short_run=SHORT_RUN):
    """One Gibbs pass over a block of tokens sorted by word, row r's tokens ``wptr[r] ..
    wptr[r + 1] - 1`` (of ``docs`` and ``z``), against the rows of the word-topic counts
    ``nwk`` (or, with ``packed``, those rows packed: -> the packed entries); the
    documents' counts are compact lists. In place."""
    K = nk.shape[0]
    P = tree.shape[0] // 2
    uP = np.uint64(P)
    s = seed
    # 1 / (n_k + V beta), kept as n_k changes: a word's leaves are then K products, not
    # K divisions
    inv = np.empty(K)
    for k in range(K):
        inv[k] = 1.0 / (nk[k] + vbeta)
    n = wptr[wptr.shape[0] - 1]
    # list entries in a 64-byte cache line (an empty list's stride may be 0)
    per_line = max(1, 64 // max(dlist.strides[0], 1))
    o = 0
    r_next = 0
    for row in range(wptr.shape[0] - 1):
        i, j = wptr[row], wptr[row + 1]
        if i == j:
            continue
        o, at = _row_in(packed, r_next, row, nwk, o)
        use_tree = j - i > short_run
        qsum = 0.0
        if use_tree:
            _tree_build(tree, nwk[at], beta, inv)
        else:
            qsum = _q_sum(nwk, at, inv, beta)
        for t in range(i, j):
            # documents come in no useful order: fetch ahead the metadata, then every
            # cache line of the topic list (the walk below reads it all), of the
            # documents a few tokens on
            if t + 16 < n:
                _prefetch(dmeta, docs[t + 16], 0)
            if t + 8 < n:
                d8 = docs[t + 8]
                a8, m8 = dmeta[d8, 0], dmeta[d8, 1]
                for q in range(0, m8, per_line):
                    _prefetch(dlist, a8 + q, 0)
                if m8 > 0:
                    _prefetch(dlist, a8 + m8 - 1, 0)
            d = docs[t]
            old = z[t]
            a = dmeta[d, 0]
            m = dmeta[d, 1]
            # take the token out of its document's list ...
            q = np.uint64(a)
            while dlist[q, _U0] != old:
                q += _U1
            dlist[q, 1] -= 1
            if dlist[q, 1] == 0:
                m -= 1
                dlist[q, 0] = dlist[a + m, 0]
                dlist[q, 1] = dlist[a + m, 1]
            # ... and out of the word and topic counts
            before = (nwk[at, old] + beta) * inv[old]
            nwk[at, old] -= 1
            nk[old] -= 1
            inv[old] = 1.0 / (nk[old] + vbeta)
            after = (nwk[at, old] + beta) * inv[old]
            # document term: sum_k n_dk q_k over the document's topics
            if use_tree:
                _tree_set(tree, P + old, after)
            else:
                qsum += after - before
            acc = 0.0
            ua, um, q = np.uint64(a), np.uint64(m), _U0
            while q < um:  # (LLVM takes the branch out of the loop)
                r = ua + q
                k = dlist[r, _U0]
                if use_tree:
                    acc += dlist[r, _U1] * tree[uP + np.uint64(k)]
                else:
                    acc += dlist[r, _U1] * ((nwk[at, k] + beta) * inv[k])
                cum[q] = acc
                q += _U1
            smooth = tree[1] if use_tree else qsum
            s, u = _next(s)
            u = u * (acc + alpha * smooth)
            if u < acc:
                q = a + _first_above(cum, m, u)
                new = dlist[q, 0]
                dlist[q, 1] += 1
            else:
                if use_tree:
                    new = _tree_draw(tree, (u - acc) / alpha, P, K)
                else:
                    new = _q_walk(nwk, at, inv, beta, (u - acc) / alpha)
                q = a
                while q < a + m and dlist[q, 0] != new:
                    q += 1
                if q == a + m:
                    dlist[q, 0] = new
                    dlist[q, 1] = 1
                    m += 1
                else:
                    dlist[q, 1] += 1
            dmeta[d, 1] = m
            z[t] = new
            before = (nwk[at, new] + beta) * inv[new]
            nwk[at, new] += 1
            nk[new] += 1
            inv[new] = 1.0 / (nk[new] + vbeta)
            after = (nwk[at, new] + beta) * inv[new]
            if use_tree:
                _tree_set(tree, P + new, after)
            else:
                qsum += after - before
        if packed is not None:
            o = _pk_emit(packed, row, z, i, j, nwk, o)
            r_next = row + 1
    return _pk_rest(packed, r_next, o)


_fast = dict(_opts, fastmath={"reassoc", "contract", "nsz"})


@njit(**_fast)
def _q_sum(nwk, row, inv, beta):
    """sum_k (n_wk + beta) / (n_k + V beta) of one word (in SIMD lanes)."""
    tot = 0.0
    for k in range(inv.shape[0]):
        tot += (nwk[row, k] + beta) * inv[k]
    return tot


@njit(**_fast)
def _q_chunk(nwk, row, inv, beta, k):
    c = 0.0
    for i in range(k, k + 8):
        c += (nwk[row, i] + beta) * inv[i]
    return c


@njit(**_opts)
def _q_walk(nwk, row, inv, beta, u):
    """The first topic whose running sum of q_k exceeds u, eight topics at a time (the
    last topic if rounding leaves u beyond the sum)."""
    K = inv.shape[0]
    k = 0
    acc = 0.0
    while k + 8 <= K:
        c = _q_chunk(nwk, row, inv, beta, k)
        if acc + c > u:
            break
        acc += c
        k += 8
    while k < K - 1:
        acc += (nwk[row, k] + beta) * inv[k]
        if acc > u:
            break
        k += 1
    return k


@njit(**_fast)
def _dense_terms(ndk, d, q, p, alpha):
    """p_k = (n_dk + alpha) q_k for every topic, and their sum (in SIMD lanes)."""
    tot = 0.0
    for k in range(q.shape[0]):
        v = (ndk[d, k] + alpha) * q[k]
        p[k] = v
        tot += v
    return tot


@njit(**_fast)
def _sum8(p, k):
    c = 0.0
    for i in range(k, k + 8):
        c += p[i]
    return c


@njit(**_opts)
def sample_dense(wptr, docs, z, ndk, nwk, nk, alpha, beta, vbeta, seed, q, p, inv,
                 packed=None):
    """As :func:`sample_block`, for few topics: a dense document-topic table and each
    token's conditional over all K topics in SIMD lanes, in a fixed order (bit for bit)."""
    K = nk.shape[0]
    s = seed
    for k in range(K):
        inv[k] = 1.0 / (nk[k] + vbeta)
    o = 0
    r_next = 0
    for row in range(wptr.shape[0] - 1):
        i, j = wptr[row], wptr[row + 1]
        if i == j:
            continue
        o, at = _row_in(packed, r_next, row, nwk, o)
        for k in range(K):
            q[k] = (nwk[at, k] + beta) * inv[k]
        prev_d = -1
        prev_k = 0
        tot = 0.0
        for t in range(i, j):
            d = docs[t]
            old = z[t]
            ndk[d, old] -= 1
            nwk[at, old] -= 1
            nk[old] -= 1
            inv[old] = 1.0 / (nk[old] + vbeta)
            q[old] = (nwk[at, old] + beta) * inv[old]
            if d == prev_d:
                # the word again in the same document: p differs from the previous
                # token's only at the topic that token took and the one this token left
                v = (ndk[d, prev_k] + alpha) * q[prev_k]
                tot += v - p[prev_k]
                p[prev_k] = v
                if old != prev_k:
                    v = (ndk[d, old] + alpha) * q[old]
                    tot += v - p[old]
                    p[old] = v
            else:
                tot = _dense_terms(ndk, d, q, p, alpha)
            s, u = _next(s)
            u *= tot
            k = 0
            acc = 0.0
            while k + 8 <= K:
                c = _sum8(p, k)
                if acc + c > u:
                    break
                acc += c
                k += 8
            while k < K - 1:
                acc += p[k]
                if acc > u:
                    break
                k += 1
            ndk[d, k] += 1
            nwk[at, k] += 1
            nk[k] += 1
            inv[k] = 1.0 / (nk[k] + vbeta)
            q[k] = (nwk[at, k] + beta) * inv[k]
            z[t] = k
            prev_d = d
            prev_k = k
        if packed is not None:
            o = _pk_emit(packed, row, z, i, j, nwk, o)
            r_next = row + 1
    return _pk_rest(packed, r_next, o)


@njit(**_opts)
def doc_table(lengths, z, ndk):
    """The dense doc-topic table from the tokens' topics, the tokens in document order."""
    a = 0
    for d in range(lengths.shape[0]):
        for t in range(a, a + lengths[d]):
            ndk[d, z[t]] += 1
        a += lengths[d]


@njit(**_opts)
def doc_lists(lengths, z, dmeta, dlist, K):
    """The compact (topic, count) lists of every document from its tokens' topics, the
    tokens in document order; document d's list has min(length, K) slots (it never
    holds more topics), after document d - 1's."""
    # slot of topic k in the list of the last document that had it: seen[k] >= start
    # only if it is in the current document's list
    seen = np.full(K, -1, np.int64)
    a = t0 = 0
    for d in range(lengths.shape[0]):
        dmeta[d, 0] = a
        dmeta[d, 1] = 0
        for t in range(t0, t0 + lengths[d]):
            k = z[t]
            if seen[k] < a:
                seen[k] = a + dmeta[d, 1]
                dlist[seen[k], 0] = k
                dlist[seen[k], 1] = 0
                dmeta[d, 1] += 1
            dlist[seen[k], 1] += 1
        t0 += lengths[d]
        a += min(lengths[d], K)


def pack_lists(dmeta, dlist):
    """The documents' (topic, count) lists as a packed table (see pack; each row's
    topics in list order): what a worker sends of its documents' counts."""
    indptr = np.zeros(dmeta.shape[0] + 1, np.int64)
    np.cumsum(dmeta[:, 1], out=indptr[1:])
    idx = np.empty(indptr[-1], dlist.dtype)
    cnt = np.empty(indptr[-1], np.int32)
    _pack_lists(dmeta, dlist, idx, cnt)
    return indptr, idx, cnt


@njit(**_opts)
def _pack_lists(dmeta, dlist, idx, cnt):
    n = 0
    for d in range(dmeta.shape[0]):
        a = dmeta[d, 0]
        for q in range(a, a + dmeta[d, 1]):
            idx[n] = dlist[q, 0]
            cnt[n] = dlist[q, 1]
            n += 1


@njit(**_opts)
def doc_topic_dense(dmeta, dlist, K):
    D = dmeta.shape[0]
    out = np.zeros((D, K), np.int32)
    for d in range(D):
        a = dmeta[d, 0]
        for q in range(a, a + dmeta[d, 1]):
            out[d, dlist[q, 0]] = dlist[q, 1]
    return out


@njit(**_opts)
def lgamma_table(prior, n):
    out = np.empty(n)
    for c in range(n):
        out[c] = math.lgamma(c + prior)
    return out


@njit(**_opts)
def sum_lgamma(counts, prior, table):
    """sum over the non-zero entries c of ``counts`` (1-D) of lgamma(c + prior) -
    lgamma(prior); ``table[c] = lgamma(c + prior)`` for small c (lgamma_table)."""
    base = math.lgamma(prior)
    n_tab = table.shape[0]
    s = 0.0
    for i in range(counts.shape[0]):
        c = counts[i]
        if c > 0:
            s += (table[c] if c < n_tab else math.lgamma(c + prior)) - base
    return s


def sum_lgamma_table(counts, prior, table):
    """:func:`sum_lgamma` of a large table without a branch on each count (groups of eight,
    zeros skipped a group at a time), in a fixed order."""
    if counts.dtype == np.uint16:
        nz, seen = _nonzero_sample(counts)
        if 8 * nz >= seen:  # 1/8 non-zero or more
            return _sum_table(counts, prior, table, False)
    return _sum_table(counts, prior, table, True)


@njit(**_opts)
def _nonzero_sample(counts):
    """(non-zero, seen) in 16 runs of 64 counts spread over the array."""
    n = counts.shape[0]
    nz = seen = 0
    for b in range(16):
        a = (n * b) // 16
        e = min(a + 64, n)
        seen += e - a
        for i in range(a, e):
            nz += counts[i] != 0
    return nz, seen


@njit(**_opts)
def _sum_table(counts, prior, table, groups):
    n_tab = table.shape[0]
    top = n_tab - 1
    base = math.lgamma(prior)
    shifted = np.empty(n_tab)  # table[c] - lgamma(prior): 0.0 exactly at c = 0
    for c in range(n_tab):
        shifted[c] = table[c] - base
    if groups:
        s, above = _sum_groups(counts, shifted, top)
    else:
        s, above = _sum_shifted(counts, shifted, top, 0, counts.shape[0])
    if above:  # (rare) counts beyond the table
        for i in range(counts.shape[0]):
            c = counts[i]
            if c > top:
                s += (math.lgamma(c + prior) - base) - shifted[top]
    return s


@njit(**_fast)
def _sum_shifted(counts, shifted, top, a, e):
    # every entry from a to e added, no branch, in lanes (negative counts, which never
    # occur, add 0); and how many are beyond the table
    s = 0.0
    above = 0
    for i in range(a, e):
        c = counts[i]
        s += shifted[min(max(c, 0), top)]
        above += c > top
    return s, above


@njit(**_fast)
def _sum_groups(counts, shifted, top):
    # a group's OR is at least its largest count: above the table only if it is
    n = counts.shape[0]
    s = 0.0
    above = False
    i = 0
    while i + 8 <= n:
        g = 0
        for j in range(i, i + 8):
            g |= counts[j]
        if g != 0:
            above |= g > top
            for j in range(i, i + 8):
                s += shifted[min(max(counts[j], 0), top)]
        i += 8
    t, b = _sum_shifted(counts, shifted, top, i, n)
    return s + t, above or b > 0


@njit(**_opts)
def sum_lgamma_shifted(counts, shift):
    """sum_i lgamma(counts[i] + shift)."""
    s = 0.0
    for i in range(counts.shape[0]):
        s += math.lgamma(counts[i] + shift)
    return s


@njit(**_opts)
def sum_lgamma_lists(dmeta, dlist, prior, table):
    """sum_lgamma over the counts of every document's compact list."""
    s = 0.0
    for d in range(dmeta.shape[0]):
        a = dmeta[d, 0]
        s += sum_lgamma(dlist[a:a + dmeta[d, 1], 1], prior, table)
    return s


# ---------------------------------------------------------------------------- transport
# Word-topic tables travel packed: per row, the topics with a non-zero count and the
# counts (CSR): far smaller than the dense rows at large K.
def topic_dtype(n_topics):
    """The narrowest type of topics 0 .. n_topics - 1 (the tokens' topics, packed
    tables' topics)."""
    return np.uint16 if n_topics <= 65536 else np.int32


def pack(table):
    """(indptr, topics, counts) of the non-zero entries of a rows x K table."""
    rows, n_topics = table.shape
    nnz = np.count_nonzero(table)
    idx = np.empty(nnz, topic_dtype(n_topics))
    cnt = np.empty(nnz, np.int32)
    indptr = np.empty(rows + 1, np.int64)
    _pack(table, indptr, idx, cnt)
    return indptr, idx, cnt


@njit(**_opts)
def _pack(table, indptr, idx, cnt):
    n = 0
    indptr[0] = 0
    for r in range(table.shape[0]):
        for k in range(table.shape[1]):
            c = table[r, k]
            if c != 0:
                idx[n] = k
                cnt[n] = c
                n += 1
        indptr[r + 1] = n


@njit(**_opts)
def add_packed(indptr, idx, cnt, out):
    """out += the packed table."""
    for r in range(indptr.shape[0] - 1):
        for q in range(indptr[r], indptr[r + 1]):
            out[r, idx[q]] += cnt[q]


def sum_packed(parts, n_topics):
    """The sum of packed tables of the same rows, packed as :func:`pack` packs the dense
    sum, with no dense table (rows x K) made."""
    first = parts[0]  # (not merged with an empty table: that copied it)
    acc = (first[0], first[1].astype(topic_dtype(n_topics), copy=False), first[2])
    for part in parts[1:]:  # (in order: the same bits whatever the order)
        cap = acc[1].shape[0] + part[1].shape[0]
        out = (np.empty_like(acc[0]), np.empty(cap, acc[1].dtype), np.empty(cap, np.int32))
        acc = _merge_packed(*acc, *part, *out)
    return acc


@njit(**_opts)
def _merge_packed(ap, ai, ac, bp, bi, bc, out_ptr, out_idx, out_cnt):
    """Row by row, two rows' (topic, count) pairs, topics in order, merged and added."""
    o = 0
    out_ptr[0] = 0
    for r in range(ap.shape[0] - 1):
        p, q, pe, qe = ap[r], bp[r], ap[r + 1], bp[r + 1]
        while p < pe or q < qe:
            if q == qe or (p < pe and ai[p] < bi[q]):
                out_idx[o], out_cnt[o] = ai[p], ac[p]
                p += 1
            elif p == pe or bi[q] < ai[p]:
                out_idx[o], out_cnt[o] = bi[q], bc[q]
                q += 1
            else:
                out_idx[o], out_cnt[o] = ai[p], ac[p] + bc[q]
                p += 1
                q += 1
            o += 1
        out_ptr[r + 1] = o
    return out_ptr, out_idx[:o], out_cnt[:o]


def unpack(packed, out):
    out[:] = 0
    add_packed(*packed, out)
    return out


# ---------------------------------------------------------------------------- set-up
@njit(**_opts)
def initial_topics(lengths, d0, key, n_topics, z):
    """The initial topics of documents d0, d0 + 1, ... (``lengths`` tokens each):
    uniform, from a stream of document d0 + i's own (splitmix64 from ``key`` and the
    document's index), so they do not depend on which worker holds the document."""
    t = 0
    for i in range(lengths.shape[0]):
        s = np.uint64(key) + np.uint64(d0 + i) * _M1
        s, _ = _next(s)
        for j in range(lengths[i]):
            s, u = _next(s)
            k = int(u * n_topics)
            z[t] = k if k < n_topics else n_topics - 1
            t += 1


@njit(**_opts)
def initial_topics_at(lengths, d0, docs, key, n_topics, out):
    """:func:`initial_topics` of the tokens in another order, ``docs`` their documents
    (0-based from d0; a document's tokens in their order within it): each drawn where
    it goes (splitmix64's state of a document's j-th token is its j-th step from the
    start), without the tokens' topics in document order to gather from."""
    seen = np.zeros(lengths.shape[0], np.uint64)
    for t in range(docs.shape[0]):
        d = docs[t]
        _, u = _next(np.uint64(key) + np.uint64(d0 + d) * _M1 + (seen[d] + _U1) * _GOLDEN)
        seen[d] += _U1
        k = int(u * n_topics)
        out[t] = k if k < n_topics else n_topics - 1


@njit(**_opts)
def pack_tokens(wptr, z, n_topics):
    """The word-topic counts of tokens sorted by word (row r's: ``z[wptr[r]:wptr[r +
    1]]``), packed as :func:`pack` packs a table (topics in order within a row)."""
    n_rows = wptr.shape[0] - 1
    n = wptr[n_rows] - wptr[0]
    scratch = np.zeros(n_topics, np.int32)
    touched = np.empty(min(n_topics, n + 1), np.int64)
    indptr = np.zeros(n_rows + 1, np.int64)
    idx = np.empty(n, z.dtype)  # (the topics' type: 2 bytes a pair while K <= 65,536)
    cnt = np.empty(n, np.int32)
    q = 0
    for r in range(n_rows):
        nt = 0
        if wptr[r + 1] - wptr[r] >= n_topics:  # a long row: its counts, read in order
            for t in range(wptr[r], wptr[r + 1]):
                scratch[z[t]] += 1
            for k in range(n_topics):
                if scratch[k]:
                    idx[q] = k
                    cnt[q] = scratch[k]
                    scratch[k] = 0
                    q += 1
            indptr[r + 1] = q
            continue
        for t in range(wptr[r], wptr[r + 1]):
            k = z[t]
            if scratch[k] == 0:
                touched[nt] = k
                nt += 1
            scratch[k] += 1
        tt = touched[:nt]
        tt.sort()  # (in place: no array a row)
        for j in range(nt):
            k = tt[j]
            idx[q] = k
            cnt[q] = scratch[k]
            scratch[k] = 0
            q += 1
        indptr[r + 1] = q
    return indptr, idx[:q], cnt[:q]  # (views: the pages beyond q were never touched)
