"""The default path at scale: enabled empty, filled by COPY, searched (``make bench-10m``).

For each size (by default 1 and 10 million documents), the uniform and the
text-like sets of sections 4 to 7 (:mod:`benchmarks.docsets`): the table is
enabled while empty, as ``nearsim init`` does, then filled by one COPY per
million rows; no rebuild, no tuning.  Measured in the same run:

- the COPY's rate for the first and for the last million rows;
- at the largest size, ``nearsim-load`` of a million more documents (JSON
  Lines of KJV verses) into the full uniform table, beside the same load
  into an empty enabled table of the same shape;
- bytes per document of the rotation indexes, as loaded and rebuilt;
- search latency through the index (a prepared statement) for k = 3, 6 and
  10, every answer checked against numpy, beside the ``hamming()`` scan of
  the same table (fewer queries: a scan of 10 million rows takes a second);
- the first search of a fresh connection (new backend, nothing cached in
  it), over many connections, on the uniform set of 1 million (or the
  smallest size);
- the exact k-nearest search for n = 1, 10 and 100: ``nearsim_nearest`` and
  ``ORDER BY hamming(si, q), id LIMIT n`` through the rotation scan, beside
  the same statement as a scan;
- 10,000 new documents against the table in one statement (``JOIN ... ON
  hamming(d.si, n.si) <= 3``, an index nested loop), checked against the
  nested scan for 200 of them at the smallest size;
- at the smallest and the largest size, and with more bands: single-row
  INSERTs per second with and without a check-in guard (target at 10
  million: at least half);
- what each million's COPY wrote and read (WAL, full-page images, index
  blocks read from outside shared_buffers, blocks written out of it);
- at the largest size, ``INSERT ... SELECT`` of a million new rows into the
  full uniform table, against the same into a plain table holding the same
  rows (target at 10 million: at most twice the time);
- with ``--max-wal-size SIZE`` (it changes the server's configuration with
  ALTER SYSTEM, and resets it afterwards: for a cluster of the benchmark's
  own), a million more rows into the largest uniform table at the server's
  max_wal_size and again at SIZE.

Usage: ``python -m benchmarks.scale --dsn DSN [--sizes N ...] [--max-wal-size SIZE]
[--results FILE]``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import secrets
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import psycopg
from psycopg import sql

import nearsim

from .common import (
    PREPARE_WHEN_ASKED,
    BenchError,
    Connection,
    connect,
    count_rows,
    cpu_model,
    drop_schema,
    ms,
    percentile_ms,
    prepare_session,
    print_table,
    run_main,
    times,
    wrap,
)
from .docsets import (
    SEED,
    TARGET_INDEX_BYTES,
    UNIFORM,
    DocSet,
    LoadIO,
    check_rotation_index_api,
    copy_rows,
    drop_docset,
    flip_masks,
    load_docsets,
    make_docset,
    prewarm_search,
    random_fingerprints,
    shared_buffers,
)
from .guarded import GUARD_DISTANCE, TARGET_GUARD_RATIO, guard_rates
from .search import GENERIC, HAMMING, Match, expected_matches, run_search, search_statements, within
from .throughput import kjv_corpora

SIZES = (1_000_000, 10_000_000)
# 13 and 21: the calibrated radii of S_R 0.8 and 0.5 (nearsim_radius)
RADII = (3, 6, 10, 13, 21)
QUERIES = 100
SCAN_QUERIES = 10
CONNECTIONS = 50
# Targets of the default path (enabled empty, loaded, never rebuilt).
TARGETS = {
    (10_000_000, 6): (2.0, 300.0),  # p50 ms at most, times the hamming() scan at least
    (10_000_000, 3): (1.0, None),
    (1_000_000, 6): (1.0, 50.0),
    (10_000_000, 10): (3.0, None),
}
TARGET_FRESH_MS = 5.0
TARGET_JOIN_SECONDS = 10.0  # JOIN_ROWS new documents against 10 million
# nearest-first (ORDER BY hamming(si, q), id LIMIT n): (rows, n) -> p50 ms at most
TARGET_NEAREST = {(1_000_000, 10): 2.0, (10_000_000, 10): 5.0, (10_000_000, 100): 20.0}
TARGET_LOAD_RATIO = 0.5  # rate of the last million against the first
NEAREST = (1, 10, 100)
NEAREST_QUERIES = 30
NEAREST_SCAN_QUERIES = 3
JOIN_ROWS = 10_000  # new documents checked against the table in one statement
JOIN_DISTANCE = 3
JOIN_CHECKED = 200  # of them, checked against the nested scan at the smallest size
BATCH_ROWS = int(os.environ.get("NEARSIM_BENCH_BATCH_ROWS", 1_000_000))  # nearsim_check_batch
TARGET_BATCH_RATE = 50_000.0  # documents/s checked against 10 million
LOADER_DOCUMENTS = int(os.environ.get("NEARSIM_BENCH_LOADER_DOCUMENTS", 1_000_000))
INSERT_SELECT_ROWS = int(os.environ.get("NEARSIM_BENCH_INSERT_SELECT_ROWS", 1_000_000))
TARGET_INSERT_SELECT_RATIO = 2.0  # enabled time against plain time, at most, at 10 million


@dataclass
class SetResult:
    docset: DocSet
    p50: dict[int, float] = field(default_factory=dict)  # k -> ms, index search
    p95: dict[int, float] = field(default_factory=dict)
    scan_p50: dict[int, float] = field(default_factory=dict)  # k -> ms, hamming() scan
    found: dict[int, float] = field(default_factory=dict)  # k -> mean rows
    nearest: dict[int, float] = field(default_factory=dict)  # n -> p50 ms, nearsim_nearest
    nearest_scan: dict[int, float] = field(default_factory=dict)  # n -> p50 ms, ORDER BY scan
    # n -> p50 ms, ORDER BY hamming(si, q), id LIMIT n through the rotation scan
    nearest_literal: dict[int, float] = field(default_factory=dict)
    nearest_distance: dict[int, float] = field(default_factory=dict)  # n -> mean of the n-th
    # JOIN ... ON hamming(d.si, n.si) <= JOIN_DISTANCE of JOIN_ROWS new documents: seconds, pairs
    join: tuple[float, int] | None = None
    # nearsim_check_batch of BATCH_ROWS new documents, the JOIN's first: seconds, near ones
    batch_check: tuple[float, int] | None = None
    inserts: dict[str, float] = field(default_factory=dict)  # guard or not -> rows/s
    loader: dict[str, float] = field(default_factory=dict)  # empty or full table -> rows/s
    # max_wal_size -> (rows/s, cost) of a million more rows into the full table
    wal_sizes: dict[str, tuple[float, LoadIO]] = field(default_factory=dict)
    # plain or enabled -> rows/s of INSERT ... SELECT of INSERT_SELECT_ROWS into the full table
    insert_select: dict[str, float] = field(default_factory=dict)


def time_nearest(conn: Connection, result: SetResult) -> None:
    """nearsim_nearest and ORDER BY hamming(si, q), id LIMIT n through the rotation
    scan, for n = 1, 10, 100, against the scan they equal, every answer checked."""
    docset = result.docset
    for n in NEAREST:
        index_sql = sql.SQL("SELECT n.key::bigint, n.distance FROM nearsim_nearest(%s::regclass,"
                            " %s::bigint, %s) AS n")
        literal_sql = sql.SQL("SELECT id, hamming(si, %s::bigint) FROM {} ORDER BY"
                              " hamming(si, %s::bigint), id LIMIT %s").format(docset.table)
        queries = docset.queries[:NEAREST_QUERIES].tolist()
        conn.execute(index_sql, (docset.qualified, queries[0], n)).fetchall()  # warm-up
        conn.execute(literal_sql, (queries[0], queries[0], n)).fetchall()
        index_seconds, literal_seconds, scan_seconds = [], [], []
        farthest: list[int] = []  # the distance of the n-th row, per query
        for number, query in enumerate(queries):
            started = time.perf_counter()
            found = conn.execute(index_sql, (docset.qualified, query, n)).fetchall()
            index_seconds.append(time.perf_counter() - started)
            started = time.perf_counter()
            literal = conn.execute(literal_sql, (query, query, n)).fetchall()
            literal_seconds.append(time.perf_counter() - started)
            if literal:
                farthest.append(int(literal[-1][1]))
            if number < NEAREST_SCAN_QUERIES:
                # the same statement without nearsim's planner hook: the scan
                conn.execute("SET nearsim.enable_rotation_scan = off")
                try:
                    started = time.perf_counter()
                    scanned = conn.execute(literal_sql, (query, query, n)).fetchall()
                    scan_seconds.append(time.perf_counter() - started)
                finally:
                    conn.execute("RESET nearsim.enable_rotation_scan")
                if found != scanned or literal != scanned:
                    raise BenchError(f"{docset.label}: nearsim_nearest or ORDER BY hamming()"
                                     f" LIMIT {n} differs from the scan for query {number}")
        result.nearest[n] = percentile_ms(index_seconds, 50)
        result.nearest_literal[n] = percentile_ms(literal_seconds, 50)
        result.nearest_distance[n] = float(np.mean(farthest)) if farthest else 0.0
        result.nearest_scan[n] = percentile_ms(scan_seconds, 50)


def batch_of_new_documents(docset: DocSet, rows: int) -> npt.NDArray[np.int64]:
    """New documents, half near a stored one (at most 4 bits), half random: the
    JOIN's batch is the first JOIN_ROWS of them."""
    rng = np.random.default_rng(SEED + docset.rows)
    near = docset.fingerprints[rng.integers(0, len(docset.fingerprints), rows // 2)]
    near = near ^ flip_masks(rng, rng.integers(0, 5, size=len(near)))
    return np.concatenate([near, random_fingerprints(rng, rows - len(near))])


def time_batch_check(conn: Connection, result: SetResult,
                     joined: list[tuple[int, int]]) -> None:
    """nearsim_check_batch of BATCH_ROWS new documents (every one written, as with
    action record); its answer for the first JOIN_ROWS checked against the join's
    pairs (the stored neighbours) and numpy (the batch's own earlier ones)."""
    docset = result.docset
    batch = batch_of_new_documents(docset, max(BATCH_ROWS, JOIN_ROWS))
    conn.execute("CREATE TEMP TABLE nearsim_bench_batch (n integer, si bigint)")
    try:
        with conn.cursor().copy("COPY nearsim_bench_batch FROM STDIN") as copy:
            for number, value in enumerate(batch.tolist()):
                copy.write_row((number, value))
        # the batch's arrays made in the server, as SQL that screens a table's rows does
        started = time.perf_counter()
        near = conn.execute(sql.SQL(
            "SELECT b.position FROM (SELECT pg_catalog.array_agg('new ' || n ORDER BY n) AS keys,"
            " pg_catalog.array_agg(si ORDER BY n) AS fingerprints FROM nearsim_bench_batch) AS s,"
            " nearsim_check_batch(%s::regclass, 'id', 'si', s.keys, s.fingerprints, {}, true)"
            " AS b").format(sql.Literal(JOIN_DISTANCE)), (docset.qualified,)).fetchall()
        result.batch_check = (time.perf_counter() - started, len(near))
    finally:
        conn.execute("DROP TABLE nearsim_bench_batch")
    first = batch[:JOIN_ROWS].astype(np.uint64)
    expected = {n + 1 for n, _ in joined}
    for j in range(1, len(first)):
        if (np.bitwise_count(first[:j] ^ first[j]) <= JOIN_DISTANCE).any():
            expected.add(j + 1)
    found = {position for (position,) in near if position <= JOIN_ROWS}
    if found != expected:
        raise BenchError(f"{docset.label}: nearsim_check_batch differs from the join for"
                         f" {len(found ^ expected)} of the first {JOIN_ROWS:,} documents")


def time_join(conn: Connection, result: SetResult, check: bool) -> list[tuple[int, int]]:
    """JOIN_ROWS new documents (half near a stored one, half random) against the
    table in one statement, ``JOIN ... ON hamming(d.si, n.si) <= k``; with
    ``check``, the first JOIN_CHECKED of them also by the nested scan."""
    docset = result.docset
    batch = batch_of_new_documents(docset, max(BATCH_ROWS, JOIN_ROWS))[:JOIN_ROWS]
    conn.execute("CREATE TEMP TABLE nearsim_bench_new (n integer, si bigint)")
    try:
        with conn.cursor().copy("COPY nearsim_bench_new FROM STDIN") as copy:
            for number, value in enumerate(batch.tolist()):
                copy.write_row((number, value))
        conn.execute("ANALYZE nearsim_bench_new")
        joined = sql.SQL("SELECT n.n, d.id FROM nearsim_bench_new n JOIN {} d"
                         " ON hamming(d.si, n.si) <= {}").format(docset.table,
                                                                 sql.Literal(JOIN_DISTANCE))
        plan = "\n".join(r[0] for r in conn.execute(sql.SQL("EXPLAIN ") + joined))
        if "Nested Loop" not in plan or "nearsim rotation index" not in plan:
            raise BenchError(f"{docset.label}: the join is not an index nested loop:\n{plan}")
        started = time.perf_counter()
        pairs = conn.execute(joined).fetchall()
        result.join = (time.perf_counter() - started, len(pairs))
        if check:
            subset = sql.SQL("SELECT n.n, d.id FROM nearsim_bench_new n JOIN {} d"
                             " ON hamming(d.si, n.si) <= {} WHERE n.n < {}").format(
                docset.table, sql.Literal(JOIN_DISTANCE), sql.Literal(JOIN_CHECKED))
            conn.execute("SET nearsim.enable_rotation_scan = off")
            try:
                scanned = sorted(conn.execute(subset).fetchall())
            finally:
                conn.execute("RESET nearsim.enable_rotation_scan")
            if sorted(p for p in pairs if p[0] < JOIN_CHECKED) != scanned:
                raise BenchError(f"{docset.label}: the join differs from the nested scan")
    finally:
        conn.execute("DROP TABLE nearsim_bench_new")
    return pairs


def time_guard(conn: Connection, result: SetResult) -> None:
    """Single-row INSERTs per second into the set's table without and with a guard,
    in one transaction (benchmarks/guarded.py also times them each committed)."""
    plain, guarded = guard_rates(conn, result.docset, next_id(conn, result.docset))
    result.inserts = {"plain": plain, "guarded": guarded}


def time_set(conn: Connection, schema: str, docset: DocSet, queries: int,
             scan_queries: int) -> SetResult:
    """Index search and scan latencies on one set, every answer checked against numpy."""
    result = SetResult(docset)
    query_values = docset.queries[:queries]
    expected = expected_matches(docset.fingerprints, query_values, max(RADII))
    prewarm_search(conn, schema, docset)
    for k in RADII:
        statements = search_statements(docset, k)
        for name, count in ((GENERIC, len(query_values)), (HAMMING, scan_queries)):
            run_search(conn, statements[name], int(query_values[0]))  # warm-up
            seconds = []
            for number, query in enumerate(query_values[:count].tolist()):
                rows, elapsed = run_search(conn, statements[name], query)
                wanted: Match = within(expected[number], k)
                if rows != wanted:
                    raise BenchError(f"{docset.label}, k = {k}, query {number}: {name} returned"
                                     f" {len(rows):,} rows, numpy {len(wanted):,}")
                seconds.append(elapsed)
            if name == GENERIC:
                result.p50[k] = percentile_ms(seconds, 50)
                result.p95[k] = percentile_ms(seconds, 95)
                result.found[k] = float(np.mean([len(within(e, k)) for e in expected]))
            else:
                result.scan_p50[k] = percentile_ms(seconds, 50)
    return result


def loader_documents(chapters: Sequence[str], count: int, first_id: int, path: Path) -> None:
    """JSON Lines of ``count`` documents: two KJV verses and a number, ids from ``first_id``."""
    verses = [v for text in chapters for v in text.splitlines() if v.strip()]
    rng = random.Random(7)
    with path.open("w", encoding="utf-8") as file:
        for i in range(count):
            text = f"{rng.choice(verses)} {rng.choice(verses)} ({i})"
            file.write(json.dumps({"id": first_id + i, "text": text}) + "\n")


def run_loader(dsn: str, table: str, path: Path, documents: int) -> float:
    """Rows per second of ``nearsim-load`` of ``path`` into ``table``, timed to its exit."""
    command = [sys.executable, "-m", "nearsim.client.cli", "load", "--dsn", dsn, "--table", table,
               "--format", "jsonl", "--quiet", "--json", str(path)]
    started = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    seconds = time.perf_counter() - started
    if done.returncode != 0:
        raise BenchError(f"nearsim-load into {table}: exit {done.returncode}:"
                         f" {done.stderr.strip()[-500:]}")
    loaded = json.loads(done.stdout).get("loaded")
    if loaded != documents:
        raise BenchError(f"nearsim-load into {table} loaded {loaded} of {documents}")
    return documents / seconds


def time_loader(dsn: str, conn: Connection, schema: str, result: SetResult,
                chapters: Sequence[str]) -> None:
    """``nearsim-load`` of a million documents into the full table and into an empty one."""
    docset = result.docset
    empty = sql.Identifier(schema, "loader_empty")
    conn.execute(sql.SQL("CREATE TABLE {} (id bigint PRIMARY KEY, body text, si bigint)"
                         " WITH (autovacuum_enabled = off)").format(empty))
    conn.execute("SELECT nearsim_enable(%s::regclass, 'body')", (empty.as_string(conn),))
    with tempfile.TemporaryDirectory(prefix="nearsim-scale-") as directory:
        path = Path(directory) / "documents.jsonl"
        row = conn.execute(sql.SQL("SELECT max(id) FROM {}").format(docset.table)).fetchone()
        loader_documents(chapters, LOADER_DOCUMENTS, (row[0] if row else 0) + 1, path)
        conn.execute("CHECKPOINT")
        result.loader["empty"] = run_loader(dsn, empty.as_string(conn), path, LOADER_DOCUMENTS)
        conn.execute("CHECKPOINT")
        result.loader["full"] = run_loader(dsn, docset.qualified, path, LOADER_DOCUMENTS)
    print(f"   nearsim-load of {LOADER_DOCUMENTS:,} documents: {result.loader['empty']:,.0f}"
          f" rows/s into an empty table, {result.loader['full']:,.0f} into {docset.label}")
    conn.execute("SELECT nearsim_disable(%s::regclass)", (empty.as_string(conn),))
    conn.execute(sql.SQL("DROP TABLE {}").format(empty))


def set_max_wal_size(conn: Connection, value: str | None) -> str:
    """ALTER SYSTEM SET max_wal_size = ``value`` (RESET with None) and reload; the new value."""
    statement = ("ALTER SYSTEM RESET max_wal_size" if value is None else
                 sql.SQL("ALTER SYSTEM SET max_wal_size = {}").format(sql.Literal(value)))
    conn.execute(statement)
    conn.execute("SELECT pg_catalog.pg_reload_conf()")
    # reset: the configuration files' value, else the built-in default (in MB)
    wanted = conn.execute(
        "SELECT pg_catalog.pg_size_bytes(CASE WHEN v ~ '^[0-9]+$' THEN v || 'MB' ELSE v END)"
        " FROM (SELECT coalesce(%s, (SELECT f.setting FROM pg_catalog.pg_file_settings f"
        "  WHERE f.name = 'max_wal_size' AND f.error IS NULL ORDER BY f.seqno DESC LIMIT 1),"
        "  (SELECT s.boot_val FROM pg_catalog.pg_settings s WHERE s.name = 'max_wal_size'))"
        "  AS v) AS x", (value,)).fetchone()
    for _ in range(100):  # the postmaster signals the reload; this backend sees it soon
        row = conn.execute("SELECT pg_catalog.pg_size_bytes("
                           "pg_catalog.current_setting('max_wal_size'))").fetchone()
        if row == wanted:
            break
        time.sleep(0.05)
    else:
        raise BenchError(f"max_wal_size is not {value or 'reset'} after pg_reload_conf()")
    return str(conn.execute("SHOW max_wal_size").fetchone()[0])  # type: ignore[index]


def next_id(conn: Connection, docset: DocSet) -> int:
    """The id after the largest in the set's table."""
    row = conn.execute(sql.SQL("SELECT max(id) FROM {}").format(docset.table)).fetchone()
    return (row[0] if row and row[0] is not None else 0) + 1


def time_max_wal_size(conn: Connection, result: SetResult, size: str) -> None:
    """COPY a million more rows into the full table at the server's max_wal_size,
    then another million with max_wal_size = ``size`` (ALTER SYSTEM, reset after).

    A checkpoint starts every full-page image afresh: each index page an
    insert touches first after it is written whole into the WAL, and a
    checkpoint comes every max_wal_size of WAL.  Each COPY starts right after
    one.
    """
    docset = result.docset
    rng = np.random.default_rng(SEED + 1)

    def copied() -> tuple[float, LoadIO]:
        first_id = next_id(conn, docset)
        conn.execute("CHECKPOINT")
        seconds, cost = copy_rows(conn, docset, first_id,
                                  random_fingerprints(rng, 1_000_000).tolist())
        return 1_000_000 / seconds, cost

    default = str(conn.execute("SHOW max_wal_size").fetchone()[0])  # type: ignore[index]
    result.wal_sizes[default] = copied()
    try:
        raised = set_max_wal_size(conn, size)  # before the COPY (a[k()] = v() calls v first)
        result.wal_sizes[raised] = copied()
    finally:
        set_max_wal_size(conn, None)
    print("   a million more rows: " + ", ".join(
        f"{rate:,.0f} rows/s at max_wal_size {name}" for name, (rate, _) in
        result.wal_sizes.items()))


def time_insert_select(conn: Connection, schema: str, result: SetResult) -> None:
    """INSERT ... SELECT of INSERT_SELECT_ROWS new rows (fingerprints supplied) into the
    full table and into a plain table holding the same rows (id bigint PRIMARY KEY, body,
    si): two rounds, the order of the tables swapped in the second, each statement after
    a CHECKPOINT; the best of each.  nearsim_verify checks the enabled table after."""
    docset = result.docset
    plain = sql.Identifier(schema, "insert_select_plain")
    staging = sql.Identifier(schema, "insert_select_rows")
    first_id = next_id(conn, docset)
    conn.execute(sql.SQL("CREATE TABLE {} (id bigint, body text, si bigint)").format(staging))
    values = random_fingerprints(np.random.default_rng(SEED + 2), INSERT_SELECT_ROWS).tolist()
    with conn.cursor().copy(sql.SQL("COPY {} FROM STDIN").format(staging)) as copy:
        copy.write("".join(f"{first_id + i}\tdoc {first_id + i}\t{v}\n"
                           for i, v in enumerate(values)))
    conn.execute(sql.SQL("CREATE TABLE {} (id bigint PRIMARY KEY, body text, si bigint)")
                 .format(plain))
    conn.execute(sql.SQL("INSERT INTO {} SELECT id, body, si FROM {}").format(
        plain, docset.table))
    for table in (staging, plain):
        conn.execute(sql.SQL("VACUUM ANALYZE {}").format(table))
    seconds: dict[str, list[float]] = {"plain": [], "enabled": []}
    for round_number, order in enumerate((("plain", "enabled"), ("enabled", "plain"))):
        for kind in order:
            target = plain if kind == "plain" else docset.table
            conn.execute("CHECKPOINT")
            started = time.perf_counter()
            conn.execute(sql.SQL("INSERT INTO {} (id, body, si) SELECT id + %s, body, si"
                                 " FROM {}").format(target, staging),
                         (round_number * INSERT_SELECT_ROWS,))
            seconds[kind].append(time.perf_counter() - started)
    for table in (plain, staging):
        conn.execute(sql.SQL("DROP TABLE {}").format(table))
    verified = conn.execute("SELECT ok, missing, extra FROM nearsim_verify(%s::regclass,"
                            " fingerprints => false)", (docset.qualified,)).fetchone()
    if verified is None or verified[1:] != (0, 0):
        raise BenchError(f"{docset.label}: after INSERT ... SELECT, nearsim_verify says"
                         f" (ok, missing, extra) = {verified}")
    result.insert_select = {kind: INSERT_SELECT_ROWS / min(times_taken)
                            for kind, times_taken in seconds.items()}
    print(f"   INSERT ... SELECT of {count_rows(INSERT_SELECT_ROWS)} more rows: "
          + ", ".join(f"{kind} {rate:,.0f} rows/s" for kind, rate in
                      result.insert_select.items()))


def fresh_connections(dsn: str, docset: DocSet, count: int) -> tuple[list[float], list[float]]:
    """Seconds of the first search of each of ``count`` new connections, and of a second one.

    The connection is made (and a trivial statement run, so that the session
    is set up) before the clock starts; the search is the plain, unprepared
    statement a user types.
    """
    first: list[float] = []
    second: list[float] = []
    statement = sql.SQL("SELECT (doc).id, distance FROM {}(%s::bigint, 6)").format(docset.similar)
    queries = docset.queries.tolist()
    for number in range(count):
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute("SELECT 1").fetchone()
            for times_list, query in ((first, queries[number % len(queries)]),
                                      (second, queries[(number + 1) % len(queries)])):
                started = time.perf_counter()
                conn.execute(statement, (query,)).fetchall()
                times_list.append(time.perf_counter() - started)
    return first, second


def yes_no(met: bool | None) -> str:
    return "-" if met is None else "yes" if met else "no"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.scale", description=__doc__)
    parser.add_argument("--dsn", default=os.environ.get("NEARSIM_DSN"), required=False)
    parser.add_argument("--sizes", type=int, nargs="+", default=list(SIZES), metavar="N")
    parser.add_argument("--queries", type=int, default=QUERIES)
    parser.add_argument("--scan-queries", type=int, default=SCAN_QUERIES)
    parser.add_argument("--connections", type=int, default=CONNECTIONS)
    parser.add_argument("--max-wal-size", metavar="SIZE",
                        help="also load a million more rows with max_wal_size = SIZE (ALTER"
                        " SYSTEM on the server, reset afterwards)")
    parser.add_argument("--results", metavar="FILE")
    parser.add_argument("--more-bands", type=int, metavar="N",
                        help="also the uniform set of the largest size in a table enabled with"
                        " N bands (the same fingerprints and queries), searched the same way")
    args = parser.parse_args(argv)
    if not args.dsn:
        parser.error("--dsn (or NEARSIM_DSN) is required")
    if min(args.sizes) < 1000 or args.queries < 1 or args.scan_queries < 1:
        parser.error("--sizes must be at least 1000, --queries and --scan-queries at least 1")
    if args.more_bands is not None and not 3 <= args.more_bands <= 16:
        parser.error("--more-bands must be 3 to 16")
    try:
        return run(args.dsn, sorted(args.sizes), args.queries, args.scan_queries,
                   args.connections, args.results, args.max_wal_size, args.more_bands)
    except BenchError as error:
        print(f"benchmarks.scale: {error}", file=sys.stderr)
        return error.status


def run(dsn: str, sizes: Sequence[int], queries: int, scan_queries: int, connections: int,
        results_file: str | None, max_wal_size: str | None = None,
        more_bands: int | None = None) -> int:
    started = time.perf_counter()
    conn = connect(dsn)
    schema = f"nearsim_scale_{os.getpid()}_{secrets.token_hex(3)}"
    with conn:
        version = prepare_session(conn)
        check_rotation_index_api(conn)
        print(f"nearsim at scale: {', '.join(count_rows(n) for n in sizes)} documents,"
              f" enabled empty, filled by COPY; {queries} queries ({scan_queries} for the scans)")
        print(f"   nearsim {nearsim.__version__}; PostgreSQL {version}; {cpu_model()},"
              f" {os.cpu_count()} cores; shared_buffers {shared_buffers(conn)}")
        wrap("shared_buffers is PostgreSQL's default: at 10 million documents the rotation"
             " indexes (about 900 MB) do not fit in it, and a search reads the pages it needs"
             " from the operating system's page cache (the machine's memory holds them)."
             " Searches: a prepared statement with a generic plan, one backend, after"
             " pg_prewarm of the indexes (which keeps what fits); scans: the hamming() scan of"
             " the same table, with max_parallel_workers_per_gather = 0.")
        conn.execute(sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(schema)))
        conn.prepare_threshold = PREPARE_WHEN_ASKED
        results: list[SetResult] = []
        fresh: tuple[list[float], list[float]] | None = None
        try:
            chapters = kjv_corpora()[0]
            for rows in sizes:
                sets, _ = load_docsets(conn, schema, [rows], queries, chapters)
                for docset in sets:
                    results.append(time_set(conn, schema, docset, queries, scan_queries))
                    joined = time_join(conn, results[-1], check=rows == sizes[0])
                    time_batch_check(conn, results[-1], joined)
                    time_nearest(conn, results[-1])
                    if rows in (sizes[0], sizes[-1]):
                        time_guard(conn, results[-1])
                    if fresh is None and docset.kind == UNIFORM:
                        fresh = fresh_connections(dsn, docset, connections)
                    if rows == sizes[-1] and docset.kind == UNIFORM:
                        time_loader(dsn, conn, schema, results[-1], chapters.texts)
                        time_insert_select(conn, schema, results[-1])
                        if max_wal_size:
                            time_max_wal_size(conn, results[-1], max_wal_size)
                for docset in sets:
                    drop_docset(conn, docset)
            if more_bands is not None:
                # the largest uniform set again, in a table enabled with more bands
                uniform = next(r.docset for r in reversed(results) if r.docset.kind == UNIFORM)
                docset = make_docset(conn, schema, UNIFORM, uniform.fingerprints,
                                     uniform.queries, uniform.described, more_bands)
                results.append(time_set(conn, schema, docset, queries, scan_queries))
                time_nearest(conn, results[-1])
                time_guard(conn, results[-1])  # k + 1 bands: each band matches exactly
                drop_docset(conn, docset)
        finally:
            drop_schema(conn, schema)
    return report(results, fresh, time.perf_counter() - started, version, results_file)


IO_COLUMNS = ["rows/s", "WAL bytes/row", "full-page images/row", "index reads/row",
              "blocks written/row"]


def million_costs(docset: DocSet) -> dict[str, tuple[float, LoadIO]]:
    """Rows/s of the COPY of the first and of the last million, and what it wrote and read."""
    if not docset.million_io:
        return {}
    costs = {"first": (1_000_000 / docset.million_seconds[0], docset.million_io[0])}
    if len(docset.million_io) > 1:
        costs["last"] = (1_000_000 / docset.million_seconds[-1], docset.million_io[-1])
    return costs


def per_row_io_dict(cost: LoadIO) -> dict[str, float]:
    million = 1_000_000
    return {"wal_bytes": cost.wal_bytes / million,
            "full_page_images": cost.full_page_images / million,
            "index_reads": cost.index_reads / million,
            "buffer_writes": cost.buffer_writes / million}  # fmt: skip


def io_cells(figures: dict[str, float]) -> list[str]:
    """Per-row figures of :func:`per_row_io_dict` as table cells (also docs/BENCHMARKS.md's)."""
    return [f"{figures['wal_bytes']:,.0f}", f"{figures['full_page_images']:.2f}",
            f"{figures['index_reads']:.2f}", f"{figures['buffer_writes']:.2f}"]


def per_row_io(cost: LoadIO) -> list[str]:
    return io_cells(per_row_io_dict(cost))


def report(results: Sequence[SetResult], fresh: tuple[list[float], list[float]] | None,
           seconds: float, version: str, results_file: str | None) -> int:
    print()
    rows = []
    for r in results:
        d = r.docset
        for k in RADII:
            rows.append([d.label, str(k), f"{r.found[k]:,.1f}", ms(r.p50[k]), ms(r.p95[k]),
                         ms(r.scan_p50[k]), times(r.scan_p50[k] / r.p50[k])])
    print_table(["set", "k", "rows mean", "index p50 ms", "p95", "hamming() scan p50",
                 "scan / index"], rows, "<>>>>>>")
    print()
    rows = []
    for r in results:
        d = r.docset
        assert d.loaded is not None and d.reindexed is not None
        first, last = d.million_rate(0), d.million_rate(-1)
        rows.append([d.label, f"{d.load_seconds:.0f}",
                     f"{first:,.0f}" if first else "-", f"{last:,.0f}" if last else "-",
                     f"{last / first:.2f}" if first and last and len(d.million_seconds) > 1
                     else "-",
                     f"{d.loaded.per_doc(d.rows):.1f}", f"{d.reindexed.per_doc(d.rows):.1f}"])
    print_table(["set", "COPY s", "rows/s first million", "rows/s last million", "last/first",
                 "index bytes/doc as loaded", "rebuilt"], rows, "<>>>>>>")
    print()
    rows = [[f"{r.docset.label}, {which} million", f"{rate:,.0f}", *per_row_io(cost)]
            for r in results for which, (rate, cost) in million_costs(r.docset).items()]
    rows += [[f"{r.docset.label}, 1M more, max_wal_size {name}", f"{rate:,.0f}",
              *per_row_io(cost)] for r in results for name, (rate, cost) in r.wal_sizes.items()]
    print_table(["COPY", *IO_COLUMNS], rows, "<>>>>>")
    summary: list[list[str]] = []
    for r in results:
        d = r.docset
        for k in RADII:
            limit, speedup = TARGETS.get((d.rows, k), (None, None))
            ratio = r.scan_p50[k] / r.p50[k]
            met = None
            if limit is not None:
                met = r.p50[k] <= limit and (speedup is None or ratio >= speedup)
            target = "-" if limit is None else f"<= {limit:g} ms" + (
                f", >= {speedup:g}x" if speedup else "")
            summary.append([f"index search k={k}, {d.label}, p50 ms", ms(r.p50[k]),
                            f"{ms(r.scan_p50[k])} (hamming() scan)", times(ratio), target,
                            yes_no(met)])
        assert d.loaded is not None
        per = d.loaded.per_doc(d.rows)
        summary.append([f"index storage, {d.label}, bytes/doc as loaded", f"{per:.1f}", "-",
                        "-", f"<= {TARGET_INDEX_BYTES:g} at >= 1M",
                        yes_no(per <= TARGET_INDEX_BYTES) if d.rows >= 1_000_000 else "-"])
        first, last = d.million_rate(0), d.million_rate(-1)
        if first and last and len(d.million_seconds) > 1:
            summary.append([f"COPY into {d.label}, last million, rows/s", f"{last:,.0f}",
                            f"{first:,.0f} (first million)", f"{last / first:.2f}",
                            f">= {TARGET_LOAD_RATIO:g}", yes_no(last / first >= TARGET_LOAD_RATIO)])
    for r in results:
        first = r.docset.million_rate(0)
        for name, (rate, _) in r.wal_sizes.items():
            summary.append([f"COPY into {r.docset.label} (1M more), max_wal_size {name}, rows/s",
                            f"{rate:,.0f}", f"{first:,.0f} (first million)" if first else "-",
                            f"{rate / first:.2f}" if first else "-", "-", "-"])
        if r.loader:
            empty, full = r.loader["empty"], r.loader["full"]
            summary.append([f"nearsim-load into {r.docset.label}"
                            f" ({count_rows(LOADER_DOCUMENTS)} more), rows/s",
                            f"{full:,.0f}", f"{empty:,.0f} (into an empty table)",
                            f"{full / empty:.2f}", f">= {TARGET_LOAD_RATIO:g}",
                            yes_no(full / empty >= TARGET_LOAD_RATIO)])
        for n in r.nearest:
            summary.append([f"nearsim_nearest n={n}, {r.docset.label}, p50 ms",
                            ms(r.nearest[n]), f"{ms(r.nearest_scan[n])} (ORDER BY scan)",
                            times(r.nearest_scan[n] / r.nearest[n]), "-", "-"])
            limit = TARGET_NEAREST.get((r.docset.rows, n))
            summary.append([f"ORDER BY hamming() LIMIT {n}, {r.docset.label} (n-th row"
                            f" {r.nearest_distance[n]:.1f} bits away on average), p50 ms",
                            ms(r.nearest_literal[n]), f"{ms(r.nearest_scan[n])} (ORDER BY scan)",
                            times(r.nearest_scan[n] / r.nearest_literal[n]),
                            "-" if limit is None else f"<= {limit:g} ms",
                            "-" if limit is None else yes_no(r.nearest_literal[n] <= limit)])
        if r.join is not None:
            seconds_joined, pairs_joined = r.join
            limit = TARGET_JOIN_SECONDS if r.docset.rows >= 10_000_000 else None
            summary.append([f"JOIN of {JOIN_ROWS:,} new documents ON hamming() <= {JOIN_DISTANCE},"
                            f" {r.docset.label} ({pairs_joined:,} pairs), s",
                            f"{seconds_joined:.2f}", "-", "-",
                            "-" if limit is None else f"<= {limit:g} s",
                            "-" if limit is None else yes_no(seconds_joined <= limit)])
        if r.batch_check is not None and r.join is not None:
            seconds_checked, near_checked = r.batch_check
            rate, join_rate = BATCH_ROWS / seconds_checked, JOIN_ROWS / r.join[0]
            limit_rate = TARGET_BATCH_RATE if r.docset.rows >= 10_000_000 else None
            summary.append([f"nearsim_check_batch of {BATCH_ROWS:,} new documents, k ="
                            f" {JOIN_DISTANCE}, {r.docset.label} ({near_checked:,} near),"
                            " documents/s", f"{rate:,.0f}",
                            f"{join_rate:,.0f} (the JOIN, one search a document)",
                            f"{rate / join_rate:.1f}",
                            "-" if limit_rate is None else f">= {limit_rate:,.0f}",
                            "-" if limit_rate is None else yes_no(rate >= limit_rate)])
        if r.insert_select:
            plain_rate, enabled_rate = r.insert_select["plain"], r.insert_select["enabled"]
            limit_ratio = TARGET_INSERT_SELECT_RATIO if r.docset.rows >= 10_000_000 else None
            summary.append([f"INSERT ... SELECT of {count_rows(INSERT_SELECT_ROWS)} more,"
                            f" {r.docset.label}, rows/s", f"{enabled_rate:,.0f}",
                            f"{plain_rate:,.0f} (plain table)",
                            f"{plain_rate / enabled_rate:.2f}x time",
                            "-" if limit_ratio is None else f"<= {limit_ratio:g}x time",
                            "-" if limit_ratio is None else
                            yes_no(plain_rate / enabled_rate <= limit_ratio)])
        if r.inserts:
            plain, guarded = r.inserts["plain"], r.inserts["guarded"]
            limit_guard = TARGET_GUARD_RATIO if r.docset.rows >= 10_000_000 else None
            summary.append([f"single-row INSERTs, guard k={GUARD_DISTANCE}, {r.docset.label},"
                            " rows/s", f"{guarded:,.0f}", f"{plain:,.0f} (no guard)",
                            f"{guarded / plain:.2f}",
                            "-" if limit_guard is None else f">= {limit_guard:g}",
                            "-" if limit_guard is None else yes_no(guarded / plain >= limit_guard)])
    if fresh is not None:
        first_ms, second_ms = percentile_ms(fresh[0], 50), percentile_ms(fresh[1], 50)
        summary.append([f"first search of a new connection k=6 (x{len(fresh[0])}), p50 ms",
                        ms(first_ms), f"{ms(second_ms)} (its second search)",
                        times(first_ms / second_ms), f"<= {TARGET_FRESH_MS:g} ms",
                        yes_no(first_ms <= TARGET_FRESH_MS)])
    print()
    print_table(["measurement", "value", "baseline", "ratio", "target", "met?"], summary,
                "<>>>><")
    missed = sum(row[5] == "no" for row in summary)
    print(f"\n   {missed} of {sum(row[5] != '-' for row in summary)} targets missed;"
          f" total time {seconds:.0f} s")
    if results_file:
        data: dict[str, Any] = {
            "nearsim": nearsim.__version__, "postgresql": version, "cpu": cpu_model(),
            "cores": os.cpu_count(), "python": platform.python_version(),
            "seconds": round(seconds, 1), "summary": summary,
            "sets": [{"set": r.docset.label, "documents": r.docset.rows,
                      "p50_ms": r.p50, "p95_ms": r.p95, "scan_p50_ms": r.scan_p50,
                      "nearest_p50_ms": r.nearest, "nearest_scan_p50_ms": r.nearest_scan,
                      "nearest_literal_p50_ms": r.nearest_literal,
                      "nearest_nth_distance": r.nearest_distance,
                      "join_seconds_pairs": r.join,
                      "batch_check_seconds_near": r.batch_check,
                      "inserts_per_second": r.inserts,
                      "insert_select_rows_per_second": r.insert_select,
                      "loader_rows_per_second": r.loader,
                      "copy_million_seconds": list(r.docset.million_seconds),
                      "copy_million_io": {which: per_row_io_dict(cost) for which, (_, cost)
                                          in million_costs(r.docset).items()},
                      "max_wal_size": {name: {"rows_per_second": rate, **per_row_io_dict(cost)}
                                       for name, (rate, cost) in r.wal_sizes.items()},
                      "loaded_bytes_per_doc": r.docset.loaded.per_doc(r.docset.rows)
                      if r.docset.loaded else None,
                      "built_bytes_per_doc": r.docset.reindexed.per_doc(r.docset.rows)
                      if r.docset.reindexed else None} for r in results],
            "fresh_connection_ms": None if fresh is None else {
                "first": [s * 1000 for s in fresh[0]], "second": [s * 1000 for s in fresh[1]],
                "first_median": statistics.median(fresh[0]) * 1000},
        }
        with open(results_file, "w", encoding="utf-8") as file:
            json.dump(data, file, indent=1)
            file.write("\n")
        print(f"   results written to {results_file}")
    return 0


if __name__ == "__main__":
    sys.exit(run_main(main))
