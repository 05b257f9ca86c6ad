"""Verified search against MinHashLSH: real near-duplicates, 100,000 documents, the cost curve.

    .venv/bin/python -m benchmarks.verified --dsn DSN [--quick] [--output-dir DIR]
        [--sizes N [N ...]] [--pair-budget S] [--lookups N] [--lookup-timeout S]
        [--lookup-budget S]

One run measures nearsim's verified search and datasketch's MinHashLSH on
the same documents, one after the other, each on one core, against the exact
truth, and says for each figure whether its target is met:

* **Cost**: verified pairs at S_R >= 0.8 and >= 0.5 no slower than
  MinHashLSH on the same documents.
* **Quality**: recall >= 0.99 and F1 >= 0.995 at both thresholds.
* **Lookups**: ``nearsim_similar_verified`` p50 <= 3 ms on the table of the
  largest size.

The sets:

* the evaluation corpus of benchmarks/corpus.py at the sizes of the cost
  curve, 10,000, 20,500 (``full``, the corpus of benchmarks/quality.py),
  50,000 and 100,000 documents (``large``): each is the first N documents of
  the 100,000, exactly the corpus built at that size (corpus.py says why);
* two sets of real near-duplicates that no edit script made, the Debian
  copyright files of the machine and their paragraphs (benchmarks/wild.py).

The truth is the exact S_R of every pair (benchmarks/truth.py): computed
once on each wild set and once on the 100,000 documents, whose pairs inside
the first N documents are the truth of size N.  A pair is a positive at a
threshold when its S_R is at least the threshold; the pairs below are not
counted either way, as in benchmarks/quality.py.

The methods, and what their seconds include:

* ``nearsim verified``: ``CREATE TABLE`` and ``COPY`` of the texts (a key
  and the text), ``nearsim_enable`` (which fingerprints the rows and builds
  whatever the search needs), ``ANALYZE``, then one
  ``nearsim_pairs_verified(tbl, min_similarity => t, measure => 's_r')``.  The cost at a
  threshold is the sum: everything the table needs.  The query runs under
  a ``statement_timeout`` of ``--pair-budget`` seconds; a query cut off is
  reported as over the budget (with the seconds it actually ran: the server
  notices the timeout between two steps of its work), and the same threshold
  is not tried at the larger sizes.
* ``MinHashLSH + estimate``: datasketch ``MinHash`` of the same word
  3-shingles (nearsim's tokens), 128 permutations, ``MinHashLSH`` with its
  threshold at t, every document inserted and queried, and the candidates
  whose MinHash estimate is at least t.  Its cost at a threshold is the
  signatures plus the LSH.  On the corpus, signatures are made once for the
  100,000 documents, in slices ending at the curve's sizes, so the
  signature seconds of size N are those of its first N documents.
* ``simhash hamming<=6``: the seeds' query, all pairs of client fingerprints
  within 6 bits (no verification), for reference.

For nearsim the report also gives how many positives lie within the
calibrated radius (``nearsim_radius(t)``), by client fingerprints, and how
many were found inside and outside it: a search that only looks within the
radius cannot find those outside.

Lookups: ``--lookups`` (200) documents of the largest size drawn at random
(seed 1), their texts asked with ``nearsim_similar_verified(tbl, text, t, 's_r')``
as a prepared statement after one warm-up query, each under a
``statement_timeout`` of ``--lookup-timeout`` seconds; a threshold stops
asking after ``--lookup-budget`` seconds.  p50 and p90 of the wall-clock
time seen by the client; the answers are scored against the truth (the
query document itself left out).

Writes ``verified.json`` (every number), ``verified.md`` (the section of
docs/BENCHMARKS.md) and ``verified-cost.png`` (the cost curve) into the
output directory (default benchmarks/quality-results/).  Everything in the
database lives in a scratch schema that is dropped at the end.  The whole
run takes about 8 minutes on 2 cores, half of it the truth of the 100,000
documents (3.5 minutes, 3 GB); the budgets bound what a slow search can add
(about 15 minutes).  ``--quick`` (the test suite) runs every step on a few
hundred documents in seconds.

benchmarks/verified_sets.py measures each set, benchmarks/verified_lookups.py
the lookups; benchmarks/verified_report.py writes the targets, the figure and
the Markdown.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import json
import platform
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import psycopg

from .common import SESSION_SETTINGS, cpu_model, log, run_main, scratch_schema
from .corpus import CURVE_SIZES, SIZES, nested_corpus
from .scoring import THRESHOLDS
from .verified_lookups import (
    LOOKUP_BUDGET_SECONDS,
    LOOKUP_TIMEOUT_SECONDS,
    LOOKUPS,
    RADIUS_PATH,
    SKETCH_PATH,
    lookups,
    sketch_index,
)
from .verified_report import (
    FIGURE,
    TARGET_F1,
    TARGET_P50_MS,
    TARGET_P90_MS,
    TARGET_RECALL,
    curve_points,
    cut_list,
    draw_cost_curve,
    markdown,
    summary_rows,
)
from .verified_sets import (
    SetResult,
    client_signatures,
    drop_table,
    load_table,
    measure_set,
    measured_truth,
    megabytes,
    prefix_positives,
    truth_summary,
)
from .wild import DOC_DIRECTORY, WildSet, copyright_sets, read_copyright_files

__all__ = ["evaluate", "main"]

PAIR_BUDGET_SECONDS = 240.0
"""``statement_timeout`` of one ``nearsim_pairs_verified``: with it and the
lookups' budget, a slow search adds at most about 15 minutes to the run."""
QUICK_SIZES = (250, 400)
QUICK_WILD_FILES = 40
QUICK_LOOKUPS = 20
DEFAULT_OUTPUT = Path(__file__).resolve().parent / "quality-results"


