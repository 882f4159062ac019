"""MF readers and flags on hard inputs: every file reads exactly as the plain file would,
or is refused with one line (``FILE:LINE: problem``, exit status 2, no traceback) before
anything is fitted; sizes that cannot fit are refused before they are allocated."""
import bz2
import gzip
import json
import os
import re

import numpy as np
import pytest

import strads
from strads.apps import mf
from strads.apps.mf import data as D
from strads.io import memory as io_memory, ratings as rating_io

from conftest import run_cli

BOM = b"\xef\xbb\xbf"
GIB = 1 << 30
MTX = b"%%MatrixMarket matrix coordinate real general\n"


def ratings(m=30, n=20, count=240, seed=3):
    """Distinct (user, item) pairs with 1-based ids and ratings that are not integers."""
    rng = np.random.default_rng(seed)
    keys = rng.choice(m * n, count, replace=False)
    return keys // n + 1, keys % n + 1, np.round(rng.uniform(0.5, 5, count), 3)


U, I, R = ratings()


def as_udata(u=U, i=I, r=R):  # MovieLens u.data: user item rating timestamp, tabs
    return "".join(f"{a}\t{b}\t{float(c)!r}\t{881250949 + k}\n"
                   for k, (a, b, c) in enumerate(zip(u, i, r))).encode()


def as_csv(u=U, i=I, r=R):  # MovieLens ratings.csv, with its header
    return b"userId,movieId,rating,timestamp\n" + "".join(
        f"{a},{b},{float(c)!r},964982703\n" for a, b, c in zip(u, i, r)).encode()


def as_mtx(u=U, i=I, r=R):
    return MTX + b"% ratings\n" + f"{u.max()} {i.max()} {len(r)}\n".encode() + "".join(
        f"{a} {b} {float(c)!r}\n" for a, b, c in zip(u, i, r)).encode()


def write(tmp_path, name, data):
    p = tmp_path / name
    p.write_bytes(data)
    return p


def triplets(t):
    return t.users.tolist(), t.items.tolist(), t.ratings.tolist()


def parse_lines(lay):
    """Every rating by the line by line rules (the reference of the byte parser): (users,
    items, ratings, lines), exact errors."""
    limit = rating_io.max_ratings()
    rows = []
    for lineno, _, raw in rating_io.Text(lay.path, "rating file").lines(True):
        if lineno < lay.line0:
            continue
        try:
            got = rating_io.parse_line(raw.decode("latin-1"), lay.delim, lay.bounds)
        except rating_io.LineError as e:
            raise strads.DataError(f"{lay.path}:{lineno}: {e}") from None
        if got is not None:
            rows.append((*got, lineno))
        if limit is not None and len(rows) > limit:
            raise rating_io.too_many(lay.path, limit)
    return tuple(np.array([x[k] for x in rows], t) for k, t in enumerate(
        (np.int64, np.int64, np.float64, np.int64)))


def read(path):
    """The ratings read, after checking that the line by line parse (the fallback and
    the source of line numbers) reads exactly the same."""
    t = D.read_ratings(str(path))
    u, i, r, lines = parse_lines(rating_io.Layout(str(path)))
    assert (u.tolist(), i.tolist(), r.tolist()) == triplets(t)
    assert lines.tolist() == t.lines.tolist()
    return t


def refused(path, message, match=None):
    with pytest.raises(strads.DataError) as e:
        D.prepare(D.read_ratings(str(path)))
    text = str(e.value)
    assert "\n" not in text
    assert text == message if match is None else match in text, text
    return text


def cli(args, out=None):
    cmd = ["strads.apps.mf", "--iters", "2", "--rank", "3", "--quiet", *args]  # args win
    return run_cli(cmd + (["--out", str(out)] if out else []))  # run_cli's hang guard


