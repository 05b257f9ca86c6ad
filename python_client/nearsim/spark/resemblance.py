"""Every pair of documents at least t similar in S_R, exactly: a set-similarity join.

The answer of ``nearsim_pairs_verified(tbl, t)`` with the measure ``s_r``
and no ``max_distance``, which the server finds with the exact join of
``nearsim_resemblance_pairs``: every pair whose word 3-shingle sets have a
resemblance ``|A & B| / |A | B|`` of at least ``t``, whatever the distance
of their fingerprints (a candidate radius would miss the few similar pairs
whose fingerprints lie further apart).  The prefix filter (Bayardo, Ma and
Srikant, WWW 2007), distributed as Vernica, Carey and Li do (SIGMOD 2010):

1. Each text's set is the distinct 64-bit hashes of its shingles (the
   features of the default profile, which the server's join also uses).
   Documents with equal sets are one group, named after its smallest key,
   and paired with each other at similarity 1.
2. The shingles are put in one global order, rarest first (fewest groups,
   then the hash).  Two sets at least ``t`` similar share a shingle among
   the first ``|x| - ceil(t |x|) + 1`` of each in that order (the
   *prefix*), so only groups that share a prefix shingle, and whose sizes
   allow ``t`` (the smaller at least ``t`` times the larger), are
   candidates; rare shingles make short lists.  A shingle of one group
   alone pairs nothing: when the shingles of two groups or more are few
   enough (:data:`MAX_BROADCAST_TOKENS`), they are counted, ranked on the
   driver and the ranks broadcast, and each group's prefix and set are
   made of those ranks (32-bit) in one pass, without moving the shingles
   through a join; otherwise the order is made by joins on the cluster.
3. Each candidate pair of groups (once, however many prefix shingles they
   share) is kept only if the shingles it shares up to its last shared
   prefix shingle, and all those that could follow, can reach ``t`` (the
   positional filter of PPJoin, Xiao, Wang, Lin and Yu, WWW 2008); then its
   overlap is counted and it is kept when its resemblance, computed as the
   server computes it, is at least ``t``.  Sets of ranks that fit in the
   driver's memory are broadcast and counted with numpy
   (:mod:`nearsim.spark.overlaps`); others, in the JVM (``array_intersect``).
4. The pairs of groups are expanded into pairs of documents
   (:meth:`nearsim.spark.search.GroupPairs.expand`), each with the distance
   of the two documents' own fingerprints (NULL when either has none).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import numpy.typing as npt
import pandas as pd  # type: ignore[import-untyped]
from pyspark import Broadcast
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql.pandas.functions import pandas_udf
from pyspark.sql.types import (
    ArrayType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
)

from ..core.measures import SHORT_SHINGLES
from .fingerprinting import SHINGLES_COLUMN
from .overlaps import collect_sets, overlaps
from .shingles import shingle_sets

__all__ = ["exact_resemblance", "resemblance_candidates", "resemblance_pairs", "shingle_hashes"]

MAX_BROADCAST_TOKENS = 20_000_000
"""Shingles shared by two groups or more, up to this many (16 bytes each), are
ranked on the driver and the ranks broadcast to the tasks; more are put in
order by joins on the cluster."""

BROADCAST_HEAP_SHARE = 8
"""The sets whose overlaps are counted are broadcast when they take at most an
eighth of the driver JVM's heap: sets of ranks to the Python workers, which
count with numpy (:mod:`nearsim.spark.overlaps`), sets of hashes to the join of
the candidate pairs in the JVM; else each candidate pair is joined with its two
sets through shuffles (two sets moved for every candidate pair)."""

ROW_BYTES = 64
"""What a row of a set costs besides its shingles, about."""

OVERLAP_SLACK = 1e-6
"""Taken off the overlap a resemblance needs before the positional filter, so
that rounding never drops a pair the exact measure keeps."""

BOUND_SLACK = 1e-9
"""Taken off ``t x`` before rounding up, as the server does, so that
rounding never makes a size or prefix bound too tight."""


def exact_resemblance(measure: str, max_distance: int | None,
                      min_similarity: float | None) -> bool:  # fmt: skip
    """Whether ``nearsim_pairs_verified`` answers by the exact join (as the server decides)."""
    return (measure == "s_r" and max_distance is None and min_similarity is not None
            and 0 < min_similarity <= 1)  # fmt: skip


def _hash_sets(tokenisation: int) -> Callable[[pd.Series], pd.Series]:
    """The body of the UDF: each text's distinct shingle hashes, ascending as unsigned."""

    def hash_sets(texts: pd.Series) -> pd.Series:
        given = [None if text is None else str(text) for text in texts.tolist()]
        return pd.Series(shingle_sets(given, tokenisation), index=texts.index, dtype=object)

    return hash_sets


