"""nearsim.spark gives exactly the answers of the extension's table functions."""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any

import psycopg
import pytest
from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from spark_corpus import Corpus

from nearsim.spark import (
    clusters,
    components,
    fingerprints,
    hamming_groups,
    pairs,
    pivots,
    verified_clusters,
    verified_groups,
    verified_pairs,
)
from nearsim.spark import overlaps as spark_overlaps
from nearsim.spark import resemblance as spark_resemblance
from nearsim.spark import search as spark_search
from nearsim.spark.pivots import group_pivots
from nearsim.spark.resemblance import resemblance_pairs


def query(database: str, text: str, *args: Any) -> list[tuple[Any, ...]]:
    with psycopg.connect(database) as conn:
        return conn.execute(text, args).fetchall()


def as_text(frame: DataFrame, *columns: str) -> list[tuple[Any, ...]]:
    """Rows with their keys as text, as the SQL functions give them, sorted."""
    keys = {"a", "b", "key", "cluster", "pivot"}
    return sorted(
        tuple(None if row[c] is None else str(row[c]) if c in keys else row[c] for c in columns)
        for row in frame.collect()
    )


@pytest.fixture(scope="module")
def fingerprinted(corpus: Corpus) -> DataFrame:
    return fingerprints(corpus.frame, "body").cache()


VerifiedRows = Callable[..., list[tuple[Any, ...]]]


@pytest.fixture(scope="module")
def verified_rows(corpus: Corpus) -> VerifiedRows:
    """``verified_rows(minimum, measure, radius)``: the rows of ``verified_pairs`` of the
    corpus, as text; each set of arguments is run on Spark once for the module."""
    made: dict[tuple[Any, ...], list[tuple[Any, ...]]] = {}

    def rows(minimum: float, measure: str = "s_r",
             radius: int | None = None) -> list[tuple[Any, ...]]:  # fmt: skip
        if (minimum, measure, radius) not in made:
            found = verified_pairs(corpus.frame, "id", "body", minimum, measure, radius)
            made[minimum, measure, radius] = as_text(found, "a", "b", "distance", "similarity",
                                                     "short")  # fmt: skip
        return made[minimum, measure, radius]

    return rows


@pytest.mark.parametrize("profile", ["default/1", "english"])
def test_fingerprints_are_sql_simhash(database: str, corpus: Corpus, profile: str) -> None:
    expected = dict(query(database, f"SELECT id, simhash(body, %s) FROM {corpus.table}", profile))
    found = fingerprints(corpus.frame, "body", profile, output_column="fp")
    got = {row["id"]: row["fp"] for row in found.collect()}
    assert got == expected
    assert got[9003] is None and got[9004] is None and got[9005] is None  # no features, NULL
    assert any(value is not None and value < 0 for value in got.values())  # signed bigint


@pytest.mark.parametrize(("max_distance", "bands"), [(0, None), (3, None), (6, None), (6, 3),
                                                     (12, None)])  # fmt: skip
def test_pairs_are_nearsim_pairs(database: str, corpus: Corpus, fingerprinted: DataFrame,
                                 max_distance: int, bands: int | None) -> None:  # fmt: skip
    expected = sorted(query(database, f"SELECT a, b, distance FROM nearsim_pairs('{corpus.table}',"
                                      f" {max_distance})"))  # fmt: skip
    found = pairs(fingerprinted, "id", max_distance, bands=bands)
    assert as_text(found, "a", "b", "distance") == expected
    identical = [(a, b) for a, b, d in expected if d == 0]
    assert len(identical) >= 30 * 29 // 2  # the block of identical texts is in


