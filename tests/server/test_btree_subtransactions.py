"""Waiting entries of a rolled-back subtransaction, and the check that finds a broken index.

A rotation index keeps a transaction's new entries in memory until they go
in in key order (``src/btree.c``).  The rows of a subtransaction that rolls
back are dead at once: VACUUM (or autovacuum) may remove them while the
transaction goes on, and another session's rows may take their tuple ids.
Their entries must go with them; if they went in at commit instead, they
would name those other rows under the wrong key, or blocks VACUUM has cut
off the table.  ``nearsim_check_index`` (and so ``nearsim_verify``) reads a
rotation index against its table and reports such entries;
``nearsim_rebuild`` repairs what it reports.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager

import psycopg
import pytest
from psycopg.conninfo import make_conninfo

ROLLED_BACK = 2_000


@pytest.fixture
def docs(database: str) -> Iterator[str]:
    """An enabled table ``docs`` with a few committed rows; dropped afterwards."""
    with psycopg.connect(database, autocommit=True) as conn:
        conn.execute("DROP TABLE IF EXISTS docs CASCADE")
        conn.execute("CREATE TABLE docs (id integer PRIMARY KEY, body text)"
                     " WITH (autovacuum_enabled = off)")
        conn.execute("SELECT nearsim_enable('docs', 'body')")
        conn.execute("INSERT INTO docs SELECT g, 'a committed document number ' || g"
                     " || ' about the early days of the kingdom' FROM generate_series(1, 50) g")
    yield database
    with psycopg.connect(database, autocommit=True) as conn:
        conn.execute("DROP TABLE IF EXISTS docs CASCADE")


def rolled_back_text(i: int) -> str:
    return f"the rolled back draft {i} of a memo on harvests and rivers and mountains"


def other_text(i: int) -> str:
    return f"another session's letter {i} concerning taxes, roads and the price of salt"


def fingerprints(conn: psycopg.Connection, texts: list[str]) -> list[int]:
    return [row[0] for row in conn.execute(
        "SELECT simhash(t) FROM unnest(%s::text[]) AS t", (texts,))]


def through_index(conn: psycopg.Connection, query: int, k: int) -> list[str]:
    """Tuple ids ``nearsim_search`` gives, as text, sorted."""
    row = conn.execute("SELECT nearsim_search('docs', 'si', %s, %s)::text[]", (query, k))
    return sorted(row.fetchone()[0])


def by_scan(conn: psycopg.Connection, query: int, k: int) -> list[str]:
    # si + 0 is not the column itself: the planner cannot read the rotation
    # index for it, so the statement is a scan, whatever indexes the table has
    return sorted(r[0] for r in conn.execute(
        "SELECT ctid::text FROM docs WHERE hamming(si + 0, %s) <= %s", (query, k)))


def nearest_through_index(conn: psycopg.Connection, query: int, n: int) -> list[tuple[int, int]]:
    return [((doc_id), distance) for doc_id, distance in conn.execute(
        "SELECT (doc).id, distance FROM docs_nearest(%s::bigint, %s)", (query, n))]


def nearest_by_scan(conn: psycopg.Connection, query: int, n: int) -> list[tuple[int, int]]:
    return list(conn.execute(
        "SELECT id, hamming(si + 0, %s) FROM docs ORDER BY 2, id LIMIT %s", (query, n)))


def roll_back_a_savepoint(writer: psycopg.Connection, outer_row: bool = True) -> None:
    """Rows written in a savepoint that rolls back, in a transaction left open
    (with a row of its own written before, or none: then it holds no lock on
    the table once the savepoint is gone, and VACUUM may cut pages off)."""
    writer.execute("BEGIN")
    if outer_row:
        writer.execute("INSERT INTO docs VALUES (100000, 'kept by the outer transaction')")
    writer.execute("SAVEPOINT draft")
    with writer.cursor().copy("COPY docs (id, body) FROM STDIN") as copy:
        for i in range(ROLLED_BACK):
            copy.write_row((1000 + i, rolled_back_text(i)))
    writer.execute("ROLLBACK TO SAVEPOINT draft")


def test_entries_of_a_rolled_back_savepoint_do_not_name_rows_that_reuse_their_slots(
        docs: str) -> None:
    with (psycopg.connect(docs, autocommit=True) as writer,
          psycopg.connect(docs, autocommit=True) as other):
        roll_back_a_savepoint(writer)
        # VACUUM frees the dead rows' tuple ids; another session's rows take them.
        other.execute("VACUUM docs")
        with other.cursor().copy("COPY docs (id, body) FROM STDIN") as copy:
            for i in range(ROLLED_BACK):
                copy.write_row((5000 + i, other_text(i)))
        writer.execute("COMMIT")

        check = other.execute(
            "SELECT bool_and(c.wrong = 0 AND c.dangling = 0 AND c.missing = 0"
            " AND c.duplicated = 0) FROM pg_index i,"
            " nearsim_check_index(i.indexrelid::regclass) c"
            " WHERE i.indrelid = 'docs'::regclass AND i.indexprs IS NOT NULL").fetchone()
        assert check == (True,)
        queries = fingerprints(other, [rolled_back_text(i) for i in range(0, ROLLED_BACK, 97)])
        for query in queries:
            assert through_index(other, query, 0) == by_scan(other, query, 0) == []
            assert through_index(other, query, 6) == by_scan(other, query, 6)
            assert nearest_through_index(other, query, 3) == nearest_by_scan(other, query, 3)
        verified = other.execute("SELECT ok, missing, extra, wrong FROM nearsim_verify('docs',"
                                 " fingerprints => true)").fetchone()
        assert verified == (True, 0, 0, 0)


def test_entries_of_a_rolled_back_savepoint_do_not_name_blocks_vacuum_cut_off(
        docs: str) -> None:
    with (psycopg.connect(docs, autocommit=True) as writer,
          psycopg.connect(docs, autocommit=True) as other):
        roll_back_a_savepoint(writer, outer_row=False)
        # Every row at the table's end is dead: VACUUM cuts those pages off.
        blocks_before = other.execute(
            "SELECT pg_relation_size('docs') / 8192").fetchone()[0]
        other.execute("VACUUM docs")
        assert other.execute("SELECT pg_relation_size('docs') / 8192").fetchone()[0] \
            < blocks_before
        writer.execute("COMMIT")
        for query in fingerprints(other, [rolled_back_text(i)
                                          for i in range(0, ROLLED_BACK, 113)]):
            assert through_index(other, query, 3) == by_scan(other, query, 3)
            assert other.execute("SELECT count(*) FROM docs_similar(%s::bigint, 3)",
                                 (query,)).fetchone() == (0,)
        assert other.execute("SELECT ok FROM nearsim_verify('docs')").fetchone() == (True,)


def test_entries_of_a_committed_savepoint_stay_until_their_parent_rolls_back(
        docs: str) -> None:
    with psycopg.connect(docs, autocommit=True) as conn:
        conn.execute("BEGIN")
        conn.execute("SAVEPOINT outer_one")
        conn.execute("SAVEPOINT inner_one")
        conn.execute("INSERT INTO docs VALUES (200, %s)", (rolled_back_text(1),))
        conn.execute("RELEASE SAVEPOINT inner_one")
        conn.execute("INSERT INTO docs VALUES (201, %s)", (rolled_back_text(2),))
        conn.execute("ROLLBACK TO SAVEPOINT outer_one")
        conn.execute("SAVEPOINT kept")
        conn.execute("INSERT INTO docs VALUES (202, %s)", (rolled_back_text(3),))
        conn.execute("RELEASE SAVEPOINT kept")
        # a scan puts the waiting entries in: the transaction's own rows only
        query = fingerprints(conn, [rolled_back_text(3)])[0]
        assert [r[0] for r in conn.execute(
            "SELECT (doc).id FROM docs_similar(%s::bigint, 0)", (query,))] == [202]
        conn.execute("COMMIT")
        entries = conn.execute(
            "SELECT c.entries, c.rows, c.missing, c.dangling, c.wrong FROM pg_index i,"
            " nearsim_check_index(i.indexrelid::regclass) c"
            " WHERE i.indrelid = 'docs'::regclass AND i.indexprs IS NOT NULL").fetchall()
        assert entries and all(row == (51, 51, 0, 0, 0) for row in entries)


def test_entries_of_rows_that_an_exception_block_rolled_back_go_with_them(docs: str) -> None:
    with (psycopg.connect(docs, autocommit=True) as writer,
          psycopg.connect(docs, autocommit=True) as other):
        writer.execute("BEGIN")
        writer.execute("""DO $$
            BEGIN
                INSERT INTO docs SELECT 1000 + g, 'an attempt ' || g || ' that the block undoes'
                    FROM generate_series(1, 500) g;
                RAISE EXCEPTION 'undo';
            EXCEPTION WHEN raise_exception THEN
                NULL;
            END $$""")
        other.execute("VACUUM docs")
        other.execute("INSERT INTO docs SELECT 5000 + g, 'a row of another session ' || g"
                      " || ' taking a free slot' FROM generate_series(1, 500) g")
        writer.execute("COMMIT")
        assert other.execute("SELECT ok, wrong, extra FROM nearsim_verify('docs')").fetchone() \
            == (True, 0, 0)


def assert_index_finds(conn: psycopg.Connection, text: str) -> None:
    """The index finds the rows with text's fingerprint, as the scan does, and
    nearsim_verify finds nothing wrong with it."""
    query = fingerprints(conn, [text])[0]
    assert through_index(conn, query, 0) == by_scan(conn, query, 0) != []
    assert conn.execute("SELECT ok, missing, wrong, extra FROM nearsim_verify('docs')"
                        ).fetchone() == (True, 0, 0, 0)


def test_upserts_keep_their_entries(docs: str) -> None:
    with psycopg.connect(docs, autocommit=True) as conn:
        conn.execute("BEGIN")
        conn.execute("INSERT INTO docs SELECT g, 'an upserted document number ' || g"
                     " FROM generate_series(40, 90) g"
                     " ON CONFLICT (id) DO UPDATE SET body = excluded.body")
        conn.execute("WITH w AS (INSERT INTO docs SELECT g, 'inserted through a WITH ' || g"
                     " FROM generate_series(85, 120) g ON CONFLICT (id) DO NOTHING"
                     " RETURNING 1) SELECT count(*) FROM w")
        conn.execute("COMMIT")
        assert_index_finds(conn, "inserted through a WITH 100")


def test_an_upsert_of_thousands_of_rows_commits(docs: str) -> None:
    """The flush checks each upserted entry against its row, with state that
    must outlive the memory it resets every 1,024 entries (nearsim-load's
    batches of 2,000 documents once crashed the backend here)."""
    with psycopg.connect(docs, autocommit=True) as conn:
        conn.execute("BEGIN")
        conn.execute("INSERT INTO docs SELECT g, 'a loaded document ' || g || ' about wells'"
                     " FROM generate_series(1, 3000) g"
                     " ON CONFLICT (id) DO UPDATE SET body = excluded.body")
        conn.execute("COMMIT")
        assert_index_finds(conn, "a loaded document 2500 about wells")


def rotation_index_names(conn: psycopg.Connection) -> list[str]:
    return [r[0] for r in conn.execute(
        "SELECT indexrelid::regclass::text FROM pg_index WHERE indrelid = 'docs'::regclass"
        " AND indexprs IS NOT NULL ORDER BY indexrelid")]


def test_check_reports_rows_an_index_lacks_and_rebuild_repairs_it(docs: str) -> None:
    """An index that missed writes (here: marked not ready while rows were
    written) is reported with the rows' keys, and nearsim_rebuild builds it again."""
    with psycopg.connect(docs, autocommit=True) as conn:
        index = rotation_index_names(conn)[0]
        conn.execute("UPDATE pg_index SET indisready = false WHERE indexrelid = %s::regclass",
                     (index,))
        conn.execute("UPDATE docs SET body = body || ' and its sequel' WHERE id <= 5")
        conn.execute("UPDATE pg_index SET indisready = true WHERE indexrelid = %s::regclass",
                     (index,))
        check = conn.execute("SELECT entries, rows, missing, wrong, dangling, cardinality(sample)"
                             " FROM nearsim_check_index(%s::regclass)", (index,)).fetchone()
        assert check == (50, 50, 5, 0, 0, 5)
        verified = conn.execute("SELECT ok, missing, sample_keys FROM nearsim_verify('docs')"
                                ).fetchone()
        assert verified == (False, 5, ["1", "2", "3", "4", "5"])
        assert conn.execute("SELECT added FROM nearsim_rebuild('docs')").fetchone() == (50,)
        assert conn.execute("SELECT ok, missing, extra, wrong FROM nearsim_verify('docs')"
                            ).fetchone() == (True, 0, 0, 0)


