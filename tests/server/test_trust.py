"""What a table's owner, a writer and a guarded writer may do and learn through nearsim.

- no extension function runs code the table's owner can replace with its
  caller's rights (the generated ``<table>_similar`` and company are the
  owner's); ``nearsim_verify`` reports one that was replaced;
- only a role with the owner's privileges may write fingerprints that the
  triggers keep unchecked (``SET nearsim.profile``); another writer's are
  computed again and a forged one is refused;
- a guarded writer that may not see the near-duplicate (row-level
  security, no SELECT on its columns) learns that there is one, nothing
  about it;
- no role but a guarded writer can take the guard's lock.

docs/SECURITY.md states the model.
"""

from __future__ import annotations

import secrets
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import psycopg
import pytest
from psycopg import sql
from psycopg.conninfo import make_conninfo

MEMO = ("The quarterly memo on the northern harvest reports that the river fields yielded"
        " more grain than the mountain terraces and that the granaries are nearly full")
EDITED = ("The quarterly memo on the northern harvest reports that the river fields yielded"
          " more grain than the mountain terraces and that the granaries are almost full")
OTHER = "A letter about roads, taxes and the price of salt in the southern provinces this year"


@dataclass(frozen=True)
class Roles:
    superuser: str  # DSN of the scratch database as the superuser
    owner: str  # DSN as the table's owner
    writer: str  # DSN as a role that may write the table
    stranger: str  # DSN as a role with no privilege on it
    owner_role: str
    writer_role: str
    stranger_role: str

    def connect(self, dsn: str) -> psycopg.Connection:
        return psycopg.connect(dsn, autocommit=True)

    def is_superuser(self, role: str) -> bool:
        with self.connect(self.superuser) as conn:
            row = conn.execute("SELECT rolsuper FROM pg_roles WHERE rolname = %s",
                               (role,)).fetchone()
            return bool(row and row[0])


@pytest.fixture
def roles(dsn: str, scratch_databases: Callable[[str], str]) -> Iterator[Roles]:
    suffix = secrets.token_hex(3)
    names = {kind: f"nearsim_{kind}_{suffix}" for kind in ("owner", "writer", "stranger")}
    database = scratch_databases(f"nearsim_trust_{suffix}")
    with psycopg.connect(dsn, autocommit=True) as admin:
        for role in names.values():
            admin.execute(sql.SQL("CREATE ROLE {} LOGIN").format(sql.Identifier(role)))
    with psycopg.connect(database, autocommit=True) as conn:
        conn.execute("CREATE EXTENSION nearsim CASCADE")
        conn.execute(sql.SQL("CREATE SCHEMA app AUTHORIZATION {}").format(
            sql.Identifier(names["owner"])))
        conn.execute("GRANT USAGE ON SCHEMA app TO PUBLIC")
    try:
        yield Roles(database, *(make_conninfo(database, user=names[kind])
                                for kind in ("owner", "writer", "stranger")),
                    names["owner"], names["writer"], names["stranger"])
    finally:
        with psycopg.connect(dsn, autocommit=True) as admin:
            admin.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(
                sql.Identifier(psycopg.conninfo.conninfo_to_dict(database)["dbname"])))
            for role in names.values():
                admin.execute(sql.SQL("DROP ROLE IF EXISTS {}").format(sql.Identifier(role)))


def enabled_table(roles: Roles, *statements: str) -> None:
    """app.docs, owned by the owner, enabled, writable by the writer."""
    with roles.connect(roles.owner) as conn:
        conn.execute("CREATE TABLE app.docs (id integer PRIMARY KEY, body text,"
                     " tenant name NOT NULL DEFAULT current_user)")
        conn.execute("SELECT nearsim_enable('app.docs', 'body')")
        conn.execute(sql.SQL("GRANT SELECT, INSERT, UPDATE ON app.docs TO {}").format(
            sql.Identifier(roles.writer_role)))
        for statement in statements:
            conn.execute(statement)


