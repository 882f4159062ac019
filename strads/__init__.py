"""strads: scheduled model-parallel machine learning (STRADS) on MPI and numba.

A custom app subclasses :class:`Schedule`, :class:`Update` and :class:`Aggregate` and
starts with :func:`run`; the same code runs in one process or under ``mpiexec``.
"""
from .engine import (Aggregate, DataError, Result, Schedule, StalenessError, Update, run,
                     split_balanced)

__all__ = ["Schedule", "Update", "Aggregate", "run", "Result", "DataError",
           "StalenessError", "split_balanced"]
__version__ = "0.1.0"
