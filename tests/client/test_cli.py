"""The command line against a real cluster: loading, rerunning, interrupting, querying."""

from __future__ import annotations

import json
import os
import random
import shutil
import signal
import subprocess
import sys
import time
import uuid
from operator import itemgetter
from pathlib import Path
from typing import Any

import docx
import psycopg
import pytest
from click.testing import CliRunner, Result
from fpdf import FPDF
from psycopg import sql

import nearsim
from nearsim.client.cli import cli, load_command
from nearsim.client.connect import ConnectionFailed, resolve_dsn
from nearsim.client.samples import kjv_chapters
from nearsim.core import measures

CHAPTERS = {c.ref: c.text for c in kjv_chapters(["Genesis", "Ruth", "Jude", "Obadiah"])}


def run(*args: str, input: str | None = None) -> Result:
    return CliRunner().invoke(cli, list(args), input=input, catch_exceptions=False)


def table_name() -> str:
    return f"docs_{uuid.uuid4().hex[:8]}"


def rows(dsn: str, table: str) -> dict[str, tuple[Any, ...]]:
    """key -> (source, content_hash, body, si) of every stored document."""
    with psycopg.connect(dsn) as conn:
        query = sql.SQL("SELECT key, source, content_hash, body, si FROM {}").format(
            sql.Identifier(*table.split(".")))
        return {key: rest for key, *rest in conn.execute(query)}


def verify(dsn: str, table: str) -> dict[str, Any]:
    with psycopg.connect(dsn) as conn:
        cur = conn.execute("SELECT * FROM nearsim_verify(%s, true)", [table])
        names = [c.name for c in cur.description or ()]
        return dict(zip(names, cur.fetchone() or (), strict=True))


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
MAX_BYTES = 100_000  # a file size limit: the .docx and .pdf files are smaller


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


def load(dsn: str, table: str, *paths: str, extra: tuple[str, ...] = ()) -> Result:
    return run("load", *paths, "--dsn", dsn, "--table", table, "--create", "--quiet",
               "--max-bytes", str(MAX_BYTES), *extra)


def test_every_command_has_help_with_an_example() -> None:
    assert set(cli.commands) >= {"init", "load", "similar", "pairs", "clusters", "compare",
                                 "stats"}
    for name in [None, *cli.commands]:
        result = run(*([name] if name else []), "--help")
        assert result.exit_code == 0, result.output
        assert "Example" in result.output, name
    result = CliRunner().invoke(load_command, ["--help"], prog_name="nearsim-load")
    assert result.exit_code == 0 and "nearsim-load --create" in result.output


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
    root = tmp_path / "docs"
    root.mkdir()
    for ref, text in CHAPTERS.items():
        (root / f"{ref}.txt").write_text(text)
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


