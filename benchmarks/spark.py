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
- verified pairs at S_R >= 0.8 and 0.5: ``nearsim_pairs_verified(tbl, s)``
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

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import secrets
import sys
import tempfile
import textwrap
import time
import urllib.request
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TypeVar

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from psycopg import sql

import nearsim
from nearsim.core.bands import band_radius, band_width

from .common import BenchError, Connection, connect, cpu_model, prepare_session, print_table, wrap
from .docsets import TEXT_LIKE, RealFingerprints, make_docset, text_like_fingerprints
from .spark_dedup import DEDUP_DOCUMENTS, dedup_run, dedup_section
from .throughput import kjv_corpora

DEFAULT_SIZES = (1_000_000,)
DEFAULT_RADII = (3, 6)
CORPUS_SIZES = ("full", "small", "none")
CORPUS_THRESHOLDS = (0.8, 0.5)
MASTERS = ("local[1]", "local[2]")
BILLION = 1_000_000_000
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


def band_model(distinct: int, k: int) -> dict[str, Any]:
    """The layout :func:`nearsim.spark.search.choose_bands` picks for ``distinct``
    fingerprints and radius ``k``, and its cost model per document.

    ``rows``: the probe and index rows each fingerprint puts into the band
    join (what is shuffled); ``chance``: the candidates it meets by chance
    among random fingerprints, each pair counted once (``x < y``, as the
    measured candidates are); ``work``: the two together.
    """
    from nearsim.spark.search import choose_bands

    bands = choose_bands(distinct, k)
    widths, radii, rows, chance = [], [], 0.0, 0.0
    for band in range(bands):
        radius = band_radius(k, bands, band)
        if radius < 0:
            continue
        width = band_width(bands, band)
        probes = sum(math.comb(width, bits) for bits in range(radius + 1))
        widths.append(width)
        radii.append(radius)
        rows += probes + 1
        chance += probes * distinct / 2.0**width / 2
    return {"distinct": distinct, "bands": bands, "widths": widths, "radii": radii,
            "rows": rows, "chance": chance, "work": rows + chance}  # fmt: skip


def corpus_texts(size: str) -> tuple[list[str], dict[str, Any]]:
    """The evaluation corpus's texts, and what it is."""
    from .corpus import build_corpus

    documents = build_corpus(size)
    texts = [document.text for document in documents]
    described = {
        "size": size, "seed": 3, "documents": len(texts),
        "bytes": sum(len(text.encode()) for text in texts),
        "originals": sum(document.origin is None for document in documents),
    }  # fmt: skip
    return texts, described


Pairs = list[tuple[Any, ...]]


