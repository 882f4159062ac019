"""Hostile files and faults (issue 28): every input and every checkpoint is untrusted.
A bad one gets one line naming the file and the problem (exit 2), before any work: never
a signal, a traceback or a silently different model; no fault loses results. Per format
and per checkpoint field, in one process and, where the path differs, under mpiexec;
and the fuzz harness (benchmarks/fuzz.py) on a few mutations of each format."""
import errno
import gzip
import io
import json
import os
import resource
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.datasets import dump_svmlight_file

import strads
from strads import checkpoint as ckpt
from strads import outputs
from strads.apps import lasso
from strads.apps.lasso import data as lasso_data
from strads.apps.lda import data as lda_data
from strads.apps.mf import data as mf_data
from strads.io import docs, source

from conftest import ROOT, child_env, run_cli

sys.path.insert(0, str(ROOT / "examples"))  # (benchmarks/: conftest)
import ridge  # noqa: E402

RNG = np.random.default_rng(0)
X0 = sp.random(40, 15, density=0.3, random_state=1, format="csr")
Y0 = RNG.standard_normal(40)


def one_line(text):
    """The message of a refusal: one line, no traceback."""
    lines = [x for x in text.strip().splitlines() if not x.startswith("Abort(")]
    assert len(lines) == 1 and "Traceback" not in text, text
    return lines[0]


def refused(fn, *args, match=None):
    with pytest.raises(strads.DataError) as e:
        fn(*args)
    msg = one_line(str(e.value))
    if match:
        assert match in msg, msg
    return msg


# -- 1, 12: .npz, validated before SciPy sees it ----------------------------------------------
def save_npz(path, **arrays):
    np.savez(path, **arrays)
    return str(path)


def csc_arrays(**change):
    C = X0.tocsc()
    a = dict(format=b"csc", shape=np.array(C.shape), data=C.data, indices=C.indices,
             indptr=C.indptr)
    a.update(change)
    return a


def _with(a, k, v):
    """``a`` with ``a[k] = v``, in a wider dtype if ``v`` does not fit (a forged file
    may hold any)."""
    a = a.astype(np.result_type(a, np.min_scalar_type(v)))
    a[k] = v
    return a


@pytest.mark.parametrize("change, match", [
    (dict(indices=_with(X0.tocsc().indices, 3, 40)), "indices[3] = 40 is outside 0..39"),
    (dict(shape=np.array([10, 15])), "is outside 0..9 (the matrix is 10 x 15)"),
    (dict(indices=_with(X0.tocsc().indices, 0, 10**9)), "indices[0] = 1000000000"),
    (dict(indices=_with(X0.tocsc().indices, 5, -1)), "indices[5] = -1"),
    (dict(indptr=_with(X0.tocsc().indptr, 4, 0)), "indptr must rise from 0"),
    (dict(indptr=X0.tocsc().indptr[:-1]), "indptr of a 40 x 15 csc matrix must have 16 "
                                          "entries, got indptr of shape (15,)"),
    (dict(indices=X0.tocsc().indices[:-1]), "one index for each of its 180 values"),
    (dict(indices=X0.tocsc().indices.astype(float)), "must be a 1-D integer array"),
    (dict(shape=np.array([40, 15, 1])), "a sparse matrix must be 2-D"),
    (dict(shape=np.array([-40, 15])), "two non-negative 64-bit integers"),
    (dict(shape=np.array([10**15, 15])), "more than this machine's physical memory"),
    (dict(format=b"lil"), "sparse format 'lil' is not one of"),
    (dict(format=np.array([1, 2])), "'format' of a save_npz matrix must be a 0-D string"),
    (dict(data=X0.tocsc().data.astype(complex)), "not real numbers"),
])
def test_npz_sparse_arrays_are_checked_before_scipy(tmp_path, change, match):
    path = save_npz(tmp_path / "h.npz", **csc_arrays(**change))
    np.save(tmp_path / "y.npy", Y0)
    msg = refused(lasso_data.load, path, str(tmp_path / "y.npy"), match=match)
    assert msg.startswith(path)


def test_npz_every_save_npz_format_reads_the_same(tmp_path):
    """CSR, CSC, COO (item 12: refused before), BSR, DIA, as matrices and arrays."""
    np.save(tmp_path / "y.npy", Y0)
    ref = X0.toarray()
    for fmt in ("csr", "csc", "coo", "bsr", "dia"):
        for M in (X0.asformat(fmt), sp.csr_array(X0).asformat(fmt)):
            sp.save_npz(tmp_path / "m.npz", M)
            X, y = lasso_data.load(str(tmp_path / "m.npz"), str(tmp_path / "y.npy"))
            np.testing.assert_array_equal(X.toarray(), ref)
    coo = X0.tocoo()
    for bad, match in ((dict(row=np.full(coo.nnz, 40), col=coo.col), "row[0] = 40"),
                       (dict(row=coo.row[:3], col=coo.col), "as many rows and columns"),
                       (dict(row=coo.row, col=coo.col - 1), "col[")):
        path = save_npz(tmp_path / "c.npz", format=b"coo", shape=np.array([40, 15]),
                        data=coo.data, **bad)
        refused(lasso_data.load, path, str(tmp_path / "y.npy"), match=match)
    path = save_npz(tmp_path / "d.npz", format=b"dia", shape=np.array([40, 15]),
                    data=np.ones((2, 5)), offsets=np.array([1, 1]))
    refused(lasso_data.load, path, str(tmp_path / "y.npy"), match="offsets repeat")


def test_npz_member_shorter_than_its_header_is_refused_unread(tmp_path):
    raw = io.BytesIO()
    np.savez(raw, X=np.ones((4, 3)), y=np.ones(4))
    with zipfile.ZipFile(io.BytesIO(raw.getvalue())) as z, \
            zipfile.ZipFile(tmp_path / "s.npz", "w") as out:
        out.writestr("X.npy", z.read("X.npy")[:-8])
        out.writestr("y.npy", z.read("y.npy"))
    refused(lasso_data.load, str(tmp_path / "s.npz"), match="declares shape (4, 3)")


def test_npz_member_of_npy_format_3_is_refused_by_its_version(tmp_path):
    from numpy.lib import format as npf
    with zipfile.ZipFile(tmp_path / "v3.npz", "w") as z, z.open("X.npy", "w") as f:
        npf.write_array(f, np.zeros(3, dtype=[("\u00e9", "f8")]), version=(3, 0))
    refused(lasso_data.load, str(tmp_path / "v3.npz"), match="format version")


@pytest.mark.parametrize("app, np_", [("lasso", None), ("logreg", None), ("lasso", 3)])
def test_cli_bad_npz_is_one_line_in_one_process_and_under_mpiexec(tmp_path, app, np_):
    """The probe's segfaults (exit 139; under mpiexec BAD TERMINATION): one line now."""
    path = save_npz(tmp_path / "h.npz", y=np.sign(Y0) + 2,
                    **csc_arrays(indices=_with(X0.tocsc().indices, 3, 40)))
    p = run_cli([f"strads.apps.{app}", "--data", path, "--quiet"], np=np_, timeout=120)
    assert p.returncode == 2, p.stderr
    assert "indices[3] = 40 is outside" in one_line(p.stderr)
    assert "BAD TERMINATION" not in p.stdout + p.stderr


