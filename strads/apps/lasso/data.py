"""Lasso data: readers (LIBSVM/svmlight, MatrixMarket, .npz) and the built-in problem.

Every reader returns ``(X, y)`` with X a CSC matrix (sorted indices) or a Fortran-ordered
dense array, both float64, and raises :class:`strads.DataError` naming the file, the line
and the problem on anything malformed.
"""
import os

import numpy as np
import scipy.sparse as sp

from ...engine import DataError


def _finite(arr, what, path, where):
    bad = np.flatnonzero(~np.isfinite(arr))
    if bad.size:
        raise DataError(f"{path}: {where(bad[0])}: {what} is {arr.flat[bad[0]]}, not finite")


def read_svmlight(path):
    """LIBSVM / svmlight text: ``label index:value ...`` per line, ``#`` comments.
    Indices are 1-based, unless a 0 index appears (then all are read as 0-based)."""
    labels, rows, cols, vals = [], [], [], []
    with open(path, "rb") as f:
        for lineno, raw in enumerate(f, 1):
            line = raw.split(b"#", 1)[0].strip()
            if not line:
                continue
            parts = line.split()
            try:
                label = float(parts[0])
            except ValueError:
                raise DataError(f"{path}:{lineno}: label {parts[0].decode(errors='replace')!r}"
                                " is not a number") from None
            if not np.isfinite(label):
                raise DataError(f"{path}:{lineno}: label is {label}, not finite")
            row = len(labels)
            labels.append(label)
            last = -1
            for tok in parts[1:]:
                idx, sep, val = tok.partition(b":")
                if idx == b"qid":
                    continue
                try:
                    if not sep:
                        raise ValueError
                    j, v = int(idx), float(val)
                except ValueError:
                    raise DataError(f"{path}:{lineno}: {tok.decode(errors='replace')!r} is "
                                    "not index:value") from None
                if j < 0:
                    raise DataError(f"{path}:{lineno}: feature index {j} is negative")
                if j <= last:
                    raise DataError(f"{path}:{lineno}: feature indices must increase "
                                    f"({j} after {last})")
                if not np.isfinite(v):
                    raise DataError(f"{path}:{lineno}: feature {j} has value {v}, not finite")
                last = j
                rows.append(row)
                cols.append(j)
                vals.append(v)
    if not labels:
        raise DataError(f"{path}: no samples (empty file)")
    cols = np.asarray(cols, dtype=np.int64)
    if cols.size and cols.min() > 0:
        cols -= 1  # 1-based, as LIBSVM writes
    n_features = int(cols.max()) + 1 if cols.size else 0
    if n_features == 0:
        raise DataError(f"{path}: no features (every sample is empty)")
    X = sp.csc_matrix((np.asarray(vals, dtype=np.float64), (np.asarray(rows), cols)),
                      shape=(len(labels), n_features))
    return X, np.asarray(labels, dtype=np.float64)


def read_target(path, n_samples):
    """A target vector: .npy, or text with one number per line."""
    if path.endswith(".npy"):
        try:
            y = np.load(path, allow_pickle=False)
        except (ValueError, OSError) as e:
            raise DataError(f"{path}: cannot read as .npy: {e}") from None
        y = np.asarray(y, dtype=np.float64).ravel()
        _finite(y, "target", path, lambda i: f"entry {i}")
    else:
        vals = []
        with open(path) as f:
            for lineno, line in enumerate(f, 1):
                s = line.split("#", 1)[0].strip()
                if not s:
                    continue
                try:
                    v = float(s)
                except ValueError:
                    raise DataError(f"{path}:{lineno}: {s!r} is not a number") from None
                if not np.isfinite(v):
                    raise DataError(f"{path}:{lineno}: target is {v}, not finite")
                vals.append(v)
        y = np.asarray(vals, dtype=np.float64)
    if y.size != n_samples:
        raise DataError(f"{path}: {y.size} targets for {n_samples} samples")
    return y


def _read_mtx(path):
    import scipy.io  # only here: it is slow to import, and every rank imports this module

    try:
        A = scipy.io.mmread(path)
    except Exception as e:  # scipy raises many kinds; say which file and why
        raise DataError(f"{path}: not a valid MatrixMarket file: {e}") from None
    if sp.issparse(A):
        A = A.tocoo()
        _finite(A.data, "value", path,
                lambda k: f"entry (row {A.row[k] + 1}, column {A.col[k] + 1})")
    else:
        A = np.asarray(A, dtype=np.float64)
        _finite(A, "value", path, lambda k: "entry (row %d, column %d)" % (
            k // A.shape[1] + 1, k % A.shape[1] + 1))
    return A


def _read_npz(path):
    try:
        z = np.load(path, allow_pickle=False)
        keys = set(z.files)
        if {"data", "indices", "indptr", "shape", "format"} <= keys:  # scipy.sparse.save_npz
            X, y = sp.load_npz(path), (z["y"] if "y" in keys else None)
        elif "X" in keys:
            X, y = z["X"], (z["y"] if "y" in keys else None)
        else:
            raise DataError(f"{path}: expected arrays 'X' and 'y', or a scipy.sparse.save_npz "
                            f"matrix; found {sorted(keys)}")
    except (ValueError, OSError, KeyError) as e:
        raise DataError(f"{path}: cannot read as .npz: {e}") from None
    if not sp.issparse(X):
        X = np.asarray(X)
        if X.dtype == object or X.ndim != 2:
            raise DataError(f"{path}: X must be a 2-D numeric array, got shape {X.shape}")
    if y is not None:
        y = np.asarray(y, dtype=np.float64).ravel()
        _finite(y, "y", path, lambda i: f"y[{i}]")
    return X, y


def load(path, target=None):
    """Read ``(X, y)`` from LIBSVM text, MatrixMarket (.mtx, y from ``target``) or .npz
    (arrays X and y, or a scipy sparse matrix with y from ``target``)."""
    if not os.path.isfile(path):
        raise DataError(f"{path}: no such file")
    if os.path.getsize(path) == 0:
        raise DataError(f"{path}: empty file")
    low = path.lower()
    if low.endswith((".mtx", ".mm", ".mtx.gz")):
        X, y = _read_mtx(path), None
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
