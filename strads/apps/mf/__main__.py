"""python -m strads.apps.mf [--data FILE] [flags]; see --help."""
from ... import cli, driver
from ...errors import DataError
from ...params import Param
from . import PARAMS, MFUpdate, _check, check_held_out, make_parallel_setup, validated

MODULE = "strads.apps.mf"


def build_parser():
    p = cli.parser(MODULE, "Matrix factorization (explicit ratings) by scheduled rank-one "
                   "coordinate descent (CCD++) or ALS. Minimises sum over training ratings "
                   "of (r_ui - mu - b_u - b_i - w_u.h_i)^2 + sum_u reg_u (||w_u||^2 + b_u^2) "
                   "+ sum_i reg_i (||h_i||^2 + b_i^2), where by default (--lambda-weighting "
                   "count) reg_u = lambda * n_u and reg_i = lambda * n_i, n_u (n_i) the "
                   "number of training ratings of user u (item i): the per-rating weighted "
                   "lambda of LIBMF, ALS-WR and Spark's ALS; --lambda-weighting none: reg = "
                   "lambda. mu is the global mean (--bias mean, full), b_u, b_i exist with "
                   "--bias full only. --data reads MatrixMarket coordinate files or "
                   "'user item rating [timestamp]' lines (tab, comma or space separated, "
                   "optional header: MovieLens u.data, ratings.csv); ids are remapped.",
                   max_rounds=10 ** 9, tol=1e-6)
    cli.add_flags(p.add_argument_group("mf"), PARAMS)
    cli.add_flags(p.add_argument_group("built-in problem (no --data)"), BUILTIN)
    return p


#: the built-in problem's size and shape (make_problem's arguments)
BUILTIN = (Param("n_users", 3000, low=1), Param("n_items", 1500, low=1),
           Param("n_ratings", 150000, low=1), Param("true_rank", 8, low=1),
           Param("noise", 0.5, low=0),
           Param("alpha", 0.7, "power-law exponent of user and item popularity", low=0))


def check_flags(args):
    """What the flags alone can tell, before any file is read."""
    _check(cli=True, **{p.name: getattr(args, p.name) for p in PARAMS + BUILTIN})
    if args.test_data and args.test_fraction:
        raise DataError("give --test-data or --test-fraction, not both")
    if args.weighted_lambda and args.lambda_weighting != "count":
        raise DataError(f"--weighted-lambda contradicts --lambda-weighting "
                        f"{args.lambda_weighting}")
    check_held_out(args.early_stop, args.validation_fraction,
                   args.test_data or _test_fraction(args), cli=True)


def _test_fraction(args):
    """--test-fraction, or its default: 0.1 for the built-in problem, 0 with --data."""
    if args.test_fraction is not None:
        return args.test_fraction
    return 0.0 if args.data else 0.1


def run(args):
    """Each worker reads its part of --data (and --test-data) or generates its part of
    the built-in problem: the scheduler rank reads only the lines before the ratings."""
    check_flags(args)
    frac = _test_fraction(args)
    builtin = None if args.data else (args.n_users, args.n_items, args.n_ratings,
                                      args.true_rank, args.noise, args.alpha, args.seed)
    kw = cli.engine_kwargs(args)

    def one(validation, early_stop, iters, report, limits):
        setup = make_parallel_setup(
            args.data or None, args.test_data or None, builtin, test_fraction=frac,
            duplicates=args.duplicates, cold_start=args.cold_start, rank=args.rank,
            lam=args.lam, schedule=args.schedule, inner=args.inner, iters=iters,
            bias=args.bias, weighted=args.lambda_weighting == "count", init=args.init,
            init_scale=args.init_scale, seed=args.seed,
            target_test_rmse=None if validation else args.target_test_rmse,
            block=args.block, early_stop=early_stop, validation=validation, report=report)
        return driver.run(setup, MFUpdate, app="mf", **{**kw, **limits})

    return validated(one, args.early_stop, args.validation_fraction, args.iters,
                     **{k: kw[k] for k in ("out", "resume", "max_rounds", "time_limit")})


def main(argv=None):
    args = build_parser().parse_args(argv)
    return cli.main(MODULE, run, args)


if __name__ == "__main__":
    main()
