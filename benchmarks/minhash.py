"""Verified pairs against Rensa and datasketch MinHash LSH, 100,000 and 1,000,000 documents.

    .venv/bin/python -m benchmarks.minhash --dsn DSN [--sizes N [N ...]]
        [--libraries rensa datasketch] [--datasketch-max N] [--rensa-threads N]
        [--truth-max N] [--check-pairs N] [--phases-max N] [--work-dir DIR]
        [--thresholds S [S ...]] [--output-dir DIR] [--quick]

All pairs of documents whose resemblance S_R (of word 3-shingle sets) is at
least s, for s = 0.8 and 0.5 (or one of them: ``--thresholds``), on the
first N documents of the evaluation corpus (benchmarks/corpus.py, nested
sizes; 1,000,000 documents are about 4.3 GB of text, written once to a file
by benchmarks/corpusfile.py and streamed from it), three ways, one after the
other on the same documents:

* ``nearsim``: ``nearsim_pairs_verified(tbl, min_similarity => s, measure => 's_r')`` on a
  table loaded beforehand (CREATE TABLE, COPY, ``nearsim_enable``, ANALYZE:
  timed, reported apart).  The seconds are those of the query with its rows
  sent to this client (``COPY (SELECT a, b ...) TO STDOUT`` in binary,
  read into NumPy as they come).  Memory: the backend's peak resident set
  during the query (``VmHWM``, reset before it through
  ``/proc/<pid>/clear_refs``); it includes the shared buffers the backend
  touches (``shared_buffers``, reported) and what a backend holds at rest.
  Where it is at most ``--phases-max`` documents, also the phases of the
  server: ``count(*)`` of the C join ``nearsim_resemblance_pairs`` alone,
  and of ``nearsim_pairs_verified`` (the same join passed through its
  PL/Python function), so the report says where the time goes.
* ``Rensa`` and ``datasketch``: MinHash LSH plus its estimate
  (benchmarks/sketches.py says how: 128 permutations, bands chosen for s as
  datasketch chooses them, candidates kept when the estimate is >= s), each
  in a fresh process, with the seconds of each stage (shingles, signatures,
  LSH insert, LSH query, estimate) and the process's peak resident set above
  its resident set after its imports.  ``--datasketch-max`` skips datasketch
  above a size (it is about 600 times slower than Rensa).

The truth.  nearsim's answer is the exact truth (its join is exact); the
run shows it rather than assumes it: at sizes up to ``--truth-max`` the
exact S_R of every pair sharing a shingle is computed in Python
(benchmarks/truth.py, a sparse matrix product) and nearsim's pairs must be
exactly those at or above s; at every size, ``--check-pairs`` of nearsim's
pairs drawn at random have their S_R computed in Python from the texts
(each must reach s), and every pair a MinHash method found that nearsim did
not (up to ``--check-pairs`` of them, drawn at random beyond that) too:
one at or above s would be a pair nearsim missed.  Recall and precision of
the MinHash methods are against nearsim's pairs (plus any such missed pair).

Writes ``minhash.json`` (every number) and ``minhash.md`` (the section of
docs/BENCHMARKS.md) into the output directory; the tables live in a scratch
schema dropped at the end, each size's table dropped when it is done.
"""

from __future__ import annotations

import argparse
import gc
import importlib.metadata
import json
import os
import platform
import sys
import time
from collections.abc import Iterable, Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

import numpy as np
import psycopg
from numpy.typing import NDArray
from psycopg import sql

from nearsim.core.measures import set_resemblance, word_shingles

from .common import SESSION_SETTINGS, cpu_model, enable_timed, log, run_main, scratch_schema, timer
from .corpusfile import copy_into, corpus_file, read_texts
from .minhash_report import merge, write
from .scoring import THRESHOLDS, score
from .sketches import LIBRARIES, found_pairs, memory, reset_peak, run_minhash
from .truth import pair_codes, similar_pairs

