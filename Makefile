# Two commands for a fresh machine: `make run` (site with demo data on http://127.0.0.1:8000) and
# `make test`. Both create .venv in the project root. `make run` installs only what the server needs;
# `make test` adds the dev tools and the reference benchmark's torch and scikit-learn (runners need them,
# the server does not, and they take minutes to install). Each has its own stamp so either order works.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
SERVER_STAMP := $(VENV)/.installed-server
HOST ?= 127.0.0.1
PORT ?= 8000

.PHONY: run test lint demo bench clean

$(VENV)/bin/python:
	$(PYTHON) -m venv $(VENV)

$(SERVER_STAMP): pyproject.toml | $(VENV)/bin/python
	$(BIN)/pip install --quiet --disable-pip-version-check -e .
	touch $(SERVER_STAMP)

# The full install includes the server's, so it stamps both.
$(STAMP): pyproject.toml | $(VENV)/bin/python
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e ".[dev,reference]"
	touch $(STAMP) $(SERVER_STAMP)

# A tour: demo rounds in every phase, demo results and the demo accounts (printed before the server starts).
run: $(SERVER_STAMP)
	$(BIN)/python manage.py migrate --noinput
	$(BIN)/python manage.py load_catalog
	PODIUM_DEMO_BANNER=1 $(BIN)/python manage.py demo_data --accounts
	DEBUG=1 PODIUM_DEMO_BANNER=1 $(BIN)/python manage.py runserver $(HOST):$(PORT)

test: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/python -m tools.typecheck
	$(BIN)/python manage.py makemigrations --check --dry-run
	$(BIN)/pytest

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

bench: $(STAMP)
	$(BIN)/python bench/import_corpus.py

clean:
	rm -rf $(VENV) var staticfiles
