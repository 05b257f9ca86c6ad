"""MinHash LSH plus its estimate, with Rensa or datasketch, in a process of its own.

:func:`run_minhash` starts a fresh Python process (multiprocessing, spawn)
that streams the corpus file (benchmarks/corpusfile.py), and for each
threshold t finds the pairs a MinHash user would report: LSH candidates whose
MinHash estimate is at least t.  Its own process, so that the memory it
reports is its own: the resident set after the imports is the baseline, and
the peak of each stage (``VmHWM``, reset between stages through
``/proc/self/clear_refs``) is reported above it.

The stages, timed apart:

* ``shingles``: nearsim's word 3-shingles of each text
  (:func:`nearsim.core.measures.word_shingles`, distinct), the same sets the
  server compares, in Python; a chunk of texts at a time, then dropped;
* ``signatures``: 128-permutation MinHashes of the sets (Rensa
  ``RMinHash.from_token_sets``; datasketch ``MinHash.update_batch`` then
  ``LeanMinHash``), and their slots as a NumPy matrix for the estimate;
* per threshold, ``LSH insert`` (every document), ``LSH query`` (every
  document, the candidates kept once per pair) and ``estimate`` (the share
  of equal slots of each candidate pair, vectorised, kept when >= t); the
  query and the estimate go a chunk of documents at a time, so only the
  pairs that pass are held, not every candidate.

Bands: datasketch's ``MinHashLSH(threshold=t, num_perm=128)`` picks bands b
and rows r (b * r <= 128) minimising the equally weighted false-positive and
false-negative areas (``datasketch.lsh._optimal_param``); Rensa's
``RMinHashLSH`` needs b to divide 128, so its b is the divisor of 128 that
minimises the same weighted areas with r = 128 / b.  Rensa runs with
``RAYON_NUM_THREADS`` threads (1 by default: one core, as nearsim's backend).
"""

from __future__ import annotations

import gc
import itertools
import multiprocessing
import os
import re
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from .corpusfile import read_texts
from .truth import pair_codes

__all__ = ["LIBRARIES", "PERMUTATIONS", "memory", "rensa_bands", "reset_peak", "run_minhash"]

Int64s = NDArray[np.int64]

PERMUTATIONS = 128
SEED = 1
CHUNK = 2_000
"""Texts shingled and sketched at a time, and documents queried at a time: the
shingles of a chunk are Python strings, about 100 bytes each (some 150 MB for
2,000 texts of this corpus), so a larger chunk would be counted as the method's memory."""
ESTIMATE_BLOCK = 100_000
"""Candidate pairs whose slots are compared at a time (two 512-byte rows each)."""
LIBRARIES = ("rensa", "datasketch")


# --------------------------------------------------------------------------
# Memory of a process (Linux)


def memory(pid: int | str = "self") -> dict[str, int]:
    """``VmRSS`` and ``VmHWM`` (peak) of a process, bytes; empty if unreadable."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return {}
    found = {}
    for name in ("VmRSS", "VmHWM", "RssAnon", "RssShmem"):
        match = re.search(rf"^{name}:\s+(\d+) kB", status, re.MULTILINE)
        if match:
            found[name] = int(match.group(1)) * 1024
    return found


def reset_peak(pid: int | str = "self") -> bool:
    """Set the process's ``VmHWM`` to its current resident set; False if not allowed."""
    try:
        Path(f"/proc/{pid}/clear_refs").write_text("5")
    except OSError:
        return False
    return True


# --------------------------------------------------------------------------
# Bands


def rensa_bands(threshold: float, permutations: int = PERMUTATIONS) -> int:
    """The bands for Rensa at ``threshold``: datasketch's criterion over the divisors."""
    from datasketch.lsh import _false_negative_probability, _false_positive_probability

    def error(bands: int) -> float:
        rows = permutations // bands
        return float(0.5 * _false_positive_probability(threshold, bands, rows)
                     + 0.5 * _false_negative_probability(threshold, bands, rows))

    return min((b for b in range(1, permutations + 1) if permutations % b == 0), key=error)


