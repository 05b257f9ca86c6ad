"""benchmarks/defaults.py on a small corpus: its counts follow the truth it builds."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

# The repository root, the working directory of `python -m pytest tests`,
# where the benchmarks package is importable.
from benchmarks import corpus, defaults, docs, truth
from nearsim.core.measures import VERIFIED_MEASURES, compare


@pytest.fixture(scope="module")
def mini() -> list[corpus.Document]:
    """Sixty documents: a few originals of the small corpus and their copies."""
    originals = [d for d in corpus.build_corpus("small") if d.origin is None]
    chosen = originals[:10] + [d for d in originals if d.source == "license"][:5]
    return corpus.build_corpus(originals=chosen, documents=60, seed=5)


@pytest.fixture(scope="module")
def results(mini: list[corpus.Document]) -> dict[str, Any]:
    return defaults.evaluate(corpus=mini)


@pytest.fixture(scope="module")
def every_pair(mini: list[corpus.Document]) -> dict[tuple[int, int], tuple[float, ...]]:
    """Every measure of every pair that shares a shingle, by brute force."""
    texts = [d.text for d in mini]
    return {pair: tuple(float(getattr(compare(texts[pair[0]], texts[pair[1]]), m))
                        for m in VERIFIED_MEASURES)
            for pair in truth.brute_force(texts)}  # fmt: skip


def test_change_follows_the_family_tree() -> None:
    original = corpus.Document("o", "text", None)
    typos = corpus.Document("o~1", "text", "o", "o", ("typos",), (0.01,))
    cut = corpus.Document("o~2", "text", "o", "o~1", ("typos", "deletion"), (0.01, 0.5))
    reply = corpus.Document("o~3", "text", "o", "o", ("reply",), (0.05,))
    documents = [original, typos, cut, reply]
    changes = defaults.family_pairs(documents)
    assert changes == pytest.approx({(0, 1): 0.01, (0, 2): 0.51, (0, 3): 0.05, (1, 2): 0.5,
                                     (1, 3): 0.06, (2, 3): 0.56})  # fmt: skip
    kinds = {pair: defaults.kind_of(change) for pair, change in changes.items()}
    assert kinds == {(0, 1): "light", (0, 2): "heavy", (0, 3): "light", (1, 2): "heavy",
                     (1, 3): "light", (2, 3): "heavy"}  # fmt: skip
    assert defaults.kind_of(0.2) == "between"
    other = corpus.Document("p", "text", None)
    assert (0, 4) not in defaults.family_pairs([*documents, other])  # another family


def test_candidates_hold_every_pair_at_half_by_any_measure(
    mini: list[corpus.Document], every_pair: dict[tuple[int, int], tuple[float, ...]],
) -> None:  # fmt: skip
    found = defaults.candidates([d.text for d in mini])
    kept = set(found.pairs())
    reaching = {pair for pair, values in every_pair.items() if max(values) >= 0.5}
    assert reaching and reaching <= kept
    # the set measures of the join are compare()'s, float for float
    s_r, containment = VERIFIED_MEASURES.index("s_r"), VERIFIED_MEASURES.index("containment")
    for k, pair in enumerate(found.pairs()):
        assert found.s_r[k] == every_pair[pair][s_r]
        assert found.containment[k] == every_pair[pair][containment]
    # the word measures can reach 0.5 only where the join says they may
    wide = {p for p, w in zip(found.pairs(), found.word_measures.tolist(), strict=True) if w}
    words = [VERIFIED_MEASURES.index(m) for m in ("s_l", "s_j", "information_s_l",
                                                   "information_s_j")]  # fmt: skip
    assert {p for p, v in every_pair.items() if max(v[i] for i in words) >= 0.5} <= wide


def test_recall_and_precision_are_the_counts_of_its_truth(
    mini: list[corpus.Document], results: dict[str, Any],
    every_pair: dict[tuple[int, int], tuple[float, ...]],
) -> None:  # fmt: skip
    changes = defaults.family_pairs(mini)
    light = {p for p, c in changes.items() if defaults.kind_of(c) == "light"}
    between = {p for p, c in changes.items() if defaults.kind_of(c) == "between"}
    assert results["pairs"]["light"] == len(light) > 0
    for measure in VERIFIED_MEASURES:
        column = VERIFIED_MEASURES.index(measure)
        for row in results["sweep"][measure]:
            predicted = {p for p, v in every_pair.items()
                         if v[column] >= row["threshold"] - 1e-12}  # fmt: skip
            true_positives = len(predicted & light)
            wrong = len(predicted - light - between)
            assert (row["predicted"], row["true_positives"], row["false_positives"],
                    row["between"]) == (len(predicted), true_positives, wrong,
                                        len(predicted & between))  # fmt: skip
            assert row["recall"] == pytest.approx(true_positives / len(light))
            assert row["precision"] == pytest.approx(
                true_positives / (true_positives + wrong) if true_positives + wrong else 1.0)
            screened = {p for p in predicted & light
                        if every_pair[p][VERIFIED_MEASURES.index("s_r")] >= 0.5 - 1e-12}
            assert row["recall_screened"] == pytest.approx(len(screened) / len(light))
            assert row["recall_within_radius"] <= row["recall"]
    # recall falls and precision of S_L rises with the threshold
    recalls = [row["recall"] for row in results["sweep"]["s_l"]]
    assert recalls == sorted(recalls, reverse=True)


def test_distributions_and_the_page(results: dict[str, Any]) -> None:
    kinds = {row["kind"] for row in results["distributions"]}
    assert {"typos", "reply", "forward"} <= kinds
    for row in results["distributions"]:
        for measure in defaults.DISTRIBUTION_MEASURES:
            assert row[measure] == sorted(row[measure])  # percentiles ascend
            assert all(0 <= v <= 1 for v in row[measure])
    typos = next(row for row in results["distributions"] if row["kind"] == "typos")
    assert typos["s_l"][2] >= typos["s_r"][2]  # a typo costs S_R more than S_L
    page = defaults.markdown(results, "python -m benchmarks.defaults --size small")
    assert "python -m benchmarks.defaults --size small" in page
    assert page.count("\n| 0.") >= len(defaults.THRESHOLDS)
    assert "| S_L |" in page and "| typos |" in page
    assert np.isfinite(results["timing"]["ratio"]) and results["timing"]["compare_ms"] > 0


def test_the_benchmarks_page_takes_the_section_from_the_results(tmp_path: Path) -> None:
    assert "No results of `make bench-defaults`" in docs.defaults_page(tmp_path)
    (tmp_path / "defaults.md").write_text("the section\n", encoding="utf-8")
    assert docs.defaults_page(tmp_path) == "the section\n"


def test_the_sql_defaults_end_to_end_are_the_route_measured_in_python(
    database: str, mini: list[corpus.Document], results: dict[str, Any],
    every_pair: dict[tuple[int, int], tuple[float, ...]],
) -> None:  # fmt: skip
    """nearsim_pairs_verified(tbl) with no other argument returns exactly the pairs at
    least 0.5 similar by S_R whose S_L is at least 0.87, scored as the sweep scores."""
    server = defaults.sql_defaults(database, mini)
    assert (server["measure"], server["min_similarity"]) == ("s_l", 0.87)
    s_r, s_l = VERIFIED_MEASURES.index("s_r"), VERIFIED_MEASURES.index("s_l")
    expected = {p for p, v in every_pair.items() if v[s_r] >= 0.5 - 1e-12 and v[s_l] >= 0.87}
    assert server["pairs"] == len(expected) > 0
    row = next(r for r in results["fine"]["s_l"] if r["threshold"] == 0.87)
    assert server["recall"] == pytest.approx(row["recall_screened"])
    assert server["precision"] == pytest.approx(row["precision_screened"])
    assert server["strict_precision"] <= server["precision"]
    # the former defaults in the same run: every pair at least 0.8 similar by S_R
    by_s_r = {p for p, v in every_pair.items() if v[s_r] >= 0.8 - 1e-12}
    assert server["baseline"]["pairs"] == len(by_s_r) > 0
    row = next(r for r in results["sweep"]["s_r"] if r["threshold"] == 0.8)
    assert server["baseline"]["recall"] == pytest.approx(row["recall"])
    assert server["baseline"]["precision"] == pytest.approx(row["precision"])
    page = defaults.markdown({**results, "sql_defaults": server})
    assert "**The SQL defaults, end to end**" in page
    assert f"recall {server['recall']:.3f}" in page
