"""Bulk loading of documents: read, fingerprint in parallel, COPY in batches.

Worker processes read and extract the files (or check the records' texts),
hash the text, compute its fingerprint and make its row in COPY's binary
format; the main process streams the rows into one ``COPY`` per batch, one
transaction per batch, while a thread walks the inputs ahead and looks up
the stored content hashes of their keys.  A batch is all or nothing, so an
interrupted run leaves only whole batches behind, and a rerun skips what is
already there: a document whose key is stored with the same content hash is
"unchanged" and is neither fingerprinted nor sent again; a stored key with
another hash is updated (the batch is merged through a temporary table).

A key belongs to the file it was loaded from (:func:`~nearsim.client.sources.origin`):
a stored key that came from another file is not replaced unless
``LoadOptions.replace`` says so, and the same key twice in one run keeps the
first.  Either way the other is a failure that names both sources.

A table of the user's own (an enabled table without the loader's columns)
takes the key, the text, the fingerprint and the mapped record fields
(``LoadOptions.columns``) through a merge of each batch: see
:class:`UserLayout`.

Bad inputs become :class:`~nearsim.client.sources.Failure` reports and never stop
the run.  The reporter hears of every input once, when it is done (read,
checked and fingerprinted), with the bytes read for it.
"""

from __future__ import annotations

import hashlib
import json
import os
import queue
import re
import signal
import struct
import threading
import time
import uuid
from collections import Counter, deque
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import Future, ProcessPoolExecutor
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field, replace
from functools import partial
from typing import IO, Any, NamedTuple

import numpy as np
import psycopg
from psycopg import pq, sql

from ..core.fingerprint import PROFILE
from ..core.pairs import all_pairs
from ..core.profiles import Profile, ProfileError, canonical, simhash_many
from ..core.registry import Registration
from .charsets import override_note
from .connect import ProfileMismatch, connect, ensure_extension
from .database_encoding import (
    CLIENT_ENCODING,
    Repertoire,
    client_encoding,
    non_ascii,
    unstorable_message,
)  # fmt: skip
from .documents import (
    DEFAULT_TABLE,
    FIELDS_COLUMN,
    FINGERPRINT_COLUMN,
    DocumentTable,
    TableError,
)  # fmt: skip
from .extract import InputError, check_document, read_file
from .sources import (
    BytesRead,
    Decoding,
    Failure,
    FileInput,
    Input,
    RecordInput,
    SourceOptions,
    iter_inputs,
    origin,
)  # fmt: skip

DEFAULT_MAX_BYTES = 64 * 1024 * 1024
COLUMNS = ("key", "source", "content_hash", "body", FINGERPRINT_COLUMN)
KEPT_COLUMNS = (*COLUMNS, FIELDS_COLUMN)  # a table that keeps the records' other fields

SEND_BYTES = 256 * 1024  # rows are sent to the server in pieces of about this size

# Work is sent to the workers in tasks of this many documents (fewer for big
# texts), and at most this many tasks per worker are queued or done but not
# yet taken: enough to keep the workers busy while a batch is being written
# (2,000 documents by default), and at most 64 MiB per worker.
TASK_DOCUMENTS = 64
TASK_BYTES = 4 * 1024 * 1024
QUEUED_TASKS_PER_WORKER = 16

# Reasons of the loader's own failures (the readers' are extract.REASONS).
KEY_REASONS = {
    "duplicate-key": "the key of a document loaded earlier in this run, or stored from"
                     " another file (LoadOptions.replace replaces those)",
    "invalid-key": "a key the table's key column cannot hold (not a number for an integer"
                   " key, not a UUID for a uuid key)",
    "refused": "a row the table refused: a value its column cannot hold, or a constraint",
    "near-duplicate": "a near-duplicate of a stored document (--on-near-duplicate error)",
    "database-encoding": "a key, text or field with characters the database's encoding (not"
                         " UTF8) cannot store; the first is named, with its byte offset",
}


@dataclass(frozen=True)
class LoadOptions:
    max_bytes: int = DEFAULT_MAX_BYTES
    encoding: str = "utf-8"
    batch_rows: int = 2000
    batch_bytes: int = 32 * 1024 * 1024
    workers: int | None = None  # default: one per CPU
    server_side: bool = False  # let the database compute the fingerprints
    profile: str | None = None  # fingerprint profile; by default the table's
    replace: bool = False  # overwrite documents whose key is stored from another source
    # A table of the user's own: its key and text columns (by default the
    # ones it is enabled with), and (record field, column) pairs for others.
    key_column: str | None = None
    text_column: str | None = None
    columns: tuple[tuple[str, str], ...] = ()
    # Near-duplicates of stored documents (or of earlier ones of the same
    # load) within near_distance bits: None (written as any other), "error"
    # (a near-duplicate failure), "skip" (left out, counted) or "record"
    # (written, and linked in <table>_nearsim_links).
    on_near_duplicate: str | None = None
    near_distance: int = 3


@dataclass
class LoadSummary:
    loaded: int = 0
    updated: int = 0
    unchanged: int = 0
    skipped: int = 0  # near-duplicates left out (--on-near-duplicate skip)
    recorded: int = 0  # near-duplicates written and linked (--on-near-duplicate record)
    failed: Counter[str] = field(default_factory=Counter)
    bytes: int = 0
    seconds: float = 0.0
    interrupted: bool = False
    error: str | None = None  # why the run stopped early (the connection was lost)

    @property
    def failures(self) -> int:
        return sum(self.failed.values())

    @property
    def documents(self) -> int:
        """Inputs done, whatever became of them."""
        return self.loaded + self.updated + self.unchanged + self.skipped + self.failures

    def as_dict(self) -> dict[str, Any]:
        return {
            "loaded": self.loaded, "updated": self.updated, "unchanged": self.unchanged,
            "skipped_near_duplicates": self.skipped, "recorded_near_duplicates": self.recorded,
            "failed": self.failures, "failed_by_reason": dict(sorted(self.failed.items())),
            "bytes": self.bytes, "seconds": round(self.seconds, 3),
            "interrupted": self.interrupted,
            **({"error": self.error} if self.error is not None else {}),
        }  # fmt: skip


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


class Reporter:
    """What the loader tells its caller; the default tells nothing."""

    def started(self) -> None:
        """The table is checked and the inputs are read from now on
        (:attr:`LoadSummary.seconds` counts from here)."""

    def failure(self, failure: Failure) -> None:
        """One input could not be loaded."""

    def warning(self, message: str) -> None:
        """Something worth knowing (one line), about the whole load or one input
        (then it starts with its source); the load goes on."""

    def decoded(self, source: str, encoding: str) -> None:
        """The text of ``source`` (a file, or a message's part) was read in ``encoding``
        (a Python codec name: ascii, utf-8, cp1252, utf-16, ...)."""

    def progress(self, documents: int, size: int) -> None:
        """``documents`` more inputs are done, ``size`` bytes of them read.

        An input is done when a worker has read, checked and fingerprinted
        it (before its batch commits) or when it failed.  ``size`` counts the
        bytes of the files read: a file's size, or the lines of a record
        file (counted by the :class:`BytesRead` the loader was given); over a
        whole load it adds up to the size of every file read.
        """


# -- the workers ---------------------------------------------------------------


