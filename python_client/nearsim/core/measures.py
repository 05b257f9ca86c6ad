"""Exact similarity measures between two documents, and MinHash estimates.

A SimHash fingerprint says *that* two documents are probably near-duplicates;
these measures say *how much* text they share, in the three ways seed 001
("What is a near-dupe, really?") defines, so a user can verify a candidate
pair and choose a threshold knowing what the number means:

``S_L = C / L``
    the share of the longer document that the shorter one also contains
    ("if we read either document we've read at least S_L of the other").
``S_J = C / (L + S - C)``
    Jaccard on words: common text over all distinct text of the pair.
``S_R``
    resemblance: common shingles over all distinct shingles (sets).

``L`` and ``S`` are the word counts of the longer and the shorter document,
``C`` the words in *chunks* (runs of at least ``w`` consecutive words) that
the two documents share.  Words are :func:`nearsim.core.text.tokens` (with
``tokenisation=2`` those of profiles of version 2), so every measure sees the
same words as the fingerprint.

Seed 001 describes two ways of counting ``C``:

*Literal matching* is one-to-one: each word position of either document is in
at most one chunk.  A document pasted twice is then 50 % like the original.
Chunks are chosen greedily, longest first ("greedy string tiling"); see
:func:`_literal_chunks` for the algorithm and its cost.

*Information matching* counts text that adds no new information only once:
a passage of one document may match text of the other any number of times,
and text that repeats earlier text of its own document is not counted at
all, so the pasted-twice document is 100 % like the original.  See
:func:`_information_counts` for how ``C``, ``L`` and ``S`` are defined then.

Seed 004 adds repetition-aware measures on shingle *multisets*.

Short documents follow the fingerprint's rule: a document with fewer words
than the shingle size has one shingle made of all its words.  In the same
spirit a document with fewer than ``w`` words can match only as a whole (the
chunk size is lowered to the shorter document's length).

Documents without any word have no fingerprint; every measure involving one
is 0.0 (there is no evidence of duplication), even for two empty documents.
"""

from __future__ import annotations

import heapq
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np
import numpy.typing as npt
import xxhash

from .fingerprint import SHINGLE_WORDS
from .interrupts import checkpoint
from .text import token_batches, tokens

__all__ = [
    "CANDIDATE_RESEMBLANCE",
    "DEFAULT_MEASURE",
    "DEFAULT_MIN_CHUNK_WORDS",
    "DEFAULT_MIN_SIMILARITY",
    "EMPTY_SIGNATURE_VALUE",
    "SET_DEFAULT_MIN_SIMILARITY",
    "WORD_MEASURES",
    "Chunk",
    "Comparison",
    "Estimate",
    "compare",
    "containment",
    "minhash_estimate",
    "minhash_signature",
    "multiset_jaccard",
    "repetition_similarity",
    "resemblance",
    "set_containment",
    "set_resemblance",
    "word_shingles",
]

IntArray = npt.NDArray[np.int64]
BoolArray = npt.NDArray[np.bool_]
UInt64Array = npt.NDArray[np.uint64]

DEFAULT_MIN_CHUNK_WORDS = 5
"""``w``: seed 001 takes a "substantial" chunk to be at least five words."""

# Literal matching enumerates the pairs of equal w-grams of the two documents.
# Ordinary text has few; highly repetitive text (the same line thousands of
# times) can have millions.  Beyond this many pairs, the w-grams with the most
# pairs are left out and the result is marked inexact.
_PAIR_BUDGET = 1 << 21


class Chunk(NamedTuple):
    """A common passage: ``length`` words at ``start_a`` in a and ``start_b`` in b.

    Positions count words (:func:`nearsim.fingerprint.tokens`) from 0, so a
    report can highlight the passage in both documents.
    """

    start_a: int
    start_b: int
    length: int


