"""LDA: parallel loading. Every worker reads its own part of --data (or draws its own
documents of the built-in corpus) and the workers agree on the corpus with their
collectives: the corpus read does not depend on the number of workers, gzip and plain
files give the same parts, the text reader agrees with a plain-Python reference, a bad
line in any part is named with its line, one process with W workers equals
``mpiexec -n W+1`` bit for bit, and rank 0 holds less than any worker."""
import gzip
import io
import json
import re
import threading

import numpy as np
import pytest
import scipy.sparse as sp

import strads
from strads.apps import lda as app
from strads.apps.lda import data as lda_data
from strads.io import source
from strads.transport import _Group, _ThreadPeers
from conftest import run_cli


def parts(path, n_workers, **kw):
    """read_part on n_workers threads (the in-process collectives): every worker's Part,
    or the exception the first failing worker raised."""
    group = _Group(n_workers)
    out, errors = [None] * n_workers, []

    def work(w):
        try:
            out[w] = lda_data.read_part(str(path), peers=_ThreadPeers(group, w, n_workers),
                                        **kw)
        except BaseException as e:  # noqa: BLE001
            group.fail(e)
            errors.append(e)

    threads = [threading.Thread(target=work, args=(w,)) for w in range(n_workers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise group.error
    return out


def whole(ps):
    """The corpus the parts make together (and each part's facts agree)."""
    p0 = ps[0]
    for p in ps:
        assert (p.n_docs, p.n_words, p.n_tokens, p.nnz) == (p0.n_docs, p0.n_words,
                                                            p0.n_tokens, p0.nnz)
    assert [p.d0 for p in ps] == sorted(p.d0 for p in ps) and ps[0].d0 == 0
    rows = sp.vstack([sp.csr_matrix((p.counts, p.indices, p.indptr),
                                    shape=(p.indptr.shape[0] - 1, p0.n_words)) for p in ps])
    assert rows.shape[0] == p0.n_docs and rows.nnz == p0.nnz
    assert np.array_equal(np.concatenate([p.lengths for p in ps]),
                          np.asarray(rows.sum(axis=1)).ravel())
    return rows.tocsr(), p0.vocab


def same(a, b):
    (Xa, va), (Xb, vb) = a, b
    assert Xa.shape == Xb.shape and va == vb
    assert (Xa != Xb).nnz == 0


def reference_text(path, min_count=2):
    """The plain-Python text reader the numba one replaced: universal newlines, UTF-8
    with replacement, str.lower, the regular expression, stop words, min_count."""
    raw = open(path, "rb").read()
    if raw[:2] == b"\x1f\x8b":
        raw = gzip.decompress(raw)
    docs, last = [], 0
    for line in io.TextIOWrapper(io.BytesIO(raw), encoding="utf-8-sig", errors="replace"):
        docs.append(lda_data.tokenize(line))
        if line.strip():
            last = len(docs)
    del docs[last:]
    total = {}
    for doc in docs:
        for w in doc:
            total[w] = total.get(w, 0) + 1
    vocab = sorted(w for w, c in total.items() if c >= min_count)
    index = {w: i for i, w in enumerate(vocab)}
    X = sp.lil_matrix((len(docs), len(vocab)), dtype=np.int64)
    for d, doc in enumerate(docs):
        for w in doc:
            if w in index:
                X[d, index[w]] += 1
    return X.tocsr(), vocab


@pytest.fixture(scope="module")
def corpus_files(tmp_path_factory):
    """A corpus in every format (UCI entries shuffled across documents), plain and
    gzipped, small blocks so that every worker has many."""
    d = tmp_path_factory.mktemp("corpus")
    X, _, _ = app.make_corpus(300, 120, 25, 4, 0.2, 0.1, 5)
    X = X.tocsr()
    words = [f"w{i:03d}" for i in range(X.shape[1])]
    coo = X.tocoo()
    order = np.random.default_rng(0).permutation(coo.nnz)
    uci = f"{X.shape[0]}\n{X.shape[1]}\n{coo.nnz}\n" + "".join(
        f"{r + 1} {c + 1} {v}\n" for r, c, v in zip(coo.row[order], coo.col[order],
                                                    coo.data[order]))
    ldac, text = [], []
    for r in range(X.shape[0]):
        a, b = X.indptr[r], X.indptr[r + 1]
        ldac.append(f"{b - a} " + " ".join(f"{w}:{c}" for w, c in zip(X.indices[a:b],
                                                                     X.data[a:b])))
        text.append(" ".join(np.repeat(np.array(words)[X.indices[a:b]], X.data[a:b])))
    ldac[7] = ""  # empty documents in the middle
    text[8] = "The and of"
    files = {"docword.c.txt": uci, "c.ldac": "\n".join(ldac) + "\n\n\n",
             "c.txt": "\n".join(text) + "\n \n\n"}
    (d / "vocab.c.txt").write_text("\n".join(words) + "\n")
    for name, body in files.items():
        (d / name).write_text(body)
        (d / (name + ".gz")).write_bytes(gzip.compress(body.encode(), mtime=0))
    return d


@pytest.mark.parametrize("name", ["docword.c.txt", "c.ldac", "c.txt"])
def test_parts_make_the_same_corpus_for_any_worker_count(corpus_files, name, monkeypatch):
    monkeypatch.setattr(source, "BLOCK", 512)  # many blocks a part (and gzip: a worker)
    ref = whole(parts(corpus_files / name, 1, min_count=1))
    assert ref[0].sum() > 0
    same(lda_data.load(str(corpus_files / name), min_count=1), ref)
    for W in (2, 3, 5):
        for f in (name, name + ".gz"):
            same(whole(parts(corpus_files / f, W, min_count=1)), ref)


def test_text_reader_agrees_with_the_python_reference(tmp_path):
    rng = np.random.default_rng(3)
    pieces = ["Apple", "pie", "don't", "it's", "x9", "9x", "a", "ab''cd", "''ab''", "caf\u00e9",
              "na\u00efve", "\u212aelvin", "\u0130stanbul", "THE", "and", "tab\there",
              "nbsp\u00a0word", "q", "Zz", "\u4e2d\u6587", "c3po", "r2-d2", "e.g.", "U.S.A"]
    lines = []
    for i in range(400):
        k = int(rng.integers(0, 12))
        lines.append(" ".join(rng.choice(pieces, k)))
    lines[10] = "\u00a0 \u2003"  # Unicode white space only: blank
    lines[11] = "\u4e2d"  # no word, not blank: an empty document
    body = ("\r\n".join(lines[:100]) + "\r\n" + "\r".join(lines[100:150]) + "\r" +
            "\n".join(lines[150:]) + "\n\u3000\n\n").encode()
    body = b"\xef\xbb\xbf" + body.replace(b"caf\xc3\xa9", b"caf\xe9")  # an invalid byte
    f = tmp_path / "t.txt"
    f.write_bytes(body)
    ref = reference_text(f)
    same(lda_data.load(str(f)), ref)
    for W in (2, 3):
        same(whole(parts(f, W)), ref)


def test_a_bad_line_in_any_part_is_named(tmp_path):
    lines = [f"2 {i % 7}:1 {i % 5 + 7}:2" for i in range(3000)]
    lines[2500] = "2 1:1 2:x"
    lines[2900] = "1 1:0"
    f = tmp_path / "b.ldac"
    f.write_text("\n".join(lines) + "\n")
    for W in (1, 3):  # the earliest bad line, whichever worker found it
        with pytest.raises(strads.DataError, match=r"b\.ldac:2501: count 'x' is not an "
                                                   r"integer"):
            parts(f, W)
    g = tmp_path / "docword.b.txt"
    g.write_text("5\n9\n3001\n" + "".join(f"{i % 5 + 1} {i % 9 + 1} 1\n" for i in range(3000))
                 + "6 1 1\n")
    with pytest.raises(strads.DataError, match=r"docword\.b\.txt:3004: docID 6 outside "
                                               r"1\.\.5"):
        parts(g, 3)
    g.write_text("5\n9\n3000\n" + "".join(f"{i % 5 + 1} {i % 9 + 1} 1\n" for i in range(3001)))
    with pytest.raises(strads.DataError, match="header says NNZ = 3000 but 3001"):
        parts(g, 3)


def test_more_workers_than_documents_of_a_file(tmp_path):
    f = tmp_path / "s.ldac"
    f.write_text("1 0:1\n1 1:2\n")
    with pytest.raises(strads.DataError, match="3 workers for 2 documents"):
        parts(f, 3)


def test_builtin_corpus_parts_are_make_corpus():
    X, _, _ = app.make_corpus(200, 80, 30, 4, 0.1, 0.05, 9)
    for W in (1, 2, 3):
        group = _Group(W)
        got = [None] * W

        def work(w):
            got[w] = lda_data.corpus_part(200, 80, 30, 4, 0.1, 0.05, 9,
                                          peers=_ThreadPeers(group, w, W))

        ts = [threading.Thread(target=work, args=(w,)) for w in range(W)]
        [t.start() for t in ts]
        [t.join() for t in ts]
        same(whole(got), (X, None))


def _model(out):
    with np.load(out / "model.npz") as z:
        return {k: z[k] for k in z.files}, json.loads((out / "summary.json").read_text())


@pytest.mark.parametrize("source", ["uci", "text", "builtin"])
def test_one_process_equals_mpiexec_bit_for_bit(corpus_files, source, tmp_path):
    args = {"uci": ["--data", corpus_files / "docword.c.txt"],
            "text": ["--data", corpus_files / "c.txt.gz", "--min-count", "1"],
            "builtin": ["--n-docs", "150", "--n-words", "90", "--doc-length", "20"]}[source]
    base = ["strads.apps.lda", "--quiet", "--sweeps", "3", "--topics", "4", "--top-words",
            "0", "--staleness", "1", *map(str, args)]
    for W in (1, 2, 3):
        a, b = tmp_path / f"one{W}", tmp_path / f"mpi{W}"
        p = run_cli(base + ["--workers", str(W), "--out", str(a)])
        assert p.returncode == 0, p.stderr[-2000:]
        p = run_cli(base + ["--out", str(b)], np=W + 1, timeout=180)
        assert p.returncode == 0, p.stderr[-2000:]
        (ma, sa), (mb, sb) = _model(a), _model(b)
        assert sorted(ma) == sorted(mb)
        for k in ma:
            assert np.array_equal(ma[k], mb[k]), (W, k)
        assert sa["loglik"] == sb["loglik"] and sb["ranks"] == W + 1
        assert ma["word_topic"].sum() == sa["tokens"]


def test_mpi_bad_line_of_a_later_part_ends_the_job(tmp_path):
    lines = [f"1 {i % 9}:1" for i in range(2000)]
    lines[1800] = "1 3:-4"
    f = tmp_path / "late.ldac"
    f.write_text("\n".join(lines) + "\n")
    p = run_cli(["strads.apps.lda", "--data", str(f), "--quiet"], np=4, timeout=120)
    assert p.returncode == 2, p.stderr[-2000:]
    errors = [line for line in p.stderr.splitlines() if "error" in line]
    assert len(errors) == 1 and f"{f}:1801: count -4 must be a positive integer" in errors[0]


def test_rank0_holds_less_than_any_worker(tmp_path):
    """Under mpiexec -n 5 rank 0 only schedules: its peak RSS is at most the smallest
    worker's, for the built-in corpus and for a file."""
    f = tmp_path / "docword.r.txt"
    X, _, _ = app.make_corpus(3000, 2000, 60, 10, 0.1, 0.05, 2)
    coo = X.tocoo()
    f.write_text(f"{X.shape[0]}\n{X.shape[1]}\n{coo.nnz}\n" + "".join(
        f"{r + 1} {c + 1} {v}\n" for r, c, v in zip(coo.row, coo.col, coo.data)))
    for args in (["--n-docs", "3000", "--n-words", "3000", "--doc-length", "60"],
                 ["--data", str(f)]):
        out = tmp_path / ("o" + str(len(args)))
        p = run_cli(["strads.apps.lda", "--quiet", "--sweeps", "1", "--topics", "200",
                     "--top-words", "0", "--out", str(out), *args], np=5, timeout=300)
        assert p.returncode == 0, p.stderr[-2000:]
        traffic = json.loads((out / "summary.json").read_text())["traffic"]
        rss = [t["peak_rss_mb"] for t in traffic]
        assert len(rss) == 5 and rss[0] <= min(rss[1:]), rss


def test_cli_reads_a_file_split_among_workers_like_one(corpus_files, tmp_path):
    """The corpus (and so the model's sizes and the vocabulary) read by 3 workers is the
    one a single worker reads."""
    outs = []
    for W in (1, 3):
        out = tmp_path / f"w{W}"
        p = run_cli(["strads.apps.lda", "--quiet", "--sweeps", "1", "--topics", "3",
                     "--top-words", "2", "--workers", str(W), "--data",
                     str(corpus_files / "docword.c.txt"), "--out", str(out)])
        assert p.returncode == 0, p.stderr[-2000:]
        outs.append(_model(out))
    (a, sa), (b, sb) = outs
    assert a["vocab"].tolist() == b["vocab"].tolist() == [f"w{i:03d}" for i in range(120)]
    assert np.array_equal(a["doc_topic"].sum(axis=1), b["doc_topic"].sum(axis=1))
    assert np.array_equal(a["word_topic"].sum(axis=1), b["word_topic"].sum(axis=1))
    assert sa["tokens"] == sb["tokens"]
    assert re.search("topic +0", "topic   0")  # (the CLI printed its topics)
