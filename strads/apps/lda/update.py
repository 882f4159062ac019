"""LDA worker: its documents' tokens, their topics and document-topic counts, and its part
of the word-topic counts (docs/apps/lda.md)."""
import functools
import math

import numpy as np

from ...api import Update
from ...io import memory
from ...io.agree import alike, group_starts, tally
from . import data, kernels as K
from .schedule import slice_of


@functools.lru_cache(maxsize=16)
def _run_key(seed):
    return np.random.SeedSequence([seed, 2]).generate_state(1, np.uint64)[0]


def round_seed(seed, worker, round):
    """The sampler's seed of one worker in one round: independent of the transport. The
    seed's key from a SeedSequence once, then hashed with the worker and the round (a
    SeedSequence every round costs as much as a small corpus's bookkeeping)."""
    return np.uint64(K.round_seed(_run_key(seed), worker, round))


def doc_lengths_loglik(lengths, alpha, n_topics):
    """sum_d [lgamma(K alpha) - lgamma(K alpha + n_d)]: the part of the document half of
    log p(w, z) that depends on the documents' lengths alone (the rest: sum_lgamma of the
    n_dk, with ``alpha``)."""
    ka = K.lgamma_table(n_topics * alpha, int(lengths.max(initial=0)) + 1)
    return ka[0] * lengths.shape[0] - ka[lengths].sum()


def totals_loglik(nk, n_words, beta):
    """K lgamma(V beta) - sum_k lgamma(n_k + V beta): the topic totals' part of the word
    half of log p(w, z)."""
    vb = n_words * beta
    return float(nk.shape[0] * math.lgamma(vb) - K.sum_lgamma_shifted(nk, vb))


