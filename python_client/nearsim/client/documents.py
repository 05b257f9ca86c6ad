"""A table of documents as the command line uses it: create, check, query.

``nearsim init`` and ``nearsim-load --create`` make tables of this layout::

    key           text PRIMARY KEY   -- the absolute path, or a record's id
    source        text NOT NULL      -- where it was read from (path, or file:line)
    content_hash  bytea NOT NULL     -- SHA-256 of the text (UTF-8): reloads skip unchanged ones
    body          text NOT NULL      -- the document's text
    si            bigint             -- its fingerprint, kept current by nearsim's trigger
    loaded_at     timestamptz NOT NULL DEFAULT now()
    fields        jsonb              -- a record's other fields (kept_fields.py); NULL for a file

The query functions work on any table enabled with ``nearsim_enable``.
"""

from __future__ import annotations

import os
from collections.abc import Generator
from contextlib import closing
from dataclasses import dataclass, replace
from typing import Any, cast

import psycopg
import psycopg.rows
from psycopg import sql

from ..core.fingerprint import PROFILE
from ..core.measures import DEFAULT_MEASURE, DEFAULT_MIN_SIMILARITY
from ..core.profiles import Profile, canonical, simhash
from ..core.registry import EXTENSION_SCHEMA_QUERY, REGISTRY, Registration
from .sources import file_key

DEFAULT_TABLE = "docs"
TEXT_COLUMN = "body"
FINGERPRINT_COLUMN = "si"
FIELDS_COLUMN = "fields"  # optional: tables made before it get it on their first load
LAYOUT = {
    "key": "text",
    "source": "text",
    "content_hash": "bytea",
    TEXT_COLUMN: "text",
    FINGERPRINT_COLUMN: "bigint",
}


class TableError(RuntimeError):
    """The table is missing, has another layout, or is not enabled."""


@dataclass(frozen=True)
class Match:
    key: str
    distance: int
    source: str | None


@dataclass(frozen=True)
class Pair:
    a: str
    b: str
    distance: int


@dataclass(frozen=True)
class VerifiedMatch:
    key: str
    distance: int
    similarity: float  # the exact measure asked for
    short: bool  # fewer shingles than core.measures.SHORT_SHINGLES: its fingerprint is unreliable
    s_r: float | None = None  # both measures side by side, whichever selected the match
    s_l: float | None = None  # (:func:`nearsim.client.sidebyside.both_measures`)


@dataclass(frozen=True)
class VerifiedPair:
    a: str
    b: str
    distance: int
    similarity: float
    short: bool


@dataclass(frozen=True)
class Cluster:
    pivot: str | None  # with method "pivot"; components have none
    members: list[str]  # the pivot first, then the others in key order


@dataclass(frozen=True)
class SketchIndex:
    """A table's sketch index: a GIN index over ``nearsim_sketch(text column)``.

    With a usable one, the verified search by S_R from 0.5 up takes its
    candidates from it, at any distance of the fingerprints, instead of
    within the calibrated radius of the rotation index.
    """

    name: str  # as SQL prints it
    usable: bool  # False: left invalid by a failed CREATE INDEX CONCURRENTLY
    size_bytes: int


@dataclass(frozen=True)
class StoredDocument:
    key: str
    source: str | None
    text: str | None
    fingerprint: int | None


