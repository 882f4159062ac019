"""Reproduce the STRADS papers' comparisons with this project's CLIs: figures and a report.

    python -m strads.reproduce --out DIR [--quick]
        [--only lasso,logreg,lda,mf,scaling,staleness]

Lee et al., "On model parallelization and scheduling strategies for distributed machine
learning" (NIPS 2014) and Kim et al., "STRADS: a distributed framework for scheduled
model parallel machine learning" (EuroSys 2016). Every run is a real command line
(``python -m strads.apps.lasso|logreg|lda|mf``, under ``mpiexec -n W+1`` where W > 1 workers
are compared across processes); each run's ``trace.csv``/``summary.json`` lands in
``DIR/runs/<experiment>/<run>/``, the figures (PNG, matplotlib: ``pip install -e
.[reproduce]``) in ``DIR/``, and ``DIR/REPORT.md`` ties them to the papers' claims.

Sizes: the default (full) run takes up to about 2 hours, ``--quick`` under 20 minutes
on a 2-core machine. Inputs: the built-in generators, or ``--lasso-data``,
``--logreg-data``, ``--mf-data``, ``--lda-data``.
"""
import argparse
import csv
import json
import os
import platform
import re
import shlex
import shutil
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

EXPERIMENTS = ("lasso", "logreg", "lda", "mf", "scaling", "staleness")

# Sizes. Shapes follow the papers' data sets, scaled down: Lasso p >> n (the papers'
# Lasso data are wide: many more features than samples), LDA a bag-of-words corpus
# with a large vocabulary (NYTimes-like), MF a users x items rating matrix with
# power-law degrees (Netflix-like: many more users than items).
SIZES = {
    "tiny": dict(
        workers=2, mpi=False, log_interval=0,
        lasso=dict(n_samples=200, n_features=1000, density=0.02, n_informative=20,
                   corr=0.5, lambda_ratio=0.1, block=32, tol=1e-5, time_limit=3),
        logreg=dict(n_samples=200, n_features=1000, density=0.02, n_informative=20,
                    corr=0.5, lambda_ratio=0.1, block=32, tol=1e-5, time_limit=3),
        lda=dict(n_docs=200, n_words=500, doc_length=40, topics=10, sweeps=6),
        lda_mem=dict(n_docs=100, n_words=3000, doc_length=30, topics=20, true_topics=5,
                     sweeps=1, workers=[1, 2]),
        mf=dict(n_users=300, n_items=150, n_ratings=6000, rank=8, lam=0.05, iters=4),
        scaling=dict(n_docs=300, n_words=500, doc_length=40, topics=10, sweeps=4,
                     workers=[1, 2]),
        staleness=[0, 1],
    ),
    "quick": dict(
        workers=2, mpi=True, log_interval=0.02,
        lasso=dict(n_samples=2000, n_features=50000, density=0.01, n_informative=100,
                   corr=0.5, lambda_ratio=0.05, block=256, tol=1e-6, time_limit=40),
        logreg=dict(n_samples=2000, n_features=20000, density=0.01, n_informative=100,
                    corr=0.5, lambda_ratio=0.05, block=256, tol=1e-6, time_limit=30),
        lda=dict(n_docs=15000, n_words=10000, doc_length=100, topics=50, sweeps=40),
        # memory: a large word-topic table (V x K int32: 80 MB here) against the
        # corpus; the generating model has few topics (--true-topics) so that drawing
        # the corpus does not set each worker's peak
        lda_mem=dict(n_docs=2000, n_words=100000, doc_length=50, topics=200,
                     true_topics=5, sweeps=1, workers=[1, 2, 4]),
        mf=dict(n_users=50000, n_items=10000, n_ratings=2000000, rank=16, lam=0.05,
                iters=15),
        scaling=dict(n_docs=30000, n_words=10000, doc_length=100, topics=50, sweeps=20,
                     workers=[1, 2, 4, 8]),
        staleness=[0, 1, 2, 4],
    ),
    "full": dict(
        workers=2, mpi=True, log_interval=0.05,
        lasso=dict(n_samples=5000, n_features=200000, density=0.002, n_informative=500,
                   corr=0.5, lambda_ratio=0.05, block=256, tol=1e-6, time_limit=240),
        logreg=dict(n_samples=5000, n_features=100000, density=0.005, n_informative=300,
                    corr=0.5, lambda_ratio=0.05, block=256, tol=1e-6, time_limit=150),
        lda=dict(n_docs=30000, n_words=50000, doc_length=150, topics=100, sweeps=60),
        lda_mem=dict(n_docs=10000, n_words=200000, doc_length=50, topics=200,
                     true_topics=5, sweeps=1, workers=[1, 2, 4, 8]),
        mf=dict(n_users=100000, n_items=15000, n_ratings=5000000, rank=32, lam=0.05,
                iters=20),
        scaling=dict(n_docs=30000, n_words=30000, doc_length=150, topics=100, sweeps=15,
                     workers=[1, 2, 4, 8]),
        staleness=[0, 1, 2, 4],
    ),
}

NEED_MPL = "matplotlib is needed for the figures: pip install -e .[reproduce]"


def child_env():
    """This environment without the launcher's variables: a child is its own MPI job."""
    return {k: v for k, v in os.environ.items()
            if not k.startswith(("PMI_", "MPI_", "OMPI_", "PMIX_", "HYDRA"))}


def mpiexec():
    exe = Path(sys.executable).parent / "mpiexec"
    return str(exe) if exe.exists() else (shutil.which("mpiexec") or "mpiexec")


def machine():
    mem = {}
    try:
        for line in open("/proc/meminfo"):
            k, v = line.split(":", 1)
            if k in ("MemTotal", "MemAvailable"):
                mem[k] = int(v.split()[0]) / 2 ** 20
    except OSError:
        pass
    try:
        usable = len(os.sched_getaffinity(0))
    except AttributeError:
        usable = os.cpu_count()
    return {"cpu_count": os.cpu_count(), "usable_cores": usable,
            "mem_total_gib": mem.get("MemTotal"), "mem_available_gib": mem.get("MemAvailable"),
            "platform": platform.platform(), "python": platform.python_version(),
            "processor": platform.processor() or platform.machine(),
            "loadavg": os.getloadavg() if hasattr(os, "getloadavg") else None}


def read_trace(path):
    with open(path, newline="") as f:
        rows = list(csv.DictReader(f))
    if not rows:
        return {}
    out = {}
    for k in rows[0]:
        try:
            out[k] = np.array([float(r[k]) for r in rows])
        except (TypeError, ValueError):
            pass
    return out


