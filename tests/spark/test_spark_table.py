"""Rows with their fingerprints into an enabled table, by COPY from the executors."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from click.testing import CliRunner
from psycopg import sql
from pyspark.sql import SparkSession
from spark_corpus import Corpus

from nearsim.client.cli import cli
from nearsim.spark import WriteError, fingerprints, write_table


def query(database: str, text: str, *args: Any) -> list[tuple[Any, ...]]:
    with psycopg.connect(database) as conn:
        return conn.execute(text, args).fetchall()


@pytest.fixture
def table(database: str) -> Iterator[str]:
    """An empty enabled table ``(doc_id bigint, content text)``: other names than the rows'."""
    name = f"written_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(database, autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE TABLE {} (doc_id bigint PRIMARY KEY, content text,"
                             " note text)").format(sql.Identifier(name)))  # fmt: skip
        conn.execute("SELECT nearsim_enable(%s, 'content')", [name])
    yield name
    with psycopg.connect(database, autocommit=True) as conn:
        conn.execute(sql.SQL("DROP TABLE {} CASCADE").format(sql.Identifier(name)))


def stored(database: str, table: str) -> dict[int, tuple[str | None, int | None, int | None]]:
    """key -> (text, stored fingerprint, SQL simhash of the text)."""
    rows = query(database, f"SELECT doc_id, content, si, simhash(content) FROM {table}")
    return {key: (text, si, fresh) for key, text, si, fresh in rows}


def verified(database: str, table: str) -> bool:
    return bool(query(database, f"SELECT ok FROM nearsim_verify('{table}', true)")[0][0])


@pytest.mark.parametrize("precomputed", [True, False])
def test_rows_land_with_their_fingerprints(database: str, corpus: Corpus, table: str,
                                           precomputed: bool) -> None:  # fmt: skip
    frame = fingerprints(corpus.frame, "body") if precomputed else corpus.frame
    written = write_table(frame.repartition(3), database, table, "id", "body")
    assert written == len(corpus.bodies)
    found = stored(database, table)
    assert {key: text for key, (text, _, _) in found.items()} == corpus.bodies
    assert all(si == fresh for _, si, fresh in found.values())
    assert sum(si is not None for _, si, _ in found.values()) == len(corpus.bodies) - 3
    assert verified(database, table)


def test_fingerprints_are_kept_as_declared(database: str, spark: SparkSession,
                                           table: str) -> None:  # fmt: skip
    """The transaction declares the profile: the trigger keeps the fingerprints it is given
    (made-up ones here, to show it) instead of computing them again."""
    frame = spark.createDataFrame([(1, "some words of text", 12345)],
                                  "id long, body string, si long")  # fmt: skip
    assert write_table(frame, database, table, "id", "body") == 1
    assert query(database, f"SELECT si FROM {table}") == [(12345,)]


def test_errors_name_the_problem(database: str, corpus: Corpus, spark: SparkSession,
                                 table: str) -> None:  # fmt: skip
    rows = spark.createDataFrame([(1, "one text"), (2, "another text")], "id long, body string")
    assert write_table(rows, database, table, "id", "body", partitions=1) == 2
    again = spark.createDataFrame([(3, "a third text"), (2, "another text")],
                                  "id long, body string")  # fmt: skip
    with pytest.raises(WriteError, match=r"duplicate key .*\(doc_id\)=\(2\) already exists"):
        write_table(again, database, table, "id", "body", partitions=1)
    assert sorted(query(database, f"SELECT doc_id FROM {table}")) == [(1,), (2,)]  # not 3
    twice = spark.createDataFrame([(7, "a"), (7, "b")], "id long, body string")
    with pytest.raises(WriteError, match=r"\(doc_id\)=\(7\)"):
        write_table(twice, database, table, "id", "body", partitions=1)
    with pytest.raises(WriteError, match="holds fingerprints of profile default/1, not english"):
        write_table(rows, database, table, "id", "body", profile="english")
    with pytest.raises(WriteError, match="does not exist"):
        write_table(rows, database, corpus.table.replace("spark_", "nope_"), "id", "body")
    plain = f"plain_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(database, autocommit=True) as conn:
        conn.execute(f"CREATE TABLE {plain} (id bigint PRIMARY KEY, body text)")
    with pytest.raises(WriteError, match="not enabled for nearsim"):
        write_table(rows, database, plain, "id", "body")
    assert verified(database, table)


@pytest.mark.parametrize("method", ["components", "pivot"])
def test_dedup_into_a_table_writes_the_survivors(database: str, corpus: Corpus, table: str,
                                                 tmp_path: Path, method: str) -> None:  # fmt: skip
    source = tmp_path / "corpus.jsonl"
    with source.open("w") as out:
        for key, body in corpus.bodies.items():
            out.write(json.dumps({"id": key, "body": body}) + "\n")
    result = CliRunner().invoke(cli, [
        "spark", "dedup", str(source), "--key-column", "id", "--text-column", "body",
        "--method", method, "--into-table", table, "--dsn", database, "--master", "local[2]",
        "--json"])  # fmt: skip
    assert result.exit_code == 0, result.output
    summary = json.loads(result.stdout)
    groups = query(database, "SELECT key, cluster FROM nearsim_clusters_verified(%s, 0.8, 's_r',"
                             " NULL, %s)", corpus.table, method)  # fmt: skip
    dropped = {int(key) for key, cluster in groups if key != cluster}
    good = {key for key, body in corpus.bodies.items() if body and body.strip()}
    found = stored(database, table)
    assert set(found) == good - dropped
    assert {int(cluster) for _, cluster in groups} <= set(found)
    assert all(si == fresh for _, si, fresh in found.values())
    assert summary["written"] == len(found) and summary["table"] == table
    assert verified(database, table)
    refused = CliRunner().invoke(cli, [
        "spark", "dedup", str(source), "--key-column", "id", "--text-column", "body",
        "--into-table", table, "--dsn", database, "--profile", "english"])  # fmt: skip
    assert refused.exit_code == 2 and "not english" in refused.output
