"""What the tests of rotation-indexed tables share: fingerprints, tables, errors."""

from __future__ import annotations

import random
from collections.abc import Iterable

import psycopg
import pytest
from psycopg import sql

from nearsim.core.bands import default_bands

MIN64 = -(1 << 63)
MAX64 = (1 << 63) - 1
EXTREMES = [0, -1, MIN64, MAX64, 1, MIN64 + 1, MAX64 - 1]


def hamming(a: int, b: int) -> int:
    return ((a ^ b) & ((1 << 64) - 1)).bit_count()


def flip(value: int, positions: Iterable[int]) -> int:
    unsigned = value & ((1 << 64) - 1)
    for position in positions:
        unsigned ^= 1 << position
    return unsigned - (1 << 64) if unsigned >= 1 << 63 else unsigned


def make_docs(
    conn: psycopg.Connection, fingerprints: list[int], *, bands: int | None = None,
    table: str = "docs",
) -> None:
    """An enabled table loaded with fingerprints computed elsewhere, as a loader does.

    The session declares them fingerprints of the table's profile, as the
    loader does, so the triggers keep them unchecked.
    """
    conn.execute("SET LOCAL nearsim.profile = 'default/1'")
    conn.execute(sql.SQL("CREATE TABLE {} (id bigint PRIMARY KEY, body text, si bigint)").format(
        sql.Identifier(table)))
    bands = default_bands(len(fingerprints)) if bands is None else bands
    conn.execute("SELECT nearsim_enable(%s, 'body', bands => %s)", (table, bands))
    with conn.cursor().copy(
        sql.SQL("COPY {} (id, body, si) FROM STDIN").format(sql.Identifier(table))
    ) as copy:
        for i, fp in enumerate(fingerprints):
            copy.write_row((i, f"document {i}", fp))
    conn.execute(sql.SQL("ANALYZE {}").format(sql.Identifier(table)))


def clustered_fingerprints(rng: random.Random) -> list[int]:
    """Random values, the extremes, many identical and many differing in one band."""
    seed = rng.getrandbits(64) - (1 << 63)
    values = [rng.getrandbits(64) - (1 << 63) for _ in range(600)]
    values += EXTREMES
    values += [seed] * 150
    values += [flip(seed, rng.sample(range(48, 64), rng.randint(1, 8))) for _ in range(300)]
    values += [flip(seed, rng.sample(range(64), rng.randint(1, 12))) for _ in range(300)]
    return values


def error_of(conn: psycopg.Connection, statement: str, *args: object) -> psycopg.Error:
    conn.execute("SAVEPOINT attempt")
    with pytest.raises(psycopg.Error) as caught:
        conn.execute(statement, args or None)
    conn.execute("ROLLBACK TO SAVEPOINT attempt")
    return caught.value


def assert_no_drift(
    conn: psycopg.Connection, table: str = "docs", *, fingerprints: bool = True
) -> None:
    """The index holds the documents (and, for real texts, fingerprints match texts)."""
    report = conn.execute(
        "SELECT ok, missing, extra, wrong, COALESCE(stale, 0), triggers_ok, sample_keys"
        " FROM nearsim_verify(%s, fingerprints => %s)", (table, fingerprints)
    ).fetchone()
    assert report == (True, 0, 0, 0, 0, True, None), report
