"""nearsim.spark with profile default/2 gives the answers of a table of that profile:
fingerprints, and verified pairs measured and joined with the words of tokenisation 2
(the letters of Khmer one to a word)."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from psycopg import sql
from pyspark.sql import DataFrame, SparkSession

from nearsim.spark import fingerprints, verified_pairs

from khmer import khmer_bodies
from tables import enabled_table

Table = tuple[str, DataFrame]


@pytest.fixture(scope="module")
def khmer_table(database: str, spark: SparkSession) -> Iterator[Table]:
    bodies = khmer_bodies(seed=12, originals=8, documents=30)
    table = f"spark_khmer_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(database, autocommit=True) as conn:
        enabled_table(conn, table, bodies, "default/2")
    frame = spark.createDataFrame(sorted(bodies.items()), "id bigint, body string").cache()
    yield table, frame
    frame.unpersist()
    with psycopg.connect(database, autocommit=True) as conn:
        conn.execute(sql.SQL("DROP TABLE {} CASCADE").format(sql.Identifier(table)))


def _rows(database: str, statement: str, *args: Any) -> list[tuple[Any, ...]]:
    with psycopg.connect(database) as conn:
        return sorted(conn.execute(statement, args).fetchall())


def test_fingerprints_of_default_2_are_the_tables(database: str, khmer_table: Table) -> None:
    table, frame = khmer_table
    expected = dict(_rows(database, f"SELECT id, si FROM {table}"))
    got = {row["id"]: row["si"] for row in fingerprints(frame, "body", "default/2").collect()}
    assert got == expected


@pytest.mark.parametrize(("minimum", "measure", "radius"), [(0.5, "s_r", None),
                                                            (0.8, "s_l", 64)])
def test_verified_pairs_of_default_2_are_the_tables(database: str, khmer_table: Table,
                                                    minimum: float, measure: str,
                                                    radius: int | None) -> None:
    table, frame = khmer_table
    expected = _rows(database, "SELECT a, b, distance, similarity, short FROM"
                     " nearsim_pairs_verified(%s, %s, %s, %s)", table, minimum, measure, radius)
    found = verified_pairs(frame, "id", "body", minimum, measure, radius, profile="default/2")
    got = sorted((str(r["a"]), str(r["b"]), r["distance"], r["similarity"], r["short"])
                 for r in found.collect())
    assert [row[:3] + row[4:] for row in got] == [row[:3] + row[4:] for row in expected]
    assert [row[3] for row in got] == pytest.approx([row[3] for row in expected])
    assert len(expected) > 20
