"""The logistic loss's kernels (the shared ones: :mod:`strads.apps.glm.kernels`). Per
sample i: z_i = y_i m_i (y in {-1, +1}, margins m = X w); loss l(z) = log(1 + exp(-z));
s_i = sigmoid(-z_i) = -l'(z_i); Hessian weight s_i (1 - s_i); q = X'(y s).
"""
import numpy as np
from numba import njit

from ..glm.kernels import _opts, _u, anderson, cd_move, gram_cols

#: -l'(z) steps beyond this use the plain difference of losses, not log1p(s expm1(.))
_EXP_MAX = 700.0


# -- per-sample functions -----------------------------------------------------------------
@njit(**_opts)
def log1pexp(x):
    """log(1 + exp(x)) without overflow or loss of precision."""
    if x > 0.0:
        return x + np.log1p(np.exp(-x))
    return np.log1p(np.exp(x))


@njit(**_opts)
def sigmoid(x):
    """1 / (1 + exp(-x)), accurate in both tails."""
    if x >= 0.0:
        return 1.0 / (1.0 + np.exp(-x))
    e = np.exp(x)
    return e / (1.0 + e)


@njit(**_opts)
def logistic_loss(y, m):
    """sum_i log(1 + exp(-y_i m_i))."""
    s = 0.0
    for i in range(y.shape[0]):
        s += log1pexp(-y[i] * m[i])
    return s


@njit(**_opts)
def _s_pair(z):
    """(s, 1 - s, e) at z, s = sigmoid(-z), e = exp(-|z|): one exp, neither side cancelled."""
    e = np.exp(-abs(z))
    inv = 1.0 / (1.0 + e)
    if z >= 0.0:
        return e * inv, inv, e
    return inv, e * inv, e


@njit(**_opts)
def _at(yi, mi):
    """(y s, s (1 - s), l(z)) at z = y m, with one exp and one log1p."""
    z = yi * mi
    s, sbar, e = _s_pair(z)
    return yi * s, s * sbar, (np.log1p(e) if z >= 0.0 else -z + np.log1p(e))


@njit(**_opts)
def refresh(y, m, r, wts, ell):
    """At the margins m: r_i = y_i s_i, wts_i = s_i (1 - s_i), ell_i = l(z_i); returns
    sum_i ell_i."""
    total = 0.0
    for i in range(y.shape[0]):
        r[i], wts[i], li = _at(y[i], m[i])
        ell[i] = li
        total += li
    return total


@njit(**_opts)
def dual_entropy(z, c):
    """sum_i H(c s_i), s_i = sigmoid(-z_i), H the binary entropy: the logistic dual
    (times n) at a = c s (1 - a formed as (1 - c) + c sigmoid(z), to keep precision)."""
    total = 0.0
    cbar = 1.0 - c
    for i in range(z.shape[0]):
        s, sbar, _ = _s_pair(z[i])
        a = c * s
        abar = cbar + c * sbar
        if a <= abar:
            h = -abar * np.log1p(-a)
            if a > 0.0:
                h -= a * np.log(a)
        else:
            h = -a * np.log1p(-abar)
            if abar > 0.0:
                h -= abar * np.log(abar)
        total += h
    return total


@njit(**_opts)
def accel_entropy(hist, z, c):
    """sum_i H(c a_i) at the extrapolated point a = z @ hist[1:] (``hist``: the last
    K + 1 full rounds' s); NaN if a leaves [0, 1]."""
    total = 0.0
    for i in range(hist.shape[1]):
        a = 0.0
        for k in range(z.shape[0]):
            a += z[k] * hist[k + 1, i]
        if not 0.0 <= a <= 1.0:
            return np.nan
        a *= c
        abar = 1.0 - a
        if a > 0.0:
            total -= a * np.log(a)
        if abar > 0.0:
            total -= abar * np.log1p(-a)
    return total


