"""Strict xfails for defects found by the eighth hunt (hunt8: small valid problems that no
other test has, against independent references; the fuzzing scripts were
/tmp/hunt8/fuzz_*.py). Each test fails on the code it was written against for the reason
it names, and passes once the defect is fixed (then drop its xfail mark)."""
import numpy as np
import pytest


@pytest.mark.xfail(strict=True, reason="LDA with a worker whose documents are all empty "
                   "(2 documents, the first empty, 2 workers) and K >= 3 (the lists' "
                   "sampler) raises ZeroDivisionError in kernels.sample_block: per_line = "
                   "64 // dlist.strides[0], and the worker's empty dlist has stride 0")
@pytest.mark.parametrize("n_topics", [3, 7])
def test_lda_worker_with_only_empty_documents(n_topics):
    from strads.apps import lda

    X = np.array([[0, 0], [0, 1]])  # one token; worker 0 holds the empty document
    res = lda.fit(X, n_topics=n_topics, sweeps=2, workers=2, quiet=True, seed=0)
    wt, dt = res.model["word_topic"], res.model["doc_topic"]
    assert wt.sum(axis=1).tolist() == [0, 1] and dt.sum(axis=1).tolist() == [0, 1]
    # (the same as one worker's counts: the exact marginals of one token)
    assert np.isclose(res.model["loglik"], lda.loglikelihood(wt, dt, 0.1, 0.01))
