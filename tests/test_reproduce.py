"""Smoke test of ``python benchmarks/reproduce.py --tiny``: every experiment runs, every
figure is written, REPORT.md has its claims table (not a timed test)."""
import importlib.util
import json
import subprocess
import sys

import pytest

from conftest import ROOT, child_env

FIGURES = ("lasso_time.png", "lasso_updates.png", "logreg_time.png", "logreg_updates.png",
           "lda_time.png", "lda_sweeps.png", "lda_memory.png", "mf_rmse_time.png",
           "scaling.png", "staleness.png")
SCRIPT = str(ROOT / "benchmarks" / "reproduce.py")


@pytest.mark.long
def test_reproduce_tiny(tmp_path):
    pytest.importorskip("matplotlib", reason="benchmarks/reproduce.py draws with matplotlib "
                        "(pip install -e .[reproduce])")
    out = tmp_path / "rep"
    p = subprocess.run([sys.executable, SCRIPT, "--tiny", "--out", str(out)],
                       capture_output=True, text=True, timeout=600, env=child_env(), cwd=ROOT)
    assert p.returncode == 0, p.stderr[-3000:]
    for exp in ("lasso", "logreg", "lda", "mf", "scaling", "staleness"):
        assert f"=== experiment {exp} done" in p.stderr  # progress on the terminal
    for f in FIGURES:
        assert (out / f).stat().st_size > 1000, f
    report = (out / "REPORT.md").read_text()
    assert "| claim | paper's figure | this run measured | same direction | ratio |" in report
    table = [ln for ln in report.splitlines() if ln.startswith("| ")]
    assert len(table) >= 1 + 15, table  # the header and every experiment's rows
    assert all(ln.count(" | ") == 4 for ln in table), table  # five columns each
    for what in ("Shotgun", "logreg: ", "sparse logistic regression", "memory per machine",
                 "CCD++", "linear scaling", "staleness"):
        assert any(what in ln for ln in table[2:]), what
    assert "## Experiments that failed" not in report
    for f in FIGURES:
        assert f"![{f}]({f})" in report
    assert "JIT" in report and "cores" in report
    for exp, run in (("lasso", "priority-nodep"), ("logreg", "random"), ("lda", "data"),
                     ("lda", "mem-model-w2"), ("mf", "als"),
                     ("scaling", "w2"), ("staleness", "s1")):
        d = out / "runs" / exp / run
        assert (d / "trace.csv").stat().st_size > 0
        s = json.loads((d / "summary.json").read_text())
        assert s["rounds"] > 0
    if importlib.util.find_spec("libmf") is None:
        assert "LIBMF is not installed" in report
    else:
        assert (out / "runs" / "mf" / "libmf" / "trace.csv").exists()
    assert json.loads((out / "runs" / "scaling" / "w2" / "summary.json").read_text())[
        "ranks"] == 3  # mpiexec -n W+1


def test_reproduce_args(tmp_path):
    p = subprocess.run([sys.executable, SCRIPT, "--out", str(tmp_path), "--only",
                        "lasso,nope"], capture_output=True, text=True,
                       timeout=120, env=child_env(), cwd=ROOT)
    assert p.returncode == 2 and "unknown nope" in p.stderr
