"""Verified searches by a word measure (S_L, the default): S_R finds, the words decide.

The server finds documents by S_R exactly and fast (C: an exact join of
the shingle sets for pairs, the sketch index or the rotation index for a
query) and measures S_L in PL/Python only among the candidates within the
radius calibrated for S_R at the same threshold.  That radius misses light
edits: changing 4 % of the words of a text lowers its S_L to about 0.94
but its S_R to about 0.79 (each changed word breaks three shingles), and
its fingerprint moves accordingly.  So the client asks the server for the
documents at least :data:`~nearsim.core.measures.CANDIDATE_RESEMBLANCE`
similar by S_R, whatever their distance, and measures the word measure on
their texts itself (:func:`nearsim.core.measures.compare`).
``benchmarks/defaults.py`` measures what this keeps of lightly edited
copies.

The functions here take the server's answers and a way to read texts, and
give back plain tuples; :class:`~nearsim.client.documents.DocumentTable`
makes them its answers.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable, Iterator, Sequence

from ..core.measures import (
    CANDIDATE_RESEMBLANCE,
    WORD_MEASURES,
    Comparison,
    Shingled,
    compare,
)

__all__ = ["BATCH", "by_words", "groups", "measured_matches", "measured_pairs", "pairs_by_words"]

BATCH = 500
"""Pairs measured per read of their texts."""

Texts = Callable[[Sequence[str]], dict[str, str]]
"""Reads the texts of some keys (a key that is gone is left out)."""


def by_words(measure: str, min_similarity: float | None, max_distance: int | None) -> bool:
    """Whether a verified search is made here: by a word measure, from
    CANDIDATE_RESEMBLANCE up, without a radius given."""
    return (measure in WORD_MEASURES and max_distance is None and min_similarity is not None
            and CANDIDATE_RESEMBLANCE <= min_similarity <= 1)  # fmt: skip


def pairs_by_words(measure: str, min_similarity: float | None) -> bool:
    """Whether all pairs by a word measure are measured here, also within a
    radius given: the server would measure every candidate pair in PL/Python
    before giving the first, where here they are measured and given a batch
    at a time (and a reader that stops stops the command)."""
    return (measure in WORD_MEASURES and min_similarity is not None
            and 0 < min_similarity <= 1)  # fmt: skip


def measured_matches(
    query: str, candidates: Iterable[tuple[str, int, float, bool]], texts: Texts,
    measure: str, min_similarity: float, limit: int | None = None,
) -> list[tuple[str, int, float, bool, float, float]]:  # fmt: skip
    """``(key, distance, value, short, s_r, s_l)`` of the candidates (key, distance,
    S_R, short) whose ``measure`` to ``query`` is at least ``min_similarity``,
    most similar first, then nearest, then by key (the server's order)."""
    listed = list(candidates)
    stored = texts([key for key, *_ in listed])
    found = []
    for key, distance, s_r, short in listed:
        if key not in stored:  # deleted meanwhile
            continue
        exact = compare(query, stored[key])
        value = float(getattr(exact, measure))
        if value >= min_similarity:
            found.append((key, distance, value, short, s_r, exact.s_l))
    found.sort(key=lambda match: (-match[2], match[1], match[0]))
    return found[:limit]


def measured_pairs(
    candidates: Iterable[tuple[str, str, int, float | None, bool | None]], texts: Texts,
    measure: str,
    min_similarity: float, batch: int = BATCH,
) -> Iterator[tuple[str, str, int, float, bool]]:  # fmt: skip
    """``(a, b, distance, value, short)`` of the candidate pairs whose ``measure``
    is at least ``min_similarity``, in the candidates' order, a batch at a time."""
    listed = list(candidates)
    for start in range(0, len(listed), batch):
        piece = listed[start : start + batch]
        stored = texts(sorted({key for a, b, *_ in piece for key in (a, b)}))
        measured: dict[tuple[str, str], Comparison] = {}  # a pair of texts seen in the batch
        for a, b, distance, _, short in piece:
            if a in stored and b in stored:
                both = (stored[a], stored[b])
                exact = measured.get(both)
                if exact is None:
                    exact = measured[both] = compare(*both)
                value = float(getattr(exact, measure))
                if value >= min_similarity:
                    if short is None:  # candidates by bits: counted here
                        short = Shingled(stored[a]).short or Shingled(stored[b]).short
                    yield a, b, distance, value, short


def groups(pairs: Iterable[tuple[str, str]], method: str,
           min_size: int = 2) -> list[tuple[str | None, list[str]]]:  # fmt: skip
    """``(pivot, members)`` of the groups the pairs make, as ``nearsim_clusters_verified``
    makes them from its pairs: largest first, then by the group's smallest key;
    members pivot first, then by key; pivots only with method ``pivot``."""
    if method not in ("components", "pivot"):
        raise ValueError(f"unknown method {method!r}: use components or pivot")
    neighbours: dict[str, set[str]] = defaultdict(set)
    for a, b in pairs:
        if a != b:
            neighbours[a].add(b)
            neighbours[b].add(a)
    keys = sorted(neighbours)
    found: list[tuple[str | None, list[str]]] = []
    grouped: set[str] = set()
    if method == "components":
        for key in keys:
            if key in grouped:
                continue
            members, waiting = {key}, [key]
            while waiting:
                for other in neighbours[waiting.pop()] - members:
                    members.add(other)
                    waiting.append(other)
            grouped |= members
            found.append((None, sorted(members)))
    else:  # by decreasing number of neighbours, ties by key; each takes its free neighbours
        for key in sorted(keys, key=lambda k: (-len(neighbours[k]), k)):
            if key in grouped:
                continue
            members = {key} | (neighbours[key] - grouped)
            grouped |= members
            found.append((key, [key, *sorted(members - {key})]))
    found = [group for group in found if len(group[1]) >= min_size]
    found.sort(key=lambda group: (-len(group[1]), min(group[1])))
    return found
