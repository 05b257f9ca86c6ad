"""Searches per second under concurrency, alone and while writers load (``make bench-concurrency``).

One enabled documents table (10 million documents by default: ``--rows``),
enabled empty and filled by COPY as :mod:`benchmarks.scale` fills it, and
pgvector's HNSW index (``bit_hamming_ops``, built as :mod:`benchmarks.hnsw`
builds it) over the same fingerprints as ``bit(64)``.  pgbench
(``-M prepared``) runs each search at 1, 4 and 16 clients for
``--seconds`` each, from a table of query fingerprints (``\\set i
random(1, N)`` and a join on it):

- nearsim, ``WHERE hamming(si, q) <= 6``;
- nearsim, ``ORDER BY hamming(si, q), id LIMIT 10`` (exact);
- HNSW, ``ORDER BY b <~> q LIMIT 10`` at each ``--ef-search`` (approximate).

Every answer is checked in the statement that gets it: the query table holds
each query's answer as numpy found it (``id:distance`` of every row, in
order), the statement compares its rows with it, and the script records a
difference at once (the run then stops with the queries in question).
HNSW's answers are scored there too: the share of its rows among the true
10 nearest (a row as near as the true 10th counts), written for every search
(the nearsim searches' scores too, every 64 for the radius search), which
gives its recall.  Each search is timed by
pgbench (``--log``: p50 and p95 of every transaction) and counted (tps).

Each search runs alone, then while 4 writers load: 4 more pgbench sessions
INSERT new rows into the same table (nearsim's documents table or HNSW's
table), in transactions of ``rate / 40`` rows at 40 transactions per second
in all (``-R``), for each ``--writer-rates`` (rows per second asked; the
rate reached is reported, since a writer can fall behind).  The new rows'
fingerprints are farther from every query than its answer (more than 6 bits
and more than its 10th nearest), and their ids larger than every old one, so
that the answers stay what numpy computed before the writers started: a
search that misses an old row or returns a new one while the index grows is
caught.  After each such run the new rows of nearsim's table are deleted and
the table vacuumed (HNSW's table keeps them: a few thousand, as its
inserts are slow).  The run ends
with ``nearsim_verify`` of the table (its rotation indexes against its rows).

Ratios are against baselines of the same run: nearsim's searches per second
against HNSW's at the same clients and load, each search with writers
against itself alone, and alone against 1 client.

pgvector is not a dependency of nearsim: without it the run stops, saying so.
``--without-hnsw`` measures nearsim's half alone (every search, client count
and load, every answer checked) and leaves HNSW out: no pgvector needed, no
HNSW rows, and the output, the results file (``hnsw_left_out``) and the
section written from it say so.

Usage: ``python -m benchmarks.concurrency --dsn DSN [--rows N] [--queries N]
[--seconds S] [--clients N ...] [--writer-rates R ...] [--ef-search N ... |
--without-hnsw] [--pgbench PATH] [--results FILE]``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import secrets
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
from psycopg import sql

import nearsim

from .common import (
    BenchError,
    Connection,
    connect,
    count_rows,
    cpu_model,
    drop_schema,
    load_average,
    pgvector_version,
    prepare_session,
    prewarm_table,
    print_table,
    run_main,
    wrap,
)
from .docsets import (
    SEED,
    UNIFORM,
    DocSet,
    Fingerprints,
    make_docset,
    make_queries,
    popcount,
    prewarm_search,
    random_fingerprints,
    shared_buffers,
)
from .hnsw import build_memory

ROWS = 10_000_000
QUERIES = 500
SECONDS = 15.0
CLIENTS = (1, 4, 16)
WRITERS = 4
WRITER_TRANSACTIONS = 40  # per second, all writers together
WRITER_RATES = (100, 10_000)  # rows per second asked of the writers
EF_SEARCH = (40, 400)  # 40: pgvector's default
RADIUS = 6
WANTED = 10
PGBENCH = "/usr/lib/postgresql/15/bin/pgbench"
WITHOUT_HNSW_HINT = ("or run with --without-hnsw to measure nearsim's searches alone, with no"
                     " comparison with HNSW")
WITHOUT_HNSW = ("left out (--without-hnsw): nearsim's searches only, with no comparison with"
                " pgvector's HNSW")

RADIUS_SEARCH = f"WHERE hamming(si, q) <= {RADIUS}"
NEAREST_SEARCH = f"ORDER BY hamming(si, q), id LIMIT {WANTED}"
# searches per client between two records of the scores: the radius search takes
# a fraction of a millisecond, the nearest-first ones many: theirs are recorded each
FLUSH = {RADIUS_SEARCH: 64, NEAREST_SEARCH: 1}


@dataclass(frozen=True)
class Search:
    """One search pgbench runs: its name, its system and its script."""

    name: str
    system: str  # "nearsim" or "HNSW"
    question: str  # RADIUS_SEARCH or NEAREST_SEARCH
    script: str
    ef_search: int | None = None
    exact: bool = True  # checked for equality; else scored by recall


@dataclass
class Run:
    """pgbench's figures for one search at one number of clients and one load."""

    search: str
    system: str
    question: str
    clients: int
    writer_rate: int  # rows/s asked of the writers, 0 = alone
    table_rows: int  # rows in the table searched when the run began
    tps: float
    p50_ms: float
    p95_ms: float
    transactions: int
    scored: int  # searches whose score was recorded (every FLUSH per client)
    score: float  # mean: 1.0 = every answer exact (nearsim), or the recall (HNSW)
    writer_rows_per_second: float = 0.0
    writer_rows: int = 0  # rows the writers inserted in the run
    writer_rows_during: int = 0  # of which in transactions ended while the searches ran


