"""The command line every app shares, built from the parameters' declarations
(:mod:`strads.params`): the engine's flags, an app's own, error reporting, outputs.

A custom app gets it in a few lines (``examples/ridge.py``)::

    PARAMS = (Param("lam", 0.1, "the penalty", low=0),)
    strads.cli.run_app("ridge", "Ridge regression", PARAMS,
                       lambda args, **run_kw: fit(..., args.lam, **run_kw))
"""
import argparse
import json
import os
import re
import signal
import sys

from . import params as P
from .errors import DataError
from .outputs import jsonable
from . import transport as _transport
from .transport import launched, start_together
# the flags' types, for apps that add flags of their own
from .params import nonneg_float, nonneg_int, pos_float, pos_int, unit_float  # noqa: F401


#: a help text that states its flag's default ("(default: ...)", "...; default: ...")
STATED = re.compile(r"\(default|\bdefault:")
#: in an argument group's title: its flags describe the built-in problem, refused with --data
BUILTIN = " (no --data)"
#: a built-in problem's flag not given (argparse sets no default over a value already there)
_UNSET = object()


class _Formatter(argparse.ArgumentDefaultsHelpFormatter):
    def _get_help_string(self, action):
        """Every flag shows its default once: unless its help states it already."""
        if STATED.search(action.help) or action.default is argparse.SUPPRESS:
            return action.help
        return action.help + (" (default: none)" if action.default is None
                              else " (default: %(default)s)")


def launched_rank():  # (read before MPI starts: the command line is parsed first)
    return launched("RANK")


class _Parser(argparse.ArgumentParser):
    def _print_message(self, message, file=None):
        if launched_rank() == 0:  # usage, --help, errors: once under mpiexec, not per rank
            super()._print_message(message, file)

    def format_help(self):
        for action in self._actions:  # every flag shows its default, even without help
            if action.help is None:
                action.help = "(default: %(default)s)"
        for g, _ in self._builtin():
            g.description = g.description or "refused with --data (they describe no file)"
        return super().format_help()

    def refuse(self, message):
        """Exit 2 with one line (no usage: the flags parsed; they do not go together)."""
        self.exit(2, f"{self.prog}: error: {message}\n")

    def _builtin(self):
        """(group, its actions) of each group of the built-in problem's flags."""
        return [(g, g._group_actions) for g in self._action_groups
                if BUILTIN in (g.title or "")]

    def parse_args(self, args=None, namespace=None):
        namespace = namespace or argparse.Namespace()
        for _, actions in self._builtin():
            for a in actions:
                if not hasattr(namespace, a.dest):
                    setattr(namespace, a.dest, _UNSET)
        args = super().parse_args(args, namespace)
        for g, actions in self._builtin():  # given with --data: refused, not ignored
            given = [a for a in actions if getattr(args, a.dest) is not _UNSET]
            if given and getattr(args, "data", None) is not None:
                self.refuse(f"{given[0].option_strings[0]} describes the "
                            f"{g.title.split(BUILTIN)[0]}; it has no effect with --data")
            for a in actions:
                if getattr(args, a.dest) is _UNSET:
                    setattr(args, a.dest, a.default)
        # each setting under its flag's name: a resumed run compares them
        args.flag_names = {x.dest: x.option_strings[0] for x in self._actions
                           if x.option_strings and x.dest != "help"}
        args.may_change = {x.option_strings[0] for x in self._actions
                           if getattr(x, "resume", False)}
        args.path_flags = {x.option_strings[0] for x in self._actions if x.metavar == "PATH"}
        return args


def parser(module, description="", max_rounds=None, tol=0.0, tol_note=""):
    """A parser with the engine's flags (``max_rounds`` and ``tol``: this app's
    defaults; ``tol_note``: why this app's tol is what it is), for an app's own to be
    added to (:func:`add_flags`). ``module``: the app's module name, or its script's
    path ending in .py."""
    run = prog_name(module)
    p = _Parser(
        prog=run, description=description, formatter_class=_Formatter,
        epilog=f"Under MPI: mpiexec -n N {run} [flags] runs the scheduler on "
               "rank 0 and N-1 workers (--workers is then ignored); with --schedulers "
               "K, K scheduler ranks and N-K workers; with --scheduler replicated, N "
               "workers that each run the schedule.")
    add_flags(p.add_argument_group("engine"), P.ENGINE,
              {"max_rounds": max_rounds, "tol": tol})
    if tol_note:
        action = next(a for a in p._actions if a.dest == "tol")
        action.help += tol_note
    return p


