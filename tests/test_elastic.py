"""Elastic runs: a checkpoint written by W workers resumes on W' (in one process and under
mpiexec, both scheduler layouts), and ``strads.launch`` restarts a job that lost a rank
from its last checkpoint on the ranks that remain."""
import json
import os
import re
import select
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from sklearn.datasets import dump_svmlight_file

from strads.apps import lasso, lda, logreg
from strads.apps.lda.data import make_corpus

from conftest import ROOT, child_env, mpiexec, run_cli

sys.path.insert(0, str(Path(__file__).parent))
from test_robustness import _pid_of_rank  # noqa: E402


def _legs(fit, W, W2, stop, tmp_path, **kw):
    """An uninterrupted run on W workers, and a run checkpointed on W workers, stopped
    after ``stop`` rounds and resumed on W2; and the checkpoint's round."""
    ref = fit(workers=W, **kw)
    out = tmp_path / "run"
    fit(workers=W, out=str(out), checkpoint_every=1e-6, max_rounds=stop, **kw)
    at = json.loads((out / "checkpoint" / "manifest.json").read_text())["round"]
    return ref, fit(workers=W2, out=str(out), resume=True, **kw), at


@pytest.mark.parametrize("app, schedule, stop", [
    (lasso, "working-set", 3), (lasso, "priority", 40), (lasso, "round-robin", 40),
    (logreg, "working-set", 5), (logreg, "round-robin", 40)])
def test_glm_resumes_from_4_to_2_workers_at_the_optimum(app, schedule, stop, tmp_path):
    X, y, _ = app.make_problem(500, 1500, density=0.02, seed=3)
    fit = lambda **kw: app.fit(X, y, lambda_ratio=0.05, tol=1e-10, quiet=True,  # noqa
                               schedule=schedule, **kw)
    ref, res, at = _legs(fit, 4, 2, stop, tmp_path)
    assert res.workers == 2 and res.stop_reason == "tol" and res.rounds > at > 0
    lam = float(ref.model["lambda"])
    f = lambda c: app.objective(X, y, c, lam)  # noqa: E731
    assert abs(f(res.model["coef"]) - f(ref.model["coef"])) <= 1e-8 * f(ref.model["coef"])


