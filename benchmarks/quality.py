"""Detection quality: nearsim against its peers on a corpus with exact ground truth.

    .venv/bin/python -m benchmarks.quality --dsn DSN [--quick] [--output-dir DIR]

The corpus is benchmarks/corpus.py's (``--quick``: the ``small`` size, a few
hundred documents; otherwise ``full``, over 20,000).  The truth is the exact
shingle resemblance S_R of every pair of documents that share a word
3-shingle (benchmarks/truth.py).  For the thresholds 0.8 and 0.5 a pair is a
*positive* when its S_R is at least the threshold, and every method is scored
by precision, recall and F1 over document pairs:

* ``simhash hamming<=6``: the seeds' query, all pairs of default-profile
  fingerprints within 6 bits (:func:`nearsim.core.pairs.all_pairs`);
* ``nearsim verified``: ``nearsim_pairs_verified(tbl, min_similarity => t, measure => 's_r')``
  in PostgreSQL (an exact join of the shingle sets: every pair whose S_R
  passes, whatever the distance of their fingerprints);
* ``SI v1 +/-30%``: seed 000's similarity index; a pair counts when either
  document's SI is inside the other's range (the range query is asymmetric);
* ``MinHashLSH``: datasketch, 128 permutations, LSH threshold = t, the
  candidates as predicted pairs, and the candidates whose MinHash estimate is
  at least t;
* ``pg_trgm``: a GIN-indexed self-join with ``%``; the trigram similarity
  threshold is the one with the best F1 on the small corpus.  On the full
  corpus the self-join of 20,000 multi-kilobyte texts does not fit a
  ten-minute budget, so it runs on a random subset of whole document
  families (documented in the output), scored against the truth restricted
  to that subset.

Also: precision and recall against the Hamming radius (0..24) for five
SimHash profiles, and seed 003's observation, the Hamming distance between an
original and its copy modified by an insertion or a deletion, by amount.

Writes ``quality.json`` (every number), ``quality.md`` (tables to paste into
docs/BENCHMARKS.md) and two PNG figures into the output directory (default
benchmarks/quality-results/).  Every database object lives in a scratch schema
that is dropped at the end.

The methods that run in this process are in benchmarks/pair_methods.py, those
in PostgreSQL in benchmarks/quality_postgresql.py, the radius curves and seed
003 in benchmarks/quality_simhash.py, the figures and the Markdown in
benchmarks/quality_report.py; the scores in benchmarks/scoring.py.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from .common import log, run_main, scratch_schema, timer
from .corpus import build_corpus
from .pair_methods import (
    MINHASH_PERMUTATIONS,
    SEED_RADIUS,
    fingerprints,
    hamming_of_codes,
    lsh_candidates,
    minhash_signatures,
    radius_pairs,
    si_prediction,
    si_values,
)
from .quality_postgresql import (
    SUBSET_SEED,
    TRIGRAM_BUDGET_SECONDS,
    TRIGRAM_SUBSET,
    TRIGRAM_SWEEP,
    best_trigram_threshold,
    family_subset,
    trigram_pairs,
    trigram_sweep,
    verified_search,
)
from .quality_report import draw_figures, markdown, seed003_finding
from .quality_simhash import PROFILES, radius_curve, seed003_distances, seed003_table
from .scoring import THRESHOLDS, Scores, score
from .truth import similar_pairs

DEFAULT_OUTPUT = Path(__file__).resolve().parent / "quality-results"


@dataclass
class MethodResult:
    method: str
    threshold: float
    scores: Scores
    signature_seconds: float
    pair_seconds: float
    documents: int
    notes: str = ""
    extra: dict[str, Any] = field(default_factory=dict)

    def as_json(self) -> dict[str, Any]:
        result = asdict(self)
        result.update(result.pop("scores"))
        return result


# --------------------------------------------------------------------------
# The run


def evaluate(dsn: str, quick: bool, output_dir: Path) -> dict[str, Any]:
    size = "small" if quick else "full"
    log(f"building the {size} corpus")
    corpus = build_corpus(size)
    texts = [d.text for d in corpus]
    documents = len(texts)
    log(f"{documents} documents; exact ground truth")
    truth = similar_pairs(texts, keep=min(THRESHOLDS))
    positives = {t: truth.codes(t) for t in THRESHOLDS}
    results: dict[str, Any] = {
        "mode": "quick" if quick else "full",
        "corpus": {
            "size": size, "seed": 3, "documents": documents,
            "originals": sum(d.origin is None for d in corpus),
            "sources": ", ".join(f"{s} {sum(d.origin is None and d.source == s for d in corpus)}"
                                 for s in ("kjv", "license", "man")),
            "edits": ", ".join(f"{k} {sum(d.kind == k for d in corpus)}"
                               for k in ("insertion", "deletion", "typos", "reply", "forward",
                                         "ocr", "syndication"))
            + f" ({sum(len(d.edits) > 1 for d in corpus)} copies of copies)",
        },
        "truth": {
            "seconds": truth.seconds, "shared_pairs": truth.shared_pairs,
            "buckets": truth.buckets, "shingles": truth.shingles,
            "positives": {str(t): len(positives[t]) for t in THRESHOLDS},
        },
    }
    methods: list[MethodResult] = []

    log("SimHash hamming <= 6")
    with timer() as signature_time:
        present, prints = fingerprints(texts)
    with timer() as pair_time:
        codes, _ = radius_pairs(present, prints, SEED_RADIUS, documents)
        codes = np.sort(codes)
    fingerprint_seconds = signature_time()
    for t in THRESHOLDS:
        methods.append(MethodResult("simhash hamming<=6", t, score(codes, positives[t]),
                                    signature_time(), pair_time(), documents))

    log("nearsim verified search in PostgreSQL")
    with scratch_schema(dsn) as (conn, schema):
        load_seconds, verified = verified_search(conn, schema, texts, present, prints,
                                                 THRESHOLDS)
        for t in THRESHOLDS:
            found, seconds, radius = verified[t]
            distance = hamming_of_codes(positives[t], documents, present, prints)
            reachable = positives[t][distance <= radius]
            within = score(found, reachable)
            methods.append(MethodResult(
                "nearsim verified", t, score(found, positives[t]),
                fingerprint_seconds + load_seconds, seconds,
                documents,
                notes=(f"nearsim_pairs_verified(min_similarity => {t}, measure => 's_r'),"
                       f" the exact join of"
                       f" the shingle sets; signatures = client fingerprints"
                       f" ({fingerprint_seconds:.1f} s) + COPY + nearsim_enable"
                       f" ({load_seconds:.1f} s); {len(reachable):,} of"
                       f" {len(positives[t]):,} positives lie within the calibrated radius"
                       f" {radius}, recall among them {within.recall:.4f}"),
                extra={"radius": radius, "recall_within_radius": within.recall,
                       "positives_within_radius": len(reachable)},
            ))

        log("pg_trgm")
        subset = family_subset(corpus, TRIGRAM_SUBSET[size], SUBSET_SEED)
        index_seconds, join_seconds, pairs = trigram_pairs(
            dsn, conn, schema, texts, subset, min(TRIGRAM_SWEEP), TRIGRAM_BUDGET_SECONDS)
        sweep = trigram_sweep(pairs, truth, subset, documents)
        if quick:
            chosen_on = "this subset"
            small_sweep = sweep
        else:
            # The threshold is chosen on the whole small corpus, then applied here.
            log("pg_trgm on the small corpus, to choose its threshold")
            small = build_corpus("small")
            small_texts = [d.text for d in small]
            small_positions = list(range(len(small)))
            _, _, small_pairs = trigram_pairs(dsn, conn, schema, small_texts, small_positions,
                                              min(TRIGRAM_SWEEP), TRIGRAM_BUDGET_SECONDS)
            small_sweep = trigram_sweep(small_pairs, similar_pairs(small_texts, keep=0.5),
                                        small_positions, len(small))
            chosen_on = "the small corpus"
        chosen = {t: best_trigram_threshold(small_sweep[t]) for t in THRESHOLDS}
        subset_note = (f"a random subset of {len(subset):,} of the {documents:,} documents"
                       f" (whole families of randomly drawn originals, seed {SUBSET_SEED}):"
                       " the self-join recomputes both texts' trigrams for nearly every pair"
                       " (about 1 ms each), too slow for the whole corpus; scored against the"
                       " truth within the subset")
        for t in THRESHOLDS:
            best_here = best_trigram_threshold(sweep[t])
            methods.append(MethodResult(
                f"pg_trgm % (similarity >= {chosen[t]})", t, sweep[t][chosen[t]], index_seconds,
                join_seconds, len(subset),
                notes=(f"{subset_note}; threshold {chosen[t]} chosen for the best F1 on"
                       f" {chosen_on} (best on this run: {best_here}, F1"
                       f" {sweep[t][best_here].f1:.3f}); one self-join at"
                       f" {min(TRIGRAM_SWEEP)} serves the whole sweep"),
                extra={"threshold": chosen[t], "sweep": {
                    str(s): asdict(sc) for s, sc in sweep[t].items()}},
            ))

    log("SI v1")
    with timer() as signature_time:
        values = si_values(texts)
    with timer() as pair_time:
        for t in THRESHOLDS:
            chosen_pairs = truth.s_r >= t
            predicted, hit = si_prediction(values, truth.first[chosen_pairs],
                                           truth.second[chosen_pairs])
            methods.append(MethodResult(
                "SI v1 +/-30%", t,
                Scores.of_counts(predicted, len(positives[t]), int(np.count_nonzero(hit))),
                signature_time(), 0.0, documents,
                notes="a pair counts when either document's SI is inside the other's"
                      " +/-30% range (strict bounds, exact integers); pairs counted from"
                      " the SI order, not listed",
            ))
    for m in methods[-len(THRESHOLDS):]:
        m.pair_seconds = pair_time() / len(THRESHOLDS)

    log("datasketch MinHashLSH")
    with timer() as signature_time:
        lsh_present, sketches = minhash_signatures(texts)
    for t in THRESHOLDS:
        with timer() as pair_time:
            candidates, estimate = lsh_candidates(lsh_present, sketches, t, documents)
        methods.append(MethodResult(
            f"MinHashLSH candidates (t={t})", t, score(candidates, positives[t]),
            signature_time(), pair_time(), documents,
            notes=f"datasketch {MINHASH_PERMUTATIONS} permutations, word 3-shingles"))
        methods.append(MethodResult(
            f"MinHashLSH + estimate >= {t}", t,
            score(candidates[estimate >= t], positives[t]), signature_time(), pair_time(),
            documents))

    log("radius curves")
    results["radius_curves"] = {p: radius_curve(texts, truth, p) for p in PROFILES}

    log("seed 003 distances")
    rows = seed003_distances(corpus, present, prints)
    results["seed003"] = seed003_table(rows)
    results["seed003_finding"] = seed003_finding(results["seed003"])
    order = {name: k for k, name in enumerate(("simhash", "nearsim", "SI", "MinHashLSH",
                                                "pg_trgm"))}
    methods.sort(key=lambda m: (-m.threshold, order.get(m.method.split()[0], 9)))
    results["methods"] = [m.as_json() for m in methods]

    output_dir.mkdir(parents=True, exist_ok=True)
    results["figures"] = draw_figures(results, rows, output_dir)
    (output_dir / "quality.json").write_text(json.dumps(results, indent=1))
    (output_dir / "quality.md").write_text(markdown(results))
    log(f"wrote {output_dir}")
    return results


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dsn", required=True, help="a database where nearsim can be created")
    parser.add_argument("--quick", action="store_true", help="the small corpus (seconds)")
    parser.add_argument("--output-dir", type=Path, default=DEFAULT_OUTPUT)
    args = parser.parse_args(argv)
    results = evaluate(args.dsn, args.quick, args.output_dir)
    print(markdown(results))
    return 0


if __name__ == "__main__":
    sys.exit(run_main(main))
