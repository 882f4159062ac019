"""python -m strads.apps.mf [--data FILE] [flags]; see --help."""
from ... import cli, engine
from . import (BIAS, BIAS_DEFAULT, COLD_START, DUPLICATES, EARLY_STOP, INIT, LAMBDA_WEIGHTING,
               VALIDATION, MFUpdate, make_parallel_setup, validated)
from .schedule import SCHEDULES

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
    a = p.add_argument_group("mf")
    a.add_argument("--rank", type=cli.pos_int, default=8, help="factor rank k")
    a.add_argument("--lambda", dest="lam", type=cli.nonneg_float, default=0.1,
                   help="L2 penalty lambda (0.1: LIBMF's default, per rating): user u's "
                        "term is lambda * n_u * (||w_u||^2 + b_u^2) with --lambda-weighting "
                        "count, lambda * (||w_u||^2 + b_u^2) with none; items alike")
    a.add_argument("--lambda-weighting", choices=LAMBDA_WEIGHTING, default="count",
                   help="count: each user's (item's) penalty is lambda times its number of "
                        "training ratings (LIBMF, ALS-WR, Spark ALS); none: lambda alone, "
                        "the same for every row")
    a.add_argument("--weighted-lambda", action="store_true",
                   help="accepted for old command lines, does nothing: --lambda-weighting "
                        "count is the default")
    a.add_argument("--bias", choices=BIAS, default=BIAS_DEFAULT,
                   help="none; mean: subtract the global mean; full: also user and item "
                        "biases (penalised with their row's factors)")
    a.add_argument("--schedule", choices=sorted(SCHEDULES), default="ccd",
                   help="ccd: CCD++ rank-one blocks; als: alternating least squares "
                        "(baseline) on the same layout")
    a.add_argument("--inner", type=cli.pos_int, default=1,
                   help="ccd: passes over (W column t, H column t) before moving to t+1")
    a.add_argument("--block", type=cli.pos_int, default=1,
                   help="ccd: columns per round (a worker does them one after the other); "
                        "fewer, larger rounds: less per-round latency under MPI, and a "
                        "block's columns are swept tile by tile while its ratings are in "
                        "cache (--block equal to --rank: all of a side's factor columns in one "
                        "round, the fastest per iteration; with one --inner pass each "
                        "bias column leads its side's first block)")
    a.add_argument("--iters", type=cli.pos_int, default=20,
                   help="outer iterations (one sweep over all columns of W and H); with "
                        "--early-stop, the first run's most")
    a.add_argument("--init", choices=INIT, default="svd",
                   help="H's start: svd: orthonormal rows near the top singular vectors "
                        "(one randomized subspace iteration); random: Gaussian")
    a.add_argument("--init-scale", type=cli.pos_float, default=None,
                   help="norm of each starting row of H (default: 1 for svd, "
                        "sqrt(items / rank) for random)")
    a.add_argument("--test-data", metavar="PATH", help="held-out ratings (same formats)")
    a.add_argument("--test-fraction", type=cli.unit_float, default=None,
                   help="hold out this share of --data, chosen by --seed (default: 0.1 for "
                        "the built-in problem, 0 for --data)")
    a.add_argument("--duplicates", choices=DUPLICATES, default="error",
                   help="repeated (user, item) pairs: error, keep the last, or average")
    a.add_argument("--cold-start", choices=COLD_START, default="error",
                   help="held-out ratings of users/items with no training rating: error, "
                        "skip them, or predict from the mean and known biases")
    a.add_argument("--target-test-rmse", type=cli.pos_float, default=None,
                   help="stop once the held-out RMSE is at or below this")
    a.add_argument("--early-stop", metavar="N", type=cli.nonneg_int, default=EARLY_STOP,
                   help="early stopping, in two runs: the first holds out "
                        "--validation-fraction of the training ratings, scores their RMSE "
                        "at every iteration end and stops once it has not improved for N "
                        "iterations (outputs in OUT/validation/); the second fits all the "
                        "training ratings for the best iteration count (summary.json: "
                        "best_iteration, early_stopped, validation_rmse, "
                        "validation_iterations, validation_wall_s; --max-rounds and "
                        "--time-limit bound both runs together). 0: one run of --iters "
                        "iterations (or to --tol), the objective's minimiser, which "
                        "overfits at a small --lambda")
    a.add_argument("--validation-fraction", type=cli.unit_float, default=VALIDATION,
                   metavar="F",
                   help="with --early-stop: the share of the training ratings held out in "
                        "the first run, chosen by --seed (independently of "
                        "--test-fraction's). 0: one run that stops on the held-out set "
                        "(--test-fraction or --test-data) itself and writes its best "
                        "iteration's model (each worker then keeps a copy of its rows of W "
                        "and H: the factor rows' memory doubles)")
    g = p.add_argument_group("built-in problem (no --data)")
    g.add_argument("--n-users", type=cli.pos_int, default=3000)
    g.add_argument("--n-items", type=cli.pos_int, default=1500)
    g.add_argument("--n-ratings", type=cli.pos_int, default=150000)
    g.add_argument("--true-rank", type=cli.pos_int, default=8)
    g.add_argument("--noise", type=cli.nonneg_float, default=0.5)
    g.add_argument("--alpha", type=cli.nonneg_float, default=0.7,
                   help="power-law exponent of user and item popularity")
    return p


def check_flags(args):
    """What the flags alone can tell, before any file is read."""
    if args.test_data and args.test_fraction:
        raise engine.DataError("give --test-data or --test-fraction, not both")
    if args.test_fraction is not None and args.test_fraction >= 1:
        raise engine.DataError("--test-fraction must be below 1")
    if args.weighted_lambda and args.lambda_weighting != "count":
        raise engine.DataError("--weighted-lambda contradicts --lambda-weighting "
                               f"{args.lambda_weighting}")
    if args.validation_fraction >= 1:
        raise engine.DataError("--validation-fraction must be below 1")
    if args.early_stop and not args.validation_fraction and not args.test_data and \
            not _test_fraction(args):
        raise engine.DataError(f"--early-stop {args.early_stop} with --validation-fraction 0 "
                               "stops on the held-out set: give --test-fraction or "
                               "--test-data")


def _test_fraction(args):
    """--test-fraction, or its default: 0.1 for the built-in problem, 0 with --data."""
    if args.test_fraction is not None:
        return args.test_fraction
    return 0.0 if args.data else 0.1


def run(args):
    """Each worker reads its part of --data (and --test-data) or generates its part of
    the built-in problem: the scheduler rank reads only the lines before the ratings."""
    check_flags(args)
    if args.data:
        frac, builtin = args.test_fraction or 0.0, None
    else:
        frac = 0.1 if args.test_fraction is None else args.test_fraction
        builtin = (args.n_users, args.n_items, args.n_ratings, args.true_rank, args.noise,
                   args.alpha, args.seed)
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
        return engine.run(setup, MFUpdate, app="mf", **{**kw, **limits})

    return validated(one, args.early_stop, args.validation_fraction, args.iters,
                     **{k: kw[k] for k in ("out", "resume", "max_rounds", "time_limit")})


def main(argv=None):
    args = build_parser().parse_args(argv)
    return cli.main(MODULE, run, args)


if __name__ == "__main__":
    main()
