"""LDA with --rebalance: documents (their tokens, topics and topic lists) move between
neighbouring workers, the counts stay consistent and the model comes out whole."""
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest
import scipy.sparse as sp

from strads.apps import lda as app
from strads.apps.lda.data import make_corpus
from strads import Context
from strads.transport import InProcess
from conftest import world


def small_corpus(seed=3, n_docs=120, n_words=80, length=30, topics=4):
    return make_corpus(n_docs, n_words, length, topics, 0.2, 0.1, seed)[0]


def _check_model(res, X, slow):
    m = res.model
    X = sp.csr_matrix(X)
    rows = res.extra["rows_per_worker"]
    assert res.extra["rebalances"] >= 1 and sum(rows) == X.shape[0]
    # off the slow worker (the others' shares are not compared: their measured seconds
    # include waiting for each other in the round's collectives, see the README)
    assert rows[slow] < X.shape[0] // len(rows) // 2 and rows[slow] == min(rows)
    assert np.array_equal(m["word_topic"].sum(axis=1), np.asarray(X.sum(axis=0)).ravel())
    assert np.array_equal(m["doc_topic"].sum(axis=1), np.asarray(X.sum(axis=1)).ravel())
    assert np.array_equal(m["doc_topic"].sum(axis=0), m["topic_totals"])
    assert np.array_equal(m["word_topic"].sum(axis=0), m["topic_totals"])
    assert m["word_topic"].min() >= 0 and m["doc_topic"].min() >= 0
    assert np.isclose(m["loglik"], app.loglikelihood(m["word_topic"], m["doc_topic"],
                                                     0.1, 0.01), rtol=1e-10)


@pytest.mark.parametrize("schedule", ["model", "data"])
def test_rebalance_moves_documents_off_a_slow_worker(monkeypatch, schedule):
    monkeypatch.setenv("STRADS_TEST_HOOK", "faults:slow:1:6")  # worker 1
    X = small_corpus()
    sweeps = 60 if schedule == "model" else 180  # 180 rounds either way
    res = app.fit(X, n_topics=5, sweeps=sweeps, schedule=schedule, workers=3, quiet=True,
                  mpi=False, check=True, rebalance=True, rebalance_every=0.05)
    assert res.stop_reason == "schedule_done"
    _check_model(res, X, slow=1)
    assert res.extra["loglik"] == res.model["loglik"]


# ------------------------------------------------------------------- give and take
def _workers(X, W=2, schedule="model"):
    """W LDAUpdate objects built as a run builds them (each on a thread of its own, for
    the collectives), and a function running one round on all of them."""
    setup = app.make_setup(lambda: (X, None), n_topics=5, schedule=schedule, sweeps=10,
                           check=True)
    _, _, shards = setup(Context(W, 0, 0))
    tp = InProcess(W, threads=True)
    pool = ThreadPoolExecutor(W)

    def make(w):
        u = app.LDAUpdate.__new__(app.LDAUpdate)
        u.peers = tp.peers(w)
        u.__init__(shards[w])
        return u

    ups = list(pool.map(make, range(W)))

    def round(r):
        got = list(pool.map(lambda u: u.update({"round": r, "ll": True}), ups))
        assert got[0]["invariant"] is None, got[0]["invariant"]
        return got[0]

    return ups, round, pool


def _state(u):
    held = [(m, [np.asarray(a).tolist() for a in t]) for m, t in getattr(u, "held", [])]
    out = {"d0": u.d0, "rows": u.rows, "lengths": u.lengths.tolist(),
           "words": u.words.tolist(), "docs": u.docs.tolist(), "z": u.z.tolist(),
           "blocks": u.blocks.tolist(), "dtype": str(_table(u).dtype), "nk": u.nk.tolist(),
           "nwk": u.nwk.tolist() if u.mode == "data" else None, "held": held,
           "scratch": [np.shape(x) for x in (u.tree, u.cum)], "ndk": u.doc_topic().tolist()}
    if not u.dense:
        out.update(lists=[u.dlist[a:a + m].tolist() for a, m in u.dmeta],
                   dmeta=u.dmeta.tolist(), n_slots=u.dlist.shape[0])
    return out


def _table(u):
    """The worker's doc-topic counts as stored: the dense table, or the compact lists."""
    return u.ndk if u.dense else u.dlist


def _global(ups):
    """Every worker's documents in global order: (d0s, doc-topic rows, lengths)."""
    d0 = [u.d0 for u in ups]
    assert d0[0] == 0 and all(d0[w + 1] == d0[w] + ups[w].rows for w in range(len(ups) - 1))
    return (np.vstack([u.doc_topic() for u in ups]),
            np.concatenate([u.lengths for u in ups]))


