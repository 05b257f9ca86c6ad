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
the triggers keep the supplied fingerprints and PostgreSQL fills the
rotation indexes; their size is measured as the inserts left them and after
``REINDEX`` (section 7 prints both), and the COPY's rate is taken for each
million rows, so that loading into a large table can be compared with
loading into an empty one.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import astuple, dataclass

import numpy as np
from numpy.typing import NDArray
from psycopg import sql

import nearsim
from nearsim.core.bands import default_bands

from .common import BenchError, Connection, Corpus, count_rows, prewarm_table, print_table, wrap


@dataclass(frozen=True)
class IndexPlan:
    """Sizes and counts of the index sections (4 to 8) of one run."""

    sizes: tuple[int, ...]  # documents per table
    queries: int  # search queries per table
    trigger_rows: int  # rows of the bulk statements of section 8
    trigger_statements: int  # single-row statements of section 8
    trigger_repeat: int
    pairs_timeout: int  # seconds


FULL_PLAN = IndexPlan((10_000, 100_000, 1_000_000), 200, 100_000, 5_000, 3, 300)
QUICK_PLAN = IndexPlan((2_000,), 6, 2_000, 100, 1, 60)

TARGET_ROWS = 1_000_000  # the search, pairs and storage targets are for this many documents
TARGET_INDEX_BYTES = 100.0  # the rotation indexes, per document
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
    """Bytes of a table's rotation indexes (everything nearsim's index adds), all forks."""

    indexes: int
    count: int

    @property
    def total(self) -> int:
        return self.indexes

    def per_doc(self, rows: int) -> float:
        return self.total / max(rows, 1)


ROTATION_INDEXES = "SELECT r.index AS indexrelid FROM nearsim_rotation_indexes(%s::regclass) r"


def index_storage(conn: Connection, table: str) -> Storage:
    row = conn.execute(
        "SELECT coalesce(sum(pg_total_relation_size(x.indexrelid)), 0), count(*)"
        f" FROM ({ROTATION_INDEXES}) x", (table,)).fetchone()
    if row is None:
        raise BenchError(f"no size for the indexes of {table}")
    return Storage(int(row[0]), int(row[1]))


def rotation_indexes(conn: Connection, table: str) -> list[str]:
    return [str(r[0]) for r in conn.execute(
        f"SELECT x.indexrelid::regclass::text FROM ({ROTATION_INDEXES}) x", (table,))]


@dataclass(frozen=True)
class LoadIO:
    """What a COPY cost the server besides time, from its statistics views."""

    wal_bytes: float
    full_page_images: float  # WAL records carrying a whole 8 kB page
    index_reads: float  # index blocks read from outside shared_buffers
    buffer_writes: float  # blocks written out of shared_buffers, by anyone

    def __sub__(self, other: LoadIO) -> LoadIO:
        return LoadIO(*(a - b for a, b in zip(astuple(self), astuple(other), strict=True)))


def load_io(conn: Connection, qualified: str) -> LoadIO:
    """The server's counters now (cluster-wide, but for the table's index reads)."""
    # The statistics of this backend's last transaction are flushed when it
    # is next idle: after this statement, before the next.
    conn.execute("SELECT pg_catalog.pg_stat_force_next_flush()")
    row = conn.execute(
        "SELECT w.wal_bytes::float8, w.wal_fpi::float8, coalesce(t.idx_blks_read, 0)::float8,"
        " (b.buffers_checkpoint + b.buffers_clean + b.buffers_backend)::float8"
        " FROM pg_catalog.pg_stat_wal w, pg_catalog.pg_stat_bgwriter b,"
        " pg_catalog.pg_statio_all_tables t WHERE t.relid = %s::regclass", (qualified,),
    ).fetchone()
    assert row is not None
    return LoadIO(*row)


@dataclass
class DocSet:
    """A documents table enabled for nearsim, and what the client knows of it."""

    kind: str
    rows: int
    name: str  # of the table, in the scratch schema; also the prefix of its objects
    qualified: str  # schema-qualified and quoted, for ::regclass
    table: sql.Identifier
    similar: sql.Identifier
    fingerprints: Fingerprints  # of ids 1..rows, in order
    queries: Fingerprints
    described: str
    bands: int
    load_seconds: float = 0.0
    million_seconds: tuple[float, ...] = ()  # of the COPY, for each million rows
    million_io: tuple[LoadIO, ...] = ()  # what the COPY of each million wrote and read
    loaded: Storage | None = None  # as the inserts left it after the COPY
    reindexed: Storage | None = None  # after REINDEX, as nearsim_enable builds it

    def million_rate(self, million: int) -> float | None:
        """Rows/s of the COPY through million ``million`` (0 = the first)."""
        if not -len(self.million_seconds) <= million < len(self.million_seconds):
            return None
        return 1_000_000 / self.million_seconds[million]

    @property
    def label(self) -> str:
        other = "" if self.bands == default_bands(self.rows) else f", {self.bands} bands"
        return f"{self.kind} {count_rows(self.rows)}{other}"


def check_rotation_index_api(conn: Connection) -> None:
    row = conn.execute(
        "SELECT to_regprocedure('nearsim_enable(regclass, name, name, integer, name, integer,"
        " text)') IS NOT NULL AND to_regprocedure('nearsim_rebuild(regclass, integer, boolean,"
        " integer, text)') IS NOT NULL"
    ).fetchone()
    if not row or not row[0]:
        raise BenchError(
            "this database's nearsim extension has no rotation index (nearsim_enable,"
            " nearsim_rebuild): it was created from an older build; recreate it with"
            " DROP EXTENSION nearsim CASCADE; CREATE EXTENSION nearsim CASCADE"
        )


