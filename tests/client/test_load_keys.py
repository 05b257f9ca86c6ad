"""Whose key is it: a key stored from one file is not silently replaced by
another file's document; reloading the same file still skips or updates."""

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
from nearsim.client.documents import DocumentTable
from nearsim.client.loader import Loader, LoadOptions, Reporter
from nearsim.client.sources import BytesRead, Failure, SourceOptions, iter_inputs, origin

FIRST = "In the beginning God created the heaven and the earth and the earth was without form"
SECOND = "Now it came to pass in the days when the judges ruled that there was a famine"


def load(dsn: str, table: str, *args: str) -> Result:
    return CliRunner().invoke(
        cli,
        ["load", *args, "--dsn", dsn, "--table", table, "--quiet", "--json", "--workers", "1"],
        catch_exceptions=False,
    )


def summary(result: Result) -> dict[str, Any]:
    found: dict[str, Any] = json.loads(result.stdout)
    return found


def stored(dsn: str, table: str) -> dict[str, tuple[str, str]]:
    """key -> (source, body)"""
    with psycopg.connect(dsn) as conn:
        rows = conn.execute(
            sql.SQL("SELECT key, source, body FROM {}").format(sql.Identifier(table))
        ).fetchall()
    return {key: (source, body) for key, source, body in rows}


def csv_file(path: Path, *records: tuple[str, str]) -> Path:
    path.write_text("id,text\n" + "".join(f"{key},{text}\n" for key, text in records))
    return path


def test_origin_is_the_file_of_a_source() -> None:
    assert origin("/data/a.csv:12") == "/data/a.csv"
    assert origin("/data/a.csv") == "/data/a.csv"
    assert origin("/data/odd:name.txt") == "/data/odd:name.txt"
    assert origin("/data/b.jsonl:3:7") == "/data/b.jsonl:3"


def test_a_key_stored_from_another_file_is_refused_and_named(database: str, tmp_path: Path) -> None:
    table = f"keys_{uuid.uuid4().hex[:8]}"
    a = csv_file(tmp_path / "a.csv", ("1", FIRST), ("2", SECOND))
    b = csv_file(tmp_path / "b.csv", ("1", SECOND + " again"), ("3", FIRST + " too"))
    first = load(database, table, "--create", str(a))
    assert first.exit_code == 0, first.output

    second = load(database, table, str(b))
    assert second.exit_code == 1, second.output
    assert summary(second) | {"seconds": 0, "bytes": 0} == {
        "loaded": 1,
        "updated": 0,
        "skipped_near_duplicates": 0,
        "recorded_near_duplicates": 0,
        "unchanged": 0,
        "failed": 1,
        "failed_by_reason": {"duplicate-key": 1},
        "bytes": 0,
        "seconds": 0,
        "interrupted": False,
        "encodings": {str(b): "utf-8"},  # a CSV file's, as read
    }
    line = next(line for line in second.stderr.splitlines() if "[duplicate-key]" in line)
    assert line.startswith(f"{b}:2: ")
    assert f"{a}:2" in line and f"{b}:2" in line.split(": ", 1)[1]  # both sources, in the message
    assert "--replace" in line
    assert "failed: duplicate-key" not in second.stderr  # with --json, the summary is the JSON
    assert stored(database, table)["1"] == (f"{a}:2", FIRST)  # not replaced

    again = load(database, table, str(b))  # the same refusal, every time
    assert again.exit_code == 1 and summary(again)["failed_by_reason"] == {"duplicate-key": 1}
    assert summary(again)["unchanged"] == 1


def test_replace_overwrites_documents_of_another_file(database: str, tmp_path: Path) -> None:
    table = f"keys_{uuid.uuid4().hex[:8]}"
    a = csv_file(tmp_path / "a.csv", ("1", FIRST), ("2", SECOND))
    b = csv_file(tmp_path / "b.csv", ("1", SECOND + " again"), ("2", SECOND))
    assert load(database, table, "--create", str(a)).exit_code == 0

    replaced = load(database, table, "--replace", str(b))
    assert replaced.exit_code == 0, replaced.output
    # the same text from another file is replaced too: the document is b's now
    assert (summary(replaced)["updated"], summary(replaced)["failed"]) == (2, 0)
    assert stored(database, table) == {"1": (f"{b}:2", SECOND + " again"), "2": (f"{b}:3", SECOND)}
    assert load(database, table, str(b)).exit_code == 0  # b's own now: unchanged
    refused = load(database, table, str(a))
    assert refused.exit_code == 1 and summary(refused)["failed"] == 2


