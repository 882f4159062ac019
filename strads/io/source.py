"""Opening an input file, and each worker's part of its lines (docs/architecture.md)."""
import gzip
import mmap
import os
import re
import threading
import zlib

import numpy as np

from ..errors import DataError
from . import memory

BLOCK = 16 << 20  # bytes of whole lines parsed at a time
SNIFF = 1 << 16  # bytes looked at for foreign formats and binary data
_PIECE = 1 << 16  # gzip: decompressed bytes read at a time
BOM = b"\xef\xbb\xbf"
GZIP = b"\x1f\x8b"
READ_ERRORS = (OSError, EOFError, zlib.error)  # gzip: corrupt or truncated
# (first bytes, or a pattern they match, what the file is, its name as a compression or
# archive); bzip2: its level and its first block's (or the end's) magic after "BZh"
FOREIGN = ((b"\x93NUMPY", "a NumPy .npy file", None), (b"PK\x03\x04", "a zip archive", "zip"),
           (re.compile(rb"BZh[1-9](1AY&SY|\x17rE8P\x90)"), "bzip2-compressed", "bzip2"),
           (b"\xfd7zXZ\x00", "xz-compressed", "xz"),
           (b"\x28\xb5\x2f\xfd", "zstd-compressed", "zstd"),
           (b"7z\xbc\xaf\x27\x1c", "a 7z archive", "7z"),
           (b"\x89HDF\r\n\x1a\n", "an HDF5 file", None),
           (b"\xff\xfe", "UTF-16 text", None), (b"\xfe\xff", "UTF-16 text", None))
# The refusals' words (a reader may keep its own: ``Text(words=...)``); {where}: the
# path, with the line when one is known.
WORDS = {
    "missing": "{path}: no such file",
    "directory": "{path}: is a directory, not a {what}",
    "special": "{path}: not a regular file",
    "unreadable": "{path}: cannot read ({e})",
    "empty": "{path}: empty file",
    "foreign": "{path}: {name}{inside}, not {kind}; {hint}",
    "twice": "{path}: gzip-compressed twice; decompress it once",
    "nul": "{where}: binary data (a NUL byte), not a text {what}",
    "corrupt": "{where}: corrupt gzip data ({e})",
    "lone_cr": "{path}: lines end with a lone carriage return (\\r, classic Mac OS); this "
               "{what} needs \\n or \\r\\n line ends (convert it: tr '\\r' '\\n')",
    "packed_only": False,  # refuse only compressed formats and archives
}


