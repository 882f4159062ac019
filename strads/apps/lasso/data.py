"""Lasso data: the readers of :mod:`strads.io` (LIBSVM/svmlight, MatrixMarket, .npz, a
target file), whole or each worker's part, the check of a problem and the built-in one.
Notes: docs/apps/lasso.md."""
import math

import numpy as np
import scipy.sparse as sp

from ...errors import DataError
from ...io import mtx, npz, svmlight, target as target_file
from ...io.agree import refuse
from ...io.source import Content, Name
from ..glm import kernels as K


def kind_of(path):
    """'mtx', 'npz' or 'svm', by the name (a .gz suffix aside)."""
    low = path.lower().removesuffix(".gz")
    return "mtx" if low.endswith((".mtx", ".mm")) else "npz" if low.endswith(".npz") else "svm"


def load(path, target=None):
    """Read ``(X, y)`` from LIBSVM text, MatrixMarket (.mtx/.mm, y from ``target``) or
    .npz (arrays X and y, or a scipy sparse matrix with y from ``target``); text files
    may be gzipped and may start with a UTF-8 BOM. A ``target`` given is y, also for a
    file that holds y: its LIBSVM labels or array y are read and checked, then replaced
    (the command line refuses that pair: ``glm.cli.own_target``)."""
    kind = kind_of(path)
    if kind == "mtx":
        X, y = mtx.read(path), None
    elif kind == "npz":
        X, y = npz.read(path)
    else:
        X, y = svmlight.read(path)
    if target is not None:
        y = target_file.read(target, X.shape[0])
    if y is None:
        raise DataError(f"{path}: holds no target vector; pass it with --target FILE")
    return check(X, y, path)


def check(X, y, name="data"):
    """Validate and convert to the kernels' layout (CSC with sorted indices, or F-order)."""
    kind = X.dtype.kind if hasattr(X, "dtype") else np.asarray(X).dtype.kind
    if kind == "c":
        raise DataError(f"{name}: X is complex; the Lasso needs real numbers")
    if sp.issparse(X):
        X = sp.csc_matrix(X, dtype=np.float64)
        X.sum_duplicates()  # also sorts the indices; scipy's int32 indices kept (less traffic)
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
    # before allocating: sparse X = R B and its parts take about 3 copies of the entries
    svmlight.check_size("the built-in problem (--n-samples, --n-features, --density)",
                        n_samples, n_features,
                        None if dense else 3 * math.ceil(n_samples * n_features * density))
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


def make_zipf_problem(n=6667, p=30000, per_row=40, n_informative=300, seed=0):
    """``(X CSC, y)`` like bag-of-words data: each row ``per_row`` draws of a feature with
    probability ~ 1/rank, counts log1p-scaled; y = X w + 1 + 0.5 N(0, 1), w with
    ``n_informative`` N(0, 1) entries (labels: y above its median)."""
    rng = np.random.default_rng(seed)
    prob = 1.0 / np.arange(1, p + 1)
    cols = rng.permutation(p)[rng.choice(p, size=n * per_row, p=prob / prob.sum())]
    X = sp.csr_matrix((np.ones(n * per_row), (np.repeat(np.arange(n), per_row), cols)),
                      shape=(n, p))
    X.sum_duplicates()
    X.data = np.log1p(X.data)
    w = np.zeros(p)
    w[rng.choice(p, n_informative, replace=False)] = rng.standard_normal(n_informative)
    return X.tocsc(), X @ w + 1.0 + 0.5 * rng.standard_normal(n)


# -- parallel loading: each worker reads its own part ---------------------------------------
def needs_rank0(path):
    """True for the inputs rank 0 reads whole and splits into shards: .npz (no line to
    split at) and dense MatrixMarket (values in column-major order)."""
    kind = kind_of(path)
    return kind == "npz" or (kind == "mtx" and mtx.is_dense(path))


def shard(path, target):
    """The description every worker gets (it reads its part itself), with the files'
    content for a resume's check (:class:`strads.io.source.Content`)."""
    return {"file": Name(path), "target": None if target is None else Name(target),
            "content": Content(path, target)}


def read_part(peers, shard, classes=None):
    """This worker's rows of ``shard["file"]`` (and of its target) as
    :func:`strads.apps.lasso.row_block` makes them, with ``y``, the facts worker 0
    reports (``facts``; the others': their row count) and, if ``shard["norms"]``, the
    squared column norms over every worker (``sq_norms``). ``classes(peers, y, first,
    name)``: logistic regression's two labels, y mapped to -1/+1 (facts ``q0`` and
    ``classes`` instead of ``xty`` and ``yy``)."""
    path, target = shard["file"], shard.get("target")
    rows = (mtx if kind_of(path) == "mtx" else svmlight).read_part(peers, path)
    if target is not None:
        cuts = rows.get("cuts")
        if cuts is None:
            cuts = np.cumsum([0] + peers.allgather(rows["n_rows"]))
        rows["y"] = target_file.read_part(peers, target, cuts)
    elif rows["y"] is None:
        refuse(peers, f"{path}: holds no target vector; pass it with --target FILE")
    n_rows, y, first, n, p, kept = (rows[k] for k in ("n_rows", "y", "first", "n",
                                                      "n_features", "kept"))
    indptr, indices, data = rows["csc"]
    del rows
    if classes is not None:
        classes = classes(peers, y, first, shard.get("name", shard["file"]))
        y = np.where(y == classes[1], 1.0, -1.0)
    sq = _summed(peers, K.csc_sq_norms(indptr, data))
    X = sp.csc_matrix((data, indices, indptr), shape=(n_rows, indptr.shape[0] - 1),
                      copy=False)
    xty = _summed(peers, np.asarray(X.T @ y, dtype=np.float64))
    del X
    if classes is None:  # (col_nnz: the working set's pieces)
        labels = {"xty": xty, "yy": float(peers.allreduce(np.array([float(y @ y)]))[0]),
                  "col_nnz": _summed(peers, np.diff(indptr).astype(
                      np.int32 if n < 2**31 else np.int64))}
    else:
        labels = {"q0": xty, "classes": classes}
    facts = {"n_rows": n_rows}
    if peers.rank == 0:
        facts = {"n": int(n), "n_features": int(p), "kept": kept, "sq_norms": sq, **labels,
                 "n_rows": n_rows}
    # read-only: in one process the scheduler takes worker 0's facts without a copy
    for a in (indptr, indices, data, y, sq, kept, *labels.values()):
        if isinstance(a, np.ndarray):
            a.flags.writeable = False
    part = {"csc": (indptr, indices, data), "n_rows": n_rows, "y": y, "first": first,
            "facts": facts}
    return dict(part, sq_norms=sq) if shard.get("norms") else part


def _summed(peers, a):
    """``peers.allreduce`` of a fresh array, made read-only (threads' workers then add
    each other's without copies)."""
    a.flags.writeable = False
    return peers.allreduce(a)