@dataclass(frozen=True)
class Comparison:
    """Every exact measure for one pair of documents (see the module docstring).

    Ratios are in [0, 1].  ``S_J <= S_L`` always holds, for either kind of
    matching.  ``S_R <= S_J`` holds only under seed 001's assumptions (see
    the tests); the seed's own doubled-document example has S_R 0.75 above
    the literal S_J 0.5.
    """

    words_a: int
    words_b: int
    longer: int
    """``L``: words in the longer document."""
    shorter: int
    """``S``: words in the shorter document."""
    common: int
    """``C`` under literal (one-to-one) matching."""
    s_l: float
    s_j: float
    information_longer: int
    """``L`` under information matching: words that do not repeat earlier text."""
    information_shorter: int
    information_common: int
    """``C`` under information matching."""
    information_s_l: float
    information_s_j: float
    s_r: float
    """Resemblance of the ``shingle_words``-word shingle sets."""
    containment: float
    """Shingle containment of the document with fewer words in the other.

    On equal word counts, the larger of the two directions, so the value
    does not depend on the order of the arguments.
    """
    containment_a_in_b: float
    containment_b_in_a: float
    multiset_jaccard: float
    repetition_similarity: float
    chunks: tuple[Chunk, ...]
    """The literal chunks, in the order of their start in a."""
    min_chunk_words: int
    """``w`` as used: lowered to the shorter document's length when it is shorter."""
    shingle_words: int
    exact: bool
    """False when literal matching had to leave out very repetitive w-grams."""


class Estimate(NamedTuple):
    """A MinHash estimate of resemblance with its 95 % confidence interval."""

    value: float
    low: float
    high: float
    hashes: int


# --------------------------------------------------------------------------
# Shingles and the set / multiset measures


def word_shingles(text: str, shingle_words: int = SHINGLE_WORDS, *,
                  tokenisation: int = 1) -> list[str]:  # fmt: skip
    """The word shingles of ``text`` joined by one space, with repetitions.

    For three words this is exactly :func:`nearsim.fingerprint.shingles`.
    """
    return _shingles_of(list(tokens(text, tokenisation)), shingle_words)


def _shingles_of(words: Sequence[str], shingle_words: int) -> list[str]:
    if shingle_words < 1:
        raise ValueError(f"shingle_words must be at least 1, not {shingle_words}")
    if len(words) < shingle_words:
        # The fingerprint's rule: a short document is one shingle of all its words.
        return [" ".join(words)] if words else []
    return [
        " ".join(words[start : start + shingle_words])
        for start in range(len(words) - shingle_words + 1)
    ]


def _both_shingles(a: str, b: str, words: int, tokenisation: int) -> tuple[list[str], ...]:
    return tuple(word_shingles(t, words, tokenisation=tokenisation) for t in (a, b))


def _ratio(numerator: int, denominator: int) -> float:
    """``numerator / denominator``, 0.0 when there is nothing to divide by."""
    return numerator / denominator if denominator else 0.0


def set_resemblance(a: set[str], b: set[str]) -> float:
    """:func:`resemblance` of two shingle sets (for callers that keep the sets)."""
    return _ratio(len(a & b), len(a | b))


def set_containment(inner: set[str], outer: set[str]) -> float:
    """:func:`containment` of two shingle sets."""
    return _ratio(len(inner & outer), len(inner))


def _multiset_jaccard(a: Counter[str], b: Counter[str]) -> float:
    return _ratio(sum((a & b).values()), sum((a | b).values()))


def _repetition_similarity(a: Counter[str], b: Counter[str]) -> float:
    shared = sum(a[s] + b[s] for s in a.keys() & b.keys())
    return _ratio(shared, a.total() + b.total())


def resemblance(a: str, b: str, shingle_words: int = SHINGLE_WORDS, *,
                tokenisation: int = 1) -> float:  # fmt: skip
    """``S_R``: |sh(a) & sh(b)| / |sh(a) | sh(b)| over shingle sets (Jaccard).

    This is what MinHash estimates; repeated shingles count once.
    """
    return set_resemblance(*map(set, _both_shingles(a, b, shingle_words, tokenisation)))


def containment(a: str, b: str, shingle_words: int = SHINGLE_WORDS, *,
                tokenisation: int = 1) -> float:  # fmt: skip
    """The share of a's distinct shingles that b also has: |sh(a) & sh(b)| / |sh(a)|.

    Broder's containment: 1.0 when a is quoted whole in b however long b is,
    which is why seed 001 does not use it for near-duplicates, but it finds
    quotations and excerpts.  Not symmetric.
    """
    return set_containment(*map(set, _both_shingles(a, b, shingle_words, tokenisation)))