def test_check_reports_entries_under_a_key_their_rows_do_not_have(docs: str) -> None:
    """Entries under keys that disagree with their rows (here: an index given
    another band's expression behind its back) are reported, and repaired."""
    with psycopg.connect(docs, autocommit=True) as conn:
        first, second = rotation_index_names(conn)[:2]
        conn.execute("UPDATE pg_index SET indexprs = (SELECT indexprs FROM pg_index"
                     " WHERE indexrelid = %s::regclass) WHERE indexrelid = %s::regclass",
                     (second, first))
        check = conn.execute("SELECT entries, rows, missing, wrong, dangling"
                             " FROM nearsim_check_index(%s::regclass)", (first,)).fetchone()
        assert check == (50, 50, 50, 50, 0)
        verified = conn.execute("SELECT ok, wrong FROM nearsim_verify('docs')").fetchone()
        assert verified == (False, 50)
        conn.execute("SELECT nearsim_rebuild('docs')")
        assert conn.execute("SELECT ok, missing, extra, wrong FROM nearsim_verify('docs')"
                            ).fetchone() == (True, 0, 0, 0)


def test_check_is_for_the_owner(docs: str) -> None:
    with psycopg.connect(docs, autocommit=True) as conn:
        conn.execute("DROP ROLE IF EXISTS nearsim_check_stranger")
        conn.execute("CREATE ROLE nearsim_check_stranger")
        conn.execute("GRANT SELECT ON docs TO nearsim_check_stranger")
        index = conn.execute(
            "SELECT indexrelid::regclass::text FROM pg_index WHERE indrelid = 'docs'::regclass"
            " AND indexprs IS NOT NULL LIMIT 1").fetchone()[0]
        conn.execute("SET ROLE nearsim_check_stranger")
        with pytest.raises(psycopg.errors.InsufficientPrivilege, match="must be owner"):
            conn.execute("SELECT * FROM nearsim_check_index(%s::regclass)", (index,))
        conn.execute("RESET ROLE")
        with pytest.raises(psycopg.errors.WrongObjectType, match="not a rotation index"):
            conn.execute("SELECT * FROM nearsim_check_index('docs_pkey')")
        conn.execute("DROP OWNED BY nearsim_check_stranger")
        conn.execute("DROP ROLE nearsim_check_stranger")


