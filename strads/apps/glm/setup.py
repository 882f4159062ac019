"""A datafit's set-up, fit and flags, once for every :class:`Datafit`: samples (rows)
split across workers, balanced by non-zeros, each worker's column-major; rank 0 holds
the aggregate and the schedule (with ``--data``, from what the workers report of the
parts of the file they read)."""
import math

import numpy as np
import scipy.sparse as sp

from ... import api
from ... import driver
from ...errors import DataError
from ...io.memory import memory_limits
from ...io.source import Content
from ...params import ENGINE, Param, check
from . import kernels as K
from . import split
from .schedule import SCHEDULES, Priority
from .update import kernel_form

MiB = 1 << 20

#: The family's parameters, each declared once: the command line's flags (the datafit
#: gives lambda_ratio's, schedule's and full_every's help texts) and check_flags' checks.
PARAMS = (
    Param("lambda_ratio", 0.1, low=0, closed="neither"),
    Param("schedule", "working-set", choices=tuple(sorted(SCHEDULES))),
    Param("block", 256, "priority, round-robin, random: coordinates updated in parallel "
          "per round (at most)", low=1),
    Param("rho", None, "priority: max |correlation| between coordinates of one round "
          "(default: the larger of 0.1 and 2/sqrt(samples), two standard deviations of "
          "independent columns' sample correlation)", kind=float, low=0, high=1),
    Param("floor", 0.1, "priority: share of candidates drawn uniformly, so none starves",
          low=0, high=1),
    Param("full_every", None, kind=int, low=1, metavar="UPDATES"),
)
#: the datafits' options that have a rule (--gram-budget: the Lasso's flag)
GRAM_BUDGET = Param("gram_budget", None, "working-set: memory one round's Gram matrices "
                    "may take in one process; larger working sets are solved in pieces "
                    "(default: the least of 512, 1/8 of ulimit -v, 1/8 of physical memory "
                    "/ ranks on the host)", kind=float, low=0, closed="neither",
                    note=" (MiB)", metavar="MiB")
OPTIONS = (GRAM_BUDGET, *(p for p in ENGINE if p.name == "time_limit"),
           Param("ws_min", 1.0, low=1, flag=None))
GRAM_BUDGET_MAX = 512  # MiB: the default Gram budget, unless memory is scarcer


def default_gram_budget():
    """The default ``gram_budget`` in MiB: GRAM_BUDGET_MAX, or an eighth of the memory
    this process may use, if less."""
    limits = memory_limits()
    return min([GRAM_BUDGET_MAX] + [b / 8 / MiB for b in limits])


def check_gap_ref(options):
    """Whether the gap's reference is the null model's objective (``gap_ref`` "null", the
    estimators': scikit-learn's scaling) rather than the objective ("objective", the CLI's)."""
    if options["gap_ref"] not in ("objective", "null"):
        raise DataError(f"gap_ref must be 'objective' or 'null', got {options['gap_ref']!r}")
    return options["gap_ref"] == "null"


def gram_budget(options):
    """The ``gram_budget`` option (MiB), or :func:`default_gram_budget`."""
    budget = options["gram_budget"]
    return budget if budget is not None else default_gram_budget()


def gram_block_cap(gram_budget, n_workers):
    """The most coordinates of one working-set block: its Gram takes 8 m^2 bytes and a
    round may need W + 2 of them in one process (the scheduler's W received), so
    m = floor(sqrt(gram_budget MiB / (8 (W + 2)))), at least 1."""
    return max(1, int(math.isqrt(int(gram_budget * MiB / (8 * (n_workers + 2))))))


def row_block(X, start, stop):
    """A worker's shard of X: rows start:stop, in the kernels' form
    (:func:`~strads.apps.glm.update.kernel_form`: read-only, so the in-process transport
    hands it over without a copy)."""
    if not sp.issparse(X):
        return {"X": kernel_form(X[start:stop])[0]}
    if start == 0 and stop == X.shape[0]:
        csc = (X.indptr, X.indices, X.data)
    else:
        csc = K.csc_rows(X.indptr, X.indices, X.data, start, stop)
    return {"csc": kernel_form(csc, stop - start), "n_rows": stop - start}


class _Later(api.Schedule):
    """A schedule built in ``begin``, once the workers' reports give the problem's size."""

    def __init__(self, build):
        self.build, self.inner = build, None

    def begin(self, reports):
        self.inner = self.build()
        self.inner.begin(reports)

    @property
    def total_rounds(self):
        return getattr(self.inner, "total_rounds", None)

    def schedule(self, round):
        return self.inner.schedule(round)

    def state(self):
        return self.inner.state()

    def load_state(self, state):
        self.inner.load_state(state)


