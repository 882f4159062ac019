"""LDA corpora: readers (UCI bag-of-words, LDA-C, plain text) and the built-in corpus.

A corpus is ``(X, vocab)``: X a (documents x words) CSR matrix of int64 counts, vocab a
list of words (or None when the input names none). Repeated (document, word) pairs are
summed. Empty documents are kept (their rows are zero: they get no tokens and add
nothing to the likelihood). Every reader raises :class:`strads.DataError` naming the
file, the line and the problem.
"""
import gzip
import io
import math
import os
import re
import zlib
from array import array

import numpy as np
import scipy.sparse as sp

from ...engine import DataError

STOP_WORDS = frozenset("""
a about above after again against all am an and any are as at be because been before
being below between both but by can could did do does doing down during each few for from
further had has have having he her here hers herself him himself his how i if in into is
it its itself just me more most my myself no nor not now of off on once only or other our
ours ourselves out over own same she should so some such than that the their theirs them
themselves then there these they this those through to too under until up very was we
were what when where which while who whom why will with would you your yours yourself
yourselves also may might must said says shall us upon within without yet
""".split())

_WORD = re.compile(r"[a-z][a-z0-9']*[a-z0-9]|[a-z]")

#: the largest number of documents, words or topics, and the largest count of one
#: (document, word) entry, word or document: ids, topics and counts are 32-bit
INT32_MAX = 2 ** 31 - 1
#: bytes a run needs per token at its peak (the workers sorting their tokens), per
#: (document, word) entry while a file is read (the readers' arrays and the CSR matrix
#: built from them), per document and per word, scheduler and workers together
#: (tracemalloc peaks of runs of 4M tokens: README, "Bad input"). The readers refuse a
#: corpus (so far) whose arrays alone would not fit in memory; make_setup then checks
#: the whole run (strads.apps.lda.memory_estimate)
BYTES_PER_TOKEN = 56
BYTES_PER_ENTRY = 48
BYTES_PER_DOC = 64
BYTES_PER_WORD = 16
_BOM = b"\xef\xbb\xbf"
_COMPRESSED = ((b"BZh", "bzip2"), (b"\xfd7zXZ\x00", "xz"), (b"\x28\xb5\x2f\xfd", "zstd"),
               (b"PK\x03\x04", "zip"))


def phys_mem():
    """Physical memory of this machine in bytes (None where the system does not say)."""
    try:
        n = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return None
    return n if n > 0 else None


def gib(n):
    """Bytes as a short human figure."""
    for unit, size in (("TiB", 2 ** 40), ("GiB", 2 ** 30), ("MiB", 2 ** 20)):
        if n >= size:
            return f"{n / size:.1f} {unit}"
    return f"{n} bytes"


def _too_big(need):
    mem = phys_mem()
    return mem is not None and need > mem


def _mem_msg(need):
    return f"about {gib(need)}, more than this machine's {gib(phys_mem())} of memory"


def _int(tok, path, lineno, what):
    try:
        v = int(tok)
    except ValueError:
        raise DataError(f"{path}:{lineno}: {what} {tok.decode(errors='replace')!r} is not an "
                        "integer") from None
    return v


def _open(path, what):
    """``path`` as a binary stream of its contents, gunzipped when it starts with the gzip
    magic bytes (1f 8b), with up to 8 KiB of them peeked; other compressed formats, NUL
    bytes (binary data), directories and unreadable files are refused."""
    if os.path.isdir(path):
        raise DataError(f"{path}: is a directory, not a {what}")
    if not os.path.exists(path):
        raise DataError(f"{path}: no such {what}")
    if not os.path.isfile(path):
        raise DataError(f"{path}: not a regular file (a {what} must be one)")
    try:
        f = open(path, "rb")
        if f.peek(2)[:2] == b"\x1f\x8b":
            f.close()
            f = io.BufferedReader(gzip.open(path, "rb"), 1 << 16)
        head = f.peek(1 << 13)[:1 << 13]
    except (OSError, EOFError, zlib.error) as e:  # unreadable, or a corrupt gzip header
        why = e.strerror if isinstance(e, OSError) and e.strerror else e
        raise DataError(f"{path}: cannot read the {what}: {why}") from None
    for magic, name in _COMPRESSED:
        if head.startswith(magic):
            f.close()
            raise DataError(f"{path}: {name}-compressed data; decompress it first (gzip is "
                            "read directly)")
    nul = head.find(b"\0")
    if nul >= 0:
        f.close()
        lineno = head.count(b"\n", 0, nul) + 1
        raise DataError(f"{path}:{lineno}: binary data (a NUL byte), not a text {what}")
    return f, head


