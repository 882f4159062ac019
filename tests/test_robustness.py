"""Checkpoint and resume, interrupts, all-or-nothing outputs, --out checks, divergence,
stall warnings: in one process, and for real under mpiexec (launched by the tests)."""
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

import strads
from strads import checkpoint as ckpt

from conftest import ROOT, child_env, mpiexec, run_cli

sys.path.insert(0, str(ROOT / "examples"))
import ridge  # noqa: E402

# apps on small built-in problems: (module args, flags of a run of a few seconds at most)
APPS = {
    "lasso": ["strads.apps.lasso", "--schedule", "priority", "--tol", "0",
              "--max-rounds", "100"],
    "logreg": ["strads.apps.logreg", "--schedule", "priority", "--tol", "0",
               "--max-rounds", "100"],
    # one run (early stopping's two runs and their resume: tests/test_mf.py)
    "mf": ["strads.apps.mf", "--n-users", "400", "--n-items", "200", "--n-ratings", "8000",
           "--iters", "6", "--tol", "0", "--early-stop", "0"],
    "lda": ["strads.apps.lda", "--n-docs", "200", "--n-words", "300", "--doc-length", "40",
            "--sweeps", "12", "--tol", "0"],
    "ridge": [str(ROOT / "examples" / "ridge.py"), "--max-rounds", "100", "--tol", "0"],
}


def cli(args, np_=None, timeout=180, **kw):
    """``python -m module ...`` or ``python script.py ...``."""
    if args[0].endswith(".py"):
        cmd = [sys.executable, *args]
        if np_:
            cmd = [mpiexec(), "-n", str(np_), *cmd]
        return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout,
                              env=child_env(), cwd=ROOT, **kw)
    return run_cli(args, np=np_, timeout=timeout, **kw)


def model(out):
    with np.load(Path(out) / "model.npz") as z:
        return {k: z[k] for k in z.files}


def assert_same_model(a, b):
    assert a.keys() == b.keys()
    for k in a:
        np.testing.assert_array_equal(a[k], b[k], err_msg=k)


def stop_rounds(args, rounds=9):
    """The args with a stopping rule after ``rounds`` rounds: the first leg of a resume."""
    args = list(args)
    if "--max-rounds" in args:
        i = args.index("--max-rounds")
        return args[:i] + args[i + 2:] + ["--max-rounds", str(rounds)]
    return args + ["--max-rounds", str(rounds)]


@pytest.mark.parametrize("app", sorted(APPS))
def test_resume_gives_the_uninterrupted_model_bit_for_bit(app, tmp_path):
    base = APPS[app] + ["--quiet", "--workers", "2"]
    full, part = tmp_path / "full", tmp_path / "part"
    p = cli(base + ["--out", str(full)])
    assert p.returncode == 0, p.stderr
    p = cli(stop_rounds(base) + ["--out", str(part), "--checkpoint-every", "0.001"])
    assert p.returncode == 0, p.stderr
    first = json.loads((part / "summary.json").read_text())
    manifest = json.loads((part / "checkpoint" / "manifest.json").read_text())
    assert 0 < manifest["round"] <= first["rounds"]  # the last boundary that was due
    assert len(manifest["parts"]) == 3  # the scheduler's and one per worker
    p = cli(base + ["--out", str(part), "--resume"])  # the original stopping rule
    assert p.returncode == 0, p.stderr
    summary = json.loads((part / "summary.json").read_text())
    assert summary["rounds"] == json.loads((full / "summary.json").read_text())["rounds"]
    assert summary["rounds"] > first["rounds"]
    assert_same_model(model(part), model(full))


