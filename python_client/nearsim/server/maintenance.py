"""Enabling, disabling, checking and repairing tables: ``nearsim_enable`` and company.

They run with the caller's rights; what they create belongs to the table's
owner, and the work on the table's rows is done as its owner.
"""

from __future__ import annotations

from typing import Any

from ..core.bands import BandsError, check_bands, default_bands
from ..core.registry import Registration, object_names
from . import ddl
from .catalog import (
    MAX_IDENTIFIER,
    TEXT_TYPES,
    Enabled,
    Table,
    as_owner,
    band_indexes,
    check_table_profile,
    column_type,
    computable,
    is_registered,
    lookup,
    named_profile,
    simhash_sql,
    table,
)
from .database import Session


def _bands(session: Session, bands: int) -> int:
    try:
        return check_bands(bands)
    except BandsError as error:
        session.fail(str(error))


def enable(session: Session, tbl: str, text_column: str, hash_column: str, bands: int | None,
           prefix: str | None, batch_size: int, profile: str) -> None:
    """``nearsim_enable``: fingerprint, bucket table, triggers, search functions."""
    if text_column is None or hash_column is None or batch_size is None:
        session.fail("text_column, hash_column and batch_size must not be NULL",
                     sqlstate="22004")
    profile = named_profile(session, profile).name
    documents = table(session, tbl)
    if is_registered(session, documents):
        session.fail(f"table {documents.qualified} is already enabled for nearsim",
                     hint="nearsim_rebuild changes the layout; nearsim_disable removes it.",
                     sqlstate="55000")
    if batch_size < 1:
        session.fail(f"batch_size must be positive, not {batch_size}")
    text_type = column_type(session, documents, text_column)
    if text_type is None:
        session.fail(f"column {session.ident(text_column)} of table {documents.qualified} does"
                     " not exist", sqlstate="42703")
    if text_type not in TEXT_TYPES:
        session.fail(f"column {session.ident(text_column)} of table {documents.qualified} has"
                     f" type {text_type}, not text", sqlstate="42804")
    if hash_column in (text_column, documents.key_column):
        session.fail(f"the fingerprint column cannot be column {session.ident(hash_column)}")
    hash_type = column_type(session, documents, hash_column)
    if hash_type not in (None, "bigint"):
        session.fail(f"column {session.ident(hash_column)} of table {documents.qualified} has"
                     f" type {hash_type}; a fingerprint column is bigint", sqlstate="42804")

    names = object_names(documents.name if prefix is None else prefix)
    for name in names.values():
        if len(name.encode()) > MAX_IDENTIFIER:
            session.fail(f"name {session.ident(name)} is longer than {MAX_IDENTIFIER} bytes",
                         hint="Pass a shorter prefix => 'name'.", sqlstate="42622")
    schema = session.literal(documents.schema)
    clash = session.execute(
        "SELECT c.relname AS name FROM pg_catalog.pg_class c"
        " WHERE c.relnamespace = (SELECT n.oid FROM pg_catalog.pg_namespace n"
        f" WHERE n.nspname = {schema})"
        f" AND c.relname = {session.literal(names['bucket_table'])}"
        " UNION ALL SELECT p.proname FROM pg_catalog.pg_proc p"
        " WHERE p.pronamespace = (SELECT n.oid FROM pg_catalog.pg_namespace n"
        f" WHERE n.nspname = {schema})"
        f" AND p.proname IN ({', '.join(session.literal(n) for n in names.values())})"
    )
    if clash:
        session.fail(f"{session.ident(documents.schema)}.{session.ident(clash[0]['name'])}"
                     " already exists",
                     hint="Pass another prefix => 'name' to nearsim_enable.", sqlstate="42P07")

    with as_owner(session, documents):
        _create(session, documents, text_column, hash_column, hash_type, bands, names,
                batch_size, profile)


def _create(session: Session, documents: Table, text_column: str, hash_column: str,
            hash_type: str | None, bands: int | None, names: dict[str, str], batch_size: int,
            profile: str) -> None:
    # Writers wait until the table is enabled; readers go on.
    session.execute(f"LOCK TABLE {documents.qualified} IN SHARE ROW EXCLUSIVE MODE")
    text, fp = session.ident(text_column), session.ident(hash_column)
    if hash_type is None:
        session.execute(f"ALTER TABLE {documents.qualified} ADD COLUMN {fp} bigint")
    else:
        _check_stored_fingerprints(session, documents, text, fp, profile)

    rows = int(session.one(f"SELECT count(*) AS n FROM {documents.qualified}")["n"])
    bands = _bands(session, default_bands(rows) if bands is None else bands)
    registration = Registration(documents.key_column, text_column, hash_column, bands, profile,
                                documents.schema, **names)
    enabled = Enabled(documents, registration)
    _backfill(session, enabled, batch_size, rows)
    ddl.create_bucket_table(session, enabled)
    ddl.create_functions(session, enabled)
    ddl.create_triggers(session, enabled)
    columns = Registration.columns()
    values = ", ".join(session.literal(getattr(registration, c)) for c in columns)
    session.execute(
        f"INSERT INTO {session.registry} (tbl, {', '.join(columns)})"
        f" VALUES ({documents.oid}::oid::pg_catalog.regclass, {values})"
    )


