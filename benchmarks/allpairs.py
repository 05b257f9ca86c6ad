"""Section 6 of the benchmarks: all pairs within k bits.

``SELECT count(*) FROM nearsim_pairs(tbl, k)`` for k = 3 and 6 on every
document set, once each under a ``statement_timeout``, next to
``nearsim_clusters`` (the same pair search, one row per document).  The
counts are checked: a text-like set has at least the pairs of its identical
block, and small sets are compared with a brute-force count.  The baseline
is one index search per document, from section 4's latencies.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass

import psycopg

from .common import BenchError, Connection, count_rows, print_table, times, wrap, yes_no
from .docsets import (
    BOILERPLATE_ROWS,
    TARGET_ROWS,
    TEXT_LIKE,
    DocSet,
    Fingerprints,
    popcount,
)
from .search import GENERIC, SearchResult

PAIR_RADII = (3, 6)
TARGET_PAIRS_SECONDS = 60.0  # nearsim_pairs, k <= 6


@dataclass(frozen=True)
class PairsResult:
    docset: DocSet
    k: int
    pairs: int | None  # None: timed out or not available
    seconds: float
    note: str
    clusters_seconds: float | None = None  # nearsim_clusters, the same pair search


def pairs_unavailable(error: psycopg.Error) -> bool:
    """Whether ``error`` says nearsim_pairs is not installed (rather than that it failed).

    The server's nearsim package may be older or newer than this client's, so
    the module is looked for under both of its names.
    """
    message = str(error)
    return isinstance(error, psycopg.errors.UndefinedFunction) or (
        any(module in message for module in ("nearsim.pairs", "nearsim.core.pairs"))
        and ("No module named" in message or "cannot import" in message)
    )


def brute_force_pairs(fingerprints: Fingerprints, k: int) -> int:
    pairs = 0
    for i in range(len(fingerprints) - 1):
        pairs += int((popcount(fingerprints[i + 1:] ^ fingerprints[i]) <= k).sum())
    return pairs


def all_pairs(conn: Connection, sets: Sequence[DocSet], timeout: int,
              searches: Sequence[SearchResult]) -> list[PairsResult]:
    print(f"\n6. All pairs: SELECT count(*) FROM nearsim_pairs(table, k), k ="
          f" {', '.join(map(str, PAIR_RADII))}\n")
    wrap(
        "nearsim_pairs reads every fingerprint of the table and returns each pair of"
        " documents within k bits once. Time: one run, client wall clock, with statement_timeout"
        f" = {timeout} s. The check: a text-like set has at least the pairs of its identical"
        " block; sets of at most 5,000 documents are compared with a brute-force count in this"
        " client. Clusters s: SELECT count(*) FROM nearsim_clusters(table, k), the same pair"
        " search returning one row per grouped document instead of one per pair, so the"
        " difference is the cost of returning the pairs as rows. The baseline is what the same"
        " answer would cost with one index search per"
        " document: documents x the generic-plan p50 of section 4 at the same k."
    )
    results: list[PairsResult] = []
    conn.execute("SELECT set_config('statement_timeout', %s, false)", (f"{timeout}s",))
    try:
        for docset in sets:
            for k in PAIR_RADII:
                if results and results[-1].docset is docset and results[-1].pairs is None:
                    # Within a larger radius it cannot be faster.
                    results.append(PairsResult(docset, k, None, 0.0,
                                               f"skipped ({results[-1].note})"))
                    continue
                results.append(pairs_once(conn, docset, k, timeout))
    finally:
        conn.execute("SELECT set_config('statement_timeout', '0', false)")
    p50 = {(r.docset.name, r.k): r.p50(GENERIC) for r in searches}
    rows = []
    for r in results:
        search = p50.get((r.docset.name, r.k))
        estimate = search * r.docset.rows / 1000 if search is not None else None
        met = "-"
        if r.docset.rows == TARGET_ROWS:
            met = yes_no(r.pairs is not None and r.seconds < TARGET_PAIRS_SECONDS)
        rows.append([
            r.docset.label, str(r.k), f"{r.pairs:,}" if r.pairs is not None else r.note,
            f"{r.seconds:.1f}" if r.pairs is not None else "-",
            f"{r.pairs / r.seconds:,.0f}" if r.pairs and r.seconds else "-",
            "-" if r.pairs is None else (
                f"{r.clusters_seconds:.1f}" if r.clusters_seconds is not None
                else "timed out or refused (nearsim.max_pairs)"),
            f"{estimate:,.0f}" if estimate is not None else "-",
            times(estimate / r.seconds) if estimate and r.pairs is not None else "-",
            met,
        ])
    print()
    print_table(["set", "k", "pairs", "seconds", "pairs/s", "clusters s", "N searches s (est.)",
                 "speedup", f"< {TARGET_PAIRS_SECONDS:g} s at {count_rows(TARGET_ROWS)}?"],
                rows, "<>>>>>>><")
    return results


def pairs_once(conn: Connection, docset: DocSet, k: int, timeout: int) -> PairsResult:
    started = time.perf_counter()
    try:
        row = conn.execute("SELECT count(*) FROM nearsim_pairs(%s::regclass, %s)",
                           (docset.qualified, k)).fetchone()
    except psycopg.errors.QueryCanceled:
        return PairsResult(docset, k, None, time.perf_counter() - started,
                           f"timed out (> {timeout} s)")
    except psycopg.Error as error:
        if pairs_unavailable(error):
            return PairsResult(docset, k, None, 0.0, "nearsim_pairs not installed")
        raise
    seconds = time.perf_counter() - started
    pairs = int(row[0]) if row else -1
    if docset.kind == TEXT_LIKE:
        block = min(BOILERPLATE_ROWS, docset.rows // 10)
        if pairs < block * (block - 1) // 2:
            raise BenchError(f"{docset.label}: nearsim_pairs found {pairs:,} pairs within {k}"
                             f" bits, fewer than the {block:,} identical fingerprints make")
    if docset.rows <= 5_000:
        expected = brute_force_pairs(docset.fingerprints, k)
        if pairs != expected:
            raise BenchError(f"{docset.label}: nearsim_pairs found {pairs:,} pairs within {k}"
                             f" bits, a brute-force count {expected:,}")
    started = time.perf_counter()
    try:
        conn.execute("SELECT count(*) FROM nearsim_clusters(%s::regclass, %s)",
                     (docset.qualified, k)).fetchone()
        clusters: float | None = time.perf_counter() - started
    except (psycopg.errors.QueryCanceled, psycopg.errors.ProgramLimitExceeded):
        # timed out, or refused: more pairs of documents than nearsim.max_pairs
        # lets it hold (the identical block of the text-like set), as a user's would be
        clusters = None
    return PairsResult(docset, k, pairs, seconds, "", clusters)
