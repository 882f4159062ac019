"""Fuzzing: small valid files and checkpoints, mutated, read by a child process that
reports each outcome; a child that dies (a signal) or hangs is replaced, and the case it
was on is named.
Method and figures: docs/benchmarks.md."""
import argparse
import contextlib
import gzip
import io
import json
import os
import random
import select
import shutil
import subprocess
import sys
import tempfile
import traceback
import zipfile

import numpy as np

from strads.transport import on_threads

DEFECTS = ("crash", "hang", "error", "multiline", "differs")
HOSTILE = [b"0", b"-1", b"2147483648", b"4294967297", b"9223372036854775808",
           b"-9223372036854775809", b"1e309", b"-1e309", b"nan", b"inf", b"1e-320", b"007",
           b"+5", b"1_000", b"0x10", b"1.5", b"", b" ", b":", b"::", b"\t", b"\r", b"\r\n",
           b"\n\n", b"%", b"%%MatrixMarket matrix coordinate real general", b"#", b"\x00",
           b"\xff\xfe", b"\xc3\xa9", b"\xe2\x80\xa8", b"\xef\xbb\xbf", b"caf\xc3\xa9",
           b"\xed\xa0\x80", b"99999999999999999999999", b"1:1", b"0:1", b"-3:2", b"1:nan"]
TEXT = ("svm", "mtx", "target", "ratings", "ratings-mtx", "uci", "ldac", "text")
FORMATS = TEXT + ("npz", "checkpoint")


# -- seed files ------------------------------------------------------------------------
def seeds(fmt, folder, rng):
    """{name: bytes} of small valid files of ``fmt`` (checkpoint: none, see below)."""
    X = np.round(rng.standard_normal((20, 12)) * (rng.random((20, 12)) < 0.3), 3).tolist()
    y = np.round(rng.standard_normal(20), 3).tolist()
    rows = [(i, j, X[i][j]) for i in range(20) for j in range(12) if X[i][j]]
    if fmt in ("svm", "target"):
        svm = "".join(f"{y[i]!r} " + " ".join(f"{j + 1}:{v!r}" for j, v in enumerate(X[i])
                                              if v) + "\n" for i in range(20))
        if fmt == "target":
            return {"t.txt": "".join(f"{v!r}\n" for v in y).encode(),
                    "t2.txt": ("# targets\n" + "".join(f"{v!r}\r\n" for v in y)).encode()}
        return {"d.svm": svm.encode(), "q.svm": ("# c\n" + svm.replace(" ", " qid:1 ", 1)
                                                 ).encode()}
    if fmt == "mtx":
        coord = (f"%%MatrixMarket matrix coordinate real general\n% c\n20 12 {len(rows)}\n"
                 + "".join(f"{i + 1} {j + 1} {v!r}\n" for i, j, v in rows))
        dense = ("%%MatrixMarket matrix array real general\n20 12\n"
                 + "".join(f"{X[i][j]!r}\n" for j in range(12) for i in range(20)))
        return {"c.mtx": coord.encode(), "a.mtx": dense.encode()}
    if fmt in ("ratings", "ratings-mtx"):
        r = [(u, i, int(rng.integers(1, 6))) for u in range(1, 31)
             for i in rng.choice(np.arange(1, 21), 5, replace=False)]
        if fmt == "ratings":
            return {"u.data": "".join(f"{u}\t{i}\t{v}\t88\n" for u, i, v in r).encode(),
                    "r.csv": ("userId,movieId,rating\n" + "".join(
                        f"{u},{i},{v}.5\n" for u, i, v in r)).encode()}
        return {"r.mtx": (f"%%MatrixMarket matrix coordinate integer general\n30 20 "
                          f"{len(r)}\n" + "".join(f"{u} {i} {v}\n" for u, i, v in r)).encode()}
    docs = [rng.integers(0, 15, rng.integers(3, 12)) for _ in range(25)]
    (folder / "vocab.c.txt").write_text("".join(f"w{k}\n" for k in range(15)))
    (folder / "c.vocab").write_text("".join(f"w{k}\n" for k in range(15)))
    if fmt == "uci":
        ent = [(d + 1, w + 1, int(c)) for d, doc in enumerate(docs)
               for w, c in zip(*np.unique(doc, return_counts=True))]
        return {"docword.c.txt": (f"25\n15\n{len(ent)}\n" + "".join(
            f"{d} {w} {c}\n" for d, w, c in ent)).encode()}
    if fmt == "ldac":
        return {"c.ldac": "".join(f"{len(np.unique(doc))} " + " ".join(
            f"{w}:{c}" for w, c in zip(*np.unique(doc, return_counts=True))) + "\n"
            for doc in docs).encode()}
    words = ["apple", "Banana", "café", "naïve", "don't", "x9", "ÉTÉ", "ab''cd", "中文"]
    return {"c.txt": "".join(" ".join(rng.choice(words, 8)) + "\n" for _ in range(25)
                             ).encode()}


