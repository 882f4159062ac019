"""Priority's kernels (numba, cached on disk): the greedy correlation filter that forms a
round's groups of dependent coordinates, their Gram matrices and exact steps."""
import numpy as np
from numba import njit

from ..cholesky import solve_factored
from .kernels import (_dense, _opts, _u, cd_dense, coordinate_steps, gram_c,
                      gram_sparse_rows, soft)


# -- dependency filter ------------------------------------------------------------------
GROUP_CAP = 16  # a group's members, at most


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
def block_sparse(indptr, indices, data, norms, cand, rho, max_block, taken, head, cap,
                 limit, fixed, out):
    """A round's block from its candidates (sparse X), greedily in candidate order: one
    with no |corr| > rho to a kept one starts a group, one whose conflicts are all in
    one group joins it (at most ``cap``), any other is rejected; it stops once the
    multiply-adds pass ``limit`` times (the kept columns' non-zeros + ``fixed``). The kept
    columns are threaded through their rows (``head``, all -1, restored), so a check
    costs the entries a candidate shares rows with; ``taken`` candidates are skipped.
    Then :func:`_order_into`'s layout into ``out`` (2 max_block + 1 at least). Returns
    (m, the boundaries' count, the multiply-adds, the kept columns' non-zeros)."""
    chosen = np.empty(max_block, dtype=np.int64)
    group = np.empty(max_block, dtype=np.int64)
    n_cand_nnz = 0
    for c in range(cand.shape[0]):
        n_cand_nnz += indptr[_u(cand[c]) + _u(1)] - indptr[_u(cand[c])]
    nxt = np.empty(n_cand_nnz, dtype=np.int64)
    owner = np.empty(n_cand_nnz, dtype=np.int64)
    val = np.empty(n_cand_nnz)
    acc = np.zeros(max_block)
    seen = np.empty(max_block, dtype=np.int64)
    size = np.zeros(max_block, dtype=np.int64)
    work = nnz = used = rejected = 0
    m = n_groups = np.int64(0)  # (np.int64: glm.kernels' note on literals)
    for c in range(cand.shape[0]):
        if m == max_block:
            break
        j = _u(cand[c])
        if taken[j] or norms[j] == 0.0:
            continue
        first = np.int64(-1)
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
                    work += 1
                    e = nxt[ue]
            for t in range(n_seen):
                k = seen[t]
                if abs(acc[k]) > rho * norms[j] * norms[chosen[k]]:
                    first = _conflict(first, group[k])
                acc[k] = 0.0
        ok, n_groups = _admit(first, size, m, n_groups, group, cap)
        if not ok:
            rejected += 1
            if rejected > m + 16 or work > limit * (nnz + fixed):  # (as full as allowed)
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
        nnz += indptr[j + 1] - indptr[j]
        if work > limit * (nnz + fixed):
            break
    for k in range(m):
        taken[chosen[k]] = False
        for q in range(indptr[chosen[k]], indptr[chosen[k] + 1]):
            head[indices[q]] = -1
    return m, _order_into(chosen[:m], group[:m], out), work, nnz


@njit(**_dense)
def block_dense(X, norms, cand, rho, max_block, taken, known, conf, cap, limit, fixed, out,
                merge):
    """As :func:`block_sparse`, for dense X (:func:`_select_dense`); the last count is
    the kept columns' entries. With ``merge``, a candidate that conflicts with several
    groups joins them all, merged, if that group has at most ``cap`` members."""
    chosen = np.empty(max_block, dtype=np.int64)
    group = np.empty(max_block, dtype=np.int64)
    work = np.zeros(1, np.int64)
    m = _select_dense(X, norms, cand, rho, max_block, taken, known, conf, cap, work,
                      limit, fixed, chosen, group, merge)
    return m, _order_into(chosen[:m], group[:m], out), work[0], m * X.shape[0]


