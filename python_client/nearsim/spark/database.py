"""Rows with their fingerprints into a nearsim-enabled PostgreSQL table, by COPY from the executors.

:func:`write_table` checks the table on the driver (it exists, it is
enabled, its profile is the fingerprints'), then every partition of the
DataFrame is written by the executor that holds it: one connection, one
transaction, one ``COPY`` of the key, the text and the fingerprint.  The
transaction declares the fingerprints' profile as every writer of
``nearsim-load`` does (:func:`nearsim.client.writers.declare`), so the
table's trigger keeps the fingerprints instead of computing them again.

A partition is written whole or not at all.  What happens to a key that
is stored already is ``on_conflict``'s choice:

- ``"error"`` (the default): it fails its partition's transaction, and the
  error names the key.  Partitions written before the failure stay
  written, so a job run again over the same rows fails on their keys.
- ``"skip"``: the stored row is left as it is, and counted as skipped.
- ``"replace"``: the stored row's text and fingerprint are replaced by the
  new ones (a row whose text and fingerprint are already those is left
  alone, and counted as skipped).

With ``"skip"`` or ``"replace"`` a job that failed half-way can simply be
run again: nothing it wrote is lost or written twice.  Each partition is
then copied into a temporary staging table and merged from it with one
``INSERT ... ON CONFLICT`` on the table's key, in the same transaction; a
key present on two rows is refused before anything is written.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any

import psycopg
from psycopg import sql
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from ..client.writers import create_staging, declare
from ..core.profiles import ProfileError, canonical
from ..core.registry import EXTENSION_SCHEMA_QUERY, REGISTRY
from .fingerprinting import simhash_column

__all__ = ["ON_CONFLICT", "Target", "WriteError", "Written", "target_table", "write_table"]

ON_CONFLICT = ("error", "skip", "replace")
"""What :func:`write_table` does with a key that is stored already."""

_MARK = "nearsim-write-error: "

_STAGING = sql.Identifier("nearsim_write_staging")


class WriteError(RuntimeError):
    """The rows cannot be written: no such table, not enabled, another profile, a key taken."""


@dataclass(frozen=True)
class Target:
    """An enabled table to write into: its name (quoted, qualified), columns and profile."""

    dsn: str
    name: str
    key_column: str
    text_column: str
    fingerprint_column: str
    profile: str
    key_type: str = "text"
    """The key column's type, as ``format_type`` prints it (with its modifiers)."""
    text_type: str = "text"
    """The text column's type, as ``format_type`` prints it (with its modifiers)."""
    unique_key: bool = True
    """The key has a unique index of its own that is not deferrable (an arbiter for
    ``ON CONFLICT``)."""


@dataclass(frozen=True)
class Written:
    """What :func:`write_table` did with the rows."""

    inserted: int = 0
    """Rows of new keys."""
    replaced: int = 0
    """Stored rows whose text or fingerprint were replaced (``on_conflict="replace"``)."""
    skipped: int = 0
    """Rows of stored keys left as they were: every one with ``"skip"``; with
    ``"replace"`` those already stored with the same text and fingerprint."""

    @property
    def written(self) -> int:
        """Rows inserted or replaced."""
        return self.inserted + self.replaced

    @property
    def rows(self) -> int:
        """Every row of the DataFrame."""
        return self.inserted + self.replaced + self.skipped

    def __add__(self, other: Written) -> Written:
        return Written(self.inserted + other.inserted, self.replaced + other.replaced,
                       self.skipped + other.skipped)  # fmt: skip


_COLUMN_FACTS = """
SELECT pg_catalog.format_type(k.atttypid, k.atttypmod),
       pg_catalog.format_type(t.atttypid, t.atttypmod),
       EXISTS (SELECT FROM pg_catalog.pg_index i
               WHERE i.indrelid = k.attrelid AND i.indisunique AND i.indimmediate
                 AND i.indisvalid AND i.indnkeyatts = 1 AND i.indkey[0] = k.attnum
                 AND i.indpred IS NULL AND i.indexprs IS NULL)
FROM pg_catalog.pg_attribute k, pg_catalog.pg_attribute t
WHERE k.attrelid = %(table)s::pg_catalog.regclass AND k.attname = %(key)s
  AND t.attrelid = k.attrelid AND t.attname = %(text)s"""


def _check_on_conflict(on_conflict: str) -> None:
    if on_conflict not in ON_CONFLICT:
        raise ValueError(f"unknown on_conflict {on_conflict!r}: use one of"
                         f" {', '.join(ON_CONFLICT)}")  # fmt: skip