def npz_seeds(rng):
    import scipy.sparse as sp
    X = sp.random(20, 12, density=0.3, random_state=int(rng.integers(1 << 30)), format="csr")
    y = rng.standard_normal(20)
    out = {}
    for fmt in ("csr", "csc", "coo", "bsr", "dia"):
        b = io.BytesIO()
        sp.save_npz(b, X.asformat(fmt), compressed=bool(rng.integers(2)))
        out[f"{fmt}.npz"] = b.getvalue()
    b = io.BytesIO()
    np.savez(b, X=X.toarray(), y=y)
    out["dense.npz"] = b.getvalue()
    return out, y


# -- mutations --------------------------------------------------------------------------
def mutate_bytes(data, rng):
    """1 to 3 byte-level mutations of ``data`` (mostly 1)."""
    for _ in range(rng.choice([1, 1, 1, 2, 3])):
        n = len(data)
        op = rng.randrange(10)
        p = rng.randint(0, n)
        if op == 0:
            data = data[:p]
        elif op == 1 and n:
            k = min(p, n - 1)
            data = data[:k] + bytes([data[k] ^ rng.randint(1, 255)]) + data[k + 1:]
        elif op == 2:
            data = data[:p] + rng.choice(HOSTILE) + data[p:]
        elif op == 3:
            data = data[:p] + data[p + rng.randint(1, 20):]
        elif op == 4:  # a number replaced by a hostile one
            toks = data.split(b" ")
            k = rng.randrange(len(toks))
            toks[k] = rng.choice(HOSTILE)
            data = b" ".join(toks)
        elif op == 5:
            lines = data.split(b"\n")
            a, b = rng.randrange(len(lines)), rng.randrange(len(lines))
            lines[a], lines[b] = lines[b], lines[a]
            if rng.random() < 0.5:
                lines.insert(a, lines[b])
            data = b"\n".join(lines)
        elif op == 6:
            data = data.replace(b"\n", rng.choice([b"\r\n", b"\r", b"\n\r", b"\x85"]))
        elif op == 7:
            data = rng.choice([b"\xef\xbb\xbf", b"\xff\xfe", b"\x00", b"%%MatrixMarket\n"]) + data
        elif op == 8:
            data = data * rng.randint(2, 4)
        else:
            data = data[:p] + bytes(rng.randrange(256) for _ in range(rng.randint(1, 8))) \
                + data[p:]
    if rng.random() < 0.1:
        data = gzip.compress(data, mtime=0)
        if rng.random() < 0.3:  # cut or twice
            data = data[:rng.randint(0, len(data))] if rng.random() < 0.5 else \
                gzip.compress(data, mtime=0)
    return data


