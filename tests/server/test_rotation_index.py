"""The rotation index: enabling tables, the triggers, exact search, privileges."""

from __future__ import annotations

import random
import uuid

import psycopg
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from psycopg import sql
from rotated import (
    EXTREMES,
    MAX64,
    MIN64,
    assert_no_drift,
    clustered_fingerprints,
    error_of,
    flip,
    hamming,
    make_docs,
)

import nearsim


def brute_force(conn: psycopg.Connection, query: int, k: int, table: str = "docs") -> list[int]:
    return [r[0] for r in conn.execute(
        # si + 0: not the column itself, so a scan (never the rotation index)
        sql.SQL("SELECT id FROM {} WHERE hamming(si + 0, %s) <= %s ORDER BY id").format(
            sql.Identifier(table)), (query, k))]


def bucket_search(conn: psycopg.Connection, query: int, k: int,
                  function: str = "docs_similar") -> list[int]:
    return [r[0] for r in conn.execute(
        sql.SQL("SELECT (doc).id FROM {}(%s::bigint, %s) ORDER BY 1").format(
            sql.Identifier(function)), (query, k))]


# -- exact search ------------------------------------------------------------


@pytest.mark.parametrize("bands", [3, 4, 5, 8, 16])
def test_search_is_exactly_the_seq_scan(conn: psycopg.Connection, bands: int) -> None:
    rng = random.Random(bands)
    fingerprints = clustered_fingerprints(rng)
    make_docs(conn, fingerprints, bands=bands)
    queries = rng.sample(fingerprints, 12) + EXTREMES
    queries += [flip(q, rng.sample(range(64), rng.randint(1, 10))) for q in queries]
    for k in range(13):
        for query in queries:
            expected = [i for i, fp in enumerate(fingerprints) if hamming(fp, query) <= k]
            assert bucket_search(conn, query, k) == expected, (bands, k, query)
    # and beyond 12 where the layout allows it
    assert bucket_search(conn, queries[0], 16) == brute_force(conn, queries[0], 16)


@settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck))
@given(
    fingerprints=st.lists(
        st.one_of(st.sampled_from(EXTREMES), st.integers(MIN64, MAX64)), min_size=1, max_size=60
    ),
    data=st.data(),
)
def test_search_property(database: str, fingerprints: list[int], data: st.DataObject) -> None:
    k = data.draw(st.integers(0, 12))
    bands = data.draw(st.integers(3, 16))
    base = data.draw(st.sampled_from(fingerprints))
    query = flip(base, data.draw(st.lists(st.integers(0, 63), max_size=k + 2, unique=True)))
    with psycopg.connect(database) as conn:
        make_docs(conn, fingerprints, bands=bands)
        expected = [i for i, fp in enumerate(fingerprints) if hamming(fp, query) <= k]
        assert bucket_search(conn, query, k) == expected
        conn.rollback()


def test_search_returns_the_rows_and_their_distance(conn: psycopg.Connection) -> None:
    conn.execute("CREATE TABLE docs (id integer PRIMARY KEY, title text, body text)")
    conn.execute(
        "INSERT INTO docs (id, title, body) VALUES"
        " (1, 'psalm 14', 'The fool hath said in his heart, There is no God. They are corrupt,"
        " they have done abominable works, there is none that doeth good.'),"
        " (2, 'copy', 'The fool hath said in his heart, There is no God. They are corrupt,"
        " they have done abominable works, there is none that doeth good!'),"
        " (3, 'other', 'In the beginning God created the heaven and the earth.')"
    )
    conn.execute("SELECT nearsim_enable('docs', 'body')")
    query = "the fool hath said in his heart there is no god they are corrupt they have done" \
        " abominable works there is none that doeth good"
    rows = conn.execute(
        "SELECT (doc).id, (doc).title, distance FROM docs_similar(%s, 6) ORDER BY 1", (query,)
    ).fetchall()
    assert rows == [(1, "psalm 14", 0), (2, "copy", 0)]
    seed = conn.execute(  # a scan: si + 0 is not the column the rotation index reads
        "SELECT id FROM docs WHERE hamming(si + 0, simhash(%s)) <= 6 ORDER BY id", (query,)
    ).fetchall()
    assert [r[0] for r in rows] == [r[0] for r in seed]
    # the whole row, as in SELECT * FROM docs
    whole = conn.execute("SELECT (doc).* FROM docs_similar(%s, 0) ORDER BY 1", (query,))
    assert whole.fetchall() == conn.execute(
        "SELECT * FROM docs WHERE id IN (1, 2) ORDER BY 1").fetchall()
    # the default radius is the seeds' 6; a prepared statement works too
    assert len(conn.execute("SELECT * FROM docs_similar(%s)", (query,)).fetchall()) == 2
    for _ in range(7):
        assert len(conn.execute("SELECT * FROM docs_similar(%s, 6)", (query,),
                                prepare=True).fetchall()) == 2
    # a text without words has no fingerprint: nothing is similar to it
    assert conn.execute("SELECT count(*) FROM docs_similar('...', 6)").fetchone() == (0,)


