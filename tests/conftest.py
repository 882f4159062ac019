import atexit
import io
import json
import os
import resource
import selectors
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))  # (the fuzzer and the peers' helpers)
import _common  # noqa: E402

l1_logistic = _common.l1_logistic  # (scikit-learn's L1 logistic regression, seeded)


def mpiexec():
    """The mpiexec beside this Python (the mpich wheel's), else the one on PATH."""
    exe = Path(sys.executable).parent / "mpiexec"
    return str(exe) if exe.exists() else shutil.which("mpiexec")


def world():
    """(rank, size) of COMM_WORLD when launched by mpiexec, else (0, 1)."""
    from strads.transport import mpi_world_size

    if mpi_world_size() > 1:
        from mpi4py import MPI

        return MPI.COMM_WORLD.Get_rank(), MPI.COMM_WORLD.Get_size()
    return 0, 1


def child_env():
    """This environment without the launcher's variables: a child is its own MPI job."""
    return {k: v for k, v in os.environ.items()
            if not k.startswith(("PMI_", "MPI_", "OMPI_", "PMIX_", "HYDRA"))}


def run_cli(args, timeout=300, np=None, env=None, rlimit_as=None, **kw):
    """Run ``python -m <args>`` (under ``mpiexec -n np`` if np) and return the process;
    ``env``: variables to set on top of :func:`child_env`; ``rlimit_as``: the child's
    address-space limit. In one process with this environment, a child of the fork
    server (tests/cli_server.py), which has imported strads and loaded its kernels."""
    cmd = [sys.executable, "-m", *args]
    if not (np or env or kw) and _Server.env == _Server.same(child_env()) and _Server.up():
        return _Server.run(cmd, args, timeout, rlimit_as)
    if np:
        cmd = [mpiexec(), "-n", str(np), *cmd]
    if rlimit_as:
        kw["preexec_fn"] = lambda: resource.setrlimit(
            resource.RLIMIT_AS, (rlimit_as, resource.RLIM_INFINITY))
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout,
                          env={**child_env(), **(env or {})}, cwd=kw.pop("cwd", ROOT), **kw)


class _Server:
    """This test process's fork server, started on its first use. Its environment is
    this one's when the tests began: it serves the runs in that environment (some
    variables are read at start-up) but for the test's name."""
    env = proc = path = None

    @staticmethod
    def same(env):
        return {k: v for k, v in env.items() if k != "PYTEST_CURRENT_TEST"}

    @classmethod
    def up(cls):
        """Started (once) and serving; else (no server here) fresh interpreters."""
        if cls.proc is None:
            cls.path = os.path.join(tempfile.mkdtemp(prefix="strads-cli-"), "socket")
            cls.proc = subprocess.Popen(
                [sys.executable, str(ROOT / "tests" / "cli_server.py"), cls.path],
                stdout=subprocess.PIPE, env=cls.env, cwd=ROOT)
            atexit.register(cls.stop)
            if cls.proc.stdout.readline() != b"ready\n":
                cls.env = None
        return cls.env is not None

    @classmethod
    def stop(cls):
        """End the server: an empty request (then its socket's folder goes)."""
        try:
            with socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET) as s:
                s.connect(cls.path)
                s.send(b"")
            cls.proc.wait(timeout=30)
        except (OSError, subprocess.TimeoutExpired):
            cls.proc.kill()
            cls.proc.wait()
        shutil.rmtree(os.path.dirname(cls.path), ignore_errors=True)

    @classmethod
    def run(cls, cmd, args, timeout, rlimit_as):
        fds = os.pipe(), os.pipe()
        with socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET) as s:
            s.connect(cls.path)
            request = {"argv": list(map(str, args)), "env": child_env(), "cwd": str(ROOT),
                       "rlimit_as": rlimit_as}
            socket.send_fds(s, [json.dumps(request).encode()], [w for _, w in fds])
            for _, w in fds:
                os.close(w)
            pid = int(s.recv(64))
            outputs = _read_all([r for r, _ in fds], timeout)
            if outputs is None:
                os.kill(pid, signal.SIGKILL)
                s.recv(64)
                raise subprocess.TimeoutExpired(cmd, timeout)
            code = int(s.recv(64))
        return subprocess.CompletedProcess(cmd, code, *outputs)


def pytest_collection_finish(session):
    _Server.env = _Server.same(child_env())  # (importing the tests may set variables)


def _read_all(fds, timeout):
    """What ``fds`` give until their ends, as subprocess.run(text=True) decodes it (they
    are closed then), or None after ``timeout`` seconds."""
    chunks = {fd: [] for fd in fds}
    deadline = time.monotonic() + timeout
    with selectors.DefaultSelector() as sel:
        for fd in fds:
            sel.register(fd, selectors.EVENT_READ)
        while sel.get_map() and time.monotonic() < deadline:
            for key, _ in sel.select(deadline - time.monotonic()):
                data = os.read(key.fd, 1 << 16)
                chunks[key.fd].append(data)
                if not data:
                    sel.unregister(key.fd)
        timed_out = bool(sel.get_map())
    for fd in fds:
        os.close(fd)
    return None if timed_out else [
        io.TextIOWrapper(io.BytesIO(b"".join(chunks[fd]))).read() for fd in fds]


def pytest_collection_modifyitems(config, items):
    # the long tests first: under pytest -n none is left to end the run alone
    items.sort(key=lambda item: item.get_closest_marker("long") is None)
    # pytest-mpi runs unmarked tests on every rank even with --only-mpi; an in-process
    # test must not run under mpiexec (its fit() would join the MPI job).
    from strads.transport import mpi_world_size

    if mpi_world_size() > 1:
        skip = pytest.mark.skip(reason="in-process test; runs without mpiexec")
        for item in items:
            if "mpi" not in item.keywords:
                item.add_marker(skip)


class FakeClock:
    """The real clocks plus ``skipped`` seconds, for a module's ``time`` (monkeypatched):
    a test skips time instead of waiting for it. ``frozen``: the clocks move by the
    skips alone (what a test asserts on is then exact, whatever the machine's load)."""

    def __init__(self, monkeypatch, *modules, frozen=False):
        import time
        self.skipped = 0.0
        def base(clock):  # the real clock, or its reading now
            start = clock()
            return (lambda: start) if frozen else clock
        pc, mono, now = base(time.perf_counter), base(time.monotonic), base(time.time)
        self.perf_counter = lambda: pc() + self.skipped
        self.monotonic = lambda: mono() + self.skipped
        self.time = lambda: now() + self.skipped
        self.sleep = time.sleep
        for m in modules:
            monkeypatch.setattr(m, "time", self)

    def skip(self, seconds):
        self.skipped += seconds
