"""Fingerprints of a DataFrame's texts, bit for bit those of SQL ``simhash(text, profile)``."""

from __future__ import annotations

from collections.abc import Callable

import pandas as pd  # type: ignore[import-untyped]
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql.pandas.functions import pandas_udf
from pyspark.sql.types import LongType, StringType

from ..core.profiles import canonical, simhash_many

DEFAULT_PROFILE = "default/1"


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
