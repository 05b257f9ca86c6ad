"""Which database the client talks to, connecting to it, and checking the extension.

The first of these wins:

1. an explicit DSN (``--dsn``);
2. the ``NEARSIM_DSN`` environment variable;
3. the standard libpq environment (``PGHOST``, ``PGPORT``, ``PGDATABASE``,
   ``PGSERVICE``...), which libpq reads itself;
4. the project-local cluster that ``make demo`` starts in ``.pgcluster/``,
   found from the current directory upwards and next to this package's
   source (for a client installed from a checkout).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import psycopg
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from ..core.fingerprint import PROFILE
from .database_encoding import CLIENT_ENCODING

LIBPQ_ENVIRONMENT = (
    "PGHOST", "PGHOSTADDR", "PGPORT", "PGDATABASE", "PGUSER", "PGSERVICE", "PGSERVICEFILE",
)  # fmt: skip
LOCAL_CLUSTER = ".pgcluster"
LOCAL_DATABASE = "nearsim"
LOCAL_PORT = 54329
PACKAGE_DIRECTORY = Path(__file__).resolve().parent


class ConnectionFailed(RuntimeError):
    """No database is configured, or the configured one cannot be reached."""


def local_cluster_dsn(start: Path | None = None) -> str | None:
    """The DSN of a project-local cluster above ``start`` or this package, if any."""
    places = [(start or Path.cwd()).resolve(), PACKAGE_DIRECTORY]
    for place in places:
        for directory in (place, *place.parents):
            cluster = directory / LOCAL_CLUSTER
            if (cluster / "run").is_dir():
                port_file = cluster / "port"
                port = port_file.read_text().strip() if port_file.is_file() else str(LOCAL_PORT)
                return make_conninfo(
                    host=str(cluster.absolute() / "run"), port=port, user="postgres",
                    dbname=LOCAL_DATABASE,
                )  # fmt: skip
    return None


def resolve_dsn(dsn: str | None = None) -> str:
    """The connection string to use (see the module docstring for the order)."""
    if dsn:
        return dsn
    configured = os.environ.get("NEARSIM_DSN")
    if configured:
        return configured
    if any(os.environ.get(name) for name in LIBPQ_ENVIRONMENT):
        return ""
    local = local_cluster_dsn()
    if local is not None:
        return local
    raise ConnectionFailed(
        "no database configured: pass --dsn, set NEARSIM_DSN or the PG* environment "
        "variables, or start the local cluster with `make demo`"
    )


def describe(dsn: str) -> str:
    """The DSN without its password, for messages."""
    try:
        params = conninfo_to_dict(dsn)
    except psycopg.ProgrammingError:
        return "the given DSN"
    params.pop("password", None)
    return make_conninfo("", **params) or "the libpq environment"


def connect(dsn: str | None = None, **kwargs: Any) -> psycopg.Connection[Any]:
    """Connect to the database :func:`resolve_dsn` finds; failures become one-line
    ConnectionFailed.  Keyword arguments go to ``psycopg.connect``.

    The connection speaks UTF-8 whatever the DSN or ``PGCLIENTENCODING``
    say: PostgreSQL converts to the database's encoding (an SQL_ASCII
    database stores the UTF-8 bytes as they are), and texts come back as
    ``str`` in every database.

    >>> conn = nearsim.connect("dbname=nearsim", autocommit=True)  # doctest: +SKIP
    >>> conn.execute("SELECT simhash('To be, or not to be')").fetchone()  # doctest: +SKIP
    (...,)
    """
    resolved = resolve_dsn(dsn)
    try:
        return psycopg.connect(resolved, **{**kwargs, "client_encoding": CLIENT_ENCODING})
    except psycopg.Error as error:
        lines = str(error).strip().splitlines() or [type(error).__name__]
        first_line = lines[0]
        raise ConnectionFailed(f"cannot connect to {describe(resolved)}: {first_line}") from error


class ProfileMismatch(RuntimeError):
    """Fingerprints of another profile than the one this client computes or was asked for.

    Raised when the database's ``simhash()`` computes another default
    profile than this client, and when a table holds fingerprints of another
    profile than a load asks for (or of one this client cannot compute).
    """


def ensure_extension(conn: psycopg.Connection[Any]) -> str:
    """Create the nearsim extension if it is missing; return its profile.

    Fingerprints from this client are only comparable with the database's
    when both compute the same profile, so a difference is an error.
    """
    conn.execute("CREATE EXTENSION IF NOT EXISTS nearsim CASCADE")
    row = conn.execute("SELECT simhash_profile()").fetchone()
    server_profile = None if row is None else str(row[0])
    if server_profile != PROFILE:
        raise ProfileMismatch(
            f"the database fingerprints with profile {server_profile!r}, this Python client "
            f"with {PROFILE!r}; install matching versions of the extension and the client"
        )
    return server_profile
