"""Fitted estimators to and from a folder: ``est.save(DIR)`` and :func:`load`.
Notes: docs/architecture.md."""
import os
import zipfile

import numpy as np

from ..errors import DataError
from ..io import memory

_CLASSES = {"lasso": "Lasso", "logreg": "SparseLogisticRegression",
            "mf": "MatrixFactorization", "lda": "LDA"}


class Persistent:
    """``save(DIR)`` for an estimator whose class :func:`load` knows."""

    def save(self, out):
        """Write the fitted model into the folder ``out`` (summary.json, model.npz, all
        or nothing, as a command line's ``--out``); :func:`strads.load` reads it back.
        Under ``mpiexec`` every rank may call it: rank 0 writes."""
        from sklearn.utils.validation import check_is_fitted

        from .. import outputs
        from ..cli import launched_rank

        check_is_fitted(self)
        if launched_rank() != 0:
            return
        est = self._saved_as()
        app = next(a for a, c in _CLASSES.items() if c == type(est).__name__)
        model = {k: np.asarray(v) for k, v in _DUMP[app](est).items()
                 if v is not None and not (np.ndim(v) == 0 and isinstance(v, float)
                                           and not np.isfinite(v))}
        params = {k: v for k, v in est.get_params(deep=False).items()
                  if v is None or isinstance(v, (bool, int, float, str))}
        for k, v in model.items():
            if v.dtype.hasobject:
                raise ValueError(f"{type(self).__name__}.save: {k} holds Python objects "
                                 "(use numbers or strings)")
        outputs.write(out, {"app": app, "estimator": type(est).__name__,
                            "params": params}, None, model)

    def _saved_as(self):
        """The estimator whose class :func:`load` returns (LassoCV: its final Lasso)."""
        return self


def load(path):
    """The fitted estimator saved in the folder ``path``: by ``est.save(path)`` or by a
    command line's ``--out path`` (``python -m strads.apps.lasso|logreg|mf|lda``).
    Raises :class:`~strads.errors.DataError` (one line naming the file) on anything
    missing or malformed."""
    from .. import estimators, outputs

    path = os.fspath(path)
    sfile = os.path.join(path, "summary.json")
    mfile = os.path.join(path, "model.npz")
    if not os.path.isdir(path):
        raise DataError(f"{path}: no such folder (strads.load reads what --out or save() "
                        "wrote)")
    if not os.path.isfile(mfile):
        hint = (" (an early-stopping validation run that stopped early: its model is in "
                f"{os.path.join(path, 'validation')})"
                if os.path.isfile(os.path.join(path, "validation", "model.npz")) else "")
        raise DataError(f"{mfile}: no such file{hint}")
    try:
        summary = outputs.read_json(sfile)
    except FileNotFoundError:
        raise DataError(f"{sfile}: no such file") from None
    except (OSError, ValueError) as e:
        raise DataError(f"{sfile}: not a JSON summary ({e})") from None
    if not isinstance(summary, dict) or not isinstance(summary.get("app"), str) \
            or summary["app"] not in _CLASSES:
        app = summary.get("app") if isinstance(summary, dict) else None
        raise DataError(f"{sfile}: app {app!r} is not one of {sorted(_CLASSES)}")
    app = summary["app"]
    cls = getattr(estimators, _CLASSES[app])
    name = summary.get("estimator", cls.__name__)
    if name != cls.__name__:
        raise DataError(f"{sfile}: estimator {name!r} does not fit app {app!r}")
    params = summary.get("params", {})
    known = cls._get_param_names()
    if not isinstance(params, dict) or any(k not in known for k in params):
        raise DataError(f"{sfile}: params {params!r}: not parameters of {cls.__name__} "
                        f"({', '.join(known)})")
    defaults = cls().get_params()
    for k, v in params.items():
        if not _like(v, defaults[k]):
            raise DataError(f"{sfile}: params: {k} {v!r} is not a value of the kind of "
                            f"its default {defaults[k]!r}")
    model = _Model(mfile)
    try:
        cls(**params)._validate_params()  # (the estimator's own rules: tol NaN is not a
        est = _BUILD[app](cls, model, summary, params)  # value), then the model's
        est._validate_params()
        return est
    except DataError:
        raise
    except (TypeError, ValueError) as e:
        raise DataError(f"{sfile}: {e}") from None