def test_reloading_the_same_file_skips_or_updates(database: str, tmp_path: Path) -> None:
    table = f"keys_{uuid.uuid4().hex[:8]}"
    a = csv_file(tmp_path / "a.csv", ("1", FIRST), ("2", SECOND))
    jsonl = tmp_path / "c.jsonl"
    jsonl.write_text(json.dumps({"id": "j", "text": FIRST}) + "\n")
    files = tmp_path / "files"
    files.mkdir()
    (files / "x.txt").write_text(SECOND)
    assert load(database, table, "--create", str(a), str(jsonl), str(files)).exit_code == 0

    rerun = load(database, table, str(a), str(jsonl), str(files))
    assert rerun.exit_code == 0, rerun.output
    assert (summary(rerun)["unchanged"], summary(rerun)["failed"]) == (4, 0)

    # The same file edited: a line comes first and a text changes; its
    # records move to other lines but are still its own.
    a.write_text(f"id,text\n0,a new record\n1,{FIRST} changed\n2,{SECOND}\n")
    jsonl.write_text("\n" + json.dumps({"id": "j", "text": FIRST + " changed"}) + "\n")
    edited = load(database, table, str(a), str(jsonl), str(files))
    assert edited.exit_code == 0, edited.output
    assert {k: summary(edited)[k] for k in ("loaded", "updated", "unchanged", "failed")} == {
        "loaded": 1,
        "updated": 2,
        "unchanged": 2,
        "failed": 0,
    }
    assert stored(database, table)["1"] == (f"{a}:3", FIRST + " changed")
    assert stored(database, table)["j"] == (f"{jsonl}:2", FIRST + " changed")


def test_a_duplicate_in_one_run_names_the_first_source(database: str, tmp_path: Path) -> None:
    table = f"keys_{uuid.uuid4().hex[:8]}"
    a = csv_file(tmp_path / "a.csv", ("1", FIRST))
    b = csv_file(tmp_path / "b.csv", ("1", SECOND))
    for extra in ((), ("--replace",)):  # --replace is about stored documents, not this run's
        result = load(database, f"{table}{len(extra)}", "--create", str(a), str(b), *extra)
        assert result.exit_code == 1, result.output
        line = next(line for line in result.stderr.splitlines() if "[duplicate-key]" in line)
        assert line.startswith(f"{b}:2: ") and f"from {a}:2" in line, line
        assert f"from {b}:2" in line.split(": ", 1)[1]
        assert stored(database, f"{table}{len(extra)}") == {"1": (f"{a}:2", FIRST)}


def test_a_file_is_refused_where_a_record_has_its_path_as_key(
    database: str, tmp_path: Path
) -> None:
    table = f"keys_{uuid.uuid4().hex[:8]}"
    document = tmp_path / "letter.txt"
    document.write_text(SECOND)
    records = tmp_path / "r.jsonl"
    records.write_text(json.dumps({"id": str(document), "text": FIRST}) + "\n")
    assert load(database, table, "--create", str(records)).exit_code == 0
    result = load(database, table, str(document))
    assert result.exit_code == 1
    assert f"stored from {records}:1, not from {document}" in result.stderr


class Recorder(Reporter):
    def __init__(self) -> None:
        self.failures: list[Failure] = []

    def failure(self, failure: Failure) -> None:
        self.failures.append(failure)


def test_a_key_stored_meanwhile_from_another_file_is_refused_in_the_merge(
    database: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A first load asks for no stored keys; one stored meanwhile (by another
    loader) makes the batch merge, and the merge keeps the rule."""
    conn = psycopg.connect(database, autocommit=True)
    table = DocumentTable(conn, f"keys_{uuid.uuid4().hex[:8]}")
    table.create()
    a = csv_file(tmp_path / "a.csv", ("1", FIRST))
    b = csv_file(tmp_path / "b.csv", ("1", SECOND), ("2", SECOND + " too"))

    def run(path: Path, options: LoadOptions) -> tuple[Recorder, dict[str, Any]]:
        recorder, read = Recorder(), BytesRead()
        with psycopg.connect(database) as lookup:
            loader = Loader(conn, lookup, table, options, recorder, read)
            done = loader.run(iter_inputs([str(path)], SourceOptions(), read=read))
        return recorder, done.as_dict()

    run(a, LoadOptions(workers=1))
    monkeypatch.setattr(Loader, "_is_empty", lambda self: True)
    recorder, done = run(b, LoadOptions(workers=1))
    assert (done["loaded"], done["updated"], done["failed_by_reason"]) == (
        1,
        0,
        {"duplicate-key": 1},
    )
    assert [f.source for f in recorder.failures] == [f"{b}:2"]
    assert f"stored from {a}:2" in recorder.failures[0].message
    recorder, done = run(b, LoadOptions(workers=1, replace=True))
    assert (done["updated"], done["unchanged"], done["failed"]) == (1, 1, 0)
    assert stored(database, table.name)["1"] == (f"{b}:2", SECOND)


def test_the_first_in_the_run_wins_whatever_became_of_it(database: str, tmp_path: Path) -> None:
    """b.csv replaces a.csv's document; a.csv, later in the same run and
    unchanged since it was stored, is then the duplicate (in input order)."""
    table = f"keys_{uuid.uuid4().hex[:8]}"
    a = csv_file(tmp_path / "a.csv", ("1", FIRST))
    b = csv_file(tmp_path / "b.csv", ("1", SECOND))
    assert load(database, table, "--create", str(a)).exit_code == 0
    result = load(database, table, "--replace", str(b), str(a))
    assert result.exit_code == 1
    assert (summary(result)["updated"], summary(result)["unchanged"]) == (1, 0)
    line = next(line for line in result.stderr.splitlines() if "[duplicate-key]" in line)
    assert line.startswith(f"{a}:2: ") and f"already loaded in this run from {b}:2" in line
    assert stored(database, table) == {"1": (f"{b}:2", SECOND)}
