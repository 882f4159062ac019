"""numba keys each kernel's disk cache on its own module's file only: a kernel that
inlines or calls one from another module keeps the old callee once that module changes
(an editable install after ``git pull``). So every kernel cache of the package goes when
any of its modules that define kernels changed."""
import contextlib
import os
import zlib

ROOT = os.path.dirname(os.path.abspath(__file__))
STAMP = "strads-kernel-sources"


def _walk(root):
    for d, dirs, files in os.walk(root):
        dirs[:] = sorted(x for x in dirs if x != "__pycache__")
        yield d, sorted(files)


def check(root=ROOT):
    """Drop the package's numba caches (``*.nbi``, ``*.nbc``) if a kernel module changed
    since the last check (stat only: its modification time and size); quietly nothing
    where the package cannot be written (an installed copy: its files do not change)."""
    crc = 0
    for d, files in _walk(root):
        for f in files:
            if f.endswith(".py"):
                p = os.path.join(d, f)
                try:
                    with open(p, "rb") as fh:
                        if b"njit(" not in fh.read():
                            continue
                    st = os.stat(p)
                except OSError:
                    continue
                crc = zlib.crc32(f"{os.path.relpath(p, root)} {st.st_mtime_ns} "
                                 f"{st.st_size}\n".encode(), crc)
    stamp = os.path.join(root, "__pycache__", STAMP)
    with contextlib.suppress(OSError), open(stamp) as fh:
        if fh.read() == str(crc):
            return False
    try:
        for d, _ in _walk(root):
            cache = os.path.join(d, "__pycache__")
            for f in os.listdir(cache) if os.path.isdir(cache) else ():
                if f.endswith((".nbi", ".nbc")):
                    with contextlib.suppress(FileNotFoundError):  # (another process's check)
                        os.unlink(os.path.join(cache, f))
        os.makedirs(os.path.dirname(stamp), exist_ok=True)
        with open(stamp + f".{os.getpid()}", "w") as fh:
            fh.write(str(crc))
        os.replace(stamp + f".{os.getpid()}", stamp)
    except OSError:
        return False
    return True
