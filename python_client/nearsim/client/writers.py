"""Writing the loader's batches into an enabled table, each in one transaction.

Every writer goes through the same protocol:

- its transaction declares what the rows bring (:func:`declare`): the
  profile the fingerprints were computed in (``nearsim.profile``, set for
  the transaction alone), so that the table's trigger keeps them as they
  are when the writing role has the owner's privileges, and computes them
  again otherwise;
- rows that may meet stored keys are copied into a temporary staging table
  dropped at commit (:func:`create_staging`, :meth:`BatchWriter.stage`)
  and written from there with one statement.

Three ways in: a batch of new keys is streamed into the table itself by one
COPY, opened by its first rows and sent while the workers prepare the next
ones (:class:`StreamedCopy`); a batch that may meet stored keys is staged,
its near-duplicates found on the staging table (:class:`Screen`), and
upserted into the loader's own table (:meth:`BatchWriter.upsert`) or merged
into a table of the user's own (:meth:`BatchWriter.merge`).
:meth:`BatchWriter.send` and :meth:`BatchWriter.write` choose among them.
The partitions ``nearsim spark`` writes (:mod:`nearsim.spark.database`)
are declared and staged with the same two functions.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from contextlib import ExitStack
from typing import Any, NamedTuple

import psycopg
from psycopg import pq, sql

from ..core.fingerprint import PROFILE
from .documents import FINGERPRINT_COLUMN, DocumentTable
from .layouts import UserLayout
from .load_options import LoadOptions
from .rows import COLUMNS, COPY_HEADER, COPY_TRAILER, KEPT_COLUMNS, STAGED, Prepared
from .sources import Failure


class Written(NamedTuple):
    """What a batch's write did with its documents (by key); the rest were unchanged."""

    inserted: set[str]
    updated: set[str]
    refused: dict[str, Failure]
    skipped: frozenset[str] = frozenset()  # near-duplicates left out
    recorded: frozenset[str] = frozenset()  # near-duplicates written and linked


class Screened(NamedTuple):
    """Near-duplicates a batch holds: key -> (its near-duplicate's key, distance)."""

    near: dict[str, tuple[str, int]]


def taken_failure(key: str, stored: str, source: str) -> Failure:
    """A document whose key is stored from another file."""
    return Failure(source, "duplicate-key",
                   f"key {key!r} is stored from {stored}, not from {source}: not replaced"
                   " (load with --replace to replace it)")  # fmt: skip


# The origin of a stored source, as sources.origin computes it.
_ORIGIN_PATTERN = ":[0-9]+$"


def origin_sql(source: sql.Composable) -> sql.Composed:
    return sql.SQL("pg_catalog.regexp_replace({}, {}, '')").format(
        source, sql.Literal(_ORIGIN_PATTERN))


def copy_statement(target: sql.Composable, columns: Sequence[str] = COLUMNS) -> sql.Composed:
    """COPY of rows in binary format into ``columns`` of ``target``."""
    return sql.SQL("COPY {} ({}) FROM STDIN (FORMAT binary)").format(
        target, sql.SQL(", ").join(map(sql.Identifier, columns))
    )


# Rows are sent to the server in pieces of about this size.
SEND_BYTES = 256 * 1024

# The setting by which a transaction declares the profile its fingerprints
# were computed in (read by the table's fingerprint trigger).
PROFILE_SETTING = "nearsim.profile"


def declare(conn: psycopg.Connection[Any], profile: str,
            settings: Mapping[str, str] | None = None) -> None:
    """Tell the table's fingerprint trigger, for this transaction, to keep the
    fingerprints of ``profile`` that the rows bring: the one way every writer
    declares them (``set_config(..., true)``), with its other ``settings``.

    The settings last for the transaction, never for the session: behind a
    pooler in transaction mode (pgbouncer) the server connection goes to
    another client after each transaction, and a session setting would go
    with it (the next client's fingerprints would be taken as declared).
    The trigger keeps them only when the writing role has the privileges of
    the table's owner (``nearsim_writes_as_owner``) and computes them again
    otherwise.
    """
    values = {PROFILE_SETTING: profile, **(settings or {})}
    calls = sql.SQL(", ").join(
        sql.SQL("pg_catalog.set_config({}, {}, true)").format(sql.Literal(name),
                                                              sql.Literal(value))
        for name, value in values.items())  # fmt: skip
    conn.execute(sql.SQL("SELECT {}").format(calls))  # one round trip


