"""The errors every part of strads may raise (no imports: any module can use them)."""


class DataError(ValueError):
    """Bad input (a file, a shape, a flag): the message names where and what."""


class StalenessError(RuntimeError):
    """A worker computed on parameters older than the staleness bound allows."""
