"""The loading command against a real cluster: formats, bad files, reruns, interruptions."""

from __future__ import annotations

import json
import os
import random
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import docx
import psycopg
import pytest
from cli_helpers import CHAPTERS, MAX_BYTES, chapter_files, load, rows, run, table_name, verify
from fpdf import FPDF
from psycopg import sql

import nearsim


def write_pdf(path: Path, text: str) -> None:
    pdf = FPDF()
    pdf.add_page()
    pdf.set_font("Helvetica", size=11)
    pdf.multi_cell(0, 5, text)
    pdf.output(str(path))


def write_docx(path: Path, text: str) -> None:
    document = docx.Document()
    for paragraph in text.splitlines():
        document.add_paragraph(paragraph)
    document.save(str(path))


GOOD = {  # name -> the chapter it holds
    "genesis-1.txt": "Genesis 1",
    "notes/genesis-2.md": "Genesis 2",
    "web/genesis-3.html": "Genesis 3",
    "scans/ruth-1.pdf": "Ruth 1",
    "office/ruth-2.docx": "Ruth 2",
    "deep/er/jude.txt": "Jude 1",
}
BAD = {  # name -> the reason it must be reported with
    "image.png": "binary",
    "latin1.txt": "invalid-encoding",
    "nul.txt": "nul-bytes",
    "empty.txt": "empty",
    "huge.txt": "too-large",
    "broken.pdf": "corrupt-pdf",
    "broken.docx": "corrupt-docx",
    "loop": "symlink-loop",
    "dangling": "not-found",
    "fifo": "not-a-file",
}


