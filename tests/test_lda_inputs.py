"""LDA: hard inputs. Bad input is refused with one line (strads.DataError, exit code 2)
before any work; it never corrupts the model, hangs or exhausts memory. Readers (UCI,
LDA-C, text, vocabularies): trailing blank lines, ids at and above 2^31, UTF-8 BOM, gzip,
binary data and directories, sizes beyond physical memory; schedules: staleness beyond
what they can use; float flags: inf and nan.

Every command-line run here gets a 4 GiB address-space limit, so a regression that
allocates what a refusal should have prevented fails with MemoryError (a traceback)
instead of taking the machine's memory."""
import contextlib
import gzip
import json
import os
import re
import resource
import sys
import threading

import numpy as np
import pytest
import scipy.sparse as sp

import strads
from strads.apps import lda as app
from strads.apps.lda import data as lda_data
from strads.apps.lda.__main__ import build_parser
from strads.apps.lda.data import load
from strads.io.memory import fmt_bytes
from conftest import run_cli

INT32_MAX = 2 ** 31 - 1
PHYS = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
BOM = b"\xef\xbb\xbf"
CAP = 4 << 30


def cli(*args, timeout=120):
    return run_cli(["strads.apps.lda", *map(str, args)], timeout=timeout, rlimit_as=CAP)


def refused(p, *parts):
    """Exit code 2, no traceback, and one stderr line holding every part; -> the line."""
    assert p.returncode == 2, (p.returncode, p.stderr[-2000:])
    assert "Traceback" not in p.stderr, p.stderr
    lines = [line for line in p.stderr.splitlines() if "error" in line]
    assert len(lines) == 1, p.stderr
    for part in parts:
        assert part in lines[0], (part, lines[0])
    return lines[0]


def run_model(tmp_path, name, *args):
    out = tmp_path / ("out-" + name)
    p = cli("--sweeps", 2, "--quiet", "--top-words", 0, "--out", out, *args)
    assert p.returncode == 0, p.stderr[-2000:]
    with np.load(out / "model.npz") as z:
        return {k: z[k] for k in z.files}, json.loads(p.stdout.splitlines()[0])


def assert_same_model(a, b):
    assert sorted(a) == sorted(b)
    for k in a:
        assert np.array_equal(a[k], b[k]), k


@contextlib.contextmanager
def memory_cap(extra=2 << 30):
    """This process may map at most ``extra`` bytes more while the block runs."""
    with open("/proc/self/status") as f:
        vm = next(int(line.split()[1]) << 10 for line in f if line.startswith("VmSize"))
    old = resource.getrlimit(resource.RLIMIT_AS)
    resource.setrlimit(resource.RLIMIT_AS, (vm + extra, old[1]))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_AS, old)


def same_corpus(a, b):
    (Xa, va), (Xb, vb) = a, b
    assert Xa.shape == Xb.shape and va == vb
    assert (Xa != Xb).nnz == 0 and Xa.dtype == Xb.dtype


# ----------------------------------------------------------------------- 1. blank lines
LDAC = b"2 0:2 2:1\n1 3:6\n3 0:1 1:1 3:2\n"


@pytest.mark.parametrize("tail", [b"\n", b"\n\n\n", b"  \n\t\n", b"\r\n\r\n"])
def test_ldac_trailing_blank_lines_add_no_documents(tmp_path, tail):
    f = tmp_path / "c.ldac"
    f.write_bytes(LDAC + tail)
    X, _ = load(str(f))
    assert X.shape == (3, 4)
    assert np.array_equal(X.toarray(), [[2, 0, 1, 0], [0, 0, 0, 6], [1, 1, 0, 2]])


def test_ldac_blank_line_between_documents_is_an_empty_document(tmp_path):
    f = tmp_path / "c.ldac"
    f.write_bytes(b"2 0:2 2:1\n\n1 3:6\n\n\n")
    X, _ = load(str(f))
    assert np.array_equal(X.toarray(), [[2, 0, 1, 0], [0, 0, 0, 0], [0, 0, 0, 6]])
    f.write_bytes(b"\n1 3:6\n\n")  # a leading blank line too: document 0 is empty
    assert np.array_equal(load(str(f))[0].toarray(), [[0, 0, 0, 0], [0, 0, 0, 6]])


def test_text_trailing_blank_lines_add_no_documents(tmp_path):
    f = tmp_path / "d.txt"
    f.write_text("apple pie\n\napple pie cherry\nthe and\n\n \n\n")
    X, vocab = load(str(f))
    assert vocab == ["apple", "pie"]
    # line 4 has words, none kept: an empty document; the blank lines after it are none
    assert np.array_equal(X.toarray(), [[1, 1], [0, 0], [1, 1], [0, 0]])


