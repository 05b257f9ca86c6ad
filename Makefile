# nearsim: the two commands are `make demo` and `make test`; both set up
# everything they need (Debian packages, the extension, a Python virtual
# environment and, without NEARSIM_DSN, a project-local PostgreSQL cluster).

PYTHON ?= python3
VENV := .venv
VENV_PYTHON := $(VENV)/bin/python
PG_CONFIG ?= /usr/lib/postgresql/15/bin/pg_config

# Without NEARSIM_DSN the commands use a cluster in .pgcluster/ that listens
# only on a unix socket there.
CLUSTER_DIR := .pgcluster
CLUSTER_PORT := 54329
LOCAL_DSN := host=$(abspath $(CLUSTER_DIR))/run port=$(CLUSTER_PORT) user=postgres
NEARSIM_DSN ?=
DSN = $(or $(NEARSIM_DSN),$(LOCAL_DSN) dbname=nearsim)

.PHONY: all install uninstall system setup venv cluster database demo test installcheck pytest fuzz bench bench-10m bench-guard bench-hnsw bench-verified bench-minhash bench-defaults bench-languages bench-spark bench-spark-10m bench-concurrency bench-100m lint stop clean dist

# `make` and `make install` build and install the extension alone, as PGXN
# clients expect (they pass PG_CONFIG); the packages it needs must be there.
all:
	$(MAKE) -C extension PG_CONFIG=$(PG_CONFIG)

install: all
	$(MAKE) -C extension install PG_CONFIG=$(PG_CONFIG)

uninstall:
	$(MAKE) -C extension uninstall PG_CONFIG=$(PG_CONFIG)

# Debian packages, then build and install the extension (as root or via
# sudo).  The tests need every package; the demo only the server's, the
# client's and the demo corpus (no browser, manual pages or pooler).
PACKAGES ?= all
system:
	NEARSIM_PACKAGES=$(PACKAGES) scripts/install.sh

setup: system venv

# The client in a virtual environment; the tests add their own libraries.
venv: $(VENV)/.installed

$(VENV)/.installed-client: python_client/pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(VENV)/bin/pip install -q --disable-pip-version-check -e './python_client'
	touch $@

$(VENV)/.installed: $(VENV)/.installed-client
	$(VENV)/bin/pip install -q --disable-pip-version-check -e './python_client[test]'
	touch $@

cluster:
ifeq ($(NEARSIM_DSN),)
	@scripts/pgcluster.sh start $(CLUSTER_DIR) $(CLUSTER_PORT) >/dev/null
	@psql "$(LOCAL_DSN) dbname=postgres" -XAtqc "SELECT 1 FROM pg_database WHERE datname = 'nearsim'" | grep -q 1 || \
		psql "$(LOCAL_DSN) dbname=postgres" -Xqc "CREATE DATABASE nearsim"
endif

database: setup cluster

demo:
	$(MAKE) system PACKAGES=demo
	$(MAKE) $(VENV)/.installed-client cluster
	$(VENV_PYTHON) scripts/demo.py --dsn "$(DSN)"

test: database lint installcheck pytest

# pg_regress tests of the SQL API (extension/test/), in a scratch database.
installcheck: database
	$(VENV_PYTHON) scripts/with_dsn.py "$(DSN)" $(MAKE) -C extension installcheck PG_CONFIG=$(PG_CONFIG) \
		|| { cat extension/regression.diffs 2>/dev/null; exit 1; }

# Python tests; they start their own throwaway cluster unless
# NEARSIM_TEST_DSN names a database.  TEST_WORKERS processes (pytest-xdist)
# take a test file at a time, each with its own cluster: a test mostly waits
# on its server or its subprocesses, so two keep two cores busy.  One server
# named by NEARSIM_TEST_DSN is not shared (roles are the whole server's).
TEST_WORKERS ?= $(if $(NEARSIM_TEST_DSN),0,2)
pytest: setup
	$(VENV_PYTHON) -m pytest tests --numprocesses $(TEST_WORKERS) --dist loadfile --durations 20

