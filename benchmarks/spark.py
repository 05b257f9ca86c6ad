"""nearsim on Spark against the same questions in PostgreSQL, on the same data
(``make bench-spark``).

**Synthetic fingerprints.**  For each size (by default 1 million; 10
million with ``--sizes 1000000 10000000``; none with ``--sizes`` alone), the
text-like set of the benchmarks (:mod:`benchmarks.docsets`: near-duplicate
clusters of Zipf sizes, exact copies and a block of 10,000 identical
fingerprints) is loaded into an enabled table and written as a Parquet
file.  For k = 3 and 6, measured in the same run:

- ``SELECT count(*) FROM nearsim_pairs(tbl, k)``, one run, wall clock;
- ``nearsim.spark.pairs(df, "id", k).count()`` on Spark ``local[1]`` and
  ``local[2]`` (a fresh session each, reading the Parquet file), wall
  clock; and ``hamming_groups(...).count()``, the same count without
  making the pairs inside groups of identical fingerprints;
- the shuffle bytes (written) of those Spark jobs per document, from
  Spark's monitoring REST API (the stages of the job group);
- the candidates per document: rows of the band join before the distance
  check (:func:`nearsim.spark.search.band_candidates`).

**The evaluation corpus** (``--corpus full``, the default; ``small`` for a
quick look, ``none`` to leave it out): the texts of
:func:`benchmarks.corpus.build_corpus` (about 20,500 real texts and edited
copies, 88 MB) in an enabled table ``(id bigint, body text)`` whose
fingerprints the server computes, and in a Parquet file.  Measured in the
same run, in PostgreSQL (one backend) and on ``local[1]`` and ``local[2]``:

- fingerprints: ``SELECT count(simhash(body))``, the client's
  ``nearsim.simhash`` in this process, and ``nearsim.spark.fingerprints``
  collected to the driver; all three must be equal, row by row;
- pairs at k = 3 and 6: ``nearsim_pairs`` against ``nearsim.spark.pairs``
  (equal counts);
- verified pairs at S_R >= 0.8 and 0.5: ``nearsim_pairs_verified(tbl, s, 's_r')``
  against ``nearsim.spark.verified_pairs(df, "id", "body", s)``, every row
  fetched or collected: the same pairs with the same distance, similarity
  and ``short``.  Candidates are then the rows of the shingle-prefix join
  (:func:`nearsim.spark.resemblance.resemblance_candidates`).

Every check that fails stops the run with exit status 1.  ``--results``
writes the figures as JSON (``benchmarks/results/spark.json`` in ``make
bench-spark``), with the band layouts the cost model of
:func:`nearsim.spark.search.choose_bands` picks at the measured size and at
a billion documents; :func:`spark_section` turns that file into the Spark
section of docs/BENCHMARKS.md.

Usage: ``python -m benchmarks.spark --dsn DSN [--sizes [N ...]] [--radii K ...]
[--corpus full|small|none] [--results FILE]``.
"""

# Measured here: the synthetic fingerprints.  The evaluation corpus is
# benchmarks/spark_corpus.py's, the sessions and timed jobs are
# benchmarks/spark_jobs.py's, and benchmarks/spark_report.py prints the
# summary and writes the section of docs/BENCHMARKS.md (spark_section).

from __future__ import annotations

import argparse
import json
import os
import platform
import secrets
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from psycopg import sql

import nearsim

from .common import BenchError, Connection, connect, cpu_model, prepare_session, run_main
from .docsets import RealFingerprints
from .spark_corpus import corpus_run
from .spark_dedup import DEDUP_DOCUMENTS, dedup_run
from .spark_jobs import (
    DEFAULT_RADII,
    DRIVER_MEMORY,
    MASTERS,
    postgres_pairs,
    shuffle_partitions,
    spark_session,
    timed_pairs,
)
from .spark_report import BILLION, band_model, summary
from .throughput import kjv_corpora

DEFAULT_SIZES = (1_000_000,)
CORPUS_SIZES = ("full", "small", "none")


def spark_runs(path: str, rows: int, radii: Sequence[int],
               expected: dict[int, int]) -> list[dict[str, Any]]:  # fmt: skip
    from nearsim.spark.search import band_candidates

    results = []
    for master in MASTERS:
        spark = spark_session(master)
        try:
            frame = spark.read.parquet(path)
            frame.count()  # the file is listed and read once before timing
            for k in radii:
                found, seconds, shuffled, grouped_seconds, grouped_shuffled = timed_pairs(
                    spark, frame, k, expected[k], f"Spark {master}")
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