def test_cli_document_count_ignores_trailing_blank_lines(tmp_path):
    f = tmp_path / "c.ldac"
    f.write_bytes(LDAC + b"\n\n\n")
    model, summary = run_model(tmp_path, "blank", "--data", f, "--topics", 3)
    assert model["doc_topic"].shape == (3, 3)
    assert np.array_equal(model["doc_topic"].sum(axis=1), [3, 6, 4])
    assert summary["tokens"] == 13


# ----------------------------------------------------------------------- 2. 32-bit ids
@pytest.mark.parametrize("name,text,msg", [
    ("docword.a.txt", f"2\n{2 ** 31}\n1\n1 1 1\n", ":2: W = 2147483648 is too large"),
    ("docword.b.txt", f"{2 ** 32 + 1}\n3\n1\n1 1 1\n", ":1: D = 4294967297 is too large"),
    ("docword.c.txt", "2\n3\n1\n1 4294967297 1\n", ":4: wordID 4294967297 outside"),
    ("docword.d.txt", "2\n3\n1\n4294967298 1 1\n", ":4: docID 4294967298 outside"),
    ("e.ldac", "1 0:1\n1 4294967297:1\n", ":2: word id 4294967297 is too large: at most "
                                          "2147483646"),
    ("f.ldac", f"1 {INT32_MAX}:1\n", f":1: word id {INT32_MAX} is too large"),
    ("g.ldac", "1 -4294967295:1\n", ":1: word id -4294967295 is negative"),
    ("h.ldac", "1 0:4294967297\n", ":1: count 4294967297 is too large: at most 2147483647"),
    ("docword.i.txt", "1\n1\n1\n1 1 4294967296\n", ":4: count 4294967296 is too large"),
])
def test_ids_and_counts_beyond_32_bits_are_refused_not_wrapped(tmp_path, name, text, msg):
    f = tmp_path / name
    f.write_text(text)
    with memory_cap(), pytest.raises(strads.DataError) as e:
        load(str(f))
    assert str(e.value).startswith(f"{f}:") and msg in str(e.value)


def test_ldac_id_just_below_the_limit_is_not_wrapped(tmp_path):
    # 2^31 - 2 is the largest word id: read as such, or (here) refused for the memory
    # its vocabulary of 2^31 - 1 words would need, never wrapped
    f = tmp_path / "a.ldac"
    f.write_text(f"1 {INT32_MAX - 1}:2\n")
    if INT32_MAX * lda_data.BYTES_PER_WORD > PHYS:
        with memory_cap(), pytest.raises(strads.DataError, match=f"a.ldac: 1 document, "
                                                                 f"{INT32_MAX:,} words"):
            load(str(f))
    else:
        X, _ = load(str(f))
        assert X.shape == (1, INT32_MAX) and X.indices.tolist() == [INT32_MAX - 1]


def test_cli_ldac_wrapping_id_is_one_line(tmp_path):
    f = tmp_path / "w.ldac"
    f.write_text("2 0:1 1:1\n1 4294967296:3\n")  # 2^32: would wrap to word 0 in int32
    refused(cli("--data", f), f"{f}:2: word id 4294967296 is too large")


def test_api_matrix_beyond_32_bits_is_refused():
    X = sp.csr_matrix((np.array([1, 2]), (np.array([0, 0]), np.array([0, 2 ** 31 + 3]))),
                      shape=(1, 2 ** 31 + 5))
    with memory_cap(), pytest.raises(strads.DataError, match="2147483653 words: at most "
                                                             "2147483647"):
        app.fit(X, sweeps=1, quiet=True, mpi=False)
    # no document above 2^31 - 1 tokens, but word 0 is: its counts would wrap in int32
    X = sp.csr_matrix(np.array([[2 ** 30, 1], [2 ** 30, 1], [2, 0]]))
    with memory_cap(), pytest.raises(strads.DataError, match=r"word 0 \(0-based\) has "
                                                             "2147483650 tokens"):
        app.fit(X, sweeps=1, quiet=True, mpi=False)
    with memory_cap(), pytest.raises(strads.DataError, match=r"document 1 \(0-based\) has "
                                                             "2147483648 tokens"):
        app.fit(sp.csr_matrix(np.array([[1, 1], [2 ** 30, 2 ** 30]])), sweeps=1, quiet=True,
                mpi=False)


def test_topics_beyond_32_bits_are_refused(tmp_path):
    with pytest.raises(strads.DataError, match="n_topics must be an integer from 1 to "
                                               "2147483647"):
        app.fit(np.ones((2, 2), int), n_topics=2 ** 32 + 1, quiet=True, mpi=False)
    refused(cli("--topics", 2 ** 32 + 1), "--topics must be an integer from 1 to 2147483647")
    with pytest.raises(strads.DataError, match="n_topics 4294967297 is too large for the "
                                               "built-in corpus"):
        app.make_corpus(10, 10, 10, 2 ** 32 + 1)


