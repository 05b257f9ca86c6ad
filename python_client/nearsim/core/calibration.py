"""What a Hamming distance means in resemblance (S_R), measured on a corpus.

Users search with ``hamming(a, b) <= k`` but think in "% similar".  SimHash
gives no closed-form link between the two for real text (shingle counts,
repeated shingles and the per-bit vote all matter), so the link is measured:
pairs of documents with known edits are fingerprinted, their exact S_R
(:func:`nearsim.measures.resemblance`) is computed, and the result is
tabulated per distance.  The table ships with the package as
``calibration-default-1.json``, one file per fingerprint profile, because a
new profile gives different distances for the same pair.

The table answers two questions:

:func:`estimate`
    "these two fingerprints are ``d`` bits apart; how similar are the
    documents?" -- mean S_R at that distance with a 5 %-95 % interval.
:func:`radius_for`
    "I want documents at least ``s`` similar; which ``k`` do I search
    with?" -- the radius that kept at least 99 % of the calibration pairs
    with S_R >= ``s``.

The calibration pairs are generated here, by :func:`calibration_pairs`, and
not in ``scripts/calibrate.py``, so that the tests can draw a held-out sample
with exactly the same procedure (another seed) and mypy checks it; the script
only loads the corpus and writes the file.  The procedure follows seed 003:
each modified copy gets an insertion or a deletion of a random substring of
up to 80 % of the text, plus milder edits (a few words changed, a verse
dropped or duplicated, typos) and unrelated pairs, so that S_R from 0 to 1
is populated.  The numbers are only as representative as that corpus and
those edits: KJV chapters (a few hundred to two thousand words).
"""

from __future__ import annotations

import json
import math
import random
import re
from collections.abc import Iterable, Sequence
from functools import cache
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np

from .bits import BITS, hamming
from .data import DATA_DIR
from .fingerprint import PROFILE
from .measures import resemblance
from .profiles import simhash

__all__ = [
    "MIN_PAIRS",
    "PERCENTILES",
    "RECALL_TARGET",
    "THRESHOLDS",
    "Estimate",
    "calibrate",
    "calibration_pairs",
    "estimate",
    "load_table",
    "radius_for",
]

PERCENTILES: tuple[int, ...] = (1, 5, 50, 95, 99)
"""S_R percentiles stored per distance (linear interpolation, numpy's default)."""

THRESHOLDS: tuple[float, ...] = tuple(round(0.50 + 0.05 * i, 2) for i in range(10))
"""The min_similarity values 0.50, 0.55, ..., 0.95 with a tabulated radius."""

RECALL_TARGET = 0.99
"""Share of the pairs above a threshold that the radius must keep."""

MIN_PAIRS = 10
"""Fewer pairs than this at a distance and :func:`estimate` gives no numbers.

Percentiles of a handful of pairs are noise; an explicit ``None`` is better
than a confident-looking interval, and borrowing a neighbouring distance
would hide that the corpus says nothing there (typically large distances,
where only unrelated documents fall).
"""

_DIGITS = 6  # floats in the table are rounded so that reruns give the same file
_DIRECTORY = DATA_DIR


class NotCalibrated(LookupError):
    """No calibration table ships for this fingerprint profile."""


def calibrated_as(profile: str) -> str:
    """The profile whose calibration table ``profile`` takes: a profile of version 2
    takes its version 1's.  The two differ only on Thai, Lao, Khmer... text, and
    the calibration pairs are English (edited KJV chapters), where they give the
    same fingerprints; ``make bench-languages`` checks the radii on Khmer pairs too."""
    spec, slash, version = profile.rpartition("/")
    return f"{spec}/1" if slash and version == "2" else profile


def table_path(profile: str = PROFILE) -> Path:
    """Where the calibration table of ``profile`` (a canonical name) is shipped."""
    slug = re.sub(r"[^a-z0-9]+", "-", profile.lower()).strip("-")
    return _DIRECTORY / f"calibration-{slug}.json"


class Estimate(NamedTuple):
    """S_R of document pairs whose fingerprints are ``distance`` bits apart.

    ``mean`` is the mean S_R of the calibration pairs at that distance,
    ``low`` and ``high`` their 5th and 95th percentiles.  All three are
    ``None`` when fewer than :data:`MIN_PAIRS` calibration pairs fell at
    this distance.
    """

    distance: int
    pairs: int
    mean: float | None
    low: float | None
    high: float | None


def _round(value: float) -> float:
    return round(float(value), _DIGITS)


