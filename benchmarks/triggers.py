"""Section 8 of the benchmarks: writes into an enabled table against a plain one.

Two tables with fingerprints supplied: a plain one, and one enabled with
``nearsim_enable`` (its fingerprint trigger keeps the supplied values,
PostgreSQL keeps its rotation indexes).  On each: a bulk ``INSERT ...
SELECT``, single-row inserts and updates (in a plpgsql loop, so that the
client's round trip per statement does not drown the difference) and a bulk
``DELETE``; ``nearsim_verify`` checks the index after each round.  Best of
a few rounds, each on new tables.
"""

from __future__ import annotations

import argparse
import math
import os
import statistics
import sys
import time
from dataclasses import replace

import numpy as np
from psycopg import sql

from nearsim.core.bands import default_bands

from .common import (
    BenchError,
    Connection,
    best_of,
    print_table,
    run_main,
    scratch_schema,
    times,
    wrap,
)
from .docsets import FULL_PLAN, SEED, IndexPlan, random_fingerprints

TRIGGER_KINDS = ("plain table", "enabled (nearsim)")


def trigger_table(conn: Connection, schema: str, kind: str, rows: int) -> sql.Identifier:
    name = {"plain table": "plain", "enabled (nearsim)": "enabled"}[kind]
    table = sql.Identifier(schema, f"writes_{name}")
    conn.execute(sql.SQL("DROP TABLE IF EXISTS {}").format(table))
    conn.execute(sql.SQL("CREATE TABLE {} (id bigint PRIMARY KEY, body text, si bigint)"
                         " WITH (autovacuum_enabled = off)").format(table))
    if kind != "plain table":
        conn.execute("SELECT nearsim_enable(%s::regclass, 'body', bands => %s)",
                     (table.as_string(conn), default_bands(rows)))
        # The session declares the supplied fingerprints the profile's, as the
        # loader does (common.connect: SET nearsim.profile).
    return table


SINGLE_ROW_SOURCES = {"single inserts": "writes_inserts", "single updates": "writes_updates"}


def trigger_round(conn: Connection, schema: str, kind: str, rows: int, statements: int,
                  source: sql.Identifier) -> dict[str, float]:
    """Seconds of each write on a fresh table of ``kind``; checks the index after."""
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
            "SELECT documents, indexed, missing, extra, wrong FROM nearsim_verify(%s::regclass)",
            (table.as_string(conn),),
        ).fetchone()
        if row is None or row[0] != statements or row[1] != statements or any(row[2:]):
            raise BenchError(f"{kind}: after the writes, nearsim_verify says (documents,"
                             f" indexed, missing, extra, wrong) = {row}, expected"
                             f" ({statements}, {statements}, 0, 0, 0)")
        conn.execute("SELECT nearsim_disable(%s::regclass)", (table.as_string(conn),))
    conn.execute(sql.SQL("DROP TABLE {}").format(table))
    return seconds


def trigger_writes(conn: Connection, schema: str, plan: IndexPlan) -> dict[str, dict[str, float]]:
    rows, statements, repeat = plan.trigger_rows, plan.trigger_statements, plan.trigger_repeat
    print("\n8. Writes: an enabled table against a plain one\n")
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
        "Two tables (id bigint PRIMARY KEY, body text, si bigint), fingerprints supplied by"
        " the client and declared (SET nearsim.profile, as nearsim-load does): a plain table,"
        " and one enabled with nearsim_enable (a BEFORE ROW trigger whose WHEN clause lets"
        " declared fingerprints through without a call, and the rotation indexes, one btree"
        " per band, kept by PostgreSQL). On each, in order: INSERT ... SELECT of"
        f" {rows:,} rows from a staging table (one statement); {statements:,} single-row"
        f" INSERTs of new keys; {statements:,} single-row UPDATEs of the fingerprint of random"
        f" rows; DELETE of the {rows:,} first rows (one statement). The single-row statements"
        " run in a plpgsql loop over a staging table in one DO statement, so that a client's"
        f" round trip per statement ({round_trip * 1000:.3f} ms here for SELECT 1) does not"
        " count. The index is checked with nearsim_verify afterwards. Best of"
        f" {repeat} rounds, each on a new table, the kinds alternating; client wall clock"
        " including the commit."
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
    plain, enabled = (best[kind] for kind in TRIGGER_KINDS)
    table = []
    for operation, count in counts.items():
        table.append([
            labels[operation], f"{count / plain[operation]:,.0f}",
            f"{count / enabled[operation]:,.0f}",
            times(enabled[operation] / plain[operation]),
        ])
    print()
    print_table(["operation", "plain rows/s", "enabled rows/s", "enabled/plain time"],
                table, "<>>>")
    return best


def main() -> None:
    parser = argparse.ArgumentParser(
        description="Section 8 of make bench alone: writes into an enabled table against a"
        " plain one, in a scratch schema")
    parser.add_argument("--dsn", default=os.environ.get("NEARSIM_DSN"),
                        help="libpq connection string (default: $NEARSIM_DSN)")
    parser.add_argument("--rows", type=int, default=FULL_PLAN.trigger_rows,
                        help="rows of the INSERT ... SELECT and the DELETE"
                        f" (default: {FULL_PLAN.trigger_rows:,})")
    parser.add_argument("--statements", type=int, default=FULL_PLAN.trigger_statements,
                        help="single-row INSERTs and UPDATEs"
                        f" (default: {FULL_PLAN.trigger_statements:,})")
    parser.add_argument("--repeat", type=int, default=FULL_PLAN.trigger_repeat,
                        help=f"rounds, the best counts (default: {FULL_PLAN.trigger_repeat})")
    args = parser.parse_args()
    if not args.dsn:
        parser.error("no database: pass --dsn or set NEARSIM_DSN")
    if min(args.rows, args.statements, args.repeat) < 1:
        parser.error("--rows, --statements and --repeat must be at least 1")
    plan = replace(FULL_PLAN, trigger_rows=args.rows, trigger_statements=args.statements,
                   trigger_repeat=args.repeat)
    with scratch_schema(args.dsn) as (conn, schema):
        # the fingerprints are made up: declared the profile's, as common.connect does
        conn.execute("SET nearsim.profile = 'default/1'")
        trigger_writes(conn, schema, plan)


if __name__ == "__main__":
    sys.exit(run_main(main))
