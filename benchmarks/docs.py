"""Write docs/BENCHMARKS.md and its figures from the results of a benchmark run.

    .venv/bin/python -m benchmarks.docs RESULTS_DIR DOCS_DIR

RESULTS_DIR holds ``run.json`` (``python -m benchmarks.run --results``) and
what ``python -m benchmarks.quality --output-dir`` wrote (``quality.md`` and
its PNG figures) and ``python -m benchmarks.verified --output-dir`` wrote
(``verified.json``, ``verified.md``, its figure: verified search against
MinHashLSH on real near-duplicates, at 100,000 documents and along the cost
curve), ``defaults.md`` (``python -m benchmarks.defaults``: which measure and
threshold catch lightly edited copies), ``languages.md`` (``python -m
benchmarks.languages``: other scripts), ``minhash.md`` (``python -m
benchmarks.minhash``: verified pairs against Rensa and datasketch on 100,000
and 1,000,000 documents), ``scale.json`` when ``make bench-10m`` ran,
``concurrency.json`` when ``make bench-concurrency`` ran and ``hundred.json``
when ``make bench-100m`` (or ``benchmarks.hundred`` at another ``--size``)
ran; DOCS_DIR receives
``BENCHMARKS.md`` and the figures.
Nothing is measured here: every number comes from those files, so each
section shows one run.
"""

from __future__ import annotations

import argparse
import json
import math
import shutil
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")  # files only, no display
import matplotlib.pyplot as plt

LATENCY_FIGURE = "bench-search-latency.png"
LOOKUP_FIGURE = "bench-lookup-latency.png"
THROUGHPUT_FIGURE = "bench-signatures.png"
SEARCHES = ("index, generic plan", "index, custom plan", "WHERE hamming() <= k, index",
            "hamming()", "bit_count")


def table(header: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(str(cell) for cell in row) + " |" for row in rows]
    return "\n".join(lines)


def megabytes_per_second(nbytes: int, seconds: float) -> str:
    return f"{nbytes / 1e6 / seconds:.1f}"


def latency_figure(run: dict[str, Any], path: Path) -> None:
    figure, axes = plt.subplots(1, 2, figsize=(11, 4.2), sharey=True)
    for axis, kind in zip(axes, ("uniform", "text-like"), strict=True):
        searches = [s for s in run["searches"] if s["kind"] == kind and s["k"] == 6]
        searches.sort(key=lambda s: s["documents"])
        sizes = [s["documents"] for s in searches]
        for name in SEARCHES:
            axis.plot(sizes, [s["p50_ms"][name] for s in searches], marker="o", label=name)
        axis.set_xscale("log")
        axis.set_yscale("log")
        axis.set_title(f"{kind} fingerprints, radius 6")
        axis.set_xlabel("documents")
        axis.grid(True, which="both", alpha=0.3)
    axes[0].set_ylabel("p50 latency, ms (log)")
    axes[1].legend(loc="upper left", fontsize="small")
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    plt.close(figure)


def lookup_figure(run: dict[str, Any], path: Path) -> None:
    lookups = sorted(run["peers"]["lookups"], key=lambda lk: lk["documents"])
    figure, axis = plt.subplots(figsize=(6.5, 4.2))
    sizes = [lk["documents"] for lk in lookups]
    for name in lookups[0]["p50_ms"]:
        axis.plot(sizes, [lk["p50_ms"][name] for lk in lookups], marker="o", label=name)
    axis.set_xscale("log")
    axis.set_yscale("log")
    axis.set_xlabel("documents (3-8 KJV verses each)")
    axis.set_ylabel("p50 latency, ms (log)")
    axis.set_title("Is there a text like this one?")
    axis.grid(True, which="both", alpha=0.3)
    axis.legend(fontsize="small")
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    plt.close(figure)


