# Parallelism Lab: `make run` serves the lab, `make test` runs every test.
#
# Both first build a project-local virtual environment (.venv) from the pinned lock files, so
# they work where the system Python refuses `pip install` (PEP 668: Debian 12, Ubuntu 24.04)
# and never touch the user's own environment. Each step reruns only when its lock file
# changes. `make lock` refreshes the lock files from pyproject.toml.

SHELL := /bin/bash
.SHELLFLAGS := -eu -o pipefail -c
.DEFAULT_GOAL := help

PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
PIP := $(PY) -m pip --disable-pip-version-check --quiet
ASSETS := static/vendor/node_modules/.package-lock.json
# plotly.js with only the trace types the labs draw, built from the pinned package.
BUNDLE := static/vendor/node_modules/.lab/plotly.min.js
# Tools and the tests find the venv's executables (hadolint, ruff) first, even when another
# virtual environment is active in the calling shell.
VENV_ENV := PATH="$(abspath $(VENV))/bin:$$PATH" VIRTUAL_ENV="$(abspath $(VENV))"
PIP_TOOLS := pip-tools==7.6.2
LOCK_VENV := .lock-venv

.PHONY: help run test test-quick deps test-deps assets chromium lock clean

help:
	@echo "make run    serve the lab on http://127.0.0.1:8000 (HOST, PORT, WORKERS override)"
	@echo "make test   run every test (engine, routes, Chromium through Playwright)"
	@echo "make test-quick  the engine and route tests alone (tests/labs, tests/app: no browser)"
	@echo "make lock   refresh requirements.lock and requirements-test.lock from pyproject.toml"
	@echo "make clean  remove .venv, $(LOCK_VENV) and the installed front-end assets"

run: deps assets
	$(VENV_ENV) $(PY) -m app

# pytest-xdist, one worker per core by default (about 21 minutes on 2 cores against about 38 in
# one process), each with its own live server, Chromium and PostgreSQL on free ports
# (worksteal); PYTEST_WORKERS=0 runs them in one process.
PYTEST_WORKERS ?= auto
test: test-deps assets chromium
	$(VENV_ENV) $(PY) -m pytest -n $(PYTEST_WORKERS) --dist worksteal $(PYTEST_ARGS)

# While working on the engine or the routes: those two layers, no Chromium needed.
test-quick: test-deps assets
	$(VENV_ENV) $(PY) -m pytest -n $(PYTEST_WORKERS) --dist worksteal tests/labs tests/app $(PYTEST_ARGS)

deps: $(VENV)/.deps-run
test-deps: $(VENV)/.deps-test
assets: $(BUNDLE)

# Python >= 3.11 with its venv module. A failed `python3 -m venv` (Debian without
# python3-venv) leaves a half-built .venv behind: remove it so the next run retries.
$(PY):
	@command -v $(PYTHON) >/dev/null || { \
	  echo "No '$(PYTHON)' on PATH: install Python >= 3.11 (or run make PYTHON=/path/to/python3.12)" >&2; \
	  exit 1; }
	@$(PYTHON) -c 'import sys; sys.exit(sys.version_info < (3, 11))' || { \
	  echo "Python >= 3.11 is needed; '$(PYTHON)' is $$($(PYTHON) -V 2>&1)." >&2; \
	  echo "Run make PYTHON=python3.12 (for example) with a newer one." >&2; exit 1; }
	@$(PYTHON) -m venv $(VENV) || { rm -rf $(VENV); \
	  echo "Could not create $(VENV). On Debian or Ubuntu: sudo apt-get install python3-venv" >&2; \
	  exit 1; }
	@echo "created $(VENV) with $$($(PY) -V)"

# The app's pins (also what the Dockerfile installs). --require-hashes: every file pip
# downloads must match the hash recorded by `make lock`.
$(VENV)/.deps-run: requirements.lock | $(PY)
	$(PIP) install --require-hashes -r requirements.lock
	@touch $@

# The same pins plus the test tools (requirements-test.lock is compiled on top of
# requirements.lock, so the app's versions are identical in both).
$(VENV)/.deps-test: requirements-test.lock | $(PY)
	$(PIP) install --require-hashes -r requirements-test.lock
	@touch $@ $(VENV)/.deps-run

$(ASSETS): static/vendor/package-lock.json
	@command -v npm >/dev/null || { \
	  echo "npm is needed for the pinned front-end assets: install Node.js and npm" >&2; exit 1; }
	npm ci --prefix static/vendor --ignore-scripts --no-audit --no-fund --loglevel=error
	@touch $@

# esbuild from the same lock (its platform binary is an optional package: no install script).
$(BUNDLE): $(ASSETS) static/vendor/build.mjs static/vendor/plotly-bundle.json
	node static/vendor/build.mjs

chromium:  # and PostgreSQL for the live-class tests (.ci/install)
	@bash .ci/install

# Resolved from PyPI in a separate environment (pip-tools stays out of .venv), for Python
# 3.11, the oldest supported and the Dockerfile's.
lock:
	@test -x $(LOCK_VENV)/bin/pip-compile || { $(PYTHON) -m venv $(LOCK_VENV) && \
	  $(LOCK_VENV)/bin/python -m pip install --disable-pip-version-check --quiet $(PIP_TOOLS); }
	CUSTOM_COMPILE_COMMAND="make lock" $(LOCK_VENV)/bin/pip-compile --quiet --upgrade \
	  --generate-hashes --strip-extras --no-emit-index-url --no-emit-find-links \
	  -o requirements.lock pyproject.toml
	CUSTOM_COMPILE_COMMAND="make lock" $(LOCK_VENV)/bin/pip-compile --quiet --upgrade \
	  --generate-hashes --strip-extras --no-emit-index-url --no-emit-find-links \
	  --extra test -o requirements-test.lock pyproject.toml requirements.lock

clean:
	rm -rf $(VENV) $(LOCK_VENV) static/vendor/node_modules
