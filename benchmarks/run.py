"""nearsim benchmarks: fingerprint throughput and a Hamming-radius scan, one core each.

    .venv/bin/python benchmarks/run.py --dsn "host=... dbname=nearsim" [--quick]

Measures, in one run:

1. ``simhash(text)`` in the database on the King James Bible (MB/s, one backend);
2. ``nearsim.simhash`` in this Python process on the same texts (MB/s, one core);
3. a sequential scan of random fingerprints with the C ``hamming()`` against the
   same filter in pure SQL, ``bit_count((a # b)::bit(64))``;

then prints a summary table against the seed paper's Java (3.3 MB/s) and the
project's targets.  Every table lives in a scratch schema that is dropped at the
end.  Missed targets do not change the exit status; errors do (1), and so does
a database that cannot be reached (2).
"""

from __future__ import annotations

import argparse
import os
import platform
import secrets
import statistics
import sys
import textwrap
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import psycopg
from psycopg import sql

import nearsim
from nearsim.db import ProfileMismatch, ensure_extension
from nearsim.report import format_table, one_line
from nearsim.samples import Chapter, SampleUnavailable, kjv_chapters

Connection = psycopg.Connection[tuple[Any, ...]]

SEED_JAVA_MBPS = 3.3  # the seed paper's Java implementation, MB/s
TARGET_MBPS = 10.0  # target for simhash(text) in the database, MB/s per core
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
                     repeat: int) -> list[tuple[Corpus, float]]:
    """Best seconds of one pass of simhash(body) over each corpus in one backend."""
    print("\n1. simhash(text) in the database: one backend, one core\n")
    tables = [sql.Identifier(schema, f"corpus_{i}") for i in range(len(corpora))]
    query = sql.SQL("SELECT count(*), sum(simhash(body)) FROM {}")
    print("   SELECT count(*), sum(simhash(body)) FROM <corpus table>\n")
    wrap(
        "The texts are COPYed into an unlogged table (one row per document; PostgreSQL"
        " stores them compressed, TOAST) and fingerprinted by one backend with"
        " max_parallel_workers_per_gather = 0 and jit = off. The first simhash() call of a"
        " session imports numpy, so a warm-up call and one untimed pass over each table run"
        " first; that pass also checks that the database's fingerprints are the client's"
        f" (the sum of all). Time: best of {repeat} passes, wall clock in this client, so it"
        " includes reading and decompressing the rows and one round trip. MB = 10^6 bytes of"
        " UTF-8 text (octet_length). Seed paper's Java: 3.3 MB/s; target: >= 10 MB/s per core."
    )
    conn.execute("SELECT simhash('warm up: the first call in a session imports numpy')")
    results = []
    for corpus, table in zip(corpora, tables, strict=True):
        load_corpus(conn, table, corpus)
        expected = (len(corpus.texts), sum(f for f in corpus.fingerprints if f is not None))
        statement = query.format(table)

        def run(statement: sql.Composed = statement, expected: tuple[int, int] = expected,
                name: str = corpus.name) -> None:
            row = conn.execute(statement).fetchone()
            got = (int(row[0]), int(row[1])) if row else None
            if got != expected:
                raise BenchError(f"{name}: the database's simhash() gave (count, sum) {got},"
                                 f" the client's nearsim.simhash {expected}")

        run()  # untimed: warm-up and check
        results.append((corpus, min(best_of(repeat, run))))
    print_throughput(results)
    return results


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
        ["corpus", "docs", "KB per doc", "MB", "best s", "MB/s", "vs 3.3 MB/s", "vs 10 MB/s"],
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


# --- main --------------------------------------------------------------------


def summary(db: Sequence[tuple[Corpus, float]], client: Sequence[tuple[Corpus, float]],
            scan: ScanResult) -> list[Row]:
    rows = []
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


def run(dsn: str, rows: int, repeat: int, quick: bool) -> None:
    started = time.perf_counter()
    conn = connect(dsn)
    schema = f"nearsim_bench_{os.getpid()}_{secrets.token_hex(3)}"
    with conn:
        version = prepare_session(conn)
        mode = "quick run" if quick else "full run"
        print(f"nearsim benchmarks ({mode}: {rows:,} rows, best of {repeat})")
        print(f"   nearsim {nearsim.__version__}, profile {nearsim.PROFILE}; PostgreSQL {version};"
              f" Python {platform.python_version()}")
        print(f"   {cpu_model()}, {os.cpu_count()} cores; scratch schema {schema} (dropped at"
              " the end)")
        conn.execute(sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(schema)))
        try:
            corpora = read_corpora()
            db = database_simhash(conn, schema, corpora, repeat)
            client = client_simhash(corpora, repeat)
            scan = hamming_scan(conn, schema, rows, repeat)
        finally:
            try:
                conn.execute(sql.SQL("DROP SCHEMA {} CASCADE").format(sql.Identifier(schema)))
            except psycopg.Error as error:
                print(f"run.py: could not drop scratch schema {schema}: {one_line(error)}",
                      file=sys.stderr)

    print("\nSummary (MB = 10^6 bytes; one core each; ratio = value against the baseline)\n")
    table = summary(db, client, scan)
    print_table(
        ["measurement", "value", "baseline", "ratio", "target", "met?"],
        [[r.measurement, r.value, r.baseline, r.ratio, r.target, r.met] for r in table],
        "<>>>><",
    )
    missed = sum(r.met == "no" for r in table)
    print(f"\n   {missed} of {sum(r.met != '-' for r in table)} targets missed;"
          f" total time {time.perf_counter() - started:.1f} s")


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
    try:
        run(args.dsn, rows, repeat, args.quick)
    except BenchError as error:
        print(f"run.py: {error}", file=sys.stderr)
        sys.exit(error.status)
    except psycopg.Error as error:
        print(f"run.py: database error: {one_line(error)}", file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
