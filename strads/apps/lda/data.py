"""LDA corpora, ``(X, vocab)``: the readers of :mod:`strads.io` (UCI bag-of-words, LDA-C,
plain text) read in parallel (:func:`read_part`) or whole (:func:`load`), and the built-in
corpus."""
import math
import os
import re

import numpy as np
import scipy.sparse as sp
from numba import njit

from ...api import split_balanced
from ...errors import DataError
from ...io import docs as text_docs, ldac, memory, numbers, uci
from ...io.agree import (ascending, attempt, group_starts, owners, refuse, route,
                          route_slices, scatter, tally, tally_into)
from ...io.source import SNIFF
from ...io.uci import INT32_MAX
from ...transport import Peers
from .kernels import _first_above

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


#: bytes a run needs at its peak per token, per (document, word) entry while a file is
#: read, per document and per word (docs/apps/lda.md, "Bad input"): the readers refuse
#: a corpus (so far) whose arrays alone would not fit in memory
BYTES_PER_TOKEN = 56
BYTES_PER_ENTRY = 48
BYTES_PER_DOC = 64
BYTES_PER_WORD = 16


def check_size(path, lineno, n_docs, n_entries, n_tokens, n_words=0):
    """Refuse a corpus (so far) whose arrays would not fit in this machine's memory."""
    need = (n_docs * BYTES_PER_DOC + n_words * BYTES_PER_WORD  # reading, or the run
            + max(n_entries * BYTES_PER_ENTRY, n_entries * 12 + n_tokens * BYTES_PER_TOKEN))
    too = memory.beyond(need)
    if too:
        where = f"{path}:{lineno}" if lineno else path
        what = [f"{n:,} {one if n == 1 else many}" for n, one, many in (
            (n_docs, "document", "documents"), (n_words, "word", "words"),
            (n_entries, "(document, word) entry", "(document, word) entries"),
            (n_tokens, "token", "tokens")) if n]
        raise DataError(f"{where}: {', '.join(what)} would need {too}")


def _token_limit(n_docs, n_words):
    """Tokens below which a corpus of n_docs, n_words surely fits (each entry holds a
    token at least, so entries <= tokens): the readers check the size only above it."""
    mem = memory.physical_memory()
    if mem is None:
        return math.inf
    return (mem - n_docs * BYTES_PER_DOC - n_words * BYTES_PER_WORD) // (
        max(BYTES_PER_ENTRY, 12 + BYTES_PER_TOKEN))


@njit(**numbers.NB)
def rows(start, w, c):
    """CSR rows of the documents' buckets (:func:`_rows`): each row's words sorted and
    repeats summed (in place). Returns (indptr, word ids, counts, row sums); w and c
    themselves when no word repeats in a row (UCI files: no copies beside them)."""
    n_local = start.shape[0] - 1
    indptr = np.zeros(n_local + 1, np.int64)
    sums = np.zeros(n_local, np.int64)
    q = 0
    for r in range(n_local):
        a, b = start[r], start[r + 1]
        ordered = True
        for t in range(a + 1, b):
            if w[t] < w[t - 1]:
                ordered = False
                break
        if not ordered:
            o = np.argsort(w[a:b]) + a
            c[a:b] = c[o]
            w[a:b] = w[o]
        for t in range(a, b):
            sums[r] += c[t]
            if t > a and w[t] == w[q - 1]:
                c[q - 1] += c[t]
            else:
                w[q] = w[t]
                c[q] = c[t]
                q += 1
        indptr[r + 1] = q
    if q == w.shape[0]:
        return indptr, w, c, sums
    return indptr, w[:q].copy(), c[:q].copy(), sums


