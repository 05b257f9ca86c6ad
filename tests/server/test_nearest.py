"""nearsim_nearest: the n nearest documents, exactly those of the scan's ORDER BY ... LIMIT n."""

from __future__ import annotations

import random

import psycopg
import pytest
from psycopg import sql

EXTREMES = [0, -1, -(1 << 63), (1 << 63) - 1]


def flip(value: int, bits: list[int]) -> int:
    """``value`` (a signed bigint) with ``bits`` inverted."""
    unsigned = value & ((1 << 64) - 1)
    for bit in bits:
        unsigned ^= 1 << bit
    return unsigned - (1 << 64) if unsigned >= 1 << 63 else unsigned


def make_table(conn: psycopg.Connection, name: str, key_type: str,
               rows: list[tuple[object, int]]) -> None:  # fmt: skip
    conn.execute(sql.SQL("CREATE TABLE {} (id {} PRIMARY KEY, body text, si bigint)").format(
        sql.Identifier(name), sql.SQL(key_type)))
    conn.execute("SELECT nearsim_enable(%s, 'body')", [name])
    conn.execute("SET nearsim.profile = 'default/1'")
    with conn.cursor().copy(sql.SQL("COPY {} (id, body, si) FROM STDIN").format(
            sql.Identifier(name))) as copy:
        for key, fingerprint in rows:
            copy.write_row((key, "d", fingerprint))
    conn.execute(sql.SQL("ANALYZE {}").format(sql.Identifier(name)))


def nearest(conn: psycopg.Connection, name: str, query: int, n: int,
            max_distance: int = 64) -> list[tuple[str, int]]:  # fmt: skip
    return [tuple(r) for r in conn.execute(  # type: ignore[misc]
        "SELECT key, distance FROM nearsim_nearest(%s, %s, %s, %s)",
        [name, query, n, max_distance])]


def scan(conn: psycopg.Connection, name: str, query: int, n: int,
         max_distance: int = 64) -> list[tuple[str, int]]:  # fmt: skip
    return [tuple(r) for r in conn.execute(sql.SQL(  # type: ignore[misc]
        # d.si + 0 is not the column itself: a scan, never the rotation index
        "SELECT d.id::text, hamming(d.si + 0, %s) FROM {} d WHERE hamming(d.si + 0, %s) <= %s"
        " ORDER BY hamming(d.si + 0, %s), d.id LIMIT %s").format(sql.Identifier(name)),
        [query, query, max_distance, query, n])]


@pytest.fixture(scope="module")
def tables(database: str) -> str:
    rng = random.Random(21)
    uniform = [rng.getrandbits(64) - (1 << 63) for _ in range(3_000)]
    # planted neighbours at every distance, ties, a block of equal values, extremes
    planted = [flip(uniform[0], rng.sample(range(64), d)) for d in range(0, 20)
               for _ in range(3)]
    block = [uniform[1]] * 200
    fingerprints = uniform + planted + block + EXTREMES
    with psycopg.connect(database, autocommit=True) as conn:
        make_table(conn, "numbers", "bigint", list(enumerate(fingerprints)))
        make_table(conn, "words", "text", [(f"doc-{i}", fp) for i, fp in enumerate(fingerprints)])
        make_table(conn, "equal", "integer", [(i, 12345) for i in range(500)])
    return database


@pytest.mark.parametrize("name", ["numbers", "words"])
def test_the_nearest_are_the_scans_first_rows(tables: str, name: str) -> None:
    rng = random.Random(5)
    with psycopg.connect(tables, autocommit=True) as conn:
        fingerprints = [r[0] for r in conn.execute(
            sql.SQL("SELECT si FROM {} ORDER BY id LIMIT 3000").format(sql.Identifier(name)))]
        queries = [*rng.sample(fingerprints, 8), *EXTREMES, flip(fingerprints[0], [3, 9])]
        for query in queries:
            for n in (1, 2, 5, 37, 250, 4000):
                assert nearest(conn, name, query, n) == scan(conn, name, query, n), (query, n)
            for max_distance in (0, 3, 12):
                assert (nearest(conn, name, query, 50, max_distance)
                        == scan(conn, name, query, 50, max_distance))


def test_ties_are_broken_by_key(tables: str) -> None:
    with psycopg.connect(tables, autocommit=True) as conn:
        assert nearest(conn, "equal", 12345, 3) == [("0", 0), ("1", 0), ("2", 0)]
        assert nearest(conn, "equal", 12345, 10_000) == scan(conn, "equal", 12345, 10_000)
        assert len(nearest(conn, "equal", 0, 10, 5)) == 0  # nothing within 5 bits


