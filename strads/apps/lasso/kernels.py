"""The Lasso's kernels (its datafit's; the shared ones, and the layouts:
:mod:`strads.apps.glm.kernels`): residual updates, the cost of the block's Gram in
pieces, the Gap Safe screening rule after a full round, and the block solves' stop."""
import numpy as np
from numba import njit

from ..glm.kernels import _dense, _opts, _u, cd_dense, cd_factor, soft


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


# -- a block's Gram matrix in pieces, its non-zeros only (glm.kernels.gram_cols) ----------
@njit(**_opts)
def gram_sparse_col_costs(indptr, indices, cols, row_len):
    """For each block column, the entries :func:`strads.apps.glm.kernels.gram_cols` visits
    for it: the sum
    of ``row_len`` (block entries of each row) over its rows."""
    out = np.empty(cols.shape[0])
    for a in range(cols.shape[0]):
        s = 0.0
        for q in range(indptr[cols[a]], indptr[cols[a] + 1]):
            s += row_len[indices[q]]
        out[a] = s
    return out


# -- a block solve's stop ------------------------------------------------------------------
# The shared solvers stop after a pass in which no coordinate moved by more than tol; when
# the block's columns correlate each move shifts the others' gradients, so the point a pass
# ends at may still ask for far larger moves. The Lasso's block solve goes on until the
# moves its end point asks for, |x_j| |d_j| (a full round's priority's root), are within tol.
@njit(**_opts)
def _worst_move(b, g, h, thresh):
    worst = 0.0
    for j in range(b.shape[0]):
        if h[j] > 0.0:
            worst = max(worst, abs(soft(g[j] + h[j] * b[j], h[j], thresh) - b[j]) *
                        np.sqrt(h[j]))
    return worst


@njit(**_opts)
def cd_dense_solved(G, q, b, c, thresh, tol, n_passes, hist, state):
    """:func:`strads.apps.glm.kernels.cd_dense` (``root``) to the stop above (it keeps q
    the negative gradient); the same arguments and returns."""
    done = 0
    h = np.diag(G).copy()
    while done < n_passes:
        k, converged = cd_dense(G, q, b, c, thresh, tol, n_passes - done, hist, state, True)
        done += k
        if converged and _worst_move(b, q, h, thresh) <= tol:
            return done, True
    return done, False


@njit(**_opts)
def cd_factor_solved(ptr, rows, vals, h, q, b, thresh, tol, n_passes, b0, u, hist, state,
                     mu, n):
    """:func:`strads.apps.glm.kernels.cd_factor` (``root``) to the stop above: the
    negative gradient q - (F'F - n mu mu')(b - b0) from ``u`` = F (b - b0) costs half a
    pass, paid only after a pass the shared rule calls converged."""
    done = 0
    g = np.empty(b.shape[0])
    while done < n_passes:
        k, converged = cd_factor(ptr, rows, vals, h, q, b, thresh, tol, n_passes - done,
                                 True, b0, u, hist, state, mu, n)
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
