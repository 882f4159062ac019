"""Failures under mpiexec end the whole job (the other ranks would wait forever: the
subprocess timeout catches that), with the failing rank's traceback; signals to any rank
or to the launcher, a stalled scheduler, a changed input on a resharded resume and the
launcher's restarts, as a user of the command lines meets them."""
import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import ROOT, child_env, mpiexec


def launch(where, np=3, timeout=300):
    return subprocess.run([mpiexec(), "-n", str(np), sys.executable,
                           str(ROOT / "tests" / "failing_app.py"), where],
                          capture_output=True, text=True, timeout=timeout, env=child_env())


def test_exception_on_a_worker_ends_the_job():
    p = launch("worker")
    assert p.returncode != 0
    assert "### rank 2 of 3" in p.stderr  # worker 1 is rank 2
    assert "Traceback" in p.stderr and "ValueError: boom on worker 1" in p.stderr


def test_exception_on_the_scheduler_ends_the_job():
    p = launch("scheduler", np=4)
    assert p.returncode != 0
    assert "### rank 0 of 4" in p.stderr
    assert "RuntimeError: boom on the scheduler" in p.stderr


def test_bad_input_under_mpi_is_one_line():
    p = launch("setup")
    assert p.returncode != 0
    assert "error: input.txt:7: count -3 is negative" in p.stderr
    assert "Traceback" not in p.stderr


PY = sys.executable
# a Lasso that runs until stopped (10^8 rounds), checkpointing often
ENDLESS = ["strads.apps.lasso", "--schedule", "priority", "--tol", "0", "--max-rounds",
           "100000000", "--quiet", "--checkpoint-every", "0.05"]


def _start(cmd, **kw):
    return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=child_env(), cwd=ROOT, **kw)


def _wait_checkpoint(proc, out, round=3, deadline=240):
    """Wait until the run writing ``out`` has a checkpoint at ``round`` or later."""
    manifest = Path(out) / "checkpoint" / "manifest.json"
    end = time.monotonic() + deadline  # (a hang guard)
    while time.monotonic() < end and proc.poll() is None:
        try:
            if json.loads(manifest.read_text())["round"] >= round:
                return
        except (OSError, ValueError, KeyError):
            pass
        time.sleep(0.02)
    raise AssertionError("the run ended (or never checkpointed) before the signal: "
                         + proc.communicate(timeout=60)[1][-2000:])


def _finish(proc, group=False):
    try:
        return proc.communicate(timeout=240)
    except subprocess.TimeoutExpired:  # a hang: end it, then fail
        if group:
            os.killpg(proc.pid, signal.SIGKILL)
        else:
            proc.kill()
        out, err = proc.communicate()
        raise AssertionError("hang: " + err[-2000:])


# -- the launcher and SIGINT ---------------------------------------------------------------

def test_sigint_to_the_launcher_exits_130_without_a_traceback(tmp_path):
    out = tmp_path / "run"
    proc = _start([PY, "-m", "strads.launch", "-n", "2", *ENDLESS, "--out", str(out)])
    _wait_checkpoint(proc, out)
    proc.send_signal(signal.SIGINT)
    _, err = _finish(proc)
    assert json.loads((out / "summary.json").read_text())["stop_reason"] == "interrupted"
    assert "Traceback" not in err and proc.returncode == 130, (proc.returncode, err[-3000:])


def test_ctrl_c_under_the_launcher_stops_at_a_round_with_outputs(tmp_path):
    out = tmp_path / "run"
    proc = _start([PY, "-m", "strads.launch", "-n", "2", *ENDLESS, "--out", str(out)],
                  start_new_session=True)
    _wait_checkpoint(proc, out)
    os.killpg(proc.pid, signal.SIGINT)  # what a terminal's Ctrl-C does
    _, err = _finish(proc, group=True)
    assert (out / "summary.json").exists(), err[-3000:]
    assert json.loads((out / "summary.json").read_text())["stop_reason"] == "interrupted"
    assert "Traceback" not in err and proc.returncode == 130, (proc.returncode, err[-3000:])


# -- a signal to one rank ------------------------------------------------------------------

