"""Memory-bound kernels against this machine's streaming bandwidth, measured in one run.
Method and figures: docs/benchmarks.md."""
import argparse
import timeit

import numpy as np
import scipy.sparse as sp

from strads.apps.glm import kernels as LK
from strads.apps.lda import kernels as DK
from strads.apps.mf import kernels as MK

GB = 1e9


def best_time(fn, reps, setup=None):
    """Best wall time of ``reps`` calls of ``fn`` (``setup()`` before each, untimed;
    timeit's: the garbage collector off while timed)."""
    return min(timeit.repeat(fn, setup or "pass", repeat=reps, number=1))


def lasso_sparse(scale, rng):
    n, p = int(50_000 * scale), 400_000
    nnz_col = 25  # 10M non-zeros at scale 1: 120 MB of indices and values
    X = sp.random(n, p, density=nnz_col / n, format="csc", random_state=rng,
                  dtype=np.float64)
    X.sort_indices()
    X.indices = X.indices.astype(np.int32)
    X.indptr = X.indptr.astype(np.int32)
    nbytes = 4 * (p + 1) + 12 * X.nnz + 8 * n + 8 * p
    args = (X.indptr, X.indices, X.data, rng.standard_normal(n), np.arange(p), np.empty(p))
    LK.grad_sparse(*args)
    return (f"Lasso x_j'r sparse {n} x {p}, {X.nnz / 1e6:.1f}M nnz",
            lambda: LK.grad_sparse(*args), nbytes, None)


def lasso_dense(scale, rng):
    n, p = int(4_000 * scale), 10_000  # 320 MB at scale 1
    X = np.asfortranarray(rng.standard_normal((n, p)))
    args = (X, rng.standard_normal(n), np.arange(p), np.empty(p))
    LK.grad_dense(*args)
    return (f"Lasso x_j'r dense {n} x {p}", lambda: LK.grad_dense(*args),
            8 * n * p + 8 * n + 8 * p, None)


def mf_ccd(scale, rng, pending):
    m, n_other, nnz = int(200_000 * scale), 20_000, int(10_000_000 * scale)
    rows = np.sort(rng.integers(0, m, nnz))
    indptr = np.searchsorted(rows, np.arange(m + 1)).astype(np.int64)
    idx = rng.integers(0, n_other, nnz).astype(np.int32)
    res0 = rng.standard_normal(nnz)
    res = res0.copy()
    own = rng.standard_normal((8, m)) * 0.1  # rank 8
    P = int(pending)
    G = rng.standard_normal((n_other, 1 + P)) * 0.1
    reg = np.full(m, 0.05)
    tps = np.arange(P, dtype=np.int64)
    scratch = np.empty(int(np.diff(indptr).max()))
    args = (indptr, idx, res, own, 2, G, reg, tps, scratch)
    MK.ccd_step(*args)
    nbytes = 8 * (m + 1) + (4 + 16) * nnz + 24 * m + 8 * (1 + P) * n_other

    return (f"MF ccd_step {m} rows, {nnz / 1e6:.0f}M ratings, P = {P}",
            lambda: MK.ccd_step(*args), nbytes,
            lambda: np.copyto(res, res0))  # (the step changes the residuals in place)


