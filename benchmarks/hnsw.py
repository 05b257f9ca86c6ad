"""Exact nearest through the rotation index against pgvector's HNSW (``make bench-hnsw``).

The question both answer: the n nearest fingerprints of a query, n = 10.
nearsim answers ``ORDER BY hamming(si, q), id LIMIT 10`` through its
rotation index, exactly (every answer is checked against numpy here);
pgvector answers ``ORDER BY b <~> q LIMIT 10`` over the same fingerprints
as ``bit(64)`` through an HNSW index (``bit_hamming_ops``, its default build
parameters m = 16 and ef_construction = 64), approximately: its answers are
scored by recall, the share of its rows that are among the true 10 nearest
(a row at the distance of the true 10th counts: ties are interchangeable).
HNSW is measured at its default ``hnsw.ef_search`` (40), which the
target names, and at larger values, which buy recall with time.

Both on the uniform and the text-like sets of :mod:`benchmarks.docsets`
(1 million documents by default), in the same run, one backend, after
pg_prewarm of both indexes. The HNSW index is built with
``maintenance_work_mem`` raised for the build (pgvector's advice; the graph
then fits in memory) and PostgreSQL's default parallel maintenance workers;
its build time and size are reported beside the rotation index's.

pgvector is not a dependency of nearsim: build it from its source
(https://github.com/pgvector/pgvector, 0.8 or newer) against the server's
``pg_config`` and install it; without it this benchmark says so and stops
with exit status 2.

Usage: ``python -m benchmarks.hnsw --dsn DSN [--rows N] [--queries N] [--results FILE]``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import secrets
import statistics
import sys
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np
from psycopg import sql

import nearsim

from .common import (
    PREPARE_WHEN_ASKED,
    BenchError,
    Connection,
    connect,
    count_rows,
    cpu_model,
    percentile_ms,
    pgvector_version,
    prepare_session,
    prewarm_table,
    print_table,
    run_main,
    wrap,
)
from .docsets import DocSet, load_docsets, popcount, prewarm_search, shared_buffers
from .throughput import kjv_corpora

ROWS = 1_000_000
QUERIES = 100
WANTED = 10
EF_SEARCH = (40, 100, 400)  # 40: pgvector's default
BUILD_MEMORY_GB = 2  # at least: pgvector's advice for its build
# pgvector builds its graph in maintenance_work_mem, about 650 bytes a row here
# (m = 16); once the graph outgrows it, the build goes on page by page on disk,
# many times slower.  A kilobyte a row leaves room.
GRAPH_BYTES_PER_ROW = 1024
GOOD_RECALL = 0.95  # HNSW is also compared at the least ef_search that reaches it


def build_memory(rows: int) -> str:
    """maintenance_work_mem for building HNSW over ``rows`` rows: its graph fits in it."""
    return f"{max(BUILD_MEMORY_GB, -(-rows * GRAPH_BYTES_PER_ROW // 2**30))}GB"


@dataclass
class SetResult:
    label: str
    rows: int
    rotation_bytes: int
    hnsw_bytes: int
    hnsw_build_seconds: float
    nearsim_p50_ms: float
    nearsim_p90_ms: float
    # ef_search -> p50 ms, p90 ms, mean recall@WANTED
    hnsw: dict[int, tuple[float, float, float]] = field(default_factory=dict)


def exact_nearest(docset: DocSet, query: int) -> list[tuple[int, int]]:
    """(id, distance) of the WANTED nearest rows, by distance then id (numpy)."""
    distances = popcount(docset.fingerprints ^ np.int64(query)).astype(np.int64)
    order = np.lexsort((np.arange(1, docset.rows + 1), distances))[:WANTED]
    return [(int(i) + 1, int(distances[i])) for i in order]


def recall(found: Sequence[tuple[int, int]], exact: Sequence[tuple[int, int]]) -> float:
    """Share of the WANTED true nearest that an approximate answer holds (ties count)."""
    farthest = exact[-1][1]
    return min(sum(1 for _, distance in found if distance <= farthest), WANTED) / WANTED


def relation_bytes(conn: Connection, names: Sequence[str]) -> int:
    row = conn.execute("SELECT sum(pg_total_relation_size(r::regclass)) FROM unnest(%s::text[]) r",
                       [list(names)]).fetchone()
    return int(row[0]) if row and row[0] is not None else 0


def rotation_index_names(conn: Connection, docset: DocSet) -> list[str]:
    rows = conn.execute("SELECT indexrelid::regclass::text FROM pg_index i"
                        " WHERE indrelid = %s::regclass AND indexrelid <> ("
                        "  SELECT conindid FROM pg_constraint WHERE conrelid = i.indrelid"
                        "  AND contype = 'p')", [docset.qualified]).fetchall()
    return [r[0] for r in rows]


def time_set(conn: Connection, schema: str, docset: DocSet, queries: int) -> SetResult:
    bits = sql.Identifier(schema, f"{docset.name}_bits")
    index = sql.Identifier(f"{docset.name}_bits_hnsw")
    conn.execute(sql.SQL("CREATE TABLE {} AS SELECT id, si::bit(64) AS b FROM {}").format(
        bits, docset.table))
    conn.execute(sql.SQL("ANALYZE {}").format(bits))
    conn.execute("SELECT set_config('maintenance_work_mem', %s, false)",
                 [build_memory(docset.rows)])
    started = time.perf_counter()
    conn.execute(sql.SQL("CREATE INDEX {} ON {} USING hnsw (b bit_hamming_ops)").format(
        index, bits))
    build_seconds = time.perf_counter() - started
    conn.execute("RESET maintenance_work_mem")
    index_name = sql.Identifier(schema, f"{docset.name}_bits_hnsw").as_string(conn)
    prewarm_table(conn, schema, index_name)
    prewarm_search(conn, schema, docset)

    literal = sql.SQL("SELECT id, hamming(si, %s::bigint) FROM {} ORDER BY hamming(si, %s::bigint),"
                      " id LIMIT {}").format(docset.table, sql.Literal(WANTED))
    approximate = sql.SQL("SELECT id, bit_count(b # %s::bigint::bit(64))::int FROM {}"
                          " ORDER BY b <~> %s::bigint::bit(64) LIMIT {}").format(
        bits, sql.Literal(WANTED))
    chosen = docset.queries[:queries].tolist()
    plan = "\n".join(r[0] for r in conn.execute(sql.SQL("EXPLAIN ") + approximate,
                                                 (chosen[0], chosen[0])))
    if "hnsw" not in plan:
        raise BenchError(f"{docset.label}: the HNSW index is not used:\n{plan}")
    conn.execute(literal, (chosen[0], chosen[0]), prepare=True).fetchall()  # warm-up
    seconds: list[float] = []
    exact_answers = []
    for number, query in enumerate(chosen):
        started = time.perf_counter()
        got = [(int(i), int(d)) for i, d in conn.execute(literal, (query, query), prepare=True)]
        seconds.append(time.perf_counter() - started)
        exact = exact_nearest(docset, query)
        if got != exact:
            raise BenchError(f"{docset.label}: ORDER BY hamming() LIMIT {WANTED} differs from"
                             f" numpy for query {number}")
        exact_answers.append(exact)
    result = SetResult(docset.label, docset.rows,
                       relation_bytes(conn, rotation_index_names(conn, docset)),
                       relation_bytes(conn, [index_name]), build_seconds,
                       percentile_ms(seconds, 50), percentile_ms(seconds, 90))
    for ef_search in EF_SEARCH:
        conn.execute("SELECT set_config('hnsw.ef_search', %s, false)", [str(ef_search)])
        conn.execute(approximate, (chosen[0], chosen[0]), prepare=True).fetchall()
        seconds, recalls = [], []
        for query, exact in zip(chosen, exact_answers, strict=True):
            started = time.perf_counter()
            got = [(int(i), int(d)) for i, d in conn.execute(approximate, (query, query),
                                                             prepare=True)]
            seconds.append(time.perf_counter() - started)
            recalls.append(recall(got, exact))
        result.hnsw[ef_search] = (percentile_ms(seconds, 50), percentile_ms(seconds, 90),
                                  statistics.mean(recalls))
    conn.execute("RESET hnsw.ef_search")
    return result


def summary_rows(results: Sequence[SetResult]) -> list[list[str]]:
    """measurement, value, baseline, ratio, target, met: as the other summaries."""
    rows = []
    for r in results:
        hnsw_p50, _, hnsw_recall = r.hnsw[EF_SEARCH[0]]
        rows.append([f"ORDER BY hamming() LIMIT {WANTED}, {r.label} (exact), p50 ms",
                     f"{r.nearsim_p50_ms:.3g}",
                     f"{hnsw_p50:.3g} (pgvector HNSW, ef_search {EF_SEARCH[0]},"
                     f" recall {hnsw_recall:.3f})",
                     f"{hnsw_p50 / r.nearsim_p50_ms:.2g}x",
                     "faster than HNSW", "yes" if r.nearsim_p50_ms < hnsw_p50 else "no"])
        # the cheapest ef_search whose answers are nearly as good as the exact ones
        good = [ef for ef in EF_SEARCH if r.hnsw[ef][2] >= GOOD_RECALL]
        if good:
            p50, _, got = r.hnsw[good[0]]
            rows.append([f"ORDER BY hamming() LIMIT {WANTED}, {r.label} (exact), p50 ms",
                         f"{r.nearsim_p50_ms:.3g}",
                         f"{p50:.3g} (pgvector HNSW, ef_search {good[0]}, recall {got:.3f})",
                         f"{p50 / r.nearsim_p50_ms:.2g}x", "-", "-"])
    return rows


def hnsw_section(results: dict[str, Any] | None) -> str:
    """The section of docs/BENCHMARKS.md, from ``hnsw.json``."""
    if results is None:
        return "No results of `make bench-hnsw` (benchmarks/hnsw.py) next to this run."
    from .docs import table  # docs imports this module

    sets = []
    for s in results["sets"]:
        hnsw = {int(k): v for k, v in s["hnsw"].items()}
        sets.append([s["label"], f"{s['nearsim_p50_ms']:.3g} / {s['nearsim_p90_ms']:.3g}",
                     *(f"{hnsw[ef][0]:.3g} / {hnsw[ef][1]:.3g} ({hnsw[ef][2]:.3f})"
                       for ef in EF_SEARCH),
                     f"{s['rotation_bytes'] / s['rows']:.0f} / {s['hnsw_bytes'] / s['rows']:.0f}",
                     f"{s['hnsw_build_seconds']:.0f}"])
    header = ["set", "nearsim exact p50 / p90 ms",
              *(f"HNSW ef_search {ef} p50 / p90 ms (recall)" for ef in EF_SEARCH),
              "index bytes/doc, rotation / HNSW", "HNSW build s"]
    seconds = results["seconds"]
    return f"""Written by `make bench-hnsw` (`python -m benchmarks.hnsw`, {seconds:.0f} s),
{count_rows(results["rows"])} documents per set, {results["queries"]} queries, top {WANTED}:
nearsim's `ORDER BY hamming(si, q), id LIMIT {WANTED}` through the rotation index (exact, each
answer checked against numpy) and pgvector {results["pgvector"]}'s HNSW index
(`bit_hamming_ops`, m = 16, ef_construction = 64, built with maintenance_work_mem =
{build_memory(results["rows"])}) over the same fingerprints as `bit(64)`,
`ORDER BY b <~> q LIMIT {WANTED}`, in
the same run. Recall: the share of the true {WANTED} nearest in HNSW's answer (a row as near
as the true {WANTED}th counts). nearsim {results["nearsim"]}, PostgreSQL {results["postgresql"]};
{results["cpu"]}, {results["cores"]} cores.

