# The two commands a newcomer needs: `make scrape` (set up and run) and `make test`.
PYTHON ?= python3
VENV ?= .venv
BIN = $(VENV)/bin
WORKERS ?= 4
DEMO_TEMPLATES ?= 250
DEMO_DB ?= demo.db
TEST_JOBS ?= 4
# the serial phase's lanes: one per CPU (at most 4), each pinned to its CPU (tests/conftest.py, --pin-lanes)
TIMING_LANES ?= $(shell $(PYTHON) -c "import os; print(min(4, len(os.sched_getaffinity(0))))" 2>/dev/null || echo 1)

.PHONY: install test test-fast lint scrape demo bench clean

$(BIN)/scraper: setup.cfg pyproject.toml
	# uv (Astral's installer, from PyPI) resolves and installs the same packages as pip, in parallel: 8 s
	# instead of pip's 26 s (and 3 s of upgrading pip) in a fresh venv. The venv is made without pip
	# (ensurepip took 7 s): the system's pip puts uv in it, and uv installs pip beside the packages. Where
	# $(PYTHON) has no pip, or uv cannot be had (an index only pip is configured for), ensurepip and pip do it.
	$(PYTHON) -m pip --version >/dev/null 2>&1 && $(PYTHON) -m venv --without-pip $(VENV) \
		&& $(PYTHON) -m pip --python $(BIN)/python install --quiet uv \
		&& $(BIN)/uv pip install --quiet --python $(BIN)/python pip -e '.[test]' \
		|| ($(PYTHON) -m venv $(VENV) && $(BIN)/pip install --quiet --no-compile -e '.[test]')
	# byte-compiled at install: where PYTHONDONTWRITEBYTECODE is set (as on our CI machines) nothing imported
	# is ever cached, so without it every process compiles every module it imports, each time; compileall on
	# every CPU
	$(BIN)/python -m compileall -q -j 0 $(VENV)/lib > /dev/null
	touch $@

install: $(BIN)/scraper

# target-jsonl, the Singer target the tap's tests load into (tests/test_tap.py), in a venv of its own: every
# release pins jsonschema 2.6 and singer-python 5.8, which singer-sdk cannot share. Made only for the tests
# (uv: about 3 s); where it cannot be made, those tests are skipped and say why.
TARGET_VENV ?= .venv-target
$(TARGET_VENV)/bin/target-jsonl: | $(BIN)/scraper
	($(BIN)/uv venv --quiet --python $(BIN)/python $(TARGET_VENV) \
		&& $(BIN)/uv pip install --quiet --python $(TARGET_VENV)/bin/python 'target-jsonl==0.1.4') \
		|| ($(PYTHON) -m venv $(TARGET_VENV) && $(TARGET_VENV)/bin/pip install --quiet 'target-jsonl==0.1.4') \
		|| echo "target-jsonl could not be installed; the tap's tests that load into it will be skipped" >&2

# First one collection, which keeps the test modules with their assertions rewritten (tests/conftest.py): every
# test process of the phases then loads them (2.5 s of CPU each to collect, against 8.8 s rewriting them).
# Then two phases: the tests that only check outcomes side by side (TEST_JOBS processes; most of their time is
# spent waiting on real processes; an idle process takes tests queued for another, as xdist's default hands
# out runs of consecutive tests and one process went on alone for a minute with several long ones), then
# the tests marked `timing` (rate windows, memory peaks, Chromium), so each measures on a quiet machine:
# first the `wide` ones (dozens of pages in Chromium) alone on every CPU, then the others one at a time on
# each CPU, in a lane of its own (TIMING_LANES processes, each pinned to its CPU with all it starts). Each
# prints its slowest tests.
# the project's own modules byte-compiled first, for the same reason: a test suite starts a few hundred
# Python processes, and compiling what they import each time more than doubled its CPU time
test: install $(TARGET_VENV)/bin/target-jsonl
	$(BIN)/python -m compileall -q scraper scripts tests
	$(BIN)/python -m pytest -q --collect-only > /dev/null
	$(BIN)/python -m pytest -q -n $(TEST_JOBS) --dist worksteal -m "not timing" --durations=15
	$(BIN)/python -m pytest -q -m "timing and wide" --durations=5
	$(BIN)/python -m pytest -q -n $(TIMING_LANES) --pin-lanes -m "timing and not wide" --durations=15

# the quick loop while editing: the parallel phase only (CI runs both)
test-fast: install $(TARGET_VENV)/bin/target-jsonl
	$(BIN)/python -m compileall -q scraper scripts tests
	$(BIN)/python -m pytest -q -n $(TEST_JOBS) --dist worksteal -m "not timing"

# ruff; import-linter's layer contracts (pyproject.toml); mypy over the seams (pyproject.toml); no private
# name imported across modules (scripts/check_private_imports.py); no SQL outside scraper/db/
# (scripts/check_sql_outside_db.py); no request to a site but through the polite client
# (scripts/check_one_way_out.py)
lint: install
	$(BIN)/ruff check .
	$(BIN)/lint-imports
	$(BIN)/mypy
	$(BIN)/python -m scripts.check_private_imports
	$(BIN)/python -m scripts.check_sql_outside_db
	$(BIN)/python -m scripts.check_one_way_out

# what the crontab line in README.md and docs/operations.md runs: the walk (creates the database, or
# queues new, changed and removed templates), failed rows another chance, the run; in one process
scrape: install
	$(BIN)/scraper update --workers $(WORKERS)

demo: install
	$(BIN)/python -m scripts.demo --templates $(DEMO_TEMPLATES) --workers $(WORKERS) --db $(DEMO_DB)

# the bench extra (Scrapy, for the side-by-side) where it can be installed; without it those rows say so
# the project byte-compiled first, as for the tests: where PYTHONDONTWRITEBYTECODE is set, a module changed since
# the last compile is compiled again by every process that imports it (28 stale modules put 35 ms on a run's
# start, and on every stand-in and worker)
bench: install
	$(BIN)/python -m pip install --quiet -e '.[bench]' || echo "bench: Scrapy could not be installed; its rows are left out"
	$(BIN)/python -m compileall -q scraper scripts
	$(BIN)/python -m scripts.bench
	$(BIN)/python -m scripts.bench_postgres
	$(BIN)/python -m scripts.bench_transcripts
	$(BIN)/python -m scripts.bench_delivery
	$(BIN)/python -m scripts.bench_refresh
	$(BIN)/python -m scripts.bench_scrapy

clean:
	rm -rf $(VENV) $(TARGET_VENV) *.egg-info $(DEMO_DB) $(DEMO_DB)-*