def _check_stored_fingerprints(session: Session, documents: Table, text: str, fp: str,
                               profile: str) -> None:
    """Refuse a fingerprint column filled by another profile.

    A sample of stored values is recomputed; fingerprints of another profile
    (or not fingerprints at all) would make every search wrong.
    """
    key = session.ident(documents.key_column)
    row = session.one(
        "SELECT count(*) AS checked, count(*) FILTER (WHERE s.stored IS DISTINCT FROM s.fresh)"
        " AS differ, (pg_catalog.array_agg(s.key::text) FILTER (WHERE s.stored IS DISTINCT"
        " FROM s.fresh))[1] AS first"
        f" FROM (SELECT {key} AS key, {fp} AS stored,"
        f" {simhash_sql(session, text, profile)} AS fresh FROM {documents.qualified}"
        f" WHERE {fp} IS NOT NULL ORDER BY {key} LIMIT 200) s"
    )
    if row["differ"]:
        session.fail(
            f"column {fp} of table {documents.qualified} holds values that are not"
            f" {profile} fingerprints of column {text}",
            detail=f"{row['differ']} of {row['checked']} sampled rows differ, the first"
            f" with key {row['first']}.",
            hint=f"Set the column to NULL (UPDATE {documents.qualified} SET {fp} = NULL) to"
            " recompute it, or choose another hash_column.", sqlstate="55000")


def _backfill(session: Session, enabled: Enabled, batch_size: int, rows: int) -> None:
    """Fingerprint the rows that have none, a batch of keys at a time."""
    documents, reg = enabled.table, enabled.registration
    key = session.ident(documents.key_column)
    text, fp = session.ident(reg.text_column), session.ident(reg.hash_column)
    todo = int(session.one(
        f"SELECT count(*) AS n FROM {documents.qualified} WHERE {fp} IS NULL"
        f" AND {text} IS NOT NULL")["n"])
    done = 0
    last: str | None = None
    fresh = simhash_sql(session, f"d.{text}", reg.profile)
    while done < todo:
        after = "" if last is None else f" AND {key} > {session.literal(last)}"
        result = session.one(
            f"WITH batch AS (SELECT {key} FROM {documents.qualified}"
            f" WHERE {fp} IS NULL AND {text} IS NOT NULL{after}"
            f" ORDER BY {key} LIMIT {batch_size}),"
            f" done AS (UPDATE {documents.qualified} d SET {fp} = {fresh}"
            f" FROM batch WHERE d.{key} = batch.{key} RETURNING d.{key})"
            f" SELECT count(*) AS n,"
            f" (SELECT {key}::text FROM done ORDER BY {key} DESC LIMIT 1) AS last FROM done"
        )
        if not result["n"]:
            break
        done += int(result["n"])
        last = result["last"]
        session.progress("fingerprinted", done, todo)
    if rows and not todo:
        session.notice(f"nearsim: all {rows} rows of {documents.qualified} already have a"
                       " fingerprint or no text")


def disable(session: Session, tbl: str) -> None:
    """``nearsim_disable``: the table's objects and registry row go; documents stay."""
    enabled = lookup(session, tbl)
    with as_owner(session, enabled.table):
        ddl.drop_all(session, enabled)
        session.execute(f"DELETE FROM {session.registry} WHERE tbl = {enabled.table.oid}::oid")


def verify(session: Session, tbl: str, fingerprints: bool) -> dict[str, Any]:
    """``nearsim_verify``: drift between documents and buckets, and object health."""
    enabled = lookup(session, tbl)
    documents, reg = enabled.table, enabled.registration
    key = session.ident(documents.key_column)
    text, fp = session.ident(reg.text_column), session.ident(reg.hash_column)
    bucket = enabled.qualify(session, reg.bucket_table)
    profile_ok = computable(reg.profile) is None
    stale = (
        f", (SELECT count(*) FROM {documents.qualified} d WHERE d.{fp} IS DISTINCT FROM"
        f" {simhash_sql(session, f'd.{text}', reg.profile)}) AS stale"
        if fingerprints and profile_ok else ", NULL::bigint AS stale"
    )
    report = session.one(
        "SELECT count(d.key) AS documents, count(d.si) AS fingerprinted,"
        " count(b.key) AS buckets,"
        " count(*) FILTER (WHERE d.si IS NOT NULL AND b.key IS NULL) AS missing,"
        " count(*) FILTER (WHERE b.key IS NOT NULL AND d.si IS NULL) AS extra,"
        " count(*) FILTER (WHERE b.si <> d.si) AS wrong,"
        " (pg_catalog.array_agg(COALESCE(d.key, b.key)::text ORDER BY COALESCE(d.key, b.key))"
        "  FILTER (WHERE b.si IS DISTINCT FROM d.si))[1:10] AS sample_keys"
        f"{stale}"
        f" FROM (SELECT {key} AS key, {fp} AS si FROM {documents.qualified}) d"
        f" FULL JOIN {bucket} b ON b.key = d.key"
    )
    triggers = session.execute(
        "SELECT t.tgname, t.tgenabled FROM pg_catalog.pg_trigger t"
        f" WHERE t.tgrelid = {documents.oid}::oid"
    )
    states = {r["tgname"]: r["tgenabled"] for r in triggers}
    report["triggers_ok"] = all(states.get(name) in ("O", "A") for name in ddl.TRIGGERS)
    report["bands"] = reg.bands
    report["band_indexes_ok"] = len(band_indexes(session, enabled)) == reg.bands
    report["profile_ok"] = profile_ok
    report["ok"] = (
        not (report["missing"] or report["extra"] or report["wrong"] or report["stale"])
        and report["triggers_ok"] and report["band_indexes_ok"] and report["profile_ok"]
    )
    return report


