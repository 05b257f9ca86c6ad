"""nearsim played by an attacker: no role gains another's rights.

Each test sets up a role ``attacker`` (no special rights) next to a victim
(``victim``, or the superuser the tests connect as) and tries one way to act
with the victim's rights through nearsim: forged registry rows, triggers
that switch back to the caller's role during nearsim's work, ownership
changes, and functions or operators that shadow the ones nearsim's code
calls.  Each attack must fail, and leave the victim's objects and the
attacker's rights as they were.  docs/SECURITY.md describes the model.
"""

from __future__ import annotations

import secrets
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import psycopg
import pytest
from psycopg import sql
from psycopg.conninfo import make_conninfo

DOCUMENTS = [
    "In the beginning God created the heaven and the earth and the earth was without form",
    "In the beginning God created the heavens and the earth and the earth was without form",
    "Now it came to pass in the days when the judges ruled that there was a famine in the land",
]


@dataclass(frozen=True)
class Stage:
    """A scratch database with the extension, a victim and an attacker."""

    superuser: str  # DSN of the database as the superuser
    attacker: str  # DSN as the attacker
    victim: str  # DSN as the victim
    attacker_role: str
    victim_role: str

    def run(self, dsn: str, *statements: str) -> None:
        with psycopg.connect(dsn, autocommit=True) as conn:
            for statement in statements:
                conn.execute(statement)

    def value(self, dsn: str, query: str) -> object:
        with psycopg.connect(dsn, autocommit=True) as conn:
            row = conn.execute(query).fetchone()
            return None if row is None else row[0]

    def is_superuser(self, role: str) -> bool:
        return bool(self.value(self.superuser,
                               f"SELECT rolsuper FROM pg_roles WHERE rolname = '{role}'"))


@pytest.fixture
def stage(dsn: str, scratch_databases: Callable[[str], str]) -> Iterator[Stage]:
    suffix = secrets.token_hex(3)
    attacker, victim = f"nearsim_attacker_{suffix}", f"nearsim_victim_{suffix}"
    database = scratch_databases(f"nearsim_security_{suffix}")
    with psycopg.connect(dsn, autocommit=True) as admin:
        for role in (attacker, victim):
            admin.execute(sql.SQL("CREATE ROLE {} LOGIN").format(sql.Identifier(role)))
    with psycopg.connect(database, autocommit=True) as conn:
        conn.execute("CREATE EXTENSION nearsim CASCADE")
        conn.execute(sql.SQL("CREATE SCHEMA evil AUTHORIZATION {}").format(
            sql.Identifier(attacker)))
        conn.execute(sql.SQL("CREATE SCHEMA app AUTHORIZATION {}").format(
            sql.Identifier(victim)))
        conn.execute("GRANT USAGE ON SCHEMA app, evil TO PUBLIC")
    try:
        yield Stage(database, make_conninfo(database, user=attacker),
                    make_conninfo(database, user=victim), attacker, victim)
    finally:
        with psycopg.connect(dsn, autocommit=True) as admin:
            admin.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(
                sql.Identifier(psycopg.conninfo.conninfo_to_dict(database)["dbname"])))
            for role in (attacker, victim):
                admin.execute(sql.SQL("DROP ROLE IF EXISTS {}").format(sql.Identifier(role)))


def documents_table(name: str, column_type: str = "text") -> list[str]:
    return [
        f"CREATE TABLE {name} (id integer PRIMARY KEY, body {column_type})",
        f"INSERT INTO {name} VALUES "
        + ", ".join(f"({i}, '{text}')" for i, text in enumerate(DOCUMENTS)),
    ]


# -- 1. forged registry rows ----------------------------------------------------


