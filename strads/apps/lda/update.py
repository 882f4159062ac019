"""LDA worker: its documents' tokens, their topics z and the doc-topic counts n_dk, and
its part of the word-topic counts (the model lives on the workers, not on rank 0).

Tokens are stored word-major (``words``, ``docs``, ``z``), cut at the vocabulary slice
boundaries: for each slice, the worker's tokens of that slice sorted by word, so the
sampler reads them in sequence. Each document's non-zero topic counts are a compact
(topic, count) list in the document's own token range.

Word-topic counts: ``model`` schedule, the s + 1 slices this worker holds (packed, one
per group; the one of the round is unpacked into a buffer, sampled, packed and passed on
to the worker that samples it next, see schedule.slice_of); ``data`` schedule, a copy
of the whole table, reconciled with the other workers' changes every round. The topic
totals n_k are the same on every worker: each round's changes are added up among the
workers (allgather, in worker order) before the round ends.

Log-likelihood and ``check`` invariants are computed here, over what each worker holds
(its slices: in the data schedule, its share of them), and summed in worker order; worker
0 returns the sums to rank 0.
"""
import math

import numpy as np

from ...engine import Update
from . import kernels as K
from .schedule import slice_of


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


def totals_loglik(nk, n_words, beta):
    """K lgamma(V beta) - sum_k lgamma(n_k + V beta): the topic totals' part of the word
    half of log p(w, z)."""
    lg = np.vectorize(math.lgamma)
    vb = n_words * beta
    return float(nk.shape[0] * lg(vb) - lg(nk + vb).sum())


