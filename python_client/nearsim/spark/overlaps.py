"""The overlaps of candidate pairs of shingle sets, counted with numpy on the executors.

The exact S_R join (:mod:`nearsim.spark.resemblance`) ends by counting
``|A & B|`` for every candidate pair of sets: millions of pairs of sets of
hundreds of shingles each.  When the sets are ranks (small integers, the
shingles' places in the global order) and fit in memory, they are
collected once on the driver as one flat array (:class:`Sets`: each set
ascending, one after the other) and broadcast; the candidate pairs go
through :func:`overlaps` in Arrow batches, in one task per core (each task
loads the broadcast sets), sorted by their first set.  For
each first set ``A`` a boolean array over the ranks marks ``A``'s members,
and the members of every ``B`` paired with it are looked up in it at once:
one pass over the shingles of the ``B``s, no hash set per pair (as
``array_intersect`` builds), no rows of shingles through the JVM.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt
import pandas as pd  # type: ignore[import-untyped]
import pyarrow as pa
from pyspark import Broadcast
from pyspark.sql import DataFrame
from pyspark.sql.types import IntegerType, StructField, StructType

__all__ = ["CHUNK_ELEMENTS", "Sets", "collect_sets", "count_overlaps", "overlaps"]

CHUNK_ELEMENTS = 1 << 24
"""The shingles of the second sets looked up at once, about (the rest waits for the next
chunk of pairs): bounds a task's memory whatever the sizes of the sets."""

Int64s = npt.NDArray[np.int64]


@dataclass(frozen=True)
class Sets:
    """Sets of ranks: the set of ``nodes[i]`` is ``elements[offsets[i]:offsets[i + 1]]``,
    ascending; every rank is below ``ranks``."""

    nodes: Int64s
    offsets: Int64s
    elements: npt.NDArray[np.int32]
    ranks: int

    def index(self, nodes: Int64s) -> Int64s:
        """The place of each of ``nodes`` (all of them among :attr:`nodes`)."""
        found: Int64s = np.searchsorted(self.nodes, nodes).astype(np.int64)
        if len(found) and (found.max() >= len(self.nodes)
                           or not np.array_equal(self.nodes[found], nodes)):  # fmt: skip
            raise KeyError("a candidate pair names a set that was not collected")
        return found


def collect_sets(tokens: DataFrame, node: str = "node", column: str = "tokens") -> Sets:
    """The sets ``column`` (``array<int>`` of ranks from 0, each ascending) of every row of
    ``tokens``, by the number ``node`` (``bigint``, unique), on the driver."""
    spark = tokens.sparkSession
    arrow = "spark.sql.execution.arrow.pyspark.enabled"
    before = spark.conf.get(arrow)
    spark.conf.set(arrow, "true")
    try:
        table: pd.DataFrame = tokens.select(node, column).toPandas()
    finally:
        spark.conf.set(arrow, before or "false")
    nodes = table[node].to_numpy(dtype=np.int64)
    order = np.argsort(nodes, kind="stable")
    listed = table[column].tolist()
    arrays = [np.asarray(listed[i], dtype=np.int32) for i in order.tolist()]
    lengths = np.array([len(array) for array in arrays], dtype=np.int64)
    offsets = np.zeros(len(arrays) + 1, dtype=np.int64)
    np.cumsum(lengths, out=offsets[1:])
    elements = (np.concatenate(arrays) if arrays else np.zeros(0, dtype=np.int32)).astype(
        np.int32, copy=False)
    ranks = int(elements.max()) + 1 if len(elements) else 0
    if len(elements) and int(elements.min()) < 0:
        raise ValueError("the sets' ranks must not be negative")
    return Sets(nodes[order], offsets, elements, ranks)


def _chunks(lengths: Int64s) -> Iterator[tuple[int, int]]:
    """``(start, stop)`` of consecutive pairs whose second sets hold about
    :data:`CHUNK_ELEMENTS` shingles together (at least one pair each)."""
    ends = np.cumsum(lengths)
    start = 0
    while start < len(lengths):
        before = int(ends[start - 1]) if start else 0
        stop = int(np.searchsorted(ends, before + CHUNK_ELEMENTS, side="right"))
        stop = max(stop, start + 1)
        yield start, stop
        start = stop


def count_overlaps(sets: Sets, first: Int64s, second: Int64s) -> Int64s:
    """``|A & B|`` for each pair of the sets of the nodes ``first[i]`` and ``second[i]``."""
    counts = np.zeros(len(first), dtype=np.int64)
    if len(first) == 0:
        return counts
    a_all, b_all = sets.index(np.asarray(first, np.int64)), sets.index(np.asarray(second, np.int64))
    order = np.argsort(a_all, kind="stable")  # the pairs of each first set together
    offsets, elements = sets.offsets, sets.elements
    mark = np.zeros(max(sets.ranks, 1), dtype=bool)
    lengths_all = offsets[b_all[order] + 1] - offsets[b_all[order]]
    for start, stop in _chunks(lengths_all):
        chosen = order[start:stop]
        a, b = a_all[chosen], b_all[chosen]
        lengths = lengths_all[start:stop]
        ends = np.cumsum(lengths)
        begins = ends - lengths
        total = int(ends[-1])
        # the shingles of every second set, one after the other
        positions = np.arange(total, dtype=np.int64) + np.repeat(offsets[b] - begins, lengths)
        shingles = elements[positions]
        hits = np.zeros(total, dtype=bool)
        runs = np.flatnonzero(a[1:] != a[:-1]) + 1
        for run_start, run_stop in zip([0, *runs.tolist()], [*runs.tolist(), len(a)],
                                       strict=True):  # fmt: skip
            node = int(a[run_start])
            own = elements[offsets[node]:offsets[node + 1]]
            low, high = int(begins[run_start]), int(ends[run_stop - 1])
            mark[own] = True
            hits[low:high] = mark[shingles[low:high]]
            mark[own] = False
        cumulative = np.zeros(total + 1, dtype=np.int64)
        np.cumsum(hits, out=cumulative[1:])
        counts[chosen] = cumulative[ends] - cumulative[begins]
    return counts


def _overlap_batches(sets: Broadcast[Sets], first: str,
                     second: str) -> Any:  # fmt: skip
    """The body of ``mapInArrow``: each batch with the column ``common``."""

    def batches(found: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        value = sets.value
        for batch in found:
            a = batch.column(first).to_numpy(zero_copy_only=False).astype(np.int64, copy=False)
            b = batch.column(second).to_numpy(zero_copy_only=False).astype(np.int64, copy=False)
            common = pa.array(count_overlaps(value, a, b).astype(np.int32), type=pa.int32())
            yield pa.RecordBatch.from_arrays([*batch.columns, common],
                                             names=[*batch.schema.names, "common"])  # fmt: skip

    return batches


def overlaps(pairs: DataFrame, sets: Broadcast[Sets], first: str = "ga",
             second: str = "gb") -> DataFrame:  # fmt: skip
    """``pairs`` with ``common`` (``int``), ``|A & B|`` of the sets of its nodes ``first``
    and ``second`` (``bigint``, never NULL)."""
    schema = StructType([*pairs.schema.fields, StructField("common", IntegerType(), False)])
    # The pairs of a first set in one task, one after the other: the set is marked once.
    # One task per core: each task loads the broadcast sets, so many small tasks would
    # spend their time loading them.
    tasks = max(pairs.sparkSession.sparkContext.defaultParallelism, 1)
    ordered = pairs.repartition(tasks, first).sortWithinPartitions(first)
    return ordered.mapInArrow(_overlap_batches(sets, first, second), schema)
