"""What to load: files found under the given paths, and records of JSONL/CSV files.

:func:`iter_inputs` streams the inputs in a stable order (paths as given,
directories walked in sorted order), so a rerun meets them in the same order
and memory stays flat however many files there are.  Paths that cannot be
loaded come out as :class:`Failure` items among the inputs; the walk goes on.

Rules:

- A directory is walked recursively; symbolic links to directories are
  followed, a link back to an enclosing directory is reported as a loop and a
  directory reached twice is walked once.
- Names starting with ``.`` are skipped unless ``hidden`` is set.
- ``include``/``exclude`` globs apply to files found by walking, matched
  against the file name and the path below the walked directory; an
  excluded directory is not entered.  Files named explicitly are always read.
- A file's key is its absolute path (without resolving symbolic links); the
  same key is produced once.  A name that is not UTF-8 keeps its bytes,
  percent-encoded (:func:`storable`).
- ``*.jsonl``/``*.ndjson``, ``*.csv``/``*.tsv`` and ``*.parquet`` files
  hold one document per record (``records="auto"``), with the key in
  ``id_field`` (the source ``file:line`` -- ``file:row`` for Parquet -- when
  missing) and the text in ``text_field``; the values of ``fields`` come
  along for the table's other columns.  Parquet needs pyarrow (the
  ``spark`` extra installs it).
- E-mail files (``.eml``, ``.mbox``, ``.msg``, or no suffix and RFC 822
  headers) are their messages and attachments (:mod:`.mail`), parsed here
  while listing (their keys are known only once parsed) and given as
  records whose source is their key, the mail's headers their fields; an
  attachment's record carries its bytes, which the loader's workers read.
- A document's source is its file, or ``file:line`` for a record; the file it
  comes from (:func:`origin`) decides whether a stored key is its own.
- A :class:`BytesRead` given to :func:`iter_inputs` counts the bytes of record
  files as they are read (for a progress bar): when a record file is done it
  has counted all of its bytes, whatever its records were.
"""

from __future__ import annotations

import codecs
import csv
import datetime
import decimal
import errno
import json
import os
import re
import stat
import uuid
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from fnmatch import fnmatchcase
from typing import IO, Any, Literal, NamedTuple

from .charsets import file_encoding
from .extract import InputError, input_error
from .kept_fields import NulInField, kept_json
from .mail import Attachment, mail_documents, mail_kind
from .output import one_line, storable

RecordFormat = Literal["auto", "jsonl", "csv", "parquet", "none"]
JSONL_SUFFIXES = (".jsonl", ".ndjson")
CSV_SUFFIXES = (".csv", ".tsv")
PARQUET_SUFFIXES = (".parquet",)
PARQUET_BATCH_ROWS = 1024  # rows read from a Parquet file at a time


# Inputs are tuples: they go to worker processes by the thousand, and tuples
# pickle several times faster than dataclasses.


class FileInput(NamedTuple):
    """A document file: ``path`` to read, stored under ``key``; ``size`` when listed."""

    path: str
    key: str
    size: int = 0


class RecordInput(NamedTuple):
    """A document from a record of a JSONL or CSV file (``source`` is file:line).

    ``fields`` are the values of :attr:`SourceOptions.fields` as text, in
    that order (None where the record has no such field).
    """

    key: str
    source: str
    text: str
    fields: tuple[str | None, ...] = ()
    encoding: str = ""  # what its text was decoded from, where known (a message's part)
    attachment: Attachment | None = None  # an e-mail attachment to read for the text
    kept: str | None = None  # every field but the text, as JSON (kept_fields.kept_json)


_LINE = re.compile(r":[0-9]+\Z")


def origin(source: str) -> str:
    """The file a document comes from: its source without a record's ``:line``.

    A record file that is edited and loaded again keeps its origin when its
    lines move.  (A file whose own name ends in ``:123`` is compared the same
    way on both sides, so it still matches itself.)

    >>> origin("/data/a.jsonl:12"), origin("/data/b.txt")
    ('/data/a.jsonl', '/data/b.txt')
    """
    return _LINE.sub("", source)


class BytesRead:
    """Bytes of record files read so far, for a progress bar (files are counted
    by their size when they are listed, so only records need this)."""

    def __init__(self) -> None:
        self.total = 0


def file_key(path: str) -> str:
    """The key a document file is stored under: its absolute path, as text.

    Made absolute from the current directory and normalised (``./``, ``..``,
    doubled slashes) but not resolved through symbolic links: the path as
    the user named it.  The loader keys files by it, and ``nearsim report``
    looks files up by it.
    """
    return storable(os.path.abspath(path))