def corpus_postgresql(conn: Connection, schema: str, texts: Sequence[str],
                      radii: Sequence[int], client: Sequence[int | None],
                      ) -> tuple[str, dict[str, Any], dict[float, Pairs]]:  # fmt: skip
    """The corpus in an enabled table, and the questions asked of it in SQL.

    Returns the table (qualified), the figures, and the verified pairs
    ``(a, b, distance, similarity, short)`` per threshold.
    """
    table = sql.Identifier(schema, "corpus")
    qualified = f"{schema}.corpus"
    started = time.perf_counter()
    conn.execute(sql.SQL("CREATE TABLE {} (id bigint PRIMARY KEY, body text NOT NULL)")
                 .format(table))  # fmt: skip
    with conn.cursor().copy(sql.SQL("COPY {} (id, body) FROM STDIN").format(table)) as copy:
        for number, text in enumerate(texts, 1):
            copy.write_row((number, text))
    loaded = time.perf_counter() - started
    started = time.perf_counter()
    conn.execute("SELECT nearsim_enable(%s::regclass, 'body')", [qualified])
    conn.execute(sql.SQL("ANALYZE {}").format(table))
    enabled = time.perf_counter() - started
    started = time.perf_counter()
    conn.execute(sql.SQL("SELECT count(simhash(body)) FROM {}").format(table)).fetchone()
    hashed = time.perf_counter() - started
    stored = [row[0] for row in conn.execute(sql.SQL("SELECT si FROM {} ORDER BY id")
                                             .format(table)).fetchall()]  # fmt: skip
    differing = [number for number, (mine, theirs) in enumerate(zip(client, stored, strict=True),
                                                                 1) if mine != theirs]  # fmt: skip
    if differing:
        raise BenchError(f"the corpus: {len(differing):,} stored fingerprints differ from the"
                         f" client's nearsim.simhash, first id {differing[0]}")  # fmt: skip
    figures: dict[str, Any] = {"load_seconds": loaded, "enable_seconds": enabled,
                               "simhash_seconds": hashed, "pairs": {}, "verified": {}}
    print(f"   PostgreSQL: COPY {loaded:.1f} s, nearsim_enable {enabled:.1f} s,"
          f" simhash(body) {hashed:.1f} s; stored fingerprints = client's", flush=True)
    for k in radii:
        started = time.perf_counter()
        row = conn.execute(sql.SQL("SELECT count(*) FROM nearsim_pairs({}::regclass, {})")
                           .format(sql.Literal(qualified), sql.Literal(k))).fetchone()  # fmt: skip
        seconds = time.perf_counter() - started
        assert row is not None
        figures["pairs"][str(k)] = {"pairs": int(row[0]), "seconds": seconds}
        print(f"   nearsim_pairs k={k}: {int(row[0]):,} pairs in {seconds:.1f} s", flush=True)
    found: dict[float, list[tuple[Any, ...]]] = {}
    for threshold in CORPUS_THRESHOLDS:
        started = time.perf_counter()
        rows = conn.execute(
            sql.SQL("SELECT a::bigint, b::bigint, distance, similarity, short"
                    " FROM nearsim_pairs_verified({}::regclass, {})").format(
                sql.Literal(qualified), sql.Literal(threshold))).fetchall()  # fmt: skip
        seconds = time.perf_counter() - started
        found[threshold] = sorted(rows)
        figures["verified"][str(threshold)] = {"pairs": len(rows), "seconds": seconds}
        print(f"   nearsim_pairs_verified s={threshold}: {len(rows):,} pairs in {seconds:.1f} s",
              flush=True)
    return qualified, figures, found


def _same_verified(got: list[tuple[Any, ...]], expected: list[tuple[Any, ...]]) -> str | None:
    """Why two lists of verified pairs differ, or None when they are the same."""
    if len(got) != len(expected):
        pairs_got = {row[:2] for row in got}
        pairs_expected = {row[:2] for row in expected}
        extra, missing = sorted(pairs_got - pairs_expected), sorted(pairs_expected - pairs_got)
        return (f"{len(got):,} pairs against {len(expected):,} (only on Spark: {extra[:3]},"
                f" only in PostgreSQL: {missing[:3]})")
    for mine, theirs in zip(got, expected, strict=True):
        if mine[:3] != theirs[:3] or mine[4] != theirs[4] or mine[3] != theirs[3]:
            return f"row {mine} on Spark, {theirs} in PostgreSQL"
    return None


def corpus_result(question: dict[str, Any], named: str, result: int, seconds: float,
                  shuffled: int, candidates: int, rows: int) -> dict[str, Any]:
    """One answer of Spark on the corpus, checked equal to PostgreSQL's; printed."""
    master = question["master"]
    print(f"   {master} {named}: {result:,} in {seconds:.1f} s,"
          f" {shuffled / rows:,.0f} shuffle bytes/doc,"
          f" {candidates / rows:.2f} candidates/doc", flush=True)
    return {**question, "result": result, "seconds": seconds, "shuffle_bytes": shuffled,
            "shuffle_bytes_per_doc": shuffled / rows, "candidates": candidates,
            "candidates_per_doc": candidates / rows, "equal": True}


