"""Parameters, each declared once (:class:`Param`: name, type, default, valid values,
help, whether a resumed run may change it). From the declarations come the command
line's flags (:mod:`strads.cli`), the checks of :func:`strads.run` and of the apps'
``fit`` (:func:`check`), the flags a resume may change (:data:`RESUME_MAY_CHANGE`) and
scikit-learn's parameter constraints (:func:`sklearn_constraints`)."""
import argparse
import math
from dataclasses import dataclass, replace

from .errors import DataError


def _number(kind, low, strict, name, high=None):
    def parse(s):
        try:
            v = kind(s)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{s!r} is not a valid {kind.__name__}") from None
        if kind is float and not math.isfinite(v):
            raise argparse.ArgumentTypeError(f"must be a finite number, got {s}")
        if v <= low if strict else v < low:
            raise argparse.ArgumentTypeError(f"{name} must be {'>' if strict else '>='} {low},"
                                             f" got {s}")
        if high is not None and v > high:
            raise argparse.ArgumentTypeError(f"must be between {low:g} and {high:g}, got {s}")
        return v
    parse.__name__ = name
    return parse


# the command line's parsers: the syntax, finiteness and sign; the rest is check()'s
pos_int = _number(int, 0, True, "a positive integer")
nonneg_int = _number(int, 0, False, "a non-negative integer")
pos_float = _number(float, 0.0, True, "a positive number")
nonneg_float = _number(float, 0.0, False, "a non-negative number")
unit_float = _number(float, 0.0, False, "a non-negative number", high=1)


@dataclass(frozen=True)
class Param:
    """One parameter. ``low``/``high`` bound a number (``closed``: which bounds are
    allowed values: "both", "left", "right", "neither"), ``choices`` a string; ``none``:
    None is allowed too. ``flag`` (default ``--name-with-dashes``; None: no flag) names it
    on the command line, ``label`` in the Python API's messages (default: ``name``);
    ``note`` follows the rule in messages. ``parse``: the command line's parser when it
    is narrower than the rule (:func:`parser_of`)."""
    name: str
    default: object
    help: str = None
    kind: type = None  # int, float, str, bool; default: the default's type
    low: float = None
    high: float = None
    closed: str = "both"
    choices: tuple = None
    none: bool = False
    resume: bool = False  # a resumed run may change it: it stops or shows the run
    flag: str = ""
    label: str = None
    note: str = ""
    metavar: str = None
    parse: object = None

    def __post_init__(self):
        if self.kind is None:
            object.__setattr__(self, "kind", type(self.default))
        if self.flag == "":
            object.__setattr__(self, "flag", "--" + self.name.replace("_", "-"))

    def rule(self):
        """The allowed values, in words (``must be ...``)."""
        if self.choices is not None:
            return "one of " + ", ".join(map(str, self.choices))
        lo, hi = self.closed in ("both", "left"), self.closed in ("both", "right")
        if self.kind is int:
            lo_v = self.low if lo or self.low is None else self.low + 1
            if self.high is None:
                return f"an integer >= {lo_v}"
            return f"an integer from {lo_v} to {self.high if hi else self.high - 1}"
        if self.high is None:
            return f"a finite number {'>=' if lo else '>'} {self.low}"
        return f"in {'[' if lo else '('}{self.low}, {self.high}{']' if hi else ')'}"

    def problem(self, v):
        """None if ``v`` is allowed, else what is wrong with it (``must be ...``)."""
        if self.kind is bool or v is None and (self.none or self.default is None):
            return None
        if self.choices is not None or self.kind is str:
            ok = v in self.choices if self.choices else isinstance(v, str)
        else:
            lo, hi = self.closed in ("both", "left"), self.closed in ("both", "right")
            try:
                ok = (not isinstance(v, bool) and math.isfinite(v)
                      and (self.kind is not int or int(v) == v)
                      and (self.low is None or (v >= self.low if lo else v > self.low))
                      and (self.high is None or (v <= self.high if hi else v < self.high)))
            except (TypeError, ValueError):
                ok = False
        return None if ok else f"must be {self.rule()}{self.note}"


def check(params, values, cli=False):
    """Raise DataError (one line) for the first of ``values`` (name -> value) that its
    declaration in ``params`` refuses, naming it by its flag (``cli``) or its label."""
    for p in params:
        why = p.problem(values[p.name]) if p.name in values else None
        if why:
            v = values[p.name]
            got = repr(v) if isinstance(v, str) else v
            raise DataError(f"{p.flag if cli and p.flag else p.label or p.name} {why}, "
                            f"got {got}")


def parser_of(p):
    """The argparse ``type`` of a flag: a checked number (finite; its sign) or str."""
    if p.parse is not None or p.kind is str or p.choices is not None:
        return p.parse
    if p.kind is float and p.low == 0 and p.high == 1:
        return unit_float
    strict = p.low == 0 and p.closed in ("neither", "right")
    if p.kind is int:
        return pos_int if p.low is not None and p.low >= 1 or strict else nonneg_int
    return pos_float if strict else nonneg_float