def test_resume_refuses_other_flags_and_bad_checkpoints(tmp_path):
    out = tmp_path / "o"
    base = APPS["lasso"] + ["--quiet", "--out", str(out)]
    p = cli(["strads.apps.lasso", "--quiet", "--out", str(out), "--resume"])
    assert p.returncode == 2 and "no checkpoint to resume from" in p.stderr
    assert p.stderr.count("\n") == 1 and "Traceback" not in p.stderr
    assert cli(base + ["--checkpoint-every", "0.001"]).returncode == 0
    # stopping rules and output settings may change; the model's flags may not
    p = cli(base + ["--resume", "--seed", "3", "--rho", "0.2", "--staleness", "1"])
    assert p.returncode == 2 and "Traceback" not in p.stderr
    for what in ("--seed 3 (was 0)", "--rho 0.2 (was default)", "staleness 1 (was 0)"):
        assert what in p.stderr
    p = cli(base + ["--resume", "--max-rounds", "200", "--log-interval", "0"])
    assert p.returncode == 0, p.stderr
    # damaged: a part cut short, then one byte changed inside a part
    folder = out / "checkpoint"
    part = next(f for f in sorted(folder.iterdir()) if f.name.endswith("worker0.npz"))
    data = part.read_bytes()
    part.write_bytes(data[:-100])
    p = cli(base + ["--resume"])
    assert p.returncode == 2 and "damaged" in p.stderr and "Traceback" not in p.stderr
    flipped = bytearray(data)
    with np.load(__import__("io").BytesIO(data)) as zz:
        r = zz["update:r"]
    at = bytes(flipped).find(r.tobytes()[:64])  # inside the residual's stored bytes
    assert at > 0
    flipped[at + 3] ^= 0xFF
    part.write_bytes(bytes(flipped))
    p = cli(base + ["--resume"])
    assert p.returncode == 2 and "damaged" in p.stderr and "Traceback" not in p.stderr
    (folder / "manifest.json").write_text("{not json")
    p = cli(base + ["--resume"])
    assert p.returncode == 2 and "damaged checkpoint manifest" in p.stderr


def test_resume_refuses_changed_data(tmp_path):
    f = tmp_path / "d.svm"
    rng = np.random.default_rng(0)
    lines = [f"{rng.normal():.6f} " + " ".join(f"{j}:{rng.normal():.5f}" for j in
                                               np.sort(rng.choice(50, 5, replace=False)) + 1)
             for _ in range(80)]
    f.write_text("\n".join(lines) + "\n")
    out = tmp_path / "o"
    args = ["strads.apps.lasso", "--data", str(f), "--quiet", "--out", str(out)]
    assert cli(args + ["--checkpoint-every", "0.001"]).returncode == 0
    lines[3] = "1.5 2:0.5 7:1.25"
    f.write_text("\n".join(lines) + "\n")
    p = cli(args + ["--resume"])
    assert p.returncode == 2 and "data differs from the checkpointed run" in p.stderr


def test_checkpoint_refuses_state_it_cannot_keep_before_any_work(tmp_path):
    class Odd(strads.Update):
        def __init__(self, shard):
            self.thing = object()

        def update(self, task):
            return 0

    class A(strads.Aggregate):
        def aggregate(self, round, task, partials):
            self.updates += 1

    with pytest.raises(strads.DataError, match=r"cannot checkpoint Odd.thing of type object"):
        strads.run(lambda ctx: (ridge.Cyclic(4, 2), A(), [{}] * ctx.n_workers), Odd, max_rounds=5,
                   quiet=True, out=str(tmp_path / "o"), checkpoint_every=1)
    assert not (tmp_path / "o").exists()


def test_state_round_trip_keeps_types_and_bits():
    class P(strads.Schedule):
        checkpoint_skip = ("data",)

    p = P()
    rng = np.random.default_rng(5)
    rng.random(3)
    p.__dict__.update(a=np.arange(3.0), f=0.1 + 0.2, i=2**70, s="x", n=None, b=True,
                      g=np.float32(1.5), t=(np.ones(2), [1, {"k": np.zeros(1)}]), rng=rng,
                      d=__import__("collections").deque([1.0, 2.0], maxlen=4),
                      data=np.ones(10), frozen=np.ones(3), f2=float("inf"))
    p.frozen.flags.writeable = False
    meta, arrays = ckpt.encode(p.state(), "P")
    assert "data" not in meta and "frozen" not in meta
    q = P()
    q.load_state(ckpt.restore({"P": (json.loads(json.dumps(meta)), arrays)}, "P", q, "here"))
    assert q.f == 0.1 + 0.2 and q.i == 2**70 and q.s == "x" and q.n is None and q.b is True
    assert q.f2 == float("inf") and type(q.g) is np.float32 and q.g == 1.5
    assert isinstance(q.t, tuple) and isinstance(q.t[1], list) and q.t[1][1]["k"][0] == 0
    assert q.d.maxlen == 4 and list(q.d) == [1.0, 2.0]
    assert q.rng.random() == rng.random()  # the generator continues where it was


