"""Checkpoints: the state of every rank as plain arrays, one ``.npz`` part per rank, then
``manifest.json`` (the format and its guarantees: docs/failures.md)."""
import contextlib
import functools
import json
import math
import os
import types
import zipfile
import zlib
from collections import deque

import numpy as np

from .errors import DataError
from .outputs import WriteError, durable, fsync_dir, read_json, unlink

FORMAT = 2  # 2: parts sealed, the manifest checksummed, the worker in its part
MANIFEST = "manifest.json"


class CheckpointError(DataError):
    """A checkpoint that is missing, damaged or does not fit the run."""


# -- state of an object ----------------------------------------------------------------
def _frozen(v):
    """Read-only data, or a tuple of it (a CSC triplet): never changes, so not saved."""
    if isinstance(v, np.ndarray):
        return not v.flags.writeable and v.dtype != object
    return isinstance(v, tuple) and len(v) > 0 and all(_frozen(x) for x in v)


def picked(obj):
    """The default ``state()`` of an app's piece: what of ``obj.__dict__`` can change (not
    other pieces, read-only data, functions, kernels: setup() makes them again)."""
    from .api import Aggregate, Schedule, Update  # api imports this module
    from .transport import Peers

    skip = skipped(obj)
    pieces = (Schedule, Update, Aggregate, Peers)
    code = (types.FunctionType, types.MethodType, types.BuiltinFunctionType, functools.partial)
    return {k: v for k, v in vars(obj).items()
            if k not in skip and not isinstance(v, pieces) and not _frozen(v)
            and not isinstance(v, code) and not hasattr(v, "py_func")}  # (py_func: numba's)


def skipped(obj):
    """``obj``'s ``checkpoint_skip`` names (one string: one name, the comma forgotten)."""
    skip = getattr(obj, "checkpoint_skip", ())
    return {skip} if isinstance(skip, str) else set(skip)


def encode(state, owner):
    """``(meta, arrays)`` of a state dict: JSON-able structure and named arrays."""
    if not isinstance(state, dict):
        raise TypeError(f"{owner}.state() returned {type(state).__name__}, not a dict of "
                        "attribute names to values (and load_state(state) takes it back)")
    arrays = {}
    meta = {k: _encode(v, k, arrays, owner) for k, v in state.items()}
    return meta, arrays


def _encode(v, key, arrays, owner):
    if v is None or isinstance(v, (bool, str)):
        return {"v": str(v) if isinstance(v, str) else v}  # (np.str_: a str)
    if isinstance(v, (int, float)) and type(v) in (int, float):
        return {"v": v} if type(v) is int else {"f": float.hex(v)}
    if isinstance(v, (np.ndarray, np.generic)):
        if getattr(v, "dtype", None) == object:
            raise CheckpointError(f"cannot checkpoint {owner}.{key}: an object array")
        if isinstance(v, np.generic) and v.dtype.kind not in "biufc":
            raise CheckpointError(f"cannot checkpoint {owner}.{key}: a NumPy {v.dtype} "
                                  "scalar (a number, a str or a 0-d array is kept)")
        arrays[key] = np.asarray(v)
        return {"a": key, "scalar": isinstance(v, np.generic)}
    if isinstance(v, np.random.Generator):
        return {"rng": v.bit_generator.state}
    if isinstance(v, deque):
        return {"deque": [_encode(x, f"{key}/{i}", arrays, owner) for i, x in enumerate(v)],
                "maxlen": v.maxlen}
    if isinstance(v, (list, tuple)):
        return {type(v).__name__: [_encode(x, f"{key}/{i}", arrays, owner)
                                   for i, x in enumerate(v)]}
    if type(v) is dict and all(isinstance(k, str) for k in v):
        return {"dict": {k: _encode(x, f"{key}/{k}", arrays, owner) for k, x in v.items()}}
    raise CheckpointError(
        f"cannot checkpoint {owner}.{key} of type {type(v).__name__}: name it in "
        f"{owner}.checkpoint_skip if setup() rebuilds it identically, or override "
        "state() and load_state()")