def test_explain_uses_the_rotation_index(conn: psycopg.Connection) -> None:
    make_docs(conn, [random.Random(1).getrandbits(63) for _ in range(50_000)])
    for query in ("docs_similar(123::bigint, 6)", "docs_similar('some words here', 3)"):
        plan = "\n".join(r[0] for r in conn.execute(
            f"EXPLAIN (COSTS OFF, VERBOSE) SELECT * FROM {query}"))
        # the planner's rotation scan reads the rotation index, once
        assert "Custom Scan (nearsim rotation index) on public.docs d" in plan, plan
        assert "Seq Scan" not in plan and "nearsim_search(" not in plan, plan


def test_identical_documents_and_many_others(conn: psycopg.Connection) -> None:
    """10,000 identical documents (say empty templates) plus 100,000 others."""
    rng = random.Random(7)
    boilerplate = rng.getrandbits(64) - (1 << 63)
    others = [rng.getrandbits(64) - (1 << 63) for _ in range(100_000)]
    make_docs(conn, [boilerplate] * 10_000 + others)
    queries = [boilerplate, flip(boilerplate, [3, 40]), *rng.sample(others, 20),
               flip(others[0], [1, 2, 3, 4, 5])]
    for query in queries:
        for k in (0, 3, 6, 10):
            assert bucket_search(conn, query, k) == brute_force(conn, query, k)
    assert len(bucket_search(conn, boilerplate, 6)) == 10_000 + sum(
        hamming(fp, boilerplate) <= 6 for fp in others)


# -- enabling and disabling -------------------------------------------------


def test_enable_backfills_and_disable_leaves_the_documents(conn: psycopg.Connection) -> None:
    conn.execute("CREATE TABLE docs (id bigint PRIMARY KEY, body text)")
    conn.execute(
        "INSERT INTO docs SELECT g, 'document ' || g || ' of the backfill' FROM"
        " generate_series(1, 2500) g"
    )
    conn.execute("INSERT INTO docs VALUES (9000, NULL), (9001, ''), (9002, '...')")
    notices: list[str] = []
    conn.add_notice_handler(lambda d: notices.append(d.message_primary or ""))
    conn.execute("SELECT nearsim_enable('docs', 'body', batch_size => 1000)")
    assert notices == [f"nearsim: fingerprinted {n} of 2502 rows" for n in (1000, 2000, 2502)]
    wrong = conn.execute(
        "SELECT count(*) FROM docs WHERE si IS DISTINCT FROM simhash(body)").fetchone()
    assert wrong == (0,)
    assert rotation_indexes(conn) == 3 and indexed(conn) == 2500
    assert_no_drift(conn)
    before = conn.execute("SELECT * FROM docs ORDER BY id").fetchall()
    conn.execute("SELECT nearsim_disable('docs')")
    assert conn.execute("SELECT * FROM docs ORDER BY id").fetchall() == before
    leftovers = conn.execute(
        "SELECT (SELECT count(*) FROM pg_class WHERE relname LIKE 'docs_nearsim%'),"
        " (SELECT count(*) FROM pg_proc WHERE proname LIKE 'docs_%'),"
        " (SELECT count(*) FROM pg_trigger WHERE tgrelid = 'docs'::regclass),"
        " (SELECT count(*) FROM nearsim_tables)"
    ).fetchone()
    assert leftovers == (0, 0, 0, 0)
    # writes no longer touch anything, and the table can be enabled again
    conn.execute("INSERT INTO docs VALUES (9003, 'after disable')")
    conn.execute("SELECT nearsim_enable('docs', 'body')")
    assert_no_drift(conn)


def test_enable_errors_name_the_table(conn: psycopg.Connection) -> None:
    conn.execute("CREATE TABLE nokey (body text)")
    conn.execute("CREATE TABLE twokeys (a int, b int, body text, PRIMARY KEY (a, b))")
    conn.execute("CREATE TABLE numkey (id numeric PRIMARY KEY, body text)")
    conn.execute("CREATE TABLE docs (id int PRIMARY KEY, body text, n int, si bigint)")
    conn.execute("CREATE VIEW docview AS SELECT * FROM docs")
    conn.execute("CREATE TABLE gen (id int PRIMARY KEY, a text, b text,"
                 " body text GENERATED ALWAYS AS (a || ' ' || b) STORED)")
    cases = {
        "SELECT nearsim_enable('nokey', 'body')":
            "table public.nokey has no single-column primary key",
        "SELECT nearsim_enable('twokeys', 'body')":
            "table public.twokeys has a primary key of 2 columns",
        "SELECT nearsim_enable('numkey', 'body')":
            "primary key id of table public.numkey has type numeric",
        "SELECT nearsim_enable('docview', 'body')": "public.docview is not an ordinary table",
        "SELECT nearsim_enable('docs', 'nothere')":
            "column nothere of table public.docs does not exist",
        "SELECT nearsim_enable('docs', 'n')": "column n of table public.docs has type integer",
        "SELECT nearsim_enable('docs', 'body', 'n')":
            "column n of table public.docs has type integer; a fingerprint column is bigint",
        "SELECT nearsim_enable('docs', 'body', bands => 2)": "bands must be between 3 and 16",
        "SELECT nearsim_disable('docs')": "table public.docs is not enabled for nearsim",
        "SELECT * FROM nearsim_verify('docs')": "table public.docs is not enabled for nearsim",
        "SELECT nearsim_enable('missing', 'body')": 'relation "missing" does not exist',
        "SELECT nearsim_enable('gen', 'body')":
            "column body of table public.gen is a generated column",
    }
    for statement, message in cases.items():
        assert message in str(error_of(conn, statement)), statement
    conn.execute("SELECT nearsim_enable('docs', 'body')")
    assert "table public.docs is already enabled" in str(
        error_of(conn, "SELECT nearsim_enable('docs', 'body')"))
    conn.execute("CREATE TABLE docs_nearsim_x (id int PRIMARY KEY, body text)")
    conn.execute("CREATE TABLE other (id int PRIMARY KEY, body text)")
    conn.execute("CREATE FUNCTION other_similar(x int) RETURNS int LANGUAGE sql AS 'SELECT x'")
    assert 'public.other_similar already exists' in str(
        error_of(conn, "SELECT nearsim_enable('other', 'body')"))
    conn.execute("SELECT nearsim_enable('other', 'body', prefix => 'other2')")
    assert conn.execute("SELECT count(*) FROM other2_similar('x')").fetchone() == (0,)


