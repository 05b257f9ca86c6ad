"""The deduplicated corpus out of a table: ``nearsim dedup``.

From the groups ``nearsim clusters`` finds with the same options
(``nearsim_clusters_verified``, or ``nearsim_clusters`` by bits), one
document of each group survives, chosen by a :class:`~nearsim.core.survivors.Keep`
policy, and so does every document without a near-duplicate.  The
survivors go out with all of their record's fields:

- from nearsim-load's own table: the record as it was read, its kept
  fields (:mod:`nearsim.client.kept_fields`) and its text, the id under
  ``id_field`` (the key, for a document whose record had no id) and the
  text under ``text_field``;
- from a table of your own: every column but the fingerprint.

They are written to a file (:mod:`nearsim.client.records_out`: JSON Lines,
CSV or Parquet), streamed from a server-side cursor, or into a new table
made like the source (``into_table``) with the removed -> kept mapping in
``<into_table>_removed``; the mapping can also go to a file.

Everything is read in one REPEATABLE READ transaction: the groups, the
survivors and the mapping are of one snapshot of the table.  The groups
and the mapping are kept in temporary tables (dropped at its end), the
documents are never held in Python.
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, cast

import psycopg
from psycopg import sql
from psycopg.rows import dict_row

from ..core.survivors import Keep, SortTerm
from .documents import FIELDS_COLUMN, DocumentTable, TableError
from .records_out import OutColumn, OutputError, OutputFile, check_writable, format_of

__all__ = ["DedupError", "DedupOptions", "DedupSummary", "dedup"]

BATCH_ROWS = 2000  # rows fetched from the server-side cursor and written at a time


class DedupError(ValueError):
    """Options that cannot work on this table: one line, naming what is wrong."""


@dataclass(frozen=True)
class DedupOptions:
    """The groups (as ``nearsim clusters``) and the survivor of each."""

    keep: Keep = field(default_factory=Keep)
    min_similarity: float = 0.8
    measure: str = "s_r"
    max_distance: int | None = None  # by bits: the distance; verified: the radius
    hamming: bool = False
    method: str = "components"
    # the names of the id and the text in what is written from nearsim-load's
    # own table (the defaults are nearsim-load's --id-field and --text-field)
    id_field: str = "id"
    text_field: str = "text"


@dataclass
class DedupSummary:
    documents: int = 0
    groups: int = 0
    survivors: int = 0
    removed: int = 0
    output: str | None = None
    mapping: str | None = None
    table: str | None = None
    mapping_table: str | None = None
    seconds: float = 0.0

    def as_dict(self) -> dict[str, Any]:
        return {"documents": self.documents, "groups": self.groups,
                "survivors": self.survivors, "removed": self.removed, "output": self.output,
                "mapping": self.mapping, "table": self.table,
                "mapping_table": self.mapping_table,
                "seconds": round(self.seconds, 3)}  # fmt: skip

    def lines(self) -> list[str]:
        lines = [f"{self.documents:,} documents, {self.groups:,} groups of near-duplicates:"
                 f" {self.survivors:,} survivors, {self.removed:,} removed"
                 f" in {self.seconds:.1f} s"]  # fmt: skip
        for what, where in (("survivors", self.output), ("survivors", self.table),
                            ("removed -> kept", self.mapping),
                            ("removed -> kept", self.mapping_table)):  # fmt: skip
            if where is not None:
                lines.append(f"{what} written to {where}")
        return lines


# -- what a table's rows are --------------------------------------------------------


_KINDS = {
    "smallint": "integer", "integer": "integer", "bigint": "integer",
    "real": "float", "double precision": "float", "numeric": "float",
    "boolean": "boolean", "text": "string", "character varying": "string",
    "character": "string", "name": "string", "date": "date",
    "timestamp without time zone": "timestamp", "timestamp with time zone": "timestamptz",
    "bytea": "binary", "json": "json", "jsonb": "json",
}  # fmt: skip
_STRINGS = ("text", "character varying", "character", "name")


@dataclass(frozen=True)
class _Column:
    name: str
    type: str  # format_type without modifiers
    typed: str  # with them


class _Source:
    """The table deduplicated: its key, text, and how its rows are read and ordered."""

    def __init__(self, table: DocumentTable, options: DedupOptions) -> None:
        self.table = table
        self.options = options
        registration = table.require_enabled()
        conn = table.conn
        self.columns = [_Column(str(name), str(kind), str(typed)) for name, kind, typed in
                        conn.execute(
            "SELECT a.attname, pg_catalog.format_type(a.atttypid, NULL),"
            " pg_catalog.format_type(a.atttypid, a.atttypmod) FROM pg_catalog.pg_attribute a"
            " WHERE a.attrelid = %s::pg_catalog.regclass AND a.attnum > 0"
            " AND NOT a.attisdropped ORDER BY a.attnum", [table.quoted])]  # fmt: skip
        try:
            table.check_layout()
            self.own = True
        except TableError:
            self.own = False
        self.key = registration.key_column
        self.text = registration.text_column
        self.fingerprint = registration.hash_column
        by_name = {column.name: column for column in self.columns}
        self.key_type = by_name[self.key].type
        self.key_typed = by_name[self.key].typed  # a character(10) key is cast to its length
        self.has_fields = self.own and by_name.get(FIELDS_COLUMN, _Column("", "", "")).type \
            == "jsonb"
        keep = options.keep
        if keep.field is not None and not self.own and keep.field not in by_name:
            raise DedupError(f"table {table} has no column {keep.field!r} (--keep {keep});"
                             f" its columns are {', '.join(by_name)}")  # fmt: skip
        if keep.field is not None and self.own and not self.has_fields:
            raise DedupError(f"table {table} keeps no record fields (it has no column"
                             f" {FIELDS_COLUMN}; load the records again to keep them):"
                             f" --keep {keep} has nothing to compare")  # fmt: skip
        self.output_columns = [column for column in self.columns
                               if column.name != self.fingerprint]  # fmt: skip

    # -- SQL pieces

    def key_text(self, alias: str) -> sql.Composable:
        return sql.SQL("{}.{}::pg_catalog.text").format(sql.Identifier(alias),
                                                        sql.Identifier(self.key))

    def key_of_text(self, value: sql.Composable) -> sql.Composable:
        """A key as the server's group functions give it (text), as the key column holds it."""
        return sql.SQL("CAST({} AS {})").format(value, sql.SQL(self.key_typed))

    def record_id(self, alias: str) -> sql.Composable:
        """The loader's table: the record's id as it was written, else the key (jsonb)."""
        return sql.SQL("COALESCE({fields} -> {id}, pg_catalog.to_jsonb({key}))").format(
            fields=self._fields(alias), id=sql.Literal(self.options.id_field),
            key=sql.SQL("{}.key").format(sql.Identifier(alias)))  # fmt: skip

    def _fields(self, alias: str) -> sql.Composable:
        if not self.has_fields:
            return sql.SQL("NULL::pg_catalog.jsonb")
        return sql.SQL("NULLIF({}.{}, 'null'::pg_catalog.jsonb)").format(
            sql.Identifier(alias), sql.Identifier(FIELDS_COLUMN))

    def ranking(self, alias: str) -> sql.Composable:
        """ORDER BY terms that put a group's survivor first (core.survivors.Keep.terms)."""
        terms: list[sql.Composable] = []
        for term in self.options.keep.terms():
            terms += self._term(term, alias)
        return sql.SQL(", ").join(terms)

    def _term(self, term: SortTerm, alias: str) -> list[sql.Composable]:
        direction = sql.SQL("DESC NULLS LAST" if term.descending else "ASC NULLS LAST")
        column = sql.Identifier(alias)
        if term.what == "length":
            return [sql.SQL("pg_catalog.char_length({}.{}) {}").format(
                column, sql.Identifier(self.text), direction)]
        if term.what == "key" and self.own:
            # the record's id as it was written (42 before 137), then the key
            return [*_json_order(self.record_id(alias), direction),
                    sql.SQL("{}.key COLLATE \"C\" ASC").format(column)]
        if term.what == "key":
            return [self._typed_order(self.key, alias, direction)]
        name = self.options.keep.field
        assert name is not None
        if self.own:
            value = sql.SQL("{} -> {}").format(self._fields(alias), sql.Literal(name))
            return _json_order(value, direction)
        return [self._typed_order(name, alias, direction)]

    def _typed_order(self, name: str, alias: str, direction: sql.Composable) -> sql.Composable:
        """A column in its own type's order; strings by code point, as JSON's and Spark's."""
        kind = next(column.type for column in self.columns if column.name == name)
        collate = sql.SQL(' COLLATE "C"' if kind in _STRINGS else "")
        return sql.SQL("{}.{}{} {}").format(sql.Identifier(alias), sql.Identifier(name),
                                            collate, direction)  # fmt: skip

    def selected(self, alias: str) -> sql.Composable:
        """The columns a survivor is written with (a file's rows)."""
        if self.own:
            return sql.SQL("{a}.key, {a}.body, {fields} AS fields").format(
                a=sql.Identifier(alias), fields=self._fields(alias))
        return sql.SQL(", ").join(
            sql.SQL("{}.{}{} AS {}").format(
                sql.Identifier(alias), sql.Identifier(column.name),
                sql.SQL("" if column.type in _KINDS else "::pg_catalog.text"),
                sql.Identifier(column.name))
            for column in self.output_columns)

    def record(self, row: Mapping[str, Any]) -> dict[str, Any]:
        """A survivor as it is written: a row of :meth:`selected`."""
        if not self.own:
            return dict(row)
        fields: dict[str, Any] = row[FIELDS_COLUMN] if isinstance(row[FIELDS_COLUMN],
                                                                   dict) else {}  # fmt: skip
        identifier = fields.get(self.options.id_field)
        record = {self.options.id_field: row["key"] if identifier is None else identifier}
        record.update((name, value) for name, value in fields.items()
                      if name not in (self.options.id_field, self.options.text_field))
        record[self.options.text_field] = row["body"]
        return record