def multiset_jaccard(a: str, b: str, shingle_words: int = SHINGLE_WORDS, *,
                     tokenisation: int = 1) -> float:  # fmt: skip
    """Jaccard on shingle multisets: sum of min counts / sum of max counts.

    Unlike :func:`resemblance`, a shingle repeated in one document and not in
    the other lowers the value (seed 004's point).  It is 1.0 exactly when the
    multisets are equal.  Note: seed 004's Table 1 numbers come from a
    different formula, :func:`repetition_similarity`.
    """
    return _multiset_jaccard(*map(Counter, _both_shingles(a, b, shingle_words, tokenisation)))


def repetition_similarity(a: str, b: str, shingle_words: int = SHINGLE_WORDS, *,
                          tokenisation: int = 1) -> float:  # fmt: skip
    """Seed 004's repetition-aware similarity: the share of all shingle occurrences
    (of both documents) whose shingle both documents have.

    Seed 004's formula (3) is lost in the available text, but this is the
    formula its Table 1 values follow (0.3, 0.3 and 0.6 for D1..D3).  Every
    occurrence of a shared shingle counts, even when the other document has
    it fewer times, so it is not a Jaccard index: prefer
    :func:`multiset_jaccard`, and use this to compare with the seed.
    """
    return _repetition_similarity(*map(Counter, _both_shingles(a, b, shingle_words, tokenisation)))


# --------------------------------------------------------------------------
# Chunks: words as integers, w-grams as integers


def _word_ids(*documents: Sequence[str]) -> list[IntArray]:
    """Each document's words as integers, equal words getting equal integers."""
    checkpoint()
    vocabulary: dict[str, int] = {}
    return [
        np.array([vocabulary.setdefault(w, len(vocabulary)) for w in words], dtype=np.int64)
        for words in documents
    ]


def _gram_ids(documents: Sequence[IntArray], size: int) -> list[IntArray]:
    """For each document, one integer per ``size``-word window (by start), equal
    windows getting equal integers across all the documents.

    Exact (sorting, not hashing), O(n log n) for n windows in all.
    """
    checkpoint()
    windows = [
        np.lib.stride_tricks.sliding_window_view(d, size)
        if len(d) >= size
        else np.empty((0, size), dtype=np.int64)
        for d in documents
    ]
    stacked = np.concatenate(windows)
    if len(stacked) == 0:
        return [np.empty(0, dtype=np.int64) for _ in documents]
    inverse = _row_ids(stacked)
    ends = np.cumsum([len(w) for w in windows])[:-1]
    return [part.astype(np.int64) for part in np.split(inverse, ends)]


def _row_ids(rows: IntArray) -> IntArray:
    """One integer per row, equal rows getting equal integers, numbered in the
    rows' order (as ``np.unique(rows, axis=0, return_inverse=True)`` numbers
    them): a column at a time, each a sort of integers.  The numbers of the
    first columns and the rank of the next one make an integer below n**2.
    """
    ids: IntArray = np.unique(rows[:, 0], return_inverse=True)[1].reshape(-1)
    for column in range(1, rows.shape[1]):
        checkpoint()
        values, ranks = np.unique(rows[:, column], return_inverse=True)
        ids = np.unique(ids * len(values) + ranks.reshape(-1), return_inverse=True)[1].reshape(-1)
    return ids.astype(np.int64)


def _covered(starts: BoolArray, words: int, size: int) -> BoolArray:
    """Words inside at least one ``size``-word window whose start is marked."""
    change = np.zeros(words + 1, dtype=np.int64)
    marked = np.flatnonzero(starts)
    np.add.at(change, marked, 1)
    np.add.at(change, marked + size, -1)
    covered: BoolArray = np.cumsum(change[:words]) > 0
    return covered


# --------------------------------------------------------------------------
# Literal matching


