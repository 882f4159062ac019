#!/usr/bin/env bash
# Issue 30's many-core measurements as one script, for a machine with 16 cores or more
# that has Python 3.10+ with numpy, scipy and numba (docs/scaling.md has the figures):
#   WHL=folder-with-mpi4py-and-mpich-wheels OUT=results bash benchmarks/many_cores.sh
# Steps, each bounded so that the whole ends by $BUDGET seconds: compile the kernels while
# the real-size files are generated (--scale $SCALE), the speed-up curve (mpiexec -n 2, 4,
# 8, 16 for MF, LDA and Lasso), MF one worker / two threads / mpiexec -n 3 (best of 3),
# rebalancing with its defaults, then LDA at K = 1,000 on the curve if time is left.
set -u
START=$SECONDS
BUDGET=${BUDGET:-500}
SCALE=${SCALE:-0.1}
OUT=${OUT:-/tmp/strads_many_cores}
DATA=${DATA:-/tmp/strads_real}
mkdir -p "$OUT" "$DATA"
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
if [ -n "${WHL:-}" ]; then  # a venv over this Python's packages, with MPICH from the wheels
  rm -rf /tmp/strads_venv && $PY -m venv --without-pip /tmp/strads_venv || exit 1
  site=$($PY -c 'import site; print(site.getsitepackages()[0])')
  echo "$site" > "$(/tmp/strads_venv/bin/python -c 'import site; print(site.getsitepackages()[0])')/base.pth"
  $PY -m pip install -q --no-index --no-deps --no-compile --ignore-installed --prefix /tmp/strads_venv "$WHL"/*.whl || exit 1
  PY=/tmp/strads_venv/bin/python
fi
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 PATH=$(dirname "$PY"):$PATH
left() { echo $((BUDGET - (SECONDS - START))); }
step() {  # step NAME SECONDS COMMAND...: at most SECONDS, or what is left
  local name=$1 most=$2 t; shift 2
  t=$(left); [ "$t" -gt "$most" ] && t=$most
  if [ "$t" -lt 15 ]; then echo "== $name: skipped, ${t}s left" | tee -a "$OUT/log.txt"; return; fi
  echo "== $name (at most ${t}s, at $((SECONDS - START))s): $*" | tee -a "$OUT/log.txt"
  setsid "$@" > "$OUT/$name.txt" 2>&1 &  # a session of its own: its ranks end with it
  local pid=$! rc n=0
  while kill -0 $pid 2>/dev/null && [ $n -lt "$t" ]; do sleep 1; n=$((n + 1)); done
  kill -0 $pid 2>/dev/null && { pkill -TERM -s $pid; sleep 3; }
  wait $pid; rc=$?
  pkill -KILL -s $pid
  echo "== $name: exit $rc at $((SECONDS - START))s" | tee -a "$OUT/log.txt"
  tail -n 40 "$OUT/$name.txt"
}
{ nproc; free -g | head -2; $PY -c 'import sys, numpy, scipy, numba, mpi4py
print(sys.version.split()[0], "numpy", numpy.__version__, "scipy", scipy.__version__,
      "numba", numba.__version__, "mpi4py", mpi4py.__version__)'; } 2>&1 | tee "$OUT/log.txt"
step mpi_smoke 60 mpiexec -n 4 $PY -c 'from mpi4py import MPI; c = MPI.COMM_WORLD; print(c.rank, c.allreduce(1), MPI.Get_library_version()[:40])'

# the kernels (one process an app) while the data are written (one an app)
B="benchmarks/bench_real_size.py --scale $SCALE --dir $DATA"
step prepare 240 bash -c "for a in lasso mf lda; do $PY -m strads compile \$a & done;
  for a in mf lda lasso; do $PY $B --generate-only --apps \$a & done; wait"
CURVE="--ranks 2 4 8 16 --mf-iters 5 --lda-sweeps 5 --lasso-ratios 0.001 --timeout 120"
step curve_mf 150 $PY $B --apps mf $CURVE --json "$OUT/curve_mf.json"
step curve_lda 120 $PY $B --apps lda --lda-topics 100 $CURVE --json "$OUT/curve_lda.json"
step curve_lasso 60 $PY $B --apps lasso $CURVE --json "$OUT/curve_lasso.json"
step mf_threads 150 $PY benchmarks/bench_mf.py --part scaling --repeat 3 --shape 10M
step rebalance 100 $PY benchmarks/bench_runs.py leaderless --part rebalance --repeat 3
step curve_lda1000 120 $PY $B --apps lda --lda-topics 1000 $CURVE --lda-sweeps 2 \
  --json "$OUT/curve_lda1000.json"
echo "== done at $((SECONDS - START))s" | tee -a "$OUT/log.txt"