def _json_order(value: sql.Composable, direction: sql.Composable) -> list[sql.Composable]:
    """A jsonb value in core.survivors' order: booleans, numbers, strings (by code point),
    then objects and arrays by their text; JSON null and no value last."""
    kind = sql.SQL("pg_catalog.jsonb_typeof({})").format(value)
    return [
        sql.SQL("CASE {kind} WHEN 'boolean' THEN 0 WHEN 'number' THEN 1 WHEN 'string' THEN 2"
                " WHEN 'object' THEN 3 WHEN 'array' THEN 3 END {d}").format(kind=kind,
                                                                            d=direction),
        sql.SQL("CASE WHEN {kind} = 'boolean' THEN ({v})::pg_catalog.bool END {d}").format(
            kind=kind, v=value, d=direction),
        sql.SQL("CASE WHEN {kind} = 'number' THEN ({v})::pg_catalog.numeric END {d}").format(
            kind=kind, v=value, d=direction),
        sql.SQL("CASE WHEN {kind} = 'string' THEN ({v}) #>> '{{}}' END COLLATE \"C\" {d}").format(
            kind=kind, v=value, d=direction),
        sql.SQL("CASE WHEN {kind} IN ('object', 'array') THEN ({v})::pg_catalog.text END"
                " COLLATE \"C\" {d}").format(kind=kind, v=value, d=direction),
    ]


