"""What a table enabled before 0.4.0 keeps until ``nearsim_rebuild``: its bucket table.

Before 0.4.0 an enabled table's fingerprints were indexed in a separate
table, ``<prefix>_nearsim`` (key, fingerprint, one column and index per
band), written by triggers on the table.  After ``ALTER EXTENSION nearsim
UPDATE`` such a table keeps working as it was: its searches compare the
bucket table's fingerprints one by one (the release's band layout is not
read by the rotation search), ``nearsim_verify`` compares it with the table
row by row and reports it as a layout to rebuild, and ``nearsim_rebuild``
drops it for rotation indexes on the table.  Everything that reads or drops
a bucket table is here; elsewhere the code only asks whether a table has
one (``Registration.bucket_table``).
"""

from __future__ import annotations

from typing import Any

from .catalog import Enabled
from .database import Session

TRIGGERS = ("nearsim_insert", "nearsim_update", "nearsim_delete", "nearsim_truncate",
            "nearsim_replica")
"""The triggers that kept a bucket table current."""


def within(session: Session, enabled: Enabled, radius: int) -> str:
    """SQL: row ``d``'s fingerprint is within ``radius`` of ``q.si`` by its bucket row."""
    reg, ext = enabled.registration, session.ext
    assert reg.bucket_table is not None
    bucket = enabled.qualify(session, reg.bucket_table)
    key = session.ident(enabled.table.key_column)
    return (f"d.{key} OPERATOR(pg_catalog.=) ANY (ARRAY(SELECT b.key FROM {bucket} AS b"
            f" WHERE {ext}.hamming(b.si, q.si) OPERATOR(pg_catalog.<=)"
            f" {int(radius)}::pg_catalog.int4))")


def breaks(session: Session, enabled: Enabled) -> list[str]:
    """What no longer fits between the table and its bucket table (see maintenance.breaks)."""
    reg = enabled.registration
    assert reg.bucket_table is not None
    bucket = enabled.qualify(session, reg.bucket_table)
    rows = session.execute(
        "SELECT pg_catalog.format_type(a.atttypid, NULL) AS type"
        " FROM pg_catalog.pg_attribute a"
        " WHERE a.attrelid = pg_catalog.to_regclass($1::pg_catalog.text)"
        " AND a.attname = 'key'", bucket)
    key_type = enabled.table.key_type
    if not rows:
        return [f"bucket table {bucket} is gone"]
    if key_type and rows[0]["type"] != key_type.split(" COLLATE ")[0]:
        return [f"the key is of type {key_type}, its buckets' of {rows[0]['type']}"]
    return []


def drift(session: Session, enabled: Enabled) -> dict[str, Any]:
    """nearsim_verify's counts for a table with a bucket table: it is compared
    with the table row by row (``indexed``, ``missing``, ``extra``, ``wrong``)."""
    reg, documents = enabled.registration, enabled.table
    assert reg.bucket_table is not None
    bucket = enabled.qualify(session, reg.bucket_table)
    key, fp = session.ident(documents.key_column), session.ident(reg.hash_column)
    return session.row(
        "SELECT pg_catalog.count(d.key) AS documents, pg_catalog.count(d.si) AS fingerprinted,"
        " pg_catalog.count(b.key) AS indexed,"
        " pg_catalog.count(*) FILTER (WHERE d.si IS NOT NULL AND b.key IS NULL) AS missing,"
        " pg_catalog.count(*) FILTER (WHERE b.key IS NOT NULL AND d.si IS NULL) AS extra,"
        " pg_catalog.count(*) FILTER (WHERE b.si <> d.si) AS wrong,"
        " (pg_catalog.array_agg(COALESCE(d.key, b.key)::pg_catalog.text"
        " ORDER BY COALESCE(d.key, b.key))"
        "  FILTER (WHERE b.si IS DISTINCT FROM d.si))[1:10] AS sample_keys"
        f" FROM (SELECT {key} AS key, {fp} AS si FROM ONLY {documents.qualified}) d"
        f" FULL JOIN {bucket} b ON b.key OPERATOR(pg_catalog.=) d.key"
    )


def rows(session: Session, enabled: Enabled) -> int:
    """The rows of the table's bucket table (nearsim_rebuild's ``removed``)."""
    assert enabled.registration.bucket_table is not None
    bucket = enabled.qualify(session, enabled.registration.bucket_table)
    return int(session.row(f"SELECT pg_catalog.count(*) AS n FROM {bucket}")["n"])


def drop(session: Session, enabled: Enabled) -> None:
    """Drop the table's bucket table, if it has one."""
    if enabled.registration.bucket_table is not None:
        bucket = enabled.qualify(session, enabled.registration.bucket_table)
        session.run(f"DROP TABLE IF EXISTS {bucket}")
