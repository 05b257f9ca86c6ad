"""The comparison with pgvector's HNSW: its scoring, its page section, and its
refusal to run without pgvector (which nearsim does not depend on)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
from vector_extension import pgvector_available

from benchmarks import hnsw

ROOT = Path(__file__).resolve().parents[2]


def test_recall_counts_rows_as_near_as_the_true_last_one() -> None:
    exact = [(i, d) for i, d in zip(range(1, 11), [0, 3, 5, 5, 6, 7, 7, 8, 9, 9], strict=True)]
    assert hnsw.recall(exact, exact) == 1.0
    # another row at distance 9 instead of the 10th: just as near, so as good
    assert hnsw.recall([*exact[:9], (77, 9)], exact) == 1.0
    # two rows farther than the true 10th
    assert hnsw.recall([*exact[:8], (77, 10), (78, 12)], exact) == 0.8
    assert hnsw.recall([], exact) == 0.0


def test_exact_nearest_orders_by_distance_then_id() -> None:
    values = np.array([0b1111, 0b0001, 0b0011, 0b0001, 0, *(0x7F00 | i for i in range(24))],
                      dtype=np.int64)

    class Set:
        fingerprints = values
        rows = len(values)

    nearest = hnsw.exact_nearest(Set(), 0)  # type: ignore[arg-type]
    assert nearest[:5] == [(5, 0), (2, 1), (4, 1), (3, 2), (1, 4)]
    assert len(nearest) == hnsw.WANTED
    assert [d for _, d in nearest] == sorted(d for _, d in nearest)


def test_the_section_shows_both_sides_and_the_targets() -> None:
    result = hnsw.SetResult("uniform 1M", 1_000_000, 67_000_000, 310_000_000, 222.0, 7.2, 7.9,
                            {40: (2.3, 2.9, 0.519), 100: (4.4, 4.9, 0.712),
                             400: (18.7, 20.1, 0.973)})
    summary = hnsw.summary_rows([result])
    assert summary[0][-1] == "no" and "recall 0.519" in summary[0][2]
    assert "ef_search 400" in summary[1][2]  # the least ef_search with recall >= 0.95
    page = hnsw.hnsw_section({
        "seconds": 414.0, "rows": 1_000_000, "queries": 100, "nearsim": "0.4.0",
        "postgresql": "15", "pgvector": "0.8.6", "cpu": "cpu", "cores": 2, "summary": summary,
        "sets": [{**result.__dict__, "hnsw": {str(k): v for k, v in result.hnsw.items()}}]})
    assert "pgvector 0.8.6" in page and "18.7 / 20.1 (0.973)" in page and "67 / 310" in page
    assert "No results" in hnsw.hnsw_section(None)


def test_the_build_memory_holds_the_graph_at_every_size() -> None:
    # pgvector's graph takes about 650 bytes a row; a build whose graph outgrows
    # maintenance_work_mem goes on on disk, many times slower
    assert hnsw.build_memory(1_000) == "2GB"
    assert hnsw.build_memory(1_000_000) == "2GB"
    assert hnsw.build_memory(10_000_000) == "10GB"
    for rows in (3_000_000, 10_000_000, 25_000_000):
        assert int(hnsw.build_memory(rows).removesuffix("GB")) * 2**30 >= 650 * rows


def test_without_pgvector_it_says_so_and_stops(database: str) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "benchmarks.hnsw", "--dsn", database, "--rows", "1000",
         "--queries", "1"], capture_output=True, text=True, timeout=600, cwd=ROOT, check=False)
    if not pgvector_available(database):
        assert result.returncode == 2
        assert result.stderr.startswith("benchmarks.hnsw: pgvector is not installed in this"
                                        " server: build it from its source")
        # --without-hnsw is the concurrency benchmark's; this one has no such option
        assert "--without-hnsw" not in result.stderr
        assert "Traceback" not in result.stderr and result.stdout == ""
    else:  # a server with pgvector: the small run completes, every answer checked
        assert result.returncode == 0, result.stderr
        assert "ORDER BY hamming() LIMIT 10" in result.stdout
