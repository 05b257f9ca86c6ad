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
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator, Mapping
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path

import psycopg
import pytest
from psycopg import sql
from psycopg.conninfo import make_conninfo

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "golden"))

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


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        room = Path(str(item.fspath)).relative_to(ROOT / "tests").parts[0]
        if room in ROOMS:
            item.add_marker(getattr(pytest.mark, room))


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
def own_server() -> Callable[[str, Mapping[str, str]], AbstractContextManager[tuple[str, str]]]:
    """Servers of a test module's own, for what the shared one cannot change:
    ``with own_server(prefix, settings) as (directory, dsn)`` starts a
    throwaway cluster on a random port with those settings."""
    def start(prefix: str, settings: Mapping[str, str]) -> AbstractContextManager[
            tuple[str, str]]:
        return _throwaway_cluster(prefix, str(random.Random().randrange(20000, 30000)),
                                  settings)
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
