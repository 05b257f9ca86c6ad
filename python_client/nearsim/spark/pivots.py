"""Pivot groups: ``nearsim_clusters(tbl, k, 'pivot')``, computed on the cluster.

``nearsim_clusters`` makes pivot groups greedily
(:func:`nearsim.core.groups.pivot_groups`): documents are taken in order of
decreasing number of neighbours (ties: the smaller key first); a document
not yet in a group becomes a pivot and takes all its neighbours not yet in
a group.  The pivots are thus the *lexicographically first maximal
independent set* of the graph in that order: a document is a pivot exactly
when none of its neighbours that come before it is one, and every other
document belongs to the first pivot among its neighbours.

That set is defined by a sequence, and finding it is P-complete (Cook,
1985): no algorithm is known that needs fewer rounds than the longest chain
of decisions that wait on each other, which a path of documents of equal
degree makes as long as the path.  It is found here in two stages:

1. Rounds on DataFrames (Blelloch, Fineman and Shun, SPAA 2012): every
   undecided document none of whose undecided neighbours comes before it
   is a pivot; the undecided neighbours of the new pivots are not.  Each
   round is a few joins; near-duplicate graphs are mostly stars and small
   cliques, decided in a few rounds.
2. After at most ``rounds`` rounds, what is left undecided is cut into its
   connected components (which do not wait on each other) and each
   component is finished by the sequential greedy in one Python task, on
   the executors.  A component left after the rounds must fit one task's
   memory; the graph never goes to the driver.

The last step, every document to the first pivot among its neighbours, is
one join and one aggregation.

Documents are handled in groups of identical ones (:class:`GroupPairs`):
the members of a group are neighbours of each other with the same
neighbours outside, so they have the same degree and are decided together,
by the first of them in the order.  A verified link between two groups
that passes in one direction of the measure only (``containment``) can
link some of their members and not others; when such a link exists, the
pivots are computed on the pairs of documents instead.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from functools import reduce

import numpy as np
import pandas as pd  # type: ignore[import-untyped]
from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F
from pyspark.sql.types import IntegerType, StructField, StructType

from .graph import _check, star_components
from .search import GroupPairs

__all__ = ["DEFAULT_ROUNDS", "group_pivots", "pivots"]

DEFAULT_ROUNDS = 10
"""Rounds on DataFrames before what is left is finished component by component."""


def _ordered(order: str) -> Callable[[Column], Column]:
    """The value a key is ordered by: the key itself, or the key as text."""
    if order == "key":
        return lambda column: column
    return lambda column: column.cast("string")


def _greedy(edges: pd.DataFrame) -> pd.DataFrame:
    """The pivots of one component: ``edges`` are ``(root, ru, rv)``, both ways, ranks from 1."""
    first = edges["ru"].to_numpy(dtype=np.int64)
    second = edges["rv"].to_numpy(dtype=np.int64)
    count = int(max(first.max(), second.max()))
    order = np.argsort(first, kind="stable")
    neighbours = second[order].tolist()
    starts = np.searchsorted(first[order], np.arange(1, count + 2, dtype=np.int64)).tolist()
    taken = bytearray(count + 1)
    chosen = []
    for node in range(1, count + 1):
        if taken[node]:
            continue
        chosen.append(node)
        taken[node] = 1
        for other in neighbours[starts[node - 1] : starts[node]]:
            taken[other] = 1
    return pd.DataFrame({"root": [edges["root"].iloc[0]] * len(chosen), "rank": chosen})


def _finish(undecided: DataFrame, remaining: DataFrame) -> DataFrame:
    """The pivots among ``undecided`` ``(node, p)``, linked by ``remaining`` ``(u, v, ...)``."""
    alone = undecided.select("node").join(
        remaining.select(F.col("u").alias("node")), "node", "left_anti")
    found = star_components(remaining.select("u", "v"))
    ranked = found.join(undecided, "node").withColumn(
        "rank", F.row_number().over(Window.partitionBy("root").orderBy("p")))
    ranked = ranked.select("node", "root", "rank").localCheckpoint()
    edges = (remaining
             .join(ranked.select(F.col("node").alias("u"), "root", F.col("rank").alias("ru")),
                   "u")
             .join(ranked.select(F.col("node").alias("v"), F.col("rank").alias("rv")), "v")
             .select("root", "ru", "rv"))  # fmt: skip
    schema = StructType([StructField("root", ranked.schema["root"].dataType),
                         StructField("rank", IntegerType())])  # fmt: skip
    picked = edges.groupBy("root").applyInPandas(_greedy, schema)
    chosen = picked.join(ranked, ["root", "rank"]).select("node")
    return alone.unionByName(chosen)


def _independent_set(nodes: DataFrame, edges: DataFrame, rounds: int) -> DataFrame:
    """``(node)``: the pivots of ``nodes`` ``(node, p)`` linked by ``edges`` ``(u, v, pu, pv)``
    (both ways), ``p`` smaller for a node that comes first."""
    undecided, remaining = nodes, edges
    chosen: list[DataFrame] = []
    left = not undecided.isEmpty()  # asked once of each round's undecided
    for _ in range(rounds):
        if not left:
            break
        waiting = remaining.where(F.col("pv") < F.col("pu")).select(F.col("u").alias("node"))
        new = undecided.select("node").join(waiting, "node", "left_anti").localCheckpoint()
        taken = remaining.join(new.select(F.col("node").alias("v")), "v").select(
            F.col("u").alias("node"))
        undecided = undecided.join(new.unionByName(taken), "node", "left_anti").localCheckpoint()
        remaining = (remaining.join(undecided.select(F.col("node").alias("u")), "u", "left_semi")
                     .join(undecided.select(F.col("node").alias("v")), "v", "left_semi")
                     .localCheckpoint())  # fmt: skip
        chosen.append(new)
        left = not undecided.isEmpty()
    if left:
        chosen.append(_finish(undecided, remaining))
    if not chosen:
        return nodes.select("node").limit(0)
    return reduce(DataFrame.unionByName, chosen)


def _pivot_groups(members: DataFrame, sizes: DataFrame, links: DataFrame, min_size: int,
                  order: str, rounds: int) -> DataFrame:  # fmt: skip
    """``(key, cluster, pivot)`` from groups of identical documents.

    ``members`` is ``(gid, key)``, ``sizes`` ``(gid, n)``; ``links`` ``(u,
    v)`` links every document of group ``u`` with every document of group
    ``v`` (``u == v``: the group's documents with each other).
    """
    ordered = _ordered(order)
    between = links.where(F.col("u") != F.col("v")).select(
        F.least("u", "v").alias("u"), F.greatest("u", "v").alias("v")).distinct()
    directed = between.unionByName(between.select(F.col("v").alias("u"), F.col("u").alias("v")))
    inside = links.where(F.col("u") == F.col("v")).select(F.col("u").alias("node")).distinct()
    nodes = directed.select(F.col("u").alias("node")).unionByName(inside).distinct()
    sized = sizes.select(F.col("gid").alias("node"), "n")
    outside = directed.join(sized.withColumnRenamed("node", "v"), "v").groupBy("u").agg(
        F.sum("n").alias("outside"))
    firsts = members.groupBy("gid").agg(F.min_by("key", ordered(F.col("key"))).alias("first"))
    degree = (F.coalesce(F.col("outside"), F.lit(0))
              + F.when(F.col("inside"), F.col("n") - 1).otherwise(0))  # fmt: skip
    info = (nodes.join(sized, "node")
            .join(inside.withColumn("inside", F.lit(True)), "node", "left")
            .join(outside.withColumnRenamed("u", "node"), "node", "left")
            .join(firsts.withColumnRenamed("gid", "node"), "node")
            .select("node", "first",
                    F.struct((-degree).alias("d"), ordered(F.col("first")).alias("o")).alias("p"))
            .localCheckpoint())  # fmt: skip
    edges = (directed
             .join(info.select(F.col("node").alias("u"), F.col("p").alias("pu")), "u")
             .join(info.select(F.col("node").alias("v"), F.col("p").alias("pv")), "v")
             .select("u", "v", "pu", "pv").localCheckpoint())  # fmt: skip
    chosen = _independent_set(info.select("node", "p"), edges, rounds).localCheckpoint()
    joined = edges.join(chosen.select(F.col("node").alias("v")), "v").groupBy("u").agg(
        F.min_by("v", "pv").alias("joined"))
    assigned = (info.select("node")
                .join(chosen.withColumn("pivot_node", F.col("node")), "node", "left")
                .join(joined.withColumnRenamed("u", "node"), "node", "left")
                .select(F.col("node").alias("gid"),
                        F.coalesce("pivot_node", "joined").alias("pivot_node")))  # fmt: skip
    pivot_keys = info.select(F.col("node").alias("pivot_node"), F.col("first").alias("pivot"))
    documents = members.join(assigned, "gid").select("key", "pivot_node")
    smallest = F.min("key") if order == "key" else F.min_by("key", ordered(F.col("key")))
    named = documents.groupBy("pivot_node").agg(smallest.alias("cluster"),
                                                 F.count("*").alias("size"))  # fmt: skip
    return (documents.join(named.where(F.col("size") >= min_size), "pivot_node")
            .join(pivot_keys, "pivot_node").select("key", "cluster", "pivot"))  # fmt: skip


def _check_rounds(rounds: int) -> None:
    if isinstance(rounds, bool) or not isinstance(rounds, int) or rounds < 0:
        raise ValueError(f"rounds must be an int of at least 0, not {rounds!r}")


def pivots(pairs_df: DataFrame, a_column: str = "a", b_column: str = "b", min_size: int = 2,
           order: str = "key", rounds: int = DEFAULT_ROUNDS) -> DataFrame:  # fmt: skip
    """``(key, cluster, pivot)``: the pivot groups of the pairs, one row per document.

    On ``nearsim.spark.pairs(df, key, k)`` this is ``nearsim_clusters(tbl,
    k, 'pivot')``: documents taken by decreasing number of neighbours (ties:
    the smaller key first, in ``order``: ``"key"`` or ``"text"``), each not
    yet grouped becoming the pivot of its neighbours not yet grouped.
    ``cluster`` is the group's smallest key, ``pivot`` its pivot's key.
    ``rounds`` bounds the rounds on DataFrames before the rest is finished
    one component per task.
    """
    _check(min_size, order)
    _check_rounds(rounds)
    # The pairs are read several times: made once.
    links = pairs_df.select(F.col(a_column).alias("u"), F.col(b_column).alias("v"))
    links = links.localCheckpoint()
    keys = links.select(F.col("u").alias("key")).unionByName(
        links.select(F.col("v").alias("key"))).distinct()
    members = keys.select(F.col("key").alias("gid"), "key")
    sizes = keys.select(F.col("key").alias("gid"), F.lit(1).alias("n"))
    return _pivot_groups(members, sizes, links, min_size, order, rounds)


def group_pivots(grouped: GroupPairs, min_size: int = 2, order: str = "key",
                 rounds: int = DEFAULT_ROUNDS) -> DataFrame:  # fmt: skip
    """``(key, cluster, pivot)``: the pivot groups of the documents linked by ``grouped``.

    Distance pairs link every document of one group with every document of
    the other.  A verified pair of groups does too when its measure passes
    both ways, or one way and every key of the one group is smaller than
    every key of the other; otherwise (an asymmetric measure) the pivots
    are found on the pairs of documents (:meth:`GroupPairs.expand`).
    """
    _check(min_size, order)
    _check_rounds(rounds)
    links = grouped.pairs
    # (Pairs that all pass both ways link every document of one group with every one of
    # the other: none needs looking at.)
    if grouped.min_similarity is not None and not grouped.both_ways:
        passing = grouped.min_similarity
        # Looked at, then linked or expanded: measured once.
        grouped = replace(grouped, pairs=grouped.pairs.localCheckpoint())
        tops = grouped.members.groupBy("gid").agg(F.max("key").alias("top_a"))
        links = grouped.pairs.join(tops.withColumnRenamed("gid", "ga"), "ga")
        forward, backward = F.col("sim_ab") >= passing, F.col("sim_ba") >= passing
        one_way = (forward != backward) & (F.col("top_a") > F.col("gb"))
        if not links.where(one_way).isEmpty():
            return pivots(grouped.expand(), min_size=min_size, order=order, rounds=rounds)
        links = links.where((forward & backward) | (forward & (F.col("top_a") < F.col("gb"))))
    links = links.select(F.col("ga").alias("u"), F.col("gb").alias("v")).localCheckpoint()
    return _pivot_groups(grouped.members, grouped.sizes, links, min_size, order, rounds)
