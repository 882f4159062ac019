"""Kernels the generalised linear models share: free numba functions over plain arrays,
compiled once and cached on disk.

Worker side: partial inner products x_j' v over the worker's rows, the block's Gram
matrix X_B' X_B (the dependency filter's, and the Lasso's exact block solve), the Gram
matrices of priority's groups. Scheduler side: the coordinate and group steps of a
round and every coordinate's priority after a full round, a sum tree for priority
sampling, the greedy correlation filter that forms the groups, and coordinate descent
on a block's quadratic subproblem from its dense Gram matrix. Sparse matrices are
CSC triplets (indptr, indices, data) with sorted indices; dense ones Fortran-ordered 2-D
arrays, so a column is contiguous.

A datafit's steps are those of a quadratic model per coordinate: for the Lasso the
model is exact (h_j = |x_j|^2, q_j = x_j' r), for the logistic loss it is Newton's
(h_j the diagonal Hessian, q_j the negative gradient), both summed over the rows (not
divided by n), with thresh = n lambda.
"""
import numpy as np
from numba import njit

_opts = dict(cache=True, nogil=True, fastmath=False)
# Dense dot products may reorder their sums so that they vectorise: the order is fixed by
# the compiled loop, not by where the arrays sit, so results stay reproducible.
_dense = dict(cache=True, nogil=True, fastmath={"reassoc", "nsz"})


# The sparse loops index with unsigned integers: numba checks every signed index for
# wrap-around (a[-1]), and in these gathers that branch cost a quarter of the time.
_u = np.uint64


@njit(**_opts)
def grad_sparse(indptr, indices, data, r, cols, out):
    # out[k] = X[:, cols[k]] @ r, in four lanes (entry a + 4i + l in lane l, added
    # (0 + 1) + (2 + 3)): four chains of additions in flight instead of one
    for k in range(cols.shape[0]):
        j = _u(cols[k])
        q = _u(indptr[j])
        end = _u(indptr[j + _u(1)])
        s0 = s1 = s2 = s3 = 0.0
        while q + _u(4) <= end:
            s0 += data[q] * r[_u(indices[q])]
            s1 += data[q + _u(1)] * r[_u(indices[q + _u(1)])]
            s2 += data[q + _u(2)] * r[_u(indices[q + _u(2)])]
            s3 += data[q + _u(3)] * r[_u(indices[q + _u(3)])]
            q += _u(4)
        if q < end:
            s0 += data[q] * r[_u(indices[q])]
        if q + _u(1) < end:
            s1 += data[q + _u(1)] * r[_u(indices[q + _u(1)])]
        if q + _u(2) < end:
            s2 += data[q + _u(2)] * r[_u(indices[q + _u(2)])]
        out[k] = (s0 + s1) + (s2 + s3)


@njit(**_dense)
def grad_dense(X, r, cols, out):
    n = X.shape[0]
    for k in range(cols.shape[0]):
        j = cols[k]
        s = 0.0
        for i in range(n):
            s += X[i, j] * r[i]
        out[k] = s


# -- coordinate steps and priorities --------------------------------------------------------
@njit(**_opts)
def soft(z, h, thresh):
    # argmin_b h/2 b^2 - z b + thresh |b|: soft-thresholding
    if z > thresh:
        return (z - thresh) / h
    if z < -thresh:
        return (z + thresh) / h
    return 0.0


@njit(**_opts)
def coordinate_steps(w, cols, q, h, thresh, step, delta):
    """One step per coordinate of the block, all from the same point (Jacobi):
    w_j <- w_j + step (S(q_k + h_k w_j, thresh) / h_k - w_j), j = cols[k], taken with
    relaxation ``step`` in (0, 1] (1: the model's minimiser; less damps the interaction
    of parallel or stale updates without moving the fixed point). ``delta`` gets the
    changes; returns the l1 change."""
    d_l1 = 0.0
    for k in range(cols.shape[0]):
        j = cols[k]
        old = w[j]
        hk = h[k]
        if hk <= 0.0:
            delta[k] = 0.0
            continue
        new = soft(q[k] + hk * old, hk, thresh)
        new = old + step * (new - old)
        delta[k] = new - old
        w[j] = new
        d_l1 += abs(new) - abs(old)
    return d_l1


