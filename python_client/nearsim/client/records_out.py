"""Records written to a file as they come: JSON Lines, CSV or Parquet.

``nearsim dedup`` streams the survivors (and the removed -> kept mapping)
through an :class:`OutputFile`: one batch of rows at a time, so that a
table of any size is never held in memory.  The file is written under a
temporary name next to its place and renamed there when it is complete:
an interrupted or failed run leaves no half-written file behind.

The columns are known before the first row (:class:`OutColumn`): CSV
needs its header and Parquet its schema.  Values are as psycopg gives
them (and the loader's kept fields as JSON gives them); how each kind
is written:

==========  ======================  ==================  =======================
kind        JSON Lines              CSV                 Parquet
==========  ======================  ==================  =======================
string      string                  as it is            string
integer     number                  digits              int64
float       number                  repr                float64 (numeric too)
boolean     true/false              true/false          bool
date        "2024-05-01"            2024-05-01          date32
timestamp   ISO 8601 string         ISO 8601            timestamp[us] (UTC if tz)
binary      "\\x0a0b" (as psql)     \\x0a0b             binary
json        as JSON                 JSON text           string of JSON text
==========  ======================  ==================  =======================

A string value in a ``json`` column is written as the string itself in
CSV and Parquet; objects, arrays and other values as their JSON text.  A
column of another type (arrays, uuid, intervals...) is written as the text
PostgreSQL prints for it.
Parquet needs pyarrow (``pip install 'nearsim[spark]'``).
"""

from __future__ import annotations

import csv
import datetime
import decimal
import json
import math
import os
import tempfile
import uuid
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import IO, Any, Literal, cast

__all__ = ["FORMATS", "OutColumn", "OutputError", "OutputFile", "check_writable", "format_of"]

FORMATS = ("jsonl", "parquet", "csv")
Kind = Literal["string", "integer", "float", "boolean", "date", "timestamp", "timestamptz",
               "binary", "json"]  # fmt: skip
_SUFFIXES = {".jsonl": "jsonl", ".ndjson": "jsonl", ".json": "jsonl", ".parquet": "parquet",
             ".pq": "parquet", ".csv": "csv"}  # fmt: skip


class OutputError(ValueError):
    """An output that cannot be written: one line naming it."""


@dataclass(frozen=True)
class OutColumn:
    name: str
    kind: Kind


def format_of(path: str, given: str | None = None) -> str:
    """The format ``given``, else the one the path's suffix names."""
    if given is not None:
        if given not in FORMATS:
            raise OutputError(f"unknown output format {given!r}: use one of {', '.join(FORMATS)}")
        return given
    suffix = os.path.splitext(path)[1].lower()
    found = _SUFFIXES.get(suffix)
    if found is None:
        raise OutputError(f"cannot tell the format of {path} from its name: end it in .jsonl,"
                          " .parquet or .csv, or give the format (--format)")  # fmt: skip
    return found


def check_writable(path: str, format: str, overwrite: bool = False) -> None:
    """OutputError, in one line naming ``path``, unless it can be written (before any work)."""
    directory = os.path.dirname(os.path.abspath(path))
    if os.path.isdir(path):
        raise OutputError(f"{path} is a directory")
    if os.path.exists(path) and not overwrite:
        raise OutputError(f"{path} exists: remove it, or overwrite it (--overwrite)")
    if not os.path.isdir(directory):
        raise OutputError(f"cannot write {path}: directory {directory} does not exist")
    if not os.access(directory, os.W_OK):
        raise OutputError(f"cannot write {path}: no permission to write in {directory}")
    if format == "parquet":
        try:
            import pyarrow  # noqa: F401  (optional: nearsim[spark])
        except ImportError as error:
            raise OutputError(f"writing Parquet ({path}) needs pyarrow: pip install"
                              " 'nearsim[spark]'") from error  # fmt: skip


def _json_value(value: Any) -> Any:
    """``value`` as json.dumps writes it (the types psycopg gives that JSON has not)."""
    if isinstance(value, decimal.Decimal):
        if not value.is_finite():
            return str(value)
        return int(value) if value == value.to_integral_value() else float(value)
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    if isinstance(value, (datetime.datetime, datetime.date, datetime.time)):
        return value.isoformat()
    if isinstance(value, (datetime.timedelta, uuid.UUID)):
        return str(value)
    if isinstance(value, (bytes, bytearray, memoryview)):
        return "\\x" + bytes(value).hex()
    raise TypeError(f"cannot write a {type(value).__name__} as JSON")


