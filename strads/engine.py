"""Temporary: the names the apps imported from ``strads.engine`` before the engine was
split (api, driver, worker, outputs). The integrator removes this module once every app
imports from the new modules."""
from .api import Aggregate, Context, Result, Schedule, Update, split_balanced  # noqa: F401
from .driver import run  # noqa: F401
from .errors import DataError, StalenessError  # noqa: F401
from .outputs import jsonable as _jsonable  # noqa: F401
