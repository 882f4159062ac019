"""NumPy files: an ``.npz`` of arrays X and y (or a ``scipy.sparse.save_npz`` matrix: CSR,
CSC, COO, BSR or DIA), and an ``.npy`` target; either may be gzip-compressed. Read whole:
rank 0 splits them (docs/architecture.md)."""
import io
import math

import numpy as np
import scipy.sparse as sp

from ..errors import DataError
from .source import Text
from .svmlight import WORDS, by_name, check_size

#: the arrays of a save_npz matrix of each format, besides ``format`` and ``shape``
SPARSE = {"csr": ("data", "indices", "indptr"), "csc": ("data", "indices", "indptr"),
          "bsr": ("data", "indices", "indptr"), "coo": ("data", "row", "col"),
          "dia": ("data", "offsets")}
INT64 = 1 << 63


def _bytes(path):
    """The file, or (gzip-compressed) its decompressed bytes as a stream."""
    src = Text(path, words=WORDS, binary=True)
    return io.BytesIO(src.map().tobytes()) if src.gz else path


def _members(path, z):
    """(shape, dtype, bytes held after the header) of each array of an open .npz, from
    the .npy headers alone."""
    from numpy.lib import format as npf

    out = {}
    names = set(z.zip.namelist())
    for name in z.files:
        member = name + ".npy" if name + ".npy" in names else name
        with z.zip.open(member) as f:
            version = npf.read_magic(f)
            read = {(1, 0): npf.read_array_header_1_0,
                    (2, 0): npf.read_array_header_2_0}.get(version)
            if read is None:  # (3.0: UTF-8 field names, a structured array: not numbers)
                raise DataError(f"{path}: array {name!r}: .npy format version {version} "
                                "not read")
            shape, _, dtype = read(f)
            held = z.zip.getinfo(member).file_size - f.tell()
        if dtype.hasobject:
            raise DataError(f"{path}: array {name!r} holds Python objects "
                            "(not read: it would need pickle)")
        out[name] = (shape, dtype, held)
    return out


def _load(path, z, members, name):
    """Array ``name``, once its member is seen to hold the bytes its header declares
    (else NumPy would allocate them first)."""
    shape, dtype, held = members[name]
    need = math.prod(shape) * dtype.itemsize
    if need > held:
        raise DataError(f"{path}: array {name!r} declares shape {shape} of {dtype} "
                        f"({need} bytes) but holds {max(held, 0)} bytes")
    return z[name]


def read(path):
    """``(X, y)``: X dense or sparse as saved, y None when the file holds none."""
    src = _bytes(path)
    try:
        with np.load(src, allow_pickle=False) as z:
            members = _members(path, z)
            keys = set(members)
            if {"format", "shape", "data"} <= keys:  # save_npz
                X = _sparse(path, z, members)
            elif "X" in keys:
                shape, dtype, _ = members["X"]
                if dtype.kind not in "biuf":
                    raise DataError(f"{path}: X has dtype {dtype}, not real numbers")
                if len(shape) != 2:
                    raise DataError(f"{path}: X must be a 2-D numeric array, got shape "
                                    f"{shape}")
                check_size(path, shape[0], shape[1], None)
                X = _load(path, z, members, "X")
            else:
                raise DataError(f"{path}: expected arrays 'X' and 'y', or a "
                                f"scipy.sparse.save_npz matrix; found {sorted(keys)}")
            y = None
            if "y" in keys:
                shape, dtype, _ = members["y"]
                if dtype.kind not in "biuf":
                    raise DataError(f"{path}: y has dtype {dtype}, not real numbers")
                if math.prod(shape) != X.shape[0]:  # (then nothing of another size is read)
                    raise DataError(f"{path}: y has {math.prod(shape)} entries but X has "
                                    f"{X.shape[0]} rows")
                y = _load(path, z, members, "y")
    except DataError:
        raise
    except Exception as e:  # zip, zlib, header and format errors: many kinds
        raise DataError(f"{path}: cannot read as .npz: {type(e).__name__}: {e}"
                        f"{by_name('.npz')}") from None
    if y is not None:
        y = np.asarray(y, dtype=np.float64).ravel()
        bad = np.flatnonzero(~np.isfinite(y))
        if bad.size:
            raise DataError(f"{path}: y[{bad[0]}] is {y[bad[0]]}, not finite")
    return X, y


def holds_y(path):
    """Whether the .npz holds an array y (from its directory; an unreadable file: False,
    for :func:`read` to say why)."""
    try:
        with np.load(_bytes(path), allow_pickle=False) as z:
            return "y" in z.files
    except Exception:  # (DataError among them: a missing or foreign file)
        return False


