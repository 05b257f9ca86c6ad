"""Precision, recall and F1 of predicted pairs against the positives of the exact truth.

The thresholds at which benchmarks/truth.py's pairs are positives (S_R at
least the threshold) and the scores of a method's pairs against them, shared
by the benchmarks that score pairs: quality.py, verified.py and minhash.py.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

__all__ = ["THRESHOLDS", "Scores", "score", "score_pairs"]

Int64s = NDArray[np.int64]

THRESHOLDS = (0.8, 0.5)


@dataclass(frozen=True)
class Scores:
    """Precision, recall and F1 of a set of predicted pairs.

    Conventions for empty sets: with no predicted pair precision is 1.0
    (nothing wrong was claimed), with no positive recall is 1.0; F1 is 0.0
    when precision and recall are both 0.
    """

    predicted: int
    positives: int
    true_positives: int
    precision: float
    recall: float
    f1: float

    @classmethod
    def of_counts(cls, predicted: int, positives: int, true_positives: int) -> Scores:
        if not 0 <= true_positives <= min(predicted, positives):
            raise ValueError("true positives must be between 0 and both totals")
        precision = true_positives / predicted if predicted else 1.0
        recall = true_positives / positives if positives else 1.0
        f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
        return cls(predicted, positives, true_positives, precision, recall, f1)

def score(predicted: Int64s, positives: Int64s) -> Scores:
    """Scores of predicted pair codes against positive pair codes (each without repeats)."""
    true_positives = int(np.count_nonzero(np.isin(predicted, positives, assume_unique=True)))
    return Scores.of_counts(len(predicted), len(positives), true_positives)

def score_pairs(predicted: set[tuple[int, int]], positives: set[tuple[int, int]]) -> Scores:
    """:func:`score` for unordered pairs given as tuples (order inside a tuple ignored)."""
    def normal(pairs: set[tuple[int, int]]) -> set[tuple[int, int]]:
        return {(min(a, b), max(a, b)) for a, b in pairs if a != b}

    guessed, real = normal(predicted), normal(positives)
    return Scores.of_counts(len(guessed), len(real), len(guessed & real))
