# Two entry points a new user needs (see README): `make demo` and `make test`.
# Each creates .venv on first use (Python >= 3.11) and reinstalls when pyproject.toml changes.

PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: demo test lint typecheck check bench clean constraints

$(STAMP): pyproject.toml constraints.txt
	@$(PYTHON) -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else "Python >= 3.11 is needed; run: make PYTHON=python3.11 ...")'
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip uv
	$(BIN)/uv pip install --quiet --compile-bytecode --python $(BIN)/python -c constraints.txt -e '.[test,demo,postgres]'
	touch $(STAMP)

demo: $(STAMP)
	$(BIN)/python scripts/run_demo.py

# The suite runs on PYTEST_WORKERS pytest-xdist workers: most of its time is emulated platforms and workloads
# waiting, not CPU: 2 workers cut it by a third on 2 cores (`make test PYTEST_WORKERS=0` runs it in one process).
PYTEST_WORKERS ?= 2

test: $(STAMP)
	@$(BIN)/python -m pytest -n $(PYTEST_WORKERS) $(PYTEST_ARGS); rc=$$?; \
	if [ $$rc -eq 5 ]; then echo "ERROR: pytest collected no tests; the test suite is missing" >&2; fi; \
	exit $$rc

lint: $(STAMP)
	$(BIN)/ruff check .

typecheck: $(STAMP)
	$(BIN)/mypy

check: lint typecheck test

# Benchmarks print figures (never asserted in tests): import cost, detection latency, goodput, scale. They run in
# their own venv, .venv-bench, which adds the Google provider (a baseline way of benchmarks/goodput.py) and
# matplotlib (its plot) to what the demo installs.
BENCH_VENV := .venv-bench
BENCH_STAMP := $(BENCH_VENV)/.installed

$(BENCH_STAMP): pyproject.toml constraints-bench.txt
	@$(PYTHON) -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else "Python >= 3.11 is needed; run: make PYTHON=python3.11 ...")'
	test -x $(BENCH_VENV)/bin/python || $(PYTHON) -m venv $(BENCH_VENV)
	$(BENCH_VENV)/bin/python -m pip install --quiet --upgrade pip uv
	$(BENCH_VENV)/bin/uv pip install --quiet --compile-bytecode --python $(BENCH_VENV)/bin/python -c constraints-bench.txt -e '.[demo,bench]'
	touch $(BENCH_STAMP)

bench: $(BENCH_STAMP)
	$(BENCH_VENV)/bin/python benchmarks/run_all.py

# Re-pin every dependency (run after changing pyproject.toml's dependencies).
constraints:
	test -x $(BIN)/uv || (test -x $(BIN)/python || $(PYTHON) -m venv $(VENV); $(BIN)/python -m pip install --quiet uv)
	$(BIN)/uv pip compile --quiet --python-version 3.11 --extra test --extra demo --extra postgres pyproject.toml -o constraints.txt
	$(BIN)/uv pip compile --quiet --python-version 3.11 --extra demo --extra bench pyproject.toml -o constraints-bench.txt

clean:
	rm -rf $(VENV) $(BENCH_VENV) .pytest_cache .mypy_cache .ruff_cache .hypothesis

# Full Airflow (api-server, scheduler, dag-processor, triggerer) on PostgreSQL against the emulator, in docker
# compose (README: "Full Airflow with Postgres"). UI: http://localhost:8080.
COMPOSE ?= docker compose
.PHONY: compose-up compose-down compose-logs

compose-up:
	$(COMPOSE) up --build --detach --wait

compose-down:
	$(COMPOSE) down

compose-logs:
	$(COMPOSE) logs --follow

# The same services without docker, each its own native process on loopback (free ports): PostgreSQL, the emulator,
# airflow db migrate, api-server, scheduler, dag-processor, triggerer; stops everything on Ctrl-C.
# STACK_ARGS: --dags DIR (repeatable), --keep, --fault-plan PATH|none, --time-scale X.
.PHONY: stack stack-test stack-deps
# What the stack and its tests need from Debian besides the venv: PostgreSQL and a headless Chromium (the UI tests).
stack-deps:
	@if [ -z "$$(ls /usr/lib/postgresql/*/bin/initdb 2>/dev/null)" ] || ! command -v chromium >/dev/null; then \
		echo "installing postgresql and chromium (Debian packages)"; \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql chromium >/dev/null; \
	fi
stack: $(STAMP)
	$(BIN)/python -m airflow_provider_resilient.testing.stack $(STACK_ARGS)

# Tests marked `stack` (tests/stack/): the real scheduler, triggerer and api-server on PostgreSQL, driven through the
# REST API. `make test` skips them.
stack-test: $(STAMP)
	@RESILIENT_STACK_TESTS=1 $(BIN)/python -m pytest -m stack tests/stack -p no:cacheprovider $(PYTEST_ARGS); rc=$$?; \
	if [ $$rc -eq 5 ]; then echo "ERROR: pytest collected no tests; the stack tests are missing" >&2; fi; \
	exit $$rc
