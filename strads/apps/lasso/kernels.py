"""The Lasso's kernels (the shared ones: :mod:`strads.apps.glm.kernels`): residual
updates, the Gram's cost in pieces, Gap Safe screening, block solves, the dense path."""
import numpy as np
from numba import njit

from ..cholesky import solve_factored
from ..glm.kernels import _dense, _opts, _u, cd_dense, cd_factor, cd_move, soft


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
def gap_safe(w, g, norms, scale, radius, screened, prio):
    """The Gap Safe rule after a full round: w*_j = 0 if |x_j' r| / scale + |x_j| radius
    < 1. Only coordinates now at zero are screened (and stay so); their priority is 0."""
    for j in range(w.shape[0]):
        if w[j] == 0.0 and (screened[j] or abs(g[j]) / scale + norms[j] * radius < 1.0):
            screened[j] = True
            prio[j] = 0.0


@njit(**_opts)
def centre_gram(G, mu, n):
    """G -= n mu mu' in place (an intercept's implicit centring; as NumPy's rounding)."""
    for i in range(G.shape[0]):
        for j in range(G.shape[1]):
            G[i, j] -= n * (mu[i] * mu[j])


# -- a block's Gram matrix in pieces, its non-zeros only (glm.kernels.gram_cols) ----------
@njit(**_opts)
def gram_sparse_col_costs(indptr, indices, cols, row_len):
    """For each block column, the entries :func:`glm.kernels.gram_cols` visits for it
    (``row_len``, the block entries of each row, summed over its rows)."""
    out = np.empty(cols.shape[0])
    for a in range(cols.shape[0]):
        s = 0.0
        for q in range(indptr[cols[a]], indptr[cols[a] + 1]):
            s += row_len[indices[q]]
        out[a] = s
    return out


# -- a block solve's stop: the moves its end point asks for, |x_j| |d_j|, within tol (a
# pass's own moves may be small while correlated columns' gradients still ask for more) --
@njit(**_opts)
def _worst_move(b, g, h, thresh):
    worst = 0.0
    for j in range(b.shape[0]):
        if h[j] > 0.0:
            worst = max(worst, abs(soft(g[j] + h[j] * b[j], h[j], thresh) - b[j]) *
                        np.sqrt(h[j]))
    return worst


@njit(**_opts)
def cd_dense_solved(G, q, b, c, thresh, tol, n_passes, hist, state, L, order, inf, fstate,
                    b0, q0, x):
    """:func:`glm.kernels.cd_dense` (``root``) to the stop above. With a factor ``L`` (of
    at most L.shape[0] rows, kept as :func:`_face_step`'s, ``fstate[0]`` rows): after a
    pass that left every sign as it was, a Newton step on the face (near interpolation
    the face is ill-conditioned: CD takes hundreds of passes to zero a coordinate), once
    the passes since the last one cost about what the factor's updates will."""
    done = 0
    h = np.diag(G).copy()
    newton = L.shape[0] > 0
    credit = 0.0  # multiply-adds of the passes since the last Newton step
    while done < n_passes:
        if newton:
            b0[:] = b
        k, converged = cd_dense(G, q, b, c, thresh, tol, 1 if newton else n_passes - done,
                                hist, state, np.bool_(True))
        done += k
        if converged and _worst_move(b, q, h, thresh) <= tol:
            return done, True
        if not newton:
            continue
        changes, nnz = _face_changes(b, b0, inf)
        credit += float(b.shape[0]) * nnz
        a = min(nnz, L.shape[0])
        if changes >= 0 and credit >= (changes + 1.0) * a * a:
            credit = 0.0
            kept = 2
            while kept == 2:  # (a step stopped at a 0: the next on the smaller face)
                b0[:] = b
                q0[:] = q
                kept = _face_step(G, c, q, b, thresh, b0, q0, L, order, inf, fstate, x,
                                  np.bool_(True))
                if kept:
                    state[0] = 0  # (Anderson's iterates from before the step: dropped)
    return done, False


