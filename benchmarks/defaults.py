"""Which measure and threshold catch lightly edited copies: the measurements behind the defaults.

    .venv/bin/python -m benchmarks.defaults [--size small|full] [--jobs N] [--output-dir DIR]

The corpus is benchmarks/corpus.py's (``full``, 20,500 documents, by
default; ``small`` for a quick run).  Every document records the edits that
made it from its original, and how much text each one changed (``amounts``),
so which pairs *should* be called near-duplicates is known without asking
any measure.

**Light and heavy.**  Two documents of one family are joined by a path in
the family tree: up from one to the copy they both descend from, down to
the other.  The pair's *change* is the sum of the amounts of the edits on
that path (each the share of text the edit inserted, deleted or changed).
A pair is

* *light* when its change is at most :data:`LIGHT_CHANGE` (15 %): typos
  (1 to 5 words) and OCR noise (under 1 % of the characters) always are;
  a reply, a forwarded-message header or publisher boilerplate are when
  they add at most 15 % to the text (nine in ten do; the others are short
  texts under a long header); insertions and deletions of at most 15 %;
  and copies of copies while the edits on the way add up to no more.  A
  reader who got both would say "the same document, lightly edited": that
  is what the defaults must catch.  The path makes a document light with
  its parent, with its original, and with its siblings when their edits
  together stay light: two copies of one memo with a few typos each are as
  much near-duplicates of each other as of the memo.
* *heavy* when the change is above :data:`HEAVY_CHANGE` (30 %), e.g. half
  the text deleted or inserted: a different document that shares text.
* *in between* (more than 15 %, at most 30 %) is scored neither way in the
  main table: whether a fifth of a text deleted is still "the same
  document" is the user's call, and a threshold should not be judged by
  it.  Counted as negatives instead, they give the *strict precision*
  column.

Pairs of different families are negatives too.

**Positives** are all light pairs; **negatives** every heavy or unrelated
pair that some measure puts at 0.5 or above.  The *candidates* are found by
an exact sparse join of the word 3-shingle sets
(:func:`benchmarks.truth.intersections`), which gives S_R and containment of
every pair that shares a shingle; the pairs at 0.5 or above by either are
kept, and so are the pairs whose shingle sets share at least
:data:`CANDIDATE_OVERLAP` of the larger one: only those can reach 0.5 by S_L
(half the longer text in common passages of at least 5 words, each of which
brings at least 3 shingles per 5 words, so 0.3 of the larger set), S_J
(<= S_L) or their information forms.  The costly measures
(:func:`nearsim.core.measures.compare`, Python) are computed for those
pairs, every light pair and every (document, parent) pair; the test suite
checks by brute force on the small corpus that no other pair reaches 0.5
by any measure.  Recall counts the light pairs that are not candidates as
missed.

For each measure of :data:`nearsim.core.measures.VERIFIED_MEASURES` and each
threshold 0.5, 0.55 ... 0.95 it reports recall and precision, and the
recall of a verified search that takes its candidates from the rotation
index within the radius calibrated for that threshold (the server's
``nearsim_similar_verified`` without a sketch index, and
``nearsim_pairs_verified`` by every measure but S_R); per edit kind, the
distribution of each measure between a document and its parent; and the
cost of S_R and of ``compare`` (S_L) per pair, measured in the same run.

Writes ``defaults.json`` and ``defaults.md`` (the section of
docs/BENCHMARKS.md) into the output directory (default benchmarks/results/).
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import sys
import time
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import psycopg
from numpy.typing import NDArray
from psycopg import sql

import nearsim
from nearsim.core.calibration import radius_for
from nearsim.core.measures import (
    DEFAULT_MEASURE,
    DEFAULT_MIN_SIMILARITY,
    VERIFIED_MEASURES,
    compare,
    set_resemblance,
    word_shingles,
)
from nearsim.core.text import tokens

from .common import run_main, scratch_schema, timer
from .corpus import SIZES, Document, build_corpus
from .truth import intersections, shingle_matrix

__all__ = [
    "CANDIDATE_OVERLAP", "HEAVY_CHANGE", "LIGHT_CHANGE", "THRESHOLDS", "Pairs", "candidates",
    "evaluate", "family_pairs", "markdown", "measure_pairs", "sql_defaults", "sweep",
]  # fmt: skip

Int64s = NDArray[np.int64]
Floats = NDArray[np.float64]

LIGHT_CHANGE = 0.15
"""A pair whose edits change at most this share of the text is light (module docstring)."""
HEAVY_CHANGE = 0.30
"""A pair whose edits change more than this is heavy."""
CANDIDATE_OVERLAP = 0.25
"""Pairs sharing at least this share of the larger shingle set get ``compare`` (S_L...)."""
THRESHOLDS = tuple(round(0.5 + 0.05 * k, 2) for k in range(10))  # 0.50 .. 0.95
FINE_THRESHOLDS = tuple(round(0.8 + 0.01 * k, 2) for k in range(13))  # 0.80 .. 0.92
"""Where the targets are met, in finer steps, for :data:`FINE_MEASURES`."""
FINE_MEASURES = ("s_l", "s_j")
TARGET_RECALL = 0.95
TARGET_PRECISION = 0.98
PERCENTILES = (5, 25, 50, 75, 95)
DISTRIBUTION_MEASURES = ("s_r", "s_l", "containment", "s_j", "information_s_l")
SCREEN = 0.5
"""The S_R a pair needs before the client measures its S_L (the composed search)."""
TIMED_PAIRS = 300
CORPUS_SEED = 3
DEFAULT_OUTPUT = Path(__file__).resolve().parent / "results"

LIGHT, BETWEEN, HEAVY, UNRELATED = "light", "between", "heavy", "unrelated"


def log(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


# --------------------------------------------------------------------------
# What each pair is


def _ancestry(corpus: Sequence[Document]) -> list[tuple[str, ...]]:
    """Each document's chain of ids from its original down to itself."""
    position = {d.id: i for i, d in enumerate(corpus)}
    chains: list[tuple[str, ...]] = []
    for document in corpus:  # a parent always comes before its copies
        parent = document.parent
        chains.append((document.id,) if parent is None else (*chains[position[parent]],
                                                              document.id))
    return chains


