# Two commands on a fresh machine: `make run` starts the local stack, `make test` runs every check.
PORT ?= 3000
# The interpreter .venv is made from: the system's /usr/bin/python3 where it is 3.11 or newer and can
# make a virtual environment, else the first python3 on PATH; `make PYTHON=python3.12 test` for
# another. Distributions build theirs with profile-guided and link-time optimisation, which pyenv's
# default build leaves out, so the same tests take less CPU on them (docs/benchmark.md, "Make").
PYTHON ?= $(shell /usr/bin/python3 -c 'import sys, ensurepip; sys.exit(sys.version_info < (3, 11))' \
	2>/dev/null && echo /usr/bin/python3 || echo python3)
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
# aws-sam-cli pins its own cfn-lint, click and requests: it lives in a virtual environment of its own.
# Both environments are filled by uv (from PyPI, into each environment by its own pip): it resolves
# and unpacks the same packages as pip in a fraction of pip's CPU, and `make test` installs twice on
# a fresh clone (.venv before anything else can start, .venv-sam in the build test). Like
# pip's --no-compile, uv leaves the modules uncompiled: Python compiles a module when it is first
# imported, and most of what is installed (sympy, moto's other services) never is.
UV_VERSION ?= 0.13.9
SAM_VENV := .venv-sam
SAM := $(SAM_VENV)/bin/sam
export SAM_CLI_TELEMETRY := 0

.PHONY: run test lint pytest build deploy bench simulate clean openapi

# Python caches each module it compiles (its .pyc) unless PYTHONDONTWRITEBYTECODE is set, as it is
# in some shells and containers. A test run starts hundreds of Python processes (moto, the
# functions' environments, the workers, the CLIs); without the cache each compiled moto, boto3 and
# the tests from source again, and compiling is most of an import's CPU. Every recipe
# here writes the cache, into .venv and the checkout's __pycache__ folders (ignored by git).
unexport PYTHONDONTWRITEBYTECODE

# Said on stderr, as pip's own messages are: `make run`'s stdout holds only the stack's lines.
$(STAMP): pyproject.toml client/pyproject.toml
	@$(PYTHON) -c 'import sys; sys.exit(sys.version_info < (3, 11) and "wakeup needs Python 3.11 or newer: set PYTHON=" or 0)'
	@echo "make: installing wakeup and its tools into $(VENV) with $(PYTHON)" >&2
	@$(PYTHON) -m venv $(VENV) >&2
	@$(BIN)/pip install --quiet 'uv==$(UV_VERSION)' >&2
	@$(BIN)/uv pip install --quiet --python $(BIN)/python --upgrade-package pip pip -e '.[dev]' -e ./client >&2
	@touch $@

run: $(STAMP)
	@$(BIN)/wakeup-local --port $(PORT)

# lint and `collect` side by side (each keeps one core busy), then the tests; the CPU-heavy
# simulations (below) start before lint and collect, as they are the last of `make pytest` to finish:
# at their low priority they take only what lint and collect leave idle. A lint failure stops them.
test: $(STAMP)
	@$(MAKE) --no-print-directory pytest FIRST="lint collect"

# Imports every test module once, so that Python's bytecode cache and pytest's rewritten tests are
# written by one process: else `make pytest`'s workers each compile moto, boto3 and the tests
# at once, on a fresh clone, each paying what one process pays for all (docs/benchmark.md, "Make").
.PHONY: collect
collect: $(STAMP)
	$(BIN)/pytest --collect-only -q > /dev/null

# lint-imports: the floor plan (pyproject.toml's [tool.importlinter] contracts), e.g. no arrow from
# the simulator up to the benchmark.
lint: $(STAMP)
	$(BIN)/lint-imports
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy layers/wakeup/wakeup local/wakeup_local admin/wakeup_admin sim/wakeup_sim awsfacts/wakeup_awsfacts cost/wakeup_cost calibrate/wakeup_calibrate client/wakeup_client functions apidoc
	$(BIN)/cfn-lint template.yaml

