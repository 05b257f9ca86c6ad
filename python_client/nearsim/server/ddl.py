"""The objects nearsim generates for an enabled table, and how they are dropped.

Next to the table, in its schema and owned by its owner:

- a bucket table ``<prefix>_nearsim (key, si)`` with one row per
  fingerprinted document and one rotation index per band of the fingerprint
  (multi-index hashing over btrees of rotated fingerprints: see
  :mod:`nearsim.core.bands`);
- a BEFORE ROW trigger function that fills the fingerprint column;
- an AFTER STATEMENT trigger function that keeps the buckets current from
  the statement's transition tables;
- two search functions ``<prefix>_similar(text | bigint, max_distance)``,
  SQL that the planner inlines: the bucket rows come from
  ``nearsim_search`` (which reads the rotation indexes), the documents
  through their primary key.

Every name is quoted and every call into the extension is qualified with
its schema.
"""

from __future__ import annotations

from ..core.bands import band_start
from .catalog import Enabled, simhash_sql
from .database import Session

# The fingerprint triggers sort after the table's other BEFORE triggers.
FINGERPRINT_TRIGGERS = {
    "INSERT": "zz_nearsim_fingerprint",
    "UPDATE": "zz_nearsim_fingerprint_update",
}
BUCKET_TRIGGERS = {
    "INSERT": ("nearsim_insert", "REFERENCING NEW TABLE AS nearsim_new"),
    "UPDATE": ("nearsim_update", "REFERENCING OLD TABLE AS nearsim_old NEW TABLE AS nearsim_new"),
    "DELETE": ("nearsim_delete", "REFERENCING OLD TABLE AS nearsim_old"),
    "TRUNCATE": ("nearsim_truncate", ""),
}
# Row by row, in replica mode only: logical replication's apply worker fires
# row triggers but not statement triggers (see _create_bucket_function).
REPLICA_TRIGGER = "nearsim_replica"
TRIGGERS = (*FINGERPRINT_TRIGGERS.values(), *(name for name, _ in BUCKET_TRIGGERS.values()),
            REPLICA_TRIGGER)
# When each trigger fires (pg_trigger.tgenabled): the fingerprint triggers
# always (also when a subscriber applies replicated rows), the statement
# triggers in origin mode (ordinary sessions), the row trigger in replica
# mode (the apply worker, session_replication_role = replica).
TRIGGER_MODES = {
    **dict.fromkeys(FINGERPRINT_TRIGGERS.values(), "A"),
    **{name: "O" for name, _ in BUCKET_TRIGGERS.values()},
    REPLICA_TRIGGER: "R",
}
_ENABLE = {"A": "ENABLE ALWAYS TRIGGER", "O": "ENABLE TRIGGER", "R": "ENABLE REPLICA TRIGGER"}
PINNED = "SET search_path = pg_catalog, pg_temp"


def create_bucket_table(session: Session, enabled: Enabled) -> str:
    """The bucket table, filled from the documents' fingerprints; its qualified name."""
    table, reg = enabled.table, enabled.registration
    key, fp = session.ident(table.key_column), session.ident(reg.hash_column)
    bucket = enabled.qualify(session, reg.bucket_table)
    # An unlogged table gets unlogged buckets: after a crash both are empty.
    unlogged = "UNLOGGED " if table.persistence == "u" else ""
    session.run(f"CREATE {unlogged}TABLE {bucket}"
                f" (key {table.key_type} PRIMARY KEY, si pg_catalog.int8 NOT NULL)")
    comment = (f"nearsim buckets of {table.qualified}; written by its triggers,"
               f" read by {reg.similar_function}()")
    session.run(f"COMMENT ON TABLE {bucket} IS {session.literal(comment)}")
    session.run(
        f"INSERT INTO {bucket} (key, si) SELECT {key}, {fp} FROM {table.qualified}"
        f" WHERE {fp} IS NOT NULL"
    )
    create_band_indexes(session, enabled)
    session.run(f"ANALYZE {bucket}")
    # Whoever may read the documents may search them; nobody but the
    # owner's triggers writes buckets.
    session.run(f"ALTER TABLE {bucket} ENABLE ROW LEVEL SECURITY")
    session.run(
        f"CREATE POLICY readers_of_documents ON {bucket} FOR SELECT USING"
        " (pg_catalog.has_table_privilege("
        f"{session.literal(table.qualified)}::pg_catalog.regclass,"
        " 'SELECT'))"
    )
    session.run(f"GRANT SELECT ON {bucket} TO PUBLIC")
    return bucket


