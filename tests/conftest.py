import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


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


def run_cli(args, timeout=300, np=None, env=None, **kw):
    """Run ``python -m <args>`` (under ``mpiexec -n np`` if np) and return the process;
    ``env``: variables to set on top of :func:`child_env`."""
    cmd = [sys.executable, "-m", *args]
    if np:
        cmd = [mpiexec(), "-n", str(np), *cmd]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout,
                          env={**child_env(), **(env or {})}, cwd=kw.pop("cwd", ROOT), **kw)



def l1_logistic(**kw):
    """scikit-learn's L1 LogisticRegression: ``l1_ratio=1`` from 1.8 (``penalty`` is
    deprecated there and goes in 1.10), ``penalty="l1"`` before."""
    import sklearn
    from sklearn.linear_model import LogisticRegression

    new = tuple(int(v) for v in sklearn.__version__.split(".")[:2]) >= (1, 8)
    return LogisticRegression(**kw, **({"l1_ratio": 1.0} if new else {"penalty": "l1"}))


def pytest_collection_modifyitems(config, items):
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
    a test skips time instead of waiting for it."""

    def __init__(self, monkeypatch, *modules):
        import time
        self.skipped = 0.0
        self.perf_counter = lambda: time.perf_counter() + self.skipped
        self.monotonic = lambda: time.monotonic() + self.skipped
        self.time = lambda: time.time() + self.skipped
        self.sleep = time.sleep
        for m in modules:
            monkeypatch.setattr(m, "time", self)

    def skip(self, seconds):
        self.skipped += seconds
