"""Reading input files, one home for every app (docs/architecture.md)."""
