"""Every search through the rotation indexes equals the scan, whatever sessions do.

Over 800 lines, for a reason: one state machine, whose rules (writes,
savepoints, VACUUM, sessions) and whose check of every search after each
step only make sense together.

An enabled table's rotation indexes (the nearsim_btree access method) keep
a transaction's new entries in its backend until it commits, prepares,
scans the index, runs a utility command or fills nearsim.insert_buffer.
The tests here write to one enabled table from several sessions at once --
savepoints rolled back, exception blocks, ON CONFLICT races, VACUUM
between them, prepared transactions, TRUNCATE, REINDEX, small insert
buffers -- and compare each search with the brute-force scan of the table
(``hamming(si, q) <= k``, ``ORDER BY hamming(si, q), id LIMIT n``, a
self-join for the pairs): docs_similar, docs_nearest, nearsim_search,
nearsim_similar_verified (through the rotation index, and through a sketch
index in the runs whose table has one), nearsim_pairs and docs_pairs, the
same SQL read through the planner's rotation scan (WHERE hamming(si, q) <= k,
ORDER BY hamming(si, q), id LIMIT n, and a join of queries with the table
ON hamming(d.si, q.si) <= k), and nearsim_verify's report.

The first tests replay, step by step, ways that once put an entry into an
index under a row it does not belong to.  The last is a stateful
hypothesis test that chooses the steps itself: a short run from a fixed
seed here, a long one from a random seed with ``make fuzz`` (NEARSIM_FUZZ_EXAMPLES and
NEARSIM_FUZZ_STEPS set its size).
"""

from __future__ import annotations

import math
import os
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass, field
from typing import Any

import psycopg
import pytest
from hypothesis import HealthCheck, seed, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)
from psycopg import sql
from psycopg.pq import TransactionStatus

# The radii and list lengths every search is asked for
RADII = (0, 3, 6)
NEAREST = (1, 3)
PAIR_RADII = (0, 6)
VERIFIED_SIMILARITY = (0.5, 0.8, 0.87)
# The bands of its sketch a document shares with the query's, counted as the
# sketch index's lookups count them (one per band key of the query it holds)
SHARED_BANDS = ("(SELECT count(*) FROM unnest(nearsim_sketch(%(t)s)) k"
                " WHERE k = ANY (nearsim_sketch(body)))")


def min_shared_bands(similarity: float) -> int:
    """The bands a candidate of the sketch index must share with the query at
    ``similarity`` by S_R: the most that a pair exactly there misses with a
    probability of at most 0.001 (20 bands of 2 minima each), at least 1."""
    shared_once = similarity ** 2
    below = 0.0
    for shared in range(20):
        below += math.comb(20, shared) * shared_once ** shared * (1 - shared_once) ** (20 - shared)
        if below > 0.001:
            return max(shared, 1)
    return 20


def verified_routes(sketch_index: bool, min_similarity: float) -> dict[str, tuple[str, str]]:
    """nearsim_similar_verified's arguments after the threshold, and what it is, as a
    scan: the measure and which documents are candidates."""
    within_radius = "hamming(si + 0, simhash(%(t)s)) <= nearsim_radius({})"
    routes = {
        # a radius given: the documents within it, whatever index the table has
        ", 's_r', nearsim_radius(%(m)s)": ("nearsim_resemblance", within_radius.format("%(m)s")),
    }
    if sketch_index:
        # by S_R: the documents whose sketch shares enough bands with the query's
        routes[", 's_r'"] = ("nearsim_resemblance",
                             f"{SHARED_BANDS} >= {min_shared_bands(min_similarity)}")
        # by default, S_L: its candidates are those at least 0.5 similar by S_R
        routes[""] = ("nearsim_literal_similarity",
                      f"{SHARED_BANDS} >= {min_shared_bands(0.5)}"
                      " AND nearsim_resemblance(%(t)s, body) >= 0.5")
    else:
        # by S_R: the documents within the calibrated radius
        routes[", 's_r'"] = ("nearsim_resemblance", within_radius.format("%(m)s"))
        routes[""] = ("nearsim_literal_similarity", within_radius.format("0.5")
                      + " AND nearsim_resemblance(%(t)s, body) >= 0.5")
    return routes


# How many fingerprints each check asks every search for, and how many
# (all the texts written, when fewer) it asks nearsim_search for at 0 bits
DETAILED_QUERIES = 10
EXACT_QUERIES = 2000
# An advisory lock on which an INSERT ... ON CONFLICT waits, inside the
# table's first index, between its check for a conflict and its insertion
GATE_LOCK = 74_110
# Errors a step may meet without anything being wrong: a key already taken,
# a lock another session holds (lock_timeout), a deadlock, or a command a
# transaction block refuses
EXPECTED_ERRORS = {"23505", "55P03", "40P01", "40001", "25001"}
LOCK_TIMEOUT = "100ms"

BASES = (
    "the quick brown fox jumps over the lazy dog near the river bank at dawn today",
    "a stitch in time saves nine as every careful tailor in the old town knows well",
    "all that glitters is not gold and not all those who wander far are lost",
)
WORDS = ("red", "blue", "stone", "river", "light", "night", "paper", "glass")
# texts without a word: their rows have no fingerprint
WORDLESS = ("", "...", "!!! ?? --")


def hamming(a: int, b: int) -> int:
    return ((a ^ b) & ((1 << 64) - 1)).bit_count()


def edited(base: int, edits: Sequence[tuple[int, str]]) -> str:
    """BASES[base] with some words replaced: a near-duplicate of it."""
    words = BASES[base].split()
    for position, word in edits:
        words[position % len(words)] = word
    return " ".join(words)


def bulk_text(base: int, number: int) -> str:
    """One of many near-duplicates: a base text and a number."""
    return f"{BASES[base]} copy {number}"


# -- the table and its searches ------------------------------------------------


