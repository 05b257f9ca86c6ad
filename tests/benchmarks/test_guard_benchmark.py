"""Single-row INSERTs with and without a guard (benchmarks/guarded.py): a small run of
the whole, the rows each measurement writes, and the guard taken off afterwards."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import psycopg
import pytest

from benchmarks import common, docs, guarded
from benchmarks.common import BenchError
from benchmarks.docsets import UNIFORM, DocSet, make_docset, random_fingerprints


def test_a_small_run_measures_every_table_both_ways(database: str, tmp_path: Path,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    results = tmp_path / "guard.json"
    status = guarded.main(["--dsn", database, "--rows", "2000", "--turns", "2", "--inserts", "30",
                           "--results", str(results)])
    assert status == 0
    document = json.loads(results.read_text(encoding="utf-8"))
    tables = document["tables"]
    assert [(t["kind"], t["bands"]) for t in tables] == [
        ("uniform", 3), ("uniform", 4), ("text-like", 3), ("text-like", 4)]
    for table in tables:
        assert set(table["turns"]) == set(guarded.MODES)
        for turns in table["turns"].values():
            assert len(turns) == 2
            assert all(plain > 0 and guarded_rate > 0 for plain, guarded_rate in turns)
    printed = capsys.readouterr().out
    assert "one transaction, guard k=3, text-like 2k, 4 bands, rows/s" in printed
    assert len(document["summary"]) == 8
    # below the target's size, no target; the page shows every row
    assert {row[4] for row in document["summary"]} == {"-"}
    page, loaded = docs.guard_page(tmp_path)
    assert loaded == document
    assert page.count("| a transaction each, guard k=3, ") == 4
    assert "No results of `make bench-guard`" in docs.guard_page(tmp_path / "none")[0]
    assert all(isinstance(t["load"], float) for t in tables)
    assert "load average (one minute) as each table's turns ended: uniform 2k " in page
    conn = common.connect(database)
    try:
        left = conn.execute("SELECT count(*) FROM pg_namespace"
                            " WHERE nspname LIKE 'nearsim_guarded_%'").fetchone()
        assert left == (0,), "the scratch schema is dropped"
    finally:
        conn.close()


@pytest.fixture
def small_set(database: str) -> Iterator[tuple[common.Connection, DocSet]]:
    conn = common.connect(database)
    common.prepare_session(conn)
    schema = "nearsim_guarded_test"
    conn.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")
    conn.execute(f"CREATE SCHEMA {schema}")
    fingerprints = random_fingerprints(np.random.default_rng(7), 1000)
    docset = make_docset(conn, schema, UNIFORM, fingerprints, fingerprints[:0], "random", 3)
    yield conn, docset
    conn.execute(f"DROP SCHEMA {schema} CASCADE")
    conn.close()


@pytest.mark.parametrize("mode", guarded.MODES)
def test_each_measurement_writes_its_rows_and_takes_the_guard_off(
        small_set: tuple[common.Connection, DocSet], mode: str) -> None:
    conn, docset = small_set
    plain, guarded_rate = guarded.guard_rates(conn, docset, 5001, mode, rows=25)
    assert plain > 0 and guarded_rate > 0
    ids = conn.execute(f"SELECT min(id), max(id), count(*), count(si) FROM {docset.qualified}"
                       " WHERE id > 5000").fetchone()
    assert ids == (5001, 5050, 50, 50)
    triggers = conn.execute("SELECT count(*) FROM pg_trigger WHERE tgrelid = %s::regclass"
                            " AND tgfoid = 'nearsim_guard_check'::regproc",
                            (docset.qualified,)).fetchone()
    assert triggers == (0,), "the guard is removed after the measurement"


def test_a_guard_that_refuses_a_row_is_taken_off_all_the_same(
        small_set: tuple[common.Connection, DocSet], monkeypatch: pytest.MonkeyPatch) -> None:
    conn, docset = small_set
    # every new row equal to a stored one: the guard refuses the first
    conn.execute(f"UPDATE {docset.qualified} SET si = 0")
    monkeypatch.setattr(guarded, "RANDOM_FINGERPRINT", "0::bigint")
    with pytest.raises(psycopg.Error,
                       match="near-duplicate"):
        guarded.guard_rates(conn, docset, 7001, guarded.ONE_TRANSACTION, rows=5)
    triggers = conn.execute("SELECT count(*) FROM pg_trigger WHERE tgrelid = %s::regclass"
                            " AND tgfoid = 'nearsim_guard_check'::regproc",
                            (docset.qualified,)).fetchone()
    assert triggers == (0,)


def test_it_needs_an_autocommit_connection(small_set: tuple[common.Connection, DocSet]) -> None:
    conn, docset = small_set
    conn.autocommit = False
    try:
        with pytest.raises(BenchError, match="autocommit"):
            guarded.guard_rates(conn, docset, 9001, guarded.EACH_COMMITTED, rows=1)
    finally:
        conn.rollback()
        conn.autocommit = True


def test_a_missed_target_at_ten_million_is_listed_with_the_others() -> None:
    turns = {guarded.ONE_TRANSACTION: [[1000.0, 300.0], [1000.0, 400.0], [900.0, 200.0]],
             guarded.EACH_COMMITTED: [[100.0, 90.0]]}
    document = {"guard_distance": 3, "tables": [
        {"label": "uniform 10M", "kind": "uniform", "rows": 10_000_000, "bands": 3,
         "turns": turns}]}
    rows = guarded.summary_rows(document)
    assert rows == [
        ["single-row INSERTs, one transaction, guard k=3, uniform 10M, rows/s", "300",
         "1,000 (no guard)", "0.30", ">= 0.5", "no"],
        ["single-row INSERTs, a transaction each, guard k=3, uniform 10M, rows/s", "90",
         "100 (no guard)", "0.90", ">= 0.5", "yes"]]
    missed = docs.missed_section({"summary": []}, guard={"summary": rows})
    assert missed == ("- single-row INSERTs, one transaction, guard k=3, uniform 10M, rows/s:"
                      " 300 (target >= 0.5; baseline 1,000 (no guard))")