def rebuild(session: Session, tbl: str, bands: int | None, fingerprints: bool,
            profile: str | None) -> dict[str, Any]:
    """``nearsim_rebuild``: repair the buckets, remake the objects, change layout or profile."""
    enabled = lookup(session, tbl)
    new_profile = named_profile(
        session, enabled.registration.profile if profile is None else profile).name
    with as_owner(session, enabled.table):
        return _repair(session, enabled, bands, fingerprints, new_profile)


def _repair(session: Session, enabled: Enabled, bands: int | None, fingerprints: bool,
            profile: str) -> dict[str, Any]:
    documents, reg = enabled.table, enabled.registration
    session.execute(f"LOCK TABLE {documents.qualified} IN SHARE ROW EXCLUSIVE MODE")
    # Another profile means other fingerprints for every document.
    fingerprints = fingerprints or profile != reg.profile
    if not fingerprints:
        check_table_profile(session, documents.qualified, reg.profile)
    # The functions and triggers are made again below from this version's
    # templates, with the new layout and profile; the old ones would check
    # the new fingerprints against the old profile.
    ddl.drop_functions_and_triggers(session, enabled)
    key = session.ident(documents.key_column)
    text, fp = session.ident(reg.text_column), session.ident(reg.hash_column)
    bucket = enabled.qualify(session, reg.bucket_table)
    recomputed = 0
    if fingerprints:
        # The triggers may be off (that may be why this runs), so the
        # buckets are resynchronised below rather than left to them.
        recomputed = int(session.one(
            f"WITH changed AS (UPDATE {documents.qualified} d SET {fp} = fresh.si"
            f" FROM (SELECT {key} AS key, {simhash_sql(session, text, profile)} AS si"
            f" FROM {documents.qualified}) fresh"
            f" WHERE d.{key} = fresh.key AND d.{fp} IS DISTINCT FROM fresh.si RETURNING 1)"
            " SELECT count(*) AS n FROM changed")["n"])
        session.progress("recomputed fingerprints of", recomputed, recomputed)
    removed = int(session.one(
        f"WITH gone AS (DELETE FROM {bucket} b WHERE NOT EXISTS (SELECT FROM"
        f" {documents.qualified} d WHERE d.{key} = b.key AND d.{fp} = b.si) RETURNING 1)"
        " SELECT count(*) AS n FROM gone")["n"])
    added = int(session.one(
        f"WITH came AS (INSERT INTO {bucket} AS b (key, si) SELECT d.{key}, d.{fp}"
        f" FROM {documents.qualified} d WHERE d.{fp} IS NOT NULL AND NOT EXISTS (SELECT FROM"
        f" {bucket} x WHERE x.key = d.{key} AND x.si = d.{fp})"
        " ON CONFLICT (key) DO UPDATE SET si = EXCLUDED.si RETURNING 1)"
        " SELECT count(*) AS n FROM came")["n"])
    new_bands = _bands(session, reg.bands if bands is None else bands)
    if new_bands != reg.bands or len(band_indexes(session, enabled)) != reg.bands:
        for index in band_indexes(session, enabled):
            session.execute(f"DROP INDEX {index}")
        ddl.create_band_indexes(
            session, Enabled(documents, reg.changed(bands=new_bands)))
    enabled = Enabled(documents, reg.changed(bands=new_bands, profile=profile))
    ddl.create_functions(session, enabled)
    ddl.create_triggers(session, enabled)
    session.execute(
        f"UPDATE {session.registry} SET bands = {new_bands},"
        f" profile = {session.literal(profile)} WHERE tbl = {documents.oid}::oid"
    )
    session.execute(f"ANALYZE {bucket}")
    return {"recomputed": recomputed, "removed": removed, "added": added, "bands": new_bands}
