"""LDA app: sampler, likelihood, invariants, recovery, peers, readers and CLI."""
import json
import os

import numpy as np
import pytest
import scipy.sparse as sp
from scipy.optimize import linear_sum_assignment
from scipy.stats import chisquare

import strads
from strads.apps import lda as app
from strads.apps.lda import kernels as K
from strads.apps.lda.data import load, make_corpus
from strads import Context
from conftest import FakeClock, run_cli

REUTERS = os.path.join(os.path.dirname(__import__("lda").__file__), "tests", "reuters.ldac")


def small_corpus(seed=3, n_docs=120, n_words=80, length=30, topics=4):
    return make_corpus(n_docs, n_words, length, topics, 0.2, 0.1, seed)


# ----------------------------------------------------------------------------- sampler
def _ptr(words, n_rows, v0=0):
    """The samplers' rows: row r's tokens are wptr[r] .. wptr[r + 1] - 1 of tokens sorted
    by word (word v0 + r)."""
    return np.searchsorted(words, np.arange(v0, v0 + n_rows + 1)).astype(np.int64)


def _lists(doc_z, n_topics, dtype, short_run=K.SHORT_RUN):
    """One document's compact (topic, count) list and the F+ sampler on it (a word's
    run of one token: without a tree, unless ``short_run`` is 0)."""
    dmeta, dlist = np.empty((1, 2), np.int64), np.empty((doc_z.size, 2), dtype)
    K.doc_lists(np.array([doc_z.size]), doc_z, dmeta, dlist, n_topics)
    P = 1 << (n_topics - 1).bit_length()
    tree, cum = np.zeros(2 * P), np.zeros(n_topics)

    def sample(words, docs, z, nwk, nk, alpha, beta, vbeta, seed):
        K.sample_block(_ptr(words, nwk.shape[0]), docs, z, dmeta, dlist, nwk, nk, alpha,
                       beta, vbeta, seed, tree, cum, None, short_run)
    return sample, lambda: K.doc_topic_dense(dmeta, dlist, n_topics)[0].astype(np.int64)


def _lists_tree(doc_z, n_topics, dtype):
    """As _lists, every word with its sum tree."""
    return _lists(doc_z, n_topics, dtype, short_run=0)


def _table(doc_z, n_topics, dtype):
    """One document's row of the dense table and the dense sampler on it."""
    ndk = np.zeros((1, n_topics), dtype)
    K.doc_table(np.array([doc_z.size]), doc_z, ndk)
    buf = np.zeros((3, n_topics))

    def sample(words, docs, z, nwk, nk, alpha, beta, vbeta, seed):
        K.sample_dense(_ptr(words, nwk.shape[0]), docs, z, ndk, nwk, nk, alpha, beta, vbeta,
                       seed, *buf)
    return sample, lambda: ndk[0].astype(np.int64)


# the dense sampler walks eight topics at a time: 13 and 24 topics end in a partial and
# a whole group; the lists' sampler without a tree (a word's short run, here one token)
# walks the smoothing term so too (19 topics)
@pytest.mark.parametrize("layout,n_topics,alpha,dtype", [
    (_lists, 4, 0.5, np.uint16), (_lists, 5, 0.05, np.int32), (_lists, 19, 0.3, np.uint16),
    (_lists_tree, 4, 0.5, np.uint16), (_lists_tree, 5, 0.05, np.int32),
    (_table, 4, 0.5, np.uint16), (_table, 13, 0.05, np.int32), (_table, 24, 0.2, np.uint16)])
def test_conditional_is_exact_collapsed_gibbs(layout, n_topics, alpha, dtype):
    """Resampling one token again and again draws iid from p(z_i | z_-i): compare the
    histogram with the exact conditional by a chi-square test (both samplers: the
    compact lists, with the F+ tree or without, and the dense table)."""
    rng = np.random.default_rng(1)
    beta, V = 0.3, 3
    doc_z = rng.integers(0, n_topics, 9).astype(np.int32)  # one document
    doc_w = rng.integers(0, V, 9).astype(np.int32)
    i = 3  # the token resampled
    # word-topic counts: this document's tokens plus other documents' (fixed)
    nwk = rng.integers(0, 5, (V, n_topics)).astype(np.int32)
    np.add.at(nwk, (doc_w, doc_z), 1)
    nk = nwk.sum(axis=0).astype(np.int64)
    sample, doc_counts = layout(doc_z, n_topics, dtype)
    # the exact conditional, from the counts without token i
    ndk = np.bincount(np.delete(doc_z, i), minlength=n_topics)
    nwk_i, nk_i = nwk[doc_w[i]].copy(), nk.copy()
    nwk_i[doc_z[i]] -= 1
    nk_i[doc_z[i]] -= 1
    p = (ndk + alpha) * (nwk_i + beta) / (nk_i + V * beta)
    p /= p.sum()
    n = 30000
    hist = np.zeros(n_topics)
    words, docs, z = doc_w[i:i + 1], np.zeros(1, np.int32), doc_z[i:i + 1].copy()
    for t in range(n):
        sample(words, docs, z, nwk, nk, alpha, beta, V * beta, np.uint64(t * 7919 + 1))
        hist[z[0]] += 1
    assert chisquare(hist, p * n).pvalue > 1e-4
    # the document's other counts are as they were
    now = doc_counts()
    now[z[0]] -= 1
    assert np.array_equal(now, ndk)
    assert nk.sum() == nk_i.sum() + 1 and nwk.min() >= 0