def rotation_keys(session: Session, bands: int) -> list[str]:
    """The key expressions of the rotation indexes of a layout of ``bands`` bands."""
    return [f"{session.ext}.nearsim_rotate(si, {band_start(bands, band)})"
            for band in range(bands)]


def create_band_indexes(session: Session, enabled: Enabled) -> None:
    """One rotation index per band on the bucket table."""
    bucket = enabled.qualify(session, enabled.registration.bucket_table)
    for key in rotation_keys(session, enabled.registration.bands):
        session.run(f"CREATE INDEX ON {bucket} ({key})")


def create_functions(session: Session, enabled: Enabled) -> None:
    """The fingerprint and bucket trigger functions and the two search functions."""
    _create_fingerprint_function(session, enabled)
    _create_bucket_function(session, enabled)
    _create_search_functions(session, enabled)


def _create_fingerprint_function(session: Session, enabled: Enabled) -> None:
    table, reg = enabled.table, enabled.registration
    text, fp = session.ident(reg.text_column), session.ident(reg.hash_column)
    profile = session.literal(reg.profile)
    # NULL text: no fingerprint.  A missing fingerprint, or one left over
    # from the old text, is computed here.  One the statement brings is kept
    # when the session declares it computes the table's profile (SET
    # nearsim.profile, as nearsim's loader does); otherwise it is checked,
    # and one of another profile is refused.
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
       OR (TG_OP = 'UPDATE' AND NEW.{fp} = OLD.{fp} AND NEW.{text} IS DISTINCT FROM OLD.{text}) THEN
        NEW.{fp} := {fresh};
    ELSIF declared IS NOT NULL AND declared <> '' AND declared <> {profile} THEN
        RAISE EXCEPTION 'this session writes fingerprints of profile %, but table % holds %',
            declared, {qualified}, {profile}
            USING ERRCODE = '55000',
                  HINT = 'Compute them with the table''s profile, or leave column ' || {column}
                         || ' NULL and nearsim computes it.';
    ELSIF declared IS DISTINCT FROM {profile} THEN
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


