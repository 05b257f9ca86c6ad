"""Searches under concurrency (benchmarks/concurrency.py): the answers it checks
against, the writers' rows that cannot change them, the check that stops a run
on a wrong answer, and a small run of the whole through pgbench."""

from __future__ import annotations

import json
import secrets
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import psycopg
import pytest
from psycopg import sql

from benchmarks import common, concurrency
from benchmarks.common import BenchError
from benchmarks.docsets import UNIFORM, make_docset, make_queries, popcount, random_fingerprints

ROOT = Path(__file__).resolve().parents[2]

needs_pgbench = pytest.mark.skipif(shutil.which(concurrency.PGBENCH) is None,
                                   reason=f"no pgbench at {concurrency.PGBENCH}")


def test_answers_list_the_rows_within_the_radius_and_the_nearest_by_distance_then_id() -> None:
    values = np.array([0, 0b1, 0b11, 0b1, 0b111111, 0b1111111, *(0x7F00 | i for i in range(24))],
                      dtype=np.int64)
    answers = concurrency.exact_answers(values, np.array([0], dtype=np.int64))
    assert answers.within[0] == "1:0,2:1,3:2,4:1,5:6"
    nearest = answers.nearest[0].split(",")
    assert nearest[:6] == ["1:0", "2:1", "4:1", "3:2", "5:6", "6:7"]
    assert len(nearest) == concurrency.WANTED
    assert answers.farthest[0] == int(nearest[-1].split(":")[1])


def test_writers_rows_are_farther_from_every_query_than_its_answers() -> None:
    rng = np.random.default_rng(5)
    queries = random_fingerprints(rng, 20)
    farthest = [12] * 10 + [3] * 10  # under the radius: the radius is the limit
    rows = concurrency.far_rows(rng, queries, farthest, 5000)
    assert len(rows) == 5000
    for query, most in zip(queries.tolist(), farthest, strict=True):
        assert int(popcount(rows ^ np.int64(query)).min()) > max(most, concurrency.RADIUS)


def test_pgbench_figures_are_read_from_its_report_and_a_missing_one_is_an_error() -> None:
    report = ("number of transactions actually processed: 26220\n"
              "number of failed transactions: 0 (0.000%)\n"
              "latency average = 0.152 ms\n"
              "tps = 13119.715149 (without initial connection time)\n")
    assert concurrency.pgbench_figures(report) == {
        "transactions": 26220.0, "failed": 0.0, "tps": 13119.715149}
    with pytest.raises(BenchError, match="pgbench printed no tps"):
        concurrency.pgbench_figures("number of transactions actually processed: 3\n")


@pytest.fixture
def bench(database: str, tmp_path: Path) -> Iterator[concurrency.Bench]:
    """A Bench over 3,000 uniform documents and 8 queries (no HNSW), in a scratch schema."""
    conn = common.connect(database)
    common.prepare_session(conn)
    schema = f"conc_test_{secrets.token_hex(4)}"
    conn.execute(sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(schema)))
    try:
        rng = np.random.default_rng(11)
        values = random_fingerprints(rng, 3000)
        docset = make_docset(conn, schema, UNIFORM, values, make_queries(rng, values, 8),
                             "random")
        yield concurrency.Bench(conn, database, schema, docset, concurrency.PGBENCH, 2.0,
                                tmp_path)
    finally:
        conn.execute(sql.SQL("DROP SCHEMA {} CASCADE").format(sql.Identifier(schema)))
        conn.close()


@needs_pgbench
def test_a_wrong_answer_stops_the_run_and_names_the_query(bench: concurrency.Bench) -> None:
    answers = concurrency.exact_answers(bench.docset.fingerprints, bench.docset.queries)
    answers.within[2] = "1:0"  # not what the table holds for query 3
    bench.load_queries(answers)
    radius = bench.searches([])[0]
    with pytest.raises(BenchError, match=r"nearsim radius at 1 clients alone: \d+ answers differ"
                       r" from numpy's, of 1 queries \(query 3, \d+ times; numpy: 1:0\)"):
        bench.measure(radius, 1, 0)