def lda_block(scale, rng, burn_in, K=1000, in_cache=False):
    from strads.apps.lda.data import make_corpus

    # bench_lda.py's synthetic corpus (20,000 words, documents of 200 tokens, 50 topics);
    # in_cache: 100 such documents over 500 words (their lists, 80 KB, stay in L2, the
    # word rows, 2 MB, in L3), sampled 100 times a timing: what the sampler does a
    # token with no memory traffic to wait for
    n_docs, n_words, passes = (100, 500, 100) if in_cache else (int(10_000 * scale), 20_000, 1)
    C = make_corpus(n_docs, n_words, 200, 50, 0.1, 0.05, 0)[0].tocsr()
    lengths = np.asarray(C.sum(axis=1)).ravel().astype(np.int64)
    # tokens in document order, then visited word by word (within a word, by document)
    doc_of = np.repeat(np.arange(n_docs, dtype=np.int32), np.diff(C.indptr))
    words_doc = np.repeat(C.indices.astype(np.int32), C.data.astype(np.int64))
    docs_doc = np.repeat(doc_of, C.data.astype(np.int64))
    n = words_doc.shape[0]
    z_doc = rng.integers(0, K, n).astype(np.int32)
    dmeta = np.empty((n_docs, 2), np.int64)
    dlist = np.empty((n, 2), np.uint16)
    DK.doc_lists(lengths, z_doc, dmeta, dlist, K)
    order = np.lexsort((docs_doc, words_doc))
    words, docs, z = words_doc[order], docs_doc[order], z_doc[order].copy()
    V = C.shape[1]
    wptr = np.searchsorted(words, np.arange(V + 1)).astype(np.int64)  # each word's tokens
    nwk = np.zeros((V, K), np.int32)
    np.add.at(nwk, (words, z), 1)
    nk = np.bincount(z, minlength=K).astype(np.int64)
    tree = np.zeros(2 << (K - 1).bit_length())  # a sum tree over K leaves, a power of 2
    cum = np.zeros(max(1, min(K, int(lengths.max()))))
    seed = [np.uint64(7)]

    def one_pass():
        seed[0] += np.uint64(1)
        DK.sample_block(wptr, docs, z, dmeta, dlist, nwk, nk, 0.1, 0.01, V * 0.01, seed[0],
                        tree, cum)  # alpha, beta

    for _ in range(burn_in):  # the documents' lists shrink to their topics
        one_pass()
    kd = float((dmeta[docs, 1]).mean())  # K_d over tokens, each token its document's
    n_runs = int(np.count_nonzero(np.diff(words)) + 1)
    nbytes = n * (4 + 4 + 8 + 16 + 8) + int(n * kd * 4) + n_runs * 4 * K + 8 * K
    where = f"{n_docs} documents in cache, {passes} passes" if in_cache else \
        f"{n / 1e6:.1f}M tokens"
    return (f"LDA sample_block K = {K}, {where} (K_d {kd:.0f})",
            lambda: [one_pass() for _ in range(passes)], passes * nbytes, None)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--scale", type=float, default=1.0)
    ap.add_argument("--lda-burn-in", type=int, default=10, metavar="SWEEPS",
                    help="Gibbs sweeps before the LDA sampler is timed (default 10)")
    args = ap.parse_args()
    rng = np.random.default_rng(0)
    a = np.ones((512 << 20) // 8)  # numpy's sum of it: the reference bandwidth

    def stream():
        return a.nbytes / best_time(a.sum, args.reps)
    print(f"stream: numpy sum of {a.nbytes >> 20} MiB, best of {args.reps}; "
          "each kernel best of the same")
    first = stream()
    makers = [lambda: lasso_sparse(args.scale, rng), lambda: lasso_dense(args.scale, rng),
              lambda: mf_ccd(args.scale, rng, False), lambda: mf_ccd(args.scale, rng, True),
              lambda: lda_block(args.scale, rng, args.lda_burn_in),
              lambda: lda_block(args.scale, rng, args.lda_burn_in, in_cache=True)]
    rows = []
    for make in makers:
        name, fn, nbytes, setup = make()
        near = stream()
        rows.append((name, nbytes, best_time(fn, args.reps, setup), near))
    ref = max([first] + [r[3] for r in rows])
    print(f"streaming bandwidth (best): {ref / GB:.1f} GB/s")
    print(f"{'kernel':58s} {'MB moved':>9s} {'best s':>8s} {'GB/s':>6s} {'% stream':>8s}"
          f" {'% stream next to it':>20s}")
    for name, nbytes, t, near in rows:
        bw = nbytes / t
        print(f"{name:58s} {nbytes / 1e6:9.1f} {t:8.4f} {bw / GB:6.2f} "
              f"{100 * bw / ref:7.1f}% {100 * bw / near:19.1f}%")


if __name__ == "__main__":
    main()
