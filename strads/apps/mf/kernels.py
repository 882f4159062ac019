"""Matrix factorization kernels: free numba functions over plain arrays, cached on disk (the
layouts: docs/apps/mf.md)."""
import numpy as np
from numba import njit

from ..cholesky import solve_factored

_opts = dict(cache=True, nogil=True, fastmath=False)
# Hot loops index with unsigned integers: numba checks every signed index for
# wrap-around (a[-1]), a branch per access in the gathers.
_u = np.uint64


@njit(cache=True, nogil=True, fastmath={"reassoc"})
def _fold(w, M, j, off, P):
    """sum_p w[p] M[j, off + p]: a rating's share of the other side's pending changes, in
    SIMD lanes (the order is the compiler's, fixed for a build; every kernel that folds
    more than one change calls this, so they agree bit for bit)."""
    s = 0.0
    for p in range(P):
        s += w[p] * M[j, off + p]
    return s


@njit(**_opts)
def _solve(own, t, a, reg, rv, vv):
    """own[t, a] <- the row's exact minimiser, from its sums r.v and v.v (the residual
    without this step's change: r); returns the change."""
    s = own[t, a]
    den = reg + vv
    z = (rv + s * vv) / den if den > 0.0 else 0.0
    own[t, a] = z
    return z - s


@njit(**_opts)
def ccd_step(indptr, idx, res, own, t, G, reg, tps, scratch):
    """One rank-one half-step of column t for every own row, folding in the other side's
    pending changes ``G``; returns the RSS after it (docs/apps/mf.md)."""
    P = tps.shape[0]
    wp = np.empty(P)
    rss = 0.0
    for a in range(indptr.shape[0] - 1):
        lo, hi = indptr[a], indptr[a + 1]
        for p in range(P):
            wp[p] = own[tps[p], a]
        rr = 0.0
        rv = 0.0
        vv = 0.0
        if P == 0:  # a block's later columns: nothing to fold (the same sums as below)
            for q in range(lo, hi):
                uq = _u(q)
                j = _u(idx[uq])
                r = res[uq]
                vj = G[j, 0]
                scratch[_u(q - lo)] = vj
                rr += r * r
                rv += r * vj
                vv += vj * vj
        elif P == 1:  # the usual case, kept free of the inner loop
            w0 = wp[0]
            for q in range(lo, hi):
                uq = _u(q)
                j = _u(idx[uq])
                r = res[uq] - w0 * G[j, 1]
                res[uq] = r
                vj = G[j, 0]
                scratch[_u(q - lo)] = vj
                rr += r * r
                rv += r * vj
                vv += vj * vj
        else:
            for q in range(lo, hi):
                uq = _u(q)
                j = _u(idx[uq])
                r = res[uq] - _fold(wp, G, j, 1, P)
                res[uq] = r
                vj = G[j, 0]
                scratch[_u(q - lo)] = vj
                rr += r * r
                rv += r * vj
                vv += vj * vj
        step = _solve(own, t, a, reg[a], rv, vv)
        if step != 0.0:
            for q in range(lo, hi):
                res[_u(q)] -= step * scratch[_u(q - lo)]
        rss += rr - 2.0 * step * rv + step * step * vv
    return rss


# ratings per tile of ccd_block (their residuals and indices, 12 bytes each, stay in L2)
BLOCK_TILE = 16384


@njit(**_opts)
def ccd_block(indptr, idx, res, own, cols, other, reg, tps, delta, tile):
    """:func:`ccd_step` for the columns ``cols`` one after the other, tile by tile of rows:
    the same numbers bit for bit; returns the RSS after the last column."""
    b = cols.shape[0]
    P = tps.shape[0]
    m = indptr.shape[0] - 1
    steps = np.empty(m)
    rss = 0.0
    dT = np.ascontiguousarray(delta.T)
    wp = np.empty(P)
    a0 = 0
    while a0 < m:
        a1 = a0 + 1
        while a1 < m and indptr[a1 + 1] - indptr[a0] <= tile:
            a1 += 1
        if P > 0:
            for a in range(a0, a1):
                for p in range(P):
                    wp[p] = own[tps[p], a]
                for q in range(indptr[a], indptr[a + 1]):
                    uq = _u(q)
                    res[uq] = res[uq] - _fold(wp, dT, _u(idx[uq]), 0, P)
        for c in range(b):
            t = cols[c]
            v = other[t]
            vp = other[cols[c - 1]] if c > 0 else v
            for a in range(a0, a1):
                lo, hi = indptr[a], indptr[a + 1]
                sp = steps[a] if c > 0 else 0.0
                rr = 0.0
                rv = 0.0
                vv = 0.0
                for q in range(lo, hi):  # (LLVM takes the branch out of the loop)
                    uq = _u(q)
                    j = _u(idx[uq])
                    r = res[uq]
                    if sp != 0.0:
                        r = r - sp * vp[j]
                        res[uq] = r
                    vj = v[j]
                    rr += r * r
                    rv += r * vj
                    vv += vj * vj
                step = _solve(own, t, a, reg[a], rv, vv)
                steps[a] = step
                if c == b - 1:
                    rss += rr - 2.0 * step * rv + step * step * vv
        if b > 0:
            v = other[cols[b - 1]]
            for a in range(a0, a1):
                sp = steps[a]
                if sp != 0.0:
                    for q in range(indptr[a], indptr[a + 1]):
                        uq = _u(q)
                        res[uq] -= sp * v[_u(idx[uq])]
        a0 = a1
    return rss