def _create_bucket_function(session: Session, enabled: Enabled) -> None:
    reg = enabled.registration
    key = session.ident(enabled.table.key_column)
    fp = session.ident(reg.hash_column)
    bucket = enabled.qualify(session, reg.bucket_table)
    function = enabled.qualify(session, reg.bucket_function)
    itself, name = session.literal(f"{function}()"), session.literal(function)
    # With a DEFERRABLE primary key a transaction may insert a row under the
    # key of one it deletes later: a bucket stays while a row has its key.
    def unless_a_row_has(key_value: str) -> str:
        if not enabled.table.deferrable_key:
            return ""
        return (f" AND NOT EXISTS (SELECT FROM {enabled.table.qualified} d"
                f" WHERE d.{key} = {key_value})")

    still_there = unless_a_row_has("b.key")
    hint = session.literal(
        f"Its owner runs SELECT nearsim_rebuild({session.literal(enabled.table.qualified)}).")
    # One statement's rows at once, from its transition tables.  A bucket
    # row changes only when its document's key or fingerprint does.  It
    # runs as its owner (writers may not write buckets themselves), so it
    # refuses to run when that is not the table's owner: then the table's
    # code (casts of its key type, say) could run with another role's rights.
    # Row by row when a subscriber applies replicated rows (the apply worker
    # fires no statement triggers), unless the bucket table is replicated
    # too: then the publisher's buckets arrive by themselves.
    row_still_there = unless_a_row_has(f"OLD.{key}")
    session.run(f"""CREATE FUNCTION {function}() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER {PINNED} AS $nearsim$
BEGIN
    IF (SELECT c.relowner FROM pg_catalog.pg_class c WHERE c.oid = TG_RELID)
       IS DISTINCT FROM (SELECT p.proowner FROM pg_catalog.pg_proc p
                         WHERE p.oid = {itself}::pg_catalog.regprocedure) THEN
        RAISE EXCEPTION 'nearsim: % belongs to another role than table %', {name},
            TG_TABLE_SCHEMA || '.' || TG_TABLE_NAME
            USING ERRCODE = '42501', HINT = {hint};
    END IF;
    IF TG_LEVEL = 'ROW' THEN
        IF EXISTS (SELECT FROM pg_catalog.pg_subscription_rel r
                   WHERE r.srrelid = {session.literal(bucket)}::pg_catalog.regclass) THEN
            RETURN NULL;
        END IF;
        IF TG_OP = 'DELETE'
           OR (TG_OP = 'UPDATE' AND (OLD.{key} IS DISTINCT FROM NEW.{key} OR NEW.{fp} IS NULL))
        THEN
            DELETE FROM {bucket} AS b WHERE b.key = OLD.{key}{row_still_there};
        END IF;
        IF TG_OP <> 'DELETE' AND NEW.{fp} IS NOT NULL THEN
            INSERT INTO {bucket} AS b (key, si) VALUES (NEW.{key}, NEW.{fp})
            ON CONFLICT (key) DO UPDATE SET si = EXCLUDED.si;
        END IF;
        RETURN NULL;
    END IF;
    IF TG_OP = 'INSERT' THEN
        INSERT INTO {bucket} AS b (key, si)
        SELECT n.{key}, n.{fp} FROM nearsim_new n WHERE n.{fp} IS NOT NULL
        ON CONFLICT (key) DO UPDATE SET si = EXCLUDED.si;
    ELSIF TG_OP = 'UPDATE' THEN
        DELETE FROM {bucket} AS b
        USING (SELECT o.{key}, o.{fp} FROM nearsim_old o
               EXCEPT SELECT n.{key}, n.{fp} FROM nearsim_new n) AS gone (key, si)
        WHERE b.key = gone.key{still_there};
        INSERT INTO {bucket} AS b (key, si)
        SELECT came.key, came.si
        FROM (SELECT n.{key}, n.{fp} FROM nearsim_new n
              EXCEPT SELECT o.{key}, o.{fp} FROM nearsim_old o) AS came (key, si)
        WHERE came.si IS NOT NULL
        ON CONFLICT (key) DO UPDATE SET si = EXCLUDED.si;
    ELSIF TG_OP = 'DELETE' THEN
        DELETE FROM {bucket} AS b USING nearsim_old o WHERE b.key = o.{key}{still_there};
    ELSIF TG_OP = 'TRUNCATE' THEN
        TRUNCATE {bucket};
    END IF;
    RETURN NULL;
END
$nearsim$""")
    session.run(f"REVOKE ALL ON FUNCTION {function}() FROM PUBLIC")