def test_a_reader_of_nothing_learns_nothing(tables: str) -> None:
    with psycopg.connect(tables, autocommit=True) as conn:
        conn.execute("CREATE ROLE nearsim_nearest_stranger")
        try:
            conn.execute("SET ROLE nearsim_nearest_stranger")
            with pytest.raises(psycopg.errors.InsufficientPrivilege):
                conn.execute("SELECT * FROM nearsim_nearest('numbers', 0, 5)")
        finally:
            conn.execute("RESET ROLE")
            conn.execute("DROP ROLE nearsim_nearest_stranger")


def test_bad_arguments_are_refused(tables: str) -> None:
    with psycopg.connect(tables, autocommit=True) as conn:
        for call, state in (("nearsim_nearest('numbers', 0, 0)", "22023"),
                            ("nearsim_nearest('numbers', 0, 5, 65)", "22023"),
                            ("nearsim_nearest('pg_class', 0, 5)", "55000")):
            with pytest.raises(psycopg.Error) as caught:
                conn.execute(f"SELECT * FROM {call}")
            assert caught.value.diag.sqlstate == state, call


@pytest.mark.parametrize("name", ["numbers", "words", "equal"])
def test_the_tables_own_nearest_gives_its_rows(tables: str, name: str) -> None:
    """<table>_nearest(query, n): the rows themselves, in the scan's order."""
    rng = random.Random(9)
    with psycopg.connect(tables, autocommit=True) as conn:
        fingerprints = [r[0] for r in conn.execute(
            sql.SQL("SELECT si FROM {} ORDER BY id LIMIT 500").format(sql.Identifier(name)))]
        function = sql.Identifier(f"{name}_nearest")
        for query in [*rng.sample(fingerprints, 3), *EXTREMES]:
            for n in (1, 7, 300):
                rows = conn.execute(sql.SQL(
                    "SELECT (f.doc).id::text, (f.doc).si, f.distance FROM {}(%s::bigint, %s) f")
                    .format(function), [query, n]).fetchall()
                assert [(key, distance) for key, _, distance in rows] == scan(conn, name, query,
                                                                                n)
                assert all(bin((si ^ query) & ((1 << 64) - 1)).count("1") == distance
                           for _, si, distance in rows)
        # a text query is fingerprinted with the table's profile; no words, no rows
        text = "the nearest document to this text"
        by_text = conn.execute(sql.SQL("SELECT (f.doc).id::text, f.distance FROM {}(%s, 3) f")
                               .format(function), [text]).fetchall()
        fingerprint = conn.execute("SELECT simhash(%s)", [text]).fetchone()
        assert fingerprint is not None
        assert by_text == scan(conn, name, fingerprint[0], 3)
        assert conn.execute(sql.SQL("SELECT count(*) FROM {}('...', 3)").format(function)
                            ).fetchone() == (0,)


def test_documents_without_fingerprints_are_never_among_the_nearest(database: str) -> None:
    """NULL fingerprints (no text, no words) are not near anything; a NULL query finds nothing."""
    with psycopg.connect(database, autocommit=True) as conn:
        conn.execute("DROP TABLE IF EXISTS sparse CASCADE")
        make_table(conn, "sparse", "integer", [(i, 1000 + i) for i in range(5)])
        conn.execute("INSERT INTO sparse (id, body, si) VALUES (10, NULL, NULL), (11, '...', NULL)")
        assert conn.execute("SELECT count(*) FROM sparse WHERE si IS NULL").fetchone() == (2,)
        for n in (1, 5, 100):  # 100: more than there are, through the scan
            assert nearest(conn, "sparse", 1000, n) == scan(conn, "sparse", 1000, n)
            assert all(key not in ("10", "11") for key, _ in nearest(conn, "sparse", 1000, n))
        assert len(nearest(conn, "sparse", 1000, 100)) == 5
        assert conn.execute("SELECT count(*) FROM nearsim_nearest('sparse', NULL, 3)"
                            ).fetchone() == (0,)
        assert conn.execute("SELECT count(*) FROM sparse_nearest(NULL::bigint, 3)"
                            ).fetchone() == (0,)
        conn.execute("DROP TABLE sparse CASCADE")