# -- parts and manifest ----------------------------------------------------------------
def _leaves(obj):
    """A structure's (a shard's) leaves in a fixed order: keys, values, arrays, and the
    objects standing for input files (``strads_digest``: strads.io.source.Content)."""
    stack = [obj]
    while stack:
        v = stack.pop()
        if isinstance(v, dict):
            for k in sorted(v, key=str, reverse=True):
                stack += [v[k], str(k)]
        elif isinstance(v, (list, tuple)):
            stack.extend(reversed(v))
        elif hasattr(v, "__dict__") and not hasattr(v, "strads_digest"):
            stack += [vars(v), type(v).__name__]  # a scipy.sparse matrix, a dataclass
        else:
            yield v


def digest(obj):
    """CRC-32 of a structure's arrays and values (a shard): checks on resume that setup()
    rebuilt the same data (input files by their content)."""
    crc = 0
    for v in _leaves(obj):
        for x in v.strads_digest() if hasattr(v, "strads_digest") else (v,):
            if isinstance(x, np.ndarray) and x.dtype != object:
                crc = zlib.crc32(np.ascontiguousarray(x).view(np.uint8).reshape(-1), crc)
                crc = zlib.crc32(repr((x.dtype.str, x.shape)).encode(), crc)
            elif x is None or isinstance(x, (bool, int, float, str, bytes, np.generic)):
                crc = zlib.crc32(repr(x).encode(), crc)
            else:
                crc = zlib.crc32(type(x).__name__.encode(), crc)
    return crc


def snapshot(pieces):
    """``pieces`` ({piece: (meta, arrays)}) with copies of the arrays: what is written
    while the run goes on changing the originals."""
    return {piece: (meta, {k: np.array(v, copy=True) for k, v in arrays.items()})
            for piece, (meta, arrays) in pieces.items()}


def write_part(folder, name, pieces):
    """Write ``pieces`` ({piece: (meta, arrays)}) as ``folder/name`` atomically; returns
    the manifest's entry for it."""
    try:
        os.makedirs(folder, exist_ok=True)
    except OSError as e:
        raise WriteError(f"{folder}: cannot make the folder: {e.strerror or e}") from None
    arrays, meta = {}, {}
    for piece, (m, arrs) in pieces.items():
        meta[piece] = m
        arrays.update({f"{piece}:{k}": v for k, v in arrs.items()})
        for k in arrs:
            _rename_refs(m, k, f"{piece}:{k}")
    path = os.path.join(folder, name)
    with durable(path + ".tmp", path, "wb") as f:  # (a failed write leaves no .tmp)
        np.savez(f, __meta__=np.array(json.dumps(meta)), **arrays)
    _replace(path + ".tmp", path)
    return {"file": name, "bytes": os.path.getsize(path), "seal": _seal(path)}


def _seal(path):
    """A part's content in 32 bits, from its zip directory alone: the CRC-32 of its
    members' names, sizes and CRC-32s (which the zip reader checks against the data)."""
    with zipfile.ZipFile(path) as zf:
        return zlib.crc32(json.dumps([(i.filename, i.file_size, i.CRC)
                                      for i in zf.infolist()]).encode())


def _replace(tmp, path):
    try:
        os.replace(tmp, path)
    except OSError as e:
        with contextlib.suppress(FileNotFoundError):  # (another run into the folder's)
            os.unlink(tmp)
        raise WriteError(f"{path}: cannot write: {e.strerror or e}") from None


def _rename_refs(m, old, new):
    if isinstance(m, dict):
        if m.get("a") == old:
            m["a"] = new
        for v in m.values():
            _rename_refs(v, old, new)
    elif isinstance(m, list):
        for v in m:
            _rename_refs(v, old, new)