def _start_worker() -> None:
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
    source = _source(item)
    key = item.key
    if shape is not None:
        stored_key = _stored_key(key, shape.key_type)
        if stored_key is None:
            return Failure(source, "invalid-key", f"key {key!r} cannot be stored in column"
                           f" {shape.key_column!r} of type {shape.key_type}")  # fmt: skip
        key = stored_key
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


def report_encodings(reporter: Reporter, asked: str, prepared: Iterable[Prepared],
                     others: Iterable[Unchanged | Failure]) -> None:  # fmt: skip
    """Tell ``reporter`` what each text read was decoded from, and warn of each
    file read as UTF-8 against the --encoding ``asked`` (see .charsets)."""
    for outcome in (*prepared, *others):
        if isinstance(outcome, Failure) or not outcome.encoding:
            continue
        source = outcome.source or outcome.key
        reporter.decoded(source, outcome.encoding)
        if outcome.overridden:
            reporter.warning(f"{source}: {override_note(asked, outcome.encoding)}")


def _source(item: FileInput | RecordInput) -> str:
    return item.key if isinstance(item, FileInput) else item.source  # storable


_SPACE = "[ \t\n\r\v\f]*"  # what PostgreSQL's integer input skips around the digits
_INTEGER = re.compile(f"{_SPACE}([+-]?[0-9]+){_SPACE}")
_INTEGER_BITS = {"smallint": 16, "integer": 32, "bigint": 64}
# uuid_in: 32 hex digits, a hyphen allowed between groups of four, braces around
_UUID = re.compile(r"(\{)?(?:[0-9a-fA-F]{4}-?){7}[0-9a-fA-F]{4}(?(1)\})")
KEY_TYPES = ("text", "character varying", *_INTEGER_BITS, "uuid")


def _stored_key(key: str, key_type: str) -> str | None:
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


def _row_value(row: bytes, place: int) -> bytes:
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


def _task_size(item: FileInput | RecordInput) -> int:
    if isinstance(item, RecordInput):
        return len(item.text) + (0 if item.attachment is None else len(item.attachment.data))
    return item.size


class _Chunk(NamedTuple):
    """Inputs for one worker task, and the bytes read for them (for the progress)."""

    items: list[Any]  # FileInput | RecordInput, then Task once the stored hashes are known
    read: int


def _chunks(
    inputs: Iterable[Input], on_failure: Callable[[Failure | Decoding], None], read: BytesRead
) -> Iterator[_Chunk]:
    """Inputs grouped into worker tasks; failures found while listing (and the
    encodings of record files) go straight out.

    A chunk's bytes are its files' sizes and the bytes of record files read
    since the previous chunk; what is read after the last one (blank lines,
    bad records) comes in a chunk of no inputs.
    """
    chunk: list[FileInput | RecordInput] = []
    size = files = 0
    counted = read.total
    for item in inputs:
        if isinstance(item, (Failure, Decoding)):
            on_failure(item)
            continue
        chunk.append(item)
        size += _task_size(item)
        if isinstance(item, FileInput):
            files += item.size
        if len(chunk) >= TASK_DOCUMENTS or size >= TASK_BYTES:
            yield _Chunk(chunk, files + read.total - counted)
            chunk, size, files, counted = [], 0, 0, read.total
    if chunk or read.total > counted:
        yield _Chunk(chunk, files + read.total - counted)


class _Listing:
    """The items of an iterator, produced ahead by a thread.

    Walking directories and asking the database for stored hashes then
    overlap with writing batches, which waits for the server.  Exceptions
    come out where the items would.
    """

    _END = object()

    def __init__(self, items: Iterator[Any], depth: int) -> None:
        self.queue: queue.Queue[Any] = queue.Queue(maxsize=depth)
        self.stopped = threading.Event()
        self.thread = threading.Thread(target=self._produce, args=(items,), daemon=True,
                                       name="nearsim-listing")  # fmt: skip
        self.thread.start()

    def _produce(self, items: Iterator[Any]) -> None:
        try:
            for item in items:
                if not self._put(item):
                    return
        except BaseException as error:  # handed to the consumer
            self._put(_Raised(error))
        self._put(self._END)

    def _put(self, item: Any) -> bool:
        while not self.stopped.is_set():
            try:
                self.queue.put(item, timeout=0.1)
                return True
            except queue.Full:
                continue
        return False

    def __iter__(self) -> Iterator[Any]:
        while (item := self.queue.get()) is not self._END:
            if isinstance(item, _Raised):
                raise item.error
            yield item

    def close(self) -> None:
        self.stopped.set()
        # It may wait for a line on stdin that never comes; it is a daemon.
        self.thread.join(timeout=5)


@dataclass(frozen=True)
class _Raised:
    error: BaseException


class _Written(NamedTuple):
    """What a batch's write did with its documents (by key); the rest were unchanged."""

    inserted: set[str]
    updated: set[str]
    refused: dict[str, Failure]
    skipped: frozenset[str] = frozenset()  # near-duplicates left out
    recorded: frozenset[str] = frozenset()  # near-duplicates written and linked


class _Screened(NamedTuple):
    """Near-duplicates a batch holds: key -> (its near-duplicate's key, distance)."""

    near: dict[str, tuple[str, int]]


def _taken(key: str, stored: str, source: str) -> Failure:
    """A document whose key is stored from another file."""
    return Failure(source, "duplicate-key",
                   f"key {key!r} is stored from {stored}, not from {source}: not replaced"
                   " (load with --replace to replace it)")  # fmt: skip


# The origin of a stored source, as sources.origin computes it.
_ORIGIN_PATTERN = ":[0-9]+$"


def _origin_sql(source: sql.Composable) -> sql.Composed:
    return sql.SQL("pg_catalog.regexp_replace({}, {}, '')").format(
        source, sql.Literal(_ORIGIN_PATTERN))


