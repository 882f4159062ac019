"""python -m strads.apps.lasso [--data FILE] [flags]; see --help."""
from . import DATAFIT

build_parser, main = DATAFIT.build_parser, DATAFIT.main
if __name__ == "__main__":
    main()
