"""The wild set's reader, the nested corpus sizes and benchmarks.verified (quick mode)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import psycopg
import pytest

from benchmarks import corpus, docs, truth, verified, verified_report, verified_sets, wild

ROOT = Path(__file__).resolve().parents[2]

LICENCE = (
    "Permission is hereby granted, free of charge, to any person obtaining a copy of this"
    " software and associated documentation files (the Software), to deal in the Software"
    " without restriction, including without limitation the rights to use, copy, modify,"
    " merge, publish, distribute, sublicense, and/or sell copies of the Software."
)


def _write(directory: Path, package: str, data: bytes) -> Path:
    (directory / package).mkdir(parents=True, exist_ok=True)
    path = directory / package / "copyright"
    path.write_bytes(data)
    return path


@pytest.fixture
def doc_directory(tmp_path: Path) -> Path:
    """A fake /usr/share/doc: near-duplicates, a symbolic link, a hard link, a
    copy, invalid UTF-8, an empty file and a directory without a copyright."""
    docs = tmp_path / "doc"
    _write(docs, "alpha", f"Files: *\nCopyright: 2001 Alpha\n\n{LICENCE}\n".encode())
    _write(docs, "beta", f"Files: *\nCopyright: 2019 Beta Team\n\n{LICENCE}\n".encode())
    _write(docs, "gamma", f"Copyright (c) Gamma\n\n{LICENCE}\n\n{LICENCE} Again.\n".encode())
    _write(docs, "alpha-copy", (docs / "alpha" / "copyright").read_bytes())  # identical bytes
    (docs / "alpha-link").symlink_to("alpha")  # a directory link: the same file
    (docs / "delta").mkdir()
    os.link(docs / "beta" / "copyright", docs / "delta" / "copyright")  # a hard link
    _write(docs, "latin1", "Copyright: Fran\u00e7ois M\u00fcller\n\n".encode("latin-1")
           + LICENCE.encode() + b"\n")
    _write(docs, "empty", b"")
    _write(docs, "blank", b" \n\n \n")
    (docs / "no-copyright").mkdir()
    return docs


def test_reader_skips_links_copies_and_empty_files(doc_directory: Path) -> None:
    reading = wild.read_copyright_files(doc_directory, versions=False)
    assert reading.paths == 9
    # Paths in byte order: alpha-copy/ and alpha-link/ come before alpha/.
    assert [d.id for d in reading.documents] == ["alpha-copy", "beta", "gamma", "latin1"]
    assert reading.skipped == {"same file": 2, "identical content": 1, "no words": 2,
                               "not a file": 0}  # fmt: skip
    alpha = reading.documents[0]
    assert alpha.paths == (str(doc_directory / "alpha-copy" / "copyright"),
                           str(doc_directory / "alpha-link" / "copyright"))
    latin = reading.documents[3]
    assert reading.not_utf8 == [str(doc_directory / "latin1" / "copyright")]
    assert "\ufffd" in latin.text and "Permission is hereby granted" in latin.text
    assert reading.packages == {}
    # The digest says which files were read: another file changes it.
    again = wild.read_copyright_files(doc_directory, versions=False)
    assert again.digest == reading.digest
    _write(doc_directory, "epsilon", b"Copyright: Epsilon\n\nSomething else entirely.\n")
    changed = wild.read_copyright_files(doc_directory, versions=False)
    assert changed.digest != reading.digest and len(changed.documents) == 5


def test_paragraph_set_keeps_each_paragraph_once(doc_directory: Path) -> None:
    reading = wild.read_copyright_files(doc_directory, versions=False)
    files, paragraphs = wild.copyright_sets(reading)
    assert files.texts == [d.text for d in reading.documents]
    # The licence paragraph of alpha, beta and gamma is one document; gamma's
    # longer variant is another; the latin1 file's licence paragraph is the same text.
    texts = paragraphs.texts
    assert texts == [LICENCE, f"{LICENCE} Again."]
    assert paragraphs.documents[0].id == "alpha-copy#2"
    assert len(paragraphs.documents[0].paths) == 5  # alpha-copy, alpha-link, beta, gamma, latin1
    assert all(len(t.split()) >= wild.MIN_WORDS for t in texts)
    exact = truth.similar_pairs(texts, keep=0.5)
    assert exact.positives(0.8) == 1


def test_package_versions_of_the_system() -> None:
    # nearsim runs on Debian, where dpkg lists the installed packages
    versions = wild.package_versions()
    assert versions.get("base-files")


def test_nested_sizes_are_prefixes_and_keep_ancestors() -> None:
    documents, sizes = corpus.nested_corpus("small", (400, 250, 300))
    assert sizes == [250, 300, 400] and len(documents) == 400
    for size in sizes:
        alone = corpus.build_corpus("small", seed=3, documents=size)
        assert [(d.id, d.text) for d in alone] == [(d.id, d.text) for d in documents[:size]]
    position = {d.id: k for k, d in enumerate(documents)}
    for k, document in enumerate(documents):
        if document.origin is not None:
            assert position[document.origin] < k and position[document.parent or ""] < k
    again, _ = corpus.nested_corpus("small", (250, 300, 400))
    assert [(d.id, d.text) for d in again] == [(d.id, d.text) for d in documents]
    with pytest.raises(ValueError, match="sizes start at"):
        corpus.nested_corpus("small", (100, 400))


def test_large_size_uses_the_full_originals() -> None:
    assert corpus.SIZES["large"] >= 100_000
    assert corpus.CURVE_SIZES[-1] == corpus.SIZES["large"]
    assert corpus.SIZES["full"] in corpus.CURVE_SIZES
    assert list(corpus.CURVE_SIZES) == sorted(corpus.CURVE_SIZES)


def test_truth_of_a_prefix_is_the_truth_of_the_prefix() -> None:
    texts = [d.text for d in corpus.build_corpus("small", seed=3)]
    whole = truth.similar_pairs(texts, keep=0.5)
    part = truth.similar_pairs(texts[:250], keep=0.5)
    for threshold in (0.8, 0.5):
        assert np.array_equal(verified_sets.prefix_positives(whole, 250, threshold),
                              part.codes(threshold))


def test_quick_verified_run(database: str, doc_directory: Path, tmp_path: Path) -> None:
    output = tmp_path / "out"
    completed = subprocess.run(
        [sys.executable, "-m", "benchmarks.verified", "--dsn", database, "--quick",
         "--output-dir", str(output), "--wild-directory", str(doc_directory),
         "--lookups", "8"],
        capture_output=True, text=True, timeout=240, cwd=ROOT,
    )
    assert completed.returncode == 0, completed.stderr
    results = json.loads((output / "verified.json").read_text())
    assert database not in results["command"] and "--quick" in results["command"]
    names = [s["name"] for s in results["sets"]]
    assert names == ["copyright files", "copyright paragraphs", "corpus, 250 documents",
                     "corpus, 400 documents"]
    assert results["wild_reading"]["files"] == 4
    for chosen in results["sets"]:
        methods = {(o["method"], o["threshold"]) for o in chosen["outcomes"]}
        assert methods == {(m, t) for m in (verified_sets.NEARSIM, verified_sets.MINHASH,
                                            verified_sets.SIMHASH)
                           for t in (0.8, 0.5)}
        for outcome in chosen["outcomes"]:
            assert outcome["status"] == "ok"
            assert 0.0 <= outcome["scores"]["recall"] <= 1.0
            assert outcome["seconds"] == pytest.approx(sum(outcome["phases"].values()))
        for outcome in (o for o in chosen["outcomes"] if o["method"] == verified_sets.NEARSIM):
            # Everything the table needs is in the cost, and verified pairs are exact.
            assert set(outcome["phases"]) == {"COPY", "nearsim_enable", "ANALYZE",
                                              "nearsim_pairs_verified"}
            assert outcome["scores"]["precision"] == 1.0
            assert outcome["extra"]["recall_within_radius"] == 1.0
    # The truth of each corpus size counts the pairs among its own documents.
    corpus_sets = [s for s in results["sets"] if s["kind"] == "corpus"]
    assert corpus_sets[0]["truth"]["positives"]["0.5"] < corpus_sets[1]["truth"]["positives"][
        "0.5"]
    assert [s["summary"] for s in corpus_sets] == [False, True]
    for lookup in results["lookups"]:
        assert lookup["timed"] == 8 and lookup["over_timeout"] == 0
        assert lookup["answers"]["precision"] == 1.0
        assert lookup["p50_ms"] > 0
    assert [(p["documents"], p["threshold"]) for p in results["curve"]] == [
        (250, 0.8), (250, 0.5), (400, 0.8), (400, 0.5)]
    measurements = [row[0] for row in results["summary"]]
    assert sum("cost" in m for m in measurements) == 6  # two wild sets and the largest size
    assert all(row[5] in ("yes", "no") for row in results["summary"])
    assert results["cut"] == []
    assert (output / verified_report.FIGURE).exists()
    page = (output / "verified.md").read_text()
    assert "### Cost curve" in page and "| copyright paragraphs |" in page
    # benchmarks.docs takes the section and the missed targets from these files.
    section, data = docs.verified_section(output)
    assert section == page and data == results
    missed = docs.missed_section({"summary": []}, None, data)
    misses = sum(row[5] == "no" for row in results["summary"])
    listed = [line for line in missed.splitlines() if line.startswith("- ")]
    assert len(listed) == misses if misses else missed.startswith("Every target")
    assert "No results of benchmarks/verified.py" in docs.verified_section(tmp_path)[0]
    with psycopg.connect(database) as conn:
        left = conn.execute(
            "SELECT count(*) FROM pg_namespace WHERE nspname LIKE 'nearsim_quality_%'"
        ).fetchone()
    assert left == (0,)


def test_over_budget_is_reported_and_larger_sizes_skipped(database: str, tmp_path: Path,
                                                          doc_directory: Path) -> None:
    # A budget no query can meet: every nearsim query is cut off or skipped.
    results = verified.evaluate(database, quick=True, output_dir=tmp_path, pair_budget=0.001,
                                lookup_count=3, wild_directory=doc_directory)
    statuses = [(s["name"], o["threshold"], o["status"]) for s in results["sets"]
                for o in s["outcomes"] if o["method"] == verified_sets.NEARSIM]
    assert ("corpus, 250 documents", 0.8, "over budget") in statuses
    assert ("corpus, 400 documents", 0.8, "skipped") in statuses
    assert ("corpus, 400 documents", 0.5, "skipped") in statuses
    assert any("over the budget at 250 documents" in c for c in results["cut"])
    rows = {row[0]: row for row in results["summary"]}
    assert rows["verified pairs cost, corpus, 400 documents, S_R >= 0.8"][5] == "no"
    # The lookups still run, on a table loaded for them.
    assert all(lookup["timed"] == 3 for lookup in results["lookups"])
    assert "### What the budgets cut" in (tmp_path / "verified.md").read_text()


class _SlowResets:
    """A real connection whose first RESETs are slowed past a 1 ms statement_timeout,
    so the server cancels them as a busy machine would."""

    def __init__(self, conn: psycopg.Connection, slow: int) -> None:
        self.conn = conn
        self.slow = slow
        self.cancelled = 0

    def execute(self, query: object, *args: object) -> psycopg.Cursor:
        if query == "RESET statement_timeout" and self.slow:
            self.slow -= 1
            try:
                self.conn.execute("SELECT pg_sleep(0.05)")
            except psycopg.errors.QueryCanceled:
                self.cancelled += 1
                raise
        return self.conn.execute(query, *args)  # type: ignore[arg-type]


def test_a_cancelled_reset_of_a_tiny_timeout_is_sent_again(database: str) -> None:
    with psycopg.connect(database, autocommit=True) as conn:
        slowed = _SlowResets(conn, slow=3)
        verified_sets.set_timeout(slowed, 0.001)  # type: ignore[arg-type]
        verified_sets.set_timeout(slowed, None)  # type: ignore[arg-type]
        assert slowed.cancelled == 3
        assert conn.execute("SHOW statement_timeout").fetchone() == ("0",)


@pytest.mark.parametrize(("p50", "p90", "met"), [(1.3, 2.1, "yes"), (1.97, 17.52, "no"),
                                                  (3.5, 4.0, "no")])
def test_a_lookup_meets_its_target_by_p50_and_p90(p50: float, p90: float, met: str) -> None:
    """The target of a verified search is p50 <= 3 ms and p90 <= 10 ms, both."""
    lookup = {"documents": 1_000_000, "threshold": 0.5, "path": "sketch index", "asked": 200,
              "timed": 200, "over_timeout": 0, "p50_ms": p50, "p90_ms": p90}
    rows = verified_report.summary_rows({"sets": [], "lookups": [lookup]})
    assert rows == [[
        "nearsim_similar_verified p50 / p90, 1,000,000 documents, S_R >= 0.5, sketch index",
        f"{p50:.2f} / {p90:.2f} ms (200 queries, 0 over the timeout)", "-", "-",
        "<= 3 / <= 10 ms", met]]