def throughput_figure(run: dict[str, Any], path: Path) -> None:
    signatures = run["peers"]["signatures"]
    names = list(signatures["seconds"])
    rates = [signatures["bytes"] / 1e6 / signatures["seconds"][n] for n in names]
    reference = next(f for f in run["fingerprints"]["database PL/Python reference"]
                     if f["corpus"] == "KJV chapters")  # fmt: skip
    names.append("simhash(body, 'default/1') (server, PL/Python)")
    rates.append(reference["bytes"] / 1e6 / reference["seconds"])
    figure, axis = plt.subplots(figsize=(8, 3.6))
    axis.barh(names, rates, color="tab:blue")
    for y, rate in enumerate(rates):
        axis.text(rate, y, f" {rate:.1f}", va="center", fontsize="small")
    axis.set_xlabel("MB/s on one core (KJV chapters)")
    axis.set_title("Signatures per document")
    axis.invert_yaxis()
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    plt.close(figure)


def fingerprint_section(run: dict[str, Any]) -> str:
    rows = []
    for where, results in run["fingerprints"].items():
        for r in results:
            rows.append([where, r["corpus"], f"{r['documents']:,}", f"{r['bytes'] / 1e6:.1f}",
                         megabytes_per_second(r["bytes"], r["seconds"])])
    return table(["where", "corpus", "documents", "MB", "MB/s, one core"], rows)


def search_section(run: dict[str, Any]) -> str:
    rows = []
    for s in sorted(run["searches"], key=lambda s: (s["kind"], s["documents"], s["k"])):
        rows.append([s["set"], s["k"], f"{s['found_mean']:.1f}",
                     *(f"{s['p50_ms'][n]:.3f}" for n in SEARCHES),
                     f"{s['p50_ms']['hamming()'] / s['p50_ms'][SEARCHES[0]]:.1f}x"])
    return table(["set", "k", "rows found (mean)", *(f"{n} p50 ms" for n in SEARCHES),
                  "scan / index"], rows)


def peers_section(run: dict[str, Any]) -> str:
    signatures = run["peers"]["signatures"]
    parts = [table(["signature", "seconds", "MB/s"], [
        [name, f"{seconds:.2f}", megabytes_per_second(signatures["bytes"], seconds)]
        for name, seconds in signatures["seconds"].items()])]  # fmt: skip
    rows = []
    for lookup in sorted(run["peers"]["lookups"], key=lambda lk: lk["documents"]):
        for name in lookup["p50_ms"]:
            rows.append([f"{lookup['documents']:,}", name, f"{lookup['p50_ms'][name]:.2f}",
                         f"{lookup['p95_ms'][name]:.2f}", f"{lookup['found_mean'][name]:.1f}",
                         lookup["queries"][name]])
        builds = ", ".join(f"{n} {s:.1f} s" for n, s in lookup["build_seconds"].items())
        rows.append([f"{lookup['documents']:,}", f"index builds: {builds}; pg_trgm query plan:"
                     f" {lookup['trigram_plan']}", "", "", "", ""])
    parts.append(table(["documents", "query", "p50 ms", "p95 ms", "rows found", "queries"],
                       rows))
    parts.append(f"pgvector: {run['peers']['pgvector']}.")
    return "\n\n".join(parts)


def other_sections(run: dict[str, Any]) -> str:
    pairs = table(["set", "k", "pairs", "nearsim_pairs s", "nearsim_clusters s"], [
        [p["set"], p["k"], "-" if p["pairs"] is None else f"{p['pairs']:,}", f"{p['seconds']:.1f}",
         "-" if p["clusters_seconds"] is None else f"{p['clusters_seconds']:.1f}"]
        for p in run["pairs"]])  # fmt: skip
    storage = table(["set", "bands", "bytes/doc as loaded", "bytes/doc as built"], [
        [d["set"], d["bands"], f"{d['loaded_bytes_per_doc']:.1f}",
         f"{d['built_bytes_per_doc']:.1f}"] for d in run["storage"]])  # fmt: skip
    loads = table(["load", "documents", "MB", "seconds", "MB/s"], [
        [r["name"], f"{r['documents']:,}", f"{r['bytes'] / 1e6:.1f}", f"{r['seconds']:.1f}",
         megabytes_per_second(r["bytes"], r["seconds"])] for r in run["loads"]])  # fmt: skip
    return (f"### All pairs\n\n{pairs}\n\n### Index storage per document\n\n{storage}\n\n"
            f"### Bulk loading\n\n{loads}")


