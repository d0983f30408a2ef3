# The two commands: `make serve` and `make test`. Both set up .venv first.
PYTHON ?= python3.11
VENV := .venv
BIN := $(VENV)/bin
# Stamp: reinstall when the dependency declarations, the build hook or the C runtime's
# sources change (the editable install compiles engine/sim/_native/ in place).
INSTALLED := $(VENV)/.installed
NATIVE_SOURCES := $(wildcard engine/sim/_native/*.c engine/sim/_native/*.h)

.PHONY: prerequisites setup serve test lint typecheck format constraints
.DEFAULT_GOAL := setup

# What the machine must provide (tools/prerequisites.sh): one line per missing thing, before
# anything is built. The Python checked is the one that builds: .venv's once it exists.
# `make test` also needs Chromium for the browser tests.
CHECKED_PYTHON = $(if $(wildcard $(BIN)/python),$(BIN)/python,$(PYTHON))
prerequisites:
	@sh tools/prerequisites.sh $(CHECKED_PYTHON) $(if $(filter test,$(MAKECMDGOALS)),browser)

setup: $(INSTALLED)

$(INSTALLED): pyproject.toml constraints.txt setup.py $(NATIVE_SOURCES) | prerequisites
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -c constraints.txt -e '.[dev]'
	touch $@

serve: setup
	$(BIN)/dtr-landscape serve

lint: setup
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

typecheck: setup
	$(BIN)/mypy

test: prerequisites lint typecheck
	$(BIN)/python -m pytest -q

# Rewrite the source files in place with ruff's formatter and autofixes.
format: setup
	$(BIN)/ruff format .
	$(BIN)/ruff check --fix .

# Re-pin constraints.txt from what .venv holds (the project itself left out).
constraints: setup
	{ echo '# Exact pins for CI and the Docker image: .venv/bin/pip freeze, without the project itself.'; \
	  echo '# Regenerate after changing dependencies: make constraints'; \
	  $(BIN)/pip freeze --exclude-editable | grep -vi '^dtr-landscape'; } > constraints.txt.tmp
	mv constraints.txt.tmp constraints.txt
