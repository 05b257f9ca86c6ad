"""The section of docs/BENCHMARKS.md that benchmarks/minhash.py writes (``minhash.md``).

    .venv/bin/python -m benchmarks.minhash_report RESULTS.json [EARLIER.json ...] --output-dir DIR

writes ``minhash.json`` and ``minhash.md`` into DIR from the results of
runs of benchmarks/minhash.py: the first file's sizes, and those of the
others that it does not have (each size says which run measured it).
Nothing is measured here.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

__all__ = ["markdown", "merge", "rows_of", "targets", "write"]

NAMES = {"nearsim": "nearsim_pairs_verified", "rensa": "Rensa LSH + estimate",
         "datasketch": "datasketch MinHashLSH + estimate"}
TARGET_SIZE = 100_000


def _table(header: Sequence[str], rows: Sequence[Sequence[object]]) -> list[str]:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return lines


def _gb(value: float | None) -> str:
    return "-" if value is None else f"{value / 1e9:.2f} GB"


def minhash_seconds(run: dict[str, Any], threshold: str, shingles: bool = True,
                    cpu: bool = False) -> float:
    """Everything a MinHash method does for one threshold (its signatures counted once):
    wall-clock seconds, or CPU seconds with ``cpu``."""
    signatures = dict(run["signature_cpu" if cpu else "signature_seconds"])
    if not shingles:
        signatures.pop("shingles", None)
    spent = run["thresholds"][threshold]["cpu" if cpu else "seconds"]
    return float(sum(signatures.values()) + sum(spent.values()))


def nearsim_cpu(outcome: dict[str, Any]) -> float:
    """CPU seconds of the backend and of this client reading the rows."""
    return float(outcome["backend_cpu"] + outcome["client_cpu"])


def minhash_peak(run: dict[str, Any], threshold: str) -> float:
    return float(max(run["signatures_peak"], run["thresholds"][threshold]["peak_above_baseline"]))


def rows_of(size: dict[str, Any], thresholds: Sequence[float]) -> list[list[str]]:
    """One row per method and threshold of one size."""
    rows = []
    for t in (str(t) for t in thresholds):
        nearsim = size["methods"]["nearsim"][t]
        rensa = size["methods"].get("rensa", {})
        rensa_seconds = (minhash_seconds(rensa, t) if "thresholds" in rensa else None)
        phases = nearsim.get("server_phases", {})
        steps = "; ".join(f"{k} {v['seconds']:.1f} (CPU {v['cpu']:.1f})"
                          for k, v in phases.items())
        rows.append([f"{size['documents']:,}", t, NAMES["nearsim"],
                     f"{nearsim['seconds']:.1f} ({nearsim_cpu(nearsim):.1f})",
                     f"query and rows to the client, CPU: backend {nearsim['backend_cpu']:.1f}"
                     f" + client {nearsim['client_cpu']:.1f}"
                     + (f"; counted in the server alone: {steps}" if steps else ""),
                     _gb(nearsim["peak_rss"]) + " (backend)", f"{nearsim['pairs']:,}",
                     "1.0000", "1.0000",
                     f"{nearsim['seconds'] / rensa_seconds:.2f}" if rensa_seconds else "-"])
        for library in ("rensa", "datasketch"):
            run = size["methods"].get(library)
            if run is None:
                continue
            if "thresholds" not in run:
                rows.append([f"{size['documents']:,}", t, NAMES[library], "not run", run.get(
                    "skipped", ""), "-", "-", "-", "-", "-"])
                continue
            spent = run["thresholds"][t]
            stages = {**run["signature_seconds"], **spent["seconds"]}
            scores = size["scores"][library][t]
            seconds = minhash_seconds(run, t)
            rows.append([f"{size['documents']:,}", t, NAMES[library],
                         f"{seconds:.1f} ({minhash_seconds(run, t, cpu=True):.1f})",
                         " + ".join(f"{k} {v:.1f}" for k, v in stages.items())
                         + f" ({spent['bands']} bands of {spent['rows']};"
                           f" {spent['candidates']:,} candidates)",
                         _gb(minhash_peak(run, t)) + " (process)", f"{spent['found']:,}",
                         f"{scores['precision']:.4f}", f"{scores['recall']:.4f}",
                         f"{seconds / rensa_seconds:.2f}" if rensa_seconds else "-"])
    return rows


def targets(results: dict[str, Any]) -> list[list[str]]:
    """nearsim exact, and no slower than Rensa at 100,000 documents."""
    rows = []
    sizes = [s["documents"] for s in results["sizes"]]
    chosen = TARGET_SIZE if TARGET_SIZE in sizes else max(sizes)
    for size in results["sizes"]:
        if size["documents"] != chosen:
            continue
        for t in (str(t) for t in results["thresholds"]):
            nearsim = size["methods"]["nearsim"][t]
            check = size["checks"][t]
            exact = size.get("truth", {}).get("nearsim_equal", {}).get(t)
            sound = check["nearsim_below"] == 0 and check["minhash_only_at_or_above"] == 0
            rows.append([f"nearsim exact, {size['documents']:,} documents, S_R >= {t}",
                         ("equal to the exact truth" if exact else
                          "NOT equal to the exact truth" if exact is not None else
                          "no exact truth at this size")
                         + f"; {check['nearsim_below']} of {check['nearsim_sampled']:,} sampled"
                           f" pairs below; {check['minhash_only_at_or_above']} of the"
                           f" {check['minhash_only_checked']:,} MinHash-only pairs checked"
                           " at or above", "recall 1.0",
                         "yes" if sound and exact is not False else "no"])
            rensa = size["methods"].get("rensa", {})
            if "thresholds" in rensa:
                full, lean = minhash_seconds(rensa, t), minhash_seconds(rensa, t, False)
                cpu = minhash_seconds(rensa, t, cpu=True)
                lean_cpu = minhash_seconds(rensa, t, False, cpu=True)
                rows.append([f"nearsim time / Rensa time, {size['documents']:,} documents,"
                             f" S_R >= {t}",
                             f"{nearsim['seconds']:.1f} s / {full:.1f} s ="
                             f" {nearsim['seconds'] / full:.2f}x; CPU"
                             f" {nearsim_cpu(nearsim):.1f} s / {cpu:.1f} s ="
                             f" {nearsim_cpu(nearsim) / cpu:.2f}x, the backend's alone"
                             f" {nearsim['backend_cpu']:.1f} s ="
                             f" {nearsim['backend_cpu'] / cpu:.2f}x (Rensa without the Python"
                             f" shingles: {lean:.1f} s, {nearsim['seconds'] / lean:.2f}x; CPU"
                             f" {lean_cpu:.1f} s, {nearsim_cpu(nearsim) / lean_cpu:.2f}x)",
                             "<= 1.0x", "yes" if nearsim["seconds"] <= full else "no"])
    return rows


def growth(results: dict[str, Any], target: int = 1_000_000) -> list[str]:
    """Seconds and memory per size, and, when ``target`` documents were not measured,
    what the largest size's per-document memory makes of them."""
    sizes = results["sizes"]
    if not sizes:
        return []
    lines = []
    for method in ("nearsim", "rensa", "datasketch"):
        cells = []
        for size in sizes:
            run = size["methods"].get(method, {})
            for t in (str(t) for t in results["thresholds"]):
                if method == "nearsim" and t in run:
                    seconds, cpu = run[t]["seconds"], nearsim_cpu(run[t])
                    peak = run[t]["peak_rss"] or 0
                elif "thresholds" in run:
                    seconds, cpu = minhash_seconds(run, t), minhash_seconds(run, t, cpu=True)
                    peak = minhash_peak(run, t)
                else:
                    continue
                cells.append((size["documents"], t, seconds, cpu, peak))
        if not cells:
            continue
        lines.append(f"- {NAMES[method]}: " + "; ".join(
            f"{n:,} documents at {t}: {seconds:.1f} s (CPU {cpu:.1f}), {_gb(peak)}"
            for n, t, seconds, cpu, peak in cells) + ".")
        largest = max(n for n, *_ in cells)
        if largest < target:
            peak = max(p for n, _, _, _, p in cells if n == largest)
            projected = peak * target / largest
            total = results.get("memory_total")
            times = []
            for t in (str(t) for t in results["thresholds"]):
                points = sorted((n, cpu) for n, at, _, cpu, _ in cells if at == t and cpu > 0)
                if len(points) >= 2 and points[-1][0] > points[-2][0]:
                    (n0, c0), (n1, c1) = points[-2], points[-1]
                    power = math.log(c1 / c0) / math.log(n1 / n0)
                    times.append(f"at {t} about {c1 * (target / n1) ** power:,.0f} CPU seconds"
                                 f" (growing as documents^{power:.2f} from {n0:,} to {n1:,})")
            lines.append(
                f"  Not measured at {target:,} documents. Memory in proportion to {largest:,}:"
                f" about {_gb(projected)}"
                + (f" ({projected / total:.1f} times this machine's {_gb(total)})"
                   if total else "")
                + (f"; time, the last two sizes' growth carried on: {'; '.join(times)}"
                   if times else "") + ".")
    return lines