@njit(**_dense)
def _select_dense(X, norms, cand, rho, max_block, taken, known, conf, cap, work, limit,
                  fixed, chosen, group, merge):
    """As :func:`block_sparse`'s filter, over dense columns, with a cache of its decisions when
    ``known`` has rows: bit k of row j of ``known`` ((p, ceil(p / 64)) uint64) says the
    pair (j, k) was computed, of ``conf`` that |x_j' x_k| > rho |x_j| |x_k| (each pair
    computed once a run). A candidate's checks stop at its second conflicting group
    (``merge``: once its groups would hold more than ``cap``). ``work[0]`` counts the
    multiply-adds. Returns how many were kept."""
    n = X.shape[0]
    cached = known.shape[0] > 0
    size = np.zeros(max_block, dtype=np.int64)
    hits = np.empty(cap + 1, dtype=np.int64)  # the candidate's conflicting groups
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
        n_hit = 0
        total = 1
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
                    work[0] += n
                    hit = abs(s) > lim * norms[k]
                    if cached:
                        known[j, wk] |= bk
                        known[k, wj] |= bj
                        if hit:
                            conf[j, wk] |= bk
                            conf[k, wj] |= bj
                if hit:
                    g = group[t]
                    new = True
                    for a in range(n_hit):
                        if hits[a] == g:
                            new = False
                    if new:
                        total += size[g]
                        hits[n_hit] = g
                        n_hit += 1
                        if (total > cap) if merge else n_hit > 1:
                            break
        if total > cap or (n_hit > 1 and not merge):
            rejected += 1
            if rejected > m + 16 or work[0] > limit * (m * n + fixed):
                break
            continue
        if n_hit == 0:
            g0 = n_groups
            n_groups += 1
        else:
            g0 = hits[0]
            for a in range(1, n_hit):
                ga = hits[a]
                for t in range(m):
                    if group[t] == ga:
                        group[t] = g0
                size[g0] += size[ga]
                size[ga] = 0
        group[m] = g0
        size[g0] += 1
        chosen[m] = j
        taken[j] = True
        m += 1
        if work[0] > limit * (m * n + fixed):
            break
    for k in range(m):
        taken[chosen[k]] = False
    return m


NO_CACHE = (np.zeros((0, 0), np.uint64), np.zeros((0, 0), np.uint64))


