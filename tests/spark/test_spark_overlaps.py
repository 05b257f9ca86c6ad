"""The overlaps of pairs of sets of ranks, counted in chunks, are those of Python's sets."""

from __future__ import annotations

import random

import numpy as np
import pytest

from nearsim.spark import overlaps
from nearsim.spark.overlaps import Sets, count_overlaps


def sets_of(members: list[list[int]], nodes: list[int]) -> Sets:
    ordered = sorted(range(len(nodes)), key=nodes.__getitem__)
    arrays = [np.array(sorted(set(members[i])), dtype=np.int32) for i in ordered]
    offsets = np.zeros(len(arrays) + 1, dtype=np.int64)
    np.cumsum([len(array) for array in arrays], out=offsets[1:])
    ranks = max((max(m) for m in members if m), default=-1) + 1
    return Sets(np.array(sorted(nodes), dtype=np.int64), offsets,
                np.concatenate(arrays) if arrays else np.zeros(0, np.int32), ranks)  # fmt: skip


@pytest.mark.parametrize("chunk", [1, 7, 1 << 24])
def test_overlaps_are_those_of_python_sets(chunk: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """Pairs in any order, a set paired with many, with itself, with an empty set, and
    sets larger than a chunk: each pair's count is the size of the intersection."""
    monkeypatch.setattr(overlaps, "CHUNK_ELEMENTS", chunk)
    draw = random.Random(11)
    members = [[draw.randrange(60) for _ in range(draw.randrange(0, 40))] for _ in range(50)]
    members[3] = []
    nodes = draw.sample(range(-10**12, 10**12), len(members))  # numbers, not places
    first = [draw.randrange(len(nodes)) for _ in range(400)] + [5] * 30 + [3, 8]
    second = [draw.randrange(len(nodes)) for _ in range(400)] + list(range(30)) + [8, 3]
    counted = count_overlaps(sets_of(members, nodes),
                             np.array([nodes[i] for i in first], dtype=np.int64),
                             np.array([nodes[i] for i in second], dtype=np.int64))  # fmt: skip
    expected = [len(set(members[a]) & set(members[b])) for a, b in zip(first, second, strict=True)]
    assert counted.tolist() == expected
    assert count_overlaps(sets_of(members, nodes), np.zeros(0, np.int64),
                          np.zeros(0, np.int64)).tolist() == []  # fmt: skip


def test_a_node_that_was_not_collected_is_an_error() -> None:
    sets = sets_of([[1, 2], [2, 3]], [10, 20])
    with pytest.raises(KeyError, match="not collected"):
        count_overlaps(sets, np.array([10], np.int64), np.array([15], np.int64))
    with pytest.raises(KeyError, match="not collected"):
        count_overlaps(sets, np.array([10], np.int64), np.array([25], np.int64))
