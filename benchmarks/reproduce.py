"""The STRADS papers' comparisons (Lee et al., NIPS 2014; Kim et al., EuroSys 2016), run
with this project's CLIs, as figures and a report (method: docs/benchmarks.md).
"""
import argparse
import dataclasses
import importlib.util
import json
import os
import platform
import shlex
import shutil
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

from _common import MPIEXEC, child_env, cli, libmf_run, read_trace
from strads._wait import _cores

EXPERIMENTS = ("lasso", "logreg", "lda", "mf", "scaling", "staleness")
SIZE_NAMES = ("tiny", "quick", "full")


def sizes(size):
    """Shapes follow the papers' data sets, scaled down: Lasso p >> n (the papers' Lasso
    data are wide), LDA a bag-of-words corpus with a large vocabulary (NYTimes-like), MF
    a users x items rating matrix with power-law degrees (Netflix-like)."""
    k = SIZE_NAMES.index(size)

    def pick(*v):  # (tiny, quick, full)
        return v[k]

    def sparse(n_features, density, n_informative, time_limit):  # Lasso and logreg
        return dict(n_samples=pick(200, 2000, 5000), n_features=n_features, density=density,
                    n_informative=n_informative, corr=0.5, lambda_ratio=pick(0.1, 0.05, 0.05),
                    block=pick(32, 256, 256), tol=pick(1e-5, 1e-6, 1e-6), time_limit=time_limit)
    return dict(
        workers=2, mpi=k > 0, log_interval=pick(0, 0.02, 0.05),
        lasso=sparse(pick(1000, 50000, 200000), pick(0.02, 0.01, 0.002), pick(20, 100, 500),
                     pick(0.3, 40, 240)),
        logreg=sparse(pick(1000, 20000, 100000), pick(0.02, 0.01, 0.005),
                      pick(20, 100, 300), pick(0.3, 30, 150)),
        lda=dict(n_docs=pick(200, 15000, 30000), n_words=pick(500, 10000, 50000),
                 doc_length=pick(40, 100, 150), topics=pick(10, 50, 100),
                 sweeps=pick(6, 40, 60)),
        # memory: a large word-topic table (V x K int32: 80 MB at --quick) against the
        # corpus; the generating model has few topics (--true-topics) so that drawing
        # the corpus does not set each worker's peak
        lda_mem=dict(n_docs=pick(100, 2000, 10000), n_words=pick(3000, 100000, 200000),
                     doc_length=pick(30, 50, 50), topics=pick(20, 200, 200),
                     true_topics=5, sweeps=1,
                     workers=pick([1, 2], [1, 2, 4], [1, 2, 4, 8])),
        mf=dict(n_users=pick(300, 50000, 100000), n_items=pick(150, 10000, 15000),
                n_ratings=pick(6000, 2000000, 5000000), rank=pick(8, 16, 32), lam=0.05,
                iters=pick(4, 15, 20)),
        scaling=dict(n_docs=pick(300, 30000, 30000), n_words=pick(500, 10000, 30000),
                     doc_length=pick(40, 100, 150), topics=pick(10, 50, 100),
                     sweeps=pick(4, 20, 15), workers=pick([1, 2], [1, 2, 4, 8], [1, 2, 4, 8])),
        staleness=pick([0, 1], [0, 1, 2, 4], [0, 1, 2, 4]))


APP_NAME = {"lasso": "Lasso", "logreg": "Sparse logistic regression"}
NEED_MPL = "matplotlib is needed for the figures: pip install -e .[reproduce]"


def machine():
    """(usable cores, one line describing this machine)."""
    cores = _cores()
    gib = os.sysconf("SC_PAGE_SIZE") / 2 ** 30
    return cores, (
        f"{cores} usable cores (os.cpu_count() = {os.cpu_count()}), "
        f"{fmt(os.sysconf('SC_PHYS_PAGES') * gib)} GiB memory "
        f"({fmt(os.sysconf('SC_AVPHYS_PAGES') * gib)} GiB free at the end), "
        f"{platform.processor() or platform.machine()}, {platform.platform()}, Python "
        f"{platform.python_version()}; load average at the end "
        f"{os.getloadavg() if hasattr(os, 'getloadavg') else None}")


