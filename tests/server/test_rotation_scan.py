"""The SQL people write reads the rotation index: WHERE hamming(si, q) <= k,
ORDER BY hamming(si, q) LIMIT n and JOIN ... ON hamming(d.si, n.si) <= k.

Every answer through the rotation scan is compared with the answer of the
same statement with the scan turned off (nearsim.enable_rotation_scan), and
with a brute force in Python, on random and adversarial fingerprints: planted
neighbours at every distance, a block of equal values, 0, -1 and the extreme
values, rows without a fingerprint, and many rows that share a band.
"""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

import psycopg
import pytest
from psycopg import sql
from sqlalchemy import BigInteger, Column, MetaData, Table, Text, create_engine, func, select

import nearsim

EXTREMES = [0, -1, -(1 << 63), (1 << 63) - 1]
SCAN_NODE = "Custom Scan (nearsim rotation index)"
RADII = [0, 1, 2, 3, 5, 6, 8, 10, 13, 17, 21, 30, 64]


def flip(value: int, bits: Sequence[int]) -> int:
    """``value`` (a signed bigint) with ``bits`` inverted."""
    unsigned = value & ((1 << 64) - 1)
    for bit in bits:
        unsigned ^= 1 << bit
    return unsigned - (1 << 64) if unsigned >= 1 << 63 else unsigned


def signed(value: int) -> int:
    return value - (1 << 64) if value >= 1 << 63 else value


def make_fingerprints(seed: int) -> list[int | None]:
    rng = random.Random(seed)
    uniform = [signed(rng.getrandbits(64)) for _ in range(2_500)]
    planted = [flip(uniform[0], rng.sample(range(64), d)) for d in range(0, 24) for _ in range(3)]
    block = [uniform[1]] * 150
    # the first 22 bits (band 0) of one value, the rest random
    shared_band = [signed((uniform[2] & ~((1 << 42) - 1) & ((1 << 64) - 1))
                          | rng.getrandbits(42)) for _ in range(400)]
    nulls: list[int | None] = [None] * 7
    return [*uniform, *planted, *block, *shared_band, *EXTREMES, *nulls]


def load(conn: psycopg.Connection, table: str, fingerprints: Sequence[int | None]) -> None:
    """A table enabled for nearsim holding these fingerprints (None: a row without text)."""
    conn.execute(sql.SQL("CREATE TABLE {} (id bigint PRIMARY KEY, body text, si bigint)").format(
        sql.Identifier(table)))
    conn.execute("SELECT nearsim_enable(%s, 'body')", [table])
    conn.execute("SET nearsim.profile = 'default/1'")
    with conn.cursor().copy(sql.SQL("COPY {} (id, body, si) FROM STDIN").format(
            sql.Identifier(table))) as copy:
        for key, fingerprint in enumerate(fingerprints):
            copy.write_row((key, None if fingerprint is None else "d", fingerprint))
    conn.execute("RESET nearsim.profile")
    conn.execute(sql.SQL("ANALYZE {}").format(sql.Identifier(table)))


@pytest.fixture(scope="module")
def fingerprints(database: str) -> list[int | None]:
    values = make_fingerprints(33)
    with psycopg.connect(database, autocommit=True) as conn:
        load(conn, "docs", values)
    return values


@contextmanager
def rotation_scan(conn: psycopg.Connection) -> Iterator[None]:
    """Statements that can read the rotation index do (the sequential scan is
    made to cost more than any other way)."""
    conn.execute("SET enable_seqscan = off")
    try:
        yield
    finally:
        conn.execute("RESET enable_seqscan")


@contextmanager
def plain_scan(conn: psycopg.Connection) -> Iterator[None]:
    """Statements run as PostgreSQL runs them without nearsim's planner hook."""
    conn.execute("SET nearsim.enable_rotation_scan = off")
    try:
        yield
    finally:
        conn.execute("RESET nearsim.enable_rotation_scan")


def plan_of(conn: psycopg.Connection, statement: str | sql.Composable,
            params: Sequence[Any] | None = None) -> str:  # fmt: skip
    return "\n".join(r[0] for r in conn.execute(sql.SQL("EXPLAIN ") + (
        sql.SQL(statement) if isinstance(statement, str) else statement), params))


def ids(conn: psycopg.Connection, statement: str,
        params: Sequence[Any] | Mapping[str, Any] | None = None) -> list[int]:  # fmt: skip
    return sorted(r[0] for r in conn.execute(statement, params))


def within(fingerprints: Sequence[int | None], query: int, k: int) -> list[int]:
    return [i for i, v in enumerate(fingerprints)
            if v is not None and nearsim.hamming(v, query) <= k]


def queries_for(fingerprints: Sequence[int | None]) -> list[int]:
    rng = random.Random(5)
    present = [v for v in fingerprints if v is not None]
    return [present[0], present[1], present[2] ^ 0b1011, flip(present[2], range(30, 34)),
            *EXTREMES, *(signed(rng.getrandbits(64)) for _ in range(3))]


