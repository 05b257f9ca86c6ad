"""nearsim benchmarks: fingerprint throughput, Hamming-radius scans and the bucket index.

    .venv/bin/python benchmarks/run.py --dsn "host=... dbname=nearsim" [--quick]

Measures, in one run:

1. ``simhash(text)`` in the database on the King James Bible (MB/s, one backend);
2. ``nearsim.simhash`` in this Python process on the same texts (MB/s, one core);
3. a sequential scan of random fingerprints with the C ``hamming()`` against the
   same filter in pure SQL, ``bit_count((a # b)::bit(64))``;
4. search latency through the bucket index (``<prefix>_similar``) against both
   scans, on uniform and text-like fingerprints, every answer cross-checked;
5. band layouts (3 to 6 bands): latency, storage and plans;
6. all pairs (``nearsim_pairs``, next to ``nearsim_clusters``);
7. bucket storage per document;
8. writes through nearsim's statement-level triggers against row-level ones;
9. ``nearsim-load`` on a corpus of text files (105 MB; --quick: 3 MB) against a
   plain ``COPY`` of the same texts (loading.py);
10. the peers: signature building against datasketch's MinHash and pg_trgm's
    index, similar-text lookups against pg_trgm, pgvector where available
    (peers.py);

then prints a summary table against the seed paper's Java (3.3 MB/s) and the
project's targets, and with ``--results FILE`` writes every number as JSON
(benchmarks/report.py turns it into docs/BENCHMARKS.md).  Every table lives in
a scratch schema that is dropped at the end.  Missed targets do not change
the exit status; errors do (1), and so does a database that cannot be
reached (2).  benchmarks/README.md explains each
measurement and records the numbers of a full run.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import secrets
import statistics
import sys
import textwrap
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import psycopg
from numpy.typing import NDArray
from psycopg import sql

import nearsim
from nearsim.bucket_index import default_bands
from nearsim.db import ProfileMismatch, ensure_extension
from nearsim.report import format_table, one_line
from nearsim.samples import Chapter, SampleUnavailable, kjv_chapters

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import loading  # section 9, a module next to this file
import peers  # section 10

Connection = psycopg.Connection[tuple[Any, ...]]

SEED_JAVA_MBPS = 3.3  # the seed paper's Java implementation, MB/s
TARGET_MBPS = 50.0  # target for simhash(text) in the database, MB/s per core
TARGET_SPEEDUP = 1.5  # C hamming() against the pure-SQL filter
RADIUS = 6  # the seeds' "90% similar": at most 6 of 64 bits differ
LONG_DOC_BYTES = 400_000  # size of one "long document"
MB = 1_000_000  # MB here means 10^6 bytes
PLANT_EVERY = 1000  # every 1000th row of the scan table is a planted near-duplicate
PLANT_MAX_DISTANCE = 10  # planted rows are 0..10 bits from the query fingerprint

FULL_ROWS = 1_000_000
FULL_REPEAT = 5
QUICK_ROWS = 100_000
QUICK_REPEAT = 2

# Settings for every measurement: one core (no parallel workers) and no JIT
# compilation, whose cost and benefit depend on plan cost estimates.
SESSION_SETTINGS = {"max_parallel_workers_per_gather": "0", "jit": "off"}


class BenchError(Exception):
    """A problem to report in one line, with the exit status to use."""

    def __init__(self, message: str, status: int = 1) -> None:
        super().__init__(message)
        self.status = status


@dataclass(frozen=True)
class Corpus:
    """Texts to fingerprint, with the fingerprints the client computes for them."""

    name: str
    texts: list[str]
    fingerprints: list[int | None]

    @property
    def nbytes(self) -> int:
        return sum(len(text.encode()) for text in self.texts)


@dataclass(frozen=True)
class Row:
    """One line of the summary table."""

    measurement: str
    value: str
    baseline: str
    ratio: str
    target: str
    met: str


def print_table(header: Sequence[str], rows: Sequence[Sequence[str]], align: str,
                indent: str = "   ") -> None:
    print(format_table(header, rows, align, indent))


def wrap(text: str, indent: str = "   ", width: int = 92) -> None:
    """Print ``text`` as a paragraph of lines at most ``width`` characters long."""
    print(textwrap.fill(text, width, initial_indent=indent, subsequent_indent=indent))


def best_of(repeat: int, action: Callable[[], object]) -> list[float]:
    """Wall-clock seconds of ``repeat`` calls of ``action``."""
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        action()
        times.append(time.perf_counter() - started)
    return times


def yes_no(met: bool) -> str:
    return "yes" if met else "no"


def cpu_model() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as cpuinfo:
            for line in cpuinfo:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown CPU"


# --- setup -----------------------------------------------------------------


def connect(dsn: str) -> Connection:
    try:
        conn = psycopg.connect(dsn, autocommit=True)
    except psycopg.OperationalError as error:
        raise BenchError(f"cannot connect to the database: {one_line(error)}", status=2) from None
    # Every statement is planned afresh, as a one-off query would be.
    conn.prepare_threshold = None
    # The benchmark's fingerprints are made up: declared as the tables'
    # profile, the triggers keep them as they keep a loader's.
    conn.execute("SET nearsim.profile = 'default/1'")
    return conn


def prepare_session(conn: Connection) -> str:
    """Install the extension if needed; return the PostgreSQL version."""
    try:
        ensure_extension(conn)
    except ProfileMismatch as error:
        raise BenchError(str(error)) from None
    row = conn.execute("SELECT current_setting('server_version')").fetchone()
    version = row[0] if row else "?"
    for name, value in SESSION_SETTINGS.items():
        conn.execute("SELECT set_config(%s, %s, false)", (name, value))
    return str(version)


def read_corpora() -> tuple[Corpus, Corpus]:
    """The KJV chapters, and the same text cut into documents of about 400 KB."""
    try:
        chapters: list[Chapter] = kjv_chapters()
    except SampleUnavailable as error:
        raise BenchError(f"cannot read the sample corpus: {error}", status=1) from None
    texts = [chapter.text for chapter in chapters]
    total = sum(len(text.encode()) for text in texts)
    count = max(1, round(total / LONG_DOC_BYTES))
    # Whole chapters, in order, into `count` documents of about total/count bytes.
    long_texts: list[str] = []
    current: list[str] = []
    size = 0
    for text in texts:
        current.append(text)
        size += len(text.encode())
        if size >= total * (len(long_texts) + 1) / count and len(long_texts) < count - 1:
            long_texts.append("".join(current))
            current = []
    if current:
        long_texts.append("".join(current))
    # The client's fingerprints, to check that the database computes the same;
    # this is also the client's warm-up pass.
    return (
        Corpus("KJV chapters", texts, [nearsim.simhash(t) for t in texts]),
        Corpus("long documents", long_texts, [nearsim.simhash(t) for t in long_texts]),
    )


def load_corpus(conn: Connection, table: sql.Composable, corpus: Corpus) -> int:
    """Copy the texts into ``table``; return their size in bytes as the database counts it."""
    conn.execute(
        sql.SQL("CREATE UNLOGGED TABLE {} (id int PRIMARY KEY, body text NOT NULL)").format(table)
    )
    copy_sql = sql.SQL("COPY {} (id, body) FROM STDIN").format(table)
    with conn.cursor() as cur, cur.copy(copy_sql) as copy:
        for number, text in enumerate(corpus.texts, start=1):
            copy.write_row((number, text))
    conn.execute(sql.SQL("VACUUM ANALYZE {}").format(table))
    row = conn.execute(sql.SQL("SELECT sum(octet_length(body)) FROM {}").format(table)).fetchone()
    nbytes = int(row[0]) if row and row[0] is not None else 0
    if nbytes != corpus.nbytes:
        raise BenchError(f"{corpus.name}: the database holds {nbytes} bytes of text, the client"
                         f" sent {corpus.nbytes}")
    return nbytes


# --- 1 and 2: fingerprint throughput -----------------------------------------


def database_simhash(conn: Connection, schema: str, corpora: Sequence[Corpus],
                     repeat: int) -> tuple[list[tuple[Corpus, float]], list[tuple[Corpus, float]]]:
    """Best seconds of one pass of simhash(body) over each corpus in one backend,
    and of the PL/Python reference simhash(body, 'default/1')."""
    print("\n1. simhash(text) in the database: one backend, one core\n")
    tables = [sql.Identifier(schema, f"corpus_{i}") for i in range(len(corpora))]
    query = sql.SQL("SELECT count(*), sum(simhash(body)) FROM {}")
    print("   SELECT count(*), sum(simhash(body)) FROM <corpus table>\n")
    wrap(
        "The texts are COPYed into an unlogged table (one row per document; PostgreSQL"
        " stores them compressed, TOAST) and fingerprinted by one backend with"
        " max_parallel_workers_per_gather = 0 and jit = off. The first call of the PL/Python"
        " reference in a session imports numpy, so a warm-up call and one untimed pass over"
        " each table run"
        " first; that pass also checks that the database's fingerprints are the client's"
        f" (the sum of all). Time: best of {repeat} passes, wall clock in this client, so it"
        " includes reading and decompressing the rows and one round trip. MB = 10^6 bytes of"
        " UTF-8 text (octet_length). Seed paper's Java: 3.3 MB/s; target: >= 50 MB/s per core."
        " Then the same passes with simhash(body, 'default/1'): the PL/Python reference"
        " implementation of the same profile, which must give the same sum."
    )
    conn.execute("SELECT simhash('warm up', 'default/1')")  # imports numpy
    results = []
    references = []
    reference = sql.SQL("SELECT count(*), sum(simhash(body, 'default/1')) FROM {}")
    for corpus, table in zip(corpora, tables, strict=True):
        load_corpus(conn, table, corpus)
        expected = (len(corpus.texts), sum(f for f in corpus.fingerprints if f is not None))
        timings = []
        for statement in (query.format(table), reference.format(table)):

            def run(statement: sql.Composed = statement, expected: tuple[int, int] = expected,
                    name: str = corpus.name) -> None:
                row = conn.execute(statement).fetchone()
                got = (int(row[0]), int(row[1])) if row else None
                if got != expected:
                    raise BenchError(f"{name}: the database's {statement.as_string(conn)} gave"
                                     f" (count, sum) {got}, the client's nearsim.simhash"
                                     f" {expected}")

            run()  # untimed: warm-up and check
            timings.append(min(best_of(repeat, run)))
        results.append((corpus, timings[0]))
        references.append((corpus, timings[1]))
    print_throughput(results)
    print("\n   The PL/Python reference, simhash(body, 'default/1'):")
    print_throughput(references)
    return results, references


def client_simhash(corpora: Sequence[Corpus], repeat: int) -> list[tuple[Corpus, float]]:
    """Best seconds of one pass of nearsim.simhash over each corpus in this process."""
    print("\n2. nearsim.simhash in this Python process: one core\n")
    print("   for text in texts: nearsim.simhash(text)\n")
    wrap(
        f"Python {platform.python_version()}, the same texts as in 1, already in memory as"
        " str. The pass that computed the reference fingerprints for 1 was the warm-up."
        f" Time: best of {repeat} passes (time.perf_counter)."
    )
    results = []
    for corpus in corpora:
        texts = corpus.texts

        def run(texts: list[str] = texts) -> None:
            for text in texts:
                nearsim.simhash(text)

        results.append((corpus, min(best_of(repeat, run))))
    print_throughput(results)
    return results


def print_throughput(results: Sequence[tuple[Corpus, float]]) -> None:
    rows = []
    for corpus, seconds in results:
        sizes = [len(t.encode()) for t in corpus.texts]
        mbps = corpus.nbytes / MB / seconds
        rows.append([
            corpus.name,
            f"{len(corpus.texts):,}",
            f"{min(sizes) / 1000:,.1f}-{max(sizes) / 1000:,.1f}",
            f"{corpus.nbytes / MB:.2f}",
            f"{seconds:.3f}",
            f"{mbps:.1f}",
            f"{mbps / SEED_JAVA_MBPS:.2f}x",
            f"{mbps / TARGET_MBPS:.2f}x",
        ])
    print()
    print_table(
        ["corpus", "docs", "KB per doc", "MB", "best s", "MB/s", "vs 3.3 MB/s", "vs 50 MB/s"],
        rows, "<>>>>>>>",
    )


# --- 3: Hamming-radius scan --------------------------------------------------


@dataclass(frozen=True)
class ScanResult:
    rows: int
    count: int
    c_seconds: list[float]
    sql_seconds: list[float]
    c_explain_ms: float
    sql_explain_ms: float


def planted_matches(rows: int) -> int:
    """How many planted rows are within RADIUS bits of the query fingerprint."""
    return sum(
        1
        for i in range(PLANT_EVERY, rows + 1, PLANT_EVERY)
        if (i // PLANT_EVERY) % (PLANT_MAX_DISTANCE + 1) <= RADIUS
    )


def explain_ms(conn: Connection, query: sql.Composed) -> tuple[float, dict[str, int]]:
    """Execution time reported by EXPLAIN (ANALYZE, TIMING OFF), and the scan's buffers."""
    explain = sql.SQL("EXPLAIN (ANALYZE, TIMING OFF, BUFFERS, FORMAT JSON) {}").format(query)
    row = conn.execute(explain).fetchone()
    if row is None:
        raise BenchError("EXPLAIN returned no row")
    plan = row[0][0]
    node = plan["Plan"]
    buffers = {"hit": 0, "read": 0}
    while True:  # Aggregate -> Seq Scan
        if node.get("Node Type") == "Seq Scan":
            buffers = {"hit": node["Shared Hit Blocks"], "read": node["Shared Read Blocks"]}
            break
        children = node.get("Plans") or []
        if not children:
            break
        node = children[0]
    return float(plan["Execution Time"]), buffers