def cli_refused(args, message):
    """Exit status 2 and, on stderr, only this line (argparse adds its usage before)."""
    p = cli(args)
    assert p.returncode == 2, p.stderr
    assert "Traceback" not in p.stderr
    lines = p.stderr.strip().splitlines()
    assert lines[-1] == message, p.stderr
    if not lines[-1].startswith("python -m strads.apps.mf: error: argument"):
        assert len(lines) == 1, p.stderr  # a DataError: one line and nothing else
    return p


@pytest.fixture
def memory(monkeypatch):
    """Pretend this machine has ``set(bytes)`` of memory (16 GiB until set)."""
    box = [16 * GIB]
    monkeypatch.setattr(io_memory, "physical_memory", lambda: box[0])
    monkeypatch.setattr(mf, "physical_memory", lambda: box[0])
    return lambda b: box.__setitem__(0, b)


# -- the same ratings, whatever the wrapping ----------------------------------------------
@pytest.mark.parametrize("fmt", [as_udata, as_csv, as_mtx])
@pytest.mark.parametrize("wrap", [
    "plain", "bom", "gzip", "gzip-no-suffix", "bom-gzip", "crlf", "cr", "bom-crlf-gzip",
    "trailing-blank-lines", "comments-inside", "no-final-newline"])
def test_every_wrapping_reads_the_same_triplets(tmp_path, fmt, wrap):
    data = fmt()
    if "crlf" in wrap:
        data = data.replace(b"\n", b"\r\n")
    if wrap == "cr":
        data = data.replace(b"\n", b"\r")
    if wrap == "trailing-blank-lines":
        data += b"\n\n  \n\t\n"
    if wrap == "comments-inside":  # forces the fast path to drop comment lines
        lines = data.split(b"\n")
        data = b"\n".join(lines[:5] + [b"# a comment", b"% another", b""] + lines[5:])
    if wrap == "no-final-newline":
        data = data.rstrip(b"\n")
    if "bom" in wrap:
        data = BOM + data
    if "gzip" in wrap:
        data = gzip.compress(data)
    name = "r.gz" if wrap in ("gzip", "bom-gzip", "bom-crlf-gzip") else "r"
    t = read(write(tmp_path, name, data))
    assert triplets(t) == (U.tolist(), I.tolist(), R.tolist())


def test_cli_bom_and_gzip_give_the_same_model_bit_for_bit(tmp_path):
    """Before: a BOM made the MatrixMarket size line a rating (objective 18974 instead of
    247.86, exit 0), and a BOM or gzip on u.data dropped the first rating. Also the
    --test-data file goes through the same reader."""
    te_u, te_i, te_r = ratings(count=60, seed=9)
    seen = set(zip(U.tolist(), I.tolist()))
    keep = np.array([(a, b) not in seen for a, b in zip(te_u.tolist(), te_i.tolist())])
    te = as_udata(te_u[keep], te_i[keep], te_r[keep])
    runs = {
        "plain": (write(tmp_path, "r.mtx", as_mtx()), write(tmp_path, "t.tsv", te)),
        "bom": (write(tmp_path, "b.mtx", BOM + as_mtx()),
                write(tmp_path, "t.gz", gzip.compress(BOM + te))),
        "udata": (write(tmp_path, "u.data", gzip.compress(BOM + as_udata())),
                  write(tmp_path, "t2", gzip.compress(te.replace(b"\n", b"\r\n")))),
    }
    out = {}
    for name, (train, test) in runs.items():
        p = cli(["--data", str(train), "--test-data", str(test)], tmp_path / name)
        assert p.returncode == 0, p.stderr
        s = json.loads((tmp_path / name / "summary.json").read_text())
        out[name] = s, np.load(tmp_path / name / "model.npz")
    s0, m0 = out["plain"]
    assert s0["n_train"] == len(R) and s0["n_test"] == int(keep.sum())
    assert s0["n_users"] == len(set(U.tolist())) and s0["n_items"] == len(set(I.tolist()))
    for name in ("bom", "udata"):
        s, m = out[name]
        for key in ("objective", "train_rmse", "test_rmse", "n_train", "n_test",
                    "objective_per_iter"):
            assert s[key] == s0[key], (name, key)
        assert sorted(m.files) == sorted(m0.files)
        for key in m0.files:
            np.testing.assert_array_equal(m[key], m0[key], err_msg=f"{name} {key}")


