"""What the generalised linear models' workers share: their rows of X (column-major: a
CSC triplet, or a Fortran-ordered dense array) and y, read from a file's part with
parallel loading, and priority's dependency filter when the scheduler holds no X."""
import numpy as np

from ...api import Update
from . import kernels as K


class GLMUpdate(Update):
    #: the datafit's data module (its ``read_part(peers, shard)`` reads a file's part)
    data = None
    checkpoint_skip = ("facts", "norms")  # (__init__ makes them again)

    def __init__(self, shard):
        """``shard``: this worker's rows (``csc`` or ``X``, and ``y``), or a file's
        description (``file``), whose part this worker reads (:attr:`data`)."""
        self.facts = self.norms = None
        if "file" in shard:
            shard = self.data.read_part(self.peers, shard)
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
        K.gram_sparse(np.array([0, 1], np.int32), np.zeros(1, np.int32), np.ones(1),
                      np.zeros(1, np.int64), 2)
        K.select_gram(np.ones((1, 1)), np.ones(1), 0.5, 1)  # (priority with --data)

    def _select(self, cand, rho, b):
        """Priority's filter when the scheduler holds no X (parallel loading, several
        schedulers): the candidates' Gram matrix summed over the workers (the same on
        every one), and those kept, greedily in draw order, whose |correlation| with
        every one kept before them is <= rho (sorted)."""
        if self.sparse:
            G = K.gram_sparse(*self.X, cand, self.n_rows)
        else:
            Xc = self.X[0][:, cand]
            G = Xc.T @ Xc
        G = self.peers.allreduce(G)
        return np.sort(cand[K.select_gram(G, self.norms[cand], rho, b)])
