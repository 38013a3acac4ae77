# The two commands a newcomer needs: `make scrape` (set up and run) and `make test`.
PYTHON ?= python3
VENV ?= .venv
BIN = $(VENV)/bin
WORKERS ?= 4
DEMO_TEMPLATES ?= 250
DEMO_DB ?= demo.db

.PHONY: install test test-fast lint scrape demo bench clean

$(BIN)/scraper: setup.cfg pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[test]'
	touch $@

install: $(BIN)/scraper

test: install
	$(BIN)/python -m pytest -q

# the quick loop while editing: everything but the tests marked slow (CI runs them all)
test-fast: install
	$(BIN)/python -m pytest -q -m "not slow"

# ruff; import-linter's layer contracts (pyproject.toml); mypy over the seams (pyproject.toml)
lint: install
	$(BIN)/ruff check .
	$(BIN)/lint-imports
	$(BIN)/mypy

# the steps of the crontab line in README.md and docs/operations.md: seed (creates the database, or adds
# new templates), give failed rows another chance, run
scrape: install
	$(BIN)/scraper seed --from-search
	$(BIN)/scraper retry --failed
	$(BIN)/scraper run --workers $(WORKERS)

demo: install
	$(BIN)/python -m scripts.demo --templates $(DEMO_TEMPLATES) --workers $(WORKERS) --db $(DEMO_DB)

bench: install
	$(BIN)/python -m scripts.bench

clean:
	rm -rf $(VENV) *.egg-info $(DEMO_DB) $(DEMO_DB)-*
