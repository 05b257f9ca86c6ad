"""The little of ``plpy`` the server code uses, and the errors it raises."""

from __future__ import annotations

from functools import cached_property
from typing import Any, NoReturn, Protocol

from ..core.registry import EXTENSION_SCHEMA_QUERY, REGISTRY


class Database(Protocol):
    """What the server code needs from ``plpy``."""

    def execute(self, query: str) -> Any: ...
    def quote_ident(self, name: str) -> str: ...
    def quote_literal(self, value: str) -> str: ...
    def notice(self, message: str) -> None: ...
    def error(self, message: str, detail: str | None = None, hint: str | None = None,
              sqlstate: str | None = None) -> NoReturn: ...


class Plpy:
    """Adapts PL/Python's ``plpy`` module to ``Database``."""

    def __init__(self, plpy: Any) -> None:
        self._plpy = plpy

    def execute(self, query: str) -> Any:
        return self._plpy.execute(query)

    def quote_ident(self, name: str) -> str:
        return str(self._plpy.quote_ident(name))

    def quote_literal(self, value: str) -> str:
        return str(self._plpy.quote_literal(value))

    def notice(self, message: str) -> None:
        self._plpy.notice(message)

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

    def one(self, query: str) -> dict[str, Any]:
        """The first row of ``query`` as a dict."""
        rows = self.db.execute(query)
        return dict(rows[0])

    def notice(self, message: str) -> None:
        self.db.notice(message)

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
