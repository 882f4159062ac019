"""Logistic regression data: the Lasso app's readers and built-in problem, with
two-valued labels mapped to -1/+1 (the smaller to -1); in parallel loading the workers
agree on the two labels (else :func:`check`'s refusal, naming the first sample holding a
third) and worker 0 reports q0 = X'y instead of the Lasso's X'y and y'y."""
import numpy as np

from ...errors import DataError
from ...io.agree import refuse
from ..lasso import data as _lasso_data

needs_rank0 = _lasso_data.needs_rank0
load = _lasso_data.load  # (y: the raw labels)


def check(X, y, name="data"):
    """Validate X and y (as the Lasso app) and map the labels to -1/+1: ``(X, y_pm,
    classes)``, ``classes`` the two label values (the smaller, -1, first)."""
    kind = X.dtype.kind if hasattr(X, "dtype") else np.asarray(X).dtype.kind
    if kind == "c":
        raise DataError(f"{name}: X is complex; logistic regression needs real numbers")
    yk = y.dtype.kind if hasattr(y, "dtype") else np.asarray(y).dtype.kind
    if yk not in "biuf":
        raise DataError(f"{name}: labels must be numbers, got dtype {np.asarray(y).dtype}")
    X, y = _lasso_data.check(X, y, name)
    classes = np.unique(y)
    if classes.shape[0] != 2:
        i = _third(y) if classes.shape[0] > 2 else 0
        raise DataError(_not_two(name, classes, i, y[i]))
    return X, np.where(y == classes[1], 1.0, -1.0), classes


def _not_two(name, classes, i, v):
    """The refusal of labels ``classes`` (sorted) that are not two; sample ``i`` (0-based)
    holds the first third label, ``v``."""
    if classes.shape[0] == 1:
        return (f"{name}: every label is {_fmt(classes[0])}: logistic regression needs "
                "samples of two classes")
    shown = ", ".join(_fmt(c) for c in classes[:5]) + (", ..." if classes.shape[0] > 5
                                                      else "")
    return (f"{name}: {classes.shape[0]} distinct labels ({shown}): logistic regression "
            f"needs exactly two (sample {i + 1} has a third, {_fmt(v)})")


def _third(y):
    """The index of the first sample whose label is neither of the first two seen."""
    first = y[0]
    second = y[y != first][0]
    return int(np.flatnonzero((y != first) & (y != second))[0])


def _fmt(v):
    v = float(v)
    return str(int(v)) if v.is_integer() and abs(v) < 1e15 else repr(v)


def make_problem(n_samples=2000, n_features=10000, density=0.01, n_informative=100,
                 corr=0.5, snr=3.0, dense=False, seed=0):
    """The built-in problem: the Lasso app's X, w and target t, labels y = sign(t) in
    {-1, +1}. Returns ``(X, y, w)``."""
    X, t, w = _lasso_data.make_problem(n_samples, n_features, density, n_informative,
                                       corr, snr, dense, seed)
    return X, np.where(t > 0, 1.0, -1.0), w


# -- parallel loading: each worker reads its own part ---------------------------------------
def shard(path, target, name=None):
    """The Lasso's shard, with ``name``: the path as the user gave it (for messages)."""
    return dict(_lasso_data.shard(path, target), name=name or path)


def _first(values):
    return next((v for v in values if v is not None), None)


def _classes(peers, y, first_row, name):
    """The two label values, agreed on by every worker (sorted); a label set of any other
    size is refused with :func:`check`'s message, raised by worker 0."""
    mine = np.unique(y)
    # each worker's three smallest values: their union has at most two values exactly
    # when the whole file's has (a worker with three or more sends three)
    few = np.unique(np.concatenate(peers.allgather(mine[:3])))
    if few.shape[0] == 2:
        return few
    i = v = None
    if few.shape[0] > 2:  # how many, and the first sample (in file order) with a third value
        few = np.unique(np.concatenate(peers.allgather(mine)))
        a = _first(peers.allgather(float(y[0]) if y.shape[0] else None))
        other = y[y != a]
        b = _first(peers.allgather(float(other[0]) if other.shape[0] else None))
        at = np.flatnonzero((y != a) & (y != b))
        i, v = _first(peers.allgather((first_row + int(at[0]), float(y[at[0]]))
                                      if at.shape[0] else None))
    refuse(peers, _not_two(name, few, i, v))


def read_part(peers, shard):
    """:func:`strads.apps.lasso.data.read_part` with the two labels agreed on, y in
    {-1, +1}."""
    return _lasso_data.read_part(peers, shard, _classes)
