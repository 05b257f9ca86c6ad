"""ALTER EXTENSION nearsim UPDATE from earlier releases, and DROP EXTENSION.

Each earlier release is built from the repository's history (the commit of
its tag): its install script and its Python code are installed next to this
version's, as they would be on a server that ran it.
"""

from __future__ import annotations

import io
import os
import shutil
import subprocess
import tarfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import psycopg
import pytest
from psycopg.conninfo import make_conninfo

import nearsim

ROOT = Path(__file__).resolve().parents[2]
PG_CONFIG = "/usr/lib/postgresql/15/bin/pg_config"
# Earlier releases and the commit each was built from (tags v0.1.0, v0.2.0, v0.3.0).
PREVIOUS_RELEASES = {"0.1.0": "c7af20e", "0.2.0": "3c77055", "0.3.0": "4a944f3"}
# Releases whose trigger and search functions are made as this version makes
# them: none (0.4.0 trusts a declared profile only from the table's owner)
TRIGGERS_AS_TODAY: set[str] = set()

DOCUMENTS = [
    "In the beginning God created the heaven and the earth and the earth was without form",
    "In the beginning God created the heavens and the earth and the earth was without form",
    "Now it came to pass in the days when the judges ruled that there was a famine",
]


def as_root(command: list[str]) -> list[str]:
    return command if os.geteuid() == 0 else ["sudo", *command]


@pytest.fixture(scope="module", params=sorted(PREVIOUS_RELEASES))
def previous_release(request: pytest.FixtureRequest,
                     tmp_path_factory: pytest.TempPathFactory) -> str:
    """Install an earlier release's SQL script and Python code; its version."""
    release: str = request.param
    commit = PREVIOUS_RELEASES[release]
    archive = subprocess.run(
        ["git", "-C", str(ROOT), "archive", "--format=tar", commit, "extension",
         "python_client"], capture_output=True, check=False)  # fmt: skip
    assert archive.returncode == 0, (
        f"release {release} (commit {commit}) is not in this clone's history:"
        f" {archive.stderr.decode().strip()}")
    tree = tmp_path_factory.mktemp("previous")
    with tarfile.open(fileobj=io.BytesIO(archive.stdout)) as tar:
        tar.extractall(tree, filter="data")
    script = f"sql/nearsim--{release}.sql"
    subprocess.run(["make", "-s", "-C", str(tree / "extension"), f"PG_CONFIG={PG_CONFIG}",
                    script], check=True, capture_output=True)  # fmt: skip
    subprocess.run(as_root(["make", "-s", "-C", str(tree / "extension"),
                            f"PG_CONFIG={PG_CONFIG}", "install-python"]),
                   check=True, capture_output=True)  # fmt: skip
    sharedir = subprocess.run([PG_CONFIG, "--sharedir"], check=True, capture_output=True,
                              text=True).stdout.strip()  # fmt: skip
    subprocess.run(as_root(["install", "-m", "644", str(tree / "extension" / script),
                            f"{sharedir}/extension/"]), check=True)  # fmt: skip
    shutil.rmtree(tree)
    return release


