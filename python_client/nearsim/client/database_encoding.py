"""Texts for a database whose encoding is not UTF-8.

The client speaks UTF-8 on every connection (:func:`~nearsim.client.connect.connect`
sets ``client_encoding``), and PostgreSQL converts what it receives to the
database's encoding.  A LATIN1 or EUC_JP database cannot hold every character:
a text with one it cannot hold makes the server refuse the whole statement,
and a few characters are converted to others (U+00A6 BROKEN BAR comes back
from EUC_JP as another character).  The loader checks every value it sends
with :class:`Repertoire` first, so that such a document is one failure,
named, and the others are stored as given.

An ``SQL_ASCII`` database converts nothing: the UTF-8 bytes are stored as
they are, and the server's nearsim functions read them as UTF-8.
"""

from __future__ import annotations

import threading
import unicodedata
from collections.abc import Iterable
from typing import Any

import psycopg

CLIENT_ENCODING = "UTF8"
UNCONVERTED = ("UTF8", "SQL_ASCII")  # database encodings that take any UTF-8 text as it is

# The characters are sent as text (converted by the server, as the loader's
# rows are) and as their UTF-8 bytes: a character that comes back as other
# bytes is not stored exactly.
_ALTERED = """
SELECT c.o FROM ROWS FROM (pg_catalog.unnest(%s::pg_catalog.text[]),
                           pg_catalog.unnest(%s::pg_catalog.bytea[])) WITH ORDINALITY AS c (t, b, o)
WHERE pg_catalog.convert_to(c.t, 'UTF8') OPERATOR(pg_catalog.<>) c.b"""


def database_encoding(conn: psycopg.Connection[Any]) -> str:
    """The encoding of the connection's database, as PostgreSQL names it (LATIN1, EUC_JP)."""
    reported = conn.info.parameter_status("server_encoding")
    if reported is not None:
        return reported
    row = conn.execute("SELECT pg_catalog.getdatabaseencoding()::pg_catalog.text").fetchone()
    assert row is not None
    return str(row[0])


def client_encoding(conn: psycopg.Connection[Any]) -> str:
    return conn.info.parameter_status("client_encoding") or ""


_ASCII_BYTES = bytes(range(128))


def non_ascii(text: str, encoded: bytes | None = None) -> str:
    """The distinct characters of ``text`` outside ASCII, in the order they first appear.

    ``encoded``: the text in UTF-8, if it is at hand.  Its ASCII bytes are
    dropped first (whole characters: every byte of a longer one is >= 0x80),
    which is several times quicker than looking at every character of a
    text that is mostly ASCII.
    """
    if text.isascii():  # constant time for Python's strings
        return ""
    others = (text.encode() if encoded is None else encoded).translate(None, _ASCII_BYTES)
    return "".join(dict.fromkeys(others.decode()))


def describe(character: str) -> str:
    """U+20AC EURO SIGN."""
    name = unicodedata.name(character, "")
    return f"U+{ord(character):04X}" + (f" {name}" if name else "")


def unstorable_message(key: str, what: str, character: str, offset: int, encoding: str) -> str:
    """The one line that says a document cannot be stored in the database's encoding."""
    return (f"document {key!r} has characters the database encoding {encoding} cannot store"
            f" (first: {describe(character)} at byte {offset} of its {what}): not written;"
            f" a database in UTF8 stores any text")


def unstorable_query(repertoire: Repertoire, name: str, text: str) -> str | None:
    """Why the database cannot take ``text`` (named ``name``) as a query, in one line;
    None if it can.  The server would refuse the statement that sends it."""
    character = repertoire.first_unstorable(non_ascii(text))
    if character is None:
        return None
    offset = text.encode().find(character.encode())
    return (f"{name} has characters the database encoding {repertoire.encoding} cannot store"
            f" (first: {describe(character)} at byte {offset}): it cannot be compared with the"
            " stored documents; a database in UTF8 stores any text")


class Repertoire:
    """Which characters the database's encoding stores exactly, asked of the server.

    PostgreSQL's conversion tables decide, not Python's codecs, which differ
    from them (Python's ``euc_kr`` encodes Hangul that EUC_KR cannot hold,
    its ``euc_jp`` U+00A5 YEN SIGN).  Each character is asked about once:
    many at a time in one statement, and when the server refuses one of
    them, in halves until it is found.  ``lock`` guards ``conn``, which must
    not be in a transaction or a COPY when the repertoire asks.
    """

    def __init__(self, conn: psycopg.Connection[Any], lock: threading.RLock | None = None) -> None:
        self.conn = conn
        self.lock = lock or threading.RLock()
        self.encoding = database_encoding(conn)
        self.converts = self.encoding not in UNCONVERTED
        self.known: dict[str, bool] = {}  # character -> stored exactly

    def learn(self, characters: Iterable[str]) -> None:
        """Ask the server about the characters not asked about yet."""
        if not self.converts:
            return
        unknown = [c for c in dict.fromkeys(characters) if c not in self.known]
        if unknown:
            with self.lock:
                self._ask(unknown)

    def first_unstorable(self, characters: str) -> str | None:
        """The first of ``characters`` that the database cannot store exactly, if any."""
        if not self.converts or not characters:
            return None
        self.learn(characters)
        return next((c for c in characters if not self.known[c]), None)

    def holds(self, text: str) -> bool:
        """Whether the database stores ``text`` exactly."""
        return not self.converts or self.first_unstorable(non_ascii(text)) is None

    def _ask(self, characters: list[str]) -> None:
        try:
            with self.conn.transaction():
                altered = {int(row[0]) for row in self.conn.execute(
                    _ALTERED, [characters, [c.encode() for c in characters]])}
        except (psycopg.errors.UntranslatableCharacter,
                psycopg.errors.CharacterNotInRepertoire):  # fmt: skip
            if len(characters) == 1:
                self.known[characters[0]] = False
                return
            half = len(characters) // 2
            self._ask(characters[:half])
            self._ask(characters[half:])
            return
        for number, character in enumerate(characters, start=1):
            self.known[character] = number not in altered