def test_similar_finds_a_planted_near_duplicate(database: str, tmp_path: Path) -> None:
    root = tmp_path / "docs"
    root.mkdir()
    for ref, text in CHAPTERS.items():
        (root / f"{ref}.txt").write_text(text)
    table = table_name()
    assert load(database, table, str(root)).exit_code == 0
    original = CHAPTERS["Genesis 24"]
    edited = tmp_path / "edited.txt"
    edited.write_text(original.replace("Rebekah", "Rebecca", 1) + "Amen.\n")

    result = run("similar", "--file", str(edited), "--hamming", "--dsn", database, "--table",
                 table, "--json")  # fmt: skip
    assert result.exit_code == 0, result.output
    matches = json.loads(result.stdout)
    expected = nearsim.hamming(nearsim.simhash(edited.read_text()), nearsim.simhash(original))
    assert matches[0] == {"key": str(root / "Genesis 24.txt"), "distance": expected,
                          "source": str(root / "Genesis 24.txt")}
    assert expected <= 6

    # the default is the verified search by S_L at 0.8, measured on the texts
    for options in ([], ["--min-similarity", "0.8"], ["--measure", "s_l"]):
        verified = json.loads(run("similar", "--file", str(edited), *options, "--dsn", database,
                                  "--table", table, "--json").stdout)  # fmt: skip
        assert verified[0]["key"] == str(root / "Genesis 24.txt")
        assert verified[0]["similarity"] == pytest.approx(
            measures.compare(edited.read_text(), original).s_l)
        assert verified[0]["s_r"] == pytest.approx(
            measures.resemblance(edited.read_text(), original))
        assert all(match["similarity"] >= 0.8 for match in verified)
    contradiction = run("similar", "--file", str(edited), "--hamming", "-s", "0.9", "--dsn",
                        database, "--table", table)  # fmt: skip
    assert contradiction.exit_code == 2 and "give one of them" in contradiction.output
    shown = run("similar", "--file", str(edited), "-s", "0.8", "--measure", "s_l", "--dsn",
                database, "--table", table)
    assert shown.exit_code == 0 and "Genesis 24.txt" in shown.output and "%" in shown.output

    text = run("similar", original, "--hamming", "-k", "0", "--dsn", database, "--table", table)
    assert text.exit_code == 0
    assert text.output.splitlines() == ["distance  key", f"       0  {root / 'Genesis 24.txt'}"]
    measured = run("similar", original, "--dsn", database, "--table", table)
    assert measured.output.splitlines() == [
        "       S_L         S_R  distance  key",
        f"    100.0%      100.0%         0  {root / 'Genesis 24.txt'}"]


