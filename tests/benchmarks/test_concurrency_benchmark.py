"""Searches under concurrency (benchmarks/concurrency.py): the answers it checks
against, the writers' rows that cannot change them, the check that stops a run
on a wrong answer, and small runs of the whole through pgbench: nearsim's half
alone (``--without-hnsw``, on any server), and with pgvector's HNSW where the
server has pgvector (where it has none, the run's refusal)."""

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
from vector_extension import pgvector_available

from benchmarks import common, concurrency, docs
from benchmarks.common import BenchError
from benchmarks.docsets import UNIFORM, make_docset, make_queries, popcount, random_fingerprints

ROOT = Path(__file__).resolve().parents[2]



@pytest.fixture(scope="module")
def pgbench() -> str:
    """pgbench: it comes with the server's package (postgresql-15, which ``make system``
    installs), so that its absence fails the tests that need it rather than skip them."""
    assert shutil.which(concurrency.PGBENCH), (
        f"no pgbench at {concurrency.PGBENCH}: it comes with the package postgresql-15"
        " (make system)")
    return concurrency.PGBENCH


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
def bench(database: str, pgbench: str, tmp_path: Path) -> Iterator[concurrency.Bench]:
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
        yield concurrency.Bench(conn, database, schema, docset, pgbench, 2.0, tmp_path)
    finally:
        conn.execute(sql.SQL("DROP SCHEMA {} CASCADE").format(sql.Identifier(schema)))
        conn.close()


def test_a_wrong_answer_stops_the_run_and_names_the_query(bench: concurrency.Bench) -> None:
    answers = concurrency.exact_answers(bench.docset.fingerprints, bench.docset.queries)
    answers.within[2] = "1:0"  # not what the table holds for query 3
    bench.load_queries(answers)
    radius = bench.searches([])[0]
    with pytest.raises(BenchError, match=r"nearsim radius at 1 clients alone: \d+ answers differ"
                       r" from numpy's, of 1 queries \(query 3, \d+ times; numpy: 1:0\)"):
        bench.measure(radius, 1, 0)


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
        assert 0 < run.writer_rows_during <= run.writer_rows  # written while it searched
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
    assert "| answers checked / recall |" in page
    assert "(`--without-hnsw` measures nearsim's half alone, on a server without pgvector)" in page
    assert "No results" in concurrency.concurrency_section(None)
    assert "shared with other work" not in page  # no load average recorded


def test_the_page_says_how_busy_the_machine_was() -> None:
    text = concurrency.shared({"load_average": [11.04, 13.2]})
    assert "load average 11.0 at the start and 13.2 at the end" in text
    assert concurrency.shared({"load_average": [None, None]}) == ""
    assert concurrency.shared({}) == ""


def test_only_the_writers_transactions_that_ended_while_the_searches_ran_are_counted(
        ) -> None:
    searches = [(100.5, 0.5), (101.0, 0.2), (102.0, 0.1)]  # from 100.0 to 102.0
    writers = [(99.9, 0.1), (100.0, 0.1), (101.5, 0.3), (102.0, 0.1), (102.1, 0.1)]
    assert concurrency.ended_within(writers, searches) == 3
    assert concurrency.ended_within(writers, []) == 0


def test_pgbench_logs_give_when_each_transaction_ended_and_how_long_it_took(
        tmp_path: Path) -> None:
    (tmp_path / "log3.123").write_text("0 0 1500 0 1700000000 250000\n"
                                       "1 0 2000 0 1700000001 5 12\n", encoding="utf-8")
    (tmp_path / "log3.124").write_text("0 1 skipped 0 1700000002 0\n", encoding="utf-8")
    (tmp_path / "log30.125").write_text("0 0 9 0 1700000003 0\n", encoding="utf-8")
    logged = concurrency.logged_transactions(tmp_path, "log3")
    assert [end for end, _ in logged] == pytest.approx([1700000000.25, 1700000001.000005])
    assert [seconds for _, seconds in logged] == pytest.approx([0.0015, 0.002])


def test_without_pgvector_the_run_stops_and_names_the_way_to_run_without_it(
        database: str) -> None:
    with psycopg.connect(database) as conn:
        with pytest.raises(BenchError, match=r"pgvector is not installed in this server: .*"
                           r" run with --without-hnsw to measure nearsim's searches alone") as e:
            concurrency.pgvector_version(conn, concurrency.WITHOUT_HNSW_HINT,
                                         "nearsim_no_such_extension")
    assert e.value.status == 2