def calibrate(pairs: Iterable[tuple[int, float]], profile: str = PROFILE) -> dict[str, Any]:
    """The calibration table of ``(hamming distance, S_R)`` pairs.

    Returns a JSON-ready dict with ``profile`` (whose distances they are), ``pairs``
    (how many), ``percentiles``, ``recall_target``, ``distances`` (for each
    distance 0..64: ``pairs``, ``mean`` and ``p1``, ``p5``, ``p50``, ``p95``,
    ``p99`` of S_R, ``None`` where no pair fell) and ``radii`` (for each of
    :data:`THRESHOLDS`: the smallest ``radius`` k such that at least
    :data:`RECALL_TARGET` of the pairs with S_R >= the threshold have distance
    <= k, the ``recall`` reached at k and the number of such ``pairs``;
    radius and recall are ``None`` if there is no such pair).
    """
    by_distance: list[list[float]] = [[] for _ in range(BITS + 1)]
    all_pairs: list[tuple[int, float]] = []
    for distance, similarity in pairs:
        if not 0 <= distance <= BITS:
            raise ValueError(f"Hamming distance must be in 0..{BITS}, got {distance}")
        if not 0.0 <= similarity <= 1.0:
            raise ValueError(f"S_R must be in [0, 1], got {similarity}")
        by_distance[distance].append(float(similarity))
        all_pairs.append((distance, float(similarity)))

    distances: list[dict[str, Any]] = []
    for distance, values in enumerate(by_distance):
        row: dict[str, Any] = {"distance": distance, "pairs": len(values)}
        array = np.asarray(values, dtype=np.float64)
        row["mean"] = _round(float(array.mean())) if values else None
        for p in PERCENTILES:
            row[f"p{p}"] = _round(float(np.percentile(array, p))) if values else None
        distances.append(row)

    radii: list[dict[str, Any]] = []
    for threshold in THRESHOLDS:
        # The exact S_R is a ratio of integers; compare with a little slack so
        # that a pair at exactly 0.7 counts for 0.7 despite float rounding.
        kept = sorted(d for d, s in all_pairs if s >= threshold - 1e-12)
        radius: int | None = None
        recall: float | None = None
        if kept:
            needed = math.ceil(RECALL_TARGET * len(kept) - 1e-9)
            radius = kept[max(needed, 1) - 1]
            recall = _round(sum(1 for d in kept if d <= radius) / len(kept))
        radii.append({"min_similarity": threshold, "radius": radius,
                      "recall": recall, "pairs": len(kept)})

    return {
        "profile": profile,
        "pairs": len(all_pairs),
        "percentiles": list(PERCENTILES),
        "recall_target": RECALL_TARGET,
        "distances": distances,
        "radii": radii,
    }


# --- the calibration pairs -------------------------------------------------

_LARGE_EDITS = ("insert", "delete")
_MILD_EDITS = ("words", "drop_verse", "dup_verse", "typos")


def _substring(rng: random.Random, text: str, length: int) -> str:
    start = rng.randint(0, max(len(text) - length, 0))
    return text[start : start + length]


def _edit(rng: random.Random, text: str, other: str, kind: str) -> str:
    """``text`` after one edit of ``kind``; ``other`` supplies new material."""
    size = len(text)
    if kind == "delete":
        length = rng.randint(1, max(1, int(0.8 * size)))
        start = rng.randint(0, size - length)
        return text[:start] + text[start + length :]
    if kind == "insert":
        # New material from another chapter: a copy of the same text would
        # add few new shingles and overstate S_R.
        piece = _substring(rng, other, rng.randint(1, max(1, int(0.8 * size))))
        at = rng.randint(0, size)
        return text[:at] + piece + text[at:]
    if kind == "words":
        words = text.split(" ")
        vocabulary = other.split() or ["word"]
        for _ in range(rng.randint(1, 5)):
            words[rng.randrange(len(words))] = rng.choice(vocabulary)
        return " ".join(words)
    if kind in ("drop_verse", "dup_verse"):
        verses = text.splitlines(keepends=True)
        i = rng.randrange(len(verses))
        if kind == "dup_verse":
            verses.insert(i, verses[i])
        elif len(verses) > 1:
            del verses[i]
        return "".join(verses)
    if kind == "typos":
        chars = list(text)
        for _ in range(rng.randint(1, 8)):
            i = rng.randrange(len(chars))
            chars[i] = rng.choice("abcdefghijklmnopqrstuvwxyz")
        return "".join(chars)
    raise ValueError(f"unknown edit {kind!r}")


