"""Odd tables and schema changes: deferrable keys, temporary and unlogged
tables, ALTER TABLE of an enabled table, disabling whatever happened, and
errors that stay one readable line."""

from __future__ import annotations

from collections.abc import Iterator

import psycopg
import pytest

DOCUMENTS = [
    "In the beginning God created the heaven and the earth and the earth was without form",
    "Now it came to pass in the days when the judges ruled that there was a famine in the land",
    "Blessed is the man that walketh not in the counsel of the ungodly nor standeth in the way",
]


@pytest.fixture
def db(database: str) -> Iterator[psycopg.Connection]:
    """An autocommit connection; the tables the test made are dropped after it."""
    with psycopg.connect(database, autocommit=True) as conn:
        yield conn
        for (table,) in conn.execute("SELECT tbl::text FROM nearsim_tables").fetchall():
            conn.execute(f"SELECT nearsim_disable('{table}')")
        conn.execute("DROP SCHEMA IF EXISTS odd CASCADE")
        conn.execute("DROP TABLE IF EXISTS public.docs CASCADE")  # moved there by a test


def verify(conn: psycopg.Connection, table: str) -> tuple[object, ...]:
    row = conn.execute("SELECT ok, missing, extra, wrong FROM nearsim_verify(%s, true)",
                       [table]).fetchone()
    assert row is not None
    return tuple(row)


def test_a_deferrable_key_replaced_within_a_transaction(db: psycopg.Connection) -> None:
    db.execute("CREATE SCHEMA odd")
    db.execute("CREATE TABLE odd.docs (id int PRIMARY KEY DEFERRABLE INITIALLY DEFERRED,"
               " body text)")
    db.execute("INSERT INTO odd.docs VALUES (4, %s), (5, %s)", DOCUMENTS[:2])
    db.execute("SELECT nearsim_enable('odd.docs', 'body')")
    with db.transaction():
        db.execute("INSERT INTO odd.docs VALUES (5, %s)", [DOCUMENTS[2]])
        db.execute("DELETE FROM odd.docs WHERE ctid = (SELECT min(ctid) FROM odd.docs"
                   " WHERE id = 5)")
    assert verify(db, "odd.docs") == (True, 0, 0, 0)
    found = db.execute("SELECT (doc).id FROM odd.docs_similar(%s, 0)", [DOCUMENTS[2]]).fetchall()
    assert found == [(5,)]
    # keys swapped in one statement
    db.execute("UPDATE odd.docs SET id = 9 - id")
    assert verify(db, "odd.docs") == (True, 0, 0, 0)
    assert db.execute("SELECT (doc).id FROM odd.docs_similar(%s, 0)",
                      [DOCUMENTS[2]]).fetchall() == [(4,)]


def test_a_temporary_table_is_refused(db: psycopg.Connection) -> None:
    db.execute("CREATE TEMP TABLE scratch (id int PRIMARY KEY, body text)")
    with pytest.raises(psycopg.errors.FeatureNotSupported, match="is a temporary table") as error:
        db.execute("SELECT nearsim_enable('scratch', 'body')")
    assert "enable an ordinary or an unlogged table" in (error.value.diag.message_hint or "")
    assert db.execute("SELECT count(*) FROM nearsim_tables").fetchone() == (0,)


ROTATION_INDEXES = ("SELECT count(*) FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid"
                    " WHERE i.indrelid = 'odd.docs'::regclass"
                    " AND pg_get_indexdef(i.indexrelid) LIKE '%nearsim_rotate(%'")


def test_an_unlogged_table_gets_unlogged_indexes(db: psycopg.Connection) -> None:
    db.execute("CREATE SCHEMA odd")
    db.execute("CREATE UNLOGGED TABLE odd.docs (id int PRIMARY KEY, body text)")
    db.execute("INSERT INTO odd.docs VALUES (1, %s)", [DOCUMENTS[0]])
    db.execute("SELECT nearsim_enable('odd.docs', 'body')")
    assert db.execute(ROTATION_INDEXES + " AND c.relpersistence = 'u'").fetchone() == (3,)
    with pytest.raises(psycopg.errors.ObjectNotInPrerequisiteState, match="logged"):
        db.execute("ALTER TABLE odd.docs SET LOGGED")


