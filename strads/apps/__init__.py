"""Apps built on the engine: ``python -m strads.apps.<name>``."""