# -- the work -----------------------------------------------------------------------

_GROUPS = sql.Identifier("nearsim_dedup_groups")
_REMOVED = sql.Identifier("nearsim_dedup_removed")


def dedup(conn: psycopg.Connection[Any], table: str | DocumentTable,
          options: DedupOptions | None = None, *, output: str | None = None,
          output_format: str | None = None, mapping: str | None = None,
          mapping_format: str | None = None, into_table: str | None = None,
          overwrite: bool = False) -> DedupSummary:  # fmt: skip
    """Write the survivors of ``table`` to ``output`` and/or ``into_table`` (see the module).

    ``conn`` is in autocommit mode (:func:`nearsim.connect(autocommit=True)`);
    the work is one transaction of its own.  ``output``'s format is
    ``output_format`` or told by its suffix (.jsonl, .parquet, .csv);
    ``mapping`` (.jsonl or .csv) gets one row per removed document:
    ``removed`` and ``kept``, their keys (from nearsim-load's table, the
    records' ids as written).  An existing file or table is refused unless
    ``overwrite``.

    >>> summary = dedup(conn, "docs", DedupOptions(keep=Keep.parse("longest")),
    ...                 output="corpus.jsonl")  # doctest: +SKIP
    """
    options = options or DedupOptions()
    if output is None and into_table is None and mapping is None:
        raise DedupError("nothing to write: give an output, a mapping or a table")
    if options.method not in ("components", "pivot"):
        raise DedupError(f"unknown method {options.method!r}: use components or pivot")
    started = time.monotonic()
    documents = table if isinstance(table, DocumentTable) else DocumentTable(conn, table)
    source = _Source(documents, options)
    formats = {
        "output": format_of(output, output_format) if output is not None else None,
        "mapping": format_of(mapping, mapping_format) if mapping is not None else None,
    }
    if formats["mapping"] == "parquet":
        raise OutputError(f"the mapping {mapping} is written as JSON Lines or CSV, not Parquet")
    for path, chosen in ((output, formats["output"]), (mapping, formats["mapping"])):
        if path is not None and chosen is not None:
            check_writable(path, chosen, overwrite)  # before the groups are found
    target = _Target(conn, source, into_table, overwrite) if into_table is not None else None
    summary = DedupSummary()
    with conn.transaction():
        conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
        _group(conn, source, options)
        summary.documents, summary.groups, summary.removed = _counts(conn, source)
        summary.survivors = summary.documents - summary.removed
        if target is not None:
            target.write()
            summary.table, summary.mapping_table = target.name, target.mapping_name
        if output is not None:
            assert formats["output"] is not None
            columns = _output_columns(conn, source, formats["output"])
            with OutputFile(output, columns, formats["output"], overwrite) as file:
                for rows in _survivors(conn, source):
                    file.write(source.record(row) for row in rows)
            summary.output = output
        if mapping is not None:
            assert formats["mapping"] is not None
            kind: Any = "json" if source.own else _KINDS.get(source.key_type, "string")
            columns = [OutColumn("removed", kind), OutColumn("kept", kind)]
            with OutputFile(mapping, columns, formats["mapping"], overwrite) as file:
                for rows in _mapping(conn, source):
                    file.write(rows)
            summary.mapping = mapping
    summary.seconds = time.monotonic() - started
    return summary


