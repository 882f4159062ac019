"""``python -m strads.apps.lasso|logreg [--data FILE] [flags]``: one command line for every
datafit; its texts and extra flags are the datafit's (``help``, ``add_flags``,
``cli_options``)."""
from dataclasses import replace

from ... import cli, driver, params
from ...io import npz
from ..lasso.data import kind_of
from .setup import PARAMS


def build_parser(datafit):
    h = datafit.help
    p = cli.parser(datafit.module, f"{h['description']} {DATA_HELP}", max_rounds=100000,
                   tol=1e-6)
    a = p.add_argument_group(datafit.name)
    a.add_argument("--target", metavar="PATH", help=h["target"] + " (refused with data "
                   "that holds y: LIBSVM, an .npz with y)")
    lam = a.add_mutually_exclusive_group()
    lam.add_argument("--lambda", dest="lam", type=cli.pos_float, default=None,
                     help="the penalty lambda")
    texts = dict(lambda_ratio=h["lambda_ratio"], schedule=h["schedule"], full_every=(
        "priority, round-robin, random: coordinate updates between full rounds (duality "
        f"gap, priorities){h['full_every']}; default: n_features"))
    ps = [replace(p, help=texts.get(p.name, p.help)) for p in PARAMS]
    params.add_flags(lam, ps[:1])
    params.add_flags(a, ps[1:])
    datafit.add_flags(a)
    g = p.add_argument_group("built-in problem (no --data)")
    g.add_argument("--n-samples", type=cli.pos_int, default=2000)
    g.add_argument("--n-features", type=cli.pos_int, default=10000)
    g.add_argument("--density", type=cli.unit_float, default=0.01)
    g.add_argument("--n-informative", type=cli.nonneg_int, default=100)
    g.add_argument("--corr", type=cli.unit_float, default=0.5,
                   help="correlation of neighbouring columns")
    g.add_argument("--snr", type=cli.pos_float, default=3.0, help=h.get("snr"))
    g.add_argument("--dense", action="store_true", help="dense AR(1) design")
    return p


DATA_HELP = ("--data reads LIBSVM/svmlight text, MatrixMarket (.mtx, with --target) or "
             ".npz (X and y, or a scipy.sparse.save_npz matrix with --target), told by the "
             "name: *.mtx, *.mm, *.npz (each also .gz), else LIBSVM. --target is refused "
             "with data that holds y (LIBSVM, an .npz with y). Each worker "
             "reads its own part of a LIBSVM or MatrixMarket coordinate file (gzip: each "
             "worker decompresses the whole file and keeps its part); .npz and dense "
             "MatrixMarket files are read on rank 0.")


def own_target(path):
    """Where the file ``path`` holds y, in words, or None: a LIBSVM file's labels, an
    .npz's array y."""
    kind = kind_of(path)
    return ("its LIBSVM labels" if kind == "svm" else
            "its array y" if kind == "npz" and npz.holds_y(path) else None)


def run(datafit, args):
    flags = (args.lam, args.lambda_ratio, args.schedule, args.block, args.rho, args.floor,
             args.full_every, args.seed)
    if args.data is not None:  # every worker reads its own part of the file
        setup = datafit.make_file_setup(args.data, args.target, *flags, tol=args.tol,
                                        **datafit.cli_options(args, args.data))
    else:  # the built-in problem, generated on rank 0
        data = lambda: datafit.data.make_problem(  # noqa: E731
            args.n_samples, args.n_features, args.density, args.n_informative, args.corr,
            args.snr, args.dense, args.seed)[:2]
        setup = datafit.make_setup(data, *flags, tol=args.tol,
                                   **datafit.cli_options(args, "built-in problem"))
    return driver.run(setup, datafit.Update, app=datafit.name, **cli.engine_kwargs(args))


def main(datafit, argv=None):
    p = build_parser(datafit)
    args = p.parse_args(argv)
    if args.data is not None and not args.data.strip():
        p.error("argument --data: empty path")
    if args.target is not None and args.data is None:
        p.error("--target needs --data (the built-in problem has its own target)")
    if args.target is not None and own_target(args.data):
        p.refuse(f"--target {args.target} would replace the y that --data {args.data} "
                 f"holds ({own_target(args.data)}): --target is for MatrixMarket and "
                 "save_npz data only")
    return cli.main(datafit.module, lambda a: run(datafit, a), args)
