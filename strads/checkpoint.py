"""Checkpoints: the state of every rank as plain arrays, written atomically.

A checkpoint is a folder ``OUT/checkpoint/`` holding one ``.npz`` part per rank (the
scheduler's and one per worker, each written by its own rank) and ``manifest.json``,
written last: a checkpoint is complete when its manifest is in place, and the manifest
names its parts with their sizes (and each array in a part has the CRC-32 of its zip
member), so a damaged or partial part is found before any work. Parts carry the round in their name and older ones are deleted only
after the new manifest has replaced the old one (write aside, fsync, rename), so a crash
at any moment leaves the previous complete checkpoint.

State is taken from an object's ``__dict__`` by :func:`picked` (the default ``state()``
of ``Schedule``, ``Update`` and ``Aggregate``): arrays, numbers, strings,
``None``, NumPy random generators and lists, tuples, dicts and deques of those. Skipped:
read-only arrays (a promise that they never change, as in the transport), the other
pieces of the app (a schedule's reference to its aggregate) and the attributes a class
names in ``checkpoint_skip`` (data that ``setup`` rebuilds the same on resume), and
functions. Anything
else is refused with a message naming the attribute. No pickle anywhere: the structure
travels as JSON inside the ``.npz``.
"""
import functools
import json
import os
import types
import zipfile
import zlib
from collections import deque

import numpy as np

FORMAT = 1
MANIFEST = "manifest.json"


from .errors import DataError


class CheckpointError(DataError):
    """A checkpoint that is missing, damaged or does not fit the run."""


# -- state of an object ----------------------------------------------------------------
def _is_piece(v):
    """Another piece of the app, or the engine's: not this piece's state."""
    from .api import Aggregate, Schedule, Update  # api imports this module
    from .transport import Peers

    return isinstance(v, (Schedule, Update, Aggregate, Peers))


def _frozen(v):
    """Read-only data, or a tuple of it (a CSC triplet): never changes, so not saved."""
    if isinstance(v, np.ndarray):
        return not v.flags.writeable and v.dtype != object
    if isinstance(v, tuple) and v:
        return all(_frozen(x) for x in v)
    return False


def _code(v):
    """Functions and methods (a chosen kernel): setup() makes them again."""
    return isinstance(v, (types.FunctionType, types.MethodType, types.BuiltinFunctionType,
                          functools.partial)) or hasattr(v, "py_func")  # numba's


def picked(obj):
    """The default ``state()`` of an app's piece: what of ``obj.__dict__`` can change."""
    skip = set(getattr(obj, "checkpoint_skip", ()))
    return {k: v for k, v in vars(obj).items()
            if k not in skip and not _is_piece(v) and not _frozen(v) and not _code(v)}


def encode(state, owner):
    """``(meta, arrays)`` of a state dict: JSON-able structure and named arrays."""
    arrays = {}
    meta = {k: _encode(v, k, arrays, owner) for k, v in state.items()}
    return meta, arrays


def decode(meta, arrays):
    return {k: _decode(m, arrays) for k, m in meta.items()}


def _encode(v, key, arrays, owner):
    if v is None or isinstance(v, (bool, str)):
        return {"v": v}
    if isinstance(v, (int, float)) and type(v) in (int, float):
        return {"v": v} if type(v) is int else {"f": float.hex(v)}
    if isinstance(v, (np.ndarray, np.generic)):
        if getattr(v, "dtype", None) == object:
            raise CheckpointError(f"cannot checkpoint {owner}.{key}: an object array")
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


def _decode(m, arrays):
    if "v" in m:
        return m["v"]
    if "f" in m:
        return float.fromhex(m["f"])
    if "a" in m:
        a = arrays[m["a"]]
        return a[()] if m["scalar"] else a
    if "rng" in m:
        st = m["rng"]
        bg = getattr(np.random, st["bit_generator"])()
        bg.state = st
        return np.random.Generator(bg)
    if "deque" in m:
        return deque((_decode(x, arrays) for x in m["deque"]), maxlen=m["maxlen"])
    if "list" in m:
        return [_decode(x, arrays) for x in m["list"]]
    if "tuple" in m:
        return tuple(_decode(x, arrays) for x in m["tuple"])
    return {k: _decode(x, arrays) for k, x in m["dict"].items()}


