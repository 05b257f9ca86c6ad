"""The methods that find similar pairs in this process, scored against the exact truth.

SimHash (all pairs of fingerprints within a Hamming radius), seed 000's
similarity index SI v1 (its +/-30% range query, pairs counted without
listing them) and datasketch's MinHashLSH (candidates and their MinHash
estimates), each on the texts of a corpus, giving pair codes of
benchmarks/truth.py.  benchmarks/quality.py compares them all;
benchmarks/verified.py runs SimHash and MinHashLSH next to nearsim's
verified search.
"""

from __future__ import annotations

import multiprocessing
from bisect import bisect_left
from collections.abc import Sequence
from typing import Any

import numpy as np
from numpy.typing import NDArray

import nearsim
from nearsim.core.legacy import si_v1
from nearsim.core.measures import word_shingles
from nearsim.core.pairs import iter_pairs

from .truth import pair_codes

Int64s = NDArray[np.int64]

SEED_RADIUS = 6
"""The seeds' query: ``hamming <= 6``."""
MINHASH_PERMUTATIONS = 128


# --------------------------------------------------------------------------
# SimHash


def fingerprints(texts: Sequence[str], profile: str = "default/1") -> tuple[Int64s, Int64s]:
    """(positions of the texts that have a fingerprint, their fingerprints)."""
    values = nearsim.simhash_many(list(texts), profile)
    present = np.array([i for i, v in enumerate(values) if v is not None], dtype=np.int64)
    prints = np.array([v for v in values if v is not None], dtype=np.int64)
    return present, prints


def radius_pairs(present: Int64s, prints: Int64s, radius: int,
                 documents: int) -> tuple[Int64s, NDArray[np.int32]]:
    """Pair codes (corpus positions) and distances of all pairs within ``radius``."""
    codes: list[Int64s] = []
    distances: list[NDArray[np.int32]] = []
    for first, second, distance in iter_pairs(prints, radius):
        codes.append(pair_codes(present[first], present[second], documents))
        distances.append(distance)
    if not codes:
        return np.empty(0, dtype=np.int64), np.empty(0, dtype=np.int32)
    return np.concatenate(codes), np.concatenate(distances)