def test_header_line_movielens_ratings_csv(tmp_path):
    t = read(write(tmp_path, "ratings.csv", b"userId,movieId,rating,timestamp\n"
                                            b"1,31,2.5,1260759144\n1,1029,3.0,1260759179\n"))
    assert triplets(t) == ([1, 1], [31, 1029], [2.5, 3.0])
    # comment lines before the header, and a header with a BOM, still a header
    t = read(write(tmp_path, "b.csv", BOM + b"# exported\n\nuser\titem\trating\n7\t8\t1\n"))
    assert triplets(t) == ([7], [8], [1.0])
    # non-ASCII in a header is fine (the fast path gives way to the line by line one)
    t = read(write(tmp_path, "l.csv", "Benutzer,Film,Bewertung é\n1,2,3\n".encode()))
    assert triplets(t) == ([1], [2], [3.0])


@pytest.mark.parametrize("header,says", [
    ("userId,movieId,timestamp,rating", "awk -F, -v OFS=, '{print $1,$2,$4}'"),
    ("item,user,rating", "awk -F, -v OFS=, '{print $2,$1,$3}'"),
    ("user_id,item_id,date", "reorder the columns$"),
    ("userId,movieId,rating,timestamp", None), ("reviewerID,asin,overall,unixTime", None),
    ("book_id,user_id,rating", "awk -F, -v OFS=, '{print $2,$1,$3}'"),
    ("u,i,r", None), ("user_id,business_id,stars,date", None),
    ("user_id,book_id,user_rating", None), ("rater_id,ratee_id,rating", None)])
def test_a_header_naming_other_columns_is_refused(tmp_path, header, says):
    """The first three columns are user, item, rating whatever the header says; a header
    that names them otherwise (timestamps third, users second) is refused, not fitted."""
    path = write(tmp_path, "r.csv", f"{header}\n1,2,3,4\n2,1,4,5\n".encode())
    if says is None:
        assert triplets(read(path)) == ([1, 2], [2, 1], [3.0, 4.0])
        return
    with pytest.raises(strads.DataError, match=f"^{path}:1: the header names the columns "
                       ".*read as user, item and rating") as e:
        read(path)
    assert re.search(re.escape(says.rstrip("$")) + ("$" if says[-1] == "$" else ""),
                     str(e.value)), str(e.value)


@pytest.mark.parametrize("text,expected", [
    (b"1 2 3 4 5 6\n2\t1 4\n", ([1, 2], [2, 1], [3.0, 4.0])),  # extra fields; blanks
    (b"-5\t-7\t1\n-5\t3\t2\n", ([-5, -5], [-7, 3], [1.0, 2.0])),  # negative ids
    (b"9223372036854775807 -9223372036854775808 1\n", ([2 ** 63 - 1], [-2 ** 63], [1.0])),
    (b"+7 0012 .5\n", ([7], [12], [0.5])),
    (b"1, 2, 3.5\n3 ,4 ,1e-1\n", ([1, 3], [2, 4], [3.5, 0.1])),  # comma with blanks
    (b"1 2 3  # note\n", ([1], [2], [3.0])),  # a fourth field '#', ignored
    ("1,2,3.5,Amélie\n2,1,4,Übel\n".encode(), ([1, 2], [2, 1], [3.5, 4.0])),  # ignored
    (b"1\x1c2\x1c3\n", ([1], [2], [3.0])),  # ASCII separators: blanks to both parsers
])
def test_accepted_lines_read_exactly(tmp_path, text, expected):
    assert triplets(read(write(tmp_path, "f", text))) == expected


