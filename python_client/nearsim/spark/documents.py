"""Documents from files into a DataFrame of (key, text), bad rows marked; results to Parquet.

:func:`read_documents` reads Parquet, JSON Lines, CSV or text files and
gives every row, with a column ``problem`` that is NULL for a good document
and otherwise says what is wrong with it:

========================  ====================================================
``missing-key``           the key is NULL (or the record has none)
``duplicate-key``         the key is on more than one row: all of them
``empty``                 the text is NULL, empty or only whitespace
``not-text``              the text is a number, object, list or boolean
                          (JSON Lines), or the column is not a string (Parquet)
``invalid-record``        a JSON Lines line that is not a JSON object
========================  ====================================================

Bad rows are never fatal: the caller counts them and works on the others.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pandas as pd  # type: ignore[import-untyped]
from pyspark.sql import Column, DataFrame, SparkSession, Window
from pyspark.sql import functions as F
from pyspark.sql.pandas.functions import pandas_udf
from pyspark.sql.types import StringType, StructField, StructType

__all__ = ["FORMATS", "PROBLEMS", "DocumentsError", "format_of", "good_documents",
           "output_exists", "read_documents", "write_parquet"]  # fmt: skip

FORMATS = ("parquet", "jsonl", "csv", "text")

PROBLEMS = ("missing-key", "duplicate-key", "empty", "not-text", "invalid-record")

_SUFFIXES = {
    ".parquet": "parquet", ".pq": "parquet",
    ".jsonl": "jsonl", ".ndjson": "jsonl", ".json": "jsonl",
    ".csv": "csv",
    ".txt": "text", ".text": "text",
}  # fmt: skip

TEXT_KEY_COLUMN = "path"
TEXT_TEXT_COLUMN = "text"


class DocumentsError(ValueError):
    """Input that cannot be read at all: an unknown format, a missing column."""


def format_of(paths: Sequence[str]) -> str:
    """The format named by the paths' suffix (a directory: of the files in it)."""
    found = set()
    for name in paths:
        path = Path(name)
        candidates = [path]
        if path.is_dir():
            candidates = [p for p in path.rglob("*") if p.is_file() and not p.name.startswith(
                (".", "_"))]  # fmt: skip
        for candidate in candidates:
            suffix = candidate.suffix.lower()
            if suffix in _SUFFIXES:
                found.add(_SUFFIXES[suffix])
    if len(found) != 1:
        raise DocumentsError(
            "cannot tell the format of the input from its names; give it (one of"
            f" {', '.join(FORMATS)})")  # fmt: skip
    return found.pop()


def _check_columns(df: DataFrame, key_column: str, text_column: str, what: str) -> None:
    for column in (key_column, text_column):
        if column not in df.columns:
            raise DocumentsError(f"{what} has no column {column!r} (it has:"
                                 f" {', '.join(df.columns) or 'none'})")  # fmt: skip


_JSON_TEXT = StructType([StructField("kind", StringType()), StructField("text", StringType())])


def _json_text_batch(text_field: str) -> object:
    def json_texts(lines: pd.Series) -> pd.DataFrame:
        kinds: list[str | None] = []
        texts: list[str | None] = []
        for line in lines.tolist():
            try:
                record = json.loads(line)
            except ValueError:
                kinds.append("invalid-record")
                texts.append(None)
                continue
            if not isinstance(record, dict):
                kinds.append("invalid-record")
                texts.append(None)
                continue
            value = record.get(text_field)
            if value is None or isinstance(value, str):
                kinds.append(None)
                texts.append(value)
            else:
                kinds.append("not-text")
                texts.append(None)
        return pd.DataFrame({"kind": kinds, "text": texts}, index=lines.index)

    return json_texts


def _read_jsonl(spark: SparkSession, paths: list[str], key_column: str,
                text_column: str) -> DataFrame:  # fmt: skip
    inferred = spark.read.json(paths)
    _check_columns(inferred, key_column, text_column, "the JSON Lines input")
    key_field = inferred.schema[key_column]
    lines = spark.read.text(paths).where(F.trim("value") != "")
    udf = pandas_udf(_json_text_batch(text_column), _JSON_TEXT)  # type: ignore[call-overload]
    parsed = lines.select(
        F.from_json("value", StructType([key_field])).alias("record"), udf("value").alias("t"))
    return parsed.select(F.col("record").getField(key_column).alias(key_column),
                         F.col("t.text").alias(text_column),
                         F.col("t.kind").alias("problem"))  # fmt: skip