def datasketch_bands(threshold: float, permutations: int = PERMUTATIONS) -> tuple[int, int]:
    from datasketch.lsh import _optimal_param

    bands, rows = _optimal_param(threshold, permutations, 0.5, 0.5)
    return int(bands), int(rows)


# --------------------------------------------------------------------------
# In the worker process


class _Stages:
    """Wall-clock and CPU seconds of each stage (CPU: of every thread of the process,
    which a busy shared machine changes less than the wall clock)."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}
        self.cpu: dict[str, float] = {}
        self._wall = time.perf_counter()
        self._cpu = time.process_time()

    def lap(self, name: str) -> None:
        """The time since the last lap (or the start) is ``name``'s."""
        wall, cpu = time.perf_counter(), time.process_time()
        self.seconds[name] = self.seconds.get(name, 0.0) + wall - self._wall
        self.cpu[name] = self.cpu.get(name, 0.0) + cpu - self._cpu
        self._wall, self._cpu = wall, cpu

    def restart(self) -> None:
        self._wall, self._cpu = time.perf_counter(), time.process_time()

    def timed(self, name: str, action: Callable[[], Any]) -> Any:
        self.restart()
        result = action()
        self.lap(name)
        return result


def _flatten(lists: Sequence[Sequence[int]], first: int) -> tuple[Int64s, Int64s]:
    """(querying document, candidate) of query answers, each pair once (candidate > it)."""
    lengths = np.fromiter((len(x) for x in lists), dtype=np.int64, count=len(lists))
    found = np.fromiter(itertools.chain.from_iterable(lists), dtype=np.int64,
                        count=int(lengths.sum()))
    owners = np.repeat(np.arange(first, first + len(lists), dtype=np.int64), lengths)
    keep = found > owners
    return owners[keep], found[keep]


def _estimate(slots: NDArray[Any], first: Int64s, second: Int64s) -> NDArray[np.float64]:
    estimate = np.empty(len(first), dtype=np.float64)
    for start in range(0, len(first), ESTIMATE_BLOCK):
        i = first[start : start + ESTIMATE_BLOCK]
        j = second[start : start + ESTIMATE_BLOCK]
        estimate[start : start + ESTIMATE_BLOCK] = (slots[i] == slots[j]).mean(axis=1)
    return estimate