def mutate_arrays(arrays, rng, values=None):
    """1 to 3 edits of a dict of arrays: dtype, shape, values, keys (``values``: True,
    values only; False, no values)."""
    arrays = dict(arrays)
    for _ in range(rng.randint(1, 3)):
        if not arrays:
            break
        k = rng.choice(sorted(arrays))
        a = np.asarray(arrays[k])
        op = 4 if values else rng.choice([0, 1, 2, 3, 5, 6, 7, 8] + [4] * (values is None))
        with contextlib.suppress(ValueError, TypeError, OverflowError):
            if op == 0:
                arrays[k] = a.astype(rng.choice([np.int8, np.uint64, np.int32, np.float16,
                                                 np.float32, np.complex128, np.bool_, "U3",
                                                 "S2", "M8[s]", np.int64, np.float64]))
            elif op == 1:
                arrays[k] = a.reshape(-1) if a.ndim != 1 else a.reshape(1, -1)
            elif op == 2:
                arrays[k] = a.reshape(-1)[:rng.randint(0, max(a.size - 1, 0))]
            elif op == 3:
                arrays[k] = np.concatenate([a.reshape(-1), a.reshape(-1)[:rng.randint(1, 5)]])
            elif op == 4 and a.size and a.dtype.kind in "iuf":
                b = a.copy().reshape(-1)
                hostile = [-1, 0, 2**31, 2**31 - 1, 10**9, np.iinfo(np.int64).max,
                           np.iinfo(np.int64).min, np.nan, np.inf, 1e300, -(10**9)]
                for _ in range(rng.randint(1, 3)):
                    v = rng.choice(hostile)
                    with contextlib.suppress(OverflowError, ValueError):
                        b[rng.randrange(b.size)] = v
                arrays[k] = b.reshape(a.shape)
            elif op == 5:
                del arrays[k]
            elif op == 6:
                j = rng.choice(sorted(arrays))
                arrays[k], arrays[j] = arrays[j], arrays[k]
            elif op == 7:
                arrays[rng.choice(["format", "shape", "y", "X", "extra", "coords"])] = \
                    rng.choice([np.array(b"csr"), np.array("lil"), np.array([5, 5]),
                                np.array([-1, 3]), np.array([10**12, 12]), np.zeros((2, 2)),
                                np.array([[0, 1], [1, 0]]), np.array(3.5)])
            else:
                arrays[k] = np.array([object()], dtype=object)
    return arrays


def save_npz(arrays, rng):
    b = io.BytesIO()
    (np.savez_compressed if rng.random() < 0.3 else np.savez)(b, **arrays)
    return b.getvalue()


def load_npz(data):
    with np.load(io.BytesIO(data), allow_pickle=False) as z:
        return {k: z[k] for k in z.files}


# -- readers (in the child) ----------------------------------------------------------------
def canon(X):
    """A matrix as comparable bytes."""
    import scipy.sparse as sp
    X = sp.csc_matrix(X, dtype=np.float64)
    X.sum_duplicates()
    X.eliminate_zeros()
    return (X.shape, X.indptr.tobytes(), X.indices.astype(np.int64).tobytes(),
            X.data.tobytes())


def read_lasso(path, target):
    """Lasso: the whole file, a short fit on it, and the W = 2 parts put together."""
    import scipy.sparse as sp
    from strads.apps import lasso
    from strads.apps.lasso import data as D
    X, y = D.load(path, target)
    if X.shape[1] <= 10**6:
        lasso.fit(X, y, lambda_ratio=0.1, max_rounds=2, quiet=True)
    whole = (canon(X), y.tobytes())
    if D.needs_rank0(path) or X.shape[0] < 2:
        return whole, whole
    ps = on_threads(2, lambda peers: D.read_part(peers, D.shard(path, target)), 120)
    f = ps[0]["facts"]
    P = sp.vstack([sp.csc_matrix((p["csc"][2], p["csc"][1], p["csc"][0]),
                                 shape=(p["n_rows"], p["csc"][0].shape[0] - 1)) for p in ps],
                  format="csc")
    kept = np.arange(f["n_features"]) if f["kept"] is None else np.asarray(f["kept"])
    per = np.zeros(f["n_features"], np.int64)
    per[kept] = np.diff(P.indptr)
    P = sp.csc_matrix((P.data, P.indices, np.concatenate([[0], np.cumsum(per)])),
                      shape=(P.shape[0], f["n_features"]))
    return whole, (canon(P), np.concatenate([p["y"] for p in ps]).tobytes())


def read_ratings(path):
    from strads.apps.mf import data as D
    from strads.io import ratings as R
    t = D.read_ratings(path)
    lay = R.Layout(path)
    ps = on_threads(2, lambda peers: R.gather(peers, lay), 120)
    order = np.argsort(np.concatenate([p.positions() for p in ps]), kind="stable")
    par = [np.concatenate([getattr(p, k) for p in ps])[order].tobytes() for k in "uir"]
    whole = R.read(lay)
    return [getattr(whole, k).tobytes() for k in "uir"] + [t.ratings.tobytes()], \
        par + [t.ratings.tobytes()]


