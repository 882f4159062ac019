"""Logistic regression worker: its rows of X (column-major), its labels y (+-1) and its
margins m = X w, with the per-sample quantities at them. Tasks (``task["kind"]``):
``full`` (q = X' (y s), with ``hess`` the diagonal Hessian sums, the loss), ``newton``
(q_B and the block's weighted Gram X_B' D X_B), ``extend`` (the Gram's parts for the
block's ``new`` columns), ``trial`` (the loss change at each of ``steps`` along the
pending direction; with ``cols``, q_B at t = 1), ``block`` (Jacobi: q_B, h_B, the loss);
``full`` and ``block`` with ``icpt``: X_B' D x_c too (x_c: the intercept's, the last
column); any may carry ``dual`` and ``accel`` (the dual's entropy sums). Syncs: ``commit``
t, ``dcols``/``ddelta`` (a new pending direction), ``cols``/``delta`` (Jacobi).
"""
import numpy as np
import scipy.sparse as sp
from scipy.linalg.blas import dsyrk

from ..glm import kernels as GK
from ...api import rows_of
from ..glm.update import GLMUpdate, kernel_form, warm_rows
from . import kernels as K
from . import data

#: dense X: the block's gathered columns are kept between rounds up to this size
XB_CACHE_BYTES = 256 << 20
#: the dual point is also extrapolated from the last ACCEL + 1 full rounds' (celer's)
ACCEL = 5
#: added to the Hessian weights of the Newton subproblem's Gram (Levenberg-Marquardt):
#: a coefficient whose samples are all fitted past exp's underflow has no curvature
DAMPING = 1e-6


