"""nearsim-load --on-near-duplicate: near-duplicates of stored documents (or of
earlier ones of the same load) refused, skipped or written and linked."""

from __future__ import annotations

import json
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import psycopg
import pytest
from click.testing import CliRunner, Result
from psycopg import sql

import nearsim
from nearsim.client.cli import cli
from nearsim.client.samples import kjv_chapters

CHAPTERS = {c.ref: c.text for c in kjv_chapters(["Ruth", "Jude", "Obadiah"])}
K = 6


def load(dsn: str, table: str, *args: str) -> Result:
    return CliRunner().invoke(
        cli, ["load", *args, "--dsn", dsn, "--table", table, "--quiet", "--json", "--workers",
              "1"], catch_exceptions=False)


def keys(dsn: str, table: str, column: str = "key") -> list[str]:
    with psycopg.connect(dsn) as conn:
        return sorted(str(r[0]) for r in conn.execute(sql.SQL("SELECT {} FROM {}").format(
            sql.Identifier(column), sql.Identifier(table))))


@pytest.fixture
def stored(database: str, tmp_path: Path) -> tuple[str, Path]:
    """A table holding Ruth 1 to 4; a directory of new files: an edited copy of
    Ruth 1, Jude 1, and two near-identical copies of Obadiah 1."""
    table = f"near_{uuid.uuid4().hex[:8]}"
    first = tmp_path / "first"
    first.mkdir()
    for number in range(1, 5):
        (first / f"ruth{number}.txt").write_text(CHAPTERS[f"Ruth {number}"])
    assert load(database, table, "--create", str(first)).exit_code == 0
    new = tmp_path / "new"
    new.mkdir()
    (new / "a-ruth1-edited.txt").write_text(CHAPTERS["Ruth 1"].replace("Naomi", "Naomi the"
                                                                       " widow", 1))
    (new / "b-jude.txt").write_text(CHAPTERS["Jude 1"])
    (new / "c-obadiah.txt").write_text(CHAPTERS["Obadiah 1"])
    (new / "d-obadiah-again.txt").write_text(CHAPTERS["Obadiah 1"] + " Amen.")
    for first_text, second_text in ((CHAPTERS["Ruth 1"], (new / "a-ruth1-edited.txt").read_text()),
                                    (CHAPTERS["Obadiah 1"], CHAPTERS["Obadiah 1"] + " Amen.")):
        assert nearsim.hamming(nearsim.simhash(first_text), nearsim.simhash(second_text)) <= K
    return table, new


def test_error_reports_each_near_duplicate(database: str, stored: tuple[str, Path]) -> None:
    table, new = stored
    result = load(database, table, "--on-near-duplicate", "error", "--near-distance", str(K),
                  str(new))
    assert result.exit_code == 1, result.output
    summary: dict[str, Any] = json.loads(result.stdout)
    assert summary["loaded"] == 2 and summary["failed_by_reason"] == {"near-duplicate": 2}
    assert "ruth1.txt" in result.stderr and "a-ruth1-edited.txt" in result.stderr
    assert "d-obadiah-again.txt" in result.stderr and "c-obadiah.txt" in result.stderr
    assert sorted(Path(k).name for k in keys(database, table)) == [
        "b-jude.txt", "c-obadiah.txt", "ruth1.txt", "ruth2.txt", "ruth3.txt", "ruth4.txt"]


def test_skip_leaves_them_out_and_counts_them(database: str, stored: tuple[str, Path]) -> None:
    table, new = stored
    result = load(database, table, "--on-near-duplicate", "skip", "--near-distance", str(K),
                  str(new))
    assert result.exit_code == 0, result.output
    summary: dict[str, Any] = json.loads(result.stdout)
    assert (summary["loaded"], summary["skipped_near_duplicates"], summary["failed"]) == (2, 2, 0)
    assert len(keys(database, table)) == 6


def test_record_writes_them_and_links_them(database: str, stored: tuple[str, Path]) -> None:
    table, new = stored
    result = load(database, table, "--on-near-duplicate", "record", "--near-distance", str(K),
                  str(new))
    assert result.exit_code == 0, result.output
    summary: dict[str, Any] = json.loads(result.stdout)
    assert (summary["loaded"], summary["recorded_near_duplicates"]) == (4, 2)
    with psycopg.connect(database) as conn:
        links = conn.execute(sql.SQL("SELECT new_key, existing_key, distance <= %s FROM {}"
                                     " ORDER BY 1").format(
            sql.Identifier(f"{table}_nearsim_links")), [K]).fetchall()
    assert [(Path(a).name, Path(b).name, near) for a, b, near in links] == [
        ("a-ruth1-edited.txt", "ruth1.txt", True), ("d-obadiah-again.txt", "c-obadiah.txt", True)]


