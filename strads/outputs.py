"""What a run leaves behind: the output folder (summary.json, trace.csv, model.npz, written
all or nothing), the check of ``--out`` before any work, and the progress line."""
import contextlib
import csv
import json
import math
import os
import shutil
import sys
import tempfile

import numpy as np

from . import checkpoint as _ckpt
from .errors import DataError

OUTPUTS = ("summary.json", "trace.csv", "model.npz")


def write(out, summary, trace, model):
    """Write the outputs into ``out``, all or nothing: into a new folder beside it, which
    then takes the place of ``out`` in one step; whatever else ``out`` held (a
    checkpoint, your files) is moved into it."""
    out = os.path.abspath(out)
    parent = os.path.dirname(out)
    os.makedirs(parent, exist_ok=True)
    tmp = tempfile.mkdtemp(prefix=f".{os.path.basename(out)}.tmp-", dir=parent)
    try:
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o777 & ~umask)  # as os.makedirs would have made it
        with _durable(os.path.join(tmp, "summary.json"), "w") as f:
            json.dump(jsonable(summary), f, indent=2)
            f.write("\n")
        cols = []
        for row in trace:
            cols += [k for k in row if k not in cols]
        with _durable(os.path.join(tmp, "trace.csv"), "w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=cols)
            w.writeheader()
            w.writerows(trace)
        with _durable(os.path.join(tmp, "model.npz"), "wb") as f:
            np.savez(f, **model)
        _ckpt._fsync_dir(tmp)
        if not os.path.lexists(out):
            os.rename(tmp, out)
        else:
            _exchange(tmp, out)  # out: the new results; tmp: the old folder
            for name in os.listdir(tmp):
                if name not in OUTPUTS:
                    os.rename(os.path.join(tmp, name), os.path.join(out, name))
        _ckpt._fsync_dir(parent)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


@contextlib.contextmanager
def _durable(path, mode, **kw):
    """open() for writing that flushes to disk before closing."""
    with open(path, mode, **kw) as f:
        yield f
        f.flush()
        os.fsync(f.fileno())


def _exchange(a, b):
    """Swap two folders in one step (Linux renameat2 RENAME_EXCHANGE); elsewhere, two
    renames."""
    try:
        import ctypes
        libc = ctypes.CDLL(None, use_errno=True)
        if libc.renameat2(-100, os.fsencode(a), -100, os.fsencode(b), 2) == 0:
            return
    except (OSError, AttributeError):
        pass
    old = a + ".old"
    os.rename(b, old)
    os.rename(a, b)
    os.rename(old, a)


def check_out(out):
    """Refuse an output folder that cannot be written, before any work (one line)."""
    if out is None:
        return
    if not isinstance(out, (str, os.PathLike)) or not os.fspath(out):
        raise DataError(f"--out {out!r}: not a folder name")
    path = os.path.abspath(out)
    if os.path.lexists(path) and not os.path.isdir(path):
        raise DataError(f"--out {out}: exists and is not a folder")
    probe = path
    while not os.path.lexists(probe):
        probe = os.path.dirname(probe)
    if not os.path.isdir(probe):
        raise DataError(f"--out {out}: {probe} is a file, not a folder")
    need = [p for p in (path, os.path.dirname(path)) if os.path.isdir(p)] or [probe]
    for p in need:  # really try: permission bits do not stop root, a read-only mount does
        try:
            os.rmdir(tempfile.mkdtemp(prefix=".strads-probe-", dir=p))
        except OSError as e:
            raise DataError(f"--out {out}: cannot write in {p}: {e.strerror}") from None


def jsonable(d):
    """``d`` with NumPy scalars as Python ones and non-finite floats as None (JSON has
    no NaN)."""
    out = {}
    for k, v in d.items():
        if isinstance(v, np.generic):
            v = v.item()
        if isinstance(v, float) and not math.isfinite(v):
            v = None
        out[k] = v
    return out


class Progress:
    """One live line on stderr: round, updates/s, objective, elapsed, ETA."""

    def __init__(self, app, quiet, max_rounds, time_limit):
        self.app, self.quiet = app, quiet
        self.max_rounds, self.time_limit = max_rounds, time_limit
        self.tty = sys.stderr.isatty()
        self.last = 0.0

    def show(self, now, round, updates, objective, final=False):
        if self.quiet or (not final and now - self.last < (0.5 if self.tty else 2.0)):
            return
        self.last = now
        rate = updates / now if now > 0 else 0.0
        eta = []
        if self.time_limit:
            eta.append(self.time_limit - now)
        if self.max_rounds and self.max_rounds < sys.maxsize and round > 0:
            eta.append(now / round * (self.max_rounds - round))
        eta_s = f"  eta<={max(0.0, min(eta)):.0f}s" if eta and not final else ""
        line = (f"[{self.app}] round {round}  {rate:,.0f} updates/s  "
                f"objective {objective:.10g}  {now:.1f}s{eta_s}")
        if self.tty:
            sys.stderr.write("\r" + line + ("\n" if final else ""))
        else:
            sys.stderr.write(line + "\n")
        sys.stderr.flush()
