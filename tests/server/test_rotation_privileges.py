"""Rotation-indexed tables under roles and hostile names: who writes, who enables, quoting."""

from __future__ import annotations

from collections.abc import Iterator

import psycopg
import pytest
from psycopg import sql
from rotated import assert_no_drift, error_of


@pytest.fixture
def roles(conn: psycopg.Connection) -> Iterator[psycopg.Connection]:
    for role in ("nearsim_owner", "nearsim_writer", "nearsim_reader", "nearsim_outsider"):
        conn.execute(sql.SQL("CREATE ROLE {}").format(sql.Identifier(role)))
    conn.execute("CREATE SCHEMA docs_schema AUTHORIZATION nearsim_owner")
    conn.execute("GRANT USAGE ON SCHEMA docs_schema TO PUBLIC")
    yield conn


def test_writers_write_documents_and_only_the_triggers_write_buckets(
    roles: psycopg.Connection,
) -> None:
    conn = roles
    conn.execute("SET ROLE nearsim_owner")
    conn.execute("CREATE TABLE docs_schema.docs (id int PRIMARY KEY, body text)")
    conn.execute("INSERT INTO docs_schema.docs VALUES (1, 'first document words')")
    conn.execute("SELECT nearsim_enable('docs_schema.docs', 'body')")
    conn.execute("GRANT SELECT, INSERT, UPDATE, DELETE, TRUNCATE ON docs_schema.docs"
                 " TO nearsim_writer")
    conn.execute("GRANT SELECT ON docs_schema.docs TO nearsim_reader")
    conn.execute("RESET ROLE")
    owners = conn.execute(
        "SELECT DISTINCT pg_get_userbyid(relowner) FROM pg_class"
        " WHERE relnamespace = 'docs_schema'::regnamespace").fetchall()
    assert owners == [("nearsim_owner",)]

    conn.execute("SET ROLE nearsim_writer")
    conn.execute("INSERT INTO docs_schema.docs VALUES (2, 'second document words')")
    conn.execute("UPDATE docs_schema.docs SET body = 'first document, new words' WHERE id = 1")
    conn.execute("INSERT INTO docs_schema.docs VALUES (3, 'third') ON CONFLICT DO NOTHING")
    conn.execute("DELETE FROM docs_schema.docs WHERE id = 3")
    # the index is the owner's: a writer cannot drop it, nor the triggers
    for statement in (
        "DROP INDEX docs_schema.docs_nearsim_rotate_idx",
        "ALTER TABLE docs_schema.docs DISABLE TRIGGER zz_nearsim_fingerprint",
    ):
        assert isinstance(error_of(conn, statement), psycopg.errors.InsufficientPrivilege)
    # nor can it reuse the trigger function on a table of its own
    conn.execute("CREATE TEMP TABLE mine (id int PRIMARY KEY, body text, si bigint)")
    assert isinstance(error_of(
        conn, "CREATE TRIGGER t BEFORE INSERT ON mine"
        " FOR EACH ROW EXECUTE FUNCTION docs_schema.docs_nearsim_fingerprint()"),
        psycopg.errors.InsufficientPrivilege)
    conn.execute("RESET ROLE")
    assert_no_drift(conn, "docs_schema.docs")

    conn.execute("SET ROLE nearsim_reader")
    found = conn.execute(
        "SELECT (doc).id FROM docs_schema.docs_similar('second document words', 0)").fetchall()
    assert found == [(2,)]
    conn.execute("RESET ROLE")
    conn.execute("SET ROLE nearsim_outsider")
    # a role that may not read the documents may not search them
    assert isinstance(error_of(conn, "SELECT * FROM docs_schema.docs_similar(1::bigint, 64)"),
                      psycopg.errors.InsufficientPrivilege)
    assert isinstance(error_of(
        conn, "SELECT nearsim_search('docs_schema.docs', 'si', 1, 64)"),
        psycopg.errors.InsufficientPrivilege)
    assert isinstance(error_of(conn, "SELECT nearsim_disable('docs_schema.docs')"),
                      psycopg.errors.InsufficientPrivilege)
    # no role writes the registry by hand (nearsim_register and nearsim_unregister do)
    assert isinstance(error_of(conn, "DELETE FROM nearsim_tables"),
                      psycopg.errors.InsufficientPrivilege)
    conn.execute("RESET ROLE")
    assert conn.execute("SELECT count(*) FROM nearsim_tables").fetchone() == (1,)


