"""``nearsim spark dedup`` against ``nearsim-load`` and ``nearsim_clusters_verified``, on
the same JSON Lines file, back to back (part of ``make bench-spark``).

The evaluation corpus (:func:`benchmarks.corpus.build_corpus`, size ``large``
continued to ``documents`` texts: 150,000 by default, real texts and their
edited copies) is written as one JSON Lines file of records ``{"url": key,
"body": text}``.  Then, in the same run, one after the other, as a user
runs them (each a process of its own, wall clock):

- **PostgreSQL**: ``nearsim-load --create --format jsonl --id-field url
  --text-field body`` into a new table, then every row of
  ``nearsim_clusters_verified(tbl, 0.8, 's_r')`` fetched (the groups of ``nearsim
  clusters -s 0.8``); the time is the two together.
- **Spark**: ``nearsim spark dedup FILE --key-column url --text-column body
  -o groups.parquet --master local[2]`` with its defaults (S_R at least 0.8,
  connected components; the session's memory, logging and partitions as
  the command sets them).

The Spark groups are read back from the Parquet output and must equal
PostgreSQL's row by row (else the run stops with exit status 1).  The
ratio Spark / PostgreSQL is printed and written with the results.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
from psycopg import sql

from .common import BenchError, Connection

__all__ = ["DEDUP_DOCUMENTS", "DEDUP_MASTER", "dedup_rows", "dedup_run"]

DEDUP_DOCUMENTS = 150_000
DEDUP_MASTER = "local[2]"
DEDUP_SIMILARITY = 0.8
CORPUS_SEED = 3
LOAD_COMMAND = ("nearsim-load --create --format jsonl --id-field url --text-field body"
                " crawl.jsonl")


def write_corpus(path: Path, documents: int) -> dict[str, Any]:
    """The corpus's first ``documents`` texts as JSON Lines ``{"url", "body"}``; what it is."""
    from .corpus import build_corpus

    built = build_corpus("large", CORPUS_SEED, documents=documents)
    size = 0
    with path.open("w", encoding="utf-8") as out:
        for number, document in enumerate(built, 1):
            line = json.dumps({"url": f"doc-{number:07d}", "body": document.text},
                              ensure_ascii=False)  # fmt: skip
            size += len(line.encode()) + 1
            out.write(line + "\n")
    return {"documents": len(built), "bytes": size, "seed": CORPUS_SEED,
            "originals": sum(document.origin is None for document in built)}  # fmt: skip


def _command(module: str, *arguments: str) -> list[str]:
    return [sys.executable, "-c", f"from nearsim.client.cli import {module}; {module}()",
            *arguments]  # fmt: skip


def _run(what: str, command: list[str], **environment: str) -> float:
    """Seconds of ``command`` (wall clock); its failure stops the benchmark."""
    started = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True, check=False,
                          env={**os.environ, **environment})  # fmt: skip
    seconds = time.perf_counter() - started
    if done.returncode != 0:
        raise BenchError(f"{what} failed ({done.returncode}): {done.stderr.strip()[-2000:]}")
    return seconds


def postgresql_side(conn: Connection, dsn: str, schema: str,
                    path: Path) -> tuple[dict[str, Any], list[tuple[str, str, str | None]]]:
    """Load and group in PostgreSQL; the figures and the groups (key, cluster, pivot)."""
    table = f"{schema}.dedup_corpus"
    loaded = _run("nearsim-load", _command(
        "load_main", "--dsn", dsn, "--table", table, "--create", "--format", "jsonl",
        "--id-field", "url", "--text-field", "body", str(path)))  # fmt: skip
    started = time.perf_counter()
    rows = conn.execute(sql.SQL("SELECT key, cluster, pivot FROM nearsim_clusters_verified("
                                "{}::regclass, {}, 's_r')").format(
        sql.Literal(table), sql.Literal(DEDUP_SIMILARITY))).fetchall()  # fmt: skip
    grouped = time.perf_counter() - started
    conn.execute(sql.SQL("DROP TABLE {} CASCADE").format(sql.Identifier(schema, "dedup_corpus")))
    groups = sorted((str(key), str(cluster), None if pivot is None else str(pivot))
                    for key, cluster, pivot in rows)  # fmt: skip
    return {"load_seconds": loaded, "clusters_seconds": grouped,
            "seconds": loaded + grouped}, groups  # fmt: skip