def corpus_spark(path: str, rows: int, radii: Sequence[int], client: Sequence[int | None],
                 pairs_expected: dict[int, int],
                 verified_expected: dict[float, list[tuple[Any, ...]]]) -> list[dict[str, Any]]:
    """The same questions on local[1] and local[2]; every answer checked."""
    from pyspark import StorageLevel
    from pyspark.sql import functions as F

    from nearsim.spark import fingerprints, pairs, verified_pairs
    from nearsim.spark.resemblance import resemblance_candidates
    from nearsim.spark.search import band_candidates

    results: list[dict[str, Any]] = []
    for master in MASTERS:
        spark = spark_session(master)
        try:
            frame = spark.read.parquet(path)
            frame.count()  # the file is listed and read once before timing

            def fingerprinted(frame: Any = frame) -> list[Any]:
                return list(fingerprints(frame, "body").select("id", "si").collect())

            collected, seconds, shuffled = timed_job(spark, "fingerprints", fingerprinted)
            made = dict(sorted((int(row["id"]), row["si"]) for row in collected))
            if list(made) != list(range(1, rows + 1)) or list(made.values()) != list(client):
                wrong = [key for key, value in made.items() if client[key - 1] != value]
                raise BenchError(f"Spark {master}: {len(wrong):,} fingerprints differ from the"
                                 f" client's, first id {wrong[:1]}")  # fmt: skip
            results.append({"master": master, "question": "fingerprints",
                            "result": len(made), "seconds": seconds, "shuffle_bytes": shuffled,
                            "shuffle_bytes_per_doc": shuffled / rows,
                            "candidates_per_doc": None, "equal": True})  # fmt: skip
            print(f"   {master} fingerprints: {seconds:.1f} s, equal to nearsim.simhash's",
                  flush=True)
            # The questions below start from the fingerprints, as the database's do.
            with_si = fingerprints(frame, "body").persist(StorageLevel.MEMORY_AND_DISK)
            with_si.count()
            distinct = with_si.select("si").where(F.col("si").isNotNull()).distinct()
            distinct = distinct.persist(StorageLevel.MEMORY_AND_DISK)
            distinct.count()
            for k in radii:
                def counted(k: int = k, with_si: Any = with_si) -> int:
                    return int(pairs(with_si, "id", k).count())

                found, seconds, shuffled = timed_job(spark, f"corpus-pairs-{k}", counted)
                if found != pairs_expected[k]:
                    raise BenchError(f"Spark {master} k={k}: {found:,} pairs of the corpus,"
                                     f" nearsim_pairs {pairs_expected[k]:,}")  # fmt: skip
                candidates = band_candidates(distinct, k)[0].count()
                results.append(corpus_result(
                    {"master": master, "question": "pairs", "k": k}, f"pairs k={k}", found,
                    seconds, shuffled, candidates, rows))
            documents = with_si.select(F.col("id").alias("key"), "si", F.col("body").alias("text"))
            for threshold in CORPUS_THRESHOLDS:
                def verified(threshold: float = threshold, with_si: Any = with_si) -> Pairs:
                    answer = verified_pairs(with_si, "id", "body", threshold).collect()
                    return sorted((int(r["a"]), int(r["b"]), r["distance"], r["similarity"],
                                   r["short"]) for r in answer)  # fmt: skip

                got, seconds, shuffled = timed_job(spark, f"corpus-verified-{threshold}",
                                                   verified)  # fmt: skip
                problem = _same_verified(got, verified_expected[threshold])
                if problem is not None:
                    raise BenchError(f"Spark {master} verified pairs at {threshold}: {problem}")
                candidates = resemblance_candidates(documents, threshold).count()
                results.append(corpus_result(
                    {"master": master, "question": "verified", "min_similarity": threshold},
                    f"verified s={threshold}", len(got), seconds, shuffled, candidates, rows))
            distinct.unpersist()
            with_si.unpersist()
        finally:
            spark.stop()
    return results


