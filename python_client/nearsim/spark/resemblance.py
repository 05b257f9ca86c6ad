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
   candidates; rare shingles make short lists.
3. Each candidate pair of groups (once, however many prefix shingles they
   share) has its overlap counted in the JVM (``array_intersect``) and is
   kept when its resemblance, computed as the server computes it, is at
   least ``t``.
4. The pairs of groups are expanded into pairs of documents
   (:meth:`nearsim.spark.search.GroupPairs.expand`), each with the distance
   of the two documents' own fingerprints (NULL when either has none).
"""

from __future__ import annotations

import numpy as np
import pandas as pd  # type: ignore[import-untyped]
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql.pandas.functions import pandas_udf
from pyspark.sql.types import ArrayType, LongType, StringType

from ..core.fingerprint import _feature_hashes
from ..core.measures import SHORT_SHINGLES

__all__ = ["exact_resemblance", "resemblance_candidates", "resemblance_pairs", "shingle_hashes"]

BOUND_SLACK = 1e-9
"""Taken off ``t x`` before rounding up, as the server does, so that
rounding never makes a size or prefix bound too tight."""


def exact_resemblance(measure: str, max_distance: int | None,
                      min_similarity: float | None) -> bool:  # fmt: skip
    """Whether ``nearsim_pairs_verified`` answers by the exact join (as the server decides)."""
    return (measure == "s_r" and max_distance is None and min_similarity is not None
            and 0 < min_similarity <= 1)  # fmt: skip


def _hash_sets(texts: pd.Series) -> pd.Series:
    """The body of the UDF: each text's distinct shingle hashes, ascending as unsigned."""
    sets: list[np.ndarray | None] = []
    for text in texts.tolist():
        if text is None:
            sets.append(None)
            continue
        pieces = list(_feature_hashes(str(text)))
        unique = np.unique(np.concatenate(pieces)) if pieces else np.array([], np.uint64)
        sets.append(unique.view(np.int64))
    return pd.Series(sets, index=texts.index, dtype=object)


def shingle_hashes(text: Column | str) -> Column:
    """A column of the distinct 64-bit hashes of the word 3-shingles of ``text``
    (as signed ``bigint``; empty for a text without words, NULL for NULL)."""
    udf = pandas_udf(_hash_sets, ArrayType(LongType()))  # type: ignore[call-overload]
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


def _sets_and_groups(documents: DataFrame) -> tuple[DataFrame, DataFrame]:
    """``(key, si, hashes)`` of the documents with words, and ``(hashes, gid, n, size)``
    of their distinct sets; both made once."""
    sets = (documents.where(F.col("key").isNotNull() & F.col("text").isNotNull())
            .select("key", "si", shingle_hashes("text").alias("hashes"))
            .where(F.size("hashes") > 0)
            .localCheckpoint())  # the shingles are hashed once  # fmt: skip
    groups = (sets.groupBy("hashes")
              .agg(F.min("key").alias("gid"), F.count("*").alias("n"))
              .withColumn("size", F.size("hashes"))
              .localCheckpoint())  # fmt: skip
    return sets, groups


def _prefix_join(groups: DataFrame, t: float) -> DataFrame:
    """``(ga, gb)``: the rows of the join of the groups' prefixes on their shingles,
    ``ga < gb``, sizes allowing ``t``; a pair once per prefix shingle it shares."""
    tokens = groups.select("gid", "size", F.explode("hashes").alias("token"))
    frequency = tokens.groupBy("token").agg(F.count("*").alias("groups"))
    ordered = (tokens.join(frequency, "token")
               .groupBy("gid", "size")
               .agg(F.sort_array(F.collect_list(F.struct("groups", "token"))).alias("order")))
    prefix = F.col("size") - _at_least(t, F.col("size")) + 1
    first_tokens = F.slice("order", F.lit(1), prefix).getField("token")
    prefixes = ordered.select("gid", "size", F.explode(first_tokens).alias("token"))
    left = prefixes.select("token", F.col("gid").alias("ga"), F.col("size").alias("sa"))
    right = prefixes.select("token", F.col("gid").alias("gb"), F.col("size").alias("sb"))
    smaller, larger = F.least("sa", "sb"), F.greatest("sa", "sb")
    return (left.join(right, "token")
            .where((F.col("ga") < F.col("gb")) & (smaller >= _at_least(t, larger)))
            .select("ga", "gb"))  # fmt: skip


def resemblance_candidates(documents: DataFrame, min_similarity: float) -> DataFrame:
    """``(ga, gb)``: the rows of the prefix join before the overlaps are counted.

    ``documents`` is ``(key, si, text)``.  Their number is the work of the
    join (as :func:`nearsim.spark.search.band_candidates`'s is of a
    distance search).
    """
    _, groups = _sets_and_groups(documents)
    return _prefix_join(groups, _check_threshold(min_similarity))


def resemblance_pairs(documents: DataFrame, min_similarity: float) -> tuple[DataFrame, DataFrame,
                                                                            DataFrame]:  # fmt: skip
    """The groups of equal sets and their pairs at least ``min_similarity`` similar.

    ``documents`` is ``(key, si, text)``.  Returns ``members`` ``(gid, key,
    si)``, ``sizes`` ``(gid, n)`` and ``pairs`` ``(ga, gb, distance,
    sim_ab, sim_ba, short)`` with ``ga < gb`` for two groups and ``ga =
    gb`` for the pairs inside a group (``distance`` NULL: each pair of
    documents takes its own).
    """
    t = _check_threshold(min_similarity)
    sets, groups = _sets_and_groups(documents)
    candidates = _prefix_join(groups, t).distinct()
    hashes_a = groups.select(F.col("gid").alias("ga"), F.col("hashes").alias("ha"),
                             F.col("size").alias("sa"))  # fmt: skip
    hashes_b = groups.select(F.col("gid").alias("gb"), F.col("hashes").alias("hb"),
                             F.col("size").alias("sb"))  # fmt: skip
    common = F.size(F.array_intersect("ha", "hb"))
    measured = (candidates.join(hashes_a, "ga").join(hashes_b, "gb")
                .select("ga", "gb", "sa", "sb", common.alias("common")))  # fmt: skip
    # As the server: (double) common / (double) (|A| + |B| - common).
    similarity = F.col("common").cast("double") / (
        F.col("sa") + F.col("sb") - F.col("common")).cast("double")
    between = measured.select(
        "ga", "gb", similarity.alias("sim"),
        ((F.col("sa") < SHORT_SHINGLES) | (F.col("sb") < SHORT_SHINGLES)).alias("short"),
    ).where(F.col("sim") >= F.lit(t))
    within = groups.where(F.col("n") > 1).select(
        F.col("gid").alias("ga"), F.col("gid").alias("gb"), F.lit(1.0).alias("sim"),
        (F.col("size") < SHORT_SHINGLES).alias("short"))
    pairs = between.unionByName(within).select(
        "ga", "gb", F.lit(None).cast("int").alias("distance"), F.col("sim").alias("sim_ab"),
        F.col("sim").alias("sim_ba"), "short")
    members = sets.join(groups.select("hashes", "gid"), "hashes").select("gid", "key", "si")
    return members, groups.select("gid", "n"), pairs