def _maximal_matches(
    a: IntArray, b: IntArray, w: int, pair_budget: int
) -> tuple[IntArray, IntArray, IntArray, bool]:
    """All maximal common runs of at least ``w`` words: starts in a and b, lengths.

    Every pair (i, j) of equal w-grams is listed (vectorised), then the pairs
    are sorted by diagonal j - i and position; consecutive pairs on one
    diagonal form one run.  Cost O((n + P) log(n + P)) for n words and P
    pairs.

    P is small for ordinary text but up to n^2 for text that repeats one
    line thousands of times.  Past ``pair_budget`` pairs, the w-grams with
    the most pairs are paired by rank instead: the k-th occurrence in a only
    with the k-th occurrence in b and its neighbours up to a band that keeps
    P within the budget.  That follows the documents' order, so the copies
    of a repeated line still line up, but runs may come out shorter than
    the true maximal ones: the result is then marked inexact (every run
    found is still a real common run).
    """
    checkpoint()
    grams_a, grams_b = _gram_ids([a, b], w)
    kinds = int(max(grams_a.max(initial=-1), grams_b.max(initial=-1))) + 1
    count_a = np.bincount(grams_a, minlength=kinds)
    count_b = np.bincount(grams_b, minlength=kinds)
    pairs_per_gram = count_a * count_b
    band = np.full(kinds, -1, dtype=np.int64)  # -1: every pair of the w-gram
    exact = int(pairs_per_gram.sum()) <= pair_budget
    if not exact:
        fewest_first = np.argsort(pairs_per_gram, kind="stable")
        all_pairs = fewest_first[np.cumsum(pairs_per_gram[fewest_first]) <= pair_budget // 2]
        banded = np.ones(kinds, dtype=bool)
        banded[all_pairs] = False
        # Each occurrence gets at most 2 * band + 1 partners.
        occurrences = int(np.minimum(count_a, count_b)[banded].sum())
        band[banded] = max(0, (pair_budget // 2 // max(occurrences, 1) - 1) // 2)

    # Occurrences of each w-gram grouped by w-gram, and the rank of each
    # position of a among the occurrences of its w-gram.
    a_by_gram = np.argsort(grams_a, kind="stable")
    b_by_gram = np.argsort(grams_b, kind="stable")
    checkpoint()
    first_in_a = np.cumsum(count_a) - count_a
    first_in_b = np.cumsum(count_b) - count_b
    rank_a = np.empty(len(grams_a), dtype=np.int64)
    rank_a[a_by_gram] = np.arange(len(grams_a)) - first_in_a[grams_a[a_by_gram]]

    # Partners of position i of a: ranks lowest[i] .. highest[i] - 1 in b.
    gram_band = band[grams_a]
    lowest = np.where(gram_band < 0, 0, np.maximum(rank_a - gram_band, 0))
    highest = np.where(
        gram_band < 0, count_b[grams_a], np.minimum(rank_a + gram_band + 1, count_b[grams_a])
    )
    partners = np.maximum(highest - lowest, 0)
    total = int(partners.sum())
    empty = np.empty(0, dtype=np.int64)
    if total == 0:
        return empty, empty, empty, exact
    pair_a = np.repeat(np.arange(len(grams_a)), partners)
    offset = np.arange(total) - np.repeat(np.cumsum(partners) - partners, partners)
    pair_b = b_by_gram[np.repeat(first_in_b[grams_a] + lowest, partners) + offset]

    diagonal = pair_b - pair_a
    checkpoint()
    order = np.lexsort((pair_a, diagonal))
    checkpoint()
    pair_a, diagonal = pair_a[order], diagonal[order]
    new_run = np.ones(total, dtype=bool)
    new_run[1:] = (diagonal[1:] != diagonal[:-1]) | (pair_a[1:] != pair_a[:-1] + 1)
    run_starts = np.flatnonzero(new_run)
    run_grams = np.diff(np.append(run_starts, total))
    run_a = pair_a[run_starts]
    return run_a, run_a + diagonal[run_starts], run_grams + (w - 1), exact


def _literal_chunks(a: IntArray, b: IntArray, w: int) -> tuple[list[Chunk], bool]:
    """One-to-one chunks of at least ``w`` words, chosen greedily longest first.

    Greedy string tiling (Wise 1993, used by plagiarism detectors): take the
    longest common run of words not yet in any chunk, make it a chunk, repeat
    until no run of ``w`` words is left.  Ties go to the earliest start in a,
    then in b.  It is not always the largest possible ``C`` (that is
    NP-hard in general) but it is the standard, explainable choice.

    The candidates are the maximal matches of :func:`_maximal_matches` in a
    heap keyed by length.  A popped candidate that no chunk has touched is
    the longest free run (lengths only shrink); a touched one is cut into its
    still-free pieces of at least ``w`` words, which go back on the heap.
    Cost: O(M log M) heap operations for M maximal matches plus the words of
    the candidates that get cut, on top of :func:`_maximal_matches`.
    """
    run_a, run_b, run_length, exact = _maximal_matches(a, b, w, _PAIR_BUDGET)
    heap = [
        (-length, start_a, start_b)
        for start_a, start_b, length in zip(
            run_a.tolist(), run_b.tolist(), run_length.tolist(), strict=True
        )
    ]
    heapq.heapify(heap)
    used_a, used_b = bytearray(len(a)), bytearray(len(b))
    chunks: list[Chunk] = []
    steps = 0
    while heap:
        steps += 1
        if steps % 4096 == 0:
            checkpoint()
        negative_length, start_a, start_b = heapq.heappop(heap)
        length = -negative_length
        if not any(used_a[start_a : start_a + length]) and not any(
            used_b[start_b : start_b + length]
        ):
            used_a[start_a : start_a + length] = b"\x01" * length
            used_b[start_b : start_b + length] = b"\x01" * length
            chunks.append(Chunk(start_a, start_b, length))
            continue
        piece_start = None  # offset where the current free piece began
        for offset in range(length + 1):
            free = offset < length and not used_a[start_a + offset] and not used_b[start_b + offset]
            if free and piece_start is None:
                piece_start = offset
            elif not free and piece_start is not None:
                if offset - piece_start >= w:
                    heapq.heappush(
                        heap,
                        (piece_start - offset, start_a + piece_start, start_b + piece_start),
                    )
                piece_start = None
    chunks.sort()
    return chunks, exact


# --------------------------------------------------------------------------
# Information matching


class _InformationCounts(NamedTuple):
    length_a: int
    length_b: int
    common: int


def _repeats_earlier_text(words: IntArray, w: int) -> BoolArray:
    """Words inside a run of at least ``w`` words that occurs earlier in the document."""
    checkpoint()
    if len(words) < w:
        return np.zeros(len(words), dtype=bool)
    (grams,) = _gram_ids([words], w)
    seen_before = np.ones(len(grams), dtype=bool)
    seen_before[np.unique(grams, return_index=True)[1]] = False
    return _covered(seen_before, len(words), w)


def _information_counts(
    a: IntArray, b: IntArray, chunk_words: int, repeat_words: int
) -> _InformationCounts:
    """``L``, ``S`` and ``C`` under seed 001's information matching.

    * A word adds information unless it lies in a run of ``repeat_words``
      (= w) words that already occurred earlier in the same document ("the
      second copy ... doesn't exist"); the information length of a document
      counts the words that add information.
    * A word is common if it lies in a run of at least ``chunk_words`` words
      that occurs anywhere in the other document, any number of times (seed
      001 example 3: both overlapping chunks count, C = 9).
    * ``C`` is the smaller of the two documents' counts of common words that
      add information.  The two counts differ once text is matched more than
      once (9 and 10 words in example 3, where the seed says C = 9); the
      smaller keeps ``C <= S``, so 0 <= S_J <= S_L <= 1 still hold.

    Linear in the words but for sorting the w-grams: O(n log n).
    """
    checkpoint()
    grams_a, grams_b = _gram_ids([a, b], chunk_words)
    in_b = np.isin(grams_a, grams_b)
    in_a = np.isin(grams_b, grams_a)
    new_a = ~_repeats_earlier_text(a, repeat_words)
    new_b = ~_repeats_earlier_text(b, repeat_words)
    common_a = int(np.count_nonzero(_covered(in_b, len(a), chunk_words) & new_a))
    common_b = int(np.count_nonzero(_covered(in_a, len(b), chunk_words) & new_b))
    return _InformationCounts(
        int(np.count_nonzero(new_a)), int(np.count_nonzero(new_b)), min(common_a, common_b)
    )


# --------------------------------------------------------------------------
# compare()


def compare(
    a: str,
    b: str,
    *,
    min_chunk_words: int = DEFAULT_MIN_CHUNK_WORDS,
    shingle_words: int = SHINGLE_WORDS,
    tokenisation: int = 1,
) -> Comparison:
    """All exact measures of :class:`Comparison` for documents ``a`` and ``b``.

    ``min_chunk_words`` is seed 001's ``w``, five words by default.  The
    shingles default to the fingerprint's three words; seed 001's own S_R
    numbers use shingles of ``w`` words (``shingle_words=5``), and only then
    can S_R be compared with S_J by the seed's formula.

    Symmetric: ``compare(b, a)`` gives the same numbers with a and b swapped
    (the matching runs on the documents in a fixed order, so its ties are
    broken the same way).  Two 100 KB documents take well under a second;
    a few seconds when they repeat the same line thousands of times (then
    ``exact`` may be False, see :func:`_maximal_matches`).
    """
    if min_chunk_words < 1:
        raise ValueError(f"min_chunk_words must be at least 1, not {min_chunk_words}")
    words_a, words_b = list(tokens(a, tokenisation)), list(tokens(b, tokenisation))
    swapped = (len(words_a), words_a) < (len(words_b), words_b)
    first, second = (words_b, words_a) if swapped else (words_a, words_b)  # longer first
    ids_first, ids_second = _word_ids(first, second)

    if first and second:
        chunk_words = min(min_chunk_words, len(second))
        found, exact = _literal_chunks(ids_first, ids_second, chunk_words)
        information = _information_counts(ids_first, ids_second, chunk_words, min_chunk_words)
    else:
        chunk_words, found, exact = min_chunk_words, [], True
        information = _InformationCounts(len(first), len(second), 0)
    if swapped:
        found = sorted(Chunk(c.start_b, c.start_a, c.length) for c in found)
    common = sum(c.length for c in found)
    longer, shorter = len(first), len(second)
    info_longer = max(information.length_a, information.length_b)
    info_shorter = min(information.length_a, information.length_b)

    shingle_list_a = _shingles_of(words_a, shingle_words)
    shingle_list_b = _shingles_of(words_b, shingle_words)
    set_a, set_b = set(shingle_list_a), set(shingle_list_b)
    multiset_a, multiset_b = Counter(shingle_list_a), Counter(shingle_list_b)
    a_in_b = set_containment(set_a, set_b)
    b_in_a = set_containment(set_b, set_a)
    if len(words_a) == len(words_b):
        of_shorter = max(a_in_b, b_in_a)
    else:
        of_shorter = a_in_b if len(words_a) < len(words_b) else b_in_a

    return Comparison(
        words_a=len(words_a),
        words_b=len(words_b),
        longer=longer,
        shorter=shorter,
        common=common,
        s_l=_ratio(common, longer),
        s_j=_ratio(common, longer + shorter - common),
        information_longer=info_longer,
        information_shorter=info_shorter,
        information_common=information.common,
        information_s_l=_ratio(information.common, info_longer),
        information_s_j=_ratio(information.common, info_longer + info_shorter - information.common),
        s_r=set_resemblance(set_a, set_b),
        containment=of_shorter,
        containment_a_in_b=a_in_b,
        containment_b_in_a=b_in_a,
        multiset_jaccard=_multiset_jaccard(multiset_a, multiset_b),
        repetition_similarity=_repetition_similarity(multiset_a, multiset_b),
        chunks=tuple(found),
        min_chunk_words=chunk_words,
        shingle_words=shingle_words,
        exact=exact,
    )


# --------------------------------------------------------------------------
# MinHash

_MERSENNE_61 = (1 << 61) - 1
_PRIME = np.uint64(_MERSENNE_61)
_LOW_32 = np.uint64((1 << 32) - 1)
_LOW_29 = np.uint64((1 << 29) - 1)

EMPTY_SIGNATURE_VALUE = np.iinfo(np.uint64).max
"""Every entry of the signature of a document without shingles.

No hash reaches it (all are below 2^61 - 1), so an empty document's
signature agrees with no other document's.
"""

# Shingles are hashed against the hash functions in blocks of at most this
# many values (shingles x hash functions), which bounds the memory to a few
# arrays of 8 MB whatever the number of hashes and the length of the text.
_BLOCK = 1 << 20
MAX_MEASURED_CHARS = 1 << 20
"""The longest text the word-by-word measures (:func:`compare`, the measures
of :class:`Shingled` in verified search by s_l, s_j and their information
forms) take in the server: they hold every word as a Python string (some 60
bytes each).  The set measures in C take texts of any length."""
MAX_HASHES = 10_000
"""The most hash functions a signature may have: 10,000 give S_R within about
+/- 0.01 already, and each costs a pass over every shingle of the text."""
_Z_95 = 1.959963984540054  # the standard normal's 97.5 % quantile


def _mod_mersenne(value: UInt64Array) -> UInt64Array:
    """``value mod (2^61 - 1)`` for any uint64, using 2^61 = 1 (mod 2^61 - 1)."""
    folded = (value & _PRIME) + (value >> np.uint64(61))  # < 2^61 + 8
    reduced: UInt64Array = np.where(folded >= _PRIME, folded - _PRIME, folded)
    return reduced


def _mul_mod_mersenne(a: UInt64Array, x: UInt64Array) -> UInt64Array:
    """``a * x mod (2^61 - 1)`` for a, x below 2^61, in uint64 without overflow.

    Split both in 32-bit halves: a * x = hh 2^64 + mid 2^32 + ll, where
    2^64 = 8 and 2^61 = 1 modulo the prime; each partial product fits.
    """
    a_high, a_low = a >> np.uint64(32), a & _LOW_32  # a_high < 2^29
    x_high, x_low = x >> np.uint64(32), x & _LOW_32
    high = a_high * x_high  # < 2^58, times 2^64 = 8
    middle = a_high * x_low + a_low * x_high  # < 2^62, times 2^32
    # middle 2^32 = (middle >> 29) 2^61 + (middle & (2^29 - 1)) 2^32
    middle_folded = (middle >> np.uint64(29)) + ((middle & _LOW_29) << np.uint64(32))
    low = _mod_mersenne(a_low * x_low)
    return _mod_mersenne((high << np.uint64(3)) + middle_folded + low)


def _hash_parameters(hashes: int, seed: int) -> tuple[UInt64Array, UInt64Array]:
    """The fixed ``a`` (nonzero) and ``b`` of hash functions (a x + b) mod (2^61 - 1)."""
    generator = np.random.default_rng(seed)
    multipliers = generator.integers(1, _MERSENNE_61, size=hashes, dtype=np.uint64)
    increments = generator.integers(0, _MERSENNE_61, size=hashes, dtype=np.uint64)
    return multipliers, increments


def minhash_signature(
    text: str, hashes: int = 200, seed: int = 0, *, shingle_words: int = SHINGLE_WORDS,
    tokenisation: int = 1,
) -> UInt64Array:
    """The MinHash signature of ``text``: for each of ``hashes`` hash functions, the
    smallest hash of any of its shingles.

    Each distinct shingle is hashed once with xxh64 (seed 0, UTF-8: the
    fingerprint's feature hash) and reduced modulo the prime 2^61 - 1; hash
    function k is then ``(a_k x + b_k) mod (2^61 - 1)`` with ``a_k``, ``b_k``
    drawn from ``seed``, a universal family computed vectorised.  Compare
    only signatures made with the same ``hashes``, ``seed`` and
    ``shingle_words``.

    A text without shingles (no words) gets ``EMPTY_SIGNATURE_VALUE``
    everywhere.
    """
    if hashes < 1:
        raise ValueError(f"hashes must be at least 1, not {hashes}")
    if shingle_words < 1:
        raise ValueError(f"shingle_words must be at least 1, not {shingle_words}")
    signature = np.full(hashes, EMPTY_SIGNATURE_VALUE, dtype=np.uint64)
    multipliers, increments = _hash_parameters(hashes, seed)
    functions = max(1, min(hashes, _BLOCK // 64))  # hash functions per block
    # A repeated shingle changes no minimum, so the shingles are taken as they
    # come, a batch of the text at a time, each batch's distinct hashes once.
    for batch in _shingle_batches(text, shingle_words, tokenisation):
        values = _mod_mersenne(np.unique(np.fromiter(
            (xxhash.xxh64_intdigest(s.encode("utf-8")) for s in batch),
            dtype=np.uint64, count=len(batch))))  # fmt: skip
        shingles = max(1, _BLOCK // functions)
        for first in range(0, hashes, functions):
            a = multipliers[first : first + functions, None]
            b = increments[first : first + functions, None]
            for start in range(0, len(values), shingles):
                checkpoint()
                block = values[None, start : start + shingles]
                hashed = _mod_mersenne(_mul_mod_mersenne(a, block) + b)
                np.minimum(signature[first : first + functions], hashed.min(axis=1),
                           out=signature[first : first + functions])  # fmt: skip
    return signature


def _shingle_batches(text: str, shingle_words: int, tokenisation: int) -> Iterator[list[str]]:
    """:func:`word_shingles` of ``text`` in batches, a piece of the text at a time
    (the last ``shingle_words - 1`` words of a piece start the next one's)."""
    carried: list[str] = []
    seen = 0
    for batch in token_batches(text, tokenisation):
        checkpoint()
        words = carried + batch
        seen += len(batch)
        if len(words) >= shingle_words:
            yield _shingles_of(words, shingle_words)
        carried = words[max(0, len(words) - shingle_words + 1) :] if shingle_words > 1 else []
    if 0 < seen < shingle_words:
        yield _shingles_of(carried, shingle_words)


def minhash_estimate(signature_a: UInt64Array, signature_b: UInt64Array) -> Estimate:
    """Estimate S_R as the share of hash functions whose minima agree.

    Each hash function picks one shingle of the union at random; it is
    common with probability S_R, so the count of agreements is binomial and
    the interval is the 95 % Wilson score interval (it stays inside [0, 1]
    and is not empty at 0 or 1, unlike the normal approximation).  200
    hashes give about +/- 0.07 near S_R = 0.5, as seed 001 says.

    If both documents are empty S_R is 0 by definition (module docstring),
    so the estimate is exactly 0 with no uncertainty.
    """
    if signature_a.shape != signature_b.shape or signature_a.ndim != 1:
        raise ValueError("signatures must be one-dimensional and of the same length")
    hashes = len(signature_a)
    if hashes == 0:
        raise ValueError("signatures must not be empty")
    empty_a = bool(np.all(signature_a == EMPTY_SIGNATURE_VALUE))
    if empty_a and bool(np.all(signature_b == EMPTY_SIGNATURE_VALUE)):
        return Estimate(0.0, 0.0, 0.0, hashes)
    share = int(np.count_nonzero(signature_a == signature_b)) / hashes
    z_squared = _Z_95**2
    centre = (share + z_squared / (2 * hashes)) / (1 + z_squared / hashes)
    half_width = (
        _Z_95
        * np.sqrt(share * (1 - share) / hashes + z_squared / (4 * hashes**2))
        / (1 + z_squared / hashes)
    )
    return Estimate(
        share, max(0.0, float(centre - half_width)), min(1.0, float(centre + half_width)), hashes
    )


# -- verification: the measures a verified search filters on ------------------

VERIFIED_MEASURES = ("s_r", "s_l", "s_j", "containment", "information_s_l", "information_s_j")
"""Exact measures a verified search can keep candidates by."""

DEFAULT_MEASURE = "s_l"
"""The measure the client's searches and ``nearsim compare`` use unless told otherwise.

Chosen by ``benchmarks/defaults.py`` (docs/GUIDE.md, "What "% similar"
means"): S_L falls about as much as the share of words an edit touches,
where S_R falls about three times as much (each changed word breaks three
shingles) and stays near 1 when a text gains a copy of its own passages."""
DEFAULT_MIN_SIMILARITY = 0.87
"""The threshold of :data:`DEFAULT_MEASURE` unless told otherwise: on the evaluation
corpus, recall 0.97 of the lightly edited copies at precision 0.98."""
SET_DEFAULT_MIN_SIMILARITY = 0.8
"""The threshold by S_R that the SQL functions and ``nearsim spark`` default to."""
WORD_MEASURES = ("s_l", "s_j", "information_s_l", "information_s_j")
"""The verified measures counted on words and passages (:func:`compare`), not on shingle sets."""
CANDIDATE_RESEMBLANCE = 0.5
"""The S_R a document needs to be measured by a word measure in a verified search.

The radius calibrated for S_R >= s is too small for S_L >= s: a light edit
lowers S_R about three times as much as S_L (``benchmarks/defaults.py``
measures how many light edits S_R >= 0.5 keeps)."""

SHORT_SHINGLES = 10
"""A text with fewer shingles than this is short: its fingerprint is unreliable.

So few features make the fingerprint jumpy, so a near-duplicate of a short
text may lie at any distance; verified results flag such pairs."""


class Shingled:
    """A text with its shingle set, made once however many pairs it is in."""

    def __init__(self, text: str, tokenisation: int = 1) -> None:
        self.text = text
        self.tokenisation = tokenisation
        self.shingles = set(word_shingles(text, tokenisation=tokenisation))
        self.short = len(self.shingles) < SHORT_SHINGLES


def verified_measure(measure: str, a: Shingled, b: Shingled) -> float:
    """One of :data:`VERIFIED_MEASURES` of texts a and b (containment: of a in b)."""
    if measure == "s_r":
        return set_resemblance(a.shingles, b.shingles)
    if measure == "containment":
        return set_containment(a.shingles, b.shingles)
    if measure not in VERIFIED_MEASURES:
        raise ValueError(f"unknown measure {measure!r}: use one of {', '.join(VERIFIED_MEASURES)}")
    return float(getattr(compare(a.text, b.text, tokenisation=a.tokenisation), measure))
