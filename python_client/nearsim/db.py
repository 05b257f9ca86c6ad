"""The database side of the client: making sure server and client agree."""

from __future__ import annotations

from typing import Any

import psycopg

from .fingerprint import PROFILE


class ProfileMismatch(RuntimeError):
    """The database's simhash() computes another profile than this client."""


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
