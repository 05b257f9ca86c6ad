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
  ``nearsim_pairs_verified(tbl, min_similarity => t)``.  The cost at a
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
(seed 1), their texts asked with ``nearsim_similar_verified(tbl, text, t)``
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
"""

from __future__ import annotations

import argparse
import importlib.metadata
import json
import platform
import random
import resource
import sys
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import psycopg
from numpy.typing import NDArray
from psycopg import sql

from .common import SESSION_SETTINGS, cpu_model, enable_timed, log, scratch_schema, timer
from .corpus import CURVE_SIZES, SIZES, nested_corpus
from .pair_methods import (
    MINHASH_PERMUTATIONS,
    SEED_RADIUS,
    fingerprints,
    hamming_of_codes,
    lsh_candidates,
    minhash_signatures,
    radius_pairs,
)
from .scoring import THRESHOLDS, Scores, score
from .truth import Truth, pair_codes, similar_pairs
from .wild import DOC_DIRECTORY, WildSet, copyright_sets, read_copyright_files

__all__ = ["Outcome", "evaluate", "main", "markdown", "prefix_positives"]

Int64s = NDArray[np.int64]

TARGET_RECALL = 0.99
TARGET_F1 = 0.995
TARGET_P50_MS = 3.0
PAIR_BUDGET_SECONDS = 240.0
"""``statement_timeout`` of one ``nearsim_pairs_verified``: with it and the
lookups' budget, a slow search adds at most about 15 minutes to the run."""
LOOKUPS = 200
LOOKUP_TIMEOUT_SECONDS = 10.0
LOOKUP_BUDGET_SECONDS = 180.0
LOOKUP_SEED = 1
QUICK_SIZES = (250, 400)
QUICK_WILD_FILES = 40
QUICK_LOOKUPS = 20
SUMMARY_COLUMNS = ("measurement", "value", "baseline", "ratio", "target", "met")
DEFAULT_OUTPUT = Path(__file__).resolve().parent / "quality-results"
FIGURE = "verified-cost.png"

NEARSIM = "nearsim verified"
MINHASH = "MinHashLSH + estimate"
SIMHASH = f"simhash hamming<={SEED_RADIUS}"


# --------------------------------------------------------------------------
# Results


@dataclass
class Outcome:
    """One method at one threshold on one set."""

    method: str
    threshold: float
    documents: int
    status: str
    """``ok``, ``over budget`` (cut off; ``seconds`` is how long it ran) or ``skipped``."""
    phases: dict[str, float]
    """Seconds of each step; their sum is the cost."""
    scores: Scores | None = None
    notes: str = ""
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def seconds(self) -> float:
        return float(sum(self.phases.values()))

    def as_json(self) -> dict[str, Any]:
        result = asdict(self)
        result["seconds"] = self.seconds
        return result


@dataclass
class SetResult:
    """Every method at both thresholds on one set of documents."""

    name: str
    kind: str
    """``corpus`` or ``wild``."""
    documents: int
    megabytes: float
    truth: dict[str, Any]
    outcomes: list[Outcome]
    description: str = ""
    summary: bool = True
    """Whether its targets go into the summary (the curve's other sizes do not)."""

    def as_json(self) -> dict[str, Any]:
        return {"name": self.name, "kind": self.kind, "documents": self.documents,
                "megabytes": self.megabytes, "truth": self.truth,
                "description": self.description, "summary": self.summary,
                "outcomes": [o.as_json() for o in self.outcomes]}  # fmt: skip


def prefix_positives(truth: Truth, documents: int, threshold: float) -> Int64s:
    """Sorted pair codes (for ``documents``) of the truth's positives among its
    first ``documents`` documents."""
    chosen = (truth.second < documents) & (truth.s_r >= threshold)
    return np.sort(pair_codes(truth.first[chosen], truth.second[chosen], documents))


