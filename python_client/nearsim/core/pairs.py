"""Every pair of near-duplicate fingerprints in a set, and groups made from them.

:func:`all_pairs` finds every pair of fingerprints that differ in at most
``max_distance`` bits, exactly: the result is the same as comparing every
fingerprint with every other, only much faster.  It uses the block
pigeonhole of Manku, Jain and Das Sarma (WWW 2007): cut the 64 bits into
``m`` blocks; two fingerprints that differ in at most ``k`` bits differ in at
most ``k`` blocks, so at least ``m - k`` of their blocks are identical.  For
every choice of ``m - k`` blocks (a *table*) the fingerprints are grouped by
those blocks, and only fingerprints in the same group are compared.  A pair
whose blocks agree in several tables is reported by the first of them only,
so no pair is found twice and nothing needs to be deduplicated afterwards.

Real collections are skewed: thousands of empty or boilerplate documents
share one fingerprint.  Equal fingerprints are therefore collapsed first and
the search runs on distinct values; the pairs are expanded back to positions
at the end, in order, in bounded pieces.

:func:`connected_components` and :func:`pivot_groups` (in
:mod:`nearsim.core.groups`, and importable from here) turn the pairs into groups
of documents.

Everything here is plain numpy and the standard library, and runs on numpy
1.24, Debian 12's, which PL/Python uses inside the database: so there is no
``np.bitwise_count``, and the choices were measured with that numpy, where
sorting 64-bit integers is slow (no SIMD sort yet) and a stable sort of
16-bit integers is a fast radix sort: tables are sorted 16 bits at a time.
The constants of the cost model were measured on one core of a 2.6 GHz Xeon.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from itertools import combinations, pairwise

import numpy as np
from numpy.typing import NDArray

from .bits import BITS
from .groups import _MAX_ITEMS, connected_components, pivot_groups
from .interrupts import LimitExceeded, checkpoint

__all__ = ["all_pairs", "connected_components", "expected_pairs", "iter_pairs", "pivot_groups"]


Int64s = NDArray[np.int64]
Int32s = NDArray[np.int32]
Words = NDArray[np.uint64]

# Candidate pairs are checked this many at a time, and output is made in
# pieces of at most this many pairs.  With temporaries this small (they stay
# in the cache), checking candidates took 40% less time than with 2**21.
_CANDIDATES = 1 << 17

# Comparisons of every pair are done this many at a time, for the same reason.
_COMPARISONS = 1 << 16

# Groups of equal keys up to this size are expanded into pairs of indices
# and checked through them.  Larger groups (clusters of near-duplicates) are
# compared all against all, in blocks of their values: no index pairs to
# build and gather through, which is cheaper once a group has hundreds.
_SMALL_GROUP = 256

# The cost model, in nanoseconds, measured with numpy 1.24 on a million
# random fingerprints.  At a hundred thousand, everything costs about half
# as much per value (more of it stays in the cache); the ratios, which
# decide, hardly change.
_NS_PASS = 20.0  # a 16-bit radix pass of a table, per value, with its gathers
_NS_TABLE = 100_000.0  # fixed cost of a table
_NS_MEMBER = 10.0  # a value in a group of two or more
_NS_CANDIDATE = 20.0  # a candidate pair from a table, checked
_NS_COMPARISON = 9.0  # a pair compared by brute force
_MAX_TABLES = 20_000

# Keys of more than 16 bits are hashed to 32 bits: two radix passes, and
# three numpy operations instead of a few per kept block.  A rare unrelated
# value in the same group is rejected by checking the blocks themselves.
_HASH_BITS = 32
_GOLDEN = np.uint64(0x9E3779B97F4A7C15)  # odd, so the multiplication is a bijection

_M1 = np.uint64(0x5555555555555555)
_M2 = np.uint64(0x3333333333333333)
_M4 = np.uint64(0x0F0F0F0F0F0F0F0F)
_H01 = np.uint64(0x0101010101010101)
_LOW16 = np.uint64(0xFFFF)


def _u64(value: int) -> np.uint64:
    return np.uint64(value)


def _popcount(words: Words) -> Words:
    """The number of set bits of each element.

    numpy 1.24 has no ``bitwise_count``.  This is the SWAR count (bits summed
    in pairs, nibbles, bytes, then all bytes with one multiplication), done
    in place on two temporaries; it measured faster than summing a 256- or
    65536-entry table over the bytes or 16-bit words.
    """
    tmp = words >> _u64(1)
    tmp &= _M1
    count = words - tmp
    np.right_shift(count, _u64(2), out=tmp)
    tmp &= _M2
    count &= _M2
    count += tmp
    np.right_shift(count, _u64(4), out=tmp)
    count += tmp
    count &= _M4
    count *= _H01
    count >>= _u64(56)
    return count


def _ranges(starts: Int64s, lengths: Int64s) -> Int64s:
    """``concatenate([arange(s, s + n) for s, n in zip(starts, lengths)])`` without a loop."""
    total = int(lengths.sum())
    ends = np.cumsum(lengths)
    steps = np.repeat(starts - (ends - lengths), lengths)
    ranges: Int64s = np.arange(total, dtype=np.int64) + steps
    return ranges


def _radix_argsort(keys: Words, key_bits: int) -> Int64s:
    """A stable argsort of keys below ``2**key_bits``, 16 bits at a time.

    numpy sorts 16-bit integers with a radix sort when asked for a stable
    sort, so two such passes order a million 32-bit keys in a third of the
    time ``np.argsort`` takes for 64-bit keys on numpy 1.24.
    """
    low = (keys & _LOW16).astype(np.uint16)
    order = np.argsort(low, kind="stable").astype(np.int64, copy=False)
    for shift in range(16, key_bits, 16):
        digit = (keys[order] >> _u64(shift)).astype(np.uint16)  # wraps to the 16 bits wanted
        order = order[np.argsort(digit, kind="stable")]
    return order


def _weighted_chunks(weights: Int64s, budget: int) -> Iterator[tuple[int, int]]:
    """Consecutive ``(start, stop)`` ranges whose weights add up to about ``budget``.

    A range is never empty, so an element heavier than the budget forms a
    range of its own.
    """
    total = len(weights)
    ends = np.cumsum(weights)
    start = 0
    while start < total:
        before = int(ends[start - 1]) if start else 0
        stop = int(np.searchsorted(ends, before + budget, side="right"))
        stop = min(max(stop, start + 1), total)
        yield start, stop
        start = stop


def _check_max_distance(max_distance: int) -> None:
    if isinstance(max_distance, bool) or not isinstance(max_distance, (int, np.integer)):
        raise TypeError(f"max_distance must be an int, not {type(max_distance).__name__}")
    if not 0 <= max_distance <= BITS:
        raise ValueError(f"max_distance must be between 0 and {BITS}, got {max_distance}")


class _Blocks:
    """The cut of the 64 bits into ``count`` blocks of nearly equal width.

    The first ``BITS % count`` blocks (from the least significant bit) are
    one bit wider than the others.
    """

    def __init__(self, count: int) -> None:
        narrow, wide = divmod(BITS, count)
        self.count = count
        self.widths = [narrow + 1] * wide + [narrow] * (count - wide)
        self.starts = [sum(self.widths[:b]) for b in range(count)]
        self.masks = [((1 << w) - 1) << s for w, s in zip(self.widths, self.starts, strict=True)]


def _search_cost(distinct: int, max_distance: int, block_count: int) -> float:
    """Estimated nanoseconds for the tables of ``block_count`` blocks.

    Assumes random fingerprints; clusters of near-duplicates cost more
    candidates than estimated, but they are also the pairs being looked for.
    Tables only differ in how many of the wider blocks they keep, which sets
    their key width, so they are counted by that number.
    """
    blocks = _Blocks(block_count)
    kept = block_count - max_distance
    narrow = min(blocks.widths)
    wide_blocks = blocks.widths.count(narrow + 1)
    narrow_blocks = block_count - wide_blocks
    others = distinct - 1
    cost = 0.0
    for wide in range(max(0, kept - narrow_blocks), min(wide_blocks, kept) + 1):
        tables = math.comb(wide_blocks, wide) * math.comb(narrow_blocks, kept - wide)
        key_bits = kept * narrow + wide
        collision = 2.0**-key_bits
        passes = 1
        if key_bits > 16:
            collision += 2.0**-_HASH_BITS
            passes = 2
        shared = distinct * -math.expm1(-others * collision)  # values whose key is not unique
        candidates = distinct * others / 2 * collision
        cost += tables * (
            _NS_TABLE + passes * distinct * _NS_PASS + shared * _NS_MEMBER
            + candidates * _NS_CANDIDATE
        )
    return cost


def _choose_blocks(distinct: int, max_distance: int) -> int:
    """How many blocks make the search cheapest, or 0 to compare every pair.

    More blocks mean wider keys, hence fewer fingerprints compared in each
    table, but ``comb(m, k)`` tables to sort.
    """
    best_blocks = 0
    best_cost = distinct * (distinct - 1) / 2 * _NS_COMPARISON
    for block_count in range(max_distance + 1, BITS + 1):
        if math.comb(block_count, max_distance) > _MAX_TABLES:
            break
        cost = _search_cost(distinct, max_distance, block_count)
        if cost < best_cost:
            best_blocks, best_cost = block_count, cost
    return best_blocks


def _brute_pairs(values: Words, max_distance: int,
                 limit: _PairLimit | None = None) -> tuple[Int32s, Int32s]:  # fmt: skip
    """Positions ``i < j`` of every pair of ``values`` within ``max_distance``."""
    firsts: list[Int32s] = []
    seconds: list[Int32s] = []
    count = len(values)
    rows = max(1, _COMPARISONS // max(count - 1, 1))
    for top in range(0, count - 1, rows):
        checkpoint()
        bottom = min(count - 1, top + rows)
        xor = values[top:bottom, None] ^ values[None, top + 1 :]
        # Column c of row r is the pair (top + r, top + 1 + c): keep c >= r.
        near = np.triu(_popcount(xor) <= max_distance)
        row, column = np.nonzero(near)
        firsts.append((row + top).astype(np.int32))
        seconds.append((column + (top + 1)).astype(np.int32))
        if limit is not None:
            limit.add(len(row))
    return _joined(firsts), _joined(seconds)


def _group_pairs(group: Words, max_distance: int, table: _Table,
                 limit: _PairLimit) -> tuple[Int64s, Int64s]:  # fmt: skip
    """Positions of the pairs of a large group (equal keys in ``table``) within
    ``max_distance`` that ``table`` reports.

    Such a pair differs in every block that must differ, so the group is cut into
    parts by the one of those blocks in which its values are most alike, and each
    part is compared with the parts after it only.  A group of values alike in many
    bits (ones confined to their low bits) is one in many tables, and in most of
    them one part holds nearly all of it: a few comparisons instead of all."""
    if not table.must_differ:  # the first table: every pair with equal blocks is its
        # the group's near pairs are held before those that are not the table's go
        first, second = _brute_pairs(group, max_distance, limit.inner())
        mine = table.owns(group[first] ^ group[second])
        limit.add(int(np.count_nonzero(mine)))
        return first[mine].astype(np.int64), second[mine].astype(np.int64)
    count = len(group)
    parts = [np.unique(group & mask, return_inverse=True, return_counts=True)
             for mask in table.must_differ]
    _, inverse, sizes = max(parts, key=lambda part: int(np.sum(part[2] ** 2)))
    order = np.argsort(inverse, kind="stable")
    bounds = [0, *np.cumsum(sizes).tolist()]
    values = group[order]
    firsts: list[Int64s] = []
    seconds: list[Int64s] = []
    for start, end in pairwise(bounds):
        if end == count:
            break
        later = values[end:]
        rows = max(1, _COMPARISONS // len(later))
        for top in range(start, end, rows):
            checkpoint()
            xor = values[top : min(end, top + rows), None] ^ later[None, :]
            near = _popcount(xor) <= max_distance
            near &= table.owns(xor)
            row, column = np.nonzero(near)
            firsts.append(order[row + top])
            seconds.append(order[column + end])
            limit.add(len(row))
    if not firsts:
        return np.empty(0, np.int64), np.empty(0, np.int64)
    return np.concatenate(firsts), np.concatenate(seconds)


def _joined(pieces: list[Int32s]) -> Int32s:
    return np.concatenate(pieces) if pieces else np.empty(0, dtype=np.int32)


class _Table:
    """One choice of ``m - k`` blocks, and the rule that reports each pair once.

    Tables are taken in the lexicographic order of their block numbers, so
    the first table whose blocks are all equal for a pair consists of the
    ``m - k`` lowest-numbered equal blocks.  A pair therefore belongs to
    this table exactly when its kept blocks are equal and every block
    numbered below the last kept one that is not kept differs: equivalent to
    a lookup from the set of equal blocks to the first table it contains,
    with no table of ``2**m`` entries.
    """

    def __init__(self, blocks: _Blocks, kept: tuple[int, ...]) -> None:
        self.blocks = blocks
        self.kept = kept
        self.mask = _u64(sum(blocks.masks[b] for b in kept))
        self.must_differ = [_u64(blocks.masks[b]) for b in range(kept[-1]) if b not in kept]
        self.key_bits = sum(blocks.widths[b] for b in kept)

    def sort(self, values: Words) -> tuple[NDArray[np.unsignedinteger], Int64s, Int64s | None]:
        """Group ``values`` by their key in this table.

        Returns the sorted keys, and one or two permutations: the value at
        sorted position ``i`` is ``values[first[second[i]]]``, or
        ``values[first[i]]`` without a second.  Composing them would cost a
        random gather of every position; only positions in groups of two or
        more are ever looked up.

        Keys of up to 16 bits are the kept blocks side by side, sorted in
        one pass.  Wider keys are hashed to 32 bits, which takes three
        operations instead of a few per kept block; a rare unrelated key in
        the same group is rejected later by checking the blocks themselves.
        """
        if self.key_bits <= 16:
            narrow = self._packed_blocks(values).astype(np.uint16)
            first = np.argsort(narrow, kind="stable")
            return narrow[first], first, None
        work = values & self.mask
        work *= _GOLDEN
        work >>= _u64(BITS - _HASH_BITS)
        key = work.astype(np.uint32)
        first = np.argsort(key.astype(np.uint16), kind="stable")  # the low 16 bits
        key = key[first]
        second = np.argsort((key >> np.uint32(16)).astype(np.uint16), kind="stable")
        return key[second], first, second

    def _packed_blocks(self, values: Words) -> Words:
        """The kept blocks side by side, one shift per run of adjacent blocks."""
        key = np.zeros(len(values), dtype=np.uint64)
        part = np.empty_like(key)
        offset = 0
        for run in self._runs():
            width = sum(self.blocks.widths[b] for b in run)
            np.right_shift(values, _u64(self.blocks.starts[run[0]]), out=part)
            part &= _u64((1 << width) - 1)
            part <<= _u64(offset)
            key |= part
            offset += width
        return key

    def _runs(self) -> list[list[int]]:
        """The kept blocks as runs of adjacent ones, each extracted with one shift."""
        runs: list[list[int]] = []
        for block in self.kept:
            if runs and runs[-1][-1] == block - 1:
                runs[-1].append(block)
            else:
                runs.append([block])
        return runs

    def owns(self, xor: Words) -> NDArray[np.bool_]:
        """Which pairs (given as the XOR of their values) this table reports."""
        mine: NDArray[np.bool_] = (xor & self.mask) == 0
        for mask in self.must_differ:
            mine &= (xor & mask) != 0
        return mine


def _check_candidates(
    values: Words, table: _Table, first: Int64s, second: Int64s, max_distance: int
) -> tuple[Int32s, Int32s]:
    """The candidate pairs that are near and that this table reports."""
    near = _popcount(values[first] ^ values[second]) <= max_distance
    first, second = first[near], second[near]
    mine = table.owns(values[first] ^ values[second])
    return first[mine].astype(np.int32), second[mine].astype(np.int32)


def _pairs_within_runs(run_first: Int64s, run_size: Int64s) -> tuple[Int64s, Int64s]:
    """All ``i < j`` inside each run of consecutive positions.

    Each position is paired with the rest of its run at offsets 1, 2, ...;
    the work is the number of pairs, whatever the sizes of the runs.
    """
    leaders = _ranges(run_first, run_size - 1)
    after = np.repeat(run_first + run_size - 1, run_size - 1) - leaders
    first = np.repeat(leaders, after)
    second = first + _ranges(np.ones(len(after), dtype=np.int64), after)
    return first, second


def _unsort(first: Int64s, second: Int64s | None, positions: Int64s) -> Int64s:
    """Indices of the values at the given positions of a table's sort."""
    return first[positions if second is None else second[positions]]