class Ctx:
    def __init__(self, args):
        self.args = args
        self.out = Path(args.out)
        self.size = "tiny" if args.tiny else "quick" if args.quick else "full"
        self.S = sizes(self.size)
        self.t0 = time.perf_counter()
        self.commands = {}   # experiment -> [command strings]
        self.results = {}    # experiment -> dict of measured facts
        self.figures = {}    # experiment -> [(file, caption)]
        self.failed = {}     # experiment -> message
        self.notes = {}      # experiment -> [strings]
        self.cache = {}

    def elapsed(self):
        return time.perf_counter() - self.t0

    def note(self, exp, text):  # for "What cannot reproduce here, and why"
        self.notes.setdefault(exp, []).append(text)

    def say(self, msg):
        print(f"[{self.elapsed():7.1f}s] {msg}", file=sys.stderr, flush=True)

    def show(self, cmd):
        """A command as a reader can run it: python, mpiexec, paths relative to DIR."""
        return shlex.join(map(str, cmd)).replace(sys.executable, "python").replace(
            MPIEXEC, "mpiexec").replace(str(self.out) + os.sep, "DIR/")

    def cli(self, exp, name, app, flags, workers, mpi):
        """Run ``python -m strads.apps.<app>`` with ``flags`` and ``--out`` its run folder,
        one process (workers threads) or ``mpiexec -n workers+1``."""
        d = self.out / "runs" / exp / name
        shutil.rmtree(d, ignore_errors=True)
        d.mkdir(parents=True)
        cmd = cli([f"strads.apps.{app}", *flags, *([] if mpi else ["--workers", workers])],
                  d, mpi and workers + 1)
        shown = self.show(cmd)
        (d / "command.txt").write_text(shown + "\n")
        self.commands.setdefault(exp, []).append(shown)
        self.say(f"{exp}: run {name}: {shown}")
        t = time.perf_counter()
        p = subprocess.run(cmd, capture_output=True, text=True, env=child_env(), timeout=7200)
        (d / "stderr.txt").write_text(p.stderr)
        diverged = p.returncode == 3 and (d / "summary.json").exists() and json.loads(
            (d / "summary.json").read_text()).get("stop_reason") == "diverged"
        if p.returncode != 0 and not diverged:  # a divergence is a result, not a failure
            tail = "\n".join(p.stderr.strip().splitlines()[-5:])
            raise RuntimeError(f"{exp}/{name} exited {p.returncode}: {tail}")
        summary = json.loads((d / "summary.json").read_text())
        self.say(f"{exp}: run {name} done in {time.perf_counter() - t:.1f}s "
                 f"(loop {summary['wall_s']:.2f}s, stop: {summary['stop_reason']})")
        return dict(cmd=shown, summary=summary, trace=read_trace(d / "trace.csv"))


# ---------------------------------------------------------------- helpers

def first_time(t, v, target, lower=True):
    """First t where v reaches target (v <= target if lower, else v >= target)."""
    i = np.flatnonzero((v <= target) if lower else (v >= target))
    return float(t[i[0]]) if i.size else None


def fmt(x, d=3):
    if x is None:
        return "n/a"
    if isinstance(x, float) and (abs(x) >= 1e4 or (0 < abs(x) < 1e-2)):
        return f"{x:.{d - 1}e}"
    return f"{x:.{d}g}" if isinstance(x, float) else str(x)


def claim(what, paper, measured, slow, fast, reached=True, label="{:.2f}x"):
    """A claims row: the baseline's time (or sweeps) ``slow`` over the STRADS method's."""
    if slow is None or fast is None or fast <= 0:
        return what, paper, measured, "n/a", "n/a"
    r = slow / fast
    return (what, paper, measured, "yes" if r > 1 else "no",
            label.format(r) if reached else f">= {label.format(r)} (lower bound)")


def plt_mod():
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        sys.exit(NEED_MPL)
    return plt


def figure(ctx, exp, fname, title, xlabel, ylabel, lines, caption, xlog=None, ylog=False,
           ticks=None, extra=None):
    """Plot ``lines`` ((x, y, label, style) each), then ``extra(ax)``, into ``fname``;
    ``xlog``: the base of a log x axis; ``ticks``: worker counts."""
    ax = plt_mod().subplots(figsize=(7, 4.5))[1]
    ax.set(title=title, xlabel=xlabel, ylabel=ylabel)
    if xlog:
        ax.set_xscale("log", base=xlog)
    if ylog:
        ax.set_yscale("log")
    if ticks:
        ax.set_xticks(ticks)
        ax.set_xticklabels([str(w) for w in ticks])
    for x, y, label, style in lines:
        ax.plot(x, y, style, label=label, lw=1.4)
    if extra:
        extra(ax)
    ax.legend(fontsize=8)
    ax.grid(True, which="both", alpha=0.3)
    ax.figure.tight_layout()
    ax.figure.savefig(ctx.out / fname, dpi=90)
    plt_mod().close(ax.figure)
    ctx.figures.setdefault(exp, []).append((fname, caption))
    ctx.say(f"{exp}: wrote {ctx.out / fname}")


# ---------------------------------------------------------------- warm-up

def warm_up(ctx, exps):
    """Tiny runs of every app and schedule to be used, in one process and under mpiexec,
    so that numba's on-disk cache holds every kernel before anything is timed."""
    jobs = []  # (app, name, flags, under mpiexec)
    for app in ("lasso", "logreg"):
        if app in exps or (app == "lasso" and "staleness" in exps):
            base = ["--n-samples", 100, "--n-features", 300, "--max-rounds", 200]
            jobs += [(app, s, base + ["--schedule", s], False) for s, _, _ in SPARSE_RUNS
                     if s != "priority-nodep"]
            if ctx.S["mpi"]:
                jobs += [(app, "priority-mpi", base + ["--schedule", "priority",
                                                       "--staleness", 1], True),
                         (app, "working-set-mpi", base, True)]
    if "lda" in exps or "scaling" in exps:
        base = ["--n-docs", 60, "--n-words", 100, "--sweeps", 2, "--top-words", 0]
        jobs += [("lda", s + m, base + ["--schedule", s], bool(m)) for s in ("model", "data")
                 for m in ("", "-mpi")]
    if "mf" in exps:
        base = ["--n-users", 100, "--n-items", 50, "--n-ratings", 1500, "--iters", 2]
        jobs += [("mf", s, base + ["--schedule", s], False) for s in ("ccd", "als")]
        files = write_ratings(ctx.out / "runs" / "warmup", mf_problem(dict(
            n_users=100, n_items=50, n_ratings=1500), None, 0))
        jobs.append(("mf", "file", files + ["--iters", 2], False))
    for app, name, flags, mpi in jobs:
        ctx.cli("warmup", f"{app}-{name}", app, flags + ["--log-interval", 0], workers=2,
                mpi=mpi)
    ctx.commands.pop("warmup", None)