# -- 2, 3: checkpoints, each field --------------------------------------------------------
CK_X = np.asfortranarray(RNG.standard_normal((80, 30)))
CK_Y = CK_X[:, :5] @ np.arange(1.0, 6.0) + 0.1 * RNG.standard_normal(80)


def ck_fit(out, **kw):
    kw = {"workers": 2, **kw}
    return lasso.fit(CK_X, CK_Y, schedule="priority", lambda_ratio=0.05, tol=0,
                     quiet=True, out=str(out), **kw)


@pytest.fixture(scope="module")
def checkpointed(tmp_path_factory):
    """A Lasso run checkpointed at round 12 of 40, and the uninterrupted model."""
    d = tmp_path_factory.mktemp("ck")
    full = ck_fit(d / "full", max_rounds=40)
    ck_fit(d / "part", max_rounds=12, checkpoint_every=1e-6)
    return d / "part", full.model["coef"]


def copy_of(checkpointed, tmp_path):
    out = tmp_path / "o"
    shutil.copytree(checkpointed[0], out)
    return out, out / "checkpoint"


def manifest(folder):
    return json.loads((folder / "manifest.json").read_text())


def part(folder, k):
    return folder / manifest(folder)["parts"][k]["file"]


def forge(folder, k, edit):
    """Edit part k's arrays and structure (``edit(meta, arrays)``, which may return a
    new structure, or a string for __meta__) and make the seals fit again: what only a
    deliberate forgery gets past the seals with."""
    path = part(folder, k)
    with np.load(path) as z:
        arrays = {n: z[n] for n in z.files}
    meta = json.loads(str(arrays.pop("__meta__")))
    new = edit(meta, arrays)
    meta = meta if new is None else new
    text = meta if isinstance(meta, str) else json.dumps(meta)
    np.savez(path, __meta__=np.array(text.replace('"@deep@"', "[" * 5000 + "]" * 5000)),
             **arrays)
    reseal(folder)


def reseal(folder, m=None):
    m = manifest(folder) if m is None else m
    if isinstance(m, dict):
        for p in m.get("parts", []):
            if isinstance(p, dict) and (folder / str(p.get("file"))).is_file():
                p["bytes"] = (folder / p["file"]).stat().st_size
                p["seal"] = ckpt._seal(folder / p["file"])
        m.pop("crc", None)
        m["crc"] = ckpt._crc(m)
    (folder / "manifest.json").write_text(json.dumps(m))


def resume_refused(out, match, **kw):
    with pytest.raises(strads.DataError) as e:
        ck_fit(out, max_rounds=40, resume=True, **kw)
    msg = one_line(str(e.value))
    R = manifest(out / "checkpoint")["round"] if isinstance(
        manifest(out / "checkpoint"), dict) else 0
    assert match.format(R=R, T=f"r{R:012d}") in msg, msg
    return msg


def test_checkpoint_resumes_bit_for_bit_and_seals_every_file(checkpointed, tmp_path):
    out, folder = copy_of(checkpointed, tmp_path)
    res = ck_fit(out, max_rounds=40, resume=True)
    np.testing.assert_array_equal(res.model["coef"], checkpointed[1])
    m = manifest(folder)
    assert m["format"] == ckpt.FORMAT and all("seal" in p for p in m["parts"])
    early = tmp_path / "early"  # the priorities' sum tree as it was, not made again
    ck_fit(early, max_rounds=3, checkpoint_every=1e-6)
    res = ck_fit(early, max_rounds=40, resume=True)
    np.testing.assert_array_equal(res.model["coef"], checkpointed[1])


def _set(path_, value):
    def edit(meta, arrays):
        node = meta
        for k in path_[:-1]:
            node = node[k]
        node[path_[-1]] = value
    return edit


MANIFEST_CASES = [  # (edit of the manifest dict, words of the refusal)
    (lambda m: [], "damaged checkpoint manifest"),
    (lambda m: {k: v for k, v in m.items() if k != "flags"}, "'flags' is missing, not dict"),
    (lambda m: dict(m, parts=m["parts"][:-1]), "2 parts for 2 workers"),  # one short
    (lambda m: dict(m, parts=[m["parts"][0], m["parts"][2], m["parts"][1]]),
     "where {T}-worker0.npz belongs"),  # swapped
    (lambda m: dict(m, round=-3), "out of range"),
    (lambda m: dict(m, round=99), "where r000000000099-scheduler.npz belongs"),
    (lambda m: dict(m, checkpoint_every=float("nan")), "out of range"),
    (lambda m: dict(m, engine="x"), "'engine' is 'x'"),
    (lambda m: dict(m, parts=[dict(p, file="../../etc/passwd") for p in m["parts"]]),
     "where {T}-scheduler.npz belongs"),
]


@pytest.mark.parametrize("k", range(len(MANIFEST_CASES)))
def test_checkpoint_manifest_fields(checkpointed, tmp_path, k):
    edit, match = MANIFEST_CASES[k]
    out, folder = copy_of(checkpointed, tmp_path)
    m = manifest(folder)
    m.pop("crc")
    R = m["round"]
    match = match.format(T=f"r{R:012d}")
    bad = edit(json.loads(json.dumps(m)))
    (folder / "manifest.json").write_text(json.dumps(bad))  # not resealed: damaged
    resume_refused(out, "its checksum does not match" if isinstance(bad, dict) else
                   "damaged checkpoint manifest")
    reseal(folder, bad)  # resealed: the field itself is refused
    resume_refused(out, match)


