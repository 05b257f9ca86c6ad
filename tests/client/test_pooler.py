"""nearsim-load behind a real pgbouncer in transaction mode.

A pooler in transaction mode hands one server connection to many clients,
one transaction at a time: whatever a client sets for its session stays on
the server connection for the next client.  The loader's settings (the
profile it declares, its work_mem) must last for its transactions only, or
another client's rows would be taken as declared fingerprints.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from nearsim.client.loader import LoadOptions, load_paths

TEXTS = [
    "In the beginning God created the heaven and the earth and the earth was without form",
    "Now it came to pass in the days when the judges ruled that there was a famine in the land",
    "Blessed is the man that walketh not in the counsel of the ungodly nor standeth in the way",
]


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@pytest.fixture
def pooled(database: str) -> Iterator[str]:
    """A DSN of the test database through pgbouncer (pool_mode transaction, one
    server connection, so every client takes over the previous one's)."""
    binary = shutil.which("pgbouncer") or "/usr/sbin/pgbouncer"
    assert os.path.exists(binary), "scripts/install.sh installs pgbouncer for the tests"
    server = conninfo_to_dict(database)
    directory = Path(tempfile.mkdtemp(prefix="nearsim-pgbouncer-"))
    directory.chmod(0o777)
    port = free_port()
    host = str(server.get("host") or "localhost")
    config = directory / "pgbouncer.ini"
    config.write_text(f"""[databases]
* = host={host} port={server.get("port") or 5432}

[pgbouncer]
listen_addr =
unix_socket_dir = {directory}
listen_port = {port}
auth_type = trust
auth_file = {directory}/users.txt
pool_mode = transaction
default_pool_size = 1
max_client_conn = 20
ignore_startup_parameters = extra_float_digits,options
logfile = {directory}/pgbouncer.log
pidfile = {directory}/pgbouncer.pid
""")
    (directory / "users.txt").write_text(f'"{server.get("user") or "postgres"}" ""\n')
    for path in directory.iterdir():
        path.chmod(0o666)
    # pgbouncer refuses to run as root: as root, it runs as postgres
    user = ["-u", "postgres"] if os.geteuid() == 0 else []
    subprocess.run([binary, "-d", *user, str(config)], check=True, capture_output=True)
    try:
        pooled_dsn = make_conninfo(database, host=str(directory), port=str(port))
        for _ in range(100):
            try:
                psycopg.connect(pooled_dsn).close()
                break
            except psycopg.OperationalError:
                time.sleep(0.05)
        yield pooled_dsn
    finally:
        pid = (directory / "pgbouncer.pid").read_text().strip()
        subprocess.run(["kill", pid], check=False)
        shutil.rmtree(directory, ignore_errors=True)


def test_the_loaders_settings_do_not_reach_the_next_client(
    pooled: str, tmp_path: Path
) -> None:
    for number, text in enumerate(TEXTS):
        (tmp_path / f"{number}.txt").write_text(text)
    summary = load_paths([str(tmp_path)], "pooled_docs", dsn=pooled, create=True,
                         options=LoadOptions(workers=1, batch_rows=1))
    assert summary.loaded == len(TEXTS) and not summary.failures
    # the next client on the same server connection
    with psycopg.connect(pooled, autocommit=True) as other:
        assert other.execute("SELECT pg_catalog.current_setting('nearsim.profile', true)"
                             ).fetchone() in ((None,), ("",))
        with pytest.raises(psycopg.errors.InvalidParameterValue, match="is not the default/1"):
            other.execute("INSERT INTO pooled_docs (key, source, content_hash, body, si)"
                          " VALUES ('forged', 'x', '\\x00', 'some words of a text here', 42)")
        assert other.execute("SELECT ok, stale FROM nearsim_verify('pooled_docs', true)"
                             ).fetchone() == (True, 0)
    # and a second load through the pool, which updates what changed
    (tmp_path / "0.txt").write_text(TEXTS[0] + " and a new ending for this first text")
    again = load_paths([str(tmp_path)], "pooled_docs", dsn=pooled,
                       options=LoadOptions(workers=1, batch_rows=1))
    assert (again.loaded, again.updated, again.unchanged) == (0, 1, 2)


def test_verify_names_stale_fingerprints(database: str) -> None:
    with psycopg.connect(database, autocommit=True) as conn:
        conn.execute("CREATE TABLE stale_docs (id int PRIMARY KEY, body text)")
        conn.execute("INSERT INTO stale_docs SELECT g, 'document number ' || g || ' of many'"
                     " FROM generate_series(1, 20) g")
        conn.execute("SELECT nearsim_enable('stale_docs', 'body')")
        conn.execute("ALTER TABLE stale_docs DISABLE TRIGGER USER")
        conn.execute("UPDATE stale_docs SET body = 'changed behind its back' WHERE id = 7")
        conn.execute("ALTER TABLE stale_docs ENABLE TRIGGER USER")
        for fingerprints in (True, None):  # a table this small is checked whole by default
            ok, stale, keys = conn.execute(
                "SELECT ok, stale, sample_keys FROM nearsim_verify('stale_docs', %s)",
                [fingerprints]).fetchone()
            assert (ok, stale, keys) == (False, 1, ["7"])
        conn.execute("SELECT nearsim_rebuild('stale_docs', fingerprints => true)")
        assert conn.execute("SELECT ok, stale FROM nearsim_verify('stale_docs')").fetchone() == (
            True, 0)
