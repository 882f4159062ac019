"""The docs (README.md, docs/*.md, the --help texts) say what the code does: each test
here found a place where they parted (the seventh hunt, "the docs tell the truth")."""
import json
import os
import re
import subprocess
import sys

from conftest import ROOT, run_cli

TINY_MF = ["--n-users", "60", "--n-items", "40", "--n-ratings", "900", "--rank", "2",
           "--quiet"]


def _help(module):
    env = {**os.environ, "COLUMNS": "10000"}  # (no flag name broken over two lines)
    return subprocess.run([sys.executable, "-m", module, "--help"], capture_output=True,
                          text=True, cwd=ROOT, timeout=120, env=env).stdout


def _flag_help(module, start, end):
    """A flag's help in ``module --help`` (on one line): from ``start`` to ``end``."""
    text = " ".join(_help(module).split())
    at = text.index(start)
    return text[at:text.index(end, at)]


def test_resume_takes_an_apps_own_stopping_rule_and_display_flags(tmp_path):
    out = str(tmp_path / "run")
    first = run_cli(["strads.apps.mf", *TINY_MF, "--early-stop", "0", "--out", out,
                     "--checkpoint-every", "0.001", "--max-rounds", "6"], timeout=120)
    assert first.returncode == 0, first.stderr
    # (the flag was refused: "--target-test-rmse 100 (was default)"; then the checkpoint's
    # None stood: the run went on to its 120 rounds)
    again = run_cli(["strads.apps.mf", *TINY_MF, "--early-stop", "0", "--out", out,
                     "--resume", "--target-test-rmse", "100"], timeout=120)
    assert again.returncode == 0, again.stderr
    summary = json.loads(again.stdout.splitlines()[0])
    assert (summary["rounds"], summary["stop_reason"]) == (7, "tol"), summary  # met at once
    top = run_cli(["strads.apps.lda", "--n-docs", "30", "--n-words", "40", "--topics", "2",
                   "--sweeps", "2", "--quiet", "--out", str(tmp_path / "lda"),
                   "--checkpoint-every", "0.001"], timeout=120)
    assert top.returncode == 0, top.stderr
    top = run_cli(["strads.apps.lda", "--n-docs", "30", "--n-words", "40", "--topics", "2",
                   "--sweeps", "3", "--quiet", "--out", str(tmp_path / "lda"), "--resume",
                   "--top-words", "0"], timeout=120)  # (it only shows the result)
    assert top.returncode == 0, top.stderr


def test_resume_help_names_every_flag_a_resume_may_change():
    resume = _flag_help("strads.apps.lasso", "--resume continue", "--scheduler {rank")
    assert "--log-interval" in resume  # (the slice is --resume's help)
    assert "stall-warn" in resume, resume


def test_every_launcher_flag_is_documented():
    flags = set(re.findall(r"^  (--[a-z-]+)", _help("strads.launch"), re.M))
    assert "--min-ranks" in flags  # (the parse found the options)
    doc = (ROOT / "docs" / "elastic.md").read_text()
    missing = sorted(f for f in flags if f"{f}" not in doc)
    assert not missing, missing


def test_result_versions_is_what_extending_md_says():
    import numpy as np

    sys.path.insert(0, str(ROOT / "examples"))
    import ridge

    rng = np.random.default_rng(0)
    X, y = rng.standard_normal((60, 20)), rng.standard_normal(60)
    res = ridge.fit(X, y, workers=3, staleness=1, max_rounds=6, tol=0, quiet=True)
    doc = " ".join((ROOT / "docs" / "extending.md").read_text().split())
    v = np.asarray(res.versions)
    assert "`versions` (one row a round: round, newest version, oldest version over the " \
        "workers)" in doc
    assert v.shape == (res.rounds, 3), v.shape
    assert (v[:, 0] == np.arange(res.rounds)).all() and (v[:, 1] >= v[:, 2]).all(), v


def test_tol_zero_help_says_the_apps_own_end_still_applies():
    import json

    # (it said "0: run to --max-rounds"; MF's --iters ends the run first)
    text = " ".join(_help("strads.apps.mf").split())
    assert "0: no tolerance rule; the run still ends at --max-rounds or at the app's own " \
        "end: MF's --iters" in text
    run = run_cli(["strads.apps.mf", *TINY_MF, "--early-stop", "0", "--iters", "1",
                   "--tol", "0", "--max-rounds", "1000"], timeout=120)
    assert run.returncode == 0, run.stderr
    summary = json.loads(run.stdout.splitlines()[0])
    assert (summary["rounds"], summary["stop_reason"]) == (6, "schedule_done"), summary


def test_lda_vocab_help_names_every_file_it_picks_up():
    vocab = _flag_help("strads.apps.lda", "--vocab PATH vocabulary", "--min-count")
    assert "<stem>.tokens" in vocab  # (the slice is --vocab's help)
    assert "vocab.txt" in vocab, vocab
