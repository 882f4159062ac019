"""Failures under mpiexec end the whole job (the other ranks would wait forever: the
subprocess timeout catches that), with the failing rank's traceback."""
import subprocess
import sys

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