def test_fingerprints_of_another_profile_are_refused(conn: psycopg.Connection) -> None:
    conn.execute("CREATE TABLE docs (id int PRIMARY KEY, body text, si bigint)")
    conn.execute("INSERT INTO docs SELECT g, 'text number ' || g, g FROM generate_series(1, 50) g")
    error = error_of(conn, "SELECT nearsim_enable('docs', 'body')")
    assert "holds values that are not default/1 fingerprints" in str(error)
    assert error.diag.message_detail == "50 of 50 sampled rows differ, the first with key 1."
    # the documented way out: recompute
    conn.execute("UPDATE docs SET si = NULL")
    conn.execute("SELECT nearsim_enable('docs', 'body')")
    assert_no_drift(conn)
    # a table whose recorded profile this server cannot compute cannot be searched
    conn.execute("UPDATE nearsim_tables SET profile = 'default/0'")
    error = error_of(conn, "SELECT * FROM nearsim_pairs('docs', 3)")
    assert "come from profile default/0, which this server cannot compute" in str(error)
    # nor can its texts be measured: the words of a profile's version are its
    for measure in ("s_r", "s_l"):
        error = error_of(conn, f"SELECT * FROM nearsim_pairs_verified('docs', 0.9, '{measure}')")
        assert error.sqlstate == "55000"
        assert "words of its profile default/0, which this server does not compute" in str(error)
    assert conn.execute("SELECT * FROM nearsim_sketch_index('docs')").fetchone() == (None, None)
    error = error_of(conn, "SELECT nearsim_check_profile('docs', 'default/0')")
    assert "nearsim_rebuild('public.docs', profile => 'default/1')" in (
        error.diag.message_hint or "")
    assert "version 0 is unknown" in (error.diag.message_detail or "")
    source = conn.execute(
        "SELECT prosrc FROM pg_proc WHERE oid = 'docs_similar(bigint,integer)'::regprocedure"
    ).fetchone()
    assert source and "nearsim_check_profile(" in source[0]
    error = error_of(conn, "SELECT nearsim_rebuild('docs', fingerprints => true)")
    assert "version 0 is unknown" in str(error)
    conn.execute("SELECT nearsim_rebuild('docs', profile => 'default/1')")
    assert conn.execute("SELECT profile FROM nearsim_tables").fetchone() == ("default/1",)
    assert_no_drift(conn)


@pytest.mark.parametrize(
    ("key_type", "make_key"),
    [("integer", lambda i: i), ("bigint", lambda i: i * 10**12),
     ("text", lambda i: f"doc-{i:05d}"), ("uuid", lambda i: uuid.UUID(int=i * 7919))],
)
def test_key_types(conn: psycopg.Connection, key_type: str, make_key: object) -> None:
    assert callable(make_key)
    conn.execute(f"CREATE TABLE docs (id {key_type} PRIMARY KEY, body text)")
    texts = [f"the document number {i % 40} says something {i % 7}" for i in range(200)]
    with conn.cursor().copy("COPY docs (id, body) FROM STDIN") as copy:
        for i, text in enumerate(texts):
            copy.write_row((make_key(i), text))
    conn.execute("SELECT nearsim_enable('docs', 'body')")
    for i in (0, 5, 77):
        found = conn.execute(
            "SELECT (doc).id FROM docs_similar(%s, 3) ORDER BY 1", (texts[i],)).fetchall()
        expected = conn.execute(  # a scan: si + 0 is not the indexed column
            "SELECT id FROM docs WHERE hamming(si + 0, simhash(%s)) <= 3 ORDER BY 1", (texts[i],)
        ).fetchall()
        assert found == expected and found
    assert_no_drift(conn)


# -- the triggers --------------------------------------------------------------


@pytest.fixture
def docs(conn: psycopg.Connection) -> psycopg.Connection:
    conn.execute(
        "CREATE TABLE docs (id bigint PRIMARY KEY, body text, owner_id int)"
    )
    conn.execute(
        "INSERT INTO docs SELECT g, 'document ' || g || ' with words ' || (g % 5), g % 10"
        " FROM generate_series(1, 300) g"
    )
    conn.execute("SELECT nearsim_enable('docs', 'body')")
    return conn


