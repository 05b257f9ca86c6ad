"""Bulk loading of documents: read, fingerprint in parallel, COPY in batches.

Worker processes read and extract the files (or check the records' texts),
hash the text, compute its fingerprint and make its row in COPY's binary
format; the main process hands the rows to the writer
(:class:`~nearsim.client.writers.BatchWriter`), which writes each batch in
one transaction (a batch of new keys streamed by one ``COPY``), while a
thread walks the inputs ahead and looks up the stored content hashes of
their keys (.stored).  A batch is all or nothing, so an interrupted run
leaves only whole batches behind, and a rerun skips what is already there:
a document whose key is stored with the same content hash is "unchanged"
and is neither fingerprinted nor sent again; a stored key with another hash
is updated (the batch is merged through a temporary table).

A key belongs to the file it was loaded from (:func:`~nearsim.client.sources.origin`):
a stored key that came from another file is not replaced unless
``LoadOptions.replace`` says so, and the same key twice in one run keeps the
first.  Either way the other is a failure that names both sources.

A table of the user's own (an enabled table without the loader's columns)
takes the key, the text, the fingerprint and the mapped record fields
(``LoadOptions.columns``) through a merge of each batch: see
:class:`~nearsim.client.layouts.UserLayout` and :mod:`nearsim.client.writers`.

Bad inputs become :class:`~nearsim.client.sources.Failure` reports and never stop
the run.  The reporter hears of every input once, when it is done (read,
checked and fingerprinted), with the bytes read for it.
"""

from __future__ import annotations

import os
import signal
import threading
import time
from collections import Counter, deque
from collections.abc import Iterable, Iterator, Sequence
from concurrent.futures import Future, ProcessPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from functools import partial
from typing import IO, Any

import psycopg
from psycopg import sql

from .charsets import override_note
from .connect import ProfileMismatch, connect, ensure_extension
from .database_encoding import Repertoire
from .documents import (
    DEFAULT_TABLE,
    DocumentTable,
    TableError,
)  # fmt: skip
from .layouts import ColumnError, UserLayout
from .listing import Listing
from .load_options import DEFAULT_MAX_BYTES, LoadOptions
from .rows import (
    Done,
    Prepared,
    Task,
    Unchanged,
    prepare,
    prepare_many,
    start_worker,
)  # fmt: skip
from .sources import (
    BytesRead,
    Decoding,
    Failure,
    Input,
    SourceOptions,
    iter_inputs,
)  # fmt: skip
from .storable import storable
from .stored import StoredKeys
from .target import check_target
from .writers import BatchWriter

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


class Loader:
    """Loads documents into one table (see the module docstring).

    It schedules: the listing thread, the worker processes, the batches,
    Ctrl-C and the summary.  The rest are modules of their own: the table
    checked (.target), the stored keys looked up ahead (.stored), what a
    worker makes of a document (.rows), what the database's encoding cannot
    store (.storable), a table of the user's own (.layouts) and how a batch
    is written, streamed or staged, in a transaction that declares its
    fingerprints (.writers).

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
        self.batch: list[tuple[list[Prepared], bytes]] = []  # documents and their rows
        self.batch_count = 0
        self.batch_bytes = 0
        # lookup_conn is shared by the listing thread and the repertoire
        self.lookup_lock = threading.RLock()
        self.repertoire = Repertoire(lookup_conn, self.lookup_lock)
        self.writer = BatchWriter(conn, table, self.options)
        self.stored = StoredKeys(lookup_conn, self.lookup_lock, table, self.options,
                                 self.repertoire, self.read)  # fmt: skip

    def check(self) -> None:
        """Refuse tables this client cannot fill correctly (see .target)."""
        target = check_target(self.conn, self.lookup_conn, self.table, self.options)
        self.options = self.writer.options = self.stored.options = target.options
        self.user = self.writer.user = target.user
        self.kept = self.writer.kept = self.stored.kept = target.kept
        self.not_kept = target.not_kept

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
        self.stored.ask = self.user is None and not self._is_empty()
        self.writer.raise_work_mem()
        workers = self.options.workers or os.cpu_count() or 1
        queued = workers * QUEUED_TASKS_PER_WORKER
        executor = ProcessPoolExecutor(workers, initializer=start_worker)
        pending: deque[tuple[Future[Done], int]] = deque()  # and the bytes read for each
        shape = None if self.user is None else self.user.shape()
        work = partial(prepare_many, options=self.options, shape=shape,
                       list_characters=self.repertoire.converts, kept=self.kept)  # fmt: skip
        listing = Listing(self.stored.listed(inputs), depth=queued)
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
                self.writer.abandon()  # after an error; _flush has ended the batch otherwise
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
        """Fresh planner statistics after a bulk load (see BatchWriter.analyze)."""
        self.writer.analyze()

    def _is_empty(self) -> bool:
        row = self.lookup_conn.execute(
            sql.SQL("SELECT NOT EXISTS (SELECT FROM {})").format(self.table.identifier)
        ).fetchone()
        self.lookup_conn.rollback()
        return bool(row and row[0])

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
            done = storable(done, self.repertoire, self.user)
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
            self.writer.send(rows[:cut])
            documents, rows = documents[len(taken):], rows[cut:]
            if (self.batch_count >= self.options.batch_rows
                    or self.batch_bytes >= self.options.batch_bytes):
                self._flush()

    def _flush(self) -> None:
        """End the batch's transaction: all its documents are stored, or none."""
        if not self.batch:
            return
        pieces, self.batch, self.batch_count, self.batch_bytes = self.batch, [], 0, 0
        batch = [document for documents, _ in pieces for document in documents]
        rows = b"".join(piece_rows for _, piece_rows in pieces)
        written = self.writer.write(batch, rows)
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


# The loader's surface; the rows, layouts and writers are modules of their own.
__all__ = [
    "DEFAULT_MAX_BYTES",
    "ColumnError",
    "LoadOptions",
    "LoadSummary",
    "Loader",
    "ProfileMismatch",
    "Reporter",
    "Task",
    "load",
    "load_paths",
    "prepare",
]