def test_the_registry_cannot_be_written_by_hand(stage: Stage) -> None:
    stage.run(stage.victim, *documents_table("app.precious"))
    stage.run(stage.attacker, *documents_table("evil.bait"))
    forged = ("INSERT INTO nearsim_tables (tbl, key_column, text_column, hash_column, bands,"
              " profile, object_schema, bucket_table, fingerprint_function, bucket_function,"
              " similar_function) VALUES ('evil.bait', 'id', 'body', 'si', 5, 'default/1',"
              " 'app', 'precious', 'f', 'b', 's')")
    with pytest.raises(psycopg.errors.InsufficientPrivilege):
        stage.run(stage.attacker, forged)
    stage.run(stage.attacker, "SELECT nearsim_enable('evil.bait', 'body')")
    for change in ("UPDATE nearsim_tables SET object_schema = 'app', bucket_table = 'precious'",
                   "DELETE FROM nearsim_tables"):
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            stage.run(stage.attacker, change)


def test_a_registration_names_only_the_owners_objects(stage: Stage) -> None:
    stage.run(stage.victim, *documents_table("app.precious"))
    stage.run(stage.attacker, *documents_table("evil.bait"))
    # nearsim's own writer takes the schema from the table, never from the caller
    stage.run(stage.attacker, "SELECT nearsim_register('evil.bait', 'id', 'body', 'si', 5,"
                              " 'default/1', 'precious', 'f', 'b', 's')")
    assert stage.value(stage.superuser, "SELECT object_schema FROM nearsim_tables") == "evil"
    # and links nothing of another role to the attacker's table
    with pytest.raises(psycopg.errors.InsufficientPrivilege, match="is not an object of table"):
        stage.run(stage.attacker, "SELECT nearsim_link('evil.bait',"
                                  " ARRAY['app.precious'::regclass], '{}')")
    with pytest.raises(psycopg.errors.InsufficientPrivilege, match="must be owner"):
        stage.run(stage.attacker, "SELECT nearsim_register('app.precious', 'id', 'body', 'si',"
                                  " 5, 'default/1', 'precious', 'f', 'b', 's')")
    with pytest.raises(psycopg.errors.InsufficientPrivilege, match="must be owner"):
        stage.run(stage.attacker, "SELECT nearsim_unregister('app.precious')")
    # the superuser drops the bait, then the extension: the victim's table stays
    stage.run(stage.superuser, "DROP TABLE evil.bait CASCADE")
    assert stage.value(stage.superuser, "SELECT to_regclass('app.precious') IS NOT NULL")
    stage.run(stage.victim, "SELECT nearsim_enable('app.precious', 'body')")
    stage.run(stage.attacker, *documents_table("evil.bait2"))
    stage.run(stage.attacker, "SELECT nearsim_enable('evil.bait2', 'body')")
    stage.run(stage.superuser, "DROP EXTENSION nearsim CASCADE")
    assert stage.value(stage.superuser, "SELECT count(*) FROM app.precious") == len(DOCUMENTS)


def test_dropping_a_table_drops_its_objects_by_dependency(stage: Stage) -> None:
    stage.run(stage.victim, *documents_table("app.docs"))
    stage.run(stage.victim, "SELECT nearsim_enable('app.docs', 'body')")
    depends = stage.value(stage.superuser, """
        SELECT count(*) FROM pg_depend
        WHERE refobjid = 'app.docs'::regclass AND deptype = 'n'
          AND classid IN ('pg_class'::regclass, 'pg_proc'::regclass)""")
    # the trigger function, two search functions, four in the key type and two nearest
    # (indexes depend automatically)
    assert depends == 9
    stage.run(stage.victim, "DROP TABLE app.docs CASCADE")
    left = stage.value(stage.superuser, """
        SELECT (SELECT count(*) FROM pg_class WHERE relname LIKE 'docs%')
             + (SELECT count(*) FROM pg_proc WHERE proname LIKE 'docs%')
             + (SELECT count(*) FROM nearsim_tables)""")
    assert left == 0


# -- 2. a table's code cannot switch back to the caller's role --------------------