__all__ = ["check_pairs", "main", "measure", "nearsim_pairs", "read_binary_pairs"]

Int64s = NDArray[np.int64]

SIZES = (100_000, 1_000_000)
QUICK_SIZES = (300, 600)
TRUTH_MAX = 100_000
PHASES_MAX = 200_000
CHECK_PAIRS = 20_000
CHECK_SEED = 7
PARSE_BYTES = 1 << 22
DEFAULT_OUTPUT = Path(__file__).resolve().parent / "results"
DEFAULT_WORK = Path(__file__).resolve().parent / ".cache" / "minhash"

NEARSIM = "nearsim"
NAMES = {"rensa": "Rensa", "datasketch": "datasketch"}

_HEADER = b"PGCOPY\n\xff\r\n\x00" + b"\x00" * 8
_ROW = np.dtype([("fields", ">i2"), ("la", ">i4"), ("a", ">i4"), ("lb", ">i4"), ("b", ">i4")])


# --------------------------------------------------------------------------
# nearsim


def read_binary_pairs(chunks: Iterable[bytes | bytearray | memoryview], documents: int) -> Int64s:
    """Sorted unique pair codes of a binary COPY of two integer columns.

    libpq hands a COPY over a row at a time. Each row is appended to one buffer,
    read by NumPy every :data:`PARSE_BYTES`, so that no row outlives its turn:
    rows kept until a block is read interleave libpq's small allocations with
    the codes' arrays, and the client's heap then keeps about 40 bytes a row after
    they are freed. The codes (8 bytes a pair) are sorted in place.
    """
    buffer = bytearray()
    parts: list[Int64s] = []
    header = True

    def parse(final: bool) -> None:
        nonlocal header
        start = 0
        if header:
            if len(buffer) < len(_HEADER) and not final:
                return
            if buffer[: len(_HEADER)] != _HEADER:
                raise ValueError("not a binary COPY of integer pairs")
            start = len(_HEADER)
            header = False
        whole = (len(buffer) - start) // _ROW.itemsize
        if final:  # the trailer, two bytes, is what is left
            whole = max(0, len(buffer) - start - 2) // _ROW.itemsize
        end = start + whole * _ROW.itemsize
        if whole:
            rows = np.frombuffer(buffer, dtype=_ROW, count=whole, offset=start)
            if not (rows["fields"] == 2).all() or not ((rows["la"] == 4) & (rows["lb"] == 4)).all():
                raise ValueError("not a binary COPY of two non-null integer columns")
            parts.append(pair_codes(rows["a"].astype(np.int64), rows["b"].astype(np.int64),
                                    documents))
            del rows  # the buffer can be resized again
        if final and buffer[end:] != b"\xff\xff":
            raise ValueError("a binary COPY of integer pairs ends with its trailer")
        del buffer[:end]

    for chunk in chunks:
        buffer += chunk
        if len(buffer) >= PARSE_BYTES:
            parse(False)
    parse(True)
    if not parts:
        return np.empty(0, dtype=np.int64)
    codes = np.concatenate(parts)
    parts.clear()
    codes.sort()
    distinct = np.empty(len(codes), dtype=bool)
    distinct[0] = True
    np.not_equal(codes[1:], codes[:-1], out=distinct[1:])
    unique: Int64s = codes[distinct]
    return unique


def load(conn: psycopg.Connection, schema: str, name: str, path: Path,
         documents: int) -> dict[str, Any]:
    """The table of the first ``documents`` documents, enabled: seconds of each step."""
    table = sql.Identifier(schema, name)
    phases: dict[str, float] = {}
    with timer() as elapsed:
        conn.execute(sql.SQL("CREATE TABLE {} (id integer PRIMARY KEY, body text NOT NULL)")
                     .format(table))
        sent = copy_into(conn, table, path, documents)
    phases["COPY"] = elapsed()
    enable_timed(conn, schema, name, phases)
    row = conn.execute("SELECT pg_total_relation_size(%s::regclass)",
                       (f"{schema}.{name}",)).fetchone()
    return {"seconds": phases, "copy_megabytes": sent / 1e6,
            "table_megabytes": (row[0] if row else 0) / 1e6}