def time_split(results: dict[str, Any]) -> list[str]:
    """Where nearsim's CPU goes, from the server's phases: the C join, the PL/Python
    function around it, and sending the rows (backend) and reading them (client)."""
    lines = []
    for size in results["sizes"]:
        for t, outcome in size["methods"]["nearsim"].items():
            phases = outcome.get("server_phases")
            if not phases:
                continue
            join = phases["C join"]["cpu"]
            wrapped = phases["nearsim_pairs_verified"]["cpu"]
            total = nearsim_cpu(outcome)
            sending = outcome["backend_cpu"] - wrapped
            lines.append(
                f"- {size['documents']:,} documents, S_R >= {t}: {total:.1f} CPU seconds ="
                f" the C join {join:.1f} ({join / total:.0%}) + the PL/Python function"
                f" around it {wrapped - join:.1f} ({(wrapped - join) / total:.0%}) + sending"
                f" the rows {sending:.1f} ({sending / total:.0%}) + reading them in the"
                f" client {outcome['client_cpu']:.1f} ({outcome['client_cpu'] / total:.0%});"
                f" {outcome['pairs']:,} rows. (From separate runs of the query that count the"
                " rows in the server, so the parts add up only roughly.)")
    return lines


def markdown(results: dict[str, Any]) -> str:
    thresholds = results["thresholds"]
    made_for = "both thresholds, in full at each" if len(thresholds) > 1 else "its threshold"
    lines = [
        f"Written by `{results['command']}` (`make bench-minhash`; {results['mode']} run,"
        f" {results.get('seconds', 0):.0f} s, started {results['started']}): nearsim"
        f" {results['nearsim']} (extension {results['nearsim_extension']}), PostgreSQL"
        f" {results['server_version']} (shared_buffers {results['shared_buffers']}, work_mem"
        f" {results['work_mem']}, no parallel workers), Rensa {results['rensa']}, datasketch"
        f" {results['datasketch']}, Python {results['python']}; {results['cpu']}."
        " benchmarks/minhash.py and benchmarks/sketches.py say how each number is measured."
        " All pairs with S_R >= s on the first N documents of the evaluation corpus; nearsim ="
        " `nearsim_pairs_verified(tbl, min_similarity => s, measure => 's_r')` on a table loaded"
        " beforehand, its"
        " rows sent to the client (binary COPY); Rensa and datasketch = MinHash of the same"
        " word 3-shingles (128 permutations), LSH with bands chosen for s as datasketch"
        " chooses them (Rensa: among the divisors of 128), the candidates kept when the"
        f" estimate is >= s, each in its own process, Rensa on"
        f" {results['options']['rensa_threads']} thread(s). Seconds of a MinHash method"
        f" count its shingles and signatures, made once for {made_for}."
        " CPU seconds (in brackets) are of every thread of the process (for nearsim: the"
        " backend and this client reading its rows): the machine is shared, and the wall"
        " clock counts the others' work too."
        " Memory: nearsim's is the backend's peak resident set during the query (its peak"
        " reset before it; the shared buffers it touches and the 0.2 GB of a backend at rest"
        " included: what it held before the query, another query's, would hide in a"
        " difference); a MinHash method's the process's"
        " peak above its resident set after its imports. Precision and recall are against"
        " nearsim's pairs, which the checks below show to be the exact truth.",
        "",
        "### Targets",
        "",
        *_table(["measurement", "value", "target", "met?"], targets(results)),
        "",
        "### Seconds, memory, precision and recall",
        "",
        *_table(["documents", "S_R >=", "method", "seconds (CPU)", "steps (s)", "peak memory",
                 "pairs", "precision", "recall", "seconds / Rensa's"],
                [row for size in results["sizes"] for row in rows_of(size, thresholds)]),
        "",
        "### Where nearsim's time goes",
        "",
        *(time_split(results) or ["The server's phases were not timed in this run."]),
        "",
        "### Growth with the documents",
        "",
        *growth(results),
        "",
        "### Loading and the checks",
        "",
    ]
    for size in results["sizes"]:
        load = size["load"]
        lines.append(
            f"- {size['documents']:,} documents ({load['copy_megabytes']:,.0f} MB sent by COPY,"
            f" table with its indexes {load['table_megabytes']:,.0f} MB): loading took "
            + " + ".join(f"{k} {v:.1f}" for k, v in load["seconds"].items()) + " s.")
        truth = size.get("truth")
        if truth:
            lines.append(
                f"  The exact truth in Python ({truth['seconds']:.0f} s,"
                f" {truth['shared_pairs']:,} pairs sharing a shingle): "
                + "; ".join(f"S_R >= {t}: {n:,} pairs, nearsim's "
                            + ("the same" if truth["nearsim_equal"][t] else "NOT the same")
                            for t, n in truth["positives"].items()) + ".")
        for t, check in size["checks"].items():
            lines.append(
                f"  S_R >= {t}: of {check['nearsim_sampled']:,} of nearsim's pairs drawn at"
                f" random, {check['nearsim_below']} below in Python (lowest"
                f" {check['nearsim_min_s_r']:.4f}); of the {check['minhash_only']:,} pairs only"
                f" MinHash found, {check['minhash_only_checked']:,} checked,"
                f" {check['minhash_only_at_or_above']} at or above"
                + (f" (highest {check['minhash_only_max_s_r']:.4f})."
                   if check["minhash_only_max_s_r"] is not None else "."))
    for command, started in results.get("earlier_runs", []):
        lines.append(f"- Sizes kept from an earlier run: `{command}`, started {started}.")
    lines.append("")
    return "\n".join(lines)