TROJAN = """
CREATE FUNCTION evil.trojan() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    BEGIN
        RESET ROLE;
        EXECUTE 'ALTER ROLE {attacker} SUPERUSER';
    EXCEPTION WHEN OTHERS THEN
        INSERT INTO evil.tries VALUES (SQLERRM);
    END;
    BEGIN
        EXECUTE 'ALTER ROLE {attacker} SUPERUSER';
    EXCEPTION WHEN OTHERS THEN
        INSERT INTO evil.tries VALUES (SQLERRM);
    END;
    RETURN NEW;
END $$"""


@pytest.mark.parametrize("operation", [
    "SELECT nearsim_enable('evil.t', 'body')",
    "SELECT nearsim_enable('evil.t', 'body', profile => 'english')",
    "SELECT * FROM nearsim_rebuild('evil.t', profile => 'english')",
    "SELECT * FROM nearsim_rebuild('evil.t', fingerprints => true)",
    "SELECT * FROM nearsim_verify('evil.t', fingerprints => true)",
    "SELECT nearsim_disable('evil.t')",
])
def test_a_tables_triggers_never_run_with_the_callers_rights(stage: Stage, operation: str) -> None:
    stage.run(stage.attacker, *documents_table("evil.t"),
              "CREATE TABLE evil.tries (error text)",
              TROJAN.format(attacker=stage.attacker_role),
              "CREATE TRIGGER a_trojan BEFORE INSERT OR UPDATE ON evil.t"
              " FOR EACH ROW EXECUTE FUNCTION evil.trojan()")
    if "nearsim_enable" not in operation:
        # enabled by its owner, with fingerprints the rebuild has to recompute
        stage.run(stage.attacker, "SELECT nearsim_enable('evil.t', 'body')",
                  "ALTER TABLE evil.t DISABLE TRIGGER zz_nearsim_fingerprint_update",
                  "UPDATE evil.t SET si = NULL",
                  "ALTER TABLE evil.t ENABLE TRIGGER zz_nearsim_fingerprint_update",
                  "TRUNCATE evil.tries")
    stage.run(stage.superuser, operation)
    assert not stage.is_superuser(stage.attacker_role)
    errors = stage.value(stage.superuser, "SELECT string_agg(error, ' | ') FROM evil.tries")
    if "disable" not in operation and "verify" not in operation:
        # the trojan ran, as the attacker, and could not switch back
        assert errors and "must be superuser" in errors, errors
        assert "cannot set parameter \"role\" within" in errors


def test_a_tables_code_cannot_make_temporary_objects_as_the_caller(stage: Stage) -> None:
    stage.run(stage.attacker, *documents_table("evil.t"),
              "CREATE FUNCTION evil.temp() RETURNS trigger LANGUAGE plpgsql AS $$"
              " BEGIN CREATE TEMP TABLE trap (x int); RETURN NEW; END $$",
              "CREATE TRIGGER a_temp BEFORE UPDATE ON evil.t FOR EACH ROW"
              " EXECUTE FUNCTION evil.temp()")
    with pytest.raises(psycopg.errors.InsufficientPrivilege,
                       match="cannot create temporary table within security-restricted"):
        stage.run(stage.superuser, "SELECT nearsim_enable('evil.t', 'body')")
    assert stage.value(stage.superuser, "SELECT count(*) FROM nearsim_tables") == 0


def test_as_owner_is_only_for_roles_with_the_owners_rights(stage: Stage) -> None:
    stage.run(stage.victim, *documents_table("app.docs"), *documents_table("app.other"),
              "SELECT nearsim_enable('app.docs', 'body')")
    with pytest.raises(psycopg.errors.InsufficientPrivilege, match="must be owner of table docs"):
        stage.run(stage.attacker, "SELECT nearsim_as_owner('app.docs', 'DELETE FROM app.docs')")
    assert stage.value(stage.superuser, "SELECT count(*) FROM app.docs") == len(DOCUMENTS)
    for operation in ("SELECT nearsim_enable('app.other', 'body')",
                      "SELECT * FROM nearsim_verify('app.docs')",
                      "SELECT * FROM nearsim_rebuild('app.docs')",
                      "SELECT nearsim_disable('app.docs')"):
        with pytest.raises(psycopg.errors.InsufficientPrivilege, match="must be owner"):
            stage.run(stage.attacker, operation)


