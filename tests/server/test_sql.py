"""The SQL functions against a real server, compared with the Python package."""

from __future__ import annotations

import filecmp
import json
import os
import random
import subprocess
from pathlib import Path
from typing import Any

import psycopg
import pytest

import nearsim
from nearsim.client import connect as client_connect

from cases import expand

ROOT = Path(__file__).resolve().parents[2]
GOLDEN = ROOT / "tests" / "golden" / "simhash-default-1.jsonl"
MIN64 = -(1 << 63)
MAX64 = (1 << 63) - 1


def golden_cases() -> list[dict[str, Any]]:
    return [json.loads(line) for line in GOLDEN.read_text(encoding="ascii").splitlines()]


def test_golden_vectors_in_sql(conn: psycopg.Connection) -> None:
    mismatches = []
    for case in golden_cases():
        (value,) = conn.execute("SELECT simhash(%s)", [expand(case)]).fetchone() or (None,)
        if value != case["simhash"]:
            mismatches.append((case["name"], value, case["simhash"]))
    assert mismatches == []


def test_profile_is_the_same_in_sql_and_python(conn: psycopg.Connection) -> None:
    assert conn.execute("SELECT simhash_profile()").fetchone() == (nearsim.PROFILE,)


def test_hamming_matches_python_on_random_and_extreme_pairs(conn: psycopg.Connection) -> None:
    rng = random.Random(20131105)
    extremes = [0, -1, 1, MIN64, MAX64, MIN64 + 1, MAX64 - 1, 0x5555555555555555]
    pairs = [(a, b) for a in extremes for b in extremes]
    pairs += [(rng.randint(MIN64, MAX64), rng.randint(MIN64, MAX64)) for _ in range(10_000)]
    a_values, b_values = zip(*pairs, strict=True)
    rows = conn.execute(
        "SELECT hamming(a, b) FROM unnest(%s::bigint[], %s::bigint[]) WITH ORDINALITY AS t(a, b, n)"
        " ORDER BY n",
        [list(a_values), list(b_values)],
    ).fetchall()
    expected = [bin((a % (1 << 64)) ^ (b % (1 << 64))).count("1") for a, b in pairs]
    assert [r[0] for r in rows] == expected


def test_bits_match_python(conn: psycopg.Connection) -> None:
    rng = random.Random(7)
    values = [0, -1, MIN64, MAX64] + [rng.randint(MIN64, MAX64) for _ in range(1000)]
    rows = conn.execute(
        "SELECT simhash_bits(v), simhash_from_bits(simhash_bits(v)) FROM unnest(%s::bigint[])"
        " WITH ORDINALITY AS t(v, n) ORDER BY n",
        [values],
    ).fetchall()
    assert rows == [(nearsim.bits(v), v) for v in values]


def test_from_bits_errors_name_the_problem(conn: psycopg.Connection) -> None:
    with pytest.raises(psycopg.errors.InvalidTextRepresentation, match="has 3 characters, not 64"):
        conn.execute("SELECT simhash_from_bits('010')")


