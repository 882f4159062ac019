"""What the generalised linear models' workers share: their rows of X (column-major: a
CSC triplet, or a Fortran-ordered dense array) and y, read from a file's part with
parallel loading, priority's dependency filter when the scheduler holds no X, and the
Gram matrices of priority's groups."""
import numpy as np

from ...api import Update
from . import groups as KG
from . import kernels as K


class GLMUpdate(Update):
    #: the datafit's data module (its ``read_part(peers, shard)`` reads a file's part)
    data = None
    checkpoint_skip = ("facts", "norms", "sq_norms")  # (__init__ makes them again)

    def __init__(self, shard):
        """``shard``: this worker's rows (``csc`` or ``X``, and ``y``), or a file's
        description (``file``), whose part this worker reads (:attr:`data`)."""
        self.facts = self.norms = self.sq_norms = None
        if "file" in shard:
            shard = self.data.read_part(self.peers, shard)
            self.facts = shard["facts"]
        if "sq_norms" in shard:  # (priority's filter on the workers: --data, --schedulers)
            self.sq_norms = shard["sq_norms"]
            self.norms = np.sqrt(self.sq_norms)
        self.y = shard["y"]
        self.sparse = "csc" in shard
        if self.sparse:
            self.X = shard["csc"]
            self.n_rows, self.n_features = shard["n_rows"], self.X[0].shape[0] - 1
        else:
            self.X = (np.asfortranarray(shard["X"]),)
            self.n_rows, self.n_features = self.X[0].shape

    def report(self):
        facts, self.facts = self.facts, None  # (asked once: worker 0's p-sized facts go)
        return facts

    @classmethod
    def warmup(cls):
        csc = (np.array([0, 1], np.int32), np.zeros(1, np.int32), np.ones(1))
        K.gram_sparse(*csc, np.zeros(1, np.int64), 2)
        # (priority: the workers' filter, and the groups' Gram matrices)
        KG.select_gram(np.ones((1, 1)), np.ones(1), 0.5, 1, KG.GROUP_CAP)
        KG.group_order(np.zeros(1, np.int64), np.zeros(1, np.int64))
        gptr = np.array([0, 1], np.int64)
        KG.group_gram_lower(np.ones((1, 1)), np.zeros(1, np.int64), gptr, np.ones(1))
        for wts in (np.empty(0), np.ones(2)):
            KG.group_gram_sparse(*csc, np.zeros(1, np.int64), gptr, wts)
            KG.group_gram_dense(np.ones((2, 1), order="F"), np.zeros(1, np.int64), gptr, wts)

    def _jacobi_block(self, task, wts=None):
        """A Jacobi round's block, and what a partial adds for it: the task's block, or,
        for priority when the scheduler holds no X (parallel loading, several
        schedulers), the one the workers' filter chooses among the task's candidates
        (named in the partial, ``cols``, with its ``groups``); for priority's groups
        their Gram matrices, X_g' D X_g with D = diag(``wts``) (the logistic loss's
        Hessian weights), over this worker's rows (``Gg``, summed by the aggregate); for
        X_g' X_g (``wts`` None) chosen by the workers' filter, it has summed them
        already: worker 0 sends them (``Gs``), the others nothing; none when the task
        has them (the scheduler's X'X)."""
        if "select" not in task:
            cols, gptr = task["cols"], task.get("groups")
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
        """Priority's filter on the workers: the candidates' Gram matrix summed over
        them (its strict lower triangle: for sparse X only its non-zeros travel; the
        same floats on every worker), and the groups chosen from it, greedily in draw
        order, as the scheduler's filter would: (cols, group boundaries or None, the
        summed Gram, the rows of ``cols`` in it)."""
        m = cand.shape[0]
        if self.sparse:
            G = K.gram_sparse(*self.X, cand, self.n_rows)
            low = np.flatnonzero(np.tril(G, -1))
            low = low.astype(np.int32) if m * m < 2 ** 31 else low
            parts = self.peers.allgather((low, G.reshape(-1)[low]))
            G = np.zeros((m, m))
            for idx, vals in parts:  # in worker order, as allreduce adds
                G.reshape(-1)[idx] += vals
        else:
            Xc = self.X[0][:, cand]
            low = np.tril_indices(m, -1)
            G = np.zeros((m, m))
            G[low] = self.peers.allreduce((Xc.T @ Xc)[low])
        kept, group = KG.select_gram(G, self.norms[cand], rho, b, KG.GROUP_CAP)
        cols, gptr = KG.group_order(cand[kept], group)
        order = np.argsort(cand)
        pos = order[np.searchsorted(cand, cols, sorter=order)]
        return cols, (gptr if gptr.shape[0] else None), G, pos

    def group_gram(self, cols, gptr, wts):
        """The groups' Gram matrices X_g' D X_g over this worker's rows
        (:func:`kernels.group_gram_sparse`; ``wts`` empty: X_g' X_g)."""
        if self.sparse:
            return KG.group_gram_sparse(*self.X, cols, gptr, wts)
        return KG.group_gram_dense(self.X[0], cols, gptr, wts)


NO_WEIGHTS = np.empty(0)  # (a Gram matrix without weights: X' X)
