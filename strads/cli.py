"""What every app's command line shares: the engine flags, error reporting, outputs."""
import argparse
import json
import math
import os
import sys

from .errors import DataError
from .outputs import jsonable


def _number(kind, low, strict, name):
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
        return v
    parse.__name__ = name
    return parse


pos_int = _number(int, 0, True, "a positive integer")
nonneg_int = _number(int, 0, False, "a non-negative integer")
pos_float = _number(float, 0.0, True, "a positive number")
nonneg_float = _number(float, 0.0, False, "a non-negative number")


def unit_float(s):
    v = nonneg_float(s)
    if v > 1:
        raise argparse.ArgumentTypeError(f"must be between 0 and 1, got {s}")
    return v


class _Parser(argparse.ArgumentParser):
    def format_help(self):
        for action in self._actions:  # every flag shows its default, even without help
            if action.help is None:
                action.help = "(default: %(default)s)"
        return super().format_help()

    def parse_args(self, *a, **kw):
        args = super().parse_args(*a, **kw)
        # each setting under its flag's name: a resumed run compares them
        args.flag_names = {x.dest: x.option_strings[0] for x in self._actions
                           if x.option_strings and x.dest != "help"}
        return args


def parser(module, description, max_rounds, tol):
    """The engine flags, for an app's own to be added to (``module``: the app's module
    name, or its script's path ending in .py)."""
    run = f"python {module}" if module.endswith(".py") else f"python -m {module}"
    p = _Parser(
        prog=run, description=description,
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
        epilog=f"Under MPI: mpiexec -n N {run} [flags] runs the scheduler on "
               "rank 0 and N-1 workers (--workers is then ignored); with --schedulers "
               "K, K scheduler ranks and N-K workers; with --scheduler replicated, N "
               "workers that each run the schedule.")
    g = p.add_argument_group("engine")
    g.add_argument("--data", metavar="PATH",
                   help="input file; none: the built-in deterministic synthetic problem")
    g.add_argument("--seed", type=nonneg_int, default=0,
                   help="seed of the schedule and of the built-in problem")
    g.add_argument("--workers", type=pos_int, default=1,
                   help="workers when run in one process, each on a thread of its own "
                        "(the same model as mpiexec -n WORKERS+1)")
    g.add_argument("--staleness", type=nonneg_int, default=0,
                   help="rounds the scheduler may run ahead of the slowest result "
                        "(0: bulk-synchronous)")
    g.add_argument("--max-rounds", type=pos_int, default=max_rounds,
                   help="stop after this many rounds")
    g.add_argument("--time-limit", type=pos_float, default=None, metavar="SECONDS",
                   help="stop after this much wall time")
    g.add_argument("--tol", type=nonneg_float, default=tol,
                   help="convergence tolerance (0: run to --max-rounds)")
    g.add_argument("--out", metavar="DIR",
                   help="write summary.json, trace.csv and model.npz here")
    g.add_argument("--quiet", action="store_true", help="no progress line")
    g.add_argument("--log-interval", type=nonneg_float, default=0.1, metavar="SECONDS",
                   help="wall time between rows of trace.csv")
    g.add_argument("--checkpoint-every", type=pos_float, default=None, metavar="SECONDS",
                   help="write every rank's state to OUT/checkpoint/ this often, at a round "
                        "boundary, and where a signal stops the run (needs --out; default: none)")
    g.add_argument("--resume", action="store_true",
                   help="continue from OUT/checkpoint/: same flags but for stopping rules, "
                        "--checkpoint-every, --quiet and --log-interval; bit for bit the "
                        "uninterrupted run at --staleness 0")
    g.add_argument("--scheduler", choices=("rank", "replicated"), default="rank",
                   help="under MPI: 'rank' (rank 0 schedules, the others are workers) or "
                        "'replicated' (leaderless: every rank is a worker and runs the "
                        "schedule on agreed state, checked every round by a digest)")
    g.add_argument("--schedulers", type=pos_int, default=1, metavar="K",
                   help="with --scheduler rank: K scheduler ranks (0..K-1), each "
                        "scheduling a part of the parameters at the same time; the others "
                        "are workers (apps whose schedule splits: lasso)")
    g.add_argument("--rebalance", action="store_true",
                   help="move rows (samples, documents) from slow workers to fast ones, "
                        "by their measured seconds of work")
    g.add_argument("--rebalance-every", type=pos_float, default=5.0, metavar="SECONDS",
                   help="with --rebalance: measure and move this often")
    g.add_argument("--stall-warn", type=pos_float, default=300.0, metavar="SECONDS",
                   help="under MPI: say which worker a rank has waited for this long")
    return p


#: engine flags that never change what a run computes: not compared on --resume
_NOT_COMPARED = ("workers", "out", "quiet", "log_interval", "checkpoint_every", "resume",
                 "stall_warn", "max_rounds", "time_limit", "tol", "flag_names",
                 "rebalance_every")


def engine_kwargs(args):
    names = getattr(args, "flag_names", {})
    flags = {names.get(k, "--" + k.replace("_", "-")): v for k, v in vars(args).items()
             if k not in _NOT_COMPARED}
    return dict(workers=args.workers, staleness=args.staleness, max_rounds=args.max_rounds,
                time_limit=args.time_limit, tol=args.tol, out=args.out, quiet=args.quiet,
                log_interval=args.log_interval, checkpoint_every=args.checkpoint_every,
                resume=args.resume, stall_warn=args.stall_warn, flags=flags, seed=args.seed,
                scheduler=args.scheduler, schedulers=args.schedulers,
                rebalance=args.rebalance,
                rebalance_every=args.rebalance_every)


def main(prog, fn, args):
    """Run ``fn(args)``; print the summary on the scheduler rank; bad input -> one line.
    Exit codes: 2 bad input, 3 a diverged objective, 128 + N stopped by signal N."""
    try:
        result = fn(args)
    except DataError as e:
        print(f"{prog}: error: {e}", file=sys.stderr)
        sys.exit(2)
    except KeyboardInterrupt:  # a second Ctrl-C: abort now, not after a worker's kernel
        print(f"{prog}: interrupted again: aborted", file=sys.stderr)
        sys.stderr.flush()
        sys.stdout.flush()
        os._exit(130)
    if result is not None:
        # non-finite figures as null: json.dumps would write NaN, which is not JSON
        if result.rank == 0:  # (leaderless: every rank has the result; rank 0 prints it)
            print(json.dumps(jsonable(result.summary()), default=float))
        sys.stdout.flush()
        if result.stop_reason == "interrupted":
            sys.exit(128 + result.signal)
        if result.stop_reason == "diverged":
            sys.exit(3)
    return result