class Loader:
    """Loads documents into one table (see the module docstring).

    ``read`` is the counter of record-file bytes that :func:`iter_inputs`
    was given for the inputs, so that the progress counts them.
    """

    def __init__(
        self,
        conn: psycopg.Connection[Any],
        lookup_conn: psycopg.Connection[Any],
        table: DocumentTable,
        options: LoadOptions | None = None,
        reporter: Reporter | None = None,
        read: BytesRead | None = None,
    ) -> None:
        self.conn = conn
        self.lookup_conn = lookup_conn
        self.table = table
        self.options = options or LoadOptions()
        self.reporter = reporter or Reporter()
        self.read = read or BytesRead()
        self.summary = LoadSummary()
        self.abandoning = False  # a second Ctrl-C: the batch at hand is rolled back
        self.seen: dict[str, str] = {}  # key -> the source it came from, in this run
        self.user: UserLayout | None = None  # a table of the user's own
        self.kept = False  # the loader's table keeps the records' other fields
        self.not_kept: str | None = None  # why it cannot, to say once
        self.nothing_stored = False
        self.open_copy: tuple[ExitStack, psycopg.Copy] | None = None
        self.unsent = bytearray()  # rows for the open COPY
        self.merging = False
        self.batch: list[tuple[list[Prepared], bytes]] = []  # documents and their rows
        self.batch_count = 0
        self.batch_bytes = 0
        self.settings: dict[str, str] = {}  # set in each batch's transaction
        # lookup_conn is shared by the listing thread and the repertoire
        self.lookup_lock = threading.RLock()
        self.repertoire = Repertoire(lookup_conn, self.lookup_lock)

    def check(self) -> None:
        """Refuse tables this client cannot fill correctly."""
        if not self.conn.autocommit:
            raise ValueError("the loader needs a connection in autocommit mode: each batch is"
                             " a transaction of its own")
        for conn in (self.conn, self.lookup_conn):
            if client_encoding(conn) != CLIENT_ENCODING:
                raise ValueError(
                    f"the loader sends UTF-8 text: connect with client_encoding {CLIENT_ENCODING}"
                    f" (nearsim.connect does), not {client_encoding(conn) or 'unknown'}")
        registration = self._layout()
        try:
            asked = None if self.options.profile is None else canonical(self.options.profile)
        except ProfileError as error:
            raise ProfileMismatch(str(error)) from error
        profile = asked or PROFILE
        if registration is not None:
            if asked is not None and asked != registration.profile:
                raise ProfileMismatch(
                    f"table {self.table} holds fingerprints of profile {registration.profile},"
                    f" not {asked}"
                )
            profile = registration.profile
        if not self.options.server_side:
            try:
                Profile.named(profile).check_libraries()
            except (ProfileError, RuntimeError) as error:
                raise ProfileMismatch(
                    f"table {self.table} holds fingerprints of profile {profile}, which this"
                    f" client cannot compute ({error}): load with --server-side"
                ) from error
        # The table's triggers keep fingerprints of a transaction that
        # declares their profile instead of computing each again.  With
        # --server-side the loader's own statement computes them in the
        # server (or leaves them NULL for the trigger): once either way.
        self.settings["nearsim.profile"] = profile
        self.options = replace(self.options, profile=profile)
        if self.user is None:
            self.not_kept = self.table.add_fields_column()
            self.kept = self.not_kept is None

    def _layout(self) -> Registration | None:
        """The table's registration; ``self.user`` is set for a table of the user's own."""
        options = self.options
        mapped = bool(options.key_column or options.text_column or options.columns)
        self.table.require()
        try:
            self.table.check_layout()
        except TableError as error:
            registration = self.table.registration()
            if registration is None:
                if mapped:
                    raise TableError(
                        f"table {self.table} is not enabled for nearsim: enable it first"
                        " (SELECT nearsim_enable(table, text_column)), the loader fills its"
                        " fingerprint column") from error  # fmt: skip
                raise TableError(f"{error}; or enable a table of your own first with SELECT"
                                 " nearsim_enable(table, text_column)") from error  # fmt: skip
            self.user = user_layout(self.table, registration, options)
            return registration
        if mapped:
            raise TableError(
                f"table {self.table} has nearsim-load's own columns (key, source, content_hash,"
                " body, si): --key-column, --text-column and --column are for a table of your"
                " own")  # fmt: skip
        return self.table.registration()

    def run(self, inputs: Iterable[Input]) -> LoadSummary:
        """Load every input; returns the counts (also on Ctrl-C, marked interrupted)."""
        self.check()
        if self.repertoire.encoding == "SQL_ASCII":
            self.reporter.warning(
                "the database encoding is SQL_ASCII, which converts nothing: texts are stored"
                " as their UTF-8 bytes, as nearsim's functions read them; other clients should"
                " read them with client_encoding UTF8")  # fmt: skip
        started = time.perf_counter()
        self.reporter.started()
        self.nothing_stored = self.user is None and self._is_empty()
        self._raise_work_mem()
        workers = self.options.workers or os.cpu_count() or 1
        queued = workers * QUEUED_TASKS_PER_WORKER
        executor = ProcessPoolExecutor(workers, initializer=_start_worker)
        pending: deque[tuple[Future[Done], int]] = deque()  # and the bytes read for each
        shape = None if self.user is None else self.user.shape()
        work = partial(prepare_many, options=self.options, shape=shape,
                       list_characters=self.repertoire.converts, kept=self.kept)  # fmt: skip
        listing = _Listing(self._listed(inputs), depth=queued)
        try:
            with self._stopping_gracefully():
                for item in listing:
                    if isinstance(item, Failure):
                        self._fail(item)
                        self.reporter.progress(1, 0)
                        continue
                    if isinstance(item, Decoding):
                        self.reporter.decoded(item.source, item.encoding)
                        if item.note is not None:
                            self.reporter.warning(f"{item.source}: {item.note}")
                        continue
                    if item.items:
                        pending.append((executor.submit(work, item.items), item.read))
                    else:
                        self.reporter.progress(0, item.read)
                    # Results are taken in order, at the latest when the queue
                    # is full, and as soon as they are done while each worker
                    # has more queued (the progress moves with them).
                    while pending and (len(pending) >= queued or (
                            len(pending) > workers and pending[0][0].done())):
                        future, read = pending.popleft()
                        self._take(future.result(), read)
                    if self.summary.interrupted:
                        break
                while pending and not self.summary.interrupted:
                    future, read = pending.popleft()
                    self._take(future.result(), read)
                if not self.abandoning:
                    self._flush()
        except KeyboardInterrupt:
            self.summary.interrupted = True
        except psycopg.Error as error:
            # After a second Ctrl-C, the error is that of the cancelled command.
            if not self.abandoning:
                if not isinstance(error, psycopg.OperationalError):
                    raise
                # Whole batches are committed or not: the summary says which
                # were, and a rerun finishes the load.
                first_line = (str(error).strip().splitlines() or [type(error).__name__])[0]
                self.summary.error = f"database connection lost: {first_line}"
        finally:
            # Cleaning up must end with the summary even if another Ctrl-C
            # comes meanwhile.
            try:
                self._close_if_busy()
                self._abandon_copy()  # after an error; _flush has closed it otherwise
                listing.close()
            except KeyboardInterrupt:
                self.summary.interrupted = True
            self._shut_down(executor)
            self.summary.seconds = time.perf_counter() - started
        return self.summary

    def _shut_down(self, executor: ProcessPoolExecutor) -> None:
        """Cancel the queued tasks and wait for the running ones (one batch's
        preparation each, which the workers finish in a moment: they ignore
        Ctrl-C).  A Ctrl-C meanwhile does not stop the waiting: a pool left
        running makes Python's exit write to pipes its thread has closed
        ("Exception ignored ... Bad file descriptor" after the summary)."""
        while True:
            try:
                executor.shutdown(wait=True, cancel_futures=True)
                return
            except KeyboardInterrupt:
                self.summary.interrupted = True

    def analyze(self) -> None:
        """Fresh planner statistics after a bulk load (see DocumentTable.analyze)."""
        if self.user is None:
            self.table.analyze()
            return
        self.conn.execute(sql.SQL("ANALYZE {} ({}, {})").format(
            self.table.identifier, sql.Identifier(self.user.key),
            sql.Identifier(self.user.fingerprint)))  # fmt: skip
        self.table.analyze_bucket_table()

    def _raise_work_mem(self) -> None:
        """Let the batch's transition table (whole rows, for the bucket trigger
        of a table enabled before 0.4.0) stay in memory instead of spilling to
        a temporary file; never lowered."""
        registration = self.table.registration()
        if registration is None or registration.bucket_table is None:
            return
        wanted = self.options.batch_bytes + 16 * 1024 * 1024
        row = self.conn.execute(
            "SELECT setting::bigint * 1024 FROM pg_catalog.pg_settings WHERE name = 'work_mem'"
        ).fetchone()
        if row is not None and row[0] < wanted:
            self.settings["work_mem"] = f"{wanted // 1024}kB"

    def _begin(self) -> ExitStack:
        """A batch's transaction, with the loader's settings for it alone.

        Settings last for the transaction (``set_config(..., true)``), never
        for the session: behind a pooler in transaction mode (pgbouncer), the
        server connection goes to another client after each transaction, and
        a session setting would go with it (the next client's fingerprints
        would be taken as declared).
        """
        stack = ExitStack()
        stack.enter_context(self.conn.transaction())
        if self.settings:
            calls = sql.SQL(", ").join(
                sql.SQL("pg_catalog.set_config({}, {}, true)").format(
                    sql.Literal(name), sql.Literal(value))
                for name, value in self.settings.items())
            self.conn.execute(sql.SQL("SELECT {}").format(calls))  # one round trip
        return stack

    def _is_empty(self) -> bool:
        row = self.lookup_conn.execute(
            sql.SQL("SELECT NOT EXISTS (SELECT FROM {})").format(self.table.identifier)
        ).fetchone()
        self.lookup_conn.rollback()
        return bool(row and row[0])

    def _listed(self, inputs: Iterable[Input]) -> Iterator[_Chunk | Failure | Decoding]:
        """Worker tasks with the stored hashes of their keys, and listing failures."""
        failures: list[Failure | Decoding] = []
        for chunk in _chunks(inputs, failures.append, self.read):
            yield from failures
            failures.clear()
            tasks, refused = self._tasks(chunk.items)
            yield from refused
            yield _Chunk(tasks, chunk.read)
        yield from failures

    @contextmanager
    def _stopping_gracefully(self) -> Iterator[None]:
        """On SIGINT or SIGTERM, finish the batch at hand and stop.

        A second signal stops at once: the command at hand is cancelled in
        the server and its batch rolled back.  Only a third one interrupts
        the loader wherever it is (KeyboardInterrupt for SIGINT): raised at
        any point, even inside a finalizer, where Python drops it, an
        interrupt could not be counted on to stop at once, nor to leave the
        connection usable.
        """
        if threading.current_thread() is not threading.main_thread():
            yield
            return
        previous = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)}

        def stop(signum: int, frame: object) -> None:
            if not self.summary.interrupted:
                self.summary.interrupted = True
                return
            self.abandoning = True
            signal.signal(signal.SIGINT, signal.default_int_handler)
            signal.signal(signal.SIGTERM, signal.SIG_DFL)
            try:
                self.conn.cancel_safe(timeout=5)
            except psycopg.Error:  # the connection may be gone, or the command over
                pass

        for sig in previous:
            signal.signal(sig, stop)
        try:
            yield
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)

    def _fail(self, failure: Failure) -> None:
        self.summary.failed[failure.reason] += 1
        self.reporter.failure(failure)

    def _tasks(self, chunk: list[FileInput | RecordInput]) -> tuple[list[Task], list[Failure]]:
        """The chunk with the stored content hashes of its keys, and the documents
        refused because their key is stored from another file."""
        if self.user is not None or self.nothing_stored:
            # A first load asks nothing: any key stored since by another
            # loader makes the batch's COPY fail and merge instead.  A table
            # of the user's own is compared in the merge (see _merge).
            return [Task(item, None) for item in chunk], []
        # A key the database cannot store is not stored (its document fails
        # when it is prepared); sent, it would make the server refuse the query.
        keys = [item.key for item in chunk if self.repertoire.holds(item.key)]
        with self.lookup_lock:
            rows = self.lookup_conn.execute(
                sql.SQL("SELECT key, source, content_hash, {} FROM {} WHERE key = ANY (%s)").format(
                    sql.Identifier(FIELDS_COLUMN) if self.kept else sql.SQL("NULL"),
                    self.table.identifier,
                ),
                [keys],
            ).fetchall()
            self.lookup_conn.rollback()  # no snapshot held open between chunks
        items = {item.key: item for item in chunk}
        stored: dict[str, tuple[str, bytes | None]] = {}
        for key, source, digest, fields in rows:
            # the same text with other fields is written again: no stored hash for it
            item = items[key]
            kept = item.kept if isinstance(item, RecordInput) else None
            stored[key] = (source, digest if fields == (kept and json.loads(kept)) else None)
        tasks: list[Task] = []
        refused: list[Failure] = []
        for item in chunk:
            found = stored.get(item.key)
            if found is None:
                tasks.append(Task(item, None))
                continue
            stored_source, digest = found
            source = _source(item)
            if stored_source == source or origin(stored_source) == origin(source):
                tasks.append(Task(item, digest))  # unchanged if the hash is the same
            elif self.options.replace:
                # written again with its new source, even if the text is the same
                tasks.append(Task(item, None))
            else:
                refused.append(_taken(item.key, stored_source, source))
        return tasks, refused

    def _take(self, done: Done, read: int) -> None:
        # The documents are read and fingerprinted: done, for the progress,
        # whether or not their batch is written yet.
        self.reporter.progress(len(done.others) + len(done.prepared), read)
        report_encodings(self.reporter, self.options.encoding, done.prepared, done.others)
        if self.not_kept is not None and any(document.dropped for document in done.prepared):
            dropped = next(document for document in done.prepared if document.dropped)
            self.reporter.warning(f"{self.not_kept}; the first: {dropped.source}")
            self.not_kept = None  # said once
        if self.repertoire.converts:
            done = self._storable(done)
        keys = [document.key for document in done.prepared]
        keys += [outcome.key for outcome in done.others if isinstance(outcome, Unchanged)]
        if self.seen.keys().isdisjoint(keys) and len(set(keys)) == len(keys):
            for outcome in done.others:
                self._other(outcome)
            self.seen.update((document.key, document.source) for document in done.prepared)
            self._add(done.prepared, done.rows)
            return
        # A key met before: one input at a time, in their order, so that the
        # first one is kept.
        others, prepared = iter(done.others), iter(done.prepared)
        start = 0
        for kind in done.order:
            if kind == "o":
                self._other(next(others))
                continue
            document = next(prepared)
            end = start + document.row_bytes
            if self._first(document.key, document.source):
                self._add([document], done.rows[start:end])
            start = end

    def _storable(self, done: Done) -> Done:
        """The task's documents that the database's encoding cannot store, as failures
        (in their place among the others), the rest as they were."""
        self.repertoire.learn(character for document in done.prepared
                              for _, listed in document.characters for character in listed)
        others, prepared = iter(done.others), iter(done.prepared)
        kept_others: list[Unchanged | Failure] = []
        kept: list[Prepared] = []
        rows: list[bytes] = []
        order: list[str] = []
        start = 0
        for kind in done.order:
            if kind == "o":
                kept_others.append(next(others))
                order.append("o")
                continue
            document = next(prepared)
            row = done.rows[start:start + document.row_bytes]
            start += document.row_bytes
            failure = self._unstorable(document, row)
            if failure is None:
                kept.append(document)
                rows.append(row)
                order.append("p")
            else:
                kept_others.append(failure)
                order.append("o")
        return Done(kept_others, kept, b"".join(rows), "".join(order))

    def _unstorable(self, document: Prepared, row: bytes) -> Failure | None:
        """Why the database cannot store the document, if it cannot: the first
        character of its key, source, text or fields that it cannot store."""
        for place, listed in document.characters:
            character = self.repertoire.first_unstorable(listed)
            if character is None:
                continue
            # The first to appear of those it cannot store: where it first is.
            offset = _row_value(row, place).find(character.encode())
            if self.user is None:
                what = KEPT_COLUMNS[place] if place != COLUMNS.index("body") else "text"
            elif place >= len(STAGED):
                what = f"field {self.user.columns[place - len(STAGED)].field!r}"
            else:
                what = STAGED[place] if place != STAGED.index("body") else "text"
            return Failure(document.source, "database-encoding",
                           unstorable_message(document.key, what, character, offset,
                                              self.repertoire.encoding),
                           offset if what == "text" else None)  # fmt: skip
        return None

    def _other(self, outcome: Unchanged | Failure) -> None:
        if isinstance(outcome, Failure):
            self._fail(outcome)
        elif self._first(outcome.key, outcome.source or outcome.key):
            self.summary.unchanged += 1
            self.summary.bytes += outcome.size

    def _first(self, key: str, source: str) -> bool:
        """Whether ``key`` is new in this run; a failure naming both sources if not."""
        first = self.seen.get(key)
        if first is None:
            self.seen[key] = source
            return True
        self._fail(Failure(source, "duplicate-key",
                           f"key {key!r} was already loaded in this run from {first}: this"
                           f" document from {source} is skipped"))  # fmt: skip
        return False

    def _streams(self) -> bool:
        """Whether the batch goes straight into the table by COPY (no staging table)."""
        return (not self.options.server_side and not self.merging and self.user is None
                and self.options.on_near_duplicate is None)

    def _add(self, documents: list[Prepared], rows: bytes) -> None:
        """Put documents in the batch, ending batches where they are full."""
        while documents:
            room = self.options.batch_rows - self.batch_count
            taken = documents[:room]
            cut = len(rows) if len(taken) == len(documents) else sum(
                document.row_bytes for document in taken)
            self.batch.append((taken, rows[:cut]))
            self.batch_count += len(taken)
            self.batch_bytes += sum(document.size for document in taken)
            if self._streams():
                self._stream(rows[:cut])
            documents, rows = documents[len(taken):], rows[cut:]
            if (self.batch_count >= self.options.batch_rows
                    or self.batch_bytes >= self.options.batch_bytes):
                self._flush()

    def _stream(self, rows: bytes) -> None:
        """Send rows in the batch's COPY, which the first ones open.

        The server stores the rows while the workers prepare the next ones;
        the COPY ends and commits when the batch is full.
        """
        try:
            if self.open_copy is None:
                stack = self._begin()
                copy = stack.enter_context(self.conn.cursor().copy(self._copy_statement(
                    self.table.identifier, KEPT_COLUMNS if self.kept else COLUMNS)))
                self.open_copy = (stack, copy)
                self.unsent += COPY_HEADER
            self.unsent += rows
            if len(self.unsent) >= SEND_BYTES:
                self.open_copy[1].write(self.unsent)
                self.unsent.clear()
        except psycopg.errors.UniqueViolation:
            self._abandon_copy()
            self.merging = True  # the rest of the batch is merged at its end

    def _close_if_busy(self) -> None:
        """Close the connection if a Ctrl-C left it inside a command.

        psycopg cancels the command it interrupts but waits for the server
        only a moment; a connection still inside it takes no other command,
        not even the rollback.  Closed, the server rolls the batch back.
        """
        if self.conn.pgconn.transaction_status == pq.TransactionStatus.ACTIVE:
            self.conn.close()

    def _abandon_copy(self) -> None:
        """Roll the open COPY's batch back (the connection may be gone)."""
        if self.open_copy is None:
            return
        stack, _ = self.open_copy
        self.open_copy = None
        self.unsent.clear()
        try:
            stack.__exit__(RuntimeError, RuntimeError("batch abandoned"), None)
        except (psycopg.Error, RuntimeError):
            pass

    def _flush(self) -> None:
        """End the batch's transaction: all its documents are stored, or none."""
        if not self.batch:
            return
        pieces, self.batch, self.batch_count, self.batch_bytes = self.batch, [], 0, 0
        batch = [document for documents, _ in pieces for document in documents]
        rows = b"".join(piece_rows for _, piece_rows in pieces)
        merging, self.merging = self.merging, False
        if self.user is not None:
            written = self._merge(self.user, batch, rows)
        elif not self._streams() or merging:
            written = self._upsert(batch, rows)
        else:
            try:
                assert self.open_copy is not None
                (stack, copy), self.open_copy = self.open_copy, None
                self.unsent += COPY_TRAILER
                copy.write(self.unsent)
                self.unsent.clear()
                stack.close()  # ends the COPY, then commits
                written = _Written({document.key for document in batch}, set(), {})
            except psycopg.errors.UniqueViolation:
                # Some keys are stored already (changed documents, or another
                # loader got there first): merge instead.
                written = self._upsert(batch, rows)
        for document in batch:
            refused = written.refused.get(document.key)
            if refused is not None:
                self._fail(refused)  # (its progress was counted when it was prepared)
                continue
            if document.key in written.skipped:
                self.summary.skipped += 1
                continue
            self.summary.recorded += document.key in written.recorded
            if document.key in written.inserted:
                self.summary.loaded += 1
            elif document.key in written.updated:
                self.summary.updated += 1
            else:
                self.summary.unchanged += 1
            self.summary.bytes += document.size

    @staticmethod
    def _copy_statement(target: sql.Composable, columns: Sequence[str] = COLUMNS) -> sql.Composed:
        return sql.SQL("COPY {} ({}) FROM STDIN (FORMAT binary)").format(
            target, sql.SQL(", ").join(map(sql.Identifier, columns))
        )

    def _copy(self, target: sql.Composable, rows: bytes, columns: Sequence[str] = COLUMNS) -> None:
        with self.conn.cursor().copy(self._copy_statement(target, columns)) as copy:
            copy.write(b"".join((COPY_HEADER, rows, COPY_TRAILER)))

    def _upsert(self, batch: list[Prepared], rows: bytes) -> _Written:
        """Insert new keys, update changed ones of the same file (of any file
        with ``replace``); a key stored from another file is refused."""
        staging = sql.Identifier("nearsim_load_staging")
        fingerprint: sql.Composable = sql.SQL("s.si")
        if self.options.server_side:
            fingerprint = self._server_simhash(sql.SQL("s.body"))
        stored_origin = _origin_sql(sql.SQL("t.source"))
        new_origin = _origin_sql(sql.SQL("EXCLUDED.source"))
        changed = sql.SQL("(t.content_hash IS DISTINCT FROM EXCLUDED.content_hash{})").format(
            sql.SQL(" OR t.fields IS DISTINCT FROM EXCLUDED.fields" if self.kept else ""))
        columns = KEPT_COLUMNS if self.kept else COLUMNS
        if self.options.replace:
            rewrite = sql.SQL("{} OR {} IS DISTINCT FROM {}").format(changed, stored_origin,
                                                                     new_origin)  # fmt: skip
        else:
            rewrite = sql.SQL("{} AND {} = {}").format(changed, stored_origin, new_origin)
        with self._begin():
            # dropped at commit: nothing of the loader outlives its transaction
            self.conn.execute(
                sql.SQL(
                    """CREATE TEMPORARY TABLE {} (
                        key text, source text, content_hash bytea, body text, si bigint,
                        fields jsonb
                    ) ON COMMIT DROP"""
                ).format(staging)
            )
            self._copy(staging, rows, columns)
            screened = self._screen(staging, "key", FINGERPRINT_COLUMN)
            written = self.conn.execute(
                sql.SQL(
                    """INSERT INTO {table} AS t (key, source, content_hash, body, si{fields})
                       SELECT s.key, s.source, s.content_hash, s.body, {fingerprint}{s_fields}
                       FROM {staging} AS s
                       ON CONFLICT (key) DO UPDATE
                       SET source = EXCLUDED.source, content_hash = EXCLUDED.content_hash,
                           body = EXCLUDED.body, si = EXCLUDED.si, loaded_at = pg_catalog.now()
                           {set_fields}
                       WHERE {rewrite}
                       RETURNING t.key, (t.xmax = 0) AS inserted"""
                    # xmax is 0 in a row this statement inserted, set in one it updated
                ).format(table=self.table.identifier, staging=staging, fingerprint=fingerprint,
                         rewrite=rewrite, fields=sql.SQL(", fields" if self.kept else ""),
                         s_fields=sql.SQL(", s.fields" if self.kept else ""),
                         set_fields=sql.SQL(", fields = EXCLUDED.fields" if self.kept else ""))
            ).fetchall()
            inserted = {key for key, new in written if new}
            updated = {key for key, new in written if not new}
            unwritten = [d.key for d in batch if d.key not in inserted and d.key not in updated]
            refused: dict[str, Failure] = {}
            if unwritten and not self.options.replace:
                # Unchanged, or stored from another file meanwhile (by another loader)
                sources = {document.key: document.source for document in batch}
                taken = self.conn.execute(
                    sql.SQL("""SELECT s.key, t.source FROM {staging} AS s
                               JOIN {table} AS t ON t.key = s.key
                               WHERE s.key = ANY (%s) AND {stored} <> {new}""").format(
                        staging=staging, table=self.table.identifier,
                        stored=stored_origin, new=_origin_sql(sql.SQL("s.source"))),
                    [unwritten],
                ).fetchall()  # fmt: skip
                refused = {key: _taken(key, stored, sources[key]) for key, stored in taken}
            return self._screened(screened, batch, _Written(inserted, updated, refused))

    def _server_simhash(self, text: sql.Composable) -> sql.Composable:
        """The server's fingerprint of ``text`` in the table's profile (canonical
        since :meth:`check`): the C ``simhash(text)`` for the default profile,
        else the PL/Python one; cast, as the server's ``catalog.simhash_sql``."""
        profile = self.options.profile or PROFILE
        if profile == PROFILE:
            return sql.SQL("{}.simhash({}::pg_catalog.text)").format(self.table.extension, text)
        return sql.SQL("{}.simhash({}::pg_catalog.text, {}::pg_catalog.text)").format(
            self.table.extension, text, sql.Literal(profile))

    def _screen(self, staging: sql.Identifier, key_column: str,
                fingerprint_column: str) -> _Screened:
        """Find the batch's near-duplicates and take those to leave out off the staging table.

        A near-duplicate is within ``near_distance`` bits of a stored document
        (another key) or of an earlier document of the batch that is written.
        The check takes the lock of the table's check-in guard (nearsim_guard)
        first, so that concurrent loaders and guarded writers check one after
        the other, each seeing what the previous one committed.
        """
        action = self.options.on_near_duplicate
        if action is None:
            return _Screened({})
        ext, table = self.table.extension, self.table.identifier
        key, fp = sql.Identifier(key_column), sql.Identifier(fingerprint_column)
        self.conn.execute(sql.SQL("SELECT {}.nearsim_guard_lock(%s::pg_catalog.regclass)").format(
            ext), [self.table.quoted])
        # The batch's fingerprints, once: computed here when the server computes them.
        staged = [(key, int(value)) for key, value in self.conn.execute(sql.SQL(
            "SELECT key, COALESCE(si, {simhash}) FROM {staging}").format(
                simhash=self._server_simhash(sql.SQL("body")), staging=staging))
            if value is not None]
        if not staged:
            return _Screened({})
        stored = self.conn.execute(sql.SQL(
            """SELECT s.key, n.key, n.distance
               FROM ROWS FROM (pg_catalog.unnest(%s::pg_catalog.text[]),
                               pg_catalog.unnest(%s::pg_catalog.int8[])) AS s (key, si)
               CROSS JOIN LATERAL (
                   SELECT t.{key}::pg_catalog.text AS key, {ext}.hamming(t.{fp}, s.si) AS distance
                   FROM {table} AS t
                   WHERE t.ctid = ANY ({ext}.nearsim_search(%s::pg_catalog.regclass, %s, s.si, %s))
                     AND t.{key}::pg_catalog.text <> s.key
                   ORDER BY 2, 1 LIMIT 1) AS n""").format(ext=ext, key=key, fp=fp, table=table),
            [[k for k, _ in staged], [v for _, v in staged], self.table.quoted,
             fingerprint_column, self.options.near_distance]).fetchall()
        near = {new: (existing, int(distance)) for new, existing, distance in stored}
        # within the batch: a later document near an earlier one that is written
        if len(staged) > 1:
            values = np.array([value for _, value in staged], dtype=np.int64)
            first, second, distance = all_pairs(values, self.options.near_distance)
            for i, j, bits in zip(first.tolist(), second.tolist(), distance.tolist(),
                                  strict=True):
                earlier, later = staged[i][0], staged[j][0]
                if later in near or (action != "record" and earlier in near):
                    continue  # already one, or the earlier one is not written
                near[later] = (earlier, int(bits))
        leave_out = list(near) if action in ("error", "skip") else []
        if leave_out:
            self.conn.execute(sql.SQL("DELETE FROM {} WHERE key = ANY (%s)").format(staging),
                              [leave_out])
        return _Screened(near)

    def _screened(self, screened: _Screened, batch: list[Prepared],
                  written: _Written) -> _Written:
        """The batch's outcome with its near-duplicates: failures, left out, or linked."""
        if not screened.near:
            return written
        action = self.options.on_near_duplicate
        if action == "record":
            recorded = {k: v for k, v in screened.near.items()
                        if k in written.inserted or k in written.updated}
            if recorded:
                self._record_links(recorded)
            return written._replace(recorded=frozenset(recorded))
        if action == "skip":
            return written._replace(skipped=frozenset(screened.near))
        sources = {document.key: document.source for document in batch}
        refused = dict(written.refused)
        for new, (existing, distance) in screened.near.items():
            refused[new] = Failure(
                sources[new], "near-duplicate",
                f"key {new!r} is within {distance} bits of {existing!r} in {self.table}:"
                " not written (--on-near-duplicate error)")
        return written._replace(refused=refused)

    def _record_links(self, links: dict[str, tuple[str, int]]) -> None:
        """Link written near-duplicates in <table>_nearsim_links, as nearsim_guard records.

        The links table is the one ``nearsim_links`` makes: the table owner's,
        dropped with it, and the one a guard with action record writes.
        """
        row = self.conn.execute(
            sql.SQL("SELECT {}.nearsim_links(%s::pg_catalog.regclass)::pg_catalog.oid").format(
                self.table.extension), [self.table.quoted]).fetchone()
        assert row is not None
        name = self.conn.execute(
            "SELECT n.nspname, c.relname FROM pg_catalog.pg_class c"
            " JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace WHERE c.oid = %s",
            [row[0]]).fetchone()
        assert name is not None
        table = sql.Identifier(name[0], name[1])
        with self.conn.cursor().copy(sql.SQL(
                "COPY {} (new_key, existing_key, distance) FROM STDIN").format(table)) as copy:
            for new, (existing, distance) in links.items():
                copy.write_row((new, existing, distance))

    def _merge(self, user: UserLayout, batch: list[Prepared], rows: bytes) -> _Written:
        """Write a batch into a table of the user's own, through a staging table.

        New keys are inserted; a stored row whose text or mapped columns
        differ is updated only with ``replace`` (the table has no source to
        tell whether it came from the same file), and refused otherwise; the
        same values are unchanged.  The comparison is with the stored values
        themselves, in the query: the table has no content hash to compare.
        A batch with a row the table refuses (a value its column cannot hold,
        a constraint) is written row by row, and that row is reported.
        """
        staging = sql.Identifier("nearsim_load_staging")
        fields = [f"f{number}" for number in range(len(user.columns))]
        with self._begin():
            self.conn.execute(sql.SQL(
                "CREATE TEMPORARY TABLE {} (key text, body text, si bigint{}) ON COMMIT DROP"
            ).format(staging, sql.SQL("").join(
                sql.SQL(", {} text").format(sql.Identifier(field)) for field in fields)))
            self._copy(staging, rows, (*STAGED, *fields))
            screened = self._screen(staging, user.key, user.fingerprint)
            try:
                with self.conn.transaction():  # a savepoint: the batch goes on without it
                    written = self.conn.execute(user.merge_statement(
                        self.table.identifier, staging, self.options.replace)).fetchall()
                refused: dict[str, Failure] = {}
            except (psycopg.errors.DataError, psycopg.errors.IntegrityError):
                written, refused = self._merge_one_by_one(user, staging, batch)
            inserted = {key for key, new in written if new}
            updated = {key for key, new in written if not new}
            unwritten = [d.key for d in batch
                         if d.key not in inserted and d.key not in updated and d.key not in refused]
            if unwritten and not self.options.replace:
                sources = {document.key: document.source for document in batch}
                differing = self.conn.execute(
                    user.differing_statement(self.table.identifier, staging, unwritten)
                ).fetchall()
                for (key,) in differing:
                    refused[key] = Failure(
                        sources[key], "duplicate-key",
                        f"key {key!r} is stored in {self.table} with other values, and the"
                        f" table has no source column to tell whether they came from"
                        f" {sources[key]}: not replaced (load with --replace to replace it)")
            return self._screened(screened, batch, _Written(inserted, updated, refused))

    def _merge_one_by_one(
        self, user: UserLayout, staging: sql.Identifier, batch: list[Prepared]
    ) -> tuple[list[tuple[str, bool]], dict[str, Failure]]:
        """The merge of each document in its own savepoint; the refused ones reported."""
        written: list[tuple[str, bool]] = []
        refused: dict[str, Failure] = {}
        for document in batch:
            one = user.merge_statement(self.table.identifier, staging, self.options.replace,
                                       only=document.key)  # fmt: skip
            try:
                with self.conn.transaction():
                    written += self.conn.execute(one).fetchall()
            except (psycopg.errors.DataError, psycopg.errors.IntegrityError) as error:
                reason = error.diag.message_primary or str(error).strip().splitlines()[0]
                refused[document.key] = Failure(
                    document.source, "refused",
                    f"table {self.table} refused the document with key {document.key!r}:"
                    f" {reason}")
        return written, refused