def make_table(conn: psycopg.Connection) -> None:
    """An empty enabled table docs (autocommit connection), kept from autovacuum.

    Its first index, docs_gate, calls fuzz_gate(id), which waits on the
    GATE_LOCK advisory lock in a session that sets fuzz.gate: an INSERT ...
    ON CONFLICT there stops after its check for a conflict and before the
    primary key's entry, so another session can take the key meanwhile.
    """
    conn.execute("DROP TABLE IF EXISTS docs CASCADE")
    conn.execute("CREATE TABLE docs (id integer NOT NULL, body text)"
                 " WITH (autovacuum_enabled = off)")
    conn.execute("CREATE INDEX docs_gate ON docs (fuzz_gate(id))")
    conn.execute("ALTER TABLE docs ADD PRIMARY KEY (id)")
    conn.execute("SELECT nearsim_enable('docs', 'body')")


def create_index_reader(conn: psycopg.Connection) -> None:
    """fuzz_read_index(rotation): the rows of docs as the rotation index over
    nearsim_rotate(si, rotation) lists them, one per entry, in its order."""
    conn.execute("""CREATE FUNCTION fuzz_read_index(rotation integer)
        RETURNS TABLE (tid text, key bigint) LANGUAGE plpgsql
        SET enable_seqscan = off SET enable_bitmapscan = off SET enable_indexonlyscan = off
        AS $$
        DECLARE
            query text := format('SELECT d.ctid::text, nearsim_rotate(d.si, %s) FROM docs d'
                ' WHERE nearsim_rotate(d.si, %s) >= (-9223372036854775808)::bigint',
                rotation, rotation);
            plan text;
        BEGIN
            EXECUTE 'EXPLAIN ' || query INTO plan;
            IF plan NOT LIKE 'Index Scan using %' THEN
                RAISE EXCEPTION 'not read through the index: %', plan;
            END IF;
            RETURN QUERY EXECUTE query;
        END $$""")


def create_gate(conn: psycopg.Connection) -> None:
    conn.execute(f"""CREATE FUNCTION fuzz_gate(key integer) RETURNS integer
        LANGUAGE plpgsql IMMUTABLE AS $$
        BEGIN
            IF current_setting('fuzz.gate', true) = 'on' THEN
                PERFORM pg_advisory_lock_shared({GATE_LOCK});
                PERFORM pg_advisory_unlock_shared({GATE_LOCK});
            END IF;
            RETURN key;
        END $$""")


@dataclass(frozen=True)
class Row:
    key: int
    ctid: str
    si: int


def fingerprinted_rows(conn: psycopg.Connection) -> list[Row]:
    """The rows with a fingerprint, as the scan finds them (no index: no WHERE clause)."""
    return [Row(key, ctid, si) for key, ctid, si in conn.execute(
        "SELECT id, ctid::text, si FROM docs") if si is not None]


def fingerprints_of(conn: psycopg.Connection, texts: Sequence[str]) -> list[int]:
    """The fingerprints of ``texts`` (those with words), each once, in their order."""
    return list(dict.fromkeys(r[0] for r in conn.execute(
        "SELECT simhash(t) FROM unnest(%s::text[]) WITH ORDINALITY AS w(t, n)"
        " WHERE simhash(t) IS NOT NULL ORDER BY n", [list(texts)])))


def in_order(rows: Iterable[tuple[Any, ...]]) -> list[tuple[Any, ...]]:
    """``rows`` sorted, a NULL (None) after every value: a search may give one."""
    return sorted(rows, key=lambda row: tuple((v is None, 0 if v is None else v) for v in row))


@contextmanager
def rotation_scan_only(conn: psycopg.Connection) -> Iterator[None]:
    """The sequential scan made dearer than anything: the SQL people write is
    read through the planner's rotation scan."""
    conn.execute("SET enable_seqscan = off")
    try:
        yield
    finally:
        conn.execute("RESET enable_seqscan")


def literal_disagreements(conn: psycopg.Connection, query: int,
                          scan_order: list[tuple[int, int]]) -> list[str]:  # fmt: skip
    """How the SQL people write, read through the rotation scan, differs from
    the scan."""
    found: list[str] = []
    with rotation_scan_only(conn):
        for k in RADII:
            expected = in_order((key, d) for d, key in scan_order if d <= k)
            literal = in_order(tuple(r) for r in conn.execute(
                "SELECT id, hamming(si, %(q)s) FROM docs WHERE hamming(si, %(q)s) <= %(k)s",
                {"q": query, "k": k}))
            if literal != expected:
                found.append(f"WHERE hamming(si, {query}) <= {k} gave {literal}, the scan"
                             f" {expected}")
        for n in NEAREST:
            ordered = [tuple(r) for r in conn.execute(
                "SELECT id, hamming(si, %(q)s) FROM docs WHERE si IS NOT NULL"
                " ORDER BY hamming(si, %(q)s), id LIMIT %(n)s", {"q": query, "n": n})]
            if ordered != [(key, d) for d, key in scan_order[:n]]:
                found.append(f"ORDER BY hamming(si, {query}), id LIMIT {n} gave {ordered},"
                             f" the scan {scan_order[:n]}")
    return found


def join_disagreements(conn: psycopg.Connection, queries: list[int],
                       rows: list[Row]) -> list[str]:
    """How a join of the queries and a NULL with the table (a batch checked
    against it, as people write it) read through the rotation scan differs
    from the scan."""
    found: list[str] = []
    batch: list[int | None] = [*queries, None]
    with rotation_scan_only(conn):
        for k in RADII:
            joined = in_order(tuple(r) for r in conn.execute(
                "SELECT q.n, d.id, hamming(d.si, q.si) FROM unnest(%s::bigint[])"
                " WITH ORDINALITY AS q(si, n) JOIN docs d ON hamming(d.si, q.si) <= %s",
                [batch, k]))
            expected = in_order((n, r.key, hamming(r.si, query))
                                for n, query in enumerate(queries, 1) for r in rows
                                if hamming(r.si, query) <= k)
            if joined != expected:
                found.append(f"the join of {batch} with docs within {k} bits gave {joined},"
                             f" the scan {expected}")
    return found