{table(["measurement", "value", "baseline", "ratio", "target", "met?"], results["summary"])}

{table(header, sets)}"""


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.hnsw", description=__doc__)
    parser.add_argument("--dsn", default=os.environ.get("NEARSIM_DSN"), required=False)
    parser.add_argument("--rows", type=int, default=ROWS)
    parser.add_argument("--queries", type=int, default=QUERIES)
    parser.add_argument("--results", metavar="FILE")
    args = parser.parse_args(argv)
    if not args.dsn:
        parser.error("--dsn (or NEARSIM_DSN) is required")
    if args.rows < 1000 or args.queries < 1:
        parser.error("--rows must be at least 1000 and --queries at least 1")
    try:
        return run(args.dsn, args.rows, args.queries, args.results)
    except BenchError as error:
        print(f"benchmarks.hnsw: {error}", file=sys.stderr)
        return error.status


def run(dsn: str, rows: int, queries: int, results_file: str | None) -> int:
    started = time.perf_counter()
    conn = connect(dsn)
    schema = f"nearsim_hnsw_{os.getpid()}_{secrets.token_hex(3)}"
    with conn:
        version = prepare_session(conn)
        pgvector = pgvector_version(conn)
        print(f"exact nearest against pgvector {pgvector}'s HNSW: {count_rows(rows)} documents,"
              f" {queries} queries, top {WANTED}")
        print(f"   nearsim {nearsim.__version__}; PostgreSQL {version}; {cpu_model()},"
              f" {os.cpu_count()} cores; shared_buffers {shared_buffers(conn)}")
        conn.execute(sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(schema)))
        conn.prepare_threshold = PREPARE_WHEN_ASKED
        results: list[SetResult] = []
        try:
            sets, _ = load_docsets(conn, schema, [rows], queries, kjv_corpora()[0])
            for docset in sets:
                results.append(time_set(conn, schema, docset, queries))
        finally:
            conn.execute(sql.SQL("DROP SCHEMA {} CASCADE").format(sql.Identifier(schema)))
    print()
    wrap("nearsim: ORDER BY hamming(si, q), id LIMIT 10 through the rotation index, exact;"
         " HNSW: ORDER BY b <~> q LIMIT 10, p50 / p90 ms and mean recall@10.")
    print()
    print_table(["set", "nearsim p50 / p90", *(f"HNSW ef {ef}" for ef in EF_SEARCH),
                 "bytes/doc rotation / HNSW", "HNSW build s"],
                [[r.label, f"{r.nearsim_p50_ms:.3g} / {r.nearsim_p90_ms:.3g}",
                  *(f"{r.hnsw[ef][0]:.3g} / {r.hnsw[ef][1]:.3g} ({r.hnsw[ef][2]:.3f})"
                    for ef in EF_SEARCH),
                  f"{r.rotation_bytes / r.rows:.0f} / {r.hnsw_bytes / r.rows:.0f}",
                  f"{r.hnsw_build_seconds:.0f}"] for r in results], "<>>>>>>")
    summary = summary_rows(results)
    print()
    print_table(["measurement", "value", "baseline", "ratio", "target", "met?"], summary,
                "<>>><<")
    if results_file:
        payload = {"seconds": time.perf_counter() - started, "rows": rows, "queries": queries,
                   "nearsim": nearsim.__version__, "postgresql": version, "pgvector": pgvector,
                   "cpu": cpu_model(), "cores": os.cpu_count(), "python": platform.python_version(),
                   "summary": summary, "sets": [asdict(r) for r in results]}
        with open(results_file, "w", encoding="utf-8") as out:
            json.dump(payload, out, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(run_main(main))