FORMS = {
    "hamming(si, q) <= k": ("SELECT id FROM docs WHERE hamming(si, %(q)s) <= %(k)s", 0),
    "hamming(si, q) < k": ("SELECT id FROM docs WHERE hamming(si, %(q)s) < %(k)s", 1),
    "k >= hamming(si, q)": ("SELECT id FROM docs WHERE %(k)s >= hamming(si, %(q)s)", 0),
    "k > hamming(q, si)": ("SELECT id FROM docs WHERE %(k)s > hamming(%(q)s, si)", 1),
    "hamming(q, si) <= k": ("SELECT id FROM docs WHERE hamming(%(q)s, si) <= %(k)s", 0),
    "BETWEEN 0 AND k": ("SELECT id FROM docs WHERE hamming(si, %(q)s) BETWEEN 0 AND %(k)s", 0),
    "smallint k": ("SELECT id FROM docs WHERE hamming(si, %(q)s) <= %(k)s::smallint", 0),
    "bigint k": ("SELECT id FROM docs WHERE hamming(si, %(q)s) <= %(k)s::bigint", 0),
}


@pytest.mark.parametrize("form", sorted(FORMS))
def test_each_form_reads_the_index_and_equals_the_scan(
        database: str, fingerprints: list[int | None], form: str) -> None:  # fmt: skip
    statement, shift = FORMS[form]
    with psycopg.connect(database, autocommit=True) as conn:
        with rotation_scan(conn):
            assert SCAN_NODE in plan_of(conn, statement % {"q": "1", "k": "6"})
        for query in queries_for(fingerprints):
            for k in RADII:
                params = {"q": query, "k": k + shift}
                expected = within(fingerprints, query, k)
                with rotation_scan(conn):
                    assert ids(conn, statement, params) == expected, (form, query, k)
                if k in (3, 13):
                    with plain_scan(conn):
                        assert ids(conn, statement, params) == expected


def test_equality_negative_and_null_radii(database: str, fingerprints: list[int | None]) -> None:
    query = next(v for v in fingerprints if v is not None)
    with psycopg.connect(database, autocommit=True) as conn, rotation_scan(conn):
        for k in (0, 2, 9):
            exactly = [i for i, v in enumerate(fingerprints)
                       if v is not None and nearsim.hamming(v, query) == k]
            equal = "SELECT id FROM docs WHERE hamming(si, %s) = %s"
            assert ids(conn, equal, [query, k]) == exactly
        nothing: list[int | None] = [-1, -64, None]
        for radius in nothing:
            assert ids(conn, "SELECT id FROM docs WHERE hamming(si, %s) <= %s",
                       [query, radius]) == []
        assert ids(conn, "SELECT id FROM docs WHERE hamming(si, %s) < 0", [query]) == []
        assert ids(conn, "SELECT id FROM docs WHERE hamming(si, NULL::bigint) <= 64") == []
        every = [i for i, v in enumerate(fingerprints) if v is not None]
        assert ids(conn, "SELECT id FROM docs WHERE hamming(si, 0) <= 100000000000") == every


def test_other_conditions_ctes_subqueries_and_text_queries(
        database: str, fingerprints: list[int | None]) -> None:  # fmt: skip
    query = fingerprints[0]
    assert query is not None
    expected = within(fingerprints, query, 10)
    with psycopg.connect(database, autocommit=True) as conn, rotation_scan(conn):
        anded = "SELECT id FROM docs WHERE hamming(si, %s) <= 10 AND id %% 2 = 0 AND body = 'd'"
        assert SCAN_NODE in plan_of(conn, anded, [query])
        assert ids(conn, anded, [query]) == [i for i in expected if i % 2 == 0]
        cte = ("WITH near AS MATERIALIZED (SELECT id FROM docs WHERE hamming(si, %s) <= 10)"
               " SELECT id FROM near")
        assert SCAN_NODE in plan_of(conn, cte, [query])
        assert ids(conn, cte, [query]) == expected
        subquery = ("SELECT id FROM docs WHERE id IN (SELECT id FROM docs"
                    " WHERE hamming(si, %s) <= 10)")
        assert ids(conn, subquery, [query]) == expected
        lateral = ("SELECT d.id FROM (VALUES (%s::bigint)) q(v),"
                   " LATERAL (SELECT id FROM docs WHERE hamming(si, q.v) <= 10) d")
        assert ids(conn, lateral, [query]) == expected
        # a text query, fingerprinted by the table's profile in the statement
        conn.execute("INSERT INTO docs (id, body) VALUES (-5, %s)",
                     ["the quick brown fox jumps over the lazy dog again and again"])
        try:
            text = "the quick brown fox jumps over the lazy dog again and again!"
            card = "SELECT id FROM docs WHERE hamming(si, simhash(%s)) <= 6"
            assert SCAN_NODE in plan_of(conn, card, [text])
            fingerprint = nearsim.simhash(text)
            assert fingerprint is not None
            with plain_scan(conn):
                scanned = ids(conn, card, [text])
            assert ids(conn, card, [text]) == scanned and -5 in scanned
        finally:
            conn.execute("DELETE FROM docs WHERE id = -5")


