"""The command line's contract: help, exit codes, connection settings, odd names, Ctrl-C."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import psycopg
import pytest
from cli_helpers import CHAPTERS, load, run, table_name
from click.testing import CliRunner
from psycopg import sql

from nearsim.client.cli import cli, load_command
from nearsim.client.connect import ConnectionFailed, resolve_dsn


def test_every_command_has_help_with_an_example() -> None:
    assert set(cli.commands) >= {"init", "load", "similar", "pairs", "clusters", "compare",
                                 "stats"}
    for name in [None, *cli.commands]:
        result = run(*([name] if name else []), "--help")
        assert result.exit_code == 0, result.output
        assert "Example" in result.output, name
    result = CliRunner().invoke(load_command, ["--help"], prog_name="nearsim-load")
    assert result.exit_code == 0 and "nearsim-load --create" in result.output


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
