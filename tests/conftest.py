"""Fixtures for every test: a real PostgreSQL, and the marks of the test rooms.

The tests mirror the code: ``tests/core``, ``tests/server`` and
``tests/client`` test the package's three rooms; ``tests/system`` holds the
slow tests of the whole (packaging, installation, upgrades, dump and
restore, generated reference pages) and ``tests/benchmarks`` quick runs of
the benchmarks.  Each test is marked with its room (``-m "not system"``
leaves the slow ones out).

With ``NEARSIM_TEST_DSN`` set, the tests use that database (the nearsim
extension must be installed on its server).  Otherwise they start a
throwaway cluster in a temporary directory with scripts/pgcluster.sh and
remove it afterwards.
"""

from __future__ import annotations

import os
import random
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path

import psycopg
import pytest
from psycopg import sql
from psycopg.conninfo import conninfo_to_dict, make_conninfo

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "golden"))
sys.path.insert(0, str(ROOT / "tests" / "shared"))

TEST_DATABASE = "nearsim_test"
ROOMS = {
    "core": "pure computation (nearsim.core), no database",
    "server": "the extension in a database (SQL, PL/Python, C)",
    "client": "the client library and the command line",
    "system": "slow tests of the whole: packaging, install, upgrade, operations",
    "benchmarks": "quick runs of the benchmarks",
    "spark": "the Spark back end (nearsim.spark) on a local Spark session",
}


def pytest_configure(config: pytest.Config) -> None:
    for room, meaning in ROOMS.items():
        config.addinivalue_line("markers", f"{room}: {meaning}")


# The files that take longest (minutes each on 2 cores), longest first.  They are
# collected before all others, so that pytest-xdist hands them out first and the
# workers end together instead of one finishing a long file alone.
LONGEST_FILES = (
    "spark/test_spark_pairs.py", "spark/test_spark_runtime.py", "spark/test_spark_dedup.py",
    "spark/test_spark_cluster.py", "spark/test_spark_survivors.py", "core/test_profiles.py",
    "server/test_fingerprint_c.py", "core/test_fingerprint.py", "spark/test_spark_table.py",
    "server/test_table_pairs.py", "server/test_verified.py",
    "benchmarks/test_defaults_benchmark.py",
)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    def rank(item: pytest.Item) -> int:
        path = Path(str(item.fspath)).relative_to(ROOT / "tests").as_posix()
        return LONGEST_FILES.index(path) if path in LONGEST_FILES else len(LONGEST_FILES)

    for item in items:
        room = Path(str(item.fspath)).relative_to(ROOT / "tests").parts[0]
        if room in ROOMS:
            item.add_marker(getattr(pytest.mark, room))
    items.sort(key=rank)  # stable: each file's tests stay together and in order


def _cluster_command(*args: str) -> str:
    result = subprocess.run(
        [str(ROOT / "scripts" / "pgcluster.sh"), *args],
        check=True,
        capture_output=True,
        text=True,
    )
    return result.stdout.strip()


@contextmanager
def _throwaway_cluster(prefix: str, port: str,
                       settings: Mapping[str, str]) -> Iterator[tuple[str, str]]:
    """A throwaway cluster in a new temporary directory, restarted with ``settings``
    (ALTER SYSTEM) if any: its directory and the DSN of its postgres database.

    Stopped and removed afterwards.
    """
    directory = tempfile.mkdtemp(prefix=prefix)
    os.chmod(directory, 0o755)
    try:
        server = _cluster_command("start", directory, port, "--throwaway")
        if settings:
            with psycopg.connect(server, autocommit=True) as conn:
                for name, value in settings.items():
                    conn.execute(sql.SQL("ALTER SYSTEM SET {} = {}").format(
                        sql.Identifier(name), sql.Literal(value)))
            _cluster_command("stop", directory)
            server = _cluster_command("start", directory, port, "--throwaway")
        yield directory, server
    finally:
        subprocess.run([str(ROOT / "scripts" / "pgcluster.sh"), "stop", directory], check=False)
        shutil.rmtree(directory, ignore_errors=True)


@pytest.fixture(scope="session")
def dsn() -> Iterator[str]:
    configured = os.environ.get("NEARSIM_TEST_DSN")
    if configured:
        yield configured
        return
    with _throwaway_cluster("nearsim-test-", "5432", {}) as (_, server):
        with psycopg.connect(server, autocommit=True) as conn:
            conn.execute(f"CREATE DATABASE {TEST_DATABASE}")
        yield server.replace("dbname=postgres", f"dbname={TEST_DATABASE}")


@pytest.fixture(scope="session")
def own_server() -> Callable[..., AbstractContextManager[tuple[str, str]]]:
    """Servers of a test module's own, for what the shared one cannot change:
    ``with own_server(prefix, settings) as (directory, dsn)`` starts a
    throwaway cluster on a random port with those settings; with
    ``database=name``, the DSN is of a new database of that name with the
    extension created."""
    @contextmanager
    def start(prefix: str, settings: Mapping[str, str],
              database: str | None = None) -> Iterator[tuple[str, str]]:
        with _throwaway_cluster(prefix, str(random.Random().randrange(20000, 30000)),
                                settings) as (directory, server):
            if database is not None:
                with psycopg.connect(server, autocommit=True) as conn:
                    conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(database)))
                server = make_conninfo(server, dbname=database)
                with psycopg.connect(server, autocommit=True) as conn:
                    conn.execute("CREATE EXTENSION nearsim CASCADE")
            yield directory, server
    return start


@pytest.fixture(scope="session")
def pgcluster() -> Callable[..., str]:
    """scripts/pgcluster.sh with the given arguments; its output."""
    return _cluster_command


@pytest.fixture(scope="module")
def database(dsn: str, request: pytest.FixtureRequest) -> Iterator[str]:
    """A DSN of a database of the test module's own, with the extension created.

    What one module commits (enabled tables, loaded documents) cannot change
    what another finds, whatever order they run in.  Dropped afterwards.
    """
    name = f"nearsim_{request.module.__name__.rpartition('.')[2]}"[:63]
    drop = sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(drop)
        conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    database = make_conninfo(dsn, dbname=name)
    with psycopg.connect(database, autocommit=True) as conn:
        conn.execute("CREATE EXTENSION nearsim CASCADE")
    yield database
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(drop)


@pytest.fixture
def conn(database: str) -> Iterator[psycopg.Connection]:
    """A connection in a transaction that is rolled back after the test."""
    with psycopg.connect(database) as connection:
        yield connection
        connection.rollback()


@pytest.fixture
def scratch_databases(dsn: str) -> Iterator[Callable[[str], str]]:
    """Make empty databases on the test server by name (their DSN); dropped afterwards."""
    made: list[str] = []

    def make(name: str) -> str:
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(
                sql.Identifier(name)))
            conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
        made.append(name)
        return make_conninfo(dsn, dbname=name)

    yield make
    with psycopg.connect(dsn, autocommit=True) as conn:
        for name in made:
            conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(
                sql.Identifier(name)))


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
