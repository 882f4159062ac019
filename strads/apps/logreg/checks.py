"""Logistic regression's checks of a checkpoint's aggregate state, beyond the shared
ones (``GLMAggregate.load_state``): docs/failures.md, "A checkpoint is untrusted input"."""
import numpy as np

from .update import ACCEL


def check_kept(agg):
    """Its working set, planned block and kept Gram (dense, CSR or factored: numba's
    kernels index with their pointers) as this run makes them; the pending direction
    (a kernel reads it beside its block's coefficients) and the last full rounds' q."""
    if not _kept_ok(agg):
        raise ValueError("ws, _next, G, G_cols: not a working set and kept Gram of this "
                         "run's coordinates")
    nxt, d, p = agg._next, agg.d, agg.w.shape[0]
    steps = nxt.get("steps") if isinstance(nxt, dict) else None
    if steps is not None and not (_finite(steps) and steps.ndim == 1 and
                                  ((steps > 0) & (steps <= 1)).all()):
        raise ValueError("_next: its line search's steps are not in (0, 1]")
    if d is not None and not (_finite(d) and d.ndim == 1 and (
            not isinstance(nxt, dict) or nxt.get("kind") != "trial"
            or d.shape == agg.ws.shape)):  # (a trial's block: the working set)
        raise ValueError("d: not the direction of this run's working set")
    if not (isinstance(agg.q_hist, list) and len(agg.q_hist) <= ACCEL + 1 and
            all(_finite(q) and q.shape == (p,) for q in agg.q_hist)):
        raise ValueError(f"q_hist: not full rounds' gradients over {p:,} coordinates")


def _kept_ok(agg):
    p, cols, G, nxt = agg.w.shape[0], agg.G_cols, agg.G, agg._next
    blocks = [agg.ws, cols] + ([nxt.get("cols"), nxt.get("new")]
                               if isinstance(nxt, dict) else [] if nxt is None else [0])
    if not all(a is None or _indices(a, p) for a in blocks):
        return False
    if any(a is not None and (np.diff(a) <= 0).any() for a in (cols, agg.ws)):
        return False  # (sorted, each column once)
    m = -1 if cols is None else cols.shape[0]
    if G is None or isinstance(G, np.ndarray):
        return G is None or G.shape == (m, m) and G.dtype == np.float64 and _finite(G)
    if cols is None or not (isinstance(G, tuple) and len(G) in (5, 6) and
                            G[0] in ("csr", "factor")):
        return False
    ptr, idx, vals, diag = G[1:5]
    rows = m if G[0] == "csr" else G[5] if len(G) == 6 else -1  # (the factor's: n)
    return (isinstance(rows, (int, np.integer)) and 0 <= rows <= agg.n and
            _indices(ptr, 2 ** 62) and ptr.shape == (m + 1,) and ptr[0] == 0 and
            (np.diff(ptr) >= 0).all() and _indices(idx, rows) and ptr[-1] == len(idx) and
            _finite(vals) and vals.shape == idx.shape and _finite(diag) and
            diag.shape == (m,))


def _indices(a, top):
    return (isinstance(a, np.ndarray) and a.dtype.kind in "iu" and a.ndim == 1 and
            ((a >= 0) & (a < top)).all())


def _finite(a):
    return isinstance(a, np.ndarray) and a.dtype == np.float64 and bool(np.isfinite(a).all())