def test_one_search_asked_again_and_again_over_many_parent_pages(database: str) -> None:
    """One search node asked for each row of a LATERAL join, with a radius or
    a LIMIT of its own each time, over indexes whose leaves hang from many
    parent pages: the leaves a search loads ahead of its ranges (planned in
    each band's reader) come from the query being asked, never an earlier
    one, and every answer is the scan's."""
    rng = random.Random(17)
    fingerprints = [rng.getrandbits(64) - (1 << 63) for _ in range(160_000)]
    centre = fingerprints[0]
    fingerprints += [flip(centre, rng.sample(range(64), rng.randint(1, 20))) for _ in range(300)]
    asked = [(flip(centre, rng.sample(range(64), rng.randint(0, 6))), k, n)
             for k, n in ((13, 10), (3, 1), (17, 40), (6, 3), (10, 25), (21, 2)) * 3]
    asked += [(rng.getrandbits(64) - (1 << 63), k, n) for k, n in ((12, 5), (4, 10), (15, 3))]
    with psycopg.connect(database, autocommit=True) as conn:
        conn.execute("DROP TABLE IF EXISTS many_parents CASCADE")
        make_table(conn, "many_parents", "bigint", list(enumerate(fingerprints)))
        try:
            conn.execute("CREATE TEMP TABLE asked (number int, q bigint, k int, n int)")
            with conn.cursor().copy("COPY asked FROM STDIN") as copy:
                for number, row in enumerate(asked):
                    copy.write_row((number, *row))
            conn.execute("SET enable_seqscan = off")
            for statement, scanned in (
                    ("SELECT a.number, d.id FROM asked a, LATERAL (SELECT id FROM many_parents"
                     " WHERE hamming(si, a.q) <= a.k) d", "within"),
                    ("SELECT a.number, d.id FROM asked a, LATERAL (SELECT id FROM many_parents"
                     " ORDER BY hamming(si, a.q), id LIMIT a.n) d", "nearest")):
                plan = "\n".join(r[0] for r in conn.execute("EXPLAIN " + statement))
                assert "Custom Scan (nearsim rotation index)" in plan
                got = sorted(conn.execute(statement).fetchall())
                expected = []
                for number, (query, k, n) in enumerate(asked):
                    if scanned == "within":
                        ids = [i for i, v in enumerate(fingerprints)
                               if bin((v ^ query) & ((1 << 64) - 1)).count("1") <= k]
                    else:
                        ids = [i for _, i in sorted(
                            (bin((v ^ query) & ((1 << 64) - 1)).count("1"), i)
                            for i, v in enumerate(fingerprints))[:n]]
                    expected += [(number, i) for i in ids]
                assert got == sorted(expected), scanned
        finally:
            conn.execute("DROP TABLE many_parents CASCADE")


def test_a_row_whose_visible_version_ends_a_hot_chain_is_not_lost_among_equal_distances(
        database: str) -> None:
    """Rows at one distance are sorted by the further ORDER BY keys and fetched
    again by the tuple id of the version the search found.  When a row was
    updated without a change to its fingerprint (a HOT update), that version is
    the heap-only end of a chain, which a fetch through an index does not take
    as a start: the row was lost.  Every way of asking gives it."""
    with psycopg.connect(database, autocommit=True) as conn:
        conn.execute("DROP TABLE IF EXISTS hot_ends CASCADE")
        shared = 4298852249119307831
        make_table(conn, "hot_ends", "integer",
                   [(1, shared), (2, shared), (3, shared), (4, flip(shared, [5])),
                    (5, flip(shared, [1, 2, 3]))])
        conn.execute("ALTER TABLE hot_ends ADD COLUMN note text")
        try:
            # neither the text nor the fingerprint changes: HOT updates
            conn.execute("UPDATE hot_ends SET note = 'seen' WHERE id IN (2, 4)")
            heap_only = conn.execute("SELECT count(*) FROM hot_ends WHERE id IN (2, 4)"
                                     " AND ctid > '(0,5)'").fetchone()
            assert heap_only == (2,)
            conn.execute("SET enable_seqscan = off")
            for n in (1, 2, 3, 4, 5):
                expected = scan(conn, "hot_ends", shared, n)
                assert [key for key, _ in expected] == ["1", "2", "3", "4", "5"][:n]
                statement = ("SELECT id::text, hamming(si, %(q)s) FROM hot_ends"
                             " ORDER BY hamming(si, %(q)s), id LIMIT %(n)s")
                plan = "\n".join(r[0] for r in conn.execute("EXPLAIN " + statement,
                                                             {"q": shared, "n": n}))
                assert "Custom Scan (nearsim rotation index)" in plan
                assert [tuple(r) for r in conn.execute(statement, {"q": shared, "n": n})] \
                    == expected
                assert nearest(conn, "hot_ends", shared, n) == expected
                assert [(str(r[0]), r[1]) for r in conn.execute(
                    "SELECT (f.doc).id, f.distance FROM hot_ends_nearest(%s::bigint, %s) f",
                    [shared, n])] == expected
        finally:
            conn.execute("DROP TABLE hot_ends CASCADE")
