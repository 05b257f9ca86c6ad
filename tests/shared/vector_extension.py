"""Whether the test server has pgvector: the benchmarks that compare with its HNSW
need it, and it is built by hand (benchmarks/hnsw.py says how), so a fresh machine has
none and those tests check the benchmarks' refusal instead."""

from __future__ import annotations

import psycopg


def pgvector_available(database: str) -> bool:
    with psycopg.connect(database) as conn:
        return conn.execute("SELECT 1 FROM pg_available_extensions WHERE name = 'vector'"
                            ).fetchone() is not None
