"""How much memory this machine and this process have, and byte counts in words."""
import os
import threading
from contextlib import contextmanager, suppress
from functools import lru_cache


def physical_memory():
    """Bytes of memory this process may hold, the size checks' bound: the physical
    memory, or less where the address-space limit (``ulimit -v``, less what is mapped
    already) or a cgroup's limit says so (:func:`whose`); None where nothing says."""
    caps = _caps()
    return min(caps.values()) if caps else None


def whose():
    """Whose memory :func:`physical_memory` is, for a refusal: ``this machine's``, or
    ``this process's`` where its limits leave it less."""
    caps = _caps()
    return "this machine's" if not caps or min(caps.values()) == caps.get("physical") \
        else "this process's"


def physical_words(mem):
    """``this machine's physical memory (M)``, or ``this process's memory (M)``."""
    owner = whose()
    kind = "physical memory" if owner == "this machine's" else "memory"
    return f"{owner} {kind} ({fmt_bytes(mem)})"


def _caps():
    out = {}
    try:
        n = int(os.sysconf("SC_PAGE_SIZE")) * int(os.sysconf("SC_PHYS_PAGES"))
        if n > 0:
            out["physical"] = n
    except (ValueError, OSError, AttributeError):
        pass
    soft = _address_space()
    if soft is not None:
        with suppress(ValueError, OSError):
            with open("/proc/self/statm") as f:  # (pages mapped now)
                mapped = int(f.read().split()[0]) * int(os.sysconf("SC_PAGE_SIZE"))
            out["address space"] = max(soft - mapped, 1)
    if _cgroup_limits():
        out["cgroup"] = min(_cgroup_limits())
    return out


def beyond(need):
    """``about N, more than this machine's M of memory`` when ``need`` bytes exceed the
    memory this process may hold (for a refusal), else None."""
    mem = physical_memory()
    if mem is not None and need > mem:
        return f"about {fmt_bytes(need)}, more than {whose()} {fmt_bytes(mem)} of memory"
    return None


def memory_limits():
    """Bounds, in bytes, on what this process may use, those it can tell: its
    address-space limit (``ulimit -v``), and the physical memory (or the cgroup's limit,
    if lower) divided among the MPI ranks of this host (else of the job)."""
    out = [] if _address_space() is None else [_address_space()]
    phys = _caps().get("physical")
    if phys is not None:
        phys = min([phys] + _cgroup_limits())
        ranks = [max(1, int(os.environ[v])) for v in (
            "MPI_LOCALNRANKS", "OMPI_COMM_WORLD_LOCAL_SIZE", "PMI_SIZE",
            "OMPI_COMM_WORLD_SIZE") if os.environ.get(v, "").isdigit()]
        out.append(phys // (ranks + [1])[0])
    return out


def _address_space():
    """The address-space limit (``ulimit -v``) in bytes, or None."""
    with suppress(ImportError, ValueError, OSError):
        import resource

        soft, _ = resource.getrlimit(resource.RLIMIT_AS)
        if soft != resource.RLIM_INFINITY and soft > 0:
            return soft
    return None


@lru_cache(maxsize=1)  # (read once a process: every fit of a GridSearchCV asks)
def _cgroup_limits():
    out = []
    for path in ("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"):
        with suppress(OSError):
            with open(path) as f:
                text = f.read().strip()
            if text.isdigit():
                out.append(int(text))
    return out


def fmt_bytes(n):
    """Bytes in words: ``600 bytes``, ``0.0672 MiB``, ``1.5 GiB``, ``58.2 TiB``, any size."""
    n = int(n)
    if n < 1 << 10:
        return f"{n} bytes"
    unit, shift = ("MiB", 20) if n < 1 << 28 else ("GiB", 30) if n < 1 << 40 else ("TiB", 40)
    if n >= 1 << 1000:  # beyond what a float holds
        s = str(n >> shift)
        return f"{s[0]}.{s[1:3]}e+{len(s) - 1} {unit}"
    return f"{n / 2 ** shift:.3g} {unit}"


KEPT_BLOCK = 64 << 20  # glibc's mmap threshold during the rounds (keep_freed_memory)
_loading, _loading_lock = [0], threading.Lock()


@lru_cache(maxsize=1)
def _libc():
    import ctypes
    return ctypes.CDLL(None)


def _mmap_threshold(n, trim=None):
    with suppress(OSError, AttributeError):
        libc = _libc()
        libc.mallopt(-3, n)  # M_MMAP_THRESHOLD (glibc; elsewhere a no-op)
        if trim:
            libc.mallopt(-1, trim)  # M_TRIM_THRESHOLD


def keep_freed_memory():
    """Keep freed blocks below KEPT_BLOCK in the heap: the rounds free and allocate
    arrays of the same few sizes, whose pages glibc would unmap and fault in again."""
    _mmap_threshold(KEPT_BLOCK, trim=256 << 20)


@contextmanager
def returning_freed_memory():
    """While data is loaded (by any of this process's threads), a freed array of 1 MiB
    or more goes back to the system at once, not kept in the heap to count in the peak
    (docs/apps/mf.md, memory)."""
    with _loading_lock:
        _loading[0] += 1
        _mmap_threshold(1 << 20)
    try:
        yield
    finally:
        with _loading_lock:
            _loading[0] -= 1
            if not _loading[0]:
                _mmap_threshold(KEPT_BLOCK)
