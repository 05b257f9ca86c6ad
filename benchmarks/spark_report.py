"""The summary and the docs/BENCHMARKS.md section of benchmarks/spark.py, from its results.

:func:`summary` prints the tables of a run; :func:`spark_section` turns the
JSON a run writes into the Spark section of docs/BENCHMARKS.md, with what
the measured figures imply for a billion documents on N executors
(:func:`billion`, from the band layouts of :func:`band_model`) next to
Manku, Jain and Das Sarma's published figure.  Nothing is measured here.
"""

from __future__ import annotations

import math
import textwrap
from collections.abc import Sequence
from typing import Any

from nearsim.core.bands import band_radius, band_width

from .common import print_table, wrap
from .spark_dedup import dedup_section
from .spark_jobs import DEFAULT_RADII, MASTERS, SHUFFLE_PARTITIONS

BILLION = 1_000_000_000


def band_model(distinct: int, k: int) -> dict[str, Any]:
    """The layout :func:`nearsim.spark.search.choose_bands` picks for ``distinct``
    fingerprints and radius ``k``, and its cost model per document.

    ``rows``: the probe and index rows each fingerprint puts into the band
    join (what is shuffled); ``chance``: the candidates it meets by chance
    among random fingerprints, each pair counted once (``x < y``, as the
    measured candidates are); ``work``: the two together.
    """
    from nearsim.spark.search import choose_bands

    bands = choose_bands(distinct, k)
    widths, radii, rows, chance = [], [], 0.0, 0.0
    for band in range(bands):
        radius = band_radius(k, bands, band)
        if radius < 0:
            continue
        width = band_width(bands, band)
        probes = sum(math.comb(width, bits) for bits in range(radius + 1))
        widths.append(width)
        radii.append(radius)
        rows += probes + 1
        chance += probes * distinct / 2.0**width / 2
    return {"distinct": distinct, "bands": bands, "widths": widths, "radii": radii,
            "rows": rows, "chance": chance, "work": rows + chance}  # fmt: skip


def summary(report: dict[str, Any]) -> None:
    print(f"\nSpark against PostgreSQL, {report['cpu']} ({report['cores']} cores)\n")
    if report["sizes"]:
        rows = []
        for size in report["sizes"]:
            for k, run in size["postgresql"].items():
                rows.append([f"{size['rows']:,}", k, "nearsim_pairs (PostgreSQL)",
                             f"{run['pairs']:,}", f"{run['seconds']:.1f}", "", ""])  # fmt: skip
                for spark in size["spark"]:
                    if str(spark["k"]) != k:
                        continue
                    rows.append([f"{size['rows']:,}", k,
                                 f"nearsim.spark.pairs, {spark['master']}",
                                 f"{spark['pairs']:,}", f"{spark['seconds']:.1f}",
                                 f"{spark['shuffle_bytes_per_doc']:,.0f}",
                                 f"{spark['candidates_per_doc']:.2f}"])  # fmt: skip
                    rows.append([f"{size['rows']:,}", k,
                                 f"  counted from groups, {spark['master']}", "",
                                 f"{spark['groups_seconds']:.1f}",
                                 f"{spark['groups_shuffle_bytes'] / size['rows']:,.0f}", ""])
        print_table(["documents", "k", "run", "pairs", "seconds", "shuffle B/doc", "cand./doc"],
                    rows, ">><>>>>")
        wrap("Spark's counts equal nearsim_pairs's. Shuffle bytes: written by the job's stages"
             " (Spark's monitoring API). Candidates: rows of the band join before the distance"
             " check, over the distinct fingerprints, per document.")
    corpus = report["corpus"]
    if corpus:
        print(f"\nThe evaluation corpus: {corpus['documents']:,} documents\n")
        print_table(["question", "result", "PostgreSQL s", *(f"{m} s" for m in MASTERS),
                     "shuffle B/doc", "cand./doc"],
                    corpus_rows(corpus), "<>>>>>>")  # fmt: skip
        wrap("Every Spark answer equals PostgreSQL's: fingerprints row by row (and the"
             " client's nearsim.simhash), pair counts, verified pairs row by row.")
    dedup = report.get("dedup")
    if dedup:
        print(f"\nnearsim spark dedup, {dedup['documents']:,} documents:"
              f" {dedup['spark']['seconds']:.1f} s on {dedup['spark']['master']};"
              f" PostgreSQL (nearsim-load and nearsim_clusters_verified)"
              f" {dedup['postgresql']['seconds']:.1f} s; ratio {dedup['ratio']:.1f}")


