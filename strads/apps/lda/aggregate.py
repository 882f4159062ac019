"""LDA on the scheduler rank: the word-topic tables, the global topic totals, the
log-likelihood.

log p(w, z) = K [lgamma(V beta) - V lgamma(beta)] + sum_k [sum_w lgamma(n_wk + beta) -
lgamma(n_k + V beta)] + the document half, which each worker computes over its documents
(see update.doc_loglik). It is the quantity of the ``lda`` package's ``loglikelihood()``.
"""
import math
import time

import numpy as np

from ...engine import Aggregate
from . import kernels as K


class InvariantError(RuntimeError):
    """The counts disagree with each other (only checked with ``check=True``)."""


class LDAAggregate(Aggregate):
    def __init__(self, nwk, nk, cuts, n_docs, alpha, beta, mode, vocab=None, check=False):
        self.mode, self.check = mode, check
        self.cuts = cuts
        self.V, self.K = nwk.shape
        self.n_docs = n_docs
        self.alpha, self.beta = alpha, beta
        self.nk = nk.astype(np.int64)
        self.n_tokens = int(self.nk.sum())
        if mode == "model":
            # packed between rounds (see kernels.pack): ~20x smaller at K = 1,000
            self.tables = [K.pack(nwk[a:b]) for a, b in zip(cuts[:-1], cuts[1:])]
            self.out = [False] * len(self.tables)
        else:
            self.nwk = nwk
        self.vocab = vocab
        self.beta_table = K.lgamma_table(beta, 4096)
        self.updates = 0
        self.sweeps = 0
        self.loglik = float("nan")
        self._prev_ll = None
        self._new_ll = False
        self.t0 = self.t1 = None

    def start(self):
        if self.t0 is None:
            self.t0 = time.perf_counter()

    def word_table(self):
        if self.mode == "data":
            return self.nwk
        out = np.empty((self.V, self.K), np.int32)
        for t, a, b in zip(self.tables, self.cuts[:-1], self.cuts[1:]):
            K.unpack(t, out[a:b])
        return out

    def _counts(self):
        """Every word-topic count (1-D; zeros may be left out)."""
        if self.mode == "data":
            return [self.nwk.ravel()]
        return [t[2] for t in self.tables]

    def word_loglik(self):
        lg = np.vectorize(math.lgamma)
        vb = self.V * self.beta
        return float(self.K * lg(vb) - lg(self.nk + vb).sum()
                     + sum(K.sum_lgamma(c, self.beta, self.beta_table) for c in self._counts()))

    def aggregate(self, round, task, partials):
        for p, part in enumerate(partials):
            self.nk += part["dnk"]
            self.updates += part["tokens"]
            if self.mode == "model":
                m = task[p]["slice"]
                self.tables[m] = part["nwk"]
                self.out[m] = False
            else:
                K.add_packed(*part["dnwk"], self.nwk)
        ll_task = (task[0] if isinstance(task, list) else task)["ll"]
        if self.check:
            self._check(round, partials)
        if ll_task:
            self.sweeps += 1
            self.loglik = self.word_loglik() + sum(part["ll_doc"] for part in partials)
            self._new_ll = True
        sync = {"round": round, "nk": self.nk.copy()}
        if self.mode == "data":
            sync["nwk"] = K.pack(self.nwk)
        return sync

    def _check(self, round, partials):
        """Count invariants of the state after ``round``; they hold exactly at any
        staleness, since rounds are aggregated in order and slices never overlap."""
        def fail(what):
            raise InvariantError(f"after round {round}: {what}")
        if self.nk.sum() != self.n_tokens or self.nk.min() < 0:
            fail(f"topic totals sum to {self.nk.sum()} (min {self.nk.min()}), "
                 f"expected {self.n_tokens} tokens")
        if min(c.min(initial=0) for c in self._counts()) < 0:
            fail("a word-topic count is negative")
        if not np.array_equal(self.word_table().sum(axis=0, dtype=np.int64), self.nk):
            fail("word-topic column sums differ from the topic totals")
        if min(part["ndk_min"] for part in partials) < 0:
            fail("a doc-topic count is negative")
        if not all(part["ndk_ok"] for part in partials):
            fail("doc-topic counts differ from the tokens' topics")
        if not np.array_equal(sum(part["ndk_sum"] for part in partials), self.nk):
            fail("doc-topic column sums differ from the topic totals")

    def objective(self):
        return self.loglik

    def converged(self, tol):
        # the log-likelihood only changes at the end of a sweep; tol 0: no rule
        if tol <= 0 or not self._new_ll:
            return False
        self._new_ll = False
        prev, self._prev_ll = self._prev_ll, self.loglik
        return prev is not None and abs(self.loglik - prev) <= tol * abs(self.loglik)

    def trace(self):
        return {"sweeps": self.sweeps, "loglik": self.loglik}

    def finish(self, collected):
        self.t1 = time.perf_counter()
        ndk = np.zeros((self.n_docs, self.K), dtype=np.int32)
        for c in collected:
            ndk[c["d0"]:c["d0"] + c["ndk"].shape[0]] = c["ndk"]
        from .update import doc_loglik
        ll_doc = doc_loglik(ndk.sum(axis=1, dtype=np.int64), self.alpha, self.K,
                            lambda a, t: K.sum_lgamma(ndk.ravel(), a, t))
        self.loglik = self.word_loglik() + ll_doc
        model = {"word_topic": self.word_table(), "doc_topic": ndk, "topic_totals": self.nk,
                 "alpha": np.float64(self.alpha), "beta": np.float64(self.beta),
                 "loglik": np.float64(self.loglik)}
        if self.vocab is not None:
            model["vocab"] = np.asarray(self.vocab, dtype=str)
        return model

    def summary(self):
        wall = (self.t1 or time.perf_counter()) - (self.t0 or time.perf_counter())
        return {"topics": self.K, "tokens": self.n_tokens, "sweeps": self.updates / self.n_tokens,
                "loglik": self.loglik, "schedule": self.mode,
                "tokens_per_s": self.updates / wall if wall > 0 else float("nan")}
