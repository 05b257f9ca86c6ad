"""Groups of near-duplicates: connected components, computed on the cluster.

The components are found by alternating the *large-star* and *small-star*
operations of Kiveris, Lattanzi, Mirrokni, Rastogi and Vassilvitskii
("Connected Components in MapReduce and Beyond", SoCC 2014) on a DataFrame
of edges until every component is a star around its smallest node.  Such
stars are the only edges a round leaves unchanged (:func:`star_components`),
so the rounds end as soon as one makes them, without one more round to see
nothing change.  Each round is a few joins and aggregations; the
number of rounds grows with the logarithm of the components' size.  The
graph never goes to the driver; each round's edges are checkpointed (locally)
so the plan does not grow with the rounds.

A group is named after its smallest key, as ``nearsim_clusters`` names it:
in the key's own order (``order="key"``), or, as
``nearsim_clusters_verified`` does, in the order of the keys as text
(``order="text"``).
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from .search import GroupPairs

__all__ = ["ORDERS", "components", "group_components", "star_components"]

ORDERS = ("key", "text")

MAX_ROUNDS = 200


def _check(min_size: int, order: str) -> None:
    if isinstance(min_size, bool) or not isinstance(min_size, int) or min_size < 1:
        raise ValueError(f"min_size must be an int of at least 1, not {min_size!r}")
    if order not in ORDERS:
        raise ValueError(f"order must be one of {', '.join(ORDERS)}, not {order!r}")


def _large_star(edges: DataFrame) -> DataFrame:
    """Each node's larger neighbours are linked to the smallest node of its neighbourhood."""
    both = edges.unionByName(edges.select(F.col("v").alias("u"), F.col("u").alias("v")))
    smallest = both.groupBy("u").agg(F.least(F.min("v"), F.col("u")).alias("m"))
    return (both.join(smallest, "u").where(F.col("v") > F.col("u"))
            .select(F.col("v").alias("u"), F.col("m").alias("v")).distinct())  # fmt: skip


def _small_star(edges: DataFrame) -> DataFrame:
    """Each node and its smaller neighbours are linked to the smallest of them."""
    down = edges.select(F.greatest("u", "v").alias("u"), F.least("u", "v").alias("v"))
    smallest = down.groupBy("u").agg(F.min("v").alias("m"))
    linked = down.join(smallest, "u").select(F.col("v").alias("u"), F.col("m").alias("v"))
    return (linked.unionByName(smallest.select("u", F.col("m").alias("v")))
            .where(F.col("u") != F.col("v")).distinct())  # fmt: skip


def _stars(edges: DataFrame) -> bool:
    """Whether the edges ``(u, v)``, ``u > v``, are stars, each around its smallest node:
    no node with an edge out (to a smaller one) has another edge."""
    ends = edges.select(F.col("u").alias("node"), F.lit(1).alias("out")).unionByName(
        edges.select(F.col("v").alias("node"), F.lit(0).alias("out")))
    nodes = ends.groupBy("node").agg(F.sum("out").alias("out"), F.count("*").alias("ends"))
    return nodes.where((F.col("out") > 0) & (F.col("ends") > 1)).isEmpty()