def test_recorded_links_are_the_owners_and_go_with_the_table(
    database: str, stored: tuple[str, Path]
) -> None:
    """The links table is the one nearsim_guard records into: the table owner's, dropped with it."""
    table, new = stored
    owner = f"owner_{uuid.uuid4().hex[:8]}"
    ident = sql.Identifier(table)
    links = f"{table}_nearsim_links"
    with psycopg.connect(database, autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE ROLE {}").format(sql.Identifier(owner)))
        conn.execute(sql.SQL("GRANT CREATE ON SCHEMA public TO {}").format(sql.Identifier(owner)))
        try:
            conn.execute(sql.SQL("ALTER TABLE {} OWNER TO {}").format(ident, sql.Identifier(owner)))
            # loaded by another role (here a superuser) than the table's owner
            result = load(database, table, "--on-near-duplicate", "record", "--near-distance",
                          str(K), str(new))
            assert result.exit_code == 0, result.output
            assert conn.execute("SELECT pg_catalog.pg_get_userbyid(relowner) FROM pg_class"
                                " WHERE oid = %s::regclass", [links]).fetchone() == (owner,)
            # a guard that records writes the same table
            conn.execute("SELECT nearsim_guard(%s, max_distance => %s, action => 'record')",
                         [table, K])
            conn.execute(sql.SQL("INSERT INTO {} (key, source, content_hash, body)"
                                 " VALUES ('again', 'again', '\\x00', %s)").format(ident),
                         [CHAPTERS["Jude 1"]])
            assert conn.execute(sql.SQL("SELECT count(*) FROM {}").format(
                sql.Identifier(links))).fetchone() == (3,)
            conn.execute(sql.SQL("DROP TABLE {} CASCADE").format(ident))
            assert conn.execute("SELECT to_regclass(%s)", [links]).fetchone() == (None,)
        finally:
            conn.execute(sql.SQL("DROP TABLE IF EXISTS {} CASCADE").format(ident))
            conn.execute(sql.SQL("DROP OWNED BY {}").format(sql.Identifier(owner)))
            conn.execute(sql.SQL("DROP ROLE {}").format(sql.Identifier(owner)))


def test_a_table_of_ones_own(database: str, tmp_path: Path) -> None:
    table = f"own_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(database, autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE TABLE {} (id bigint PRIMARY KEY, content text)").format(
            sql.Identifier(table)))
        conn.execute(sql.SQL("INSERT INTO {} VALUES (1, %s)").format(sql.Identifier(table)),
                     [CHAPTERS["Ruth 1"]])
        conn.execute("SELECT nearsim_enable(%s, 'content')", [table])
    records = tmp_path / "new.jsonl"
    records.write_text("\n".join(json.dumps({"id": key, "text": text}) for key, text in (
        (2, CHAPTERS["Ruth 1"] + " Amen."), (3, CHAPTERS["Jude 1"]))) + "\n")
    result = load(database, table, "--on-near-duplicate", "skip", "--near-distance", str(K),
                  str(records))
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["skipped_near_duplicates"] == 1
    assert keys(database, table, "id") == ["1", "3"]


def test_two_loaders_at_once_never_both_store_near_duplicates(
        database: str, stored: tuple[str, Path], tmp_path: Path) -> None:
    """Two loaders, each with a copy of the same new chapters, started together."""
    table, _ = stored
    directories = []
    for loader in ("x", "y"):
        directory = tmp_path / loader
        directory.mkdir()
        for number, ref in enumerate(("Jude 1", "Obadiah 1")):
            (directory / f"{loader}{number}.txt").write_text(CHAPTERS[ref] + f" {loader}")
        directories.append(directory)
    processes = [subprocess.Popen(
        [sys.executable, "-m", "nearsim.client.cli", "load", str(directory), "--dsn", database,
         "--table", table, "--quiet", "--on-near-duplicate", "skip", "--near-distance", str(K),
         "--batch-rows", "1"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for directory in directories]
    for process in processes:
        _, errors = process.communicate(timeout=120)
        assert process.returncode == 0, errors
    with psycopg.connect(database) as conn:
        pairs = conn.execute("SELECT count(*) FROM nearsim_pairs(%s, %s)", [table, K]).fetchone()
    assert pairs == (0,)
    assert len(keys(database, table)) == 6  # Ruth 1-4, and one Jude and one Obadiah


def test_a_document_without_words_replaces_its_key_before_the_next_is_checked(
        database: str, stored: tuple[str, Path], tmp_path: Path) -> None:
    """Row by row, a stored document whose key is loaded again without words is
    gone by the time a later document of the load is checked: nothing is near it."""
    table, _ = stored
    again = tmp_path / "first"
    (again / "ruth1.txt").write_text("... -- ...")
    (again / "ruth5-copy.txt").write_text(CHAPTERS["Ruth 1"])
    result = load(database, table, "--on-near-duplicate", "skip", "--near-distance", str(K),
                  str(again))
    assert result.exit_code == 0, result.output
    summary: dict[str, Any] = json.loads(result.stdout)
    assert summary["skipped_near_duplicates"] == 0, summary
    with psycopg.connect(database) as conn:
        rows = dict(conn.execute(sql.SQL("SELECT key, si FROM {}").format(
            sql.Identifier(table))).fetchall())
    assert {Path(k).name: si is None for k, si in rows.items()} == {
        "ruth1.txt": True, "ruth2.txt": False, "ruth3.txt": False, "ruth4.txt": False,
        "ruth5-copy.txt": False}