def test_lda_resumes_from_3_to_2_workers_at_the_same_quality(tmp_path):
    """The topics of every document move to its new worker; the counts are made again
    from them: the run goes on from the checkpoint's log-likelihood and ends within 1% of
    the uninterrupted one."""
    X = make_corpus(1500, 400, 120, 8, seed=1)[0]
    # (seed 4: a chain whose 2- and 3-worker runs end at the same optimum; with seed 3
    # they end 0.5% apart, other seeds 3%: different random streams find other optima)
    fit = lambda **kw: lda.fit(X, n_topics=8, sweeps=40, seed=4, quiet=True,  # noqa
                               log_interval=0, **kw)
    ref, res, at = _legs(fit, 3, 2, 31, tmp_path)
    # (a run stopped by max_rounds takes its last checkpoint where it stopped)
    assert res.workers == 2 and res.stop_reason == "schedule_done" and at == 31
    assert abs(res.objective - ref.objective) <= 0.01 * abs(ref.objective)
    lls = [row["objective"] for row in res.trace]
    i = next(i for i, row in enumerate(res.trace) if row["round"] > at)
    # no jump at the resume: the first sweep after it is no worse than before it
    assert lls[i] >= lls[i - 1] - 0.002 * abs(lls[i - 1])
    # a sweep under way was begun again on 2 workers: 40 sweeps in all
    assert res.rounds == at + (40 - at // 3) * 2


def test_same_workers_is_still_bit_for_bit_and_a_fixed_app_says_why(tmp_path):
    X, y, _ = lasso.make_problem(300, 600, density=0.03, seed=1)
    fit = lambda **kw: lasso.fit(X, y, lambda_ratio=0.05, tol=1e-10, quiet=True,  # noqa
                                 schedule="priority", **kw)
    ref, res, _ = _legs(fit, 3, 3, 25, tmp_path)
    np.testing.assert_array_equal(res.model["coef"], ref.model["coef"])
    assert res.rounds == ref.rounds
    sys.path.insert(0, str(ROOT / "examples"))
    import ridge
    rng = np.random.default_rng(0)
    Xr, yr = rng.standard_normal((60, 8)), rng.standard_normal(60)
    out = str(tmp_path / "ridge")
    ridge.fit(Xr, yr, workers=3, out=out, checkpoint_every=1e-6, max_rounds=5, quiet=True)
    with pytest.raises(strads_error(), match="RidgeUpdate cannot move its state to "
                                             "another number of workers"):
        ridge.fit(Xr, yr, workers=2, out=out, resume=True, quiet=True)


def strads_error():
    from strads import DataError
    return DataError


def _svm(tmp_path):
    X, y, _ = lasso.make_problem(600, 2000, density=0.02, seed=3)
    path = str(tmp_path / "x.svm")
    dump_svmlight_file(X, y, path)
    return path


def _mpi(n, args, timeout=180):
    return subprocess.run([mpiexec(), "-n", str(n), sys.executable, "-m", *args],
                          capture_output=True, text=True, timeout=timeout, env=child_env(),
                          cwd=ROOT)


LDA_SMALL = ["--n-docs", "300", "--n-words", "200", "--topics", "5", "--sweeps", "30",
             "--seed", "4", "--top-words", "0"]
MF_SMALL = ["--n-users", "400", "--n-items", "200", "--n-ratings", "12000", "--iters", "10",
            "--tol", "0", "--early-stop", "0"]


@pytest.mark.timeout(600)
# each app once and each scheduler with both GLM datafits (one code path: the GLM
# update and aggregate) and with MF, growing and shrinking
@pytest.mark.parametrize("app, scheduler, n, n2, stop, rel", [
    ("lasso", "rank", 5, 3, 6, 1e-8), ("logreg", "replicated", 4, 3, 6, 1e-8),
    ("lda", "rank", 4, 3, 20, 0.01),
    ("mf", "rank", 3, 4, 30, 1e-9), ("mf", "replicated", 4, 3, 30, 1e-9)])
def test_every_app_under_mpiexec_resumes_on_other_ranks(app, scheduler, n, n2, stop, rel,
                                                        tmp_path):
    """Written by ``mpiexec -n N`` and resumed by ``-n N2`` (fewer: a lost node; more: a
    replacement): the GLMs at the uninterrupted optimum (rel. 1e-8), MF the same model,
    LDA within 1% of its log-likelihood."""
    data = (["--data", _svm(tmp_path)] if app == "lasso" else LDA_SMALL if app == "lda"
            else MF_SMALL if app == "mf" else ["--n-samples", "400", "--n-features", "1200"])
    args = [f"strads.apps.{app}", *data, "--quiet", "--scheduler", scheduler,
            *(["--tol", "1e-10"] if app in ("lasso", "logreg") else [])]
    # the uninterrupted run in one process: the same bits as under mpiexec -n N (whose
    # workers are its ranks but rank 0 with the rank scheduler, all of them replicated)
    workers = n - 1 if scheduler == "rank" else n
    ref = run_cli(args + ["--workers", str(workers), "--out", str(tmp_path / "ref")])
    out = str(tmp_path / "run")
    first = _mpi(n, args + ["--out", out, "--checkpoint-every", "1e-6", "--max-rounds",
                            str(stop)])
    at = json.loads((Path(out) / "checkpoint" / "manifest.json").read_text())["round"]
    before = [line for line in (Path(out) / "trace.csv").read_text().splitlines()[1:]
              if int(line.split(",")[0]) < at]
    res = _mpi(n2, args + ["--out", out, "--resume"])
    assert ref.returncode == first.returncode == res.returncode == 0, res.stderr
    a, b = json.loads(ref.stdout.splitlines()[0]), json.loads(res.stdout.splitlines()[0])
    assert b["ranks"] == n2 and b["rounds"] > stop >= at > 0
    assert abs(a["objective"] - b["objective"]) <= rel * abs(a["objective"]), (a, b)
    # went on from the checkpoint, not from the start: the first leg's trace up to the
    # checkpoint (times included) is kept, and the rounds after it never repeat
    after = (Path(out) / "trace.csv").read_text().splitlines()[1:]
    assert before and after[:len(before)] == before
    rounds = [int(line.split(",")[0]) for line in after]
    assert all(x < y for x, y in zip(rounds, rounds[1:])) and rounds[-1] == b["rounds"]


# -- the launcher --------------------------------------------------------------------------
LONG = ["strads.apps.lasso", "--n-samples", "3000", "--n-features", "20000",
        "--schedule", "round-robin", "--tol", "1e-9", "--quiet"]


def _launch(n, out, extra=(), **kw):
    cmd = [sys.executable, "-m", "strads.launch", "-n", str(n), *extra, *LONG,
           "--out", str(out), "--checkpoint-every", "0.2"]
    return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=child_env(), cwd=ROOT, **kw)


