"""Section 4 of the benchmarks: search latency through the rotation index against scans.

On each document set, for k = 3, 6 and 10, four prepared statements make
their own pass over the set's queries: the index search
(``<prefix>_similar``) with a generic and with a custom plan, and the two
sequential scans (``hamming()`` and ``bit_count``).  Every answer is
checked against the others and against numpy in this client; a difference
stops the run.  Then ``EXPLAIN ANALYZE`` of the index search at k = 6.
Sections 5 and 6 reuse the statements, the checks and the plans.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray
from psycopg import sql

from .common import (
    BenchError,
    Connection,
    Corpus,
    best_of,
    ms,
    percentile_ms,
    print_table,
    times,
    wrap,
)
from .docsets import (
    BOILERPLATE_ROWS,
    QUERY_MAX_FLIPS,
    QUERY_RANDOM_SHARE,
    DocSet,
    Fingerprints,
    IndexPlan,
    load_docsets,
    popcount,
    prewarm_search,
    shared_buffers,
)

SEARCH_RADII = (3, 6, 10)
TARGET_SEARCH_SPEEDUP = 50.0  # index search against the hamming() scan, radius 6


@dataclass(frozen=True)
class Search:
    """A prepared search statement, and the plan_cache_mode to run it with."""

    statement: sql.Composed
    plan_cache_mode: str | None = None  # None: the session's (auto)
    rotation_scan: bool = True  # False: nearsim.enable_rotation_scan off (the plain scans)


GENERIC = "index, generic plan"
CUSTOM = "index, custom plan"
LITERAL = "WHERE hamming() <= k, index"
HAMMING = "hamming()"
BIT_COUNT = "bit_count"


def search_statements(docset: DocSet, k: int) -> dict[str, Search]:
    """The searches within k bits of %(q)s, each returning (id, distance)."""
    radius = sql.Literal(k)
    indexed = "SELECT (doc).id, distance FROM {}(%(q)s::bigint, {})"
    return {
        GENERIC: Search(sql.SQL(indexed).format(docset.similar, radius), "force_generic_plan"),
        # Another text, so that it is another prepared statement.
        CUSTOM: Search(sql.SQL(indexed + " /* custom */").format(docset.similar, radius),
                       "force_custom_plan"),
        # the statement users write, read by the planner's rotation scan
        LITERAL: Search(sql.SQL(
            "SELECT id, hamming(si, %(q)s::bigint) FROM {} WHERE hamming(si, %(q)s::bigint) <= {}"
            " /* rotation scan */").format(docset.table, radius)),
        # the same statement as PostgreSQL runs it without nearsim: the baseline
        HAMMING: Search(sql.SQL(
            "SELECT id, hamming(si, %(q)s::bigint) FROM {} WHERE hamming(si, %(q)s::bigint) <= {}"
        ).format(docset.table, radius), rotation_scan=False),
        BIT_COUNT: Search(sql.SQL(
            "SELECT id, bit_count((si # %(q)s::bigint)::bit(64))::int FROM {}"
            " WHERE bit_count((si # %(q)s::bigint)::bit(64)) <= {}"
        ).format(docset.table, radius), rotation_scan=False),
    }


Match = frozenset[tuple[int, int]]  # (id, distance)


def expected_matches(fingerprints: Fingerprints, queries: Fingerprints,
                     max_distance: int) -> list[tuple[NDArray[np.int64], NDArray[np.uint8]]]:
    """Ids (1-based positions) and distances of the rows within max_distance of each query."""
    result = []
    for query in queries:
        distance = popcount(fingerprints ^ query)
        near = np.flatnonzero(distance <= max_distance)
        result.append((near + 1, distance[near]))
    return result


def within(expected: tuple[NDArray[np.int64], NDArray[np.uint8]], k: int) -> Match:
    ids, distances = expected
    keep = distances <= k
    return frozenset(zip(ids[keep].tolist(), distances[keep].tolist(), strict=True))


def check_same(context: str, results: dict[str, Match]) -> None:
    """Abort unless every method returned the same rows (id and distance)."""
    (first, reference), *others = results.items()
    for name, rows in others:
        if rows != reference:
            missing = sorted(reference - rows)[:5]
            extra = sorted(rows - reference)[:5]
            raise BenchError(
                f"{context}: {name} returned {len(rows):,} rows, {first} {len(reference):,};"
                f" (id, distance) only in {first}: {missing}, only in {name}: {extra}"
            )


def run_search(conn: Connection, search: Search, query: int) -> tuple[Match, float]:
    """Rows of one prepared search, and its wall-clock seconds."""
    mode = search.plan_cache_mode
    if mode is not None:
        conn.execute("SELECT set_config('plan_cache_mode', %s, false)", (mode,))
    if not search.rotation_scan:
        conn.execute("SELECT set_config('nearsim.enable_rotation_scan', 'off', false)")
    try:
        started = time.perf_counter()
        rows = conn.execute(search.statement, {"q": query}, prepare=True).fetchall()
        elapsed = time.perf_counter() - started
    finally:
        if mode is not None:
            conn.execute("SELECT set_config('plan_cache_mode', 'auto', false)")
        if not search.rotation_scan:
            conn.execute("SELECT set_config('nearsim.enable_rotation_scan', 'on', false)")
    return frozenset((int(r[0]), int(r[1])) for r in rows), elapsed


def time_searches(conn: Connection, docset: DocSet, searches: dict[str, Search],
                  expected: Sequence[tuple[NDArray[np.int64], NDArray[np.uint8]]],
                  k: int) -> tuple[dict[str, list[float]], list[int]]:
    """Seconds per query of each search, checking every answer; rows found per query.

    Each search makes its own pass over the queries, after one warm-up query: run
    one after the other, a second search of the same query would find that query's
    pages in the CPU caches.
    """
    seconds: dict[str, list[float]] = {}
    answers: dict[str, list[Match]] = {}
    queries = docset.queries.tolist()
    for name, search in searches.items():
        run_search(conn, search, queries[0])  # warm-up: prepare, load caches
        answers[name], seconds[name] = [], []
        for query in queries:
            rows, elapsed = run_search(conn, search, query)
            answers[name].append(rows)
            seconds[name].append(elapsed)
    found = []
    for number, query in enumerate(queries):
        results: dict[str, Match] = {"numpy": within(expected[number], k)}
        results.update((name, answers[name][number]) for name in searches)
        check_same(f"{docset.label}, k = {k}, query {number} ({query})", results)
        found.append(len(results["numpy"]))
    return seconds, found


@dataclass(frozen=True)
class PlanCheck:
    shape: str
    candidates: int  # rows fetched by tuple id (those nearsim_search returned)
    found: int
    milliseconds: float  # execution
    planning_ms: float


def plan_shape(node: dict[str, Any], names: dict[str, str]) -> str:
    kind = node["Node Type"]
    relation = node.get("Relation Name")
    label = f"{kind} on {names.get(relation, relation)}" if relation else kind
    children = node.get("Plans") or []
    if kind == "BitmapOr" and all(c["Node Type"] == "Bitmap Index Scan" for c in children):
        return f"BitmapOr of {len(children)} Bitmap Index Scans"
    if not children:
        return label
    parts = []
    for child in children:
        shape = plan_shape(child, names)
        relationship = child.get("Parent Relationship")
        parts.append(f"{relationship}: {shape}" if relationship in ("InitPlan", "SubPlan")
                     else shape)
    return f"{label} ({', '.join(parts)})"


def fetched_candidates(node: dict[str, Any], table: str) -> int:
    """Rows the search fetched from ``table`` by tuple id: those its scan of the
    table kept or filtered out."""
    if node.get("Relation Name") == table:
        return int(node["Actual Rows"] + node.get("Rows Removed by Filter", 0)
                   + node.get("Rows Removed by Index Recheck", 0))
    return sum(fetched_candidates(c, table) for c in node.get("Plans") or [])


def explain_search(conn: Connection, docset: DocSet, k: int, query: int,
                   mode: str) -> PlanCheck:
    """EXPLAIN ANALYZE of the index search as a prepared statement with a
    custom (the query's value known) or generic (parameter) plan; the second of
    two runs, as the first execution of a new statement is slower."""
    conn.execute(sql.SQL(
        "PREPARE nearsim_bench_plan (bigint) AS SELECT (doc).id, distance FROM {}($1, {})"
    ).format(docset.similar, sql.Literal(k)))
    explain = sql.SQL(
        "EXPLAIN (ANALYZE, FORMAT JSON) EXECUTE nearsim_bench_plan ({}::bigint)"
    ).format(sql.Literal(str(query)))
    try:
        conn.execute("SELECT set_config('plan_cache_mode', %s, false)", (mode,))
        conn.execute(explain)
        row = conn.execute(explain).fetchone()
    finally:
        conn.execute("SELECT set_config('plan_cache_mode', 'auto', false)")
        conn.execute("DEALLOCATE nearsim_bench_plan")
    if row is None:
        raise BenchError("EXPLAIN returned no row")
    plan = row[0][0]
    names = {docset.name: "documents"}
    return PlanCheck(plan_shape(plan["Plan"], names),
                     fetched_candidates(plan["Plan"], docset.name),
                     int(plan["Plan"]["Actual Rows"]), float(plan["Execution Time"]),
                     float(plan.get("Planning Time", 0.0)))


@dataclass(frozen=True)
class SearchResult:
    docset: DocSet
    k: int
    seconds: dict[str, list[float]]
    found: list[int]

    def p50(self, name: str) -> float:
        return percentile_ms(self.seconds[name], 50)

    def p95(self, name: str) -> float:
        return percentile_ms(self.seconds[name], 95)


def describe_sets(sets: Sequence[DocSet]) -> None:
    print()
    print_table(
        ["set", "documents", "bands", "COPY s", "rows/s", "fingerprints"],
        [[d.label, f"{d.rows:,}", str(d.bands), f"{d.load_seconds:.1f}",
          f"{d.rows / d.load_seconds:,.0f}", d.described] for d in sets],
        "<>>>><",
    )


def search_latency(conn: Connection, schema: str, plan: IndexPlan,
                   chapters: Corpus) -> tuple[list[DocSet], list[SearchResult]]:
    queries = plan.queries
    print(f"\n4. Search latency: rotation index against sequential scans,"
          f" {' and '.join(f'{n:,}' for n in plan.sizes)} documents, one core\n")
    sets, real = load_docsets(conn, schema, plan.sizes, queries, chapters)
    example = search_statements(sets[0], 6)
    for name in (GENERIC, LITERAL, HAMMING, BIT_COUNT):
        shown = example[name].statement.as_string(conn).replace(
            sets[0].similar.as_string(conn), "docs_similar")
        shown = shown.replace(sets[0].table.as_string(conn), "docs")
        print(f"   {name.split(',')[0] + ':':11}{shown}")
    print()
    wrap(
        "Each set is a table (id bigint PRIMARY KEY, body text, si bigint) with a short body."
        " nearsim_enable runs on the empty table, as a user would (3 bands, whatever the"
        " final size: default_bands); then the rows are COPYed in, so the"
        " triggers keep the supplied fingerprints and PostgreSQL fills the rotation indexes;"
        " then VACUUM ANALYZE, and REINDEX of the rotation indexes (as nearsim_enable builds"
        " them on a filled table). Uniform: random 64-bit values. Text-like: real"
        f" fingerprints ({real};"
        " computed by this client) seed clusters of exact copies and variants with 1-8 random"
        f" bits flipped, plus a block of {BOILERPLATE_ROWS:,} identical fingerprints (capped at"
        f" a tenth of the set). {queries:,} queries per set:"
        f" {1 - QUERY_RANDOM_SHARE:.0%} are fingerprints of random rows with 1-{QUERY_MAX_FLIPS}"
        f" bits flipped, {QUERY_RANDOM_SHARE:.0%} random values. Each statement is prepared"
        " (psycopg prepare=True) and makes its own pass over the queries after one warm-up"
        " query (run right after another search of the same query, a search finds that"
        " query's pages in the CPU caches and takes about half the time). The index search"
        " is two prepared statements: one with"
        " plan_cache_mode = force_generic_plan (planned once; the steady state of a prepared"
        " statement) and one with force_custom_plan (planned again for each query's value, as"
        " an unprepared query is; the default, auto, picks one of the two by estimated cost)."
        " Every answer is checked: both index searches, the hamming() scan, the bit_count scan"
        " and numpy in this client must return the same (id, distance) rows, or the run stops."
        " Time: client wall clock of execute + fetchall, including a round trip; p50 and p95"
        " over the queries. One backend, max_parallel_workers_per_gather = 0, jit = off."
        " Before each set's timings pg_prewarm loads what an index search reads into shared"
        " buffers: the rotation indexes (about 90 MB for a million documents; shared_buffers is"
        f" {shared_buffers(conn)}); the scans read the documents through a small ring of"
        " buffers (from the OS cache), which evicts nothing."
    )
    describe_sets(sets)
    results = []
    plans = []
    prewarmed = True
    for docset in sets:
        kmax = max(SEARCH_RADII)
        expected = expected_matches(docset.fingerprints, docset.queries, kmax)
        prewarmed = prewarm_search(conn, schema, docset) and prewarmed
        for k in SEARCH_RADII:
            seconds, found = time_searches(conn, docset, search_statements(docset, k),
                                           expected, k)
            results.append(SearchResult(docset, k, seconds, found))
        # While this set's pages are still cached.
        plans.append([explain_search(conn, docset, 6, int(docset.queries[0]), mode)
                      for mode in ("force_generic_plan", "force_custom_plan")])
    round_trip = statistics.median(best_of(200, lambda: conn.execute("SELECT 1").fetchone()))
    print()
    wrap(f"Client round trip (SELECT 1, median): {round_trip * 1000:.3f} ms; it is part of every"
         " latency below."
         + ("" if prewarmed else " pg_prewarm is not available: the rotation indexes were not"
            " loaded into shared buffers before the timings."))
    rows = []
    for r in results:
        generic = r.p50(GENERIC)
        rows.append([
            r.docset.label, str(r.k), f"{np.mean(r.found):,.1f}", f"{max(r.found):,}",
            ms(generic), ms(r.p95(GENERIC)), ms(r.p50(CUSTOM)), ms(r.p95(CUSTOM)),
            ms(r.p50(LITERAL)), ms(r.p95(LITERAL)),
            ms(r.p50(HAMMING)), ms(r.p95(HAMMING)), ms(r.p50(BIT_COUNT)), ms(r.p95(BIT_COUNT)),
            times(r.p50(HAMMING) / generic), times(r.p50(BIT_COUNT) / generic),
            times(r.p50(HAMMING) / r.p50(CUSTOM)), times(r.p50(HAMMING) / r.p50(LITERAL)),
        ])
    print()
    print_table(
        ["set", "k", "rows mean", "max", "index generic p50 ms", "p95", "custom p50", "p95",
         "WHERE hamming() <= k p50", "p95", "hamming() scan p50", "p95", "bit_count scan p50",
         "p95", "hamming()/generic", "bit_count/generic", "hamming()/custom",
         "hamming()/literal"],
        rows, "<>>>>>>>>>>>>>>>>>",
    )
    print()
    wrap("The index searches: docs_similar as a prepared statement (generic and custom"
         " plans), and the statement users write, WHERE hamming(si, q) <= k, which the"
         " planner reads through the rotation index (the rotation scan); the hamming() and"
         " bit_count scans run with nearsim.enable_rotation_scan off, as PostgreSQL runs them"
         " without nearsim.")
    print()
    wrap("Ratios are of the p50 latencies. Every query gave the same rows in all six ways."
         " Plans of the index search at k = 6 for the first query of each set, right after"
         " its timings: EXPLAIN ANALYZE (the second of two runs) of a prepared statement with"
         " a generic plan and with a"
         " custom plan (the query's value known); candidates are the rows fetched by tuple id"
         " (those nearsim_search found within k bits in the rotation indexes):")
    print()
    plan_rows = []
    for docset, (generic_plan, custom_plan) in zip(sets, plans, strict=True):
        same = "same" if custom_plan.shape == generic_plan.shape else custom_plan.shape
        plan_rows.append([docset.label, generic_plan.shape, same,
                          f"{generic_plan.candidates:,}",
                          f"{generic_plan.milliseconds:.2f} / {custom_plan.milliseconds:.2f}",
                          f"{custom_plan.planning_ms:.2f}"])
    print_table(["set", "generic plan", "custom plan", "candidates",
                 "execution ms generic / custom", "custom planning ms"], plan_rows, "<<<>>>")
    return sets, results
