"""A batch checked against a table in one call, as the guard checks rows one by one."""

from __future__ import annotations

import random

import psycopg
import pytest
from psycopg import sql

K = 4


def flip(value: int, positions: list[int]) -> int:
    unsigned = value & ((1 << 64) - 1)
    for position in positions:
        unsigned ^= 1 << position
    return unsigned - (1 << 64) if unsigned >= 1 << 63 else unsigned


def make_table(conn: psycopg.Connection, name: str, stored: list[tuple[int, int]],
               bands: int | None = None) -> None:
    conn.execute(sql.SQL("CREATE TABLE {} (id bigint PRIMARY KEY, body text, si bigint)")
                 .format(sql.Identifier(name)))
    if bands is None:
        conn.execute("SELECT nearsim_enable(%s, 'body')", (name,))
    else:
        conn.execute("SELECT nearsim_enable(%s, 'body', bands => %s)", (name, bands))
    with conn.cursor().copy(sql.SQL("COPY {} (id, body, si) FROM STDIN")
                            .format(sql.Identifier(name))) as copy:
        for key, fingerprint in stored:
            copy.write_row((key, "stored", fingerprint))


def batch_of(rng: random.Random, stored: list[tuple[int, int]], size: int,
             k: int = K) -> list[tuple[int, int | None]]:
    """New documents: random ones, variants of stored and of earlier new ones,
    some without a fingerprint, keys of stored documents (updates) and keys
    repeated in the batch."""
    batch: list[tuple[int, int | None]] = []
    for n in range(size):
        roll = rng.random()
        earlier = [f for _, f in batch if f is not None]
        fingerprint: int | None
        if roll < 0.05:
            fingerprint = None
        elif roll < 0.3 or not earlier:
            fingerprint = rng.getrandbits(64) - (1 << 63)
        elif roll < 0.6:
            fingerprint = flip(rng.choice(stored)[1], rng.sample(range(64), rng.randint(0, k + 1)))
        else:
            fingerprint = flip(rng.choice(earlier), rng.sample(range(64), rng.randint(0, k + 1)))
        key_roll = rng.random()
        if key_roll < 0.1:
            key = rng.choice(stored)[0]
        elif key_roll < 0.15 and batch:
            key = rng.choice(batch)[0]
        else:
            key = 10_000 + n
        batch.append((key, fingerprint))
    return batch


def one_by_one(conn: psycopg.Connection, table: str, batch: list[tuple[int, int | None]],
               action: str, k: int = K) -> dict[int, tuple[str, int]]:
    """Each document upserted under the guard: position -> (existing key, distance)."""
    conn.execute("SELECT nearsim_guard(%s, max_distance => %s, action => %s)",
                 (table, k, action))
    found: dict[int, tuple[str, int]] = {}
    # a text without words has no fingerprint (simhash() is NULL), so NULL is kept
    upsert = sql.SQL("INSERT INTO {} VALUES (%s, CASE WHEN %s::bigint IS NULL THEN '' ELSE 'new'"
                     " END, %s) ON CONFLICT (id) DO UPDATE SET body = EXCLUDED.body,"
                     " si = EXCLUDED.si").format(sql.Identifier(table))
    links = sql.Identifier(f"{table}_nearsim_links")
    links_before = 0
    for position, (key, fingerprint) in enumerate(batch, start=1):
        cursor = conn.execute(upsert, (key, fingerprint, fingerprint))
        if action == "skip" and cursor.rowcount == 0:
            found[position] = ("?", -1)
        if action == "record":
            # an upsert of a stored key may record twice: by its INSERT and its UPDATE
            count = conn.execute(sql.SQL("SELECT count(*) FROM {}").format(links)).fetchone()
            assert count is not None
            if count[0] > links_before:
                links_before = count[0]
                row = conn.execute(sql.SQL("SELECT existing_key::text, distance FROM {}"
                                           " ORDER BY ctid DESC LIMIT 1").format(links)).fetchone()
                assert row is not None
                found[position] = (row[0], row[1])
    return found