PART_CASES = [  # (part, edit of (meta, arrays), words of the refusal)
    (1, lambda m, a: a.update({"update:r": a["update:r"][:-5]}),
     "update.r: shape (35,) (this run has (40,))"),  # the residual shortened
    (0, lambda m, a: a.update({"aggregate:w": a["aggregate:w"].astype(np.int8)}),
     "aggregate.w: int8 array"),  # coefficients as int8
    (0, lambda m, a: a.update({"aggregate:w": a["aggregate:w"][:, None]}),
     "aggregate.w: float64 array of shape (30, 1)"),
    (0, lambda m, a: "{not json", "damaged (Expecting property name"),  # bad __meta__
    (0, lambda m, a: [], "not a dict of pieces"),
    (0, _set(["schedule", "rng", "rng", "bit_generator"], "RandomState"),
     "random generator 'RandomState'"),
    (0, _set(["schedule", "rng", "rng", "bit_generator"], "seed"),
     "random generator 'seed'"),  # (np.random.seed is never called)
    (0, _set(["schedule", "rng", "rng", "state"], {"state": -1}), "random generator state"),
    (0, _set(["schedule", "rng", "rng", "bit_generator"], "MT19937"),
     "random generator 'MT19937'"),  # an allowed one, not this run's
    (0, _set(["engine", "done", "v"], 10**6), "the loop is at round 1000000 with"),
    (0, _set(["engine", "trace", "v"], "[1, 2]"), "the trace is not a list of rows"),
    (0, _set(["engine", "first"], {"v": "x"}), "first, best or last logged value is not"),
    (0, lambda m, a: m["aggregate"].pop("w") and None, "attributes w"),  # missing
    (0, _set(["schedule", "schedule"], {"v": 1}), "attributes schedule"),  # a method
    (0, _set(["aggregate", "w"], {"a": "aggregate:nope", "scalar": False}),
     "no array 'aggregate:nope'"),
    (0, _set(["aggregate", "w"], {"bogus": 1}), "aggregate.w: malformed"),
    (0, _set(["aggregate", "l1_at", "maxlen"], -1), "maxlen"),
    (0, lambda m, a: m.pop("engine") and None, "no 'engine' state"),
    (1, _set(["host", "version", "v"], 10**6),
     "at version 1000000, not worker 0 at round {R}"),
    (1, _set(["host", "worker", "v"], 1), "worker 1 at version {R}, not worker 0"),
    (1, _set(["host", "digest", "v"], 7), "worker 0's data differs"),
    (1, _set(["update", "r"], "@deep@"), "damaged (maximum recursion depth"),
    (1, _set(["update", "gram_cache"], {"tuple": []}), "a tuple of 0 (this run has 2)"),
    (0, _set(["engine", "done"], {"f": float.hex(12.0)}), "a float (this run has an integer)"),
    (0, _set(["engine", "elapsed"], {"v": None}), "elapsed time None"),
    (0, _set(["aggregate", "n"], {"v": 0}), "attributes n"),  # setup's: never loaded
    (0, lambda m, a: a.update({"schedule:_u": np.append(a["schedule:_u"], np.nan)}),
     "_u: not uniforms in [0, 1)"),  # (the kernels index with them)
    (0, _set(["schedule", "_u_pos", "v"], -1), "_u: not uniforms in [0, 1) from _u_pos"),
    (0, lambda m, a: a.update({"aggregate:_tree": np.ones(64)}) or _set(
        ["aggregate", "_tree"], {"a": "aggregate:_tree", "scalar": False})(m, a),
     "_tree: not a sum tree"),  # (None in a fresh state)
    (0, lambda m, a: _flight(m, a, [10**6]), "_flight: not rounds of this run's"),
    (0, lambda m, a: _flight(m, a, np.arange(30) % 2), "_flight: not the coordinates in"),
]


def _flight(m, a, cols):
    """The Lasso schedule's rounds in flight: one, holding ``cols``."""
    a["schedule:fl"] = np.asarray(cols, np.int64)
    m["schedule"]["_flight"] = {"deque": [{"tuple": [{"v": 0}, {"a": "schedule:fl",
                                                               "scalar": False}]}],
                                "maxlen": None}


@pytest.mark.parametrize("k", range(len(PART_CASES)))
def test_checkpoint_part_fields(checkpointed, tmp_path, k):
    """Each field of a part: an edit is damage (the seal); forged, it is refused by
    the comparison with the fresh setup's state, before anything is loaded."""
    which, edit, match = PART_CASES[k]
    out, folder = copy_of(checkpointed, tmp_path)
    state = np.random.get_state()[1][:4].copy()
    original = (folder / "manifest.json").read_text()
    forge(folder, which, edit)
    forged = (folder / "manifest.json").read_text()
    (folder / "manifest.json").write_text(original)  # the edit without its seal: damaged
    resume_refused(out, "damaged (its")
    (folder / "manifest.json").write_text(forged)
    resume_refused(out, match)
    np.testing.assert_array_equal(np.random.get_state()[1][:4], state)


def _rows(*rows):
    return lambda m: dict(m, parts=[m["parts"][0]] + [dict(p, rows=r) for p, r in
                                                      zip(m["parts"][1:], rows)])


RESHARD_CASES = [  # (part, or None: the manifest; its edit; words of the refusal)
    (1, lambda m, a: a.update({"update:r": a["update:r"].astype(np.int8)}),
     "update.r: int8 array"),
    (1, lambda m, a: a.update({"update:r": a["update:r"][:-5]}), "r: 35 rows in a part of 40"),
    (2, lambda m, a: a.update({"update:r": a["update:r"][:, None]}),
     "update.r: float64 array of shape (40, 1)"),
    (2, _set(["host", "version", "v"], 10**6),
     "at version 1000000, not worker 1 at round {R}"),
    (2, _set(["host", "worker", "v"], 0), "worker 0 at version {R}, not worker 1"),
    (None, _rows(30, 50), "rows in a part of"),
    (None, _rows(40, -1), "has rows -1"),
    (None, _rows(40, None), "the checkpoint holds 40 rows, this run's data 80"),
]


@pytest.mark.parametrize("k", range(len(RESHARD_CASES)))
def test_checkpoint_resumed_on_other_workers_is_checked_too(checkpointed, tmp_path, k):
    """A checkpoint of 2 workers resumed on 3: each old part read as by a resume (seal,
    host, kinds and dtypes; its rows' count free), the parts' rows adding up."""
    which, edit, match = RESHARD_CASES[k]
    out, folder = copy_of(checkpointed, tmp_path)
    original = (folder / "manifest.json").read_text()
    if which is None:
        m = manifest(folder)
        m.pop("crc")
        reseal(folder, edit(m))
    else:
        forge(folder, which, edit)
        forged = (folder / "manifest.json").read_text()
        (folder / "manifest.json").write_text(original)
        resume_refused(out, "damaged (its", workers=3)
        (folder / "manifest.json").write_text(forged)
    resume_refused(out, match, workers=3)
    if k == 0:  # untouched, it resumes
        (folder / "manifest.json").write_text(original)
        shutil.copytree(checkpointed[0] / "checkpoint", folder, dirs_exist_ok=True)
        assert ck_fit(out, max_rounds=40, resume=True, workers=3).rounds == 40


@pytest.mark.parametrize("app, name, flags", [
    ("lasso", "d.svm", []), ("mf", "r.tsv", ["--rank", "2"]), ("lda", "d.txt", ["--topics", "3"])])
def test_a_changed_input_is_refused_on_resume_on_any_number_of_workers(app, name, flags,
                                                                       tmp_path):
    # (on another number of workers it was resumed from: the old state on the new data)
    rng = np.random.default_rng(0)
    f = tmp_path / name
    if app == "lasso":
        dump_svmlight_file(rng.standard_normal((40, 12)), rng.standard_normal(40), str(f))
    elif app == "mf":
        f.write_text("".join(f"{u}\t{i}\t{rng.integers(1, 6)}\n" for u in range(1, 41)
                             for i in rng.choice(30, 6, replace=False) + 1))
    else:
        words = ["apple", "fig", "kiwi", "lime", "pear", "plum"]
        f.write_text("".join(" ".join(rng.choice(words, 9)) + "\n" for _ in range(30)))
    base = [f"strads.apps.{app}", "--data", str(f), *flags, "--tol", "0", "--quiet", "--out",
            str(tmp_path / "o")]
    p = run_cli([*base, "--workers", "2", "--max-rounds", "3", "--checkpoint-every", "1e-6"])
    assert p.returncode == 0, p.stderr
    raw = f.read_bytes()
    last = b"ab" if app == "lda" else b"54"
    f.write_bytes(raw[:-2] + last[raw[-2:-1] == last[:1]:][:1] + raw[-1:])  # one byte
    for workers, why in (("2", "/checkpoint"), ("3", "data differs from the checkpointed")):
        p = run_cli([*base, "--workers", workers, "--max-rounds", "6", "--resume"])
        assert p.returncode == 2 and why in one_line(p.stderr), p.stderr
    f.write_bytes(raw)
    assert run_cli([*base, "--workers", "3", "--max-rounds", "6", "--resume"]).returncode == 0