def test_the_buffer_an_ordinary_role_sets_is_bounded_by_the_servers_limit(docs: str) -> None:
    with psycopg.connect(docs, autocommit=True) as admin:
        admin.execute("DROP ROLE IF EXISTS nearsim_buffer_writer")
        admin.execute("CREATE ROLE nearsim_buffer_writer LOGIN")
        admin.execute("GRANT pg_read_all_stats TO nearsim_buffer_writer")
        admin.execute("GRANT INSERT, SELECT ON docs TO nearsim_buffer_writer")
        admin.execute("ALTER ROLE nearsim_buffer_writer SET nearsim.max_insert_buffer = '1MB'")
    try:
        writer = make_conninfo(docs, user="nearsim_buffer_writer")
        with psycopg.connect(writer, autocommit=True) as conn:
            # set before the library defines it, the value is not kept either
            conn.execute("SET nearsim.max_insert_buffer = '1GB'")
            conn.execute("SELECT simhash('loads the library')")
            assert conn.execute("SHOW nearsim.max_insert_buffer").fetchone() == ("1MB",)
            with pytest.raises(psycopg.errors.InsufficientPrivilege):
                conn.execute("SET nearsim.max_insert_buffer = '1GB'")
            conn.execute("SET nearsim.insert_buffer = '1GB'")
            conn.execute("BEGIN")
            conn.execute("INSERT INTO docs SELECT g, 'row ' || g || ' of a long load of words'"
                         " FROM generate_series(1000, 201000) g")
            held = conn.execute(
                "SELECT sum(total_bytes) FROM pg_backend_memory_contexts"
                " WHERE name = 'TopTransactionContext'").fetchone()[0]
            conn.execute("COMMIT")
            # 200,000 rows and three indexes would hold 9.6 MB of entries;
            # the role's limit keeps them (and the sort's as much again) to 2 MB
            assert held < 3 * 1024 * 1024, held
            assert conn.execute("SELECT count(*) FROM docs WHERE id >= 1000").fetchone() == (
                200_001,)
    finally:
        with psycopg.connect(docs, autocommit=True) as admin:
            admin.execute("REVOKE pg_read_all_stats FROM nearsim_buffer_writer")
            admin.execute("DROP OWNED BY nearsim_buffer_writer")
            admin.execute("DROP ROLE nearsim_buffer_writer")
    with psycopg.connect(docs, autocommit=True) as conn:
        assert conn.execute("SELECT ok FROM nearsim_verify('docs')").fetchone() == (True,)