def test_a_superuser_enables_a_table_for_its_owner(roles: psycopg.Connection) -> None:
    conn = roles
    conn.execute("CREATE TABLE docs_schema.docs (id int PRIMARY KEY, body text)")
    conn.execute("ALTER TABLE docs_schema.docs OWNER TO nearsim_owner")
    conn.execute("SELECT nearsim_enable('docs_schema.docs', 'body')")
    owners = conn.execute(
        "SELECT DISTINCT pg_get_userbyid(relowner) FROM pg_class"
        " WHERE relnamespace = 'docs_schema'::regnamespace"
        " UNION SELECT DISTINCT pg_get_userbyid(proowner) FROM pg_proc"
        " WHERE pronamespace = 'docs_schema'::regnamespace").fetchall()
    assert owners == [("nearsim_owner",)]
    assert conn.execute("SELECT current_user").fetchone() == ("postgres",)
    conn.execute("SET ROLE nearsim_outsider")
    assert isinstance(error_of(conn, "SELECT * FROM nearsim_rebuild('docs_schema.docs')"),
                      psycopg.errors.InsufficientPrivilege)


HOSTILE_SCHEMA = 'My "Schema"; DROP'
HOSTILE_TABLE = 'Docs "Quoted" $x$ Table'


def test_hostile_identifiers(conn: psycopg.Connection) -> None:
    names = {n: sql.Identifier(n) for n in (
        HOSTILE_SCHEMA, HOSTILE_TABLE, "Key Col'", 'Body "Text"', "Sim Hash")}
    conn.execute(sql.SQL("CREATE SCHEMA {}").format(names[HOSTILE_SCHEMA]))
    table = sql.Identifier(HOSTILE_SCHEMA, HOSTILE_TABLE)
    conn.execute(sql.SQL("CREATE TABLE {} ({} text PRIMARY KEY, {} text)").format(
        table, names["Key Col'"], names['Body "Text"']))
    conn.execute(sql.SQL("INSERT INTO {} VALUES ('a''1', 'some words of a'), ('b\\2', 'some"
                         " words of a!'), ('c', 'other words entirely')").format(table))
    regclass = conn.execute(sql.SQL("SELECT {}::regclass::text").format(
        sql.Literal(table.as_string(conn)))).fetchone()
    assert regclass is not None
    conn.execute("SELECT nearsim_enable(%s, %s, %s)",
                 (regclass[0], 'Body "Text"', "Sim Hash"))
    similar = sql.Identifier(HOSTILE_SCHEMA, HOSTILE_TABLE + "_similar")
    found = conn.execute(sql.SQL("SELECT ((doc).{}) FROM {}('some words of a', 3) ORDER BY 1")
                         .format(names["Key Col'"], similar)).fetchall()
    assert found == [("a'1",), ("b\\2",)]
    assert_no_drift(conn, regclass[0])
    pairs = conn.execute("SELECT * FROM nearsim_pairs(%s, 0)", (regclass[0],)).fetchall()
    assert pairs == [("a'1", "b\\2", 0)]
    conn.execute(sql.SQL("UPDATE {} SET {} = 'x' WHERE {} = 'c'").format(
        table, names["Key Col'"], names["Key Col'"]))
    assert_no_drift(conn, regclass[0])
    conn.execute("SELECT nearsim_disable(%s)", (regclass[0],))
    assert conn.execute(sql.SQL("SELECT count(*) FROM {}").format(table)).fetchone() == (3,)