# -- tables of the user's own ---------------------------------------------------


class ColumnError(TableError):
    """A column named for loading does not exist or cannot be loaded into."""


class _Column(NamedTuple):
    type: str  # without modifiers, as format_type prints it (quoted where needed)
    typed: str  # with its modifiers: varchar(20), numeric(10,2)
    generated: bool
    always_identity: bool
    unique: bool  # a unique index of its own that ON CONFLICT can use
    required: bool  # NOT NULL without a default


_COLUMNS_QUERY = """
SELECT a.attname, pg_catalog.format_type(a.atttypid, NULL),
       pg_catalog.format_type(a.atttypid, a.atttypmod), a.attgenerated <> '',
       a.attidentity = 'a',
       EXISTS (SELECT FROM pg_catalog.pg_index i
               WHERE i.indrelid = a.attrelid AND i.indisunique AND i.indimmediate
                 AND i.indisvalid AND i.indnkeyatts = 1 AND i.indkey[0] = a.attnum
                 AND i.indpred IS NULL AND i.indexprs IS NULL),
       a.attnotnull AND NOT a.atthasdef AND a.attidentity = '' AND a.attgenerated = ''
FROM pg_catalog.pg_attribute a
WHERE a.attrelid = %s::pg_catalog.regclass AND a.attnum > 0 AND NOT a.attisdropped
ORDER BY a.attnum"""


