"""Bulk loading of documents: read, fingerprint in parallel, COPY in batches.

Worker processes read and extract the files (or check the records' texts),
hash the text and compute its fingerprint; the main process writes batches
of rows with ``COPY``, one transaction per batch.  A batch is all or
nothing, so an interrupted run leaves only whole batches behind, and a rerun
skips what is already there: a document whose key is stored with the same
content hash is "unchanged" and is neither fingerprinted nor sent again; a
stored key with another hash is updated.

Bad inputs become :class:`~nearsim.sources.Failure` reports and never stop
the run.
"""

from __future__ import annotations

import hashlib
import os
import signal
import threading
import time
from collections import Counter, deque
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Future, ProcessPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import partial
from typing import Any

import psycopg
from psycopg import sql

from .documents import FINGERPRINT_COLUMN, DocumentTable
from .extract import InputError, check_text, read_text
from .fingerprint import PROFILE, simhash
from .sources import Failure, FileInput, Input, RecordInput

DEFAULT_MAX_BYTES = 64 * 1024 * 1024
COLUMNS = ("key", "source", "content_hash", "body", FINGERPRINT_COLUMN)

# Work is sent to the workers in tasks of this many documents (fewer for big
# texts), and at most this many tasks per worker are queued or done but not
# yet taken: enough to keep the workers busy while a batch is being written
# (2,000 documents by default), and at most 64 MiB per worker.
TASK_DOCUMENTS = 64
TASK_BYTES = 4 * 1024 * 1024
QUEUED_TASKS_PER_WORKER = 16


class ProfileMismatch(RuntimeError):
    """The table's fingerprints come from another profile than this client's."""


@dataclass(frozen=True)
class LoadOptions:
    max_bytes: int = DEFAULT_MAX_BYTES
    encoding: str = "utf-8"
    batch_rows: int = 2000
    batch_bytes: int = 32 * 1024 * 1024
    workers: int | None = None  # default: one per CPU
    server_side: bool = False  # let the database compute the fingerprints


@dataclass
class LoadSummary:
    loaded: int = 0
    updated: int = 0
    unchanged: int = 0
    failed: Counter[str] = field(default_factory=Counter)
    bytes: int = 0
    seconds: float = 0.0
    interrupted: bool = False

    @property
    def failures(self) -> int:
        return sum(self.failed.values())

    def as_dict(self) -> dict[str, Any]:
        return {
            "loaded": self.loaded, "updated": self.updated, "unchanged": self.unchanged,
            "failed": self.failures, "failed_by_reason": dict(sorted(self.failed.items())),
            "bytes": self.bytes, "seconds": round(self.seconds, 3),
            "interrupted": self.interrupted,
        }  # fmt: skip


@dataclass(frozen=True, slots=True)
class Prepared:
    """A document ready to be written."""

    key: str
    source: str
    text: str
    content_hash: bytes
    fingerprint: int | None
    size: int


@dataclass(frozen=True, slots=True)
class Unchanged:
    key: str
    size: int


Outcome = Prepared | Unchanged | Failure


@dataclass(frozen=True, slots=True)
class Task:
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


def prepare(task: Task, options: LoadOptions) -> Outcome:
    """Read, check, hash and fingerprint one input (runs in a worker)."""
    item = task.item
    source = item.path if isinstance(item, FileInput) else item.source
    try:
        if isinstance(item, FileInput):
            text = read_text(item.path, max_bytes=options.max_bytes, encoding=options.encoding)
        else:
            text = check_text(item.text, max_bytes=options.max_bytes)
    except InputError as error:
        reason = error.reason
        if reason == "not-found" and isinstance(item, FileInput):
            reason = "vanished"  # it was there when the inputs were listed
        return Failure(source, reason, error.message, error.offset)
    encoded = text.encode()
    digest = hashlib.sha256(encoded).digest()
    if digest == task.stored_hash:
        return Unchanged(item.key, len(encoded))
    fingerprint = None if options.server_side else simhash(text)
    return Prepared(item.key, source, text, digest, fingerprint, len(encoded))


