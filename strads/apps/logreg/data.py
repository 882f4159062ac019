"""Logistic regression data: the Lasso app's readers (LIBSVM/svmlight, MatrixMarket with
a target file, .npz), two-valued labels, and the built-in problem."""
import numpy as np

from ...engine import DataError
from ..lasso import data as _lasso_data


def load(path, target=None):
    """``(X, y)`` from a file, as the Lasso app reads it (y: the raw labels)."""
    return _lasso_data.load(path, target)


def check(X, y, name="data"):
    """Validate X and y (as the Lasso app) and map the labels to -1/+1.

    Returns ``(X, y_pm, classes)``: ``classes`` holds the two original label values,
    the smaller first; it becomes -1, the larger +1. Anything but exactly two distinct
    labels is refused with one line."""
    kind = X.dtype.kind if hasattr(X, "dtype") else np.asarray(X).dtype.kind
    if kind == "c":
        raise DataError(f"{name}: X is complex; logistic regression needs real numbers")
    yk = y.dtype.kind if hasattr(y, "dtype") else np.asarray(y).dtype.kind
    if yk not in "biuf":
        raise DataError(f"{name}: labels must be numbers, got dtype {np.asarray(y).dtype}")
    X, y = _lasso_data.check(X, y, name)
    classes = np.unique(y)
    if classes.shape[0] == 1:
        raise DataError(f"{name}: every label is {_fmt(classes[0])}: logistic regression "
                        "needs samples of two classes")
    if classes.shape[0] > 2:
        shown = ", ".join(_fmt(c) for c in classes[:5]) + (", ..." if classes.shape[0] > 5
                                                          else "")
        i = _third(y)
        raise DataError(f"{name}: {classes.shape[0]} distinct labels ({shown}): logistic "
                        f"regression needs exactly two (sample {i + 1} has a third, "
                        f"{_fmt(y[i])})")
    y_pm = np.where(y == classes[1], 1.0, -1.0)
    return X, y_pm, classes


def _third(y):
    """The index of the first sample whose label is neither of the first two seen."""
    first = y[0]
    other = np.flatnonzero(y != first)
    second = y[other[0]]
    return int(np.flatnonzero((y != first) & (y != second))[0])


def _fmt(v):
    v = float(v)
    return str(int(v)) if v.is_integer() and abs(v) < 1e15 else repr(v)


def make_problem(n_samples=2000, n_features=10000, density=0.01, n_informative=100,
                 corr=0.5, snr=3.0, dense=False, seed=0):
    """The built-in problem: X as the Lasso app's (sparse: X = R B with neighbouring
    columns correlated; dense: AR(1) rows with correlation ``corr``), labels
    y = sign(X w + noise) in {-1, +1} with ``n_informative`` non-zeros in w and
    ||X w|| / ||noise|| = snr. Deterministic in ``seed``. Returns ``(X, y, w)``."""
    X, t, w = _lasso_data.make_problem(n_samples, n_features, density, n_informative,
                                       corr, snr, dense, seed)
    return X, np.where(t > 0, 1.0, -1.0), w
