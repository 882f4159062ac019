"""Small inputs, huge costs (the ninth hunt): tiny files or plausible flags that would
make strads allocate far more than the process may use are refused in one line, before
the work, instead of dying by a MemoryError (or a thread error) traceback.

Each test runs the app's command line in a child process whose address space is capped
(RLIMIT_AS: what it had after its imports plus a margin), as under ``ulimit -v``: the
machine stays safe, and the project's rule (bad input: one clear line naming the file or
flag and the problem, exit 2) is what each checks. The size checks' bound is
strads.io.memory.physical_memory(): the physical memory, or less under such a cap."""
import gzip
import os
import subprocess
import sys
import textwrap
import zipfile

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MiB = 1 << 20

CHILD = """
import resource, runpy, sys
import strads.apps.{app}
{patch}
with open("/proc/self/status") as f:
    vm = [int(l.split()[1]) * 1024 for l in f if l.startswith("VmSize:")][0]
hard = resource.getrlimit(resource.RLIMIT_AS)[1]
cap = vm + {margin}
resource.setrlimit(resource.RLIMIT_AS,
                   (cap if hard == resource.RLIM_INFINITY else min(cap, hard), hard))
sys.argv = ["strads.apps.{app}"] + {argv!r}
runpy.run_module("strads.apps.{app}", run_name="__main__")
"""


def run_capped(app, argv, margin=768 * MiB, patch=""):
    """(exit code, stderr) of ``python -m strads.apps.<app> argv`` with its address space
    capped at its size after the imports plus ``margin`` bytes."""
    env = dict(os.environ, PYTHONPATH=ROOT, MALLOC_ARENA_MAX="2", OMP_NUM_THREADS="1",
               OPENBLAS_NUM_THREADS="1", NUMBA_NUM_THREADS="1")
    code = CHILD.format(app=app, argv=list(argv), margin=margin,
                        patch=textwrap.dedent(patch))
    p = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env,
                       capture_output=True, text=True, timeout=120)
    return p.returncode, p.stderr


def assert_refused(rc, err, *words):
    """One line, exit 2, no traceback, naming each of ``words``."""
    assert "Traceback" not in err and "MemoryError" not in err, err[-1500:]
    assert rc == 2, (rc, err[-1500:])
    lines = [l for l in err.splitlines() if "error:" in l]
    assert len(lines) == 1, err[-1500:]
    for w in words:
        assert w in lines[0], lines[0]