def _pid_of_rank(out, rank):
    """The pid of the process of MPI rank ``rank`` (MPICH's or Open MPI's) whose command
    line names ``out``."""
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            cmd = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
            env = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
        except OSError:
            continue
        if str(out).encode() in cmd and b"python" in cmd[0] and any(
                f"{v}={rank}".encode() in env for v in ("PMI_RANK", "OMPI_COMM_WORLD_RANK")):
            return int(pid)
    return None


ROUNDS = 1000  # the kill comes after round 50: 950 rounds to spare
KILLED = ["strads.apps.lasso", "--schedule", "priority", "--tol", "0", "--max-rounds",
          str(ROUNDS), "--quiet", "--log-interval", "0"]


@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory):
    """The model of the KILLED run uninterrupted, in one process with 2 workers (one
    reference for every victim)."""
    ref = tmp_path_factory.mktemp("ref")
    assert cli(KILLED + ["--workers", "2", "--out", str(ref)]).returncode == 0
    return model(ref)


@pytest.mark.long
@pytest.mark.parametrize("victim", [2, 0])
def test_kill_minus_9_of_a_rank_then_resume_under_mpiexec(victim, uninterrupted, tmp_path):
    """A real mpiexec run loses a rank to kill -9 after some checkpoints; resumed under
    mpiexec it ends with the model of an uninterrupted run (in one process, 2 workers)."""
    out = tmp_path / "run"
    cmd = [mpiexec(), "-n", "3", sys.executable, "-m", *KILLED, "--out", str(out),
           "--checkpoint-every", "0.05"]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            env=child_env(), cwd=ROOT)
    manifest = out / "checkpoint" / "manifest.json"
    deadline = time.monotonic() + 300  # a hang guard
    while time.monotonic() < deadline and proc.poll() is None:
        if manifest.exists() and json.loads(manifest.read_text())["round"] > 50:
            break
        time.sleep(0.02)
    pid = _pid_of_rank(out, victim)
    assert pid is not None and proc.poll() is None, "the run ended before the kill"
    os.kill(pid, signal.SIGKILL)
    proc.communicate(timeout=300)
    assert proc.returncode != 0
    assert not (out / "summary.json").exists()  # no outputs of a run that did not end
    at = json.loads(manifest.read_text())["round"]
    assert 0 < at < ROUNDS
    p = subprocess.run(cmd[:-2] + ["--resume"], capture_output=True, text=True,
                       timeout=300, env=child_env(), cwd=ROOT)
    assert p.returncode == 0, p.stderr
    assert json.loads((out / "summary.json").read_text())["rounds"] == ROUNDS
    assert_same_model(model(out), uninterrupted)
    # the trace goes on from the checkpoint: rounds increase, none repeated
    rounds = np.loadtxt(out / "trace.csv", delimiter=",", skiprows=1, usecols=0)
    assert (np.diff(rounds) > 0).all() and rounds[-1] == ROUNDS


def _interrupt(cmd, sig, out, after_round=20, rank=None):
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=child_env(), cwd=ROOT)
    manifest = out / "checkpoint" / "manifest.json"
    deadline = time.monotonic() + 300  # a hang guard
    while time.monotonic() < deadline and proc.poll() is None:
        if manifest.exists() and json.loads(manifest.read_text())["round"] >= after_round:
            break
        time.sleep(0.02)
    assert proc.poll() is None, "the run ended before the signal"
    if rank is None:
        proc.send_signal(sig)
    else:  # one rank alone (a batch system's signal to one node, say)
        os.kill(_pid_of_rank(out, rank), sig)
    stdout, stderr = proc.communicate(timeout=300)  # --max-rounds 10^8: a hang without it
    return proc.returncode, stdout, stderr


@pytest.mark.parametrize("np_, sig, code, rank, rep", [(None, signal.SIGINT, 130, None, 0),
                                                       (None, signal.SIGTERM, 143, None, 0),
                                                       (3, signal.SIGINT, 130, None, 0),
                                                       (3, signal.SIGINT, 130, None, 1),
                                                       (3, signal.SIGTERM, 143, None, 0),
                                                       (3, signal.SIGTERM, 143, 2, 0)])
