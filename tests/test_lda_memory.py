"""LDA's memory layout: the documents' topic lists in min(length, K) slots each."""
import numpy as np
import pytest

from strads.apps.lda import kernels as K


@pytest.mark.parametrize("n_topics", [1, 3, 8, 40])
def test_lists_in_min_length_k_slots(n_topics):
    """Documents shorter and longer than K (and of one token): each list has min(length,
    K) slots, after the previous document's, and stays within them (its counts are the
    bincount of its tokens' topics after every pass; the last slot is followed by a
    sentinel the sampler never writes)."""
    rng = np.random.default_rng(n_topics)
    lengths = np.array([1, n_topics, 3 * n_topics + 2, 7, 1, 2 * n_topics], np.int64)
    n_docs, n_words = lengths.size, 6
    docs = np.repeat(np.arange(n_docs, dtype=np.int32), lengths)
    words = rng.integers(0, n_words, docs.size).astype(np.int32)
    order = np.argsort(words, kind="stable")  # tokens by word, then document
    words, docs = words[order], docs[order]
    z = rng.integers(0, n_topics, docs.size).astype(np.uint16)
    wptr = np.searchsorted(words, np.arange(n_words + 1)).astype(np.int64)
    by_doc = np.argsort(docs, kind="stable")
    slots = np.minimum(lengths, n_topics)
    nwk = np.zeros((n_words, n_topics), np.int32)
    np.add.at(nwk, (words, z), 1)
    nk = nwk.sum(axis=0).astype(np.int64)
    dmeta = np.empty((n_docs, 2), np.int64)
    dlist = np.full((slots.sum() + 1, 2), 7777, np.uint16)
    K.doc_lists(lengths, z[by_doc], dmeta, dlist, n_topics)
    assert np.array_equal(dmeta[:, 0], np.concatenate([[0], np.cumsum(slots)[:-1]]))
    P = 1 << max(0, n_topics - 1).bit_length()
    for r in range(6):
        K.sample_block(wptr, docs, z, dmeta, dlist, nwk, nk, 0.3, 0.05, 0.05 * n_words,
                       np.uint64(r + 5), np.zeros(2 * P), np.zeros(n_topics))
        ref = np.bincount(docs.astype(np.int64) * n_topics + z,
                          minlength=n_docs * n_topics).reshape(n_docs, n_topics)
        assert np.array_equal(K.doc_topic_dense(dmeta, dlist, n_topics), ref)
        assert (dmeta[:, 1] <= slots).all() and (dlist[-1] == 7777).all()
