"""Every function of the extension, at its largest inputs, ends on a timeout or a cancel.

The list of functions comes from the catalog (what CREATE EXTENSION installed,
pg_depend deptype 'e'); each has an entry below with the largest inputs it
accepts, or a reason why it is exempt.  A function added without an entry
fails :func:`test_every_function_has_an_entry`.

Each entry runs under ``statement_timeout = '1s'`` and must end within a
second of it; the slow ones are also cancelled with ``pg_cancel_backend``
from another session.  The server is a throwaway one started with an address
space limit (``ulimit -v``), so that a runaway statement fails there instead
of growing the machine's memory; after each statement the server must still
be up and the backend's private memory (RssAnon) back near where it was.
"""

from __future__ import annotations

import os
import random
import shutil
import subprocess
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from psycopg import errors

ROOT = Path(__file__).resolve().parents[2]

TIMEOUT = 1.0  # statement_timeout, seconds
GRACE = 1.0  # a statement must end within this after its timeout or cancel
CANCEL_AFTER = 0.3  # seconds before pg_cancel_backend for the slow entries
ADDRESS_SPACE_KB = 4 * 1024 * 1024  # ulimit -v of the test server's processes
MEMORY_SLACK_KB = 256 * 1024  # RssAnon may stay this much above where it was

ROWS = 30_000  # documents of the enabled table
BIG_REPEATS = 3_500_000  # of a 30-byte phrase with non-ASCII letters: about 100 MB
MEASURED_CHARS = 1 << 20  # nearsim.core.measures.MAX_MEASURED_CHARS

BIG = "(SELECT t FROM big)"
MEASURED = "(SELECT t FROM measured)"
ROTATION_INDEX = (
    "(SELECT i.indexrelid::regclass FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid"
    " JOIN pg_am a ON a.oid = c.relam WHERE i.indrelid = 'docs'::regclass"
    " AND a.amname = 'nearsim_btree' LIMIT 1)")