class MappedColumn(NamedTuple):
    """A record field loaded into a column of the user's table."""

    field: str
    column: str
    type: str  # the staged text is cast to this; assigning it checks the modifiers
    # (a varchar(20) refuses longer text, where a cast to varchar(20) would cut it)
    typed: str  # with modifiers: how a new value compares with the stored one
    # (1.5 is stored as 1.50 in a numeric(10,2))


@dataclass(frozen=True)
class UserLayout:
    """Which columns of a table of the user's own the loader writes.

    The key (cast to its column's type), the text, its fingerprint and the
    mapped record fields.  Names are quoted with psycopg.sql; types are
    written as the server's format_type prints them, quoted where needed.
    """

    key: str
    key_type: str
    text: str
    fingerprint: str
    columns: tuple[MappedColumn, ...]

    def shape(self) -> RowShape:
        return RowShape(self.key, self.key_type, len(self.columns))

    def _compared(self, prefix: str) -> sql.Composed:
        """The stored values a new row must equal to be unchanged, as text
        (json has no equality operator; every type prints as text)."""
        names = [self.text, *(column.column for column in self.columns)]
        return sql.SQL("ROW({})").format(sql.SQL(", ").join(
            sql.SQL("{}.{}::pg_catalog.text").format(sql.Identifier(prefix), sql.Identifier(name))
            for name in names))  # fmt: skip

    # The statements take no parameters (values are literals): a "%" in a
    # column's name would be read as a placeholder.

    def merge_statement(
        self, table: sql.Composable, staging: sql.Identifier, replace: bool,
        only: str | None = None,
    ) -> sql.Composed:
        """INSERT ... ON CONFLICT from the staging table (the row of key ``only``),
        returning (key, inserted)."""
        names = [self.key, self.text, self.fingerprint, *(c.column for c in self.columns)]
        values = [
            sql.SQL("CAST(s.key AS {})").format(sql.SQL(self.key_type)),
            sql.SQL("s.body"), sql.SQL("s.si"),
            *(sql.SQL("CAST(s.{} AS {})").format(sql.Identifier(f"f{number}"), sql.SQL(c.type))
              for number, c in enumerate(self.columns)),
        ]  # fmt: skip
        action: sql.Composable = sql.SQL("DO NOTHING")
        if replace:
            action = sql.SQL("DO UPDATE SET {} WHERE {} IS DISTINCT FROM {}").format(
                sql.SQL(", ").join(
                    sql.SQL("{0} = EXCLUDED.{0}").format(sql.Identifier(name))
                    for name in names[1:]),
                self._compared("t"), self._compared("excluded"))
        # xmax is 0 in a row this statement inserted, set in one it updated
        where = sql.SQL("" if only is None else "WHERE s.key = {}").format(sql.Literal(only))
        return sql.SQL(
            "INSERT INTO {table} AS t ({names}) SELECT {values} FROM {staging} AS s {where}"
            " ON CONFLICT ({key}) {action} RETURNING t.{key}::pg_catalog.text, (t.xmax = 0)"
        ).format(table=table, names=sql.SQL(", ").join(map(sql.Identifier, names)),
                 values=sql.SQL(", ").join(values), staging=staging, where=where,
                 key=sql.Identifier(self.key), action=action)  # fmt: skip

    def differing_statement(
        self, table: sql.Composable, staging: sql.Identifier, keys: list[str]
    ) -> sql.Composed:
        """The staged keys (of ``keys``) whose stored row has other values."""
        staged = sql.SQL("ROW({})").format(sql.SQL(", ").join([
            sql.SQL("s.body"),
            *(sql.SQL("CAST(s.{} AS {})::pg_catalog.text").format(
                sql.Identifier(f"f{number}"), sql.SQL(c.typed))
              for number, c in enumerate(self.columns)),
        ]))  # fmt: skip
        return sql.SQL(
            "SELECT s.key FROM {staging} AS s JOIN {table} AS t ON t.{key} = CAST(s.key AS {type})"
            " WHERE s.key = ANY ({keys}::pg_catalog.text[]) AND {stored} IS DISTINCT FROM {staged}"
        ).format(staging=staging, table=table, key=sql.Identifier(self.key),
                 type=sql.SQL(self.key_type), keys=sql.Literal(keys), stored=self._compared("t"),
                 staged=staged)


