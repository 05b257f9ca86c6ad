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

Bad inputs become :class:`~nearsim.client.sources.Failure` reports and never stop
the run.
"""

from __future__ import annotations

import hashlib
import os
import queue
import signal
import struct
import threading
import time
from collections import Counter, deque
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import Future, ProcessPoolExecutor
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field, replace
from functools import partial
from typing import IO, Any, NamedTuple

import psycopg
from psycopg import sql

from ..core.fingerprint import PROFILE
from ..core.profiles import Profile, ProfileError, canonical, simhash_many
from .connect import ProfileMismatch, connect, ensure_extension
from .documents import DEFAULT_TABLE, FINGERPRINT_COLUMN, DocumentTable
from .extract import InputError, check_document, read_document
from .sources import Failure, FileInput, Input, RecordInput, SourceOptions, iter_inputs

DEFAULT_MAX_BYTES = 64 * 1024 * 1024
COLUMNS = ("key", "source", "content_hash", "body", FINGERPRINT_COLUMN)

SEND_BYTES = 256 * 1024  # rows are sent to the server in pieces of about this size

# Work is sent to the workers in tasks of this many documents (fewer for big
# texts), and at most this many tasks per worker are queued or done but not
# yet taken: enough to keep the workers busy while a batch is being written
# (2,000 documents by default), and at most 64 MiB per worker.
TASK_DOCUMENTS = 64
TASK_BYTES = 4 * 1024 * 1024
QUEUED_TASKS_PER_WORKER = 16



@dataclass(frozen=True)
class LoadOptions:
    max_bytes: int = DEFAULT_MAX_BYTES
    encoding: str = "utf-8"
    batch_rows: int = 2000
    batch_bytes: int = 32 * 1024 * 1024
    workers: int | None = None  # default: one per CPU
    server_side: bool = False  # let the database compute the fingerprints
    profile: str | None = None  # fingerprint profile; by default the table's


@dataclass
class LoadSummary:
    loaded: int = 0
    updated: int = 0
    unchanged: int = 0
    failed: Counter[str] = field(default_factory=Counter)
    bytes: int = 0
    seconds: float = 0.0
    interrupted: bool = False
    error: str | None = None  # why the run stopped early (the connection was lost)

    @property
    def failures(self) -> int:
        return sum(self.failed.values())

    def as_dict(self) -> dict[str, Any]:
        return {
            "loaded": self.loaded, "updated": self.updated, "unchanged": self.unchanged,
            "failed": self.failures, "failed_by_reason": dict(sorted(self.failed.items())),
            "bytes": self.bytes, "seconds": round(self.seconds, 3),
            "interrupted": self.interrupted,
            **({"error": self.error} if self.error is not None else {}),
        }  # fmt: skip


class Prepared(NamedTuple):
    """A document ready to be written (tuples pickle quickly between processes)."""

    key: str
    source: str
    size: int  # bytes of its text in UTF-8
    content_hash: bytes
    fingerprint: int | None
    row_bytes: int  # the length of its row in Done.rows


class Done(NamedTuple):
    """A worker's results for one task.

    The rows of the prepared documents (their values of COLUMNS in COPY's
    binary format) come back to back in one string, which the main process
    sends on as it is: it handles a task, not each document.
    """

    others: list[Unchanged | Failure]
    prepared: list[Prepared]
    rows: bytes


class Unchanged(NamedTuple):
    key: str
    size: int


class _Text(NamedTuple):
    """A document read, hashed, not yet fingerprinted (stays in the worker)."""

    key: str
    source: str
    text: str
    encoded: bytes
    content_hash: bytes


Outcome = Prepared | Unchanged | Failure


class Task(NamedTuple):
    item: FileInput | RecordInput
    stored_hash: bytes | None


class Reporter:
    """What the loader tells its caller; the default tells nothing."""

    def failure(self, failure: Failure) -> None:
        """One input could not be loaded."""

    def progress(self, documents: int, size: int) -> None:
        """``documents`` more inputs are done, ``size`` bytes of them."""


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


def prepare_many(tasks: list[Task], options: LoadOptions) -> Done:
    """Read, check, hash and fingerprint inputs (runs in a worker).

    The new and changed texts are fingerprinted together, which is much
    quicker than one at a time for short documents.
    """
    read = [_read(task, options) for task in tasks]
    texts = [r for r in read if isinstance(r, _Text)]
    fingerprints = (
        [None] * len(texts) if options.server_side
        else simhash_many([t.text for t in texts], options.profile)
    )
    rows = [_row(text, fingerprint) for text, fingerprint in zip(texts, fingerprints,
                                                                  strict=True)]  # fmt: skip
    prepared = [
        Prepared(t.key, t.source, len(t.encoded), t.content_hash, fingerprint, len(row))
        for t, fingerprint, row in zip(texts, fingerprints, rows, strict=True)
    ]
    others = [r for r in read if not isinstance(r, _Text)]
    return Done(others, prepared, b"".join(rows))


def prepare(task: Task, options: LoadOptions) -> Outcome:
    """Read, check, hash and fingerprint one input."""
    done = prepare_many([task], options)
    return (done.others or done.prepared)[0]


def _read(task: Task, options: LoadOptions) -> _Text | Unchanged | Failure:
    """The input's text and hash, or why it cannot be loaded."""
    item = task.item
    source = item.key if isinstance(item, FileInput) else item.source  # storable
    try:
        if isinstance(item, FileInput):
            text, encoded = read_document(item.path, max_bytes=options.max_bytes,
                                          encoding=options.encoding)  # fmt: skip
        else:
            text, encoded = check_document(item.text, max_bytes=options.max_bytes)
    except InputError as error:
        reason = error.reason
        if reason == "not-found" and isinstance(item, FileInput):
            reason = "vanished"  # it was there when the inputs were listed
        return Failure(source, reason, error.message, error.offset)
    digest = hashlib.sha256(encoded).digest()
    if digest == task.stored_hash:
        return Unchanged(item.key, len(encoded))
    return _Text(item.key, source, text, encoded, digest)