def missed_section(run: dict[str, Any], scale: dict[str, Any] | None = None,
                   verified: dict[str, Any] | None = None,
                   hnsw: dict[str, Any] | None = None,
                   concurrency: dict[str, Any] | None = None,
                   hundred: dict[str, Any] | None = None,
                   guard: dict[str, Any] | None = None,
                   verified_million: dict[str, Any] | None = None) -> str:
    missed = [r for r in run["summary"] if r["met"] == "no"]
    for other in (scale, verified, hnsw, concurrency, hundred, guard, verified_million):
        if other is not None:
            missed += [dict(zip(SCALE_COLUMNS, row, strict=True)) for row in other["summary"]
                       if row[5] == "no"]
    if not missed:
        return "Every target of the summary is met in this run."
    return "\n".join(f"- {r['measurement']}: {r['value']} (target {r['target']}; baseline"
                     f" {r['baseline']})" for r in missed)  # fmt: skip


SCALE_COLUMNS = ("measurement", "value", "baseline", "ratio", "target", "met")


def scale_section(scale: dict[str, Any] | None) -> str:
    """The default path at 1 and 10 million documents (benchmarks/scale.py), and 100M on paper."""
    if scale is None:
        return ("No results of `make bench-10m` (benchmarks/scale.py) next to this run.")
    summary = table(["measurement", "value", "baseline", "ratio", "target", "met?"],
                    scale["summary"])
    sets = table(["set", "k=3 p50 ms", "k=6 p50 ms", "k=10 p50 ms", "hamming() k=6 p50 ms",
                  "COPY rows/s, first / last million", "index bytes/doc as loaded / built"], [
        [d["set"], *(f"{d['p50_ms'][str(k)]:.3g}" for k in (3, 6, 10)),
         f"{d['scan_p50_ms']['6']:.0f}",
         " / ".join(f"{1e6 / seconds:,.0f}" for seconds in (d["copy_million_seconds"][0],
                                                              d["copy_million_seconds"][-1]))
         if d["copy_million_seconds"] else "-",
         f"{d['loaded_bytes_per_doc']:.1f} / {d['built_bytes_per_doc']:.1f}"]
        for d in scale["sets"]])  # fmt: skip
    return f"""Written by `make bench-10m` (`python -m benchmarks.scale`, {scale["seconds"]:.0f} s):
each table is enabled while empty, as `nearsim init` leaves it, then filled by one COPY per
million rows (the fingerprints supplied, as `nearsim-load` does), and searched as it is: no
rebuild, no setting changed. PostgreSQL's default `shared_buffers` (128 MB) holds a tenth of
the rotation indexes of 10 million documents; the rest is read from the operating system's
page cache. nearsim {scale["nearsim"]}, PostgreSQL {scale["postgresql"]}; {scale["cpu"]},
{scale["cores"]} cores.

{summary}

{sets}

{load_costs(scale)}{hundred_million(scale)}"""


