"""What the benchmark scripts share: running an app's command line, in one process or
under mpiexec, and reading its summary."""
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MPIEXEC = str(Path(sys.executable).parent / "mpiexec")  # the mpich wheel's, else PATH's
if not os.path.exists(MPIEXEC):
    MPIEXEC = shutil.which("mpiexec") or "mpiexec"


def child_env():
    """This environment without an MPI launcher's variables: a child is its own job."""
    return {k: v for k, v in os.environ.items()
            if not k.startswith(("PMI_", "MPI_", "OMPI_", "PMIX_", "HYDRA"))}


def run_cli(args, out, np=None, **kw):
    """``python -m ARGS --quiet --out OUT`` (under ``mpiexec -n np``); -> summary.json."""
    cmd = [sys.executable, "-m", *map(str, args), "--quiet", "--out", str(out)]
    if np:
        cmd = [MPIEXEC, "-n", str(np), *cmd]
    subprocess.run(cmd, check=True, env=child_env(), cwd=ROOT, stdout=subprocess.DEVNULL,
                   **kw)
    return json.loads(Path(out, "summary.json").read_text())


def timed_cli(args, out=None, np=None):
    """:func:`run_cli` in a temporary folder (or ``out``); -> (the command's seconds,
    summary)."""
    with tempfile.TemporaryDirectory() as tmp:
        t = time.perf_counter()
        s = run_cli(args, out or tmp, np)
        return time.perf_counter() - t, s


def listed(times):
    """``1.23, 1.20, 1.31``: every run's seconds, for a best-of line."""
    return ", ".join(f"{t:.2f}" for t in times)