def disagreements(conn: psycopg.Connection, texts: Sequence[str]) -> list[str]:
    """How each search through the rotation indexes differs from the scan.

    ``texts`` are texts written to the table, kept or not: their
    fingerprints are the queries (an entry left under a fingerprint no row
    has is found only by asking for it), with those of some rows and of
    what is near them.
    """
    rows = fingerprinted_rows(conn)
    by_ctid = {r.ctid: r for r in rows}
    written = fingerprints_of(conn, texts)
    near = [r.si ^ 0b101 for r in rows[:2]]
    every = list(dict.fromkeys([*written, *(r.si for r in rows), *near, 0]))
    detailed = list(dict.fromkeys(
        [*written[-DETAILED_QUERIES // 2:], *(r.si for r in rows[:3]), *near, 0]))
    found: list[str] = []
    sketch_index = conn.execute("SELECT coalesce((SELECT usable FROM"
                                " nearsim_sketch_index('docs')), false)").fetchone() == (True,)

    # nearsim_search at 0 bits for every fingerprint written: the tuple ids
    # of the rows that have it, each once
    for query, tids in conn.execute(
            "SELECT q, ARRAY(SELECT t::text FROM unnest(nearsim_search('docs', 'si', q, 0)) t)"
            " FROM unnest(%s::bigint[]) q", [every[-EXACT_QUERIES:]]):
        expected = sorted(r.ctid for r in rows if r.si == query)
        if sorted(tids) != expected:
            named = [f"{t} (id {by_ctid[t].key}, si {by_ctid[t].si})" if t in by_ctid
                     else f"{t} (no row)" for t in tids]
            found.append(f"nearsim_search('docs', 'si', {query}, 0) gave {named},"
                         f" the scan {expected}")
    for query in detailed:
        scan_order = sorted((hamming(r.si, query), r.key) for r in rows)
        for k in RADII:
            expected_rows = in_order((key, d) for d, key in scan_order if d <= k)
            similar = in_order(tuple(r) for r in conn.execute(
                "SELECT (s.doc).id, s.distance FROM docs_similar(%s::bigint, %s) s", [query, k]))
            if similar != expected_rows:
                found.append(f"docs_similar({query}, {k}) gave {similar}, the scan"
                             f" {expected_rows}")
            tids = sorted(r[0] for r in conn.execute(
                "SELECT t::text FROM unnest(nearsim_search('docs', 'si', %s, %s)) t", [query, k]))
            expected_tids = sorted(r.ctid for r in rows if hamming(r.si, query) <= k)
            if tids != expected_tids:
                found.append(f"nearsim_search('docs', 'si', {query}, {k}) gave {tids},"
                             f" the scan {expected_tids}")
        for n in NEAREST:
            nearest = [tuple(r) for r in conn.execute(
                "SELECT (f.doc).id, f.distance FROM docs_nearest(%s::bigint, %s) f", [query, n])]
            expected_nearest = [(key, d) for d, key in scan_order[:n]]
            if nearest != expected_nearest:
                found.append(f"docs_nearest({query}, {n}) gave {nearest}, the scan"
                             f" {expected_nearest}")
        found += literal_disagreements(conn, query, scan_order)
    found += join_disagreements(conn, detailed, rows)
    # the text of a row too, which at least that row resembles: the one whose
    # version was written last, maybe the end of a chain of HOT updates
    row_text = [body for (body,) in conn.execute(
        "SELECT body FROM docs WHERE si IS NOT NULL ORDER BY ctid DESC LIMIT 1")]
    for text in [*texts[-1:], BASES[0], *row_text]:
        # a text query is fingerprinted with the table's profile
        by_text = in_order(tuple(r) for r in conn.execute(
            "SELECT (s.doc).id, s.distance FROM docs_similar(%s::text, 3) s", [text]))
        expected_by_text = in_order(tuple(r) for r in conn.execute(
            "SELECT id, hamming(si, simhash(%(t)s)) FROM docs"
            " WHERE hamming(si + 0, simhash(%(t)s)) <= 3", {"t": text}))
        if by_text != expected_by_text:
            found.append(f"docs_similar({text!r}, 3) gave {by_text}, the scan {expected_by_text}")
        for min_similarity in VERIFIED_SIMILARITY:
            routes = verified_routes(sketch_index, min_similarity)
            for arguments, (measured, candidates) in routes.items():
                call = f"nearsim_similar_verified('docs', %(t)s, %(m)s{arguments})"
                verified = [(key, distance, round(similarity, 9)) for key, distance, similarity
                            in conn.execute(f"SELECT key, distance, similarity FROM {call}",
                                            {"t": text, "m": min_similarity})]  # fmt: skip
                expected_verified = [(key, distance, round(similarity, 9)) for
                                     key, distance, similarity in conn.execute(
                    "SELECT c.key, c.distance, c.similarity FROM ("
                    " SELECT id::text AS key, hamming(si, simhash(%(t)s)) AS distance,"
                    f" {measured}(%(t)s, body) AS similarity FROM docs WHERE {candidates}) c"
                    " WHERE c.similarity >= %(m)s"
                    " ORDER BY c.similarity DESC, c.distance, c.key COLLATE \"C\"",
                    {"t": text, "m": min_similarity})]
                if verified != expected_verified:
                    found.append(f"{call} with {text!r}, {min_similarity} gave {verified},"
                                 f" the scan {expected_verified}")
    for k in PAIR_RADII:
        expected_pairs = in_order((a.key, b.key, hamming(a.si, b.si)) for a in rows for b in rows
                                if a.key < b.key and hamming(a.si, b.si) <= k)
        pairs = in_order((int(a), int(b), d) for a, b, d in conn.execute(
            "SELECT a, b, distance FROM nearsim_pairs('docs', %s)", [k]))
        if pairs != expected_pairs:
            found.append(f"nearsim_pairs('docs', {k}) gave {pairs}, the scan {expected_pairs}")
        typed = in_order(tuple(r) for r in conn.execute(
            "SELECT a, b, distance FROM docs_pairs(%s)", [k]))
        if typed != expected_pairs:
            found.append(f"docs_pairs({k}) gave {typed}, the scan {expected_pairs}")
    # each rotation index read whole: every row with a fingerprint once, in
    # the order of its key (an entry under another key is out of order)
    expected_tids = sorted(r.ctid for r in rows)
    for (rotation,) in conn.execute(
            "SELECT substring(pg_get_indexdef(indexrelid) from 'nearsim_rotate\\(si, (\\d+)\\)')"
            "::int FROM pg_index WHERE indrelid = 'docs'::regclass"
            " AND pg_get_indexdef(indexrelid) LIKE '%nearsim_rotate(si, %'"):
        entries = conn.execute("SELECT tid, key FROM fuzz_read_index(%s)", [rotation]).fetchall()
        if sorted(tid for tid, _ in entries) != expected_tids:
            found.append(f"the index over nearsim_rotate(si, {rotation}) lists"
                         f" {sorted(tid for tid, _ in entries)}, the table has {expected_tids}")
        keys = [(key,) for _, key in entries]
        if keys != in_order(keys):
            found.append(f"the index over nearsim_rotate(si, {rotation}) lists rows out of"
                         f" the order of their keys: {entries}")
    report = conn.execute("SELECT ok, to_jsonb(v)::text FROM nearsim_verify('docs',"
                          " fingerprints => true) v").fetchone()
    assert report is not None
    if not report[0]:
        found.append(f"nearsim_verify('docs', fingerprints => true) is not ok: {report[1]}")
    return found


def assert_searches_equal_scan(conn: psycopg.Connection, texts: Sequence[str]) -> None:
    found = disagreements(conn, texts)
    shown = [line if len(line) < 600 else line[:600] + " ..." for line in found[:12]]
    if len(found) > len(shown):
        shown.append(f"... and {len(found) - len(shown)} more")
    assert not found, "\n".join(shown)


# -- the server ---------------------------------------------------------------


@pytest.fixture(scope="module")
def fuzz_database(
    own_server: Callable[..., AbstractContextManager[tuple[str, str]]],
) -> Iterator[str]:
    """A database on a server of the module's own, which allows prepared transactions."""
    with own_server("nearsim-fuzz-", {"max_prepared_transactions": "4"},
                    database="fuzz") as (_, database):
        with psycopg.connect(database, autocommit=True) as conn:
            create_gate(conn)
            create_index_reader(conn)
        yield database


def connect(database: str, *, autocommit: bool = False) -> psycopg.Connection:
    conn = psycopg.connect(database, autocommit=autocommit)
    conn.execute(f"SET lock_timeout = '{LOCK_TIMEOUT}'")
    if not autocommit:
        conn.commit()
    return conn


# -- the ways known to go wrong, step by step --------------------------------


def test_entries_of_a_rolled_back_savepoint_never_name_rows_that_take_their_place(
        fuzz_database: str) -> None:
    """Rows rolled back to a savepoint, VACUUM, another session's rows in their
    tuple ids, then the first transaction commits: every search equals the scan."""
    with connect(fuzz_database, autocommit=True) as checker, \
            connect(fuzz_database) as first, connect(fuzz_database, autocommit=True) as second:
        make_table(checker)
        checker.execute("INSERT INTO docs SELECT g, %s || g FROM generate_series(1, 5) g",
                        ["kept document number "])
        rolled_back = [bulk_text(0, g) for g in range(200)]
        first.execute("INSERT INTO docs VALUES (100, %s)", [BASES[2]])
        first.execute("SAVEPOINT s")
        first.execute("INSERT INTO docs SELECT 1000 + n, t FROM unnest(%s::text[])"
                      " WITH ORDINALITY AS r(t, n)", [rolled_back])
        first.execute("ROLLBACK TO SAVEPOINT s")
        # (the first session's lock keeps VACUUM from cutting the table short:
        # it would wait 5 seconds for it)
        checker.execute("VACUUM (TRUNCATE false) docs")
        others = [bulk_text(1, g) for g in range(200)]
        second.execute("INSERT INTO docs SELECT 2000 + n, t FROM unnest(%s::text[])"
                       " WITH ORDINALITY AS r(t, n)", [others])
        reused = checker.execute(
            "SELECT count(*) FROM docs WHERE id > 2000 AND ctid <= '(4,0)'").fetchone()
        assert reused is not None and reused[0] > 100  # the slots were taken again
        first.commit()
        assert_searches_equal_scan(checker, [*rolled_back, *others])


def test_entries_of_a_rolled_back_savepoint_never_point_past_a_truncated_end(
        fuzz_database: str) -> None:
    """Rows rolled back to a savepoint at the table's end, VACUUM cuts their pages
    off, the transaction commits: searches read no page past the end."""
    with connect(fuzz_database, autocommit=True) as checker, connect(fuzz_database) as first:
        make_table(checker)
        checker.execute("INSERT INTO docs SELECT g, %s || g FROM generate_series(1, 5) g",
                        ["kept document number "])
        rolled_back = [bulk_text(2, g) for g in range(1000)]
        # the savepoint's lock on the table goes with it: VACUUM may truncate
        first.execute("SAVEPOINT s")
        first.execute("INSERT INTO docs SELECT 1000 + n, t FROM unnest(%s::text[])"
                      " WITH ORDINALITY AS r(t, n)", [rolled_back])
        first.execute("ROLLBACK TO SAVEPOINT s")
        before = checker.execute("SELECT pg_relation_size('docs')").fetchone()
        checker.execute("VACUUM docs")
        after = checker.execute("SELECT pg_relation_size('docs')").fetchone()
        assert before is not None and after is not None and after[0] < before[0]
        first.commit()
        assert_searches_equal_scan(checker, rolled_back)


def test_entries_of_an_insert_that_lost_an_on_conflict_race(fuzz_database: str) -> None:
    """An INSERT ... ON CONFLICT DO NOTHING finds no conflict, then another
    session takes the key before it does: its row dies, VACUUM frees its
    slot, another row takes it, the transaction commits."""
    with connect(fuzz_database, autocommit=True) as checker, \
            connect(fuzz_database) as first, connect(fuzz_database, autocommit=True) as second:
        make_table(checker)
        lost = "the row that lost the race for its key has these words"
        rival = [BASES[0]]
        outcome = race_on_conflict(checker, first, lambda: second.execute(
            "INSERT INTO docs VALUES (7, %s)", rival), key=7, text=lost, update=False)
        assert outcome == "done"
        # the rival's row is the key's, at the second tuple id: the first was the racer's
        assert checker.execute("SELECT ctid::text, body FROM docs").fetchall() == [
            ("(0,2)", BASES[0])]
        checker.execute("VACUUM docs")
        second.execute("INSERT INTO docs VALUES (8, %s)", [BASES[1]])
        # the dead row's slot was taken again
        assert checker.execute("SELECT ctid::text FROM docs WHERE id = 8").fetchone() == ("(0,1)",)
        first.commit()
        assert_searches_equal_scan(checker, [lost, BASES[0], BASES[1]])


def test_an_entry_of_a_row_killed_by_on_conflict_is_not_kept_for_its_successor(
        fuzz_database: str) -> None:
    """As above, but the slot of the killed row goes to a row of the same
    transaction with the same text: its entries go in once, not twice."""
    with connect(fuzz_database, autocommit=True) as checker, \
            connect(fuzz_database) as first, connect(fuzz_database, autocommit=True) as second:
        make_table(checker)
        lost = "the row that lost the race for its key has these words"
        outcome = race_on_conflict(checker, first, lambda: second.execute(
            "INSERT INTO docs VALUES (7, %s)", [BASES[0]]), key=7, text=lost, update=False)
        assert outcome == "done"
        checker.execute("VACUUM docs")
        first.execute("INSERT INTO docs VALUES (8, %s)", [lost])
        assert first.execute("SELECT ctid::text FROM docs WHERE id = 8").fetchone() == ("(0,1)",)
        first.commit()
        assert_searches_equal_scan(checker, [lost, BASES[0]])


def race_on_conflict(gatekeeper: psycopg.Connection, racer: psycopg.Connection,
                     rival_step: Callable[[], object], *, key: int, text: str | None,
                     update: bool) -> str:
    """``racer`` runs INSERT ... ON CONFLICT (id) of ``key``; ``rival_step`` runs
    after its check for a conflict and before its insertion into the primary
    key, if it gets there (no row has the key yet).

    ``gatekeeper`` (autocommit) holds the gate's advisory lock meanwhile.
    'done', or the SQLSTATE of the racer's error.
    """
    action = "UPDATE SET body = excluded.body" if update else "NOTHING"
    racer_pid = racer.info.backend_pid
    outcome: list[str] = []

    def race() -> None:
        try:
            racer.execute(f"INSERT INTO docs VALUES (%s, %s) ON CONFLICT (id) DO {action}",
                          [key, text])
            outcome.append("done")
        except psycopg.Error as error:
            outcome.append(error.sqlstate or "error")

    racer.execute("SELECT set_config('fuzz.gate', 'on', true)")
    gatekeeper.execute("SELECT pg_advisory_lock(%s)", [GATE_LOCK])
    runner = threading.Thread(target=race)
    try:
        runner.start()
        deadline = time.monotonic() + 10
        while runner.is_alive() and time.monotonic() < deadline:
            if gatekeeper.execute(
                    "SELECT EXISTS (SELECT FROM pg_locks WHERE pid = %s"
                    " AND locktype = 'advisory' AND NOT granted)", [racer_pid]).fetchone() == (
                        True,):
                rival_step()
                break
            time.sleep(0.005)
    finally:
        gatekeeper.execute("SELECT pg_advisory_unlock(%s)", [GATE_LOCK])
        runner.join(30)
    assert not runner.is_alive(), "the INSERT ... ON CONFLICT did not finish"
    if racer.info.transaction_status == TransactionStatus.INTRANS:
        racer.execute("SELECT set_config('fuzz.gate', 'off', true)")
    return outcome[0]


# -- the fuzzer ------------------------------------------------------------------

SESSIONS = 3
# The seed of the short run in make test
SHORT_RUN_SEED = 3
KEYS = st.integers(0, 11)
TEXTS = st.one_of(
    st.builds(edited, st.integers(0, len(BASES) - 1),
              st.lists(st.tuples(st.integers(0, 15), st.sampled_from(WORDS)), max_size=3)),
    st.sampled_from(BASES),  # exact duplicates
    st.sampled_from(WORDLESS),
    st.none(),
)
ROWS = st.lists(st.tuples(KEYS, TEXTS), min_size=1, max_size=4,
                unique_by=lambda row: row[0])
SESSION = st.integers(0, SESSIONS - 1)
# Locks on the table that a search or nearsim_verify from another session waits for
BLOCKING_LOCKS = """
    SELECT EXISTS (SELECT FROM pg_locks l
        WHERE l.granted AND l.pid IS DISTINCT FROM pg_backend_pid()
        AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())
        AND l.relation IN (SELECT 'docs'::regclass UNION ALL
                           SELECT indexrelid FROM pg_index WHERE indrelid = 'docs'::regclass)
        AND l.mode NOT IN ('AccessShareLock', 'RowShareLock', 'RowExclusiveLock'))"""

# Whether another session or a prepared transaction holds a lock on the table
TABLE_LOCKED = """
    SELECT EXISTS (SELECT FROM pg_locks
        WHERE granted AND pid IS DISTINCT FROM pg_backend_pid()
        AND database = (SELECT oid FROM pg_database WHERE datname = current_database())
        AND relation = 'docs'::regclass)"""


@dataclass
class Session:
    """A connection that writes to docs (autocommit off) and its savepoints."""

    conn: psycopg.Connection
    savepoints: list[str] = field(default_factory=list)
    # as psql's ON_ERROR_ROLLBACK: each statement in a savepoint of its own,
    # rolled back if it fails, in a transaction that goes on
    statement_savepoints: bool = False

    @property
    def in_transaction(self) -> bool:
        return self.conn.info.transaction_status != TransactionStatus.IDLE


@dataclass
class Connections:
    """The connections every run of the machine shares (one server, one table)."""

    checker: psycopg.Connection  # autocommit: the searches and the scan, as a new session sees them
    maintenance: psycopg.Connection  # autocommit: VACUUM, COMMIT PREPARED, the race's gate
    sessions: list[Session]


class IndexFuzz(RuleBasedStateMachine):
    """Sessions write to one enabled table; after each step every search equals the scan.

    The searches are made from a session that writes nothing after each
    step, and from inside a writing session's transaction as a step of its
    own (a search there puts the session's waiting entries in, which would
    hide what VACUUM does to them if it came after every step).  At the end
    every transaction commits and the searches are made once more.
    """

    connections: Connections

    def __init__(self) -> None:
        super().__init__()
        self.texts: list[str] = []
        self.prepared: list[str] = []
        self.steps = 0
        self.eager_vacuum = False
        for session in self.connections.sessions:
            session.conn.rollback()
            session.savepoints.clear()
        make_table(self.connections.checker)

    @initialize(eager_vacuum=st.sampled_from([True, True, True, False]),
                statement_savepoints=st.lists(st.booleans(), min_size=SESSIONS,
                                              max_size=SESSIONS),
                sketch_index=st.booleans())
    def choose_habits(self, eager_vacuum: bool, statement_savepoints: list[bool],
                      sketch_index: bool) -> None:
        """Whether VACUUM runs after every step (as an eager autovacuum may),
        which sessions roll a failed statement back alone, and whether the
        table has a sketch index (verified searches by S_R then take their
        candidates from it, a GIN index the same writes go to).

        Three runs in four vacuum eagerly: what VACUUM does to rows between
        two steps of a transaction is what the waiting entries are most
        exposed to.
        """
        self.eager_vacuum = eager_vacuum
        for session, wrapped in zip(self.connections.sessions, statement_savepoints, strict=True):
            session.statement_savepoints = wrapped
        if sketch_index:
            self.connections.checker.execute(
                "CREATE INDEX docs_sketch ON docs USING gin (nearsim_sketch(body))")

    # -- helpers

    def session(self, number: int) -> Session:
        return self.connections.sessions[number]

    def wrote(self, texts: Sequence[str | None]) -> None:
        self.texts.extend(t for t in texts if t)

    def attempt(self, session: Session, action: Callable[[psycopg.Connection], object]) -> bool:
        """Run ``action`` in the session; after an expected error, undo to the last
        savepoint (or the whole transaction) as an application would."""
        wrapped = session.statement_savepoints
        try:
            if wrapped:
                session.conn.execute("SAVEPOINT fuzz_statement")
            action(session.conn)
            if wrapped:
                session.conn.execute("RELEASE SAVEPOINT fuzz_statement")
            return True
        except psycopg.Error as error:
            if error.sqlstate not in EXPECTED_ERRORS:
                raise
            if wrapped:
                session.conn.execute("ROLLBACK TO SAVEPOINT fuzz_statement")
                session.conn.execute("RELEASE SAVEPOINT fuzz_statement")
            else:
                self.recover(session)
            return False

    def recover(self, session: Session) -> None:
        if session.conn.info.transaction_status != TransactionStatus.INERROR:
            return
        if session.savepoints:
            session.conn.execute(sql.SQL("ROLLBACK TO SAVEPOINT {}").format(
                sql.Identifier(session.savepoints[-1])))
        else:
            session.conn.rollback()

    # -- writes

    @rule(number=SESSION, rows=ROWS)
    def insert(self, number: int, rows: list[tuple[int, str | None]]) -> None:
        self.wrote([t for _, t in rows])
        keys, texts = zip(*rows, strict=True)
        self.attempt(self.session(number), lambda c: c.execute(
            "INSERT INTO docs SELECT * FROM unnest(%s::int[], %s::text[])",
            [list(keys), list(texts)]))

    @rule(number=SESSION, first=st.sampled_from([100, 200]), count=st.sampled_from([40, 150]),
          base=st.integers(0, len(BASES) - 1))
    def insert_many(self, number: int, first: int, count: int, base: int) -> None:
        """Enough rows for a page or three: VACUUM may then cut empty pages off."""
        texts = [bulk_text(base, first + i) for i in range(count)]
        self.wrote(texts)
        self.attempt(self.session(number), lambda c: c.execute(
            "INSERT INTO docs SELECT %s + n::int - 1, t FROM unnest(%s::text[])"
            " WITH ORDINALITY AS r(t, n)", [first, texts]))

    @rule(number=SESSION, rows=ROWS)
    def copy(self, number: int, rows: list[tuple[int, str | None]]) -> None:
        self.wrote([t for _, t in rows])

        def copy_rows(conn: psycopg.Connection) -> None:
            with conn.cursor().copy("COPY docs (id, body) FROM STDIN") as copy:
                for row in rows:
                    copy.write_row(row)
        self.attempt(self.session(number), copy_rows)

    @rule(number=SESSION, keys=st.lists(KEYS, min_size=1, max_size=3), text=TEXTS)
    def update(self, number: int, keys: list[int], text: str | None) -> None:
        self.wrote([text])
        self.attempt(self.session(number), lambda c: c.execute(
            "UPDATE docs SET body = %s WHERE id = ANY(%s)", [text, keys]))

    @rule(number=SESSION, every=st.sampled_from([1, 2, 3]))
    def rewrite_unchanged(self, number: int, every: int) -> None:
        """An UPDATE of every row (or every second or third key) that changes no
        indexed value: a HOT update where the page has room, which the indexes
        see only through the chain's first version."""
        self.attempt(self.session(number), lambda c: c.execute(
            "UPDATE docs SET body = body WHERE id %% %s = 0", [every]))

    @rule(number=SESSION, keys=st.lists(KEYS, min_size=1, max_size=3))
    def delete(self, number: int, keys: list[int]) -> None:
        self.attempt(self.session(number), lambda c: c.execute(
            "DELETE FROM docs WHERE id = ANY(%s)", [keys]))

    @rule(number=SESSION, first=st.sampled_from([6, 100, 150]))
    def delete_tail(self, number: int, first: int) -> None:
        """The rows from a key on, the last pages' rows among them."""
        self.attempt(self.session(number), lambda c: c.execute(
            "DELETE FROM docs WHERE id >= %s", [first]))

    @rule(number=SESSION, rows=ROWS, on_conflict=st.sampled_from(
        ["NOTHING", "UPDATE SET body = excluded.body",
         "UPDATE SET body = docs.body || ' ' || excluded.body"]))
    def upsert(self, number: int, rows: list[tuple[int, str | None]], on_conflict: str) -> None:
        self.wrote([t for _, t in rows])
        keys, texts = zip(*rows, strict=True)
        self.attempt(self.session(number), lambda c: c.execute(
            f"INSERT INTO docs SELECT * FROM unnest(%s::int[], %s::text[])"
            f" ON CONFLICT (id) DO {on_conflict}", [list(keys), list(texts)]))

    @rule(number=SESSION, rival_offset=st.integers(1, SESSIONS - 1), key=KEYS, text=TEXTS,
          rival_text=TEXTS, update=st.booleans(), rival_commits=st.booleans())
    def on_conflict_race(self, number: int, rival_offset: int, key: int, text: str | None,
                         rival_text: str | None, update: bool, rival_commits: bool) -> None:
        """INSERT ... ON CONFLICT (id) in one session while another takes the key
        between its check for a conflict and its insertion."""
        self.wrote([text, rival_text])
        racer = self.session(number)
        rival = self.session((number + rival_offset) % SESSIONS)

        def rival_takes_the_key() -> None:
            if self.attempt(rival, lambda c: c.execute("INSERT INTO docs VALUES (%s, %s)",
                                                       [key, rival_text])) and rival_commits:
                rival.conn.commit()
                rival.savepoints.clear()
        outcome = race_on_conflict(self.connections.maintenance, racer.conn, rival_takes_the_key,
                                   key=key, text=text, update=update)
        if outcome not in ("done",):
            assert outcome in EXPECTED_ERRORS, f"the INSERT ... ON CONFLICT failed: {outcome}"
            self.recover(racer)

    @rule(number=SESSION, rows=ROWS, fails_with=st.sampled_from(
        ["RAISE EXCEPTION 'stop' USING ERRCODE = 'division_by_zero'",
         "INSERT INTO docs VALUES (-1, 'twice'), (-1, 'twice')"]))
    def exception_block(self, number: int, rows: list[tuple[int, str | None]],
                        fails_with: str) -> None:
        """A PL/pgSQL block inserts rows, fails, and its handler catches the error."""
        self.wrote([t for _, t in rows])
        values = sql.SQL(", ").join(sql.SQL("({}, {})").format(sql.Literal(k), sql.Literal(t))
                                    for k, t in rows)
        block = sql.SQL("""DO $fuzz$ BEGIN
                BEGIN
                    INSERT INTO docs VALUES {};
                    {};
                EXCEPTION WHEN division_by_zero OR unique_violation THEN NULL;
                END;
            END $fuzz$""").format(values, sql.SQL(fails_with))
        self.attempt(self.session(number), lambda c: c.execute(block))

    @rule(number=SESSION)
    def truncate(self, number: int) -> None:
        self.attempt(self.session(number), lambda c: c.execute("TRUNCATE docs"))

    @rule(number=SESSION)
    def reindex(self, number: int) -> None:
        self.attempt(self.session(number), lambda c: c.execute("REINDEX TABLE docs"))

    @rule(number=SESSION, size=st.sampled_from(["0", "1kB", "2kB", "64MB"]))
    def insert_buffer(self, number: int, size: str) -> None:
        """A small buffer: the waiting entries go in in the middle of a statement."""
        self.attempt(self.session(number), lambda c: c.execute(
            "SELECT set_config('nearsim.insert_buffer', %s, true)", [size]))

    @rule(number=SESSION, on=st.booleans())
    def statement_savepoints(self, number: int, on: bool) -> None:
        self.session(number).statement_savepoints = on

    # -- transactions

    @rule(number=SESSION)
    def commit(self, number: int) -> None:
        session = self.session(number)
        session.conn.commit()
        session.savepoints.clear()

    @rule(number=SESSION)
    def rollback(self, number: int) -> None:
        session = self.session(number)
        session.conn.rollback()
        session.savepoints.clear()

    @rule(number=SESSION)
    def savepoint(self, number: int) -> None:
        session = self.session(number)
        name = f"s{len(session.savepoints)}"
        session.conn.execute(sql.SQL("SAVEPOINT {}").format(sql.Identifier(name)))
        session.savepoints.append(name)

    @rule(number=SESSION, depth=st.integers(0, 2))
    def rollback_to_savepoint(self, number: int, depth: int) -> None:
        session = self.session(number)
        if session.savepoints:
            del session.savepoints[min(depth, len(session.savepoints) - 1) + 1:]
            session.conn.execute(sql.SQL("ROLLBACK TO SAVEPOINT {}").format(
                sql.Identifier(session.savepoints[-1])))

    @rule(number=SESSION, depth=st.integers(0, 2))
    def release_savepoint(self, number: int, depth: int) -> None:
        session = self.session(number)
        if session.savepoints:
            name = session.savepoints[min(depth, len(session.savepoints) - 1)]
            del session.savepoints[session.savepoints.index(name):]
            session.conn.execute(sql.SQL("RELEASE SAVEPOINT {}").format(sql.Identifier(name)))

    @precondition(lambda self: len(self.prepared) < 3)
    @rule(number=SESSION)
    def prepare(self, number: int) -> None:
        session = self.session(number)
        if session.in_transaction:
            gid = f"fuzz_{self.steps}_{number}"
            session.conn.execute(sql.SQL("PREPARE TRANSACTION {}").format(sql.Literal(gid)))
            session.savepoints.clear()
            self.prepared.append(gid)

    @precondition(lambda self: bool(self.prepared))
    @rule(commit=st.booleans(), which=st.integers(0, 2))
    def finish_prepared(self, commit: bool, which: int) -> None:
        gid = self.prepared.pop(which % len(self.prepared))
        command = "COMMIT PREPARED {}" if commit else "ROLLBACK PREPARED {}"
        self.connections.maintenance.execute(sql.SQL(command).format(sql.Literal(gid)))

    # -- maintenance and searches

    @rule(truncate=st.booleans())
    def vacuum(self, truncate: bool) -> None:
        """VACUUM from a session outside any transaction (as autovacuum would)."""
        maintenance = self.connections.maintenance
        if truncate and maintenance.execute(TABLE_LOCKED).fetchone() == (True,):
            # VACUUM would wait 5 seconds for the lock to cut the table short, in vain
            truncate = False
        try:
            maintenance.execute(
                "VACUUM (TRUNCATE true) docs" if truncate else "VACUUM (TRUNCATE false) docs")
        except psycopg.errors.LockNotAvailable:
            pass  # a session holds a lock that VACUUM waits for

    @rule()
    def vacuum_full(self) -> None:
        """The table rewritten, its rows with new tuple ids, its indexes rebuilt."""
        maintenance = self.connections.maintenance
        if maintenance.execute(TABLE_LOCKED).fetchone() == (False,):
            # (otherwise it would wait for the lock until lock_timeout)
            maintenance.execute("VACUUM FULL docs")

    @rule(number=SESSION)
    def search_inside(self, number: int) -> None:
        """The searches from inside a session's transaction, which sees its own rows."""
        session = self.session(number)
        if session.conn.execute(BLOCKING_LOCKS).fetchone() == (True,):
            return
        assert_searches_equal_scan(session.conn, self.texts)

    @invariant()
    def searches_equal_the_scan(self) -> None:
        self.steps += 1
        if self.eager_vacuum:
            self.vacuum(truncate=True)
        checker = self.connections.checker
        if checker.execute(BLOCKING_LOCKS).fetchone() == (False,):
            assert_searches_equal_scan(checker, self.texts)

    def teardown(self) -> None:
        """Every transaction commits (the prepared ones too); searches equal the scan."""
        try:
            for session in self.connections.sessions:
                session.conn.commit()
                session.savepoints.clear()
            for gid in self.prepared:
                self.connections.maintenance.execute(
                    sql.SQL("COMMIT PREPARED {}").format(sql.Literal(gid)))
            self.prepared.clear()
            assert_searches_equal_scan(self.connections.checker, self.texts)
        finally:
            for session in self.connections.sessions:
                session.conn.rollback()
            for (gid,) in self.connections.maintenance.execute(
                    "SELECT gid FROM pg_prepared_xacts WHERE gid LIKE 'fuzz\\_%'").fetchall():
                self.connections.maintenance.execute(
                    sql.SQL("ROLLBACK PREPARED {}").format(sql.Literal(gid)))


def test_searches_equal_the_scan_whatever_sessions_do(fuzz_database: str) -> None:
    """The stateful fuzzer: a short run from a fixed seed (make fuzz runs a long
    one from a random seed).

    A seed's sequences depend on the rules and their strategies only, and
    change with them.  This one was chosen when its fourth sequence put an
    entry under another row on btree.c before entries of rolled-back
    subtransactions were dropped; the tests above keep each known way fixed
    whatever the seed gives.
    """
    examples = int(os.environ.get("NEARSIM_FUZZ_EXAMPLES", "30"))
    steps = int(os.environ.get("NEARSIM_FUZZ_STEPS", "20"))
    machine: type[IndexFuzz] = IndexFuzz
    if "NEARSIM_FUZZ_EXAMPLES" not in os.environ:
        machine = seed(SHORT_RUN_SEED)(type("IndexFuzzShortRun", (IndexFuzz,), {}))
    with connect(fuzz_database, autocommit=True) as checker, \
            connect(fuzz_database, autocommit=True) as maintenance:
        sessions = [Session(connect(fuzz_database)) for _ in range(SESSIONS)]
        try:
            IndexFuzz.connections = Connections(checker, maintenance, sessions)
            run_state_machine_as_test(machine, settings=settings(
                max_examples=examples, stateful_step_count=steps, deadline=None,
                database=None, report_multiple_bugs=False,
                suppress_health_check=list(HealthCheck)))
        finally:
            for session in sessions:
                session.conn.close()