@dataclass(frozen=True)
class Answers:
    """numpy's answers to the queries: for the statement to compare with, in its format."""

    within: list[str]  # "id:distance,..." of the rows within RADIUS, by id
    nearest: list[str]  # "id:distance,..." of the WANTED nearest, by distance then id
    farthest: list[int]  # the distance of the WANTED-th nearest


def answer_text(ids: Sequence[int], distances: Sequence[int]) -> str:
    """The rows of an answer as the statements print them: ``id:distance`` joined by commas."""
    return ",".join(f"{i}:{d}" for i, d in zip(ids, distances, strict=True))


def exact_answers(fingerprints: Fingerprints, queries: Fingerprints) -> Answers:
    """Every query's rows within RADIUS and its WANTED nearest (ids are 1-based positions)."""
    within, nearest, farthest = [], [], []
    positions = np.arange(1, len(fingerprints) + 1)
    for query in queries:
        distances = popcount(fingerprints ^ query)
        near = np.flatnonzero(distances <= RADIUS)
        within.append(answer_text((near + 1).tolist(), distances[near].tolist()))
        # the WANTED nearest: the candidates within the WANTED-th smallest distance
        cut = int(np.partition(distances, WANTED - 1)[WANTED - 1])
        candidates = np.flatnonzero(distances <= cut)
        order = candidates[np.lexsort((positions[candidates], distances[candidates]))][:WANTED]
        nearest.append(answer_text((order + 1).tolist(), distances[order].tolist()))
        farthest.append(int(distances[order[-1]]))
    return Answers(within, nearest, farthest)


def far_rows(rng: np.random.Generator, queries: Fingerprints, farthest: Sequence[int],
             count: int) -> Fingerprints:
    """``count`` random fingerprints, each farther from every query than its answers:
    more than RADIUS bits and more than the query's WANTED-th nearest."""
    limit = np.maximum(np.array(farthest, dtype=np.int64), RADIUS).astype(np.uint8)
    kept: list[Fingerprints] = []
    total = 0
    while total < count:
        batch = random_fingerprints(rng, min(200_000, count - total + 1000))
        ok = np.ones(len(batch), dtype=bool)
        for query, most in zip(queries.tolist(), limit.tolist(), strict=True):
            ok &= popcount(batch ^ np.int64(query)) > most
        kept.append(batch[ok])
        total += int(ok.sum())
    return np.concatenate(kept)[:count]


PGBENCH_FIGURES = {
    "transactions": re.compile(r"number of transactions actually processed: (\d+)"),
    "failed": re.compile(r"number of failed transactions: (\d+)"),
    "tps": re.compile(r"tps = ([0-9.]+) \(without initial connection time\)"),
}


def pgbench_figures(output: str) -> dict[str, float]:
    """transactions, failed and tps from pgbench's report (failed 0 when it has no such line)."""
    figures = {}
    for name, pattern in PGBENCH_FIGURES.items():
        found = pattern.search(output)
        if found is None:
            if name == "failed":
                figures[name] = 0.0
                continue
            raise BenchError(f"pgbench printed no {name}: {output.strip()[-300:]}")
        figures[name] = float(found.group(1))
    return figures


def logged_transactions(directory: Path, prefix: str) -> list[tuple[float, float]]:
    """(end, seconds) of every transaction in pgbench's per-transaction logs (``--log``):
    when it ended (seconds since the epoch) and how long it took."""
    transactions = []
    for path in sorted(directory.glob(f"{prefix}.*")):
        with path.open(encoding="utf-8") as log:
            for line in log:
                fields = line.split()
                if len(fields) >= 6 and all(f.isdigit() for f in (fields[2], *fields[4:6])):
                    transactions.append((int(fields[4]) + int(fields[5]) / 1e6,
                                         int(fields[2]) / 1e6))
    return transactions


