"""Operations: dump and restore, and dropping the extension with enabled tables."""

from __future__ import annotations

import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import psycopg
import pytest
from psycopg.conninfo import make_conninfo

from nearsim.client.samples import kjv_chapters

BIN = Path("/usr/lib/postgresql/15/bin")
QUERIES = ("Ruth 1", "Ruth 2", "Jude 1")


@pytest.fixture
def source(scratch_databases: Callable[[str], str]) -> str:
    """A database with two enabled tables of different profiles, one with edited copies."""
    database = scratch_databases("nearsim_dump_source")
    chapters = kjv_chapters(["Ruth", "Jude", "Obadiah", "Jonah"])
    with psycopg.connect(database, autocommit=True) as conn:
        conn.execute("CREATE EXTENSION nearsim CASCADE")
        conn.execute("CREATE SCHEMA archive")
        for table, profile in (("public.docs", "default/1"), ("archive.mail", "english/1")):
            conn.execute(f"CREATE TABLE {table} (id int PRIMARY KEY, ref text, body text)")
            rows = [(i, c.ref, c.text) for i, c in enumerate(chapters)]
            rows += [(100 + i, c.ref + " (edited)", c.text.replace("the ", "a ", 3))
                     for i, c in enumerate(chapters)]  # fmt: skip
            with conn.cursor().copy(f"COPY {table} (id, ref, body) FROM STDIN") as copy:
                for row in rows:
                    copy.write_row(row)
            conn.execute("SELECT nearsim_enable(%s, 'body', profile => %s)", [table, profile])
    return database


def answers(database: str) -> dict[str, Any]:
    """What searches return, and what nearsim_verify says, in ``database``."""
    found: dict[str, Any] = {}
    with psycopg.connect(database) as conn:
        texts = dict(conn.execute("SELECT ref, body FROM docs").fetchall())
        for ref in QUERIES:
            query = texts[ref].replace("and ", "& ", 2)
            found[f"docs {ref}"] = conn.execute(
                "SELECT (doc).id, distance FROM docs_similar(%s, 12) ORDER BY 1", [query]
            ).fetchall()
            found[f"mail {ref}"] = conn.execute(
                "SELECT (doc).id, distance FROM archive.mail_similar(%s, 12) ORDER BY 1", [query]
            ).fetchall()
            found[f"verified {ref}"] = conn.execute(
                "SELECT key, round(similarity::numeric, 6) FROM"
                " nearsim_similar_verified('docs', %s, 0.8) ORDER BY 1", [query]).fetchall()
        found["pairs"] = conn.execute(
            "SELECT * FROM nearsim_pairs('archive.mail', 10) ORDER BY 1, 2").fetchall()
        found["registry"] = conn.execute(
            "SELECT tbl::text, key_column, text_column, hash_column, bands, profile,"
            " bucket_table, similar_function FROM nearsim_tables ORDER BY 1").fetchall()
        for table in ("docs", "archive.mail"):
            found[f"verify {table}"] = conn.execute(
                "SELECT ok, documents, indexed, stale FROM nearsim_verify(%s, true)", [table]
            ).fetchone()
    assert all(found[f"docs {ref}"] for ref in QUERIES), "every query finds its chapter"
    assert found["pairs"], "the edited copies pair with their chapters"
    return found


def writes_still_work(database: str) -> None:
    with psycopg.connect(database) as conn:
        conn.execute("INSERT INTO archive.mail VALUES (999, 'new', 'a new letter about the"
                     " harvest in the fields of Boaz at Bethlehem')")  # fmt: skip
        conn.execute("DELETE FROM docs WHERE id = 100")
        assert conn.execute("SELECT ok FROM nearsim_verify('archive.mail', true)").fetchone() \
            == (True,)
        assert conn.execute("SELECT ok FROM nearsim_verify('docs', true)").fetchone() == (True,)
        conn.rollback()


def run(*command: str, **environment: str) -> None:
    result = subprocess.run(command, capture_output=True, text=True, check=False,
                            env={"PATH": "/usr/bin:/bin", **environment})  # fmt: skip
    assert result.returncode == 0, result.stderr