def test_a_signal_stops_at_a_round_with_outputs_and_a_checkpoint(np_, sig, code, rank, rep,
                                                                 tmp_path):
    out = tmp_path / "o"
    cmd = [sys.executable, "-m", "strads.apps.lasso", "--schedule", "priority", "--tol", "0",
           "--max-rounds", "100000000", "--quiet", "--out", str(out),
           "--checkpoint-every", "0.05"] + ["--scheduler", "replicated"] * rep
    if np_:
        cmd = [mpiexec(), "-n", str(np_), *cmd]
    rc, stdout, stderr = _interrupt(cmd, sig, out, rank=rank)
    assert rc == code, stderr
    assert "Traceback" not in stderr
    summary = json.loads((out / "summary.json").read_text())
    assert summary["stop_reason"] == "interrupted"
    assert json.loads(stdout.strip().splitlines()[-1]) == summary  # mpiexec may say more
    name = signal.Signals(sig).name
    assert f"[lasso] interrupted by {name} at round {summary['rounds']}" in stderr
    assert stderr.count("interrupted by") == 1  # (leaderless: every rank stops; one line)
    manifest = json.loads((out / "checkpoint" / "manifest.json").read_text())
    assert manifest["round"] == summary["rounds"]  # the last checkpoint: where it stopped
    assert model(out)["coef"].shape == (10000,)


def test_outputs_are_all_or_nothing_and_follow_no_symlink(tmp_path, monkeypatch):
    rng = np.random.default_rng(0)
    X, y = rng.standard_normal((60, 6)), rng.standard_normal(60)
    out = tmp_path / "o"
    first = ridge.fit(X, y, max_rounds=5, quiet=True, out=str(out))
    before = {f: (out / f).read_bytes() for f in ("summary.json", "trace.csv", "model.npz")}
    (out / "mine.txt").write_text("keep me")
    victim = tmp_path / "victim.txt"
    victim.write_text("precious")

    # a write that fails half-way leaves the previous results, complete
    def broken_savez(f, **arrays):
        f.write(b"PK partial")
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(np, "savez", broken_savez)
    with pytest.raises(OSError, match="No space"):
        ridge.fit(X, y, max_rounds=9, quiet=True, out=str(out))
    monkeypatch.undo()
    for f, data in before.items():
        assert (out / f).read_bytes() == data
    assert sorted(os.listdir(tmp_path)) == ["o", "victim.txt"]  # no temporary left behind

    # symlinks in OUT are replaced, never written through
    (out / "model.npz").unlink()
    (out / "model.npz").symlink_to(victim)
    res = ridge.fit(X, y, max_rounds=9, quiet=True, out=str(out))
    assert victim.read_text() == "precious"
    assert not (out / "model.npz").is_symlink()
    np.testing.assert_array_equal(model(out)["coef"], res.model["coef"])
    assert (out / "mine.txt").read_text() == "keep me"  # the user's files stay
    assert json.loads((out / "summary.json").read_text())["rounds"] == 9 != first.rounds
    assert oct((out).stat().st_mode & 0o777) != "0o700"  # made as os.makedirs would


@pytest.mark.parametrize("make, why", [
    (lambda d: (d / "f").write_text("x") and d / "f", "exists and is not a folder"),
    (lambda d: (d / "f").write_text("x") and d / "f" / "sub", "is a file, not a folder"),
    (lambda d: Path("/proc/strads-out"), "cannot write in /proc"),
    (lambda d: "", "not a folder name"),
])
def test_bad_out_is_refused_at_once(make, why, tmp_path):
    out = make(tmp_path)
    # refused before the data is read: reading it would fail first (no such file)
    p = cli(["strads.apps.lasso", "--data", str(tmp_path / "missing.svm"), "--out", str(out)])
    assert p.returncode == 2 and why in p.stderr, p.stderr
    assert p.stderr.count("\n") == 1 and "Traceback" not in p.stderr