class DocumentTable:
    """One table, named as in SQL (``docs``, ``archive."Mail"``).

    Longer than a class should be, for a reason: it is the library's one
    handle on a table, as sqlite-utils' ``Table`` is, so every question a
    user asks of a table is a method here (32 of them, the longest 53
    lines).  Each states the question and its arguments and hands the work
    to the server's functions or to the rooms of the client (``checks``,
    ``writers``); splitting it would split that one handle.

    >>> docs = nearsim.DocumentTable(nearsim.connect(autocommit=True), "docs")  # doctest: +SKIP
    >>> docs.create()  # the table and its rotation indexes, unless they exist  # doctest: +SKIP
    >>> [(m.key, m.distance) for m in docs.similar("To be, or not to be", 6)]  # doctest: +SKIP
    [('hamlet.txt', 2)]
    """

    def __init__(self, conn: psycopg.Connection[Any], name: str = DEFAULT_TABLE) -> None:
        self.conn = conn
        self.name = name
        try:
            row = conn.execute("SELECT pg_catalog.parse_ident(%s)", [name]).fetchone()
        except psycopg.Error as error:
            conn.rollback()
            reason = error.diag.message_primary
            raise TableError(f"invalid table name {name!r}: {reason}") from error
        parts: list[str] = row[0] if row else []
        if not 1 <= len(parts) <= 2:
            raise TableError(f"invalid table name {name!r}: expected [schema.]table")
        self.identifier = sql.Identifier(*parts)
        self.schema = parts[0] if len(parts) == 2 else None
        self.quoted = self.identifier.as_string(conn)
        self.extension = extension_schema(conn)

    def __str__(self) -> str:
        return self.quoted

    # -- catalog ----------------------------------------------------------

    def exists(self) -> bool:
        row = self.conn.execute("SELECT pg_catalog.to_regclass(%s) IS NOT NULL", [self.quoted])
        found = row.fetchone()
        return bool(found and found[0])

    def columns(self) -> dict[str, str]:
        rows = self.conn.execute(
            """SELECT a.attname, pg_catalog.format_type(a.atttypid, NULL)
               FROM pg_catalog.pg_attribute a
               WHERE a.attrelid = %s::regclass AND a.attnum > 0 AND NOT a.attisdropped""",
            [self.quoted],
        ).fetchall()
        return {str(name): str(kind) for name, kind in rows}

    def require(self) -> None:
        """Raise TableError unless the table exists."""
        if not self.exists():
            raise TableError(
                f"table {self} does not exist: create it with `nearsim init --table {self.name}`"
                " or load with --create"
            )

    def check_layout(self) -> None:
        """Raise TableError unless the table has the loader's columns and key."""
        self.require()
        have = self.columns()
        wrong = [f"{column} {kind}" for column, kind in LAYOUT.items() if have.get(column) != kind]
        if wrong:
            raise TableError(
                f"table {self} cannot take loaded documents: it needs the columns "
                f"{', '.join(wrong)} (create a new table with --create)"
            )
        row = self.conn.execute(
            """SELECT pg_catalog.array_agg(a.attname::text)
               FROM pg_catalog.pg_index i
               JOIN pg_catalog.pg_attribute a
                 ON a.attrelid = i.indrelid AND a.attnum = ANY (i.indkey)
               WHERE i.indrelid = %s::regclass AND i.indisprimary""",
            [self.quoted],
        ).fetchone()
        if not row or row[0] != ["key"]:
            raise TableError(f"table {self} needs PRIMARY KEY (key)")

    def registration(self) -> Registration | None:
        columns = sql.SQL(", ").join(map(sql.Identifier, Registration.columns()))
        cursor = self.conn.cursor(row_factory=psycopg.rows.dict_row)
        row = cursor.execute(
            sql.SQL("SELECT {} FROM {}.{} WHERE tbl = %s::regclass").format(
                columns, self.extension, sql.Identifier(REGISTRY)),
            [self.quoted],
        ).fetchone()
        return None if row is None else Registration.from_row(row)

    def require_enabled(self) -> Registration:
        self.require()
        registration = self.registration()
        if registration is None:
            raise TableError(
                f"table {self} is not enabled for nearsim: run `nearsim init --table {self.name}`"
                " or SELECT nearsim_enable(...)"
            )
        return registration

    # -- creating -----------------------------------------------------------

    def create(self, bands: int | None = None, profile: str | None = None,
               sketch_index: bool = False) -> bool:
        """Create the table (if missing) and enable it (if not yet); True if created.

        ``profile`` is the fingerprint profile to enable it with (by default
        ``default/1``); a table enabled with another one is an error.  With
        ``sketch_index``, also :meth:`create_sketch_index`.

        Concurrent callers wait for each other on an advisory lock.
        """
        created = False
        with self.conn.transaction():
            self.conn.execute(
                "SELECT pg_catalog.pg_advisory_xact_lock(pg_catalog.hashtext(%s))",
                [f"nearsim create {self.quoted}"],
            )
            if not self.exists():
                if self.schema is not None:
                    schema = sql.Identifier(self.schema)
                    self.conn.execute(sql.SQL("CREATE SCHEMA IF NOT EXISTS {}").format(schema))
                self.conn.execute(
                    sql.SQL(
                        """CREATE TABLE {} (
                            key text PRIMARY KEY,
                            source text NOT NULL,
                            content_hash bytea NOT NULL,
                            body text {} NOT NULL,
                            si bigint,
                            loaded_at timestamptz NOT NULL DEFAULT pg_catalog.now(),
                            fields jsonb)"""
                    ).format(self.identifier, self._body_compression())
                )
                self.conn.execute(
                    sql.SQL("COMMENT ON TABLE {} IS 'documents loaded by nearsim-load'").format(
                        self.identifier
                    )
                )
                created = True
            self.check_layout()
            registration = self.registration()
            if registration is None:
                self.conn.execute(
                    sql.SQL("SELECT {}.nearsim_enable(%s::regclass, %s, %s, bands => %s,"
                            " profile => %s)").format(self.extension),
                    [self.quoted, TEXT_COLUMN, FINGERPRINT_COLUMN, bands, profile or PROFILE],
                )
            elif profile is not None and canonical(profile) != registration.profile:
                raise TableError(f"table {self} is enabled with fingerprint profile"
                                 f" {registration.profile}, not {canonical(profile)}")
            if sketch_index:
                self.create_sketch_index()
        return created

    def sketch_index(self) -> SketchIndex | None:
        """The table's sketch index (``nearsim_sketch_index``), None when it has none."""
        self.require_enabled()
        row = self.conn.execute(
            sql.SQL("SELECT s.index::pg_catalog.text, s.usable,"
                    " pg_catalog.pg_relation_size(s.index)"
                    " FROM {}.nearsim_sketch_index(%s::regclass) AS s"
                    " WHERE s.index IS NOT NULL").format(self.extension),
            [self.quoted],
        ).fetchone()
        return None if row is None else SketchIndex(row[0], row[1], row[2])

    def create_sketch_index(self) -> bool:
        """Give the table a usable sketch index; False when it had one.

        ``CREATE INDEX ON tbl USING gin (nearsim_sketch(text column))``, the
        step docs/GUIDE.md teaches, or REINDEX of one left invalid.  It takes
        about 280 bytes per document and makes the verified search by S_R
        from 0.5 up find its documents at any distance of the fingerprints.
        """
        registration = self.require_enabled()
        existing = self.sketch_index()
        if existing is not None and existing.usable:
            return False
        if existing is not None:
            # The name as SQL prints it, from the catalogue: quoted where needed.
            self.conn.execute(sql.SQL("REINDEX INDEX {}").format(sql.SQL(existing.name)))
        else:
            # a profile of version 2 takes the shingles of its tokenisation
            tokenisation = Profile.named(registration.profile).version
            version = sql.SQL(", {}").format(sql.Literal(tokenisation))
            self.conn.execute(
                sql.SQL("CREATE INDEX ON {} USING gin ({}.nearsim_sketch({}{}))").format(
                    self.identifier, self.extension, sql.Identifier(registration.text_column),
                    sql.SQL("") if tokenisation == 1 else version))
        return True

    def add_fields_column(self) -> str | None:
        """Give the loader's own table its ``fields`` column if it has none.

        Added by a role with the privileges of the table's owner (``ALTER
        TABLE ... ADD COLUMN``, which rewrites nothing).  None when the table
        has the column (now); else why it cannot have it, as a warning for
        the load that drops the records' other fields.
        """
        have = self.columns().get(FIELDS_COLUMN)
        if have == "jsonb":
            return None
        if have is not None:
            return (f"table {self} has a column {FIELDS_COLUMN} of type {have}, not jsonb:"
                    " the records' other fields are not kept")  # fmt: skip
        row = self.conn.execute(
            "SELECT pg_catalog.pg_has_role(c.relowner, 'USAGE'),"
            " pg_catalog.pg_get_userbyid(c.relowner)"
            " FROM pg_catalog.pg_class c WHERE c.oid = %s::pg_catalog.regclass",
            [self.quoted]).fetchone()  # fmt: skip
        if row is None or not row[0]:
            owner = row[1] if row else "its owner"
            return (f"table {self} has no column {FIELDS_COLUMN} and only its owner ({owner})"
                    f" can add it: the records' other fields are not kept (ALTER TABLE {self}"
                    f" ADD COLUMN {FIELDS_COLUMN} jsonb keeps them from the next load)")
        try:
            self.conn.execute(sql.SQL("ALTER TABLE {} ADD COLUMN IF NOT EXISTS {} jsonb").format(
                self.identifier, sql.Identifier(FIELDS_COLUMN)))
        except psycopg.Error as error:
            if not self.conn.autocommit:
                self.conn.rollback()
            reason = error.diag.message_primary or str(error).strip().splitlines()[0]
            return (f"cannot add column {FIELDS_COLUMN} to table {self} ({reason}): the"
                    " records' other fields are not kept")  # fmt: skip
        return None

    def _body_compression(self) -> sql.Composable:
        """lz4 for the texts where the server has it: it compresses several times
        faster than PostgreSQL's default (pglz), and texts are read back faster."""
        row = self.conn.execute(
            "SELECT 'lz4' = ANY (enumvals) FROM pg_catalog.pg_settings"
            " WHERE name = 'default_toast_compression'"
        ).fetchone()
        return sql.SQL("COMPRESSION lz4" if row and row[0] else "")

    def analyze(self) -> None:
        """Fresh planner statistics after a bulk load, for the searches.

        Only the columns the searches filter on (and the bucket table of a
        table enabled before 0.4.0): sampling the texts would take longer,
        and autovacuum comes round to them.
        """
        self.conn.execute(sql.SQL("ANALYZE {} (key, {})").format(
            self.identifier, sql.Identifier(FINGERPRINT_COLUMN)))
        self.analyze_bucket_table()

    def analyze_bucket_table(self) -> None:
        """ANALYZE the bucket table of a table enabled before 0.4.0, if it has one."""
        registration = self.registration()
        if registration is not None and registration.bucket_table is not None:
            self.conn.execute(sql.SQL("ANALYZE {}").format(
                sql.Identifier(registration.object_schema, registration.bucket_table)))

    # -- queries ------------------------------------------------------------

    def similar(
        self, query: str | int, max_distance: int, limit: int | None = None
    ) -> list[Match]:
        """Documents within ``max_distance`` bits of a text or fingerprint, nearest first.

        A text is fingerprinted by the database, with the table's profile.
        """
        registration = self.require_enabled()
        with_source = "source" in self.columns()
        statement = sql.SQL(
            """SELECT (s.doc).{key}::text, s.distance, {source}
               FROM {similar}(%s::{kind}, %s) AS s
               ORDER BY s.distance, 1 LIMIT %s"""
        ).format(
            key=sql.Identifier(registration.key_column),
            source=sql.SQL("(s.doc).source::text" if with_source else "NULL::text"),
            similar=sql.Identifier(registration.object_schema, registration.similar_function),
            kind=sql.SQL("text" if isinstance(query, str) else "bigint"),
        )
        rows = self.conn.execute(statement, [query, max_distance, limit]).fetchall()
        return [Match(key, distance, source) for key, distance, source in rows]

    def nearest(self, query: str | int, n: int, max_distance: int = 64) -> list[Match]:
        """The ``n`` documents nearest to a text or fingerprint, nearest first, ties by key.

        Exactly the first ``n`` rows of ``ORDER BY hamming(si, q), key`` among
        those within ``max_distance`` bits (``nearsim_nearest``).
        """
        registration = self.require_enabled()
        # the client computes the same fingerprint as the server (one algorithm)
        fingerprint = query if isinstance(query, int) else simhash(query, registration.profile)
        statement = sql.SQL(
            "SELECT n.key, n.distance FROM {}.nearsim_nearest(%s::pg_catalog.regclass,"
            " %s::pg_catalog.int8, %s, %s) AS n").format(self.extension)
        rows = self.conn.execute(statement, [self.quoted, fingerprint, n, max_distance]).fetchall()
        return [Match(key, distance, None) for key, distance in rows]

    def guard(
        self, max_distance: int | None = None, min_similarity: float | None = None,
        measure: str = DEFAULT_MEASURE, action: str = "error",
    ) -> None:
        """Guard the table at check-in (``nearsim_guard``); for its owner.

        From then on an INSERT or UPDATE of a document with a near-duplicate
        already stored fails with SQLSTATE 23N01 (``error``), is not written
        (``skip``), or is written and linked in ``<table>_nearsim_links``
        (``record``).  With ``min_similarity`` the texts decide by ``measure``
        (S_L unless told otherwise), among the candidates within
        ``max_distance`` bits (by default the radius calibrated for S_R at
        ``min_similarity``).
        """
        self.require_enabled()
        self.conn.execute(
            sql.SQL("SELECT {}.nearsim_guard(%s::regclass, %s, %s, %s, %s)").format(
                self.extension),
            [self.quoted, max_distance, min_similarity, measure, action])

    def unguard(self) -> None:
        """Remove the check-in guard (``nearsim_unguard``); recorded links stay."""
        self.require_enabled()
        self.conn.execute(sql.SQL("SELECT {}.nearsim_unguard(%s::regclass)").format(
            self.extension), [self.quoted])

    def similar_verified(
        self, query: str, min_similarity: float = DEFAULT_MIN_SIMILARITY,
        measure: str = DEFAULT_MEASURE, max_distance: int | None = None,
        limit: int | None = None, side_by_side: bool = True,
    ) -> list[VerifiedMatch]:
        """Documents at least ``min_similarity`` similar to ``query``, measured exactly.

        ``nearsim_similar_verified`` answers: the rotation index gives the
        candidates within the calibrated radius (or ``max_distance``), their
        texts decide; by a word measure (S_L, the default) from 0.5 up without
        ``max_distance``, the candidates are the documents at least 0.5 similar
        by S_R, whatever their distance.  With ``side_by_side`` each match also
        gets its S_R and S_L, whichever measure selected it.
        """
        self.require_enabled()
        statement = sql.SQL(
            """SELECT v.key, v.distance, v.similarity, v.short
               FROM {}.nearsim_similar_verified(%s::regclass, %s, %s, %s, %s) AS v LIMIT %s"""
        ).format(self.extension)
        rows = self.conn.execute(
            statement, [self.quoted, query, min_similarity, measure, max_distance, limit]
        ).fetchall()
        matches = [VerifiedMatch(*row) for row in rows]
        return self._side_by_side(query, matches, measure) if side_by_side else matches

    def _side_by_side(self, query: str, matches: list[VerifiedMatch],
                      measure: str) -> list[VerifiedMatch]:  # fmt: skip
        """The matches with their S_R and S_L (None for a document deleted meanwhile),
        measured by the server's C functions in one query; the value the search
        measured is kept as it is, not measured again."""
        if not matches:
            return matches
        registration = self.require_enabled()
        text = sql.Identifier(registration.text_column)
        # S_R, then S_L: NULL for the one the search measured
        columns = [sql.SQL("NULL::float8") if measure == known else
                   sql.SQL("{}.{}(%(q)s, d.{}::text, %(tokenisation)s)").format(
                       self.extension, sql.Identifier(function), text)
                   for function, known in (("nearsim_resemblance", "s_r"),
                                           ("nearsim_literal_similarity", "s_l"))]
        statement = sql.SQL(
            "SELECT d.{key}::text, {columns} FROM {table} AS d"
            " WHERE d.{key}::text = ANY(%(keys)s)"
        ).format(key=sql.Identifier(registration.key_column),
                 columns=sql.SQL(", ").join(columns), table=self.identifier)
        measured = {key: (s_r, s_l) for key, s_r, s_l in self.conn.execute(
            statement, {"q": query, "keys": [match.key for match in matches],
                        "tokenisation": Profile.named(registration.profile).version})}
        result = []
        for match in matches:
            if match.key not in measured:
                result.append(match)
                continue
            s_r, s_l = measured[match.key]
            result.append(replace(match, s_r=match.similarity if measure == "s_r" else s_r,
                                  s_l=match.similarity if measure == "s_l" else s_l))
        return result

    def pairs(self, max_distance: int) -> Generator[Pair, None, None]:
        """Every pair of documents within ``max_distance`` bits, streamed."""
        self.require_enabled()
        query = sql.SQL("SELECT a, b, distance FROM {}.nearsim_pairs(%s::regclass, %s)").format(
            self.extension
        )
        # closing: when the caller stops early, the stream ends (psycopg then
        # cancels the query) before the caller goes on with the connection
        stream = cast(Generator[Any, None, None],
                      self.conn.cursor().stream(query, [self.quoted, max_distance]))
        with closing(stream) as rows:
            for a, b, distance in rows:
                yield Pair(a, b, distance)

    def pairs_verified(
        self, min_similarity: float = DEFAULT_MIN_SIMILARITY, measure: str = DEFAULT_MEASURE,
        max_distance: int | None = None,
    ) -> Generator[VerifiedPair, None, None]:
        """Pairs at least ``min_similarity`` similar, streamed (``nearsim_pairs_verified``).

        By a word measure (S_L, the default) from 0.5 up without
        ``max_distance``, the candidates are the pairs at least 0.5 similar by
        S_R, whatever their distance; otherwise those within the radius.
        """
        self.require_enabled()
        query = sql.SQL("SELECT a, b, distance, similarity, short"
                        " FROM {}.nearsim_pairs_verified(%s::regclass, %s, %s, %s)").format(
            self.extension)  # fmt: skip
        arguments = [self.quoted, min_similarity, measure, max_distance]
        stream = cast(Generator[Any, None, None], self.conn.cursor().stream(query, arguments))
        with closing(stream) as rows:  # see pairs
            for row in rows:
                yield VerifiedPair(*row)

    def clusters(
        self, max_distance: int, method: str = "components", min_size: int = 2
    ) -> Generator[Cluster, None, None]:
        """Groups of near-duplicates, largest first."""
        self.require_enabled()
        groups = sql.SQL("{}.nearsim_clusters(%s::regclass, %s, %s, %s)").format(self.extension)
        return self._clusters(groups, [self.quoted, max_distance, method, min_size])

    def clusters_verified(
        self, min_similarity: float = DEFAULT_MIN_SIMILARITY, measure: str = DEFAULT_MEASURE,
        max_distance: int | None = None, method: str = "components", min_size: int = 2,
    ) -> Generator[Cluster, None, None]:
        """Groups linked by verified pairs (see :meth:`pairs_verified`), largest first."""
        self.require_enabled()
        groups = sql.SQL("{}.nearsim_clusters_verified(%s::regclass, %s, %s, %s, %s, %s)").format(
            self.extension)
        return self._clusters(groups, [self.quoted, min_similarity, measure, max_distance,
                                       method, min_size])  # fmt: skip

    def _clusters(
        self, groups: sql.Composable, arguments: list[Any]
    ) -> Generator[Cluster, None, None]:
        query = sql.SQL(
            """SELECT pg_catalog.max(c.pivot),
                      pg_catalog.array_agg(c.key ORDER BY c.key = c.pivot DESC NULLS LAST, c.key)
               FROM {} AS c
               GROUP BY c.cluster ORDER BY pg_catalog.count(*) DESC, c.cluster"""
        ).format(groups)
        stream = cast(Generator[Any, None, None], self.conn.cursor().stream(query, arguments))
        with closing(stream) as rows:  # see pairs
            for pivot, members in rows:
                yield Cluster(pivot, list(members))

    def document(self, key: str) -> StoredDocument | None:
        """A stored document by its key (the registered key column, compared as text)."""
        registration = self.require_enabled()
        with_source = "source" in self.columns()
        query = sql.SQL(
            "SELECT {key}::text, {source}, {text}, {si} FROM {table} WHERE {key}::text = %s"
        ).format(
            key=sql.Identifier(registration.key_column),
            source=sql.SQL("source::text" if with_source else "NULL::text"),
            text=sql.Identifier(registration.text_column),
            si=sql.Identifier(registration.hash_column),
            table=self.identifier,
        )
        row = self.conn.execute(query, [key]).fetchone()
        return None if row is None else StoredDocument(*row)

    def has_document(self, key: str) -> bool:
        """Whether a document is stored under ``key`` (the key column compared as text)."""
        registration = self.require_enabled()
        query = sql.SQL("SELECT EXISTS (SELECT FROM {table} WHERE {key}::text = %s)").format(
            table=self.identifier, key=sql.Identifier(registration.key_column))
        row = self.conn.execute(query, [key]).fetchone()
        return bool(row and row[0])

    def key_of_file(self, path: str) -> str | None:
        """The key of the document loaded from the file at ``path``, however ``path`` is spelt.

        The loader keys a file by its absolute path (:func:`~nearsim.client.sources.file_key`),
        so ``memo.txt`` in /srv/docs finds the document /srv/docs/memo.txt.  A
        file loaded through another path to it (a symbolic link to it or to a
        directory above it) is found among the keys that end in its name, as
        the same file on disk.  None when no document was loaded from it.
        """
        key = file_key(path)
        if self.has_document(key):
            return key
        if not os.path.exists(path):
            return None  # gone since it was loaded: no file to compare the keys with
        registration = self.require_enabled()
        ending = "/" + os.path.basename(key)
        query = sql.SQL(
            "SELECT {key}::text FROM {table} WHERE pg_catalog.right({key}::text, %s) = %s"
        ).format(table=self.identifier, key=sql.Identifier(registration.key_column))
        for (candidate,) in self.conn.execute(query, [len(ending), ending]):
            try:
                if os.path.samefile(candidate, path):
                    return str(candidate)
            except OSError:  # a key that names no file here
                continue
        return None

    def stats(self, check_fingerprints: bool | None = None) -> dict[str, Any]:
        """Document counts, profile and index health (``nearsim_verify``).

        ``check_fingerprints``: recompute every fingerprint (True), none
        (False), or those of a sample of about 1,000 rows (None).
        """
        registration = self.require_enabled()
        health = self.conn.execute(
            sql.SQL("SELECT * FROM {}.nearsim_verify(%s::regclass, %s)").format(self.extension),
            [self.quoted, check_fingerprints],
        )
        columns = [c.name for c in health.description or ()]
        row = health.fetchone()
        verify = dict(zip(columns, row or (), strict=True))
        facts = self.conn.execute(
            sql.SQL("SELECT pg_catalog.pg_total_relation_size(%s::regclass),"
            " %s::regclass::text,"  # the name as SQL prints it: quoted only where needed
            " (SELECT pg_catalog.sum(pg_catalog.pg_relation_size(r.index))::bigint"
            "  FROM {}.nearsim_rotation_indexes(%s::regclass) AS r"
            "  WHERE r.fingerprint_column = %s)").format(self.extension),
            [self.quoted, self.quoted, self.quoted, registration.hash_column],
        ).fetchone()
        sketch = self.sketch_index()
        return {
            "table": facts[1] if facts else self.quoted,
            "documents": verify.pop("documents"),
            "fingerprinted": verify.pop("fingerprinted"),
            "profile": registration.profile,
            "bands": registration.bands,
            "table_bytes": facts[0] if facts else None,
            "index_bytes": facts[2] if facts else None,
            "sketch_index": None if sketch is None else {
                "name": sketch.name, "usable": sketch.usable, "bytes": sketch.size_bytes},
            "health": verify,
        }


def extension_schema(conn: psycopg.Connection[Any]) -> sql.Identifier:
    """The schema of the nearsim extension; TableError if it is not installed."""
    row = conn.execute(EXTENSION_SCHEMA_QUERY).fetchone()
    if row is None:
        raise TableError(
            "the nearsim extension is not installed in this database: run `nearsim init`"
        )
    return sql.Identifier(row[0])
