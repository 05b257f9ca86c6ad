"""The default profile's path needs no Python: searching and writing a table of
profile default/1 never starts PL/Python in the session (a new connection's
first search would otherwise import the interpreter and numpy)."""

from __future__ import annotations

import psycopg
import pytest

CHAPTER = "In the beginning God created the heaven and the earth and the earth was without form"


def python_started(conn: psycopg.Connection) -> bool:
    row = conn.execute("SELECT count(*) FROM pg_catalog.pg_backend_memory_contexts"
                       " WHERE name LIKE 'PL/Python%'").fetchone()  # fmt: skip
    return row is not None and row[0] > 0


@pytest.fixture(scope="module")
def tables(database: str) -> str:
    with psycopg.connect(database, autocommit=True) as conn:
        for name, profile in (("plain", "default/1"), ("stemmed", "english/1")):
            conn.execute(f"CREATE TABLE {name} (id int PRIMARY KEY, body text)")
            conn.execute(f"INSERT INTO {name} VALUES (1, %s), (2, %s)",
                         (CHAPTER, CHAPTER + " and void"))  # fmt: skip
            conn.execute(f"SELECT nearsim_enable('{name}', 'body', profile => '{profile}')")
    return database


def test_search_and_writes_of_a_default_table_need_no_python(tables: str) -> None:
    with psycopg.connect(tables, autocommit=True) as conn:
        found = conn.execute("SELECT (doc).id, distance FROM plain_similar(%s, 6) ORDER BY 1",
                             [CHAPTER]).fetchall()  # fmt: skip
        assert [row[0] for row in found] == [1, 2]
        prepared = conn.execute("SELECT count(*) FROM plain_similar(%s::text, 6)", [CHAPTER],
                                prepare=True).fetchone()  # fmt: skip
        assert prepared == (2,)
        conn.execute("INSERT INTO plain VALUES (3, %s)", [CHAPTER + " again"])
        conn.execute("UPDATE plain SET body = body || ' amen' WHERE id = 3")
        with conn.cursor().copy("COPY plain (id, body) FROM STDIN") as copy:
            copy.write_row((4, CHAPTER + " once more"))
        conn.execute("DELETE FROM plain WHERE id = 4")
        assert conn.execute("SELECT count(*) FROM plain_similar(%s, 10)",
                            [CHAPTER]).fetchone() == (3,)  # fmt: skip
        assert not python_started(conn)


def test_all_pairs_groups_and_verified_pairs_of_a_default_table_need_no_python(
    tables: str,
) -> None:
    with psycopg.connect(tables, autocommit=True) as conn:
        pairs = conn.execute("SELECT a, b FROM nearsim_pairs('plain', 6)").fetchall()
        assert ("1", "2") in pairs
        groups = conn.execute("SELECT key, cluster, pivot FROM nearsim_clusters('plain', 6,"
                              " 'pivot')").fetchall()  # fmt: skip
        assert ("2", "1", groups[0][2]) in groups
        # verified pairs and groups by S_R, and by S_L (the default)
        for threshold, measure in ((0.8, "s_r"), (0.87, "s_l")):
            verified = conn.execute("SELECT a, b FROM nearsim_pairs_verified('plain', %s, %s)",
                                    [threshold, measure]).fetchall()  # fmt: skip
            assert ("1", "2") in verified
            verified_groups = conn.execute(
                "SELECT key, cluster FROM nearsim_clusters_verified('plain', %s, %s,"
                " method => 'pivot')", [threshold, measure]).fetchall()
            assert ("2", "1") in verified_groups
            assert not python_started(conn)
        # another measure is PL/Python's, over the pairs of nearsim_pairs
        by_s_j = conn.execute("SELECT a, b FROM nearsim_pairs_verified('plain', 0.8,"
                              " 's_j')").fetchall()  # fmt: skip
        assert ("1", "2") in by_s_j
        assert python_started(conn)


def test_verified_search_by_s_l_of_a_default_table_needs_no_python(tables: str) -> None:
    """S_L (the command line's default) is measured in C, among the S_R candidates."""
    with psycopg.connect(tables, autocommit=True) as conn:
        found = conn.execute("SELECT key, similarity FROM nearsim_similar_verified('plain', %s,"
                             " 0.87, 's_l') ORDER BY key", [CHAPTER]).fetchall()  # fmt: skip
        assert [key for key, _ in found][:2] == ["1", "2"]
        assert found[0][1] == 1.0
        assert conn.execute("SELECT nearsim_literal_similarity(%s, %s)",
                            [CHAPTER, CHAPTER + " and void"]).fetchone() == (found[1][1],)
        assert not python_started(conn)


def test_another_profile_starts_python(tables: str) -> None:
    with psycopg.connect(tables, autocommit=True) as conn:
        assert conn.execute("SELECT (doc).id FROM stemmed_similar(%s, 0)",
                            [CHAPTER]).fetchall() == [(1,)]  # fmt: skip
        assert python_started(conn)  # the check above sees what it claims to