@pytest.mark.parametrize("layout,n_topics", [(_lists, 3), (_lists_tree, 3), (_table, 3),
                                             (_table, 10)])
def test_repeated_word_in_a_document_is_exact(layout, n_topics):
    """Two tokens of one word in one document, resampled in one run again and again (the
    dense sampler updates the second token's conditional from the first's at the two
    topics that changed): the pairs' frequencies match the exact joint
    p(z_1, z_2 | the rest) (chi-square; every tenth pair, so nearly independent)."""
    rng = np.random.default_rng(4)
    alpha, beta, V = 0.4, 0.3, 3
    doc_z = rng.integers(0, n_topics, 7).astype(np.int32)  # tokens 0, 1: word 0
    doc_w = np.array([0, 0, 1, 2, 1, 2, 2], np.int32)
    nwk = rng.integers(0, 4, (V, n_topics)).astype(np.int32)
    np.add.at(nwk, (doc_w, doc_z), 1)
    nk = nwk.sum(axis=0).astype(np.int64)
    sample, _ = layout(doc_z, n_topics, np.uint16)
    # the exact joint of the pair, from the counts without both tokens
    nd = np.bincount(doc_z[2:], minlength=n_topics).astype(float)
    nw, nt = nwk[0].astype(float), nk.astype(float)
    np.subtract.at(nw, doc_z[:2], 1)
    np.subtract.at(nt, doc_z[:2], 1)
    joint = np.zeros((n_topics, n_topics))
    for a in range(n_topics):
        for b in range(n_topics):
            e = float(a == b)
            joint[a, b] = ((nd[a] + alpha) * (nw[a] + beta) / (nt[a] + V * beta)
                           * (nd[b] + e + alpha) * (nw[b] + e + beta) / (nt[b] + e + V * beta))
    joint /= joint.sum()
    words, docs, z = doc_w[:2].copy(), np.zeros(2, np.int32), doc_z[:2].copy()
    n, hist = 20000, np.zeros((n_topics, n_topics))
    for t in range(10 * n):
        sample(words, docs, z, nwk, nk, alpha, beta, V * beta, np.uint64(t * 7919 + 3))
        if t % 10 == 9:
            hist[z[0], z[1]] += 1
    assert chisquare(hist.ravel(), joint.ravel() * n).pvalue > 1e-4


@pytest.mark.parametrize("dense,topic_dtype", [(False, np.uint16), (True, np.uint16),
                                                (False, np.int32), (True, np.int32)])
