"""Verified search on a million documents, scored by the exact join (``make bench-verified-1m``).

    .venv/bin/python -m benchmarks.verified_million --dsn DSN [--documents N] [--lookups N]
        [--work-dir DIR] [--results FILE]

The first N documents of the evaluation corpus (the file of
benchmarks/corpusfile.py that ``make bench-minhash`` reads too) go into a
table as a user loads them: COPY, ``nearsim_enable``, ANALYZE.  The truth is
the exact join in C, ``nearsim_resemblance_pairs`` at S_R >= 0.5 (exact:
tests/server/test_verified.py checks it against brute force), timed, with the
backend's peak resident set above where it started (shared buffers it reads
included); only the pairs of the documents asked are sent to the client.
Then benchmarks/verified_lookups.py's lookups: the texts of ``--lookups``
documents drawn at random, each a prepared ``nearsim_similar_verified`` under a
statement_timeout, first with the candidates of the rotation index within the
calibrated radius, then with those of the sketch index (``CREATE INDEX ...
USING gin (nearsim_sketch(body))``).  Targets (issue: verified search fast
and complete at 1M): p50 <= 3 ms and p90 <= 10 ms at S_R 0.8 and 0.5, recall 1.0.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import json
import os
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import psycopg
from psycopg import sql

from .common import cpu_model, log, run_main, scratch_schema, timer
from .corpusfile import corpus_file
from .minhash import DEFAULT_WORK, load
from .scoring import THRESHOLDS
from .sketches import memory, reset_peak
from .truth import Truth
from .verified_lookups import (
    LOOKUP_BUDGET_SECONDS,
    LOOKUP_TIMEOUT_SECONDS,
    LOOKUPS,
    RADIUS_PATH,
    SKETCH_PATH,
    asked_positions,
    lookups,
    sketch_index,
)
from .verified_report import summary_rows

DOCUMENTS = 1_000_000
TABLE = "corpus"


def exact_join(conn: psycopg.Connection, qualified: str, documents: int,
               asked: Sequence[int]) -> tuple[Truth, dict[str, Any]]:  # fmt: skip
    """The pairs at S_R >= 0.5 of the asked documents, from the whole exact join: the
    truth, and the join's seconds, peak memory and pairs."""
    pid = conn.info.backend_pid
    reset = reset_peak(pid)
    before = memory(pid)
    query = ("SELECT a::integer, b::integer, similarity FROM"
             " nearsim_resemblance_pairs(%s::regclass, 'id', 'body', 'si', %s) p"
             " WHERE a::integer = ANY(%s) OR b::integer = ANY(%s)")
    keep = min(THRESHOLDS)
    with timer() as elapsed:
        rows = conn.execute(query, (qualified, keep, list(asked), list(asked))).fetchall()
    seconds = elapsed()
    after = memory(pid)
    first = np.array([r[0] for r in rows], dtype=np.int64)
    second = np.array([r[1] for r in rows], dtype=np.int64)
    s_r = np.array([r[2] for r in rows], dtype=np.float64)
    schema, table = qualified.split(".")
    shingles = conn.execute(sql.SQL("SELECT sum(nearsim_shingle_count(body)) FROM {}").format(
        sql.Identifier(schema, table))).fetchone()
    truth = Truth(documents=documents, first=first, second=second, s_r=s_r, keep=keep,
                  shared_pairs=0, buckets=[], shingles=0, seconds=seconds)
    peak = (after.get("VmHWM", 0) - before.get("VmRSS", 0)) if reset else None
    return truth, {"seconds": seconds, "asked_pairs": len(rows), "peak_bytes_above_start": peak,
                   "shingles": int(shingles[0] or 0) if shingles else 0}


def run(dsn: str, documents: int, count: int, work: Path, timeout: float = LOOKUP_TIMEOUT_SECONDS,
        budget: float = LOOKUP_BUDGET_SECONDS) -> dict[str, Any]:  # fmt: skip
    started = time.perf_counter()
    log(f"the corpus file of {documents:,} documents")
    corpus = corpus_file(work, documents, originals="small" if documents <= 1000 else "large")
    results: dict[str, Any] = {
        "started": time.strftime("%Y-%m-%d %H:%M:%S %z"), "documents": documents,
        "nearsim": importlib.metadata.version("nearsim"), "cpu": cpu_model(),
        "corpus_megabytes": corpus.megabytes,
    }  # fmt: skip
    with scratch_schema(dsn) as (conn, schema):
        row = conn.execute("SELECT current_setting('server_version'),"
                           " current_setting('shared_buffers'), current_setting('work_mem')"
                           ).fetchone()  # fmt: skip
        if row is not None:
            results["postgresql"], results["shared_buffers"], results["work_mem"] = row
        log(f"{documents:,} documents: COPY, nearsim_enable, ANALYZE")
        results["load"] = load(conn, schema, TABLE, corpus.path, documents)
        qualified = f"{schema}.{TABLE}"
        asked = asked_positions(documents, count)
        log("the exact join at S_R >= 0.5 (nearsim_resemblance_pairs)")
        truth, results["exact_join"] = exact_join(conn, qualified, documents, asked)
        join = results["exact_join"]
        log(f"  {join['seconds']:.1f} s, {join['asked_pairs']:,} pairs of the asked, peak"
            f" {(join['peak_bytes_above_start'] or 0) / 1e9:.2f} GB above the start")
        # Only the asked documents' texts come to the client.
        texts = dict(conn.execute(sql.SQL("SELECT id, body FROM {} WHERE id = ANY(%s)").format(
            sql.Identifier(schema, TABLE)), (asked,)).fetchall())
        results["lookups"] = lookups(conn, qualified, texts, truth, count, timeout, budget,
                                     RADIUS_PATH)
        results["sketch_index"] = sketch_index(conn, schema, TABLE, documents)
        results["lookups"] += lookups(conn, qualified, texts, truth, count, timeout, budget,
                                      SKETCH_PATH)
    results["summary"] = summary_rows({"sets": [], "lookups": results["lookups"]})
    results["seconds"] = time.perf_counter() - started
    return results