def load_costs(scale: dict[str, Any]) -> str:
    """What the COPY of the first and the last million wrote and read, per row."""
    from .scale import io_cells  # the same cells as the benchmark prints
    rows, more = [], []
    for d in scale["sets"]:
        for which, cost in d.get("copy_million_io", {}).items():
            if which == "last" and len(d["copy_million_seconds"]) < 2:
                continue  # the first million was the last
            seconds = d["copy_million_seconds"][0 if which == "first" else -1]
            rows.append([f"{d['set']}, {which} million", f"{1e6 / seconds:,.0f}",
                         *io_cells(cost)])
        for name, cost in d.get("max_wal_size", {}).items():
            more.append([f"{d['set']}, a million more, max_wal_size {name}",
                         f"{cost['rows_per_second']:,.0f}", *io_cells(cost)])
    rows += more
    if not rows:
        return ""
    costs = table(["COPY", "rows/s", "WAL bytes/row", "full-page images/row",
                   "index blocks read/row", "blocks written/row"], rows)
    return f"""#### Why loading slows down as the table grows

Per row of each COPY, from the server's statistics in the same run (`pg_stat_wal`,
`pg_stat_bgwriter`, `pg_statio_all_tables`): the WAL it wrote and how many of its records
carried a whole 8 kB page (a full-page image: the first change to a page after a checkpoint),
the index blocks read from outside shared_buffers, and the blocks written out of
shared_buffers (by the checkpointer, the background writer or the backend itself). The
rows "a million more" load into the full uniform table after a checkpoint, first at the
server's max_wal_size and then with it raised (ALTER SYSTEM, reset afterwards).

{costs}

Each row adds an entry at a random place in the key order of each of three btrees. Their
access method, `nearsim_btree`, holds a transaction's entries in its memory
(`nearsim.insert_buffer`, 64 MB: 4 million entries) and inserts them in key order when it
commits, so that each COPY of a million rows walks the leaf pages of each index in order,
visiting each about once, instead of one random leaf per row. While the btrees fit in
shared_buffers, their pages stay there and a checkpoint writes each once. At 10 million
documents the three take about 900 MB against 128 MB of shared_buffers: the pages a COPY
visits are read from the operating system's page cache and written out again, once per page
rather than once per row, and the first change to each page after a checkpoint writes the
whole page into the WAL. Small transactions gain little: `nearsim-load` commits every 2,000
documents, a few entries per visited page (its rate into the full table, in the summary).
A server that takes many small transactions into a large table therefore still wants a
larger max_wal_size (fewer checkpoints: the rows "a million more" above) and a
shared_buffers that holds the rotation indexes (about 90 bytes per document).

"""


def hundred_million(scale: dict[str, Any]) -> str:
    """What the measured curve implies for 100 million documents on one server."""
    # the default bands only: the set with more bands is another layout
    by_size = {d["documents"]: d for d in scale["sets"]
               if d["set"].startswith("uniform") and "bands" not in d["set"]}
    if len(by_size) < 2:
        return ""
    small, large = min(by_size), max(by_size)
    growth = {k: by_size[large]["p50_ms"][str(k)] / by_size[small]["p50_ms"][str(k)]
              for k in (3, 6, 10)}
    steps = math.log10(100_000_000 / large) / math.log10(large / small)
    index_gb = by_size[large]["loaded_bytes_per_doc"] * 100e6 / 1e9
    projected = {k: by_size[large]["p50_ms"][str(k)] * growth[k] ** steps for k in growth}
    scan_ms = by_size[large]["scan_p50_ms"]["6"] * 100_000_000 / large
    return f"""#### 100 million documents, on paper

From the uniform sets above: the rotation indexes take
{by_size[large]["loaded_bytes_per_doc"]:.0f} bytes per document as loaded, so
{index_gb:.1f} GB at 100 million (the documents' own heap and primary key come on top). From
{small:,} to {large:,} documents the p50 grew {growth[3]:.1f}x at k = 3, {growth[6]:.1f}x at
k = 6 and {growth[10]:.1f}x at k = 10; the same growth again for the next tenfold gives about
{projected[3]:.1f} ms, {projected[6]:.1f} ms and {projected[10]:.0f} ms at 100 million, as
long as the indexes stay in memory (shared_buffers or the page cache: a server with
{index_gb * 1.5:.0f} GB or more of RAM). Why it grows slowly: the probe width grows by about
3.3 bits per tenfold, and at k = 6 (a radius of 2 bits per band) a band is read in
1 + p + p(p-1)/2 key ranges of p bits, while the candidates per range stay about constant.
The `hamming()` scan grows linearly: about {scan_ms / 1000:.1f} s at 100 million on one core.
Where the design stops: when the indexes no longer fit in memory, each key range costs a
random read from storage instead of a memory copy, so the latency is set by the storage's
random reads (a few hundred ranges at k = 6); and a bulk load slows down well before that,
as the indexes outgrow shared_buffers: a transaction's entries, inserted in key order, visit
more leaf pages the larger the indexes, each read and written back once. At 100 million
documents each index has about 450,000 leaf pages, so a transaction of a million rows puts
about two entries on each page it visits, where it puts about twenty at 10 million; loads
at that size want larger transactions (and `nearsim.insert_buffer` to match) or a
shared_buffers that holds the indexes. `make bench-100m` measures it: see "100 million
documents on one server" below."""


