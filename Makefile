# Two entry points a new user needs (see README): `make demo` and `make test`.
# Each creates .venv on first use (Python >= 3.11) and reinstalls when pyproject.toml changes.

PYTHON ?= python3
# AIRFLOW_VERSION=3.1 or 3.2: every target below runs on that Airflow instead, in a venv of its own
# (.venv-airflow-3.1) pinned by its own constraints file (constraints/airflow-3.1.txt). Empty: Airflow 3.3, .venv.
AIRFLOW_VERSION ?=
ifeq ($(AIRFLOW_VERSION),)
VENV := .venv
CONSTRAINTS := constraints.txt
else
VENV := .venv-airflow-$(AIRFLOW_VERSION)
CONSTRAINTS := constraints/airflow-$(AIRFLOW_VERSION).txt
endif
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
#: The Airflow release each older minor version is tested on (its latest patch).
AIRFLOW_PATCH_3.1 := 3.1.8
AIRFLOW_PATCH_3.2 := 3.2.2
#: Pins an older version needs beyond its Airflow release (space-separated requirements), each a break found by the
#: compat tier on the newest release of a dependency that the Airflow release allows:
#: * FastAPI 0.165 cannot build Airflow 3.2.2's Execution API (its callable discriminator: "Model
#:   'TITerminalStatePayload' needs a discriminator field"); 0.136.3 is what Airflow 3.3's constraints pin.
#: * svcs 26.2's lifespan takes its registry off app.state when it exits, and Airflow 3.2.2's in-process Execution
#:   API (dag.test()) lets its lifespan be collected right after start: every task then fails ("'State' object has no
#:   attribute 'svcs_registry'"). Airflow 3.3 keeps the lifespan open.
AIRFLOW_PINS_3.1 :=
AIRFLOW_PINS_3.2 := fastapi==0.136.3 svcs<26.2

.PHONY: demo test lint typecheck check bench clean constraints docs

$(STAMP): pyproject.toml $(CONSTRAINTS)
	@$(PYTHON) -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else "Python >= 3.11 is needed; run: make PYTHON=python3.11 ...")'
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip uv
	$(BIN)/uv pip install --quiet --compile-bytecode --python $(BIN)/python -c $(CONSTRAINTS) -e '.[test,demo,postgres,celery]'
	touch $(STAMP)

demo: $(STAMP)
	$(BIN)/python scripts/run_demo.py

# The suite runs on PYTEST_WORKERS pytest-xdist workers (`make test PYTEST_WORKERS=0` runs it in one process); a
# worker that runs out of tests takes some from the other (worksteal), and the slowest modules start first
# (tests/conftest.py). It prints its 15 slowest tests; in CI a test over 60 s fails the run and one over 30 s is
# listed (tests/conftest.py).
PYTEST_WORKERS ?= 2

# TEST_TIER=compat: the tests that meet Airflow -- operators, sensors, triggers, hooks and clients, dag.test() end to
# end, the system-test DAGs, the reconciler DAG, the package's import surface -- what CI runs on the older Airflow
# versions (AIRFLOW_VERSION=3.1, 3.2) to stay within its time. It leaves out what runs no Airflow code or the same
# code as these: the emulator's own tests, the pure core (policy, supervisor, checkpoints, goodput, worker), and the
# demo's and benchmarks' script runs. full (default): everything.
TEST_TIER ?= full
TIER_ARGS_full :=
TIER_ARGS_compat := tests/operators tests/triggers tests/backends tests/e2e tests/system tests/test_compat.py \
	tests/test_clients.py tests/test_package.py tests/test_reconcile_dag.py

test: $(STAMP)
	@$(BIN)/python -m pytest -n $(PYTEST_WORKERS) $(if $(filter 0,$(PYTEST_WORKERS)),,--dist loadscope) \
		--durations=15 $(TIER_ARGS_$(TEST_TIER)) $(PYTEST_ARGS); rc=$$?; \
	if [ $$rc -eq 5 ]; then echo "ERROR: pytest collected no tests; the test suite is missing" >&2; fi; \
	exit $$rc

lint: $(STAMP)
	$(BIN)/ruff check .

typecheck: $(STAMP)
	$(BIN)/mypy

check: lint typecheck test

# The documentation site (mkdocs.yml, docs/): MkDocs with the Material theme and mkdocstrings for the API reference,
# built offline in strict mode (a warning fails the build) into site/. The docs extra joins .venv on first use.
DOCS_STAMP := $(VENV)/.installed-docs

