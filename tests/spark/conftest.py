"""A local Spark session shared by the Spark tests, and a corpus in Spark and in PostgreSQL."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import psycopg
import pytest
from psycopg import sql
from pyspark.sql import SparkSession
from spark_corpus import Corpus, make_corpus

from nearsim.spark import session

from tables import enabled_table


@pytest.fixture(scope="session")
def spark() -> Iterator[SparkSession]:
    """``local[2]``, with few shuffle partitions: the tests' data is small."""
    active = session("local[2]", "nearsim-tests", {
        "spark.sql.shuffle.partitions": "4",
        "spark.default.parallelism": "2",
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
        "spark.sql.session.timeZone": "UTC",
        "spark.driver.memory": "1g",
    })  # fmt: skip
    active.sparkContext.setLogLevel("ERROR")
    yield active
    active.stop()


@pytest.fixture(scope="module")
def corpus(database: str, spark: SparkSession) -> Iterator[Corpus]:
    """The same documents in an enabled table ``(id bigint, body text)`` and a DataFrame."""
    bodies = make_corpus()
    table = f"spark_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(database, autocommit=True) as conn:
        enabled_table(conn, table, bodies)
    frame = spark.createDataFrame(sorted(bodies.items()), "id bigint, body string").cache()
    yield Corpus(table, bodies, frame)
    frame.unpersist()
    with psycopg.connect(database, autocommit=True) as conn:
        conn.execute(sql.SQL("DROP TABLE {} CASCADE").format(sql.Identifier(table)))