def read_part(folder, entry):
    """The pieces of a part ({piece: (meta, arrays)}), checked as a file: every member a
    stored array of plain numbers as its header declares, the structure JSON (what they
    hold: :func:`restore`)."""
    path = os.path.join(folder, entry["file"])
    if not os.path.isfile(path):
        raise CheckpointError(f"{path}: missing (the checkpoint is incomplete)")
    if os.path.getsize(path) != entry["bytes"]:
        raise CheckpointError(f"{path}: damaged (its size differs from the manifest's)")
    try:  # every member of an .npz (a zip) carries a CRC-32, checked as it is read
        if _seal(path) != entry["seal"]:
            raise ValueError("its content differs from the manifest's")
        with zipfile.ZipFile(path) as zf:
            for info in zf.infolist():  # (stored: no member inflates past the file)
                if info.compress_type != zipfile.ZIP_STORED:
                    raise ValueError(f"member {info.filename!r} is compressed")
        with np.load(path, allow_pickle=False) as z:
            arrays = {k: z[k] for k in z.files}
        meta = arrays.pop("__meta__", None)
        if meta is None or meta.dtype.kind != "U" or meta.ndim:
            raise ValueError("no __meta__ structure")
        meta = json.loads(str(meta))
        if not isinstance(meta, dict) or not all(isinstance(m, dict) for m in meta.values()):
            raise ValueError("__meta__ is not a dict of pieces")
    except (OSError, ValueError, zipfile.BadZipFile, EOFError, RecursionError,
            NotImplementedError, MemoryError) as e:  # (a header declaring too much)
        raise CheckpointError(f"{path}: damaged ({e})") from None
    if any(a.dtype.hasobject for a in arrays.values()):  # (np.load refuses them already)
        raise CheckpointError(f"{path}: damaged (an object array)")
    return {piece: (m, arrays) for piece, m in meta.items()}


#: the bit generators a checkpoint may name (NumPy's)
RNGS = ("PCG64", "PCG64DXSM", "MT19937", "Philox", "SFC64")


def restore(parts, name, fresh, where, sized=(), sizes=True):
    """Piece ``name``'s state in ``parts`` (:func:`read_part`), decoded, once checked
    against ``fresh`` (an app's piece, fresh from setup, or a state dict) by the rules of
    docs/failures.md ("A checkpoint is untrusted input"); ``sized``: attributes whose size
    the run changes (``sizes`` False: every one, and attributes ``fresh`` has may be
    missing); ``where`` names the part in messages."""
    owner, obj = None, fresh
    if hasattr(fresh, "state"):
        owner, sized, fresh = type(fresh), tuple(getattr(fresh, "checkpoint_sized", ())), \
            fresh.state()
    if name not in parts:
        raise CheckpointError(f"{where}: damaged (no {name!r} state)")
    meta, arrays = parts[name]
    fmeta, farrays = encode(fresh, name)
    also = {}  # attributes the piece has but leaves out of its state now (a buffer)
    for k in set(meta) - set(fmeta) if owner is not None else ():
        with contextlib.suppress(KeyError, CheckpointError):
            also[k] = _encode(vars(obj)[k], k, farrays, name)
    skip = skipped(owner)  # (setup's: never loaded)
    # (``sizes`` False, another layout's part: an attribute its layout did not keep is
    # the app's reshard's to make; it reads what it needs, a missing one is refused there)
    odd = sorted(set(fmeta) - set(meta) if sizes else ()) + sorted(
        k for k in set(meta) - set(fmeta)
        if k.startswith("__") or k in skip or callable(getattr(owner, k, None))
        or isinstance(getattr(owner, k, None), property))
    if odd:
        raise CheckpointError(f"{where}: {name} state does not fit this run (attributes "
                              f"{', '.join(odd)[:200]})")
    # an app's piece: None where this run's fresh one holds a value only for what its
    # class declares may become None during a run (a forged None met the code as a
    # TypeError, an index out of range, a numba typing error)
    nullable = getattr(owner, "checkpoint_nullable", ())
    try:
        for k, m in meta.items() if owner is not None else ():
            f = fmeta.get(k)
            if f is None and isinstance(getattr(owner, k, None), (bool, int, float, list)):
                f = _encode(getattr(owner, k), k, {}, name)  # (a class default: 0, [])
            fkind = None if f is None else _kind(f, k)
            if _kind(m, k) == "None" and fkind not in (None, "None") and k not in nullable:
                raise _Misfit(f"{k}: None (this run has {fkind})")
        return {k: _restored(m, fmeta.get(k, also.get(k)), arrays, farrays, k,
                             k in sized or not sizes, owner is not None)
                for k, m in meta.items()}
    except _Misfit as e:
        raise CheckpointError(f"{where}: {name}.{e} does not fit this run") from None
    except RecursionError:
        raise CheckpointError(f"{where}: damaged ({name} nested too deep)") from None