# ---------------------------------------------------------------- Lasso, logreg

def sparse_data_flags(ctx, app):
    """Data flags of the Lasso or the sparse logistic regression (the same CLI shape)."""
    a, L = ctx.args, ctx.S[app]
    data, target = getattr(a, f"{app}_data"), getattr(a, f"{app}_target")
    if data:
        f = ["--data", data] + (["--target", target] if target else [])
    else:
        f = ["--n-samples", L["n_samples"], "--n-features", L["n_features"], "--density",
             L["density"], "--n-informative", L["n_informative"], "--corr", L["corr"]]
    return f + ["--lambda-ratio", L["lambda_ratio"], "--seed", a.seed]


def sparse_runs(ctx, exp, app, runs):
    """f* and ``name -> run summary`` for ``runs`` (name -> extra flags) on one problem.
    f*: the least objective seen, and that of the working-set schedule (the fastest here)
    in one process to a duality gap of 1e-11 x objective."""
    L, key = ctx.S[app], f"{app}_ref"
    if key not in ctx.cache:
        r = ctx.cli("reference", f"{app}-working-set-tol1e-11", app,
                    sparse_data_flags(ctx, app) + [
                        "--schedule", "working-set", "--tol", 1e-11, "--time-limit",
                        2 * L["time_limit"], "--max-rounds", 10 ** 7, "--log-interval", 1],
                    workers=1, mpi=False)
        s = r["summary"]
        ctx.cache[key] = dict(f=s["objective"], gap=s.get("duality_gap"),
                              stop=s["stop_reason"], cmd=r["cmd"])
    common = sparse_data_flags(ctx, app) + [
        "--block", L["block"], "--tol", L["tol"], "--time-limit", L["time_limit"],
        "--max-rounds", 10 ** 8, "--log-interval", ctx.S["log_interval"]]
    runs = {name: ctx.cli(exp, name, app, common + flags, workers=ctx.S["workers"],
                          mpi=ctx.S["mpi"]) for name, flags in runs.items()}
    fstar = min([ctx.cache[key]["f"]] + [float(np.min(r["trace"]["objective"]))
                                         for r in runs.values()])
    res = {}
    for name, r in runs.items():
        tr, s = r["trace"], r["summary"]
        res[name] = dict(best=float(np.nanmin(subopt(tr, fstar))) if np.any(
            tr["objective"] > fstar) else 0.0, stop=s["stop_reason"], trace=tr,
            ups=s["updates_per_s"])
    return fstar, res


def subopt(trace, fstar):
    s = (trace["objective"] - fstar) / abs(fstar)
    return np.where(s > 0, s, np.nan)


def plot_subopt(ctx, exp, res, labels, fstar, title, xkey="wall_s", xlabel="wall time (s)",
                fname=None):
    # on a log x axis (updates) the first logged rows (0 updates) are left out
    figure(ctx, exp, fname or f"{exp}.png", title, xlabel,
           "relative suboptimality (f - f*) / f*",
           [(res[n]["trace"][xkey], subopt(res[n]["trace"], fstar), label, "-")
            for n, label in labels.items()],
           f"{title}: suboptimality against {xlabel}; f* = {fstar:.10g}.",
           xlog=xkey == "updates" and 10, ylog=True)


def race(runs, names, fstar):
    """Time for each named run to reach the worse of their best suboptimalities (x2), so
    that all reach it; a run that diverged does not set the target (its time: None)."""
    bests = [runs[n]["best"] for n in names if runs[n]["stop"] != "diverged"] or [
        runs[n]["best"] for n in names]
    target = 2 * max(bests + [1e-12])
    return target, {n: first_time(runs[n]["trace"]["wall_s"],
                                  np.nan_to_num(subopt(runs[n]["trace"], fstar)), target)
                    for n in names}


SPARSE_RUNS = (
    ("working-set", "working-set (this project's default: priority blocks solved exactly)",
     ["--schedule", "working-set"]),
    ("priority", "STRADS priority + dependency check (rho 0.1)",
     ["--schedule", "priority", "--rho", 0.1]),
    ("priority-nodep", "priority, no dependency check (rho 1)",
     ["--schedule", "priority", "--rho", 1]),
    ("random", "random (Shotgun)", ["--schedule", "random"]),
    ("round-robin", "round-robin (static)", ["--schedule", "round-robin"]),
)


def exp_sparse(ctx, app):
    """The schedules against each other on one problem (Lasso or sparse logistic
    regression): suboptimality against time and against coordinate updates."""
    fstar, res = sparse_runs(ctx, app, app, {n: f for n, _, f in SPARSE_RUNS})
    for xkey, xlabel, what in (("wall_s", "wall time (s)", "time"),
                               ("updates", "coordinate updates", "updates")):
        plot_subopt(ctx, app, res, {n: label for n, label, _ in SPARSE_RUNS}, fstar,
                    f"{APP_NAME[app]}, {ctx.S['workers']} workers: objective vs {what}",
                    xkey, xlabel, f"{app}_{what}.png")
    ctx.results[app] = {"fstar": fstar, "runs": res}