def _worker(library: str, path: str, documents: int, thresholds: Sequence[float],
            output: str, threads: int) -> dict[str, Any]:
    os.environ["RAYON_NUM_THREADS"] = str(threads)
    import datasketch.lsh  # noqa: F401  (the bands are chosen with it: before the baseline)

    from nearsim.core.measures import word_shingles

    if library == "rensa":
        import rensa
    else:
        from datasketch import LeanMinHash, MinHash, MinHashLSH
    gc.collect()
    baseline = memory()["VmRSS"]
    reset_peak()
    stages = _Stages()
    present: list[int] = []
    sketches: list[Any] = []
    slot_blocks: list[NDArray[Any]] = []
    texts = read_texts(Path(path), documents)
    position = 0
    while True:
        chunk = list(itertools.islice(texts, CHUNK))
        if not chunk:
            break

        def shingle(chunk: list[str] = chunk) -> list[list[str]]:
            return [list(set(word_shingles(text))) for text in chunk]

        sets = stages.timed("shingles", shingle)
        kept = [k for k, s in enumerate(sets) if s]
        present.extend(position + k for k in kept)
        position += len(chunk)
        sets = [sets[k] for k in kept]
        del chunk

        def sign(sets: list[list[str]] = sets) -> NDArray[Any]:
            if library == "rensa":
                made = rensa.RMinHash.from_token_sets(sets, PERMUTATIONS, SEED)
                sketches.extend(made)
                return np.array([m.digest() for m in made], dtype=np.uint32)
            lean = []
            for shingles in sets:
                sketch = MinHash(num_perm=PERMUTATIONS, seed=SEED)
                sketch.update_batch([s.encode("utf-8") for s in shingles])
                lean.append(LeanMinHash(sketch))
            sketches.extend(lean)
            return np.array([s.hashvalues for s in lean], dtype=np.uint64)

        slot_blocks.append(stages.timed("signatures", sign))
        del sets
    slots = (np.concatenate(slot_blocks) if slot_blocks
             else np.empty((0, PERMUTATIONS), dtype=np.uint32))
    del slot_blocks
    places = np.array(present, dtype=np.int64)
    del present
    gc.collect()
    signed = memory()
    result: dict[str, Any] = {
        "library": library, "documents": documents, "sketched": len(sketches),
        "threads": threads if library == "rensa" else 1,
        "signature_seconds": dict(stages.seconds), "signature_cpu": dict(stages.cpu),
        "baseline_rss": baseline, "signatures_peak": signed.get("VmHWM", 0) - baseline,
        "signatures_rss": signed.get("VmRSS", 0) - baseline, "thresholds": {},
    }  # fmt: skip
    count = len(sketches)
    for t in thresholds:
        gc.collect()
        before = memory()
        reset_peak()
        # The bands before the clock: choosing them imports scipy's integration.
        if library == "rensa":
            bands = rensa_bands(t)
            rows = PERMUTATIONS // bands
        else:
            bands, rows = datasketch_bands(t)
        clock = _Stages()
        if library == "rensa":
            lsh = rensa.RMinHashLSH(t, PERMUTATIONS, bands)
            lsh.insert_many(sketches)
        else:
            lsh = MinHashLSH(threshold=t, num_perm=PERMUTATIONS)
            with lsh.insertion_session() as session:
                for index, sketch in enumerate(sketches):
                    session.insert(index, sketch)
        clock.lap("LSH insert")
        # Each chunk's candidates are estimated at once and only the pairs that
        # pass are kept: a million documents have over a hundred million candidates.
        parts: list[Int64s] = []
        candidates = 0
        for first in range(0, count, CHUNK):
            chunk = sketches[first : first + CHUNK]
            answers = (lsh.query_all(chunk) if library == "rensa"
                       else [lsh.query(s) for s in chunk])
            a, b = _flatten(answers, first)
            del answers
            clock.lap("LSH query")
            passed = _estimate(slots, a, b) >= t
            parts.append(pair_codes(places[a[passed]], places[b[passed]], documents))
            candidates += len(a)
            clock.lap("estimate")
        found = np.unique(np.concatenate(parts)) if parts else np.empty(0, dtype=np.int64)
        del parts
        clock.lap("estimate")
        peak = memory().get("VmHWM", 0)
        del lsh
        gc.collect()
        np.save(Path(output) / f"{library}-{documents}-{t}.npy", found)
        result["thresholds"][str(t)] = {
            "bands": bands, "rows": rows, "seconds": clock.seconds, "cpu": clock.cpu,
            "candidates": candidates,
            "found": len(found), "peak_above_signatures": peak - before.get("VmRSS", 0),
            "peak_above_baseline": peak - baseline,
        }  # fmt: skip
    return result


def run_minhash(library: str, path: Path, documents: int, thresholds: Sequence[float],
                output: Path, threads: int = 1) -> dict[str, Any]:
    """One library on the first ``documents`` documents of the file, in a fresh process.

    The found pairs of threshold t are saved as sorted pair codes
    (benchmarks.truth.pair_codes) in ``output/<library>-<documents>-<t>.npy``.
    """
    if library not in LIBRARIES:
        raise ValueError(f"unknown MinHash library {library!r}; use one of {LIBRARIES}")
    context = multiprocessing.get_context("spawn")
    with context.Pool(1) as pool:
        result: dict[str, Any] = pool.apply(
            _worker, (library, str(path), documents, list(thresholds), str(output), threads))
    return result


def found_pairs(output: Path, library: str, documents: int, threshold: float) -> Int64s:
    """The pair codes :func:`run_minhash` saved."""
    codes: Int64s = np.load(output / f"{library}-{documents}-{threshold}.npy")
    return codes
