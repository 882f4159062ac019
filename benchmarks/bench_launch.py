"""The launcher (``strads.launch``) under kill -9. ``naming``: does its line name the rank
that was killed, under load? The launcher test's Lasso on 4 ranks (``--max-restarts
0``: the launcher only names the lost rank) loses rank ``--victim`` once the checkpoint
has passed round 20; ``--parallel`` such runs at a time, beside ``--load`` busy processes
(``yes > /dev/null``). ``cost``: a Lasso run under ``mpiexec -n 4`` against the same run
under ``strads.launch -n 4`` losing rank 2 once its checkpoint has passed half the
uninterrupted run's rounds. ``recovery``: a lost rank's cost in place with ULFM (Open MPI
5 from .venv-ulfm, ``make test-ulfm`` builds it) against the launcher's restart (MPICH
from .venv): the launcher test's Lasso losing rank 2 once the checkpoint has passed round
20; ``recovery_s`` is what the run records (summary.json), from the loss seen to the
first round after it. Figures: docs/elastic.md."""
import argparse
import json
import re
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from _common import ROOT, child_env, run_cli, timed

ENV = {**child_env(), "PYTHONPATH": str(ROOT), "OMPI_ALLOW_RUN_AS_ROOT": "1",
       "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1"}
ULFM = ROOT / ".venv-ulfm" / "bin"
NAMING = ["strads.apps.lasso", "--n-samples", "3000", "--n-features", "20000", "--schedule",
          "round-robin", "--tol", "1e-9", "--quiet", "--checkpoint-every", "0.2"]
COST = ["strads.apps.lasso", "--n-samples", "4000", "--n-features", "30000", "--schedule",
        "round-robin", "--tol", "1e-9", "--quiet", "--checkpoint-every", "2"]
sys.path.insert(0, str(ROOT / "tests"))
from test_elastic import _kill_after  # noqa: E402


def launch(app, out, victim, after, extra=(), ulfm=False, check=None):
    """-> (the launcher's stderr, the job's seconds from start to exit, its summary, else
    False); ``ulfm``: under Open MPI's mpiexec with ULFM instead; ``check``: a failed
    job's name, to exit with."""
    cmd = [str(ULFM / "mpiexec"), "--with-ft", "ulfm", "--oversubscribe", "--bind-to",
           "none", "-n", "4", str(ULFM / "python"), "-m"] if ulfm else [
        sys.executable, "-m", "strads.launch", "-n", "4", *extra]
    t0 = time.perf_counter()
    proc = subprocess.Popen([*cmd, *app, "--out", str(out)], env=ENV, cwd=ROOT,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    _kill_after(out, victim, after, proc)
    err = proc.communicate(timeout=600)[1]
    if check and proc.returncode:
        raise SystemExit(f"{check}: exit {proc.returncode}\n{err}")
    summary = Path(out, "summary.json")
    return err, time.perf_counter() - t0, summary.exists() and json.loads(summary.read_text())


def naming(a):
    busy = [subprocess.Popen(["yes"], stdout=subprocess.DEVNULL) for _ in range(a.load)]
    named, lock = [], threading.Lock()

    def one(i):
        with tempfile.TemporaryDirectory() as tmp:
            err = launch(NAMING, Path(tmp, "run"), a.victim, 20, ["--max-restarts", "0"])[0]
        m = re.search(r"^strads\.launch: rank (\d+) ", err, re.M)
        with lock:
            named.append(int(m.group(1)) if m else None)
            print(f"run {i}: killed rank {a.victim}, named {named[-1]}", flush=True)
            if named[-1] != a.victim:
                print(err, flush=True)

    try:
        with ThreadPoolExecutor(a.parallel) as pool:
            list(pool.map(one, reversed(range(a.kills))))
    finally:
        for p in busy:
            p.kill()
            p.wait()
    right = named.count(a.victim)
    print(f"{right} of {len(named)} kills of rank {a.victim} named right "
          f"({a.parallel} runs at a time, {a.load} busy processes)")
    return 0 if right == len(named) else 1


def cost(a):
    print("| uninterrupted s | with the launcher s | lost at round | resumed from | "
          "recovery_s | objective's relative difference |\n|---|---|---|---|---|---|")
    for _ in range(a.repeat):
        with tempfile.TemporaryDirectory() as tmp:
            wall0, ref = timed(run_cli, COST, Path(tmp, "ref"), np=4,
                               env={"PYTHONPATH": str(ROOT)})
            _, wall, s = launch(COST, Path(tmp, "run"), 2, ref["rounds"] // 2)
            r = s["restarts"][0]
            diff = abs(s["objective"] - ref["objective"]) / ref["objective"]
            print(f"| {wall0:.1f} | {wall:.1f} | {r['round']} | "
                  f"{r['resumed_from_round']} | {r['recovery_s']:.2f} | {diff:.1g} |",
                  flush=True)


def recovery(a):
    if not (ULFM / "mpiexec").exists():
        raise SystemExit("no .venv-ulfm: run `make test-ulfm` first")
    print("| path | recovery_s | job's wall s |\n|---|---|---|")
    for path in ("ulfm", "launcher"):
        for _ in range(a.repeat):
            with tempfile.TemporaryDirectory() as tmp:
                _, wall, s = launch(NAMING, Path(tmp, "run"), 2, 20, ulfm=path == "ulfm",
                                    check=path)
            rec = s["recoveries" if path == "ulfm" else "restarts"][0]["recovery_s"]
            print(f"| {path} | {rec:.2f} | {wall:.1f} |", flush=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="what", required=True)
    n = sub.add_parser("naming")
    n.add_argument("--kills", type=int, default=40, help="runs in all")
    n.add_argument("--parallel", type=int, default=3, help="runs at a time")
    n.add_argument("--load", type=int, default=2, help="busy processes beside them")
    n.add_argument("--victim", type=int, default=3)
    for name, repeat in (("cost", 2), ("recovery", 3)):
        sub.add_parser(name).add_argument("--repeat", type=int, default=repeat)
    a = ap.parse_args()
    return {"naming": naming, "cost": cost, "recovery": recovery}[a.what](a)


if __name__ == "__main__":
    sys.exit(main())