def exp_staleness(ctx):
    stal = ctx.S["staleness"]
    fstar, res = sparse_runs(ctx, "staleness", "lasso", {
        f"s{s}": ["--schedule", "priority", "--staleness", s] for s in stal})
    plot_subopt(ctx, "staleness", res, {f"s{s}": f"staleness {s}" for s in stal}, fstar,
                f"Lasso STRADS priority, {ctx.S['workers']} workers: staleness (pipeline "
                "depth)")
    ctx.note("staleness", "Staleness on one machine: there is little network latency to "
             "hide, so pipelining can only gain where the scheduler and the workers overlap "
             "on different cores.")
    target, tt = race(res, list(res), fstar)
    ctx.results["staleness"] = dict(tt={s: tt[f"s{s}"] for s in stal}, target=target,
                                    stop={s: res[f"s{s}"]["stop"] for s in stal},
                                    ups={s: res[f"s{s}"]["ups"] for s in stal})


# ---------------------------------------------------------------- LDA

def lda_data_flags(ctx, D):
    a = ctx.args
    if a.lda_data:
        return ["--data", a.lda_data, "--topics", D["topics"], "--seed", a.seed]
    return ["--n-docs", D["n_docs"], "--n-words", D["n_words"], "--doc-length",
            D["doc_length"], "--topics", D["topics"], "--seed", a.seed] + (
        ["--true-topics", D["true_topics"]] if D.get("true_topics") else [])


def lda_run(ctx, exp, name, D, sched, workers, mpi, log_interval=None):
    return ctx.cli(exp, name, "lda", lda_data_flags(ctx, D) + [
        "--schedule", sched, "--sweeps", D["sweeps"], "--top-words", 0, "--log-interval",
        ctx.S["log_interval"] if log_interval is None else log_interval],
        workers=workers, mpi=mpi)


LDA_LABEL = {"model": "model-parallel (STRADS vocabulary rotation)",
             "data": "data-parallel (YahooLDA-style)"}


def exp_lda(ctx):
    W, M = ctx.S["workers"], ctx.S["lda_mem"]
    runs = {s: lda_run(ctx, "lda", s, ctx.S["lda"], s, W, ctx.S["mpi"]) for s in LDA_LABEL}
    for xkey, xlabel, what in (("wall_s", "wall time (s)", "time"),
                               ("sweeps", "sweeps over the corpus", "sweeps")):
        figure(ctx, "lda", f"lda_{what}.png", f"LDA, {W} workers: log-likelihood vs {what}",
               xlabel, "log-likelihood (nats)", [(r["trace"][xkey], r["trace"]["loglik"],
                                                  LDA_LABEL[s], "-") for s, r in runs.items()],
               f"LDA log-likelihood against {xlabel}.")
    # memory per worker as workers are added; the scheduler rank's peak RSS is that of
    # a rank that holds no word-topic table
    mem, base = {s: [] for s in LDA_LABEL}, []
    for w in M["workers"]:
        for sched in LDA_LABEL:
            r = lda_run(ctx, "lda", f"mem-{sched}-w{w}", M, sched, w, True, log_interval=1)
            traffic = r["summary"]["traffic"]
            mem[sched].append(float(np.mean([t["peak_rss_mb"] for t in traffic
                                             if t["rank"] >= 1])))
            base += [t["peak_rss_mb"] for t in traffic if t["rank"] == 0]
    b = float(np.median(base))

    def extra(ax):
        ax.axhline(b, color="k", ls=":", alpha=0.6,
                   label=f"scheduler rank (no word-topic table): {b:.0f} MB")
        if not ctx.args.lda_data:
            ax.text(0.02, 0.04, f"one word-topic table (V x K int32): "
                    f"{M['n_words'] * M['topics'] * 4 / 1e6:.0f} MB", transform=ax.transAxes)
        ax.set_ylim(bottom=0)
    figure(ctx, "lda", "lda_memory.png", "LDA: memory per worker as workers are added",
           "workers (MPI ranks besides the scheduler)", "peak RSS per worker (MB)",
           [(M["workers"], mem[s], LDA_LABEL[s], "o-") for s in LDA_LABEL],
           f"Mean peak resident memory of the worker ranks (summary.json traffic "
           f"peak_rss_mb, {M['sweeps']} sweep; each includes the Python + numba + MPI "
           f"baseline of a rank; the dotted line is the scheduler rank's peak, median over "
           f"these runs).", xlog=2, ticks=M["workers"], extra=extra)
    ctx.results["lda"] = dict(runs={k: r["trace"] for k, r in runs.items()}, mem=mem,
                              mem_workers=M["workers"], mem_base=b)
    ctx.note("lda", f"LDA memory: each rank's peak RSS includes the Python + numba + MPI "
             f"baseline (the scheduler rank, which holds no word-topic table, peaked at "
             f"{b:.0f} MB in these runs); only the part above it is the model and the "
             "worker's documents. The data-parallel baseline holds the whole word-topic "
             "table on every worker (and, while it samples, a copy of it to take the "
             "sweep's changes); the model-parallel schedule a 1/W slice in hand. The "
             "papers' claim is about machines; here the workers are processes on one "
             "machine, which is enough for memory per process.")