def corpus_run(conn: Connection, schema: str, size: str,
               radii: Sequence[int]) -> dict[str, Any]:  # fmt: skip
    """The evaluation corpus in PostgreSQL and on Spark: the same questions, checked."""
    texts, described = corpus_texts(size)
    rows = len(texts)
    print(f"\nThe evaluation corpus ({size}): {rows:,} documents,"
          f" {described['bytes'] / 1e6:.1f} MB", flush=True)
    started = time.perf_counter()
    client = [nearsim.simhash(text) for text in texts]
    client_seconds = time.perf_counter() - started
    print(f"   client nearsim.simhash: {client_seconds:.1f} s", flush=True)
    qualified, postgresql, verified = corpus_postgresql(conn, schema, texts, radii, client)
    with tempfile.TemporaryDirectory(prefix="nearsim-bench-spark-") as directory:
        path = str(Path(directory) / "corpus.parquet")
        pq.write_table(pa.table({"id": np.arange(1, rows + 1, dtype=np.int64), "body": texts}),
                       path, row_group_size=4096)  # fmt: skip
        spark = corpus_spark(path, rows, radii, client,
                             {int(k): v["pairs"] for k, v in postgresql["pairs"].items()},
                             verified)  # fmt: skip
    conn.execute(sql.SQL("DROP TABLE {} CASCADE").format(sql.SQL(qualified)))
    distinct = len({value for value in client if value is not None})
    return {**described, "distinct": distinct, "client_seconds": client_seconds,
            "postgresql": postgresql, "spark": spark}


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
            rng = np.random.default_rng(rows)
            values, described = text_like_fingerprints(rng, rows, real)
            print(f"\n{rows:,} fingerprints: {described}", flush=True)
            docset = make_docset(conn, schema, TEXT_LIKE, values, values[:0], described)
            print(f"   loaded into PostgreSQL in {docset.load_seconds:.0f} s", flush=True)
            sql_runs = {}
            for k in radii:
                started_k = time.perf_counter()
                row = conn.execute(sql.SQL("SELECT count(*) FROM nearsim_pairs({}::regclass, {})")
                                   .format(sql.Literal(docset.qualified), sql.Literal(k))
                                   ).fetchone()  # fmt: skip
                seconds = time.perf_counter() - started_k
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


def summary(report: dict[str, Any]) -> None:
    print(f"\nSpark against PostgreSQL, {report['cpu']} ({report['cores']} cores)\n")
    if report["sizes"]:
        rows = []
        for size in report["sizes"]:
            for k, run in size["postgresql"].items():
                rows.append([f"{size['rows']:,}", k, "nearsim_pairs (PostgreSQL)",
                             f"{run['pairs']:,}", f"{run['seconds']:.1f}", "", ""])  # fmt: skip
                for spark in size["spark"]:
                    if str(spark["k"]) != k:
                        continue
                    rows.append([f"{size['rows']:,}", k,
                                 f"nearsim.spark.pairs, {spark['master']}",
                                 f"{spark['pairs']:,}", f"{spark['seconds']:.1f}",
                                 f"{spark['shuffle_bytes_per_doc']:,.0f}",
                                 f"{spark['candidates_per_doc']:.2f}"])  # fmt: skip
                    rows.append([f"{size['rows']:,}", k,
                                 f"  counted from groups, {spark['master']}", "",
                                 f"{spark['groups_seconds']:.1f}",
                                 f"{spark['groups_shuffle_bytes'] / size['rows']:,.0f}", ""])
        print_table(["documents", "k", "run", "pairs", "seconds", "shuffle B/doc", "cand./doc"],
                    rows, ">><>>>>")
        wrap("Spark's counts equal nearsim_pairs's. Shuffle bytes: written by the job's stages"
             " (Spark's monitoring API). Candidates: rows of the band join before the distance"
             " check, over the distinct fingerprints, per document.")
    corpus = report["corpus"]
    if corpus:
        print(f"\nThe evaluation corpus: {corpus['documents']:,} documents\n")
        print_table(["question", "result", "PostgreSQL s", *(f"{m} s" for m in MASTERS),
                     "shuffle B/doc", "cand./doc"],
                    corpus_rows(corpus), "<>>>>>>")  # fmt: skip
        wrap("Every Spark answer equals PostgreSQL's: fingerprints row by row (and the"
             " client's nearsim.simhash), pair counts, verified pairs row by row.")
    dedup = report.get("dedup")
    if dedup:
        print(f"\nnearsim spark dedup, {dedup['documents']:,} documents:"
              f" {dedup['spark']['seconds']:.1f} s on {dedup['spark']['master']};"
              f" PostgreSQL (nearsim-load and nearsim_clusters_verified)"
              f" {dedup['postgresql']['seconds']:.1f} s; ratio {dedup['ratio']:.1f}")


