"""What the generalised linear models' workers share: their rows of X (a CSC triplet or
a Fortran-ordered array) and y, priority's filter when the scheduler holds no X, and the
Gram matrices of priority's groups."""
import numpy as np
import scipy.sparse as sp

from ...api import Update
from . import groups as KG
from . import kernels as K


class GLMUpdate(Update):
    #: the datafit's data module (its ``read_part(peers, shard)`` reads a file's part)
    data = None
    # (__init__ makes them again, from the shard: a checkpoint's are never taken; priority's
    # held pool heals at its next purchase)
    checkpoint_skip = ("facts", "norms", "sq_norms", "_held", "_slot", "_PG", "sparse",
                       "n_rows", "n_features")
    _held = _slot = _PG = None  # priority's pool: its columns, their rows, its Gram

    def __init__(self, shard):
        """``shard``: this worker's rows (``csc`` or ``X``, and ``y``), or a file's
        description (``file``)."""
        self.facts = self.norms = self.sq_norms = None
        if "file" in shard:
            shard = self.data.read_part(self.peers, shard)
            self.facts = shard["facts"]
        if "sq_norms" in shard:  # (priority's filter on the workers: --data, --schedulers)
            self.sq_norms = shard["sq_norms"]
            self.norms = np.sqrt(self.sq_norms)
        self.sparse = "csc" in shard
        self._keep_rows(shard["csc"] if self.sparse else shard["X"], shard["y"],
                        shard.get("n_rows"))
        self.n_features = self.X[0].shape[0] - 1 if self.sparse else self.X[0].shape[1]

    def _keep_rows(self, X, y, n_rows=None):
        """Hold X (a CSC triplet of ``n_rows`` rows, a sparse or a dense matrix) and y in
        the kernels' one form (:func:`kernel_form`): numba compiles each kernel once."""
        if sp.issparse(X):
            X = sp.csc_matrix(X)
            X.sort_indices()  # the kernels read each column's rows in order
            X, n_rows = (X.indptr, X.indices, X.data), X.shape[0]
        self.X, self.y = kernel_form(X, n_rows), kernel_form(y)
        self.n_rows = n_rows if isinstance(X, tuple) else self.X[0].shape[0]

    @property
    def rows(self):
        return self.n_rows

    def load_state(self, state):
        """A checkpoint's per-row state (residual, margins, weights...) is finite."""
        super().load_state(state)
        for k, v in state.items():
            if not _finite(v):
                raise ValueError(f"{k}: not finite")

    def report(self):
        facts, self.facts = self.facts, None  # (asked once: worker 0's p-sized facts go)
        return facts

    @classmethod
    def warmup(cls):
        cols, r = np.zeros(1, np.int64), np.zeros(2)
        csc, dense = warm_rows()
        K.grad_sparse(*csc, r, cols, np.empty(1))
        rows = K.gram_sparse_rows(*csc, cols, 2)
        K.gram_sparse_add(*rows, np.zeros((1, 1)), 0, 2, NO_WEIGHTS)
        K.gram_sparse_add(*rows, np.zeros((1, 1)), 0, 2, NO_WEIGHTS, cols)
        K.block_counts(csc[0], csc[1], cols, np.zeros(2, np.int64))
        K.factor_cols(*csc, cols, NO_WEIGHTS)
        K.gram_sparse(*csc, cols, 2)
        K.grad_dense(*dense, r, cols, np.empty(1))
        # (priority: the workers' filter, and the groups' Gram matrices)
        KG.select_gram(np.ones((1, 1)), cols, cols, np.ones(1), 0.5, 1, KG.GROUP_CAP)
        KG.held_gram(np.ones((1, 1)), cols, np.ones((1, 1)), cols)
        KG.gram_gather(np.ones((1, 1)), cols)
        gptr = np.array([0, 1], np.int64)
        KG.group_gram_lower(np.ones((1, 1)), np.zeros(1, np.int64), gptr, np.ones(1))
        for wts in (np.empty(0), np.ones(2)):
            KG.group_gram_sparse(*csc, np.zeros(1, np.int64), gptr, wts)
            KG.group_gram_dense(*dense, np.zeros(1, np.int64), gptr, wts)

    def _jacobi_block(self, task, wts=None):
        """A Jacobi round's block (the task's, or the one the workers' filter chooses:
        ``cols`` and ``groups`` in the partial), and for priority's groups their Gram
        matrices X_g' D X_g (D = diag(``wts``)) over this worker's rows (``Gg``); X_g'
        X_g from the workers' filter or the held pool's Gram is summed already: worker 0
        sends it (``Gs``)."""
        if "pool" in task:
            self._hold(task["pool"])
        if "select" not in task:
            cols, gptr = task["cols"], task.get("groups")
            if task.get("held"):  # an exact round on the held pool: its Gram from ours
                return cols, {"Gs": KG.gram_gather(self._PG, self._slot[cols])} \
                    if self.peers.rank == 0 else {}
            gram = {} if gptr is None or "Gs" in task else \
                {"Gg": self.group_gram(cols, gptr, NO_WEIGHTS if wts is None else wts)}
            return cols, gram
        cols, gptr, G, pos = self._select(task["cols"], *task["select"])
        out = {"cols": cols}
        if gptr is None:
            return cols, out
        out["groups"] = gptr
        if wts is not None:
            out["Gg"] = self.group_gram(cols, gptr, wts)
        elif self.peers.rank == 0:
            out["Gs"] = KG.group_gram_lower(G, pos, gptr, self.sq_norms[cols])
        return cols, out

    def _select(self, cand, rho, b):
        """Priority's filter on the workers: the candidates' Gram summed over them (its
        strict lower triangle), grouped as the scheduler's filter would: (cols, group
        boundaries or None, the summed Gram, the rows of ``cols`` in it)."""
        m = cand.shape[0]
        idx = self._slot[cand] if self._slot is not None else None
        if idx is not None and m and (idx >= 0).all():
            G = self._PG  # (every candidate held: read through their rows of it)
        elif idx is not None and (idx >= 0).any():
            # pairs of held candidates from the pool's Gram, the rest summed afresh
            rank = np.cumsum(idx < 0) - 1
            rank[idx >= 0] = -1
            C = self._cross(cand, rank, int(rank.max()) + 1)
            G, idx = KG.held_gram(self._PG, idx, C, rank), None
        elif self.sparse:
            G, idx = K.gram_sparse(*self.X, cand, self.n_rows), None
            low = np.flatnonzero(np.tril(G, -1))
            low = low.astype(np.int32) if m * m < 2 ** 31 else low
            parts = self.peers.allgather((low, G.reshape(-1)[low]))
            G = np.zeros((m, m))
            for i, vals in parts:  # in worker order, as allreduce adds
                G.reshape(-1)[i] += vals
        else:
            Xc, idx = self.X[0][:, cand], None
            low = np.tril_indices(m, -1)
            G = np.zeros((m, m))
            G[low] = self.peers.allreduce((Xc.T @ Xc)[low])
        cols, gptr, pos = KG.select_gram(G, np.arange(m) if idx is None else idx, cand,
                                         self.norms, rho, b, KG.GROUP_CAP)
        return cols, (gptr if gptr.shape[0] else None), G, pos

    def _hold(self, pool):
        """Priority's pool (``pool``: the columns the scheduler counts as held, sparse X):
        the summed Gram of those not held yet against all, kept for :meth:`_select`."""
        if self._slot is None:
            self._held, self._slot = np.empty(0, np.int64), np.full(self.n_features, -1)
        new = pool[self._slot[pool] < 0]
        if not new.shape[0]:
            return
        k0, cols = self._held.shape[0], np.concatenate([self._held, new])
        k = cols.shape[0]
        rank = np.full(k, -1, np.int64)
        rank[k0:] = np.arange(k - k0)
        C = self._cross(cols, rank, k - k0)
        if self._PG is None or self._PG.shape[0] < k:  # (room to grow: no copy a time)
            PG = np.empty((min(2 * k, self.n_features),) * 2)
            PG[:k0, :k0] = self._PG[:k0, :k0] if k0 else 0.0
            self._PG = PG
        self._PG[k0:k, :k], self._PG[:k0, k0:k] = C, C[:, :k0].T
        self._slot[new] = np.arange(k0, k)
        self._held = cols

    def _cross(self, cols, rank, n_new):
        """The summed Gram rows (n_new x m) of the columns ``cols[a]`` with rank[a] >= 0
        (row rank[a]) against all ``cols``: the same floats as :func:`kernels.gram_sparse`'s."""
        rows = K.gram_sparse_rows(*self.X, cols, self.n_rows)
        C = np.zeros((n_new, cols.shape[0]))
        K.gram_sparse_add(*rows, C, 0, self.n_rows, NO_WEIGHTS, rank)
        return self.peers.allreduce(C)

    def grad(self, r, cols):
        """X_B' r over this worker's rows (:func:`kernels.grad_sparse` or ``grad_dense``)."""
        out = np.empty(cols.shape[0])
        (K.grad_sparse if self.sparse else K.grad_dense)(*self.X, r, cols, out)
        return out

    def _factor(self, cols, wts):
        """The block's Gram X_B' D X_B over this worker's rows as its factor D^1/2 X_B
        (CSC ``Fp``, ``Fi``, ``Fv``, and ``Fn`` rows; ``wts`` empty: X_B, sparse X)."""
        if self.sparse:
            ptr, rows, vals = K.factor_cols(*self.X, cols, wts)
        else:  # (every row of every column: as factor_cols would store it)
            n, m = self.n_rows, cols.shape[0]
            ptr = np.arange(m + 1, dtype=np.int64) * n
            rows = np.tile(np.arange(n, dtype=np.int64), m)
            vals = (self.X[0][:, cols] * np.sqrt(wts)[:, None]).ravel(order="F")
        return {"Fp": ptr, "Fi": rows, "Fv": vals, "Fn": self.n_rows}

    def group_gram(self, cols, gptr, wts):
        """The groups' Gram matrices X_g' D X_g over this worker's rows
        (:func:`kernels.group_gram_sparse`; ``wts`` empty: X_g' X_g)."""
        if self.sparse:
            return KG.group_gram_sparse(*self.X, cols, gptr, wts)
        return KG.group_gram_dense(self.X[0], cols, gptr, wts)