def _dumps(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, default=_json_value, allow_nan=False)


def _text(value: Any, kind: Kind) -> str:
    """A value as a CSV field (NULL is the empty field)."""
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    if kind == "json" or isinstance(value, (dict, list)):
        return _dumps(value)
    converted = _json_value(value) if not isinstance(value, (int, float)) else value
    return converted if isinstance(converted, str) else str(converted)


class OutputFile:
    """A file being written: :meth:`write` batches of rows, then :meth:`close`.

    ``rows`` are mappings from column name to value; a missing column is NULL
    (JSON Lines writes the mapping as it is, in its order).  Used as a
    context manager, the file is renamed into place only if no error came.
    """

    def __init__(self, path: str, columns: Sequence[OutColumn], format: str,
                 overwrite: bool = False) -> None:  # fmt: skip
        self.path = path
        self.columns = list(columns)
        self.format = format
        check_writable(path, format, overwrite)
        directory = os.path.dirname(os.path.abspath(path))
        self._parquet: Any = None
        self._schema: Any = None
        try:
            handle, self._temporary = tempfile.mkstemp(
                prefix=f".{os.path.basename(path)}.", suffix=".partial", dir=directory)
        except OSError as error:
            raise OutputError(f"cannot write {path}: {error.strerror or error}") from error
        self._file: IO[Any] = (
            os.fdopen(handle, "wb") if format == "parquet"
            else os.fdopen(handle, "w", encoding="utf-8", newline=""))
        self._csv: Any = None
        if format == "csv":
            self._csv = csv.writer(cast(IO[str], self._file))
            self._csv.writerow([column.name for column in self.columns])
        elif format == "parquet":
            import pyarrow.parquet as parquet

            self._schema = _arrow_schema(self.columns)
            self._parquet = parquet.ParquetWriter(self._file, self._schema)
        self.rows = 0

    def write(self, rows: Iterable[Mapping[str, Any]]) -> None:
        batch = list(rows)
        self.rows += len(batch)
        if self.format == "jsonl":
            self._file.write("".join(_dumps(row) + "\n" for row in batch))
        elif self.format == "csv":
            self._csv.writerows([_text(row.get(column.name), column.kind)
                                 for column in self.columns] for row in batch)  # fmt: skip
        elif batch:
            import pyarrow as pa

            arrays = {column.name: [_arrow_value(row.get(column.name), column.kind)
                                    for row in batch] for column in self.columns}  # fmt: skip
            self._parquet.write_table(pa.Table.from_pydict(arrays, schema=self._schema))

    def close(self) -> None:
        """Finish the file and put it in its place."""
        if self._parquet is not None:
            self._parquet.close()
        self._file.close()
        os.replace(self._temporary, self.path)

    def abandon(self) -> None:
        """Remove what was written."""
        try:
            self._file.close()
        finally:
            try:
                os.unlink(self._temporary)
            except FileNotFoundError:
                pass

    def __enter__(self) -> OutputFile:
        return self

    def __exit__(self, kind: type[BaseException] | None, *rest: object) -> None:
        if kind is None:
            self.close()
        else:
            self.abandon()


def _arrow_schema(columns: Sequence[OutColumn]) -> Any:
    import pyarrow as pa

    types = {"string": pa.string(), "integer": pa.int64(), "float": pa.float64(),
             "boolean": pa.bool_(), "date": pa.date32(), "timestamp": pa.timestamp("us"),
             "timestamptz": pa.timestamp("us", tz="UTC"), "binary": pa.binary(),
             "json": pa.string()}  # fmt: skip
    return pa.schema([pa.field(column.name, types[column.kind]) for column in columns])


def _arrow_value(value: Any, kind: Kind) -> Any:
    if value is None:
        return None
    if kind in ("string", "json"):
        return value if isinstance(value, str) else _text(value, "json")
    if kind == "float" and isinstance(value, decimal.Decimal):
        return float(value)
    if kind == "binary" and isinstance(value, memoryview):
        return bytes(value)
    return value
