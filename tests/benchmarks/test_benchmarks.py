"""The benchmark harness runs and its own cross-checks pass (no timing asserted)."""

from __future__ import annotations

import json
import secrets
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import psycopg
import pytest
from psycopg import sql

# The repository root, the working directory of `python -m pytest tests`,
# where the benchmarks package is importable.
from benchmarks import common, docsets, search

ROOT = Path(__file__).resolve().parents[2]


def test_quick_benchmark_run(database: str, tmp_path: Path) -> None:
    results = tmp_path / "results"
    results.mkdir()
    result = subprocess.run(
        [sys.executable, "-m", "benchmarks.run", "--quick", "--dsn", database,
         "--results", str(results / "run.json")],
        capture_output=True, text=True, timeout=300, cwd=ROOT,
    )
    assert result.returncode == 0, result.stderr
    out = result.stdout
    # Section 10 measured the peers on the same machine.
    assert "10. Peers: signature building" in out
    for row in ("datasketch MinHash, 128 permutations (client)", "pg_trgm GIN index (server)",
                "nearsim <prefix>_similar(text, 6)",
                "nearsim_similar_verified(tbl, text, 0.8, 's_r')",
                "pg_trgm body % text, threshold 0.8", "the pg_trgm query's plan:", "pgvector: "):
        assert row in out, row
    assert "simhash in database against the PL/Python reference, KJV chapters, MB/s" in out
    # The page and its figures come from the JSON alone.
    run = json.loads((results / "run.json").read_text(encoding="utf-8"))
    assert run["mode"] == "quick" and run["peers"]["lookups"][0]["documents"] == 1000
    docs = tmp_path / "docs"
    report = subprocess.run(
        [sys.executable, "-m", "benchmarks.docs", str(results), str(docs)],
        capture_output=True, text=True, timeout=120, cwd=ROOT,
    )
    assert report.returncode == 0, report.stderr
    page = (docs / "BENCHMARKS.md").read_text(encoding="utf-8")
    for heading in ("## Detection quality", "### Radius search: rotation index against scans",
                    "### Against the peers", "## Where targets are missed"):
        assert heading in page
    for figure in ("bench-search-latency.png", "bench-lookup-latency.png",
                   "bench-signatures.png"):
        assert f"]({figure})" in page
        assert (docs / figure).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        assert (docs / figure).stat().st_size > 10_000
    # The run checks that server and client fingerprints agree and that the
    # C and pure-SQL filters count the same rows; its summary names each target.
    assert "simhash in database, KJV chapters, MB/s per core" in out
    assert "hamming() <= 6 scan of" in out
    assert "Both queries count" in out
    # Every section of the rotation index ran, and its checks passed.
    for heading in ("4. Search latency", "5. Band layouts", "6. All pairs",
                    "7. Index storage", "8. Writes"):
        assert heading in out
    assert "Every query gave the same rows in all six ways." in out
    assert "index search k=6, uniform 2k, generic plan, p50 ms" in out
    assert "index search k=6, text-like 2k, custom plan, p50 ms" in out
    assert "nearsim_pairs k=6, text-like 2k, s" in out
    assert "not installed" not in out and "timed out" not in out
    assert "index storage, uniform 2k, bytes/doc as loaded" in out
    assert "single-row UPDATEs, enabled table, rows/s" in out
    # Section 9 loaded the corpus three ways and its checks passed.
    assert "9. Bulk loading: " in out
    assert "Both loaded tables hold every file, the client's fingerprints equal the server's" in out
    for row in ("nearsim-load, 3 MB, MB/s", "nearsim-load again (all unchanged), 3 MB, MB/s",
                "nearsim-load --server-side, 3 MB, MB/s"):
        assert row in out


def test_check_same_names_the_difference() -> None:
    same = frozenset({(1, 0), (2, 3)})
    search.check_same("k = 6", {"numpy": same, "index": same, "hamming()": same})
    difference = r"index returned 1 rows.*only in numpy: \[\(2, 3\)\]"
    with pytest.raises(common.BenchError, match=difference):
        search.check_same("k = 6", {"numpy": same, "hamming()": same,
                                    "index": frozenset({(1, 0)})})


def test_flip_masks_flip_distinct_bits() -> None:
    rng = np.random.default_rng(7)
    flips = rng.integers(0, 9, size=1000)
    masks = docsets.flip_masks(rng, flips)
    assert (docsets.popcount(masks) == flips).all()


@pytest.fixture
def scratch(database: str) -> Iterator[tuple[psycopg.Connection, str]]:
    conn = common.connect(database)
    conn.prepare_threshold = common.PREPARE_WHEN_ASKED
    schema = f"bench_test_{secrets.token_hex(4)}"
    conn.execute(sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(schema)))
    try:
        yield conn, schema
    finally:
        conn.execute(sql.SQL("DROP SCHEMA {} CASCADE").format(sql.Identifier(schema)))
        conn.close()


def test_search_timing_stops_when_the_index_search_misses_a_row(
        scratch: tuple[psycopg.Connection, str]) -> None:
    conn, schema = scratch
    rng = np.random.default_rng(11)
    fingerprints = docsets.random_fingerprints(rng, 500)
    queries = fingerprints[:3].copy()  # rows 1, 2 and 3 themselves
    docset = docsets.make_docset(conn, schema, docsets.UNIFORM, fingerprints, queries, "test")
    statements = search.search_statements(docset, 6)
    expected = search.expected_matches(fingerprints, queries, 6)
    seconds, found = search.time_searches(conn, docset, statements, expected, 6)
    assert found == [1, 1, 1] and all(len(s) == 3 for s in seconds.values())

    conn.execute(sql.SQL("DELETE FROM {} WHERE id = 2").format(docset.table))
    missed = r"query 1 .*: index, (generic|custom) plan returned 0 rows"
    with pytest.raises(common.BenchError, match=missed):
        search.time_searches(conn, docset, statements, expected, 6)