def _group(conn: psycopg.Connection[Any], source: _Source, options: DedupOptions) -> None:
    """The groups (key, cluster) and the removed -> kept mapping, in temporary tables."""
    ext, quoted = source.table.extension, source.table.quoted
    if options.hamming:
        groups = sql.SQL("{}.nearsim_clusters(%s::pg_catalog.regclass, %s, %s, 2)").format(ext)
        arguments: list[Any] = [quoted, 6 if options.max_distance is None
                                else options.max_distance, options.method]  # fmt: skip
    else:
        groups = sql.SQL("{}.nearsim_clusters_verified(%s::pg_catalog.regclass, %s, %s, %s, %s,"
                         " 2)").format(ext)  # fmt: skip
        arguments = [quoted, options.min_similarity, options.measure, options.max_distance,
                     options.method]  # fmt: skip
    conn.execute(sql.SQL("CREATE TEMPORARY TABLE {} ON COMMIT DROP AS"
                         " SELECT g.key, g.cluster FROM {} AS g").format(_GROUPS, groups),
                 arguments)  # fmt: skip
    # each group's survivor: the first of its members by the policy's ranking
    conn.execute(sql.SQL(
        """CREATE TEMPORARY TABLE {removed} ON COMMIT DROP AS
           SELECT g.key AS removed, k.key AS kept
           FROM {groups} AS g
           JOIN (SELECT DISTINCT ON (m.cluster) m.cluster, m.key
                 FROM {groups} AS m JOIN {table} AS t ON t.{key} = {typed}
                 ORDER BY m.cluster, {ranking}) AS k ON k.cluster = g.cluster
           WHERE g.key <> k.key""").format(
        removed=_REMOVED, groups=_GROUPS, table=source.table.identifier,
        key=sql.Identifier(source.key), typed=source.key_of_text(sql.SQL("m.key")),
        ranking=source.ranking("t")))  # fmt: skip
    conn.execute(sql.SQL("CREATE UNIQUE INDEX ON {} (removed)").format(_REMOVED))
    conn.execute(sql.SQL("ANALYZE {}").format(_REMOVED))


def _counts(conn: psycopg.Connection[Any], source: _Source) -> tuple[int, int, int]:
    row = conn.execute(sql.SQL(
        "SELECT (SELECT pg_catalog.count(*) FROM {table}),"
        " (SELECT pg_catalog.count(DISTINCT cluster) FROM {groups}),"
        " (SELECT pg_catalog.count(*) FROM {removed})").format(
            table=source.table.identifier, groups=_GROUPS, removed=_REMOVED)).fetchone()
    assert row is not None
    return int(row[0]), int(row[1]), int(row[2])


