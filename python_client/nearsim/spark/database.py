"""Rows with their fingerprints into a nearsim-enabled PostgreSQL table, by COPY from the executors.

:func:`write_table` checks the table on the driver (it exists, it is
enabled, its profile is the fingerprints'), then every partition of the
DataFrame is written by the executor that holds it: one connection, one
transaction, one ``COPY`` of the key, the text and the fingerprint.  The
transaction declares the fingerprints' profile (``set_config('nearsim.
profile', profile, true)``, as ``nearsim-load`` does), so the table's
trigger keeps the fingerprints instead of computing them again.

A partition is written whole or not at all.  A key that is stored already,
or that comes twice, fails its partition's transaction; the error names
the key.  Partitions written before the failure stay written: a job run
again over the same rows fails on their keys.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any

import psycopg
from psycopg import sql
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from ..core.profiles import ProfileError, canonical
from ..core.registry import EXTENSION_SCHEMA_QUERY, REGISTRY
from .fingerprinting import simhash_column

__all__ = ["Target", "WriteError", "target_table", "write_table"]

_MARK = "nearsim-write-error: "


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


def target_table(dsn: str, table: str, profile: str | None = None) -> Target:
    """The enabled ``table`` as the database describes it, checked before any work.

    ``profile`` (the fingerprints' profile) must be the table's; by default
    it is taken to be.
    """
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
    except psycopg.Error as error:
        raise WriteError(_first_line(error)) from error
    if row is None:
        raise WriteError(f"table {named[0]} is not enabled for nearsim: enable it first"
                         " (SELECT nearsim_enable(table, text_column))")  # fmt: skip
    key_column, text_column, fingerprint_column, table_profile = (str(value) for value in row)
    if profile is not None:
        try:
            asked = canonical(profile)
        except ProfileError as error:
            raise WriteError(str(error)) from error
        if asked != table_profile:
            raise WriteError(f"table {named[0]} holds fingerprints of profile {table_profile},"
                             f" not {asked}")  # fmt: skip
    return Target(dsn, str(named[0]), key_column, text_column, fingerprint_column, table_profile)


def _first_line(error: BaseException) -> str:
    return (str(error).strip().splitlines() or [type(error).__name__])[0]


def _copy_partition(target: Target) -> Callable[[Iterable[Any]], Iterator[int]]:
    """The executors' work: one partition in one transaction, by one COPY."""
    statement = sql.SQL("COPY {} ({}, {}, {}) FROM STDIN").format(
        sql.SQL(target.name), sql.Identifier(target.key_column),
        sql.Identifier(target.text_column), sql.Identifier(target.fingerprint_column))

    def copy_partition(rows: Iterable[Any]) -> Iterator[int]:
        count = 0
        try:
            with psycopg.connect(target.dsn) as conn:
                conn.execute("SELECT pg_catalog.set_config('nearsim.profile', %s, true)",
                             [target.profile])  # fmt: skip
                with conn.cursor().copy(statement) as copy:
                    for row in rows:
                        copy.write_row((row[0], row[1], row[2]))
                        count += 1
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
        yield count

    return copy_partition


def _unwrapped(error: Exception) -> WriteError | None:
    """Our error inside Spark's report of a failed task, if it is one."""
    for line in reversed(str(error).splitlines()):
        if _MARK in line:
            return WriteError(line.split(_MARK, 1)[1].strip())
    return None


def write_table(df: DataFrame, dsn: str, table: str, key_column: str, text_column: str,
                profile: str | None = None, fingerprint_column: str = "si",
                partitions: int | None = None) -> int:  # fmt: skip
    """Write the rows of ``df`` into the nearsim-enabled ``table``; the number of rows written.

    The key (``key_column``) goes to the table's key column, the text
    (``text_column``) to its text column and the fingerprint to its
    fingerprint column: ``fingerprint_column`` of ``df`` if it has one
    (fingerprints of ``profile``, by default taken to be the table's), else
    computed with the table's profile.  Each partition is one transaction
    and one COPY from the executor that holds it (``partitions``, if given,
    repartitions first: that many connections in all, at most one per
    executor core at a time).  The executors connect with ``dsn`` as it is.
    Raises :class:`WriteError` when the table cannot take the rows, before
    any is written, or when a partition fails (a duplicate key: the error
    names it).
    """
    target = target_table(dsn, table, profile)
    for column in (key_column, text_column):
        if column not in df.columns:
            raise WriteError(f"the rows have no column {column!r}")
    fingerprint = (F.col(fingerprint_column) if fingerprint_column in df.columns
                   else simhash_column(text_column, target.profile))  # fmt: skip
    rows = df.select(F.col(key_column), F.col(text_column).cast("string"), fingerprint)
    if partitions is not None:
        rows = rows.repartition(partitions)
    try:
        counts: list[int] = rows.rdd.mapPartitions(_copy_partition(target)).collect()
        return sum(counts)
    except Exception as error:
        found = _unwrapped(error)
        if found is None:
            raise
        raise found from None
