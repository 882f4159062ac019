"""Every core in one process: ``--workers 2`` (two worker threads) against ``--workers 1``,
LDA at K = 1,000 and MF CCD++ on 5M ratings, loop time from summary.json. Method and
figures: docs/benchmarks.md."""
import argparse
import os

from _common import timed_cli

RUNS = {
    "lda": ["strads.apps.lda", "--n-docs", "20000", "--n-words", "20000", "--doc-length",
            "200", "--true-topics", "50", "--topics", "1000", "--sweeps", "5", "--tol", "0",
            "--top-words", "0"],
    "mf": ["strads.apps.mf", "--n-users", "200000", "--n-items", "20000", "--n-ratings",
           "5000000", "--rank", "32", "--lambda", "0.05", "--weighted-lambda", "--iters", "3",
           "--tol", "0", "--bias", "mean", "--early-stop", "0"],
}


def loop_s(args, workers):
    return timed_cli(args + ["--workers", workers])[1]["wall_s"]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--only", default="lda,mf")
    a = ap.parse_args()
    for app in a.only.split(","):
        times = {1: [], 2: []}
        for _ in range(a.repeat):
            for w in (1, 2):
                times[w].append(loop_s(RUNS[app], w))
        one, two = min(times[1]), min(times[2])
        print(f"{app}: --workers 1 {one:.2f}s, --workers 2 (threads) {two:.2f}s: "
              f"{two / one:.2f}x the time ({os.cpu_count()} cores; best of {a.repeat}: "
              f"{', '.join(f'{t:.2f}' for t in times[1])} / "
              f"{', '.join(f'{t:.2f}' for t in times[2])})", flush=True)


if __name__ == "__main__":
    main()