def hamming_scan(conn: Connection, schema: str, rows: int, repeat: int) -> ScanResult:
    print(f"\n3. Hamming-radius filter, sequential scan of {rows:,} fingerprints, one core\n")
    table = sql.Identifier(schema, "fingerprints")
    table_name = table.as_string(conn)
    row = conn.execute("SELECT hashtextextended('nearsim benchmark query', 0)").fetchone()
    if row is None:
        raise BenchError("cannot make the query fingerprint")
    query_fp = int(row[0])
    literal = sql.SQL("{}::bigint").format(sql.Literal(str(query_fp)))
    conn.execute(sql.SQL("CREATE UNLOGGED TABLE {} (id int, si bigint NOT NULL)").format(table))
    # Random fingerprints; every PLANT_EVERY-th row is instead the query with its
    # k lowest bits flipped, k = 0..PLANT_MAX_DISTANCE, so that some rows match.
    conn.execute(
        sql.SQL(
            "INSERT INTO {} SELECT i, CASE WHEN i % {every} = 0"
            " THEN {q} # ((1::bigint << ((i / {every}) % {kinds})::int) - 1)"
            " ELSE hashtextextended(i::text, 0) END"
            " FROM generate_series(1, {rows}) AS i"
        ).format(
            table, every=sql.Literal(PLANT_EVERY), q=literal,
            kinds=sql.Literal(PLANT_MAX_DISTANCE + 1), rows=sql.Literal(rows),
        )
    )
    conn.execute(sql.SQL("VACUUM ANALYZE {}").format(table))
    row = conn.execute(
        sql.SQL(
            "SELECT relpages, pg_relation_size(oid),"
            " current_setting('shared_buffers')"
            " FROM pg_class WHERE oid = {}::regclass"
        ).format(sql.Literal(table_name))
    ).fetchone()
    pages, table_bytes, shared_buffers = row if row else (0, 0, "?")
    prewarm = prewarm_table(conn, schema, table_name)

    c_filter = sql.SQL("SELECT count(*) FROM {} WHERE hamming(si, {}) <= {}")
    sql_filter = sql.SQL("SELECT count(*) FROM {} WHERE bit_count((si # {})::bit(64)) <= {}")
    c_query, sql_query = (f.format(table, literal, sql.Literal(RADIUS))
                          for f in (c_filter, sql_filter))
    # Shown without the scratch schema's name, which changes from run to run.
    c_shown, sql_shown = (f.format(sql.Identifier("fingerprints"), literal, sql.Literal(RADIUS))
                          for f in (c_filter, sql_filter))
    print("   C:        " + c_shown.as_string(conn))
    print("   pure SQL: " + sql_shown.as_string(conn) + "\n")
    wrap(
        f"The table is unlogged: id int, si bigint = hashtextextended(i::text, 0), except that"
        f" every {PLANT_EVERY:,}th row is the query fingerprint with 0 to {PLANT_MAX_DISTANCE}"
        f" bits flipped, so both queries have rows to count. After VACUUM ANALYZE it has"
        f" {pages:,} pages ({table_bytes / MB:.1f} MB; shared_buffers"
        f" {shared_buffers}); {prewarm}; then each query runs once untimed. Both plans are"
        " Aggregate over a Seq Scan with the query fingerprint inlined as a constant; one backend,"
        " max_parallel_workers_per_gather = 0, jit = off. Time: client wall clock of the"
        f" query, best of {repeat}, the two queries alternating. It includes planning and a"
        " round trip (measured below), both tiny next to the scan; EXPLAIN (ANALYZE, TIMING"
        " OFF) is shown as a cross-check but is not used, because it adds instrumentation"
        " work to every row."
    )

    def count(query: sql.Composed) -> int:
        result = conn.execute(query).fetchone()
        return int(result[0]) if result else -1

    c_count, sql_count = count(c_query), count(sql_query)  # untimed warm-up
    if c_count != sql_count:
        raise BenchError(f"the counts disagree: hamming() finds {c_count:,} rows, pure SQL"
                         f" {sql_count:,}")
    planted = planted_matches(rows)
    if c_count < planted:
        raise BenchError(f"hamming() finds {c_count:,} rows within {RADIUS} bits, but"
                         f" {planted:,} were planted")
    c_explain, c_buffers = explain_ms(conn, c_query)
    sql_explain, _ = explain_ms(conn, sql_query)

    c_times: list[float] = []
    sql_times: list[float] = []
    for _ in range(repeat):
        for query, times, other in ((c_query, c_times, "hamming()"),
                                    (sql_query, sql_times, "pure SQL")):
            started = time.perf_counter()
            got = count(query)
            times.append(time.perf_counter() - started)
            if got != c_count:
                raise BenchError(f"{other} counted {got:,} rows, earlier {c_count:,}")
    round_trip = min(best_of(max(repeat, 5), lambda: conn.execute("SELECT 1").fetchone()))

    cached = ("all in shared buffers" if c_buffers["read"] == 0 else
              f"{c_buffers['read']:,} of {c_buffers['hit'] + c_buffers['read']:,} pages read"
              " from outside shared buffers (OS cache or disk)")
    print()
    wrap(f"Both queries count {c_count:,} rows within {RADIUS} bits ({planted:,} planted)."
         f" Scan buffers: {cached}. Client round trip (SELECT 1): {round_trip * 1000:.3f} ms.")
    print()
    print_table(
        ["filter", "best ms", "median ms", "ns/row", "EXPLAIN ANALYZE ms"],
        [
            [name, f"{min(times) * 1000:.1f}", f"{statistics.median(times) * 1000:.1f}",
             f"{min(times) * 1e9 / rows:.1f}", f"{explain:.1f}"]
            for name, times, explain in (
                ("hamming(si, q) <= 6", c_times, c_explain),
                ("bit_count((si # q)::bit(64)) <= 6", sql_times, sql_explain),
            )
        ],
        "<>>>>",
    )
    speedup = min(sql_times) / min(c_times)
    print(f"\n   C hamming() is {speedup:.2f}x as fast as the pure-SQL filter"
          f" (target: >= {TARGET_SPEEDUP}x)")
    return ScanResult(rows, c_count, c_times, sql_times, c_explain, sql_explain)


def prewarm_table(conn: Connection, schema: str, table: str) -> str:
    """Load ``table`` into shared buffers with pg_prewarm if possible; say what was done.

    A sequential scan of a table bigger than a quarter of shared_buffers reads
    through a small ring of buffers, so scanning it does not keep it cached;
    pages already in shared buffers are used as they are.
    """
    row = conn.execute(
        "SELECT e.extnamespace::regnamespace::text FROM pg_extension e"
        " WHERE e.extname = 'pg_prewarm'"
    ).fetchone()
    if row is None:
        available = conn.execute(
            "SELECT 1 FROM pg_available_extensions WHERE name = 'pg_prewarm'"
        ).fetchone()
        if available is None:
            return "pg_prewarm is not available, so it is only read once before timing"
        # Made in the scratch schema, it goes when the schema is dropped.
        conn.execute(
            sql.SQL("CREATE EXTENSION pg_prewarm SCHEMA {}").format(sql.Identifier(schema))
        )
        prewarm_schema = schema
    else:
        prewarm_schema = str(row[0])
    function = sql.Identifier(prewarm_schema, "pg_prewarm")
    conn.execute(sql.SQL("SELECT {}({}::regclass)").format(function, sql.Literal(table)))
    return "pg_prewarm loaded it into shared buffers"


# --- 4 to 8: the bucket index ------------------------------------------------


@dataclass(frozen=True)
class BucketPlan:
    """Sizes and counts of the bucket index sections (4 to 8) of one run."""

    sizes: tuple[int, ...]  # documents per table
    queries: int  # search queries per table
    trigger_rows: int  # rows of the bulk statements of section 8
    trigger_statements: int  # single-row statements of section 8
    trigger_repeat: int
    pairs_timeout: int  # seconds


FULL_PLAN = BucketPlan((10_000, 100_000, 1_000_000), 200, 100_000, 5_000, 3, 300)
QUICK_PLAN = BucketPlan((2_000,), 6, 2_000, 100, 1, 60)

PREPARE_WHEN_ASKED = 1 << 30  # psycopg prepare_threshold: only prepare=True statements
SEARCH_RADII = (3, 6, 10)
LAYOUT_RADII = (3, 6, 10, 12)
LAYOUT_BANDS = (3, 4, 5, 6)
PAIR_RADII = (3, 6)
TARGET_ROWS = 1_000_000  # the search, pairs and storage targets are for this many documents
TARGET_SEARCH_SPEEDUP = 50.0  # bucket search against the hamming() scan, radius 6
TARGET_PAIRS_SECONDS = 60.0  # nearsim_pairs, k <= 6
TARGET_BUCKET_BYTES = 100.0  # bucket table and its indexes, per document
SEED = 20_241_122  # of the random generator: every run measures the same data