@njit(**_opts)
def priorities(w, q, h, thresh, prio):
    """After a full round: each coordinate's priority h_j d_j^2, d_j its step to the
    model's minimiser."""
    for j in range(w.shape[0]):
        hj = h[j]
        if hj <= 0.0:
            prio[j] = 0.0
            continue
        d = soft(q[j] + hj * w[j], hj, thresh) - w[j]
        prio[j] = hj * d * d


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
def _descend(tree, x, size):
    """The leaf node whose cumulative interval holds x."""
    i = 1
    while i < size:
        left = tree[2 * i]
        if x < left:
            i = 2 * i
        else:
            x -= left
            i = 2 * i + 1
    return i


@njit(**_opts)
def tree_sample_distinct(tree, u, out, seen):
    """Distinct draws: ``out[:m]`` are distinct leaves drawn by priority; returns m. A
    leaf heavy enough to be drawn again (over 1/len(u) of the remaining mass) is taken
    out of the tree once drawn; a light one drawn twice costs only that draw. ``seen``
    (all False) is scratch; it and the tree are left as they were found."""
    size = tree.shape[0] // 2
    depth = 1
    while (1 << (depth - 1)) < size:
        depth += 1
    # the nodes a removal changed, with their values before, undone in reverse order;
    # ancestors are re-summed from their children (as tree_set), so no small leaf is lost
    node = np.empty(u.shape[0] * depth, dtype=np.int64)
    old = np.empty(u.shape[0] * depth)
    n_saved = 0
    m = 0
    n = u.shape[0]
    for k in range(n):
        total = tree[1]
        if total <= 0.0:
            break
        i = _descend(tree, u[k] * total, size)
        w = tree[i]
        leaf = i - size
        if w <= 0.0 or seen[leaf]:  # rounding past the last leaf; a light repeat
            continue
        seen[leaf] = True
        out[m] = leaf
        m += 1
        if w * n > total:
            node[n_saved] = i
            old[n_saved] = w
            n_saved += 1
            tree[i] = 0.0
            i //= 2
            while i >= 1:
                node[n_saved] = i
                old[n_saved] = tree[i]
                n_saved += 1
                tree[i] = tree[2 * i] + tree[2 * i + 1]
                i //= 2
    for t in range(n_saved - 1, -1, -1):
        tree[node[t]] = old[t]
    for t in range(m):
        seen[out[t]] = False
    return m


@njit(**_opts)
def priority_candidates(tree, u, n_cand, n_prio, p, seen, cand):
    """A priority round's ``n_cand`` candidates into ``cand``, from the uniforms ``u``
    (at least n_prio + n_cand of them): first up to ``n_prio`` distinct draws by priority
    (:func:`tree_sample_distinct`, in the order drawn; none if every priority is 0),
    then uniform draws over 0..p-1 for the rest. Returns the number of uniforms used."""
    m = 0
    used = 0
    if n_prio > 0 and tree[1] > 0.0:
        m = tree_sample_distinct(tree, u[:n_prio], cand, seen)
        used = n_prio
    for t in range(m, n_cand):
        j = np.int64(u[used] * p)
        cand[t] = j if j < p else p - 1
        used += 1
    return used


# -- dependency filter ------------------------------------------------------------------
# A candidate whose |correlation| exceeds rho with kept coordinates of ONE group only
# joins that group (up to GROUP_CAP members): a group is solved exactly, so dependent
# coordinates move together; groups are mutually |corr| <= rho and step in parallel.
# One that conflicts with two groups (or a full one) is rejected.
GROUP_CAP = 16