def test_seed_query_returns_exactly_the_rows_within_six_bits(conn: psycopg.Connection) -> None:
    rng = random.Random(3)
    query_text = "the fool hath said in his heart there is no god " * 3
    query = nearsim.simhash(query_text)
    assert query is not None
    rows = []
    for i in range(3000):
        if i % 10 == 0:  # plant neighbours at every distance from 0 to 10
            flips = rng.sample(range(64), i // 10 % 11)
            value = nearsim.core.bits.to_signed(
                nearsim.core.bits.to_unsigned(query) ^ sum(1 << f for f in flips)
            )
        else:
            value = rng.randint(MIN64, MAX64)
        rows.append((i, value))
    rows.append((3000, None))
    conn.execute("CREATE TEMP TABLE docs (id int PRIMARY KEY, si bigint)")
    with conn.cursor().copy("COPY docs (id, si) FROM STDIN") as copy:
        for row in rows:
            copy.write_row(row)
    expected = sorted(i for i, v in rows if v is not None and nearsim.hamming(v, query) <= 6)
    assert len(expected) > 100

    found = conn.execute(
        "SELECT id FROM docs WHERE hamming(si, simhash(%s)) <= 6 ORDER BY id", [query_text]
    ).fetchall()
    assert [r[0] for r in found] == expected

    literal = query_text.replace("'", "''")
    found = conn.execute(
        f"SELECT id FROM docs WHERE hamming(si, simhash('{literal}')) <= 6 ORDER BY id"
    ).fetchall()
    assert [r[0] for r in found] == expected

    # Server-side prepared statement, as psycopg does after a few executions.
    for _ in range(8):
        found = conn.execute(
            "SELECT id FROM docs WHERE hamming(si, simhash(%s)) <= 6 ORDER BY id",
            [query_text],
            prepare=True,
        ).fetchall()
        assert [r[0] for r in found] == expected


def test_nulls(conn: psycopg.Connection) -> None:
    row = conn.execute(
        "SELECT simhash(NULL), simhash(''), simhash('...'), hamming(NULL, 1), hamming(1, NULL),"
        " simhash_bits(NULL), simhash_from_bits(NULL)"
    ).fetchone()
    assert row == (None,) * 7


def test_functions_are_pinned_and_documented(conn: psycopg.Connection) -> None:
    rows = conn.execute(
        """
        SELECT p.proname, l.lanname, p.proconfig, p.provolatile, p.proparallel,
               obj_description(p.oid, 'pg_proc')
        FROM pg_proc p
        JOIN pg_language l ON l.oid = p.prolang
        JOIN pg_depend d ON d.objid = p.oid AND d.classid = 'pg_proc'::regclass
             AND d.deptype = 'e'
        JOIN pg_extension e ON e.oid = d.refobjid AND e.extname = 'nearsim'
        """
    ).fetchall()
    assert {r[0] for r in rows} >= {
        "simhash", "simhash_profile", "hamming", "simhash_bits", "simhash_from_bits"
    }
    fingerprint_functions = {"simhash", "simhash_profile", "hamming", "simhash_bits",
                             "simhash_from_bits", "nearsim_band", "nearsim_band_probes"}
    for name, language, config, volatility, parallel, comment in rows:
        assert comment, name
        if name in fingerprint_functions:
            assert (volatility, parallel) == ("i", "s"), name
        if language != "c":
            assert config == ["search_path=pg_catalog, pg_temp"], name


def test_install_script_has_no_create_or_replace() -> None:
    source = (ROOT / "extension" / "sql" / "nearsim.sql").read_text()
    assert "OR REPLACE" not in source.upper()
    assert "IF NOT EXISTS" not in source.upper()


def test_a_50_mb_text_is_fingerprinted_without_leaking(database: str) -> None:
    text = expand({"recipe": {"kind": "words", "seed": 50, "count": 12_000_000}})
    assert len(text) > 50_000_000
    expected = nearsim.simhash(text)
    with psycopg.connect(database) as conn:
        pid = conn.execute("SELECT pg_backend_pid()").fetchone()[0]  # type: ignore[index]
        results = []
        sizes = []
        for _ in range(3):
            results.append(conn.execute("SELECT simhash(%s)", [text]).fetchone()[0])  # type: ignore[index]
            sizes.append(_resident_kib(pid))
    assert results == [expected] * 3
    if sizes[0] is not None:
        # The first call grows the backend (Python, numpy, the text);
        # repeating it must not keep growing it.
        assert sizes[2] - sizes[0] < 64 * 1024, sizes  # type: ignore[operator]


def _resident_kib(pid: int) -> int | None:
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return None  # server on another machine
    return int(next(line.split()[1] for line in status.splitlines() if line.startswith("VmRSS")))


def test_a_stale_python_package_in_the_session_is_detected(database: str) -> None:
    with psycopg.connect(database) as conn:
        conn.execute(
            "DO $$\nimport sys, types\nstale = types.ModuleType('nearsim')\n"
            "stale.__version__ = '0.0.1'\nsys.modules['nearsim'] = stale\n$$ LANGUAGE plpython3u"
        )
        stale = psycopg.errors.ObjectNotInPrerequisiteState
        with pytest.raises(stale, match=r"nearsim Python code 0\.0\.1 is loaded"):
            conn.execute("SELECT simhash('x', 'default/1')")  # PL/Python; simhash(text) is C


def test_the_installed_python_code_is_the_repository_code(conn: psycopg.Connection) -> None:
    if os.environ.get("NEARSIM_TEST_DSN"):
        pytest.skip("the server may be on another machine")
    sharedir = subprocess.run(
        ["/usr/lib/postgresql/15/bin/pg_config", "--sharedir"],
        check=True, capture_output=True, text=True,
    ).stdout.strip()
    extension_dir = Path(sharedir) / "extension" / "nearsim"
    installed = extension_dir / "python" / nearsim.__version__ / "nearsim"
    source = ROOT / "python_client" / "nearsim"

    def files(root: Path) -> list[str]:
        return sorted(str(p.relative_to(root)) for p in root.rglob("*")
                      if p.is_file() and "__pycache__" not in p.parts)  # fmt: skip

    # The server gets the front door, the core and the server room; never the client.
    names = [name for name in files(source)
             if "/" not in name or name.split("/")[0] in ("core", "server")]  # fmt: skip
    assert "core/data/stopwords/english.stop" in names and "server/functions.py" in names
    match, mismatch, errors = filecmp.cmpfiles(source, installed, names, shallow=False)
    assert (mismatch, errors) == ([], [])
    assert match == names
    assert files(installed) == names


def test_creating_the_extension_needs_a_superuser(dsn: str) -> None:
    with psycopg.connect(dsn, autocommit=True) as admin:
        admin.execute("DROP DATABASE IF EXISTS nearsim_privileges")
        admin.execute("CREATE DATABASE nearsim_privileges")
        admin.execute("DROP ROLE IF EXISTS nearsim_plain")
        admin.execute("CREATE ROLE nearsim_plain LOGIN")
        admin.execute("GRANT CREATE ON DATABASE nearsim_privileges TO nearsim_plain")
    other = psycopg.conninfo.make_conninfo(dsn, dbname="nearsim_privileges")
    try:
        with psycopg.connect(other, autocommit=True) as conn:
            conn.execute("SET ROLE nearsim_plain")
            with pytest.raises(psycopg.errors.InsufficientPrivilege, match="Must be superuser"):
                conn.execute("CREATE EXTENSION nearsim CASCADE")
            conn.execute("RESET ROLE")
            conn.execute("CREATE EXTENSION plpython3u")
            conn.execute("SET ROLE nearsim_plain")
            denied = r'permission denied to create extension "nearsim"'
            with pytest.raises(psycopg.errors.InsufficientPrivilege, match=denied):
                conn.execute("CREATE EXTENSION nearsim")
            # Once a superuser has created it, any role may call the functions.
            conn.execute("RESET ROLE")
            conn.execute("CREATE EXTENSION nearsim")
            conn.execute("SET ROLE nearsim_plain")
            row = conn.execute("SELECT simhash('hello'), hamming(1, 2)").fetchone()
            assert row == (nearsim.simhash("hello"), 2)
    finally:
        with psycopg.connect(dsn, autocommit=True) as admin:
            admin.execute("DROP DATABASE IF EXISTS nearsim_privileges")
            admin.execute("DROP ROLE IF EXISTS nearsim_plain")


def test_ensure_extension_checks_the_profile(
    conn: psycopg.Connection, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert client_connect.ensure_extension(conn) == nearsim.PROFILE
    monkeypatch.setattr(client_connect, "PROFILE", "default/0")
    with pytest.raises(client_connect.ProfileMismatch, match=r"'default/1', this Python client"):
        client_connect.ensure_extension(conn)


def test_measures_in_sql_are_the_python_measures(conn: psycopg.Connection) -> None:
    from nearsim.core import measures

    rng = random.Random(11)
    words = "the lord said unto moses and aaron in the land of egypt saying".split()
    texts = [" ".join(rng.choice(words) for _ in range(rng.randrange(0, 120)))
             for _ in range(12)]  # fmt: skip
    for a, b in zip(texts, texts[1:] + texts[:1], strict=True):
        row = conn.execute(
            "SELECT longer, shorter, common, s_l, s_j, information_s_l, information_s_j, s_r,"
            " containment, multiset_jaccard FROM nearsim_compare(%s, %s)", [a, b]).fetchone()
        c = measures.compare(a, b)
        assert row == (c.longer, c.shorter, c.common, c.s_l, c.s_j, c.information_s_l,
                       c.information_s_j, c.s_r, c.containment, c.multiset_jaccard)
        signature = conn.execute("SELECT nearsim_minhash(%s, 64)", [a]).fetchone()
        expected = measures.minhash_signature(a, 64)
        if expected[0] == measures.EMPTY_SIGNATURE_VALUE:
            assert signature == (None,)
        else:
            assert signature == ([int(v) for v in expected],)