def test_prepared_statements_under_generic_plans(
        database: str, fingerprints: list[int | None]) -> None:  # fmt: skip
    with psycopg.connect(database, autocommit=True) as conn:
        conn.execute("SET plan_cache_mode = force_generic_plan")
        conn.execute("PREPARE near(bigint, integer) AS"
                     " SELECT id FROM docs WHERE hamming(si, $1) <= $2")
        conn.execute("PREPARE by_text(text) AS"
                     " SELECT id FROM docs WHERE hamming(si, simhash($1)) <= 6")
        assert SCAN_NODE in plan_of(conn, "EXECUTE near(1, 6)")
        assert SCAN_NODE in plan_of(conn, "EXECUTE by_text('some words of a text')")
        for query in queries_for(fingerprints)[:6]:
            for k in (0, 4, 12, 40, 64, -3):
                got = ids(conn, f"EXECUTE near({query}, {k})")
                assert got == within(fingerprints, query, k), (query, k)
        # psycopg's own server-side prepared statements
        for _ in range(6):
            assert ids(conn, "SELECT id FROM docs WHERE hamming(si, %s) <= %s",
                       [fingerprints[0], 3]) == within(fingerprints, fingerprints[0] or 0, 3)


def test_a_limit_given_as_a_parameter_reads_the_index_under_generic_plans(
        database: str) -> None:  # fmt: skip
    """ORDER BY hamming(si, $1), id LIMIT $2, as ORMs send it: a generic plan,
    which knows no LIMIT, still reads the index rather than sorting the table."""
    rng = random.Random(8)
    values: list[int | None] = [signed(rng.getrandbits(64)) for _ in range(100_000)]
    with psycopg.connect(database, autocommit=True) as conn:
        load(conn, "limited", values)
        try:
            conn.execute("SET plan_cache_mode = force_generic_plan")
            conn.execute("PREPARE nearest(bigint, bigint) AS SELECT id, hamming(si, $1)"
                         " FROM limited ORDER BY hamming(si, $1), id LIMIT $2")
            assert SCAN_NODE in plan_of(conn, "EXECUTE nearest(5, 10)")
            for query in (values[7] or 0, flip(values[9] or 0, [1, 30]), -1):
                for n in (1, 10, 250):
                    got = [tuple(r) for r in conn.execute(f"EXECUTE nearest({query}, {n})")]
                    assert got == nearest_expected(values, query, n), (query, n)
        finally:
            conn.execute("DROP TABLE limited CASCADE")


def nearest_expected(fingerprints: Sequence[int | None], query: int, n: int
                     ) -> list[tuple[int, int | None]]:  # fmt: skip
    ordered = sorted((nearsim.hamming(v, query), i) for i, v in enumerate(fingerprints)
                     if v is not None)
    result: list[tuple[int, int | None]] = [(i, d) for d, i in ordered]
    result += [(i, None) for i, v in enumerate(fingerprints) if v is None]
    return result[:n]


def test_order_by_distance_limit_n_is_the_scans_order(
        database: str, fingerprints: list[int | None]) -> None:  # fmt: skip
    statement = ("SELECT id, hamming(si, %(q)s) FROM docs"
                 " ORDER BY hamming(si, %(q)s), id LIMIT %(n)s")
    with psycopg.connect(database, autocommit=True) as conn:
        # a table this small is sorted faster than it is searched: read the index anyway
        conn.execute("SET enable_seqscan = off")
        assert SCAN_NODE in plan_of(conn, statement % {"q": "7", "n": "10"})
        for query in queries_for(fingerprints):
            for n in (1, 2, 10, 100, 600):
                got = [tuple(r) for r in conn.execute(statement, {"q": query, "n": n})]
                assert got == nearest_expected(fingerprints, query, n), (query, n)
        # without a second key: the distances are the scan's, ties in any order
        query = fingerprints[1] or 0
        got = [tuple(r) for r in conn.execute(
            "SELECT id, hamming(si, %(q)s) FROM docs ORDER BY hamming(si, %(q)s) LIMIT 200",
            {"q": query})]
        expected = nearest_expected(fingerprints, query, 200)
        assert [d for _, d in got] == [d for _, d in expected]
        # every row: rows without a fingerprint come last, as NULLS LAST puts them
        total = len(fingerprints)
        with rotation_scan(conn):
            everything = [tuple(r) for r in conn.execute(statement, {"q": 0, "n": total + 5})]
        assert everything == nearest_expected(fingerprints, 0, total)
        # within a radius, nearest first
        bounded = ("SELECT id, hamming(si, %(q)s) FROM docs WHERE hamming(si, %(q)s) <= 9"
                   " ORDER BY hamming(si, %(q)s), id LIMIT 50")
        with rotation_scan(conn):
            got = [tuple(r) for r in conn.execute(bounded, {"q": query})]
        assert got == [(i, d) for i, d in nearest_expected(fingerprints, query, total)
                       if d is not None and d <= 9][:50]
        # a NULL query: every row's distance is NULL, so every row, in no order
        nulls = sorted(r[0] for r in conn.execute(
            "SELECT id FROM docs ORDER BY hamming(si, NULL::bigint) LIMIT %s", [total + 1]))
        assert nulls == list(range(total))


TIE_ORDERS = ["id DESC", "grp, id", "grp DESC NULLS LAST, id", "grp NULLS FIRST, label DESC, id",
              'label COLLATE "C", id', "code, id DESC"]