def _reader(path, what="file", text=False):
    """``path`` opened for reading line by line: gzip read transparently, a UTF-8
    byte-order mark at the start dropped. ``text``: str lines (UTF-8, undecodable bytes
    replaced, universal newlines), else bytes lines split at b'\\n' (the first 8 KiB were
    checked for NUL bytes; further ones fail the integer parse). Wrap the loop in
    ``try: ... except READ_ERRORS as e: raise _read_error(...)``: corrupt or truncated
    gzip data is found only while reading."""
    f, head = _open(path, what)
    if text:
        return io.TextIOWrapper(f, encoding="utf-8-sig", errors="replace")
    if head.startswith(_BOM):
        f.read(len(_BOM))
    return f


READ_ERRORS = (OSError, EOFError, zlib.error)


def _read_error(path, lineno, what, e):
    return DataError(f"{path}:{lineno + 1}: cannot read the {what}: {e}")


def _nul(path, lineno, what):
    return DataError(f"{path}:{lineno}: binary data (a NUL byte), not a text {what}")


def _is_empty(path, what):
    f, head = _open(path, what)
    f.close()
    return not head


def read_vocab(path):
    what = "vocabulary file"
    words = []
    lineno = 0
    try:
        with _reader(path, what, text=True) as f:
            for lineno, line in enumerate(f, 1):
                if "\0" in line:
                    raise _nul(path, lineno, what)
                words.append(line.strip())
    except READ_ERRORS as e:
        raise _read_error(path, lineno, what, e) from None
    while words and not words[-1]:
        words.pop()
    if not words:
        raise DataError(f"{path}: empty vocabulary")
    if len(words) > INT32_MAX:
        raise DataError(f"{path}: {len(words)} words; at most {INT32_MAX} are supported")
    return words


def _check_size(path, lineno, n_docs, n_entries, n_tokens, n_words=0):
    """Refuse a corpus (so far) whose arrays would not fit in this machine's memory."""
    need = (n_docs * BYTES_PER_DOC + n_words * BYTES_PER_WORD  # reading, or the run
            + max(n_entries * BYTES_PER_ENTRY, n_entries * 12 + n_tokens * BYTES_PER_TOKEN))
    if _too_big(need):
        where = f"{path}:{lineno}" if lineno else path
        what = [f"{n:,} {one if n == 1 else many}" for n, one, many in (
            (n_docs, "document", "documents"), (n_words, "word", "words"),
            (n_entries, "(document, word) entry", "(document, word) entries"),
            (n_tokens, "token", "tokens")) if n]
        raise DataError(f"{where}: {', '.join(what)} would need {_mem_msg(need)}")


def _token_limit(n_docs, n_words):
    """Tokens below which a corpus of n_docs, n_words surely fits (each entry holds a
    token at least, so entries <= tokens): the readers call _check_size only above it."""
    mem = phys_mem()
    if mem is None:
        return math.inf
    return (mem - n_docs * BYTES_PER_DOC - n_words * BYTES_PER_WORD) // (
        max(BYTES_PER_ENTRY, 12 + BYTES_PER_TOKEN))


