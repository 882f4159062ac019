"""Matrix factorization by scheduled rank-one coordinate descent (CCD++, Yu et al. 2012)
with early stopping: the objective, the layout and the two runs in docs/apps/mf.md."""
import math
import os
import sys
from dataclasses import dataclass, field

import numpy as np

from ... import driver, outputs
from ...errors import DataError
from ...params import Param, check
from ...transport import mpi_job
from . import kernels as K
from .aggregate import MFAggregate
from ...io.memory import beyond, fmt_bytes, physical_memory, whose
from ...io.ratings import Layout as FileLayout
from .data import (COLD_START, DUPLICATES, Problem, Triplets, check_ids, from_arrays, lookup,
                   make_problem, prepare, problem_plan, read_ratings)
from .schedule import SCHEDULES
from .update import MFUpdate

__all__ = ["fit", "predict", "make_setup", "make_parallel_setup", "prepare", "read_ratings",
           "make_problem", "from_arrays", "Problem", "Triplets", "MFUpdate", "MFAggregate",
           "SCHEDULES", "Layout", "BIAS", "BIAS_DEFAULT", "INIT", "DUPLICATES", "COLD_START",
           "LAMBDA_WEIGHTING", "WEIGHTED", "EARLY_STOP", "VALIDATION", "validated", "PARAMS"]

BIAS = ("none", "mean", "full")
#: The default bias, declared once: the global mean plus fitted user and item biases.
BIAS_DEFAULT = "full"
INIT = ("svd", "random")
#: The penalty's weighting (--lambda-weighting): "count" (``weighted=True``) or "none".
LAMBDA_WEIGHTING = ("count", "none")
WEIGHTED = True
#: Early stopping's defaults, declared once: iterations without a better validation
#: RMSE before the first run stops, and the share of the training ratings it holds out.
EARLY_STOP = 2
VALIDATION = 0.1
#: how a first run ends when early stopping chose its iteration count
ENDED = ("tol", "schedule_done")

#: The parameters, each declared once: fit()'s checks (named by their keyword, or their
#: label), the command line's flags (``__main__``) and MatrixFactorization's constraints
#: (:func:`strads.params.sklearn_constraints`, under its names). Defaults: the command line's.
PARAMS = (
    Param("rank", 8, "factor rank k", low=1),
    Param("lam", 0.1, "L2 penalty lambda (0.1: LIBMF's default, per rating): user u's "
          "term is lambda * n_u * (||w_u||^2 + b_u^2) with --lambda-weighting count, "
          "lambda * (||w_u||^2 + b_u^2) with none; items alike", low=0, flag="--lambda",
          label="lambda"),
    Param("lambda_weighting", "count", "count: each user's (item's) penalty is lambda "
          "times its number of training ratings (LIBMF, ALS-WR, Spark ALS); none: lambda "
          "alone, the same for every row", choices=LAMBDA_WEIGHTING),
    Param("weighted_lambda", False, "accepted for old command lines, does nothing: "
          "--lambda-weighting count is the default"),
    Param("bias", BIAS_DEFAULT, "none; mean: subtract the global mean; full: also user "
          "and item biases (penalised with their row's factors)", choices=BIAS),
    Param("schedule", "ccd", "ccd: CCD++ rank-one blocks; als: alternating least squares "
          "(baseline) on the same layout", choices=tuple(sorted(SCHEDULES))),
    Param("inner", 1, "ccd: passes over (W column t, H column t) before moving to t+1",
          low=1, label="inner passes"),
    Param("block", 1, "ccd: columns per round (a worker does them one after the other); "
          "fewer, larger rounds: less per-round latency under MPI, and a block's columns "
          "are swept tile by tile while its ratings are in cache (--block equal to --rank: "
          "all of a side's factor columns in one round, the fastest per iteration; with "
          "one --inner pass each bias column leads its side's first block)", low=1),
    Param("iters", 20, "outer iterations (one sweep over all columns of W and H); with "
          "--early-stop, the first run's most; a resumed run may ask for more", low=1,
          none=True, resume=True),
    Param("init", "svd", "H's start: svd: orthonormal rows near the top singular vectors "
          "(one randomized subspace iteration); random: Gaussian", choices=INIT),
    Param("init_scale", None, "norm of each starting row of H (default: for svd "
          "(sum of the squared training ratings less the mean / rank)^(1/4), for random "
          "sqrt(items / rank))", kind=float, low=0, closed="neither",
          none=True, label="init scale"),
    Param("test_data", None, "held-out ratings (same formats)", kind=str, metavar="PATH"),
    Param("test_fraction", None, "hold out this share of --data, chosen by --seed "
          "(default: 0.1 for the built-in problem, 0 for --data)", kind=float, low=0,
          high=1, closed="left", none=True, label="test fraction"),
    Param("duplicates", "error", "repeated (user, item) pairs: error, keep the last, or "
          "average", choices=DUPLICATES),
    Param("cold_start", "error", "held-out ratings of users/items with no training "
          "rating: error, skip them, or predict from the mean and known biases",
          choices=COLD_START),
    Param("target_test_rmse", None, "stop once the held-out RMSE is at or below this",
          kind=float, low=0, closed="neither", none=True, label="target test RMSE",
          resume=True),
    Param("early_stop", EARLY_STOP, "early stopping, in two runs: the first holds out "
          "--validation-fraction of the training ratings, scores their RMSE at every "
          "iteration end and stops once it has not improved for N iterations (outputs in "
          "OUT/validation/); the second fits all the training ratings for the best "
          "iteration count (summary.json: best_iteration, early_stopped, validation_rmse, "
          "validation_iterations, validation_wall_s; --max-rounds and --time-limit bound "
          "both runs together). 0: one run of --iters iterations (or to --tol), the "
          "objective's minimiser, which overfits at a small --lambda", low=0, none=True,
          note=" (iterations; 0 or None: off)", metavar="N"),
    Param("validation_fraction", VALIDATION, "with --early-stop: the share of the training "
          "ratings held out in the first run, chosen by --seed (independently of "
          "--test-fraction's). 0: one run that stops on the held-out set (--test-fraction "
          "or --test-data) itself and writes its best iteration's model (each worker then "
          "keeps a copy of its rows of W and H: the factor rows' memory doubles)", low=0,
          high=1, closed="left", label="validation fraction", metavar="F"),
)