def _table_pairs(values: Words, max_distance: int, block_count: int,
                 limit: _PairLimit) -> tuple[Int32s, Int32s]:  # fmt: skip
    """The multi-table search over distinct values: indices of each near pair once."""
    blocks = _Blocks(block_count)
    found_first: list[Int32s] = []
    found_second: list[Int32s] = []
    count = len(values)
    for kept in combinations(range(block_count), block_count - max_distance):
        checkpoint()
        table = _Table(blocks, kept)
        sorted_key, first_order, second_order = table.sort(values)
        same_as_next = np.zeros(count + 1, dtype=np.bool_)
        np.equal(sorted_key[1:], sorted_key[:-1], out=same_as_next[1:count])
        edges = np.flatnonzero(same_as_next[1:] != same_as_next[:-1])
        if not len(edges):
            continue
        run_first = edges[0::2]
        run_size = edges[1::2] - run_first + 1
        small = run_size <= _SMALL_GROUP
        small_first, small_size = run_first[small], run_size[small]
        pair_counts = small_size * (small_size - 1) // 2
        for start, stop in _weighted_chunks(pair_counts, _CANDIDATES):
            i, j = _pairs_within_runs(small_first[start:stop], small_size[start:stop])
            a, b = _check_candidates(
                values, table, _unsort(first_order, second_order, i),
                _unsort(first_order, second_order, j), max_distance,
            )
            found_first.append(a)
            found_second.append(b)
            limit.add(len(a))
        for first, size in zip(run_first[~small].tolist(), run_size[~small].tolist(), strict=True):
            members = _unsort(first_order, second_order, np.arange(first, first + size))
            near_i, near_j = _group_pairs(values[members], max_distance, table, limit)
            found_first.append(members[near_i].astype(np.int32))
            found_second.append(members[near_j].astype(np.int32))
    return _joined(found_first), _joined(found_second)