@njit(**_opts)
def _face_changes(b, b0, inf):
    """(-1 if a sign of b differs from b0's, else the coordinates the factor's rows
    ``inf`` must gain or lose to follow b's support; b's non-zeros)."""
    changes, nnz, same = 0, 0, True
    for j in range(b.shape[0]):
        if (b[j] > 0.0) != (b0[j] > 0.0) or (b[j] < 0.0) != (b0[j] < 0.0):
            same = False
        nnz += b[j] != 0.0
        changes += (b[j] != 0.0) != inf[j]
    return changes if same else -1, nnz


@njit(**_opts)
def face_enter(L, gorder, a, cols, order, inf, x):
    """A kept face factor (rows of the global columns ``gorder[:a]``) for a block of
    sorted ``cols``: ``order``, ``inf`` (len(cols) + 1, False) made local, the rows of
    columns outside the block taken out; returns its rows."""
    m = cols.shape[0]
    for u in range(a):
        i = np.searchsorted(cols, gorder[u])
        order[u] = i if i < m and cols[i] == gorder[u] else m
        inf[order[u]] = True
    i = np.int64(0)
    while i < a:
        if order[i] == m:
            a = _chol_drop(L, order, inf, a, i, x)
        else:
            i += 1
    return a


@njit(**_opts)
def cd_factor_solved(ptr, rows, vals, h, q, b, thresh, tol, n_passes, b0, u, hist, state,
                     mu, n):
    """:func:`glm.kernels.cd_factor` (``root``) to the stop above (the gradient from
    ``u`` = F (b - b0), after a pass the shared rule calls converged)."""
    done = 0
    g = np.empty(b.shape[0])
    while done < n_passes:
        k, converged = cd_factor(ptr, rows, vals, h, q, b, thresh, tol, n_passes - done,
                                 np.bool_(True), b0, u, hist, state, mu, n)
        done += k
        if not converged:
            continue
        c = 0.0
        for j in range(mu.shape[0]):
            c += mu[j] * (b[j] - b0[j])
        for j in range(b.shape[0]):
            t = q[j]
            for e in range(ptr[j], ptr[j + 1]):
                t -= vals[e] * u[rows[e]]
            g[j] = t + n * mu[j] * c if mu.shape[0] else t
        if _worst_move(b, g, h, thresh) <= tol:
            return done, True
    return done, False


# -- a dense path from the whole problem's Gram ---------------------------------------------
@njit(**_opts)
def gram_gap(q, b, rss, lam, n):
    """(duality gap, objective) at b from q = X'r and rss = ||r||^2, as
    :meth:`LassoAggregate._gap` (r'y = rss + b'q)."""
    l1, g_max, bq = 0.0, 0.0, 0.0
    for j in range(b.shape[0]):
        l1 += abs(b[j])
        g_max = max(g_max, abs(q[j]))
        bq += b[j] * q[j]
    primal = 0.5 * rss / n + lam * l1
    t = min(1.0 / n, lam / g_max) if g_max > 0.0 else 1.0 / n
    dual = t * (rss + bq) - 0.5 * n * t * t * rss
    return max(primal - dual, 0.0), primal


@njit(**_opts)
def _gram_pass(G, q, b, thresh):
    """One cyclic pass of coordinate descent on 1/2 b'Gb - c'b + thresh |b|_1 (q = c - G b,
    kept); returns whether some coordinate left or joined the support or changed sign."""
    changed = False
    for j in range(b.shape[0]):
        gjj = G[j, j]
        if gjj <= 0.0:
            continue
        old = b[j]
        d = cd_move(b, j, q[j], gjj, thresh)
        if d != 0.0:
            for k in range(b.shape[0]):  # q -= G[:, j] d, read along row j (G symmetric)
                q[k] -= G[j, k] * d
            if (old > 0.0) != (b[j] > 0.0) or (old < 0.0) != (b[j] < 0.0):
                changed = True
    return changed


