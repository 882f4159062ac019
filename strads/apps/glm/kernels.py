"""Kernels the generalised linear models share (numba, cached on disk): partial inner
products and the block's Gram (or its factor) over a worker's rows; coordinate steps,
priorities, the priority sum tree and coordinate descent on a block's quadratic model on
the scheduler. Sparse matrices are CSC triplets (indptr, indices, data) with sorted
indices, dense ones Fortran-ordered. A coordinate's model: curvature h_j and negative
gradient q_j summed over the rows (not divided by n), thresh = n lambda.
"""
import numpy as np
from numba import njit

_opts = dict(cache=True, nogil=True, fastmath=False)
# Dense dot products may reorder their sums so that they vectorise: the order is fixed by
# the compiled loop, not by where the arrays sit, so results stay reproducible.
_dense = dict(cache=True, nogil=True, fastmath={"reassoc", "nsz"})
# A constant passed to another kernel is typed as a literal (0, -1, True), and so is a
# variable that starts from one: each compiles a specialisation of its own, seconds
# each (`strads compile`). np.int64(0), np.bool_(True) take the one that exists.


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
    """One step per coordinate, all from the same point (Jacobi): w_j <- w_j + step
    (S(q_k + h_k w_j, thresh) / h_k - w_j), j = cols[k] (``step`` < 1 damps parallel or
    stale updates, keeping the fixed point). ``delta`` gets the changes; returns the l1
    change."""
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
    """``out[:m]``: distinct leaves drawn by priority; returns m. A heavy leaf (over
    1/len(u) of the mass) leaves the tree once drawn, a light one drawn twice costs that
    draw. ``seen`` (all False) is scratch; it and the tree are left as found."""
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
    """``n_cand`` candidates into ``cand`` from the uniforms ``u``: up to ``n_prio``
    distinct draws by priority, then uniform ones over 0..p-1. Returns the uniforms
    used."""
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
    """The block's entries by row: ``(row_ptr, owner, val)``, row i's at
    row_ptr[i]:row_ptr[i+1], each with its position in ``cols`` and its value."""
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
def gram_sparse_add(row_ptr, owner, val, G, start, stop, wts, rank=None):
    """G += the outer products of rows start:stop (a piece of :func:`gram_sparse`), each
    times its weight in ``wts`` (empty: none; a weight 0 skips its row). With ``rank``,
    only the rows of G of the columns a with rank[a] >= 0, as G's row rank[a] (G: n_new
    x m): the same terms in the same order, at the cost of those columns' entries."""
    weighted = wts.shape[0] > 0
    for i in range(start, stop):
        if weighted and wts[i] == 0.0:
            continue
        for a in range(row_ptr[i], row_ptr[i + 1]):
            if rank is None:
                ka = owner[a]
            else:
                ka = rank[owner[a]]
                if ka < 0:
                    continue
            va = wts[i] * val[a] if weighted else val[a]
            for b in range(row_ptr[i], row_ptr[i + 1]):
                G[ka, owner[b]] += va * val[b]


@njit(**_opts)
def gram_sparse(indptr, indices, data, cols, n_rows):
    """X[:, cols]' X[:, cols] for CSC X, row by row: the cost is the sum over rows of the
    square of the row's non-zeros within the block, far below a sparse product's."""
    row_ptr, owner, val = gram_sparse_rows(indptr, indices, data, cols, n_rows)
    G = np.zeros((cols.shape[0], cols.shape[0]))
    gram_sparse_add(row_ptr, owner, val, G, np.int64(0), n_rows, np.empty(0))
    return G


