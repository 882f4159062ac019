"""LDA by model-parallel collapsed Gibbs sampling with vocabulary rotation (STRADS, Lee et
al. 2014; Yuan et al. 2015), and a data-parallel baseline (docs/apps/lda.md)."""
import copy
import math
import os

import numpy as np

from ... import api, driver
from ...errors import DataError
from ...params import ENGINE, Param
from ... import params as _params
from .aggregate import InvariantError, LDAAggregate
from .data import BYTES_PER_DOC, BYTES_PER_TOKEN, BYTES_PER_WORD, INT32_MAX
from .data import check as check_corpus
from .data import inputs, load, make_corpus
from ...io.source import Content, Name
from ...io.memory import beyond, fmt_bytes
from .schedule import SCHEDULES, Group
from .update import LDAUpdate

__all__ = ["fit", "make_setup", "file_source", "corpus_source", "loglikelihood", "load",
           "make_corpus", "top_words", "LDAUpdate", "LDAAggregate", "SCHEDULES",
           "InvariantError", "PARAMS"]

#: The parameters, each declared once: make_setup's checks, the command line's flags
#: (``__main__``) and the estimator's constraints
#: (:func:`strads.params.sklearn_constraints`).
PARAMS = (
    Param("n_topics", 10, "number of topics K", low=1, high=INT32_MAX, flag="--topics",
          metavar="TOPICS"),
    Param("alpha", 0.1, "symmetric Dirichlet prior of the document-topic distributions",
          low=0, closed="neither"),
    Param("beta", 0.01, "symmetric Dirichlet prior of the topic-word distributions",
          low=0, closed="neither"),
    Param("sweeps", 50, "passes over the corpus (model schedule: one sweep is workers x "
          "(staleness + 1) rounds); a resumed run may ask for more", low=1, resume=True),
    Param("schedule", "model", "model: STRADS vocabulary rotation; data: YahooLDA-style "
          "data-parallel baseline", choices=tuple(sorted(SCHEDULES))),
)


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


# how a refusal names a parameter: fit()'s keyword, or the command line's flag
_KWARGS = {"topics": "n_topics", "alpha": "alpha", "beta": "beta", "sweeps": "sweeps",
           "staleness": "staleness", "workers": "workers"}
_FLAGS = {k: {p.name: p.flag for p in PARAMS + ENGINE}[n] for k, n in _KWARGS.items()}