@pytest.mark.parametrize("dump_format", ["custom", "plain"])
def test_dump_and_restore_give_the_same_answers(
    scratch_databases: Callable[[str], str], source: str, tmp_path: Path, dump_format: str
) -> None:
    before = answers(source)
    dump = tmp_path / f"dump.{dump_format}"
    run(str(BIN / "pg_dump"), f"--format={dump_format}", f"--file={dump}", f"--dbname={source}")
    target = scratch_databases(f"nearsim_restored_{dump_format}")
    if dump_format == "custom":
        run(str(BIN / "pg_restore"), "--exit-on-error", f"--dbname={target}", str(dump))
    else:
        run(str(BIN / "psql"), "-X", "-q", "-v", "ON_ERROR_STOP=1", f"--dbname={target}",
            "-f", str(dump))
    after = answers(target)
    assert after == before
    assert after["verify docs"][0] and after["verify archive.mail"][0]
    # the rotation indexes came with the tables: every document is in them
    assert after["verify docs"][1] == after["verify docs"][2] == 20
    writes_still_work(target)


def test_a_database_owner_who_is_not_a_superuser_dumps_and_restores(
    dsn: str, scratch_databases: Callable[[str], str], tmp_path: Path
) -> None:
    """pg_dump as the database's owner (not a superuser, so with row_security
    off) reads the registry, and nearsim's functions work with row_security off."""
    owner = "nearsim_dump_owner"
    names = ("nearsim_dump_owned", "nearsim_dump_owned_restored")
    with psycopg.connect(dsn, autocommit=True) as admin:
        admin.execute(f"CREATE ROLE {owner} LOGIN")
    try:
        source = scratch_databases(names[0])
        with psycopg.connect(source, autocommit=True) as conn:
            conn.execute(f"ALTER DATABASE {names[0]} OWNER TO {owner}")
            conn.execute("CREATE EXTENSION nearsim CASCADE")
        query = "In the beginning God created the heaven and the earth"
        searches = {
            "similar": ("SELECT (doc).id, distance FROM docs_similar(%s, 12) ORDER BY 1", [query]),
            "nearest": ("SELECT * FROM nearsim_nearest('docs', simhash(%s), 2)", [query]),
            "verified": ("SELECT key FROM nearsim_similar_verified('docs', %s, 0.5) ORDER BY 1",
                         [query]),
            "pairs": ("SELECT * FROM nearsim_pairs('docs', 12) ORDER BY 1, 2", []),
            "verify": ("SELECT ok FROM nearsim_verify('docs', true)", []),
        }
        as_owner = make_conninfo(source, user=owner)
        with psycopg.connect(as_owner, autocommit=True) as conn:
            conn.execute("CREATE TABLE docs (id int PRIMARY KEY, body text)")
            conn.execute("INSERT INTO docs SELECT i, 'In the beginning God created the heaven"
                         " and the earth, verse ' || i FROM generate_series(1, 20) i")
            conn.execute("SELECT nearsim_enable('docs', 'body')")
            # the registry stays closed to writes, also to the database's owner
            for write in ("INSERT INTO nearsim_tables SELECT * FROM nearsim_tables",
                          "UPDATE nearsim_tables SET bands = bands",
                          "DELETE FROM nearsim_tables"):
                with pytest.raises(psycopg.errors.InsufficientPrivilege):
                    conn.execute(write)
            conn.execute("SET row_security = off")
            before = {name: conn.execute(*search).fetchall()
                      for name, search in searches.items()}  # fmt: skip
        assert before["verify"] == [(True,)] and len(before["similar"]) == 20
        dump = tmp_path / "dump.custom"
        run(str(BIN / "pg_dump"), "--format=custom", f"--file={dump}", f"--dbname={as_owner}")
        target = scratch_databases(names[1])
        run(str(BIN / "pg_restore"), "--exit-on-error", f"--dbname={target}", str(dump))
        with psycopg.connect(make_conninfo(target, user=owner), autocommit=True) as conn:
            conn.execute("SET row_security = off")
            assert {name: conn.execute(*search).fetchall()
                    for name, search in searches.items()} == before  # fmt: skip
    finally:
        with psycopg.connect(dsn, autocommit=True) as admin:
            for name in names:
                admin.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
            admin.execute(f"DROP ROLE IF EXISTS {owner}")