class Ctx:
    def __init__(self, args):
        self.args = args
        self.out = Path(args.out)
        self.size = "tiny" if args.tiny else "quick" if args.quick else "full"
        self.S = SIZES[self.size]
        self.t0 = time.perf_counter()
        self.runs = {}       # experiment -> {run: dict(cmd, summary, trace, dir)}
        self.commands = {}   # experiment -> [command strings]
        self.results = {}    # experiment -> dict of measured facts
        self.figures = {}    # experiment -> [(file, caption)]
        self.failed = {}     # experiment -> message
        self.notes = {}      # experiment -> [strings]
        self.cache = {}

    def elapsed(self):
        return time.perf_counter() - self.t0

    def say(self, msg):
        print(f"[{self.elapsed():7.1f}s] {msg}", file=sys.stderr, flush=True)

    def show(self, cmd):
        """A command as a reader can run it: python, mpiexec, paths relative to DIR."""
        parts = []
        for c in cmd:
            c = str(c)
            if c == sys.executable:
                c = "python"
            elif c == mpiexec():
                c = "mpiexec"
            elif c.startswith(str(self.out) + os.sep):
                c = "DIR/" + os.path.relpath(c, self.out)
            parts.append(c)
        return shlex.join(parts)

    def cli(self, exp, name, app, flags, workers=1, mpi=None, timeout=None):
        """Run ``python -m strads.apps.<app>`` with ``flags`` and ``--out`` its run folder,
        one process (workers threads) or ``mpiexec -n workers+1``."""
        mpi = (workers > 1) if mpi is None else mpi
        d = self.out / "runs" / exp / name
        if d.exists():
            shutil.rmtree(d)
        d.mkdir(parents=True)
        cmd = [sys.executable, "-m", f"strads.apps.{app}", *map(str, flags), "--quiet",
               "--out", str(d)]
        if mpi:
            cmd = [mpiexec(), "-n", str(workers + 1), *cmd]
        else:
            cmd += ["--workers", str(workers)]
        shown = self.show(cmd)
        (d / "command.txt").write_text(shown + "\n")
        self.commands.setdefault(exp, []).append(shown)
        self.say(f"{exp}: run {name}: {shown}")
        t = time.perf_counter()
        p = subprocess.run(cmd, capture_output=True, text=True, env=child_env(),
                           timeout=timeout or 7200)
        (d / "stderr.txt").write_text(p.stderr)
        diverged = p.returncode == 3 and (d / "summary.json").exists() and json.loads(
            (d / "summary.json").read_text()).get("stop_reason") == "diverged"
        if p.returncode != 0 and not diverged:  # a divergence is a result, not a failure
            tail = "\n".join(p.stderr.strip().splitlines()[-5:])
            raise RuntimeError(f"{exp}/{name} exited {p.returncode}: {tail}")
        summary = json.loads((d / "summary.json").read_text())
        trace = read_trace(d / "trace.csv")
        self.say(f"{exp}: run {name} done in {time.perf_counter() - t:.1f}s "
                 f"(loop {summary['wall_s']:.2f}s, stop: {summary['stop_reason']})")
        run = dict(cmd=shown, summary=summary, trace=trace, dir=d)
        self.runs.setdefault(exp, {})[name] = run
        return run


# ---------------------------------------------------------------- helpers

def first_time(t, v, target, lower=True):
    """First t where v reaches target (v <= target if lower, else v >= target)."""
    ok = (v <= target) if lower else (v >= target)
    i = np.flatnonzero(ok)
    return float(t[i[0]]) if i.size else None


def fmt(x, d=3):
    if x is None:
        return "n/a"
    if isinstance(x, float) and (abs(x) >= 1e4 or (0 < abs(x) < 1e-2)):
        return f"{x:.{d - 1}e}"
    return f"{x:.{d}g}" if isinstance(x, float) else str(x)


def ratio_str(slow, fast, slow_reached=True):
    if slow is None or fast is None or fast <= 0:
        return None, "n/a"
    r = slow / fast
    return r, (f"{r:.2f}x" if slow_reached else f">= {r:.2f}x (lower bound)")


def plt_mod():
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        sys.exit(NEED_MPL)
    return plt


def save(ctx, exp, fig, fname, caption):
    path = ctx.out / fname
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt_mod().close(fig)
    ctx.figures.setdefault(exp, []).append((fname, caption))
    ctx.say(f"{exp}: wrote {path}")


def engine_flags(ctx, **over):
    return ["--log-interval", over.get("log_interval", ctx.S["log_interval"])]


# ---------------------------------------------------------------- warm-up

def warm_up(ctx, exps):
    """Tiny runs of every app and schedule to be used, in one process and under mpiexec,
    so that numba's on-disk cache holds every kernel before anything is timed."""
    apps = set()
    if "lasso" in exps or "staleness" in exps:
        apps.add("lasso")
    if "logreg" in exps:
        apps.add("logreg")
    if "lda" in exps or "scaling" in exps:
        apps.add("lda")
    if "mf" in exps:
        apps.add("mf")
    jobs = []
    for app in ("lasso", "logreg"):
        if app not in apps:
            continue
        base = ["--n-samples", 100, "--n-features", 300, "--max-rounds", 200,
                "--log-interval", 0]
        for s in ("working-set", "priority", "random", "round-robin"):
            jobs.append((app, s, base + ["--schedule", s], False))
        if ctx.S["mpi"]:
            jobs.append((app, "priority-mpi", base + ["--schedule", "priority",
                                                      "--staleness", 1], True))
            jobs.append((app, "working-set-mpi", base, True))
    if "lda" in apps:
        base = ["--n-docs", 60, "--n-words", 100, "--sweeps", 2, "--top-words", 0,
                "--log-interval", 0]
        for s in ("model", "data"):
            jobs.append(("lda", s, base + ["--schedule", s], False))
            jobs.append(("lda", s + "-mpi", base + ["--schedule", s], True))
    if "mf" in apps:
        base = ["--n-users", 100, "--n-items", 50, "--n-ratings", 1500, "--iters", 2,
                "--log-interval", 0]
        for s in ("ccd", "als"):
            jobs.append(("mf", s, base + ["--schedule", s], False))
        d = ctx.out / "runs" / "warmup"
        d.mkdir(parents=True, exist_ok=True)
        tr, te = write_ratings(d, *mf_builtin(dict(n_users=100, n_items=50, n_ratings=1500),
                                              seed=0))
        jobs.append(("mf", "file", ["--data", tr, "--test-data", te, "--iters", 2,
                                    "--log-interval", 0], False))
    if ctx.size == "tiny":  # a smoke test: one warm-up run per app is enough
        jobs = [j for k, j in enumerate(jobs) if j[0] not in {x[0] for x in jobs[:k]}]
    for app, name, flags, mpi in jobs:
        ctx.cli("warmup", f"{app}-{name}", app, flags, workers=2, mpi=mpi)
    ctx.commands.pop("warmup", None)
    ctx.runs.pop("warmup", None)


# ---------------------------------------------------------------- Lasso

APP_NAME = {"lasso": "Lasso", "logreg": "sparse logistic regression"}


def sparse_data_flags(ctx, app="lasso"):
    """Data flags of the Lasso or the sparse logistic regression (the same CLI shape)."""
    a, L = ctx.args, ctx.S[app]
    data, target = getattr(a, f"{app}_data"), getattr(a, f"{app}_target")
    if data:
        f = ["--data", data] + (["--target", target] if target else [])
    else:
        f = ["--n-samples", L["n_samples"], "--n-features", L["n_features"], "--density",
             L["density"], "--n-informative", L["n_informative"], "--corr", L["corr"]]
    return f + ["--lambda-ratio", L["lambda_ratio"], "--seed", a.seed]


def lasso_data_flags(ctx):
    return sparse_data_flags(ctx, "lasso")