@pytest.fixture(scope="module")
def app_checkpoints(tmp_path_factory):
    """MF, LDA and dense Lasso runs of 2 workers checkpointed mid-run: (fit, its
    checkpoint's out)."""
    from strads.apps import lda, mf
    rng = np.random.default_rng(3)
    pairs = rng.permutation(30 * 20)[:300]
    u, i = pairs // 20, pairs % 20
    r = rng.integers(1, 6, 300).astype(float)
    X = lda_data.make_corpus(60, 80, 20, 5, seed=1)[0]
    fits = {"mf": lambda **kw: mf.fit(u, i, r, rank=3, iters=20, tol=0, early_stop=None,
                                      quiet=True, **{"workers": 2, **kw}),
            "lda": lambda **kw: lda.fit(X, n_topics=8, sweeps=10, seed=3, quiet=True,
                                        log_interval=0, **{"workers": 2, **kw})}
    XD = np.random.default_rng(5).standard_normal((40, 400))  # dense p > n: a face kept
    fits["lasso"] = lambda **kw: lasso.fit(XD, XD[:, :10].sum(axis=1), lambda_ratio=1e-3,
                                           tol=0, quiet=True, **{"workers": 2, **kw})
    from strads.apps import logreg
    XL = sp.random(200, 300, density=0.05, random_state=7, format="csc")
    fits["logreg"] = lambda **kw: logreg.fit(XL, XL[:, :10].sum(axis=1).A1 > 0, tol=0,
                                             quiet=True, **{"workers": 2, **kw})
    outs = {}
    for app, fit in fits.items():
        outs[app] = tmp_path_factory.mktemp(app)
        # (logreg's at a trial step: its pending direction d is checked against its block)
        fit(out=str(outs[app]), checkpoint_every=1e-6, max_rounds=5 if app == "logreg" else 6)
    return {app: (fits[app], outs[app]) for app in fits}


def _pending(m, a):  # MF: a pending column out of range (the kernels index with it)
    a["update:c"], a["update:d"] = np.array([99], np.int64), np.zeros((1, 20))
    m["update"]["sides"]["list"][0]["dict"]["pending"] = {"tuple": [
        {"a": "update:c", "scalar": False}, {"a": "update:d", "scalar": False}]}


def _array(name, k, value):
    def edit(m, a):
        a[name] = _with(a[name], k, value)
    return edit


def _longer(name):  # its last value again: one row, coordinate or column too many
    def edit(m, a):
        a[name] = np.append(a[name], a[name][-1:])
    return edit


VALUE_CASES = [  # (app, part, edit, words of the refusal[, workers resuming])
    ("lda", 1, _array("update:z", 0, 2**16 - 1), "z: 0 .. 65535 is outside 0 .. 7"),
    ("lda", 1, _array("update:z", 0, 10**9), "update.z: uint32 array of shape"),  # (uint16)
    ("lda", 2, _array("update:docs", -1, -1), "docs: -1 .."),
    ("lda", 1, _array("update:held/0/1/1", 0, 8), "held/0's topics: 0 .. 8 is outside"),
    ("lda", 1, _set(["update", "held", "list", 0, "list", 0, "v"], 99),
     "held/0 is not a slice of this run's"),
    ("lda", 1, _set(["update", "seed"], {"f": float.hex(1.5)}), "attributes seed"),
    ("lda", 0, _set(["aggregate", "K"], {"v": -1}), "attributes K"),
    ("lda", 0, _set(["schedule", "per_sweep"], {"v": 0}), "the layout (workers, staleness"),
    ("lda", 0, _set(["schedule", "s1"], {"v": 3}), "is not one this run makes"),
    ("mf", 0, _set(["aggregate", "shape"], {"tuple": [{"v": 20}, {"v": 30}]}),
     "attributes shape"),
    ("mf", 1, _pending, "sides/0/pending: not columns of this run's"),
    ("mf", 1, _set(["update", "scores"], {"list": [{"v": 5}]}), "scores: not (iteration"),
    # what a fresh MF aggregate may hold None or [] of (parallel loading: fuzz seed 1405)
    ("mf", 0, _set(["aggregate", "sq", "dict", "H"], {"v": None}), "sq: not each side's"),
    # the loader: None only where the fresh piece (or its class's default) has None
    ("mf", 0, _set(["aggregate", "rss"], {"v": None}), "rss: None (this run has number)"),
    ("lasso", 0, _set(["aggregate", "grouped"], {"v": None}), "grouped: None (this run"),
    ("mf", 0, _set(["aggregate", "iter_objective"], {"list": [{"v": "x"}]}),
     "iter_objective, iter_test_rmse: not"),
    ("mf", 0, _set(["aggregate", "_last_end"], {"v": 5}), "_final, best_iteration, _last"),
    ("lda", 0, _set(["aggregate", "_prev_ll"], {"v": "x"}), "_prev_ll: not a log-lik"),
    ("lasso", 0, _array("aggregate:face/1", 0, 400), "face: not a factor of this run's"),
    ("lasso", 1, _array("update:r", 0, np.nan), "LassoUpdate: r: not finite"),
    ("lasso", 0, _set(["schedule", "block"], {"v": 10**12}), "block: 1000000000000 is not"),
    ("logreg", 1, _array("update:wts", 0, 7.0), "not the logistic loss's at the margins m"),
    ("logreg", 0, _array("aggregate:G_cols", 0, -5), "not a working set and kept Gram"),
    ("logreg", 0, _set(["aggregate", "plans"], {"v": 2**63}), "plans: not a count"),
    ("logreg", 0, _set(["aggregate", "p"], {"v": 301}), "attributes p"),
    ("logreg", 1, _array("update:m", 0, np.inf), "LogRegUpdate: m: not finite"),
    ("logreg", 1, _array("update:m", 0, np.nan), "LogRegUpdate: m: not finite", 3),
    ("logreg", 1, _longer("update:hist/0"), "a per-row array is not 100 floats"),
    ("logreg", 1, _longer("update:zc"), "a per-row array is not 100 floats"),
    ("logreg", 0, _longer("aggregate:q_hist/0"), "q_hist: not full rounds' gradients"),
    ("logreg", 0, _longer("aggregate:d"), "d: not the direction of this run's working"),
    ("logreg", 1, _longer("update:dm"), "a per-row array is not 100 floats"),
    ("logreg", 0, _longer("aggregate:ws"), "not a working set and kept Gram"),
    ("logreg", 1, _set(["update", "hist"], {"v": None}), "hist: None (this run has list)"),
    ("lasso", 1, _set(["update", "n_rows"], {"v": 3}), "attributes n_rows"),  # (from data)
    ("lasso", 1, _array("update:gram_cache/0", -1, 10**6),
     "gram_cache: not a Gram of this run's columns"),
    ("lasso", 0, _set(["aggregate", "face", "list", 2, "v"], 10**6), "face: not a factor"),
    ("lasso", 0, _array("aggregate:face/0", (0, 0), np.nan), "face: not a factor"),
    ("lasso", 0, _set(["aggregate", "face", "list", 2], {"f": "0x1.8p+0"}), "face: not a"),
    # resharded: its own path
    ("lda", 1, _array("update:z", 0, 2**16 - 1), "z: 0 .. 65535", 3),
    ("lda", 1, _array("update:z", 0, -1), "update.z: int32 array of shape", 3),
    ("lda", 1, _set(["update", "d0", "v"], 2**63), "does not fit this run on 3 workers", 3),
    ("lda", 0, _set(["schedule", "per_sweep"], {"v": 0}), "is not one this run makes", 3),
]


