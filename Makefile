# Set-up and everyday commands. `make quickstart` and `make test` work on a
# fresh machine: they create .venv and install everything on first use.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
# torch and torchvision go in first, pinned, so that no later requirement
# pulls a different (multi-GB) build; everything else must accept them.
TORCH_PINS ?= torch==2.14.1 torchvision==0.29.1
PYTEST_ARGS ?=

.PHONY: setup system-deps quickstart test test-slow test-readme test-all bench clean

$(BIN)/.installed: pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install $(TORCH_PINS)
	$(BIN)/python -m pip install -e ".[test]"
	# DeepSpeed builds against the torch already installed.
	$(BIN)/python -m pip install --no-build-isolation "deepspeed>=0.16"
	touch $@

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

test: setup system-deps
	$(BIN)/python -m pytest $(PYTEST_ARGS)

# multi-process accelerate / DeepSpeed launches on CPU and end-to-end Optuna
# sweeps (several minutes; DeepSpeed compiles its shared-memory op once into
# TORCH_EXTENSIONS_DIR)
test-slow: setup system-deps
	$(BIN)/python -m pytest -m slow $(PYTEST_ARGS)

# the README's offline commands, top to bottom at their full sizes, checking that none
# rewrites an earlier one's outputs (about 15 minutes on 2 cores; not part of CI's run)
test-readme: setup system-deps
	$(BIN)/python -m pytest -m readme tests/test_readme_walkthrough.py $(PYTEST_ARGS)

test-all: setup system-deps
	$(BIN)/python -m pytest -m "" $(PYTEST_ARGS)

bench: setup
	$(BIN)/python benchmarks/bench_builder.py
	$(BIN)/python benchmarks/bench_scoring.py --threads 1

clean:
	rm -rf $(VENV) build dist *.egg-info .pytest_cache
