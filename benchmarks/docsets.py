"""The document sets of sections 4 to 8 of the benchmarks, and section 7: their storage.

Each set is a table ``(id bigint PRIMARY KEY, body text, si bigint)``
enabled for nearsim, its fingerprints made by this client with a fixed seed
so that every run measures the same data:

- *uniform*: random 64-bit values;
- *text-like*: a block of identical fingerprints (empty or boilerplate
  pages), then clusters whose sizes follow Zipf's law, seeded by the
  fingerprints of real texts, of exact copies and variants with a few bits
  flipped.

``nearsim_enable`` runs on the empty table, then the rows are copied in, so
the triggers keep the supplied fingerprints and fill the bucket table; the
bucket table's size is measured as the triggers left it and after
``REINDEX`` (section 7 prints both).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray
from psycopg import sql

import nearsim
from nearsim.core.bands import default_bands

from .common import BenchError, Connection, Corpus, count_rows, prewarm_table, print_table, wrap


@dataclass(frozen=True)
class BucketPlan:
    """Sizes and counts of the bucket index sections (4 to 8) of one run."""

    sizes: tuple[int, ...]  # documents per table
    queries: int  # search queries per table
    trigger_rows: int  # rows of the bulk statements of section 8
    trigger_statements: int  # single-row statements of section 8
    trigger_repeat: int
    pairs_timeout: int  # seconds


FULL_PLAN = BucketPlan((10_000, 100_000, 1_000_000), 200, 100_000, 5_000, 3, 300)
QUICK_PLAN = BucketPlan((2_000,), 6, 2_000, 100, 1, 60)

TARGET_ROWS = 1_000_000  # the search, pairs and storage targets are for this many documents
TARGET_BUCKET_BYTES = 100.0  # bucket table and its indexes, per document
SEED = 20_241_122  # of the random generator: every run measures the same data

UNIFORM = "uniform"
TEXT_LIKE = "text-like"
# The text-like set: a block of identical fingerprints (empty or boilerplate
# pages), then clusters whose sizes follow Zipf's law: a seed (a real text's
# fingerprint while there are any, else a random one), exact copies of it
# and variants with a few bits flipped.
BOILERPLATE_TEXT = "This page intentionally left blank."
BOILERPLATE_ROWS = 10_000  # at most a tenth of the set
CLUSTER_ZIPF = 2.0
MAX_CLUSTER = 100
DUPLICATE_SHARE = 0.25  # of the members after the first
MAX_FLIPS = 8
# Queries: existing fingerprints with 1 to 3 bits flipped, and some random ones.
QUERY_RANDOM_SHARE = 0.25
QUERY_MAX_FLIPS = 3

Fingerprints = NDArray[np.int64]

_BYTE_BITS = np.array([bin(i).count("1") for i in range(256)], dtype=np.uint8)


def popcount(values: Fingerprints) -> NDArray[np.uint8]:
    """Bits set in each 64-bit value."""
    if hasattr(np, "bitwise_count"):  # numpy >= 2.0
        return np.asarray(np.bitwise_count(values.view(np.uint64)), dtype=np.uint8)
    counts = _BYTE_BITS[values.view(np.uint8)].reshape(-1, 8).sum(axis=1)
    return np.asarray(counts, dtype=np.uint8)


def random_fingerprints(rng: np.random.Generator, count: int) -> Fingerprints:
    return rng.integers(-(2**63), 2**63 - 1, size=count, dtype=np.int64, endpoint=True)


def flip_masks(rng: np.random.Generator, flips: NDArray[np.int64]) -> Fingerprints:
    """For each entry of ``flips``, a mask of that many distinct random bits."""
    masks = np.zeros(len(flips), dtype=np.uint64)
    for step in range(int(flips.max(initial=0))):
        todo = np.flatnonzero(flips > step)
        while todo.size:
            bit = np.left_shift(np.uint64(1), rng.integers(0, 64, todo.size).astype(np.uint64))
            fresh = (masks[todo] & bit) == 0
            masks[todo[fresh]] |= bit[fresh]
            todo = todo[~fresh]
    return masks.view(np.int64)


class RealFingerprints:
    """Distinct fingerprints of real texts: KJV chapters, then verses, then passages.

    The later kinds are fingerprinted (by the client) only when a set needs
    more seeds than the earlier ones give.
    """

    def __init__(self, chapters: Corpus) -> None:
        self.chapters = chapters
        self.values = self.distinct(chapters.fingerprints)
        self.kinds = [f"{len(self.values):,} chapters"]
        self.verses = [v for t in chapters.texts for v in t.splitlines() if v.strip()]
        self.pending = ["verses", "passages"]

    @staticmethod
    def distinct(fingerprints: Sequence[int | None]) -> Fingerprints:
        return np.unique(np.array([f for f in fingerprints if f is not None], dtype=np.int64))

    def take(self, count: int) -> Fingerprints:
        while len(self.values) < count and self.pending:
            kind = self.pending.pop(0)
            if kind == "verses":
                texts = self.verses
            else:  # three consecutive verses
                texts = ["\n".join(self.verses[i:i + 3]) for i in range(len(self.verses) - 2)]
            before = len(self.values)
            more = self.distinct([nearsim.simhash(t) for t in texts])
            self.values = np.unique(np.concatenate([self.values, more]))
            self.kinds.append(f"{len(self.values) - before:,} {kind}")
        return self.values


def text_like_fingerprints(rng: np.random.Generator, rows: int,
                           real: RealFingerprints) -> tuple[Fingerprints, str]:
    """Fingerprints with near-duplicate clusters, in random order; and a description."""
    block = min(BOILERPLATE_ROWS, rows // 10)
    boilerplate = nearsim.simhash(BOILERPLATE_TEXT)
    if boilerplate is None:
        raise BenchError("the boilerplate text has no fingerprint")
    rest = rows - block
    sizes = np.minimum(rng.zipf(CLUSTER_ZIPF, size=max(rest, 1)), MAX_CLUSTER)
    ends = np.cumsum(sizes)
    clusters = int(np.searchsorted(ends, rest)) + 1
    sizes = sizes[:clusters]
    sizes[-1] -= int(ends[clusters - 1]) - rest
    pool = real.take(clusters)
    from_texts = min(clusters, len(pool))
    seeds = np.concatenate([rng.permutation(pool)[:from_texts],
                            random_fingerprints(rng, clusters - from_texts)])
    cluster = np.repeat(np.arange(clusters), sizes)
    first = np.zeros(rest, dtype=bool)
    first[np.concatenate([[0], ends[:clusters - 1]])] = True
    flips = rng.integers(1, MAX_FLIPS + 1, size=rest)
    flips[(rng.random(rest) < DUPLICATE_SHARE) | first] = 0
    members = seeds[cluster] ^ flip_masks(rng, flips)
    values = rng.permutation(np.concatenate([np.full(block, boilerplate, dtype=np.int64), members]))
    described = (
        f"{block:,} identical (boilerplate) + {clusters:,} clusters of 1-{int(sizes.max())}"
        f" (Zipf {CLUSTER_ZIPF:g}; {from_texts:,} seeded by texts, {clusters - from_texts:,}"
        f" random); {int((flips > 0).sum()):,} variants with 1-{MAX_FLIPS} bits flipped,"
        f" {int((~first & (flips == 0)).sum()):,} exact copies"
    )
    return values, described


def make_queries(rng: np.random.Generator, fingerprints: Fingerprints,
                 count: int) -> Fingerprints:
    randoms = round(count * QUERY_RANDOM_SHARE)
    picked = fingerprints[rng.integers(0, len(fingerprints), count - randoms)]
    near = picked ^ flip_masks(rng, rng.integers(1, QUERY_MAX_FLIPS + 1, size=len(picked)))
    return rng.permutation(np.concatenate([near, random_fingerprints(rng, randoms)]))


@dataclass(frozen=True)
class Storage:
    """Bytes of a bucket table: heap, primary key index, band indexes, all forks."""

    heap: int
    key_index: int
    band_indexes: int
    total: int

    def per_doc(self, rows: int) -> float:
        return self.total / max(rows, 1)


def bucket_storage(conn: Connection, bucket: str) -> Storage:
    row = conn.execute(
        "SELECT pg_relation_size(b),"
        " coalesce((SELECT sum(pg_relation_size(i.indexrelid)) FROM pg_index i"
        "  WHERE i.indrelid = b AND i.indisprimary), 0),"
        " coalesce((SELECT sum(pg_relation_size(i.indexrelid)) FROM pg_index i"
        "  WHERE i.indrelid = b AND NOT i.indisprimary), 0),"
        " pg_total_relation_size(b)"
        " FROM (SELECT %s::regclass AS b) AS t",
        (bucket,),
    ).fetchone()
    if row is None:
        raise BenchError(f"no size for {bucket}")
    return Storage(*(int(v) for v in row))


@dataclass
class DocSet:
    """A documents table enabled for nearsim, and what the client knows of it."""

    kind: str
    rows: int
    name: str  # of the table, in the scratch schema; also the prefix of its objects
    qualified: str  # schema-qualified and quoted, for ::regclass
    table: sql.Identifier
    bucket: str  # schema-qualified and quoted
    similar: sql.Identifier
    fingerprints: Fingerprints  # of ids 1..rows, in order
    queries: Fingerprints
    described: str
    bands: int
    load_seconds: float = 0.0
    loaded: Storage | None = None  # as the triggers left it after the COPY
    reindexed: Storage | None = None  # after REINDEX, as nearsim_enable builds it

    @property
    def label(self) -> str:
        return f"{self.kind} {count_rows(self.rows)}"


def check_bucket_api(conn: Connection) -> None:
    row = conn.execute(
        "SELECT to_regprocedure('nearsim_enable(regclass, name, name, integer, name, integer,"
        " text)') IS NOT NULL AND to_regprocedure('nearsim_rebuild(regclass, integer, boolean,"
        " integer, text)') IS NOT NULL"
    ).fetchone()
    if not row or not row[0]:
        raise BenchError(
            "this database's nearsim extension has no bucket index (nearsim_enable,"
            " nearsim_rebuild): it was created from an older build; recreate it with"
            " DROP EXTENSION nearsim CASCADE; CREATE EXTENSION nearsim CASCADE"
        )


def make_docset(conn: Connection, schema: str, kind: str, fingerprints: Fingerprints,
                queries: Fingerprints, described: str) -> DocSet:
    """Create and enable an empty documents table, then COPY the rows into it.

    The fingerprints do not belong to the bodies, so nearsim_enable (which
    checks stored fingerprints against the text) runs on the empty table,
    with the number of bands the rule picks for the final size; its BEFORE
    ROW trigger keeps the fingerprints the COPY supplies and its statement
    trigger fills the buckets.
    """
    rows = len(fingerprints)
    name = f"{kind.replace('-', '')}_{rows}"
    table = sql.Identifier(schema, name)
    qualified = table.as_string(conn)
    bands = default_bands(rows)
    conn.execute(sql.SQL("CREATE TABLE {} (id bigint PRIMARY KEY, body text, si bigint)"
                         " WITH (autovacuum_enabled = off)").format(table))
    conn.execute("SELECT nearsim_enable(%s::regclass, 'body', bands => %s)", (qualified, bands))
    bucket = sql.Identifier(schema, f"{name}_nearsim").as_string(conn)
    conn.execute(sql.SQL("ALTER TABLE {} SET (autovacuum_enabled = off)").format(
        sql.SQL(bucket)))
    docset = DocSet(kind, rows, name, qualified, table, bucket,
                    sql.Identifier(schema, f"{name}_similar"), fingerprints, queries,
                    described, bands)
    started = time.perf_counter()
    copy_sql = sql.SQL("COPY {} (id, body, si) FROM STDIN").format(table)
    values = fingerprints.tolist()
    with conn.cursor() as cur, cur.copy(copy_sql) as copy:
        for start in range(0, rows, 100_000):
            copy.write("".join(f"{i}\tdoc {i}\t{values[i - 1]}\n"
                               for i in range(start + 1, min(start + 100_000, rows) + 1)))
    docset.load_seconds = time.perf_counter() - started
    conn.execute(sql.SQL("VACUUM ANALYZE {}").format(table))
    conn.execute(sql.SQL("VACUUM ANALYZE {}").format(sql.SQL(bucket)))
    docset.loaded = bucket_storage(conn, bucket)
    conn.execute(sql.SQL("REINDEX TABLE {}").format(sql.SQL(bucket)))
    docset.reindexed = bucket_storage(conn, bucket)
    # The fingerprints are synthetic, not those of the texts: only the buckets
    # are checked (fingerprints => false).
    row = conn.execute("SELECT ok, buckets FROM nearsim_verify(%s::regclass, false)",
                       (qualified,)).fetchone()
    if row is None or not row[0] or row[1] != rows:
        raise BenchError(f"{docset.label}: nearsim_verify after the COPY says {row}")
    return docset


def shared_buffers(conn: Connection) -> str:
    row = conn.execute("SELECT current_setting('shared_buffers')").fetchone()
    return str(row[0]) if row else "?"


def prewarm_search(conn: Connection, schema: str, docset: DocSet) -> bool:
    """Load what a bucket search reads into shared buffers; False without pg_prewarm.

    That is the bucket table, its band indexes and the documents' primary key
    index; of the documents themselves a search reads only the matches. The
    scans of the documents read through a small ring of buffers and do not
    evict them.
    """
    relations = [docset.bucket] + [str(r[0]) for r in conn.execute(
        "SELECT indexrelid::regclass::text FROM pg_index"
        " WHERE (indrelid = %s::regclass AND NOT indisprimary)"
        " OR (indrelid = %s::regclass AND indisprimary)",
        (docset.bucket, docset.qualified)).fetchall()]
    return all(prewarm_table(conn, schema, relation).startswith("pg_prewarm loaded")
               for relation in relations)


def load_docsets(conn: Connection, schema: str, sizes: Sequence[int], queries: int,
                 chapters: Corpus) -> tuple[list[DocSet], str]:
    """The uniform and text-like sets of each size; and where the real fingerprints came from."""
    rng = np.random.default_rng(SEED)
    real = RealFingerprints(chapters)
    sets = []
    for rows in sizes:
        uniform = random_fingerprints(rng, rows)
        sets.append(make_docset(conn, schema, UNIFORM, uniform,
                                make_queries(rng, uniform, queries), "random 64-bit values"))
        text_like, described = text_like_fingerprints(rng, rows, real)
        sets.append(make_docset(conn, schema, TEXT_LIKE, text_like,
                                make_queries(rng, text_like, queries), described))
    return sets, ", ".join(real.kinds)


# --- 7: storage --------------------------------------------------------------


def bucket_storage_table(sets: Sequence[DocSet]) -> None:
    print("\n7. Bucket storage per document, default layout\n")
    wrap(
        "Bytes per document of the bucket table <prefix>_nearsim (key, si): its heap, its"
        " primary key index, its band indexes (btree, with deduplication) and, as the total,"
        " pg_total_relation_size (all forks). \"As loaded\": after the COPY into the enabled"
        " table, the indexes grown by the triggers' inserts; \"built\": after REINDEX, as"
        f" nearsim_enable builds them on a filled table. Target: <= {TARGET_BUCKET_BYTES:g}"
        " bytes per document."
    )
    rows = []
    for d in sets:
        assert d.loaded is not None and d.reindexed is not None
        per = d.rows
        rows.append([
            d.label, str(d.bands), f"{d.loaded.heap / per:.1f}", f"{d.loaded.key_index / per:.1f}",
            f"{d.loaded.band_indexes / per:.1f}", f"{d.loaded.per_doc(per):.1f}",
            f"{d.reindexed.key_index / per:.1f}", f"{d.reindexed.band_indexes / per:.1f}",
            f"{d.reindexed.per_doc(per):.1f}",
            f"{max(d.loaded.per_doc(per), d.reindexed.per_doc(per)) / TARGET_BUCKET_BYTES:.2f}",
        ])
    print()
    print_table(["set", "bands", "heap", "key index", "band indexes", "total as loaded",
                 "key index built", "band indexes built", "total built",
                 f"worst vs {TARGET_BUCKET_BYTES:g} B"],
                rows, "<>>>>>>>>>")