def test_checkpoint_and_resume_need_out():
    p = cli(["strads.apps.lasso", "--checkpoint-every", "5"])
    assert p.returncode == 2 and "pass --out DIR" in p.stderr
    for bad in (["--max-rounds", "0"], ["--lambda", "inf"], ["--tol", "nan"],
                ["--checkpoint-every", "-1"], ["--time-limit", "inf"]):
        p = cli(["strads.apps.lasso", *bad])
        assert p.returncode == 2 and "Traceback" not in p.stderr, bad


class _Grow(strads.Aggregate):
    """An objective that runs away (x2 a round from round 10), or turns NaN."""

    def __init__(self, nan=False):
        self.f, self.nan = 1.0, nan

    def aggregate(self, round, task, partials):
        self.updates += 1
        if round >= 10:
            self.f = float("nan") if self.nan else self.f * 2

    def objective(self):
        return self.f


class _Nothing(strads.Update):
    def update(self, task):
        return 0


class _Always(strads.Schedule):
    def schedule(self, round):
        return {}


@pytest.mark.parametrize("nan, at", [(False, 30), (True, 11)])
def test_a_diverging_objective_stops_the_run(nan, at, capsys):
    res = strads.run(lambda ctx: (_Always(), _Grow(nan), [{}] * ctx.n_workers), _Nothing,
                     max_rounds=10**6, quiet=True)
    assert res.stop_reason == "diverged" and res.rounds == at
    assert "[custom] stopped: the objective diverged" in capsys.readouterr().err
    # a maximised objective (a log-likelihood) diverges downwards, not upwards
    agg = _Grow()
    agg.maximize = True
    res = strads.run(lambda ctx: (_Always(), agg, [{}] * ctx.n_workers), _Nothing, max_rounds=200,
                     quiet=True)
    assert res.stop_reason == "max_rounds"


class _FromZero(strads.Aggregate):
    """An objective that is exactly 0 for 3 rounds (nothing done yet), then rises to 1
    and stays (an ordinary rise), or then runs away (x10 a round from round 5)."""

    def __init__(self, run_away):
        self.f, self.run_away = 0.0, run_away

    def aggregate(self, round, task, partials):
        self.updates += 1
        self.f = 0.0 if round < 3 else 10.0 ** (round - 4) if self.run_away and round >= 5 \
            else 1.0

    def objective(self):
        return self.f


@pytest.mark.parametrize("run_away, reason", [(False, "max_rounds"), (True, "diverged")])
def test_an_objective_from_zero_diverges_only_by_running_away(run_away, reason):
    # (the scale was the first value, 0: the rise to 1 stopped the run as diverged)
    res = strads.run(lambda ctx: (_Always(), _FromZero(run_away), [{}] * ctx.n_workers),
                     _Nothing, max_rounds=20, quiet=True)
    assert res.stop_reason == reason


def test_diverging_cli_exits_3(tmp_path):
    # (the GLMs' Jacobi rounds are judged now: none of the apps diverges; a custom app on
    # the standard command line whose objective runs away, x10 a round)
    script = tmp_path / "away.py"
    script.write_text(
        "import strads\n"
        "from strads import cli\n"
        "class S(strads.Schedule):\n"
        "    def schedule(self, r): return {}\n"
        "class U(strads.Update):\n"
        "    def update(self, t): return 0\n"
        "class A(strads.Aggregate):\n"
        "    f = 1.0\n"
        "    def aggregate(self, r, t, p): self.updates += 1; self.f *= 10\n"
        "    def objective(self): return self.f\n"
        "def fit(args, **kw):\n"
        "    return strads.run(lambda c: (S(), A(), [{}] * c.n_workers), U, app='away', **kw)\n"
        "cli.run_app(__file__, 'an objective that runs away', (), fit)\n")
    p = subprocess.run([sys.executable, str(script), "--max-rounds", "5000", "--quiet",
                        "--out", str(tmp_path / "o")], capture_output=True, text=True,
                       timeout=180, env=child_env(), cwd=ROOT)
    assert p.returncode == 3, p.stderr
    assert "diverged" in p.stderr
    assert json.loads((tmp_path / "o" / "summary.json").read_text())["stop_reason"] == \
        "diverged"


