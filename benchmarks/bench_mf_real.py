"""Matrix factorization on real ratings (MovieLens 100k): strads against LIBMF. Method and
figures: docs/benchmarks.md."""
import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import libmf_run  # noqa: E402
from real_data import FetchError, movielens_100k  # noqa: E402

import strads  # noqa: E402
from strads.apps import mf  # noqa: E402
from strads.apps.mf import data as D  # noqa: E402

RANK, ITERS, LAMBDAS = 40, 50, (0.02, 0.05, 0.1, 0.2)
BLOCK = RANK  # every factor column of a side in one round


def libmf(p, lam, iters):
    wall, rmse = libmf_run(p, RANK, lam, iters)
    return {"s": wall, "test_rmse": rmse, "iters": iters}


def strads_run(p, lam, rank=RANK, tol=0.0, **kw):
    setup = mf.make_setup(lambda: p, rank=rank, lam=lam, **kw)
    t0 = time.perf_counter()
    res = strads.run(setup, mf.MFUpdate, workers=1, quiet=True, tol=tol, app="mf")
    wall = time.perf_counter() - t0
    x = res.extra
    return {"s": wall, "loop_s": res.wall_s, "test_rmse": x["test_rmse"],
            "iters": x["iterations"], "best_iteration": x.get("best_iteration"),
            "res": res}


def strads_defaults(p, lam, **kw):
    """``mf.fit`` with its defaults but for rank and lambda (``kw``: the exceptions), on
    p's training ratings (its ids are 0..m-1: the remap is the identity), scored on p's
    test ratings."""
    t0 = time.perf_counter()
    res = mf.fit(p.users, p.items, p.ratings, test=(p.test_users, p.test_items,
                                                    p.test_ratings),
                 rank=RANK, lam=lam, workers=1, quiet=True, **kw)
    x = res.extra
    return {"s": time.perf_counter() - t0, "loop_s": res.wall_s + x.get("validation_wall_s", 0),
            "test_rmse": x["test_rmse"], "iters": x["iterations"],
            "best_iteration": x.get("best_iteration")}


def strads_validated(p, p_val, lam, **kw):
    """Early stopping on p_val's held-out (validation) ratings, then a refit on all of
    p's training ratings for the best iteration count, scored on p's test ratings."""
    a = strads_run(p_val, lam, iters=ITERS, early_stop=2, **kw)
    b = strads_run(p, lam, iters=a["best_iteration"], **kw)
    b["s"] += a["s"]
    b["loop_s"] += a["loop_s"]
    b["val_rmse"], b["val_iters"] = a["test_rmse"], a["iters"]
    return b


