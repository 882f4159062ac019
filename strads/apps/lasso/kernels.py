"""The Lasso's kernels (its datafit's; the shared ones, and the layouts:
:mod:`strads.apps.glm.kernels`): residual updates, the cost of the block's Gram in
pieces, and the Gap Safe screening rule after a full round."""
import numpy as np
from numba import njit

from ..glm.kernels import _dense, _opts, _u


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
