"""The corpus file, the MinHash runs and benchmarks.minhash (quick mode) against a real server."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import psycopg
import pytest
from psycopg import sql

from benchmarks import corpus, corpusfile, docs, minhash, minhash_report, sketches
from benchmarks.truth import pair_codes

ROOT = Path(__file__).resolve().parents[2]

AWKWARD = [
    "plain words only here",
    "a line\nand another\r\nwith\ttabs",
    "a backslash \\ then \\n literally, \\\\n twice and a trailing one \\",
    "\\\n\\t\t\\\\\r",
    "",
    "ünïcödé — “quotes” and emoji 🙂",
]


def test_escaped_texts_read_back_exactly() -> None:
    for text in AWKWARD:
        assert corpusfile.unescape(corpusfile.escape(text)) == text
        assert "\n" not in corpusfile.escape(text) and "\t" not in corpusfile.escape(text)


def test_corpus_file_goes_into_postgresql_unchanged(conn: psycopg.Connection,
                                                    tmp_path: Path) -> None:
    path = tmp_path / "awkward.copy"
    path.write_text("".join(f"{k}\t{corpusfile.escape(t)}\n" for k, t in enumerate(AWKWARD)),
                    encoding="utf-8", newline="\n")
    assert list(corpusfile.read_texts(path)) == AWKWARD
    assert list(corpusfile.read_texts(path, 2)) == AWKWARD[:2]
    conn.execute("CREATE TEMPORARY TABLE awkward (id integer PRIMARY KEY, body text NOT NULL)")
    sent = corpusfile.copy_into(conn, sql.Identifier("awkward"), path, 4)
    assert sent == sum(len(line) for line in path.read_bytes().splitlines(keepends=True)[:4])
    rows = conn.execute("SELECT body FROM awkward ORDER BY id").fetchall()
    assert [r[0] for r in rows] == AWKWARD[:4]


def test_iter_corpus_is_build_corpus_one_at_a_time() -> None:
    built = corpus.build_corpus("small", documents=500)
    assert list(corpus.iter_corpus("small", documents=500)) == built
    # documents below the originals and seed 003's pass still give them all, as before
    assert len(corpus.build_corpus("small", documents=0)) == len(
        list(corpus.iter_corpus("small", documents=0))) > 0
    assert corpus.SIZES["million"] == 1_000_000


def test_corpus_file_is_the_corpus_and_serves_smaller_sizes(tmp_path: Path) -> None:
    made = corpusfile.corpus_file(tmp_path, 450, originals="small")
    assert not made.reused and made.documents == 450
    texts = list(corpusfile.read_texts(made.path))
    assert texts == [d.text for d in corpus.build_corpus("small", documents=450)]
    again = corpusfile.corpus_file(tmp_path, 450, originals="small")
    assert again.reused and again.path == made.path
    smaller = corpusfile.corpus_file(tmp_path, 300, originals="small")
    assert smaller.reused and smaller.path == made.path
    assert list(corpusfile.read_texts(smaller.path, 300)) == [
        d.text for d in corpus.build_corpus("small", documents=300)]
    other_seed = corpusfile.corpus_file(tmp_path, 300, seed=4, originals="small")
    assert not other_seed.reused and other_seed.path != made.path


def test_binary_copy_of_pairs_is_read_into_codes(conn: psycopg.Connection) -> None:
    query = ("COPY (SELECT a, b FROM (VALUES (1, 2), (7, 3), (0, 9), (2, 1)) AS v(a, b))"
             " TO STDOUT (FORMAT binary)")
    with conn.cursor() as cursor, cursor.copy(query) as copy:
        codes = minhash.read_binary_pairs(copy, 10)
    expected = np.unique(pair_codes(np.array([1, 7, 0, 2]), np.array([2, 3, 9, 1]), 10))
    assert codes.tolist() == expected.tolist() == [9, 12, 37]
    with conn.cursor() as cursor, cursor.copy(
        "COPY (SELECT 1::bigint, 2::bigint) TO STDOUT (FORMAT binary)"
    ) as copy, pytest.raises(ValueError, match="two non-null integer columns"):
        minhash.read_binary_pairs(copy, 10)
    with conn.cursor() as cursor, cursor.copy(
        "COPY (SELECT 1, 2) TO STDOUT"
    ) as copy, pytest.raises(ValueError, match="not a binary COPY"):
        minhash.read_binary_pairs(copy, 10)


@pytest.mark.parametrize("parse_bytes", [1, 7, 19, 4096])
def test_pairs_split_anywhere_between_reads_are_read_whole(
        conn: psycopg.Connection, monkeypatch: pytest.MonkeyPatch, parse_bytes: int) -> None:
    """Blocks of any size, the header and rows cut between them: every pair read once,
    sorted, and repeated pairs (in either order) counted once."""
    monkeypatch.setattr(minhash, "PARSE_BYTES", parse_bytes)
    query = ("COPY (SELECT i % 97, (i * 31) % 89 FROM generate_series(1, 3000) AS i)"
             " TO STDOUT (FORMAT binary)")
    with conn.cursor() as cursor, cursor.copy(query) as copy:
        codes = minhash.read_binary_pairs(copy, 100)
    i = np.arange(1, 3001)
    expected = np.unique(pair_codes(i % 97, (i * 31) % 89, 100))
    assert codes.dtype == np.int64 and codes.tolist() == expected.tolist()
    # the same stream a byte at a time
    with conn.cursor() as cursor, cursor.copy(query) as copy:
        data = b"".join(bytes(chunk) for chunk in copy)
    single = minhash.read_binary_pairs((data[n:n + 1] for n in range(len(data))), 100)
    assert single.tolist() == expected.tolist()
    with pytest.raises(ValueError, match="ends with its trailer"):
        minhash.read_binary_pairs([data[:-1]], 100)
    assert minhash.read_binary_pairs([data[:19] + data[-2:]], 100).tolist() == []


def test_bands_are_chosen_as_datasketch_chooses_them() -> None:
    from datasketch import MinHashLSH

    for threshold in (0.8, 0.5):
        lsh = MinHashLSH(threshold=threshold, num_perm=128)
        assert sketches.datasketch_bands(threshold) == (lsh.b, lsh.r)
        bands = sketches.rensa_bands(threshold)
        assert 128 % bands == 0
    # the divisors of 128 nearest datasketch's own 9 x 13 and 25 x 5
    assert (sketches.rensa_bands(0.8), sketches.rensa_bands(0.5)) == (8, 32)


def test_peak_memory_of_a_process_can_be_reset() -> None:
    before = sketches.memory()
    assert before["VmHWM"] >= before["VmRSS"] > 0
    held = bytearray(200_000_000)
    held[::4096] = b"\x01" * len(held[::4096])
    grown = sketches.memory()["VmHWM"]
    del held
    assert sketches.reset_peak()
    assert sketches.memory()["VmHWM"] < grown - 100_000_000


def test_minhash_run_finds_the_copies(tmp_path: Path) -> None:
    made = corpusfile.corpus_file(tmp_path, 400, originals="small")
    for library in sketches.LIBRARIES:
        run = sketches.run_minhash(library, made.path, 400, (0.8, 0.5), tmp_path)
        assert run["sketched"] == 400 and set(run["signature_seconds"]) == {"shingles",
                                                                            "signatures"}
        for t in ("0.8", "0.5"):
            spent = run["thresholds"][t]
            assert set(spent["seconds"]) == {"LSH insert", "LSH query", "estimate"}
            assert spent["candidates"] >= spent["found"] > 50
            assert spent["peak_above_baseline"] > 0
        found = sketches.found_pairs(tmp_path, library, 400, 0.8)
        assert len(found) == run["thresholds"]["0.8"]["found"]
        assert (np.diff(found) > 0).all() and found.max() < 400 * 400
    with pytest.raises(ValueError, match="unknown MinHash library 'minhash'"):
        sketches.run_minhash("minhash", made.path, 400, (0.8,), tmp_path)


def quick_run(database: str, *arguments: str) -> subprocess.CompletedProcess[str]:
    """``python -m benchmarks.minhash --quick`` with ``arguments``, against ``database``."""
    return subprocess.run(
        [sys.executable, "-m", "benchmarks.minhash", "--dsn", database, "--quick", *arguments],
        cwd=ROOT, capture_output=True, text=True, timeout=600, check=False)


def test_quick_run_shows_nearsim_exact_and_scores_minhash(database: str,
                                                          tmp_path: Path) -> None:
    output = tmp_path / "out"
    completed = quick_run(database, "--work-dir", str(tmp_path / "work"),
                          "--output-dir", str(output))
    assert completed.returncode == 0, completed.stderr
    results = json.loads((output / "minhash.json").read_text())
    assert database not in results["command"] and "--quick" in results["command"]
    assert [s["documents"] for s in results["sizes"]] == list(minhash.QUICK_SIZES)
    for size in results["sizes"]:
        assert all(size["truth"]["nearsim_equal"].values())
        for t in ("0.8", "0.5"):
            nearsim = size["methods"]["nearsim"][t]
            assert nearsim["pairs"] == size["truth"]["positives"][t] > 0
            assert set(nearsim["server_phases"]) == {"C join", "nearsim_pairs_verified"}
            assert nearsim["backend_cpu"] > 0 and nearsim["client_cpu"] > 0
            check = size["checks"][t]
            assert check["nearsim_below"] == 0 and check["minhash_only_at_or_above"] == 0
            assert check["nearsim_sampled"] == nearsim["pairs"]
            for library in sketches.LIBRARIES:
                scores = size["scores"][library][t]
                assert 0.5 < scores["recall"] <= 1.0 and 0.5 < scores["precision"] <= 1.0
    page = (output / "minhash.md").read_text()
    assert "nearsim exact, 600 documents, S_R >= 0.8" in page
    assert "| nearsim_pairs_verified |" in page and "Rensa LSH + estimate" in page
    assert docs.minhash_page(output) == page
    assert "No results of `make bench-minhash`" in docs.minhash_page(tmp_path)
    # a run of one size added to the first: the other size kept, the page says from where
    again = quick_run(database, "--sizes", "300", "--libraries", "rensa", "--truth-max", "0",
                      "--phases-max", "0", "--work-dir", str(tmp_path / "work"),
                      "--output-dir", str(tmp_path / "again"),
                      "--add-to", str(output / "minhash.json"))
    assert again.returncode == 0, again.stderr
    merged = json.loads((tmp_path / "again" / "minhash.json").read_text())
    assert [s["documents"] for s in merged["sizes"]] == [300, 600]
    assert "datasketch" not in merged["sizes"][0]["methods"]
    assert "truth" not in merged["sizes"][0] and "truth" in merged["sizes"][1]
    assert merged["sizes"][1]["run"]["command"] == results["command"]
    assert "the C join" in (output / "minhash.md").read_text()
    assert "Sizes kept from an earlier run" in (tmp_path / "again" / "minhash.md").read_text()
    # the same page from the two results, nothing measured
    assert minhash_report.main([str(tmp_path / "again" / "minhash.json"),
                                str(output / "minhash.json"),
                                "--output-dir", str(tmp_path / "page")]) == 0
    rewritten = json.loads((tmp_path / "page" / "minhash.json").read_text())
    assert rewritten["sizes"] == merged["sizes"]
    assert (tmp_path / "page" / "minhash.md").read_text() == (
        tmp_path / "again" / "minhash.md").read_text()
    # the tables are gone, only the schema's name remained in the log
    with psycopg.connect(database) as conn:
        left = conn.execute("SELECT count(*) FROM pg_namespace WHERE nspname LIKE"
                            " 'nearsim_quality_%'").fetchone()
    assert left == (0,)


def test_a_run_can_measure_one_threshold(database: str, tmp_path: Path) -> None:
    """A million documents take 45 to 70 minutes a threshold: one at a time."""
    output = tmp_path / "out"
    arguments = ["--sizes", "300", "--libraries", "rensa", "--phases-max", "0",
                 "--work-dir", str(tmp_path / "work"), "--output-dir", str(output)]
    completed = quick_run(database, *arguments, "--thresholds", "0.8")
    assert completed.returncode == 0, completed.stderr
    results = json.loads((output / "minhash.json").read_text())
    assert results["thresholds"] == [0.8] and "--thresholds 0.8" in results["command"]
    (size,) = results["sizes"]
    assert set(size["methods"]["nearsim"]) == {"0.8"} == set(size["checks"])
    assert set(size["methods"]["rensa"]["thresholds"]) == {"0.8"}
    assert size["truth"]["nearsim_equal"] == {"0.8": True}
    page = (output / "minhash.md").read_text()
    assert "made once for its threshold." in page and "S_R >= 0.5" not in page
    refused = quick_run(database, *arguments, "--thresholds", "0.7")
    assert refused.returncode == 2 and "--thresholds: invalid choice: 0.7" in refused.stderr


def test_report_compares_with_rensa_and_says_when_datasketch_did_not_run() -> None:
    run = {"signature_seconds": {"shingles": 3.0, "signatures": 1.0},
           "signature_cpu": {"shingles": 2.0, "signatures": 1.0},
           "signatures_peak": 10**9,
           "thresholds": {"0.8": {"bands": 8, "rows": 16, "candidates": 12, "found": 10,
                                  "seconds": {"LSH insert": 0.5, "LSH query": 0.25,
                                              "estimate": 0.25},
                                  "cpu": {"LSH insert": 0.5, "LSH query": 0.25,
                                          "estimate": 0.25},
                                  "peak_above_baseline": 2 * 10**9}}}  # fmt: skip
    size = {"documents": 100_000,
            "methods": {"nearsim": {"0.8": {"seconds": 2.5, "pairs": 11,
                                            "backend_cpu": 1.5, "client_cpu": 0.5,
                                            "peak_above_start": 4 * 10**8,
                                            "peak_rss": 5 * 10**8}},
                        "rensa": run, "datasketch": {"skipped": "above --datasketch-max 1"}},
            "scores": {"rensa": {"0.8": {"precision": 1.0, "recall": 10 / 11}}},
            "checks": {"0.8": {"nearsim_below": 0, "nearsim_sampled": 11,
                               "minhash_only_at_or_above": 0, "minhash_only_checked": 0}},
            "truth": {"nearsim_equal": {"0.8": True}}}  # fmt: skip
    assert minhash_report.minhash_seconds(run, "0.8") == 5.0
    assert minhash_report.minhash_seconds(run, "0.8", shingles=False) == 2.0
    assert minhash_report.minhash_seconds(run, "0.8", cpu=True) == 4.0
    rows = minhash_report.rows_of(size, [0.8])
    assert [r[2] for r in rows] == ["nearsim_pairs_verified", "Rensa LSH + estimate",
                                    "datasketch MinHashLSH + estimate"]
    assert rows[0][-1] == "0.50" and rows[1][5] == "2.00 GB (process)"
    assert rows[0][3] == "2.5 (2.0)" and rows[1][3] == "5.0 (4.0)"
    assert rows[2][3] == "not run" and "datasketch-max" in rows[2][4]
    grown = minhash_report.growth({"sizes": [size], "thresholds": [0.8],
                                   "memory_total": 24 * 10**9})
    assert grown[0].startswith("- nearsim_pairs_verified: 100,000 documents at 0.8: 2.5 s")
    # ten times the documents, ten times the memory: 5 GB of the backend, 20 of Rensa
    assert "about 5.00 GB (0.2 times this machine's 24.00 GB)" in grown[1]
    assert grown[1].startswith("  Not measured at 1,000,000 documents") and "CPU" not in grown[1]
    assert "about 20.00 GB" in grown[3]
    # two sizes: the CPU seconds' growth between them carried on to a million
    bigger = json.loads(json.dumps(size))
    bigger["documents"] = 200_000
    bigger["methods"]["nearsim"]["0.8"]["backend_cpu"] = 7.5  # 4 x the CPU for 2 x documents
    two = minhash_report.growth({"sizes": [size, bigger], "thresholds": [0.8]})
    assert "at 0.8 about 200 CPU seconds (growing as documents^2.00 from 100,000 to 200,000)" \
        in two[1]
    targets = minhash_report.targets({"sizes": [size], "thresholds": [0.8]})
    assert targets[0][-1] == "yes" and "equal to the exact truth" in targets[0][1]
    assert targets[1][-1] == "yes" and "0.50x" in targets[1][1] and "1.25x" in targets[1][1]
    assert "CPU 2.0 s / 4.0 s = 0.50x" in targets[1][1]