def _kill_after(out, rank, after, proc, deadline=300):
    """kill -9 MPI rank ``rank`` of the job writing ``out`` once its checkpoint has passed
    round ``after``; returns the checkpoint's round then."""
    manifest = Path(out) / "checkpoint" / "manifest.json"
    end = time.monotonic() + deadline
    while time.monotonic() < end and proc.poll() is None:
        try:
            at = json.loads(manifest.read_text())["round"]
        except (OSError, ValueError):
            at = -1
        pid = _pid_of_rank(out, rank)
        if at > after and pid is not None:
            os.kill(pid, signal.SIGKILL)
            return at
        time.sleep(0.05)
    raise AssertionError(f"the run ended or stalled before round {after}")


@pytest.fixture(scope="module")
def f_long():
    """The objective of an uninterrupted run of LONG."""
    ref = run_cli([*LONG, "--workers", "3"])
    return json.loads(ref.stdout)["objective"]


@pytest.mark.timeout(900)
@pytest.mark.parametrize("victims", [[0], [3, 1]])
def test_launch_restarts_on_the_ranks_left_and_reaches_the_optimum(victims, f_long,
                                                                   tmp_path):
    """kill -9 of rank 0, of a worker and then another: the job exits 0 with the
    uninterrupted run's optimum, one line per lost rank naming it."""
    f_ref = f_long
    out = tmp_path / "run"
    proc = _launch(4, out, ["--max-restarts", "2"])
    after = 20
    for victim in victims:
        after = _kill_after(out, victim, after, proc) + 20
    stdout, stderr = proc.communicate(timeout=600)
    assert proc.returncode == 0, stderr
    lines = [line for line in stderr.splitlines() if line.startswith("strads.launch:")]
    assert len(lines) == len(victims), stderr
    for line, victim, left in zip(lines, victims, (3, 2)):
        assert line.startswith(f"strads.launch: rank {victim} (pid "), line
        assert f"on {left} ranks" in line, line
    summary = json.loads((out / "summary.json").read_text())
    assert summary["ranks"] == 4 - len(victims) and summary["stop_reason"] == "tol"
    assert [r["ranks"] for r in summary["restarts"]] == [3, 2][:len(victims)]
    assert [r["lost_rank"] for r in summary["restarts"]] == victims
    assert abs(summary["objective"] - f_ref) <= 1e-8 * f_ref


def test_a_killed_ranks_connection_closes_before_its_other_files(tmp_path):
    """The launcher names the rank whose connection closes first: a killed rank's must
    close before its lower descriptors (the PMI socket, the output pipes) through which
    MPICH hears of the death and kills the other ranks."""
    from strads import launch

    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(str(tmp_path / launch.SOCK))
    listener.listen(4)
    code = "from strads import launch; launch.heartbeat(); print(flush=True); input()"
    for _ in range(3):
        pmi, pmi_child = socket.socketpair()  # stands in for MPICH's PMI socket
        proc = subprocess.Popen([sys.executable, "-c", code], pass_fds=[pmi_child.fileno()],
                                stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                env={**child_env(), launch.ENV: str(tmp_path),
                                     "PMI_RANK": "3"}, cwd=ROOT)
        pmi_child.close()
        conns = [listener.accept()[0] for _ in range(2)]  # the highest descriptor, fd 0
        assert [c.recv(8) for c in conns] == [b"3\n"] * 2
        assert proc.stdout.readline() == b"\n"
        watch = select.epoll()
        for s in (pmi, *conns):
            watch.register(s.fileno(), select.POLLIN | select.POLLHUP)
        proc.kill()
        proc.wait(timeout=60)
        assert [fd for fd, _ in watch.poll(10)][0] in [c.fileno() for c in conns]
        for s in (watch, pmi, *conns, proc.stdin, proc.stdout):
            s.close()


