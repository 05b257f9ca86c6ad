"""All near pairs by the block pigeonhole, checked against comparing every pair;
connected components and pivot groups, checked against plain loops."""

from __future__ import annotations

import json
import math
import shutil
import subprocess
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from functools import cache
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from numpy.typing import NDArray

from nearsim.core import pairs
from nearsim.core.pairs import all_pairs, connected_components, iter_pairs, pivot_groups

ROOT = Path(__file__).resolve().parents[2]
PACKAGE_ROOT = ROOT / "python_client"

MIN64 = -(1 << 63)
MAX64 = (1 << 63) - 1
SPECIAL = [0, -1, MIN64, MAX64, 1, MIN64 + 1, MAX64 - 1, 0x5555555555555555, -0x5555555555555556]
DISTANCES = [*range(13), 20, 40, 64]

Pairs = tuple[NDArray[np.int64], NDArray[np.int64], NDArray[np.int32]]

# Bit counts of every 16-bit value: an oracle independent of the module's count.
_BITS16 = np.array([bin(v).count("1") for v in range(1 << 16)], dtype=np.int64)


def distance_matrix(fingerprints: NDArray[np.int64]) -> NDArray[np.int64]:
    words = np.asarray(fingerprints, dtype=np.int64).view(np.uint64)
    xor = words[:, None] ^ words[None, :]
    return _BITS16[xor.view(np.uint16)].reshape(len(words), len(words), 4).sum(axis=2)


def every_pair(fingerprints: NDArray[np.int64], max_distance: int) -> Pairs:
    """The result all_pairs must give, by comparing every pair."""
    distance = distance_matrix(fingerprints)
    first, second = np.nonzero(np.triu(distance <= max_distance, 1))  # row-major: sorted
    return first.astype(np.int64), second.astype(np.int64), distance[first, second]


def assert_same_pairs(got: Pairs, expected: Pairs) -> None:
    names = ("first", "second", "distance")
    for name, value, wanted, dtype in zip(names, got, expected, (np.int64, np.int64, np.int32),
                                          strict=True):
        assert value.dtype == dtype, name
        if not np.array_equal(value, wanted):
            found = set(zip(got[0].tolist(), got[1].tolist(), strict=True))
            wanted_pairs = set(zip(expected[0].tolist(), expected[1].tolist(), strict=True))
            raise AssertionError(
                f"{name} differs: {len(value)} pairs found, {len(wanted)} expected; "
                f"missing {sorted(wanted_pairs - found)[:5]}, "
                f"extra {sorted(found - wanted_pairs)[:5]}"
            )


def random_fingerprints(rng: np.random.Generator, count: int) -> NDArray[np.int64]:
    return rng.integers(MIN64, MAX64, count, dtype=np.int64, endpoint=True)


def flipped(
    rng: np.random.Generator, seeds: NDArray[np.int64], most: int, low: int = 0, high: int = 64
) -> NDArray[np.int64]:
    """Each seed with 1..most distinct bits flipped, all in bits low..high-1."""
    words = seeds.astype(np.int64).view(np.uint64).copy()
    for i in range(len(words)):
        flips = int(rng.integers(1, min(most, high - low) + 1))
        chosen = rng.choice(np.arange(low, high), size=flips, replace=False)
        for bit in chosen.tolist():
            words[i] ^= np.uint64(1 << bit)
    return words.view(np.int64)