def change_of(a: Document, chain_a: Sequence[str], b: Document, chain_b: Sequence[str]) -> float:
    """The summed amounts of the edits on the family-tree path between two documents."""
    common = 0
    while common < min(len(chain_a), len(chain_b)) and chain_a[common] == chain_b[common]:
        common += 1
    # chain[k] is the document after k edits: edits common.. lead away from the shared copy
    return float(sum(a.amounts[common - 1:]) + sum(b.amounts[common - 1:]))


def kind_of(change: float) -> str:
    if change <= LIGHT_CHANGE + 1e-9:
        return LIGHT
    return HEAVY if change > HEAVY_CHANGE + 1e-9 else BETWEEN


def family_pairs(corpus: Sequence[Document]) -> dict[tuple[int, int], float]:
    """The change (see :func:`change_of`) of every pair i < j of one family, by positions."""
    chains = _ancestry(corpus)
    families: dict[str, list[int]] = defaultdict(list)
    for index, document in enumerate(corpus):
        families[document.origin or document.id].append(index)
    result: dict[tuple[int, int], float] = {}
    for members in families.values():
        for x, i in enumerate(members):
            for j in members[x + 1:]:
                result[(i, j)] = change_of(corpus[i], chains[i], corpus[j], chains[j])
    return result


# --------------------------------------------------------------------------
# Candidates and measures


@dataclass(frozen=True)
class Candidates:
    """Pairs i < j sharing shingles, with their set measures, from the sparse join."""

    first: Int64s
    second: Int64s
    s_r: Floats
    containment: Floats
    word_measures: NDArray[np.bool_]
    """Pairs whose shingle sets share at least :data:`CANDIDATE_OVERLAP` of the larger:
    only these can reach 0.5 by S_L, S_J or their information forms."""

    def pairs(self) -> list[tuple[int, int]]:
        return list(zip(self.first.tolist(), self.second.tolist(), strict=True))