def test_large_ids_are_remapped_exactly(tmp_path):
    big = 2 ** 63 - 1
    f = write(tmp_path, "f", f"{big}\t1\t3\n{big - 1}\t1\t4\n{big}\t2\t5\n".encode())
    p = D.prepare(read(f))
    assert p.user_ids.tolist() == [big - 1, big] and p.users.tolist() == [1, 0, 1]
    res = mf.fit(*(np.array(x) for x in triplets(read(f))), rank=1, iters=2, quiet=True)
    assert res.model["user_ids"].tolist() == [big - 1, big]
    assert mf.predict(res.model, [big], [2]).shape == (1,)


# -- refused, with the file and line ------------------------------------------------------
@pytest.mark.parametrize("text,message", [
    (b"1,2,good\n2,1,4\n", "f:1: rating 'good' is not a number"),  # not taken as a header
    (b"u1,i1,5\nu2,i2,3\n", "f:1: user 'u1' is not an integer"),
    (b"1 2 3\n2 1\n", "f:2: expected 'user item rating', found 2 field(s)"),
    (b"1\t2\t3\n2,1,4\n", "f:2: expected 'user item rating', found 1 field(s)"),
    (b"1,2,3\n2 1 4\n", "f:2: expected 'user item rating', found 1 field(s)"),
    (b"100000000000000000000 2 3\n", "f:1: user id 100000000000000000000 does not fit in "
                                     "a 64-bit integer"),
    (b"1 2 3\n1 -9223372036854775809 3\n", "f:2: item id -9223372036854775809 does not "
                                           "fit in a 64-bit integer"),
    (b"1.0 2 3\n", "f:1: user '1.0' is not an integer"),
    (b"1 1e3 3\n", "f:1: item '1e3' is not an integer"),
    (b"1_0 2 3\n", "f:1: user '1_0' is not an integer"),
    (b"1 2 1_0\n", "f:1: rating '1_0' is not a number"),
    (b"1 2 3#4\n", "f:1: rating '3#4' is not a number"),
    (b"1 2 1e999\n", "f:1: rating is inf, not finite"),
    (b"1 2 1e200\n2 1 3\n", "f:1: rating 1e+200 is too large: the sum of squared ratings "
                            "overflows"),
    ("1 2 3\n2 1\u00a04\n".encode(), "f:2: non-ASCII byte 0xc2 in a rating line's first "
                                     "three fields (ids and ratings are ASCII numbers)"),
    (b"1 2 3\n2 1\xa04\n", "f:2: non-ASCII byte 0xa0 in a rating line's first three "
                          "fields (ids and ratings are ASCII numbers)"),  # latin-1 NBSP
    ("1,2,3\n2,1\u00a0,4\n".encode(), "f:2: non-ASCII byte 0xc2 in a rating line's first "
                                      "three fields (ids and ratings are ASCII numbers)"),
    (b'"1","2","3"\n"2","1","4"\n', "f:2: user '\"2\"' is not an integer"),
    (b"1::1193::5::978300760\n", "f:1: expected 'user item rating', found 1 field(s) (a "
                                 "'::'-separated file such as MovieLens ratings.dat: "
                                 "replace '::' by tabs)"),
    (b"1;2;3\n", "f:1: expected 'user item rating', found 1 field(s) (only tabs, commas "
                "or blanks separate fields)"),
    (b"\n" + MTX + b"2 2 2\n1 1 3\n2 2 4\n", "f:2: a MatrixMarket banner must start the "
                                           "file's first line"),  # else: size line = rating
    (BOM + BOM + MTX + b"2 2 2\n1 1 3\n2 2 4\n", "f:1: a MatrixMarket banner must start "
                                                "the file's first line"),
    (b"userId,movieId,rating\n", "f: no ratings (only a header)"),
    (b"a,b,c\nd,e,f\n", "f:2: user 'd' is not an integer"),  # one header, not two
    (BOM, "f: no ratings (empty file)"),
    (b"1\t2\t3\n4\t5\t1\n1\t2\t4\n", "f:3: duplicate rating of user 1, item 2 (first at "
                                     "line 1); pass duplicates='last' or 'mean' "
                                     "(--duplicates) to keep one"),
    (b"1 2 3\n# c\n1 2 4\n", "f:3: duplicate rating of user 1, item 2 (first at line 1); "
                             "pass duplicates='last' or 'mean' (--duplicates) to keep one"),
    (b"1 2 3\r2 1 4\r1 2 5\r", "f:3: duplicate rating of user 1, item 2 (first at line 1)"
                               "; pass duplicates='last' or 'mean' (--duplicates) to keep "
                               "one"),
])
def test_bad_lines_refused_naming_the_line(tmp_path, monkeypatch, text, message):
    monkeypatch.chdir(tmp_path)
    write(tmp_path, "f", text)
    refused("f", message)
    write(tmp_path, "f", gzip.compress(text))  # the same line, compressed
    refused("f", message.replace("(empty file)", "(empty file after decompression)"))


