"""The objects nearsim generates for an enabled table, and how they are dropped.

On the table itself, owned by its owner as every index is:

- one rotation index per band of the fingerprint over
  ``nearsim_rotate(si, band's first bit)`` (multi-index hashing over
  rotated fingerprints: see :mod:`nearsim.core.bands` and the extension's
  ``src/search.c``); PostgreSQL keeps them with the rows, so no trigger
  writes them.  They use the nearsim_btree access method, PostgreSQL's
  btree with a transaction's new entries inserted in key order
  (``src/btree.c``), which keeps bulk loads fast once the indexes outgrow
  shared_buffers.

Next to the table, in its schema and owned by its owner:

- a BEFORE ROW trigger function that fills the fingerprint column;
- two search functions ``<prefix>_similar(text | bigint, max_distance)``,
  SQL that the planner inlines: ``WHERE hamming(si, query) <=
  max_distance``, which the planner's rotation scan reads from the
  rotation index.

A table enabled before 0.4.0 also had a bucket table ``<prefix>_nearsim``
and a trigger function writing it; they stay (and work) until
``nearsim_rebuild`` replaces them with the rotation indexes
(:mod:`~nearsim.server.bucket_tables`).

Every name is quoted and every call into the extension is qualified with
its schema.
"""

from __future__ import annotations

import re

from ..core.bands import band_start
from ..core.registry import TYPED_FUNCTIONS, typed_function_names
from . import bucket_tables
from .catalog import Enabled, rotation_indexes, simhash_sql, trigger_names
from .database import Session, placeholders

# The fingerprint triggers sort after the table's other BEFORE triggers.
FINGERPRINT_TRIGGERS = {
    "INSERT": "zz_nearsim_fingerprint",
    "UPDATE": "zz_nearsim_fingerprint_update",
}
# They fire always: also when a subscriber applies replicated rows.
TRIGGER_MODES = dict.fromkeys(FINGERPRINT_TRIGGERS.values(), "A")
# The check-in guard's triggers (nearsim_guard): kept by nearsim_rebuild,
# dropped with the table's other objects by nearsim_disable.
GUARD_TRIGGERS = ("zzz_nearsim_guard", "zzz_nearsim_guard_update")
PINNED = "SET search_path = pg_catalog, pg_temp"


def rotation_keys(session: Session, bands: int, column: str = "si") -> list[str]:
    """The key expressions of the rotation indexes of a layout of ``bands`` bands."""
    return [f"{session.ext}.nearsim_rotate({column}, {band_start(bands, band)})"
            for band in range(bands)]


def create_rotation_indexes(session: Session, enabled: Enabled) -> None:
    """One rotation index per band on the documents table (named by PostgreSQL)."""
    table, reg = enabled.table, enabled.registration
    fp = session.ident(reg.hash_column)
    for key in rotation_keys(session, reg.bands, fp):
        session.run(f"CREATE INDEX ON {table.qualified} USING nearsim_btree ({key})")


def drop_rotation_indexes(session: Session, enabled: Enabled) -> None:
    """The table's rotation indexes (of any layout) go."""
    for index in rotation_indexes(session, enabled):
        session.run(f"DROP INDEX {index.name}")


def create_functions(session: Session, enabled: Enabled) -> None:
    """The fingerprint trigger function, the search functions and the typed ones."""
    _create_fingerprint_function(session, enabled)
    _create_search_functions(session, enabled)
    _create_typed_functions(session, enabled)


# The SQL name of each key type nearsim accepts, qualified.
_KEY_TYPES = {"integer": "pg_catalog.int4", "bigint": "pg_catalog.int8",
              "text": "pg_catalog.text", "uuid": "pg_catalog.uuid"}