def verified_million_section(results: dict[str, Any] | None) -> str:
    """The section of docs/BENCHMARKS.md."""
    if results is None:
        return ("No results of `make bench-verified-1m` (benchmarks/verified_million.py) next"
                " to this run.")
    join = results["exact_join"]
    load_seconds = results["load"]["seconds"]
    peak = join["peak_bytes_above_start"]
    lines = [
        f"Written by `make bench-verified-1m` (`python -m benchmarks.verified_million`,"
        f" {results['seconds']:.0f} s, started {results['started']}): nearsim {results['nearsim']},"
        f" PostgreSQL {results.get('postgresql', '?')} (shared_buffers"
        f" {results.get('shared_buffers', '?')}, work_mem {results.get('work_mem', '?')});"
        f" {results['cpu']}. The first {results['documents']:,} documents of the evaluation"
        f" corpus ({results['corpus_megabytes']:,.0f} MB), loaded by COPY"
        f" {load_seconds.get('COPY', 0):.0f} s + nearsim_enable"
        f" {load_seconds.get('nearsim_enable', 0):.0f} s + ANALYZE"
        f" {load_seconds.get('ANALYZE', 0):.0f} s; benchmarks/verified_million.py says how each"
        " number is measured.",
        "",
        f"The truth, the exact join in C (`nearsim_resemblance_pairs`, S_R >= 0.5) over"
        f" {join['shingles']:,} distinct shingles of each text, of which the"
        f" {join['asked_pairs']:,} pairs of the documents asked are sent: {join['seconds']:.0f} s,"
        " the backend's peak"
        + (f" {peak / 1e9:.2f} GB above its start ({peak / max(1, join['shingles']):.1f} bytes per"
           " shingle, the shared buffers it read included)." if peak is not None
           else " not measured (its /proc/PID/clear_refs could not be written)."),
        "",
        "| measurement | value | baseline | ratio | target | met? |",
        "|---|---|---|---|---|---|",
        *(f"| {' | '.join(row)} |" for row in results["summary"]),
        "",
        "| candidates | S_R >= | asked | timed | over the timeout | p50 ms | p90 ms |"
        " documents found per query | precision | recall |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for lookup in results["lookups"]:
        answers = lookup["answers"]
        lines.append(f"| {lookup['path']} | {lookup['threshold']} | {lookup['asked']} |"
                     f" {lookup['timed']} | {lookup['over_timeout']} | {lookup['p50_ms']:.2f} |"
                     f" {lookup['p90_ms']:.2f} | {lookup['mean_found']:.1f} |"
                     f" {answers['precision']:.4f} |"
                     f" {answers['recall']:.4f} |")
    sketch = results["sketch_index"]
    lines += ["", f"The sketch index: built with ANALYZE in {sketch['seconds']:.0f} s,"
              f" {sketch['bytes_per_document']:.0f} bytes per document. Every document"
              " found is fetched and measured on its text, so a search costs at least its"
              " answers' share: where a query has hundreds of near-duplicates, as in a"
              " corpus of copies of copies, so does its time."]
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.verified_million",
                                     description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dsn", default=os.environ.get("NEARSIM_DSN"))
    parser.add_argument("--documents", type=int, default=DOCUMENTS)
    parser.add_argument("--lookups", type=int, default=LOOKUPS, help="documents asked")
    parser.add_argument("--lookup-timeout", type=float, default=LOOKUP_TIMEOUT_SECONDS)
    parser.add_argument("--lookup-budget", type=float, default=LOOKUP_BUDGET_SECONDS)
    parser.add_argument("--work-dir", type=Path, default=DEFAULT_WORK,
                        help="where the corpus file is (made if missing), as benchmarks.minhash")
    parser.add_argument("--results", type=Path, help="the JSON file to write")
    args = parser.parse_args(argv)
    if not args.dsn:
        parser.error("give --dsn or set NEARSIM_DSN")
    results = run(args.dsn, args.documents, args.lookups, args.work_dir, args.lookup_timeout,
                  args.lookup_budget)
    if args.results is not None:
        args.results.parent.mkdir(parents=True, exist_ok=True)
        args.results.write_text(json.dumps(results, indent=1))
        log(f"wrote {args.results}")
    print(verified_million_section(results))
    return 0


if __name__ == "__main__":
    sys.exit(run_main(main))
