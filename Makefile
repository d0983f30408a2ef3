# The two commands: `make serve` and `make test`. Both set up .venv first.
PYTHON ?= python3.11
VENV := .venv
BIN := $(VENV)/bin
# Stamp: reinstall only when the dependency declarations change.
INSTALLED := $(VENV)/.installed

.PHONY: setup serve test lint typecheck format constraints

setup: $(INSTALLED)

$(INSTALLED): pyproject.toml constraints.txt
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

test: lint typecheck
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