@njit(**_opts)
def _conflict(first, g):
    """The conflicts' group so far (-1: none yet, -2: two or more) after one with ``g``."""
    if first == -1 or first == g:
        return g
    return -2


@njit(**_opts)
def _admit(first, size, m, n_groups, group, cap):
    """Place candidate ``m`` given its conflicts' group ``first`` (as :func:`_conflict`):
    a new group, the one it conflicts with, or none (False); returns (ok, n_groups)."""
    if first == -2 or (first >= 0 and size[first] >= cap):
        return False, n_groups
    if first == -1:
        first = n_groups
        n_groups += 1
    group[m] = first
    size[first] += 1
    return True, n_groups


@njit(**_opts)
def select_sparse(indptr, indices, data, norms, cand, rho, max_block, taken, head, cap):
    """Greedy, in candidate order: a candidate with no |corr| > rho to a kept one starts a
    group; one whose conflicts are all in one group joins it (at most ``cap`` members);
    else it is rejected. Returns (kept, their groups numbered in order of creation).

    The kept columns are threaded through their rows (``head[i]``: the last entry in row
    i, -1 if none), so a candidate's inner products with all kept columns cost only the
    entries it shares rows with. Candidates already ``taken`` are skipped (the caller
    passes the coordinates of rounds in flight); the entries it sets, and ``head`` (all
    -1), are restored before it returns.
    """
    n_cand_nnz = 0
    for c in range(cand.shape[0]):
        n_cand_nnz += indptr[_u(cand[c]) + _u(1)] - indptr[_u(cand[c])]
    nxt = np.empty(n_cand_nnz, dtype=np.int64)
    owner = np.empty(n_cand_nnz, dtype=np.int64)
    val = np.empty(n_cand_nnz)
    acc = np.zeros(max_block)
    seen = np.empty(max_block, dtype=np.int64)
    chosen = np.empty(max_block, dtype=np.int64)
    group = np.empty(max_block, dtype=np.int64)
    size = np.zeros(max_block, dtype=np.int64)
    m = n_groups = used = rejected = 0
    for c in range(cand.shape[0]):
        if m == max_block:
            break
        j = _u(cand[c])
        if taken[j] or norms[j] == 0.0:
            continue
        first = -1
        if rho < 1.0:
            n_seen = 0
            for q in range(indptr[j], indptr[j + _u(1)]):
                uq = _u(q)
                e = head[_u(indices[uq])]
                while e != -1:
                    ue = _u(e)
                    k = owner[ue]
                    if acc[k] == 0.0:
                        seen[n_seen] = k
                        n_seen += 1
                    acc[k] += data[uq] * val[ue]
                    e = nxt[ue]
            for t in range(n_seen):
                k = seen[t]
                if abs(acc[k]) > rho * norms[j] * norms[chosen[k]]:
                    first = _conflict(first, group[k])
                acc[k] = 0.0
        ok, n_groups = _admit(first, size, m, n_groups, group, cap)
        if not ok:
            rejected += 1
            if rejected > m + 16:  # the block is about as full as the filter allows
                break
            continue
        for q in range(indptr[j], indptr[j + 1]):
            i = indices[q]
            nxt[used] = head[i]
            owner[used] = m
            val[used] = data[q]
            head[i] = used
            used += 1
        chosen[m] = j
        taken[j] = True
        m += 1
    for k in range(m):
        taken[chosen[k]] = False
        for q in range(indptr[chosen[k]], indptr[chosen[k] + 1]):
            head[indices[q]] = -1
    return chosen[:m], group[:m]