def test_duplicates_last_reads_values_not_reparsed(tmp_path):
    f = write(tmp_path, "d", b"# re-ratings\n1 2 3\n4 5 1\n1 2 5\n")
    p = D.prepare(D.read_ratings(str(f)), duplicates="last")
    assert sorted(zip(p.users.tolist(), p.ratings.tolist())) == [(0, 5.0), (1, 1.0)]
    t = D.dedupe(D.read_ratings(str(f)), "last")
    assert t.lines.tolist() == [4, 3]  # the lines of the kept entries, for messages


@pytest.mark.parametrize("text,message", [
    (MTX + b"1000000000000 5 2\n1 1 3\n1000000000000 2 4\n", None),  # read: ids bound only
    (MTX + b"100000000000000000000 5 2\n1 1 3\n", "f:2: size 100000000000000000000 x 5 "
                                                  "with 2 entries does not fit in 64-bit "
                                                  "integers"),
    (MTX + b"5 5 26\n1 1 3\n", "f:2: 26 entries announced, more than the 5 x 5 = 25 cells "
                              "of the matrix"),
    (MTX + b"1000 1000 900000\n1 1 3\n2 2 4\n", "f:2: 900000 entries announced; a file of "
                                                "82 bytes holds at most 13"),
    (MTX + b"-2 2 1\n1 1 3\n", "f:2: size line must be 'rows columns entries' (three "
                               "non-negative integers), got '-2 2 1'"),
    (MTX + b"2 2 1e1\n1 1 3\n", "f:2: size line must be 'rows columns entries' (three "
                                "non-negative integers), got '2 2 1e1'"),
    (MTX + b"2 2 1 7\n1 1 3\n", "f:2: size line must be 'rows columns entries' (three "
                                "non-negative integers), got '2 2 1 7'"),
    (MTX + b"0 2 1\n1 1 3\n", "f:2: a 0 x 2 matrix holds no ratings"),
    (MTX + b"2 2 2\n1 1 3\n3 1 2\n", "f:4: row 3 is outside 1..2"),
    (MTX + b"2 2 2\n1 1 3\n% c\n1 0 2\n", "f:5: column 0 is outside 1..2"),
    (MTX + b"2 2 3\n1 1 3\n2 1 2\n", "f: the size line (line 2) announces 3 entries, the "
                                     "file has 2"),
    (MTX + b"2 2 1\n1 1 3\n2 1 2\n", "f: the size line (line 2) announces 1 entries, the "
                                     "file has 2"),
])
def test_matrix_market_sizes(tmp_path, monkeypatch, text, message):
    monkeypatch.chdir(tmp_path)
    write(tmp_path, "f", BOM + text)  # the banner after a BOM is still a banner
    if message is None:
        t = read("f")
        assert triplets(t) == ([1, 10 ** 12], [1, 2], [3.0, 4.0])
        assert D.prepare(t).shape == (2, 2)  # nothing of the declared size
    else:
        refused("f", message.replace("82 bytes", f"{len(text) + 3} bytes"))


