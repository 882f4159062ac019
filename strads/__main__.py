"""``python -m strads compile [APP ...]``: compile every app's numba kernels into numba's
on-disk cache (``make install`` runs it), so that no later run waits for them."""
import argparse
import os
import subprocess
import sys
import time

#: each app's command line on a tiny built-in problem, run on two workers (the
#: multi-worker code paths; the default problem, run first on one, takes the default's)
TINY = {
    "lasso": ["--n-samples", "60", "--n-features", "80", "--n-informative", "5"],
    "logreg": ["--n-samples", "60", "--n-features", "80", "--n-informative", "5"],
    "mf": ["--n-users", "40", "--n-items", "30", "--n-ratings", "600", "--rank", "2",
           "--iters", "3"],
    "lda": ["--n-docs", "20", "--n-words", "30", "--doc-length", "10", "--topics", "3",
            "--sweeps", "2", "--top-words", "0"],
}

# dense X, fewer columns than rows (the Lasso's first working set from one Gram)
DENSE = ["--n-samples", "60", "--n-features", "20", "--n-informative", "5", "--dense"]


def tiny_files(app, folder):
    """Tiny files in each format ``app`` reads, written to ``folder``: the runs over them
    (``--data`` argv) compile the readers' and the parallel load's kernels."""
    import numpy as np

    rng = np.random.default_rng(0)
    pairs = rng.permutation(40 * 30)[:600]
    u, i, r = pairs // 30 + 1, pairs % 30 + 1, rng.integers(1, 6, 600)
    files, runs = {}, []
    if app in ("lasso", "logreg"):
        rows = [(f"{rng.choice([-1, 1]) if app == 'logreg' else rng.normal():g} " + " ".join(
            f"{j}:{rng.normal():g}" for j in np.sort(rng.choice(80, 5, False)) + 1))
            for _ in range(60)]
        files["tiny.svm"] = "".join(row + "\n" for row in rows)
        entries = rng.permutation(60 * 80)[:300]
        for name, order in (("tiny.mtx", entries), ("sorted.mtx", np.sort(entries))):
            files[name] = "%%MatrixMarket matrix coordinate real general\n60 80 300\n" + \
                "".join(f"{p // 80 + 1} {p % 80 + 1} {rng.normal():g}\n" for p in order)
        files["tiny.y"] = "".join(row.split()[0] + "\n" for row in rows)
        y = ["--target", os.path.join(folder, "tiny.y")]
        runs = [["tiny.svm"], ["tiny.svm", "--schedule", "priority"], ["tiny.mtx", *y],
                ["sorted.mtx", *y]]
    elif app == "mf":
        files["tiny.data"] = "".join(f"{a}\t{b}\t{c}\t0\n" for a, b, c in zip(u, i, r))
        files["tiny.mtx"] = "%%MatrixMarket matrix coordinate real general\n40 30 600\n" + \
            "".join(f"{a} {b} {c}\n" for a, b, c in zip(u, i, r))
        runs = [[name, "--rank", "2", "--iters", "3"] for name in ("tiny.data", "tiny.mtx")]
    elif app == "lda":
        files["vocab.tiny.txt"] = files["tiny.vocab"] = "".join(f"w{w}\n" for w in range(30))
        files["docword.tiny.txt"] = "40\n30\n600\n" + "".join(
            f"{a} {b} {c}\n" for a, b, c in sorted(zip(u, i, r)))
        files["tiny.ldac"] = "".join(f"3 {d}:1 {d + 1}:2 {d + 2}:1\n" for d in range(20))
        files["tiny.txt"] = "".join(f"w{d} w{d + 1} w{d + 2} w{d}\n" for d in range(20))
        runs = [[name, "--topics", "3", "--sweeps", "2", "--top-words", "0"]
                for name in ("docword.tiny.txt", "tiny.ldac", "tiny.txt")]
    for name, text in files.items():
        with open(os.path.join(folder, name), "w") as f:
            f.write(text)
    return [["--data", os.path.join(folder, run[0])] + run[1:] for run in runs]


def compile_apps(apps):
    """Run each app in this process on its default built-in problem (one worker), on a
    tiny one with two workers (the Lasso's and logreg's priority schedule too), on a tiny
    file of each format it reads, and the estimators' own kernels (LDA's fold-in)."""
    import contextlib
    import importlib
    import io
    import tempfile

    for app in apps:
        t = time.perf_counter()
        main = importlib.import_module(f"strads.apps.{app}.__main__").main
        glm = app in ("lasso", "logreg")
        with contextlib.redirect_stdout(io.StringIO()), tempfile.TemporaryDirectory() as d:
            for argv in (["--workers", "1"], TINY[app] + ["--workers", "2"],
                         *([TINY[app] + ["--workers", "2", "--schedule", "priority"]] * glm),
                         *([DENSE + ["--workers", "2"]] * glm),
                         *(run + ["--workers", "2"] for run in tiny_files(app, d))):
                main(argv + ["--quiet"])
        if app == "lasso":  # the face's Newton steps (near interpolation: no tiny run's)
            import numpy as np

            from .apps.lasso import kernels as LK
            LK.face_enter(np.zeros((1, 1)), np.zeros(1, np.int64), 0, np.zeros(1, np.int64),
                          np.zeros(1, np.int64), np.zeros(2, np.bool_), np.zeros(1))
        if app == "lda":  # the estimator's fold-in (transform, score)
            import numpy as np
            import scipy.sparse as sp

            from .apps.lda import foldin
            X = sp.csr_matrix(np.ones((1, 3), np.int64))
            phi = np.full((3, 2), 0.5)
            theta = foldin.fold_in_threads(*foldin.tokens(X), phi, 0.1, 2, 0, 1)
            foldin.doc_loglik(X.indptr.astype(np.int64), X.indices.astype(np.int64),
                              X.data.astype(np.float64), theta, phi)
        print(f"strads compile: {app} {time.perf_counter() - t:.1f}s", flush=True)


def main(argv=None):
    p = argparse.ArgumentParser(prog="python -m strads", description=(
        "strads' tools. compile: fill numba's on-disk cache with the apps' kernels, so that "
        "no later run waits for them."))
    sub = p.add_subparsers(dest="command", required=True)
    c = sub.add_parser("compile", help="fill numba's on-disk cache with every app's "
                       "kernels (make install runs it)")
    c.add_argument("apps", nargs="*", metavar="APP",
                   help=f"apps to compile ({', '.join(TINY)}; default: all)")
    args = p.parse_args(argv)
    unknown = [a for a in args.apps if a not in TINY]
    if unknown:
        p.error(f"unknown app {unknown[0]!r} (choose from {', '.join(TINY)})")
    apps = args.apps or list(TINY)
    # on two cores or more, two processes of about equal work: the Lasso's and logreg's
    # kernels (logreg's calls the Lasso's: one process compiles them once), LDA's and MF's
    groups = [[a for a in apps if a in ("lasso", "logreg")],
              [a for a in apps if a not in ("lasso", "logreg")]]
    if (os.cpu_count() or 1) < 2 or not all(groups):
        compile_apps(apps)
        return 0
    procs = [subprocess.Popen([sys.executable, "-m", "strads", "compile", *g])
             for g in groups]
    return max(p.wait() for p in procs)


if __name__ == "__main__":
    sys.exit(main())
