"""What a new user meets first: `python -m strads compile` and the compile notice, the
progress line's ETA and labels, --help texts and defaults, one usage or error line
under mpiexec, a killed rank's leftovers, an LDA run taken further on resume."""
import glob
import io
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

from conftest import ROOT, child_env, mpiexec, run_cli
from strads import outputs
from strads.outputs import COMPILING

SMALL_MF = ["--n-users", "60", "--n-items", "40", "--n-ratings", "900", "--rank", "2"]
SMALL_LDA = ["--n-docs", "60", "--n-words", "50", "--doc-length", "20", "--topics", "3",
             "--top-words", "0"]


def test_progress_shows_no_eta_until_rounds_are_timed(monkeypatch, capsys):
    monkeypatch.setattr(outputs.COMPILES, "count", 0)
    p = outputs.Progress("app", False, 100, None)
    p.show(3.0, 1, 10, 1.0)  # the first line: nothing timed yet
    outputs.COMPILES.count += 1  # a kernel compiled during round 2
    p.show(30.0, 2, 20, 1.0)
    p.show(40.0, 6, 60, 1.0)  # 4 rounds in 10 s since then: 94 more take 235 s
    lines = capsys.readouterr().err.splitlines()
    assert len(lines) == 3
    assert "eta" not in lines[0] and "eta" not in lines[1]
    assert lines[2].endswith("eta<=235s")


def test_a_compilation_is_announced_once(capsys):
    import numba

    notice = outputs._Compiles()
    notice.watch("app", quiet=False, mpi=False)
    fn = numba.njit(lambda x: x + 1)
    fn(1)
    fn(1.0)  # a second specialisation: no second line
    assert capsys.readouterr().err == f"[app] {COMPILING}\n"
    assert notice.count == 2
    quiet = outputs._Compiles()
    quiet.watch("app", quiet=True, mpi=False)
    numba.njit(lambda x: x + 2)(1)
    assert capsys.readouterr().err == "" and quiet.count == 1


@pytest.mark.long
@pytest.mark.timeout(900)
def test_strads_compile_fills_the_cache(tmp_path):
    """After `python -m strads compile mf`, the first MF run under mpiexec compiles
    nothing; with a cache that lacks MF's kernels (another app's run filled the rest: the
    workers compile them, unheard on rank 0) the same run says so once, before its work."""
    env = {"NUMBA_CACHE_DIR": str(tmp_path / "filled")}
    p = run_cli(["strads", "compile", "mf"], env=env, timeout=600)
    assert p.returncode == 0, p.stderr
    assert re.fullmatch(r"strads compile: mf \d+\.\ds\n", p.stdout)
    run = ["strads.apps.mf"] + SMALL_MF
    p = run_cli(run, np=3, env=env, timeout=600)
    assert p.returncode == 0, p.stderr
    assert COMPILING not in p.stderr
    shutil.copytree(tmp_path / "filled", tmp_path / "part")
    mf_kernels = glob.glob(str(tmp_path / "part" / "mf_*" / "kernels.*"))
    assert mf_kernels
    for f in mf_kernels:
        os.unlink(f)
    p = run_cli(run, np=3, env={"NUMBA_CACHE_DIR": str(tmp_path / "part")}, timeout=600)
    assert p.returncode == 0, p.stderr
    assert p.stderr.count(COMPILING) == 1
    assert p.stderr.index(COMPILING) < p.stderr.index("round")
    p = run_cli(["strads", "compile", "svm"])
    assert p.returncode == 2 and "unknown app 'svm'" in p.stderr


# Every strads kernel's specialisations a process made (compiled or loaded from the cache)
SIGNATURES = """
import json, sys
from numba.core.dispatcher import Dispatcher
{run}
print(json.dumps(sorted(
    f"{{name}}.{{k}}{{s}}" for name, mod in list(sys.modules.items())
    if name.startswith("strads.") and mod is not None
    for k, v in vars(mod).items() if isinstance(v, Dispatcher)
    and v.py_func.__module__ == name for s in v.signatures)))
"""