def _survivor_filter(source: _Source, alias: str) -> sql.Composable:
    return sql.SQL("NOT EXISTS (SELECT FROM {removed} AS r WHERE r.removed = {key})").format(
        removed=_REMOVED, key=source.key_text(alias))


def _stream(conn: psycopg.Connection[Any], query: sql.Composed,
            name: str) -> Iterator[list[dict[str, Any]]]:  # fmt: skip
    """The rows of ``query`` in batches, from a server-side cursor."""
    with conn.cursor(name=name, row_factory=dict_row) as cursor:
        cursor.execute(query)
        while rows := cursor.fetchmany(BATCH_ROWS):
            yield rows


def _survivors(conn: psycopg.Connection[Any], source: _Source) -> Iterator[list[dict[str, Any]]]:
    query = sql.SQL("SELECT {columns} FROM {table} AS t WHERE {survives}").format(
        columns=source.selected("t"), table=source.table.identifier,
        survives=_survivor_filter(source, "t"))
    return _stream(conn, query, "nearsim_dedup_survivors")


def _mapping(conn: psycopg.Connection[Any], source: _Source) -> Iterator[list[dict[str, Any]]]:
    """removed -> kept, as the survivors name them (the loader's table: the records' ids)."""
    if source.own:
        def named(key: str) -> sql.Composable:
            return sql.SQL("(SELECT {id} FROM {table} AS d WHERE d.key = {key})").format(
                id=source.record_id("d"), table=source.table.identifier, key=sql.SQL(key))

        query = sql.SQL("SELECT {removed} AS removed, {kept} AS kept FROM {mapping} AS r"
                        " ORDER BY r.kept COLLATE \"C\", r.removed COLLATE \"C\"").format(
            removed=named("r.removed"), kept=named("r.kept"), mapping=_REMOVED)
    else:
        query = sql.SQL("SELECT {removed} AS removed, {kept} AS kept FROM {mapping} AS r"
                        " ORDER BY 2, 1").format(
            removed=source.key_of_text(sql.SQL("r.removed")),
            kept=source.key_of_text(sql.SQL("r.kept")), mapping=_REMOVED)
    return _stream(conn, query, "nearsim_dedup_mapping")


def _output_columns(conn: psycopg.Connection[Any], source: _Source,
                    format: str) -> list[OutColumn]:  # fmt: skip
    """The columns of the output: a table's own, or the id, the kept fields and the text."""
    if not source.own:
        return [OutColumn(column.name, cast(Any, _KINDS.get(column.type, "string")))
                for column in source.output_columns]  # fmt: skip
    if format == "jsonl":
        return []  # JSON Lines writes each record as it is
    id_field, text_field = source.options.id_field, source.options.text_field
    kinds: dict[str, set[str]] = {}
    if source.has_fields:
        for name, kind, whole in conn.execute(sql.SQL(
                """SELECT e.key, pg_catalog.jsonb_typeof(e.value),
                          pg_catalog.bool_and(CASE WHEN pg_catalog.jsonb_typeof(e.value) = 'number'
                              THEN e.value::pg_catalog.numeric
                                   = pg_catalog.trunc(e.value::pg_catalog.numeric) END)
                   FROM {table} AS t, pg_catalog.jsonb_each({fields}) AS e
                   WHERE {survives} AND pg_catalog.jsonb_typeof(e.value) <> 'null'
                   GROUP BY 1, 2""").format(
                table=source.table.identifier, fields=source._fields("t"),
                survives=_survivor_filter(source, "t"))):  # fmt: skip
            kinds.setdefault(name, set()).add("integer" if kind == "number" and whole
                                              else "float" if kind == "number" else kind)
    without_id = conn.execute(sql.SQL(
        "SELECT EXISTS (SELECT FROM {table} AS t WHERE {survives}"
        " AND ({fields} -> {id}) IS NULL)").format(
            table=source.table.identifier, survives=_survivor_filter(source, "t"),
            fields=source._fields("t"), id=sql.Literal(id_field))).fetchone()
    if without_id is not None and without_id[0]:
        kinds.setdefault(id_field, set()).add("string")  # the key, for a record without id
    columns = [OutColumn(id_field, _kind_of(kinds.pop(id_field, {"string"})))]
    kinds.pop(text_field, None)
    columns += [OutColumn(name, _kind_of(found)) for name, found in sorted(kinds.items())]
    return [*columns, OutColumn(text_field, "string")]