def _create_typed_functions(session: Session, enabled: Enabled) -> None:
    """``<prefix>_pairs``, ``_pairs_verified``, ``_clusters``, ``_clusters_verified``.

    The same rows as the extension's functions, with the keys in the table's
    own key type, so that they join the table without a cast.
    """
    table, reg, ext = enabled.table, enabled.registration, session.ext
    key = _KEY_TYPES[table.key_type.split(" COLLATE ")[0]]
    names = typed_function_names(reg.similar_function)
    tbl = f"{session.literal(table.qualified)}::pg_catalog.regclass"
    bodies = {
        "pairs": (
            "max_distance pg_catalog.int4 DEFAULT 6",
            f"a {key}, b {key}, distance pg_catalog.int4",
            f"SELECT p.a::{key}, p.b::{key}, p.distance FROM {ext}.nearsim_pairs({tbl},"
            " max_distance) AS p"),
        "pairs_verified": (
            "min_similarity pg_catalog.float8 DEFAULT 0.87, measure pg_catalog.text DEFAULT"
            " 's_l', max_distance pg_catalog.int4 DEFAULT NULL",
            f"a {key}, b {key}, distance pg_catalog.int4, similarity pg_catalog.float8,"
            " short pg_catalog.bool",
            f"SELECT p.a::{key}, p.b::{key}, p.distance, p.similarity, p.short FROM"
            f" {ext}.nearsim_pairs_verified({tbl}, min_similarity, measure, max_distance) AS p"),
        "clusters": (
            "max_distance pg_catalog.int4 DEFAULT 6, method pg_catalog.text DEFAULT"
            " 'components', min_size pg_catalog.int4 DEFAULT 2",
            f"key {key}, cluster {key}, pivot {key}",
            f"SELECT c.key::{key}, c.cluster::{key}, c.pivot::{key} FROM"
            f" {ext}.nearsim_clusters({tbl}, max_distance, method, min_size) AS c"),
        "clusters_verified": (
            "min_similarity pg_catalog.float8 DEFAULT 0.87, measure pg_catalog.text DEFAULT"
            " 's_l', max_distance pg_catalog.int4 DEFAULT NULL, method pg_catalog.text DEFAULT"
            " 'components', min_size pg_catalog.int4 DEFAULT 2",
            f"key {key}, cluster {key}, pivot {key}",
            f"SELECT c.key::{key}, c.cluster::{key}, c.pivot::{key} FROM"
            f" {ext}.nearsim_clusters_verified({tbl}, min_similarity, measure, max_distance,"
            " method, min_size) AS c"),
    }
    for kind, (arguments, columns, body) in bodies.items():
        function = enabled.qualify(session, names[kind])
        session.run(f"""CREATE FUNCTION {function}({arguments})
RETURNS TABLE ({columns}) LANGUAGE sql STABLE {PINNED} AS $nearsim$
    {body}
$nearsim$""")
        comment = (f"nearsim_{kind}({table.qualified}, ...) with the keys in the table's key"
                   f" type ({table.key_type}), to join the table without a cast")
        session.run(f"COMMENT ON FUNCTION {function}{TYPED_FUNCTIONS[kind][0]}"
                    f" IS {session.literal(comment)}")
    # The n nearest rows, exactly those of ORDER BY hamming(si, query), key
    # LIMIT n (nearsim_nearest finds their keys through the rotation index).
    fp = session.ident(reg.hash_column)
    key_column = session.ident(table.key_column)
    nearest = enabled.qualify(session, names["nearest"])
    session.run(f"""CREATE FUNCTION {nearest}(query pg_catalog.int8, n pg_catalog.int4,
        max_distance pg_catalog.int4 DEFAULT 64)
RETURNS TABLE (doc {table.qualified}, distance pg_catalog.int4)
LANGUAGE sql STABLE {PINNED} AS $nearsim$
    SELECT d, {ext}.hamming(d.{fp}, query) FROM ONLY {table.qualified} AS d
    WHERE d.{key_column} OPERATOR(pg_catalog.=) ANY (ARRAY(
        SELECT f.key::{key} FROM {ext}.nearsim_nearest({tbl}, query, n, max_distance) AS f))
    ORDER BY 2, d.{key_column}
$nearsim$""")
    session.run(f"""CREATE FUNCTION {nearest}(query pg_catalog.text, n pg_catalog.int4,
        max_distance pg_catalog.int4 DEFAULT 64)
RETURNS TABLE (doc {table.qualified}, distance pg_catalog.int4)
LANGUAGE sql STABLE {PINNED} AS $nearsim$
    SELECT f.doc, f.distance FROM {nearest}({simhash_sql(session, "query", reg.profile)}, n,
                                            max_distance) AS f
$nearsim$""")
    for signature in TYPED_FUNCTIONS["nearest"]:
        comment = (f"the n rows of {table.qualified} nearest to the query ({reg.profile}"
                   " fingerprint), with the distance: exactly those of ORDER BY hamming(si,"
                   " query), key LIMIT n among the rows within max_distance bits")
        session.run(f"COMMENT ON FUNCTION {nearest}{signature} IS {session.literal(comment)}")