def candidates(texts: Sequence[str], overlap: float = CANDIDATE_OVERLAP,
               tokenisation: int = 1) -> Candidates:
    """Every pair i < j that reaches 0.5 by some measure, and more (module docstring).

    S_R and containment are exact set measures of the intersections, computed
    here for every pair that shares a shingle (the same divisions as
    :func:`nearsim.core.measures.compare`, so the floats are identical); a
    pair is kept when either is at least 0.5 or when its shingle sets share at
    least ``overlap`` of the larger one.
    """
    matrix = shingle_matrix(texts, tokenisation)
    sizes = np.diff(matrix.indptr).astype(np.int64)
    words = np.array([sum(1 for _ in tokens(text, tokenisation)) for text in texts],
                     dtype=np.int64)
    parts: list[tuple[Int64s, Int64s, Floats, Floats, NDArray[np.bool_]]] = []
    for first, second, common in intersections(matrix):
        s_r = common / (sizes[first] + sizes[second] - common)
        first_in_second = common / sizes[first]
        second_in_first = common / sizes[second]
        containment = np.where(
            words[first] == words[second], np.maximum(first_in_second, second_in_first),
            np.where(words[first] < words[second], first_in_second, second_in_first))
        wide = common >= overlap * np.maximum(sizes[first], sizes[second])
        kept = wide | (s_r >= 0.5 - 1e-12) | (containment >= 0.5 - 1e-12)
        parts.append((first[kept], second[kept], s_r[kept], containment[kept], wide[kept]))
    if not parts:
        empty = np.empty(0, dtype=np.int64)
        return Candidates(empty, empty, empty.astype(np.float64), empty.astype(np.float64),
                          empty.astype(bool))
    return Candidates(*(np.concatenate([part[k] for part in parts]) for k in range(5)))


_TEXTS: Sequence[str] = ()


def _measured(pair: tuple[int, int]) -> tuple[float, ...]:
    found = compare(_TEXTS[pair[0]], _TEXTS[pair[1]])
    return tuple(float(getattr(found, m)) for m in VERIFIED_MEASURES)


def measure_pairs(texts: Sequence[str], pairs: Sequence[tuple[int, int]],
                  jobs: int = 1) -> Floats:  # fmt: skip
    """The :data:`VERIFIED_MEASURES` of each pair (rows) by ``compare`` (columns in order)."""
    global _TEXTS
    _TEXTS = texts
    try:
        if jobs > 1:  # fork: the workers see the texts without pickling them
            context = multiprocessing.get_context("fork")
            with context.Pool(jobs) as pool:
                rows = pool.map(_measured, pairs, chunksize=64)
        else:
            rows = [_measured(pair) for pair in pairs]
    finally:
        _TEXTS = ()
    return np.array(rows, dtype=np.float64).reshape(len(pairs), len(VERIFIED_MEASURES))


def hamming_distances(texts: Sequence[str], pairs: Sequence[tuple[int, int]]) -> Int64s:
    """Hamming distance of each pair's default-profile fingerprints (65: one has none)."""
    prints = nearsim.simhash_many(list(texts))
    distances = np.full(len(pairs), 65, dtype=np.int64)
    for k, (i, j) in enumerate(pairs):
        a, b = prints[i], prints[j]
        if a is not None and b is not None:
            distances[k] = ((a ^ b) & ((1 << 64) - 1)).bit_count()
    return distances


# --------------------------------------------------------------------------
# Scores


@dataclass(frozen=True)
class Pairs:
    """The measured pairs: positions, measures, kinds, distances."""

    first: Int64s
    second: Int64s
    values: Floats  # rows: pairs; columns: VERIFIED_MEASURES
    kinds: list[str]  # light, between, heavy, unrelated
    distances: Int64s
    light_total: int  # every light pair of the corpus, measured or not
    sources: list[str]  # of each document of the corpus: kjv, license, man

    def column(self, measure: str) -> Floats:
        values: Floats = self.values[:, VERIFIED_MEASURES.index(measure)]
        return values


def sweep(pairs: Pairs, thresholds: Sequence[float] = THRESHOLDS,
          measures: Sequence[str] = VERIFIED_MEASURES) -> dict[str, list[dict[str, Any]]]:
    """Recall and precision of each measure at each threshold (module docstring)."""
    kinds = np.array(pairs.kinds)
    light, between = kinds == LIGHT, kinds == BETWEEN
    s_r = pairs.column("s_r")
    result: dict[str, list[dict[str, Any]]] = {}
    for measure in measures:
        values = pairs.column(measure)
        rows = []
        for threshold in thresholds:
            predicted = values >= threshold - 1e-12
            true_positives = int(np.count_nonzero(predicted & light))
            in_between = int(np.count_nonzero(predicted & between))
            false_positives = int(np.count_nonzero(predicted)) - true_positives - in_between
            scored = true_positives + false_positives
            radius = radius_for(threshold)
            within = predicted & (pairs.distances <= radius)
            screened = predicted & (s_r >= SCREEN - 1e-12)
            rows.append({
                "threshold": threshold,
                "predicted": int(np.count_nonzero(predicted)),
                "true_positives": true_positives,
                "false_positives": false_positives,
                "between": in_between,
                "recall": true_positives / pairs.light_total if pairs.light_total else 1.0,
                "precision": true_positives / scored if scored else 1.0,
                "strict_precision": (true_positives / (scored + in_between)
                                     if scored + in_between else 1.0),
                "radius": radius,
                "recall_within_radius": (int(np.count_nonzero(within & light))
                                         / pairs.light_total if pairs.light_total else 1.0),
                "recall_screened": (int(np.count_nonzero(screened & light))
                                    / pairs.light_total if pairs.light_total else 1.0),
                "precision_screened": _share(int(np.count_nonzero(screened & light)),
                                             int(np.count_nonzero(screened & ~between))),
                "false_positives_by_source": _sources(pairs, predicted & ~light & ~between),
            })  # fmt: skip
        result[measure] = rows
    return result


