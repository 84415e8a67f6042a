# Each target creates .venv if missing and (re)installs the core and every plugin under plugins/
# (editable) only when a pyproject.toml changed since the last install.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
PLUGINS := $(wildcard plugins/*)
SETUP := pyproject.toml $(wildcard plugins/*/pyproject.toml)

.PHONY: run test bench install clean

install: $(STAMP)

$(BIN)/python:
	$(PY) -m venv $(VENV)

$(STAMP): $(BIN)/python $(SETUP)
	$(BIN)/python -m pip install --quiet --disable-pip-version-check -e '.[test,bench,ray]' $(foreach p,$(PLUGINS),-e $(p))
	touch $(STAMP)

run: $(STAMP)
	$(BIN)/cdpbench -m +experiment=quickstart hydra/launcher=joblib
	$(BIN)/cdpbench report --latest --metric gain_rho

test: $(STAMP)
	$(BIN)/python -m pytest

bench: $(STAMP)
	$(BIN)/python -m benchmarks

clean:
	rm -rf $(VENV) outputs/multirun outputs/runs
