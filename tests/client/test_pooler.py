"""nearsim-load behind a real pgbouncer in transaction mode.

A pooler in transaction mode hands one server connection to many clients,
one transaction at a time: whatever a client sets for its session stays on
the server connection for the next client.  The loader's settings (the
profile it declares, its work_mem) must last for its transactions only, or
another client's rows would be taken as declared fingerprints.
"""

from __future__ import annotations

from pathlib import Path

import psycopg
import pytest

from nearsim.client.loader import LoadOptions, load_paths

TEXTS = [
    "In the beginning God created the heaven and the earth and the earth was without form",
    "Now it came to pass in the days when the judges ruled that there was a famine in the land",
    "Blessed is the man that walketh not in the counsel of the ungodly nor standeth in the way",
]


def test_the_loaders_settings_do_not_reach_the_next_client(
    pooled: str, tmp_path: Path
) -> None:
    for number, text in enumerate(TEXTS):
        (tmp_path / f"{number}.txt").write_text(text)
    summary = load_paths([str(tmp_path)], "pooled_docs", dsn=pooled, create=True,
                         options=LoadOptions(workers=1, batch_rows=1))
    assert summary.loaded == len(TEXTS) and not summary.failures
    # the next client on the same server connection
    with psycopg.connect(pooled, autocommit=True) as other:
        assert other.execute("SELECT pg_catalog.current_setting('nearsim.profile', true)"
                             ).fetchone() in ((None,), ("",))
        with pytest.raises(psycopg.errors.InvalidParameterValue, match="is not the default/1"):
            other.execute("INSERT INTO pooled_docs (key, source, content_hash, body, si)"
                          " VALUES ('forged', 'x', '\\x00', 'some words of a text here', 42)")
        assert other.execute("SELECT ok, stale FROM nearsim_verify('pooled_docs', true)"
                             ).fetchone() == (True, 0)
    # and a second load through the pool, which updates what changed
    (tmp_path / "0.txt").write_text(TEXTS[0] + " and a new ending for this first text")
    again = load_paths([str(tmp_path)], "pooled_docs", dsn=pooled,
                       options=LoadOptions(workers=1, batch_rows=1))
    assert (again.loaded, again.updated, again.unchanged) == (0, 1, 2)


def test_verify_names_stale_fingerprints(database: str) -> None:
    with psycopg.connect(database, autocommit=True) as conn:
        conn.execute("CREATE TABLE stale_docs (id int PRIMARY KEY, body text)")
        conn.execute("INSERT INTO stale_docs SELECT g, 'document number ' || g || ' of many'"
                     " FROM generate_series(1, 20) g")
        conn.execute("SELECT nearsim_enable('stale_docs', 'body')")
        conn.execute("ALTER TABLE stale_docs DISABLE TRIGGER USER")
        conn.execute("UPDATE stale_docs SET body = 'changed behind its back' WHERE id = 7")
        conn.execute("ALTER TABLE stale_docs ENABLE TRIGGER USER")
        for fingerprints in (True, None):  # a table this small is checked whole by default
            ok, stale, keys = conn.execute(
                "SELECT ok, stale, sample_keys FROM nearsim_verify('stale_docs', %s)",
                [fingerprints]).fetchone()
            assert (ok, stale, keys) == (False, 1, ["7"])
        conn.execute("SELECT nearsim_rebuild('stale_docs', fingerprints => true)")
        assert conn.execute("SELECT ok, stale FROM nearsim_verify('stale_docs')").fetchone() == (
            True, 0)
