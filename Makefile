# qmgr developer entry points. On a fresh machine with Python >= 3.11:
#   make run    create .venv, install qmgr, start a queue manager (data in ./var)
#   make test   create .venv, install qmgr with its test extras, run ruff, mypy, pytest
#               (the Spark tests need Java 17 or newer, the alerting rules' tests
#               promtool: both checked first)
#   make pipeline  the Spark pipeline on local Spark against the queue manager of
#               `make run` (127.0.0.1:1802; QMGR=HOST:PORT for another)
#   make spark-package  dist/qmgr-spark.zip for spark-submit --py-files

PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
PY     := $(BIN)/python
PIP    := $(PY) -m pip --disable-pip-version-check
DATA   ?= var
PYTEST_ARGS ?=
QMGR   ?= 127.0.0.1:1802
ORDERS ?= 2000
PIPELINE_DIR ?= $(DATA)/pipeline

.PHONY: run test lint typecheck pytest bench clean check-python check-java check-promtool pipeline spark-package

check-python:
	@$(PYTHON) -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else 1)' || \
	  { echo "qmgr needs Python >= 3.11 (found: $$($(PYTHON) --version 2>&1)). Set PYTHON=/path/to/python3.11."; exit 1; }

# Spark runs on the JVM: Java 17 or newer, from JAVA_HOME or the PATH.
check-java:
	@java="$${JAVA_HOME:+$$JAVA_HOME/bin/}java"; \
	version=$$("$$java" -version 2>&1 | sed -n 's/.*version "\([0-9]*\)[."].*/\1/p' | head -n 1); \
	if [ -z "$$version" ] || [ "$$version" -lt 17 ]; then \
	  echo "Spark (the qmgr data source and its tests) needs Java 17 or newer;" \
	       "found: $${version:-no java} ($$java)."; \
	  echo "Install it (Debian/Ubuntu: sudo apt-get install openjdk-17-jre-headless;" \
	       "Fedora: sudo dnf install java-17-openjdk-headless; macOS: brew install openjdk@17)" \
	       "or set JAVA_HOME to a JDK/JRE 17+."; \
	  exit 1; \
	fi

# The shipped alerting rules are checked with promtool (Debian's prometheus package).
check-promtool:
	@command -v promtool >/dev/null 2>&1 || { \
	  echo "The alerting rules' tests need promtool, found on no PATH."; \
	  echo "Install it (Debian/Ubuntu: sudo apt-get install prometheus; or put the promtool" \
	       "of a Prometheus release on the PATH)."; \
	  exit 1; \
	}

$(PY): | check-python
	$(PYTHON) -m venv $(VENV)
	$(PIP) install -q --upgrade pip

# Re-install whenever pyproject.toml changes.
$(VENV)/.installed: pyproject.toml | $(PY)
	$(PIP) install -q -e .
	@touch $@

$(VENV)/.installed-spark: pyproject.toml | $(PY)
	$(PIP) install -q -e '.[spark]'
	@touch $@ $(VENV)/.installed

$(VENV)/.installed-test: pyproject.toml | $(PY)
	$(PIP) install -q -e '.[test]'
	@touch $@ $(VENV)/.installed $(VENV)/.installed-spark

run: $(VENV)/.installed
	$(BIN)/qmgr serve --data-dir $(DATA)

lint: $(VENV)/.installed-test
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

typecheck: $(VENV)/.installed-test
	$(BIN)/mypy

pytest: $(VENV)/.installed-test | check-java check-promtool
	$(BIN)/pytest $(PYTEST_ARGS)

test: check-java check-promtool lint typecheck pytest

# The shipped pipeline on local Spark: sample orders go to the queue manager at
# $(QMGR) (start one with `make run`), the streaming job keeps running totals
# per customer in `customer-totals`, then the batch job reports on the journal
# and dead-letter queues. Its checkpoint is kept in $(PIPELINE_DIR).
pipeline: $(VENV)/.installed-spark | check-java
	PYSPARK_PYTHON=$(abspath $(PY)) $(PY) -m pipelines.run --endpoint $(QMGR) \
	  --orders $(ORDERS) --work-dir $(PIPELINE_DIR)

# dist/qmgr-spark.zip: qmgr's data source and client for `spark-submit --py-files`.
spark-package: $(VENV)/.installed-spark
	$(PY) -m pipelines.package --output dist/qmgr-spark.zip

bench: $(VENV)/.installed-test
	$(PY) bench/wire.py
	$(PY) bench/store.py
	$(PY) bench/local.py

clean:
	rm -rf $(VENV) .mypy_cache .ruff_cache .pytest_cache .hypothesis