def _share(part: int, whole: int) -> float:
    return part / whole if whole else 1.0


def _sources(pairs: Pairs, chosen: NDArray[np.bool_]) -> dict[str, int]:
    """How many of the chosen pairs are heavy within a family, or unrelated, by source."""
    counts: dict[str, int] = defaultdict(int)
    for k in np.flatnonzero(chosen).tolist():
        if pairs.kinds[k] == HEAVY:
            counts["heavy"] += 1
        else:
            names = sorted({pairs.sources[int(pairs.first[k])],
                            pairs.sources[int(pairs.second[k])]})
            counts["unrelated " + "/".join(names)] += 1
    return dict(sorted(counts.items()))


def best_thresholds(table: dict[str, list[dict[str, Any]]]) -> dict[str, dict[str, Any]]:
    """Per measure: the threshold of highest recall among those with precision >= target."""
    best: dict[str, dict[str, Any]] = {}
    for measure, rows in table.items():
        good = [r for r in rows if r["precision"] >= TARGET_PRECISION]
        if good:
            chosen = max(good, key=lambda r: (r["recall"], r["threshold"]))
            best[measure] = {**chosen, "meets": chosen["recall"] >= TARGET_RECALL}
    return best


def distributions(corpus: Sequence[Document], pairs: Pairs) -> list[dict[str, Any]]:
    """Per edit kind (insertions and deletions by amount), percentiles of each measure
    between a document and its parent."""
    index = {(int(a), int(b)): k for k, (a, b) in enumerate(zip(pairs.first, pairs.second,
                                                                strict=True))}
    position = {d.id: i for i, d in enumerate(corpus)}
    groups: dict[str, list[int]] = defaultdict(list)
    for i, document in enumerate(corpus):
        if document.parent is None:
            continue
        kind = document.kind or ""
        if kind in ("insertion", "deletion"):
            kind += " <= 15%" if document.amount <= LIGHT_CHANGE else (
                " 15-30%" if document.amount <= HEAVY_CHANGE else " > 30%")
        j = position[document.parent]
        groups[kind].append(index[(min(i, j), max(i, j))])
    order = ("typos", "ocr", "reply", "forward", "syndication", "deletion <= 15%",
             "insertion <= 15%", "deletion 15-30%", "insertion 15-30%", "deletion > 30%",
             "insertion > 30%")
    rows = []
    for kind in order:
        members = groups.get(kind, [])
        if not members:
            continue
        row: dict[str, Any] = {"kind": kind, "pairs": len(members)}
        for measure in DISTRIBUTION_MEASURES:
            values = pairs.column(measure)[members]
            row[measure] = [round(float(np.percentile(values, p)), 3) for p in PERCENTILES]
        rows.append(row)
    return rows


def timings(texts: Sequence[str], sample: Sequence[tuple[int, int]]) -> dict[str, float]:
    """Milliseconds per pair: S_R of the texts (shingled each time) against ``compare``."""
    started = time.perf_counter()
    for i, j in sample:
        set_resemblance(set(word_shingles(texts[i])), set(word_shingles(texts[j])))
    s_r = time.perf_counter() - started
    started = time.perf_counter()
    for i, j in sample:
        compare(texts[i], texts[j])
    s_l = time.perf_counter() - started
    count = max(len(sample), 1)
    return {"pairs": len(sample), "s_r_ms": 1000 * s_r / count, "compare_ms": 1000 * s_l / count,
            "ratio": s_l / s_r if s_r else float("nan")}


