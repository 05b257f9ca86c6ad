"""The query commands end when the program reading their output stops.

`nearsim pairs | head` must behave as `psql ... | head` does: once head has
its lines, nearsim ends, however much output it still had.  Through a real
pipe, with more output than the pipe holds.
"""

from __future__ import annotations

import shlex
import subprocess
import sys

import psycopg
import pytest

IDENTICAL = 800  # 319,600 pairs, megabytes of output


@pytest.fixture(scope="module")
def crowded(database: str) -> str:
    with psycopg.connect(database, autocommit=True) as conn:
        conn.execute("CREATE TABLE crowded (id int PRIMARY KEY, body text)")
        conn.execute("INSERT INTO crowded SELECT g, 'the same words in every document of it'"
                     " FROM generate_series(1, %s) g", [IDENTICAL])
        conn.execute("SELECT nearsim_enable('crowded', 'body')")
    return database


@pytest.mark.parametrize(("command", "lines"), [
    ("pairs -k 3", 2), ("pairs -k 3 --json", 2), ("clusters -k 3", 30),
    ("clusters -k 3 --method pivot --json", 3)])
def test_a_reader_that_stops_ends_the_command(crowded: str, command: str, lines: int) -> None:
    nearsim = f"{shlex.quote(sys.executable)} -m nearsim.client.cli"
    pipeline = (f"{nearsim} {command} --dsn {shlex.quote(crowded)} --table crowded"
                f" | head -n {lines}")
    done = subprocess.run(["bash", "-o", "pipefail", "-c", pipeline], capture_output=True,
                          text=True, timeout=120)
    assert len(done.stdout.splitlines()) == lines
    assert "Traceback" not in done.stderr, done.stderr
    # the server is not left running the query
    with psycopg.connect(crowded, autocommit=True) as conn:
        running = conn.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE state = 'active'"
            " AND datname = current_database()"  # other modules' databases run pairs too
            " AND (query LIKE '%nearsim\\_pairs%' OR query LIKE '%nearsim\\_clusters%')"
            " AND pid <> pg_backend_pid()").fetchone()
    assert running == (0,)
