"""nearsim-load keeps a record's fields but its text in the ``fields`` column of its
own table, typed as JSON; a changed field is written again; a table made before
the column gets it, and a role that cannot add it is told its fields are dropped."""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

import psycopg
import pytest
from click.testing import CliRunner, Result
from psycopg import sql

from nearsim.client.cli import cli

RECORDS: list[dict[str, Any]] = [
    {"id": 11, "url": "https://a.example/11", "text": "one text of its own"},
    {"id": 20, "url": "https://b.example/20", "fetched": "2023-01-01", "text": "another text",
     "tags": ["x", "y"], "score": 1.5},
    {"id": 30, "url": "https://c.example/30", "fetched": "2022-07-07", "text": "a third text",
     "ok": True},
]


def text_of(seed: int) -> str:
    return " ".join(f"word{seed}x{n}" for n in range(40))


def write_jsonl(path: Path, records: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(record) + "\n" for record in records))
    return path


def select(dsn: str, query: sql.Composable, *params: Any) -> list[tuple[Any, ...]]:
    with psycopg.connect(dsn) as conn:
        return conn.execute(query, list(params) or None).fetchall()


def load(database: str, table: str, *paths: Path, extra: tuple[str, ...] = ()) -> Result:
    result = CliRunner().invoke(cli, ["load", *map(str, paths), "--dsn", database, "--table",
                                      table, "--quiet", "--json", "--workers", "1", *extra],
                                catch_exceptions=False)  # fmt: skip
    assert result.exit_code == 0, result.output
    return result


@pytest.fixture(scope="module")
def crawl(database: str, tmp_path_factory: pytest.TempPathFactory) -> str:
    directory = tmp_path_factory.mktemp("crawl")
    table = f"crawl_{uuid.uuid4().hex[:8]}"
    load(database, table, write_jsonl(directory / "crawl.jsonl", RECORDS), extra=("--create",))
    return table


def test_loaded_records_keep_every_field_but_the_text_typed(database: str, crawl: str) -> None:
    stored = dict(select(database, sql.SQL("SELECT key, fields FROM {}").format(
        sql.Identifier(crawl))))
    assert stored["20"] == {"id": 20, "url": "https://b.example/20", "fetched": "2023-01-01",
                            "tags": ["x", "y"], "score": 1.5}
    assert stored["30"]["ok"] is True
    assert stored["11"] == {"id": 11, "url": "https://a.example/11"}


def test_a_file_keeps_no_fields(database: str, tmp_path: Path) -> None:
    table = f"files_{uuid.uuid4().hex[:8]}"
    (tmp_path / "a.txt").write_text(text_of(7))
    load(database, table, tmp_path / "a.txt", extra=("--create",))
    assert select(database, sql.SQL("SELECT fields FROM {}").format(sql.Identifier(table))) \
        == [(None,)]


def test_a_record_whose_fields_changed_is_updated(database: str, tmp_path: Path) -> None:
    table = f"reload_{uuid.uuid4().hex[:8]}"
    path = tmp_path / "r.jsonl"
    write_jsonl(path, [{"id": "a", "url": "u1", "text": text_of(8)}])
    load(database, table, path, extra=("--create",))
    write_jsonl(path, [{"id": "a", "url": "u2", "text": text_of(8)}])
    assert json.loads(load(database, table, path).stdout)["updated"] == 1
    assert json.loads(load(database, table, path).stdout)["unchanged"] == 1
    assert select(database, sql.SQL("SELECT fields FROM {}").format(sql.Identifier(table))) \
        == [({"id": "a", "url": "u2"},)]