@pytest.mark.parametrize("k", range(len(VALUE_CASES)))
def test_checkpoint_values_that_index_memory(app_checkpoints, tmp_path, k):
    """MF, LDA and the Lasso's face factor: what setup gives is never loaded, and the
    ids and positions the kernels index arrays with are in range: one line, never a
    signal."""
    app, which, edit, match, *workers = VALUE_CASES[k]
    fit, src = app_checkpoints[app]
    out = tmp_path / "o"
    shutil.copytree(src, out)
    forge(out / "checkpoint", which, edit)
    with pytest.raises(strads.DataError) as e:
        fit(out=str(out), resume=True, workers=(workers or [2])[0])
    assert match in one_line(str(e.value)), str(e.value)


def test_priority_checkpoint_of_a_file_run_checks_the_workers_held_pool(tmp_path):
    """The priority schedule of a --data run keeps which columns' Gram the workers hold
    (None in a fresh schedule, so not compared on load): one mark too many was an
    IndexError on a worker; now one line (found making every array one longer)."""
    X = sp.random(300, 500, density=0.05, random_state=1, format="csr")
    y = X @ (np.random.default_rng(0).standard_normal(500) * (np.arange(500) % 10 == 0))
    data = tmp_path / "d.svm"
    dump_svmlight_file(X, y, str(data))
    flags = ["strads.apps.lasso", "--data", str(data), "--schedule", "priority", "--workers",
             "2", "--tol", "0", "--quiet", "--out", str(tmp_path / "o")]
    r = run_cli(flags + ["--max-rounds", "12", "--checkpoint-every", "1e-6"])
    assert r.returncode == 0, r.stderr
    folder = tmp_path / "o" / "checkpoint"
    with np.load(part(folder, 0)) as z:
        assert "schedule:_wheld" in z.files  # (the pool's Gram held by the workers)
    forge(folder, 0, lambda m, a: a.__setitem__(
        "schedule:_wheld", np.append(a["schedule:_wheld"], True)))
    r = run_cli(flags + ["--max-rounds", "40", "--resume"])
    assert r.returncode == 2 and "_wheld: not a mark for each of this run's" in \
        one_line(r.stderr), r.stderr


def test_checkpoint_damage_is_refused(checkpointed, tmp_path):
    out, folder = copy_of(checkpointed, tmp_path)
    p = part(folder, 1)
    data = p.read_bytes()
    k = data.rfind(b"PK\x01\x02") + 16  # a CRC-32 in the zip's directory: the seal
    p.write_bytes(data[:k] + bytes([data[k] ^ 1]) + data[k + 1:])
    resume_refused(out, "damaged (its content differs from the manifest's)")
    k = len(data) // 2  # a byte of the data: its member's CRC-32
    p.write_bytes(data[:k] + bytes([data[k] ^ 1]) + data[k + 1:])
    resume_refused(out, "damaged")
    p.write_bytes(data)
    forge(folder, 1, lambda m, a: None)  # saved again as it was: resumes
    a, b = part(folder, 1), part(folder, 2)
    a.rename(folder / "x")
    b.rename(a)
    (folder / "x").rename(b)  # the workers' parts swapped
    resume_refused(out, "damaged (its size differs" if a.stat().st_size != b.stat().st_size
                   else "content differs")
    m = manifest(folder)
    (folder / "manifest.json").write_text(json.dumps(dict(m, time=m["time"] + 1)))
    resume_refused(out, "damaged checkpoint manifest")


def test_checkpoint_under_mpiexec_forged_worker_part_is_one_line(tmp_path):
    args = ["strads.apps.lasso", "--n-samples", "200", "--n-features", "300", "--quiet",
            "--schedule", "priority", "--out", str(tmp_path / "o")]
    p = run_cli(args + ["--max-rounds", "30", "--checkpoint-every", "1e-6"], np=3,
                timeout=120)
    assert p.returncode == 0, p.stderr
    folder = tmp_path / "o" / "checkpoint"
    forge(folder, 2, lambda m, a: a.update({"update:r": a["update:r"][:-1]}))
    p = run_cli(args + ["--resume", "--max-rounds", "40"], np=3, timeout=120)
    assert p.returncode == 2 and "update.r: shape" in one_line(p.stderr), p.stderr
    assert "worker1.npz" in p.stderr
    forge(folder, 2, lambda m, a: a.update({"update:r": a["update:r"].astype(np.float32)}))
    p = run_cli(args + ["--resume", "--max-rounds", "40"], np=4, timeout=120)  # resharded
    assert p.returncode == 2 and "update.r: float32 array" in one_line(p.stderr), p.stderr


# -- 4, 5, 6: outputs never lost -----------------------------------------------------------
def ridge_fit(out, rounds=5, **kw):
    rng = np.random.default_rng(0)
    X, y = rng.standard_normal((60, 6)), rng.standard_normal(60)
    return ridge.fit(X, y, max_rounds=rounds, quiet=True, out=str(out), **kw)


def outputs_of(out):
    return {f: (Path(out) / f).read_bytes() for f in outputs.OUTPUTS}


@pytest.fixture
def tmpfs(tmp_path):
    """A small tmpfs mounted in tmp_path (root only), unmounted afterwards."""
    mnt = tmp_path / "mnt"
    mnt.mkdir()

    def mount(size="256k"):
        p = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(mnt)],
                           capture_output=True)
        if p.returncode:
            pytest.skip("cannot mount a tmpfs here")
        return mnt
    yield mount
    subprocess.run(["umount", "-l", str(mnt)], capture_output=True)