# The face's Cholesky factor L (L L' = G_AA) is kept along the path, its rows in the
# order the coordinates joined (``order[:a]``; ``inf[j]``: j is in it), updated as they
# join (a row) or leave (a rank-one update of the rows below).
@njit(**_opts)
def _chol_drop(L, order, inf, a, i, x):
    """Take row/column i out of the factor of a coordinates; returns a - 1."""
    for u in range(i + 1, a):
        x[u] = L[u, i]
    for k in range(i + 1, a):  # L33 L33' + x x' (x: column i below i), then shift
        r = np.sqrt(L[k, k] * L[k, k] + x[k] * x[k])
        cc, sn = r / L[k, k], x[k] / L[k, k]
        L[k, k] = r
        for u in range(k + 1, a):
            L[u, k] = (L[u, k] + sn * x[u]) / cc
            x[u] = cc * x[u] - sn * L[u, k]
    inf[order[i]] = False
    for u in range(i, a - 1):
        order[u] = order[u + 1]
        for v in range(u + 1):
            L[u, v] = L[u + 1, v] if v < i else L[u + 1, v + 1]
    return a - 1


@njit(**_opts)
def _chol_add(G, L, order, inf, a, j):
    """Add coordinate j as the factor's last row; returns a + 1, or a if its column is
    (numerically) in the span of the others'."""
    d2 = G[j, j]
    for u in range(a):
        t = G[order[u], j]
        for v in range(u):
            t -= L[u, v] * L[a, v]
        L[a, u] = t / L[u, u]
        d2 -= L[a, u] * L[a, u]
    if not d2 > 1e-10 * G[j, j]:
        return a
    L[a, a] = np.sqrt(d2)
    order[a] = j
    inf[j] = True
    return a + 1


@njit(**_opts)
def _face_step(G, c, q, b, thresh, b0, q0, L, order, inf, state, x, reduce=False):
    """The support's Newton step: b_A towards the minimiser on the face of b's signs
    (G_AA x = c_A - thresh s_A), stopping where a coordinate reaches 0; kept only if it
    lowers the objective (else b, q restored from ``b0``, ``q0``). ``state[0]``: the
    factor's rows. A support of dependent columns: no step, or with ``reduce`` first
    :func:`_reduce`'s. Returns 0 if not kept, 2 if kept and stopped at a 0, else 1."""
    a, i = state[0], np.int64(0)
    while i < a:  # the factor follows the support
        if b[order[i]] == 0.0:
            a = _chol_drop(L, order, inf, a, i, x)
        else:
            i += 1
    for j in range(b.shape[0]):
        if b[j] != 0.0 and not inf[j]:
            if a < L.shape[0]:
                a = _chol_add(G, L, order, inf, a, j)
            while reduce and b[j] != 0.0 and not inf[j]:
                a = _reduce(G, L, order, inf, a, j, b, x)
            if b[j] != 0.0 and not inf[j]:  # a face of dependent columns: no Newton step
                state[0] = a
                return 0
    state[0] = a
    if a == 0:
        return 0
    for u in range(a):  # G_AA x = c_A - thresh s_A
        x[u] = c[order[u]] - thresh * (1.0 if b[order[u]] > 0.0 else -1.0)
    solve_factored(L, x, a)
    step, hit = 1.0, -1
    for u in range(a):
        bj = b[order[u]]
        if (x[u] > 0.0) != (bj > 0.0):
            t = bj / (bj - x[u])
            if t < step:
                step, hit = t, u
    for u in range(a):
        j = order[u]
        b[j] = 0.0 if u == hit else b[j] + step * (x[u] - b[j])
    # q -= G (b - b0) over the face, then what _reduce zeroed off it; objective 1/2 b'Gb
    # - c'b + thresh |b|_1 = -1/2 b'(c + q) + thresh |b|_1 (b is 0 off the face)
    before, after = 0.0, 0.0
    for v in range(a + b.shape[0]):
        j = order[v] if v < a else v - a
        d = b[j] - b0[j]
        if d != 0.0 and (v < a or not inf[j]):
            for k in range(q.shape[0]):
                q[k] -= G[j, k] * d
    for v in range(a + b.shape[0]):
        j = order[v] if v < a else v - a
        if v < a or (b0[j] != 0.0 and not inf[j]):
            before += -0.5 * b0[j] * (c[j] + q0[j]) + thresh * abs(b0[j])
            after += -0.5 * b[j] * (c[j] + q[j]) + thresh * abs(b[j])
    if after < before:
        return 2 if hit >= 0 else 1
    b[:] = b0
    q[:] = q0
    return 0


