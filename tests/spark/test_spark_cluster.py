"""``nearsim spark dedup`` on a Spark standalone cluster: a master and two workers as processes
of their own (nearsim.spark.standalone, loopback only), executors whose Python is a new
environment made from the package's wheel and shipped with ``--archives``, and the groups
PostgreSQL gives on the same documents of the evaluation corpus."""

from __future__ import annotations

import json
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pyarrow.parquet as pq
import pytest
from psycopg import sql

from benchmarks.corpus import build_corpus
from nearsim.spark import standalone
from nearsim.spark.runtime import submitted_master

from tables import enabled_table

ROOT = Path(__file__).resolve().parents[2]
ENV_NAME = "env"
SMALL = ["--executor-memory", "512m", "--conf", "spark.sql.shuffle.partitions=4",
         "--conf", "spark.ui.enabled=false"]  # fmt: skip
TIMEOUT = 900


@pytest.fixture(scope="module")
def executor_python(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The executors' Python: a new virtual environment with the wheel of python_client and
    its executors' extra, nothing else."""
    directory = tmp_path_factory.mktemp("ship")
    wheel = standalone.build_wheel(ROOT / "python_client", directory)
    assert wheel.name.startswith("nearsim-")
    return standalone.make_environment(directory / "nearsim-env",
                                       [f"{wheel}[spark-executors]"])  # fmt: skip


@pytest.fixture(scope="module")
def executor_environment(executor_python: Path) -> Path:
    """That environment packed for ``--archives``."""
    home = executor_python.parent.parent
    return standalone.pack_environment(home, home.with_name("nearsim-env.tar.gz"))


@pytest.fixture(scope="module")
def cluster() -> Iterator[standalone.Cluster]:
    with standalone.start(workers=2, cores=1, memory="1g") as running:
        yield running


@pytest.fixture(scope="module")
def evaluation_corpus(database: str, tmp_path_factory: pytest.TempPathFactory
                      ) -> Iterator[tuple[str, Path]]:  # fmt: skip
    """The small evaluation corpus in an enabled table ``(id bigint, body text)`` and as
    JSON Lines ``{"id", "body"}``."""
    documents = build_corpus("small")
    path = tmp_path_factory.mktemp("corpus") / "corpus.jsonl"
    with path.open("w", encoding="utf-8") as out:
        for number, document in enumerate(documents, 1):
            out.write(json.dumps({"id": number, "body": document.text}) + "\n")
    table = f"cluster_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(database, autocommit=True) as conn:
        enabled_table(conn, table, {number: document.text
                                    for number, document in enumerate(documents, 1)})
    yield table, path
    with psycopg.connect(database, autocommit=True) as conn:
        conn.execute(sql.SQL("DROP TABLE {} CASCADE").format(sql.Identifier(table)))


def postgresql_groups(database: str, function: str, table: str) -> list[tuple[str, str]]:
    with psycopg.connect(database) as conn:
        rows = conn.execute(sql.SQL("SELECT key, cluster FROM {}").format(sql.SQL(function)),
                            [table]).fetchall()  # fmt: skip
    return sorted((str(key), str(cluster)) for key, cluster in rows)


def spark_groups(output: Path) -> list[tuple[str, str]]:
    table = pq.read_table(output)
    assert table.column_names == ["id", "cluster", "pivot"]
    assert table.column("pivot").null_count == table.num_rows
    keys, clusters = table.column("id").to_pylist(), table.column("cluster").to_pylist()
    return sorted((str(key), str(cluster)) for key, cluster in zip(keys, clusters, strict=True))


def applications(cluster: standalone.Cluster) -> dict[str, dict[str, Any]]:
    return {app["id"]: app for app in cluster.applications()}


def test_submitted_master_is_read_from_pyspark_submit_args() -> None:
    assert submitted_master("--master spark://127.0.0.1:7077 pyspark-shell") == (
        "spark://127.0.0.1:7077")
    assert submitted_master("--archives a.tar#env --master=yarn pyspark-shell") == "yarn"
    assert submitted_master("--conf spark.master=local[3] pyspark-shell") == "local[3]"
    assert submitted_master("--driver-memory 2g pyspark-shell") is None
    assert submitted_master("--master 'unclosed pyspark-shell") is None


def test_bad_cluster_and_environment_arguments_are_refused_naming_them(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="at least one worker of one core, not 0 of 1"):
        standalone.start(workers=0)
    (tmp_path / "env").mkdir()
    with pytest.raises(ValueError, match=r"not a \.tar\.gz or \.tgz archive: '.*env\.tar'"):
        standalone.pack_environment(tmp_path / "env", tmp_path / "env.tar")
    with pytest.raises(ValueError, match=r"not a virtual environment: '.*env' has no pyvenv\.cfg"):
        standalone.pack_environment(tmp_path / "env", tmp_path / "env.tar.gz")
    with pytest.raises(ValueError, match="no requirements"):
        standalone.make_environment(tmp_path / "other", [])
    assert not (tmp_path / "env.tar.gz").exists() and not (tmp_path / "other").exists()


def test_dedup_under_spark_submit_on_a_standalone_cluster_is_nearsim_clusters_verified(
        database: str, cluster: standalone.Cluster, executor_environment: Path,
        evaluation_corpus: tuple[str, Path], tmp_path: Path) -> None:  # fmt: skip
    """spark-submit --master spark://... with the packed environment as the executors' Python:
    the executors import nearsim from that environment alone, and the groups are
    nearsim_clusters_verified(tbl, 0.8, 's_r')'s."""
    table, source = evaluation_corpus
    job_file = subprocess.run(
        [sys.executable, "-m", "nearsim.client.cli", "spark", "job-file"],
        capture_output=True, text=True, check=True).stdout.strip()  # fmt: skip
    probe, output = tmp_path / "probe.json", tmp_path / "groups.parquet"
    before = set(applications(cluster))
    ran = subprocess.run(
        [str(standalone.spark_script("spark-submit")), "--master", cluster.master_url,
         "--driver-memory", "1g", *SMALL,
         "--archives", f"{executor_environment}#{ENV_NAME}",
         "--conf", f"spark.pyspark.python=./{ENV_NAME}/bin/python",
         "--conf", f"spark.pyspark.driver.python={sys.executable}",
         str(Path(__file__).with_name("cluster_driver.py")), str(probe), job_file,
         "dedup", str(source), "--key-column", "id", "--text-column", "body", "-s", "0.8",
         "-o", str(output), "--json"],
        capture_output=True, text=True, env=cluster.driver_environment(), timeout=TIMEOUT,
        check=False)  # fmt: skip
    assert ran.returncode == 0, ran.stderr[-4000:]
    executors = json.loads(probe.read_text())
    assert executors
    for module, python, directory in executors:
        environment = Path(directory) / ENV_NAME
        assert python == str(environment / "bin" / "python")
        assert module == str(environment / "lib" / "python3.11" / "site-packages" / "nearsim"
                             / "__init__.py")  # fmt: skip
        assert any(Path(directory).is_relative_to(work) for work in cluster.worker_directories)
        assert not Path(module).resolve().is_relative_to(ROOT)
    (new,) = set(applications(cluster)) - before
    assert applications(cluster)[new]["state"] == "FINISHED"
    expected = postgresql_groups(database, "nearsim_clusters_verified(%s, 0.8, 's_r')",
                                table)
    assert len(expected) > 100
    assert spark_groups(output) == expected
    summary = json.loads(ran.stdout)
    assert summary["grouped_documents"] == len(expected)
    assert summary["groups"] == len({group for _, group in expected})


def test_dedup_command_takes_its_master_from_pyspark_submit_args(
        database: str, cluster: standalone.Cluster, executor_python: Path,
        evaluation_corpus: tuple[str, Path], tmp_path: Path) -> None:  # fmt: skip
    """nearsim spark dedup started as a program of its own, without --master: the master and
    the executors' memory come from PYSPARK_SUBMIT_ARGS, the executors' Python (installed
    where they run, here the same machine) from PYSPARK_PYTHON; the groups are
    nearsim_clusters(tbl, 6)'s."""
    table, source = evaluation_corpus
    output = tmp_path / "groups.parquet"
    environment = cluster.driver_environment()
    environment["PYSPARK_PYTHON"] = str(executor_python)
    environment["PYSPARK_SUBMIT_ARGS"] = " ".join([
        "--master", cluster.master_url, "--executor-memory", "512m", "pyspark-shell"])
    before = set(applications(cluster))
    ran = subprocess.run(
        [sys.executable, "-m", "nearsim.client.cli", "spark", "dedup", str(source),
         "--key-column", "id", "--text-column", "body", "--hamming", "-k", "6",
         "--driver-memory", "1g", "--spark-conf", "spark.sql.shuffle.partitions=4",
         "--spark-conf", "spark.ui.enabled=false", "-o", str(output), "--json"],
        capture_output=True, text=True, env=environment, timeout=TIMEOUT,
        check=False)  # fmt: skip
    assert ran.returncode == 0, ran.stderr[-4000:]
    (new,) = set(applications(cluster)) - before
    assert applications(cluster)[new]["name"] == "nearsim"
    expected = postgresql_groups(database, "nearsim_clusters(%s, 6)", table)
    assert len(expected) > 100
    assert spark_groups(output) == expected
    assert json.loads(ran.stdout)["groups"] == len({group for _, group in expected})