def test_outputs_on_a_mount_point_are_written_file_by_file(tmpfs, tmp_path):
    mnt = tmpfs("4m")
    (mnt / "mine.txt").write_text("keep")
    first = ridge_fit(mnt, 5)
    res = ridge_fit(mnt, 9, checkpoint_every=1e-6)
    assert json.loads((mnt / "summary.json").read_text())["rounds"] == 9 != first.rounds
    assert sorted(os.listdir(mnt)) == ["checkpoint", "mine.txt", "model.npz",
                                       "summary.json", "trace.csv"]
    np.testing.assert_array_equal(np.load(mnt / "model.npz")["coef"], res.model["coef"])
    # a link to it, from another file system: written where it points, the link stays
    link = tmp_path / "link"
    link.symlink_to(mnt)
    ridge_fit(link, 7)
    assert link.is_symlink() and json.loads((mnt / "summary.json").read_text())["rounds"] == 7
    assert sorted(os.listdir(tmp_path)) == ["link", "mnt"]  # no hidden temporary left


def test_outputs_where_folders_cannot_be_swapped(tmp_path, monkeypatch):
    """renameat2 refused (EBUSY: a mount point), or the two renames' first: the new set
    goes in file by file; the previous set and the user's files stay until it is done."""
    out = tmp_path / "o"
    ridge_fit(out, 5)
    (out / "mine.txt").write_text("keep")

    def busy(a, b):
        raise OSError(errno.EBUSY, "Device or resource busy", b)
    monkeypatch.setattr(outputs, "_exchange", busy)
    res = ridge_fit(out, 8)
    assert json.loads((out / "summary.json").read_text())["rounds"] == 8
    np.testing.assert_array_equal(np.load(out / "model.npz")["coef"], res.model["coef"])
    assert sorted(os.listdir(out)) == ["mine.txt", "model.npz", "summary.json", "trace.csv"]
    assert sorted(os.listdir(tmp_path)) == ["o"]
    monkeypatch.setattr(outputs, "_swappable", lambda out: False)
    ridge_fit(out, 6)
    assert json.loads((out / "summary.json").read_text())["rounds"] == 6


def test_symlinked_out_writes_where_it_points(tmp_path):
    real = tmp_path / "real"
    real.mkdir()
    (real / "mine.txt").write_text("keep")
    (tmp_path / "link").symlink_to(real)
    ridge_fit(tmp_path / "link", 5, checkpoint_every=1e-6)
    ridge_fit(tmp_path / "link", 9, resume=True)
    assert (tmp_path / "link").is_symlink()
    assert sorted(os.listdir(real)) == ["checkpoint", "mine.txt", "model.npz",
                                        "summary.json", "trace.csv"]
    assert sorted(os.listdir(tmp_path)) == ["link", "real"]
    (tmp_path / "dangling").symlink_to(tmp_path / "nowhere")
    refused(outputs.check_out, str(tmp_path / "dangling"), match="not to a folder")


def test_full_disk_and_file_size_limit_end_in_one_line_and_keep_the_outputs(tmpfs):
    mnt = tmpfs("200k")
    args = ["strads.apps.lasso", "--quiet", "--max-rounds", "3", "--out", str(mnt)]
    assert run_cli(args).returncode == 0
    before = outputs_of(mnt)
    p = run_cli(args + ["--n-features", "60000", "--n-samples", "50"])  # 480 kB model
    assert p.returncode == 2
    assert one_line(p.stderr).endswith(f"{mnt}/model.npz: cannot write: No space left on "
                                       "device")
    assert outputs_of(mnt) == before and sorted(os.listdir(mnt)) == sorted(before)
    # a checkpoint part too big for the disk: one line, no .tmp left
    p = run_cli(args + ["--n-features", "60000", "--n-samples", "50", "--max-rounds", "50",
                        "--checkpoint-every", "1e-6"])
    assert p.returncode == 2 and "No space left on device" in one_line(p.stderr)
    assert not [f for f in os.listdir(mnt / "checkpoint") if f.endswith(".tmp")]
    assert outputs_of(mnt) == before


def test_ulimit_f_ends_in_one_line(tmp_path):
    """Python ignores SIGXFSZ, so past ``ulimit -f`` a write fails with EFBIG."""
    def limit():
        resource.setrlimit(resource.RLIMIT_FSIZE, (200_000, 200_000))
    code = "import signal; print(signal.getsignal(signal.SIGXFSZ) == signal.SIG_IGN)"
    assert subprocess.run([sys.executable, "-c", code], capture_output=True,
                          text=True).stdout.strip() == "True"
    for extra in ([], ["--checkpoint-every", "1e-6", "--max-rounds", "50"]):
        out = tmp_path / f"o{len(extra)}"
        p = subprocess.run([sys.executable, "-m", "strads.apps.lasso", "--quiet",
                            "--n-features", "60000", "--n-samples", "50", "--max-rounds",
                            "3", "--out", str(out), *extra], capture_output=True, text=True,
                           env=child_env(), cwd=ROOT, preexec_fn=limit, timeout=120)
        assert p.returncode == 2 and "cannot write: File too large" in one_line(p.stderr)
        left = [f for _, _, fs in os.walk(tmp_path) for f in fs if ".tmp" in f]
        assert not left and not (out / "model.npz").exists()


def test_outputs_on_a_mount_point_and_a_full_disk_under_mpiexec(tmpfs):
    mnt = tmpfs("200k")
    args = ["strads.apps.lasso", "--quiet", "--max-rounds", "3", "--out", str(mnt)]
    p = run_cli(args, np=3, timeout=120)  # the probe's EBUSY, after all the computing
    assert p.returncode == 0, p.stderr
    before = outputs_of(mnt)
    p = run_cli(args + ["--n-features", "60000", "--n-samples", "50"], np=3, timeout=120)
    assert p.returncode == 2 and "model.npz: cannot write: No space left" in \
        one_line(p.stderr)
    assert outputs_of(mnt) == before and sorted(os.listdir(mnt)) == sorted(before)


# -- 7, 8, 9, 12: flags and sizes --------------------------------------------------------------
def cli_in_process(main, argv, capsys):
    with pytest.raises(SystemExit) as e:
        main(argv)
    return e.value.code, capsys.readouterr().err


def test_lambda_far_past_lambda_max_gives_zeros_and_zero_is_refused(capsys):
    X, y = CK_X, CK_Y
    for lam in (1e200, 1.7e308):
        res = lasso.fit(X, y, lam=lam, quiet=True)
        assert res.stop_reason == "tol" and not res.model["coef"].any()
        est = strads.Lasso(alpha=lam).fit(X, y)
        assert not est.coef_.any()
    from strads.apps.glm import cli as gcli
    code, err = cli_in_process(lambda a: gcli.main(lasso.DATAFIT, a),
                               ["--lambda", "0", "--quiet"], capsys)
    assert code == 2 and "argument --lambda: a positive number must be > 0.0, got 0" in err


@pytest.mark.parametrize("app", ["lasso", "logreg"])
@pytest.mark.parametrize("flag", ["--n-samples", "--n-features"])
def test_built_in_problem_too_big_is_one_line(app, flag, capsys):
    from strads.apps import logreg
    from strads.apps.glm import cli as gcli
    datafit = {"lasso": lasso, "logreg": logreg}[app].DATAFIT
    code, err = cli_in_process(lambda a: gcli.main(datafit, a),
                               [flag, "1000000000000", "--quiet"], capsys)
    assert code == 2 and "--n-samples, --n-features, --density" in one_line(err)
    assert "more than this machine's physical memory" in err


