"""Fingerprints of a DataFrame's texts, bit for bit those of SQL ``simhash(text, profile)``."""

from __future__ import annotations

from collections.abc import Callable

import pandas as pd  # type: ignore[import-untyped]
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql.pandas.functions import pandas_udf
from pyspark.sql.types import ArrayType, LongType, StringType, StructField, StructType

from ..core.profiles import canonical, simhash_many
from .shingles import fingerprints_and_sets

DEFAULT_PROFILE = "default/1"

SHINGLES_COLUMN = "_shingles"
"""A column of the distinct shingle hashes of the text, made with the fingerprint
(:func:`simhash_and_shingles`), which the exact S_R join takes instead of
hashing the texts again."""

_BOTH = StructType([StructField("si", LongType()),
                    StructField("shingles", ArrayType(LongType()))])  # fmt: skip


def _both_batch(texts: pd.Series) -> pd.DataFrame:
    """The body of the UDF: each text's default fingerprint and shingle set."""
    given = [None if text is None else str(text) for text in texts.tolist()]
    fingerprints, sets = fingerprints_and_sets(given)
    return pd.DataFrame({"si": pd.Series(fingerprints, dtype="Int64", index=texts.index),
                         "shingles": pd.Series(sets, dtype=object, index=texts.index)})


def simhash_and_shingles(text: Column | str) -> Column:
    """A struct column ``(si, shingles)``: the fingerprint of ``text`` with the default
    profile (as :func:`simhash_column`) and its distinct shingle hashes (as
    :func:`nearsim.spark.resemblance.shingle_hashes`), from one pass over the text."""
    udf = pandas_udf(_both_batch, _BOTH).asNondeterministic()  # type: ignore[call-overload]
    column = F.col(text) if isinstance(text, str) else text
    result: Column = udf(column.cast(StringType()))
    return result


def _simhash_batch(profile: str) -> Callable[[pd.Series], pd.Series]:
    """The body of the UDF: one Arrow batch of texts to their fingerprints."""

    def simhash_batch(texts: pd.Series) -> pd.Series:
        present = texts.notna().to_numpy()
        values: list[int | None] = [None] * len(texts)
        given = [str(text) for text in texts[present]]
        if given:
            fingerprints = simhash_many(given, profile)
            for index, value in zip(present.nonzero()[0].tolist(), fingerprints, strict=True):
                values[index] = value
        return pd.Series(values, dtype="Int64", index=texts.index)

    return simhash_batch


def simhash_column(text: Column | str, profile: str = DEFAULT_PROFILE) -> Column:
    """A column of the fingerprints of ``text`` (signed ``bigint``, NULL without features).

    The profile's name is checked here, on the driver, before any work.
    """
    name = canonical(profile)
    udf = pandas_udf(_simhash_batch(name), LongType())  # type: ignore[call-overload]
    column = F.col(text) if isinstance(text, str) else text
    result: Column = udf(column.cast(StringType()))
    return result


def fingerprints(
    df: DataFrame, text_column: str, profile: str = DEFAULT_PROFILE, output_column: str = "si"
) -> DataFrame:
    """``df`` with ``output_column``, the fingerprint of ``text_column`` with ``profile``.

    The values are SQL ``simhash(text, profile)``'s: the unsigned 64 bits in
    a signed ``bigint``, NULL for a NULL text and for a text without
    features (empty, whitespace, punctuation alone).  The work is a
    vectorised pandas UDF over :func:`nearsim.core.profiles.simhash_many`,
    so the executors need the ``nearsim`` package (docs/SPARK.md).
    """
    return df.withColumn(output_column, simhash_column(text_column, profile))