def create_staging(conn: psycopg.Connection[Any], staging: sql.Identifier,
                   columns: Sequence[str], types: Sequence[str]) -> None:
    """The one staging step of every writer: a temporary table of ``columns``
    (of ``types``, SQL type names), dropped at commit so that nothing of the
    writer outlives its transaction."""
    conn.execute(sql.SQL("CREATE TEMPORARY TABLE {} ({}) ON COMMIT DROP").format(
        staging, sql.SQL(", ").join(
            sql.SQL("{} {}").format(sql.Identifier(column), sql.SQL(kind))
            for column, kind in zip(columns, types, strict=True))))


def server_simhash(table: DocumentTable, profile: str | None,
                   text: sql.Composable) -> sql.Composable:
    """The server's fingerprint of ``text`` in ``profile`` (canonical, the
    table's): the C ``simhash(text)`` for the default profile, else the
    PL/Python one; cast, as the server's ``catalog.simhash_sql``."""
    profile = profile or PROFILE
    if profile == PROFILE:
        return sql.SQL("{}.simhash({}::pg_catalog.text)").format(table.extension, text)
    return sql.SQL("{}.simhash({}::pg_catalog.text, {}::pg_catalog.text)").format(
        table.extension, text, sql.Literal(profile))


class StreamedCopy:
    """A batch of new keys streamed into the table by one COPY.

    The first rows open the batch's transaction (``begin``, which declares
    the fingerprints) and the COPY of ``statement``; rows are sent in pieces
    of :data:`SEND_BYTES` while the workers prepare the next ones, so the
    server stores them meanwhile; :meth:`finish` ends the COPY and commits.
    A key stored already makes the COPY fail: :meth:`send` or :meth:`finish`
    say so, and the batch is rolled back (to be written another way).
    """

    def __init__(self, conn: psycopg.Connection[Any], begin: Callable[[], ExitStack],
                 statement: Callable[[], sql.Composed]) -> None:  # fmt: skip
        self.conn = conn
        self._begin = begin
        self._statement = statement
        self.open: tuple[ExitStack, psycopg.Copy] | None = None
        self.unsent = bytearray()  # rows for the open COPY

    def send(self, rows: bytes) -> bool:
        """Send ``rows`` in the batch's COPY, which the first ones open; False
        when a key is stored already (the COPY is abandoned)."""
        try:
            if self.open is None:
                stack = self._begin()
                copy = stack.enter_context(self.conn.cursor().copy(self._statement()))
                self.open = (stack, copy)
                self.unsent += COPY_HEADER
            self.unsent += rows
            if len(self.unsent) >= SEND_BYTES:
                self.open[1].write(self.unsent)
                self.unsent.clear()
        except psycopg.errors.UniqueViolation:
            self.abandon()
            return False
        return True

    def finish(self) -> bool:
        """End the COPY and commit; False when a key was stored already
        (changed documents, or another loader got there first): rolled back."""
        assert self.open is not None
        (stack, copy), self.open = self.open, None
        try:
            self.unsent += COPY_TRAILER
            copy.write(self.unsent)
            self.unsent.clear()
            stack.close()  # ends the COPY, then commits
        except psycopg.errors.UniqueViolation:
            self.unsent.clear()
            return False
        return True

    def abandon(self) -> None:
        """Roll the open COPY's batch back (the connection may be gone)."""
        if self.open is None:
            return
        stack, _ = self.open
        self.open = None
        self.unsent.clear()
        try:
            stack.__exit__(RuntimeError, RuntimeError("batch abandoned"), None)
        except (psycopg.Error, RuntimeError):
            pass