def fill_cache(X, norms, rho, known, conf, G=None):
    """Every pair of :func:`_select_dense`'s cache at once, from X'X: dense X by BLAS, into
    ``G`` when given, else by blocks of FILL_BYTES of its lower triangle's rows; sparse X
    (``X`` (indptr, indices, data, n); ``G`` needed) its lower triangle row by row."""
    p = norms.shape[0]
    conf[:] = 0
    if isinstance(X, tuple):
        G[:] = 0.0
        _gram_lower_sparse(*gram_sparse_rows(*X[:3], np.arange(p), X[3]), G)
        _fill_bits(G, 0, norms, rho, conf)
    elif G is not None:
        G[:] = X.T @ X
        _fill_bits(G, 0, norms, rho, conf)
    else:
        step = max(1, FILL_BYTES // (8 * p))
        for a in range(0, p, step):
            b = min(a + step, p)
            _fill_bits(X[:, a:b].T @ X[:, :b], a, norms, rho, conf)
    known[:] = ~np.uint64(0)


@njit(**_opts)
def _gram_lower_sparse(row_ptr, owner, val, G):
    """G += X'X's lower triangle, row by row (:func:`kernels.gram_sparse_add`, half its
    work: a row's entries come in increasing column order)."""
    for i in range(row_ptr.shape[0] - 1):
        for a in range(row_ptr[i], row_ptr[i + 1]):
            ka, va = owner[a], val[a]
            for b in range(row_ptr[i], a + 1):
                G[ka, owner[b]] += va * val[b]


@njit(**_opts)
def _fill_bits(block, a, norms, rho, conf):
    """The decisions of the pairs (a + r, k), k < a + r, from ``block`` (rows a, a + 1,
    ... of X'X), into ``conf`` both ways round."""
    one = np.uint64(1)
    for r in range(block.shape[0]):
        j = a + r
        lim = rho * norms[j]
        bj = one << np.uint64(j & 63)
        for k in range(j):
            if abs(block[r, k]) > lim * norms[k]:
                conf[j, k >> 6] |= one << np.uint64(k & 63)
                conf[k, j >> 6] |= bj


FILL_BYTES = 8 << 20  # a block of X'X's rows in fill_cache (without G)


@njit(**_opts)
def select_gram(G, idx, cand, norms, rho, max_block, cap):
    """As :func:`_select_dense`, the candidates ``cand`` (distinct, none taken: the
    caller filtered them) from the strict lower triangle of their Gram matrix over
    every row (candidate c's row and column of ``G``: idx[c]; G may be a held Gram they
    index) and the columns' ``norms``: (the kept columns and group boundaries as
    :func:`_order_into` lays them out, gptr empty when every group has one member;
    the rows of those columns in G)."""
    chosen = np.empty(max_block, dtype=np.int64)
    group = np.empty(max_block, dtype=np.int64)
    size = np.zeros(max_block, dtype=np.int64)
    rejected = 0
    m = n_groups = np.int64(0)
    for c in range(cand.shape[0]):
        if m == max_block:
            break
        nc = norms[cand[c]]
        if nc == 0.0:
            continue
        first = np.int64(-1)
        if rho < 1.0:
            for t in range(m):
                if abs(G[idx[c], idx[chosen[t]]]) > rho * nc * norms[cand[chosen[t]]]:
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
    kept = cand[chosen[:m]]
    out = np.empty(2 * m + 1, np.int64)
    n_ptr = _order_into(kept, group[:m], out)
    order = np.argsort(kept)
    pos = idx[chosen[:m][order[np.searchsorted(kept[order], out[:m])]]]
    return out[:m], out[m:m + n_ptr], pos


@njit(**_opts)
def _order_into(chosen, group, out):
    """The kept coordinates ``chosen`` with each group contiguous (groups by their
    smallest coordinate, members in increasing order) into ``out``: cols at out[:m],
    the group boundaries gptr after them; returns gptr's length (0 when every group has
    one member: a plain Jacobi round, sorted)."""
    m = chosen.shape[0]
    n_groups = 0
    for t in range(m):
        n_groups = max(n_groups, group[t] + 1)
    order = np.argsort(chosen)
    rank = np.full(n_groups, -1, np.int64)  # groups numbered by their smallest member
    r = 0
    for t in order:
        if rank[group[t]] < 0:
            rank[group[t]] = r
            r += 1
    if r == m:
        for t in range(m):
            out[t] = chosen[order[t]]
        return 0
    start = out[m:m + r + 1]
    start[:] = 0
    for t in order:
        start[rank[group[t]] + 1] += 1
    for g in range(r):
        start[g + 1] += start[g]
    fill = start[:-1].copy()
    for t in order:  # increasing: members in order within their group
        g = rank[group[t]]
        out[fill[g]] = chosen[t]
        fill[g] += 1
    return r + 1


# -- a round's groups: their Gram matrices (workers), their exact steps (scheduler) -------
@njit(**_opts)
def _total(gptr):
    """The entries of the groups' Gram matrices (groups of more than one member)."""
    total = 0
    for g in range(gptr.shape[0] - 1):
        k = gptr[g + 1] - gptr[g]
        if k > 1:
            total += k * k
    return total


@njit(**_opts)
def group_gram_sparse(indptr, indices, data, cols, gptr, wts):
    """The Gram matrices X_g' D X_g (D = diag(wts); ``wts`` empty: none) of the groups
    of more than one member (``cols[gptr[g]:gptr[g + 1]]``) over these rows, each k x k
    row-major, one after the other. Each entry merges the two columns' sorted rows."""
    weighted = wts.shape[0] > 0
    out = np.empty(_total(gptr))
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
    out = np.empty(_total(gptr))
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
def gram_gather(G, pos):
    """G[pos][:, pos] of a symmetric Gram matrix ``G``, k x k row-major (flat), as
    :func:`group_steps` reads a group of k."""
    k = pos.shape[0]
    out = np.empty(k * k)
    for a in range(k):
        for b in range(k):
            out[a * k + b] = G[pos[a], pos[b]]
    return out


@njit(**_opts)
def held_gram(PG, slot, C, rank):
    """The candidates' Gram (m x m) from the held pool's ``PG`` (candidate a its row
    slot[a]) and, for those not held (rank[a] >= 0), their rows ``C`` summed afresh."""
    m = slot.shape[0]
    G = np.empty((m, m))
    for a in range(m):
        for b in range(m):
            if rank[a] >= 0:
                G[a, b] = C[rank[a], b]
            elif rank[b] >= 0:
                G[a, b] = C[rank[b], a]
            else:
                G[a, b] = PG[slot[a], slot[b]]
    return G


@njit(**_opts)
def group_gram_lower(G, pos, gptr, sq_norms):
    """As :func:`group_gram_sparse`, from the strict lower triangle of a summed Gram ``G``
    (column ``cols[a]`` is its row ``pos[a]``) and the squared norms for the diagonal."""
    out = np.empty(_total(gptr))
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
    """A round of groups (``gptr``), all from the same point: a group of one takes
    :func:`coordinate_steps`' step, a larger one moves to the minimiser of its model
    1/2 d'G_g d - q_g'd + thresh |w_g + d|_1 (``gram``: :func:`group_gram_sparse`'s
    layout) by :func:`_solve_group` to ``rtol`` of its first move in at most ``passes``;
    both with relaxation ``step``. ``delta`` gets the changes; returns the l1 change."""
    d_l1 = 0.0
    off = 0
    k_max = 0
    for g in range(gptr.shape[0] - 1):
        k_max = max(k_max, gptr[g + 1] - gptr[g])
    # scratch of the largest group, for every group
    scratch = np.empty(9 * k_max)
    state = np.zeros(1, dtype=np.int64)
    for g in range(gptr.shape[0] - 1):
        a0, k = gptr[g], gptr[g + 1] - gptr[g]
        if k == 1:
            d_l1 += coordinate_steps(w, cols[a0:a0 + 1], q[a0:a0 + 1], h[a0:a0 + 1],
                                     thresh, step, delta[a0:a0 + 1])
            continue
        G = gram[off:off + k * k].reshape((k, k))
        off += k * k
        b0, b, qq = scratch[:k], scratch[k:2 * k], scratch[2 * k:3 * k]
        for t in range(k):
            b0[t] = w[cols[a0 + t]]
            b[t] = b0[t]
            qq[t] = q[a0 + t]
        worst = 0.0  # the largest first move, in the norm of its column
        scale = 0.0  # the coefficients' and gradients' size, in the same norm
        for t in range(k):
            if G[t, t] > 0.0:
                root = np.sqrt(G[t, t])
                d = soft(qq[t] + G[t, t] * b[t], G[t, t], thresh) - b[t]
                worst = max(worst, abs(d) * root)
                scale = max(scale, abs(b[t]) * root + abs(qq[t]) / root)
        if worst > 0.0:
            c = gram_c(G, qq, b)
            hist = scratch[3 * k:9 * k].reshape((6, k))
            state[0] = 0
            # a first move near rounding would ask for moves below it, which never stop
            tol = max(rtol * worst, GROUP_FLOOR * scale)
            _solve_group(G, qq, b, c, thresh, tol, passes, hist, state)
        for t in range(k):
            j = cols[a0 + t]
            new = b0[t] + step * (b[t] - b0[t])
            delta[a0 + t] = new - b0[t]
            w[j] = new
            d_l1 += abs(new) - abs(b0[t])
    return d_l1


@njit(**_opts)
def _solve_group(G, q, b, c, thresh, tol, passes, hist, state):
    """:func:`cd_dense` in spans of its extrapolation's period; once a span ends on the
    signs it began with (or the moves stop), :func:`_active_set` finishes from there:
    near-duplicate columns make the coordinates' moves small long before the optimum
    (they stop at ``tol``, which then is no measure of the distance left). Rent or buy:
    the active set's steps may cost what the passes since its last try did."""
    k = b.shape[0]
    sign = np.zeros(k, dtype=np.int8)
    done = 0
    spent = 0.0  # the passes' multiply-adds since the last try
    while done < passes:
        for t in range(k):
            sign[t] = np.int8(np.sign(b[t]))
        n, converged = cd_dense(G, q, b, c, thresh, tol, min(hist.shape[0], passes - done),
                                hist, state, np.bool_(True))
        done += n
        same = True
        nnz = 0
        for t in range(k):
            nnz += b[t] != 0.0
            if np.int8(np.sign(b[t])) != sign[t]:
                same = False
        spent += n * k * max(nnz, 1)
        if same or converged:
            ok, spent = _active_set(G, c, b, thresh, spent)
            if ok or converged:
                return
            for t in range(k):  # (it moved b: cd_dense's q is c - G b)
                q[t] = c[t]
                for j in range(k):
                    q[t] -= G[t, j] * b[j]


@njit(**_opts)
def _active_set(G, c, b, thresh, budget):
    """An active-set method's steps (``budget`` multiply-adds at most) on min 1/2 b'Gb -
    c'b + thresh |b|_1 from ``b``: the minimiser on the active set with its signs (G_SS's
    Cholesky factor, updated as the set changes), approached up to the first sign change
    (that coordinate leaves the set), else the most violating coordinate off the set
    joins it. Every step lowers the objective. Returns (whether ``b`` is the minimiser
    (not where G_SS is singular), the budget left)."""
    k = b.shape[0]
    act = np.zeros(k, dtype=np.bool_)
    theta = np.empty(k)
    idx = np.empty(k, dtype=np.int64)  # the set, in L's order
    L = np.zeros((k + 1, k + 1))
    x = np.empty(k)
    s = np.count_nonzero(b)
    budget -= s * s * s / 6  # (the factor's first build)
    if budget < 0.0:
        return False, budget + s * s * s / 6
    s = np.int64(0)
    for t in range(k):
        theta[t] = np.sign(b[t])
        if b[t] != 0.0:
            if not _chol_add(G, L, idx, s, t):
                return False, budget  # (duplicates in the set)
            act[t], idx[s] = True, t
            s += 1
    joined = np.int64(-1)
    while budget >= 0.0:
        for i in range(s):  # L L' x = c_S - thresh theta_S
            x[i] = c[idx[i]] - thresh * theta[idx[i]]
        solve_factored(L, x, s)
        t_min, first = 1.0, np.int64(-1)
        for i in range(s):
            bi = b[idx[i]]
            if x[i] * theta[idx[i]] <= 0.0 and bi / (bi - x[i]) < t_min:
                t_min, first = bi / (bi - x[i]), i
        if first >= 0 and idx[first] == joined and t_min == 0.0:
            return False, budget  # (the joined coordinate cannot move its way)
        for i in range(s):
            b[idx[i]] += t_min * (x[i] - b[idx[i]])
        budget -= 3 * s * s + k * s
        if first >= 0:
            b[idx[first]], act[idx[first]] = 0.0, False
            _chol_drop(L, s, first)
            idx[first:s - 1] = idx[first + 1:s]
            s -= 1
            continue
        worst, joined = thresh, np.int64(-1)
        for j in range(k):
            if not act[j]:
                g = c[j]
                for i in range(s):
                    g -= G[j, idx[i]] * b[idx[i]]
                if abs(g) > worst:
                    worst, joined, theta[j] = abs(g), j, np.sign(g)
        if joined < 0:
            return True, budget
        if not _chol_add(G, L, idx, s, joined):
            return False, budget
        act[joined], idx[s] = True, joined
        s += 1
    return False, 0.0


@njit(**_opts)
def _chol_add(G, L, idx, s, j):
    """G_SS = L L' for the set ``idx[:s]``: its row for ``j`` appended; False where G_SS
    would be singular to rounding."""
    d = G[j, j]
    for i in range(s):
        v = G[j, idx[i]]
        for t in range(i):
            v -= L[s, t] * L[i, t]
        L[s, i] = v / L[i, i]
        d -= L[s, i] * L[s, i]
    if d <= (s + 1) * np.finfo(np.float64).eps * G[j, j]:
        return False
    L[s, s] = np.sqrt(d)
    return True


@njit(**_opts)
def _chol_drop(L, s, r):
    """The factor without its row ``r``: the rows below move up, and Givens rotations of
    neighbouring columns make it triangular again (L L' unchanged)."""
    for i in range(r, s - 1):
        for t in range(i + 2):
            L[i, t] = L[i + 1, t]
    for i in range(r, s - 1):
        a, z = L[i, i], L[i, i + 1]
        h = np.hypot(a, z)
        cs, sn = a / h, z / h
        for t in range(i, s - 1):
            u, v = L[t, i], L[t, i + 1]
            L[t, i], L[t, i + 1] = cs * u + sn * v, cs * v - sn * u
        L[i, i + 1] = 0.0


# a group's solve: to this share of its first move (but no finer than this share of its
# coefficients' and gradients' size: moves below it are rounding), in at most this many
# passes
GROUP_RTOL = 1e-6
GROUP_FLOOR = 1e-13
GROUP_PASSES = 1000
