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


def compile_apps(apps):
    """Run each app in this process on its default built-in problem (one worker) and on a
    tiny one with two workers, and the estimators' own kernels (LDA's fold-in)."""
    import contextlib
    import importlib
    import io

    for app in apps:
        t = time.perf_counter()
        main = importlib.import_module(f"strads.apps.{app}.__main__").main
        with contextlib.redirect_stdout(io.StringIO()):
            for argv in (["--workers", "1"], TINY[app] + ["--workers", "2"]):
                main(argv + ["--quiet"])
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
    p = argparse.ArgumentParser(prog="python -m strads", description=__doc__.split("\n")[0])
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
    # on two cores or more, LDA's kernels (the longest to compile) in a process of their
    # own beside the others'
    groups = [[a for a in apps if a != "lda"], [a for a in apps if a == "lda"]]
    if (os.cpu_count() or 1) < 2 or not all(groups):
        compile_apps(apps)
        return 0
    procs = [subprocess.Popen([sys.executable, "-m", "strads", "compile", *g])
             for g in groups]
    return max(p.wait() for p in procs)


if __name__ == "__main__":
    sys.exit(main())