CATALOG = {
    "functions": """
        SELECT p.oid::regprocedure::text, pg_get_function_result(p.oid), p.prosrc, p.probin,
               p.proconfig, p.provolatile, p.proisstrict, p.proparallel, p.procost, p.prorows,
               l.lanname, pg_get_userbyid(p.proowner), p.proacl::text,
               obj_description(p.oid, 'pg_proc'), pg_get_function_arguments(p.oid)
        FROM pg_proc p JOIN pg_language l ON l.oid = p.prolang
        JOIN pg_depend d ON d.classid = 'pg_proc'::regclass AND d.objid = p.oid
             AND d.deptype = 'e'
        JOIN pg_extension e ON e.oid = d.refobjid AND e.extname = 'nearsim'
        ORDER BY 1""",
    "relations": """
        SELECT c.relname, c.relkind, c.relacl::text, c.relrowsecurity,
               obj_description(c.oid, 'pg_class'),
               (SELECT array_agg(a.attname || ' ' || format_type(a.atttypid, a.atttypmod)
                                 || CASE WHEN a.attnotnull THEN ' not null' ELSE '' END
                                 ORDER BY a.attnum)
                FROM pg_attribute a WHERE a.attrelid = c.oid AND a.attnum > 0)::text,
               (SELECT array_agg(p.polname || ' ' || p.polcmd::text || ' '
                                 || coalesce(pg_get_expr(p.polqual, p.polrelid), '') || ' '
                                 || coalesce(pg_get_expr(p.polwithcheck, p.polrelid), '')
                                 ORDER BY p.polname)
                FROM pg_policy p WHERE p.polrelid = c.oid)::text
        FROM pg_class c
        JOIN pg_depend d ON d.classid = 'pg_class'::regclass AND d.objid = c.oid
             AND d.deptype = 'e'
        JOIN pg_extension e ON e.oid = d.refobjid AND e.extname = 'nearsim'
        ORDER BY 1""",
    "event triggers": """
        SELECT t.evtname, t.evtevent, t.evtfoid::regprocedure::text, t.evtenabled,
               t.evttags::text
        FROM pg_event_trigger t
        JOIN pg_depend d ON d.classid = 'pg_event_trigger'::regclass AND d.objid = t.oid
             AND d.deptype = 'e'
        JOIN pg_extension e ON e.oid = d.refobjid AND e.extname = 'nearsim'
        ORDER BY 1""",
    "extension": """
        SELECT e.extversion, e.extrelocatable, n.nspname,
               (SELECT array_agg(c::regclass::text ORDER BY c::regclass::text)
                FROM unnest(e.extconfig) c)::text, e.extcondition::text
        FROM pg_extension e JOIN pg_namespace n ON n.oid = e.extnamespace
        WHERE e.extname = 'nearsim'""",
}


def catalog(database: str) -> dict[str, list[tuple[Any, ...]]]:
    with psycopg.connect(database) as conn:
        return {name: conn.execute(query).fetchall() for name, query in CATALOG.items()}