def read_lda(path):
    import scipy.sparse as sp
    from strads.apps.lda import data as D
    X, vocab = D.load(path, min_count=1)
    ps = on_threads(2, lambda peers: D.read_part(path, min_count=1, peers=peers),
                    120)
    P = sp.vstack([sp.csr_matrix((p.counts, p.indices, p.indptr),
                                 shape=(p.indptr.shape[0] - 1, ps[0].n_words)) for p in ps])
    return (canon(X), vocab), (canon(P), ps[0].vocab)


def child(fmt):
    """Read cases (a JSON line each: path, target) from stdin, answer with outcomes."""
    out = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)  # what strads prints goes to stderr, not into the answers
    import strads
    for line in sys.stdin:
        case = json.loads(line)
        err = io.StringIO()
        try:
            with contextlib.redirect_stderr(err):
                got = resume(case) if fmt == "checkpoint" else read_case(fmt, case)
        except strads.DataError as e:
            msg = str(e)
            got = ("refused" if "\n" not in msg.strip() else "multiline", msg[:300])
        except BaseException as e:  # noqa: BLE001 (a defect: reported, not raised)
            got = ("error", f"{type(e).__name__}: {e} | "
                   + " < ".join(f"{f.name}:{f.lineno}" for f in
                                traceback.extract_tb(e.__traceback__)[-3:]))
        out.write(json.dumps({"i": case["i"], "outcome": got[0], "detail": got[1][:300]})
                  + "\n")
        out.flush()


def read_case(fmt, case):
    path, target = case["path"], case.get("target")
    if fmt in ("svm", "mtx", "npz", "target"):
        got = read_lasso(path, target)
    elif fmt.startswith("ratings"):
        got = read_ratings(path)
    else:
        got = read_lda(path)
    if got[0] != got[1]:
        return "differs", "the workers' parts differ from the whole file's"
    return "ok", ""


# -- checkpoints ------------------------------------------------------------------------------
APPS = {  # (module, flags): small runs that checkpoint every round or so
    "lasso": ("strads.apps.lasso", ["--schedule", "priority", "--n-samples", "200",
                                    "--n-features", "300", "--tol", "0", "--max-rounds",
                                    "60"]),
    "lasso-ws": ("strads.apps.lasso", ["--n-samples", "200", "--n-features", "300", "--tol",
                                       "0", "--max-rounds", "60"]),  # (working sets)
    "logreg": ("strads.apps.logreg", ["--n-samples", "200", "--n-features", "300", "--tol",
                                      "0", "--max-rounds", "60"]),
    "mf": ("strads.apps.mf", ["--n-users", "120", "--n-items", "60", "--n-ratings", "1500",
                              "--early-stop", "0", "--iters", "40", "--tol", "0"]),
    "lda": ("strads.apps.lda", ["--n-docs", "60", "--n-words", "80", "--doc-length", "20",
                                "--sweeps", "40", "--tol", "0", "--top-words", "0"]),
}
RUN = ["--quiet", "--log-interval", "0"]
WORKERS = (2, 3)  # checkpoints of 2 workers, resumed on 2 or (resharded) on 3


def resume(case):
    """A case's checkpoint resumed by the app's command line, in this process."""
    import importlib
    module, flags = APPS[case["app"]]
    main = importlib.import_module(module + ".__main__").main
    err, code = io.StringIO(), 0
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        try:
            main(flags + RUN + ["--workers", str(case["workers"]), "--out", case["out"],
                                "--resume", "--max-rounds", str(case["rounds"])])
        except SystemExit as e:
            code = e.code if isinstance(e.code, int) else 1
    err = err.getvalue().strip()
    if code == 2:
        lines = [x for x in err.splitlines() if not x.startswith("[")]
        return ("refused" if len(lines) == 1 else "multiline", err)
    if code == 3 and case["kind"] == "forged-value":  # a value made the run diverge
        return "diverged", err
    if code:
        return "error", f"exit {code}: {err[-300:]}"
    with np.load(os.path.join(case["out"], "model.npz")) as a, np.load(case["reference"]) as b:
        if set(a.files) == set(b.files) and all(np.array_equal(a[k], b[k], equal_nan=True)
                                                for k in b.files):
            return "ok", ""
    return ("changed" if case["kind"] == "forged-value" else "differs",
            "resumed to another model")


