"""The evaluation corpus in benchmarks/spark.py: the same questions in PostgreSQL and on Spark.

The texts of :func:`benchmarks.corpus.build_corpus` in an enabled table and
in a Parquet file; fingerprints, pairs at each radius and verified pairs at
S_R >= 0.8 and 0.5, in PostgreSQL (one backend) and on each local master,
every Spark answer checked against PostgreSQL's (and the fingerprints
against the client's ``nearsim.simhash``): a difference raises
:class:`benchmarks.common.BenchError`.
"""

from __future__ import annotations

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

from .common import BenchError, Connection
from .spark_jobs import MASTERS, spark_session, timed_job

CORPUS_THRESHOLDS = (0.8, 0.5)


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
                    " FROM nearsim_pairs_verified({}::regclass, {}, 's_r')").format(
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