@njit(**_dense)
def select_dense(X, norms, cand, rho, max_block, taken, known, conf, cap):
    """As :func:`select_sparse`, with the inner products over dense columns; with a
    cache of its decisions when ``known`` has rows (else (0, 0) arrays: none). Bit k of
    row j of ``known`` ((p, W) uint64, W = ceil(p / 64)) says the pair (j, k) has been
    computed, the same bit of ``conf`` that |x_j' x_k| > rho |x_j| |x_k|. Only pairs
    never seen before cost an inner product over the rows, and each pair is computed
    once in a run (a pair met the other way round reuses the decision; computed again it
    would compare rho |x_k| |x_j| instead, which can differ only in the last bit). A
    candidate's checks stop at its second conflicting group."""
    n = X.shape[0]
    cached = known.shape[0] > 0
    chosen = np.empty(max_block, dtype=np.int64)
    group = np.empty(max_block, dtype=np.int64)
    size = np.zeros(max_block, dtype=np.int64)
    one = np.uint64(1)
    m = n_groups = rejected = 0
    for c in range(cand.shape[0]):
        if m == max_block:
            break
        j = cand[c]
        if taken[j] or norms[j] == 0.0:
            continue
        wj = j >> 6
        bj = one << np.uint64(j & 63)
        first = -1
        if rho < 1.0:
            lim = rho * norms[j]
            for t in range(m):
                k = chosen[t]
                wk = k >> 6
                bk = one << np.uint64(k & 63)
                if cached and known[j, wk] & bk:
                    hit = (conf[j, wk] & bk) != 0
                else:
                    s = 0.0
                    for i in range(n):
                        s += X[i, j] * X[i, k]
                    hit = abs(s) > lim * norms[k]
                    if cached:
                        known[j, wk] |= bk
                        known[k, wj] |= bj
                        if hit:
                            conf[j, wk] |= bk
                            conf[k, wj] |= bj
                if hit:
                    first = _conflict(first, group[t])
                    if first == -2:
                        break
        ok, n_groups = _admit(first, size, m, n_groups, group, cap)
        if not ok:
            rejected += 1
            if rejected > m + 16:  # the block is about as full as the filter allows
                break
            continue
        chosen[m] = j
        taken[j] = True
        m += 1
    for k in range(m):
        taken[chosen[k]] = False
    return chosen[:m], group[:m]


NO_CACHE = (np.zeros((0, 0), np.uint64), np.zeros((0, 0), np.uint64))


@njit(**_opts)
def select_gram(G, norms, rho, max_block, cap):
    """As :func:`select_dense`, from the strict lower triangle of the candidates' Gram
    matrix ``G`` (over every row) and their ``norms``: (the positions in the candidate
    list of those kept, their groups). The candidates are distinct and none is taken
    (the caller filtered them)."""
    chosen = np.empty(max_block, dtype=np.int64)
    group = np.empty(max_block, dtype=np.int64)
    size = np.zeros(max_block, dtype=np.int64)
    m = n_groups = rejected = 0
    for c in range(G.shape[0]):
        if m == max_block:
            break
        if norms[c] == 0.0:
            continue
        first = -1
        if rho < 1.0:
            for t in range(m):
                if abs(G[c, chosen[t]]) > rho * norms[c] * norms[chosen[t]]:
                    first = _conflict(first, group[t])
                    if first == -2:
                        break
        ok, n_groups = _admit(first, size, m, n_groups, group, cap)
        if not ok:
            rejected += 1
            if rejected > m + 16:  # the block is about as full as the filter allows
                break
            continue
        chosen[m] = c
        m += 1
    return chosen[:m], group[:m]


@njit(**_opts)
def group_order(chosen, group):
    """The kept coordinates with each group contiguous (groups by their smallest
    coordinate, members in increasing order): (cols, group boundaries ``gptr``), or
    ``gptr`` empty when every group has one member (a plain Jacobi round, sorted)."""
    m = chosen.shape[0]
    n_groups = 0
    for t in range(m):
        n_groups = max(n_groups, group[t] + 1)
    order = np.argsort(chosen)
    if n_groups == m:
        return chosen[order], np.empty(0, np.int64)
    rank = np.full(n_groups, -1, np.int64)  # groups numbered by their smallest member
    start = np.zeros(n_groups + 1, np.int64)
    r = 0
    for t in order:
        g = group[t]
        if rank[g] < 0:
            rank[g] = r
            r += 1
        start[rank[g] + 1] += 1
    for g in range(n_groups):
        start[g + 1] += start[g]
    fill = start[:-1].copy()
    cols = np.empty(m, np.int64)
    for t in order:  # increasing: members in order within their group
        g = rank[group[t]]
        cols[fill[g]] = chosen[t]
        fill[g] += 1
    return cols, start