@pytest.mark.parametrize("dense", [True, False])
@pytest.mark.parametrize("schedule", ["model", "data"])
def test_give_and_take_back_leaves_the_state_identical(schedule, dense, monkeypatch):
    from strads.apps.lda import update

    if not dense:  # the compact lists
        monkeypatch.setattr(update, "DENSE_MAX_K", 0)
    # a document of more than 65,535 tokens: its worker's topic lists are 32-bit, the
    # other's 16-bit, until the document moves
    rng = np.random.default_rng(0)
    X = rng.integers(0, 3, (61, 40))
    X[30] = 0
    X[30, :4] = [30000, 20000, 15000, 6000]
    X = sp.csr_matrix(X)
    ups, round, pool = _workers(X, 2, schedule)
    try:
        assert all(u.dense == dense for u in ups)
        assert 30 in range(ups[1].d0, X.shape[0])  # the long document is worker 1's
        for r in range(3):  # mix the topics (and the lists' order) a little
            round(r)
        a, b = ups
        big = 30 - b.d0  # the long document, as worker 1 numbers it (< 0: worker 0's)
        before = [_state(u) for u in ups]
        ndk0, len0 = _global(ups)
        for k in (1, 3, a.rows - 1):  # worker 0's last k documents to worker 1 and back
            b.take("head", a.give("tail", k))
            ndk, lengths = _global(ups)
            assert np.array_equal(ndk, ndk0) and np.array_equal(lengths, len0)
            if -big <= k:
                assert str(_table(a).dtype) == "uint16" and str(_table(b).dtype) == "int32"
            a.take("tail", b.give("head", k))
            assert [_state(u) for u in ups] == before
        for k in (1, 4, b.rows - 1):  # worker 1's first k documents to worker 0 and back
            a.take("tail", b.give("head", k))
            ndk, lengths = _global(ups)
            assert np.array_equal(ndk, ndk0) and np.array_equal(lengths, len0)
            if k > big >= 0:  # the long document went to worker 0, and its lists' width
                assert str(_table(a).dtype) == "int32" and str(_table(b).dtype) == "uint16"
            b.take("head", a.give("tail", k))
            assert [_state(u) for u in ups] == before
        # a move that stays: the sampler, the invariants and the log-likelihood go on
        k = max(1, big + 1) if big >= 0 else 2
        a.take("tail", b.give("head", k))
        assert a.rows + b.rows == X.shape[0] and a.d0 == 0 and b.d0 == a.rows
        for r in range(3, 7):  # invariants checked every round (check=True)
            round(r)
        assert a.nk.sum() == X.sum() and np.array_equal(a.nk, b.nk)
        ndk, lengths = _global(ups)
        assert np.array_equal(lengths, np.asarray(X.sum(axis=1)).ravel())
        assert np.array_equal(ndk.sum(axis=1), lengths)
    finally:
        pool.shutdown()


def test_doc_half_of_loglik_moves_with_the_documents():
    X = sp.csr_matrix(small_corpus(n_docs=40))
    ups, round, pool = _workers(X, 3)
    try:
        round(0)
        parts = lambda: [u._loglik_parts() for u in ups]  # noqa: E731
        word0, doc0 = zip(*parts())
        ups[1].take("head", ups[0].give("tail", 5))
        ups[2].take("head", ups[1].give("tail", 9))
        word1, doc1 = zip(*parts())
        assert word1 == word0  # the slices did not change
        assert np.isclose(sum(doc1), sum(doc0), rtol=1e-12)
        assert [u.d0 for u in ups] == [0, ups[0].rows, ups[0].rows + ups[1].rows]
        # the workers' doc halves, added up, match the dense doc-topic counts' (the
        # reference formula, with an empty word-topic table)
        ndk, lengths = _global(ups)
        ref = app.loglikelihood(np.zeros((1, 5)), ndk, 0.1, 0.01)  # word half: 0
        assert np.isclose(sum(doc1), ref, rtol=1e-10)
        round(1)
    finally:
        pool.shutdown()


# ----------------------------------------------------------------------------- MPI
@pytest.mark.mpi(min_size=3)
@pytest.mark.parametrize("scheduler", ["rank", "replicated"])
def test_lda_rebalance_under_mpi(monkeypatch, scheduler):
    rank, size = world()
    slow = 1  # worker 1: rank 2 with a scheduler rank, rank 1 without
    monkeypatch.setenv("STRADS_TEST_HOOK", f"faults:slow:{slow}:6")
    X = small_corpus()
    res = app.fit(X, n_topics=5, sweeps=60, quiet=True, check=True, rebalance=True,
                  rebalance_every=0.05, scheduler=scheduler)
    if res is None:
        assert scheduler == "rank" and rank > 0
        return
    _check_model(res, X, slow=slow)
