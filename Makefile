# Two commands for a fresh machine: `make run` (site with demo data on http://127.0.0.1:8000) and
# `make test`. Both create .venv in the project root and install what pyproject.toml lists.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
HOST ?= 127.0.0.1
PORT ?= 8000

.PHONY: run test lint demo bench clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e ".[dev,reference]"
	touch $(STAMP)

run: $(STAMP)
	$(BIN)/python manage.py migrate --noinput
	$(BIN)/python manage.py load_catalog
	$(BIN)/python manage.py demo_data
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