# ----------------------------------------------------------------------- 3. BOM and gzip
def _variants(tmp_path, name, content):
    """plain, BOM, gzip, gzip + BOM copies of one file (same name in four folders)."""
    paths = {}
    for kind in ("plain", "bom", "gz", "gzbom"):
        d = tmp_path / kind
        d.mkdir(exist_ok=True)
        body = (BOM if "bom" in kind else b"") + content
        if kind.startswith("gz"):
            body = gzip.compress(body, mtime=0)
        (d / name).write_bytes(body)
        paths[kind] = d / name
    return paths


UCI = b"4\n5\n6\n1 1 2\n1 3 1\n2 2 4\n3 5 1\n4 4 3\n4 1 1\n"
VOCAB = b"apple\nbanana\ncherry\ndate\nelder\n"
TEXT = "The apple and the Apple pie.\n\nPie, apple; cherry!\ncherry pie\n".encode()


@pytest.mark.parametrize("name,content,kw", [
    ("docword.t.txt", UCI, {}),
    ("c.ldac", LDAC, {}),
    ("d.txt", TEXT, {}),
    ("corpus.txt", UCI, {"fmt": "uci"}),
])
def test_bom_and_gzip_read_exactly_like_the_plain_file(tmp_path, name, content, kw):
    paths = _variants(tmp_path, name, content)
    ref = load(str(paths["plain"]), **kw)
    assert ref[0].sum() > 0
    for kind in ("bom", "gz", "gzbom"):
        same_corpus(load(str(paths[kind]), **kw), ref)


def test_auto_format_is_told_by_the_content_not_the_name(tmp_path):
    """A UCI file not named docword.*, LDA-C named .txt, text named .dat or .ldac, each
    also gzipped: --format auto reads them as their content is (the explicit format's
    corpus), told by the first lines only (a bad line later on is the reader's)."""
    for content, fmt in [(UCI, "uci"), (LDAC, "ldac"), (TEXT, "text"),
                         (b"0\n1 2:1\n", "ldac"), (b"12\n7\n", "ldac"),
                         (b"4\n5\n6\n1 1\n", "uci"), (b"2\r3\r\r1\r1 1 1\r", "uci"),
                         (b"3 a:1 x\n", "text"), (b"the 1:2\n", "text")]:
        for name in ("nips.txt", "reviews.dat", "c.ldac", "docword.x.txt"):
            for body in (content, gzip.compress(BOM + content)):
                f = tmp_path / name
                f.write_bytes(body)
                assert lda_data._format(str(f), "auto") == fmt, (name, content)
                if content in (UCI, LDAC, TEXT):
                    same_corpus(load(str(f), min_count=1), load(str(f), fmt, min_count=1))
    long = b"9999 " + b" ".join(b"%d:1" % i for i in range(9999))  # (a line over 64 KiB)
    assert lda_data.sniff(long[:1 << 16]) == "text" and lda_data.sniff(long[:1 << 16], True)\
        == "ldac"
    assert lda_data.sniff(b"1 2:1\nthe cat\n") == "ldac"  # (its bad line 2: the reader's)


def test_errors_after_an_auto_format_name_it_and_point_at_format(tmp_path):
    """Where the guess may be wrong: read as text, or a refusal on the lines it looked
    at; a bad line further on is the format's own."""
    f = tmp_path / "docs.txt"
    for body, fmt in [(b"4\n5\n6\n1 1 1\n2 2 1\n3 3 1\nx 1 1\n", "uci"),
                      (b"1 0:1\n1 1:1\n1 1:1\n1 0:x\n", "ldac")]:
        f.write_bytes(body)
        with pytest.raises(strads.DataError) as e:
            load(str(f))
        assert str(e.value).startswith(f"{f}:") and str(e.value).endswith(
            ("not an integer", "not id:count")), (fmt, str(e.value))
    f.write_bytes(b"1 2 3\n4 5 6\n")  # (UCI without its header: text, no word)
    with pytest.raises(strads.DataError, match=r"empty corpus .* \(--format auto read it "
                       r"as plain text, by its first lines; --format uci, ldac or text"):
        load(str(f))
    f.write_bytes(b"3 0:1 1:1\n")
    note = "(--format auto read it as LDA-C, by its first lines; --format uci, ldac or " \
           "text chooses)"
    with pytest.raises(strads.DataError) as e:
        load(str(f))
    assert "docs.txt:1: N = 3 but 2" in str(e.value) and str(e.value).endswith(note)
    with pytest.raises(strads.DataError) as e:
        load(str(f), "ldac")
    assert "--format" not in str(e.value)
    refused(cli("--data", f), "N = 3 but 2", note)
    f.write_bytes(b"apple banana apple\nbanana cherry apple\n")  # a refusal not of the format
    assert "--format" not in refused(cli("--data", f, "--workers", 3), "3 workers for 2 doc")
    assert "a first line 'N id:count ...': LDA-C" in " ".join(build_parser().format_help()
                                                            .split())