@dataclass
class Layout:
    """Factor columns 0..rank-1; with biases, column rank is the user bias (its H column
    fixed at 1) and rank+1 the item bias (its W column fixed at 1)."""
    rank: int
    lam: float
    biases: bool
    kk: int = 0
    user_bias: int = -1
    item_bias: int = -1
    free: dict = field(default_factory=dict)
    fixed: dict = field(default_factory=dict)

    def __post_init__(self):
        base = list(range(self.rank))
        self.kk = self.rank + 2 * self.biases
        if self.biases:
            self.user_bias, self.item_bias = self.rank, self.rank + 1
            self.fixed = {"W": self.item_bias, "H": self.user_bias}
        extra = {"W": [self.user_bias], "H": [self.item_bias]} if self.biases else {}
        self.free = {s: np.array(base + extra.get(s, []), np.int64) for s in ("W", "H")}


def _check(cli=False, **values):
    """The declared rules (:data:`PARAMS`), then whether a ccd sweep's list of rounds
    fits in memory; -> the patience of early stopping (None: off)."""
    check(PARAMS, values, cli)
    rank, inner, block = (values.get(k, 1) for k in ("rank", "inner", "block"))
    # the sweep is a list of its rounds, 8 bytes each (16 while it is built)
    sweep = 2 * int(inner) * -(-rank // int(block)) + 2
    too = beyond(16 * sweep) if values.get("schedule") == "ccd" else None
    if too:
        raise DataError(f"rank {rank} (--rank), inner {inner} (--inner), block {block} "
                        f"(--block): a sweep of {sweep} rounds needs {too}")
    early_stop = values.get("early_stop")
    return int(early_stop) or None if early_stop is not None else None


def check_held_out(early_stop, validation, held_out, cli=False):
    """Early stopping with no validation split stops on the held-out set: it needs one
    (``held_out``: a test set or a test fraction > 0)."""
    if early_stop and not validation and not held_out:
        raise DataError(
            f"--early-stop {early_stop} with --validation-fraction 0 stops on the held-out "
            "set: give --test-fraction or --test-data" if cli else
            f"early_stop {early_stop} with validation 0 stops on the held-out set: give "
            "test=(users, items, ratings) or test_fraction > 0")


def _check_workers(n_workers, m, n):
    if n_workers > min(m, n):
        raise DataError(f"{n_workers} workers for {m} users and {n} items: each worker "
                        "needs users and items")


def _schedule(ctx, lay, agg, schedule, iters, inner, group, block, target_test_rmse,
              early_stop, report):
    """The aggregate's stopping rules set; -> the schedule (both setups alike)."""
    agg.target_test_rmse, agg.early_stop, agg.report = (target_test_rmse, early_stop,
                                                        dict(report or {}))
    more = (inner, group, block) if schedule == "ccd" else ()
    return SCHEDULES[schedule](lay, iters, *more, ctx.staleness)


def make_parallel_setup(train=None, test=None, builtin=None, *, test_fraction=0.0,
                        duplicates="error", cold_start="error", rank=8, lam=0.1,
                        schedule="ccd", inner=1, iters=None, bias=BIAS_DEFAULT,
                        weighted=WEIGHTED, init_scale=None, seed=0, target_test_rmse=None,
                        group=1, init="svd", block=1, early_stop=None, validation=0.0,
                        report=None):
    """``setup(ctx)`` for :func:`strads.run` whose workers read their parts of ``train`` and
    ``test`` (files, or :class:`Triplets` given in Python: each worker is handed its
    slice) or generate the built-in problem's (``builtin``) and agree on the rest among
    themselves; rank 0 reads only the lines before the first rating."""
    early_stop = _check(schedule=schedule, bias=bias, rank=rank, lam=lam, inner=inner,
                        block=block, init=init, init_scale=init_scale, iters=iters,
                        target_test_rmse=target_test_rmse, early_stop=early_stop,
                        duplicates=duplicates, cold_start=cold_start,
                        test_fraction=test_fraction, validation_fraction=validation)
    rank, biases = int(rank), bias == "full"
    options = dict(rank=rank, lam=float(lam), bias=bias, weighted=bool(weighted),
                   schedule=schedule, block=int(block), init=init, init_scale=init_scale,
                   seed=seed, duplicates=duplicates, cold_start=cold_start,
                   test_fraction=0.0 if test is not None else float(test_fraction),
                   early_stop=early_stop, validation=float(validation))

    def setup(ctx):
        given = isinstance(train, Triplets)
        lay_tr = train if given or train is None else FileLayout(train)
        if builtin is not None:
            problem_plan(*builtin)  # its refusals, before the workers start
            _check_workers(ctx.n_workers, *builtin[:2])
        # before the layout's and the schedule's rank-sized lists (a file's users and
        # items are counted once loaded: at least one of each)
        _check_factor_memory(rank, biases, *(builtin[:2] if builtin is not None else (1, 1)),
                             ctx.n_workers, schedule, block, options["early_stop"])
        lay_te = test if given or test is None else FileLayout(test)
        lay = Layout(rank, float(lam), biases)
        agg = MFAggregate(lay, None, 0.0, 0, 0, 0, 0.0, None, float("nan"))
        W = ctx.n_workers
        return (_schedule(ctx, lay, agg, schedule, iters, inner, group, block,
                          target_test_rmse, options["early_stop"], report), agg,
                [{"load": {"train": tr, "test": te, "builtin": builtin, "options": options}}
                 for tr, te in zip(_slices(lay_tr, W), _slices(lay_te, W))])

    return setup


def _slices(x, W):
    """Each worker's slice of ratings given in Python, with their positions (a view: the
    worker copies it); a file's description whole."""
    if not isinstance(x, Triplets):
        return [x] * W
    pos = np.arange(len(x)) if x.pos is None else x.pos
    cut = [len(x) * w // W for w in range(W + 1)]
    return [Triplets(x.users[a:b], x.items[a:b], x.ratings[a:b], x.path, pos=pos[a:b])
            for a, b in zip(cut[:-1], cut[1:])]


def make_setup(data, rank=8, lam=0.1, schedule="ccd", inner=1, iters=None,
               bias=BIAS_DEFAULT, weighted=WEIGHTED, init_scale=None, seed=0,
               target_test_rmse=None, group=1, init="svd", block=1, early_stop=None,
               report=None):
    """``setup(ctx)`` for :func:`strads.run` from ``data()``, a prepared :class:`Problem`
    (called on the scheduler rank only), its ratings handed to the workers as fit()'s
    arrays are (:func:`make_parallel_setup`); the start: W = 0, H orthonormal from R'R Z
    (``init='svd'``) or Z (``'random'``)."""
    kw = dict(rank=rank, lam=lam, schedule=schedule, inner=inner, iters=iters, bias=bias,
              weighted=weighted, init_scale=init_scale, seed=seed, group=group, init=init,
              target_test_rmse=target_test_rmse, block=block, early_stop=early_stop,
              report=report)
    make_parallel_setup(**kw)  # (its checks, now)

    def setup(ctx):
        p = data()
        # the held-out pairs of unseen ids (index m or n) kept as unseen: raw ids of
        # their own; the cold starts counted as the Problem did
        out = make_parallel_setup(
            Triplets(p.user_ids[p.users], p.item_ids[p.items], p.ratings),
            Triplets(_raw(p.user_ids, p.test_users), _raw(p.item_ids, p.test_items),
                     p.test_ratings, "test") if p.test_ratings.shape[0] else None,
            cold_start="mean", **kw)(ctx)
        for d in out[2]:
            d["load"]["cold"] = p.cold
        return out

    return setup


def _raw(ids, dense):
    """Raw ids of dense ones; index ids.shape[0] (unseen): a new id for each."""
    out = np.append(ids, 0)[dense]
    new = np.flatnonzero(dense == ids.shape[0])
    k = np.arange(new.shape[0])
    out[new] = ids[-1] + 1 + k if ids[-1] < 2 ** 62 else ids[0] - 1 - k
    return out


def penalties(lam, weighted, cu, ci, most):
    """The penalties' weights of users with ``cu`` and items with ``ci`` ratings; ``most``:
    the largest of every user's count. A weight that overflows is refused."""
    with np.errstate(over="ignore"):
        reg = [lam * c if weighted else np.full(c.shape[0], float(lam)) for c in (cu, ci)]
    if weighted and not (np.isfinite(lam * float(most)) and np.isfinite(reg[1]).all()):
        raise DataError(f"lambda {lam} (--lambda) times a row's up to "
                        f"{max(most, int(ci.max()))} ratings (--lambda-weighting count) "
                        "overflows")
    return reg


def start(lay, seed, init, init_scale, reg_W, reg_H, lam, rss, gram):
    """W = 0; -> (H transposed: Z Gaussian (svd: ``gram(Z)``, R'R Z' transposed,
    orthonormalised: one randomized subspace iteration) scaled, and an unseen item's
    column (cold start): 0 but the fixed column's 1; (W's, H's) columns' weighted squared
    norms). A starting penalty that overflows is refused; ``rss``: svd's scale."""
    n = reg_H.shape[0]
    Z = np.random.default_rng([seed, 0x6D66, 2]).standard_normal((lay.rank, n)) / np.sqrt(n)
    if init == "svd":
        Z = np.ascontiguousarray(gram(Z))
        K.orthonormalize(Z)
    scale = init_scale if init_scale is not None else \
        (svd_scale(rss, lay.rank) if init == "svd" else np.sqrt(n / lay.rank))
    H = np.zeros((lay.kk, n + 1))
    H[:lay.rank, :n] = scale * Z
    with np.errstate(over="ignore", invalid="ignore"):
        penalty = float(reg_H @ (H[:lay.rank, :n] ** 2).sum(axis=0))
    if not np.isfinite(penalty):
        raise DataError(f"lambda {lam} (--lambda) and starting scale {scale} "
                        "(--init-scale): the starting penalty lambda ||H||^2 overflows")
    sqW = np.zeros(lay.kk)
    if lay.biases:
        H[lay.user_bias] = 1.0
        sqW[lay.item_bias] = K.wsumsq(reg_W, np.ones(reg_W.shape[0]))
    return H, (sqW, np.array([K.wsumsq(reg_H, H[t, :n]) for t in range(lay.kk)]))


def svd_scale(rss, rank):
    """The svd start's default row norm, (rss / rank)^(1/4) (docs/scaling.md, "MF's
    start"), rounded to a quarter power of 2: the workers' sums of ``rss`` differ in the
    last bits, and the model must not depend on their number."""
    if not 0.0 < rss < math.inf:
        return 1.0
    return 2.0 ** (round(math.log2(rss / rank)) / 4)


def factor_bytes(rank, biases, m, n, n_workers, schedule="ccd", block=1, early_stop=None):
    """Peak bytes of the factors at ``rank`` for m users and n items, all ranks on this
    machine."""
    kk = rank + 2 * biases
    full = kk * (m + n + 2)
    big = max(m, n)
    # (a bias column may lead a block of ccd columns: see schedule.CCD)
    b = min(block + (biases and block > 1), kk) if schedule == "ccd" else kk
    # (ccd: a gather table, ccd_step's 1 + b columns or ccd_tiles' 3)
    rounds = 3 * b * big + (big * max(1 + b, 3) if schedule == "ccd" else 0)
    per_worker = full + max(rounds, full)
    scheduler = max(kk * (n + 1) + rank * (2 * n + m), 3 * full)
    best = kk * (m + n) + n_workers * kk * n if early_stop else 0
    return 8 * (n_workers * per_worker + full + scheduler + best)


def _check_factor_memory(rank, biases, m, n, n_workers, schedule, block, early_stop=None):
    need = factor_bytes(rank, biases, m, n, n_workers, schedule, block, early_stop)
    mem = physical_memory()
    if mem is not None and need > mem:
        raise DataError(f"rank {rank} (--rank): the factors of {m} users and {n} items need "
                        f"about {fmt_bytes(need)} with {n_workers} worker(s), more than "
                        f"{whose()} {fmt_bytes(mem)} of memory")


def fit(users, items, ratings, *, test=None, test_fraction=0.0, rank=8, lam=0.1,
        schedule="ccd", inner=1, block=1, iters=20, bias=BIAS_DEFAULT, weighted=WEIGHTED,
        init="svd", init_scale=None, duplicates="error", cold_start="error", seed=0, tol=1e-6,
        max_rounds=10 ** 9, target_test_rmse=None, early_stop=EARLY_STOP,
        validation=VALIDATION, **run_kw):
    """Factorize ratings given as three arrays (raw integer ids are remapped); ``test`` is
    an optional ``(users, items, ratings)`` held-out set. Returns :class:`strads.Result`
    on the scheduler rank (``model`` as in model.npz, see :func:`predict`). ``run_kw`` goes
    to :func:`strads.run` (workers, staleness, time_limit, mpi, ...). ``weighted``:
    --lambda-weighting count (True) or none; ``early_stop``, ``validation``: the flags
    --early-stop and --validation-fraction (:data:`PARAMS`; :func:`validated`'s runs)."""
    check(PARAMS, dict(early_stop=early_stop, validation_fraction=validation))
    check_held_out(early_stop, validation, test is not None or test_fraction)
    # each worker prepares its slice of them (make_parallel_setup), as a file's part
    train = from_arrays(users, items, ratings, "ratings")
    held = from_arrays(*test, name="test") if test is not None else None

    def one(vfrac, es, n_iters, report, limits):
        setup = make_parallel_setup(
            train, held, test_fraction=test_fraction, duplicates=duplicates,
            cold_start=cold_start, rank=rank, lam=lam, schedule=schedule, inner=inner,
            iters=n_iters, bias=bias, weighted=weighted, init=init, init_scale=init_scale,
            seed=seed, target_test_rmse=None if vfrac else target_test_rmse, block=block,
            early_stop=es, report=report, validation=vfrac)
        return driver.run(setup, MFUpdate, tol=tol, app="mf", seed=seed,
                          **{**run_kw, **limits})

    limits = {k: run_kw.pop(k, None) for k in ("out", "resume", "time_limit")}
    return validated(one, early_stop, validation, iters, max_rounds=max_rounds,
                     mpi=run_kw.get("mpi"), **limits)


def validated(run_one, early_stop, validation, iters, out=None, resume=False,
              max_rounds=None, time_limit=None, mpi=None):
    """Early stopping's two runs (a validation run, then the refit for its best iteration
    count) on every rank; ``run_one(validation, early_stop, iters, report, limits)`` runs
    the engine once (docs/apps/mf.md)."""
    limits = dict(out=out, resume=resume, max_rounds=max_rounds, time_limit=time_limit)
    if not early_stop or not validation:
        return run_one(0.0, early_stop or None, iters, None, limits)
    first_out = os.path.join(out, "validation") if out else None
    first, done = None, _finished(first_out, iters) if resume and out else None
    if resume and out and done is None:
        _check_first_checkpoint(out, first_out)
    if done is None:
        first = run_one(validation, int(early_stop), iters, None, {**limits, "out": first_out})
        # every rank learns how the first run ended (a worker rank's Result is None)
        done = None if first is None else (first.stop_reason, dict(first.extra),
                                           first.wall_s, first.rounds)
        job = None if mpi is False else mpi_job()
        done = done if job is None else job.bcast(done)
    reason, extra, wall, rounds = done
    if reason not in ENDED:  # stopped by a signal, a limit or divergence: resumable
        if first is not None:
            first.extra["validation_run"] = True
            if first.rank == 0:
                sys.stderr.write(f"[mf] early stopping's validation run stopped ({reason}) "
                                 "before it chose the iteration count: its model is the "
                                 "result" + (f" (in {first_out}); --resume continues it"
                                             if first_out else "") + "\n")
        return first
    best = extra["best_iteration"]  # None: no rating could be held out, nothing to stop on
    report = dict(best_iteration=best, early_stopped=bool(extra["early_stopped"]),
                  validation_fraction=float(validation),
                  validation_ratings=int(extra["n_test"]),
                  validation_rmse=extra["test_rmse"] if best is not None else None,
                  validation_iterations=int(extra["iterations"]),
                  validation_wall_s=float(wall))
    # the second run: a checkpoint of its own to resume, or none yet; what is left of
    # the stopping rules
    limits.update(resume=resume and out is not None and
                  os.path.isdir(os.path.join(out, "checkpoint")),
                  max_rounds=None if max_rounds is None else max(0, int(max_rounds) - rounds),
                  time_limit=None if time_limit is None else max(time_limit - wall, 1e-9))
    return run_one(0.0, None, iters if best is None else int(best), report, limits)


def _check_first_checkpoint(out, first_out):
    """A resume in a folder where no first run left anything, but another run left its
    checkpoint: say whose, not that the first run's is missing."""
    from ...checkpoint import MANIFEST, another_app, read_manifest

    other = os.path.join(out, "checkpoint")
    if not any(os.path.exists(os.path.join(first_out, *f)) for f in (
            ("checkpoint", MANIFEST), ("summary.json",))) and \
            os.path.isfile(os.path.join(other, MANIFEST)):
        app = read_manifest(other)["engine"]["app"]
        if app != "mf":
            raise another_app(other, app, "mf")
        raise DataError(f"{other}: a checkpoint of an mf run without early stopping "
                        "(resume it with --early-stop 0)")


FINISHED = (("stop_reason", str), ("iterations", int), ("rounds", int),
            ("wall_s", (int, float)))


def _finished(out, iters):
    """How an earlier first run in ``out`` ended, from its summary: (stop_reason, extra,
    wall_s, rounds), or None if it did not end (no summary, stopped otherwise than by
    its schedule or early stopping, or by its schedule short of ``iters``: resumed)."""
    path = os.path.join(out, "summary.json")
    try:
        s = outputs.read_json(path)
        if not (isinstance(s, dict) and all(isinstance(s.get(k), t) for k, t in FINISHED)):
            raise ValueError("not a first run's summary")
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as e:
        raise DataError(f"{path}: {e}") from None
    if s.get("stop_reason") not in ENDED or s["stop_reason"] == "schedule_done" and \
            iters is not None and s["iterations"] < iters:
        return None
    if iters is not None and s["iterations"] > iters:  # (as the schedule's, resumed)
        raise DataError(f"{iters} iterations (--iters), fewer than early stopping's first "
                        f"run's {s['iterations']} ({out}): a resumed run may ask for more")
    return s["stop_reason"], s, float(s["wall_s"]), int(s["rounds"])


def predict(model, users, items, unknown="error"):
    """Score (user, item) pairs given by raw ids with a fitted model (``Result.model`` or
    ``np.load('model.npz')``): mu + b_u + b_i + w_u.h_i. An id never seen in training
    raises :class:`strads.DataError` (``unknown='error'``) or contributes nothing but the
    biases it has (``unknown='mean'``). Ids that fit would refuse (a string, 1.5) are
    refused."""
    if unknown not in ("error", "mean"):
        raise DataError(f"unknown must be 'error' or 'mean', got {unknown!r}")
    users, items = (check_ids(np.asarray(a).ravel(), what, "predict")
                    for a, what in ((users, "user"), (items, "item")))
    if users.shape != items.shape:
        raise DataError(f"{users.shape[0]} users for {items.shape[0]} items")
    idx = []
    for raw, ids, what in ((users, model["user_ids"], "user"), (items, model["item_ids"],
                                                                 "item")):
        pos, known = lookup(ids, raw)
        if unknown == "error" and not known.all():
            k = int(np.flatnonzero(~known)[0])
            raise DataError(f"pair {k}: {what} {raw[k]} was not in the training data")
        idx.append(np.where(known, pos, ids.shape[0]).astype(np.int64))
    # the extra row (index m or n) is all zeros: an unseen id adds nothing
    W, H = (np.hstack([model[s].T, np.zeros((model[s].shape[1], 1))]) for s in "WH")
    out = np.empty(users.shape[0])
    K.predict_pairs(W, H, idx[0], idx[1], out)
    ub, ib = (np.append(model[k], 0.0) for k in ("user_bias", "item_bias"))
    return out + float(model["mean"]) + ub[idx[0]] + ib[idx[1]]