def test_further_sort_keys_sort_the_rows_of_each_distance_in_the_scan(database: str) -> None:
    """ORDER BY hamming(si, q), <columns> LIMIT n: the scan gives each
    distance's rows sorted by the further keys (so no sort above it reads on
    to the next distance), in the order the plain scan gives, with ties,
    NULLs in the keys and rows without a fingerprint."""
    rng = random.Random(21)
    centres = [signed(rng.getrandbits(64)) for _ in range(12)]
    labels = ["a", "B", "b", "é", "Z", None]
    rows = []
    for key in range(6_000):
        value = flip(rng.choice(centres), rng.sample(range(64), rng.randint(0, 3)))
        rows.append((key, None if rng.random() < 0.1 else rng.randint(0, 5), rng.choice(labels),
                     rng.choice(["x", "yy", "z"]), None if rng.random() < 0.02 else value))
    with psycopg.connect(database, autocommit=True) as conn:
        conn.execute("CREATE TABLE ties (id int PRIMARY KEY, grp int, label text,"
                     " code varchar(4), body text, si bigint)")
        try:
            conn.execute("SELECT nearsim_enable('ties', 'body')")
            conn.execute("SET nearsim.profile = 'default/1'")
            copy_sql = "COPY ties (id, grp, label, code, body, si) FROM STDIN"
            with conn.cursor().copy(copy_sql) as copy:
                for key, grp, label, code, value in rows:
                    copy.write_row((key, grp, label, code, None if value is None else "d", value))
            conn.execute("RESET nearsim.profile")
            conn.execute("ANALYZE ties")
            for order in TIE_ORDERS:
                statement = (f"SELECT id FROM ties ORDER BY hamming(si, %(q)s), {order}"
                             " LIMIT %(n)s")
                with rotation_scan(conn):
                    conn.execute("SET enable_sort = off")
                    plan = plan_of(conn, statement % {"q": "0", "n": "5"})
                    assert SCAN_NODE in plan and "Sort Key" not in plan, (order, plan)
                    assert "Equal Distances Sorted By" in plan
                    got = {(q, n): conn.execute(statement, {"q": q, "n": n}).fetchall()
                           for q in (centres[0], centres[5], 0) for n in (1, 7, 300, 10_000)}
                    conn.execute("RESET enable_sort")
                with plain_scan(conn):
                    for (q, n), answer in got.items():
                        assert answer == conn.execute(statement, {"q": q, "n": n}).fetchall(), (
                            order, q, n)
            # a further key that is not a column: a sort above the scan, the same answers
            statement = ("SELECT id FROM ties ORDER BY hamming(si, %(q)s), mod(id, 7), id"
                         " LIMIT %(n)s")
            with rotation_scan(conn):
                plan = plan_of(conn, statement % {"q": "0", "n": "5"})
                assert SCAN_NODE in plan and "Incremental Sort" in plan
                answer = conn.execute(statement, {"q": centres[3], "n": 40}).fetchall()
            with plain_scan(conn):
                assert answer == conn.execute(statement, {"q": centres[3], "n": 40}).fetchall()
        finally:
            conn.execute("DROP TABLE ties CASCADE")


def test_a_limit_under_a_condition_that_keeps_few_rows_reads_on(database: str) -> None:
    """WHERE <a rare condition> ORDER BY hamming(si, q), id LIMIT n: the scan is
    planned for n rows and keeps only a window of the nearest it finds (a
    few times n, at least 1,024), but the condition rejects most rows, so it
    must give far more than n: past the rows it kept it reads on, and the
    answer is still the scan's."""
    rng = random.Random(17)
    values: list[int | None] = [signed(rng.getrandbits(64)) for _ in range(60_000)]
    centre = values[0] or 0
    values += [flip(centre, rng.sample(range(64), rng.randint(1, 20))) for _ in range(6_000)]
    statement = ("SELECT id, hamming(si, %(q)s) FROM rare WHERE id %% %(m)s = 0"
                 " ORDER BY hamming(si, %(q)s), id LIMIT %(n)s")
    with psycopg.connect(database, autocommit=True) as conn:
        load(conn, "rare", values)
        try:
            with rotation_scan(conn):
                assert SCAN_NODE in plan_of(conn, statement % {"q": "0", "m": "7", "n": "5"})
                for query in (centre, flip(centre, [5, 9]), values[3] or 0):
                    for modulus, n in ((7, 5), (50, 30), (400, 5), (3, 600)):
                        got = [tuple(r) for r in conn.execute(
                            statement, {"q": query, "m": modulus, "n": n})]
                        expected = [(i, d) for i, d in nearest_expected(values, query,
                                                                        len(values))
                                    if i % modulus == 0][:n]
                        assert got == expected, (query, modulus, n)
        finally:
            conn.execute("DROP TABLE rare CASCADE")