def _trusted(session: Session, table: str) -> str:
    """SQL: whether the writer has the privileges of the owner of ``table`` (a regclass)."""
    return f"{session.ext}.nearsim_writes_as_owner({table})"


def _create_fingerprint_function(session: Session, enabled: Enabled) -> None:
    table, reg = enabled.table, enabled.registration

    text, fp = session.ident(reg.text_column), session.ident(reg.hash_column)
    profile = session.literal(reg.profile)
    # NULL text: no fingerprint.  A missing fingerprint, or one left over
    # from the old text, is computed here.  One the statement brings is kept
    # when the session declares it computes the table's profile (SET
    # nearsim.profile, as nearsim's loader does) and the writer has the
    # owner's privileges (who could turn the triggers off anyway); otherwise
    # it is checked, and one of another profile is refused.  Another writer's
    # forged fingerprint would hide its row from searches and guards.
    fresh = simhash_sql(session, f"NEW.{text}", reg.profile)
    column = session.literal(reg.hash_column)
    declare = session.literal(f"SET nearsim.profile = {session.literal(reg.profile)}")
    qualified = session.literal(table.qualified)
    session.run(f"""CREATE FUNCTION {enabled.qualify(session, reg.fingerprint_function)}()
RETURNS trigger LANGUAGE plpgsql {PINNED} AS $nearsim$
DECLARE
    declared text := pg_catalog.current_setting('nearsim.profile', true);
    computed bigint;
BEGIN
    IF NEW.{text} IS NULL THEN
        NEW.{fp} := NULL;
    ELSIF NEW.{fp} IS NULL
       OR (TG_OP = 'UPDATE' AND NEW.{fp} OPERATOR(pg_catalog.=) OLD.{fp}
           AND NEW.{text} IS DISTINCT FROM OLD.{text}) THEN
        NEW.{fp} := {fresh};
    ELSIF declared IS NOT NULL AND declared OPERATOR(pg_catalog.<>) ''
          AND declared OPERATOR(pg_catalog.<>) {profile} THEN
        RAISE EXCEPTION 'this session writes fingerprints of profile %, but table % holds %',
            declared, {qualified}, {profile}
            USING ERRCODE = '55000',
                  HINT = 'Compute them with the table''s profile, or leave column ' || {column}
                         || ' NULL and nearsim computes it.';
    ELSIF declared IS DISTINCT FROM {profile}
          OR NOT {_trusted(session, "TG_RELID::pg_catalog.regclass")} THEN
        computed := {fresh};
        IF computed IS DISTINCT FROM NEW.{fp} THEN
            RAISE EXCEPTION 'fingerprint % given for table % is not the % one of its text (%)',
                NEW.{fp}, {qualified}, {profile}, computed
                USING ERRCODE = '22023',
                      HINT = 'Leave column ' || {column} || ' NULL and nearsim computes it;'
                             || ' a client that computes them declares it: ' || {declare};
        END IF;
    END IF;
    RETURN NEW;
END
$nearsim$""")
    session.run(
        f"REVOKE ALL ON FUNCTION {enabled.qualify(session, reg.fingerprint_function)}()"
        " FROM PUBLIC")


