"""The lookups of benchmarks/verified.py: ``nearsim_similar_verified`` on the largest table.

The texts of documents drawn at random asked as a prepared statement after
one warm-up query, each under a ``statement_timeout``, at most a budget of
seconds per threshold, the answers scored against the truth; first with the
candidates of the rotation index within the calibrated radius, then with
those of the sketch index (:func:`sketch_index`).
"""

from __future__ import annotations

import random
import time
from collections.abc import Mapping, Sequence
from dataclasses import asdict
from typing import Any

import numpy as np
import psycopg
from psycopg import sql

from .common import log, timer
from .scoring import THRESHOLDS, Scores
from .truth import Truth
from .verified_sets import set_timeout

LOOKUPS = 200
LOOKUP_TIMEOUT_SECONDS = 10.0
LOOKUP_BUDGET_SECONDS = 180.0
LOOKUP_SEED = 1


def asked_positions(documents: int, count: int) -> list[int]:
    """The positions of the ``count`` documents :func:`lookups` asks, drawn at random."""
    return random.Random(LOOKUP_SEED).sample(range(documents), min(count, documents))


def lookups(conn: psycopg.Connection, qualified: str, texts: Sequence[str] | Mapping[int, str],
            truth: Truth, count: int, timeout: float, budget: float,
            path: str) -> list[dict[str, Any]]:  # fmt: skip
    """``nearsim_similar_verified`` for the texts of ``count`` random documents of the
    ``truth.documents``; ``texts`` needs to hold only those of :func:`asked_positions`.

    ``path`` names where the candidates come from (the table's indexes decide).
    """
    documents = truth.documents
    asked = asked_positions(documents, count)
    statement = ("SELECT key::integer FROM nearsim_similar_verified(%s::regclass, %s, %s,"
                 " 's_r')")
    results = []
    for t in THRESHOLDS:
        wanted = np.array(asked, dtype=np.int64)
        chosen = (truth.s_r >= t) & (np.isin(truth.first, wanted) | np.isin(truth.second, wanted))
        partners: dict[int, set[int]] = {q: set() for q in asked}
        for a, b in zip(truth.first[chosen].tolist(), truth.second[chosen].tolist(),
                        strict=True):
            if a in partners:
                partners[a].add(b)
            if b in partners:
                partners[b].add(a)
        set_timeout(conn, timeout)
        seconds: list[float] = []
        over = 0
        found = expected = hit = 0
        started = time.perf_counter()
        try:
            try:  # a warm-up: the first call of a session imports what the search needs
                conn.execute(statement, (qualified, texts[asked[0]], t), prepare=True).fetchall()
            except psycopg.errors.QueryCanceled:
                pass
            for query in asked:
                if time.perf_counter() - started > budget:
                    break
                with timer() as elapsed:
                    try:
                        rows = conn.execute(statement, (qualified, texts[query], t),
                                            prepare=True).fetchall()
                    except psycopg.errors.QueryCanceled:
                        rows = None
                seconds.append(elapsed())
                if rows is None:
                    over += 1
                    continue
                keys = {r[0] for r in rows} - {query}
                found += len(keys)
                expected += len(partners[query])
                hit += len(keys & partners[query])
        finally:
            set_timeout(conn, None)
        answered = Scores.of_counts(found, expected, hit)
        milliseconds = np.array(seconds) * 1000 if seconds else np.array([np.nan])
        results.append({
            "threshold": t, "path": path, "documents": documents, "asked": len(asked),
            "timed": len(seconds),
            "over_timeout": over, "timeout_seconds": timeout, "budget_seconds": budget,
            "p50_ms": float(np.percentile(milliseconds, 50)),
            "p90_ms": float(np.percentile(milliseconds, 90)),
            "mean_found": found / max(1, len(seconds) - over),
            "answers": asdict(answered),
        })
        log(f"  lookups at {t} ({path}): {len(seconds)} timed,"
            f" p50 {results[-1]['p50_ms']:.2f} ms")
    return results


RADIUS_PATH = "rotation index, calibrated radius"
SKETCH_PATH = "sketch index"


def sketch_index(conn: psycopg.Connection, schema: str, table: str,
                 documents: int) -> dict[str, float]:
    """The sketch index of the table (GIN over nearsim_sketch(body)): seconds and size."""
    index = sql.Identifier(schema, f"{table}_sketch")
    with timer() as elapsed:
        conn.execute(sql.SQL("CREATE INDEX {} ON {} USING gin (nearsim_sketch(body))").format(
            sql.Identifier(f"{table}_sketch"), sql.Identifier(schema, table)))
        conn.execute(sql.SQL("ANALYZE {}").format(sql.Identifier(schema, table)))
    seconds = elapsed()
    row = conn.execute("SELECT pg_relation_size(%s::regclass)",
                       (index.as_string(conn),)).fetchone()
    size = float(row[0]) if row else 0.0
    log(f"  sketch index: {seconds:.1f} s, {size / documents:.0f} bytes per document")
    return {"seconds": seconds, "bytes_per_document": size / documents}
