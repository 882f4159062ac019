"""What a run leaves behind: the output folder (summary.json, trace.csv, model.npz, written
all or nothing), the check of ``--out`` before any work, and the progress line."""
import contextlib
import csv
import errno
import json
import math
import os
import shutil
import stat
import sys
import tempfile

import numpy as np

from .errors import DataError

OUTPUTS = ("summary.json", "trace.csv", "model.npz")


class WriteError(DataError, OSError):
    """A file that cannot be written (a full disk, a file size limit, a read-only
    mount): one line naming it and the cause; its partial file is removed."""


def write(out, summary, trace, model):
    """Write the outputs into ``out``, all or nothing: into a new folder beside it that
    then takes its place, else (:func:`_replace_files`) file by file; the rules:
    docs/failures.md, "Outputs, all or nothing". ``trace`` None: no trace.csv (a saved
    estimator's folder)."""
    out = os.path.realpath(os.path.abspath(out))
    parent = os.path.dirname(out)
    if os.path.isdir(out) and not _swappable(out):
        return _replace_files(out, summary, trace, model)
    try:
        os.makedirs(parent, exist_ok=True)
        tmp = tempfile.mkdtemp(prefix=f".{os.path.basename(out)}.tmp-", dir=parent)
    except OSError as e:
        if os.path.isdir(out):
            return _replace_files(out, summary, trace, model)
        raise WriteError(f"{out}: cannot make the folder: {e.strerror or e}") from None
    try:
        if os.path.isdir(out):  # the new folder takes the old one's group and mode
            st = os.stat(out)  # (a private 700 or a group-shared 2770 DIR stays so)
            with contextlib.suppress(OSError):
                os.chown(tmp, -1, st.st_gid)
            os.chmod(tmp, stat.S_IMODE(st.st_mode))
        else:
            umask = os.umask(0)
            os.umask(umask)
            os.chmod(tmp, 0o777 & ~umask)  # as os.makedirs would have made it
        _write_files(tmp, summary, trace, model, out)
        if not os.path.lexists(out):
            os.rename(tmp, out)
        else:
            try:
                _exchange(tmp, out)  # out: the new results; tmp: the old folder
            except OSError:  # (a file system that cannot: the other way)
                return _replace_files(out, summary, trace, model, staged=tmp)
            for name in os.listdir(tmp):
                if name not in OUTPUTS:
                    os.rename(os.path.join(tmp, name), os.path.join(out, name))
        fsync_dir(parent)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _swappable(out):
    """Whether folder ``out`` can trade places with a new folder beside it."""
    parent = os.path.dirname(out)
    try:
        return (out != parent and not os.path.ismount(out)
                and os.stat(parent).st_dev == os.stat(out).st_dev
                and os.access(parent, os.W_OK | os.X_OK))
    except OSError:
        return False


