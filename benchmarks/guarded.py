"""Single-row INSERTs with and without a check-in guard, by number of bands (``make bench-guard``).

A documents table of 10 million random 64-bit fingerprints, and one of the
text-like set (:mod:`benchmarks.docsets`), each enabled empty and filled by
COPY as ``make bench-10m`` fills them, once with 3 bands (the default) and
once with 4. On each, new rows are inserted one per statement without a
guard and then with ``nearsim_guard(tbl, max_distance => 3)``, by turns, in
the two ways a writer sends them:

- in one transaction: a PL/pgSQL loop of INSERT statements, as ``make
  bench-10m`` times them. Unguarded, the rows' index entries wait in memory
  and go into the indexes in key order at commit; guarded, each row's search
  first puts in those of the row before, and reads the index;
- each in its own transaction: the client sends a prepared INSERT on an
  autocommit connection, so every row commits, round trip included.

The new rows' fingerprints are random: two random() calls give 64 bits (one
has 52, which would leave the low bits of every row the same). Each turn
gives a ratio, guarded rows/s to unguarded; the report takes the median of
the turns. Target at 10 million: at least 0.5.

With 3 bands a guard within 3 bits reads one band within 1 bit of the new
row's first bits of that band (a key range for each of the 22 values) and
the two others exactly; with 4 bands every band is read exactly, one key
range each (docs/GUIDE.md, The check-in guard).
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import statistics
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from psycopg import sql

import nearsim

from .common import (
    BenchError,
    Connection,
    connect,
    count_rows,
    cpu_model,
    drop_schema,
    load_average,
    prepare_session,
    print_table,
    run_main,
    wrap,
)
from .docsets import (
    SEED,
    TEXT_LIKE,
    UNIFORM,
    DocSet,
    RealFingerprints,
    check_rotation_index_api,
    drop_docset,
    make_docset,
    random_fingerprints,
    shared_buffers,
    text_like_fingerprints,
)

GUARD_INSERTS = 2000  # rows of each measurement
GUARD_DISTANCE = 3
TARGET_GUARD_RATIO = 0.5  # guarded single-row INSERTs against unguarded ones, at 10 million
TARGET_ROWS = 10_000_000
ROWS = 10_000_000
BANDS = (3, 4)
TURNS = 3

ONE_TRANSACTION = "one transaction"
EACH_COMMITTED = "a transaction each"
MODES = (ONE_TRANSACTION, EACH_COMMITTED)

# 64 random bits from two random() calls (one gives 52)
RANDOM_FINGERPRINT = ("(pg_catalog.floor(pg_catalog.random() * 4294967296)::bigint << 32)"
                      " # pg_catalog.floor(pg_catalog.random() * 4294967296)::bigint")


def insert_rate(conn: Connection, docset: DocSet, first_id: int, rows: int, mode: str) -> float:
    """Rows/s of ``rows`` single-row INSERTs of ids from ``first_id``, sent as ``mode`` says."""
    started = time.perf_counter()
    if mode == ONE_TRANSACTION:
        conn.execute(sql.SQL(
            "DO $$BEGIN FOR i IN 0..{last} LOOP INSERT INTO {table} (id, body, si) VALUES"
            " ({first} + i, 'guarded ' || ({first} + i), {fingerprint}); END LOOP; END$$"
        ).format(last=sql.Literal(rows - 1), table=docset.table, first=sql.Literal(first_id),
                 fingerprint=sql.SQL(RANDOM_FINGERPRINT)))  # fmt: skip
    else:
        statement = sql.SQL("INSERT INTO {} (id, body, si) VALUES (%s, 'guarded ' || %s::text,"
                            " {})").format(docset.table, sql.SQL(RANDOM_FINGERPRINT))
        with conn.cursor() as cursor:
            for row_id in range(first_id, first_id + rows):
                cursor.execute(statement, (row_id, row_id), prepare=True)
    return rows / (time.perf_counter() - started)


def guard_rates(conn: Connection, docset: DocSet, first_id: int, mode: str = ONE_TRANSACTION,
                rows: int = GUARD_INSERTS) -> tuple[float, float]:  # fmt: skip
    """Rows/s of single-row INSERTs into an autocommit connection's table without a
    guard, then with one within GUARD_DISTANCE bits (removed afterwards); ids from
    ``first_id`` on, 2 * ``rows`` of them."""
    if not conn.autocommit:
        raise BenchError("the guard's INSERTs need an autocommit connection")
    plain = insert_rate(conn, docset, first_id, rows, mode)
    conn.execute("SELECT nearsim_guard(%s::regclass, max_distance => %s)",
                 (docset.qualified, GUARD_DISTANCE))
    try:
        guarded = insert_rate(conn, docset, first_id + rows, rows, mode)
    finally:
        conn.execute("SELECT nearsim_unguard(%s::regclass)", (docset.qualified,))
    return plain, guarded


@dataclass
class GuardResult:
    """The turns of one table: mode -> [(unguarded, guarded) rows/s, ...]."""

    label: str
    kind: str
    rows: int
    bands: int
    turns: dict[str, list[tuple[float, float]]] = field(default_factory=dict)
    load: float | None = None  # the machine's load average when its turns ended

    def median(self, mode: str) -> tuple[float, float, float]:
        """Median unguarded and guarded rows/s, and the median of the turns' ratios."""
        turns = self.turns[mode]
        return (statistics.median(p for p, _ in turns), statistics.median(g for _, g in turns),
                statistics.median(g / p for p, g in turns))


