"""NumPy files: an ``.npz`` of arrays X and y (or a ``scipy.sparse.save_npz`` matrix), and
an ``.npy`` target; either may be gzip-compressed. Read whole: rank 0 splits them."""
import io
import math

import numpy as np
import scipy.sparse as sp

from ..errors import DataError
from .source import Text
from .svmlight import WORDS, check_size


def _bytes(path):
    """(the file, or its decompressed bytes as a stream; gzip-compressed or not)."""
    src = Text(path, words=WORDS, binary=True)
    return (io.BytesIO(src.map().tobytes()), True) if src.gz else (path, False)


def _members(z):
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


def read(path):
    """``(X, y)``: X dense or sparse as saved, y None when the file holds none."""
    src, gz = _bytes(path)
    try:
        with np.load(src, allow_pickle=False) as z:
            members = _members(z)
            for name, (shape, dtype) in members.items():
                if dtype.hasobject:
                    raise DataError(f"{path}: array {name!r} holds Python objects "
                                    "(not read: it would need pickle)")
            keys = set(members)
            if {"data", "indices", "indptr", "shape", "format"} <= keys:  # save_npz
                shape = tuple(int(s) for s in z["shape"])
                if len(shape) != 2 or min(shape) < 0:
                    raise DataError(f"{path}: a sparse matrix must be 2-D, got shape {shape}")
                nnz = math.prod(int(k) for k in members["data"][0])
                check_size(path, shape[0], shape[1], nnz)
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


def read_npy(path):
    """A target vector from a .npy file: real numbers, finite."""
    src, _ = _bytes(path)
    try:
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