def _pid_of_rank(marker, rank):
    """The pid of MPICH rank ``rank`` whose command line holds ``marker``."""
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            cmd = Path(f"/proc/{pid}/cmdline").read_bytes()
            env = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
        except OSError:
            continue
        if str(marker).encode() in cmd and f"PMI_RANK={rank}".encode() in env:
            return int(pid)
    return None


def _wait_progress(proc, deadline=240):
    """Read stderr until the first progress line ('[app] round N ...'): the run is in its
    rounds. -> what was read."""
    import selectors

    sel, seen = selectors.DefaultSelector(), ""
    sel.register(proc.stderr, selectors.EVENT_READ)
    end = time.monotonic() + deadline  # (a hang guard)
    while time.monotonic() < end and "] round " not in seen:
        if sel.select(timeout=1):
            chunk = os.read(proc.stderr.fileno(), 4096).decode()
            if not chunk:
                break
            seen += chunk
    sel.close()
    assert "] round " in seen, seen[-2000:]
    return seen


def test_a_signal_to_a_second_scheduler_rank_stops_the_run(tmp_path):
    out = tmp_path / "run"
    proc = subprocess.Popen(
        [mpiexec(), "-n", "4", PY, "-m", "strads.apps.lasso", "--schedule", "priority",
         "--tol", "0", "--max-rounds", "100000000", "--time-limit", "45", "--schedulers",
         "2", "--log-interval", "1", "--out", str(out)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=child_env(), cwd=ROOT)
    _wait_progress(proc)
    pid = _pid_of_rank(out, 1)
    assert pid is not None and proc.poll() is None
    os.kill(pid, signal.SIGTERM)
    stdout, _ = proc.communicate(timeout=240)
    summary = json.loads((out / "summary.json").read_text())
    assert (proc.returncode, summary["stop_reason"]) == (143, "interrupted"), summary


# -- one prefix for the command line's errors ----------------------------------------------

def _error_line(args, np_=None):
    cmd = [PY, "-m", "strads.apps.lasso", *args]
    if np_:
        cmd = [mpiexec(), "-n", str(np_), *cmd]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=240, env=child_env(),
                       cwd=ROOT)
    lines = [x for x in p.stderr.splitlines() if "error:" in x]
    assert p.returncode == 2 and len(lines) == 1, p.stderr[-2000:]
    return lines[0]


def _prefix(line):
    return line[:line.index("error:") + len("error:")]


@pytest.mark.parametrize("args, np_", [(["--resume"], None),
                                       (["--data", "no-such.svm", "--quiet"], 2)])
def test_every_refusal_has_the_prefix_of_a_mistyped_flag(args, np_):
    ref = _prefix(_error_line(["--no-such-flag"]))  # argparse's
    line = _error_line(args, np_)
    if np_:  # under mpiexec: the same line as in one process
        assert line == _error_line(args), line
    assert _prefix(line) == ref, (line, ref)


# -- the launcher and a previous run's checkpoint ------------------------------------------

def test_launch_never_resumes_from_an_earlier_runs_checkpoint(tmp_path):
    out = tmp_path / "run"
    base = ["strads.apps.lasso", "--schedule", "priority", "--tol", "0", "--quiet",
            "--out", str(out)]
    first = subprocess.run([mpiexec(), "-n", "2", PY, "-m", *base, "--max-rounds", "50",
                            "--checkpoint-every", "0.05"], capture_output=True, text=True,
                           timeout=240, env=child_env(), cwd=ROOT)
    assert first.returncode == 0 and (out / "checkpoint" / "manifest.json").exists()
    # a new run (another seed) that checkpoints rarely: rank 2 dies before its first one
    proc = _start([PY, "-m", "strads.launch", "-n", "3", *base, "--max-rounds", "2000",
                   "--checkpoint-every", "600", "--seed", "1"])
    end = time.monotonic() + 240  # (a hang guard)
    while _pid_of_rank(out, 2) is None and proc.poll() is None and time.monotonic() < end:
        time.sleep(0.05)
    pid = _pid_of_rank(out, 2)
    assert pid is not None and proc.poll() is None
    os.kill(pid, signal.SIGKILL)
    _, err = _finish(proc)
    assert proc.returncode == 0, err[-3000:]
    restarts = json.loads((out / "summary.json").read_text())["restarts"]
    assert restarts[0]["resumed_from_round"] is None, restarts


