"""The Spark benchmark's section of docs/BENCHMARKS.md, from the JSON a run writes."""

from __future__ import annotations

from typing import Any

from benchmarks.spark import added_sizes
from benchmarks.spark_report import BILLION, band_model, spark_section


def run_results(sizes: bool = True, corpus: bool = True) -> dict[str, Any]:
    """Results in the shape ``python -m benchmarks.spark --results`` writes."""
    masters = ["local[1]", "local[2]"]
    results: dict[str, Any] = {
        "cpu": "a test CPU", "cores": 2, "python": "3.11", "postgresql": "15.20",
        "nearsim": "0.4.0", "spark": "3.5.9", "masters": masters, "shuffle_partitions": 16,
        "driver_memory": "3g", "seconds": 1234.0, "sizes": [], "corpus": None, "model": {},
    }  # fmt: skip
    if sizes:
        results["sizes"].append({
            "rows": 1_000_000, "described": "text-like", "distinct": 818_000,
            "postgresql": {"3": {"pairs": 53_822_640, "seconds": 10.0},
                           "6": {"pairs": 57_909_890, "seconds": 19.0}},
            "spark": [{"master": master, "k": k, "pairs": pairs, "seconds": seconds,
                       "shuffle_bytes": 428 * 1_000_000 * (k // 3),
                       "shuffle_bytes_per_doc": 428.0 * (k // 3), "groups_seconds": seconds - 10,
                       "groups_shuffle_bytes": 0, "candidates": 0,
                       "candidates_per_doc": 5.33 * (k // 3)}
                      for master in masters
                      for k, pairs, seconds in ((3, 53_822_640, 48.8), (6, 57_909_890, 343.3))],
        })  # fmt: skip
    if corpus:
        results["corpus"] = {
            "size": "full", "seed": 3, "documents": 20_500, "bytes": 87_673_879,
            "originals": 2_829, "distinct": 20_000, "client_seconds": 2.0,
            "postgresql": {"simhash_seconds": 0.7, "load_seconds": 1.0, "enable_seconds": 2.0,
                           "pairs": {"3": {"pairs": 33_000, "seconds": 0.1},
                                     "6": {"pairs": 36_133, "seconds": 0.1}},
                           "verified": {"0.8": {"pairs": 53_387, "seconds": 3.6},
                                        "0.5": {"pairs": 68_710, "seconds": 4.1}}},
            "spark": [
                {"master": master, "question": "fingerprints", "result": 20_500, "seconds": 4.0,
                 "shuffle_bytes": 0, "shuffle_bytes_per_doc": 0.0, "candidates_per_doc": None,
                 "equal": True} for master in masters
            ] + [
                {"master": master, "question": "pairs", "k": k, "result": pairs, "seconds": 9.0,
                 "shuffle_bytes": 1, "shuffle_bytes_per_doc": 300.0, "candidates": 1,
                 "candidates_per_doc": 1.5, "equal": True}
                for master in masters for k, pairs in ((3, 33_000), (6, 36_133))
            ] + [
                {"master": master, "question": "verified", "min_similarity": s, "result": pairs,
                 "seconds": 60.0, "shuffle_bytes": 1, "shuffle_bytes_per_doc": 20_000.0,
                 "candidates": 1, "candidates_per_doc": 130.0, "equal": True}
                for master in masters for s, pairs in ((0.8, 53_387), (0.5, 68_710))
            ],
        }  # fmt: skip
    distinct = 818_000 if sizes else 20_000
    results["model"] = {str(k): {"measured": band_model(distinct, k),
                                 "billion": band_model(BILLION, k)} for k in (3, 6)}
    return results


def test_the_band_model_is_that_of_choose_bands() -> None:
    at_a_million, at_a_billion = band_model(818_000, 3), band_model(BILLION, 3)
    assert (at_a_million["bands"], at_a_million["widths"], at_a_million["radii"]) == (
        3, [22, 21, 21], [1, 0, 0])
    assert at_a_million["rows"] == 23 + 1 + 1 + 3  # 25 probes, and one index row a band
    assert (at_a_billion["bands"], at_a_billion["widths"], at_a_billion["radii"]) == (
        2, [32, 32], [1, 1])
    assert at_a_billion["chance"] > at_a_million["chance"] > 0


def test_the_section_shows_the_run_and_a_billion_on_paper() -> None:
    section = spark_section(run_results())
    assert "#### The evaluation corpus" in section and "#### Synthetic fingerprints" in section
    assert "| verified pairs, S_R >= 0.8 | 53,387 pairs | 3.6 | 60.0 | 60.0 | 20,000 | 130.00 |" \
        in section
    assert "| 1,000,000 | 3 | 53,822,640 | 10.0 | 48.8 | 48.8 | 38.8 / 38.8 | 428 | 5.33 |" \
        in section
    flowing = " ".join(section.split())
    model = run_results()["model"]["3"]
    work = model["billion"]["work"] / model["measured"]["work"]
    assert f"{work:.1f} times the work per document" in flowing
    assert "49 core-seconds per million documents" in flowing
    # Manku et al.: a thousand batches of a million queries against an eighth of 8 billion.
    assert "about 2.5 \u00d7 10\u2076 mapper-seconds by their figure, 3.5 hours on 200 mappers" \
        in flowing
    assert "N = 50 (200 cores)" in flowing and "At k = 6 the same model" in flowing


def test_the_section_of_partial_runs() -> None:
    only_corpus = " ".join(spark_section(run_results(sizes=False)).split())
    assert "#### Synthetic fingerprints" not in only_corpus
    assert "This run has no synthetic size" in only_corpus
    assert "core-seconds" not in only_corpus  # no time from so few documents
    assert "3.5 hours on 200 mappers" in only_corpus
    only_sizes = spark_section(run_results(corpus=False))
    assert "#### The evaluation corpus" not in only_sizes and "1,000,000" in only_sizes
    assert spark_section(None).startswith("No results of `make bench-spark`")


def test_a_larger_size_from_a_run_of_its_own_joins_the_results() -> None:
    earlier = run_results()
    larger = run_results(corpus=False)
    size = larger["sizes"][0]
    size["rows"], size["distinct"] = 10_000_000, 8_180_000
    larger["seconds"] = 7_000.0
    larger["model"] = {str(k): {"measured": band_model(8_180_000, k),
                                "billion": band_model(BILLION, k)} for k in (3, 6)}
    merged = added_sizes(earlier, larger)
    assert [s["rows"] for s in merged["sizes"]] == [1_000_000, 10_000_000]
    assert merged["corpus"] == earlier["corpus"] and merged["seconds"] == 1234.0
    assert merged["model"] == larger["model"]  # the model follows the largest size
    assert "run" not in merged["sizes"][0] and merged["sizes"][1]["run"]["seconds"] == 7_000.0
    section = " ".join(spark_section(merged).split())
    assert "The 10,000,000 fingerprints were measured by a run of their own" in section
    assert "`make bench-spark-10m`, 7000 s; 16 shuffle partitions)" in section
    assert "From `local[1]` at k = 3 on the 10,000,000 synthetic fingerprints" in section
    # the same size again replaces it; a smaller one leaves the model alone
    again = added_sizes(merged, larger)
    assert [s["rows"] for s in again["sizes"]] == [1_000_000, 10_000_000]
    smaller = added_sizes(merged, run_results(corpus=False))
    assert smaller["model"] == larger["model"]
    assert smaller["sizes"][0]["run"]["seconds"] == 1234.0


def test_a_run_of_its_own_at_one_radius_says_so() -> None:
    larger = run_results(corpus=False)
    size = larger["sizes"][0]
    size["rows"] = 10_000_000
    del size["postgresql"]["6"]
    size["spark"] = [run for run in size["spark"] if run["k"] == 3]
    larger["shuffle_partitions"] = 128
    larger["model"] = {"3": {"measured": band_model(8_180_000, 3),
                             "billion": band_model(BILLION, 3)}}
    merged = added_sizes(run_results(), larger)
    assert merged["model"]["3"] == larger["model"]["3"]
    assert merged["model"]["6"] == run_results()["model"]["6"]  # kept from the earlier run
    section = " ".join(spark_section(merged).split())
    assert "(`make bench-spark-10m`, 1234 s; 128 shuffle partitions, k = 3 only)" in section
    assert "| 10,000,000 | 3 |" in section and "| 10,000,000 | 6 |" not in section


def test_the_section_shows_spark_dedup_against_postgresql_and_their_ratio() -> None:
    results = run_results(sizes=False)
    results["dedup"] = {
        "documents": 150_000, "bytes": 659_000_000, "seed": 3, "originals": 2_829,
        "grouped": 120_000, "groups": 2_500, "ratio": 4.25,
        "postgresql": {"load_seconds": 50.0, "clusters_seconds": 30.0, "seconds": 80.0},
        "spark": {"seconds": 340.0, "master": "local[2]",
                  "command": "nearsim spark dedup crawl.jsonl --key-column url --text-column"
                             " body -o groups.parquet --master local[2]"},
    }  # fmt: skip
    section = spark_section(results)
    assert "#### `nearsim spark dedup` against PostgreSQL" in section
    assert "| PostgreSQL | both | 80.0 |" in section
    assert ("| Spark `local[2]` | `nearsim spark dedup crawl.jsonl --key-column url"
            " --text-column body -o groups.parquet --master local[2]` | 340.0 |") in section
    assert "Spark / PostgreSQL = **4.2**" in " ".join(section.split())
    assert "`nearsim spark dedup`" not in spark_section(run_results(sizes=False))


def test_the_postgresql_baseline_counts_every_pair_of_the_text_like_set(database: str) -> None:
    """The count Spark's answers are checked against: nearsim_pairs on the loaded set,
    equal to the pairs within k bits counted by brute force over the same fingerprints."""
    import numpy as np

    from benchmarks import common
    from benchmarks.docsets import RealFingerprints, popcount
    from benchmarks.spark_jobs import postgres_pairs
    from benchmarks.throughput import kjv_corpora

    conn = common.connect(database)
    common.prepare_session(conn)
    schema = "nearsim_spark_jobs_test"
    conn.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")
    conn.execute(f"CREATE SCHEMA {schema}")
    try:
        values, described, docset, runs = postgres_pairs(
            conn, schema, 3000, (0, 3, 6), RealFingerprints(kjv_corpora()[0]))
        assert len(values) == docset.rows == 3000 and described == docset.described
        assert conn.execute(f"SELECT count(*) FROM {docset.qualified}").fetchone() == (3000,)
        upper = np.triu_indices(len(values), 1)
        distances = popcount(values[upper[0]] ^ values[upper[1]])
        for k in (0, 3, 6):
            assert runs[k]["pairs"] == int(np.count_nonzero(distances <= k)), k
            assert runs[k]["seconds"] > 0
        # the text-like set has near-duplicates at each radius
        assert 0 < runs[0]["pairs"] < runs[3]["pairs"] < runs[6]["pairs"]
    finally:
        conn.execute(f"DROP SCHEMA {schema} CASCADE")
        conn.close()