# -- 3. ownership follows the table ----------------------------------------------


def owners(stage: Stage) -> set[str]:
    rows = stage.value(stage.superuser, """
        SELECT array_agg(DISTINCT pg_get_userbyid(owner)) FROM (
            SELECT relowner AS owner FROM pg_class WHERE relname LIKE 'u\\_%'
            UNION ALL SELECT proowner FROM pg_proc WHERE proname LIKE 'u\\_%') o""")
    assert isinstance(rows, list)
    return set(rows)


def test_objects_follow_the_tables_owner(stage: Stage) -> None:
    # a new owner has CREATE on the table's schema (PostgreSQL asks it of a
    # non-superuser who gives a table away); the rebuild makes indexes there
    stage.run(stage.superuser, f"GRANT CREATE ON SCHEMA public TO {stage.attacker_role}")
    stage.run(stage.superuser, *documents_table("public.u"),
              "SELECT nearsim_enable('public.u', 'body')")
    assert len(owners(stage)) == 1 and stage.attacker_role not in owners(stage)
    stage.run(stage.superuser, f"ALTER TABLE public.u OWNER TO {stage.attacker_role}")
    assert owners(stage) == {stage.attacker_role}
    # the new owner maintains the table
    stage.run(stage.attacker, "SELECT * FROM nearsim_rebuild('public.u', bands => 4)",
              "INSERT INTO public.u VALUES (10, 'written by the new owner of the table')")
    assert stage.value(stage.attacker, "SELECT ok FROM nearsim_verify('public.u', true)")
    stage.run(stage.attacker, "SELECT nearsim_disable('public.u')")


def test_a_key_cast_of_the_new_owner_runs_with_its_rights_only(stage: Stage) -> None:
    stage.run(stage.superuser,
              "CREATE TABLE public.u (id uuid PRIMARY KEY, body text)",
              "INSERT INTO public.u VALUES (gen_random_uuid(), 'a first document of the table')",
              "SELECT nearsim_enable('public.u', 'body')",
              f"ALTER TABLE public.u OWNER TO {stage.attacker_role}")
    stage.run(stage.attacker,
              "CREATE TYPE evil.k AS ENUM ('00000000-0000-0000-0000-000000000001')",
              "CREATE FUNCTION evil.k_uuid(evil.k) RETURNS uuid LANGUAGE plpgsql AS $$ BEGIN"
              f" BEGIN EXECUTE 'ALTER ROLE {stage.attacker_role} SUPERUSER'; EXCEPTION WHEN OTHERS"
              " THEN NULL; END; RETURN $1::text::uuid; END $$",
              "CREATE CAST (evil.k AS uuid) WITH FUNCTION evil.k_uuid(evil.k) AS ASSIGNMENT")
    with psycopg.connect(stage.attacker, autocommit=True) as conn:
        try:
            conn.execute("ALTER TABLE public.u ALTER COLUMN id TYPE evil.k USING"
                         " '00000000-0000-0000-0000-000000000001'::evil.k")
            conn.execute("INSERT INTO public.u VALUES"
                         " ('00000000-0000-0000-0000-000000000001'::evil.k, 'more text here')")
        except psycopg.Error:
            pass  # refused is fine too; what matters is whose rights it ran with
    with psycopg.connect(stage.superuser, autocommit=True) as conn:
        try:
            conn.execute("SELECT * FROM nearsim_verify('public.u', true)")
            conn.execute("INSERT INTO public.u (id, body) SELECT id, body || ' again' FROM"
                         " public.u LIMIT 0")
        except psycopg.Error:
            pass
    assert not stage.is_superuser(stage.attacker_role)


