"""Section 10 of the benchmarks: nearsim against the tools a user would otherwise pick.

On real text, in one run:

- **signatures**: what each tool computes per document before it can search,
  on the KJV chapters, one core: ``nearsim.simhash_many`` in this process,
  datasketch's ``MinHash`` (128 permutations over the same word 3-shingles;
  the usual MinHash-LSH set-up), and in the database ``simhash(body)`` against
  pg_trgm's trigram GIN index (``CREATE INDEX ... gin_trgm_ops``);
- **"is there something like this?"**: a table of N documents (3 to 8
  consecutive KJV verses, drawn with a fixed seed) with both indexes; each
  query is a document with a few words replaced, asked in the way each tool
  is meant to be asked: ``<prefix>_similar(text, 6)`` (the seeds' query
  through the rotation index, the query fingerprinted by the server),
  ``nearsim_similar_verified(tbl, text, 0.8, 's_r')`` (the recommended query), and
  pg_trgm's ``body % text`` with ``pg_trgm.similarity_threshold = 0.8``
  through its GIN index;
- **pgvector**: its ``bit(64)`` type with the Hamming operator ``<~>`` is
  measured only where the extension is available; Debian 12's archive has
  no package for it.
"""

from __future__ import annotations

import json
import random
import statistics
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import psycopg
from datasketch import MinHash
from psycopg import sql

import nearsim
from nearsim.client.samples import Chapter
from nearsim.core.measures import word_shingles

MB = 1_000_000
FULL_SIZES = (10_000, 100_000)
QUICK_SIZES = (1_000,)
FULL_QUERIES = 50
QUICK_QUERIES = 10
MINHASH_PERMUTATIONS = 128
TRIGRAM_THRESHOLD = 0.8
LOOKUP_BUDGET_SECONDS = 120.0  # per tool and size; at least MIN_LOOKUPS queries run
MIN_LOOKUPS = 5
SEED = 20261123

Connection = psycopg.Connection[tuple[Any, ...]]


@dataclass(frozen=True)
class Signatures:
    """Seconds to build each tool's per-document signatures over ``nbytes`` of text."""

    documents: int
    nbytes: int
    seconds: dict[str, float]

    def mb_per_second(self, name: str) -> float:
        return self.nbytes / MB / self.seconds[name]


@dataclass(frozen=True)
class Lookup:
    """Index build seconds and per-query latencies (seconds) of each tool for N documents."""

    documents: int
    nbytes: int
    build_seconds: dict[str, float]
    latencies: dict[str, list[float]]
    found: dict[str, float]  # mean rows per query
    asked: dict[str, int]  # queries timed (fewer than planned when the budget ran out)
    trigram_plan: str  # how the planner ran the pg_trgm query

    def p50_ms(self, name: str) -> float:
        return statistics.median(self.latencies[name]) * 1000

    def p95_ms(self, name: str) -> float:
        ordered = sorted(self.latencies[name])
        return ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))] * 1000


@dataclass(frozen=True)
class PeersResult:
    signatures: Signatures
    lookups: list[Lookup]
    pgvector: str  # what happened to the pgvector measurement


SIMHASH_CLIENT = "nearsim.simhash_many (client)"
MINHASH = f"datasketch MinHash, {MINHASH_PERMUTATIONS} permutations (client)"
SIMHASH_SERVER = "simhash(body) (server)"
TRIGRAM_INDEX = "pg_trgm GIN index (server)"
SIMILAR = "nearsim <prefix>_similar(text, 6)"
VERIFIED = "nearsim_similar_verified(tbl, text, 0.8, 's_r')"
TRIGRAM = f"pg_trgm body % text, threshold {TRIGRAM_THRESHOLD}"
NEARSIM_BUILD = "nearsim_enable (fingerprints + rotation index)"
TRIGRAM_BUILD = "pg_trgm CREATE INDEX ... gin_trgm_ops"


def minhash_signature(text: str) -> MinHash:
    signature = MinHash(num_perm=MINHASH_PERMUTATIONS)
    signature.update_batch([s.encode() for s in set(word_shingles(text))])
    return signature