def test_stall_warning_names_the_worker(tmp_path):
    script = tmp_path / "slow.py"
    script.write_text(
        "import time, strads\n"
        "class S(strads.Schedule):\n"
        "    def schedule(self, r): return {} if r < 1 else None\n"
        "class U(strads.Update):\n"
        "    def update(self, t):\n"
        "        if self.shard['w'] == 1: time.sleep(4)\n"
        "        return 0\n"
        "class A(strads.Aggregate):\n"
        "    def aggregate(self, r, t, p): pass\n"
        "strads.run(lambda c: (S(), A(), [{'w': w} for w in range(c.n_workers)]), U, quiet=True,\n"
        "           stall_warn=1.5)\n")  # (worker 0 would have to stall 1.5 s too)
    p = subprocess.run([mpiexec(), "-n", "3", sys.executable, str(script)],
                       capture_output=True, text=True, timeout=60, env=child_env())
    assert p.returncode == 0, p.stderr
    assert "s for worker 1 (rank 2) to answer round 0" in p.stderr
    assert "worker 0" not in p.stderr


@pytest.mark.timeout(120)  # (the line never coming fails the test by this timeout)
@pytest.mark.parametrize("call", ["fit", "run"])
def test_a_rank_that_skips_the_call_is_named_while_the_others_wait(call, tmp_path):
    # `if rank == 0: est.fit(...)`: rank 0 waits for rank 1 for ever; it says so
    script = tmp_path / "skip.py"
    script.write_text(
        "import numpy as np, strads\n"
        "from mpi4py import MPI\n"
        "import strads.estimators._base as base\n"
        "base.STALL_WARN = 0.5\n"
        "if MPI.COMM_WORLD.Get_rank() == 0:\n"
        "    X, y = np.eye(4), np.arange(4.0)\n"
        + ("    strads.Lasso(alpha=0.1).fit(X, y)\n" if call == "fit" else
           "    strads.run(lambda c: (None, None, None), strads.Update, stall_warn=0.5)\n"))
    proc = subprocess.Popen([mpiexec(), "-n", "2", sys.executable, str(script)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                            env=child_env(), start_new_session=True)
    try:
        lines = []
        while not lines or "waiting" not in lines[-1]:
            lines.append(proc.stderr.readline())
            assert lines[-1], "the job ended: " + "".join(lines)
        what = "Lasso.fit" if call == "fit" else "the run"
        assert f"rank 0 waiting 0.5 s for every rank to start {what} (under mpiexec each " \
            "rank makes the same call" in lines[-1]
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


def test_no_doorbell_is_left_behind_by_a_rank_killed_during_start_up(tmp_path):
    tmp = tmp_path / "tmp"  # the runs' own temporary folder (other tests use /tmp at once)
    tmp.mkdir()
    out = tmp_path / "o"
    for delay in (0.3, 0.8, 1.5):
        cmd = [mpiexec(), "-n", "3", sys.executable, "-m", "strads.apps.lasso", "--quiet",
               "--out", str(out)]
        proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                env={**child_env(), "TMPDIR": str(tmp)}, cwd=ROOT)
        deadline = time.monotonic() + delay
        pid = None
        while time.monotonic() < deadline or pid is None:
            pid = pid or _pid_of_rank(out, 1)
            if proc.poll() is not None or time.monotonic() > deadline + 20:
                break
            time.sleep(0.01)
        if pid is not None:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        proc.wait(timeout=60)
    assert not list(tmp.iterdir())


def test_mf_refuses_a_staleness_it_cannot_use():
    # refused, not 10^9 empty rounds (those would outlast cli's timeout)
    p = cli(["strads.apps.mf", "--staleness", "1000000000", "--quiet"])
    assert p.returncode == 2 and "Traceback" not in p.stderr
    assert "staleness 1000000000: at most 15 is useful with rank 8 and block 1" in p.stderr


@pytest.mark.parametrize("app", ["mf", "lda", "ridge"])
def test_resume_under_mpiexec_gives_the_uninterrupted_model(app, tmp_path):
    """First leg and resume under mpiexec -n 3; the model is the uninterrupted one (in one
    process with 2 workers: the same bits as under mpiexec)."""
    base = APPS[app] + ["--quiet"]
    full, part = tmp_path / "full", tmp_path / "part"
    assert cli(base + ["--workers", "2", "--out", str(full)]).returncode == 0
    p = cli(stop_rounds(base) + ["--out", str(part), "--checkpoint-every", "0.001"], np_=3)
    assert p.returncode == 0, p.stderr
    p = cli(base + ["--out", str(part), "--resume"], np_=3)
    assert p.returncode == 0, p.stderr
    assert json.loads((part / "summary.json").read_text())["ranks"] == 3
    assert_same_model(model(part), model(full))