def _question(run: dict[str, Any]) -> str:
    if run["question"] == "fingerprints":
        return "fingerprints"
    if run["question"] == "pairs":
        return f"pairs, k = {run['k']}"
    return f"verified pairs, S_R >= {run['min_similarity']}"


def _seconds(value: float) -> str:
    """Seconds with two decimals below one, else one."""
    return f"{value:.2f}" if value < 1 else f"{value:.1f}"


def corpus_rows(corpus: dict[str, Any], markdown: bool = False) -> list[list[str]]:
    """One row per question: result, PostgreSQL seconds, seconds per master, shuffle bytes
    and candidates per document (of each master, when they differ)."""
    postgresql = corpus["postgresql"]
    by_question: dict[str, list[dict[str, Any]]] = {}
    for run in corpus["spark"]:
        by_question.setdefault(_question(run), []).append(run)
    table = []
    for question, runs in by_question.items():
        first = runs[0]
        if first["question"] == "fingerprints":
            result = f"{first['result']:,} fingerprints"
            database = (f"{_seconds(postgresql['simhash_seconds'])} (client"
                        f" {_seconds(corpus['client_seconds'])})")
        elif first["question"] == "pairs":
            result = f"{first['result']:,} pairs"
            database = _seconds(postgresql["pairs"][str(first["k"])]["seconds"])
        else:
            result = f"{first['result']:,} pairs"
            database = _seconds(postgresql["verified"][str(first["min_similarity"])]["seconds"])
        seconds = {run["master"]: _seconds(run["seconds"]) for run in runs}
        shuffle = " / ".join(dict.fromkeys(f"{run['shuffle_bytes_per_doc']:,.0f}" for run in runs))
        candidates = ("-" if first["candidates_per_doc"] is None
                      else f"{first['candidates_per_doc']:,.2f}")  # fmt: skip
        label = f"`{question}`" if markdown and question == "fingerprints" else question
        table.append([label, result, database, *(seconds.get(m, "-") for m in MASTERS), shuffle,
                      candidates])
    return table


def _prose(text: str) -> str:
    """``text`` as one paragraph of lines of at most 100 characters."""
    return textwrap.fill(" ".join(text.split()), width=100, break_long_words=False,
                         break_on_hyphens=False)  # fmt: skip


def _markdown(header: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(str(cell) for cell in row) + " |" for row in rows]
    return "\n".join(lines)


def _duration(seconds: float) -> str:
    if seconds < 120:
        return f"{seconds:.0f} seconds"
    if seconds < 2 * 3600:
        return f"{seconds / 60:.0f} minutes"
    if seconds < 2 * 86400:
        return f"{seconds / 3600:.1f} hours"
    return f"{seconds / 86400:.1f} days"


_SUPERSCRIPTS = str.maketrans("-0123456789", "⁻⁰¹²³⁴⁵⁶⁷⁸⁹")


def _power(value: float) -> str:
    """``value`` as a mantissa with one decimal times a power of ten (superscript)."""
    exponent = math.floor(math.log10(value))
    mantissa = value / 10**exponent
    if round(mantissa, 1) >= 10:
        mantissa, exponent = mantissa / 10, exponent + 1
    return f"{mantissa:.1f} \u00d7 10{str(exponent).translate(_SUPERSCRIPTS)}"


