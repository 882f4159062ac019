"""strads: scheduled model-parallel machine learning (STRADS) on MPI and numba.

A custom app subclasses :class:`Schedule`, :class:`Update` and :class:`Aggregate` and
starts with :func:`run`; the same code runs in one process or under ``mpiexec``.
"""
import os
import signal
import sys


def _interrupted(signum, frame):
    """A Ctrl-C while a command line starts (its ranks importing numpy and numba, which
    turn a KeyboardInterrupt into an ImportError): exit 130, as an interrupted run does,
    with one line rather than a traceback a rank. The run's own handlers replace it."""
    if os.environ.get("PMI_RANK", "0") == "0":
        os.write(2, b"strads: interrupted while starting\n")
    os._exit(130)


if sys.argv[:1] == ["-m"]:  # imported to run one of strads' command lines
    signal.signal(signal.SIGINT, _interrupted)
from . import _cache  # noqa: E402

_cache.check()  # before any kernel is loaded from numba's cache
from . import cli  # noqa: E402  (strads.cli.run_app, parser, main: docs/extending.md)
from .api import Aggregate, Context, Result, Schedule, Update, split_balanced
from .driver import run
from .errors import DataError, StalenessError
from .transport import abort_on_uncaught, mpi_world_size

if mpi_world_size() > 1:
    abort_on_uncaught()

__all__ = ["Schedule", "Update", "Aggregate", "Context", "run", "Result", "DataError",
           "StalenessError", "split_balanced", "cli"]
__version__ = "0.1.0"


# scikit-learn estimators (strads.estimators) and load(DIR), imported on first use so
# that `import strads` does not need scikit-learn
_ESTIMATORS = ("Lasso", "LassoCV", "lasso_path", "SparseLogisticRegression",
               "SparseLogisticRegressionCV", "MatrixFactorization", "LDA", "load")


def __getattr__(name):
    if name in _ESTIMATORS:
        try:
            from . import estimators
        except ImportError as exc:
            raise ImportError(f"strads.{name} needs scikit-learn (>= 1.6): "
                              "pip install 'strads[sklearn]'") from exc
        value = getattr(estimators, name)
        globals()[name] = value  # later look-ups skip __getattr__
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__():
    return sorted(set(globals()) | set(_ESTIMATORS))