@njit(**_opts)
def trial_losses(y, m, dm, steps, diff, adiff):
    """Loss changes along dm at each step t: diff[k] = sum_i l(z_i + t_k y_i dm_i) -
    l(z_i), each term as log1p(s_i expm1(-t y_i dm_i)) (exact even when tiny), or below
    -log 2 as the difference of the losses (log1p would round to -inf); adiff[k]: the
    terms' magnitudes summed (the scale of its rounding)."""
    n_t = steps.shape[0]
    for k in range(n_t):
        diff[k] = 0.0
        adiff[k] = 0.0
    for i in range(y.shape[0]):
        if dm[i] == 0.0:
            continue
        z = y[i] * m[i]
        dz = y[i] * dm[i]
        s = sigmoid(-z)
        for k in range(n_t):
            d = steps[k] * dz
            a = s * np.expm1(-d) if -d < _EXP_MAX else np.inf
            if a > -0.5 and a < np.inf:
                v = np.log1p(a)
            else:
                v = log1pexp(-(z + d)) - log1pexp(-z)
            diff[k] += v
            adiff[k] += abs(v)


# -- gradients and diagonal Hessians over a worker's rows ----------------------------------
@njit(**_opts)
def grad_hess_sparse(indptr, indices, data, r, wts, cols, g, h):
    # g[k] = X[:, j] @ r, h[k] = X[:, j]^2 @ wts, j = cols[k]
    for k in range(cols.shape[0]):
        j = _u(cols[k])
        s = 0.0
        t = 0.0
        for q in range(indptr[j], indptr[j + _u(1)]):
            uq = _u(q)
            i = _u(indices[uq])
            v = data[uq]
            s += v * r[i]
            t += v * v * wts[i]
        g[k] = s
        h[k] = t


@njit(**_opts)
def grad_hess_dense(X, r, wts, cols, g, h):
    n = X.shape[0]
    for k in range(cols.shape[0]):
        j = cols[k]
        s = 0.0
        t = 0.0
        for i in range(n):
            v = X[i, j]
            s += v * r[i]
            t += v * v * wts[i]
        g[k] = s
        h[k] = t


# -- margins ------------------------------------------------------------------------------
@njit(**_opts)
def direction_sparse(indptr, indices, data, cols, delta, dm):
    # dm = X[:, cols] @ delta (dm zeroed here)
    for i in range(dm.shape[0]):
        dm[i] = 0.0
    for k in range(cols.shape[0]):
        j = _u(cols[k])
        dk = delta[k]
        for q in range(indptr[j], indptr[j + _u(1)]):
            uq = _u(q)
            dm[_u(indices[uq])] += dk * data[uq]


@njit(**_opts)
def step_sparse(indptr, indices, data, y, m, r, wts, ell, cols, delta, mark, touched):
    """m += X[:, cols] @ delta, and r, wts, ell refreshed on the rows it touched only;
    returns the change of sum ell. ``mark`` (all False) and ``touched`` are scratch of
    n_rows; mark is left all False."""
    n_t = 0
    for k in range(cols.shape[0]):
        j = _u(cols[k])
        dk = delta[k]
        for q in range(indptr[j], indptr[j + _u(1)]):
            uq = _u(q)
            i = _u(indices[uq])
            m[i] += dk * data[uq]
            if not mark[i]:
                mark[i] = True
                touched[n_t] = i
                n_t += 1
    d_loss = 0.0
    for t in range(n_t):
        i = _u(touched[t])
        mark[i] = False
        r[i], wts[i], li = _at(y[i], m[i])
        d_loss += li - ell[i]
        ell[i] = li
    return d_loss