def make_tree(root: Path) -> Path:
    """Good documents of every format, and one of every bad kind."""
    for name, ref in GOOD.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        text = CHAPTERS[ref]
        if name.endswith(".html"):
            lines = "".join(f"<p>{line}</p>\n" for line in text.splitlines())
            path.write_text(f"<html><head><style>p {{}}</style><script>var x;</script></head>"
                            f"<body>{lines}</body></html>")
        elif name.endswith(".pdf"):
            write_pdf(path, text)
        elif name.endswith(".docx"):
            write_docx(path, text)
        else:
            path.write_text(text)
    (root / "image.png").write_bytes(b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 8)
    (root / "latin1.txt").write_bytes("Déjà vu, señor: ça coûte très cher.\n".encode("latin-1"))
    (root / "nul.txt").write_bytes(b"some words here\x00and after a NUL byte\n")
    (root / "empty.txt").write_bytes(b"")
    (root / "huge.txt").write_text("word " * (MAX_BYTES // 4))
    (root / "broken.pdf").write_bytes(b"%PDF-1.4\n" + os.urandom(2000))
    (root / "broken.docx").write_bytes(b"PK\x03\x04" + os.urandom(2000))
    (root / "loop").symlink_to(root / "loop")
    (root / "dangling").symlink_to(root / "nowhere.txt")
    os.mkfifo(root / "fifo")
    return root


def test_a_tree_loads_every_good_file_and_reports_every_bad_one(
    database: str, tmp_path: Path
) -> None:
    root = make_tree(tmp_path / "tree")
    table = table_name()
    errors = tmp_path / "errors.jsonl"
    result = load(database, table, str(root), extra=("--errors", str(errors), "--json"))
    assert result.exit_code == 1, result.output

    stored = rows(database, table)
    assert sorted(stored) == sorted(str(root / name) for name in GOOD)
    for name, ref in GOOD.items():
        source, _, body, si = stored[str(root / name)]
        assert source == str(root / name)
        assert si == nearsim.simhash(body) and si is not None
        words = CHAPTERS[ref].split()
        assert " ".join(body.split()[:5]) == " ".join(words[:5]), name  # text, not markup
        assert "var x" not in body and "<p>" not in body

    reported = {Path(f["source"]).name: f for f in map(json.loads, errors.read_text().splitlines())}
    assert {name: f["reason"] for name, f in reported.items()} == BAD
    assert reported["nul.txt"]["offset"] == len(b"some words here")
    assert reported["latin1.txt"]["offset"] == 1  # the é
    for name in BAD:
        assert name in result.stderr
    summary = json.loads(result.stdout)
    assert summary["loaded"] == len(GOOD) and summary["failed"] == len(BAD)
    assert summary["failed_by_reason"] == {reason: 1 for reason in BAD.values()}
    assert verify(database, table)["ok"]


def test_loading_again_adds_nothing_and_changed_files_are_updated(
    database: str, tmp_path: Path
) -> None:
    root = chapter_files(tmp_path)
    table = table_name()
    first = load(database, table, str(root), extra=("--json",))
    assert first.exit_code == 0, first.output
    assert json.loads(first.stdout)["loaded"] == len(CHAPTERS)
    before = rows(database, table)

    again = load(database, table, str(root), extra=("--json",))
    assert again.exit_code == 0
    summary = json.loads(again.stdout)
    assert summary.pop("encodings") == {str(root / f"{ref}.txt"): "ascii" for ref in CHAPTERS}
    assert summary | {"seconds": 0} == {
        "loaded": 0, "updated": 0, "unchanged": len(CHAPTERS), "failed": 0,
        "skipped_near_duplicates": 0, "recorded_near_duplicates": 0,
        "failed_by_reason": {}, "bytes": json.loads(first.stdout)["bytes"], "seconds": 0,
        "interrupted": False}
    assert rows(database, table) == before

    changed = root / "Jude 1.txt"
    changed.write_text(changed.read_text() + "A new closing line for the letter.\n")
    third = load(database, table, str(root), extra=("--json",))
    summary = json.loads(third.stdout)
    assert (summary["loaded"], summary["updated"], summary["unchanged"]) == (
        0, 1, len(CHAPTERS) - 1)
    after = rows(database, table)
    assert after[str(changed)][2] == changed.read_text()
    assert after[str(changed)][3] == nearsim.simhash(changed.read_text())
    assert {k: v for k, v in after.items() if k != str(changed)} == {
        k: v for k, v in before.items() if k != str(changed)}
    assert verify(database, table)["ok"]


def function_calls(dsn: str) -> dict[str, int]:
    """Calls of the fingerprint functions and triggers counted by the server so far."""
    with psycopg.connect(dsn) as conn:
        return {name: calls for name, calls in conn.execute(
            "SELECT p.oid::pg_catalog.regprocedure::text, s.calls FROM pg_stat_user_functions s"
            " JOIN pg_proc p ON p.oid = s.funcid"
            " WHERE p.proname IN ('simhash', 'simhash_python') OR p.proname LIKE '%fingerprint'")}


def test_server_side_fingerprints_equal_client_side(database: str, tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    root = tmp_path / "docs"
    root.mkdir()
    documents = dict(list(CHAPTERS.items())[:20])
    for ref, text in documents.items():
        (root / f"{ref}.txt").write_text(text)
    client, server = table_name(), table_name()
    assert load(database, client, str(root)).exit_code == 0
    # The loader's sessions count their function calls: the server computes
    # each fingerprint once, in C for the default profile, and no trigger
    # computes it again.
    monkeypatch.setenv("PGOPTIONS", "-c track_functions=all")
    before = function_calls(database)
    assert load(database, server, str(root), extra=("--server-side",)).exit_code == 0
    assert rows(database, client) == rows(database, server)
    deadline = time.monotonic() + 10
    while True:  # the loader's backend reports its counts as it exits
        calls = {name: count - before.get(name, 0)
                 for name, count in function_calls(database).items()}
        if calls.get("simhash(text)", 0) >= len(documents) or time.monotonic() > deadline:
            break
        time.sleep(0.1)
    assert {name: count for name, count in calls.items() if count} == {
        "simhash(text)": len(documents)}


def test_json_lines_and_csv_records(database: str, tmp_path: Path) -> None:
    refs = list(CHAPTERS)[:6]
    jsonl = tmp_path / "crawl.jsonl"
    jsonl.write_text("".join(
        json.dumps({"url": f"https://example.org/{i}", "body": CHAPTERS[ref]}) + "\n"
        for i, ref in enumerate(refs)
    ) + '{"url": "https://example.org/no-body"}\nnot json\n')
    csv_file = tmp_path / "sheet.csv"
    csv_file.write_text("url,body\n" + "".join(
        f'https://example.org/csv/{i},"{CHAPTERS[ref]}"\n' for i, ref in enumerate(refs)))
    table = table_name()
    result = load(database, table, str(jsonl), str(csv_file),
                  extra=("--id-field", "url", "--text-field", "body", "--json"))
    assert result.exit_code == 1
    stored = rows(database, table)
    assert sorted(stored) == sorted(
        [f"https://example.org/{i}" for i in range(6)]
        + [f"https://example.org/csv/{i}" for i in range(6)])
    assert stored["https://example.org/3"][2] == CHAPTERS[refs[3]]
    assert stored["https://example.org/3"][0] == f"{jsonl}:4"
    assert json.loads(result.stdout)["failed_by_reason"] == {"invalid-record": 2}
    assert f"{jsonl}:7" in result.stderr and f"{jsonl}:8" in result.stderr


def test_paths_from_stdin_and_include_exclude(database: str, tmp_path: Path) -> None:
    root = tmp_path / "docs"
    (root / "drafts").mkdir(parents=True)
    (root / "a.txt").write_text(CHAPTERS["Genesis 1"])
    (root / "b.md").write_text(CHAPTERS["Genesis 2"])
    (root / "drafts" / "c.txt").write_text(CHAPTERS["Genesis 3"])
    (root / ".hidden.txt").write_text(CHAPTERS["Genesis 4"])
    table = table_name()
    result = load(database, table, str(root), extra=("--include", "*.txt", "--exclude", "drafts"))
    assert result.exit_code == 0, result.output
    assert sorted(rows(database, table)) == [str(root / "a.txt")]
    result = run("load", "-", "--dsn", database, "--table", table, "--quiet",
                 input=f"{root / 'b.md'}\n{root / 'drafts' / 'c.txt'}\n")
    assert result.exit_code == 0, result.output
    assert len(rows(database, table)) == 3


def big_corpus(root: Path, count: int) -> None:
    texts = list(CHAPTERS.values())
    rng = random.Random(7)
    root.mkdir()
    for i in range(count):
        words = rng.choice(texts).split()
        start = rng.randrange(len(words) // 2)
        (root / f"{i:05d}.txt").write_text(" ".join(words[start:start + 300]) + f" {i}\n")


def load_process(dsn: str, table: str, root: Path) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "nearsim.client.cli", "load", str(root), "--dsn", dsn,
         "--table", table, "--create", "--batch-rows", "10", "--workers", "1", "--quiet"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )


def count(dsn: str, table: str) -> int:
    with psycopg.connect(dsn) as conn:
        if conn.execute("SELECT to_regclass(%s)", [table]).fetchone() == (None,):
            return 0
        row = conn.execute(sql.SQL("SELECT count(*) FROM {}").format(sql.Identifier(table)))
        return int((row.fetchone() or (0,))[0])


def interrupt_midway(dsn: str, table: str, root: Path, total: int, how: signal.Signals) -> int:
    process = load_process(dsn, table, root)
    deadline = time.monotonic() + 60
    while count(dsn, table) < total // 5 and time.monotonic() < deadline:
        time.sleep(0.01)
    process.send_signal(how)
    process.communicate(timeout=60)
    stored = count(dsn, table)
    assert 0 < stored < total, "the load was not interrupted midway"
    return process.returncode


@pytest.mark.parametrize("how", [signal.SIGKILL, signal.SIGINT])
def test_an_interrupted_load_is_completed_by_a_rerun(
    database: str, tmp_path: Path, how: signal.Signals
) -> None:
    total = 1500
    root = tmp_path / "corpus"
    big_corpus(root, total)
    clean, interrupted = table_name(), table_name()
    assert load(database, clean, str(root)).exit_code == 0

    code = interrupt_midway(database, interrupted, root, total, how)
    assert code == (-signal.SIGKILL if how == signal.SIGKILL else 130)
    if how == signal.SIGKILL:
        assert count(database, interrupted) % 10 == 0  # whole batches only
    # (on Ctrl-C the loader writes what it has prepared, then stops)
    rerun = load(database, interrupted, str(root), extra=("--json",))
    assert rerun.exit_code == 0, rerun.output
    assert json.loads(rerun.stdout)["loaded"] == total - json.loads(rerun.stdout)["unchanged"]
    assert rows(database, interrupted) == rows(database, clean)
    assert verify(database, interrupted)["ok"]


def test_a_server_restart_midway_is_completed_by_a_rerun(tmp_path: Path) -> None:
    cluster = tmp_path / "cluster"
    script = str(Path(__file__).resolve().parents[2] / "scripts" / "pgcluster.sh")

    def pgcluster(*args: str) -> str:
        return subprocess.run([script, *args], check=True, capture_output=True,
                              text=True).stdout.strip()

    dsn = pgcluster("start", str(cluster), "5432", "--throwaway")
    try:
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute("CREATE EXTENSION nearsim CASCADE")
        total = 1500
        root = tmp_path / "corpus"
        big_corpus(root, total)
        clean, interrupted = table_name(), table_name()
        assert load(dsn, clean, str(root)).exit_code == 0
        process = load_process(dsn, interrupted, root)
        deadline = time.monotonic() + 60
        while count(dsn, interrupted) < total // 5 and time.monotonic() < deadline:
            time.sleep(0.01)
        pgcluster("stop", str(cluster))  # fast shutdown: every session is ended
        pgcluster("start", str(cluster))
        _, stderr = process.communicate(timeout=60)
        assert process.returncode == 2
        assert stderr.startswith("Error: database connection lost: "), stderr
        assert len(stderr.strip().splitlines()) == 1
        assert 0 < count(dsn, interrupted) < total
        assert count(dsn, interrupted) % 10 == 0  # whole batches only
        rerun = load(dsn, interrupted, str(root))
        assert rerun.exit_code == 0, rerun.output
        assert rows(dsn, interrupted) == rows(dsn, clean)
        assert verify(dsn, interrupted)["ok"]
    finally:
        subprocess.run([script, "stop", str(cluster)], check=False)
        # A long path puts the cluster under /tmp, with a link here.
        shutil.rmtree(os.path.realpath(cluster), ignore_errors=True)