def nearsim_pairs(conn: psycopg.Connection, qualified: str, threshold: float,
                  documents: int) -> tuple[Int64s, dict[str, Any]]:
    """``nearsim_pairs_verified`` at ``threshold``: its pair codes, seconds and memory."""
    row = conn.execute("SELECT pg_backend_pid()").fetchone()
    pid = int(row[0]) if row else 0
    reset = reset_peak(pid)
    before = memory(pid)
    cpu = backend_cpu(pid), time.process_time()
    query = sql.SQL("COPY (SELECT a::integer, b::integer FROM nearsim_pairs_verified({}::regclass,"
                    " min_similarity => {}, measure => 's_r')) TO STDOUT (FORMAT binary)").format(
        sql.Literal(qualified), sql.Literal(threshold))
    with timer() as elapsed, conn.cursor() as cursor, cursor.copy(query) as copy:
        codes = read_binary_pairs(copy, documents)
    seconds = elapsed()
    after = memory(pid)
    peak = after.get("VmHWM", 0) - before.get("VmRSS", 0) if reset else None
    return codes, {"seconds": seconds, "pairs": len(codes), "peak_above_start": peak,
                   "backend_cpu": backend_cpu(pid) - cpu[0],
                   "client_cpu": time.process_time() - cpu[1],
                   "rss_before": before.get("VmRSS"), "peak_rss": after.get("VmHWM")}


def backend_cpu(pid: int) -> float:
    """CPU seconds (user and system) a process has used so far; 0.0 if unreadable."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


PHASE_QUERIES = {
    "C join": "SELECT count(*) FROM nearsim_resemblance_pairs(%s::regclass, 'id', 'body', 'si',"
              " %s)",
    "nearsim_pairs_verified": "SELECT count(*) FROM nearsim_pairs_verified(%s::regclass,"
                              " min_similarity => %s, measure => 's_r')",
}
"""The server's phases: the C join alone (``nearsim_resemblance_pairs``, what
``nearsim_pairs_verified`` calls for S_R), then the whole function, rows
counted in the server (nothing sent)."""


def server_phases(conn: psycopg.Connection, qualified: str,
                  threshold: float) -> dict[str, dict[str, float]]:
    """Wall-clock and backend CPU seconds of each of :data:`PHASE_QUERIES`."""
    row = conn.execute("SELECT pg_backend_pid()").fetchone()
    pid = int(row[0]) if row else 0
    phases = {}
    for name, query in PHASE_QUERIES.items():
        started = backend_cpu(pid)
        with timer() as elapsed:
            conn.execute(query, (qualified, threshold)).fetchone()
        phases[name] = {"seconds": elapsed(), "cpu": backend_cpu(pid) - started}
    return phases


# --------------------------------------------------------------------------
# The checks in Python


def shingle_sets(path: Path, documents: int, wanted: set[int]) -> dict[int, set[str]]:
    """The distinct word 3-shingles of the wanted documents, read from the file."""
    sets = {}
    for position, text in enumerate(read_texts(path, documents)):
        if position in wanted:
            sets[position] = set(word_shingles(text))
    return sets


def python_s_r(path: Path, documents: int, codes: Int64s) -> NDArray[np.float64]:
    """S_R of each coded pair, from the texts, by nearsim.core.measures in Python."""
    first, second = codes // documents, codes % documents
    sets = shingle_sets(path, documents, set(first.tolist()) | set(second.tolist()))
    return np.array([set_resemblance(sets[a], sets[b])
                     for a, b in zip(first.tolist(), second.tolist(), strict=True)],
                    dtype=np.float64)


def sample(codes: Int64s, count: int, seed: int = CHECK_SEED) -> Int64s:
    if len(codes) <= count:
        return codes
    chosen = np.random.default_rng(seed).choice(len(codes), size=count, replace=False)
    return np.sort(codes[chosen])


def check_pairs(path: Path, documents: int, threshold: float, nearsim: Int64s,
                others: dict[str, Int64s], count: int) -> dict[str, Any]:
    """S_R in Python of a sample of nearsim's pairs and of the pairs only MinHash found."""
    drawn = sample(nearsim, count)
    extra = np.setdiff1d(np.unique(np.concatenate(list(others.values()))) if others
                         else np.empty(0, dtype=np.int64), nearsim, assume_unique=True)
    extra_drawn = sample(extra, count)
    values = python_s_r(path, documents, np.concatenate([drawn, extra_drawn]))
    ours, theirs = values[: len(drawn)], values[len(drawn) :]
    missed = extra_drawn[theirs >= threshold]
    return {
        "nearsim_sampled": len(drawn), "nearsim_below": int(np.count_nonzero(ours < threshold)),
        "nearsim_min_s_r": float(ours.min()) if len(ours) else None,
        "minhash_only": len(extra), "minhash_only_checked": len(extra_drawn),
        "minhash_only_at_or_above": len(missed),
        "minhash_only_max_s_r": float(theirs.max()) if len(theirs) else None,
        "missed_codes": missed.tolist()[:100],
    }  # fmt: skip


