"""The deduplicated corpus out of ``nearsim spark dedup``: the survivors and removed -> kept.

From the groups :func:`nearsim.spark.dedup` finds, one document of each
group survives, ranked by the :class:`~nearsim.core.survivors.Keep` policy
that ``nearsim dedup`` uses in PostgreSQL (its terms, mirrored here as
Spark orderings: the same survivors, which the tests check on one input);
every good document without a near-duplicate survives too.  The survivors
are the input's rows with all of their columns, written as Parquet, JSON
Lines or CSV (told by the path's suffix); the mapping is one row per
removed document, ``removed`` and ``kept``, under the key's type.
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame, SparkSession, Window
from pyspark.sql import functions as F
from pyspark.sql.types import ArrayType, MapType, StringType, StructField, StructType

from ..core.survivors import Keep, SortTerm
from .documents import DocumentsError, format_of

__all__ = ["OUTPUT_FORMATS", "check_field", "output_format", "read_records", "removed_keys",
           "survivor_rows", "write_records"]  # fmt: skip

OUTPUT_FORMATS = ("parquet", "jsonl", "csv")
_CLUSTER, _RANK, _FIELD = "__nearsim_cluster", "__nearsim_rank", "__nearsim_field"


def output_format(path: str) -> str:
    """Parquet, JSON Lines or CSV, by the path's suffix (Parquet without one)."""
    lower = path.rstrip("/").lower()
    if lower.endswith((".jsonl", ".ndjson", ".json")):
        return "jsonl"
    if lower.endswith(".csv"):
        return "csv"
    return "parquet"


def read_records(spark: SparkSession, paths: list[str], format: str | None,
                 key_column: str) -> DataFrame | None:  # fmt: skip
    """The input's rows with all of their columns (None for text files: a document
    is its path and text, as :func:`~nearsim.spark.documents.read_documents` gives it).

    Read as :func:`~nearsim.spark.documents.read_documents` reads them, so that
    the key has the same type: JSON Lines as Spark infers them, CSV fields as
    strings but the key, Parquet as it is.
    """
    chosen = format or format_of(paths)
    if chosen == "jsonl":
        read = spark.read.json(paths)
        return read.drop("_corrupt_record") if "_corrupt_record" in read.columns else read
    if chosen == "csv":
        options = {"header": "true", "multiLine": "true", "escape": '"'}
        inferred = spark.read.options(**options, inferSchema="true").csv(paths)
        schema = StructType([
            field if field.name == key_column else StructField(field.name, StringType())
            for field in inferred.schema.fields
        ])  # fmt: skip
        return spark.read.options(**options).schema(schema).csv(paths)
    if chosen == "parquet":
        return spark.read.parquet(*paths)
    return None


def _order(term: SortTerm, key: str, text: str) -> Column:
    """A term of the policy as Spark orders it: strings by code point (UTF-8 bytes),
    numbers as numbers, false before true, NULLs last, as in PostgreSQL."""
    column = {"key": F.col(key), "length": F.length(F.col(text)),
              "field": F.col(_FIELD)}[term.what]  # fmt: skip
    return column.desc_nulls_last() if term.descending else column.asc_nulls_last()


def check_field(records: DataFrame | None, keep: Keep, key: str, text: str) -> None:
    """DocumentsError naming the columns if ``newest:FIELD`` names none of the input's."""
    if keep.field is not None and (records is None or keep.field not in records.columns):
        have = ", ".join(records.columns) if records is not None else f"{key}, {text}"
        raise DocumentsError(f"the input has no column {keep.field!r} (--keep {keep});"
                             f" it has: {have}")


def removed_keys(groups: DataFrame, documents: DataFrame, records: DataFrame | None,
                 key: str, text: str, keep: Keep) -> DataFrame:  # fmt: skip
    """``(removed, kept)``: each grouped document but its group's survivor, and the survivor.

    ``groups`` has the key and ``cluster``; ``documents`` the key and the
    text of the good documents; ``records`` the input's rows, for the field
    of ``newest:FIELD``.
    """
    members = groups.select(key, F.col("cluster").alias(_CLUSTER)).join(
        documents.select(key, text), key)
    check_field(records, keep, key, text)
    if keep.field is not None:
        assert records is not None
        members = members.join(records.select(key, F.col(keep.field).alias(_FIELD)), key, "left")
    ranking = Window.partitionBy(_CLUSTER).orderBy(*(_order(term, key, text)
                                                     for term in keep.terms()))  # fmt: skip
    ranked = members.withColumn(_RANK, F.row_number().over(ranking))
    kept = ranked.where(F.col(_RANK) == 1).select(_CLUSTER, F.col(key).alias("kept"))
    return (ranked.where(F.col(_RANK) > 1)
            .select(F.col(key).alias("removed"), _CLUSTER)
            .join(kept, _CLUSTER).select("removed", "kept"))  # fmt: skip


def survivor_rows(documents: DataFrame, records: DataFrame | None, removed: DataFrame,
                  key: str) -> DataFrame:  # fmt: skip
    """The good documents that are not removed, as the input's rows with all their columns."""
    kept = documents.select(key).join(removed.select(F.col("removed").alias(key)), key,
                                      "left_anti")  # fmt: skip
    if records is None:
        return documents.join(kept, key, "left_semi")
    return records.join(kept, key, "left_semi")


def write_records(df: DataFrame, path: str, overwrite: bool = False) -> None:
    """``df`` to the directory ``path`` as Parquet, JSON Lines or CSV (:func:`output_format`).

    CSV has no nested values: structs, arrays and maps are written as their
    JSON text there.
    """
    writer = df.write.mode("overwrite" if overwrite else "errorifexists")
    chosen = output_format(path)
    if chosen == "jsonl":
        writer.json(path)
    elif chosen == "csv":
        flat = df.select(*(
            F.to_json(F.col(field.name)).alias(field.name)
            if isinstance(field.dataType, (StructType, ArrayType, MapType)) else F.col(field.name)
            for field in df.schema.fields))  # fmt: skip
        flat.write.mode("overwrite" if overwrite else "errorifexists").options(
            header="true", escape='"').csv(path)
    else:
        writer.parquet(path)