def test_autovacuum_alone_between_the_rollback_and_the_commit(
        own_server: Callable[..., AbstractContextManager[tuple[str, str]]]) -> None:
    """No VACUUM typed by anyone: autovacuum frees the dead rows' tuple ids
    while the transaction waits, and another session's rows take them."""
    with own_server("nearsim-autovacuum-", {"autovacuum_naptime": "1s"},
                    database="autovacuum") as (_, server):
        with psycopg.connect(server, autocommit=True) as conn:
            conn.execute("CREATE TABLE docs (id integer PRIMARY KEY, body text) WITH"
                         " (autovacuum_vacuum_threshold = 0, autovacuum_vacuum_scale_factor = 0,"
                         " autovacuum_vacuum_insert_threshold = 0)")
            conn.execute("SELECT nearsim_enable('docs', 'body')")
            conn.execute("INSERT INTO docs SELECT g, 'a committed document number ' || g"
                         " FROM generate_series(1, 50) g")
        with (psycopg.connect(server, autocommit=True) as writer,
              psycopg.connect(server, autocommit=True) as other):
            roll_back_a_savepoint(writer)
            # The rolled-back rows are counted dead only when the writer's transaction
            # ends, and the inserts' own autovacuum may have run already: a committed
            # dead row (kept by the writer's snapshot) brings autovacuum back every
            # naptime.  Two more runs: one at least began after the rollback.
            vacuums = other.execute("SELECT autovacuum_count FROM pg_stat_user_tables"
                                    " WHERE relname = 'docs'").fetchone()[0]
            other.execute("DELETE FROM docs WHERE id = 1")
            # Patient: with the suite's other worker busy, runs a naptime apart have
            # taken more than 30 s.
            for _ in range(240):
                time.sleep(0.5)
                count = other.execute("SELECT autovacuum_count FROM pg_stat_user_tables"
                                      " WHERE relname = 'docs'").fetchone()[0]
                if count >= vacuums + 2:
                    break
            else:
                raise AssertionError(f"autovacuum ran {count - vacuums} times in 120 s, not 2")
            with other.cursor().copy("COPY docs (id, body) FROM STDIN") as copy:
                for i in range(ROLLED_BACK):
                    copy.write_row((5000 + i, other_text(i)))
            writer.execute("COMMIT")
            for query in fingerprints(other, [rolled_back_text(i)
                                              for i in range(0, ROLLED_BACK, 151)]):
                assert through_index(other, query, 6) == by_scan(other, query, 6)
                assert nearest_through_index(other, query, 2) == nearest_by_scan(other, query, 2)
            assert other.execute("SELECT ok, wrong, extra FROM nearsim_verify('docs')"
                                 ).fetchone() == (True, 0, 0)


