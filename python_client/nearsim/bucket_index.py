"""The bucket index: what ``nearsim_enable`` and its companions do in the server.

A table enabled for nearsim gets, next to it in its schema and owned by its
owner:

- a fingerprint column (``si`` by default), filled by a BEFORE ROW trigger;
- a bucket table ``<prefix>_nearsim (key, si)`` with one row per fingerprinted
  document and one btree index per band of the fingerprint (multi-index
  hashing: see ``extension/src/bands.c``), kept current by AFTER STATEMENT
  triggers that read the statement's transition tables;
- two search functions ``<prefix>_similar(text | bigint, max_distance)``,
  plain SQL that the planner inlines, so ``EXPLAIN`` shows the bucket indexes.

The registry ``nearsim_tables`` (in the extension's schema) records each
enabled table, its layout and the fingerprint profile of its values.

This module runs inside PostgreSQL (PL/Python); ``Database`` is the small part
of ``plpy`` it uses, so it never imports anything that only a client has.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

from .fingerprint import PROFILE
from .profiles import Profile, ProfileError

KEY_TYPES = ("integer", "bigint", "text", "uuid")
TEXT_TYPES = ("text", "character varying")
MIN_BANDS, MAX_BANDS = 3, 16
MAX_IDENTIFIER = 63  # NAMEDATALEN - 1: longer names would be truncated silently

# The fingerprint triggers sort after the table's other BEFORE triggers.
FINGERPRINT_TRIGGERS = {
    "INSERT": "zz_nearsim_fingerprint",
    "UPDATE": "zz_nearsim_fingerprint_update",
}
BUCKET_TRIGGERS = {
    "INSERT": ("nearsim_insert", "REFERENCING NEW TABLE AS nearsim_new"),
    "UPDATE": ("nearsim_update", "REFERENCING OLD TABLE AS nearsim_old NEW TABLE AS nearsim_new"),
    "DELETE": ("nearsim_delete", "REFERENCING OLD TABLE AS nearsim_old"),
    "TRUNCATE": ("nearsim_truncate", ""),
}
TRIGGERS = (*FINGERPRINT_TRIGGERS.values(), *(name for name, _ in BUCKET_TRIGGERS.values()))


# Exact measures a verified search can filter on (see nearsim.measures).
VERIFIED_MEASURES = ("s_r", "s_l", "s_j", "containment", "information_s_l", "information_s_j")
SHORT_FEATURES = 10  # fewer shingles than this: the fingerprint is unreliable


def _named_groups(
    keys: list[str], groups: np.ndarray, method: str, min_size: int
) -> Iterator[tuple[str, str, str | None]]:
    """``(key, cluster, pivot)`` of each member of a group of at least ``min_size``.

    ``groups[i]`` is the group (its root or pivot position) of ``keys[i]``.  A
    group is named after its smallest key (keys are in key order), so its id
    does not depend on the order the rows were read in.
    """
    smallest = np.full(len(keys), len(keys), dtype=np.int64)
    np.minimum.at(smallest, groups, np.arange(len(keys), dtype=np.int64))
    sizes = np.bincount(groups, minlength=len(keys))
    return (
        (keys[member], keys[int(smallest[group])], keys[group] if method == "pivot" else None)
        for member, group in enumerate(groups.tolist())
        if sizes[group] >= min_size
    )


class _Text:
    """A text with its shingle set, made once however many pairs it is in."""

    def __init__(self, text: str) -> None:
        from . import measures

        self.text = text
        self.shingles = set(measures.word_shingles(text))
        self.short = len(self.shingles) < SHORT_FEATURES


def _measure(measure: str, a: _Text, b: _Text) -> float:
    """One of VERIFIED_MEASURES of texts a and b (containment: of a in b)."""
    from . import measures

    if measure == "s_r":
        return measures.set_resemblance(a.shingles, b.shingles)
    if measure == "containment":
        return measures.set_containment(a.shingles, b.shingles)
    return float(getattr(measures.compare(a.text, b.text), measure))


class Database(Protocol):
    """What the module needs from ``plpy``."""

    def execute(self, query: str) -> Any: ...
    def quote_ident(self, name: str) -> str: ...
    def quote_literal(self, value: str) -> str: ...
    def notice(self, message: str) -> None: ...
    def error(self, message: str, detail: str | None = None, hint: str | None = None,
              sqlstate: str | None = None) -> None: ...


class Plpy:
    """Adapts PL/Python's ``plpy`` module to ``Database``."""

    def __init__(self, plpy: Any) -> None:
        self._plpy = plpy

    def execute(self, query: str) -> Any:
        return self._plpy.execute(query)

    def quote_ident(self, name: str) -> str:
        return str(self._plpy.quote_ident(name))

    def quote_literal(self, value: str) -> str:
        return str(self._plpy.quote_literal(value))

    def notice(self, message: str) -> None:
        self._plpy.notice(message)

    def error(self, message: str, detail: str | None = None, hint: str | None = None,
              sqlstate: str | None = None) -> None:
        fields = {"detail": detail, "hint": hint, "sqlstate": sqlstate}
        self._plpy.error(message, **{k: v for k, v in fields.items() if v is not None})


def default_bands(rows: int) -> int:
    """Number of bands for a table of ``rows`` documents.

    Fewer, wider bands mean more probes per search and fewer candidates per
    probe.  ``make bench`` measures both costs; with them, 5 bands are best
    below 30,000 rows, 4 bands below 750,000 (they tie with 3 at 500,000),
    3 beyond (1.3x faster than 4 at one million rows, k = 6).
    """
    if rows < 30_000:
        return 5
    if rows < 750_000:
        return 4
    return 3


@dataclass(frozen=True)
class Table:
    """Catalog facts about a documents table."""

    oid: int
    qualified: str  # schema-qualified, quoted
    schema: str
    name: str
    owner: str
    key_column: str
    key_type: str  # as format_type prints it, with the collation if any


