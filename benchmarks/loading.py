"""Section 9 of the benchmarks: ``nearsim-load`` against a plain ``COPY``.

A corpus of text files is written from KJV chapters (each file a chapter
with a tenth of its verses left out, so no two are alike), then, in one run:

- **plain COPY**, the baseline: this process reads every file and sends
  ``(key, body)`` with one ``COPY`` into a logged table with a primary key and
  no extension, committed at the end; once more into a table whose texts are
  compressed with lz4 as in the tables nearsim creates (for reference);
- **nearsim-load**: the command itself in a subprocess (``python -m
  nearsim.client.cli load DIR --json``, into a table made beforehand with
  ``nearsim init``, untimed): worker processes read, hash and fingerprint,
  the main process writes batches with ``COPY``, PostgreSQL inserts the rows
  into the table's rotation indexes, ``ANALYZE`` at the end;
- **reload**: the same command again, where every file is unchanged;
- **--server-side**: the database computes the fingerprints instead.

Times are wall-clock, start to exit for the commands; the baseline and the
first load are the best of two, and a CHECKPOINT precedes each timed load.  Afterwards the two
loaded tables must hold the same fingerprints for every key, the counts must
match the corpus, and ``nearsim_verify`` must find both rotation indexes healthy.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psycopg
from psycopg import sql

from nearsim.client.samples import Chapter

MB = 1_000_000
FULL_MB = 105  # the target is judged on at least 100 MB
QUICK_MB = 3
TARGET_RATIO = 0.70  # nearsim-load at >= 70% of the plain COPY rate
FILES_PER_DIRECTORY = 1000
SEED = 20261122


@dataclass(frozen=True)
class Corpus:
    directory: Path
    files: int
    nbytes: int


@dataclass(frozen=True)
class LoadResult:
    name: str
    seconds: float
    documents: int
    nbytes: int
    summary: dict[str, Any] | None = None  # the loader's --json summary

    @property
    def mb_per_second(self) -> float:
        return self.nbytes / MB / self.seconds

    @property
    def docs_per_second(self) -> float:
        return self.documents / self.seconds


def write_corpus(chapters: Sequence[Chapter], megabytes: float, directory: Path) -> Corpus:
    """Files of chapters with random verses left out, ``megabytes`` in all."""
    rng = random.Random(SEED)
    target = megabytes * MB
    total = files = 0
    while total < target:
        chapter = rng.choice(chapters)
        verses = [v for v in chapter.text.splitlines(keepends=True) if rng.random() >= 0.1]
        text = f"{chapter.ref}, copy {files}\n" + "".join(verses)
        folder = directory / f"{files // FILES_PER_DIRECTORY:03d}"
        if files % FILES_PER_DIRECTORY == 0:
            folder.mkdir(parents=True)
        data = text.encode()
        (folder / f"{files:06d}.txt").write_bytes(data)
        total += len(data)
        files += 1
    return Corpus(directory, files, total)


def checkpoint(conn: psycopg.Connection[Any]) -> None:
    """Write dirty buffers out now, so that no load pays for an earlier one's."""
    try:
        conn.execute("CHECKPOINT")
    except psycopg.errors.InsufficientPrivilege:
        conn.rollback()


def plain_copy(conn: psycopg.Connection[Any], schema: str, corpus: Corpus, name: str,
               compression: str | None = None) -> LoadResult:
    """Read every file and COPY (key, body) into a table without the extension."""
    table = sql.Identifier(schema, name)
    conn.execute(sql.SQL("CREATE TABLE {} (key text PRIMARY KEY, body text {})").format(
        table, sql.SQL(f"COMPRESSION {compression}" if compression else "")))
    conn.commit()
    checkpoint(conn)
    started = time.perf_counter()
    paths = sorted(str(p) for p in corpus.directory.rglob("*.txt"))
    with conn.cursor().copy(sql.SQL("COPY {} (key, body) FROM STDIN").format(table)) as copy:
        for path in paths:
            with open(path, encoding="utf-8") as file:
                copy.write_row((path, file.read()))
    conn.commit()
    seconds = time.perf_counter() - started
    count = conn.execute(sql.SQL("SELECT count(*) FROM {}").format(table)).fetchone()
    conn.commit()
    if count is None or count[0] != corpus.files:
        raise RuntimeError(f"plain COPY stored {count} rows of {corpus.files}")
    label = "plain COPY" + (f", {compression} like nearsim's table" if compression else "")
    return LoadResult(label, seconds, corpus.files, corpus.nbytes)


def lz4_available(conn: psycopg.Connection[Any]) -> bool:
    row = conn.execute("SELECT 'lz4' = ANY (enumvals) FROM pg_settings"
                       " WHERE name = 'default_toast_compression'").fetchone()
    conn.commit()
    return bool(row and row[0])


def best(results: Sequence[LoadResult]) -> LoadResult:
    return min(results, key=lambda r: r.seconds)