def shingle_hashes(text: Column | str, tokenisation: int = 1) -> Column:
    """A column of the distinct 64-bit hashes of the word 3-shingles of ``text``
    (as signed ``bigint``; empty for a text without words, NULL for NULL), with
    the words of ``tokenisation`` (2: those of profiles of version 2)."""
    udf = pandas_udf(_hash_sets(tokenisation), ArrayType(LongType()))  # type: ignore[call-overload]
    column = F.col(text) if isinstance(text, str) else text
    result: Column = udf(column.cast(StringType()))
    return result


def _at_least(fraction: float, size: Column) -> Column:
    """``max(ceil(fraction * size - slack), 1)``: the server's rounding of a bound."""
    return F.greatest(F.ceil(F.lit(fraction) * size - F.lit(BOUND_SLACK)), F.lit(1))


def _check_threshold(min_similarity: float) -> float:
    if not 0 < min_similarity <= 1:
        raise ValueError(f"min_similarity must be above 0 and at most 1, not {min_similarity}")
    return float(min_similarity)


def _groups(documents: DataFrame, tokenisation: int) -> DataFrame:
    """``(hashes, gid, n, size, members, node)``: the distinct sets of the documents with
    words (``members``: the ``(key, si)`` of each of its documents), made once."""
    hashes = (F.col(SHINGLES_COLUMN) if SHINGLES_COLUMN in documents.columns
              else shingle_hashes("text", tokenisation))  # made with the fingerprints, or here
    sets = (documents.where(F.col("key").isNotNull() & F.col("text").isNotNull())
            .select("key", "si", hashes.alias("hashes"))
            .where(F.size("hashes") > 0))  # fmt: skip
    # Checkpointed: the shingles are hashed (or read) once, before the one shuffle.
    return (sets.groupBy("hashes")
            .agg(F.min("key").alias("gid"), F.count("*").alias("n"),
                 F.collect_list(F.struct("key", "si")).alias("members"))
            .withColumn("size", F.size("hashes"))
            # A number for each group: the joins below compare numbers, not keys.
            .withColumn("node", F.monotonically_increasing_id())
            .localCheckpoint())  # fmt: skip


def _prefix_length(t: float) -> Column:
    """The length of a set's prefix: ``|x| - ceil(t |x|) + 1``."""
    return F.col("size") - _at_least(t, F.col("size")) + 1


def _prefixes_by_joins(groups: DataFrame, t: float) -> tuple[DataFrame, DataFrame]:
    """``(node, size, position, token)`` of the groups' prefix shingles (``position``: in
    the set, in the global order, from 0), the order made by joins on the cluster; and
    ``(node, size, gid, tokens)``, the sets whose overlaps are counted (``node``: a
    number of the group, for the joins)."""
    tokens = groups.select("node", "size", F.explode("hashes").alias("token"))
    frequency = tokens.groupBy("token").agg(F.count("*").alias("groups"))
    ordered = (tokens.join(frequency, "token")
               .groupBy("node", "size")
               .agg(F.sort_array(F.collect_list(F.struct("groups", "token"))).alias("order")))
    first_tokens = F.slice("order", F.lit(1), _prefix_length(t)).getField("token")
    prefixes = ordered.select("node", "size",
                              F.posexplode(first_tokens).alias("position", "token"))  # fmt: skip
    return prefixes, groups.select("node", "size", "gid", F.col("hashes").alias("tokens"))


Ranking = tuple[npt.NDArray[np.int64], npt.NDArray[np.int32]]


