"""Logical replication into an enabled table, on a real publication and subscription.

The apply worker fires the fingerprint triggers (enabled ALWAYS) and keeps
the subscriber's own indexes, the rotation indexes among them, as it keeps
every index: searches on the subscriber equal the scan.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager

import psycopg
import pytest
from psycopg.conninfo import conninfo_to_dict, make_conninfo

WORDS = ("beginning heaven earth form void darkness deep spirit waters light day night"
         " firmament evening morning seas grass herb seed fruit tree kind").split()


@pytest.fixture(scope="module")
def logical_cluster(
    own_server: Callable[..., AbstractContextManager[tuple[str, str]]],
) -> Iterator[str]:
    """A throwaway cluster with wal_level = logical; the DSN of its postgres database."""
    with own_server("nearsim-logical-", {"wal_level": "logical"}) as (_, dsn):
        yield dsn


def text(rng: random.Random) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(rng.randrange(5, 40)))


def wait_for(subscriber: psycopg.Connection, done: str, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if subscriber.execute(done).fetchone() == (True,):
            return
        time.sleep(0.1)
    raise AssertionError(f"replication did not catch up: {done}")


@pytest.mark.parametrize("published", [("docs",)])
def test_a_subscriber_keeps_its_index(logical_cluster: str, published: tuple[str, ...]) -> None:
    suffix = "_".join(published)
    names = {"pub": f"pub_{suffix}", "sub": f"sub_{suffix}"}
    with psycopg.connect(logical_cluster, autocommit=True) as admin:
        for name in names.values():
            admin.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
            admin.execute(f"CREATE DATABASE {name}")
    server = conninfo_to_dict(logical_cluster)
    pub_dsn = make_conninfo(logical_cluster, dbname=names["pub"])
    sub_dsn = make_conninfo(logical_cluster, dbname=names["sub"])
    rng = random.Random(3)
    with psycopg.connect(pub_dsn, autocommit=True) as pub, \
            psycopg.connect(sub_dsn, autocommit=True) as sub:
        for conn in (pub, sub):
            conn.execute("CREATE EXTENSION nearsim CASCADE")
            conn.execute("CREATE TABLE docs (id int PRIMARY KEY, body text)")
            conn.execute("SELECT nearsim_enable('docs', 'body')")
        pub.cursor().executemany("INSERT INTO docs VALUES (%s, %s)",
                                 [(i, text(rng)) for i in range(300)])
        pub.execute(f"CREATE PUBLICATION p FOR TABLE {', '.join(published)}")
        # a subscription to the same cluster needs its slot made beforehand
        pub.execute(f"SELECT pg_create_logical_replication_slot('s_{suffix}', 'pgoutput')")
        publisher = make_conninfo("", host=server["host"], port=server["port"],
                                  user="postgres", dbname=names["pub"])
        sub.execute(f"CREATE SUBSCRIPTION s CONNECTION '{publisher}' PUBLICATION p"
                    f" WITH (create_slot = false, slot_name = 's_{suffix}')")
        wait_for(sub, "SELECT bool_and(srsubstate = 'r') FROM pg_subscription_rel")
        # every kind of change, in several transactions
        pub.cursor().executemany("INSERT INTO docs VALUES (%s, %s)",
                                 [(i, text(rng)) for i in range(300, 500)])
        pub.execute("UPDATE docs SET body = body || ' again and again' WHERE id % 7 = 0")
        pub.execute("UPDATE docs SET id = id + 1000 WHERE id % 11 = 0")
        pub.execute("DELETE FROM docs WHERE id % 5 = 0")
        with pub.transaction():
            pub.execute("INSERT INTO docs VALUES (5000, 'a last document about the deep waters')")
            pub.execute("UPDATE docs SET body = NULL WHERE id = 1")
        expected = pub.execute("SELECT count(*) || ' ' || sum(si) FROM docs").fetchone()
        assert expected is not None
        wait_for(sub, f"SELECT count(*) || ' ' || sum(si) = '{expected[0]}' FROM docs")
        report = sub.execute(
            "SELECT ok, missing, extra, wrong, stale FROM nearsim_verify('docs', true)"
        ).fetchone()
        assert report == (True, 0, 0, 0, 0)
        # searches on the subscriber equal the scan
        for query in pub.execute("SELECT si FROM docs WHERE si IS NOT NULL LIMIT 20"):
            found = sub.execute("SELECT (doc).id FROM docs_similar(%s::bigint, 8) ORDER BY 1",
                                [query[0]]).fetchall()
            # si + 0 is not the indexed column: a scan, never the rotation index
            scanned = sub.execute("SELECT id FROM docs WHERE hamming(si + 0, %s) <= 8 ORDER BY 1",
                                  [query[0]]).fetchall()
            assert found == scanned
        sub.execute("DROP SUBSCRIPTION s")
