"""Enabling, disabling, checking and repairing tables: ``nearsim_enable`` and company.

They run with the caller's rights; what they create belongs to the table's
owner, and the work on the table's rows is done as its owner.
"""

from __future__ import annotations

from typing import Any

from ..core.bands import BandsError, band_start, check_bands, default_bands
from ..core.registry import Registration, object_names, typed_function_names
from . import bucket_tables, ddl
from .catalog import (
    MAX_IDENTIFIER,
    TEXT_TYPES,
    Enabled,
    Table,
    as_owner,
    check_table_profile,
    column_type,
    computable,
    is_registered,
    lookup,
    named_profile,
    rotation_indexes,
    simhash_sql,
    table,
)
from .database import Session, placeholders


def _bands(session: Session, bands: int) -> int:
    try:
        return check_bands(bands)
    except BandsError as error:
        session.fail(str(error))


def enable(session: Session, tbl: str, text_column: str, hash_column: str, bands: int | None,
           prefix: str | None, batch_size: int, profile: str) -> None:
    """``nearsim_enable``: fingerprint, rotation indexes, triggers, search functions."""
    if text_column is None or hash_column is None or batch_size is None:
        session.fail("text_column, hash_column and batch_size must not be NULL",
                     sqlstate="22004")
    profile = named_profile(session, profile).name
    documents = table(session, tbl)
    if documents.persistence == "t":
        session.fail(f"{documents.qualified} is a temporary table",
                     hint="nearsim records enabled tables for every session; enable an ordinary"
                     " or an unlogged table.", sqlstate="0A000")
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

    # The generated functions' bodies are quoted as $nearsim$ ... $nearsim$.
    quoted_in_bodies = (documents.qualified, documents.key_column, text_column, hash_column)
    if any("$nearsim$" in name for name in quoted_in_bodies):
        session.fail(f"table {documents.qualified} has a name with $nearsim$ in it",
                     hint="nearsim quotes the bodies of the functions it makes with"
                     " $nearsim$: rename the table or column.", sqlstate="42602")
    names = object_names(documents.name if prefix is None else prefix)
    every_name = [*names.values(), *typed_function_names(names["similar_function"]).values()]
    for name in every_name:
        if len(name.encode()) > MAX_IDENTIFIER:
            session.fail(f"name {session.ident(name)} is longer than {MAX_IDENTIFIER} bytes",
                         hint="Pass a shorter prefix => 'name'.", sqlstate="42622")
    clash = session.execute(
        "SELECT p.proname AS name FROM pg_catalog.pg_proc p"
        " WHERE p.pronamespace = (SELECT n.oid FROM pg_catalog.pg_namespace n"
        " WHERE n.nspname = $1::pg_catalog.name)"
        f" AND p.proname IN ({placeholders(len(every_name), 'pg_catalog.name', first=2)})",
        documents.schema, *every_name
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
    session.run(f"LOCK TABLE {documents.qualified} IN SHARE ROW EXCLUSIVE MODE")
    text, fp = session.ident(text_column), session.ident(hash_column)
    if hash_type is None:
        session.run(f"ALTER TABLE {documents.qualified} ADD COLUMN {fp} pg_catalog.int8")
    else:
        _check_stored_fingerprints(session, documents, text, fp, profile)

    rows = int(session.row(f"SELECT pg_catalog.count(*) AS n FROM ONLY {documents.qualified}")["n"])
    bands = _bands(session, default_bands(rows) if bands is None else bands)
    registration = Registration(documents.key_column, text_column, hash_column, bands, profile,
                                documents.schema, bucket_table=None, bucket_function=None,
                                **names)
    enabled = Enabled(documents, registration)
    _backfill(session, enabled, batch_size, rows)
    ddl.create_rotation_indexes(session, enabled)
    session.run(f"ANALYZE {documents.qualified}")
    ddl.create_functions(session, enabled)
    ddl.create_triggers(session, enabled)
    _register(session, enabled)


def _register(session: Session, enabled: Enabled) -> None:
    """The registry row of the table: through nearsim_register, which links its objects."""
    reg = enabled.registration
    arguments = ", ".join(f"${number}::pg_catalog.{kind}"
                          for number, kind in enumerate(_REGISTERED_TYPES, 1))
    session.execute(
        f"SELECT {session.ext}.nearsim_register("
        f"{enabled.table.oid}::pg_catalog.oid::pg_catalog.regclass, {arguments})",
        *(getattr(reg, column) for column in _REGISTERED))


_REGISTERED = ("key_column", "text_column", "hash_column", "bands", "profile", "bucket_table",
               "fingerprint_function", "bucket_function", "similar_function")
_REGISTERED_TYPES = ("name", "name", "name", "int4", "text", "name", "name", "name", "name")


def _check_stored_fingerprints(session: Session, documents: Table, text: str, fp: str,
                               profile: str) -> None:
    """Refuse a fingerprint column filled by another profile.

    A sample of stored values is recomputed; fingerprints of another profile
    (or not fingerprints at all) would make every search wrong.
    """
    key = session.ident(documents.key_column)
    row = session.row(
        "SELECT pg_catalog.count(*) AS checked, pg_catalog.count(*) FILTER (WHERE s.stored IS"
        " DISTINCT FROM s.fresh) AS differ, (pg_catalog.array_agg(s.key::pg_catalog.text)"
        " FILTER (WHERE s.stored IS DISTINCT FROM s.fresh))[1] AS first"
        f" FROM (SELECT {key} AS key, {fp} AS stored,"
        f" {simhash_sql(session, text, profile)} AS fresh FROM ONLY {documents.qualified}"
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
    todo = int(session.row(
        f"SELECT pg_catalog.count(*) AS n FROM ONLY {documents.qualified} WHERE {fp} IS NULL"
        f" AND {text} IS NOT NULL")["n"])
    done = 0
    last: str | None = None
    fresh = simhash_sql(session, f"d.{text}", reg.profile)
    while done < todo:
        after = "" if last is None else f" AND {key} OPERATOR(pg_catalog.>) {session.literal(last)}"
        result = session.row(
            f"SELECT pg_catalog.count(*) AS n,"
            f" (SELECT {key}::pg_catalog.text FROM done ORDER BY {key} DESC LIMIT 1) AS last"
            " FROM done",
            before=f"WITH batch AS (SELECT {key} FROM ONLY {documents.qualified}"
            f" WHERE {fp} IS NULL AND {text} IS NOT NULL{after}"
            f" ORDER BY {key} LIMIT {batch_size}),"
            f" done AS (UPDATE ONLY {documents.qualified} d SET {fp} = {fresh}"
            f" FROM batch WHERE d.{key} OPERATOR(pg_catalog.=) batch.{key} RETURNING d.{key})",
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
    """``nearsim_disable``: the table's objects and registry row go; documents stay.

    It works whatever happened to the table's key since it was enabled.
    """
    enabled = lookup(session, tbl, strict=False)
    with as_owner(session, enabled.table):
        ddl.drop_all(session, enabled)
    session.execute(f"SELECT {session.ext}.nearsim_unregister("
                    f"{enabled.table.oid}::pg_catalog.oid::pg_catalog.regclass)")


def breaks(session: Session, enabled: Enabled) -> list[str]:
    """What changed in the table since it was enabled that nearsim's objects cannot follow.

    The guard on ALTER TABLE refuses such changes; they happen only where
    it was bypassed (event triggers disabled).
    """
    documents, reg = enabled.table, enabled.registration
    found = []
    if not documents.key_type:
        found.append(f"the primary key is no longer column {session.ident(reg.key_column)}"
                     " of type integer, bigint, text or uuid")
    text_type = column_type(session, documents, reg.text_column)
    if text_type not in TEXT_TYPES:
        found.append(f"text column {session.ident(reg.text_column)} is "
                     + ("gone" if text_type is None else f"of type {text_type}"))
    hash_type = column_type(session, documents, reg.hash_column)
    if hash_type != "bigint":
        found.append(f"fingerprint column {session.ident(reg.hash_column)} is "
                     + ("gone" if hash_type is None else f"of type {hash_type}"))
    if reg.bucket_table is not None:
        found.extend(bucket_tables.breaks(session, enabled))
    # Moved with the guard bypassed: its functions cannot follow it, as they
    # must be in its schema.  (Renamed: nearsim_verify finds that its
    # functions name the table as it was, and nearsim_rebuild makes them again.)
    if reg.object_schema != documents.schema:
        found.append(f"table {documents.qualified} was moved from schema"
                     f" {session.ident(reg.object_schema)}, where its functions are")
    return found


def verify(session: Session, tbl: str, fingerprints: bool | None) -> dict[str, Any]:
    """``nearsim_verify``: index, trigger and profile health, and stale fingerprints."""
    enabled = lookup(session, tbl, strict=False)
    documents, reg = enabled.table, enabled.registration
    profile_ok = computable(reg.profile) is None
    broken = breaks(session, enabled)
    if broken:
        # Nothing can be counted; every break is named, with the way out.
        for problem in broken:
            session.warning(f"nearsim: table {documents.qualified}: {problem}",
                            hint=f"Run SELECT nearsim_disable({session.literal(tbl)}), then"
                            " nearsim_enable again.")
        return {"ok": False, "documents": None, "fingerprinted": None, "indexed": None,
                "missing": None, "extra": None, "wrong": None, "stale": None,
                "sample_keys": None, "triggers_ok": None, "band_indexes_ok": None,
                "profile_ok": profile_ok, "bands": reg.bands}
    with as_owner(session, documents):
        report = _drift(session, enabled)
        report["stale"] = None
        if profile_ok and fingerprints is not False:
            count, keys = _stale(session, enabled, everything=bool(fingerprints))
            report["stale"] = count
            if keys:
                report["sample_keys"] = sorted({*(report["sample_keys"] or []), *keys})[:10]
    triggers = session.execute(
        "SELECT t.tgname, t.tgenabled FROM pg_catalog.pg_trigger t"
        f" WHERE t.tgrelid = {documents.oid}::oid"
    )
    states = {r["tgname"]: r["tgenabled"] for r in triggers}
    report["triggers_ok"] = all(states.get(name) == mode
                                for name, mode in ddl.TRIGGER_MODES.items())
    # The functions nearsim made for the table are the owner's, who may
    # replace them: one that is not as nearsim made it is reported.
    for function in ddl.changed_functions(session, enabled):
        report["triggers_ok"] = False
        session.warning(f"nearsim: function {function} of table {documents.qualified} is not"
                        " the one nearsim made (replaced, altered or added since)",
                        hint=f"SELECT nearsim_rebuild({session.literal(tbl)}) makes it again.")
    report["bands"] = reg.bands
    report["band_indexes_ok"] = _rotation_indexes_ok(session, enabled, reg.bands)
    if not report["band_indexes_ok"]:
        for index in (i.name for i in rotation_indexes(session, enabled) if not i.valid):
            session.warning(f"nearsim: index {index} of table {documents.qualified} is not valid",
                            hint=f"SELECT nearsim_rebuild({session.literal(tbl)}) re-creates"
                            " the rotation indexes.")
    report["profile_ok"] = profile_ok
    # A sketch index left invalid (a failed CREATE INDEX CONCURRENTLY) is
    # passed over by the verified search, which then takes its candidates
    # within the calibrated radius: fewer answers, without a word.
    unusable = unusable_sketch_index(session, enabled)
    if unusable is not None:
        session.warning(f"nearsim: sketch index {unusable} of table {documents.qualified} is"
                        " not valid: verified searches take their candidates within the"
                        " calibrated radius instead",
                        hint=f"SELECT nearsim_rebuild({session.literal(tbl)}), or REINDEX INDEX"
                        f" {unusable}.")
    report["ok"] = (
        not (report["missing"] or report["extra"] or report["wrong"] or report["stale"])
        and report["triggers_ok"] and report["band_indexes_ok"] and report["profile_ok"]
        and unusable is None
    )
    return report


def unusable_sketch_index(session: Session, enabled: Enabled) -> str | None:
    """The table's sketch index when it is not valid (its name as SQL), else None."""
    row = session.one(
        "SELECT s.index::pg_catalog.text AS index, s.usable"
        f" FROM {session.ext}.nearsim_sketch_index({enabled.table.oid}::pg_catalog.oid"
        "::pg_catalog.regclass) AS s")
    return None if row["index"] is None or row["usable"] else str(row["index"])


def _drift(session: Session, enabled: Enabled) -> dict[str, Any]:
    """Documents, fingerprinted documents, and what the index holds of them.

    Each valid rotation index is read against the table
    (``nearsim_check_index``, as amcheck reads a btree with heapallindexed):
    ``missing`` is the most rows the snapshot sees that one index lacks or
    holds under another key, ``extra`` the entries of all of them that repeat
    another or name no row, ``wrong`` those under a key their row does not
    have, and ``indexed`` the fingerprinted rows every index holds.  A bucket
    table kept from before 0.4.0 is compared row by row (bucket_tables.drift).
    """
    documents, reg = enabled.table, enabled.registration
    key, fp = session.ident(documents.key_column), session.ident(reg.hash_column)
    if reg.bucket_table is not None:
        return bucket_tables.drift(session, enabled)
    report = session.row(
        f"SELECT pg_catalog.count({key}) AS documents, pg_catalog.count({fp}) AS fingerprinted"
        f" FROM ONLY {documents.qualified}")
    checks = index_checks(session, enabled)
    unindexed = int(report["documents"]) - int(report["fingerprinted"])
    missing = max((c["missing"] + c["wrong"] for c in checks.values()), default=0)
    samples = sorted({tid for c in checks.values() for tid in c["sample"]})
    report.update(
        indexed=min((c["rows"] - c["missing"] - unindexed for c in checks.values()),
                    default=report["fingerprinted"]),
        missing=missing,
        extra=sum(c["duplicated"] + c["dangling"] for c in checks.values()),
        wrong=sum(c["wrong"] for c in checks.values()),
        sample_keys=_keys_at(session, enabled, samples) if samples else None)
    for index, check in checks.items():
        if check["missing"] or check["duplicated"] or check["wrong"] or check["dangling"]:
            session.warning(
                f"nearsim: rotation index {index} of table {documents.qualified} disagrees"
                f" with the table: {check['missing']} rows missing, {check['wrong']} entries"
                f" under another key, {check['duplicated']} repeated, {check['dangling']}"
                " naming no row",
                hint=f"SELECT nearsim_rebuild({session.literal(documents.qualified)})"
                " rebuilds it.")
    return report


def index_checks(session: Session, enabled: Enabled) -> dict[str, dict[str, Any]]:
    """``nearsim_check_index`` of each valid rotation index of the table, by index name."""
    checks = {}
    for index in rotation_indexes(session, enabled):
        if not index.valid:
            continue
        row = session.one(
            "SELECT c.entries, c.rows, c.missing, c.duplicated, c.wrong, c.dangling,"
            " c.sample::pg_catalog.text[] AS sample"
            f" FROM {session.ext}.nearsim_check_index($1::pg_catalog.regclass) AS c", index.name)
        checks[index.name] = {name: (list(value) if name == "sample" else int(value))
                              for name, value in row.items()}
    return checks


def _keys_at(session: Session, enabled: Enabled, tids: list[str]) -> list[str]:
    """The keys of the rows at these tuple ids (those the caller sees), in key order."""
    key = session.ident(enabled.table.key_column)
    tid_list = ", ".join(f"{session.literal(tid)}::pg_catalog.tid" for tid in tids)
    rows = session.row(
        f"SELECT pg_catalog.array_agg(d.{key}::pg_catalog.text ORDER BY d.{key}) AS keys"
        f" FROM ONLY {enabled.table.qualified} AS d"
        f" WHERE d.ctid OPERATOR(pg_catalog.=) ANY (ARRAY[{tid_list}])")
    return list(rows["keys"] or [])[:10]


def _rotation_indexes_ok(session: Session, enabled: Enabled, bands: int) -> bool:
    """Whether the table has exactly the valid rotation indexes of ``bands`` bands.

    A table enabled before 0.4.0 has its index on a bucket table instead:
    nearsim_rebuild moves it onto the table.  Rotation indexes are
    nearsim_btree indexes; plain btrees also serve searches, but take new
    rows in random key order, so nearsim_rebuild replaces them.
    """
    indexes = rotation_indexes(session, enabled)
    if enabled.registration.bucket_table is not None:
        return False
    wanted = sorted(band_start(bands, band) for band in range(bands))
    return (sorted(i.shift for i in indexes) == wanted
            and all(i.valid and i.access_method == "nearsim_btree" for i in indexes))


SAMPLED_ROWS = 1000
"""Rows whose fingerprints the default nearsim_verify and nearsim_rebuild recompute."""


def _stale(session: Session, enabled: Enabled, everything: bool) -> tuple[int, list[str]]:
    """Stored fingerprints that are not those of the text, and up to ten keys.

    They were written while the triggers were off.  ``everything`` reads
    every row; otherwise pages holding about SAMPLED_ROWS rows (every row of
    a smaller table).  Runs as the table's owner.
    """
    documents, reg = enabled.table, enabled.registration
    key = session.ident(documents.key_column)
    text, fp = session.ident(reg.text_column), session.ident(reg.hash_column)
    sampled = "" if everything else _sample(session, documents)
    stale = session.row(
        "SELECT pg_catalog.count(*) AS n, (pg_catalog.array_agg(s.key::pg_catalog.text"
        " ORDER BY s.key))[1:10] AS keys"
        f" FROM (SELECT d.{key} AS key FROM ONLY {documents.qualified} d{sampled}"
        f" WHERE d.{fp} IS DISTINCT FROM {simhash_sql(session, f'd.{text}', reg.profile)}) s")
    return int(stale["n"]), list(stale["keys"] or [])


def _sample(session: Session, documents: Table) -> str:
    """A TABLESAMPLE clause reading about SAMPLED_ROWS rows; none for a small table."""
    estimate = session.one(
        f"SELECT c.reltuples FROM pg_catalog.pg_class c WHERE c.oid = {documents.oid}")
    rows = float(estimate["reltuples"])
    if rows <= SAMPLED_ROWS:
        return ""
    return f" TABLESAMPLE SYSTEM ({100.0 * SAMPLED_ROWS / rows:.6f})"


def rebuild(session: Session, tbl: str, bands: int | None, fingerprints: bool | None,
            profile: str | None) -> dict[str, Any]:
    """``nearsim_rebuild``: repair the indexes, remake the objects, change layout or profile."""
    enabled = lookup(session, tbl)
    new_profile = named_profile(
        session, enabled.registration.profile if profile is None else profile).name
    with as_owner(session, enabled.table):
        return _repair(session, enabled, bands, fingerprints, new_profile)


def _repair(session: Session, enabled: Enabled, bands: int | None, fingerprints: bool | None,
            profile: str) -> dict[str, Any]:
    documents, reg = enabled.table, enabled.registration
    session.run(f"LOCK TABLE {documents.qualified} IN SHARE ROW EXCLUSIVE MODE")
    if profile != reg.profile:
        fingerprints = True  # another profile: other fingerprints for every document
    if not fingerprints:
        check_table_profile(session, documents.qualified, reg.profile)
    if fingerprints is None:
        # By default, every fingerprint is recomputed when a sample finds
        # stale ones (texts changed while the triggers were off).
        fingerprints = _stale(session, enabled, everything=False)[0] > 0
    # The functions and triggers are made again below from this version's
    # templates, with the new layout and profile; the old ones would check
    # the new fingerprints against the old profile.
    ddl.drop_functions_and_triggers(session, enabled)
    key = session.ident(documents.key_column)
    text, fp = session.ident(reg.text_column), session.ident(reg.hash_column)
    recomputed = 0
    if fingerprints:
        recomputed = int(session.row(
            "SELECT pg_catalog.count(*) AS n FROM changed",
            before=f"WITH changed AS (UPDATE ONLY {documents.qualified} d SET {fp} = fresh.si"
            f" FROM (SELECT {key} AS key, {simhash_sql(session, text, profile)} AS si"
            f" FROM ONLY {documents.qualified}) fresh"
            f" WHERE d.{key} OPERATOR(pg_catalog.=) fresh.key"
            f" AND d.{fp} IS DISTINCT FROM fresh.si RETURNING 1)")["n"])
        session.progress("recomputed fingerprints of", recomputed, recomputed)
    # A bucket table kept from before 0.4.0 gives way to rotation indexes on
    # the table; so do indexes of another layout or left invalid.
    removed = 0
    if reg.bucket_table is not None:
        removed = bucket_tables.rows(session, enabled)
        bucket_tables.drop(session, enabled)
    new_bands = _bands(session, reg.bands if bands is None else bands)
    relaid = Enabled(documents, reg.changed(bands=new_bands, profile=profile,
                                            bucket_table=None, bucket_function=None))
    added = 0
    if new_bands != reg.bands or not _rotation_indexes_ok(session, relaid, new_bands):
        ddl.drop_rotation_indexes(session, relaid)
        ddl.create_rotation_indexes(session, relaid)
        added = int(session.row(
            f"SELECT pg_catalog.count({fp}) AS n FROM ONLY {documents.qualified}")["n"])
    else:
        # An index that disagrees with the table (what nearsim_verify
        # reports) is built again from the table.
        broken = [index for index, check in index_checks(session, relaid).items()
                  if check["missing"] or check["duplicated"] or check["wrong"]
                  or check["dangling"]]
        for index in broken:
            session.run(f"REINDEX INDEX {index}")
        if broken:
            added = int(session.row(
                f"SELECT pg_catalog.count({fp}) AS n FROM ONLY {documents.qualified}")["n"])
    unusable = unusable_sketch_index(session, enabled)
    if unusable is not None:
        session.run(f"REINDEX INDEX {unusable}")
    ddl.create_functions(session, relaid)
    ddl.create_triggers(session, relaid)
    _register(session, relaid)
    session.run(f"ANALYZE {documents.qualified}")
    return {"recomputed": recomputed, "removed": removed, "added": added, "bands": new_bands}