def test_nearest_within_a_small_memory_reads_the_index_whole(
        database: str, fingerprints: list[int | None]) -> None:  # fmt: skip
    """Far neighbours are found by reading an index whole, holding what
    work_mem allows; rows at one distance that do not fit are given as the
    pass reads them."""
    query = flip(fingerprints[2] or 0, [50])
    statement = ("SELECT id, hamming(si, %(q)s) FROM {} ORDER BY hamming(si, %(q)s), id"
                 " LIMIT %(n)s")
    with psycopg.connect(database, autocommit=True) as conn:
        conn.execute("SET work_mem = '64kB'")
        conn.execute("SET enable_seqscan = off")
        for n in (5, 300, 1200, len(fingerprints)):
            got = [tuple(r) for r in conn.execute(statement.format("docs"), {"q": query, "n": n})]
            assert got == nearest_expected(fingerprints, query, n)
        # more rows at one distance than 64kB holds (about 10,900 tuple ids)
        rng = random.Random(12)
        crowd: list[int | None] = [*([query] * 12_000),
                                   *(signed(rng.getrandbits(64)) for _ in range(3_000))]
        load(conn, "crowd", crowd)
        try:
            for probe, n in ((flip(query, [3]), 12_010), (query, 15_000), (0, 20)):
                got = [tuple(r) for r in conn.execute(statement.format("crowd"),
                                                       {"q": probe, "n": n})]
                assert got == nearest_expected(crowd, probe, n)
        finally:
            conn.execute("DROP TABLE crowd CASCADE")


def entries_of_index(conn: psycopg.Connection, index: str) -> tuple[int, int]:
    """The entries of an index's pages marked dead (LP_DEAD) and those longer
    than one key and tuple id (posting lists), read with pageinspect (whose
    btree functions take only btree's own access method)."""
    conn.execute("CREATE EXTENSION IF NOT EXISTS pageinspect")
    # a leaf: the level in the page's btree opaque data (its bytes 8 to 11) is 0
    row = conn.execute(
        "WITH pages AS (SELECT get_raw_page(%(i)s::text, b::int) AS raw"
        " FROM generate_series(1, pg_relation_size(%(i)s::regclass) / 8192 - 1) b),"
        " leaves AS (SELECT raw FROM pages, page_header(raw) h"
        " WHERE substring(raw FROM h.special + 9 FOR 4) = '\\x00000000'::bytea)"
        " SELECT count(*) FILTER (WHERE lp_flags = 3), count(*) FILTER (WHERE lp_len > 16)"
        " FROM leaves, heap_page_items(raw) WHERE lp > 1", {"i": index}).fetchone()
    assert row is not None
    return int(row[0]), int(row[1])


def test_entries_marked_dead_and_posting_lists_among_the_plain_ones_are_read_as_nbtree_reads_them(
        database: str) -> None:  # fmt: skip
    """A leaf's plain entries are read in one tight loop, which leaves the
    others (marked dead, a posting list, NULL) to the general one: ranges
    and whole passes over pages that mix them give the scan's answers."""
    rng = random.Random(21)
    query = signed(rng.getrandbits(64))
    values: list[int | None] = [signed(rng.getrandbits(64)) for _ in range(3_000)]
    values += [flip(query, rng.sample(range(64), d)) for d in range(0, 22) for _ in range(2)]
    values += [values[5]] * 300 + [flip(query, [9])] * 200 + [None] * 5
    with psycopg.connect(database, autocommit=True) as conn:
        load(conn, "marked", values)
        try:
            conn.execute("DELETE FROM marked WHERE id % 3 = 0")
            alive = [None if i % 3 == 0 else v for i, v in enumerate(values)]
            deleted = set(range(0, len(values), 3))
            # an ordinary index scan of band 0's index marks the deleted rows' entries dead
            index = conn.execute(
                "SELECT indexrelid::regclass::text FROM pg_index"
                " WHERE indrelid = 'marked'::regclass"
                " AND pg_get_indexdef(indexrelid) LIKE '%nearsim_rotate(si, 0)%'").fetchone()
            assert index is not None
            for setting in ("enable_seqscan", "enable_bitmapscan", "nearsim.enable_rotation_scan"):
                conn.execute(f"SET {setting} = off")
            marking = ("SELECT count(*) FROM marked"
                       " WHERE nearsim_rotate(si, 0) >= (-9223372036854775807 - 1)")
            assert "Index" in plan_of(conn, marking)
            conn.execute(marking)
            for setting in ("enable_seqscan", "enable_bitmapscan", "nearsim.enable_rotation_scan"):
                conn.execute(f"RESET {setting}")
            dead, postings = entries_of_index(conn, index[0])
            assert dead > 800 and postings > 2
            conn.execute("SET enable_seqscan = off")
            nearest = ("SELECT id, hamming(si, %(q)s) FROM marked ORDER BY hamming(si, %(q)s), id"
                       " LIMIT %(n)s")
            assert SCAN_NODE in plan_of(conn, nearest % {"q": "7", "n": "10"})
            for memory in ("4MB", "64kB"):  # 64kB: the far rows come from passes
                conn.execute(f"SET work_mem = '{memory}'")
                for probe in (query, values[5] or 0, flip(query, [1, 30, 60])):
                    expected = [(i, d) for i, d in nearest_expected(alive, probe, len(values))
                                if i not in deleted]
                    for n in (1, 10, 150, 400, len(values)):
                        got = [tuple(r) for r in conn.execute(nearest, {"q": probe, "n": n})]
                        assert got == expected[:n], (memory, probe, n)
                    for k in (0, 3, 9, 14, 22):
                        got_ids = ids(conn, "SELECT id FROM marked"
                                      " WHERE hamming(si, %(q)s) <= %(k)s", {"q": probe, "k": k})
                        assert got_ids == within(alive, probe, k), (memory, probe, k)
        finally:
            conn.execute("DROP TABLE marked CASCADE")