def _ranking(groups: DataFrame, limit: int) -> Ranking | None:
    """The shingles of two groups or more, ascending, and the rank of each in the global
    order (fewest groups first, then the hash); None when there are more than ``limit``.

    A shingle of one group alone pairs no groups: it comes before all of these
    in the order, and is left out of both.
    """
    shared = (groups.select(F.explode("hashes").alias("token"))
              .groupBy("token").agg(F.count("*").alias("groups"))
              .where(F.col("groups") > 1))  # fmt: skip
    spark = groups.sparkSession
    arrow = "spark.sql.execution.arrow.pyspark.enabled"
    before = spark.conf.get(arrow)
    spark.conf.set(arrow, "true")
    try:
        # Counted by collecting one row more than the limit at most: too many, in the job
        # that collects them, without a count of its own.
        table: pd.DataFrame = shared.limit(limit + 1).toPandas()
    finally:
        spark.conf.set(arrow, before or "false")
    if len(table) > limit:
        return None
    tokens = table["token"].to_numpy(dtype=np.int64)
    counts = table["groups"].to_numpy(dtype=np.int64)
    ranks = np.empty(len(tokens), dtype=np.int32)
    ranks[np.lexsort((tokens, counts))] = np.arange(len(tokens), dtype=np.int32)
    by_token = np.argsort(tokens, kind="stable")
    return tokens[by_token], ranks[by_token]


_PREPARED = StructType([StructField("prefix", ArrayType(IntegerType())),
                        StructField("shared", ArrayType(IntegerType())),
                        StructField("alone", IntegerType())])  # fmt: skip


def _prepare_batch(ranking: Broadcast[Ranking]) -> Callable[[pd.Series, pd.Series],
                                                            pd.DataFrame]:  # fmt: skip
    """The body of the UDF: each set's shared shingles as ranks, ascending, its prefix of
    them, and how many shingles of its own come before them in the order."""

    def prepare(hashes: pd.Series, lengths: pd.Series) -> pd.DataFrame:
        tokens, ranks = ranking.value
        sets = [np.asarray(values, dtype=np.int64) for values in hashes.tolist()]
        sizes = np.array([len(values) for values in sets], dtype=np.int64)
        # All the batch's shingles looked up at once, then cut back into sets.
        values = np.concatenate(sets) if sets else np.zeros(0, dtype=np.int64)
        at = np.minimum(np.searchsorted(tokens, values), max(len(tokens) - 1, 0))
        found = tokens[at] == values if len(tokens) else np.zeros(len(values), bool)
        owner = np.repeat(np.arange(len(sets), dtype=np.int64), sizes)[found]
        # Ascending by set, then by rank (ranks are below 2**31).
        order = np.sort((owner << 32) | ranks[at[found]].astype(np.int64))
        mine = (order & 0xFFFFFFFF).astype(np.int32)
        counts = np.bincount(owner, minlength=len(sets))
        shared = np.split(mine, np.cumsum(counts)[:-1]) if len(sets) else []
        alone = sizes - counts  # first in the order, and pair nothing
        prefixes = [ranked[: max(0, length - before)] for ranked, length, before in
                    zip(shared, lengths.tolist(), alone.tolist(), strict=True)]  # fmt: skip
        return pd.DataFrame({"prefix": prefixes, "shared": shared, "alone": alone.tolist()},
                            index=hashes.index)  # fmt: skip

    return prepare


def _prefixes_by_ranks(groups: DataFrame, t: float,
                       ranking: Ranking) -> tuple[DataFrame, DataFrame]:  # fmt: skip
    """As :func:`_prefixes_by_joins`, the order broadcast: ranks (``int``) for hashes,
    and only the shingles of two groups or more, in prefixes and in the sets."""
    broadcast = groups.sparkSession.sparkContext.broadcast(ranking)
    udf = pandas_udf(_prepare_batch(broadcast),  # type: ignore[call-overload]
                     _PREPARED).asNondeterministic()  # evaluated once, not once per field
    prepared = (groups.select("node", "size", "gid",
                              udf("hashes", _prefix_length(t)).alias("p"))
                .select("node", "size", "gid", "p.prefix", "p.shared", "p.alone")
                .localCheckpoint())  # fmt: skip
    prefixes = prepared.select("node", "size", "alone", F.posexplode("prefix")).select(
        "node", "size", (F.col("alone") + F.col("pos")).alias("position"),
        F.col("col").alias("token"))
    return prefixes, prepared.select("node", "size", "gid", F.col("shared").alias("tokens"))