class LDAUpdate(Update):
    # the worker's tokens (words, documents) and their layout: setup() gives them again
    checkpoint_skip = ("words", "docs", "lengths", "cuts", "blocks", "beta_table")

    def __init__(self, shard):
        self.worker, self.seed = int(shard["worker"]), int(shard["seed"])
        self.W, self.s1 = int(shard["n_workers"]), int(shard["s1"])
        self.mode = str(shard["mode"])
        self.K, self.V = int(shard["K"]), int(shard["V"])
        self.alpha, self.beta = float(shard["alpha"]), float(shard["beta"])
        self.vbeta = float(shard["V"]) * self.beta
        self.check = bool(shard["check"])
        self.n_tokens = int(shard["n_tokens"])
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
        self.beta_table = K.lgamma_table(self.beta, 4096)
        # the slices whose word half of the log-likelihood (and check sums) this worker
        # adds up in the data schedule: those it would hold first in the model schedule
        self.share = [slice_of(self.worker, g, self.W, self.s1) for g in range(self.s1)]
        if self.mode == "model":
            # slot g: (slice id, packed counts) of the group-g slice this worker samples
            # next; ids travel with the counts, to check the rotation
            self.held = [[int(m), tuple(np.array(a) for a in t)]
                         for m, t in zip(self.share, shard["slices"])]
            n_rows = int(np.diff(self.cuts).max(initial=0))
            self.nwk = np.zeros((n_rows, self.K), np.int32)  # the slice in hand
        else:
            self.nwk = K.unpack(shard["nwk"], np.empty((self.V, self.K), np.int32))
        P = 1 << max(0, int(self.K - 1).bit_length())
        self.tree = np.zeros(2 * P)
        self.cum = np.zeros(max(1, min(self.K, int(self.lengths.max(initial=0)))))

    def report(self):
        """The initial state's log-likelihood pieces (rank 0 adds them in worker order)."""
        return {"ll": self._loglik_parts()}

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
        K.sum_lgamma(np.ones(2, np.int32), 0.1, K.lgamma_table(0.1, 2))

    def _sample(self, round, m, nwk):
        b0, b1 = self.blocks[m], self.blocks[m + 1]
        K.sample_block(self.words[b0:b1], self.docs[b0:b1], self.z[b0:b1], self.dmeta,
                       self.dlist, nwk, self.cuts[m], self.nk,
                       self.alpha, self.beta, self.vbeta,
                       round_seed(self.seed, self.worker, round), self.tree, self.cum)
        return int(b1 - b0)

    def _mine(self):
        """(first word, packed counts) of every slice this worker answers for."""
        if self.mode == "model":
            return [(int(self.cuts[m]), t) for m, t in self.held]
        return [(int(self.cuts[m]), K.pack(self.nwk[self.cuts[m]:self.cuts[m + 1]]))
                for m in self.share]

    def _loglik_parts(self):
        """(word half over this worker's slices, document half over its documents); worker
        0's word half includes the topic totals' term."""
        word = sum(K.sum_lgamma(t[2], self.beta, self.beta_table) for _, t in self._mine())
        if self.worker == 0:
            word += totals_loglik(self.nk, self.V, self.beta)
        doc = doc_loglik(self.lengths, self.alpha, self.K, lambda a, t:
                         K.sum_lgamma_lists(self.dmeta, self.dlist, a, t))
        return word, doc

    def update(self, task):
        r, peers = task["round"], self.peers
        nk0 = self.nk.copy()
        mine = {}
        if self.mode == "model":
            g = r % self.s1
            m = slice_of(self.worker, r, self.W, self.s1)
            if self.held[g][0] != m:
                raise RuntimeError(f"worker {self.worker} holds slice {self.held[g][0]} "
                                   f"in round {r}, expected {m}: the rotation broke")
            rows = K.unpack(self.held[g][1], self.nwk[:self.cuts[m + 1] - self.cuts[m]])
            tokens = self._sample(r, m, rows)
            self.held[g][1] = K.pack(rows)
        else:  # data-parallel: every slice, against this worker's copy of the table
            nwk0 = self.nwk.copy()
            tokens = sum(self._sample(r, m, self.nwk[self.cuts[m]:self.cuts[m + 1]])
                         for m in range(len(self.cuts) - 1))
            np.subtract(self.nwk, nwk0, out=nwk0)
            mine["dnwk"] = K.pack(nwk0)
            del nwk0
        mine["dnk"] = self.nk - nk0
        mine["tokens"] = tokens
        # the round's changes, every worker's, added in worker order (integers: any
        # order would give the same counts; the order keeps it evidently so)
        got = peers.allgather(mine)
        self.nk = nk0
        for w, part in enumerate(got):
            self.nk += part["dnk"]
            if w != self.worker and "dnwk" in part:
                K.add_packed(*part["dnwk"], self.nwk)
        if self.mode == "model":  # to the worker that samples this slice next
            self.held[g] = list(peers.shift(self.held[g], -1))
        if not (task["ll"] or self.check):
            return None if self.worker else {"tokens": sum(p["tokens"] for p in got)}
        facts = {}
        if task["ll"]:
            facts["ll"] = self._loglik_parts()
        if self.check:
            facts.update(self._check_facts())
        every = peers.allgather(facts)
        if self.worker:
            return None
        out = {"tokens": sum(p["tokens"] for p in got)}
        if task["ll"]:
            out["ll"] = (sum(f["ll"][0] for f in every) + sum(f["ll"][1] for f in every))
        if self.check:
            out["invariant"] = self._invariant(every)
        return out

    def _check_facts(self):
        ndk = self.doc_topic()
        wsum, wmin = np.zeros(self.K, np.int64), 0
        for _, (indptr, idx, cnt) in self._mine():
            np.add.at(wsum, idx.astype(np.int64), cnt)
            wmin = min(wmin, int(cnt.min(initial=0)))
        return {"nk": self.nk, "wsum": wsum, "wmin": wmin,
                "dsum": ndk.sum(axis=0, dtype=np.int64), "dmin": int(ndk.min(initial=0)),
                "dok": bool(np.array_equal(ndk.sum(axis=1), self.lengths) and
                            np.array_equal(ndk, np.bincount(
                                self.docs.astype(np.int64) * self.K + self.z,
                                minlength=ndk.size).reshape(ndk.shape)))}

    def _invariant(self, every):
        """What is wrong with the counts after the round (None: nothing); they hold
        exactly at any staleness, since every worker ends each round with every other
        worker's changes and slices never overlap."""
        nk = self.nk
        if not all(np.array_equal(f["nk"], nk) for f in every):
            return "the workers' topic totals differ"
        if nk.sum() != self.n_tokens or nk.min() < 0:
            return (f"topic totals sum to {nk.sum()} (min {nk.min()}), expected "
                    f"{self.n_tokens} tokens")
        if min(f["wmin"] for f in every) < 0:
            return "a word-topic count is negative"
        if not np.array_equal(sum(f["wsum"] for f in every), nk):
            return "word-topic column sums differ from the topic totals"
        if min(f["dmin"] for f in every) < 0:
            return "a doc-topic count is negative"
        if not all(f["dok"] for f in every):
            return "doc-topic counts differ from the tokens' topics"
        if not np.array_equal(sum(f["dsum"] for f in every), nk):
            return "doc-topic column sums differ from the topic totals"
        return None

    def collect(self):
        return {"d0": self.d0, "ndk": self.doc_topic(), "nk": self.nk,
                "rows": self._mine()}

    def doc_topic(self):
        return K.doc_topic_dense(self.dmeta, self.dlist, self.K)