def test_a_join_runs_as_an_index_nested_loop(
        database: str, fingerprints: list[int | None]) -> None:  # fmt: skip
    rng = random.Random(8)
    present = [v for v in fingerprints if v is not None]
    batch = [flip(rng.choice(present), rng.sample(range(64), rng.randint(0, 4)))
             for _ in range(60)] + [None, 0, -1]
    with psycopg.connect(database, autocommit=True) as conn:
        conn.execute("CREATE TABLE new_docs (n int PRIMARY KEY, si bigint)")
        try:
            with conn.cursor().copy("COPY new_docs FROM STDIN") as copy:
                for number, value in enumerate(batch):
                    copy.write_row((number, value))
            conn.execute("ANALYZE new_docs")
            statement = ("SELECT n.n, d.id FROM new_docs n JOIN docs d"
                         " ON hamming(d.si, n.si) <= %(k)s")
            plan = plan_of(conn, statement % {"k": 3})
            assert "Nested Loop" in plan and SCAN_NODE in plan and "Within Radius Of: n.si" in plan
            for k in (0, 3, 7):
                expected = sorted((number, i) for number, value in enumerate(batch)
                                  if value is not None for i in within(fingerprints, value, k))
                got = sorted(tuple(r) for r in conn.execute(statement, {"k": k}))
                assert got == expected, k
                with plain_scan(conn):
                    assert sorted(tuple(r) for r in conn.execute(statement, {"k": k})) == expected
            # the other way round, and a semi-join
            anti = ("SELECT n.n FROM new_docs n WHERE NOT EXISTS (SELECT FROM docs d"
                    " WHERE hamming(n.si, d.si) <= 2)")
            assert sorted(r[0] for r in conn.execute(anti)) == sorted(
                number for number, value in enumerate(batch)
                if value is None or not within(fingerprints, value, 2))
        finally:
            conn.execute("DROP TABLE new_docs")


def test_estimates_and_the_planners_choice(database: str) -> None:
    with psycopg.connect(database, autocommit=True) as conn:
        plan = plan_of(conn, "SELECT * FROM docs WHERE hamming(si, 1) <= 3")
        assert SCAN_NODE in plan and " rows=1 " in plan.splitlines()[0]
        # most of the table: the sequential scan costs less, and the estimate says so
        plan = plan_of(conn, "SELECT * FROM docs WHERE hamming(si, 1) <= 40")
        assert SCAN_NODE not in plan
        rows = int(plan.splitlines()[0].split(" rows=")[1].split()[0])
        assert rows > 2_000
        conn.execute("CREATE TABLE tiny (id int PRIMARY KEY, body text)")
        try:
            conn.execute("INSERT INTO tiny VALUES (1, 'one small text'), (2, 'another one')")
            conn.execute("SELECT nearsim_enable('tiny', 'body')")
            conn.execute("ANALYZE tiny")
            assert SCAN_NODE not in plan_of(conn, "SELECT * FROM tiny WHERE hamming(si, 1) <= 3")
        finally:
            conn.execute("DROP TABLE tiny CASCADE")
        conn.execute("SET nearsim.enable_rotation_scan = off")
        assert SCAN_NODE not in plan_of(conn, "SELECT * FROM docs WHERE hamming(si, 1) <= 3")


def test_a_new_session_plans_the_index_before_calling_any_function(database: str) -> None:
    """The first statement of a session, with its query a parameter, already
    reads the index: planning hamming() loads the library."""
    with psycopg.connect(database, autocommit=True) as conn:
        plan = plan_of(conn, "SELECT id FROM docs WHERE hamming(si, %s::bigint) <= 6", [5])
        assert SCAN_NODE in plan
    with psycopg.connect(database, autocommit=True) as conn:
        conn.execute("PREPARE first(bigint) AS SELECT id FROM docs WHERE hamming(si, $1) <= 6")
        conn.execute("SET plan_cache_mode = force_generic_plan")
        assert SCAN_NODE in plan_of(conn, "EXECUTE first(5)")