def test_update_from_an_earlier_release_equals_a_fresh_install(
    scratch_databases: Callable[[str], str], previous_release: str
) -> None:
    updated = scratch_databases("nearsim_updated")
    fresh = scratch_databases("nearsim_fresh")
    with psycopg.connect(updated, autocommit=True) as conn:
        conn.execute(f"CREATE EXTENSION nearsim VERSION '{previous_release}' CASCADE")
        assert conn.execute("SELECT extversion FROM pg_extension WHERE extname = 'nearsim'"
                            ).fetchone() == (previous_release,)  # fmt: skip
        conn.execute("CREATE TABLE docs (id int PRIMARY KEY, body text)")
        conn.cursor().executemany("INSERT INTO docs VALUES (%s, %s)", list(enumerate(DOCUMENTS)))
        conn.execute("SELECT nearsim_enable('docs', 'body')")
        before = conn.execute("SELECT (doc).id, distance FROM docs_similar(%s, 10) ORDER BY 1",
                              [DOCUMENTS[0]]).fetchall()  # fmt: skip
        conn.execute("ALTER EXTENSION nearsim UPDATE")
    with psycopg.connect(fresh, autocommit=True) as conn:
        conn.execute("CREATE EXTENSION nearsim CASCADE")
    got, expected = catalog(updated), catalog(fresh)
    assert expected["extension"][0][0] == nearsim.__version__ != previous_release
    assert got == expected
    # the enabled table keeps working, with this version's code
    with psycopg.connect(updated, autocommit=True) as conn:
        assert conn.execute("SELECT (doc).id, distance FROM docs_similar(%s, 10) ORDER BY 1",
                            [DOCUMENTS[0]]).fetchall() == before  # fmt: skip
        conn.execute("INSERT INTO docs VALUES (9, %s)", [DOCUMENTS[1] + " again"])
        # its bucket table follows; its triggers are the earlier release's
        # until a rebuild makes them again from this version's templates
        health = ("SELECT missing, extra, wrong, stale, triggers_ok"
                  " FROM nearsim_verify('docs', true)")
        current = previous_release in TRIGGERS_AS_TODAY
        assert conn.execute(health).fetchone() == (0, 0, 0, 0, current)
        assert conn.execute("SELECT simhash_profile()").fetchone() == (nearsim.PROFILE,)
        # verified search reads the bucket table until the rebuild, then the
        # rotation indexes: the same answers
        verified = ("SELECT key, distance, round(similarity::numeric, 9), short"
                    " FROM nearsim_similar_verified('docs', %s, 0.5, %s) ORDER BY key")
        legacy = {measure: conn.execute(verified, [DOCUMENTS[0], measure]).fetchall()
                  for measure in ("s_r", "containment")}
        assert legacy["s_r"] and legacy["s_r"][0][0] == "0"
        rebuilt = conn.execute("SELECT recomputed FROM nearsim_rebuild('docs')").fetchone()
        assert rebuilt == (0,)
        assert conn.execute(health).fetchone() == (0, 0, 0, 0, True)
        assert conn.execute("SELECT ok FROM nearsim_verify('docs', true)").fetchone() == (True,)
        assert {measure: conn.execute(verified, [DOCUMENTS[0], measure]).fetchall()
                for measure in ("s_r", "containment")} == legacy
        # the rebuild moved the index onto the table: no bucket table is left
        # (one per band of its layout, which the rebuild keeps)
        assert conn.execute(
            "SELECT bucket_table, bucket_function, to_regclass('docs_nearsim'),"
            " (SELECT count(*) FROM pg_index WHERE indrelid = 'docs'::regclass"
            " AND pg_get_indexdef(indexrelid) LIKE '%nearsim_rotate(si, %') = bands"
            " FROM nearsim_tables").fetchone() == (None, None, None, True)
        assert conn.execute("SELECT (doc).id, distance FROM docs_similar(%s, 10) ORDER BY 1",
                            [DOCUMENTS[0]]).fetchall() == before  # fmt: skip
        # the DROP EXTENSION guard (0.2.0) works on the updated extension too
        with pytest.raises(psycopg.errors.DependentObjectsStillExist):
            conn.execute("DROP EXTENSION nearsim")


# What a role that may create objects in the extension's schema plants for a
# superuser's ALTER EXTENSION UPDATE: operators and functions that match
# what the scripts use better than pg_catalog's (regclass = regclass is
# served there only by oid = oid, through a coercion), each of which would
# make the role a superuser.
TRAP_COMPARISONS = ("=", "<>", "<", ">", "<=", ">=")
TRAP_COMPARED = [
    *((kind, kind) for kind in ("regclass", "regprocedure", "regnamespace", "oid", "name",
                                "text", "integer", "bigint", "boolean")),
    ("regclass", "oid"), ("oid", "regclass"), ("regprocedure", "oid"), ("oid", "regprocedure"),
    ("name", "text"), ("text", "name"), ("integer", "bigint"), ("bigint", "integer"),
]
# || with its result
TRAP_CONCATENATED = [
    ("text", "text", "text"), ("name", "text", "text"), ("text", "name", "text"),
    ("name", "name", "text"), ("text[]", "text[]", "text[]"),
    ("regclass[]", "regclass[]", "regclass[]"),
    ("regprocedure[]", "regprocedure[]", "regprocedure[]"),
]
# functions named like the built-ins the scripts call: arguments, result, the
# built-in's value
TRAP_FUNCTIONS = [
    ("format", "text, name", "text", "pg_catalog.format($1, $2)"),
    ("format", "text, name, name", "text", "pg_catalog.format($1, $2, $3)"),
    ("format", "text, text, text", "text", "pg_catalog.format($1, $2, $3)"),
    ("format", "text, name, name, name", "text", "pg_catalog.format($1, $2, $3, $4)"),
    ("to_regclass", "name", "regclass", "pg_catalog.to_regclass($1::pg_catalog.text)"),
    ("to_regclass", "character varying", "regclass",
     "pg_catalog.to_regclass($1::pg_catalog.text)"),
    ("to_regprocedure", "name", "regprocedure",
     "pg_catalog.to_regprocedure($1::pg_catalog.text)"),
    ("left", "name, integer", "text", "pg_catalog.left($1::pg_catalog.text, $2)"),
    ("quote_ident", "name", "text", "pg_catalog.quote_ident($1::pg_catalog.text)"),
    ("has_table_privilege", "regclass, text", "boolean",
     "pg_catalog.has_table_privilege($1::pg_catalog.oid, $2)"),
    ("cardinality", "tid[]", "integer", "pg_catalog.cardinality($1)"),
    ("pg_get_userbyid", "regrole", "name", "pg_catalog.pg_get_userbyid($1::pg_catalog.oid)"),
    ("current_setting", "name, boolean", "text",
     "pg_catalog.current_setting($1::pg_catalog.text, $2)"),
]