def _find_column(name: str, columns: dict[str, _Column]) -> str | None:
    """A column by its name as the catalog has it, or written as in SQL ("a""b")."""
    if name in columns:
        return name
    if len(name) >= 2 and name[0] == name[-1] == '"':
        unquoted = name[1:-1].replace('""', '"')
        if unquoted in columns:
            return unquoted
    return None


def user_layout(
    table: DocumentTable, registration: Registration, options: LoadOptions
) -> UserLayout:
    """The columns to load into, checked before any document is read.

    The key and text columns default to the ones the table is enabled with;
    the text must go to the fingerprinted column, and the key to a column
    with a unique index of its own (ON CONFLICT finds stored rows by it).
    """
    columns = {str(name): _Column(*facts) for name, *facts in table.conn.execute(
        _COLUMNS_QUERY, [table.quoted]).fetchall()}  # fmt: skip
    listed = ", ".join(columns)

    def column(name: str, what: str) -> str:
        found = _find_column(name, columns)
        if found is None:
            raise ColumnError(f"table {table} has no column {name!r} ({what}); its columns are"
                              f" {listed}")  # fmt: skip
        return found

    key = column(options.key_column or registration.key_column, "the key column")
    if columns[key].type not in KEY_TYPES:
        raise ColumnError(f"key column {key!r} of table {table} has type {columns[key].type};"
                          f" nearsim-load loads keys of type {', '.join(KEY_TYPES)}")
    if not columns[key].unique:
        raise ColumnError(f"key column {key!r} of table {table} needs a unique index of its own"
                          " that is not deferrable (PRIMARY KEY or UNIQUE): stored documents"
                          " are found by it")  # fmt: skip
    text = column(options.text_column or registration.text_column, "the text column")
    if text != registration.text_column:
        raise ColumnError(f"table {table} is enabled with text column"
                          f" {registration.text_column!r}: its fingerprints are of that column,"
                          f" so the text is loaded into it, not into {text!r}")  # fmt: skip
    own = {key: "the key column", text: "the text column",
           registration.hash_column: "the fingerprint column"}
    mapped: list[MappedColumn] = []
    for record_field, name in options.columns:
        found = column(name, f"for field {record_field!r}")
        facts = columns[found]
        problem = (
            f"is {own[found]}, which the loader fills" if found in own
            else "is a generated column" if facts.generated
            else "is GENERATED ALWAYS AS IDENTITY" if facts.always_identity
            else "has another field already" if any(m.column == found for m in mapped)
            else None
        )  # fmt: skip
        if problem is not None:
            raise ColumnError(f"column {found!r} of table {table} {problem} (for field"
                              f" {record_field!r})")
        mapped.append(MappedColumn(record_field, found, facts.type, facts.typed))
    loaded = {*own, *(m.column for m in mapped)}
    required = [name for name, facts in columns.items() if facts.required and name not in loaded]
    if required:
        raise ColumnError(f"table {table} needs a value for column {required[0]!r} (NOT NULL"
                          " without a default): map a record field to it with --column"
                          f" FIELD={required[0]}")  # fmt: skip
    return UserLayout(key, columns[key].type, text, registration.hash_column, tuple(mapped))


