"""A table of the user's own as the loader fills it: which column takes the
key, the text, the fingerprint and each mapped record field, and the merge
that writes a batch into it (see :class:`UserLayout`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

from psycopg import sql

from ..core.registry import Registration
from .documents import (
    DocumentTable,
    TableError,
)  # fmt: skip
from .load_options import LoadOptions
from .rows import KEY_TYPES, RowShape


class ColumnError(TableError):
    """A column named for loading does not exist or cannot be loaded into."""


class _Column(NamedTuple):
    type: str  # without modifiers, as format_type prints it (quoted where needed)
    typed: str  # with its modifiers: varchar(20), numeric(10,2)
    generated: bool
    always_identity: bool
    unique: bool  # a unique index of its own that ON CONFLICT can use
    required: bool  # NOT NULL without a default


_COLUMNS_QUERY = """
SELECT a.attname, pg_catalog.format_type(a.atttypid, NULL),
       pg_catalog.format_type(a.atttypid, a.atttypmod), a.attgenerated <> '',
       a.attidentity = 'a',
       EXISTS (SELECT FROM pg_catalog.pg_index i
               WHERE i.indrelid = a.attrelid AND i.indisunique AND i.indimmediate
                 AND i.indisvalid AND i.indnkeyatts = 1 AND i.indkey[0] = a.attnum
                 AND i.indpred IS NULL AND i.indexprs IS NULL),
       a.attnotnull AND NOT a.atthasdef AND a.attidentity = '' AND a.attgenerated = ''
FROM pg_catalog.pg_attribute a
WHERE a.attrelid = %s::pg_catalog.regclass AND a.attnum > 0 AND NOT a.attisdropped
ORDER BY a.attnum"""


class MappedColumn(NamedTuple):
    """A record field loaded into a column of the user's table."""

    field: str
    column: str
    type: str  # the staged text is cast to this; assigning it checks the modifiers
    # (a varchar(20) refuses longer text, where a cast to varchar(20) would cut it)
    typed: str  # with modifiers: how a new value compares with the stored one
    # (1.5 is stored as 1.50 in a numeric(10,2))


@dataclass(frozen=True)
class UserLayout:
    """Which columns of a table of the user's own the loader writes.

    The key (cast to its column's type), the text, its fingerprint and the
    mapped record fields.  Names are quoted with psycopg.sql; types are
    written as the server's format_type prints them, quoted where needed.
    """

    key: str
    key_type: str
    text: str
    fingerprint: str
    columns: tuple[MappedColumn, ...]

    def shape(self) -> RowShape:
        return RowShape(self.key, self.key_type, len(self.columns))

    def _compared(self, prefix: str) -> sql.Composed:
        """The stored values a new row must equal to be unchanged, as text
        (json has no equality operator; every type prints as text)."""
        names = [self.text, *(column.column for column in self.columns)]
        return sql.SQL("ROW({})").format(sql.SQL(", ").join(
            sql.SQL("{}.{}::pg_catalog.text").format(sql.Identifier(prefix), sql.Identifier(name))
            for name in names))  # fmt: skip

    # The statements take no parameters (values are literals): a "%" in a
    # column's name would be read as a placeholder.

    def merge_statement(
        self, table: sql.Composable, staging: sql.Identifier, replace: bool,
        only: str | None = None,
    ) -> sql.Composed:
        """INSERT ... ON CONFLICT from the staging table (the row of key ``only``),
        returning (key, inserted)."""
        names = [self.key, self.text, self.fingerprint, *(c.column for c in self.columns)]
        values = [
            sql.SQL("CAST(s.key AS {})").format(sql.SQL(self.key_type)),
            sql.SQL("s.body"), sql.SQL("s.si"),
            *(sql.SQL("CAST(s.{} AS {})").format(sql.Identifier(f"f{number}"), sql.SQL(c.type))
              for number, c in enumerate(self.columns)),
        ]  # fmt: skip
        action: sql.Composable = sql.SQL("DO NOTHING")
        if replace:
            action = sql.SQL("DO UPDATE SET {} WHERE {} IS DISTINCT FROM {}").format(
                sql.SQL(", ").join(
                    sql.SQL("{0} = EXCLUDED.{0}").format(sql.Identifier(name))
                    for name in names[1:]),
                self._compared("t"), self._compared("excluded"))
        # xmax is 0 in a row this statement inserted, set in one it updated
        where = sql.SQL("" if only is None else "WHERE s.key = {}").format(sql.Literal(only))
        return sql.SQL(
            "INSERT INTO {table} AS t ({names}) SELECT {values} FROM {staging} AS s {where}"
            " ON CONFLICT ({key}) {action} RETURNING t.{key}::pg_catalog.text, (t.xmax = 0)"
        ).format(table=table, names=sql.SQL(", ").join(map(sql.Identifier, names)),
                 values=sql.SQL(", ").join(values), staging=staging, where=where,
                 key=sql.Identifier(self.key), action=action)  # fmt: skip

    def differing_statement(
        self, table: sql.Composable, staging: sql.Identifier, keys: list[str]
    ) -> sql.Composed:
        """The staged keys (of ``keys``) whose stored row has other values."""
        staged = sql.SQL("ROW({})").format(sql.SQL(", ").join([
            sql.SQL("s.body"),
            *(sql.SQL("CAST(s.{} AS {})::pg_catalog.text").format(
                sql.Identifier(f"f{number}"), sql.SQL(c.typed))
              for number, c in enumerate(self.columns)),
        ]))  # fmt: skip
        return sql.SQL(
            "SELECT s.key FROM {staging} AS s JOIN {table} AS t ON t.{key} = CAST(s.key AS {type})"
            " WHERE s.key = ANY ({keys}::pg_catalog.text[]) AND {stored} IS DISTINCT FROM {staged}"
        ).format(staging=staging, table=table, key=sql.Identifier(self.key),
                 type=sql.SQL(self.key_type), keys=sql.Literal(keys), stored=self._compared("t"),
                 staged=staged)