def test_packed_slice_sampling_is_pack_of_unpacked(dense, topic_dtype):
    """A sampler given the slice packed (the model schedule's slices in hand) changes the
    tokens, the documents' counts and the totals exactly as on the unpacked slice, gives
    pack() of the sampled slice, and leaves its buffer (one row of K for all the rows)
    all zeros; words without tokens here (rows 0, 3 and the last) keep their packed
    rows."""
    rng = np.random.default_rng(5)
    n_rows, v0, n_topics, n_docs = 9, 4, 13, 6
    # the other workers' counts in the slice, and this worker's tokens (sorted by word)
    words = np.sort(rng.choice([5, 6, 6, 8, 9, 9, 9, 10, 11], 40)).astype(np.int32)
    docs = rng.integers(0, n_docs, words.size).astype(np.int32)
    z0 = rng.integers(0, n_topics, words.size).astype(np.int32)
    table = (rng.random((n_rows, n_topics)) < 0.3) * rng.integers(1, 4, (n_rows, n_topics))
    np.add.at(table, (words - v0, z0), 1)
    table = table.astype(np.int32)
    nk0 = table.sum(axis=0).astype(np.int64) + 7
    lengths = np.bincount(docs, minlength=n_docs).astype(np.int64)

    def run(packed_in):
        z, nk = z0.copy(), nk0.copy()
        order = np.argsort(docs, kind="stable")  # doc_lists/doc_table: tokens by document
        if dense:
            ndk = np.zeros((n_docs, n_topics), np.uint16)
            K.doc_table(lengths, z[order], ndk)
            doc_state = lambda: ndk.copy()  # noqa: E731
            bufs = np.zeros((3, n_topics))
        else:
            dmeta, dlist = np.empty((n_docs, 2), np.int64), np.empty((z.size, 2), np.uint16)
            K.doc_lists(lengths, z[order], dmeta, dlist, n_topics)
            doc_state = lambda: K.doc_topic_dense(dmeta, dlist, n_topics)  # noqa: E731
            P = 1 << (n_topics - 1).bit_length()
            bufs = (np.zeros(2 * P), np.zeros(n_topics))
        if packed_in is None:
            nwk = table.copy()
            packed, done = None, None
        else:
            nwk = np.zeros((1, n_topics), np.int32)
            packed, done = K.packed_io(packed_in, words.size, np.zeros(n_topics, np.uint8),
                                       np.zeros(n_topics, np.int64))
        state = (ndk, ) if dense else (dmeta, dlist)
        fn = K.sample_dense if dense else K.sample_block
        for r in range(5):  # a few rounds, the packed slice passed on each time
            o = fn(_ptr(words, n_rows, v0), docs, z, *state, nwk, nk, 0.3, 0.05, 0.05 * 40,
                   np.uint64(r + 11), *bufs, packed)
            if packed_in is not None:
                packed_in = done(o)
                assert not nwk.any()  # the buffer is all zeros again
                packed, done = K.packed_io(packed_in, words.size, packed[6], packed[7])
        return z, nk, doc_state(), (K.pack(nwk) if packed_in is None else packed_in)

    pk = K.pack(table)
    ref, got = run(None), run((pk[0], pk[1].astype(topic_dtype), pk[2]))
    for a, b in zip(ref[:3], got[:3]):
        assert np.array_equal(a, b)
    assert all(np.array_equal(a, b) for a, b in zip(ref[3], got[3]))
    assert got[3][1].dtype == topic_dtype
    for r in (0, 3, n_rows - 1):  # rows without tokens: as they came
        assert np.array_equal(got[3][1][got[3][0][r]:got[3][0][r + 1]],
                              pk[1][pk[0][r]:pk[0][r + 1]])


@pytest.mark.parametrize("n_topics,n_parts", [(1, 1), (7, 1), (7, 3), (1000, 4)])
def test_sum_packed_is_pack_of_the_dense_sum(n_topics, n_parts):
    """Packed tables of the same rows (each worker's counts of a slice) added packed give
    what pack() gives of their dense sum, dtypes included; rows empty in every part and
    in some parts kept."""
    rng = np.random.default_rng(n_topics + n_parts)
    n_rows = 12
    tables = [((rng.random((n_rows, n_topics)) < 0.2) *
               rng.integers(1, 6, (n_rows, n_topics))).astype(np.int32)
              for _ in range(n_parts)]
    tables[0][3] = 0
    tables[-1][2, -1] = 70000  # (a count beyond 16 bits)
    for t in tables:
        t[5] = 0
    parts = [K.pack_tokens(*_tokens_of(t)) for t in tables]
    got, ref = K.sum_packed(parts, n_topics), K.pack(sum(tables))
    assert all(a.dtype == b.dtype and np.array_equal(a, b) for a, b in zip(got, ref))


def _tokens_of(table):
    """(wptr, z, K): tokens sorted by word whose counts are ``table``, topics shuffled."""
    rng = np.random.default_rng(1)
    z = np.concatenate([rng.permutation(np.repeat(np.arange(table.shape[1]), row))
                        for row in table]).astype(np.uint16)
    wptr = np.concatenate([[0], np.cumsum(table.sum(axis=1))]).astype(np.int64)
    return wptr, z, table.shape[1]


@pytest.mark.parametrize("n_topics", [1, 2, 5, 8, 1000])
def test_tree_build_is_the_sum_tree_of_the_leaves(n_topics):
    """The F+ tree's leaves are (n_wk + beta) / (n_k + V beta), zero beyond K, and every
    inner node the sum of its two children (a NumPy reference, level by level)."""
    rng = np.random.default_rng(3)
    counts = rng.integers(0, 50, n_topics).astype(np.int32)
    inv = 1.0 / (rng.integers(1, 500, n_topics) + 40.0)
    P = 1 << int(np.ceil(np.log2(max(n_topics, 1))))
    tree = np.full(2 * P, np.nan)
    K._tree_build(tree, counts, 0.01, inv)
    ref = np.zeros(2 * P)
    ref[P:P + n_topics] = (counts + 0.01) * inv
    for k in range(P - 1, 0, -1):
        ref[k] = ref[2 * k] + ref[2 * k + 1]
    assert np.array_equal(tree[1:], ref[1:])