def exp_scaling(ctx):
    D = ctx.S["scaling"]
    ws = D["workers"]
    runs = {w: lda_run(ctx, "scaling", f"w{w}", D, "model", w, w > 1)["trace"] for w in ws}
    tt, target = progress_race(runs, "wall_s", "loglik", lower=False)
    cores = machine()[0]
    lines = [(ws, [tt[w] for w in ws], "model-parallel LDA: time to target", "o-")]
    if tt[ws[0]]:
        lines.append((ws, [tt[ws[0]] * ws[0] / w for w in ws], "linear scaling", "k:"))

    def extra(ax):
        ax.axvline(cores, color="r", alpha=0.4, ls="--")
        ax.text(0.02, 0.04, f"this machine: {cores} usable cores ({os.cpu_count()} CPUs)",
                transform=ax.transAxes, color="r")
    figure(ctx, "scaling", "scaling.png", "Scalability: time to a fixed objective vs workers",
           "workers (1: one process; W > 1: mpiexec -n W+1)",
           f"seconds to log-likelihood {target:.6g}", lines, f"Time for model-parallel LDA "
           f"to reach log-likelihood {target:.6g} (95% of the way from the start to the "
           "worst run's best).", xlog=2, ylog=True, ticks=ws, extra=extra)
    ctx.results["scaling"] = dict(tt=tt, target=target, cores=cores, workers=ws)
    ctx.note("scaling", f"Scalability: with {cores} cores, workers beyond {cores} share "
             "cores (and the scheduler rank shares one too), so the curve cannot stay "
             "linear past that; the papers' 'close to linear' was measured on a cluster "
             "and cannot be reproduced here.")


def progress_race(traces, x, y, lower):
    """The ``x`` at which each trace's ``y`` gets 95% of the way from their common start
    to the worst of their best values (every one reaches it): ({name: x}, target)."""
    vs = [t[y] for t in traces.values()]
    start = max(v[0] for v in vs) if lower else min(v[0] for v in vs)
    worst = max(np.min(v) for v in vs) if lower else min(np.max(v) for v in vs)
    target = start + 0.95 * (worst - start)
    return {k: first_time(t[x], t[y], target, lower) for k, t in traces.items()}, target


# ---------------------------------------------------------------- MF

def mf_problem(F, path, seed):
    """The package's reader (or built-in generator) and its 10% held-out split."""
    from strads.apps import mf
    t = mf.read_ratings(path) if path else mf.make_problem(
        F["n_users"], F["n_items"], F["n_ratings"], rank=8, noise=0.5, alpha=0.7, seed=seed)
    return mf.prepare(t, test_fraction=0.1, seed=seed, duplicates="last")


def write_ratings(d, p):
    """The split as two tab-separated files (1-based compact ids); their CLI flags."""
    d.mkdir(parents=True, exist_ok=True)
    for name, cols in (("train.tsv", (p.users, p.items, p.ratings)),
                       ("test.tsv", (p.test_users, p.test_items, p.test_ratings))):
        np.savetxt(d / name, np.column_stack([cols[0] + 1, cols[1] + 1, cols[2]]),
                   fmt=["%d", "%d", "%.6f"], delimiter="\t")
    return ["--data", d / "train.tsv", "--test-data", d / "test.tsv"]


def exp_mf(ctx):
    F, a = ctx.S["mf"], ctx.args
    d = ctx.out / "runs" / "mf"
    ctx.say("mf: writing the train / held-out files")
    p = mf_problem(F, a.mf_data, a.seed)
    files = write_ratings(d, p)
    ctx.results["mf_shape"] = (len(p.user_ids), len(p.item_ids), len(p.ratings),
                               len(p.test_ratings))
    runs = {sched: ctx.cli("mf", sched, "mf", files + [
        "--rank", F["rank"], "--lambda", F["lam"], "--schedule", sched, "--bias", "mean",
        "--iters", F["iters"], "--tol", 0, "--early-stop", 0,  # a curve over --iters
        "--seed", a.seed, "--log-interval", ctx.S["log_interval"]], workers=1, mpi=False)
        for sched in ("ccd", "als")}
    pts = sorted({max(1, round(F["iters"] * k / 6)) for k in range(1, 7)})
    t, lm = time.perf_counter(), []
    if importlib.util.find_spec("libmf") is None:
        ctx.note("mf", "LIBMF is not installed (pip install libmf): its line is missing.")
        ctx.say("mf: libmf is not installed (pip install libmf): left out")
    else:
        ctx.say("mf: run libmf (pip libmf, 1 thread)")
        mu = float(p.ratings.mean())  # centred ratings, as strads' --bias mean fits them
        centred = dataclasses.replace(p, ratings=p.ratings - mu, test_ratings=p.test_ratings - mu)
        lm = [(it, *libmf_run(centred, F["rank"], F["lam"], it)) for it in pts]
    ld = d / "libmf"
    ld.mkdir(exist_ok=True)
    (ld / "trace.csv").write_text("iterations,wall_s,test_rmse\n" + "".join(
        ",".join(map(str, row)) + "\n" for row in lm))
    (ld / "summary.json").write_text(json.dumps(dict(
        app="libmf", threads=1, rank=F["rank"], lambda_=F["lam"], eta=0.1,
        points=[dict(iterations=i, wall_s=w, test_rmse=e) for i, w, e in lm]), indent=2))
    lm_cmd = (f"libmf.mf.MF(k={F['rank']}, nr_threads=1, nr_iters=N, lambda_p2={F['lam']}, "
              f"lambda_q2={F['lam']}, eta=0.1).fit(train - mean) for N in {pts}")
    (ld / "command.txt").write_text(lm_cmd + "\n")
    ctx.commands["mf"].append(lm_cmd)
    ctx.say(f"mf: libmf done in {time.perf_counter() - t:.1f}s")
    names = {"ccd": "strads CCD++", "als": "strads ALS (GraphLab-style baseline)"}
    lines = [(r["trace"]["wall_s"], r["trace"]["test_rmse"], names[s] + ", 1 worker", "-")
             for s, r in runs.items()]
    if lm:
        lines.append(([x[1] for x in lm], [x[2] for x in lm], "LIBMF SGD, 1 thread", "s--"))
    figure(ctx, "mf", "mf_rmse_time.png", "MF: test RMSE vs time (one core each)",
           "wall time (s)", "held-out RMSE (rating units)", lines,
           f"MF held-out RMSE against time, each method on one core, {F['iters']} outer "
           "iterations / epochs; LIBMF points are separate fits of N epochs (its fit() call "
           "timed).")
    ctx.results["mf"] = dict(runs={k: r["trace"] for k, r in runs.items()}, libmf=lm)