# -- a round's groups: their Gram matrices (workers), their exact steps (scheduler) -------
@njit(**_opts)
def group_gram_sparse(indptr, indices, data, cols, gptr, wts):
    """The Gram matrices X_g' D X_g (D = diag(wts); ``wts`` empty: none) of the groups
    of more than one member (``cols[gptr[g]:gptr[g + 1]]``) over these rows, each k x k
    row-major, one after the other. Each entry merges the two columns' sorted rows."""
    weighted = wts.shape[0] > 0
    total = 0
    for g in range(gptr.shape[0] - 1):
        k = gptr[g + 1] - gptr[g]
        if k > 1:
            total += k * k
    out = np.empty(total)
    off = 0
    for g in range(gptr.shape[0] - 1):
        a0, k = gptr[g], gptr[g + 1] - gptr[g]
        if k < 2:
            continue
        for a in range(k):
            ja = cols[a0 + a]
            for b in range(a, k):
                jb = cols[a0 + b]
                s = 0.0
                p, q = indptr[ja], indptr[jb]
                pe, qe = indptr[ja + 1], indptr[jb + 1]
                while p < pe and q < qe:
                    ip, iq = indices[p], indices[q]
                    if ip == iq:
                        v = data[p] * data[q]
                        s += v * wts[ip] if weighted else v
                        p += 1
                        q += 1
                    elif ip < iq:
                        p += 1
                    else:
                        q += 1
                out[off + a * k + b] = s
                out[off + b * k + a] = s
        off += k * k
    return out


@njit(**_dense)
def group_gram_dense(X, cols, gptr, wts):
    """As :func:`group_gram_sparse`, for dense X."""
    weighted = wts.shape[0] > 0
    n = X.shape[0]
    total = 0
    for g in range(gptr.shape[0] - 1):
        k = gptr[g + 1] - gptr[g]
        if k > 1:
            total += k * k
    out = np.empty(total)
    off = 0
    for g in range(gptr.shape[0] - 1):
        a0, k = gptr[g], gptr[g + 1] - gptr[g]
        if k < 2:
            continue
        for a in range(k):
            ja = cols[a0 + a]
            for b in range(a, k):
                jb = cols[a0 + b]
                s = 0.0
                if weighted:
                    for i in range(n):
                        s += X[i, ja] * X[i, jb] * wts[i]
                else:
                    for i in range(n):
                        s += X[i, ja] * X[i, jb]
                out[off + a * k + b] = s
                out[off + b * k + a] = s
        off += k * k
    return out


@njit(**_opts)
def group_gram_lower(G, pos, gptr, sq_norms):
    """As :func:`group_gram_sparse`, from the strict lower triangle of a Gram matrix
    ``G`` already summed (the workers' filter: column ``cols[a]`` is row ``pos[a]`` of
    G) and the squared norms of ``cols`` for the diagonal."""
    total = 0
    for g in range(gptr.shape[0] - 1):
        k = gptr[g + 1] - gptr[g]
        if k > 1:
            total += k * k
    out = np.empty(total)
    off = 0
    for g in range(gptr.shape[0] - 1):
        a0, k = gptr[g], gptr[g + 1] - gptr[g]
        if k < 2:
            continue
        for a in range(k):
            out[off + a * k + a] = sq_norms[a0 + a]
            for b in range(a + 1, k):
                pa, pb = pos[a0 + a], pos[a0 + b]
                v = G[pa, pb] if pa > pb else G[pb, pa]
                out[off + a * k + b] = v
                out[off + b * k + a] = v
        off += k * k
    return out


