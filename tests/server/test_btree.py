"""The nearsim_btree access method: a flush that an error interrupts.

The pg_regress test ``btree`` covers each point where a transaction's
waiting entries go into the index; this one stops a flush half-way (a
statement timeout inside an exception block) and checks that the next
flush puts in the rest and the entries taken since, each once.
"""

from __future__ import annotations

import psycopg

ROWS = 3_000_000


def scans_stop_on_timeouts(conn: psycopg.Connection) -> None:
    """scan_or_time_out(): a scan of keys through keys_k, caught if a timeout stops it;
    the transaction's entries all wait until then."""
    conn.execute("""CREATE FUNCTION scan_or_time_out() RETURNS text LANGUAGE plpgsql AS $$
        BEGIN
            PERFORM 1 FROM keys WHERE k = 0::bigint;
            RETURN 'scanned';
        EXCEPTION WHEN query_canceled THEN
            RETURN 'timed out';
        END $$""")
    conn.execute("SET LOCAL nearsim.insert_buffer = '1GB'")
    conn.execute("SET LOCAL enable_seqscan = off")
    conn.execute("SET LOCAL enable_bitmapscan = off")


def test_a_flush_stopped_by_an_error_resumes_where_it_stopped(conn: psycopg.Connection) -> None:
    conn.execute("CREATE TABLE keys (id integer PRIMARY KEY, k bigint)")
    conn.execute("CREATE INDEX keys_k ON keys USING nearsim_btree (k)")
    scans_stop_on_timeouts(conn)
    conn.execute("INSERT INTO keys SELECT g, hashint8(g) FROM generate_series(1, %s) g",
                 (ROWS,))
    # The scan begins by putting the 3 million waiting entries in, which takes
    # seconds; the timeout stops it part of the way, inside the function's
    # subtransaction, and the transaction goes on.
    conn.execute("SET LOCAL statement_timeout = '500ms'")
    assert conn.execute("SELECT scan_or_time_out()").fetchone() == ("timed out",)
    conn.execute("SET LOCAL statement_timeout = 0")
    # more entries wait behind those left
    conn.execute("INSERT INTO keys SELECT g, hashint8(g) FROM generate_series(%s, %s) g",
                 (ROWS + 1, ROWS + 100_000))
    in_index = conn.execute("SELECT count(*), count(DISTINCT id) FROM keys"
                            " WHERE k >= -9223372036854775808").fetchone()
    assert in_index == (ROWS + 100_000, ROWS + 100_000)
    plan = "\n".join(r[0] for r in conn.execute(
        "EXPLAIN SELECT count(*) FROM keys WHERE k >= -9223372036854775808"))
    assert "keys_k" in plan


def test_a_flush_into_a_full_index_stopped_by_an_error_resumes_where_it_stopped(
        conn: psycopg.Connection) -> None:
    """As above, with a few entries on each leaf of an index built beforehand
    (its leaves 90 % full): a flush then goes from leaf to leaf without a split,
    and what it has put on a leaf but not written yet must go in again."""
    stored = 1_000_000
    conn.execute("CREATE TABLE keys (id integer PRIMARY KEY, k bigint)")
    conn.execute("INSERT INTO keys SELECT g, hashint8(g) FROM generate_series(1, %s) g",
                 (stored,))
    conn.execute("CREATE INDEX keys_k ON keys USING nearsim_btree (k)")
    conn.execute("CREATE EXTENSION IF NOT EXISTS amcheck")
    scans_stop_on_timeouts(conn)
    conn.execute("INSERT INTO keys SELECT g, hashint8(g) FROM generate_series(%s, %s) g",
                 (stored + 1, stored + 300_000))
    conn.execute("SET LOCAL statement_timeout = '100ms'")
    assert conn.execute("SELECT scan_or_time_out()").fetchone() == ("timed out",)
    conn.execute("SET LOCAL statement_timeout = 0")
    in_index = conn.execute("SELECT count(*), count(DISTINCT id) FROM keys"
                            " WHERE k >= -9223372036854775808").fetchone()
    assert in_index == (stored + 300_000, stored + 300_000)
    conn.execute("UPDATE pg_class SET relam = (SELECT oid FROM pg_am WHERE amname = 'btree')"
                 " WHERE oid = 'keys_k'::regclass")
    conn.execute("SELECT bt_index_parent_check('keys_k', heapallindexed => true)")
