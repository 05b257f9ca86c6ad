"""The nearsim_btree rotation indexes through a crash and a two-phase commit.

A transaction's index entries wait in its backend's memory until it
commits or prepares; these tests take a server of their own and check that
what a committed or prepared transaction wrote is in the indexes after
crash recovery and after COMMIT PREPARED.  The server checks every btree
WAL record it replays against the page the record was written from
(wal_consistency_checking), and amcheck checks the pages after recovery.
"""

from __future__ import annotations

import os
import random
import signal
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from pathlib import Path

import psycopg
import pytest

ROWS = 20_000


@pytest.fixture(scope="module")
def server(
    own_server: Callable[..., AbstractContextManager[tuple[str, str]]],
) -> Iterator[tuple[str, str]]:
    """A throwaway cluster that allows prepared transactions: its directory and a DSN."""
    with own_server("nearsim-recovery-", {"max_prepared_transactions": "4",
                                          "wal_consistency_checking": "btree"},
                    database="recovery") as (directory, database):
        yield directory, database


def fingerprints(seed: int) -> list[int]:
    rng = random.Random(seed)
    return [rng.getrandbits(64) - (1 << 63) for _ in range(ROWS)]


def enabled_table(conn: psycopg.Connection, table: str) -> None:
    conn.execute(f"CREATE TABLE {table} (id int PRIMARY KEY, body text, si bigint)")
    conn.execute(f"SELECT nearsim_enable('{table}', 'body')")


def copy_rows(conn: psycopg.Connection, table: str, values: list[int]) -> None:
    conn.execute("SET nearsim.profile = 'default/1'")  # fingerprints computed elsewhere
    with conn.cursor().copy(f"COPY {table} (id, body, si) FROM STDIN") as copy:
        for i, fp in enumerate(values):
            copy.write_row((i, f"document {i}", fp))


def assert_exact(conn: psycopg.Connection, table: str, values: list[int]) -> None:
    """Every row is in the rotation indexes; searches equal the hamming() scan."""
    found = conn.execute(
        f"SELECT cardinality(nearsim_search('{table}', 'si', 0, 64))").fetchone()
    assert found == (len(values),)
    for query in values[:: len(values) // 10]:
        for k in (0, 3, 6):
            by_index = conn.execute(f"SELECT array_agg((doc).id ORDER BY (doc).id) FROM"
                                    f" {table}_similar(%s::bigint, %s)", (query, k)).fetchone()
            # si + 0 is not the indexed column: a scan, never the rotation index
            by_scan = conn.execute(f"SELECT array_agg(id ORDER BY id) FROM {table}"
                                   " WHERE hamming(si + 0, %s) <= %s", (query, k)).fetchone()
            assert by_index == by_scan
    report = conn.execute(f"SELECT ok, missing, extra FROM nearsim_verify('{table}',"
                          " fingerprints => false)").fetchone()
    assert report == (True, 0, 0)


def crash(directory: str, pgcluster: Callable[..., str]) -> None:
    """Stop the server as a crash does (SIGQUIT: no checkpoint), then start it."""
    data = Path(directory).resolve() / "data"
    postmaster = int((data / "postmaster.pid").read_text().split()[0])
    os.kill(postmaster, signal.SIGQUIT)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            os.kill(postmaster, 0)
        except ProcessLookupError:
            break
        time.sleep(0.1)
    else:
        raise AssertionError("the server did not stop")
    pgcluster("start", directory)


def test_committed_entries_survive_a_crash(server: tuple[str, str],
                                           pgcluster: Callable[..., str]) -> None:
    directory, database = server
    values = fingerprints(1)
    with psycopg.connect(database) as conn:
        conn.execute("SET synchronous_commit = on")  # the commit is on disk when it returns
        enabled_table(conn, "crashed")
        conn.commit()
        copy_rows(conn, "crashed", values)
        conn.commit()
    crash(directory, pgcluster)
    with psycopg.connect(database, autocommit=True) as conn:
        log = (Path(directory).resolve() / "data" / "server.log").read_text()
        assert "database system was interrupted" in log
        assert_exact(conn, "crashed", values)


def test_leaves_written_a_page_at_a_time_replay_as_written(
        server: tuple[str, str], pgcluster: Callable[..., str]) -> None:
    """A flush writes a leaf that takes many entries as one image of the page,
    and a leaf that takes a few as btree's record for each: both replay."""
    directory, database = server
    with psycopg.connect(database, autocommit=True) as conn:
        conn.execute("SET synchronous_commit = on")  # the commits are on disk when they return
        conn.execute("CREATE EXTENSION IF NOT EXISTS pg_walinspect")
        conn.execute("CREATE TABLE leaves (id bigint, k bigint)")
        conn.execute("CREATE INDEX leaves_k ON leaves USING nearsim_btree (k)")
        conn.execute("CHECKPOINT")
        start = conn.execute("SELECT pg_current_wal_insert_lsn()").fetchone()
        conn.execute("INSERT INTO leaves SELECT g, hashint8(g)"
                     " FROM generate_series(1::bigint, 100000) g")
        conn.execute("INSERT INTO leaves SELECT g, hashint8(g)"
                     " FROM generate_series(100001::bigint, 100300) g")
        records = dict(conn.execute(
            "SELECT \"resource_manager/record_type\", count FROM pg_get_wal_stats(%s,"
            " pg_current_wal_flush_lsn(),"
            " per_record => true)", start).fetchall())
        # 100,000 entries into an empty index: images of full leaves, about 270
        assert records.get("XLOG/FPI", 0) >= 200
        # then 300 entries, about one on each leaf: a record each
        assert records.get("Btree/INSERT_LEAF", 0) >= 300
    crash(directory, pgcluster)
    with psycopg.connect(database, autocommit=True) as conn:
        log = (Path(directory).resolve() / "data" / "server.log").read_text()
        assert log.count("database system was interrupted") == 2  # this crash and the first
        assert "inconsistent page" not in log
        conn.execute("CREATE EXTENSION IF NOT EXISTS amcheck")
        with conn.transaction(force_rollback=True):
            conn.execute("UPDATE pg_class SET relam = (SELECT oid FROM pg_am"
                         " WHERE amname = 'btree') WHERE oid = 'leaves_k'::regclass")
            conn.execute("SELECT bt_index_parent_check('leaves_k', heapallindexed => true)")
        conn.execute("SET enable_seqscan = off")
        assert conn.execute("SELECT count(*) FROM leaves WHERE k >= -9223372036854775808"
                            ).fetchone() == (100_300,)


def test_a_prepared_transaction_keeps_its_entries(server: tuple[str, str]) -> None:
    _, database = server
    values = fingerprints(2)
    with psycopg.connect(database) as conn:
        enabled_table(conn, "prepared")
        conn.commit()
        copy_rows(conn, "prepared", values)
        conn.execute("PREPARE TRANSACTION 'nearsim_load'")
    with psycopg.connect(database, autocommit=True) as conn:
        assert conn.execute("SELECT count(*) FROM prepared").fetchone() == (0,)
        conn.execute("COMMIT PREPARED 'nearsim_load'")
        assert_exact(conn, "prepared", values)