class _Model:
    """model.npz's arrays, read one at a time and checked (never pickles)."""

    def __init__(self, file):
        self.file = file
        try:
            with zipfile.ZipFile(file) as z:
                self.sizes = {n[:-4]: i.file_size for i in z.infolist()
                              for n in [i.filename] if n.endswith(".npy")}
        except (OSError, ValueError, zipfile.BadZipFile) as e:
            raise DataError(f"{file}: not a .npz archive ({e})") from None

    def __contains__(self, key):
        return key in self.sizes

    def error(self, key, problem):
        return DataError(f"{self.file}: {key}: {problem}")

    def get(self, key, kinds, ndim, shape=None, required=True, low=None):
        """Array ``key`` of a dtype kind in ``kinds`` ("f", "i", "U"...; integers pass for
        "f"), ``ndim`` dimensions, ``shape`` (None: any length), finite, >= ``low``."""
        if key not in self.sizes:
            if required:
                raise self.error(key, "missing")
            return None
        try:
            with zipfile.ZipFile(self.file) as z, z.open(key + ".npy") as f:
                version = np.lib.format.read_magic(f)
                read = {(1, 0): np.lib.format.read_array_header_1_0,
                        (2, 0): np.lib.format.read_array_header_2_0}.get(version)
                if read is None:
                    raise self.error(key, f".npy format version {version} not read")
                hshape, _, dtype = read(f)
            if dtype.hasobject:
                raise self.error(key, "an object array (strads never loads pickles)")
            nbytes = np.prod(hshape, dtype=object) * dtype.itemsize
            if nbytes > self.sizes[key]:
                raise self.error(key, f"shape {hshape} needs more bytes than stored")
            too = memory.beyond(2 * nbytes)  # (its decompressed bytes, then the array)
            if too:
                raise self.error(key, f"shape {hshape} would need {too}")
            with np.load(self.file, allow_pickle=False) as npz:
                a = npz[key]
        except DataError:
            raise
        except (OSError, ValueError, EOFError, zipfile.BadZipFile, MemoryError) as e:
            raise self.error(key, f"unreadable ({e})") from None
        ok = kinds + ("iub" if "f" in kinds else "")
        if a.dtype.kind not in ok or a.dtype.kind == "c":
            raise self.error(key, f"dtype {a.dtype} (expected {_KINDS.get(kinds, kinds)})")
        if a.ndim != ndim or (shape is not None and any(
                s is not None and s != t for s, t in zip(shape, a.shape))):
            want = "a scalar" if ndim == 0 else \
                f"shape {tuple('n' if s is None else s for s in shape)}" if shape else \
                f"{ndim} dimension(s)"
            raise self.error(key, f"shape {a.shape} (expected {want})")
        if a.dtype.kind == "f" and not np.isfinite(a).all():
            raise self.error(key, "non-finite values")
        if low is not None and a.size and a.min() < low:
            raise self.error(key, f"values below {low}")
        return a

    def scalar(self, key, kind="f", required=True, low=None):
        a = self.get(key, kind, 0, required=required, low=low)
        return None if a is None else (float(a) if kind == "f" else int(a))


_KINDS = {"f": "numbers", "i": "integers", "U": "strings"}


def _like(v, default):
    """A parameter's value of its default's kind (None where the default is None takes
    numbers too: n_jobs, random_state, priors)."""
    number = isinstance(v, (int, float)) and not isinstance(v, bool)
    if default is None:
        return v is None or number
    if isinstance(default, bool):
        return isinstance(v, bool)
    return number if isinstance(default, (int, float)) else isinstance(v, type(default))


def _agreed(m, derived, params, loose=("fit_intercept", "biases")):
    """The estimator's parameters: summary.json's ``params`` over those ``derived`` from
    model.npz ({name: (its array, value)}), which a saved number must equal (``loose``:
    the array's value is a guess where params say nothing)."""
    for k, (key, v) in derived.items():
        if k not in loose and params.get(k) is not None and params[k] != v:
            raise m.error(key, f"gives {k} {v!r}, but summary.json's params say "
                          f"{params[k]!r}")
    return {**{k: v for k, (_, v) in derived.items()}, **params}