def _prefixes(groups: DataFrame, t: float,
              max_broadcast: int) -> tuple[DataFrame, DataFrame]:  # fmt: skip
    ranking = _ranking(groups, max_broadcast)
    if ranking is None:
        return _prefixes_by_joins(groups, t)
    return _prefixes_by_ranks(groups, t, ranking)


def _prefix_join(prefixes: DataFrame, t: float) -> DataFrame:
    """``(ga, gb, sa, sb, pa, pb)``: the rows of the join of the groups' prefixes on their
    shingles, ``ga < gb``, sizes allowing ``t``; a pair once per prefix shingle it shares,
    at ``pa`` in a and ``pb`` in b.

    A set probes with its prefix only the first ``|y| - ceil(2t / (1 + t) |y|) + 1``
    shingles of the sets ``y`` not larger than itself (equal sizes: ``y`` the
    larger key), which two sets at least ``t`` similar share too (the
    *indexing prefix* of AllPairs, Bayardo et al.): each pair comes from one
    side, from fewer rows.
    """
    index_length = F.col("size") - _at_least(2 * t / (1 + t), F.col("size")) + 1
    probe = prefixes.select("token", F.col("node").alias("gx"), F.col("size").alias("sx"),
                            F.col("position").alias("px"))  # fmt: skip
    index = prefixes.where(F.col("position") < index_length).select(
        "token", F.col("node").alias("gy"), F.col("size").alias("sy"),
        F.col("position").alias("py"))
    smaller = (F.col("sy") < F.col("sx")) | (
        (F.col("sy") == F.col("sx")) & (F.col("gx") < F.col("gy")))
    forward = F.col("gx") < F.col("gy")
    return (probe.join(index, "token")
            .where(smaller & (F.col("sy") >= _at_least(t, F.col("sx"))))
            .select(*(F.when(forward, F.col(x)).otherwise(F.col(y)).alias(name)
                      for name, x, y in (("ga", "gx", "gy"), ("gb", "gy", "gx"),
                                         ("sa", "sx", "sy"), ("sb", "sy", "sx"),
                                         ("pa", "px", "py"), ("pb", "py", "px")))))  # fmt: skip


def _candidates(prefixes: DataFrame, t: float) -> DataFrame:
    """``(ga, gb, sa, sb)``: each pair of groups of the prefix join once, unless its overlap
    cannot reach ``t`` (the positional filter of PPJoin, Xiao et al., WWW 2008).

    The shingles the two sets share up to their last shared prefix shingle
    (at ``pa`` in a, ``pb`` in b) are all prefix shingles of both, counted by
    the join (``c``); after it, at most ``min(|a| - pa - 1, |b| - pb - 1)``
    more.  Resemblance ``t`` needs an overlap of ``t (|a| + |b|) / (1 + t)``.
    """
    pairs = _prefix_join(prefixes, t).groupBy("ga", "gb", "sa", "sb").agg(
        F.count("*").alias("c"), F.max("pa").alias("pa"), F.max("pb").alias("pb"))
    most = F.col("c") + F.least(F.col("sa") - F.col("pa"), F.col("sb") - F.col("pb")) - 1
    needed = F.lit(t / (1 + t)) * (F.col("sa") + F.col("sb")) - F.lit(OVERLAP_SLACK)
    return pairs.where(most >= needed).select("ga", "gb", "sa", "sb")


def resemblance_candidates(documents: DataFrame, min_similarity: float,
                           max_broadcast: int = MAX_BROADCAST_TOKENS,
                           tokenisation: int = 1) -> DataFrame:  # fmt: skip
    """``(ga, gb)``: the rows of the prefix join before the overlaps are counted.

    ``documents`` is ``(key, si, text)``.  Their number is the work of the
    join (as :func:`nearsim.spark.search.band_candidates`'s is of a
    distance search).
    """
    t = _check_threshold(min_similarity)
    groups = _groups(documents, tokenisation)
    return _prefix_join(_prefixes(groups, t, max_broadcast)[0], t).select("ga", "gb")


def _ranked(tokens: DataFrame) -> bool:
    """Whether the sets ``tokens`` are ranks (``array<int>``), not hashes."""
    element = tokens.schema["tokens"].dataType
    return isinstance(element, ArrayType) and isinstance(element.elementType, IntegerType)