def exact_truth(path: Path, documents: int, thresholds: Sequence[float]) -> dict[str, Any]:
    """The exact S_R pairs of benchmarks/truth.py, as pair codes per threshold."""
    texts = list(read_texts(path, documents))
    truth = similar_pairs(texts, keep=min(thresholds))
    del texts
    return {"seconds": truth.seconds, "shared_pairs": truth.shared_pairs,
            "codes": {t: truth.codes(t) for t in thresholds}}


# --------------------------------------------------------------------------
# One size


def measure(conn: psycopg.Connection, schema: str, path: Path, documents: int,
            thresholds: Sequence[float], libraries: Sequence[str], work: Path,
            options: dict[str, int]) -> dict[str, Any]:
    """Every method at every threshold on the first ``documents`` documents."""
    result: dict[str, Any] = {"documents": documents, "methods": {}}
    name = f"corpus_{documents}"
    qualified = f"{schema}.{name}"
    log(f"{documents:,} documents: COPY, nearsim_enable, ANALYZE")
    result["load"] = load(conn, schema, name, path, documents)
    log(f"  {sum(result['load']['seconds'].values()):.1f} s")
    nearsim: dict[float, Int64s] = {}
    outcome: dict[str, Any] = {}
    for t in thresholds:
        codes, info = nearsim_pairs(conn, qualified, t, documents)
        log(f"  nearsim {t}: {info['seconds']:.1f} s, {len(codes):,} pairs")
        if documents <= options["phases_max"]:
            info["server_phases"] = server_phases(conn, qualified, t)
        nearsim[t] = codes
        outcome[str(t)] = info
    result["methods"][NEARSIM] = outcome
    conn.execute("SELECT nearsim_disable(%s::regclass)", (qualified,))
    conn.execute(sql.SQL("DROP TABLE {}").format(sql.Identifier(schema, name)))

    found: dict[str, dict[float, Int64s]] = {}
    for library in libraries:
        if library == "datasketch" and documents > options["datasketch_max"]:
            result["methods"][library] = {"skipped": f"above --datasketch-max"
                                                     f" {options['datasketch_max']:,}"}
            continue
        log(f"  {library}: signatures, LSH and estimate in its own process")
        run = run_minhash(library, path, documents, thresholds, work,
                          options["rensa_threads"] if library == "rensa" else 1)
        found[library] = {t: found_pairs(work, library, documents, t) for t in thresholds}
        for t in thresholds:
            (work / f"{library}-{documents}-{t}.npy").unlink()
        log(f"    signatures {sum(run['signature_seconds'].values()):.1f} s; "
            + "; ".join(f"{t}: {sum(v['seconds'].values()):.1f} s, {v['found']:,} pairs"
                        for t, v in run["thresholds"].items()))
        result["methods"][library] = run

    if documents <= options["truth_max"]:
        log("  exact truth in Python (benchmarks/truth.py)")
        truth = exact_truth(path, documents, thresholds)
        result["truth"] = {"seconds": truth["seconds"], "shared_pairs": truth["shared_pairs"],
                           "positives": {str(t): len(truth["codes"][t]) for t in thresholds},
                           "nearsim_equal": {str(t): bool(np.array_equal(truth["codes"][t],
                                                                         nearsim[t]))
                                             for t in thresholds}}  # fmt: skip
        del truth
        gc.collect()
    checks = {}
    for t in thresholds:
        log(f"  S_R in Python of sampled pairs at {t}")
        checks[str(t)] = check_pairs(path, documents, t, nearsim[t],
                                     {lib: f[t] for lib, f in found.items()},
                                     options["check_pairs"])
    result["checks"] = checks
    scores: dict[str, dict[str, Any]] = {}
    for library, pairs in found.items():
        scores[library] = {}
        for t in thresholds:
            missed = np.array(checks[str(t)]["missed_codes"], dtype=np.int64)
            positives = np.union1d(nearsim[t], missed)
            scores[library][str(t)] = asdict(score(pairs[t], positives))
    result["scores"] = scores
    return result