def _bytes(value: float) -> str:
    for unit, scale in (("PB", 1e15), ("TB", 1e12), ("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if value >= scale:
            return f"{value / scale:.1f} {unit}"
    return f"{value:.0f} B"


# Manku, Jain and Das Sarma (WWW 2007): a batch of 1 million queries against
# 8 billion fingerprints at k = 3 in about 100 s on 200 mappers.
MANKU_QUERIES = 1_000_000
MANKU_FINGERPRINTS = 8_000_000_000
MANKU_SECONDS = 100
MANKU_MAPPERS = 200
EXECUTOR_CORES = 4
EXECUTORS = (50, 250, 1000)


def _layout(model: dict[str, Any]) -> str:
    return (f"{model['bands']} bands of {'/'.join(map(str, model['widths']))} bits (radii"
            f" {'/'.join(map(str, model['radii']))})")


def billion(results: dict[str, Any]) -> str:
    """What the measured k = 3 run implies for all pairs of a billion documents.

    Times come from the largest synthetic size; a run without one (the
    corpus alone) gives the model and the shuffle, not a time: on 20,500
    documents Spark's fixed cost of seconds per job is most of the time.
    """
    model = results.get("model") or {}
    if "3" not in model:
        return ""
    base: dict[str, Any] | None = None
    documents, what = 0, ""
    if results.get("sizes"):
        size = results["sizes"][-1]
        runs = [run for run in size["spark"] if run["k"] == 3 and run["master"] == MASTERS[0]]
        if runs:
            base, documents = runs[0], size["rows"]
            what = f"the {documents:,} synthetic fingerprints"
    timed = base is not None
    if base is None and results.get("corpus"):
        corpus = results["corpus"]
        runs = [run for run in corpus["spark"] if run["question"] == "pairs"
                and run.get("k") == 3 and run["master"] == MASTERS[0]]  # fmt: skip
        if runs:
            base, documents = runs[0], corpus["documents"]
            what = f"the evaluation corpus's {documents:,} documents"
    if base is None:
        return ""
    measured, large = model["3"]["measured"], model["3"]["billion"]
    work = large["work"] / measured["work"]
    per_doc = base["seconds"] / documents  # core-seconds: local[1] runs one task at a time
    core_seconds = per_doc * work * BILLION
    shuffle = base["shuffle_bytes_per_doc"] * large["rows"] / measured["rows"]
    manku_batches = BILLION / MANKU_QUERIES
    manku_share = BILLION / MANKU_FINGERPRINTS
    manku_mapper_seconds = manku_batches * manku_share * MANKU_SECONDS * MANKU_MAPPERS
    on = "; ".join(f"N = {n:,} ({n * EXECUTOR_CORES:,} cores): about"
                   f" {_duration(core_seconds / (n * EXECUTOR_CORES))}" for n in EXECUTORS)
    manku = f"""Manku, Jain and Das Sarma (WWW 2007) report a batch of {MANKU_QUERIES:,} queries
against {MANKU_FINGERPRINTS / 1e9:.0f} billion fingerprints at k = 3 in about {MANKU_SECONDS} s
on {MANKU_MAPPERS} mappers, each mapper solving the whole batch against its share of the
fingerprints. All pairs of a billion is {manku_batches:,.0f} such batches against
{manku_share:.3g} of their data: about {_power(manku_mapper_seconds)} mapper-seconds by their
figure, {_duration(manku_mapper_seconds / MANKU_MAPPERS)} on {MANKU_MAPPERS} mappers"""
    grows = f"""The work per document grows with the collection, because chance matches in a band
grow with the number of fingerprints; the band layout then takes fewer, wider bands. The cost
model of `choose_bands` (probe and index rows plus chance candidates per document) picks
{_layout(measured)} for the {measured["distinct"]:,} distinct fingerprints measured:
{measured["rows"]:,.0f} join rows and {measured["chance"]:,.1f} chance candidates per document;
for a billion distinct fingerprints {_layout(large)}: {large["rows"]:,.0f} rows and
{large["chance"]:,.1f} chance candidates, {work:.1f} times the work per document."""
    if timed:
        text = f"""From `local[1]` at k = 3 on {what}: {base["seconds"]:.1f} s, or
{per_doc * 1e6:,.0f} core-seconds per million documents, with
{base["shuffle_bytes_per_doc"]:,.0f} bytes of shuffle per document. {grows} So all pairs of 10⁹
documents at k = 3 take about {_power(core_seconds)} core-seconds, on N executors of
{EXECUTOR_CORES} cores: {on}; and some {_bytes(shuffle)} of shuffle per document,
{_bytes(shuffle * BILLION)} in all, which the network and the executors' disks must carry in that
time (local mode measured no network). {manku}, against {_duration(core_seconds / MANKU_MAPPERS)}
estimated here on as many cores (two decades of hardware apart, and an estimate from one
machine)."""
    else:
        text = f"""This run has no synthetic size (`SPARK_SIZES=`), and on {what} Spark's fixed
cost of seconds per job is most of the {base["seconds"]:.1f} s of `local[1]` at k = 3, so no time
is estimated from it: run `make bench-spark` with its million fingerprints for that. The shuffle
per document does carry over: {base["shuffle_bytes_per_doc"]:,.0f} bytes here. {grows} That
makes some {_bytes(shuffle)} of shuffle per document for a billion documents at k = 3,
{_bytes(shuffle * BILLION)} in all, which the network and the executors' disks must carry.
{manku}."""
    if "6" in model:
        six_measured, six = model["6"]["measured"], model["6"]["billion"]
        six_runs = [run for run in (results["sizes"][-1]["spark"] if timed else [])
                    if run["k"] == 6 and run["master"] == MASTERS[0]]  # fmt: skip
        growth = six["work"] / six_measured["work"]
        estimate = ""
        if six_runs:
            six_core = six_runs[0]["seconds"] / documents * growth * BILLION
            six_shuffle = (six_runs[0]["shuffle_bytes_per_doc"] * six["rows"]
                           / six_measured["rows"] * BILLION)  # fmt: skip
            estimate = (f", about {six_core / 3600:,.0f} core-hours and {_bytes(six_shuffle)}"
                        " of shuffle for a billion documents")
        text += f""" At k = 6 the same model gives {_layout(six)}: {six["rows"]:,.0f} join rows and
{six["chance"]:,.0f} chance candidates per document, {growth:.0f} times the work per document
measured at k = 6{estimate}: at that scale k = 6 calls for another layout (more copies of the
index with fewer probes each), not only more executors."""
    return "#### One billion documents on N executors, on paper\n\n" + _prose(text)


def separate_runs(results: dict[str, Any]) -> str:
    """A sentence on the synthetic sizes measured by runs of their own (``--add-to``)."""
    runs = [size for size in results.get("sizes", []) if "run" in size]
    if not runs:
        return ""

    def settings(run: dict[str, Any]) -> str:
        radii = " and ".join(str(k) for k in run.get("radii", []))
        return (f"`make bench-spark-10m`, {run['seconds']:.0f} s;"
                f" {run.get('shuffle_partitions', SHUFFLE_PARTITIONS)} shuffle partitions"
                + (f", k = {radii} only" if radii and run["radii"] != list(DEFAULT_RADII)
                   else ""))

    return " " + " ".join(
        f"The {size['rows']:,} fingerprints were measured by a run of their own"
        f" ({settings(size['run'])}), PostgreSQL's answers in that run too." for size in runs)


def spark_section(results: dict[str, Any] | None) -> str:
    """The Spark section of docs/BENCHMARKS.md, from the JSON ``make bench-spark`` writes.

    Markdown to put under a heading of the caller's (``### On Apache
    Spark`` or similar); it has ``####`` headings of its own: the
    evaluation corpus, the synthetic fingerprints, and what the figures
    imply for a billion documents.  ``None`` (no results) gives a sentence
    saying so.
    """
    if not results:
        return "No results of `make bench-spark` (benchmarks/spark.py) next to this run."
    memory = str(results["driver_memory"])
    memory = f"{memory[:-1]} GB" if memory.lower().endswith("g") else memory
    parts = [_prose(f"""Written by `make bench-spark` (`python -m benchmarks.spark`,
{results["seconds"]:.0f} s): Spark {results["spark"]} in local mode ({", ".join(
        f"`{master}`" for master in results["masters"])}, a fresh session for each, {memory} of
driver memory, {results["shuffle_partitions"]} shuffle partitions)
against PostgreSQL {results["postgresql"].split(" (")[0]}, one backend and no parallel workers, on
the same data in the same run; nearsim {results["nearsim"]}, {results["cpu"]},
{results["cores"]} cores. Each time is one run, wall clock. Shuffle bytes are those written by
the job's stages (Spark's monitoring API), per document; candidates are the rows of the band
join before the distance check, per document (for verified pairs: of the join of the shingle
prefixes, before the overlaps are counted). Every Spark answer is checked against PostgreSQL's
in the run.{separate_runs(results)}""")]
    corpus = results.get("corpus")
    if corpus:
        intro = f"""{corpus["documents"]:,} documents of `benchmarks/corpus.py` (size
{corpus["size"]}, seed {corpus["seed"]}: {corpus["originals"]:,} real texts and their edited copies,
{corpus["bytes"] / 1e6:.1f} MB), in a table whose fingerprints the server computed and in a
Parquet file. Fingerprints on Spark are collected to the driver and equal, row by row, the
stored ones and the client's `nearsim.simhash`; the pair counts equal `nearsim_pairs`'s; the
verified pairs equal `nearsim_pairs_verified`'s row by row (the same pairs, distances,
similarities and `short`). Fingerprints in PostgreSQL: `SELECT count(simhash(body))`, and the
client's `nearsim.simhash` in one Python process."""
        parts.append("#### The evaluation corpus\n\n" + _prose(intro) + f"""

{_markdown(["question", "result", "PostgreSQL s", *(f"`{m}` s" for m in results["masters"]),
            "shuffle B/doc", "candidates/doc"], corpus_rows(corpus, markdown=True))}""")
    if results.get("sizes"):
        rows = []
        for size in results["sizes"]:
            for k, run in size["postgresql"].items():
                spark = {s["master"]: s for s in size["spark"] if str(s["k"]) == k}
                first = next(iter(spark.values()))
                rows.append([f"{size['rows']:,}", k, f"{run['pairs']:,}", _seconds(run["seconds"]),
                             *(_seconds(spark[m]["seconds"]) if m in spark else "-"
                               for m in results["masters"]),
                             " / ".join(_seconds(spark[m]["groups_seconds"]) for m in spark),
                             f"{first['shuffle_bytes_per_doc']:,.0f}",
                             f"{first['candidates_per_doc']:.2f}"])  # fmt: skip
        intro = f"""The text-like sets of the benchmarks (`benchmarks/docsets.py`: a block of
10,000 identical fingerprints, clusters of Zipf sizes up to 100, exact copies and variants with 1
to 8 bits flipped) in an enabled table and a Parquet file: `SELECT count(*) FROM
nearsim_pairs(tbl, k)` against `nearsim.spark.pairs(df, "id", k).count()`, which makes every
pair (those of the identical block included); "from groups" is `hamming_groups(...).count()`,
the same count without making the pairs inside groups of identical fingerprints. Every count
equals `nearsim_pairs`'s. Shuffle and candidates are those of `{results["masters"][0]}`."""
        parts.append("#### Synthetic fingerprints\n\n" + _prose(intro) + f"""

{_markdown(["documents", "k", "pairs", "`nearsim_pairs` s",
            *(f"`{m}` s" for m in results["masters"]), "from groups s",
            "shuffle B/doc", "candidates/doc"], rows)}""")
    paper = billion(results)
    if paper:
        parts.append(paper)
    dedup = dedup_section(results.get("dedup"))
    if dedup:
        parts.append(dedup)
    return "\n\n".join(parts)


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
    sys.exit(main())