def _kind_of(found: set[str]) -> Any:
    if found == {"integer"}:
        return "integer"
    if found <= {"integer", "float"}:
        return "float"
    if found == {"boolean"}:
        return "boolean"
    if found == {"string"}:
        return "string"
    return "json"


class _Target:
    """A new table made like the source, and its ``_removed`` mapping table."""

    def __init__(self, conn: psycopg.Connection[Any], source: _Source, name: str,
                 overwrite: bool) -> None:  # fmt: skip
        self.conn, self.source, self.overwrite = conn, source, overwrite
        try:
            self.table = DocumentTable(conn, name)
        except TableError as error:
            raise DedupError(str(error)) from error
        row = conn.execute("SELECT pg_catalog.parse_ident(%s)", [name]).fetchone()
        assert row is not None  # DocumentTable has parsed it
        parts: list[str] = row[0]
        mapping_parts = [*parts[:-1], f"{parts[-1]}_removed"]
        self.mapping = sql.Identifier(*mapping_parts)
        self.name = self.table.quoted
        self.mapping_name = self.mapping.as_string(conn)
        for shown in (self.name, self.mapping_name):
            row = conn.execute("SELECT pg_catalog.to_regclass(%s)::pg_catalog.oid,"
                               " %s::pg_catalog.regclass::pg_catalog.oid",
                               [shown, source.table.quoted]).fetchone()  # fmt: skip
            assert row is not None
            if row[0] is not None and row[0] == row[1]:
                raise DedupError(f"{shown} is the table deduplicated: write the survivors into"
                                 " another table")  # fmt: skip
            if row[0] is not None and not overwrite:
                raise DedupError(f"table {shown} exists: drop it, or replace it (--overwrite)")

    def write(self) -> None:
        conn, source = self.conn, self.source
        table = self.table.identifier
        for identifier in (table, self.mapping):
            if self.overwrite:
                conn.execute(sql.SQL("DROP TABLE IF EXISTS {}").format(identifier))
        if self.table.schema is not None:
            conn.execute(sql.SQL("CREATE SCHEMA IF NOT EXISTS {}").format(
                sql.Identifier(self.table.schema)))
        # like the source, without its triggers, indexes and identity: a plain
        # table (nearsim_enable makes it searchable; its fingerprints are current)
        conn.execute(sql.SQL("CREATE TABLE {} (LIKE {} INCLUDING DEFAULTS INCLUDING STORAGE"
                             " INCLUDING COMPRESSION INCLUDING COMMENTS)").format(
            table, source.table.identifier))  # fmt: skip
        conn.execute(sql.SQL("INSERT INTO {} SELECT t.* FROM {} AS t WHERE {}").format(
            table, source.table.identifier, _survivor_filter(source, "t")))
        primary = conn.execute(
            "SELECT pg_catalog.array_agg(a.attname ORDER BY k.n)"
            " FROM pg_catalog.pg_index i,"
            " pg_catalog.unnest(i.indkey) WITH ORDINALITY AS k (attnum, n)"
            " JOIN pg_catalog.pg_attribute a ON a.attnum = k.attnum"
            " WHERE i.indrelid = %s::pg_catalog.regclass AND i.indisprimary"
            " AND a.attrelid = i.indrelid", [source.table.quoted]).fetchone()  # fmt: skip
        keys = primary[0] if primary and primary[0] else [source.key]
        conn.execute(sql.SQL("ALTER TABLE {} ADD PRIMARY KEY ({})").format(
            table, sql.SQL(", ").join(map(sql.Identifier, keys))))
        key_type = next(column.typed for column in source.columns
                        if column.name == source.key)  # fmt: skip
        conn.execute(sql.SQL("CREATE TABLE {} (removed {type} PRIMARY KEY,"
                             " kept {type} NOT NULL)").format(
            self.mapping, type=sql.SQL(key_type)))  # fmt: skip
        conn.execute(sql.SQL("INSERT INTO {} (removed, kept) SELECT {}, {} FROM {} AS r").format(
            self.mapping, source.key_of_text(sql.SQL("r.removed")),
            source.key_of_text(sql.SQL("r.kept")), _REMOVED))
        conn.execute(sql.SQL("COMMENT ON TABLE {} IS {}").format(self.mapping, sql.Literal(
            f"documents of {source.table.quoted} removed by nearsim dedup, and the key of the"
            f" one kept in their place (in {self.name})")))
