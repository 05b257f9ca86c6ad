"""Files in, groups out: skewed input, bad rows, the ``nearsim spark dedup`` command."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import psycopg
import pyspark
import pytest
from click.testing import CliRunner
from psycopg import sql
from pyspark.sql import SparkSession
from spark_corpus import Corpus

import nearsim
from nearsim.client.cli import cli
from nearsim.spark import clusters, dedup, fingerprints, hamming_groups, read_documents
from nearsim.spark.documents import good_documents


def test_twenty_thousand_identical_texts(spark: SparkSession) -> None:
    """The pairs of a block of identical documents are counted and grouped, never made."""
    boilerplate = "This message was sent from a mobile device. Please excuse brevity."
    others = [f"document number {n} says {' '.join(str(n * m) for m in range(12))}"
              for n in range(200)]  # fmt: skip
    rows = [(n, boilerplate) for n in range(20_000)] + [(20_000 + n, text)
                                                         for n, text in enumerate(others)]
    frame = fingerprints(spark.createDataFrame(rows, "id long, body string"), "body")
    grouped = hamming_groups(frame, "id", 3)
    distinct = [nearsim.simhash(text) for text in others]
    near_others = sum(1 for i, x in enumerate(distinct) for y in distinct[i + 1:]
                      if x is not None and y is not None and nearsim.hamming(x, y) <= 3)
    assert grouped.count() == 20_000 * 19_999 // 2 + near_others
    found = clusters(frame, "id", 3)
    sizes = {row["cluster"]: row["count"] for row in found.groupBy("cluster").count().collect()}
    assert sizes[0] == 20_000


def write_inputs(directory: Path) -> dict[str, Path]:
    good = [
        {"id": 1, "body": "In the beginning God created the heaven and the earth."},
        {"id": 2, "body": "In the beginning God created the heaven and the earth!"},
        {"id": 3, "body": "And the earth was without form, and void; and darkness was upon"
                          " the face of the deep."},
        {"id": 4, "body": "Something else entirely, about ships and the sea and sailors."},
    ]
    bad = [
        {"id": 5, "body": None},
        {"id": 6, "body": ""},
        {"id": 7, "body": "   \n"},
        {"id": 8, "body": 42},
        {"id": 9, "body": {"text": "nested"}},
        {"id": 10, "body": "one of two rows with this key"},
        {"id": 10, "body": "the other row with this key"},
        {"body": "a record without a key"},
    ]
    lines = [json.dumps(record) for record in good + bad] + ["{not json", "[1, 2]", ""]
    paths = {"jsonl": directory / "docs.jsonl"}
    paths["jsonl"].write_text("\n".join(lines) + "\n")
    paths["csv"] = directory / "docs.csv"
    paths["csv"].write_text(
        'id,body\n1,"In the beginning God created the heaven and the earth."\n'
        '2,"In the beginning God created the heaven and the earth!"\n'
        '3,"A text with a ""quoted"" word,\nand a second line."\n4,\n4,again\n')
    text_dir = directory / "texts"
    text_dir.mkdir()
    (text_dir / "a.txt").write_text("In the beginning God created the heaven and the earth.\n")
    (text_dir / "b.txt").write_text("In the beginning God created the heaven and the earth.\n")
    (text_dir / "c.txt").write_text("  \n")  # (Spark's file sources skip files of 0 bytes)
    paths["text"] = text_dir
    return paths


def problems(frame: Any) -> dict[str | None, int]:
    return {row["problem"]: row["count"] for row in frame.groupBy("problem").count().collect()}


def test_bad_rows_are_counted_by_reason(spark: SparkSession, tmp_path: Path) -> None:
    paths = write_inputs(tmp_path)
    read = read_documents(spark, str(paths["jsonl"]), "id", "body")
    assert problems(read) == {None: 4, "empty": 3, "not-text": 2, "duplicate-key": 2,
                              "missing-key": 1, "invalid-record": 2}  # fmt: skip
    assert dict(read.schema.fields[0].jsonValue()) ["type"] == "long"
    good = {row["id"]: row["body"] for row in good_documents(read).collect()}
    assert good[3].startswith("And the earth")
    read = read_documents(spark, str(paths["csv"]), "id", "body")
    assert problems(read) == {None: 3, "duplicate-key": 2}
    texts = {row["id"]: row["body"] for row in good_documents(read).collect()}
    assert texts[3] == 'A text with a "quoted" word,\nand a second line.'
    read = read_documents(spark, str(paths["text"]), format="text")
    assert problems(read) == {None: 2, "empty": 1}
    assert read.columns == ["path", "text", "problem"]


def test_parquet_in_and_out(spark: SparkSession, tmp_path: Path) -> None:
    rows = [("a", "the same words in the same order here"), ("b", "the same words in the same"
            " order here"), ("c", "quite another text, with nothing in common"), ("d", None)]
    spark.createDataFrame(rows, "name string, content string").write.parquet(
        str(tmp_path / "in.parquet"))
    frame, summary = dedup(spark, str(tmp_path / "in.parquet"), str(tmp_path / "out.parquet"),
                           "name", "content", min_similarity=None)  # fmt: skip
    assert sorted(map(tuple, frame.collect())) == [("a", "a", None), ("b", "a", None)]
    assert frame.columns == ["name", "cluster", "pivot"]
    assert (summary.documents, summary.pairs, summary.groups, summary.bad) == (3, 1, 1,
                                                                               {"empty": 1})
    numbers = spark.createDataFrame([(1, 2.5)], "name long, content double")
    numbers.write.parquet(str(tmp_path / "numbers.parquet"))
    assert problems(read_documents(spark, str(tmp_path / "numbers.parquet"), "name",
                                   "content")) == {"not-text": 1}  # fmt: skip


@pytest.mark.parametrize(("by_bits", "method"), [(True, "components"), (False, "components"),
                                                 (True, "pivot"), (False, "pivot")])  # fmt: skip
def test_dedup_command_is_nearsim_clusters(database: str, corpus: Corpus, tmp_path: Path,
                                           spark: SparkSession, by_bits: bool,
                                           method: str) -> None:  # fmt: skip
    source = tmp_path / "corpus.jsonl"
    with source.open("w") as out:
        for key, body in corpus.bodies.items():
            out.write(json.dumps({"id": key, "body": body}) + "\n")
    output = tmp_path / "groups.parquet"
    options = ["--hamming", "-k", "6"] if by_bits else ["-s", "0.8"]
    options += ["--method", method]
    result = CliRunner().invoke(cli, [
        "spark", "dedup", str(source), "--key-column", "id", "--text-column", "body", *options,
        "--output", str(output), "--master", "local[2]", "--json"])  # fmt: skip
    assert result.exit_code == 0, result.output
    summary = json.loads(result.stdout)
    function = (f"nearsim_clusters(%s, 6, '{method}')" if by_bits
                else f"nearsim_clusters_verified(%s, 0.8, 's_r', NULL, '{method}')")  # fmt: skip
    with psycopg.connect(database) as conn:
        expected = sorted(conn.execute(sql.SQL(f"SELECT key, cluster, pivot FROM {function}"),
                                       [corpus.table]).fetchall())  # fmt: skip
    found = spark.read.parquet(str(output))
    assert found.columns == ["id", "cluster", "pivot"]
    assert dict(found.dtypes)["id"] == "bigint"
    got = sorted((str(r["id"]), str(r["cluster"]), None if r["pivot"] is None else str(r["pivot"]))
                 for r in found.collect())  # fmt: skip
    assert dict(found.dtypes)["pivot"] == "bigint"
    assert got == expected
    assert summary["documents"] == len(corpus.bodies) - 2  # punctuation alone is a text
    assert summary["bad_rows_by_reason"] == {"empty": 2}
    assert summary["fingerprinted"] == len(corpus.bodies) - 3
    assert summary["grouped_documents"] == len(expected)
    assert summary["groups"] == len({cluster for _, cluster, _ in expected})
    assert (method == "pivot") == any(pivot is not None for _, _, pivot in expected)
    again = CliRunner().invoke(cli, ["spark", "dedup", str(source), "--key-column", "id",
                                     "--text-column", "body", "-o", str(output)])  # fmt: skip
    assert again.exit_code == 2 and "already exists" in again.output


def test_dedup_command_errors(tmp_path: Path) -> None:
    source = tmp_path / "docs.jsonl"
    source.write_text('{"id": 1, "body": "text"}\n')
    result = CliRunner().invoke(cli, ["spark", "dedup", str(source), "--key-column", "id",
                                      "--text-column", "nope", "-o", str(tmp_path / "o")])
    assert result.exit_code == 2 and "has no column 'nope'" in result.output
    result = CliRunner().invoke(cli, ["spark", "dedup", str(source), "--key-column", "id",
                                      "--text-column", "body", "--hamming", "-s", "0.9",
                                      "-o", str(tmp_path / "o")])  # fmt: skip
    assert result.exit_code == 2 and "--hamming" in result.output


def test_the_command_runs_under_spark_submit(spark: SparkSession, tmp_path: Path) -> None:
    """spark-submit runs the job file as the driver, with its master and the command's options."""
    paths = write_inputs(tmp_path)
    job = CliRunner().invoke(cli, ["spark", "job-file"])
    assert job.exit_code == 0, job.output
    job_file = Path(job.stdout.strip())
    assert job_file.is_file()
    submit = Path(pyspark.__file__).parent / "bin" / "spark-submit"
    output = tmp_path / "groups.parquet"
    environment = {**os.environ, "PYSPARK_PYTHON": sys.executable,
                   "PYSPARK_DRIVER_PYTHON": sys.executable}  # fmt: skip
    ran = subprocess.run(
        [str(submit), "--master", "local[2]", "--driver-memory", "1g",
         "--conf", "spark.ui.enabled=false", "--conf", "spark.sql.shuffle.partitions=4",
         str(job_file), "dedup", str(paths["jsonl"]), "--key-column", "id",
         "--text-column", "body", "--hamming", "-k", "3", "-o", str(output), "--json"],
        capture_output=True, text=True, env=environment, timeout=600, check=False)
    assert ran.returncode == 0, ran.stderr[-3000:]
    summary = json.loads(ran.stdout)
    _, expected = dedup(spark, str(paths["jsonl"]), str(tmp_path / "in-process"), "id", "body",
                        min_similarity=None, max_distance=3)  # fmt: skip
    assert summary["bad_rows_by_reason"] == expected.bad
    assert (summary["documents"], summary["pairs"], summary["groups"]) == (
        expected.documents, expected.pairs, expected.groups)
    found = sorted(map(tuple, spark.read.parquet(str(output)).collect()))
    assert found == [(1, 1, None), (2, 1, None)]
    refused = subprocess.run(
        [str(submit), "--master", "local[1]", "--conf", "spark.ui.enabled=false", str(job_file),
         "dedup", str(paths["jsonl"]), "--key-column", "id", "--text-column", "nope", "-o",
         str(tmp_path / "other")],
        capture_output=True, text=True, env=environment, timeout=600, check=False)
    # (spark-submit passes on the driver's stderr on its stdout)
    assert refused.returncode == 2, refused.stderr[-3000:]
    assert "Error: the JSON Lines input has no column 'nope'" in refused.stdout
    assert "Traceback" not in refused.stdout + refused.stderr