def create_documents(conn: Connection, table: sql.Identifier, texts: Sequence[str]) -> None:
    """A table (id, body) holding ``texts``, vacuumed and analysed."""
    conn.execute(sql.SQL("CREATE TABLE {} (id int PRIMARY KEY, body text NOT NULL)").format(table))
    with conn.cursor().copy(sql.SQL("COPY {} (id, body) FROM STDIN").format(table)) as copy:
        for number, text in enumerate(texts):
            copy.write_row((number, text))
    conn.execute(sql.SQL("VACUUM ANALYZE {}").format(table))


def signatures(conn: Connection, schema: str, chapters: Sequence[Chapter]) -> Signatures:
    texts = [c.text for c in chapters]
    nbytes = sum(len(t.encode()) for t in texts)
    seconds: dict[str, float] = {}
    started = time.perf_counter()
    nearsim.simhash_many(texts)
    seconds[SIMHASH_CLIENT] = time.perf_counter() - started
    started = time.perf_counter()
    for text in texts:
        minhash_signature(text)
    seconds[MINHASH] = time.perf_counter() - started

    table = sql.Identifier(schema, "peer_chapters")
    create_documents(conn, table, texts)
    conn.execute(sql.SQL("SELECT count(simhash(body)) FROM {}").format(table))  # warm-up
    started = time.perf_counter()
    conn.execute(sql.SQL("SELECT count(simhash(body)) FROM {}").format(table))
    seconds[SIMHASH_SERVER] = time.perf_counter() - started
    started = time.perf_counter()
    conn.execute(sql.SQL("CREATE INDEX ON {} USING gin (body gin_trgm_ops)").format(table))
    seconds[TRIGRAM_INDEX] = time.perf_counter() - started
    return Signatures(len(texts), nbytes, seconds)


def verse_documents(chapters: Sequence[Chapter], count: int, rng: random.Random) -> list[str]:
    """``count`` documents of 3 to 8 consecutive verses of a random chapter."""
    verses = [c.text.splitlines() for c in chapters]
    documents: list[str] = []
    while len(documents) < count:
        lines = verses[rng.randrange(len(verses))]
        length = rng.randint(3, 8)
        if len(lines) < length:
            continue
        start = rng.randint(0, len(lines) - length)
        documents.append("\n".join(lines[start : start + length]))
    return documents


def edited(text: str, rng: random.Random) -> str:
    """``text`` with one to three words replaced: a revised draft of it."""
    words = text.split(" ")
    for _ in range(rng.randint(1, 3)):
        words[rng.randrange(len(words))] = rng.choice(("behold", "verily", "thus", "lo"))
    return " ".join(words)


