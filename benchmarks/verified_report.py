"""The targets, the cost curve and the Markdown of benchmarks/verified.py, from its results.

The summary rows (in the columns of benchmarks.run's summary), what the
budgets cut, the points of the cost curve and its figure
(``verified-cost.png``), and ``verified.md``, the section of
docs/BENCHMARKS.md.  Nothing is measured here.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from .pair_methods import MINHASH_PERMUTATIONS
from .scoring import THRESHOLDS
from .verified_lookups import LOOKUPS, RADIUS_PATH
from .verified_sets import MINHASH, NEARSIM

__all__ = ["FIGURE", "curve_points", "cut_list", "draw_cost_curve", "markdown", "summary_rows"]

TARGET_RECALL = 0.99
TARGET_F1 = 0.995
TARGET_P50_MS = 3.0
TARGET_P90_MS = 10.0
SUMMARY_COLUMNS = ("measurement", "value", "baseline", "ratio", "target", "met")
FIGURE = "verified-cost.png"


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
        met = (enough and lookup["p50_ms"] <= TARGET_P50_MS
               and lookup["p90_ms"] <= TARGET_P90_MS)  # fmt: skip
        rows.append([f"nearsim_similar_verified p50 / p90, {lookup['documents']:,} documents,"
                     f" S_R >= {lookup['threshold']}, {lookup.get('path', RADIUS_PATH)}",
                     f"{lookup['p50_ms']:.2f} / {lookup['p90_ms']:.2f} ms ({lookup['timed']}"
                     f" queries, {lookup['over_timeout']} over the timeout)", "-", "-",
                     f"<= {TARGET_P50_MS:g} / <= {TARGET_P90_MS:g} ms", "yes" if met else "no"])
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
        f" => t, measure => 's_r')` (statement_timeout {budgets['pair_seconds']:g} s);"
        " MinHashLSH + estimate ="
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