# A long run of the fuzzer of the rotation indexes (tests/server/test_index_fuzz.py):
# NEARSIM_FUZZ_EXAMPLES random sequences of up to NEARSIM_FUZZ_STEPS steps of
# three sessions writing to one table, every search compared with the scan
# after each step (about 10 minutes on 2 cores with the defaults); `make
# pytest` runs a short one from a fixed seed.  On its own throwaway cluster.
NEARSIM_FUZZ_EXAMPLES ?= 500
NEARSIM_FUZZ_STEPS ?= 30
fuzz: setup
	NEARSIM_FUZZ_EXAMPLES=$(NEARSIM_FUZZ_EXAMPLES) NEARSIM_FUZZ_STEPS=$(NEARSIM_FUZZ_STEPS) \
		$(VENV_PYTHON) -m pytest tests/server/test_index_fuzz.py -k whatever_sessions_do

# Speed (benchmarks.run), detection quality (benchmarks.quality) and verified
# search against MinHashLSH (benchmarks.verified) measured in one go, then
# docs/BENCHMARKS.md and its figures written from their results
# (benchmarks.docs).
BENCH_RESULTS := benchmarks/results
bench: database
	mkdir -p $(BENCH_RESULTS)
	$(VENV_PYTHON) -m benchmarks.run --dsn "$(DSN)" --results $(BENCH_RESULTS)/run.json
	$(VENV_PYTHON) -m benchmarks.quality --dsn "$(DSN)" --output-dir $(BENCH_RESULTS)
	$(VENV_PYTHON) -m benchmarks.verified --dsn "$(DSN)" --output-dir $(BENCH_RESULTS)
	$(VENV_PYTHON) -m benchmarks.docs $(BENCH_RESULTS) docs

# The default path at scale: 1 and 10 million documents, enabled empty and
# filled by COPY, INSERT ... SELECT of a million more rows into the full
# uniform table against a plain table of the same rows, and the uniform 10
# million again with 4 bands (about 20 minutes on 2 cores, 40 on a slower
# one; 11 GB of disk at the peak).  On
# the project's own cluster (no NEARSIM_DSN) it also loads a million more rows
# with max_wal_size raised, which takes ALTER SYSTEM (reset afterwards).
bench-10m: database
	mkdir -p $(BENCH_RESULTS)
	$(VENV_PYTHON) -m benchmarks.scale --dsn "$(DSN)" --results $(BENCH_RESULTS)/scale.json \
		--more-bands 4 $(if $(NEARSIM_DSN),,--max-wal-size 16GB)

# Single-row INSERTs with and without a check-in guard within 3 bits, one
# transaction and a transaction each, on 10 million uniform and text-like
# documents with 3 and with 4 bands (about 20 minutes on 2 cores; 3 GB of
# disk at the peak): benchmarks/results/guard.json.
bench-guard: database
	mkdir -p $(BENCH_RESULTS)
	$(VENV_PYTHON) -m benchmarks.guarded --dsn "$(DSN)" --results $(BENCH_RESULTS)/guard.json

# Exact nearest (ORDER BY hamming() LIMIT 10) against pgvector's HNSW over the
# same fingerprints, 1 million documents of each set (about 10 minutes on 2
# cores, most of it building HNSW).  pgvector is not a dependency: build and
# install it from its source first; without it this stops with a message.
bench-hnsw: database
	mkdir -p $(BENCH_RESULTS)
	$(VENV_PYTHON) -m benchmarks.hnsw --dsn "$(DSN)" --results $(BENCH_RESULTS)/hnsw.json
	if [ -f $(BENCH_RESULTS)/run.json ]; then \
		$(VENV_PYTHON) -m benchmarks.docs $(BENCH_RESULTS) docs; fi

