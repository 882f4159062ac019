"""MF parallel loading: each worker reads its part of --data (or generates its part of the
built-in problem); the results do not depend on W, and bad input is refused with the
same one line. (Under mpiexec: tests/test_contract.py.)"""
import gzip

import numpy as np
import pytest

import strads
from strads.apps import mf
from strads.apps.mf import __main__ as mf_cli
from strads.apps.mf import data as D


def udata(path, m=60, n=40, count=900, seed=2, dup=False):
    rng = np.random.default_rng(seed)
    keys = rng.choice(m * n, count, replace=False)
    u, i = 7 * (keys // n) + 3, 5 * (keys % n) - 40
    r = np.round(rng.uniform(0.5, 5, count), 2)
    lines = [f"{a}\t{b}\t{float(c)!r}\t8812{k}\n" for k, (a, b, c) in enumerate(zip(u, i, r))]
    if dup:
        lines.append(lines[3].replace("\t8812", "\t9"))
    path.write_text("".join(lines))
    return u, i, r


def in_process(args, w):
    return mf_cli.run(mf_cli.build_parser().parse_args(args + ["--workers", str(w),
                                                               "--quiet"]))


ARGS = ["--rank", "3", "--iters", "3", "--tol", "0", "--bias", "full"]


def test_parallel_read_equals_the_serial_reader(tmp_path):
    """What the workers read and agree on (ids, split, counts) is the one-process
    reader's, for any W; the split does not depend on W."""
    f = tmp_path / "u.data"
    udata(f)
    t = D.read_ratings(str(f))
    p = D.prepare(t, test_fraction=0.2, seed=4)
    runs = [in_process(["--data", str(f), "--test-fraction", "0.2", "--seed", "4"] + ARGS,
                       w) for w in (1, 2, 3)]
    for res in runs:
        np.testing.assert_array_equal(res.model["user_ids"], p.user_ids)
        np.testing.assert_array_equal(res.model["item_ids"], p.item_ids)
        assert res.extra["n_train"] == len(p.ratings)
        assert res.extra["n_test"] == len(p.test_ratings)
        e = p.test_ratings - mf.predict(res.model, p.user_ids[p.test_users],
                                        p.item_ids[p.test_items])
        assert res.extra["test_rmse"] == pytest.approx(np.sqrt(np.mean(e ** 2)), rel=1e-10)
        for k in ("W", "H", "user_bias", "item_bias", "mean"):
            np.testing.assert_array_equal(res.model[k], runs[0].model[k], err_msg=k)
    # the same model as fit() on the arrays (shards built on rank 0), up to rounding
    ref = mf.fit(t.users, t.items, t.ratings, test_fraction=0.2, seed=4, rank=3, iters=3,
                 tol=0, bias="full", workers=2, quiet=True)
    np.testing.assert_allclose(runs[1].model["W"], ref.model["W"], rtol=1e-8, atol=1e-10)
    assert runs[1].objective == pytest.approx(ref.objective, rel=1e-10)


def test_ids_beyond_int32_widen_and_errors_after_them_name_their_line(tmp_path):
    """The parser's int32 ids widen to int64 within a part (on an id the byte parser
    reads and on one left to the line-by-line rules): the same ids and model as the
    one-process reader for any W; a duplicate past them names both lines, plain and
    gzip (the lines are found by reading the part again)."""
    rows = [f"{k % 50 + 1}\t{k % 7 + 1}\t{k % 5 + 1}\n" for k in range(300)]
    rows += [f"{2 ** 40 + k}\t{k % 7 + 1}\t3\n" for k in range(60)]
    rows += [f"{-2 ** 62 - 9}\t2\t4.5\n", f"{2 ** 31}\t{2 ** 33}\t1\n"]
    f = tmp_path / "u.data"
    f.write_text("".join(rows))
    p = D.prepare(D.read_ratings(str(f)))
    assert p.user_ids.dtype == np.int64 and p.user_ids[0] == -2 ** 62 - 9
    runs = [in_process(["--data", str(f)] + ARGS, w) for w in (1, 2, 3)]
    for res in runs:
        np.testing.assert_array_equal(res.model["user_ids"], p.user_ids)
        np.testing.assert_array_equal(res.model["item_ids"], p.item_ids)
        np.testing.assert_array_equal(res.model["W"], runs[0].model["W"])
    rows.append(f"{2 ** 40 + 3}\t4\t1\n")  # line 304's pair again, as line 363
    message = ("f:363: duplicate rating of user 1099511627779, item 4 (first at line "
               "304); pass duplicates='last' or 'mean' (--duplicates) to keep one")
    for data in ("".join(rows).encode(), gzip.compress("".join(rows).encode())):
        (tmp_path / "f").write_bytes(data)
        for w in (1, 2, 3):
            with pytest.raises(strads.DataError) as e:
                in_process(["--data", str(tmp_path / "f"), "--rank", "1"], w)
            assert str(e.value) == message.replace("f:", f"{tmp_path / 'f'}:")


@pytest.mark.parametrize("text,extra,message", [
    ("1\t2\t3\n4\t5\t1\n" * 3 + "7\t8\tx\n", [], "f:7: rating 'x' is not a number"),
    ("".join(f"{k}\t{k % 5}\t3\n" for k in range(1, 40)) + "3\t3\t5\n", [],
     "f:40: duplicate rating of user 3, item 3 (first at line 3); pass duplicates='last' "
     "or 'mean' (--duplicates) to keep one"),
    ("".join(f"{k}\t{k % 5}\t3\n" for k in range(1, 40)) + "1\t2\t1e200\n", [],
     "f:40: rating 1e+200 is too large: the sum of squared ratings overflows"),
    ("%%MatrixMarket matrix coordinate real general\n9 9 30\n"
     + "".join(f"{k % 9 + 1} {k // 9 + 1} 2\n" for k in range(29)), [],
     "f: the size line (line 2) announces 30 entries, the file has 29"),
    ("%%MatrixMarket matrix coordinate real general\n9 9 30\n"
     + "".join(f"{k % 9 + 1} {k // 9 + 1} 2\n" for k in range(25)) + "1 10 2\n"
     + "".join(f"{k % 9 + 1} {k // 9 + 5} 2\n" for k in range(4)), [],
     "f:28: column 10 is outside 1..9"),
])
@pytest.mark.parametrize("w", [1, 2, 3])
def test_bad_input_same_line_for_any_worker_count(tmp_path, monkeypatch, text, extra,
                                                  message, w):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "f").write_text(text)
    with pytest.raises(strads.DataError) as e:
        D.prepare(D.read_ratings("f"))
    assert str(e.value) == message
    with pytest.raises(strads.DataError) as e:
        in_process(["--data", "f", "--rank", "1", "--iters", "1"] + extra, w)
    assert str(e.value) == message
    (tmp_path / "f").write_bytes(gzip.compress(text.encode()))
    with pytest.raises(strads.DataError) as e:
        in_process(["--data", "f", "--rank", "1", "--iters", "1"] + extra, w)
    assert str(e.value) == message


