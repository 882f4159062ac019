"""What the benchmark scripts share: running an app's command line, in one process or
under mpiexec, and reading its summary."""
import contextlib
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
MPIEXEC = str(Path(sys.executable).parent / "mpiexec")  # the mpich wheel's, else PATH's
if not os.path.exists(MPIEXEC):
    MPIEXEC = shutil.which("mpiexec") or "mpiexec"


def l1_logistic(cross_validated=False, **kw):
    """scikit-learn's L1 LogisticRegression (LogisticRegressionCV if ``cross_validated``):
    ``l1_ratio=1`` from 1.8 (``penalty`` is deprecated there and goes in 1.10),
    ``penalty="l1"`` before. liblinear's coordinate order is random: a fixed seed
    (unseeded, a fit took 0.1-60 s from run to run), unless ``random_state`` is given."""
    import sklearn
    from sklearn import linear_model

    new = tuple(int(v) for v in sklearn.__version__.split(".")[:2]) >= (1, 8)
    kw.setdefault("random_state", 0)
    if cross_validated:
        return linear_model.LogisticRegressionCV(
            **kw, **({"l1_ratios": (1.0,)} if new else {"penalty": "l1"}))
    return linear_model.LogisticRegression(
        **kw, **({"l1_ratio": 1.0} if new else {"penalty": "l1"}))


def installed(*modules, what="skipped"):
    """Whether every module of ``modules`` (peers the bench extra installs) imports; else
    one line, ``WHAT: tomotopy is not installed (make bench installs it)``, and False."""
    missing = [m for m in modules if importlib.util.find_spec(m) is None]
    if missing:
        one = len(missing) == 1
        print(f"{what}: {', '.join(missing)} {'is' if one else 'are'} not installed (make "
              f"bench installs {'it' if one else 'them'})", flush=True)
    return not missing


def child_env(**extra):
    """This environment without an MPI launcher's variables or the tests' fault hook (a
    child is its own job), plus ``extra``."""
    return {**{k: v for k, v in os.environ.items() if not k.startswith(
        ("PMI_", "MPI_", "OMPI_", "PMIX_", "HYDRA", "STRADS_TEST_HOOK"))}, **extra}


def cli(args, out, np=None, quiet=True):
    """The command ``python -m ARGS [--quiet] --out OUT`` (ARGS[0] a .py file: that
    script), under ``mpiexec -n np`` if ``np``."""
    prog = [] if str(args[0]).endswith(".py") else ["-m"]
    cmd = [sys.executable, *prog, *map(str, args), *["--quiet"] * quiet, "--out", str(out)]
    return [MPIEXEC, "-n", str(np), *cmd] if np else cmd


def run_cli(args, out, np=None, env=None, cwd=ROOT, **kw):
    """Run :func:`cli` (``env``: more variables) -> summary.json."""
    subprocess.run(cli(args, out, np), check=True, env=child_env(**(env or {})), cwd=cwd,
                   stdout=subprocess.DEVNULL, **kw)
    return json.loads(Path(out, "summary.json").read_text())


def timed(fn, *args, **kw):
    """-> (the seconds ``fn(*args, **kw)`` took, its result)."""
    t = time.perf_counter()
    out = fn(*args, **kw)
    return time.perf_counter() - t, out


def timed_cli(args, np=None):
    """:func:`run_cli` in a temporary folder -> (the command's seconds, summary)."""
    with tempfile.TemporaryDirectory() as tmp:
        return timed(run_cli, args, tmp, np)


TOLS = (1e-4, 1e-5, 1e-6, 1e-7, 1e-8, 1e-9, 1e-10)


def peer_time(make, objective, X, y, target, budget=float("inf")):
    """A peer's fits ``make(tol)`` at decreasing tolerances -> (seconds of the first whose
    ``objective(coef)`` reaches ``target``, its tol), else (nan, the least objective seen;
    also once the fits have taken ``budget`` seconds)."""
    best, spent = float("inf"), 0.0
    for tol in TOLS:
        t, m = timed(lambda: make(tol).fit(X, y))
        spent += t
        best = min(best, objective(m.coef_.ravel()))
        if best <= target:
            return t, tol
        if spent > budget:
            break
    return float("nan"), best


def to_target(fit, target, warm, **kw):
    """``fit(**kw)`` (lasso.fit or logreg.fit, one closed over X, y, lam) after an untimed
    ``fit(**kw, **warm)`` (kernels compiled, memory touched, as the peers' repeated fits
    do) -> (seconds to ``target``: the set-up (validation, partition, shards) plus the
    loop's time at the first logged round at or below it, else nan; that round's row or
    None; the whole fit's seconds; its result)."""
    fit(quiet=True, **{**kw, **warm})
    total, res = timed(fit, quiet=True, log_interval=0, **kw)
    hit = next((row for row in res.trace if row["objective"] <= target), None)
    t = total - res.wall_s + hit["wall_s"] if hit else float("nan")
    return t, hit, total, res


