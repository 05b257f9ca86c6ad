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
from nearsim.spark import WriteError, Written, fingerprints, write_table


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
    assert written == Written(inserted=len(corpus.bodies))
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
    assert write_table(frame, database, table, "id", "body").written == 1
    assert query(database, f"SELECT si FROM {table}") == [(12345,)]


def test_errors_name_the_problem(database: str, corpus: Corpus, spark: SparkSession,
                                 table: str) -> None:  # fmt: skip
    rows = spark.createDataFrame([(1, "one text"), (2, "another text")], "id long, body string")
    assert write_table(rows, database, table, "id", "body", partitions=1).inserted == 2
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
    # each group's survivor is its smallest key as a number (--keep first), which is
    # not always the cluster's name, its smallest key as text
    members: dict[str, set[int]] = {}
    for key, cluster in groups:
        members.setdefault(cluster, set()).add(int(key))
    kept = {min(keys) for keys in members.values()}
    dropped = {key for keys in members.values() for key in keys} - kept
    good = {key for key, body in corpus.bodies.items() if body and body.strip()}
    found = stored(database, table)
    assert set(found) == good - dropped
    assert kept <= set(found)
    assert all(si == fresh for _, si, fresh in found.values())
    assert summary["written"] == len(found) and summary["table"] == table
    assert verified(database, table)
    if method == "components":
        rerun_dedup_into_a_table(database, corpus, table, source, found, groups)
    refused = CliRunner().invoke(cli, [
        "spark", "dedup", str(source), "--key-column", "id", "--text-column", "body",
        "--into-table", table, "--dsn", database, "--profile", "english"])  # fmt: skip
    assert refused.exit_code == 2 and "not english" in refused.output


def rerun_dedup_into_a_table(database: str, corpus: Corpus, table: str, source: Path,
                             found: dict[int, tuple[str | None, int | None, int | None]],
                             groups: list[tuple[Any, ...]]) -> None:  # fmt: skip
    """The same dedup again: refused by default, nothing written with skip; then edited
    texts of documents without near-duplicates, replaced with replace."""
    command = ["spark", "dedup", str(source), "--key-column", "id", "--text-column", "body",
               "--into-table", table, "--dsn", database, "--master", "local[2]", "--json"]
    failed = CliRunner().invoke(cli, command)
    assert failed.exit_code == 2 and "already exists" in failed.output
    assert stored(database, table) == found
    again = CliRunner().invoke(cli, [*command, "--on-conflict", "skip"])
    assert again.exit_code == 0, again.output
    summary = json.loads(again.stdout)
    assert (summary["written"], summary["skipped"]) == (0, len(found))
    assert stored(database, table) == found
    assert verified(database, table)
    grouped = {int(key) for key, _ in groups}
    alone = sorted(key for key in found if key not in grouped and key < 9000)[:5]
    edited = {key: f"{corpus.bodies[key]} Revised." for key in alone}
    with source.open("w") as out:
        for key, body in corpus.bodies.items():
            out.write(json.dumps({"id": key, "body": edited.get(key, body)}) + "\n")
    replaced = CliRunner().invoke(cli, [*command, "--on-conflict", "replace"])
    assert replaced.exit_code == 0, replaced.output
    summary = json.loads(replaced.stdout)
    assert (summary["written"], summary["replaced"], summary["skipped"]) == (
        len(alone), len(alone), len(found) - len(alone))
    now = stored(database, table)
    assert {key: text for key, (text, _, _) in now.items()} == {
        key: edited.get(key, text) for key, (text, _, _) in found.items()}
    assert all(si == fresh for _, si, fresh in now.values())
    assert verified(database, table)
    no_table = [arg for arg in command if arg not in ("--into-table", table)]
    usage = CliRunner().invoke(cli, [*no_table, "-o", f"{source}.out", "--on-conflict", "skip"])
    assert usage.exit_code == 2 and "--on-conflict is for --into-table" in usage.output


def bodies_of(spark: SparkSession, bodies: dict[int, str | None]) -> Any:
    return spark.createDataFrame(sorted(bodies.items()), "id long, body string")