def test_bom_and_gzip_vocabulary(tmp_path):
    (tmp_path / "docword.t.txt").write_bytes(UCI)
    for i, body in enumerate([VOCAB, BOM + VOCAB, gzip.compress(VOCAB),
                              gzip.compress(BOM + VOCAB)]):
        v = tmp_path / f"v{i}.txt"
        v.write_bytes(body)
        X, vocab = load(str(tmp_path / "docword.t.txt"), vocab=str(v))
        assert vocab == ["apple", "banana", "cherry", "date", "elder"], i  # no '\ufeff'


def test_gz_suffix_finds_format_and_vocabulary(tmp_path):
    (tmp_path / "docword.t.txt.gz").write_bytes(gzip.compress(UCI))
    (tmp_path / "vocab.t.txt.gz").write_bytes(gzip.compress(BOM + VOCAB))
    X, vocab = load(str(tmp_path / "docword.t.txt.gz"))
    assert vocab[0] == "apple" and X.shape == (4, 5) and X.sum() == 12
    (tmp_path / "r.ldac.gz").write_bytes(gzip.compress(LDAC))
    (tmp_path / "r.tokens").write_bytes(VOCAB[:-6])
    X, vocab = load(str(tmp_path / "r.ldac.gz"))
    assert X.shape == (3, 4) and vocab == ["apple", "banana", "cherry", "date"]


@pytest.mark.parametrize("name,content", [("c.ldac", LDAC), ("docword.t.txt", UCI),
                                          ("d.txt", TEXT)])
def test_cli_bom_and_gzip_models_equal_the_plain_files(tmp_path, name, content):
    paths = _variants(tmp_path, name, content)
    ref, s_ref = run_model(tmp_path, "plain", "--data", paths["plain"], "--topics", 3,
                           "--min-count", 1)
    assert ref["word_topic"].sum() == s_ref["tokens"] > 0
    for kind in ("bom", "gzbom"):
        model, s = run_model(tmp_path, kind, "--data", paths[kind], "--topics", 3,
                             "--min-count", 1)
        assert_same_model(model, ref)
        assert s["loglik"] == s_ref["loglik"]


def test_cli_vocab_with_bom_equals_plain(tmp_path):
    (tmp_path / "c.ldac").write_bytes(LDAC)
    (tmp_path / "plain.vocab").write_bytes(VOCAB[:-6])
    (tmp_path / "bom.vocab").write_bytes(gzip.compress(BOM + VOCAB[:-6]))
    a, _ = run_model(tmp_path, "a", "--data", tmp_path / "c.ldac", "--vocab",
                     tmp_path / "plain.vocab")
    b, _ = run_model(tmp_path, "b", "--data", tmp_path / "c.ldac", "--vocab",
                     tmp_path / "bom.vocab")
    assert a["vocab"].tolist() == ["apple", "banana", "cherry", "date"]
    assert_same_model(a, b)


def _garbage(n=4096, seed=0):
    """Random bytes without a newline (with NUL bytes, at these sizes)."""
    return np.random.default_rng(seed).integers(0, 256, n, dtype=np.uint8).tobytes().replace(
        b"\n", b"")


# 20,000 lines of random ids: gzip keeps them long (a truncated stream fails late)
RANDOM_LDAC = "".join(f"2 {a}:{b % 9 + 1} {b}:1\n" for a, b in np.random.default_rng(
    1).integers(0, 10 ** 6, (20000, 2)).tolist()).encode()


@pytest.mark.parametrize("name,body,msg", [
    ("g.ldac", b"1 0:1\n" + _garbage(), ":2: binary data (a NUL byte)"),
    ("docword.g.txt", _garbage(), ": binary data (a NUL byte)"),
    ("g.txt", b"hello world\n" * 3 + b"\0\1\2", ":4: binary data (a NUL byte)"),
    ("u16.txt", "apple pie\n".encode("utf-16"), ":1: binary data"),
    ("b.txt", b"BZh91AY&SY" + _garbage(100), "bzip2-compressed data; decompress it first"),
    ("x.ldac", b"\xfd7zXZ\x00\x00" + _garbage(100), "xz-compressed data"),
    ("z.ldac", gzip.compress(_garbage(), mtime=0), ": binary data (a NUL byte)"),
    ("t.ldac", gzip.compress(RANDOM_LDAC)[:-1000], ": cannot read the file: Compressed "
                                                   "file ended before the end-of-stream"),
    ("c.ldac", b"\x1f\x8b" + _garbage(200), "cannot read the file"),
])
def test_binary_and_broken_compressed_input_one_line(tmp_path, name, body, msg):
    f = tmp_path / name
    f.write_bytes(body)
    with pytest.raises(strads.DataError) as e:
        load(str(f))
    assert str(e.value).startswith(str(f)) and msg in str(e.value), str(e.value)
    assert "\n" not in str(e.value)