def test_row_level_security_and_column_privileges_decide(
        database: str, fingerprints: list[int | None]) -> None:  # fmt: skip
    query = fingerprints[1]
    assert query is not None
    with psycopg.connect(database, autocommit=True) as conn:
        conn.execute("DROP ROLE IF EXISTS scan_reader")
        conn.execute("CREATE ROLE scan_reader")
        conn.execute("GRANT SELECT ON docs TO scan_reader")
        conn.execute("ALTER TABLE docs ENABLE ROW LEVEL SECURITY")
        conn.execute("CREATE POLICY even ON docs FOR SELECT TO scan_reader USING (id % 2 = 0)")
        try:
            conn.execute("SET ROLE scan_reader")
            statement = "SELECT id FROM docs WHERE hamming(si, %s) <= 12"
            with rotation_scan(conn):
                assert SCAN_NODE in plan_of(conn, statement, [query])
                got = ids(conn, statement, [query])
                ordered = [r[0] for r in conn.execute(
                    "SELECT id FROM docs ORDER BY hamming(si, %s), id LIMIT 40", [query])]
            assert got == [i for i in within(fingerprints, query, 12) if i % 2 == 0]
            assert ordered == [i for i, _ in nearest_expected(fingerprints, query, 200)
                               if i % 2 == 0][:40]
            conn.execute("RESET ROLE")
            conn.execute("REVOKE SELECT ON docs FROM scan_reader")
            conn.execute("GRANT SELECT (id, body) ON docs TO scan_reader")
            conn.execute("SET ROLE scan_reader")
            with pytest.raises(psycopg.errors.InsufficientPrivilege):
                conn.execute(statement, [query])
        finally:
            conn.execute("RESET ROLE")
            conn.execute("DROP POLICY even ON docs")
            conn.execute("ALTER TABLE docs DISABLE ROW LEVEL SECURITY")
            conn.execute("REVOKE ALL ON docs FROM scan_reader")
            conn.execute("DROP ROLE scan_reader")


def test_writes_of_the_same_transaction_are_seen(database: str) -> None:
    with psycopg.connect(database) as conn:
        conn.execute("CREATE TABLE fresh (id int PRIMARY KEY, body text)")
        conn.execute("SELECT nearsim_enable('fresh', 'body')")
        conn.execute("INSERT INTO fresh SELECT g, 'words of document ' || g || ' in a row'"
                     " FROM generate_series(1, 300) g")
        conn.execute("ANALYZE fresh")
        with rotation_scan(conn):
            conn.execute("SAVEPOINT s")
            conn.execute("UPDATE fresh SET body = 'something else entirely now' WHERE id = 7")
            got = ids(conn, "SELECT id FROM fresh WHERE hamming(si,"
                      " simhash('something else entirely now')) <= 0")
            assert got == [7]
            conn.execute("ROLLBACK TO SAVEPOINT s")
            assert ids(conn, "SELECT id FROM fresh WHERE hamming(si,"
                       " simhash('something else entirely now')) <= 0") == []
        conn.rollback()


def test_sqlalchemy_writes_the_literal_query(database: str,
                                            fingerprints: list[int | None]) -> None:
    docs = Table("docs", MetaData(), Column("id", BigInteger, primary_key=True),
                 Column("body", Text), Column("si", BigInteger))
    engine = create_engine("postgresql+psycopg://", creator=lambda: psycopg.connect(database))
    query = fingerprints[1]
    assert query is not None
    try:
        with engine.connect() as session:
            # the table is small: read the index whatever the sequential scan costs
            session.exec_driver_sql("SET enable_seqscan = off")
            statement = select(docs.c.id).where(func.hamming(docs.c.si, query) <= 6)
            compiled = statement.compile(engine)
            plan = "\n".join(r[0] for r in session.exec_driver_sql(
                "EXPLAIN " + str(compiled), compiled.params))
            assert SCAN_NODE in plan
            assert sorted(session.scalars(statement)) == within(fingerprints, query, 6)
            by_text = select(docs.c.id).where(
                func.hamming(docs.c.si, func.simhash("a text")) <= 6)
            assert sorted(session.scalars(by_text)) == within(
                fingerprints, nearsim.simhash("a text") or 0, 6)
            nearest = select(docs.c.id).order_by(func.hamming(docs.c.si, query),
                                                 docs.c.id).limit(10)
            assert list(session.scalars(nearest)) == [
                i for i, _ in nearest_expected(fingerprints, query, 10)]
    finally:
        engine.dispose()


def test_through_a_pooler_in_transaction_mode(pooled: str,
                                             fingerprints: list[int | None]) -> None:
    query = fingerprints[0]
    assert query is not None
    for _ in range(3):
        with psycopg.connect(pooled, autocommit=True, prepare_threshold=None) as conn, \
                conn.transaction():
            # a transaction's own setting: the pooler's next client does not inherit it
            conn.execute("SET LOCAL enable_seqscan = off")
            plan = plan_of(conn, "SELECT id FROM docs WHERE hamming(si, %s) <= 6", [query])
            assert SCAN_NODE in plan
            assert ids(conn, "SELECT id FROM docs WHERE hamming(si, %s) <= 6",
                       [query]) == within(fingerprints, query, 6)


def test_a_long_nearest_search_honours_statement_timeout_and_cancel(database: str) -> None:
    """Every fingerprint in one band value: the nearest search reads a band
    whole; it stops at statement_timeout and at a cancel."""
    rng = random.Random(3)
    values = [signed((0x5A5A5 << 44) | rng.getrandbits(44)) for _ in range(150_000)]
    with psycopg.connect(database, autocommit=True) as conn:
        load(conn, "one_band", values)
        try:
            statement = ("SELECT id FROM one_band WHERE hamming(si, %s) <= 64"
                         " ORDER BY hamming(si, %s) LIMIT 100000")
            far = signed(~values[0] & ((1 << 64) - 1))
            conn.execute("SET enable_seqscan = off")
            assert SCAN_NODE in plan_of(conn, statement, [far, far])
            conn.execute("SET statement_timeout = '30ms'")
            with pytest.raises(psycopg.errors.QueryCanceled):
                conn.execute(statement, [far, far])
            conn.execute("RESET statement_timeout")
            timer = threading.Timer(0.03, conn.cancel)
            timer.start()
            started = time.monotonic()
            with pytest.raises(psycopg.errors.QueryCanceled):
                conn.execute(statement, [far, far])
            assert time.monotonic() - started < 5
            timer.join()
        finally:
            conn.execute("DROP TABLE one_band CASCADE")