def test_a_rerun_with_skip_writes_what_is_missing(
        database: str, corpus: Corpus, spark: SparkSession, table: str) -> None:  # fmt: skip
    """A job that failed half-way, run again with skip: the missing rows, nothing twice."""
    half = {key: body for key, body in corpus.bodies.items() if key % 2 == 0}
    assert write_table(bodies_of(spark, half), database, table, "id", "body",
                       partitions=2).inserted == len(half)  # fmt: skip
    with pytest.raises(WriteError, match=r"duplicate key .*\(doc_id\)=\(\d+\) already exists"):
        write_table(corpus.frame, database, table, "id", "body", partitions=3,
                    on_conflict="error")  # fmt: skip
    before = stored(database, table)
    assert set(before) == set(half)  # the failed partitions left nothing behind
    # Stored rows are left as they are, even where the new rows' texts differ.
    changed = {key: (f"changed {body}" if key in half and body else body)
               for key, body in corpus.bodies.items()}  # fmt: skip
    done = write_table(bodies_of(spark, changed), database, table, "id", "body", partitions=3,
                       on_conflict="skip")  # fmt: skip
    assert done == Written(inserted=len(corpus.bodies) - len(half), skipped=len(half))
    found = stored(database, table)
    assert {key: text for key, (text, _, _) in found.items()} == {
        key: (corpus.bodies[key] if key in half else changed[key]) for key in corpus.bodies}
    assert all(si == fresh for _, si, fresh in found.values())
    assert verified(database, table)
    again = write_table(bodies_of(spark, changed), database, table, "id", "body",
                        on_conflict="skip")  # fmt: skip
    assert again == Written(skipped=len(corpus.bodies)) and again.written == 0
    assert stored(database, table) == found
    assert verified(database, table)