# COPY's binary format: a signature, flags and header extension length
# before the rows; a field count of -1 after them.
COPY_HEADER = b"PGCOPY\n\xff\r\n\x00" + bytes(8)
COPY_TRAILER = b"\xff\xff"
_NULL = b"\xff\xff\xff\xff"
_LENGTH = struct.Struct("!i")
_FIELDS = struct.Struct("!hi")  # the field count, then the first field's length
_BIGINT = struct.Struct("!iq")  # its length (8), then the value


def _row(document: _Text, fingerprint: int | None) -> bytes:
    key, source = document.key.encode(), document.source.encode()
    return b"".join((
        _FIELDS.pack(len(COLUMNS), len(key)), key,
        _LENGTH.pack(len(source)), source,
        _LENGTH.pack(len(document.content_hash)), document.content_hash,
        _LENGTH.pack(len(document.encoded)), document.encoded,
        _NULL if fingerprint is None else _BIGINT.pack(8, fingerprint),
    ))  # fmt: skip


# -- the main process ----------------------------------------------------------


def _task_size(item: FileInput | RecordInput) -> int:
    return len(item.text) if isinstance(item, RecordInput) else item.size


def _chunks(inputs: Iterable[Input], on_failure: Callable[[Failure], None]) -> Iterator[
    list[FileInput | RecordInput]
]:
    """Inputs grouped into worker tasks; failures found while listing go straight out."""
    chunk: list[FileInput | RecordInput] = []
    size = 0
    for item in inputs:
        if isinstance(item, Failure):
            on_failure(item)
            continue
        chunk.append(item)
        size += _task_size(item)
        if len(chunk) >= TASK_DOCUMENTS or size >= TASK_BYTES:
            yield chunk
            chunk, size = [], 0
    if chunk:
        yield chunk


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


