"""Parallel loading of a ``--data`` file for logistic regression: each worker reads its
own part, with the Lasso app's reader (:func:`strads.apps.lasso.loading.read_rows`:
LIBSVM and MatrixMarket coordinate text, plain or gzip, a target file split as the
rows; the first bad line of the file named wherever it lies).

The workers then agree, with their collectives, on the labels: the two distinct values
(anything else is refused with the whole-file reader's one line, :func:`data.check`'s,
which for more than two names the first sample holding a third, in file order), mapped
to -1/+1 (the smaller to -1); and on what the scheduler needs of the whole data: the
columns' squared norms and q0 = X'y (lambda_max), summed in worker order. Worker 0
reports them once, with n, the number of features, the kept (non-empty) columns and the
two labels; rank 0 completes its aggregate and schedule from them (``begin``).
"""
import numpy as np
import scipy.sparse as sp

from ..lasso import loading as _lasso
from . import kernels as K
from .data import _fmt

needs_rank0 = _lasso.needs_rank0


def shard(path, target, name=None):
    """Every worker's description: the file (and target) it reads its part of, and
    ``name``, the path as the user gave it (the label messages name it so)."""
    return dict(_lasso.shard(path, target), name=name or path)


def _first(values):
    return next((v for v in values if v is not None), None)


def _classes(peers, y, first_row, name):
    """The two label values, agreed on by every worker (sorted); a label set of any other
    size is refused with :func:`data.check`'s message, raised by worker 0."""
    mine = np.unique(y)
    # each worker's three smallest values: their union has at most two values exactly
    # when the whole file's has (a worker with three or more sends three)
    few = np.unique(np.concatenate(peers.allgather(mine[:3])))
    if few.shape[0] == 2:
        return few
    if few.shape[0] == 1:
        msg = (f"{name}: every label is {_fmt(few[0])}: logistic regression needs "
               "samples of two classes")
    else:  # how many, and the first sample (in file order) with a third value
        classes = np.unique(np.concatenate(peers.allgather(mine)))
        shown = ", ".join(_fmt(c) for c in classes[:5]) + (", ..." if classes.shape[0] > 5
                                                          else "")
        a = _first(peers.allgather(float(y[0]) if y.shape[0] else None))
        other = y[y != a]
        b = _first(peers.allgather(float(other[0]) if other.shape[0] else None))
        at = np.flatnonzero((y != a) & (y != b))
        i, v = _first(peers.allgather((first_row + int(at[0]), float(y[at[0]]))
                                      if at.shape[0] else None))
        msg = (f"{name}: {classes.shape[0]} distinct labels ({shown}): logistic "
               f"regression needs exactly two (sample {i + 1} has a third, {_fmt(v)})")
    _lasso.refuse_on_first(peers, msg)


def read_part(peers, shard):
    """This worker's rows of the file (a shard as :func:`strads.apps.lasso.row_block`
    makes them, with ``y`` in {-1, +1}), their squared column norms summed over every
    worker (``sq_norms``), and the facts worker 0 reports (``facts``; the other workers'
    is their row count)."""
    rows = _lasso.read_rows(peers, shard)
    indptr, indices, data = rows["csc"]
    n_rows = rows["n_rows"]
    y = rows["y"]
    classes = _classes(peers, y, rows["first"], shard.get("name", shard["file"]))
    y = np.where(y == classes[1], 1.0, -1.0)
    sq = peers.allreduce(K.csc_sq_norms(indptr, data))
    X = sp.csc_matrix((data, indices, indptr), shape=(n_rows, indptr.shape[0] - 1),
                      copy=False)
    q0 = peers.allreduce(np.asarray(X.T @ y, dtype=np.float64))
    del X
    if peers.rank == 0:
        facts = {"n": int(rows["n"]), "n_features": int(rows["n_features"]),
                 "kept": rows["kept"], "sq_norms": sq, "q0": q0, "classes": classes,
                 "n_rows": n_rows}
    else:
        facts = {"n_rows": n_rows}
    _lasso._read_only(indptr, indices, data, y)
    return {"csc": (indptr, indices, data), "n_rows": n_rows, "y": y,
            "first": rows["first"], "facts": facts, "sq_norms": sq}
