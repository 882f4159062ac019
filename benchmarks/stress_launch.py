"""Does ``strads.launch`` name the rank that was killed, under load? Runs the launcher
test's Lasso on 4 ranks (``--max-restarts 0``: the launcher only names the lost rank),
kills rank ``--victim`` with kill -9 once the checkpoint has passed round 20, and checks
the rank its line names; ``--parallel`` such runs at a time, beside ``--load`` busy
processes (``yes > /dev/null``). Figures: docs/elastic.md."""
import argparse
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from _common import ROOT, child_env

LASSO = ["strads.apps.lasso", "--n-samples", "3000", "--n-features", "20000",
         "--schedule", "round-robin", "--tol", "1e-9", "--quiet", "--checkpoint-every", "0.2"]
sys.path.insert(0, str(ROOT / "tests"))
from test_robustness import _pid_of_rank  # noqa: E402


def one(victim, out):
    """-> (the rank the launcher named or None, its stderr)."""
    cmd = [sys.executable, "-m", "strads.launch", "-n", "4", "--max-restarts", "0", *LASSO,
           "--out", str(out)]
    proc = subprocess.Popen(cmd, env={**child_env(), "PYTHONPATH": str(ROOT)}, cwd=ROOT,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    manifest = Path(out, "checkpoint", "manifest.json")
    while proc.poll() is None:
        try:
            at = json.loads(manifest.read_text())["round"]
        except (OSError, ValueError):
            at = -1
        pid = _pid_of_rank(out, victim)
        if at > 20 and pid:
            os.kill(pid, signal.SIGKILL)
            break
        time.sleep(0.05)
    _, err = proc.communicate(timeout=600)
    m = re.search(r"^strads\.launch: rank (\d+) ", err, re.M)
    return (int(m.group(1)) if m else None), err


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--kills", type=int, default=40, help="runs in all")
    ap.add_argument("--parallel", type=int, default=3, help="runs at a time")
    ap.add_argument("--load", type=int, default=2, help="busy processes beside them")
    ap.add_argument("--victim", type=int, default=3)
    a = ap.parse_args()
    busy = [subprocess.Popen(["yes"], stdout=subprocess.DEVNULL) for _ in range(a.load)]
    results, lock, todo = [], threading.Lock(), list(range(a.kills))

    def worker():
        while True:
            with lock:
                if not todo:
                    return
                i = todo.pop()
            with tempfile.TemporaryDirectory() as tmp:
                named, err = one(a.victim, Path(tmp, "run"))
            with lock:
                results.append(named)
                print(f"run {i}: killed rank {a.victim}, named {named}", flush=True)
                if named != a.victim:
                    print(err, flush=True)

    try:
        threads = [threading.Thread(target=worker) for _ in range(a.parallel)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    finally:
        for p in busy:
            p.kill()
            p.wait()
    right = sum(r == a.victim for r in results)
    print(f"{right} of {len(results)} kills of rank {a.victim} named right "
          f"({a.parallel} runs at a time, {a.load} busy processes)")
    return 0 if right == len(results) else 1


if __name__ == "__main__":
    sys.exit(main())