@pytest.mark.parametrize("precomputed", [True, False])
def test_replace_updates_changed_texts_and_fingerprints(database: str, corpus: Corpus,
                                                        spark: SparkSession, table: str,
                                                        precomputed: bool) -> None:  # fmt: skip
    assert write_table(corpus.frame, database, table, "id", "body").inserted == len(corpus.bodies)
    keys = sorted(key for key, body in corpus.bodies.items() if body and len(body) > 200)[:12]
    changed = dict(corpus.bodies)
    for key in keys[:10]:
        body = changed[key]
        assert body is not None
        changed[key] = body[: len(body) // 2] + " and a new ending for this document"
    changed[keys[10]] = None  # the text taken away: no fingerprint
    changed[keys[11]] = " ... "  # a text without words: no fingerprint either
    changed[10_001] = "a document that is new in this run of the job"
    frame = bodies_of(spark, changed)
    if precomputed:
        frame = fingerprints(frame, "body")
    done = write_table(frame, database, table, "id", "body", partitions=3, on_conflict="replace")
    assert done == Written(inserted=1, replaced=12, skipped=len(corpus.bodies) - 12)
    found = stored(database, table)
    assert {key: text for key, (text, _, _) in found.items()} == changed
    assert all(si == fresh for _, si, fresh in found.values())
    assert found[keys[10]][1] is None and found[keys[11]][1] is None
    assert verified(database, table)
    # A stored fingerprint that is not the text's is replaced, even for the same text.
    with psycopg.connect(database) as conn:
        conn.execute("SET nearsim.profile = 'default/1'")
        conn.execute(f"UPDATE {table} SET si = 12345 WHERE doc_id = %s", [keys[0]])
    done = write_table(fingerprints(frame.where(f"id = {keys[0]}"), "body")
                       if not precomputed else frame.where(f"id = {keys[0]}"),
                       database, table, "id", "body", on_conflict="replace")  # fmt: skip
    assert done == Written(replaced=1)
    assert stored(database, table) == found
    assert verified(database, table)


def test_rerun_choices_refuse_what_they_cannot_do(database: str, spark: SparkSession,
                                                  table: str) -> None:  # fmt: skip
    twice = spark.createDataFrame([(7, "a"), (8, "b"), (7, "c")], "id long, body string")
    for choice in ("skip", "replace"):
        with pytest.raises(WriteError, match="key 7 is on more than one row: nothing was"):
            write_table(twice.repartition(3), database, table, "id", "body", on_conflict=choice)
    assert query(database, f"SELECT count(*) FROM {table}") == [(0,)]
    with pytest.raises(ValueError, match="unknown on_conflict 'merge'"):
        write_table(twice, database, table, "id", "body", on_conflict="merge")
    deferred = f"deferred_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(database, autocommit=True) as conn:
        conn.execute(f"CREATE TABLE {deferred} (id bigint PRIMARY KEY DEFERRABLE, body text)")
        conn.execute("SELECT nearsim_enable(%s, 'body')", [deferred])
    rows = spark.createDataFrame([(1, "one text")], "id long, body string")
    with pytest.raises(WriteError, match="needs a unique index of its own that is not deferrable"):
        write_table(rows, database, deferred, "id", "body", on_conflict="skip")
    assert write_table(rows, database, deferred, "id", "body").inserted == 1  # error: COPY
    assert verified(database, table)


def test_rerun_into_quoted_names_of_other_key_types(database: str, spark: SparkSession) -> None:
    """Identifiers are quoted, and the staging table takes the key's and the text's types."""
    name = '"Crawl ""Data"""."Web Pages"'
    with psycopg.connect(database, autocommit=True) as conn:
        conn.execute('CREATE SCHEMA "Crawl ""Data"""')
        conn.execute(f'CREATE TABLE {name} ("Page ID" uuid PRIMARY KEY, "Body; Text" varchar(60),'
                     ' "Fing Print" bigint)')  # fmt: skip
        conn.execute("SELECT nearsim_enable(%s, 'Body; Text', hash_column => 'Fing Print',"
                     " prefix => 'web_pages')", [name])  # fmt: skip
    ids = [str(uuid.UUID(int=n)) for n in range(1, 5)]
    first = spark.createDataFrame([(ids[0], "the first page"), (ids[1], "the second page")],
                                  "url string, text string")  # fmt: skip
    assert write_table(first, database, name, "url", "text").inserted == 2
    second = spark.createDataFrame([(ids[0], "the first page"), (ids[1], "the second page, new"),
                                    (ids[2], "the third page")],
                                   "url string, text string")  # fmt: skip
    assert write_table(second, database, name, "url", "text", on_conflict="skip") == Written(
        inserted=1, skipped=2)
    assert write_table(second, database, name, "url", "text", on_conflict="replace") == Written(
        replaced=1, skipped=2)
    rows = query(database, f'SELECT "Page ID"::text, "Body; Text", "Fing Print",'
                           f' simhash("Body; Text") FROM {name} ORDER BY 1')  # fmt: skip
    assert [(key, text) for key, text, _, _ in rows] == [
        (ids[0], "the first page"), (ids[1], "the second page, new"), (ids[2], "the third page")]
    assert all(si == fresh for _, _, si, fresh in rows)
    too_long = spark.createDataFrame([(ids[3], "x" * 61)], "url string, text string")
    with pytest.raises(WriteError, match="value too long"):
        write_table(too_long, database, name, "url", "text", on_conflict="replace")
    assert query(database, f"SELECT ok FROM nearsim_verify('{name}', true)") == [(True,)]


def test_a_parquet_directory_spark_wrote_loads_with_nearsim_load(
        database: str, corpus: Corpus, table: str, tmp_path: Path) -> None:  # fmt: skip
    """Spark's output (part files and a _SUCCESS marker) into the table by nearsim-load."""
    output = tmp_path / "documents.parquet"
    rows = fingerprints(corpus.frame.where("body IS NOT NULL AND trim(body) <> ''"), "body")
    rows.repartition(3).write.parquet(str(output))
    parts = sorted(path.name for path in output.iterdir() if path.suffix == ".parquet")
    assert len(parts) >= 2 and (output / "_SUCCESS").exists()
    expected = {row["id"]: (row["body"], row["si"]) for row in rows.collect()}
    result = CliRunner().invoke(cli, [
        "load", str(output), "--format", "parquet", "--include", "*.parquet", "--dsn", database,
        "--table", table, "--id-field", "id", "--text-field", "body", "--quiet", "--json",
        "--workers", "1"])  # fmt: skip
    assert result.exit_code == 0, result.output
    summary = json.loads(result.stdout)
    assert (summary["loaded"], summary["failed"]) == (len(expected), 0), result.output
    found = stored(database, table)
    assert {key: (text, si) for key, (text, si, _) in found.items()} == expected
    assert all(si == fresh for _, si, fresh in found.values())
    assert verified(database, table)
