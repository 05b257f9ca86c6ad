"""What a worker makes of a document: its row in COPY's binary format.

Worker processes of the loader read and extract a file (or take a record's
text), check and hash the text, compute its fingerprint and encode its row:
for the loader's own table the row of COLUMNS (or KEPT_COLUMNS), for a table
of the user's own the staged row of STAGED and the mapped fields
(:class:`RowShape`).  The main process only sends the rows on.
"""

from __future__ import annotations

import hashlib
import os
import re
import signal
import struct
import threading
import time
import uuid
from functools import partial
from typing import NamedTuple

from ..core.profiles import simhash_many
from .charsets import override_note
from .database_encoding import (
    non_ascii,
)  # fmt: skip
from .documents import (
    FIELDS_COLUMN,
    FINGERPRINT_COLUMN,
)  # fmt: skip
from .extract import InputError, check_document, read_file
from .load_options import LoadOptions
from .sources import (
    Failure,
    FileInput,
    RecordInput,
)  # fmt: skip

COLUMNS = ("key", "source", "content_hash", "body", FINGERPRINT_COLUMN)
KEPT_COLUMNS = (*COLUMNS, FIELDS_COLUMN)  # a table that keeps the records' other fields


class Prepared(NamedTuple):
    """A document ready to be written (tuples pickle quickly between processes).

    ``key`` is as the table stores it (42 for a bigint key given as "042").
    """

    key: str
    source: str
    size: int  # bytes of its text in UTF-8
    content_hash: bytes
    fingerprint: int | None
    row_bytes: int  # the length of its row in Done.rows
    # For a database that is not UTF-8: the characters outside ASCII of each
    # text value of its row (by the value's place in the row), in the order
    # they first appear.
    characters: tuple[tuple[int, str], ...] = ()
    encoding: str = ""  # what its text was read in, where a text was decoded
    overridden: bool = False  # valid UTF-8 read as such, not in the --encoding asked
    dropped: bool = False  # a record whose other fields the table cannot keep


class Done(NamedTuple):
    """A worker's results for one task.

    The rows of the prepared documents (their values of COLUMNS in COPY's
    binary format) come back to back in one string, which the main process
    sends on as it is: it handles a task, not each document.
    """

    others: list[Unchanged | Failure]
    prepared: list[Prepared]
    rows: bytes
    order: str  # "p" for each prepared document, "o" for each other, in input order


class Unchanged(NamedTuple):
    key: str
    size: int
    source: str = ""
    encoding: str = ""  # as Prepared's
    overridden: bool = False


class _Text(NamedTuple):
    """A document read, hashed, not yet fingerprinted (stays in the worker)."""

    key: str
    source: str
    text: str
    encoded: bytes
    content_hash: bytes
    fields: tuple[str | None, ...]
    encoding: str
    overridden: bool
    kept: str | None = None  # the record's other fields, as JSON (RecordInput.kept)


class RowShape(NamedTuple):
    """The rows of a table of the user's own, as the workers make them.

    Staged as (key, body, si, f0, f1, ...), all text but the fingerprint;
    the merge casts them to the columns' types.
    """

    key_column: str
    key_type: str  # text, character varying, smallint, integer, bigint or uuid
    fields: int  # mapped record fields, NULL where a record has none


Outcome = Prepared | Unchanged | Failure


class Task(NamedTuple):
    item: FileInput | RecordInput
    stored_hash: bytes | None


def start_worker() -> None:
    """Set up a worker process: deaf to Ctrl-C, and gone when the loader is."""
    # Ctrl-C goes to the whole process group; the main process decides.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    parent = os.getppid()

    def exit_when_orphaned() -> None:
        # A loader killed with SIGKILL cannot stop its workers; they would
        # wait on the task queue forever.
        while os.getppid() == parent:
            time.sleep(0.5)
        os._exit(1)

    threading.Thread(target=exit_when_orphaned, daemon=True).start()