# Searches per second with pgbench at 1, 4 and 16 clients (WHERE hamming(si, q)
# <= 6 and ORDER BY hamming(si, q) LIMIT 10), alone and while 4 writers insert
# into the same table, against pgvector's HNSW over the same fingerprints, every
# answer checked (benchmarks/concurrency.py).  CONCURRENCY_ROWS documents
# (10 million by default: 106 minutes on 2 cores, 89 of them building HNSW,
# whose build takes maintenance_work_mem 10GB so that its graph stays in memory,
# and about 6 GB of disk; CONCURRENCY_ROWS=1000000 took 26 minutes on a busy machine).
# Needs pgbench and pgvector; CONCURRENCY_OPTIONS=--without-hnsw measures nearsim alone.
CONCURRENCY_ROWS ?= 10000000
CONCURRENCY_OPTIONS ?=
bench-concurrency: database
	mkdir -p $(BENCH_RESULTS)
	$(VENV_PYTHON) -m benchmarks.concurrency --dsn "$(DSN)" --rows $(CONCURRENCY_ROWS) \
		--results $(BENCH_RESULTS)/concurrency.json $(CONCURRENCY_OPTIONS)
	if [ -f $(BENCH_RESULTS)/run.json ]; then \
		$(VENV_PYTHON) -m benchmarks.docs $(BENCH_RESULTS) docs; fi

# 100 million documents on one server (benchmarks/hundred.py): enabled empty,
# loaded by COPY, searched at k = 3 and 6 and nearest-first, all pairs at k = 3,
# every answer checked against numpy.  It may take an hour or more on 2 cores
# and needs about 30 GB of disk (20 GB of table and indexes, and the WAL up to
# max_wal_size): it stops with a message when the data directory has less
# free.  The client holds about 3 GB; all pairs take about 30 GB in the server
# and are left out when the machine has less available.  On the project's own
# cluster (no NEARSIM_DSN) it raises max_wal_size to 8GB while loading (ALTER
# SYSTEM, reset afterwards), and measures the searches again with a
# shared_buffers that holds the rotation indexes (HUNDRED_SHARED_BUFFERS,
# restarting the cluster, reset afterwards; it needs twice that much RAM).
HUNDRED_SHARED_BUFFERS ?= 10GB
bench-100m: database
	mkdir -p $(BENCH_RESULTS)
	$(VENV_PYTHON) -m benchmarks.hundred --dsn "$(DSN)" --size 100000000 \
		$(if $(NEARSIM_DSN),,--max-wal-size 8GB --search-shared-buffers $(HUNDRED_SHARED_BUFFERS) \
		--restart-command "scripts/pgcluster.sh stop $(CLUSTER_DIR) && scripts/pgcluster.sh start $(CLUSTER_DIR) $(CLUSTER_PORT)") \
		--results $(BENCH_RESULTS)/hundred.json
	if [ -f $(BENCH_RESULTS)/run.json ]; then \
		$(VENV_PYTHON) -m benchmarks.docs $(BENCH_RESULTS) docs; fi

# The verified-search part of make bench alone: the Debian copyright files
# (real near-duplicates), the evaluation corpus at 10,000 to 100,000 documents
# (the cost curve) and nearsim_similar_verified on the largest, against
# MinHashLSH, with every target (about 8 minutes on 2 cores); then
# docs/BENCHMARKS.md again when a make bench run is there to write it with.
bench-verified: database
	mkdir -p $(BENCH_RESULTS)
	$(VENV_PYTHON) -m benchmarks.verified --dsn "$(DSN)" --output-dir $(BENCH_RESULTS)
	if [ -f $(BENCH_RESULTS)/run.json ]; then \
		$(VENV_PYTHON) -m benchmarks.docs $(BENCH_RESULTS) docs; fi

