"""Errors of the functions written in PL/Python read as PostgreSQL's own."""

from __future__ import annotations

from typing import Any

import psycopg
import pytest

CHAPTER = "In the beginning God created the heaven and the earth and the earth was without form"

# A call that fails, its SQLSTATE, the start of its message, its hint (or None)
FAILING_CALLS = [
    ("SELECT nearsim_enable('numbers', 'n')", "42804",
     "column n of table public.numbers has type integer, not text", None),
    ("SELECT simhash('some words', 'words:3+bogus')", "22023",
     "profile 'words:3+bogus': unknown option 'bogus'", "nearsim_profiles()"),
    ("SELECT * FROM nearsim_similar_verified('docs', 'x', 0.3)", "22023",
     "min_similarity must be between 0.5 and 0.95", "Pass max_distance"),
    ("SELECT * FROM nearsim_pairs('docs', 65)", "22023",
     "max_distance must be between 0 and 64", None),
    ("SELECT nearsim_enable('docs', 'body')", "55000",
     "table public.docs is already enabled for nearsim", "nearsim_rebuild"),
    ("SELECT nearsim_minhash_estimate(ARRAY[1,2]::bigint[], ARRAY[1]::bigint[])", "22023",
     "signatures of 2 and 1 hashes cannot be compared", None),
    ("SELECT nearsim_check_profile('docs', 'default/9')", None,
     "the fingerprints of public.docs come from profile default/9", "Recompute"),
]  # fmt: skip


@pytest.fixture(scope="module")
def tables(database: str) -> str:
    with psycopg.connect(database, autocommit=True) as conn:
        conn.execute("CREATE TABLE numbers (id int PRIMARY KEY, n int)")
        conn.execute("CREATE TABLE docs (id int PRIMARY KEY, body text)")
        conn.execute("INSERT INTO docs VALUES (1, %s), (2, %s)", (CHAPTER, CHAPTER + " and void"))
        conn.execute("SELECT nearsim_enable('docs', 'body')")
    return database


@pytest.mark.parametrize(("call", "sqlstate", "message", "hint"), FAILING_CALLS)
def test_an_error_is_one_line_with_its_sqlstate_and_hint(
    tables: str, call: str, sqlstate: str | None, message: str, hint: str | None
) -> None:
    with psycopg.connect(tables) as conn, pytest.raises(psycopg.Error) as caught:
        conn.execute(call)
    diag = caught.value.diag
    assert diag.message_primary is not None and diag.message_primary.startswith(message), (
        diag.message_primary)
    assert "plpy" not in diag.message_primary and "\n" not in diag.message_primary
    assert diag.context is None, diag.context  # no Python traceback, no PL/Python frame
    assert diag.internal_query is None
    if sqlstate is not None:
        assert diag.sqlstate == sqlstate
    else:
        assert diag.sqlstate is not None and diag.sqlstate != "XX000"
    if hint is not None:
        assert diag.message_hint is not None and hint in diag.message_hint


def test_a_callers_context_is_kept(tables: str) -> None:
    with psycopg.connect(tables) as conn, pytest.raises(psycopg.Error) as caught:
        conn.execute("DO $$ BEGIN PERFORM nearsim_enable('numbers', 'n'); END $$")
    context = caught.value.diag.context or ""
    assert "PL/pgSQL function inline_code_block" in context
    assert "Traceback" not in context and "PL/Python" not in context


def test_set_returning_functions_stream_through_the_c_caller(tables: str) -> None:
    with psycopg.connect(tables) as conn:
        rows = conn.execute("SELECT * FROM nearsim_pairs('docs', 64)").fetchall()
        assert [(a, b) for a, b, _ in rows] == [("1", "2")]
        profiles = conn.execute("SELECT name FROM nearsim_profiles()").fetchall()
        assert ("default/1",) in profiles
        first = conn.execute("SELECT name FROM nearsim_profiles() LIMIT 1").fetchall()
        assert len(first) == 1
        # a set-returning call in a select list, many times in one query
        counted = conn.execute(
            "SELECT count(*) FROM generate_series(1, 50), LATERAL nearsim_profiles()"
        ).fetchone()
        assert counted is not None and counted[0] == 50 * len(profiles)


def test_the_python_bodies_are_not_executable_by_other_roles(tables: str) -> None:
    with psycopg.connect(tables, autocommit=True) as conn:
        conn.execute("CREATE ROLE nearsim_errors_plain")
        try:
            executable: Any = conn.execute(
                "SELECT p.oid::regprocedure::text FROM pg_proc p"
                " WHERE p.proname LIKE '%\\_python'"
                " AND p.pronamespace = (SELECT extnamespace FROM pg_extension"
                "                       WHERE extname = 'nearsim')"
                " AND has_function_privilege('nearsim_errors_plain', p.oid, 'EXECUTE')"
            ).fetchall()
            bodies = conn.execute(
                "SELECT count(*) FROM pg_proc p JOIN pg_language l ON l.oid = p.prolang"
                " WHERE l.lanname = 'plpython3u' AND p.proname NOT LIKE '%\\_python'"
            ).fetchone()
        finally:
            conn.execute("DROP ROLE nearsim_errors_plain")
    assert executable == []
    assert bodies == (0,)  # every PL/Python function is a body behind a C caller