@dataclass(frozen=True, slots=True)
class Failure:
    """An input that was not loaded, and why (``reason``: see extract.REASONS)."""

    source: str
    reason: str
    message: str
    offset: int | None = None

    def __post_init__(self) -> None:
        # reports are printed and written as JSON: names must be storable
        object.__setattr__(self, "source", storable(self.source))
        object.__setattr__(self, "message", storable(self.message))


class Decoding(NamedTuple):
    """The encoding a record file was read in (``note``: valid UTF-8 read against
    the encoding asked); given only with :attr:`SourceOptions.decodings`."""

    source: str
    encoding: str
    note: str | None = None


Input = FileInput | RecordInput | Failure | Decoding


@dataclass(frozen=True)
class SourceOptions:
    include: tuple[str, ...] = ()
    exclude: tuple[str, ...] = ()
    hidden: bool = False
    records: RecordFormat = "auto"
    id_field: str = "id"
    text_field: str = "text"
    encoding: str = "utf-8"  # of CSV files; JSON Lines are UTF-8
    max_bytes: int = 64 * 1024 * 1024
    fields: tuple[str, ...] = ()  # record fields to bring along for other columns
    mail: bool = True  # read e-mail files as their messages and attachments (see .mail)
    decodings: bool = False  # tell the encoding of each CSV file read (a Decoding input)
    keep_fields: bool = True  # bring every field but the text along, as JSON (RecordInput.kept)


def iter_inputs(
    paths: Iterable[str], options: SourceOptions | None = None, stdin: IO[str] | None = None,
    read: BytesRead | None = None,
) -> Iterator[Input]:
    """The inputs under ``paths``; ``-`` reads more paths from ``stdin``, one per line.

    ``read`` counts the bytes of the record files read so far.
    """
    walker = _Walker(options or SourceOptions(), read or BytesRead())
    for path in paths:
        if path == "-":
            if stdin is None:
                raise ValueError("'-' needs stdin")
            for line in stdin:
                named = line.rstrip("\r\n")
                if named:
                    yield from walker.named(named)
        else:
            yield from walker.named(path)


class _Walker:
    def __init__(self, options: SourceOptions, read: BytesRead) -> None:
        self.options = options
        self.read = read
        self.keys: set[str] = set()  # files produced so far
        self.walked: set[tuple[int, int]] = set()  # directories walked so far

    def named(self, path: str) -> Iterator[Input]:
        """A path given by the user: a file, a directory or an error."""
        absolute = os.path.abspath(path)
        try:
            info = os.stat(absolute)
        except OSError as error:
            yield _failure(absolute, input_error(absolute, error))
            return
        if stat.S_ISDIR(info.st_mode):
            yield from self._directory(absolute, "", info, ())
        else:
            yield from self._file(absolute, info)

    def _file(self, path: str, info: os.stat_result) -> Iterator[Input]:
        if not stat.S_ISREG(info.st_mode):
            yield Failure(path, "not-a-file", "not a regular file (FIFO, socket or device)")
            return
        if path in self.keys:
            return
        self.keys.add(path)
        record_format = self._record_format(path)
        kind = mail_kind(path) if record_format == "none" and self.options.mail else None
        if kind is not None:
            yield from _mail(path, kind, self.options, self.read, info.st_size)
        elif record_format == "none":
            yield FileInput(path, file_key(path), info.st_size)  # path is absolute already
        else:
            yield from _records(path, record_format, self.options, self.read, info.st_size)

    def _record_format(self, path: str) -> RecordFormat:
        chosen = self.options.records
        if chosen != "auto":
            return chosen
        lower = path.lower()
        if lower.endswith(JSONL_SUFFIXES):
            return "jsonl"
        if lower.endswith(CSV_SUFFIXES):
            return "csv"
        if lower.endswith(PARQUET_SUFFIXES):
            return "parquet"
        return "none"

    def _directory(
        self, path: str, relative: str, info: os.stat_result, ancestors: tuple[tuple[int, int], ...]
    ) -> Iterator[Input]:
        identity = (info.st_dev, info.st_ino)
        if identity in ancestors:
            yield Failure(path, "symlink-loop", "a symbolic link to an enclosing directory")
            return
        if identity in self.walked:
            return
        self.walked.add(identity)
        try:
            with os.scandir(path) as listing:
                entries = sorted(listing, key=lambda entry: entry.name)
        except OSError as error:
            yield _failure(path, input_error(path, error))
            return
        for entry in entries:
            if entry.name.startswith(".") and not self.options.hidden:
                continue
            below = f"{relative}/{entry.name}" if relative else entry.name
            if self._matches(self.options.exclude, entry.name, below):
                continue
            try:
                entry_info = entry.stat(follow_symlinks=True)
            except OSError as error:
                yield _failure(entry.path, input_error(entry.path, error))
                continue
            if stat.S_ISDIR(entry_info.st_mode):
                yield from self._directory(entry.path, below, entry_info, (*ancestors, identity))
            elif not self.options.include or self._matches(self.options.include, entry.name,
                                                           below):  # fmt: skip
                yield from self._file(entry.path, entry_info)

    @staticmethod
    def _matches(globs: tuple[str, ...], name: str, below: str) -> bool:
        return any(fnmatchcase(name, glob) or fnmatchcase(below, glob) for glob in globs)