def test_truncated_gzip_names_the_line(tmp_path):
    f = tmp_path / "t.ldac"
    f.write_bytes(gzip.compress(RANDOM_LDAC)[:-1000])
    with pytest.raises(strads.DataError, match=r"t.ldac:\d{4,5}: cannot read the file"):
        load(str(f))


def test_cli_garbage_directory_and_device_one_line(tmp_path):
    g = tmp_path / "g.ldac"
    g.write_bytes(_garbage())
    refused(cli("--data", g), f"{g}:", "binary data (a NUL byte), not a text file")
    refused(cli("--data", tmp_path), f"{tmp_path}: is a directory, not a file")
    (tmp_path / "c.ldac").write_bytes(LDAC)
    refused(cli("--data", tmp_path / "c.ldac", "--vocab", tmp_path),
            f"{tmp_path}: is a directory, not a vocabulary file")
    refused(cli("--data", "/dev/zero"), "/dev/zero: not a regular file")
    refused(cli("--data", tmp_path / "none.ldac"), "none.ldac: no such file")


def test_vocab_with_plain_text_is_refused(tmp_path):
    (tmp_path / "d.txt").write_bytes(TEXT)
    (tmp_path / "v.txt").write_bytes(VOCAB)
    with pytest.raises(strads.DataError, match="v.txt: a vocabulary file is for UCI and "
                                               "LDA-C data"):
        load(str(tmp_path / "d.txt"), vocab=str(tmp_path / "v.txt"))


# ----------------------------------------------------------------------- 4. sizes
def test_uci_header_sizes_beyond_memory_refused_at_their_line(tmp_path):
    f = tmp_path / "docword.h.txt"
    f.write_text(f"10\n10\n{10 ** 12}\n1 1 1\n")
    with memory_cap(), pytest.raises(strads.DataError) as e:
        load(str(f))
    msg = str(e.value)
    assert msg.startswith(f"{f}:3: ") and "1,000,000,000,000 (document, word) entries" in msg
    # (under memory_cap's ulimit -v the bound is the process's, less than PHYS)
    assert re.search(r"more than this process's [0-9.]+ GiB of memory$", msg), msg
    d = PHYS // lda_data.BYTES_PER_DOC + 1  # documents alone beyond memory
    if d <= INT32_MAX:
        f.write_text(f"{d}\n10\n1\n1 1 1\n")
        with memory_cap(), pytest.raises(strads.DataError, match=f":1: {d:,} documents "
                                                                 "would need"):
            load(str(f))
    w = PHYS // lda_data.BYTES_PER_WORD + 1
    if w <= INT32_MAX:
        f.write_text(f"10\n{w}\n1\n1 1 1\n")
        with memory_cap(), pytest.raises(strads.DataError, match=f":2: 10 documents, {w:,} "
                                                                 "words would need"):
            load(str(f))
    f.write_text(f"{10 ** 12}\n10\n1\n1 1 1\n")
    with memory_cap(), pytest.raises(strads.DataError, match=":1: D = 1000000000000 is "
                                                             "too large"):
        load(str(f))


def test_cli_uci_nnz_of_10_12_one_line(tmp_path):
    f = tmp_path / "docword.n.txt"
    f.write_text(f"10\n10\n{10 ** 12}\n1 1 1\n")
    refused(cli("--data", f), f"{f}:3: ", "1,000,000,000,000 (document, word) entries",
            "more than this process's")  # (cli's rlimit_as: the process's bound)


def test_tokens_beyond_memory_refused_at_the_line_that_reaches_them(tmp_path):
    # entries of 2^31 - 1 tokens each (the largest count) until the tokens' arrays
    # (BYTES_PER_TOKEN a token) exceed physical memory
    n = PHYS // (lda_data.BYTES_PER_TOKEN * INT32_MAX) + 1
    f = tmp_path / "docword.k.txt"
    f.write_text(f"{n}\n1\n{n}\n" + "".join(f"{d} 1 {INT32_MAX}\n" for d in range(1, n + 1)))
    with memory_cap(), pytest.raises(strads.DataError) as e:
        load(str(f))
    assert str(e.value).startswith(f"{f}:{3 + n}: ") and f"{n * INT32_MAX:,} tokens" in \
        str(e.value)
    g = tmp_path / "k.ldac"
    g.write_text("".join(f"1 {d}:{INT32_MAX}\n" for d in range(n)))
    with memory_cap(), pytest.raises(strads.DataError, match=f"k.ldac:{n}: .* tokens would "
                                                             "need"):
        load(str(g))
    p = cli("--data", f)
    refused(p, f"{f}:{3 + n}: ", "tokens would need", "more than this process's")


