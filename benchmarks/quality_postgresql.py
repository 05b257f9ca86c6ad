"""nearsim's verified search and pg_trgm's self-join in PostgreSQL, for benchmarks/quality.py.

Verified search loads the texts with the client's fingerprints into a table,
enables nearsim and runs ``nearsim_pairs_verified`` at each threshold.
pg_trgm indexes a subset of whole document families (:func:`family_subset`)
and runs one self-join at the lowest similarity of its sweep, on every core;
the sweep then scores each trigram similarity threshold against the truth
within the subset.
"""

from __future__ import annotations

import os
import random
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np
import psycopg
from numpy.typing import NDArray
from psycopg import sql

from .common import timer
from .corpus import Document
from .scoring import THRESHOLDS, Scores, score
from .truth import Truth, pair_codes

Int64s = NDArray[np.int64]

TRIGRAM_SWEEP = tuple(round(0.5 + 0.05 * k, 2) for k in range(10))  # 0.50 .. 0.95
TRIGRAM_BUDGET_SECONDS = 600
TRIGRAM_SUBSET = {"small": 160, "full": 1000}
"""Documents in the pg_trgm subset of each corpus (whole families, drawn at random).

pg_trgm's recheck recomputes the trigrams of both texts for every candidate,
about a millisecond for two 3 KB texts, and on prose nearly every pair is a
candidate: the self-join of the 400-document small corpus alone takes over a
minute.  The join runs on every core, one share of the outer rows each."""
SUBSET_SEED = 1


Verified = tuple[Int64s, float, int]
"""Pair codes found by verified search, its seconds and its radius."""


def verified_search(conn: psycopg.Connection, schema: str, texts: Sequence[str],
                    present: Int64s, prints: Int64s,
                    thresholds: Sequence[float]) -> tuple[float, dict[float, Verified]]:
    """Load the texts (fingerprints precomputed), enable nearsim, run verified search.

    Returns the load seconds and, per threshold, (pair codes, seconds, radius).
    """
    table = sql.Identifier(schema, "docs")
    fingerprint = dict(zip(present.tolist(), prints.tolist(), strict=True))
    with timer() as elapsed:
        conn.execute(sql.SQL("CREATE TABLE {} (id integer PRIMARY KEY, body text NOT NULL,"
                             " si bigint)").format(table))
        # Declare the profile of the fingerprints supplied, so nothing is recomputed.
        conn.execute("SET nearsim.profile = 'default/1'")
        with conn.cursor() as cursor, cursor.copy(
            sql.SQL("COPY {} (id, body, si) FROM STDIN").format(table)
        ) as copy:
            for position, text in enumerate(texts):
                copy.write_row((position, text, fingerprint.get(position)))
        conn.execute("SELECT nearsim_enable(%s::regclass, 'body')", (f"{schema}.docs",))
        conn.execute(sql.SQL("ANALYZE {}").format(table))
    load_seconds = elapsed()
    results: dict[float, Verified] = {}
    documents = len(texts)
    for threshold in thresholds:
        radius = conn.execute("SELECT nearsim_radius(%s)", (threshold,)).fetchone()
        assert radius is not None
        with timer() as elapsed:
            rows = conn.execute(
                "SELECT a::integer, b::integer FROM nearsim_pairs_verified(%s::regclass,"
                " min_similarity => %s, measure => 's_r')", (f"{schema}.docs", threshold),
            ).fetchall()
        first = np.array([r[0] for r in rows], dtype=np.int64)
        second = np.array([r[1] for r in rows], dtype=np.int64)
        results[threshold] = (np.unique(pair_codes(first, second, documents)), elapsed(),
                              int(radius[0]))
    return load_seconds, results