def merge(results: dict[str, Any], earlier: dict[str, Any]) -> dict[str, Any]:
    """``results`` with the sizes of ``earlier`` it does not have, in order of size."""
    have = {s["documents"] for s in results["sizes"]}
    for size in results["sizes"]:
        size.setdefault("run", {"command": results.get("command", "?"),
                                "started": results.get("started", "?")})
    kept = [s for s in earlier.get("sizes", []) if s["documents"] not in have]
    for size in kept:
        size.setdefault("run", {"command": earlier.get("command", "?"),
                                "started": earlier.get("started", "?")})
    merged = dict(results)
    merged["sizes"] = sorted(kept + results["sizes"], key=lambda s: s["documents"])
    runs = {tuple(r) for r in results.get("earlier_runs", [])}
    runs |= {(s["run"]["command"], s["run"]["started"]) for s in kept}
    merged["earlier_runs"] = sorted(runs)
    return merged


def write(results: dict[str, Any], output: Path) -> None:
    """``minhash.json`` and ``minhash.md`` into ``output``."""
    output.mkdir(parents=True, exist_ok=True)
    (output / "minhash.json").write_text(json.dumps(results, indent=1), encoding="utf-8")
    (output / "minhash.md").write_text(markdown(results), encoding="utf-8")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("results", type=Path, nargs="+", help="minhash.json files")
    parser.add_argument("--output-dir", type=Path, required=True)
    args = parser.parse_args(argv)
    loaded = []
    for path in args.results:
        try:
            loaded.append(json.loads(path.read_text(encoding="utf-8")))
        except (OSError, ValueError) as error:
            parser.error(f"{path}: {error}")
    results = loaded[0]
    for earlier in loaded[1:]:
        results = merge(results, earlier)
    write(results, args.output_dir)
    return 0


if __name__ == "__main__":
    sys.exit(main())
