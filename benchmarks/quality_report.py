"""The figures and the Markdown of benchmarks/quality.py, from its results.

``quality-radius.png`` (precision and recall against the Hamming radius, per
profile), ``quality-seed003.png`` (seed 003's distances by amount) and the
tables of ``quality.md``, with the sentences that read them.  Nothing is
measured here.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from .pair_methods import SEED_RADIUS
from .quality_simhash import MAX_CURVE_RADIUS
from .scoring import THRESHOLDS


def draw_figures(results: dict[str, Any], seed003_rows: Sequence[dict[str, Any]],
                 directory: Path) -> list[str]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    radii = list(range(MAX_CURVE_RADIUS + 1))
    figure, axes = plt.subplots(2, 2, figsize=(11, 8), sharex=True)
    for row, threshold in enumerate(THRESHOLDS):
        for profile, curve in results["radius_curves"].items():
            axes[row][0].plot(radii, curve[str(threshold)]["precision"], marker=".", label=profile)
            axes[row][1].plot(radii, curve[str(threshold)]["recall"], marker=".", label=profile)
        for column, name in enumerate(("precision", "recall")):
            axis = axes[row][column]
            axis.set_title(f"{name}, positives: S_R >= {threshold}")
            axis.set_ylim(-0.02, 1.02)
            axis.axvline(SEED_RADIUS, color="grey", linestyle=":", linewidth=1)
            axis.grid(alpha=0.3)
    for axis in axes[1]:
        axis.set_xlabel("Hamming radius (bits)")
    axes[0][0].legend(loc="lower left")
    figure.suptitle(f"SimHash pairs within a radius, {results['corpus']['documents']} documents")
    figure.tight_layout()
    curves = directory / "quality-radius.png"
    figure.savefig(curves, dpi=110)
    plt.close(figure)

    figure, axis = plt.subplots(figsize=(10, 5))
    labels = [f"{t * 10}-{t * 10 + 10}%" for t in range(8)]
    for offset, (kind, colour) in enumerate((("insertion", "tab:blue"),
                                             ("deletion", "tab:red"))):
        data = [[r["distance"] for r in seed003_rows
                 if r["kind"] == kind and min(int(r["amount"] * 10), 7) == t] for t in range(8)]
        positions = [t * 3 + offset for t in range(8)]
        kept = [(p, d) for p, d in zip(positions, data, strict=True) if d]
        if not kept:
            continue
        boxes = axis.boxplot([d for _, d in kept], positions=[p for p, _ in kept],
                             widths=0.8, patch_artist=True, showfliers=False)
        for box in boxes["boxes"]:
            box.set_facecolor(colour)
            box.set_alpha(0.5)
        axis.plot([], [], color=colour, linewidth=8, alpha=0.5, label=kind)
    axis.set_xticks([t * 3 + 0.5 for t in range(8)], labels)
    axis.axhline(SEED_RADIUS, color="grey", linestyle=":", linewidth=1)
    axis.set_xlabel("amount inserted or deleted (share of the original)")
    axis.set_ylabel("Hamming distance to the original (default/1)")
    axis.set_title("Seed 003's experiment: distance of a modified copy to its original")
    axis.legend()
    figure.tight_layout()
    distances = directory / "quality-seed003.png"
    figure.savefig(distances, dpi=110)
    plt.close(figure)
    return [str(curves), str(distances)]


def _number(value: float) -> str:
    return f"{value:.3f}"


def markdown(results: dict[str, Any]) -> str:
    corpus, truth = results["corpus"], results["truth"]
    lines = [
        f"### Detection quality ({results['mode']} corpus)",
        "",
        f"Corpus: {corpus['documents']:,} documents ({corpus['originals']:,} originals:"
        f" {corpus['sources']}), seed {corpus['seed']}; edits: {corpus['edits']}."
        f" Ground truth: exact S_R of all {truth['shared_pairs']:,} pairs that share a"
        f" shingle ({truth['seconds']:.1f} s); positives {truth['positives']['0.8']:,} at"
        f" S_R >= 0.8 and {truth['positives']['0.5']:,} at S_R >= 0.5.",
        "",
    ]
    for threshold in THRESHOLDS:
        rows = [m for m in results["methods"] if m["threshold"] == threshold]
        lines += [
            f"#### Positives: S_R >= {threshold}",
            "",
            "| method | documents | predicted | true pos. | precision | recall | F1 |"
            " signatures (s) | pairs (s) |",
            "|---|---:|---:|---:|---:|---:|---:|---:|---:|",
        ]
        for m in rows:
            lines.append(
                f"| {m['method']} | {m['documents']:,} | {m['predicted']:,} |"
                f" {m['true_positives']:,} | {_number(m['precision'])} |"
                f" {_number(m['recall'])} | {_number(m['f1'])} |"
                f" {m['signature_seconds']:.1f} | {m['pair_seconds']:.1f} |")
        best = max(rows, key=lambda m: m["f1"])
        verified = next(m for m in rows if m["method"] == "nearsim verified")
        ahead = [m for m in rows if m["f1"] > verified["f1"]]
        if ahead:
            comment = (f"nearsim's verified search (F1 {_number(verified['f1'])}) is NOT the"
                       f" best here: {best['method']} reaches F1 {_number(best['f1'])}.")
        else:
            runner = max((m for m in rows if m is not verified), key=lambda m: m["f1"])
            comment = (f"Verified search has the best F1 ({_number(verified['f1'])}; next"
                       f" {runner['method']} at {_number(runner['f1'])}): it joins the"
                       f" shingle sets exactly, so a positive is missed only where two"
                       f" different shingles share a 64-bit hash; the calibrated radius of"
                       f" {verified['extra']['radius']} bits would have held"
                       f" {verified['extra']['positives_within_radius']:,} of the positives.")
        comment += " " + _speed_comment(verified, rows)
        seed = next(m for m in rows if m["method"] == "simhash hamming<=6")
        lines += ["", comment + f" The seeds' hamming <= 6 alone has precision"
                  f" {_number(seed['precision'])} and recall {_number(seed['recall'])}.", ""]
        for m in rows:
            if m["notes"]:
                lines.append(f"- {m['method']}: {m['notes']}")
        lines.append("")
    lines += [
        "#### SimHash profiles: best F1 over the radius 0..24",
        "",
        "| profile | threshold | best radius | precision | recall | F1 | recall at r=6 |"
        " fingerprints (s) | pairs within 24 (s) |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    best_profiles: dict[float, tuple[str, float]] = {}
    for profile, curve in results["radius_curves"].items():
        for threshold in THRESHOLDS:
            c = curve[str(threshold)]
            r = int(np.argmax(c["f1"]))
            if c["f1"][r] > best_profiles.get(threshold, ("", -1.0))[1]:
                best_profiles[threshold] = (profile, c["f1"][r])
            lines.append(
                f"| {profile} | {threshold} | {r} | {_number(c['precision'][r])} |"
                f" {_number(c['recall'][r])} | {_number(c['f1'][r])} |"
                f" {_number(c['recall'][SEED_RADIUS])} | {curve['signature_seconds']:.1f} |"
                f" {curve['pair_seconds']:.1f} |")
    lines += ["", "Radius alone is a blunt filter: the best profile by F1 is "
              + ", ".join(f"{p} at S_R >= {t} (F1 {_number(f)})"
                          for t, (p, f) in best_profiles.items())
              + "; no radius gives both high precision and high recall, which is why"
              " verified search checks the text.", ""]
    lines += [
        "#### Seed 003: Hamming distance between an original and its modified copy",
        "",
        "| edit | amount | pairs | mean distance | median | 90th pct. | share <= 6 | mean S_R |",
        "|---|---|---:|---:|---:|---:|---:|---:|",
    ]
    for row in results["seed003"]:
        lines.append(
            f"| {row['kind']} | {row['amount']} | {row['pairs']} |"
            f" {row['mean_distance']:.1f} | {row['median_distance']:.1f} |"
            f" {row['p90_distance']:.1f} | {_number(row['within_6'])} |"
            f" {_number(row['mean_s_r'])} |")
    lines += ["", results["seed003_finding"], ""]
    return "\n".join(lines)


def _total_seconds(method: dict[str, Any]) -> float:
    return float(method["signature_seconds"] + method["pair_seconds"])


def _speed_comment(verified: dict[str, Any], rows: Sequence[dict[str, Any]]) -> str:
    """Which methods on the same documents finished sooner than verified search."""
    faster = sorted((m for m in rows if m["documents"] == verified["documents"]
                     and _total_seconds(m) < _total_seconds(verified)), key=_total_seconds)
    own = f"{_total_seconds(verified):.1f} s (signatures + pairs)"
    if not faster:
        return f"It is also the fastest method on the whole corpus: {own}."
    names = ", ".join(f"{m['method']} ({_total_seconds(m):.1f} s)" for m in faster)
    return f"It is NOT the fastest: {own}, against {names}."


def seed003_finding(table: Sequence[dict[str, Any]]) -> str:
    def mean(kind: str) -> float:
        rows = [r for r in table if r["kind"] == kind]
        total = sum(r["pairs"] for r in rows)
        return sum(r["mean_distance"] * r["pairs"] for r in rows) / total if total else 0.0

    insertion, deletion = mean("insertion"), mean("deletion")
    verdict = "as seed 003 found, deletions hurt far more" if deletion > 1.5 * insertion else (
        "unlike seed 003, deletions do not hurt far more than insertions")
    return (f"Mean distance {insertion:.1f} bits after an insertion and {deletion:.1f} after a"
            f" deletion: {verdict}; a deletion removes shingles (S_R falls with the amount),"
            f" while an insertion of the file's own text mostly repeats shingles the set"
            f" already has.")