def _create_search_functions(session: Session, enabled: Enabled) -> None:
    table, reg, ext = enabled.table, enabled.registration, session.ext
    fp = session.ident(reg.hash_column)
    similar = enabled.qualify(session, reg.similar_function)
    profile = session.literal(reg.profile)
    itself = f"{table.oid}::pg_catalog.oid::pg_catalog.regclass"
    # The search: SQL, inlined by the planner, which reads the table's
    # rotation index for WHERE hamming(si, query) <= max_distance (the
    # rotation scan, src/planner.c) when that costs less than a scan, as for
    # the same statement written by hand: one route for both.  The profile
    # check is immutable: it runs once, when the query is planned.  The
    # function is not pinned to a search_path (that would stop the planner
    # from inlining it), so every call and operator is qualified.  FROM ONLY:
    # the rows of the table itself, not of tables that inherit from it.
    session.run(f"""CREATE FUNCTION {similar}(query bigint, max_distance integer DEFAULT 6)
RETURNS TABLE (doc {table.qualified}, distance integer)
LANGUAGE sql STABLE PARALLEL SAFE AS $nearsim$
    SELECT d, {ext}.hamming(d.{fp}, query)
    FROM ONLY {table.qualified} AS d
    WHERE {ext}.hamming(d.{fp}, query) OPERATOR(pg_catalog.<=) max_distance
      AND {ext}.nearsim_check_profile({itself}, {profile}::pg_catalog.text)
$nearsim$""")
    session.run(f"""CREATE FUNCTION {similar}(query text, max_distance integer DEFAULT 6)
RETURNS TABLE (doc {table.qualified}, distance integer)
LANGUAGE sql STABLE PARALLEL SAFE AS $nearsim$
    SELECT s.doc, s.distance FROM {similar}({simhash_sql(session, "query", reg.profile)},
                                            max_distance) AS s
$nearsim$""")
    comment = (f"rows of {table.qualified} whose fingerprint is within max_distance bits of the"
               f" query ({reg.profile} fingerprint), with the distance; exact, through the"
               " nearsim rotation index")
    for argument in ("bigint", "text"):
        session.run(
            f"COMMENT ON FUNCTION {similar}({argument}, integer) IS {session.literal(comment)}")


def create_triggers(session: Session, enabled: Enabled) -> None:
    """The fingerprint triggers that are missing, all of them enabled."""
    table, reg = enabled.table, enabled.registration
    existing = trigger_names(session, table)
    fingerprint_fn = enabled.qualify(session, reg.fingerprint_function)

    # The conditions are those under which the function changes the row,
    # tested without calling it: a bulk load that brings its fingerprints
    # costs no function call per row.
    text, fp = session.ident(reg.text_column), session.ident(reg.hash_column)
    # A fingerprint the statement brings is kept unchecked only when the
    # session declares the table's profile and the writer has the owner's
    # privileges (the table's name, as a regclass constant, follows a dump).
    itself = f"{session.literal(table.qualified)}::pg_catalog.regclass"
    unchecked = ("(pg_catalog.current_setting('nearsim.profile', true) IS NOT DISTINCT FROM"
                 f" {session.literal(reg.profile)} AND {_trusted(session, itself)})")
    needs_work = {
        "INSERT": f"NEW.{fp} IS NULL OR NEW.{text} IS NULL OR NOT {unchecked}",
        "UPDATE": f"NEW.{fp} IS NULL OR NEW.{text} IS NULL"
                  f" OR (NEW.{fp} OPERATOR(pg_catalog.=) OLD.{fp}"
                  f" AND NEW.{text} IS DISTINCT FROM OLD.{text})"
                  f" OR (NEW.{fp} IS DISTINCT FROM OLD.{fp} AND NOT {unchecked})",
    }
    for event, name in FINGERPRINT_TRIGGERS.items():
        if name not in existing:
            session.run(
                f"CREATE TRIGGER {session.ident(name)} BEFORE {event} ON {table.qualified}"
                f" FOR EACH ROW WHEN ({needs_work[event]})"
                f" EXECUTE FUNCTION {fingerprint_fn}()"
            )
    for name in FINGERPRINT_TRIGGERS.values():
        session.run(f"ALTER TABLE {table.qualified} ENABLE ALWAYS TRIGGER {session.ident(name)}")