def test_pairs_clusters_compare_and_stats(database: str, tmp_path: Path) -> None:
    root = tmp_path / "docs"
    root.mkdir()
    base = CHAPTERS["Genesis 1"]
    for name, text in {"a.txt": base, "b.txt": base + "Selah.\n",
                       "c.txt": base.replace("God", "Elohim", 1),
                       "other.txt": CHAPTERS["Jude 1"]}.items():
        (root / name).write_text(text)
    table = table_name()
    assert load(database, table, str(root)).exit_code == 0
    keys = {name: str(root / name) for name in ("a.txt", "b.txt", "c.txt", "other.txt")}

    pairs = json.loads(run("pairs", "--hamming", "--dsn", database, "-t", table, "--json").stdout)
    assert all("similarity" not in p for p in pairs)  # bits are not a similarity
    assert {(p["a"], p["b"]) for p in pairs} == {
        tuple(sorted((keys[x], keys[y]))) for x, y in (("a.txt", "b.txt"), ("a.txt", "c.txt"),
                                                      ("b.txt", "c.txt"))}
    verified = json.loads(run("pairs", "-s", "0.9", "--dsn", database, "-t", table,
                              "--json").stdout)
    assert {(p["a"], p["b"]) for p in verified} == {
        tuple(sorted((keys[x], keys[y]))) for x, y in (("a.txt", "b.txt"), ("a.txt", "c.txt"),
                                                      ("b.txt", "c.txt"))}
    assert all(p["similarity"] >= 0.9 and p["short"] is False for p in verified)
    grouped = json.loads(run("clusters", "-s", "0.9", "--dsn", database, "-t", table,
                             "--json").stdout)
    assert [sorted(g["members"]) for g in grouped] == [
        sorted(keys[n] for n in ("a.txt", "b.txt", "c.txt"))]
    verified = json.loads(run("pairs", "--dsn", database, "-t", table, "--json").stdout)
    assert len(verified) == 3 and all(p["similarity"] >= 0.8 for p in verified)  # the default
    groups = json.loads(run("clusters", "--hamming", "--dsn", database, "-t", table,
                            "--json").stdout)  # fmt: skip
    assert groups == json.loads(run("clusters", "--dsn", database, "-t", table, "--json").stdout)
    assert len(groups) == 1 and sorted(groups[0]["members"]) == sorted(
        keys[n] for n in ("a.txt", "b.txt", "c.txt"))
    assert groups[0]["pivot"] is None  # components have no pivot
    groups = json.loads(run("clusters", "--method", "pivot", "--dsn", database, "-t", table,
                            "--json").stdout)
    assert len(groups) == 1 and len(groups[0]["members"]) == 3
    assert groups[0]["members"][0] == groups[0]["pivot"] is not None

    result = run("compare", keys["a.txt"], keys["b.txt"], "--dsn", database, "-t", table,
                 "--json")
    assert result.exit_code == 0, result.output
    compared = json.loads(result.stdout)
    distance = nearsim.hamming(nearsim.simhash(base), nearsim.simhash(base + "Selah.\n"))
    assert compared["distance"] == distance
    exact = measures.compare(base, base + "Selah.\n")
    # "similarity" is measured on the texts (S_L by default), never bits
    assert compared["similarity"] == round(exact.s_l, 4) and compared["measure"] == "s_l"
    assert (compared["s_l"], compared["s_r"]) == (round(exact.s_l, 4), round(exact.s_r, 4))
    assert compared["a"]["bits"] == nearsim.bits(nearsim.simhash(base))
    assert compared["near_duplicates"] is True and compared["min_similarity"] == 0.87
    found = compared["measures"]
    assert (found["s_l"], found["s_j"], found["s_r"]) == (
        round(exact.s_l, 4), round(exact.s_j, 4), round(exact.s_r, 4))
    assert found["words"]["common"] == exact.common == len(base.split())
    assert found["minhash"]["low"] <= exact.s_r <= found["minhash"]["high"]
    assert found["minhash"]["hashes"] == 200
    strict = json.loads(run("compare", keys["a.txt"], keys["c.txt"], "--hamming", "-k", "0",
                            "--dsn", database, "-t", table, "--json").stdout)  # fmt: skip
    assert strict["near_duplicates"] is (strict["distance"] == 0)  # --hamming: bits decide
    assert strict["max_distance"] == 0
    assert strict["measures"]["s_l"] < 1
    text = run("compare", keys["a.txt"], keys["b.txt"], "--dsn", database, "-t", table)
    assert (f"NEAR-DUPLICATES: s_l {exact.s_l:.1%} >= 87%  (S_L {exact.s_l:.1%},"
            f" S_R {exact.s_r:.1%})") in text.output
    assert "similarity" not in text.output.split("NEAR-DUPLICATES")[0]  # bits are a distance
    assert f"S_L {found['s_l']:.1%}  S_J {found['s_j']:.1%}" in text.output
    assert "MinHash estimate of S_R" in text.output
    os.rename(root / "other.txt", tmp_path / "moved.txt")
    stored = run("compare", str(tmp_path / "moved.txt"), keys["other.txt"], "--dsn", database,
                 "-t", table)
    assert stored.exit_code == 0, stored.output
    assert "Hamming distance 0 of 64 bits (profile default/1)" in stored.output
    radius = run("compare", keys["a.txt"], keys["b.txt"], "-k", "3", "--dsn", database, "-t", table)
    assert radius.exit_code == 2 and "-k goes with --hamming" in radius.output
    missing = run("compare", "no-such-thing", keys["a.txt"], "--dsn", database, "-t", table)
    assert missing.exit_code == 2 and "neither a file nor the key" in missing.output

    stats = json.loads(run("stats", "--dsn", database, "-t", table, "--json").stdout)
    assert stats["documents"] == stats["fingerprinted"] == 4
    assert stats["profile"] == nearsim.PROFILE and stats["health"]["ok"] is True
    # three rotation indexes of one 8 kB page each, at least
    assert stats["bands"] == 3 and stats["index_bytes"] >= 3 * 8192
    text_stats = run("stats", "--dsn", database, "-t", table)
    assert "3 bands" in text_stats.stdout and "bytes per document, healthy" in text_stats.stdout