def test_ef_search_is_refused_with_without_hnsw(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        concurrency.main(["--dsn", "dbname=x", "--without-hnsw", "--ef-search", "40"])
    assert exit_.value.code == 2
    assert "--ef-search is HNSW's: it has no use with --without-hnsw" in capsys.readouterr().err


def test_the_section_without_hnsw_says_so_and_keeps_the_ratios_to_one_client_and_alone(
        ) -> None:
    runs = [concurrency.Run("nearsim radius", "nearsim", concurrency.RADIUS_SEARCH, clients,
                            rate, 3000, tps, 0.2, 0.5, 900, 896, 1.0, writers)
            for clients, rate, tps, writers in ((1, 0, 400.0, 0.0), (4, 0, 1000.0, 0.0),
                                                (4, 400, 800.0, 390.0))]
    summary = concurrency.summary_rows(runs)
    assert [row[2:4] for row in summary] == [["400 (1 client)", "2.50"],
                                             ["1,000 (alone)", "0.80"]]
    page = concurrency.concurrency_section({
        "command": "python -m benchmarks.concurrency --without-hnsw", "seconds": 60.0,
        "rows": 3000, "queries": 10, "run_seconds": 1.0, "hnsw_build_seconds": None,
        "pgvector": None, "hnsw_left_out": concurrency.WITHOUT_HNSW, "shared_buffers": "128MB",
        "nearsim": "0.4.0", "postgresql": "15", "cpu": "cpu", "cores": 2,
        "verify": "ok, 3,000 rows indexed", "summary": summary,
        "runs": [run.__dict__ for run in runs]})
    assert "HNSW left out (--without-hnsw): nearsim's searches only" in page
    assert "pgvector None" not in page and "recall" not in page
    assert "| answers checked | writers' rows/s |" in page
    assert "| 4 writers, 400 rows/s asked | 3,000 | 800 |" in page


def small_run(database: str, pgbench: str, results: Path,
              *options: str) -> subprocess.CompletedProcess[str]:
    """The benchmark over 3,000 documents and 10 queries, 1 s a run, writers at 400 rows/s."""
    return subprocess.run(
        [sys.executable, "-m", "benchmarks.concurrency", "--dsn", database, "--pgbench", pgbench,
         "--rows", "3000", "--queries", "10", "--seconds", "1", "--writer-rates", "400",
         "--results", str(results), *options],
        capture_output=True, text=True, timeout=600, cwd=ROOT, check=False)


def test_without_hnsw_every_nearsim_search_runs_checked_at_each_client_count(
        database: str, pgbench: str, tmp_path: Path) -> None:
    vector = "SELECT 1 FROM pg_extension WHERE extname = 'vector'"
    with psycopg.connect(database, autocommit=True) as conn:
        conn.execute("DROP EXTENSION IF EXISTS vector")  # this module's database
    results = tmp_path / "concurrency.json"
    done = small_run(database, pgbench, results, "--clients", "1", "4", "16", "--without-hnsw")
    assert done.returncode == 0, done.stderr
    with psycopg.connect(database) as conn:
        assert conn.execute(vector).fetchone() is None  # pgvector not needed, not touched
    assert "HNSW left out (--without-hnsw)" in done.stdout
    assert "every nearsim answer equal to numpy's" in done.stdout  # a wrong one stops the run
    data = json.loads(results.read_text(encoding="utf-8"))
    assert "--without-hnsw" in data["hnsw_left_out"] and "--without-hnsw" in data["command"]
    assert data["pgvector"] is None and data["hnsw_build_seconds"] is None
    assert data["verify"].startswith("ok")
    runs = data["runs"]
    assert {(r["search"], r["clients"], r["writer_rate"]) for r in runs} == {
        (search, clients, rate) for search in ("nearsim radius", "nearsim nearest")
        for clients in (1, 4, 16) for rate in (0, 400)}
    assert len(runs) == 12 and all(r["system"] == "nearsim" for r in runs)
    assert all(r["tps"] > 0 and r["transactions"] > 0 for r in runs)
    assert all(r["score"] == 1.0 for r in runs if r["scored"])
    assert all(r["scored"] > 0 for r in runs if r["clients"] == 1)
    assert all(abs(r["scored"] - r["transactions"]) <= r["clients"] and r["score"] == 1.0
               for r in runs if r["question"] == concurrency.NEAREST_SEARCH)
    with_writers = [r for r in runs if r["writer_rate"]]
    assert all(r["writer_rows_per_second"] > 0 and 0 < r["writer_rows_during"] <= r["writer_rows"]
               for r in with_writers)
    assert all(r["table_rows"] == 3000 for r in runs)  # each run's new rows went afterwards
    assert not any("HNSW" in cell for row in data["summary"] for cell in row)
    page, loaded = docs.concurrency_page(tmp_path)
    assert loaded == data
    assert "HNSW left out (--without-hnsw)" in page and "(1 client)" in page
    assert "(alone)" in page


def test_a_small_run_with_hnsw_checks_every_answer_or_says_pgvector_is_missing(
        database: str, pgbench: str, tmp_path: Path) -> None:
    """Without pgvector the run with HNSW stops before it measures anything, saying what
    to do."""
    results = tmp_path / "concurrency.json"
    done = small_run(database, pgbench, results, "--clients", "1", "2", "--ef-search", "40")
    if not pgvector_available(database):
        assert done.returncode == 2
        assert "pgvector is not installed in this server" in done.stderr
        assert "--without-hnsw" in done.stderr and "Traceback" not in done.stderr
        assert not results.exists()
        return
    assert done.returncode == 0, done.stderr
    assert "every nearsim answer equal to numpy's" in done.stdout
    data = json.loads(results.read_text(encoding="utf-8"))
    assert len(data["runs"]) == 2 * 3 * 2  # clients x searches x loads
    assert data["verify"].startswith("ok")
    assert data["hnsw_left_out"] is None and data["pgvector"]
    assert all(r["score"] == 1.0 for r in data["runs"] if r["system"] == "nearsim")
    assert all(r["writer_rows_during"] > 0 for r in data["runs"] if r["writer_rate"])
    assert all(0 <= r["score"] <= 1 for r in data["runs"] if r["system"] == "HNSW")
    # every nearest-first answer is scored, however few a client gets
    assert all(abs(r["scored"] - r["transactions"]) <= r["clients"] for r in data["runs"]
               if r["question"] == concurrency.NEAREST_SEARCH)
    assert "--dsn" not in data["command"]