def load(piece, state, where):
    """``piece.load_state(state)``: an app's checks of the values (a topic id, a column
    in range) raise ValueError, refused in one line naming the part."""
    try:
        piece.load_state(state)
    except ValueError as e:
        raise CheckpointError(f"{where}: {type(piece).__name__}: {e}") from None


def restore_loop(parts, fresh, round, where, staleness, workers):
    """The driver's loop state (the "engine" piece), checked as :func:`restore` does and
    for its values (the rounds in flight: at most ``staleness``, after ``round``, results
    of the checkpoint's ``workers``); ``trace`` is returned parsed."""
    loop = restore(parts, "engine", fresh, where, ("versions",))
    flight = loop["inflight"]
    if len(flight) > staleness or not all(
            type(f) is tuple and len(f) == 5 and f[0] == round + i
            and all(type(x) is int for x in f[2:4]) and 0 <= f[3] <= f[2] <= round
            and type(f[4]) is list and all(type(g) is tuple and len(g) == 2 for g in f[4])
            and [g[0] for g in f[4]] == sorted({g[0] for g in f[4]})
            and all(type(g[0]) is int and 0 <= g[0] < workers for g in f[4])
            for i, f in enumerate(flight)):
        raise CheckpointError(f"{where}: damaged (the rounds in flight are not rounds "
                              f"{round} on of its workers, at most {staleness})")
    v = loop["versions"]
    try:
        trace = json.loads(loop["trace"]) if isinstance(loop["trace"], str) else None
    except (ValueError, RecursionError):
        trace = None
    if not isinstance(trace, list) or not all(
            isinstance(r, dict) and "round" in r and
            all(type(x) in _SCALARS for x in r.values()) for r in trace):
        raise CheckpointError(f"{where}: damaged (the trace is not a list of rows)")
    if not all(loop[k] is None or _number(loop[k]) for k in ("first", "best", "last_log")):
        raise CheckpointError(f"{where}: damaged (the objective's first, best or last "
                              "logged value is not a number)")
    if loop["done"] != round or v.shape != (round, 3) or \
            (v[:, 0] != np.arange(round)).any():
        raise CheckpointError(f"{where}: the loop is at round {loop['done']!r} with "
                              f"{v.shape[0]} rounds' versions, the manifest at {round}")
    if not (_number(loop["elapsed"]) and 0 <= loop["elapsed"] < math.inf):
        raise CheckpointError(f"{where}: elapsed time {loop['elapsed']!r}")
    return dict(loop, trace=trace)


def _number(x):
    return isinstance(x, (int, float, np.integer, np.floating)) and not isinstance(x, bool)


class _Misfit(Exception):
    """What of a saved state differs from the fresh one: ``name: problem``."""


_SCALARS = {type(None): "None", bool: "bool", int: "int", float: "number", str: "str"}
_NUMBERS = {"int", "number", "scalar"}  # (Python's or NumPy's)


def _kind(m, name):
    """The kind of a node of the structure: a key of :func:`_encode`'s output."""
    if isinstance(m, dict):
        if "v" in m and type(m["v"]) in _SCALARS:
            return _SCALARS[type(m["v"])]
        for k in ("f", "a", "rng", "deque", "list", "tuple", "dict"):
            if k in m:
                return "number" if k == "f" else "scalar" if k == "a" and m.get(
                    "scalar") is True else k
    raise _Misfit(f"{name}: malformed ({str(m)[:60]})")