def _set(est, values):
    for k, v in values.items():
        setattr(est, k, v)
    return est


def _saved(m, key, summary, figure):
    """Scalar ``key`` of model.npz (n_iter: an integer >= 0), else (a command line's run
    saves none) summary.json's ``figure`` (0 or nan where absent or not a number)."""
    integer = key == "n_iter"
    x = m.scalar(key, "i" if integer else "f", required=False, low=0 if integer else None)
    if x is None:
        x = summary.get(figure)
        ok = isinstance(x, (int, float)) and not isinstance(x, bool) and np.isfinite(x)
        x = (int if integer else float)(x if ok else 0 if integer else np.nan)
    return x


# -- per app: the model file's arrays from a fitted estimator, and back -----------------
def _feature_names(est):
    names = getattr(est, "feature_names_in_", None)
    return None if names is None else np.asarray(names, dtype=str)


def _names_back(m, d, values):
    """feature_names_in_ (a DataFrame's columns at fit), if saved."""
    names = m.get("feature_names", "U", 1, (d,), required=False)
    if names is not None:
        values["feature_names_in_"] = names.astype(object)


def _dump_glm(est):
    classes = getattr(est, "classes_", None)
    if classes is not None and classes.dtype.hasobject and all(
            isinstance(c, str) for c in classes):  # (a pandas column's labels)
        classes = np.asarray(classes.tolist(), dtype=str)
    return {"coef": np.ravel(est.coef_).astype(np.float64), "lambda": float(est.alpha),
            "intercept": float(np.ravel(est.intercept_)[0]), "n_iter": int(est.n_iter_),
            "dual_gap": getattr(est, "dual_gap_", None), "classes": classes,
            "feature_names": _feature_names(est)}


def _build_glm(cls, m, summary, params):
    coef = m.get("coef", "f", 1)
    d = coef.shape[0]
    lam = m.scalar("lambda", low=0)
    intercept = m.scalar("intercept", required=False)
    logreg = cls.__name__ == "SparseLogisticRegression"
    if params.get("fit_intercept") is False and intercept:
        raise m.error("intercept", f"{intercept}, but summary.json's params say "
                      "fit_intercept false")
    est = cls(**_agreed(m, {"alpha": ("lambda", lam),
                            "fit_intercept": ("intercept", intercept is not None)}, params))
    values = {"n_features_in_": d, "n_iter_": _saved(m, "n_iter", summary, "rounds")}
    _names_back(m, d, values)
    c = 0.0 if intercept is None else intercept
    if logreg:
        classes = m.get("classes", "fU", 1, (2,))
        if classes[0] >= classes[1]:
            raise m.error("classes", f"{classes.tolist()}: not two sorted distinct labels")
        values.update(classes_=classes, coef_=coef.astype(np.float64).reshape(1, -1),
                      intercept_=np.array([c]))
    else:
        values.update(coef_=coef.astype(np.float64), intercept_=c,
                      dual_gap_=_saved(m, "dual_gap", summary, "duality_gap"))
    return _set(est, values)


def _dump_mf(est):
    return {**est._model(), "lambda": float(est.alpha), "rank": int(est.n_components),
            "n_iter": int(est.n_iter_), "objective": float(est.objective_),
            "validation_rmse": est.validation_rmse_,
            "seen_indptr": est._seen_indptr, "seen_items": est._seen_items}


