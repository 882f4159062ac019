"""The triangular solves after a Cholesky factor, shared by the apps' kernels (MF's
ridge rows, the Lasso path's face steps, priority's group solves)."""
from numba import njit


@njit(cache=True, nogil=True, fastmath=False)
def solve_factored(L, x, n):
    """x[:n] <- (L L')^-1 x[:n] in place, L lower triangular (its first n rows)."""
    for i in range(n):
        s = x[i]
        for k in range(i):
            s -= L[i, k] * x[k]
        x[i] = s / L[i, i]
    for i in range(n - 1, -1, -1):
        s = x[i]
        for k in range(i + 1, n):
            s -= L[k, i] * x[k]
        x[i] = s / L[i, i]
