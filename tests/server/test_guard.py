"""The check-in guard: near-duplicates refused, skipped or recorded as they are written."""

from __future__ import annotations

import random
import threading
import time
from collections import Counter
from collections.abc import Iterator

import psycopg
import pytest
from psycopg import sql
from rotated import error_of

PSALM = ("The fool hath said in his heart, There is no God. They are corrupt, they have done"
         " abominable works, there is none that doeth good.")
PSALM_AGAIN = PSALM.replace("doeth good.", "doeth good!") + " Selah."
GENESIS = "In the beginning God created the heaven and the earth, and the earth was void."
NEAR_DUPLICATE = "23N01"


@pytest.fixture
def docs(conn: psycopg.Connection) -> Iterator[psycopg.Connection]:
    conn.execute("CREATE TABLE docs (id bigint PRIMARY KEY, body text)")
    conn.execute("INSERT INTO docs VALUES (1, %s), (2, %s)", (PSALM, GENESIS))
    conn.execute("SELECT nearsim_enable('docs', 'body')")
    yield conn


def ids(conn: psycopg.Connection) -> list[int]:
    return [r[0] for r in conn.execute("SELECT id FROM docs ORDER BY id")]


def test_error_names_the_existing_document(docs: psycopg.Connection) -> None:
    docs.execute("SELECT nearsim_guard('docs', max_distance => 6)")
    error = error_of(docs, "INSERT INTO docs VALUES (3, %s)", PSALM_AGAIN)
    assert error.sqlstate == NEAR_DUPLICATE
    assert str(error).startswith("document 3 is a near-duplicate of 1 in table docs")
    distance = docs.execute("SELECT hamming(simhash(%s), simhash(%s))",
                            (PSALM, PSALM_AGAIN)).fetchone()
    assert distance is not None and distance[0] <= 6
    assert error.diag.message_detail == (
        f"Key (id)=(3) is {distance[0]} bits from existing key 1 (the guard refuses documents"
        " within 6 bits).")
    assert "SET LOCAL nearsim.guard = off" in (error.diag.message_hint or "")
    # other documents pass, and so does a row's own update or an upsert of its key
    docs.execute("INSERT INTO docs VALUES (4, 'a psalm of another kind entirely, of praise')")
    docs.execute("UPDATE docs SET body = %s WHERE id = 1", (PSALM_AGAIN,))
    docs.execute("INSERT INTO docs VALUES (1, %s) ON CONFLICT (id) DO UPDATE"
                 " SET body = EXCLUDED.body", (PSALM,))
    # an update that makes a row a near-duplicate of another is refused too
    error = error_of(docs, "UPDATE docs SET body = %s WHERE id = 4", (PSALM_AGAIN,))
    assert error.sqlstate == NEAR_DUPLICATE and "of 1 in table docs" in str(error)
    assert ids(docs) == [1, 2, 4]


def test_verified_error_gives_the_similarity(docs: psycopg.Connection) -> None:
    # by S_L unless the measure is named, as everywhere
    for measure, named in (("s_l", ""), ("s_r", ", measure => 's_r'")):
        docs.execute(f"SELECT nearsim_guard('docs', min_similarity => 0.6{named})")
        error = error_of(docs, "INSERT INTO docs VALUES (3, %s)", PSALM_AGAIN)
        assert error.sqlstate == NEAR_DUPLICATE
        measured = docs.execute(f"SELECT {measure} FROM nearsim_compare(%s, %s)",
                                (PSALM, PSALM_AGAIN)).fetchone()
        assert measured is not None
        assert f"is {measured[0]:.3f} similar ({measure}) to existing key 1" in (
            error.diag.message_detail or "")
    # a text that shares less than that passes, even if its fingerprint is near
    docs.execute("SELECT nearsim_guard('docs', min_similarity => 0.99, max_distance => 10)")
    docs.execute("INSERT INTO docs VALUES (3, %s)", (PSALM_AGAIN,))
    assert ids(docs) == [1, 2, 3]