@njit(**numbers.NB)
def by_word(indptr, indices, counts, n_words):
    """The tokens of CSR rows (word ids sorted within a row), sorted by word, then
    document: (each word's first token, and one past the last word's, int64; the tokens'
    documents, int32)."""
    wptr = np.zeros(n_words + 1, np.int64)
    tally_into(indices, -1, wptr, counts)
    for v in range(n_words):
        wptr[v + 1] += wptr[v]
    start = wptr[:-1].copy()
    docs = np.empty(wptr[-1], np.int32)
    for d in range(indptr.shape[0] - 1):
        for e in range(indptr[d], indptr[d + 1]):
            w = indices[e]
            p = start[w]
            for q in range(p, p + counts[e]):
                docs[q] = d
            start[w] = p + counts[e]
    return wptr, docs


class Part:
    """One worker's documents, read by :func:`read_part`: documents ``d0 .. d0 + len(
    lengths)`` as CSR rows (``indptr``, ``indices`` word ids sorted within a row,
    ``counts``), and the corpus's global facts: ``n_docs``, ``n_words``, ``n_tokens``,
    ``nnz`` (distinct (document, word) entries) and ``vocab`` (or None)."""

    def __init__(self, d0, indptr, indices, counts, n_docs, n_words, n_tokens, nnz, vocab,
                 lengths=None):
        self.d0, self.indptr, self.indices, self.counts = d0, indptr, indices, counts
        self.n_docs, self.n_words, self.n_tokens, self.nnz = n_docs, n_words, n_tokens, nnz
        self.vocab = vocab
        if lengths is None:
            cs = np.concatenate([[0], np.cumsum(counts, dtype=np.int64)])
            lengths = cs[indptr[1:]] - cs[indptr[:-1]]
        self.lengths = np.asarray(lengths, np.int64)


def _rows(entries, d0, n_local):
    """CSR rows d0 .. d0 + n_local of ``entries``, [documents, words, counts] (counts
    None: one each): duplicates summed, ids sorted. The list is emptied once its entries
    are bucketed (a caller that keeps no other reference frees them then)."""
    docs, words, counts = entries
    entries.clear()
    if counts is None:
        counts = np.ones(docs.shape[0], np.int32)
    # bucketed by document (a counting sort)
    start = group_starts(docs, n_local, d0)
    w, c = np.empty(docs.shape[0], np.int32), np.empty(docs.shape[0], np.int64)
    scatter(docs, d0, start, words, w)
    scatter(docs, d0, start, counts, c)
    del docs, words, counts
    return rows(start, w, c)


def _rows_in_order(peers, cuts, entries, d0, n_local):
    """:func:`_rows` of the rows every worker routes to this one, when the workers' rows
    are in order of documents: each worker's rows for another are a slice of its own,
    bucketed already. The list is emptied, as :func:`_rows`."""
    docs, words, counts = entries
    entries.clear()
    me = peers.rank
    bounds = np.searchsorted(docs, cuts.astype(docs.dtype))
    sends = peers.allgather(np.diff(bounds).tolist())
    n = sum(s[me] for s in sends)
    start = np.zeros(n_local + 1, np.int64)
    route_slices(peers, bounds, sends, docs, lambda at, p: tally_into(p, d0 - 1, start))
    del docs
    np.cumsum(start, out=start)
    todo, out = [(words, np.int32), (counts, np.int64)], []
    del words, counts
    while todo:  # one array at a time, each freed once routed
        a, dtype = todo.pop(0)
        out.append(np.empty(n, dtype))
        if a is None:
            out[-1][:] = 1
        else:
            route_slices(peers, bounds, sends, a, lambda at, p: out[-1].__setitem__(
                slice(at, at + p.shape[0]), p))
        del a
    return rows(start, *out)


def _join(pieces, j, dtype):
    """Array j of every piece (lists of arrays) joined (``dtype``: none), each piece's
    dropped once copied."""
    if not pieces:
        return np.zeros(0, dtype)
    if len(pieces) == 1:
        whole, pieces[0][j] = pieces[0][j], None
        return whole
    whole = np.empty(sum(p[j].shape[0] for p in pieces),
                     np.result_type(*(p[j].dtype for p in pieces)))
    at = 0
    for p in pieces:
        whole[at:at + p[j].shape[0]] = p[j]
        at += p[j].shape[0]
        p[j] = None
    return whole


