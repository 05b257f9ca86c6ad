"""Spark sessions and timed jobs, for benchmarks/spark.py and benchmarks/spark_cluster.py.

The masters, the radii measured by default and the session settings of
the local runs (a fresh session each, shuffle partitions and driver memory
from the environment when set), the shuffle bytes a job group wrote
(Spark's monitoring REST API), and jobs timed as a group of their own;
:func:`postgres_pairs` loads a text-like set into PostgreSQL and counts its
pairs there; :func:`timed_pairs` checks all pairs of a frame against that count.
"""

from __future__ import annotations

import json
import os
import time
import urllib.request
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

import numpy as np
from psycopg import sql

from .common import BenchError, Connection
from .docsets import (
    TEXT_LIKE,
    DocSet,
    Fingerprints,
    RealFingerprints,
    make_docset,
    text_like_fingerprints,
)

DEFAULT_RADII = (3, 6)
MASTERS = ("local[1]", "local[2]")
SHUFFLE_PARTITIONS = 16
DRIVER_MEMORY = "3g"


def shuffle_partitions() -> int:
    """Spark's shuffle partitions: 16, or NEARSIM_BENCH_SPARK_PARTITIONS (more for
    10 million rows, whose band join would otherwise sort gigabytes per task and
    spill them to disk)."""
    return int(os.environ.get("NEARSIM_BENCH_SPARK_PARTITIONS", SHUFFLE_PARTITIONS))


def spark_session(master: str) -> Any:
    from nearsim.spark import session

    spark = session(master, "nearsim-bench", {
        "spark.driver.memory": os.environ.get("NEARSIM_BENCH_SPARK_MEMORY", DRIVER_MEMORY),
        "spark.sql.shuffle.partitions": str(shuffle_partitions()),
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


def postgres_pairs(conn: Connection, schema: str, rows: int, radii: Sequence[int],
                   real: RealFingerprints
                   ) -> tuple[Fingerprints, str, DocSet, dict[int, dict[str, float]]]:
    """The text-like set of ``rows`` fingerprints (seeded by ``rows``) loaded into an
    enabled table of ``schema``, and ``nearsim_pairs`` at each radius, one run each:
    (the fingerprints, their description, the table, {k: {"pairs", "seconds"}})."""
    values, described = text_like_fingerprints(np.random.default_rng(rows), rows, real)
    print(f"\n{rows:,} fingerprints: {described}", flush=True)
    docset = make_docset(conn, schema, TEXT_LIKE, values, values[:0], described)
    print(f"   loaded into PostgreSQL in {docset.load_seconds:.0f} s", flush=True)
    runs: dict[int, dict[str, float]] = {}
    for k in radii:
        started = time.perf_counter()
        row = conn.execute(sql.SQL("SELECT count(*) FROM nearsim_pairs({}::regclass, {})")
                           .format(sql.Literal(docset.qualified), sql.Literal(k))).fetchone()
        seconds = time.perf_counter() - started
        assert row is not None
        runs[k] = {"pairs": int(row[0]), "seconds": seconds}
        print(f"   nearsim_pairs k={k}: {int(row[0]):,} pairs in {seconds:.1f} s", flush=True)
    return values, described, docset, runs


Result = TypeVar("Result")


def timed_job(spark: Any, group: str, action: Callable[[], Result]) -> tuple[Result, float, int]:
    """(result, seconds, shuffle bytes) of ``action`` run as job group ``group``."""
    spark.sparkContext.setJobGroup(group, group)
    started = time.perf_counter()
    result = action()
    seconds = time.perf_counter() - started
    # The REST API lags the listener bus a little.
    time.sleep(2)
    return result, seconds, shuffle_bytes(spark, group)


def timed_pairs(spark: Any, frame: Any, k: int, expected: int,
                label: str) -> tuple[int, float, int, float, int]:
    """All pairs of frame within k bits, by pairs() and counted from hamming_groups(),
    each timed as a job of its own and checked against nearsim_pairs' count: the
    pairs, seconds and shuffle bytes of the first, seconds and shuffle bytes of the
    second."""
    from nearsim.spark import hamming_groups, pairs

    def made() -> int:
        return int(pairs(frame, "id", k).count())

    def counted_from_groups() -> int:
        return int(hamming_groups(frame, "id", k).count())

    found, seconds, shuffled = timed_job(spark, f"pairs-{k}", made)
    collapsed, grouped_seconds, grouped_shuffled = timed_job(spark, f"groups-{k}",
                                                             counted_from_groups)
    if found != expected or collapsed != expected:
        raise BenchError(f"{label} k={k}: {found:,} pairs ({collapsed:,} counted from groups),"
                         f" nearsim_pairs {expected:,}")
    return found, seconds, shuffled, grouped_seconds, grouped_shuffled