# -- parts and manifest ----------------------------------------------------------------
def _fsync_dir(path):
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def digest(obj):
    """CRC-32 of a structure's arrays and values (a shard): checks on resume that setup()
    rebuilt the same data."""
    crc = 0
    stack = [obj]
    while stack:
        v = stack.pop()
        if isinstance(v, dict):
            for k in sorted(v, key=str, reverse=True):
                stack += [v[k], str(k)]
        elif isinstance(v, (list, tuple)):
            stack.extend(reversed(v))
        elif isinstance(v, np.ndarray) and v.dtype != object:
            crc = zlib.crc32(np.ascontiguousarray(v).view(np.uint8).reshape(-1), crc)
            crc = zlib.crc32(repr((v.dtype.str, v.shape)).encode(), crc)
        elif v is None or isinstance(v, (bool, int, float, str, bytes, np.generic)):
            crc = zlib.crc32(repr(v).encode(), crc)
        elif hasattr(v, "__dict__"):  # a scipy.sparse matrix, a dataclass
            stack += [vars(v), type(v).__name__]
        else:
            crc = zlib.crc32(type(v).__name__.encode(), crc)
    return crc


def snapshot(pieces):
    """``pieces`` ({piece: (meta, arrays)}) with copies of the arrays: what is written
    while the run goes on changing the originals."""
    return {piece: (meta, {k: np.array(v, copy=True) for k, v in arrays.items()})
            for piece, (meta, arrays) in pieces.items()}


def write_part(folder, name, pieces):
    """Write ``pieces`` ({piece: (meta, arrays)}) as ``folder/name`` atomically; returns
    the manifest's entry for it."""
    os.makedirs(folder, exist_ok=True)
    arrays, meta = {}, {}
    for piece, (m, arrs) in pieces.items():
        meta[piece] = m
        arrays.update({f"{piece}:{k}": v for k, v in arrs.items()})
        for k in arrs:
            _rename_refs(m, k, f"{piece}:{k}")
    path = os.path.join(folder, name)
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        np.savez(f, __meta__=np.array(json.dumps(meta)), **arrays)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    return {"file": name, "bytes": os.path.getsize(path)}


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
    path = os.path.join(folder, entry["file"])
    if not os.path.isfile(path):
        raise CheckpointError(f"{path}: missing (the checkpoint is incomplete)")
    if os.path.getsize(path) != entry["bytes"]:
        raise CheckpointError(f"{path}: damaged (its size differs from the manifest's)")
    try:  # every member of an .npz (a zip) carries a CRC-32, checked as it is read
        with np.load(path, allow_pickle=False) as z:
            arrays = {k: z[k] for k in z.files}
    except (OSError, ValueError, zipfile.BadZipFile, EOFError) as e:
        raise CheckpointError(f"{path}: damaged ({e})") from None
    meta = json.loads(str(arrays.pop("__meta__")))
    return {piece: (m, arrays) for piece, m in meta.items()}


def write_manifest(folder, manifest):
    path = os.path.join(folder, MANIFEST)
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump({"format": FORMAT, **manifest}, f, indent=1)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    _fsync_dir(folder)
    keep = {MANIFEST} | {p["file"] for p in manifest["parts"]}
    mine = f"r{manifest['round']:012d}"
    for name in os.listdir(folder):  # parts of older checkpoints, and torn writes
        # (a later checkpoint's, which a leaderless rank may already be writing, stay)
        if name not in keep and not (name[:1] == "r" and name[:13] > mine):
            try:
                os.unlink(os.path.join(folder, name))
            except OSError:
                pass


def read_manifest(folder):
    path = os.path.join(folder, MANIFEST)
    if not os.path.isfile(path):
        raise CheckpointError(f"{path}: no checkpoint to resume from")
    try:
        with open(path) as f:
            m = json.load(f)
        if m.get("format") != FORMAT or not isinstance(m.get("parts"), list):
            raise ValueError("unknown format")
    except (OSError, ValueError) as e:
        raise CheckpointError(f"{path}: damaged checkpoint manifest ({e})") from None
    return m