@pytest.mark.parametrize("density", [0.02, 0.5, 1.0])
@pytest.mark.parametrize("dtype", [np.uint16, np.int32])
def test_sum_lgamma_table_either_way(density, dtype):
    """The word-topic table's lgamma sum: summed in groups of eight (a group of zeros
    skipped) or every count in lanes, it is SciPy's, counts beyond the table too (in a
    group and in the tail of fewer than eight)."""
    from scipy.special import gammaln

    rng = np.random.default_rng(2)
    c = ((rng.random(5003) < density) * rng.integers(1, 60, 5003)).astype(dtype)
    c[[17, 4000, 5001]] = [5000, 9000, 4096]  # beyond a table of 4096
    table = K.lgamma_table(0.01, 4096)
    ref = float((gammaln(c[c > 0] + 0.01) - gammaln(0.01)).sum())
    assert np.isclose(K.sum_lgamma(c, 0.01, table), ref, rtol=1e-12)
    assert np.isclose(K.sum_lgamma_table(c, 0.01, table), ref, rtol=1e-12)
    assert K.sum_lgamma_table(c, 0.01, table) == K.sum_lgamma_table(c.copy(), 0.01, table)
    assert K.sum_lgamma_table(np.zeros(0, dtype), 0.01, table) == 0.0


def test_round_seeds_are_distinct_and_fixed():
    """The samplers' seeds: one per (seed, worker, round), none repeated over a grid,
    the same on every call, and spread over all 64 bits."""
    from strads.apps.lda.update import round_seed

    grid = [(s, w, r) for s in (0, 1, 2**40) for w in range(16) for r in range(500)]
    seeds = [round_seed(*g) for g in grid]
    assert all(type(x) is np.uint64 for x in seeds)
    assert len(set(int(x) for x in seeds)) == len(grid)
    assert seeds == [round_seed(*g) for g in grid]
    bits = np.unpackbits(np.array(seeds, np.uint64).view(np.uint8)).mean()
    assert 0.49 < bits < 0.51


def test_loglik_matches_lda_package():
    import lda

    rng = np.random.default_rng(0)
    nzw = rng.integers(0, 6, (7, 30)).astype(np.intc)  # lda's layout: topics x words
    ndz = rng.integers(0, 6, (9, 7)).astype(np.intc)
    ref = lda._lda._loglikelihood(np.asfortranarray(nzw), ndz, nzw.sum(axis=1).astype(np.intc),
                                  ndz.sum(axis=1).astype(np.intc), 0.1, 0.01)
    assert np.isclose(app.loglikelihood(nzw.T, ndz, 0.1, 0.01), ref, rtol=1e-10)


# ----------------------------------------------------------------------------- runs
@pytest.mark.parametrize("schedule,workers,staleness",
                         [("model", 1, 0), ("model", 3, 0), ("model", 3, 2), ("data", 3, 0),
                          ("data", 2, 1)])
def test_invariants_every_round(schedule, workers, staleness):
    X, _, _ = small_corpus()
    res = app.fit(X, n_topics=6, sweeps=4, schedule=schedule, workers=workers,
                  staleness=staleness, check=True, quiet=True, mpi=False)
    m = res.model
    n_tokens = int(X.sum())
    per_sweep = workers * (staleness + 1) if schedule == "model" else 1
    assert res.rounds == 4 * per_sweep and res.updates == 4 * n_tokens
    assert res.summary()["max_staleness_seen"] == staleness
    assert m["word_topic"].sum() == n_tokens and m["word_topic"].min() >= 0
    assert np.array_equal(m["doc_topic"].sum(axis=0), m["topic_totals"])
    assert np.array_equal(m["word_topic"].sum(axis=0), m["topic_totals"])
    assert np.array_equal(m["doc_topic"].sum(axis=1), np.asarray(X.sum(axis=1)).ravel())
    assert np.array_equal(m["word_topic"].sum(axis=1), np.asarray(X.sum(axis=0)).ravel())
    assert np.isclose(m["loglik"], app.loglikelihood(m["word_topic"], m["doc_topic"], 0.1,
                                                     0.01), rtol=1e-10)