# signature -> (statement with the largest inputs the function accepts, slow)
# Slow entries would run for seconds or longer without a timeout.
ENTRIES: dict[str, tuple[str, bool]] = {
    "hamming(bigint,bigint)": ("SELECT hamming(-1, 0)", False),
    "simhash_bits(bigint)": ("SELECT simhash_bits(-1)", False),
    "simhash_from_bits(text)": (f"SELECT simhash_from_bits({BIG})", False),
    "simhash(text)": (f"SELECT simhash({BIG})", True),
    "simhash(text,text)": (f"SELECT simhash({BIG}, 'chars:1-64+unique')", True),
    "nearsim_profile(text)": ("SELECT nearsim_profile(repeat('words:1-16+', 1000))", False),
    "nearsim_profiles()": ("SELECT * FROM nearsim_profiles()", False),
    "simhash_profile()": ("SELECT simhash_profile()", False),
    "nearsim_band(bigint,integer,integer)": ("SELECT nearsim_band(-1, 16, 15)", False),
    "nearsim_band_probes(bigint,integer,integer,integer)":
        ("SELECT nearsim_band_probes(-1, 64, 3, 0)", False),
    "nearsim_rotate(bigint,integer)": ("SELECT nearsim_rotate(-1, 63)", False),
    "nearsim_check_index(regclass)": (f"SELECT * FROM nearsim_check_index({ROTATION_INDEX})",
                                      False),
    "nearsim_search(regclass,name,bigint,integer)":
        ("SELECT cardinality(nearsim_search('docs', 'si', 0, 64))", False),
    "nearsim_check_batch(regclass,name,name,text[],bigint[],integer,boolean)":
        ("SELECT count(*) FROM nearsim_check_batch('docs', 'id', 'si',"
         " array_fill('k'::text, ARRAY[200000]), array_fill(0::bigint, ARRAY[200000]), 64)",
         True),
    "nearsim_as_owner(regclass,text)": ("SELECT nearsim_as_owner('docs', 'SELECT pg_sleep(60)')",
                                        True),
    "nearsim_link(regclass,regclass[],regprocedure[])":
        ("SELECT nearsim_link('docs', '{}', '{}')", False),
    "nearsim_register(regclass,name,name,name,integer,text,name,name,name,name)":
        ("SELECT nearsim_register('docs', 'id', 'body', 'si', 16, 'default/1', NULL,"
         " 'docs_fingerprint', NULL, 'docs_similar')", False),
    "nearsim_unregister(regclass)": ("SELECT nearsim_unregister('docs')", False),
    "nearsim_enable(regclass,name,name,integer,name,integer,text)":
        ("SELECT nearsim_enable('plain', 'body', bands => 16, profile => 'chars:1-64')", True),
    "nearsim_disable(regclass)": ("SELECT nearsim_disable('docs')", False),
    "nearsim_verify(regclass,boolean)": ("SELECT * FROM nearsim_verify('docs', true)", False),
    "nearsim_rebuild(regclass,integer,boolean,integer,text)":
        ("SELECT * FROM nearsim_rebuild('docs', 16, true, profile => 'chars:1-64')", True),
    "nearsim_check_profile(regclass,text)":
        ("SELECT nearsim_check_profile('docs', repeat('x', 100000))", False),
    "nearsim_compare(text,text,integer,integer,integer)":
        (f"SELECT * FROM nearsim_compare({MEASURED}, {MEASURED}, 1, 1)", True),
    "nearsim_resemblance(text,text,integer)":
        (f"SELECT nearsim_resemblance({BIG}, {BIG} || 'x', 2)", True),
    "nearsim_containment(text,text,integer)":
        (f"SELECT nearsim_containment({BIG}, {BIG} || 'x')", True),
    "nearsim_literal_similarity(text,text,integer)": (
        f"SELECT nearsim_literal_similarity({BIG}, {BIG} || 'x')", True),
    "nearsim_shingle_count(text,integer)": (f"SELECT nearsim_shingle_count({BIG})", True),
    "nearsim_sketch(text,integer)": (f"SELECT nearsim_sketch({BIG})", True),
    "nearsim_sketch_index(regclass)": ("SELECT * FROM nearsim_sketch_index('docs')", False),
    "nearsim_rotation_indexes(regclass)":
        ("SELECT * FROM nearsim_rotation_indexes('docs')", False),
    "nearsim_links(regclass)": ("SELECT nearsim_links('docs')", False),
    "nearsim_resemblance_pairs(regclass,name,name,name,double precision,integer)":
        ("SELECT count(*) FROM nearsim_resemblance_pairs('docs', 'id', 'body', 'si', 1e-9)", False),
    "nearsim_minhash(text,integer)": (f"SELECT cardinality(nearsim_minhash({BIG}, 10000))", True),
    "nearsim_minhash(text,integer,integer)":
        (f"SELECT cardinality(nearsim_minhash({BIG}, 10000, 2))", True),
    "nearsim_minhash_estimate(bigint[],bigint[])":
        ("SELECT * FROM nearsim_minhash_estimate(array_fill(1::bigint, ARRAY[10000]),"
         " array_fill(2::bigint, ARRAY[10000]))", False),
    "nearsim_estimate(integer,text)": ("SELECT * FROM nearsim_estimate(64, 'default/1')", False),
    "nearsim_radius(double precision,text)": ("SELECT nearsim_radius(0.5, 'default/1')", False),
    "nearsim_similar_verified(regclass,text,double precision,text,integer)":
        (f"SELECT count(*) FROM nearsim_similar_verified('docs', {MEASURED}, 0, 's_l', 64)",
         True),
    "nearsim_pairs_verified(regclass,double precision,text,integer)":
        ("SELECT count(*) FROM nearsim_pairs_verified('docs', 0, 's_l', 64)", False),
    "nearsim_clusters_verified(regclass,double precision,text,integer,text,integer)":
        ("SELECT count(*) FROM nearsim_clusters_verified('docs', 0, 's_l', 64, 'pivot', 1)",
         False),
    "nearsim_pairs(regclass,integer)": ("SELECT count(*) FROM nearsim_pairs('docs', 64)", False),
    "nearsim_clusters(regclass,integer,text,integer)":
        ("SELECT count(*) FROM nearsim_clusters('docs', 64, 'pivot', 1)", False),
    "nearsim_nearest(regclass,bigint,integer,integer)":
        ("SELECT count(*) FROM nearsim_nearest('docs', 0, 2147483647, 64)", False),
    "nearsim_guard_lock(regclass)": ("SELECT nearsim_guard_lock('docs')", False),
    "nearsim_writes_as_owner(regclass)": ("SELECT nearsim_writes_as_owner('docs')", False),
    "nearsim_guard(regclass,integer,double precision,text,text)":
        ("SELECT nearsim_guard('docs', 64, 1e-9, 's_l', 'record')", False),
    "nearsim_unguard(regclass)": ("SELECT nearsim_unguard('docs')", False),
}