def _restored(m, f, arrays, farrays, name, sized, app):
    """Node ``m`` decoded, checked against the fresh node ``f`` (None: nothing to
    check against); in an ``app``'s piece a number is any number (a sum started at 0
    holds 0.5 later, a flag False a NumPy bool): its load_state checks what it needs."""
    kind = _kind(m, name)
    fkind = None if f is None else _kind(f, name)
    if fkind == "int" and kind == "number" and not app:  # (a count, an index, a seed)
        raise _Misfit(f"{name}: a float (this run has an integer)")
    if fkind == "None" or (app or kind != fkind) and {kind, fkind} <= (
            _NUMBERS | {"bool"} if app else _NUMBERS):
        f = fkind = None
    if fkind is not None and kind not in (fkind, "None"):
        raise _Misfit(f"{name}: {kind} (this run has {fkind})")
    if kind in ("None", "bool", "str") or "v" in m:
        return m["v"]
    if kind == "number":
        try:
            return float.fromhex(m["f"])
        except (TypeError, ValueError, OverflowError):
            raise _Misfit(f"{name}: {m['f']!r} is not a float") from None
    if kind in ("a", "scalar"):
        a = arrays.get(m["a"]) if isinstance(m["a"], str) else None
        if a is None or not isinstance(m.get("scalar"), bool) or (
                m["scalar"] and (a.ndim or a.dtype.kind not in "biufc")):
            raise _Misfit(f"{name}: no array {str(m['a'])[:40]!r}")
        if f is not None:
            fa = farrays[f["a"]]
            if a.dtype != fa.dtype or a.ndim != fa.ndim or m["scalar"] != f["scalar"]:
                raise _Misfit(f"{name}: {a.dtype} array of shape {a.shape} (this run has "
                              f"{fa.dtype}, shape {fa.shape})")
            if a.shape != fa.shape and not sized and fa.size:
                raise _Misfit(f"{name}: shape {a.shape} (this run has {fa.shape})")
        return a[()] if m["scalar"] else a
    if kind == "rng":
        st = m["rng"]
        bg = st.get("bit_generator") if isinstance(st, dict) else None
        if bg not in RNGS or (f is not None and bg != f["rng"]["bit_generator"]):
            raise _Misfit(f"{name}: random generator {str(bg)[:40]!r}")
        try:
            gen = getattr(np.random, bg)()
            gen.state = st
        except (TypeError, ValueError, KeyError, OverflowError) as e:
            raise _Misfit(f"{name}: random generator state ({e})") from None
        return np.random.Generator(gen)
    items = m[kind]
    if kind == "dict":
        if not isinstance(items, dict):
            raise _Misfit(f"{name}: malformed")
        fd = {} if f is None else f["dict"]  # (it may gain keys with the run)
        missing = sorted(set(fd) - set(items))
        if missing:
            raise _Misfit(f"{name}: no key {str(missing[0])[:40]!r}")
        return {k: _restored(x, fd.get(k), arrays, farrays, f"{name}/{k}", sized, app)
                for k, x in items.items()}
    if not isinstance(items, list):
        raise _Misfit(f"{name}: malformed")
    fl = None if f is None else f[kind]
    if kind == "tuple" and fl is not None and len(fl) != len(items):
        raise _Misfit(f"{name}: a tuple of {len(items)} (this run has {len(fl)})")
    if kind == "deque" and f is not None and m.get("maxlen") != f.get("maxlen"):
        raise _Misfit(f"{name}: maxlen {m.get('maxlen')!r} (this run has "
                      f"{f.get('maxlen')!r})")
    # each item is checked against the fresh one at its place; beyond the fresh list's
    # end (and in a deque: a queue's items come and go), against its last, any size
    out = [_restored(x, fl[min(i, len(fl) - 1)] if fl else None, arrays, farrays,
                     f"{name}/{i}", sized or kind == "deque" or i >= len(fl or ()), app)
           for i, x in enumerate(items)]
    if kind == "deque":
        maxlen = m.get("maxlen")
        if maxlen is not None and (type(maxlen) is not int or maxlen < 0):
            raise _Misfit(f"{name}: maxlen {maxlen!r}")
        return deque(out, maxlen=maxlen)
    return tuple(out) if kind == "tuple" else out


