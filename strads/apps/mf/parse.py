"""Rating lines parsed over bytes (numba), for each worker's part of a file.

:func:`parse_block` reads the lines of a buffer that it can vouch for: ASCII, the
detected delimiter (blanks, tab or comma), integer ids of up to 18 digits and ratings
that are short decimals (at most 17 significant digits and a power of ten within
10^+-22: then ``mantissa * 10^e`` or ``mantissa / 10^e``, one rounding of two exact
numbers, is the correctly rounded value that Python's ``float`` gives). Any other line
that is not blank or a comment -- non-ASCII bytes, too few fields, an id or rating it
does not read, a MatrixMarket index out of range, a line of 1 MiB or more -- is left to
the line-by-line rules of :func:`strads.apps.mf.data.parse_line`, which either read it
exactly as before or raise the error naming it. So a file reads exactly as the line by
line parse would read it, at several hundred MB/s for clean lines.

Lines end at ``\\n``, ``\\r\\n`` or ``\\r`` (universal newlines, as Python reads text).
"""
import numpy as np
from numba import njit

_nb = dict(cache=True, nogil=True)
LONG_LINE = 1 << 20
_P10 = np.array([10.0 ** k for k in range(23)])


@njit(**_nb)
def _is_ws(c):
    # what str.strip() and str.split() take as blanks among ASCII bytes
    return c == 32 or (c >= 9 and c <= 13) or (c >= 28 and c <= 31)


@njit(**_nb)
def _int(b, s, e):
    if s >= e:
        return 0, False
    neg = False
    c = b[s]
    if c == 43 or c == 45:
        neg = c == 45
        s += 1
    if s >= e or e - s > 18:
        return 0, False
    v = 0
    for k in range(s, e):
        d = np.int64(b[k]) - 48
        if d < 0 or d > 9:
            return 0, False
        v = v * 10 + d
    return (-v if neg else v), True


@njit(**_nb)
def _float(b, s, e, p10):
    if s >= e:
        return 0.0, False
    neg = False
    c = b[s]
    if c == 43 or c == 45:
        neg = c == 45
        s += 1
    mant = 0
    nd = 0
    exp = 0
    seen = False
    k = s
    while k < e:
        d = np.int64(b[k]) - 48
        if d < 0 or d > 9:
            break
        seen = True
        if mant != 0 or d != 0:
            if nd >= 17:
                return 0.0, False
            mant = mant * 10 + d
            nd += 1
        k += 1
    if k < e and b[k] == 46:
        k += 1
        while k < e:
            d = np.int64(b[k]) - 48
            if d < 0 or d > 9:
                break
            seen = True
            if mant != 0 or d != 0:
                if nd >= 17:
                    return 0.0, False
                mant = mant * 10 + d
                nd += 1
            exp -= 1
            k += 1
    if not seen:
        return 0.0, False
    if k < e and (b[k] == 101 or b[k] == 69):
        k += 1
        eneg = False
        if k < e and (b[k] == 43 or b[k] == 45):
            eneg = b[k] == 45
            k += 1
        ev = 0
        nev = 0
        while k < e:
            d = np.int64(b[k]) - 48
            if d < 0 or d > 9:
                break
            if ev < 100000:
                ev = ev * 10 + d
            nev += 1
            k += 1
        if nev == 0:
            return 0.0, False
        exp += -ev if eneg else ev
    if k != e:
        return 0.0, False
    if mant == 0:
        v = 0.0
    elif mant <= 9007199254740992 and exp >= -22 and exp <= 22:
        v = float(mant) * p10[exp] if exp >= 0 else float(mant) / p10[-exp]
    else:
        return 0.0, False
    return (-v if neg else v), True


@njit(**_nb)
def _field(b, p, e, delim):
    """(start, end) of the field at p (blanks stripped) and where the next one starts
    (> e: none left)."""
    if delim == 0:
        while p < e and _is_ws(b[p]):
            p += 1
        if p >= e:
            return p, p, e + 1
        s = p
        while p < e and not _is_ws(b[p]):
            p += 1
        return s, p, p
    q = p
    while q < e and b[q] != delim:
        q += 1
    s, t = p, q
    while s < t and _is_ws(b[s]):
        s += 1
    while t > s and _is_ws(b[t - 1]):
        t -= 1
    return s, t, q + 1


