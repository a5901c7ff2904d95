# Two commands matter: `make run` (the whole system locally) and `make test`.
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: run test test-postgres lint venv clean-venv

$(PY):
	$(PYTHON) -m venv $(VENV)

# Reinstall only when the requirements change. The argus CLI (cli/) goes in too, editable:
# its tests run the installed command.
$(STAMP): requirements.txt requirements-dev.txt cli/pyproject.toml | $(PY)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -r requirements-dev.txt
	$(PY) -m pip install --quiet --no-deps -e ./cli
	touch $(STAMP)

venv: $(STAMP)

# mypy's django-stubs plugin imports the settings, which need a secret key (any will do).
lint: venv
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	ARGUS_SECRET_KEY=mypy ARGUS_DEBUG=1 $(VENV)/bin/mypy .
	@mkdir -p var  # the default SQLite file lives there; makemigrations opens it
	ARGUS_DEBUG=1 $(PY) manage.py makemigrations --check --dry-run >/dev/null

test: venv
	bash scripts/ensure-test-deps.sh
	$(MAKE) lint
	$(VENV)/bin/pytest $(PYTEST_ARGS)

# The suite again on a throwaway PostgreSQL (installed when missing), for what the database
# decides: queries, locks, constraints, the scheduler on real Ray. What runs once, in `make test`:
# the node pool (no database), the browser, the CLI and the schema fuzzing (they drive the same
# API through HTTP; the API's own tests run on both), and the chaos run (4 minutes; its locks are
# the same code paths test_qcluster covers on both). CI runs both targets in about 30 minutes.
test-postgres: venv
	bash scripts/with-postgres.sh $(VENV)/bin/pytest --ignore=tests/raypool --ignore=tests/web \
		--ignore=tests/cli --ignore=tests/scheduler/test_chaos.py --ignore=tests/test_schemathesis.py $(PYTEST_ARGS)

run: venv
	$(PY) scripts/run_local.py

clean-venv:
	rm -rf $(VENV)