def fingerprint_of(conn: psycopg.Connection, key: int) -> int | None:
    row = conn.execute("SELECT si FROM docs WHERE id = %s", (key,)).fetchone()
    assert row is not None
    return row[0]  # type: ignore[no-any-return]


def bucket_of(conn: psycopg.Connection, key: int) -> int | None:
    """The fingerprint under which the rotation index finds a row, if it does."""
    row = conn.execute(
        "SELECT d.si FROM docs d WHERE d.id = %s AND d.ctid = ANY(nearsim_search("
        "'docs', 'si', d.si, 0))", (key,)).fetchone()
    return None if row is None else row[0]  # type: ignore[no-any-return]


def indexed(conn: psycopg.Connection, table: str = "docs") -> int:
    """How many rows the rotation index holds (all are within 64 bits of 0)."""
    row = conn.execute("SELECT cardinality(nearsim_search(%s, 'si', 0, 64))", (table,)).fetchone()
    assert row is not None
    return int(row[0])


def rotation_indexes(conn: psycopg.Connection, table: str = "docs") -> int:
    row = conn.execute(
        "SELECT count(*) FROM pg_index WHERE indrelid = %s::regclass"
        " AND pg_get_indexdef(indexrelid) LIKE '%%nearsim_rotate(si, %%'", (table,)).fetchone()
    assert row is not None
    return int(row[0])


def test_insert_copy_and_null_text(docs: psycopg.Connection) -> None:
    docs.execute("INSERT INTO docs (id, body) VALUES (1001, 'a new document here'), (1002, NULL)")
    assert fingerprint_of(docs, 1001) == nearsim.simhash("a new document here")
    assert fingerprint_of(docs, 1002) is None and bucket_of(docs, 1002) is None
    with docs.cursor().copy("COPY docs (id, body) FROM STDIN") as copy:
        for i in range(2000, 2500):
            copy.write_row((i, f"copied document {i}"))
    docs.execute("INSERT INTO docs (id, body, si) VALUES (3000, 'no such words', NULL)")
    # a NULL text never keeps a fingerprint, even one given
    docs.execute("INSERT INTO docs (id, body, si) VALUES (3001, NULL, 42)")
    assert fingerprint_of(docs, 3001) is None
    assert_no_drift(docs)


def test_given_fingerprints_are_checked_unless_declared(docs: psycopg.Connection) -> None:
    # the right fingerprint is accepted
    right = nearsim.simhash("whatever it says")
    docs.execute("INSERT INTO docs (id, body, si) VALUES (1001, 'whatever it says', %s)", [right])
    assert fingerprint_of(docs, 1001) == right == bucket_of(docs, 1001)
    # another profile's (or any wrong value) is refused, on INSERT and UPDATE
    other = nearsim.simhash("whatever it says", "chars")
    for statement, args in (
        ("INSERT INTO docs (id, body, si) VALUES (1002, 'whatever it says', %s)", [other]),
        ("UPDATE docs SET si = %s WHERE id = 1", [12345]),
        ("UPDATE docs SET body = 'new words', si = %s WHERE id = 2", [other]),
    ):
        with pytest.raises(psycopg.errors.InvalidParameterValue) as caught:
            with docs.transaction():
                docs.execute(statement, args)
        assert "is not the default/1 one of its text" in str(caught.value)
        assert "SET nearsim.profile = 'default/1'" in (caught.value.diag.message_hint or "")
    # a session that declares another profile is refused before any work
    docs.execute("SET LOCAL nearsim.profile = 'chars/1'")
    with pytest.raises(psycopg.errors.ObjectNotInPrerequisiteState) as refused:
        with docs.transaction():
            docs.execute("INSERT INTO docs (id, body, si) VALUES (1003, 'x y z', %s)", [other])
    assert "writes fingerprints of profile chars/1, but table public.docs holds default/1" in (
        str(refused.value))
    assert_no_drift(docs)


def test_declared_fingerprints_are_kept(docs: psycopg.Connection) -> None:
    docs.execute("SET LOCAL nearsim.profile = 'default/1'")
    docs.execute("INSERT INTO docs (id, body, si) VALUES (1001, 'whatever it says', 12345)")
    assert fingerprint_of(docs, 1001) == 12345 and bucket_of(docs, 1001) == 12345
    docs.execute("UPDATE docs SET si = 777 WHERE id = 1")
    assert fingerprint_of(docs, 1) == 777 and bucket_of(docs, 1) == 777
    docs.execute("UPDATE docs SET body = 'new words for two', si = 99 WHERE id = 2")
    assert fingerprint_of(docs, 2) == 99 and bucket_of(docs, 2) == 99
    # setting it to NULL asks for a recomputation
    docs.execute("UPDATE docs SET si = NULL WHERE id = 1")
    assert fingerprint_of(docs, 1) == nearsim.simhash("document 1 with words 1")
    assert bucket_of(docs, 1) == fingerprint_of(docs, 1)
    report = docs.execute(
        "SELECT ok, stale, missing FROM nearsim_verify('docs', fingerprints => true)").fetchone()
    assert report == (False, 2, 0)  # 1001 and 2 hold client values that are not simhash(body)