def trigram_pairs(dsn: str, conn: psycopg.Connection, schema: str, texts: Sequence[str],
                  positions: Sequence[int], lowest: float,
                  budget_seconds: float) -> tuple[float, float, list[tuple[int, int, float]]]:
    """pg_trgm: (index seconds, join seconds, pairs (position, position, similarity)).

    One self-join at the lowest threshold of the sweep returns every pair
    that any higher threshold would, with its similarity.
    """
    installed = conn.execute(
        "SELECT extnamespace::regnamespace::text FROM pg_extension WHERE extname = 'pg_trgm'"
    ).fetchone()
    if installed is None:  # created in the scratch schema, so it goes with it
        conn.execute(sql.SQL("CREATE EXTENSION pg_trgm SCHEMA {}").format(
            sql.Identifier(schema)))
        trgm_schema = schema
    else:
        trgm_schema = installed[0]
    conn.execute(sql.SQL("SET search_path TO {}, {}, public").format(
        sql.Identifier(schema), sql.Identifier(trgm_schema)))
    with timer() as index_time:
        conn.execute("CREATE TABLE trgm_docs (id integer PRIMARY KEY, body text NOT NULL)")
        with conn.cursor() as cursor, cursor.copy(
            "COPY trgm_docs (id, body) FROM STDIN"
        ) as copy:
            for position in positions:
                copy.write_row((position, texts[position]))
        conn.execute("CREATE INDEX ON trgm_docs USING gin (body gin_trgm_ops)")
        conn.execute("ANALYZE trgm_docs")
    workers = os.cpu_count() or 1
    search_path = sql.SQL("SET search_path TO {}, {}, public").format(
        sql.Identifier(schema), sql.Identifier(trgm_schema))

    def share(worker: int) -> list[tuple[Any, ...]]:
        with psycopg.connect(dsn, autocommit=True) as own:
            own.execute(search_path)
            own.execute(f"SET pg_trgm.similarity_threshold = {float(lowest)}")
            own.execute(f"SET statement_timeout = {int(budget_seconds * 1000)}")
            return own.execute(
                "SELECT a.id, b.id, similarity(a.body, b.body) FROM trgm_docs a"
                " JOIN trgm_docs b ON a.body %% b.body AND a.id < b.id"
                " WHERE a.id %% %s = %s", (workers, worker),
            ).fetchall()

    with timer() as join_time, ThreadPoolExecutor(workers) as pool:
        rows = [row for part in pool.map(share, range(workers)) for row in part]
    conn.execute("DROP TABLE trgm_docs")
    conn.execute("RESET search_path")
    return index_time(), join_time(), [(int(a), int(b), float(s)) for a, b, s in rows]


def family_subset(documents: Sequence[Document], size: int, seed: int) -> list[int]:
    """Positions of whole families (an original and everything derived from it),
    drawn at random until at least ``size`` documents, sorted."""
    families: dict[str, list[int]] = {}
    for position, document in enumerate(documents):
        families.setdefault(document.origin or document.id, []).append(position)
    names = sorted(families)
    random.Random(seed).shuffle(names)
    chosen: list[int] = []
    for name in names:
        if len(chosen) >= size:
            break
        chosen.extend(families[name])
    return sorted(chosen)


def trigram_sweep(pairs: Sequence[tuple[int, int, float]], truth: Truth,
                  positions: Sequence[int], documents: int) -> dict[float, dict[float, Scores]]:
    """Scores of the trigram threshold sweep, per evaluated S_R threshold,
    against the truth restricted to ``positions``."""
    inside = np.zeros(documents, dtype=np.bool_)
    inside[np.asarray(positions, dtype=np.int64)] = True
    keep = inside[truth.first] & inside[truth.second]
    codes = pair_codes(np.array([p[0] for p in pairs], dtype=np.int64),
                       np.array([p[1] for p in pairs], dtype=np.int64), documents)
    similarity = np.array([p[2] for p in pairs], dtype=np.float64)
    sweep: dict[float, dict[float, Scores]] = {}
    for threshold in THRESHOLDS:
        chosen = keep & (truth.s_r >= threshold)
        positives = np.sort(pair_codes(truth.first[chosen], truth.second[chosen], documents))
        sweep[threshold] = {
            t: score(np.sort(codes[similarity >= t]), positives) for t in TRIGRAM_SWEEP
        }
    return sweep


def best_trigram_threshold(sweep: dict[float, Scores]) -> float:
    """The trigram similarity threshold of the sweep with the best F1 (the lowest on ties)."""
    return max(sorted(sweep), key=lambda similarity: sweep[similarity].f1)
