"""nearsim benchmarks: fingerprint throughput, Hamming-radius scans and the rotation index.

    .venv/bin/python -m benchmarks.run --dsn "host=... dbname=nearsim" [--quick]

Measures, in one run (each section is a module of this package):

1. ``simhash(text)`` in the database on the King James Bible (MB/s, one backend);
2. ``nearsim.simhash`` in this Python process on the same texts (MB/s, one core)
   (1 and 2: throughput.py);
3. a sequential scan of random fingerprints with the C ``hamming()`` against the
   same filter in pure SQL, ``bit_count((a # b)::bit(64))`` (scan.py);
4. search latency through the rotation index (``<prefix>_similar``) against both
   scans, on uniform and text-like fingerprints, every answer cross-checked
   (search.py, on the document sets of docsets.py);
5. band layouts (3 to 6 bands): latency, storage and plans (layouts.py);
6. all pairs (``nearsim_pairs``, next to ``nearsim_clusters``) (allpairs.py);
7. index storage per document (docsets.py);
8. writes into an enabled table against a plain one
   (triggers.py);
9. ``nearsim-load`` on a corpus of text files (105 MB; --quick: 3 MB) against a
   plain ``COPY`` of the same texts (loading.py);
10. the peers: signature building against datasketch's MinHash and pg_trgm's
    index, similar-text lookups against pg_trgm, pgvector where available
    (peers.py);

then prints a summary table against the seed paper's Java (3.3 MB/s) and the
project's targets, and with ``--results FILE`` writes every number as JSON
(``python -m benchmarks.docs`` turns it into docs/BENCHMARKS.md).  Every table
lives in a scratch schema that is dropped at the end.  Missed targets do not
change the exit status; errors do (1), and so does a database that cannot be
reached (2).  benchmarks/README.md explains each measurement; docs/BENCHMARKS.md
shows the numbers of the last full run.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import secrets
import sys
import time
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

import numpy as np
import psycopg
from psycopg import sql

import nearsim
from nearsim.client.output import one_line
from nearsim.client.samples import kjv_chapters
from nearsim.core.registry import EXTENSION_SCHEMA_QUERY, REGISTRY

from . import loading, peers
from .allpairs import TARGET_PAIRS_SECONDS, PairsResult, all_pairs
from .common import (
    MB,
    PREPARE_WHEN_ASKED,
    BenchError,
    Connection,
    Corpus,
    Row,
    connect,
    count_rows,
    cpu_model,
    ms,
    prepare_session,
    print_table,
    run_main,
    times,
    yes_no,
)
from .docsets import (
    FULL_PLAN,
    QUICK_PLAN,
    TARGET_INDEX_BYTES,
    TARGET_ROWS,
    UNIFORM,
    DocSet,
    IndexPlan,
    check_rotation_index_api,
    index_storage_table,
)
from .layouts import band_layouts
from .scan import RADIUS, TARGET_SPEEDUP, ScanResult, hamming_scan
from .search import CUSTOM, GENERIC, HAMMING, TARGET_SEARCH_SPEEDUP, SearchResult, search_latency
from .throughput import (
    SEED_JAVA_MBPS,
    TARGET_MBPS,
    client_simhash,
    database_simhash,
    read_corpora,
)
from .triggers import TRIGGER_KINDS, trigger_writes

FULL_ROWS = 1_000_000
FULL_REPEAT = 5
QUICK_ROWS = 100_000
QUICK_REPEAT = 2


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


def index_summary(searches: Sequence[SearchResult], pairs: Sequence[PairsResult],
                   sets: Sequence[DocSet], writes: dict[str, dict[str, float]],
                   plan: IndexPlan) -> list[Row]:
    rows = []
    largest = max(plan.sizes)
    target_n = count_rows(TARGET_ROWS)
    for r in searches:
        if r.docset.rows != largest or r.k != 6:
            continue
        scan = r.p50(HAMMING)
        for name, plan_kind in ((GENERIC, "generic"), (CUSTOM, "custom")):
            searched = r.p50(name)
            rows.append(Row(
                f"index search k=6, {r.docset.label}, {plan_kind} plan, p50 ms",
                ms(searched), f"{ms(scan)} (hamming() scan)", f"{times(scan / searched)} faster",
                f">= {TARGET_SEARCH_SPEEDUP:g}x at {target_n}",
                yes_no(scan / searched >= TARGET_SEARCH_SPEEDUP) if largest == TARGET_ROWS
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
            f"index storage, {d.label}, bytes/doc as loaded",
            f"{loaded:.1f}", f"{built:.1f} (built)", f"{loaded / built:.2f}x",
            f"<= {TARGET_INDEX_BYTES:g} at >= 100k",
            yes_no(max(loaded, built) <= TARGET_INDEX_BYTES) if d.rows >= 100_000 else "-",
        ))
    plain, enabled = writes[TRIGGER_KINDS[0]], writes[TRIGGER_KINDS[1]]
    counts = {"insert": plan.trigger_rows, "single inserts": plan.trigger_statements,
              "single updates": plan.trigger_statements, "delete": plan.trigger_rows}
    labels = {"insert": f"INSERT ... SELECT of {plan.trigger_rows:,}",
              "single inserts": "single-row INSERTs", "single updates": "single-row UPDATEs",
              "delete": f"DELETE of {plan.trigger_rows:,}"}
    for operation, count in counts.items():
        rows.append(Row(
            f"{labels[operation]}, enabled table, rows/s",
            f"{count / enabled[operation]:,.0f}",
            f"{count / plain[operation]:,.0f} (plain table)",
            f"{enabled[operation] / plain[operation]:.2f}x time", "none", "-",
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
    row = conn.execute(EXTENSION_SCHEMA_QUERY).fetchone()
    if row is None:
        return
    registry = sql.Identifier(row[0], REGISTRY)
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


def run(dsn: str, rows: int, repeat: int, quick: bool, plan: IndexPlan,
        results_file: str | None = None) -> None:
    started = time.perf_counter()
    conn = connect(dsn)
    schema = f"nearsim_bench_{os.getpid()}_{secrets.token_hex(3)}"
    with conn:
        version = prepare_session(conn)
        check_rotation_index_api(conn)
        mode = "quick run" if quick else "full run"
        print(f"nearsim benchmarks ({mode}: {rows:,} rows, best of {repeat}; rotation index with"
              f" {', '.join(f'{n:,}' for n in plan.sizes)} documents, {plan.queries:,} queries)")
        print(f"   nearsim {nearsim.__version__}, profile {nearsim.PROFILE}; PostgreSQL {version};"
              f" Python {platform.python_version()}")
        print(f"   {cpu_model()}, {os.cpu_count()} cores; scratch schema {schema} (dropped at"
              " the end)")
        conn.execute(sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(schema)))
        try:
            corpora = read_corpora(quick)
            db, reference = database_simhash(conn, schema, corpora, repeat)
            client = client_simhash(corpora, repeat)
            scan = hamming_scan(conn, schema, rows, repeat)
            # From here on, statements run with prepare=True are prepared on the
            # server (psycopg prepares nothing while the threshold is None).
            conn.prepare_threshold = PREPARE_WHEN_ASKED
            sets, searches = search_latency(conn, schema, plan, corpora[0])
            band_layouts(conn, schema, [d for d in sets if d.kind == UNIFORM])
            pairs = all_pairs(conn, sets, plan.pairs_timeout, searches)
            index_storage_table(sets)
            writes = trigger_writes(conn, schema, plan)
            loads, load_problems = loading.bulk_load(dsn, conn, schema, kjv_chapters(), quick)
            peer = peers.run(conn, schema, kjv_chapters(), quick)
        finally:
            try:
                disable_tables(conn, schema)
                conn.execute(sql.SQL("DROP SCHEMA {} CASCADE").format(sql.Identifier(schema)))
            except psycopg.Error as error:
                print(f"benchmarks.run: could not drop scratch schema {schema}: {one_line(error)}",
                      file=sys.stderr)

    print("\nSummary (MB = 10^6 bytes; one core each; ratio = value against the baseline)\n")
    table = (summary(db, client, scan, reference)
             + index_summary(searches, pairs, sets, writes, plan)
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
                        help="documents per table in the index sections (default:"
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
        print(f"benchmarks.run: {error}", file=sys.stderr)
        sys.exit(error.status)


if __name__ == "__main__":
    sys.exit(run_main(main))
