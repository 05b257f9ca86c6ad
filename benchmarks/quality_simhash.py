"""What benchmarks/quality.py measures of SimHash alone: radius curves and seed 003.

Precision and recall of all pairs within a Hamming radius r = 0..24, for
five SimHash profiles, against the exact truth; and seed 003's observation,
the Hamming distance (and S_R) between an original of the corpus and its
copy modified by one insertion or deletion, by tenth of the amount.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from numpy.typing import NDArray

import nearsim
from nearsim.core.measures import set_resemblance, word_shingles

from .common import timer
from .corpus import SEED_003_KINDS, Document
from .pair_methods import SEED_RADIUS, fingerprints, radius_pairs
from .scoring import THRESHOLDS, Scores
from .truth import Truth

Int64s = NDArray[np.int64]

MAX_CURVE_RADIUS = 24
PROFILES = ("default/1", "set/1", "english/1", "chars/1", "soundex/1")


def radius_curve(texts: Sequence[str], truth: Truth, profile: str) -> dict[str, Any]:
    """Precision and recall of ``hamming <= r`` for r = 0..24, per threshold."""
    documents = len(texts)
    with timer() as signature_time:
        present, prints = fingerprints(texts, profile)
    with timer() as pair_time:
        codes, distance = radius_pairs(present, prints, MAX_CURVE_RADIUS, documents)
    result: dict[str, Any] = {
        "signature_seconds": signature_time(), "pair_seconds": pair_time(),
        "pairs_within_24": len(codes),
    }
    predicted = np.cumsum(np.bincount(distance, minlength=MAX_CURVE_RADIUS + 1))
    for threshold in THRESHOLDS:
        positives = truth.codes(threshold)
        hit = np.isin(codes, positives)
        found = np.cumsum(np.bincount(distance[hit], minlength=MAX_CURVE_RADIUS + 1))
        curve = [Scores.of_counts(int(predicted[r]), len(positives), int(found[r]))
                 for r in range(MAX_CURVE_RADIUS + 1)]
        result[str(threshold)] = {
            "precision": [c.precision for c in curve], "recall": [c.recall for c in curve],
            "f1": [c.f1 for c in curve], "predicted": [c.predicted for c in curve],
        }
    return result


def seed003_distances(corpus: Sequence[Document], present: Int64s,
                      prints: Int64s) -> list[dict[str, Any]]:
    """Hamming distance and S_R between each original and its single-edit
    insertion or deletion copy, by kind and tenth of the amount."""
    position = {d.id: p for p, d in enumerate(corpus)}
    print_of = dict(zip(present.tolist(), prints.tolist(), strict=True))
    shingles: dict[int, set[str]] = {}

    def shingle_set(p: int) -> set[str]:
        if p not in shingles:
            shingles[p] = set(word_shingles(corpus[p].text))
        return shingles[p]

    rows = []
    for p, document in enumerate(corpus):
        if len(document.edits) != 1 or document.edits[0] not in SEED_003_KINDS:
            continue
        assert document.origin is not None
        o = position[document.origin]
        if p not in print_of or o not in print_of:
            continue
        rows.append({
            "kind": document.edits[0], "amount": document.amounts[0],
            "distance": nearsim.hamming(print_of[p], print_of[o]),
            "s_r": set_resemblance(shingle_set(p), shingle_set(o)),
        })
    return rows


def seed003_table(rows: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    table = []
    for kind in SEED_003_KINDS:
        for tenth in range(8):
            chosen = [r for r in rows if r["kind"] == kind
                      and min(int(r["amount"] * 10), 7) == tenth]
            if not chosen:
                continue
            distance = np.array([r["distance"] for r in chosen], dtype=np.float64)
            table.append({
                "kind": kind, "amount": f"{tenth * 10}-{tenth * 10 + 10}%", "pairs": len(chosen),
                "mean_distance": float(distance.mean()),
                "median_distance": float(np.median(distance)),
                "p90_distance": float(np.percentile(distance, 90)),
                "within_6": float(np.mean(distance <= SEED_RADIUS)),
                "mean_s_r": float(np.mean([r["s_r"] for r in chosen])),
            })
    return table
