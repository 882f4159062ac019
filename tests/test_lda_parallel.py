"""LDA: parallel loading. Every worker reads its own part of --data (or draws its own
documents of the built-in corpus) and the workers agree on the corpus with their
collectives: the corpus read does not depend on the number of workers, gzip and plain
files give the same parts, the text reader agrees with a plain-Python reference, a bad
line in any part is named with its line. (Under mpiexec: tests/test_contract.py.)"""
import gzip
import io
import json
import re

import numpy as np
import pytest
import scipy.sparse as sp

import strads
from strads.apps import lda as app
from strads.apps.lda import data as lda_data
from strads.io import source
from strads.transport import on_threads
from conftest import run_cli


def parts(path, n_workers, **kw):
    """read_part on n_workers threads (the in-process collectives): every worker's Part,
    or the exception the first failing worker raised."""
    return on_threads(n_workers, lambda peers: lda_data.read_part(str(path), peers=peers,
                                                                  **kw))


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
    return write_corpus(tmp_path_factory.mktemp("corpus"))


def write_corpus(d):
    """A corpus in every format (UCI entries shuffled across documents), plain and
    gzipped, small blocks so that every worker has many."""
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
             "c.txt": "\n".join(text) + "\n \n\n",
             "docword.s.txt": f"{X.shape[0]}\n{X.shape[1]}\n{coo.nnz}\n" + "".join(
                 f"{r + 1} {c + 1} {v}\n" for r, c, v in zip(coo.row, coo.col, coo.data))}
    for name in ("vocab.c.txt", "vocab.s.txt"):
        (d / name).write_text("\n".join(words) + "\n")
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


def test_a_uci_file_sorted_by_document_reads_as_the_shuffled_one(corpus_files,
                                                                  monkeypatch):
    # (its rows go to their workers as slices, bucketed already: _rows_in_order)
    monkeypatch.setattr(source, "BLOCK", 512)
    ref = whole(parts(corpus_files / "docword.c.txt", 1, min_count=1))
    for W in (1, 2, 3, 5):
        for f in ("docword.s.txt", "docword.s.txt.gz"):
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
    with pytest.raises(strads.DataError, match=r"docword\.b\.txt:3: header says NNZ = 3000 "
                                               "but 3001"):
        parts(g, 3)


def test_more_workers_than_documents_of_a_file(tmp_path):
    f = tmp_path / "s.ldac"
    f.write_text("1 0:1\n1 1:2\n")
    with pytest.raises(strads.DataError, match="3 workers for 2 documents"):
        parts(f, 3)


def test_builtin_corpus_parts_are_make_corpus():
    X, _, _ = app.make_corpus(200, 80, 30, 4, 0.1, 0.05, 9)
    for W in (1, 2, 3):
        got = on_threads(W, lambda peers: lda_data.corpus_part(200, 80, 30, 4, 0.1, 0.05, 9,
                                                               peers=peers))
        same(whole(got), (X, None))


def _model(out):
    with np.load(out / "model.npz") as z:
        return {k: z[k] for k in z.files}, json.loads((out / "summary.json").read_text())


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