def sparse_shape(ctx, app="lasso"):
    data = getattr(ctx.args, f"{app}_data")
    if data:
        return f"`{data}` (user data)"
    L = ctx.S[app]
    what = "labels: signs of a noisy linear model, " if app == "logreg" else ""
    return (f"built-in sparse problem, {L['n_samples']} samples x {L['n_features']} "
            f"features, density {L['density']}, {L['n_informative']} informative, "
            f"{what}neighbour correlation {L['corr']}, lambda = {L['lambda_ratio']} "
            f"lambda_max")


def lasso_shape(ctx):
    return sparse_shape(ctx, "lasso")


def sparse_reference(ctx, app="lasso"):
    """f*: the working-set schedule (the fastest here) in one process to a duality gap
    of 1e-11 x objective."""
    key = f"{app}_ref"
    if key in ctx.cache:
        return ctx.cache[key]
    L = ctx.S[app]
    run = ctx.cli("reference", f"{app}-working-set-tol1e-11", app,
                  sparse_data_flags(ctx, app) + ["--schedule", "working-set", "--tol",
                                                 1e-11, "--time-limit", 2 * L["time_limit"],
                                                 "--max-rounds", 10 ** 7,
                                                 "--log-interval", 1],
                  workers=1, mpi=False)
    s = run["summary"]
    ref = dict(f=s["objective"], gap=s.get("duality_gap"), stop=s["stop_reason"],
               cmd=run["cmd"])
    ctx.cache[key] = ref
    return ref


def lasso_reference(ctx):
    return sparse_reference(ctx, "lasso")


def subopt(trace, fstar):
    s = (trace["objective"] - fstar) / abs(fstar)
    return np.where(s > 0, s, np.nan)


LASSO_RUNS = (
    ("working-set", "working-set (this project's default: priority blocks solved exactly)",
     ["--schedule", "working-set"]),
    ("priority", "STRADS priority + dependency check (rho 0.1)",
     ["--schedule", "priority", "--rho", 0.1]),
    ("priority-nodep", "priority, no dependency check (rho 1)",
     ["--schedule", "priority", "--rho", 1]),
    ("random", "random (Shotgun)", ["--schedule", "random"]),
    ("round-robin", "round-robin (static)", ["--schedule", "round-robin"]),
)


def sparse_common(ctx, app="lasso"):
    L = ctx.S[app]
    return sparse_data_flags(ctx, app) + ["--block", L["block"], "--tol", L["tol"],
                                          "--time-limit", L["time_limit"], "--max-rounds",
                                          10 ** 8] + engine_flags(ctx)


def lasso_common(ctx):
    return sparse_common(ctx, "lasso")


def exp_sparse(ctx, app):
    """The schedules against each other on one problem (Lasso or sparse logistic
    regression): suboptimality against time and against coordinate updates."""
    W = ctx.S["workers"]
    ref = sparse_reference(ctx, app)
    runs = {}
    for name, _, flags in LASSO_RUNS:
        runs[name] = ctx.cli(app, name, app, sparse_common(ctx, app) + flags, workers=W,
                             mpi=ctx.S["mpi"])
    fstar = min([ref["f"]] + [float(np.min(r["trace"]["objective"])) for r in runs.values()])
    plt = plt_mod()
    cmds = "; ".join(r["cmd"] for r in runs.values())
    for xkey, xlabel, fname in (("wall_s", "wall time (s)", f"{app}_time.png"),
                                ("updates", "coordinate updates", f"{app}_updates.png")):
        fig, ax = plt.subplots(figsize=(7, 4.5))
        for name, label, _ in LASSO_RUNS:
            tr = runs[name]["trace"]
            ax.plot(tr[xkey], subopt(tr, fstar), label=label, lw=1.4)
        ax.set_yscale("log")
        if xkey == "updates":
            ax.set_xscale("log")  # the first logged rows (0 updates) are left out
        ax.set_xlabel(xlabel)
        ax.set_ylabel("relative suboptimality (f - f*) / f*")
        ax.set_title(f"{APP_NAME[app][0].upper() + APP_NAME[app][1:]}, {W} workers: "
                     "objective vs " + ("time" if xkey == "wall_s" else "updates"))
        ax.legend(fontsize=8)
        ax.grid(True, which="both", alpha=0.3)
        save(ctx, app, fig, fname,
             f"{APP_NAME[app][0].upper() + APP_NAME[app][1:]} suboptimality against "
             f"{xlabel}; f* = {fstar:.10g} (reference: `{ref['cmd']}`, stop "
             f"{ref['stop']}). Commands: `{cmds}`")
    res = {"fstar": fstar, "ref": ref, "runs": {}}
    for name, _, _ in LASSO_RUNS:
        tr, s = runs[name]["trace"], runs[name]["summary"]
        res["runs"][name] = dict(best=float(np.nanmin(subopt(tr, fstar))) if np.any(
            tr["objective"] > fstar) else 0.0, wall=s["wall_s"], updates=s["updates"],
            stop=s["stop_reason"], trace=tr)
    ctx.results[app] = res


def exp_lasso(ctx):
    exp_sparse(ctx, "lasso")


def exp_logreg(ctx):
    exp_sparse(ctx, "logreg")


def lasso_race(res, slow, fast, fstar):
    """Time for ``slow`` and ``fast`` to reach the worse of their best suboptimalities
    (x2): both reach it; returns (t_slow, t_fast, target, slow_reached_tol). A run that
    diverged does not set the target (it may never reach it: t None)."""
    a, b = res["runs"][slow], res["runs"][fast]
    bests = [x["best"] for x in (a, b) if x["stop"] != "diverged"] or [a["best"], b["best"]]
    target = 2 * max(bests + [1e-12])
    ta = first_time(a["trace"]["wall_s"], np.nan_to_num(subopt(a["trace"], fstar)), target)
    tb = first_time(b["trace"]["wall_s"], np.nan_to_num(subopt(b["trace"], fstar)), target)
    return ta, tb, target, a["stop"] == "tol"


# ---------------------------------------------------------------- LDA

def lda_data_flags(ctx, D):
    a = ctx.args
    if a.lda_data:
        return ["--data", a.lda_data, "--topics", D["topics"], "--seed", a.seed]
    return ["--n-docs", D["n_docs"], "--n-words", D["n_words"], "--doc-length",
            D["doc_length"], "--topics", D["topics"], "--seed", a.seed] + (
        ["--true-topics", D["true_topics"]] if D.get("true_topics") else [])


def lda_shape(ctx, D):
    if ctx.args.lda_data:
        return f"`{ctx.args.lda_data}` (user data), {D['topics']} topics"
    gen = (f" (drawn from a {D['true_topics']}-topic model)" if D.get("true_topics")
           else "")
    return (f"built-in corpus{gen}, {D['n_docs']} documents x {D['n_words']} words, "
            f"{D['doc_length']} tokens per document on average, {D['topics']} topics")


