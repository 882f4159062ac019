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


def test_lda_resumed_tokens_per_s_counts_the_sampling_seconds(monkeypatch):
    """tokens_per_s: tokens over the sampler's seconds, summed over a run and its resume
    (the first process's clock reading was kept and subtracted from the resumed one's:
    every second between the runs counted). A clock injected: every reading known."""
    from strads.apps.lda import aggregate as A

    now = [100.0]
    monkeypatch.setattr(A.time, "perf_counter", lambda: now[0])
    reports = [{"n_words": 5, "n_docs": 2, "n_tokens": 10, "ll": (0.0, 0.0)}]

    def rounds(agg, times):
        for r, t in enumerate(times):
            now[0] = t
            agg.aggregate(r, {"ll": False}, [{"tokens": 10, "invariant": None}])

    first = A.LDAAggregate(5, 2, 2, 10, 0.1, 0.1, "model")
    first.begin(reports)  # (the first round starts at 100)
    rounds(first, [101.0, 102.0, 104.0])  # 4 s of sampling
    assert first.summary()["tokens_per_s"] == 30 / 4
    state = first.state()
    now[0] = 7000.0  # another process, its own clock
    resumed = A.LDAAggregate(5, 2, 2, 10, 0.1, 0.1, "model")
    resumed.begin(reports)
    resumed.load_state(state)
    rounds(resumed, [7005.0, 7006.0, 7008.0])  # after its first result: 3 s more
    assert resumed.updates == 60 and resumed.summary()["tokens_per_s"] == 60 / 7


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
