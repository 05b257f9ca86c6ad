"""A Spark session for nearsim: the caller's master, or local threads."""

from __future__ import annotations

import os
import sys

from pyspark.sql import SparkSession

__all__ = ["session"]


def session(master: str | None = None, app_name: str = "nearsim",
            config: dict[str, str] | None = None) -> SparkSession:  # fmt: skip
    """The active session, or a new one on ``master`` (``local[*]`` unless spark-submit set one).

    Python workers run the interpreter this program runs in unless
    ``PYSPARK_PYTHON`` says otherwise, so that a local session finds the
    ``nearsim`` package of this environment.
    """
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    builder = SparkSession.builder.appName(app_name)
    if master is not None:
        builder = builder.master(master)
    elif "spark.master" not in (config or {}) and "PYSPARK_GATEWAY_PORT" not in os.environ:
        builder = builder.master("local[*]")  # not under spark-submit, which sets the master
    for name, value in (config or {}).items():
        builder = builder.config(name, value)
    return builder.getOrCreate()