# nearsim_similar_verified on a million documents of the evaluation corpus
# (benchmarks/verified_million.py): 200 lookups at S_R 0.8 and 0.5 through the
# rotation index and then the sketch index, p50 and p90, recall against the exact
# join, whose seconds and peak memory it reports (the corpus file of make
# bench-minhash, made if missing; about 30 minutes on 2 cores and 9 GB of memory
# for the join); then docs/BENCHMARKS.md again when a make bench run is there.
VERIFIED_DOCUMENTS ?= 1000000
bench-verified-1m: database
	mkdir -p $(BENCH_RESULTS)
	$(VENV_PYTHON) -m benchmarks.verified_million --dsn "$(DSN)" \
		--documents $(VERIFIED_DOCUMENTS) --results $(BENCH_RESULTS)/verified_million.json
	if [ -f $(BENCH_RESULTS)/run.json ]; then \
		$(VENV_PYTHON) -m benchmarks.docs $(BENCH_RESULTS) docs; fi

# All pairs at S_R >= 0.8 and 0.5 by nearsim_pairs_verified against Rensa's and
# datasketch's MinHash LSH plus estimate, on 100,000 and 1,000,000 documents of
# the evaluation corpus (benchmarks/minhash.py): seconds, CPU seconds, peak
# memory, and recall and precision against the exact truth.  The corpus file
# of a million documents (4.4 GB, about 7 minutes, 6 GB of memory to build) is
# kept in benchmarks/.cache/minhash/.  A million documents take nearsim and
# Rensa about 45 minutes at S_R >= 0.8 and an hour at 0.5, with about 3 GB of
# memory in the client that reads nearsim's pairs beside the backend's 8 GB or
# Rensa's 10 to 14 GB; datasketch adds 39 minutes and 12.6 GB there at 0.8, 57
# minutes and 17.2 GB at 0.5 (benchmarks.minhash --datasketch-max 200000 leaves
# it out).
# MINHASH_SIZES=100000 runs the first size alone (about 10 minutes),
# MINHASH_THRESHOLDS=0.8 one threshold.  Then docs/BENCHMARKS.md again when a
# make bench run is there to write it with.
MINHASH_SIZES ?= 100000 1000000
MINHASH_THRESHOLDS ?= 0.8 0.5
bench-minhash: database
	mkdir -p $(BENCH_RESULTS)
	$(VENV_PYTHON) -m benchmarks.minhash --dsn "$(DSN)" --sizes $(MINHASH_SIZES) \
		--thresholds $(MINHASH_THRESHOLDS) --output-dir $(BENCH_RESULTS)
	if [ -f $(BENCH_RESULTS)/run.json ]; then \
		$(VENV_PYTHON) -m benchmarks.docs $(BENCH_RESULTS) docs; fi

# Which measure and threshold catch lightly edited copies (benchmarks/defaults.py):
# every verified measure at 0.5 to 0.95 on the evaluation corpus, in the client,
# then the SQL functions at their defaults on the same corpus in PostgreSQL (about
# 20 minutes on 2 cores); then docs/BENCHMARKS.md again when a make bench run is
# there to write it with.
bench-defaults: database
	mkdir -p $(BENCH_RESULTS)
	$(VENV_PYTHON) -m benchmarks.defaults --size full --jobs 2 --dsn "$(DSN)" \
		--output-dir $(BENCH_RESULTS)
	if [ -f $(BENCH_RESULTS)/run.json ]; then \
		$(VENV_PYTHON) -m benchmarks.docs $(BENCH_RESULTS) docs; fi

# Near-duplicates in scripts without spaces between words (benchmarks/languages.py):
# Chinese, Japanese and Khmer sets made from Debian packages (manpages-zh,
# fortunes-zh, manpages-ja, libreoffice-help-km, which `make system` installs) with
# the edits of the English corpus, the F1 of the client's verified pairs on each
# against an English set in the same run, and the fingerprint speed of the client
# and of the server's simhash(text) on each against English (about 5 minutes on 2
# cores); then docs/BENCHMARKS.md again when a make bench run is there to write it with.
bench-languages: database
	mkdir -p $(BENCH_RESULTS)
	$(VENV_PYTHON) -m benchmarks.languages --dsn "$(DSN)" --jobs 2 --repeat 7 --output-dir $(BENCH_RESULTS)
	if [ -f $(BENCH_RESULTS)/run.json ]; then \
		$(VENV_PYTHON) -m benchmarks.docs $(BENCH_RESULTS) docs; fi