def _open_part(path, fmt, vocab):
    """Every worker's checks before reading -> (format, the file, the first data byte,
    the UCI header, the vocabulary)."""
    if fmt not in FORMATS:
        raise DataError(f"unknown format {fmt!r}; choose from {FORMATS}")
    src = uci.open_text(path)
    if not src.head and not src.bom:
        src.refuse("empty")
    if fmt != "text":  # (plain text reads \r line ends too)
        src.newlines()
    if fmt == "text":
        if vocab:
            raise DataError(f"{vocab}: a vocabulary file is for UCI and LDA-C data; {path} "
                            "is read as plain text, whose vocabulary is its own words")
        words = None
    else:
        vocab = vocab or guess_vocab(path)
        words = uci.read_vocab(vocab) if vocab else None
    header, begin = None, src.bom
    if fmt == "uci":
        *header, begin = uci.header(src, lambda *a: check_size(path, *a),
                                    None if words is None else len(words), vocab)
    return fmt, src, begin, header, words


NAMES = {"uci": "UCI bag-of-words", "ldac": "LDA-C", "text": "plain text"}
_INT = re.compile(rb"[-+]?\d+")


def sniff(head, cut=False):
    """The format of a corpus that begins with ``head`` (``cut``: its last word may be
    cut short, and is not looked at), from its first lines alone (a bad line further on
    is then its reader's to name): "uci" if the first three are one integer each (D, W,
    NNZ) and the fourth holds no id:count pair (LDA-C's empty documents are lines of one
    0); "ldac" if the first is an integer and id:count pairs ('N id:count ...'); else
    "text". Lines end at \\n, \\r\\n or \\r (a lone \\r: the reader refuses it)."""
    if cut:
        head = head.rsplit(None, 1)[0]
    rows = []
    for line in head.splitlines():
        rows += [line.split()] if line.split() and len(rows) < 4 else []
    if len(rows) >= 3 and all(len(r) == 1 and _INT.fullmatch(r[0]) for r in rows[:3]) \
            and (len(rows) < 4 or not any(b":" in t for t in rows[3])):
        return "uci"
    if rows and _INT.fullmatch(rows[0][0]) and all(b":" in t for t in rows[0][1:]):
        return "ldac"
    return "text"


def _format(path, fmt):
    """``fmt``, or for "auto" the format the file's first 64 KiB show (:func:`sniff`)."""
    if fmt != "auto":
        return fmt
    head = uci.open_text(path).head
    return sniff(head, len(head) >= SNIFF)


def inputs(path, fmt="auto", vocab=None):
    """The files a corpus is read from: it, and for UCI and LDA-C its vocabulary (auto:
    the vocabulary it would have, not opening the corpus: rank 0 does not read it)."""
    if fmt not in FORMATS or fmt == "text":
        return [path]
    return [path, vocab or guess_vocab(path)]


def read_part(path, fmt="auto", vocab=None, min_count=2, peers=None,
              stop_words=STOP_WORDS):
    """This worker's :class:`Part` of a corpus file (formats: :func:`load`): each worker
    parses its byte range and the workers agree on the corpus; ``peers`` None: one worker
    reads it all. A refusal names the earliest bad line, and the format auto chose."""
    peers = peers or Peers()
    sniffed = attempt(peers, _format, path, fmt)
    try:
        return _read_part(path, sniffed, vocab, min_count, peers, stop_words)
    except DataError as e:
        # a guess may be wrong where it fell back to text, or on the lines it looked at;
        # a bad line further into a UCI or LDA-C file is that file's, and a refusal of
        # the workers or the memory is not about the format
        msg = str(e)
        at = re.match(re.escape(path) + r":(\d+):", msg)
        if fmt != "auto" or not msg.startswith(path) or " would need " in msg \
                or sniffed != "text" and not (at and int(at[1]) <= 3 + (sniffed == "uci")):
            raise
        raise DataError(f"{e} (--format auto read it as {NAMES[sniffed]}, by its first "
                        "lines; --format uci, ldac or text chooses)") from None


