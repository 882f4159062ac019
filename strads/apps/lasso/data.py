"""Lasso data: readers (LIBSVM/svmlight, MatrixMarket, .npz) and the built-in problem.

Every reader returns ``(X, y)`` with X a CSC matrix (sorted indices) or a Fortran-ordered
dense array, both float64, and raises :class:`strads.DataError` naming the file, the line
and the problem on anything malformed, before any work starts.

Text files (LIBSVM, MatrixMarket, a text target) may start with a UTF-8 byte order mark
and may be gzip-compressed (detected by their first bytes, whatever their name); both are
read exactly as the plain file. They are parsed by numba over the raw bytes in two passes:
the first validates every line and counts (rows, non-zeros per column), so that sizes are
checked against the machine's memory before anything large is allocated, the second
fills the CSC arrays directly. Numbers are converted exactly as Python's ``float()`` does
(correctly rounded: Clinger's fast path, else Eisel-Lemire, else ``float()`` itself for
the rare token neither settles). On the first bad line the Python reference parser of
that line builds the message.
"""
import math
import os
import re

import numpy as np
import scipy.sparse as sp
from numba import njit

from ...engine import DataError

_nb = dict(cache=True, nogil=True)

# -- sizes: refuse what cannot fit, before allocating it ----------------------------------
# What a problem costs once loaded and solved, per unit, in bytes (measured on the solver:
# 5e7 empty features took 2.1 GB of peak RSS, 42 bytes each):
PER_FEATURE = 64  # indptr, then the solver's coefficients, squared norms, norms,
#                   priorities, screening flags and a full round's gradient (float64 each)
PER_NONZERO = 24  # a CSC entry (8-byte value, 4- or 8-byte row index) and a worker's copy
PER_SAMPLE = 32  # y, the workers' residuals and targets
PER_DENSE = 16  # a dense entry and a worker's copy of it
_HARD_MAX = 1 << 62  # indices at or beyond this are not even parsed exactly


def physical_memory():
    """Bytes of physical memory (os.sysconf), or None where the system does not say."""
    try:
        return int(os.sysconf("SC_PAGE_SIZE")) * int(os.sysconf("SC_PHYS_PAGES"))
    except (ValueError, OSError, AttributeError):
        return None