def _build_mf(cls, m, summary, params):
    W = m.get("W", "f", 2)
    n_u, k = W.shape
    H = m.get("H", "f", 2, (None, k))
    n_i = H.shape[0]
    if not n_u or not n_i:
        raise m.error("W" if not n_u else "H", "no users or no items: not a fitted model")
    ub, ib = m.get("user_bias", "f", 1, (n_u,)), m.get("item_bias", "f", 1, (n_i,))
    mean = m.scalar("mean")
    ids = {}
    for key, n in (("user_ids", n_u), ("item_ids", n_i)):
        a = m.get(key, "iu", 1, (n,))
        if a.size > 1 and not (np.diff(a) > 0).all():
            raise m.error(key, "not sorted and distinct")
        ids[key] = a
    rank = m.scalar("rank", "i", required=False)
    if rank is not None and rank != k:
        raise m.error("rank", f"{rank}, but W has {k} columns")
    biases = "full" if ub.any() or ib.any() else "mean" if mean != 0 else "none"
    est = cls(**_agreed(m, {"n_components": ("W", k), "alpha": (
        "lambda", m.scalar("lambda", low=0)), "biases": ("user_bias", biases)}, params))
    values = {"user_factors_": W.astype(np.float64), "item_factors_": H.astype(np.float64),
              "user_bias_": ub.astype(np.float64), "item_bias_": ib.astype(np.float64),
              "global_mean_": mean, "user_ids_": ids["user_ids"],
              "item_ids_": ids["item_ids"], "n_iter_": _saved(m, "n_iter", summary, "iterations"),
              "objective_": _saved(m, "objective", summary, "objective")}
    v = _saved(m, "validation_rmse", summary, "validation_rmse")
    if v < 0:
        raise m.error("validation_rmse", f"{v}: an RMSE is >= 0")
    values["validation_rmse_"] = None if np.isnan(v) else v
    ptr = seen = None
    if "seen_indptr" in m:  # the training pairs (save() only): recommend can skip them
        ptr = m.get("seen_indptr", "i", 1, (n_u + 1,), low=0)
        seen = m.get("seen_items", "i", 1, (int(ptr[-1]),), low=0)
        if ptr[0] != 0 or (np.diff(ptr) < 0).any() or (seen.size and seen.max() >= n_i):
            raise m.error("seen_indptr", "not a CSR index of the items")
    values.update(_seen_indptr=ptr, _seen_items=seen)
    return _set(est, values)


def _dump_lda(est):
    beta = est.topic_word_prior_
    counts = np.rint(est.components_.T - beta)  # n_kw + beta - beta: the counts again
    vocab = getattr(est, "vocab_", None)
    return {"word_topic": counts.astype(np.int64), "alpha": est.doc_topic_prior_,
            "beta": beta, "loglik": est.loglik_, "doc_mixture": est.doc_topic_,
            "n_iter": int(est.n_iter_), "transform_seed": int(est._transform_seed),
            "vocab": None if vocab is None else np.asarray(vocab, dtype=str),
            "feature_names": _feature_names(est)}


def _build_lda(cls, m, summary, params):
    wt = m.get("word_topic", "iu", 2, low=0)
    V, K = wt.shape
    if not V or not K:
        raise m.error("word_topic", f"shape {wt.shape}: no words or no topics")
    alpha, beta = m.scalar("alpha"), m.scalar("beta")
    for key, x, n in (("alpha", alpha, K), ("beta", beta, V)):
        if not 0 < x * n < np.inf:  # (as a fit's check: the prior's sum a number)
            raise m.error(key, f"{x}: a prior must be > 0 and {n} times it finite")
    est = cls(**_agreed(m, {"n_components": ("word_topic", K), "doc_topic_prior": (
        "alpha", alpha), "topic_word_prior": ("beta", beta)}, params))
    mix = m.get("doc_mixture", "f", 2, (None, K), required=False, low=0)
    if mix is not None and mix.size and not np.allclose(mix.sum(axis=1), 1.0):
        raise m.error("doc_mixture", "rows that do not sum to 1 (not topic mixtures)")
    if mix is None:  # a command line's run: the counts of its final state
        mix = cls._mixtures(m.get("doc_topic", "iu", 2, (None, K), low=0), alpha)
    seed = m.scalar("transform_seed", "i", required=False, low=0)
    if seed is None:  # as a fit with random_state=0
        seed = cls._fold_seed(0)
    values = {"components_": wt.T.astype(np.float64) + beta, "doc_topic_": mix,
              "doc_topic_prior_": alpha, "topic_word_prior_": beta,
              "n_iter_": _saved(m, "n_iter", summary, "sweeps"),
              "loglik_": m.scalar("loglik"), "n_features_in_": V, "_transform_seed": seed}
    vocab = m.get("vocab", "U", 1, (V,), required=False)
    if vocab is not None:
        values["vocab_"] = vocab
    _names_back(m, V, values)
    return _set(est, values)


_DUMP = {"lasso": _dump_glm, "logreg": _dump_glm, "mf": _dump_mf, "lda": _dump_lda}
_BUILD = {"lasso": _build_glm, "logreg": _build_glm, "mf": _build_mf, "lda": _build_lda}