def measure(conn: Connection, docset: DocSet, turns: int, rows: int) -> GuardResult:
    result = GuardResult(docset.label, docset.kind, docset.rows, docset.bands)
    next_id = docset.rows + 1
    for _ in range(turns):
        for mode in MODES:
            result.turns.setdefault(mode, []).append(guard_rates(conn, docset, next_id, mode, rows))
            next_id += 2 * rows
    result.load = load_average()
    return result


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.guarded", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dsn", default=os.environ.get("NEARSIM_DSN"))
    parser.add_argument("--rows", type=int, default=ROWS, help="documents in each table")
    parser.add_argument("--bands", type=int, nargs="+", default=list(BANDS), metavar="N")
    parser.add_argument("--sets", nargs="+", default=[UNIFORM, TEXT_LIKE],
                        choices=[UNIFORM, TEXT_LIKE])
    parser.add_argument("--turns", type=int, default=TURNS)
    parser.add_argument("--inserts", type=int, default=GUARD_INSERTS,
                        help="rows of each measurement")
    parser.add_argument("--results", metavar="FILE")
    args = parser.parse_args(argv)
    if not args.dsn:
        parser.error("--dsn (or NEARSIM_DSN) is required")
    if args.rows < 1000 or args.turns < 1 or args.inserts < 1:
        parser.error("--rows must be at least 1000, --turns and --inserts at least 1")
    if any(not 3 <= b <= 16 for b in args.bands):
        parser.error("--bands must be 3 to 16")
    try:
        return run(args.dsn, args.rows, args.bands, args.sets, args.turns, args.inserts,
                   args.results)
    except BenchError as error:
        print(f"benchmarks.guarded: {error}", file=sys.stderr)
        return error.status


def run(dsn: str, rows: int, bands: Sequence[int], sets: Sequence[str], turns: int,
        inserts: int, results_file: str | None) -> int:
    started = time.perf_counter()
    conn = connect(dsn)
    schema = f"nearsim_guarded_{os.getpid()}_{secrets.token_hex(3)}"
    results: list[GuardResult] = []
    with conn:
        version = prepare_session(conn)
        check_rotation_index_api(conn)
        print(f"single-row INSERTs with and without a guard within {GUARD_DISTANCE} bits:"
              f" {count_rows(rows)} documents, {', '.join(map(str, bands))} bands; {turns}"
              f" turns of {inserts:,} rows each way")
        print(f"   nearsim {nearsim.__version__}; PostgreSQL {version}; {cpu_model()},"
              f" {os.cpu_count()} cores; shared_buffers {shared_buffers(conn)}")
        conn.execute(sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(schema)))
        try:
            rng = np.random.default_rng(SEED)
            for kind in sets:
                if kind == UNIFORM:
                    fingerprints, described = random_fingerprints(rng, rows), "random 64-bit values"
                else:
                    from .throughput import kjv_corpora  # its corpus only for this set

                    fingerprints, described = text_like_fingerprints(
                        rng, rows, RealFingerprints(kjv_corpora()[0]))
                for count in bands:
                    docset = make_docset(conn, schema, kind, fingerprints, fingerprints[:0],
                                         described, count)
                    results.append(measure(conn, docset, turns, inserts))
                    print(f"   {docset.label}: " + "; ".join(
                        f"{mode} {results[-1].median(mode)[2]:.2f}" for mode in MODES),
                        flush=True)  # fmt: skip
                    drop_docset(conn, docset)
        finally:
            drop_schema(conn, schema)
        buffers = shared_buffers(conn)
    report(results, time.perf_counter() - started, version, buffers, rows, turns, inserts,
           results_file)
    return 0


