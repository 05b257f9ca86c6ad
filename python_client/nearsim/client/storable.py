"""The documents a database whose encoding is not UTF-8 cannot store, as failures.

A worker lists the characters of each document's key, source, text and
fields that are not ASCII (.rows); the repertoire of the database's
encoding (.database_encoding) says which of them it cannot store, and a
document with one of them fails ("database-encoding") naming the first,
with its byte offset, instead of making the server refuse its batch.
"""

from __future__ import annotations

from .database_encoding import Repertoire, unstorable_message
from .layouts import UserLayout
from .rows import COLUMNS, KEPT_COLUMNS, STAGED, Done, Prepared, Unchanged, row_value
from .sources import Failure


def storable(done: Done, repertoire: Repertoire, user: UserLayout | None) -> Done:
    """The task's documents that the database's encoding cannot store, as failures
    (in their place among the others), the rest as they were; ``user`` is the
    layout of a table of the user's own (None for the loader's own table)."""
    repertoire.learn(character for document in done.prepared
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
        failure = unstorable(document, row, repertoire, user)
        if failure is None:
            kept.append(document)
            rows.append(row)
            order.append("p")
        else:
            kept_others.append(failure)
            order.append("o")
    return Done(kept_others, kept, b"".join(rows), "".join(order))


def unstorable(document: Prepared, row: bytes, repertoire: Repertoire,
               user: UserLayout | None) -> Failure | None:
    """Why the database cannot store the document, if it cannot: the first
    character of its key, source, text or fields that it cannot store."""
    for place, listed in document.characters:
        character = repertoire.first_unstorable(listed)
        if character is None:
            continue
        # The first to appear of those it cannot store: where it first is.
        offset = row_value(row, place).find(character.encode())
        if user is None:
            what = KEPT_COLUMNS[place] if place != COLUMNS.index("body") else "text"
        elif place >= len(STAGED):
            what = f"field {user.columns[place - len(STAGED)].field!r}"
        else:
            what = STAGED[place] if place != STAGED.index("body") else "text"
        return Failure(document.source, "database-encoding",
                       unstorable_message(document.key, what, character, offset,
                                          repertoire.encoding),
                       offset if what == "text" else None)  # fmt: skip
    return None