class Text:
    """A checked input file: ``gz`` (gzip data), ``bom`` (the length of a byte order
    mark), ``head`` (its first 64 KiB of text, decompressed, after the mark). ``what``
    names the file in messages (``file``, ``rating file``), ``kind`` its content (``a
    text file``, ``LIBSVM text``); ``binary``: no check of the content."""

    def __init__(self, path, what="file", kind=None, words=None, binary=False):
        self.path = path = os.fspath(path)
        self.what, self.kind = what, kind or f"a text {what}"
        self.words = dict(WORDS, **(words or {}))
        if not os.path.exists(path):
            self.refuse("missing")
        if os.path.isdir(path):
            self.refuse("directory")
        if not os.path.isfile(path):
            self.refuse("special")
        try:
            self.size = os.path.getsize(path)
            with open(path, "rb") as f:
                self.gz = f.read(2) == GZIP
        except OSError as e:
            self.refuse("unreadable", e=e.strerror or e)
        if self.size == 0:
            self.refuse("empty")
        try:
            with self.open() as f:
                head = f.read(SNIFF + len(BOM) + 1)
        except READ_ERRORS as e:
            self.refuse("corrupt", e=e)
        self.bom = len(BOM) if head.startswith(BOM) else 0
        self.head = head[self.bom:self.bom + SNIFF]
        self._next = head[self.bom + SNIFF:]  # the byte after the head (a \r's \n?)
        if binary:
            return
        for magic, name, packed in FOREIGN:
            if (magic.match(self.head) if isinstance(magic, re.Pattern) else
                    self.head.startswith(magic)) and (packed or not self.words["packed_only"]):
                self.refuse("foreign", name=name, short=packed,
                            inside=" inside the gzip data" if self.gz else "",
                            hint="save it as UTF-8" if "UTF" in name else
                            "only plain or gzip-compressed text is read")
        if self.gz and self.head.startswith(GZIP):
            self.refuse("twice")
        nul = self.head.find(b"\0")
        if nul >= 0:
            self.refuse("nul", line=self.head.count(b"\n", 0, nul) + 1)

    def newlines(self):
        """Refuse a text whose first 64 KiB hold a \\r but no \\n (lines ending at \\n)."""
        if b"\r" in self.head and b"\n" not in self.head + self._next:
            self.refuse("lone_cr")
        return self

    def refuse(self, word, line=None, **kw):
        """Raise the refusal ``word`` (its ``line``: the error's ``line`` too)."""
        where = self.path if line is None else f"{self.path}:{line}"
        err = DataError(self.words[word].format(path=self.path, what=self.what,
                                                kind=self.kind, where=where, **kw))
        err.line = line
        raise err from None

    def open(self):
        """The file's bytes as a stream (decompressed), from its first byte."""
        return gzip.open(self.path, "rb") if self.gz else open(self.path, "rb")

    def map(self):
        """The whole text as a read-only uint8 array (from byte ``self.bom``): the file
        memory-mapped, or decompressed (refused beyond this machine's memory)."""
        if not self.gz:
            try:
                return np.asarray(np.memmap(self.path, dtype=np.uint8, mode="r"))
            except (OSError, ValueError):
                buf = np.fromfile(self.path, dtype=np.uint8)
                buf.flags.writeable = False
                return buf
        limit = memory.physical_memory() or 1 << 62
        with open(self.path, "rb") as f:  # ISIZE: the length mod 2^32 (a hint only)
            f.seek(max(self.size - 4, 0))
            hint = int.from_bytes(f.read(4), "little")
        cap = min(max(hint, 2 * self.size, 1 << 16), 1032 * self.size + (1 << 16))  # < 1032x
        try:
            with self.open() as f:
                out, n = np.empty(min(cap, limit + 1), dtype=np.uint8), 0
                while True:
                    if n == out.shape[0]:
                        more = f.read(1)
                        if not more:
                            break
                        if n + 1 > limit:
                            raise DataError(f"{self.path}: decompresses to more than "
                                            f"{memory.physical_words(limit)}")
                        grown = np.empty(min(2 * n + 1, limit + 1), dtype=np.uint8)
                        grown[:n] = out[:n]
                        grown[n] = more[0]
                        out, n = grown, n + 1
                        continue
                    k = f.readinto(memoryview(out)[n:])
                    if not k:
                        break
                    n += k
        except READ_ERRORS as e:
            self.refuse("corrupt", e=e)
        except MemoryError:  # (growing by doubling: the old and new buffers at once)
            raise DataError(f"{self.path}: decompresses to more than this process can hold "
                            f"(out of memory after {memory.fmt_bytes(n)}; "
                            f"{memory.physical_words(limit)})") from None
        out = out[:n].copy() if out.shape[0] > 2 * n + (1 << 20) else out[:n]
        out.flags.writeable = False  # as a memory map: one compiled variant of the parsers
        return out

    def lines(self, universal=False, cap=None):
        """(line number, offset, the line's bytes without its end) past a byte order
        mark, as the file streams; ``cap``: as for blocks."""
        lineno = 0
        for blk in self.blocks(self.bom, universal=universal, cap=cap, size=_PIECE):
            buf, pos = blk.data.tobytes(), 0
            while pos < len(buf):
                e = buf.find(b"\n", pos)
                e, nxt = (len(buf), len(buf) + 1) if e < 0 else (e, e + 1)
                r = buf.find(b"\r", pos, e) if universal else -1
                if r >= 0:
                    e, nxt = r, (r + 2 if r + 1 < len(buf) and buf[r + 1] == 10 else r + 1)
                lineno += 1
                yield lineno, blk.offset + pos, buf[pos:e]
                pos = nxt

    def blocks(self, begin, part=0, n_parts=1, universal=False, cap=None, size=None):
        """This worker's :class:`Block` s of the lines from byte ``begin`` of the text: a
        plain file's :func:`line_range`, in slices of the memory map; a gzip stream in
        full, block c this worker's (``keep``) when c % n_parts == part. A corrupt stream
        raises after the whole lines before it; ``cap``: a longer line is given cut."""
        size = size or BLOCK
        if not self.gz:
            buf = self.map()
            a, hi = line_range(buf, part, n_parts, begin, universal=universal)
            while a < hi:
                most = hi if cap is None else min(hi, a + size + cap)
                b = hi if hi - a <= size else _next_start(buf, a + size, most, universal)
                yield Block(buf[a:b], a, True, None, buf, universal)
                forget(buf, a, b)
                a = b
            return
        nl, got, c, pending, pieces = 0, 0, 0, b"", []
        with self.open() as f:
            try:
                head = f.read(begin)  # the header: a few lines
                got = len(head)
                nl = _count_ends(np.frombuffer(head, np.uint8), universal)
                while True:
                    pieces, have, more = [pending], len(pending), True
                    while have < size and more:
                        more = f.read(_PIECE)
                        pieces.append(more)
                        have += len(more)
                    buf = b"".join(pieces)
                    if not buf:
                        return
                    end = len(buf) if not more else _last_end(buf, universal)
                    if end == 0:  # no line end yet
                        if cap is None or len(buf) <= cap:
                            pending, size = buf, 2 * size  # one long line: read on
                            continue
                        end = len(buf)
                    data, pending = np.frombuffer(buf, np.uint8)[:end], buf[end:]
                    yield Block(data, got, c % n_parts == part, nl, None, universal)
                    nl += _count_ends(data, universal)
                    got += end
                    c += 1
                    if not more and not pending:
                        return
            except READ_ERRORS as e:
                done = b"".join(pieces)
                end = _last_end(done, universal)
                if end:
                    yield Block(np.frombuffer(done, np.uint8)[:end], got, c % n_parts == part,
                                nl, None, universal)
                nl += _count_ends(np.frombuffer(done, np.uint8), universal)
                self.refuse("corrupt", line=nl + 1, e=e)