def _distinct_pairs(values: Words, max_distance: int,
                    limit: _PairLimit) -> tuple[Int32s, Int32s]:  # fmt: skip
    """Indices into ``values`` (all different) of every pair within ``max_distance``.

    Indices are int32 (there are fewer than ``2**31`` values): the pairs can
    be many, and they are held until all are found, so no more than the
    limit allows.
    """
    if max_distance == 0 or len(values) < 2:
        return np.empty(0, np.int32), np.empty(0, np.int32)
    limit.check_estimate(len(values), max_distance)
    block_count = _choose_blocks(len(values), max_distance)
    if block_count == 0:
        return _brute_pairs(values, max_distance, limit)
    return _table_pairs(values, max_distance, block_count, limit)


def expected_pairs(count: int, max_distance: int) -> float:
    """Pairs within ``max_distance`` bits expected among ``count`` random fingerprints.

    Real collections have more (their near-duplicates are the point), so this
    is a floor, good for refusing a radius before searching.
    """
    within = sum(math.comb(BITS, bits) for bits in range(max_distance + 1)) / 2.0**BITS
    return count * (count - 1) / 2 * within


class _PairLimit:
    """At most ``most`` pairs held at once (``None``: no limit), refused with
    :class:`~nearsim.core.interrupts.LimitExceeded` as soon as it is clear
    that more would be."""

    def __init__(self, most: int | None, what: str) -> None:
        self.most = most
        self.what = what
        self.found = 0

    def _refuse(self, pairs: str, max_distance: int | None) -> None:
        radius = "" if max_distance is None else f" within {max_distance} bits"
        raise LimitExceeded(
            f"{self.what}: {pairs} pairs{radius} would be held in memory, more than"
            f" the limit of {self.most:,} (nearsim.max_pairs)",
            hint="Use a smaller max_distance (each bit more can multiply the pairs; 6 is the"
            " usual radius), or ask a superuser to raise nearsim.max_pairs.")

    def check_estimate(self, count: int, max_distance: int) -> None:
        """Refuse at once when random fingerprints alone would make too many."""
        if self.most is not None:
            expected = expected_pairs(count, max_distance)
            if expected > self.most:
                self._refuse(f"about {expected:,.0f}", max_distance)

    def inner(self) -> _PairLimit:
        """A limit for pairs held besides those found so far."""
        inner = _PairLimit(self.most, self.what)
        inner.found = self.found
        return inner

    def add(self, found: int) -> None:
        self.found += found
        if self.most is not None and self.found > self.most:
            self._refuse(f"more than {self.most:,}", None)

    def check_total(self, total: int) -> None:
        if self.most is not None and total > self.most:
            self._refuse(f"{total:,}", None)