@njit(**_opts)
def gram_cols(indptr, indices, data, cols, row_ptr, owner, val, wts, start, stop, acc, mark,
              idx, vals, ptr, n_out):
    """Rows start:stop of the block's Gram X_B' D X_B (D = diag(wts), ``wts`` empty:
    none) as CSR from :func:`gram_sparse_rows`' layout (G[a, b] and G[b, a]: the same
    terms in the same order): row a's indices (as first met) into ``idx``, values into
    ``vals`` from ``n_out`` on, its end into ``ptr[a + 1]``; returns the new n_out.
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
def gram_keep(old, pos, keep, G):
    """G[a, b] = old[pos[a], pos[b]] where ``keep[a]`` and ``keep[b]``: a kept Gram's
    entries in the next block's (numpy's boolean ``ix_`` costs 10x on this)."""
    for a in range(G.shape[0]):
        if keep[a] and not 0 <= pos[a] < min(old.shape[0], old.shape[1]):
            raise IndexError("a kept Gram's column is out of range")
    for a in range(G.shape[0]):
        if keep[a]:
            pa = pos[a]
            for b in range(G.shape[0]):
                if keep[b]:
                    G[a, b] = old[pa, pos[b]]


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
    """Keep ``b`` in ``hist`` ((K + 1, m)) at row ``n_hist``; once K + 1 are kept, their
    Anderson extrapolation (as skglm). Returns (the next row, it or an empty array)."""
    hist[n_hist] = b
    n_hist += 1
    if n_hist < hist.shape[0]:
        return n_hist, np.empty(0)
    U = hist[1:] - hist[:-1]
    z = anderson_weights(U @ U.T)
    if z.shape[0] == 0:
        return 0, np.empty(0)
    return 0, z @ hist[1:]


@njit(**_opts)
def anderson_weights(C):
    """Anderson's weights z (summing to 1) from C = U U' (U: the K differences of K + 1
    iterates), for z @ (the last K); empty if degenerate."""
    K = C.shape[0]
    C = C + (1e-12 * np.trace(C) + 1e-300) * np.eye(K)
    z = np.linalg.solve(C, np.ones(K))
    if not np.all(np.isfinite(z)) or z.sum() == 0.0:
        return np.empty(0)
    return z / z.sum()


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
    """Cyclic coordinate descent on min_b 1/2 b'Gb - c'b + thresh |b|_1 (c = q + G b0,
    :func:`gram_c`; q kept equal to c - G b), Anderson extrapolation every 6 passes
    (kept if it lowers the objective), until no coordinate moves by more than ``tol``
    (|d_j| G_jj^1/2 with ``root``, else |d_j| G_jj). Resumable: ``hist`` ((6, m)) and
    ``state[0]`` carry over between calls. Returns (passes done, converged)."""
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
        if acc.shape[0]:
            f_b = 0.0  # -1/2 b'(c + q) + thresh |b|_1 (Gb = c - q): no pass over G
            for j in range(m):
                f_b += b[j] * (thresh * np.sign(b[j]) - 0.5 * (c[j] + q[j]))
            if quad_dense(G, c, acc, thresh) < f_b:
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


# -- a block's Gram in factored form: F = D^1/2 X_B, stacked over the workers --------------
@njit(**_opts)
def block_counts(indptr, indices, cols, count):
    """(non-zeros of X_B, sum over rows of (block entries)^2): the sizes of the Gram as
    a factor and (a bound) as a matrix. ``count`` (n_rows, zeros) is scratch."""
    nnz = 0
    for k in range(cols.shape[0]):
        j = _u(cols[k])
        for q in range(indptr[j], indptr[j + _u(1)]):
            count[_u(indices[_u(q)])] += 1
            nnz += 1
    sq = 0
    for k in range(cols.shape[0]):
        j = _u(cols[k])
        for q in range(indptr[j], indptr[j + _u(1)]):
            i = _u(indices[_u(q)])
            c = count[i]
            if c:
                sq += c * c
                count[i] = 0
    return nnz, sq


@njit(**_opts)
def factor_cols(indptr, indices, data, cols, wts):
    """The block's Gram in factored form over this worker's rows: F = D^1/2 X_B as CSC
    ``(ptr, rows, vals)`` (G = F'F; ``wts`` empty: F = X_B)."""
    m = cols.shape[0]
    weighted = wts.shape[0] > 0
    ptr = np.zeros(m + 1, dtype=np.int64)
    for k in range(m):
        ptr[k + 1] = ptr[k] + indptr[cols[k] + 1] - indptr[cols[k]]
    rows = np.empty(ptr[m], dtype=np.int64)
    vals = np.empty(ptr[m])
    for k in range(m):
        j = _u(cols[k])
        e = ptr[k]
        for q in range(indptr[j], indptr[j + _u(1)]):
            uq = _u(q)
            i = indices[uq]
            rows[e] = i
            vals[e] = data[uq] * np.sqrt(wts[_u(i)]) if weighted else data[uq]
            e += 1
    return ptr, rows, vals


@njit(**_opts)
def factor_stack(ptrs, rows, vals, offsets):
    """The workers' factors stacked in worker order (worker w's rows shifted by
    offsets[w]; ``ptrs`` (W, m + 1) index the concatenated ``rows`` and ``vals``).
    Returns (ptr, rows, vals, column squared norms)."""
    W, m1 = ptrs.shape
    m = m1 - 1
    out_ptr = np.zeros(m + 1, dtype=np.int64)
    for k in range(m):
        c = 0
        for w in range(W):
            c += ptrs[w, k + 1] - ptrs[w, k]
        out_ptr[k + 1] = out_ptr[k] + c
    out_rows = np.empty(out_ptr[m], dtype=np.int64)
    out_vals = np.empty(out_ptr[m])
    h = np.zeros(m)
    for k in range(m):
        e = out_ptr[k]
        s = 0.0
        for w in range(W):
            for q in range(ptrs[w, k], ptrs[w, k + 1]):
                out_rows[e] = rows[q] + offsets[w]
                v = vals[q]
                out_vals[e] = v
                s += v * v
                e += 1
        h[k] = s
    return out_ptr, out_rows, out_vals, h



@njit(**_opts)
def _quad_factor(ptr, rows, vals, q, b0, b, thresh, u, mu, n):
    """1/2 ||F (b - b0)||^2 - n/2 (mu'(b - b0))^2 - q'(b - b0) + thresh |b|_1, with
    u = F (b - b0) filled in (``mu`` empty: no centring term)."""
    for i in range(u.shape[0]):
        u[i] = 0.0
    s = 0.0
    c = 0.0
    for j in range(b.shape[0]):
        d = b[j] - b0[j]
        s += thresh * abs(b[j]) - q[j] * d
        if d != 0.0:
            if mu.shape[0]:
                c += mu[j] * d
            for e in range(ptr[j], ptr[j + 1]):
                u[rows[e]] += vals[e] * d
    t = 0.0
    for i in range(u.shape[0]):
        t += u[i] * u[i]
    return s + 0.5 * t - 0.5 * n * c * c


@njit(**_opts)
def cd_factor(ptr, rows, vals, h, q, b, thresh, tol, n_passes, root, b0, u, hist, state,
              mu, n):
    """:func:`cd_dense` with G = F'F - n mu mu' (F CSC (n_rows, m); ``mu`` empty: F'F),
    ``h`` its diagonal, on min 1/2 d'Gd - q'd + thresh |b0 + d|_1 against u = F (b - b0)
    (a pass costs F's non-zeros, not m^2; ``q`` left as it is). Resumable: ``b0``, ``u``
    (zeros at the start), ``hist``, ``state``. Returns (passes done, converged)."""
    m = b.shape[0]
    centred = mu.shape[0] > 0
    u2 = np.empty(u.shape[0])
    c = 0.0  # mu'(b - b0)
    if centred:
        for j in range(m):
            c += mu[j] * (b[j] - b0[j])
    n_hist = state[0]
    for it in range(n_passes):
        worst = 0.0
        for j in range(m):
            hj = h[j]
            if hj <= 0.0:
                continue
            g = q[j]
            for e in range(ptr[j], ptr[j + 1]):
                g -= vals[e] * u[rows[e]]
            if centred:
                g += n * mu[j] * c
            d = cd_move(b, j, g, hj, thresh)
            if d != 0.0:
                for e in range(ptr[j], ptr[j + 1]):
                    u[rows[e]] += vals[e] * d
                if centred:
                    c += mu[j] * d
                worst = max(worst, abs(d) * (np.sqrt(hj) if root else hj))
        if worst <= tol:
            state[0] = n_hist
            return it + 1, True
        n_hist, acc = anderson(hist, n_hist, b)
        if acc.shape[0]:
            f_acc = _quad_factor(ptr, rows, vals, q, b0, acc, thresh, u2, mu, n)
            f_b = _quad_factor(ptr, rows, vals, q, b0, b, thresh, u, mu, n)
            if f_acc < f_b:
                b[:] = acc
                u[:] = u2
            c = 0.0
            if centred:
                for j in range(m):
                    c += mu[j] * (b[j] - b0[j])
    state[0] = n_hist
    return n_passes, False


def factor_cd(ptr, rows, vals, h, n_rows, q, b, thresh, tol, max_passes, root=True,
              mu=np.empty(0)):
    """:func:`cd_factor` in one call from b0 = ``b``; returns the passes."""
    passes, _ = cd_factor(ptr, rows, vals, h, q, b, thresh, tol, max_passes, root, b.copy(),
                          np.zeros(n_rows), np.empty((6, b.shape[0])),
                          np.zeros(1, dtype=np.int64), mu, 1.0)
    return passes