@cache
def dataset(name: str) -> NDArray[np.int64]:
    rng = np.random.default_rng(sum(map(ord, name)))
    special = np.array(SPECIAL, dtype=np.int64)
    if name == "random":
        parts = [random_fingerprints(rng, 400)]
    elif name == "special":
        parts = [np.repeat(special, 3), flipped(rng, np.repeat(special, 6), 4),
                 random_fingerprints(rng, 60)]
    elif name == "identical":
        seeds = random_fingerprints(rng, 2)
        parts = [np.full(250, seeds[0]), np.full(40, seeds[1]), np.full(20, 0),
                 flipped(rng, np.repeat(seeds, 20), 5), random_fingerprints(rng, 40)]
    elif name == "bands":
        # Variants that differ only inside one 16-bit band or one small block
        # stay together in every table that does not keep that band.
        seeds = random_fingerprints(rng, 3)
        parts = [flipped(rng, np.repeat(seeds, 12), 9, low, high)
                 for low, high in ((0, 16), (16, 32), (32, 48), (48, 64), (0, 7), (29, 36),
                                   (57, 64), (60, 64))]
        parts += [seeds, np.array([0, -1], dtype=np.int64), flipped(rng, np.zeros(20, np.int64),
                                                                    6, 48, 64)]
    elif name == "clusters":
        seeds = random_fingerprints(rng, 4)
        parts = [flipped(rng, np.repeat(seeds, 80), 8), seeds, random_fingerprints(rng, 40)]
    elif name == "low":
        # Values confined to their low 20 bits, some with a stray high bit: one large
        # group in every table that keeps only high blocks, with a few others in it.
        low = rng.integers(0, 1 << 20, size=300, dtype=np.int64)
        stray = low[:12] | (np.int64(1) << rng.integers(20, 63, size=12, dtype=np.int64))
        parts = [low, stray, random_fingerprints(rng, 30)]
    else:
        raise KeyError(name)
    values = np.concatenate(parts)
    rng.shuffle(values)
    return values


DATASETS = ["random", "special", "identical", "bands", "clusters"]


@cache
def distances_of(name: str) -> NDArray[np.int64]:
    return distance_matrix(dataset(name))


def expected_pairs(name: str, max_distance: int) -> Pairs:
    distance = distances_of(name)
    first, second = np.nonzero(np.triu(distance <= max_distance, 1))
    return first.astype(np.int64), second.astype(np.int64), distance[first, second]


@contextmanager
def blocks(count: int | None, **constants: int) -> Iterator[None]:
    """Force the number of blocks (0: compare every pair) and other constants."""
    with pytest.MonkeyPatch.context() as patch:
        if count is not None:
            patch.setattr(pairs, "_choose_blocks", lambda distinct, max_distance: count)
        for name, value in constants.items():
            patch.setattr(pairs, name, value)
        yield


def block_counts(max_distance: int, most_tables: int = 500) -> list[int]:
    """A few numbers of blocks for max_distance, as long as the tables stay few."""
    counts = [m for m in range(max_distance + 1, max_distance + 5)
              if math.comb(m, max_distance) <= most_tables]
    return counts or [max_distance + 1]


# all_pairs against every pair.

@pytest.mark.parametrize("max_distance", DISTANCES)
@pytest.mark.parametrize("name", DATASETS)
def test_equals_every_pair(name: str, max_distance: int) -> None:
    assert_same_pairs(all_pairs(dataset(name), max_distance), expected_pairs(name, max_distance))


@pytest.mark.parametrize("max_distance", range(1, 13))
@pytest.mark.parametrize("name", ["special", "bands", "clusters"])
def test_every_number_of_blocks_gives_the_same_pairs(name: str, max_distance: int) -> None:
    expected = expected_pairs(name, max_distance)
    for count in block_counts(max_distance):
        with blocks(count):
            assert_same_pairs(all_pairs(dataset(name), max_distance), expected)


@pytest.mark.parametrize("max_distance", [2, 5, 8])
def test_large_groups_and_small_pieces(max_distance: int) -> None:
    # Groups above _SMALL_GROUP are compared block by block; candidates,
    # comparisons and output come in pieces of the given sizes.
    name = "clusters"
    expected = expected_pairs(name, max_distance)
    for count in [0, *block_counts(max_distance)]:
        with blocks(count, _SMALL_GROUP=3, _CANDIDATES=50, _COMPARISONS=20):
            assert_same_pairs(all_pairs(dataset(name), max_distance), expected)


