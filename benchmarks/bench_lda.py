"""LDA benchmark: strads' model-parallel Gibbs sampler against the `lda` package and
tomotopy, side by side in one run, printing ratios. Method and figures: docs/benchmarks.md.
"""
import argparse
import os
import tempfile
import time

import numpy as np

from _common import (best_of, installed, read_trace, run_cli, timed, tomotopy_loglik,
                     tomotopy_model)
from strads.apps import lda as app
from strads.apps.lda.data import make_corpus

ALPHA, BETA = 0.1, 0.01


def ours(X, K, sweeps, workers=1, schedule="model"):
    res = app.fit(X, n_topics=K, alpha=ALPHA, beta=BETA, sweeps=sweeps, workers=workers,
                  schedule=schedule, quiet=True, mpi=False, log_interval=0.0)
    return dict(rate=res.extra["tokens_per_s"], ll=res.model["loglik"],
                by_sweep={row["sweeps"]: row["loglik"] for row in res.trace})


def peer_lda(X, K, sweeps):
    import logging

    import lda

    logging.getLogger("lda").setLevel(logging.ERROR)
    wall, m = timed(lambda: lda.LDA(n_topics=K, n_iter=sweeps, alpha=ALPHA, eta=BETA,
                                    random_state=0).fit(X))
    return X.sum() * sweeps / wall, m.loglikelihood()


def peer_tomotopy(X, K, sweeps):
    import tomotopy as tp

    docs = (np.repeat(X.indices[a:b], X.data[a:b]) for a, b in zip(X.indptr, X.indptr[1:]))
    m = tomotopy_model(([str(w) for w in words] for words in docs), K, ALPHA, BETA)
    m.train(0, workers=1)  # initialise outside the timing
    wall, _ = timed(m.train, sweeps, workers=1, parallel=tp.ParallelScheme.NONE)
    return dict(rate=X.sum() * sweeps / wall, ll=tomotopy_loglik(m, X.shape[1], K, ALPHA, BETA))


def _module_docstrings(site_packages):
    """Each module file's docstrings (module, classes, functions), file by file: the
    standard library's and, with ``site_packages``, every installed package's; test
    folders left out."""
    import ast
    import sysconfig
    from pathlib import Path

    roots = [sysconfig.get_paths()["stdlib"]]
    if site_packages:
        roots.append(sysconfig.get_paths()["purelib"])
    paths = [x for r in roots for x in sorted(Path(r).rglob("*.py"))
             if site_packages or "site-packages" not in x.parts]
    for path in paths:
        if "test" in path.parts or "tests" in path.parts:
            continue
        try:
            tree = ast.parse(path.read_text(encoding="utf-8", errors="replace"))
        except (SyntaxError, ValueError):
            continue
        yield [text for node in ast.walk(tree)
               if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef,
                                    ast.AsyncFunctionDef))
               and (text := ast.get_docstring(node))]


def _counts(docs):
    """Documents x words counts: words are lowercase letter runs, English stop words and
    words in fewer than 3 documents left out (scikit-learn's CountVectorizer)."""
    from sklearn.feature_extraction.text import CountVectorizer

    vec = CountVectorizer(token_pattern=r"(?u)\b[a-zA-Z]{2,}\b", stop_words="english",
                          min_df=3, lowercase=True)
    X = vec.fit_transform(docs).tocsr()
    return X[np.asarray(X.sum(axis=1)).ravel() > 0]


def stdlib_docstrings(min_words=20, site_packages=False):
    """A real corpus that ships with Python: every docstring of a module, class or
    function of the standard library (and, with ``site_packages``, of every package
    installed beside this one: numpy, scipy, scikit-learn, ...; its size depends on the
    environment) with at least ``min_words`` words is a document (see _counts)."""
    return _counts([text for texts in _module_docstrings(site_packages) for text in texts
                    if len(text.split()) >= min_words])


def module_documents(min_words=300, n_docs=400, seed=0):
    """Long real documents, shaped like encyclopedia articles: all the docstrings of one
    module file of the standard library or an installed package joined, for files with
    at least ``min_words`` words; ``n_docs`` of them drawn with ``seed`` (see _counts)."""
    docs = [d for d in ("\n".join(texts) for texts in _module_docstrings(True))
            if len(d.split()) >= min_words]
    pick = np.random.default_rng(seed).choice(len(docs), size=min(n_docs, len(docs)),
                                              replace=False)
    return _counts([docs[i] for i in sorted(pick)])


