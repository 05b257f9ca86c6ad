"""The evaluation corpus, its exact ground truth and the quality benchmark (quick mode)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

# The repository root, the working directory of `python -m pytest tests`,
# where the benchmarks package is importable.
from benchmarks import corpus, pair_methods, quality_simhash, scoring, truth

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def small() -> list[corpus.Document]:
    return corpus.build_corpus("small", seed=3)


def test_corpus_is_deterministic(small: list[corpus.Document]) -> None:
    again = corpus.build_corpus("small", seed=3)
    assert [(d.id, d.text) for d in again] == [(d.id, d.text) for d in small]
    other = corpus.build_corpus("small", seed=4)
    assert [(d.id, d.text) for d in other] != [(d.id, d.text) for d in small]
    # The originals do not depend on the seed, only the edits do.
    originals = [d.id for d in small if d.origin is None]
    assert originals == [d.id for d in other if d.origin is None]


def test_corpus_edits_and_amounts(small: list[corpus.Document]) -> None:
    assert len(small) == corpus.SIZES["small"]
    assert len({d.id for d in small}) == len(small)
    by_id = {d.id: d for d in small}
    originals = [d for d in small if d.origin is None]
    assert {d.source for d in originals} == {"kjv", "license"}
    assert all(not d.edits and d.parent is None for d in originals)
    derived = [d for d in small if d.origin is not None]
    assert {d.kind for d in derived} == set(corpus.EDIT_KINDS)
    for document in derived:
        assert document.origin in by_id and by_id[document.origin].origin is None
        parent = by_id[document.parent or ""]
        assert document.edits[:-1] == parent.edits
        assert len(document.amounts) == len(document.edits)
        assert all(0.0 <= a <= 1.0 for a in document.amounts)
        if document.kind in corpus.SEED_003_KINDS:
            assert 0.0 < document.amount <= corpus.MAX_SEED_003_FRACTION + 1e-6
            change = len(document.text) - len(parent.text)
            expected = round(document.amount * len(parent.text))
            assert change == (expected if document.kind == "insertion" else -expected)
        if document.kind == "reply":
            assert "> " in document.text
        if document.kind == "forward":
            assert document.text.endswith(parent.text)
            assert "Forwarded message" in document.text
        if document.kind == "syndication":
            assert parent.text in document.text and len(document.text) > len(parent.text)
    # Seed 003's first pass modifies about half of the originals.
    first_pass = [d for d in derived if len(d.edits) == 1 and d.kind in corpus.SEED_003_KINDS]
    assert 0.3 * len(originals) <= len(first_pass)
    assert any(len(d.edits) > 1 for d in derived)  # copies of copies


def _is_self_insertion(edited: str, original: str) -> bool:
    """Is ``edited`` the original with one of its own substrings inserted somewhere?"""
    size = len(edited) - len(original)
    return size > 0 and any(
        edited[:at] == original[:at] and edited[at + size :] == original[at:]
        and edited[at : at + size] in original
        for at in range(len(original) + 1)
    )


def test_seed_003_edits_use_the_same_file() -> None:
    original = corpus.Document("x", " ".join(f"w{i}" for i in range(200)) + "\n", None)
    documents = corpus.build_corpus(originals=[original], documents=60, seed=11)
    single = [d for d in documents if len(d.edits) == 1]
    insertions = [d for d in single if d.kind == "insertion"]
    deletions = [d for d in single if d.kind == "deletion"]
    assert insertions and deletions
    for document in insertions:
        assert _is_self_insertion(document.text, original.text)
    for document in deletions:
        size = len(original.text) - len(document.text)
        assert any(original.text[:at] + original.text[at + size :] == document.text
                   for at in range(len(document.text) + 1))


def test_jsonl_round_trip(small: list[corpus.Document], tmp_path: Path) -> None:
    path = tmp_path / "corpus.jsonl"
    corpus.write_jsonl(small[:50], path)
    assert corpus.read_jsonl(path) == small[:50]


def test_sparse_truth_equals_brute_force(small: list[corpus.Document]) -> None:
    texts = [d.text for d in small]
    exact = truth.similar_pairs(texts, keep=0.5)
    brute = truth.brute_force(texts)
    assert exact.shared_pairs == len(brute)
    expected_buckets = np.bincount(
        [min(int(v * 10), 9) for v in brute.values()], minlength=10).tolist()
    assert exact.buckets == expected_buckets
    kept = {pair: value for pair, value in brute.items() if value >= 0.5}
    found = {(int(i), int(j)): float(v)
             for i, j, v in zip(exact.first, exact.second, exact.s_r, strict=True)}
    assert found == kept
    assert exact.positives(0.8) == sum(v >= 0.8 for v in kept.values()) > 0


def test_truth_against_resemblance_itself(small: list[corpus.Document]) -> None:
    # nearsim.core.measures.resemblance called on the texts, on the first 40 documents
    # and the families of a few originals (pairs above the threshold included).
    chosen = [d.text for d in small[:40]] + [
        d.text for d in small if (d.origin or d.id) in {small[0].id, small[1].id}]
    exact = truth.similar_pairs(chosen, keep=0.5)
    brute = truth.brute_force(chosen, call_resemblance=True)
    assert exact.shared_pairs == len(brute)
    found = {(int(i), int(j)): float(v)
             for i, j, v in zip(exact.first, exact.second, exact.s_r, strict=True)}
    assert found == {p: v for p, v in brute.items() if v >= 0.5}
    assert found


def test_scores_on_a_hand_made_example() -> None:
    positives = {(0, 1), (2, 3), (4, 5), (6, 7)}
    predicted = {(1, 0), (2, 3), (0, 9)}  # order inside a pair does not matter
    scores = scoring.score_pairs(predicted, positives)
    assert (scores.predicted, scores.positives, scores.true_positives) == (3, 4, 2)
    assert scores.precision == pytest.approx(2 / 3)
    assert scores.recall == pytest.approx(0.5)
    assert scores.f1 == pytest.approx(2 * (2 / 3) * 0.5 / (2 / 3 + 0.5))
    codes = scoring.score(
        np.sort(truth.pair_codes(np.array([1, 2, 0]), np.array([0, 3, 9]), 10)),
        np.sort(truth.pair_codes(np.array([0, 2, 4, 6]), np.array([1, 3, 5, 7]), 10)))
    assert codes == scores
    nothing = scoring.Scores.of_counts(0, 4, 0)
    assert (nothing.precision, nothing.recall, nothing.f1) == (1.0, 0.0, 0.0)
    with pytest.raises(ValueError):
        scoring.Scores.of_counts(1, 4, 2)


def test_si_v1_pair_counting_matches_brute_force() -> None:
    from nearsim.core.legacy import si_v1_similar

    values = [100, 75, 129, 130, 0, -50, -40, -64, 100, 71, 142, 10**15, 7 * 10**14 + 1]
    count = len(values)
    first, second = np.triu_indices(count, 1)
    predicted, hit = pair_methods.si_prediction(values, first.astype(np.int64),
                                                second.astype(np.int64))
    expected = [si_v1_similar(values[i], values[j]) or si_v1_similar(values[j], values[i])
                for i, j in zip(first.tolist(), second.tolist(), strict=True)]
    assert predicted == sum(expected)
    assert hit.tolist() == expected


def test_quick_quality_run(database: str, tmp_path: Path) -> None:
    completed = subprocess.run(
        [sys.executable, "-m", "benchmarks.quality", "--dsn", database,
         "--quick", "--output-dir", str(tmp_path)],
        capture_output=True, text=True, timeout=240, cwd=ROOT,
    )
    assert completed.returncode == 0, completed.stderr
    results = json.loads((tmp_path / "quality.json").read_text())
    methods = results["methods"]
    names = {m["method"].split()[0] for m in methods}
    assert names == {"simhash", "nearsim", "SI", "MinHashLSH", "pg_trgm"}
    for threshold in scoring.THRESHOLDS:
        assert sum(m["threshold"] == threshold for m in methods) == 6
    for method in methods:
        for key in ("precision", "recall", "f1"):
            assert 0.0 <= method[key] <= 1.0, (method["method"], key)
        assert method["signature_seconds"] >= 0 and method["pair_seconds"] >= 0
    for method in (m for m in methods if m["method"] == "nearsim verified"):
        # Every positive within the calibrated radius is found, and nothing
        # below the threshold is returned.
        assert method["extra"]["recall_within_radius"] == 1.0
        assert method["precision"] == 1.0
        assert method["extra"]["positives_within_radius"] > 0
    for curve in results["radius_curves"].values():
        for threshold in scoring.THRESHOLDS:
            recall = curve[str(threshold)]["recall"]
            assert len(recall) == quality_simhash.MAX_CURVE_RADIUS + 1
            assert recall == sorted(recall)  # a larger radius never finds fewer
            assert all(0.0 <= p <= 1.0 for p in curve[str(threshold)]["precision"])
    kinds = {row["kind"] for row in results["seed003"]}
    assert kinds == set(corpus.SEED_003_KINDS)
    assert all(Path(f).exists() for f in results["figures"])
    assert "| nearsim verified |" in (tmp_path / "quality.md").read_text()
    # The scratch schema is gone.
    import psycopg

    with psycopg.connect(database) as conn:
        left = conn.execute(
            "SELECT count(*) FROM pg_namespace WHERE nspname LIKE 'nearsim_quality_%'"
        ).fetchone()
    assert left == (0,)