def test_a_table_made_before_the_fields_column_gets_it(database: str, tmp_path: Path) -> None:
    table = f"old_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(database, autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE TABLE {} (key text PRIMARY KEY, source text NOT NULL,"
                             " content_hash bytea NOT NULL, body text NOT NULL, si bigint,"
                             " loaded_at timestamptz NOT NULL DEFAULT now())").format(
            sql.Identifier(table)))
        conn.execute("SELECT nearsim_enable(%s, 'body')", [table])
    records = [{"id": 1, "x": [1], "text": "a b c d"}]
    load(database, table, write_jsonl(tmp_path / "o.jsonl", records))
    assert select(database, sql.SQL("SELECT fields FROM {}").format(sql.Identifier(table))) \
        == [({"id": 1, "x": [1]},)]


def test_a_role_that_cannot_add_the_column_loads_and_says_the_fields_are_dropped(
        database: str, tmp_path: Path) -> None:  # fmt: skip
    table, role = f"theirs_{uuid.uuid4().hex[:8]}", f"loader_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(database, autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE TABLE {} (key text PRIMARY KEY, source text NOT NULL,"
                             " content_hash bytea NOT NULL, body text NOT NULL, si bigint,"
                             " loaded_at timestamptz NOT NULL DEFAULT now())").format(
            sql.Identifier(table)))
        conn.execute("SELECT nearsim_enable(%s, 'body')", [table])
        conn.execute(sql.SQL("CREATE ROLE {} LOGIN").format(sql.Identifier(role)))
        conn.execute(sql.SQL("GRANT SELECT, INSERT, UPDATE ON {} TO {}").format(
            sql.Identifier(table), sql.Identifier(role)))
    try:
        path = write_jsonl(tmp_path / "t.jsonl", [{"id": 1, "url": "u", "text": text_of(9)}])
        result = CliRunner().invoke(cli, ["load", str(path), "--dsn", f"{database} user={role}",
                                          "--table", table, "--workers", "1", "--json"],
                                    catch_exceptions=False)  # fmt: skip
        assert result.exit_code == 0, result.output
        assert json.loads(result.stdout)["loaded"] == 1
        assert "has no column fields and only its owner" in result.stderr
        assert f"{path}:1" in result.stderr
        assert "fields" not in dict(select(database, sql.SQL(
            "SELECT attname, 1 FROM pg_attribute WHERE attrelid = {}::regclass").format(
                sql.Literal(table))))
    finally:
        with psycopg.connect(database, autocommit=True) as conn:
            conn.execute(sql.SQL("DROP TABLE {} CASCADE").format(sql.Identifier(table)))
            conn.execute(sql.SQL("DROP ROLE {}").format(sql.Identifier(role)))




def test_csv_and_parquet_records_keep_their_fields(database: str, tmp_path: Path) -> None:
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    import datetime

    table = f"formats_{uuid.uuid4().hex[:8]}"
    (tmp_path / "a.csv").write_text(f"id,url,text\nc1,https://x,{text_of(1)}\n")
    pq.write_table(pa.table({"id": [7], "when": [datetime.date(2024, 5, 1)],
                             "n": [3.25], "text": [text_of(2)]}), tmp_path / "b.parquet")
    load(database, table, tmp_path / "a.csv", tmp_path / "b.parquet", extra=("--create",))
    stored = dict(select(database, sql.SQL("SELECT key, fields FROM {}").format(
        sql.Identifier(table))))
    assert stored == {"c1": {"id": "c1", "url": "https://x"},  # CSV fields are strings
                      "7": {"id": 7, "when": "2024-05-01", "n": 3.25}}


def test_a_field_with_a_nul_character_fails_its_record_only(database: str,
                                                            tmp_path: Path) -> None:
    table = f"nul_{uuid.uuid4().hex[:8]}"
    path = write_jsonl(tmp_path / "n.jsonl", [{"id": 1, "note": "a\u0000b", "text": text_of(3)},
                                              {"id": 2, "note": "fine", "text": text_of(4)}])
    result = CliRunner().invoke(cli, ["load", str(path), "--dsn", database, "--table", table,
                                      "--create", "--json", "--workers", "1"])
    assert result.exit_code == 1
    assert "field 'note' contains a NUL character" in result.stderr
    assert json.loads(result.stdout)["loaded"] == 1
