"""Real-size data sets, strads against the peers users would pick, side by side.

    python benchmarks/bench_real_size.py --scale 0.05 --dir /tmp/strads_real --json out.json
    python benchmarks/bench_real_size.py --scale 1.0 --apps mf      # the full Netflix shape

Method (the shapes, their skew, what is reported): docs/scaling.md.
``--ranks 2 4 8 16``: strads alone under ``mpiexec -n N`` for each N (the speed-up curve).
"""
import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import numpy as np

from _common import (MPIEXEC, libmf_fit, libmf_rmse, read_trace, timed, tomotopy_loglik,
                     tomotopy_model)

HERE = Path(__file__).resolve()
PY = sys.executable
CHUNK = 2_000_000  # ratings, tokens or non-zeros generated at a time

NETFLIX = dict(users=480_189, items=17_770, ratings=100_480_507)
NYTIMES = dict(docs=300_000, words=102_660, tokens=99_542_125)
REGRESSION = dict(rows=1_000_000, cols=1_000_000, nnz=40_000_000)


# ---------------------------------------------------------------- text, vectorised
def _ascii(values, decimals, seps):
    """Bytes of ``values`` (int64, already scaled by 10**decimals) written with
    ``decimals`` digits after the point, each followed by its separator byte."""
    v = np.asarray(values, np.int64)
    dec = np.broadcast_to(np.asarray(decimals, np.int64), v.shape)
    neg = v < 0
    a = np.abs(v)
    scale = 10 ** dec
    ip, fp = a // scale, a % scale
    nd = np.maximum(1, np.searchsorted(10 ** np.arange(19), ip, side="right"))  # digits
    length = neg + nd + np.where(dec > 0, 1 + dec, 0) + 1
    end = np.cumsum(length)
    start = end - length
    buf = np.empty(int(end[-1]) if v.size else 0, np.uint8)
    buf[start[neg]] = ord("-")
    istart = start + neg
    for k in range(int(nd.max()) if v.size else 0):
        m = nd > k
        buf[istart[m] + nd[m] - 1 - k] = 48 + (ip[m] // 10 ** k) % 10
    hasdec = dec > 0
    buf[(istart + nd)[hasdec]] = ord(".")
    for k in range(int(dec.max()) if v.size else 0):
        m = dec > k
        buf[istart[m] + nd[m] + dec[m] - k] = 48 + (fp[m] // 10 ** k) % 10
    buf[end - 1] = np.broadcast_to(np.asarray(seps, np.uint8), v.shape)
    return buf.tobytes()


def _rows(cols, seps):
    """Equal-length int columns row by row, each field followed by its byte of ``seps``."""
    return _ascii(np.column_stack(cols).ravel(), 0,
                  np.tile(np.frombuffer(seps.encode(), np.uint8), len(cols[0])))


def cached(name):
    """A generator of ``folder / name`` run once per (scale, seed): its description is kept
    beside the file and returned when present."""
    def wrap(gen):
        def run(folder, scale, seed):
            stem = folder / name.format(scale=scale, seed=seed)
            done = Path(f"{stem}.meta.json")
            if done.exists():
                return json.loads(done.read_text())
            meta = gen(stem, scale, np.random.default_rng(seed))
            done.write_text(json.dumps(meta))
            return meta
        return run
    return wrap


# ---------------------------------------------------------------- generators
def _spans(counts, size):
    """Consecutive (lo, hi) of ``counts``' indices, each summing to about ``size``."""
    lo = 0
    while lo < len(counts):
        hi = min(len(counts), lo + int(np.searchsorted(np.cumsum(counts[lo:]), size)) + 1)
        yield lo, hi
        lo = hi


def _lognormal(rng, mean, sigma, n):
    """``n`` lognormal draws of mean ``mean``, rounded (documents' or rows' lengths)."""
    return np.rint(rng.lognormal(np.log(mean) - sigma ** 2 / 2, sigma, n))


@cached("netflix_s{scale:g}_seed{seed}")
def gen_ratings(stem, scale, rng):
    n_u, n_i = max(100, round(NETFLIX["users"] * scale)), NETFLIX["items"]
    target = round(NETFLIX["ratings"] * scale)
    act = rng.lognormal(0.0, 1.2, n_u)
    cnt = np.minimum(np.maximum(1, np.round(act / act.sum() * target)), n_i // 4).astype(np.int64)
    pop = rng.lognormal(0.0, 1.3, n_i)
    cdf = np.cumsum(pop) / pop.sum()
    rank = 10
    s = (0.36 / rank) ** 0.25
    U = rng.normal(0, s, (n_u, rank)).astype(np.float32)
    V = rng.normal(0, s, (n_i, rank)).astype(np.float32)
    bu, bi = rng.normal(0, 0.4, n_u), rng.normal(0, 0.5, n_i)
    tmp = Path(tempfile.mkdtemp(dir=stem.parent))
    item_train = np.zeros(n_i, np.int64)
    chunks = []
    for u0, u1 in _spans(cnt, CHUNK):  # users a chunk; pairs are unique per user
        users = np.arange(u0, u1)
        keys = np.unique(np.repeat(users, cnt[u0:u1]) * n_i
                         + np.searchsorted(cdf, rng.random(cnt[u0:u1].sum())))
        for _ in range(4):  # top up the draws that repeated an item
            need = cnt[u0:u1] - np.bincount(keys // n_i - u0, minlength=u1 - u0)
            if need.sum() == 0:
                break
            keys = np.union1d(keys, np.repeat(users, need) * n_i
                              + np.searchsorted(cdf, rng.random(need.sum())))
        u, i = keys // n_i, keys % n_i
        score = 3.6 + bu[u] + bi[i] + np.einsum("ij,ij->i", U[u], V[i]) \
            + rng.normal(0, 0.7, u.size)
        r = np.clip(np.rint(score), 1, 5).astype(np.int8)
        ts = rng.integers(946_684_800, 1_136_073_600, u.size)
        test = rng.random(u.size) < 0.1
        # a user whose ratings all went to test keeps its first one for training
        first = np.r_[0, np.flatnonzero(np.diff(u)) + 1]
        ntr = np.add.reduceat(~test, first)
        test[first[ntr == 0]] = False
        item_train += np.bincount(i[~test], minlength=n_i)
        f = tmp / f"{len(chunks)}.npz"
        np.savez(f, u=u.astype(np.int32), i=i.astype(np.int32), r=r, ts=ts, test=test)
        chunks.append(f)
    n_train = n_test = 0
    with open(f"{stem}.train.tsv", "wb") as ftr, open(f"{stem}.test.tsv", "wb") as fte:
        for f in chunks:
            c = np.load(f)
            test = c["test"].copy()
            for j in np.flatnonzero(test & (item_train[c["i"]] == 0)):
                if item_train[c["i"][j]] == 0:  # an item with no training rating keeps one
                    test[j] = False
                    item_train[c["i"][j]] += 1
            cols = [c["u"].astype(np.int64) + 1, c["i"].astype(np.int64) + 1,
                    c["r"].astype(np.int64), c["ts"]]
            for out, m in ((ftr, ~test), (fte, test)):
                if m.any():
                    out.write(_rows([x[m] for x in cols], "\t\t\t\n"))
            n_train += int((~test).sum())
            n_test += int(test.sum())
    shutil.rmtree(tmp)
    return dict(train=f"{stem}.train.tsv", test=f"{stem}.test.tsv", users=n_u, items=n_i,
                n_train=n_train, n_test=n_test,
                bytes=os.path.getsize(f"{stem}.train.tsv") + os.path.getsize(f"{stem}.test.tsv"))


@cached("docword.nytimes_s{scale:g}_seed{seed}.txt")
def gen_corpus(stem, scale, rng):
    D, V, K = max(100, round(NYTIMES["docs"] * scale)), NYTIMES["words"], 100
    lengths = np.maximum(10, _lognormal(rng, NYTIMES["tokens"] / NYTIMES["docs"], 0.7, D))
    lengths = lengths.astype(np.int64)
    zipf = 1.0 / np.arange(1, V + 1) ** 1.05
    zipf = zipf[rng.permutation(V)]  # word ids alphabetical: frequency unrelated to id
    cdfs = np.empty((K, V))
    for t in range(K):
        w = zipf * rng.lognormal(0.0, 2.0, V)
        cdfs[t] = np.cumsum(w) / w.sum()
    body = Path(str(stem) + ".body")
    nnz = tokens = 0
    with open(body, "wb") as out:
        for d0, d1 in _spans(lengths, CHUNK // 4):
            theta = rng.gamma(0.1, 1.0, (d1 - d0, K)) + 1e-300
            ct = np.cumsum(theta / theta.sum(1, keepdims=True), axis=1)
            doc = np.repeat(np.arange(d0, d1), lengths[d0:d1])
            z = np.minimum((ct[doc - d0] < rng.random(doc.size)[:, None]).sum(1), K - 1)
            order = np.argsort(z, kind="stable")
            word = np.empty(doc.size, np.int64)
            bounds = np.r_[0, np.cumsum(np.bincount(z, minlength=K))]
            for t in range(K):
                idx = order[bounds[t]:bounds[t + 1]]
                word[idx] = np.minimum(np.searchsorted(cdfs[t], rng.random(idx.size)), V - 1)
            keys, counts = np.unique(doc * V + word, return_counts=True)
            out.write(_rows([keys // V + 1, keys % V + 1, counts], "  \n"))
            nnz += keys.size
            tokens += doc.size
    with open(stem, "wb") as f:
        f.write(f"{D}\n{V}\n{nnz}\n".encode())
        with open(body, "rb") as b:
            shutil.copyfileobj(b, f, 1 << 24)
    body.unlink()
    vocab = stem.with_name(stem.name.replace("docword", "vocab", 1))
    vocab.write_text("".join(f"w{j}\n" for j in range(V)))
    return dict(data=str(stem), vocab=str(vocab), docs=D, words=V, nnz=nnz, tokens=tokens,
                bytes=os.path.getsize(stem))


@cached("regression_s{scale:g}_seed{seed}.svm")
def gen_regression(stem, scale, rng):
    n, p = max(100, round(REGRESSION["rows"] * scale)), REGRESSION["cols"]
    lengths = np.maximum(1, _lognormal(rng, REGRESSION["nnz"] / REGRESSION["rows"], 0.8, n))
    lengths = np.minimum(lengths, 2000).astype(np.int64)
    pop = 1.0 / np.arange(1, p + 1) ** 0.9
    perm = rng.permutation(p)  # column j has popularity rank inv[j]
    cdf = np.cumsum(pop) / pop.sum()
    beta = np.zeros(p)
    true = perm[rng.choice(20_000, 200, replace=False)]
    beta[true] = rng.normal(0, 1, 200)
    xty = np.zeros(p)
    nnz = 0
    with open(stem, "wb") as out:
        for r0, r1 in _spans(lengths, CHUNK):
            row = np.repeat(np.arange(r0, r1), lengths[r0:r1])
            keys = np.unique(row * p + perm[np.minimum(np.searchsorted(cdf, rng.random(row.size)), p - 1)])
            row, col = keys // p, keys % p
            vq = np.rint(rng.normal(0, 1, keys.size) * 1e4).astype(np.int64)
            val = vq / 1e4
            xb = np.bincount(row - r0, weights=val * beta[col], minlength=r1 - r0)
            yq = np.rint((xb + rng.normal(0, 0.5 * max(xb.std(), 1e-3), xb.size)) * 1e4)
            yq = yq.astype(np.int64)
            y = yq / 1e4
            xty += np.bincount(col, weights=val * y[row - r0], minlength=p)
            # fields: each row's label (before its first pair: row is sorted), then its
            # col:val pairs; a row's last field ends the line
            at = np.searchsorted(row, np.arange(r0, r1)) * 2
            vals = np.insert(np.column_stack([col + 1, vq]).ravel(), at, yq)
            dec = np.insert(np.tile([0, 4], keys.size), at, 4)
            sep = np.insert(np.tile(np.frombuffer(b": ", np.uint8), keys.size), at, ord(" "))
            sep[np.r_[at[1:] + np.arange(r1 - r0 - 1), sep.size - 1]] = ord("\n")
            out.write(_ascii(vals, dec, sep))
            nnz += keys.size
    return dict(data=str(stem), rows=n, cols=p, nnz=nnz, lambda_max=float(np.abs(xty).max() / n),
                bytes=os.path.getsize(stem))


# ---------------------------------------------------------------- peers (own processes)
def _peak_mb():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def peer_libmf(a):
    import pandas as pd
    t0 = time.perf_counter()
    kw = dict(sep="\t", header=None, usecols=[0, 1, 2], dtype=np.int32, engine="c")
    tr = pd.read_csv(a["train"], **kw).to_numpy()
    te = pd.read_csv(a["test"], **kw).to_numpy()
    X = np.empty((tr.shape[0], 3), np.float32)
    X[:, 0], X[:, 1], X[:, 2] = tr[:, 0] - 1, tr[:, 1] - 1, tr[:, 2]
    del tr
    load = time.perf_counter() - t0
    fit, m = libmf_fit(X, a["rank"], a["lam"], a["iters"], threads=a["threads"])
    return dict(load_s=load, fit_s=fit, per_iter_s=fit / a["iters"], total_s=load + fit,
                peak_mb=[_peak_mb()],  # (before the scoring's arrays)
                test_rmse=libmf_rmse(m, te[:, 0] - 1, te[:, 1] - 1, te[:, 2]))


def peer_tomotopy(a):
    import pandas as pd
    t0 = time.perf_counter()
    x = pd.read_csv(a["data"], sep=" ", header=None, skiprows=3, dtype=np.int32,
                    engine="c").to_numpy()
    names = np.array([str(w) for w in range(a["words"] + 1)], dtype=object)
    cuts = np.flatnonzero(np.diff(x[:, 0])) + 1
    m = tomotopy_model((names[np.repeat(w, c)].tolist() for w, c in zip(
        np.split(x[:, 1], cuts), np.split(x[:, 2], cuts))), a["K"], a["alpha"], a["beta"])
    del x
    m.train(0, workers=a["workers"])
    load = time.perf_counter() - t0
    sweeps = [timed(m.train, 1, workers=a["workers"])[0] for _ in range(a["sweeps"])]
    return dict(load_s=load, sweep_s=sweeps, per_iter_s=float(np.median(sweeps)),
                total_s=load + sum(sweeps), peak_mb=[_peak_mb()], ll_per_token=tomotopy_loglik(
                    m, a["words"], a["K"], a["alpha"], a["beta"], first_id=1) / a["tokens"],
                tomotopy_ll_per_word=float(m.ll_per_word))


def peer_lasso(a):
    from sklearn.datasets import load_svmlight_file
    t0 = time.perf_counter()
    X, y = load_svmlight_file(a["data"], n_features=a["cols"])
    X = X.tocsc()
    if a["peer"] == "scikit-learn":  # its Lasso refuses load_svmlight_file's int64 indices
        X.indices, X.indptr = X.indices.astype(np.int32), X.indptr.astype(np.int32)
    load = time.perf_counter() - t0
    if a["peer"] == "skglm":
        from skglm import Lasso
        est = Lasso(alpha=a["lam"], fit_intercept=False, tol=a["tol"], max_iter=1000)
    else:
        from sklearn.linear_model import Lasso
        est = Lasso(alpha=a["lam"], fit_intercept=False, tol=a["tol"], max_iter=100000,
                    precompute=False)
    est.set_params(alpha=2 * a["lambda_max"]).fit(X, y)  # compiles (skglm's numba) untimed
    est.set_params(alpha=a["lam"])
    fit, w = timed(est.fit, X, y)[0], est.coef_
    return dict(load_s=load, fit_s=fit, total_s=load + fit, peak_mb=[_peak_mb()],
                objective=float(0.5 * np.mean((y - X @ w) ** 2) + a["lam"] * np.abs(w).sum()),
                nnz_coef=int((w != 0).sum()))


PEERS = {"libmf": peer_libmf, "tomotopy": peer_tomotopy, "lasso": peer_lasso}
PEER_MODULE = {"libmf": "libmf", "tomotopy": "tomotopy", "skglm": "skglm",
               "scikit-learn": "sklearn"}


def run_peer(kind, args, timeout):
    mod = PEER_MODULE.get(args.get("peer", kind))
    probe = subprocess.run([PY, "-c", f"import {mod}"], capture_output=True, text=True)
    if probe.returncode:
        return dict(skipped=f"{mod} will not import: {probe.stderr.strip().splitlines()[-1]}")
    t0 = time.perf_counter()
    p = subprocess.run([PY, str(HERE), "--peer", kind, json.dumps(args)], capture_output=True,
                       text=True, timeout=timeout)
    if p.returncode:
        return dict(failed=(p.stderr or p.stdout).strip().splitlines()[-1:])
    out = json.loads(p.stdout.strip().splitlines()[-1])
    out["process_s"] = time.perf_counter() - t0
    return out


# ---------------------------------------------------------------- strads (its CLIs)
_STARTUP = {}


def startup_s(app):
    """An empty start: the interpreter and the app's import (left out of load)."""
    if app not in _STARTUP:
        _STARTUP[app] = timed(subprocess.run, [PY, "-c", f"import strads.apps.{app}"],
                              check=True)[0]
    return _STARTUP[app]


def run_strads(app, flags, ranks, out, timeout):
    """One strads CLI run, in one process with two worker threads (``ranks`` 0) or under
    ``mpiexec -n ranks``; the loop's end is when its final progress line arrives (stderr),
    so load = that - the loop's wall_s - an empty start, and output = exit - that."""
    shutil.rmtree(out, ignore_errors=True)
    base = [PY, "-u", "-m", f"strads.apps.{app}", *flags, "--out", str(out)]
    cmd = base + ["--workers", "2"] if not ranks else [MPIEXEC, "-n", str(ranks), *base]
    lines = []
    t0 = time.perf_counter()
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)

    def read_err():
        for line in p.stderr:
            lines.append((time.perf_counter(), line))
    reader = threading.Thread(target=read_err, daemon=True)
    reader.start()
    try:
        p.stdout.read()
        p.wait(timeout)
    except subprocess.TimeoutExpired:
        p.kill()
    wall = time.perf_counter() - t0
    reader.join(10)
    if p.returncode:
        return dict(failed=[t for _, t in lines[-3:]], cmd=" ".join(cmd))
    s = json.loads((out / "summary.json").read_text())
    ends = [t for t, line in lines if line.startswith(f"[{app}] round")]
    end = (ends[-1] - t0) if ends else wall
    load = max(0.0, end - s["wall_s"] - startup_s(app))
    return dict(process_s=wall, loop_s=s["wall_s"], load_s=load, output_s=wall - end,
                summary=s, trace={k: v.tolist() for k, v in read_trace(out / "trace.csv").items()},
                peak_mb=[t["peak_rss_mb"] for t in s["traffic"]], cmd=" ".join(cmd))


def warm(app, flags, folder):
    """The same run on a tiny file of the same kind first, so numba's cache is loaded (or
    compiled, once) outside the timings."""
    run_strads(app, flags, 0, folder / f"out_warm_{app}", 600)


# ---------------------------------------------------------------- the three benchmarks
def side_by_side(app, flags, peers, a, folder, extract, quality, reached):
    """strads' two layouts and ``peers`` ({name: callable}), in alternating order each
    repeat, or with ``--ranks`` strads alone under ``mpiexec -n N`` for each N (the
    speed-up curve); then strads' time (load + loop) to the first trace row where
    ``reached(trace, [the peers' quality])`` holds."""
    layouts = ({f"strads mpiexec -n {n}": n for n in a.ranks} if a.ranks else
               {"strads 1 process": 0, "strads mpiexec -n 3": 3})
    peers = {} if a.ranks else peers
    runs = {k: [] for k in (*layouts, *peers)}
    for rep in range(a.repeat):
        for name in (list(runs) if rep % 2 == 0 else list(runs)[::-1]):
            if name in peers:
                r = peers[name]()
            else:
                r = run_strads(app, flags, layouts[name], folder / f"out_{app}", a.timeout)
                print(f"  {name}: " + ", ".join(f"{k} {r[k]}" for k in (
                    "process_s", "loop_s", "load_s", "peak_mb", "failed") if k in r), flush=True)
                if "summary" in r:
                    r.update(extract(r.pop("summary"), r), total_s=r["load_s"] + r["loop_s"])
            runs[name].append(r)
    got = [r[quality] for n in peers for r in runs[n] if r.get(quality) is not None]
    for name in layouts:
        for r in runs[name]:
            trace = r.pop("trace", None)
            if trace and got:
                hit = np.flatnonzero(reached(trace, got))
                r["to_peer_quality_s"] = (r["load_s"] + trace["wall_s"][hit[0]]) if hit.size \
                    else None
    return runs


def bench_mf(meta, tiny, a, folder):
    iters, lam, rank = a.mf_iters, 0.05, 40

    def flags(m, iters):
        return ["--data", m["train"], "--test-data", m["test"], "--rank", str(rank),
                "--lambda", str(lam), "--iters", str(iters), "--tol", "0", "--early-stop", "0"]
    warm("mf", flags(tiny, 1), folder)
    peer = dict(train=meta["train"], test=meta["test"], rank=rank, lam=lam, iters=iters,
                threads=2)
    runs = side_by_side(
        "mf", flags(meta, iters), {"LIBMF": lambda: run_peer("libmf", peer, a.timeout)}, a,
        folder, lambda s, r: dict(test_rmse=s["test_rmse"], rmse_per_iter=s["test_rmse_per_iter"],
                                  per_iter_s=r["loop_s"] / max(1, s["iterations"])),
        "test_rmse", lambda t, got: np.array(t["test_rmse"]) <= min(got))
    table(f"MF, rank {rank}, lambda {lam}, {iters} iterations, {meta['n_train']:,} training "
          "ratings", runs, meta["n_train"], "rating", meta["bytes"], "test_rmse")
    return dict(data=meta, iters=iters, rank=rank, lam=lam, runs=runs)


def bench_lda(meta, tiny, a, folder):
    out = {}
    for K in a.lda_topics:
        def flags(m, sweeps):
            return ["--data", m["data"], "--vocab", m["vocab"], "--topics", str(K),
                    "--sweeps", str(sweeps), "--tol", "0", "--top-words", "0"]
        warm("lda", flags(tiny, 1), folder)
        peer = dict(data=meta["data"], K=K, alpha=0.1, beta=0.01, sweeps=a.lda_sweeps,
                    workers=2, words=meta["words"], tokens=meta["tokens"])
        runs = side_by_side(
            "lda", flags(meta, a.lda_sweeps),
            {"tomotopy": lambda: run_peer("tomotopy", peer, a.timeout)}, a, folder,
            lambda s, r: dict(ll_per_token=s["loglik"] / s["tokens"],
                              per_iter_s=r["loop_s"] / a.lda_sweeps),
            "ll_per_token",
            lambda t, got: np.array(t["loglik"]) >= max(got) * meta["tokens"])
        out[f"K={K}"] = dict(runs=runs, sweeps=a.lda_sweeps)
        table(f"LDA K={K}, {a.lda_sweeps} sweeps, {meta['tokens']:,} tokens", runs,
              meta["tokens"], "token", meta["bytes"], "ll_per_token")
    return dict(data=meta, by_topics=out)


def bench_lasso(meta, tiny, a, folder):
    out = {}
    warm("lasso", ["--data", tiny["data"], "--lambda-ratio", "0.1"], folder)
    for ratio in a.lasso_ratios:
        lam = ratio * meta["lambda_max"]
        peer = dict(data=meta["data"], cols=meta["cols"], lam=lam, tol=1e-6,
                    lambda_max=meta["lambda_max"])
        runs = side_by_side(
            "lasso", ["--data", meta["data"], "--lambda", repr(lam), "--tol", "1e-6"],
            {name: (lambda name=name: run_peer("lasso", dict(peer, peer=name), a.timeout))
             for name in ("skglm", "scikit-learn")}, a, folder,
            lambda s, r: dict(objective=s["objective"], nnz_coef=s["nnz_coef"],
                              fit_s=r["loop_s"]),
            "objective", lambda t, got: np.array(t["objective"]) <= min(got) * (1 + 1e-6))
        out[f"{ratio:g} lambda_max"] = dict(runs=runs, lam=lam)
        table(f"Lasso at {ratio:g} lambda_max (lambda {lam:.4g}), {meta['nnz']:,} non-zeros",
              runs, meta["nnz"], "non-zero", meta["bytes"], "objective")
    return dict(data=meta, by_lambda=out)


# ---------------------------------------------------------------- report
def _fmt(x, f="{:.2f}"):
    return "-" if x is None else f.format(x)


def table(name, runs, per_unit, unit, nbytes, quality):
    print(f"\n{name}")
    print(f"  {'run':<22} {'load s':>8} {'MB/s':>7} {'s/iter':>8} {'total s':>8} "
          f"{'to peer q. s':>12} {'peak MB/proc':>22} {'B/' + unit:>11}  {quality}")
    for run, rs in runs.items():
        for r in rs:
            if "skipped" in r or "failed" in r:
                print(f"  {run:<22} {r.get('skipped') or r.get('failed')}")
                continue
            peaks = r["peak_mb"]
            load = r.get("load_s")
            print(f"  {run:<22} {_fmt(load):>8} {_fmt(nbytes / 1e6 / load if load else None, '{:.0f}'):>7} "
                  f"{_fmt(r.get('per_iter_s'), '{:.3f}'):>8} {_fmt(r.get('total_s')):>8} "
                  f"{_fmt(r.get('to_peer_quality_s')):>12} "
                  f"{'/'.join(f'{p:.0f}' for p in peaks):>22} "
                  f"{sum(peaks) * 2 ** 20 / per_unit:>11.0f}  {r.get(quality)}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--scale", type=float, default=0.05, help="1.0: the full sizes")
    ap.add_argument("--dir", type=Path, default=Path("/tmp/strads_real"))
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--apps", nargs="+", default=["mf", "lda", "lasso"])
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--mf-iters", type=int, default=10)
    ap.add_argument("--lda-topics", type=int, nargs="+", default=[100, 1000])
    ap.add_argument("--lda-sweeps", type=int, default=10)
    ap.add_argument("--lasso-ratios", type=float, nargs="+", default=[0.05, 0.001])
    ap.add_argument("--ranks", type=int, nargs="+",
                    help="strads alone under mpiexec -n N for each N (no peers)")
    ap.add_argument("--timeout", type=float, default=3600)
    ap.add_argument("--json", type=Path)
    ap.add_argument("--generate-only", action="store_true")
    ap.add_argument("--peer", nargs=2, help=argparse.SUPPRESS)
    ap.add_argument("--gen", nargs=2, help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.peer:
        print(json.dumps(PEERS[a.peer[0]](json.loads(a.peer[1]))))
        return
    gens = {"mf": gen_ratings, "lda": gen_corpus, "lasso": gen_regression}
    if a.gen:
        print(json.dumps(gens[a.gen[0]](a.dir, float(a.gen[1]), a.seed)))
        return
    (a.dir / "warm").mkdir(parents=True, exist_ok=True)

    def generate(app, folder, scale):
        # in a process of its own: a child inherits its parent's peak RSS (ru_maxrss, which
        # strads and the peers report) across fork and exec, so this one must stay small
        p = subprocess.run([PY, str(HERE), "--gen", app, repr(scale), "--dir", str(folder),
                            "--seed", str(a.seed)], capture_output=True, text=True, check=True)
        return json.loads(p.stdout.strip().splitlines()[-1])
    benches = {"mf": bench_mf, "lda": bench_lda, "lasso": bench_lasso}
    report = dict(scale=a.scale, seed=a.seed, repeat=a.repeat, argv=sys.argv, parent_peak_mb=0,
                  date=time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()))
    for app in a.apps:
        t0 = time.perf_counter()
        meta = generate(app, a.dir, a.scale)
        print(f"{app}: data {json.dumps(meta)} ({time.perf_counter() - t0:.1f} s to generate"
              " or find)", flush=True)
        if a.generate_only:
            continue
        tiny = generate(app, a.dir / "warm", 0.0005)
        report[app] = benches[app](meta, tiny, a, a.dir)
        report["startup_s"] = _STARTUP
        report["parent_peak_mb"] = _peak_mb()  # must stay below every figure it reports
        if a.json:
            a.json.write_text(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
