"""The deduplicated corpus out of Spark equals the one out of PostgreSQL.

One JSON Lines input (ids, urls, fetch dates, one missing; booleans and
numbers) goes through both routes: loaded by nearsim-load and written by
``nearsim dedup``, and read by ``nearsim spark dedup``.  Under each --keep
policy both keep the same documents with the same fields, and map the same
removed documents to the same kept ones.
"""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from pyspark.sql import SparkSession

import nearsim
from nearsim.client.cli import cli
from nearsim.client.dedup import DedupOptions, dedup
from nearsim.client.loader import load_paths
from nearsim.core.survivors import Keep
from nearsim.spark import dedup as spark_dedup

WORDS = ("river stone lantern orchard velvet harbor meadow signal copper thistle"
         " granite willow beacon saddle crimson falcon ember quarry lattice marble"
         " tundra violet anchor bramble cinder dapple fennel garnet hollow juniper").split()


def text_of(seed: int, extra: int = 0) -> str:
    words = [f"{WORDS[(seed * 7 + i * 3) % len(WORDS)]}{(seed * 31 + i) % 97}" for i in range(80)]
    return " ".join(words + ["postscript"] * extra)


# Ids 9 and 10 are in one group: "first" is 9 as a number (10 as text).
RECORDS: list[dict[str, Any]] = [
    {"id": 9, "url": "https://a.example/9", "fetched": "2024-03-01", "text": text_of(1, 2)},
    {"id": 10, "url": "https://a.example/10", "fetched": "2024-05-01", "text": text_of(1)},
    {"id": 11, "url": "https://a.example/11", "text": text_of(1, 5)},
    {"id": 20, "url": "https://b.example/20", "fetched": "2023-01-01", "text": text_of(2, 1),
     "score": 1.5},
    {"id": 21, "url": "https://b.example/21", "fetched": "2023-01-02", "text": text_of(2),
     "score": 2},
    {"id": 30, "url": "https://c.example/30", "fetched": "2022-07-07", "text": text_of(3),
     "ok": True},
    {"id": 31, "url": "https://c.example/31", "fetched": "2022-07-07", "text": text_of(3, 1),
     "ok": False},
    {"id": 40, "url": "https://d.example/40", "fetched": "2021-01-01", "text": text_of(4)},
    {"id": 41, "url": "https://d.example/41", "fetched": "2021-01-01", "text": text_of(5)},
]


def read_jsonl_directory(path: Path) -> list[dict[str, Any]]:
    """The rows of a directory Spark wrote as JSON Lines."""
    return [json.loads(line) for part in sorted(path.glob("part-*")) for line in
            part.read_text().splitlines() if line]  # fmt: skip


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def by_id(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return sorted(rows, key=lambda row: row["id"])


@pytest.fixture(scope="module")
def crawl(database: str, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """The input file, and the table nearsim-load made of it."""
    path = tmp_path_factory.mktemp("crawl") / "crawl.jsonl"
    path.write_text("".join(json.dumps(record) + "\n" for record in RECORDS))
    table = f"crawl_{uuid.uuid4().hex[:8]}"
    summary = load_paths([str(path)], table, dsn=database, create=True)
    assert summary.loaded == len(RECORDS)
    return path, table


@pytest.mark.parametrize("policy", ["first", "longest", "newest:fetched"])
def test_spark_and_postgresql_keep_the_same_survivors_and_map_alike(
    spark: SparkSession, database: str, crawl: tuple[Path, str], tmp_path: Path, policy: str,
) -> None:  # fmt: skip
    path, table = crawl
    with nearsim.connect(database, autocommit=True) as conn:
        summary = dedup(conn, table, DedupOptions(keep=Keep.parse(policy)),
                        output=str(tmp_path / "pg.jsonl"), mapping=str(tmp_path / "pg-map.jsonl"))
    _, found = spark_dedup(spark, [str(path)], None, key_column="id", text_column="text",
                           keep=policy, survivors=str(tmp_path / "spark.jsonl"),
                           mapping=str(tmp_path / "spark-map.jsonl"))  # fmt: skip
    from_postgresql = by_id(read_jsonl(tmp_path / "pg.jsonl"))
    from_spark = by_id(read_jsonl_directory(tmp_path / "spark.jsonl"))
    assert from_spark == from_postgresql
    assert len(from_postgresql) == 5  # one of each group of 3, 2 and 2, and the 2 others
    assert {row["removed"]: row["kept"] for row in read_jsonl_directory(
        tmp_path / "spark-map.jsonl")} == {row["removed"]: row["kept"] for row in read_jsonl(
            tmp_path / "pg-map.jsonl")}  # fmt: skip
    assert (found.survivors, found.removed) == (summary.survivors, summary.removed) == (5, 4)


def test_parquet_survivors_of_both_routes_are_equal_column_for_column(
    spark: SparkSession, database: str, crawl: tuple[Path, str], tmp_path: Path,
) -> None:  # fmt: skip
    pq = pytest.importorskip("pyarrow.parquet")
    path, table = crawl
    result = CliRunner().invoke(cli, ["dedup", table, "--dsn", database, "--keep", "longest",
                                      "-o", str(tmp_path / "pg.parquet")])  # fmt: skip
    assert result.exit_code == 0, result.output
    spark_dedup(spark, [str(path)], None, key_column="id", text_column="text", keep="longest",
                survivors=str(tmp_path / "spark.parquet"))
    from_postgresql = pq.read_table(tmp_path / "pg.parquet").to_pylist()
    from_spark = pq.read_table(tmp_path / "spark.parquet").to_pylist()
    assert by_id(from_spark) == by_id(from_postgresql)
    assert {"id", "url", "fetched", "score", "ok", "text"} == set(from_spark[0])


def test_an_unknown_field_to_keep_by_names_the_columns(spark: SparkSession,
                                                       crawl: tuple[Path, str],
                                                       tmp_path: Path) -> None:  # fmt: skip
    path, _ = crawl
    result = CliRunner().invoke(cli, ["spark", "dedup", str(path), "--key-column", "id",
                                      "--text-column", "text", "--keep", "newest:nope",
                                      "--survivors", str(tmp_path / "s.jsonl")])  # fmt: skip
    assert result.exit_code == 2
    assert "the input has no column 'nope' (--keep newest:nope)" in result.stderr
