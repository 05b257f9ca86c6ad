"""The query commands on loaded tables: similar, check, pairs, clusters, compare, report, stats."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from operator import itemgetter
from pathlib import Path
from typing import Any

import psycopg
import pytest
from cli_helpers import CHAPTERS, load, loaded_chapters, rows, run, table_name

import nearsim
from nearsim.client.samples import kjv_chapters
from nearsim.core import measures


def test_similar_finds_a_planted_near_duplicate(database: str, tmp_path: Path) -> None:
    table, root = loaded_chapters(database, tmp_path)
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


def test_similar_nearest_gives_the_scans_first_rows(database: str, tmp_path: Path) -> None:
    table, root = loaded_chapters(database, tmp_path)
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

    # by S_R (the default measure, of SQL and of the commands, is S_L: below)
    for threshold in ("0.3", "0.99"):  # outside the 0.5 to 0.95 the calibration covers
        result = run("pairs", "-s", threshold, "--measure", "s_r", "--dsn", database, "-t",
                     table, "--json")  # fmt: skip
        assert result.exit_code == 0, result.output
        expected = sql_rows("SELECT * FROM nearsim_pairs_verified(%s, %s, 's_r')",
                            float(threshold))
        by_keys = itemgetter("a", "b")
        assert sorted(json.loads(result.stdout), key=by_keys) == sorted(expected, key=by_keys)
        assert len(expected) == (3 if threshold == "0.3" else 1)

        result = run("clusters", "-s", threshold, "--measure", "s_r", "--dsn", database, "-t",
                     table, "--json")  # fmt: skip
        assert result.exit_code == 0, result.output
        by_sql: dict[str, list[str]] = {}
        for row in sql_rows("SELECT * FROM nearsim_clusters_verified(%s, %s, 's_r')",
                               float(threshold)):
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