def one_process(name, X, Ks, sweeps, lda_sweeps, repeats=3):
    """Ours and tomotopy run alternately ``repeats`` times (the best rate of each is
    printed: the machine may be shared); the `lda` package, slow and only the
    log-likelihood's reference, once. Every run's log-likelihood is the same (fixed
    seeds)."""
    print(f"\n== one process, 1 worker: {name} ({X.shape[0]} docs, {X.shape[1]} words, "
          f"{int(X.sum())} tokens; ours and tomotopy: best of {repeats})")
    print(f"{'K':>5} {'peer':>9} {'sweeps':>6} {'ours tok/s':>11} {'peer tok/s':>11} "
          f"{'ratio':>6} {'ours ll':>14} {'peer ll':>14} {'ll diff':>8}")
    for K in Ks:
        _, best = best_of(max(1, repeats), {"ours": lambda: ours(X, K, sweeps),
                                            "tomotopy": lambda: peer_tomotopy(X, K, sweeps)},
                          "rate", max)
        rate, ls = best["ours"]["rate"], lda_sweeps.get(K, sweeps)
        for peer, n, (prate, pll) in (("lda", ls, peer_lda(X, K, ls)),
                                      ("tomotopy", sweeps, best["tomotopy"].values())):
            oll = best["ours"]["by_sweep"].get(n, best["ours"]["ll"])
            print(f"{K:5d} {peer:>9} {n:6d} {rate / 1e6:10.2f}M {prate / 1e6:10.2f}M "
                  f"{rate / prate:6.2f} {oll:14.1f} {pll:14.1f} "
                  f"{100 * (oll - pll) / abs(pll):+7.2f}%", flush=True)


def cli_run(args, np_=None):
    with tempfile.TemporaryDirectory() as out:
        s = run_cli(["strads.apps.lda", "--top-words", "0", "--log-interval", "0", *args], out,
                    np=np_)
        return s, read_trace(os.path.join(out, "trace.csv"))


def write_uci(X, path):
    """X (documents x words counts) as a UCI bag-of-words file (D, W, NNZ, then
    1-based "document word count" lines)."""
    C = X.tocoo()
    with open(path, "w") as f:
        f.write(f"{X.shape[0]}\n{X.shape[1]}\n{C.nnz}\n")
        np.savetxt(f, np.column_stack([C.row + 1, C.col + 1, C.data]), fmt="%d")


def real_scaling(Ks, sweeps, repeats):
    """Two workers against one on real text: the docstrings of the standard library and
    of the installed packages, through the CLI (one worker; two worker threads in one
    process; mpiexec -n 3), alternately ``repeats`` times, the best rate of each."""
    t = time.time()
    X = stdlib_docstrings(site_packages=True)
    print(f"\n== 2 workers vs 1, real text: docstrings of the standard library and the "
          f"installed packages ({X.shape[0]} docs, {X.shape[1]} words, {int(X.sum())} "
          f"tokens; read in {time.time() - t:.0f}s); best of {repeats} alternating runs")
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "docword.pydoc.txt")
        write_uci(X, path)
        print(f"{'K':>5} {'sweeps':>6} {'1 worker':>10} {'2 threads':>10} {'ratio':>6} "
              f"{'-n 3':>10} {'ratio':>6}  loglik 1 / threads / -n 3")
        for K in Ks:
            base = ["--data", path, "--topics", str(K), "--sweeps", str(sweeps[K]),
                    "--alpha", str(ALPHA), "--beta", str(BETA)]
            _, best = best_of(max(1, repeats), {
                "one": lambda: cli_run([*base, "--workers", "1"])[0],
                "threads": lambda: cli_run([*base, "--workers", "2"])[0],
                "mpi": lambda: cli_run(base, np_=3)[0]}, "tokens_per_s", max)
            r1, rt, rm = (best[k]["tokens_per_s"] for k in ("one", "threads", "mpi"))
            print(f"{K:5d} {sweeps[K]:6d} {r1 / 1e6:9.2f}M {rt / 1e6:9.2f}M {rt / r1:6.2f} "
                  f"{rm / 1e6:9.2f}M {rm / r1:6.2f}  {best['one']['loglik']:.1f} / "
                  f"{best['threads']['loglik']:.1f} / {best['mpi']['loglik']:.1f}",
                  flush=True)