def _failure(source: str, error: InputError) -> Failure:
    return Failure(source, error.reason, error.message, error.offset)


# -- mail ---------------------------------------------------------------------------------


def _mail(
    path: str, kind: str, options: SourceOptions, read: BytesRead, size: int
) -> Iterator[Input]:
    """The messages and attachments of an e-mail file, as records whose source is
    their key (read here, while listing: their keys are only known once read)."""
    for document in mail_documents(path, file_key(path), kind, max_bytes=options.max_bytes,
                                   defer=True):  # attachments read by the loader's workers
        key = storable(document.key)
        if document.error is not None:
            yield _failure(key, document.error)
            continue
        values = tuple(_field_text(document.fields.get(name)) for name in options.fields)
        nul = next((name for name, value in zip(options.fields, values, strict=True)
                    if value is not None and "\x00" in value), None)  # fmt: skip
        if nul is not None:
            yield _nul_field(key, nul)
            continue
        kept = None
        if options.keep_fields:  # the headers (and an attachment's names), as a record's fields
            try:
                kept = kept_json(dict(document.fields), "")
            except NulInField as error:
                yield _nul_field(key, error.name)
                continue
        yield RecordInput(key, key, document.text, values, document.encoding,
                          document.attachment, kept)
    read.total += size


# -- records ------------------------------------------------------------------------------


def _records(
    path: str, record_format: RecordFormat, options: SourceOptions, read: BytesRead, size: int
) -> Iterator[Input]:
    start = read.total
    try:
        if record_format == "jsonl":
            yield from _jsonl_records(path, options, read)
        elif record_format == "parquet":
            yield from _parquet_records(path, options, read, size)
        else:
            yield from _csv_records(path, options, read)
    except OSError as error:
        if error.errno == errno.ENOENT:
            yield Failure(path, "vanished", "the file had gone when it was read")
        else:
            yield _failure(path, input_error(path, error))
    # The lines after a fatal error (or the file's size, if it had gone)
    # count as read: the file is done.
    read.total = max(read.total, start + size)


def _record(
    path: str, line: int, fields: Any, options: SourceOptions
) -> RecordInput | Failure:
    source = f"{path}:{line}"
    if not isinstance(fields, dict):
        return Failure(source, "invalid-record",
                       f"a record must be an object, not {type(fields).__name__}")
    text = fields.get(options.text_field)
    if text is None:
        return Failure(source, "invalid-record", f"no text field {options.text_field!r}"
                       f" (the fields are {', '.join(map(repr, list(fields)[:10]))})")
    if not isinstance(text, str):
        return Failure(source, "invalid-record",
                       f"field {options.text_field!r} is a {type(text).__name__}, not a string")
    key = fields.get(options.id_field)
    if key is None or key == "":
        key = source
    elif isinstance(key, (dict, list)):
        return Failure(source, "invalid-record", f"field {options.id_field!r} is not a scalar")
    key = str(key)
    if "\x00" in key:
        return _nul_field(source, options.id_field)
    kept = None
    if options.keep_fields:
        try:
            kept = kept_json(fields, options.text_field)
        except NulInField as error:
            return _nul_field(source, error.name)
    values: tuple[str | None, ...] = ()
    if options.fields:
        values = tuple(_field_text(fields.get(name)) for name in options.fields)
        for name, value in zip(options.fields, values, strict=True):
            if value is not None and "\x00" in value:
                return _nul_field(source, name)
    return RecordInput(storable(key), storable(source), text, values, kept=kept)


def _nul_field(source: str, name: str) -> Failure:
    return Failure(source, "nul-bytes",
                   f"field {name!r} contains a NUL character, which PostgreSQL text cannot hold")


def _field_text(value: Any) -> str | None:
    """A field's value as the text PostgreSQL reads for its column (cast from text).

    Numbers and booleans as JSON writes them; objects and arrays as JSON,
    for json and jsonb columns; null stays NULL.
    """
    if value is None or isinstance(value, str):
        return None if value is None else storable(value)
    if isinstance(value, (datetime.date, datetime.time, datetime.timedelta, decimal.Decimal,
                          uuid.UUID)):  # Parquet's types, in the form PostgreSQL reads
        return str(value)
    return storable(json.dumps(value, ensure_ascii=False))