def test_updates_deletes_and_row_locks_through_the_rotation_scan(database: str) -> None:
    """Writes find their rows through the index; a row another transaction
    changed meanwhile is checked again in its new version (EvalPlanQual)."""
    text = "words of document 7 in a row here"
    with psycopg.connect(database, autocommit=True) as conn:
        conn.execute("CREATE TABLE written (id int PRIMARY KEY, body text)")
        try:
            conn.execute("INSERT INTO written SELECT g, 'words of document ' || g ||"
                         " ' in a row here' FROM generate_series(1, 500) g")
            conn.execute("SELECT nearsim_enable('written', 'body')")
            conn.execute("ANALYZE written")
            conn.execute("SET enable_seqscan = off")
            where = "WHERE hamming(si, simhash(%s)) <= 0"
            assert SCAN_NODE in plan_of(conn, f"UPDATE written SET body = body {where}", [text])
            assert ids(conn, f"SELECT id FROM written {where} FOR UPDATE", [text]) == [7]
            assert ids(conn, f"DELETE FROM written {where.replace('7', '8')} RETURNING id",
                       [text.replace("7", "8")]) == [8]
            # another transaction changes row 7's text (and fingerprint) and commits
            # while this one waits for it: the new version no longer matches
            with psycopg.connect(database) as other:
                other.execute("UPDATE written SET body = 'something else entirely now'"
                              " WHERE id = 7")
                waiting = threading.Thread(target=lambda: waited.append(ids(
                    conn, f"UPDATE written SET body = body || '!' {where} RETURNING id",
                    [text])))
                waited: list[list[int]] = []
                waiting.start()
                time.sleep(0.3)
                other.commit()
                waiting.join(10)
            assert waited == [[]]
            assert ids(conn, "SELECT id FROM written WHERE hamming(si,"
                       " simhash('something else entirely now')) <= 0") == [7]
        finally:
            conn.execute("DROP TABLE written CASCADE")


def test_pages_split_while_a_search_is_paused(database: str) -> None:
    """A cursor stops a search between rows while another session's commits
    split the leaf pages it reads (twice the table, in ten commits); the
    rest of the search still gives each row of the cursor's snapshot once,
    and no row it does not see.  (A split between two ranges of one page is
    what test_rotation_index's concurrent bulk loads met.)"""
    search_while_pages_split(database, 20_000, 40_000)


def test_parent_pages_split_while_a_search_is_paused(database: str) -> None:
    """The same with indexes of several parent pages above the leaves, which
    split too: a search finds the leaf of each range from the parent page of
    its last descent while that page's downlinks change."""
    search_while_pages_split(database, 150_000, 200_000)


def search_while_pages_split(database: str, rows: int, added: int) -> None:
    rng = random.Random(41)
    centre = signed(rng.getrandbits(64))
    values = [flip(centre, rng.sample(range(64), rng.randint(0, 12))) if rng.random() < 0.3
              else signed(rng.getrandbits(64)) for _ in range(rows)]
    more = [flip(centre, rng.sample(range(64), rng.randint(0, 12))) if rng.random() < 0.3
            else signed(rng.getrandbits(64)) for _ in range(added)]
    batch = added // 10
    with psycopg.connect(database, autocommit=True) as conn:
        load(conn, "splitting", values)
        try:
            for k, nearest in ((10, False), (12, False), (64, True)):
                statement = ("SELECT id FROM splitting WHERE hamming(si, %(q)s) <= %(k)s"
                             + (" ORDER BY hamming(si, %(q)s) LIMIT 3000" if nearest else ""))
                with psycopg.connect(database) as reader:
                    reader.execute("SET enable_seqscan = off")
                    assert SCAN_NODE in plan_of(reader, statement, {"q": centre, "k": k})
                    cursor = reader.cursor(name="paused")
                    cursor.execute(statement, {"q": centre, "k": k})
                    got: list[int] = []
                    conn.execute("SET nearsim.profile = 'default/1'")
                    # between rows, another session adds (and commits) rows
                    for step in range(0, len(more), batch):
                        got += [r[0] for r in cursor.fetchmany(1)]
                        with conn.cursor().copy(
                                "COPY splitting (id, body, si) FROM STDIN") as copy:
                            for offset, value in enumerate(more[step:step + batch], step):
                                copy.write_row((rows + offset, "d", value))
                    got += [r[0] for r in cursor.fetchall()]
                    cursor.close()
                    conn.execute("DELETE FROM splitting WHERE id >= %s", [rows])
                    conn.execute("VACUUM splitting")
                expected = within(values, centre, k)
                if nearest:
                    assert len(got) == len(set(got)) == min(3000, len(expected))
                    assert set(got) <= set(expected)
                else:
                    assert sorted(got) == expected, k
        finally:
            conn.execute("DROP TABLE splitting CASCADE")