# ---------------------------------------------------------------- report

SPARSE_CLAIMS = {  # baseline run -> (claim, the papers' figure)
    "lasso": {
        "random": ("STRADS Lasso (priority + dependency check) converges faster than "
                   "Shotgun / Lasso-RR (random parallel coordinates); EuroSys: about 5x",
                   "EuroSys 2016 abstract: SchMP Lasso 5x faster convergence (checked); "
                   "NIPS 2014 Lasso figure (not checked)"),
        "round-robin": ("dynamic (priority) scheduling beats static (round-robin)",
                        "EuroSys 2016, dynamic vs static (not checked)"),
        "priority-nodep": ("the dependency check speeds convergence over priority alone",
                           "NIPS 2014 (not checked)")},
    "logreg": {
        "random": ("STRADS sparse logistic regression (priority + dependency check) "
                   "converges faster than random parallel coordinates (Shotgun)",
                   "EuroSys 2016 benchmarks SchMP sparse logistic regression (abstract, "
                   "checked); its figure and ratio (not checked)"),
        "round-robin": ("logreg: dynamic (priority) scheduling beats static (round-robin)",
                        "EuroSys 2016 (not checked)"),
        "priority-nodep": ("logreg: the dependency check speeds convergence over priority "
                           "alone", "(not checked)")}}


def sparse_claims(L, app):
    """Claims rows of the Lasso or the sparse logistic regression experiment."""
    rows, R, tag = [], L["runs"], "" if app == "lasso" else "logreg: "
    for slow, fast in [(s, "priority") for s in SPARSE_CLAIMS[app]] + [
            ("priority", "working-set")]:
        tgt, t = race(R, [slow, fast], L["fstar"])
        what, paper = SPARSE_CLAIMS[app].get(slow, (
            f"(this project, not a paper claim) {tag}working-set beats STRADS priority "
            "sampling", "-"))
        stops = f" ({slow} stop: {R[slow]['stop']}, {fast} stop: {R[fast]['stop']})"
        row = claim(what, paper, f"{tag}time to suboptimality {tgt:.2g}: {slow} "
                    f"{fmt(t[slow])} s vs {fast} {fmt(t[fast])} s"
                    + (stops if fast == "priority" else ""), t[slow], t[fast],
                    R[slow]["stop"] == "tol")
        if R[slow]["stop"] == "diverged" and R[fast]["stop"] != "diverged":
            row = row[:3] + ("yes", "baseline diverged (no finite ratio)")
        rows.append(row)
    return rows