# -- code the owner can replace ----------------------------------------------


def test_verified_search_never_runs_the_owners_replaced_search_function(roles: Roles) -> None:
    enabled_table(roles, f"INSERT INTO app.docs (id, body) VALUES (1, '{MEMO}'), (2, '{OTHER}')")
    with roles.connect(roles.owner) as conn:
        # The owner's trap: the generated search function, replaced so that
        # it makes the owner superuser when a superuser runs it.
        conn.execute(f"""CREATE OR REPLACE FUNCTION app.docs_similar(query text,
                max_distance integer DEFAULT 6)
            RETURNS TABLE (doc app.docs, distance integer) LANGUAGE plpgsql AS $$
            BEGIN
                BEGIN
                    EXECUTE 'ALTER ROLE {roles.owner_role} SUPERUSER';
                EXCEPTION WHEN insufficient_privilege THEN NULL;
                END;
                RETURN QUERY SELECT d, 0 FROM app.docs d;
            END $$""")
    with roles.connect(roles.superuser) as conn:
        found = conn.execute("SELECT key, round(similarity::numeric, 2) FROM"
                             " nearsim_similar_verified('app.docs', %s, 0.8)", (EDITED,)).fetchall()
        assert found == [("1", 0.96)] or [k for k, _ in found] == ["1"]
        found = conn.execute("SELECT key FROM nearsim_similar_verified('app.docs', %s, 0.8,"
                             " 's_l')", (EDITED,)).fetchall()
        assert found == [("1",)]
        assert not roles.is_superuser(roles.owner_role)
        notices: list[str] = []
        conn.add_notice_handler(lambda d: notices.append(d.message_primary or ""))
        report = conn.execute("SELECT ok, triggers_ok FROM nearsim_verify('app.docs')").fetchone()
        assert report == (False, False)
        assert any("app.docs_similar(text,integer)" in n and "not the one nearsim made" in n
                   for n in notices), notices
        conn.execute("SELECT nearsim_rebuild('app.docs')")
        assert conn.execute("SELECT ok, triggers_ok FROM nearsim_verify('app.docs')"
                            ).fetchone() == (True, True)


def test_verify_reports_a_generated_function_given_the_definers_rights(roles: Roles) -> None:
    enabled_table(roles)
    with roles.connect(roles.owner) as conn:
        conn.execute("ALTER FUNCTION app.docs_pairs(integer) SECURITY DEFINER")
    with roles.connect(roles.owner) as conn:
        notices: list[str] = []
        conn.add_notice_handler(lambda d: notices.append(d.message_primary or ""))
        assert conn.execute("SELECT triggers_ok FROM nearsim_verify('app.docs')"
                            ).fetchone() == (False,)
        assert any("app.docs_pairs(integer)" in n for n in notices), notices


# -- fingerprints a writer brings ----------------------------------------------


def test_a_writer_that_is_not_the_owner_cannot_store_a_forged_fingerprint(roles: Roles) -> None:
    enabled_table(roles, f"INSERT INTO app.docs (id, body) VALUES (1, '{MEMO}')")
    with roles.connect(roles.writer) as conn:
        real = conn.execute("SELECT simhash(%s)", (EDITED,)).fetchone()[0]
        forged = real ^ ((1 << 40) - 1)
        conn.execute("BEGIN")
        conn.execute("SET LOCAL nearsim.profile = 'default/1'")
        with pytest.raises(psycopg.errors.InvalidParameterValue,
                           match="is not the default/1 one of its text"):
            conn.execute("INSERT INTO app.docs (id, body, si) VALUES (2, %s, %s)",
                         (EDITED, forged))
        conn.execute("ROLLBACK")
        # the right fingerprint, declared, is kept (checked, not trusted)
        conn.execute("BEGIN")
        conn.execute("SET LOCAL nearsim.profile = 'default/1'")
        conn.execute("INSERT INTO app.docs (id, body, si) VALUES (2, %s, %s)", (OTHER + " 2",
                     conn.execute("SELECT simhash(%s)", (OTHER + " 2",)).fetchone()[0]))
        conn.execute("COMMIT")
        # nor by UPDATE: a forged fingerprint for the same text
        conn.execute("BEGIN")
        conn.execute("SET LOCAL nearsim.profile = 'default/1'")
        with pytest.raises(psycopg.errors.InvalidParameterValue):
            conn.execute("UPDATE app.docs SET si = %s WHERE id = 1", (forged,))
        conn.execute("ROLLBACK")
    with roles.connect(roles.superuser) as conn:
        assert conn.execute("SELECT ok, stale FROM nearsim_verify('app.docs', fingerprints =>"
                            " true)").fetchone() == (True, 0)