# Functions that SQL cannot call with arguments of its choosing.
EXEMPT = {
    "nearsim_btree_handler(internal)": "takes internal: the access method's handler, called by"
    " the server only (tests/server/test_btree.py)",
    "nearsim_hamming_support(internal)": "takes internal: hamming()'s planner support function,"
    " called by the planner only (tests/server/test_rotation_scan.py)",
    "nearsim_link_registered()": "trigger of nearsim_tables, fired by nearsim_register (above)",
    "nearsim_guard_check()": "trigger of a check-in guard; its probe is the rotation search"
    " of nearsim_search (above)"
    " per written row (tests/server/test_guard.py)",
    "nearsim_forget_dropped_tables()": "event trigger on DROP",
    "nearsim_follow_owner()": "event trigger on ALTER TABLE ... OWNER TO",
    "nearsim_guard_alter_table()": "event trigger on ALTER TABLE",
    "nearsim_drop_extension()": "event trigger on DROP EXTENSION",
}

PYTHON_SUFFIX = "_python("  # a PL/Python body, callable only through its C function


def _status(pid: int) -> dict[str, int]:
    """RssAnon, VmHWM and VmRSS of a process, in kB."""
    values = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        name, _, value = line.partition(":")
        if name in ("RssAnon", "VmHWM", "VmRSS"):
            values[name] = int(value.split()[0])
    return values


@pytest.fixture(scope="module")
def limited_server() -> Iterator[str]:
    """A throwaway server whose processes may not map more than ADDRESS_SPACE_KB."""
    directory = tempfile.mkdtemp(prefix="nearsim-resources-")
    os.chmod(directory, 0o755)
    port = str(random.Random().randrange(20000, 30000))
    script = str(ROOT / "scripts" / "pgcluster.sh")
    try:
        dsn = subprocess.run(
            ["bash", "-c", 'ulimit -v "$1" && exec "$2" start "$3" "$4" --throwaway', "_",
             str(ADDRESS_SPACE_KB), script, directory, port],
            check=True, capture_output=True, text=True).stdout.strip()
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute("CREATE DATABASE resources")
        yield dsn.replace("dbname=postgres", "dbname=resources")
    finally:
        subprocess.run([script, "stop", directory], check=False)
        shutil.rmtree(directory, ignore_errors=True)


@pytest.fixture(scope="module")
def db(limited_server: str) -> str:
    """The extension, an enabled table of ROWS documents, a plain copy, a text of
    about 100 MB and one of the longest the word-by-word measures take."""
    with psycopg.connect(limited_server, autocommit=True) as conn:
        conn.execute("CREATE EXTENSION nearsim CASCADE")
        conn.execute("SELECT setseed(0.5)")
        conn.execute(
            "CREATE TABLE docs AS SELECT i::bigint AS id, (SELECT string_agg("
            "md5((i * 7 + j)::text), ' ') FROM generate_series(1, 20) j) AS body"
            f" FROM generate_series(1, {ROWS}) i")
        conn.execute("ALTER TABLE docs ADD PRIMARY KEY (id)")
        conn.execute("CREATE TABLE plain AS SELECT * FROM docs")
        conn.execute("ALTER TABLE plain ADD PRIMARY KEY (id)")
        conn.execute("SELECT nearsim_enable('docs', 'body', bands => 16)")
        for name, text in (("big", f"repeat('naïve café lorem ipsum dolor ', {BIG_REPEATS})"),
                           ("measured", f"left(repeat('lorem ipsum dolor sit amet ', 100000),"
                                        f" {MEASURED_CHARS})"),
                           # combining marks: the slowest text of simhash(text) per byte
                           ("marks", "repeat(U&'a\\0301\\0323 ', 12000000)")):
            conn.execute(f"CREATE TABLE {name} (t text)")
            conn.execute(f"ALTER TABLE {name} ALTER t SET STORAGE EXTERNAL")
            conn.execute(f"INSERT INTO {name} SELECT {text}")
        conn.execute("VACUUM ANALYZE")
    return limited_server


def _catalog(dsn: str) -> set[str]:
    with psycopg.connect(dsn) as conn:
        rows = conn.execute(
            "SELECT p.oid::regprocedure::text FROM pg_depend d"
            " JOIN pg_proc p ON p.oid = d.objid"
            " JOIN pg_extension e ON e.oid = d.refobjid"
            " WHERE d.classid = 'pg_proc'::regclass AND d.refclassid = 'pg_extension'::regclass"
            " AND d.deptype = 'e' AND e.extname = 'nearsim'").fetchall()
    return {row[0] for row in rows}