def test_launch_refuses_an_app_without_checkpoints_and_passes_its_errors_on(tmp_path):
    p = subprocess.run([sys.executable, "-m", "strads.launch", "-n", "3", *LONG],
                       capture_output=True, text=True, timeout=60, env=child_env(), cwd=ROOT)
    assert p.returncode == 2 and "--out DIR and --checkpoint-every" in p.stderr
    p = subprocess.run([sys.executable, "-m", "strads.launch", "-n", "3", "strads.apps.lasso",
                        "--data", str(tmp_path / "missing.svm"), "--out", str(tmp_path / "o"),
                        "--checkpoint-every", "1"], capture_output=True, text=True,
                       timeout=120, env=child_env(), cwd=ROOT)
    assert p.returncode == 2 and "no such file" in p.stderr  # not a lost rank: no restart
    assert "strads.launch:" not in p.stderr


def test_launch_leaves_the_lost_ranks_host_out(tmp_path):
    """With --hostfile, a restart goes on without the lost rank's host (named in the file
    as localhost, by the rank as its hostname: one host): here the only one, so none."""
    hostfile = tmp_path / "hosts"
    hostfile.write_text("localhost:4  # this machine\n")
    out = tmp_path / "run"
    proc = _launch(4, out, ["--hostfile", str(hostfile)])
    at = _kill_after(out, 2, 20, proc)
    _, stderr = proc.communicate(timeout=300)
    assert proc.returncode != 0
    assert re.search(rf"strads\.launch: rank 2 \(pid \d+ on {re.escape(socket.gethostname())}"
                     rf"\) lost at round (\d+); not restarting \(0 ranks left, fewer than "
                     r"--min-ranks 2\)", stderr), stderr
    assert int(re.search(r"lost at round (\d+)", stderr).group(1)) >= at


def test_a_finished_lda_run_goes_on_with_more_sweeps(tmp_path):
    """--sweeps may change on --resume: a run of 12 sweeps taken on to 20."""
    out = str(tmp_path / "run")
    common = ["strads.apps.lda", "--n-docs", "200", "--n-words", "300", "--quiet",
              "--out", out]
    first = run_cli([*common, "--sweeps", "12", "--checkpoint-every", "1e-6"], timeout=120)
    more = run_cli([*common, "--sweeps", "20", "--resume"], timeout=120)
    assert first.returncode == more.returncode == 0, more.stderr
    a, b = (json.loads(p.stdout.splitlines()[0]) for p in (first, more))
    assert (a["rounds"], b["rounds"]) == (12, 20) and b["stop_reason"] == "schedule_done"
    assert b["objective"] > a["objective"]  # 8 more sweeps: a higher log-likelihood


@pytest.mark.parametrize("early_stop", ["0", "2"])
def test_mf_resumes_from_3_to_2_workers_with_the_same_model(early_stop, tmp_path):
    """The factors are the old workers' rows side by side; each new worker takes its rows
    and makes its residuals again: the run ends with the uninterrupted run's model."""
    args = ["strads.apps.mf", "--n-users", "800", "--n-items", "400", "--n-ratings",
            "30000", "--iters", "12", "--tol", "0", "--quiet", "--early-stop", early_stop]

    def run(*extra):
        p = run_cli([*args, *extra])
        assert p.returncode == 0, p.stderr
        return json.loads(p.stdout.splitlines()[0])

    ref = run("--workers", "3")
    out = str(tmp_path / "run")
    run("--workers", "3", "--out", out, "--checkpoint-every", "1e-6", "--max-rounds", "150")
    res = run("--workers", "2", "--out", out, "--resume")
    assert res["workers"] == 2 and res["rounds"] == ref["rounds"]
    for k in ("objective", "test_rmse", "train_rmse"):
        assert res[k] == pytest.approx(ref[k], rel=1e-9), k


