"""Verified search at a million documents (benchmarks/verified_million.py): a small run of
the whole, its truth against the exact pairs in Python, and its section of the page."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import psycopg
import pytest

from benchmarks import docs, verified_million
from benchmarks.corpusfile import read_texts
from benchmarks.truth import similar_pairs
from benchmarks.verified_lookups import RADIUS_PATH, SKETCH_PATH

DOCUMENTS = 400
LOOKUPS = 8


@pytest.fixture(scope="module")
def small_run(database: str, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict]:
    directory = tmp_path_factory.mktemp("verified-million")
    results = directory / "verified_million.json"
    status = verified_million.main([
        "--dsn", database, "--documents", str(DOCUMENTS), "--lookups", str(LOOKUPS),
        "--work-dir", str(directory / "work"), "--results", str(results)])  # fmt: skip
    assert status == 0
    return directory, json.loads(results.read_text(encoding="utf-8"))


def test_a_small_run_asks_both_paths_at_both_thresholds(database: str,
                                                        small_run: tuple[Path, dict]) -> None:
    _, results = small_run
    assert [(lk["path"], lk["threshold"]) for lk in results["lookups"]] == [
        (RADIUS_PATH, 0.8), (RADIUS_PATH, 0.5), (SKETCH_PATH, 0.8), (SKETCH_PATH, 0.5)]
    for lookup in results["lookups"]:
        assert lookup["documents"] == DOCUMENTS
        assert lookup["timed"] == LOOKUPS and lookup["over_timeout"] == 0
        assert lookup["answers"]["precision"] == 1.0  # every answer is measured
        assert 0.0 < lookup["p50_ms"] <= lookup["p90_ms"]
    join = results["exact_join"]
    assert join["asked_pairs"] > 0 and join["shingles"] > 100_000
    assert join["seconds"] > 0
    assert set(results["load"]["seconds"]) == {"COPY", "nearsim_enable", "ANALYZE"}
    assert [row[4] for row in results["summary"]] == ["<= 3 / <= 10 ms"] * 4
    with psycopg.connect(database) as conn:
        left = conn.execute("SELECT count(*) FROM pg_namespace"
                            " WHERE nspname LIKE 'nearsim_quality_%'").fetchone()
    assert left == (0,), "the scratch schema is dropped"


def test_the_truth_is_the_exact_pairs_of_the_documents_asked(database: str,
                                                             small_run: tuple[Path, dict]) -> None:
    """What the lookups are scored by: the pairs of the asked documents at S_R >= 0.5,
    the same as Python's exact S_R of every pair of the corpus gives."""
    directory, _ = small_run
    corpus = next((directory / "work").glob("corpus-*.copy"))
    texts = list(read_texts(corpus, DOCUMENTS))
    expected = similar_pairs(texts, keep=0.5)
    asked = verified_million.asked_positions(DOCUMENTS, LOOKUPS)
    with psycopg.connect(database, autocommit=True) as conn:
        conn.execute("CREATE EXTENSION IF NOT EXISTS nearsim CASCADE")
        conn.execute("DROP TABLE IF EXISTS million_truth")
        conn.execute("CREATE TABLE million_truth (id integer PRIMARY KEY, body text, si bigint)")
        with conn.cursor().copy("COPY million_truth (id, body) FROM STDIN") as copy:
            for position, text in enumerate(texts):
                copy.write_row((position, text))
        truth, info = verified_million.exact_join(conn, "public.million_truth", DOCUMENTS,
                                                  asked)  # fmt: skip
        conn.execute("DROP TABLE million_truth")
    wanted = np.isin(expected.first, asked) | np.isin(expected.second, asked)
    expected_pairs = sorted(zip(expected.first[wanted].tolist(), expected.second[wanted].tolist(),
                                strict=True))  # fmt: skip
    found_pairs = sorted((min(a, b), max(a, b))
                         for a, b in zip(truth.first.tolist(), truth.second.tolist(), strict=True))
    assert found_pairs == expected_pairs and expected_pairs
    by_pair = {(min(a, b), max(a, b)): s for a, b, s in zip(
        truth.first.tolist(), truth.second.tolist(), truth.s_r.tolist(), strict=True)}
    for a, b, s in zip(expected.first[wanted].tolist(), expected.second[wanted].tolist(),
                       expected.s_r[wanted].tolist(), strict=True):  # fmt: skip
        assert by_pair[a, b] == pytest.approx(s)
    assert info["asked_pairs"] == len(expected_pairs)


def test_the_page_shows_the_run_and_its_misses(small_run: tuple[Path, dict]) -> None:
    directory, results = small_run
    page, loaded = docs.verified_million_page(directory)
    assert loaded == results
    assert "Written by `make bench-verified-1m`" in page
    assert page.count("| nearsim_similar_verified p50 / p90, 400 documents, S_R >= ") == 4
    assert "No results of `make bench-verified-1m`" in docs.verified_million_page(
        directory / "none")[0]
    missed = docs.missed_section({"summary": []}, verified_million=loaded)
    misses = sum(row[5] == "no" for row in loaded["summary"])
    listed = [line for line in missed.splitlines() if line.startswith("- ")]
    assert len(listed) == misses if misses else missed.startswith("Every target")