class Loader:
    """Loads documents into one table (see the module docstring)."""

    def __init__(
        self,
        conn: psycopg.Connection[Any],
        lookup_conn: psycopg.Connection[Any],
        table: DocumentTable,
        options: LoadOptions | None = None,
        reporter: Reporter | None = None,
    ) -> None:
        self.conn = conn
        self.lookup_conn = lookup_conn
        self.table = table
        self.options = options or LoadOptions()
        self.reporter = reporter or Reporter()
        self.summary = LoadSummary()
        self.seen: set[str] = set()
        self.nothing_stored = False
        self.open_copy: tuple[ExitStack, psycopg.Copy] | None = None
        self.unsent = bytearray()  # rows for the open COPY
        self.merging = False
        self.batch: list[tuple[list[Prepared], bytes]] = []  # documents and their rows
        self.batch_count = 0
        self.batch_bytes = 0
        self.settings: dict[str, str] = {}  # set in each batch's transaction

    def check(self) -> None:
        """Refuse tables this client cannot fill correctly."""
        if not self.conn.autocommit:
            raise ValueError("the loader needs a connection in autocommit mode: each batch is"
                             " a transaction of its own")
        self.table.check_layout()
        registration = self.table.registration()
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
            # declares their profile instead of computing each again.
            self.settings["nearsim.profile"] = profile
        self.options = replace(self.options, profile=profile)

    def run(self, inputs: Iterable[Input]) -> LoadSummary:
        """Load every input; returns the counts (also on Ctrl-C, marked interrupted)."""
        self.check()
        started = time.perf_counter()
        self.nothing_stored = self._is_empty()
        self._raise_work_mem()
        workers = self.options.workers or os.cpu_count() or 1
        executor = ProcessPoolExecutor(workers, initializer=_start_worker)
        pending: deque[Future[Done]] = deque()
        work = partial(prepare_many, options=self.options)
        listing = _Listing(self._listed(inputs), depth=workers * QUEUED_TASKS_PER_WORKER)
        try:
            with self._stopping_gracefully():
                for item in listing:
                    if isinstance(item, Failure):
                        self._fail(item)
                        continue
                    pending.append(executor.submit(work, item))
                    while len(pending) >= workers * QUEUED_TASKS_PER_WORKER:
                        self._take(pending.popleft().result())
                    if self.summary.interrupted:
                        break
                while pending and not self.summary.interrupted:
                    self._take(pending.popleft().result())
                self._flush()
        except KeyboardInterrupt:
            self.summary.interrupted = True
        except psycopg.OperationalError as error:
            # Whole batches are committed or not: the summary says which
            # were, and a rerun finishes the load.
            first_line = (str(error).strip().splitlines() or [type(error).__name__])[0]
            self.summary.error = f"database connection lost: {first_line}"
        finally:
            # Cleaning up must end with the summary even if another Ctrl-C
            # comes meanwhile: that one only stops the waiting.
            try:
                self._abandon_copy()  # after an error; _flush has closed it otherwise
                listing.close()
                executor.shutdown(wait=True, cancel_futures=True)
            except KeyboardInterrupt:
                self.summary.interrupted = True
                executor.shutdown(wait=False, cancel_futures=True)
            self.summary.seconds = time.perf_counter() - started
        return self.summary

    def _raise_work_mem(self) -> None:
        """Let the batch's transition table (whole rows, for the bucket trigger)
        stay in memory instead of spilling to a temporary file; never lowered."""
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

    def _listed(self, inputs: Iterable[Input]) -> Iterator[list[Task] | Failure]:
        """Worker tasks with the stored hashes of their keys, and listing failures."""
        failures: list[Failure] = []
        for chunk in _chunks(inputs, failures.append):
            yield from failures
            failures.clear()
            yield self._tasks(chunk)
        yield from failures

    @contextmanager
    def _stopping_gracefully(self) -> Iterator[None]:
        """On SIGINT or SIGTERM, finish the batch at hand and stop.

        A second signal stops at once (its batch is rolled back).
        """
        if threading.current_thread() is not threading.main_thread():
            yield
            return
        previous = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)}

        def stop(signum: int, frame: object) -> None:
            self.summary.interrupted = True
            signal.signal(signal.SIGINT, signal.default_int_handler)
            signal.signal(signal.SIGTERM, signal.SIG_DFL)

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
        self.reporter.progress(1, 0)

    def _tasks(self, chunk: list[FileInput | RecordInput]) -> list[Task]:
        """The chunk with the stored content hashes of its keys."""
        if self.nothing_stored:
            # A first load asks nothing: any key stored since by another
            # loader makes the batch's COPY fail and merge instead.
            return [Task(item, None) for item in chunk]
        keys = [item.key for item in chunk]
        rows = self.lookup_conn.execute(
            sql.SQL("SELECT key, content_hash FROM {} WHERE key = ANY (%s)").format(
                self.table.identifier
            ),
            [keys],
        ).fetchall()
        self.lookup_conn.rollback()  # no snapshot held open between chunks
        stored = dict(rows)
        return [Task(item, stored.get(item.key)) for item in chunk]

    def _take(self, done: Done) -> None:
        for outcome in done.others:
            if isinstance(outcome, Failure):
                self._fail(outcome)
            elif self._first(outcome.key, outcome.key):
                self.summary.unchanged += 1
                self.summary.bytes += outcome.size
                self.reporter.progress(1, outcome.size)
        keys = [document.key for document in done.prepared]
        if self.seen.isdisjoint(keys) and len(set(keys)) == len(keys):
            self.seen.update(keys)
            self._add(done.prepared, done.rows)
            return
        start = 0  # a key met before: one document at a time
        for document in done.prepared:
            end = start + document.row_bytes
            if self._first(document.key, document.source):
                self._add([document], done.rows[start:end])
            start = end

    def _first(self, key: str, source: str) -> bool:
        """Whether ``key`` is new in this run; a failure if not."""
        if key not in self.seen:
            self.seen.add(key)
            return True
        self._fail(Failure(source, "duplicate-key",
                           f"key {key!r} was already loaded in this run"))  # fmt: skip
        return False

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
            if not self.options.server_side and not self.merging:
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
                    self.table.identifier)))  # fmt: skip
                self.open_copy = (stack, copy)
                self.unsent += COPY_HEADER
            self.unsent += rows
            if len(self.unsent) >= SEND_BYTES:
                self.open_copy[1].write(self.unsent)
                self.unsent.clear()
        except psycopg.errors.UniqueViolation:
            self._abandon_copy()
            self.merging = True  # the rest of the batch is merged at its end

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
        if self.options.server_side or merging:
            inserted, updated = self._upsert(rows)
        else:
            try:
                assert self.open_copy is not None
                (stack, copy), self.open_copy = self.open_copy, None
                self.unsent += COPY_TRAILER
                copy.write(self.unsent)
                self.unsent.clear()
                stack.close()  # ends the COPY, then commits
                inserted, updated = {document.key for document in batch}, set()
            except psycopg.errors.UniqueViolation:
                # Some keys are stored already (changed documents, or another
                # loader got there first): merge instead.
                inserted, updated = self._upsert(rows)
        for document in batch:
            if document.key in inserted:
                self.summary.loaded += 1
            elif document.key in updated:
                self.summary.updated += 1
            else:
                self.summary.unchanged += 1
            self.summary.bytes += document.size
        self.reporter.progress(len(batch), sum(document.size for document in batch))

    @staticmethod
    def _copy_statement(target: sql.Composable) -> sql.Composed:
        return sql.SQL("COPY {} ({}) FROM STDIN (FORMAT binary)").format(
            target, sql.SQL(", ").join(map(sql.Identifier, COLUMNS))
        )

    def _copy(self, target: sql.Composable, rows: bytes) -> None:
        with self.conn.cursor().copy(self._copy_statement(target)) as copy:
            copy.write(b"".join((COPY_HEADER, rows, COPY_TRAILER)))

    def _upsert(self, rows: bytes) -> tuple[set[str], set[str]]:
        """Insert new keys, update changed ones; returns the keys inserted and updated."""
        staging = sql.Identifier("nearsim_load_staging")
        fingerprint: sql.Composable = sql.SQL("s.si")
        if self.options.server_side:
            fingerprint = sql.SQL("{}.simhash(s.body, {})").format(
                self.table.extension, sql.Literal(self.options.profile or PROFILE))
        with self._begin():
            # dropped at commit: nothing of the loader outlives its transaction
            self.conn.execute(
                sql.SQL(
                    """CREATE TEMPORARY TABLE {} (
                        key text, source text, content_hash bytea, body text, si bigint
                    ) ON COMMIT DROP"""
                ).format(staging)
            )
            self._copy(staging, rows)
            written = self.conn.execute(
                sql.SQL(
                    """INSERT INTO {table} AS t (key, source, content_hash, body, si)
                       SELECT s.key, s.source, s.content_hash, s.body, {fingerprint}
                       FROM {staging} AS s
                       ON CONFLICT (key) DO UPDATE
                       SET source = EXCLUDED.source, content_hash = EXCLUDED.content_hash,
                           body = EXCLUDED.body, si = EXCLUDED.si, loaded_at = pg_catalog.now()
                       WHERE t.content_hash IS DISTINCT FROM EXCLUDED.content_hash
                       RETURNING t.key, (t.xmax = 0) AS inserted"""
                    # xmax is 0 in a row this statement inserted, set in one it updated
                ).format(table=self.table.identifier, staging=staging, fingerprint=fingerprint)
            ).fetchall()
        return (
            {key for key, inserted in written if inserted},
            {key for key, inserted in written if not inserted},
        )


