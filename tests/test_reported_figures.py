"""The figures a run reports tell the truth: each recomputed independently (NumPy) from
the data and model.npz, or checked against what must hold between them (found wrong by
a hunt: each test failed on the code before its fix)."""
import json

import numpy as np
import pytest

from conftest import run_cli


def _lasso_data(tmp_path, n=40, p=15, seed=0):
    """A small sparse regression problem as a LIBSVM file: (path, X dense, y)."""
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, p))
    X[X < 0.3] = 0
    y = X @ np.r_[rng.standard_normal(4), np.zeros(p - 4)] + 0.1 * rng.standard_normal(n) + 0.5
    path = tmp_path / "a.svm"
    with open(path, "w") as f:
        for i in range(n):
            f.write(repr(float(y[i])) + " " + " ".join(
                f"{j + 1}:{float(X[i, j])!r}" for j in range(p) if X[i, j] != 0) + "\n")
    return path, X, y


def _run(tmp_path, app, *args, name="out"):
    out = tmp_path / name
    p = run_cli([f"strads.apps.{app}", *map(str, args), "--quiet", "--out", str(out)])
    assert p.returncode == 0, p.stderr
    return out, json.loads((out / "summary.json").read_text()), np.load(out / "model.npz")


def test_lasso_max_rounds_summary_objective_is_the_saved_models(tmp_path):
    data, X, y = _lasso_data(tmp_path)
    out, s, m = _run(tmp_path, "lasso", "--data", data, "--lambda", 0.05, "--tol", 1e-10,
                     "--max-rounds", 2)
    assert s["stop_reason"] == "max_rounds"
    b = m["coef"]
    f = np.sum((y - X @ b) ** 2) / (2 * len(y)) + 0.05 * np.abs(b).sum()
    last = (out / "trace.csv").read_text().splitlines()[-1].split(",")
    assert float(last[3]) == s["objective"]
    assert s["objective"] == pytest.approx(f, rel=1e-12)  # was 1.5057 (b = 0's) for 0.2625


def test_lda_resumed_tokens_per_s_fits_its_wall(tmp_path):
    common = ["strads.apps.lda", "--n-docs", 30, "--n-words", 40, "--doc-length", 20,
              "--topics", 3, "--sweeps", 10, "--workers", 2, "--quiet", "--out", tmp_path]
    first = run_cli([*map(str, common), "--max-rounds", "5", "--checkpoint-every", "1000"])
    assert first.returncode == 0, first.stderr
    assert json.loads((tmp_path / "summary.json").read_text())["stop_reason"] == "max_rounds"
    second = run_cli([*map(str, common), "--resume"])
    assert second.returncode == 0, second.stderr
    s = json.loads((tmp_path / "summary.json").read_text())
    assert s["stop_reason"] == "schedule_done" and s["updates"] == 10 * s["tokens"]
    # the sampler's window (first round's start to last round's result) lies inside
    # the run's wall time, which counts the whole run before and after the resume
    assert s["updates"] / s["tokens_per_s"] <= s["wall_s"] * (1 + 1e-6)


def test_traffic_balances_with_two_scheduler_ranks(tmp_path):
    out = tmp_path / "out"
    p = run_cli(["strads.apps.lasso", "--n-samples", "40", "--n-features", "15",
                 "--schedule", "priority", "--schedulers", "2", "--quiet", "--out", str(out)],
                np=4)
    assert p.returncode == 0, p.stderr
    t = json.loads((out / "summary.json").read_text())["traffic"]
    assert [e["rank"] for e in t] == [0, 1, 2, 3]
    for a, b in (("bytes_sent", "bytes_received"), ("messages_sent", "messages_received")):
        assert sum(e[a] for e in t) == sum(e[b] for e in t)