def test_skip_leaves_the_row_out_and_counts_it_out(docs: psycopg.Connection) -> None:
    docs.execute("SELECT nearsim_guard('docs', max_distance => 6, action => 'skip')")
    cursor = docs.execute("INSERT INTO docs VALUES (3, %s), (4, 'words of a new kind here')",
                          (PSALM_AGAIN,))
    assert cursor.rowcount == 1
    assert ids(docs) == [1, 2, 4]
    # within one statement, the second of two near-duplicates is skipped
    cursor = docs.execute("INSERT INTO docs VALUES (5, %s), (6, %s)",
                          ("a brand new text about the sea and ships", "a brand new text about"
                           " the sea and ships!"))
    assert cursor.rowcount == 1 and ids(docs) == [1, 2, 4, 5]


def test_record_writes_the_row_and_the_link(docs: psycopg.Connection) -> None:
    docs.execute("SELECT nearsim_guard('docs', min_similarity => 0.6, action => 'record')")
    docs.execute("INSERT INTO docs VALUES (3, %s), (4, 'unrelated words of the record')",
                 (PSALM_AGAIN,))
    assert ids(docs) == [1, 2, 3, 4]
    links = docs.execute("SELECT new_key, existing_key, distance, similarity > 0.6"
                         " FROM docs_nearsim_links").fetchall()
    distance = docs.execute("SELECT hamming(simhash(%s), simhash(%s))",
                            (PSALM, PSALM_AGAIN)).fetchone()
    assert links == [(3, 1, distance[0] if distance else None, True)]
    # the links are in the table's key type: they join
    joined = docs.execute("SELECT d.body FROM docs_nearsim_links l JOIN docs d"
                          " ON d.id = l.existing_key").fetchone()
    assert joined == (PSALM,)
    # they go with the table
    docs.execute("SELECT nearsim_disable('docs')")
    assert docs.execute("SELECT count(*) FROM docs_nearsim_links").fetchone() == (1,)
    docs.execute("DROP TABLE docs CASCADE")
    assert docs.execute("SELECT to_regclass('docs_nearsim_links')").fetchone() == (None,)


def test_arguments_are_checked(docs: psycopg.Connection) -> None:
    cases = {
        "SELECT nearsim_guard('docs')": "give the guard max_distance, min_similarity or both",
        "SELECT nearsim_guard('docs', min_similarity => 0.99)":
            "min_similarity must be between 0.5 and 0.95 (the calibrated range)",
        "SELECT nearsim_guard('docs', 65)": "max_distance must be between 0 and 64, not 65",
        "SELECT nearsim_guard('docs', 3, action => 'warn')": "unknown guard action 'warn'",
        "SELECT nearsim_guard('docs', min_similarity => 0.8, measure => 'cosine')":
            "unknown measure 'cosine'",
        "SELECT nearsim_guard('pg_class', 3)": "table pg_class is not enabled for nearsim",
    }
    for statement, message in cases.items():
        assert message in str(error_of(docs, statement)), statement


def test_disable_removes_the_guard_and_rebuild_keeps_it(docs: psycopg.Connection) -> None:
    docs.execute("SELECT nearsim_guard('docs', max_distance => 6)")
    docs.execute("SELECT nearsim_rebuild('docs', bands => 4)")
    assert error_of(docs, "INSERT INTO docs VALUES (3, %s)", PSALM_AGAIN).sqlstate == (
        NEAR_DUPLICATE)
    docs.execute("SELECT nearsim_unguard('docs')")
    docs.execute("INSERT INTO docs VALUES (3, %s)", (PSALM_AGAIN,))
    docs.execute("SELECT nearsim_guard('docs', max_distance => 6)")
    docs.execute("SELECT nearsim_disable('docs')")
    assert docs.execute("SELECT count(*) FROM pg_trigger WHERE tgrelid = 'docs'::regclass"
                        ).fetchone() == (0,)
    docs.execute("INSERT INTO docs (id, body) VALUES (4, %s)", (PSALM_AGAIN,))