class _Expansion:
    """Pairs of distinct values turned back into pairs of positions, in order.

    Groups of equal fingerprints are numbered in the order of their first
    position.  For position ``x`` in group ``u``, the partners are the
    positions after ``x`` in ``u`` itself and in every group near ``u``.
    Listing those group by group in group order already sorts them when the
    groups are single positions; otherwise a piece is sorted before it is
    written.  Positions are handled in pieces of about ``_CANDIDATES`` pairs.
    """

    def __init__(
        self, words: Words, inverse: Int64s, counts: Int64s, first_seen: Int64s,
        near_first: Int32s, near_second: Int32s,
    ) -> None:
        size = len(words)
        groups = len(counts)
        self.words = words
        self.size = size
        by_first_seen = np.argsort(first_seen)
        label = np.empty(groups, dtype=np.int64)
        label[by_first_seen] = np.arange(groups, dtype=np.int64)
        self.group_of = label[inverse]
        group_size = counts[by_first_seen]
        self.group_start = np.zeros(groups + 1, dtype=np.int64)
        np.cumsum(group_size, out=self.group_start[1:])
        self.group_bits = max(1, (groups - 1).bit_length())
        self.members = _radix_argsort(self.group_of.astype(np.uint64), self.group_bits)
        # Sorted: the position of the first member of group g after x is
        # searchsorted(member_key, g * size + x, side="right").
        self.member_key = self.group_of[self.members] * size + self.members

        # Near pairs can outnumber fingerprints by far, so arrays of their
        # length are reused or dropped as soon as they have served.
        # (each step over them takes up to some 100 ms at the limit of
        # nearsim.max_pairs, so a cancel is let through between steps)
        first_label = label[near_first]
        later = label[near_second]
        checkpoint()
        earlier = np.minimum(first_label, later)
        np.maximum(first_label, later, out=later)
        del first_label
        checkpoint()
        repeated = np.flatnonzero(group_size > 1)
        self.total = int(
            (group_size[earlier] * group_size[later]).sum()
            + (group_size * (group_size - 1) // 2).sum()
        )
        checkpoint()
        # Every position of the later group comes after the first position
        # of the earlier group, so looking back from the later group only
        # finds partners when the earlier group has more members.
        back = np.flatnonzero(group_size[earlier] > 1)
        bits = self.group_bits
        forward, backward = len(earlier), len(earlier) + len(back)
        edges = np.empty(backward + len(repeated), dtype=np.int64)
        np.left_shift(earlier, bits, out=edges[:forward])
        edges[:forward] |= later
        checkpoint()
        edges[forward:backward] = (later[back] << bits) | earlier[back]
        edges[backward:] = (repeated << bits) | repeated
        checkpoint()
        # At most this many partners per position: the members of its near groups.
        reach = np.bincount(earlier, weights=group_size[later], minlength=groups)
        checkpoint()
        reach += np.bincount(later[back], weights=group_size[earlier[back]], minlength=groups)
        reach[repeated] += group_size[repeated]
        del earlier, later, back
        checkpoint()
        edges.sort()
        checkpoint()
        self.edges = edges
        self.edge_start = np.searchsorted(edges, np.arange(groups + 1, dtype=np.int64) << bits)
        self.partner_groups = np.diff(self.edge_start)[self.group_of]
        self.most_partners = reach.astype(np.int64)[self.group_of]

    def _partners(self, start: int, stop: int) -> tuple[Int64s, Int64s, Int64s]:
        """For positions ``start..stop-1``: (position, first partner index
        into ``members``, number of partners) for each near group."""
        fanout = self.partner_groups[start:stop]
        position = np.repeat(np.arange(start, stop, dtype=np.int64), fanout)
        edge = _ranges(self.edge_start[self.group_of[start:stop]], fanout)
        group = self.edges[edge] & ((1 << self.group_bits) - 1)
        first = self.group_start[group]
        end = self.group_start[group + 1]
        # A binary search is slow enough to dominate when most groups are
        # single fingerprints, so only groups of several get one.
        several = end - first > 1
        first[several] = np.searchsorted(
            self.member_key, group[several] * self.size + position[several], side="right"
        )
        length = end - first
        single = ~several
        length[single] = self.members[first[single]] > position[single]
        return position, first, length

    def pieces(self) -> Iterator[tuple[Int64s, Int64s, NDArray[np.int32]]]:
        """The pairs in order, about ``_CANDIDATES`` at a time."""
        weights = self.most_partners + self.partner_groups
        for start, stop in _weighted_chunks(weights, _CANDIDATES):
            checkpoint()
            position, first, length = self._partners(start, stop)
            some = length > 0
            if not some.any():
                continue
            position, first, length = position[some], first[some], length[some]
            lowest = self.members[first]
            highest = self.members[first + length - 1]
            distance = _popcount(self.words[position] ^ self.words[lowest]).astype(np.int32)
            out_first = np.repeat(position, length)
            out_second = self.members[_ranges(first, length)]
            out_distance = np.repeat(distance, length)
            if np.any((position[1:] == position[:-1]) & (highest[:-1] > lowest[1:])):
                # Members of two groups near one position interleave.  The
                # sort is stable, so the distances follow.
                order = np.argsort((out_first << 31) | out_second, kind="stable")
                out_second, out_distance = out_second[order], out_distance[order]
            yield out_first, out_second, out_distance

    def run(self) -> tuple[Int64s, Int64s, NDArray[np.int32]]:
        """All pairs in three arrays, allocated once at their final size."""
        out_first = np.empty(self.total, dtype=np.int64)
        out_second = np.empty(self.total, dtype=np.int64)
        out_distance = np.empty(self.total, dtype=np.int32)
        written = 0
        for first, second, distance in self.pieces():
            end = written + len(first)
            out_first[written:end] = first
            out_second[written:end] = second
            out_distance[written:end] = distance
            written = end
        if written != self.total:
            raise AssertionError(f"expanded {written} pairs, expected {self.total}")
        return out_first, out_second, out_distance


def _search(fingerprints: NDArray[np.int64], max_distance: int,
            limit: _PairLimit) -> _Expansion | None:  # fmt: skip
    """The near pairs of distinct values, ready to be expanded; None if there are none."""
    _check_max_distance(max_distance)
    max_distance = int(max_distance)
    values = np.asarray(fingerprints)
    if values.ndim != 1:
        raise ValueError(f"fingerprints must be one-dimensional, got shape {values.shape}")
    if values.dtype != np.int64:
        if values.size and not np.issubdtype(values.dtype, np.integer):
            raise TypeError(f"fingerprints must be int64, not {values.dtype}")
        values = values.astype(np.int64)  # uint64 keeps its bits
    if len(values) >= _MAX_ITEMS:
        raise ValueError(f"at most {_MAX_ITEMS - 1} fingerprints at a time, got {len(values)}")
    if len(values) < 2:
        return None
    distinct, first_seen, inverse, counts = np.unique(
        values, return_index=True, return_inverse=True, return_counts=True
    )
    checkpoint()
    near = _distinct_pairs(distinct.view(np.uint64), max_distance, limit)
    checkpoint()
    return _Expansion(
        values.view(np.uint64), inverse.reshape(-1).astype(np.int64), counts.astype(np.int64),
        first_seen.astype(np.int64), *near,
    )


def all_pairs(
    fingerprints: NDArray[np.int64], max_distance: int, max_pairs: int | None = None
) -> tuple[Int64s, Int64s, NDArray[np.int32]]:
    """Every pair of fingerprints that differ in at most ``max_distance`` bits.

    Returns ``(first, second, distance)``: the positions ``first < second``
    of each such pair in ``fingerprints`` and their Hamming distance, each
    pair once, sorted by ``first`` and then ``second``.  The result is
    exactly what comparing all pairs would give.

    A million random fingerprints take about a second for ``max_distance``
    3 and five seconds for 6, on one core; clusters of near-duplicates add
    time for the pairs they contain.  Time grows fast with the distance
    (about 20 s at 8 bits, minutes from 10); from about 15 bits on, every
    pair is compared, over an hour for a million.  Memory is about 200 MB
    per million fingerprints plus the result, 20 bytes per pair: mind that
    a group of ``n`` equal fingerprints alone makes ``n * (n - 1) / 2``
    pairs.  :func:`iter_pairs` hands out the same pairs in pieces instead.

    With ``max_pairs``, more pairs than that (those of distinct values while
    searching, then those of positions) raise
    :class:`~nearsim.core.interrupts.LimitExceeded` before they are made.
    """
    limit = _PairLimit(max_pairs, "all pairs")
    expansion = _search(fingerprints, max_distance, limit)
    if expansion is None:
        return np.empty(0, np.int64), np.empty(0, np.int64), np.empty(0, np.int32)
    limit.check_total(expansion.total)
    return expansion.run()


def iter_pairs(
    fingerprints: NDArray[np.int64], max_distance: int, max_pairs: int | None = None
) -> Iterator[tuple[Int64s, Int64s, NDArray[np.int32]]]:
    """The result of :func:`all_pairs` in consecutive pieces of ~100,000 pairs.

    The concatenated pieces equal the arrays of :func:`all_pairs`.  The
    search itself runs before the first piece (arguments are checked at the
    call); then memory no longer grows with the number of pairs, which can
    be far larger than the number of fingerprints.  ``max_pairs`` bounds the
    pairs of distinct values held during the search, as for :func:`all_pairs`.
    """
    expansion = _search(fingerprints, max_distance, _PairLimit(max_pairs, "all pairs"))
    return iter(()) if expansion is None else expansion.pieces()