def test_no_generated_code_runs_with_its_owners_rights(stage: Stage) -> None:
    """Every function nearsim makes for a table runs with its caller's rights.

    So a table whose owner changed behind nearsim's back (its event trigger
    disabled) lends nobody the old owner's rights: writes and searches run
    as whoever writes and searches.
    """
    stage.run(stage.superuser, *documents_table("public.u"),
              "SELECT nearsim_enable('public.u', 'body')",
              "ALTER EVENT TRIGGER nearsim_follow_owner DISABLE",
              f"ALTER TABLE public.u OWNER TO {stage.attacker_role}",
              "ALTER EVENT TRIGGER nearsim_follow_owner ENABLE")
    definers = stage.value(stage.superuser, "SELECT count(*) FROM pg_proc"
                           " WHERE pronamespace = 'public'::regnamespace AND prosecdef")
    assert definers == 0
    stage.run(stage.attacker, "INSERT INTO public.u VALUES (20, 'written after the change')")
    assert stage.value(stage.attacker, "SELECT count(*) FROM public.u_similar("
                       "'written after the change', 0)") == 1
    assert not stage.is_superuser(stage.attacker_role)


# -- 4. nothing nearsim calls can be shadowed -------------------------------------


SHADOWS = [
    # functions a role that may create in the extension's schema could add
    "CREATE FUNCTION public.simhash(character varying) RETURNS bigint LANGUAGE sql AS"
    " $$ INSERT INTO public.canary VALUES ('simhash(varchar)') RETURNING 1::bigint $$",
    "CREATE FUNCTION public.simhash(character varying, character varying) RETURNS bigint"
    " LANGUAGE sql AS $$ INSERT INTO public.canary VALUES ('simhash(varchar, varchar)')"
    " RETURNING 1::bigint $$",
    "CREATE FUNCTION public.hamming(integer, integer) RETURNS integer LANGUAGE sql AS"
    " $$ INSERT INTO public.canary VALUES ('hamming(int, int)') RETURNING 0 $$",
    "CREATE FUNCTION public.nearsim_as_owner(regclass, character varying) RETURNS text"
    " LANGUAGE sql AS $$ INSERT INTO public.canary VALUES ('nearsim_as_owner') RETURNING ''"
    " $$",
    "CREATE FUNCTION public.nearsim_check_profile(regclass, character varying) RETURNS"
    " boolean LANGUAGE sql AS $$ INSERT INTO public.canary VALUES ('nearsim_check_profile')"
    " RETURNING true $$",
]
# operators on the types nearsim's generated code compares
OPERATORS = [("=", "integer"), ("=", "bigint"), ("=", "text"), ("<=", "integer"),
             (">", "integer"), ("<>", "bigint"), ("=", "oid")]


def shadow_operators() -> list[str]:
    statements = []
    for number, (operator, kind) in enumerate(OPERATORS):
        function = f"public.canary_op_{number}"
        statements += [
            f"CREATE FUNCTION {function}({kind}, {kind}) RETURNS boolean LANGUAGE plpgsql AS"
            f" $$ BEGIN INSERT INTO public.canary VALUES ('{operator} {kind}');"
            f" RETURN $1 OPERATOR(pg_catalog.{operator}) $2; END $$",
            f"CREATE OPERATOR public.{operator} (LEFTARG = {kind}, RIGHTARG = {kind},"
            f" FUNCTION = {function})",
        ]
    return statements