def exp_lda(ctx):
    W, D, M = ctx.S["workers"], ctx.S["lda"], ctx.S["lda_mem"]
    runs = {}
    for sched in ("model", "data"):
        runs[sched] = ctx.cli("lda", sched, "lda", lda_data_flags(ctx, D) + [
            "--schedule", sched, "--sweeps", D["sweeps"], "--top-words", 0]
            + engine_flags(ctx), workers=W, mpi=ctx.S["mpi"])
    label = {"model": "model-parallel (STRADS vocabulary rotation)",
             "data": "data-parallel (YahooLDA-style)"}
    plt = plt_mod()
    cmds = "; ".join(r["cmd"] for r in runs.values())
    for xkey, xlabel, fname in (("wall_s", "wall time (s)", "lda_time.png"),
                                ("sweeps", "sweeps over the corpus", "lda_sweeps.png")):
        fig, ax = plt.subplots(figsize=(7, 4.5))
        for sched, r in runs.items():
            ax.plot(r["trace"][xkey], r["trace"]["loglik"], label=label[sched], lw=1.4)
        ax.set_xlabel(xlabel)
        ax.set_ylabel("log-likelihood (nats)")
        ax.set_title(f"LDA, {W} workers: log-likelihood vs "
                     + ("time" if xkey == "wall_s" else "sweeps"))
        ax.legend(fontsize=8)
        ax.grid(True, alpha=0.3)
        save(ctx, "lda", fig, fname, f"LDA log-likelihood against {xlabel}. Commands: "
             f"`{cmds}`")
    # memory per worker as workers are added
    mem = {"model": [], "data": []}
    base = []  # the scheduler rank's peak RSS: a rank that holds no word-topic table
    mem_cmds = []
    for w in M["workers"]:
        for sched in ("model", "data"):
            r = ctx.cli("lda", f"mem-{sched}-w{w}", "lda", lda_data_flags(ctx, M) + [
                "--schedule", sched, "--sweeps", M["sweeps"], "--top-words", 0,
                "--log-interval", 1], workers=w, mpi=True)
            wk = [t["peak_rss_mb"] for t in r["summary"]["traffic"] if t["rank"] >= 1]
            mem[sched].append(float(np.mean(wk)))
            base += [t["peak_rss_mb"] for t in r["summary"]["traffic"] if t["rank"] == 0]
            mem_cmds.append(r["cmd"])
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for sched in ("model", "data"):
        ax.plot(M["workers"], mem[sched], "o-", label=label[sched])
    b = float(np.median(base))
    ax.axhline(b, color="k", ls=":", alpha=0.6,
               label=f"scheduler rank (no word-topic table): {b:.0f} MB")
    tbl = M["n_words"] * M["topics"] * 4 / 1e6 if not ctx.args.lda_data else None
    if tbl:
        ax.text(0.02, 0.04, f"one word-topic table (V x K int32): {tbl:.0f} MB",
                transform=ax.transAxes)
    ax.set_ylim(bottom=0)
    ax.set_xscale("log", base=2)
    ax.set_xticks(M["workers"])
    ax.set_xticklabels([str(w) for w in M["workers"]])
    ax.set_xlabel("workers (MPI ranks besides the scheduler)")
    ax.set_ylabel("peak RSS per worker (MB)")
    ax.set_title("LDA: memory per worker as workers are added")
    ax.legend(fontsize=8)
    ax.grid(True, alpha=0.3)
    save(ctx, "lda", fig, "lda_memory.png",
         f"Mean peak resident memory of the worker ranks (summary.json traffic "
         f"peak_rss_mb, {lda_shape(ctx, M)}, {M['sweeps']} sweep; each includes the "
         f"Python + numba + MPI baseline of a rank; the dotted line is the scheduler "
         f"rank's peak, median over these runs). Commands: `{'; '.join(mem_cmds)}`")
    ctx.results["lda"] = dict(runs={k: dict(trace=r["trace"], summary=r["summary"])
                                    for k, r in runs.items()}, mem=mem,
                              mem_workers=M["workers"], mem_base=b)


def progress_race(ta, va, tb, vb, lower, frac=0.95):
    """Both curves to ``frac`` of the way from the common start to the worse of their
    best values; returns (t_a, t_b, target)."""
    start = max(va[0], vb[0]) if lower else min(va[0], vb[0])
    worse_best = max(np.min(va), np.min(vb)) if lower else min(np.max(va), np.max(vb))
    target = start + frac * (worse_best - start)
    return first_time(ta, va, target, lower), first_time(tb, vb, target, lower), target


# ---------------------------------------------------------------- MF

def mf_builtin(F, seed):
    from strads.apps import mf
    t = mf.make_problem(F["n_users"], F["n_items"], F["n_ratings"], rank=8, noise=0.5,
                        alpha=0.7, seed=seed)
    return t.users, t.items, t.ratings


def read_ratings(path):
    us, it, rs = [], [], []
    with open(path) as f:
        for line in f:
            p = re.split(r"[,\t ]+", line.strip())
            if len(p) < 3 or p[0].startswith(("%", "#")):
                continue
            try:
                u, i, r = int(float(p[0])), int(float(p[1])), float(p[2])
            except ValueError:
                continue  # a header
            us.append(u)
            it.append(i)
            rs.append(r)
    if not us:
        raise SystemExit(f"{path}: no 'user item rating' lines")
    if len(us) > 0 and str(path).endswith((".mtx", ".mm")):
        us, it, rs = us[1:], it[1:], rs[1:]  # the size line
    return np.array(us), np.array(it), np.array(rs, dtype=np.float64)


def split_ratings(u, i, r, seed, frac=0.1):
    """A held-out share, minus ratings of users or items with no training rating; ids
    made compact (0-based)."""
    _, u = np.unique(u, return_inverse=True)
    _, i = np.unique(i, return_inverse=True)
    test = np.random.default_rng([seed, 13]).random(r.shape[0]) < frac
    tr = ~test
    seen_u = np.zeros(u.max() + 1, bool)
    seen_i = np.zeros(i.max() + 1, bool)
    seen_u[u[tr]] = True
    seen_i[i[tr]] = True
    test &= seen_u[u] & seen_i[i]
    return (u[tr], i[tr], r[tr]), (u[test], i[test], r[test])


def write_ratings(d, u, i, r, seed=0):
    train, test = split_ratings(u, i, r, seed)
    paths = []
    for name, (a, b, c) in (("train.tsv", train), ("test.tsv", test)):
        p = Path(d) / name
        np.savetxt(p, np.column_stack([a + 1, b + 1, c]), fmt=["%d", "%d", "%.6f"],
                   delimiter="\t")
        paths.append(str(p))
    return paths


def libmf_curve(train, test, rank, lam, iters_list, eta=0.1):
    import contextlib
    with contextlib.redirect_stdout(open(os.devnull, "w")):
        from libmf import mf as libmf
    mu = float(train[2].mean())  # as strads' --bias mean: fit the centred ratings
    X = np.column_stack([train[0], train[1], train[2] - mu]).astype(np.float32)
    rows = []
    for it in iters_list:
        model = libmf.MF(k=rank, nr_threads=1, nr_iters=it, lambda_p1=0.0, lambda_q1=0.0,
                         lambda_p2=lam, lambda_q2=lam, eta=eta, quiet=True)
        t0 = time.perf_counter()
        model.fit(X)
        wall = time.perf_counter() - t0
        P, Q = model.p_factors().astype(np.float64), model.q_factors().astype(np.float64)
        e = test[2] - mu - np.einsum("ij,ij->i", P[test[0]], Q[test[1]])
        rows.append((it, wall, float(np.sqrt(e @ e / e.shape[0]))))
    return rows


