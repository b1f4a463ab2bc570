# Set-up and everyday commands. `make quickstart` and `make test` work on a
# fresh machine: they create .venv and install everything on first use.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
# The install is locked: requirements/lock.txt pins every package (torch 2.14.1 and
# torchvision 0.29.1 among them) as `make lock` resolved them from pyproject.toml's ranges,
# so a fresh machine gets the versions the tests passed with, whatever PyPI released since.
# pyproject.toml keeps ranges for `pip install judgetrain` into an environment of your own.
LOCK   ?= requirements/lock.txt
LATEST ?= .venv-latest
PYTEST_ARGS ?=
# the fast suite's and CI's closing list of the slowest tests
DURATIONS ?= --durations=15

.PHONY: setup system-deps quickstart test test-slow test-examples test-all test-latest lint lock bench docs docs-serve clean

$(BIN)/.installed: $(LOCK) pyproject.toml
	@$(PYTHON) -c 'import sys; v = sys.version_info[:2]; sys.exit(0 if v == (3, 11) else \
	  f"{sys.executable} is Python {v[0]}.{v[1]}; $(LOCK) was resolved on Python 3.11 (Linux x86-64). Run with PYTHON=python3.11, " \
	  "or `make lock` to resolve it for this Python, or pip install -e \".[test]\" to take pyproject.toml ranges unlocked")'
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	# torch first, exactly as locked: DeepSpeed compiles against the torch already installed
	$(BIN)/python -m pip install -c $(LOCK) torch torchvision
	$(BIN)/python -m pip install --no-build-isolation -c $(LOCK) deepspeed
	$(BIN)/python -m pip install -r $(LOCK)
	$(BIN)/python -m pip install --no-deps -e .
	$(BIN)/python -m pip check
	touch $@

# Re-resolve the lock from pyproject.toml's ranges and requirements/torch.in (newest releases
# they allow), with pip-tools in a venv of its own; then run `make test` before committing it.
lock:
	test -x build/lock-venv/bin/pip-compile || ($(PYTHON) -m venv build/lock-venv && build/lock-venv/bin/python -m pip install -q "pip-tools>=7.4")
	build/lock-venv/bin/pip-compile --quiet --upgrade --allow-unsafe --strip-extras --no-emit-index-url --no-emit-find-links \
	  --extra test --extra deepspeed -o $(LOCK) pyproject.toml requirements/torch.in

setup: $(BIN)/.installed

# Debian/Ubuntu packages outside PyPI: WordNet for METEOR (read from
# /usr/share/wordnet, no NLTK download) and PostgreSQL for shared Optuna studies.
SYSTEM_PACKAGES ?= wordnet-base postgresql chromium chromium-driver slurm-wlm munge
system-deps:
	@if ! command -v dpkg >/dev/null; then \
	  echo "not a Debian/Ubuntu system: install WordNet (point JUDGETRAIN_WORDNET at it) and PostgreSQL yourself"; exit 0; fi; \
	missing=""; for p in $(SYSTEM_PACKAGES); do dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ]; then \
	  echo "installing:$$missing"; \
	  SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
	  $$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq $$missing; \
	else echo "system packages present: $(SYSTEM_PACKAGES)"; fi

quickstart: setup
	$(BIN)/judgetrain quickstart

test: setup system-deps lint
	$(BIN)/python -m pytest $(DURATIONS) $(PYTEST_ARGS)

# ruff (lint + format check) and mypy over the package, as configured in pyproject.toml
lint: setup
	$(BIN)/ruff check judgetrain data_builders eval
	$(BIN)/ruff format --check judgetrain data_builders eval
	$(BIN)/mypy

# The fast suite against the newest releases pyproject.toml allows (not the lock), in a venv
# of its own: what the next `make lock` would break. Not a CI gate; it first prints every
# package whose version differs from the lock, so a failure can be read against them.
test-latest: system-deps
	test -x $(LATEST)/bin/python || $(PYTHON) -m venv $(LATEST)
	$(LATEST)/bin/python -m pip install -q --upgrade --upgrade-strategy eager torch torchvision
	$(LATEST)/bin/python -m pip install -q --upgrade --upgrade-strategy eager --no-build-isolation deepspeed
	$(LATEST)/bin/python -m pip install -q --upgrade --upgrade-strategy eager -e ".[test]"
	$(LATEST)/bin/python -m pip check
	$(LATEST)/bin/python -m judgetrain.compat.versions --lock $(LOCK)
	$(LATEST)/bin/python -m pytest $(DURATIONS) $(PYTEST_ARGS)

# multi-process accelerate / DeepSpeed launches on CPU and end-to-end Optuna
# sweeps (several minutes; DeepSpeed compiles its shared-memory op once into
# TORCH_EXTENSIONS_DIR)
test-slow: setup system-deps
	$(BIN)/python -m pytest -m slow $(DURATIONS) $(PYTEST_ARGS)

# every offline example of the README, of every docs page and of every --help, top to bottom in
# one folder, checking that none is refused or rewrites an earlier one's outputs (about 10 minutes
# on 2 cores; CI's slow run walks the README, Get started and every --help the same way)
test-examples: setup system-deps
	$(BIN)/python -m pytest -m examples $(DURATIONS) tests/docs/test_examples.py $(PYTEST_ARGS)

test-all: setup system-deps
	$(BIN)/python -m pytest -m "" $(PYTEST_ARGS)

# The documentation site (mkdocs.yml, docs/): the command pages are written again from each
# command's parser (docs/gen_commands.py), then MkDocs builds strictly (a broken link, anchor
# or missing page fails) into site/. MkDocs, Material and mkdocstrings are locked with the rest
# (pyproject.toml's `docs` extra, pulled in by `test`).
# NO_MKDOCS_2_WARNING: Material's end-of-life notice, nothing a reader of the build can act on.
DOCS_ADDR ?= 127.0.0.1:8000

docs: setup
	$(BIN)/python docs/gen_commands.py
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict --site-dir site

docs-serve: setup
	$(BIN)/python docs/gen_commands.py
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs serve --strict --dev-addr $(DOCS_ADDR)

bench: setup
	$(BIN)/python benchmarks/bench_builder.py
	$(BIN)/python benchmarks/bench_scoring.py --threads 1

clean:
	rm -rf $(VENV) $(LATEST) build dist site *.egg-info .pytest_cache