def _read_part(path, fmt, vocab, min_count, peers, stop_words):
    W, me = peers.size, peers.rank
    fmt, src, begin, header, words = attempt(peers, _open_part, path, fmt, vocab)
    gz, text = src.gz, fmt == "text"
    blocks = src.blocks(begin, me, W, universal=text)

    def check(*a):
        check_size(path, *a)

    def scan():
        if fmt == "uci":
            return uci.scan(blocks, path, *header[:2], _token_limit(*header[:2]), check,
                            None if gz else (src.size - begin) // W)
        if fmt == "ldac":
            return ldac.scan(blocks, path, None if words is None else len(words),
                             _token_limit(0, 0), check)
        return text_docs.scan(blocks, path, stop_words, _token_limit(0, 0), check)

    out, tokens, lines, last, table = attempt(peers, scan)
    out = [list(o) for o in out]
    docs, ids = _join(out, 0, np.int64), _join(out, 1, np.int32)
    counts = None if text else _join(out, 2, np.int32)
    del out
    local_vocab = None
    if text:  # this worker's words and how often each is seen
        n = np.bincount(ids, minlength=table.n_ids)[table.n_stop:].tolist()
        local_vocab = (table.words(), n)
    facts = {"lines": lines, "last": last, "entries": int(ids.shape[0]), "tokens": tokens,
             "max_id": int(ids.max(initial=-1)), "vocab": local_vocab,
             # this worker's first and last document when its rows are in their order
             "span": None if not ascending(docs, docs) else
             (int(docs[0]), int(docs[-1])) if docs.shape[0] else ()}
    every = peers.allgather(facts)
    # documents: line d + 1 is document d (LDA-C, text); a part's lines follow the
    # earlier parts' (a gzip stream's every worker counted itself; UCI counts none)
    before = [0 if gz else sum(f["lines"] for f in every[:w]) for w in range(W)]
    # the rows in order of documents over all workers (a UCI file sorted by document;
    # LDA-C and text unless gzip-compressed): no owners to route to, nothing to bucket
    spans = [f["span"] if f["span"] is None else tuple(d + before[w] for d in f["span"])
             for w, f in enumerate(every)]
    spans = [x for x in spans if x != ()]
    in_order = None not in spans and all(
        a[1] <= b[0] for a, b in zip(spans, spans[1:]))
    if before[me]:
        docs += before[me]
    ends = [before[w] + f["last"] for w, f in enumerate(every) if f["last"] >= 0]
    entries = sum(f["entries"] for f in every)
    n_tokens = sum(f["tokens"] for f in every)
    try:
        if fmt == "uci":
            n_docs, n_words = header[0], header[1]
            if entries != header[2]:
                raise DataError(f"{path}:{header[3]}: header says NNZ = {header[2]} but "
                                f"{entries} entries follow")
            _check_w(path, n_words, max(f["max_id"] for f in every) + 1, words)
            vocab_out = words
        elif fmt == "ldac":
            n_docs = max(ends) + 1 if ends else 0
            n_words = len(words) if words is not None else \
                max(f["max_id"] for f in every) + 1
            if n_docs > INT32_MAX:
                raise DataError(f"{path}:{INT32_MAX + 1}: more than {INT32_MAX} documents "
                                "(ids are 32-bit)")
            vocab_out = words
        else:
            n_docs = max(ends) + 1 if ends else 0
            total = {}
            for f in every:
                for w, c in zip(*f["vocab"]):
                    total[w] = total.get(w, 0) + c
            vocab_out = sorted(w for w, c in total.items() if c >= min_count)
            if not vocab_out:
                raise DataError(f"{path}: empty corpus (no word occurs {min_count} times "
                                "or more)")
            index = {w: i for i, w in enumerate(vocab_out)}
            n_words = len(vocab_out)
        if n_docs == 0:
            raise DataError(f"{path}: empty corpus (no documents)")
        if n_docs > INT32_MAX:
            raise DataError(f"{path}: {n_docs} documents: at most {INT32_MAX} (ids are "
                            "32-bit)")
        check_size(path, 0, n_docs, entries, n_tokens, n_words)
        if entries == 0:
            raise DataError(f"{path}: empty corpus (no tokens)")
    except DataError as e:
        refuse(peers, e)
    if text:  # this worker's word ids -> the corpus's (-1: below min_count)
        full = np.full(table.n_ids, -1, np.int64)
        full[table.n_stop:] = [index.get(w, -1) for w in local_vocab[0]]
        g = full[ids]
        keep = g >= 0
        docs, ids = docs[keep], g[keep].astype(np.int32)
        del g, keep, index, total
        entries_kept = peers.allgather(int(ids.shape[0]))
        if sum(entries_kept) == 0:
            refuse(peers, f"{path}: empty corpus (no tokens)")
        n_tokens = sum(entries_kept)
    if W > n_docs:
        refuse(peers, f"{W} workers for {n_docs} documents: each worker needs documents")
    lengths = peers.allreduce(tally(docs, n_docs, weights=counts))
    cuts = split_balanced(lengths, W)  # contiguous documents balanced by tokens
    del lengths
    d0, d1 = int(cuts[me]), int(cuts[me + 1])
    entries = [docs, ids, counts]
    del docs, ids, counts  # (route and _rows free each array once they are done with it)
    if in_order:
        indptr, indices, cnt, sums = _rows_in_order(peers, cuts, entries, d0, d1 - d0)
    else:
        dest = owners(cuts, entries[0])
        entries = route(peers, dest, entries)
        del dest
        indptr, indices, cnt, sums = _rows(entries, d0, d1 - d0)
    nnz = sum(peers.allgather(int(indices.shape[0])))
    return Part(d0, indptr, indices, cnt, n_docs, n_words, n_tokens, nnz, vocab_out, sums)


def _check_w(path, n_words, seen, vocab):
    """A UCI header's W with no vocabulary file behind it is a claim: the K x W model
    follows it. Words above the highest id seen (never occurring, their columns stay
    empty) are kept, as honest files list them, up to a few times the ids seen."""
    most = 4 * seen + (1 << 20)
    if vocab is None and n_words > most:
        raise DataError(f"{path}: header says W = {n_words:,} words but no word id above "
                        f"{seen:,} occurs; without a vocabulary file W may be at most "
                        f"{most:,} (4 x the highest id + 2^20): give the vocabulary "
                        "(--vocab) or the right W")


def warmup():
    """Compile the readers' kernels (numba, cached on disk) on tiny inputs."""
    b = np.frombuffer(b"1 1 1\n", np.uint8)
    i32, i64 = np.zeros(2, np.int32), np.zeros(2, np.int64)
    uci._scan(b, 0, b.shape[0], 1, 1, 10, i32, i32.copy(), i32.copy(), 0, 0)
    b = np.frombuffer(b"1 0:1\n", np.uint8)
    ldac._scan(b, 0, b.shape[0], 0, 1, 10, i64, i32, i32.copy(), 0, 0, -1)
    for idx, weights in ((i64, i32), (i32, i64), (i32, i32), (i32, None), (i64, None),
                         (np.zeros(2, np.uint16), None)):
        tally_into(idx, 0, np.zeros(2, np.int64), weights)
    for a in (i32, i64):  # (the rows in order: _rows_in_order)
        ascending(a, a)
    by_word(i64, i32, i32, 1)  # (32-bit counts: LDAUpdate's)
    w = text_docs.Words(("ab",))
    w.scan(np.frombuffer(b"ab cd\n", np.uint8), 0, 0, 10, i64, i32, 0, -1)
    text_docs.rehash(np.full(8, -1, np.int64), w.wstart, w.wlen, w.arena, w.n_ids)
    _draw_words(np.ones((1, 2)), i64, np.zeros(2), i64.copy())


def tokenize(line, stop_words=STOP_WORDS):
    return text_docs.tokenize(line, stop_words)


def guess_vocab(path):
    """The vocabulary file beside a UCI or LDA-C corpus, or None (:func:`load`)."""
    base = os.path.basename(path)
    base = base[:-3] if base.lower().endswith(".gz") else base
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
    """``(X, vocab)``: the whole corpus (one worker's :func:`read_part`); ``fmt`` auto: by
    :func:`sniff`; ``vocab``: the word list of UCI/LDA-C data (default: :func:`guess_vocab`).
    Any input may be gzip-compressed and may start with a UTF-8 BOM."""
    p = read_part(path, fmt, vocab, min_count)
    return sp.csr_matrix((p.counts, p.indices, p.indptr), shape=(p.n_docs, p.n_words)), p.vocab


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


_CORPUS_NAMES = {k: k for k in ("n_docs", "n_words", "doc_length", "n_topics")}


def check_corpus_size(n_docs, n_words, doc_length, n_topics, names=_CORPUS_NAMES):
    """Refuse a built-in corpus whose generation would not fit in memory: topics (K x V)
    and mixtures (D x K) about 32 bytes an entry, about 80 bytes a token."""
    if min(n_docs, n_words, doc_length, n_topics) < 1:
        raise DataError("the built-in corpus needs docs, words, doc length and topics >= 1")
    for key, v in (("n_docs", n_docs), ("n_words", n_words), ("n_topics", n_topics)):
        if v > INT32_MAX:
            raise DataError(f"{names[key]} {v} is too large for the built-in corpus: at "
                            f"most {INT32_MAX}")
    topics, mixtures = 32 * n_topics * n_words, 32 * n_docs * n_topics
    tokens = 80 * n_docs * doc_length
    need = topics + mixtures + tokens
    too = memory.beyond(need)
    if too:
        part = max((topics, f"{names['n_topics']} {n_topics} x {names['n_words']} "
                    f"{n_words} (its topics)"),
                   (mixtures, f"{names['n_docs']} {n_docs} x {names['n_topics']} "
                    f"{n_topics} (its documents' topic mixtures)"),
                   (tokens, f"{names['n_docs']} {n_docs} x {names['doc_length']} "
                    f"{doc_length} (its tokens)"))
        raise DataError(f"the built-in corpus of {part[1]} needs {too}")


def corpus_lengths(n_docs, doc_length, seed):
    """The built-in corpus's document lengths: Poisson(doc_length), at least 1, from
    the stream (seed, 1): the same for any number of workers."""
    rng = np.random.default_rng([seed, 1])
    return np.maximum(rng.poisson(doc_length, n_docs), 1).astype(np.int64)


def corpus_topics(n_words, n_topics, beta, seed, cumulative=False):
    """The built-in corpus's true topics phi_k ~ Dir(beta) (K x V float64), one row at
    a time from the stream (seed, 0); ``cumulative``: each row's normalised running
    sum instead (what drawing words needs; no second K x V array)."""
    rng = np.random.default_rng([seed, 0])
    phi = np.empty((n_topics, n_words))
    prior = np.full(n_words, beta)
    for k in range(n_topics):
        phi[k] = rng.dirichlet(prior)
        if cumulative:
            np.cumsum(phi[k], out=phi[k])
            phi[k] /= phi[k, -1]
    return phi


@njit(**numbers.NB)
def _draw_words(cum, z, u, out):
    for t in range(z.shape[0]):  # the first word whose running sum exceeds u
        out[t] = _first_above(cum[z[t]], cum.shape[1], u[t])


def corpus_docs(cum, lengths, d0, d1, alpha, seed, theta=None):
    """Documents d0 .. d1 of the built-in corpus as CSR rows (indptr, word ids, counts):
    document d draws theta_d ~ Dir(alpha), then z ~ theta_d and w ~ phi_z for each of
    its tokens, from its own stream (seed, 2, d), so it is the same whichever worker
    draws it. ``cum``: :func:`corpus_topics` (cumulative); ``theta``: if given, the
    documents' mixtures are written to its rows."""
    K = cum.shape[0]
    lengths = lengths[d0:d1]
    tok = np.concatenate([[0], np.cumsum(lengths)])
    z = np.empty(int(tok[-1]), np.int64)
    u = np.empty(int(tok[-1]))
    prior = np.full(K, alpha)
    for i, d in enumerate(range(d0, d1)):
        rng = np.random.default_rng([seed, 2, d])
        th = rng.dirichlet(prior)
        if theta is not None:
            theta[i] = th
        ct = np.cumsum(th)
        ct /= ct[-1]
        a, b = tok[i], tok[i + 1]
        z[a:b] = np.minimum(np.searchsorted(ct, rng.random(b - a), side="right"), K - 1)
        u[a:b] = rng.random(b - a)
    w = np.empty(z.shape[0], np.int64)
    _draw_words(cum, z, u, w)
    del z, u
    doc = np.repeat(np.arange(d1 - d0, dtype=np.int64), lengths)
    return _rows([doc, w, None], 0, d1 - d0)


def corpus_part(n_docs, n_words, doc_length, n_topics, alpha, beta, seed, peers=None):
    """This worker's documents of the built-in corpus (a :class:`Part`): contiguous
    documents balanced by tokens, drawn by the worker itself (see corpus_docs)."""
    peers = peers or Peers()
    check_corpus_size(n_docs, n_words, doc_length, n_topics)
    lengths = corpus_lengths(n_docs, doc_length, seed)
    if peers.size > n_docs:
        refuse(peers, f"{peers.size} workers for {n_docs} documents: each worker needs "
               "documents")
    cuts = split_balanced(lengths, peers.size)
    d0, d1 = int(cuts[peers.rank]), int(cuts[peers.rank + 1])
    cum = corpus_topics(n_words, n_topics, beta, seed, cumulative=True)
    indptr, indices, counts, sums = corpus_docs(cum, lengths, d0, d1, alpha, seed)
    del cum
    nnz = sum(peers.allgather(int(indices.shape[0])))
    return Part(d0, indptr, indices, counts, n_docs, n_words, int(lengths.sum()), nnz, None,
                sums)


def make_corpus(n_docs=1000, n_words=1000, doc_length=100, n_topics=10, alpha=0.1,
                beta=0.05, seed=0):
    """The built-in corpus, drawn from the LDA generative process: topics
    phi_k ~ Dir(beta), theta_d ~ Dir(alpha), length ~ Poisson(doc_length) (at least 1),
    then z ~ theta_d, w ~ phi_z for every token. Returns ``(X, phi, theta)``;
    deterministic in ``seed``, and the documents the workers of a run draw themselves
    (:func:`corpus_part`). Refuses a corpus that would not fit in memory."""
    check_corpus_size(n_docs, n_words, doc_length, n_topics)
    phi = corpus_topics(n_words, n_topics, beta, seed)
    cum = np.cumsum(phi, axis=1)
    cum /= cum[:, -1:]
    theta = np.empty((n_docs, n_topics))
    lengths = corpus_lengths(n_docs, doc_length, seed)
    indptr, indices, counts, _ = corpus_docs(cum, lengths, 0, n_docs, alpha, seed, theta)
    X = sp.csr_matrix((counts, indices, indptr), shape=(n_docs, n_words))
    return X, phi, theta