# --------------------------------------------------------------------------
# The run


def evaluate(size: str = "full", jobs: int = 1, corpus: Sequence[Document] | None = None,
             seed: int = CORPUS_SEED, keep: Path | None = None) -> dict[str, Any]:  # fmt: skip
    """Every number of the section (``corpus`` overrides ``size``, for tests); ``keep``:
    a file to save every measured pair in (NumPy ``.npz``)."""
    started = time.perf_counter()
    documents = list(corpus) if corpus is not None else build_corpus(size, seed)
    texts = [d.text for d in documents]
    log(f"{len(texts):,} documents; family pairs")
    changes = family_pairs(documents)
    light_pairs = {p for p, change in changes.items() if kind_of(change) == LIGHT}
    log(f"{len(light_pairs):,} light pairs; candidates")
    found = candidates(texts)
    parents = {d.id: i for i, d in enumerate(documents)}
    parent_pairs = {(min(i, parents[d.parent]), max(i, parents[d.parent]))
                    for i, d in enumerate(documents) if d.parent is not None}
    found_pairs = found.pairs()
    wide = {p for p, w in zip(found_pairs, found.word_measures.tolist(), strict=True) if w}
    compared = sorted(wide | light_pairs | parent_pairs)
    log(f"{len(found_pairs):,} candidates; comparing {len(compared):,} pairs with {jobs} job(s)")
    measure_started = time.perf_counter()
    compared_values = measure_pairs(texts, compared, jobs)
    measure_seconds = time.perf_counter() - measure_started
    # The other candidates are below 0.5 by the word measures: 0 stands for that.
    measured = sorted(set(found_pairs) | set(compared))
    row = {p: k for k, p in enumerate(measured)}
    values = np.zeros((len(measured), len(VERIFIED_MEASURES)), dtype=np.float64)
    sets = [VERIFIED_MEASURES.index("s_r"), VERIFIED_MEASURES.index("containment")]
    at = np.array([row[p] for p in found_pairs], dtype=np.int64)
    values[at[:, None], sets] = np.column_stack([found.s_r, found.containment])
    values[np.array([row[p] for p in compared], dtype=np.int64)] = compared_values
    kinds = [kind_of(changes[p]) if p in changes else UNRELATED for p in measured]
    pairs = Pairs(
        first=np.array([p[0] for p in measured], dtype=np.int64),
        second=np.array([p[1] for p in measured], dtype=np.int64),
        values=values, kinds=kinds, distances=hamming_distances(texts, measured),
        light_total=len(light_pairs), sources=[d.source for d in documents],
    )
    if keep is not None:
        keep.parent.mkdir(parents=True, exist_ok=True)
        np.savez_compressed(keep, first=pairs.first, second=pairs.second, values=values,
                            kinds=np.array(kinds), distances=pairs.distances)  # fmt: skip
    table = sweep(pairs)
    rng = np.random.default_rng(seed)
    sample_size = min(TIMED_PAIRS, len(compared))
    sample = [compared[int(k)] for k in rng.choice(len(compared), sample_size, replace=False)]
    narrow = {p for p in light_pairs if documents[p[1]].parent == documents[p[0]].id
              or documents[p[1]].origin == documents[p[0]].id}
    results: dict[str, Any] = {
        "size": size if corpus is None else f"{len(documents)} documents",
        "documents": len(documents),
        "light_change": LIGHT_CHANGE, "heavy_change": HEAVY_CHANGE,
        "candidate_overlap": CANDIDATE_OVERLAP,
        "pairs": {
            "family": len(changes), "light": len(light_pairs),
            "light_parent_or_original": len(narrow),
            "between": sum(kind_of(c) == BETWEEN for c in changes.values()),
            "heavy": sum(kind_of(c) == HEAVY for c in changes.values()),
            "candidates": len(found_pairs), "compared": len(compared),
            "light_not_candidates": len(light_pairs - set(found_pairs)),
        },
        "measures": list(VERIFIED_MEASURES),
        "sweep": table,
        "best": best_thresholds(table),
        "fine": sweep(pairs, FINE_THRESHOLDS, FINE_MEASURES),
        "narrow_recall": _narrow_recall(pairs, measured, narrow),
        "distributions": distributions(documents, pairs),
        "timing": timings(texts, sample),
        "measure_seconds": measure_seconds,
        "jobs": jobs,
        "seconds": time.perf_counter() - started,
    }
    log(f"done in {results['seconds']:.0f} s")
    return results


