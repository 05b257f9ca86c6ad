"""One set of documents in benchmarks/verified.py: every method at both thresholds.

nearsim's verified search (a table loaded with ``COPY``, enabled, and one
``nearsim_pairs_verified`` under a ``statement_timeout`` per threshold),
datasketch's MinHashLSH plus estimate and the seeds' ``hamming <= 6`` on the
first N texts of a set, each scored against the exact truth: an
:class:`Outcome` per method and threshold, with the seconds of its steps.
benchmarks/verified.py says what each figure includes.
"""

from __future__ import annotations

import resource
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np
import psycopg
from numpy.typing import NDArray
from psycopg import sql

from .common import enable_timed, reset_statement_timeout, timer
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

__all__ = ["MINHASH", "NEARSIM", "SIMHASH", "Outcome", "SetResult", "measure_set",
           "prefix_positives"]

Int64s = NDArray[np.int64]

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
    """Set the session's statement_timeout to ``seconds``, or reset it (None)."""
    if seconds is None:
        reset_statement_timeout(conn)
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
                    " min_similarity => %s, measure => 's_r')", (qualified, threshold)).fetchall()
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
        notes = f"nearsim_pairs_verified(min_similarity => {t}, measure => 's_r')"
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