def _write_files(folder, summary, trace, model, out):
    """The outputs into ``folder`` (a failure names them as in ``out``)."""
    def at(name):
        return os.path.join(folder, name), os.path.join(out, name)

    with durable(*at("summary.json"), "w") as f:
        json.dump(jsonable(summary), f, indent=2)
        f.write("\n")
    if trace is not None:
        cols = []
        for row in trace:
            cols += [k for k in row if k not in cols]
        with durable(*at("trace.csv"), "w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=cols)
            w.writeheader()
            w.writerows(trace)
    with durable(*at("model.npz"), "wb") as f:
        np.savez(f, **model)
    fsync_dir(folder)


def _replace_files(out, summary, trace, model, staged=None):
    """The outputs written complete into a hidden folder inside ``out`` (or moved there
    from ``staged``), then renamed over the previous ones, summary.json last: the
    previous set stays whole until the new one is on disk; between the renames (a crash
    there) the folder may hold some of each."""
    tmp = tempfile.mkdtemp(prefix=".strads-new-", dir=out)
    try:
        names = ("model.npz",) + (("trace.csv",) if trace is not None else ()) + (
            "summary.json",)
        if staged is None:
            _write_files(tmp, summary, trace, model, out)
        else:
            for name in names:
                shutil.move(os.path.join(staged, name), os.path.join(tmp, name))
        fsync_dir(tmp)
        for name in names:
            os.replace(os.path.join(tmp, name), os.path.join(out, name))
        fsync_dir(out)
    except OSError as e:
        if isinstance(e, WriteError):
            raise
        raise WriteError(f"{out}: cannot write the outputs: {e.strerror or e}") from None
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


@contextlib.contextmanager
def durable(path, shown, mode, **kw):
    """open() for writing that flushes to disk before closing; if it fails (a full
    disk, ``ulimit -f``: Python ignores SIGXFSZ, so the write fails with EFBIG), the
    partial file is removed and :class:`WriteError` names it as ``shown``."""
    try:
        with open(path, mode, **kw) as f:
            yield f
            f.flush()
            os.fsync(f.fileno())
    except OSError as e:
        with contextlib.suppress(OSError):
            os.unlink(path)
        if isinstance(e, WriteError):
            raise
        raise WriteError(f"{shown}: cannot write: {e.strerror or e}") from None


def fsync_dir(path):
    """Flush a folder's entries (a rename in it) to disk, where the system allows."""
    with contextlib.suppress(OSError):
        fd = os.open(path, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def unlink(paths):
    """Remove the files ``paths`` that are still there."""
    for path in paths:
        with contextlib.suppress(OSError):  # (gone: another rank of the host was first)
            os.unlink(path)


def _exchange(a, b):
    """Swap two folders in one step (Linux renameat2 RENAME_EXCHANGE); elsewhere, two
    renames."""
    with contextlib.suppress(AttributeError, TypeError):
        import ctypes
        libc = ctypes.CDLL(None, use_errno=True)
        if libc.renameat2(-100, os.fsencode(a), -100, os.fsencode(b), 2) == 0:
            return
        err = ctypes.get_errno()
        if err in (errno.EBUSY, errno.EXDEV):  # a mount point; another file system
            raise OSError(err, os.strerror(err), b)
    old = a + ".old"
    os.rename(b, old)
    try:
        os.rename(a, b)
    except OSError:
        os.rename(old, b)  # (b back in its place)
        raise
    os.rename(old, a)


def check_out(out):
    """Refuse an output folder that cannot be written, before any work (one line): it,
    or where it would be made (a symbolic link: the folder it points to)."""
    if out is None:
        return
    if not isinstance(out, (str, os.PathLike)) or not os.fspath(out):
        raise DataError(f"--out {out!r}: not a folder name")
    path = os.path.abspath(out)
    if os.path.islink(path) and not os.path.isdir(path):
        raise DataError(f"--out {out}: a symbolic link to {os.readlink(path)}, not to a "
                        "folder")
    path = os.path.realpath(path)
    if os.path.lexists(path) and not os.path.isdir(path):
        raise DataError(f"--out {out}: exists and is not a folder")
    probe = path
    while not os.path.lexists(probe):
        probe = os.path.dirname(probe)
    if not os.path.isdir(probe):
        raise DataError(f"--out {out}: {probe} is a file, not a folder")
    try:  # really try: permission bits do not stop root, a read-only mount does
        os.rmdir(tempfile.mkdtemp(prefix=".strads-probe-", dir=probe))
    except OSError as e:
        raise DataError(f"--out {out}: cannot write in {probe}: {e.strerror}") from None


def jsonable(d):
    """``d`` with NumPy arrays and scalars as Python lists and numbers, and non-finite
    floats as None (no NaN), in its lists and dicts too."""
    def py(v):
        if isinstance(v, (np.ndarray, np.generic)):
            v = v.tolist()
        if isinstance(v, (list, tuple)):
            return [py(x) for x in v]
        if isinstance(v, dict):
            return jsonable(v)
        return None if isinstance(v, float) and not math.isfinite(v) else v
    return {k: py(v) for k, v in d.items()}


MAX_JSON = 64 << 20  # a summary or manifest strads writes is a few KiB


def read_json(path):
    """A JSON file a run wrote (summary.json, a checkpoint's manifest), read as untrusted
    input: a regular file of at most MAX_JSON bytes (a FIFO would block, /dev/zero fill
    memory). Raises OSError (FileNotFoundError: none) or ValueError saying why."""
    st = os.stat(path)
    if not stat.S_ISREG(st.st_mode):
        raise ValueError("not a regular file")
    if st.st_size > MAX_JSON:
        raise ValueError(f"{st.st_size:,} bytes, more than a run writes")
    with open(path, encoding="utf-8") as f:
        text = f.read(MAX_JSON + 1)
    try:
        return json.loads(text)
    except RecursionError:
        raise ValueError("nested too deeply") from None


COMPILING = "compiling kernels (first run only)"


class _Compiles:
    """Counts numba's compilations in this process and says, once, that a run waits."""

    def __init__(self):
        self.count, self.said, self.app, self.registered = 0, False, None, False

    def on_start(self, event):
        self.count += 1
        if self.app is not None:
            self.say(self.app)

    def say(self, app):
        if not self.said:
            self.said = True
            sys.stderr.write(f"[{app}] {COMPILING}\n")
            sys.stderr.flush()

    def watch(self, app, quiet, mpi):
        """Listen from now on (``app``: who says it); ``mpi``: the first worker compiles
        on another rank, unheard here: say it now if the cache lacks the app's kernels."""
        from numba.core import event

        self.app = None if quiet else app
        if not self.registered:
            # numba's listener class, made here: outputs does not import numba at load
            listener = type("Listener", (event.Listener,), {
                "on_start": lambda _, e: self.on_start(e), "on_end": lambda _, e: None})
            event.register("numba:compile", listener())
            self.registered = True
        if mpi and not quiet and _cache_lacks_kernels():
            self.say(app)


COMPILES = _Compiles()


def _cache_lacks_kernels():
    """A module of loaded kernels (readers aside: not every run uses each) of which no
    cached kernel is in numba's on-disk cache, for this source and this numba. A module
    whose every kernel other kernel modules import (cholesky's solve) does not count: it
    is compiled, and cached, with a caller, which this run may not have."""
    from numba.core.dispatcher import Dispatcher

    kernels = {name: [v for v in vars(mod).values() if isinstance(v, Dispatcher)]
               for name, mod in list(sys.modules.items())
               if name.startswith("strads.") and mod is not None}
    own = {name: [v for v in ks if v.py_func.__module__ == name]
           for name, ks in kernels.items()}
    callees = {id(v) for name, ks in kernels.items() if own[name] for v in ks
               if v.py_func.__module__ != name}
    for name, ks in kernels.items():
        if name.startswith("strads.io") or all(id(v) in callees for v in own[name]):
            continue
        files = [v._cache._cache_file for v in own[name]
                 if hasattr(getattr(v, "_cache", None), "_cache_file")]
        try:
            if files and not any(f._load_index() for f in files):
                return True
        except Exception:  # noqa: BLE001 -- numba's internals moved: say nothing
            return False
    return False


class Progress:
    """One live line on stderr: round, updates/s, objective, elapsed, ETA. The ETA's
    rate is measured from the first line after the last compilation (none before)."""

    def __init__(self, app, quiet, max_rounds, time_limit):
        self.app, self.quiet = app, quiet
        self.max_rounds, self.time_limit = max_rounds, time_limit
        self.tty = sys.stderr.isatty()
        self.last = 0.0
        self.base = self.compiles = None  # (time, round) the rate is measured from

    def show(self, now, round, updates, objective, final=False):
        if self.quiet:
            return
        if self.compiles != COMPILES.count:  # rounds timed from here on
            self.base, self.compiles = (now, round), COMPILES.count
        if not final and now - self.last < (0.5 if self.tty else 2.0):
            return
        self.last = now
        rate = updates / now if now > 0 else 0.0
        eta = []
        if self.time_limit:
            eta.append(self.time_limit - now)
        t0, r0 = self.base
        if self.max_rounds and self.max_rounds < sys.maxsize and round > r0:
            eta.append((now - t0) / (round - r0) * (self.max_rounds - round))
        eta_s = f"  eta<={max(0.0, min(eta)):.0f}s" if eta and not final else ""
        line = (f"[{self.app}] round {round}  {rate:,.0f} updates/s  "
                f"objective {objective:.10g}  {now:.1f}s{eta_s}")
        end = "\n" if final or not self.tty else ""  # a terminal's line is rewritten in place
        sys.stderr.write(("\r" if self.tty else "") + line + end)
        sys.stderr.flush()
