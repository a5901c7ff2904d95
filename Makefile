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

# The same suite on a throwaway PostgreSQL (installed when missing). The node-pool tests
# touch no database, so they run once, in `make test`.
test-postgres: venv
	bash scripts/with-postgres.sh $(VENV)/bin/pytest --ignore=tests/raypool $(PYTEST_ARGS)

run: venv
	$(PY) scripts/run_local.py

clean-venv:
	rm -rf $(VENV)