def test_cli_topics_of_10_9_names_the_flag_and_the_size(tmp_path):
    f = tmp_path / "v.ldac"
    f.write_text("2 0:1 999:2\n1 5:1\n")  # 1,000 words
    need = 1000 * 10 ** 9 * 12  # the int32 table and its int64 build
    line = refused(cli("--data", f, "--topics", 10 ** 9), "--topics 1000000000: ",
                   "the word-topic counts (1,000 words x 1,000,000,000 topics) need "
                   f"{fmt_bytes(need)}", "more than this process's")
    assert line.startswith("python -m strads.apps.lda: error: --topics")
    # the built-in corpus is checked before it is drawn (its topics: K x V floats)
    refused(cli("--topics", 10 ** 9), "the built-in corpus of --topics 1000000000 x "
                                      "--n-words 1000 (its topics) needs")
    refused(cli("--true-topics", 10, "--topics", 10 ** 9, "--n-docs", 10, "--n-words", 50),
            "--topics 1000000000: the word-topic counts (50 words")
    refused(cli("--n-docs", 10 ** 9), "--n-docs 1000000000 x --doc-length 100 (its tokens)")


def test_api_memory_refusals_name_the_keyword():
    X = sp.csr_matrix(np.array([[1, 2, 0], [0, 1, 1]]))
    with memory_cap(), pytest.raises(strads.DataError, match=r"^n_topics 1000000000: the "
                                                             r"word-topic counts \(3 words"):
        app.fit(X, n_topics=10 ** 9, quiet=True, mpi=False)
    # the data schedule keeps a copy of the table on every worker: refused at a K the
    # model schedule fits (computed only: that run would take most of the memory)
    X = sp.csr_matrix(np.ones((2, 300), int))
    K = PHYS // (300 * 16) + 1  # 2 workers x (table + the round's start) x 4 bytes
    est = app.memory_estimate(2, 300, 600, 600, K, 2, 0, "model", 150)
    assert sum(est.values()) < PHYS
    with memory_cap(), pytest.raises(strads.DataError, match="a copy on each of 2 workers"):
        app.fit(X, n_topics=K, schedule="data", workers=2, quiet=True, mpi=False)
    # tokens: documents and words of 2^31 - 1 tokens each, until they exceed memory
    n = PHYS // (lda_data.BYTES_PER_TOKEN * INT32_MAX) + 1
    X = sp.csr_matrix((np.full(n, INT32_MAX, np.int64), (np.arange(n), np.arange(n))))
    with memory_cap(), pytest.raises(strads.DataError, match=f"^data: the corpus's "
                                                             f"{n * INT32_MAX:,} tokens need"):
        app.fit(X, quiet=True, mpi=False)
    with pytest.raises(strads.DataError, match="n_docs 1000000000 x doc_length 100"):
        app.make_corpus(10 ** 9, 10, 100, 3)


def test_memory_estimate_bounds_a_measured_run():
    """The estimate is an upper bound of a real run's peak (tracemalloc), not far above."""
    import tracemalloc

    X, _, _ = app.make_corpus(400, 300, 100, 5, 0.1, 0.05, 1)
    app.fit(X, n_topics=50, sweeps=1, workers=2, quiet=True, mpi=False)  # compiled, warm
    tracemalloc.start()
    try:
        base = tracemalloc.get_traced_memory()[0]
        app.fit(X, n_topics=50, sweeps=1, workers=2, quiet=True, mpi=False)
        peak = tracemalloc.get_traced_memory()[1] - base
    finally:
        tracemalloc.stop()
    cuts = app.split_vocab(np.asarray(X.sum(axis=0)).ravel(), 2)
    est = sum(app.memory_estimate(X.shape[0], X.shape[1], int(X.sum()), X.nnz, 50, 2, 0,
                                  "model", int(np.diff(cuts).max())).values())
    assert peak <= est <= 4 * peak + (1 << 20), (peak, est)


# ----------------------------------------------------------------------- 5. staleness
def test_cli_staleness_of_a_million_is_refused_at_once(tmp_path):
    f = tmp_path / "s.ldac"
    f.write_text("3 0:1 1:2 2:1\n4 3:1 4:1 5:2 6:1\n2 7:3 8:1\n2 9:1 0:4\n")  # 10 words
    refused(cli("--data", f, "--staleness", 10 ** 6),
            "--staleness 1000000 is more than this run can use: at most 9 ", "10 words")
    refused(cli("--data", f, "--staleness", 5, "--workers", 2),
            "--staleness 5 is more than this run can use: at most 4 ")
    refused(cli("--data", f, "--staleness", 3, "--schedule", "data", "--sweeps", 3),
            "--staleness 3 is more than this run can use: at most 2 ", "data schedule")
    # the largest useful values run, and run the rounds they promise
    _, s = run_model(tmp_path, "s9", "--data", f, "--staleness", 9)
    assert s["rounds"] == 2 * 10 and s["max_staleness_seen"] == 9
    _, s = run_model(tmp_path, "s4", "--data", f, "--staleness", 4, "--workers", 2)
    assert s["rounds"] == 2 * 2 * 5
    _, s = run_model(tmp_path, "d2", "--data", f, "--staleness", 1, "--schedule", "data")
    assert s["rounds"] == 2