@njit(**_opts)
def group_steps(w, cols, gptr, q, h, gram, thresh, step, delta, rtol, passes):
    """A round of groups (``gptr``; :func:`group_order`), all from the same point
    (Jacobi across groups): a group of one takes the coordinate step of
    :func:`coordinate_steps`, a larger one moves to the exact minimiser of its
    quadratic model 1/2 d'G_g d - q_g'd + thresh |w_g + d|_1 (G_g from ``gram``, as
    :func:`group_gram_sparse` lays it out), by :func:`cd_dense` to ``rtol`` of its
    first move in at most ``passes`` (GROUP_RTOL, GROUP_PASSES); both with relaxation
    ``step``. ``delta`` gets the changes; returns the l1 change."""
    d_l1 = 0.0
    off = 0
    for g in range(gptr.shape[0] - 1):
        a0, k = gptr[g], gptr[g + 1] - gptr[g]
        if k == 1:
            d_l1 += coordinate_steps(w, cols[a0:a0 + 1], q[a0:a0 + 1], h[a0:a0 + 1],
                                     thresh, step, delta[a0:a0 + 1])
            continue
        G = gram[off:off + k * k].reshape((k, k))
        off += k * k
        b0 = np.empty(k)
        for t in range(k):
            b0[t] = w[cols[a0 + t]]
        b = b0.copy()
        qq = q[a0:a0 + k].copy()
        worst = 0.0  # the largest first move, in the norm of its column
        for t in range(k):
            if G[t, t] > 0.0:
                d = soft(qq[t] + G[t, t] * b[t], G[t, t], thresh) - b[t]
                worst = max(worst, abs(d) * np.sqrt(G[t, t]))
        if worst > 0.0:
            c = gram_c(G, qq, b)
            hist = np.empty((6, k))
            state = np.zeros(1, dtype=np.int64)
            cd_dense(G, qq, b, c, thresh, rtol * worst, passes, hist, state, True)
        for t in range(k):
            j = cols[a0 + t]
            new = b0[t] + step * (b[t] - b0[t])
            delta[a0 + t] = new - b0[t]
            w[j] = new
            d_l1 += abs(new) - abs(b0[t])
    return d_l1


# a group's solve: to this share of its first move, in at most this many passes
GROUP_RTOL = 1e-6
GROUP_PASSES = 1000


# -- CSC matrices: row slices, column norms, the block's Gram --------------------------
@njit(**_opts)
def csc_rows(indptr, indices, data, start, stop):
    """The CSC triplet of X[start:stop] (row indices sorted within each column)."""
    p = indptr.shape[0] - 1
    lo = np.empty(p, dtype=np.int64)
    hi = np.empty(p, dtype=np.int64)
    out_ptr = np.zeros(p + 1, dtype=np.int64)
    for j in range(p):
        seg = indices[indptr[j]:indptr[j + 1]]
        lo[j] = indptr[j] + np.searchsorted(seg, start)
        hi[j] = indptr[j] + np.searchsorted(seg, stop)
        out_ptr[j + 1] = out_ptr[j] + hi[j] - lo[j]
    out_idx = np.empty(out_ptr[-1], dtype=indices.dtype)
    out_val = np.empty(out_ptr[-1])
    for j in range(p):
        out_idx[out_ptr[j]:out_ptr[j + 1]] = indices[lo[j]:hi[j]] - start
        out_val[out_ptr[j]:out_ptr[j + 1]] = data[lo[j]:hi[j]]
    return out_ptr, out_idx, out_val


@njit(**_opts)
def csc_sq_norms(indptr, data):
    out = np.empty(indptr.shape[0] - 1)
    for j in range(out.shape[0]):
        s = 0.0
        for q in range(indptr[j], indptr[j + 1]):
            s += data[q] * data[q]
        out[j] = s
    return out


