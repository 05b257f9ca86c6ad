"""The little of ``plpy`` the server code uses, and the errors it raises."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from functools import cached_property
from typing import Any, NoReturn, Protocol

from ..core.registry import EXTENSION_SCHEMA_QUERY, REGISTRY


class Database(Protocol):
    """What the server code needs from ``plpy``."""

    def execute(self, query: str) -> Any: ...
    def cursor(self, query: str) -> Any: ...
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

    def execute(self, query: str) -> Any:
        return self._plpy.execute(query)

    def cursor(self, query: str) -> Any:
        return self._plpy.cursor(query)

    def quote_ident(self, name: str) -> str:
        return str(self._plpy.quote_ident(name))

    def quote_literal(self, value: str) -> str:
        return str(self._plpy.quote_literal(value))

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

    def execute(self, query: str) -> Any:
        return self.db.execute(query)

    def rows(self, query: str, batch: int = 10_000) -> Iterator[dict[str, Any]]:
        """The rows of ``query``, read ``batch`` at a time.

        The first batch is read now, so an error of the query is raised
        here, with its SQLSTATE, not inside a generator, where PL/Python
        would hide it behind "error fetching next item from iterator".
        """
        cursor = self.db.cursor(query)
        first = cursor.fetch(batch)

        def every() -> Iterator[dict[str, Any]]:
            fetched = first
            while fetched:
                yield from fetched
                fetched = cursor.fetch(batch)

        return every()

    def one(self, query: str) -> dict[str, Any]:
        """The first row of ``query`` as a dict."""
        rows = self.db.execute(query)
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
        """Run a statement as the owner; the first column of its first row."""
        if self.acting is None:
            raise RuntimeError("nearsim: a statement on a table runs as its owner")
        rows = self.db.execute(
            f"SELECT {self.ext}.nearsim_as_owner("
            f"{self.acting}::pg_catalog.oid::pg_catalog.regclass,"
            f" {self.literal(statement)}::pg_catalog.text)"
            " AS result")
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