def _question(run: dict[str, Any]) -> str:
    if run["question"] == "fingerprints":
        return "fingerprints"
    if run["question"] == "pairs":
        return f"pairs, k = {run['k']}"
    return f"verified pairs, S_R >= {run['min_similarity']}"


def _seconds(value: float) -> str:
    """Seconds with two decimals below one, else one."""
    return f"{value:.2f}" if value < 1 else f"{value:.1f}"


def corpus_rows(corpus: dict[str, Any], markdown: bool = False) -> list[list[str]]:
    """One row per question: result, PostgreSQL seconds, seconds per master, shuffle bytes
    and candidates per document (of each master, when they differ)."""
    postgresql = corpus["postgresql"]
    by_question: dict[str, list[dict[str, Any]]] = {}
    for run in corpus["spark"]:
        by_question.setdefault(_question(run), []).append(run)
    table = []
    for question, runs in by_question.items():
        first = runs[0]
        if first["question"] == "fingerprints":
            result = f"{first['result']:,} fingerprints"
            database = (f"{_seconds(postgresql['simhash_seconds'])} (client"
                        f" {_seconds(corpus['client_seconds'])})")
        elif first["question"] == "pairs":
            result = f"{first['result']:,} pairs"
            database = _seconds(postgresql["pairs"][str(first["k"])]["seconds"])
        else:
            result = f"{first['result']:,} pairs"
            database = _seconds(postgresql["verified"][str(first["min_similarity"])]["seconds"])
        seconds = {run["master"]: _seconds(run["seconds"]) for run in runs}
        shuffle = " / ".join(dict.fromkeys(f"{run['shuffle_bytes_per_doc']:,.0f}" for run in runs))
        candidates = ("-" if first["candidates_per_doc"] is None
                      else f"{first['candidates_per_doc']:,.2f}")  # fmt: skip
        label = f"`{question}`" if markdown and question == "fingerprints" else question
        table.append([label, result, database, *(seconds.get(m, "-") for m in MASTERS), shuffle,
                      candidates])
    return table


def _prose(text: str) -> str:
    """``text`` as one paragraph of lines of at most 100 characters."""
    return textwrap.fill(" ".join(text.split()), width=100, break_long_words=False,
                         break_on_hyphens=False)  # fmt: skip


def _markdown(header: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(str(cell) for cell in row) + " |" for row in rows]
    return "\n".join(lines)


def _duration(seconds: float) -> str:
    if seconds < 120:
        return f"{seconds:.0f} seconds"
    if seconds < 2 * 3600:
        return f"{seconds / 60:.0f} minutes"
    if seconds < 2 * 86400:
        return f"{seconds / 3600:.1f} hours"
    return f"{seconds / 86400:.1f} days"


_SUPERSCRIPTS = str.maketrans("-0123456789", "⁻⁰¹²³⁴⁵⁶⁷⁸⁹")


def _power(value: float) -> str:
    """``value`` as a mantissa with one decimal times a power of ten (superscript)."""
    exponent = math.floor(math.log10(value))
    mantissa = value / 10**exponent
    if round(mantissa, 1) >= 10:
        mantissa, exponent = mantissa / 10, exponent + 1
    return f"{mantissa:.1f} \u00d7 10{str(exponent).translate(_SUPERSCRIPTS)}"