def prepare_many(tasks: list[Task], options: LoadOptions, shape: RowShape | None = None,
                 list_characters: bool = False, kept: bool = False) -> Done:  # fmt: skip
    """Read, check, hash and fingerprint inputs (runs in a worker).

    The new and changed texts are fingerprinted together, which is much
    quicker than one at a time for short documents.  ``shape``: the rows of
    a table of the user's own; by default the loader's.  ``list_characters``:
    list the characters outside ASCII of each document (for a database
    whose encoding is not UTF-8, see :class:`Repertoire`).  ``kept``: the
    loader's table keeps the records' other fields (KEPT_COLUMNS).
    """
    read = [_read(task, options, shape) for task in tasks]
    texts = [r for r in read if isinstance(r, _Text)]
    fingerprints = (
        [None] * len(texts) if options.server_side
        else simhash_many([t.text for t in texts], options.profile)
    )
    make_row = partial(_row, kept=kept) if shape is None else partial(_user_row,
                                                                       fields=shape.fields)
    rows = [make_row(text, fingerprint) for text, fingerprint in zip(texts, fingerprints,
                                                                      strict=True)]  # fmt: skip
    prepared = [
        Prepared(t.key, t.source, len(t.encoded), t.content_hash, fingerprint, len(row),
                 _characters(t, shape) if list_characters else (), t.encoding, t.overridden,
                 shape is None and not kept and t.kept is not None)
        for t, fingerprint, row in zip(texts, fingerprints, rows, strict=True)
    ]
    others = [r for r in read if not isinstance(r, _Text)]
    order = "".join("p" if isinstance(r, _Text) else "o" for r in read)
    return Done(others, prepared, b"".join(rows), order)


def _characters(document: _Text, shape: RowShape | None) -> tuple[tuple[int, str], ...]:
    """The characters outside ASCII of each text value of the document's row, by
    the value's place in the row (see COLUMNS and STAGED)."""
    if shape is None:
        values = {COLUMNS.index("key"): document.key, COLUMNS.index("source"): document.source}
        if document.kept is not None:
            values[KEPT_COLUMNS.index(FIELDS_COLUMN)] = document.kept
        text_place = COLUMNS.index("body")
    else:
        values = {STAGED.index("key"): document.key}
        values.update((len(STAGED) + number, value)
                      for number, value in enumerate(document.fields[:shape.fields])
                      if value is not None)  # fmt: skip
        text_place = STAGED.index("body")
    listed = {place: non_ascii(value) for place, value in values.items()}
    listed[text_place] = non_ascii(document.text, document.encoded)
    return tuple((place, characters) for place, characters in sorted(listed.items())
                 if characters)  # fmt: skip


def prepare(task: Task, options: LoadOptions) -> Outcome:
    """Read, check, hash and fingerprint one input."""
    done = prepare_many([task], options)
    return (done.others or done.prepared)[0]


def _read(task: Task, options: LoadOptions, shape: RowShape | None = None) -> (
    _Text | Unchanged | Failure
):
    """The input's text and hash, or why it cannot be loaded."""
    item = task.item
    source = source_of(item)
    key = item.key
    if shape is not None:
        as_stored = stored_key(key, shape.key_type)
        if as_stored is None:
            return Failure(source, "invalid-key", f"key {key!r} cannot be stored in column"
                           f" {shape.key_column!r} of type {shape.key_type}")  # fmt: skip
        key = as_stored
    try:
        if isinstance(item, FileInput):
            text, encoded, encoding = read_file(item.path, max_bytes=options.max_bytes,
                                                encoding=options.encoding)  # fmt: skip
            overridden = override_note(options.encoding, encoding) is not None
        elif item.attachment is not None:  # of an e-mail: extracted here, in a worker
            text, encoded, encoding = item.attachment.read(options.max_bytes)
            overridden = False
        else:
            text, encoded = check_document(item.text, max_bytes=options.max_bytes)
            encoding, overridden = item.encoding, False
    except InputError as error:
        reason = error.reason
        if reason == "not-found" and isinstance(item, FileInput):
            reason = "vanished"  # it was there when the inputs were listed
        return Failure(source, reason, error.message, error.offset)
    digest = hashlib.sha256(encoded).digest()
    if digest == task.stored_hash:
        return Unchanged(key, len(encoded), source, encoding, overridden)
    if isinstance(item, RecordInput):
        return _Text(key, source, text, encoded, digest, item.fields, encoding, overridden,
                     item.kept)
    return _Text(key, source, text, encoded, digest, (), encoding, overridden)


def source_of(item: FileInput | RecordInput) -> str:
    return item.key if isinstance(item, FileInput) else item.source  # storable


