"""Catalog facts the server functions check: tables, keys, columns, the registry.

Also the profiles this server computes (a table's fingerprints are useless
where its profile cannot be computed) and acting as a table's owner.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from ..core.fingerprint import PROFILE
from ..core.profiles import Profile, ProfileError
from ..core.registry import Registration
from .database import Session

KEY_TYPES = ("integer", "bigint", "text", "uuid")
TEXT_TYPES = ("text", "character varying")
MAX_IDENTIFIER = 63  # NAMEDATALEN - 1: longer names would be truncated silently
PROFILES_HINT = "SELECT * FROM nearsim_profiles() lists the short names."


@dataclass(frozen=True)
class Table:
    """Catalog facts about a documents table."""

    oid: int
    qualified: str  # schema-qualified, quoted
    schema: str
    name: str
    owner: str
    key_column: str
    key_type: str  # as format_type prints it, with the collation if any
    persistence: str = "p"  # pg_class.relpersistence: p permanent, u unlogged, t temporary
    deferrable_key: bool = False  # a DEFERRABLE primary key: two rows may share a key for a while


@dataclass(frozen=True)
class Enabled:
    """An enabled table: its catalog facts and its registry row."""

    table: Table
    registration: Registration

    def qualify(self, session: Session, name: str) -> str:
        """One of the table's objects (its functions), qualified and quoted."""
        return f"{session.ident(self.registration.object_schema)}.{session.ident(name)}"


def table(session: Session, tbl: str | None, registered: Registration | None = None) -> Table:
    """Catalog facts for ``tbl`` (a regclass text), checking its key.

    With the table's ``registered`` row, a key that is no longer what
    nearsim needs is taken from the row instead of refused, so that a table
    can always be disabled.
    """
    session.require(tbl, "the table")
    facts = session.one(
        "SELECT c.oid::pg_catalog.int8 AS oid, n.nspname, c.relname, c.relkind,"
        " c.relpersistence, pg_catalog.pg_get_userbyid(c.relowner) AS owner,"
        " EXISTS (SELECT FROM pg_catalog.pg_constraint k WHERE k.conrelid = c.oid"
        " AND k.contype = 'p' AND k.condeferrable) AS deferrable_key"
        " FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace"
        " WHERE c.oid = $1::pg_catalog.regclass", tbl
    )
    qualified = f"{session.ident(facts['nspname'])}.{session.ident(facts['relname'])}"
    if facts["relkind"] != "r":
        session.fail(f"{qualified} is not an ordinary table",
                     hint="nearsim indexes ordinary tables, not views, foreign or partitioned"
                     " tables.", sqlstate="42809")
    keys = session.execute(
        "SELECT a.attname, pg_catalog.format_type(a.atttypid, NULL) AS type,"
        " CASE WHEN a.attcollation <> 0 AND a.attcollation <> t.typcollation"
        " THEN (SELECT pg_catalog.quote_ident(cn.nspname) || '.'"
        " || pg_catalog.quote_ident(co.collname) FROM pg_catalog.pg_collation co"
        " JOIN pg_catalog.pg_namespace cn ON cn.oid = co.collnamespace"
        " WHERE co.oid = a.attcollation) END AS collation"
        " FROM pg_catalog.pg_index i"
        " JOIN pg_catalog.pg_attribute a ON a.attrelid = i.indrelid"
        " AND a.attnum = ANY (i.indkey::pg_catalog.int2[])"
        " JOIN pg_catalog.pg_type t ON t.oid = a.atttypid"
        f" WHERE i.indrelid = {facts['oid']} AND i.indisprimary"
    )
    if registered is not None and (len(keys) != 1 or keys[0]["type"] not in KEY_TYPES
                                   or keys[0]["attname"] != registered.key_column):
        return Table(int(facts["oid"]), qualified, facts["nspname"], facts["relname"],
                     facts["owner"], registered.key_column, "", facts["relpersistence"],
                     bool(facts["deferrable_key"]))
    if len(keys) != 1:
        session.fail(
            f"table {qualified} has no single-column primary key"
            if not keys else f"table {qualified} has a primary key of {len(keys)} columns",
            hint="nearsim needs a single-column primary key of type integer, bigint,"
            " text or uuid to name documents in pairs and groups.", sqlstate="42P10")
    key = keys[0]
    if key["type"] not in KEY_TYPES:
        session.fail(
            f"primary key {session.ident(key['attname'])} of table {qualified} has type"
            f" {key['type']}",
            hint="nearsim needs a primary key of type integer, bigint, text or uuid.",
            sqlstate="42804")
    key_type = key["type"] + (f" COLLATE {key['collation']}" if key["collation"] else "")
    return Table(int(facts["oid"]), qualified, facts["nspname"], facts["relname"],
                 facts["owner"], key["attname"], key_type, facts["relpersistence"],
                 bool(facts["deferrable_key"]))


def column_type(session: Session, of: Table, column: str) -> str | None:
    """The column's type, None if it does not exist; generated columns are refused.

    A BEFORE trigger sees a generated column before it is computed, so the
    fingerprint trigger could neither read one nor write one.
    """
    rows = session.execute(
        "SELECT pg_catalog.format_type(a.atttypid, NULL) AS type, a.attgenerated <> ''"
        " AS generated FROM pg_catalog.pg_attribute a"
        f" WHERE a.attrelid = {of.oid} AND a.attname = $1::pg_catalog.name"
        " AND a.attnum > 0 AND NOT a.attisdropped", column
    )
    if rows and rows[0]["generated"]:
        session.fail(f"column {session.ident(column)} of table {of.qualified} is a generated"
                     " column", hint="Fingerprint the columns it is computed from, or a"
                     " plain text column.", sqlstate="42P16")
    return str(rows[0]["type"]) if rows else None