def exp_mf(ctx):
    F, a = ctx.S["mf"], ctx.args
    d = ctx.out / "runs" / "mf"
    d.mkdir(parents=True, exist_ok=True)
    ctx.say("mf: writing the train / held-out files")
    u, i, r = read_ratings(a.mf_data) if a.mf_data else mf_builtin(F, a.seed)
    tr_path, te_path = write_ratings(d, u, i, r, a.seed)
    train, test = split_ratings(u, i, r, a.seed)
    ctx.results["mf_shape"] = (int(train[0].max() + 1), int(train[1].max() + 1),
                               int(train[2].shape[0]), int(test[2].shape[0]))
    runs = {}
    for sched in ("ccd", "als"):
        runs[sched] = ctx.cli("mf", sched, "mf", [
            "--data", tr_path, "--test-data", te_path, "--rank", F["rank"], "--lambda",
            F["lam"], "--schedule", sched, "--bias", "mean", "--iters", F["iters"], "--tol",
            0, "--early-stop", 0, "--seed",  # a curve over --iters: one run
            a.seed] + engine_flags(ctx), workers=1, mpi=False)
    pts = sorted({max(1, round(F["iters"] * k / 6)) for k in range(1, 7)})
    t = time.perf_counter()
    import importlib.util
    if importlib.util.find_spec("libmf") is None:
        lm = []
        ctx.notes.setdefault("mf", []).append(
            "LIBMF is not installed (pip install libmf): its line is missing.")
        ctx.say("mf: libmf is not installed (pip install libmf): left out")
    else:
        ctx.say("mf: run libmf (pip libmf, 1 thread)")
        lm = libmf_curve(train, test, F["rank"], F["lam"], pts)
    ld = d / "libmf"
    ld.mkdir(exist_ok=True)
    with open(ld / "trace.csv", "w") as f:
        f.write("iterations,wall_s,test_rmse\n")
        for row in lm:
            f.write(",".join(map(str, row)) + "\n")
    (ld / "summary.json").write_text(json.dumps(dict(
        app="libmf", threads=1, rank=F["rank"], lambda_=F["lam"], eta=0.1,
        points=[dict(iterations=a_, wall_s=b_, test_rmse=c_) for a_, b_, c_ in lm]),
        indent=2))
    lm_cmd = (f"libmf.mf.MF(k={F['rank']}, nr_threads=1, nr_iters=N, lambda_p2={F['lam']}, "
              f"lambda_q2={F['lam']}, eta=0.1).fit(train - mean) for N in {pts}")
    (ld / "command.txt").write_text(lm_cmd + "\n")
    ctx.commands.setdefault("mf", []).append(lm_cmd)
    ctx.say(f"mf: libmf done in {time.perf_counter() - t:.1f}s")
    plt = plt_mod()
    fig, ax = plt.subplots(figsize=(7, 4.5))
    names = {"ccd": "strads CCD++", "als": "strads ALS (GraphLab-style baseline)"}
    for sched, rr in runs.items():
        tr = rr["trace"]
        ax.plot(tr["wall_s"], tr["test_rmse"], label=names[sched] + ", 1 worker", lw=1.4)
    if lm:
        ax.plot([x[1] for x in lm], [x[2] for x in lm], "s--", label="LIBMF SGD, 1 thread")
    ax.set_xlabel("wall time (s)")
    ax.set_ylabel("held-out RMSE (rating units)")
    ax.set_title("MF: test RMSE vs time (one core each)")
    ax.legend(fontsize=8)
    ax.grid(True, alpha=0.3)
    save(ctx, "mf", fig, "mf_rmse_time.png",
         f"MF held-out RMSE against time, each method on one core, "
         f"{F['iters']} outer iterations / epochs; LIBMF points are separate fits of N "
         f"epochs (its fit() call timed). Commands: `{'; '.join(ctx.commands['mf'])}`")
    ctx.results["mf"] = dict(runs={k: dict(trace=r["trace"], summary=r["summary"])
                                   for k, r in runs.items()}, libmf=lm)


# ---------------------------------------------------------------- scalability

def exp_scaling(ctx):
    D = ctx.S["scaling"]
    runs = {}
    for w in D["workers"]:
        runs[w] = ctx.cli("scaling", f"w{w}", "lda", lda_data_flags(ctx, D) + [
            "--schedule", "model", "--sweeps", D["sweeps"], "--top-words", 0]
            + engine_flags(ctx), workers=w, mpi=w > 1)
    # the target: 95% of the way from the first logged log-likelihood to the worst
    # run's best (every run reaches it)
    start = min(r["trace"]["loglik"][0] for r in runs.values())
    worst = min(float(np.max(r["trace"]["loglik"])) for r in runs.values())
    target = start + 0.95 * (worst - start)
    tt = {w: first_time(r["trace"]["wall_s"], r["trace"]["loglik"], target, lower=False)
          for w, r in runs.items()}
    cores = machine()["usable_cores"]
    plt = plt_mod()
    fig, ax = plt.subplots(figsize=(7, 4.5))
    ws = D["workers"]
    ax.plot(ws, [tt[w] for w in ws], "o-", label="model-parallel LDA: time to target")
    if tt[ws[0]]:
        ax.plot(ws, [tt[ws[0]] * ws[0] / w for w in ws], "k:", label="linear scaling")
    ax.axvline(cores, color="r", alpha=0.4, ls="--")
    ax.text(0.02, 0.04, f"this machine: {cores} usable cores ({os.cpu_count()} CPUs)",
            transform=ax.transAxes, color="r")
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xticks(ws)
    ax.set_xticklabels([str(w) for w in ws])
    ax.set_xlabel("workers (1: one process; W > 1: mpiexec -n W+1)")
    ax.set_ylabel(f"seconds to log-likelihood {target:.6g}")
    ax.set_title("Scalability: time to a fixed objective vs workers")
    ax.legend(fontsize=8)
    ax.grid(True, which="both", alpha=0.3)
    save(ctx, "scaling", fig, "scaling.png",
         f"Time for model-parallel LDA ({lda_shape(ctx, D)}) to reach log-likelihood "
         f"{target:.6g} (95% of the way from the start to the worst run's best). "
         f"Commands: `{'; '.join(r['cmd'] for r in runs.values())}`")
    ctx.results["scaling"] = dict(tt=tt, target=target, cores=cores, workers=ws)


# ---------------------------------------------------------------- staleness