# -- a changed input on a resharded resume -------------------------------------------------

def test_a_changed_npz_is_refused_on_a_resharded_resume(tmp_path):
    import numpy as np

    rng = np.random.default_rng(0)
    X = rng.standard_normal((80, 30))
    y = X[:, :3] @ [1.0, -1.0, 2.0] + 0.1 * rng.standard_normal(80)
    data, out = tmp_path / "d.npz", tmp_path / "run"
    np.savez(data, X=X, y=y)
    base = [PY, "-m", "strads.apps.lasso", "--data", str(data), "--schedule", "round-robin",
            "--tol", "0", "--quiet", "--checkpoint-every", "0.01", "--out", str(out)]

    def run(*extra):
        return subprocess.run(base + list(extra), capture_output=True, text=True,
                              timeout=240, env=child_env(), cwd=ROOT)
    assert run("--workers", "2", "--max-rounds", "20").returncode == 0
    y[5] += 10.0
    np.savez(data, X=X, y=y)
    p = run("--workers", "3", "--max-rounds", "40", "--resume")
    assert p.returncode == 2 and "differs" in p.stderr, (p.returncode, p.stderr[-2000:])


# -- a stalled scheduler rank --------------------------------------------------------------

def test_workers_name_a_stalled_rank_0(tmp_path):
    out = tmp_path / "run"
    proc = _start([mpiexec(), "-n", "3", PY, "-m", *ENDLESS, "--stall-warn", "1",
                   "--out", str(out)])
    _wait_checkpoint(proc, out)
    pid = _pid_of_rank(out, 0)
    os.kill(pid, signal.SIGSTOP)
    time.sleep(3)  # (what is stalled; nothing is timed)
    os.kill(pid, signal.SIGCONT)
    proc.send_signal(signal.SIGTERM)
    _, err = _finish(proc)
    assert proc.returncode == 143, err[-2000:]
    assert re.search(r"^\[lasso\] rank [12] waiting \d+\.\d s for rank 0 \(the scheduler\)$",
                     err, re.M), err[-2000:]


# -- Ctrl-C while the ranks start ----------------------------------------------------------

def test_ctrl_c_while_the_ranks_start_exits_130_without_tracebacks(tmp_path):
    out = tmp_path / "run"
    proc = _start([mpiexec(), "-n", "2", PY, "-m", *ENDLESS, "--out", str(out)],
                  start_new_session=True)
    end = time.monotonic() + 60  # (a hang guard)
    while _pid_of_rank(out, 1) is None and proc.poll() is None and time.monotonic() < end:
        time.sleep(0.01)
    assert proc.poll() is None
    time.sleep(0.3)  # (in its imports: no round has begun)
    os.killpg(proc.pid, signal.SIGINT)  # what a terminal's Ctrl-C does
    _, err = _finish(proc, group=True)
    assert "Traceback" not in err and proc.returncode == 130, (proc.returncode, err[-1500:])


# -- the launcher and MF's early stopping --------------------------------------------------

def test_launch_resumes_mfs_validation_run_from_its_checkpoint(tmp_path):
    out = tmp_path / "run"
    proc = _start([PY, "-m", "strads.launch", "-n", "3", "strads.apps.mf", "--iters", "40",
                   "--tol", "0", "--lambda", "0.01", "--quiet", "--checkpoint-every", "0.02",
                   "--out", str(out)], start_new_session=True)
    _wait_checkpoint(proc, out / "validation", round=20)
    pid = _pid_of_rank(out, 2)
    assert pid is not None and proc.poll() is None
    if (out / "checkpoint").exists():  # (the final run has begun: not the case meant)
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        pytest.skip("the validation run ended before the kill")
    os.kill(pid, signal.SIGKILL)
    _, err = _finish(proc, group=True)
    assert proc.returncode == 0, err[-2000:]
    restarts = json.loads((out / "summary.json").read_text())["restarts"]
    assert restarts[0]["resumed_from_round"] is not None, (restarts, err[-2000:])
