"""All pairs and groups of a table (nearsim_pairs, nearsim_clusters): exact, in key order."""

from __future__ import annotations

import random

import numpy as np
import psycopg
import pytest
from rotated import clustered_fingerprints, error_of, flip, hamming, make_docs

from nearsim.core.pairs import all_pairs, connected_components, pivot_groups


def test_pairs_are_exactly_the_brute_force_pairs(conn: psycopg.Connection) -> None:
    rng = random.Random(11)
    fingerprints = clustered_fingerprints(rng)[:900]
    make_docs(conn, fingerprints)
    for k in (0, 1, 3, 6, 9, 12):
        expected = [
            (str(i), str(j), hamming(a, b))
            for i, a in enumerate(fingerprints) for j, b in enumerate(fingerprints)
            if i < j and hamming(a, b) <= k
        ]
        found = conn.execute("SELECT * FROM nearsim_pairs('docs', %s)", (k,)).fetchall()
        assert sorted(found, key=lambda p: (int(p[0]), int(p[1]))) == expected, k
    # keys are compared as keys, not as text: 9 < 10
    assert ("9", "10", hamming(fingerprints[9], fingerprints[10])) in conn.execute(
        "SELECT * FROM nearsim_pairs('docs', 64)").fetchall()


def adversarial_fingerprints(seed: int) -> list[int]:
    """Enough values for the search by blocks (not each with each): random ones,
    ones confined to their low 24 bits (every other block equal), clusters of
    near values, and runs of copies."""
    rng = np.random.default_rng(seed)
    random_values = rng.integers(-(1 << 63), (1 << 63) - 1, size=12_000, dtype=np.int64)
    low = rng.integers(0, 1 << 24, size=4_000, dtype=np.int64)
    centres = rng.integers(-(1 << 63), (1 << 63) - 1, size=300, dtype=np.int64)
    clusters = [flip(int(c), rng.choice(64, size=int(rng.integers(0, 12)), replace=False).tolist())
                for c in centres for _ in range(12)]
    copies = [int(random_values[0])] * 300 + [int(low[0])] * 40
    values = [*random_values.tolist(), *low.tolist(), *clusters, *copies]
    rng.shuffle(values)
    return values


@pytest.mark.parametrize("k", [1, 3, 6, 11])
def test_pairs_of_many_values_are_the_exact_pairs_in_key_order(conn: psycopg.Connection,
                                                              k: int) -> None:
    fingerprints = adversarial_fingerprints(k)
    make_docs(conn, fingerprints)
    found = conn.execute("SELECT a::int, b::int, distance FROM nearsim_pairs('docs', %s)",
                         (k,)).fetchall()
    # the numpy search of nearsim.core.pairs, itself checked against every pair
    first, second, distance = all_pairs(np.array(fingerprints, dtype=np.int64), k)
    assert found == list(zip(first.tolist(), second.tolist(), distance.tolist(), strict=True))
    # and each with each on a part of them: the same pairs among its keys
    part = fingerprints[:1500]
    expected = [(i, j, hamming(a, b)) for i, a in enumerate(part) for j, b in enumerate(part)
                if i < j and hamming(a, b) <= k]
    assert [pair for pair in found if pair[1] < len(part)] == expected


@pytest.mark.parametrize(("k", "method"), [(3, "components"), (6, "pivot"), (9, "components"),
                                         (2, "pivot")])
def test_groups_of_many_values_are_the_groups_of_their_pairs(conn: psycopg.Connection, k: int,
                                                            method: str) -> None:
    fingerprints = adversarial_fingerprints(k + 100)
    make_docs(conn, fingerprints)
    found = conn.execute("SELECT key::int, cluster::int, pivot::int FROM"
                         " nearsim_clusters('docs', %s, %s, 1)", (k, method)).fetchall()
    # the groups nearsim.core.pairs makes of numpy's pairs, named by their least key
    first, second, _ = all_pairs(np.array(fingerprints, dtype=np.int64), k)
    count = len(fingerprints)
    groups = (connected_components(count, first, second) if method == "components"
              else pivot_groups(count, first, second)).tolist()
    least: dict[int, int] = {}
    for member, group in enumerate(groups):
        least.setdefault(group, member)
    assert found == [(member, least[group], group if method == "pivot" else None)
                     for member, group in enumerate(groups)]
    assert len({cluster for _, cluster, _ in found}) < count  # groups of more than one


