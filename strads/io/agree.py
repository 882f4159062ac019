"""The workers agree on the first problem any of them found in their part of a file, and
send each row they read to the worker that keeps it (:func:`route`).

The worker that found it raises it (one line, ``FILE:LINE: problem``); the others wait in
a collective that never completes: under MPI the raising rank ends the job, in one
process the failing thread releases them (the engine reports the first error).
"""
import re

import numpy as np

from ..errors import DataError


def refuse(peers, message, worker=0):
    """A problem every worker knows of: ``worker`` raises it, the others wait."""
    if peers.rank != worker:
        peers.allgather(None)  # never met: ``worker`` has failed
    raise DataError(str(message))


def _line(message):
    m = re.match(r".*?:(\d+): ", message)
    return int(m.group(1)) if m else 0


def agree(peers, err, key=None):
    """Every worker's problem (None, or a message or DataError); the first in ``key``'s
    order (default: the line its message names, 0 for none), the lowest worker's on a
    tie, is raised by the worker that found it. None anywhere: go on."""
    mine = None if err is None else (_line(str(err)) if key is None else key, str(err))
    found = [(e[0], w, e[1]) for w, e in enumerate(peers.allgather(mine)) if e is not None]
    if found:
        _, w, msg = min(found)
        refuse(peers, msg, w)


def attempt(peers, fn, *args):
    """``fn(*args)`` on every worker, a DataError any of them met agreed on."""
    try:
        out, err = fn(*args), None
    except DataError as e:
        out, err = None, e
    agree(peers, err)
    return out


def route(peers, dest, arrays):
    """Row k of every array (None: none) to worker ``dest[k]``; returns the rows this
    worker receives, each array's in source worker order (a source's rows in theirs)."""
    W = peers.size
    if W == 1:
        return list(arrays)
    order = np.argsort(dest.astype(np.int16) if W < 1 << 15 else dest, kind="stable")
    cuts = np.searchsorted(dest[order], np.arange(W + 1))
    got = peers.alltoall([[None if a is None else a[order[cuts[o]:cuts[o + 1]]]
                           for a in arrays] for o in range(W)])
    return [None if a is None else np.concatenate([g[j] for g in got])
            for j, a in enumerate(arrays)]