def _arr(a):
    return np.frombuffer(a, dtype=np.int64) if len(a) else np.zeros(0, np.int64)


def _matrix(path, docs, words, counts, n_docs, n_words):
    """CSR counts from the ``array('q')`` columns docs, words, counts."""
    if n_docs == 0:
        raise DataError(f"{path}: empty corpus (no documents)")
    counts = _arr(counts)
    _check_size(path, 0, n_docs, counts.shape[0], int(counts.sum()), n_words)
    X = sp.csr_matrix((counts, (_arr(docs), _arr(words))), shape=(n_docs, n_words))
    X.sum_duplicates()
    X.sort_indices()
    if X.nnz == 0 or X.data.sum() == 0:
        raise DataError(f"{path}: empty corpus (no tokens)")
    return X


def _bad_count(c, path, lineno):
    if c < 1:
        raise DataError(f"{path}:{lineno}: count {c} must be a positive integer")
    raise DataError(f"{path}:{lineno}: count {c} is too large: at most {INT32_MAX} "
                    "(counts are 32-bit)")


def read_uci(path, vocab_path=None):
    """UCI bag-of-words: three header lines D, W, NNZ, then ``docID wordID count`` lines
    (1-based ids). Blank lines are skipped."""
    vocab = read_vocab(vocab_path) if vocab_path else None
    docs, words, counts = array("q"), array("q"), array("q")
    add_doc, add_word, add_count = docs.append, words.append, counts.append
    header = []
    tokens = 0
    lineno = 0
    try:
        f = _reader(path)
        with f:
            for lineno, raw in enumerate(f, 1):
                parts = raw.split()
                if not parts:
                    continue
                if len(header) < 3:
                    name = ("D", "W", "NNZ")[len(header)]
                    if len(parts) != 1:
                        raise DataError(f"{path}:{lineno}: header line must hold one integer "
                                        "(D, W, NNZ)")
                    v = _int(parts[0], path, lineno, name)
                    if v < 0:
                        raise DataError(f"{path}:{lineno}: header value {v} is negative")
                    if name != "NNZ" and v > INT32_MAX:
                        raise DataError(f"{path}:{lineno}: {name} = {v} is too large: at most "
                                        f"{INT32_MAX} {('documents', 'words')[len(header)]} "
                                        "(ids are 32-bit)")
                    header.append(v)
                    if name == "D":
                        _check_size(path, lineno, v, 0, 0)
                    elif name == "W":
                        _check_size(path, lineno, header[0], 0, 0, v)
                    if name == "W" and vocab is not None and v != len(vocab):
                        raise DataError(f"{path}:{lineno}: W = {v} but {vocab_path} lists "
                                        f"{len(vocab)} words")
                    if name == "NNZ":  # every entry holds a token at least
                        _check_size(path, lineno, header[0], v, v, header[1])
                        limit = _token_limit(header[0], header[1])
                    continue
                if len(parts) != 3:
                    raise DataError(f"{path}:{lineno}: expected 'docID wordID count', got "
                                    f"{len(parts)} fields")
                d = _int(parts[0], path, lineno, "docID")
                w = _int(parts[1], path, lineno, "wordID")
                c = _int(parts[2], path, lineno, "count")
                if not 1 <= d <= header[0]:
                    raise DataError(f"{path}:{lineno}: docID {d} outside 1..{header[0]}")
                if not 1 <= w <= header[1]:
                    raise DataError(f"{path}:{lineno}: wordID {w} outside the vocabulary "
                                    f"1..{header[1]}")
                if not 1 <= c <= INT32_MAX:
                    _bad_count(c, path, lineno)
                tokens += c
                add_doc(d - 1)
                add_word(w - 1)
                add_count(c)
                if tokens > limit:
                    _check_size(path, lineno, header[0], len(counts), tokens, header[1])
    except READ_ERRORS as e:
        raise _read_error(path, lineno, "file", e) from None
    if len(header) < 3:
        raise DataError(f"{path}: missing header (D, W, NNZ); is this a UCI docword file?")
    if len(counts) != header[2]:
        raise DataError(f"{path}: header says NNZ = {header[2]} but {len(counts)} entries "
                        "follow")
    return _matrix(path, docs, words, counts, header[0], header[1]), vocab