def test_strads_compile_covers_files_and_schedules(tmp_path):
    """`python -m strads compile logreg` makes every kernel specialisation that a run on a
    user's LIBSVM file with `--schedule priority` and two workers makes (the reader's, the
    parallel load's, the priority schedule's): that run compiles nothing after it. Read
    from the specialisations each process holds, whatever the cache already has."""
    from sklearn.datasets import dump_svmlight_file

    rng = np.random.default_rng(1)
    X = rng.standard_normal((300, 50)) * (rng.random((300, 50)) < 0.2)
    dump_svmlight_file(X, np.sign(X[:, 0] + 0.1), str(tmp_path / "a.svm"), zero_based=False)
    argv = ["--data", str(tmp_path / "a.svm"), "--schedule", "priority", "--workers", "2",
            "--max-rounds", "20", "--quiet"]
    made = {}
    for what, run in (
            ("compile", "from strads.__main__ import compile_apps; compile_apps(['logreg'])"),
            ("run", f"from strads.apps.logreg.__main__ import main; main({argv!r})")):
        p = subprocess.run([sys.executable, "-c", SIGNATURES.format(run=run)],
                           capture_output=True, text=True, timeout=600, env=child_env(),
                           cwd=tmp_path)
        assert p.returncode == 0, p.stderr
        made[what] = set(json.loads(p.stdout.splitlines()[-1]))
    assert any("svmlight" in s for s in made["run"]), made["run"]
    assert made["run"] <= made["compile"], made["run"] - made["compile"]


def test_mf_labels_its_two_runs(capsys):
    from strads.apps.mf.__main__ import main

    main(SMALL_MF)
    err = capsys.readouterr().err
    assert re.search(r"^\[mf validation run\] round \d+", err, re.M)
    assert re.search(r"^\[mf refit on all ratings\] round \d+", err, re.M)
    assert not re.search(r"^\[mf\] round", err, re.M)


def _parsers():
    from strads.apps.glm.cli import build_parser
    from strads.apps.lasso import DATAFIT as LASSO
    from strads.apps.lda.__main__ import build_parser as lda
    from strads.apps.logreg import DATAFIT as LOGREG
    from strads.apps.mf.__main__ import build_parser as mf

    return {"lasso": build_parser(LASSO), "logreg": build_parser(LOGREG), "mf": mf(),
            "lda": lda()}


def test_schedulers_help_names_every_app_whose_schedule_splits():
    for app, p in _parsers().items():
        text = next(a.help for a in p._actions if a.dest == "schedulers")
        assert "lasso with --schedule priority, round-robin or random; lda" in text


def test_lda_tol_default_is_0_and_says_why():
    parsers = _parsers()
    for app in ("lasso", "logreg", "mf"):
        assert parsers[app].parse_args([]).tol == 1e-6
    lda = parsers["lda"]
    assert lda.parse_args([]).tol == 0.0
    assert "--sweeps ends the run" in next(a.help for a in lda._actions if a.dest == "tol")


def test_built_in_problem_flags_are_refused_with_data(capsys):
    """Every app's built-in problem flags (the groups titled "(no --data)"), given with
    --data, are refused in one line; not given, they are their defaults."""
    from strads.cli import BUILTIN

    for app, p in _parsers().items():
        groups = [g for g in p._action_groups if BUILTIN in (g.title or "")]
        assert len(groups) == 1, app
        what = groups[0].title.split(BUILTIN)[0]
        assert what in ("built-in problem", "built-in corpus")
        defaults = vars(p.parse_args([]))
        assert vars(p.parse_args(["--data", "f"])) == dict(defaults, data="f")
        assert "refused with --data" in p.format_help()
        for a in groups[0]._group_actions:
            flag = a.option_strings[0]
            value = [] if a.nargs == 0 else [str(a.default or 1)]  # (its default, too)
            assert getattr(p.parse_args([flag, *value]), a.dest) is not None
            with pytest.raises(SystemExit) as e:
                p.parse_args(["--data", "f", flag, *value])
            assert e.value.code == 2
            assert capsys.readouterr().err == (
                f"python -m strads.apps.{app}: error: {flag} describes the {what}; it has "
                "no effect with --data\n")