def test_only_the_owner_lets_a_document_through(database: str) -> None:
    with psycopg.connect(database, autocommit=True) as admin:
        for role in ("guard_owner", "guard_writer", "guard_blind"):
            admin.execute(f"DROP ROLE IF EXISTS {role}")
            admin.execute(f"CREATE ROLE {role}")
        admin.execute("DROP SCHEMA IF EXISTS guarded CASCADE")
        admin.execute("CREATE SCHEMA guarded AUTHORIZATION guard_owner")
        admin.execute("SET ROLE guard_owner")
        admin.execute("CREATE TABLE guarded.docs (id int PRIMARY KEY, body text)")
        admin.execute("INSERT INTO guarded.docs VALUES (1, %s)", (PSALM,))
        admin.execute("SELECT nearsim_enable('guarded.docs', 'body')")
        admin.execute("SELECT nearsim_guard('guarded.docs', max_distance => 6)")
        admin.execute("GRANT USAGE ON SCHEMA guarded TO guard_writer, guard_blind")
        admin.execute("GRANT SELECT, INSERT ON guarded.docs TO guard_writer")
        admin.execute("GRANT INSERT ON guarded.docs TO guard_blind")
        admin.execute("RESET ROLE")
    try:
        with psycopg.connect(database) as conn:
            conn.execute("SET ROLE guard_writer")
            with pytest.raises(psycopg.errors.InsufficientPrivilege,
                               match="only the owner of table docs may check documents in"):
                with conn.transaction():
                    conn.execute("SET LOCAL nearsim.guard = off")
                    conn.execute("INSERT INTO guarded.docs VALUES (2, %s)", (PSALM_AGAIN,))
            with pytest.raises(psycopg.Error) as refused:
                conn.execute("INSERT INTO guarded.docs VALUES (2, %s)", (PSALM_AGAIN,))
            assert refused.value.sqlstate == NEAR_DUPLICATE
            conn.rollback()
            # a writer that may not read the table learns no key
            conn.execute("SET ROLE guard_blind")
            with pytest.raises(psycopg.Error) as blind:
                conn.execute("INSERT INTO guarded.docs VALUES (2, %s)", (PSALM_AGAIN,))
            assert blind.value.sqlstate == NEAR_DUPLICATE
            assert "1" not in str(blind.value) + (blind.value.diag.message_detail or "")
            conn.rollback()
            conn.execute("SET ROLE guard_owner")
            with conn.transaction():
                conn.execute("SET LOCAL nearsim.guard = off")
                conn.execute("INSERT INTO guarded.docs VALUES (2, %s)", (PSALM_AGAIN,))
            assert conn.execute("SELECT count(*) FROM guarded.docs").fetchone() == (2,)
    finally:
        with psycopg.connect(database, autocommit=True) as admin:
            admin.execute("DROP SCHEMA guarded CASCADE")
            for role in ("guard_owner", "guard_writer", "guard_blind"):
                admin.execute(f"DROP ROLE {role}")


# -- no race: concurrent writers of planted near-duplicates ---------------------

K = 3
WRITERS = 4
SECONDS_PER_LEVEL = 20


def flip(value: int, bits: list[int]) -> int:
    unsigned = value & ((1 << 64) - 1)
    for bit in bits:
        unsigned ^= 1 << bit
    return unsigned - (1 << 64) if unsigned >= 1 << 63 else unsigned