def traps(role: str) -> list[str]:
    """The statements that plant every trap of ``role`` in the schema public."""
    def trap(name: str, arguments: str, result: str, value: str, what: str = "") -> str:
        what = what or f"{name}({arguments})"
        return (f"CREATE FUNCTION public.{name}({arguments}) RETURNS {result} LANGUAGE plpgsql"
                f" SET search_path = pg_catalog AS $trap$ BEGIN"
                f" RAISE WARNING 'nearsim trap: %', '{what}';"
                f" INSERT INTO public.trap_log VALUES ('{what}');"
                f" BEGIN EXECUTE 'ALTER ROLE {role} SUPERUSER';"
                f" EXCEPTION WHEN insufficient_privilege THEN NULL; END;"
                f" RETURN {value}; END $trap$")

    statements = ["CREATE TABLE public.trap_log (what text)",
                  "GRANT INSERT, SELECT ON public.trap_log TO PUBLIC"]
    operators = [(op, left, right, "boolean") for op in TRAP_COMPARISONS
                 for left, right in TRAP_COMPARED]
    operators += [("||", left, right, result) for left, right, result in TRAP_CONCATENATED]
    for number, (op, left, right, result) in enumerate(operators):
        statements += [
            trap(f"trap_operator_{number}", f"{left}, {right}", result,
                 f"$1 OPERATOR(pg_catalog.{op}) $2", f"{left} {op} {right}"),
            f"CREATE OPERATOR public.{op} (LEFTARG = {left}, RIGHTARG = {right},"
            f" FUNCTION = public.trap_operator_{number})",
        ]
    statements += [trap(*function) for function in TRAP_FUNCTIONS]
    return statements


def test_an_update_runs_no_operator_or_function_of_a_role_that_may_create_in_its_schema(
    dsn: str, scratch_databases: Callable[[str], str], previous_release: str
) -> None:
    """A role with CREATE on the extension's schema plants its traps; a
    superuser's update from an earlier release (an enabled table in the
    registry) runs none of them."""
    name = "nearsim_update_traps"
    database = scratch_databases(name)
    attacker = f"nearsim_update_attacker_{previous_release.replace('.', '_')}"
    with psycopg.connect(dsn, autocommit=True) as admin:
        admin.execute(f"DROP ROLE IF EXISTS {attacker}")
        admin.execute(f"CREATE ROLE {attacker} LOGIN")
    try:
        with psycopg.connect(database, autocommit=True) as conn:
            conn.execute(f"CREATE EXTENSION nearsim VERSION '{previous_release}' CASCADE")
            conn.execute("CREATE TABLE docs (id int PRIMARY KEY, body text)")
            conn.cursor().executemany("INSERT INTO docs VALUES (%s, %s)",
                                      list(enumerate(DOCUMENTS)))
            conn.execute("SELECT nearsim_enable('docs', 'body')")
            conn.execute(f"GRANT CREATE ON SCHEMA public TO {attacker}")
        with psycopg.connect(make_conninfo(database, user=attacker), autocommit=True) as conn:
            for statement in traps(attacker):
                conn.execute(statement)
        warnings: list[str] = []
        with psycopg.connect(database, autocommit=True) as conn:
            conn.add_notice_handler(lambda d: warnings.append(d.message_primary or ""))
            conn.execute("ALTER EXTENSION nearsim UPDATE")
            assert conn.execute("SELECT extversion FROM pg_extension WHERE extname = 'nearsim'"
                                ).fetchone() == (nearsim.__version__,)  # fmt: skip
            ran = conn.execute("SELECT pg_catalog.array_agg(DISTINCT what) FROM public.trap_log"
                               ).fetchone()  # fmt: skip
            superuser = conn.execute("SELECT rolsuper FROM pg_catalog.pg_roles"
                                     " WHERE rolname OPERATOR(pg_catalog.=) %s",
                                     [attacker]).fetchone()  # fmt: skip
            conn.execute(f"DROP OWNED BY {attacker}")
        assert superuser == (False,), "the attacker became a superuser"
        assert ran == (None,), f"the update ran the attacker's {ran[0]}"
        assert [w for w in warnings if w.startswith("nearsim trap")] == []
    finally:
        with psycopg.connect(dsn, autocommit=True) as admin:
            admin.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
            admin.execute(f"DROP ROLE IF EXISTS {attacker}")


