"""The errors every part of strads may raise (no imports: any module can use them)."""


class DataError(ValueError):
    """Bad input (a file, a shape, a flag): the message names where and what.
    ``rank``: under mpiexec, the rank that refused and says so (None: this one)."""

    rank = None


class StalenessError(RuntimeError):
    """A worker computed on parameters older than the staleness bound allows."""