def _sparse(path, z, members):
    """The save_npz matrix of an open .npz, each of its arrays checked before SciPy sees
    it (a sparse array is read as a matrix: the same numbers)."""
    def small(name, ndim, kinds):
        shape, dtype, _ = members[name]
        if len(shape) != ndim or dtype.kind not in kinds or math.prod(shape) > 16:
            raise DataError(f"{path}: {name!r} of a save_npz matrix must be a "
                            f"{ndim}-D {'string' if 'S' in kinds else 'integer'} array, "
                            f"got shape {shape} of {dtype}")
        return _load(path, z, members, name)

    fmt = small("format", 0, "SU").item()
    fmt = fmt.decode("ascii", "replace") if isinstance(fmt, bytes) else fmt
    if fmt not in SPARSE:
        raise DataError(f"{path}: sparse format {fmt!r} is not one of "
                        f"{', '.join(SPARSE)}")
    shape = small("shape", 1, "iu")
    got = tuple(int(s) for s in shape)
    if len(got) != 2:
        raise DataError(f"{path}: a sparse matrix must be 2-D, got shape {got}")
    if not all(0 <= s < INT64 for s in got):
        raise DataError(f"{path}: a sparse matrix's shape must be two non-negative 64-bit "
                        f"integers, got {got}")
    M, N = (int(s) for s in shape)
    coords = "coords" in members and fmt == "coo"
    names = ("data", "coords") if coords else SPARSE[fmt]
    missing = [k for k in names if k not in members]
    if missing:
        raise DataError(f"{path}: a save_npz {fmt} matrix lacks {', '.join(missing)}")
    dshape, dtype, _ = members["data"]
    if dtype.kind not in "biuf":
        raise DataError(f"{path}: the matrix has dtype {dtype}, not real numbers")
    nnz = math.prod(dshape)
    check_size(path, M, N, nnz)

    def index(name, shape, what):
        """Integer index array ``name`` of ``shape`` (its header checked first: nothing
        of another length is read); ``what`` says what the shape must be."""
        shp, dt, _ = members[name]
        if len(shp) != len(shape) or dt.kind not in "iu":
            raise DataError(f"{path}: {name!r} of a {fmt} matrix must be a {len(shape)}-D "
                            f"integer array, got shape {shp} of {dt}")
        if shp != shape:
            raise DataError(f"{path}: {what}, got {name} of shape {shp}")
        a = _load(path, z, members, name)
        if a.size and a.dtype.kind == "u" and int(a.max()) >= INT64:
            raise DataError(f"{path}: {name}[{int(a.argmax())}] = {int(a.max())} is out "
                            "of range")
        return a.astype(np.int64, copy=False)

    def values():  # (as float64: SciPy's conversions of some dtypes fail)
        return _load(path, z, members, "data").astype(np.float64)

    def within(name, a, hi):
        bad = np.flatnonzero((a < 0) | (a >= hi))
        if bad.size:
            k = int(bad[0])
            raise DataError(f"{path}: {name}[{k}] = {int(a[k])} is outside 0..{hi - 1} "
                            f"(the matrix is {M} x {N})")

    if fmt == "dia":
        need = "a dia matrix needs data of shape (diagonals, length) and one offset per " \
               "diagonal"
        if len(dshape) != 2:
            raise DataError(f"{path}: {need}, got data of shape {dshape}")
        offsets = index("offsets", dshape[:1], need)
        if np.unique(offsets).shape[0] != offsets.shape[0]:
            raise DataError(f"{path}: a dia matrix's offsets repeat")
        keep = (offsets > -M) & (offsets < N)  # others hold no entry of the matrix
        return sp.dia_matrix((values()[keep], offsets[keep]), shape=(M, N))
    if fmt == "coo":
        need = "a coo matrix needs as many rows and columns as values"
        if len(dshape) != 1:
            raise DataError(f"{path}: {need}, got values of shape {dshape}")
        if coords:
            row, col = index("coords", (2,) + dshape, need)
        else:
            row, col = index("row", dshape, need), index("col", dshape, need)
        within("row", row, M)
        within("col", col, N)
        return sp.coo_matrix((values(), (row, col)), shape=(M, N))
    R = C = 1
    if fmt == "bsr":  # blocks of R x C entries
        R, C = dshape[1:3] if len(dshape) == 3 else (0, 0)
        if R < 1 or C < 1 or M % R or N % C:
            raise DataError(f"{path}: a bsr matrix needs data of shape (blocks, R, C) with "
                            f"R and C dividing {M} x {N}, got {dshape}")
    elif len(dshape) != 1:
        raise DataError(f"{path}: data of a {fmt} matrix must be 1-D, got shape {dshape}")
    major, minor = (M // R, N // C) if fmt != "csc" else (N, M)
    indptr = index("indptr", (major + 1,), f"indptr of a {M} x {N} {fmt} matrix must have "
                   f"{major + 1} entries")
    indices = index("indices", dshape[:1], f"a {fmt} matrix needs one index for each of "
                    f"its {dshape[0]} values")
    steps = np.diff(indptr)
    if indptr[0] != 0 or indptr[-1] != indices.shape[0] or (steps < 0).any():
        k = int(np.flatnonzero(steps < 0)[0]) + 1 if (steps < 0).any() else \
            0 if indptr[0] != 0 else major
        raise DataError(f"{path}: indptr[{k}] = {int(indptr[k])}: indptr must rise from 0 to "
                        f"the number of entries ({indices.shape[0]}) and never fall")
    within("indices", indices, minor)
    cls = {"csr": sp.csr_matrix, "csc": sp.csc_matrix, "bsr": sp.bsr_matrix}[fmt]
    return cls((values(), indices, indptr), shape=(M, N))


def read_npy(path):
    """A target vector from a .npy file: real numbers, finite."""
    src = _bytes(path)
    try:
        y = np.load(src, allow_pickle=False, mmap_mode=None)
    except Exception as e:  # a corrupt .npy raises many kinds
        raise DataError(f"{path}: cannot read as .npy: {e}{by_name('.npy')}") from None
    if not isinstance(y, np.ndarray) or y.dtype.kind not in "biuf":
        raise DataError(f"{path}: a .npy target must hold real numbers, got "
                        f"{getattr(y, 'dtype', type(y).__name__)}")
    y = np.asarray(y, dtype=np.float64).ravel()
    bad = np.flatnonzero(~np.isfinite(y))
    if bad.size:
        raise DataError(f"{path}: entry {bad[0]}: target is {y[bad[0]]}, not finite")
    return y