def test_the_owner_may_bring_fingerprints_unchecked(roles: Roles) -> None:
    """The owner could turn the triggers off anyway: a declared fingerprint is
    kept without computing it (how nearsim-load stays fast), and verify finds
    a wrong one."""
    enabled_table(roles)
    with roles.connect(roles.owner) as conn:
        conn.execute("BEGIN")
        conn.execute("SET LOCAL nearsim.profile = 'default/1'")
        conn.execute("INSERT INTO app.docs (id, body, si) VALUES (1, %s, 12345)", (MEMO,))
        conn.execute("COMMIT")
        assert conn.execute("SELECT si FROM app.docs").fetchone() == (12345,)
        assert conn.execute("SELECT ok, stale FROM nearsim_verify('app.docs', fingerprints =>"
                            " true)").fetchone() == (False, 1)


# -- what a guarded writer learns --------------------------------------------


def test_a_guarded_writer_learns_nothing_of_a_near_duplicate_it_may_not_see(
        roles: Roles) -> None:
    enabled_table(
        roles,
        "ALTER TABLE app.docs ENABLE ROW LEVEL SECURITY",
        "CREATE POLICY own_rows ON app.docs USING (tenant = current_user)",
        "SELECT nearsim_guard('app.docs', max_distance => 6)",
        f"INSERT INTO app.docs (id, body) VALUES (41, '{MEMO}')")
    with roles.connect(roles.writer) as conn:
        assert conn.execute("SELECT count(*) FROM app.docs").fetchone() == (0,)
        with pytest.raises(psycopg.Error) as refused:
            conn.execute("INSERT INTO app.docs (id, body) VALUES (7, %s)", (EDITED,))
        assert refused.value.sqlstate == "23N01"
        diagnostic = refused.value.diag
        said = " ".join(filter(None, (diagnostic.message_primary, diagnostic.message_detail,
                                      diagnostic.message_hint)))
        assert "near-duplicate" in said
        assert "41" not in said and "bits" not in said and "similar" not in said, said
        # a document of its own is named as before
        conn.execute("INSERT INTO app.docs (id, body) VALUES (8, %s)", (OTHER,))
        with pytest.raises(psycopg.Error, match="near-duplicate of 8") as named:
            conn.execute("INSERT INTO app.docs (id, body) VALUES (9, %s)", (OTHER,))
        assert named.value.sqlstate == "23N01"


def test_a_guarded_writer_without_select_on_the_columns_learns_nothing(roles: Roles) -> None:
    enabled_table(roles, "SELECT nearsim_guard('app.docs', min_similarity => 0.8)",
                  f"INSERT INTO app.docs (id, body) VALUES (41, '{MEMO}')")
    with roles.connect(roles.owner) as conn:
        conn.execute(sql.SQL("REVOKE SELECT ON app.docs FROM {}").format(
            sql.Identifier(roles.writer_role)))
        conn.execute(sql.SQL("GRANT SELECT (id) ON app.docs TO {}").format(
            sql.Identifier(roles.writer_role)))
    with roles.connect(roles.writer) as conn:
        with pytest.raises(psycopg.Error) as refused:
            conn.execute("INSERT INTO app.docs (id, body) VALUES (7, %s)", (EDITED,))
        assert refused.value.sqlstate == "23N01"
        said = " ".join(filter(None, (refused.value.diag.message_primary,
                                      refused.value.diag.message_detail)))
        assert "41" not in said and "similar (" not in said, said