def _prepare_all(tasks: list[Task], options: LoadOptions) -> list[Outcome]:
    return [prepare(task, options) for task in tasks]


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
        self.batch: list[Prepared] = []
        self.batch_bytes = 0

    def check(self) -> None:
        """Refuse tables this client cannot fill correctly."""
        self.table.check_layout()
        registration = self.table.registration()
        if (not self.options.server_side and registration is not None
                and registration.profile != PROFILE):
            raise ProfileMismatch(
                f"table {self.table} holds fingerprints of profile {registration.profile!r},"
                f" this client computes {PROFILE!r}: load with --server-side"
            )

    def run(self, inputs: Iterable[Input]) -> LoadSummary:
        """Load every input; returns the counts (also on Ctrl-C, marked interrupted)."""
        self.check()
        started = time.perf_counter()
        workers = self.options.workers or os.cpu_count() or 1
        executor = ProcessPoolExecutor(workers, initializer=_start_worker)
        pending: deque[Future[list[Outcome]]] = deque()
        work = partial(_prepare_all, options=self.options)
        try:
            with self._stopping_gracefully():
                for chunk in _chunks(inputs, self._fail):
                    pending.append(executor.submit(work, self._tasks(chunk)))
                    while len(pending) >= workers * QUEUED_TASKS_PER_WORKER:
                        self._take(pending.popleft().result())
                    if self.summary.interrupted:
                        break
                while pending and not self.summary.interrupted:
                    self._take(pending.popleft().result())
                self._flush()
        except KeyboardInterrupt:
            self.summary.interrupted = True
        finally:
            executor.shutdown(wait=True, cancel_futures=True)
            self.summary.seconds = time.perf_counter() - started
        return self.summary

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

    def _take(self, outcomes: list[Outcome]) -> None:
        for outcome in outcomes:
            if isinstance(outcome, Failure):
                self._fail(outcome)
                continue
            if outcome.key in self.seen:
                self._fail(Failure(
                    outcome.source if isinstance(outcome, Prepared) else outcome.key,
                    "duplicate-key", f"key {outcome.key!r} was already loaded in this run",
                ))  # fmt: skip
                continue
            self.seen.add(outcome.key)
            if isinstance(outcome, Unchanged):
                self.summary.unchanged += 1
                self.summary.bytes += outcome.size
                self.reporter.progress(1, outcome.size)
                continue
            self.batch.append(outcome)
            self.batch_bytes += outcome.size
            if (len(self.batch) >= self.options.batch_rows
                    or self.batch_bytes >= self.options.batch_bytes):
                self._flush()

    def _flush(self) -> None:
        """Write the batch in one transaction."""
        if not self.batch:
            return
        batch, self.batch, self.batch_bytes = self.batch, [], 0
        if self.options.server_side:
            inserted, updated = self._upsert(batch)
        else:
            try:
                with self.conn.transaction():
                    self._copy(self.table.identifier, batch)
                inserted, updated = {document.key for document in batch}, set()
            except psycopg.errors.UniqueViolation:
                # Some keys are stored already (changed documents, or another
                # loader got there first): merge instead.
                inserted, updated = self._upsert(batch)
        for document in batch:
            if document.key in inserted:
                self.summary.loaded += 1
            elif document.key in updated:
                self.summary.updated += 1
            else:
                self.summary.unchanged += 1
            self.summary.bytes += document.size
        self.reporter.progress(len(batch), sum(document.size for document in batch))

    def _copy(self, target: sql.Composable, batch: list[Prepared]) -> None:
        statement = sql.SQL("COPY {} ({}) FROM STDIN").format(
            target, sql.SQL(", ").join(map(sql.Identifier, COLUMNS))
        )
        with self.conn.cursor().copy(statement) as copy:
            for d in batch:
                copy.write_row((d.key, d.source, d.content_hash, d.text, d.fingerprint))

    def _upsert(self, batch: list[Prepared]) -> tuple[set[str], set[str]]:
        """Insert new keys, update changed ones; returns the keys inserted and updated."""
        staging = sql.Identifier("nearsim_load_staging")
        fingerprint = sql.SQL("{}.simhash(s.body)" if self.options.server_side else "s.si").format(
            self.table.extension
        )
        with self.conn.transaction():
            self.conn.execute(
                sql.SQL(
                    """CREATE TEMPORARY TABLE IF NOT EXISTS {} (
                        key text, source text, content_hash bytea, body text, si bigint
                    ) ON COMMIT DELETE ROWS"""
                ).format(staging)
            )
            self._copy(staging, batch)
            rows = self.conn.execute(
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
            {key for key, inserted in rows if inserted},
            {key for key, inserted in rows if not inserted},
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

