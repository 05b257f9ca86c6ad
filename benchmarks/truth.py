"""Exact ground truth: the shingle resemblance S_R of every pair that shares a shingle.

S_R = |A & B| / |A | B| over the sets of word 3-shingles of two documents,
as :func:`nearsim.core.measures.resemblance` defines it; the shingles come from
:func:`nearsim.core.measures.word_shingles`, so the truth uses nearsim's own
tokenisation.  Nothing is sampled: shingles become integer ids, the corpus a
sparse document x shingle 0/1 matrix X, and ``X @ X.T`` gives the size of
every intersection (one block of rows at a time, upper triangle only, to bound
memory); unions follow from the set sizes.  Pairs at or above ``keep`` are
kept, the others only counted per tenth of S_R.
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import numpy as np
import scipy.sparse
from numpy.typing import NDArray

from nearsim.core.measures import resemblance, set_resemblance, word_shingles

__all__ = [
    "Truth", "brute_force", "intersections", "pair_codes", "shingle_matrix", "similar_pairs",
]

Int64s = NDArray[np.int64]
Floats = NDArray[np.float64]

BUCKETS = 10
"""Pairs below ``keep`` are counted in tenths of S_R: [0, 0.1), ..., [0.9, 1.0]."""

# Nonzeros of one block's product, at most; the block shrinks on skewed data.
_BLOCK_PRODUCT = 20_000_000

# The columns of the transposed matrix a block multiplies with start at most
# this share of the documents before the block's first row: slicing them
# afresh for every block would copy the whole matrix once per block, a cost
# that grows with the cube of the corpus.
_SLICE_SHARE = 1 / 16


@dataclass(frozen=True)
class Truth:
    """Every pair (i < j, positions in the corpus) with S_R >= ``keep``."""

    documents: int
    first: Int64s
    second: Int64s
    s_r: Floats
    keep: float
    shared_pairs: int
    """Pairs that share at least one shingle (all buckets together)."""
    buckets: list[int]
    """Pairs sharing a shingle per tenth of S_R: index k counts [k/10, (k+1)/10)."""
    shingles: int
    """Distinct shingles in the corpus."""
    seconds: float

    def codes(self, threshold: float) -> Int64s:
        """Sorted :func:`pair_codes` of the pairs with S_R >= ``threshold``."""
        if threshold < self.keep:
            raise ValueError(f"pairs below {self.keep} were not kept")
        chosen = self.s_r >= threshold
        return np.sort(pair_codes(self.first[chosen], self.second[chosen], self.documents))

    def positives(self, threshold: float) -> int:
        return int(np.count_nonzero(self.s_r >= threshold))


def pair_codes(first: Int64s, second: Int64s, documents: int) -> Int64s:
    """One int64 per unordered pair: ``min * documents + max``."""
    low = np.minimum(first, second).astype(np.int64)
    high = np.maximum(first, second).astype(np.int64)
    codes: Int64s = low * documents + high
    return codes


def shingle_matrix(texts: Sequence[str], tokenisation: int = 1) -> scipy.sparse.csr_matrix:
    """The document x shingle 0/1 matrix (CSR, int32), shingles numbered in order of appearance;
    the words of ``tokenisation`` (2: those of profiles of version 2)."""
    ids: dict[str, int] = {}
    indptr = np.zeros(len(texts) + 1, dtype=np.int64)
    columns: list[Int64s] = []
    for row, text in enumerate(texts):
        distinct = {ids.setdefault(s, len(ids))
                    for s in word_shingles(text, tokenisation=tokenisation)}
        columns.append(np.fromiter(sorted(distinct), dtype=np.int64, count=len(distinct)))
        indptr[row + 1] = indptr[row] + len(distinct)
    indices = np.concatenate(columns) if columns else np.empty(0, dtype=np.int64)
    data = np.ones(len(indices), dtype=np.int32)
    return scipy.sparse.csr_matrix(
        (data, indices.astype(np.int32), indptr), shape=(len(texts), max(len(ids), 1))
    )


def intersections(matrix: scipy.sparse.csr_matrix) -> Iterator[tuple[Int64s, Int64s, Int64s]]:
    """(first, second, common shingles) of every pair i < j sharing a shingle, a block
    of rows at a time: ``matrix @ matrix.T``, upper triangle only, to bound memory."""
    count = matrix.shape[0]
    transposed = matrix.T.tocsr()
    # A block of rows costs about the sum, over its shingles, of how many
    # documents have each: size blocks by that, not by a row count.
    sizes = np.diff(matrix.indptr).astype(np.int64)
    frequency = np.diff(transposed.indptr).astype(np.int64)
    row_cost: Int64s = np.zeros(count, dtype=np.int64)
    if len(matrix.indices):
        # reduceat gives an empty row the next row's first value: zero those.
        summed = np.add.reduceat(frequency[matrix.indices], np.minimum(
            matrix.indptr[:-1], len(matrix.indices) - 1))
        row_cost = np.where(sizes > 0, summed, 0).astype(np.int64)
    start = 0
    base, columns = 0, transposed
    while start < count:
        stop = start + 1
        budget = int(row_cost[start])
        while stop < count and budget + int(row_cost[stop]) <= _BLOCK_PRODUCT:
            budget += int(row_cost[stop])
            stop += 1
        # Only columns after the block's first row can be in the upper triangle:
        # the slice of columns from ``base`` on is cut again once it lags behind.
        if start - base > _SLICE_SHARE * count:
            base, columns = start, transposed[:, start:]
        product = (matrix[start:stop] @ columns).tocoo()
        row = product.row.astype(np.int64) + start
        column = product.col.astype(np.int64) + base
        upper = column > row
        yield row[upper], column[upper], product.data[upper].astype(np.int64)
        start = stop


def similar_pairs(texts: Sequence[str], keep: float = 0.5) -> Truth:
    """Exact S_R of every pair sharing a shingle; the pairs at or above ``keep``."""
    started = time.perf_counter()
    matrix = shingle_matrix(texts)
    sizes = np.diff(matrix.indptr).astype(np.int64)
    firsts: list[Int64s] = []
    seconds: list[Int64s] = []
    values: list[Floats] = []
    buckets = np.zeros(BUCKETS, dtype=np.int64)
    for row, column, common in intersections(matrix):
        # The same division as nearsim's set_resemblance, so the floats are identical.
        s_r = common / (sizes[row] + sizes[column] - common)
        bucket = np.minimum((s_r * BUCKETS).astype(np.int64), BUCKETS - 1)
        buckets += np.bincount(bucket, minlength=BUCKETS)
        kept = s_r >= keep
        firsts.append(row[kept])
        seconds.append(column[kept])
        values.append(s_r[kept])
    first = np.concatenate(firsts) if firsts else np.empty(0, dtype=np.int64)
    second = np.concatenate(seconds) if seconds else np.empty(0, dtype=np.int64)
    s_r_all = np.concatenate(values) if values else np.empty(0, dtype=np.float64)
    order = np.lexsort((second, first))
    return Truth(
        documents=matrix.shape[0], first=first[order], second=second[order],
        s_r=s_r_all[order], keep=keep, shared_pairs=int(buckets.sum()),
        buckets=buckets.tolist(),
        shingles=int(matrix.shape[1]) if len(matrix.indices) else 0,
        seconds=time.perf_counter() - started,
    )


def brute_force(
    texts: Sequence[str], call_resemblance: bool = False
) -> dict[tuple[int, int], float]:
    """S_R of every pair i < j sharing a shingle, compared pair by pair.

    Quadratic in Python, for checking :func:`similar_pairs` on a small corpus.
    By default each document's shingle set is made once and the pairs are
    compared with :func:`nearsim.core.measures.set_resemblance` (what
    :func:`~nearsim.core.measures.resemblance` computes); ``call_resemblance``
    calls :func:`~nearsim.core.measures.resemblance` on the texts for every pair.
    """
    sets = [set(word_shingles(text)) for text in texts]
    result = {}
    for i in range(len(texts)):
        for j in range(i + 1, len(texts)):
            if call_resemblance:
                value = resemblance(texts[i], texts[j])
            else:
                value = set_resemblance(sets[i], sets[j])
            if value > 0:
                result[(i, j)] = value
    return result