@pytest.mark.parametrize("workers", [1, 2])
def test_a_second_signal_aborts_at_once(workers, tmp_path):
    """A kernel that does not return for an hour: the first Ctrl-C waits for the round's end,
    the second ends the run now, with one line and exit 130."""
    script = tmp_path / "slow.py"
    script.write_text(
        "import time, strads\n"
        "class S(strads.Schedule):\n"
        "    def schedule(self, r): return {}\n"
        "class U(strads.Update):\n"
        "    def update(self, t):\n"
        "        print('in the round', flush=True)\n"
        "        time.sleep(3600)\n"
        "        return 0\n"
        "class A(strads.Aggregate):\n"
        "    def aggregate(self, r, t, p): pass\n"
        "import strads.cli\n"
        "strads.cli.main('slow', lambda a: strads.run(\n"
        f"    lambda c: (S(), A(), [{{}}] * c.n_workers), U, quiet=True, workers={workers}), None)\n")
    proc = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=child_env())
    try:
        # (whatever the load; two workers' lines may interleave)
        assert "in the round" in proc.stdout.readline()
        proc.send_signal(signal.SIGINT)
        time.sleep(0.5)
        assert proc.poll() is None  # the first one waits for the round to end
        # the round itself would take an hour; a second signal sent before Python ran the
        # first one's handler is one with it (signals coalesce): send until it is seen
        for _ in range(600):
            proc.send_signal(signal.SIGINT)
            try:
                _, err = proc.communicate(timeout=0.5)
                break
            except subprocess.TimeoutExpired:
                pass
    finally:
        proc.kill()
    assert proc.returncode == 130
    assert "interrupted again: aborted" in err and "Traceback" not in err


def test_workers_write_their_parts_while_the_run_goes_on(tmp_path, monkeypatch):
    """A checkpoint's worker parts are written in the background: rounds go on while a
    slow disk takes them, the manifest follows once every part is there, and a part that
    cannot be written ends the run with its error."""
    from strads import checkpoint as ckpt

    rng = np.random.default_rng(0)
    X, y = rng.standard_normal((200, 8)), rng.standard_normal(200)
    seen, written = {"rounds": 0}, []
    part, manifest = ckpt.write_part, ckpt.write_manifest

    class Counting(ridge.RidgeAggregate):
        def aggregate(self, round, task, partials):
            seen["rounds"] = round + 1
            return super().aggregate(round, task, partials)

    class Slow(ridge.RidgeUpdate):
        def update(self, task):
            time.sleep(0.002)
            return super().update(task)

    def setup(ctx):
        rows = np.array_split(np.arange(200), ctx.n_workers)
        return ridge.Cyclic(8, 2), Counting(200, 8, 0.1), [
            {"X": np.asfortranarray(X[r]), "y": y[r]} for r in rows]

    def slow_part(folder, name, pieces):
        if "worker" in name:
            time.sleep(0.3)
        return part(folder, name, pieces)

    def counted_manifest(folder, m):
        written.append((m["round"], seen["rounds"]))
        return manifest(folder, m)

    monkeypatch.setattr(ckpt, "write_part", slow_part)
    monkeypatch.setattr(ckpt, "write_manifest", counted_manifest)
    strads.run(setup, Slow, workers=2, max_rounds=400, tol=0, quiet=True,
               out=str(tmp_path / "o"), checkpoint_every=0.05)
    assert written and all(done >= r for r, done in written)
    assert any(done > r for r, done in written)  # rounds ran while the parts were written

    def broken_part(folder, name, pieces):
        if "worker" in name:
            raise OSError(28, "No space left on device")
        return part(folder, name, pieces)
    monkeypatch.setattr(ckpt, "write_part", broken_part)
    with pytest.raises(OSError, match="No space left"):
        strads.run(setup, Slow, workers=2, max_rounds=400, tol=0, quiet=True,
                   out=str(tmp_path / "p"), checkpoint_every=0.05)