# Six workers on two cores: most tests wait on real time (a wake's second, a schedule's minute), so
# more workers than cores keep the cores busy while others wait (docs/benchmark.md, "Make").
# worksteal's even runs, each started with a slow test by tests/conftest.py, so that those run side
# by side from the start. The CPU-heavy simulations (marked in tests/conftest.py) run meanwhile at a
# low share of the cores (nice 10: where a timed test's processes want a core too, they get most
# of it): they take what the timed tests leave idle. (Not nice 19: beside other work at nice 10
# they starved; their timeout is longer for a busy machine.) Last, the tests marked `alone` (the 100-wake
# burst, the SQS poller's promptness), timed against the one-second goal with nothing beside them at
# their priority: simulations still running go down to nice 19 (the least share of a core wanted by
# another process of the run), to take only what the alone tests leave idle. Only the files that
# mark some are collected (tests/conftest.py fails a run where a test is marked elsewhere), as
# collecting every test to run a few costs seconds that nothing else shares.
# FIRST: targets made once the simulations have started, before the other tests (`make test`'s).
ALONE_MARK := mark\.alone\b
pytest: $(STAMP)
	@heavy_log=$$(mktemp); \
	nice -n 10 $(BIN)/pytest -n 2 --timeout 900 -m cpu_heavy tests/unit > $$heavy_log 2>&1 & heavy=$$!; \
	$(if $(FIRST),$(MAKE) --no-print-directory -j 2 $(FIRST) || { kill $$heavy; wait $$heavy; rm -f $$heavy_log; exit 1; };) \
	$(BIN)/pytest -n 6 --dist worksteal -m "not cpu_heavy and not alone"; status=$$?; \
	if [ $$status -eq 0 ]; then \
		renice -n 19 -p $$(ps -eo pid=,ppid= | awk -v root=$$heavy '{ up[$$1] = $$2 } END { print root; for (p in up) { q = p; while ((q in up) && q != root && q > 1) q = up[q]; if (q == root) print p } }') > /dev/null 2>&1; \
		$(BIN)/pytest -m alone $$(grep -rlE --include='test_*.py' '$(ALONE_MARK)' tests); status=$$?; \
	fi; \
	wait $$heavy || status=1; \
	echo "--- the CPU-heavy simulations, run meanwhile:"; cat $$heavy_log; rm -f $$heavy_log; \
	exit $$status

# docs/openapi.json from the code (tests/functional/test_openapi.py fails when it drifts).
openapi: $(STAMP)
	$(BIN)/python -m apidoc

# Cold starts, the local stack's API latency and wake lateness, and a rough cost per million wakes,
# printed as Markdown (docs/benchmark.md keeps a run). Makes bench/.venv, with only the Lambda
# layer's packages, on its first run. About ten minutes (seeding 10,000 instances and two bursts of
# 1,000 wakes take most of it), all on 127.0.0.1; no pass or fail.
bench: $(STAMP)
	$(BIN)/python -m bench

# --- build and deploy (SAM, no Docker) ---------------------------------------------------------
SAM_CLI_VERSION ?= 1.170.0
SAM_BUILD_DIR ?= .aws-sam/build
SAM_CACHE_DIR ?= .aws-sam/cache
# Which samconfig.toml environment `make deploy` uses: `make deploy ENV=prod`.
ENV ?= default
# `sam build` needs the runtime's interpreter, python3.13, on PATH. Use one that runs as it is, or
# else pyenv's newest 3.13 (installed but not selected, python3.13 is a shim that refuses to run).
PYTHON313_BIN = $(shell \
	if python3.13 -c '' >/dev/null 2>&1; then dirname "$$(command -v python3.13)"; \
	else root="$$(pyenv root 2>/dev/null || echo "$${PYENV_ROOT:-$$HOME/.pyenv}")"; \
	ls -d "$$root"/versions/3.13*/bin/python3.13 2>/dev/null | sort -V | tail -n 1 | xargs -r dirname; fi)

$(SAM):
	$(PYTHON) -m venv $(SAM_VENV)
	$(SAM_VENV)/bin/pip install --quiet 'uv==$(UV_VERSION)'
	$(SAM_VENV)/bin/uv pip install --quiet --python $(SAM_VENV)/bin/python 'aws-sam-cli==$(SAM_CLI_VERSION)'