_SPACE = "[ \t\n\r\v\f]*"  # what PostgreSQL's integer input skips around the digits
_INTEGER = re.compile(f"{_SPACE}([+-]?[0-9]+){_SPACE}")
_INTEGER_BITS = {"smallint": 16, "integer": 32, "bigint": 64}
# uuid_in: 32 hex digits, a hyphen allowed between groups of four, braces around
_UUID = re.compile(r"(\{)?(?:[0-9a-fA-F]{4}-?){7}[0-9a-fA-F]{4}(?(1)\})")
KEY_TYPES = ("text", "character varying", *_INTEGER_BITS, "uuid")


def stored_key(key: str, key_type: str) -> str | None:
    """``key`` as a key column of ``key_type`` stores and prints it; None if it cannot.

    Checked here, as PostgreSQL's input functions would, so that a bad key
    is one failed record and not a failed batch.  The stored form is what
    the merge returns (``key::text``) and what duplicates are found by:
    "042" and "42" are the same bigint key.
    """
    bits = _INTEGER_BITS.get(key_type)
    if bits is not None:
        match = _INTEGER.fullmatch(key)
        if match is None:
            return None
        value = int(match[1])
        return str(value) if -(1 << (bits - 1)) <= value < 1 << (bits - 1) else None
    if key_type == "uuid":
        return str(uuid.UUID(key.strip("{}").replace("-", ""))) if _UUID.fullmatch(key) else None
    return key


# COPY's binary format: a signature, flags and header extension length
# before the rows; a field count of -1 after them.
COPY_HEADER = b"PGCOPY\n\xff\r\n\x00" + bytes(8)
COPY_TRAILER = b"\xff\xff"
_NULL = b"\xff\xff\xff\xff"
_LENGTH = struct.Struct("!i")
_FIELDS = struct.Struct("!hi")  # the field count, then the first field's length
_BIGINT = struct.Struct("!iq")  # its length (8), then the value


def _row(document: _Text, fingerprint: int | None, kept: bool = False) -> bytes:
    """A row of COLUMNS, or of KEPT_COLUMNS if ``kept`` (jsonb's binary form: a
    version byte, 1, then the JSON text)."""
    key, source = document.key.encode(), document.source.encode()
    row = b"".join((
        _FIELDS.pack(len(KEPT_COLUMNS) if kept else len(COLUMNS), len(key)), key,
        _LENGTH.pack(len(source)), source,
        _LENGTH.pack(len(document.content_hash)), document.content_hash,
        _LENGTH.pack(len(document.encoded)), document.encoded,
        _NULL if fingerprint is None else _BIGINT.pack(8, fingerprint),
    ))  # fmt: skip
    if not kept:
        return row
    if document.kept is None:
        return row + _NULL
    value = document.kept.encode()
    return b"".join((row, _LENGTH.pack(len(value) + 1), b"\x01", value))


STAGED = ("key", "body", FINGERPRINT_COLUMN)  # then f0, f1, ...: the mapped fields


def row_value(row: bytes, place: int) -> bytes:
    """The value at ``place`` of a row in COPY's binary format (b"" for NULL)."""
    position = _FIELDS.size - _LENGTH.size  # after the field count
    for _ in range(place):
        (length,) = _LENGTH.unpack_from(row, position)
        position += _LENGTH.size + max(length, 0)
    (length,) = _LENGTH.unpack_from(row, position)
    start = position + _LENGTH.size
    return row[start:start + max(length, 0)]


def _user_row(document: _Text, fingerprint: int | None, fields: int) -> bytes:
    """A row of STAGED and the mapped fields, for a table of the user's own."""
    key = document.key.encode()
    values = (*document.fields, *(None,) * (fields - len(document.fields)))[:fields]
    parts = [
        _FIELDS.pack(len(STAGED) + fields, len(key)), key,
        _LENGTH.pack(len(document.encoded)), document.encoded,
        _NULL if fingerprint is None else _BIGINT.pack(8, fingerprint),
    ]  # fmt: skip
    for value in values:
        if value is None:
            parts.append(_NULL)
        else:
            encoded = value.encode()
            parts += (_LENGTH.pack(len(encoded)), encoded)
    return b"".join(parts)


# -- the main process ----------------------------------------------------------