def spark_side(path: Path, output: Path) -> tuple[dict[str, Any], list[tuple[str, str,
                                                                              str | None]]]:
    """``nearsim spark dedup`` as a user runs it; the figures and the groups."""
    arguments = ["spark", "dedup", str(path), "--key-column", "url", "--text-column", "body",
                 "-o", str(output), "--master", DEDUP_MASTER, "--json"]  # fmt: skip
    seconds = _run("nearsim spark dedup", _command("main", *arguments))
    table = pq.read_table(str(output)).to_pylist()
    groups = sorted((str(row["url"]), str(row["cluster"]),
                     None if row["pivot"] is None else str(row["pivot"]))
                    for row in table)  # fmt: skip
    return {"seconds": seconds, "master": DEDUP_MASTER,
            "command": "nearsim spark dedup crawl.jsonl --key-column url --text-column body"
                       f" -o groups.parquet --master {DEDUP_MASTER}"}, groups  # fmt: skip


def dedup_rows(conn: Connection, dsn: str, schema: str,
               documents: int = DEDUP_DOCUMENTS) -> dict[str, Any]:  # fmt: skip
    """Both sides on the same file, checked equal; the figures and the ratio."""
    with tempfile.TemporaryDirectory(prefix="nearsim-bench-dedup-") as directory:
        path = Path(directory) / "crawl.jsonl"
        described = write_corpus(path, documents)
        print(f"\nnearsim spark dedup against PostgreSQL: {described['documents']:,} documents,"
              f" {described['bytes'] / 1e6:.0f} MB of JSON Lines", flush=True)
        postgresql, expected = postgresql_side(conn, dsn, schema, path)
        print(f"   PostgreSQL: nearsim-load {postgresql['load_seconds']:.1f} s,"
              f" nearsim_clusters_verified {postgresql['clusters_seconds']:.1f} s", flush=True)
        spark, got = spark_side(path, Path(directory) / "groups.parquet")
    if got != expected:
        only_spark = sorted(set(got) - set(expected))[:3]
        only_postgresql = sorted(set(expected) - set(got))[:3]
        raise BenchError(f"spark dedup: {len(got):,} grouped documents against"
                         f" {len(expected):,} (only on Spark: {only_spark}, only in"
                         f" PostgreSQL: {only_postgresql})")  # fmt: skip
    ratio = spark["seconds"] / postgresql["seconds"]
    print(f"   Spark {DEDUP_MASTER}: {spark['seconds']:.1f} s, the same"
          f" {len(got):,} grouped documents; Spark / PostgreSQL = {ratio:.1f}", flush=True)
    return {**described, "grouped": len(got),
            "groups": len({cluster for _, cluster, _ in got}),
            "postgresql": postgresql, "spark": spark, "ratio": ratio}  # fmt: skip


def dedup_run(conn: Connection, dsn: str, schema: str, documents: int) -> dict[str, Any] | None:
    """:func:`dedup_rows`, or None for 0 documents (left out)."""
    if documents <= 0:
        return None
    return dedup_rows(conn, dsn, schema, documents)


def dedup_section(dedup: dict[str, Any] | None) -> str:
    """The subsection of docs/BENCHMARKS.md's Spark section on the dedup (empty: none)."""
    if not dedup:
        return ""
    postgresql, spark = dedup["postgresql"], dedup["spark"]
    return f"""#### `nearsim spark dedup` against PostgreSQL

{dedup["documents"]:,} documents of the evaluation corpus (`benchmarks/corpus.py`, size large
continued to {dedup["documents"]:,}, seed {dedup["seed"]}: {dedup["originals"]:,} real texts
and their edited copies), {dedup["bytes"] / 1e6:.0f} MB of JSON Lines, grouped at S_R >= 0.8
(connected components) by each side, one after the other in the same run, each as a user runs
it, wall clock:

| side | command | seconds |
|---|---|---|
| PostgreSQL | `{LOAD_COMMAND}` | {postgresql["load_seconds"]:.1f} |
| PostgreSQL | every row of `nearsim_clusters_verified(tbl, 0.8, 's_r')` |\
 {postgresql["clusters_seconds"]:.1f} |
| PostgreSQL | both | {postgresql["seconds"]:.1f} |
| Spark `{spark["master"]}` | `{spark["command"]}` | {spark["seconds"]:.1f} |

Spark / PostgreSQL = **{dedup["ratio"]:.1f}**. Both give the same {dedup["grouped"]:,} grouped
documents in {dedup["groups"]:,} groups, row by row (key, cluster, pivot)."""