# nearsim.spark on local[1] and local[2] against PostgreSQL on the same data: all
# pairs of 1 million synthetic fingerprints (SPARK_SIZES="1000000 10000000" for
# 10 million as well, SPARK_SIZES= for none), and fingerprints, pairs and
# verified pairs of the evaluation corpus, and nearsim spark dedup against
# nearsim-load and nearsim_clusters_verified on 150,000 documents of it
# (SPARK_DEDUP=N for another number, 0 for none); benchmarks/results/spark.json,
# for the Spark section of docs/BENCHMARKS.md.  Not part of `make test`.
# Then all pairs of 10 million synthetic fingerprints at k = 3 on a Spark
# standalone cluster started on this machine (benchmarks/spark_cluster.py:
# a master and 2 workers of 1 core and 2 GB, loopback only, executors with
# an environment of their own made from the package's wheel) against
# nearsim_pairs, cost per document both ways (an hour or more on 2
# cores; SPARK_CLUSTER_SIZES=1000000 for a quick look, SPARK_CLUSTER_SIZES=
# for none): benchmarks/results/spark-cluster.json.
SPARK_SIZES ?= 1000000
SPARK_DEDUP ?= 150000
SPARK_CLUSTER_SIZES ?= 10000000
bench-spark: database
	mkdir -p $(BENCH_RESULTS)
	$(VENV_PYTHON) -m benchmarks.spark --dsn "$(DSN)" --sizes $(SPARK_SIZES) \
		--dedup $(SPARK_DEDUP) --results $(BENCH_RESULTS)/spark.json
	$(if $(strip $(SPARK_CLUSTER_SIZES)),$(VENV_PYTHON) -m benchmarks.spark_cluster --dsn "$(DSN)" \
		--sizes $(SPARK_CLUSTER_SIZES) --results $(BENCH_RESULTS)/spark-cluster.json)

# 10 million synthetic fingerprints alone, at k = 3 with 128 shuffle
# partitions (about an hour on 2 cores; k = 6 takes several), added to the
# results of make bench-spark.
bench-spark-10m: database
	NEARSIM_BENCH_SPARK_PARTITIONS=128 $(VENV_PYTHON) -m benchmarks.spark --dsn "$(DSN)" \
		--sizes 10000000 --radii 3 --corpus none --dedup 0 \
		--results $(BENCH_RESULTS)/spark-10m.json --add-to $(BENCH_RESULTS)/spark.json

# ruff on every Python file; mypy --strict on the package (core, server and
# client) and on the benchmarks.  Part of `make test`: a finding fails it.
lint: venv
	$(VENV)/bin/ruff check python_client tests scripts benchmarks
	cd python_client && ../$(VENV)/bin/mypy
	$(VENV)/bin/mypy --strict --ignore-missing-imports benchmarks

stop:
	scripts/pgcluster.sh stop $(CLUSTER_DIR)

clean:
	$(MAKE) -C extension clean PG_CONFIG=$(PG_CONFIG)

# The PGXN distribution of the last commit (uncommitted changes are not in
# it): dist/nearsim-<version>.zip, unpacking into nearsim-<version>/ with
# META.json at its root.
DIST_VERSION := $(shell sed -n "s/^default_version = '\(.*\)'/\1/p" extension/nearsim.control)
DIST_ZIP := dist/nearsim-$(DIST_VERSION).zip

dist:
	mkdir -p dist
	git archive --format zip --prefix nearsim-$(DIST_VERSION)/ --output $(DIST_ZIP) HEAD
	@echo $(DIST_ZIP)