def ended_within(transactions: Sequence[tuple[float, float]],
                 span: Sequence[tuple[float, float]]) -> int:
    """How many of ``transactions`` ended between the start of the first of ``span`` and
    the end of its last (both as :func:`logged_transactions` gives them)."""
    if not span:
        return 0
    first = min(end - seconds for end, seconds in span)
    last = max(end for end, _ in span)
    return sum(1 for end, _ in transactions if first <= end <= last)


class Bench:
    """The tables of one run, the pgbench scripts over them, and the runs measured."""

    def __init__(self, conn: Connection, dsn: str, schema: str, docset: DocSet,
                 pgbench: str, seconds: float, directory: Path) -> None:
        self.conn, self.dsn, self.schema, self.docset = conn, dsn, schema, docset
        self.pgbench, self.seconds, self.directory = pgbench, seconds, directory
        self.bits = sql.Identifier(schema, "bits")
        self.queries = sql.Identifier(schema, "queries")
        self.wrong = sql.Identifier(schema, "wrong")
        self.scores = sql.Identifier(schema, "scores")
        self.pool = sql.Identifier(schema, "pool")
        self.batches = sql.Identifier(schema, "batches")
        self.base = docset.rows  # ids above it are the writers'
        self.next_id = docset.rows  # the last id the writers have taken from the pool
        self.pool_end = docset.rows
        self.runs: list[Run] = []

    def text(self, composed: sql.Composable) -> str:
        return composed.as_string(self.conn)

    # --- the tables ---------------------------------------------------------

    def load_queries(self, answers: Answers) -> None:
        self.conn.execute(sql.SQL(
            "CREATE TABLE {} (i integer PRIMARY KEY, si bigint NOT NULL, b bit(64) NOT NULL,"
            " within text NOT NULL, nearest text NOT NULL, farthest integer NOT NULL)").format(
            self.queries))
        copy_sql = sql.SQL("COPY {} (i, si, b, within, nearest, farthest) FROM STDIN").format(
            self.queries)
        with self.conn.cursor() as cur, cur.copy(copy_sql) as copy:
            for number, query in enumerate(self.docset.queries.tolist()):
                bits = format(query & (2**64 - 1), "064b")
                copy.write_row((number + 1, query, bits, answers.within[number],
                                answers.nearest[number], answers.farthest[number]))
        self.conn.execute(sql.SQL("CREATE UNLOGGED TABLE {} (search text, i integer)").format(
            self.wrong))
        self.conn.execute(sql.SQL("CREATE UNLOGGED TABLE {} (search text, client integer,"
                                  " searches integer, score bigint)").format(self.scores))
        self.conn.execute(sql.SQL("ANALYZE {}").format(self.queries))

    def build_hnsw(self) -> float:
        """HNSW over the same fingerprints, as benchmarks.hnsw builds it; its seconds."""
        self.conn.execute(sql.SQL("CREATE TABLE {} AS SELECT id, si::bit(64) AS b FROM {}").format(
            self.bits, self.docset.table))
        self.conn.execute(sql.SQL("ANALYZE {}").format(self.bits))
        self.conn.execute("SELECT set_config('maintenance_work_mem', %s, false)",
                          [build_memory(self.docset.rows)])
        started = time.perf_counter()
        self.conn.execute(sql.SQL("CREATE INDEX {} ON {} USING hnsw (b bit_hamming_ops)").format(
            sql.Identifier("bits_hnsw"), self.bits))
        seconds = time.perf_counter() - started
        self.conn.execute("RESET maintenance_work_mem")
        return seconds

    def load_pool(self, rows: Fingerprints) -> None:
        """The writers' rows: ids after every document, fingerprints far from every query."""
        self.conn.execute(sql.SQL("CREATE TABLE {} (n bigint PRIMARY KEY, si bigint NOT NULL)"
                                  ).format(self.pool))
        copy_sql = sql.SQL("COPY {} (n, si) FROM STDIN").format(self.pool)
        with self.conn.cursor() as cur, cur.copy(copy_sql) as copy:
            for number, value in enumerate(rows.tolist()):
                copy.write_row((self.base + number + 1, value))
        self.pool_end = self.base + len(rows)
        self.conn.execute(sql.SQL("CREATE SEQUENCE {}").format(self.batches))
        self.conn.execute(sql.SQL("ANALYZE {}").format(self.pool))

    def prewarm(self, hnsw: bool) -> None:
        prewarm_search(self.conn, self.schema, self.docset)
        if hnsw:
            prewarm_table(self.conn, self.schema,
                          self.text(sql.Identifier(self.schema, "bits_hnsw")))
        prewarm_table(self.conn, self.schema, self.text(self.queries))

    # --- the scripts ----------------------------------------------------------

    def searches(self, ef_searches: Sequence[int]) -> list[Search]:
        count = len(self.docset.queries)
        pick = f"\\set i random(1, {count})\n"
        table = self.text(self.docset.table)
        queries = self.text(self.queries)

        def exact(name: str, inner: str, order: str, expected: str) -> Search:
            statement = (f"SELECT ((SELECT coalesce(string_agg(s.id || ':' || s.d, ','"
                         f" ORDER BY {order}), '') FROM ({inner}) s) = q.{expected})::int"
                         f" AS score FROM {queries} q WHERE q.i = :i \\gset\n")
            check = (f"\\if :score = 0\nINSERT INTO {self.text(self.wrong)} VALUES"
                     f" ({self.text(sql.Literal(name))}, :i);\n\\endif\n")
            question = RADIUS_SEARCH if expected == "within" else NEAREST_SEARCH
            return Search(name, "nearsim", question,
                          pick + statement + check + self.tally(name, FLUSH[question]))

        searches = [
            exact("nearsim radius", f"SELECT d.id, hamming(d.si, q.si) AS d FROM {table} d"
                  f" WHERE hamming(d.si, q.si) <= {RADIUS}", "s.id", "within"),
            exact("nearsim nearest", f"SELECT d.id, hamming(d.si, q.si) AS d FROM {table} d"
                  f" ORDER BY hamming(d.si, q.si), d.id LIMIT {WANTED}", "s.d, s.id", "nearest"),
        ]
        for ef_search in ef_searches:
            name = f"HNSW nearest, ef_search {ef_search}"
            statement = (f"SELECT (SELECT least(count(*) FILTER (WHERE s.d <= q.farthest),"
                         f" {WANTED}) FROM (SELECT bit_count(h.b # q.b) AS d FROM"
                         f" {self.text(self.bits)} h ORDER BY h.b <~> q.b LIMIT {WANTED}) s)"
                         f" AS score FROM {queries} q WHERE q.i = :i \\gset\n")
            searches.append(Search(name, "HNSW", NEAREST_SEARCH,
                                   pick + statement + self.tally(name, FLUSH[NEAREST_SEARCH]),
                                   ef_search, exact=False))
        return searches

    def tally(self, name: str, flush: int) -> str:
        """pgbench lines adding the score up per client and writing it every ``flush``
        searches."""
        return (f"\\set searches :searches + 1\n\\set total :total + :score\n"
                f"\\if :searches % {flush} = 0\nINSERT INTO {self.text(self.scores)} VALUES"
                f" ({self.text(sql.Literal(name))}, :client_id, {flush}, :total);\n"
                f"\\set total 0\n\\endif\n")

    def writer_script(self, search: Search, batch: int, first: int) -> str:
        """Each transaction takes the next ``batch`` rows of the pool (ids after ``first``)."""
        if search.system == "HNSW":
            insert = (f"INSERT INTO {self.text(self.bits)} (id, b) SELECT p.n, p.si::bit(64)")
        else:
            insert = (f"INSERT INTO {self.text(self.docset.table)} (id, body, si)"
                      " SELECT p.n, 'new ' || p.n, p.si")
        return (f"SELECT nextval('{self.text(self.batches)}') - 1 AS b \\gset\n"
                f"{insert} FROM {self.text(self.pool)} p WHERE p.n > {first} + :b * {batch}"
                f" AND p.n <= {first} + (:b + 1) * {batch};\n")

    # --- the runs ---------------------------------------------------------------

    def pgbench_command(self, script: Path, clients: int, seconds: float,
                        log_prefix: str | None = None, rate: float | None = None) -> list[str]:
        command = [self.pgbench, "--no-vacuum", "--protocol=prepared", "--file", str(script),
                   "--client", str(clients), "--jobs", str(min(clients, 2)),
                   "--time", str(max(1, round(seconds))), "--define", "searches=0",
                   "--define", "total=0"]
        if rate is not None:
            command += ["--rate", f"{rate:g}"]
        if log_prefix is not None:
            command += ["--log", f"--log-prefix={self.directory / log_prefix}"]
        return [*command, self.dsn]

    def environment(self, ef_search: int | None) -> dict[str, str]:
        options = ["-c nearsim.profile=default/1", "-c max_parallel_workers_per_gather=0",
                   "-c jit=off"]
        if ef_search is not None:
            options.append(f"-c hnsw.ef_search={ef_search}")
        return {**os.environ, "PGOPTIONS": " ".join(options)}

    def table_rows(self, search: Search) -> int:
        table = self.bits if search.system == "HNSW" else self.docset.table
        row = self.conn.execute(sql.SQL("SELECT count(*) FROM {}").format(table)).fetchone()
        return int(row[0]) if row else 0

    def rows_after(self, search: Search, first: int) -> int:
        """Rows of the table searched whose id is above ``first``: the writers' of a run."""
        table = self.bits if search.system == "HNSW" else self.docset.table
        row = self.conn.execute(sql.SQL("SELECT count(*) FROM {} WHERE id > %s").format(table),
                                (first,)).fetchone()
        return int(row[0]) if row else 0

    def measure(self, search: Search, clients: int, writer_rate: int) -> Run:
        """One pgbench run of ``search``; with ``writer_rate``, WRITERS writers load meanwhile."""
        self.conn.execute(sql.SQL("TRUNCATE {}, {}").format(self.scores, self.wrong))
        rows_before = self.table_rows(search)
        number = len(self.runs)
        script = self.directory / f"search{number}.sql"
        script.write_text(search.script, encoding="utf-8")
        writers = None
        batch = max(1, writer_rate // WRITER_TRANSACTIONS)
        first = self.next_id
        if writer_rate:
            self.conn.execute(sql.SQL("ALTER SEQUENCE {} RESTART WITH 1").format(self.batches))
            writer_file = self.directory / f"writers{number}.sql"
            writer_file.write_text(self.writer_script(search, batch, first), encoding="utf-8")
            writers = subprocess.Popen(
                self.pgbench_command(writer_file, WRITERS, self.seconds + 2,
                                     f"wlog{number}", rate=WRITER_TRANSACTIONS),
                env=self.environment(None), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                text=True)
            time.sleep(1)  # the writers are loading when the searches start
        try:
            done = subprocess.run(
                self.pgbench_command(script, clients, self.seconds, f"log{number}"),
                env=self.environment(search.ef_search), capture_output=True, text=True,
                check=False, timeout=self.seconds * 4 + 120)
        finally:
            writer_out = writer_err = ""
            if writers is not None:
                writer_out, writer_err = writers.communicate(timeout=self.seconds * 4 + 120)
        if done.returncode != 0:
            raise BenchError(f"pgbench of {search.name} at {clients} clients failed (exit"
                             f" {done.returncode}): {done.stderr.strip()[-500:]}")
        figures = pgbench_figures(done.stdout)
        if figures["failed"]:
            raise BenchError(f"{search.name} at {clients} clients: {figures['failed']:.0f}"
                             " searches failed")
        self.check_answers(search, clients, writer_rate)
        transactions = logged_transactions(self.directory, f"log{number}")
        latencies = [seconds * 1000 for _, seconds in transactions]
        row = self.conn.execute(sql.SQL("SELECT coalesce(sum(searches), 0),"
                                        " coalesce(sum(score), 0) FROM {}").format(
            self.scores)).fetchone()
        scored, total = (int(row[0]), int(row[1])) if row else (0, 0)
        score = total / scored / (1 if search.exact else WANTED) if scored else float("nan")
        run = Run(search.name, search.system, search.question, clients, writer_rate,
                  rows_before, figures["tps"], float(np.percentile(latencies, 50)),
                  float(np.percentile(latencies, 95)), int(figures["transactions"]), scored,
                  score)
        if writers is not None:
            if writers.returncode != 0:
                raise BenchError(f"the writers of {search.name} failed (exit"
                                 f" {writers.returncode}): {writer_err.strip()[-500:]}")
            run.writer_rows_per_second = pgbench_figures(writer_out)["tps"] * batch
            run.writer_rows = self.rows_after(search, first)
            run.writer_rows_during = batch * ended_within(
                logged_transactions(self.directory, f"wlog{number}"), transactions)
            self.after_writers(search, batch)
        self.runs.append(run)
        return run

    def check_answers(self, search: Search, clients: int, writer_rate: int) -> None:
        """Stop with the queries whose answer differed from numpy's, and one of the answers."""
        wrong = self.conn.execute(sql.SQL("SELECT search, i, count(*) FROM {} GROUP BY 1, 2"
                                          " ORDER BY 3 DESC, 2").format(self.wrong)).fetchall()
        if not wrong:
            return
        load = f"with writers at {writer_rate:,} rows/s" if writer_rate else "alone"
        name, query, times_wrong = wrong[0]
        expected = "within" if search.question == RADIUS_SEARCH else "nearest"
        row = self.conn.execute(sql.SQL("SELECT {} FROM {} WHERE i = %s").format(
            sql.Identifier(expected), self.queries), (query,)).fetchone()
        raise BenchError(f"{name} at {clients} clients {load}: {sum(w[2] for w in wrong)}"
                         f" answers differ from numpy's, of {len(wrong)} queries (query {query},"
                         f" {times_wrong} times; numpy: {row[0] if row else '?'})")

    def after_writers(self, search: Search, batch: int) -> None:
        """Move past the pool rows the writers took; delete nearsim's new rows and vacuum."""
        row = self.conn.execute(sql.SQL("SELECT last_value, is_called FROM {}").format(
            self.batches)).fetchone()
        taken = int(row[0]) if row and row[1] else 0
        self.next_id += taken * batch
        if self.next_id > self.pool_end:
            raise BenchError(f"the writers of {search.name} ran out of rows: the pool holds"
                             f" {self.pool_end - self.base:,}; run with fewer --seconds or"
                             " lower --writer-rates")
        if search.system == "nearsim":
            self.conn.execute(sql.SQL("DELETE FROM {} WHERE id > %s").format(self.docset.table),
                              (self.base,))
            self.conn.execute(sql.SQL("VACUUM {}").format(self.docset.table))


def pool_rows(seconds: float, clients: int, searches: int, rates: Sequence[int]) -> int:
    """Rows enough for every writer run: each asks rate x (seconds + 3) rows at most."""
    batches = WRITER_TRANSACTIONS * (max(1, round(seconds)) + 3)
    return clients * searches * sum(batches * max(1, rate // WRITER_TRANSACTIONS)
                                    for rate in rates)


def load_name(rate: int) -> str:
    return "alone" if rate == 0 else f"4 writers, {rate:,} rows/s asked"


def summary_rows(runs: Sequence[Run]) -> list[list[str]]:
    """measurement, value, baseline, ratio, target, met: as the other summaries."""
    found = {(r.search, r.clients, r.writer_rate): r for r in runs}
    rows = []
    for r in runs:
        if r.system != "nearsim":
            continue
        what = f"{r.question}, {r.clients} client{'s' if r.clients > 1 else ''}," \
               f" {load_name(r.writer_rate)}, searches/s"
        value = f"{r.tps:,.0f}"
        if r.writer_rate:
            alone = found.get((r.search, r.clients, 0))
            if alone is not None:
                rows.append([what, value, f"{alone.tps:,.0f} (alone)",
                             f"{r.tps / alone.tps:.2f}", "-", "-"])
        elif r.clients != min(c for _, c, _ in found):
            one = found.get((r.search, min(c for _, c, _ in found), 0))
            if one is not None:
                rows.append([what, value, f"{one.tps:,.0f} ({one.clients} client)",
                             f"{r.tps / one.tps:.2f}", "-", "-"])
        if r.question == NEAREST_SEARCH:
            for other in runs:
                if (other.system == "HNSW" and other.clients == r.clients
                        and other.writer_rate == r.writer_rate):
                    ef = other.search.rsplit(" ", 1)[-1]
                    rows.append([what, value, f"{other.tps:,.0f} (HNSW, ef_search {ef},"
                                 f" recall {other.score:.3f})", f"{r.tps / other.tps:.2f}",
                                 "-", "-"])
    return rows


def run_rows(runs: Sequence[Run]) -> list[list[str]]:
    """The figures of every run, as the benchmark prints them and the page shows them."""
    return [[r.search, str(r.clients), load_name(r.writer_rate), f"{r.table_rows:,}",
             f"{r.tps:,.0f}", f"{r.p50_ms:.3g} / {r.p95_ms:.3g}",
             f"{r.transactions:,} exact" if r.system == "nearsim"
             else f"{r.score:.3f}" if r.scored else "-",
             f"{r.writer_rows_per_second:,.0f}" if r.writer_rate else "-"] for r in runs]


RUN_HEADER = ["search", "clients", "load", "rows", "searches/s", "p50 / p95 ms",
              "answers checked / recall", "writers' rows/s"]


def run_header(runs: Sequence[Run]) -> list[str]:
    """RUN_HEADER, without "recall" when no run searched HNSW."""
    if any(r.system == "HNSW" for r in runs):
        return RUN_HEADER
    return [("answers checked" if name == "answers checked / recall" else name)
            for name in RUN_HEADER]


def shared(results: dict[str, Any]) -> str:
    """What else the machine ran: its load average at the start and the end of the run."""
    before, after = results.get("load_average") or (None, None)
    if before is None or after is None:
        return ""
    return (f", shared with other work (load average {before:.1f} at the start and {after:.1f}"
            " at the end: the figures are lower than on an idle machine, and a ratio compares"
            " runs made a few minutes apart)")


def concurrency_section(results: dict[str, Any] | None) -> str:
    """The section of docs/BENCHMARKS.md, from ``concurrency.json``."""
    if results is None:
        return ("No results of `make bench-concurrency` (benchmarks/concurrency.py) next to"
                " this run.")
    from .docs import table  # docs imports this module

    runs = [Run(**r) for r in results["runs"]]
    left_out = results.get("hnsw_left_out")
    if left_out:
        against = f""". HNSW {left_out}; no pgvector index was
built or searched, and the ratios are nearsim's own (with writers against alone, more
clients against 1)"""
        scored = ""
    else:
        against = f""", and pgvector {results["pgvector"]}'s HNSW index (`bit_hamming_ops`, built in
{results["hnsw_build_seconds"]:.0f} s with maintenance_work_mem {build_memory(results["rows"])})
over the same fingerprints as `bit(64)`
(`--without-hnsw` measures nearsim's half alone, on a server without pgvector)"""
        scored = """; HNSW's answers are scored
there by recall (the share of the true 10 nearest in its 10 rows; a row as near as the true
10th counts)"""
    return f"""Written by `{results["command"]}` ({results["seconds"]:.0f} s): one table of
{count_rows(results["rows"])} documents (uniform fingerprints), enabled empty and filled by
COPY{against}. pgbench
(`-M prepared`, {results["run_seconds"]:.0f} s a run) picks one of {results["queries"]} query
fingerprints per search (`\\set i random(1, N)` and a join on the query table; three in four
are stored fingerprints with 1 to 3 bits flipped). Every answer of nearsim is compared in its
statement with numpy's (a difference stops the run: none here){scored}. With writers, 4
more pgbench sessions INSERT new rows into the same table in 40 transactions a second in all
(`-R`), whose fingerprints are farther from every query than
its answers, so that the answers stay those numpy computed; "writers' rows/s" is the rate
they reached, which falls short of the rate asked where inserts are slower than that.
shared_buffers {results["shared_buffers"]}; nearsim {results["nearsim"]}, PostgreSQL
{results["postgresql"]}; {results["cpu"]}, {results["cores"]} cores{shared(results)}. The table
ends `nearsim_verify`-clean: {results["verify"]}.

{table(["measurement", "value", "baseline", "ratio", "target", "met?"], results["summary"])}

{table(run_header(runs), run_rows(runs))}"""


def run(dsn: str, rows: int, queries: int, seconds: float, clients: Sequence[int],
        writer_rates: Sequence[int], ef_searches: Sequence[int], pgbench: str,
        results_file: str | None, command: str, hnsw: bool = True) -> int:
    """The whole benchmark; with ``hnsw`` False, nearsim's searches only (--without-hnsw)."""
    started = time.perf_counter()
    load_before = load_average()
    if shutil.which(pgbench) is None:
        raise BenchError(f"pgbench not found at {pgbench}: install PostgreSQL's client"
                         " programs or give --pgbench PATH", status=2)
    conn = connect(dsn)
    schema = f"nearsim_concurrency_{os.getpid()}_{secrets.token_hex(3)}"
    with conn, tempfile.TemporaryDirectory(prefix="nearsim-concurrency-") as directory:
        version = prepare_session(conn)
        pgvector = pgvector_version(conn, WITHOUT_HNSW_HINT) if hnsw else None
        buffers = shared_buffers(conn)
        print(f"searches under concurrency: {count_rows(rows)} documents, {queries} queries,"
              f" clients {', '.join(map(str, clients))}, {seconds:g} s a run")
        print(f"   nearsim {nearsim.__version__};"
              + (f" pgvector {pgvector};" if pgvector else "")
              + f" PostgreSQL {version}; {cpu_model()}, {os.cpu_count()} cores;"
              f" shared_buffers {buffers}")
        if not hnsw:
            print(f"   HNSW {WITHOUT_HNSW}")
        conn.execute(sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(schema)))
        try:
            rng = np.random.default_rng(SEED)
            fingerprints = random_fingerprints(rng, rows)
            chosen = make_queries(rng, fingerprints, queries)
            docset = make_docset(conn, schema, UNIFORM, fingerprints, chosen,
                                 "random 64-bit values")
            print(f"   loaded {docset.label} in {docset.load_seconds:.0f} s")
            answers = exact_answers(fingerprints, chosen)
            bench = Bench(conn, dsn, schema, docset, pgbench, seconds, Path(directory))
            bench.load_queries(answers)
            hnsw_seconds = None
            if hnsw:
                hnsw_seconds = bench.build_hnsw()
                print(f"   HNSW built in {hnsw_seconds:.0f} s")
            searches = bench.searches(ef_searches if hnsw else [])
            bench.load_pool(far_rows(rng, chosen, answers.farthest,
                                     pool_rows(seconds, len(clients), len(searches),
                                               writer_rates)))
            bench.prewarm(hnsw)
            for rate in (0, *writer_rates):
                for count in clients:
                    for search in searches:
                        r = bench.measure(search, count, rate)
                        plural = "s" if count > 1 else ""
                        print(f"   {search.name}, {count} client{plural}, {load_name(rate)}:"
                              f" {r.tps:,.0f}/s, p50 {r.p50_ms:.3g} ms"
                              + (f", writers {r.writer_rows_per_second:,.0f} rows/s"
                                 f" ({r.writer_rows_during:,} rows while it searched)"
                                 if rate else ""))
            verified = conn.execute("SELECT ok, indexed FROM nearsim_verify(%s::regclass, false)",
                                    (docset.qualified,)).fetchone()
            if verified is None or not verified[0]:
                raise BenchError(f"nearsim_verify after the runs says {verified}")
            verify = f"ok, {int(verified[1]):,} rows indexed"
        finally:
            drop_schema(conn, schema)
    print()
    print_table(run_header(bench.runs), run_rows(bench.runs), "<>>>>>>>")
    summary = summary_rows(bench.runs)
    print()
    wrap("Ratios: each search with writers against itself alone, alone against 1 client"
         + (", and nearsim's ORDER BY against HNSW's at the same clients and load." if hnsw
            else "; none against HNSW, left out by --without-hnsw."))
    print()
    print_table(["measurement", "value", "baseline", "ratio", "target", "met?"], summary,
                "<>>><<")
    total = time.perf_counter() - started
    print(f"\n   every nearsim answer equal to numpy's; total time {total:.0f} s")
    if results_file:
        payload = {"command": command, "seconds": total, "rows": rows, "queries": queries,
                   "run_seconds": seconds, "hnsw_build_seconds": hnsw_seconds,
                   "nearsim": nearsim.__version__, "postgresql": version, "pgvector": pgvector,
                   "hnsw_left_out": None if hnsw else WITHOUT_HNSW,
                   "shared_buffers": buffers,
                   "cpu": cpu_model(), "cores": os.cpu_count(),
                   "python": platform.python_version(), "verify": verify, "summary": summary,
                   "load_average": [load_before, load_average()],
                   "runs": [asdict(r) for r in bench.runs]}
        with open(results_file, "w", encoding="utf-8") as out:
            json.dump(payload, out, indent=1)
            out.write("\n")
        print(f"   results written to {results_file}")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.concurrency", description=__doc__)
    parser.add_argument("--dsn", default=os.environ.get("NEARSIM_DSN"), required=False)
    parser.add_argument("--rows", type=int, default=ROWS)
    parser.add_argument("--queries", type=int, default=QUERIES)
    parser.add_argument("--seconds", type=float, default=SECONDS, help="of each pgbench run")
    parser.add_argument("--clients", type=int, nargs="+", default=list(CLIENTS), metavar="N")
    parser.add_argument("--writer-rates", type=int, nargs="*", default=list(WRITER_RATES),
                        metavar="ROWS_PER_S", help="rows per second asked of the 4 writers")
    parser.add_argument("--ef-search", type=int, nargs="+", metavar="N",
                        help=f"of HNSW's searches (default: {' '.join(map(str, EF_SEARCH))})")
    parser.add_argument("--without-hnsw", action="store_true",
                        help="measure nearsim's searches only: no pgvector, no HNSW rows")
    parser.add_argument("--pgbench", default=PGBENCH)
    parser.add_argument("--results", metavar="FILE")
    args = parser.parse_args(argv)
    if not args.dsn:
        parser.error("--dsn (or NEARSIM_DSN) is required")
    if args.rows < 1000 or args.queries < 1 or args.seconds < 1 or min(args.clients) < 1:
        parser.error("--rows must be at least 1000, --queries and --clients at least 1 and"
                     " --seconds at least 1")
    if args.writer_rates and min(args.writer_rates) < 1:
        parser.error("--writer-rates must be at least 1 row per second")
    if args.without_hnsw and args.ef_search is not None:
        parser.error("--ef-search is HNSW's: it has no use with --without-hnsw")
    command = "python -m benchmarks.concurrency " + " ".join(
        a for a in (argv if argv is not None else sys.argv[1:]) if a != args.dsn
        and not a.startswith("--dsn"))
    try:
        return run(args.dsn, args.rows, args.queries, args.seconds, args.clients,
                   args.writer_rates, args.ef_search or list(EF_SEARCH), args.pgbench,
                   args.results, command.strip(), hnsw=not args.without_hnsw)
    except BenchError as error:
        print(f"benchmarks.concurrency: {error}", file=sys.stderr)
        return error.status


if __name__ == "__main__":
    sys.exit(run_main(main))