@pytest.mark.parametrize("isolation", ["read committed", "repeatable read", "serializable"])
@pytest.mark.parametrize("action", ["error", "skip"])
def test_concurrent_near_duplicates_never_both_pass(database: str, isolation: str,
                                                     action: str) -> None:
    """Writers insert variants (within K bits) of a few planted fingerprints at once.

    Afterwards no two documents may be within K bits of each other; every
    refusal is the guard's (23N01), or at REPEATABLE READ and SERIALIZABLE a
    serialization failure to retry (40001); no deadlock, nothing else.
    """
    table = f"race_{action}_{isolation.split()[0]}"
    with psycopg.connect(database, autocommit=True) as setup:
        setup.execute(sql.SQL("DROP TABLE IF EXISTS {} CASCADE").format(sql.Identifier(table)))
        setup.execute(sql.SQL("CREATE TABLE {} (id bigint PRIMARY KEY, body text, si bigint)")
                      .format(sql.Identifier(table)))
        setup.execute("SELECT nearsim_enable(%s, 'body')", (table,))
        setup.execute("SELECT nearsim_guard(%s, max_distance => %s, action => %s)",
                      (table, K, action))
    rng = random.Random(17)
    # planted fingerprints far apart (more than 2K bits), so that variants of two
    # of them are never near each other
    planted: list[int] = []
    while len(planted) < 6:
        candidate = rng.getrandbits(64) - (1 << 63)
        if all(((candidate ^ p) & ((1 << 64) - 1)).bit_count() > 4 * K for p in planted):
            planted.append(candidate)
    outcomes: Counter[str] = Counter()
    unexpected: list[str] = []
    lock = threading.Lock()
    stop = time.monotonic() + SECONDS_PER_LEVEL / 2  # two actions share the level's minute
    next_id = iter(range(1, 10_000_000))

    def write(worker: int) -> None:
        local = random.Random(worker)
        with psycopg.connect(database, autocommit=True) as conn:
            conn.execute("SET nearsim.profile = 'default/1'")  # made-up fingerprints
            while time.monotonic() < stop:
                with lock:
                    key = next(next_id)
                base = local.choice(planted)
                # at most one bit from it: two variants are within K bits of each other
                fingerprint = flip(base, local.sample(range(64), local.randint(0, 1)))
                try:
                    with conn.transaction():
                        conn.execute(f"SET TRANSACTION ISOLATION LEVEL {isolation}")
                        cursor = conn.execute(
                            sql.SQL("INSERT INTO {} VALUES (%s, 'planted', %s)")
                            .format(sql.Identifier(table)), (key, fingerprint))
                        time.sleep(local.random() * 0.002)  # hold the row a moment
                    outcome = "written" if cursor.rowcount == 1 else "skipped"
                except psycopg.Error as error:
                    outcome = error.sqlstate or "?"
                    if outcome not in (NEAR_DUPLICATE, "40001"):
                        with lock:
                            unexpected.append(f"{outcome}: {error}")
                with lock:
                    outcomes[outcome] += 1

    threads = [threading.Thread(target=write, args=(n,)) for n in range(WRITERS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not unexpected, unexpected[:5]
    assert outcomes["written"] >= len(planted) // 2 and sum(outcomes.values()) > 50, outcomes
    with psycopg.connect(database, autocommit=True) as check:
        violations = check.execute("SELECT count(*) FROM nearsim_pairs(%s, %s)",
                                   (table, K)).fetchone()
        written = check.execute(sql.SQL("SELECT count(*) FROM {}").format(
            sql.Identifier(table))).fetchone()
    assert violations == (0,), outcomes
    # one per planted fingerprint at most, and each was written by someone
    assert written is not None and 1 <= written[0] <= len(planted), outcomes
    refused = NEAR_DUPLICATE if action == "error" else "skipped"
    assert outcomes[refused] > 0 and outcomes["written"] == written[0], outcomes


def test_the_python_api_guards_and_unguards(database: str) -> None:
    from nearsim.client.documents import DocumentTable

    with psycopg.connect(database, autocommit=True) as conn:
        conn.execute("DROP TABLE IF EXISTS api_docs CASCADE")
        conn.execute("CREATE TABLE api_docs (id int PRIMARY KEY, body text)")
        conn.execute("INSERT INTO api_docs VALUES (1, %s)", (PSALM,))
        conn.execute("SELECT nearsim_enable('api_docs', 'body')")
        table = DocumentTable(conn, "api_docs")
        table.guard(min_similarity=0.8)
        with pytest.raises(psycopg.IntegrityError) as refused:
            conn.execute("INSERT INTO api_docs VALUES (2, %s)", (PSALM_AGAIN,))
        assert refused.value.sqlstate == NEAR_DUPLICATE
        table.unguard()
        conn.execute("INSERT INTO api_docs VALUES (2, %s)", (PSALM_AGAIN,))
        conn.execute("DROP TABLE api_docs CASCADE")


def test_the_guard_reading_the_index_decides_as_its_statement(conn: psycopg.Connection) -> None:
    """A guard by bits reads the rotation index itself; under FORCE ROW LEVEL
    SECURITY it runs its statement instead.  Both decide every row the same:
    random and planted fingerprints, rows near earlier rows of the same
    statement, updates of a row near itself, upserts, deletes and savepoints,
    with rows of equal distance told apart by key."""
    rng = random.Random(36)
    conn.execute("SET nearsim.profile = 'default/1'")  # made-up fingerprints
    for table in ("by_index", "by_statement"):
        conn.execute(sql.SQL("CREATE TABLE {} (id bigint PRIMARY KEY, body text, si bigint)")
                     .format(sql.Identifier(table)))
        conn.execute("SELECT nearsim_enable(%s, 'body')", (table,))
        conn.execute("SELECT nearsim_guard(%s, max_distance => 4, action => 'skip')", (table,))
    conn.execute("ALTER TABLE by_statement ENABLE ROW LEVEL SECURITY")
    conn.execute("ALTER TABLE by_statement FORCE ROW LEVEL SECURITY")
    conn.execute("CREATE POLICY everything ON by_statement USING (true) WITH CHECK (true)")
    planted = [rng.getrandbits(64) - (1 << 63) for _ in range(8)]

    def fingerprint() -> int:
        if rng.random() < 0.3:
            return rng.getrandbits(64) - (1 << 63)
        return flip(rng.choice(planted), rng.sample(range(64), rng.randint(0, 6)))

    steps: list[tuple[str, tuple[object, ...]]] = []
    key = 0
    for _ in range(300):
        roll = rng.random()
        if roll < 0.55:
            rows = [(key + i, fingerprint()) for i in range(rng.randint(1, 4))]
            key += len(rows)
            steps.append(("INSERT INTO {} VALUES " + ", ".join(["(%s, 'b', %s)"] * len(rows)),
                          tuple(v for row in rows for v in row)))
        elif roll < 0.7:
            steps.append(("UPDATE {} SET si = %s WHERE id = %s",
                          (fingerprint(), rng.randrange(max(key, 1)))))
        elif roll < 0.8:
            steps.append(("INSERT INTO {} VALUES (%s, 'b', %s) ON CONFLICT (id) DO UPDATE"
                          " SET si = EXCLUDED.si", (rng.randrange(max(key, 1)), fingerprint())))
        elif roll < 0.88:
            steps.append(("DELETE FROM {} WHERE id = %s", (rng.randrange(max(key, 1)),)))
        elif roll < 0.94:
            steps.append(("SAVEPOINT s", ()))
        else:
            steps.append(("ROLLBACK TO SAVEPOINT s", ()))
    for table in ("by_index", "by_statement"):
        with conn.transaction():
            conn.execute("SAVEPOINT s")
            for statement, args in steps:
                conn.execute(sql.SQL(statement).format(sql.Identifier(table)), args or None)
    contents = [conn.execute(sql.SQL("SELECT id, si FROM {} ORDER BY id")
                             .format(sql.Identifier(table))).fetchall()
                for table in ("by_index", "by_statement")]
    assert contents[0] == contents[1]
    assert 20 < len(contents[0]) < key  # some rows kept, some skipped
    # refusals name the same document: the nearest, then the least key as text
    for table in ("by_index", "by_statement"):
        conn.execute("SELECT nearsim_guard(%s, max_distance => 6)", (table,))
    messages = []
    for table in ("by_index", "by_statement"):
        refused = []
        for base in planted:
            error = error_of(conn, sql.SQL("INSERT INTO {} VALUES (%s, 'b', %s)").format(
                sql.Identifier(table)).as_string(conn), 10**9, flip(base, [0]))
            refused.append((error.sqlstate, error.diag.message_detail))
        messages.append(refused)
    assert messages[0] == messages[1]
    assert sum(state == NEAR_DUPLICATE for state, _ in messages[0]) >= 4