def test_updates(docs: psycopg.Connection) -> None:
    docs.execute("UPDATE docs SET body = 'completely different words now' WHERE id = 3")
    assert fingerprint_of(docs, 3) == nearsim.simhash("completely different words now")
    assert bucket_of(docs, 3) == fingerprint_of(docs, 3)
    docs.execute("UPDATE docs SET id = id + 10000 WHERE id <= 50")
    assert bucket_of(docs, 10) is None and bucket_of(docs, 10010) == fingerprint_of(docs, 10010)
    docs.execute("UPDATE docs SET id = -id WHERE id BETWEEN 60 AND 69")
    docs.execute("UPDATE docs SET owner_id = 3")  # no key or fingerprint change
    docs.execute("UPDATE docs SET body = NULL WHERE id = 70")
    assert bucket_of(docs, 70) is None
    docs.execute("UPDATE docs SET body = 'back again with words' WHERE id = 70")
    assert bucket_of(docs, 70) == nearsim.simhash("back again with words")
    assert_no_drift(docs)


def test_deletes_cascades_and_truncate(docs: psycopg.Connection) -> None:
    docs.execute("CREATE TABLE owners (id int PRIMARY KEY)")
    docs.execute("INSERT INTO owners SELECT g FROM generate_series(0, 9) g")
    docs.execute(
        "ALTER TABLE docs ADD FOREIGN KEY (owner_id) REFERENCES owners ON DELETE CASCADE")
    docs.execute("DELETE FROM docs WHERE id BETWEEN 1 AND 20")
    docs.execute("DELETE FROM owners WHERE id IN (3, 4)")
    assert docs.execute("SELECT count(*) FROM docs WHERE owner_id IN (3, 4)").fetchone() == (0,)
    assert_no_drift(docs)
    docs.execute("TRUNCATE docs")
    assert indexed(docs) == 0
    docs.execute("INSERT INTO docs (id, body, owner_id) VALUES (1, 'after truncate', 1)")
    assert indexed(docs) == 1
    docs.execute("TRUNCATE owners CASCADE")
    assert indexed(docs) == 0
    assert_no_drift(docs)


def test_upsert_merge_rollback_and_savepoints(docs: psycopg.Connection) -> None:
    docs.execute(
        "INSERT INTO docs (id, body) VALUES (5, 'upserted words'), (5000, 'fresh upsert')"
        " ON CONFLICT (id) DO UPDATE SET body = EXCLUDED.body"
    )
    assert bucket_of(docs, 5) == nearsim.simhash("upserted words")
    docs.execute("INSERT INTO docs (id, body) VALUES (6, 'ignored') ON CONFLICT DO NOTHING")
    docs.execute(
        "MERGE INTO docs d USING (VALUES (7, 'merged text'), (7000, 'merged new')) AS s(id, body)"
        " ON d.id = s.id WHEN MATCHED THEN UPDATE SET body = s.body"
        " WHEN NOT MATCHED THEN INSERT (id, body) VALUES (s.id, s.body)"
    )
    docs.execute("MERGE INTO docs d USING (VALUES (8)) AS s(id) ON d.id = s.id"
                 " WHEN MATCHED THEN DELETE")
    assert bucket_of(docs, 7) == nearsim.simhash("merged text") and bucket_of(docs, 8) is None
    assert_no_drift(docs)
    docs.execute("SAVEPOINT s1")
    docs.execute("DELETE FROM docs WHERE id < 100")
    docs.execute("UPDATE docs SET body = body || ' more'")
    docs.execute("ROLLBACK TO SAVEPOINT s1")
    assert_no_drift(docs)
    # a multi-row statement failing half-way leaves nothing behind
    docs.execute("SAVEPOINT s2")
    with pytest.raises(psycopg.errors.UniqueViolation):
        docs.execute("INSERT INTO docs (id, body) VALUES (8000, 'ok'), (9, 'duplicate key')")
    docs.execute("ROLLBACK TO SAVEPOINT s2")
    assert bucket_of(docs, 8000) is None
    assert_no_drift(docs)


def test_other_before_triggers(docs: psycopg.Connection) -> None:
    """A trigger that rewrites the text fires before the fingerprint is taken."""
    docs.execute(
        "CREATE FUNCTION shout() RETURNS trigger LANGUAGE plpgsql AS"
        " $$ BEGIN IF NEW.body = 'skip me' THEN RETURN NULL; END IF;"
        " NEW.body := upper(NEW.body) || ' signed'; RETURN NEW; END $$"
    )
    docs.execute("CREATE TRIGGER shout BEFORE INSERT OR UPDATE ON docs"
                 " FOR EACH ROW EXECUTE FUNCTION shout()")
    docs.execute("INSERT INTO docs (id, body) VALUES (1001, 'hello there'), (1002, 'skip me')")
    assert fingerprint_of(docs, 1001) == nearsim.simhash("HELLO THERE signed")
    assert docs.execute("SELECT count(*) FROM docs WHERE id = 1002").fetchone() == (0,)
    assert_no_drift(docs)