def _create_search_functions(session: Session, enabled: Enabled) -> None:
    table, reg, ext = enabled.table, enabled.registration, session.ext
    key, fp = session.ident(table.key_column), session.ident(reg.hash_column)
    bucket = enabled.qualify(session, reg.bucket_table)
    similar = enabled.qualify(session, reg.similar_function)
    profile = session.literal(reg.profile)
    # The search: SQL, inlined by the planner.  nearsim_search reads the
    # rotation indexes of the bucket table and gives the bucket rows within
    # max_distance (of those the caller may see), once per query: as a
    # sub-select it is never run once per bucket row, even in a plan that a
    # prepared statement made when the table was small.  The documents' own
    # fingerprints decide, so the rows are exactly those of WHERE
    # hamming(si, query) <= max_distance.  The candidates' keys come as one
    # array, so the documents are always fetched through their primary key,
    # whatever the planner guesses of hamming().  The profile check is
    # immutable: it runs once, when the query is planned.  The function is
    # not pinned to a search_path (that would stop the planner from inlining
    # it), so every call and operator is qualified.
    session.run(f"""CREATE FUNCTION {similar}(query bigint, max_distance integer DEFAULT 6)
RETURNS TABLE (doc {table.qualified}, distance integer)
LANGUAGE sql STABLE PARALLEL SAFE AS $nearsim$
    SELECT d, {ext}.hamming(d.{fp}, query)
    FROM {table.qualified} AS d
    WHERE d.{key} OPERATOR(pg_catalog.=) ANY (ARRAY(
        SELECT b.key FROM {bucket} AS b
        WHERE b.ctid OPERATOR(pg_catalog.=) ANY ((SELECT {ext}.nearsim_search(
                  {session.literal(bucket)}::pg_catalog.regclass, 'si'::pg_catalog.name,
                  query, max_distance))::pg_catalog.tid[])
          AND {ext}.hamming(b.si, query) OPERATOR(pg_catalog.<=) max_distance))
      AND {ext}.hamming(d.{fp}, query) OPERATOR(pg_catalog.<=) max_distance
      AND {ext}.nearsim_check_profile({table.oid}::pg_catalog.oid::pg_catalog.regclass,
                                      {profile}::pg_catalog.text)
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
    """The fingerprint and bucket triggers that are missing, all of them enabled."""
    table, reg = enabled.table, enabled.registration
    existing = {r["tgname"] for r in session.execute(
        f"SELECT tgname FROM pg_catalog.pg_trigger WHERE tgrelid = {table.oid}::oid"
    )}
    fingerprint_fn = enabled.qualify(session, reg.fingerprint_function)
    bucket_fn = enabled.qualify(session, reg.bucket_function)
    # The conditions are those under which the function changes the row,
    # tested without calling it: a bulk load that brings its fingerprints
    # costs no function call per row.
    text, fp = session.ident(reg.text_column), session.ident(reg.hash_column)
    undeclared = ("pg_catalog.current_setting('nearsim.profile', true) IS DISTINCT FROM"
                  f" {session.literal(reg.profile)}")
    needs_work = {
        "INSERT": f"NEW.{fp} IS NULL OR NEW.{text} IS NULL OR {undeclared}",
        "UPDATE": f"NEW.{fp} IS NULL OR NEW.{text} IS NULL"
                  f" OR (NEW.{fp} = OLD.{fp} AND NEW.{text} IS DISTINCT FROM OLD.{text})"
                  f" OR (NEW.{fp} IS DISTINCT FROM OLD.{fp} AND {undeclared})",
    }
    for event, name in FINGERPRINT_TRIGGERS.items():
        if name not in existing:
            session.run(
                f"CREATE TRIGGER {session.ident(name)} BEFORE {event} ON {table.qualified}"
                f" FOR EACH ROW WHEN ({needs_work[event]})"
                f" EXECUTE FUNCTION {fingerprint_fn}()"
            )
    for event, (name, referencing) in BUCKET_TRIGGERS.items():
        if name not in existing:
            session.run(
                f"CREATE TRIGGER {session.ident(name)} AFTER {event} ON {table.qualified}"
                f" {referencing} FOR EACH STATEMENT EXECUTE FUNCTION {bucket_fn}()"
            )
    if REPLICA_TRIGGER not in existing:
        session.run(
            f"CREATE TRIGGER {session.ident(REPLICA_TRIGGER)} AFTER INSERT OR UPDATE OR DELETE"
            f" ON {table.qualified} FOR EACH ROW EXECUTE FUNCTION {bucket_fn}()"
        )
    for name in TRIGGERS:
        session.run(f"ALTER TABLE {table.qualified} {_ENABLE[TRIGGER_MODES[name]]}"
                    f" {session.ident(name)}")


def drop_functions_and_triggers(session: Session, enabled: Enabled) -> None:
    reg = enabled.registration
    similar = enabled.qualify(session, reg.similar_function)
    session.run(f"DROP FUNCTION IF EXISTS {similar}(text, integer)")
    session.run(f"DROP FUNCTION IF EXISTS {similar}(bigint, integer)")
    for name in TRIGGERS:
        session.run(
            f"DROP TRIGGER IF EXISTS {session.ident(name)} ON {enabled.table.qualified}")
    for function in (reg.fingerprint_function, reg.bucket_function):
        session.run(f"DROP FUNCTION IF EXISTS {enabled.qualify(session, function)}()")


def drop_all(session: Session, enabled: Enabled) -> None:
    """Every object of the table: functions, triggers and the bucket table."""
    drop_functions_and_triggers(session, enabled)
    session.run(
        f"DROP TABLE IF EXISTS {enabled.qualify(session, enabled.registration.bucket_table)}")
