"""100 million documents on one server (``make bench-100m``).

One table ``(id bigint PRIMARY KEY, body text, si bigint)`` of ``--size``
documents (100 million by default), enabled while empty and filled as a user
fills it: COPY in transactions of ``--batch-rows`` rows with the
fingerprints supplied (as :mod:`benchmarks.scale` and ``nearsim-load`` do),
PostgreSQL's defaults plus what docs/OPERATIONS.md and docs/LOADING.md tell a
user to set for such a load: ``nearsim.insert_buffer`` large enough for a
transaction's index entries (48 bytes a row), and on the benchmark's own
cluster a larger ``max_wal_size`` (``--max-wal-size``: ALTER SYSTEM, reset
afterwards). The fingerprints are random 64-bit values, one in a hundred of
them a copy of an earlier one with 0 to 3 bits flipped (near-duplicates for
the pairs to find), made here with a fixed seed and held as an ``int64``
array (8 bytes a document: 800 MB at 100 million) for numpy to check every
answer against. Measured in the same run:

- the COPY's rate over the first and over the last tenth of the rows (10
  million each at 100 million; target: the last at least half the first);
- bytes per document of everything nearsim adds: the rotation indexes, and
  the ``si`` column (the table's heap per row against that of a plain
  table ``(id, body)`` holding ``--plain-rows`` of the documents, evenly
  spread over the ids, with the same texts);
- p50 and p95 of ``WHERE hamming(si, q) <= 3`` and ``<= 6`` and of ``ORDER BY
  hamming(si, q), id LIMIT 10`` (prepared statements, one backend, after a
  pass over the same queries), every answer checked against numpy's brute
  force over all the fingerprints (targets: 1, 2 and 10 ms);
- all pairs within 3 bits (``nearsim_pairs``): seconds, the backend's memory
  (its peak anonymous memory, sampled from /proc while it runs, and its peak
  resident size), every pair's distance checked, every planted pair found,
  and for ``--pairs-checked`` documents every pair they are in checked against
  numpy;
- what the figures need: shared_buffers, the sizes read, the index blocks
  the searches read from outside shared_buffers, the machine's memory;
- with ``--search-shared-buffers SIZE`` and ``--restart-command CMD`` (the
  benchmark's own cluster: ``make bench-100m`` gives both), the searches
  again, every answer checked, after ``ALTER SYSTEM SET shared_buffers`` and
  CMD (which restarts the server) and a pass that reads what they read: the
  figures of a server whose shared_buffers holds the rotation indexes
  (docs/OPERATIONS.md).  shared_buffers is reset and the server restarted
  afterwards.

nearsim_pairs holds every key and fingerprint of the table in the server (C):
about 80 bytes per document (8 GB at 100 million), so it is left out, with a
note, when the machine has less memory available than that.  It
refuses to start when the data directory's file system has less free
space than the run needs (about 200 bytes a document for the table and its
indexes, and the WAL up to max_wal_size: 30 GB at 100 million with 8GB)
and stops when it falls under 2 GB while loading.

Usage: ``python -m benchmarks.hundred --dsn DSN [--size N] [--batch-rows N]
[--queries N] [--max-wal-size SIZE] [--search-shared-buffers SIZE
--restart-command CMD] [--results FILE]``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import secrets
import shlex
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import psycopg
from numpy.typing import NDArray
from psycopg import sql

import nearsim
from nearsim.core.bands import default_bands

from .common import (
    MB,
    PREPARE_WHEN_ASKED,
    BenchError,
    Connection,
    connect,
    count_rows,
    cpu_model,
    load_average,
    ms,
    percentile_ms,
    prepare_session,
    print_table,
    run_main,
    times,
    wrap,
)
from .concurrency import shared
from .docsets import (
    SEED,
    DocSet,
    Fingerprints,
    check_rotation_index_api,
    copy_rows,
    flip_masks,
    index_storage,
    make_queries,
    popcount,
    prewarm_search,
    random_fingerprints,
    shared_buffers,
)
from .scale import set_max_wal_size

SIZE = 100_000_000
BATCH_ROWS = 5_000_000
ENTRY_BYTES = 48  # in nearsim.insert_buffer per row: 16 bytes an entry, one per band
MAX_INSERT_BUFFER = 256 * 1024 * 1024  # nearsim.max_insert_buffer's default
PLAIN_ROWS = 10_000_000
QUERIES = 100
PAIRS_CHECKED = 100
PLANTED_SHARE = 0.01  # of the documents: copies of an earlier one with 0-3 bits flipped
PAIR_DISTANCE = 3
NEAREST = 10
# the server's memory for nearsim_pairs: the table's keys and fingerprints and
# the sorts of the search, in C (74 bytes a document at a million, bigint keys)
PAIRS_BYTES_PER_DOC = 80
# heap (60), primary key (23) and rotation indexes (91 at 3 million, more as
# loaded into a larger table) per document; the plain table takes 80 a row
DISK_BYTES_PER_DOC = 200
PLAIN_BYTES_PER_ROW = 80
DISK_MARGIN = 2_000_000_000  # bytes left free; the load stops below it
GB = 1_000_000_000
# p50 ms at most
TARGETS = {"k = 3": 1.0, "k = 6": 2.0, f"ORDER BY hamming() LIMIT {NEAREST}": 10.0}
TARGET_LOAD_RATIO = 0.5  # the last tenth's rate against the first's


@dataclass
class Result:
    size: int
    batch_rows: int
    insert_buffer: str
    max_wal_size: str
    shared_buffers: str
    memory_total: int  # bytes of RAM on this machine (0: unknown)
    load_seconds: float = 0.0
    batch_seconds: list[float] = field(default_factory=list)
    first_rate: float = 0.0  # rows/s over the first tenth
    last_rate: float = 0.0  # over the last tenth
    heap_bytes: int = 0  # the table's heap (pg_table_size: with TOAST, FSM, VM)
    key_bytes: int = 0  # its primary key
    rotation_bytes: int = 0  # its rotation indexes
    plain_rows: int = 0
    plain_heap_bytes: int = 0
    plain_key_bytes: int = 0
    # search -> p50 ms, p95 ms, mean rows, index blocks read from outside shared_buffers/search
    searches: dict[str, tuple[float, float, float, float]] = field(default_factory=dict)
    pairs: int = 0
    pairs_seconds: float = 0.0
    pairs_peak_anonymous: int = 0  # bytes, sampled
    pairs_peak_resident: int = 0  # VmHWM, bytes (shared buffers it touched included)
    planted_pairs: int = 0
    pairs_checked: int = 0
    pairs_skipped: str = ""  # why nearsim_pairs did not run, if it did not
    # the searches again with shared_buffers set to buffered_shared_buffers (if measured)
    buffered_shared_buffers: str = ""
    buffered_searches: dict[str, tuple[float, float, float, float]] = field(default_factory=dict)

    @classmethod
    def from_json(cls, fields: dict[str, Any]) -> Result:
        """A result as ``hundred.json`` holds it (its searches' tuples as lists)."""
        result = cls(**{k: v for k, v in fields.items()
                        if k not in ("searches", "buffered_searches")})
        result.searches = {name: tuple(v) for name, v in fields["searches"].items()}
        result.buffered_searches = {name: tuple(v) for name, v
                                    in fields.get("buffered_searches", {}).items()}
        return result

    def search_runs(self) -> list[tuple[str, dict[str, tuple[float, float, float, float]]]]:
        """The searches of each run measured: its shared_buffers, and them by search."""
        runs = [(self.shared_buffers, self.searches)]
        if self.buffered_searches:
            runs.append((self.buffered_shared_buffers, self.buffered_searches))
        return runs

    @property
    def rotation_per_doc(self) -> float:
        return self.rotation_bytes / self.size

    @property
    def si_per_doc(self) -> float:
        """Heap bytes per row the si column adds, against the plain table."""
        return self.heap_bytes / self.size - self.plain_heap_bytes / max(self.plain_rows, 1)

    @property
    def added_per_doc(self) -> float:
        return self.rotation_per_doc + self.si_per_doc


def disk_needed(size: int, plain_rows: int, wal_bytes: int) -> int:
    """Bytes the run needs on the data directory's file system (``wal_bytes``: the WAL
    it may keep, max_wal_size)."""
    return DISK_BYTES_PER_DOC * size + PLAIN_BYTES_PER_ROW * plain_rows + wal_bytes + DISK_MARGIN


def free_disk(conn: Connection) -> tuple[str, int] | None:
    """The server's data directory and the bytes free on its file system; None when this
    client cannot see it (another machine, or no privilege to read data_directory)."""
    try:
        row = conn.execute("SELECT current_setting('data_directory')").fetchone()
    except psycopg.Error:
        return None
    directory = str(row[0]) if row else ""
    if not directory or not os.path.isdir(directory):
        return None
    return directory, shutil.disk_usage(directory).free


def check_disk(conn: Connection, needed: int, what: str) -> None:
    """Stop with a message when the data directory has less than ``needed`` bytes free."""
    found = free_disk(conn)
    if found is None:
        return
    directory, free = found
    if free < needed:
        raise BenchError(f"{what}: {free / GB:.1f} GB free on the file system of the data"
                         f" directory {directory}, and this needs about {needed / GB:.0f} GB:"
                         " free some space or run a smaller --size", status=2)


def planted_fingerprints(rng: np.random.Generator, size: int) -> tuple[Fingerprints,
                                                                      NDArray[np.int64]]:
    """Random fingerprints, PLANTED_SHARE of them a copy of an earlier one with 0 to
    PAIR_DISTANCE bits flipped; and the (earlier, copy) positions of the copies."""
    values = random_fingerprints(rng, size)
    count = int(size * PLANTED_SHARE)
    copies = np.unique(rng.integers(1, size, count))
    sources = (rng.random(len(copies)) * copies).astype(np.int64)  # each before its copy
    values[copies] = values[sources] ^ flip_masks(rng, rng.integers(0, PAIR_DISTANCE + 1,
                                                                    len(copies)))
    return values, np.stack([sources, copies], axis=1)


def expected_answers(fingerprints: Fingerprints, query: int) -> tuple[dict[int, int],
                                                                      list[tuple[int, int]]]:
    """(id -> distance of the rows within 6 bits, the NEAREST nearest by distance then id)."""
    distances = popcount(fingerprints ^ np.int64(query))
    near = np.flatnonzero(distances <= 6)
    cut = int(np.partition(distances, NEAREST - 1)[NEAREST - 1])
    candidates = np.flatnonzero(distances <= cut)
    order = candidates[np.lexsort((candidates, distances[candidates]))][:NEAREST]
    return ({int(i) + 1: int(distances[i]) for i in near},
            [(int(i) + 1, int(distances[i])) for i in order])


def memory_total(field: str = "MemTotal") -> int:
    """Bytes of ``field`` in /proc/meminfo (MemTotal, MemAvailable); 0 where unknown."""
    try:
        with open("/proc/meminfo", encoding="utf-8") as meminfo:
            for line in meminfo:
                if line.startswith(f"{field}:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def pairs_memory_short(size: int, available: int) -> str:
    """Why nearsim_pairs should not run on this machine, or "" when it may."""
    needed = PAIRS_BYTES_PER_DOC * size
    if not available or needed <= available:
        return ""
    return (f"not run: nearsim_pairs holds about {PAIRS_BYTES_PER_DOC} bytes per document in"
            f" the server ({needed / GB:.0f} GB here) and the machine has"
            f" {available / GB:.0f} GB available")


class MemoryWatch:
    """Samples a server process's anonymous memory from /proc while a statement runs."""

    def __init__(self, pid: int) -> None:
        self.path = Path(f"/proc/{pid}/status")
        self.peak_anonymous = 0
        self.peak_resident = 0
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self.watch, daemon=True)

    def read(self) -> dict[str, int]:
        try:
            lines = self.path.read_text(encoding="utf-8").splitlines()
        except OSError:
            return {}
        return {k: int(v.split()[0]) * 1024 for k, _, v in (line.partition(":") for line in lines)
                if k in ("RssAnon", "VmHWM")}

    def watch(self) -> None:
        # from the start and often: nearsim_pairs of 200,000 rows takes a few
        # hundredths of a second
        while True:
            self.peak_anonymous = max(self.peak_anonymous, self.read().get("RssAnon", 0))
            if self.stop.wait(0.01):
                return

    def __enter__(self) -> MemoryWatch:
        self.thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self.stop.set()
        self.thread.join()
        self.peak_resident = self.read().get("VmHWM", 0)


def load(conn: Connection, docset: DocSet, fingerprints: Fingerprints, batch: int,
         result: Result) -> None:
    """COPY the rows in transactions of ``batch``, watching the free disk."""
    started = time.perf_counter()
    for start in range(0, len(fingerprints), batch):
        check_disk(conn, DISK_MARGIN, f"loading stopped at {start:,} rows")
        seconds, _ = copy_rows(conn, docset, start + 1,
                               fingerprints[start:start + batch].tolist())
        result.batch_seconds.append(seconds)
        done = start + min(batch, len(fingerprints) - start)
        if done % max(batch, len(fingerprints) // 10) == 0 or done == len(fingerprints):
            print(f"   {done:,} rows, {batch / seconds:,.0f} rows/s in the last batch",
                  flush=True)
    result.load_seconds = time.perf_counter() - started
    tenth = len(fingerprints) // 10 // batch
    result.first_rate = tenth * batch / sum(result.batch_seconds[:tenth])
    result.last_rate = tenth * batch / sum(result.batch_seconds[-tenth:])


def load_plain(conn: Connection, schema: str, size: int, rows: int) -> tuple[int, int]:
    """A table (id, body) of ``rows`` of the documents, evenly spread over the ids, with
    the same texts: its heap and primary key bytes."""
    plain = sql.Identifier(schema, "plain")
    conn.execute(sql.SQL("CREATE TABLE {} (id bigint PRIMARY KEY, body text)").format(plain))
    step = size // rows
    with conn.transaction(), conn.cursor() as cur, \
            cur.copy(sql.SQL("COPY {} (id, body) FROM STDIN").format(plain)) as copy:
        for start in range(1, rows * step + 1, 100_000 * step):
            copy.write("".join(f"{i}\tdoc {i}\n"
                               for i in range(start, min(start + 100_000 * step,
                                                         rows * step + 1), step)))
    conn.execute(sql.SQL("VACUUM ANALYZE {}").format(plain))
    row = conn.execute("SELECT pg_table_size(%s::regclass), pg_indexes_size(%s::regclass)",
                       (plain.as_string(conn), plain.as_string(conn))).fetchone()
    assert row is not None
    return int(row[0]), int(row[1])


def index_reads(conn: Connection, qualified: str) -> int:
    conn.execute("SELECT pg_catalog.pg_stat_force_next_flush()")
    row = conn.execute("SELECT coalesce(idx_blks_read, 0) FROM pg_catalog.pg_statio_all_tables"
                       " WHERE relid = %s::regclass", (qualified,)).fetchone()
    return int(row[0]) if row else 0


def time_searches(conn: Connection, docset: DocSet, queries: Sequence[int],
                  expected: Sequence[tuple[dict[int, int], list[tuple[int, int]]]],
                  into: dict[str, tuple[float, float, float, float]]) -> None:
    """Each search over every query twice (the first pass untimed), every answer checked;
    p50, p95, mean rows and index blocks read per search ``into`` a dict by search."""
    table = docset.table
    statements = {
        f"k = {k}": sql.SQL("SELECT id, hamming(si, %(q)s::bigint) FROM {} WHERE"
                            " hamming(si, %(q)s::bigint) <= {}").format(table, sql.Literal(k))
        for k in (3, 6)}
    statements[f"ORDER BY hamming() LIMIT {NEAREST}"] = sql.SQL(
        "SELECT id, hamming(si, %(q)s::bigint) FROM {} ORDER BY hamming(si, %(q)s::bigint), id"
        " LIMIT {}").format(table, sql.Literal(NEAREST))
    for name, statement in statements.items():
        plan = "\n".join(r[0] for r in conn.execute(sql.SQL("EXPLAIN ") + statement,
                                                     {"q": queries[0]}))
        if "nearsim rotation index" not in plan:
            raise BenchError(f"{name}: the rotation index is not used:\n{plan}")
        for timed in (False, True):
            reads = index_reads(conn, docset.qualified)
            seconds, found = [], []
            for number, query in enumerate(queries):
                begun = time.perf_counter()
                rows = conn.execute(statement, {"q": query}, prepare=True).fetchall()
                seconds.append(time.perf_counter() - begun)
                within, nearest = expected[number]
                if name.startswith("k = "):
                    k = int(name[4:])
                    wanted: object = {(i, d) for i, d in within.items() if d <= k}
                    got: object = {(int(i), int(d)) for i, d in rows}
                else:
                    wanted, got = nearest, [(int(i), int(d)) for i, d in rows]
                if got != wanted:
                    raise BenchError(f"{name}, query {number}: the answer differs from numpy's"
                                     f" ({len(rows)} rows, numpy {len(wanted)})")  # type: ignore[arg-type]
                found.append(len(rows))
            if timed:
                into[name] = (
                    percentile_ms(seconds, 50), percentile_ms(seconds, 95), float(np.mean(found)),
                    (index_reads(conn, docset.qualified) - reads) / len(queries))


def check_buffers_fit(conn: Connection, value: str, memory: int) -> None:
    """Refuse a shared_buffers the server could not start with: more than half the RAM
    (a server that cannot restart is left down, with the setting in its files)."""
    try:
        row = conn.execute("SELECT pg_catalog.pg_size_bytes(%s)", (value,)).fetchone()
    except psycopg.Error:
        row = None
    wanted = int(row[0]) if row else 0
    if wanted <= 0 or (memory and wanted > memory // 2):
        raise BenchError(f"--search-shared-buffers {value}: more than half of this machine's"
                         f" {memory / GB:.0f} GB of RAM" if wanted > 0 else
                         f"--search-shared-buffers {value}: not a size", status=2)


def set_shared_buffers(conn: Connection, dsn: str, value: str | None,
                       restart_command: str) -> Connection:
    """ALTER SYSTEM SET shared_buffers = ``value`` (RESET with None), then restart the
    server with ``restart_command`` (a shell command): a new session on it."""
    statement = ("ALTER SYSTEM RESET shared_buffers" if value is None else
                 sql.SQL("ALTER SYSTEM SET shared_buffers = {}").format(sql.Literal(value)))
    conn.execute(statement)
    conn.close()
    done = subprocess.run(restart_command, shell=True, capture_output=True, text=True,
                          check=False)
    if done.returncode != 0:
        setting = ("its own shared_buffers" if value is None else
                   f"shared_buffers = {value} in postgresql.auto.conf (ALTER SYSTEM RESET"
                   " shared_buffers once it is up)")
        raise BenchError(f"--restart-command failed ({done.returncode}):"
                         f" {(done.stderr or done.stdout).strip()[-500:]}; the server may be"
                         f" down, with {setting}")
    conn = connect(dsn)
    prepare_session(conn)
    conn.prepare_threshold = PREPARE_WHEN_ASKED
    return conn


def buffered_searches(session: list[Connection], dsn: str, docset: DocSet,
                      queries: Sequence[int],
                      expected: Sequence[tuple[dict[int, int], list[tuple[int, int]]]],
                      result: Result, shared: str, restart_command: str) -> None:
    """The searches again on a server restarted with shared_buffers = ``shared``; the
    server restarted with its own afterwards.  ``session[0]``: the session, replaced by
    a new one after each restart."""
    session[0] = set_shared_buffers(session[0], dsn, shared, restart_command)
    try:
        result.buffered_shared_buffers = shared_buffers(session[0])
        print(f"   the searches again with shared_buffers {result.buffered_shared_buffers}")
        time_searches(session[0], docset, queries, expected, result.buffered_searches)
    finally:
        session[0] = set_shared_buffers(session[0], dsn, None, restart_command)


def all_pairs(conn: Connection, docset: DocSet, fingerprints: Fingerprints,
              planted: NDArray[np.int64], checked: int, result: Result) -> None:
    """nearsim_pairs within PAIR_DISTANCE: time, memory, and the checks."""
    pid = int(conn.execute("SELECT pg_backend_pid()").fetchone()[0])  # type: ignore[index]
    statement = "SELECT a, b, distance FROM nearsim_pairs(%s::regclass, max_distance => %s)"
    with MemoryWatch(pid) as watch:
        begun = time.perf_counter()
        rows = conn.execute(statement, (docset.qualified, PAIR_DISTANCE)).fetchall()
        result.pairs_seconds = time.perf_counter() - begun
    result.pairs = len(rows)
    result.pairs_peak_anonymous = watch.peak_anonymous
    result.pairs_peak_resident = watch.peak_resident
    pairs = np.array([(int(a), int(b), int(d)) for a, b, d in rows], dtype=np.int64).reshape(-1, 3)
    if len(pairs):
        actual = popcount(fingerprints[pairs[:, 0] - 1] ^ fingerprints[pairs[:, 1] - 1])
        wrong = np.flatnonzero((actual != pairs[:, 2]) | (pairs[:, 2] > PAIR_DISTANCE)
                               | (pairs[:, 0] >= pairs[:, 1]))
        if len(wrong):
            a, b, d = pairs[wrong[0]].tolist()
            raise BenchError(f"nearsim_pairs gave ({a}, {b}, {d}): numpy says distance"
                             f" {int(actual[wrong[0]])}")
    found = {(int(a), int(b)) for a, b, _ in pairs.tolist()}
    sources, copies = planted[:, 0] + 1, planted[:, 1] + 1
    near = popcount(fingerprints[sources - 1] ^ fingerprints[copies - 1]) <= PAIR_DISTANCE
    wanted = {(int(min(a, b)), int(max(a, b))) for a, b in zip(sources[near].tolist(),
                                                               copies[near].tolist(), strict=True)
              if a != b}
    missing = wanted - found
    if missing:
        raise BenchError(f"nearsim_pairs misses {len(missing):,} of the {len(wanted):,} planted"
                         f" pairs, e.g. {sorted(missing)[:3]}")
    result.planted_pairs = len(wanted)
    # every pair of some documents, half of them copies, against numpy
    rng = np.random.default_rng(SEED + 3)
    sample = np.concatenate([rng.choice(copies, min(checked // 2, len(copies)), replace=False),
                             rng.integers(1, len(fingerprints) + 1, checked - checked // 2)])
    by_row: dict[int, set[tuple[int, int]]] = {}
    for a, b in found:
        by_row.setdefault(a, set()).add((a, b))
        by_row.setdefault(b, set()).add((a, b))
    for row_id in sample.tolist():
        distances = popcount(fingerprints ^ fingerprints[row_id - 1])
        others = np.flatnonzero(distances <= PAIR_DISTANCE) + 1
        exact = {(min(row_id, int(o)), max(row_id, int(o))) for o in others if o != row_id}
        if by_row.get(row_id, set()) != exact:
            raise BenchError(f"nearsim_pairs: the pairs of row {row_id} differ from numpy's"
                             f" ({len(by_row.get(row_id, set()))} against {len(exact)})")
    result.pairs_checked = len(sample)


SCAN_QUERIES = 2  # the baseline: hamming() scans of the whole table, k = 6


def time_scan(conn: Connection, docset: DocSet, queries: Sequence[int],
              expected: Sequence[tuple[dict[int, int], list[tuple[int, int]]]]) -> float:
    """p50 ms of ``WHERE hamming(si, q) <= 6`` as PostgreSQL runs it without nearsim."""
    statement = sql.SQL("SELECT id, hamming(si, %(q)s::bigint) FROM {} WHERE"
                        " hamming(si, %(q)s::bigint) <= 6 /* scan */").format(docset.table)
    seconds = []
    conn.execute("SET nearsim.enable_rotation_scan = off")
    try:
        for number, query in enumerate(queries[:SCAN_QUERIES]):
            begun = time.perf_counter()
            rows = conn.execute(statement, {"q": query}).fetchall()
            seconds.append(time.perf_counter() - begun)
            if {(int(i), int(d)) for i, d in rows} != set(expected[number][0].items()):
                raise BenchError(f"the hamming() scan, query {number}: differs from numpy")
    finally:
        conn.execute("RESET nearsim.enable_rotation_scan")
    return percentile_ms(seconds, 50)


def summary_rows(r: Result, scan_ms: float) -> list[list[str]]:
    """measurement, value, baseline, ratio, target, met: as the other summaries."""
    label = count_rows(r.size)
    rows = []
    for buffers, searches in r.search_runs():
        for name, (p50, _, found, _) in searches.items():
            limit = TARGETS[name]
            rows.append([f"{name}, {label} (exact, {found:.1f} rows on average),"
                         f" shared_buffers {buffers}, p50 ms", ms(p50),
                         f"{ms(scan_ms)} (hamming() scan, k = 6)", times(scan_ms / p50),
                         f"<= {limit:g} ms", "yes" if p50 <= limit else "no"])
    ratio = r.last_rate / r.first_rate
    rows.append([f"COPY, last tenth of {label} ({count_rows(r.size // 10)}), rows/s",
                 f"{r.last_rate:,.0f}", f"{r.first_rate:,.0f} (first tenth)", f"{ratio:.2f}",
                 f">= {TARGET_LOAD_RATIO:g}", "yes" if ratio >= TARGET_LOAD_RATIO else "no"])
    plain = (r.plain_heap_bytes + r.plain_key_bytes) / max(r.plain_rows, 1)
    rows.append([f"bytes/doc nearsim adds, {label} (rotation indexes {r.rotation_per_doc:.1f},"
                 f" si column {r.si_per_doc:.1f})", f"{r.added_per_doc:.1f}",
                 f"{plain:.1f} (plain table: heap and primary key)",
                 f"{r.added_per_doc / plain:.2f}", "-", "-"])
    if r.pairs_skipped:
        rows.append([f"nearsim_pairs within {PAIR_DISTANCE} bits, {label}", r.pairs_skipped,
                     "-", "-", "-", "-"])
        return rows
    rows.append([f"nearsim_pairs within {PAIR_DISTANCE} bits, {label} ({r.pairs:,} pairs), s",
                 f"{r.pairs_seconds:.1f}", "-", "-", "-", "-"])
    rows.append([f"nearsim_pairs within {PAIR_DISTANCE} bits, {label}, backend's peak"
                 " anonymous memory, MB", f"{r.pairs_peak_anonymous / MB:,.0f}",
                 f"{r.pairs_peak_resident / MB:,.0f} (its peak resident size)", "-", "-", "-"])
    return rows


def size_text(nbytes: int) -> str:
    return f"{nbytes / GB:.1f} GB" if nbytes >= GB else f"{nbytes / MB:.0f} MB"


def needs(r: Result) -> str:
    """What the figures need: shared_buffers, the sizes read, and the machine's memory."""
    reads = {name: v[3] for name, v in r.searches.items()}
    memory = f"{r.memory_total / GB:.0f} GB of RAM" if r.memory_total else "unknown RAM"
    return (f"What the figures need: the searches read the rotation indexes"
            f" ({size_text(r.rotation_bytes)}) and, for the rows they return, the heap"
            f" ({size_text(r.heap_bytes)}). shared_buffers was {r.shared_buffers}, so a search"
            " read index blocks from outside it, per search: "
            + ", ".join(f"{name} {v:.1f}" for name, v in reads.items())
            + f"; they came from the operating system's page cache, on a machine with {memory}."
            " The p50 above therefore need memory for the rotation indexes"
            f" ({size_text(r.rotation_bytes)}) in shared_buffers or the page cache; with less,"
            " each such block is a read from storage. "
            + (f"With shared_buffers {r.buffered_shared_buffers} the same searches read, per"
               " search, "
               + ", ".join(f"{name} {v[3]:.1f}" for name, v in r.buffered_searches.items())
               + " blocks from outside it. " if r.buffered_searches else "")
            + (f"nearsim_pairs was {r.pairs_skipped}." if r.pairs_skipped else
               f"nearsim_pairs held {r.pairs_peak_anonymous / MB:,.0f} MB of memory of its own"
               f" at its peak, {r.pairs_peak_anonymous / r.size:.0f} bytes per document: it"
               " holds every key and fingerprint of the table and sorts them (C), so its"
               " memory grows with the table, and with the near pairs of distinct"
               " fingerprints, not with the rows of pairs it sends."))


def hundred_section(results: dict[str, Any] | None) -> str:
    """The section of docs/BENCHMARKS.md, from ``hundred.json``."""
    if results is None:
        return ("No results of `make bench-100m` (benchmarks/hundred.py) next to this run. It"
                " takes an hour or more on 2 cores and about 30 GB of disk.")
    from .docs import table  # docs imports this module

    r = Result.from_json(results["result"])
    pairs = ("" if r.pairs_skipped else
             f"; the pairs: each pair's distance, all {r.planted_pairs:,} planted pairs found,"
             f" and every pair of {r.pairs_checked} documents against numpy")
    full = r.size >= SIZE
    scope = ("" if full else
             f"\n\n**This run is the benchmark's own check at {count_rows(r.size)} documents,"
             " not the 100 million it is made for**: `make bench-100m` runs"
             f" `{FULL_COMMAND}` (an hour or more on 2 cores, about 30 GB of disk).")
    searches = table(["search", "shared_buffers", "p50 ms", "p95 ms", "rows (mean)",
                      "index blocks read from outside shared_buffers, per search"],
                     [[name, buffers, ms(p50), ms(p95), f"{found:.1f}", f"{reads:.1f}"]
                      for buffers, measured in r.search_runs()
                      for name, (p50, p95, found, reads) in measured.items()])
    sizes = table(["relation", "GB", "bytes/doc"], [
        ["heap (id, body, si)", f"{r.heap_bytes / GB:.2f}", f"{r.heap_bytes / r.size:.1f}"],
        ["primary key", f"{r.key_bytes / GB:.2f}", f"{r.key_bytes / r.size:.1f}"],
        ["rotation indexes", f"{r.rotation_bytes / GB:.2f}", f"{r.rotation_per_doc:.1f}"],
        [f"plain table (id, body), {count_rows(r.plain_rows)} of the rows: heap",
         f"{r.plain_heap_bytes / GB:.2f}", f"{r.plain_heap_bytes / r.plain_rows:.1f}"],
        ["plain table: primary key", f"{r.plain_key_bytes / GB:.2f}",
         f"{r.plain_key_bytes / r.plain_rows:.1f}"]])
    return f"""Written by `{results["command"]}` ({results["seconds"]:.0f} s).{scope}

One table of {count_rows(r.size)} documents, enabled while empty and filled by COPY in
transactions of {r.batch_rows:,} rows with the fingerprints supplied ({r.load_seconds:.0f} s),
with PostgreSQL's defaults but for what docs/OPERATIONS.md and docs/LOADING.md tell a user to
set for such a load: `nearsim.insert_buffer` = {r.insert_buffer} (a transaction's index
entries, 48 bytes a row) and max_wal_size = {r.max_wal_size}. Random fingerprints, one in a
hundred a copy of an earlier one with 0 to 3 bits flipped. Every answer below is checked
against numpy's brute force over all {r.size:,} fingerprints (an `int64` array){pairs}.
nearsim {results["nearsim"]}, PostgreSQL
{results["postgresql"]}; {results["cpu"]}, {results["cores"]} cores{shared(results)}.

{table(["measurement", "value", "baseline", "ratio", "target", "met?"], results["summary"])}

{searches}

{sizes}

{needs(r)}"""


def run(dsn: str, size: int, batch: int, plain_rows: int, queries: int, checked: int,
        max_wal_size: str | None, results_file: str | None, command: str,
        search_buffers: str | None = None, restart_command: str | None = None) -> int:
    started = time.perf_counter()
    load_before = load_average()
    conn = connect(dsn)
    schema = f"nearsim_hundred_{os.getpid()}_{secrets.token_hex(3)}"
    insert_buffer = f"{-(-batch * ENTRY_BYTES // (1024 * 1024))}MB"
    with conn:
        version = prepare_session(conn)
        check_rotation_index_api(conn)
        row = conn.execute("SELECT pg_catalog.pg_size_bytes(coalesce(%s,"
                           " pg_catalog.current_setting('max_wal_size')))",
                           (max_wal_size,)).fetchone()
        needed = disk_needed(size, min(size, plain_rows), int(row[0]) if row else 0)
        check_disk(conn, needed, f"{count_rows(size)} documents")
        if free_disk(conn) is None:
            print("   the data directory is not visible from here: free disk not checked"
                  f" (about {needed / GB:.0f} GB needed)")
        print(f"{count_rows(size)} documents on one server: COPY in transactions of"
              f" {batch:,} rows, {queries} queries; nearsim.insert_buffer {insert_buffer}")
        conn.execute("SELECT set_config('nearsim.insert_buffer', %s, false)", (insert_buffer,))
        wal_default = str(conn.execute("SHOW max_wal_size").fetchone()[0])  # type: ignore[index]
        result = Result(size, batch, insert_buffer, max_wal_size or wal_default,
                        shared_buffers(conn), memory_total())
        print(f"   nearsim {nearsim.__version__}; PostgreSQL {version}; {cpu_model()},"
              f" {os.cpu_count()} cores; shared_buffers {result.shared_buffers};"
              f" {result.memory_total / GB:.0f} GB of RAM")
        if search_buffers is not None:
            check_buffers_fit(conn, search_buffers, result.memory_total)
        conn.execute(sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(schema)))
        conn.prepare_threshold = PREPARE_WHEN_ASKED
        session = [conn]
        try:
            if max_wal_size:
                result.max_wal_size = set_max_wal_size(conn, max_wal_size)
            rng = np.random.default_rng(SEED)
            fingerprints, planted = planted_fingerprints(rng, size)
            chosen = make_queries(rng, fingerprints, queries)
            name = "documents"
            table = sql.Identifier(schema, name)
            qualified = table.as_string(conn)
            conn.execute(sql.SQL("CREATE TABLE {} (id bigint PRIMARY KEY, body text,"
                                 " si bigint)").format(table))
            conn.execute("SELECT nearsim_enable(%s::regclass, 'body')", (qualified,))
            docset = DocSet("uniform, 1% near copies", size, name, qualified, table,
                            sql.Identifier(schema, f"{name}_similar"), fingerprints, chosen,
                            "random 64-bit values, 1% near copies", default_bands(size))
            load(conn, docset, fingerprints, batch, result)
            if max_wal_size:
                set_max_wal_size(conn, None)
            conn.execute(sql.SQL("VACUUM ANALYZE {}").format(table))
            row = conn.execute("SELECT pg_table_size(%s::regclass), pg_relation_size("
                               "(SELECT conindid FROM pg_constraint WHERE conrelid ="
                               " %s::regclass AND contype = 'p'))",
                               (qualified, qualified)).fetchone()
            assert row is not None
            result.heap_bytes, result.key_bytes = int(row[0]), int(row[1])
            result.rotation_bytes = index_storage(conn, qualified).total
            result.plain_rows = min(size, plain_rows)
            result.plain_heap_bytes, result.plain_key_bytes = load_plain(
                conn, schema, size, result.plain_rows)
            print(f"   loaded in {result.load_seconds:.0f} s; computing the answers with numpy")
            expected = [expected_answers(fingerprints, q) for q in chosen.tolist()]
            prewarm_search(conn, schema, docset)
            time_searches(conn, docset, chosen.tolist(), expected, result.searches)
            scan_ms = time_scan(conn, docset, chosen.tolist(), expected)
            result.pairs_skipped = pairs_memory_short(size, memory_total("MemAvailable"))
            if result.pairs_skipped:
                print(f"   nearsim_pairs {result.pairs_skipped}")
            else:
                all_pairs(conn, docset, fingerprints, planted, checked, result)
            if search_buffers is not None and restart_command is not None:
                buffered_searches(session, dsn, docset, chosen.tolist(), expected, result,
                                  search_buffers, restart_command)
        finally:
            conn = session[0]  # a new one after a restart
            try:
                if max_wal_size:
                    set_max_wal_size(conn, None)
                conn.execute(sql.SQL("DROP SCHEMA {} CASCADE").format(sql.Identifier(schema)))
            except psycopg.Error as error:
                print(f"could not drop {schema}: {error}", file=sys.stderr)
            conn.close()
    summary = summary_rows(result, scan_ms)
    print()
    print_table(["measurement", "value", "baseline", "ratio", "target", "met?"], summary,
                "<>>>><")
    print()
    wrap(needs(result))
    total = time.perf_counter() - started
    missed = sum(row[5] == "no" for row in summary)
    print(f"\n   {missed} of {sum(row[5] != '-' for row in summary)} targets missed;"
          f" total time {total:.0f} s")
    if results_file:
        payload = {"command": command, "full_command": FULL_COMMAND, "seconds": total,
                   "nearsim": nearsim.__version__, "postgresql": version, "cpu": cpu_model(),
                   "cores": os.cpu_count(), "python": platform.python_version(),
                   "load_average": [load_before, load_average()],
                   "scan_ms": scan_ms, "summary": summary, "result": asdict(result)}
        with open(results_file, "w", encoding="utf-8") as out:
            json.dump(payload, out, indent=1)
            out.write("\n")
        print(f"   results written to {results_file}")
    return 0


FULL_COMMAND = ("python -m benchmarks.hundred --size 100000000 --max-wal-size 8GB"
                " --search-shared-buffers 10GB --restart-command CMD"
                " --results benchmarks/results/hundred.json")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.hundred", description=__doc__)
    parser.add_argument("--dsn", default=os.environ.get("NEARSIM_DSN"), required=False)
    parser.add_argument("--size", type=int, default=SIZE, help="documents (default 100 million)")
    parser.add_argument("--batch-rows", type=int, default=BATCH_ROWS,
                        help="rows per COPY transaction (at most a tenth of --size)")
    parser.add_argument("--plain-rows", type=int, default=PLAIN_ROWS)
    parser.add_argument("--queries", type=int, default=QUERIES)
    parser.add_argument("--pairs-checked", type=int, default=PAIRS_CHECKED)
    parser.add_argument("--max-wal-size", metavar="SIZE",
                        help="max_wal_size while loading (ALTER SYSTEM on the server, reset"
                        " afterwards: for a cluster of the benchmark's own)")
    parser.add_argument("--search-shared-buffers", metavar="SIZE",
                        help="the searches again with this shared_buffers (ALTER SYSTEM and"
                        " --restart-command, reset afterwards: for a cluster of the"
                        " benchmark's own)")
    parser.add_argument("--restart-command", metavar="CMD",
                        help="a shell command that restarts the server, for"
                        " --search-shared-buffers")
    parser.add_argument("--results", metavar="FILE")
    args = parser.parse_args(argv)
    if (args.search_shared_buffers is None) != (args.restart_command is None):
        parser.error("--search-shared-buffers and --restart-command go together")
    if not args.dsn:
        parser.error("--dsn (or NEARSIM_DSN) is required")
    if args.size < 100_000 or args.queries < 1 or args.plain_rows < 1000:
        parser.error("--size must be at least 100000, --queries at least 1 and --plain-rows"
                     " at least 1000")
    batch = min(args.batch_rows, args.size // 10)
    if batch < 1 or (args.size // 10) % batch or args.size % batch:
        parser.error("--batch-rows must divide a tenth of --size")
    if batch * ENTRY_BYTES > MAX_INSERT_BUFFER:
        parser.error(f"--batch-rows at most {MAX_INSERT_BUFFER // ENTRY_BYTES:,}: a transaction's"
                     " index entries must fit in nearsim.max_insert_buffer (256MB)")
    words = list(argv if argv is not None else sys.argv[1:])
    shown = [w for i, w in enumerate(words) if not w.startswith("--dsn")
             and not (i and words[i - 1] == "--dsn")]
    try:
        return run(args.dsn, args.size, batch, args.plain_rows, args.queries, args.pairs_checked,
                   args.max_wal_size, args.results,
                   " ".join(["python -m benchmarks.hundred", *map(shlex.quote, shown)]),
                   args.search_shared_buffers, args.restart_command)
    except BenchError as error:
        print(f"benchmarks.hundred: {error}", file=sys.stderr)
        return error.status


if __name__ == "__main__":
    sys.exit(run_main(main))