def test_mf_more_workers_than_users_is_refused_at_once(tmp_path, capsys):
    from strads.apps.mf.__main__ import main
    code, err = cli_in_process(main, ["--workers", "1000", "--n-users", "300", "--n-items",
                                      "100", "--n-ratings", "3000", "--quiet"], capsys)
    assert code == 2 and "1000 workers for 300 users and 100 items" in one_line(err)
    f = tmp_path / "r.txt"
    f.write_text("".join(f"{u} {i} 3\n" for u in range(1, 5) for i in range(1, 5)))
    code, err = cli_in_process(main, ["--data", str(f), "--workers", "9", "--quiet"], capsys)
    assert code == 2 and "9 workers for 4 users and 4 items" in one_line(err)


def test_test_hook_garbage_is_refused():
    env = {**child_env(), "STRADS_TEST_HOOK": "garbage"}
    p = subprocess.run([sys.executable, "-m", "strads.apps.lasso", "--quiet"],
                       capture_output=True, text=True, env=env, cwd=ROOT, timeout=60)
    assert p.returncode == 2 and "STRADS_TEST_HOOK='garbage'" in one_line(p.stderr)


# -- 10, 12: text formats ------------------------------------------------------------------
def test_matrix_market_banner_below_line_1_of_a_rating_file(tmp_path):
    f = tmp_path / "r.mtx"
    f.write_bytes(b"300 200 500\n%%MatrixMarket matrix coordinate real general\n1 1 5\n")
    refused(mf_data.read_ratings, str(f),
            match="r.mtx:2: a MatrixMarket banner must start the file's first line")
    f.write_bytes(b"1 1 5\n2 2 4\n%% a comment\n" * 3 + b"  %%MatrixMarket x\n")
    refused(mf_data.read_ratings, str(f), match="r.mtx:10: a MatrixMarket banner")
    f.write_bytes(b"1 1 5\n%% only a comment\n2 2 4\n")
    assert mf_data.read_ratings(str(f)).ratings.tolist() == [5.0, 4.0]


def test_an_empty_or_bom_only_matrix_market_file_is_named(tmp_path):
    # (a crash, AttributeError on the missing banner, before the reader shared svmlight's opener)
    (tmp_path / "e.mtx.gz").write_bytes(gzip.compress(b""))
    refused(lasso_data.load, str(tmp_path / "e.mtx.gz"),
            match="e.mtx.gz: empty file (after gzip decompression)")
    (tmp_path / "b.mtx").write_bytes(b"\xef\xbb\xbf")
    refused(lasso_data.load, str(tmp_path / "b.mtx"),
            match="b.mtx:1: not a MatrixMarket file: the first line must be")


@pytest.mark.parametrize("name, body", [
    ("d.svm", b"1 1:2 3:4\r-1 2:1\r"), ("d.mtx", b"%%MatrixMarket matrix coordinate real "
                                                 b"general\r2 3 1\r1 1 1\r"),
    ("docword.c.txt", b"2\r3\r2\r1 1 1\r2 2 1\r"), ("c.ldac", b"1 0:1\r1 1:2\r")])
def test_lone_cr_line_ends_are_named(tmp_path, name, body):
    f = tmp_path / name
    f.write_bytes(body)
    read = lasso_data.load if name.startswith("d.") else lda_data.load
    (tmp_path / "vocab.c.txt").write_text("a\nb\nc\n")
    (tmp_path / "c.vocab").write_text("a\nb\n")
    refused(read, str(f), match="lines end with a lone carriage return")
    if name == "d.svm":  # a target file too; \r\n reads as \n
        (tmp_path / "t.txt").write_bytes(b"1\r2\r")
        f.write_bytes(body.replace(b"\r", b"\r\n"))
        refused(lasso_data.load, str(f), str(tmp_path / "t.txt"), match="t.txt: lines end")
        assert lasso_data.load(str(f))[0].shape == (2, 3)


W64 = 2 ** 64 + 1  # (int64 arithmetic wraps it to 1)


@pytest.mark.parametrize("name, body, match", [
    ("a.svm", f"3 {W64}:7\n4 2:1\n", f"a.svm:1: feature index {W64} is too large"),
    ("a.svm", "1 1:1e9223372036854775808 2:1\n", "a.svm:1: feature 1 has value inf, not finite"),
    ("a.svm", "1e18446744073709551617 2:1\n", "a.svm:1: label is inf, not finite"),
    ("a.mtx", f"%%MatrixMarket matrix coordinate real general\n2 2 2\n{W64} 1 7\n2 2 1\n",
     f"a.mtx:3: row index {W64} is out of range 1..2"),
    ("r.tsv", f"{2 ** 63}\t2\t5\n1\t3\t4\n", f"r.tsv:1: user id {2 ** 63} does not fit"),
    ("r.tsv", f"1\t{W64}\t5\n", f"r.tsv:1: item id {W64} does not fit"),
    ("docword.w.txt", f"1\n2\n1\n1 {W64} 1\n", f"docword.w.txt:4: wordID {W64} outside"),
])
def test_numbers_beyond_64_bits_are_refused_never_wrapped(tmp_path, name, body, match):
    # (the one scanner's int64 overflow read 2^64 + 1 as 1 in every format, and
    # 2e-<20 digits> as 0.2, 2^63 as -2^63)
    f = tmp_path / name
    f.write_text(body)
    (tmp_path / "vocab.w.txt").write_text("a\nb\n")
    read = {"svm": lasso_data.load, "mtx": lasso_data.load, "tsv": mf_data.read_ratings,
            "txt": lda_data.load}[name.rsplit(".", 1)[1]]
    args = (str(f), str(tmp_path / "y.txt")) if name.endswith(".mtx") else (str(f),)
    (tmp_path / "y.txt").write_text("1\n2\n")
    refused(read, *args, match=match)
    f = tmp_path / "e.svm"  # an exponent that wraps: 0.0, not 0.2
    f.write_text("1 1:2e-18446744073709551617 2:1\n")
    assert lasso_data.load(str(f))[0].toarray().tolist() == [[0.0, 1.0]]


def test_unicode_words_stay_whole_and_the_kernel_is_the_reference(tmp_path):
    assert lda_data.tokenize("café naïve Straße 中文 CAFÉ ab😀cd don't x’y") == [
        "café", "naïve", "straße", "中文", "café", "ab", "cd", "don't"]
    # lower-casing once is enough: no character it gives would be changed again
    up = set(docs.upper().tolist())
    assert all(ord(x) not in up for c in up for x in chr(c).lower())
    rng = np.random.default_rng(5)
    alphabet = list("abcXYZ09' -.") + ["é", "É", "ß", "中", "İ", "K", "—", "’", "\u00a0",
                                        "\u2003", "😀", "Ω", "ω", "\ufeff", "ª", "×"]
    lines = ["".join(rng.choice(alphabet, rng.integers(0, 30))) for _ in range(400)]
    body = ("\n".join(lines) + "\n").encode().replace("ß".encode(), b"\xc3", 3)  # cut
    f = tmp_path / "t.txt"
    f.write_bytes(body)
    X, vocab = lda_data.load(str(f), min_count=1)
    ref = [lda_data.tokenize(x) for x in body.decode("utf-8", "replace").split("\n")]
    while ref and not ref[-1]:
        ref.pop()
    words = sorted({w for doc in ref for w in doc})
    assert vocab == words
    index = {w: i for i, w in enumerate(words)}
    for d in range(X.shape[0]):
        counts = np.zeros(len(words), np.int64)
        for w in ref[d] if d < len(ref) else ():
            counts[index[w]] += 1
        assert (X[d].toarray().ravel() == counts).all(), (d, lines[d])


