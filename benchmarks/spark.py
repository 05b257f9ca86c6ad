"""All pairs on Spark against ``nearsim_pairs`` in PostgreSQL, on the same fingerprints
(``make bench-spark``).

For each size (by default 1 million; 10 million with ``--sizes 1000000
10000000``), the text-like set of the benchmarks (:mod:`benchmarks.docsets`:
near-duplicate clusters of Zipf sizes, exact copies and a block of 10,000
identical fingerprints) is loaded into an enabled table and written as a
Parquet file.  For k = 3 and 6, measured in the same run:

- ``SELECT count(*) FROM nearsim_pairs(tbl, k)``, one run, wall clock;
- ``nearsim.spark.pairs(df, "id", k).count()`` on Spark ``local[1]`` and
  ``local[2]`` (a fresh session each, reading the Parquet file), wall
  clock; and ``hamming_groups(...).count()``, the same count without
  making the pairs inside groups of identical fingerprints;
- the shuffle bytes (written) of those Spark jobs per document, from
  Spark's monitoring REST API (the stages of the job group);
- the candidates per document: rows of the band join before the distance
  check (:func:`nearsim.spark.search.band_candidates`).

Every Spark count is checked against ``nearsim_pairs``'s.

Usage: ``python -m benchmarks.spark --dsn DSN [--sizes N ...] [--radii K ...]
[--results FILE]``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import secrets
import sys
import tempfile
import time
import urllib.request
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from psycopg import sql

from .common import BenchError, Connection, connect, cpu_model, prepare_session, print_table, wrap
from .docsets import TEXT_LIKE, RealFingerprints, make_docset, text_like_fingerprints
from .throughput import read_corpora

DEFAULT_SIZES = (1_000_000,)
DEFAULT_RADII = (3, 6)
MASTERS = ("local[1]", "local[2]")


def spark_session(master: str) -> Any:
    from nearsim.spark import session

    spark = session(master, "nearsim-bench", {
        "spark.driver.memory": os.environ.get("NEARSIM_BENCH_SPARK_MEMORY", "3g"),
        "spark.sql.shuffle.partitions": "16",
        "spark.ui.showConsoleProgress": "false",
        "spark.ui.port": "4050",
        "spark.port.maxRetries": "50",
    })  # fmt: skip
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def shuffle_bytes(spark: Any, group: str) -> int:
    """Shuffle bytes written by the stages of the jobs of ``group`` (monitoring REST API)."""
    context = spark.sparkContext
    tracker = context.statusTracker()
    stages = set()
    for job in tracker.getJobIdsForGroup(group):
        info = tracker.getJobInfo(job)
        if info is not None:
            stages.update(info.stageIds)
    base = f"{context.uiWebUrl}/api/v1/applications/{context.applicationId}/stages"
    total = 0
    for stage in sorted(stages):
        try:
            with urllib.request.urlopen(f"{base}/{stage}", timeout=30) as response:
                attempts = json.load(response)
        except OSError:
            continue  # skipped (planned but not run): no attempt
        total += sum(int(attempt.get("shuffleWriteBytes", 0)) for attempt in attempts)
    return total


def timed_job(spark: Any, group: str, action: Callable[[], int]) -> tuple[int, float, int]:
    """(result, seconds, shuffle bytes) of ``action`` run as job group ``group``."""
    spark.sparkContext.setJobGroup(group, group)
    started = time.perf_counter()
    result = action()
    seconds = time.perf_counter() - started
    # The REST API lags the listener bus a little.
    time.sleep(2)
    return result, seconds, shuffle_bytes(spark, group)


def spark_runs(path: str, rows: int, radii: Sequence[int],
               expected: dict[int, int]) -> list[dict[str, Any]]:  # fmt: skip
    from nearsim.spark import hamming_groups, pairs
    from nearsim.spark.search import band_candidates

    results = []
    for master in MASTERS:
        spark = spark_session(master)
        try:
            frame = spark.read.parquet(path)
            frame.count()  # the file is listed and read once before timing
            for k in radii:
                def made(k: int = k, frame: Any = frame) -> int:
                    return int(pairs(frame, "id", k).count())

                def counted_from_groups(k: int = k, frame: Any = frame) -> int:
                    return int(hamming_groups(frame, "id", k).count())

                found, seconds, shuffled = timed_job(spark, f"pairs-{k}", made)
                collapsed, grouped_seconds, grouped_shuffled = timed_job(
                    spark, f"groups-{k}", counted_from_groups)
                if found != expected[k] or collapsed != expected[k]:
                    raise BenchError(f"Spark {master} k={k}: {found:,} pairs ({collapsed:,}"
                                     f" counted from groups), nearsim_pairs {expected[k]:,}")
                distinct = frame.select("si").distinct()
                candidates, _ = band_candidates(distinct, k)
                spark.sparkContext.setJobGroup(f"candidates-{k}", "candidates")
                counted = candidates.count()
                results.append({
                    "master": master, "k": k, "pairs": found, "seconds": seconds,
                    "shuffle_bytes": shuffled, "shuffle_bytes_per_doc": shuffled / rows,
                    "groups_seconds": grouped_seconds, "groups_shuffle_bytes": grouped_shuffled,
                    "candidates": counted, "candidates_per_doc": counted / rows,
                })  # fmt: skip
                print(f"   {master} k={k}: {seconds:.1f} s, {shuffled / rows:,.0f} shuffle"
                      f" bytes/doc, {counted / rows:.2f} candidates/doc;"
                      f" counted from groups {grouped_seconds:.1f} s", flush=True)
        finally:
            spark.stop()
    return results


def run(dsn: str, sizes: Sequence[int], radii: Sequence[int]) -> dict[str, Any]:
    conn: Connection = connect(dsn)
    version = prepare_session(conn)
    schema = f"bench_spark_{secrets.token_hex(4)}"
    conn.execute(sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(schema)))
    chapters = read_corpora()[0]
    real = RealFingerprints(chapters)
    report: dict[str, Any] = {
        "cpu": cpu_model(), "cores": os.cpu_count(), "python": platform.python_version(),
        "postgresql": version, "sizes": [],
    }  # fmt: skip
    try:
        for rows in sizes:
            rng = np.random.default_rng(rows)
            values, described = text_like_fingerprints(rng, rows, real)
            print(f"\n{rows:,} fingerprints: {described}", flush=True)
            docset = make_docset(conn, schema, TEXT_LIKE, values, values[:0], described)
            print(f"   loaded into PostgreSQL in {docset.load_seconds:.0f} s", flush=True)
            sql_runs = {}
            for k in radii:
                started = time.perf_counter()
                row = conn.execute(sql.SQL("SELECT count(*) FROM nearsim_pairs({}::regclass, {})")
                                   .format(sql.Literal(docset.qualified), sql.Literal(k))
                                   ).fetchone()  # fmt: skip
                seconds = time.perf_counter() - started
                assert row is not None
                sql_runs[k] = {"pairs": int(row[0]), "seconds": seconds}
                print(f"   nearsim_pairs k={k}: {int(row[0]):,} pairs in {seconds:.1f} s",
                      flush=True)
            with tempfile.TemporaryDirectory(prefix="nearsim-bench-spark-") as directory:
                path = str(Path(directory) / "fingerprints.parquet")
                ids = np.arange(1, rows + 1, dtype=np.int64)
                pq.write_table(pa.table({"id": ids, "si": values}), path, row_group_size=1 << 20)
                spark = spark_runs(path, rows, radii,
                                   {k: int(run["pairs"]) for k, run in sql_runs.items()})
            report["sizes"].append({"rows": rows, "described": described,
                                    "postgresql": {str(k): v for k, v in sql_runs.items()},
                                    "spark": spark})  # fmt: skip
            conn.execute(sql.SQL("DROP TABLE {} CASCADE").format(docset.table))
    finally:
        conn.execute(sql.SQL("DROP SCHEMA {} CASCADE").format(sql.Identifier(schema)))
    return report


def summary(report: dict[str, Any]) -> None:
    print(f"\nAll pairs: Spark against nearsim_pairs, {report['cpu']} ({report['cores']} cores)\n")
    rows = []
    for size in report["sizes"]:
        for k, run in size["postgresql"].items():
            rows.append([f"{size['rows']:,}", k, "nearsim_pairs (PostgreSQL)",
                         f"{run['pairs']:,}", f"{run['seconds']:.1f}", "", ""])  # fmt: skip
            for spark in size["spark"]:
                if str(spark["k"]) != k:
                    continue
                rows.append([f"{size['rows']:,}", k, f"nearsim.spark.pairs, {spark['master']}",
                             f"{spark['pairs']:,}", f"{spark['seconds']:.1f}",
                             f"{spark['shuffle_bytes_per_doc']:,.0f}",
                             f"{spark['candidates_per_doc']:.2f}"])  # fmt: skip
                rows.append([f"{size['rows']:,}", k,
                             f"  counted from groups, {spark['master']}", "",
                             f"{spark['groups_seconds']:.1f}",
                             f"{spark['groups_shuffle_bytes'] / size['rows']:,.0f}", ""])
    print_table(["documents", "k", "run", "pairs", "seconds", "shuffle B/doc", "cand./doc"],
                rows, "rrlrrrr")
    wrap("Spark's counts equal nearsim_pairs's. Shuffle bytes: written by the job's stages"
         " (Spark's monitoring API). Candidates: rows of the band join before the distance"
         " check, over the distinct fingerprints, per document.")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.spark", description=__doc__)
    parser.add_argument("--dsn", required=True)
    parser.add_argument("--sizes", type=int, nargs="+", default=list(DEFAULT_SIZES))
    parser.add_argument("--radii", type=int, nargs="+", default=list(DEFAULT_RADII))
    parser.add_argument("--results", help="write the figures as JSON to this file")
    args = parser.parse_args(argv)
    try:
        report = run(args.dsn, args.sizes, args.radii)
    except BenchError as error:
        print(f"error: {error}", file=sys.stderr)
        return error.status
    summary(report)
    if args.results:
        Path(args.results).write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