def lookup(conn: Connection, schema: str, chapters: Sequence[Chapter], size: int,
           queries: int) -> Lookup:  # fmt: skip
    rng = random.Random(SEED + size)
    texts = verse_documents(chapters, size, rng)
    name = f"peer_docs_{size}"
    table = sql.Identifier(schema, name)
    qualified = f"{schema}.{name}"
    create_documents(conn, table, texts)
    build: dict[str, float] = {}
    started = time.perf_counter()
    conn.execute("SELECT nearsim_enable(%s::regclass, 'body', prefix => %s)",
                 [qualified, name])  # fmt: skip
    build[NEARSIM_BUILD] = time.perf_counter() - started
    started = time.perf_counter()
    conn.execute(sql.SQL("CREATE INDEX ON {} USING gin (body gin_trgm_ops)").format(table))
    build[TRIGRAM_BUILD] = time.perf_counter() - started
    conn.execute(sql.SQL("VACUUM ANALYZE {}").format(table))
    conn.execute("SELECT set_config('pg_trgm.similarity_threshold', %s, false)",
                 [str(TRIGRAM_THRESHOLD)])  # fmt: skip

    similar = sql.Identifier(schema, f"{name}_similar")
    statements = {
        SIMILAR: sql.SQL("SELECT (doc).id FROM {}(%(q)s::text, 6)").format(similar),
        VERIFIED: sql.SQL(
            "SELECT key FROM nearsim_similar_verified({}::regclass, %(q)s, 0.8, 's_r')"
        ).format(sql.Literal(qualified)),
        TRIGRAM: sql.SQL("SELECT id FROM {} WHERE body OPERATOR(public.%%) %(q)s").format(table),
    }
    asked = [edited(texts[rng.randrange(size)], rng) for _ in range(queries)]
    latencies: dict[str, list[float]] = {}
    found: dict[str, float] = {}
    timed: dict[str, int] = {}
    for label, statement in statements.items():
        conn.execute(statement, {"q": asked[0]}).fetchall()  # warm-up
        seconds: list[float] = []
        rows = []
        for query in asked:
            # A slow tool gets fewer queries rather than hours: its latency
            # is clear after a few.
            if len(seconds) >= MIN_LOOKUPS and sum(seconds) > LOOKUP_BUDGET_SECONDS:
                break
            started = time.perf_counter()
            rows.append(len(conn.execute(statement, {"q": query}).fetchall()))
            seconds.append(time.perf_counter() - started)
        latencies[label] = seconds
        found[label] = sum(rows) / len(rows)
        timed[label] = len(seconds)
    nbytes = sum(len(t.encode()) for t in texts)
    plan = conn.execute(sql.SQL("EXPLAIN (FORMAT JSON) {}").format(statements[TRIGRAM]),
                        {"q": asked[0]}).fetchone()  # fmt: skip
    nodes = json.dumps(plan[0] if plan else "")
    trigram_plan = "GIN index" if "Bitmap Index Scan" in nodes else "sequential scan"
    return Lookup(size, nbytes, build, latencies, found, timed, trigram_plan)


def pgvector_status(conn: Connection) -> str:
    row = conn.execute("SELECT default_version FROM pg_available_extensions"
                       " WHERE name = 'vector'").fetchone()  # fmt: skip
    if row is None:
        return ("not measured: this server has no pgvector, and Debian 12's"
                " archive has no package for it (it comes from the PostgreSQL project's own"
                " apt repository)")
    return (f"available (version {row[0]}) but not measured: its bit(64) Hamming search is a"
            " sequential scan like hamming(), without an index for radius queries")


def run(conn: Connection, schema: str, chapters: Sequence[Chapter], quick: bool) -> PeersResult:
    sizes = QUICK_SIZES if quick else FULL_SIZES
    queries = QUICK_QUERIES if quick else FULL_QUERIES
    print(f"\n10. Peers: signature building, and similar-text lookups in"
          f" {' and '.join(f'{n:,}' for n in sizes)} documents, one core\n")
    conn.execute("CREATE EXTENSION IF NOT EXISTS pg_trgm SCHEMA public")
    built = signatures(conn, schema, chapters)
    print(f"   Signatures of the {built.documents:,} KJV chapters ({built.nbytes / MB:.1f} MB):\n")
    width = max(map(len, built.seconds))
    for name in built.seconds:
        print(f"   {name:<{width}}  {built.seconds[name]:7.2f} s  "
              f"{built.mb_per_second(name):6.1f} MB/s")
    lookups = [lookup(conn, schema, chapters, size, queries) for size in sizes]
    print()
    print(f"   Lookups (up to {queries} queries: a document with 1-3 words replaced; a tool gets"
          f" fewer once {LOOKUP_BUDGET_SECONDS:.0f} s are spent); p50 / p95 ms, mean rows found,"
          " queries; index build s:\n")
    for result in lookups:
        for name in result.latencies:
            print(f"   {result.documents:>9,}  {name:<46} {result.p50_ms(name):8.2f}"
                  f" {result.p95_ms(name):8.2f}  {result.found[name]:6.1f}"
                  f"  {result.asked[name]:3d}")
        for name, seconds in result.build_seconds.items():
            print(f"   {result.documents:>9,}  {name:<46} {seconds:8.2f} s")
        print(f"   {result.documents:>9,}  the pg_trgm query's plan: {result.trigram_plan}")
    status = pgvector_status(conn)
    print(f"\n   pgvector: {status}.")
    return PeersResult(built, lookups, status)