CONFIGS = {
    "strads ccd, bias full (default model), 50 it": dict(iters=ITERS),
    "strads ccd, bias mean (LIBMF's model), 50 it": dict(iters=ITERS, bias="mean"),
    "strads ccd, bias full, block 40, 50 it": dict(iters=ITERS, bias="full", block=BLOCK),
    "strads ccd, bias full, block 40, tol 1e-4 (<= 50 it)": dict(iters=ITERS, bias="full",
                                                                block=BLOCK, tol=1e-4),
    "strads ccd, bias full, block 40, validation early stop + refit": dict(
        bias="full", block=BLOCK, val=True),
}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--json", help="write the figures here")
    a = ap.parse_args()
    try:
        u, i, r = movielens_100k()
    except FetchError as e:
        sys.exit(f"error: {e}")
    p = D.prepare(D.from_arrays(u, i, r, "ratings"), test_fraction=0.2, seed=0)
    # the validation split: 10% of the training ratings (ids stay the same: every user
    # and item keeps a training rating, so the remap is the identity)
    p_val = D.prepare(D.from_arrays(p.users, p.items, p.ratings, "ratings"),
                      test_fraction=0.1, seed=1)
    assert p_val.shape == p.shape
    print(f"MovieLens 100k: {p.shape[0]} users x {p.shape[1]} items, "
          f"{p.ratings.shape[0]} training and {p.test_ratings.shape[0]} held-out ratings "
          f"(validation for early stopping: {p_val.test_ratings.shape[0]} of the training "
          f"ratings); rank {RANK}, one thread each, best of {a.repeat} alternating runs",
          flush=True)
    mf.MFUpdate.warmup()
    runs = {}  # (name, lam) -> list of runs

    def add(name, lam, out):
        runs.setdefault((name, lam), []).append(out)

    for rep in range(a.repeat):
        for lam in LAMBDAS:
            add("LIBMF SGD, 50 it", lam, libmf(p, lam, ITERS))
            for name, cfg in CONFIGS.items():
                cfg = dict(cfg)
                if cfg.pop("val", False):
                    add(name, lam, strads_validated(p, p_val, lam, **cfg))
                else:
                    add(name, lam, strads_run(p, lam, **cfg))
            add("LIBMF defaults (20 it)", lam, libmf(p, lam, 20))
            add("strads defaults", lam, strads_defaults(p, lam))
            add("strads defaults + bias mean", lam, strads_defaults(p, lam, bias="mean"))
            add("strads defaults + no early stopping", lam,
                strads_defaults(p, lam, early_stop=None))
        print(f"  run {rep + 1} of {a.repeat} done", flush=True)

    best = {k: min(v, key=lambda x: x["s"]) for k, v in runs.items()}
    names = ["LIBMF SGD, 50 it", *CONFIGS]
    out = {"rank": RANK, "iters": ITERS, "repeat": a.repeat, "grid": {}, "defaults": {}}
    print(f"\nrank {RANK}, up to {ITERS} iterations; time: best of {a.repeat} (s), "
          f"RMSE on the 20% held-out ratings")
    for name in names:
        print(f"{name}:")
        for lam in LAMBDAS:
            b = best[(name, lam)]
            times = ", ".join(f"{x['s']:.3f}" for x in runs[(name, lam)])
            extra = f", loop {b['loop_s']:.3f}s" if "loop_s" in b else ""
            extra += f", {b['iters']} it" if "loop_s" in b else ""
            if "val_rmse" in b:
                extra += (f" (validation: best at {b['iters']} of {b['val_iters']}, "
                          f"val RMSE {b['val_rmse']:.4f})")
            print(f"  lambda {lam:<5}: test RMSE {b['test_rmse']:.4f}  {b['s']:.3f}s "
                  f"(runs {times}){extra}")
            out["grid"].setdefault(name, {})[lam] = {k: v for k, v in b.items()
                                                     if k != "res"}
    lm_lam = min(LAMBDAS, key=lambda lam: best[("LIBMF SGD, 50 it", lam)]["test_rmse"])
    lm = best[("LIBMF SGD, 50 it", lm_lam)]
    print(f"\nbest over the grid: LIBMF {lm['test_rmse']:.4f} at lambda {lm_lam} in "
          f"{lm['s']:.3f}s")
    for name in CONFIGS:
        lam = min(LAMBDAS, key=lambda lam: best[(name, lam)]["test_rmse"])
        b = best[(name, lam)]
        verdict = ("as good or better" if b["test_rmse"] <= lm["test_rmse"] else "worse")
        print(f"  {name}: {b['test_rmse']:.4f} at lambda {lam} ({verdict}) in "
              f"{b['s']:.3f}s = {b['s'] / lm['s']:.2f}x LIBMF's time")
        out["grid"][name]["best"] = {"lambda": lam, "test_rmse": b["test_rmse"],
                                     "s": b["s"], "ratio": b["s"] / lm["s"]}
    print("\ndefaults (only rank and lambda given), test RMSE and time:")
    for lam in LAMBDAS:
        lmd, sd = best[("LIBMF defaults (20 it)", lam)], best[("strads defaults", lam)]
        print(f"  lambda {lam:<5}: LIBMF {lmd['test_rmse']:.4f} {lmd['s']:.3f}s, strads "
              f"{sd['test_rmse']:.4f} {sd['s']:.3f}s ({sd['iters']} it, early stopping) = "
              f"{sd['s'] / lmd['s']:.2f}x LIBMF's time; strads "
              f"{'as good or better' if sd['test_rmse'] <= lmd['test_rmse'] else 'worse'}")
        other = {}
        for label, name in (("--bias mean", "strads defaults + bias mean"),
                            ("--early-stop 0", "strads defaults + no early stopping")):
            sf = other[name] = best[(name, lam)]
            print(f"  {'':13s}  strads with {label}: {sf['test_rmse']:.4f} {sf['s']:.3f}s "
                  f"({sf['iters']} it) = {sf['s'] / lmd['s']:.2f}x; "
                  f"{'as good or better' if sf['test_rmse'] <= lmd['test_rmse'] else 'worse'}")
        out["defaults"][lam] = {"libmf": dict(lmd), "strads": dict(sd),
                                "strads_bias_mean": other["strads defaults + bias mean"],
                                "strads_no_early_stop":
                                    other["strads defaults + no early stopping"]}
    if a.json:
        Path(a.json).write_text(json.dumps(out, indent=1, default=float))


if __name__ == "__main__":
    main()