def test_drift_is_reported_and_repaired(docs: psycopg.Connection) -> None:
    # writes with nearsim's triggers off: fingerprints that are not those of
    # their texts (the index holds every row, as PostgreSQL keeps it)
    triggers = ("zz_nearsim_fingerprint", "zz_nearsim_fingerprint_update")
    for trigger in triggers:
        docs.execute(f"ALTER TABLE docs DISABLE TRIGGER {trigger}")
    docs.execute("INSERT INTO docs (id, body, si) VALUES (5001, 'unseen', 1)")
    docs.execute("UPDATE docs SET si = 2 WHERE id = 1")
    docs.execute("UPDATE docs SET body = 'rewritten while nobody looked' WHERE id = 4")
    docs.execute("DELETE FROM docs WHERE id = 2")
    docs.execute(f"ALTER TABLE docs ENABLE ALWAYS TRIGGER {triggers[0]}")
    report = docs.execute(
        "SELECT ok, missing, extra, wrong, stale, sample_keys, triggers_ok"
        " FROM nearsim_verify('docs')").fetchone()
    # the default check recomputes a sample of the fingerprints (every row of
    # a table this small)
    assert report == (False, 0, 0, 0, 3, ["1", "4", "5001"], False)
    assert bucket_of(docs, 5001) == 1
    assert (indexed(docs),) == docs.execute("SELECT count(si) FROM docs").fetchone()
    repaired = docs.execute("SELECT * FROM nearsim_rebuild('docs')").fetchone()
    # recomputed (1, 4 and 5001), removed and added (the indexes were right), bands
    assert repaired == (3, 0, 0, 3)
    report = docs.execute("SELECT ok, triggers_ok FROM nearsim_verify('docs')").fetchone()
    assert report == (True, True)
    assert bucket_of(docs, 4) == nearsim.simhash("rewritten while nobody looked")
    docs.execute("SELECT * FROM nearsim_rebuild('docs', fingerprints => true)")
    assert_no_drift(docs)


def test_a_missing_or_invalid_index_is_reported_and_repaired(docs: psycopg.Connection) -> None:
    (index,) = docs.execute(
        "SELECT indexrelid::regclass::text FROM pg_index WHERE indrelid = 'docs'::regclass"
        " AND pg_get_indexdef(indexrelid) LIKE '%nearsim_rotate(si, 0)%'").fetchone() or [None]
    docs.execute(f"DROP INDEX {index}")
    assert docs.execute("SELECT ok, band_indexes_ok FROM nearsim_verify('docs')").fetchone() == (
        False, False)
    # the search still answers, by a scan; what reads the index itself says what is wrong
    query = "document 1 with words 1"
    expected = docs.execute("SELECT id FROM docs WHERE hamming(si + 0, simhash(%s)) <= 3"
                            " ORDER BY id", [query]).fetchall()
    assert docs.execute("SELECT (doc).id FROM docs_similar(%s, 3) ORDER BY 1",
                        [query]).fetchall() == expected
    plan = docs.execute("EXPLAIN SELECT * FROM docs_similar(%s, 3)", [query]).fetchall()
    assert "nearsim rotation index" not in str(plan)
    error = error_of(docs, "SELECT nearsim_search('docs', 'si', 1, 3)")
    assert "the nearsim index of table docs is missing or incomplete" in str(error)
    assert "nearsim_rebuild('docs')" in (error.diag.message_hint or "")
    assert docs.execute("SELECT added FROM nearsim_rebuild('docs')").fetchone() == docs.execute(
        "SELECT count(si) FROM docs").fetchone()
    assert rotation_indexes(docs) == 3
    assert_no_drift(docs)
    # an index left invalid (as a failed CREATE INDEX CONCURRENTLY leaves it) is not used
    docs.execute("UPDATE pg_index SET indisvalid = false WHERE indexrelid = (SELECT indexrelid"
                 " FROM pg_index WHERE indrelid = 'docs'::regclass"
                 " AND pg_get_indexdef(indexrelid) LIKE '%nearsim_rotate(si, 22)%')")
    notices: list[str] = []
    docs.add_notice_handler(lambda d: notices.append(d.message_primary or ""))
    assert docs.execute("SELECT ok, band_indexes_ok FROM nearsim_verify('docs')").fetchone() == (
        False, False)
    assert any("is not valid" in notice for notice in notices), notices
    docs.execute("SELECT nearsim_rebuild('docs')")
    assert rotation_indexes(docs) == 3
    assert_no_drift(docs)


def test_plain_btree_rotation_indexes_serve_and_are_replaced(
    docs: psycopg.Connection,
) -> None:
    """Rotation indexes made as plain btrees answer exactly; verify and rebuild see them."""
    docs.execute("INSERT INTO docs (id, body) SELECT g, 'plain btree document ' || g"
                 " FROM generate_series(1000, 1400) g")
    for index, definition in docs.execute(
            "SELECT indexrelid::regclass::text, pg_get_indexdef(indexrelid) FROM pg_index"
            " WHERE indrelid = 'docs'::regclass AND pg_get_indexdef(indexrelid)"
            " LIKE '%nearsim_rotate(%'").fetchall():
        docs.execute(f"DROP INDEX {index}")
        docs.execute(definition.replace(" USING nearsim_btree ", " USING btree "))
    query = nearsim.simhash("plain btree document 1077")
    for k in (0, 3, 6, 12):
        assert bucket_search(docs, query, k) == brute_force(docs, query, k)
    assert docs.execute("SELECT ok, band_indexes_ok FROM nearsim_verify('docs')").fetchone() == (
        False, False)
    docs.execute("SELECT nearsim_rebuild('docs')")
    assert docs.execute(
        "SELECT array_agg(DISTINCT am.amname) FROM pg_index i"
        " JOIN pg_class c ON c.oid = i.indexrelid JOIN pg_am am ON am.oid = c.relam"
        " WHERE i.indrelid = 'docs'::regclass AND pg_get_indexdef(i.indexrelid)"
        " LIKE '%nearsim_rotate(%'").fetchone() == (["nearsim_btree"],)
    assert_no_drift(docs)