def calibration_pairs(texts: Sequence[str], count: int, seed: int,
                      profile: str = PROFILE) -> list[tuple[int, float]]:
    """``count`` (Hamming distance, S_R) pairs drawn from ``texts`` with ``seed``.

    Each pair is a random text and, with probability 0.1, another random
    text (unrelated, S_R near 0); otherwise a modified copy: with
    probability 0.5 an insertion or a deletion (half each) of a random
    substring of up to 80 % of the text, else one mild edit (1-5 words
    replaced, a verse dropped or duplicated, 1-8 typos).  A third of the
    copies get a second edit of either kind, which fills the low and middle
    S_R range.  Pairs whose texts have no fingerprint are skipped.  The
    same arguments give the same pairs (Python's ``random.Random``).
    """
    if len(texts) < 2:
        raise ValueError("calibration needs at least two texts")
    rng = random.Random(seed)
    result: list[tuple[int, float]] = []
    while len(result) < count:
        i, j = rng.sample(range(len(texts)), 2)
        original, other = texts[i], texts[j]
        if rng.random() < 0.1:
            copy = other
        else:
            copy = original
            for step in range(1 + (rng.random() < 1 / 3)):
                group = _LARGE_EDITS if rng.random() < 0.5 else _MILD_EDITS
                if step == 0 or copy:
                    copy = _edit(rng, copy, other, rng.choice(group))
        a, b = simhash(original, profile), simhash(copy, profile)
        if a is None or b is None:
            continue
        result.append((hamming(a, b), resemblance(original, copy)))
    return result


# --- the shipped table -----------------------------------------------------


@cache
def load_table(profile: str = PROFILE) -> dict[str, Any]:
    """The calibration table shipped with the package for ``profile``.

    Raises :class:`NotCalibrated` if there is none, and ``RuntimeError`` if
    the file was made for another profile: its distances would not mean the
    same thing.
    """
    profile = calibrated_as(profile)
    path = table_path(profile)
    if not path.exists():
        raise NotCalibrated(
            f"no calibration ships for fingerprint profile {profile}; calibrated: "
            + ", ".join(sorted(calibrated_profiles()))
        )
    table: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    if table.get("profile") != profile:
        raise RuntimeError(
            f"{path.name} is for fingerprint profile {table.get('profile')!r}, "
            f"not {profile!r}: rerun scripts/calibrate.py --profile {profile}"
        )
    return table


def calibrated_profiles() -> list[str]:
    """The profiles a calibration table ships for."""
    return [json.loads(path.read_text(encoding="utf-8"))["profile"]
            for path in sorted(_DIRECTORY.glob("calibration-*.json"))]  # fmt: skip


def estimate(distance: int, profile: str = PROFILE) -> Estimate:
    """Expected S_R of two documents whose fingerprints are ``distance`` bits apart.

    ``mean``, ``low`` (5th percentile) and ``high`` (95th percentile) come
    from the calibration pairs at exactly that distance; they are ``None``
    when fewer than :data:`MIN_PAIRS` pairs fell there (see there why no
    neighbouring distance is borrowed).
    """
    if isinstance(distance, bool) or not isinstance(distance, int) or not 0 <= distance <= BITS:
        raise ValueError(f"distance must be an integer in 0..{BITS}, got {distance!r}")
    row = load_table(profile)["distances"][distance]
    pairs = int(row["pairs"])
    if pairs < MIN_PAIRS:
        return Estimate(distance, pairs, None, None, None)
    return Estimate(distance, pairs, row["mean"], row["p5"], row["p95"])


def radius_for(min_similarity: float, profile: str = PROFILE) -> int:
    """The Hamming radius to search with to find pairs with S_R >= ``min_similarity``.

    Between tabulated thresholds the answer is conservative: the threshold
    at or below ``min_similarity`` is used (a lower threshold needs the
    larger radius).  The radius is also the largest over that and all
    higher thresholds, so the result never grows with ``min_similarity``
    even where sampling noise would make the raw table do so; taking a
    larger radius only raises recall.  On the calibration pairs the recall
    is then at least 0.99 for every tabulated threshold.
    """
    low, high = THRESHOLDS[0], THRESHOLDS[-1]
    if not isinstance(min_similarity, (int, float)) or not low <= min_similarity <= high:
        raise ValueError(
            f"min_similarity must be between {low} and {high} (the calibrated "
            f"range), got {min_similarity!r}"
        )
    rows = load_table(profile)["radii"]
    index = max(i for i, t in enumerate(THRESHOLDS) if t <= min_similarity + 1e-9)
    radii = [int(row["radius"]) for row in rows[index:] if row["radius"] is not None]
    if not radii:
        raise RuntimeError(f"no calibration pair has S_R >= {THRESHOLDS[index]}")
    return max(radii)