def reseal(folder):
    """Make the manifest fit its parts again (sizes, seals, its checksum): a forgery."""
    from strads import checkpoint as C
    path = os.path.join(folder, C.MANIFEST)
    try:
        with open(path) as f:
            m = json.load(f)
    except (ValueError, RecursionError):
        return
    if not isinstance(m, dict):
        return
    for p in m.get("parts", []) if isinstance(m.get("parts"), list) else []:
        q = os.path.join(folder, str(p.get("file"))) if isinstance(p, dict) else None
        if q and os.path.isfile(q):
            p["bytes"] = os.path.getsize(q)
            with contextlib.suppress(zipfile.BadZipFile, OSError):
                p["seal"] = C._seal(q)
    m.pop("crc", None)
    m["crc"] = C._crc(m)
    with open(path, "w") as f:
        json.dump(m, f)


def mutate_json(obj, rng, value_only):
    """One edit somewhere in a JSON structure: a value (``value_only``) or its shape."""
    nodes = []

    def walk(o, parent, key):
        nodes.append((parent, key, o))
        if isinstance(o, dict):
            for k, v in o.items():
                walk(v, o, k)
        elif isinstance(o, list):
            for i, v in enumerate(o):
                walk(v, o, i)
    walk(obj, None, None)
    parent, key, o = rng.choice(nodes[1:] or nodes)
    if value_only:
        cands = [(p, k, v) for p, k, v in nodes if type(v) in (int, float) and p is not None]
        if not cands:
            return obj, False
        parent, key, o = rng.choice(cands)
        parent[key] = (rng.choice([0, -1, 1, 2**31, 2**63, -(2**63), o + 1, o * 3])
                       if type(o) is int else rng.choice([0.0, -1.0, o * 2, 1e308, o + 1]))
        return obj, True
    if parent is None:
        return rng.choice([[], None, 3, "x", {}]), True
    op = rng.randrange(6)
    if op == 0 and isinstance(parent, dict):
        del parent[key]
    elif op == 1:
        parent[key] = rng.choice([None, "x", 1.5, [], {}, [1, 2], {"a": 1}, True, 10**30,
                                  {"v": None}, {"a": "nope", "scalar": False},
                                  {"rng": {"bit_generator": "RandomState"}}])
    elif op == 2 and isinstance(parent, dict):
        parent[str(key) + "x"] = parent.pop(key)
    elif op == 3 and isinstance(o, dict) and "bit_generator" in o:
        o["bit_generator"] = rng.choice(["MT19937", "SFC64", "Philox", "default_rng",
                                         "seed", "get_state", "PCG64DXSM"])
    elif op == 4 and isinstance(parent, list) and len(parent) > 1:
        parent.reverse()
    else:
        parent[key] = DEEP  # (nested lists, too deep for json.dumps: see dumps)
    return obj, True


DEEP = "@@deep@@"


def dumps(obj):
    return json.dumps(obj).replace(json.dumps(DEEP), "[" * 5000 + "]" * 5000)


