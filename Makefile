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
	$(BIN)/uv pip install --quiet --python $(BIN)/python -c constraints.txt -e '.[test,demo]'
	touch $(STAMP)

demo: $(STAMP)
	$(BIN)/python scripts/run_demo.py

test: $(STAMP)
	@$(BIN)/python -m pytest $(PYTEST_ARGS); rc=$$?; \
	if [ $$rc -eq 5 ]; then echo "ERROR: pytest collected no tests; the test suite is missing" >&2; fi; \
	exit $$rc

lint: $(STAMP)
	$(BIN)/ruff check .

typecheck: $(STAMP)
	$(BIN)/mypy

check: lint typecheck test

# Benchmarks print figures (never asserted in tests): import cost, detection latency, goodput, scale.
bench: $(STAMP)
	$(BIN)/python benchmarks/run_all.py

# Re-pin every dependency (run after changing pyproject.toml's dependencies).
constraints:
	test -x $(BIN)/uv || (test -x $(BIN)/python || $(PYTHON) -m venv $(VENV); $(BIN)/python -m pip install --quiet uv)
	$(BIN)/uv pip compile --quiet --python-version 3.11 --extra test --extra demo --extra postgres pyproject.toml -o constraints.txt

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache .hypothesis

# Full Airflow (api-server, scheduler, dag-processor, triggerer) on PostgreSQL against the emulator, in docker
# compose (README: "Full Airflow with Postgres"). UI: http://localhost:8080.
COMPOSE ?= docker compose
.PHONY: compose-up compose-down compose-logs check-postgres

compose-up:
	$(COMPOSE) up --build --detach --wait

compose-down:
	$(COMPOSE) down

compose-logs:
	$(COMPOSE) logs --follow

# docker-compose.yaml's Airflow configuration without docker: local PostgreSQL, db migrate, dags test (not in CI).
check-postgres: $(STAMP)
	bash scripts/check_postgres.sh
