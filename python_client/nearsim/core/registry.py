"""The registry of enabled tables, ``nearsim_tables``, as both sides read it.

The extension creates the registry in its own schema (``extension/sql/
nearsim.sql``); the server's maintenance functions write it, and the server
and clients read a row as a :class:`Registration`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields, replace
from typing import Any

EXTENSION = "nearsim"
REGISTRY = "nearsim_tables"

EXTENSION_SCHEMA_QUERY = (
    "SELECT n.nspname FROM pg_catalog.pg_extension e"
    " JOIN pg_catalog.pg_namespace n ON n.oid OPERATOR(pg_catalog.=) e.extnamespace"
    f" WHERE e.extname OPERATOR(pg_catalog.=) '{EXTENSION}'"
)
"""SQL for the schema the extension is installed in: no row if it is not.

Qualified throughout: clients run it under their own search_path."""


@dataclass(frozen=True)
class Registration:
    """One row of ``nearsim_tables``: an enabled table's columns, layout and objects.

    The objects (functions; the rotation indexes are the table's own) live
    in ``object_schema``, the table's own schema.  ``bucket_table`` and
    ``bucket_function`` name the bucket table and its trigger function of a
    table enabled before 0.4.0 and not rebuilt since, else None.
    """

    key_column: str
    text_column: str
    hash_column: str
    bands: int
    profile: str
    object_schema: str
    bucket_table: str | None
    fingerprint_function: str
    bucket_function: str | None
    similar_function: str

    @property
    def has_bucket_table(self) -> bool:
        """Whether the table still has the bucket table of an earlier version."""
        return self.bucket_table is not None

    @classmethod
    def columns(cls) -> tuple[str, ...]:
        """The registry's columns that make a Registration, in field order."""
        return tuple(f.name for f in fields(cls))

    @classmethod
    def from_row(cls, row: Mapping[str, Any]) -> Registration:
        """A Registration from a registry row (extra columns are ignored)."""
        return cls(**{name: row[name] for name in cls.columns()})

    def changed(self, **values: Any) -> Registration:
        """A copy with some fields changed (a new layout or profile)."""
        return replace(self, **values)


def object_names(prefix: str) -> dict[str, str]:
    """The names of the functions nearsim makes for a table, from their prefix.

    ``<prefix>_similar`` is the search function users call.
    """
    return {
        "fingerprint_function": f"{prefix}_nearsim_fingerprint",
        "similar_function": f"{prefix}_similar",
    }


SIMILAR_SUFFIX = "_similar"

TYPED_FUNCTIONS = {
    "pairs": ("(pg_catalog.int4)",),
    "pairs_verified": ("(pg_catalog.float8, pg_catalog.text, pg_catalog.int4)",),
    "clusters": ("(pg_catalog.int4, pg_catalog.text, pg_catalog.int4)",),
    "clusters_verified": ("(pg_catalog.float8, pg_catalog.text, pg_catalog.int4, pg_catalog.text,"
                          " pg_catalog.int4)",),
    "nearest": ("(pg_catalog.int8, pg_catalog.int4, pg_catalog.int4)",
                "(pg_catalog.text, pg_catalog.int4, pg_catalog.int4)"),
}
"""The per-table functions that give pairs, groups and the nearest documents
in the table's key type or row type, by name after the prefix, with the
argument types of each overload (as the registry's trigger links them:
``extension/sql/nearsim.sql``)."""


def typed_function_names(similar_function: str) -> dict[str, str]:
    """``<prefix>_pairs`` and the others, from the name of ``<prefix>_similar``."""
    prefix = similar_function.removesuffix(SIMILAR_SUFFIX)
    return {kind: f"{prefix}_{kind}" for kind in TYPED_FUNCTIONS}
