"""Groups of near-duplicates of a whole collection: ``nearsim spark dedup``.

:func:`clusters` and :func:`verified_clusters` are ``nearsim_clusters(tbl,
k, 'components')`` and ``nearsim_clusters_verified(tbl, s)`` on a
DataFrame; they work on groups of identical documents and never make the
pairs inside them, so a million copies of one boilerplate text cost a
million rows, not their half a trillion pairs.  :func:`dedup` reads files,
sets bad rows aside, fingerprints, groups and writes the groups as Parquet.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field, replace
from typing import Any

from pyspark import StorageLevel
from pyspark.sql import DataFrame, Observation, SparkSession
from pyspark.sql import functions as F

from ..core.profiles import canonical
from ..core.survivors import Keep
from .database import ON_CONFLICT, target_table, write_table
from .documents import (
    DocumentsError,
    good_documents,
    output_exists,
    read_documents,
    write_parquet,
)
from .fingerprinting import (
    DEFAULT_PROFILE,
    SHINGLES_COLUMN,
    simhash_and_shingles,
    simhash_column,
)
from .graph import group_components
from .pivots import group_pivots
from .resemblance import exact_resemblance
from .search import GroupPairs, hamming_groups, verified_groups
from .survivors import check_field, read_records, removed_keys, survivor_rows, write_records

__all__ = ["METHODS", "Summary", "clusters", "dedup", "verified_clusters"]

METHODS = ("components", "pivot")


def _grouped(grouped: GroupPairs, method: str, min_size: int, order: str) -> DataFrame:
    """The groups of ``method`` over ``grouped``."""
    if method not in METHODS:
        raise ValueError(f"unknown clustering method {method!r}: use one of {', '.join(METHODS)}")
    if method == "pivot":
        return group_pivots(grouped, min_size, order)
    return group_components(grouped, min_size, order)


def _fingerprinted(good: DataFrame, text_name: str, profile: str,
                   min_similarity: float | None, measure: str,
                   max_distance: int | None) -> DataFrame:  # fmt: skip
    """``good`` with the fingerprints ``si``; for the exact S_R join with the default
    profile, also the shingle sets, made in the same pass over the texts."""
    if canonical(profile) != DEFAULT_PROFILE or not exact_resemblance(
            measure, max_distance, min_similarity):  # fmt: skip
        return good.withColumn("si", simhash_column(text_name, profile))
    both = simhash_and_shingles(text_name)
    return good.withColumn("_both", both).select(
        *good.columns, F.col("_both.si").alias("si"),
        F.col("_both.shingles").alias(SHINGLES_COLUMN))


def clusters(df: DataFrame, key_column: str, max_distance: int = 6,
             fingerprint_column: str = "si", min_size: int = 2,
             bands: int | None = None, method: str = "components") -> DataFrame:  # fmt: skip
    """``(key, cluster, pivot)``: ``nearsim_clusters(tbl, max_distance, method, min_size)``.

    One row per document of a group of at least ``min_size``; ``cluster``
    is the group's smallest key.  ``components``: documents within
    ``max_distance`` bits of each other, chained, ``pivot`` NULL;
    ``pivot``: every member within ``max_distance`` of the group's
    ``pivot`` (:mod:`nearsim.spark.pivots`).
    """
    grouped = hamming_groups(df, key_column, max_distance, fingerprint_column, bands)
    return _grouped(grouped, method, min_size, "key")


def verified_clusters(df: DataFrame, key_column: str, text_column: str,
                      min_similarity: float = 0.8, measure: str = "s_r",
                      max_distance: int | None = None, profile: str = DEFAULT_PROFILE,
                      fingerprint_column: str = "si", min_size: int = 2,
                      bands: int | None = None,
                      method: str = "components") -> DataFrame:  # fmt: skip
    """``(key, cluster, pivot)``: ``nearsim_clusters_verified(tbl, min_similarity, measure,
    max_distance, method, min_size)``.

    As that function does, a group is named after its smallest key *as
    text* (for integer keys, 10 comes before 9), and pivot groups take
    documents of equal degree in that order.
    """
    grouped = verified_groups(df, key_column, text_column, min_similarity, measure,
                              max_distance, profile, fingerprint_column, bands)  # fmt: skip
    return _grouped(grouped, method, min_size, "text")


@dataclass
class Summary:
    """What a dedup read and found."""

    rows: int = 0
    documents: int = 0
    fingerprinted: int = 0
    pairs: int = 0
    groups: int = 0
    grouped: int = 0
    bad: dict[str, int] = field(default_factory=dict)
    seconds: float = 0.0
    output: str = ""
    table: str = ""
    written: int = 0
    replaced: int = 0
    skipped: int = 0
    survivors: int = 0  # good documents kept: one per group (by the policy) and every other
    removed: int = 0
    survivors_output: str = ""
    mapping_output: str = ""

    def as_dict(self) -> dict[str, Any]:
        return {"rows": self.rows, "documents": self.documents,
                "fingerprinted": self.fingerprinted, "pairs": self.pairs,
                "groups": self.groups, "grouped_documents": self.grouped,
                "bad_rows": sum(self.bad.values()), "bad_rows_by_reason": dict(self.bad),
                "seconds": round(self.seconds, 3), "output": self.output,
                "table": self.table, "written": self.written, "replaced": self.replaced,
                "skipped": self.skipped, "survivors": self.survivors, "removed": self.removed,
                "survivors_output": self.survivors_output,
                "mapping_output": self.mapping_output}  # fmt: skip

    def lines(self) -> list[str]:
        bad = sum(self.bad.values())
        lines = [
            f"{self.documents:,} documents ({self.fingerprinted:,} with a fingerprint),"
            f" {bad:,} bad rows",
            f"{self.pairs:,} pairs, {self.groups:,} groups of {self.grouped:,} documents"
            f" in {self.seconds:.1f} s",
        ]
        if bad:
            lines.append("bad rows: " + ", ".join(
                f"{reason} {count:,}" for reason, count in sorted(self.bad.items())))
        if self.output:
            lines.append(f"written to {self.output}")
        if self.survivors_output or self.mapping_output:
            lines.append(f"{self.survivors:,} survivors, {self.removed:,} removed")
        if self.survivors_output:
            lines.append(f"survivors written to {self.survivors_output}")
        if self.mapping_output:
            lines.append(f"removed -> kept written to {self.mapping_output}")
        if self.table:
            kept = (f" ({self.replaced:,} of them replacing stored rows)" if self.replaced
                    else "")  # fmt: skip
            skipped = f"; {self.skipped:,} stored already, skipped" if self.skipped else ""
            lines.append(f"{self.written:,} documents (one per group and every other) written"
                         f" into {self.table}{kept}{skipped}")
        return lines


def dedup(spark: SparkSession, paths: str | list[str], output: str | None,
          key_column: str | None = None, text_column: str | None = None,
          format: str | None = None, min_similarity: float | None = 0.8,
          max_distance: int | None = None, measure: str = "s_r",
          profile: str = DEFAULT_PROFILE, overwrite: bool = False,
          method: str = "components", into_table: str | None = None,
          dsn: str | None = None, on_conflict: str = "error", keep: Keep | str = "first",
          survivors: str | None = None,
          mapping: str | None = None) -> tuple[DataFrame, Summary]:
    """Read ``paths``, group their near-duplicates, write the groups to ``output`` (Parquet).

    Verified (``min_similarity`` given: candidates within ``max_distance``
    or the calibrated radius, kept by their measured similarity) or by bits
    (``min_similarity`` None: within ``max_distance``, 6 by default).  The
    groups are one row per document that has a near-duplicate: the key
    under its own column name and type, ``cluster`` (the group's smallest
    key) and ``pivot`` (``method`` ``"components"``: NULL, connected
    components; ``"pivot"``: the key of the group's pivot, as
    ``nearsim_clusters`` gives it).  Bad rows are counted by reason in the
    summary and left out.

    With ``into_table`` (a nearsim-enabled table of the database ``dsn``
    reaches, of the same ``profile``), the documents that survive the
    dedup are written into it with their fingerprints
    (:func:`nearsim.spark.write_table`): each group's ``cluster`` document
    and every good document without a near-duplicate.  ``on_conflict``
    (``"error"``, ``"skip"`` or ``"replace"``) says what happens to a
    survivor whose key is stored already (:func:`nearsim.spark.write_table`).

    ``keep`` chooses each group's survivor (:class:`~nearsim.core.survivors.Keep`:
    ``"first"``, the smallest key; ``"longest"``; ``"newest:FIELD"``), as
    ``nearsim dedup`` does in PostgreSQL; ``survivors`` is where the input's
    rows of the survivors go, with all of their columns, and ``mapping``
    where removed -> kept goes (Parquet, JSON Lines or CSV by the suffix:
    :mod:`nearsim.spark.survivors`).
    """
    policy = keep if isinstance(keep, Keep) else Keep.parse(keep)
    started = time.monotonic()
    if method not in METHODS:
        raise ValueError(f"unknown clustering method {method!r}: use one of {', '.join(METHODS)}")
    if output is None and into_table is None and survivors is None and mapping is None:
        raise ValueError("nothing to write: give an output, survivors, a mapping or a table")
    if on_conflict not in ON_CONFLICT:
        raise ValueError(f"unknown on_conflict {on_conflict!r}: use one of"
                         f" {', '.join(ON_CONFLICT)}")  # fmt: skip
    if into_table is not None:
        target = target_table(dsn or "", into_table, profile, on_conflict)
    for path in (output, survivors, mapping):
        if path is not None and not overwrite and output_exists(spark, path):
            raise DocumentsError(f"the output {path} already exists: remove it, or overwrite"
                                 " it (--overwrite)")
    documents = read_documents(spark, paths, key_column, text_column, format)
    key_name, text_name = documents.columns[0], documents.columns[1]
    records = None  # the input's rows with all of their columns, when they are written
    if survivors is not None or policy.field is not None:
        records = read_records(spark, [paths] if isinstance(paths, str) else list(paths),
                               format, key_name)  # fmt: skip
        check_field(records, policy, key_name, text_name)
    documents = documents.persist(StorageLevel.MEMORY_AND_DISK)
    try:
        summary = Summary()
        counted = documents.groupBy("problem").count().collect()
        for row in counted:
            if row["problem"] is None:
                summary.documents = int(row["count"])
            else:
                summary.bad[str(row["problem"])] = int(row["count"])
        summary.rows = summary.documents + sum(summary.bad.values())
        good = _fingerprinted(good_documents(documents), text_name, profile, min_similarity,
                              measure, max_distance)  # fmt: skip
        good = good.persist(StorageLevel.MEMORY_AND_DISK)
        summary.fingerprinted = good.where(F.col("si").isNotNull()).count()
        grouped: GroupPairs
        if min_similarity is None:
            grouped = hamming_groups(good, key_name, 6 if max_distance is None else max_distance)
            order = "key"
        else:
            grouped = verified_groups(good, key_name, text_name, min_similarity, measure,
                                      max_distance, profile)  # fmt: skip
            order = "text"
        pairs = grouped.pairs.persist(StorageLevel.MEMORY_AND_DISK)
        grouped = replace(grouped, pairs=pairs)
        summary.pairs = grouped.count()
        found = _grouped(grouped, method, 2, order)
        result = found.select(F.col("key").alias(key_name), "cluster", "pivot")
        # The grouped documents, and the groups: one row of each is its cluster's (its
        # smallest key's), so they are counted without a distinct.
        totals = (F.count(F.lit(1)).alias("rows"),
                  F.count_if(F.col(key_name) == F.col("cluster")).alias("groups"))
        if output is not None:
            # Counted by the job that writes them, not by one of their own.
            observed = Observation()
            write_parquet(result.observe(observed, *totals), output, overwrite)
            found_totals = observed.get
            written = spark.read.parquet(output)
            summary.output = output
        else:
            written = result.persist(StorageLevel.MEMORY_AND_DISK)
            found_totals = written.agg(*totals).collect()[0].asDict()
        summary.grouped, summary.groups = int(found_totals["rows"]), int(found_totals["groups"])
        removed = None  # each group's documents but its survivor, when something needs them
        if survivors is not None or mapping is not None or into_table is not None:
            removed = removed_keys(written, good, records, key_name, text_name,
                                   policy).persist(StorageLevel.MEMORY_AND_DISK)  # fmt: skip
        if survivors is not None:
            assert removed is not None
            write_records(survivor_rows(good.select(key_name, text_name), records, removed,
                                        key_name), survivors, overwrite)  # fmt: skip
            summary.survivors_output = survivors
        if mapping is not None:
            assert removed is not None
            write_records(removed, mapping, overwrite)
            summary.mapping_output = mapping
        if into_table is not None:
            assert removed is not None
            kept = good.join(removed.select(F.col("removed").alias(key_name)), key_name,
                             "left_anti")  # fmt: skip
            done = write_table(kept, dsn or "", into_table, key_name, text_name, profile,
                               on_conflict=on_conflict)  # fmt: skip
            summary.written, summary.replaced, summary.skipped = (
                done.written, done.replaced, done.skipped)
            summary.table = target.name
        # one survivor per group: the others are removed
        summary.removed = summary.grouped - summary.groups
        summary.survivors = summary.documents - summary.removed
        summary.seconds = time.monotonic() - started
        if removed is not None:
            removed.unpersist()
        pairs.unpersist()
        good.unpersist()
        return written, summary
    finally:
        documents.unpersist()