def memory_estimate(n_docs, n_words, n_tokens, n_entries, n_topics, n_workers, staleness,
                    schedule, max_slice):
    """Peak bytes of a run, scheduler and workers together (as on one machine), by part
    (``tokens``, ``word-topic``, ``doc-topic``, ``per-topic``, ``other``) of the phase that
    needs most."""
    T, VK, DK = n_tokens, n_words * n_topics, n_docs * n_topics
    W, s1 = n_workers, staleness + 1
    packed = min(VK, T) * 6 + n_words * 8  # word-topic table as (topic, count) pairs
    buffers = W * max_slice * n_topics * 4  # model: every worker's slice in hand
    if schedule == "model":
        # the slices, packed, spread over the workers (and the shards' copies on the way
        # in, or a slice on its way round the ring); every worker's buffer
        start = run = 2 * packed + buffers
        end = packed + buffers
    else:
        # every worker: the whole table (from one packed copy per shard), its copy of
        # the round's start and every worker's packed changes of the round
        start = W * VK * 4 + (W + 1) * packed
        run = W * VK * 8 + W * (min(VK, 2 * T) * 6 + W * n_words * 8)
        end = W * VK * 4
    other = (n_docs * BYTES_PER_DOC + n_words * BYTES_PER_WORD + n_entries * 12
             + W * 4096 + W * s1 * 512)  # buffers, rounds in flight, slices
    # every worker: its sum tree (up to 32 bytes a topic), topic totals and their
    # copies, the topic changes of the round gathered from every worker
    per_topic = W * n_topics * (64 + 8 * W)
    phases = [
        {"tokens": T * 24, "word-topic": VK * 8},  # the int64 build (bincount)
        {"tokens": T * 8, "word-topic": VK * 12},  # ... cast to int32
        {"tokens": T * BYTES_PER_TOKEN, "word-topic": start},  # workers start
        {"tokens": T * 20, "word-topic": run},  # the run
        {"tokens": T * 20, "word-topic": end + VK * 4 + packed,  # the end
         "doc-topic": DK * 8 + DK * 4 // W}]
    parts = max(phases, key=lambda d: sum(d.values()))
    return {"tokens": parts["tokens"], "word-topic": parts["word-topic"],
            "doc-topic": parts.get("doc-topic", 0), "per-topic": per_topic, "other": other}


def check_memory(n_docs, n_words, n_tokens, n_entries, n_topics, n_workers, staleness,
                 schedule, max_slice, flag):
    """Raise DataError naming the largest part when a run would not fit in this
    machine's physical memory."""
    parts = memory_estimate(n_docs, n_words, n_tokens, n_entries, n_topics, n_workers,
                            staleness, schedule, max_slice)
    too = beyond(sum(parts.values()))
    if not too:
        return
    topics = {"word-topic": f"the word-topic counts ({n_words:,} words x {n_topics:,} "
                            "topics" + (f", a copy on each of {n_workers} workers" if
                                        schedule == "data" and n_workers > 1 else "") + ")",
              "doc-topic": f"the document-topic counts ({n_docs:,} documents x "
                           f"{n_topics:,} topics)",
              "per-topic": "the workers' per-topic arrays (sum trees, topic totals)"}
    if max(parts, key=parts.get) in topics:  # the flag to turn down: name its parts
        lead = f"{flag['topics']} {n_topics}: " + ", ".join(
            f"{what} need {fmt_bytes(parts[k])}" for k, what in topics.items()
            if parts[k] >= 2**20)
    else:
        lead = (f"data: the corpus's {n_tokens:,} tokens need {fmt_bytes(parts['tokens'])}"
                if parts["tokens"] >= parts["other"] else
                f"data: {n_docs:,} documents, {n_words:,} words and {n_entries:,} "
                f"(document, word) entries need {fmt_bytes(parts['other'])}")
    raise DataError(f"{lead}; the run would need {too}")


def check_run(n_docs, V, longest, word_counts, n_tokens, nnz, K, alpha, beta, W, staleness,
              schedule, sweeps, flag):
    """What a run refuses of its corpus before the model is allocated (one line), on rank 0
    for a matrix or on every worker alike for a description (``sweeps`` None: the data
    schedule's bound is rank 0's); ``longest``: (tokens, index) of the longest document.
    -> the vocabulary slices' cuts."""
    w = int(np.argmax(word_counts))
    for (n, i), what in ((longest, "document"), ((word_counts[w], w), "word")):
        if n > INT32_MAX:
            raise DataError(f"data: {what} {i} (0-based) has {n} tokens: at most "
                            f"{INT32_MAX} (counts are 32-bit)")
    if W > n_docs:
        raise DataError(f"{W} workers for {n_docs} documents: each worker needs documents")
    if K * alpha == math.inf or V * beta == math.inf:
        raise DataError(f"{flag['alpha']} x topics or {flag['beta']} x words overflows "
                        f"({K} x {alpha}, {V} x {beta})")
    if sweeps is not None or schedule == "model":
        SCHEDULES[schedule].check_staleness(staleness, W, V, sweeps, flag)
    cuts = split_vocab(word_counts, W * (staleness + 1))
    check_memory(n_docs, V, n_tokens, nnz, K, W, staleness, schedule,
                 int(np.diff(cuts).max()), flag)
    return cuts


def file_source(path, fmt="auto", vocab=None, min_count=2):
    """What :func:`make_setup` hands the workers for a corpus file: each worker reads
    its part (:func:`strads.apps.lda.data.read_part`); rank 0 never opens it."""
    path = os.fspath(path)
    # a resumed run's workers check the input is unchanged (its content, in the digest)
    return {"kind": "file", "path": Name(path), "fmt": fmt,
            "vocab": None if vocab is None else Name(vocab),
            "min_count": min_count, "content": Content(*inputs(path, fmt, vocab))}


def corpus_source(n_docs=1000, n_words=1000, doc_length=100, n_topics=10, alpha=0.1,
                  beta=0.05, seed=0):
    """What :func:`make_setup` hands the workers for the built-in corpus: each worker
    draws its own documents (:func:`strads.apps.lda.data.corpus_part`; the corpus of
    :func:`make_corpus` with these arguments)."""
    return {"kind": "corpus", "args": (int(n_docs), int(n_words), int(doc_length),
                                       int(n_topics), float(alpha), float(beta), int(seed))}


def _split(sched, ctx):
    """The schedule, or with ``--schedulers K`` its K groups (schedule.Group)."""
    K = ctx.n_schedulers
    if K == 1:
        return sched
    return [Group(copy.deepcopy(sched), k, K) for k in range(K)]


def make_setup(data, n_topics=10, alpha=0.1, beta=0.01, schedule="model", sweeps=50,
               seed=0, check=False, cli=False):
    """``setup(ctx)`` for :func:`strads.run`; ``data``: a description the workers read or
    draw themselves (:func:`file_source`, :func:`corpus_source`) or a function giving ``(X,
    vocab)`` on the scheduler rank. Refusals come before the model is allocated
    (docs/apps/lda.md)."""
    flag = _FLAGS if cli else _KWARGS
    _params.check(PARAMS, dict(n_topics=n_topics, alpha=alpha, beta=beta, sweeps=sweeps,
                               schedule=schedule), cli)
    K = int(n_topics)

    def setup(ctx):
        n_workers, staleness = ctx.n_workers, ctx.staleness
        sched_cls = SCHEDULES[schedule]
        base = {"s1": staleness + 1, "mode": schedule, "seed": seed, "K": K,
                "alpha": alpha, "beta": beta, "check": check, "flag": flag}
        if isinstance(data, dict):  # the workers read or draw it: sizes come in begin()
            agg = LDAAggregate(None, K, None, None, alpha, beta, schedule, None, check)
            sched = _split(sched_cls(None, n_workers, staleness, sweeps, flag), ctx)
            return sched, agg, [{**base, "source": data} for _ in range(n_workers)]
        X, vocab = data()
        X = check_corpus(X, vocab)
        n_docs, V = X.shape
        for n, what in ((n_docs, "documents"), (V, "words")):
            if n > INT32_MAX:
                raise DataError(f"data: {n} {what}: at most {INT32_MAX} (ids are 32-bit)")
        lengths = np.asarray(X.sum(axis=1)).ravel().astype(np.int64)
        word_counts = np.asarray(X.sum(axis=0)).ravel().astype(np.int64)
        i = int(np.argmax(lengths))
        n_tokens = int(lengths.sum())
        check_run(n_docs, V, (int(lengths[i]), i), word_counts, n_tokens, X.nnz, K, alpha,
                  beta, n_workers, staleness, schedule, sweeps, flag)
        agg = LDAAggregate(V, K, n_docs, n_tokens, alpha, beta, schedule, vocab, check)
        sched = _split(sched_cls(V, n_workers, staleness, sweeps, flag), ctx)
        doc_cuts = api.split_balanced(lengths, n_workers)
        shards = []
        for w in range(n_workers):  # each worker's rows; it builds its tokens itself
            d0, d1 = int(doc_cuts[w]), int(doc_cuts[w + 1])
            rows = X[d0:d1]
            shards.append({**base, "source": {
                "kind": "rows", "d0": d0, "indptr": rows.indptr.astype(np.int64),
                "indices": rows.indices.astype(np.int32), "counts": rows.data,
                "n_docs": n_docs, "n_words": V, "n_tokens": n_tokens, "nnz": X.nnz}})
        del X, rows
        return sched, agg, shards

    return setup


def fit(X, *, n_topics=10, alpha=0.1, beta=0.01, schedule="model", sweeps=50, seed=0,
        vocab=None, check=False, staleness=0, max_rounds=None, **run_kw):
    """Fit LDA to a documents x words count matrix; returns :class:`strads.Result`
    (``model['word_topic']``, ``model['doc_topic']``) on the scheduler rank. ``run_kw``
    goes to :func:`strads.run` (workers, time_limit, tol, out, quiet, mpi, ...)."""
    setup = make_setup(lambda: (X, vocab), n_topics, alpha, beta, schedule, sweeps,
                       seed, check)
    # max_rounds None: the schedule ends the run after its sweeps
    return driver.run(setup, LDAUpdate, staleness=staleness, app="lda", seed=seed,
                      max_rounds=10 ** 9 if max_rounds is None else max_rounds, **run_kw)


def top_words(word_topic, vocab=None, n=10):
    """The n most frequent words of each topic (their ids when there is no vocabulary)."""
    n = min(n, word_topic.shape[0])
    idx = np.argsort(-word_topic, axis=0, kind="stable")[:n].T
    return [[str(i if vocab is None else vocab[i]) for i in row] for row in idx]
