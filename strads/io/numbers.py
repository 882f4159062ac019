"""Numbers over raw bytes (numba): integers, and decimals converted exactly as Python's
``float()`` converts them (correctly rounded: Clinger's fast path, else Eisel-Lemire; the
rare token neither settles is left to ``float()`` itself), in one pass over the token.
Notes: docs/architecture.md."""
import math

import numpy as np
from numba import njit

NB = dict(cache=True, nogil=True)  # the readers' kernels: cached on disk, without the GIL
BIG = 1 << 62  # integers saturate here: the caller refuses them with its own words


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


@njit(**NB)
def _mul128(a, b):
    a_lo, a_hi = a & _U32, a >> _S32
    b_lo, b_hi = b & _U32, b >> _S32
    p0, p1, p2, p3 = a_lo * b_lo, a_lo * b_hi, a_hi * b_lo, a_hi * b_hi
    mid = (p0 >> _S32) + (p1 & _U32) + (p2 & _U32)
    return p3 + (p1 >> _S32) + (p2 >> _S32) + (mid >> _S32), (p0 & _U32) | (mid << _S32)


@njit(**NB)
def _clz(x):
    n = 0
    for s in (32, 16, 8, 4, 2, 1):
        if x >> np.uint64(64 - s) == np.uint64(0):
            n += s
            x = x << np.uint64(s)
    return n


@njit(**NB)
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


@njit(**NB)
def _word(b, i, n):
    """The end of ``inf``, ``infinity`` or ``nan`` (any case) at b[i:], else i."""
    if n - i >= 3 and b[i] | 32 == 110 and b[i + 1] | 32 == 97 and b[i + 2] | 32 == 110:
        return i + 3
    if not (n - i >= 3 and b[i] | 32 == 105 and b[i + 1] | 32 == 110
            and b[i + 2] | 32 == 102):
        return i
    if (n - i >= 8 and b[i + 3] | 32 == 105 and b[i + 4] | 32 == 110
            and b[i + 5] | 32 == 105 and b[i + 6] | 32 == 116 and b[i + 7] | 32 == 121):
        return i + 8
    return i + 3


@njit(**NB)
def _rounds_to_inf(b, k, i1, f0, f1):
    """Whether the digits from the leading one at k (integer digits to i1, then the
    fraction's f0..f1), whose value is below 10^309, reach 2^1024 - 2^970."""
    j = k
    for t in range(_OVF.shape[0]):
        if j == i1:
            j = f0
        d = 0
        if j < f1 or j < i1:
            d = b[j] - 48
            j += 1
        if d != _OVF[t]:
            return d > _OVF[t]
    return True


@njit(inline="always", **NB)
def _digits(b, i, n, man, nd, dp, trunc, frac):
    """The decimal digits from b[i]: the first 19 significant ones into ``man`` (``nd`` of
    them); ``dp`` counts the integer digits dropped, or (``frac``) the fraction digits
    kept; ``trunc``: a dropped digit was not 0. -> (end, man, nd, dp, trunc)."""
    while i < n:
        d = b[i] - 48
        if d < 0 or d > 9:
            break
        if nd < 19:
            if nd > 0 or d != 0:
                man = man * np.uint64(10) + np.uint64(d)
                nd += 1
            if frac:
                dp -= 1
        else:
            if not frac:
                dp += 1
            if d != 0:
                trunc = True
        i += 1
    return i, man, nd, dp, trunc


def scan_int(b, i, n):
    """The integer at b[i:n] in Python's int() grammar (no underscores): (end, ok,
    value), the value saturated at +-2^62; ok False when no digit is there."""
    neg = False
    if i < n and (b[i] == 43 or b[i] == 45):
        neg = b[i] == 45
        i += 1
    s = i
    v = 0
    while i < n:
        d = b[i] - 48
        if d < 0 or d > 9:
            break
        v = min(v * 10 + d, BIG) if v <= BIG // 10 else BIG  # (no int64 wrap-around)
        i += 1
    return i, i > s, (-v if neg else v)


def scan_float(b, i, n, value=True):
    """The number at b[i:n] in Python's float() grammar (no underscores): (end, status,
    value). Status 0: finite, ``value`` exact; 1: finite, but ``value`` must come from
    Python's float(b[i:end]) (rare); 2: not finite (inf, nan, or a decimal that rounds
    to inf); -1: not a number. ``value`` False: check only (value 0.0, status 0 or 1)."""
    neg = False
    if i < n and (b[i] == 43 or b[i] == 45):
        neg = b[i] == 45
        i += 1
    if i < n and (b[i] | 32 == 105 or b[i] | 32 == 110):
        e = _word(b, i, n)
        return e, (2 if e > i else -1), 0.0
    i0 = i
    i, man, nd, dp, trunc = _digits(b, i, n, np.uint64(0), 0, 0, False, False)
    i1 = f0 = f1 = i
    if i < n and b[i] == 46:
        f0 = i + 1
        i, man, nd, dp, trunc = _digits(b, f0, n, man, nd, dp, trunc, True)
        f1 = i
    if i1 == i0 and f1 == f0:
        return i, -1, 0.0
    if i < n and b[i] | 32 == 101:
        i, ok, ev = scan_int(b, i + 1, n)
        if not ok:
            return i, -1, 0.0
        dp += ev
    if man == np.uint64(0):
        return i, 0, (-0.0 if neg else 0.0)
    lead = nd - 1 + dp  # the decimal exponent of the leading digit: below 308, finite
    if lead >= 308:
        k = i0
        while k < i1 and b[k] == 48:
            k += 1
        if k == i1:
            k = f0
            while b[k] == 48:
                k += 1
        if lead > 308 or _rounds_to_inf(b, k, i1, f0, f1):
            return i, 2, 0.0
    if not value:
        return i, 0, 0.0
    if not trunc:  # trailing zeros ("2.50"): a smaller exact significand
        while man % np.uint64(10) == np.uint64(0):
            man = man // np.uint64(10)
            dp += 1
    ok = True
    if not trunc and man <= np.uint64(1 << 53) and -22 <= dp <= 22:
        # Clinger: both operands exact, so one correctly rounded operation
        v = float(man) * _P10[dp] if dp >= 0 else float(man) / _P10[-dp]
    elif not trunc and 22 < dp <= 22 + 15 and man <= np.uint64(1 << 53) // _I10[dp - 22]:
        v = float(man * _I10[dp - 22]) * _P10[22]
    else:  # digits beyond 19 dropped (trunc): exact if man and man + 1 round alike
        ok, v = _eisel_lemire(man, dp)
        if trunc:
            ok2, v2 = _eisel_lemire(man + np.uint64(1), dp)
            ok = ok and ok2 and v2 == v
    return i, (0 if ok else 1), (-v if neg else v)


# Inlined, for the hot kernels that allocate nothing and so are compiled without reference
# counting themselves; scan_int also as a call, for any kernel (compiled without reference
# counting: an array argument would be counted per token).
scan_int_inline = njit(inline="always", **NB)(scan_int)
scan_int = njit(_nrt=False, **NB)(scan_int)
scan_float_inline = njit(inline="always", **NB)(scan_float)


def py_float(tok, conv=float):
    """Python's float() (or ``conv``: int()) on a token, without the underscores it also
    accepts."""
    if b"_" in tok:
        raise ValueError(tok)
    return conv(tok)