$(DOCS_STAMP): $(STAMP)
	$(BIN)/uv pip install --quiet --python $(BIN)/python -c $(CONSTRAINTS) -e '.[docs]'
	touch $(DOCS_STAMP)

docs: $(DOCS_STAMP)
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict --site-dir site

# The wheel as users get it (scripts/wheel_check.py): built, checked for what it must hold (LICENSE, NOTICE) and
# must not (dev tools, tests, package managers, a self-loading pytest plugin), installed with its runtime
# dependencies only into a fresh venv (pinned by constraints.txt), every public class imported there; prints its
# size and file count. A few minutes: it installs Airflow.
.PHONY: wheel-check
wheel-check: $(STAMP)
	$(BIN)/python scripts/wheel_check.py $(WHEEL_CHECK_ARGS)

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
	$(BIN)/uv pip compile --quiet --python-version 3.11 --extra test --extra demo --extra postgres --extra celery pyproject.toml -o constraints.txt
	$(BIN)/uv pip compile --quiet --python-version 3.11 --extra demo --extra bench pyproject.toml -o constraints-bench.txt
	for v in 3.1 3.2; do p=$$(sed -n "s/^AIRFLOW_PATCH_$$v := //p" Makefile); echo "apache-airflow==$$p" > /tmp/airflow-pin.txt; \
		for pin in $$(sed -n "s/^AIRFLOW_PINS_$$v := //p" Makefile); do echo "$$pin" >> /tmp/airflow-pin.txt; done; \
		$(BIN)/uv pip compile --quiet --python-version 3.11 --extra test --extra demo --extra postgres --extra celery \
		-c /tmp/airflow-pin.txt pyproject.toml -o constraints/airflow-$$v.txt; done

clean:
	rm -rf $(VENV) $(BENCH_VENV) .pytest_cache .mypy_cache .ruff_cache .hypothesis site

# Full Airflow (api-server, scheduler, dag-processor, triggerer) on PostgreSQL against the emulator, in docker
# compose (docs/development.md: "Full Airflow with Postgres"). UI: http://localhost:8080.
COMPOSE ?= docker compose
.PHONY: compose-up compose-down compose-logs

# EXECUTOR=celery: profile `celery` (Redis, two Celery workers, a second triggerer) with the CeleryExecutor.
EXECUTOR ?= local
COMPOSE_CELERY := $(if $(filter celery,$(EXECUTOR)),AIRFLOW_EXECUTOR=CeleryExecutor COMPOSE_PROFILES=celery,)

compose-up:
	$(COMPOSE_CELERY) $(COMPOSE) up --build --detach --wait

compose-down:
	$(COMPOSE_CELERY) $(COMPOSE) down

compose-logs:
	$(COMPOSE) logs --follow

# The same services without docker, each its own native process on loopback (free ports): PostgreSQL, the emulator,
# airflow db migrate, api-server, scheduler, dag-processor, triggerer; stops everything on Ctrl-C.
# STACK_ARGS: --dags DIR (repeatable), --keep, --fault-plan PATH|none, --time-scale X.
.PHONY: stack stack-test stack-deps
# What the stack and its tests need from Debian besides the venv: PostgreSQL, Redis (the CeleryExecutor stack's
# broker) and a headless Chromium (the UI tests).
stack-deps:
	@if [ -z "$$(ls /usr/lib/postgresql/*/bin/initdb 2>/dev/null)" ] || ! command -v chromium >/dev/null \
			|| ! command -v redis-server >/dev/null; then \
		echo "installing postgresql, redis-server and chromium (Debian packages)"; \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql redis-server chromium \
			>/dev/null; \
	fi
# STACK_EXECUTOR=celery: the CeleryExecutor stack (Redis, two Celery workers, two triggerers) for `make stack` and
# `make stack-test`; local (default): the LocalExecutor and one triggerer.
STACK_EXECUTOR ?= local
stack: $(STAMP)
	$(BIN)/python -m devtools.stack --executor $(STACK_EXECUTOR) $(STACK_ARGS)

# Tests marked `stack` (tests/stack/): the real scheduler, triggerer(s), workers and api-server on PostgreSQL, driven
# through the REST API, on the STACK_EXECUTOR stack. `make test` skips them.
stack-test: $(STAMP)
	@RESILIENT_STACK_TESTS=1 RESILIENT_STACK_EXECUTOR=$(STACK_EXECUTOR) $(BIN)/python -m pytest -m stack tests/stack \
		-p no:cacheprovider $(PYTEST_ARGS); rc=$$?; \
	if [ $$rc -eq 5 ]; then echo "ERROR: pytest collected no tests; the stack tests are missing" >&2; fi; \
	exit $$rc