@pytest.mark.parametrize("max_distance", [3, 6, 9])
def test_large_groups_alike_in_most_blocks(max_distance: int) -> None:
    # A large group is cut into parts by a block that must differ; the one in which
    # nearly all of it is alike leaves a few comparisons.
    name = "low"
    expected = expected_pairs(name, max_distance)
    for count in block_counts(max_distance):
        for small_group in (3, 256):
            with blocks(count, _SMALL_GROUP=small_group, _COMPARISONS=500):
                assert_same_pairs(all_pairs(dataset(name), max_distance), expected)


@pytest.mark.parametrize("max_distance", [1, 4, 7])
def test_hash_collisions_are_rejected(max_distance: int) -> None:
    # Keys wider than 16 bits are hashed; with 2-bit hashes most groups
    # mix values whose kept blocks differ.
    name = "special"
    expected = expected_pairs(name, max_distance)
    for count in block_counts(max_distance):
        with blocks(count, _HASH_BITS=2):
            assert_same_pairs(all_pairs(dataset(name), max_distance), expected)


def test_the_cost_model_picks_tables_for_many_fingerprints() -> None:
    assert pairs._choose_blocks(1_000_000, 3) == 5
    assert pairs._choose_blocks(1_000_000, 6) in (8, 9)
    assert pairs._choose_blocks(50, 6) == 0
    assert pairs._choose_blocks(1_000_000, 40) == 0


@pytest.mark.parametrize("max_distance", [3, 6])
def test_default_search_on_a_few_thousand(max_distance: int) -> None:
    rng = np.random.default_rng(max_distance)
    seeds = random_fingerprints(rng, 30)
    values = np.concatenate([random_fingerprints(rng, 2500), flipped(rng, np.repeat(seeds, 20), 6),
                             np.full(100, seeds[0])])
    rng.shuffle(values)
    assert pairs._choose_blocks(len(np.unique(values)), max_distance) > 0
    assert_same_pairs(all_pairs(values, max_distance), every_pair(values, max_distance))


def _signed(value: int) -> int:
    return (value + (1 << 63)) % (1 << 64) - (1 << 63)


_POOL = [*SPECIAL, *map(_signed, [0x0123456789ABCDEF, 0xFEDCBA9876543210, 0xFFFF, 0xFFFF << 48])]


def _flip(seed_and_bits: tuple[int, list[int]]) -> int:
    seed, bits = seed_and_bits
    for bit in bits:
        seed ^= 1 << bit
    return _signed(seed)


_fingerprint = st.one_of(
    st.sampled_from(_POOL),
    st.integers(MIN64, MAX64),
    st.tuples(st.sampled_from(_POOL), st.lists(st.integers(0, 63), max_size=8)).map(_flip),
)


@settings(max_examples=200, deadline=None)
@given(st.lists(_fingerprint, max_size=60), st.integers(0, 12), st.integers(-1, 3))
def test_property_equals_every_pair(values: list[int], max_distance: int, extra: int) -> None:
    fingerprints = np.array(values, dtype=np.int64)
    expected = every_pair(fingerprints, max_distance)
    count = None if extra < 0 else max_distance + 1 + extra
    while count is not None and math.comb(count, max_distance) > 300:
        count -= 1
    with blocks(count, _SMALL_GROUP=4):
        assert_same_pairs(all_pairs(fingerprints, max_distance), expected)


def test_pairs_are_sorted_unique_and_within_the_distance() -> None:
    values = dataset("clusters")
    first, second, distance = all_pairs(values, 7)
    assert len(first) > 1000
    assert np.all(first < second)
    key = first * len(values) + second
    assert np.all(key[1:] > key[:-1])
    words = values.view(np.uint64)
    assert np.array_equal(distance, [(int(words[a]) ^ int(words[b])).bit_count()
                                     for a, b in zip(first, second, strict=True)])
    assert distance.max() <= 7


def test_identical_fingerprints_pair_with_each_other_and_their_neighbours() -> None:
    values = np.array([5, 7, 5, 5, 4, 1 << 40, 5], dtype=np.int64)
    first, second, distance = all_pairs(values, 1)
    assert list(zip(first.tolist(), second.tolist(), distance.tolist(), strict=True)) == [
        (0, 1, 1), (0, 2, 0), (0, 3, 0), (0, 4, 1), (0, 6, 0),
        (1, 2, 1), (1, 3, 1), (1, 6, 1),
        (2, 3, 0), (2, 4, 1), (2, 6, 0),
        (3, 4, 1), (3, 6, 0),
        (4, 6, 1),
    ]