def hamming_of_codes(codes: Int64s, documents: int, present: Int64s, prints: Int64s) -> Int64s:
    """Hamming distance of each coded pair (65 when a document has no fingerprint)."""
    lookup = np.full(documents, -1, dtype=np.int64)
    lookup[present] = np.arange(len(present))
    first, second = lookup[codes // documents], lookup[codes % documents]
    missing = (first < 0) | (second < 0)
    xor = (prints[np.maximum(first, 0)] ^ prints[np.maximum(second, 0)]).view(np.uint64)
    distance = np.array([bin(int(x)).count("1") for x in xor], dtype=np.int64)
    distance[missing] = 65
    return distance


# --------------------------------------------------------------------------
# SI v1


def _si_value(text: str) -> int:
    return int(si_v1(text).value)


def si_values(texts: Sequence[str]) -> list[int]:
    """Seed 000's SI v1 of every text, on all cores (it is slow pure Python)."""
    if len(texts) < 1000:
        return [_si_value(t) for t in texts]
    with multiprocessing.get_context("fork").Pool() as pool:
        return pool.map(_si_value, texts, chunksize=64)


def si_ranges(values: Sequence[int]) -> tuple[Int64s, Int64s, Int64s]:
    """For the values sorted: (order, lo, hi) such that document ``order[p]``'s range
    query matches exactly the documents ``order[lo[p]:hi[p]]``.

    :func:`nearsim.core.legacy.si_v1_similar` with tolerance 0.3, in integers:
    ``q - 3|q|/10 < c < q + 3|q|/10``.
    """
    order = sorted(range(len(values)), key=lambda i: values[i])
    ordered = [values[i] for i in order]
    lo = np.empty(len(values), dtype=np.int64)
    hi = np.empty(len(values), dtype=np.int64)
    for position, query in enumerate(ordered):
        lower, upper = 10 * query - 3 * abs(query), 10 * query + 3 * abs(query)
        lo[position] = bisect_left(ordered, lower // 10 + 1)  # c > lower / 10
        hi[position] = bisect_left(ordered, -(-upper // 10))  # c < upper / 10
        if lo[position] > hi[position]:
            hi[position] = lo[position]
    return np.array(order, dtype=np.int64), lo, hi


def si_prediction(values: Sequence[int], truth_first: Int64s,
                  truth_second: Int64s) -> tuple[int, NDArray[np.bool_]]:
    """(number of predicted pairs, which truth pairs are predicted) for SI v1.

    A pair is predicted when either document is inside the other's range.
    The predicted pairs are counted without listing them (they can be tens of
    millions): ordered matches minus the pairs that match both ways.
    """
    order, lo, hi = si_ranges(values)
    count = len(values)
    rank = np.empty(count, dtype=np.int64)
    rank[order] = np.arange(count)
    positions = np.arange(count)
    inside_own = (lo <= positions) & (positions < hi)
    ordered_matches = int((hi - lo).sum() - inside_own.sum())
    both_ways = 0
    chunk = 4096
    for start in range(0, count, chunk):
        p = np.arange(start, min(count, start + chunk))
        length = hi[p] - lo[p]
        query = np.repeat(p, length)
        offsets = np.arange(int(length.sum())) - np.repeat(np.cumsum(length) - length, length)
        partner = np.repeat(lo[p], length) + offsets
        back = (lo[partner] <= query) & (query < hi[partner]) & (partner != query)
        both_ways += int(np.count_nonzero(back))
    predicted = ordered_matches - both_ways // 2

    def matches(query: Int64s, candidate: Int64s) -> NDArray[np.bool_]:
        q, c = rank[query], rank[candidate]
        result: NDArray[np.bool_] = (lo[q] <= c) & (c < hi[q])
        return result

    hit = matches(truth_first, truth_second) | matches(truth_second, truth_first)
    return predicted, hit


# --------------------------------------------------------------------------
# MinHash LSH


def minhash_signatures(texts: Sequence[str]) -> tuple[Int64s, list[Any]]:
    """(positions of texts with shingles, their datasketch MinHashes)."""
    from datasketch import LeanMinHash, MinHash

    present: list[int] = []
    sketches: list[Any] = []
    for position, text in enumerate(texts):
        shingles = {s.encode("utf-8") for s in word_shingles(text)}
        if not shingles:
            continue
        sketch = MinHash(num_perm=MINHASH_PERMUTATIONS, seed=1)
        sketch.update_batch(sorted(shingles))
        present.append(position)
        sketches.append(LeanMinHash(sketch))
    return np.array(present, dtype=np.int64), sketches


def lsh_candidates(present: Int64s, sketches: Sequence[Any], threshold: float,
                   documents: int) -> tuple[Int64s, NDArray[np.float64]]:
    """Sorted candidate pair codes of a MinHashLSH index and their MinHash estimates."""
    from datasketch import MinHashLSH

    lsh = MinHashLSH(threshold=threshold, num_perm=MINHASH_PERMUTATIONS)
    with lsh.insertion_session() as session:
        for index, sketch in enumerate(sketches):
            session.insert(index, sketch)
    firsts: list[int] = []
    seconds: list[int] = []
    for index, sketch in enumerate(sketches):
        for other in lsh.query(sketch):
            if other > index:
                firsts.append(index)
                seconds.append(other)
    first = np.array(firsts, dtype=np.int64)
    second = np.array(seconds, dtype=np.int64)
    signatures = np.array([s.hashvalues for s in sketches], dtype=np.uint64)
    estimate = np.empty(len(first), dtype=np.float64)
    for start in range(0, len(first), 100_000):
        i, j = first[start : start + 100_000], second[start : start + 100_000]
        estimate[start : start + 100_000] = (signatures[i] == signatures[j]).mean(axis=1)
    codes = pair_codes(present[first], present[second], documents)
    order = np.argsort(codes)
    return codes[order], estimate[order]
