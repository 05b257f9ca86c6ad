"""The loader as a library: what it reports, and what it refuses."""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import psycopg
import pytest
from psycopg import sql

import nearsim
from nearsim.client.documents import DocumentTable, TableError
from nearsim.client.loader import LoadOptions, ProfileMismatch, Reporter, Task, load, prepare
from nearsim.client.sources import Failure, FileInput, RecordInput, SourceOptions, iter_inputs


class Recorder(Reporter):
    def __init__(self) -> None:
        self.failures: list[Failure] = []
        self.documents = 0
        self.bytes = 0

    def failure(self, failure: Failure) -> None:
        self.failures.append(failure)

    def progress(self, documents: int, size: int) -> None:
        self.documents += documents
        self.bytes += size


@pytest.fixture
def table(database: str) -> DocumentTable:
    conn = psycopg.connect(database, autocommit=True)
    documents = DocumentTable(conn, f"loader_{uuid.uuid4().hex[:8]}")
    documents.create(None)
    return documents


def run_load(database: str, table: DocumentTable, paths: list[str],
             options: LoadOptions | None = None) -> tuple[Recorder, dict[str, object]]:
    recorder = Recorder()
    with psycopg.connect(database) as lookup:
        summary = load(table.conn, lookup, table, iter_inputs(paths, SourceOptions()),
                       options or LoadOptions(workers=1), recorder)
    return recorder, summary.as_dict()


def test_a_file_gone_after_listing_has_vanished(tmp_path: Path) -> None:
    path = tmp_path / "a.txt"
    path.write_text("words to read")
    item = FileInput(str(path), str(path), path.stat().st_size)
    path.unlink()
    outcome = prepare(Task(item, None), LoadOptions())
    assert isinstance(outcome, Failure) and outcome.reason == "vanished"


def test_prepare_hashes_fingerprints_and_skips_the_unchanged(tmp_path: Path) -> None:
    item = RecordInput("k", "f.jsonl:1", "In the beginning God created the heaven")
    prepared = prepare(Task(item, None), LoadOptions())
    assert not isinstance(prepared, Failure)
    assert prepared.fingerprint == nearsim.simhash(item.text)  # type: ignore[union-attr]
    stored_hash = prepared.content_hash  # type: ignore[union-attr]
    again = prepare(Task(item, stored_hash), LoadOptions())
    assert type(again).__name__ == "Unchanged" and again.key == "k"
    server_side = prepare(Task(item, None), LoadOptions(server_side=True))
    assert server_side.fingerprint is None  # type: ignore[union-attr]


def test_duplicate_keys_are_reported_and_the_first_kept(
    database: str, table: DocumentTable, tmp_path: Path
) -> None:
    first, second = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    first.write_text(json.dumps({"id": "same", "text": "the first text"}) + "\n")
    second.write_text(json.dumps({"id": "same", "text": "the second text"}) + "\n"
                      + json.dumps({"id": "other", "text": "another text"}) + "\n")
    recorder, summary = run_load(database, table, [str(first), str(second)])
    assert summary["loaded"] == 2 and summary["failed_by_reason"] == {"duplicate-key": 1}
    assert recorder.failures[0].source == f"{second}:1"
    assert recorder.documents == 3  # every input counts in the progress
    stored = dict(table.conn.execute(
        sql.SQL("SELECT key, body FROM {}").format(table.identifier)).fetchall())
    assert stored == {"same": "the first text", "other": "another text"}


def test_a_table_of_another_profile_is_refused_unless_server_side(
    database: str, table: DocumentTable, tmp_path: Path
) -> None:
    (tmp_path / "a.txt").write_text("some words to load")
    conn = table.conn
    conn.execute("UPDATE nearsim_tables SET profile = 'other/9' WHERE tbl = %s::regclass",
                 [table.quoted])
    try:
        with pytest.raises(ProfileMismatch, match=r"profile 'other/9'.*--server-side"):
            run_load(database, table, [str(tmp_path)])
    finally:
        conn.execute("UPDATE nearsim_tables SET profile = %s WHERE tbl = %s::regclass",
                     [nearsim.PROFILE, table.quoted])


def test_a_table_without_the_layout_is_refused(database: str) -> None:
    conn = psycopg.connect(database, autocommit=True)
    name = f"other_{uuid.uuid4().hex[:8]}"
    conn.execute(sql.SQL("CREATE TABLE {} (id int PRIMARY KEY, body text)").format(
        sql.Identifier(name)))
    documents = DocumentTable(conn, name)
    with pytest.raises(TableError, match="needs the columns key text, source text"):
        run_load(database, documents, [])


def test_the_connection_must_be_in_autocommit_mode(database: str, table: DocumentTable) -> None:
    with psycopg.connect(database) as conn, psycopg.connect(database) as lookup:
        with pytest.raises(ValueError, match="autocommit"):
            load(conn, lookup, DocumentTable(conn, table.quoted), [], LoadOptions(workers=1))