def test_gzip_bomb_refused_within_the_process_limit(tmp_path):
    # concatenated gzip members: 16 x 128 MiB of valid LIBSVM lines, 2 GiB in all
    member = gzip.compress(b"1 1:1\n" * (128 * MiB // 6), compresslevel=1)
    path = tmp_path / "bomb.svm.gz"
    path.write_bytes(member * 16)
    assert path.stat().st_size < 20 * MiB
    rc, err = run_capped("lasso", ["--data", str(path), "--quiet", "--max-rounds", "1"])
    assert_refused(rc, err, str(path))


def test_libsvm_huge_index_refused_within_the_process_limit(tmp_path):
    path = tmp_path / "wide.svm"
    path.write_text("1 1:1 300000000:2\n-1 2:1\n1 3:1\n")
    rc, err = run_capped("lasso", ["--data", str(path), "--quiet", "--max-rounds", "1"],
                         margin=512 * MiB)
    assert_refused(rc, err, str(path))


def test_mf_huge_rank_refused_before_allocating_it():
    # the machine made small (1 GiB), as the checks see it: the sweep check passes at
    # this rank (16 bytes x 2 x rank < 1 GiB), the factors (~ 40 x rank x 8 x ...) do not
    patch = """
    import strads.io.memory as M, strads.apps.mf as mf
    M.physical_memory = mf.physical_memory = lambda: 1 << 30
    """
    rc, err = run_capped("mf", ["--n-users", "20", "--n-items", "20", "--n-ratings", "100",
                                "--iters", "1", "--quiet", "--rank", "30000000"],
                         margin=1536 * MiB, patch=patch)
    assert_refused(rc, err, "--rank")


def test_mf_rank_refused_within_the_process_limit():
    rc, err = run_capped("mf", ["--n-users", "20", "--n-items", "20", "--n-ratings", "100",
                                "--iters", "1", "--quiet", "--rank", "10000000"])
    assert_refused(rc, err, "--rank")


def test_lda_topics_refused_within_the_process_limit():
    rc, err = run_capped("lda", ["--n-docs", "20", "--n-words", "30", "--sweeps", "1",
                                 "--quiet", "--topics", "10000000"])
    assert_refused(rc, err, "--topics")


@pytest.mark.parametrize("app,argv", [
    ("lda", ["--n-docs", "20", "--n-words", "30", "--sweeps", "1"]),
    ("lasso", ["--n-samples", "50", "--n-features", "20", "--max-rounds", "1"]),
])
def test_million_workers_refused_before_building_them(app, argv):
    from strads.transport import max_threads

    limit = max_threads()
    if limit is None:
        pytest.skip("this system does not say how many threads a process may start")
    workers = max(10 ** 6, limit + 1)  # (a million: 49 s, then "can't start new thread")
    rc, err = run_capped(app, argv + ["--quiet", "--workers", str(workers)])
    assert_refused(rc, err, "workers", f"({limit:,}: ulimit -u")


LOAD_CHILD = """
import resource, sys
import strads, strads.io.memory as M
from strads.errors import DataError
M.physical_memory = lambda: 32 << 20
with open("/proc/self/status") as f:
    vm = [int(l.split()[1]) * 1024 for l in f if l.startswith("VmSize:")][0]
hard = resource.getrlimit(resource.RLIMIT_AS)[1]
cap = vm + (3 << 30)  # (room for what it does now: the array, and a copy)
resource.setrlimit(resource.RLIMIT_AS, (cap if hard == resource.RLIM_INFINITY
                                        else min(cap, hard), hard))
try:
    m = strads.load(sys.argv[1])
except DataError as e:
    print("REFUSED", e)
else:
    print("LOADED", m.coef_.shape)
"""


def test_load_refuses_a_compressed_model_past_memory(tmp_path):
    import numpy as np

    n = 16 << 20  # 128 MiB of float64 zeros, a ~0.5 MB file; the "machine" has 32 MiB
    out = tmp_path / "fit"
    out.mkdir()
    (out / "summary.json").write_text('{"app": "lasso"}')
    with zipfile.ZipFile(out / "model.npz", "w", zipfile.ZIP_DEFLATED, compresslevel=1) as z:
        with z.open("coef.npy", "w", force_zip64=True) as f:
            np.lib.format.write_array_header_1_0(
                f, {"descr": "<f8", "fortran_order": False, "shape": (n,)})
            zeros = bytes(16 << 20)
            for _ in range(n * 8 // len(zeros)):
                f.write(zeros)
        buf = __import__("io").BytesIO()
        np.save(buf, np.array(0.1))
        z.writestr("lambda.npy", buf.getvalue())
    assert (out / "model.npz").stat().st_size < 8 * MiB
    env = dict(os.environ, PYTHONPATH=ROOT, MALLOC_ARENA_MAX="2")
    p = subprocess.run([sys.executable, "-c", LOAD_CHILD, str(out)], cwd=ROOT, env=env,
                       capture_output=True, text=True, timeout=120)
    assert "Traceback" not in p.stderr, p.stderr[-1500:]
    assert p.stdout.startswith("REFUSED"), p.stdout + p.stderr[-1500:]
    assert "coef" in p.stdout and "model.npz" in p.stdout, p.stdout


EST_CHILD = """
import resource, sys
import numpy as np, scipy.sparse as sp, strads
with open("/proc/self/status") as f:
    vm = [int(l.split()[1]) * 1024 for l in f if l.startswith("VmSize:")][0]
hard = resource.getrlimit(resource.RLIMIT_AS)[1]
cap = vm + (512 << 20)
resource.setrlimit(resource.RLIMIT_AS, (cap if hard == resource.RLIM_INFINITY
                                        else min(cap, hard), hard))
X = sp.csr_matrix((np.array([1.0, 2.0, 3.0]), (np.array([0, 1, 2]),
                   np.array([0, 1, 10 ** 12 - 1]))), shape=(3, 10 ** 12))
est = getattr(strads, sys.argv[1])()
try:
    est.fit(X, np.array([0.0, 1.0, 1.0]))
except (ValueError, strads.DataError) as e:
    print("REFUSED", type(e).__name__, e)
"""


@pytest.mark.parametrize("name", ["Lasso", "SparseLogisticRegression"])
def test_glm_estimator_refuses_a_hugely_wide_sparse_X(name):
    env = dict(os.environ, PYTHONPATH=ROOT, MALLOC_ARENA_MAX="2")
    p = subprocess.run([sys.executable, "-c", EST_CHILD, name], cwd=ROOT, env=env,
                       capture_output=True, text=True, timeout=120)
    assert "MemoryError" not in p.stderr and "Traceback" not in p.stderr, p.stderr[-1500:]
    assert p.stdout.startswith("REFUSED"), p.stdout + p.stderr[-1500:]