def star_components(edges: DataFrame) -> DataFrame:
    """``(node, root)`` for every node of the undirected ``edges`` ``(u, v)``.

    ``root`` is the smallest node of the node's component (the root's own
    row included).  Self-loops are ignored; a node only on self-loops is
    not listed.
    """
    current = (edges.select("u", "v").where(F.col("u") != F.col("v"))
               .select(F.greatest("u", "v").alias("u"), F.least("u", "v").alias("v"))
               .distinct().localCheckpoint())  # fmt: skip
    # The rounds end at the first stars (every node linked to its component's smallest):
    # a round leaves stars as they are, and nothing else, so they are the edges the rounds
    # would have stopped changing at one round later.  (Take a component a round leaves
    # as it is, its smallest node r and the nodes D linked to r.  Large-star links to r
    # each node with a smaller neighbour in D, and small-star keeps that edge: such a
    # node is in D.  A node q outside D linked to some p in D is smaller than p, and
    # small-star links p to a node other than r only if p is the smallest of the
    # neighbourhood of a node u larger than p; but u, linked to p, is in D, and the
    # smallest of its neighbourhood is r.  So every node is in D, every neighbourhood's
    # smallest is r, and small-star makes no edge but those to r.)
    for _ in range(MAX_ROUNDS):
        current = _small_star(_large_star(current)).localCheckpoint()
        if _stars(current):
            break
    else:
        raise RuntimeError(f"connected components did not settle in {MAX_ROUNDS} rounds")
    roots = current.select(F.col("v").alias("node")).distinct().select(
        "node", F.col("node").alias("root"))
    return current.select(F.col("u").alias("node"), F.col("v").alias("root")).unionByName(roots)


def _named(members: DataFrame, min_size: int, order: str) -> DataFrame:
    """``(key, cluster, pivot)`` from ``(key, component)``: groups of at least ``min_size``."""
    smallest: Column = (F.min("key") if order == "key"
                        else F.min_by("key", F.col("key").cast("string")))  # fmt: skip
    named = members.groupBy("component").agg(smallest.alias("cluster"),
                                              F.count("*").alias("size"))  # fmt: skip
    return members.join(named.where(F.col("size") >= min_size), "component").select(
        "key", "cluster", F.lit(None).cast(members.schema["key"].dataType).alias("pivot"))


def components(pairs_df: DataFrame, a_column: str = "a", b_column: str = "b",
               min_size: int = 2, order: str = "key") -> DataFrame:  # fmt: skip
    """``(key, cluster, pivot)``: the connected components of the pairs, one row per document.

    ``cluster`` is the component's smallest key; ``pivot`` is NULL (the
    ``components`` method).  Only components of at least ``min_size``
    documents.  On ``nearsim.spark.pairs(df, key, k)`` this is
    ``nearsim_clusters(tbl, k, 'components')``; on a table with many
    identical documents, :func:`nearsim.spark.clusters` gives the same
    without making their pairs.
    """
    _check(min_size, order)
    edges = pairs_df.select(F.col(a_column).alias("u"), F.col(b_column).alias("v"))
    found = star_components(edges)
    members = found.select(F.col("node").alias("key"), F.col("root").alias("component"))
    return _named(members, min_size, order)


def group_components(grouped: GroupPairs, min_size: int = 2, order: str = "key") -> DataFrame:
    """``(key, cluster, pivot)`` of the documents linked by ``grouped``, without expanding it.

    A pair of groups links them when some pair of their documents is
    reported: always for distance pairs; for verified pairs, when the
    measure passes in the direction of some pair of their keys.
    """
    _check(min_size, order)
    links = grouped.pairs
    # (A pair that passes both ways links its groups whatever the order of their keys.)
    if grouped.min_similarity is not None and not grouped.both_ways:
        tops = grouped.members.groupBy("gid").agg(F.max("key").alias("top_a"))
        links = links.join(tops.withColumnRenamed("gid", "ga"), "ga").where(
            (F.col("sim_ab") >= grouped.min_similarity)
            | ((F.col("sim_ba") >= grouped.min_similarity) & (F.col("gb") < F.col("top_a"))))
    # The links are read several times: made once (verified links are measured).
    links = links.select(F.col("ga").alias("u"), F.col("gb").alias("v")).localCheckpoint()
    found = star_components(links)
    nodes = links.select(F.col("u").alias("node")).unionByName(
        links.select(F.col("v").alias("node"))).distinct()
    labelled = nodes.join(found, "node", "left").select(
        F.col("node").alias("gid"), F.coalesce("root", "node").alias("component"))
    members = grouped.members.join(labelled, "gid").select("key", "component")
    return _named(members, min_size, order)