def claims(ctx):
    rows = []  # (claim, paper, measured, same, ratio)
    R = ctx.results
    for app in ("lasso", "logreg"):
        if app in R:
            rows.extend(sparse_claims(R[app], app))
    if "lda" in R:
        A = R["lda"]
        t, tgt = progress_race(A["runs"], "wall_s", "loglik", lower=False)
        rows.append(claim("model-parallel LDA converges faster than data-parallel "
                          "(YahooLDA); EuroSys: about 10x",
                          "EuroSys 2016 abstract (10x, checked)", f"time to log-likelihood "
                          f"{tgt:.6g}: data {fmt(t['data'])} s vs model {fmt(t['model'])} s",
                          t["data"], t["model"]))
        s = progress_race(A["runs"], "sweeps", "loglik", lower=False)[0]
        rows.append(claim("model-parallel LDA needs fewer sweeps (no stale word-topic "
                          "counts)", "EuroSys 2016 / NIPS 2014 LDA vs iterations (not "
                          "checked)", f"sweeps to the same target: data {fmt(s['data'])} vs "
                          f"model {fmt(s['model'])}", s["data"], s["model"]))
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
        t, tgt = progress_race(R["mf"]["runs"], "wall_s", "test_rmse", lower=True)
        tc, ta = t["ccd"], t["als"]
        rows.append(claim("CCD++ (STRADS MF) reaches a test RMSE faster than ALS (GraphLab)",
                          "EuroSys 2016 MF figure (not checked)", f"time to test RMSE "
                          f"{tgt:.4f}: ALS {fmt(ta)} s vs CCD++ {fmt(tc)} s", ta, tc))
        lm = R["mf"]["libmf"] or [(0, float("nan"), float("inf"))]
        lt = first_time(np.array([x[1] for x in lm]), np.array([x[2] for x in lm]), tgt)
        rows.append(claim("(issue's comparison, not a paper claim) CCD++ against LIBMF "
                          "SGD, one core each", "-", f"time to test RMSE {tgt:.4f}: LIBMF "
                          f"{fmt(lt)} s (best {min(x[2] for x in lm):.4f}) vs CCD++ "
                          f"{fmt(tc)} s", lt, tc, lt is not None))
    if "scaling" in R:
        S = R["scaling"]
        tt, ws = S["tt"], S["workers"]
        best_w = max((w for w in ws if w <= max(S["cores"], 1)), default=ws[0])
        rows.append(claim("close to linear scaling as machines are added",
                          "EuroSys 2016 scalability figures (not checked)",
                          "time to target by workers: " + ", ".join(
                              f"{w}: {fmt(tt[w])} s" for w in ws) + f"; {S['cores']} "
                          f"cores here, so past {S['cores']} workers no speed-up is possible",
                          tt[ws[0]], tt.get(best_w), label=f"speed-up {{:.2f}}x at {best_w} "
                          f"workers (linear: {best_w / ws[0]:.0f}x)"))
    if "staleness" in R:
        S = R["staleness"]
        tt = S["tt"]
        later = [s for s, t in tt.items() if t is not None and s > 0]
        best = min(later, key=lambda s: tt[s]) if later else None
        rows.append(claim("bounded staleness (pipelining) keeps convergence and raises "
                          "throughput", "EuroSys 2016 pipelining figure (not checked)",
                          f"time to suboptimality {S['target']:.2g}: "
                          + ", ".join(f"s={s}: {fmt(t)} s" for s, t in tt.items())
                          + " (stops: " + ", ".join(f"s={k}: {v}" for k, v in S["stop"].items())
                          + "; updates/s: " + ", ".join(f"s={k}: {v:.0f}" for k, v in
                                                        S["ups"].items()) + ")",
                          tt.get(0), tt.get(best),
                          label=f"t(s=0)/t(s={best}, the fastest s > 0) = {{:.2f}}x"))
    return rows


HEAD = """# Reproducing the STRADS papers' comparisons

Command: `{cmdline}` (size: {size}); total wall time {wall:.0f} s.

Papers: Lee et al., *On Model Parallelization and Scheduling Strategies for Distributed
Machine Learning*, NIPS 2014; Kim et al., *STRADS: A Distributed Framework for Scheduled
Model Parallel Machine Learning*, EuroSys 2016.

What was checked against the papers' text: only their abstracts (the full texts and
figures were not available here). The EuroSys 2016 abstract benchmarks four SchMP programs
(LDA, matrix factorization, Lasso and sparse logistic regression) and gives two numbers:
SchMP LDA and SchMP Lasso reach 10x and 5x faster convergence than recent,
well-established baselines. The NIPS 2014 abstract says STRADS improves the memory
efficiency of distributed ML and compares it with popular implementations for topic
modelling, matrix factorization and Lasso, without numbers. Every other claim in the table
is stated as issue 13 gives it (marked **not checked**); no figure of either paper was
checked, and no paper number other than 10x and 5x is used.

## Machine

- {desc}.
- The papers ran on clusters (tens to hundreds of machines). Here every worker is a process
  (or a thread) on this one machine: with {cores} cores, nothing past {cores} workers can
  run faster, and the papers' scale (both data size and machine count) cannot be
  reproduced; what can be checked is the *direction* of each claim at small scale.

## How the runs were timed

{warm} The
  strads times are the engine's loop time (`wall_s` in trace.csv: from the first round;
  process start, data generation and loading excluded); LIBMF's time is its `fit()` call.
- Within a figure: the same data, the same stopping rule (Lasso, logreg: duality gap <= tol
  x objective or the same time limit; LDA: the same number of sweeps; MF: the same number
  of outer iterations / epochs) and the same number of cores for every method.
"""
WARM = """- A warm-up ran first: a tiny run of every app and schedule used (in one process and
  under mpiexec), so numba's on-disk cache held every kernel. **Times exclude JIT
  compilation for every method** (loading a cached kernel, milliseconds, is included)."""
TINY = """- **--tiny (a smoke test, not a measurement)**: no warm-up ran, so a time below may
  include JIT compilation where numba's on-disk cache was cold (`make install` fills it)."""