@dataclass(frozen=True)
class Enabled:
    """A registry row: an enabled table and its objects."""

    table: Table
    text_column: str
    hash_column: str
    bands: int
    profile: str
    object_schema: str
    bucket_table: str
    fingerprint_function: str
    bucket_function: str
    similar_function: str

    def qualify(self, name: str, db: Database) -> str:
        return f"{db.quote_ident(self.object_schema)}.{db.quote_ident(name)}"


class BucketIndex:
    """Everything the SQL functions ``nearsim_*`` do, over one ``Database``."""

    def __init__(self, db: Database) -> None:
        self.db = db
        rows = db.execute(
            "SELECT n.nspname FROM pg_catalog.pg_extension e"
            " JOIN pg_catalog.pg_namespace n ON n.oid = e.extnamespace"
            " WHERE e.extname = 'nearsim'"
        )
        self.ext = db.quote_ident(rows[0]["nspname"])
        self.registry = f"{self.ext}.nearsim_tables"

    # -- small helpers -----------------------------------------------------

    def ident(self, name: str) -> str:
        return self.db.quote_ident(name)

    def literal(self, value: object) -> str:
        return self.db.quote_literal(str(value))

    def one(self, query: str) -> dict[str, Any]:
        rows = self.db.execute(query)
        return dict(rows[0])

    def fail(self, message: str, hint: str | None = None, sqlstate: str = "22023",
             detail: str | None = None) -> None:
        self.db.error(message, detail=detail, hint=hint, sqlstate=sqlstate)

    def table(self, tbl: str) -> Table:
        """Catalog facts for ``tbl`` (a regclass text), checking its key."""
        if tbl is None:
            self.fail("the table must not be NULL", sqlstate="22004")
        rows = self.db.execute(
            "SELECT c.oid::bigint AS oid, n.nspname, c.relname, c.relkind,"
            " pg_catalog.pg_get_userbyid(c.relowner) AS owner"
            " FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace"
            f" WHERE c.oid = {self.literal(tbl)}::pg_catalog.regclass"
        )
        facts = rows[0]
        qualified = f"{self.ident(facts['nspname'])}.{self.ident(facts['relname'])}"
        if facts["relkind"] != "r":
            self.fail(f"{qualified} is not an ordinary table",
                      hint="nearsim indexes ordinary tables, not views, foreign or partitioned"
                      " tables.", sqlstate="42809")
        keys = self.db.execute(
            "SELECT a.attname, pg_catalog.format_type(a.atttypid, NULL) AS type,"
            " CASE WHEN a.attcollation <> 0 AND a.attcollation <> t.typcollation"
            " THEN (SELECT pg_catalog.quote_ident(cn.nspname) || '.'"
            " || pg_catalog.quote_ident(co.collname) FROM pg_catalog.pg_collation co"
            " JOIN pg_catalog.pg_namespace cn ON cn.oid = co.collnamespace"
            " WHERE co.oid = a.attcollation) END AS collation"
            " FROM pg_catalog.pg_index i"
            " JOIN pg_catalog.pg_attribute a ON a.attrelid = i.indrelid"
            " AND a.attnum = ANY (i.indkey::pg_catalog.int2[])"
            " JOIN pg_catalog.pg_type t ON t.oid = a.atttypid"
            f" WHERE i.indrelid = {facts['oid']} AND i.indisprimary"
        )
        if len(keys) != 1:
            self.fail(
                f"table {qualified} has no single-column primary key"
                if not keys else f"table {qualified} has a primary key of {len(keys)} columns",
                hint="nearsim needs a single-column primary key of type integer, bigint,"
                " text or uuid to link buckets to documents.", sqlstate="42P10")
        key = keys[0]
        if key["type"] not in KEY_TYPES:
            self.fail(
                f"primary key {self.ident(key['attname'])} of table {qualified} has type"
                f" {key['type']}",
                hint="nearsim needs a primary key of type integer, bigint, text or uuid.",
                sqlstate="42804")
        key_type = key["type"] + (f" COLLATE {key['collation']}" if key["collation"] else "")
        return Table(int(facts["oid"]), qualified, facts["nspname"], facts["relname"],
                     facts["owner"], key["attname"], key_type)

    def column_type(self, table: Table, column: str) -> str | None:
        """The column's type, None if it does not exist; generated columns are refused.

        A BEFORE trigger sees a generated column before it is computed, so
        the fingerprint trigger could neither read one nor write one.
        """
        rows = self.db.execute(
            "SELECT pg_catalog.format_type(a.atttypid, NULL) AS type, a.attgenerated <> ''"
            " AS generated FROM pg_catalog.pg_attribute a"
            f" WHERE a.attrelid = {table.oid} AND a.attname = {self.literal(column)}"
            " AND a.attnum > 0 AND NOT a.attisdropped"
        )
        if rows and rows[0]["generated"]:
            self.fail(f"column {self.ident(column)} of table {table.qualified} is a generated"
                      " column", hint="Fingerprint the columns it is computed from, or a"
                      " plain text column.", sqlstate="42P16")
        return str(rows[0]["type"]) if rows else None

    def lookup(self, tbl: str) -> Enabled:
        """The registry row of ``tbl``; an error if it is not enabled."""
        if tbl is None:
            self.fail("the table must not be NULL", sqlstate="22004")
        rows = self.db.execute(
            f"SELECT * FROM {self.registry} WHERE tbl = {self.literal(tbl)}::pg_catalog.regclass"
        )
        if not rows:
            self.fail(f"table {tbl} is not enabled for nearsim",
                      hint="Run SELECT nearsim_enable(table, text_column).", sqlstate="55000")
        row = rows[0]
        return Enabled(self.table(tbl), row["text_column"], row["hash_column"], row["bands"],
                       row["profile"], row["object_schema"], row["bucket_table"],
                       row["fingerprint_function"], row["bucket_function"],
                       row["similar_function"])

    def profile(self, name: str | None) -> str:
        """The canonical name of profile ``name``; an error if this server cannot compute it."""
        if name is None:
            self.fail("the profile must not be NULL", sqlstate="22004")
        assert name is not None  # fail raises
        try:
            profile = Profile.named(name)
        except ProfileError as error:
            self.fail(str(error), hint="SELECT * FROM nearsim_profiles() lists the short names.")
        try:
            profile.check_libraries()
        except RuntimeError as error:
            self.fail(str(error), hint="Install the extension with scripts/install.sh.",
                      sqlstate="58P01")
        return profile.name

    def can_compute(self, profile: str) -> bool:
        try:
            Profile.named(profile).check_libraries()
        except (ProfileError, RuntimeError):
            return False
        return True

    def check_profile(self, enabled: Enabled) -> None:
        if not self.can_compute(enabled.profile):
            self.fail(
                f"the fingerprints of {enabled.table.qualified} come from profile"
                f" {enabled.profile}, which this server cannot compute",
                hint="Recompute them with another profile: SELECT nearsim_rebuild("
                f"{self.literal(enabled.table.qualified)},"
                " profile => 'default/1').", sqlstate="55000")

    def simhash_sql(self, text: str, profile: str) -> str:
        """SQL for the fingerprint of ``text`` (an SQL expression) under ``profile``."""
        if profile == PROFILE:
            return f"{self.ext}.simhash({text})"
        return f"{self.ext}.simhash({text}, {self.literal(profile)})"

    @contextmanager
    def as_owner(self, table: Table) -> Iterator[None]:
        """Act as the table's owner inside the block.

        Everything nearsim creates for a table belongs to the table's owner,
        and the backfill runs with the owner's rights, not a superuser's (the
        table's other triggers fire during it).  On an error the transaction
        or savepoint that ends restores the role anyway.
        """
        state = self.one("SELECT current_user AS who, pg_catalog.current_setting('role') AS role")
        if state["who"] == table.owner:
            yield
            return
        member = self.one(
            f"SELECT pg_catalog.pg_has_role({self.literal(table.owner)}, 'MEMBER') AS ok"
        )["ok"]
        if not member:
            self.fail(f"must be owner of table {table.qualified}",
                      detail=f"{table.qualified} is owned by {table.owner}.", sqlstate="42501")
        self.db.execute(f"SET LOCAL ROLE {self.ident(table.owner)}")
        yield
        previous = "NONE" if state["role"] == "none" else self.ident(state["role"])
        self.db.execute(f"SET LOCAL ROLE {previous}")

    def progress(self, what: str, done: int, total: int) -> None:
        self.db.notice(f"nearsim: {what} {done} of {total} rows")

    # -- enabling ----------------------------------------------------------

    def enable(self, tbl: str, text_column: str, hash_column: str, bands: int | None,
               prefix: str | None, batch_size: int, profile: str = PROFILE) -> None:
        if text_column is None or hash_column is None or batch_size is None:
            self.fail("text_column, hash_column and batch_size must not be NULL", sqlstate="22004")
        profile = self.profile(profile)
        table = self.table(tbl)
        if self.db.execute(f"SELECT 1 FROM {self.registry} WHERE tbl = {table.oid}::oid"):
            self.fail(f"table {table.qualified} is already enabled for nearsim",
                      hint="nearsim_rebuild changes the layout; nearsim_disable removes it.",
                      sqlstate="55000")
        if batch_size < 1:
            self.fail(f"batch_size must be positive, not {batch_size}")
        text_type = self.column_type(table, text_column)
        if text_type is None:
            self.fail(f"column {self.ident(text_column)} of table {table.qualified} does not"
                      " exist", sqlstate="42703")
        if text_type not in TEXT_TYPES:
            self.fail(f"column {self.ident(text_column)} of table {table.qualified} has type"
                      f" {text_type}, not text", sqlstate="42804")
        if hash_column in (text_column, table.key_column):
            self.fail(f"the fingerprint column cannot be column {self.ident(hash_column)}")
        hash_type = self.column_type(table, hash_column)
        if hash_type not in (None, "bigint"):
            self.fail(f"column {self.ident(hash_column)} of table {table.qualified} has type"
                      f" {hash_type}; a fingerprint column is bigint", sqlstate="42804")

        prefix = table.name if prefix is None else prefix
        names = {
            "bucket_table": f"{prefix}_nearsim",
            "fingerprint_function": f"{prefix}_nearsim_fingerprint",
            "bucket_function": f"{prefix}_nearsim_buckets",
            "similar_function": f"{prefix}_similar",
        }
        for name in names.values():
            if len(name.encode()) > MAX_IDENTIFIER:
                self.fail(f"name {self.ident(name)} is longer than {MAX_IDENTIFIER} bytes",
                          hint="Pass a shorter prefix => 'name'.", sqlstate="42622")
        schema = self.ident(table.schema)
        clash = self.db.execute(
            "SELECT c.relname AS name FROM pg_catalog.pg_class c"
            " WHERE c.relnamespace = (SELECT n.oid FROM pg_catalog.pg_namespace n"
            f" WHERE n.nspname = {self.literal(table.schema)})"
            f" AND c.relname = {self.literal(names['bucket_table'])}"
            " UNION ALL SELECT p.proname FROM pg_catalog.pg_proc p"
            " WHERE p.pronamespace = (SELECT n.oid FROM pg_catalog.pg_namespace n"
            f" WHERE n.nspname = {self.literal(table.schema)})"
            f" AND p.proname IN ({', '.join(self.literal(n) for n in names.values())})"
        )
        if clash:
            self.fail(f"{schema}.{self.ident(clash[0]['name'])} already exists",
                      hint="Pass another prefix => 'name' to nearsim_enable.", sqlstate="42P07")

        with self.as_owner(table):
            self.create(table, text_column, hash_column, hash_type, bands, names,
                        batch_size, profile)

    def create(self, table: Table, text_column: str, hash_column: str, hash_type: str | None,
               bands: int | None, names: dict[str, str], batch_size: int,
               profile: str) -> None:
        # Writers wait until the table is enabled; readers go on.
        self.db.execute(f"LOCK TABLE {table.qualified} IN SHARE ROW EXCLUSIVE MODE")
        key, text, fp = (self.ident(c) for c in (table.key_column, text_column, hash_column))
        if hash_type is None:
            self.db.execute(f"ALTER TABLE {table.qualified} ADD COLUMN {fp} bigint")
        else:
            self.check_stored_fingerprints(table, text, fp, profile)

        rows = int(self.one(f"SELECT count(*) AS n FROM {table.qualified}")["n"])
        bands = default_bands(rows) if bands is None else bands
        self.check_bands(bands)
        enabled = Enabled(table, text_column, hash_column, bands, profile, table.schema,
                          **names)
        self.backfill(enabled, batch_size, rows)

        bucket = enabled.qualify(enabled.bucket_table, self.db)
        self.db.execute(
            f"CREATE TABLE {bucket} (key {table.key_type} PRIMARY KEY, si bigint NOT NULL)"
        )
        self.db.execute(
            f"COMMENT ON TABLE {bucket} IS {self.literal(f'nearsim buckets of {table.qualified}; written by its triggers, read by {enabled.similar_function}()')}"  # noqa: E501
        )
        self.db.execute(
            f"INSERT INTO {bucket} (key, si) SELECT {key}, {fp} FROM {table.qualified}"
            f" WHERE {fp} IS NOT NULL"
        )
        self.create_band_indexes(enabled)
        self.db.execute(f"ANALYZE {bucket}")
        # Whoever may read the documents may search them; nobody but the
        # owner's triggers writes buckets.
        self.db.execute(f"ALTER TABLE {bucket} ENABLE ROW LEVEL SECURITY")
        self.db.execute(
            f"CREATE POLICY readers_of_documents ON {bucket} FOR SELECT USING"
            " (pg_catalog.has_table_privilege("
            f"{self.literal(table.qualified)}::pg_catalog.regclass,"
            " 'SELECT'))"
        )
        self.db.execute(f"GRANT SELECT ON {bucket} TO PUBLIC")
        self.create_functions(enabled)
        self.create_triggers(enabled)
        self.db.execute(
            f"INSERT INTO {self.registry} (tbl, key_column, text_column, hash_column, bands,"
            " profile, object_schema, bucket_table, fingerprint_function, bucket_function,"
            f" similar_function) VALUES ({table.oid}::oid::pg_catalog.regclass,"
            f" {self.literal(table.key_column)}, {self.literal(text_column)},"
            f" {self.literal(hash_column)}, {bands}, {self.literal(profile)},"
            f" {self.literal(table.schema)}, {self.literal(enabled.bucket_table)},"
            f" {self.literal(enabled.fingerprint_function)},"
            f" {self.literal(enabled.bucket_function)}, {self.literal(enabled.similar_function)})"
        )

    def check_bands(self, bands: int) -> None:
        if not MIN_BANDS <= bands <= MAX_BANDS:
            self.fail(f"bands must be between {MIN_BANDS} and {MAX_BANDS}, not {bands}")

    def check_stored_fingerprints(self, table: Table, text: str, fp: str, profile: str) -> None:
        """Refuse a fingerprint column filled by another profile.

        A sample of stored values is recomputed; fingerprints of another
        profile (or not fingerprints at all) would make every search wrong.
        """
        row = self.one(
            f"SELECT count(*) AS checked, count(*) FILTER (WHERE s.stored IS DISTINCT FROM s.fresh)"
            " AS differ, (pg_catalog.array_agg(s.key::text) FILTER (WHERE s.stored IS DISTINCT"
            " FROM s.fresh))[1] AS first"
            f" FROM (SELECT {self.ident(table.key_column)} AS key, {fp} AS stored,"
            f" {self.simhash_sql(text, profile)} AS fresh FROM {table.qualified}"
            f" WHERE {fp} IS NOT NULL ORDER BY {self.ident(table.key_column)} LIMIT 200) s"
        )
        if row["differ"]:
            self.fail(
                f"column {fp} of table {table.qualified} holds values that are not"
                f" {profile} fingerprints of column {text}",
                detail=f"{row['differ']} of {row['checked']} sampled rows differ, the first"
                f" with key {row['first']}.",
                hint=f"Set the column to NULL (UPDATE {table.qualified} SET {fp} = NULL) to"
                " recompute it, or choose another hash_column.", sqlstate="55000")

    def backfill(self, enabled: Enabled, batch_size: int, rows: int) -> None:
        """Fingerprint the rows that have none, a batch of keys at a time."""
        table = enabled.table
        key = self.ident(table.key_column)
        text, fp = self.ident(enabled.text_column), self.ident(enabled.hash_column)
        todo = int(self.one(
            f"SELECT count(*) AS n FROM {table.qualified} WHERE {fp} IS NULL"
            f" AND {text} IS NOT NULL")["n"])
        done = 0
        last: str | None = None
        fresh = self.simhash_sql(f"d.{text}", enabled.profile)
        while done < todo:
            after = "" if last is None else f" AND {key} > {self.literal(last)}"
            result = self.one(
                f"WITH batch AS (SELECT {key} FROM {table.qualified}"
                f" WHERE {fp} IS NULL AND {text} IS NOT NULL{after}"
                f" ORDER BY {key} LIMIT {batch_size}),"
                f" done AS (UPDATE {table.qualified} d SET {fp} = {fresh}"
                f" FROM batch WHERE d.{key} = batch.{key} RETURNING d.{key})"
                f" SELECT count(*) AS n,"
                f" (SELECT {key}::text FROM done ORDER BY {key} DESC LIMIT 1) AS last FROM done"
            )
            if not result["n"]:
                break
            done += int(result["n"])
            last = result["last"]
            self.progress("fingerprinted", done, todo)
        if rows and not todo:
            self.db.notice(f"nearsim: all {rows} rows of {table.qualified} already have a"
                           " fingerprint or no text")

    def create_band_indexes(self, enabled: Enabled) -> None:
        bucket = enabled.qualify(enabled.bucket_table, self.db)
        for band in range(enabled.bands):
            self.db.execute(
                f"CREATE INDEX ON {bucket} ({self.ext}.nearsim_band(si, {enabled.bands}, {band}))"
            )

    def band_indexes(self, enabled: Enabled) -> list[str]:
        bucket = enabled.qualify(enabled.bucket_table, self.db)
        rows = self.db.execute(
            "SELECT pg_catalog.quote_ident(n.nspname) || '.' || pg_catalog.quote_ident(c.relname)"
            " AS name FROM pg_catalog.pg_index i JOIN pg_catalog.pg_class c ON c.oid = i.indexrelid"
            " JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace"
            f" WHERE i.indrelid = {self.literal(bucket)}::pg_catalog.regclass"
            " AND NOT i.indisprimary"
        )
        return [r["name"] for r in rows]

    def create_functions(self, enabled: Enabled) -> None:
        table, ext = enabled.table, self.ext
        key = self.ident(table.key_column)
        text, fp = self.ident(enabled.text_column), self.ident(enabled.hash_column)
        bucket = enabled.qualify(enabled.bucket_table, self.db)
        fingerprint_fn = enabled.qualify(enabled.fingerprint_function, self.db)
        bucket_fn = enabled.qualify(enabled.bucket_function, self.db)
        similar = enabled.qualify(enabled.similar_function, self.db)
        pinned = "SET search_path = pg_catalog, pg_temp"
        profile = self.literal(enabled.profile)

        # NULL text: no fingerprint.  A missing fingerprint, or one left over
        # from the old text, is computed here.  One the statement brings is
        # kept when the session declares it computes the table's profile
        # (SET nearsim.profile, as nearsim's loader does); otherwise it is
        # checked, and one of another profile is refused.
        fresh = self.simhash_sql(f"NEW.{text}", enabled.profile)
        column = self.literal(enabled.hash_column)
        declare = self.literal(f"SET nearsim.profile = {self.literal(enabled.profile)}")
        self.db.execute(f"""CREATE FUNCTION {fingerprint_fn}() RETURNS trigger
LANGUAGE plpgsql {pinned} AS $nearsim$
DECLARE
    declared text := pg_catalog.current_setting('nearsim.profile', true);
    computed bigint;
BEGIN
    IF NEW.{text} IS NULL THEN
        NEW.{fp} := NULL;
    ELSIF NEW.{fp} IS NULL
       OR (TG_OP = 'UPDATE' AND NEW.{fp} = OLD.{fp} AND NEW.{text} IS DISTINCT FROM OLD.{text}) THEN
        NEW.{fp} := {fresh};
    ELSIF declared IS NOT NULL AND declared <> '' AND declared <> {profile} THEN
        RAISE EXCEPTION 'this session writes fingerprints of profile %, but table % holds %',
            declared, {self.literal(table.qualified)}, {profile}
            USING ERRCODE = '55000',
                  HINT = 'Compute them with the table''s profile, or leave column ' || {column}
                         || ' NULL and nearsim computes it.';
    ELSIF declared IS DISTINCT FROM {profile} THEN
        computed := {fresh};
        IF computed IS DISTINCT FROM NEW.{fp} THEN
            RAISE EXCEPTION 'fingerprint % given for table % is not the % one of its text (%)',
                NEW.{fp}, {self.literal(table.qualified)}, {profile}, computed
                USING ERRCODE = '22023',
                      HINT = 'Leave column ' || {column} || ' NULL and nearsim computes it;'
                             || ' a client that computes them declares it: ' || {declare};
        END IF;
    END IF;
    RETURN NEW;
END
$nearsim$""")
        # One statement's rows at once, from its transition tables.  A bucket
        # row changes only when its document's key or fingerprint does.
        self.db.execute(f"""CREATE FUNCTION {bucket_fn}() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER {pinned} AS $nearsim$
BEGIN
    IF TG_OP = 'INSERT' THEN
        INSERT INTO {bucket} AS b (key, si)
        SELECT n.{key}, n.{fp} FROM nearsim_new n WHERE n.{fp} IS NOT NULL
        ON CONFLICT (key) DO UPDATE SET si = EXCLUDED.si;
    ELSIF TG_OP = 'UPDATE' THEN
        DELETE FROM {bucket} AS b
        USING (SELECT o.{key}, o.{fp} FROM nearsim_old o
               EXCEPT SELECT n.{key}, n.{fp} FROM nearsim_new n) AS gone (key, si)
        WHERE b.key = gone.key;
        INSERT INTO {bucket} AS b (key, si)
        SELECT came.key, came.si
        FROM (SELECT n.{key}, n.{fp} FROM nearsim_new n
              EXCEPT SELECT o.{key}, o.{fp} FROM nearsim_old o) AS came (key, si)
        WHERE came.si IS NOT NULL
        ON CONFLICT (key) DO UPDATE SET si = EXCLUDED.si;
    ELSIF TG_OP = 'DELETE' THEN
        DELETE FROM {bucket} AS b USING nearsim_old o WHERE b.key = o.{key};
    ELSIF TG_OP = 'TRUNCATE' THEN
        TRUNCATE {bucket};
    END IF;
    RETURN NULL;
END
$nearsim$""")
        self.db.execute(f"REVOKE ALL ON FUNCTION {bucket_fn}() FROM PUBLIC")
        self.db.execute(f"REVOKE ALL ON FUNCTION {fingerprint_fn}() FROM PUBLIC")

        # The search: plain SQL, inlined by the planner.  The bucket indexes
        # give every document within max_distance (see bands.c); the
        # documents' own fingerprints decide, so the rows are exactly those
        # of WHERE hamming(si, query) <= max_distance.  The candidates' keys
        # come as one array, so the documents are always fetched through
        # their primary key, whatever the planner guesses of hamming().  The profile check is
        # immutable: it runs once, when the query is planned.
        probes = "\n        OR ".join(
            f"{ext}.nearsim_band(b.si, {enabled.bands}, {band}) = ANY"
            f" ({ext}.nearsim_band_probes(query, max_distance, {enabled.bands}, {band}))"
            for band in range(enabled.bands)
        )
        self.db.execute(f"""CREATE FUNCTION {similar}(query bigint, max_distance integer DEFAULT 6)
RETURNS TABLE (doc {table.qualified}, distance integer)
LANGUAGE sql STABLE PARALLEL SAFE AS $nearsim$
    SELECT d, {ext}.hamming(d.{fp}, query)
    FROM {table.qualified} AS d
    WHERE d.{key} = ANY (ARRAY(
        SELECT b.key FROM {bucket} AS b
        WHERE ({probes})
          AND {ext}.hamming(b.si, query) <= max_distance))
      AND {ext}.hamming(d.{fp}, query) <= max_distance
      AND {ext}.nearsim_check_profile({table.oid}::oid::pg_catalog.regclass, {profile})
$nearsim$""")
        self.db.execute(f"""CREATE FUNCTION {similar}(query text, max_distance integer DEFAULT 6)
RETURNS TABLE (doc {table.qualified}, distance integer)
LANGUAGE sql STABLE PARALLEL SAFE AS $nearsim$
    SELECT s.doc, s.distance FROM {similar}({self.simhash_sql("query", enabled.profile)},
                                            max_distance) AS s
$nearsim$""")
        for argument in ("bigint", "text"):
            self.db.execute(
                f"COMMENT ON FUNCTION {similar}({argument}, integer) IS"
                f" {self.literal(f'rows of {table.qualified} whose fingerprint is within max_distance bits of the query ({enabled.profile} fingerprint), with the distance; exact, through the nearsim bucket index')}"  # noqa: E501
            )

    def create_triggers(self, enabled: Enabled) -> None:
        table = enabled.table
        existing = {r["tgname"] for r in self.db.execute(
            f"SELECT tgname FROM pg_catalog.pg_trigger WHERE tgrelid = {table.oid}::oid"
        )}
        fingerprint_fn = enabled.qualify(enabled.fingerprint_function, self.db)
        bucket_fn = enabled.qualify(enabled.bucket_function, self.db)
        # The conditions are those under which the function changes the row,
        # tested without calling it: a bulk load that brings its fingerprints
        # costs no function call per row.
        text, fp = self.ident(enabled.text_column), self.ident(enabled.hash_column)
        undeclared = ("pg_catalog.current_setting('nearsim.profile', true) IS DISTINCT FROM"
                      f" {self.literal(enabled.profile)}")
        needs_work = {
            "INSERT": f"NEW.{fp} IS NULL OR NEW.{text} IS NULL OR {undeclared}",
            "UPDATE": f"NEW.{fp} IS NULL OR NEW.{text} IS NULL"
                      f" OR (NEW.{fp} = OLD.{fp} AND NEW.{text} IS DISTINCT FROM OLD.{text})"
                      f" OR (NEW.{fp} IS DISTINCT FROM OLD.{fp} AND {undeclared})",
        }
        for event, name in FINGERPRINT_TRIGGERS.items():
            if name not in existing:
                self.db.execute(
                    f"CREATE TRIGGER {self.ident(name)} BEFORE {event} ON {table.qualified}"
                    f" FOR EACH ROW WHEN ({needs_work[event]})"
                    f" EXECUTE FUNCTION {fingerprint_fn}()"
                )
        for event, (name, referencing) in BUCKET_TRIGGERS.items():
            if name not in existing:
                self.db.execute(
                    f"CREATE TRIGGER {self.ident(name)} AFTER {event} ON {table.qualified}"
                    f" {referencing} FOR EACH STATEMENT EXECUTE FUNCTION {bucket_fn}()"
                )
        for name in TRIGGERS:
            self.db.execute(f"ALTER TABLE {table.qualified} ENABLE TRIGGER {self.ident(name)}")

    # -- disabling -----------------------------------------------------------

    def disable(self, tbl: str) -> None:
        enabled = self.lookup(tbl)
        table = enabled.table
        with self.as_owner(table):
            self.remove(enabled)

    def remove(self, enabled: Enabled) -> None:
        self.drop_functions_and_triggers(enabled)
        self.db.execute(f"DROP TABLE IF EXISTS {enabled.qualify(enabled.bucket_table, self.db)}")
        self.db.execute(f"DELETE FROM {self.registry} WHERE tbl = {enabled.table.oid}::oid")

    # -- checking and repairing -------------------------------------------

    def verify(self, tbl: str, fingerprints: bool) -> dict[str, Any]:
        enabled = self.lookup(tbl)
        table = enabled.table
        key = self.ident(table.key_column)
        text, fp = self.ident(enabled.text_column), self.ident(enabled.hash_column)
        bucket = enabled.qualify(enabled.bucket_table, self.db)
        stale = (
            f", (SELECT count(*) FROM {table.qualified} d WHERE d.{fp} IS DISTINCT FROM"
            f" {self.simhash_sql(f'd.{text}', enabled.profile)}) AS stale"
            if fingerprints and self.can_compute(enabled.profile) else ", NULL::bigint AS stale"
        )
        report = self.one(
            f"SELECT count(d.key) AS documents, count(d.si) AS fingerprinted,"
            " count(b.key) AS buckets,"
            " count(*) FILTER (WHERE d.si IS NOT NULL AND b.key IS NULL) AS missing,"
            " count(*) FILTER (WHERE b.key IS NOT NULL AND d.si IS NULL) AS extra,"
            " count(*) FILTER (WHERE b.si <> d.si) AS wrong,"
            " (pg_catalog.array_agg(COALESCE(d.key, b.key)::text ORDER BY COALESCE(d.key, b.key))"
            "  FILTER (WHERE b.si IS DISTINCT FROM d.si))[1:10] AS sample_keys"
            f"{stale}"
            f" FROM (SELECT {key} AS key, {fp} AS si FROM {table.qualified}) d"
            f" FULL JOIN {bucket} b ON b.key = d.key"
        )
        triggers = self.db.execute(
            "SELECT t.tgname, t.tgenabled FROM pg_catalog.pg_trigger t"
            f" WHERE t.tgrelid = {table.oid}::oid"
        )
        states = {r["tgname"]: r["tgenabled"] for r in triggers}
        report["triggers_ok"] = all(states.get(name) in ("O", "A") for name in TRIGGERS)
        report["bands"] = enabled.bands
        report["band_indexes_ok"] = len(self.band_indexes(enabled)) == enabled.bands
        report["profile_ok"] = self.can_compute(enabled.profile)
        report["ok"] = (
            not (report["missing"] or report["extra"] or report["wrong"] or report["stale"])
            and report["triggers_ok"] and report["band_indexes_ok"] and report["profile_ok"]
        )
        return report

    def rebuild(self, tbl: str, bands: int | None, fingerprints: bool,
                batch_size: int, profile: str | None = None) -> dict[str, Any]:
        enabled = self.lookup(tbl)
        new_profile = self.profile(enabled.profile if profile is None else profile)
        with self.as_owner(enabled.table):
            return self.repair(enabled, bands, fingerprints, new_profile)

    def repair(self, enabled: Enabled, bands: int | None, fingerprints: bool,
               profile: str) -> dict[str, Any]:
        table = enabled.table
        self.db.execute(f"LOCK TABLE {table.qualified} IN SHARE ROW EXCLUSIVE MODE")
        # Another profile means other fingerprints for every document.
        fingerprints = fingerprints or profile != enabled.profile
        if not fingerprints:
            self.check_profile(enabled)
        # The functions and triggers are made again below from this version's
        # templates, with the new layout and profile; the old ones would
        # check the new fingerprints against the old profile.
        self.drop_functions_and_triggers(enabled)
        key = self.ident(table.key_column)
        text, fp = self.ident(enabled.text_column), self.ident(enabled.hash_column)
        bucket = enabled.qualify(enabled.bucket_table, self.db)
        recomputed = 0
        if fingerprints:
            # The triggers may be off (that may be why this runs), so the
            # buckets are resynchronised below rather than left to them.
            recomputed = int(self.one(
                f"WITH changed AS (UPDATE {table.qualified} d SET {fp} = fresh.si"
                f" FROM (SELECT {key} AS key, {self.simhash_sql(text, profile)} AS si"
                f" FROM {table.qualified}) fresh"
                f" WHERE d.{key} = fresh.key AND d.{fp} IS DISTINCT FROM fresh.si RETURNING 1)"
                " SELECT count(*) AS n FROM changed")["n"])
            self.progress("recomputed fingerprints of", recomputed, recomputed)
        removed = int(self.one(
            f"WITH gone AS (DELETE FROM {bucket} b WHERE NOT EXISTS (SELECT FROM"
            f" {table.qualified} d WHERE d.{key} = b.key AND d.{fp} = b.si) RETURNING 1)"
            " SELECT count(*) AS n FROM gone")["n"])
        added = int(self.one(
            f"WITH came AS (INSERT INTO {bucket} AS b (key, si) SELECT d.{key}, d.{fp}"
            f" FROM {table.qualified} d WHERE d.{fp} IS NOT NULL AND NOT EXISTS (SELECT FROM"
            f" {bucket} x WHERE x.key = d.{key} AND x.si = d.{fp})"
            " ON CONFLICT (key) DO UPDATE SET si = EXCLUDED.si RETURNING 1)"
            " SELECT count(*) AS n FROM came")["n"])
        new_bands = enabled.bands if bands is None else bands
        self.check_bands(new_bands)
        if new_bands != enabled.bands or len(self.band_indexes(enabled)) != enabled.bands:
            for index in self.band_indexes(enabled):
                self.db.execute(f"DROP INDEX {index}")
            self.create_band_indexes(
                Enabled(**{**enabled.__dict__, "bands": new_bands}))
        enabled = Enabled(**{**enabled.__dict__, "bands": new_bands, "profile": profile})
        self.create_functions(enabled)
        self.create_triggers(enabled)
        self.db.execute(
            f"UPDATE {self.registry} SET bands = {new_bands}, profile = {self.literal(profile)}"
            f" WHERE tbl = {table.oid}::oid"
        )
        self.db.execute(f"ANALYZE {bucket}")
        return {"recomputed": recomputed, "removed": removed, "added": added,
                "bands": new_bands}

    def drop_functions_and_triggers(self, enabled: Enabled) -> None:
        similar = enabled.qualify(enabled.similar_function, self.db)
        self.db.execute(f"DROP FUNCTION IF EXISTS {similar}(text, integer)")
        self.db.execute(f"DROP FUNCTION IF EXISTS {similar}(bigint, integer)")
        for name in TRIGGERS:
            self.db.execute(
                f"DROP TRIGGER IF EXISTS {self.ident(name)} ON {enabled.table.qualified}")
        for function in (enabled.fingerprint_function, enabled.bucket_function):
            self.db.execute(f"DROP FUNCTION IF EXISTS {enabled.qualify(function, self.db)}()")

    # -- all pairs and clusters -------------------------------------------

    def fingerprints(self, tbl: str) -> tuple[list[str], np.ndarray]:
        """Keys (as text, in key order) and fingerprints of every bucket row."""
        enabled = self.lookup(tbl)
        self.check_profile(enabled)
        bucket = enabled.qualify(enabled.bucket_table, self.db)
        row = self.one(
            "SELECT pg_catalog.array_agg(key::text ORDER BY key) AS keys,"
            f" pg_catalog.array_agg(si ORDER BY key) AS sis FROM {bucket}"
        )
        keys: list[str] = row["keys"] or []
        return keys, np.array(row["sis"] or [], dtype=np.int64)

    def pairs(self, tbl: str, max_distance: int) -> Iterator[tuple[str, str, int]]:
        from .pairs import iter_pairs

        # Errors are raised here, not inside the generator, where PL/Python
        # would hide them behind "error fetching next item from iterator".
        self.check_distance(max_distance)
        keys, sis = self.fingerprints(tbl)
        # Pairs are streamed a piece at a time: a corpus with thousands of
        # identical documents has tens of millions of them.
        return (
            (keys[i], keys[j], d)
            for first, second, distance in iter_pairs(sis, max_distance)
            for i, j, d in zip(first.tolist(), second.tolist(), distance.tolist(), strict=True)
        )

    def clusters(self, tbl: str, max_distance: int, method: str,
                 min_size: int) -> Iterator[tuple[str, str, str | None]]:
        if method not in ("components", "pivot"):
            self.fail(f"unknown clustering method {method!r}",
                      hint="Use 'components' (chains of near-duplicates) or 'pivot' (every"
                      " member within max_distance of its group's pivot).")
        from .pairs import all_pairs, connected_components, pivot_groups

        self.check_distance(max_distance)
        keys, sis = self.fingerprints(tbl)
        first, second, _ = all_pairs(sis, max_distance)
        if method == "components":
            groups = connected_components(len(keys), first, second)
        else:
            groups = pivot_groups(len(keys), first, second)
        return _named_groups(keys, groups, method, min_size)

    def similar_verified(
        self, tbl: str, query: str | None, min_similarity: float, measure: str,
        max_distance: int | None,
    ) -> list[tuple[str, int, float, bool]]:
        """Candidates from the bucket index, kept if their exact ``measure`` passes.

        The radius comes from the calibration (the distance within which 99%
        of the calibration pairs at least ``min_similarity`` similar fall)
        unless ``max_distance`` is given.  ``short`` marks a pair where either
        text has fewer than SHORT_FEATURES shingles: so few features make the
        fingerprint jumpy, so such documents may be missed at any radius.
        """
        enabled = self.lookup(tbl)
        radius = self._verified_radius(min_similarity, measure, max_distance, enabled.profile)
        if query is None:
            return []
        asked = _Text(query)
        if asked.short:
            self.db.notice(f"the query has {len(asked.shingles)} shingles: a fingerprint of"
                           f" fewer than {SHORT_FEATURES} is unreliable, near-duplicates may be"
                           " missed")
        key = self.ident(enabled.table.key_column)
        text = self.ident(enabled.text_column)
        similar = enabled.qualify(enabled.similar_function, self.db)
        rows = self.db.execute(
            f"SELECT (s.doc).{key}::text AS key, (s.doc).{text}::text AS body, s.distance"
            f" FROM {similar}({self.literal(query)}::text, {radius}) AS s"
        )
        found = []
        for row in rows:
            candidate = _Text(row["body"] or "")
            value = _measure(measure, asked, candidate)
            if value >= min_similarity:
                found.append((row["key"], int(row["distance"]), value,
                              asked.short or candidate.short))  # fmt: skip
        found.sort(key=lambda match: (-match[2], match[1], match[0]))
        return found

    def _verified_radius(self, min_similarity: float, measure: str,
                         max_distance: int | None, profile: str) -> int:
        """Check a verified search's arguments; the radius to take candidates from."""
        from . import calibration

        if measure not in VERIFIED_MEASURES:
            self.fail(f"unknown measure {measure!r}",
                      hint=f"Use one of {', '.join(VERIFIED_MEASURES)}.")
        if min_similarity is None or not 0 <= min_similarity <= 1:
            self.fail(f"min_similarity must be between 0 and 1, not {min_similarity}")
        if max_distance is not None:
            self.check_distance(max_distance)
            return max_distance
        try:
            return calibration.radius_for(min_similarity, profile)
        except (ValueError, calibration.NotCalibrated) as error:
            self.fail(str(error), hint="Pass max_distance to choose the radius yourself.")
            raise  # not reached: fail raises

    def pairs_verified(
        self, tbl: str, min_similarity: float, measure: str, max_distance: int | None
    ) -> list[tuple[str, str, int, float, bool]]:
        """Pairs within the radius whose texts are at least ``min_similarity`` similar.

        The texts of the documents in a piece of candidate pairs are read
        once per piece, by key.
        """
        from .pairs import iter_pairs

        enabled = self.lookup(tbl)
        radius = self._verified_radius(min_similarity, measure, max_distance, enabled.profile)
        keys, sis = self.fingerprints(tbl)
        key = self.ident(enabled.table.key_column)
        text = self.ident(enabled.text_column)
        found = []
        for first, second, distance in iter_pairs(sis, radius):
            wanted = sorted({*first.tolist(), *second.tolist()})
            if not wanted:
                continue
            listed = ", ".join(self.literal(keys[i]) for i in wanted)
            rows = self.db.execute(
                f"SELECT {key}::text AS key, {text}::text AS body FROM {enabled.table.qualified}"
                f" WHERE {key} = ANY (ARRAY[{listed}]::{enabled.table.key_type}[])"
            )
            texts = {row["key"]: _Text(row["body"] or "") for row in rows}
            for i, j, d in zip(first.tolist(), second.tolist(), distance.tolist(), strict=True):
                a, b = keys[i], keys[j]
                if a not in texts or b not in texts:
                    continue  # deleted since the fingerprints were read
                value = _measure(measure, texts[a], texts[b])
                if value >= min_similarity:
                    found.append((a, b, d, value, texts[a].short or texts[b].short))
        return found

    def clusters_verified(
        self, tbl: str, min_similarity: float, measure: str, max_distance: int | None,
        method: str, min_size: int,
    ) -> list[tuple[str, str, str | None]]:
        """``clusters`` over the verified pairs instead of all pairs within a distance."""
        if method not in ("components", "pivot"):
            self.fail(f"unknown clustering method {method!r}",
                      hint="Use 'components' or 'pivot'.")
        if min_size is None or min_size < 1:
            self.fail(f"min_size must be at least 1, not {min_size}")
        from .pairs import connected_components, pivot_groups

        pairs = self.pairs_verified(tbl, min_similarity, measure, max_distance)
        keys = sorted({k for a, b, *_ in pairs for k in (a, b)})
        position = {k: i for i, k in enumerate(keys)}
        first = np.array([position[a] for a, *_ in pairs], dtype=np.int64)
        second = np.array([position[b] for _, b, *_ in pairs], dtype=np.int64)
        grouping = connected_components if method == "components" else pivot_groups
        return list(_named_groups(keys, grouping(len(keys), first, second), method, min_size))

    def check_distance(self, max_distance: int) -> None:
        if not 0 <= max_distance <= 64:
            self.fail(f"max_distance must be between 0 and 64, not {max_distance}")

