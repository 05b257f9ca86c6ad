"""A record's other fields, kept in the loader's own table: the ``fields jsonb`` column.

A record (JSON Lines, CSV, Parquet) loaded into nearsim-load's own table
keeps every field but its text in ``fields``, as a JSON object: its id as
it was written (``42``, not the key's text ``'42'``), and the others
(``url``, ``fetched``...) with their JSON types.  CSV fields are strings;
Parquet's dates, times and decimals become the strings PostgreSQL reads
for them (a decimal that is a whole number, a number).  So ``nearsim
dedup`` writes a record back as it was read: the kept fields and the text.

A file (not a record) keeps nothing: its ``fields`` is NULL.

Tables made before the column existed get it on their first load
(:meth:`~nearsim.client.documents.DocumentTable.add_fields_column`).
"""

from __future__ import annotations

import datetime
import decimal
import json
import math
import uuid
from typing import Any

from .output import storable

__all__ = ["NulInField", "kept_json"]


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
        return storable(value)
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
            kept[storable(text)] = _plain(item, name)
        return kept
    if isinstance(value, (list, tuple)):
        return [_plain(item, name) for item in value]
    return storable(str(value))


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
        kept[storable(text)] = _plain(value, text)
    return json.dumps(kept, ensure_ascii=False) if kept else None