def verified_section(results: Path) -> tuple[str, dict[str, Any] | None]:
    """The section written by ``make bench-verified`` (benchmarks/verified.py), and its results."""
    page, data = results / "verified.md", results / "verified.json"
    if not (page.exists() and data.exists()):
        return ("No results of benchmarks/verified.py (`make bench` or `make bench-verified`)"
                " next to this run.", None)
    return page.read_text(encoding="utf-8"), json.loads(data.read_text(encoding="utf-8"))


def results_page(results: Path, name: str, target: str, module: str) -> str:
    """The section ``make <target>`` (benchmarks/<module>.py) wrote as ``name``."""
    page = results / name
    if not page.exists():
        return f"No results of `make {target}` (benchmarks/{module}.py) next to this run."
    return page.read_text(encoding="utf-8")


def defaults_page(results: Path) -> str:
    """The section of ``make bench-defaults``: which measure and threshold catch light edits."""
    return results_page(results, "defaults.md", "bench-defaults", "defaults")


def languages_page(results: Path) -> str:
    """The section of ``make bench-languages``: other scripts."""
    return results_page(results, "languages.md", "bench-languages", "languages")


def minhash_page(results: Path) -> str:
    """The section of ``make bench-minhash``: verified pairs against Rensa and datasketch."""
    return results_page(results, "minhash.md", "bench-minhash", "minhash")


def spark_page(results: Path) -> str:
    """The section of ``make bench-spark`` (benchmarks/spark.py), from its results."""
    data = results / "spark.json"
    if not data.exists():
        return "No results of `make bench-spark` (benchmarks/spark.py) next to this run."
    try:
        from .spark_report import spark_section  # needs pyarrow, from the spark extra
    except ImportError as error:
        return f"The results of `make bench-spark` need the spark extra to be shown ({error})."
    return spark_section(json.loads(data.read_text(encoding="utf-8")))


def json_page(results: Path, name: str,
              section: Callable[[dict[str, Any] | None], str]) -> tuple[str, dict[str, Any] | None]:
    """The section ``section`` makes of the results file ``name`` (None when there is
    none), and those results."""
    data = results / name
    loaded = json.loads(data.read_text(encoding="utf-8")) if data.exists() else None
    return section(loaded), loaded


def verified_million_page(results: Path) -> tuple[str, dict[str, Any] | None]:
    """The section of ``make bench-verified-1m`` (benchmarks/verified_million.py), and its
    results."""
    from .verified_million import verified_million_section

    return json_page(results, "verified_million.json", verified_million_section)


def hnsw_page(results: Path) -> tuple[str, dict[str, Any] | None]:
    """The section of ``make bench-hnsw`` (benchmarks/hnsw.py), and its results."""
    from .hnsw import hnsw_section

    return json_page(results, "hnsw.json", hnsw_section)


def concurrency_page(results: Path) -> tuple[str, dict[str, Any] | None]:
    """The section of ``make bench-concurrency`` (benchmarks/concurrency.py), and its results."""
    from .concurrency import concurrency_section

    return json_page(results, "concurrency.json", concurrency_section)


def hundred_page(results: Path) -> tuple[str, dict[str, Any] | None]:
    """The section of ``make bench-100m`` (benchmarks/hundred.py), and its results."""
    from .hundred import hundred_section

    return json_page(results, "hundred.json", hundred_section)