class BatchWriter:
    """Writes the loader's batches into its table (see the module docstring).

    ``kept`` says whether the loader's own table keeps the records' other
    fields (its fields column); ``user`` is the layout of a table of the
    user's own; ``settings`` are more settings of each batch's transaction.
    The loader sets them when it has checked the table.
    """

    def __init__(self, conn: psycopg.Connection[Any], table: DocumentTable,
                 options: LoadOptions) -> None:
        self.conn = conn
        self.table = table
        self.screen = Screen(conn, table, options)
        self.kept = False
        self.user: UserLayout | None = None
        self.settings: dict[str, str] = {}
        self.merging = False  # a key of the streamed batch was stored: it is merged
        self.stream = StreamedCopy(conn, self.begin, lambda: copy_statement(
            self.table.identifier, KEPT_COLUMNS if self.kept else COLUMNS))

    @property
    def options(self) -> LoadOptions:
        return self.screen.options

    @options.setter
    def options(self, options: LoadOptions) -> None:
        self.screen.options = options

    def begin(self) -> ExitStack:
        """A batch's transaction, which declares the fingerprints (:func:`declare`)."""
        assert self.options.profile is not None, "the table is checked first"
        stack = ExitStack()
        stack.enter_context(self.conn.transaction())
        declare(self.conn, self.options.profile, self.settings)
        return stack

    def streams(self) -> bool:
        """Whether the batch goes straight into the table by COPY (no staging table)."""
        return (not self.options.server_side and not self.merging and self.user is None
                and self.options.on_near_duplicate is None)

    def send(self, rows: bytes) -> None:
        """Rows of the batch at hand, as the workers finish them: streamed
        into the table when the batch goes straight in, else kept by the loader
        for :meth:`write`."""
        if self.streams() and not self.stream.send(rows):
            self.merging = True  # the rest of the batch is merged at its end

    def write(self, batch: list[Prepared], rows: bytes) -> Written:
        """End the batch's transaction: all its documents are stored, or none."""
        merging, self.merging = self.merging, False
        if self.user is not None:
            return self.merge(self.user, batch, rows)
        if not self.streams() or merging or not self.stream.finish():
            # Some keys may be stored already: merged instead.
            return self.upsert(batch, rows)
        return Written({document.key for document in batch}, set(), {})

    def abandon(self) -> None:
        """Leave the batch at hand unwritten.

        A Ctrl-C may have left the connection inside a command: psycopg
        cancels the command it interrupts but waits for the server only a
        moment, and a connection still inside it takes no other command, not
        even the rollback.  Closed, the server rolls the batch back.
        """
        if self.conn.pgconn.transaction_status == pq.TransactionStatus.ACTIVE:
            self.conn.close()
        self.stream.abandon()

    def raise_work_mem(self) -> None:
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

    def analyze(self) -> None:
        """Fresh planner statistics after a bulk load (see DocumentTable.analyze)."""
        if self.user is None:
            self.table.analyze()
            return
        self.conn.execute(sql.SQL("ANALYZE {} ({}, {})").format(
            self.table.identifier, sql.Identifier(self.user.key),
            sql.Identifier(self.user.fingerprint)))  # fmt: skip
        self.table.analyze_bucket_table()

    def copy(self, target: sql.Composable, rows: bytes, columns: Sequence[str] = COLUMNS) -> None:
        with self.conn.cursor().copy(copy_statement(target, columns)) as copy:
            copy.write(b"".join((COPY_HEADER, rows, COPY_TRAILER)))

    def stage(self, staging: sql.Identifier, rows: bytes, columns: Sequence[str],
              types: Sequence[str]) -> None:
        """The staging table of ``columns`` (:func:`create_staging`), and the
        batch's rows copied into it."""
        create_staging(self.conn, staging, columns, types)
        self.copy(staging, rows, columns)

    def upsert(self, batch: list[Prepared], rows: bytes) -> Written:
        """Insert new keys, update changed ones of the same file (of any file
        with ``replace``); a key stored from another file is refused."""
        staging = sql.Identifier("nearsim_load_staging")
        fingerprint: sql.Composable = sql.SQL("s.si")
        if self.options.server_side:
            fingerprint = server_simhash(self.table, self.options.profile, sql.SQL("s.body"))
        stored_origin = origin_sql(sql.SQL("t.source"))
        new_origin = origin_sql(sql.SQL("EXCLUDED.source"))
        changed = sql.SQL("(t.content_hash IS DISTINCT FROM EXCLUDED.content_hash{})").format(
            sql.SQL(" OR t.fields IS DISTINCT FROM EXCLUDED.fields" if self.kept else ""))
        columns = KEPT_COLUMNS if self.kept else COLUMNS
        if self.options.replace:
            rewrite = sql.SQL("{} OR {} IS DISTINCT FROM {}").format(changed, stored_origin,
                                                                     new_origin)  # fmt: skip
        else:
            rewrite = sql.SQL("{} AND {} = {}").format(changed, stored_origin, new_origin)
        with self.begin():
            self.stage(staging, rows, columns,
                       ("text", "text", "bytea", "text", "bigint", "jsonb")[:len(columns)])
            screened = self.screen.find(staging, "key", FINGERPRINT_COLUMN)
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
                        stored=stored_origin, new=origin_sql(sql.SQL("s.source"))),
                    [unwritten],
                ).fetchall()  # fmt: skip
                refused = {key: taken_failure(key, stored, sources[key]) for key, stored in taken}
            return self.screen.outcome(screened, batch, Written(inserted, updated, refused))

    def merge(self, user: UserLayout, batch: list[Prepared], rows: bytes) -> Written:
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
        with self.begin():
            self.stage(staging, rows, (*STAGED, *fields),
                       ("text", "text", "bigint", *("text" for _ in fields)))
            screened = self.screen.find(staging, user.key, user.fingerprint)
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
            return self.screen.outcome(screened, batch, Written(inserted, updated, refused))

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



