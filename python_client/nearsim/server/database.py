"""The little of ``plpy`` the server code uses, and the errors it raises."""

from __future__ import annotations

import ctypes
import json
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from functools import cached_property
from typing import Any, NoReturn, Protocol

from ..core import interrupts
from ..core.registry import EXTENSION_SCHEMA_QUERY, REGISTRY

# The values of a query's parameters $1, $2, ...: each is passed as text (or
# NULL), or a list of them as text[], and the query casts it to the type it
# needs ($1::pg_catalog.regclass).
Arguments = Sequence[str | list[str | None] | None]


class Database(Protocol):
    """What the server code needs from ``plpy``."""

    def execute(self, query: str, arguments: Arguments = ()) -> Any: ...
    def cursor(self, query: str, arguments: Arguments = ()) -> Any: ...
    def quote_ident(self, name: str) -> str: ...
    def quote_literal(self, value: str) -> str: ...
    def notice(self, message: str) -> None: ...
    def warning(self, message: str, hint: str | None = None) -> None: ...
    def error(self, message: str, detail: str | None = None, hint: str | None = None,
              sqlstate: str | None = None) -> NoReturn: ...


class Plpy:
    """Adapts PL/Python's ``plpy`` module to ``Database``."""

    def __init__(self, plpy: Any) -> None:
        self._plpy = plpy

    def execute(self, query: str, arguments: Arguments = ()) -> Any:
        if not arguments:
            return self._plpy.execute(query)
        return self._plpy.execute(self._prepare(query, arguments), list(arguments))

    def cursor(self, query: str, arguments: Arguments = ()) -> Any:
        if not arguments:
            return self._plpy.cursor(query)
        return self._plpy.cursor(self._prepare(query, arguments), list(arguments))

    def _prepare(self, query: str, arguments: Arguments) -> Any:
        return self._plpy.prepare(query, [
            "pg_catalog.text[]" if isinstance(value, list) else "pg_catalog.text"
            for value in arguments])

    # plpy.quote_ident and plpy.quote_literal read their argument as UTF-8 and
    # give it back as if in the database's encoding: text that is not ASCII
    # comes back garbled in a LATIN1 or EUC_JP database.  Such text is quoted
    # here instead, as PostgreSQL's quote_ident and quote_literal would.

    def quote_ident(self, name: str) -> str:
        if name.isascii():
            return str(self._plpy.quote_ident(name))
        return '"' + name.replace('"', '""') + '"'

    def quote_literal(self, value: str) -> str:
        if value.isascii():
            return str(self._plpy.quote_literal(value))
        quoted = "'" + value.replace("'", "''").replace("\\", "\\\\") + "'"
        return "E" + quoted if "\\" in value else quoted

    def notice(self, message: str) -> None:
        self._plpy.notice(message)

    def warning(self, message: str, hint: str | None = None) -> None:
        self._plpy.warning(message, **({} if hint is None else {"hint": hint}))

    def error(self, message: str, detail: str | None = None, hint: str | None = None,
              sqlstate: str | None = None) -> NoReturn:
        fields = {"detail": detail, "hint": hint, "sqlstate": sqlstate}
        self._plpy.error(message, **{k: v for k, v in fields.items() if v is not None})
        raise AssertionError("plpy.error returned")  # it raises