def test_cold_start_and_duplicates_in_the_test_file(tmp_path):
    tr, te = tmp_path / "train.tsv", tmp_path / "test.tsv"
    tr.write_text("1\t10\t4\n2\t10\t2\n2\t11\t3\n3\t11\t1\n")
    te.write_text("1\t11\t5\n4\t10\t1\n")
    for w in (1, 2):
        with pytest.raises(strads.DataError, match=r"test.tsv:2: user 4 has no training "
                                                   r"rating \(cold start\)"):
            in_process(["--data", str(tr), "--test-data", str(te), "--rank", "1"], w)
        res = in_process(["--data", str(tr), "--test-data", str(te), "--rank", "1",
                          "--cold-start", "skip"], w)
        assert res.extra["cold_start_test"] == 1 and res.extra["n_test"] == 1
    te.write_text("1\t11\t5\n3\t10\t1\n1\t11\t4\n")
    with pytest.raises(strads.DataError, match=r"test.tsv:3: duplicate rating of user 1, "
                                               r"item 11 \(first at line 1\)"):
        in_process(["--data", str(tr), "--test-data", str(te), "--rank", "1"], 2)


@pytest.mark.parametrize("dups,cold", [("mean", "mean"), ("last", "skip")])
def test_test_file_with_unseen_ids_and_duplicates_equals_the_serial_reader(tmp_path, dups,
                                                                            cold):
    """A test file of seen and unseen users and items (raw ids beyond the training
    ones' range and between them), some of its pairs repeated, in no order: the
    held-out ratings the workers keep (read, routed to their users' workers, deduplicated,
    mapped; an unseen id is the extra row) score as the one-process reader's, for any W."""
    tr, te = tmp_path / "train.tsv", tmp_path / "test.tsv"
    u, i, r = udata(tr, count=1500)
    rng = np.random.default_rng(5)
    tu = np.concatenate([rng.choice(u, 300), 7 * rng.integers(60, 70, 40) + 3,
                         rng.integers(-50, 500, 40)])  # seen, unseen beyond, unseen among
    ti = np.concatenate([rng.choice(i, 330), 5 * rng.integers(40, 45, 30) - 40,
                         rng.integers(-40, 160, 20)])
    tr_ = np.round(rng.uniform(0.5, 5, tu.shape[0]), 2)
    rep = rng.choice(tu.shape[0], 60)
    tu, ti = np.concatenate([tu, tu[rep]]), np.concatenate([ti, ti[rep]])
    tr_ = np.concatenate([tr_, np.round(rng.uniform(0.5, 5, 60), 2)])
    order = rng.permutation(tu.shape[0])
    te.write_text("".join(f"{a} {b} {float(c)!r}\n" for a, b, c in
                          zip(tu[order], ti[order], tr_[order])))
    p = D.prepare(D.read_ratings(str(tr)), D.read_ratings(str(te)), duplicates=dups,
                  cold_start=cold)
    assert p.cold > 10 and len(p.test_ratings) < tu.shape[0] - 30  # the cases are there
    uid = np.append(p.user_ids, 0)[p.test_users]  # an unseen id: any id not in training
    iid = np.append(p.item_ids, 0)[p.test_items]
    uid[p.test_users == len(p.user_ids)] = 10 ** 6
    iid[p.test_items == len(p.item_ids)] = 10 ** 6
    args = ["--data", str(tr), "--test-data", str(te), "--duplicates", dups,
            "--cold-start", cold] + ARGS
    for w in (1, 2, 3):
        res = in_process(args, w)
        assert res.extra["n_test"] == len(p.test_ratings)
        assert res.extra["cold_start_test"] == p.cold
        e = p.test_ratings - mf.predict(res.model, uid, iid, unknown="mean")
        assert res.extra["test_rmse"] == pytest.approx(np.sqrt(np.mean(e ** 2)), rel=1e-10)