@pytest.mark.parametrize("n_topics", [1, 2, 33])
def test_tiny_documents_and_odd_k(n_topics):
    # single-token documents empty their topic list when the token is taken out
    X = sp.csr_matrix(np.array([[1, 0, 0], [0, 0, 1], [3, 1, 0], [0, 2, 2], [0, 1, 0]]))
    res = app.fit(X, n_topics=n_topics, sweeps=20, workers=2, quiet=True, mpi=False,
                  check=True)
    assert res.stop_reason == "schedule_done"  # not "tol": with K = 1 every sweep ties
    assert np.array_equal(res.model["doc_topic"].sum(axis=1), [1, 1, 4, 4, 1])
    assert np.isclose(res.model["loglik"], app.loglikelihood(
        res.model["word_topic"], res.model["doc_topic"], 0.1, 0.01), rtol=1e-10)


def test_deterministic_and_learns():
    X, _, _ = small_corpus()
    a = app.fit(X, n_topics=4, sweeps=10, workers=2, quiet=True, mpi=False)
    b = app.fit(X, n_topics=4, sweeps=10, workers=2, quiet=True, mpi=False)
    assert np.array_equal(a.model["doc_topic"], b.model["doc_topic"])
    first = a.trace[0]["loglik"]
    assert a.model["loglik"] > first + 0.02 * abs(first)


def test_recovers_true_topics():
    X, phi, _ = make_corpus(400, 200, 100, 5, 0.1, 0.05, seed=7)
    res = app.fit(X, n_topics=5, alpha=0.1, beta=0.01, sweeps=100, workers=2, quiet=True,
                  mpi=False)
    wt = res.model["word_topic"].T + 0.01
    est = wt / wt.sum(axis=1, keepdims=True)
    tv = 0.5 * np.abs(phi[:, None, :] - est[None, :, :]).sum(axis=2)
    rows, cols = linear_sum_assignment(tv)
    assert tv[rows, cols].mean() < 0.1, tv[rows, cols]


@pytest.mark.parametrize("dense", [True, False])
def test_reuters_loglik_within_1pct_of_lda_package(dense, monkeypatch):
    """Both layouts of the doc-topic counts (the dense table at 20 topics, and the
    compact lists, forced) are exact samplers of the chain the lda package runs."""
    import lda

    from strads.apps.lda import update

    if not dense:
        monkeypatch.setattr(update, "DENSE_MAX_K", 0)

    X = lda.datasets.load_reuters()
    ref = lda.LDA(n_topics=20, n_iter=100, alpha=0.1, eta=0.01, random_state=1).fit(X)
    res = app.fit(X, n_topics=20, alpha=0.1, beta=0.01, sweeps=100, workers=2, seed=1,
                  quiet=True, mpi=False)
    ll, ll_ref = res.model["loglik"], ref.loglikelihood()
    assert abs(ll - ll_ref) <= 0.01 * abs(ll_ref), (ll, ll_ref)


def test_empty_documents_are_kept():
    X, _, _ = small_corpus()
    X = sp.vstack([sp.csr_matrix((2, X.shape[1]), dtype=np.int64), X,
                   sp.csr_matrix((1, X.shape[1]), dtype=np.int64)]).tocsr()
    res = app.fit(X, n_topics=3, sweeps=3, workers=3, quiet=True, mpi=False, check=True)
    dt = res.model["doc_topic"]
    assert dt.shape[0] == X.shape[0] and dt[:2].sum() == 0 and dt[-1].sum() == 0
    assert np.isclose(res.model["loglik"], app.loglikelihood(res.model["word_topic"], dt,
                                                             0.1, 0.01), rtol=1e-10)


def test_outputs(tmp_path):
    X, _, _ = small_corpus()
    app.fit(X, n_topics=3, sweeps=3, workers=2, quiet=True, mpi=False, out=str(tmp_path))
    s = json.loads((tmp_path / "summary.json").read_text())
    for key in ("topics", "tokens", "loglik", "tokens_per_s", "app", "rounds"):
        assert key in s
    assert s["tokens"] == int(X.sum()) and s["topics"] == 3
    header = (tmp_path / "trace.csv").read_text().splitlines()[0].split(",")
    assert "loglik" in header
    z = np.load(tmp_path / "model.npz")
    assert z["word_topic"].shape == (X.shape[1], 3) and z["doc_topic"].shape == (X.shape[0], 3)