def test_sigterm_to_the_launcher_stops_the_job_at_a_round_and_bad_hostfiles(tmp_path):
    # (the launcher died at once, leaving the job running without it)
    out = tmp_path / "run"
    proc = _launch(3, out)
    manifest = out / "checkpoint" / "manifest.json"
    end = time.monotonic() + 120  # (a hang guard)
    while not manifest.exists() and proc.poll() is None and time.monotonic() < end:
        time.sleep(0.05)
    proc.send_signal(signal.SIGTERM)
    _, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 143 and "interrupted by SIGTERM at round" in stderr, stderr
    assert json.loads((out / "summary.json").read_text())["stop_reason"] == "interrupted"
    for body, why in (("localhost:abc\n", "line 1: slots 'abc' are not a count > 0"),
                      ("# none\n", "no hosts"), (None, "No such file or directory")):
        hosts = tmp_path / "hosts"
        if body is not None:
            hosts.write_text(body)
        else:
            hosts.unlink()
        p = subprocess.run([sys.executable, "-m", "strads.launch", "-n", "3", "--hostfile",
                            str(hosts), *LONG, "--out", str(out), "--checkpoint-every", "1"],
                           capture_output=True, text=True, timeout=60, env=child_env(),
                           cwd=ROOT)
        assert p.returncode == 2 and why in p.stderr and "Traceback" not in p.stderr, p.stderr


def test_launch_checks_min_ranks_and_the_app_before_mpiexec(tmp_path):
    """-n below --min-ranks, a mistyped module, a missing script or mpiexec: one usage
    line from the launcher, before mpiexec starts (it printed the app's error once per
    rank; a missing mpiexec was a traceback)."""
    (tmp_path / "hosts").write_text("localhost:1\n")
    fake = ["--mpiexec", "true", "--max-restarts", "0"]  # (a job started: exit 0)
    for argv, said in [
            (["-n", "2", "--min-ranks", "4", *fake, "strads.apps.lasso"],
             "--min-ranks 4 is more than the 2 ranks the job starts with"),
            (["-n", "3", "--min-ranks", "2", "--hostfile", str(tmp_path / "hosts"), *fake,
              "strads.apps.lasso"], "--min-ranks 2 is more than the 1 ranks"),
            (["-n", "2", *fake, "strads.apps.lasoo", "--quiet"],
             "APP strads.apps.lasoo: no module to run by that name"),
            (["-n", "2", *fake, "strads.apps"], "APP strads.apps: no module to run"),
            (["-n", "2", *fake, str(tmp_path / "ridge.py")], "ridge.py: no such file"),
            (["-n", "2", "--mpiexec", str(tmp_path / "mpx"), "--max-restarts", "0",
              "strads.apps.lasso"],
             f"--mpiexec {tmp_path / 'mpx'}: no such executable")]:
        p = subprocess.run([sys.executable, "-m", "strads.launch", *argv], text=True,
                           capture_output=True, timeout=60, env=child_env(), cwd=ROOT)
        assert p.returncode == 2 and p.stderr.count("error:") == 1, (argv, p.stderr)
        assert said in p.stderr and "usage:" in p.stderr, p.stderr
    # the default --min-ranks (2) allows -n 1 (which never restarts)
    p = subprocess.run([sys.executable, "-m", "strads.launch", "-n", "1", *fake,
                        "strads.apps.lasso"], capture_output=True, timeout=60,
                       env=child_env(), cwd=ROOT)
    assert p.returncode == 0 and p.stderr == b""


@pytest.mark.parametrize("W, W2", [(2, 1), (1, 2)])
def test_lda_resumes_onto_and_from_one_worker(W, W2, tmp_path):
    # (one worker keeps its whole word-topic table, several the slices in hand: the
    # parts' attributes differ, and were refused)
    LDA = ["strads.apps.lda", "--n-docs", "120", "--n-words", "80", "--doc-length", "30",
           "--topics", "5", "--sweeps", "6", "--quiet"]
    out = str(tmp_path / "run")
    first = run_cli([*LDA, "--workers", str(W), "--out", out, "--checkpoint-every", "1e-6",
                     "--max-rounds", "3"], timeout=120)
    assert first.returncode == 0, first.stderr
    with np.load(f"{out}/model.npz") as m:  # the documents' lengths: the same in any run
        lengths = m["doc_topic"].sum(axis=1)
    # docs/elastic.md: "a checkpoint resumes on any number of workers"
    res = run_cli([*LDA, "--workers", str(W2), "--out", out, "--resume"], timeout=120)
    assert res.returncode == 0, res.stderr
    s = json.loads(res.stdout.splitlines()[0])
    assert s["stop_reason"] == "schedule_done" and s["workers"] == W2
    # the corpus kept whole: every document's tokens counted once
    with np.load(f"{out}/model.npz") as m:
        assert np.array_equal(m["doc_topic"].sum(axis=1), lengths)
        assert m["word_topic"].sum() == lengths.sum() == s["tokens"]