def exp_staleness(ctx):
    W = ctx.S["workers"]
    ref = lasso_reference(ctx)
    runs = {}
    for s in ctx.S["staleness"]:
        runs[s] = ctx.cli("staleness", f"s{s}", "lasso", lasso_common(ctx) + [
            "--schedule", "priority", "--staleness", s], workers=W, mpi=ctx.S["mpi"])
    fstar = min([ref["f"]] + [float(np.min(r["trace"]["objective"])) for r in runs.values()])
    plt = plt_mod()
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for s, r in runs.items():
        ax.plot(r["trace"]["wall_s"], subopt(r["trace"], fstar), label=f"staleness {s}",
                lw=1.4)
    ax.set_yscale("log")
    ax.set_xlabel("wall time (s)")
    ax.set_ylabel("relative suboptimality (f - f*) / f*")
    ax.set_title(f"Lasso STRADS priority, {W} workers: staleness (pipeline depth)")
    ax.legend(fontsize=8)
    ax.grid(True, which="both", alpha=0.3)
    save(ctx, "staleness", fig, "staleness.png",
         f"Lasso (priority + dependency check) suboptimality against time at staleness "
         f"{', '.join(map(str, runs))}; f* = {fstar:.10g}. Commands: "
         f"`{'; '.join(r['cmd'] for r in runs.values())}`")
    best = {s: float(np.nanmin(subopt(r["trace"], fstar))) if np.any(
        r["trace"]["objective"] > fstar) else 0.0 for s, r in runs.items()}
    stops = {s: r["summary"]["stop_reason"] for s, r in runs.items()}
    target = 2 * max(max([b for s, b in best.items() if stops[s] != "diverged"] or
                         list(best.values())), 1e-12)
    tt = {s: first_time(r["trace"]["wall_s"], np.nan_to_num(subopt(r["trace"], fstar)),
                        target) for s, r in runs.items()}
    ctx.results["staleness"] = dict(tt=tt, target=target, best=best,
                                    stop={s: r["summary"]["stop_reason"]
                                          for s, r in runs.items()},
                                    ups={s: r["summary"]["updates_per_s"]
                                         for s, r in runs.items()})


# ---------------------------------------------------------------- report

def sparse_claims(L, app):
    """Claims rows of the Lasso or the sparse logistic regression experiment."""
    if app == "lasso":
        papers = (
            ("random", "STRADS Lasso (priority + dependency check) converges faster than "
             "Shotgun / Lasso-RR (random parallel coordinates); EuroSys: about 5x",
             "EuroSys 2016 abstract: SchMP Lasso 5x faster convergence (checked); NIPS "
             "2014 Lasso figure (not checked)"),
            ("round-robin", "dynamic (priority) scheduling beats static (round-robin)",
             "EuroSys 2016, dynamic vs static (not checked)"),
            ("priority-nodep", "the dependency check speeds convergence over priority "
             "alone", "NIPS 2014 (not checked)"))
    else:
        papers = (
            ("random", "STRADS sparse logistic regression (priority + dependency check) "
             "converges faster than random parallel coordinates (Shotgun)",
             "EuroSys 2016 benchmarks SchMP sparse logistic regression (abstract, "
             "checked); its figure and ratio (not checked)"),
            ("round-robin", "logreg: dynamic (priority) scheduling beats static "
             "(round-robin)", "EuroSys 2016 (not checked)"),
            ("priority-nodep", "logreg: the dependency check speeds convergence over "
             "priority alone", "(not checked)"))
    rows = []
    tag = "" if app == "lasso" else "logreg: "
    for slow, what, paper in papers:
        ts, tf, tgt, reached = lasso_race(L, slow, "priority", L["fstar"])
        r, rs = ratio_str(ts, tf, reached)
        same = "n/a" if r is None else ("yes" if r > 1 else "no")
        if L["runs"][slow]["stop"] == "diverged" and L["runs"]["priority"]["stop"] \
                != "diverged":
            same, rs = "yes", "baseline diverged (no finite ratio)"
        rows.append((what, paper,
                     f"{tag}time to suboptimality {tgt:.2g}: {slow} {fmt(ts)} s vs priority "
                     f"{fmt(tf)} s ({slow} stop: {L['runs'][slow]['stop']}, priority "
                     f"stop: {L['runs']['priority']['stop']})", same, rs))
    ts, tf, tgt, reached = lasso_race(L, "priority", "working-set", L["fstar"])
    r, rs = ratio_str(ts, tf, reached)
    rows.append((f"(this project, not a paper claim) {tag}working-set beats STRADS "
                 "priority sampling", "-", f"time to suboptimality {tgt:.2g}: priority "
                 f"{fmt(ts)} s vs working-set {fmt(tf)} s", "n/a" if r is None else
                 ("yes" if r > 1 else "no"), rs))
    return rows