# Checked before anything is installed, so a machine without 3.13 hears so at once.
.PHONY: python313
python313:
	@test -n "$(PYTHON313_BIN)" || { echo "make build needs Python 3.13, the Lambda runtime's interpreter," \
		"and found none: install it (pyenv install 3.13, or your system's python3.13 package) so that" \
		"python3.13 runs, then run make build again." >&2; exit 1; }

build: python313 $(SAM)
	PATH="$(PYTHON313_BIN):$$PATH" $(SAM) build --build-dir $(SAM_BUILD_DIR) --cache-dir $(SAM_CACHE_DIR)

# samconfig.toml named in full: with --template-file, SAM would look for it beside the built template.
deploy: build
	$(SAM) deploy --config-file $(CURDIR)/samconfig.toml --config-env $(ENV) \
		--template-file $(SAM_BUILD_DIR)/template.yaml

clean:
	rm -rf $(VENV) $(SAM_VENV) bench/.venv .aws-sam .mypy_cache .pytest_cache .ruff_cache .sim-native .sim-native.build-*

# The simulator's hottest modules compiled with mypyc, in a copy of its packages that `make simulate`
# imports first (less CPU; sim/build_native.py says which and why), made again when a
# source changes: the simulator's, or the service's it was type-checked against (the folders count
# too: a module added, removed or renamed).
NATIVE := .sim-native
NATIVE_SOURCES := sim/build_native.py sim/wakeup_sim awsfacts/wakeup_awsfacts \
	$(wildcard sim/wakeup_sim/*.py awsfacts/wakeup_awsfacts/*.py layers/wakeup/wakeup/*.py layers/wakeup/wakeup/*/*.py)
$(NATIVE)/.built: $(STAMP) $(NATIVE_SOURCES)
	$(BIN)/python sim/build_native.py $(NATIVE)
	touch $@

# A simulation of the deployment at AWS's scale, driving the service's own delivery code on virtual
# time: the grid of loads (sim/wakeup_sim/grid.py), each cell's figures as Markdown, the worst cell's
# plot in docs/scaling/ (see docs/scaling.md). It fails when a cell misses its bound, loses a wake or
# calls one twice; its last line says so. Options after SIM_ARGS, e.g.
# `make simulate SIM_ARGS="--only 'steady 0.2/s' --no-init-boost"`. Where the modules cannot be
# compiled (no C compiler or Python headers) it runs them as Python, says so, and tries again on
# its next run.
.PHONY: simulate
simulate: $(STAMP)
	@$(MAKE) --no-print-directory $(NATIVE)/.built || \
		echo "make simulate: running the simulator's Python modules (slower than compiled)" >&2
	PYTHONPATH=$(NATIVE):. $(BIN)/python -m wakeup_sim $(SIM_ARGS)

# What a deployment costs before it is deployed: every charge of a month with no wake, a million near
# and far wakes at a steady 100 a second (the simulator), a month at a few volumes, for template.yaml's
# parameters or yours: `make cost PARAMS="CallerMinimumPollers=0 CallerMemorySize=512"`. About ten seconds.
.PHONY: cost
cost: $(STAMP)
	PYTHONPATH=. $(BIN)/python -m bench.bill --parameter-overrides $(PARAMS)

# The fault matrix (docs/faults.md): every fault AWS allows (failed, late, twice, stale), each
# function dying, hosts hanging, at 1% and 10%, a row each, and a sweep of the settings, on the
# simulator with skewed clocks; checked as hosts and clients see it; exits 1 on any violation.
.PHONY: faults
faults: $(STAMP)
	PYTHONPATH=. $(BIN)/python -m wakeup_sim.fault_matrix $(FAULTS_ARGS)

# The simulator against the local stack: measures the local stack's profile on this machine, runs
# the same bursts on the local stack and in the simulator, and prints both (docs/scaling.md).
.PHONY: calibrate
calibrate: $(STAMP)
	PYTHONPATH=. $(BIN)/python -m wakeup_calibrate