@pytest.mark.parametrize("values", [[], [42], [MIN64]])
def test_fewer_than_two_fingerprints_have_no_pairs(values: list[int]) -> None:
    first, second, distance = all_pairs(np.array(values, dtype=np.int64), 64)
    assert (len(first), len(second), len(distance)) == (0, 0, 0)
    assert (first.dtype, second.dtype, distance.dtype) == (np.int64, np.int64, np.int32)


def test_extremes_are_64_bits_apart() -> None:
    values = np.array([0, -1, MIN64, MAX64], dtype=np.int64)
    first, second, distance = all_pairs(values, 64)
    assert list(zip(first.tolist(), second.tolist(), distance.tolist(), strict=True)) == [
        (0, 1, 64), (0, 2, 1), (0, 3, 63), (1, 2, 63), (1, 3, 1), (2, 3, 64)
    ]
    assert len(all_pairs(values, 63)[0]) == 4
    assert len(all_pairs(values, 0)[0]) == 0


def test_lists_and_unsigned_words_are_accepted() -> None:
    values = dataset("special")
    expected = all_pairs(values, 4)
    assert_same_pairs(all_pairs(values.tolist(), 4), expected)  # type: ignore[arg-type]
    assert_same_pairs(all_pairs(values.view(np.uint64), 4), expected)  # type: ignore[arg-type]
    assert_same_pairs(all_pairs(values, np.int64(4)), expected)  # type: ignore[arg-type]


@pytest.mark.parametrize("bad", [-1, 65, 1000])
def test_max_distance_out_of_range(bad: int) -> None:
    with pytest.raises(ValueError, match="max_distance"):
        all_pairs(np.array([1, 2], dtype=np.int64), bad)
    with pytest.raises(ValueError, match="max_distance"):
        iter_pairs(np.array([1, 2], dtype=np.int64), bad)


@pytest.mark.parametrize("bad", [3.0, "3", True, None])
def test_max_distance_must_be_an_int(bad: object) -> None:
    with pytest.raises(TypeError, match="max_distance"):
        all_pairs(np.array([1, 2], dtype=np.int64), bad)  # type: ignore[arg-type]


def test_fingerprints_must_be_a_vector_of_integers() -> None:
    with pytest.raises(ValueError, match="one-dimensional"):
        all_pairs(np.zeros((2, 2), dtype=np.int64), 3)
    with pytest.raises(TypeError, match="int64"):
        all_pairs(np.array([1.5, 2.5]), 3)  # type: ignore[arg-type]


def test_iter_pairs_gives_the_same_pairs_in_pieces() -> None:
    values = dataset("identical")
    expected = all_pairs(values, 6)
    with blocks(None, _CANDIDATES=1000):
        pieces = list(iter_pairs(values, 6))
    assert len(pieces) > 10
    first, second, distance = (np.concatenate(column) for column in zip(*pieces, strict=True))
    assert_same_pairs((first, second, distance), expected)
    assert list(iter_pairs(values[:1], 6)) == []


DEBIAN_PYTHON = "/usr/bin/python3"