WORKFLOW = [
    "SELECT nearsim_enable('public.v', 'body')",
    "INSERT INTO public.v VALUES (10, 'another document about the beginning of the earth')",
    # (the victim's own statements name the operators they mean)
    "UPDATE public.v SET body = body OPERATOR(pg_catalog.||) ' and more'"
    " WHERE id OPERATOR(pg_catalog.=) 1",
    "DELETE FROM public.v WHERE id OPERATOR(pg_catalog.=) 2",
    "SELECT * FROM public.v_similar('In the beginning God created the heaven and the earth', 6)",
    "SELECT * FROM public.v_similar(0::bigint, 64)",
    "SELECT * FROM nearsim_verify('public.v', true)",
    "SELECT * FROM nearsim_rebuild('public.v', bands => 4, fingerprints => true)",
    "SELECT * FROM nearsim_pairs('public.v', 10)",
    "SELECT * FROM nearsim_clusters('public.v', 10)",
    "SELECT * FROM nearsim_similar_verified('public.v', 'In the beginning God created the"
    " heaven and the earth and the earth was without form', 0.5)",
    "SELECT * FROM nearsim_pairs_verified('public.v', 0.5)",
    "SELECT nearsim_profile('english'), simhash_profile()",
    "SELECT nearsim_disable('public.v')",
    "UPDATE public.v SET si = NULL",
    "SELECT nearsim_enable('public.v', 'body', profile => 'english')",
    "ALTER TABLE public.v OWNER TO CURRENT_USER",
    "DROP TABLE public.v CASCADE",
]


def test_shadowing_functions_and_operators_never_run(stage: Stage) -> None:
    stage.run(stage.superuser, f"GRANT CREATE ON SCHEMA public TO {stage.attacker_role}")
    stage.run(stage.attacker,
              "CREATE TABLE public.canary (what text)",
              "GRANT INSERT, SELECT ON public.canary TO PUBLIC",
              *SHADOWS, *shadow_operators())
    with psycopg.connect(stage.superuser, autocommit=True) as conn:
        # the victim's search_path puts the attacker's schema first
        conn.execute("SET search_path = public, pg_catalog")
        for statement in [*documents_table("public.v", "character varying"), *WORKFLOW]:
            conn.execute(statement)
        called = conn.execute("SELECT array_agg(DISTINCT what) FROM public.canary").fetchone()
    assert called == (None,), f"nearsim called {called}"


# -- 5. reading the rotation indexes ----------------------------------------------


def test_the_search_shows_no_row_its_caller_may_not_see(stage: Stage) -> None:
    """nearsim_search reads indexes without row-level security, and gives only visible rows."""
    stage.run(stage.victim, *documents_table("app.docs"),
              "SELECT nearsim_enable('app.docs', 'body')",
              "GRANT SELECT ON app.docs TO PUBLIC")
    query = "(SELECT si FROM app.docs WHERE id = 0), 64"
    # a reader of the documents finds all of them, through the rotation indexes
    found = stage.value(stage.attacker, "SELECT cardinality(nearsim_search("
                        f"'app.docs', 'si', {query}))")
    assert found == len(DOCUMENTS)
    # rows a policy hides are not found, nor are their tuple ids given: not
    # even how many there are
    stage.run(stage.victim, "ALTER TABLE app.docs ENABLE ROW LEVEL SECURITY",
              "CREATE POLICY even ON app.docs FOR SELECT USING (id % 2 = 0)")
    visible = stage.value(stage.attacker, "SELECT count(*) FROM app.docs")
    assert 0 < visible < len(DOCUMENTS)
    assert stage.value(stage.attacker, "SELECT cardinality(nearsim_search("
                       "'app.docs', 'si', 0, 64))") == visible
    assert stage.value(stage.attacker, "SELECT count(*) FROM app.docs_similar("
                       f"{query})") == visible
    stage.run(stage.victim, "REVOKE SELECT ON app.docs FROM PUBLIC")
    # a table the caller may not read at all is refused
    with psycopg.connect(stage.attacker, autocommit=True) as conn, pytest.raises(
            psycopg.errors.InsufficientPrivilege):
        conn.execute("SELECT nearsim_search('app.docs', 'si', 0, 64)")