# --------------------------------------------------------------------------
# The run


def server_facts(conn: psycopg.Connection) -> dict[str, str]:
    def one(query: str) -> str:
        row = conn.execute(query).fetchone()
        return str(row[0]) if row else "?"

    return {
        "postgresql": one("SELECT current_setting('server_version')"),
        "nearsim_extension": one("SELECT extversion FROM pg_extension WHERE extname = 'nearsim'"),
    }


def wild_sets(quick: bool, directory: Path) -> tuple[list[WildSet], dict[str, Any]]:
    reading = read_copyright_files(directory, versions=directory == DOC_DIRECTORY)
    if quick:
        reading.documents = reading.documents[:QUICK_WILD_FILES]
    return list(copyright_sets(reading)), reading.describe()


def evaluate(dsn: str, quick: bool, output_dir: Path, sizes: Sequence[int] | None = None,
             pair_budget: float = PAIR_BUDGET_SECONDS, lookup_count: int | None = None,
             lookup_timeout: float = LOOKUP_TIMEOUT_SECONDS,
             lookup_budget: float = LOOKUP_BUDGET_SECONDS,
             wild_directory: Path = DOC_DIRECTORY,
             command: str = "python -m benchmarks.verified") -> dict[str, Any]:
    started = time.perf_counter()
    size_name = "small" if quick else "large"
    wanted = sizes or (QUICK_SIZES if quick else CURVE_SIZES)
    count = lookup_count if lookup_count is not None else (QUICK_LOOKUPS if quick else LOOKUPS)
    results: dict[str, Any] = {
        "mode": "quick" if quick else "full",
        "command": command,
        "started": time.strftime("%Y-%m-%d %H:%M:%S %z"),
        "nearsim": importlib.metadata.version("nearsim"),
        "datasketch": importlib.metadata.version("datasketch"),
        "python": platform.python_version(), "cpu": cpu_model(),
        "budgets": {"pair_seconds": pair_budget, "lookup_timeout_seconds": lookup_timeout,
                    "lookup_budget_seconds": lookup_budget, "lookups": count},
        "targets": {"cost": "<= MinHashLSH + estimate, same documents, same run",
                    "recall": TARGET_RECALL, "f1": TARGET_F1, "p50_ms": TARGET_P50_MS,
                    "p90_ms": TARGET_P90_MS},
    }  # fmt: skip
    sets: list[SetResult] = []
    with scratch_schema(dsn) as (conn, schema):
        for name, value in SESSION_SETTINGS.items():
            conn.execute("SELECT set_config(%s, %s, false)", (name, value))
        results.update(server_facts(conn))

        log("wild sets: the Debian copyright files")
        wild, reading = wild_sets(quick, wild_directory)
        results["wild_reading"] = reading
        for number, chosen in enumerate(wild):
            texts = chosen.texts
            log(f"{chosen.name}: {len(texts):,} documents; exact truth")
            truth, info = measured_truth(texts)
            positives = {t: truth.codes(t) for t in THRESHOLDS}
            signatures = client_signatures(texts, [len(texts)])
            outcomes = measure_set(conn, schema, f"wild_{number}", texts, len(texts), positives,
                                   signatures, pair_budget, {})
            drop_table(conn, schema, f"wild_{number}")
            sets.append(SetResult(chosen.name, "wild", len(texts), megabytes(texts),
                                  truth_summary(info, truth, len(texts)), outcomes,
                                  chosen.description))

        log(f"building the {size_name} corpus at {', '.join(f'{n:,}' for n in wanted)}")
        corpus, ordered = nested_corpus(size_name, wanted)
        texts = [d.text for d in corpus]
        results["corpus"] = {
            "size": size_name, "seed": 3, "sizes": ordered,
            "originals": sum(d.origin is None for d in corpus),
            "copies_of_copies": sum(len(d.edits) > 1 for d in corpus),
        }  # fmt: skip
        log(f"exact truth of {len(texts):,} documents")
        truth, info = measured_truth(texts)
        log(f"  {truth.seconds:.0f} s, peak memory {info['peak_memory_gb_after']:.1f} GB")
        log("MinHash signatures and client fingerprints")
        signatures = client_signatures(texts, ordered)
        cut: dict[float, int] = {}
        largest = ordered[-1]
        for documents in ordered:
            log(f"corpus, first {documents:,} documents")
            positives = {t: prefix_positives(truth, documents, t) for t in THRESHOLDS}
            table = f"corpus_{documents}"
            outcomes = measure_set(conn, schema, table, texts, documents, positives,
                                   signatures, pair_budget, cut)
            for outcome in outcomes:
                log(f"  {outcome.method} {outcome.threshold}: {outcome.status},"
                    f" {outcome.seconds:.1f} s"
                    + (f", recall {outcome.scores.recall:.4f} F1 {outcome.scores.f1:.4f}"
                       if outcome.scores else ""))
            sets.append(SetResult(
                f"corpus, {documents:,} documents", "corpus", documents,
                megabytes(texts[:documents]), truth_summary(info, truth, documents), outcomes,
                summary=documents in (SIZES["full"], largest)))
            if documents != largest:
                drop_table(conn, schema, table)

        log(f"nearsim_similar_verified on {largest:,} documents")
        table = f"corpus_{largest}"
        exists = conn.execute("SELECT to_regclass(%s)", (f"{schema}.{table}",)).fetchone()
        if exists is None or exists[0] is None:  # nearsim was skipped at every threshold
            load_table(conn, schema, table, texts)
        qualified = f"{schema}.{table}"
        results["lookups"] = lookups(conn, qualified, texts, truth, count, lookup_timeout,
                                     lookup_budget, RADIUS_PATH)
        results["sketch_index"] = sketch_index(conn, schema, table, largest)
        results["lookups"] += lookups(conn, qualified, texts, truth, count, lookup_timeout,
                                      lookup_budget, SKETCH_PATH)

    results["sets"] = [s.as_json() for s in sets]
    results["curve"] = curve_points(results)
    results["summary"] = summary_rows(results)
    results["cut"] = cut_list(results)
    results["seconds"] = time.perf_counter() - started
    output_dir.mkdir(parents=True, exist_ok=True)
    results["figures"] = [draw_cost_curve(results, output_dir / FIGURE)]
    (output_dir / "verified.json").write_text(json.dumps(results, indent=1))
    (output_dir / "verified.md").write_text(markdown(results))
    log(f"wrote {output_dir} ({results['seconds']:.0f} s)")
    return results


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dsn", required=True, help="a database where nearsim can be created")
    parser.add_argument("--quick", action="store_true",
                        help="the small corpus at 250 and 400 documents, 40 copyright files")
    parser.add_argument("--output-dir", type=Path, default=DEFAULT_OUTPUT)
    parser.add_argument("--sizes", type=int, nargs="+",
                        help=f"corpus sizes of the cost curve (default {CURVE_SIZES})")
    parser.add_argument("--pair-budget", type=float, default=PAIR_BUDGET_SECONDS,
                        help="statement_timeout of one nearsim_pairs_verified, seconds")
    parser.add_argument("--lookups", type=int, help=f"lookups per threshold ({LOOKUPS})")
    parser.add_argument("--lookup-timeout", type=float, default=LOOKUP_TIMEOUT_SECONDS)
    parser.add_argument("--lookup-budget", type=float, default=LOOKUP_BUDGET_SECONDS)
    parser.add_argument("--wild-directory", type=Path, default=DOC_DIRECTORY,
                        help="where the <package>/copyright files are")
    args = parser.parse_args(argv)
    options = sys.argv[1:] if argv is None else list(argv)
    shown = [o for k, o in enumerate(options)  # the DSN may hold a password: not shown
             if o != "--dsn" and (k == 0 or options[k - 1] != "--dsn")
             and not o.startswith("--dsn=")]
    results = evaluate(args.dsn, args.quick, args.output_dir, args.sizes, args.pair_budget,
                       args.lookups, args.lookup_timeout, args.lookup_budget,
                       args.wild_directory,
                       " ".join(["python -m benchmarks.verified", *shown]))
    print(markdown(results))
    return 0


if __name__ == "__main__":
    sys.exit(run_main(main))