def dense_topics(n_topics, n_tokens, n_docs, n_workers):
    """Whether the documents' topic counts are a dense table sampled by
    :func:`kernels.sample_dense`, rather than compact lists for :func:`kernels.sample_block`
    (docs/apps/lda.md)."""
    per_worker = -(-n_docs // max(1, n_workers))
    return (n_topics <= DENSE_MAX_K and n_topics * n_docs <= DENSE_PER_TOKEN * n_tokens
            and 2 * n_topics * per_worker <= DENSE_MAX_BYTES)


DENSE_MAX_K = 256
DENSE_PER_TOKEN = 4
DENSE_MAX_BYTES = 1 << 20


def _within(name, a, hi):
    """ValueError unless array ``a`` (or None) holds only values in 0 .. hi - 1."""
    if a is not None and a.size and (a.min() < 0 or a.max() >= hi):
        raise ValueError(f"{name}: {a.min()} .. {a.max()} is outside 0 .. {hi - 1}")


class LDAUpdate(Update):
    checkpoint_sized = ("held",)  # the slices in hand, packed: their size varies
    # the worker's tokens' words and their layout: setup() gives them again (the tokens'
    # documents are kept: a resume on other workers finds each document's topics by them)
    checkpoint_skip = ("wptr", "lengths", "cuts", "blocks", "beta_table", "vocab",
                       "dense", "resident", "alpha_table", "_lengths_ll",
                       # the run's sizes and flags, and the sampler's scratch: a
                       # checkpoint never sets them
                       "worker", "seed", "W", "s1", "mode", "K", "V", "alpha", "beta",
                       "vbeta", "check", "n_tokens", "n_docs", "share", "mark", "extra",
                       "tree", "cum")

    def __init__(self, shard):
        """The worker reads or draws its own documents (``shard["source"]``) or takes the
        rows rank 0 sent, then the workers agree on the corpus and the first counts."""
        peers = self.peers
        src = shard["source"]
        if src["kind"] == "file":
            part = data.read_part(src["path"], src["fmt"], src["vocab"], src["min_count"],
                                  peers)
        elif src["kind"] == "corpus":
            part = data.corpus_part(*src["args"], peers=peers)
        else:  # rows of a matrix given to rank 0
            part = data.Part(src["d0"], src["indptr"], src["indices"], src["counts"],
                             src["n_docs"], src["n_words"], src["n_tokens"], src["nnz"],
                             None)
        self.worker, self.seed = peers.rank, int(shard["seed"])
        self.W, self.s1 = peers.size, int(shard["s1"])
        self.mode = str(shard["mode"])
        self.K, self.V = int(shard["K"]), int(part.n_words)
        self.alpha, self.beta = float(shard["alpha"]), float(shard["beta"])
        self.vbeta = float(self.V) * self.beta
        self.check = bool(shard["check"])
        self.n_tokens, self.n_docs = int(part.n_tokens), int(part.n_docs)
        self.d0 = int(part.d0)
        self.vocab = part.vocab if self.worker == 0 else None
        self.lengths = part.lengths
        if part.counts.dtype != np.int32 and self.lengths.max(initial=0) <= data.INT32_MAX:
            # (an entry counts at most its document's tokens): 32-bit counts, held
            # beside the tokens' documents at by_word, the set-up's peak
            part.counts = part.counts.astype(np.int32)
        word_counts = peers.allreduce(tally(part.indices, self.V, weights=part.counts))
        i = int(np.argmax(self.lengths)) if self.lengths.shape[0] else 0
        longest = peers.allgather((int(self.lengths.max(initial=0)), -(self.d0 + i)))
        from . import check_run
        n, d = max(longest)
        self.cuts = alike(peers, check_run, self.n_docs, self.V, (n, -d), word_counts,
                          self.n_tokens, part.nnz, self.K, self.alpha, self.beta, self.W,
                          self.s1 - 1, self.mode, None, shard["flag"])
        del word_counts
        # the tokens sorted by word, then document, without an argsort and its permuted
        # copies (they made the load's peak: docs/scaling.md)
        self.wptr, self.docs = data.by_word(part.indptr, part.indices, part.counts, self.V)
        del part
        z = np.empty(self.docs.shape[0], K.topic_dtype(self.K))
        key = np.random.SeedSequence([self.seed, 3]).generate_state(1, np.uint64)[0]
        K.initial_topics(self.lengths, self.d0, key, self.K, z)
        self.dense = dense_topics(self.K, self.n_tokens, self.n_docs, self.W)
        self._count(z)
        del z
        self.z = np.empty(self.docs.shape[0], K.topic_dtype(self.K))
        K.initial_topics_at(self.lengths, self.d0, self.docs, key, self.K, self.z)
        self.blocks = self.wptr[self.cuts]
        self.beta_table = K.lgamma_table(self.beta, 4096)
        self.alpha_table = K.lgamma_table(self.alpha, 4096)
        self._lengths_ll = (None, 0.0)  # (lengths, doc_lengths_loglik of them)
        # the slices whose word half of the log-likelihood (and check sums) this worker
        # adds up in the data schedule: those it would hold first in the model schedule
        self.share = [slice_of(self.worker, g, self.W, self.s1) for g in range(self.s1)]
        # one worker, one slice: the slice never leaves, so it is never packed
        self.resident = self.mode == "model" and self.W == 1 and self.s1 == 1
        self._slices()
        self._scratch()

    def _count(self, z):
        """The counts of the tokens' topics ``z`` (in document order): each document's,
        and the topic totals over every worker's tokens."""
        n_docs, dtype = self.lengths.shape[0], self._count_dtype()
        if self.dense:  # a dense documents x topics table
            self.dmeta = self.dlist = None
            self.ndk = np.zeros((n_docs, self.K), dtype)
            K.doc_table(self.lengths, z, self.ndk)
        else:  # each document's (topic, count) pairs
            self.ndk = None
            self.dmeta = np.empty((n_docs, 2), np.int64)
            self.dlist = np.empty((self._offsets()[-1], 2), dtype)
            K.doc_lists(self.lengths, z, self.dmeta, self.dlist, self.K)
        self.nk = self.peers.allreduce(tally(z, self.K))

    def _count_dtype(self):
        """16-bit counts when the topics and the documents' lengths fit (half the memory
        traffic), else 32-bit."""
        return K.topic_dtype(max(self.K, int(self.lengths.max(initial=0)) + 1))

    def _slices(self):
        """The word-topic counts: the slices this worker holds first (model schedule), or
        its copy of the whole table (data schedule), summed over every worker's tokens."""
        peers = self.peers
        if self.mode == "model":
            self.held = self._first_slices()
            if self.resident:  # the one slice never moves: kept unpacked, sampled in place
                self.nwk = K.unpack(self.held[0][1], np.empty((self.V, self.K), np.int32))
            else:  # the samplers' buffer for the packed slice's rows, one at a time
                self.nwk = np.zeros((1, self.K), np.int32)
        else:
            mine = K.pack_tokens(self.wptr, self.z, self.K)
            self.nwk = np.zeros((self.V, self.K), np.int32)
            for part in peers.allgather(mine):  # every worker's counts, in worker order
                K.add_packed(*part, self.nwk)

    def reshard(self, olds, first):
        """A checkpoint of another number of workers: each of this worker's documents
        takes its tokens' topics from the old worker that held it (the tokens of one
        document and word in the same order in both layouts: sorted by word, then
        document); the counts are then made again from the topics, as at the start."""
        z, mine = np.empty_like(self.z), self.d0 + self.docs.astype(np.int64)
        for start, count, old in olds:
            theirs = old["d0"] + old["docs"].astype(np.int64)
            lo, hi = max(start, self.d0), min(self.d0 + self.rows, start + count)
            got = old["z"][(theirs >= lo) & (theirs < hi)]
            _within("z", got, self.K)  # (before it is narrowed to z's type)
            at = (mine >= lo) & (mine < hi)
            if got.shape[0] != np.count_nonzero(at):
                raise ValueError(f"documents {lo}..{hi - 1}: {got.shape[0]} tokens in the "
                                 f"checkpoint, {np.count_nonzero(at)} in the data")
            z[at] = got
        self.z = z
        order = np.argsort(self.docs, kind="stable")
        self._count(z[order])
        self._slices()
        self._scratch()

    def _scratch(self):
        """The sampler's buffers: the F+ tree and a document's cumulative sums, or the
        dense sampler's three per-topic vectors."""
        # the packed slice's scratch (kernels, "packed"): mark is all zeros between rounds
        self.mark, self.extra = np.zeros(self.K, np.uint8), np.zeros(self.K, np.int64)
        if self.dense:
            self.tree, self.cum = np.zeros((3, self.K)), None
        else:
            P = 1 << max(0, int(self.K - 1).bit_length())
            self.tree = np.zeros(2 * P)
            self.cum = np.zeros(max(1, min(self.K, int(self.lengths.max(initial=0)))))

    # -- rebalancing (--rebalance): documents move between neighbouring workers --------
    # (what moves and what stays: docs/apps/lda.md, "update.py: rebalancing")
    @property
    def rows(self):
        """The number of documents this worker holds."""
        return int(self.lengths.shape[0])

    @property
    def words(self):
        """The tokens' words, int32 (the worker keeps each word's first token, wptr)."""
        return np.repeat(np.arange(self.V, dtype=np.int32), np.diff(self.wptr))

    def _offsets(self):
        """Each document's first list slot (and the end): min(length, K) slots each."""
        return np.concatenate([[0], np.cumsum(np.minimum(self.lengths, self.K))]).astype(
            np.int64)

    def give(self, end, count):
        """Remove the first (``"head"``) or last (``"tail"``) ``count`` documents, with
        their tokens and topic lists, and return them."""
        D, count = self.rows, int(count)
        if end not in ("head", "tail") or not 0 <= count <= D:
            raise ValueError(f"give({end!r}, {count}) of {D} documents")
        lo, hi = (0, count) if end == "head" else (D - count, D)
        off = self._offsets()

        def part(d):  # the lengths and topic counts of documents d (a slice)
            if self.dense:
                return {"lengths": self.lengths[d].copy(), "ndk": self.ndk[d].copy()}
            return {"lengths": self.lengths[d].copy(), "m": self.dmeta[d, 1].copy(),
                    "dlist": self.dlist[off[d.start]:off[d.stop]].copy()}
        moved = (self.docs >= lo) & (self.docs < hi)  # word-major order kept
        keep = ~moved
        words = self.words
        out = dict(part(slice(lo, hi)), words=words[moved], z=self.z[moved],
                   docs=(self.docs[moved] - lo).astype(np.int32))
        docs = self.docs[keep]
        if end == "head":
            docs -= count
            self.d0 += count
        stay = part(slice(hi, D) if end == "head" else slice(0, lo))
        self.lengths, self.ndk, self.dlist = stay["lengths"], stay.get("ndk"), stay.get("dlist")
        self.docs, self.z = docs.astype(np.int32), self.z[keep]
        self.wptr = group_starts(words[keep], self.V)
        self._relayout(stay.get("m"))
        return out

    def take(self, end, rows):
        """Add documents another worker gave before the first (``"head"``) or after the
        last (``"tail"``) one held."""
        if end not in ("head", "tail"):
            raise ValueError(f"take({end!r}, ...)")
        n, D = int(rows["lengths"].shape[0]), self.rows
        mine = {"lengths": self.lengths, "words": self.words, "z": self.z, "docs": self.docs}
        if self.dense:
            mine["ndk"] = self.ndk
        else:
            mine.update(m=self.dmeta[:, 1], dlist=self.dlist)
        if end == "head":
            parts = [rows, {**mine, "docs": self.docs + np.int32(n)}]
            self.d0 -= n
        else:
            parts = [mine, {**rows, "docs": np.asarray(rows["docs"]) + np.int32(D)}]
        keys = ("lengths", "words", "z", "docs") + (() if self.dense else ("m",))
        cat = {k: np.concatenate([np.asarray(p[k]) for p in parts]) for k in keys}
        table = "ndk" if self.dense else "dlist"
        dtype = np.result_type(*(np.asarray(p[table]).dtype for p in parts))
        joined = np.concatenate([np.asarray(p[table]).astype(dtype, copy=False)
                                 for p in parts])
        setattr(self, table, joined.reshape(-1, self.K if self.dense else 2))
        # both parts are sorted by (word, document): a stable sort by word merges them
        order = np.argsort(cat["words"], kind="stable")
        self.wptr = group_starts(cat["words"][order], self.V)
        self.docs = cat["docs"][order].astype(np.int32, copy=False)
        self.z = cat["z"][order].astype(K.topic_dtype(self.K), copy=False)
        self.lengths = cat["lengths"].astype(np.int64, copy=False)
        self._relayout(cat.get("m"))

    def _relayout(self, m):
        """Everything indexed by the tokens or the local documents, after a move: the
        slices' token blocks, each document's list offset (``_offsets``) and list
        length ``m``, the lists' width (as at the start) and the sampler's buffers."""
        n_docs, dtype = self.lengths.shape[0], self._count_dtype()
        if self.dense:
            self.ndk = self.ndk.astype(dtype, copy=False)
            if self.ndk.shape[0] != n_docs:
                raise RuntimeError(f"worker {self.worker}: {self.ndk.shape[0]} table rows "
                                   f"for {n_docs} documents after a move")
        else:
            off = self._offsets()
            self.dmeta = np.empty((n_docs, 2), np.int64)
            self.dmeta[:, 0] = off[:-1]
            self.dmeta[:, 1] = m
            self.dlist = self.dlist.astype(dtype, copy=False)
            if self.dlist.shape[0] != off[-1]:
                raise RuntimeError(f"worker {self.worker}: {self.dlist.shape[0]} list slots "
                                   f"for {off[-1]} after a move")
        self.blocks = self.wptr[self.cuts]
        self._scratch()

    def _first_slices(self):
        """The s + 1 slices this worker holds first (slice g W + w for group g), their
        counts summed over every worker's tokens: each worker packs its counts of every
        slice and hands them to the slice's holder (:meth:`Peers.alltoall`)."""
        W, me, s1, cuts = self.W, self.worker, self.s1, self.cuts
        packs = [K.pack_tokens(self.wptr[cuts[m]:cuts[m + 1] + 1], self.z, self.K)
                 for m in range(W * s1)]
        pieces = [[packs[g * W + o] for g in range(s1)] for o in range(W)]
        del packs  # (each worker's pieces are freed as they are sent)
        got = self.peers.alltoall(pieces)
        held = []
        for g in range(s1):
            held.append([g * W + me, K.sum_packed([got[w][g] for w in range(W)], self.K)])
            for w in range(W):
                got[w][g] = None
        return held

    def state(self):
        state = super().state()
        if self.mode == "model":  # the slice in hand: unpacked afresh every round
            if self.resident:  # (or the one slice itself, kept unpacked)
                state.pop("held", None)
            else:
                state.pop("nwk", None)
        return state

    def load_state(self, state):
        super().load_state(state)
        # the values the kernels index memory with, in range (ValueError: refused)
        n_docs, K, held = self.lengths.shape[0], self.K, []
        _within("z", self.z, K)
        _within("docs", self.docs, n_docs)
        for name in ("nk", "ndk", "nwk"):
            _within(name, getattr(self, name, None), np.inf)
        if self.dmeta is not None:  # document d's list: its own slots (_offsets)
            off, m = self._offsets(), self.dmeta[:, 1]
            slots, start = np.diff(off), self.dmeta[:, 0]
            if (start != off[:-1]).any() or (m < 0).any() or \
                    (m > slots).any() or self.dlist.shape[0] != off[-1]:
                raise ValueError("dmeta: not the documents' lists")
            used = np.arange(self.dlist.shape[0]) - np.repeat(start, slots) < \
                np.repeat(m, slots)
            _within("dlist's topics", self.dlist[used, 0], K)
            _within("dlist's counts", self.dlist[used, 1], np.inf)
        if self.mode == "model" and not self.resident:
            held = self.held
        for g, h in enumerate(held):  # [slice, (indptr, topics, counts)] in hand
            name = f"held/{g}"
            if not (isinstance(h, list) and len(h) == 2 and type(h[0]) is int and
                    0 <= h[0] < self.cuts.shape[0] - 1 and isinstance(h[1], tuple)):
                raise ValueError(f"{name} is not a slice of this run's")
            indptr, idx, cnt = h[1]
            steps = np.diff(indptr)
            if indptr.shape[0] != self.cuts[h[0] + 1] - self.cuts[h[0]] + 1 or \
                    indptr[0] != 0 or (steps < 0).any() or indptr[-1] != idx.shape[0] \
                    or idx.shape != cnt.shape:
                raise ValueError(f"{name}: not slice {h[0]} packed")
            _within(f"{name}'s topics", idx, K)
            _within(f"{name}'s counts", cnt, np.inf)

    def report(self):
        """The initial state's log-likelihood pieces (rank 0 adds them in worker order)
        and the corpus's sizes the workers agreed on."""
        return {"ll": self._loglik_parts(), "n_words": self.V, "n_docs": self.n_docs,
                "n_tokens": self.n_tokens}

    @classmethod
    def warmup(cls):
        # two tokens of word 0 in topic 0 (fresh counts for every call), the slice in
        # hand unpacked or packed; 16-bit counts and topics only (int32: K > 65536 or a
        # document of 65536 tokens, rare, compiled on first use, on every worker)
        docs, wptr = np.zeros(2, np.int32), np.array([0, 2], np.int64)
        one = (np.array([0, 1]), np.zeros(1, np.uint16), np.array([2], np.int32))

        def runs():  # (topics, word-topic rows, topic totals, packed slice or None)
            for packed in (None, K.packed_io(one, 2, np.zeros(2, np.uint8),
                                             np.zeros(2, np.int64))[0]):
                nwk = np.array([[0, 0]] if packed else [[2, 0]], np.int32)
                yield np.zeros(2, np.uint16), nwk, np.array([2, 0], np.int64), packed
        for z, nwk, nk, packed in runs():
            dmeta, dlist = np.zeros((1, 2), np.int64), np.zeros((2, 2), np.uint16)
            K.doc_lists(np.array([2], np.int64), z, dmeta, dlist, 2)
            K.sample_block(wptr, docs, z, dmeta, dlist, nwk, nk, 0.1, 0.1, 0.1,
                           np.uint64(1), np.zeros(4), np.zeros(2), packed)
        K.sum_lgamma_lists(dmeta, dlist, 0.1, K.lgamma_table(0.1, 2))
        K.doc_topic_dense(dmeta, dlist, 2)
        K.add_packed(*K.pack_lists(dmeta, dlist), np.zeros((1, 2), np.int32))
        for z, nwk, nk, packed in runs():
            ndk = np.zeros((1, 2), np.uint16)
            K.doc_table(np.array([2], np.int64), z, ndk)
            K.sample_dense(wptr, docs, z, ndk, nwk, nk, 0.1, 0.1, 0.1, np.uint64(1),
                           np.zeros(2), np.zeros(2), np.zeros(2), packed)
        K.sum_lgamma(ndk.ravel(), 0.1, K.lgamma_table(0.1, 2))
        K._sum_table(ndk.ravel(), 0.1, K.lgamma_table(0.1, 2), True)
        K._nonzero_sample(ndk.ravel())
        K.add_packed(*K.pack(ndk), np.zeros((1, 2), np.int32))
        K.unpack(K.pack(np.ones((1, 2), np.int32)), np.empty((1, 2), np.int32))
        K.sum_lgamma(np.ones(2, np.int32), 0.1, K.lgamma_table(0.1, 2))
        K._sum_table(np.ones(2, np.int32), 0.1, K.lgamma_table(0.1, 2), True)
        K.sum_lgamma_shifted(np.ones(2, np.int64), 0.1)
        K.initial_topics(np.array([2], np.int64), 0, np.uint64(1), 2, z)
        K.initial_topics_at(np.array([2], np.int64), 0, docs, np.uint64(1), 2, z)
        K.round_seed(np.uint64(1), 0, 0)
        K.sum_packed([K.pack_tokens(wptr, z, 2)], 2)
        data.warmup()

    def _sample(self, round, m, nwk, packed=None):
        """Sample the tokens of slice m against ``nwk`` (its rows; with ``packed``, the
        zero buffer and the packed slice in and out: then -> (tokens, packed entries))."""
        b0, b1 = self.blocks[m], self.blocks[m + 1]
        wptr = self.wptr[self.cuts[m]:self.cuts[m + 1] + 1]
        if self.dense:
            o = K.sample_dense(wptr, self.docs, self.z, self.ndk, nwk, self.nk, self.alpha,
                               self.beta, self.vbeta,
                               round_seed(self.seed, self.worker, round), *self.tree, packed)
        else:
            o = K.sample_block(wptr, self.docs, self.z, self.dmeta, self.dlist, nwk,
                               self.nk, self.alpha, self.beta, self.vbeta,
                               round_seed(self.seed, self.worker, round), self.tree,
                               self.cum, packed)
        return int(b1 - b0) if packed is None else (int(b1 - b0), o)

    def _mine(self):
        """(first word, packed counts) of every slice this worker answers for."""
        if self.mode == "model":
            if self.resident:
                return [(0, K.pack(self.nwk))]
            return [(int(self.cuts[m]), t) for m, t in self.held]
        return [(int(self.cuts[m]), K.pack(self.nwk[self.cuts[m]:self.cuts[m + 1]]))
                for m in self.share]

    def _loglik_parts(self):
        """(word half over this worker's slices, document half over its documents); worker
        0's word half includes the topic totals' term."""
        if self.resident:  # (the same terms, the sum's order chosen by the density)
            word = K.sum_lgamma_table(self.nwk.ravel(), self.beta, self.beta_table)
        else:
            word = sum(K.sum_lgamma(t[2], self.beta, self.beta_table)
                       for _, t in self._mine())
        if self.worker == 0:
            word += totals_loglik(self.nk, self.V, self.beta)
        if self._lengths_ll[0] is not self.lengths:  # (documents moved: computed again)
            self._lengths_ll = (self.lengths,
                                doc_lengths_loglik(self.lengths, self.alpha, self.K))
        a, t = self.alpha, self.alpha_table
        return word, float(self._lengths_ll[1] + (
            K.sum_lgamma_table(self.ndk.ravel(), a, t) if self.dense else
            K.sum_lgamma_lists(self.dmeta, self.dlist, a, t)))

    # a round allocates and frees a slice's packed tables, tens of MB: glibc's heap would
    # keep them (the rounds' threshold), and the process's peak count them; a round is
    # long enough that their fresh pages cost little (docs/scaling.md)
    @memory.returning_freed_memory()
    def update(self, task):
        r, peers = task["round"], self.peers
        phase = task.get("phase", r)  # (rounds since the layout began: a resume's)
        nk0 = self.nk.copy()
        mine = {}
        if self.mode == "model":
            g = phase % self.s1
            m = task.get("slice", slice_of(self.worker, phase, self.W, self.s1))
            if self.held[g][0] != m:
                raise RuntimeError(f"worker {self.worker} holds slice {self.held[g][0]} "
                                   f"in round {r}, expected {m}: the rotation broke")
            if self.resident:
                tokens = self._sample(r, m, self.nwk)
            else:  # sampled from and to the packed slice (kernels, "packed")
                packed, done = K.packed_io(self.held[g][1],
                                           int(self.blocks[m + 1] - self.blocks[m]),
                                           self.mark, self.extra)
                tokens, o = self._sample(r, m, self.nwk[:self.cuts[m + 1] - self.cuts[m]],
                                         packed)
                self.held[g][1] = done(o)
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
        if self.mode == "model" and not self.resident:  # to the worker that samples it next
            self.held[g] = list(peers.shift(self.held[g], -1))
        out = {"tokens": sum(p["tokens"] for p in got)}
        if task["ll"] or self.check:  # (worker 0 answers for all)
            facts = self._check_facts() if self.check else {}
            if task["ll"]:
                facts["ll"] = self._loglik_parts()
            every = peers.allgather(facts)
            if task["ll"] and not self.worker:
                out["ll"] = (sum(f["ll"][0] for f in every) + sum(f["ll"][1] for f in every))
            if self.check and not self.worker:
                out["invariant"] = self._invariant(every)
        return None if self.worker else out

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

    @memory.returning_freed_memory()  # (as update's)
    def collect(self):
        # the documents' counts packed (their non-zeros, at most one a token), not D x K
        ndk = K.pack(self.ndk) if self.dense else K.pack_lists(self.dmeta, self.dlist)
        out = {"d0": self.d0, "ndk": ndk, "nk": self.nk, "rows": self._mine()}
        if self.vocab is not None:  # worker 0, for a file that names its words
            out["vocab"] = self.vocab
        return out

    def doc_topic(self):
        if self.dense:
            return self.ndk.astype(np.int32)
        return K.doc_topic_dense(self.dmeta, self.dlist, self.K)
