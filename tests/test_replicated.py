"""Leaderless scheduling (``--scheduler replicated``): every rank is a worker and runs the
schedule and the aggregate on agreed state; the model is that of one process with as
many workers, bit for bit; a rank that schedules differently ends the job."""
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from strads.apps import lasso, lda, mf
from strads.apps.lasso.data import make_problem

import faults
from conftest import ROOT, child_env, mpiexec, world

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "examples"))
import ridge  # noqa: E402


@pytest.mark.mpi(min_size=2)
@pytest.mark.parametrize("staleness", [0, 1])
def test_replicated_equals_one_process_with_as_many_workers(staleness):
    import peer_app

    rank, size = world()
    rng = np.random.default_rng(0)
    X = rng.standard_normal((300, 24))
    y = X @ rng.standard_normal(24) + rng.standard_normal(300)
    Xl, yl, _ = make_problem(300, 300, density=0.05, corr=0.3, n_informative=20, seed=2)
    t = mf.make_problem(1500, 400, 20000, seed=2)
    C = (rng.random((60, 80)) < 0.1) * rng.integers(1, 4, (60, 80))
    lam = 0.05 * lasso.lambda_max(Xl, yl)
    runs = {
        "ridge": lambda **kw: ridge.fit(X, y, lam=0.1, block=5, max_rounds=200, tol=0,
                                        quiet=True, staleness=staleness, **kw),
        "lasso": lambda **kw: lasso.fit(Xl, yl, lam=lam, schedule="priority", block=32,
                                        tol=1e-9, quiet=True, seed=7,
                                        staleness=staleness, **kw),
        "peers": lambda **kw: peer_app.fit(rounds=30, staleness=staleness, **kw)[0],
        "mf": lambda **kw: mf.fit(t.users, t.items, t.ratings, rank=4, iters=3, tol=0,
                                  quiet=True, staleness=staleness, test_fraction=0.1,
                                  log_interval=0, **kw),
        "lda": lambda **kw: lda.fit(C, n_topics=5, sweeps=4, staleness=staleness,
                                    quiet=True, **kw),
        "lasso-time": lambda **kw: lasso.fit(Xl, yl, lam=lam, tol=1e-9, quiet=True,
                                             time_limit=60, staleness=staleness, **kw),
    }
    for name, fit in runs.items():
        res = fit(scheduler="replicated")
        assert res is not None and res.rank == rank  # every rank holds the result
        assert res.ranks == size and res.workers == size
        assert res.extra["scheduler"] == "replicated"
        assert res.extra["digest_checks"] == res.rounds
        if rank == 0:
            one = fit(workers=size, mpi=False)
            assert one.model.keys() == res.model.keys()
            for k in one.model:
                np.testing.assert_array_equal(res.model[k], one.model[k], err_msg=(name, k))
            assert res.rounds == one.rounds and res.objective == one.objective


DIVERGE_RUNS = {  # app: (command, fault)
    "ridge": ([str(ROOT / "examples" / "ridge.py"), "--max-rounds", "400", "--tol", "0"],
              "diverge:2:17"),
    "lasso": (["-m", "strads.apps.lasso", "--schedule", "priority", "--max-rounds", "60",
               "--tol", "0"], "diverge:2:5"),
    "lda": (["-m", "strads.apps.lda", "--sweeps", "5"], "diverge:2:5"),
}


@pytest.mark.parametrize("app", sorted(DIVERGE_RUNS))
def test_a_rank_that_schedules_differently_ends_the_job(tmp_path, app):
    """The test hook faults:diverge:RANK:ROUND makes that rank schedule differently: the job
    ends (rather than hangs), non-zero, with one line naming the round and the ranks;
    the same run without the switch succeeds."""
    cmd, fault = DIVERGE_RUNS[app]
    round = fault.split(":")[2]
    full = [mpiexec(), "-n", "3", sys.executable, *cmd, "--scheduler", "replicated",
            "--quiet", "--out", str(tmp_path / "o")]
    p = subprocess.run(full, capture_output=True, text=True, timeout=300,
                       env={**child_env(), **faults.env(fault)})
    assert p.returncode != 0
    lines = [ln for ln in p.stderr.splitlines() if "scheduled different work" in ln]
    assert len(lines) == 1, p.stderr
    assert f"the schedules diverged at round {round}:" in lines[0] and "rank(s) 2 differ from rank(s) 0, 1" in lines[0]
    assert not (tmp_path / "o" / "model.npz").exists()  # no outputs from a diverged job
    p = subprocess.run(full, capture_output=True, text=True, timeout=60, env=child_env())
    assert p.returncode == 0, p.stderr
    assert (tmp_path / "o" / "model.npz").exists()


def test_replicated_runs_to_the_end_with_the_same_digest_on_every_run(tmp_path):
    import json

    digests = []
    for k in range(2):
        p = subprocess.run([mpiexec(), "-n", "3", sys.executable,
                            str(ROOT / "examples" / "ridge.py"), "--scheduler", "replicated",
                            "--quiet", "--out", str(tmp_path / f"o{k}")],
                           capture_output=True, text=True, timeout=60, env=child_env())
        assert p.returncode == 0, p.stderr
        assert p.stdout.count('"app": "ridge"') == 1  # rank 0 prints the summary
        s = json.loads((tmp_path / f"o{k}" / "summary.json").read_text())
        assert s["ranks"] == s["workers"] == 3 and s["digest_checks"] == s["rounds"]
        digests.append(s["schedule_digest"])
    assert digests[0] == digests[1]


def test_replicated_checkpoint_and_resume_bit_for_bit(tmp_path):
    """Every rank writes its worker part, rank 0 the (agreed) scheduler state; a resumed
    leaderless run ends with the uninterrupted run's model."""
    def ridge_run(out, *extra):
        p = subprocess.run([mpiexec(), "-n", "3", sys.executable,
                            str(ROOT / "examples" / "ridge.py"), "--scheduler", "replicated",
                            "--quiet", "--tol", "0", "--out", str(out), *extra],
                           capture_output=True, text=True, timeout=60, env=child_env())
        assert p.returncode == 0, p.stderr
    ridge_run(tmp_path / "full", "--max-rounds", "120")
    ridge_run(tmp_path / "part", "--max-rounds", "45", "--checkpoint-every", "0.001")
    names = sorted(f.name for f in (tmp_path / "part" / "checkpoint").iterdir())
    assert names[0] == "manifest.json" and len(names) == 5  # scheduler + 3 workers
    ridge_run(tmp_path / "part", "--max-rounds", "120", "--resume")
    full = np.load(tmp_path / "full" / "model.npz")["coef"]
    np.testing.assert_array_equal(np.load(tmp_path / "part" / "model.npz")["coef"], full)