CHECKSUM_BLOCK = 1 << 20  # bytes of each CRC-32 of a file's checksum
_sums, _sums_lock = {}, threading.Lock()


def checksum(path):
    """A file's content in 32 bits: the CRC-32 of its length and of the CRC-32s of its
    1 MiB blocks (the bytes as stored); computed once per process for a file as it is."""
    st = os.stat(path)
    key = (os.path.abspath(path), st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)
    with _sums_lock:
        if key not in _sums:
            crcs, buf = [], bytearray(CHECKSUM_BLOCK)
            with open(path, "rb") as f:
                while True:
                    n = f.readinto(buf)
                    if not n:
                        break
                    crcs.append(zlib.crc32(memoryview(buf)[:n]))
            _sums[key] = zlib.crc32(np.array(crcs, "<u4").tobytes(),
                                    zlib.crc32(st.st_size.to_bytes(8, "little")))
        return _sums[key]


class Content:
    """The input files a shard names (None: none), standing for their content (the
    :func:`checksum`, taken only with checkpoints) in the shard's digest, which a resume
    checks (:func:`strads.checkpoint.digest`)."""

    def __init__(self, *paths):
        self.paths = [os.path.abspath(p) for p in paths if p is not None]

    def strads_digest(self):
        return [checksum(p) if os.path.isfile(p) else None for p in self.paths]


class Name(str):
    """An input file's name as given (messages name it so), left out of a shard's digest:
    a resume checks the file by its content (:class:`Content`), so the same file named
    another way (a relative path, a link) resumes."""
    __slots__ = ()

    def strads_digest(self):
        return ()


class Block:
    """Whole lines: ``data`` (uint8) from byte ``offset`` of the text; ``keep``: this
    worker parses it; ``nl0``: the line ends before it (gzip, counted as it streamed;
    None: counted in ``src``, the text, when needed)."""

    __slots__ = ("data", "offset", "keep", "nl0", "src", "universal")

    def __init__(self, data, offset, keep, nl0, src, universal):
        self.data, self.offset, self.keep, self.nl0 = data, offset, keep, nl0
        self.src, self.universal = src, universal

    def line(self, o):
        """The 1-based line number of byte ``o`` of the block."""
        if self.nl0 is None:
            return line_number(self.src, self.offset + o, self.universal)
        d = self.data
        return self.nl0 + _count_ends(d[:o], self.universal,
                                      int(d[o]) if o < d.shape[0] else -1) + 1


