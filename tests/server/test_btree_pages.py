"""The pages a nearsim_btree flush writes are PostgreSQL's btree pages.

A flush puts a transaction's waiting entries in key order a leaf page at a
time (extension/src/leaf_writer.c). amcheck's bt_index_parent_check, which
takes only indexes of the btree access method, is run on each index with its
access method named btree inside a transaction that is rolled back: it
checks the order of every page and its parent's keys, and that every row of
the table is in the index (heapallindexed). Each case also checks the
answers of the index against the table.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator

import psycopg
import pytest
from psycopg import sql

ROWS = 200_000


@pytest.fixture(scope="module", autouse=True)
def amcheck(database: str) -> None:
    with psycopg.connect(database, autocommit=True) as conn:
        conn.execute("CREATE EXTENSION IF NOT EXISTS amcheck")


@pytest.fixture
def db(database: str) -> Iterator[psycopg.Connection]:
    with psycopg.connect(database, autocommit=True) as conn:
        conn.execute("DROP TABLE IF EXISTS keys")
        conn.execute("CREATE TABLE keys (id bigint, k bigint)")
        conn.execute("CREATE INDEX keys_k ON keys USING nearsim_btree (k)")
        yield conn


def assert_btree_intact(conn: psycopg.Connection, index: str = "keys_k") -> None:
    with conn.transaction(force_rollback=True):
        conn.execute("UPDATE pg_class SET relam = (SELECT oid FROM pg_am WHERE amname = 'btree')"
                     " WHERE oid = %s::regclass", (index,))
        conn.execute("SELECT bt_index_parent_check(%s::regclass, heapallindexed => true,"
                     " rootdescend => true)", (index,))


def assert_answers_equal_the_table(conn: psycopg.Connection) -> None:
    """Every row found by its key through the index, and nothing else."""
    with conn.transaction(force_rollback=True):
        conn.execute("SET LOCAL enable_seqscan = off")
        conn.execute("SET LOCAL enable_bitmapscan = off")
        by_index = conn.execute("SELECT count(*), sum(id) FROM keys"
                                " WHERE k >= -9223372036854775808").fetchone()
        plan = "\n".join(r[0] for r in conn.execute(
            "EXPLAIN SELECT count(*), sum(id) FROM keys WHERE k >= -9223372036854775808"))
        assert "keys_k" in plan
        missing = conn.execute("""SELECT count(*) FROM keys t WHERE NOT EXISTS (
            SELECT FROM keys u WHERE u.k = t.k AND u.ctid = t.ctid)""").fetchone()
    with conn.transaction(force_rollback=True):
        conn.execute("SET LOCAL enable_indexscan = off")
        conn.execute("SET LOCAL enable_indexonlyscan = off")
        conn.execute("SET LOCAL enable_bitmapscan = off")
        by_scan = conn.execute("SELECT count(*), sum(id) FROM keys").fetchone()
    assert by_index == by_scan
    assert missing == (0,)


def insert(conn: psycopg.Connection, first: int, last: int, key: str = "hashint8(g)") -> None:
    conn.execute(sql.SQL("INSERT INTO keys SELECT g, {}"
                         " FROM generate_series(%s::bigint, %s::bigint) g")
                 .format(sql.SQL(key)), (first, last))


def test_a_table_filled_from_empty(db: psycopg.Connection) -> None:
    # one transaction: its entries fill the leaves from the right, page after page
    insert(db, 1, ROWS)
    assert_btree_intact(db)
    assert_answers_equal_the_table(db)


def test_a_few_entries_on_each_leaf_of_a_full_index(db: psycopg.Connection) -> None:
    insert(db, 1, ROWS)
    # a few entries on each leaf, then more on some: pages split under them
    for first, last in ((ROWS + 1, ROWS + 500), (ROWS + 501, ROWS + 60_000)):
        insert(db, first, last)
        assert_btree_intact(db)
    assert_answers_equal_the_table(db)


def test_equal_keys_in_posting_lists_and_rows_inside_their_ranges(
        db: psycopg.Connection) -> None:
    # 20 keys over 100,000 rows: full leaves of equal keys become posting lists
    insert(db, 1, 100_000, key="g %% 20")
    # rows deleted here and there free their tuple ids, which new rows take:
    # the new entries fall inside the ranges of the posting lists of their key
    db.execute("DELETE FROM keys WHERE id % 7 = 0")
    db.execute("VACUUM keys")
    insert(db, 100_001, 114_000, key="g %% 20")
    assert db.execute("SELECT count(*) FROM keys WHERE ctid < '(100,0)'::tid"
                      " AND id > 100000").fetchone()[0] > 0
    insert(db, 114_001, 130_000, key="(g %% 40) * 1000")
    assert_btree_intact(db)
    assert_answers_equal_the_table(db)


def test_two_transactions_flushing_into_the_same_leaves(
        db: psycopg.Connection, database: str) -> None:
    insert(db, 1, 50_000)
    errors: list[BaseException] = []
    barrier = threading.Barrier(2)

    def load(first: int) -> None:
        try:
            with psycopg.connect(database) as conn:
                insert(conn, first, first + 99_999)
                barrier.wait(timeout=60)
                conn.commit()  # both flush at once, into the same leaves
        except BaseException as error:
            errors.append(error)

    threads = [threading.Thread(target=load, args=(first,)) for first in (100_001, 200_001)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    assert db.execute("SELECT count(*) FROM keys").fetchone() == (250_000,)
    assert_btree_intact(db)
    assert_answers_equal_the_table(db)


def test_a_serializable_reader_of_a_leaf_conflicts_with_a_flush_into_it(
        db: psycopg.Connection, database: str) -> None:
    """Write skew through the index: each reads a range the other writes into."""
    insert(db, 1, 100, key="g * 1000")
    first = psycopg.connect(database)
    second = psycopg.connect(database)
    try:
        for conn in (first, second):
            conn.execute("SET TRANSACTION ISOLATION LEVEL SERIALIZABLE")
            conn.execute("SET enable_seqscan = off")
            conn.execute("SET enable_bitmapscan = off")
        assert first.execute("SELECT count(*) FROM keys WHERE k BETWEEN 1000 AND 50000"
                             ).fetchone() == (50,)
        assert second.execute("SELECT count(*) FROM keys WHERE k BETWEEN 50001 AND 100000"
                              ).fetchone() == (50,)
        first.execute("INSERT INTO keys VALUES (-1, 60500)")
        second.execute("INSERT INTO keys VALUES (-2, 10500)")
        first.commit()
        with pytest.raises(psycopg.errors.SerializationFailure):
            second.commit()
    finally:
        first.close()
        second.close()
    assert db.execute("SELECT array_agg(id) FROM keys WHERE id < 0").fetchone() == ([-1],)