UNIFORM = "uniform"
TEXT_LIKE = "text-like"
# The text-like set: a block of identical fingerprints (empty or boilerplate
# pages), then clusters whose sizes follow Zipf's law: a seed (a real text's
# fingerprint while there are any, else a random one), exact copies of it
# and variants with a few bits flipped.
BOILERPLATE_TEXT = "This page intentionally left blank."
BOILERPLATE_ROWS = 10_000  # at most a tenth of the set
CLUSTER_ZIPF = 2.0
MAX_CLUSTER = 100
DUPLICATE_SHARE = 0.25  # of the members after the first
MAX_FLIPS = 8
# Queries: existing fingerprints with 1 to 3 bits flipped, and some random ones.
QUERY_RANDOM_SHARE = 0.25
QUERY_MAX_FLIPS = 3

Fingerprints = NDArray[np.int64]

_BYTE_BITS = np.array([bin(i).count("1") for i in range(256)], dtype=np.uint8)


def popcount(values: Fingerprints) -> NDArray[np.uint8]:
    """Bits set in each 64-bit value."""
    if hasattr(np, "bitwise_count"):  # numpy >= 2.0
        return np.asarray(np.bitwise_count(values.view(np.uint64)), dtype=np.uint8)
    counts = _BYTE_BITS[values.view(np.uint8)].reshape(-1, 8).sum(axis=1)
    return np.asarray(counts, dtype=np.uint8)


def random_fingerprints(rng: np.random.Generator, count: int) -> Fingerprints:
    return rng.integers(-(2**63), 2**63 - 1, size=count, dtype=np.int64, endpoint=True)


def flip_masks(rng: np.random.Generator, flips: NDArray[np.int64]) -> Fingerprints:
    """For each entry of ``flips``, a mask of that many distinct random bits."""
    masks = np.zeros(len(flips), dtype=np.uint64)
    for step in range(int(flips.max(initial=0))):
        todo = np.flatnonzero(flips > step)
        while todo.size:
            bit = np.left_shift(np.uint64(1), rng.integers(0, 64, todo.size).astype(np.uint64))
            fresh = (masks[todo] & bit) == 0
            masks[todo[fresh]] |= bit[fresh]
            todo = todo[~fresh]
    return masks.view(np.int64)


class RealFingerprints:
    """Distinct fingerprints of real texts: KJV chapters, then verses, then passages.

    The later kinds are fingerprinted (by the client) only when a set needs
    more seeds than the earlier ones give.
    """

    def __init__(self, chapters: Corpus) -> None:
        self.chapters = chapters
        self.values = self.distinct(chapters.fingerprints)
        self.kinds = [f"{len(self.values):,} chapters"]
        self.verses = [v for t in chapters.texts for v in t.splitlines() if v.strip()]
        self.pending = ["verses", "passages"]

    @staticmethod
    def distinct(fingerprints: Sequence[int | None]) -> Fingerprints:
        return np.unique(np.array([f for f in fingerprints if f is not None], dtype=np.int64))

    def take(self, count: int) -> Fingerprints:
        while len(self.values) < count and self.pending:
            kind = self.pending.pop(0)
            if kind == "verses":
                texts = self.verses
            else:  # three consecutive verses
                texts = ["\n".join(self.verses[i:i + 3]) for i in range(len(self.verses) - 2)]
            before = len(self.values)
            more = self.distinct([nearsim.simhash(t) for t in texts])
            self.values = np.unique(np.concatenate([self.values, more]))
            self.kinds.append(f"{len(self.values) - before:,} {kind}")
        return self.values