def mutate_checkpoint(folder, rng, kinds):
    """Mutate one file of a checkpoint folder; -> (what, kind), ``kind`` one of
    ``kinds``: corrupt (bytes damaged, files swapped), edit (a part's arrays or
    structure, or the manifest's JSON, edited and the file saved again), forged and
    forged-value (the same edits, values only for the latter, with every seal made to
    fit again: what only a deliberate forgery does)."""
    names = sorted(os.listdir(folder))
    name = rng.choice(names)
    path = os.path.join(folder, name)
    with open(path, "rb") as f:
        data = f.read()
    kind = rng.choice([k for k in ["corrupt"] * 3 + ["edit"] * 3 + ["forged"] * 3 +
                       ["forged-value"] if k in kinds])
    if kind == "corrupt":  # a file damaged: it stays as it is
        op = rng.randrange(3)
        if op == 0:
            data = data[:rng.randint(0, len(data) - 1)]
        elif op == 1:
            k = rng.randrange(len(data))
            data = data[:k] + bytes([data[k] ^ rng.randint(1, 255)]) + data[k + 1:]
        else:
            other = rng.choice(names)
            if other != name:
                os.rename(os.path.join(folder, other), path + ".x")
                os.rename(path, os.path.join(folder, other))
                os.rename(path + ".x", path)
                return f"{name} and {other} swapped", kind
            data = b""
        with open(path, "wb") as f:
            f.write(data)
        return f"{name} corrupted ({op})", kind
    value = kind == "forged-value" or (kind == "edit" and rng.random() < 0.2)
    if name == "manifest.json":
        m, _ = mutate_json(json.loads(data), rng, value)
        with open(path, "w") as f:
            f.write(dumps(m))
        what = "JSON"
    else:
        arrays = load_npz(data)
        meta = json.loads(str(arrays["__meta__"]))
        if rng.random() < 0.5:  # the arrays
            rest = mutate_arrays({k: v for k, v in arrays.items() if k != "__meta__"},
                                 random.Random(rng.random()), value)
            arrays = dict(rest, __meta__=arrays["__meta__"])
            what = "arrays"
        else:
            meta, _ = mutate_json(meta, rng, value)
            arrays["__meta__"] = np.array(dumps(meta))
            what = "structure"
        with open(path, "wb") as f:
            f.write(save_npz(arrays, random.Random(0)))
    if kind.startswith("forged"):
        reseal(folder)
    return f"{name}: {what} edited{' (values)' if value else ''}", kind


def checkpoint_cases(tmp, count, rng, python, kinds):
    """The reference runs, then a case per mutated checkpoint."""
    refs = {}
    for app, (module, flags) in APPS.items():
        d = os.path.join(tmp, f"ref-{app}")

        def run(*more):
            subprocess.run([python, "-m", module, *flags, *RUN, *more], check=True,
                           capture_output=True)
        run("--workers", "2", "--out", d + "-full")
        run("--workers", "2", "--out", d, "--max-rounds", "12", "--checkpoint-every", "1e-6")
        with open(os.path.join(d + "-full", "summary.json")) as f:
            rounds = json.load(f)["rounds"]
        refs[app, 2] = (d, os.path.join(d + "-full", "model.npz"), rounds)
        # on 3 workers: the untouched checkpoint resumed is the reference
        shutil.copytree(os.path.join(d, "checkpoint"), os.path.join(d + "-3", "checkpoint"))
        run("--workers", "3", "--out", d + "-3", "--resume", "--max-rounds", str(rounds))
        refs[app, 3] = (d, os.path.join(d + "-3", "model.npz"), rounds)
    for i in range(count):
        app, workers = rng.choice(sorted(APPS)), rng.choice(WORKERS)
        d, ref, rounds = refs[app, workers]
        out = os.path.join(tmp, f"case{i}")
        shutil.copytree(os.path.join(d, "checkpoint"), os.path.join(out, "checkpoint"))
        what, kind = mutate_checkpoint(os.path.join(out, "checkpoint"), rng, kinds)
        shutil.copytree(os.path.join(out, "checkpoint"), os.path.join(out, "mutated"))
        yield {"i": i, "app": app, "out": out, "reference": ref, "rounds": rounds,
               "workers": workers, "what": f"{app} on {workers} workers: {what}",
               "kind": kind}


def file_cases(fmt, tmp, count, rng):
    from pathlib import Path
    nrng = np.random.default_rng(rng.randrange(1 << 30))
    folder = Path(tmp)
    target = None
    if fmt == "npz":
        files, y = npz_seeds(nrng)
        np.save(folder / "y.npy", y)
    else:
        files = seeds(fmt, folder, nrng)
    if fmt == "mtx":
        (folder / "t.txt").write_text("".join(f"{v!r}\n" for v in
                                              nrng.standard_normal(20).tolist()))
        target = str(folder / "t.txt")
    if fmt == "target":
        svm = seeds("svm", folder, np.random.default_rng(0))["d.svm"]
        (folder / "d.svm").write_bytes(svm)
    for i in range(count):
        name = rng.choice(sorted(files))
        data = files[name]
        if fmt == "npz" and rng.random() < 0.7:
            arrays = mutate_arrays(load_npz(data), rng)
            with contextlib.suppress(ValueError):
                data = save_npz(arrays, rng)
        else:
            data = mutate_bytes(data, rng)
        sub = folder / f"c{i}"
        sub.mkdir()
        for extra in ("vocab.c.txt", "c.vocab"):
            if (folder / extra).exists():
                shutil.copy(folder / extra, sub / extra)
        path = sub / name
        path.write_bytes(data)
        case = {"i": i, "path": str(path), "target": target, "what": name}
        if fmt == "npz":
            case["target"] = str(folder / "y.npy") if name != "dense.npz" else None
        if fmt == "target":
            case["path"], case["target"] = str(folder / "d.svm"), str(path)
        yield case


