"""A lost rank's cost: in place with ULFM (Open MPI 5 from .venv-ulfm, ``make test-ulfm``
builds it) against the launcher's restart (``strads.launch``, MPICH from .venv). The same
Lasso run on 4 ranks, checkpointed every 0.2 s, loses rank 2 to kill -9 once the
checkpoint has passed round 20; ``recovery_s`` is what the run records (summary.json),
from the loss seen to the first round after it. Figures: docs/elastic.md."""
import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _common import ROOT, child_env

LASSO = ["strads.apps.lasso", "--n-samples", "3000", "--n-features", "20000",
         "--schedule", "round-robin", "--tol", "1e-9", "--quiet", "--checkpoint-every", "0.2"]
ULFM = ROOT / ".venv-ulfm" / "bin"
sys.path.insert(0, str(ROOT / "tests"))
from test_robustness import _pid_of_rank  # noqa: E402


def one(path, out):
    """One run losing rank 2; -> (recovery_s, the job's seconds from start to exit)."""
    if path == "ulfm":
        cmd = [str(ULFM / "mpiexec"), "--with-ft", "ulfm", "--oversubscribe", "--bind-to",
               "none", "-n", "4", str(ULFM / "python"), "-m"]
    else:
        cmd = [sys.executable, "-m", "strads.launch", "-n", "4"]
    env = {**child_env(), "PYTHONPATH": str(ROOT), "OMPI_ALLOW_RUN_AS_ROOT": "1",
           "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1"}
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd + LASSO + ["--out", str(out)], env=env, cwd=ROOT,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    manifest = Path(out, "checkpoint", "manifest.json")
    while proc.poll() is None:
        try:
            at = json.loads(manifest.read_text())["round"]
        except (OSError, ValueError):
            at = -1
        pid = _pid_of_rank(out, 2)
        if at > 20 and pid:
            os.kill(pid, signal.SIGKILL)
            break
        time.sleep(0.05)
    _, err = proc.communicate(timeout=600)
    wall = time.perf_counter() - t0
    if proc.returncode:
        raise SystemExit(f"{path}: exit {proc.returncode}\n{err}")
    s = json.loads(Path(out, "summary.json").read_text())
    return s["recoveries" if path == "ulfm" else "restarts"][0]["recovery_s"], wall


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeat", type=int, default=3)
    a = ap.parse_args()
    if not (ULFM / "mpiexec").exists():
        raise SystemExit("no .venv-ulfm: run `make test-ulfm` first")
    print("| path | recovery_s | job's wall s |\n|---|---|---|")
    for path in ("ulfm", "launcher"):
        for _ in range(a.repeat):
            with tempfile.TemporaryDirectory() as tmp:
                rec, wall = one(path, Path(tmp, "run"))
            print(f"| {path} | {rec:.2f} | {wall:.1f} |", flush=True)


if __name__ == "__main__":
    main()