def test_every_function_has_an_entry(db: str) -> None:
    """The table above lists exactly what the extension installs."""
    installed = _catalog(db)
    bodies = {f for f in installed if PYTHON_SUFFIX in f}
    for body in bodies:  # each body's C function has an entry
        assert body.replace("_python(", "(", 1) in ENTRIES, body
    callable_ = installed - bodies
    assert callable_ - ENTRIES.keys() - EXEMPT.keys() == set(), "functions without an entry"
    assert (ENTRIES.keys() | EXEMPT.keys()) - callable_ == set(), "entries of no function"


class Outcome:
    def __init__(self, seconds: float, error: Exception | None,
                 before: dict[str, int], after: dict[str, int]) -> None:
        self.seconds = seconds
        self.error = error
        self.before = before
        self.after = after

    def __repr__(self) -> str:
        error = "ok" if self.error is None else type(self.error).__name__
        return (f"{self.seconds:.2f}s {error} RssAnon {self.before['RssAnon'] // 1024}"
                f" -> {self.after['RssAnon'] // 1024} MB,"
                f" peak RSS {self.after['VmHWM'] // 1024} MB")


def _warm(conn: psycopg.Connection[Any]) -> None:
    """Load the library, Python and numpy once, as every entry would."""
    conn.execute("SELECT simhash('a b c', 'words:3'), nearsim_minhash('a b c', 2)")
    conn.execute("SELECT count(*) FROM nearsim_pairs('docs', 3)")
    conn.rollback()


def run(dsn: str, statement: str, timeout: float = TIMEOUT,
        cancel_after: float | None = None, terminate: bool = False) -> Outcome:
    """Run statement in a transaction under statement_timeout (and cancel or
    terminate it from another session after cancel_after seconds); roll back."""
    with psycopg.connect(dsn) as conn:
        pid = conn.info.backend_pid
        _warm(conn)
        before = _status(pid)
        conn.execute(f"SET LOCAL statement_timeout = '{int(timeout * 1000)}ms'")
        if cancel_after is not None:
            def stop() -> None:
                time.sleep(cancel_after)
                with psycopg.connect(dsn, autocommit=True) as other:
                    other.execute("SELECT pg_terminate_backend(%s)" if terminate
                                  else "SELECT pg_cancel_backend(%s)", (pid,))
            threading.Thread(target=stop, daemon=True).start()
        error: Exception | None = None
        start = time.monotonic()
        try:
            conn.execute(statement).fetchall()
        except psycopg.Error as caught:
            error = caught
        seconds = time.monotonic() - start
        try:
            after = _status(pid)
        except (ProcessLookupError, FileNotFoundError):  # a terminated backend may be gone
            after = before
        if not conn.closed:
            try:
                conn.rollback()
            except errors.QueryCanceled:
                # The timeout can fire just after the statement has ended and
                # land on ROLLBACK instead; the transaction is over either way.
                conn.rollback()
    with psycopg.connect(dsn) as conn:  # the server is up
        assert conn.execute("SELECT 1").fetchone() == (1,)
    return Outcome(seconds, error, before, after)


def _check(outcome: Outcome, deadline: float) -> None:
    assert outcome.seconds < deadline, outcome
    assert not isinstance(outcome.error, (errors.OutOfMemory, errors.ExternalRoutineException,
                                          errors.InternalError_)), (outcome, outcome.error)
    grown = outcome.after["RssAnon"] - outcome.before["RssAnon"]
    assert grown < MEMORY_SLACK_KB, outcome


@pytest.mark.parametrize("signature", sorted(ENTRIES))
def test_ends_on_timeout(db: str, signature: str) -> None:
    statement, slow = ENTRIES[signature]
    outcome = run(db, statement)
    print(f"{signature}: timeout {outcome}")
    _check(outcome, TIMEOUT + GRACE)
    if slow:
        cancelled = run(db, statement, timeout=60, cancel_after=CANCEL_AFTER)
        print(f"{signature}: cancel {cancelled}")
        assert isinstance(cancelled.error, errors.QueryCanceled), cancelled
        _check(cancelled, CANCEL_AFTER + GRACE)


# -- the regressions of the report ----------------------------------------------


def test_pairs_radius_with_too_many_pairs_is_refused_at_once(db: str) -> None:
    """nearsim_pairs at 40 bits on 30,000 rows (some 450 million pairs) is
    refused with the limit named, not left to grow the backend."""
    outcome = run(db, "SELECT count(*) FROM nearsim_pairs('docs', 40)")
    assert isinstance(outcome.error, errors.ProgramLimitExceeded), outcome.error
    assert "nearsim.max_pairs" in str(outcome.error)
    assert outcome.error.diag.message_hint and "max_distance" in outcome.error.diag.message_hint
    assert outcome.seconds < 0.5, outcome
    assert outcome.after["VmHWM"] - outcome.before["VmHWM"] < MEMORY_SLACK_KB, outcome


