"""100 million documents on one server (benchmarks/hundred.py): its planted
near-duplicates, its answers, its refusal to start without the disk it needs,
and a small run of the whole, every answer checked."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from contextlib import AbstractContextManager
from pathlib import Path

import numpy as np
import psycopg
import pytest

from benchmarks import common, docs, hundred
from benchmarks.common import BenchError
from benchmarks.docsets import popcount

ROOT = Path(__file__).resolve().parents[2]


def test_planted_copies_are_within_three_bits_of_an_earlier_document() -> None:
    values, planted = hundred.planted_fingerprints(np.random.default_rng(3), 200_000)
    assert len(values) == 200_000
    assert 0.009 * 200_000 < len(planted) <= 0.01 * 200_000
    sources, copies = planted[:, 0], planted[:, 1]
    assert (sources < copies).all()
    assert len(np.unique(copies)) == len(copies)
    # a source may itself be a copy made afterwards; the others are within 3 bits
    first = ~np.isin(sources, copies)
    assert (popcount(values[sources[first]] ^ values[copies[first]]) <= 3).all()


def test_answers_are_the_rows_within_six_bits_and_the_ten_nearest() -> None:
    values = np.array([0b111, 0, 0b1, *(0x7F00 | i for i in range(20))], dtype=np.int64)
    within, nearest = hundred.expected_answers(values, 0)
    assert within == {1: 3, 2: 0, 3: 1}
    assert nearest[:4] == [(2, 0), (3, 1), (1, 3), (4, 7)]
    assert len(nearest) == hundred.NEAREST
    assert [d for _, d in nearest] == sorted(d for _, d in nearest)


def test_it_refuses_to_start_without_the_disk_it_needs(database: str) -> None:
    conn = common.connect(database)
    try:
        found = hundred.free_disk(conn)
        assert found is not None, "the test server's data directory is on this machine"
        directory, free = found
        with pytest.raises(BenchError, match=r"GB free on the file system of the data directory"
                           r" .* and this needs about \d+ GB: free some space or run a smaller"
                           r" --size") as raised:
            hundred.check_disk(conn, free + 10**15, "100M documents")
        assert raised.value.status == 2
        assert directory in str(raised.value)
        hundred.check_disk(conn, 1, "a byte")  # enough: no error
    finally:
        conn.close()


def test_all_pairs_are_left_out_when_the_server_lacks_the_memory_they_take() -> None:
    short = hundred.pairs_memory_short(300_000_000, 20 * hundred.GB)
    assert short.startswith("not run: nearsim_pairs holds about"
                            f" {hundred.PAIRS_BYTES_PER_DOC} bytes per document")
    assert (f"({hundred.PAIRS_BYTES_PER_DOC * 300_000_000 / hundred.GB:.0f} GB here) and the"
            " machine has 20 GB available") in short
    assert hundred.pairs_memory_short(3_000_000, 20 * hundred.GB) == ""
    assert hundred.pairs_memory_short(3_000_000, 0) == ""  # unknown: run it
    result = hundred.Result(100_000_000, 5_000_000, "229MB", "16GB", "128MB", 25 * hundred.GB,
                            first_rate=300_000.0, last_rate=120_000.0, heap_bytes=6 * hundred.GB,
                            rotation_bytes=9 * hundred.GB, plain_rows=10_000_000,
                            plain_heap_bytes=500_000_000, plain_key_bytes=220_000_000,
                            pairs_skipped=short)
    summary = hundred.summary_rows(result, 4000.0)
    assert summary[-1] == ["nearsim_pairs within 3 bits, 100M", short, "-", "-", "-", "-"]
    assert summary[0] == ["COPY, last tenth of 100M (10M), rows/s", "120,000",
                          "300,000 (first tenth)", "0.40", ">= 0.5", "no"]
    assert f"nearsim_pairs was {short}." in hundred.needs(result)


def test_the_disk_needed_grows_with_the_size() -> None:
    assert hundred.disk_needed(100_000_000, 10_000_000, 8 * hundred.GB) > 30 * hundred.GB
    assert hundred.disk_needed(1_000_000, 1_000_000, hundred.GB) < 4 * hundred.GB


def test_a_batch_that_does_not_divide_a_tenth_is_refused() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "benchmarks.hundred", "--dsn", "dbname=none", "--size",
         "1000000", "--batch-rows", "30000"], capture_output=True, text=True, cwd=ROOT,
        check=False)
    assert done.returncode == 2
    assert "--batch-rows must divide a tenth of --size" in done.stderr


def test_a_small_run_checks_every_answer_and_writes_its_results(
    own_server: Callable[..., AbstractContextManager[tuple[str, str]]], tmp_path: Path,
) -> None:  # fmt: skip
    """On a server of its own, which it restarts with another shared_buffers for the
    searches again, and then with its own."""
    results = tmp_path / "hundred.json"
    cluster = ROOT / "scripts" / "pgcluster.sh"
    with own_server("nearsim-hundred-", {}, database="nearsim") as (directory, database):
        restart = f"{cluster} stop {directory} && {cluster} start {directory}"
        done = subprocess.run(
            [sys.executable, "-m", "benchmarks.hundred", "--dsn", database, "--size", "200000",
             "--plain-rows", "20000", "--queries", "10", "--pairs-checked", "20",
             "--search-shared-buffers", "48MB", "--restart-command", restart, "--results",
             str(results)], capture_output=True, text=True, timeout=600, cwd=ROOT, check=False)
        assert done.returncode == 0, done.stderr
        with psycopg.connect(database) as conn:  # up again, with its own setting
            assert conn.execute("SHOW shared_buffers").fetchone() == ("128MB",)
    data = json.loads(results.read_text(encoding="utf-8"))
    result = data["result"]
    assert result["size"] == 200_000 and len(result["batch_seconds"]) == 10
    assert result["pairs"] >= result["planted_pairs"] > 1000
    assert result["pairs_checked"] == 20
    assert result["pairs_peak_anonymous"] > 0  # watched in /proc while nearsim_pairs ran
    searches = {"k = 3", "k = 6", "ORDER BY hamming() LIMIT 10"}
    assert set(result["searches"]) == set(result["buffered_searches"]) == searches
    assert result["shared_buffers"] == "128MB" and result["buffered_shared_buffers"] == "48MB"
    assert sum("shared_buffers 48MB" in row[0] for row in data["summary"]) == 3
    loaded = hundred.Result.from_json(result)
    assert 4 <= loaded.si_per_doc <= 16  # a bigint, and its alignment
    assert 50 <= loaded.rotation_per_doc <= 150
    assert "--dsn" not in data["command"] and database not in data["command"]
    page = hundred.hundred_section(data)
    assert "| k = 6 | 48MB |" in page and "With shared_buffers 48MB the same searches" in page
    assert "the benchmark's own check at 200k documents" in page
    assert hundred.FULL_COMMAND in page
    measured = {row[0].split(",")[0]: row for row in data["summary"]}
    assert measured["COPY"][4] == ">= 0.5"
    assert "No results" in hundred.hundred_section(None)
    # benchmarks.docs finds the results next to the others, and lists the missed targets
    section, loaded = docs.hundred_page(tmp_path)
    assert section == page and loaded == data
    first = data["summary"][0]
    missed = docs.missed_section({"summary": []}, hundred={**data, "summary": [
        [*first[:5], "no"], *data["summary"][1:]]})
    assert f"- {first[0]}: {first[1]} (target {first[4]}" in missed
    assert "No results of `make bench-100m`" in docs.hundred_page(tmp_path / "none")[0]


@pytest.mark.parametrize(("arguments", "message"), [
    (["--search-shared-buffers", "1GB"], "--search-shared-buffers and --restart-command go"
                                         " together"),
    (["--restart-command", "true"], "--search-shared-buffers and --restart-command go together"),
])
def test_shared_buffers_for_the_searches_needs_a_restart(arguments: list[str],
                                                          message: str) -> None:
    done = subprocess.run([sys.executable, "-m", "benchmarks.hundred", "--dsn", "dbname=x",
                           *arguments], capture_output=True, text=True, timeout=60, cwd=ROOT,
                          check=False)  # fmt: skip
    assert done.returncode == 2 and message in done.stderr


@pytest.mark.parametrize("size", ["100TB", "lots"])
def test_a_shared_buffers_the_server_could_not_start_with_is_refused_first(
        database: str, size: str) -> None:
    """Before anything is loaded: the server would stay down with it in its files."""
    done = subprocess.run(
        [sys.executable, "-m", "benchmarks.hundred", "--dsn", database, "--size", "200000",
         "--search-shared-buffers", size, "--restart-command", "false"],
        capture_output=True, text=True, timeout=120, cwd=ROOT, check=False)
    assert done.returncode == 2, done.stderr
    assert f"--search-shared-buffers {size}: " in done.stderr
    with psycopg.connect(database) as conn:
        assert conn.execute("SELECT count(*) FROM pg_namespace"
                            " WHERE nspname LIKE 'nearsim_hundred_%'").fetchone() == (0,)


def test_max_wal_size_is_raised_for_the_load_and_reset_after(database: str) -> None:
    conn = common.connect(database)
    try:
        before = conn.execute("SHOW max_wal_size").fetchone()
        assert hundred.set_max_wal_size(conn, "3GB") == "3GB"
        assert conn.execute("SHOW max_wal_size").fetchone() == ("3GB",)
        hundred.set_max_wal_size(conn, None)
        assert conn.execute("SHOW max_wal_size").fetchone() == before
    finally:
        conn.close()


def test_the_estimate_on_paper_grows_the_sets_of_the_default_layout() -> None:
    """The 100 million estimate of the scale section grows the uniform sets of
    the default bands; a set with more bands is another layout, bigger and faster."""
    def uniform(label: str, documents: int, per_doc: float, ms: float) -> dict[str, object]:
        return {"set": label, "documents": documents, "loaded_bytes_per_doc": per_doc,
                "p50_ms": {"3": ms, "6": 2 * ms, "10": 10 * ms}, "scan_p50_ms": {"6": 400.0}}

    scale = {"sets": [uniform("uniform 1M", 1_000_000, 67.5, 0.1),
                      uniform("text-like 1M", 1_000_000, 60.0, 0.1),
                      uniform("uniform 10M", 10_000_000, 91.3, 0.2),
                      uniform("uniform 10M, 4 bands", 10_000_000, 121.7, 0.05)]}
    text = docs.hundred_million(scale)
    assert "91 bytes per document" in text and "9.1 GB at 100 million" in text
    # doubled from 1M to 10M at every radius, so doubled again: 0.4, 0.8 and 4 ms
    assert "grew 2.0x at k = 3, 2.0x at\nk = 6 and 2.0x at k = 10" in text
    assert "0.4 ms, 0.8 ms and 4 ms at 100 million" in text
