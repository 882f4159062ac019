"""Rank 0's share: peak memory and traffic of every rank, from summary.json's ``traffic``,
for the three apps under ``mpiexec -n 3`` and ``-n 5``. Method and figures:
docs/benchmarks.md."""
import argparse
import os
import tempfile

from _common import run_cli

RUNS = {
    "mf": ["strads.apps.mf", "--n-users", "200000", "--n-items", "20000", "--n-ratings",
           "5000000", "--rank", "32", "--iters", "2", "--tol", "0", "--bias", "mean",
           "--early-stop", "0"],
    "lda": ["strads.apps.lda", "--n-docs", "20000", "--n-words", "20000", "--doc-length",
            "200", "--topics", "1000", "--sweeps", "2", "--tol", "0", "--top-words", "0"],
    "lasso": ["strads.apps.lasso", "--max-rounds", "20"],
}


def lasso_file(folder):
    from sklearn.datasets import dump_svmlight_file
    from strads.apps.lasso import make_problem

    path = os.path.join(folder, "lasso.svm")
    X, y, _ = make_problem(50_000, 100_000, density=0.001, n_informative=200, seed=0)
    dump_svmlight_file(X, y, path)
    return path


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--only", default="mf,lda,lasso")
    ap.add_argument("--np", default="3,5")
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        for app in a.only.split(","):
            args = RUNS[app]
            if app == "lasso":
                args = args + ["--data", lasso_file(tmp)]
            for n in map(int, a.np.split(",")):
                out = os.path.join(tmp, f"{app}-{n}")
                t = run_cli(args, out, np=n)["traffic"]
                rss = [e["peak_rss_mb"] for e in t]
                mb = lambda b: f"{b / 1e6:.0f}"  # noqa: E731
                print(f"{app} -n {n}: peak RSS rank 0 {rss[0]:.0f} MB, workers "
                      f"{min(rss[1:]):.0f}-{max(rss[1:]):.0f} MB; MB sent/received: "
                      + ", ".join(f"rank {e['rank']} {mb(e['bytes_sent'])}/"
                                  f"{mb(e['bytes_received'])}" for e in t), flush=True)


if __name__ == "__main__":
    main()