@pytest.mark.parametrize(("bands", "k"), [(None, K), (4, K), (8, K), (None, 20)])
def test_a_batch_is_checked_as_the_guard_checks_it_row_by_row(conn: psycopg.Connection,
                                                               bands: int | None, k: int) -> None:
    """Also at a radius whose balls are too many values to look up (k = 20), where each
    document is compared with every written one, and with bands narrow enough (8) that
    the batch's documents are looked up in a table of every value."""
    rng = random.Random(36 + (bands or 0) + k)
    conn.execute("SET nearsim.profile = 'default/1'")  # made-up fingerprints
    stored = [(key, rng.getrandbits(64) - (1 << 63)) for key in range(2_000)]
    stored += [(2_000 + n, flip(stored[n][1], rng.sample(range(64), 2))) for n in range(50)]
    batch = batch_of(rng, stored, 400, k)
    for action, written_when_near in (("skip", False), ("record", True)):
        checked = f"checked_{action}"
        guarded = f"guarded_{action}"
        make_table(conn, checked, stored, bands)
        make_table(conn, guarded, stored, bands)
        answer = conn.execute(
            "SELECT position, key, existing_key, distance, in_batch"
            " FROM nearsim_check_batch(%s, 'id', 'si', %s, %s, %s, %s)",
            (checked, [str(key) for key, _ in batch], [f for _, f in batch], k,
             written_when_near)).fetchall()
        expected = one_by_one(conn, guarded, batch, action, k)
        assert {row[0] for row in answer} == set(expected)
        assert all(row[1] == str(batch[row[0] - 1][0]) and 0 <= row[3] <= k for row in answer)
        if action == "record":
            assert {row[0]: (row[2], row[3]) for row in answer} == expected
        assert any(row[4] for row in answer) and not all(row[4] for row in answer)
        assert 20 < len(answer) < len(batch)


def test_a_batch_without_fingerprints_or_rows_is_near_nothing(conn: psycopg.Connection) -> None:
    conn.execute("SET nearsim.profile = 'default/1'")
    make_table(conn, "empty", [])
    rows = conn.execute("SELECT * FROM nearsim_check_batch('empty', 'id', 'si', %s, %s, 3)",
                        (["a", "b", "c", None], [None, 5, 5, 5])).fetchall()
    # b and c are the same fingerprint under other keys; the NULL key is near too
    assert rows == [(3, "c", "b", 0, True), (4, None, "b", 0, True)]
    assert conn.execute("SELECT count(*) FROM nearsim_check_batch('empty', 'id', 'si',"
                        " '{}'::text[], '{}'::bigint[], 3)").fetchone() == (0,)


def test_a_document_without_a_fingerprint_replaces_the_earlier_one_of_its_key(
        conn: psycopg.Connection) -> None:
    """Written under the key of an earlier document of the batch (or of a stored row),
    it leaves nothing of that key to be near, as an upsert leaves a row without si."""
    conn.execute("SET nearsim.profile = 'default/1'")
    make_table(conn, "replaced", [(1, 7)])
    check = ("SELECT position, key, existing_key, distance, in_batch"
             " FROM nearsim_check_batch('replaced', 'id', 'si', %s, %s, 3, true)")
    far, other = 1 << 50, 1 << 30  # 4 bits from the stored 7, 2 from each other
    assert conn.execute(check, (["2", "2", "3"], [far, None, far])).fetchall() == []
    assert conn.execute(check, (["2", "3"], [far, far])).fetchall() == [(2, "3", "2", 0, True)]
    assert conn.execute(check, (["1", "3"], [None, 7])).fetchall() == []
    assert conn.execute(check, (["3"], [7])).fetchall() == [(1, "3", "1", 0, False)]
    # a key repeated is replaced each time: only the last one written is near
    assert conn.execute(check, (["2", "2", "2", "3"], [far, other, far, other])).fetchall() == [
        (4, "3", "2", 2, True)]


def test_bad_batches_are_refused_with_the_reason(conn: psycopg.Connection) -> None:
    conn.execute("SET nearsim.profile = 'default/1'")
    make_table(conn, "docs", [(1, 7)])
    for call, message in (
        ("nearsim_check_batch('docs', 'id', 'si', '{a,b}', '{1}', 3)",
         "keys has 2 elements and fingerprints 1"),
        ("nearsim_check_batch('docs', 'id', 'si', '{a}', '{1}', 65)",
         "max_distance must be between 0 and 64"),
        ("nearsim_check_batch('docs', 'nope', 'si', '{a}', '{1}', 3)",
         "column nope of table docs does not exist"),
        ("nearsim_check_batch('docs', 'id', 'body', '{a}', '{1}', 3)",
         "nearsim index of table docs is missing"),
    ):
        conn.execute("SAVEPOINT attempt")
        with pytest.raises(psycopg.Error, match=message):
            conn.execute(f"SELECT * FROM {call}")
        conn.execute("ROLLBACK TO SAVEPOINT attempt")