def _read_csv(spark: SparkSession, paths: list[str], key_column: str,
              text_column: str) -> DataFrame:  # fmt: skip
    options = {"header": "true", "multiLine": "true", "escape": '"'}
    inferred = spark.read.options(**options, inferSchema="true").csv(paths)
    _check_columns(inferred, key_column, text_column, "the CSV input")
    schema = StructType([
        field if field.name == key_column else StructField(field.name, StringType())
        for field in inferred.schema.fields
    ])  # fmt: skip
    read = spark.read.options(**options).schema(schema).csv(paths)
    return read.select(key_column, text_column, F.lit(None).cast(StringType()).alias("problem"))


def _read_parquet(spark: SparkSession, paths: list[str], key_column: str,
                  text_column: str) -> DataFrame:  # fmt: skip
    read = spark.read.parquet(*paths)
    _check_columns(read, key_column, text_column, "the Parquet input")
    if isinstance(read.schema[text_column].dataType, StringType):
        return read.select(key_column, text_column,
                           F.lit(None).cast(StringType()).alias("problem"))  # fmt: skip
    not_text = F.when(F.col(text_column).isNotNull(), F.lit("not-text"))
    return read.select(key_column, F.lit(None).cast(StringType()).alias(text_column),
                       not_text.alias("problem"))  # fmt: skip


def _read_text(spark: SparkSession, paths: list[str], key_column: str,
               text_column: str) -> DataFrame:  # fmt: skip
    # Spark's file sources skip files of 0 bytes: they are not rows at all.
    read = spark.read.format("binaryFile").option("recursiveFileLookup", "true").load(paths)
    return read.select(F.col("path").alias(key_column),
                       F.decode("content", "UTF-8").alias(text_column),
                       F.lit(None).cast(StringType()).alias("problem"))  # fmt: skip


def read_documents(spark: SparkSession, paths: str | Sequence[str], key_column: str | None = None,
                   text_column: str | None = None, format: str | None = None) -> DataFrame:
    """Every row of the input: ``key_column``, ``text_column`` and ``problem``.

    ``format`` is one of :data:`FORMATS` (by default told by the names'
    suffixes).  Parquet, JSON Lines and CSV files are records whose
    ``key_column`` and ``text_column`` hold the key and the text; the key
    keeps its type (Parquet's, or as Spark infers it from JSON or CSV).  A
    text file is one document: its key is its path (column ``path`` unless
    ``key_column`` names another) and its text the whole file (``text``).
    ``problem`` is NULL for a good document, else one of :data:`PROBLEMS`.
    """
    listed = [paths] if isinstance(paths, str) else list(paths)
    if not listed:
        raise DocumentsError("no input")
    chosen = format or format_of(listed)
    if chosen not in FORMATS:
        raise DocumentsError(f"unknown format {chosen!r}: use one of {', '.join(FORMATS)}")
    if chosen == "text":
        key_column = key_column or TEXT_KEY_COLUMN
        text_column = text_column or TEXT_TEXT_COLUMN
    if not key_column or not text_column:
        raise DocumentsError(f"{chosen} input needs the key column and the text column named")
    if key_column == text_column:
        raise DocumentsError(f"the key and the text cannot both be column {key_column!r}")
    reader = {"parquet": _read_parquet, "jsonl": _read_jsonl, "csv": _read_csv,
              "text": _read_text}[chosen]  # fmt: skip
    read = reader(spark, listed, key_column, text_column)
    key, text = F.col(key_column), F.col(text_column)
    repeated = F.count(F.lit(1)).over(Window.partitionBy(key_column)) > 1
    empty = text.isNull() | text.rlike(r"(?U)^\s*$")
    problem: Column = (F.when(F.col("problem").isNotNull(), F.col("problem"))
                       .when(key.isNull(), F.lit("missing-key"))
                       .when(repeated, F.lit("duplicate-key"))
                       .when(empty, F.lit("empty")))  # fmt: skip
    return read.select(key_column, text_column, problem.alias("problem"))


def good_documents(documents: DataFrame) -> DataFrame:
    """The rows of :func:`read_documents` without a problem, without that column."""
    return documents.where(F.col("problem").isNull()).drop("problem")


def output_exists(spark: SparkSession, path: str) -> bool:
    """Whether ``path`` exists, on whatever file system Spark reaches it through."""
    jvm: Any = spark.sparkContext._jvm
    hadoop: Any = spark.sparkContext._jsc.hadoopConfiguration()
    target = jvm.org.apache.hadoop.fs.Path(path)
    return bool(target.getFileSystem(hadoop).exists(target))


def write_parquet(df: DataFrame, path: str, overwrite: bool = False) -> None:
    """Write ``df`` as Parquet to the directory ``path`` (refused if it exists unless
    ``overwrite``)."""
    df.write.mode("overwrite" if overwrite else "errorifexists").parquet(path)