def run_loader(conn: psycopg.Connection[Any], dsn: str, table: str, corpus: Corpus, name: str,
               *extra: str) -> LoadResult:
    """``nearsim load`` in a subprocess, timed from start to exit.

    The table is made first with ``nearsim init``, untimed, as the
    baseline's table is.
    """
    init = subprocess.run([sys.executable, "-m", "nearsim.client.cli", "init", "--dsn", dsn,
                           "--table", table], capture_output=True, text=True)  # fmt: skip
    if init.returncode != 0:
        raise RuntimeError(f"nearsim init: exit status {init.returncode}: {init.stderr.strip()}")
    checkpoint(conn)
    command = [sys.executable, "-m", "nearsim.client.cli", "load", str(corpus.directory),
               "--dsn", dsn, "--table", table, "--quiet", "--json", *extra]
    started = time.perf_counter()
    result = subprocess.run(command, capture_output=True, text=True)
    seconds = time.perf_counter() - started
    if result.returncode != 0:
        raise RuntimeError(f"{name}: exit status {result.returncode}: {result.stderr.strip()}")
    summary = json.loads(result.stdout)
    return LoadResult(name, seconds, corpus.files, corpus.nbytes, summary)


def check_tables(conn: psycopg.Connection[Any], schema: str, corpus: Corpus) -> list[str]:
    """Problems with the loaded tables: counts, fingerprints, index health."""
    problems = []
    client, server = sql.Identifier(schema, "loaded_0"), sql.Identifier(schema, "server_side")
    for table in (client, server):
        name = table.as_string(conn)
        row = conn.execute(sql.SQL("SELECT count(*), count(si) FROM {}").format(table)).fetchone()
        if row != (corpus.files, corpus.files):
            problems.append(f"{name}: {row} rows/fingerprints, expected {corpus.files}")
        health = conn.execute("SELECT ok FROM nearsim_verify(%s::regclass)", [name]).fetchone()
        if health != (True,):
            problems.append(f"{name}: nearsim_verify is not ok")
    differing = conn.execute(sql.SQL(
        "SELECT count(*) FROM {} AS c FULL JOIN {} AS s USING (key)"
        " WHERE c.si IS DISTINCT FROM s.si").format(client, server)).fetchone()
    if differing != (0,):
        problems.append(f"{differing} keys have different client and server fingerprints")
    conn.commit()
    return problems


def bulk_load(dsn: str, conn: psycopg.Connection[Any], schema: str, chapters: Sequence[Chapter],
              quick: bool) -> tuple[list[LoadResult], list[str]]:
    """Section 9: the corpus, the four loads and their checks."""
    megabytes = QUICK_MB if quick else FULL_MB
    workdir = Path(tempfile.mkdtemp(prefix="nearsim-bench-load-"))
    try:
        started = time.perf_counter()
        corpus = write_corpus(chapters, megabytes, workdir / "corpus")
        print(f"\n9. Bulk loading: {corpus.files:,} text files, {corpus.nbytes / MB:.1f} MB"
              f" (written in {time.perf_counter() - started:.1f} s), {os.cpu_count()} cores\n")
        os.sync()  # the corpus is in the page cache for every load alike
        # Best of two for the baseline and the first load, alternating, so
        # that neither gains from the state the other left behind.
        repeat = 1 if quick else 2
        baselines, loads = [], []
        for attempt in range(repeat):
            baselines.append(plain_copy(conn, schema, corpus, f"plain_copy_{attempt}"))
            loads.append(run_loader(conn, dsn, f"{schema}.loaded_{attempt}", corpus,
                                    "nearsim-load"))  # fmt: skip
        results = [best(baselines)]
        if lz4_available(conn):
            results.append(plain_copy(conn, schema, corpus, "plain_copy_lz4", "lz4"))
        results += [
            best(loads),
            run_loader(conn, dsn, f"{schema}.loaded_0", corpus,
                       "nearsim-load again (all unchanged)"),
            run_loader(conn, dsn, f"{schema}.server_side", corpus, "nearsim-load --server-side",
                       "--server-side"),
        ]  # fmt: skip
        problems = check_tables(conn, schema, corpus)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    baseline = results[0].mb_per_second
    rows = []
    for r in results:
        counts = ("-" if r.summary is None else
                  f"{r.summary['loaded']:,} new, {r.summary['unchanged']:,} unchanged")
        rows.append([r.name, f"{r.seconds:.1f}", f"{r.docs_per_second:,.0f}",
                     f"{r.mb_per_second:.1f}", f"{r.mb_per_second / baseline:.2f}", counts])
    widths = [max(len(str(x)) for x in column) for column in zip(
        ["load", "s", "docs/s", "MB/s", "vs COPY", "documents"], *rows, strict=True)]
    for index, row in enumerate([["load", "s", "docs/s", "MB/s", "vs COPY", "documents"],
                                 *rows]):
        cells = [str(c).ljust(w) if i in (0, 5) else str(c).rjust(w)
                 for i, (c, w) in enumerate(zip(row, widths, strict=True))]
        print("   " + "  ".join(cells).rstrip())
        if index == 0:
            print("   " + "  ".join("-" * w for w in widths))
    print()
    if problems:
        for problem in problems:
            print(f"   CHECK FAILED: {problem}")
    else:
        print("   Both loaded tables hold every file, the client's fingerprints equal the"
              " server's for every key, and nearsim_verify finds both rotation indexes healthy.")
    return results, problems