def drop_functions_and_triggers(session: Session, enabled: Enabled,
                                guard: bool = False) -> None:
    """The table's functions and triggers, and those of a bucket table kept from before;
    with ``guard``, its check-in guard too."""
    reg = enabled.registration
    similar = enabled.qualify(session, reg.similar_function)
    session.run(f"DROP FUNCTION IF EXISTS {similar}(text, integer)")
    session.run(f"DROP FUNCTION IF EXISTS {similar}(bigint, integer)")
    for kind, name in typed_function_names(reg.similar_function).items():
        for signature in TYPED_FUNCTIONS[kind]:
            session.run(f"DROP FUNCTION IF EXISTS {enabled.qualify(session, name)}{signature}")
    existing = trigger_names(session, enabled.table)
    for name in (*FINGERPRINT_TRIGGERS.values(), *bucket_tables.TRIGGERS,
                 *(GUARD_TRIGGERS if guard else ())):
        if name in existing:
            session.run(f"DROP TRIGGER {session.ident(name)} ON {enabled.table.qualified}")
    for function in (reg.fingerprint_function, reg.bucket_function):
        if function is not None:
            session.run(f"DROP FUNCTION IF EXISTS {enabled.qualify(session, function)}()")


def drop_all(session: Session, enabled: Enabled) -> None:
    """Every object of the table: functions, triggers, indexes (and a bucket table).

    The links a guard recorded stay: they are the user's data.
    """
    drop_functions_and_triggers(session, enabled, guard=True)
    bucket_tables.drop(session, enabled)
    drop_rotation_indexes(session, enabled)


class _Recording(Session):
    """A session whose statements on the table are written down instead of run."""

    def __init__(self, session: Session) -> None:
        super().__init__(session.db)
        self.acting = session.acting
        self.__dict__["ext"] = session.ext  # the cached schema, looked up once
        self.statements: list[str] = []

    def run(self, statement: str) -> str | None:
        self.statements.append(statement)
        return None


# The search function names its table by oid where the planner must fold the
# call (the profile check): a restored dump gives the table another oid.
_OID = re.compile(r"\b[0-9]+::pg_catalog\.oid::pg_catalog\.regclass\b")


def _without_oids(body: str) -> str:
    return _OID.sub("OID::pg_catalog.oid::pg_catalog.regclass", body)


def changed_functions(session: Session, enabled: Enabled) -> list[str]:
    """The table's generated functions that are not as this version makes them.

    Each must exist, belong to the table's owner, run with its invoker's
    rights (the extension calls none of them; a user's query does), keep the
    settings it was made with, and have the body nearsim wrote: the owner may
    replace them (they are the owner's), and a replaced one would run the
    owner's code in the searches of every role that calls it.
    """
    reg = enabled.registration
    generated = [reg.similar_function, reg.fingerprint_function,
                 *typed_function_names(reg.similar_function).values()]
    recording = _Recording(session)
    create_functions(recording, enabled)
    expected: dict[tuple[str, str], bool] = {}
    for statement in recording.statements:
        for name in generated:
            if statement.startswith(f"CREATE FUNCTION {enabled.qualify(session, name)}("):
                head, _, body = statement.partition(" AS $nearsim$")
                expected[(name, _without_oids(body.removesuffix("$nearsim$")))] = PINNED in head
    found = session.execute(
        "SELECT p.oid::pg_catalog.regprocedure::pg_catalog.text AS signature, p.proname, p.prosrc,"
        " p.prosecdef, p.proconfig, p.proowner OPERATOR(pg_catalog.=) c.relowner AS owned"
        " FROM pg_catalog.pg_proc p, pg_catalog.pg_class c"
        f" WHERE c.oid OPERATOR(pg_catalog.=) {enabled.table.oid}::pg_catalog.oid"
        " AND p.pronamespace OPERATOR(pg_catalog.=) c.relnamespace"
        " AND p.proname OPERATOR(pg_catalog.=) ANY"
        f" (ARRAY[{placeholders(len(generated), 'pg_catalog.name')}]::pg_catalog.name[])",
        *generated)
    changed = []
    for row in found:
        pinned = expected.get((row["proname"], _without_oids(row["prosrc"])))
        settings = list(row["proconfig"] or [])
        if pinned is None or row["prosecdef"] or not row["owned"] or settings != (
                ["search_path=pg_catalog, pg_temp"] if pinned else []):
            changed.append(row["signature"])
    if len(found) < len(expected):
        changed.append(f"{len(expected) - len(found)} of the table's functions (missing)")
    return sorted(changed)