def _gb(n):
    if n >= 2**80:  # beyond what a float formats well (and 10^400 does not fit one)
        s = str(n // 2**30)
        return f"{s[0]}.{s[1:3]}e+{len(s) - 1} GiB"
    return f"{n / 2**30:.3g} GiB" if n >= 2**28 else f"{n / 2**20:.3g} MiB"


def _max_features():
    mem = physical_memory()
    return _HARD_MAX if mem is None else max(mem // PER_FEATURE, 1)


def _feature_limit_msg(j):
    mem = physical_memory()
    return (f"feature index {j} is too large: {j:,} features would need about "
            f"{_gb(j * PER_FEATURE)} of memory (the solver keeps {PER_FEATURE} bytes per "
            f"feature), more than this machine's physical memory ({_gb(mem or 0)})")


def check_size(name, n_samples, n_features, nnz=None, extra=0, lead=""):
    """Refuse a problem whose solve cannot fit in physical memory: sparse (``nnz``
    non-zeros) or dense (``nnz`` None); ``extra`` bytes already held (a decompressed
    file). Python integers throughout, so absurd sizes cannot overflow."""
    n_samples, n_features = int(n_samples), int(n_features)
    if nnz is None:
        need = n_samples * n_features * PER_DENSE + n_features * PER_FEATURE
        what = f"a dense {n_samples:,} x {n_features:,} matrix"
    else:
        need = (int(nnz) * PER_NONZERO + n_features * PER_FEATURE
                + n_samples * PER_SAMPLE)
        what = f"{n_samples:,} samples x {n_features:,} features with {int(nnz):,} non-zeros"
    need += extra
    mem = physical_memory()
    if mem is not None and need > mem:
        raise DataError(f"{name}: {lead}{what}, which would need about {_gb(need)} of memory "
                        f"(the matrix, the workers' copies and the solver's per-feature "
                        f"arrays), more than this machine's physical memory ({_gb(mem)})")


# -- raw bytes: plain (memory-mapped) or gzip, and what a text file must not be -----------
_BOM = b"\xef\xbb\xbf"
_MAGIC = [  # (first bytes, what the file is): refused as text with one line
    (b"\x93NUMPY", "a NumPy .npy file"),
    (b"PK\x03\x04", "a zip archive (an .npz file?)"),
    (b"BZh", "bzip2-compressed (only gzip is read: decompress it first)"),
    (b"\xfd7zXZ\x00", "xz-compressed (only gzip is read: decompress it first)"),
    (b"\x28\xb5\x2f\xfd", "zstd-compressed (only gzip is read: decompress it first)"),
    (b"\x89HDF\r\n\x1a\n", "an HDF5 file"),
    (b"\xff\xfe", "UTF-16 text (save it as UTF-8 or ASCII)"),
    (b"\xfe\xff", "UTF-16 text (save it as UTF-8 or ASCII)"),
]


def _check_path(path):
    if not os.path.exists(path):
        raise DataError(f"{path}: no such file")
    if os.path.isdir(path):
        raise DataError(f"{path}: is a directory, not a file")
    if not os.path.isfile(path):
        raise DataError(f"{path}: not a regular file")
    if os.path.getsize(path) == 0:
        raise DataError(f"{path}: empty file")


def _gunzip(path):
    """The decompressed bytes of a gzip file, as a uint8 array, refused with one line if
    corrupt, truncated, or larger than the machine's memory."""
    import gzip
    import zlib

    limit = physical_memory() or _HARD_MAX
    size = os.path.getsize(path)
    with open(path, "rb") as f:  # ISIZE, the length mod 2^32 (a hint: members, > 4 GiB)
        f.seek(max(size - 4, 0))
        hint = int.from_bytes(f.read(4), "little")
    cap = min(max(hint, 2 * size, 1 << 16), 1032 * size + (1 << 16))  # deflate: < 1032x
    try:
        with gzip.open(path, "rb") as f:
            out, n = np.empty(min(cap, limit + 1), dtype=np.uint8), 0
            while True:
                if n == out.shape[0]:
                    more = f.read(1)
                    if not more:
                        break
                    if n + 1 > limit:
                        raise DataError(f"{path}: decompresses to more than this machine's "
                                        f"physical memory ({_gb(limit)})")
                    grown = np.empty(min(2 * n + 1, limit + 1), dtype=np.uint8)
                    grown[:n] = out[:n]
                    grown[n] = more[0]
                    out, n = grown, n + 1
                    continue
                k = f.readinto(memoryview(out)[n:])
                if not k:
                    break
                n += k
    except (OSError, EOFError, zlib.error) as e:  # BadGzipFile is an OSError
        raise DataError(f"{path}: not a valid gzip file: {e}") from None
    out = out[:n].copy() if out.shape[0] > 2 * n + (1 << 20) else out[:n]
    out.flags.writeable = False  # as a memory map: one compiled variant of the parsers
    return out


def read_bytes(path):
    """``(buf, start, gzipped)``: the file's bytes as a read-only uint8 array (memory
    mapped, or decompressed if it is gzip data) and the offset after a UTF-8 BOM."""
    _check_path(path)
    try:
        with open(path, "rb") as f:
            head = f.read(2)
    except OSError as e:
        raise DataError(f"{path}: cannot read: {e.strerror or e}") from None
    gz = head == b"\x1f\x8b"
    if gz:
        buf = _gunzip(path)
        if buf.shape[0] == 0:
            raise DataError(f"{path}: empty file (after gzip decompression)")
    else:
        try:
            buf = np.asarray(np.memmap(path, dtype=np.uint8, mode="r"))
        except (OSError, ValueError):
            buf = np.fromfile(path, dtype=np.uint8)
            buf.flags.writeable = False
    start = 3 if buf[:3].tobytes() == _BOM else 0
    return buf, start, gz


def _refuse_binary(path, buf, start, kind):
    head = buf[start:start + 16].tobytes()
    for magic, what in _MAGIC:
        if head.startswith(magic):
            raise DataError(f"{path}: {what}, not {kind} text")
    window = buf[start:start + (1 << 16)]  # no text holds a NUL byte
    nul = np.flatnonzero(window == 0)
    if nul.size:
        line = 1 + int(np.count_nonzero(window[:nul[0]] == 10))
        raise DataError(f"{path}:{line}: binary data (byte 0x00), not a text file")


def _line_at(buf, ls, cap=None):
    """Line starting at byte ``ls``, without its newline (at most ``cap`` bytes)."""
    n = buf.shape[0] if cap is None else min(buf.shape[0], ls + cap)
    stop, chunk = ls, 256  # short lines are the rule: look a little further each time
    while stop < n:
        hit = np.flatnonzero(buf[stop:min(stop + chunk, n)] == 10)
        if hit.size:
            return buf[ls:stop + hit[0]].tobytes()
        stop += chunk
        chunk *= 2
    return buf[ls:n].tobytes()


def _short(tok):
    s = tok.decode(errors="replace")
    return s if len(s) <= 60 else s[:57] + "..."


# -- exact decimal to float64 -------------------------------------------------------------
def _pow10_table():
    """128-bit mantissas of 10^q, q in [-348, 347], rounded down (as Go's strconv)."""
    hi, lo = [], []
    for q in range(-348, 348):
        if q >= 0:
            v = 10 ** q
            bl = v.bit_length()
            m = v << (128 - bl) if bl <= 128 else v >> (bl - 128)
        else:
            d = 10 ** -q
            m = (1 << (d.bit_length() + 127)) // d
        hi.append(m >> 64)
        lo.append(m & ((1 << 64) - 1))
    return np.array(hi, dtype=np.uint64), np.array(lo, dtype=np.uint64)


_P_HI, _P_LO = _pow10_table()
_P10 = np.array([10.0 ** k for k in range(23)])  # exact in float64
_I10 = np.array([10 ** k for k in range(20)], dtype=np.uint64)
# Decimals at or above 2^1024 - 2^970 round to inf (ties to even): its 309 digits
_OVF = np.frombuffer(str(2 ** 1024 - 2 ** 970).encode(), dtype=np.uint8) - 48
_U32 = np.uint64(0xFFFFFFFF)
_S32 = np.uint64(32)


@njit(**_nb)
def _mul128(a, b):
    a_lo, a_hi = a & _U32, a >> _S32
    b_lo, b_hi = b & _U32, b >> _S32
    p0, p1, p2, p3 = a_lo * b_lo, a_lo * b_hi, a_hi * b_lo, a_hi * b_hi
    mid = (p0 >> _S32) + (p1 & _U32) + (p2 & _U32)
    return p3 + (p1 >> _S32) + (p2 >> _S32) + (mid >> _S32), (p0 & _U32) | (mid << _S32)


@njit(**_nb)
def _clz(x):
    n = 0
    for s in (32, 16, 8, 4, 2, 1):
        if x >> np.uint64(64 - s) == np.uint64(0):
            n += s
            x = x << np.uint64(s)
    return n


@njit(**_nb)
def _eisel_lemire(man, exp10):
    """Correctly rounded man * 10^exp10 (man > 0) as (ok, value); ok False when the
    128-bit approximation cannot decide, or the result is subnormal or overflows."""
    if exp10 < -348 or exp10 > 347:
        return False, 0.0
    clz = _clz(man)
    man = man << np.uint64(clz)
    exp2 = ((217706 * exp10) >> 16) + 64 + 1023 - clz
    k = exp10 + 348
    x_hi, x_lo = _mul128(man, _P_HI[k])
    m9 = np.uint64(0x1FF)
    if x_hi & m9 == m9 and x_lo + man < man:
        y_hi, y_lo = _mul128(man, _P_LO[k])
        merged_hi, merged_lo = x_hi, x_lo + y_hi
        if merged_lo < x_lo:
            merged_hi += np.uint64(1)
        if (merged_hi & m9 == m9 and merged_lo + np.uint64(1) == np.uint64(0)
                and y_lo + man < man):
            return False, 0.0
        x_hi, x_lo = merged_hi, merged_lo
    msb = x_hi >> np.uint64(63)
    mant = x_hi >> (msb + np.uint64(9))
    exp2 -= 1 - int(msb)
    if x_lo == np.uint64(0) and x_hi & m9 == np.uint64(0) and mant & np.uint64(3) == 1:
        return False, 0.0
    mant += mant & np.uint64(1)
    mant = mant >> np.uint64(1)
    if mant >> np.uint64(53) > np.uint64(0):
        mant = mant >> np.uint64(1)
        exp2 += 1
    if exp2 <= 0 or exp2 >= 0x7FF:
        return False, 0.0
    return True, math.ldexp(float(mant), exp2 - 1075)


@njit(**_nb)
def _to_float(b, s, e):
    """b[s:e], already validated by :func:`_scan_float` as a finite decimal, as
    (ok, value) exactly equal to Python's float(); ok False: ask float() itself."""
    i = s
    neg = False
    if b[i] == 45:
        neg = True
        i += 1
    elif b[i] == 43:
        i += 1
    man = np.uint64(0)
    nd = 0
    dp = 0
    trunc = False
    while i < e and 48 <= b[i] <= 57:
        d = b[i] - 48
        if nd < 19:
            if nd > 0 or d != 0:
                man = man * np.uint64(10) + np.uint64(d)
                nd += 1
        else:
            dp += 1
            if d != 0:
                trunc = True
        i += 1
    if i < e and b[i] == 46:
        i += 1
        while i < e and 48 <= b[i] <= 57:
            d = b[i] - 48
            if nd < 19:
                if nd > 0 or d != 0:
                    man = man * np.uint64(10) + np.uint64(d)
                    nd += 1
                dp -= 1
            elif d != 0:
                trunc = True
            i += 1
    ev = 0
    if i < e:  # the exponent (validated)
        i += 1
        eneg = False
        if b[i] == 45 or b[i] == 43:
            eneg = b[i] == 45
            i += 1
        while i < e:
            if ev < 100_000_000_000_000_000:
                ev = ev * 10 + (b[i] - 48)
            i += 1
        if eneg:
            ev = -ev
    exp10 = ev + dp
    if man == np.uint64(0):
        return True, -0.0 if neg else 0.0
    if not trunc:  # trailing zeros ("8105732244038507.0"): a smaller exact significand
        while man % np.uint64(10) == np.uint64(0):
            man = man // np.uint64(10)
            exp10 += 1
    ok, v = False, 0.0
    if not trunc and man <= np.uint64(1 << 53) and -22 <= exp10 <= 22:
        # Clinger: both operands exact, so one correctly rounded operation
        ok = True
        v = float(man) * _P10[exp10] if exp10 >= 0 else float(man) / _P10[-exp10]
    elif (not trunc and 22 < exp10 <= 22 + 15
          and man <= np.uint64(1 << 53) // _I10[exp10 - 22]):
        ok = True
        v = float(man * _I10[exp10 - 22]) * _P10[22]
    else:  # digits beyond 19 dropped (trunc): exact if man and man + 1 round alike
        for t in range(2 if trunc else 1):
            ok_t, v_t = _eisel_lemire(man + np.uint64(t), exp10)
            if t == 0:
                ok, v = ok_t, v_t
            else:
                ok = ok and ok_t and v_t == v
    return ok, -v if neg else v


@njit(**_nb)
def _is_digit(c):
    return 48 <= c <= 57


@njit(**_nb)
def _word(b, i, e):
    """b[i:e] is inf, infinity or nan, in any case."""
    n = e - i
    c0 = b[i] | 32
    if c0 == 110:
        return n == 3 and b[i + 1] | 32 == 97 and b[i + 2] | 32 == 110
    if n != 3 and n != 8:
        return False
    if not (b[i + 1] | 32 == 110 and b[i + 2] | 32 == 102):
        return False
    if n == 3:
        return True
    return (b[i + 3] | 32 == 105 and b[i + 4] | 32 == 110 and b[i + 5] | 32 == 105
            and b[i + 6] | 32 == 116 and b[i + 7] | 32 == 121)


@njit(**_nb)
def _scan_float(b, s, e):
    """b[s:e] under Python's float() grammar (no underscores): -1 not a number, 0 a
    finite float64, 1 not finite (inf, nan, or a decimal that rounds to inf)."""
    i = s
    if i < e and (b[i] == 43 or b[i] == 45):
        i += 1
    if i >= e:
        return -1
    c = b[i] | 32
    if c == 105 or c == 110:
        return 1 if _word(b, i, e) else -1
    i0 = i
    while i < e and _is_digit(b[i]):
        i += 1
    i1 = i
    f0 = i
    f1 = i
    if i < e and b[i] == 46:
        i += 1
        f0 = i
        while i < e and _is_digit(b[i]):
            i += 1
        f1 = i
    if i1 == i0 and f1 == f0:
        return -1
    ev = 0
    if i < e and b[i] | 32 == 101:
        i += 1
        eneg = False
        if i < e and (b[i] == 43 or b[i] == 45):
            eneg = b[i] == 45
            i += 1
        if i >= e:
            return -1
        while i < e and _is_digit(b[i]):
            if ev < 100_000_000_000_000_000:
                ev = ev * 10 + (b[i] - 48)
            i += 1
        if eneg:
            ev = -ev
    if i != e:
        return -1
    # the decimal exponent of the leading significant digit: below 308 the value is finite
    k = i0
    while k < i1 and b[k] == 48:
        k += 1
    if k < i1:
        lead = i1 - k - 1 + ev
    else:
        k = f0
        while k < f1 and b[k] == 48:
            k += 1
        if k == f1:
            return 0  # zero
        lead = -(k - f0 + 1) + ev
    if lead < 308:
        return 0
    if lead > 308:
        return 1
    j = k
    for t in range(_OVF.shape[0]):
        if j == i1:
            j = f0
        d = 0
        if j < f1 or j < i1:
            d = b[j] - 48
            j += 1
        if d != _OVF[t]:
            return 1 if d > _OVF[t] else 0
    return 1


@njit(**_nb)
def _scan_int(b, s, e):
    """b[s:e] under Python's int() grammar (no underscores): (ok, value), the value
    saturated at +-2^62."""
    i = s
    neg = False
    if i < e and (b[i] == 43 or b[i] == 45):
        neg = b[i] == 45
        i += 1
    if i >= e:
        return False, 0
    v = 0
    while i < e:
        c = b[i]
        if not _is_digit(c):
            return False, 0
        if v < 1 << 62:
            v = min(v * 10 + (c - 48), 1 << 62)
        i += 1
    return True, -v if neg else v


@njit(**_nb)
def _is_space(c):
    return c == 32 or 9 <= c <= 13


@njit(**_nb)
def _line_end(b, pos, n):
    """(end, comment start or end, True if the line holds a control byte)."""
    i = pos
    ce = -1
    bad = False
    while i < n:
        c = b[i]
        if c == 10:
            break
        if c < 32:
            if c < 9 or c > 13:
                bad = True
        elif c == 35 and ce < 0:
            ce = i
        i += 1
    return i, (i if ce < 0 else ce), bad


# -- LIBSVM / svmlight (and a text target: one number a line) ------------------------------
# The two LIBSVM passes parse each byte once, with the number grammar written out inline:
# calling the token helpers above from here ran at half the speed (numba does not fuse
# them), and this is the hot loop of loading a file.
@njit(**_nb)
def _svm_count(b, start, single, limit, counts):
    """Pass 1: validate every line (as :func:`parse_svm_line`, or
    :func:`parse_target_line` if ``single``) and count. Returns (line of the first bad
    line, or 0, or -1 if a count overflowed the dtype of ``counts``; its first byte;
    rows; non-zeros; max index; its line; min index; per-index counts, ``counts`` grown
    to at least max index + 2 entries)."""
    n = b.shape[0]
    top = np.iinfo(counts.dtype).max
    rows = 0
    nnz = 0
    max_j = -1
    max_line = 0
    min_j = 1 << 62
    line = 1
    ls = start
    i = start
    tok = 0
    last = -1
    bad = False
    while i < n:
        c = b[i]
        if c == 10:
            if tok:
                rows += 1
            tok = 0
            last = -1
            line += 1
            i += 1
            ls = i
            continue
        if c == 32 or 9 <= c <= 13:
            i += 1
            continue
        if c == 35:  # a comment, to the end of the line (control bytes still refused)
            while i < n and b[i] != 10:
                if b[i] < 32 and (b[i] < 9 or b[i] > 13):
                    bad = True
                    break
                i += 1
            if bad:
                break
            continue
        fs = i  # where the number starts
        j = -1
        if tok > 0:
            if single:
                bad = True
                break
            if (c == 113 and i + 2 < n and b[i + 1] == 105 and b[i + 2] == 100
                    and (i + 3 == n or b[i + 3] == 58 or b[i + 3] == 32 or b[i + 3] == 35
                         or 9 <= b[i + 3] <= 13)):
                i += 3  # qid, qid:anything
                while i < n:
                    c = b[i]
                    if c == 32 or 9 <= c <= 13 or c == 35:
                        break
                    if c < 32:
                        bad = True
                        break
                    i += 1
                if bad:
                    break
                continue
            neg = False
            if c == 43 or c == 45:
                neg = c == 45
                i += 1
            ds = i
            v = 0
            while i < n:
                d = b[i] - 48
                if d < 0 or d > 9:
                    break
                if v < 1 << 62:
                    v = min(v * 10 + d, 1 << 62)
                i += 1
            if i == ds or i >= n or b[i] != 58:
                bad = True
                break
            j = -v if neg else v
            if j < 0 or j <= last or j > limit:
                bad = True
                break
            i += 1
            fs = i
        # a number in Python's float() grammar, ending at a delimiter
        if i < n and (b[i] == 43 or b[i] == 45):
            i += 1
        if i >= n or b[i] | 32 == 105 or b[i] | 32 == 110:  # inf, nan: not finite
            bad = True
            break
        i0 = i
        while i < n and 48 <= b[i] <= 57:
            i += 1
        i1 = i
        f0 = i
        f1 = i
        if i < n and b[i] == 46:
            i += 1
            f0 = i
            while i < n and 48 <= b[i] <= 57:
                i += 1
            f1 = i
        if i1 == i0 and f1 == f0:
            bad = True
            break
        ev = 0
        if i < n and b[i] | 32 == 101:
            i += 1
            eneg = False
            if i < n and (b[i] == 43 or b[i] == 45):
                eneg = b[i] == 45
                i += 1
            es = i
            while i < n and 48 <= b[i] <= 57:
                if ev < 100_000_000_000_000_000:
                    ev = ev * 10 + (b[i] - 48)
                i += 1
            if i == es:
                bad = True
                break
            if eneg:
                ev = -ev
        if i < n and not (b[i] == 32 or 9 <= b[i] <= 13 or b[i] == 35):
            bad = True
            break
        # finite unless its leading digit's decimal exponent reaches 308
        k = i0
        while k < i1 and b[k] == 48:
            k += 1
        lead = i1 - k - 1 + ev
        if k == i1:
            k = f0
            while k < f1 and b[k] == 48:
                k += 1
            lead = -(k - f0 + 1) + ev if k < f1 else -1
        if lead >= 308 and _scan_float(b, fs, i) != 0:
            bad = True
            break
        tok += 1
        if j >= 0:
            last = j
            if j + 1 >= counts.shape[0]:  # one spare entry: indptr's last, in place
                grown = np.zeros(min(max(2 * counts.shape[0], j + 2), limit + 2),
                                 dtype=counts.dtype)
                grown[:counts.shape[0]] = counts
                counts = grown
            if counts[j] == top:
                return -1, ls, rows, nnz, max_j, max_line, min_j, counts
            counts[j] += 1
            nnz += 1
            if j > max_j:
                max_j = j
                max_line = line
            if j < min_j:
                min_j = j
    if bad:
        return line, ls, rows, nnz, max_j, max_line, min_j, counts
    if tok:
        rows += 1
    return 0, 0, rows, nnz, max_j, max_line, min_j, counts


@njit(**_nb)
def _svm_fill(b, start, base, ptr, indices, data, labels, fb):
    """Pass 2 over bytes pass 1 accepted: labels, and the CSC entries put in place
    (``ptr[c]``: the next free slot of column c, advanced). The tokens the exact fast
    paths leave to Python's float() go to the rows of ``fb`` (slot, or -1 - row for a
    label; first byte; end), as many as fit; returns how many there are."""
    n = b.shape[0]
    row = 0
    i = start
    tok = 0
    n_fb = 0
    u10 = np.uint64(10)
    while i < n:
        c = b[i]
        if c == 10:
            if tok:
                row += 1
                tok = 0
            i += 1
            continue
        if c == 35:
            while i < n and b[i] != 10:
                i += 1
            continue
        if c == 32 or 9 <= c <= 13:
            i += 1
            continue
        at = -1 - row
        if tok > 0:
            if c == 113:  # qid
                while i < n:
                    c = b[i]
                    if c == 32 or 9 <= c <= 13 or c == 35:
                        break
                    i += 1
                continue
            if c == 43 or c == 45:
                i += 1
            j = 0
            while b[i] != 58:
                j = j * 10 + (b[i] - 48)
                i += 1
            i += 1
            at = ptr[j - base]
            ptr[j - base] = at + 1
            indices[at] = row
        tok += 1
        fs = i
        neg = False
        c = b[i]
        if c == 45:
            neg = True
            i += 1
        elif c == 43:
            i += 1
        man = np.uint64(0)
        nd = 0
        dp = 0
        trunc = False
        while i < n:
            d = b[i] - 48
            if d < 0 or d > 9:
                break
            if nd < 19:
                if nd > 0 or d != 0:
                    man = man * u10 + np.uint64(d)
                    nd += 1
            else:
                dp += 1
                if d != 0:
                    trunc = True
            i += 1
        if i < n and b[i] == 46:
            i += 1
            while i < n:
                d = b[i] - 48
                if d < 0 or d > 9:
                    break
                if nd < 19:
                    if nd > 0 or d != 0:
                        man = man * u10 + np.uint64(d)
                        nd += 1
                    dp -= 1
                elif d != 0:
                    trunc = True
                i += 1
        if i < n and b[i] | 32 == 101:
            i += 1
            eneg = False
            if b[i] == 45 or b[i] == 43:
                eneg = b[i] == 45
                i += 1
            ev = 0
            while i < n:
                d = b[i] - 48
                if d < 0 or d > 9:
                    break
                if ev < 100_000_000_000_000_000:
                    ev = ev * 10 + d
                i += 1
            dp += -ev if eneg else ev
        ok = True
        v = 0.0
        if man != np.uint64(0):
            if not trunc:  # trailing zeros ("2.50"): a smaller exact significand
                while man % u10 == np.uint64(0):
                    man = man // u10
                    dp += 1
            if not trunc and man <= np.uint64(1 << 53) and -22 <= dp <= 22:
                # Clinger: both operands exact, so one correctly rounded operation
                v = float(man) * _P10[dp] if dp >= 0 else float(man) / _P10[-dp]
            else:  # digits beyond 19 dropped (trunc): exact if man and man + 1 agree
                for t in range(2 if trunc else 1):
                    ok_t, v_t = _eisel_lemire(man + np.uint64(t), dp)
                    if t == 0:
                        ok, v = ok_t, v_t
                    else:
                        ok = ok and ok_t and v_t == v
        if neg:
            v = -v
        if at < 0:
            labels[row] = v
        else:
            data[at] = v
        if not ok:
            if n_fb < fb.shape[0]:
                fb[n_fb, 0] = at
                fb[n_fb, 1] = fs
                fb[n_fb, 2] = i
            n_fb += 1
    return n_fb


@njit(**_nb)
def _starts(counts):
    """In place: counts to the start of each column (exclusive prefix sums)."""
    total = 0
    for c in range(counts.shape[0]):
        k = counts[c]
        counts[c] = total
        total += k


@njit(**_nb)
def _ends_to_starts(ends):
    for c in range(ends.shape[0] - 1, 0, -1):
        ends[c] = ends[c - 1]
    if ends.shape[0]:
        ends[0] = 0


_CTRL = re.compile(rb"[\x00-\x08\x0e-\x1f]")


def _py_float(tok):
    """Python's float() on a token, without the underscores it also accepts."""
    if b"_" in tok:
        raise ValueError(tok)
    return float(tok)


def _py_int(tok):
    if b"_" in tok:
        raise ValueError(tok)
    return int(tok)


def _binary(path, lineno, raw):
    m = _CTRL.search(raw)
    if m:
        raise DataError(f"{path}:{lineno}: binary data (byte 0x{m.group()[0]:02x}), "
                        "not a text file")


def parse_svm_line(path, lineno, raw, limit=None):
    """The reference parser of one LIBSVM line (the numba passes agree with it on every
    line; it builds the message of the first bad one): None for a blank line, else
    ``(label, [(index, value), ...])``."""
    limit = _max_features() if limit is None else limit
    _binary(path, lineno, raw)
    line = raw.split(b"#", 1)[0].strip()
    if not line:
        return None
    parts = line.split()
    try:
        label = _py_float(parts[0])
    except ValueError:
        raise DataError(f"{path}:{lineno}: label {_short(parts[0])!r} is not a number"
                        ) from None
    if not np.isfinite(label):
        raise DataError(f"{path}:{lineno}: label is {label}, not finite")
    last, pairs = -1, []
    for tok in parts[1:]:
        idx, sep, val = tok.partition(b":")
        if idx == b"qid":
            continue
        try:
            if not sep:
                raise ValueError
            j, v = _py_int(idx), _py_float(val)
        except ValueError:
            raise DataError(f"{path}:{lineno}: {_short(tok)!r} is not index:value") from None
        if j < 0:
            raise DataError(f"{path}:{lineno}: feature index {j} is negative")
        if j <= last:
            raise DataError(f"{path}:{lineno}: feature indices must increase "
                            f"({j} after {last})")
        if j > limit:
            raise DataError(f"{path}:{lineno}: {_feature_limit_msg(j)}")
        if not np.isfinite(v):
            raise DataError(f"{path}:{lineno}: feature {j} has value {v}, not finite")
        last = j
        pairs.append((j, v))
    return label, pairs


def parse_target_line(path, lineno, raw):
    """The reference parser of one line of a text target: None (blank) or the value."""
    _binary(path, lineno, raw)
    s = raw.split(b"#", 1)[0].strip()
    if not s:
        return None
    try:
        v = _py_float(s)
    except ValueError:
        raise DataError(f"{path}:{lineno}: {_short(s)!r} is not a number") from None
    if not np.isfinite(v):
        raise DataError(f"{path}:{lineno}: target is {v}, not finite")
    return v


def _fix_fallbacks(buf, fb, data, labels):
    for at, s, e in fb.tolist():
        v = float(buf[s:e].tobytes())
        if at < 0:
            labels[-1 - at] = v
        else:
            data[at] = v


_COUNTS = np.int32  # the dtype pass 1 counts in first


def _parse_lines(path, buf, start, single):
    """Pass 1 of a LIBSVM or target text; raises on the first bad line."""
    limit = _max_features()
    # int32 counts (then indptr, in place) unless a column holds 2^31 entries
    line, ls, *rest = _svm_count(buf, start, single, limit, np.zeros(16, _COUNTS))
    if line < 0:
        line, ls, *rest = _svm_count(buf, start, single, limit, np.zeros(16, np.int64))
    if line:
        raw = _line_at(buf, ls)
        if single:
            parse_target_line(path, line, raw)
        else:
            parse_svm_line(path, line, raw, limit)
        raise DataError(f"{path}:{line}: cannot parse this line")  # not reached
    return rest


def read_svmlight(path):
    """LIBSVM / svmlight text: ``label index:value ...`` per line, ``#`` comments,
    ``qid:`` tokens skipped. Indices are 1-based, unless a 0 index appears (then all
    are read as 0-based) and must increase along a line."""
    buf, start, gz = read_bytes(path)
    _refuse_binary(path, buf, start, "LIBSVM")
    rows, nnz, max_j, max_line, min_j, counts = _parse_lines(path, buf, start, False)
    if not rows:
        raise DataError(f"{path}: no samples (empty file)")
    if not nnz:
        raise DataError(f"{path}: no features (every sample is empty)")
    base = 0 if min_j == 0 else 1
    p = int(max_j) + 1 - base
    check_size(path, rows, p, nnz, extra=buf.shape[0] if gz else 0)
    wide = max(rows, p, nnz) >= 2**31 - 1
    if wide and counts.dtype != np.int64:
        counts = counts.astype(np.int64)  # the prefix sums exceed int32
    indices = np.empty(nnz, dtype=counts.dtype)
    data = np.empty(nnz, dtype=np.float64)
    labels = np.empty(rows, dtype=np.float64)
    ptr = counts[base:base + p]  # in place: the start of each column, then its end
    _starts(ptr)
    cap = nnz // 64 + 1024
    while True:
        fb = np.empty((cap, 3), dtype=np.int64)
        n_fb = _svm_fill(buf, start, base, ptr, indices, data, labels, fb)
        if n_fb <= cap:
            break
        _ends_to_starts(ptr)  # more tokens for float() than room: again, with room
        cap = n_fb
    _fix_fallbacks(buf, fb[:n_fb], data, labels)
    indptr = counts[base:base + p + 1]  # the ends, shifted by one: indptr, in place
    _ends_to_starts(indptr)
    if counts.shape[0] > 1.25 * (base + p + 1) + 1024:  # growth left spare capacity
        indptr = indptr.copy()
    del counts, ptr
    X = sp.csc_matrix((data, indices, indptr), shape=(rows, p), copy=False)
    X.has_sorted_indices = True
    return X, labels


def read_target(path, n_samples):
    """A target vector: .npy (optionally gzipped), or text with one number per line
    (``#`` comments; BOM and gzip as for the data)."""
    low = path.lower()
    if low.endswith((".npy", ".npy.gz")):
        y = _load_npy(path)
    else:
        buf, start, _ = read_bytes(path)
        _refuse_binary(path, buf, start, "target")
        rows, *_ = _parse_lines(path, buf, start, True)
        y = np.empty(rows, dtype=np.float64)
        fb = np.empty((rows, 3), dtype=np.int64)
        n_fb = _svm_fill(buf, start, 0, np.zeros(1, np.int32), np.zeros(0, np.int32),
                         np.zeros(0), y, fb)
        _fix_fallbacks(buf, fb[:n_fb], y, y)
    if y.size != n_samples:
        raise DataError(f"{path}: {y.size} targets for {n_samples} samples")
    return y


def _load_npy(path):
    import io

    buf, _, gz = read_bytes(path)
    try:
        src = io.BytesIO(buf.tobytes()) if gz else path
        y = np.load(src, allow_pickle=False, mmap_mode=None)
    except Exception as e:  # a corrupt .npy raises many kinds
        raise DataError(f"{path}: cannot read as .npy: {e}") from None
    if not isinstance(y, np.ndarray) or y.dtype.kind not in "biuf":
        raise DataError(f"{path}: a .npy target must hold real numbers, got "
                        f"{getattr(y, 'dtype', type(y).__name__)}")
    y = np.asarray(y, dtype=np.float64).ravel()
    bad = np.flatnonzero(~np.isfinite(y))
    if bad.size:
        raise DataError(f"{path}: entry {bad[0]}: target is {y[bad[0]]}, not finite")
    return y


# -- MatrixMarket -------------------------------------------------------------------------
@njit(**_nb)
def _mtx_count(b, start, line0, n_rows, n_cols, n_tok, sym, declared, counts):
    """Pass 1 over the data lines of a MatrixMarket file (coordinate: ``n_tok`` = 3, or 2
    for pattern; array: 1). Returns (error code, line, first byte, bad token's field,
    entries). Codes: 1 control byte, 2 wrong number of tokens, 3 not an integer, 4 index
    out of range, 5 not a number, 6 not finite, 7 more entries than declared, 8 a
    diagonal entry of a skew-symmetric matrix."""
    n = b.shape[0]
    line = line0
    pos = start
    entries = 0
    while pos < n:
        line += 1
        ls = pos
        le, _, bad = _line_end(b, pos, n)
        pos = le + 1
        if bad:
            return 1, line, ls, 0, entries
        i = ls
        while i < le and _is_space(b[i]):
            i += 1
        if i >= le or b[i] == 37:  # blank, or a % comment
            continue
        ti = 0
        row = 0
        col = 0
        while i < le:
            ts = i
            while i < le and not _is_space(b[i]):
                i += 1
            te = i
            if ti < n_tok:
                if n_tok > 1 and ti < 2:
                    ok, v = _scan_int(b, ts, te)
                    if not ok:
                        return 3, line, ls, ti, entries
                    if v < 1 or v > (n_rows if ti == 0 else n_cols):
                        return 4, line, ls, ti, entries
                    if ti == 0:
                        row = v
                    else:
                        col = v
                else:
                    k = _scan_float(b, ts, te)
                    if k < 0:
                        return 5, line, ls, ti, entries
                    if k > 0:
                        return 6, line, ls, ti, entries
            ti += 1
            while i < le and _is_space(b[i]):
                i += 1
        if ti != n_tok:
            return 2, line, ls, ti, entries
        if sym == 2 and row == col and n_tok > 1:
            return 8, line, ls, 0, entries
        entries += 1
        if entries > declared:
            return 7, line, ls, 0, entries
        if n_tok > 1:
            counts[col - 1] += 1
            if sym and row != col:
                counts[row - 1] += 1
    return 0, line, 0, 0, entries


@njit(**_nb)
def _mtx_fill(b, start, n_tok, sym, ptr, indices, data):
    """Pass 2: coordinate entries into CSC slots (``ptr[c]``: next free slot of column
    c), mirrored for (skew-)symmetric; array values, in order, into ``data``. Returns the
    tokens left to Python's float(): (slot, first byte, end, negate)."""
    n = b.shape[0]
    fb = np.empty((16, 4), dtype=np.int64)
    n_fb = 0
    pos = start
    k_arr = 0
    while pos < n:
        ls = pos
        le, _, _ = _line_end(b, pos, n)
        pos = le + 1
        i = ls
        while i < le and _is_space(b[i]):
            i += 1
        if i >= le or b[i] == 37:
            continue
        row = 0
        col = 0
        v = 1.0
        ok = True
        vs = 0
        ve = 0
        for ti in range(n_tok):
            ts = i
            while i < le and not _is_space(b[i]):
                i += 1
            if n_tok > 1 and ti < 2:
                _, x = _scan_int(b, ts, i)
                if ti == 0:
                    row = x - 1
                else:
                    col = x - 1
            else:
                ok, v = _to_float(b, ts, i)
                vs, ve = ts, i
            while i < le and _is_space(b[i]):
                i += 1
        if n_tok == 1:
            slots = (k_arr, -1)
            data[k_arr] = v
            k_arr += 1
        else:
            q = ptr[col]
            ptr[col] = q + 1
            indices[q] = row
            data[q] = v
            q2 = -1
            if sym and row != col:
                q2 = ptr[row]
                ptr[row] = q2 + 1
                indices[q2] = col
                data[q2] = -v if sym == 2 else v
            slots = (q, q2)
        if not ok:
            for t in range(2):
                q = slots[t]
                if q < 0:
                    continue
                if n_fb == fb.shape[0]:
                    grown = np.empty((2 * n_fb, 4), dtype=np.int64)
                    grown[:n_fb] = fb
                    fb = grown
                fb[n_fb, 0] = q
                fb[n_fb, 1] = vs
                fb[n_fb, 2] = ve
                fb[n_fb, 3] = 1 if (t == 1 and sym == 2) else 0
                n_fb += 1
    return fb[:n_fb]


@njit(**_nb)
def _csc_sort(indptr, indices, data):
    """Sort each column's rows; returns (column, row) of the first duplicate, or (-1, -1)."""
    for c in range(indptr.shape[0] - 1):
        a, z = indptr[c], indptr[c + 1]
        ordered = True
        for q in range(a + 1, z):
            if indices[q] <= indices[q - 1]:
                ordered = False
                break
        if not ordered:
            order = np.argsort(indices[a:z], kind="mergesort")
            indices[a:z] = indices[a:z][order]
            data[a:z] = data[a:z][order]
            for q in range(a + 1, z):
                if indices[q] == indices[q - 1]:
                    return c, indices[q]
    return -1, -1


@njit(**_nb)
def _mtx_lines_of(b, start, line0, row, col, sym):
    """The first two data lines holding entry (row, col) (1-based), or its mirror."""
    n = b.shape[0]
    line = line0
    pos = start
    first = 0
    while pos < n:
        line += 1
        ls = pos
        le, _, _ = _line_end(b, pos, n)
        pos = le + 1
        i = ls
        while i < le and _is_space(b[i]):
            i += 1
        if i >= le or b[i] == 37:
            continue
        ts = i
        while i < le and not _is_space(b[i]):
            i += 1
        _, r = _scan_int(b, ts, i)
        while i < le and _is_space(b[i]):
            i += 1
        ts = i
        while i < le and not _is_space(b[i]):
            i += 1
        _, c = _scan_int(b, ts, i)
        if (r == row and c == col) or (sym and r == col and c == row):
            if first:
                return first, line
            first = line
    return first, 0


@njit(**_nb)
def _dense_from_triangle(vals, m, skew):
    """The symmetric (skew: antisymmetric) m x m matrix, F-order, from its lower
    triangle in column-major order (skew: without the diagonal)."""
    X = np.zeros((m, m)).T
    k = 0
    for j in range(m):
        for i in range(j + 1 if skew else j, m):
            X[i, j] = vals[k]
            X[j, i] = -vals[k] if skew else vals[k]
            k += 1
    return X


def _mtx_header(path, buf, start):
    """(format, field, symmetry, (rows, cols, entries), size line, first data byte)."""
    pos, lineno, n = start, 0, buf.shape[0]

    def next_line(cap=None):
        nonlocal pos, lineno
        if pos >= n:
            return None
        raw = _line_at(buf, pos, cap)
        pos += len(raw) + 1
        lineno += 1
        return raw

    banner = next_line(4096)  # a binary file may have no newline for a long while
    words = banner.lower().split()
    if len(words) != 5 or words[0] != b"%%matrixmarket" or words[1] != b"matrix":
        raise DataError(f"{path}:1: not a MatrixMarket file: the first line must be "
                        "'%%MatrixMarket matrix FORMAT FIELD SYMMETRY', got "
                        f"{_short(banner)!r}")
    fmt, field, sym = (w.decode(errors="replace") for w in words[2:])
    if fmt not in ("coordinate", "array"):
        raise DataError(f"{path}:1: unknown MatrixMarket format {fmt!r} "
                        "(coordinate or array)")
    if field in ("complex", ) or sym == "hermitian":
        raise DataError(f"{path}:1: complex MatrixMarket matrices are not supported")
    if field not in ("real", "double", "integer", "pattern") or (
            field == "pattern" and fmt == "array"):
        raise DataError(f"{path}:1: unknown MatrixMarket field {field!r} for {fmt} "
                        "(real, integer, or pattern for coordinate)")
    if sym not in ("general", "symmetric", "skew-symmetric"):
        raise DataError(f"{path}:1: unknown MatrixMarket symmetry {sym!r} "
                        "(general, symmetric or skew-symmetric)")
    while True:
        raw = next_line()
        if raw is None:
            raise DataError(f"{path}: no size line after the MatrixMarket header")
        _binary(path, lineno, raw)
        s = raw.strip()
        if s and not s.startswith(b"%"):
            break
    want = 3 if fmt == "coordinate" else 2
    try:
        size = [_py_int(t) for t in s.split()]
        if len(size) != want or min(size) < 0:
            raise ValueError
    except ValueError:
        raise DataError(f"{path}:{lineno}: the size line must be "
                        f"{'ROWS COLUMNS ENTRIES' if want == 3 else 'ROWS COLUMNS'} "
                        f"(non-negative integers), got {_short(s)!r}") from None
    m, p = size[:2]
    if sym != "general" and m != p:
        raise DataError(f"{path}:{lineno}: a {sym} matrix must be square, got {m} x {p}")
    if fmt == "coordinate":
        most = (m * p if sym == "general" else m * (m + 1) // 2 if sym == "symmetric"
                else m * (m - 1) // 2)
        if size[2] > most:
            raise DataError(f"{path}:{lineno}: {size[2]:,} entries declared, more than a "
                            f"{sym} {m:,} x {p:,} matrix holds")
    else:
        size.append(m * p if sym == "general" else m * (m + 1) // 2
                    if sym == "symmetric" else m * (m - 1) // 2)
    return fmt, field, sym, size, lineno, pos


def read_mtx(path):
    """MatrixMarket (coordinate or array; real, integer or pattern; general, symmetric
    or skew-symmetric). Duplicate entries are refused, not summed."""
    buf, start, gz = read_bytes(path)
    fmt, field, sym, (m, p, declared), hline, pos = _mtx_header(path, buf, start)
    where, lead = f"{path}:{hline}", "the header declares "
    symc = {"general": 0, "symmetric": 1, "skew-symmetric": 2}[sym]
    extra = buf.shape[0] if gz else 0
    if fmt == "coordinate":
        check_size(where, m, p, declared * (2 if symc else 1), extra=extra, lead=lead)
        n_tok = 2 if field == "pattern" else 3
        counts = np.zeros(p, dtype=np.int64)
    else:
        check_size(where, m, p, None, extra=extra, lead=lead)
        n_tok, counts = 1, np.zeros(0, dtype=np.int64)
    code, line, ls, field_no, entries = _mtx_count(buf, pos, hline, m, p, n_tok, symc,
                                                   declared, counts)
    if code:
        _mtx_error(path, code, line, _line_at(buf, ls), field_no, n_tok, m, p, declared,
                   hline)
    if entries < declared:
        raise DataError(f"{path}: the header (line {hline}) declares {declared:,} "
                        f"{'entries' if fmt == 'coordinate' else 'values'}, the file has "
                        f"{entries:,}")
    if fmt == "array":
        vals = np.empty(declared)
        fb = _mtx_fill(buf, pos, 1, 0, np.zeros(1, np.int64), np.zeros(0, np.int64), vals)
        _fix_mtx(buf, fb, vals)
        if symc:
            return _dense_from_triangle(vals, m, symc == 2)
        return vals.reshape(p, m).T  # column-major values: F-order, no copy
    nnz = int(counts.sum())
    wide = max(m, p, nnz) >= 2**31 - 1
    itype = np.int64 if wide else np.int32
    ptr = np.zeros(p + 1, dtype=np.int64)
    np.cumsum(counts, out=ptr[1:])
    del counts
    indices = np.empty(nnz, dtype=itype)
    data = np.empty(nnz)
    fb = _mtx_fill(buf, pos, n_tok, symc, ptr[:-1], indices, data)
    _fix_mtx(buf, fb, data)
    indptr = np.empty(p + 1, dtype=itype)
    indptr[0] = 0
    indptr[1:] = ptr[:-1]
    del ptr
    c, r = _csc_sort(indptr, indices, data)
    if c >= 0:
        first, second = _mtx_lines_of(buf, pos, hline, r + 1, c + 1, symc)
        mirror = " (mirrored: the matrix is symmetric)" if symc else ""
        raise DataError(f"{path}:{second}: entry (row {r + 1}, column {c + 1}) is given "
                        f"twice{mirror}, also on line {first}; duplicates are not summed")
    X = sp.csc_matrix((data, indices, indptr), shape=(m, p), copy=False)
    X.has_sorted_indices = True
    return X


def _fix_mtx(buf, fb, data):
    for at, s, e, neg in fb.tolist():
        v = float(buf[s:e].tobytes())
        data[at] = -v if neg else v


def _mtx_error(path, code, line, raw, field_no, n_tok, m, p, declared, hline):
    where = f"{path}:{line}"
    toks = raw.split()
    tok = _short(toks[field_no]) if field_no < len(toks) else ""
    what = ("row index", "column index", "value", "")[min(field_no, 3)] if n_tok > 1 \
        else "value"
    if code == 1:
        _binary(path, line, raw)
    if code == 2:
        want = {3: "'row column value'", 2: "'row column' (pattern)", 1: "one value"}[n_tok]
        raise DataError(f"{where}: expected {want}, got {len(toks)} fields: "
                        f"{_short(raw.strip())!r}")
    if code == 3:
        raise DataError(f"{where}: {what} {tok!r} is not an integer")
    if code == 4:
        raise DataError(f"{where}: {what} {tok} is out of range 1..{m if field_no == 0 else p}")
    if code == 5:
        raise DataError(f"{where}: {what} {tok!r} is not a number")
    if code == 6:
        at = f"entry (row {toks[0].decode()}, column {toks[1].decode()})" if n_tok > 1 \
            else "value"
        raise DataError(f"{where}: {at} is {_py_float(toks[field_no])}, not finite")
    if code == 7:
        raise DataError(f"{where}: more entries than the {declared:,} the header declares "
                        f"(line {hline})")
    if code == 8:
        raise DataError(f"{where}: diagonal entry ({toks[0].decode()}, {toks[1].decode()}) "
                        "in a skew-symmetric matrix")
    raise DataError(f"{where}: cannot parse this line")


# -- .npz -----------------------------------------------------------------------------------
def _npz_members(path, z):
    """(shape, dtype) of each array of an open .npz, from the .npy headers alone."""
    from numpy.lib import format as npf

    out = {}
    for name in z.files:
        with z.zip.open(name + ".npy" if name + ".npy" in z.zip.namelist() else name) as f:
            version = npf.read_magic(f)
            if version == (1, 0):
                shape, _, dtype = npf.read_array_header_1_0(f)
            elif version == (2, 0):
                shape, _, dtype = npf.read_array_header_2_0(f)
            else:
                shape, _, dtype = npf._read_array_header(f, version)
        out[name] = (shape, dtype)
    return out


def _nelem(shape):
    k = 1
    for s in shape:
        k *= int(s)
    return k


def _read_npz(path):
    import io

    buf, _, gz = read_bytes(path)
    src = io.BytesIO(buf.tobytes()) if gz else path
    try:
        with np.load(src, allow_pickle=False) as z:
            members = _npz_members(path, z)
            for name, (shape, dtype) in members.items():
                if dtype.hasobject:
                    raise DataError(f"{path}: array {name!r} holds Python objects "
                                    "(not read: it would need pickle)")
            keys = set(members)
            if {"data", "indices", "indptr", "shape", "format"} <= keys:  # save_npz
                shape = tuple(int(s) for s in z["shape"])
                if len(shape) != 2 or min(shape) < 0:
                    raise DataError(f"{path}: a sparse matrix must be 2-D, got shape {shape}")
                check_size(path, shape[0], shape[1], _nelem(members["data"][0]))
                if members["data"][1].kind not in "biuf":
                    raise DataError(f"{path}: the matrix has dtype {members['data'][1]}, "
                                    "not real numbers")
                if gz:
                    src.seek(0)
                X, y = sp.load_npz(src), (z["y"] if "y" in keys else None)
            elif "X" in keys:
                shape, dtype = members["X"]
                if dtype.kind not in "biuf":
                    raise DataError(f"{path}: X has dtype {dtype}, not real numbers")
                if len(shape) == 2:
                    check_size(path, shape[0], shape[1], None)
                X, y = z["X"], (z["y"] if "y" in keys else None)
            else:
                raise DataError(f"{path}: expected arrays 'X' and 'y', or a "
                                f"scipy.sparse.save_npz matrix; found {sorted(keys)}")
            if y is not None and y.dtype.kind not in "biuf":
                raise DataError(f"{path}: y has dtype {y.dtype}, not real numbers")
    except DataError:
        raise
    except Exception as e:  # zip, zlib, header and format errors: many kinds
        raise DataError(f"{path}: cannot read as .npz: {type(e).__name__}: {e}") from None
    if not sp.issparse(X):
        X = np.asarray(X)
        if X.ndim != 2:
            raise DataError(f"{path}: X must be a 2-D numeric array, got shape {X.shape}")
    if y is not None:
        y = np.asarray(y, dtype=np.float64).ravel()
        bad = np.flatnonzero(~np.isfinite(y))
        if bad.size:
            raise DataError(f"{path}: y[{bad[0]}] is {y[bad[0]]}, not finite")
    return X, y


def load(path, target=None):
    """Read ``(X, y)`` from LIBSVM text, MatrixMarket (.mtx/.mm, y from ``target``) or
    .npz (arrays X and y, or a scipy sparse matrix with y from ``target``); text files
    may be gzipped and may start with a UTF-8 BOM."""
    _check_path(path)
    low = path.lower()
    if low.endswith(".gz"):
        low = low[:-3]
    if low.endswith((".mtx", ".mm")):
        X, y = read_mtx(path), None
    elif low.endswith(".npz"):
        X, y = _read_npz(path)
    else:
        X, y = read_svmlight(path)
    if target is not None:
        y = read_target(target, X.shape[0])
    if y is None:
        raise DataError(f"{path}: holds no target vector; pass it with --target FILE")
    return check(X, y, path)


def check(X, y, name="data"):
    """Validate and convert to the kernels' layout (CSC with sorted indices, or F-order)."""
    kind = X.dtype.kind if hasattr(X, "dtype") else np.asarray(X).dtype.kind
    if kind == "c":
        raise DataError(f"{name}: X is complex; the Lasso needs real numbers")
    if sp.issparse(X):
        X = sp.csc_matrix(X, dtype=np.float64)
        X.sum_duplicates()  # also sorts the indices
        # scipy's index dtype (int32 below 2^31 non-zeros) is kept: the full passes read
        # every index, and 4 bytes each instead of 8 is a quarter less memory traffic
        vals = X.data
    else:
        X = np.asfortranarray(X, dtype=np.float64)
        if X.ndim != 2:
            raise DataError(f"{name}: X must be 2-D, got shape {X.shape}")
        vals = X
    y = np.ascontiguousarray(y, dtype=np.float64).ravel()
    if X.shape[0] == 0 or X.shape[1] == 0:
        raise DataError(f"{name}: empty data: X has shape {X.shape}")
    if y.shape[0] != X.shape[0]:
        raise DataError(f"{name}: y has {y.shape[0]} entries but X has {X.shape[0]} rows")
    if not np.isfinite(vals).all():
        raise DataError(f"{name}: X holds NaN or inf")
    if not np.isfinite(y).all():
        i = int(np.flatnonzero(~np.isfinite(y))[0])
        raise DataError(f"{name}: y[{i}] is {y[i]}, not finite")
    return X, y


def make_problem(n_samples=2000, n_features=10000, density=0.01, n_informative=100,
                 corr=0.5, snr=3.0, dense=False, seed=0):
    """The built-in problem: y = X w + noise with ``n_informative`` non-zeros in w.

    Dense: rows drawn from N(0, S) with S_jk = corr^|j-k| (AR(1) columns, as skglm's and
    celer's ``make_correlated_data``). Sparse: X = R B with R sparse N(0, 1) entries and
    B upper bidiagonal (1, corr), so neighbouring columns share rows and correlate.
    Noise scaled so that ||X w|| / ||noise|| = snr. Deterministic in ``seed``.
    """
    if n_samples < 1 or n_features < 1:
        raise DataError("the built-in problem needs n_samples >= 1 and n_features >= 1")
    if not 0 < density <= 1:
        raise DataError(f"density must be in (0, 1], got {density}")
    if not 0 <= corr < 1:
        raise DataError(f"corr must be in [0, 1), got {corr}")
    if snr <= 0:
        raise DataError(f"snr must be > 0, got {snr}")
    n_informative = min(int(n_informative), n_features)
    rng = np.random.default_rng(seed)
    if dense:
        X = np.empty((n_samples, n_features), order="F")
        X[:, 0] = rng.standard_normal(n_samples)
        s = np.sqrt(1 - corr ** 2)
        for j in range(1, n_features):
            X[:, j] = corr * X[:, j - 1] + s * rng.standard_normal(n_samples)
    else:
        # density of R chosen so that X = R B has about the requested density
        d = density / (1 + (corr > 0))
        R = sp.random(n_samples, n_features, density=d, format="csc", random_state=rng,
                      data_rvs=rng.standard_normal)
        B = sp.eye(n_features, format="csc") + corr * sp.eye(n_features, k=1, format="csc")
        X = (R @ B).tocsc()
        X.sort_indices()
    w = np.zeros(n_features)
    support = rng.choice(n_features, n_informative, replace=False)
    w[support] = rng.standard_normal(n_informative)
    Xw = X @ w
    noise = rng.standard_normal(n_samples)
    scale = np.linalg.norm(Xw) / (snr * np.linalg.norm(noise)) if np.any(Xw) else 1.0
    y = Xw + scale * noise
    return X, y, w