@njit(**_opts)
def apply_cols(ptr, idx, res, own, cols, delta, order=None):
    """res_aj -= sum_c delta[c, j] * own[cols[c], a]: the residual after the other side's
    columns ``cols`` changed by ``delta`` (rows or the tiled layout: ``ptr``, ``order``)."""
    m = own.shape[1]
    for b in range((ptr.shape[0] - 1) // m):
        for k in range(m):
            a = k if order is None else order[k]
            for q in range(ptr[b * m + k], ptr[b * m + k + 1]):
                j = idx[q]
                s = 0.0
                for c in range(cols.shape[0]):
                    s += delta[c, j] * own[cols[c], a]
                res[q] -= s


# -- the tiled layout ---------------------------------------------------------------------
# (a side's ratings tile by tile of the other side's rows: docs/apps/mf.md, "the tiled layout")

#: the other side's rows per tile (their slice of ccd_tiles' table, 24 bytes a row, stays
#: in L2)
TILE_ROWS = 32768


def tile_order(indptr):
    """``(pos, order)``: row a's place in a tile's visiting order and the rows in that
    order, by decreasing number of ratings (ties in order): docs/apps/mf.md."""
    order = np.argsort(-np.diff(indptr), kind="stable")
    pos = np.empty(order.shape[0], np.int64)
    pos[order] = np.arange(order.shape[0])
    return pos, order


@njit(**_opts)
def tile_layout(indptr, idx, n_other, tile, pos):
    """``ptr`` of the tiled layout of these rows (indices increasing along each row; row a
    at ``pos[a]`` in each tile), or an empty array when a row's indices are not
    increasing (keep the rows)."""
    m = indptr.shape[0] - 1
    T = max((n_other + tile - 1) // tile, 1)
    ptr = np.zeros(T * m + 1, np.int64)
    for a in range(m):
        for q in range(indptr[a], indptr[a + 1]):
            if q > indptr[a] and idx[q] <= idx[q - 1]:
                return np.zeros(0, np.int64)
            ptr[(idx[q] // tile) * m + pos[a] + 1] += 1
    for c in range(T * m):
        ptr[c + 1] += ptr[c]
    return ptr


@njit(**_opts)
def retile(indptr, ptr, pos, src, to_tiles):
    """``src`` (in the rows' order, or with ``to_tiles`` False the tiled order) in the other
    order."""
    m = indptr.shape[0] - 1
    out = np.empty_like(src)
    for a in range(m):
        at = indptr[a]
        for b in range((ptr.shape[0] - 1) // m):
            lo, hi = ptr[b * m + pos[a]], ptr[b * m + pos[a] + 1]
            for q in range(lo, hi):
                if to_tiles:
                    out[q] = src[at + q - lo]
                else:
                    out[at + q - lo] = src[q]
            at += hi - lo
    return out


@njit(**_opts)
def fill_table(G, v, delta):
    """``G[j] = (v_j, delta[0, j], ..., delta[P-1, j])`` for j < len(G): ccd_step's
    gather table."""
    for j in range(G.shape[0]):
        G[j, 0] = v[j]
        for p in range(delta.shape[0]):
            G[j, 1 + p] = delta[p, j]


@njit(**_opts)
def ccd_tiles(ptr, idx, res, own, pos, t, v, tp, d, T, reg, steps, acc):
    """:func:`ccd_step` over the tiled layout (one pending change ``d`` of column ``tp``,
    the side's previous ``steps`` applied first): the same numbers bit for bit. ``T`` is
    the gather table, one row (v_j, u_j, d_j) a row of the other side's (one cache line
    per rating, not three), u the column of the deferred steps: on entry ``T[:, 0]``.
    ``steps`` and ``acc`` (the rows' sums, then own[tp]) are in the tiles' order."""
    m = own.shape[1]
    for j in range(T.shape[0]):
        T[j, 1] = T[j, 0]
        T[j, 0] = v[j]
        T[j, 2] = d[j]
    for a in range(m):
        k = pos[a]
        acc[k, 0] = 0.0
        acc[k, 1] = 0.0
        acc[k, 2] = 0.0
        acc[k, 3] = own[tp, a] if tp >= 0 else 0.0
    for b in range((ptr.shape[0] - 1) // m):
        for k in range(m):
            lo, hi = ptr[b * m + k], ptr[b * m + k + 1]
            if lo == hi:
                continue
            sp = steps[k]
            rr, rv, vv, w0 = acc[k, 0], acc[k, 1], acc[k, 2], acc[k, 3]
            for q in range(lo, hi):  # (LLVM takes the row's branches out of the loop)
                uq = _u(q)
                j = _u(idx[uq])
                r = res[uq]
                if sp != 0.0:
                    r = r - sp * T[j, 1]
                if tp >= 0:
                    r = r - w0 * T[j, 2]
                res[uq] = r
                vj = T[j, 0]
                rr += r * r
                rv += r * vj
                vv += vj * vj
            acc[k, 0], acc[k, 1], acc[k, 2] = rr, rv, vv
    rss = 0.0
    for a in range(m):
        k = pos[a]
        rr, rv, vv = acc[k, 0], acc[k, 1], acc[k, 2]
        step = _solve(own, t, a, reg[a], rv, vv)
        steps[k] = step
        rss += rr - 2.0 * step * rv + step * step * vv
    return rss


@njit(**_opts)
def apply_steps(ptr, idx, res, steps, T):
    """The deferred steps of :func:`ccd_tiles`, of its last column (``T[:, 0]``), into
    ``res`` as ccd_step's second pass makes them; ``steps`` zeroed."""
    m = steps.shape[0]
    for b in range((ptr.shape[0] - 1) // m):
        for a in range(m):
            sp = steps[a]
            if sp != 0.0:
                for q in range(ptr[b * m + a], ptr[b * m + a + 1]):
                    uq = _u(q)
                    res[uq] -= sp * T[_u(idx[uq]), 0]
    steps[:] = 0.0


@njit(**_opts)
def _cholesky_solve(G, b, f):
    # G = L L' in place (lower triangle), then b <- G^-1 b. G is SPD when reg > 0; with
    # reg 0 a direction the row's ratings do not determine gets an infinite pivot, so
    # its coefficient is 0 instead of NaN.
    for i in range(f):
        for j in range(i + 1):
            s = G[i, j]
            for k in range(j):
                s -= G[i, k] * G[j, k]
            if i == j:
                G[i, i] = np.sqrt(s) if s > 1e-12 * max(G[i, i], 1e-300) else np.inf
            else:
                G[i, j] = s / G[j, j]
    solve_factored(G, b, f)


@njit(**_opts)
def als_step(indptr, idx, res, own, cols, other, reg):
    """Alternating least squares for every own row over the factor columns ``cols``:
    own[cols, a] <- (V V' + reg[a] I)^-1 V y, V the other side's ``cols`` at the row's
    items and y the ratings less the fixed columns' part; res updated; returns sum res^2."""
    f = cols.shape[0]
    G = np.empty((f, f))
    b = np.empty(f)
    rss = 0.0
    maxdeg = 0
    for a in range(indptr.shape[0] - 1):
        maxdeg = max(maxdeg, indptr[a + 1] - indptr[a])
    V = np.empty((maxdeg, f))  # the row's other-side factors, gathered once
    y = np.empty(maxdeg)
    for a in range(indptr.shape[0] - 1):
        lo, hi = indptr[a], indptr[a + 1]
        n = hi - lo
        for q in range(n):
            j = idx[lo + q]
            r = res[lo + q]
            for c in range(f):
                vc = other[cols[c], j]
                V[q, c] = vc
                r += own[cols[c], a] * vc
            y[q] = r
        for c in range(f):
            b[c] = 0.0
            for c2 in range(c + 1):
                G[c, c2] = 0.0
            G[c, c] = reg[a]
        for q in range(n):
            for c in range(f):
                vc = V[q, c]
                b[c] += y[q] * vc
                for c2 in range(c + 1):
                    G[c, c2] += vc * V[q, c2]
        _cholesky_solve(G, b, f)
        for c in range(f):
            own[cols[c], a] = b[c]
        for q in range(n):
            r = y[q]
            for c in range(f):
                r -= b[c] * V[q, c]
            res[lo + q] = r
            rss += r * r
    return rss


@njit(**_opts)
def predict_pairs(WT, HT, users, items, out):
    """out_q = W[users[q]] . H[items[q]] from the transposed factors (one row per factor
    column): column by column, so each pass gathers from two rows that stay in cache."""
    out[:] = 0.0
    for t in range(WT.shape[0]):
        w, h = WT[t], HT[t]
        for q in range(users.shape[0]):
            out[q] += w[np.uint64(users[q])] * h[np.uint64(items[q])]


@njit(**_opts)
def rss_rows(ptr, idx, res, W, H, Wb, Hb, pos=None):
    """sum over the ratings, row by row in order (rows or the tiled layout: ``ptr``, ``pos``), of
    (res_aj + W[a] . H[j] - Wb[a] . Hb[j])^2: the squared errors of the model (Wb, Hb)
    from the residuals of the model (W, H) (factors row-major; 0 columns: res's own)."""
    s = 0.0
    m = W.shape[0]
    for a in range(m):
        k = a if pos is None else pos[a]
        for b in range((ptr.shape[0] - 1) // m):
            for q in range(ptr[b * m + k], ptr[b * m + k + 1]):
                j = idx[q]
                e = res[q]
                for t in range(W.shape[1]):
                    e += W[a, t] * H[j, t]
                for t in range(Wb.shape[1]):
                    e -= Wb[a, t] * Hb[j, t]
                s += e * e
    return s


@njit(**_opts)
def wsumsq(w, x):
    """sum_i w_i x_i^2 (w None: sum_i x_i^2); a plain loop, not BLAS, whose thread pool
    would fight the workers for the cores."""
    s = 0.0
    if w is None:
        for i in range(x.shape[0]):
            s += x[i] * x[i]
    else:
        for i in range(x.shape[0]):
            s += w[i] * x[i] * x[i]
    return s


@njit(**_opts)
def orthonormalize(Z):
    """Modified Gram-Schmidt on the rows of Z in place (a row that vanishes stays 0)."""
    k, n = Z.shape
    for t in range(k):
        for u in range(t):
            d = 0.0
            for i in range(n):
                d += Z[t, i] * Z[u, i]
            for i in range(n):
                Z[t, i] -= d * Z[u, i]
        nrm = 0.0
        for i in range(n):
            nrm += Z[t, i] * Z[t, i]
        nrm = np.sqrt(nrm)
        if nrm > 0.0:
            for i in range(n):
                Z[t, i] /= nrm


# -- the built-in problem ------------------------------------------------------------------
@njit(**_opts)
def inverse_cdf(cdf, u, out):
    """out[q] = min(np.searchsorted(cdf, u[q], side="right"), len(cdf) - 1), with u in
    [0, 1) and cdf increasing to 1. A guide table (the answer at each 1/len(cdf) step)
    narrows each search to a few entries (binary searches miss the cache at every step)."""
    k = cdf.shape[0]
    guide = np.empty(k + 1, dtype=np.int64)
    j = 0
    for b in range(k + 1):
        while j < k and cdf[j] <= b / k:
            j += 1
        guide[b] = j
    for q in range(u.shape[0]):
        x = u[q]
        b = min(int(x * k), k - 1)
        # the answer lies between the guides of the neighbouring steps, whatever the
        # rounding of x * k
        lo = guide[max(b - 1, 0)]
        hi = guide[min(b + 2, k)]
        while lo < hi:
            mid = (lo + hi) // 2
            if cdf[mid] <= x:
                lo = mid + 1
            else:
                hi = mid
        out[q] = min(lo, k - 1)


@njit(**_opts)
def add_products(cptr, users, vals, lo, hi, Y, cur, P):
    """P[j] += vals[q] Y[users[q] - lo] over column j's entries of users lo..hi-1, the
    next of them from cur[j] (each column's users in order)."""
    R, ulo = _u(P.shape[1]), _u(lo)
    for j in range(cptr.shape[0] - 1):
        q, e = _u(cur[j]), _u(cptr[j + 1])
        while q < e and users[q] < hi:
            a = _u(users[q]) - ulo
            v = vals[q]
            for t in range(R):
                P[j, t] += v * Y[a, t]
            q += _u(1)
        cur[j] = q
