"""What the table holds already of the keys a load brings, asked ahead of the workers.

The listing thread asks, chunk by chunk on the loader's second connection,
for the stored source, content hash and kept fields of the chunk's keys:
a document stored from the same file with the same hash (and the same
fields) is "unchanged" and is neither fingerprinted nor sent again, and a
key stored from another file is refused unless ``LoadOptions.replace``
says so.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterable, Iterator
from typing import Any

import psycopg
from psycopg import sql

from .database_encoding import Repertoire
from .documents import FIELDS_COLUMN, DocumentTable
from .listing import Chunk, chunks
from .load_options import LoadOptions
from .rows import Task, source_of
from .sources import BytesRead, Decoding, Failure, FileInput, Input, RecordInput, origin
from .writers import taken_failure


class StoredKeys:
    """The stored keys of the inputs, for one load (see the module docstring).

    ``lookup_conn`` is shared with the repertoire, under ``lookup_lock``.
    ``kept`` says whether the table keeps the records' other fields;
    ``ask`` is False when nothing need be asked (a table of the user's own,
    compared in the merge, or one that was empty when the load started).
    """

    def __init__(self, lookup_conn: psycopg.Connection[Any], lookup_lock: threading.RLock,
                 table: DocumentTable, options: LoadOptions, repertoire: Repertoire,
                 read: BytesRead) -> None:  # fmt: skip
        self.lookup_conn = lookup_conn
        self.lookup_lock = lookup_lock
        self.table = table
        self.options = options
        self.repertoire = repertoire
        self.read = read
        self.kept = False
        self.ask = True

    def listed(self, inputs: Iterable[Input]) -> Iterator[Chunk | Failure | Decoding]:
        """Worker tasks with the stored hashes of their keys, and listing failures."""
        failures: list[Failure | Decoding] = []
        for chunk in chunks(inputs, failures.append, self.read):
            yield from failures
            failures.clear()
            tasks, refused = self.tasks(chunk.items)
            yield from refused
            yield Chunk(tasks, chunk.read)
        yield from failures

    def tasks(self, chunk: list[FileInput | RecordInput]) -> tuple[list[Task], list[Failure]]:
        """The chunk with the stored content hashes of its keys, and the documents
        refused because their key is stored from another file."""
        if not self.ask:
            # A first load asks nothing: any key stored since by another
            # loader makes the batch's COPY fail and merge instead.  A table
            # of the user's own is compared in the merge (see writers).
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
            source = source_of(item)
            if stored_source == source or origin(stored_source) == origin(source):
                tasks.append(Task(item, digest))  # unchanged if the hash is the same
            elif self.options.replace:
                # written again with its new source, even if the text is the same
                tasks.append(Task(item, None))
            else:
                refused.append(taken_failure(item.key, stored_source, source))
        return tasks, refused
