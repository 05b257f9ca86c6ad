"""A Spark standalone cluster on this machine, and the executors' environment packed for it.

    .venv/bin/python scripts/spark_cluster.py run [--workers 2] [--cores 1] [--memory 1g]
    .venv/bin/python scripts/spark_cluster.py pack nearsim-env.tar.gz

``run`` starts a master and its workers (nearsim.spark.standalone: separate
processes on 127.0.0.1, free ports, logs and work directories in a
temporary directory), prints the master's URL and how to submit to it, and
stops them all at Ctrl-C (or SIGTERM).  ``pack`` builds the wheel of
python_client and packs a new virtual environment with it and its
``spark-executors`` extra, for ``--archives nearsim-env.tar.gz#env``.
docs/SPARK.md ("Running on a cluster") shows both in use.
"""

from __future__ import annotations

import argparse
import signal
import sys
import tempfile
import threading
from collections.abc import Sequence
from pathlib import Path

from nearsim.spark import standalone

ROOT = Path(__file__).resolve().parents[1]


def pack(archive: Path) -> None:
    with tempfile.TemporaryDirectory(prefix="nearsim-pack-") as directory:
        wheel = standalone.build_wheel(ROOT / "python_client", directory)
        home = Path(directory) / "env"
        standalone.make_environment(home, [f"{wheel}[spark-executors]"])
        standalone.pack_environment(home, archive)
    print(f"{archive}: --archives {archive}#env --conf spark.pyspark.python=./env/bin/python")


def run(workers: int, cores: int, memory: str) -> None:
    stopped = threading.Event()
    for name in (signal.SIGINT, signal.SIGTERM):
        signal.signal(name, lambda signum, frame: stopped.set())
    with standalone.start(workers, cores, memory) as cluster:
        print(f"master   {cluster.master_url}\nweb UI   {cluster.web_url}\n"
              f"logs     {cluster.directory / 'logs'}\n\n"
              f"SPARK_LOCAL_IP={cluster.host} spark-submit --master {cluster.master_url}"
              f" --conf spark.driver.host={cluster.host} ...\n\nCtrl-C stops the cluster.",
              flush=True)  # fmt: skip
        stopped.wait()
        print("stopping", flush=True)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="scripts/spark_cluster.py", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    commands = parser.add_subparsers(dest="command", required=True)
    running = commands.add_parser("run", help="start a master and workers until Ctrl-C")
    running.add_argument("--workers", type=int, default=2)
    running.add_argument("--cores", type=int, default=1, help="cores of each worker")
    running.add_argument("--memory", default="1g", help="memory of each worker's executors")
    packing = commands.add_parser("pack", help="pack the executors' environment")
    packing.add_argument("archive", type=Path, help="a path ending in .tar.gz")
    args = parser.parse_args(argv)
    try:
        if args.command == "pack":
            pack(args.archive)
        else:
            run(args.workers, args.cores, args.memory)
    except (standalone.ClusterError, ValueError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
