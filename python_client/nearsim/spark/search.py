"""Every pair of near-duplicate documents of a DataFrame, exactly, as distributed joins.

The answers are those of ``nearsim_pairs`` and ``nearsim_pairs_verified``:

1. Documents with the same fingerprint (verified: the same fingerprint and
   text) are collapsed into one *group*, named after its smallest key, so a
   million empty boilerplate documents are one row, not a million squared
   candidates in one task.
2. The distinct fingerprints are paired by the pigeonhole rule of the
   rotation index (:mod:`nearsim.core.bands`): the 64 bits are cut into
   bands; two fingerprints within k bits agree on some band within that
   band's radius.  Each fingerprint's band values (the *index*) are joined
   with the values within the radius of every fingerprint's bands (the
   *probes*), on band and value; never a cross join.  The full distance of
   each candidate is then checked, and a pair is kept only from the first
   band in which it qualifies, so no pair comes twice and none needs a
   ``distinct``.
3. The pairs of groups (and a group with itself, for its identical
   members) are expanded into pairs of documents: each group's members are
   cut into blocks of at most about :data:`BLOCK_SIZE` keys, pairs of
   blocks are listed first (small rows), spread over the cluster, and only
   then joined with the blocks' keys and exploded.  No task holds more than
   a few blocks' worth of pairs at once.

Keys are compared in Spark's order of their type: numbers as numbers (the
same as PostgreSQL's ``ORDER BY key``), strings by code point (as
PostgreSQL's ``COLLATE "C"``).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, replace
from itertools import combinations

import pandas as pd  # type: ignore[import-untyped]
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.pandas.functions import pandas_udf
from pyspark.sql.types import (
    BooleanType,
    DoubleType,
    IntegerType,
    LongType,
    StructField,
    StructType,
)

from ..core import calibration, measures
from ..core.bands import band_radius, band_width
from ..core.bits import BITS
from ..core.profiles import Profile, canonical
from .fingerprinting import DEFAULT_PROFILE, SHINGLES_COLUMN, simhash_column
from .resemblance import exact_resemblance, resemblance_pairs

__all__ = ["BLOCK_SIZE", "GroupPairs", "band_candidates", "choose_bands", "near_fingerprints",
           "pairs", "verified_pairs"]  # fmt: skip

BLOCK_SIZE = 1000
"""Members of a group are paired in blocks of about this many keys (at most
a million pairs per pair of blocks)."""

MAX_PROBES = 100_000
"""The most values probed for one band of one fingerprint."""

MAX_BANDS = 16

# Measures whose value does not depend on which text comes first: computed
# once per pair of groups.
_SYMMETRIC = frozenset({"s_r"})


def _check_distance(max_distance: int) -> int:
    if isinstance(max_distance, bool) or not isinstance(max_distance, int):
        raise TypeError(f"max_distance must be an int, not {type(max_distance).__name__}")
    if not 0 <= max_distance <= BITS:
        raise ValueError(f"max_distance must be between 0 and {BITS}, not {max_distance}")
    return max_distance


def _probe_count(width: int, radius: int) -> int:
    return sum(math.comb(width, bits) for bits in range(radius + 1))


def choose_bands(distinct: int, max_distance: int) -> int:
    """The number of bands that makes the join cheapest for ``distinct`` fingerprints.

    The cost counted is the rows of the join (every fingerprint's probes)
    plus the candidates it yields (probes that meet another fingerprint's
    band value, as if fingerprints were random).  Few wide bands probe many
    values each; many narrow bands (every radius 0 from ``k + 1`` bands on)
    probe one value each but meet many fingerprints by chance.
    """
    _check_distance(max_distance)
    best, best_cost = MAX_BANDS, math.inf
    for bands in range(1, min(max_distance + 1, MAX_BANDS) + 1):
        cost = 0.0
        for band in range(bands):
            radius = band_radius(max_distance, bands, band)
            if radius < 0:
                continue
            width = band_width(bands, band)
            probes = _probe_count(width, radius)
            if probes > MAX_PROBES:
                cost = math.inf
                break
            cost += distinct * (probes + 1) + distinct * probes * distinct / 2.0**width
        if cost < best_cost:
            best, best_cost = bands, cost
    return best


@dataclass(frozen=True)
class _Band:
    number: int
    shift: int
    width: int
    radius: int

    @property
    def mask(self) -> int:
        return -1 if self.width == BITS else (1 << self.width) - 1

    def value(self, fingerprint: Column) -> Column:
        return F.shiftrightunsigned(fingerprint, self.shift).bitwiseAND(
            F.lit(self.mask).cast(LongType()))

    def probe_masks(self) -> list[int]:
        """Every value of the band's width with at most ``radius`` bits set (as ``bigint``)."""
        values = [
            sum(1 << bit for bit in chosen)
            for bits in range(self.radius + 1)
            for chosen in combinations(range(self.width), bits)
        ]
        return [value - (1 << BITS) if value >= 1 << (BITS - 1) else value for value in values]


def _xor_with(value: Column) -> Callable[[Column], Column]:
    """``mask -> value ^ mask`` (a one-argument function, as ``transform`` needs)."""

    def xor(mask: Column) -> Column:
        return value.bitwiseXOR(mask)

    return xor


def _layout(bands: int, max_distance: int) -> list[_Band]:
    """The bands that are probed, most significant first (as :mod:`nearsim.core.bands`)."""
    layout = []
    offset = 0
    for band in range(bands):
        width = band_width(bands, band)
        radius = band_radius(max_distance, bands, band)
        if radius >= 0:
            layout.append(_Band(band, BITS - offset - width, width, radius))
        offset += width
    return layout


def _session(df: DataFrame) -> SparkSession:
    return df.sparkSession


def _empty_pairs(spark: SparkSession) -> DataFrame:
    schema = StructType([StructField("x", LongType()), StructField("y", LongType()),
                         StructField("distance", IntegerType())])  # fmt: skip
    return spark.createDataFrame([], schema)


def band_candidates(values: DataFrame, max_distance: int, bands: int | None = None,
                    column: str = "si") -> tuple[DataFrame, list[_Band]]:  # fmt: skip
    """``(band, value, x, y)``: the rows of the join of probes and index, ``x < y``,
    before their distance is checked; and the layout of the bands.

    Their number is the work of the search (``max_distance`` at least 1).
    """
    if bands is None:
        bands = choose_bands(values.count(), max_distance)
    if not 1 <= bands <= MAX_BANDS:
        raise ValueError(f"bands must be between 1 and {MAX_BANDS}, not {bands}")
    fingerprint = F.col(column)
    layout = _layout(bands, max_distance)
    index = _banded(values, layout, fingerprint, "y", probing=False)
    probes = _banded(values, layout, fingerprint, "x", probing=True)
    return probes.join(index, ["band", "value"]).where(F.col("x") < F.col("y")), layout


def _banded(values: DataFrame, layout: list[_Band], fingerprint: Column, name: str,
            probing: bool) -> DataFrame:  # fmt: skip
    """``(band, value, name)``: each fingerprint's value in every band (``probing``: every
    value within the band's radius of it), from one pass over ``values``.

    One pass, not one select per band joined by a union: each select would read
    ``values`` again, and the optimiser, pushing each band's own filter below the
    aggregation that made ``values``, would make it again for every band.
    """
    lists = []
    for band in layout:
        value = band.value(fingerprint)
        if probing and band.radius > 0:
            masks = F.lit(band.probe_masks()).cast("array<bigint>")
            found = F.transform(masks, _xor_with(value))
        else:
            found = F.array(value)
        lists.append(F.transform(found, _in_band(band.number)))
    return values.select(F.explode(F.concat(*lists)).alias("b"), fingerprint.alias(name)).select(
        "b.band", "b.value", name)


def _in_band(number: int) -> Callable[[Column], Column]:
    """``value -> (band, value)`` (a one-argument function, as ``transform`` needs)."""

    def pair(value: Column) -> Column:
        return F.struct(F.lit(number).alias("band"), value.alias("value"))

    return pair


def near_fingerprints(values: DataFrame, max_distance: int, bands: int | None = None,
                      column: str = "si") -> DataFrame:  # fmt: skip
    """``(x, y, distance)``: every pair of the distinct fingerprints ``values``
    within ``max_distance`` bits, ``x < y`` (as signed ``bigint``), each once.

    ``values`` must hold each fingerprint once (no NULL).  ``bands`` chooses
    the layout; by default :func:`choose_bands` does, from their number.
    """
    _check_distance(max_distance)
    if max_distance == 0:
        return _empty_pairs(_session(values))
    candidates, layout = band_candidates(values, max_distance, bands, column)
    xor = F.col("x").bitwiseXOR(F.col("y"))
    first: Column | None = None
    for band in reversed(layout):
        qualifies = F.bit_count(band.value(xor)) <= band.radius
        first = F.when(qualifies, F.lit(band.number)) if first is None else F.when(
            qualifies, F.lit(band.number)).otherwise(first)
    assert first is not None
    distance = F.bit_count(xor).cast(IntegerType())
    return candidates.where((distance <= max_distance) & (first == F.col("band"))).select(
        "x", "y", distance.alias("distance"))


@dataclass(frozen=True)
class GroupPairs:
    """Near-duplicate documents, collapsed: groups of identical ones, and pairs of groups.

    ``members`` is ``(gid, key)``, every document of a group (``gid`` is its
    smallest key); ``sizes`` is ``(gid, n)``; ``pairs`` is ``(ga, gb,
    distance, ...)`` with ``ga < gb`` for two groups and ``ga = gb`` for
    the pairs inside a group.  Verified pairs also carry ``sim_ab``
    (``measure(text of ga, text of gb)``), ``sim_ba`` and ``short``.  With
    ``document_distance``, the members of a group may have different
    fingerprints (groups of equal shingle sets): ``members`` is ``(gid,
    key, si)`` and each pair of documents takes the distance of its own
    fingerprints.  ``both_ways``: every verified pair passes in both
    directions (``sim_ab`` and ``sim_ba`` at least ``min_similarity``, as
    the pairs of a symmetric measure all do), so every pair of documents
    of two linked groups is reported, whatever the order of their keys.
    """

    members: DataFrame
    sizes: DataFrame
    pairs: DataFrame
    min_similarity: float | None = None
    document_distance: bool = False
    both_ways: bool = False

    def count(self) -> int:
        """The number of document pairs, counted without making them where possible."""
        sized = (self.pairs
                 .join(self.sizes.select(F.col("gid").alias("ga"), F.col("n").alias("na")), "ga")
                 .join(self.sizes.select(F.col("gid").alias("gb"), F.col("n").alias("nb")), "gb"))
        count = F.when(F.col("ga") == F.col("gb"), F.col("na") * (F.col("na") - 1) / 2).otherwise(
            F.col("na") * F.col("nb"))  # fmt: skip
        if self.min_similarity is None or self.both_ways:
            # Every pair of documents of each pair of groups is reported.
            total = sized.select(F.sum(count).cast(LongType())).first()
            return int(total[0] or 0) if total is not None else 0
        both = F.least("sim_ab", "sim_ba") >= self.min_similarity
        counted = sized.where(both).select(F.sum(count).cast(LongType()).alias("n"))
        # The pairs that pass one way only are made to be counted: in the same job.
        one_way = replace(self, pairs=self.pairs.where(~both)).expand().select(
            F.count("*").cast(LongType()).alias("n"))
        total = counted.unionByName(one_way).select(F.sum("n")).first()
        return int(total[0] or 0) if total is not None else 0

    def expand(self) -> DataFrame:
        """The pairs of documents: ``(a, b, distance)`` (verified: ``similarity``, ``short``)."""
        blocks_of = self.sizes.select(
            "gid", F.ceil(F.col("n") / BLOCK_SIZE).cast(IntegerType()).alias("blocks"))
        keyed = self.members.join(blocks_of, "gid").select(
            "gid", F.pmod(F.xxhash64("key"), F.col("blocks")).cast(IntegerType()).alias("block"),
            "key", *(["si"] if self.document_distance else []))  # fmt: skip
        member = F.struct("key", "si") if self.document_distance else F.col("key")
        blocks = keyed.groupBy("gid", "block").agg(F.collect_list(member).alias("keys"))
        listed = (
            self.pairs
            .join(blocks_of.select(F.col("gid").alias("ga"), F.col("blocks").alias("blocks_a")),
                  "ga")
            .join(blocks_of.select(F.col("gid").alias("gb"), F.col("blocks").alias("blocks_b")),
                  "gb")
            .withColumn("ba", F.explode(F.sequence(F.lit(0), F.col("blocks_a") - 1)))
            .withColumn("bb", F.explode(F.sequence(F.lit(0), F.col("blocks_b") - 1)))
            .where((F.col("ga") != F.col("gb")) | (F.col("ba") <= F.col("bb")))
            .drop("blocks_a", "blocks_b")
        )  # fmt: skip
        joined = (
            listed
            .join(blocks.select(F.col("gid").alias("ga"), F.col("block").alias("ba"),
                                F.col("keys").alias("keys_a")), ["ga", "ba"])
            .join(blocks.select(F.col("gid").alias("gb"), F.col("block").alias("bb"),
                                F.col("keys").alias("keys_b")), ["gb", "bb"])
        )  # fmt: skip
        exploded = (
            joined.withColumn("key_a", F.explode("keys_a")).drop("keys_a")
            .withColumn("key_b", F.explode("keys_b")).drop("keys_b")
        )  # fmt: skip
        distance = F.col("distance")
        if self.document_distance:
            exploded = exploded.withColumns({
                "si_a": F.col("key_a.si"), "si_b": F.col("key_b.si"),
                "key_a": F.col("key_a.key"), "key_b": F.col("key_b.key")})  # fmt: skip
            distance = F.bit_count(F.col("si_a").bitwiseXOR(F.col("si_b"))).cast(IntegerType())
        exploded = exploded.where((F.col("ga") != F.col("gb")) | (F.col("ba") != F.col("bb"))
                                  | (F.col("key_a") < F.col("key_b")))  # fmt: skip
        forward = F.col("key_a") < F.col("key_b")
        columns = [
            F.least("key_a", "key_b").alias("a"), F.greatest("key_a", "key_b").alias("b"),
            distance.alias("distance"),
        ]
        if self.min_similarity is None:
            return exploded.select(*columns)
        similarity = F.when(forward, F.col("sim_ab")).otherwise(F.col("sim_ba"))
        return exploded.select(*columns, similarity.alias("similarity"), "short").where(
            F.col("similarity") >= self.min_similarity)


def _documents(df: DataFrame, key_column: str, fingerprint_column: str, text_column: str | None,
               profile: str, keep_text: bool = False) -> DataFrame:  # fmt: skip
    """``(key, si[, text])`` of the documents with a key and a fingerprint."""
    fingerprint = _fingerprint_of(df, fingerprint_column, text_column, profile)
    columns = [F.col(key_column).alias("key"), fingerprint.alias("si")]
    if keep_text and text_column is not None:
        columns.append(F.col(text_column).cast("string").alias("text"))
    docs = df.select(*columns).where(F.col("key").isNotNull() & F.col("si").isNotNull())
    if fingerprint_column not in df.columns:
        # Computed here: once, not again in each branch of the joins that read it.
        docs = docs.localCheckpoint()
    return docs


def _fingerprint_of(df: DataFrame, fingerprint_column: str, text_column: str | None,
                    profile: str) -> Column:  # fmt: skip
    if fingerprint_column in df.columns:
        return F.col(fingerprint_column)
    if text_column is None:
        raise ValueError(f"no column {fingerprint_column!r}: add it with"
                         " nearsim.spark.fingerprints")
    return simhash_column(text_column, profile)


def hamming_groups(df: DataFrame, key_column: str, max_distance: int = 6,
                   fingerprint_column: str = "si", bands: int | None = None,
                   text_column: str | None = None,
                   profile: str = DEFAULT_PROFILE) -> GroupPairs:  # fmt: skip
    """The pairs of :func:`pairs`, collapsed (:class:`GroupPairs`)."""
    _check_distance(max_distance)
    docs = _documents(df, key_column, fingerprint_column, text_column, profile)
    groups = docs.groupBy("si").agg(F.min("key").alias("gid"), F.count("*").alias("n"))
    near = near_fingerprints(groups.select("si"), max_distance, bands)
    gid_x = groups.select(F.col("si").alias("x"), F.col("gid").alias("gx"))
    gid_y = groups.select(F.col("si").alias("y"), F.col("gid").alias("gy"))
    between = near.join(gid_x, "x").join(gid_y, "y").select(
        F.least("gx", "gy").alias("ga"), F.greatest("gx", "gy").alias("gb"), "distance")
    within = groups.where(F.col("n") > 1).select(
        F.col("gid").alias("ga"), F.col("gid").alias("gb"), F.lit(0).alias("distance"))
    members = docs.join(groups.select("si", "gid"), "si").select("gid", "key")
    return GroupPairs(members, groups.select("gid", "n"), between.unionByName(within))


def pairs(df: DataFrame, key_column: str, max_distance: int = 6, fingerprint_column: str = "si",
          bands: int | None = None) -> DataFrame:  # fmt: skip
    """``(a, b, distance)``: every pair of documents within ``max_distance`` bits.

    The rows of ``SELECT * FROM nearsim_pairs(tbl, max_distance)`` on the
    same documents, with the keys in their own type (``nearsim_pairs`` gives
    them as text): ``a < b``, each pair once, documents with equal
    fingerprints paired with each other at distance 0.  Rows with a NULL key
    or fingerprint take no part; keys must be unique.  ``bands`` chooses the
    layout of the join (by default from the number of distinct
    fingerprints).
    """
    return hamming_groups(df, key_column, max_distance, fingerprint_column, bands).expand()


_MEASURED = StructType([StructField("sim_ab", DoubleType()), StructField("sim_ba", DoubleType()),
                        StructField("short", BooleanType())])  # fmt: skip


def _measure_batch(measure: str, tokenisation: int) -> Callable[[pd.Series, pd.Series],
                                                                 pd.DataFrame]:  # fmt: skip
    symmetric = measure in _SYMMETRIC

    def measure_batch(first: pd.Series, second: pd.Series) -> pd.DataFrame:
        forward, backward, short = [], [], []
        for a_text, b_text in zip(first.tolist(), second.tolist(), strict=True):
            a = measures.Shingled(a_text or "", tokenisation)
            b = measures.Shingled(b_text or "", tokenisation)
            value = measures.verified_measure(measure, a, b)
            forward.append(value)
            backward.append(value if symmetric else measures.verified_measure(measure, b, a))
            short.append(a.short or b.short)
        return pd.DataFrame({"sim_ab": forward, "sim_ba": backward, "short": short},
                            index=first.index)  # fmt: skip

    return measure_batch


def verified_radius(min_similarity: float, measure: str, max_distance: int | None,
                    profile: str = DEFAULT_PROFILE) -> int:  # fmt: skip
    """The radius ``nearsim_pairs_verified`` takes candidates from, its arguments checked."""
    if measure not in measures.VERIFIED_MEASURES:
        raise ValueError(f"unknown measure {measure!r}: use one of"
                         f" {', '.join(measures.VERIFIED_MEASURES)}")  # fmt: skip
    if min_similarity is None or not 0 <= min_similarity <= 1:
        raise ValueError(f"min_similarity must be between 0 and 1, not {min_similarity}")
    if max_distance is not None:
        return _check_distance(max_distance)
    try:
        return calibration.radius_for(min_similarity, canonical(profile))
    except (ValueError, calibration.NotCalibrated) as error:
        raise ValueError(f"{error} (pass max_distance to choose the radius yourself)") from error


def verified_groups(df: DataFrame, key_column: str, text_column: str,
                    min_similarity: float = 0.8, measure: str = "s_r",
                    max_distance: int | None = None, profile: str = DEFAULT_PROFILE,
                    fingerprint_column: str = "si",
                    bands: int | None = None) -> GroupPairs:  # fmt: skip
    """The pairs of :func:`verified_pairs`, collapsed (:class:`GroupPairs`).

    Groups are documents of equal fingerprint and equal text: their measure
    is computed once, however many documents share them.  With the measure
    ``s_r`` and no ``max_distance``, as ``nearsim_pairs_verified`` does, the
    pairs are found by the exact set-similarity join of
    :mod:`nearsim.spark.resemblance` instead, whatever their distance
    (groups are then documents of equal shingle sets).
    """
    # the words of the profile's version, as a table of that profile is measured
    tokenisation = Profile.named(profile).version
    if exact_resemblance(measure, max_distance, min_similarity):
        # No radius, so no calibration needed (as in the server).
        fingerprint = _fingerprint_of(df, fingerprint_column, text_column, profile)
        shingles = [SHINGLES_COLUMN] if SHINGLES_COLUMN in df.columns else []
        documents = df.select(F.col(key_column).alias("key"), fingerprint.alias("si"),
                              F.col(text_column).cast("string").alias("text"),
                              *shingles)  # fmt: skip
        members, sizes, found = resemblance_pairs(documents, min_similarity,
                                                  tokenisation=tokenisation)
        return GroupPairs(members, sizes, found, float(min_similarity), document_distance=True,
                          both_ways=True)  # one resemblance each way, kept when it passes
    radius = verified_radius(min_similarity, measure, max_distance, profile)
    docs = _documents(df, key_column, fingerprint_column, text_column, profile, keep_text=True)
    groups = docs.groupBy("si", "text").agg(F.min("key").alias("gid"), F.count("*").alias("n"))
    near = near_fingerprints(groups.select("si").distinct(), radius, bands)
    side_x = groups.select(F.col("si").alias("x"), F.col("gid").alias("gx"),
                           F.col("text").alias("tx"))  # fmt: skip
    side_y = groups.select(F.col("si").alias("y"), F.col("gid").alias("gy"),
                           F.col("text").alias("ty"))  # fmt: skip
    between = near.join(side_x, "x").join(side_y, "y").select("gx", "tx", "gy", "ty", "distance")
    same = side_x.join(side_y, (F.col("x") == F.col("y")) & (F.col("gx") < F.col("gy"))).select(
        "gx", "tx", "gy", "ty", F.lit(0).alias("distance"))
    within = groups.where(F.col("n") > 1).select(
        F.col("gid").alias("gx"), F.col("text").alias("tx"), F.col("gid").alias("gy"),
        F.col("text").alias("ty"), F.lit(0).alias("distance"))
    candidates = between.unionByName(same).unionByName(within)
    ordered = F.col("gx") <= F.col("gy")
    oriented = candidates.select(
        F.least("gx", "gy").alias("ga"), F.greatest("gx", "gy").alias("gb"), "distance",
        F.when(ordered, F.col("tx")).otherwise(F.col("ty")).alias("ta"),
        F.when(ordered, F.col("ty")).otherwise(F.col("tx")).alias("tb"))
    # Not deterministic in Spark's eyes, so that the optimiser evaluates it
    # once per pair rather than once per field of its result.
    udf = pandas_udf(_measure_batch(measure, tokenisation),  # type: ignore[call-overload]
                     _MEASURED).asNondeterministic()
    measured = oriented.select("ga", "gb", "distance", udf("ta", "tb").alias("m")).select(
        "ga", "gb", "distance", "m.sim_ab", "m.sim_ba", "m.short")
    passing = measured.where(F.greatest("sim_ab", "sim_ba") >= min_similarity)
    members = docs.join(groups.select("si", "text", "gid"), ["si", "text"]).select("gid", "key")
    # A symmetric measure's value is the same both ways: a pair that passes passes both ways.
    return GroupPairs(members, groups.select("gid", "n"), passing, float(min_similarity),
                      both_ways=measure in _SYMMETRIC)


def verified_pairs(df: DataFrame, key_column: str, text_column: str,
                   min_similarity: float = 0.8, measure: str = "s_r",
                   max_distance: int | None = None, profile: str = DEFAULT_PROFILE,
                   fingerprint_column: str = "si",
                   bands: int | None = None) -> DataFrame:  # fmt: skip
    """``(a, b, distance, similarity, short)``: pairs at least ``min_similarity`` similar.

    The rows of ``nearsim_pairs_verified(tbl, min_similarity, measure,
    max_distance)`` on the same documents: candidates within
    ``max_distance`` bits, by default the radius calibrated for
    ``min_similarity`` and the fingerprints' ``profile``
    (:func:`nearsim.core.calibration.radius_for`), kept when their exact
    ``measure`` (:func:`nearsim.core.measures.verified_measure`, of a's
    text against b's) is at least ``min_similarity``; ``short`` marks a pair
    where either text has fewer than
    :data:`~nearsim.core.measures.SHORT_SHINGLES` shingles.  Fingerprints
    are taken from ``fingerprint_column`` when ``df`` has it, else computed
    with ``profile``.
    """
    return verified_groups(df, key_column, text_column, min_similarity, measure, max_distance,
                           profile, fingerprint_column, bands).expand()  # fmt: skip