def claims(ctx):
    rows = []  # (claim, paper, measured, same, ratio)
    R = ctx.results
    for app in ("lasso", "logreg"):
        if app in R:
            rows.extend(sparse_claims(R[app], app))
    if "lda" in R:
        A = R["lda"]
        m, d = A["runs"]["model"]["trace"], A["runs"]["data"]["trace"]
        tm, td, tgt = progress_race(m["wall_s"], m["loglik"], d["wall_s"], d["loglik"],
                                    lower=False)
        r, rs = ratio_str(td, tm)
        rows.append(("model-parallel LDA converges faster than data-parallel (YahooLDA); "
                     "EuroSys: about 10x", "EuroSys 2016 abstract (10x, checked)",
                     f"time to log-likelihood {tgt:.6g}: data {fmt(td)} s vs model "
                     f"{fmt(tm)} s", "n/a" if r is None else ("yes" if r > 1 else "no"), rs))
        sm, sd = progress_race(m["sweeps"], m["loglik"], d["sweeps"], d["loglik"],
                               lower=False)[:2]
        r, rs = ratio_str(sd, sm)
        rows.append(("model-parallel LDA needs fewer sweeps (no stale word-topic counts)",
                     "EuroSys 2016 / NIPS 2014 LDA vs iterations (not checked)",
                     f"sweeps to the same target: data {fmt(sd)} vs model {fmt(sm)}",
                     "n/a" if r is None else ("yes" if r > 1 else "no"), rs))
        ws, mem, b = A["mem_workers"], A["mem"], A["mem_base"]
        m0, m1, d0, d1 = mem["model"][0], mem["model"][-1], mem["data"][0], mem["data"][-1]
        falls = m1 < 0.97 * m0        # model-parallel: less per worker with more workers
        keeps = d1 >= 0.97 * d0       # data-parallel: a full copy on each, whatever W
        above = (d1 - b) / (m1 - b) if m1 > b else None
        rows.append(("model-parallel memory per machine falls as machines are added; "
                     "data-parallel keeps a full model copy on each",
                     "NIPS 2014 abstract: STRADS 'improves memory efficiency' (checked); "
                     "the EuroSys 2016 LDA memory figure (not checked)",
                     f"peak RSS per worker, {ws[0]} -> {ws[-1]} workers: model "
                     f"{m0:.0f} -> {m1:.0f} MB, data {d0:.0f} -> {d1:.0f} MB (scheduler "
                     f"rank, no table: {b:.0f} MB)",
                     "yes" if falls and keeps and d1 > m1 else "no",
                     f"data/model at {ws[-1]} workers: {d1 / m1:.2f}x"
                     + (f"; above the scheduler rank's {b:.0f} MB: data {d1 - b:.0f} vs "
                        f"model {m1 - b:.0f} MB, {above:.1f}x" if above else "")))
    if "mf" in R:
        M = R["mf"]
        c, a = M["runs"]["ccd"]["trace"], M["runs"]["als"]["trace"]
        tc, ta, tgt = progress_race(c["wall_s"], c["test_rmse"], a["wall_s"],
                                    a["test_rmse"], lower=True)
        r, rs = ratio_str(ta, tc)
        rows.append(("CCD++ (STRADS MF) reaches a test RMSE faster than ALS (GraphLab)",
                     "EuroSys 2016 MF figure (not checked)",
                     f"time to test RMSE {tgt:.4f}: ALS {fmt(ta)} s vs CCD++ {fmt(tc)} s",
                     "n/a" if r is None else ("yes" if r > 1 else "no"), rs))
        lm = M["libmf"] or [(0, float("nan"), float("inf"))]
        lt = first_time(np.array([x[1] for x in lm]), np.array([x[2] for x in lm]), tgt)
        r, rs = ratio_str(lt, tc, lt is not None)
        rows.append(("(issue's comparison, not a paper claim) CCD++ against LIBMF SGD, "
                     "one core each", "-", f"time to test RMSE {tgt:.4f}: LIBMF "
                     f"{fmt(lt)} s (best {min(x[2] for x in lm):.4f}) vs CCD++ {fmt(tc)} s",
                     "n/a" if r is None else ("yes" if r > 1 else "no"), rs))
    if "scaling" in R:
        S = R["scaling"]
        tt, ws = S["tt"], S["workers"]
        base = tt[ws[0]]
        parts = ", ".join(f"{w}: {fmt(tt[w])} s" for w in ws)
        best_w = max((w for w in ws if w <= max(S["cores"], 1)), default=ws[0])
        sp = base / tt[best_w] if base and tt.get(best_w) else None
        rows.append(("close to linear scaling as machines are added",
                     "EuroSys 2016 scalability figures (not checked)",
                     f"time to target by workers: {parts}; {S['cores']} cores here, so "
                     f"past {S['cores']} workers no speed-up is possible",
                     "n/a" if sp is None else ("yes" if sp > 1 else "no"),
                     "n/a" if sp is None else f"speed-up {sp:.2f}x at {best_w} workers "
                     f"(linear: {best_w / ws[0]:.0f}x)"))
    if "staleness" in R:
        S = R["staleness"]
        tt = S["tt"]
        parts = ", ".join(f"s={s}: {fmt(t)} s" for s, t in tt.items())
        ok = [s for s, t in tt.items() if t is not None]
        if 0 in ok and len(ok) > 1:
            best = min((s for s in ok if s > 0), key=lambda s: tt[s])
            r = tt[0] / tt[best]
            same, rs = ("yes" if r > 1 else "no"), \
                f"t(s=0)/t(s={best}, the fastest s > 0) = {r:.2f}x"
        else:
            same, rs = "n/a", "n/a"
        rows.append(("bounded staleness (pipelining) keeps convergence and raises "
                     "throughput", "EuroSys 2016 pipelining figure (not checked)",
                     f"time to suboptimality {S['target']:.2g}: {parts} (stops: "
                     + ", ".join(f"s={k}: {v}" for k, v in S["stop"].items()) + "; "
                     "updates/s: " + ", ".join(f"s={k}: {v:.0f}" for k, v in S["ups"].items())
                     + ")", same, rs))
    return rows


def write_report(ctx, cmdline, exps):
    m = machine()
    L = []
    w = L.append
    w("# Reproducing the STRADS papers' comparisons\n")
    w(f"Command: `{cmdline}` (size: {ctx.size}); total wall time {ctx.elapsed():.0f} s.\n")
    w("Papers: Lee et al., *On Model Parallelization and Scheduling Strategies for "
      "Distributed Machine Learning*, NIPS 2014; Kim et al., *STRADS: A Distributed "
      "Framework for Scheduled Model Parallel Machine Learning*, EuroSys 2016.\n")
    w("What was checked against the papers' text: only their abstracts (the full texts "
      "and figures were not available here). The EuroSys 2016 abstract benchmarks four "
      "SchMP programs (LDA, matrix factorization, Lasso and sparse logistic regression) "
      "and gives two numbers: SchMP LDA and SchMP Lasso reach 10x and 5x faster "
      "convergence than recent, well-established baselines. The NIPS 2014 abstract says "
      "STRADS improves the memory efficiency of distributed ML and compares it with "
      "popular implementations for topic modelling, matrix factorization and Lasso, "
      "without numbers. Every other claim in the table is stated as issue 13 gives it "
      "(marked **not checked**); no figure of either paper was checked, and no paper "
      "number other than 10x and 5x is used.\n")
    w("## Machine\n")
    w(f"- {m['usable_cores']} usable cores (os.cpu_count() = {m['cpu_count']}), "
      f"{fmt(m['mem_total_gib'])} GiB memory ({fmt(m['mem_available_gib'])} GiB available "
      f"at the end; /proc/meminfo), {m['processor']}, {m['platform']}, Python "
      f"{m['python']}; load average at the end {m['loadavg']}.\n")
    w("- The papers ran on clusters (tens to hundreds of machines). Here every worker is "
      "a process (or a thread) on this one machine: with "
      f"{m['usable_cores']} cores, nothing past {m['usable_cores']} workers can run "
      "faster, and the papers' scale (both data size and machine count) cannot be "
      "reproduced; what can be checked is the *direction* of each claim at small scale.\n")
    w("## How the runs were timed\n")
    if ctx.size == "tiny":
        w("- **--tiny (a smoke test, not a measurement)**: the warm-up ran one run per "
          "app only, so a time below may include JIT compilation where numba's on-disk "
          "cache was cold.\n")
    w("- A warm-up ran first: a tiny run of every app and schedule used (in one process "
      "and under mpiexec), so numba's on-disk cache held every kernel. **Times exclude "
      "JIT compilation for every method** (loading a cached kernel, milliseconds, is "
      "included). The strads times are the engine's loop time (`wall_s` in trace.csv: "
      "from the first round; process start, data generation and loading excluded); "
      "LIBMF's time is its `fit()` call.\n")
    w("- Within a figure: the same data, the same stopping rule (Lasso, logreg: "
      "duality gap <= "
      "tol x objective or the same time limit; LDA: the same number of sweeps; MF: the "
      "same number of outer iterations / epochs) and the same number of cores for every "
      "method.\n")
    for app in ("lasso", "logreg"):
        ref = ctx.cache.get(f"{app}_ref")
        if ref:
            w(f"- {APP_NAME[app][0].upper() + APP_NAME[app][1:]} reference optimum f* = "
              f"{ref['f']:.12g}: the working-set schedule (the fastest here) in one "
              f"process to a duality gap of 1e-11 x objective (stop: {ref['stop']}, gap "
              f"{fmt(ref['gap'])}): `{ref['cmd']}`. f* is the least of that and every "
              "objective logged.\n")
    w("## Data\n")
    S = ctx.S
    if "lasso" in exps or "staleness" in exps:
        w(f"- Lasso: {lasso_shape(ctx)}.\n")
    if "logreg" in exps:
        w(f"- Sparse logistic regression: {sparse_shape(ctx, 'logreg')}.\n")
    if "lda" in exps:
        w(f"- LDA convergence: {lda_shape(ctx, S['lda'])}, {S['lda']['sweeps']} sweeps. "
          f"LDA memory: {lda_shape(ctx, S['lda_mem'])}.\n")
    if "mf" in exps:
        sh = ctx.results.get("mf_shape")
        src = f"`{ctx.args.mf_data}`" if ctx.args.mf_data else (
            f"built-in power-law ratings ({S['mf']['n_users']} users x "
            f"{S['mf']['n_items']} items, {S['mf']['n_ratings']} ratings, true rank 8)")
        w(f"- MF: {src}; 10% held out (seeded, ratings of unseen users/items dropped)"
          + (f": {sh[0]} x {sh[1]}, {sh[2]} training and {sh[3]} held-out ratings" if sh
             else "") + f"; rank {S['mf']['rank']}, lambda {S['mf']['lam']} per rating "
          "(count-weighted, which is what LIBMF's SGD minimises); strads subtracts the "
          "global mean (`--bias mean`), LIBMF is fitted to the centred ratings alike.\n")
    if "scaling" in exps:
        w(f"- Scalability: {lda_shape(ctx, S['scaling'])}, {S['scaling']['sweeps']} "
          "sweeps.\n")
    w("## Claims\n")
    w("| claim | paper's figure | this run measured | same direction | ratio |")
    w("|---|---|---|---|---|")
    for row in claims(ctx):
        w("| " + " | ".join(str(c).replace("|", "/") for c in row) + " |")
    w("")
    w("Ratios are the baseline's time over the STRADS method's time to the same target "
      "(the worse of the two methods' best values, so both reach it); '>= (lower bound)' "
      "where the baseline stopped at the time limit instead of converging.\n")
    if ctx.failed:
        w("## Experiments that failed\n")
        for k, v in ctx.failed.items():
            w(f"- {k}: {v}")
        w("")
    notes = []
    if "scaling" in ctx.results:
        notes.append(f"Scalability: with {m['usable_cores']} cores, workers beyond "
                     f"{m['usable_cores']} share cores (and the scheduler rank shares one "
                     "too), so the curve cannot stay linear past that; the papers' "
                     "'close to linear' was measured on a cluster and cannot be "
                     "reproduced here.")
    if "lda" in ctx.results:
        A = ctx.results["lda"]
        notes.append("LDA memory: each rank's peak RSS includes the Python + numba + MPI "
                     f"baseline (the scheduler rank, which holds no word-topic table, "
                     f"peaked at {A['mem_base']:.0f} MB in these runs); only the part "
                     "above it is the model and the worker's documents. The data-parallel "
                     "baseline holds the whole word-topic table on every worker (and, "
                     "while it samples, a copy of it to take the sweep's changes); the "
                     "model-parallel schedule a 1/W slice in hand. The papers' claim is "
                     "about machines; here the workers are processes on one machine, "
                     "which is enough for memory per process.")
    if "staleness" in ctx.results:
        notes.append("Staleness on one machine: there is little network latency to hide, "
                     "so pipelining can only gain where the scheduler and the workers "
                     "overlap on different cores.")
    for v in ctx.notes.values():
        notes.extend(v)
    if notes:
        w("## What cannot reproduce here, and why\n")
        for n in notes:
            w(f"- {n}")
        w("")
    w("## Figures\n")
    for exp in EXPERIMENTS:
        for fname, cap in ctx.figures.get(exp, []):
            w(f"![{fname}]({fname})\n")
            w(f"*{fname}*: {cap}\n")
    w("## Commands\n")
    w("Every run's folder `DIR/runs/<experiment>/<run>/` holds `command.txt`, "
      "`summary.json`, `trace.csv` and `stderr.txt`.\n")
    for exp in ("reference",) + EXPERIMENTS:
        if ctx.commands.get(exp):
            w(f"- {exp}:")
            for c in ctx.commands[exp]:
                w(f"  - `{c}`")
    w("")
    (ctx.out / "REPORT.md").write_text("\n".join(L) + "\n")


