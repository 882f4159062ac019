"""LDA worker: its documents' tokens, their topics z and the doc-topic counts n_dk.

Tokens are stored word-major (``words``, ``docs``, ``z``), cut at the vocabulary slice
boundaries: for each slice, the worker's tokens of that slice sorted by word, so the
sampler reads them in sequence. Each document's non-zero topic counts are a compact
(topic, count) list in the document's own token range. The topic totals n_k are a local
copy: the last global totals the scheduler sent plus this worker's own changes of the
rounds they do not include yet.
"""
from collections import deque

import numpy as np

from ...engine import Update
from . import kernels as K


def round_seed(seed, worker, round):
    """The sampler's seed of one worker in one round: independent of the transport."""
    return np.random.SeedSequence([seed, worker, round]).generate_state(1, np.uint64)[0]


def doc_loglik(lengths, alpha, n_topics, sum_counts):
    """sum_d [lgamma(K alpha) - lgamma(K alpha + n_d) + sum_k lgamma(n_dk + alpha) -
    lgamma(alpha)] (the document half of log p(w, z)); ``sum_counts(alpha, table)`` gives
    the sum over the non-zero n_dk."""
    ka = K.lgamma_table(n_topics * alpha, int(lengths.max(initial=0)) + 1)
    return float(ka[0] * lengths.shape[0] - ka[lengths].sum()
                 + sum_counts(alpha, K.lgamma_table(alpha, 4096)))


class LDAUpdate(Update):
    # the worker's tokens (words, documents) and their layout: setup() gives them again
    checkpoint_skip = ("words", "docs", "lengths", "cuts", "blocks")
    def __init__(self, shard):
        self.worker, self.seed = int(shard["worker"]), int(shard["seed"])
        self.K = int(shard["K"])
        self.alpha, self.beta = float(shard["alpha"]), float(shard["beta"])
        self.vbeta = float(shard["V"]) * self.beta
        self.check = bool(shard["check"])
        self.d0 = int(shard["d0"])
        self.lengths = np.asarray(shard["lengths"], dtype=np.int64)
        words = np.asarray(shard["words"], dtype=np.int32)
        z = np.asarray(shard["z"], dtype=np.int32)
        n_docs = self.lengths.shape[0]
        docs = np.repeat(np.arange(n_docs, dtype=np.int32), self.lengths)
        self.dmeta = np.empty((n_docs, 2), np.int64)
        # (topic, count) pairs: 16-bit when they fit, to halve the memory traffic
        small = self.K <= 65536 and self.lengths.max(initial=0) < 65536
        self.dlist = np.empty((z.shape[0], 2), np.uint16 if small else np.int32)
        K.doc_lists(self.lengths, docs, z, self.dmeta, self.dlist, self.K)
        order = np.argsort(words, kind="stable")
        self.words, self.docs, self.z = words[order], docs[order], z[order]
        self.cuts = np.asarray(shard["cuts"], dtype=np.int64)
        self.blocks = np.searchsorted(self.words, self.cuts).astype(np.int64)
        self.nk = np.array(shard["nk"], dtype=np.int64)
        n_rows = int(np.diff(self.cuts).max(initial=0))
        if shard.get("nwk") is None:  # model-parallel: a buffer for the slice in hand
            self.nwk = np.zeros((n_rows, self.K), np.int32)
        else:
            self.nwk = K.unpack(shard["nwk"], np.empty((shard["V"], self.K), np.int32))
        # (round, dnk, dnwk) of own rounds the last sync did not include, oldest first,
        # and the sum of their dnk: a sync costs O(K) plus the rounds it retires, however
        # many rounds are in flight (a list filtered in every sync cost O(staleness))
        self.pending = deque()
        self.pending_dnk = np.zeros(self.K, np.int64)
        P = 1 << max(0, int(self.K - 1).bit_length())
        self.tree = np.zeros(2 * P)
        self.cum = np.zeros(max(1, min(self.K, int(self.lengths.max(initial=0)))))

    @classmethod
    def warmup(cls):
        z, docs = np.zeros(2, np.int32), np.zeros(2, np.int32)
        for dtype in (np.uint16, np.int32):
            dmeta, dlist = np.zeros((1, 2), np.int64), np.zeros((2, 2), dtype)
            K.doc_lists(np.array([2], np.int64), docs, z, dmeta, dlist, 2)
            K.sample_block(np.zeros(2, np.int32), docs, z, dmeta, dlist,
                           np.array([[2, 0]], np.int32), 0, np.array([2, 0], np.int64), 0.1,
                           0.1, 0.1, np.uint64(1), np.zeros(4), np.zeros(2))
            K.sum_lgamma_lists(dmeta, dlist, 0.1, K.lgamma_table(0.1, 2))
            K.doc_topic_dense(dmeta, dlist, 2)
        K.unpack(K.pack(np.ones((1, 2), np.int32)), np.empty((1, 2), np.int32))

    def _sample(self, round, m, nwk):
        b0, b1 = self.blocks[m], self.blocks[m + 1]
        K.sample_block(self.words[b0:b1], self.docs[b0:b1], self.z[b0:b1], self.dmeta,
                       self.dlist, nwk, self.cuts[m], self.nk,
                       self.alpha, self.beta, self.vbeta,
                       round_seed(self.seed, self.worker, round), self.tree, self.cum)
        return int(b1 - b0)

    def update(self, task):
        r = task["round"]
        nk0 = self.nk.copy()
        if task["mode"] == "model":
            m = task["slice"]
            nwk = K.unpack(task["nwk"], self.nwk[:self.cuts[m + 1] - self.cuts[m]])
            tokens = self._sample(r, m, nwk)
            out = {"nwk": K.pack(nwk), "tokens": tokens}
            dnwk = None
        else:  # data-parallel: every slice, against this worker's copy of the table
            nwk0 = self.nwk.copy()
            tokens = sum(self._sample(r, m, self.nwk[self.cuts[m]:self.cuts[m + 1]])
                         for m in range(len(self.cuts) - 1))
            np.subtract(self.nwk, nwk0, out=nwk0)
            dnwk = K.pack(nwk0)
            out = {"dnwk": dnwk, "tokens": tokens}
        out["dnk"] = self.nk - nk0
        self.pending.append((r, out["dnk"], dnwk))
        self.pending_dnk += out["dnk"]
        if task["ll"]:
            out["ll_doc"] = doc_loglik(self.lengths, self.alpha, self.K, lambda a, t:
                                       K.sum_lgamma_lists(self.dmeta, self.dlist, a, t))
        if self.check:
            ndk = self.doc_topic()
            out["ndk_sum"] = ndk.sum(axis=0, dtype=np.int64)
            out["ndk_min"] = int(ndk.min(initial=0))
            out["ndk_ok"] = bool(np.array_equal(ndk.sum(axis=1), self.lengths) and
                                 np.array_equal(ndk, np.bincount(
                                     self.docs.astype(np.int64) * self.K + self.z,
                                     minlength=ndk.size).reshape(ndk.shape)))
        return out

    def apply(self, sync):
        while self.pending and self.pending[0][0] <= sync["round"]:
            self.pending_dnk -= self.pending.popleft()[1]  # rounds come and go in order
        self.nk = sync["nk"] + self.pending_dnk
        if "nwk" in sync:
            K.unpack(sync["nwk"], self.nwk)
            for _, _, dnwk in self.pending:
                K.add_packed(*dnwk, self.nwk)

    def collect(self):
        return {"d0": self.d0, "ndk": self.doc_topic()}

    def doc_topic(self):
        return K.doc_topic_dense(self.dmeta, self.dlist, self.K)