def _part(view, k, p, schedule, block, seed, rho, floor, time_limit, staleness):
    """Scheduler k's schedule of its range (``--schedulers``): the range's share of the
    block, a seed of its own, priority's filter on the workers."""
    b = max(1, round(block * view.w.shape[0] / p))
    seed = np.random.SeedSequence([seed, k])
    if schedule == "priority":
        return Priority(view, b, 1, seed, None, rho, floor, time_limit, staleness)
    return SCHEDULES[schedule](view, b, 1, seed, time_limit, staleness)


class Datafit:
    """A loss of the family min_w f(Xw) + lambda ||w||_1, as the shared set-up, schedules
    and command line need it: a subclass names its pieces (NEEDS) and may override the
    hooks."""

    NEEDS = ("name", "Aggregate", "Update", "data", "priority",
             "options", "check_lambda", "aggregate", "later", "working_set", "help")
    drop_empty = False  # X's empty columns are left out of the solve (their coef is 0)
    splits = False  # --schedulers K: the Jacobi schedules split over coordinate ranges

    def __init__(self):
        missing = [n for n in self.NEEDS if not hasattr(self, n)]
        if missing:
            raise TypeError(f"datafit {type(self).__name__} lacks {', '.join(missing)}")

    @property
    def module(self):
        return f"strads.apps.{self.name}"

    def check_flags(self, schedule, block, rho, floor, lam, lambda_ratio, full_every,
                    options):
        """One DataError for the first bad flag, before any work."""
        unknown = sorted(set(options) - set(self.options))
        if unknown:
            raise TypeError(f"{self.name}: unexpected option {unknown[0]!r}")
        values = dict(options, schedule=schedule, block=block, rho=rho, floor=floor,
                      full_every=full_every)
        if lam is not None:
            self.check_lambda(lam)
        else:
            values["lambda_ratio"] = lambda_ratio
        check(PARAMS + OPTIONS, values)

    # -- hooks -------------------------------------------------------------------------
    def add_flags(self, group):
        """The datafit's own command-line flags."""

    def problem(self, data, options):
        """``(X, y, attrs)``: data()'s X and y checked, and attributes for the aggregate."""
        X, y = self.data.check(*data())
        return X, y, {}

    def shard(self, path, target, options):
        """Every worker's description of ``path`` (parallel loading)."""
        return self.data.shard(path, target)

    # -- set-up --------------------------------------------------------------------------
    def _schedule(self, agg, ctx, X, flags, options):
        """The schedule of ``agg``; ``X`` for priority's filter (None: on the workers)."""
        schedule, block, full_every, seed, rho, floor = flags
        time_limit = options.get("time_limit")
        every = full_every or agg.w.shape[0]
        if schedule == "working-set":
            return self.working_set(agg, block, ctx, options)
        if schedule == "priority":
            return self.priority(agg, block, every, seed, X, rho, floor, time_limit,
                                 ctx.staleness)
        return SCHEDULES[schedule](agg, block, every, seed, time_limit, ctx.staleness)

    def _parts(self, agg, ctx, flags, options, sq_norms=None):
        """The K schedules of ``--schedulers K``, one per range of coordinates."""
        schedule, block, full_every, seed, rho, floor = flags
        if not self.splits:
            raise DataError(f"--schedulers {ctx.n_schedulers}: {self.name}'s schedules do "
                            "not split over scheduler ranks (lasso's and lda's do); use "
                            "--schedulers 1")
        if schedule == "working-set":
            raise DataError(f"--schedulers {ctx.n_schedulers}: the working-set schedule "
                            "solves its blocks exactly on rank 0 and does not split; use "
                            "--schedule priority, round-robin or random, or --schedulers 1")
        agg.n_parts = K_ = ctx.n_schedulers
        args = (schedule, block, seed, rho, floor, options.get("time_limit"), ctx.staleness)
        n = agg.n if sq_norms is not None else None  # (else worker 0's report)
        return [split.Part(k, K_, _part, args, full_every, sq_norms, n) for k in range(K_)]

    def make_setup(self, data, lam=None, lambda_ratio=0.1, schedule="working-set",
                   block=256, rho=None, floor=0.1, full_every=None, seed=0, **options):
        """``setup(ctx)`` for :func:`strads.run`; ``data()`` gives ``(X, y)`` (called on
        the scheduler rank only). ``options``: the datafit's (``gram_budget`` (MiB) caps
        working-set blocks; ``coef0``: a warm start; the Lasso's ``time_limit``,
        ``intercept``, ``path`` (lambdas, decreasing, from ``lam``: the model's
        ``path_*``), ``path_rounds``; the logistic loss's ``tol``, ``name``, ``ws_min``,
        ``reuse_hessian``, ``intercept_column``, ``gap_ref``)."""
        self.check_flags(schedule, block, rho, floor, lam, lambda_ratio, full_every, options)
        options = {**self.options, **options}
        flags = (schedule, block, full_every, seed, rho, floor)

        def setup(ctx):
            X, y, attrs = self.problem(data, options)
            n = X.shape[0]
            if ctx.n_workers > n:
                raise DataError(f"{ctx.n_workers} workers for {n} samples: each worker "
                                "needs rows")
            kept, p_all = None, X.shape[1]
            # an empty column's coefficient is 0 at the optimum: solve the others only, so
            # a file that names feature 5*10^7 once costs no state per absent feature
            if self.drop_empty and sp.issparse(X) and X.nnz and np.diff(X.indptr).min() == 0:
                kept = np.flatnonzero(np.diff(X.indptr))
                X = X[:, kept]
            lam_ = lam if lam is not None else \
                self.Aggregate.lambda_for(lambda_ratio, X.T @ y, n)
            sq_norms = K.csc_sq_norms(X.indptr, X.data) if sp.issparse(X) \
                else np.einsum("ij,ij->j", X, X)
            agg = self.aggregate(X, y, sq_norms, lam_, ctx, options)
            for k, v in dict(attrs, kept=kept, n_features=p_all).items():
                setattr(agg, k, v)
            coef0 = options.get("coef0")  # a warm start: the workers' first sync
            start = {} if coef0 is None else \
                {"start": agg.warm(np.asarray(coef0, dtype=np.float64)[
                    kept if kept is not None else slice(None)])}
            sched = self._parts(agg, ctx, flags, options, sq_norms) \
                if ctx.n_schedulers > 1 else None
            if sched is None:
                sched = self._schedule(agg, ctx, X, flags, options)
            cuts = api.split_balanced(np.bincount(X.indices, minlength=n) if sp.issparse(X)
                                      else np.ones(n), ctx.n_workers)  # (by non-zeros)
            shards = [dict(row_block(X, a, b), y=y[a:b], **start)
                      for a, b in zip(cuts[:-1], cuts[1:])]
            if isinstance(sched, list) and schedule == "priority":  # (the filter's norms)
                for shard in shards:
                    shard["sq_norms"] = kernel_form(sq_norms)
            return sched, agg, shards

        return setup

    def make_file_setup(self, path, target=None, lam=None, lambda_ratio=0.1,
                        schedule="working-set", block=256, rho=None, floor=0.1,
                        full_every=None, seed=0, **options):
        """``setup(ctx)`` for ``--data PATH``: every worker reads its own part of a LIBSVM
        or MatrixMarket coordinate file, and rank 0 completes its aggregate and schedule
        from worker 0's report; ``.npz`` and dense MatrixMarket files are read on rank 0
        (:meth:`make_setup`, which checks the flags)."""
        if "name" in self.options and not options.get("name"):
            options["name"] = path  # (the path as the user gave it, in messages)
        whole = self.make_setup(lambda: self.data.load(path, target), lam, lambda_ratio,
                                schedule, block, rho, floor, full_every, seed, **options)
        options = {**self.options, **options}
        flags = (schedule, block, full_every, seed, rho, floor)

        def setup(ctx):
            if self.data.needs_rank0(path):
                sched, agg, shards = whole(ctx)
                for shard in shards:  # (a resume on other workers checks the files)
                    shard["content"] = Content(path, target)
                return sched, agg, shards
            agg = self.later(lam, lambda_ratio, ctx, options)
            shard = self.shard(path, target, options)
            if schedule == "priority":  # (its filter runs on the workers: the norms)
                shard["norms"] = True
            shards = [shard] * ctx.n_workers
            if ctx.n_schedulers > 1:  # (their ranges' norms from worker 0's report)
                parts = self._parts(agg, ctx, flags, options)
                if parts is not None:
                    return parts, agg, shards
            sched = _Later(lambda: self._schedule(agg, ctx, None, flags, options))
            return sched, agg, shards

        return setup

    def fit(self, X, y, *, lam=None, lambda_ratio=0.1, schedule="working-set", block=256,
            rho=None, floor=0.1, full_every=None, seed=0, tol=1e-6, max_rounds=100000,
            **kw):
        """Fit the model; returns :class:`strads.Result` (``model['coef']``, ...) on the
        scheduler rank, None on the workers. ``kw``: the datafit's options (see
        :meth:`make_setup`; ``time_limit`` also), the rest to :func:`strads.run`."""
        options = {k: kw.pop(k) for k in list(kw) if k in self.options and k != "time_limit"}
        if "time_limit" in self.options:
            options["time_limit"] = kw.get("time_limit")
        if "tol" in self.options:
            options["tol"] = tol
        setup = self.make_setup(lambda: (X, y), lam, lambda_ratio, schedule, block, rho,
                                floor, full_every, seed, **options)
        return driver.run(setup, self.Update, tol=tol, max_rounds=max_rounds, app=self.name,
                          seed=seed, **kw)

    def build_parser(self):
        from . import cli
        return cli.build_parser(self)

    def main(self, argv=None):
        from . import cli
        return cli.main(self, argv)