def forget(buf, a, b):
    """The pages of bytes [a, b) of ``buf``, a memory-mapped text or a slice of one, leave
    this process's memory (the page cache keeps them); else nothing."""
    owner = buf
    while isinstance(owner, np.ndarray) and not isinstance(owner, np.memmap):
        owner = owner.base
    mm = getattr(owner, "_mmap", None)
    if mm is not None and hasattr(mm, "madvise"):
        at, page = buf.ctypes.data - owner.ctypes.data, mmap.PAGESIZE
        lo, hi = (at + a) // page * page, (at + b) // page * page
        if hi > lo:
            mm.madvise(mmap.MADV_DONTNEED, lo, hi - lo)


def _last_end(buf, universal):
    """The end of the last complete line of bytes ``buf`` (0: none): after its last
    \\n, or (``universal``) after a \\r that is not its last byte (a \\n may follow)."""
    k = buf.rfind(b"\n") + 1
    if universal:
        k = max(k, buf.rfind(b"\r", 0, len(buf) - 1) + 1)
    return k


def _count_ends(b, universal, after=-1):
    """Line ends in uint8 array ``b`` (\\n; with ``universal`` a \\r not followed by
    \\n too; ``after``: the byte after b, -1 for none)."""
    n = int(np.count_nonzero(b == 10))
    if universal and b.shape[0]:
        cr = b == 13
        n += int(np.count_nonzero(cr)) - int(np.count_nonzero(cr[:-1] & (b[1:] == 10)))
        n -= int(b[-1] == 13 and after == 10)
    return n


def count_lines(b, universal):
    """Lines starting in uint8 array ``b``: its line ends, and an unterminated last one."""
    n = _count_ends(b, universal)
    return n + int(b.shape[0] > 0 and not (b[-1] == 10 or (universal and b[-1] == 13)))


def _as_array(src):
    if not isinstance(src, (str, os.PathLike)):
        return src
    if os.path.getsize(src) == 0:
        return np.zeros(0, np.uint8)
    return np.asarray(np.memmap(src, dtype=np.uint8, mode="r"))


def _next_start(b, pos, end, universal=False):
    """The first line start at or after ``pos`` (> 0) in array ``b`` (pos itself when a
    line ends just before it), at most ``end``."""
    k, step = pos - 1, 1 << 12
    while k < end:
        w = b[k:min(k + step, end)]
        hits = np.flatnonzero((w == 10) | (w == 13)) if universal else np.flatnonzero(w == 10)
        for h in hits.tolist():
            j = k + h
            if b[j] == 13 and j + 1 < b.shape[0] and b[j + 1] == 10:
                continue  # \r\n ends at the \n
            return min(j + 1, end)
        k += w.shape[0]
        step *= 2
    return end


def line_range(src, part, n_parts, begin=0, universal=False):
    """``(lo, hi)``: the bytes of part ``part`` of ``n_parts`` of the lines of ``src``
    (a path, or the text as a uint8 array) from byte ``begin``. ``lo`` is a line start
    (or the end), ``hi`` the next part's ``lo``: the parts are contiguous, possibly
    empty, and hold every line once."""
    if not 0 <= part < n_parts:
        raise ValueError(f"part {part} of {n_parts}")
    b = _as_array(src)
    end = b.shape[0]
    span = max(end - begin, 0)
    lo, hi = (c if c <= begin else _next_start(b, c, end, universal)
              for c in (begin + span * k // n_parts for k in (part, part + 1)))
    return lo, max(lo, hi)


def line_number(src, offset, universal=False):
    """The 1-based number of the line holding byte ``offset`` of ``src`` (a path, or
    the text as a uint8 array); for messages: it counts the line ends up to there."""
    b = _as_array(src)
    n, step = 1, 1 << 24
    for a in range(0, min(offset, b.shape[0]), step):
        z = min(a + step, offset)
        n += _count_ends(b[a:z], universal, int(b[z]) if z < b.shape[0] else -1)
    return n


def line_at(buf, ls, cap=None, universal=False):
    """The line of array ``buf`` starting at byte ``ls``, without its end (\\n, or with
    ``universal`` a lone \\r too), at most ``cap`` bytes."""
    n = buf.shape[0] if cap is None else min(buf.shape[0], ls + cap)
    e = _next_start(buf, ls + 1, n, universal)
    if e > ls and (buf[e - 1] == 10 or (universal and buf[e - 1] == 13)):
        e -= 1
    return buf[ls:e].tobytes()
