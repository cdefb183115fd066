PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
PORT ?= 8000

.PHONY: install run test lint format bench bench-quick bench-http bench-floor bench-shop bench-size bench-snapshots profile-sync throughput

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)

# Installs again only when pyproject.toml changed since the last install, and quietly.
$(VENV)/.installed: pyproject.toml | $(BIN)/python
	$(BIN)/pip install --quiet --quiet --upgrade pip
	$(BIN)/pip install --quiet --quiet -e ".[test]"
	@touch $@

install: $(VENV)/.installed

# The local settings (debug on, a random secret key) that manage.py reads; never gunicorn.
.env: | $(BIN)/python
	$(BIN)/python -m config.local_env > $@

## Run the service on SQLite with demo data; prints an API key and a curl line.
run: install .env
	@$(BIN)/python manage.py collectstatic --noinput --verbosity 0 && \
	$(BIN)/python manage.py demo --port $(PORT) && \
	exec $(BIN)/python manage.py runserver --noreload 127.0.0.1:$(PORT)

## Run the test suite (SQLite by default; set DATABASE_URL for PostgreSQL).
test: install
	$(BIN)/python -m pytest $(PYTEST_ARGS)

## Benchmarks on PostgreSQL (the database is dropped and re-created; see docs/BENCHMARKS.md).
BENCH_DATABASE_URL ?= postgres://postgres@127.0.0.1:5432/stock_sync_bench
bench: install
	DATABASE_URL=$(BENCH_DATABASE_URL) $(BIN)/python tests/bench/run.py
	DATABASE_URL=$(BENCH_DATABASE_URL) $(BIN)/python tests/bench/over_http.py --workers 2
	DATABASE_URL=$(BENCH_DATABASE_URL) $(BIN)/python tests/bench/over_http.py --workers 5
	DATABASE_URL=$(BENCH_DATABASE_URL) $(BIN)/python tests/bench/shop_http.py

bench-quick: install
	DATABASE_URL=$(BENCH_DATABASE_URL) $(BIN)/python tests/bench/run.py --quick
	DATABASE_URL=$(BENCH_DATABASE_URL) $(BIN)/python tests/bench/over_http.py --quick
	DATABASE_URL=$(BENCH_DATABASE_URL) $(BIN)/python tests/bench/floor.py --quick
	DATABASE_URL=$(BENCH_DATABASE_URL) $(BIN)/python tests/bench/shop_http.py --quick
	DATABASE_URL=$(BENCH_DATABASE_URL) $(BIN)/python tests/bench/throughput.py --seconds 5 --clients 2 --workers 2
	DATABASE_URL=$(BENCH_DATABASE_URL) $(BIN)/python tests/bench/catalogue_size.py --quick --own-server
	DATABASE_URL=$(BENCH_DATABASE_URL) $(BIN)/python tests/bench/paired_http.py --old . --pairs 2 --size 200 --workers 1 --prices --later --no-request-id
	DATABASE_URL=$(BENCH_DATABASE_URL) $(BIN)/python tests/bench/paired_http.py --old . --pairs 1 --size 200 --workers 1 --spread
	DATABASE_URL=$(BENCH_DATABASE_URL) $(BIN)/python tests/bench/stock_query.py --old . --pairs 5 --workers 1
	DATABASE_URL=$(BENCH_DATABASE_URL) $(BIN)/python tests/bench/paired_runs.py --old . --runs 1 --args=--quick shop_http.py
	DATABASE_URL=$(BENCH_DATABASE_URL) $(BIN)/python tests/bench/snapshots.py --quick
	DATABASE_URL=$(BENCH_DATABASE_URL) $(BIN)/python tests/bench/paired_shop.py --old . --own-server --products 400 --pairs 3 --batch-pairs 2 --document-pairs 1 --reservations 50 --contention-pairs 1 --clients 4 --orders-per-client 2 --query-keys 20

## Over HTTP only (gunicorn, production configuration), and the phase-by-phase profile.
bench-http: install
	DATABASE_URL=$(BENCH_DATABASE_URL) $(BIN)/python tests/bench/over_http.py --workers 2
	DATABASE_URL=$(BENCH_DATABASE_URL) $(BIN)/python tests/bench/over_http.py --workers 5

## The connector's batches against a floor served over HTTP too, on a database of its own (the
## name of BENCH_DATABASE_URL's with _floor, dropped and re-created).
bench-floor: install
	DATABASE_URL=$(BENCH_DATABASE_URL) $(BIN)/python tests/bench/floor.py

profile-sync: install
	DATABASE_URL=$(BENCH_DATABASE_URL) $(BIN)/python tests/bench/profile_sync.py

## Cost against catalogue size: databases named after BENCH_DATABASE_URL's with _small and
## _large (1,000,000 products, a year of history; minutes to build), on a PostgreSQL server of
## the benchmark's own set up as docs/DEPLOYMENT.md says (tests/bench/pg_server.py).
## BENCH_SIZE_ARGS=--reuse keeps a large database already built; BENCH_SIZE_SERVER= measures
## on BENCH_DATABASE_URL's server as it is.
BENCH_SIZE_SERVER ?= --own-server
bench-size: install
	DATABASE_URL=$(BENCH_DATABASE_URL) $(BIN)/python tests/bench/catalogue_size.py $(BENCH_SIZE_SERVER) $(BENCH_SIZE_ARGS)

## Full snapshots: a 5000-item part against the same batch through operation 1, then the commit
## of a 1,000,000-product warehouse that zeroes 50,000 levels (a database named after
## BENCH_DATABASE_URL's with _warehouse, minutes to build, and its copy _commit) with shop
## placements around it. BENCH_SNAPSHOTS_ARGS=--reuse keeps a warehouse already built.
bench-snapshots: install
	DATABASE_URL=$(BENCH_DATABASE_URL) $(BIN)/python tests/bench/snapshots.py $(BENCH_SNAPSHOTS_ARGS)

bench-shop: install
	DATABASE_URL=$(BENCH_DATABASE_URL) $(BIN)/python tests/bench/shop_http.py

throughput: install
	DATABASE_URL=$(BENCH_DATABASE_URL) $(BIN)/python tests/bench/throughput.py

lint: install
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

format: install
	$(BIN)/ruff check --fix .
	$(BIN)/ruff format .
