"""What the estimators share: scikit-learn's conventions for n_jobs and random_state, the
check of the parameters, and a fit run on every rank under ``mpiexec``."""
import functools
import os
import signal
from numbers import Integral

import numpy as np
from sklearn.utils import check_random_state
from sklearn.utils._param_validation import Interval, InvalidParameterError

from .._wait import stall_watch
from ..params import ENGINE
from ..transport import EVERY_RANK, mpi_job


#: the constraints of the parameters only the estimators have (joblib's n_jobs: not 0)
N_JOBS = [None, Interval(Integral, None, -1, closed="right"),
          Interval(Integral, 1, None, closed="left")]
RANDOM_STATE = ["random_state", np.random.Generator]
#: how long a rank waits at a fit's start before it says so (the runs' --stall-warn)
STALL_WARN = next(p.default for p in ENGINE if p.name == "stall_warn")


class Count(Interval):
    """scikit-learn's integer interval without bools (True == 1 is not a count)."""

    def is_satisfied_by(self, val):
        return not isinstance(val, bool) and super().is_satisfied_by(val)


class _Checked:
    """Parameters kept as given (scikit-learn's rule) and checked by ``_fit_context`` against
    ``_parameter_constraints``, with no bool where a number is asked (True == 1)."""

    def _set_params(self, values):
        """__init__'s arguments, from its locals()."""
        for name, value in values.items():
            if name != "self":
                setattr(self, name, value)

    @classmethod
    @functools.cache
    def _get_param_names(cls):  # (a clone's and every fit's get_params: once a class)
        return tuple(super()._get_param_names())

    def _validate_params(self):
        super()._validate_params()
        for name, allowed in self._parameter_constraints.items():
            value = getattr(self, name)
            if isinstance(value, bool) and "boolean" not in allowed:
                raise InvalidParameterError(f"The {name!r} parameter of {type(self).__name__} "
                                            f"must not be a bool. Got {value!r} instead.")


def _n_workers(n_jobs, *caps):
    """Workers in one process: None -> 1, -1 -> os.cpu_count(), -2 -> one less, ...
    (joblib's convention), at most ``min(caps)`` (what the app can split the data into)."""
    n = 1 if n_jobs is None else n_jobs if n_jobs > 0 else (os.cpu_count() or 1) + 1 + n_jobs
    return max(1, min([int(n)] + [int(c) for c in caps]))


def _seed(random_state):
    """The app's seed: an int as it is, else one drawn from the RandomState or Generator
    (None: numpy's global RandomState, as scikit-learn does)."""
    if isinstance(random_state, Integral):
        return int(random_state)
    if isinstance(random_state, np.random.Generator):
        return int(random_state.integers(0, 2 ** 31 - 1))
    return int(check_random_state(random_state).randint(0, 2 ** 31 - 1))


def collective(fit):
    """``fit`` (an estimator's, validation included) run on every rank under ``mpiexec``:
    an exception on any rank ends the whole job (its traceback, then MPI_Abort), as the
    other ranks would wait in a collective call; in one process it propagates."""
    @functools.wraps(fit)
    def run(*args, **kw):
        job = mpi_job()
        if job is None:
            return fit(*args, **kw)
        try:
            if hasattr(args[0], "get_params"):
                _same_params(job, args[0])
            return fit(*args, **kw)
        except BaseException as exc:  # noqa: BLE001 -- never leave the other ranks waiting
            job.abort(exc)
    return run


def _same_params(job, est):
    """Every rank fits rank 0's data with rank 0's parameters: a rank whose own differ
    (a sweep, one setting a rank) would silently get rank 0's model, so it is refused."""
    mine = {k: v for k, v in est.get_params(deep=False).items()
            if v is None or isinstance(v, (bool, int, float, str))}
    first = job.bcast(mine if job.rank == 0 else None, watch=stall_watch(
        "strads", STALL_WARN, None, job.rank, EVERY_RANK.format(call=f"{type(est).__name__}.fit")))
    diff = [k for k in sorted(set(mine) | set(first)) if mine.get(k) != first.get(k)
            and repr(mine.get(k)) != repr(first.get(k))]  # (nan: the same setting)
    if diff:
        raise ValueError(
            f"rank {job.rank}: {type(est).__name__}("
            + ", ".join(f"{k}={mine.get(k)!r}" for k in diff) + "), rank 0: "
            + ", ".join(f"{k}={first.get(k)!r}" for k in diff) + ": under mpiexec every "
            "rank fits rank 0's data with rank 0's parameters (fit the settings one after "
            "another, or in jobs of their own)")


def _collective(fit, args, kw, fitted):
    """An app's ``fit(*args, **kw)`` run on every rank (under MPI only rank 0's data is
    used), and ``fitted(result)`` (the fitted attributes) of rank 0's result, everywhere
    (in a :func:`collective` fit). A run that diverged has no model to give: raised."""
    job, res = mpi_job(), fit(*args, **kw)
    if res is not None and res.stop_reason == "diverged":
        raise FloatingPointError(
            f"the fit diverged: objective {res.objective:.6g} at round {res.rounds}; no "
            "model is kept (a schedule other than the default, or columns of very "
            "different scales, can do this: try the default schedule, or scale X)")
    if res is not None and getattr(res, "signal", 0):
        # the run stopped at a round's end for a signal: now its effect (SIGINT's
        # KeyboardInterrupt, SIGTERM's end of the process), not the next statement
        signal.raise_signal(res.signal)
    if job is None:
        return fitted(res)
    return job.bcast(fitted(res) if job.rank == 0 else None)