def test_identical_fingerprints_in_several_blocks(
    database: str, corpus: Corpus, fingerprinted: DataFrame, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Groups larger than a block are paired block by block, each pair once."""
    monkeypatch.setattr(spark_search, "BLOCK_SIZE", 4)
    expected = sorted(query(database, f"SELECT a, b, distance FROM nearsim_pairs('{corpus.table}',"
                                      " 2)"))  # fmt: skip
    grouped = hamming_groups(fingerprinted, "id", 2)
    assert as_text(grouped.expand(), "a", "b", "distance") == expected
    assert grouped.count() == len(expected)


@pytest.mark.parametrize(("minimum", "measure", "radius"), [(0.8, "s_r", None),
                                                            (0.9, "containment", None),
                                                            (0.5, "s_l", 8)])  # fmt: skip
def test_verified_pairs_are_nearsim_pairs_verified(
    database: str, corpus: Corpus, verified_rows: VerifiedRows, minimum: float, measure: str,
    radius: int | None,
) -> None:  # fmt: skip
    expected = sorted(query(
        database, "SELECT a, b, distance, similarity, short FROM nearsim_pairs_verified(%s, %s,"
        " %s, %s)", corpus.table, minimum, measure, radius))  # fmt: skip
    got = verified_rows(minimum, measure, radius)
    assert [row[:3] + row[4:] for row in got] == [row[:3] + row[4:] for row in expected]
    assert [row[3] for row in got] == pytest.approx([row[3] for row in expected])
    assert len(expected) > 40


@pytest.mark.parametrize("max_distance", [0, 6])
def test_components_are_nearsim_clusters(database: str, corpus: Corpus, fingerprinted: DataFrame,
                                         max_distance: int) -> None:  # fmt: skip
    expected = sorted(query(database, f"SELECT key, cluster, pivot FROM nearsim_clusters("
                                      f"'{corpus.table}', {max_distance}, 'components')"))
    by_pairs = components(pairs(fingerprinted, "id", max_distance))
    assert as_text(by_pairs, "key", "cluster", "pivot") == expected
    collapsed = clusters(fingerprinted, "id", max_distance)
    assert as_text(collapsed, "key", "cluster", "pivot") == expected


@pytest.mark.parametrize(("max_distance", "rounds"), [(0, 10), (3, 0), (6, 10), (12, 1)])
def test_pivots_are_nearsim_clusters_pivot(database: str, corpus: Corpus, fingerprinted: DataFrame,
                                           max_distance: int, rounds: int) -> None:  # fmt: skip
    """Rounds on DataFrames, the rest finished component by component: the same pivots."""
    expected = sorted(query(database, f"SELECT key, cluster, pivot FROM nearsim_clusters("
                                      f"'{corpus.table}', {max_distance}, 'pivot')"))
    collapsed = group_pivots(hamming_groups(fingerprinted, "id", max_distance), rounds=rounds)
    assert as_text(collapsed, "key", "cluster", "pivot") == expected
    if max_distance == 12:
        by_pairs = pivots(pairs(fingerprinted, "id", max_distance), rounds=rounds)
        assert as_text(by_pairs, "key", "cluster", "pivot") == expected
        assert as_text(clusters(fingerprinted, "id", max_distance, method="pivot"), "key",
                       "cluster", "pivot") == expected  # fmt: skip
        # Not the components under another name: some groups are split.
        components = sorted(query(database, f"SELECT key, cluster FROM nearsim_clusters("
                                            f"'{corpus.table}', {max_distance})"))  # fmt: skip
        assert [(key, cluster) for key, cluster, _ in expected] != components
        assert any(pivot != cluster for _, cluster, pivot in expected)


def test_pivots_min_size(database: str, corpus: Corpus, fingerprinted: DataFrame) -> None:
    expected = sorted(query(database, f"SELECT key, cluster, pivot FROM nearsim_clusters("
                                      f"'{corpus.table}', 8, 'pivot', 3)"))  # fmt: skip
    found = clusters(fingerprinted, "id", 8, min_size=3, method="pivot")
    assert as_text(found, "key", "cluster", "pivot") == expected


@pytest.mark.parametrize(("minimum", "measure", "radius"),
                         [(0.8, "s_r", None), (0.5, "s_r", 12), (0.9, "containment", None)])
def test_verified_pivots_are_nearsim_clusters_verified(
    database: str, corpus: Corpus, minimum: float, measure: str, radius: int | None
) -> None:
    expected = sorted(query(
        database, "SELECT key, cluster, pivot FROM nearsim_clusters_verified(%s, %s, %s, %s,"
        " 'pivot')", corpus.table, minimum, measure, radius))  # fmt: skip
    found = verified_clusters(corpus.frame, "id", "body", minimum, measure, radius,
                              method="pivot")  # fmt: skip
    assert as_text(found, "key", "cluster", "pivot") == expected
    assert any(pivot != cluster for _, cluster, pivot in expected)


def test_verified_pivots_of_a_one_way_link(database: str, spark: Any) -> None:
    """Containment passes from the group {2, 5} of one text into 3, not back: 2 and 3 are
    paired (2 < 3), 3 and 5 are not (3 < 5); the pivots come from the pairs of documents."""
    short = "the quick brown fox jumps over the lazy dog near the river bank today"
    longer = short + " and then it runs far away into the deep dark forest beyond the hills"
    other = "a completely different sentence about ships sailing on the wide open sea"
    rows = [(2, short), (3, longer), (5, short), (7, other), (8, other + " again")]
    with psycopg.connect(database, autocommit=True) as conn:
        conn.execute("CREATE TABLE one_way (id bigint PRIMARY KEY, body text)")
        conn.execute("SELECT nearsim_enable('one_way', 'body')")
        for row in rows:
            conn.execute("INSERT INTO one_way VALUES (%s, %s)", row)
    frame = spark.createDataFrame(rows, "id long, body string")
    for method in ("pivot", "components"):
        expected = sorted(query(database, "SELECT key, cluster, pivot FROM"
                                " nearsim_clusters_verified('one_way', 0.9, 'containment', 64,"
                                " %s)", method))  # fmt: skip
        found = verified_clusters(frame, "id", "body", 0.9, "containment", 64, method=method)
        assert as_text(found, "key", "cluster", "pivot") == expected
    grouped = verified_groups(frame, "id", "body", 0.9, "containment", 64)
    assert as_text(grouped.expand(), "a", "b") == [("2", "3"), ("2", "5"), ("7", "8")]


def test_components_min_size(database: str, corpus: Corpus, fingerprinted: DataFrame) -> None:
    expected = sorted(query(database, f"SELECT key, cluster, pivot FROM nearsim_clusters("
                                      f"'{corpus.table}', 6, 'components', 3)"))  # fmt: skip
    assert as_text(clusters(fingerprinted, "id", 6, min_size=3), "key", "cluster",
                   "pivot") == expected  # fmt: skip


def test_verified_clusters_are_nearsim_clusters_verified(database: str, corpus: Corpus) -> None:
    expected = sorted(query(database, f"SELECT key, cluster, pivot FROM nearsim_clusters_verified("
                                      f"'{corpus.table}', 0.8, 's_r')"))  # fmt: skip
    found = verified_clusters(corpus.frame, "id", "body", 0.8)
    assert as_text(found, "key", "cluster", "pivot") == expected
    # Named after the smallest key as text, as the SQL function names them.
    assert any(len(key) != len(cluster) for key, cluster, _ in expected)


def test_a_star_of_stars_is_one_component(spark: Any) -> None:
    """A long chain and a wide star: the rounds settle on the smallest node."""
    chain = [(n, n + 1) for n in range(0, 200)]
    star = [(1000, n) for n in range(1001, 1100)] + [(1099, 5000), (5000, 4999)]
    found = components(spark.createDataFrame(chain + star, "a long, b long"))
    groups = {row["key"]: row["cluster"] for row in found.collect()}
    assert set(groups[n] for n in range(201)) == {0}
    assert set(groups[n] for n in [*range(1000, 1100), 4999, 5000]) == {1000}
    assert len(groups) == 201 + 100 + 2


def test_components_of_random_and_adversarial_graphs_are_union_find(spark: Any) -> None:
    """The rounds stop at the first stars: the components are still every graph's own,
    on graphs that take many rounds (a chain numbered backwards, a comb, a tree) and
    on random ones, checked against union-find."""
    rng = random.Random(11)
    edges: list[tuple[int, int]] = []
    edges += [(n + 1, n) for n in range(10_000, 10_150)]  # a chain, the largest node first
    edges += [(20_000 + n, 20_000 + n // 2) for n in range(1, 127)]  # a binary tree
    edges += [(30_000 + 2 * n, 30_000 + 2 * n + 2) for n in range(40)]  # a comb's spine
    edges += [(30_000 + 2 * n + 1, 30_000 + 2 * n) for n in range(40)]  # and its teeth
    for graph in range(20):  # random graphs of 2 to 60 nodes, sparse to dense
        base, size = 40_000 + 100 * graph, rng.randrange(2, 61)
        for _ in range(rng.randrange(1, 2 * size)):
            edges.append((base + rng.randrange(size), base + rng.randrange(size)))
    parent: dict[int, int] = {}

    def root(node: int) -> int:
        while parent.setdefault(node, node) != node:
            node = parent[node]
        return node

    for a, b in edges:
        parent[max(root(a), root(b))] = min(root(a), root(b))
    # A node whose only edge is to itself has no component.
    linked = {node for a, b in edges if a != b for node in (a, b)}
    found = components(spark.createDataFrame(edges, "a long, b long"))
    groups = {row["key"]: row["cluster"] for row in found.collect()}
    assert groups == {node: root(node) for node in linked}


def test_resemblance_pairs_beyond_the_radius(database: str, corpus: Corpus,
                                             verified_rows: VerifiedRows) -> None:  # fmt: skip
    """With s_r and no max_distance the pairs are an exact set-similarity join, in SQL as
    on Spark: pairs at least 0.8 similar whose fingerprints lie further apart than the
    calibrated radius are found too."""
    expected = sorted(query(database, "SELECT a, b, distance, similarity, short FROM"
                            " nearsim_pairs_verified(%s, 0.8, 's_r')", corpus.table))  # fmt: skip
    radius = spark_search.verified_radius(0.8, "s_r", None)
    beyond = {(a, b) for a, b, distance, _, _ in expected if distance > radius}
    assert beyond  # two pairs of the corpus at exactly 0.8, 14 and 17 bits apart
    # (one run of verified_pairs with test_verified_pairs_are_nearsim_pairs_verified)
    assert verified_rows(0.8) == expected
    within = as_text(verified_pairs(corpus.frame, "id", "body", 0.8, max_distance=radius),
                     "a", "b")  # fmt: skip
    assert {(a, b) for a, b, *_ in expected} - set(within) == beyond


def test_resemblance_pairs_of_texts_without_fingerprints(database: str, spark: Any) -> None:
    """Stop words alone have no english fingerprint but do have shingles: the exact join
    pairs them, with no distance; no calibration is needed for the profile."""
    rows = [(1, "and the of it"), (2, "And the of it!"), (3, "the ship sailed on the sea at dawn"),
            (4, "the ship sailed on the sea at dawn today"), (5, None), (6, " ... "),
            (7, "of it")]
    with psycopg.connect(database, autocommit=True) as conn:
        conn.execute("CREATE TABLE stop_words (id bigint PRIMARY KEY, body text)")
        conn.execute("SELECT nearsim_enable('stop_words', 'body', profile => 'english')")
        for row in rows:
            conn.execute("INSERT INTO stop_words VALUES (%s, %s)", row)
    expected = sorted(query(database, "SELECT a, b, distance, similarity, short FROM nearsim"
                                      "_pairs_verified('stop_words', 0.5, 's_r')"))  # fmt: skip
    assert ("1", "2", None, 1.0, True) in expected
    frame = spark.createDataFrame(rows, "id long, body string")
    found = verified_pairs(frame, "id", "body", 0.5, profile="english")
    assert as_text(found, "a", "b", "distance", "similarity", "short") == expected
    uncalibrated = verified_pairs(frame, "id", "body", 0.5, profile="words:2")
    assert as_text(uncalibrated, "a", "b", "similarity") == [row[:2] + row[3:4]
                                                             for row in expected]


@pytest.mark.parametrize(("max_broadcast", "sets_broadcast", "chunk"),
                         [(0, True, None), (10**9, True, None), (10**9, True, 50),
                          (10**9, False, None)])  # fmt: skip
def test_resemblance_pairs_ranked_on_the_driver_or_by_joins(
    database: str, corpus: Corpus, fingerprinted: DataFrame, max_broadcast: int,
    sets_broadcast: bool, chunk: int | None, monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The shingle order broadcast as ranks (the default for a set of this size) and made
    by joins on the cluster (more shared shingles than max_broadcast), the overlaps counted
    with numpy on the broadcast sets of ranks (the default here; also in chunks of a few
    shingles, a pair's set beyond the chunk alone), with array_intersect on the broadcast
    sets of hashes, or on sets joined to the pairs through shuffles (sets too large for the
    driver's heap), give the same pairs, those of nearsim_pairs_verified, at a threshold
    whose prefixes are long."""
    if not sets_broadcast:
        monkeypatch.setattr(spark_resemblance, "BROADCAST_HEAP_SHARE", 10**15)
    if chunk is not None:
        monkeypatch.setattr(spark_overlaps, "CHUNK_ELEMENTS", chunk)
    expected = sorted(query(database, "SELECT a, b, distance, similarity, short FROM"
                            " nearsim_pairs_verified(%s, 0.5, 's_r')", corpus.table))  # fmt: skip
    documents = fingerprinted.select(F.col("id").alias("key"), "si", F.col("body").alias("text"))
    members, sizes, found = resemblance_pairs(documents, 0.5, max_broadcast)
    grouped = spark_search.GroupPairs(members, sizes, found, 0.5, document_distance=True)
    assert as_text(grouped.expand(), "a", "b", "distance", "similarity", "short") == expected
    assert len(expected) > 100
