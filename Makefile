# Each target creates .venv if missing and (re)installs the core and every plugin under plugins/
# (editable) only when a pyproject.toml changed since the last install.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
PLUGINS := $(wildcard plugins/*)
SETUP := pyproject.toml $(wildcard plugins/*/pyproject.toml)

.PHONY: run test bench install clean mutate

install: $(STAMP)

$(BIN)/python:
	$(PY) -m venv $(VENV)

$(STAMP): $(BIN)/python $(SETUP)
	$(BIN)/python -m pip install --quiet --disable-pip-version-check -e '.[test,bench,ray]' $(foreach p,$(PLUGINS),-e $(p))
	touch $(STAMP)

run: $(STAMP)
	$(BIN)/cdpbench -m +experiment=quickstart hydra/launcher=joblib
	$(BIN)/cdpbench report --latest --metric gain_rho

# Test files spread over the cores (pytest-xdist; at most 4 processes): 5 min instead of 11 on 2 cores.
# A single file or test: $(BIN)/python -m pytest tests/test_x.py (serial).
test: $(STAMP)
	$(BIN)/python -m pytest -n auto --maxprocesses 4

bench: $(STAMP)
	$(BIN)/python -m benchmarks

# Mutation check (cosmic-ray, the 'mutate' extra) of the modules that compute the papers' quantities,
# on a scratch copy of the tree, one process, about 30 min; not part of `make test`. mutation/README.md.
# Options: make mutate MUTATE_ARGS='--plugins classic,bcf --out mutation/results/x.csv'
mutate: $(STAMP)
	$(BIN)/python -c 'import cosmic_ray' 2>/dev/null || $(BIN)/python -m pip install --quiet --disable-pip-version-check -e '.[mutate]'
	$(BIN)/python mutation/run.py $(MUTATE_ARGS)

clean:
	rm -rf $(VENV) outputs/multirun outputs/runs