def guard_page(results: Path) -> tuple[str, dict[str, Any] | None]:
    """The section of ``make bench-guard`` (benchmarks/guarded.py), and its results."""
    from .guarded import guard_section

    return json_page(results, "guard.json", guard_section)


def write(results: Path, docs: Path) -> Path:
    run = json.loads((results / "run.json").read_text(encoding="utf-8"))
    scale_json = results / "scale.json"
    scale = (json.loads(scale_json.read_text(encoding="utf-8")) if scale_json.exists()
             else None)
    verified_page, verified = verified_section(results)
    hnsw_text, hnsw = hnsw_page(results)
    concurrency_text, concurrency = concurrency_page(results)
    hundred_text, hundred = hundred_page(results)
    guard_text, guard = guard_page(results)
    million_text, million = verified_million_page(results)
    docs.mkdir(parents=True, exist_ok=True)
    latency_figure(run, docs / LATENCY_FIGURE)
    lookup_figure(run, docs / LOOKUP_FIGURE)
    throughput_figure(run, docs / THROUGHPUT_FIGURE)
    quality_md = results / "quality.md"
    quality = (quality_md.read_text(encoding="utf-8") if quality_md.exists()
               else "No quality results in this run (benchmarks/quality.py did not run).")
    for figure in sorted(results.glob("*.png")):
        shutil.copyfile(figure, docs / figure.name)
    summary = table(["measurement", "value", "baseline", "ratio", "target", "met?"],
                    [[r["measurement"], r["value"], r["baseline"], r["ratio"], r["target"],
                      r["met"]] for r in run["summary"]])  # fmt: skip
    page = f"""# Benchmarks

Written by `make bench` ({run["mode"]} run, {run["seconds"]:.0f} s of measurements) from
`benchmarks/results/`; every ratio compares numbers measured in that same run.
nearsim {run["nearsim"]}, PostgreSQL {run["postgresql"]}, Python {run["python"]};
{run["cpu"]}, {run["cores"]} cores. `benchmarks/README.md` says how each number is measured.

## Detection quality

{quality}

## Which measure and threshold catch light edits

{defaults_page(results)}

## Other scripts: Chinese, Japanese and Khmer

{languages_page(results)}

## Verified search against MinHashLSH: real near-duplicates, 100,000 documents

{verified_page}

### nearsim_similar_verified at a million documents

{million_text}

## Verified pairs against Rensa and datasketch MinHash LSH, up to a million documents

{minhash_page(results)}

## Speed

### Summary

{summary}

### Fingerprints

{fingerprint_section(run)}

![signature throughput]({THROUGHPUT_FIGURE})

### Radius search: rotation index against scans

{search_section(run)}

![search latency against the number of documents]({LATENCY_FIGURE})

### Against the peers

{peers_section(run)}

![lookup latency against the number of documents]({LOOKUP_FIGURE})

{other_sections(run)}

### At 1 and 10 million documents, as a user fills the table

{scale_section(scale)}

### Single-row writes to a guarded table, by number of bands

{guard_text}

### Exact nearest against pgvector's HNSW

{hnsw_text}

### Searches under concurrency, alone and while writers load

{concurrency_text}

### 100 million documents on one server

{hundred_text}

### Beyond one machine: Apache Spark

{spark_page(results)}

## Where targets are missed

{missed_section(run, scale, verified, hnsw, concurrency, hundred, guard, million)}
"""
    path = docs / "BENCHMARKS.md"
    path.write_text(page, encoding="utf-8")
    return path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("results", type=Path)
    parser.add_argument("docs", type=Path)
    args = parser.parse_args(argv)
    if not (args.results / "run.json").exists():
        print(f"docs.py: no run.json in {args.results}: run python -m benchmarks.run --results"
              " first", file=sys.stderr)
        return 2
    print(f"wrote {write(args.results, args.docs)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