@pytest.mark.timeout(600)
def test_under_mpiexec_usage_and_errors_are_said_once(tmp_path):
    p = run_cli(["strads.apps.lasso", "--lamda", "0.1"], np=3)
    assert p.returncode == 2
    assert p.stderr.count("usage:") == 1 and p.stderr.count("unrecognized arguments") == 1
    bad = tmp_path / "bad.svm"
    bad.write_text("1 1:2\nx 3:4\n")
    p = run_cli(["strads.apps.lasso", "--data", str(bad)], np=3)
    assert p.returncode == 2
    assert p.stderr == f"python -m strads.apps.lasso: error: {bad}:2: label 'x' is not a number\n"
    for flags, said in [(["--target", str(bad)], "would replace the y that --data"),
                        (["--n-samples", "10"], "--n-samples describes the built-in")]:
        p = run_cli(["strads.apps.lasso", "--data", str(bad), *flags], np=3)
        assert p.returncode == 2 and p.stderr.count("\n") == 1 and said in p.stderr


def test_under_mpiexec_refusals_before_the_run_are_said_once(tmp_path):
    for flags in (["--rebalance", "--checkpoint-every", "1", "--out", str(tmp_path / "a")],
                  ["--schedulers", "3", "--scheduler", "replicated"],
                  ["--scheduler", "replicated", "--resume", "--out", str(tmp_path / "b")]):
        p = run_cli(["strads.apps.lasso", *flags], np=3)
        assert p.returncode == 2 and p.stderr.count("\n") == 1, (flags, p.stderr)


@pytest.mark.timeout(300)
@pytest.mark.parametrize("refusing", [0, 2])
def test_under_mpiexec_a_refusal_on_one_rank_ends_the_job_said_once(refusing):
    """One rank refuses before its run (here a test hook set on it alone; on a cluster a
    file one node lacks): the others waited for it in the transport for ever."""
    cmd = [sys.executable, "-m", "strads.apps.lasso", "--max-rounds", "5"]
    ranks = [["-n", "1", *cmd] for _ in range(3)]
    ranks[refusing][2:2] = ["env", "STRADS_TEST_HOOK=bad"]
    p = subprocess.run([mpiexec(), *ranks[0], ":", *ranks[1], ":", *ranks[2]],
                       capture_output=True, text=True, timeout=240, env=child_env())
    assert p.returncode == 2, p.stderr
    assert p.stderr == ("python -m strads.apps.lasso: error: STRADS_TEST_HOOK='bad': expected "
                        "MODULE:FUNCTION[:ARG...] naming a function that Python can "
                        "import\n")


@pytest.mark.timeout(300)
def test_under_mpiexec_an_uncaught_exception_on_one_rank_ends_the_job(tmp_path):
    """A script's own error on one rank before its fit: the others waited for it for ever."""
    script = tmp_path / "one.py"
    script.write_text(
        "import os, numpy as np, strads\n"
        "if os.environ.get('PMI_RANK') == '1':\n"
        "    raise strads.DataError('rank 1 refuses')\n"
        "X = np.random.default_rng(0).standard_normal((50, 5))\n"
        "strads.Lasso(alpha=0.1).fit(X, X[:, 0])\n")
    p = subprocess.run([mpiexec(), "-n", "3", sys.executable, str(script)],
                       capture_output=True, text=True, timeout=240, env=child_env())
    assert p.returncode != 0
    assert p.stderr.count("strads.errors.DataError: rank 1 refuses") == 1