def main(argv=None):
    ap = argparse.ArgumentParser(
        prog="python -m strads.reproduce",
        description="Reproduce the STRADS papers' comparisons (Lasso, sparse "
                    "logistic regression, LDA, MF, scalability, staleness) with this project's CLIs; write figures and "
                    "DIR/REPORT.md.")
    ap.add_argument("--out", required=True, help="output folder")
    ap.add_argument("--quick", action="store_true",
                    help="smaller sizes: under 20 minutes on a 2-core machine")
    ap.add_argument("--tiny", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--only", default=",".join(EXPERIMENTS),
                    help=f"comma-separated experiments of {','.join(EXPERIMENTS)}")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--lasso-data", help="Lasso data file (LIBSVM, .mtx with "
                    "--lasso-target, .npz) instead of the built-in problem")
    ap.add_argument("--lasso-target", help="y for a .mtx --lasso-data")
    ap.add_argument("--logreg-data", help="sparse logistic regression data file (LIBSVM, "
                    ".mtx with --logreg-target, .npz) instead of the built-in problem")
    ap.add_argument("--logreg-target", help="labels for a .mtx --logreg-data")
    ap.add_argument("--mf-data", help="ratings file ('user item rating' lines) instead of "
                    "the built-in problem; 10%% is held out")
    ap.add_argument("--lda-data", help="corpus (UCI docword, .ldac, text) instead of the "
                    "built-in one")
    a = ap.parse_args(argv)
    exps = [e.strip() for e in a.only.split(",") if e.strip()]
    bad = [e for e in exps if e not in EXPERIMENTS]
    if bad:
        ap.error(f"--only: unknown {', '.join(bad)} (choose from {', '.join(EXPERIMENTS)})")
    plt_mod()  # fail early, with one line, when matplotlib is missing
    for p in (a.lasso_data, a.lasso_target, a.logreg_data, a.logreg_target, a.mf_data,
              a.lda_data):
        if p and not os.path.exists(p):
            ap.error(f"{p}: no such file")
    ctx = Ctx(a)
    ctx.out.mkdir(parents=True, exist_ok=True)
    cmdline = shlex.join(["python", "-m", "strads.reproduce", *(argv if argv is not None
                                                               else sys.argv[1:])])
    ctx.say(f"strads.reproduce: size {ctx.size}, experiments {', '.join(exps)}, out "
            f"{ctx.out}")
    ctx.say("warm-up: tiny runs so that numba's cache is warm for every method")
    warm_up(ctx, exps)
    fns = dict(lasso=exp_lasso, logreg=exp_logreg, lda=exp_lda, mf=exp_mf, scaling=exp_scaling,
               staleness=exp_staleness)
    for e in exps:
        t = time.perf_counter()
        ctx.say(f"=== experiment {e}")
        try:
            fns[e](ctx)
        except (RuntimeError, subprocess.TimeoutExpired, OSError, ValueError) as err:
            ctx.failed[e] = str(err)
            ctx.say(f"experiment {e} FAILED: {err}")
        ctx.say(f"=== experiment {e} done in {time.perf_counter() - t:.1f}s")
    write_report(ctx, cmdline, exps)
    ctx.say(f"wrote {ctx.out / 'REPORT.md'} (total {ctx.elapsed():.0f}s)")
    return 1 if ctx.failed else 0


if __name__ == "__main__":
    sys.exit(main())