def test_hostile_table_names_work(database: str, tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_text(CHAPTERS["Ruth 1"])
    table = f'"Odd ""{uuid.uuid4().hex[:6]}""; DROP TABLE x; --"'
    result = run("load", str(tmp_path / "a.txt"), "--dsn", database, "--table", table, "--create",
                 "--quiet")
    assert result.exit_code == 0, result.output
    found = run("similar", CHAPTERS["Ruth 1"], "--dsn", database, "--table", table)
    assert found.exit_code == 0 and str(tmp_path / "a.txt") in found.output


def test_exit_code_2_for_usage_and_connection_errors(database: str, tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_text("some words to load")
    nowhere = f"host={tmp_path} port=1 dbname=x user=x connect_timeout=2"
    result = run("load", str(tmp_path), "--dsn", nowhere)
    assert result.exit_code == 2
    assert result.output.startswith("Error: cannot connect to") and len(
        result.output.strip().splitlines()) == 1
    missing = run("load", str(tmp_path), "--dsn", database, "--table", table_name())
    assert missing.exit_code == 2 and "does not exist" in missing.output
    assert run("load", str(tmp_path), "--dsn", database, "--encoding", "klingon").exit_code == 2
    assert run("load", "--dsn", database).exit_code == 2
    assert run("similar", "--dsn", database).exit_code == 2
    assert run("load", str(tmp_path), "--max-bytes", "lots").exit_code == 2
    ok = run("load", str(tmp_path), "--dsn", database, "--table", table_name(), "--create", "-q")
    assert ok.exit_code == 0, ok.output


def test_connection_order(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    for name in ("NEARSIM_DSN", "PGHOST", "PGPORT", "PGDATABASE", "PGSERVICE", "PGUSER",
                 "PGHOSTADDR", "PGSERVICEFILE"):
        monkeypatch.delenv(name, raising=False)
    (tmp_path / "work" / "sub").mkdir(parents=True)
    monkeypatch.chdir(tmp_path / "work" / "sub")
    monkeypatch.setattr("nearsim.client.connect.PACKAGE_DIRECTORY", tmp_path / "work")
    with pytest.raises(ConnectionFailed, match="no database configured"):
        resolve_dsn()
    (tmp_path / "work" / ".pgcluster" / "run").mkdir(parents=True)
    (tmp_path / "work" / ".pgcluster" / "port").write_text("6543\n")
    local = resolve_dsn()
    assert f"host={tmp_path}/work/.pgcluster/run" in local and "port=6543" in local
    monkeypatch.setenv("PGHOST", "/somewhere")
    assert resolve_dsn() == ""
    monkeypatch.setenv("NEARSIM_DSN", "dbname=from_env")
    assert resolve_dsn() == "dbname=from_env"
    assert resolve_dsn("dbname=explicit") == "dbname=explicit"


def test_similar_nearest_gives_the_scans_first_rows(database: str, tmp_path: Path) -> None:
    root = tmp_path / "docs"
    root.mkdir()
    for ref, text in CHAPTERS.items():
        (root / f"{ref}.txt").write_text(text)
    table = table_name()
    assert load(database, table, str(root)).exit_code == 0
    query = CHAPTERS["Genesis 24"].replace("Rebekah", "Rebecca", 1)
    result = run("similar", query, "--nearest", "3", "--dsn", database, "--table", table,
                 "--json")  # fmt: skip
    assert result.exit_code == 0, result.output
    fingerprint = nearsim.simhash(query)
    expected = sorted((nearsim.hamming(nearsim.simhash(text), fingerprint),
                       str(root / f"{ref}.txt")) for ref, text in CHAPTERS.items())[:3]
    assert [(m["distance"], m["key"]) for m in json.loads(result.stdout)] == expected
    wrong = run("similar", query, "--nearest", "3", "-s", "0.9", "--dsn", database, "--table",
                table)  # fmt: skip
    assert wrong.exit_code == 2 and "does not go with it" in wrong.output


def three_chapters_and_two_to_check(database: str, tmp_path: Path) -> tuple[str, Path, Path]:
    """A table of three loaded chapters; a lightly edited copy of one of them
    and a chapter not loaded, as files to check."""
    root = tmp_path / "docs"
    root.mkdir()
    for ref in ("Genesis 24", "Ruth 1", "Jude 1"):
        (root / f"{ref}.txt").write_text(CHAPTERS[ref])
    table = table_name()
    assert load(database, table, str(root)).exit_code == 0
    edited = tmp_path / "edited.txt"
    edited.write_text(CHAPTERS["Genesis 24"].replace("Rebekah", "Rebecca", 1) + "Amen.\n")
    new = tmp_path / "new.txt"
    new.write_text(CHAPTERS["Obadiah 1"])
    return table, edited, new


def test_check_exits_1_and_lists_the_near_duplicates(database: str, tmp_path: Path) -> None:
    table, edited, new = three_chapters_and_two_to_check(database, tmp_path)

    clean = run("check", str(new), "--dsn", database, "--table", table)
    assert clean.exit_code == 0, clean.output
    assert clean.stdout == f"{new}: no near-duplicate\n"
    found = run("check", str(new), str(edited), "--dsn", database, "--table", table)
    assert found.exit_code == 1, found.output
    lines = found.stdout.splitlines()
    assert lines[1] == f"{edited}: 1 near-duplicate"
    assert lines[2].endswith("Genesis 24.txt") and "%" in lines[2]
    as_json = json.loads(run("check", str(edited), "--hamming", "-k", "3", "--json", "--dsn",
                             database, "--table", table).stdout)
    assert [Path(m["key"]).name for m in as_json[0]["near_duplicates"]] == ["Genesis 24.txt"]
    assert as_json[0]["file"] == str(edited)
    missing = run("check", str(tmp_path / "nothing.txt"), "--dsn", database, "--table", table)
    assert missing.exit_code == 2 and "nothing.txt" in missing.output
    # nothing was written
    assert len(rows(database, table)) == 3


def test_thresholds_the_server_answers_the_command_line_answers(
    database: str, tmp_path: Path
) -> None:
    root = tmp_path / "docs"
    root.mkdir()
    base = CHAPTERS["Genesis 1"]
    words = base.split()
    texts = {"a.txt": base, "b.txt": base + " Amen.\n",  # S_R 0.998
             "c.txt": " ".join(words[:len(words) * 2 // 5]),  # S_R 0.45 to both
             "other.txt": CHAPTERS["Jude 1"]}  # fmt: skip
    for name, text in texts.items():
        (root / name).write_text(text)
    table = table_name()
    assert load(database, table, str(root)).exit_code == 0
    keys = {name: str(root / name) for name in texts}

    def sql_rows(query: str, *arguments: object) -> list[dict[str, Any]]:
        with psycopg.connect(database) as conn:
            cursor = conn.execute(query, [table, *arguments])
            names = [column.name for column in cursor.description or ()]
            return [dict(zip(names, row, strict=True)) for row in cursor]

    def groups(found: list[dict[str, Any]]) -> list[list[str]]:
        return sorted(sorted(group["members"]) for group in found)

    # by S_R (the SQL functions' default measure; the commands' is S_L, below)
    for threshold in ("0.3", "0.99"):  # outside the 0.5 to 0.95 the calibration covers
        result = run("pairs", "-s", threshold, "--measure", "s_r", "--dsn", database, "-t",
                     table, "--json")  # fmt: skip
        assert result.exit_code == 0, result.output
        expected = sql_rows("SELECT * FROM nearsim_pairs_verified(%s, %s)", float(threshold))
        by_keys = itemgetter("a", "b")
        assert sorted(json.loads(result.stdout), key=by_keys) == sorted(expected, key=by_keys)
        assert len(expected) == (3 if threshold == "0.3" else 1)

        result = run("clusters", "-s", threshold, "--measure", "s_r", "--dsn", database, "-t",
                     table, "--json")  # fmt: skip
        assert result.exit_code == 0, result.output
        by_sql: dict[str, list[str]] = {}
        for row in sql_rows("SELECT * FROM nearsim_clusters_verified(%s, %s)", float(threshold)):
            by_sql.setdefault(row["cluster"], []).append(row["key"])
        assert groups(json.loads(result.stdout)) == sorted(map(sorted, by_sql.values()))

        page = tmp_path / f"group-{threshold}.html"
        result = run("report", "--cluster", keys["a.txt"], "-s", threshold, "--measure", "s_r",
                     "--dsn", database, "-t", table, "-o", str(page))  # fmt: skip
        assert result.exit_code == 0, result.output
        assert page.read_text().count("<section>") == (2 if threshold == "0.3" else 1)

        compared = run("compare", keys["a.txt"], keys["c.txt"], "-s", threshold, "--measure",
                       "s_r", "--dsn", database, "-t", table, "--json")  # fmt: skip
        assert compared.exit_code == 0, compared.output
        assert json.loads(compared.stdout)["near_duplicates"] is (threshold == "0.3")

    # A query needs a radius, which the server has for 0.5 to 0.95 only: with
    # -k it answers, as SQL does; without, the server's own error is the one line.
    result = run("similar", "--file", keys["a.txt"], "-s", "0.99", "-k", "10", "--measure", "s_r",
                 "--dsn", database, "-t", table, "--json")  # fmt: skip
    assert result.exit_code == 0, result.output
    expected = sql_rows("SELECT key, distance, similarity, short"
                        " FROM nearsim_similar_verified(%s, %s, 0.99, 's_r', 10)", base)
    answered = [{k: m[k] for k in ("key", "distance", "similarity", "short")}
                for m in json.loads(result.stdout)]
    assert answered == expected and len(expected) == 2
    for command in ("similar", "check"):
        refused = subprocess.run(
            [sys.executable, "-m", "nearsim.client.cli", command, *(
                ["--file"] if command == "similar" else []), keys["a.txt"], "-s", "0.99",
             "--measure", "s_r", "--dsn", database, "-t", table], capture_output=True,
            text=True)  # fmt: skip
        assert refused.returncode == 2, refused.stderr
        assert refused.stderr.startswith("Error: database error: min_similarity must be between"
                                         " 0.5 and 0.95"), refused.stderr
        assert len(refused.stderr.strip().splitlines()) == 1 and "Traceback" not in refused.stderr
    refused = run("pairs", "-s", "0.3", "--measure", "containment", "--dsn", database, "-t",
                  table)  # fmt: skip
    assert refused.exit_code == 2 and "min_similarity must be between" in refused.output
    # by S_L, the default, a query needs no radius from 0.5 up: its candidates are the
    # documents at least 0.5 similar by S_R
    by_words = json.loads(run("similar", "--file", keys["a.txt"], "-s", "0.99", "--dsn",
                              database, "-t", table, "--json").stdout)  # fmt: skip
    assert sorted(Path(m["key"]).name for m in by_words) == ["a.txt", "b.txt"]
    assert all(m["similarity"] == m["s_l"] >= 0.99 for m in by_words)

    # outside (0, 1]: refused before any work, naming the option
    for command in ("similar", "check", "pairs", "clusters", "compare", "report"):
        for threshold in ("0", "-0.1", "1.5"):
            arguments = {"similar": ["x"], "check": [keys["a.txt"]],
                         "compare": [keys["a.txt"], keys["b.txt"]],
                         "report": ["--cluster", "1", "-o", str(tmp_path / "x.html")]}  # fmt: skip
            refused = run(command, *arguments.get(command, []), "-s", threshold, "--dsn",
                          "host=/nowhere", "-t", table)  # fmt: skip
            assert refused.exit_code == 2, (command, threshold, refused.output)
            assert "Invalid value for '--min-similarity' / '-s'" in refused.output
            assert "0<x<=1" in refused.output
    assert run("pairs", "-s", "1", "--dsn", database, "-t", table).exit_code == 0


def test_check_answers_every_file_and_names_those_it_cannot_check(
    database: str, tmp_path: Path
) -> None:
    table, edited, new = three_chapters_and_two_to_check(database, tmp_path)
    empty, blank, marks = tmp_path / "empty.txt", tmp_path / "blank.txt", tmp_path / "marks.txt"
    empty.write_bytes(b"")
    blank.write_text(" \n\t\n")
    marks.write_text("!!! --- ???\n")
    unchecked = {
        empty: f"Error: {empty}: an empty file (0 bytes): not checked",
        blank: f"Error: {blank}: no text (empty or only whitespace): not checked",
        marks: f"Error: {marks}: no words, so no fingerprint to compare: not checked",
    }
    files = [str(path) for path in (empty, new, blank, edited, marks)]

    # a near-duplicate is found (1) whatever else could not be checked
    found = run("check", *files, "--dsn", database, "--table", table)
    assert found.exit_code == 1, found.output
    lines = found.stdout.splitlines()
    assert lines[:2] == [f"{new}: no near-duplicate", f"{edited}: 1 near-duplicate"]
    assert lines[2].endswith("Genesis 24.txt") and len(lines) == 3
    assert found.stderr.splitlines() == list(unchecked.values())
    as_json = json.loads(run("check", *files, "--json", "--dsn", database, "--table",
                             table).stdout)  # fmt: skip
    assert [entry["file"] for entry in as_json] == files
    for entry in as_json:
        if Path(entry["file"]) in unchecked:
            assert entry["near_duplicates"] is None
            assert f"Error: {entry['error']}" == unchecked[Path(entry["file"])]
        else:
            assert entry["error"] is None
    assert [Path(m["key"]).name for m in as_json[3]["near_duplicates"]] == ["Genesis 24.txt"]
    assert as_json[1]["near_duplicates"] == []

    # none found, but a file could not be checked: 2, with the others' answers
    partial = run("check", str(empty), str(new), "--hamming", "--dsn", database, "--table",
                  table)  # fmt: skip
    assert partial.exit_code == 2, partial.output
    assert partial.stdout == f"{new}: no near-duplicate\n"
    assert partial.stderr == unchecked[empty] + "\n"
    clean = run("check", str(new), "--dsn", database, "--table", table)
    assert clean.exit_code == 0 and clean.stderr == ""


def waiting_for_a_lock(dsn: str) -> bool:
    """Whether a session of the database waits for a lock."""
    with psycopg.connect(dsn) as conn:
        row = conn.execute("SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock'"
                           " AND datname = current_database()").fetchone()
        return bool(row and row[0])


@pytest.mark.parametrize("command", [["check"], ["pairs"], ["report", "--cluster", "1"]])
def test_ctrl_c_ends_a_command_with_130_and_one_line(
    database: str, tmp_path: Path, command: list[str]
) -> None:
    root = tmp_path / "docs"
    root.mkdir()
    for ref in ("Genesis 24", "Ruth 1"):
        (root / f"{ref}.txt").write_text(CHAPTERS[ref])
    table = table_name()
    assert load(database, table, str(root)).exit_code == 0
    arguments = [*command, "--dsn", database, "--table", table]
    if command[0] == "check":
        arguments.append(str(root / "Ruth 1.txt"))
    if command[0] == "report":
        arguments += ["-o", str(tmp_path / "group.html")]
    with psycopg.connect(database) as locker:
        # the command's query waits for the table until the signal comes
        locker.execute(sql.SQL("LOCK TABLE {} IN ACCESS EXCLUSIVE MODE").format(
            sql.Identifier(table)))
        # Ctrl-C as a terminal sends it, also when the tests run in the
        # background, where the shell starts them with SIGINT ignored
        process = subprocess.Popen([sys.executable, "-m", "nearsim.client.cli", *arguments],
                                   stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                   preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
        deadline = time.monotonic() + 30
        while not waiting_for_a_lock(database) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert waiting_for_a_lock(database) and process.poll() is None, process.communicate()
        process.send_signal(signal.SIGINT)
        stdout, stderr = process.communicate(timeout=30)
        assert not waiting_for_a_lock(database)  # its query was cancelled, not left waiting
        locker.rollback()
    assert process.returncode == 130, stderr
    assert stderr == "interrupted\n" and stdout == ""


def test_init_with_the_sketch_index_finds_a_cut_copy_beyond_the_radius(
    database: str, tmp_path: Path
) -> None:
    """The one step docs/GUIDE.md teaches, from init, stats, nearsim_verify and rebuild."""
    chapters = [c.text for c in kjv_chapters(["Genesis"])][6:8]
    words = chapters[0].split()
    # the first half of Genesis 7: S_R 0.52 to the chapter, 22 bits away (beyond the radius)
    (tmp_path / "genesis-7.txt").write_text(chapters[0])
    (tmp_path / "genesis-8.txt").write_text(chapters[1])
    half = tmp_path / "half.txt"
    half.write_text(" ".join(words[:len(words) // 2]))
    found: dict[bool, list[str]] = {}
    for sketched in (False, True):
        table = table_name()
        init = run("init", "--dsn", database, "--table", table,
                   *(["--sketch-index"] if sketched else []))  # fmt: skip
        assert init.exit_code == 0
        assert ("sketch index" in init.stdout) == sketched
        assert load(database, table, str(tmp_path / "genesis-7.txt"),
                    str(tmp_path / "genesis-8.txt")).exit_code == 0
        answer = run("similar", "--file", str(half), "-s", "0.5", "--dsn", database,
                     "--table", table, "--json")  # fmt: skip
        found[sketched] = [match["key"] for match in json.loads(answer.stdout)]
        stats_run = run("stats", "--dsn", database, "-t", table, "--json")
        assert stats_run.exit_code == 0, stats_run.output
        stats = json.loads(stats_run.stdout)
        text_stats = run("stats", "--dsn", database, "-t", table).stdout
        if not sketched:
            assert stats["sketch_index"] is None and "sketch index   none" in text_stats
            continue
        assert stats["sketch_index"]["usable"] is True and stats["sketch_index"]["bytes"] > 0
        assert f"sketch index   {table}_nearsim_sketch_idx" in text_stats
        with psycopg.connect(database, autocommit=True) as conn:
            docs = nearsim.DocumentTable(conn, table)
            assert docs.create_sketch_index() is False  # it has one
            # left invalid, as a failed CREATE INDEX CONCURRENTLY leaves it
            conn.execute("UPDATE pg_index SET indisvalid = false WHERE indexrelid = %s::regclass",
                         [f"{table}_nearsim_sketch_idx"])
            notices: list[str] = []
            conn.add_notice_handler(lambda d, seen=notices: seen.append(d.message_primary or ""))
            assert conn.execute("SELECT ok FROM nearsim_verify(%s)", [table]).fetchone() == (
                False,)
            assert any(f"sketch index public.{table}_nearsim_sketch_idx" in n and "not valid" in n
                       for n in notices), notices
            broken = run("stats", "--dsn", database, "-t", table)
            assert broken.exit_code == 1 and "NOT VALID" in broken.stdout
            conn.execute("SELECT nearsim_rebuild(%s)", [table])
            sketch = docs.sketch_index()
            assert sketch is not None and sketch.usable
            assert conn.execute("SELECT ok FROM nearsim_verify(%s)", [table]).fetchone() == (
                True,)
    assert found[True] == [str(tmp_path / "genesis-7.txt")]
    assert found[False] == []  # within the calibrated radius the cut copy is not found