# -- the block's weighted Gram matrix X_B' D X_B over a worker's rows ----------------------
@njit(**_opts)
def wgram_csr(indptr, indices, data, cols, row_ptr, owner, val, wts):
    """X_B' D X_B as CSR ``(ptr, idx, vals)`` (indices unsorted): :func:`gram_cols` over
    every row of the block."""
    m = cols.shape[0]
    cap = 0
    for a in range(m):
        j = cols[a]
        for q in range(indptr[j], indptr[j + 1]):
            i = indices[q]
            cap += row_ptr[i + 1] - row_ptr[i]
    ptr = np.zeros(m + 1, dtype=np.int64)
    idx = np.empty(cap, dtype=np.int64)
    vals = np.empty(cap)
    n_out = gram_cols(indptr, indices, data, cols, row_ptr, owner, val, wts, np.int64(0), m,
                      np.zeros(m), np.full(m, -1, dtype=np.int64), idx, vals, ptr,
                      np.int64(0))
    return ptr, idx[:n_out].copy(), vals[:n_out].copy()


@njit(**_opts)
def csr_merge(ptrs, idx, val, m):
    """The sum of W CSR matrices (m, m) (``ptrs`` (W, m + 1) into the concatenated ``idx``
    and ``val``) in worker order; returns ``(ptr, idx, val, diag)``."""
    W = ptrs.shape[0]
    cap = 0
    for w in range(W):
        cap += ptrs[w, m] - ptrs[w, 0]
    out_ptr = np.zeros(m + 1, dtype=np.int64)
    out_idx = np.empty(cap, dtype=np.int64)
    out_val = np.empty(cap)
    diag = np.zeros(m)
    acc = np.zeros(m)
    mark = np.full(m, -1, dtype=np.int64)
    n_out = 0
    for a in range(m):
        start = n_out
        for w in range(W):
            for e in range(ptrs[w, a], ptrs[w, a + 1]):
                b = idx[e]
                if mark[b] != a:
                    mark[b] = a
                    acc[b] = val[e]
                    out_idx[n_out] = b
                    n_out += 1
                else:
                    acc[b] += val[e]
        for t in range(start, n_out):
            b = out_idx[t]
            out_val[t] = acc[b]
            if b == a:
                diag[a] = acc[b]
        out_ptr[a + 1] = n_out
    return out_ptr, out_idx[:n_out], out_val[:n_out], diag


# -- the prox-Newton subproblem on the scheduler -------------------------------------------
@njit(**_opts)
def violations(w, q, thresh, out):
    """Distance of q to the subdifferential of thresh |w_j| into ``out``; returns the
    largest |q_j|."""
    top = 0.0
    for j in range(w.shape[0]):
        qj = q[j]
        top = max(top, abs(qj))
        if w[j] > 0.0:
            out[j] = abs(qj - thresh)
        elif w[j] < 0.0:
            out[j] = abs(qj + thresh)
        else:
            out[j] = max(abs(qj) - thresh, 0.0)
    return top


@njit(**_opts)
def l1_change(b0, d, t):
    """||b0 + t d||_1 - ||b0||_1, term by term (exact to the change's own rounding)."""
    s = 0.0
    for j in range(b0.shape[0]):
        s += abs(b0[j] + t * d[j]) - abs(b0[j])
    return s


@njit(**_opts)
def predicted_decrease(q, b0, b, thresh):
    """sum_j -q_j d_j + thresh (|b_j| - |b0_j|), d = b - b0, term by term: n times the
    objective's first-order change."""
    s = 0.0
    for j in range(b0.shape[0]):
        s += -q[j] * (b[j] - b0[j]) + thresh * (abs(b[j]) - abs(b0[j]))
    return s


@njit(**_opts)
def csr_times(ptr, idx, val, v, out):
    """out = A v for A in CSR (``ptr``, ``idx``, ``val``), as scipy's product sums."""
    for i in range(out.shape[0]):
        s = 0.0
        for e in range(ptr[i], ptr[i + 1]):
            s += val[e] * v[idx[e]]
        out[i] = s
    return out