def test_api_staleness_refused_and_schedule_checks_too(monkeypatch):
    X, _, _ = app.make_corpus(30, 12, 10, 3, 0.2, 0.1, 0)
    steps = []
    monkeypatch.setattr(strads.driver.Driver, "_step", lambda *a: steps.append(a))
    with pytest.raises(strads.DataError, match="^staleness 12 is more than this run can "
                                               "use: at most 5 "):
        app.fit(X, staleness=12, workers=2, sweeps=1, quiet=True, mpi=False)
    assert steps == []  # refused before the first round
    monkeypatch.undo()
    with pytest.raises(strads.DataError, match="at most 5 "):
        app.SCHEDULES["model"].check_staleness(6, 2, 12, 1, {"staleness": "staleness"})
    res = app.fit(X, n_topics=3, staleness=5, workers=2, sweeps=2, quiet=True, mpi=False,
                  check=True)
    assert res.rounds == 2 * 2 * 6 and res.summary()["max_staleness_seen"] == 5


def lines_run(fn):
    """fn() and the Python lines the LDA app's own code ran meanwhile, in every thread."""
    n = [0]

    def local(frame, event, arg):
        n[0] += event == "line"
        return local

    def enter(frame, event, arg):
        return local if f"apps{os.sep}lda{os.sep}" in frame.f_code.co_filename else None
    sys.settrace(enter)
    threading.settrace(enter)
    try:
        return fn(), n[0]
    finally:
        sys.settrace(None)
        threading.settrace(None)


def test_large_staleness_costs_linear_time():
    # W (s + 1) rounds a sweep; each worker sync used to rescan its s + 1 own rounds in
    # flight (s = 16,000: about a minute a sweep): the lines run a round must not grow
    # with s
    X, _, _ = app.make_corpus(200, 16001, 20, 3, 0.2, 0.1, 0)
    s = X.shape[1] - 1  # the largest useful: one slice a word (many of them empty)
    ref = app.fit(X, n_topics=3, sweeps=1, staleness=3, quiet=True, mpi=False)
    res, lines = lines_run(lambda: app.fit(X, n_topics=3, sweeps=1, staleness=s, quiet=True,
                                           mpi=False))
    assert lines < 500 * res.rounds  # a rescan of the rounds in flight: s / 2 more a round
    assert res.rounds == s + 1 and res.updates == ref.updates == int(X.sum())
    assert res.summary()["max_staleness_seen"] == s
    m = res.model
    assert np.array_equal(m["word_topic"].sum(axis=0), m["topic_totals"])
    assert np.array_equal(m["doc_topic"].sum(axis=0), m["topic_totals"])


# ----------------------------------------------------------------------- 6. float flags
@pytest.mark.parametrize("flag,value", [
    ("--alpha", "inf"), ("--alpha", "nan"), ("--alpha", "-inf"), ("--beta", "nan"),
    ("--beta", "inf"), ("--beta", "1e400"), ("--true-beta", "inf"), ("--true-beta", "nan"),
    ("--tol", "nan"), ("--tol", "inf"), ("--time-limit", "inf"), ("--time-limit", "nan"),
    ("--log-interval", "nan"), ("--log-interval", "inf"),
])
def test_float_flags_refuse_inf_and_nan(flag, value, capsys):
    with pytest.raises(SystemExit) as e:
        build_parser().parse_args([f"{flag}={value}"])
    assert e.value.code == 2
    err = capsys.readouterr().err
    assert f"error: argument {flag}: must be a finite number, got {value}" in err


def test_every_lda_float_flag_uses_a_finite_parser():
    from strads import cli as strads_cli

    floats = {a.dest: a.type for a in build_parser()._actions
              if a.type is not None and a.type.__name__.endswith("number")}
    assert set(floats) >= {"alpha", "beta", "true_beta", "tol", "time_limit",
                           "log_interval"}
    for t in floats.values():
        assert t in (strads_cli.pos_float, strads_cli.nonneg_float)


def test_cli_alpha_inf_beta_nan_one_line():
    refused(cli("--alpha", "inf"), "argument --alpha: must be a finite number, got inf")
    refused(cli("--beta", "nan"), "argument --beta: must be a finite number, got nan")


@pytest.mark.parametrize("kw,msg", [({"alpha": float("inf")}, "alpha must be a finite"),
                                    ({"beta": float("nan")}, "beta must be a finite"),
                                    ({"alpha": 1e308, "n_topics": 10}, "overflows")])
def test_api_float_parameters(kw, msg):
    with pytest.raises(strads.DataError, match=msg):
        app.fit(np.array([[1, 2], [3, 0]]), quiet=True, mpi=False, **kw)