def scaling(corpus_args, K, sweeps):
    print(f"\n== mpiexec -n 3 (2 workers) vs 1 worker, synthetic corpus, K = {K}, "
          f"{sweeps} sweeps")
    base = [*corpus_args, "--topics", str(K), "--sweeps", str(sweeps)]
    one, _ = cli_run(base)
    three, _ = cli_run(base, np_=3)
    print(f"1 worker: {one['tokens_per_s'] / 1e6:.2f}M tokens/s, loglik {one['loglik']:.1f}")
    print(f"mpiexec -n 3: {three['tokens_per_s'] / 1e6:.2f}M tokens/s, loglik "
          f"{three['loglik']:.1f}   speed-up {three['tokens_per_s'] / one['tokens_per_s']:.2f}x")


def schedules(corpus_args, K, sweeps, np_):
    print(f"\n== model- vs data-parallel schedule, mpiexec -n {np_} ({np_ - 1} workers), "
          f"K = {K}: loglik by sweep and by time")
    runs = {}
    for sched in ("model", "data"):
        s, trace = cli_run([*corpus_args, "--topics", str(K), "--sweeps", str(sweeps),
                            "--schedule", sched], np_=np_)
        pts = {}  # the first row of each sweep
        for k, t, ll in zip(trace["sweeps"], trace["wall_s"], trace["loglik"]):
            pts.setdefault(int(k), (t, ll))
        runs[sched] = pts
        print(f"{sched}: {s['tokens_per_s'] / 1e6:.2f}M tokens/s, final loglik "
              f"{s['loglik']:.1f}, {s['wall_s']:.1f}s")
    print(f"{'sweep':>5} {'model s':>8} {'model ll':>14} {'data s':>8} {'data ll':>14}")
    for k in sorted(set(runs["model"]) & set(runs["data"])):
        (tm, lm), (td, ld) = runs["model"][k], runs["data"][k]
        print(f"{k:5d} {tm:8.2f} {lm:14.1f} {td:8.2f} {ld:14.1f}")


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--small", action="store_true", help="a quick run")
    p.add_argument("--sweeps", type=int, default=None)
    p.add_argument("--lda-sweeps-1000", type=int, default=None)
    p.add_argument("--repeats", type=int, default=3,
                   help="runs of ours and tomotopy each, alternately; the best rate is "
                   "shown")
    p.add_argument("--skip", default="", help="comma list of parts to skip: one (= "
                   "synthetic,real), mpi, realmpi (two workers on real text), sched")
    a = p.parse_args()
    n_docs = 5000 if a.small else 20000
    sweeps = a.sweeps or (5 if a.small else 20)
    lda1000 = a.lda_sweeps_1000 or (1 if a.small else 2)
    corpus_args = ["--n-docs", str(n_docs), "--n-words", "20000", "--doc-length", "200",
                   "--true-topics", "50", "--alpha", str(ALPHA), "--beta", str(BETA)]
    skip = set(a.skip.split(","))
    if not ("one" in skip or {"synthetic", "real"} <= skip or installed(
            "lda", "tomotopy", what="one process (synthetic, real) skipped")):
        skip.add("one")
    t0 = time.time()
    if not {"one", "synthetic"} & skip:
        X = make_corpus(n_docs, 20000, 200, 50, ALPHA, 0.05, 0)[0]
        one_process("synthetic", X, (100, 1000), sweeps, {1000: lda1000}, a.repeats)
    if not {"one", "real"} & skip:
        import lda

        few = {1000: 5 if a.small else 20}  # the `lda` package's sweeps at K = 1,000
        for name, corpus, lda_sweeps in (
                ("Reuters (lda package)", lambda: __import__("scipy.sparse").sparse.csr_matrix(
                    lda.datasets.load_reuters()), few),
                ("Python standard library docstrings", stdlib_docstrings, few),
                ("module docstrings joined (long documents)", module_documents,
                 {20: 20, 100: 20, 1000: 5})):
            one_process(name, corpus(), (20, 100, 1000), 20 if a.small else 100, lda_sweeps,
                        a.repeats)
    if "mpi" not in skip:
        scaling(corpus_args, 1000, 3 if a.small else 10)
    if "realmpi" not in skip:
        real_scaling((100, 1000), {100: 5 if a.small else 20, 1000: 3 if a.small else 10},
                     1 if a.small else a.repeats)
    if "sched" not in skip:
        schedules(corpus_args, 100, 5 if a.small else 20, 3)
    print(f"\n(benchmark took {time.time() - t0:.0f}s)")


if __name__ == "__main__":
    main()
