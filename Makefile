# Each target creates .venv if missing and (re)installs it only when a pyproject.toml or the lock
# changed since the last install: first every third-party distribution at the version pinned in
# requirements.lock (hash-checked), then the core and every plugin under plugins/ (editable,
# --no-deps: the lock already holds their dependencies; --no-build-isolation: setuptools and wheel,
# their build backend, are locked too).
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
PLUGINS := $(wildcard plugins/*)
SETUP := pyproject.toml $(wildcard plugins/*/pyproject.toml)
LOCK := requirements.lock
PIP := $(BIN)/python -m pip --disable-pip-version-check

.PHONY: run test bench install clean mutate lock

install: $(STAMP)

$(BIN)/python:
	$(PY) -m venv $(VENV)

$(STAMP): $(BIN)/python $(SETUP) $(LOCK)
	$(PIP) install --quiet -r $(LOCK)
	$(PIP) install --quiet --no-deps --no-build-isolation -e . $(foreach p,$(PLUGINS),-e $(p))
	touch $(STAMP)

# Refresh requirements.lock after a change of a pyproject.toml's requirements (then `make install`):
#   pip-compile --generate-hashes --allow-unsafe --extra test --extra bench --extra ray --extra postgres --strip-extras
#               --no-emit-index-url --no-emit-find-links --output-file requirements.lock pyproject.toml -
# with `-e .`, `-e plugins/<each>` and the build requirements (LOCK_BUILD, as in every pyproject.toml's
# [build-system]) on stdin; the editable local distributions are then cut out of the file (they are
# resolved from their folders, never pinned). Pins that still satisfy the requirements are kept;
# `make lock LOCK_ARGS=--upgrade` moves every pin to the newest allowed version (`--upgrade-package
# NAME` one). pip-tools runs from its own venv, $(VENV)/lock-tools, so it never enters the locked one.
# Exact versions and hashes for this platform and Python 3.11; tools/check_lock.py checks a venv.
LOCK_TOOLS := $(VENV)/lock-tools
PIP_TOOLS := pip-tools==7.6.2
LOCK_BUILD := setuptools>=68 wheel
LOCK_ARGS ?=

lock:
	test -x $(LOCK_TOOLS)/bin/pip-compile || { $(PY) -m venv $(LOCK_TOOLS) && \
	  $(LOCK_TOOLS)/bin/python -m pip install --quiet --disable-pip-version-check '$(PIP_TOOLS)'; }
	printf '%s\n' '-e .' $(foreach p,$(PLUGINS),'-e $(p)') $(foreach r,$(LOCK_BUILD),'$(r)') | \
	  CUSTOM_COMPILE_COMMAND='make lock' $(LOCK_TOOLS)/bin/pip-compile --quiet --generate-hashes --allow-unsafe \
	  --extra test --extra bench --extra ray --extra postgres --strip-extras --no-emit-index-url --no-emit-find-links \
	  $(LOCK_ARGS) --output-file $(LOCK) pyproject.toml -
	awk '/^# WARNING: pip install will require/ || /^# Consider using a hashable URL/ {next} \
	  /^-e / {cut = 1; next} cut && /^    #/ {next} {cut = 0; print}' $(LOCK) > $(LOCK).tmp
	mv $(LOCK).tmp $(LOCK)

run: $(STAMP)
	$(BIN)/cdpbench -m +experiment=quickstart hydra/launcher=joblib
	$(BIN)/cdpbench report --latest --metric intersection.gain_rho

# Test files spread over the cores (pytest-xdist; at most 4 processes): 11.5 to 12.5 min on 2 cores here (about 1,860 tests).
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