def peak_memory_gb() -> float:
    """The peak resident memory of this process so far (Linux reports KiB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024 / 1e9


def measured_truth(texts: Sequence[str]) -> tuple[Truth, dict[str, Any]]:
    """The exact truth of ``texts`` and what it cost."""
    before = peak_memory_gb()
    truth = similar_pairs(texts, keep=min(THRESHOLDS))
    return truth, {
        "documents": len(texts), "seconds": truth.seconds, "shared_pairs": truth.shared_pairs,
        "buckets": truth.buckets, "shingles": truth.shingles,
        "peak_memory_gb_before": before, "peak_memory_gb_after": peak_memory_gb(),
    }  # fmt: skip


# --------------------------------------------------------------------------
# nearsim in PostgreSQL


def load_table(conn: psycopg.Connection, schema: str, name: str,
               texts: Sequence[str]) -> dict[str, float]:
    """A table of the texts, enabled: seconds of each step."""
    table = sql.Identifier(schema, name)
    phases: dict[str, float] = {}
    with timer() as elapsed:
        conn.execute(sql.SQL("CREATE TABLE {} (id integer PRIMARY KEY, body text NOT NULL)")
                     .format(table))
        with conn.cursor() as cursor, cursor.copy(
            sql.SQL("COPY {} (id, body) FROM STDIN").format(table)
        ) as copy:
            for position, text in enumerate(texts):
                copy.write_row((position, text))
    phases["COPY"] = elapsed()
    enable_timed(conn, schema, name, phases)
    return phases


def drop_table(conn: psycopg.Connection, schema: str, name: str) -> None:
    """Disable and drop a table of :func:`load_table`, if there is one."""
    qualified = f"{schema}.{name}"
    if conn.execute("SELECT to_regclass(%s)", (qualified,)).fetchone() == (None,):
        return
    conn.execute("SELECT nearsim_disable(%s::regclass)", (qualified,))
    conn.execute(sql.SQL("DROP TABLE {}").format(sql.Identifier(schema, name)))


def set_timeout(conn: psycopg.Connection, seconds: float | None) -> None:
    if seconds is None:
        conn.execute("RESET statement_timeout")
    else:
        conn.execute(sql.SQL("SET statement_timeout = {}").format(
            sql.Literal(max(1, round(seconds * 1000)))))


def verified_pairs(conn: psycopg.Connection, qualified: str, threshold: float,
                   documents: int, budget: float) -> tuple[Int64s | None, float]:
    """Pair codes of ``nearsim_pairs_verified`` (None when cut off) and its seconds."""
    set_timeout(conn, budget)
    try:
        with timer() as elapsed:
            try:
                rows = conn.execute(
                    "SELECT a::integer, b::integer FROM nearsim_pairs_verified(%s::regclass,"
                    " min_similarity => %s)", (qualified, threshold)).fetchall()
            except psycopg.errors.QueryCanceled:
                rows = None
    finally:
        set_timeout(conn, None)
    if rows is None:
        return None, elapsed()
    first = np.array([r[0] for r in rows], dtype=np.int64)
    second = np.array([r[1] for r in rows], dtype=np.int64)
    return np.unique(pair_codes(first, second, documents)), elapsed()


def calibrated_radius(conn: psycopg.Connection, threshold: float) -> int | None:
    """``nearsim_radius(t)``, or None if the server has no such function."""
    try:
        with conn.transaction():
            row = conn.execute("SELECT nearsim_radius(%s)", (threshold,)).fetchone()
    except psycopg.Error:
        return None
    return None if row is None or row[0] is None else int(row[0])


# --------------------------------------------------------------------------
# One set


@dataclass
class Signatures:
    """What the client computes once for the largest set: MinHashes with their
    seconds up to each size, and fingerprints (for the radius, untimed)."""

    minhash_present: Int64s
    sketches: list[Any]
    minhash_seconds: dict[int, float]
    """Seconds of the MinHashes of the first N documents, for each size N."""
    print_present: Int64s
    prints: Int64s


def client_signatures(texts: Sequence[str], sizes: Sequence[int]) -> Signatures:
    presents: list[Int64s] = []
    sketches: list[Any] = []
    seconds: dict[int, float] = {}
    total = 0.0
    start = 0
    for size in sizes:
        with timer() as elapsed:
            present, part = minhash_signatures(texts[start:size])
        total += elapsed()
        seconds[size] = total
        presents.append(present + start)
        sketches.extend(part)
        start = size
    print_present, prints = fingerprints(texts)
    return Signatures(np.concatenate(presents), sketches, seconds, print_present, prints)


def measure_set(conn: psycopg.Connection, schema: str, table: str, texts: Sequence[str],
                documents: int, positives: dict[float, Int64s], signatures: Signatures,
                budget: float, cut: dict[float, int]) -> list[Outcome]:
    """nearsim verified, MinHashLSH and simhash on the first ``documents`` texts.

    ``cut`` maps a threshold to the size at which nearsim went over the
    budget: it is skipped at that threshold from then on (and added to here).
    """
    outcomes: list[Outcome] = []
    in_prints = signatures.print_present < documents
    present, prints = signatures.print_present[in_prints], signatures.prints[in_prints]

    with timer() as elapsed:
        codes, _ = radius_pairs(present, prints, SEED_RADIUS, documents)
        codes = np.sort(codes)
    for t in THRESHOLDS:
        outcomes.append(Outcome(SIMHASH, t, documents, "ok", {"pairs": elapsed()},
                                score(codes, positives[t]),
                                notes="client fingerprints (untimed) and all pairs within"
                                      f" {SEED_RADIUS} bits, unverified"))

    count = int(np.count_nonzero(signatures.minhash_present < documents))
    sketches = signatures.sketches[:count]
    for t in THRESHOLDS:
        with timer() as elapsed:
            candidates, estimate = lsh_candidates(signatures.minhash_present[:count], sketches,
                                                  t, documents)
        found = candidates[estimate >= t]
        outcomes.append(Outcome(
            MINHASH, t, documents, "ok",
            {"signatures": signatures.minhash_seconds[documents], "LSH": elapsed()},
            score(found, positives[t]),
            notes=f"datasketch, {MINHASH_PERMUTATIONS} permutations, LSH threshold {t};"
                  f" {len(candidates):,} candidates",
            extra={"candidates": len(candidates),
                   "candidate_scores": asdict(score(candidates, positives[t]))}))

    if all(t in cut for t in THRESHOLDS):
        for t in THRESHOLDS:
            outcomes.append(Outcome(NEARSIM, t, documents, "skipped", {},
                                    notes=f"over the budget at {cut[t]:,} documents"))
        return outcomes
    phases = load_table(conn, schema, table, texts[:documents])
    qualified = f"{schema}.{table}"
    for t in THRESHOLDS:
        if t in cut:
            outcomes.append(Outcome(NEARSIM, t, documents, "skipped", {},
                                    notes=f"over the budget at {cut[t]:,} documents"))
            continue
        pairs, seconds = verified_pairs(conn, qualified, t, documents, budget)
        query = {**phases, "nearsim_pairs_verified": seconds}
        if pairs is None:
            cut[t] = documents
            outcomes.append(Outcome(NEARSIM, t, documents, "over budget", query,
                                    notes=f"statement_timeout {budget:g} s: cut off after"
                                          f" {seconds:.1f} s",
                                    extra={"budget_seconds": budget}))
            continue
        extra: dict[str, Any] = {"budget_seconds": budget}
        radius = calibrated_radius(conn, t)
        notes = f"nearsim_pairs_verified(min_similarity => {t})"
        if radius is not None:
            distance = hamming_of_codes(positives[t], documents, present, prints)
            reachable = positives[t][distance <= radius]
            beyond = positives[t][distance > radius]
            within, outside = score(pairs, reachable), score(pairs, beyond)
            extra.update(radius=radius, positives_within_radius=len(reachable),
                         recall_within_radius=within.recall,
                         found_outside_radius=outside.true_positives)
            notes += (f"; calibrated radius {radius} bits (nearsim_radius): {len(reachable):,}"
                      f" of the {len(positives[t]):,} positives lie within it, found"
                      f" {within.true_positives:,} of them and {outside.true_positives:,} of"
                      f" the {len(beyond):,} outside it")
        outcomes.append(Outcome(NEARSIM, t, documents, "ok", query,
                                score(pairs, positives[t]), notes=notes, extra=extra))
    return outcomes


def megabytes(texts: Sequence[str]) -> float:
    return sum(len(t.encode()) for t in texts) / 1e6


def truth_summary(info: dict[str, Any], truth: Truth, documents: int) -> dict[str, Any]:
    return {**info, "positives": {
        str(t): len(prefix_positives(truth, documents, t)) for t in THRESHOLDS}}


# --------------------------------------------------------------------------
# Lookups


def lookups(conn: psycopg.Connection, qualified: str, texts: Sequence[str], truth: Truth,
            count: int, timeout: float, budget: float, path: str) -> list[dict[str, Any]]:
    """``nearsim_similar_verified`` for the texts of ``count`` random documents.

    ``path`` names where the candidates come from (the table's indexes decide).
    """
    documents = len(texts)
    asked = random.Random(LOOKUP_SEED).sample(range(documents), min(count, documents))
    statement = ("SELECT key::integer FROM nearsim_similar_verified(%s::regclass, %s, %s)")
    results = []
    for t in THRESHOLDS:
        wanted = np.array(asked, dtype=np.int64)
        chosen = (truth.s_r >= t) & (np.isin(truth.first, wanted) | np.isin(truth.second, wanted))
        partners: dict[int, set[int]] = {q: set() for q in asked}
        for a, b in zip(truth.first[chosen].tolist(), truth.second[chosen].tolist(),
                        strict=True):
            if a in partners:
                partners[a].add(b)
            if b in partners:
                partners[b].add(a)
        set_timeout(conn, timeout)
        seconds: list[float] = []
        over = 0
        found = expected = hit = 0
        started = time.perf_counter()
        try:
            try:  # a warm-up: the first call of a session imports what the search needs
                conn.execute(statement, (qualified, texts[asked[0]], t), prepare=True).fetchall()
            except psycopg.errors.QueryCanceled:
                pass
            for query in asked:
                if time.perf_counter() - started > budget:
                    break
                with timer() as elapsed:
                    try:
                        rows = conn.execute(statement, (qualified, texts[query], t),
                                            prepare=True).fetchall()
                    except psycopg.errors.QueryCanceled:
                        rows = None
                seconds.append(elapsed())
                if rows is None:
                    over += 1
                    continue
                keys = {r[0] for r in rows} - {query}
                found += len(keys)
                expected += len(partners[query])
                hit += len(keys & partners[query])
        finally:
            set_timeout(conn, None)
        answered = Scores.of_counts(found, expected, hit)
        milliseconds = np.array(seconds) * 1000 if seconds else np.array([np.nan])
        results.append({
            "threshold": t, "path": path, "documents": documents, "asked": len(asked),
            "timed": len(seconds),
            "over_timeout": over, "timeout_seconds": timeout, "budget_seconds": budget,
            "p50_ms": float(np.percentile(milliseconds, 50)),
            "p90_ms": float(np.percentile(milliseconds, 90)),
            "mean_found": found / max(1, len(seconds) - over),
            "answers": asdict(answered),
        })
        log(f"  lookups at {t} ({path}): {len(seconds)} timed,"
            f" p50 {results[-1]['p50_ms']:.2f} ms")
    return results


RADIUS_PATH = "rotation index, calibrated radius"
SKETCH_PATH = "sketch index"


def sketch_index(conn: psycopg.Connection, schema: str, table: str,
                 documents: int) -> dict[str, float]:
    """The sketch index of the table (GIN over nearsim_sketch(body)): seconds and size."""
    index = sql.Identifier(schema, f"{table}_sketch")
    with timer() as elapsed:
        conn.execute(sql.SQL("CREATE INDEX {} ON {} USING gin (nearsim_sketch(body))").format(
            sql.Identifier(f"{table}_sketch"), sql.Identifier(schema, table)))
        conn.execute(sql.SQL("ANALYZE {}").format(sql.Identifier(schema, table)))
    seconds = elapsed()
    row = conn.execute("SELECT pg_relation_size(%s::regclass)",
                       (index.as_string(conn),)).fetchone()
    size = float(row[0]) if row else 0.0
    log(f"  sketch index: {seconds:.1f} s, {size / documents:.0f} bytes per document")
    return {"seconds": seconds, "bytes_per_document": size / documents}


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
                    "recall": TARGET_RECALL, "f1": TARGET_F1, "p50_ms": TARGET_P50_MS},
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


# --------------------------------------------------------------------------
# Targets, figure and Markdown


def _find(set_json: dict[str, Any], method: str, threshold: float) -> dict[str, Any]:
    return next(o for o in set_json["outcomes"]
                if o["method"] == method and o["threshold"] == threshold)


def seconds_text(outcome: dict[str, Any]) -> str:
    if outcome["status"] == "skipped":
        return "not run"
    if outcome["status"] == "over budget":  # what it ran before it was cut off: a lower bound
        return f"over {outcome['seconds']:.0f} s"
    return f"{outcome['seconds']:.1f} s"


def summary_rows(results: dict[str, Any]) -> list[list[str]]:
    """The targets, in the columns of benchmarks.run's summary."""
    rows: list[list[str]] = []
    for chosen in (s for s in results["sets"] if s["summary"]):
        for t in THRESHOLDS:
            nearsim, minhash = _find(chosen, NEARSIM, t), _find(chosen, MINHASH, t)
            where = f"{chosen['name']}, S_R >= {t}"
            if nearsim["status"] == "ok":
                ratio = nearsim["seconds"] / minhash["seconds"] if minhash["seconds"] else 0.0
                rows.append([f"verified pairs cost, {where}", f"{nearsim['seconds']:.1f} s",
                             f"{minhash['seconds']:.1f} s (MinHashLSH)", f"{ratio:.2f}x",
                             "<= MinHashLSH", "yes" if ratio <= 1.0 else "no"])
                scores = nearsim["scores"]
                met = scores["recall"] >= TARGET_RECALL and scores["f1"] >= TARGET_F1
                mh = minhash["scores"]
                rows.append([f"verified pairs recall / F1, {where}",
                             f"{scores['recall']:.4f} / {scores['f1']:.4f}",
                             f"{mh['recall']:.4f} / {mh['f1']:.4f} (MinHashLSH)", "-",
                             f">= {TARGET_RECALL} / >= {TARGET_F1}", "yes" if met else "no"])
            else:
                rows.append([f"verified pairs cost, {where}", seconds_text(nearsim)
                             + (f" ({nearsim['notes']})" if nearsim["status"] == "skipped"
                                else ""),
                             f"{minhash['seconds']:.1f} s (MinHashLSH)", "-", "<= MinHashLSH",
                             "no"])
                rows.append([f"verified pairs recall / F1, {where}", "not measured",
                             "-", "-", f">= {TARGET_RECALL} / >= {TARGET_F1}", "no"])
    for lookup in results.get("lookups", []):
        enough = lookup["timed"] >= min(LOOKUPS, lookup["asked"]) and not lookup["over_timeout"]
        met = enough and lookup["p50_ms"] <= TARGET_P50_MS
        rows.append([f"nearsim_similar_verified p50, {lookup['documents']:,} documents, S_R >="
                     f" {lookup['threshold']}, {lookup.get('path', RADIUS_PATH)}",
                     f"{lookup['p50_ms']:.2f} ms (p90 {lookup['p90_ms']:.2f}; {lookup['timed']}"
                     f" queries, {lookup['over_timeout']} over the timeout)", "-", "-",
                     f"<= {TARGET_P50_MS:g} ms", "yes" if met else "no"])
    return rows


def cut_list(results: dict[str, Any]) -> list[str]:
    """What the budgets cut, one sentence each."""
    cut = []
    for chosen in results["sets"]:
        for o in chosen["outcomes"]:
            if o["status"] != "ok":
                cut.append(f"{o['method']} at S_R >= {o['threshold']} on {chosen['name']}:"
                           f" {seconds_text(o)} ({o['notes']})")
    for lookup in results.get("lookups", []):
        if lookup["timed"] < lookup["asked"] or lookup["over_timeout"]:
            cut.append(f"nearsim_similar_verified at S_R >= {lookup['threshold']}:"
                       f" {lookup['timed']} of {lookup['asked']} queries timed within"
                       f" {lookup['budget_seconds']:g} s, {lookup['over_timeout']} over the"
                       f" {lookup['timeout_seconds']:g} s timeout")
    return cut


def curve_points(results: dict[str, Any]) -> list[dict[str, Any]]:
    """Per corpus size and threshold: nearsim's and MinHashLSH's seconds."""
    points = []
    for chosen in (s for s in results["sets"] if s["kind"] == "corpus"):
        for t in THRESHOLDS:
            nearsim, minhash = _find(chosen, NEARSIM, t), _find(chosen, MINHASH, t)
            points.append({"documents": chosen["documents"], "threshold": t,
                           "nearsim_status": nearsim["status"],
                           "nearsim_seconds": nearsim["seconds"],
                           "nearsim_phases": nearsim["phases"],
                           "minhash_seconds": minhash["seconds"],
                           "minhash_phases": minhash["phases"]})  # fmt: skip
    return points


def draw_cost_curve(results: dict[str, Any], path: Path) -> str:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import NullLocator

    points = results["curve"]
    budget = results["budgets"]["pair_seconds"]
    figure, axes = plt.subplots(1, len(THRESHOLDS), figsize=(11, 4.2), sharey=True)
    for axis, t in zip(axes, THRESHOLDS, strict=True):
        chosen = [p for p in points if p["threshold"] == t]
        sizes = [p["documents"] for p in chosen]
        axis.plot(sizes, [p["minhash_seconds"] for p in chosen], marker="o",
                  color="tab:orange", label="MinHashLSH + estimate (signatures + LSH)")
        done = [p for p in chosen if p["nearsim_status"] == "ok"]
        axis.plot([p["documents"] for p in done], [p["nearsim_seconds"] for p in done],
                  marker="o", color="tab:blue",
                  label="nearsim verified (COPY + enable + pairs)")
        over = [p for p in chosen if p["nearsim_status"] == "over budget"]
        if over:
            axis.plot([p["documents"] for p in over], [p["nearsim_seconds"] for p in over],
                      linestyle="none", marker="^", markersize=10, color="tab:blue",
                      label=f"nearsim cut off (pairs query over {budget:g} s)")
        skipped = [p["documents"] for p in chosen if p["nearsim_status"] == "skipped"]
        for size in skipped:
            axis.axvline(size, color="tab:blue", linestyle=":", linewidth=1)
        axis.set_xscale("log")
        axis.set_yscale("log")
        axis.set_xticks(sizes, [f"{n:,}" for n in sizes])
        axis.xaxis.set_minor_locator(NullLocator())
        axis.set_title(f"all pairs at S_R >= {t}"
                       + (" (dotted: nearsim not run)" if skipped else ""))
        axis.set_xlabel("documents (evaluation corpus)")
        axis.grid(True, which="both", alpha=0.3)
    axes[0].set_ylabel("seconds, one core (log)")
    axes[0].legend(loc="upper left", fontsize="small")
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    plt.close(figure)
    return str(path)


def _number(value: float) -> str:
    return f"{value:.4f}"


def _scores_cells(outcome: dict[str, Any]) -> list[str]:
    s = outcome["scores"]
    if s is None:
        return ["-"] * 5
    return [f"{s['predicted']:,}", f"{s['true_positives']:,}", _number(s["precision"]),
            _number(s["recall"]), _number(s["f1"])]


def _table(header: Sequence[str], rows: Sequence[Sequence[object]]) -> list[str]:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return lines


def _phases(outcome: dict[str, Any]) -> str:
    return " + ".join(f"{name} {seconds:.1f}" for name, seconds in outcome["phases"].items())


def markdown(results: dict[str, Any]) -> str:
    budgets = results["budgets"]
    reading = results["wild_reading"]
    skipped = ", ".join(f"{n} {r}" for r, n in reading["skipped"].items() if n)
    lines = [
        f"Written by `{results['command']}` (`make bench`, or `make bench-verified` alone;"
        f" {results['mode']} run, {results['seconds']:.0f} s, started {results['started']}):"
        f" nearsim"
        f" {results['nearsim']} (extension {results['nearsim_extension']}), PostgreSQL"
        f" {results['postgresql']}, datasketch {results['datasketch']}, Python"
        f" {results['python']}; {results['cpu']}. nearsim and MinHashLSH ran on the same"
        " documents in this run, one after the other, each on one core; benchmarks/verified.py"
        " says how each number is measured. nearsim verified = CREATE TABLE + COPY of the"
        " texts, `nearsim_enable`, ANALYZE and one `nearsim_pairs_verified(tbl, min_similarity"
        f" => t)` (statement_timeout {budgets['pair_seconds']:g} s); MinHashLSH + estimate ="
        f" datasketch MinHash of the same word 3-shingles ({MINHASH_PERMUTATIONS} permutations),"
        " MinHashLSH at threshold t, and the candidates whose estimate is at least t. Positives:"
        " pairs whose exact S_R is at least t.",
        "",
        "### Targets",
        "",
        *_table(["measurement", "value", "baseline", "ratio", "target", "met?"],
                results["summary"]),
        "",
        "### The sets",
        "",
        f"Real near-duplicates (benchmarks/wild.py): the files"
        f" {reading['directory']}/*/copyright of this machine, {reading['paths']:,} paths,"
        f" {reading['files']:,} distinct files read ({skipped}; {len(reading['not_utf8'])} not"
        f" UTF-8, decoded with replacement characters); list digest"
        f" `{reading['digest'][:16]}`, {reading['packages']:,} packages, versions digest"
        f" `{reading['packages_digest'][:16]}` (verified.json lists them). Licence texts"
        " repeated under each package's own headers; the paragraph set holds each distinct"
        " paragraph of at least 40 words once. The corpus (benchmarks/corpus.py, seed 3):"
        f" {results['corpus']['originals']:,} originals and their edited copies, each size the"
        " first N documents of the largest.",
        "",
        *_table(["set", "documents", "MB", "positives S_R >= 0.8", "positives S_R >= 0.5",
                 "truth seconds", "peak memory of the process"],
                [[s["name"], f"{s['documents']:,}", f"{s['megabytes']:.1f}",
                  f"{s['truth']['positives']['0.8']:,}", f"{s['truth']['positives']['0.5']:,}",
                  f"{s['truth']['seconds']:.1f}",
                  f"{s['truth']['peak_memory_gb_after']:.1f} GB"]
                 for s in results["sets"]]),
        "",
        "The corpus's truth is computed once, on the largest size (its seconds and memory are"
        " on every corpus row).",
        "",
        "### Precision, recall, F1 and cost",
        "",
    ]
    rows = []
    for chosen in results["sets"]:
        for t in THRESHOLDS:
            for outcome in (o for o in chosen["outcomes"] if o["threshold"] == t):
                rows.append([chosen["name"], t, outcome["method"], seconds_text(outcome),
                             _phases(outcome) or "-", *_scores_cells(outcome)])
    lines += _table(["set", "S_R >=", "method", "seconds", "steps (s)", "predicted",
                     "true pos.", "precision", "recall", "F1"], rows)
    lines += ["", *(f"- {s['name']}, {o['method']} at {o['threshold']}: {o['notes']}"
                    for s in results["sets"] for o in s["outcomes"]
                    if o["method"] == NEARSIM and o["notes"]), ""]
    lines += [
        "### Cost curve",
        "",
        f"![verified pairs against MinHashLSH, seconds by documents]({FIGURE})",
        "",
        *_table(["documents", "S_R >=", "nearsim verified", "MinHashLSH + estimate",
                 "nearsim / MinHashLSH"],
                [[f"{p['documents']:,}", p["threshold"],
                  f"{p['nearsim_seconds']:.1f} s" if p["nearsim_status"] == "ok" else (
                      f"over {budgets['pair_seconds']:g} s" if p["nearsim_status"]
                      == "over budget" else "not run"),
                  f"{p['minhash_seconds']:.1f} s",
                  f"{p['nearsim_seconds'] / p['minhash_seconds']:.2f}"
                  if p["nearsim_status"] == "ok" and p["minhash_seconds"] else "-"]
                 for p in results["curve"]]),
        "",
    ]
    if results.get("lookups"):
        lines += [
            f"### nearsim_similar_verified at {results['lookups'][0]['documents']:,} documents",
            "",
            f"The texts of {results['lookups'][0]['asked']} documents drawn at random, asked"
            " as a prepared statement after one warm-up query, each under a statement_timeout"
            f" of {budgets['lookup_timeout_seconds']:g} s (at most"
            f" {budgets['lookup_budget_seconds']:g} s per threshold); answers scored against"
            " the truth, the query document left out.  First on the enabled table as it is"
            " (candidates from the rotation index within the calibrated radius), then after"
            " `CREATE INDEX ON tbl USING gin (nearsim_sketch(body))`"
            + (f" ({results['sketch_index']['seconds']:.1f} s with ANALYZE,"
               f" {results['sketch_index']['bytes_per_document']:.0f} bytes per document)"
               if results.get("sketch_index") else "")
            + ", which gives candidates by S_R at any distance.",
            "",
            *_table(["candidates from", "S_R >=", "queries timed", "over the timeout", "p50 ms",
                     "p90 ms", "documents found (mean)", "precision", "recall"],
                    [[lk.get("path", RADIUS_PATH), lk["threshold"], lk["timed"],
                      lk["over_timeout"], f"{lk['p50_ms']:.2f}",
                      f"{lk['p90_ms']:.2f}", f"{lk['mean_found']:.1f}",
                      _number(lk["answers"]["precision"]), _number(lk["answers"]["recall"])]
                     for lk in results["lookups"]]),
            "",
        ]
    lines += ["### What the budgets cut", ""]
    lines += [f"- {c}" for c in results["cut"]] or ["Nothing: every query finished."]
    lines.append("")
    return "\n".join(lines)


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
    sys.exit(main())
