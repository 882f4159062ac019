"""Fold-in of new documents against fitted topics (numba), for ``strads.estimators.LDA``:
collapsed Gibbs with the topics fixed, seeded per document (docs/apps/lda.md)."""
from concurrent.futures import ThreadPoolExecutor

import numpy as np
from numba import njit

from .kernels import _GOLDEN, _first_above as _draw, _mix64 as _mix, _next

_nb = dict(cache=True, nogil=True)


@njit(**_nb)
def fold_in(doc_ptr, words, phi, alpha, n_iter, seed):
    """Topic mixtures ``theta`` (D x K, rows sum to 1) of the documents
    ``words[doc_ptr[d]:doc_ptr[d + 1]]`` by collapsed Gibbs fold-in against ``phi`` (V x K),
    ``n_iter`` sweeps (the last half averaged), each document's stream seeded from
    ``seed`` and its words (a hash of the multiset: a document's mixture is the same
    wherever it is, in whatever batch, with its words in any order)."""
    D = doc_ptr.shape[0] - 1
    K = phi.shape[1]
    theta = np.empty((D, K))
    max_len = 0
    for d in range(D):
        max_len = max(max_len, doc_ptr[d + 1] - doc_ptr[d])
    z = np.empty(max_len, np.int64)
    ndk = np.zeros(K, np.int64)
    acc = np.zeros(K)
    cum = np.empty(K)
    burn = n_iter // 2
    base = _mix(np.uint64(seed) + _GOLDEN)
    for d in range(D):
        a, b = doc_ptr[d], doc_ptr[d + 1]
        n = b - a
        if n == 0:
            theta[d, :] = 1.0 / K
            continue
        h = np.uint64(n)
        for t in range(n):
            h += _mix(np.uint64(words[a + t]) * _GOLDEN + _GOLDEN)
        state = _mix(base ^ _mix(h))
        ndk[:] = 0
        acc[:] = 0.0
        for it in range(-1, n_iter):  # -1, the start: z ~ phi[w, :]
            for t in range(n):
                w = words[a + t]
                if it >= 0:
                    ndk[z[t]] -= 1
                s = 0.0
                for k in range(K):
                    s += phi[w, k] if it < 0 else (ndk[k] + alpha) * phi[w, k]
                    cum[k] = s
                state, u = _next(state)
                k = _draw(cum, K, u * s)
                z[t] = k
                ndk[k] += 1
            if it >= burn:
                for k in range(K):
                    acc[k] += ndk[k]
        samples = n_iter - burn
        norm = n + K * alpha
        for k in range(K):
            mean = acc[k] / samples if samples > 0 else np.float64(ndk[k])
            theta[d, k] = (mean + alpha) / norm
    return theta


@njit(**_nb)
def doc_loglik(indptr, indices, counts, theta, phi):
    """Per document, ``sum_w c_dw log(sum_k theta[d, k] phi[w, k])`` over a CSR
    documents x words count matrix ``(indptr, indices, counts)``."""
    D = indptr.shape[0] - 1
    K = phi.shape[1]
    out = np.zeros(D)
    for d in range(D):
        s = 0.0
        for j in range(indptr[d], indptr[d + 1]):
            w = indices[j]
            p = 0.0
            for k in range(K):
                p += theta[d, k] * phi[w, k]
            s += counts[j] * np.log(p)
        out[d] = s
    return out


def tokens(X):
    """``(doc_ptr, words)`` of a CSR count matrix with integer counts: each word id
    repeated by its count, documents in order."""
    counts = np.zeros(X.nnz + 1, np.int64)
    np.cumsum(X.data, out=counts[1:])
    doc_ptr = counts[X.indptr]  # token offsets of the documents
    words = np.repeat(X.indices.astype(np.int32), X.data.astype(np.int64))
    return doc_ptr, words


def fold_in_threads(doc_ptr, words, phi, alpha, n_iter, seed, n_threads=1):
    """:func:`fold_in` over contiguous ranges of documents balanced by tokens, each on a
    thread of its own (the kernel releases the GIL); the same result for any
    ``n_threads``."""
    D = doc_ptr.shape[0] - 1
    n_threads = max(1, min(int(n_threads), D))
    if n_threads == 1:
        return fold_in(doc_ptr, words, phi, alpha, n_iter, seed)
    cuts = np.searchsorted(doc_ptr, np.linspace(0, doc_ptr[-1], n_threads + 1)[1:-1])
    cuts = np.unique(np.concatenate([[0], cuts, [D]])).astype(np.int64)

    def part(i):
        d0, d1 = int(cuts[i]), int(cuts[i + 1])
        ptr = doc_ptr[d0:d1 + 1] - doc_ptr[d0]
        return fold_in(ptr, words[doc_ptr[d0]:doc_ptr[d1]], phi, alpha, n_iter, seed)

    with ThreadPoolExecutor(len(cuts) - 1) as pool:
        parts = list(pool.map(part, range(len(cuts) - 1)))
    return np.concatenate(parts, axis=0)