def is_registered(session: Session, of: Table) -> bool:
    return bool(session.execute(f"SELECT 1 FROM {session.registry} WHERE tbl = {of.oid}::oid"))


def lookup(session: Session, tbl: str | None, strict: bool = True) -> Enabled:
    """The registry row of ``tbl``; an error if it is not enabled.

    ``strict=False`` accepts a table whose key changed since (see :func:`table`).
    """
    session.require(tbl, "the table")
    rows = session.execute(
        f"SELECT * FROM {session.registry} WHERE tbl = $1::pg_catalog.regclass", tbl
    )
    if not rows:
        session.fail(f"table {tbl} is not enabled for nearsim",
                     hint="Run SELECT nearsim_enable(table, text_column).", sqlstate="55000")
    registration = Registration.from_row(rows[0])
    return Enabled(table(session, tbl, None if strict else registration), registration)


def named_profile(session: Session, name: str | None) -> Profile:
    """Profile ``name``; an error if it is unknown or this server cannot compute it."""
    session.require(name, "the profile")
    assert name is not None
    try:
        profile = Profile.named(name)
    except ProfileError as error:
        session.fail(str(error), hint=PROFILES_HINT)
    try:
        profile.check_libraries()
    except RuntimeError as error:
        session.fail(str(error), hint="Install the extension with scripts/install.sh.",
                     sqlstate="58P01")
    return profile


def computable(profile: str) -> str | None:
    """None if this server computes ``profile``; otherwise why not."""
    try:
        Profile.named(profile).check_libraries()
    except (ProfileError, RuntimeError) as error:
        return str(error)
    return None


def check_table_profile(session: Session, qualified: str, profile: str) -> None:
    """Refuse to search or compare a table whose profile this server cannot compute."""
    why = computable(profile)
    if why is not None:
        session.fail(
            f"the fingerprints of {qualified} come from profile {profile}, which this server"
            " cannot compute", detail=why,
            hint="Recompute them with another profile: SELECT nearsim_rebuild("
            f"{session.literal(qualified)}, profile => 'default/1').", sqlstate="55000")


def simhash_sql(session: Session, text: str, profile: str) -> str:
    """SQL for the fingerprint of ``text`` (an SQL expression) under ``profile``.

    The call is exact: qualified with the extension's schema and with its
    arguments cast to the declared types, so no function another role adds
    (``simhash(character varying)``, say) can be chosen instead.
    """
    if profile == PROFILE:
        return f"{session.ext}.simhash({text}::pg_catalog.text)"
    return (f"{session.ext}.simhash({text}::pg_catalog.text,"
            f" {session.literal(profile)}::pg_catalog.text)")


@dataclass(frozen=True)
class RotationIndex:
    """One of a table's rotation indexes, as ``nearsim_rotation_indexes`` recognises it."""

    name: str  # qualified, quoted
    shift: int  # the first bit of its band: its key is nearsim_rotate(column, shift)
    access_method: str  # nearsim_btree, or btree (which serves, but takes new rows unordered)
    valid: bool  # false for one PostgreSQL does not use (a failed CREATE INDEX CONCURRENTLY)


def rotation_indexes(session: Session, enabled: Enabled) -> list[RotationIndex]:
    """The table's rotation indexes on its fingerprint column, valid or not."""
    rows = session.execute(
        "SELECT r.index::pg_catalog.text AS name, r.shift, r.access_method::pg_catalog.text"
        " AS access_method, r.valid"
        f" FROM {session.ext}.nearsim_rotation_indexes("
        f"{enabled.table.oid}::pg_catalog.oid::pg_catalog.regclass) AS r"
        " WHERE r.fingerprint_column OPERATOR(pg_catalog.=) $1::pg_catalog.name"
        " ORDER BY r.shift, r.index::pg_catalog.text", enabled.registration.hash_column)
    return [RotationIndex(r["name"], int(r["shift"]), r["access_method"], bool(r["valid"]))
            for r in rows]


def trigger_names(session: Session, table: Table) -> set[str]:
    """The names of the table's triggers."""
    return {r["tgname"] for r in session.execute(
        "SELECT t.tgname FROM pg_catalog.pg_trigger t"
        f" WHERE t.tgrelid = {table.oid}::pg_catalog.oid")}


@contextmanager
def as_owner(session: Session, of: Table) -> Iterator[None]:
    """Act as the table's owner inside the block (see :meth:`Session.acting_for`).

    Everything nearsim creates for a table belongs to the table's owner, and
    the work on its rows (the backfill fires the table's other triggers)
    runs with the owner's rights, never the caller's, in a security-restricted
    operation the table's code cannot leave.  The caller must have the
    owner's privileges.
    """
    allowed = session.one(
        "SELECT pg_catalog.pg_has_role($1::pg_catalog.name, 'USAGE') AS ok", of.owner)["ok"]
    if not allowed:
        session.fail(f"must be owner of table {of.qualified}",
                     detail=f"{of.qualified} is owned by {of.owner}.", sqlstate="42501")
    with session.acting_for(of.oid):
        yield
