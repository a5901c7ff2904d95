# Two commands matter: `make run` (the whole system locally) and `make test` (every tier).
# `make test-fast` runs the unit tier alone, in parallel: a minute or two, for while you work.
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: run test test-fast test-ray test-browser test-postgres lint venv clean-venv

# pytest-xdist workers: one per core, at most 4 (each has its own test database; beyond 4 their
# start-up costs more than it saves). XDIST=0 runs in this process. Real Ray gets 2, one per 2
# cores from 4 cores on, at most 4 (RAY_XDIST): scripts/pytest-tiers.sh says why.
export XDIST ?= $(shell n=$$(nproc); echo $$(( n < 4 ? n : 4 )))
export RAY_XDIST ?= $(shell n=$$(( $$(nproc) / 2 )); echo $$(( n < 2 ? 2 : n < 4 ? n : 4 )))
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

# Every tier (pytest.ini lists them; tests/conftest.py puts each test in one), in two lanes at
# once: real Ray, and the rest (scripts/pytest-tiers.sh); the lint beside them (its output once
# it is done, from var/lint.log). Fails when either fails.
test: venv
	bash scripts/ensure-test-deps.sh
	@mkdir -p var
	@$(MAKE) --no-print-directory lint >var/lint.log 2>&1 & lint=$$!; \
	bash scripts/pytest-tiers.sh $(PYTEST_ARGS); tiers=$$?; \
	wait $$lint; linted=$$?; echo "== lint: exit $$linted"; cat var/lint.log; \
	[ $$tiers = 0 ] && [ $$linted = 0 ]

# The unit tier: no real Ray, no browser, no node pool.
test-fast: venv
	$(VENV)/bin/pytest $(PARALLEL) -m unit $(PYTEST_ARGS)

# Real Ray: the scheduler on a cluster, the node pool, the chaos run.
test-ray: venv
	$(VENV)/bin/pytest -n $(RAY_XDIST) --dist loadgroup -m ray $(PYTEST_ARGS)

test-browser: venv
	bash scripts/ensure-test-deps.sh
	$(VENV)/bin/pytest $(PARALLEL) -m browser $(PYTEST_ARGS)

# What the database decides, again on a throwaway PostgreSQL (installed when missing): every
# test that uses the database (the `database` marker: queries, locks, constraints), and of the
# real-Ray tests those where several processes share it (`db_processes`: qcluster, crash
# safety). Not again: what drives the same API through HTTP (the browser, the CLI, the schema
# fuzzing; the API's own tests run on both), the node pool (no database) and the other Ray tests
# (what they add is Ray's behaviour, the same on either database). Each xdist worker gets its
# own database on the one server (pytest-django suffixes its name with the worker's id).
test-postgres: venv
	bash scripts/with-postgres.sh env RAY_MARK=db_processes REST_MARK="database and not ray" \
		bash scripts/pytest-tiers.sh --ignore=tests/raypool --ignore=tests/web --ignore=tests/cli \
		--ignore=tests/test_schemathesis.py $(PYTEST_ARGS)

run: venv
	$(PY) scripts/run_local.py

clean-venv:
	rm -rf $(VENV)
