"""Real rating data for the benchmarks (never used by the tests or the package). Method and
figures: docs/benchmarks.md."""
import os
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

import numpy as np

WHEEL = "recbole==1.2.1"
MEMBER = "recbole/dataset_example/ml-100k/ml-100k.inter"


def cache_dir():
    d = os.environ.get("STRADS_BENCH_CACHE")
    return Path(d) if d else Path.home() / ".cache" / "strads-bench"


class FetchError(RuntimeError):
    pass


def fetch_ml100k():
    """Path of ml-100k.inter in the cache folder, fetched with pip the first time."""
    out = cache_dir() / "ml-100k.inter"
    if out.exists():
        return out
    out.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        cmd = [sys.executable, "-m", "pip", "download", WHEEL, "--no-deps",
               "--only-binary=:all:", "-d", tmp, "-q"]
        r = subprocess.run(cmd, capture_output=True, text=True)
        wheels = list(Path(tmp).glob("recbole-*.whl"))
        if r.returncode != 0 or not wheels:
            raise FetchError(
                "could not fetch MovieLens 100k: `" + " ".join(cmd[2:]) + "` failed "
                "(is the package registry reachable?). Put ml-100k.inter (tab-separated "
                "user, item, rating, timestamp with a header line) in " + str(out.parent)
                + " or set STRADS_BENCH_CACHE.\n" + (r.stderr or r.stdout).strip()[-2000:])
        with zipfile.ZipFile(wheels[0]) as z:
            data = z.read(MEMBER)
        part = out.with_suffix(".part")
        part.write_bytes(data)
        part.replace(out)
    return out


def movielens_100k():
    """(users, items, ratings): int64, int64, float64 arrays of MovieLens 100k's
    100,000 ratings, in the file's order (raw ids as written)."""
    path = fetch_ml100k()
    with open(path) as f:
        header = f.readline().split()
        if not header or not header[0].startswith("user_id"):
            raise FetchError(f"{path}: unexpected header {header!r}")
        a = np.loadtxt(f, dtype=np.float64, delimiter="\t", usecols=(0, 1, 2))
    users, items, ratings = a[:, 0].astype(np.int64), a[:, 1].astype(np.int64), a[:, 2]
    if users.shape[0] != 100000:
        raise FetchError(f"{path}: {users.shape[0]} ratings, expected 100,000")
    return users, items, ratings.copy()


def main():
    try:
        u, i, r = movielens_100k()
    except FetchError as e:
        sys.exit(f"error: {e}")
    print(f"{fetch_ml100k()}: {r.shape[0]} ratings, {np.unique(u).shape[0]} users, "
          f"{np.unique(i).shape[0]} items, mean {r.mean():.4f}")


if __name__ == "__main__":
    main()
