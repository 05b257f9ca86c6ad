"""Every way a batch goes into an enabled table declares the fingerprints the
client computed, and the table's trigger keeps them: the streamed COPY of new
keys, the staged upsert of changed ones, the staged upsert of a screened
batch (--on-near-duplicate) and the merge into a table of the user's own."""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from pathlib import Path

import psycopg
import pytest

from nearsim.client.loader import LoadOptions, LoadSummary, load_paths

TEXTS = {
    "genesis.txt": "In the beginning God created the heaven and the earth and the earth was"
                   " without form and void",
    "ruth.txt": "Now it came to pass in the days when the judges ruled that there was a"
                " famine in the land",
    "psalm.txt": "Blessed is the man that walketh not in the counsel of the ungodly nor"
                 " standeth in the way of sinners",
}  # fmt: skip


def function_calls(dsn: str) -> dict[str, int]:
    """Calls of each function the server has counted (track_functions)."""
    with psycopg.connect(dsn) as conn:
        return {name: calls for name, calls in conn.execute(
            "SELECT p.oid::pg_catalog.regprocedure::text, s.calls FROM pg_stat_user_functions s"
            " JOIN pg_proc p ON p.oid = s.funcid")}


def computed_in_the_server(dsn: str, write: Callable[[], LoadSummary]
                           ) -> tuple[dict[str, int], LoadSummary]:
    """The calls of the fingerprint functions and triggers the server made while
    ``write`` ran (its sessions count them: track_functions), and what it wrote.

    The loader's sessions report their counts as they end; a sentinel's
    session, which starts after they ended, calls ``hamming`` once, and its
    count is awaited.
    """
    before = function_calls(dsn)
    summary = write()
    with psycopg.connect(dsn) as conn:
        conn.execute("SELECT hamming(0, 1)")
    deadline = time.monotonic() + 10
    while True:
        calls = {name: count - before.get(name, 0)
                 for name, count in function_calls(dsn).items()}
        if calls.get("hamming(bigint,bigint)", 0) >= 1 or time.monotonic() > deadline:
            break
        time.sleep(0.1)
    assert calls.get("hamming(bigint,bigint)") == 1, "the sentinel's call was not counted"
    return {name: count for name, count in calls.items()
            if count and (name.startswith(("simhash(", "simhash_python("))
                          or name.split("(")[0].endswith("fingerprint"))}, summary


@pytest.fixture
def counted(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PGOPTIONS", "-c track_functions=all")


def files(root: Path, texts: dict[str, str]) -> list[str]:
    root.mkdir(exist_ok=True)
    for name, text in texts.items():
        (root / name).write_text(text)
    return [str(root / name) for name in texts]


def test_the_streamed_copy_and_the_upsert_keep_the_declared_fingerprints(
    database: str, tmp_path: Path, counted: None
) -> None:
    table = f"writers_{uuid.uuid4().hex[:8]}"
    paths = files(tmp_path / "docs", TEXTS)
    options = LoadOptions(workers=1)

    # New keys into an empty table: one COPY into the table itself.
    calls, summary = computed_in_the_server(database, lambda: load_paths(
        paths, table, dsn=database, create=True, options=options))
    assert calls == {}
    assert (summary.loaded, summary.failures) == (3, 0)

    # A changed text meets its stored key: the COPY fails, the batch is staged
    # and upserted.
    (tmp_path / "docs" / "ruth.txt").write_text(TEXTS["ruth.txt"] + " of Judah")
    calls, summary = computed_in_the_server(database, lambda: load_paths(
        paths, table, dsn=database, options=options))
    assert calls == {}
    assert (summary.updated, summary.unchanged, summary.failures) == (1, 2, 0)


def test_a_screened_batch_keeps_the_declared_fingerprints(
    database: str, tmp_path: Path, counted: None
) -> None:
    table = f"writers_{uuid.uuid4().hex[:8]}"
    texts = {**TEXTS, "genesis-again.txt": TEXTS["genesis.txt"]}  # a near-duplicate
    paths = files(tmp_path / "docs", texts)
    options = LoadOptions(workers=1, on_near_duplicate="record")
    calls, summary = computed_in_the_server(database, lambda: load_paths(
        paths, table, dsn=database, create=True, options=options))
    assert calls == {}
    assert (summary.loaded, summary.recorded, summary.failures) == (4, 1, 0)


def test_the_merge_into_a_users_table_keeps_the_declared_fingerprints(
    database: str, tmp_path: Path, counted: None
) -> None:
    table = f"articles_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(database, autocommit=True) as conn:
        conn.execute(f"CREATE TABLE {table} (name text PRIMARY KEY, content text)".encode())
        conn.execute("SELECT nearsim_enable(%s, 'content')", [table])
    paths = files(tmp_path / "docs", TEXTS)
    options = LoadOptions(workers=1, key_column="name", text_column="content")
    calls, summary = computed_in_the_server(database, lambda: load_paths(
        paths, table, dsn=database, options=options))
    assert calls == {}
    assert (summary.loaded, summary.failures) == (3, 0)
    with psycopg.connect(database) as conn:
        stored = conn.execute(
            f"SELECT count(*) FROM {table} WHERE si = simhash(content)".encode()).fetchone()
    assert stored == (3,)