def _rank_pid(mark, rank):
    for env in glob.glob("/proc/[0-9]*/environ"):
        try:
            with open(env, "rb") as f:
                vars_ = f.read().split(b"\0")
        except OSError:
            continue
        if mark in vars_ and f"PMI_RANK={rank}".encode() in vars_:
            return int(env.split("/")[2])
    return None


def _kill_rank_2(launcher):
    """Start a long LDA run on 3 ranks by ``launcher``, kill -9 rank 2 once rank 0 prints its
    first progress line; returns (exit status, the rest of stderr, the pid killed, the
    shared-memory files it mapped)."""
    mark = f"{os.getpid()}-{time.time()}"
    cmd = launcher + ["strads.apps.lda", "--sweeps", "1000000"]
    proc = subprocess.Popen(cmd, stderr=subprocess.PIPE, stdout=subprocess.DEVNULL,
                            env={**child_env(), "STRADS_TEST_MARK": mark})
    try:
        err = io.TextIOWrapper(proc.stderr)
        for line in err:
            if "round" in line:  # every rank has started its work
                break
        pid = _rank_pid(f"STRADS_TEST_MARK={mark}".encode(), 2)
        assert pid is not None
        with open(f"/proc/{pid}/maps") as f:  # MPICH's files this job maps
            shm = {line.split(None, 5)[5].strip().removesuffix(" (deleted)") for line in f
                   if "/dev/shm/mpich_shm_" in line}
        os.kill(pid, signal.SIGKILL)
        rest = err.read()
        return proc.wait(timeout=120), rest, pid, shm
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


@pytest.mark.skipif(not os.path.isdir("/dev/shm"), reason="no /dev/shm")
@pytest.mark.timeout(600)
def test_a_killed_rank_leaves_no_shared_memory_file():
    """mpiexec kills the other ranks at once (no strads code runs after): the files
    MPICH maps were unlinked when the job started, so nothing is left."""
    code, _, _, shm = _kill_rank_2([mpiexec(), "-n", "3", sys.executable, "-m"])
    assert code != 0
    assert shm and not any(os.path.exists(path) for path in shm)


@pytest.mark.timeout(600)
def test_the_launcher_names_a_killed_rank_and_keeps_the_exit_status():
    """strads.launch --max-restarts 0 needs no checkpoints: one line naming the rank,
    mpiexec's exit status."""
    code, err, pid, _ = _kill_rank_2([sys.executable, "-m", "strads.launch",
                                      "--max-restarts", "0", "-n", "3"])
    assert code == 9  # mpiexec's for a rank killed by signal 9
    lines = [x for x in err.splitlines() if x.startswith("strads.launch:")]
    assert len(lines) == 1
    assert re.match(rf"strads.launch: rank 2 \(pid {pid} on .+\) lost at round \d+; not "
                    r"restarting \(--max-restarts 0\)$", lines[0])


def test_a_finished_lda_run_goes_on_with_more_sweeps(tmp_path, capsys):
    from strads.apps.lda.__main__ import main

    a, b = str(tmp_path / "a"), str(tmp_path / "b")
    main(SMALL_LDA + ["--sweeps", "4", "--checkpoint-every", "1e-9", "--out", a, "--quiet"])
    res = main(SMALL_LDA + ["--sweeps", "6", "--resume", "--out", a, "--quiet"])
    assert res.extra["sweeps"] == 6
    main(SMALL_LDA + ["--sweeps", "6", "--out", b, "--quiet"])
    with np.load(os.path.join(a, "model.npz")) as x, np.load(os.path.join(b, "model.npz")) as y:
        for k in y.files:
            np.testing.assert_array_equal(x[k], y[k])
    capsys.readouterr()