def target_table(dsn: str, table: str, profile: str | None = None,
                 on_conflict: str = "error") -> Target:  # fmt: skip
    """The enabled ``table`` as the database describes it, checked before any work.

    ``profile`` (the fingerprints' profile) must be the table's; by default
    it is taken to be.  ``on_conflict`` ``"skip"`` or ``"replace"`` needs a
    key with a unique index that is not deferrable (a ``PRIMARY KEY`` or
    ``UNIQUE`` constraint declared without ``DEFERRABLE``).
    """
    _check_on_conflict(on_conflict)
    try:
        with psycopg.connect(dsn) as conn:
            schema_row = conn.execute(EXTENSION_SCHEMA_QUERY).fetchone()
            if schema_row is None:
                raise WriteError("the database has no nearsim extension: CREATE EXTENSION nearsim")
            named = conn.execute("SELECT %s::regclass::text", [table]).fetchone()
            assert named is not None
            row = conn.execute(
                sql.SQL("SELECT key_column, text_column, hash_column, profile FROM {}.{}"
                        " WHERE tbl = %s::regclass").format(
                    sql.Identifier(schema_row[0]), sql.Identifier(REGISTRY)),
                [table]).fetchone()  # fmt: skip
            if row is None:
                raise WriteError(f"table {named[0]} is not enabled for nearsim: enable it first"
                                 " (SELECT nearsim_enable(table, text_column))")  # fmt: skip
            key_column, text_column, fingerprint_column, table_profile = (
                str(value) for value in row)
            facts = conn.execute(_COLUMN_FACTS, {"table": table, "key": key_column,
                                                 "text": text_column}).fetchone()  # fmt: skip
    except psycopg.Error as error:
        raise WriteError(_first_line(error)) from error
    if facts is None:
        raise WriteError(f"table {named[0]} has no column {key_column!r} or {text_column!r}"
                         " any more: check it with nearsim_verify")  # fmt: skip
    key_type, text_type, unique_key = str(facts[0]), str(facts[1]), bool(facts[2])
    if on_conflict != "error" and not unique_key:
        raise WriteError(f"table {named[0]}: key column {key_column!r} needs a unique index of"
                         f" its own that is not deferrable for on_conflict {on_conflict!r}"
                         " (stored rows are found by it)")  # fmt: skip
    if profile is not None:
        try:
            asked = canonical(profile)
        except ProfileError as error:
            raise WriteError(str(error)) from error
        if asked != table_profile:
            raise WriteError(f"table {named[0]} holds fingerprints of profile {table_profile},"
                             f" not {asked}")  # fmt: skip
    return Target(dsn, str(named[0]), key_column, text_column, fingerprint_column, table_profile,
                  key_type, text_type, unique_key)  # fmt: skip


def _first_line(error: BaseException) -> str:
    return (str(error).strip().splitlines() or [type(error).__name__])[0]


def _merge_statement(target: Target, on_conflict: str) -> sql.Composed:
    """``INSERT ... ON CONFLICT`` from the staging table; returns one row per row written:
    whether it was inserted (a row updated has its ``xmax`` set)."""
    key, text, fingerprint = (sql.Identifier(name) for name in (
        target.key_column, target.text_column, target.fingerprint_column))
    action: sql.Composable = sql.SQL("DO NOTHING")
    if on_conflict == "replace":
        action = sql.SQL(
            "DO UPDATE SET {text} = excluded.{text}, {fp} = excluded.{fp}"
            " WHERE (t.{text}, t.{fp}) IS DISTINCT FROM (excluded.{text}, excluded.{fp})"
        ).format(text=text, fp=fingerprint)
    return sql.SQL(
        "INSERT INTO {table} AS t ({key}, {text}, {fp}) SELECT s.key, s.body, s.si"
        " FROM {staging} AS s ON CONFLICT ({key}) {action}"
        " RETURNING t.xmax OPERATOR(pg_catalog.=) '0'::pg_catalog.xid"
    ).format(table=sql.SQL(target.name), key=key, text=text, fp=fingerprint, staging=_STAGING,
             action=action)  # fmt: skip


