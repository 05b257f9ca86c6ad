"""The table a load fills, checked before anything is read: its layout and profile.

The loader's own table (key, source, content_hash, body, si and, where it
can add it, the records' fields) or an enabled table of the user's own
(:mod:`~nearsim.client.layouts`); the fingerprints' profile is the table's,
and the client must be able to compute it unless the server does
(``--server-side``).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any, NamedTuple

import psycopg

from ..core.fingerprint import PROFILE
from ..core.profiles import Profile, ProfileError, canonical
from ..core.registry import Registration
from .connect import ProfileMismatch
from .database_encoding import CLIENT_ENCODING, client_encoding
from .documents import DocumentTable, TableError
from .layouts import UserLayout, user_layout
from .load_options import LoadOptions


class Target(NamedTuple):
    """A checked table, and how the load fills it."""

    options: LoadOptions  # with the table's profile, canonical
    user: UserLayout | None  # a table of the user's own
    kept: bool  # the loader's own table keeps the records' other fields
    not_kept: str | None  # why it cannot, to say once


def check_target(conn: psycopg.Connection[Any], lookup_conn: psycopg.Connection[Any],
                 table: DocumentTable, options: LoadOptions) -> Target:
    """Refuse tables this client cannot fill correctly; how it fills the others."""
    if not conn.autocommit:
        raise ValueError("the loader needs a connection in autocommit mode: each batch is"
                         " a transaction of its own")
    for each in (conn, lookup_conn):
        if client_encoding(each) != CLIENT_ENCODING:
            raise ValueError(
                f"the loader sends UTF-8 text: connect with client_encoding {CLIENT_ENCODING}"
                f" (nearsim.connect does), not {client_encoding(each) or 'unknown'}")
    registration, user = layout(table, options)
    try:
        asked = None if options.profile is None else canonical(options.profile)
    except ProfileError as error:
        raise ProfileMismatch(str(error)) from error
    profile = asked or PROFILE
    if registration is not None:
        if asked is not None and asked != registration.profile:
            raise ProfileMismatch(
                f"table {table} holds fingerprints of profile {registration.profile},"
                f" not {asked}"
            )
        profile = registration.profile
    if not options.server_side:
        try:
            Profile.named(profile).check_libraries()
        except (ProfileError, RuntimeError) as error:
            raise ProfileMismatch(
                f"table {table} holds fingerprints of profile {profile}, which this"
                f" client cannot compute ({error}): load with --server-side"
            ) from error
    # The table's triggers keep fingerprints of a transaction that declares
    # their profile (writers.declare) instead of computing each again.  With
    # --server-side the loader's own statement computes them in the server
    # (or leaves them NULL for the trigger): once either way.
    options = replace(options, profile=profile)
    not_kept = None if user is not None else table.add_fields_column()
    return Target(options, user, user is None and not_kept is None, not_kept)


def layout(table: DocumentTable,
           options: LoadOptions) -> tuple[Registration | None, UserLayout | None]:
    """The table's registration, and the layout of a table of the user's own."""
    mapped = bool(options.key_column or options.text_column or options.columns)
    table.require()
    try:
        table.check_layout()
    except TableError as error:
        registration = table.registration()
        if registration is None:
            if mapped:
                raise TableError(
                    f"table {table} is not enabled for nearsim: enable it first"
                    " (SELECT nearsim_enable(table, text_column)), the loader fills its"
                    " fingerprint column") from error  # fmt: skip
            raise TableError(f"{error}; or enable a table of your own first with SELECT"
                             " nearsim_enable(table, text_column)") from error  # fmt: skip
        return registration, user_layout(table, registration, options)
    if mapped:
        raise TableError(
            f"table {table} has nearsim-load's own columns (key, source, content_hash,"
            " body, si): --key-column, --text-column and --column are for a table of your"
            " own")  # fmt: skip
    return table.registration(), None