def add_flags(group, params, defaults=None):
    """Add a flag for each of ``params`` that has one (``defaults``: name -> default
    replacing the declared one)."""
    for p in params:
        if p.flag is not None:
            kw = dict(action="store_true") if p.kind is bool else dict(
                type=parser_of(p), default=(defaults or {}).get(p.name, p.default),
                choices=p.choices, metavar=p.metavar)
            action = group.add_argument(p.flag, dest=p.name, help=p.help, **kw)
            action.resume = p.resume  # a resumed run may change it (strads.cli)


def sklearn_constraints(params, names=None, **changed):
    """``{name: [constraint, ...]}`` for scikit-learn's ``_parameter_constraints``.
    ``names`` (an estimator's name -> the declared one): only those, under the estimator's
    names; ``changed`` (an estimator's name -> Param fields): where the estimator allows
    other values than the declaration (say, at least one iteration)."""
    from numbers import Integral, Real

    from sklearn.utils._param_validation import Interval, StrOptions

    declared = {p.name: p for p in params}
    out = {}
    for name, of in (names or {n: n for n in declared}).items():
        p = replace(declared[of], **changed.get(name, {}))
        none = p.none or p.default is None and "none" not in changed.get(name, {})
        closed = p.closed  # no upper bound: none at infinity (a float is finite)
        if p.high is None:
            closed = {"both": "left", "right": "neither"}.get(closed, closed)
        c = (["boolean"] if p.kind is bool else [StrOptions(set(p.choices))]
             if p.choices else [str] if p.kind is str else
             [Interval(Integral if p.kind is int else Real, p.low, p.high, closed=closed)])
        out[name] = c + [None] * (none and p.kind is not bool)
    return out


SECONDS = " (seconds)"

#: The engine's parameters: strads.run's keywords and every app's engine flags.
ENGINE = (
    Param("data", None, "input file; none: the built-in deterministic synthetic problem",
          kind=str, metavar="PATH"),
    Param("seed", 0, "seed of the schedule and of the built-in problem", low=0),
    Param("workers", 1, "workers when run in one process, each on a thread of its own "
          "(the same model as mpiexec -n WORKERS+1)", low=1, none=True, resume=True),
    Param("staleness", 0, "rounds the scheduler may run ahead of the slowest result "
          "(0: bulk-synchronous)", low=0),
    Param("max_rounds", None, "stop after this many rounds", kind=int, low=0, none=True,
          resume=True, parse=pos_int),
    Param("time_limit", None, "stop after this much wall time", kind=float, low=0,
          closed="neither", none=True, resume=True, note=SECONDS, metavar="SECONDS"),
    Param("tol", 0.0, "convergence tolerance (0: no tolerance rule; the run still ends at "
          "--max-rounds or at the app's own end: MF's --iters, LDA's --sweeps, a GLM "
          "solved to its rounding floor)", low=0, resume=True),
    Param("out", None, "write summary.json, trace.csv and model.npz here", kind=str,
          resume=True, metavar="DIR"),
    Param("quiet", False, "no progress line", resume=True),
    Param("log_interval", 0.1, "wall time between rows of trace.csv", low=0,
          resume=True, metavar="SECONDS"),
    Param("checkpoint_every", None, "write every rank's state to OUT/checkpoint/ this "
          "often, at a round boundary, and where a signal stops the run (needs --out)",
          kind=float, low=0, closed="neither", none=True, resume=True, note=SECONDS,
          metavar="SECONDS"),
    Param("resume", False, "continue from OUT/checkpoint/: same flags but for the "
          "stopping rules (--max-rounds, --time-limit, --tol and an app's own, such as "
          "MF's --target-test-rmse), --workers, --checkpoint-every, --quiet, "
          "--log-interval, --stall-warn and what only shows the result; bit for bit the "
          "uninterrupted run at --staleness 0", resume=True),
    Param("scheduler", "rank", "under MPI: 'rank' (rank 0 schedules, the others are "
          "workers) or 'replicated' (leaderless: every rank is a worker and runs the "
          "schedule on agreed state, checked every round by a digest)",
          choices=("rank", "replicated")),
    Param("schedulers", 1, "with --scheduler rank: K scheduler ranks (0..K-1), each "
          "scheduling a part of the parameters at the same time; the others are workers "
          "(apps whose schedule splits: lasso with --schedule priority, round-robin or "
          "random; lda)", low=1, metavar="K"),
    Param("rebalance", False, "move rows (samples, documents) from slow workers to fast "
          "ones, by their measured seconds of work (apps whose Update gives and takes "
          "rows: lasso, lda)"),
    Param("rebalance_every", 5.0, "with --rebalance: measure at least this often",
          low=0, closed="neither", resume=True, note=SECONDS, metavar="SECONDS"),
    Param("stall_warn", 300.0, "under MPI: say whom a rank has waited for this long (a "
          "worker, or the ranks yet to start the run)", low=0, closed="neither", none=True,
          resume=True, note=SECONDS, metavar="SECONDS"),
)

#: the flags a resumed run may change: they stop or show the run, not what it computes
RESUME_MAY_CHANGE = frozenset(p.flag for p in ENGINE if p.resume)