class LogRegUpdate(GLMUpdate):
    data = data
    # a cache and scratch (a forged mark would leave rows' weights stale)
    checkpoint_skip = GLMUpdate.checkpoint_skip + ("xb", "mark", "touched", "count")

    def load_state(self, state):
        """As GLMUpdate's; every per-row array has this worker's rows (those the fresh
        object has None or [] of are not checked by shape on load: the kernels index with
        them), r, wts and ell are the loss's at the margins m (a trial point's too), and
        the kept sigmoids are in [0, 1] (a forged one overflowed the extrapolation)."""
        super().load_state(state)
        if not isinstance(self.hist, list):
            raise ValueError("hist: not a list of the last full rounds' sigmoids")
        spec = self.spec  # (m, r, wts, ell, loss, Gram weights or None) at a trial point
        if spec is not None and not (isinstance(spec, tuple) and len(spec) == 6
                                     and isinstance(spec[4], float)):
            raise ValueError("spec: not a trial point's margins, losses and weights")
        extra = [self.zc, self.gram_w, self.dm] + ([*spec[:4], spec[5]] if spec else [])
        rows = [self.m, self.r, self.wts, self.ell, *self.hist] + [
            a for a in extra if a is not None]
        if len(self.hist) > ACCEL + 1 or not all(
                isinstance(a, np.ndarray) and a.shape == (self.n_rows,)
                and a.dtype == np.float64 for a in rows):
            raise ValueError(f"a per-row array is not {self.n_rows:,} floats (this "
                             "worker's rows)")
        for m, *loss in [(self.m, self.r, self.wts, self.ell)] + ([spec[:4]] if spec else []):
            at = [np.empty_like(m) for _ in range(3)]
            K.refresh(self.y, m, *at)
            if not all(np.array_equal(a, b) for a, b in zip(at, loss)):
                raise ValueError("r, wts, ell (or a trial point's): not the logistic loss's "
                                 "at the margins m")
        if not all(((h >= 0) & (h <= 1)).all() for h in self.hist):
            raise ValueError("hist: not sigmoids")

    def __init__(self, shard):
        super().__init__(shard)
        n = self.n_rows
        self.m = np.zeros(n)
        self.r, self.wts, self.ell = np.empty(n), np.empty(n), np.empty(n)
        self.loss = K.refresh(self.y, self.m, self.r, self.wts, self.ell)
        self.dm = None  # the pending direction's margin change
        self.spec = None  # (m, r, wts, ell, loss, Gram weights) at m + dm, from a trial
        self.zc = None  # y * m at the last full round (the dual's point)
        self.hist = []  # the sigmoids s of the last ACCEL + 1 full rounds (extrapolation)
        self.xb = (np.empty(0, np.int64), None)  # dense: the block's gathered columns
        self.gram_w = None  # dense: the Hessian weights of the last fresh Gram
        self.mark = np.zeros(n, dtype=np.bool_)
        self.touched = np.empty(n, dtype=np.int64)
        self.count = np.zeros(n, dtype=np.int64)  # scratch of block_counts
        if "start" in shard:  # a warm start
            self.apply(shard["start"])

    @classmethod
    def warmup(cls):
        super().warmup()
        y, m = kernel_form(np.array([1.0, -1.0])), np.zeros(2)
        r, wts, ell = np.empty(2), np.empty(2), np.empty(2)
        K.refresh(y, m, r, wts, ell)
        K.dual_entropy(m, 0.5)
        K.accel_entropy(np.full((2, 2), 0.5), np.ones(1), 0.5)
        K.trial_losses(y, m, np.ones(2), np.ones(1), np.empty(1), np.empty(1))
        cols, d = np.zeros(1, np.int64), np.ones(1)
        csc, dense = warm_rows()
        K.grad_hess_sparse(*csc, r, wts, cols, np.empty(1), np.empty(1))
        K.direction_sparse(*csc, cols, d, np.empty(2))
        K.step_sparse(*csc, y, m.copy(), r.copy(), wts.copy(), ell.copy(), cols, d,
                      np.zeros(2, np.bool_), np.empty(2, np.int64))
        K.wgram_csr(*csc, cols, *GK.gram_sparse_rows(*csc, cols, 2), wts)
        K.grad_hess_dense(*dense, r, wts, cols, np.empty(1), np.empty(1))

    # -- a resume on another number of workers: the margins and what hangs on them ------
    def reshard(self, olds, first):
        old = olds[0][2]
        for name in ("m", "dm", "zc", "gram_w"):  # (None: not pending, or not yet made)
            if old[name] is not None:
                setattr(self, name, rows_of(olds, first, self.n_rows, name))
        self.hist = []  # (the extrapolation starts again)
        self.loss = K.refresh(self.y, self.m, self.r, self.wts, self.ell)
        self.spec = None  # a speculative trial point: a commit then computes it again

    # -- syncs ---------------------------------------------------------------------------
    def apply(self, sync):
        if "commit" in sync:
            t = float(sync["commit"])
            if t == 1.0 and self.spec is not None:
                self.m, self.r, self.wts, self.ell, self.loss, gram_w = self.spec
                self.gram_w = self.gram_w if gram_w is None else gram_w
            elif t != 0.0:
                self.m += t * self.dm
                self.loss = K.refresh(self.y, self.m, self.r, self.wts, self.ell)
            self.dm, self.spec = None, None
        if "full" in sync:  # the trial's point is the full round's
            self._remember()
        if "dcols" in sync:
            self.dm = self._times(sync["dcols"], sync["ddelta"])
            self.spec = None
        if "delta" in sync:  # Jacobi: apply at once
            cols, delta = sync["cols"], sync["delta"]
            if self.sparse:
                self.loss += K.step_sparse(*self.X, self.y, self.m, self.r, self.wts,
                                           self.ell, cols, delta, self.mark, self.touched)
            else:
                self.m += self._block(cols) @ delta
                self.loss = K.refresh(self.y, self.m, self.r, self.wts, self.ell)

    def _times(self, cols, delta):
        """X_B delta over this worker's rows."""
        if self.sparse:
            out = np.empty(self.n_rows)
            K.direction_sparse(*self.X, cols, delta, out)
            return out
        return self._block(cols) @ delta

    def _block(self, cols):
        """Dense X[:, cols] (Fortran order), kept while the block stays the same."""
        old_cols, Xb = self.xb
        if Xb is not None and np.array_equal(old_cols, cols):
            return Xb
        Xb = np.asfortranarray(self.X[0][:, cols])
        if Xb.nbytes <= XB_CACHE_BYTES:
            self.xb = (cols.copy(), Xb)
        return Xb

    # -- tasks ---------------------------------------------------------------------------
    def update(self, task):
        out = {}
        if "dual" in task:
            out["ent"] = K.dual_entropy(self.zc, float(task["dual"]))
        if "accel" in task:
            z, c = task["accel"]
            # (a history begun again by a reshard is too short: NaN, the point unused)
            out["ent_acc"] = (K.accel_entropy(np.array(self.hist), z, float(c))
                              if len(self.hist) == len(z) + 1 else np.nan)
        kind = task["kind"]
        if kind == "full":
            out.update(self._full(task.get("hess", False), task.get("icpt", False)))
        elif kind == "newton":
            cols = task["cols"]
            out.update(q=self._grad(cols, self.r), **self._gram(cols, task.get("floor")))
        elif kind == "extend":
            out.update(self._extend(task["cols"], task["new"], task["form"]))
        elif kind == "trial":
            out.update(self._trial(task["steps"], task.get("cols"), task.get("gram"),
                                   task.get("floor"), task.get("full")))
        elif kind == "block":  # (priority: maybe groups, or the workers' filter)
            cols, chosen = self._jacobi_block(task, self.wts)  # (groups: Hessian blocks)
            g, h = self._grad_hess(cols)
            out.update(chosen, q=g, h=h, loss=self.loss)
            if task.get("icpt"):
                v, out["ic"] = self._icpt()
                out["xc"] = self.grad(v, cols)
        return out

    def _icpt(self):
        """D x_c over this worker's rows (x_c: the intercept's column, the last), and the
        intercept's q and h there."""
        c = self.n_features - 1
        if self.sparse:
            ptr, idx, val = self.X
            xc = np.zeros(self.n_rows)
            xc[idx[ptr[c]:ptr[c + 1]]] = val[ptr[c]:ptr[c + 1]]
        else:
            xc = self.X[0][:, c]
        v = self.wts * xc
        return v, np.array([xc @ self.r, v @ xc])

    def _grad_hess(self, cols):
        """q_B and the diagonal Hessian sums h_B over this worker's rows."""
        g, h = np.empty(cols.shape[0]), np.empty(cols.shape[0])
        if self.sparse:
            K.grad_hess_sparse(*self.X, self.r, self.wts, cols, g, h)
        else:
            K.grad_hess_dense(self.X[0], self.r, self.wts, cols, g, h)
        return g, h

    def _full(self, hess, icpt=False):
        # recomputed from the margins: drops the drift of the Jacobi running sums
        self.loss = K.refresh(self.y, self.m, self.r, self.wts, self.ell)
        self._remember()
        out = _history(self.hist)
        if hess:
            g, h = self._grad_hess(np.arange(self.n_features))
            if icpt:
                out["xc"] = self._grad_all(self._icpt()[0])
            return {"q": g, "h": h, "loss": self.loss, **out}
        return {"q": self._grad_all(self.r), "loss": self.loss, **out}

    def _remember(self):
        """This point is a full round's: its y m (the dual's point) and s = y r kept."""
        self.zc = self.y * self.m
        self.hist.append(self.y * self.r)
        del self.hist[:-(ACCEL + 1)]

    def _grad_all(self, r):
        return self.grad(r, np.arange(self.n_features)) if self.sparse else self.X[0].T @ r

    def _grad(self, cols, r):
        return self.grad(r, cols) if self.sparse else self._block(cols).T @ r

    def _gram(self, cols, floor=False):
        """X_B' D X_B over this worker's rows, in its most compact form: sparse X, the
        factor D^1/2 X_B {"Fp", "Fi", "Fv", "Fn"} when it has under half the Gram's
        non-zeros, else CSR {"Gp", "Gi", "Gv"} when under a quarter of its entries can be
        non-zero, else dense {"G"}; dense X, the factor by the same rule, else dense."""
        m = cols.shape[0]
        # the weights of this Gram (kept for _extend), damped: see DAMPING; ``floor``: the
        # misclassified samples' at least 1/4, their curvature at z = 0 (the model of a
        # nearly linear loss overshoots by 1/(s(1 - s)))
        wts = np.where(self.y * self.m < 0.0, 0.25, self.wts) if floor else self.wts
        wts = self.gram_w = wts + DAMPING
        # (dense X: the factor's n_rows m entries against the Gram's m^2; a p > n block)
        nnz_f, nnz_g = GK.block_counts(self.X[0], self.X[1], cols, self.count) \
            if self.sparse else (self.n_rows * m, m * m)
        if 2 * nnz_f < nnz_g:
            return self._factor(cols, wts)
        if self.sparse:
            rows = GK.gram_sparse_rows(*self.X, cols, self.n_rows)
            if 4 * nnz_g < m * m:
                ptr, idx, val = K.wgram_csr(*self.X, cols, *rows, wts)
                return {"Gp": ptr, "Gi": idx, "Gv": val}
            G = np.zeros((m, m))
            GK.gram_sparse_add(*rows, G, 0, self.n_rows, wts)
            return {"G": G}
        W = np.asfortranarray(self._block(cols) * np.sqrt(wts)[:, None])
        G = dsyrk(1.0, W, trans=1)  # the upper triangle of W'W
        iu = np.tril_indices(m, -1)
        G[iu] = G.T[iu]
        return {"G": G.T}  # (symmetric: its C-ordered view, as every other Gram's)

    def _extend(self, cols, new, form):
        """The block's Gram for its ``new`` columns with the weights of the last fresh Gram
        (so that the scheduler's kept part and these are one Gram): the factor's new
        columns D^1/2 X_new (``form`` "factor"), or the rows X_new' D X_B."""
        if form == "factor":
            return self._factor(new, self.gram_w)
        if self.sparse:
            X = sp.csc_matrix((self.X[2], self.X[1], self.X[0]),
                              shape=(self.n_rows, self.n_features))
            Xn = X[:, new].multiply(self.gram_w[:, None]).tocsc()
            return {"Gx": np.ascontiguousarray((Xn.T @ X[:, cols]).toarray())}
        Xn = np.asfortranarray(self.X[0][:, new] * self.gram_w[:, None])
        return {"Gx": np.ascontiguousarray(Xn.T @ self._block(cols))}

    def _trial(self, steps, cols, gram=False, floor=False, full=False):
        steps = np.asarray(steps, dtype=np.float64)
        diff, adiff = np.empty(steps.shape[0]), np.empty(steps.shape[0])
        K.trial_losses(self.y, self.m, self.dm, steps, diff, adiff)
        out = {"diff": diff, "adiff": adiff}
        self.spec = None
        if cols is not None:  # q_B at t = 1, kept for a commit of t = 1
            m1 = self.m + self.dm
            r1, w1, l1 = np.empty(self.n_rows), np.empty(self.n_rows), np.empty(self.n_rows)
            loss = K.refresh(self.y, m1, r1, w1, l1)
            out["q"] = self._grad_all(r1) if full else self._grad(cols, r1)
            if full:  # (and a full round's other outputs there: see _remember)
                out.update(loss=loss, **_history(self.hist[-ACCEL:] + [self.y * r1]))
            keep = self.m, self.wts, self.gram_w
            if gram:  # and the block's Gram there (its weights kept for that commit)
                self.m, self.wts = m1, w1
                out.update(self._gram(cols, floor))
            self.spec = (m1, r1, w1, l1, loss, self.gram_w if gram else None)
            self.m, self.wts, self.gram_w = keep
        return out

    def collect(self):
        # the loss at the final margins, exactly: the final objective
        return {"loss": np.float64(K.logistic_loss(self.y, self.m))}


def _history(hist):
    """Once ACCEL + 1 full rounds' s are kept, the Gram of their differences over this
    worker's rows (the extrapolation's weights)."""
    if len(hist) <= ACCEL:
        return {}
    U = np.diff(np.array(hist), axis=0)
    return {"uu": U @ U.T}