def _broadcastable(tokens: DataFrame) -> bool:
    """Whether the sets ``tokens`` take at most 1/:data:`BROADCAST_HEAP_SHARE` of the
    driver JVM's heap (where a broadcast table is built)."""
    width = 4 if _ranked(tokens) else 8
    try:
        jvm: Any = tokens.sparkSession.sparkContext._jvm
        heap = int(jvm.java.lang.Runtime.getRuntime().maxMemory())
    except Exception:
        return False
    row = tokens.select(F.sum(F.size("tokens")).cast("long"), F.count("*")).first()
    elements, groups = (int(row[0] or 0), int(row[1])) if row is not None else (0, 0)
    return (elements * width + groups * ROW_BYTES) * BROADCAST_HEAP_SHARE <= heap


def resemblance_pairs(documents: DataFrame, min_similarity: float,
                      max_broadcast: int = MAX_BROADCAST_TOKENS, tokenisation: int = 1,
                      ) -> tuple[DataFrame, DataFrame, DataFrame]:  # fmt: skip
    """The groups of equal sets and their pairs at least ``min_similarity`` similar.

    ``documents`` is ``(key, si, text)``.  Returns ``members`` ``(gid, key,
    si)``, ``sizes`` ``(gid, n)`` and ``pairs`` ``(ga, gb, distance,
    sim_ab, sim_ba, short)`` with ``ga < gb`` for two groups and ``ga =
    gb`` for the pairs inside a group (``distance`` NULL: each pair of
    documents takes its own).  The order of the shingles is ranked on the
    driver and broadcast when at most ``max_broadcast`` shingles are in two
    groups or more, else made by joins on the cluster.  The shingles are those
    of ``tokenisation`` (2: profiles of version 2), unless ``documents`` brings
    them.
    """
    t = _check_threshold(min_similarity)
    groups = _groups(documents, tokenisation)
    prefixes, tokens = _prefixes(groups, t, max_broadcast)
    candidates = _candidates(prefixes, t)
    keys_a = tokens.select(F.col("node").alias("ga"), F.col("gid").alias("key_a"))
    if _ranked(tokens) and _broadcastable(tokens):
        # Ranks: counted with numpy on the broadcast sets (:mod:`nearsim.spark.overlaps`).
        sets = groups.sparkSession.sparkContext.broadcast(collect_sets(tokens))
        measured = overlaps(candidates, sets)
        keys_a = F.broadcast(keys_a)
    else:
        tokens_a = tokens.select(F.col("node").alias("ga"), F.col("tokens").alias("ha"))
        if _broadcastable(tokens):
            tokens_a = F.broadcast(tokens_a)  # no shuffle of two sets for each candidate pair
            keys_a = F.broadcast(keys_a)
        tokens_b = tokens_a.select(F.col("ga").alias("gb"), F.col("ha").alias("hb"))
        measured = (candidates.join(tokens_a, "ga").join(tokens_b, "gb")
                    .select("ga", "gb", "sa", "sb",
                            F.size(F.array_intersect("ha", "hb")).alias("common")))  # fmt: skip
    # As the server: (double) common / (double) (|A| + |B| - common).
    similarity = F.col("common").cast("double") / (
        F.col("sa") + F.col("sb") - F.col("common")).cast("double")
    passing = measured.select(
        "ga", "gb", similarity.alias("sim"),
        ((F.col("sa") < SHORT_SHINGLES) | (F.col("sb") < SHORT_SHINGLES)).alias("short"),
    ).where(F.col("sim") >= F.lit(t))
    keys_b = keys_a.select(F.col("ga").alias("gb"), F.col("key_a").alias("key_b"))
    between = passing.join(keys_a, "ga").join(keys_b, "gb").select(
        F.least("key_a", "key_b").alias("ga"), F.greatest("key_a", "key_b").alias("gb"),
        "sim", "short")
    within = groups.where(F.col("n") > 1).select(
        F.col("gid").alias("ga"), F.col("gid").alias("gb"), F.lit(1.0).alias("sim"),
        (F.col("size") < SHORT_SHINGLES).alias("short"))
    pairs = between.unionByName(within).select(
        "ga", "gb", F.lit(None).cast("int").alias("distance"), F.col("sim").alias("sim_ab"),
        F.col("sim").alias("sim_ba"), "short")
    members = groups.select("gid", F.explode("members").alias("m")).select(
        "gid", F.col("m.key").alias("key"), F.col("m.si").alias("si"))
    return members, groups.select("gid", "n"), pairs