@pytest.mark.parametrize("dense", [True, False])
@pytest.mark.parametrize("workers", [1, 3])
def test_model_doc_topic_is_the_workers_counts(dense, workers, monkeypatch):
    """The workers send their documents' counts packed (the table's or the lists'
    non-zeros); the model's doc_topic is every worker's counts in its rows."""
    from strads.apps.lda import update
    from strads.apps.lda.update import LDAUpdate

    if not dense:
        monkeypatch.setattr(update, "DENSE_MAX_K", 0)
    seen = []
    collect = LDAUpdate.collect

    def spy(self):
        seen.append((self.d0, self.dense, self.doc_topic()))
        return collect(self)
    monkeypatch.setattr(LDAUpdate, "collect", spy)
    X, _, _ = small_corpus()
    res = app.fit(X, n_topics=5, sweeps=3, workers=workers, quiet=True, mpi=False)
    dt = res.model["doc_topic"]
    assert len(seen) == workers and all(d == dense for _, d, _ in seen)
    assert sum(t.shape[0] for _, _, t in seen) == X.shape[0]
    for d0, _, table in seen:
        np.testing.assert_array_equal(dt[d0:d0 + table.shape[0]], table)
    np.testing.assert_array_equal(dt.sum(axis=1), np.asarray(X.sum(axis=1)).ravel())
    np.testing.assert_array_equal(dt.sum(axis=0), res.model["topic_totals"])


def test_sampler_rate_stops_at_the_last_round(monkeypatch):
    """tokens_per_s is the sampler's rate (as peers time their train()): gathering the
    final model, here 1000 s slower, is not in the rate. On a frozen clock
    each round's update takes 1 s a worker and nothing else takes any time."""
    from strads.apps.lda import aggregate
    from strads.apps.lda.update import LDAUpdate
    clock = FakeClock(monkeypatch, aggregate, strads.driver, frozen=True)
    collect, update, calls = LDAUpdate.collect, LDAUpdate.update, []

    def slow_collect(self):
        clock.skip(500)  # each of the two workers
        return collect(self)

    def slow_update(self, *a, **kw):
        calls.append(1)
        clock.skip(1.0)
        return update(self, *a, **kw)
    monkeypatch.setattr(LDAUpdate, "collect", slow_collect)
    monkeypatch.setattr(LDAUpdate, "update", slow_update)
    X, _, _ = small_corpus()
    res = app.fit(X, n_topics=3, sweeps=3, workers=2, quiet=True, mpi=False)
    sampling = res.extra["tokens"] * res.extra["sweeps"] / res.extra["tokens_per_s"]
    # every round's update seconds are in the rate, none of the 1,000 of the gathering
    # (which the run's clock did pass through: the skips are all it moved by)
    assert len(calls) == 2 * res.rounds
    assert sampling == pytest.approx(len(calls))
    assert clock.skipped == len(calls) + 1000


@pytest.mark.parametrize("kw,msg", [({"n_topics": 0}, "topics"), ({"alpha": 0}, "alpha"),
                                    ({"schedule": "x"}, "schedule")])
def test_bad_parameters(kw, msg):
    X, _, _ = small_corpus()
    with pytest.raises(strads.DataError, match=msg):
        app.fit(X, quiet=True, mpi=False, **kw)


def test_bad_matrix():
    with pytest.raises(strads.DataError, match="non-negative"):
        app.fit(np.array([[1, -1]]), quiet=True, mpi=False)
    with pytest.raises(strads.DataError, match="integers"):
        app.fit(np.array([[1.5, 1]]), quiet=True, mpi=False)
    with pytest.raises(strads.DataError, match="empty"):
        app.fit(np.zeros((3, 4), int), quiet=True, mpi=False)


@pytest.mark.parametrize("schedule", ["model", "data"])
def test_scheduler_keeps_nothing_of_model_size(schedule):
    """After setup the scheduler's pieces hold counters and sizes only: the documents
    are in the shards (the workers'), which build the word-topic counts themselves; for
    a file or the built-in corpus the shards are descriptions (no array at all)."""
    X, _, _ = small_corpus()
    setup = app.make_setup(lambda: (X, None), n_topics=7, schedule=schedule, sweeps=3)
    sched, agg, shards = setup(Context(n_workers=3, staleness=1))
    for piece in (sched, agg):
        for k, v in vars(piece).items():
            assert not isinstance(v, (np.ndarray, list, tuple, dict)), (piece, k)
    assert sum(int(s["source"]["counts"].sum()) for s in shards) == int(X.sum())
    assert not any(k in s for s in shards for k in ("nwk", "slices", "words", "z"))

    def arrays(obj):
        if isinstance(obj, dict):
            return any(arrays(v) for v in obj.values())
        if isinstance(obj, (list, tuple)):
            return any(arrays(v) for v in obj)
        return isinstance(obj, np.ndarray)

    for source in (app.corpus_source(100, 50, 10, 3), app.file_source(REUTERS)):
        setup = app.make_setup(source, n_topics=7, schedule=schedule, sweeps=3)
        sched, agg, shards = setup(Context(n_workers=3, staleness=1))
        assert len(shards) == 3 and not arrays(shards)
        for piece in (sched, agg):
            assert not arrays(vars(piece)), piece