def read_ldac(path, vocab_path=None):
    """LDA-C: one document per line, ``N id:count ...`` with 0-based word ids and N the
    number of pairs. A blank line between documents is an empty document (as ``0``);
    blank lines after the last document are ignored."""
    vocab = read_vocab(vocab_path) if vocab_path else None
    n_words = len(vocab) if vocab is not None else None
    docs, words, counts = array("q"), array("q"), array("q")
    add_doc, add_word, add_count = docs.append, words.append, counts.append
    n_docs = 0  # documents up to the last non-blank line
    blank = 0  # blank lines since it: empty documents if another document follows
    tokens = 0
    limit = _token_limit(0, 0)  # documents cost far less than the tokens' arrays
    lineno = 0
    try:
        f = _reader(path)
        with f:
            for lineno, raw in enumerate(f, 1):
                parts = raw.split()
                if not parts:
                    blank += 1
                    continue
                n_docs += blank
                blank = 0
                d = n_docs
                n_docs += 1
                n = _int(parts[0], path, lineno, "term count N")
                if n != len(parts) - 1:
                    raise DataError(f"{path}:{lineno}: N = {n} but {len(parts) - 1} id:count "
                                    "pairs follow")
                for tok in parts[1:]:
                    w, sep, c = tok.partition(b":")
                    if not sep:
                        raise DataError(f"{path}:{lineno}: {tok.decode(errors='replace')!r} is "
                                        "not id:count")
                    w = _int(w, path, lineno, "word id")
                    c = _int(c, path, lineno, "count")
                    if w < 0:
                        raise DataError(f"{path}:{lineno}: word id {w} is negative")
                    if n_words is not None and w >= n_words:
                        raise DataError(f"{path}:{lineno}: word id {w} outside the vocabulary "
                                        f"0..{n_words - 1}")
                    if w >= INT32_MAX:
                        raise DataError(f"{path}:{lineno}: word id {w} is too large: at most "
                                        f"{INT32_MAX - 1} (ids are 32-bit)")
                    if not 1 <= c <= INT32_MAX:
                        _bad_count(c, path, lineno)
                    tokens += c
                    add_doc(d)
                    add_word(w)
                    add_count(c)
                if tokens > limit:
                    _check_size(path, lineno, n_docs, len(counts), tokens)
                if n_docs > INT32_MAX:
                    raise DataError(f"{path}:{lineno}: more than {INT32_MAX} documents (ids are "
                                    "32-bit)")
    except READ_ERRORS as e:
        raise _read_error(path, lineno, "file", e) from None
    if n_words is None:
        n_words = int(_arr(words).max()) + 1 if len(words) else 0
    return _matrix(path, docs, words, counts, n_docs, n_words), vocab


def tokenize(line, stop_words=STOP_WORDS):
    return [w for w in _WORD.findall(line.lower()) if len(w) > 1 and w not in stop_words]