def test_searches_see_every_committed_row_of_concurrent_bulk_loads(database: str) -> None:
    """Rows committed by large transactions are found the moment they are visible.

    The rotation indexes take a transaction's entries at its commit (in key
    order): a reader's snapshot that sees a row must find it through them.
    Each reader search runs with the hamming() scan in one snapshot.
    """
    import threading

    with psycopg.connect(database, autocommit=True) as setup:
        setup.execute("DROP TABLE IF EXISTS loaded CASCADE")
        setup.execute("CREATE TABLE loaded (id int PRIMARY KEY, body text, si bigint)")
        setup.execute("SELECT nearsim_enable('loaded', 'body')")
    rng = random.Random(29)
    centre = rng.getrandbits(64) - (1 << 63)
    batches = [[flip(centre, rng.sample(range(64), rng.randint(0, 8)))
                if rng.random() < 0.2 else rng.getrandbits(64) - (1 << 63)
                for _ in range(3000)] for _ in range(12)]
    done = threading.Event()
    failures: list[BaseException] = []

    def load() -> None:
        try:
            with psycopg.connect(database) as conn:
                conn.execute("SET nearsim.profile = 'default/1'")
                for number, batch in enumerate(batches):
                    with conn.cursor().copy("COPY loaded (id, body, si) FROM STDIN") as copy:
                        for i, fp in enumerate(batch, number * len(batch)):
                            copy.write_row((i, f"document {i}", fp))
                    conn.commit()
        except BaseException as error:  # reported below
            failures.append(error)
        finally:
            done.set()

    loader = threading.Thread(target=load)
    loader.start()
    compared = 0
    with psycopg.connect(database) as reader:
        reader.isolation_level = psycopg.IsolationLevel.REPEATABLE_READ
        while not done.is_set() or compared == 0:
            with reader.transaction():
                for k in (3, 8):
                    assert bucket_search(reader, centre, k, "loaded_similar") == brute_force(
                        reader, centre, k, "loaded")
            compared += 1
    loader.join()
    assert not failures, failures
    with psycopg.connect(database, autocommit=True) as check:
        assert check.execute("SELECT count(*) FROM loaded").fetchone() == (36000,)
        for k in (3, 8):
            assert bucket_search(check, centre, k, "loaded_similar") == brute_force(
                check, centre, k, "loaded")
        assert_no_drift(check, "loaded", fingerprints=False)
        check.execute("DROP TABLE loaded CASCADE")
    assert compared > 3, compared


def test_rebuild_changes_the_layout(conn: psycopg.Connection) -> None:
    rng = random.Random(3)
    fingerprints = clustered_fingerprints(rng)
    make_docs(conn, fingerprints, bands=4)
    conn.execute("SELECT nearsim_rebuild('docs', bands => 7)")
    assert rotation_indexes(conn) == 7
    assert conn.execute("SELECT bands FROM nearsim_tables").fetchone() == (7,)
    for query in rng.sample(fingerprints, 10):
        for k in (0, 6, 12):
            assert bucket_search(conn, query, k) == brute_force(conn, query, k)
    assert_no_drift(conn, fingerprints=False)


# -- concurrent writers -------------------------------------------------------