def test_scheduler_bytes_per_round_do_not_grow_with_workers(tmp_path):
    """Rank 0 sends one task and receives one reply a round whatever the number of
    workers: its bytes per round (the difference of two runs' over the difference of
    their rounds, which leaves the shards out) are the same under mpiexec -n 3 and -n 4,
    and small (no word-topic counts pass through it)."""
    per_round = {}
    for np_ in (3, 4):
        got = []
        for sweeps in (2, 4):
            out = tmp_path / f"n{np_}s{sweeps}"
            p = run_cli(["strads.apps.lda", "--quiet", "--n-docs", "100", "--n-words", "200",
                         "--doc-length", "20", "--sweeps", str(sweeps), "--top-words", "0",
                         "--out", str(out)], np=np_, timeout=120)
            assert p.returncode == 0, p.stderr
            s = json.loads((out / "summary.json").read_text())
            t = s["traffic"][0]
            assert t["rank"] == 0 and len(s["traffic"]) == np_
            got.append((s["rounds"], t["bytes_sent"] + t["bytes_received"]))
        (r0, b0), (r1, b1) = got
        assert r1 - r0 == 2 * (np_ - 1)
        per_round[np_] = (b1 - b0) / (r1 - r0)
    assert max(per_round.values()) < 512, per_round
    # frames are 64-byte aligned; a sweep's last round also brings the log-likelihood
    assert abs(per_round[3] - per_round[4]) <= 64, per_round


@pytest.mark.parametrize("schedule,staleness,workers", [("model", 2, 2), ("data", 1, 2),
                                                      ("model", 0, 1)])
def test_resume_with_the_model_on_the_workers(schedule, staleness, workers, tmp_path):
    """A checkpoint keeps the workers' slices (several a worker at staleness 2; one
    worker's one slice, kept unpacked) or tables: resumed, the run ends with the
    uninterrupted run's model, bit for bit."""
    base = ["strads.apps.lda", "--quiet", "--n-docs", "100", "--n-words", "120",
            "--doc-length", "20", "--sweeps", "6", "--workers", str(workers),
            "--top-words", "0",
            "--schedule", schedule, "--staleness", str(staleness)]
    full, part = tmp_path / "full", tmp_path / "part"
    assert run_cli(base + ["--out", str(full)]).returncode == 0
    # a checkpoint due after every round (one worker's five rounds of 2,000 tokens can
    # take under a millisecond in all: none would be due before the run stops)
    p = run_cli(base + ["--out", str(part), "--max-rounds", "5", "--checkpoint-every",
                        "1e-6"])
    assert p.returncode == 0, p.stderr
    assert (part / "checkpoint" / "manifest.json").exists()
    p = run_cli(base + ["--out", str(part), "--resume"])
    assert p.returncode == 0, p.stderr
    with np.load(full / "model.npz") as a, np.load(part / "model.npz") as b:
        assert a.files == b.files
        for k in a.files:
            assert np.array_equal(a[k], b[k]), k


# ----------------------------------------------------------------------------- readers
def test_readers(tmp_path):
    (tmp_path / "docword.t.txt").write_text("3\n4\n4\n1 1 2\n1 3 1\n3 4 5\n3 4 1\n")
    (tmp_path / "vocab.t.txt").write_text("apple\nbanana\ncherry\ndate\n")
    X, vocab = load(str(tmp_path / "docword.t.txt"))
    assert vocab == ["apple", "banana", "cherry", "date"]
    assert np.array_equal(X.toarray(), [[2, 0, 1, 0], [0, 0, 0, 0], [0, 0, 0, 6]])
    (tmp_path / "c.ldac").write_text("2 0:2 2:1\n0\n1 3:6\n")
    X2, v2 = load(str(tmp_path / "c.ldac"))
    assert v2 is None and np.array_equal(X2.toarray(), X.toarray())
    (tmp_path / "d.txt").write_text("The apple and the Apple pie.\n\nPie, apple; cherry!\n")
    X3, v3 = load(str(tmp_path / "d.txt"), min_count=2)
    assert v3 == ["apple", "pie"]
    assert np.array_equal(X3.toarray(), [[2, 1], [0, 0], [1, 1]])
    Xr, vr = load(REUTERS)
    import lda
    assert np.array_equal(Xr.toarray(), lda.datasets.load_reuters())
    assert vr == list(lda.datasets.load_reuters_vocab())