def inputs(shards):
    """The input files' content however the shards split them: the sorted checksums
    (:func:`strads.io.source.checksum`) of the files they name."""
    return sorted({x for v in _leaves(shards) if hasattr(v, "strads_digest")
                   for x in v.strads_digest() if x is not None})


def write_manifest(folder, manifest):
    path = os.path.join(folder, MANIFEST)
    m = {"format": FORMAT, **manifest}
    with durable(path + ".tmp", path, "w") as f:
        json.dump(dict(m, crc=_crc(m)), f, indent=1)
    _replace(path + ".tmp", path)
    fsync_dir(folder)
    keep = {MANIFEST} | {p["file"] for p in manifest["parts"]}
    mine = f"r{manifest['round']:012d}"
    # parts of older checkpoints, and torn writes (a later checkpoint's, which a
    # leaderless rank may already be writing, stay)
    unlink(os.path.join(folder, name) for name in os.listdir(folder)
           if name not in keep and not (name[:1] == "r" and name[:13] > mine))


def read_manifest(folder):
    """The manifest, checked: its fields of the right types, its parts named for its
    round, the scheduler's first, then worker 0's, 1's, ..."""
    path = os.path.join(folder, MANIFEST)
    if not os.path.isfile(path):
        raise CheckpointError(f"{path}: no checkpoint to resume from")
    try:
        m = read_json(path)
        if not isinstance(m, dict) or m.get("format") != FORMAT:
            raise ValueError("unknown format")
        if m.pop("crc", None) != _crc(m):
            raise ValueError("its checksum does not match its content")
        _fields(m, {"round": int, "parts": list, "flags": dict, "engine": dict,
                    "checkpoint_every": (int, float), "inputs": list})
        if any(type(x) is not int for x in m["inputs"]):
            raise ValueError("input checksums that are not integers")
        _fields(m["engine"], {"app": str, "workers": int, "staleness": int})
        if m["round"] < 0 or m["engine"]["workers"] < 1 or m["engine"]["staleness"] < 0 \
                or not 0 < m["checkpoint_every"] < math.inf:
            raise ValueError("a round, worker count, staleness or interval out of range")
        tag = f"r{m['round']:012d}"
        names = [f"{tag}-scheduler.npz"] + [f"{tag}-worker{w}.npz"
                                            for w in range(len(m["parts"]) - 1)]
        for part, name in zip(m["parts"], names):
            _fields(part, {"file": str, "bytes": int, "seal": int})
            rows = part.get("rows")  # a worker's rows (None: an app without rows)
            if rows is not None and (type(rows) is not int or rows < 0):
                raise ValueError(f"{part['file']} has rows {str(rows)[:40]}")
            if part["file"] != name:
                raise ValueError(f"part {part['file'][:40]!r} where {name} belongs")
        if len(m["parts"]) != m["engine"]["workers"] + 1:
            raise ValueError(f"{len(m['parts'])} parts for {m['engine']['workers']} "
                             "workers and the scheduler")
    except (OSError, ValueError, RecursionError) as e:
        raise CheckpointError(f"{path}: damaged checkpoint manifest ({e})") from None
    return m


def another_app(folder, was, app):
    """The refusal of a checkpoint that app ``was`` wrote, resumed by app ``app``."""
    return CheckpointError(f"{folder}: a checkpoint of the {was} app, not of {app} (resume "
                           f"it with {was}, or give another --out)")


def _crc(m):
    return zlib.crc32(json.dumps(m, sort_keys=True).encode())


def _fields(d, types):
    """Raise ValueError unless dict ``d`` has every field of ``types`` of its type."""
    if not isinstance(d, dict):
        raise ValueError(f"{str(d)[:40]!r} is not an object")
    for k, t in types.items():
        v = d.get(k)
        if not isinstance(v, t) or isinstance(v, bool):
            raise ValueError(f"{k!r} is {repr(v)[:40] if k in d else 'missing'}, not "
                             f"{getattr(t, '__name__', 'a number')}")