def make_docset(conn: Connection, schema: str, kind: str, fingerprints: Fingerprints,
                queries: Fingerprints, described: str, bands: int | None = None) -> DocSet:
    """Create and enable an empty documents table, then COPY the rows into it.

    The fingerprints do not belong to the bodies, so nearsim_enable (which
    checks stored fingerprints against the text) runs on the empty table,
    with the number of bands the rule picks for the final size (or ``bands``); its BEFORE
    ROW trigger keeps the fingerprints the COPY supplies, and PostgreSQL
    inserts them into the rotation indexes.
    """
    rows = len(fingerprints)
    name = f"{kind.replace('-', '')}_{rows}"
    if bands is not None and bands != default_bands(rows):
        name += f"_{bands}bands"
    bands = default_bands(rows) if bands is None else bands
    table = sql.Identifier(schema, name)
    qualified = table.as_string(conn)
    conn.execute(sql.SQL("CREATE TABLE {} (id bigint PRIMARY KEY, body text, si bigint)"
                         " WITH (autovacuum_enabled = off)").format(table))
    conn.execute("SELECT nearsim_enable(%s::regclass, 'body', bands => %s)", (qualified, bands))
    docset = DocSet(kind, rows, name, qualified, table,
                    sql.Identifier(schema, f"{name}_similar"), fingerprints, queries,
                    described, bands)
    started = time.perf_counter()
    values = fingerprints.tolist()
    # One COPY per million rows (each its own transaction, as a loader's
    # batches are), so that the rate can be read for each million.
    millions, io = [], []
    for million in range(0, rows, 1_000_000):
        seconds, cost = copy_rows(conn, docset, million + 1, values[million:million + 1_000_000])
        if million + 1_000_000 <= rows:
            millions.append(seconds)
            io.append(cost)
    docset.million_seconds = tuple(millions)
    docset.million_io = tuple(io)
    docset.load_seconds = time.perf_counter() - started
    conn.execute(sql.SQL("VACUUM ANALYZE {}").format(table))
    docset.loaded = index_storage(conn, qualified)
    for index in rotation_indexes(conn, qualified):
        conn.execute(sql.SQL("REINDEX INDEX {}").format(sql.SQL(index)))
    docset.reindexed = index_storage(conn, qualified)
    # The fingerprints are synthetic, not those of the texts: only the index
    # is checked (fingerprints => false).
    row = conn.execute("SELECT ok, indexed FROM nearsim_verify(%s::regclass, false)",
                       (qualified,)).fetchone()
    if row is None or not row[0] or row[1] != rows:
        raise BenchError(f"{docset.label}: nearsim_verify after the COPY says {row}")
    return docset


def drop_docset(conn: Connection, docset: DocSet) -> None:
    """Disable the set's table and drop it."""
    conn.execute("SELECT nearsim_disable(%s::regclass)", (docset.qualified,))
    conn.execute(sql.SQL("DROP TABLE {}").format(docset.table))


def copy_rows(conn: Connection, docset: DocSet, first_id: int,
              values: Sequence[int]) -> tuple[float, LoadIO]:  # fmt: skip
    """COPY ``values`` as fingerprints of ids from ``first_id`` in one transaction:
    its seconds, and what it wrote and read."""
    before = load_io(conn, docset.qualified)
    begun = time.perf_counter()
    copy_sql = sql.SQL("COPY {} (id, body, si) FROM STDIN").format(docset.table)
    with conn.transaction(), conn.cursor() as cur, cur.copy(copy_sql) as copy:
        for start in range(0, len(values), 100_000):
            copy.write("".join(f"{first_id + i}\tdoc {first_id + i}\t{values[i]}\n"
                               for i in range(start, min(start + 100_000, len(values)))))
    seconds = time.perf_counter() - begun
    return seconds, load_io(conn, docset.qualified) - before


def shared_buffers(conn: Connection) -> str:
    row = conn.execute("SELECT current_setting('shared_buffers')").fetchone()
    return str(row[0]) if row else "?"


def prewarm_search(conn: Connection, schema: str, docset: DocSet) -> bool:
    """Load what a search reads into shared buffers; False without pg_prewarm.

    That is the rotation indexes; of the documents themselves a search reads
    only the matches. The scans of the documents read through a small ring
    of buffers and do not evict them.
    """
    relations = rotation_indexes(conn, docset.qualified)
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


def index_storage_table(sets: Sequence[DocSet]) -> None:
    print("\n7. Index storage per document, default layout\n")
    wrap(
        "Bytes per document of the rotation indexes on the documents table (btrees over"
        " nearsim_rotate(si, band's first bit), one per band; pg_total_relation_size of"
        " each): everything nearsim's index adds to the table. \"As loaded\": after the"
        " COPY into the enabled table, the btrees grown by its inserts (in key order at its"
        " commit, up to nearsim.insert_buffer at a time);"
        " \"built\": after REINDEX, as nearsim_enable builds them on a filled table."
        f" Target: <= {TARGET_INDEX_BYTES:g} bytes per document."
    )
    rows = []
    for d in sets:
        assert d.loaded is not None and d.reindexed is not None
        per = d.rows
        rows.append([
            d.label, str(d.bands), str(d.loaded.count), f"{d.loaded.per_doc(per):.1f}",
            f"{d.reindexed.per_doc(per):.1f}",
            f"{max(d.loaded.per_doc(per), d.reindexed.per_doc(per)) / TARGET_INDEX_BYTES:.2f}",
        ])
    print()
    print_table(["set", "bands", "indexes", "as loaded", "built",
                 f"worst vs {TARGET_INDEX_BYTES:g} B"],
                rows, "<>>>>>")