def _write_partition(target: Target,
                     on_conflict: str) -> Callable[[Iterable[Any]], Iterator[Written]]:  # fmt: skip
    """The executors' work: one partition in one transaction.

    ``"error"``: one COPY into the table.  ``"skip"`` and ``"replace"``: one
    COPY into a temporary staging table of the key's and the text's own
    types, then one ``INSERT ... ON CONFLICT`` from it.
    """
    direct = sql.SQL("COPY {} ({}, {}, {}) FROM STDIN").format(
        sql.SQL(target.name), sql.Identifier(target.key_column),
        sql.Identifier(target.text_column), sql.Identifier(target.fingerprint_column))
    staged = sql.SQL("COPY {} (key, body, si) FROM STDIN").format(_STAGING)
    merge = _merge_statement(target, on_conflict)

    def write_partition(rows: Iterable[Any]) -> Iterator[Written]:
        count = 0
        try:
            with psycopg.connect(target.dsn) as conn:
                declare(conn, target.profile)
                if on_conflict != "error":
                    create_staging(conn, _STAGING, ("key", "body", "si"),
                                   (target.key_type, target.text_type, "pg_catalog.int8"))
                with conn.cursor().copy(direct if on_conflict == "error" else staged) as copy:
                    for row in rows:
                        copy.write_row((row[0], row[1], row[2]))
                        count += 1
                if on_conflict == "error":
                    done = Written(inserted=count)
                else:
                    returned = [bool(new) for (new,) in conn.execute(merge).fetchall()]
                    inserted = sum(returned)
                    replaced = len(returned) - inserted
                    done = Written(inserted, replaced, count - len(returned))
                conn.commit()
        except psycopg.errors.UniqueViolation as error:
            detail = error.diag.message_detail or _first_line(error)
            raise WriteError(f"{_MARK}duplicate key in table {target.name}: {detail} (stored"
                             " already, or twice among the rows); this partition's rows were"
                             " not written") from None  # fmt: skip
        except psycopg.Error as error:
            detail = f" ({error.diag.message_detail})" if error.diag.message_detail else ""
            raise WriteError(f"{_MARK}writing into table {target.name}: {_first_line(error)}"
                             f"{detail}; this partition's rows were not written") from None
        yield done

    return write_partition


def _unwrapped(error: Exception) -> WriteError | None:
    """Our error inside Spark's report of a failed task, if it is one."""
    for line in reversed(str(error).splitlines()):
        if _MARK in line:
            return WriteError(line.split(_MARK, 1)[1].strip())
    return None


def _repeated_key(rows: DataFrame) -> Any | None:
    """A key that is on more than one of ``rows`` (its first column), or None."""
    key = rows.columns[0]
    found = (rows.groupBy(F.col(key).alias("key")).agg(F.count(F.lit(1)).alias("times"))
             .where(F.col("times") > 1).select("key").first())  # fmt: skip
    return None if found is None else found[0]


def write_table(df: DataFrame, dsn: str, table: str, key_column: str, text_column: str,
                profile: str | None = None, fingerprint_column: str = "si",
                partitions: int | None = None, on_conflict: str = "error") -> Written:  # fmt: skip
    """Write the rows of ``df`` into the nearsim-enabled ``table``: what was written.

    The key (``key_column``) goes to the table's key column, the text
    (``text_column``) to its text column and the fingerprint to its
    fingerprint column: ``fingerprint_column`` of ``df`` if it has one
    (fingerprints of ``profile``, by default taken to be the table's), else
    computed with the table's profile.  Each partition is one transaction
    from the executor that holds it (``partitions``, if given,
    repartitions first: that many connections in all, at most one per
    executor core at a time).  The executors connect with ``dsn`` as it is.

    ``on_conflict`` says what happens to a key stored already:
    ``"error"`` fails its partition (one COPY into the table per
    partition); ``"skip"`` leaves the stored row as it is; ``"replace"``
    replaces its text and fingerprint.  With ``"skip"`` and ``"replace"``
    each partition is copied into a temporary table and merged from it by
    ``INSERT ... ON CONFLICT`` in the same transaction, so a job run again
    after a failure writes what is missing and duplicates nothing; a key on
    two rows of ``df`` is refused before anything is written.

    Raises :class:`WriteError` when the table cannot take the rows, before
    any is written, or when a partition fails (a duplicate key: the error
    names it).
    """
    target = target_table(dsn, table, profile, on_conflict)
    for column in (key_column, text_column):
        if column not in df.columns:
            raise WriteError(f"the rows have no column {column!r}")
    fingerprint = (F.col(fingerprint_column) if fingerprint_column in df.columns
                   else simhash_column(text_column, target.profile))  # fmt: skip
    rows = df.select(F.col(key_column), F.col(text_column).cast("string"), fingerprint)
    if on_conflict != "error":
        repeated = _repeated_key(rows)
        if repeated is not None:
            raise WriteError(f"key {repeated!r} is on more than one row: nothing was written"
                             f" into table {target.name}")  # fmt: skip
    if partitions is not None:
        rows = rows.repartition(partitions)
    try:
        done: list[Written] = rows.rdd.mapPartitions(_write_partition(target, on_conflict)
                                                     ).collect()  # fmt: skip
    except Exception as error:
        found = _unwrapped(error)
        if found is None:
            raise
        raise found from None
    return sum(done, Written())
