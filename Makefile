# Two commands matter: `make run` (the whole system locally) and `make test` (every tier).
# `make test-fast` runs the unit tier alone, in parallel: a minute or two, for while you work.
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: run test test-fast test-ray test-browser test-postgres lint venv clean-venv

# pytest-xdist workers: one per core, at most 4. Each worker has its own test database; beyond
# 4 the workers' start-up (Django, the migrations) costs more than it saves, and each one that
# runs Ray tests starts its own cluster (~1.2 GB). XDIST=0 runs in this process, serially.
XDIST ?= $(shell n=$$(nproc); echo $$(( n < 4 ? n : 4 )))
# loadgroup: the tests sharing the session's Ray cluster stay on one worker (one cluster), each
# node-pool module on one (its pool is module-scoped), the chaos run alone; the rest spread
# (tests/conftest.py sets the groups).
PARALLEL := -n $(XDIST) --dist loadgroup

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

# Every tier (pytest.ini lists them; tests/conftest.py puts each test in one).
test: venv
	bash scripts/ensure-test-deps.sh
	$(MAKE) lint
	$(VENV)/bin/pytest $(PARALLEL) $(PYTEST_ARGS)

# The unit tier: no real Ray, no browser, no node pool.
test-fast: venv
	$(VENV)/bin/pytest $(PARALLEL) -m unit $(PYTEST_ARGS)

# Real Ray: the scheduler on a cluster, the node pool, the chaos run.
test-ray: venv
	$(VENV)/bin/pytest $(PARALLEL) -m ray $(PYTEST_ARGS)

test-browser: venv
	bash scripts/ensure-test-deps.sh
	$(VENV)/bin/pytest $(PARALLEL) -m browser $(PYTEST_ARGS)

# The suite again on a throwaway PostgreSQL (installed when missing), for what the database
# decides: queries, locks, constraints, the scheduler on real Ray. What runs once, in `make test`:
# the node pool (no database), the browser, the CLI and the schema fuzzing (they drive the same
# API through HTTP; the API's own tests run on both), and the chaos run (4 minutes; its locks are
# the same code paths test_qcluster covers on both). Each xdist worker gets its own database on
# the one server (pytest-django suffixes its name with the worker's id).
test-postgres: venv
	bash scripts/with-postgres.sh $(VENV)/bin/pytest $(PARALLEL) --ignore=tests/raypool --ignore=tests/web \
		--ignore=tests/cli --ignore=tests/scheduler/test_chaos.py --ignore=tests/test_schemathesis.py $(PYTEST_ARGS)

run: venv
	$(PY) scripts/run_local.py

clean-venv:
	rm -rf $(VENV)
