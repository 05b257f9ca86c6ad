"""All pairs of synthetic fingerprints on a Spark standalone cluster against ``nearsim_pairs``
(part of ``make bench-spark``, 10 million fingerprints there).

For each size (``--sizes``, 10 million in ``make bench-spark``), the
text-like set of the benchmarks (:mod:`benchmarks.docsets`, as in
:mod:`benchmarks.spark`) is loaded into an enabled table and written as a
Parquet file.  A standalone cluster is started on this machine
(:func:`nearsim.spark.standalone.start`: a master and ``--workers``
workers of ``--cores`` cores, separate processes on the loopback
interface), whose executors run a Python environment of their own made
from the package's wheel (:func:`nearsim.spark.standalone.make_environment`).
This process is the driver.  Measured in the same run, for each radius
(``--radii``, 3 by default):

- ``SELECT count(*) FROM nearsim_pairs(tbl, k)``: one backend, wall clock;
- ``nearsim.spark.pairs(df, "id", k).count()`` on the cluster, wall clock,
  and the shuffle bytes its stages wrote (Spark's monitoring API);
  ``hamming_groups(...).count()`` (the same count without making the pairs
  inside groups of identical fingerprints) likewise.

Each Spark count must equal ``nearsim_pairs``'s (else exit status 1).  The
cost per document is printed and written both ways: wall-clock
microseconds per document, and core-microseconds per document (wall clock
times the cores working: the executors' for Spark, one for the backend),
with the ratio Spark / PostgreSQL.  ``--results`` writes them as JSON
(``benchmarks/results/spark-cluster.json``).

Usage: ``python -m benchmarks.spark_cluster --dsn DSN [--sizes N ...] [--radii K ...]
[--workers 2] [--cores 1] [--worker-memory 2g] [--executor-memory 1500m] [--results FILE]``.
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
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from psycopg import sql

import nearsim

from .common import (
    BenchError,
    Connection,
    connect,
    cpu_model,
    prepare_session,
    print_table,
    run_main,
)
from .docsets import RealFingerprints
from .spark_jobs import postgres_pairs, timed_pairs
from .throughput import kjv_corpora

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_SIZES = (10_000_000,)
DEFAULT_RADII = (3,)
DRIVER_MEMORY = "2g"


def partitions_for(rows: int) -> int:
    """Shuffle partitions: 16 up to about a million rows, 128 at 10 million (tasks of tens of
    MB in the band join, as ``make bench-spark-10m`` runs it)."""
    return max(16, min(128, rows // 78_125))


def executor_python(directory: Path) -> Path:
    """A new environment for the executors, from the wheel of python_client."""
    from nearsim.spark.standalone import build_wheel, make_environment

    wheel = build_wheel(ROOT / "python_client", directory)
    python: Path = make_environment(directory / "env", [f"{wheel}[spark-executors]"])
    return python


def cluster_runs(cluster: Any, python: Path, path: str, rows: int, radii: Sequence[int],
                 expected: dict[int, int], executor_memory: str,
                 cores: int) -> list[dict[str, Any]]:  # fmt: skip
    from nearsim.spark import session, stop

    os.environ["PYSPARK_PYTHON"] = str(python)
    os.environ["SPARK_LOCAL_IP"] = cluster.host  # the driver, its UI included, on loopback
    spark = session(cluster.master_url, "nearsim-bench-cluster", {
        **cluster.driver_conf(),
        "spark.driver.memory": DRIVER_MEMORY,
        "spark.executor.memory": executor_memory,
        "spark.sql.shuffle.partitions": str(partitions_for(rows)),
        "spark.ui.showConsoleProgress": "false",
        "spark.ui.port": "4050",
        "spark.port.maxRetries": "50",
    })  # fmt: skip
    results = []
    try:
        frame = spark.read.parquet(path)
        frame.count()  # the file is listed and read once before timing
        for k in radii:
            found, seconds, shuffled, grouped_seconds, _ = timed_pairs(
                spark, frame, k, expected[k], "Spark cluster")
            results.append({"k": k, "pairs": found, "seconds": seconds, "cores": cores,
                            "shuffle_bytes": shuffled, "shuffle_bytes_per_doc": shuffled / rows,
                            "groups_seconds": grouped_seconds})  # fmt: skip
            print(f"   cluster k={k}: {seconds:.1f} s ({grouped_seconds:.1f} s counted from"
                  f" groups), {shuffled / rows:,.0f} shuffle bytes/doc", flush=True)
    finally:
        stop(spark)
    return results


def cost(size: dict[str, Any]) -> list[dict[str, Any]]:
    """Per radius: microseconds per document, wall clock and per core, and Spark / PostgreSQL."""
    rows = size["rows"]
    found = []
    for run in size["cluster"]:
        postgresql = size["postgresql"][str(run["k"])]["seconds"]
        wall = run["seconds"] / rows * 1e6
        core = wall * run["cores"]
        base = postgresql / rows * 1e6
        found.append({"k": run["k"], "postgresql_us_per_doc": base, "spark_us_per_doc": wall,
                      "spark_core_us_per_doc": core, "ratio_wall": wall / base,
                      "ratio_per_core": core / base})  # fmt: skip
    return found


def run(dsn: str, sizes: Sequence[int], radii: Sequence[int], workers: int, cores: int,
        worker_memory: str, executor_memory: str) -> dict[str, Any]:  # fmt: skip
    import pyspark

    from nearsim.spark.standalone import start

    started = time.perf_counter()
    conn: Connection = connect(dsn)
    version = prepare_session(conn)
    schema = f"bench_spark_cluster_{secrets.token_hex(4)}"
    conn.execute(sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(schema)))
    report: dict[str, Any] = {
        "cpu": cpu_model(), "cores": os.cpu_count(), "python": platform.python_version(),
        "postgresql": version, "nearsim": nearsim.__version__, "spark": pyspark.__version__,
        "cluster": {"workers": workers, "cores_per_worker": cores,
                    "worker_memory": worker_memory, "executor_memory": executor_memory,
                    "driver_memory": DRIVER_MEMORY},
        "sizes": [],
    }  # fmt: skip
    try:
        real = RealFingerprints(kjv_corpora()[0])
        with tempfile.TemporaryDirectory(prefix="nearsim-bench-cluster-") as directory:
            python = executor_python(Path(directory))
            for rows in sizes:
                values, described, docset, sql_runs = postgres_pairs(conn, schema, rows,
                                                                     radii, real)
                conn.execute(sql.SQL("DROP TABLE {} CASCADE").format(docset.table))
                path = str(Path(directory) / f"fingerprints-{rows}.parquet")
                ids = np.arange(1, rows + 1, dtype=np.int64)
                pq.write_table(pa.table({"id": ids, "si": values}), path, row_group_size=1 << 20)
                del values, ids
                with start(workers, cores, worker_memory) as cluster:
                    print(f"   cluster {cluster.master_url}: {workers} workers of {cores}"
                          f" core(s), {worker_memory}", flush=True)
                    spark_runs = cluster_runs(cluster, python, path, rows, radii,
                                              {k: int(r["pairs"]) for k, r in sql_runs.items()},
                                              executor_memory, workers * cores)  # fmt: skip
                size = {"rows": rows, "described": described,
                        "partitions": partitions_for(rows),
                        "postgresql": {str(k): v for k, v in sql_runs.items()},
                        "cluster": spark_runs}  # fmt: skip
                size["cost"] = cost(size)
                report["sizes"].append(size)
                Path(path).unlink()
    finally:
        conn.execute(sql.SQL("DROP SCHEMA {} CASCADE").format(sql.Identifier(schema)))
    report["seconds"] = time.perf_counter() - started
    return report


def summary(report: dict[str, Any]) -> None:
    shape = report["cluster"]
    print(f"\nSpark standalone cluster ({shape['workers']} workers x"
          f" {shape['cores_per_worker']} core, {shape['executor_memory']} executors) against"
          f" nearsim_pairs, {report['cpu']} ({report['cores']} cores)\n")
    rows = []
    for size in report["sizes"]:
        for run, found in zip(size["cluster"], size["cost"], strict=True):
            rows.append([f"{size['rows']:,}", str(run["k"]), f"{run['pairs']:,}",
                         f"{size['postgresql'][str(run['k'])]['seconds']:.1f}",
                         f"{run['seconds']:.1f}", f"{found['postgresql_us_per_doc']:.1f}",
                         f"{found['spark_core_us_per_doc']:.1f}",
                         f"{found['ratio_per_core']:.1f}",
                         f"{run['shuffle_bytes_per_doc']:,.0f}"])  # fmt: skip
    print_table(["documents", "k", "pairs", "nearsim_pairs s", "cluster s",
                 "PG us/doc", "Spark core-us/doc", "ratio per core", "shuffle B/doc"], rows,
                ">" * 9)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.spark_cluster",
                                     description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dsn", required=True)
    parser.add_argument("--sizes", type=int, nargs="+", default=list(DEFAULT_SIZES))
    parser.add_argument("--radii", type=int, nargs="+", default=list(DEFAULT_RADII))
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--cores", type=int, default=1, help="cores per worker")
    parser.add_argument("--worker-memory", default="2g")
    parser.add_argument("--executor-memory", default="1500m")
    parser.add_argument("--results", help="write the figures as JSON to this file")
    args = parser.parse_args(argv)
    try:
        report = run(args.dsn, args.sizes, args.radii, args.workers, args.cores,
                     args.worker_memory, args.executor_memory)  # fmt: skip
    except BenchError as error:
        print(f"error: {error}", file=sys.stderr)
        return error.status
    summary(report)
    print(f"\n   {report['seconds']:.0f} s in all", flush=True)
    if args.results:
        Path(args.results).write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(run_main(main))