def text_like_fingerprints(rng: np.random.Generator, rows: int,
                           real: RealFingerprints) -> tuple[Fingerprints, str]:
    """Fingerprints with near-duplicate clusters, in random order; and a description."""
    block = min(BOILERPLATE_ROWS, rows // 10)
    boilerplate = nearsim.simhash(BOILERPLATE_TEXT)
    if boilerplate is None:
        raise BenchError("the boilerplate text has no fingerprint")
    rest = rows - block
    sizes = np.minimum(rng.zipf(CLUSTER_ZIPF, size=max(rest, 1)), MAX_CLUSTER)
    ends = np.cumsum(sizes)
    clusters = int(np.searchsorted(ends, rest)) + 1
    sizes = sizes[:clusters]
    sizes[-1] -= int(ends[clusters - 1]) - rest
    pool = real.take(clusters)
    from_texts = min(clusters, len(pool))
    seeds = np.concatenate([rng.permutation(pool)[:from_texts],
                            random_fingerprints(rng, clusters - from_texts)])
    cluster = np.repeat(np.arange(clusters), sizes)
    first = np.zeros(rest, dtype=bool)
    first[np.concatenate([[0], ends[:clusters - 1]])] = True
    flips = rng.integers(1, MAX_FLIPS + 1, size=rest)
    flips[(rng.random(rest) < DUPLICATE_SHARE) | first] = 0
    members = seeds[cluster] ^ flip_masks(rng, flips)
    values = rng.permutation(np.concatenate([np.full(block, boilerplate, dtype=np.int64), members]))
    described = (
        f"{block:,} identical (boilerplate) + {clusters:,} clusters of 1-{int(sizes.max())}"
        f" (Zipf {CLUSTER_ZIPF:g}; {from_texts:,} seeded by texts, {clusters - from_texts:,}"
        f" random); {int((flips > 0).sum()):,} variants with 1-{MAX_FLIPS} bits flipped,"
        f" {int((~first & (flips == 0)).sum()):,} exact copies"
    )
    return values, described


def make_queries(rng: np.random.Generator, fingerprints: Fingerprints,
                 count: int) -> Fingerprints:
    randoms = round(count * QUERY_RANDOM_SHARE)
    picked = fingerprints[rng.integers(0, len(fingerprints), count - randoms)]
    near = picked ^ flip_masks(rng, rng.integers(1, QUERY_MAX_FLIPS + 1, size=len(picked)))
    return rng.permutation(np.concatenate([near, random_fingerprints(rng, randoms)]))


Match = frozenset[tuple[int, int]]  # (id, distance)


def expected_matches(fingerprints: Fingerprints, queries: Fingerprints,
                     max_distance: int) -> list[tuple[NDArray[np.int64], NDArray[np.uint8]]]:
    """Ids (1-based positions) and distances of the rows within max_distance of each query."""
    result = []
    for query in queries:
        distance = popcount(fingerprints ^ query)
        near = np.flatnonzero(distance <= max_distance)
        result.append((near + 1, distance[near]))
    return result


def within(expected: tuple[NDArray[np.int64], NDArray[np.uint8]], k: int) -> Match:
    ids, distances = expected
    keep = distances <= k
    return frozenset(zip(ids[keep].tolist(), distances[keep].tolist(), strict=True))


def check_same(context: str, results: dict[str, Match]) -> None:
    """Abort unless every method returned the same rows (id and distance)."""
    (first, reference), *others = results.items()
    for name, rows in others:
        if rows != reference:
            missing = sorted(reference - rows)[:5]
            extra = sorted(rows - reference)[:5]
            raise BenchError(
                f"{context}: {name} returned {len(rows):,} rows, {first} {len(reference):,};"
                f" (id, distance) only in {first}: {missing}, only in {name}: {extra}"
            )


def percentile_ms(seconds: Sequence[float], q: float) -> float:
    return float(np.percentile(np.array(seconds) * 1000, q))


def ms(value: float) -> str:
    return f"{value:.3f}" if value < 1 else f"{value:.2f}" if value < 10 else f"{value:.1f}"


def times(ratio: float) -> str:
    return f"{ratio:.1f}x" if ratio < 10 else f"{ratio:.0f}x"


def count_rows(rows: int) -> str:
    return f"{rows // 1_000_000}M" if rows % 1_000_000 == 0 else (
        f"{rows // 1000}k" if rows % 1000 == 0 else f"{rows:,}")


@dataclass(frozen=True)
class Storage:
    """Bytes of a bucket table: heap, primary key index, band indexes, all forks."""

    heap: int
    key_index: int
    band_indexes: int
    total: int

    def per_doc(self, rows: int) -> float:
        return self.total / max(rows, 1)


def bucket_storage(conn: Connection, bucket: str) -> Storage:
    row = conn.execute(
        "SELECT pg_relation_size(b),"
        " coalesce((SELECT sum(pg_relation_size(i.indexrelid)) FROM pg_index i"
        "  WHERE i.indrelid = b AND i.indisprimary), 0),"
        " coalesce((SELECT sum(pg_relation_size(i.indexrelid)) FROM pg_index i"
        "  WHERE i.indrelid = b AND NOT i.indisprimary), 0),"
        " pg_total_relation_size(b)"
        " FROM (SELECT %s::regclass AS b) AS t",
        (bucket,),
    ).fetchone()
    if row is None:
        raise BenchError(f"no size for {bucket}")
    return Storage(*(int(v) for v in row))


@dataclass
class DocSet:
    """A documents table enabled for nearsim, and what the client knows of it."""

    kind: str
    rows: int
    name: str  # of the table, in the scratch schema; also the prefix of its objects
    qualified: str  # schema-qualified and quoted, for ::regclass
    table: sql.Identifier
    bucket: str  # schema-qualified and quoted
    similar: sql.Identifier
    fingerprints: Fingerprints  # of ids 1..rows, in order
    queries: Fingerprints
    described: str
    bands: int
    load_seconds: float = 0.0
    loaded: Storage | None = None  # as the triggers left it after the COPY
    reindexed: Storage | None = None  # after REINDEX, as nearsim_enable builds it

    @property
    def label(self) -> str:
        return f"{self.kind} {count_rows(self.rows)}"


def check_bucket_api(conn: Connection) -> None:
    row = conn.execute(
        "SELECT to_regprocedure('nearsim_enable(regclass, name, name, integer, name, integer,"
        " text)') IS NOT NULL AND to_regprocedure('nearsim_rebuild(regclass, integer, boolean,"
        " integer, text)') IS NOT NULL"
    ).fetchone()
    if not row or not row[0]:
        raise BenchError(
            "this database's nearsim extension has no bucket index (nearsim_enable,"
            " nearsim_rebuild): it was created from an older build; recreate it with"
            " DROP EXTENSION nearsim CASCADE; CREATE EXTENSION nearsim CASCADE"
        )


def make_docset(conn: Connection, schema: str, kind: str, fingerprints: Fingerprints,
                queries: Fingerprints, described: str) -> DocSet:
    """Create and enable an empty documents table, then COPY the rows into it.

    The fingerprints do not belong to the bodies, so nearsim_enable (which
    checks stored fingerprints against the text) runs on the empty table,
    with the number of bands the rule picks for the final size; its BEFORE
    ROW trigger keeps the fingerprints the COPY supplies and its statement
    trigger fills the buckets.
    """
    rows = len(fingerprints)
    name = f"{kind.replace('-', '')}_{rows}"
    table = sql.Identifier(schema, name)
    qualified = table.as_string(conn)
    bands = default_bands(rows)
    conn.execute(sql.SQL("CREATE TABLE {} (id bigint PRIMARY KEY, body text, si bigint)"
                         " WITH (autovacuum_enabled = off)").format(table))
    conn.execute("SELECT nearsim_enable(%s::regclass, 'body', bands => %s)", (qualified, bands))
    bucket = sql.Identifier(schema, f"{name}_nearsim").as_string(conn)
    conn.execute(sql.SQL("ALTER TABLE {} SET (autovacuum_enabled = off)").format(
        sql.SQL(bucket)))
    docset = DocSet(kind, rows, name, qualified, table, bucket,
                    sql.Identifier(schema, f"{name}_similar"), fingerprints, queries,
                    described, bands)
    started = time.perf_counter()
    copy_sql = sql.SQL("COPY {} (id, body, si) FROM STDIN").format(table)
    values = fingerprints.tolist()
    with conn.cursor() as cur, cur.copy(copy_sql) as copy:
        for start in range(0, rows, 100_000):
            copy.write("".join(f"{i}\tdoc {i}\t{values[i - 1]}\n"
                               for i in range(start + 1, min(start + 100_000, rows) + 1)))
    docset.load_seconds = time.perf_counter() - started
    conn.execute(sql.SQL("VACUUM ANALYZE {}").format(table))
    conn.execute(sql.SQL("VACUUM ANALYZE {}").format(sql.SQL(bucket)))
    docset.loaded = bucket_storage(conn, bucket)
    conn.execute(sql.SQL("REINDEX TABLE {}").format(sql.SQL(bucket)))
    docset.reindexed = bucket_storage(conn, bucket)
    row = conn.execute("SELECT ok, buckets FROM nearsim_verify(%s::regclass)",
                       (qualified,)).fetchone()
    if row is None or not row[0] or row[1] != rows:
        raise BenchError(f"{docset.label}: nearsim_verify after the COPY says {row}")
    return docset


def shared_buffers(conn: Connection) -> str:
    row = conn.execute("SELECT current_setting('shared_buffers')").fetchone()
    return str(row[0]) if row else "?"


def prewarm_search(conn: Connection, schema: str, docset: DocSet) -> bool:
    """Load what a bucket search reads into shared buffers; False without pg_prewarm.

    That is the bucket table, its band indexes and the documents' primary key
    index; of the documents themselves a search reads only the matches. The
    scans of the documents read through a small ring of buffers and do not
    evict them.
    """
    relations = [docset.bucket] + [str(r[0]) for r in conn.execute(
        "SELECT indexrelid::regclass::text FROM pg_index"
        " WHERE (indrelid = %s::regclass AND NOT indisprimary)"
        " OR (indrelid = %s::regclass AND indisprimary)",
        (docset.bucket, docset.qualified)).fetchall()]
    return all(prewarm_table(conn, schema, relation).startswith("pg_prewarm loaded")
               for relation in relations)


def load_docsets(conn: Connection, schema: str, sizes: Sequence[int], queries: int,
                 chapters: Corpus) -> tuple[list[DocSet], str]:
    """The uniform and text-like sets of each size; and where the real fingerprints came from."""
    rng = np.random.default_rng(SEED)
    real = RealFingerprints(chapters)
    sets = []
    for rows in sizes:
        uniform = random_fingerprints(rng, rows)
        sets.append(make_docset(conn, schema, UNIFORM, uniform,
                                make_queries(rng, uniform, queries), "random 64-bit values"))
        text_like, described = text_like_fingerprints(rng, rows, real)
        sets.append(make_docset(conn, schema, TEXT_LIKE, text_like,
                                make_queries(rng, text_like, queries), described))
    return sets, ", ".join(real.kinds)


@dataclass(frozen=True)
class Search:
    """A prepared search statement, and the plan_cache_mode to run it with."""

    statement: sql.Composed
    plan_cache_mode: str | None = None  # None: the session's (auto)


GENERIC = "bucket, generic plan"
CUSTOM = "bucket, custom plan"
HAMMING = "hamming()"
BIT_COUNT = "bit_count"


def search_statements(docset: DocSet, k: int) -> dict[str, Search]:
    """The searches within k bits of %(q)s, each returning (id, distance)."""
    radius = sql.Literal(k)
    bucket = "SELECT (doc).id, distance FROM {}(%(q)s::bigint, {})"
    return {
        GENERIC: Search(sql.SQL(bucket).format(docset.similar, radius), "force_generic_plan"),
        # Another text, so that it is another prepared statement.
        CUSTOM: Search(sql.SQL(bucket + " /* custom */").format(docset.similar, radius),
                       "force_custom_plan"),
        HAMMING: Search(sql.SQL(
            "SELECT id, hamming(si, %(q)s::bigint) FROM {} WHERE hamming(si, %(q)s::bigint) <= {}"
        ).format(docset.table, radius)),
        BIT_COUNT: Search(sql.SQL(
            "SELECT id, bit_count((si # %(q)s::bigint)::bit(64))::int FROM {}"
            " WHERE bit_count((si # %(q)s::bigint)::bit(64)) <= {}"
        ).format(docset.table, radius)),
    }


def run_search(conn: Connection, search: Search, query: int) -> tuple[Match, float]:
    """Rows of one prepared search, and its wall-clock seconds."""
    mode = search.plan_cache_mode
    if mode is not None:
        conn.execute("SELECT set_config('plan_cache_mode', %s, false)", (mode,))
    try:
        started = time.perf_counter()
        rows = conn.execute(search.statement, {"q": query}, prepare=True).fetchall()
        elapsed = time.perf_counter() - started
    finally:
        if mode is not None:
            conn.execute("SELECT set_config('plan_cache_mode', 'auto', false)")
    return frozenset((int(r[0]), int(r[1])) for r in rows), elapsed


def time_searches(conn: Connection, docset: DocSet, searches: dict[str, Search],
                  expected: Sequence[tuple[NDArray[np.int64], NDArray[np.uint8]]],
                  k: int) -> tuple[dict[str, list[float]], list[int]]:
    """Seconds per query of each search, checking every answer; rows found per query.

    Each search makes its own pass over the queries, after one warm-up query: run
    one after the other, a second search of the same query would find that query's
    pages in the CPU caches.
    """
    seconds: dict[str, list[float]] = {}
    answers: dict[str, list[Match]] = {}
    queries = docset.queries.tolist()
    for name, search in searches.items():
        run_search(conn, search, queries[0])  # warm-up: prepare, load caches
        answers[name], seconds[name] = [], []
        for query in queries:
            rows, elapsed = run_search(conn, search, query)
            answers[name].append(rows)
            seconds[name].append(elapsed)
    found = []
    for number, query in enumerate(queries):
        results: dict[str, Match] = {"numpy": within(expected[number], k)}
        results.update((name, answers[name][number]) for name in searches)
        check_same(f"{docset.label}, k = {k}, query {number} ({query})", results)
        found.append(len(results["numpy"]))
    return seconds, found


@dataclass(frozen=True)
class PlanCheck:
    shape: str
    candidates: int  # bucket rows read (those the band indexes returned)
    found: int
    milliseconds: float  # execution
    planning_ms: float


def plan_shape(node: dict[str, Any], names: dict[str, str]) -> str:
    kind = node["Node Type"]
    relation = node.get("Relation Name")
    label = f"{kind} on {names.get(relation, relation)}" if relation else kind
    children = node.get("Plans") or []
    if kind == "BitmapOr" and all(c["Node Type"] == "Bitmap Index Scan" for c in children):
        return f"BitmapOr of {len(children)} Bitmap Index Scans"
    if not children:
        return label
    parts = []
    for child in children:
        shape = plan_shape(child, names)
        relationship = child.get("Parent Relationship")
        parts.append(f"{relationship}: {shape}" if relationship in ("InitPlan", "SubPlan")
                     else shape)
    return f"{label} ({', '.join(parts)})"


def bucket_candidates(node: dict[str, Any], bucket: str) -> int:
    """Bucket rows the search read: those the scan of the bucket table kept or filtered out."""
    if node.get("Relation Name") == bucket:
        return int(node["Actual Rows"] + node.get("Rows Removed by Filter", 0)
                   + node.get("Rows Removed by Index Recheck", 0))
    return sum(bucket_candidates(c, bucket) for c in node.get("Plans") or [])


def explain_search(conn: Connection, docset: DocSet, k: int, query: int,
                   mode: str) -> PlanCheck:
    """EXPLAIN ANALYZE of the bucket search as a prepared statement with a
    custom (the query's value known) or generic (parameter) plan; the second of
    two runs, as the first execution of a new statement is slower."""
    conn.execute(sql.SQL(
        "PREPARE nearsim_bench_plan (bigint) AS SELECT (doc).id, distance FROM {}($1, {})"
    ).format(docset.similar, sql.Literal(k)))
    explain = sql.SQL(
        "EXPLAIN (ANALYZE, FORMAT JSON) EXECUTE nearsim_bench_plan ({}::bigint)"
    ).format(sql.Literal(str(query)))
    try:
        conn.execute("SELECT set_config('plan_cache_mode', %s, false)", (mode,))
        conn.execute(explain)
        row = conn.execute(explain).fetchone()
    finally:
        conn.execute("SELECT set_config('plan_cache_mode', 'auto', false)")
        conn.execute("DEALLOCATE nearsim_bench_plan")
    if row is None:
        raise BenchError("EXPLAIN returned no row")
    plan = row[0][0]
    names = {docset.name: "documents", f"{docset.name}_nearsim": "buckets"}
    return PlanCheck(plan_shape(plan["Plan"], names),
                     bucket_candidates(plan["Plan"], f"{docset.name}_nearsim"),
                     int(plan["Plan"]["Actual Rows"]), float(plan["Execution Time"]),
                     float(plan.get("Planning Time", 0.0)))


@dataclass(frozen=True)
class SearchResult:
    docset: DocSet
    k: int
    seconds: dict[str, list[float]]
    found: list[int]

    def p50(self, name: str) -> float:
        return percentile_ms(self.seconds[name], 50)

    def p95(self, name: str) -> float:
        return percentile_ms(self.seconds[name], 95)


def describe_sets(sets: Sequence[DocSet]) -> None:
    print()
    print_table(
        ["set", "documents", "bands", "COPY s", "rows/s", "fingerprints"],
        [[d.label, f"{d.rows:,}", str(d.bands), f"{d.load_seconds:.1f}",
          f"{d.rows / d.load_seconds:,.0f}", d.described] for d in sets],
        "<>>>><",
    )


def search_latency(conn: Connection, schema: str, plan: BucketPlan,
                   chapters: Corpus) -> tuple[list[DocSet], list[SearchResult]]:
    queries = plan.queries
    print(f"\n4. Search latency: bucket index against sequential scans,"
          f" {' and '.join(f'{n:,}' for n in plan.sizes)} documents, one core\n")
    sets, real = load_docsets(conn, schema, plan.sizes, queries, chapters)
    example = search_statements(sets[0], 6)
    for name in (GENERIC, HAMMING, BIT_COUNT):
        shown = example[name].statement.as_string(conn).replace(
            sets[0].similar.as_string(conn), "docs_similar")
        shown = shown.replace(sets[0].table.as_string(conn), "docs")
        print(f"   {name.split(',')[0] + ':':11}{shown}")
    print()
    wrap(
        "Each set is a table (id bigint PRIMARY KEY, body text, si bigint) with a short body."
        " nearsim_enable runs on the empty table with the number of bands its rule"
        " (default_bands) picks for the final size; then the rows are COPYed in, so the"
        " triggers keep the supplied fingerprints and fill the bucket table; then VACUUM"
        " ANALYZE and REINDEX of the bucket table (the indexes nearsim_enable builds on a"
        f" filled table). Uniform: random 64-bit values. Text-like: real fingerprints ({real};"
        " computed by this client) seed clusters of exact copies and variants with 1-8 random"
        f" bits flipped, plus a block of {BOILERPLATE_ROWS:,} identical fingerprints (capped at"
        f" a tenth of the set). {queries:,} queries per set:"
        f" {1 - QUERY_RANDOM_SHARE:.0%} are fingerprints of random rows with 1-{QUERY_MAX_FLIPS}"
        f" bits flipped, {QUERY_RANDOM_SHARE:.0%} random values. Each statement is prepared"
        " (psycopg prepare=True) and makes its own pass over the queries after one warm-up"
        " query (run right after another search of the same query, a search finds that"
        " query's pages in the CPU caches and takes about half the time). The bucket search"
        " is two prepared statements: one with"
        " plan_cache_mode = force_generic_plan (planned once; the steady state of a prepared"
        " statement) and one with force_custom_plan (planned again for each query's value, as"
        " an unprepared query is; the default, auto, picks one of the two by estimated cost)."
        " Every answer is checked: both bucket searches, the hamming() scan, the bit_count scan"
        " and numpy in this client must return the same (id, distance) rows, or the run stops."
        " Time: client wall clock of execute + fetchall, including a round trip; p50 and p95"
        " over the queries. One backend, max_parallel_workers_per_gather = 0, jit = off."
        " Before each set's timings pg_prewarm loads what a bucket search reads into shared"
        " buffers: the bucket table, its band indexes and the documents' primary key (about"
        " 120 MB for a million documents; shared_buffers is"
        f" {shared_buffers(conn)}); the scans read the documents through a small ring of"
        " buffers (from the OS cache), which evicts nothing."
    )
    describe_sets(sets)
    results = []
    plans = []
    prewarmed = True
    for docset in sets:
        kmax = max(SEARCH_RADII)
        expected = expected_matches(docset.fingerprints, docset.queries, kmax)
        prewarmed = prewarm_search(conn, schema, docset) and prewarmed
        for k in SEARCH_RADII:
            seconds, found = time_searches(conn, docset, search_statements(docset, k),
                                           expected, k)
            results.append(SearchResult(docset, k, seconds, found))
        # While this set's pages are still cached.
        plans.append([explain_search(conn, docset, 6, int(docset.queries[0]), mode)
                      for mode in ("force_generic_plan", "force_custom_plan")])
    round_trip = statistics.median(best_of(200, lambda: conn.execute("SELECT 1").fetchone()))
    print()
    wrap(f"Client round trip (SELECT 1, median): {round_trip * 1000:.3f} ms; it is part of every"
         " latency below."
         + ("" if prewarmed else " pg_prewarm is not available: the bucket tables were not"
            " loaded into shared buffers before the timings."))
    rows = []
    for r in results:
        generic = r.p50(GENERIC)
        rows.append([
            r.docset.label, str(r.k), f"{np.mean(r.found):,.1f}", f"{max(r.found):,}",
            ms(generic), ms(r.p95(GENERIC)), ms(r.p50(CUSTOM)), ms(r.p95(CUSTOM)),
            ms(r.p50(HAMMING)), ms(r.p95(HAMMING)), ms(r.p50(BIT_COUNT)), ms(r.p95(BIT_COUNT)),
            times(r.p50(HAMMING) / generic), times(r.p50(BIT_COUNT) / generic),
            times(r.p50(HAMMING) / r.p50(CUSTOM)),
        ])
    print()
    print_table(
        ["set", "k", "rows mean", "max", "bucket generic p50 ms", "p95", "custom p50", "p95",
         "hamming() scan p50", "p95", "bit_count scan p50", "p95", "hamming()/generic",
         "bit_count/generic", "hamming()/custom"],
        rows, "<>>>>>>>>>>>>>>",
    )
    print()
    wrap("Ratios are of the p50 latencies. Every query gave the same rows in all five ways."
         " Plans of the bucket search at k = 6 for the first query of each set, right after"
         " its timings: EXPLAIN ANALYZE (the second of two runs) of a prepared statement with"
         " a generic plan and with a"
         " custom plan (the query's value known, so the probes are constants); candidates are"
         " the bucket rows read (those the band indexes returned):")
    print()
    plan_rows = []
    for docset, (generic_plan, custom_plan) in zip(sets, plans, strict=True):
        same = "same" if custom_plan.shape == generic_plan.shape else custom_plan.shape
        plan_rows.append([docset.label, generic_plan.shape, same,
                          f"{generic_plan.candidates:,}",
                          f"{generic_plan.milliseconds:.2f} / {custom_plan.milliseconds:.2f}",
                          f"{custom_plan.planning_ms:.2f}"])
    print_table(["set", "generic plan", "custom plan", "candidates",
                 "execution ms generic / custom", "custom planning ms"], plan_rows, "<<<>>>")
    return sets, results


# --- 5: band layouts ---------------------------------------------------------


def band_width(bands: int, band: int) -> int:
    return 64 // bands + (1 if band < 64 % bands else 0)


def band_radius(k: int, bands: int, band: int) -> int:
    return k // bands if band <= k % bands else k // bands - 1


def layout_cost(rows: int, bands: int, k: int) -> tuple[int, float]:
    """Index probes of a search, and the candidates expected among uniform fingerprints."""
    probes = 0
    missed = 1.0
    for band in range(bands):
        width, radius = band_width(bands, band), band_radius(k, bands, band)
        count = sum(math.comb(width, i) for i in range(radius + 1))
        probes += count
        missed *= 1 - count / 2**width
    return probes, rows * (1 - missed)


@dataclass(frozen=True)
class LayoutResult:
    docset: DocSet
    bands: int
    rebuild_seconds: float
    storage: Storage
    generic: dict[int, float]  # k -> p50 ms, force_generic_plan
    custom: dict[int, float]  # k -> p50 ms, force_custom_plan
    generic_plan: PlanCheck
    custom_plan: PlanCheck


def band_layouts(conn: Connection, schema: str, sets: Sequence[DocSet]) -> list[LayoutResult]:
    print(f"\n5. Band layouts: {', '.join(map(str, LAYOUT_BANDS))} bands on the uniform sets\n")
    wrap(
        f"For each uniform set of 4 and each layout, SELECT nearsim_rebuild(table, bands => b)"
        " (it drops and builds the band indexes and the search functions), then the bucket"
        f" search of 4 with the same queries for k = {', '.join(map(str, LAYOUT_RADII))}"
        " (the generic and the custom plan statements of 4, after pg_prewarm, one warm-up"
        " query each, every answer checked against numpy). Probes:"
        " values looked up in all band indexes together; candidates: bucket rows expected to"
        " match a probe among uniform fingerprints (what the search fetches and checks)."
        " Storage: pg_total_relation_size of the bucket table (freshly built) per document."
        " The current rule (nearsim.bucket_index.default_bands) picks 5 bands below 30,000"
        " rows, 4 below 750,000, else 3."
    )
    results = []
    for docset in sets:
        kmax = max(LAYOUT_RADII)
        expected = expected_matches(docset.fingerprints, docset.queries, kmax)
        for bands in LAYOUT_BANDS:
            started = time.perf_counter()
            conn.execute("SELECT * FROM nearsim_rebuild(%s::regclass, bands => %s)",
                         (docset.qualified, bands))
            rebuild = time.perf_counter() - started
            storage = bucket_storage(conn, docset.bucket)
            prewarm_search(conn, schema, docset)
            generic, custom = {}, {}
            for k in LAYOUT_RADII:
                searches = {name: search for name, search in search_statements(docset, k).items()
                            if name in (GENERIC, CUSTOM)}
                seconds, _ = time_searches(conn, docset, searches, expected, k)
                generic[k] = percentile_ms(seconds[GENERIC], 50)
                custom[k] = percentile_ms(seconds[CUSTOM], 50)
            generic_plan, custom_plan = (
                explain_search(conn, docset, 6, int(docset.queries[0]), mode)
                for mode in ("force_generic_plan", "force_custom_plan"))
            results.append(LayoutResult(docset, bands, rebuild, storage, generic, custom,
                                        generic_plan, custom_plan))
    print_layouts(results)
    return results


def print_layouts(results: Sequence[LayoutResult]) -> None:
    rows = []
    for r in results:
        n = r.docset.rows
        costs = [layout_cost(n, r.bands, k) for k in LAYOUT_RADII]
        marker = " (rule)" if r.bands == default_bands(n) else ""
        rows.append([r.docset.label, f"{r.bands}{marker}", f"{r.storage.per_doc(n):.1f}",
                     f"{r.rebuild_seconds:.1f}",
                     *(f"{probes:,} / {candidates:,.0f}" for probes, candidates in costs)])
    print()
    print_table(["set", "bands", "bytes/doc", "rebuild s",
                 *(f"k={k} probes / candidates" for k in LAYOUT_RADII)],
                rows, "<<>>" + ">" * len(LAYOUT_RADII))
    print()
    rows = []
    for name in dict.fromkeys(r.docset.name for r in results):
        mine = [r for r in results if r.docset.name == name]
        rule = default_bands(mine[0].docset.rows)
        ruled = next((r for r in mine if r.bands == rule), None)
        for k in LAYOUT_RADII:
            best = mine[int(np.argmin([r.generic[k] for r in mine]))]
            best_custom = mine[int(np.argmin([r.custom[k] for r in mine]))]
            rows.append([
                mine[0].docset.label, str(k),
                *(f"{ms(r.generic[k])} / {ms(r.custom[k])}" for r in mine),
                f"{best.bands} / {best_custom.bands}", str(rule),
                times(ruled.generic[k] / best.generic[k]) if ruled else "-",
            ])
    print_table(["set", "k", *(f"{b} bands: generic / custom" for b in LAYOUT_BANDS),
                 "fastest", "rule", "rule/fastest"],
                rows, "<>" + ">" * len(LAYOUT_BANDS) + ">>>")
    print()
    wrap("p50 ms of the prepared bucket search with a generic plan / with a custom plan;"
         " fastest: the layout with the lowest p50 of each; rule/fastest compares the generic"
         " p50s. Plans at k = 6 after each rebuild (EXPLAIN ANALYZE, the second of two runs, of"
         " the first query as a prepared statement with a generic plan, then a custom one):")
    print()
    print_table(["set", "bands", "generic plan", "custom plan", "candidates", "rows",
                 "execution ms generic / custom", "custom planning ms"],
                [[r.docset.label, str(r.bands), r.generic_plan.shape,
                  "same" if r.generic_plan.shape == r.custom_plan.shape else r.custom_plan.shape,
                  f"{r.generic_plan.candidates:,}", f"{r.generic_plan.found:,}",
                  f"{r.generic_plan.milliseconds:.2f} / {r.custom_plan.milliseconds:.2f}",
                  f"{r.custom_plan.planning_ms:.2f}"]
                 for r in results],
                "<><<>>>>")
    print()
    for name in dict.fromkeys(r.docset.name for r in results):
        mine = [r for r in results if r.docset.name == name]
        overall = min(mine, key=lambda r: math.prod(r.generic.values()))
        overall_custom = min(mine, key=lambda r: math.prod(r.custom.values()))
        at6 = min(mine, key=lambda r: r.generic[6])
        smallest = min(mine, key=lambda r: r.storage.total)
        wrap(f"{mine[0].docset.label}: fastest over k = {', '.join(map(str, LAYOUT_RADII))}"
             f" (geometric mean of p50) with {overall.bands} bands ({overall_custom.bands} with"
             f" custom plans), at k = 6 with {at6.bands} bands; smallest with"
             f" {smallest.bands} bands ({smallest.storage.per_doc(smallest.docset.rows):.1f}"
             f" bytes/doc); the rule picks {default_bands(mine[0].docset.rows)}.")


# --- 6: all pairs ------------------------------------------------------------


@dataclass(frozen=True)
class PairsResult:
    docset: DocSet
    k: int
    pairs: int | None  # None: timed out or not available
    seconds: float
    note: str
    clusters_seconds: float | None = None  # nearsim_clusters, the same pair search


def pairs_unavailable(error: psycopg.Error) -> bool:
    """Whether ``error`` says nearsim_pairs is not installed (rather than that it failed)."""
    message = str(error)
    return isinstance(error, psycopg.errors.UndefinedFunction) or (
        "nearsim.pairs" in message and ("No module named" in message
                                        or "cannot import" in message)
    )


def brute_force_pairs(fingerprints: Fingerprints, k: int) -> int:
    pairs = 0
    for i in range(len(fingerprints) - 1):
        pairs += int((popcount(fingerprints[i + 1:] ^ fingerprints[i]) <= k).sum())
    return pairs


def all_pairs(conn: Connection, sets: Sequence[DocSet], timeout: int,
              searches: Sequence[SearchResult]) -> list[PairsResult]:
    print(f"\n6. All pairs: SELECT count(*) FROM nearsim_pairs(table, k), k ="
          f" {', '.join(map(str, PAIR_RADII))}\n")
    wrap(
        "nearsim_pairs reads every fingerprint of the bucket table and returns each pair of"
        " documents within k bits once. Time: one run, client wall clock, with statement_timeout"
        f" = {timeout} s. The check: a text-like set has at least the pairs of its identical"
        " block; sets of at most 5,000 documents are compared with a brute-force count in this"
        " client. Clusters s: SELECT count(*) FROM nearsim_clusters(table, k), the same pair"
        " search returning one row per grouped document instead of one per pair, so the"
        " difference is the cost of returning the pairs as rows. The baseline is what the same"
        " answer would cost with one bucket search per"
        " document: documents x the generic-plan p50 of section 4 at the same k."
    )
    results: list[PairsResult] = []
    conn.execute("SELECT set_config('statement_timeout', %s, false)", (f"{timeout}s",))
    try:
        for docset in sets:
            for k in PAIR_RADII:
                if results and results[-1].docset is docset and results[-1].pairs is None:
                    # Within a larger radius it cannot be faster.
                    results.append(PairsResult(docset, k, None, 0.0,
                                               f"skipped ({results[-1].note})"))
                    continue
                results.append(pairs_once(conn, docset, k, timeout))
    finally:
        conn.execute("SELECT set_config('statement_timeout', '0', false)")
    p50 = {(r.docset.name, r.k): r.p50(GENERIC) for r in searches}
    rows = []
    for r in results:
        search = p50.get((r.docset.name, r.k))
        estimate = search * r.docset.rows / 1000 if search is not None else None
        met = "-"
        if r.docset.rows == TARGET_ROWS:
            met = yes_no(r.pairs is not None and r.seconds < TARGET_PAIRS_SECONDS)
        rows.append([
            r.docset.label, str(r.k), f"{r.pairs:,}" if r.pairs is not None else r.note,
            f"{r.seconds:.1f}" if r.pairs is not None else "-",
            f"{r.pairs / r.seconds:,.0f}" if r.pairs and r.seconds else "-",
            "-" if r.pairs is None else (
                f"{r.clusters_seconds:.1f}" if r.clusters_seconds is not None else "timed out"),
            f"{estimate:,.0f}" if estimate is not None else "-",
            times(estimate / r.seconds) if estimate and r.pairs is not None else "-",
            met,
        ])
    print()
    print_table(["set", "k", "pairs", "seconds", "pairs/s", "clusters s", "N searches s (est.)",
                 "speedup", f"< {TARGET_PAIRS_SECONDS:g} s at {count_rows(TARGET_ROWS)}?"],
                rows, "<>>>>>>><")
    return results


def pairs_once(conn: Connection, docset: DocSet, k: int, timeout: int) -> PairsResult:
    started = time.perf_counter()
    try:
        row = conn.execute("SELECT count(*) FROM nearsim_pairs(%s::regclass, %s)",
                           (docset.qualified, k)).fetchone()
    except psycopg.errors.QueryCanceled:
        return PairsResult(docset, k, None, time.perf_counter() - started,
                           f"timed out (> {timeout} s)")
    except psycopg.Error as error:
        if pairs_unavailable(error):
            return PairsResult(docset, k, None, 0.0, "nearsim_pairs not installed")
        raise
    seconds = time.perf_counter() - started
    pairs = int(row[0]) if row else -1
    if docset.kind == TEXT_LIKE:
        block = min(BOILERPLATE_ROWS, docset.rows // 10)
        if pairs < block * (block - 1) // 2:
            raise BenchError(f"{docset.label}: nearsim_pairs found {pairs:,} pairs within {k}"
                             f" bits, fewer than the {block:,} identical fingerprints make")
    if docset.rows <= 5_000:
        expected = brute_force_pairs(docset.fingerprints, k)
        if pairs != expected:
            raise BenchError(f"{docset.label}: nearsim_pairs found {pairs:,} pairs within {k}"
                             f" bits, a brute-force count {expected:,}")
    started = time.perf_counter()
    try:
        conn.execute("SELECT count(*) FROM nearsim_clusters(%s::regclass, %s)",
                     (docset.qualified, k)).fetchone()
        clusters: float | None = time.perf_counter() - started
    except psycopg.errors.QueryCanceled:
        clusters = None
    return PairsResult(docset, k, pairs, seconds, "", clusters)


# --- 7: storage --------------------------------------------------------------


def bucket_storage_table(sets: Sequence[DocSet]) -> None:
    print("\n7. Bucket storage per document, default layout\n")
    wrap(
        "Bytes per document of the bucket table <prefix>_nearsim (key, si): its heap, its"
        " primary key index, its band indexes (btree, with deduplication) and, as the total,"
        " pg_total_relation_size (all forks). \"As loaded\": after the COPY into the enabled"
        " table, the indexes grown by the triggers' inserts; \"built\": after REINDEX, as"
        f" nearsim_enable builds them on a filled table. Target: <= {TARGET_BUCKET_BYTES:g}"
        " bytes per document."
    )
    rows = []
    for d in sets:
        assert d.loaded is not None and d.reindexed is not None
        per = d.rows
        rows.append([
            d.label, str(d.bands), f"{d.loaded.heap / per:.1f}", f"{d.loaded.key_index / per:.1f}",
            f"{d.loaded.band_indexes / per:.1f}", f"{d.loaded.per_doc(per):.1f}",
            f"{d.reindexed.key_index / per:.1f}", f"{d.reindexed.band_indexes / per:.1f}",
            f"{d.reindexed.per_doc(per):.1f}",
            f"{max(d.loaded.per_doc(per), d.reindexed.per_doc(per)) / TARGET_BUCKET_BYTES:.2f}",
        ])
    print()
    print_table(["set", "bands", "heap", "key index", "band indexes", "total as loaded",
                 "key index built", "band indexes built", "total built",
                 f"worst vs {TARGET_BUCKET_BYTES:g} B"],
                rows, "<>>>>>>>>>")


# --- 8: triggers -------------------------------------------------------------


ROW_TRIGGER_FUNCTION = """CREATE FUNCTION {function}() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'INSERT' THEN
        IF NEW.si IS NOT NULL THEN
            INSERT INTO {bucket} AS b (key, si) VALUES (NEW.id, NEW.si)
            ON CONFLICT (key) DO UPDATE SET si = EXCLUDED.si;
        END IF;
    ELSIF TG_OP = 'UPDATE' THEN
        IF NEW.id IS DISTINCT FROM OLD.id OR NEW.si IS DISTINCT FROM OLD.si THEN
            DELETE FROM {bucket} WHERE key = OLD.id;
            IF NEW.si IS NOT NULL THEN
                INSERT INTO {bucket} AS b (key, si) VALUES (NEW.id, NEW.si)
                ON CONFLICT (key) DO UPDATE SET si = EXCLUDED.si;
            END IF;
        END IF;
    ELSE
        DELETE FROM {bucket} WHERE key = OLD.id;
    END IF;
    RETURN NULL;
END
$$"""

TRIGGER_KINDS = ("plain table", "statement-level (nearsim)", "row-level (by hand)")


def trigger_table(conn: Connection, schema: str, kind: str, rows: int) -> sql.Identifier:
    name = {"plain table": "plain", "statement-level (nearsim)": "statement",
            "row-level (by hand)": "row"}[kind]
    table = sql.Identifier(schema, f"writes_{name}")
    conn.execute(sql.SQL("DROP TABLE IF EXISTS {}").format(table))
    conn.execute(sql.SQL("CREATE TABLE {} (id bigint PRIMARY KEY, body text, si bigint)"
                         " WITH (autovacuum_enabled = off)").format(table))
    if kind == "plain table":
        return table
    qualified = table.as_string(conn)
    conn.execute("SELECT nearsim_enable(%s::regclass, 'body', bands => %s)",
                 (qualified, default_bands(rows)))
    bucket = sql.Identifier(schema, f"writes_{name}_nearsim")
    conn.execute(sql.SQL("ALTER TABLE {} SET (autovacuum_enabled = off)").format(bucket))
    if kind == "row-level (by hand)":
        function = sql.Identifier(schema, "writes_row_buckets")
        for trigger in ("nearsim_insert", "nearsim_update", "nearsim_delete"):
            conn.execute(sql.SQL("DROP TRIGGER {} ON {}").format(sql.Identifier(trigger), table))
        conn.execute(sql.SQL("DROP FUNCTION IF EXISTS {}()").format(function))
        conn.execute(sql.SQL(ROW_TRIGGER_FUNCTION).format(function=function, bucket=bucket))
        for event in ("INSERT", "UPDATE", "DELETE"):
            conn.execute(sql.SQL(
                "CREATE TRIGGER {} AFTER {} ON {} FOR EACH ROW EXECUTE FUNCTION {}()"
            ).format(sql.Identifier(f"row_{event.lower()}"), sql.SQL(event), table, function))
    return table


SINGLE_ROW_SOURCES = {"single inserts": "writes_inserts", "single updates": "writes_updates"}


def trigger_round(conn: Connection, schema: str, kind: str, rows: int, statements: int,
                  source: sql.Identifier) -> dict[str, float]:
    """Seconds of each write on a fresh table of ``kind``; checks the buckets after."""
    table = trigger_table(conn, schema, kind, rows)
    seconds = {}
    started = time.perf_counter()
    conn.execute(sql.SQL("INSERT INTO {} (id, body, si) SELECT id, body, si FROM {}").format(
        table, source))
    seconds["insert"] = time.perf_counter() - started

    for operation, statement in (
            ("single inserts",
             "INSERT INTO {table} (id, body, si) VALUES (r.id, 'doc ' || r.id, r.si)"),
            ("single updates", "UPDATE {table} SET si = r.si WHERE id = r.id")):
        source = sql.Identifier(schema, SINGLE_ROW_SOURCES[operation])
        loop = sql.SQL(
            "DO $$DECLARE r record; BEGIN FOR r IN SELECT id, si FROM {source} ORDER BY n LOOP "
            + statement + "; END LOOP; END$$"
        ).format(source=source, table=table)
        started = time.perf_counter()
        conn.execute(loop)
        seconds[operation] = time.perf_counter() - started

    started = time.perf_counter()
    conn.execute(sql.SQL("DELETE FROM {} WHERE id <= %s").format(table), (rows,))
    seconds["delete"] = time.perf_counter() - started

    if kind != "plain table":
        row = conn.execute(
            "SELECT documents, buckets, missing, extra, wrong FROM nearsim_verify(%s::regclass)",
            (table.as_string(conn),),
        ).fetchone()
        if row is None or row[0] != statements or row[1] != statements or any(row[2:]):
            raise BenchError(f"{kind}: after the writes, nearsim_verify says (documents,"
                             f" buckets, missing, extra, wrong) = {row}, expected"
                             f" ({statements}, {statements}, 0, 0, 0)")
    if kind != "plain table":
        conn.execute("SELECT nearsim_disable(%s::regclass)", (table.as_string(conn),))
    conn.execute(sql.SQL("DROP TABLE {}").format(table))
    return seconds


def trigger_writes(conn: Connection, schema: str, plan: BucketPlan) -> dict[str, dict[str, float]]:
    rows, statements, repeat = plan.trigger_rows, plan.trigger_statements, plan.trigger_repeat
    print("\n8. Writes: nearsim's statement-level triggers against row-level triggers\n")
    rng = np.random.default_rng(SEED + 1)
    source = sql.Identifier(schema, "writes_source")
    conn.execute(sql.SQL("CREATE TABLE {} (id bigint, body text, si bigint)").format(source))
    with conn.cursor() as cur, cur.copy(
            sql.SQL("COPY {} (id, body, si) FROM STDIN").format(source)) as copy:
        copy.write("".join(f"{i}\tdoc {i}\t{v}\n" for i, v in
                           enumerate(random_fingerprints(rng, rows).tolist(), start=1)))
    # The single-row statements: new keys, then existing keys with new fingerprints.
    singles = {
        "single inserts": np.arange(rows + 1, rows + statements + 1),
        "single updates": rng.choice(rows, size=statements, replace=False) + 1,
    }
    for operation, ids in singles.items():
        staging = sql.Identifier(schema, SINGLE_ROW_SOURCES[operation])
        conn.execute(sql.SQL("CREATE TABLE {} (n int, id bigint, si bigint)").format(staging))
        with conn.cursor() as cur, cur.copy(
                sql.SQL("COPY {} (n, id, si) FROM STDIN").format(staging)) as copy:
            for record in zip(range(statements), ids.tolist(),
                              random_fingerprints(rng, statements).tolist(), strict=True):
                copy.write_row(record)
    for staging in (source, *(sql.Identifier(schema, t) for t in SINGLE_ROW_SOURCES.values())):
        conn.execute(sql.SQL("VACUUM ANALYZE {}").format(staging))
    round_trip = statistics.median(best_of(200, lambda: conn.execute("SELECT 1").fetchone()))
    wrap(
        "Three tables (id bigint PRIMARY KEY, body text, si bigint), fingerprints supplied by"
        " the client: a plain table; one enabled with nearsim_enable (a BEFORE ROW trigger that"
        " keeps a supplied fingerprint, AFTER STATEMENT triggers that update the bucket table"
        " from the transition tables); and the same with the INSERT, UPDATE and DELETE"
        " statement triggers replaced by AFTER ROW triggers of a plpgsql function written by"
        " hand (INSERT ... ON CONFLICT (key) DO UPDATE; DELETE by key; on UPDATE, delete and"
        f" insert when the key or fingerprint changed). On each, in order: INSERT ... SELECT of"
        f" {rows:,} rows from a staging table (one statement); {statements:,} single-row"
        f" INSERTs of new keys; {statements:,} single-row UPDATEs of the fingerprint of random"
        f" rows; DELETE of the {rows:,} first rows (one statement). The single-row statements"
        " run in a plpgsql loop over a staging table in one DO statement: each is a statement"
        " of its own, which fires the statement triggers once and whose plan is cached like a"
        " prepared statement's, and a client's round trip per statement"
        f" ({round_trip * 1000:.3f} ms here for SELECT 1) does not count. The buckets are"
        f" checked with nearsim_verify afterwards. Best of {repeat} rounds, each on a new"
        " table, the kinds alternating; client wall clock including the commit."
    )
    best: dict[str, dict[str, float]] = {kind: {} for kind in TRIGGER_KINDS}
    for _ in range(repeat):
        for kind in TRIGGER_KINDS:
            for operation, seconds in trigger_round(conn, schema, kind, rows, statements,
                                                    source).items():
                best[kind][operation] = min(best[kind].get(operation, math.inf), seconds)
    counts = {"insert": rows, "single inserts": statements, "single updates": statements,
              "delete": rows}
    labels = {"insert": f"INSERT ... SELECT, {rows:,} rows",
              "single inserts": f"{statements:,} single-row INSERTs",
              "single updates": f"{statements:,} single-row UPDATEs",
              "delete": f"DELETE, {rows:,} rows"}
    plain, statement, row = (best[kind] for kind in TRIGGER_KINDS)
    table = []
    for operation, count in counts.items():
        table.append([
            labels[operation], f"{count / plain[operation]:,.0f}",
            f"{count / statement[operation]:,.0f}", f"{count / row[operation]:,.0f}",
            times(statement[operation] / plain[operation]),
            times(row[operation] / plain[operation]),
            times(row[operation] / statement[operation]),
        ])
    print()
    print_table(["operation", "plain rows/s", "statement-level rows/s", "row-level rows/s",
                 "statement/plain time", "row/plain time", "row/statement time"],
                table, "<>>>>>>")
    return best


# --- main --------------------------------------------------------------------


def summary(db: Sequence[tuple[Corpus, float]], client: Sequence[tuple[Corpus, float]],
            scan: ScanResult, reference: Sequence[tuple[Corpus, float]]) -> list[Row]:
    rows = []
    for (corpus, seconds), (_, reference_seconds) in zip(db, reference, strict=True):
        rows.append(Row(
            f"simhash in database against the PL/Python reference, {corpus.name}, MB/s",
            f"{corpus.nbytes / MB / seconds:.1f}",
            f"{corpus.nbytes / MB / reference_seconds:.1f} (PL/Python)",
            f"{reference_seconds / seconds:.2f}x", "none", "-",
        ))
    for where, results, target in (("in database", db, True), ("client", client, False)):
        for corpus, seconds in results:
            mbps = corpus.nbytes / MB / seconds
            rows.append(Row(
                f"simhash {where}, {corpus.name}, MB/s per core",
                f"{mbps:.1f}",
                f"{SEED_JAVA_MBPS} (seed Java)",
                f"{mbps / SEED_JAVA_MBPS:.2f}x",
                f">= {TARGET_MBPS:g}" if target else "none",
                yes_no(mbps >= TARGET_MBPS) if target else "-",
            ))
    c_ms, sql_ms = min(scan.c_seconds) * 1000, min(scan.sql_seconds) * 1000
    speedup = sql_ms / c_ms
    rows.append(Row(
        f"hamming() <= {RADIUS} scan of {scan.rows:,} rows, ms",
        f"{c_ms:.1f}",
        f"{sql_ms:.1f} (pure SQL)",
        f"{speedup:.2f}x faster",
        f">= {TARGET_SPEEDUP}x faster",
        yes_no(speedup >= TARGET_SPEEDUP),
    ))
    return rows


def bucket_summary(searches: Sequence[SearchResult], pairs: Sequence[PairsResult],
                   sets: Sequence[DocSet], writes: dict[str, dict[str, float]],
                   plan: BucketPlan) -> list[Row]:
    rows = []
    largest = max(plan.sizes)
    target_n = count_rows(TARGET_ROWS)
    for r in searches:
        if r.docset.rows != largest or r.k != 6:
            continue
        scan = r.p50(HAMMING)
        for name, plan_kind in ((GENERIC, "generic"), (CUSTOM, "custom")):
            bucket = r.p50(name)
            rows.append(Row(
                f"bucket search k=6, {r.docset.label}, {plan_kind} plan, p50 ms",
                ms(bucket), f"{ms(scan)} (hamming() scan)", f"{times(scan / bucket)} faster",
                f">= {TARGET_SEARCH_SPEEDUP:g}x at {target_n}",
                yes_no(scan / bucket >= TARGET_SEARCH_SPEEDUP) if largest == TARGET_ROWS
                else "-",
            ))
    p50 = {(r.docset.name, r.k): r.p50(GENERIC) for r in searches}
    for p in pairs:
        if p.docset.rows != largest:
            continue
        search = p50.get((p.docset.name, p.k))
        estimate = search * p.docset.rows / 1000 if search is not None else None
        rows.append(Row(
            f"nearsim_pairs k={p.k}, {p.docset.label}, s",
            f"{p.seconds:.1f}" if p.pairs is not None else p.note,
            f"{estimate:,.0f} ({p.docset.rows:,} searches)" if estimate else "-",
            f"{times(estimate / p.seconds)} faster" if estimate and p.pairs is not None else "-",
            f"< {TARGET_PAIRS_SECONDS:g} at {target_n}",
            yes_no(p.pairs is not None and p.seconds < TARGET_PAIRS_SECONDS)
            if largest == TARGET_ROWS else "-",
        ))
    for d in sets:
        assert d.loaded is not None and d.reindexed is not None
        loaded, built = d.loaded.per_doc(d.rows), d.reindexed.per_doc(d.rows)
        rows.append(Row(
            f"bucket storage, {d.label}, bytes/doc as loaded",
            f"{loaded:.1f}", f"{built:.1f} (built)", f"{loaded / built:.2f}x",
            f"<= {TARGET_BUCKET_BYTES:g} at >= 100k",
            yes_no(max(loaded, built) <= TARGET_BUCKET_BYTES) if d.rows >= 100_000 else "-",
        ))
    statement, row = writes[TRIGGER_KINDS[1]], writes[TRIGGER_KINDS[2]]
    counts = {"insert": plan.trigger_rows, "single inserts": plan.trigger_statements,
              "single updates": plan.trigger_statements, "delete": plan.trigger_rows}
    labels = {"insert": f"INSERT ... SELECT of {plan.trigger_rows:,}",
              "single inserts": "single-row INSERTs", "single updates": "single-row UPDATEs",
              "delete": f"DELETE of {plan.trigger_rows:,}"}
    for operation, count in counts.items():
        rows.append(Row(
            f"{labels[operation]}, statement triggers, rows/s",
            f"{count / statement[operation]:,.0f}",
            f"{count / row[operation]:,.0f} (row triggers)",
            f"{row[operation] / statement[operation]:.2f}x", "none", "-",
        ))
    return rows


def load_summary(loads: Sequence[loading.LoadResult]) -> list[Row]:
    baseline, *commands = loads
    size = f"{baseline.nbytes / MB:,.0f} MB"
    rows = []
    lz4 = [r for r in commands if r.name.startswith("plain COPY")]
    for result in commands:
        if result.name.startswith("plain COPY"):
            continue
        if result.name == "nearsim-load" and lz4:
            rows.append(Row(
                f"{result.name}, {size}, MB/s, against lz4 texts",
                f"{result.mb_per_second:.1f}",
                f"{lz4[0].mb_per_second:.1f} (plain COPY, lz4)",
                f"{result.mb_per_second / lz4[0].mb_per_second:.2f}x", "none", "-",
            ))
        ratio = result.mb_per_second / baseline.mb_per_second
        first_load = result.name == "nearsim-load"
        rows.append(Row(
            f"{result.name}, {size}, MB/s ({result.docs_per_second:,.0f} docs/s)",
            f"{result.mb_per_second:.1f}", f"{baseline.mb_per_second:.1f} (plain COPY)",
            f"{ratio:.2f}x",
            f">= {loading.TARGET_RATIO:.2f}x at >= 100 MB" if first_load else "none",
            # Below 100 MB the command's start-up time weighs too much.
            yes_no(ratio >= loading.TARGET_RATIO)
            if first_load and baseline.nbytes >= 100 * MB else "-",
        ))
    return rows


def disable_tables(conn: Connection, schema: str) -> None:
    """nearsim_disable the tables of the scratch schema that are still enabled.

    Dropping the schema would forget them too, but only where the extension
    has its event trigger for dropped tables.
    """
    row = conn.execute("SELECT extnamespace::regnamespace::text FROM pg_extension"
                       " WHERE extname = 'nearsim'").fetchone()
    if row is None:
        return
    registry = sql.SQL("{}.nearsim_tables").format(sql.SQL(row[0]))
    if conn.execute("SELECT to_regclass(%s)", (registry.as_string(conn),)).fetchone() == (None,):
        return
    for (table,) in conn.execute(
            sql.SQL("SELECT tbl::text FROM {} WHERE object_schema = %s").format(registry),
            (schema,)).fetchall():
        conn.execute("SELECT nearsim_disable(%s::regclass)", (table,))


def write_results(path: str, results: dict[str, Any]) -> None:
    with open(path, "w", encoding="utf-8") as file:
        json.dump(results, file, indent=1)
        file.write("\n")
    print(f"   results written to {path}")


def peers_summary(peer: peers.PeersResult) -> list[Row]:
    built = peer.signatures
    rows = [Row(
        "signatures of the KJV chapters, nearsim.simhash_many (client), MB/s",
        f"{built.mb_per_second(peers.SIMHASH_CLIENT):.1f}",
        f"{built.mb_per_second(peers.MINHASH):.1f} (datasketch MinHash)",
        f"{built.seconds[peers.MINHASH] / built.seconds[peers.SIMHASH_CLIENT]:.2f}x", "none", "-",
    ), Row(
        "signatures of the KJV chapters, simhash(body) (server), MB/s",
        f"{built.mb_per_second(peers.SIMHASH_SERVER):.1f}",
        f"{built.mb_per_second(peers.TRIGRAM_INDEX):.1f} (pg_trgm GIN index)",
        f"{built.seconds[peers.TRIGRAM_INDEX] / built.seconds[peers.SIMHASH_SERVER]:.2f}x",
        "none", "-",
    )]
    for lookup in peer.lookups:
        trigram = lookup.p50_ms(peers.TRIGRAM)
        for name in (peers.SIMILAR, peers.VERIFIED):
            rows.append(Row(
                f"lookup in {count_rows(lookup.documents)} verse documents, {name}, p50 ms",
                f"{lookup.p50_ms(name):.2f}",
                f"{trigram:.2f} (pg_trgm %)", f"{trigram / lookup.p50_ms(name):.2f}x faster",
                "none", "-",
            ))
    return rows


def run(dsn: str, rows: int, repeat: int, quick: bool, plan: BucketPlan,
        results_file: str | None = None) -> None:
    started = time.perf_counter()
    conn = connect(dsn)
    schema = f"nearsim_bench_{os.getpid()}_{secrets.token_hex(3)}"
    with conn:
        version = prepare_session(conn)
        check_bucket_api(conn)
        mode = "quick run" if quick else "full run"
        print(f"nearsim benchmarks ({mode}: {rows:,} rows, best of {repeat}; bucket index with"
              f" {', '.join(f'{n:,}' for n in plan.sizes)} documents, {plan.queries:,} queries)")
        print(f"   nearsim {nearsim.__version__}, profile {nearsim.PROFILE}; PostgreSQL {version};"
              f" Python {platform.python_version()}")
        print(f"   {cpu_model()}, {os.cpu_count()} cores; scratch schema {schema} (dropped at"
              " the end)")
        conn.execute(sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(schema)))
        try:
            corpora = read_corpora()
            db, reference = database_simhash(conn, schema, corpora, repeat)
            client = client_simhash(corpora, repeat)
            scan = hamming_scan(conn, schema, rows, repeat)
            # From here on, statements run with prepare=True are prepared on the
            # server (psycopg prepares nothing while the threshold is None).
            conn.prepare_threshold = PREPARE_WHEN_ASKED
            sets, searches = search_latency(conn, schema, plan, corpora[0])
            band_layouts(conn, schema, [d for d in sets if d.kind == UNIFORM])
            pairs = all_pairs(conn, sets, plan.pairs_timeout, searches)
            bucket_storage_table(sets)
            writes = trigger_writes(conn, schema, plan)
            loads, load_problems = loading.bulk_load(dsn, conn, schema, kjv_chapters(), quick)
            peer = peers.run(conn, schema, kjv_chapters(), quick)
        finally:
            try:
                disable_tables(conn, schema)
                conn.execute(sql.SQL("DROP SCHEMA {} CASCADE").format(sql.Identifier(schema)))
            except psycopg.Error as error:
                print(f"run.py: could not drop scratch schema {schema}: {one_line(error)}",
                      file=sys.stderr)

    print("\nSummary (MB = 10^6 bytes; one core each; ratio = value against the baseline)\n")
    table = (summary(db, client, scan, reference)
             + bucket_summary(searches, pairs, sets, writes, plan)
             + load_summary(loads) + peers_summary(peer))
    print_table(
        ["measurement", "value", "baseline", "ratio", "target", "met?"],
        [[r.measurement, r.value, r.baseline, r.ratio, r.target, r.met] for r in table],
        "<>>>><",
    )
    missed = sum(r.met == "no" for r in table)
    total = time.perf_counter() - started
    print(f"\n   {missed} of {sum(r.met != '-' for r in table)} targets missed;"
          f" total time {total:.1f} s")
    if results_file is not None:
        write_results(results_file, {
            "mode": "quick" if quick else "full", "nearsim": nearsim.__version__,
            "postgresql": version, "python": platform.python_version(), "cpu": cpu_model(),
            "cores": os.cpu_count(), "seconds": round(total, 1),
            "summary": [r.__dict__ for r in table],
            "fingerprints": {
                where: [{"corpus": c.name, "documents": len(c.texts), "bytes": c.nbytes,
                         "seconds": t} for c, t in results]
                for where, results in (("database", db), ("database PL/Python reference",
                                                         reference), ("client", client))},
            "scan": {"rows": scan.rows, "hamming_ms": min(scan.c_seconds) * 1000,
                     "bit_count_ms": min(scan.sql_seconds) * 1000},
            "searches": [{"set": r.docset.label, "kind": r.docset.kind, "documents":
                          r.docset.rows, "k": r.k, "found_mean": float(np.mean(r.found)),
                          "p50_ms": {n: r.p50(n) for n in r.seconds},
                          "p95_ms": {n: r.p95(n) for n in r.seconds}} for r in searches],
            "pairs": [{"set": p.docset.label, "documents": p.docset.rows, "k": p.k,
                       "pairs": p.pairs, "seconds": p.seconds,
                       "clusters_seconds": p.clusters_seconds} for p in pairs],
            "storage": [{"set": d.label, "documents": d.rows, "bands": d.bands,
                         "loaded_bytes_per_doc": d.loaded.per_doc(d.rows) if d.loaded else None,
                         "built_bytes_per_doc":
                             d.reindexed.per_doc(d.rows) if d.reindexed else None}
                        for d in sets],
            "loads": [{"name": r.name, "documents": r.documents, "bytes": r.nbytes,
                       "seconds": r.seconds} for r in loads],
            "peers": {
                "signatures": {"documents": peer.signatures.documents,
                               "bytes": peer.signatures.nbytes,
                               "seconds": peer.signatures.seconds},
                "lookups": [{"documents": lk.documents, "bytes": lk.nbytes,
                             "build_seconds": lk.build_seconds,
                             "p50_ms": {n: lk.p50_ms(n) for n in lk.latencies},
                             "p95_ms": {n: lk.p95_ms(n) for n in lk.latencies},
                             "found_mean": lk.found, "queries": lk.asked,
                             "trigram_plan": lk.trigram_plan}
                            for lk in peer.lookups],
                "pgvector": peer.pgvector},
        })  # fmt: skip
    if load_problems:
        raise BenchError("bulk loading checks failed: " + "; ".join(load_problems))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--dsn", default=os.environ.get("NEARSIM_DSN"),
                        help="libpq connection string (default: $NEARSIM_DSN)")
    parser.add_argument("--quick", action="store_true",
                        help=f"a fast smoke run: --rows {QUICK_ROWS:,} --repeat {QUICK_REPEAT}"
                        " unless given")
    parser.add_argument("--rows", type=int, default=None,
                        help=f"rows in the Hamming scan table (default: {FULL_ROWS:,})")
    parser.add_argument("--repeat", type=int, default=None,
                        help=f"timed runs of each measurement, the best counts"
                        f" (default: {FULL_REPEAT})")
    parser.add_argument("--sizes", type=int, nargs="+", default=None, metavar="N",
                        help="documents per table in the bucket index sections (default:"
                        f" {' '.join(map(str, FULL_PLAN.sizes))}; --quick:"
                        f" {' '.join(map(str, QUICK_PLAN.sizes))})")
    parser.add_argument("--results", metavar="FILE",
                        help="also write every number as JSON to FILE")
    parser.add_argument("--queries", type=int, default=None,
                        help=f"search queries per table (default: {FULL_PLAN.queries};"
                        f" --quick: {QUICK_PLAN.queries})")
    args = parser.parse_args()
    if not args.dsn:
        parser.error("no database: pass --dsn or set NEARSIM_DSN")
    rows = args.rows if args.rows is not None else (QUICK_ROWS if args.quick else FULL_ROWS)
    repeat = args.repeat if args.repeat is not None else (
        QUICK_REPEAT if args.quick else FULL_REPEAT)
    if rows < 1 or rows > 2**31 - 1:
        parser.error("--rows must be between 1 and 2147483647")
    if repeat < 1:
        parser.error("--repeat must be at least 1")
    plan = QUICK_PLAN if args.quick else FULL_PLAN
    if args.sizes is not None:
        plan = replace(plan, sizes=tuple(args.sizes))
    if args.queries is not None:
        plan = replace(plan, queries=args.queries)
    if min(plan.sizes) < 100 or plan.queries < 1:
        parser.error("--sizes must be at least 100 and --queries at least 1")
    try:
        run(args.dsn, rows, repeat, args.quick, plan, args.results)
    except BenchError as error:
        print(f"run.py: {error}", file=sys.stderr)
        sys.exit(error.status)
    except psycopg.Error as error:
        print(f"run.py: database error: {one_line(error)}", file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
