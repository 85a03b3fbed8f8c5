# qmgr developer entry points. On a fresh machine with Python >= 3.11:
#   make run    create .venv, install qmgr, start a queue manager (data in ./var)
#   make test   create .venv, install qmgr with its test extras, run ruff, mypy, pytest

PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
PY     := $(BIN)/python
PIP    := $(PY) -m pip --disable-pip-version-check
DATA   ?= var
PYTEST_ARGS ?=

.PHONY: run test lint typecheck pytest bench clean check-python

check-python:
	@$(PYTHON) -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else 1)' || \
	  { echo "qmgr needs Python >= 3.11 (found: $$($(PYTHON) --version 2>&1)). Set PYTHON=/path/to/python3.11."; exit 1; }

$(PY): | check-python
	$(PYTHON) -m venv $(VENV)
	$(PIP) install -q --upgrade pip

# Re-install whenever pyproject.toml changes.
$(VENV)/.installed: pyproject.toml | $(PY)
	$(PIP) install -q -e .
	@touch $@

$(VENV)/.installed-test: pyproject.toml | $(PY)
	$(PIP) install -q -e '.[test]'
	@touch $@ $(VENV)/.installed

run: $(VENV)/.installed
	$(BIN)/qmgr serve --data-dir $(DATA)

lint: $(VENV)/.installed-test
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

typecheck: $(VENV)/.installed-test
	$(BIN)/mypy

pytest: $(VENV)/.installed-test
	$(BIN)/pytest $(PYTEST_ARGS)

test: lint typecheck pytest

bench: $(VENV)/.installed-test
	$(PY) bench/wire.py
	$(PY) bench/store.py
	$(PY) bench/local.py

clean:
	rm -rf $(VENV) .mypy_cache .ruff_cache .pytest_cache .hypothesis
