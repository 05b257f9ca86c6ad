"""nearsim-load of Parquet files (as Spark writes them): rows as records, bad rows reported."""

from __future__ import annotations

import datetime
import json
from pathlib import Path
from typing import Any

import psycopg
import pyarrow as pa
import pyarrow.parquet as pq
from click.testing import CliRunner, Result

import nearsim
from nearsim.client.cli import cli

GENESIS = "In the beginning God created the heaven and the earth and the earth was without form"
RUTH = "Now it came to pass in the days when the judges ruled that there was a famine in the land"


def load(*args: str) -> Result:
    return CliRunner().invoke(cli, ["load", *args, "--quiet", "--json", "--workers", "1"])


def test_parquet_rows_are_loaded_and_bad_ones_reported(database: str, tmp_path: Path) -> None:
    table = pa.table({
        "url": pa.array([10, 11, 12, 13], pa.int64()),
        "body": pa.array([GENESIS, RUTH, None, ""]),
        "seen": pa.array([datetime.date(2026, 1, d) for d in (1, 2, 3, 4)]),
    })  # fmt: skip
    path = tmp_path / "crawl.parquet"
    pq.write_table(table, path, row_group_size=2)
    result = load(str(path), "--dsn", database, "--table", "pq_docs", "--create",
                  "--id-field", "url", "--text-field", "body")  # fmt: skip
    summary: dict[str, Any] = json.loads(result.stdout)
    assert (summary["loaded"], summary["failed"]) == (2, 2), result.output
    assert summary["failed_by_reason"] == {"invalid-record": 1, "empty": 1}
    assert f"{path}:3" in result.stderr and f"{path}:4" in result.stderr
    with psycopg.connect(database) as conn:
        rows = conn.execute("SELECT key, source, si FROM pq_docs ORDER BY key").fetchall()
    assert rows == [("10", f"{path}:1", nearsim.simhash(GENESIS)),
                    ("11", f"{path}:2", nearsim.simhash(RUTH))]
    # again: nothing new
    again = json.loads(load(str(path), "--dsn", database, "--table", "pq_docs", "--id-field",
                            "url", "--text-field", "body").stdout)  # fmt: skip
    assert (again["loaded"], again["unchanged"]) == (0, 2)


def test_parquet_fields_go_to_the_users_columns(database: str, tmp_path: Path) -> None:
    with psycopg.connect(database, autocommit=True) as conn:
        conn.execute("CREATE TABLE pages (id bigint PRIMARY KEY, seen date, content text)")
        conn.execute("SELECT nearsim_enable('pages', 'content')")
    path = tmp_path / "part-0000.parquet"
    pq.write_table(pa.table({"id": [1, 2], "text": [GENESIS, RUTH],
                             "seen": [datetime.date(2026, 3, 1), None]}), path)
    result = load(str(path), "--dsn", database, "--table", "pages", "--column", "seen=seen")
    assert result.exit_code == 0, result.output
    with psycopg.connect(database) as conn:
        assert conn.execute("SELECT id, seen, si FROM pages ORDER BY id").fetchall() == [
            (1, datetime.date(2026, 3, 1), nearsim.simhash(GENESIS)),
            (2, None, nearsim.simhash(RUTH))]


def test_a_file_that_is_not_parquet_is_one_failure(database: str, tmp_path: Path) -> None:
    path = tmp_path / "broken.parquet"
    path.write_bytes(b"PAR1 this is not really parquet")
    result = load(str(path), "--dsn", database, "--table", "pq_broken", "--create")
    assert result.exit_code == 1
    assert json.loads(result.stdout)["failed_by_reason"] == {"invalid-record": 1}
    assert "not a readable Parquet file" in result.stderr