NO_WEIGHTS = np.empty(0)  # (a Gram matrix without weights: X' X)


def _finite(v):
    if isinstance(v, (list, tuple)):
        return all(_finite(x) for x in v)
    if isinstance(v, (float, np.floating, np.ndarray)) and np.asarray(v).dtype.kind == "f":
        return bool(np.isfinite(v).all())
    return True


def kernel_form(a, n_rows=None):
    """The kernels' one form of a worker's rows, read-only (the in-process transport hands
    shards over without copies): a CSC triplet (of ``n_rows`` rows) as int64 pointers,
    int32 row indices (int64 past 2**31 rows) and float64 values; a dense X as one
    Fortran-ordered array in a tuple; ``y`` as it is."""
    if isinstance(a, tuple):
        idx = np.int32 if n_rows < 2 ** 31 else np.int64
        return tuple(_read_only(np.asarray(x, t)) for x, t in zip(a, (np.int64, idx,
                                                                      np.float64)))
    return (_read_only(np.asfortranarray(a)),) if a.ndim == 2 else _read_only(a)


def warm_rows():
    """A tiny sparse and a tiny dense X in the kernels' form, for ``warmup``."""
    return (kernel_form((np.array([0, 1]), np.zeros(1), np.ones(1)), 2),
            kernel_form(np.ones((2, 1))))


def _read_only(a):
    if not a.flags.writeable:
        return a
    v = a.view()
    v.flags.writeable = False
    return v