# -- resume: whose checkpoint, which input (the hunt of 2026-12-06) -------------------
def _lasso_checkpoint(out, *extra):
    small = ["--n-samples", "60", "--n-features", "40", "--quiet", "--schedule", "priority",
             "--block", "4", "--tol", "0"]
    p = run_cli(["strads.apps.lasso", *small, *extra, "--max-rounds", "5",
                 "--out", str(out), "--checkpoint-every", "1000"])
    assert p.returncode == 0, p.stderr
    assert os.path.isfile(out / "checkpoint" / "manifest.json")


def test_resume_with_another_app_says_whose_checkpoint_it_is(tmp_path):
    _lasso_checkpoint(tmp_path / "run")
    p = run_cli(["strads.apps.lda", "--quiet", "--out", str(tmp_path / "run"), "--resume"])
    assert p.returncode == 2
    assert "lasso" in p.stderr and "--alpha" not in p.stderr, p.stderr


def test_mf_resume_on_another_apps_checkpoint_names_it(tmp_path):
    _lasso_checkpoint(tmp_path / "run")
    p = run_cli(["strads.apps.mf", "--quiet", "--out", str(tmp_path / "run"), "--resume"])
    assert p.returncode == 2
    assert "lasso" in p.stderr, p.stderr


def test_resume_takes_the_same_data_file_by_another_name(tmp_path):
    from sklearn.datasets import dump_svmlight_file

    rng = np.random.default_rng(0)
    X = rng.standard_normal((40, 8))
    y = X[:, :3] @ np.ones(3) + 0.1 * rng.standard_normal(40)
    data = tmp_path / "train.svm"
    dump_svmlight_file(X, y, str(data))
    base = ["--quiet", "--schedule", "priority", "--block", "2", "--tol", "0"]
    p = run_cli(["strads.apps.lasso", "--data", str(data), *base, "--max-rounds", "3",
                 "--out", str(tmp_path / "run"), "--checkpoint-every", "1000"])
    assert p.returncode == 0, p.stderr
    rel = os.path.relpath(data, ROOT)  # (the runs' working folder is ROOT)
    p = run_cli(["strads.apps.lasso", "--data", rel, *base, "--max-rounds", "6",
                 "--out", str(tmp_path / "run"), "--resume"])
    assert p.returncode == 0, p.stderr
    assert json.loads(p.stdout.strip().splitlines()[-1])["rounds"] == 6


@pytest.mark.timeout(120)
@pytest.mark.parametrize("mode", [0o700, 0o2770])
def test_out_keeps_the_folders_mode(tmp_path, mode):
    out = tmp_path / "run"
    out.mkdir()
    (out / "notes.txt").write_text("mine")
    out.chmod(mode)
    p = run_cli(["strads.apps.lasso", "--quiet", "--max-rounds", "2", "--out", str(out)],
                timeout=60)
    assert p.returncode == 0, p.stderr
    assert (out / "summary.json").exists() and (out / "notes.txt").exists()
    assert oct(out.stat().st_mode & 0o7777) == oct(mode)


@pytest.mark.timeout(300)  # (the first fit never ends by itself: a lost signal fails here)
def test_a_signal_during_an_estimators_fit_ends_the_script(tmp_path):
    """SIGTERM stops the fit at a round's end, then takes its effect: the script ends
    (it went on to its next fit, so `timeout` could not stop a script of several)."""
    script = tmp_path / "fits.py"
    script.write_text(
        "import sys, numpy as np, strads\n"
        "rng = np.random.default_rng(0)\n"
        "X, y = rng.standard_normal((300, 200)), rng.standard_normal(300)\n"
        "est = strads.Lasso(alpha=1e-4, tol=0, max_iter=10**9)\n"
        "print('started', flush=True)\n"
        "est.fit(X, y)\n"
        "print('the next fit', flush=True)\n")
    proc = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=child_env())
    assert proc.stdout.readline() == "started\n"
    time.sleep(1.0)  # (into the fit's rounds: its handler is installed)
    proc.send_signal(signal.SIGTERM)
    out, err = proc.communicate()
    assert proc.returncode == -signal.SIGTERM and "the next fit" not in out, (out, err)
