"""The progress a load reports: as documents are done (before their batch
commits), by the bytes read, with a rate that is never 0 when work was done."""

from __future__ import annotations

import json
import os
import uuid
from pathlib import Path

import psycopg
from psycopg import sql

from nearsim.client.documents import DocumentTable
from nearsim.client.loadcli import (
    _ConsoleReporter,
    _CtrlC,
    _progress_bar,
    _rate,
    _scan_size,
    _summary_line,
)
from nearsim.client.loader import LoadOptions, LoadSummary, Reporter, load_paths
from nearsim.client.sources import Failure, SourceOptions

WORDS = "In the beginning God created the heaven and the earth and the earth was without form"


class Recorder(Reporter):
    """Every call, with the number of rows committed in the table at the time."""

    def __init__(self, dsn: str, table: str) -> None:
        self.watch = psycopg.connect(dsn, autocommit=True)
        self.count = sql.SQL("SELECT count(*) FROM {}").format(sql.Identifier(table))
        self.calls: list[tuple[str, int, int, int]] = []  # (what, documents, bytes, committed)

    def committed(self) -> int:
        row = self.watch.execute(self.count).fetchone()
        return int(row[0]) if row else 0

    def started(self) -> None:
        self.calls.append(("started", 0, 0, self.committed()))

    def failure(self, failure: Failure) -> None:
        self.calls.append(("failure", 0, 0, -1))

    def progress(self, documents: int, size: int) -> None:
        self.calls.append(("progress", documents, size, self.committed()))


def corpus(root: Path) -> list[str]:
    """Files, records (with blank and bad lines) and bad inputs; the paths to load."""
    files = root / "files"
    files.mkdir(parents=True)
    for number in range(150):
        (files / f"{number:03d}.txt").write_text(f"{WORDS} {number}\n" * (1 + number % 7))
    (files / "image.png").write_bytes(b"\x89PNG\r\n\x1a\n" + bytes(range(256)))
    (files / "empty.txt").write_bytes(b"")
    records = root / "records.jsonl"
    records.write_text(
        "\n".join(
            [
                json.dumps({"id": f"r{number}", "text": f"{WORDS} record {number}"})
                for number in range(100)
            ]
            + ["", "not json", ""]
        )
        + "\n\n"
    )
    sheet = root / "sheet.csv"
    sheet.write_text("id,text\n" + "".join(f"c{n},{WORDS} row {n}\n" for n in range(80)) + "\n")
    header_only = root / "header.csv"
    header_only.write_text("id,text\n")
    return [str(files), str(records), str(sheet), str(header_only), str(root / "missing.txt")]


def test_progress_comes_as_documents_are_done_and_counts_every_byte(
    database: str, tmp_path: Path
) -> None:
    table = f"progress_{uuid.uuid4().hex[:8]}"
    paths = corpus(tmp_path / "corpus")
    DocumentTable(psycopg.connect(database, autocommit=True), table).create()
    recorder = Recorder(database, table)
    summary = load_paths(
        paths,
        table,
        dsn=database,
        reporter=recorder,
        options=LoadOptions(workers=1, batch_rows=10_000),
    )  # one commit

    assert recorder.calls[0][0] == "started"
    progress = [call for call in recorder.calls if call[0] == "progress"]
    # Worker results arrive in tasks of at most 64 documents, and each is
    # reported at once: long before the one batch commits.
    assert len([call for call in progress if call[1]]) >= (150 + 100 + 80) // 64
    assert all(committed == 0 for _, _, _, committed in progress)
    assert recorder.committed() == summary.loaded == 330
    # Every input once (the failures too), and every byte of every file read.
    assert sum(call[1] for call in progress) == summary.documents == 330 + 4
    on_disk = sum(
        os.path.getsize(os.path.join(directory, name))
        for directory, _, names in os.walk(tmp_path / "corpus")
        for name in names
    )
    assert sum(call[2] for call in progress) == on_disk
    assert _scan_size(tuple(paths), SourceOptions()) == on_disk  # the bar's total


def test_a_rerun_reports_progress_too(database: str, tmp_path: Path) -> None:
    table = f"progress_{uuid.uuid4().hex[:8]}"
    paths = corpus(tmp_path / "corpus")
    load_paths(paths, table, dsn=database, create=True, options=LoadOptions(workers=1))
    recorder = Recorder(database, table)
    summary = load_paths(
        paths, table, dsn=database, reporter=recorder, options=LoadOptions(workers=1)
    )
    assert summary.unchanged == 330
    progress = [call for call in recorder.calls if call[0] == "progress"]
    assert sum(call[1] for call in progress) == summary.documents
    assert sum(call[2] for call in progress) == _scan_size(tuple(paths), SourceOptions())


def test_the_rate_is_never_0_when_documents_were_done() -> None:
    assert _rate(0, 5.0) == "0"
    assert _rate(1, 3.3) == "0.3"  # one 50 MB document in 3.3 s
    assert _rate(7, 1.0) == "7"
    assert _rate(50_000, 3.3) == "15,152"
    assert _rate(3, 0.0) == "-"
    line = _summary_line(LoadSummary(loaded=1, seconds=3.3, bytes=50_000_000))
    assert line.endswith("50.0 MB in 3.3 s (0.3 docs/s)")
    # every input done counts, as in the bar: a rerun has a rate
    assert "(100 docs/s)" in _summary_line(LoadSummary(unchanged=90, loaded=10, seconds=1.0))


def test_the_bar_moves_with_the_progress_and_ends_on_the_summary() -> None:
    bar = _progress_bar()  # not started: nothing is drawn
    reporter = _ConsoleReporter(None, _CtrlC(), bar)
    bar.update(reporter.task, total=1000)
    reporter.started()
    reporter.progress(1, 400)
    task = bar.tasks[0]
    assert task.completed == 400 and task.fields["done"] == 1
    assert task.fields["rate"] not in ("0", "-")
    reporter.progress(0, 500)  # bytes of record files with no document (blank lines)
    assert task.completed == 900
    summary = LoadSummary(loaded=1, seconds=2.0)
    reporter.finish(summary)
    assert task.completed == 1000  # the load ended: all of it was read
    assert task.fields["rate"] == _rate(summary.documents, summary.seconds) == "0.5"