def _bytes(value: float) -> str:
    for unit, scale in (("PB", 1e15), ("TB", 1e12), ("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if value >= scale:
            return f"{value / scale:.1f} {unit}"
    return f"{value:.0f} B"


# Manku, Jain and Das Sarma (WWW 2007): a batch of 1 million queries against
# 8 billion fingerprints at k = 3 in about 100 s on 200 mappers.
MANKU_QUERIES = 1_000_000
MANKU_FINGERPRINTS = 8_000_000_000
MANKU_SECONDS = 100
MANKU_MAPPERS = 200
EXECUTOR_CORES = 4
EXECUTORS = (50, 250, 1000)


def _layout(model: dict[str, Any]) -> str:
    return (f"{model['bands']} bands of {'/'.join(map(str, model['widths']))} bits (radii"
            f" {'/'.join(map(str, model['radii']))})")


def billion(results: dict[str, Any]) -> str:
    """What the measured k = 3 run implies for all pairs of a billion documents.

    Times come from the largest synthetic size; a run without one (the
    corpus alone) gives the model and the shuffle, not a time: on 20,500
    documents Spark's fixed cost of seconds per job is most of the time.
    """
    model = results.get("model") or {}
    if "3" not in model:
        return ""
    base: dict[str, Any] | None = None
    documents, what = 0, ""
    if results.get("sizes"):
        size = results["sizes"][-1]
        runs = [run for run in size["spark"] if run["k"] == 3 and run["master"] == MASTERS[0]]
        if runs:
            base, documents = runs[0], size["rows"]
            what = f"the {documents:,} synthetic fingerprints"
    timed = base is not None
    if base is None and results.get("corpus"):
        corpus = results["corpus"]
        runs = [run for run in corpus["spark"] if run["question"] == "pairs"
                and run.get("k") == 3 and run["master"] == MASTERS[0]]  # fmt: skip
        if runs:
            base, documents = runs[0], corpus["documents"]
            what = f"the evaluation corpus's {documents:,} documents"
    if base is None:
        return ""
    measured, large = model["3"]["measured"], model["3"]["billion"]
    work = large["work"] / measured["work"]
    per_doc = base["seconds"] / documents  # core-seconds: local[1] runs one task at a time
    core_seconds = per_doc * work * BILLION
    shuffle = base["shuffle_bytes_per_doc"] * large["rows"] / measured["rows"]
    manku_batches = BILLION / MANKU_QUERIES
    manku_share = BILLION / MANKU_FINGERPRINTS
    manku_mapper_seconds = manku_batches * manku_share * MANKU_SECONDS * MANKU_MAPPERS
    on = "; ".join(f"N = {n:,} ({n * EXECUTOR_CORES:,} cores): about"
                   f" {_duration(core_seconds / (n * EXECUTOR_CORES))}" for n in EXECUTORS)
    manku = f"""Manku, Jain and Das Sarma (WWW 2007) report a batch of {MANKU_QUERIES:,} queries
against {MANKU_FINGERPRINTS / 1e9:.0f} billion fingerprints at k = 3 in about {MANKU_SECONDS} s
on {MANKU_MAPPERS} mappers, each mapper solving the whole batch against its share of the
fingerprints. All pairs of a billion is {manku_batches:,.0f} such batches against
{manku_share:.3g} of their data: about {_power(manku_mapper_seconds)} mapper-seconds by their
figure, {_duration(manku_mapper_seconds / MANKU_MAPPERS)} on {MANKU_MAPPERS} mappers"""
    grows = f"""The work per document grows with the collection, because chance matches in a band
grow with the number of fingerprints; the band layout then takes fewer, wider bands. The cost
model of `choose_bands` (probe and index rows plus chance candidates per document) picks
{_layout(measured)} for the {measured["distinct"]:,} distinct fingerprints measured:
{measured["rows"]:,.0f} join rows and {measured["chance"]:,.1f} chance candidates per document;
for a billion distinct fingerprints {_layout(large)}: {large["rows"]:,.0f} rows and
{large["chance"]:,.1f} chance candidates, {work:.1f} times the work per document."""
    if timed:
        text = f"""From `local[1]` at k = 3 on {what}: {base["seconds"]:.1f} s, or
{per_doc * 1e6:,.0f} core-seconds per million documents, with
{base["shuffle_bytes_per_doc"]:,.0f} bytes of shuffle per document. {grows} So all pairs of 10⁹
documents at k = 3 take about {_power(core_seconds)} core-seconds, on N executors of
{EXECUTOR_CORES} cores: {on}; and some {_bytes(shuffle)} of shuffle per document,
{_bytes(shuffle * BILLION)} in all, which the network and the executors' disks must carry in that
time (local mode measured no network). {manku}, against {_duration(core_seconds / MANKU_MAPPERS)}
estimated here on as many cores (two decades of hardware apart, and an estimate from one
machine)."""
    else:
        text = f"""This run has no synthetic size (`SPARK_SIZES=`), and on {what} Spark's fixed
cost of seconds per job is most of the {base["seconds"]:.1f} s of `local[1]` at k = 3, so no time
is estimated from it: run `make bench-spark` with its million fingerprints for that. The shuffle
per document does carry over: {base["shuffle_bytes_per_doc"]:,.0f} bytes here. {grows} That
makes some {_bytes(shuffle)} of shuffle per document for a billion documents at k = 3,
{_bytes(shuffle * BILLION)} in all, which the network and the executors' disks must carry.
{manku}."""
    if "6" in model:
        six_measured, six = model["6"]["measured"], model["6"]["billion"]
        six_runs = [run for run in (results["sizes"][-1]["spark"] if timed else [])
                    if run["k"] == 6 and run["master"] == MASTERS[0]]  # fmt: skip
        growth = six["work"] / six_measured["work"]
        estimate = ""
        if six_runs:
            six_core = six_runs[0]["seconds"] / documents * growth * BILLION
            six_shuffle = (six_runs[0]["shuffle_bytes_per_doc"] * six["rows"]
                           / six_measured["rows"] * BILLION)  # fmt: skip
            estimate = (f", about {six_core / 3600:,.0f} core-hours and {_bytes(six_shuffle)}"
                        " of shuffle for a billion documents")
        text += f""" At k = 6 the same model gives {_layout(six)}: {six["rows"]:,.0f} join rows and
{six["chance"]:,.0f} chance candidates per document, {growth:.0f} times the work per document
measured at k = 6{estimate}: at that scale k = 6 calls for another layout (more copies of the
index with fewer probes each), not only more executors."""
    return "#### One billion documents on N executors, on paper\n\n" + _prose(text)


def separate_runs(results: dict[str, Any]) -> str:
    """A sentence on the synthetic sizes measured by runs of their own (``--add-to``)."""
    runs = [size for size in results.get("sizes", []) if "run" in size]
    if not runs:
        return ""

    def settings(run: dict[str, Any]) -> str:
        radii = " and ".join(str(k) for k in run.get("radii", []))
        return (f"`make bench-spark-10m`, {run['seconds']:.0f} s;"
                f" {run.get('shuffle_partitions', SHUFFLE_PARTITIONS)} shuffle partitions"
                + (f", k = {radii} only" if radii and run["radii"] != list(DEFAULT_RADII)
                   else ""))

    return " " + " ".join(
        f"The {size['rows']:,} fingerprints were measured by a run of their own"
        f" ({settings(size['run'])}), PostgreSQL's answers in that run too." for size in runs)


def spark_section(results: dict[str, Any] | None) -> str:
    """The Spark section of docs/BENCHMARKS.md, from the JSON ``make bench-spark`` writes.

    Markdown to put under a heading of the caller's (``### On Apache
    Spark`` or similar); it has ``####`` headings of its own: the
    evaluation corpus, the synthetic fingerprints, and what the figures
    imply for a billion documents.  ``None`` (no results) gives a sentence
    saying so.
    """
    if not results:
        return "No results of `make bench-spark` (benchmarks/spark.py) next to this run."
    memory = str(results["driver_memory"])
    memory = f"{memory[:-1]} GB" if memory.lower().endswith("g") else memory
    parts = [_prose(f"""Written by `make bench-spark` (`python -m benchmarks.spark`,
{results["seconds"]:.0f} s): Spark {results["spark"]} in local mode ({", ".join(
        f"`{master}`" for master in results["masters"])}, a fresh session for each, {memory} of
driver memory, {results["shuffle_partitions"]} shuffle partitions)
against PostgreSQL {results["postgresql"].split(" (")[0]}, one backend and no parallel workers, on
the same data in the same run; nearsim {results["nearsim"]}, {results["cpu"]},
{results["cores"]} cores. Each time is one run, wall clock. Shuffle bytes are those written by
the job's stages (Spark's monitoring API), per document; candidates are the rows of the band
join before the distance check, per document (for verified pairs: of the join of the shingle
prefixes, before the overlaps are counted). Every Spark answer is checked against PostgreSQL's
in the run.{separate_runs(results)}""")]
    corpus = results.get("corpus")
    if corpus:
        intro = f"""{corpus["documents"]:,} documents of `benchmarks/corpus.py` (size
{corpus["size"]}, seed {corpus["seed"]}: {corpus["originals"]:,} real texts and their edited copies,
{corpus["bytes"] / 1e6:.1f} MB), in a table whose fingerprints the server computed and in a
Parquet file. Fingerprints on Spark are collected to the driver and equal, row by row, the
stored ones and the client's `nearsim.simhash`; the pair counts equal `nearsim_pairs`'s; the
verified pairs equal `nearsim_pairs_verified`'s row by row (the same pairs, distances,
similarities and `short`). Fingerprints in PostgreSQL: `SELECT count(simhash(body))`, and the
client's `nearsim.simhash` in one Python process."""
        parts.append("#### The evaluation corpus\n\n" + _prose(intro) + f"""

{_markdown(["question", "result", "PostgreSQL s", *(f"`{m}` s" for m in results["masters"]),
            "shuffle B/doc", "candidates/doc"], corpus_rows(corpus, markdown=True))}""")
    if results.get("sizes"):
        rows = []
        for size in results["sizes"]:
            for k, run in size["postgresql"].items():
                spark = {s["master"]: s for s in size["spark"] if str(s["k"]) == k}
                first = next(iter(spark.values()))
                rows.append([f"{size['rows']:,}", k, f"{run['pairs']:,}", _seconds(run["seconds"]),
                             *(_seconds(spark[m]["seconds"]) if m in spark else "-"
                               for m in results["masters"]),
                             " / ".join(_seconds(spark[m]["groups_seconds"]) for m in spark),
                             f"{first['shuffle_bytes_per_doc']:,.0f}",
                             f"{first['candidates_per_doc']:.2f}"])  # fmt: skip
        intro = f"""The text-like sets of the benchmarks (`benchmarks/docsets.py`: a block of
10,000 identical fingerprints, clusters of Zipf sizes up to 100, exact copies and variants with 1
to 8 bits flipped) in an enabled table and a Parquet file: `SELECT count(*) FROM
nearsim_pairs(tbl, k)` against `nearsim.spark.pairs(df, "id", k).count()`, which makes every
pair (those of the identical block included); "from groups" is `hamming_groups(...).count()`,
the same count without making the pairs inside groups of identical fingerprints. Every count
equals `nearsim_pairs`'s. Shuffle and candidates are those of `{results["masters"][0]}`."""
        parts.append("#### Synthetic fingerprints\n\n" + _prose(intro) + f"""

{_markdown(["documents", "k", "pairs", "`nearsim_pairs` s",
            *(f"`{m}` s" for m in results["masters"]), "from groups s",
            "shuffle B/doc", "candidates/doc"], rows)}""")
    paper = billion(results)
    if paper:
        parts.append(paper)
    dedup = dedup_section(results.get("dedup"))
    if dedup:
        parts.append(dedup)
    return "\n\n".join(parts)
