"""LDA on the scheduler rank: counters, the log-likelihood history and the final model, put
together from the workers' parts (docs/apps/lda.md)."""
import time

import numpy as np

from ...api import Aggregate
from . import kernels as K
from .update import doc_lengths_loglik, totals_loglik


class InvariantError(RuntimeError):
    """The counts disagree with each other (only checked with ``check=True``)."""


class LDAAggregate(Aggregate):
    #: the vocabulary (words for the model file), the corpus's sizes and the flags:
    #: setup() gives them again
    checkpoint_skip = ("vocab", "mode", "check", "V", "K", "n_docs", "n_tokens", "alpha",
                       "beta", "_start", "_base")

    def __init__(self, n_words, n_topics, n_docs, n_tokens, alpha, beta, mode, vocab=None,
                 check=False):
        self.mode, self.check = mode, check
        self.V, self.K = n_words, n_topics
        self.n_docs, self.n_tokens = n_docs, n_tokens
        self.alpha, self.beta = alpha, beta
        self.vocab = vocab
        self.updates = 0
        self.sweeps = 0
        self.loglik = float("nan")
        self._prev_ll = None
        self._new_ll = False
        self.sampled_s = 0.0  # the sampler's seconds, first round to last result, all runs
        self._start = self._base = None  # this process's first round: when, clock then

    def begin(self, reports):
        # the corpus's sizes, as the workers agreed on them (they read or drew it)
        r = reports[0]
        self.V, self.n_docs, self.n_tokens = r["n_words"], r["n_docs"], r["n_tokens"]
        # the initial state's log-likelihood, added as the rounds' are
        self.loglik = (sum(r["ll"][0] for r in reports) + sum(r["ll"][1] for r in reports))
        self._start, self._base = time.perf_counter(), self.sampled_s

    def aggregate(self, round, task, partials):
        part = partials[0]  # the sums of every worker's (the others answer None)
        now = time.perf_counter()
        if self._start is None:  # a resumed run's: from its first result on
            self._start, self._base = now, self.sampled_s
        self.sampled_s = self._base + now - self._start
        if isinstance(task, list):  # (--schedulers: one entry per worker, alike but the slice)
            task = task[0]
        self.updates += part["tokens"]
        if self.check and part["invariant"] is not None:
            raise InvariantError(f"after round {round}: {part['invariant']}")
        if task["ll"]:
            self.sweeps += 1
            self.loglik = part["ll"]
            self._new_ll = True
        return None  # nothing to apply: the workers reconciled among themselves

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

    def load_state(self, state):
        super().load_state(state)
        # a resumed run's clock goes on from its seconds at its first result (the workers'
        # reading of their parts, after this, is not the sampler's time)
        self._start = None
        prev = self._prev_ll  # (a fresh one's None: the loader could not compare it)
        if prev is not None and not (isinstance(prev, (float, np.floating))
                                     and np.isfinite(prev)):
            raise ValueError("_prev_ll: not a log-likelihood")

    def finish(self, collected):
        wt = np.zeros((self.V, self.K), dtype=np.int32)
        ndk = np.zeros((self.n_docs, self.K), dtype=np.int32)
        for c in collected:
            K.add_packed(*c["ndk"], ndk[c["d0"]:c["d0"] + c["ndk"][0].shape[0] - 1])
            for v0, packed in c["rows"]:
                K.unpack(packed, wt[v0:v0 + packed[0].shape[0] - 1])
        nk = np.asarray(collected[0]["nk"], dtype=np.int64)
        ll_doc = float(doc_lengths_loglik(ndk.sum(axis=1, dtype=np.int64), self.alpha, self.K)
                       + K.sum_lgamma(ndk.ravel(), self.alpha,
                                      K.lgamma_table(self.alpha, 4096)))
        self.loglik = (totals_loglik(nk, self.V, self.beta) + K.sum_lgamma(
            wt.ravel(), self.beta, K.lgamma_table(self.beta, 4096)) + ll_doc)
        model = {"word_topic": wt, "doc_topic": ndk, "topic_totals": nk,
                 "alpha": np.float64(self.alpha), "beta": np.float64(self.beta),
                 "loglik": np.float64(self.loglik)}
        vocab = self.vocab if self.vocab is not None else collected[0].get("vocab")
        if vocab is not None:
            model["vocab"] = np.asarray(vocab, dtype=str)
        return model

    def summary(self):
        wall = self.sampled_s
        return {"topics": self.K, "tokens": self.n_tokens, "sweeps": self.updates / self.n_tokens,
                "loglik": self.loglik, "schedule": self.mode,
                "tokens_per_s": self.updates / wall if wall > 0 else float("nan")}