@pytest.mark.skipif(shutil.which(DEBIAN_PYTHON) is None, reason="no Debian python3")
def test_runs_the_same_under_the_database_python() -> None:
    # PL/Python runs this module under Debian's Python and numpy 1.24.
    script = f"""
import json, sys
sys.path.insert(0, {str(PACKAGE_ROOT)!r})
import numpy as np
from nearsim.core import pairs
assert pairs.__file__.startswith({str(PACKAGE_ROOT)!r}), pairs.__file__
values = np.array(json.loads(sys.stdin.read()), dtype=np.int64)
result = {{}}
for k in (0, 3, 6, 12):
    result[k] = [a.tolist() for a in pairs.all_pairs(values, k)]
first, second, _ = pairs.all_pairs(values, 6)
result["components"] = pairs.connected_components(len(values), first, second).tolist()
result["pivots"] = pairs.pivot_groups(len(values), first, second).tolist()
print(json.dumps(result))
"""
    check = subprocess.run([DEBIAN_PYTHON, "-c", "import numpy"], capture_output=True)
    if check.returncode != 0:
        pytest.skip("Debian python3 has no numpy")
    values = np.concatenate([dataset("clusters"), dataset("identical")])
    done = subprocess.run([DEBIAN_PYTHON, "-c", script], input=json.dumps(values.tolist()),
                          capture_output=True, text=True, timeout=120, check=True)
    result = json.loads(done.stdout)
    for k in (0, 3, 6, 12):
        assert result[str(k)] == [a.tolist() for a in all_pairs(values, k)]
    first, second, _ = all_pairs(values, 6)
    assert result["components"] == connected_components(len(values), first, second).tolist()
    assert result["pivots"] == pivot_groups(len(values), first, second).tolist()


# Connected components and pivot groups against plain loops.

Edges = list[tuple[int, int]]


def components_by_loop(count: int, edges: Edges) -> list[int]:
    parent = list(range(count))

    def root(node: int) -> int:
        while parent[node] != node:
            node = parent[node]
        return node

    for a, b in edges:
        ra, rb = root(a), root(b)
        parent[max(ra, rb)] = min(ra, rb)
    return [root(node) for node in range(count)]


def pivots_by_loop(count: int, edges: Edges) -> list[int]:
    neighbours: list[set[int]] = [set() for _ in range(count)]
    for a, b in edges:
        if a != b:
            neighbours[a].add(b)
            neighbours[b].add(a)
    pivot = [-1] * count
    for node in sorted(range(count), key=lambda n: (-len(neighbours[n]), n)):
        if pivot[node] < 0:
            pivot[node] = node
            for other in neighbours[node]:
                if pivot[other] < 0:
                    pivot[other] = node
    return pivot


def as_arrays(edges: Edges) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
    array = np.array(edges, dtype=np.int64).reshape(-1, 2)
    return array[:, 0].copy(), array[:, 1].copy()


Grouping = Callable[[int, NDArray[np.int64], NDArray[np.int64]], NDArray[np.int64]]
GROUPINGS: list[tuple[Grouping, Callable[[int, Edges], list[int]]]] = [
    (connected_components, components_by_loop),
    (pivot_groups, pivots_by_loop),
]


@st.composite
def graphs(draw: st.DrawFn) -> tuple[int, Edges]:
    count = draw(st.integers(0, 40))
    if count == 0:
        return 0, []
    node = st.integers(0, count - 1)
    return count, draw(st.lists(st.tuples(node, node), max_size=80))


@settings(max_examples=200, deadline=None)
@given(graphs())
def test_groupings_match_plain_loops(graph: tuple[int, Edges]) -> None:
    count, edges = graph
    for grouping, by_loop in GROUPINGS:
        result = grouping(count, *as_arrays(edges))
        assert result.dtype == np.int64
        assert result.tolist() == by_loop(count, edges), grouping.__name__


@pytest.mark.parametrize("edge_count", [300, 1500, 6000])
def test_groupings_on_random_graphs(edge_count: int) -> None:
    rng = np.random.default_rng(edge_count)
    count = 3000
    edges = [(a, b) for a, b in rng.integers(0, count, (edge_count, 2)).tolist()]
    for grouping, by_loop in GROUPINGS:
        assert grouping(count, *as_arrays(edges)).tolist() == by_loop(count, edges)


def test_chain_joins_components_but_pivots_stay_one_edge_away() -> None:
    chain = [(0, 1), (1, 2), (2, 3), (3, 4)]
    assert connected_components(5, *as_arrays(chain)).tolist() == [0, 0, 0, 0, 0]
    # 1, 2 and 3 have two neighbours; 1 comes first and takes 0 and 2.
    assert pivot_groups(5, *as_arrays(chain)).tolist() == [1, 1, 1, 3, 3]
    # A~B~C: B is the pivot of all three, A and C stay one edge from it.
    assert pivot_groups(3, *as_arrays([(0, 1), (1, 2)])).tolist() == [1, 1, 1]
    assert connected_components(3, *as_arrays([(0, 1), (1, 2)])).tolist() == [0, 0, 0]