SQL_BASELINE = "nearsim_pairs_verified(tbl, 0.8, 's_r')"
"""The SQL functions' defaults before they were the client's: S_R at 0.8."""


def sql_defaults(dsn: str, documents: Sequence[Document]) -> dict[str, Any]:
    """The SQL functions at their defaults, end to end: the corpus loaded into a table,
    enabled, and ``nearsim_pairs_verified(tbl)`` with no other argument, its pairs
    scored as the sweep scores a measure's (recall over every light pair; precision
    over the light, heavy and unrelated pairs it returns); and, in the same run, the
    former defaults (:data:`SQL_BASELINE`) scored alike."""
    changes = family_pairs(documents)
    with scratch_schema(dsn) as (conn, schema):
        (arguments,) = _one(conn, "SELECT pg_get_function_arguments("
                            "'nearsim_pairs_verified(regclass, float8, text, int4)'::regprocedure)")
        if f"DEFAULT {DEFAULT_MIN_SIMILARITY}" not in arguments or \
                f"DEFAULT '{DEFAULT_MEASURE}'" not in arguments:
            raise SystemExit(f"the nearsim extension in this database has other defaults"
                             f" ({arguments}) than this client: create it again")
        table = sql.Identifier(schema, "docs")
        conn.execute(sql.SQL("CREATE TABLE {} (id integer PRIMARY KEY, body text NOT NULL)")
                     .format(table))  # fmt: skip
        with timer() as elapsed:
            with conn.cursor() as cursor, cursor.copy(
                sql.SQL("COPY {} (id, body) FROM STDIN").format(table)
            ) as copy:
                for position, document in enumerate(documents):
                    copy.write_row((position, document.text))
            conn.execute("SELECT nearsim_enable(%s::regclass, 'body')", (f"{schema}.docs",))
            conn.execute(sql.SQL("ANALYZE {}").format(table))
        load_seconds = elapsed()
        calls = {}
        for call in ("nearsim_pairs_verified(tbl)", SQL_BASELINE):
            with timer() as elapsed:
                rows = conn.execute(f"SELECT a::integer, b::integer FROM {call}".replace(
                    "tbl", "%s::regclass"), (f"{schema}.docs",)).fetchall()
            calls[call] = _scored(rows, changes, elapsed())
        (version,) = _one(conn, "SELECT extversion FROM pg_extension WHERE extname = 'nearsim'")
    defaults, baseline = calls.values()
    return {
        "call": "nearsim_pairs_verified(tbl)", "measure": DEFAULT_MEASURE,
        "min_similarity": DEFAULT_MIN_SIMILARITY, "extension": version,
        "documents": len(documents), "load_seconds": load_seconds, **defaults,
        "meets": defaults["recall"] >= TARGET_RECALL and defaults["precision"] >= TARGET_PRECISION,
        "baseline": {"call": SQL_BASELINE, **baseline},
    }  # fmt: skip


def _scored(rows: Sequence[tuple[int, int]], changes: dict[tuple[int, int], float],
            seconds: float) -> dict[str, Any]:  # fmt: skip
    """Pairs found, scored against the light pairs of ``changes``."""
    light = sum(1 for change in changes.values() if kind_of(change) == LIGHT)
    found = {(min(a, b), max(a, b)) for a, b in rows}
    true_positives = sum(1 for p in found if p in changes and kind_of(changes[p]) == LIGHT)
    in_between = sum(1 for p in found if p in changes and kind_of(changes[p]) == BETWEEN)
    return {"seconds": seconds, "pairs": len(found), "true_positives": true_positives,
            "between": in_between, "recall": _share(true_positives, light),
            "precision": _share(true_positives, len(found) - in_between),
            "strict_precision": _share(true_positives, len(found))}


def _one(conn: psycopg.Connection, query: str) -> tuple[Any, ...]:
    row = conn.execute(query).fetchone()
    assert row is not None
    return tuple(row)


def _narrow_recall(pairs: Pairs, measured: Sequence[tuple[int, int]],
                   narrow: set[tuple[int, int]]) -> dict[str, dict[str, float]]:  # fmt: skip
    """Recall on the light (document, parent or original) pairs alone, per measure and threshold."""
    chosen = np.array([p in narrow for p in measured], dtype=bool)
    result: dict[str, dict[str, float]] = {}
    for measure in VERIFIED_MEASURES:
        values = pairs.column(measure)
        result[measure] = {
            f"{t:.2f}": (int(np.count_nonzero(chosen & (values >= t - 1e-12))) / len(narrow)
                         if narrow else 1.0) for t in THRESHOLDS}  # fmt: skip
    return result


