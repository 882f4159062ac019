"""Lasso kernels: free numba functions over plain arrays, compiled once and cached on disk.

Worker side: partial inner products x_j' r over the worker's rows, and residual updates.
Scheduler side: a sum tree for priority sampling and the greedy correlation filter.
Sparse matrices are passed as CSC triplets (indptr, indices, data) with sorted indices;
dense ones as Fortran-ordered 2-D arrays, so a column is contiguous.
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


@njit(**_opts)
def step_sparse(indptr, indices, data, r, cols, delta):
    # r -= X[:, cols] @ delta; returns the change of ||r||^2
    d_rss = 0.0
    for k in range(cols.shape[0]):
        j = _u(cols[k])
        dk = delta[k]
        for q in range(indptr[j], indptr[j + _u(1)]):
            uq = _u(q)
            i = _u(indices[uq])
            old = r[i]
            new = old - dk * data[uq]
            r[i] = new
            d_rss += new * new - old * old
    return d_rss


@njit(**_dense)
def step_dense(X, r, cols, delta):
    # r -= X[:, cols] @ delta; returns the change of ||r||^2
    n = X.shape[0]
    before = 0.0
    for i in range(n):
        before += r[i] * r[i]
    for k in range(cols.shape[0]):
        j = cols[k]
        dk = delta[k]
        for i in range(n):
            r[i] -= dk * X[i, j]
    after = 0.0
    for i in range(n):
        after += r[i] * r[i]
    return after - before


@njit(**_opts)
def _minimiser(z, nrm, thresh):
    # argmin_b nrm/2 b^2 - z b + thresh |b|: soft-thresholding
    if z > thresh:
        return (z - thresh) / nrm
    if z < -thresh:
        return (z + thresh) / nrm
    return 0.0


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
        new = _minimiser(z, nrm, thresh)
        new = old + step * (new - old)
        delta[k] = new - old
        beta[j] = new
        d_l1 += abs(new) - abs(old)
    return d_l1


@njit(**_opts)
def full_pass(beta, g, sq_norms, norms, thresh, scale, radius, screened, prio):
    """After a full round, in one pass: each coordinate's priority |x_j|^2 (b_j' - b_j)^2,
    b_j' its minimiser against the current residual, and the Gap Safe rule: b*_j = 0 if
    |x_j' r| / scale + |x_j| radius < 1 (only coordinates now at zero are screened; their
    priority is 0)."""
    for j in range(beta.shape[0]):
        nrm = sq_norms[j]
        if beta[j] == 0.0 and (screened[j] or abs(g[j]) / scale + norms[j] * radius < 1.0):
            screened[j] = True
            prio[j] = 0.0
            continue
        if nrm == 0.0:
            prio[j] = 0.0
            continue
        z = g[j] + nrm * beta[j]
        new = _minimiser(z, nrm, thresh)
        d = new - beta[j]
        prio[j] = nrm * d * d


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


# -- dependency filter ------------------------------------------------------------------
@njit(**_opts)
def select_sparse(indptr, indices, data, norms, cand, rho, max_block, taken, head):
    """Greedy: keep a candidate if |corr| with every kept one is <= rho.

    The kept columns are threaded through their rows (``head[i]``: the last entry in row
    i, -1 if none), so a candidate's inner products with all kept columns cost only the
    entries it shares rows with. Candidates already ``taken`` are skipped (the caller
    passes the coordinates of rounds in flight); the entries it sets, and ``head`` (all
    -1), are restored before it returns.
    """
    cap = 0
    for c in range(cand.shape[0]):
        cap += indptr[_u(cand[c]) + _u(1)] - indptr[_u(cand[c])]
    nxt = np.empty(cap, dtype=np.int64)
    owner = np.empty(cap, dtype=np.int64)
    val = np.empty(cap)
    acc = np.zeros(max_block)
    seen = np.empty(max_block, dtype=np.int64)
    chosen = np.empty(max_block, dtype=np.int64)
    m = 0
    used = 0
    rejected = 0
    for c in range(cand.shape[0]):
        if m == max_block:
            break
        j = _u(cand[c])
        if taken[j] or norms[j] == 0.0:
            continue
        ok = True
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
                    ok = False
                acc[k] = 0.0
            if not ok:
                rejected += 1
                if rejected > m + 16:  # the block is about as full as the filter allows
                    break
        if ok:
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
    return chosen[:m]


@njit(**_dense)
def select_dense(X, norms, cand, rho, max_block, taken):
    """As :func:`select_sparse`, with the inner products over dense columns."""
    n = X.shape[0]
    chosen = np.empty(max_block, dtype=np.int64)
    m = 0
    rejected = 0
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
            if not ok:
                rejected += 1
                if rejected > m + 16:  # the block is about as full as the filter allows
                    break
        if ok:
            chosen[m] = j
            taken[j] = True
            m += 1
    for k in range(m):
        taken[chosen[k]] = False
    return chosen[:m]


@njit(**_opts)
def select_gram(G, norms, rho, max_block):
    """As :func:`select_dense`, from the candidates' Gram matrix ``G`` (over every row)
    and their ``norms``: the positions in the candidate list of those kept. The
    candidates are distinct and none is taken (the caller filtered them)."""
    chosen = np.empty(max_block, dtype=np.int64)
    m = 0
    rejected = 0
    for c in range(G.shape[0]):
        if m == max_block:
            break
        if norms[c] == 0.0:
            continue
        ok = True
        if rho < 1.0:
            for k in range(m):
                if abs(G[c, chosen[k]]) > rho * norms[c] * norms[chosen[k]]:
                    ok = False
                    break
            if not ok:
                rejected += 1
                if rejected > m + 16:  # the block is about as full as the filter allows
                    break
        if ok:
            chosen[m] = c
            m += 1
    return chosen[:m]


# -- a priority round: candidates and the dense filter's cache -----------------------------
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


@njit(**_dense)
def select_dense_cached(X, norms, cand, rho, max_block, taken, known, conf, kept):
    """:func:`select_dense` (the same greedy rule, the same kept set), with a cache of its
    decisions: bit k of row j of ``known`` ((p, W) uint64, W = ceil(p / 64)) says the
    pair (j, k) has been computed, the same bit of ``conf`` that |x_j' x_k| > rho |x_j|
    |x_k|. A candidate is checked against the kept ones with W word operations; only
    pairs never seen before cost an inner product over the rows, and each pair is
    computed once in a run (a pair met the other way round reuses the decision; the
    uncached filter would compare rho |x_k| |x_j| instead, which can differ only in the
    last bit). ``kept`` ((W,) uint64, all 0) is scratch, restored."""
    n = X.shape[0]
    W = kept.shape[0]
    chosen = np.empty(max_block, dtype=np.int64)
    one = np.uint64(1)
    m = 0
    rejected = 0
    for c in range(cand.shape[0]):
        if m == max_block:
            break
        j = cand[c]
        if taken[j] or norms[j] == 0.0:
            continue
        wj = j >> 6
        bj = one << np.uint64(j & 63)
        ok = True
        if rho < 1.0 and m > 0:
            unknown = np.uint64(0)
            for w in range(W):
                if conf[j, w] & kept[w]:
                    ok = False
                    break
                unknown |= kept[w] & ~known[j, w]
            if ok and unknown:
                lim = rho * norms[j]
                for t in range(m):
                    k = chosen[t]
                    wk = k >> 6
                    bk = one << np.uint64(k & 63)
                    if known[j, wk] & bk:
                        continue
                    s = 0.0
                    for i in range(n):
                        s += X[i, j] * X[i, k]
                    known[j, wk] |= bk
                    known[k, wj] |= bj
                    if abs(s) > lim * norms[k]:
                        conf[j, wk] |= bk
                        conf[k, wj] |= bj
                        ok = False
                        break
            if not ok:
                rejected += 1
                if rejected > m + 16:  # the block is about as full as the filter allows
                    break
        if ok:
            chosen[m] = j
            taken[j] = True
            kept[wj] |= bj
            m += 1
    for k in range(m):
        taken[chosen[k]] = False
        kept[chosen[k] >> 6] = np.uint64(0)
    return chosen[:m]


# -- exact block solves from the block's Gram matrix ---------------------------------------
@njit(**_opts)
def _gram_objective(G, c, b, thresh):
    # 1/2 b'Gb - c'b + thresh |b|_1
    s = 0.0
    for j in range(b.shape[0]):
        if b[j] != 0.0:
            t = 0.0
            for k in range(b.shape[0]):
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
def gram_cd_passes(G, q, b, c, thresh, tol, n_passes, hist, state):
    """Up to ``n_passes`` passes of :func:`gram_cd`, resumable: ``c`` (from
    :func:`gram_c` at the start), the Anderson history ``hist`` ((6, m)) and
    ``state[0]`` (iterates in it) carry over between calls, so solving in pieces does
    the same arithmetic as in one call. Returns (passes done, converged)."""
    m = b.shape[0]
    K = 5
    n_hist = state[0]
    for it in range(n_passes):
        worst = 0.0
        for j in range(m):
            gjj = G[j, j]
            if gjj == 0.0:
                continue
            old = b[j]
            z = q[j] + gjj * old
            new = _minimiser(z, gjj, thresh)
            d = new - old
            if d != 0.0:
                b[j] = new
                for k in range(m):  # q -= G[:, j] d, read along row j (G is symmetric)
                    q[k] -= G[j, k] * d
                worst = max(worst, abs(d) * np.sqrt(gjj))
        if worst <= tol:
            state[0] = n_hist
            return it + 1, True
        hist[n_hist] = b
        n_hist += 1
        if n_hist == K + 1:
            n_hist = 0
            U = hist[1:] - hist[:-1]
            C = U @ U.T
            C += (1e-12 * np.trace(C) + 1e-300) * np.eye(K)
            z = np.linalg.solve(C, np.ones(K))
            if np.all(np.isfinite(z)) and z.sum() != 0.0:
                z /= z.sum()
                acc = z @ hist[1:]
                if _gram_objective(G, c, acc, thresh) < _gram_objective(G, c, b, thresh):
                    b[:] = acc
                    q[:] = c - G @ b
    state[0] = n_hist
    return n_passes, False


@njit(**_opts)
def gram_cd(G, q, b, thresh, tol, max_passes):
    """Cyclic coordinate descent on the block subproblem
        min_b 1/2 b'Gb - c'b + thresh |b|_1,   c = q + G b0,
    given q = X_B' r at b0 (kept equal to X_B' r = c - G b at the current b) and b = b0
    on entry. Every 6 passes, Anderson extrapolation of the last iterates (as skglm),
    kept only if it lowers the objective. Stops after a pass in which no coordinate moved
    by more than ``tol`` in the norm of its column (|x_j| |d_j|). Returns passes.
    (In pieces, e.g. to look at the clock between them: :func:`gram_cd_passes`.)
    """
    c = gram_c(G, q, b)
    hist = np.empty((6, b.shape[0]))
    state = np.zeros(1, dtype=np.int64)
    passes, _ = gram_cd_passes(G, q, b, c, thresh, tol, max_passes, hist, state)
    return passes


# -- slicing CSC matrices without scipy's format round trips ------------------------------
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
def gram_sparse_add(row_ptr, owner, val, G, start, stop):
    """G += the outer products of rows start:stop (a piece of :func:`gram_sparse`)."""
    for i in range(start, stop):
        for a in range(row_ptr[i], row_ptr[i + 1]):
            ka, va = owner[a], val[a]
            for b in range(row_ptr[i], row_ptr[i + 1]):
                G[ka, owner[b]] += va * val[b]


@njit(**_opts)
def gram_sparse(indptr, indices, data, cols, n_rows):
    """X[:, cols]' X[:, cols] for CSC X, row by row: the cost is the sum over rows of the
    square of the row's non-zeros within the block, far below a sparse product's."""
    row_ptr, owner, val = gram_sparse_rows(indptr, indices, data, cols, n_rows)
    G = np.zeros((cols.shape[0], cols.shape[0]))
    gram_sparse_add(row_ptr, owner, val, G, 0, n_rows)
    return G


@njit(**_opts)
def gram_sparse_cols(indptr, indices, data, cols, row_ptr, owner, val, start, stop, acc,
                     mark, touched, out_idx, out_val, n_out):
    """The non-zeros of rows start:stop of the block's Gram matrix, without the dense
    matrix: for each block column a, its rows' block entries (``row_ptr, owner, val``
    from :func:`gram_sparse_rows`) are summed into ``acc`` (scratch of m, with ``mark``
    (m, all -1 on the first call) and ``touched`` (m)), then written as flat indices
    a * m + b and values from ``out_*[n_out]`` on. Returns the new n_out. Both triangles
    are written; G[a, b] and G[b, a] are the same sum in the same (row) order, so the
    matrix is exactly symmetric."""
    m = cols.shape[0]
    for a in range(start, stop):
        j = cols[a]
        n_t = 0
        for q in range(indptr[j], indptr[j + 1]):
            i = indices[q]
            v = data[q]
            for e in range(row_ptr[i], row_ptr[i + 1]):
                b = owner[e]
                if mark[b] != a:
                    mark[b] = a
                    acc[b] = 0.0
                    touched[n_t] = b
                    n_t += 1
                acc[b] += v * val[e]
        for t in range(n_t):
            b = touched[t]
            out_idx[n_out] = a * m + b
            out_val[n_out] = acc[b]
            n_out += 1
    return n_out


@njit(**_opts)
def gram_sparse_col_costs(indptr, indices, cols, row_len):
    """For each block column, the entries :func:`gram_sparse_cols` visits for it: the sum
    of ``row_len`` (block entries of each row) over its rows."""
    out = np.empty(cols.shape[0])
    for a in range(cols.shape[0]):
        s = 0.0
        for q in range(indptr[cols[a]], indptr[cols[a] + 1]):
            s += row_len[indices[q]]
        out[a] = s
    return out