add_flags = P.add_flags


def prog_name(module):
    """How the app is run: argparse's ``prog``, and the prefix of its every error line."""
    return f"python {module}" if module.endswith(".py") else f"python -m {module}"


def engine_kwargs(args):
    """:func:`strads.run`'s keywords from parsed flags; ``flags``: those a resumed run
    must repeat, by flag name."""
    names = getattr(args, "flag_names", {})
    may_change = P.RESUME_MAY_CHANGE | getattr(args, "may_change", set())
    paths = getattr(args, "path_flags", set())
    flags = {}
    for k, v in vars(args).items():
        flag = names.get(k, "--" + k.replace("_", "-"))
        if k not in ("flag_names", "may_change", "path_flags") and flag not in may_change:
            # a file by its real path: the same file named another way resumes (its
            # content is checked apart, by the inputs' checksums)
            flags[flag] = os.path.realpath(v) if flag in paths and isinstance(v, str) else v
    return dict({p.name: getattr(args, p.name) for p in P.ENGINE if p.name != "data"},
                flags=flags)


def main(module, fn, args):
    """Run ``fn(args)``; print the summary on the scheduler rank; bad input -> one line,
    as argparse's (``module`` as for :func:`parser`). Exit codes: 2 bad input, 3 a
    diverged objective, 128 + N stopped by signal N."""
    prog = _transport.PROG = prog_name(module)  # (under mpiexec a rank's abort says it too)
    try:
        result = fn(args)
    except DataError as e:  # (under mpiexec: on every rank before the run, or agreed)
        rank, line = ((e.rank, str(e)) if e.rank is not None
                      else start_together(str(e)))  # (the other ranks wait for this)
        if launched_rank() == rank:
            print(f"{prog}: error: {line}", file=sys.stderr)
        sys.exit(2)
    except KeyboardInterrupt:  # a second Ctrl-C: abort now, not after a worker's kernel
        print(f"{prog}: interrupted again: aborted", file=sys.stderr)
        sys.stderr.flush()
        sys.stdout.flush()
        os._exit(130)
    if result is not None:
        # non-finite figures as null: json.dumps would write NaN, which is not JSON
        if result.rank == 0:  # (leaderless: every rank has the result; rank 0 prints it)
            say(json.dumps(jsonable(result.summary()), default=float))
        sys.stdout.flush()
        if result.stop_reason == "interrupted":
            sys.exit(128 + result.signal)
        if result.stop_reason == "diverged":
            sys.exit(3)
    return result


def say(line):
    """Print ``line`` on stdout; a reader gone (``| head -1``) ends the process quietly
    with SIGPIPE's status, as a shell tool does (the outputs are written by then)."""
    try:
        print(line, flush=True)
    except BrokenPipeError:
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        sys.exit(128 + signal.SIGPIPE)


def run_app(module, description, params, fit, *, max_rounds=None, tol=0.0, argv=None):
    """The standard command line of an app: the engine's flags and ``params`` (its own
    :class:`strads.params.Param` declarations, checked as declared), then
    ``fit(args, **run_kw)``, which returns :func:`strads.run`'s Result (``run_kw``: the
    engine's keywords); as :func:`main` for the rest. ``module``: as :func:`parser`'s."""
    name = os.path.basename(module)[:-3] if module.endswith(".py") else module
    p = parser(module, description, max_rounds, tol)
    add_flags(p.add_argument_group(name), params)
    args = p.parse_args(argv)

    def run(args):
        P.check(params, vars(args), cli=True)
        return fit(args, **engine_kwargs(args))

    return main(module, run, args)
