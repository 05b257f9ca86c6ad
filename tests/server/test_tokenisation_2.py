"""Tokenisation 2 in the server: the measures take it as an argument, and a table of
a profile of version 2 (``default/2``) is measured, joined and searched with its
words, each answer equal to the Python measures of the same words.

Khmer is written without spaces between words: under tokenisation 1 a token
is a phrase between spaces, under tokenisation 2 a letter with its marks.
"""

from __future__ import annotations

import random
import uuid
from collections.abc import Iterator
from itertools import combinations

import psycopg
import pytest
from psycopg import sql

import nearsim
from nearsim.client.documents import DocumentTable
from nearsim.core import measures

from khmer import khmer_bodies, typos
from tables import enabled_table


@pytest.fixture(scope="module")
def bodies() -> dict[int, str]:
    return khmer_bodies()


@pytest.fixture(scope="module")
def table(database: str, bodies: dict[int, str]) -> Iterator[str]:
    name = f"khmer_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(database, autocommit=True) as conn:
        enabled_table(conn, name, bodies, "words:3/2")
    yield name
    with psycopg.connect(database, autocommit=True) as conn:
        conn.execute(sql.SQL("DROP TABLE {} CASCADE").format(sql.Identifier(name)))


def test_measures_take_the_tokenisation(conn: psycopg.Connection, bodies: dict[int, str]) -> None:
    pairs = [(bodies[0], bodies[i]) for i in range(12, 30)] + [(bodies[60], bodies[61])]
    for a, b in pairs:
        for tokenisation in (1, 2):
            row = conn.execute(
                "SELECT nearsim_resemblance(%(a)s, %(b)s, %(t)s),"
                " nearsim_containment(%(a)s, %(b)s, %(t)s),"
                " nearsim_literal_similarity(%(a)s, %(b)s, %(t)s),"
                " nearsim_shingle_count(%(a)s, %(t)s),"
                " (nearsim_compare(%(a)s, %(b)s, tokenisation => %(t)s)).s_l",
                {"a": a, "b": b, "t": tokenisation}).fetchone()
            assert row is not None
            compared = measures.compare(a, b, tokenisation=tokenisation)
            assert row[0] == pytest.approx(measures.resemblance(a, b, tokenisation=tokenisation))
            assert row[1] == pytest.approx(measures.containment(a, b, tokenisation=tokenisation))
            assert row[2] == pytest.approx(compared.s_l)
            assert row[3] == len(set(measures.word_shingles(a, tokenisation=tokenisation)))
            assert row[4] == pytest.approx(compared.s_l)
    # without the argument: tokenisation 1, where a typo changes a whole phrase
    a, b = bodies[0], typos(random.Random(1), bodies[0], 3)
    first, second = conn.execute("SELECT nearsim_resemblance(%(a)s, %(b)s),"
                                 " nearsim_resemblance(%(a)s, %(b)s, 2)",
                                 {"a": a, "b": b}).fetchone() or (None, None)
    assert first == pytest.approx(measures.resemblance(a, b))
    assert second == pytest.approx(measures.resemblance(a, b, tokenisation=2))
    assert second > first


@pytest.mark.parametrize("function", ["nearsim_resemblance('a', 'b', %s)",
                                      "nearsim_containment('a', 'b', %s)",
                                      "nearsim_literal_similarity('a', 'b', %s)",
                                      "nearsim_shingle_count('a', %s)", "nearsim_sketch('a', %s)",
                                      "nearsim_compare('a', 'b', tokenisation => %s)",
                                      "nearsim_minhash('a b c', 8, %s)"])
@pytest.mark.parametrize("tokenisation", [0, 3, -1])
def test_an_unknown_tokenisation_is_an_error_that_names_it(
        conn: psycopg.Connection, function: str, tokenisation: int) -> None:
    with pytest.raises(psycopg.errors.InvalidParameterValue) as caught:
        conn.execute(f"SELECT {function}", [tokenisation])
    assert f"tokenisation {tokenisation} is unknown" in str(caught.value)
    assert "version 2" in (caught.value.diag.message_hint or "")


def test_minhash_takes_the_tokenisation(conn: psycopg.Connection, bodies: dict[int, str]) -> None:
    """nearsim_minhash(text, hashes, tokenisation) is the Python signature of those words;
    with two arguments (a function of its own), tokenisation 1."""
    a, b = bodies[0], typos(random.Random(2), bodies[0], 3)
    for text in (a, b, "the quick brown fox jumps over the lazy dog"):
        row = conn.execute("SELECT nearsim_minhash(%(x)s, 64), nearsim_minhash(%(x)s, 64, 1),"
                           " nearsim_minhash(%(x)s, 64, 2)", {"x": text}).fetchone()
        assert row is not None
        assert row[0] == row[1] == measures.minhash_signature(text, 64).tolist()
        assert row[2] == measures.minhash_signature(text, 64, tokenisation=2).tolist()
    # a typo changes a whole phrase of tokenisation 1, three letters of tokenisation 2
    estimates = [conn.execute(
        "SELECT estimate FROM nearsim_minhash_estimate(nearsim_minhash(%(a)s, 1000, %(t)s),"
        " nearsim_minhash(%(b)s, 1000, %(t)s))", {"a": a, "b": b, "t": t}).fetchone()
        for t in (1, 2)]
    assert estimates[1] is not None and estimates[0] is not None
    assert estimates[1][0] == pytest.approx(measures.resemblance(a, b, tokenisation=2), abs=0.06)
    assert estimates[1][0] > estimates[0][0]