def load(
    conn: psycopg.Connection[Any],
    lookup_conn: psycopg.Connection[Any],
    table: DocumentTable,
    inputs: Iterable[Input],
    options: LoadOptions | None = None,
    reporter: Reporter | None = None,
) -> LoadSummary:
    """Load ``inputs`` into ``table`` (see :class:`Loader`)."""
    return Loader(conn, lookup_conn, table, options, reporter).run(inputs)


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
    The connection is found as :func:`nearsim.connect` finds it.

    >>> summary = nearsim.load(["letters/"], table="letters", create=True)  # doctest: +SKIP
    >>> summary.loaded, summary.failed  # doctest: +SKIP
    (120, 0)
    """
    options = options or LoadOptions()
    # No server-side prepared statements: behind a pooler in transaction
    # mode the next transaction may run on another server connection.
    with connect(dsn, autocommit=True, prepare_threshold=None) as conn, \
            connect(dsn, prepare_threshold=None) as lookup_conn:
        if create:
            ensure_extension(conn)
        documents = DocumentTable(conn, table)
        if create:
            documents.create(bands, options.profile)
        inputs = iter_inputs(paths, source_options or SourceOptions(), stdin=stdin)
        summary = load(conn, lookup_conn, documents, inputs, options, reporter)
        if (summary.loaded or summary.updated) and summary.error is None \
                and not summary.interrupted:
            documents.analyze()
    return summary