# -- 11: a resume compares the inputs' content ------------------------------------------
def test_resume_compares_content_not_mtime(tmp_path, monkeypatch):
    f = tmp_path / "d.svm"
    f.write_text("".join(f"{Y0.tolist()[i]!r} " + " ".join(f"{j + 1}:{v!r}" for j, v in zip(
        X0[i].indices.tolist(), X0[i].data.tolist())) + "\n" for i in range(40)))
    calls = []
    real = source.checksum
    monkeypatch.setattr(source, "checksum", lambda p: calls.append(p) or real(p))

    def go(**kw):
        setup = lasso.make_file_setup(str(f), lambda_ratio=0.1)
        return strads.run(setup, lasso.DATAFIT.Update, workers=2, tol=0, quiet=True,
                          out=str(tmp_path / "o"), **kw)
    go(max_rounds=5)
    assert calls == []  # no checkpoint, no checksum
    go(max_rounds=30, checkpoint_every=1e-6)
    assert calls and source.checksum(str(f)) == real(str(f))
    data = f.read_bytes()
    f.unlink()
    f.write_bytes(data)  # a copy: another inode, another mtime, the same bytes
    os.utime(f, (1, 1))
    assert go(max_rounds=40, resume=True).rounds == 40
    f.write_bytes(data.replace(b"\n", b" \n", 1))  # the same numbers, another byte
    with pytest.raises(strads.DataError, match="worker 0's data differs"):
        go(max_rounds=50, resume=True)
    # the same for any number of workers: one description, one checksum per file
    assert lasso_data.shard(str(f), None)["content"].strads_digest() == [real(str(f))]


# -- the fuzz harness, a few cases of each format -----------------------------------------
@pytest.mark.long
@pytest.mark.parametrize("fmt", ["svm", "mtx", "npz", "target", "ratings", "ratings-mtx",
                                 "uci", "ldac", "text", "checkpoint"])
def test_fuzz_a_few_mutations_of_each_format(fmt):
    import fuzz
    n = 12 if fmt == "checkpoint" else 40  # (checkpoints: damage, edits; forgeries: above)
    counts, defects = fuzz.fuzz(fmt, n, 7, 300, sys.executable, False,
                                kinds=("corrupt", "edit"))
    assert not defects, defects[:3]
    assert sum(counts.values()) == n


# -- an app's numbers change kind with the run (hunt 2) -----------------------------------
class _KSchedule(strads.Schedule):
    def schedule(self, round):
        return None if round >= 40 else {}


class _KUpdate(strads.Update):
    def __init__(self, shard):
        pass

    def update(self, task):
        return {"g": 0.5}


class _KAggregate(strads.Aggregate):
    def __init__(self):  # a Python int, a bool and a NumPy int: floats and a NumPy bool later
        self.total, self.flag, self.n = 0, False, np.int64(0)

    def aggregate(self, round, task, partials):
        self.updates += 1
        self.total += partials[0]["g"]
        self.n = self.n + 0.25
        self.flag = np.float64(self.total) > 3

    def objective(self):
        return 1.0 / (1 + self.total)


def test_resume_app_numbers_of_another_kind(tmp_path):
    def go(**kw):
        return strads.run(lambda ctx: (_KSchedule(), _KAggregate(), [{}] * ctx.n_workers),
                          _KUpdate, workers=2, quiet=True, mpi=False, out=str(tmp_path / "o"),
                          **kw)
    whole = go()
    go(max_rounds=10, checkpoint_every=1e-6)
    res = go(resume=True)  # was: "aggregate.total: a float (this run has an integer)"
    assert res.rounds == whole.rounds == 40 and res.objective == whole.objective


def test_a_checkpoint_file_taken_by_another_run_is_one_line(tmp_path):
    # two runs into one --out: the other renamed this one's .tmp (was a FileNotFoundError
    # traceback from the clean-up)
    with pytest.raises(outputs.WriteError, match="manifest.json: cannot write: No such file"):
        ckpt._replace(str(tmp_path / "manifest.json.tmp"), str(tmp_path / "manifest.json"))


def test_a_uci_header_w_far_above_the_word_ids_needs_a_vocabulary(tmp_path):
    """W sizes the K x W model: without a vocabulary file, a W far above every word id
    (2e8 words for 5 tokens: gigabytes) is refused; an honest file whose last words never
    occur keeps its W, and a vocabulary of W words backs any W."""
    body = "3\n{}\n3\n1 1 2\n2 5 2\n3 3 1\n"
    most = 4 * 5 + 2 ** 20
    for w in (200_000_000, most + 1):
        f = tmp_path / f"docword.w{w}.txt"
        f.write_text(body.format(w))
        refused(lda_data.load, str(f), match=f"{f}: header says W = {w:,} words but no "
                f"word id above 5 occurs; without a vocabulary file W may be at most {most:,}")
    for w in (most, 1000):
        f = tmp_path / f"docword.ok{w}.txt"
        f.write_text(body.format(w))
        assert lda_data.load(str(f), min_count=1)[0].shape == (3, w)
    (tmp_path / "v").mkdir()
    f = tmp_path / "v" / "docword.v.txt"
    f.write_text(body.format(most + 1))
    (tmp_path / "v" / "vocab.v.txt").write_bytes(b"w\n" * (most + 1))
    X, vocab = lda_data.load(str(f), min_count=1)
    assert X.shape == (3, most + 1) and len(vocab) == most + 1


def test_the_python_api_target_replaces_a_files_own_y(tmp_path):
    """lasso.data.load(path, target): the target is y, for LIBSVM data too (its labels
    read and checked all the same); the command line refuses that pair."""
    f = tmp_path / "d.svm"
    f.write_text("1 1:2\n-1 2:1\n")
    (tmp_path / "t.txt").write_text("0.5\n2\n")
    assert lasso_data.load(str(f), str(tmp_path / "t.txt"))[1].tolist() == [0.5, 2.0]
    f.write_text("1 1:2\nnan 2:1\n")
    refused(lasso_data.load, str(f), str(tmp_path / "t.txt"), match="d.svm:2: label is nan")
    p = run_cli(["strads.apps.lasso", "--data", str(f), "--target", str(tmp_path / "t.txt")])
    assert p.returncode == 2 and "would replace the y that --data" in one_line(p.stderr)
