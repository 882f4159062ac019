# Two commands on a fresh machine with only Python 3.10+: `make run` and `make test`.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-test
MPIEXEC := $(BIN)/mpiexec
NP ?= 4

.PHONY: run test test-serial test-mpi bench install clean

$(STAMP): setup.py
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -e ".[test]"
	touch $@

install: $(STAMP)

run: $(STAMP)
	$(MPIEXEC) -n $(NP) $(BIN)/python -m strads.apps.lasso

test: test-serial test-mpi

test-serial: $(STAMP)
	$(BIN)/python -m pytest tests -q --timeout=600

# Every rank runs the MPI-marked tests; `timeout` ends the job if a deadlock outlives
# the per-test timeouts.
test-mpi: $(STAMP)
	timeout 1200 $(MPIEXEC) -n $(NP) $(BIN)/python -m pytest tests -q --with-mpi --only-mpi \
		--timeout=300 -p no:cacheprovider

bench: $(STAMP)
	$(BIN)/python -m pip install -q -e ".[bench]"
	$(BIN)/python benchmarks/bench_lasso.py

clean:
	rm -rf $(VENV) build *.egg-info .pytest_cache
	find . -name __pycache__ -prune -exec rm -rf {} +