def read_text(path, min_count=2, stop_words=STOP_WORDS):
    """Plain text, one document per line: lowercase words of letters and digits (starting
    with a letter, at least 2 characters), stop words dropped, and words seen fewer than
    ``min_count`` times in the whole corpus dropped. Vocabulary in alphabetical order.
    Blank lines between documents are empty documents; blank lines at the end are
    ignored."""
    docs = []
    last = 0  # documents up to the last non-blank line
    tokens = 0
    limit = _token_limit(0, 0)
    lineno = 0
    try:
        with _reader(path, text=True) as f:
            for lineno, line in enumerate(f, 1):
                if "\0" in line:
                    raise _nul(path, lineno, "file")
                doc = tokenize(line, stop_words)
                docs.append(doc)
                tokens += len(doc)
                if line.strip():
                    last = len(docs)
                    if tokens > limit:
                        _check_size(path, lineno, last, tokens, tokens)
    except READ_ERRORS as e:
        raise _read_error(path, lineno, "file", e) from None
    del docs[last:]
    total = {}
    for doc in docs:
        for w in doc:
            total[w] = total.get(w, 0) + 1
    vocab = sorted(w for w, c in total.items() if c >= min_count)
    index = {w: i for i, w in enumerate(vocab)}
    rows, cols = array("q"), array("q")
    for d, doc in enumerate(docs):
        for w in doc:
            i = index.get(w)
            if i is not None:
                rows.append(d)
                cols.append(i)
    if not vocab:
        raise DataError(f"{path}: empty corpus (no word occurs {min_count} times or more)")
    return _matrix(path, rows, cols, array("q", [1]) * len(rows), len(docs),
                   len(vocab)), vocab


def _strip_gz(name):
    return name[:-3] if name.lower().endswith(".gz") else name


def _guess_vocab(path):
    base = _strip_gz(os.path.basename(path))
    folder = os.path.dirname(path)
    stem = os.path.splitext(base)[0]
    cands = [stem + ".tokens", stem + ".vocab", "vocab.txt"]
    if base.startswith("docword."):
        cands.insert(0, "vocab." + base[len("docword."):])
    for c in cands:
        for name in (c, c + ".gz"):
            p = os.path.join(folder, name)
            if os.path.isfile(p):
                return p
    return None


FORMATS = ("auto", "uci", "ldac", "text")


def load(path, fmt="auto", vocab=None, min_count=2):
    """Read a corpus; ``fmt`` auto: ``docword.*`` is UCI, ``*.ldac`` (or ``*.dat``) LDA-C,
    anything else plain text (a ``.gz`` suffix is looked through). ``vocab``: word list
    file (UCI/LDA-C; by default looked for beside ``path``: vocab.<name>.txt,
    <stem>.tokens, <stem>.vocab, vocab.txt, each also gzipped). Any input may be
    gzip-compressed (detected by its first bytes) and may start with a UTF-8 BOM."""
    if fmt not in FORMATS:
        raise DataError(f"unknown format {fmt!r}; choose from {FORMATS}")
    if _is_empty(path, "file"):
        raise DataError(f"{path}: empty file (empty corpus)")
    base = _strip_gz(os.path.basename(path)).lower()
    if fmt == "auto":
        fmt = ("uci" if base.startswith("docword") else
               "ldac" if base.endswith((".ldac", ".dat")) else "text")
    if fmt == "text":
        if vocab:
            raise DataError(f"{vocab}: a vocabulary file is for UCI and LDA-C data; {path} "
                            "is read as plain text, whose vocabulary is its own words")
        return read_text(path, min_count)
    vocab = vocab or _guess_vocab(path)
    return (read_uci if fmt == "uci" else read_ldac)(path, vocab)


def check(X, vocab=None, name="data"):
    """Validate a user-given corpus (counts matrix, dense or sparse) -> int64 CSR."""
    if sp.issparse(X):
        X = sp.csr_matrix(X)
        vals = X.data
    else:
        X = np.asarray(X)
        if X.ndim != 2:
            raise DataError(f"{name}: counts must be 2-D (documents x words), got shape "
                            f"{X.shape}")
        vals = X
    if X.shape[0] == 0 or X.shape[1] == 0:
        raise DataError(f"{name}: empty corpus: counts have shape {X.shape}")
    vals = np.asarray(vals)
    if vals.dtype.kind not in "iuf" or not np.isfinite(vals).all() or \
            (vals != np.round(vals)).any():
        raise DataError(f"{name}: counts must be finite integers")
    if (vals < 0).any():
        raise DataError(f"{name}: counts must be non-negative")
    X = sp.csr_matrix(X, dtype=np.int64)
    X.sum_duplicates()
    X.eliminate_zeros()
    X.sort_indices()
    if X.nnz == 0:
        raise DataError(f"{name}: empty corpus (no tokens)")
    if vocab is not None and len(vocab) != X.shape[1]:
        raise DataError(f"{name}: {len(vocab)} vocabulary words for {X.shape[1]} columns")
    return X