def one_and_mpi(args):
    """The CLI ``python -m ARGS`` with 1 worker, then under mpiexec -n 3: the line of
    their loop times (wall_s), the whole command's of the latter and the objectives."""
    _, one = timed_cli(args)
    t, res = timed_cli(args, np=3)
    print(f"  1 worker {one['wall_s']:.3f} s, mpiexec -n 3 {res['wall_s']:.3f} s (whole "
          f"command {t:.1f} s): speed-up {one['wall_s'] / res['wall_s']:.2f}x  (objectives "
          f"{one['objective']:.12g} / {res['objective']:.12g})")


def listed(times):
    """``1.23, 1.20, 1.31``: every run's seconds, for a best-of line."""
    return ", ".join(f"{t:.2f}" for t in times)


def best_of(repeat, runs, key="wall_s", pick=min):
    """``runs``: label -> thunk returning a summary; alternate them ``repeat`` times (the
    machine is shared: the best run is the least disturbed) -> ({label: every run's
    ``key``}, {label: the summary whose ``key`` is ``pick``'s of them})."""
    times, best = {k: [] for k in runs}, {}
    for _ in range(repeat):
        for k, thunk in runs.items():
            s = thunk()
            times[k].append(s[key])
            if s[key] == pick(times[k]):
                best[k] = s
    return times, best


def libmf_fit(X, rank, lam, iters, eta=0.1, threads=1):
    """LIBMF's SGD, L2 only, on X (float32 rows: user, item, rating from 0) -> (its fit()'s
    seconds, the model)."""
    with contextlib.redirect_stdout(open(os.devnull, "w")):
        from libmf import mf as libmf
    model = libmf.MF(k=rank, nr_threads=threads, nr_iters=iters, lambda_p1=0.0,
                     lambda_q1=0.0, lambda_p2=lam, lambda_q2=lam, eta=eta, quiet=True)
    return timed(model.fit, X)[0], model


def libmf_rmse(model, users, items, ratings):
    """A LIBMF model's RMSE on these ratings, scored from its factors (the wrapper's
    predict() is wrong)."""
    P, Q = model.p_factors().astype(np.float64), model.q_factors().astype(np.float64)
    e = ratings - np.einsum("ij,ij->i", P[users], Q[items])
    return float(np.sqrt(e @ e / e.shape[0]))


def libmf_run(p, rank, lam, iters, eta=0.1):
    """LIBMF's SGD, one thread, on p's training ratings -> (seconds, RMSE on p's held-out
    ratings)."""
    X = np.column_stack([p.users, p.items, p.ratings]).astype(np.float32)
    wall, model = libmf_fit(X, rank, lam, iters, eta)
    return wall, libmf_rmse(model, p.test_users, p.test_items, p.test_ratings)


def read_trace(path):
    """trace.csv's numeric columns as float64 arrays ({} when it has no row)."""
    t = np.atleast_1d(np.genfromtxt(path, delimiter=",", names=True))
    return {k: t[k].astype(np.float64) for k in t.dtype.names or ()} if t.size else {}


def tomotopy_model(docs, K, alpha, beta):
    """tomotopy's LDA on ``docs`` (lists of word names; empty ones left out), as a timed
    sweep starts: no burn-in, no hyper-parameter optimisation (then ``m.train(0)``)."""
    import tomotopy as tp
    m = tp.LDAModel(k=K, alpha=alpha, eta=beta, seed=0)
    for words in docs:
        if words:
            m.add_doc(words)
    m.optim_interval = 0
    m.burn_in = 0
    return m


def tomotopy_loglik(m, n_words, K, alpha, beta, first_id=0):
    """A tomotopy LDAModel's state (its words: ids as strings, from ``first_id``) scored
    by strads' log p(w, z), over ``n_words`` words and ``K`` topics."""
    from strads.apps.lda import loglikelihood
    ids = np.array([int(w) - first_id for w in m.used_vocabs])
    wt = np.zeros((n_words, K), np.int64)
    dt = np.zeros((len(m.docs), K), np.int64)
    for d, doc in enumerate(m.docs):
        w, z = ids[np.asarray(doc.words)], np.asarray(doc.topics)
        np.add.at(wt, (w, z), 1)
        dt[d] = np.bincount(z, minlength=K)
    return loglikelihood(wt, dt, alpha, beta)


def lasso_svm(path, n, p, density):
    """The built-in Lasso problem (200 informative features, seed 0) as a LIBSVM file at
    ``path``, unless one is there already; -> path."""
    if not os.path.exists(path):
        from sklearn.datasets import dump_svmlight_file
        from strads.apps.lasso import make_problem

        X, y, _ = make_problem(n, p, density=density, n_informative=200, seed=0)
        dump_svmlight_file(X, y, f"{path}.tmp")
        os.replace(f"{path}.tmp", path)
    return path
