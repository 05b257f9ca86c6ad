"""Section 5 of the benchmarks: band layouts of the rotation index.

Each uniform set is rebuilt with 3, 4, 5 and 6 bands
(``nearsim_rebuild(tbl, bands => b)``); for each layout: the
search's latency for k = 3, 6, 10 and 12 (every answer checked), storage
per document, rebuild time, the plan, and the index probes and candidates a
search costs among uniform fingerprints.  The band rules themselves are
nearsim's (:mod:`nearsim.core.bands`); only the cost estimate is the
benchmark's own.
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from nearsim.core.bands import band_radius, band_width, default_bands

from .common import Connection, ms, percentile_ms, print_table, times, wrap
from .docsets import DocSet, Storage, index_storage, prewarm_search
from .search import (
    CUSTOM,
    GENERIC,
    PlanCheck,
    expected_matches,
    explain_search,
    search_statements,
    time_searches,
)

LAYOUT_RADII = (3, 6, 10, 12)
LAYOUT_BANDS = (3, 4, 5, 6)


def layout_cost(rows: int, bands: int, k: int) -> tuple[int, float]:
    """Index probes of a search, and the candidates expected among uniform fingerprints."""
    probes = 0
    missed = 1.0
    for band in range(bands):
        width, radius = band_width(bands, band), band_radius(k, bands, band)
        count = sum(math.comb(width, i) for i in range(radius + 1))
        probes += count
        missed *= 1 - count / 2**width
    return probes, rows * (1 - missed)


@dataclass(frozen=True)
class LayoutResult:
    docset: DocSet
    bands: int
    rebuild_seconds: float
    storage: Storage
    generic: dict[int, float]  # k -> p50 ms, force_generic_plan
    custom: dict[int, float]  # k -> p50 ms, force_custom_plan
    generic_plan: PlanCheck
    custom_plan: PlanCheck


def band_layouts(conn: Connection, schema: str, sets: Sequence[DocSet]) -> list[LayoutResult]:
    print(f"\n5. Band layouts: {', '.join(map(str, LAYOUT_BANDS))} bands on the uniform sets\n")
    wrap(
        f"For each uniform set of 4 and each layout, SELECT nearsim_rebuild(table, bands => b)"
        " (it drops and builds the rotation indexes and the search functions), then the"
        f" search of 4 with the same queries for k = {', '.join(map(str, LAYOUT_RADII))}"
        " (the generic and the custom plan statements of 4, after pg_prewarm, one warm-up"
        " query each, every answer checked against numpy). Probes:"
        " values looked up in all band indexes together; candidates: index entries expected to"
        " match a probe among uniform fingerprints (what the search checks)."
        " Storage: the rotation indexes (freshly built) per document."
        " The rule (nearsim.core.bands.default_bands) picks 3 bands at every size: the"
        " rotation indexes choose how many bits of a band to enumerate at query time."
    )
    results = []
    for docset in sets:
        kmax = max(LAYOUT_RADII)
        expected = expected_matches(docset.fingerprints, docset.queries, kmax)
        for bands in LAYOUT_BANDS:
            started = time.perf_counter()
            conn.execute("SELECT * FROM nearsim_rebuild(%s::regclass, bands => %s,"
                         " fingerprints => false)",
                         (docset.qualified, bands))
            rebuild = time.perf_counter() - started
            storage = index_storage(conn, docset.qualified)
            prewarm_search(conn, schema, docset)
            generic, custom = {}, {}
            for k in LAYOUT_RADII:
                searches = {name: search for name, search in search_statements(docset, k).items()
                            if name in (GENERIC, CUSTOM)}
                seconds, _ = time_searches(conn, docset, searches, expected, k)
                generic[k] = percentile_ms(seconds[GENERIC], 50)
                custom[k] = percentile_ms(seconds[CUSTOM], 50)
            generic_plan, custom_plan = (
                explain_search(conn, docset, 6, int(docset.queries[0]), mode)
                for mode in ("force_generic_plan", "force_custom_plan"))
            results.append(LayoutResult(docset, bands, rebuild, storage, generic, custom,
                                        generic_plan, custom_plan))
    print_layouts(results)
    return results


def print_layouts(results: Sequence[LayoutResult]) -> None:
    rows = []
    for r in results:
        n = r.docset.rows
        costs = [layout_cost(n, r.bands, k) for k in LAYOUT_RADII]
        marker = " (rule)" if r.bands == default_bands(n) else ""
        rows.append([r.docset.label, f"{r.bands}{marker}", f"{r.storage.per_doc(n):.1f}",
                     f"{r.rebuild_seconds:.1f}",
                     *(f"{probes:,} / {candidates:,.0f}" for probes, candidates in costs)])
    print()
    print_table(["set", "bands", "bytes/doc", "rebuild s",
                 *(f"k={k} probes / candidates" for k in LAYOUT_RADII)],
                rows, "<<>>" + ">" * len(LAYOUT_RADII))
    print()
    rows = []
    for name in dict.fromkeys(r.docset.name for r in results):
        mine = [r for r in results if r.docset.name == name]
        rule = default_bands(mine[0].docset.rows)
        ruled = next((r for r in mine if r.bands == rule), None)
        for k in LAYOUT_RADII:
            best = mine[int(np.argmin([r.generic[k] for r in mine]))]
            best_custom = mine[int(np.argmin([r.custom[k] for r in mine]))]
            rows.append([
                mine[0].docset.label, str(k),
                *(f"{ms(r.generic[k])} / {ms(r.custom[k])}" for r in mine),
                f"{best.bands} / {best_custom.bands}", str(rule),
                times(ruled.generic[k] / best.generic[k]) if ruled else "-",
            ])
    print_table(["set", "k", *(f"{b} bands: generic / custom" for b in LAYOUT_BANDS),
                 "fastest", "rule", "rule/fastest"],
                rows, "<>" + ">" * len(LAYOUT_BANDS) + ">>>")
    print()
    wrap("p50 ms of the prepared search with a generic plan / with a custom plan;"
         " fastest: the layout with the lowest p50 of each; rule/fastest compares the generic"
         " p50s. Plans at k = 6 after each rebuild (EXPLAIN ANALYZE, the second of two runs, of"
         " the first query as a prepared statement with a generic plan, then a custom one):")
    print()
    print_table(["set", "bands", "generic plan", "custom plan", "candidates", "rows",
                 "execution ms generic / custom", "custom planning ms"],
                [[r.docset.label, str(r.bands), r.generic_plan.shape,
                  "same" if r.generic_plan.shape == r.custom_plan.shape else r.custom_plan.shape,
                  f"{r.generic_plan.candidates:,}", f"{r.generic_plan.found:,}",
                  f"{r.generic_plan.milliseconds:.2f} / {r.custom_plan.milliseconds:.2f}",
                  f"{r.custom_plan.planning_ms:.2f}"]
                 for r in results],
                "<><<>>>>")
    print()
    for name in dict.fromkeys(r.docset.name for r in results):
        mine = [r for r in results if r.docset.name == name]
        overall = min(mine, key=lambda r: math.prod(r.generic.values()))
        overall_custom = min(mine, key=lambda r: math.prod(r.custom.values()))
        at6 = min(mine, key=lambda r: r.generic[6])
        smallest = min(mine, key=lambda r: r.storage.total)
        wrap(f"{mine[0].docset.label}: fastest over k = {', '.join(map(str, LAYOUT_RADII))}"
             f" (geometric mean of p50) with {overall.bands} bands ({overall_custom.bands} with"
             f" custom plans), at k = 6 with {at6.bands} bands; smallest with"
             f" {smallest.bands} bands ({smallest.storage.per_doc(smallest.docset.rows):.1f}"
             f" bytes/doc); the rule picks {default_bands(mine[0].docset.rows)}.")
