"""python -m strads.apps.lasso [--data FILE] [flags]; see --help."""
from ... import cli, engine
from . import LassoUpdate, make_file_setup, make_problem, make_setup
from .schedule import SCHEDULES

MODULE = "strads.apps.lasso"


def build_parser():
    p = cli.parser(MODULE, "Lasso, min 1/(2n)||y - Xb||^2 + lambda||b||_1, by scheduled "
                   "parallel coordinate descent. --data reads LIBSVM/svmlight text, "
                   "MatrixMarket (.mtx, with --target) or .npz (X and y, or a "
                   "scipy.sparse.save_npz matrix with --target). Each worker reads its own "
                   "part of a LIBSVM or MatrixMarket coordinate file (gzip: each worker "
                   "decompresses the whole file and keeps its part); .npz and dense "
                   "MatrixMarket files are read on rank 0.",
                   max_rounds=100000, tol=1e-6)
    a = p.add_argument_group("lasso")
    a.add_argument("--target", metavar="PATH",
                   help="y for a .mtx or sparse .npz --data: .npy or one number per line")
    lam = a.add_mutually_exclusive_group()
    lam.add_argument("--lambda", dest="lam", type=cli.nonneg_float, default=None,
                     help="the penalty lambda")
    lam.add_argument("--lambda-ratio", type=cli.pos_float, default=0.1,
                     help="lambda as a fraction of lambda_max (when --lambda is not given)")
    a.add_argument("--schedule", choices=sorted(SCHEDULES), default="working-set",
                   help="working-set: priority-chosen blocks solved exactly from their "
                        "Gram matrix; priority: STRADS priority sampling + dependency "
                        "filter (--rho); round-robin, random (Shotgun): baselines")
    a.add_argument("--block", type=cli.pos_int, default=256,
                   help="priority, round-robin, random: coordinates updated in parallel "
                        "per round (at most)")
    a.add_argument("--rho", type=cli.unit_float, default=0.1,
                   help="priority: max |correlation| between coordinates of one round")
    a.add_argument("--floor", type=cli.unit_float, default=0.1,
                   help="priority: share of candidates drawn uniformly, so none starves")
    a.add_argument("--full-every", type=cli.pos_int, default=None, metavar="UPDATES",
                   help="priority, round-robin, random: coordinate updates between "
                        "full rounds (duality gap, priorities), at most; priority also "
                        "makes one once the last one's priorities are spent; default: "
                        "n_features")
    a.add_argument("--gram-budget", type=cli.pos_float, default=None, metavar="MiB",
                   help="working-set: memory one round's Gram matrices may take in one "
                        "process; larger working sets are solved in pieces (default: the "
                        "least of 512, 1/8 of ulimit -v, 1/8 of physical memory / ranks on "
                        "the host)")
    g = p.add_argument_group("built-in problem (no --data)")
    g.add_argument("--n-samples", type=cli.pos_int, default=2000)
    g.add_argument("--n-features", type=cli.pos_int, default=10000)
    g.add_argument("--density", type=cli.unit_float, default=0.01)
    g.add_argument("--n-informative", type=cli.nonneg_int, default=100)
    g.add_argument("--corr", type=cli.unit_float, default=0.5,
                   help="correlation of neighbouring columns")
    g.add_argument("--snr", type=cli.pos_float, default=3.0)
    g.add_argument("--dense", action="store_true", help="dense AR(1) design")
    return p


def run(args):
    kw = dict(gram_budget=args.gram_budget, time_limit=args.time_limit)
    flags = (args.lam, args.lambda_ratio, args.schedule, args.block, args.rho, args.floor,
             args.full_every, args.seed)
    if args.data is not None:  # every worker reads its own part of the file
        setup = make_file_setup(args.data, args.target, *flags, **kw)
    else:  # the built-in problem, generated on rank 0
        data = lambda: make_problem(args.n_samples, args.n_features, args.density,  # noqa
                                    args.n_informative, args.corr, args.snr, args.dense,
                                    args.seed)[:2]
        setup = make_setup(data, *flags, **kw)
    return engine.run(setup, LassoUpdate, app="lasso", **cli.engine_kwargs(args))


def main(argv=None):
    p = build_parser()
    args = p.parse_args(argv)
    if args.data is not None and not args.data.strip():
        p.error("argument --data: empty path")
    if args.target is not None and args.data is None:
        p.error("--target needs --data (the built-in problem has its own target)")
    return cli.main(MODULE, run, args)


if __name__ == "__main__":
    main()