SHINGLE_BYTES = 16  # nearsim_resemblance_pairs' memory per distinct shingle of each text, at most


def test_exact_join_holds_its_stated_bytes_per_shingle(db: str) -> None:
    """nearsim_resemblance_pairs holds about 14 bytes per distinct shingle of each text
    while it ranks them, then less (OPERATIONS.md): 3,000 texts of 2,000 words, some
    6 million shingles, raise the backend's peak by less than 16 bytes each and a
    little more.  (It held 24 bytes each and a copy of every text it read.)"""
    with psycopg.connect(db, autocommit=True) as conn:
        conn.execute("DROP TABLE IF EXISTS joined")
        conn.execute(
            "CREATE TABLE joined AS SELECT i::bigint AS id, (SELECT string_agg("
            "left(md5((i * 2000 + j)::text), 8), ' ') FROM generate_series(1, 2000) j) AS body,"
            " NULL::bigint AS si FROM generate_series(1, 3000) i")
        shingles = conn.execute("SELECT sum(nearsim_shingle_count(body)) FROM joined").fetchone()
        assert shingles is not None and shingles[0] > 5_000_000
        pid = conn.info.backend_pid
        _warm(conn)
        # the table's pages in shared memory are this backend's already, before the peak is reset
        conn.execute("SELECT sum(length(body)) FROM joined")
        Path(f"/proc/{pid}/clear_refs").write_text("5")
        before = _status(pid)
        found = conn.execute("SELECT count(*) FROM nearsim_resemblance_pairs('joined', 'id',"
                             " 'body', 'si', 0.5)").fetchone()
        after = _status(pid)
        conn.execute("DROP TABLE joined")
    assert found == (0,)
    grown_kb = after["VmHWM"] - before["VmRSS"]
    assert grown_kb < SHINGLE_BYTES * shingles[0] // 1024 + 48 * 1024, (grown_kb, shingles)


def test_minhash_with_huge_hashes_is_refused(db: str) -> None:
    outcome = run(db, "SELECT nearsim_minhash('one two three four', 100000)")
    assert isinstance(outcome.error, errors.ProgramLimitExceeded), outcome.error
    assert "10000" in str(outcome.error) and "hashes" in str(outcome.error)


def test_unique_profile_is_bounded(db: str) -> None:
    """simhash(text, 'chars:1-64+unique') of 2 MB held every feature's hash
    (over 3 GB); now it is cancelled on time with memory to spare."""
    outcome = run(db, "SELECT simhash(left((SELECT t FROM big), 2000000), 'chars:1-64+unique')")
    assert isinstance(outcome.error, (errors.QueryCanceled, errors.ProgramLimitExceeded)), outcome
    assert outcome.seconds < TIMEOUT + GRACE, outcome
    assert outcome.after["VmHWM"] - outcome.before["VmHWM"] < 1024 * 1024, outcome


def test_c_simhash_of_100_mb_is_cancelled_within_100_ms(db: str) -> None:
    outcome = run(db, "SELECT simhash(t) FROM marks", timeout=60, cancel_after=1.0)
    assert isinstance(outcome.error, errors.QueryCanceled), outcome
    assert outcome.seconds < 1.0 + 0.1, outcome


def test_pl_python_is_terminated(db: str) -> None:
    """pg_terminate_backend ends a backend busy in PL/Python; the server stays up."""
    outcome = run(db, f"SELECT nearsim_minhash({BIG}, 10000)", timeout=60, cancel_after=0.5,
                  terminate=True)
    assert isinstance(outcome.error, psycopg.OperationalError), outcome
    assert outcome.seconds < 0.5 + GRACE, outcome


@pytest.mark.parametrize("function", ["simhash(%s)", "simhash(%s, 'default/1')",
                                      "simhash(%s, 'chars:3')"])
def test_a_run_of_combining_marks_is_bounded(db: str, function: str) -> None:
    """Normalising a run of combining marks takes time that grows with its
    square, uninterruptibly: 2,048 in a row are fingerprinted, more refused,
    by the C code and the Python alike."""
    marks = "repeat(U&'\\0301\\0323', {})"
    with psycopg.connect(db) as conn:
        assert conn.execute(f"SELECT {function % marks.format(1024)}").fetchone() is not None
        with pytest.raises(errors.ProgramLimitExceeded, match="2048 characters in a row"):
            conn.execute(f"SELECT {function % marks.format(1025)}")
    outcome = run(db, f"SELECT {function % marks.format(1024)}")
    assert outcome.error is None and outcome.seconds < 0.1, outcome