def test_pivot_members_are_neighbours_of_their_pivot() -> None:
    values = dataset("clusters")
    first, second, _ = all_pairs(values, 6)
    pivot = pivot_groups(len(values), first, second)
    words = values.view(np.uint64)
    pivots = set(pivot.tolist())
    for node, chosen in enumerate(pivot.tolist()):
        assert pivot[chosen] == chosen
        assert (int(words[node]) ^ int(words[chosen])).bit_count() <= 6
    # Pivots are never neighbours of each other: each would have taken the other.
    assert not any(a in pivots and b in pivots for a, b in zip(first.tolist(), second.tolist(),
                                                                strict=True))
    components = connected_components(len(values), first, second)
    assert len(set(components.tolist())) <= len(pivots)
    assert np.array_equal(components[pivot], components)  # a group lies in one component


def test_isolated_nodes_are_their_own_group() -> None:
    first, second = as_arrays([(2, 5)])
    assert connected_components(8, first, second).tolist() == [0, 1, 2, 3, 4, 2, 6, 7]
    assert pivot_groups(8, first, second).tolist() == [0, 1, 2, 3, 4, 2, 6, 7]
    empty = np.empty(0, dtype=np.int64)
    assert connected_components(3, empty, empty).tolist() == [0, 1, 2]
    assert pivot_groups(3, empty, empty).tolist() == [0, 1, 2]
    assert connected_components(0, empty, empty).tolist() == []
    assert pivot_groups(0, empty, empty).tolist() == []


def test_groupings_do_not_depend_on_edge_order() -> None:
    rng = np.random.default_rng(11)
    count = 500
    first, second = rng.integers(0, count, (2, 700))
    expected = [grouping(count, first, second).tolist() for grouping, _ in GROUPINGS]
    for _ in range(3):
        order = rng.permutation(len(first))
        swap = rng.random(len(first)) < 0.5
        a = np.where(swap, second, first)[order]
        b = np.where(swap, first, second)[order]
        again = [grouping(count, a, b).tolist() for grouping, _ in GROUPINGS]
        assert again == expected


def test_repeated_edges_and_self_loops_do_not_count() -> None:
    # Counting repeats, 0 would come first and take 3.  Node 0 has one
    # neighbour, 1 and 3 have two: 1 takes 2 and 3, and 0 is left alone.
    edges = [(0, 3), (0, 3), (3, 0), (0, 0), (0, 0), (1, 2), (1, 3), (2, 2)]
    assert pivot_groups(4, *as_arrays(edges)).tolist() == [0, 1, 1, 1]
    assert connected_components(4, *as_arrays(edges)).tolist() == [0, 0, 0, 0]


def test_long_shuffled_path_is_one_component() -> None:
    rng = np.random.default_rng(5)
    order = rng.permutation(20_000)
    result = connected_components(20_000, order[:-1], order[1:])
    assert not result.any()


@pytest.mark.parametrize("grouping", [connected_components, pivot_groups])
def test_bad_edges_are_rejected(grouping: Grouping) -> None:
    ok = np.array([0, 1], dtype=np.int64)
    with pytest.raises(ValueError, match=r"outside 0\.\.2"):
        grouping(3, ok, np.array([1, 3], dtype=np.int64))
    with pytest.raises(ValueError, match="outside"):
        grouping(3, np.array([-1, 0], dtype=np.int64), ok)
    with pytest.raises(ValueError, match="differ in length"):
        grouping(3, ok, ok[:1])
    with pytest.raises(ValueError, match="count"):
        grouping(-1, ok[:0], ok[:0])
    with pytest.raises(TypeError, match="integers"):
        grouping(3, np.array([0.0, 1.0]), ok)  # type: ignore[arg-type]