def write_report(ctx, cmdline, exps):
    (cores, desc), S = machine(), ctx.S
    L = [HEAD.format(cmdline=cmdline, size=ctx.size, wall=ctx.elapsed(), desc=desc,
                     cores=cores, warm=TINY if ctx.size == "tiny" else WARM)]
    w = L.append
    for app in ("lasso", "logreg"):
        ref = ctx.cache.get(f"{app}_ref")
        if ref:
            w(f"- {APP_NAME[app]} reference optimum f* = {ref['f']:.12g}: the working-set "
              f"schedule (the fastest here) in one process to a duality gap of 1e-11 x "
              f"objective (stop: {ref['stop']}, gap {fmt(ref['gap'])}): `{ref['cmd']}`. "
              "f* is the least of that and every objective logged.")
    w("\n## Data\n")
    flag = lambda f: "`" + shlex.join(map(str, f)) + "`"  # noqa: E731
    for app, what in APP_NAME.items():
        if app in exps or (app == "lasso" and "staleness" in exps):
            w(f"- {what}: {flag(sparse_data_flags(ctx, app))}.")
    if "lda" in exps:
        w(f"- LDA convergence: {flag(lda_data_flags(ctx, S['lda']))}, {S['lda']['sweeps']} "
          f"sweeps; LDA memory: {flag(lda_data_flags(ctx, S['lda_mem']))}.")
    if "mf" in exps:
        sh, F = ctx.results.get("mf_shape"), S["mf"]
        src = f"`{ctx.args.mf_data}`" if ctx.args.mf_data else (
            f"built-in power-law ratings ({F['n_users']} users x {F['n_items']} items, "
            f"{F['n_ratings']} ratings, true rank 8)")
        w(f"- MF: {src}; 10% held out (`strads.apps.mf.prepare`: seeded, a rating whose "
          "user or item would keep no training rating stays in training)"
          + (f": {sh[0]} x {sh[1]}, {sh[2]} training and {sh[3]} held-out ratings" if sh
             else "") + f"; rank {F['rank']}, lambda {F['lam']} per rating "
          "(count-weighted, which is what LIBMF's SGD minimises); strads subtracts the "
          "global mean (`--bias mean`), LIBMF is fitted to the centred ratings alike.")
    if "scaling" in exps:
        w(f"- Scalability: {flag(lda_data_flags(ctx, S['scaling']))}, "
          f"{S['scaling']['sweeps']} sweeps.")
    w("\n## Claims\n")
    w("| claim | paper's figure | this run measured | same direction | ratio |")
    w("|---|---|---|---|---|")
    L.extend("| " + " | ".join(str(c).replace("|", "/") for c in row) + " |"
             for row in claims(ctx))
    w("\nRatios are the baseline's time over the STRADS method's time to the same target "
      "(the worse of the two methods' best values, so both reach it); '>= (lower bound)' "
      "where the baseline stopped at the time limit instead of converging.\n")
    if ctx.failed:
        w("## Experiments that failed\n")
        L.extend(f"- {k}: {v}" for k, v in ctx.failed.items())
        w("")
    notes = [n for exp in EXPERIMENTS for n in ctx.notes.get(exp, [])]
    if notes:
        w("## What cannot reproduce here, and why\n")
        L.extend(f"- {n}" for n in notes)
        w("")
    w("## Figures\n")
    for exp in EXPERIMENTS:
        for fname, cap in ctx.figures.get(exp, []):
            w(f"![{fname}]({fname})\n\n*{fname}*: {cap}\n")
    w("## Commands\n")
    w("Every run's folder `DIR/runs/<experiment>/<run>/` holds `command.txt`, "
      "`summary.json`, `trace.csv` and `stderr.txt`.\n")
    for exp in ("reference",) + EXPERIMENTS:
        if ctx.commands.get(exp):
            w(f"- {exp}:")
            L.extend(f"  - `{c}`" for c in ctx.commands[exp])
    (ctx.out / "REPORT.md").write_text("\n".join(L) + "\n")


def main(argv=None):
    ap = argparse.ArgumentParser(
        prog="python benchmarks/reproduce.py",
        description="Reproduce the STRADS papers' comparisons (Lasso, sparse logistic "
                    "regression, LDA, MF, scalability, staleness) with this project's "
                    "CLIs; write figures and DIR/REPORT.md.")
    ap.add_argument("--out", required=True, help="output folder")
    ap.add_argument("--quick", action="store_true",
                    help="smaller sizes: under 20 minutes on a 2-core machine")
    ap.add_argument("--tiny", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--only", default=",".join(EXPERIMENTS),
                    help=f"comma-separated experiments of {','.join(EXPERIMENTS)}")
    ap.add_argument("--seed", type=int, default=0)
    for app, what in (("lasso", "Lasso"), ("logreg", "sparse logistic regression")):
        ap.add_argument(f"--{app}-data", help=f"{what} data file (LIBSVM, .mtx with "
                        f"--{app}-target, .npz) instead of the built-in problem")
        ap.add_argument(f"--{app}-target", help=f"the target of a .mtx --{app}-data")
    ap.add_argument("--mf-data", help="ratings file (as `python -m strads.apps.mf --data` "
                    "reads) instead of the built-in problem; 10%% is held out")
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
    cmdline = shlex.join(["python", "benchmarks/reproduce.py",
                          *(argv if argv is not None else sys.argv[1:])])
    ctx.say(f"reproduce: size {ctx.size}, experiments {', '.join(exps)}, out {ctx.out}")
    if ctx.size != "tiny":  # (--tiny: a smoke test, its runs tiny already)
        ctx.say("warm-up: tiny runs so that numba's cache is warm for every method")
        warm_up(ctx, exps)
    fns = dict(lasso=lambda c: exp_sparse(c, "lasso"), logreg=lambda c: exp_sparse(
        c, "logreg"), lda=exp_lda, mf=exp_mf, scaling=exp_scaling, staleness=exp_staleness)
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
