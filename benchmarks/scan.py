"""Section 3 of the benchmarks: the Hamming-radius filter in a sequential scan.

An unlogged table of random fingerprints (``hashtextextended(i::text, 0)``),
every ``PLANT_EVERY``-th row instead the query fingerprint with 0 to
``PLANT_MAX_DISTANCE`` bits flipped so that the queries have rows to count,
scanned with the C ``hamming()`` and with the same filter in pure SQL,
``bit_count((a # b)::bit(64))``, the two alternating.  Both must count the
same rows, and at least the planted ones.
"""

from __future__ import annotations

import statistics
import time
from dataclasses import dataclass

from psycopg import sql

from .common import MB, BenchError, Connection, best_of, prewarm_table, print_table, wrap

TARGET_SPEEDUP = 1.5  # C hamming() against the pure-SQL filter
RADIUS = 6  # the seeds' "90% similar": at most 6 of 64 bits differ
PLANT_EVERY = 1000  # every 1000th row of the scan table is a planted near-duplicate
PLANT_MAX_DISTANCE = 10  # planted rows are 0..10 bits from the query fingerprint


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