class Session:
    """One call's view of the database: queries, quoting and errors.

    The extension's schema is looked up the first time generated SQL needs
    it, so functions that never name it (``simhash(text, profile)`` runs
    once per row) cost no query.
    """

    def __init__(self, db: Database) -> None:
        self.db = db
        self.acting: int | None = None  # the table whose owner runs run() and row()

    @cached_property
    def ext(self) -> str:
        """The extension's schema, quoted."""
        rows = self.db.execute(EXTENSION_SCHEMA_QUERY)
        return self.ident(rows[0]["nspname"])

    @property
    def registry(self) -> str:
        """The registry table, schema-qualified and quoted."""
        return f"{self.ext}.{REGISTRY}"

    def ident(self, name: str) -> str:
        return self.db.quote_ident(name)

    def literal(self, value: object) -> str:
        return self.db.quote_literal(str(value))

    def execute(self, query: str, *arguments: object) -> Any:
        """The rows of ``query``, whose parameters $1, $2, ... are ``arguments`` as text."""
        return self.db.execute(query, _as_text(arguments))

    def rows(self, query: str, *arguments: object, batch: int = 10_000
             ) -> Iterator[dict[str, Any]]:
        """The rows of ``query``, read ``batch`` at a time.

        The first batch is read now, so an error of the query is raised
        here, with its SQLSTATE, not inside a generator, where PL/Python
        would hide it behind "error fetching next item from iterator".
        """
        cursor = self.db.cursor(query, _as_text(arguments))
        first = cursor.fetch(batch)

        def every() -> Iterator[dict[str, Any]]:
            fetched = first
            while fetched:
                yield from fetched
                fetched = cursor.fetch(batch)

        return every()

    def one(self, query: str, *arguments: object) -> dict[str, Any]:
        """The first row of ``query`` as a dict."""
        rows = self.db.execute(query, _as_text(arguments))
        return dict(rows[0])

    def notice(self, message: str) -> None:
        self.db.notice(message)

    def warning(self, message: str, hint: str | None = None) -> None:
        self.db.warning(message, hint)

    def fail(self, message: str, hint: str | None = None, sqlstate: str = "22023",
             detail: str | None = None) -> NoReturn:
        """Raise an SQL error; invalid_parameter_value unless ``sqlstate`` says otherwise."""
        self.db.error(message, detail=detail, hint=hint, sqlstate=sqlstate)

    def require(self, value: object, what: str) -> None:
        """Refuse a NULL argument, naming it."""
        if value is None:
            self.fail(f"{what} must not be NULL", sqlstate="22004")

    def progress(self, what: str, done: int, total: int) -> None:
        self.notice(f"nearsim: {what} {done} of {total} rows")

    # -- acting as a table's owner ---------------------------------------------

    @contextmanager
    def acting_for(self, table_oid: int) -> Iterator[None]:
        """Run the statements of :meth:`run` and :meth:`row` as the table's owner.

        Each goes through the C function ``nearsim_as_owner``: the user id
        becomes the owner's inside a security-restricted operation, as for
        PostgreSQL's own maintenance commands, so code the owner wrote
        (triggers, casts, index expressions) runs with the owner's rights and
        cannot switch back to the caller's.  Queries of the catalog go on
        with :meth:`execute`, as the caller.
        """
        previous, self.acting = self.acting, table_oid
        try:
            yield
        finally:
            self.acting = previous

    def run(self, statement: str) -> str | None:
        """Run a statement as the owner; the first column of its first row.

        The statement is one text (``nearsim_as_owner`` runs it), so the
        values in it are quoted literals (:meth:`literal`), as in the DDL the
        server makes; queries run as the caller take parameters instead.
        """
        if self.acting is None:
            raise RuntimeError("nearsim: a statement on a table runs as its owner")
        rows = self.db.execute(
            f"SELECT {self.ext}.nearsim_as_owner("
            f"{self.acting}::pg_catalog.oid::pg_catalog.regclass, $1::pg_catalog.text)"
            " AS result", [statement])
        result = rows[0]["result"]
        return None if result is None else str(result)

    def row(self, select: str, before: str = "") -> dict[str, Any]:
        """The first row of a query run as the owner, as a dict.

        ``before`` is a WITH clause whose data-modifying statements the
        query reads (they must stay at the top level).
        """
        result = self.run(
            f"{before} SELECT pg_catalog.row_to_json(r)::pg_catalog.text FROM ({select}) r")
        if result is None:
            raise RuntimeError("nearsim: the query gave no row")
        row: dict[str, Any] = json.loads(result)
        return row


def placeholders(count: int, cast: str, first: int = 1) -> str:
    """``$first::cast, ...``: ``count`` parameters of a list such as ``ARRAY[...]``."""
    return ", ".join(f"${number}::{cast}" for number in range(first, first + count))


def _as_text(arguments: Sequence[object]) -> list[str | list[str | None] | None]:
    """Each argument as text, and a list or tuple as a list of them (text[])."""
    return [None if value is None
            else [None if item is None else str(item) for item in value]
            if isinstance(value, (list, tuple)) else str(value)
            for value in arguments]


# -- cancels and timeouts inside PL/Python --------------------------------------

# Without PostgreSQL's flag (see _pending_interrupt), the server is asked this
# often whether to stop.
CHECK_INTERVAL = 0.01  # seconds


def _pending_interrupt() -> ctypes.c_int | None:
    """PostgreSQL's ``InterruptPending``, the flag its signal handlers set for a
    cancel, a timeout or a termination, read in place; ``None`` when this
    process does not export it (then the server is asked every
    :data:`CHECK_INTERVAL`)."""
    try:
        return ctypes.c_int.in_dll(ctypes.CDLL(None), "InterruptPending")
    except (OSError, ValueError):
        return None


class InterruptCheck:
    """The check :func:`nearsim.core.interrupts.checkpoint` runs in the server.

    PL/Python code never reaches PostgreSQL's interrupt checks, so a cancel
    or a timeout waits until the function returns.  At a checkpoint this
    reads PostgreSQL's flag (a memory read, some 100 ns) and only when it is
    set runs ``SELECT 1`` through SPI, whose executor takes the interrupt:
    the cancel or timeout is raised as PostgreSQL's own error
    (``spiexceptions.QueryCanceled``), which ends the function.  Where the
    flag cannot be read, the query runs every :data:`CHECK_INTERVAL`.
    """

    def __init__(self, plpy: Any) -> None:
        self._plpy = plpy
        self._pending = _pending_interrupt()
        self._plan: Any = None
        self._last = time.monotonic()

    def __call__(self) -> None:
        if self._pending is not None:
            if not self._pending.value:
                return
        else:
            now = time.monotonic()
            if now - self._last < CHECK_INTERVAL:
                return
            self._last = now
        if self._plan is None:
            self._plan = self._plpy.prepare("SELECT 1")
        self._plpy.execute(self._plan)


_installed: list[Any] = []  # the plpy module whose check is installed


def check_interrupts(plpy: Any) -> None:
    """Install the server's :class:`InterruptCheck` (once per backend)."""
    if not _installed or _installed[0] is not plpy:
        interrupts.install(InterruptCheck(plpy))
        _installed[:] = [plpy]