# --------------------------------------------------------------------------
# The run


def evaluate(dsn: str, sizes: Sequence[int], libraries: Sequence[str], work: Path,
             output: Path, options: dict[str, int], quick: bool, command: str,
             add_to: Path | None = None,
             thresholds: Sequence[float] = THRESHOLDS) -> dict[str, Any]:
    """Measure every size; with ``add_to`` (the results of another run, read when
    this one is done), its sizes not measured now are kept beside the new ones
    (each says its run)."""
    started = time.perf_counter()
    ordered = sorted(set(sizes))
    log(f"the corpus file of {ordered[-1]:,} documents")
    corpus = corpus_file(work, ordered[-1], originals="small" if quick else "large")
    log(f"  {corpus.path} ({corpus.megabytes:,.0f} MB; "
        + ("there already)" if corpus.reused else f"{corpus.seconds:.0f} s)"))
    results: dict[str, Any] = {
        "command": command, "mode": "quick" if quick else "full",
        "started": time.strftime("%Y-%m-%d %H:%M:%S %z"),
        "nearsim": importlib.metadata.version("nearsim"),
        "rensa": importlib.metadata.version("rensa"),
        "datasketch": importlib.metadata.version("datasketch"),
        "python": platform.python_version(), "cpu": cpu_model(),
        "memory_total": os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"),
        "thresholds": list(thresholds), "options": options,
        "corpus": {"documents": corpus.documents, "megabytes": corpus.megabytes,
                   "seconds": corpus.seconds, "reused": corpus.reused},
        "sizes": [],
    }  # fmt: skip
    with scratch_schema(dsn) as (conn, schema):
        for setting, value in SESSION_SETTINGS.items():
            conn.execute("SELECT set_config(%s, %s, false)", (setting, value))
        for setting in ("server_version", "shared_buffers", "work_mem"):
            row = conn.execute("SELECT current_setting(%s)", (setting,)).fetchone()
            results[setting] = row[0] if row else "?"
        row = conn.execute("SELECT extversion FROM pg_extension WHERE extname = 'nearsim'"
                           ).fetchone()
        results["nearsim_extension"] = row[0] if row else "?"
        for documents in ordered:
            measured = measure(conn, schema, corpus.path, documents, thresholds, libraries,
                               work, options)
            measured["run"] = {"command": command, "started": results["started"]}
            results["sizes"].append(measured)
            output.mkdir(parents=True, exist_ok=True)
            (output / "minhash.json").write_text(json.dumps(results, indent=1))
    results["seconds"] = time.perf_counter() - started
    earlier = None
    if add_to is not None:
        try:  # read now: the other run may have been going on beside this one
            earlier = json.loads(add_to.read_text(encoding="utf-8"))
        except (OSError, ValueError) as error:
            log(f"--add-to {add_to} not read ({error}): only this run's sizes are written")
    if earlier is not None:
        results = merge(results, earlier)
    write(results, output)
    log(f"wrote {output} ({results['seconds']:.0f} s)")
    return results


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dsn", required=True, help="a database where nearsim can be created")
    parser.add_argument("--sizes", type=int, nargs="+", help=f"documents (default {SIZES})")
    parser.add_argument("--libraries", nargs="+", choices=LIBRARIES, default=list(LIBRARIES))
    parser.add_argument("--datasketch-max", type=int, default=SIZES[-1],
                        help="datasketch only up to this many documents")
    parser.add_argument("--rensa-threads", type=int, default=1,
                        help="RAYON_NUM_THREADS of Rensa (1: one core, as nearsim)")
    parser.add_argument("--truth-max", type=int, default=TRUTH_MAX,
                        help="the exact truth in Python up to this many documents")
    parser.add_argument("--check-pairs", type=int, default=CHECK_PAIRS,
                        help="pairs whose S_R is checked in Python, per sample")
    parser.add_argument("--phases-max", type=int, default=PHASES_MAX,
                        help="the server's phases timed up to this many documents")
    parser.add_argument("--work-dir", type=Path, default=DEFAULT_WORK,
                        help="where the corpus file and the found pairs go")
    parser.add_argument("--thresholds", type=float, nargs="+", choices=THRESHOLDS,
                        default=list(THRESHOLDS), metavar="S",
                        help=f"the S_R thresholds measured, of {THRESHOLDS} (a million documents"
                             " take about 45 minutes at 0.8 and an hour at 0.5)")
    parser.add_argument("--output-dir", type=Path, default=DEFAULT_OUTPUT)
    parser.add_argument("--add-to", type=Path, metavar="FILE",
                        help="a minhash.json of an earlier run: its sizes not measured now"
                             " are kept, and the page is written from both")
    parser.add_argument("--quick", action="store_true",
                        help=f"the small corpus's originals at {QUICK_SIZES} documents")
    args = parser.parse_args(argv)
    for option in ("datasketch_max", "rensa_threads", "truth_max", "check_pairs",
                   "phases_max"):
        if getattr(args, option) < (1 if option == "rensa_threads" else 0):
            parser.error(f"--{option.replace('_', '-')} must not be negative")
    sizes = args.sizes or (QUICK_SIZES if args.quick else SIZES)
    if any(n < 1 for n in sizes):
        parser.error("--sizes must be positive")
    options = {"datasketch_max": args.datasketch_max, "rensa_threads": args.rensa_threads,
               "truth_max": args.truth_max, "check_pairs": args.check_pairs,
               "phases_max": args.phases_max}
    shown = [o for k, o in enumerate(sys.argv[1:] if argv is None else list(argv))
             if o != "--dsn" and not (k and (sys.argv[1:] if argv is None else list(argv))[k - 1]
                                      == "--dsn") and not o.startswith("--dsn=")]
    evaluate(args.dsn, sizes, args.libraries, args.work_dir, args.output_dir, options,
             args.quick, " ".join(["python -m benchmarks.minhash", *shown]), args.add_to,
             sorted(set(args.thresholds), reverse=True))
    return 0


if __name__ == "__main__":
    sys.exit(run_main(main))
