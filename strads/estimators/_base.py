"""What the estimators share: scikit-learn's conventions for n_jobs and random_state, the
checks of a parameter, and a fit run on every rank under ``mpiexec``."""
import contextlib
import numbers
import os

import numpy as np
from sklearn.utils import check_random_state

from ..transport import mpi_job


def _n_workers(n_jobs, *caps):
    """Workers in one process: None -> 1, -1 -> os.cpu_count(), -2 -> one less, ...
    (joblib's convention), at most ``min(caps)`` (what the app can split the data into)."""
    if n_jobs is None:
        n = 1
    elif isinstance(n_jobs, numbers.Integral) and not isinstance(n_jobs, bool) and n_jobs != 0:
        n = int(n_jobs) if n_jobs > 0 else max(1, (os.cpu_count() or 1) + 1 + int(n_jobs))
    else:
        raise ValueError(f"n_jobs must be None or a non-zero integer, got {n_jobs!r}")
    return max(1, min([n] + [int(c) for c in caps]))


def _seed(random_state):
    """The app's seed: an int as it is (>= 0), else one drawn from the RandomState or
    Generator (None: numpy's global RandomState, as scikit-learn does)."""
    if isinstance(random_state, numbers.Integral) and not isinstance(random_state, bool):
        if random_state < 0:
            raise ValueError(f"random_state must be >= 0, got {random_state}")
        return int(random_state)
    if isinstance(random_state, np.random.Generator):
        return int(random_state.integers(0, 2 ** 31 - 1))
    return int(check_random_state(random_state).randint(0, 2 ** 31 - 1))


def _check_number(name, value, low=None, integer=False, inclusive=True):
    kind = numbers.Integral if integer else numbers.Real
    if not isinstance(value, kind) or isinstance(value, bool) or not np.isfinite(value):
        raise ValueError(f"{name} must be a finite {'integer' if integer else 'number'}, "
                         f"got {value!r}")
    if low is not None and (value < low or (not inclusive and value == low)):
        raise ValueError(f"{name} must be {'>=' if inclusive else '>'} {low}, got {value!r}")


def _check_choice(name, value, choices):
    if not isinstance(value, str) or value not in choices:
        raise ValueError(f"{name} must be one of {sorted(choices)}, got {value!r}")


@contextlib.contextmanager
def _whole_job(job):
    """Under MPI, an exception ends the whole job (traceback, then MPI_Abort), since the
    other ranks wait in a collective call; in one process it propagates."""
    if job is None:
        yield
        return
    try:
        yield
    except BaseException as exc:  # noqa: BLE001 -- never leave the other ranks waiting
        job.abort(exc)


def _collective(fit_scheduler, serve):
    """Run a fit on every rank and return the fitted attributes everywhere.

    ``fit_scheduler(run)`` runs on rank 0 (or alone, in one process) and returns the
    fitted attributes; it starts each engine run with ``run(fn, *args, **kw)``. Under
    MPI, ``serve()`` is what a worker rank does for each of those runs (the same app
    ``fit()`` with its own arguments: only rank 0's data is used), told by a broadcast
    whether another run follows; then rank 0 broadcasts the attributes."""
    job = mpi_job()
    if job is None:
        return fit_scheduler(lambda fn, *a, **kw: fn(*a, **kw))
    with _whole_job(job):
        if job.rank == 0:
            def run(fn, *a, **kw):
                job.bcast(True)
                return fn(*a, **kw)

            attrs = fit_scheduler(run)
            job.bcast(False)
        else:
            while job.bcast(None):
                serve()
            attrs = None
        return job.bcast(attrs)