@pytest.mark.parametrize("make,message", [
    (lambda: os.urandom(4000) + b"\0", "binary data (a NUL byte), not a text rating file"),
    (lambda: b"1\t2\t3\n\x00\x01\x02", "f:2: binary data (a NUL byte), not a text rating "
                                         "file"),
    (lambda: "1\t2\t3\n".encode("utf-16"), "f: UTF-16 text, not a text rating file; save "
                                            "it as UTF-8"),
    (lambda: bz2.compress(b"1 2 3\n"), "f: bzip2-compressed, not a text rating file; only "
                                       "plain or gzip-compressed text is read"),
    (lambda: gzip.compress(gzip.compress(b"1 2 3\n")), "f: gzip-compressed twice; "
                                                       "decompress it once"),
    (lambda: gzip.compress(b""), "f: no ratings (empty file after decompression)"),
    (lambda: gzip.compress(b"1 2 3\n" * 20000)[:-40], "corrupt gzip data (Compressed file "
                                                      "ended before the end-of-stream "
                                                      "marker was reached)"),
    (lambda: gzip.compress(b"1 2 3\n2 1 4\n")[:-8] + b"\0\0\0\0\0\0\0\0",
     "f: corrupt gzip data (CRC check failed"),
    (lambda: b"9" * (2 << 20), "f:1: a line longer than 1048576 characters: not a rating "
                               "file"),
    (lambda: b"", "f: empty file"),
])
def test_not_a_rating_file(tmp_path, monkeypatch, make, message):
    monkeypatch.chdir(tmp_path)
    write(tmp_path, "f", make())
    refused("f", None, match=message)