@njit(**_opts)
def factor_times(ptr, rows, vals, v, u, out):
    """out = F'(F v) for F in CSC (``ptr``, ``rows``, ``vals``): the kept factor's Gram
    times v, in scipy's order of sums (columns where v is 0 add nothing); ``u`` (F's rows,
    all 0) is scratch."""
    for j in range(v.shape[0]):
        if v[j] != 0.0:
            for e in range(ptr[j], ptr[j + 1]):
                u[rows[e]] += vals[e] * v[j]
    return csr_times(ptr, rows, vals, u, out)


@njit(**_opts)
def _quad_csr(ptr, idx, val, c, b, thresh):
    s = 0.0
    for j in range(b.shape[0]):
        if b[j] != 0.0:
            t = 0.0
            for e in range(ptr[j], ptr[j + 1]):
                t += val[e] * b[idx[e]]
            s += b[j] * (0.5 * t - c[j]) + thresh * abs(b[j])
    return s


@njit(**_opts)
def cd_csr(ptr, idx, val, diag, q, b, thresh, tol, max_passes):
    """:func:`glm.kernels.cd_dense` (``root`` False) with G as CSR (``diag``: its
    diagonal)."""
    m = b.shape[0]
    c = q.copy()
    for j in range(m):
        if b[j] != 0.0:
            for e in range(ptr[j], ptr[j + 1]):
                c[idx[e]] += val[e] * b[j]
    hist = np.empty((6, m))
    n_hist = np.int64(0)
    for it in range(max_passes):
        worst = 0.0
        for j in range(m):
            gjj = diag[j]
            d = 0.0 if gjj <= 0.0 else cd_move(b, j, q[j], gjj, thresh)
            if d != 0.0:
                for e in range(ptr[j], ptr[j + 1]):
                    q[idx[e]] -= val[e] * d
                worst = max(worst, abs(d) * gjj)
        if worst <= tol:
            return it + 1
        n_hist, acc = anderson(hist, n_hist, b)
        if acc.shape[0] and (_quad_csr(ptr, idx, val, c, acc, thresh)
                             < _quad_csr(ptr, idx, val, c, b, thresh)):
            b[:] = acc
            for j in range(m):
                t = c[j]
                for e in range(ptr[j], ptr[j + 1]):
                    t -= val[e] * b[idx[e]]
                q[j] = t
    return max_passes


@njit(**_opts)
def face_cg(ptr, rows, vals, n_rows, G, h, x, r, tol, max_it, f):
    """Jacobi-preconditioned CG (``h``: the diagonal) on G_AA e = r: x += e, r -= G_AA e,
    until max |r| <= tol or ``max_it`` products. G_AA = F_A'F_A from the factor's columns
    when ``ptr`` is not empty (with ``f``, a unit vector over the rows: F_A'(I - f f')F_A,
    a Schur complement), else the dense ``G``. Returns the products."""
    m = x.shape[0]
    factor = ptr.shape[0] > 0
    z = r / h
    p = z.copy()
    rz = r @ z
    gp = np.empty(m)
    u = np.empty(n_rows if factor else 0)
    for it in range(max_it):
        if np.abs(r).max() <= tol:
            return it
        if factor:
            u[:] = 0.0
            for j in range(m):
                pj = p[j]
                for e in range(ptr[j], ptr[j + 1]):
                    u[rows[e]] += vals[e] * pj
            if f.shape[0]:
                u -= (f @ u) * f
            for j in range(m):
                t = 0.0
                for e in range(ptr[j], ptr[j + 1]):
                    t += vals[e] * u[rows[e]]
                gp[j] = t
        else:
            gp[:] = G @ p
        curv = p @ gp
        if not curv > 0.0:
            return it
        a = rz / curv
        rz_new = 0.0
        for j in range(m):  # (in place: no array a product)
            x[j] += a * p[j]
            r[j] -= a * gp[j]
            z[j] = r[j] / h[j]
            rz_new += r[j] * z[j]
        beta = rz_new / rz
        for j in range(m):
            p[j] = z[j] + beta * p[j]
        rz = rz_new
    return max_it