@pytest.mark.parametrize("name,text,msg", [
    ("docword.a.txt", "2\n3\n1\n1 2 -1\n", ":4: count -1"),
    ("docword.b.txt", "2\n3\n1\n1 2 1.5\n", ":4: count '1.5' is not an integer"),
    ("docword.c.txt", "2\n3\n1\n1 4 1\n", ":4: wordID 4 outside"),
    ("docword.d.txt", "2\n3\n2\n1 1 1\n", "NNZ = 2 but 1"),
    ("docword.e.txt", "2\n3\n1\n1 1\n", ":4: expected 'docID wordID count'"),
    ("f.ldac", "1 0:1\n2 1:2 x\n", ":2: 'x' is not id:count"),
    ("g.ldac", "1 0:1\n1 1:-2\n", ":2: count -2"),
    ("h.ldac", "1 0:1\n2 1:2\n", ":2: N = 2 but 1"),
    ("i.ldac", "\n\n", "empty corpus"),
    ("j.txt", "the and of\n", "empty corpus"),
    ("k.ldac", "", "empty file"),
])
def test_bad_input_names_file_and_line(tmp_path, name, text, msg):
    path = tmp_path / name
    path.write_text(text)
    with pytest.raises(strads.DataError) as e:
        load(str(path))
    assert str(e.value).startswith(str(path)) and msg in str(e.value)


def test_uci_vocab_and_doc_range(tmp_path):
    (tmp_path / "docword.v.txt").write_text("2\n3\n1\n3 1 1\n")
    (tmp_path / "vocab.v.txt").write_text("x\ny\nz\n")
    with pytest.raises(strads.DataError, match=r"docword.v.txt:4: docID 3 outside 1..2"):
        load(str(tmp_path / "docword.v.txt"))
    (tmp_path / "vocab.v.txt").write_text("x\ny\n")
    with pytest.raises(strads.DataError, match=r"docword.v.txt:2: W = 3 but .* lists 2"):
        load(str(tmp_path / "docword.v.txt"))


def test_more_workers_than_documents():
    with pytest.raises(strads.DataError, match="3 workers for 2 documents"):
        app.fit(np.array([[1, 2], [0, 3]]), workers=3, quiet=True, mpi=False)


def test_word_id_outside_vocab(tmp_path):
    (tmp_path / "a.ldac").write_text("1 0:1\n1 3:1\n")
    (tmp_path / "a.tokens").write_text("x\ny\nz\n")
    with pytest.raises(strads.DataError, match=r"a.ldac:2: word id 3 outside"):
        load(str(tmp_path / "a.ldac"))


# ----------------------------------------------------------------------------- CLI
def test_cli_builtin_and_top_words(tmp_path):
    p = run_cli(["strads.apps.lda", "--quiet", "--sweeps", "5", "--n-docs", "200",
                 "--top-words", "3", "--out", str(tmp_path), "--workers", "2"])
    assert p.returncode == 0, p.stderr
    lines = p.stdout.splitlines()
    assert json.loads(lines[0])["app"] == "lda"
    assert sum(line.startswith("topic ") for line in lines) == 10
    assert (tmp_path / "model.npz").exists()


def test_cli_bad_input(tmp_path):
    bad = tmp_path / "docword.x.txt"
    bad.write_text("1\n2\n1\n1 3 1\n")
    p = run_cli(["strads.apps.lda", "--data", str(bad)])
    assert p.returncode == 2 and f"{bad}:4: wordID 3 outside" in p.stderr
    p = run_cli(["strads.apps.lda", "--topics", "0"])
    assert p.returncode == 2 and "--topics" in p.stderr


@pytest.mark.parametrize("n_topics", [3, 7])
def test_lda_worker_with_only_empty_documents(n_topics):
    # (the list sampler divided by the empty list's stride, 0: ZeroDivisionError)
    from strads.apps import lda

    X = np.array([[0, 0], [0, 1]])  # one token; worker 0 holds the empty document
    res = lda.fit(X, n_topics=n_topics, sweeps=2, workers=2, quiet=True, seed=0)
    wt, dt = res.model["word_topic"], res.model["doc_topic"]
    assert wt.sum(axis=1).tolist() == [0, 1] and dt.sum(axis=1).tolist() == [0, 1]
    # (the same as one worker's counts: the exact marginals of one token)
    assert np.isclose(res.model["loglik"], lda.loglikelihood(wt, dt, 0.1, 0.01))