@njit(**_opts)
def gram_sparse_rows(indptr, indices, data, cols, n_rows):
    """The block's entries regrouped by row, for :func:`gram_sparse_add`:
    ``(row_ptr, owner, val)``, row i's entries at row_ptr[i]:row_ptr[i+1], each with its
    position in ``cols`` and its value."""
    m = cols.shape[0]
    row_ptr = np.zeros(n_rows + 1, dtype=np.int64)
    for k in range(m):
        for q in range(indptr[cols[k]], indptr[cols[k] + 1]):
            row_ptr[indices[q] + 1] += 1
    for i in range(n_rows):
        row_ptr[i + 1] += row_ptr[i]
    fill = row_ptr[:-1].copy()
    owner = np.empty(row_ptr[-1], dtype=np.int64)
    val = np.empty(row_ptr[-1])
    for k in range(m):
        for q in range(indptr[cols[k]], indptr[cols[k] + 1]):
            i = indices[q]
            owner[fill[i]] = k
            val[fill[i]] = data[q]
            fill[i] += 1
    return row_ptr, owner, val


@njit(**_opts)
def gram_sparse_add(row_ptr, owner, val, G, start, stop, wts):
    """G += the outer products of rows start:stop (a piece of :func:`gram_sparse`), each
    times its weight in ``wts`` (empty: none; a weight 0 skips its row)."""
    weighted = wts.shape[0] > 0
    for i in range(start, stop):
        if weighted and wts[i] == 0.0:
            continue
        for a in range(row_ptr[i], row_ptr[i + 1]):
            ka, va = owner[a], wts[i] * val[a] if weighted else val[a]
            for b in range(row_ptr[i], row_ptr[i + 1]):
                G[ka, owner[b]] += va * val[b]


@njit(**_opts)
def gram_sparse(indptr, indices, data, cols, n_rows):
    """X[:, cols]' X[:, cols] for CSC X, row by row: the cost is the sum over rows of the
    square of the row's non-zeros within the block, far below a sparse product's."""
    row_ptr, owner, val = gram_sparse_rows(indptr, indices, data, cols, n_rows)
    G = np.zeros((cols.shape[0], cols.shape[0]))
    gram_sparse_add(row_ptr, owner, val, G, 0, n_rows, np.empty(0))
    return G


@njit(**_opts)
def gram_cols(indptr, indices, data, cols, row_ptr, owner, val, wts, start, stop, acc, mark,
              idx, vals, ptr, n_out):
    """Rows start:stop of the block's Gram matrix X_B' D X_B (D = diag(wts); ``wts``
    empty: none) as CSR, without the dense matrix: row a sums, over the rows of block
    column a, the block entries of that row (``row_ptr, owner, val`` from
    :func:`gram_sparse_rows`; G[a, b] and G[b, a]: the same terms in the same row order).
    Row a's column indices go to ``idx``, in the order first met, its values to
    ``vals``, from ``n_out`` on, and its end to ``ptr[a + 1]``; returns the new n_out.
    ``acc`` (m) is scratch, ``mark`` (m) all -1 on the first call."""
    weighted = wts.shape[0] > 0
    for a in range(start, stop):
        j = cols[a]
        begin = n_out
        for q in range(indptr[j], indptr[j + 1]):
            i = indices[q]
            v = data[q] * wts[i] if weighted else data[q]
            for e in range(row_ptr[i], row_ptr[i + 1]):
                b = owner[e]
                if mark[b] != a:
                    mark[b] = a
                    acc[b] = 0.0
                    idx[n_out] = b
                    n_out += 1
                acc[b] += v * val[e]
        for t in range(begin, n_out):
            vals[t] = acc[idx[t]]
        ptr[a + 1] = n_out
    return n_out


# -- coordinate descent on a block's quadratic subproblem ----------------------------------
@njit(**_opts)
def quad_dense(G, c, b, thresh):
    # 1/2 b'Gb - c'b + thresh |b|_1
    s = 0.0
    m = b.shape[0]
    for j in range(m):
        if b[j] != 0.0:
            t = 0.0
            for k in range(m):
                t += G[j, k] * b[k]
            s += b[j] * (0.5 * t - c[j]) + thresh * abs(b[j])
    return s