def test_pairs_of_many_pieces(conn: psycopg.Connection) -> None:
    # 800 copies of one fingerprint and 200 at 1 bit from it: 499,500 pairs,
    # which the search hands to the C function that makes the rows in
    # several pieces; every pair once, with its distance, and the keys of
    # the rows that share the fingerprint.
    block = [0x1234_5678_9ABC_DEF0] * 800
    near = [flip(block[0], [i % 64]) for i in range(200)]
    make_docs(conn, block + near)
    found = conn.execute("SELECT a::int, b::int, distance FROM nearsim_pairs('docs', 2)"
                         ).fetchall()
    expected = {
        (i, j, hamming(a, b))
        for i, a in enumerate(block + near) for j, b in enumerate(block + near)
        if i < j and hamming(a, b) <= 2
    }
    assert len(found) == len(expected) == 499_500
    assert set(found) == expected
    identical = sum(1 for i, j, d in expected if d == 0)
    assert conn.execute("SELECT count(*), count(DISTINCT (a, b)) FROM nearsim_pairs('docs', 0)"
                        ).fetchone() == (identical, identical)


def test_clusters(conn: psycopg.Connection) -> None:
    # a chain A ~ B ~ C with A and C 8 bits apart, a pair D ~ E, a loner F
    a = 0
    b = flip(a, range(4))
    c = flip(b, range(4, 8))
    d = -1
    e = flip(d, [60])
    f = 0x0F0F0F0F0F0F0F0F
    make_docs(conn, [a, b, c, d, e, f])
    components = conn.execute(
        "SELECT * FROM nearsim_clusters('docs', 4) ORDER BY key").fetchall()
    assert components == [("0", "0", None), ("1", "0", None), ("2", "0", None),
                          ("3", "3", None), ("4", "3", None)]
    pivots = conn.execute(
        "SELECT * FROM nearsim_clusters('docs', 4, 'pivot') ORDER BY key").fetchall()
    # B has the most neighbours: it is the pivot, and A and C are each 4 bits from it
    assert pivots == [("0", "0", "1"), ("1", "0", "1"), ("2", "0", "1"),
                      ("3", "3", "3"), ("4", "3", "3")]
    singles = conn.execute(
        "SELECT key, cluster FROM nearsim_clusters('docs', 4, min_size => 1) WHERE key = '5'"
    ).fetchall()
    assert singles == [("5", "5")]
    assert "unknown clustering method 'stars'" in str(
        error_of(conn, "SELECT * FROM nearsim_clusters('docs', 4, 'stars')"))
    # every member of a pivot group is within the distance of its pivot
    rng = random.Random(5)
    # dropping an enabled table takes its indexes and functions, which
    # depend on it (hence CASCADE), and the registry row goes with it
    refused = str(error_of(conn, "DROP TABLE docs"))
    assert "function docs_similar(bigint,integer) depends on" in refused
    conn.execute("DROP TABLE docs CASCADE")
    assert conn.execute("SELECT to_regprocedure('docs_similar(bigint,integer)'), (SELECT count(*)"
                        " FROM nearsim_tables)").fetchone() == (None, 0)
    make_docs(conn, clustered_fingerprints(rng))
    far = conn.execute(
        "SELECT count(*) FROM nearsim_clusters('docs', 6, 'pivot') c"
        " JOIN docs m ON m.id = c.key::bigint JOIN docs p ON p.id = c.pivot::bigint"
        " WHERE hamming(m.si, p.si) > 6").fetchone()
    assert far == (0,)