def test_pair_order_is_the_stable_lexsort_in_order_or_not():
    """The counting sorts and the one pass over pairs already in order (a file sorted
    by user and item, repeats included) give np.lexsort's stable order."""
    from strads.io.agree import in_place, pair_order
    rng = np.random.default_rng(0)
    for n in (0, 1, 2, 60, 5000):
        rows, cols = rng.integers(3, 40, n), rng.integers(0, 30, n)
        s = np.lexsort((cols, rows))
        swapped = s.copy()
        if n > 1:  # in order but for one pair
            swapped[[n // 2 - 1, n // 2]] = swapped[[n // 2, n // 2 - 1]]
        for o in (np.arange(n), s, swapped):
            r, c = rows[o], cols[o]
            got = pair_order(r, 3, 37, c, 30)
            np.testing.assert_array_equal(got, np.lexsort((c, r)))
            ordered = ((r[1:] > r[:-1]) | ((r[1:] == r[:-1]) & (c[1:] >= c[:-1]))).all()
            assert in_place(got) == ordered and (o is not s or ordered)


@pytest.mark.parametrize("W", [2, 3])
def test_route_and_columns_equal_their_references(monkeypatch, W):
    """route: each row to its destination, sources in worker order, a source's rows in
    theirs, whether a chunk's destinations are in order (sent as they are) or not;
    columns: the CSC of every worker's CSR rows (scipy's), in chunks of a few rows."""
    import scipy.sparse as sp
    from strads import transport
    from strads.io import agree
    monkeypatch.setattr(agree, "CHUNK", 7)
    rng = np.random.default_rng(W)
    dests = [np.sort(rng.integers(0, W, 40)), rng.integers(0, W, 33), np.zeros(0, np.int64)]
    dests = [d.astype(np.int16) for d in dests[:W]]
    vals = [rng.standard_normal(d.shape[0]) for d in dests]
    for d in dests:
        np.testing.assert_array_equal(agree.tally(d, W), np.bincount(d, minlength=W))
        np.testing.assert_array_equal(agree.tally(d + 5, W, 5), np.bincount(d, minlength=W))
    got = transport.on_threads(W, lambda p: agree.route(p, dests[p.rank],
                                                        [vals[p.rank], None]))
    for d in range(W):
        want = np.concatenate([v[dd == d] for v, dd in zip(vals, dests)])
        np.testing.assert_array_equal(got[d][0], want)
        assert got[d][1] is None
    m, n = 11 * W, 9
    R = sp.random(m, n, density=0.4, random_state=W, format="csr")
    R.sort_indices()
    uo, io = (np.linspace(0, k, W + 1).astype(np.int64) for k in (m, n))
    counts = np.diff(R.tocsc().indptr)

    def one(p):
        a, b = uo[p.rank], uo[p.rank + 1]
        rows = R[a:b]
        return agree.columns(p, io, int(a), counts[io[p.rank]:io[p.rank + 1]], n,
                             rows.indptr.astype(np.int64), rows.indices.astype(np.int32),
                             rows.data.copy())
    C = R.tocsc()
    for w, (cptr, cu, cy) in enumerate(transport.on_threads(W, one)):
        ref = C[:, io[w]:io[w + 1]]
        np.testing.assert_array_equal(cptr, ref.indptr)
        np.testing.assert_array_equal(cu, ref.indices)
        np.testing.assert_array_equal(cy, ref.data)


def test_built_in_problem_parts_make_the_whole():
    whole = D.make_problem(9000, 700, 40000, seed=3)
    parts = [D.make_problem(9000, 700, 40000, seed=3, part=k, n_parts=3)
             for k in range(3)]
    for name in ("users", "items", "ratings", "pos"):
        np.testing.assert_array_equal(np.concatenate([getattr(p, name) for p in parts]),
                                      getattr(whole, name))
    np.testing.assert_array_equal(whole.pos, np.arange(40000))
