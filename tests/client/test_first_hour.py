"""What a new user meets in the first hour: warnings for queries that cannot
find anything, every fault of `stats` with its fix, errors of one line
before the work."""

from __future__ import annotations

import json
from pathlib import Path

import psycopg
import pytest
from click.testing import CliRunner, Result

from nearsim.client.cli import cli

CHAPTER = ("In the beginning God created the heaven and the earth. And the earth was without"
           " form, and void; and darkness was upon the face of the deep. And the Spirit of God"
           " moved upon the face of the waters.")


def run(*args: str) -> Result:
    return CliRunner().invoke(cli, list(args), catch_exceptions=False)


def test_a_query_that_cannot_find_anything_is_warned_about(database: str) -> None:
    assert run("init", "--dsn", database, "--table", "hour").exit_code == 0
    for query, warning in (("", "has no words"), ("!!!", "has no words"),
                           ("GNU General Public License", "has 2 shingle(s)")):
        for extra in ((), ("-s", "0.8")):
            result = run("similar", query, *extra, "--dsn", database, "--table", "hour")
            assert result.exit_code == 0, result.output
            assert f"warning: the query {warning}" in result.stderr, (query, result.stderr)
            assert len(result.stderr.strip().splitlines()) == 1
    result = run("similar", CHAPTER, "--dsn", database, "--table", "hour")
    assert result.stderr == ""


def test_stats_shows_every_fault_and_the_repair(database: str, tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_text(CHAPTER)
    assert run("load", str(tmp_path), "--dsn", database, "--table", "faults", "--create",
               "--quiet").exit_code == 0
    with psycopg.connect(database, autocommit=True) as conn:
        conn.execute("ALTER TABLE faults DISABLE TRIGGER zz_nearsim_fingerprint")
        conn.execute("INSERT INTO faults (key, source, content_hash, body) VALUES"
                     " ('b', 'b', '\\x00', 'a second document written behind the index')")
    result = run("stats", "--dsn", database, "--table", "faults")
    assert result.exit_code == 1
    lines = result.stdout.splitlines()
    assert "  stale: 1" in lines and "  triggers_ok: no" in lines, result.stdout
    assert "  sample_keys: b" in lines
    assert "repair with: SELECT nearsim_rebuild('faults');" in result.stdout
    with psycopg.connect(database, autocommit=True) as conn:
        conn.execute("SELECT nearsim_rebuild('faults')")
    healthy = run("stats", "--dsn", database, "--table", "faults")
    assert healthy.exit_code == 0 and "healthy" in healthy.stdout
    assert "repair" not in healthy.stdout


def test_report_to_a_missing_directory_fails_first(tmp_path: Path) -> None:
    for name in ("a.txt", "b.txt"):
        (tmp_path / name).write_text(CHAPTER)
    result = CliRunner().invoke(cli, ["report", str(tmp_path / "a.txt"), str(tmp_path / "b.txt"),
                                      "-o", "/nonexistent-dir/x.html"])
    assert result.exit_code == 2
    assert "directory /nonexistent-dir does not exist" in result.output
    assert ("Traceback" not in result.output and result.exception is None) or isinstance(
        result.exception, SystemExit)


def test_a_query_from_standard_input_and_a_load_that_finds_nothing(
    database: str, tmp_path: Path
) -> None:
    (tmp_path / "a.txt").write_text(CHAPTER)
    assert run("load", str(tmp_path), "--dsn", database, "--table", "stdin_docs", "--create",
               "--quiet").exit_code == 0
    found = CliRunner().invoke(cli, ["similar", "-f", "-", "--dsn", database, "--table",
                                     "stdin_docs"], input=CHAPTER)
    assert found.exit_code == 0, found.output
    # S_L (the default measure) and S_R side by side, then the distance
    assert found.stdout.splitlines()[1].split()[:3] == ["100.0%", "100.0%", "0"], found.output
    empty = tmp_path / "empty"
    empty.mkdir()
    nothing = run("load", str(empty), "--dsn", database, "--table", "stdin_docs", "--quiet")
    assert nothing.exit_code == 0
    assert f"warning: no documents found in {empty}" in nothing.stderr
    filtered = run("load", str(tmp_path), "--include", "*.pdf", "--dsn", database, "--table",
                   "stdin_docs", "--quiet")
    assert "(check --include and --exclude)" in filtered.stderr


def test_init_says_what_the_table_has(database: str) -> None:
    created = run("init", "--dsn", database, "--table", "mail", "--profile", "english")
    assert created.exit_code == 0
    assert "created table mail, enabled for nearsim with profile english/1" in created.stdout
    kept = run("init", "--dsn", database, "--table", "mail")
    assert "kept table mail, enabled for nearsim with profile english/1" in kept.stdout
    other = run("init", "--dsn", database, "--table", "mail", "--profile", "default")
    assert other.exit_code == 2 and "not default/1" in other.output


def test_errors_are_one_line_with_the_servers_hint(database: str) -> None:
    from nearsim.client.clitools import one_line

    # the server has no radius for 0.3 (pairs by S_R need none, a query does):
    # its own error and hint, as one line, not a narrower limit of the CLI's
    outside = run("similar", CHAPTER, "-s", "0.3", "--dsn", database, "--table", "hour")
    assert outside.exit_code == 2
    assert outside.output.startswith("Error: database error: min_similarity must be between"
                                     " 0.5 and 0.95 (the calibrated range), got 0.3")
    assert "(Pass max_distance to choose the radius yourself.)" in outside.output
    assert len(outside.output.strip().splitlines()) == 1 and "Traceback" not in outside.output
    with psycopg.connect(database) as conn, pytest.raises(psycopg.Error) as caught:
        conn.execute("SELECT nearsim_check_profile('pg_class', 'default/9')")
    line = one_line(caught.value)
    assert line.startswith("the fingerprints of pg_class come from profile default/9")
    assert "(Recompute them with another profile" in line
    assert "\n" not in line and "plpy" not in line and "Traceback" not in line


def test_json_load_prints_its_summary_once(database: str, tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_text(CHAPTER)
    result = run("load", str(tmp_path), "--dsn", database, "--table", "json_docs", "--create",
                 "--quiet", "--json")
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["loaded"] == 1
    assert result.stderr == ""  # the summary is the JSON on stdout, not twice
