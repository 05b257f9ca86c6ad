"""nearsim-load with file names that are not UTF-8, random bytes, and a
connection lost midway: each is reported, the rest is loaded, and the
summary is printed."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import psycopg
import pytest
from psycopg import sql

from nearsim.client.extract import InputError, read_document
from nearsim.client.sources import storable

TEXT = "In the beginning God created the heaven and the earth and the earth was without form\n"


def nearsim_load(*args: str) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-m", "nearsim.client.cli", "load", *args],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def test_a_file_name_that_is_not_utf8_keeps_its_bytes(database: str, tmp_path: Path) -> None:
    root = tmp_path / "names"
    root.mkdir()
    raw = os.fsencode(root) + b"/caf\xe9 100%.txt"  # Latin-1 e-acute: not UTF-8
    with open(raw, "wb") as file:
        file.write(TEXT.encode())
    (root / "plain.txt").write_text("Now it came to pass in the days when the judges ruled\n")
    done = nearsim_load(str(root), "--dsn", database, "--table", "names", "--create",
                        "--quiet", "--json")
    out, err = done.communicate(timeout=120)
    assert done.returncode == 0, err
    assert json.loads(out)["loaded"] == 2
    with psycopg.connect(database) as conn:
        keys = [row[0] for row in conn.execute("SELECT key FROM names ORDER BY key")]
    assert keys == [f"{root}/caf%E9 100%25.txt", f"{root}/plain.txt"]
    # the key says which bytes the name has
    assert storable(os.fsdecode(raw)) == keys[0]


def test_random_bytes_are_binary_whatever_their_name(tmp_path: Path) -> None:
    rng = random.Random(7)
    for number in range(200):
        path = tmp_path / f"blob{number}"  # no suffix to go by
        path.write_bytes(rng.randbytes(rng.choice([100, 1000, 5000, 50000])))
        try:
            read_document(str(path), max_bytes=1 << 20)
        except InputError as error:
            assert error.reason == "binary", (number, error.reason, error.message)
        else:
            raise AssertionError(f"random bytes {number} were read as text")


def corpus(root: Path, count: int) -> Path:
    root.mkdir()
    for number in range(count):
        (root / f"{number:05d}.txt").write_text(f"{TEXT.strip()} number {number}\n")
    return root


def wait_until_stored(admin: psycopg.Connection, table: str, rows: int) -> None:
    """Until the load under way has committed more than ``rows`` rows."""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if admin.execute("SELECT to_regclass(%s) IS NOT NULL", [table]).fetchone() == (True,):
            stored = admin.execute(sql.SQL("SELECT count(*) FROM {}").format(
                sql.Identifier(table))).fetchone()
            if stored and stored[0] > rows:
                return
        time.sleep(0.01)


def test_a_lost_connection_still_prints_the_summary(database: str, tmp_path: Path) -> None:
    root = corpus(tmp_path / "corpus", 2000)
    loading = nearsim_load(str(root), "--dsn", database, "--table", "lost", "--create",
                           "--batch-rows", "10", "--workers", "1", "--quiet", "--json")
    with psycopg.connect(database, autocommit=True) as admin:
        wait_until_stored(admin, "lost", 50)
        admin.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
                      " WHERE datname = current_database() AND pid <> pg_backend_pid()"
                      " AND backend_type = 'client backend'")
    out, err = loading.communicate(timeout=120)
    assert loading.returncode == 2, err
    summary = json.loads(out)
    assert 0 < summary["loaded"] < 2000
    assert summary["error"].startswith("database connection lost")
    assert err.strip().splitlines()[-1].startswith("Error: database connection lost"), err
    assert "loaded" in err.strip().splitlines()[-1]  # how far it got, on the same line
    assert "Traceback" not in err


# The second Ctrl-C lands in a batch's COPY or commit, in the worker pool's
# shutdown, while the connections close or while Python exits.
@pytest.mark.parametrize("gap", [0.0, 0.01, 0.02, 0.05, 0.2])
def test_two_ctrl_c_still_end_with_the_summary(database: str, tmp_path: Path,
                                               gap: float) -> None:  # fmt: skip
    root = corpus(tmp_path / "corpus", 3000)
    table = f"twice_{int(gap * 1000)}"
    loading = nearsim_load(str(root), "--dsn", database, "--table", table, "--create",
                           "--batch-rows", "50", "--workers", "1", "--quiet")
    with psycopg.connect(database, autocommit=True) as admin:
        wait_until_stored(admin, table, 100)
    loading.send_signal(signal.SIGINT)
    time.sleep(gap)
    loading.send_signal(signal.SIGINT)
    _, err = loading.communicate(timeout=120)
    # 130, or killed by the second SIGINT once the summary was out (Python
    # restores the default handler while it exits): 130 to a shell either way
    assert loading.returncode in (130, -signal.SIGINT), err
    assert "Aborted" not in err and "Traceback" not in err, err
    assert "Exception ignored" not in err, err  # nothing left running at exit
    assert any(" loaded, " in line for line in err.splitlines()), err  # the summary
    assert err.strip().splitlines()[-1].startswith("interrupted"), err
    # whatever was committed is whole: a rerun ends with every file, once
    rerun = nearsim_load(str(root), "--dsn", database, "--table", table, "--quiet")
    rerun.communicate(timeout=300)
    assert rerun.returncode == 0
    with psycopg.connect(database) as conn:
        counted = sql.SQL("SELECT count(*), count(DISTINCT key) FROM {}").format(
            sql.Identifier(table))
        assert conn.execute(counted).fetchone() == (3000, 3000)
        assert conn.execute("SELECT ok FROM nearsim_verify(%s::regclass)",
                            (table,)).fetchone() == (True,)