BREAKING = [
    ("ALTER TABLE odd.docs RENAME TO papers", "cannot rename the table"),
    ("ALTER TABLE odd.docs SET SCHEMA public", "cannot move the table to another schema"),
    ("ALTER TABLE odd.docs RENAME COLUMN body TO text", "cannot rename the text column body"),
    ("ALTER TABLE odd.docs RENAME COLUMN id TO key", "cannot rename the key column id"),
    ("ALTER TABLE odd.docs RENAME COLUMN si TO fp", "cannot rename the fingerprint column si"),
    ("ALTER TABLE odd.docs ALTER COLUMN id TYPE bigint",
     "cannot change the type of the key column id"),
    ("ALTER TABLE odd.docs ALTER COLUMN body TYPE varchar",
     "cannot change the type of the text column body"),
    ("ALTER TABLE odd.docs DROP COLUMN si", "cannot drop the fingerprint column si"),
    ("ALTER TABLE odd.docs DROP CONSTRAINT docs_pkey", "cannot drop the primary key"),
]


def enabled_table(db: psycopg.Connection) -> int:
    """odd.docs (id, body, note), enabled; its oid, which outlives renames."""
    db.execute("CREATE SCHEMA odd")
    db.execute("CREATE TABLE odd.docs (id int PRIMARY KEY, body text, note text)")
    db.execute("INSERT INTO odd.docs VALUES (1, %s, 'n')", [DOCUMENTS[0]])
    db.execute("SELECT nearsim_enable('odd.docs', 'body')")
    row = db.execute("SELECT 'odd.docs'::regclass::oid").fetchone()
    assert row is not None
    return int(row[0])


@pytest.mark.parametrize(("statement", "message"), BREAKING)
def test_schema_changes_that_would_break_the_table_are_refused(
    db: psycopg.Connection, statement: str, message: str
) -> None:
    enabled_table(db)
    with pytest.raises(psycopg.errors.ObjectNotInPrerequisiteState, match=message) as error:
        db.execute(statement)
    assert "nearsim_disable('odd.docs')" in (error.value.diag.message_hint or "")
    # other changes go through, and the table keeps working
    db.execute("ALTER TABLE odd.docs RENAME COLUMN note TO remark")
    db.execute("ALTER TABLE odd.docs ADD COLUMN added int")
    db.execute("ALTER TABLE odd.docs ALTER COLUMN remark TYPE varchar")
    db.execute("INSERT INTO odd.docs (id, body) VALUES (2, %s)", [DOCUMENTS[1]])
    assert verify(db, "odd.docs") == (True, 0, 0, 0)
    # after disabling, the change is the user's
    db.execute("SELECT nearsim_disable('odd.docs')")
    db.execute(statement)


# (a varchar text column breaks nothing, nor does another key type now
# that the index is on the table itself; PostgreSQL itself refuses to drop
# the fingerprint column, which the triggers' conditions name)
@pytest.mark.parametrize(("statement", "message"), [
    (statement, message) for statement, message in BREAKING
    if "TYPE varchar" not in statement and "DROP COLUMN" not in statement
    and "id TYPE bigint" not in statement and "RENAME TO papers" not in statement])
def test_verify_names_what_a_bypassed_guard_let_through(
    db: psycopg.Connection, statement: str, message: str
) -> None:
    table = enabled_table(db)
    db.execute("ALTER EVENT TRIGGER nearsim_guard_alter_table DISABLE")
    try:
        db.execute(statement)
    finally:
        db.execute("ALTER EVENT TRIGGER nearsim_guard_alter_table ENABLE")
    warnings: list[str] = []
    db.add_notice_handler(lambda notice: warnings.append(notice.message_primary or ""))
    report = db.execute("SELECT ok, missing, triggers_ok FROM nearsim_verify(%s::oid::regclass)",
                        [table]).fetchone()
    assert report == (False, None, None)
    assert warnings and all(w.startswith("nearsim: table ") for w in warnings), warnings
    db.execute("SELECT nearsim_disable(%s::oid::regclass)", [table])
    assert db.execute("SELECT count(*) FROM nearsim_tables").fetchone() == (0,)