# --------------------------------------------------------------------------
# Markdown

_LABELS = {"s_r": "S_R", "s_l": "S_L", "s_j": "S_J", "containment": "containment",
           "information_s_l": "S_L (information)", "information_s_j": "S_J (information)"}


def _cell(row: dict[str, Any]) -> str:
    return f"{row['recall']:.3f} / {row['precision']:.3f}"


def _wrong(results: dict[str, Any]) -> str:
    """The false positives of S_L and S_J at 0.85, by kind."""
    parts = []
    for measure in FINE_MEASURES:
        row = next(r for r in results["fine"][measure] if r["threshold"] == 0.85)
        kinds = ", ".join(f"{count:,} {kind}" for kind, count in
                          row["false_positives_by_source"].items())
        parts.append(f"{_LABELS[measure]} >= 0.85: {kinds}")
    return "; ".join(parts)


def markdown(results: dict[str, Any], command: str = "") -> str:
    p = results["pairs"]
    lines = [
        f"Corpus: {results['documents']:,} documents ({results['size']}). Light pairs (edits"
        f" on their family-tree path change at most {results['light_change']:.0%} of the"
        f" text): {p['light']:,}, of which {p['light_parent_or_original']:,} are a document"
        f" and its parent or original; heavy (over {results['heavy_change']:.0%}):"
        f" {p['heavy']:,}; in between: {p['between']:,} (not scored, but in the strict"
        f" precision). Candidates: the {p['candidates']:,} pairs at 0.5 or above by S_R or"
        f" containment, or whose shingle sets share at least {results['candidate_overlap']:.0%}"
        f" of the larger one; {p['compared']:,} of them (those, the light pairs and every"
        f" document with its parent) measured by `compare` (S_L...) in"
        f" {results['measure_seconds']:.0f} s ({results['jobs']} job(s));"
        f" {p['light_not_candidates']:,} light pairs are not candidates (below 0.5 by every"
        " measure).",
    ]
    if command:
        lines += ["", f"    {command}"]
    lines += ["", "Recall / precision against the light pairs, per measure and threshold:", "",
              "| threshold | " + " | ".join(_LABELS[m] for m in results["measures"]) + " |",
              "|---:|" + "---:|" * len(results["measures"])]
    for k, threshold in enumerate(THRESHOLDS):
        cells = [_cell(results["sweep"][m][k]) for m in results["measures"]]
        lines.append(f"| {threshold:.2f} | " + " | ".join(cells) + " |")
    lines += ["", f"Per measure, the threshold with the highest recall at precision >="
              f" {TARGET_PRECISION} (target: recall >= {TARGET_RECALL}); strict precision counts"
              " the pairs in between as wrong; the last column is the recall when the"
              " candidates come from the rotation index within the radius calibrated for the"
              " threshold (a verified search without a sketch index):", "",
              "| measure | threshold | recall | precision | strict precision | recall of the"
              " (document, parent or original) pairs | radius | recall within the radius |",
              "|---|---:|---:|---:|---:|---:|---:|---:|"]
    for measure in results["measures"]:
        best = results["best"].get(measure)
        if best is None:
            lines.append(f"| {_LABELS[measure]} | none reaches precision {TARGET_PRECISION} |"
                         " | | | | | |")
            continue
        narrow = results["narrow_recall"][measure][f"{best['threshold']:.2f}"]
        mark = "" if best["meets"] else " (below target)"
        lines.append(
            f"| {_LABELS[measure]} | {best['threshold']:.2f} | {best['recall']:.3f}{mark} |"
            f" {best['precision']:.3f} | {best['strict_precision']:.3f} | {narrow:.3f} |"
            f" {best['radius']} | {best['recall_within_radius']:.3f} |")
    fine = results["fine"]
    lines += ["", "Where the target is met, in steps of 0.01 (recall / precision; strict"
              " precision):", "",
              "| threshold | " + " | ".join(_LABELS[m] for m in fine) + " |",
              "|---:|" + "---:|" * len(fine)]
    for k, threshold in enumerate(FINE_THRESHOLDS):
        cells = [_cell(fine[m][k]) + f"; {fine[m][k]['strict_precision']:.3f}" for m in fine]
        lines.append(f"| {threshold:.2f} | " + " | ".join(
            f"**{c}**" if fine[m][k]["recall"] >= TARGET_RECALL
            and fine[m][k]["precision"] >= TARGET_PRECISION else c
            for m, c in zip(fine, cells, strict=True)) + " |")
    lines += ["", "In bold: recall >= 0.95 and precision >= 0.98. The pairs counted as wrong"
              " at 0.85, by kind: " + _wrong(results) + ".", ""]
    lines += ["", "Between a document and its parent, per edit: percentiles "
              + "/".join(str(q) for q in PERCENTILES) + " of each measure:", "",
              "| edit | pairs | " + " | ".join(_LABELS[m] for m in DISTRIBUTION_MEASURES) + " |",
              "|---|---:|" + "---|" * len(DISTRIBUTION_MEASURES)]
    for row in results["distributions"]:
        cells = [" / ".join(f"{v:.2f}" for v in row[m]) for m in DISTRIBUTION_MEASURES]
        lines.append(f"| {row['kind']} | {row['pairs']:,} | " + " | ".join(cells) + " |")
    t = results["timing"]
    lines += ["", f"Cost per pair, measured in the client on {t['pairs']} of the pairs: S_R"
              f" {t['s_r_ms']:.2f} ms, `compare` (S_L and every other measure)"
              f" {t['compare_ms']:.2f} ms, {t['ratio']:.1f} times as much. In the server S_R,"
              " containment and S_L are computed in C.", ""]
    server = results.get("sql_defaults")
    if server is not None:
        old = server["baseline"]
        screened = next(r for r in results["fine"][server["measure"]]
                        if r["threshold"] == server["min_similarity"])
        lines += [
            f"**The SQL defaults, end to end** (nearsim {server['extension']}): the"
            f" {server['documents']:,} documents loaded into a table and enabled"
            f" ({server['load_seconds']:.1f} s), then `{server['call']}` with no other"
            f" argument, that is {_LABELS[server['measure']]} >= {server['min_similarity']}"
            f" among the pairs at least {SCREEN} similar by S_R: {server['pairs']:,} pairs in"
            f" {server['seconds']:.1f} s; recall {server['recall']:.3f}, precision"
            f" {server['precision']:.3f} (strict {server['strict_precision']:.3f}) against"
            f" the target of recall >= {TARGET_RECALL} at precision >= {TARGET_PRECISION}:"
            f" {'met' if server['meets'] else 'not met'}. The client's figures for the same"
            f" route, measured above in Python: recall {screened['recall_screened']:.3f},"
            f" precision {screened['precision_screened']:.3f}. In the same run, the former"
            f" defaults, `{old['call']}`: {old['pairs']:,} pairs in {old['seconds']:.1f} s"
            f" ({server['seconds'] / old['seconds']:.1f} times as fast as the defaults);"
            f" recall {old['recall']:.3f}, precision {old['precision']:.3f} (strict"
            f" {old['strict_precision']:.3f}).", ""]
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--size", choices=sorted(SIZES), default="full")
    parser.add_argument("--jobs", type=int, default=1,
                        help="processes measuring the pairs (default 1)")
    parser.add_argument("--output-dir", type=Path, default=DEFAULT_OUTPUT)
    parser.add_argument("--dsn", help="a database in which to measure the SQL functions at"
                        " their defaults on the same corpus (left out without)")
    args = parser.parse_args(argv)
    results = evaluate(args.size, args.jobs, keep=args.output_dir / "defaults-pairs.npz")
    if args.dsn:
        log("the SQL defaults in PostgreSQL")
        results["sql_defaults"] = sql_defaults(args.dsn, build_corpus(args.size, CORPUS_SEED))
    command = (f".venv/bin/python -m benchmarks.defaults --size {args.size} --jobs {args.jobs}"
               + (" --dsn DSN" if args.dsn else "")
               + ("   # make bench-defaults" if (args.size, args.jobs) == ("full", 2) else ""))
    args.output_dir.mkdir(parents=True, exist_ok=True)
    (args.output_dir / "defaults.json").write_text(json.dumps(results, indent=1))
    page = markdown(results, command)
    (args.output_dir / "defaults.md").write_text(page)
    print(page)
    return 0


if __name__ == "__main__":
    sys.exit(run_main(main))