def test_truncated_gzip_names_the_line_it_stopped_at(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    data = b"".join(f"{k}\t{k % 7}\t3\n".encode() for k in range(1, 30001))
    write(tmp_path, "f", gzip.compress(data)[:-100])
    msg = refused("f", None, match="corrupt gzip data")
    line = int(msg.split(":")[1])
    assert 20000 < line <= 30000  # where the data stopped, not line 1


def test_not_a_file(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "dir").mkdir()
    refused("dir", "dir: is a directory, not a rating file")
    refused("missing", "missing: no such file")
    refused("/dev/null", "/dev/null: not a regular file")
    write(tmp_path, "plain.gz", b"1 2 3\n")
    refused("plain.gz", "plain.gz: named .gz but not gzip-compressed (no 1f 8b magic bytes)")


# -- sizes that cannot fit: refused before allocation ---------------------------------------
def test_more_ratings_than_memory_holds(tmp_path, memory):
    memory(3 * rating_io.BYTES_PER_RATING)  # room for 3 ratings
    ok = write(tmp_path, "ok", b"1 1 1\n2 2 2\n3 3 3\n")
    assert len(read(ok)) == 3
    room = f"{3 * rating_io.BYTES_PER_RATING} bytes"
    msg = f"more than 3 ratings: this machine's {room} of memory holds at most 3"
    for name, text in [("fast", b"1 1 1\n2 2 2\n3 3 3\n4 4 4\n"),
                       ("slow", "# é\n1 1 1\n2 2 2\n3 3 3\n4 4 4\n1 1 x\n".encode()),
                       ("gz", gzip.compress(b"1 1 1\n% c\n2 2 2\n3 3 3\n4 4 4\n"))]:
        with pytest.raises(strads.DataError, match=f"^{tmp_path / name}: {msg}"):
            D.read_ratings(str(write(tmp_path, name, text)))
    mtx = write(tmp_path, "mtx", MTX + b"5 5 4\n1 1 1\n2 2 2\n3 3 3\n4 4 4\n")
    with pytest.raises(strads.DataError, match=": line 2: 4 entries announced: this "
                                               f"machine's {room} of memory holds at "
                                               "most 3"):
        D.read_ratings(str(mtx))


def test_rank_factors_beyond_memory(memory):
    u, i, r = ratings(12, 10, 60)
    lay = (4, True, 12, 10, 2, "ccd", 1)  # rank, biases, users, items, workers, ...
    need = mf.factor_bytes(*lay)
    memory(need - 1)
    with pytest.raises(strads.DataError, match=r"^rank 4 \(--rank\): the factors of 12 "
                                               r"users and 10 items need about"):
        mf.fit(u, i, r, rank=4, iters=1, workers=2, quiet=True, early_stop=None)
    memory(need)
    assert mf.fit(u, i, r, rank=4, iters=1, workers=2, quiet=True,
                  early_stop=None).model["W"].shape == (12, 4)
    # the default, early stopping: its first run's best-iteration copies count too
    memory(mf.factor_bytes(*lay, early_stop=2) - 1)
    with pytest.raises(strads.DataError, match=r"^rank 4 \(--rank\): the factors"):
        mf.fit(u, i, r, rank=4, iters=1, workers=2, quiet=True)
    memory(16 * GIB)  # the sweep of --inner 10^9 would be 16e9 rounds
    with pytest.raises(strads.DataError, match=r"inner 1000000000 \(--inner\), block 1 "
                                               r"\(--block\): a sweep of 16000000002 rounds"):
        mf.fit(u, i, r, rank=8, inner=10 ** 9)


def test_built_in_problem_sizes_and_skew(memory):
    with pytest.raises(strads.DataError, match=r"1000000000000 users \(--n-users\).*needs "
                                               r"about 153 TiB"):
        D.make_problem(10 ** 12, 1500, 1000)
    with pytest.raises(strads.DataError, match="pairs do not fit in 64-bit integers"):
        D.make_problem(10 ** 10, 10 ** 10, 10)
    for alpha in (1e300, 50.0):  # before: drew forever
        with pytest.raises(strads.DataError, match=r"only 1 distinct \(user, item\) pairs "
                                                   r"of the 3000 .*--alpha"):
            D.make_problem(300, 200, 3000, alpha=alpha)
    with pytest.raises(strads.DataError, match="alpha >= 0"):
        D.make_problem(300, 200, 3000, alpha=float("nan"))
    assert len(D.make_problem(100, 100, 5000, alpha=1.0)) == 5000  # dense, skewed: fine


def test_overflowing_penalty_and_arrays(memory):
    u, i, r = ratings(12, 10, 60)
    with pytest.raises(strads.DataError, match=r"lambda 1e\+308 \(--lambda\) times a row's "
                                               r"up to \d+ ratings \(--lambda-weighting "
                                               r"count\) overflows"):
        mf.fit(u, i, r, lam=1e308, quiet=True)  # weighted: the default
    with pytest.raises(strads.DataError, match="the starting penalty lambda"):
        mf.fit(u, i, r, lam=1e308, weighted=False, quiet=True)
    with pytest.raises(strads.DataError, match="the starting penalty lambda"):
        mf.fit(u, i, r, init_scale=1e300, quiet=True)
    for bad in (float("inf"), float("nan")):
        with pytest.raises(strads.DataError, match="finite"):
            mf.fit(u, i, r, lam=bad)
        with pytest.raises(strads.DataError, match="finite"):
            mf.fit(u, i, r, target_test_rmse=bad)
    with pytest.raises(strads.DataError, match="user id 9.223372036854776e\\+18 is not an "
                                               "integer"):
        mf.fit(np.full(2, 2.0 ** 63), [1, 2], [1.0, 2.0])
    with pytest.raises(strads.DataError, match="item id 9223372036854775808 does not fit"):
        mf.fit([1, 2], np.array([1, 2 ** 63], np.uint64), [1.0, 2.0])


# -- the command line ------------------------------------------------------------------------
def test_cli_refusals_one_line(tmp_path):
    E = "python -m strads.apps.mf: error: "
    garbage = write(tmp_path, "garbage", os.urandom(2000) + b"\0")
    cli_refused(["--data", str(garbage)], E + f"{garbage}:{_nul_line(garbage)}: binary "
                                              "data (a NUL byte), not a text rating file")
    cli_refused(["--data", str(tmp_path)], E + f"{tmp_path}: is a directory, not a rating "
                                                "file")
    f = write(tmp_path, "u.data", as_udata())
    p = cli(["--data", str(f), "--rank", "1000000000"])
    assert p.returncode == 2 and "Traceback" not in p.stderr
    # the sweep of 2e9 rounds (before reading) or the factors (after) cannot fit
    assert p.stderr.startswith(E + "rank 1000000000 (--rank)")
    assert "more than this machine's" in p.stderr and len(p.stderr.splitlines()) == 1
    mtx = write(tmp_path, "r.mtx", MTX + b"100000000000000000000 3 2\n1 1 3\n2 2 4\n")
    cli_refused(["--data", str(mtx)], E + f"{mtx}:2: size 100000000000000000000 x 3 with 2 "
                                          "entries does not fit in 64-bit integers")
    ids = write(tmp_path, "ids", b"1\t1\t3\n100000000000000000000\t2\t4\n")
    cli_refused(["--data", str(ids)], E + f"{ids}:2: user id 100000000000000000000 does "
                                          "not fit in a 64-bit integer")
    cli_refused(["--data", str(f), "--test-data", str(garbage)],
                E + f"{garbage}:{_nul_line(garbage)}: binary data (a NUL byte), not a text "
                "rating file")


def _nul_line(path):
    data = path.read_bytes()
    return data[:data.index(b"\0")].count(b"\n") + 1


@pytest.mark.parametrize("flag,value", [
    ("--lambda", "inf"), ("--alpha", "inf"), ("--init-scale", "nan"),
    ("--target-test-rmse", "inf"), ("--noise", "-inf"), ("--test-fraction", "nan"),
    ("--tol", "nan"), ("--time-limit", "inf"), ("--log-interval", "nan")])
def test_cli_non_finite_flags(flag, value):
    cli_refused([f"{flag}={value}"], f"python -m strads.apps.mf: error: argument {flag}: "
                                     f"must be a finite number, got {value}")


def test_cli_every_float_flag_refuses_non_finite():
    """Every float-valued flag of the MF command line parses through strads.cli's checked
    types (which refuse inf and nan), so none can slip through."""
    from strads import cli as C
    from strads.apps.mf.__main__ import build_parser

    checked = {C.pos_float, C.nonneg_float, C.unit_float}
    floats = [a for a in build_parser()._actions
              if isinstance(a.default, float) or a.type in checked or a.type is float]
    assert {a.dest for a in floats} >= {"lam", "init_scale", "test_fraction",
                                        "target_test_rmse", "noise", "alpha", "tol",
                                        "time_limit", "log_interval"}
    for a in floats:
        assert a.type in checked, a.dest
        for bad in ("inf", "-inf", "nan"):
            with pytest.raises(Exception):
                a.type(bad)


def test_cli_flag_conflicts_before_reading(tmp_path):
    missing = tmp_path / "not-there"  # not read: the flags alone are wrong
    cli_refused(["--data", str(missing), "--test-data", str(missing), "--test-fraction",
                 "0.2"], "python -m strads.apps.mf: error: give --test-data or --test-fraction, "
                         "not both")
    cli_refused(["--data", str(missing), "--test-fraction", "1"],
                "python -m strads.apps.mf: error: --test-fraction must be in [0, 1), got 1.0")