@njit(**_opts)
def gram_c(G, q, b):
    """c = q + G b: the linear term of the block subproblem, from q = X_B' r at b."""
    m = b.shape[0]
    c = q.copy()
    for j in range(m):
        if b[j] != 0.0:
            for k in range(m):
                c[k] += G[j, k] * b[j]
    return c


@njit(**_opts)
def anderson(hist, n_hist, b):
    """Keep the iterate ``b`` in ``hist`` ((K + 1, m)) at row ``n_hist``; once K + 1 are
    kept, their Anderson extrapolation (as skglm; empty if the linear system is
    degenerate). Returns (the next row, the extrapolation or an empty array)."""
    hist[n_hist] = b
    n_hist += 1
    if n_hist < hist.shape[0]:
        return n_hist, np.empty(0)
    K = hist.shape[0] - 1
    U = hist[1:] - hist[:-1]
    C = U @ U.T
    C += (1e-12 * np.trace(C) + 1e-300) * np.eye(K)
    z = np.linalg.solve(C, np.ones(K))
    if not np.all(np.isfinite(z)) or z.sum() == 0.0:
        return 0, np.empty(0)
    z /= z.sum()
    return 0, z @ hist[1:]


@njit(**_opts)
def cd_move(b, j, g, h, thresh):
    """Coordinate descent's move of b_j to the minimiser of its quadratic model (``g``:
    the negative gradient there, ``h`` the curvature, > 0) plus thresh |b_j|; returns
    the change."""
    old = b[j]
    new = soft(g + h * old, h, thresh)
    d = new - old
    if d != 0.0:
        b[j] = new
    return d


@njit(**_opts)
def cd_dense(G, q, b, c, thresh, tol, n_passes, hist, state, root):
    """Cyclic coordinate descent on the block subproblem
        min_b 1/2 b'Gb - c'b + thresh |b|_1,   c = q + G b0 (:func:`gram_c`),
    given q = c - G b at b = b0 on entry (kept equal to c - G b). Every 6 passes,
    Anderson extrapolation of the last iterates, kept only if it lowers the objective.
    Stops after a pass in which no coordinate moved by more than ``tol``: |d_j| G_jj^1/2
    with ``root`` (in the norm of its column), else |d_j| G_jj (its gradient). Resumable:
    ``hist`` ((6, m)) and ``state[0]`` (iterates in it) carry over between calls, so
    solving in pieces does the same arithmetic as in one call. Returns (passes done,
    converged)."""
    m = b.shape[0]
    n_hist = state[0]
    for it in range(n_passes):
        worst = 0.0
        for j in range(m):
            gjj = G[j, j]
            d = 0.0 if gjj <= 0.0 else cd_move(b, j, q[j], gjj, thresh)
            if d != 0.0:
                for k in range(m):  # q -= G[:, j] d, read along row j (G is symmetric)
                    q[k] -= G[j, k] * d
                worst = max(worst, abs(d) * (np.sqrt(gjj) if root else gjj))
        if worst <= tol:
            state[0] = n_hist
            return it + 1, True
        n_hist, acc = anderson(hist, n_hist, b)
        if acc.shape[0] and quad_dense(G, c, acc, thresh) < quad_dense(G, c, b, thresh):
            b[:] = acc
            q[:] = c - G @ b
    state[0] = n_hist
    return n_passes, False


@njit(**_opts)
def gram_cd(G, q, b, thresh, tol, max_passes, root=True):
    """:func:`cd_dense` in one call from b0 = ``b`` and q = X_B' r there; returns the
    passes."""
    c = gram_c(G, q, b)
    hist = np.empty((6, b.shape[0]))
    state = np.zeros(1, dtype=np.int64)
    passes, _ = cd_dense(G, q, b, c, thresh, tol, max_passes, hist, state, root)
    return passes