def _find_column(name: str, columns: dict[str, _Column]) -> str | None:
    """A column by its name as the catalog has it, or written as in SQL ("a""b")."""
    if name in columns:
        return name
    if len(name) >= 2 and name[0] == name[-1] == '"':
        unquoted = name[1:-1].replace('""', '"')
        if unquoted in columns:
            return unquoted
    return None


def user_layout(
    table: DocumentTable, registration: Registration, options: LoadOptions
) -> UserLayout:
    """The columns to load into, checked before any document is read.

    The key and text columns default to the ones the table is enabled with;
    the text must go to the fingerprinted column, and the key to a column
    with a unique index of its own (ON CONFLICT finds stored rows by it).
    """
    columns = {str(name): _Column(*facts) for name, *facts in table.conn.execute(
        _COLUMNS_QUERY, [table.quoted]).fetchall()}  # fmt: skip
    listed = ", ".join(columns)

    def column(name: str, what: str) -> str:
        found = _find_column(name, columns)
        if found is None:
            raise ColumnError(f"table {table} has no column {name!r} ({what}); its columns are"
                              f" {listed}")  # fmt: skip
        return found

    key = column(options.key_column or registration.key_column, "the key column")
    if columns[key].type not in KEY_TYPES:
        raise ColumnError(f"key column {key!r} of table {table} has type {columns[key].type};"
                          f" nearsim-load loads keys of type {', '.join(KEY_TYPES)}")
    if not columns[key].unique:
        raise ColumnError(f"key column {key!r} of table {table} needs a unique index of its own"
                          " that is not deferrable (PRIMARY KEY or UNIQUE): stored documents"
                          " are found by it")  # fmt: skip
    text = column(options.text_column or registration.text_column, "the text column")
    if text != registration.text_column:
        raise ColumnError(f"table {table} is enabled with text column"
                          f" {registration.text_column!r}: its fingerprints are of that column,"
                          f" so the text is loaded into it, not into {text!r}")  # fmt: skip
    own = {key: "the key column", text: "the text column",
           registration.hash_column: "the fingerprint column"}
    mapped: list[MappedColumn] = []
    for record_field, name in options.columns:
        found = column(name, f"for field {record_field!r}")
        facts = columns[found]
        problem = (
            f"is {own[found]}, which the loader fills" if found in own
            else "is a generated column" if facts.generated
            else "is GENERATED ALWAYS AS IDENTITY" if facts.always_identity
            else "has another field already" if any(m.column == found for m in mapped)
            else None
        )  # fmt: skip
        if problem is not None:
            raise ColumnError(f"column {found!r} of table {table} {problem} (for field"
                              f" {record_field!r})")
        mapped.append(MappedColumn(record_field, found, facts.type, facts.typed))
    loaded = {*own, *(m.column for m in mapped)}
    required = [name for name, facts in columns.items() if facts.required and name not in loaded]
    if required:
        raise ColumnError(f"table {table} needs a value for column {required[0]!r} (NOT NULL"
                          " without a default): map a record field to it with --column"
                          f" FIELD={required[0]}")  # fmt: skip
    return UserLayout(key, columns[key].type, text, registration.hash_column, tuple(mapped))