def test_a_changed_kernel_module_drops_every_kernel_cache(tmp_path):
    """numba keys a kernel's cache on its own module only: a caller in another module
    would keep a changed callee's old code (an editable install after git pull)."""
    import os

    from strads import _cache

    (tmp_path / "sub" / "__pycache__").mkdir(parents=True)
    kern, other = tmp_path / "kern.py", tmp_path / "sub" / "other.py"
    kern.write_text("from numba import njit\n@njit(cache=True)\ndef f(x):\n    return x\n")
    other.write_text("x = 1\n")
    caches = [tmp_path / "sub" / "__pycache__" / "other.g-1.py311.nbi",
              tmp_path / "sub" / "__pycache__" / "other.g-1.py311.1.nbc"]

    def fill():
        for c in caches:
            c.write_bytes(b"x")
    fill()
    assert _cache.check(tmp_path) and not any(c.exists() for c in caches)  # unknown: gone
    fill()
    assert not _cache.check(tmp_path) and all(c.exists() for c in caches)
    other.write_text("x = 2\n")  # no kernel there: the caches stay
    assert not _cache.check(tmp_path) and all(c.exists() for c in caches)
    kern.write_text(kern.read_text() + "\n")
    os.utime(kern, ns=(1, 1))
    assert _cache.check(tmp_path) and not any(c.exists() for c in caches)


_KERNELS = '''
import importlib.util, sys
from numba import njit
def load(name, path):
    spec = importlib.util.spec_from_file_location(name, path)
    mod = sys.modules[name] = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod
load("strads._t_callee", sys.argv[1])
caller = load("strads._t_caller", sys.argv[2])
if sys.argv[3] == "run":
    caller.entry(1.0)  # (its caller of the callee is never compiled)
from strads import outputs
print(outputs._cache_lacks_kernels())
'''


def test_the_compile_notice_ignores_kernels_compiled_only_into_their_callers(tmp_path):
    """Rank 0 says a run compiles when a module of loaded kernels has none cached; a
    module of callees (cholesky's solve) is cached only with a caller, which a run may
    not use (logreg loads it, never calls it): it said so on every run."""
    (tmp_path / "callee.py").write_text(
        "from numba import njit\n@njit(cache=True)\ndef solve(x):\n    return x / 2\n")
    (tmp_path / "caller.py").write_text(
        "from numba import njit\nfrom strads._t_callee import solve\n"
        "@njit(cache=True)\ndef entry(x):\n    return x + 1\n"
        "@njit(cache=True)\ndef path(x):\n    return solve(x)\n")
    (tmp_path / "check.py").write_text(_KERNELS)
    env = {**child_env(), "NUMBA_CACHE_DIR": str(tmp_path / "cache")}

    def lacks(what):
        p = subprocess.run([sys.executable, str(tmp_path / "check.py"),
                            str(tmp_path / "callee.py"), str(tmp_path / "caller.py"), what],
                           capture_output=True, text=True, timeout=300, env=env)
        assert p.returncode == 0, p.stderr
        return p.stdout.split()[-1]

    assert lacks("check") == "True"  # an empty cache
    lacks("run")  # fills it, but for the callee
    assert lacks("check") == "False"


@pytest.mark.parametrize("app", ["strads.apps.lasso", "strads.apps.lda"])
def test_a_reader_gone_from_stdout_ends_the_run_quietly(app):
    """`python -m strads.apps.lasso | head -1` once head has gone: no BrokenPipeError
    traceback, SIGPIPE's exit status (as a shell tool's)."""
    r, w = os.pipe()
    os.close(r)
    try:
        p = subprocess.run([sys.executable, "-m", app, "--max-rounds", "2", "--quiet"],
                           stdout=w, stderr=subprocess.PIPE, text=True, timeout=300,
                           env=child_env(), cwd=ROOT)
    finally:
        os.close(w)
    assert p.returncode == 128 + signal.SIGPIPE, p.stderr
    assert p.stderr == "", p.stderr
