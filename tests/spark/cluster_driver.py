"""spark-submit's program in tests/spark/test_spark_cluster.py: where the executors' nearsim
comes from, then ``nearsim spark`` from its job file, in one application.

    spark-submit [options] cluster_driver.py PROBE.json JOB_FILE dedup ...

The executors' answers (``nearsim.__file__``, ``sys.executable``, their
working directory) are written to PROBE.json; then JOB_FILE (``nearsim
spark job-file``) runs as spark-submit's program with the arguments after
it, in the same session and so on the same executors.
"""

import json
import runpy
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from pyspark.sql import SparkSession


def where(rows: Iterator[Any]) -> Iterator[tuple[str, str, str]]:
    import os
    import sys

    import nearsim

    yield nearsim.__file__ or "", sys.executable, os.getcwd()


def main() -> None:
    probe, job_file, *arguments = sys.argv[1:]
    spark = SparkSession.builder.getOrCreate()
    found = spark.sparkContext.parallelize(range(4), 4).mapPartitions(where).collect()
    Path(probe).write_text(json.dumps(found))
    sys.argv[:] = [job_file, *arguments]
    runpy.run_path(job_file, run_name="__main__")


if __name__ == "__main__":
    main()