_CORPUS_NAMES = {"n_docs": "n_docs", "n_words": "n_words", "doc_length": "doc_length",
                 "n_topics": "n_topics"}


def check_corpus_size(n_docs, n_words, doc_length, n_topics, names=_CORPUS_NAMES):
    """Refuse (DataError) a built-in corpus whose generation would not fit in memory:
    the float64 topics (K x V) and document mixtures (D x K) with their cumulative
    tables and temporaries, about 32 bytes an entry, and about 80 bytes a token."""
    if min(n_docs, n_words, doc_length, n_topics) < 1:
        raise DataError("the built-in corpus needs docs, words, doc length and topics >= 1")
    for key, v in (("n_docs", n_docs), ("n_words", n_words), ("n_topics", n_topics)):
        if v > INT32_MAX:
            raise DataError(f"{names[key]} {v} is too large for the built-in corpus: at "
                            f"most {INT32_MAX}")
    topics, mixtures = 32 * n_topics * n_words, 32 * n_docs * n_topics
    tokens = 80 * n_docs * doc_length
    need = topics + mixtures + tokens
    if _too_big(need):
        part = max((topics, f"{names['n_topics']} {n_topics} x {names['n_words']} "
                    f"{n_words} (its topics)"),
                   (mixtures, f"{names['n_docs']} {n_docs} x {names['n_topics']} "
                    f"{n_topics} (its documents' topic mixtures)"),
                   (tokens, f"{names['n_docs']} {n_docs} x {names['doc_length']} "
                    f"{doc_length} (its tokens)"))
        raise DataError(f"the built-in corpus of {part[1]} needs {_mem_msg(need)}")


def make_corpus(n_docs=1000, n_words=1000, doc_length=100, n_topics=10, alpha=0.1,
                beta=0.05, seed=0):
    """The built-in corpus, drawn from the LDA generative process: topics
    phi_k ~ Dir(beta), theta_d ~ Dir(alpha), length ~ Poisson(doc_length) (at least 1),
    then z ~ theta_d, w ~ phi_z for every token. Returns ``(X, phi, theta)``;
    deterministic in ``seed``. Refuses a corpus that would not fit in memory."""
    check_corpus_size(n_docs, n_words, doc_length, n_topics)
    rng = np.random.default_rng(seed)
    phi = rng.dirichlet(np.full(n_words, beta), n_topics)
    theta = rng.dirichlet(np.full(n_topics, alpha), n_docs)
    lengths = np.maximum(rng.poisson(doc_length, n_docs), 1)
    doc = np.repeat(np.arange(n_docs), lengths)
    # inverse-CDF draws for all tokens at once: row r of a cumulative table, shifted by
    # r, turns a per-row search into one search over the whole table
    ct = np.cumsum(theta, axis=1)
    ct /= ct[:, -1:]
    z = np.searchsorted((ct + np.arange(n_docs)[:, None]).ravel(),
                        rng.random(doc.size) + doc, side="right") - doc * n_topics
    z = np.minimum(z, n_topics - 1)
    cp = np.cumsum(phi, axis=1)
    cp /= cp[:, -1:]
    w = np.searchsorted((cp + np.arange(n_topics)[:, None]).ravel(),
                        rng.random(doc.size) + z, side="right") - z * n_words
    w = np.minimum(w, n_words - 1)
    X = sp.csr_matrix((np.ones(doc.size, np.int64), (doc, w)), shape=(n_docs, n_words))
    X.sum_duplicates()
    X.sort_indices()
    return X, phi, theta
