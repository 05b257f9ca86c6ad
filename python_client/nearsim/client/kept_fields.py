"""A record's other fields, kept in the loader's own table: the ``fields jsonb`` column.

A record (JSON Lines, CSV, Parquet) loaded into nearsim-load's own table
keeps every field but its text in ``fields``, as a JSON object: its id as
it was written (``42``, not the key's text ``'42'``), and the others
(``url``, ``fetched``...) with their JSON types.  CSV fields are strings;
Parquet's dates, times and decimals become the strings PostgreSQL reads
for them (a decimal that is a whole number, a number).  So ``nearsim
dedup`` writes a record back as it was read: the kept fields and the text.

A file (not a record) keeps nothing: its ``fields`` is NULL.

Tables made before the column existed get it on their first load, from a
role with the privileges of the table's owner (``ALTER TABLE ... ADD
COLUMN``, which rewrites nothing); a load by another role keeps no fields
and says so once, on the first record whose fields it drops.
"""

from __future__ import annotations

import datetime
import decimal
import json
import math
import uuid
from typing import TYPE_CHECKING, Any

import psycopg
from psycopg import sql

# A module, not its names: sources reads records with kept_json.
from . import sources

if TYPE_CHECKING:
    from .documents import DocumentTable

__all__ = ["NulInField", "add_fields_column", "kept_json"]


class NulInField(ValueError):
    """A field (name or value) with a NUL character, which jsonb cannot hold."""

    def __init__(self, name: str) -> None:
        super().__init__(name)
        self.name = name


def _plain(value: Any, name: str) -> Any:
    """``value`` as JSON can hold it, and jsonb after it."""
    if value is None or isinstance(value, (bool, int)):
        return value
    if isinstance(value, str):
        if "\x00" in value:
            raise NulInField(name)
        return sources.storable(value)
    if isinstance(value, float):
        return value if math.isfinite(value) else str(value)  # jsonb holds no NaN
    if isinstance(value, decimal.Decimal):
        if not value.is_finite():
            return str(value)
        return int(value) if value == value.to_integral_value() else float(value)
    if isinstance(value, (datetime.date, datetime.time, datetime.timedelta, uuid.UUID)):
        return str(value)  # the form PostgreSQL reads, as for --column
    if isinstance(value, (bytes, bytearray, memoryview)):
        return "\\x" + bytes(value).hex()  # as PostgreSQL prints a bytea
    if isinstance(value, dict):
        kept = {}
        for key, item in value.items():
            text = str(key)
            if "\x00" in text:
                raise NulInField(name)
            kept[sources.storable(text)] = _plain(item, name)
        return kept
    if isinstance(value, (list, tuple)):
        return [_plain(item, name) for item in value]
    return sources.storable(str(value))


def kept_json(record: dict[str, Any], text_field: str) -> str | None:
    """The record's fields but the text, as JSON text for ``fields`` (None if it has none).

    Raises :class:`NulInField` naming a field with a NUL character.

    >>> kept_json({"id": 7, "url": "http://a", "text": "..."}, "text")
    '{"id": 7, "url": "http://a"}'
    """
    kept = {}
    for name, value in record.items():
        if name == text_field:
            continue
        text = str(name)
        if "\x00" in text:
            raise NulInField(text)
        kept[sources.storable(text)] = _plain(value, text)
    return json.dumps(kept, ensure_ascii=False) if kept else None


FIELDS_COLUMN = "fields"  # documents.FIELDS_COLUMN (which imports sources, which imports this)


def has_fields_column(table: DocumentTable) -> bool:
    return table.columns().get(FIELDS_COLUMN) == "jsonb"


def add_fields_column(table: DocumentTable) -> str | None:
    """Give the loader's own ``table`` its ``fields`` column if it has none.

    None when the table has it (now); else why it cannot have it, as a
    warning to give when a record's fields are dropped: the role lacks the
    privileges of the table's owner, or another column has the name.
    """
    have = table.columns().get(FIELDS_COLUMN)
    if have == "jsonb":
        return None
    if have is not None:
        return (f"table {table} has a column {FIELDS_COLUMN} of type {have}, not jsonb: the"
                " records' other fields are not kept")  # fmt: skip
    row = table.conn.execute(
        "SELECT pg_catalog.pg_has_role(c.relowner, 'USAGE'),"
        " pg_catalog.pg_get_userbyid(c.relowner)"
        " FROM pg_catalog.pg_class c WHERE c.oid = %s::pg_catalog.regclass",
        [table.quoted]).fetchone()  # fmt: skip
    if row is None or not row[0]:
        owner = row[1] if row else "its owner"
        return (f"table {table} has no column {FIELDS_COLUMN} and only its owner ({owner}) can"
                f" add it: the records' other fields are not kept (ALTER TABLE {table} ADD"
                f" COLUMN {FIELDS_COLUMN} jsonb keeps them from the next load)")  # fmt: skip
    try:
        table.conn.execute(sql.SQL("ALTER TABLE {} ADD COLUMN IF NOT EXISTS {} jsonb").format(
            table.identifier, sql.Identifier(FIELDS_COLUMN)))
    except psycopg.Error as error:
        if not table.conn.autocommit:
            table.conn.rollback()
        reason = error.diag.message_primary or str(error).strip().splitlines()[0]
        return f"cannot add column {FIELDS_COLUMN} to table {table} ({reason}): the records'" \
               " other fields are not kept"
    return None