@pytest.mark.parametrize("flags,says", [
    (["--vocab", "missing.txt"], "--vocab describes a --data file; it has no effect on the "
     "built-in corpus"),
    (["--format", "uci"], "--format describes a --data file"),
    (["--min-count", "5"], "--min-count describes a --data file"),
    (["--sweeps", "0"], "error: argument --sweeps: a positive integer must be > 0, got 0")])
def test_a_files_flags_without_data_and_no_sweeps_are_refused(capsys, flags, says):
    """A file's flags with the built-in corpus are refused in one line, as the built-in
    corpus's flags are with --data; so is a run of no sweeps."""
    from strads.apps.lda.__main__ import main
    with pytest.raises(SystemExit) as e:
        main(["--n-docs", "20", "--n-words", "30", "--top-words", "0", "--quiet", *flags])
    err = capsys.readouterr().err.strip().splitlines()
    assert e.value.code == 2 and says in err[-1], err
    assert len(err) == 1 or err[0].startswith("usage:"), err  # (argparse's own: usage)


def test_a_vocabulary_found_beside_the_data_is_named(tmp_path):
    """A vocabulary taken from beside --data sets W and the words: the run says which."""
    data = tmp_path / "corpus.ldac"
    data.write_text("2 0:1 1:2\n2 2:1 3:1\n")
    args = (["--data", data, "--topics", "2", "--sweeps", "1", "--top-words", "0"])
    p = cli(*args)
    assert p.returncode == 0 and "[lda] the words" not in p.stderr, p.stderr
    (tmp_path / "vocab.txt").write_text("".join(f"w{k}\n" for k in range(50)))
    p = cli(*args)
    assert p.returncode == 0, p.stderr
    assert (f"[lda] the words of UCI or LDA-C data: {tmp_path / 'vocab.txt'}, found beside "
            "--data (--vocab names another)") in p.stderr.splitlines(), p.stderr
    assert "[lda] the words" not in cli(*args, "--quiet").stderr


def test_text_corpus_starting_with_BZh_is_not_bzip2(tmp_path):
    from strads.apps.lda import data as lda_data

    path = tmp_path / "docs.txt"
    path.write_text("BZhang and Smith wrote papers about topics\n"
                    "Smith wrote more papers about topics\n")
    X, vocab = lda_data.load(str(path), "text", None, 1)  # (was refused as bzip2 data)
    # the hand reading: stop words dropped, words of 2 characters or more
    assert vocab == ["bzhang", "papers", "smith", "topics", "wrote"]
    assert X.toarray().tolist() == [[1, 1, 1, 1, 1], [0, 1, 1, 1, 1]]


def test_ldac_starting_with_three_empty_documents_auto(tmp_path):
    from strads.apps.lda import data as lda_data

    path = tmp_path / "corpus.ldac"
    path.write_text("0\n0\n0\n3 0:1 1:1 2:1\n2 0:2 2:1\n")
    # the hand reading: line d + 1 is document d, 'N id:count ...', 0-based ids
    want = [[0, 0, 0], [0, 0, 0], [0, 0, 0], [1, 1, 1], [2, 0, 1]]
    for fmt in ("ldac", "auto"):  # (auto took it for UCI: line 4 refused, no hint)
        X, _ = lda_data.load(str(path), fmt)
        assert X.toarray().tolist() == want, fmt
    # three lines of one integer and then UCI's lines are still UCI
    (tmp_path / "vocab.c.txt").write_text("a\nb\nc\n")
    uci = tmp_path / "docword.c.txt"
    uci.write_text("2\n3\n3\n1 1 2\n2 3 1\n2 2 4\n")
    X, _ = lda_data.load(str(uci))
    assert X.toarray().tolist() == [[2, 0, 0], [0, 4, 1]]


KOS = "3\n5\n{nnz}\n1 1 2\n1 3 1\n2 2 4\n2 5 1\n3 1 1\n3 4 3\n"  # docword.kos.txt's layout


@pytest.mark.parametrize("nnz", [7, 5])
def test_uci_nnz_mismatch_names_its_header_line(tmp_path, nnz):
    """An NNZ line (line 3, or later after blank lines) that the entries below disagree
    with is refused naming that line."""
    from strads.apps.lda import data as lda_data

    for blank in ("", "\n\n"):
        (tmp_path / "docword.kos.txt").write_text(blank + KOS.format(nnz=nnz))
        (tmp_path / "vocab.kos.txt").write_text("a\nb\nc\nd\ne\n")
        path = str(tmp_path / "docword.kos.txt")
        with pytest.raises(strads.DataError) as e:
            lda_data.load(path)
        assert str(e.value).startswith(f"{path}:{3 + len(blank)}: header says NNZ = {nnz} "
                                       "but 6 entries follow")
