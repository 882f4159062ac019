"""LDA by model-parallel collapsed Gibbs sampling with vocabulary rotation (STRADS,
Lee et al. 2014; Yuan et al. 2015).

Documents are split across workers (balanced by tokens); the vocabulary is cut into
slices that rotate among them, so each slice's word-topic counts are held by one worker
at a time and only the topic totals are shared. The sampler is exact collapsed Gibbs at
O(K_d + log K) per token, K_d the number of topics in the token's document (see
kernels). A data-parallel (YahooLDA-style) schedule is the baseline.
"""
import numpy as np

from ... import engine
from ...engine import DataError
from .aggregate import InvariantError, LDAAggregate
from .data import check as check_corpus
from .data import load, make_corpus
from .schedule import SCHEDULES
from . import kernels
from .update import LDAUpdate, doc_loglik

__all__ = ["fit", "make_setup", "loglikelihood", "load", "make_corpus", "top_words",
           "LDAUpdate", "LDAAggregate", "SCHEDULES", "InvariantError"]


def split_vocab(word_counts, n_slices):
    """Contiguous word-id ranges with about equal numbers of tokens."""
    cum = np.concatenate([[0], np.cumsum(word_counts)])
    cuts = np.searchsorted(cum, np.linspace(0, cum[-1], n_slices + 1)[1:-1], side="right") - 1
    return np.concatenate([[0], np.maximum.accumulate(cuts), [len(word_counts)]]).astype(np.int64)


def loglikelihood(word_topic, doc_topic, alpha, beta):
    """log p(w, z) from the counts (NumPy/SciPy; the reference the tests use)."""
    from scipy.special import gammaln

    V, K = word_topic.shape
    nk = word_topic.sum(axis=0)
    nd = doc_topic.sum(axis=1)
    return float(K * gammaln(V * beta) - gammaln(nk + V * beta).sum()
                 + (gammaln(word_topic + beta) - gammaln(beta)).sum()
                 + len(nd) * gammaln(K * alpha) - gammaln(nd + K * alpha).sum()
                 + (gammaln(doc_topic + alpha) - gammaln(alpha)).sum())


def make_setup(data, n_topics=10, alpha=0.1, beta=0.01, schedule="model", sweeps=50,
               staleness=0, seed=0, check=False):
    """``setup(n_workers)`` for :func:`strads.run`; ``data()`` gives ``(X, vocab)`` (a
    documents x words count matrix and the word list or None) and is only called on the
    scheduler rank. ``staleness`` must be the one given to run(): the model-parallel
    schedule cuts W (staleness + 1) vocabulary slices. ``check``: verify the count
    invariants after every round (slow; for tests)."""
    if schedule not in SCHEDULES:
        raise DataError(f"unknown schedule {schedule!r}; choose from {sorted(SCHEDULES)}")
    if int(n_topics) != n_topics or n_topics < 1:
        raise DataError(f"topics must be an integer >= 1, got {n_topics}")
    if not alpha > 0 or not beta > 0:
        raise DataError(f"alpha and beta must be > 0, got alpha={alpha}, beta={beta}")
    if sweeps < 0:
        raise DataError(f"sweeps must be >= 0, got {sweeps}")
    K = int(n_topics)

    def setup(n_workers):
        X, vocab = data()
        X = check_corpus(X, vocab)
        n_docs, V = X.shape
        lengths = np.asarray(X.sum(axis=1)).ravel().astype(np.int64)
        if n_workers > n_docs:
            raise DataError(f"{n_workers} workers for {n_docs} documents: each worker "
                            "needs documents")
        words = np.repeat(X.indices, X.data).astype(np.int32)
        # the initial topics depend on the seed only, not on the number of workers
        z = np.random.default_rng(seed).integers(0, K, words.shape[0]).astype(np.int32)
        nwk = np.bincount(words.astype(np.int64) * K + z, minlength=V * K)
        nwk = nwk.reshape(V, K).astype(np.int32)
        nk = nwk.sum(axis=0, dtype=np.int64)
        cuts = split_vocab(np.bincount(words, minlength=V), n_workers * (staleness + 1))
        sched_cls = SCHEDULES[schedule]
        agg = LDAAggregate(nwk, nk, cuts, n_docs, alpha, beta, schedule, vocab, check)
        agg.loglik = agg.word_loglik() + initial_doc_loglik(lengths, z, K, alpha)
        sched = sched_cls(agg, n_workers, staleness, sweeps)
        doc_cuts = engine.split_balanced(lengths, n_workers)
        tok = np.concatenate([[0], np.cumsum(lengths)])
        packed = kernels.pack(nwk) if schedule == "data" else None  # one copy for all
        shards = []
        for w in range(n_workers):
            d0, d1 = doc_cuts[w], doc_cuts[w + 1]
            t0, t1 = tok[d0], tok[d1]
            shards.append({"worker": w, "seed": seed, "K": K, "alpha": alpha, "beta": beta,
                           "V": V, "check": check, "d0": int(d0),
                           "lengths": lengths[d0:d1], "words": words[t0:t1], "z": z[t0:t1],
                           "cuts": cuts, "nk": nk,
                           "nwk": packed})
        return sched, agg, shards

    return setup


def initial_doc_loglik(lengths, z, n_topics, alpha):
    docs = np.repeat(np.arange(lengths.shape[0], dtype=np.int32), lengths)
    dmeta = np.empty((lengths.shape[0], 2), np.int64)
    dlist = np.empty((z.shape[0], 2), np.int32)
    kernels.doc_lists(lengths, docs, z, dmeta, dlist, n_topics)
    return doc_loglik(lengths, alpha, n_topics, lambda a, t: kernels.sum_lgamma_lists(
        dmeta, dlist, a, t))


def fit(X, *, n_topics=10, alpha=0.1, beta=0.01, schedule="model", sweeps=50, seed=0,
        vocab=None, check=False, staleness=0, max_rounds=None, **run_kw):
    """Fit LDA to a documents x words count matrix; returns :class:`strads.Result`
    (``model['word_topic']``, ``model['doc_topic']``) on the scheduler rank. ``run_kw``
    goes to :func:`strads.run` (workers, time_limit, tol, out, quiet, mpi, ...)."""
    setup = make_setup(lambda: (X, vocab), n_topics, alpha, beta, schedule, sweeps,
                       staleness, seed, check)
    if max_rounds is None:  # the schedule ends the run after its sweeps
        max_rounds = 10 ** 9
    return engine.run(setup, LDAUpdate, staleness=staleness, max_rounds=max_rounds,
                      app="lda", **run_kw)


def top_words(word_topic, vocab=None, n=10):
    """The n most frequent words of each topic (their ids when there is no vocabulary)."""
    n = min(n, word_topic.shape[0])
    idx = np.argsort(-word_topic, axis=0, kind="stable")[:n].T
    if vocab is None:
        return [[str(i) for i in row] for row in idx]
    return [[str(vocab[i]) for i in row] for row in idx]
