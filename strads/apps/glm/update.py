"""What the generalised linear models' workers share: their rows of X (column-major: a
CSC triplet, or a Fortran-ordered dense array) and y, read from a file's part with
parallel loading, priority's dependency filter when the scheduler holds no X, and the
Gram matrices of priority's groups."""
import numpy as np

from ...engine import Update
from . import kernels as K


class GLMUpdate(Update):
    #: the datafit's reader of a file's part (its ``read_part(peers, shard)``)
    loading = None
    checkpoint_skip = ("facts", "norms")  # (__init__ makes them again)

    def __init__(self, shard):
        """``shard``: this worker's rows (``csc`` or ``X``, and ``y``), or a file's
        description (``file``), whose part this worker reads (:attr:`loading`)."""
        self.facts = self.norms = None
        if "file" in shard:
            shard = self.loading.read_part(self.peers, shard)
            self.facts = shard["facts"]
            self.norms = np.sqrt(shard["sq_norms"])  # (priority's filter, on the workers)
        elif "sq_norms" in shard:  # (--schedulers: the filter runs on the workers)
            self.norms = np.sqrt(shard["sq_norms"])
        self.y = shard["y"]
        self.sparse = "csc" in shard
        if self.sparse:
            self.X = shard["csc"]
            self.n_rows, self.n_features = shard["n_rows"], self.X[0].shape[0] - 1
        else:
            self.X = (np.asfortranarray(shard["X"]),)
            self.n_rows, self.n_features = self.X[0].shape

    def report(self):
        return self.facts

    @classmethod
    def warmup(cls):
        csc = (np.array([0, 1], np.int32), np.zeros(1, np.int32), np.ones(1))
        K.gram_sparse(*csc, np.zeros(1, np.int64), 2)
        # (priority: the workers' filter, and the groups' Gram matrices)
        K.select_gram(np.ones((1, 1)), np.ones(1), 0.5, 1, K.GROUP_CAP)
        K.group_order(np.zeros(1, np.int64), np.zeros(1, np.int64))
        gptr = np.array([0, 1], np.int64)
        for wts in (np.empty(0), np.ones(2)):
            K.group_gram_sparse(*csc, np.zeros(1, np.int64), gptr, wts)
            K.group_gram_dense(np.ones((2, 1), order="F"), np.zeros(1, np.int64), gptr, wts)

    def _jacobi_block(self, task):
        """A Jacobi round's block and its groups (None: all of one member): the task's,
        or, for priority when the scheduler holds no X (parallel loading, several
        schedulers), those the workers' filter chooses among the task's candidates
        (the partial then names them)."""
        if "select" not in task:
            return task["cols"], task.get("groups"), {}
        cols, gptr = self._select(task["cols"], *task["select"])
        return cols, gptr, dict(cols=cols, **({} if gptr is None else {"groups": gptr}))

    def _select(self, cand, rho, b):
        """Priority's filter on the workers: the candidates' Gram matrix summed over
        them (its strict lower triangle: for sparse X only its non-zeros travel; the
        same floats on every worker), and the groups chosen from it, greedily in draw
        order, as the scheduler's filter would."""
        m = cand.shape[0]
        if self.sparse:
            G = K.gram_sparse(*self.X, cand, self.n_rows)
            low = np.flatnonzero(np.tril(G, -1))
            parts = self.peers.allgather((low, G.reshape(-1)[low]))
            G = np.zeros((m, m))
            for idx, vals in parts:  # in worker order, as allreduce adds
                G.reshape(-1)[idx] += vals
        else:
            Xc = self.X[0][:, cand]
            low = np.tril_indices(m, -1)
            G = np.zeros((m, m))
            G[low] = self.peers.allreduce((Xc.T @ Xc)[low])
        kept, group = K.select_gram(G, self.norms[cand], rho, b, K.GROUP_CAP)
        cols, gptr = K.group_order(cand[kept], group)
        return cols, (gptr if gptr.shape[0] else None)

    def group_gram(self, cols, gptr, wts=np.empty(0)):
        """The groups' Gram matrices X_g' D X_g over this worker's rows
        (:func:`kernels.group_gram_sparse`)."""
        if self.sparse:
            return K.group_gram_sparse(*self.X, cols, gptr, wts)
        return K.group_gram_dense(self.X[0], cols, gptr, wts)