def run(dsn: str, sizes: Sequence[int], radii: Sequence[int],
        corpus: str = "full", dedup: int = DEDUP_DOCUMENTS) -> dict[str, Any]:  # fmt: skip
    import pyspark

    started = time.perf_counter()
    conn: Connection = connect(dsn)
    version = prepare_session(conn)
    schema = f"bench_spark_{secrets.token_hex(4)}"
    conn.execute(sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(schema)))
    report: dict[str, Any] = {
        "cpu": cpu_model(), "cores": os.cpu_count(), "python": platform.python_version(),
        "postgresql": version, "nearsim": nearsim.__version__, "spark": pyspark.__version__,
        "masters": list(MASTERS), "shuffle_partitions": shuffle_partitions(),
        "driver_memory": os.environ.get("NEARSIM_BENCH_SPARK_MEMORY", DRIVER_MEMORY),
        "sizes": [], "corpus": None, "model": {},
    }  # fmt: skip
    try:
        if sizes:
            chapters = kjv_corpora()[0]
            real = RealFingerprints(chapters)
        for rows in sizes:
            values, described, docset, sql_runs = postgres_pairs(conn, schema, rows, radii,
                                                                 real)
            with tempfile.TemporaryDirectory(prefix="nearsim-bench-spark-") as directory:
                path = str(Path(directory) / "fingerprints.parquet")
                ids = np.arange(1, rows + 1, dtype=np.int64)
                pq.write_table(pa.table({"id": ids, "si": values}), path, row_group_size=1 << 20)
                spark = spark_runs(path, rows, radii,
                                   {k: int(run["pairs"]) for k, run in sql_runs.items()})
            report["sizes"].append({"rows": rows, "described": described,
                                    "distinct": len(np.unique(values)),
                                    "postgresql": {str(k): v for k, v in sql_runs.items()},
                                    "spark": spark})  # fmt: skip
            conn.execute(sql.SQL("DROP TABLE {} CASCADE").format(docset.table))
        if corpus != "none":
            report["corpus"] = corpus_run(conn, schema, corpus, radii)
        report["dedup"] = dedup_run(conn, dsn, schema, dedup)
    finally:
        conn.execute(sql.SQL("DROP SCHEMA {} CASCADE").format(sql.Identifier(schema)))
    measured = (report["sizes"][-1]["distinct"] if report["sizes"]
                else report["corpus"]["distinct"] if report["corpus"] else 0)
    if measured:
        report["model"] = {str(k): {"measured": band_model(measured, k),
                                    "billion": band_model(BILLION, k)} for k in radii}
    report["seconds"] = time.perf_counter() - started
    return report


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.spark", description=__doc__)
    parser.add_argument("--dsn", required=True)
    parser.add_argument("--sizes", type=int, nargs="*", default=list(DEFAULT_SIZES),
                        help="synthetic sizes (none: --sizes alone)")
    parser.add_argument("--radii", type=int, nargs="+", default=list(DEFAULT_RADII))
    parser.add_argument("--corpus", choices=CORPUS_SIZES, default="full",
                        help="the evaluation corpus's size, or none")
    parser.add_argument("--dedup", type=int, default=DEDUP_DOCUMENTS, metavar="N",
                        help="nearsim spark dedup against nearsim-load and"
                        " nearsim_clusters_verified on N documents of the corpus (0: not)")
    parser.add_argument("--results", help="write the figures as JSON to this file")
    parser.add_argument("--add-to", metavar="FILE",
                        help="put this run's synthetic sizes into the results of an earlier run"
                        " (replacing those of the same size; its corpus and the rest stay)")
    args = parser.parse_args(argv)
    try:
        report = run(args.dsn, args.sizes, args.radii, args.corpus, args.dedup)
    except BenchError as error:
        print(f"error: {error}", file=sys.stderr)
        return error.status
    summary(report)
    print(f"\n   {report['seconds']:.0f} s in all", flush=True)
    if args.results:
        Path(args.results).write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    if args.add_to:
        target = Path(args.add_to)
        merged = added_sizes(json.loads(target.read_text(encoding="utf-8")), report)
        target.write_text(json.dumps(merged, indent=2) + "\n", encoding="utf-8")
    return 0


def added_sizes(earlier: dict[str, Any], report: dict[str, Any]) -> dict[str, Any]:
    """``earlier``'s results with ``report``'s synthetic sizes in them.

    Each added size remembers the run it came from (its seconds, shuffle
    partitions and radii); a size that was there is replaced.  The
    billion-document model follows the largest size, so it is taken from
    ``report`` when that has the largest, for the radii ``report`` measured.
    """
    merged = dict(earlier)
    run = {name: report[name] for name in ("seconds", "spark", "nearsim", "shuffle_partitions")}
    run["radii"] = sorted({int(k) for size in report["sizes"] for k in size["postgresql"]})
    added = {size["rows"]: {**size, "run": run} for size in report["sizes"]}
    kept = [size for size in earlier.get("sizes", []) if size["rows"] not in added]
    merged["sizes"] = sorted([*kept, *added.values()], key=lambda size: size["rows"])
    if added and merged["sizes"][-1]["rows"] in added and report.get("model"):
        # a radius the run left out keeps the earlier model
        merged["model"] = {**earlier.get("model", {}), **report["model"]}
    return merged


if __name__ == "__main__":
    sys.exit(run_main(main))