# -- the guard's lock ----------------------------------------------------------


def test_no_role_but_a_writer_can_hold_up_guarded_writers(roles: Roles) -> None:
    enabled_table(roles, "SELECT nearsim_guard('app.docs', max_distance => 3)")
    with roles.connect(roles.superuser) as conn:
        oid = conn.execute("SELECT 'app.docs'::regclass::oid::int8").fetchone()[0]
    with roles.connect(roles.stranger) as stranger, roles.connect(roles.writer) as writer:
        # what the guard locked before: an advisory lock any role could take
        stranger.execute("BEGIN")
        stranger.execute("SELECT pg_advisory_xact_lock(1853058407, %s::int4)",
                         (oid if oid < 2**31 else oid - 2**32,))
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            stranger.execute("SELECT nearsim_guard_lock('app.docs')")
        stranger.execute("ROLLBACK")
        stranger.execute("BEGIN")
        with pytest.raises(psycopg.errors.WrongObjectType):
            stranger.execute("LOCK TABLE app.docs_pkey IN SHARE UPDATE EXCLUSIVE MODE")
        stranger.execute("ROLLBACK")
        stranger.execute("BEGIN")
        stranger.execute("SELECT pg_advisory_xact_lock(1853058407, %s::int4)",
                         (oid if oid < 2**31 else oid - 2**32,))
        writer.execute("SET lock_timeout = '2s'")
        writer.execute("INSERT INTO app.docs (id, body) VALUES (1, %s)", (MEMO,))
        stranger.execute("ROLLBACK")
        # a writer holding the lock does hold up the next guarded writer
        writer.execute("BEGIN")
        writer.execute("SELECT nearsim_guard_lock('app.docs')")
        with roles.connect(roles.owner) as other:
            other.execute("SET lock_timeout = '200ms'")
            with pytest.raises(psycopg.errors.LockNotAvailable):
                other.execute("INSERT INTO app.docs (id, body) VALUES (2, %s)", (OTHER,))
        writer.execute("ROLLBACK")


# -- the guard's arguments and setting ------------------------------------------


@pytest.mark.parametrize("similarity", ["'NaN'", "-5", "0", "1.5"])
def test_the_guard_refuses_a_similarity_outside_0_to_1(roles: Roles, similarity: str) -> None:
    enabled_table(roles)
    with roles.connect(roles.owner) as conn:
        with pytest.raises(psycopg.errors.InvalidParameterValue,
                           match="min_similarity must be above 0 and at most 1"):
            conn.execute(f"SELECT nearsim_guard('app.docs', min_similarity => {similarity})")


def test_nearsim_guard_is_a_boolean_setting_only_the_owner_may_turn_off(roles: Roles) -> None:
    enabled_table(roles, "SELECT nearsim_guard('app.docs', max_distance => 3)",
                  f"INSERT INTO app.docs (id, body) VALUES (1, '{MEMO}')")
    with roles.connect(roles.owner) as conn:
        conn.execute("SELECT simhash('loads the library, which defines the setting')")
        with pytest.raises(psycopg.errors.InvalidParameterValue, match=r"nearsim\.guard"):
            conn.execute("SET nearsim.guard = 'maybe'")
        conn.execute("BEGIN")
        conn.execute("SET LOCAL nearsim.guard = false")
        conn.execute("INSERT INTO app.docs (id, body) VALUES (2, %s)", (EDITED,))
        conn.execute("COMMIT")
    with roles.connect(roles.writer) as conn:
        conn.execute("SET nearsim.guard = 0")
        with pytest.raises(psycopg.errors.InsufficientPrivilege, match="past its guard"):
            conn.execute("INSERT INTO app.docs (id, body) VALUES (3, %s)", (EDITED + " too",))
