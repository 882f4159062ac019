"""LDA corpora: readers (UCI bag-of-words, LDA-C, plain text) and the built-in corpus.

A corpus is ``(X, vocab)``: X a (documents x words) CSR matrix of int64 counts, vocab a
list of words (or None when the input names none). Repeated (document, word) pairs are
summed. Empty documents are kept (their rows are zero: they get no tokens and add
nothing to the likelihood). Every reader raises :class:`strads.DataError` naming the
file, the line and the problem.
"""
import os
import re

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


def _int(tok, path, lineno, what):
    try:
        v = int(tok)
    except ValueError:
        raise DataError(f"{path}:{lineno}: {what} {tok.decode(errors='replace')!r} is not an "
                        "integer") from None
    return v


def read_vocab(path):
    if not os.path.isfile(path):
        raise DataError(f"{path}: no such vocabulary file")
    with open(path, encoding="utf-8", errors="replace") as f:
        words = [line.strip() for line in f]
    while words and not words[-1]:
        words.pop()
    if not words:
        raise DataError(f"{path}: empty vocabulary")
    return words


def _matrix(path, docs, words, counts, n_docs, n_words):
    if n_docs == 0:
        raise DataError(f"{path}: empty corpus (no documents)")
    X = sp.csr_matrix((np.asarray(counts, dtype=np.int64),
                       (np.asarray(docs, dtype=np.int64), np.asarray(words, dtype=np.int64))),
                      shape=(n_docs, n_words))
    X.sum_duplicates()
    X.sort_indices()
    if X.nnz == 0 or X.data.sum() == 0:
        raise DataError(f"{path}: empty corpus (no tokens)")
    return X


def read_uci(path, vocab_path=None):
    """UCI bag-of-words: three header lines D, W, NNZ, then ``docID wordID count`` lines
    (1-based ids)."""
    vocab = read_vocab(vocab_path) if vocab_path else None
    docs, words, counts = [], [], []
    header = []
    with open(path, "rb") as f:
        for lineno, raw in enumerate(f, 1):
            parts = raw.split()
            if not parts:
                continue
            if len(header) < 3:
                if len(parts) != 1:
                    raise DataError(f"{path}:{lineno}: header line must hold one integer "
                                    "(D, W, NNZ)")
                v = _int(parts[0], path, lineno, ("D", "W", "NNZ")[len(header)])
                if v < 0:
                    raise DataError(f"{path}:{lineno}: header value {v} is negative")
                header.append(v)
                if len(header) == 2 and vocab is not None and v != len(vocab):
                    raise DataError(f"{path}:{lineno}: W = {v} but {vocab_path} lists "
                                    f"{len(vocab)} words")
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
            if c < 1:
                raise DataError(f"{path}:{lineno}: count {c} must be a positive integer")
            docs.append(d - 1)
            words.append(w - 1)
            counts.append(c)
    if len(header) < 3:
        raise DataError(f"{path}: missing header (D, W, NNZ); is this a UCI docword file?")
    if len(counts) != header[2]:
        raise DataError(f"{path}: header says NNZ = {header[2]} but {len(counts)} entries "
                        "follow")
    return _matrix(path, docs, words, counts, header[0], header[1]), vocab


def read_ldac(path, vocab_path=None):
    """LDA-C: one document per line, ``N id:count ...`` with 0-based word ids and N the
    number of pairs. A blank line is an empty document."""
    vocab = read_vocab(vocab_path) if vocab_path else None
    n_words = len(vocab) if vocab is not None else None
    docs, words, counts = [], [], []
    n_docs = 0
    with open(path, "rb") as f:
        for lineno, raw in enumerate(f, 1):
            parts = raw.split()
            d = n_docs
            n_docs += 1
            if not parts:
                continue
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
                if w < 0 or (n_words is not None and w >= n_words):
                    raise DataError(f"{path}:{lineno}: word id {w} outside the vocabulary "
                                    f"0..{(n_words or 1) - 1}" if n_words else
                                    f"{path}:{lineno}: word id {w} is negative")
                if c < 1:
                    raise DataError(f"{path}:{lineno}: count {c} must be a positive integer")
                docs.append(d)
                words.append(w)
                counts.append(c)
    if n_words is None:
        n_words = max(words) + 1 if words else 0
    return _matrix(path, docs, words, counts, n_docs, n_words), vocab


def tokenize(line, stop_words=STOP_WORDS):
    return [w for w in _WORD.findall(line.lower()) if len(w) > 1 and w not in stop_words]


def read_text(path, min_count=2, stop_words=STOP_WORDS):
    """Plain text, one document per line: lowercase words of letters and digits (starting
    with a letter, at least 2 characters), stop words dropped, and words seen fewer than
    ``min_count`` times in the whole corpus dropped. Vocabulary in alphabetical order."""
    with open(path, encoding="utf-8", errors="replace") as f:
        docs = [tokenize(line, stop_words) for line in f]
    total = {}
    for doc in docs:
        for w in doc:
            total[w] = total.get(w, 0) + 1
    vocab = sorted(w for w, c in total.items() if c >= min_count)
    index = {w: i for i, w in enumerate(vocab)}
    rows, cols = [], []
    for d, doc in enumerate(docs):
        for w in doc:
            i = index.get(w)
            if i is not None:
                rows.append(d)
                cols.append(i)
    if not vocab:
        raise DataError(f"{path}: empty corpus (no word occurs {min_count} times or more)")
    return _matrix(path, rows, cols, np.ones(len(rows), np.int64), len(docs), len(vocab)), vocab


def _guess_vocab(path):
    base = os.path.basename(path)
    folder = os.path.dirname(path)
    stem = os.path.splitext(base)[0]
    cands = [stem + ".tokens", stem + ".vocab", "vocab.txt"]
    if base.startswith("docword."):
        cands.insert(0, "vocab." + base[len("docword."):])
    for c in cands:
        p = os.path.join(folder, c)
        if os.path.isfile(p):
            return p
    return None


FORMATS = ("auto", "uci", "ldac", "text")


def load(path, fmt="auto", vocab=None, min_count=2):
    """Read a corpus; ``fmt`` auto: ``docword.*`` is UCI, ``*.ldac`` (or ``*.dat``) LDA-C,
    anything else plain text. ``vocab``: word list file (UCI/LDA-C; by default looked for
    beside ``path``: vocab.<name>.txt, <stem>.tokens, <stem>.vocab, vocab.txt)."""
    if fmt not in FORMATS:
        raise DataError(f"unknown format {fmt!r}; choose from {FORMATS}")
    if not os.path.isfile(path):
        raise DataError(f"{path}: no such file")
    if os.path.getsize(path) == 0:
        raise DataError(f"{path}: empty file (empty corpus)")
    base = os.path.basename(path).lower()
    if fmt == "auto":
        fmt = ("uci" if base.startswith("docword") else
               "ldac" if base.endswith((".ldac", ".dat")) else "text")
    if fmt == "text":
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


def make_corpus(n_docs=1000, n_words=1000, doc_length=100, n_topics=10, alpha=0.1,
                beta=0.05, seed=0):
    """The built-in corpus, drawn from the LDA generative process: topics
    phi_k ~ Dir(beta), theta_d ~ Dir(alpha), length ~ Poisson(doc_length) (at least 1),
    then z ~ theta_d, w ~ phi_z for every token. Returns ``(X, phi, theta)``;
    deterministic in ``seed``."""
    if min(n_docs, n_words, doc_length, n_topics) < 1:
        raise DataError("the built-in corpus needs docs, words, doc length and topics >= 1")
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