def test_entries_of_a_row_that_a_losing_upsert_killed_go_with_it(database: str) -> None:
    """INSERT ... ON CONFLICT that loses a race: its row is inserted and indexed,
    then meets the other session's key in the primary key and is killed at
    once (no subtransaction); VACUUM may free its tuple id before the
    transaction ends.  Here the race is made certain: an index of the table
    evaluated before the primary key waits on a lock while the other session
    commits the same key."""
    with psycopg.connect(database, autocommit=True) as conn:
        conn.execute("DROP TABLE IF EXISTS racing CASCADE")
        conn.execute("""CREATE OR REPLACE FUNCTION wait_for_the_race(body text) RETURNS text
            LANGUAGE plpgsql IMMUTABLE AS $$
            BEGIN
                IF body LIKE 'the losing upsert%' THEN
                    PERFORM pg_advisory_lock(4242);
                    PERFORM pg_advisory_unlock(4242);
                END IF;
                RETURN body;
            END $$""")
        conn.execute("CREATE TABLE racing (id integer NOT NULL, body text)"
                     " WITH (autovacuum_enabled = off)")
        # created before the primary key, so written before it
        conn.execute("CREATE INDEX racing_wait ON racing (wait_for_the_race(body))")
        conn.execute("ALTER TABLE racing ADD PRIMARY KEY (id)")
        conn.execute("SELECT nearsim_enable('racing', 'body')")
    losing = "the losing upsert of a document about rivers, harvests and the northern granaries"
    with (psycopg.connect(database, autocommit=True) as referee,
          psycopg.connect(database, autocommit=True) as loser,
          psycopg.connect(database, autocommit=True) as winner):
        referee.execute("SELECT pg_advisory_lock(4242)")
        loser.execute("BEGIN")
        errors: list[BaseException] = []

        def upsert() -> None:
            try:
                loser.execute("INSERT INTO racing VALUES (1, %s) ON CONFLICT (id) DO NOTHING",
                              (losing,))
            except BaseException as error:  # reported below
                errors.append(error)

        thread = threading.Thread(target=upsert)
        thread.start()
        for _ in range(100):
            if referee.execute("SELECT count(*) FROM pg_locks WHERE locktype = 'advisory'"
                               " AND NOT granted AND database = (SELECT oid FROM pg_database"
                               " WHERE datname = current_database())").fetchone() == (1,):
                break
            time.sleep(0.05)
        winner.execute("INSERT INTO racing VALUES (1, 'the winning insert of the same key')")
        referee.execute("SELECT pg_advisory_unlock(4242)")
        thread.join(timeout=30)
        assert not errors and not thread.is_alive()
        # the loser's row is dead; VACUUM frees its slot and another row takes it
        winner.execute("VACUUM racing")
        winner.execute("INSERT INTO racing SELECT g, 'a later letter ' || g || ' on salt and roads'"
                       " FROM generate_series(2, 40) g")
        loser.execute("COMMIT")
        query = fingerprints(winner, [losing])[0]
        found = winner.execute("SELECT nearsim_search('racing', 'si', %s, 0)::text[]",
                               (query,)).fetchone()[0]
        assert found == []
        assert winner.execute("SELECT count(*) FROM racing WHERE body = %s", (losing,)
                              ).fetchone() == (0,)
        assert winner.execute("SELECT ok, wrong, extra FROM nearsim_verify('racing')"
                              ).fetchone() == (True, 0, 0)
        winner.execute("DROP TABLE racing CASCADE")
        winner.execute("DROP FUNCTION wait_for_the_race(text)")