def test_drop_extension_with_enabled_tables(scratch_databases: Callable[[str], str]) -> None:
    database = scratch_databases("nearsim_drop")
    with psycopg.connect(database, autocommit=True) as conn:
        conn.execute("CREATE EXTENSION nearsim CASCADE")
        conn.execute("CREATE SCHEMA archive")
        for table in ("docs", "archive.mail"):
            conn.execute(f"CREATE TABLE {table} (id int PRIMARY KEY, body text)")
            conn.cursor().executemany(f"INSERT INTO {table} VALUES (%s, %s)",
                                      list(enumerate(DOCUMENTS)))
            conn.execute("SELECT nearsim_enable(%s, 'body')", [table])
        owned = """
            SELECT (SELECT count(*) FROM pg_trigger
                    WHERE tgrelid IN ('docs'::regclass, 'archive.mail'::regclass)),
                   (SELECT count(*) FROM pg_class WHERE relname LIKE '%nearsim%'
                    AND relkind IN ('r', 'i') AND relname NOT LIKE 'nearsim_tables%'),
                   (SELECT count(*) FROM pg_proc WHERE proname LIKE 'docs%'
                    OR proname LIKE 'mail%')"""
        assert conn.execute(owned).fetchone() == (4, 6, 18)  # 3 rotation indexes, 9 functions
        # plain DROP EXTENSION: a clear error naming the tables, nothing changed
        with pytest.raises(psycopg.errors.DependentObjectsStillExist) as refused:
            conn.execute("DROP EXTENSION nearsim")
        assert "because 2 tables are enabled for it" in str(refused.value)
        assert refused.value.diag.message_detail == "Enabled: archive.mail, public.docs."
        assert "DROP EXTENSION nearsim CASCADE" in (refused.value.diag.message_hint or "")
        assert conn.execute(owned).fetchone() == (4, 6, 18)
        # with CASCADE: no trigger, index or function of nearsim is left
        notices: list[str] = []
        conn.add_notice_handler(lambda d: notices.append(d.message_primary or ""))
        conn.execute("DROP EXTENSION nearsim CASCADE")
        assert conn.execute(owned).fetchone() == (0, 0, 0)
        assert "nearsim: disabled table public.docs before dropping the extension" in notices
        # the documents and their fingerprints stay, and the tables take writes again
        assert conn.execute("SELECT count(*), count(si) FROM docs").fetchone() == (3, 3)
        conn.execute("INSERT INTO docs VALUES (10, 'written after the extension went')")
        conn.execute("UPDATE archive.mail SET body = body || ' more'")
        # and the extension can come back
        conn.execute("CREATE EXTENSION nearsim")
        conn.execute("SELECT nearsim_enable('docs', 'body')")
        assert conn.execute("SELECT ok FROM nearsim_verify('docs', true)").fetchone() == (True,)