@njit(**_nb)
def parse_block(b, start, stop, delim, mtx_m, mtx_n, out_u, out_i, out_r, out_l, count,
                line0, fb, p10):
    """Parse the lines that start in ``b[start:stop]`` (each ends within ``b``) into
    ``out_*[count:]`` (``out_l``: the line's index, ``line0`` for the first). It stops
    after a line it leaves to the line-by-line rules, with ``fb`` = (its start, its
    end, its index), or when ``out`` is full. Returns (where it stopped, count, whether
    ``fb`` was set, lines passed)."""
    n = b.shape[0]
    cap = out_u.shape[0]
    pos = start
    line = line0
    while pos < stop:
        if count >= cap:
            break
        e = pos
        ascii = True
        while e < n:
            c = b[e]
            if c == 10 or c == 13:
                break
            if c >= 128:
                ascii = False
            e += 1
        nxt = e + 1
        if e < n and b[e] == 13 and e + 1 < n and b[e + 1] == 10:
            nxt = e + 2
        s = pos
        while s < e and _is_ws(b[s]):
            s += 1
        if s < e and b[s] != 35 and b[s] != 37:  # neither blank nor a comment
            ok = ascii and e - pos < LONG_LINE
            s0 = e0 = s1 = e1 = s2 = e2 = p = 0
            u = i = 0
            r = 0.0
            if ok:
                s0, e0, p = _field(b, s, e, delim)
                ok = s0 < e0 and p <= e
            if ok:
                s1, e1, p = _field(b, p, e, delim)
                ok = s1 < e1 and p <= e
            if ok:
                s2, e2, p = _field(b, p, e, delim)
                ok = s2 < e2
            if ok:
                u, ok = _int(b, s0, e0)
            if ok:
                i, ok = _int(b, s1, e1)
            if ok:
                r, ok = _float(b, s2, e2, p10)
            if ok and mtx_m > 0:
                ok = u >= 1 and u <= mtx_m and i >= 1 and i <= mtx_n
            if ok:
                out_u[count] = u
                out_i[count] = i
                out_r[count] = r
                out_l[count] = line
                count += 1
            else:
                fb[0] = pos
                fb[1] = e
                fb[2] = line
                return min(nxt, n), count, True, line + 1 - line0
        line += 1
        pos = nxt
    return min(pos, n), count, False, line - line0


@njit(**_nb)
def count_lines(b, start, stop):
    """Line starts in b[start:stop) (universal newlines; a line may run past stop)."""
    n = 0
    pos = start
    while pos < stop:
        n += 1
        e = pos
        while e < b.shape[0] and b[e] != 10 and b[e] != 13:
            e += 1
        if e < b.shape[0] and b[e] == 13 and e + 1 < b.shape[0] and b[e + 1] == 10:
            e += 1
        pos = e + 1
    return n


@njit(**_nb)
def last_cut(b):
    """The end of the last complete line of b (0: none): after its last \\n, or after a
    \\r that is not b's last byte (which a \\n may follow in the next block)."""
    k = b.shape[0] - 1
    while k >= 0:
        if b[k] == 10:
            return k + 1
        if b[k] == 13 and k < b.shape[0] - 1:
            return k + 1
        k -= 1
    return 0


@njit(**_nb)
def held_out(seed, pos, fraction, out):
    """out[k] = rating at global position pos[k] is held out: a splitmix64 hash of
    (seed, position) below ``fraction`` -- the same whoever reads it."""
    for k in range(pos.shape[0]):
        z = np.uint64(seed) * np.uint64(0x9E3779B97F4A7C15) + np.uint64(pos[k]) \
            + np.uint64(0x632BE59BD9B4E019)
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        z = z ^ (z >> np.uint64(31))
        out[k] = float(z >> np.uint64(11)) * (1.0 / 9007199254740992.0) < fraction


@njit(**_nb)
def exact_partials(x):
    """Non-overlapping partials whose exact sum is sum(x) (Shewchuk's msum, as
    math.fsum): math.fsum over every worker's partials is then the correctly rounded
    sum of all, however the values were split among workers."""
    parts = np.zeros(64)
    n = 0
    for k in range(x.shape[0]):
        v = x[k]
        i = 0
        for j in range(n):
            y = parts[j]
            if abs(v) < abs(y):
                v, y = y, v
            hi = v + y
            lo = y - (hi - v)
            if lo != 0.0:
                parts[i] = lo
                i += 1
            v = hi
        if i >= 64:  # cannot happen for finite doubles (at most ~40 partials)
            i = 63
        parts[i] = v
        n = i + 1
    return parts[:n].copy()
