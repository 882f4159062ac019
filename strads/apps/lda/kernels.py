"""LDA kernels: free numba functions over plain arrays, compiled once and cached on disk.

The sampler is exact collapsed Gibbs. Tokens of one vocabulary slice are visited word by
word, and the conditional of a token of word w in document d is split as

    p(k) ~ (n_dk + alpha) q_k,   q_k = (n_wk + beta) / (n_k + V beta)
         = sum_{j in d, j != i} q_{z_j}   +   alpha q_k
           (document term)                   (smoothing term)

(F+LDA, Yu et al. 2015). The q_k of the current word live in the leaves of a sum tree
(F+tree): drawing from the smoothing term and changing one q_k cost O(log K). The
document term is walked over the non-zero n_dk of d, kept as a compact (topic, count)
list per document. A token therefore costs O(K_d + log K), K_d <= min(L_d, K) the
number of distinct topics in its document, and the tree O(K) per run of a word.
Memory is O(tokens + slice words x K); no dense documents x topics table is kept.

Random numbers: splitmix64 from a seed the caller derives from (seed, worker, round).
"""
import math

import numpy as np
from numba import njit

_opts = dict(cache=True, nogil=True)

_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_M1 = np.uint64(0xBF58476D1CE4E5B9)
_M2 = np.uint64(0x94D049BB133111EB)
_TO_UNIT = 1.0 / 9007199254740992.0  # 2^-53


@njit(**_opts)
def _next(s):
    s = s + _GOLDEN
    x = s
    x = (x ^ (x >> np.uint64(30))) * _M1
    x = (x ^ (x >> np.uint64(27))) * _M2
    x = x ^ (x >> np.uint64(31))
    return s, float(x >> np.uint64(11)) * _TO_UNIT


@njit(**_opts)
def _tree_set(tree, leaf, value):
    i = leaf
    d = value - tree[i]
    while i >= 1:
        tree[i] += d
        i >>= 1


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
    lo, hi = 0, n - 1
    while lo < hi:
        mid = (lo + hi) >> 1
        if cum[mid] > u:
            hi = mid
        else:
            lo = mid + 1
    return lo


@njit(**_opts)
def sample_block(words, pos, doc_of, doc_start, z, dtop, dcnt, dlen, nwk, v0, nk, alpha,
                 beta, vbeta, seed, tree, cum):
    """One Gibbs pass over the tokens ``pos`` (indices into the document-major ``z``),
    sorted by their words ``words``; ``nwk`` holds rows ``v0 ..`` of the word-topic
    counts. Document d's non-zero topic counts are the compact list
    ``dtop/dcnt[doc_start[d] : doc_start[d] + dlen[d]]`` (it never outgrows the
    document). Everything is updated in place; returns the number of topics that
    changed."""
    K = nk.shape[0]
    P = tree.shape[0] // 2
    s = seed
    n = words.shape[0]
    moved = 0
    i = 0
    while i < n:
        w = words[i]
        row = w - v0
        j = i
        while j < n and words[j] == w:
            j += 1
        for k in range(K):
            tree[P + k] = (nwk[row, k] + beta) / (nk[k] + vbeta)
        for k in range(K, P):
            tree[P + k] = 0.0
        for k in range(P - 1, 0, -1):
            tree[k] = tree[2 * k] + tree[2 * k + 1]
        for t in range(i, j):
            p = pos[t]
            d = doc_of[p]
            old = z[p]
            a = doc_start[d]
            m = dlen[d]
            # take the token out of its document's list ...
            q = a
            while dtop[q] != old:
                q += 1
            dcnt[q] -= 1
            if dcnt[q] == 0:
                m -= 1
                dtop[q] = dtop[a + m]
                dcnt[q] = dcnt[a + m]
            # ... and out of the word and topic counts
            nwk[row, old] -= 1
            nk[old] -= 1
            _tree_set(tree, P + old, (nwk[row, old] + beta) / (nk[old] + vbeta))
            # document term: sum_k n_dk q_k over the document's topics
            acc = 0.0
            for q in range(m):
                acc += dcnt[a + q] * tree[P + dtop[a + q]]
                cum[q] = acc
            s, u = _next(s)
            u = u * (acc + alpha * tree[1])
            if u < acc:
                q = a + _first_above(cum, m, u)
                new = dtop[q]
                dcnt[q] += 1
            else:
                new = _tree_draw(tree, (u - acc) / alpha, P, K)
                q = a
                while q < a + m and dtop[q] != new:
                    q += 1
                if q == a + m:
                    dtop[q] = new
                    dcnt[q] = 1
                    m += 1
                else:
                    dcnt[q] += 1
            dlen[d] = m
            z[p] = new
            moved += new != old
            nwk[row, new] += 1
            nk[new] += 1
            _tree_set(tree, P + new, (nwk[row, new] + beta) / (nk[new] + vbeta))
        i = j
    return moved


@njit(**_opts)
def doc_lists(doc_start, z, dtop, dcnt, dlen, K):
    """The compact (topic, count) lists of every document, from its tokens' topics."""
    seen = np.full(K, -1, np.int64)
    for d in range(doc_start.shape[0] - 1):
        a = doc_start[d]
        m = 0
        for p in range(a, doc_start[d + 1]):
            k = z[p]
            if seen[k] < a:
                seen[k] = a + m
                dtop[a + m] = k
                dcnt[a + m] = 0
                m += 1
            dcnt[seen[k]] += 1
        dlen[d] = m


@njit(**_opts)
def doc_topic_dense(doc_start, dtop, dcnt, dlen, K):
    D = doc_start.shape[0] - 1
    out = np.zeros((D, K), np.int32)
    for d in range(D):
        a = doc_start[d]
        for q in range(a, a + dlen[d]):
            out[d, dtop[q]] = dcnt[q]
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
    lgamma(prior)."""
    base = math.lgamma(prior)
    n_tab = table.shape[0]
    s = 0.0
    for i in range(counts.shape[0]):
        c = counts[i]
        if c > 0:
            s += (table[c] if c < n_tab else math.lgamma(c + prior)) - base
    return s


@njit(**_opts)
def sum_lgamma_lists(doc_start, dcnt, dlen, prior, table):
    """sum_lgamma over the counts of every document's compact list."""
    s = 0.0
    for d in range(doc_start.shape[0] - 1):
        a = doc_start[d]
        s += sum_lgamma(dcnt[a:a + dlen[d]], prior, table)
    return s
