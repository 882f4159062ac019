"""Lasso kernels: free numba functions over plain arrays, compiled once and cached on disk.

Worker side: partial inner products x_j' r over the worker's rows, and residual updates.
Scheduler side: a sum tree for priority sampling and the greedy correlation filter.
Sparse matrices are passed as CSC triplets (indptr, indices, data) with sorted indices;
dense ones as Fortran-ordered 2-D arrays, so a column is contiguous.
"""
import numpy as np
from numba import njit

_opts = dict(cache=True, nogil=True, fastmath=False)


@njit(**_opts)
def grad_sparse(indptr, indices, data, r, cols, out):
    # out[k] = X[:, cols[k]] @ r
    for k in range(cols.shape[0]):
        j = cols[k]
        s = 0.0
        for q in range(indptr[j], indptr[j + 1]):
            s += data[q] * r[indices[q]]
        out[k] = s


@njit(**_opts)
def grad_dense(X, r, cols, out):
    n = X.shape[0]
    for k in range(cols.shape[0]):
        j = cols[k]
        s = 0.0
        for i in range(n):
            s += X[i, j] * r[i]
        out[k] = s


@njit(**_opts)
def step_sparse(indptr, indices, data, r, cols, delta):
    # r -= X[:, cols] @ delta; returns the change of ||r||^2
    d_rss = 0.0
    for k in range(cols.shape[0]):
        j = cols[k]
        dk = delta[k]
        for q in range(indptr[j], indptr[j + 1]):
            i = indices[q]
            old = r[i]
            new = old - dk * data[q]
            r[i] = new
            d_rss += new * new - old * old
    return d_rss


@njit(**_opts)
def step_dense(X, r, cols, delta):
    n = X.shape[0]
    d_rss = 0.0
    for k in range(cols.shape[0]):
        j = cols[k]
        dk = delta[k]
        for i in range(n):
            old = r[i]
            new = old - dk * X[i, j]
            r[i] = new
            d_rss += new * new - old * old
    return d_rss


@njit(**_opts)
def soft_threshold_block(beta, cols, g, sq_norms, thresh, step, delta):
    """Coordinate minimisers for the block, each against the same residual, taken with
    relaxation ``step`` in (0, 1] (1: exact; less damps the interaction of parallel or
    stale updates without moving the fixed point).

    b_j <- b_j + step (S(x_j'r + |x_j|^2 b_j, n lambda) / |x_j|^2 - b_j); returns the
    l1 change.
    """
    d_l1 = 0.0
    for k in range(cols.shape[0]):
        j = cols[k]
        old = beta[j]
        nrm = sq_norms[j]
        if nrm == 0.0:
            delta[k] = 0.0
            continue
        z = g[k] + nrm * old
        if z > thresh:
            new = (z - thresh) / nrm
        elif z < -thresh:
            new = (z + thresh) / nrm
        else:
            new = 0.0
        new = old + step * (new - old)
        delta[k] = new - old
        beta[j] = new
        d_l1 += abs(new) - abs(old)
    return d_l1


@njit(**_opts)
def would_change(beta, g, sq_norms, thresh, out):
    """Priority of every coordinate after a full pass: |x_j|^2 (b_j' - b_j)^2, where b_j'
    is its coordinate minimiser against the current residual."""
    for j in range(beta.shape[0]):
        nrm = sq_norms[j]
        if nrm == 0.0:
            out[j] = 0.0
            continue
        z = g[j] + nrm * beta[j]
        if z > thresh:
            new = (z - thresh) / nrm
        elif z < -thresh:
            new = (z + thresh) / nrm
        else:
            new = 0.0
        d = new - beta[j]
        out[j] = nrm * d * d


# -- sum tree: priorities in the leaves, sampling and updates in O(log p) ------------------
@njit(**_opts)
def tree_build(prio):
    p = prio.shape[0]
    size = 1
    while size < p:
        size *= 2
    tree = np.zeros(2 * size)
    tree[size:size + p] = prio
    for i in range(size - 1, 0, -1):
        tree[i] = tree[2 * i] + tree[2 * i + 1]
    return tree


@njit(**_opts)
def tree_set(tree, idx, vals):
    size = tree.shape[0] // 2
    for k in range(idx.shape[0]):
        i = idx[k] + size
        tree[i] = vals[k]
        i //= 2
        while i >= 1:
            tree[i] = tree[2 * i] + tree[2 * i + 1]
            i //= 2


@njit(**_opts)
def tree_sample(tree, u, out):
    """out[k] = the leaf whose cumulative interval holds u[k] * total."""
    size = tree.shape[0] // 2
    total = tree[1]
    for k in range(u.shape[0]):
        x = u[k] * total
        i = 1
        while i < size:
            left = tree[2 * i]
            if x < left:
                i = 2 * i
            else:
                x -= left
                i = 2 * i + 1
        out[k] = i - size


# -- dependency filter ------------------------------------------------------------------
@njit(**_opts)
def _dot_sparse(indptr, indices, data, a, b):
    pa, ea = indptr[a], indptr[a + 1]
    pb, eb = indptr[b], indptr[b + 1]
    s = 0.0
    while pa < ea and pb < eb:
        ia, ib = indices[pa], indices[pb]
        if ia == ib:
            s += data[pa] * data[pb]
            pa += 1
            pb += 1
        elif ia < ib:
            pa += 1
        else:
            pb += 1
    return s


@njit(**_opts)
def select_sparse(indptr, indices, data, norms, cand, rho, max_block, taken):
    """Greedy: keep a candidate if |corr| with every kept one is <= rho.
    ``taken`` is scratch, all False on entry and on exit."""
    chosen = np.empty(max_block, dtype=np.int64)
    m = 0
    for c in range(cand.shape[0]):
        if m == max_block:
            break
        j = cand[c]
        if taken[j] or norms[j] == 0.0:
            continue
        ok = True
        if rho < 1.0:
            for k in range(m):
                jj = chosen[k]
                if abs(_dot_sparse(indptr, indices, data, j, jj)) > rho * norms[j] * norms[jj]:
                    ok = False
                    break
        if ok:
            chosen[m] = j
            taken[j] = True
            m += 1
    for k in range(m):
        taken[chosen[k]] = False
    return chosen[:m]


@njit(**_opts)
def select_dense(X, norms, cand, rho, max_block, taken):
    n = X.shape[0]
    chosen = np.empty(max_block, dtype=np.int64)
    m = 0
    for c in range(cand.shape[0]):
        if m == max_block:
            break
        j = cand[c]
        if taken[j] or norms[j] == 0.0:
            continue
        ok = True
        if rho < 1.0:
            for k in range(m):
                jj = chosen[k]
                s = 0.0
                for i in range(n):
                    s += X[i, j] * X[i, jj]
                if abs(s) > rho * norms[j] * norms[jj]:
                    ok = False
                    break
        if ok:
            chosen[m] = j
            taken[j] = True
            m += 1
    for k in range(m):
        taken[chosen[k]] = False
    return chosen[:m]