def test_a_table_renamed_past_the_guard_is_reported_and_rebuilt(db: psycopg.Connection) -> None:
    enabled_table(db)
    db.execute("ALTER EVENT TRIGGER nearsim_guard_alter_table DISABLE")
    try:
        db.execute("ALTER TABLE odd.docs RENAME TO papers")
    finally:
        db.execute("ALTER EVENT TRIGGER nearsim_guard_alter_table ENABLE")
    warnings: list[str] = []
    db.add_notice_handler(lambda notice: warnings.append(notice.message_primary or ""))
    # its functions still name odd.docs: each is named, and the rebuild makes them again
    assert db.execute("SELECT ok, triggers_ok FROM nearsim_verify('odd.papers')").fetchone() \
        == (False, False)
    assert any("odd.docs_similar(bigint,integer)" in w for w in warnings), warnings
    db.execute("SELECT nearsim_rebuild('odd.papers')")
    assert db.execute("SELECT ok FROM nearsim_verify('odd.papers')").fetchone() == (True,)
    assert db.execute("SELECT count(*) FROM odd.docs_similar(%s, 3)", [DOCUMENTS[0]]
                      ).fetchone() == (1,)


def test_a_table_named_through_the_search_path_is_guarded_too(db: psycopg.Connection) -> None:
    db.execute("CREATE SCHEMA odd")
    db.execute("CREATE TABLE odd.docs (id int PRIMARY KEY, body text)")
    db.execute("SELECT nearsim_enable('odd.docs', 'body')")
    db.execute("SET search_path = odd, public")
    with pytest.raises(psycopg.errors.ObjectNotInPrerequisiteState, match="rename the table"):
        db.execute("ALTER TABLE docs RENAME TO papers")
    db.execute("RESET search_path")


def test_disable_and_drop_extension_work_whatever_happened_to_the_key(
    db: psycopg.Connection,
) -> None:
    db.execute("CREATE SCHEMA odd")
    db.execute("CREATE TABLE odd.docs (id int PRIMARY KEY, body text)")
    db.execute("INSERT INTO odd.docs VALUES (1, %s)", [DOCUMENTS[0]])
    db.execute("SELECT nearsim_enable('odd.docs', 'body')")
    # with the guard bypassed (event triggers off), the primary key goes
    db.execute("ALTER EVENT TRIGGER nearsim_guard_alter_table DISABLE")
    try:
        db.execute("ALTER TABLE odd.docs DROP CONSTRAINT docs_pkey")
    finally:
        db.execute("ALTER EVENT TRIGGER nearsim_guard_alter_table ENABLE")
    db.execute("SELECT nearsim_disable('odd.docs')")
    assert db.execute("SELECT count(*) FROM nearsim_tables").fetchone() == (0,)
    assert db.execute(ROTATION_INDEXES).fetchone() == (0,)
    # and DROP EXTENSION ... CASCADE, which disables every table first
    db.execute("ALTER TABLE odd.docs ADD PRIMARY KEY (id)")
    db.execute("SELECT nearsim_enable('odd.docs', 'body')")
    db.execute("ALTER EVENT TRIGGER nearsim_guard_alter_table DISABLE")
    db.execute("ALTER TABLE odd.docs DROP CONSTRAINT docs_pkey")
    try:
        db.execute("DROP EXTENSION nearsim CASCADE")
        assert db.execute(ROTATION_INDEXES).fetchone() == (0,)
    finally:
        db.execute("CREATE EXTENSION IF NOT EXISTS nearsim")
        db.execute("ALTER EVENT TRIGGER nearsim_guard_alter_table ENABLE")


def test_a_huge_profile_name_is_not_echoed_whole(db: psycopg.Connection) -> None:
    with pytest.raises(psycopg.errors.InvalidParameterValue) as error:
        db.execute("SELECT simhash('some text', repeat('a', 100000))")
    message = error.value.diag.message_primary or ""
    assert "100000 characters" in message and len(message) < 300, message


def test_nearsim_band_outside_a_layout_is_null(db: psycopg.Connection) -> None:
    # LEAKPROOF: never an error (docs/REFERENCE.md says so)
    assert db.execute("SELECT nearsim_band(1, 2, 0), nearsim_band(1, 5, 7)").fetchone() == (
        None, None)


def test_a_name_that_would_end_the_generated_bodies_is_refused(db: psycopg.Connection) -> None:
    db.execute('CREATE TABLE "a$nearsim$b" (id int PRIMARY KEY, body text)')
    with pytest.raises(psycopg.errors.InvalidName, match=r"\$nearsim\$"):
        db.execute("""SELECT nearsim_enable('"a$nearsim$b"', 'body')""")