def summary_rows(document: dict[str, Any]) -> list[list[str]]:
    """Each table's medians, one row a way of sending the INSERTs, as the summaries of
    the other benchmarks: measurement, value, baseline, ratio, target, met."""
    rows = []
    for t in document["tables"]:
        result = GuardResult(t["label"], t["kind"], t["rows"], t["bands"],
                             {mode: [tuple(turn) for turn in turns]
                              for mode, turns in t["turns"].items()})
        for mode in MODES:
            plain, guarded, ratio = result.median(mode)
            target = result.rows >= TARGET_ROWS
            rows.append([f"single-row INSERTs, {mode}, guard k={document['guard_distance']},"
                         f" {result.label}, rows/s", f"{guarded:,.0f}",
                         f"{plain:,.0f} (no guard)", f"{ratio:.2f}",
                         f">= {TARGET_GUARD_RATIO:g}" if target else "-",
                         ("yes" if ratio >= TARGET_GUARD_RATIO else "no") if target else "-"])
    return rows


def guard_section(document: dict[str, Any] | None) -> str:
    """The section of docs/BENCHMARKS.md, from ``guard.json``."""
    if document is None:
        return "No results of `make bench-guard` (benchmarks/guarded.py) next to this run."
    from .docs import table  # docs imports this module

    rows = [[r[0].removeprefix("single-row INSERTs, ").removesuffix(", rows/s"), r[1],
             r[2].removesuffix(" (no guard)"), *r[3:]] for r in document["summary"]]
    return f"""Written by `make bench-guard` (`python -m benchmarks.guarded`,
{document["seconds"]:.0f} s): nearsim {document["nearsim"]}, PostgreSQL {document["postgresql"]};
{document["cpu"]}, {document["cores"]} cores, shared_buffers {document["shared_buffers"]}. Each
table holds {count_rows(document["rows"])} documents, enabled empty and filled by COPY as in
`make bench-10m`; new rows are then inserted one per statement without a guard and with
`nearsim_guard(tbl, max_distance => {document["guard_distance"]})`, by turns
({document["turns"]} turns of {document["inserts"]:,} rows each way), in one transaction (a
PL/pgSQL loop, as `make bench-10m` times them) and each in its own transaction (a prepared
INSERT sent by the client on an autocommit connection: round trip and commit included).
Medians of the turns; the ratio is the median of each turn's own ratio.

{table(["measurement", "guarded rows/s", "no guard rows/s", "guarded / no guard",
        "target", "met?"], rows)}

{busy(document["tables"])}

With 3 bands a guard within 3 bits reads one band within 1 bit of the new row (a key range
for each of the 22 values of its first bits, most on a leaf page of their own) and the two
others exactly; with 4 bands every band is read exactly, one key range each. Without a
guard a transaction's index entries wait in memory and go into the indexes at commit, in key
order; a guard puts each row's entries in before the next row's search. Each committed on
its own, a row pays its commit and its round trip either way."""


def busy(tables: Sequence[dict[str, Any]]) -> str:
    """How busy the machine was: the load average as each table's turns ended."""
    loads = [(t["label"], t.get("load")) for t in tables]
    if all(load is None for _, load in loads):
        return "The machine's load average was not recorded."
    return ("The machine's load average (one minute) as each table's turns ended: "
            + ", ".join(f"{label} {'?' if load is None else f'{load:.1f}'}"
                        for label, load in loads)
            + " (2 cores: above 2, other work ran meanwhile).")


def report(results: Sequence[GuardResult], seconds: float, version: str, buffers: str,
           rows: int, turns: int, inserts: int, results_file: str | None) -> None:
    document: dict[str, Any] = {
        "nearsim": nearsim.__version__, "postgresql": version, "cpu": cpu_model(),
        "cores": os.cpu_count(), "shared_buffers": buffers, "seconds": seconds, "rows": rows,
        "turns": turns, "inserts": inserts, "guard_distance": GUARD_DISTANCE,
        "tables": [{"label": r.label, "kind": r.kind, "rows": r.rows, "bands": r.bands,
                    "turns": r.turns, "load": r.load} for r in results],
    }
    document["summary"] = summary_rows(document)
    print()
    print_table(["measurement", "value", "baseline", "ratio", "target", "met?"],
                document["summary"], "<>>>><")
    wrap(f"Medians of {turns} turns ({seconds:.0f} s in all). The ratio is the median of each"
         " turn's own ratio.")
    if results_file:
        with open(results_file, "w", encoding="utf-8") as out:
            json.dump(document, out, indent=1)


if __name__ == "__main__":
    sys.exit(run_main(main))
