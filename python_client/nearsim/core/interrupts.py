"""Points where a long computation may be stopped, and who stops it.

Inside the database the core runs in PL/Python, which never sees a cancel,
a ``statement_timeout`` or ``pg_terminate_backend`` by itself: PostgreSQL
only notes them and acts at its next interrupt check, which Python code
never reaches.  So the loops of the core that can run long call
:func:`checkpoint` between batches of work (a few milliseconds each), and
the server installs a check there (:func:`install`) that lets PostgreSQL
act: the statement then ends with PostgreSQL's own error, raised through
the Python code as an exception.  On a client nothing is installed and a
checkpoint costs one call of an empty function.

:class:`LimitExceeded` is the error of a request the core refuses because
it cannot fit within a limit: the server reports it as SQLSTATE 54000
(program_limit_exceeded), with its hint.
"""

from __future__ import annotations

from collections.abc import Callable

__all__ = ["LimitExceeded", "checkpoint", "install"]


class LimitExceeded(ValueError):
    """A request larger than a limit allows; ``hint`` says what fits instead."""

    def __init__(self, message: str, hint: str | None = None) -> None:
        super().__init__(message)
        self.hint = hint


def _nothing() -> None:
    return None


_check: Callable[[], None] = _nothing


def checkpoint() -> None:
    """Let the installed check run: it may raise to stop the computation."""
    _check()


def install(check: Callable[[], None] | None) -> None:
    """Make :func:`checkpoint` call ``check`` (``None``: nothing)."""
    global _check
    _check = _nothing if check is None else check