@njit(**_opts)
def _reduce(G, L, order, inf, a, j, b, x):
    """A non-zero b_j whose column is in the span of the factor's, x_j = X_F u: b moves
    along e_j - u (X b stays) the way |b|_1 does not grow, until b_j or a b_F reaches 0
    (Caratheodory: an optimum has a support of independent columns); a b_F at 0
    leaves the factor and j joins it. Returns the factor's rows."""
    for u in range(a):
        x[u] = G[order[u], j]
    solve_factored(L, x, a)
    sj = 1.0 if b[j] > 0.0 else -1.0
    slope = sj  # d|b|_1 / dt along e_j - u
    for u in range(a):
        slope -= (1.0 if b[order[u]] > 0.0 else -1.0) * x[u]
    sign = -1.0 if slope > 0.0 or (slope == 0.0 and sj > 0.0) else 1.0
    t, hit = abs(b[j]) if sign == -sj else np.inf, np.int64(-1)  # (b_j's own 0, if ahead)
    for u in range(a):  # b_F - t u: the first to reach 0
        bk, du = b[order[u]], -sign * x[u]
        if du != 0.0 and (du > 0.0) != (bk > 0.0) and abs(bk / du) < t:
            t, hit = abs(bk / du), u
    if t == np.inf:  # (no 0 ahead: rounding; b_j dropped, the step's check decides)
        t = 0.0
    for u in range(a):
        b[order[u]] = 0.0 if u == hit else b[order[u]] - sign * t * x[u]
    if hit < 0:
        b[j] = 0.0
        return a
    b[j] += sign * t
    a = _chol_drop(L, order, inf, a, hit, x)
    return _chol_add(G, L, order, inf, a, j)


@njit(**_opts)
def _rss_at(b, q, b0, q0, rss):
    s = 0.0
    for j in range(b.shape[0]):
        if b[j] != b0[j]:
            s += (b[j] - b0[j]) * (q0[j] + q[j])
    return max(rss - s, 0.0)


@njit(**_opts)
def gram_path(G, c, q, b, rss, lams, n, tol, null, max_passes, W, gaps, passes, solved, b0,
              q0, L, order, inf, x):
    """The Lasso at each of ``lams`` (decreasing) from the whole problem's Gram ``G``
    (c = X'y; q = X'r and ``rss`` = ||r||^2 at b on entry), each from the last one's
    solution: CD passes, and a Newton step on the face after a pass that left the
    signs as they were, until the gap is within ``tol`` times the objective (``null``
    > 0: times that, the null model's); each
    lambda's b, gap, passes, success into ``W[:, k]``, ``gaps``, ``passes``,
    ``solved``. Stops at a lambda not solved in ``max_passes`` passes or stalled;
    returns the lambdas solved. ``b0``, ``q0``, ``x``, ``L``, ``order``, ``inf``
    (False): scratch."""
    state = np.zeros(1, np.int64)
    for k in range(lams.shape[0]):
        lam = lams[k]
        done = 0
        gap, primal = gram_gap(q, b, rss, lam, n)
        ref = np.inf  # the objective STALL_PASSES passes ago
        while gap > tol * (null if null > 0.0 else primal) and done < max_passes:
            if done % STALL_PASSES == 0:
                if ref - primal <= 1e-13 * primal:
                    break
                ref = primal
            b0[:] = b
            q0[:] = q
            changed = _gram_pass(G, q, b, n * lam)
            rss = _rss_at(b, q, b0, q0, rss)
            if not changed:
                b0[:] = b
                q0[:] = q
                if _face_step(G, c, q, b, n * lam, b0, q0, L, order, inf, state, x,
                              np.bool_(False)):
                    rss = _rss_at(b, q, b0, q0, rss)
            done += 1
            gap, primal = gram_gap(q, b, rss, lam, n)
        W[:, k] = b
        gaps[k], passes[k], solved[k] = gap, done, gap <= tol * (null if null > 0.0 else
                                                                   primal)
        if not solved[k]:
            return k
    return lams.shape[0]


# a lambda's passes stop if in this many the objective fell by 1e-13 of itself or less
# (at the rounding floor: the gap computed from the Gram may not reach a tiny tol)
STALL_PASSES = 50