def load(
    conn: psycopg.Connection[Any],
    lookup_conn: psycopg.Connection[Any],
    table: DocumentTable,
    inputs: Iterable[Input],
    options: LoadOptions | None = None,
    reporter: Reporter | None = None,
    read: BytesRead | None = None,
) -> LoadSummary:
    """Load ``inputs`` into ``table`` (see :class:`Loader`); ``read`` is the
    counter given to :func:`iter_inputs`, for the progress of record files."""
    return Loader(conn, lookup_conn, table, options, reporter, read).run(inputs)


def load_paths(
    paths: Sequence[str],
    table: str = DEFAULT_TABLE,
    *,
    dsn: str | None = None,
    create: bool = False,
    bands: int | None = None,
    source_options: SourceOptions | None = None,
    options: LoadOptions | None = None,
    reporter: Reporter | None = None,
    stdin: IO[str] | None = None,
) -> LoadSummary:
    """Load files, directories or record files into a table: what ``nearsim-load`` does.

    ``paths`` are files, directories (walked) or ``-`` for paths read from
    ``stdin``; ``create`` makes the table (and the extension) if missing.
    The connection is found as :func:`nearsim.connect` finds it.  With
    ``options.columns`` (or key and text columns), the table is one of the
    user's own, enabled with ``nearsim_enable``; records bring those fields.

    >>> summary = nearsim.load(["letters/"], table="letters", create=True)  # doctest: +SKIP
    >>> summary.loaded, summary.failed  # doctest: +SKIP
    (120, 0)
    """
    options = options or LoadOptions()
    if create and (options.key_column or options.text_column or options.columns):
        raise TableError("create makes a table of the loader's own columns; key_column,"
                         " text_column and columns are for a table of your own that exists")
    source_options = source_options or SourceOptions()
    if options.columns:
        source_options = replace(source_options,
                                 fields=tuple(name for name, _ in options.columns))
    # No server-side prepared statements: behind a pooler in transaction
    # mode the next transaction may run on another server connection.
    with connect(dsn, autocommit=True, prepare_threshold=None) as conn, \
            connect(dsn, prepare_threshold=None) as lookup_conn:
        if create:
            ensure_extension(conn)
        documents = DocumentTable(conn, table)
        if create:
            documents.create(bands, options.profile)
        read = BytesRead()
        inputs = iter_inputs(paths, replace(source_options, decodings=True), stdin=stdin,
                             read=read)  # fmt: skip
        loader = Loader(conn, lookup_conn, documents, options, reporter, read)
        summary = loader.run(inputs)
        if (summary.loaded or summary.updated) and summary.error is None \
                and not summary.interrupted:
            loader.analyze()
    return summary