# -- the parent -------------------------------------------------------------------------------
class Child:
    def __init__(self, fmt, python, log):
        self.p = subprocess.Popen([python, os.path.abspath(__file__), "--child", fmt],
                                  stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=log,
                                  text=True, start_new_session=True)
        self.done = 0

    def ask(self, case, timeout):
        self.p.stdin.write(json.dumps(case) + "\n")
        self.p.stdin.flush()
        ready, _, _ = select.select([self.p.stdout], [], [], timeout)
        line = self.p.stdout.readline() if ready else ""
        self.done += 1
        if line:
            return json.loads(line)
        if ready:  # the child died
            rc = self.p.wait()
            return {"outcome": "crash", "detail": f"exit status {rc}" + (
                f" (signal {-rc})" if rc < 0 else "")}
        return {"outcome": "hang", "detail": f"no answer in {timeout} s"}

    def close(self):
        with contextlib.suppress(OSError):
            os.killpg(self.p.pid, 9)
        self.p.wait()


KINDS = ("corrupt", "edit", "forged", "forged-value")


def fuzz(fmt, count, seed, timeout, python, verbose, kinds=KINDS):
    rng = random.Random(f"{fmt}:{seed}")
    tmp = tempfile.mkdtemp(prefix=f"strads-fuzz-{fmt}-")
    log = open(os.path.join(tmp, "child.log"), "w")
    counts, defects = {}, []
    try:
        cases = (checkpoint_cases(tmp, count, rng, python, kinds) if fmt == "checkpoint"
                 else file_cases(fmt, tmp, count, rng))
        child = None
        for case in cases:
            if child is None or child.done >= 200:  # (a fresh one now and then)
                if child is not None:
                    child.close()
                child = Child(fmt, python, log)
            got = child.ask(case, timeout)
            if got["outcome"] in ("crash", "hang"):
                child.close()
                child = None
            key = f"{case['kind']} {got['outcome']}" if "kind" in case else got["outcome"]
            counts[key] = counts.get(key, 0) + 1
            if got["outcome"] in DEFECTS:
                defects.append((case, got))
                print(f"  {got['outcome']}: case {case['i']} {case.get('kind', '')} "
                      f"{case['what']} "
                      f"({case.get('path') or case.get('out')}): {got['detail']}", flush=True)
            elif verbose:
                print(f"  {got['outcome']}: {case['what']}: {got['detail'][:150]}")
            if fmt == "checkpoint" and got["outcome"] not in DEFECTS:
                shutil.rmtree(case["out"], ignore_errors=True)
        if child is not None:
            child.close()
    finally:
        log.close()
        if not defects:
            shutil.rmtree(tmp, ignore_errors=True)
    print(f"{fmt}: {count} cases: " + ", ".join(f"{k} {v}" for k, v in sorted(counts.items()))
          + (f"; defects kept in {tmp}" if defects else ""), flush=True)
    return counts, defects


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--format", default="all", choices=FORMATS + ("all",))
    ap.add_argument("--count", type=int, default=200, help="mutated cases per format")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--timeout", type=float, default=60.0, help="seconds a case may take")
    ap.add_argument("--verbose", action="store_true", help="every outcome, not only defects")
    ap.add_argument("--kinds", default=",".join(KINDS),
                    help="checkpoint: the mutations, of " + ",".join(KINDS))
    ap.add_argument("--child", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        return child(args.child)
    bad = 0
    for fmt in FORMATS if args.format == "all" else (args.format,):
        bad += len(fuzz(fmt, args.count, args.seed, args.timeout, sys.executable,
                        args.verbose, tuple(args.kinds.split(",")))[1])
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
