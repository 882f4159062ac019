"""Matrix factorization kernels: free numba functions over plain arrays, cached on disk.

A worker holds the residuals of its ratings twice: by row (its users, CSR: indptr, item
index, residual) and by column (its items, CSC: indptr, user index, residual). Factors
are stored transposed, ``F[t]`` is column t of W (or H) and contiguous. The same kernels
serve both sides: "own" are the factor rows of the worker's users (or items), "other"
the full, synced factor of the other side.
"""
import numpy as np
from numba import njit

_opts = dict(cache=True, nogil=True, fastmath=False)


@njit(**_opts)
def ccd_step(indptr, idx, res, own, t, other, reg, d_other, own_p, pending):
    """One rank-one half-step: own[t, a] <- argmin over z of
    sum_j (res_aj + own[t, a] other[t, j] - z other[t, j])^2 + reg[a] z^2, for every own
    row a, with res updated in place; returns sum res^2 afterwards.

    With ``pending`` the residual first takes the last synced change of the other side,
    ``res_aj -= d_other[j] * own[own_p, a]``, fused into the same pass (same arithmetic
    as applying it apart).
    """
    v = other[t]
    rss = 0.0
    for a in range(indptr.shape[0] - 1):
        lo, hi = indptr[a], indptr[a + 1]
        s = own[t, a]
        num = 0.0
        den = reg[a]
        if pending:
            wp = own[own_p, a]
            for q in range(lo, hi):
                j = idx[q]
                r = res[q] - d_other[j] * wp
                res[q] = r
                vj = v[j]
                num += (r + s * vj) * vj
                den += vj * vj
        else:
            for q in range(lo, hi):
                vj = v[idx[q]]
                num += (res[q] + s * vj) * vj
                den += vj * vj
        z = num / den if den > 0.0 else 0.0
        dz = z - s
        for q in range(lo, hi):
            r = res[q] - dz * v[idx[q]]
            res[q] = r
            rss += r * r
        own[t, a] = z
    return rss


@njit(**_opts)
def apply_cols(indptr, idx, res, own, cols, delta):
    """res_aj -= sum_c delta[c, j] * own[cols[c], a]: the residual after the other side's
    columns ``cols`` changed by ``delta``."""
    for a in range(indptr.shape[0] - 1):
        for q in range(indptr[a], indptr[a + 1]):
            j = idx[q]
            s = 0.0
            for c in range(cols.shape[0]):
                s += delta[c, j] * own[cols[c], a]
            res[q] -= s


@njit(**_opts)
def _cholesky_solve(G, b, f):
    # G = L L' in place (lower triangle), then b <- G^-1 b; G is SPD (reg > 0) or
    # positive semi-definite with a zero row when the row has no ratings.
    for i in range(f):
        for j in range(i + 1):
            s = G[i, j]
            for k in range(j):
                s -= G[i, k] * G[j, k]
            if i == j:
                if s <= 0.0:
                    s = 1e-300  # only with reg 0 and a rank-deficient row: pin to 0
                G[i, i] = np.sqrt(s)
            else:
                G[i, j] = s / G[j, j]
    for i in range(f):
        s = b[i]
        for k in range(i):
            s -= G[i, k] * b[k]
        b[i] = s / G[i, i]
    for i in range(f - 1, -1, -1):
        s = b[i]
        for k in range(i + 1, f):
            s -= G[k, i] * b[k]
        b[i] = s / G[i, i]


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
def test_update(users, items, err, cols, delta, other):
    """err_q -= sum_c delta[c, users[q]] * other[cols[c], items[q]] (the held-out
    residual after W's ``cols`` changed; call with users and items swapped for H)."""
    for q in range(users.shape[0]):
        u, i = users[q], items[q]
        s = 0.0
        for c in range(cols.shape[0]):
            s += delta[c, u] * other[cols[c], i]
        err[q] -= s


@njit(**_opts)
def predict_pairs(Wt, Ht, users, items, out):
    """out_q = Wt[:, users[q]] . Ht[:, items[q]] (factors stored transposed)."""
    for q in range(users.shape[0]):
        u, i = users[q], items[q]
        s = 0.0
        for t in range(Wt.shape[0]):
            s += Wt[t, u] * Ht[t, i]
        out[q] = s

