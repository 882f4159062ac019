"""A target file: ``.npy`` (optionally gzipped), or text with one number a line (``#``
comments). Read whole (:func:`read`) or the values of a worker's rows (:func:`read_part`):
a text target split by byte ranges, its values sent to the workers owning their rows; an
``.npy`` target read whole by every worker and sliced."""
import numpy as np

from ..transport import Peers
from .agree import agree, attempt, refuse
from .npz import read_npy
from .svmlight import _count, _fill, bad_line, max_features, open_text
from .source import line_range


def read_part(peers, path, cuts):
    """y[cuts[w]:cuts[w + 1]] of this worker w (``cuts``: every worker's first row, and
    the number of samples last), the file holding exactly that many."""
    w, W = peers.rank, peers.size
    n = int(cuts[-1])
    if path.lower().endswith((".npy", ".npy.gz")):
        y = attempt(peers, read_npy, path)
        if y.size != n:
            refuse(peers, f"{path}: {y.size} targets for {n} samples")
        return np.ascontiguousarray(y[cuts[w]:cuts[w + 1]])
    src, buf = attempt(peers, open_text, path, "target")
    lo, hi = line_range(buf, w, W, src.bom)
    b = buf[lo:hi]
    line, ls, rows, *_ = _count(b, True, max_features())
    agree(peers, bad_line(path, buf, lo, line, ls, True) if line else None)
    y = np.empty(rows)
    _fill(b, 0, np.zeros(1, np.int32), np.zeros(0, np.int32), np.zeros(0), y, rows + 1)
    counts = peers.allgather(rows)
    total = sum(counts)
    if total != n:
        refuse(peers, f"{path}: {total} targets for {n} samples")
    mine = sum(counts[:w])  # my values are targets mine .. mine + rows - 1
    return np.concatenate(peers.alltoall([y[max(cuts[o] - mine, 0):
                                            max(min(cuts[o + 1] - mine, rows), 0)]
                                          for o in range(W)]))


def read(path, n_samples):
    """The whole target, holding ``n_samples`` values."""
    return read_part(Peers(), path, [0, n_samples])