class Screen:
    """The near-duplicates of a batch (``--on-near-duplicate``), found on its
    staging table before it is written, and what becomes of them."""

    def __init__(self, conn: psycopg.Connection[Any], table: DocumentTable,
                 options: LoadOptions) -> None:
        self.conn = conn
        self.table = table
        self.options = options

    def find(self, staging: sql.Identifier, key_column: str,
                fingerprint_column: str) -> Screened:
        """Find the batch's near-duplicates and take those to leave out off the staging table
        (in the batch's transaction).

        A near-duplicate is within ``near_distance`` bits of a stored document
        (another key) or of an earlier document of the batch that is written.
        The check takes the lock of the table's check-in guard (nearsim_guard)
        first, so that concurrent loaders and guarded writers check one after
        the other, each seeing what the previous one committed.
        """
        action = self.options.on_near_duplicate
        if action is None:
            return Screened({})
        ext = self.table.extension
        self.conn.execute(sql.SQL("SELECT {}.nearsim_guard_lock(%s::pg_catalog.regclass)").format(
            ext), [self.table.quoted])
        # The batch's fingerprints in its order, computed here when the server computes them.
        # A document without one is near nothing, but it replaces the row of its key.
        staged: list[tuple[str, int | None]] = [
            (key, None if value is None else int(value))
            for key, value in self.conn.execute(sql.SQL(
                "SELECT key, COALESCE(si, {simhash}) FROM {staging} ORDER BY ctid").format(
                    simhash=server_simhash(self.table, self.options.profile, sql.SQL("body")),
                    staging=staging))]
        if all(value is None for _, value in staged):
            return Screened({})
        # As the guard would check them one by one: against the stored documents
        # and the earlier ones of the batch that are written (all with record).
        near = {key: (existing, int(distance)) for key, existing, distance in self.conn.execute(
            sql.SQL("SELECT b.key, b.existing_key, b.distance FROM {}.nearsim_check_batch("
                    "%s::pg_catalog.regclass, %s, %s, %s::pg_catalog.text[],"
                    " %s::pg_catalog.int8[], %s, %s) AS b").format(ext),
            [self.table.quoted, key_column, fingerprint_column, [k for k, _ in staged],
             [v for _, v in staged], self.options.near_distance, action == "record"])}
        leave_out = list(near) if action in ("error", "skip") else []
        if leave_out:
            self.conn.execute(sql.SQL("DELETE FROM {} WHERE key = ANY (%s)").format(staging),
                              [leave_out])
        return Screened(near)

    def outcome(self, screened: Screened, batch: list[Prepared],
                  written: Written) -> Written:
        """The batch's outcome with its near-duplicates: failures, left out, or linked."""
        if not screened.near:
            return written
        action = self.options.on_near_duplicate
        if action == "record":
            recorded = {k: v for k, v in screened.near.items()
                        if k in written.inserted or k in written.updated}
            if recorded:
                self.record_links(recorded)
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

    def record_links(self, links: dict[str, tuple[str, int]]) -> None:
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
