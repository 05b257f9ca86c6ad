"""Groups of documents made from their pairs: connected components, and pivots.

The pairs come from :func:`nearsim.core.pairs.all_pairs` (or from the server's
``nearsim_pairs``); nodes are positions ``0 .. count - 1``.  Plain numpy, for
the same reason as :mod:`nearsim.core.pairs`: PL/Python runs it with Debian
12's numpy 1.24.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

from .interrupts import checkpoint

__all__ = ["connected_components", "pivot_groups"]

Int64s = NDArray[np.int64]

# Positions (of all_pairs' fingerprints, of nodes here) are packed two to an int64: sort
# keys, edge lists.
_MAX_ITEMS = 1 << 31

# pivot_groups lets a cancel through every this many nodes.
_CHECK_NODES = 1 << 14

_LOW32 = (1 << 32) - 1  # the second of two node numbers packed in an int64


def _check_edges(count: int, first: NDArray[np.int64], second: NDArray[np.int64]) -> tuple[
    Int64s, Int64s
]:
    if isinstance(count, bool) or not isinstance(count, (int, np.integer)):
        raise TypeError(f"count must be an int, not {type(count).__name__}")
    if not 0 <= count < _MAX_ITEMS:
        raise ValueError(f"count must be between 0 and {_MAX_ITEMS - 1}, got {count}")
    checked = []
    for name, ends in (("first", first), ("second", second)):
        array = np.asarray(ends)
        if array.ndim != 1:
            raise ValueError(f"{name} must be one-dimensional, got shape {array.shape}")
        if array.size and not np.issubdtype(array.dtype, np.integer):
            raise TypeError(f"{name} must hold node numbers (integers), not {array.dtype}")
        array = array.astype(np.int64, copy=False)
        if array.size and (int(array.min()) < 0 or int(array.max()) >= count):
            raise ValueError(f"{name} has node numbers outside 0..{count - 1}")
        checked.append(array)
    if len(checked[0]) != len(checked[1]):
        raise ValueError(
            f"first and second differ in length: {len(checked[0])} and {len(checked[1])}"
        )
    return checked[0], checked[1]


def _settle(parent: Int64s) -> Int64s:
    """Follow parent pointers until each node points at its tree's root."""
    while True:
        grandparent = parent[parent]
        if np.array_equal(grandparent, parent):
            return parent
        parent = grandparent


def connected_components(
    count: int, first: NDArray[np.int64], second: NDArray[np.int64]
) -> Int64s:
    """For each node ``0..count-1``, the smallest node of its connected component.

    Edges ``(first[e], second[e])`` are undirected; a node without edges is
    its own component.  Each round, every root of the forest hooks onto the
    smallest root it shares an edge with, trees are flattened and edges are
    moved to the roots, where those inside a tree disappear.  A root that
    still has edges merges with another within two rounds, so the number of
    rounds (each a sort of the remaining edges) grows with the logarithm of
    the size of the components, whatever their shape.
    """
    first, second = _check_edges(count, first, second)
    parent = np.arange(count, dtype=np.int64)
    low, high = np.minimum(first, second), np.maximum(first, second)
    while True:
        checkpoint()
        linked = low != high
        low, high = low[linked], high[linked]
        if not len(low):
            return parent
        packed = np.unique((high << 32) | low)
        high, low = packed >> 32, packed & _LOW32
        leads = np.ones(len(packed), dtype=np.bool_)
        np.not_equal(high[1:], high[:-1], out=leads[1:])
        # Both ends are roots, and high > low, so these links never form a cycle.
        parent[high[leads]] = low[leads]
        parent = _settle(parent)
        low, high = parent[low], parent[high]
        low, high = np.minimum(low, high), np.maximum(low, high)


def pivot_groups(count: int, first: NDArray[np.int64], second: NDArray[np.int64]) -> Int64s:
    """For each node ``0..count-1``, the pivot of its group.

    Nodes are taken in order of decreasing number of neighbours (ties: the
    smaller number first); a node not yet in a group becomes a pivot and
    takes all of its neighbours that are not in a group yet.  Every member
    is thus a direct neighbour of its pivot: within the distance of the
    pivot, unlike a connected component, which can chain A~B~C with A and C
    far apart.  A node without neighbours is its own pivot.  Degrees count
    distinct neighbours; repeated edges and self-loops do not count.
    """
    first, second = _check_edges(count, first, second)
    linked = first != second
    first, second = first[linked], second[linked]
    directed = np.unique(np.concatenate([(first << 32) | second, (second << 32) | first]))
    neighbours = directed & _LOW32
    start = np.searchsorted(directed, np.arange(count + 1, dtype=np.int64) << 32)
    degree = np.diff(start)
    pivot = np.arange(count, dtype=np.int64)
    connected = np.flatnonzero(degree)
    by_degree = connected[np.argsort(-degree[connected], kind="stable")]
    # Python reads the flags through the bytearray (much faster than numpy
    # scalar indexing); numpy updates them through the array over it.
    flags = bytearray(count)
    grouped = np.frombuffer(flags, dtype=np.bool_)
    starts = start.tolist()
    for step, node in enumerate(by_degree.tolist()):
        if step % _CHECK_NODES == 0:
            checkpoint()
        if flags[node]:
            continue
        around = neighbours[starts[node] : starts[node + 1]]
        joining = around[~grouped[around]]
        pivot[joining] = node
        grouped[joining] = True
        grouped[node] = True
    return pivot