@needs_pgbench
def test_answers_stay_exact_while_writers_insert_and_their_rows_go_afterwards(
        bench: concurrency.Bench) -> None:
    answers = concurrency.exact_answers(bench.docset.fingerprints, bench.docset.queries)
    bench.load_queries(answers)
    rng = np.random.default_rng(12)
    bench.load_pool(concurrency.far_rows(rng, bench.docset.queries, answers.farthest, 20_000))
    for search in bench.searches([]):
        run = bench.measure(search, 2, 2000)
        assert run.transactions > 0 and run.score == 1.0
        assert run.writer_rows_per_second > 0
        assert bench.table_rows(search) == bench.docset.rows  # the new rows deleted
    assert bench.next_id > bench.base  # the pool rows taken are not taken again


def test_the_section_shows_every_run_and_the_ratios() -> None:
    runs = [concurrency.Run("nearsim nearest", "nearsim", concurrency.NEAREST_SEARCH, 4, rate,
                            1_000_000, tps, 2.0, 4.0, 9000, 8960, 1.0, writers)
            for rate, tps, writers in ((0, 800.0, 0.0), (100, 600.0, 99.0))]
    runs += [concurrency.Run("HNSW nearest, ef_search 40", "HNSW", concurrency.NEAREST_SEARCH,
                             4, rate, 1_000_000, tps, 1.0, 2.0, 20000, 19968, 0.57, writers)
             for rate, tps, writers in ((0, 2000.0, 0.0), (100, 400.0, 35.0))]
    summary = concurrency.summary_rows(runs)
    assert ["ORDER BY hamming(si, q), id LIMIT 10, 4 clients, 4 writers, 100 rows/s asked,"
            " searches/s", "600", "800 (alone)", "0.75", "-", "-"] in summary
    assert any(row[2] == "400 (HNSW, ef_search 40, recall 0.570)" and row[3] == "1.50"
               for row in summary)
    page = concurrency.concurrency_section({
        "command": "python -m benchmarks.concurrency --rows 1000000", "seconds": 900.0,
        "rows": 1_000_000, "queries": 500, "run_seconds": 15.0, "hnsw_build_seconds": 220.0,
        "pgvector": "0.8.6", "shared_buffers": "128MB", "nearsim": "0.4.0",
        "postgresql": "15", "cpu": "cpu", "cores": 2, "verify": "ok, 1,000,000 rows indexed",
        "summary": summary, "runs": [run.__dict__ for run in runs]})
    assert "`python -m benchmarks.concurrency --rows 1000000`" in page
    assert "| HNSW nearest, ef_search 40 | 4 | 4 writers, 100 rows/s asked |" in page
    assert "| 35 |" in page and "9,000 exact" in page
    assert "No results" in concurrency.concurrency_section(None)
    assert "shared with other work" not in page  # no load average recorded


def test_the_page_says_how_busy_the_machine_was() -> None:
    text = concurrency.shared({"load_average": [11.04, 13.2]})
    assert "load average 11.0 at the start and 13.2 at the end" in text
    assert concurrency.shared({"load_average": [None, None]}) == ""
    assert concurrency.shared({}) == ""


@needs_pgbench
def test_a_small_run_checks_every_answer_and_writes_its_results(database: str,
                                                                tmp_path: Path) -> None:
    with psycopg.connect(database) as conn:
        if conn.execute("SELECT 1 FROM pg_available_extensions WHERE name = 'vector'"
                        ).fetchone() is None:
            pytest.skip("pgvector is not installed in the test server")
    results = tmp_path / "concurrency.json"
    done = subprocess.run(
        [sys.executable, "-m", "benchmarks.concurrency", "--dsn", database, "--rows", "3000",
         "--queries", "10", "--seconds", "1", "--clients", "1", "2", "--writer-rates", "400",
         "--ef-search", "40", "--results", str(results)],
        capture_output=True, text=True, timeout=600, cwd=ROOT, check=False)
    assert done.returncode == 0, done.stderr
    assert "every nearsim answer equal to numpy's" in done.stdout
    data = json.loads(results.read_text(encoding="utf-8"))
    assert len(data["runs"]) == 2 * 3 * 2  # clients x searches x loads
    assert data["verify"].startswith("ok")
    assert all(r["score"] == 1.0 for r in data["runs"] if r["system"] == "nearsim")
    assert all(0 <= r["score"] <= 1 for r in data["runs"] if r["system"] == "HNSW")
    # every nearest-first answer is scored, however few a client gets
    assert all(abs(r["scored"] - r["transactions"]) <= r["clients"] for r in data["runs"]
               if r["question"] == concurrency.NEAREST_SEARCH)
    assert "--dsn" not in data["command"]