def test_concurrent_writers_leave_no_drift(database: str) -> None:
    """8 sessions inserting, updating, re-keying and deleting the same rows."""
    import threading
    import time

    with psycopg.connect(database, autocommit=True) as setup:
        setup.execute("DROP TABLE IF EXISTS busy CASCADE")
        setup.execute("CREATE TABLE busy (id int PRIMARY KEY, body text)")
        setup.execute("INSERT INTO busy SELECT g, 'busy document ' || g FROM"
                      " generate_series(1, 200) g")
        setup.execute("SELECT nearsim_enable('busy', 'body', bands => 4)")
    failures: list[BaseException] = []
    counts = [0] * 8
    stop = time.monotonic() + 8

    def work(worker: int) -> None:
        rng = random.Random(worker)
        try:
            with psycopg.connect(database) as conn:
                conn.execute("SET nearsim.profile = 'default/1'")  # made-up fingerprints
                conn.commit()
                while time.monotonic() < stop:
                    key = rng.randint(1, 300)
                    with conn.transaction():
                        action = rng.random()
                        if action < 0.35:
                            conn.execute(
                                "INSERT INTO busy VALUES (%s, %s) ON CONFLICT (id) DO UPDATE"
                                " SET body = EXCLUDED.body",
                                (key, f"text {rng.randint(0, 20)} of the busy table"))
                        elif action < 0.6:
                            # rows locked in key order: a scan in physical order can
                            # lock them in another order than a concurrent one and
                            # deadlock on the documents alone
                            conn.execute("UPDATE busy SET body = body || ' more' WHERE id IN"
                                         " (SELECT id FROM busy WHERE id BETWEEN %s AND %s"
                                         " ORDER BY id FOR UPDATE)", (key, key + 3))
                        elif action < 0.75:
                            conn.execute("UPDATE busy SET si = %s WHERE id = %s",
                                         (rng.getrandbits(62), key))
                        elif action < 0.9:
                            conn.execute("DELETE FROM busy WHERE id = %s", (key,))
                        else:
                            conn.execute("SELECT count(*) FROM busy_similar(%s, 6)",
                                         (f"text {key % 20} of the busy table",))
                    counts[worker] += 1
        except BaseException as error:  # reported below, with the worker's number
            failures.append(error)

    threads = [threading.Thread(target=work, args=(n,)) for n in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    # One statement per transaction: the documents' row locks alone cannot
    # deadlock, so any deadlock would come from nearsim.
    assert not failures, failures
    assert min(counts) > 10, counts
    with psycopg.connect(database, autocommit=True) as check:
        assert_no_drift(check, "busy", fingerprints=False)
        check.execute("DROP TABLE busy CASCADE")


def test_one_layout_serves_every_size(conn: psycopg.Connection) -> None:
    """A table enabled empty and grown keeps 3 bands; the probe width follows its size."""
    rng = random.Random(11)
    conn.execute("CREATE TABLE docs (id bigint PRIMARY KEY, body text, si bigint)")
    conn.execute("SELECT nearsim_enable('docs', 'body')")
    assert conn.execute("SELECT bands FROM nearsim_tables WHERE tbl = 'docs'::regclass"
                        ).fetchone() == (3,)
    assert conn.execute(
        "SELECT array_agg(pg_get_indexdef(indexrelid) ORDER BY pg_get_indexdef(indexrelid)"
        " COLLATE \"C\") FROM pg_index"
        " WHERE indrelid = 'docs'::regclass AND NOT indisprimary"
    ).fetchone()[0] == [  # type: ignore[index]
        f"CREATE INDEX docs_nearsim_rotate_idx{suffix} ON public.docs USING nearsim_btree"
        f" (nearsim_rotate(si, {shift}))" for suffix, shift in (("", 0), ("1", 22), ("2", 43))]
    fingerprints: list[int] = []
    conn.execute("SET LOCAL nearsim.profile = 'default/1'")
    for size in (10, 1_000, 60_000):
        batch = [rng.getrandbits(64) - (1 << 63) for _ in range(size - len(fingerprints))]
        batch[::7] = [flip(fp, [1, 30, 50]) for fp in batch[::7]]  # near neighbours
        with conn.cursor().copy("COPY docs (id, body, si) FROM STDIN") as copy:
            for i, fp in enumerate(batch, len(fingerprints)):
                copy.write_row((i, f"document {i}", fp))
        fingerprints += batch
        for query in [*rng.sample(fingerprints, 5), 0, -1, -(1 << 63), (1 << 63) - 1]:
            for k in (0, 3, 6, 10, 64):
                assert bucket_search(conn, query, k) == brute_force(conn, query, k)


@pytest.mark.parametrize(("key_type", "keys"), [
    ("integer", ["1", "2", "3"]), ("bigint", ["10000000000", "2", "3"]),
    ("text", ["a'1", "b", "c"]),
    ("uuid", [str(uuid.UUID(int=n)) for n in (1, 2, 3)]),
])
def test_pairs_and_groups_in_the_tables_key_type(conn: psycopg.Connection, key_type: str,
                                                  keys: list[str]) -> None:
    text = "the fool hath said in his heart there is no god they are corrupt"
    conn.execute(sql.SQL("CREATE TABLE docs (id {} PRIMARY KEY, body text)").format(
        sql.SQL(key_type)))
    conn.cursor().executemany("INSERT INTO docs VALUES (%s, %s)", [
        (keys[0], text), (keys[1], text + " and abominable"), (keys[2], "in the beginning")])
    conn.execute("SELECT nearsim_enable('docs', 'body')")
    expected = conn.execute("SELECT a, b, distance FROM nearsim_pairs('docs', 12)").fetchall()
    assert len(expected) == 1
    typed = conn.execute(
        "SELECT pg_typeof(p.a)::text, p.a::text, p.b::text, p.distance, d.body"
        " FROM docs_pairs(12) p JOIN docs d ON d.id = p.b").fetchall()
    bodies = dict(zip(keys, (text, text + " and abominable"), strict=False))
    assert typed == [(key_type, *expected[0], bodies[expected[0][1]])]
    verified = conn.execute(
        "SELECT pg_typeof(p.a)::text, p.a::text, p.b::text FROM docs_pairs_verified(0.5) p"
        " JOIN docs d ON d.id = p.a").fetchall()
    assert verified == [(key_type, *expected[0][:2])]
    clusters = conn.execute(
        "SELECT pg_typeof(c.cluster)::text, c.key::text, c.cluster::text FROM docs_clusters(12) c"
        " JOIN docs d ON d.id = c.key ORDER BY 2").fetchall()
    assert clusters == [(key_type, k, r[1]) for k, r in zip(
        sorted(expected[0][:2]), conn.execute(
            "SELECT key, cluster FROM nearsim_clusters('docs', 12) ORDER BY key"), strict=True)]
    assert conn.execute("SELECT count(*) FROM docs_clusters_verified(0.5) c"
                        " JOIN docs d ON d.id = c.key").fetchone() == (2,)