def test_a_table_of_default_2_holds_its_fingerprints(conn: psycopg.Connection, table: str,
                                                     bodies: dict[int, str]) -> None:
    assert conn.execute("SELECT profile FROM nearsim_tables WHERE tbl = %s::regclass",
                        [table]).fetchone() == ("default/2",)
    stored = dict(conn.execute(sql.SQL("SELECT id, si FROM {}").format(
        sql.Identifier(table))).fetchall())
    assert stored == {key: nearsim.simhash(body, "default/2") for key, body in bodies.items()}


def exact_pairs(bodies: dict[int, str], minimum: float, tokenisation: int) -> dict[tuple[str, str],
                                                                                    float]:
    shingled = {key: measures.Shingled(body, tokenisation) for key, body in bodies.items()}
    found = {}
    for a, b in combinations(sorted(bodies), 2):
        value = measures.set_resemblance(shingled[a].shingles, shingled[b].shingles)
        if value >= minimum:
            found[(str(a), str(b))] = value
    return found


@pytest.mark.parametrize("minimum", [0.5, 0.8])
def test_verified_pairs_join_the_words_of_the_tables_tokenisation(
        conn: psycopg.Connection, table: str, bodies: dict[int, str], minimum: float) -> None:
    rows = conn.execute("SELECT a, b, similarity FROM nearsim_pairs_verified(%s, %s, 's_r')",
                        [table, minimum]).fetchall()
    got = {(a, b): value for a, b, value in rows}
    expected = exact_pairs(bodies, minimum, 2)
    assert got.keys() == expected.keys()
    assert all(got[pair] == pytest.approx(expected[pair]) for pair in expected)
    # tokenisation 1 would have found far fewer of the copies with typos
    assert len(exact_pairs(bodies, minimum, 1)) < len(expected)


def test_verified_pairs_by_words_and_their_clusters(conn: psycopg.Connection, table: str,
                                                    bodies: dict[int, str]) -> None:
    rows = conn.execute("SELECT a, b, similarity FROM nearsim_pairs_verified(%s)",
                        [table]).fetchall()
    candidates = exact_pairs(bodies, measures.CANDIDATE_RESEMBLANCE, 2)
    expected = {}
    for a, b in candidates:
        value = measures.compare(bodies[int(a)], bodies[int(b)], tokenisation=2).s_l
        if value >= 0.87:
            expected[(a, b)] = value
    assert {(a, b): pytest.approx(v) for a, b, v in rows} == expected
    assert expected
    members = {key for key, *_ in conn.execute(
        "SELECT * FROM nearsim_clusters_verified(%s, 0.5, 's_r')", [table]).fetchall()}
    assert members == {key for pair in exact_pairs(bodies, 0.5, 2) for key in pair}


@pytest.mark.parametrize("measure", ["s_r", "containment", "s_l"])
def test_verified_search_measures_with_the_tables_words(conn: psycopg.Connection, table: str,
                                                        bodies: dict[int, str],
                                                        measure: str) -> None:
    rng = random.Random(5)
    for query in (bodies[0], typos(rng, bodies[1], 4), bodies[61]):
        rows = conn.execute("SELECT key, similarity FROM nearsim_similar_verified(%s, %s, 0.5,"
                            " %s, 64)", [table, query, measure]).fetchall()
        expected = {}
        for key, body in bodies.items():
            value = (measures.resemblance(query, body, tokenisation=2) if measure == "s_r"
                     else measures.containment(query, body, tokenisation=2)
                     if measure == "containment"
                     else measures.compare(query, body, tokenisation=2).s_l)
            if value >= 0.5:
                expected[str(key)] = value
        assert {key: pytest.approx(value) for key, value in rows} == expected


def test_the_sketch_index_of_a_table_of_version_2(database: str, table: str,
                                                  bodies: dict[int, str]) -> None:
    with psycopg.connect(database, autocommit=True) as conn:
        # an index over the shingles of tokenisation 1 is not this table's
        conn.execute(sql.SQL("CREATE INDEX {} ON {} USING gin (nearsim_sketch(body))").format(
            sql.Identifier(f"{table}_v1"), sql.Identifier(table)))
        assert conn.execute("SELECT * FROM nearsim_sketch_index(%s)", [table]).fetchone() == (
            None, None)
        documents = DocumentTable(conn, table)
        assert documents.create_sketch_index()
        index, usable = conn.execute("SELECT * FROM nearsim_sketch_index(%s)",
                                     [table]).fetchone() or (None, None)
        assert usable
        assert "nearsim_sketch(body, 2)" in (conn.execute(
            "SELECT pg_get_indexdef(%s::regclass)", [index]).fetchone() or ("",))[0]
        query = typos(random.Random(9), bodies[2], 2)
        rows = conn.execute("SELECT key, similarity FROM nearsim_similar_verified(%s, %s, 0.8,"
                            " 's_r')", [table, query]).fetchall()
        expected = {str(key): measures.resemblance(query, body, tokenisation=2)
                    for key, body in bodies.items()}
        assert {key: pytest.approx(value) for key, value in rows} == {
            key: value for key, value in expected.items() if value >= 0.8}
        conn.execute(sql.SQL("DROP INDEX {}, {}").format(
            sql.Identifier(f"{table}_v1"), sql.SQL(index)))


def test_radii_of_default_2_are_those_of_default_1(conn: psycopg.Connection) -> None:
    assert conn.execute("SELECT nearsim_radius(0.8, 'default/2'), nearsim_radius(0.8),"
                        " (nearsim_estimate(13, 'default/2')).mean = (nearsim_estimate(13)).mean"
                        ).fetchone() == (13, 13, True)