def _jsonl_records(path: str, options: SourceOptions, read: BytesRead) -> Iterator[Input]:
    with open(path, "rb") as file:
        for number, raw in enumerate(file, 1):
            read.total += len(raw)
            source = f"{path}:{number}"
            try:
                line = raw.decode("utf-8-sig" if number == 1 else "utf-8")
            except UnicodeDecodeError as error:
                yield Failure(source, "invalid-encoding",
                              f"invalid UTF-8 at byte {error.start} of the line", error.start)
                continue
            if not line.strip():
                continue
            try:
                fields = json.loads(line)
            except json.JSONDecodeError as error:
                yield Failure(source, "invalid-record", f"not valid JSON: {error.msg} at "
                              f"column {error.colno}")  # fmt: skip
                continue
            yield _record(path, number, fields, options)


def _parquet_records(
    path: str, options: SourceOptions, read: BytesRead, size: int
) -> Iterator[Input]:
    """The rows of a Parquet file (such as Spark writes) as records, ``file:row`` their source.

    A file that is not Parquet, or that pyarrow cannot read, is one failure.
    """
    try:
        import pyarrow.parquet as parquet  # optional: nearsim[spark]
    except ImportError:
        yield Failure(path, "invalid-record", "reading Parquet needs pyarrow:"
                      " pip install 'nearsim[spark]'")  # fmt: skip
        return
    try:
        file = parquet.ParquetFile(path)
        rows = max(1, file.metadata.num_rows)
        number = 0
        for batch in file.iter_batches(batch_size=PARQUET_BATCH_ROWS):
            for fields in batch.to_pylist():
                number += 1
                yield _record(path, number, fields, options)
            read.total += size * batch.num_rows // rows
    except OSError as error:
        if error.errno is not None:
            raise  # the file itself (gone, unreadable): reported as for any file
        yield Failure(path, "invalid-record", f"not a readable Parquet file: {one_line(error)}")
    except ValueError as error:  # pyarrow's ArrowInvalid
        yield Failure(path, "invalid-record", f"not a readable Parquet file: {one_line(error)}")


class _UndecodableLine(Exception):
    def __init__(self, line: int, error: UnicodeDecodeError) -> None:
        super().__init__(str(error))
        self.line = line
        self.error = error


def _decoded_lines(file: IO[bytes], encoding: str, read: BytesRead) -> Iterator[str]:
    """The lines of a binary file as text; a decoding error names its line."""
    decoder = codecs.getincrementaldecoder(encoding)(errors="strict")
    for number, raw in enumerate(file, 1):
        read.total += len(raw)
        try:
            yield decoder.decode(raw)
        except UnicodeDecodeError as error:
            raise _UndecodableLine(number, error) from None


def _csv_records(path: str, options: SourceOptions, read: BytesRead) -> Iterator[Input]:
    dialect = "excel-tab" if path.lower().endswith(".tsv") else "excel"
    # A field may be a whole document; checking its size is the loader's job.
    csv.field_size_limit(max(options.max_bytes * 4 + 1, 131072))
    # By the rules for text files (charsets.decode) for the whole file: a byte
    # order mark (spreadsheets often write one), UTF-8 if it all is, else the
    # encoding asked or detected.
    chosen = file_encoding(path, options.encoding)
    encoding = chosen.codec
    if options.decodings:
        yield Decoding(storable(path), chosen.encoding, chosen.note)
    with open(path, "rb") as file:
        reader = csv.reader(_decoded_lines(file, encoding, read), dialect)
        line = 1
        try:
            header = next(reader, None)
            if header is None:
                return
            if options.text_field not in header:
                yield Failure(path, "invalid-record", f"no column {options.text_field!r} in the "
                              f"header ({', '.join(map(repr, header[:10]))})")  # fmt: skip
                return
            line = reader.line_num + 1
            for row in reader:
                if row:
                    if len(row) != len(header):
                        yield Failure(f"{path}:{line}", "invalid-record",
                                      f"{len(row)} fields where the header has {len(header)}")
                    else:
                        yield _record(path, line, dict(zip(header, row, strict=True)), options)
                line = reader.line_num + 1
        except _UndecodableLine as bad:
            yield Failure(f"{path}:{bad.line}", "invalid-encoding",
                          f"invalid {chosen.encoding} on line {bad.line} ({bad.error.reason}):"
                          " the rest of the file is skipped; use --encoding NAME")  # fmt: skip
        except csv.Error as error:
            yield Failure(f"{path}:{line}", "invalid-record",
                          f"malformed CSV ({error}): the rest of the file is skipped")
