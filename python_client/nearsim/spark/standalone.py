"""A Spark standalone cluster on this machine, and a Python environment packed for its executors.

:func:`start` runs a Spark master and its workers as processes of their
own (``spark-class org.apache.spark.deploy.master.Master`` and
``...deploy.worker.Worker`` from the PySpark installation), listening on
the loopback interface only, on free ports, with their work and log
directories in one directory (a new temporary one by default); the
returned :class:`Cluster` stops them all, executors included, and removes
that directory.  It is what the tests and ``make bench-spark`` run jobs
against, and what ``scripts/spark_cluster.py`` starts for a user; on real
machines the same processes are started by Spark's ``sbin/start-master.sh``
and ``sbin/start-worker.sh`` (docs/SPARK.md, "Running on a cluster").

:func:`build_wheel` builds the package's wheel from its source;
:func:`make_environment` makes the executors' Python: a new virtual
environment with the given requirements (the nearsim wheel and its
``spark-executors`` extra); :func:`pack_environment` packs it as
``.tar.gz``, the archive that ships nearsim to the executors, for
``spark-submit --archives ENV.tar.gz#env --conf spark.pyspark.python=./env/bin/python``.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tarfile
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any

__all__ = ["Cluster", "ClusterError", "build_wheel", "free_port", "make_environment",
           "pack_environment", "spark_home", "spark_script", "start"]  # fmt: skip

LOOPBACK = "127.0.0.1"
START_SECONDS = 120.0
STOP_SECONDS = 30.0
DAEMON_MEMORY = "256m"
"""Heap of the master's and each worker's own JVM (not of the executors): they only schedule."""

# Variables of the caller's Python that must not reach the executors' Python
# through the workers' environment (Spark passes the executor's PYTHONPATH on
# to the Python workers it starts).
_NOT_INHERITED = ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV", "PYSPARK_PYTHON",
                  "PYSPARK_DRIVER_PYTHON", "PYSPARK_SUBMIT_ARGS", "PYSPARK_GATEWAY_PORT",
                  "PYSPARK_GATEWAY_SECRET", "SPARK_CONF_DIR")  # fmt: skip


class ClusterError(RuntimeError):
    """The cluster did not start (a process ended, or the workers did not register), or the
    executors' wheel or environment could not be made (pip failed)."""


def spark_home() -> Path:
    """The Spark installation of PySpark (``SPARK_HOME`` if set)."""
    given = os.environ.get("SPARK_HOME")
    if given:
        return Path(given)
    import pyspark

    return Path(pyspark.__file__).resolve().parent


def spark_script(name: str) -> Path:
    """One of Spark's launch scripts (``spark-submit``, ``spark-class``) of :func:`spark_home`."""
    return spark_home() / "bin" / name


def free_port(host: str = LOOPBACK) -> int:
    """A TCP port nothing listens on now on ``host``."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind((host, 0))
        return int(probe.getsockname()[1])


@dataclass
class Cluster:
    """A running standalone cluster: its master's URL, its processes and its directory."""

    master_url: str
    """``spark://127.0.0.1:PORT``: the ``--master`` of jobs."""
    web_url: str
    """The master's web UI (``/json/`` gives its state)."""
    host: str
    directory: Path
    worker_directories: list[Path]
    processes: list[subprocess.Popen[bytes]] = field(default_factory=list)
    remove_directory: bool = True

    def state(self) -> dict[str, Any]:
        """The master's state: its workers, running and completed applications (``/json/``)."""
        with urllib.request.urlopen(f"{self.web_url}/json/", timeout=10) as response:
            found: dict[str, Any] = json.load(response)
        return found

    def alive_workers(self) -> int:
        return sum(1 for worker in self.state().get("workers", [])
                   if worker.get("state") == "ALIVE")  # fmt: skip

    def applications(self) -> list[dict[str, Any]]:
        """Every application the master has run or runs (``activeapps`` and ``completedapps``)."""
        state = self.state()
        return [*state.get("activeapps", []), *state.get("completedapps", [])]

    def driver_conf(self) -> dict[str, str]:
        """Settings of a driver on this machine for this cluster: its master, and the driver
        listening on the cluster's host (the executors connect back to it)."""
        return {"spark.master": self.master_url, "spark.driver.host": self.host,
                "spark.driver.bindAddress": self.host}  # fmt: skip

    def driver_environment(self, base: Mapping[str, str] | None = None) -> dict[str, str]:
        """``base`` (by default this process's environment) with ``SPARK_LOCAL_IP``, for a
        driver (spark-submit) that is to listen on the cluster's host only."""
        environment = dict(os.environ if base is None else base)
        environment["SPARK_LOCAL_IP"] = self.host
        return environment

    def log(self, name: str) -> str:
        """The output of one of the cluster's processes (``master``, ``worker-1``, ...)."""
        path = self.directory / "logs" / f"{name}.log"
        return path.read_text(errors="replace") if path.exists() else ""

    def stop(self, timeout: float = STOP_SECONDS) -> None:
        """Stop the workers (which end their executors), then the master; remove the directory."""
        for process in reversed(self.processes):  # workers first
            _terminate(process, timeout)
        self.processes.clear()
        if self.remove_directory:
            shutil.rmtree(self.directory, ignore_errors=True)

    def __enter__(self) -> Cluster:
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 trace: TracebackType | None) -> None:  # fmt: skip
        self.stop()


def _terminate(process: subprocess.Popen[bytes], timeout: float) -> None:
    """SIGTERM to the process's own group (the JVM and the executors it started), then SIGKILL."""
    if process.poll() is not None:
        return
    try:
        os.killpg(process.pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    try:
        process.wait(timeout)
    except subprocess.TimeoutExpired:
        try:
            os.killpg(process.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        process.wait()


def _daemon_environment(host: str, directory: Path, daemon_memory: str) -> dict[str, str]:
    environment = {name: value for name, value in os.environ.items()
                   if name not in _NOT_INHERITED}  # fmt: skip
    environment.update({
        "SPARK_HOME": str(spark_home()),
        "SPARK_LOCAL_IP": host,
        "SPARK_DAEMON_MEMORY": daemon_memory,
        "SPARK_LOG_DIR": str(directory / "logs"),
        "SPARK_PID_DIR": str(directory),
        "SPARK_CONF_DIR": str(directory / "conf"),
        "SPARK_LOCAL_DIRS": str(directory / "local"),  # the executors' shuffle and scratch
    })  # fmt: skip
    return environment


def _launch(name: str, arguments: list[str], environment: dict[str, str],
            directory: Path) -> subprocess.Popen[bytes]:  # fmt: skip
    log = (directory / "logs" / f"{name}.log").open("wb")
    try:
        return subprocess.Popen([str(spark_script("spark-class")), *arguments],
                                stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                env=environment, cwd=directory,
                                start_new_session=True)  # fmt: skip
    finally:
        log.close()


def start(workers: int = 2, cores: int = 1, memory: str = "1g", *,
          directory: str | os.PathLike[str] | None = None, host: str = LOOPBACK,
          daemon_memory: str = DAEMON_MEMORY,
          timeout: float = START_SECONDS) -> Cluster:  # fmt: skip
    """A master and ``workers`` workers of ``cores`` cores and ``memory`` each, running.

    Every process listens on ``host`` (the loopback address by default) on
    ports free when it starts; their logs go to ``DIRECTORY/logs``, each
    worker's executors run in ``DIRECTORY/worker-N``.  Returns once every
    worker has registered with the master, or raises :class:`ClusterError`
    (with the end of the failed process's log) after stopping what started.
    Without ``directory`` a temporary one is made and removed by
    :meth:`Cluster.stop`.
    """
    if workers < 1 or cores < 1:
        raise ValueError(f"a cluster needs at least one worker of one core, not {workers} of"
                         f" {cores}")
    made = directory is None
    root = Path(tempfile.mkdtemp(prefix="nearsim-spark-")) if made else Path(directory or ".")
    (root / "logs").mkdir(parents=True, exist_ok=True)
    (root / "conf").mkdir(exist_ok=True)
    (root / "local").mkdir(exist_ok=True)
    environment = _daemon_environment(host, root, daemon_memory)
    port, web_port = free_port(host), free_port(host)
    cluster = Cluster(master_url=f"spark://{host}:{port}", web_url=f"http://{host}:{web_port}",
                      host=host, directory=root, worker_directories=[],
                      remove_directory=made)  # fmt: skip
    try:
        cluster.processes.append(_launch("master", [
            "org.apache.spark.deploy.master.Master", "--host", host, "--port", str(port),
            "--webui-port", str(web_port)], environment, root))  # fmt: skip
        _wait(cluster, lambda: _answers(cluster), "the master", timeout)
        for number in range(1, workers + 1):
            work = root / f"worker-{number}"
            work.mkdir(exist_ok=True)
            cluster.worker_directories.append(work)
            cluster.processes.append(_launch(f"worker-{number}", [
                "org.apache.spark.deploy.worker.Worker", "--host", host,
                "--cores", str(cores), "--memory", memory, "--work-dir", str(work),
                "--webui-port", str(free_port(host)), cluster.master_url], environment, root))
        _wait(cluster, lambda: cluster.alive_workers() == workers,
              f"{workers} workers to register", timeout)  # fmt: skip
    except BaseException:
        cluster.stop()
        raise
    return cluster


def _answers(cluster: Cluster) -> bool:
    try:
        cluster.state()
    except (OSError, urllib.error.URLError, ValueError):
        return False
    return True


def _wait(cluster: Cluster, ready: Any, what: str, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while True:
        for number, process in enumerate(cluster.processes):
            if process.poll() is not None:
                name = "master" if number == 0 else f"worker-{number}"
                tail = "\n".join(cluster.log(name).splitlines()[-20:])
                raise ClusterError(f"the Spark {name} ended with status {process.returncode}"
                                   f" while waiting for {what}:\n{tail}")
        try:
            if ready():
                return
        except (OSError, urllib.error.URLError, ValueError):
            pass
        if time.monotonic() > deadline:
            raise ClusterError(f"timed out after {timeout:.0f} s waiting for {what}"
                               f" (logs in {cluster.directory / 'logs'})")
        time.sleep(0.5)


def build_wheel(source: str | os.PathLike[str], directory: str | os.PathLike[str]) -> Path:
    """The wheel of the project in ``source`` (``python_client``), built into ``directory``.

    Built from a copy of the source, so that nothing (``build/``,
    ``*.egg-info``) is written into the source tree.
    """
    target = Path(directory)
    target.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="nearsim-wheel-") as scratch:
        copy = Path(scratch) / "source"
        shutil.copytree(source, copy, ignore=shutil.ignore_patterns(
            "build", "dist", "*.egg-info", "__pycache__", ".mypy_cache"))  # fmt: skip
        built = subprocess.run(
            [sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps",
             "--disable-pip-version-check", "-w", scratch, str(copy)],
            capture_output=True, text=True, check=False)  # fmt: skip
        if built.returncode != 0:
            raise ClusterError(f"pip wheel {source} failed:\n{built.stderr.strip()[-2000:]}")
        wheels = sorted(Path(scratch).glob("*.whl"))
        if len(wheels) != 1:
            raise ClusterError(f"pip wheel {source} made {len(wheels)} wheels, not one")
        return Path(shutil.copy2(wheels[0], target / wheels[0].name))


def make_environment(directory: str | os.PathLike[str], requirements: Sequence[str], *,
                     python: str | None = None,
                     pip_options: Sequence[str] = ()) -> Path:  # fmt: skip
    """A new virtual environment in ``directory`` with ``requirements`` installed: its Python.

    ``requirements`` are what ``pip install`` takes (the nearsim wheel with
    the executors' extra: ``dist/nearsim-0.4.0-py3-none-any.whl[spark-executors]``).
    The environment is made with ``python`` (by default the interpreter this
    one runs on, outside any virtual environment) and refers to it by its
    path, as venv-pack's do: it runs where that interpreter is at the same
    path (this machine, or nodes of the same image).  Nothing of this
    process's ``PYTHONPATH`` or virtual environment is seen by pip (a nearsim
    source tree on the path would count as installed, and pip would leave
    the wheel out).  Nothing is compiled to bytecode at install time (a
    fifth less to pack, ship and unpack for each application; the executors
    compile what they import).
    """
    if not requirements:
        raise ValueError("no requirements to install into the executors' environment")
    home = Path(directory)
    base = python or getattr(sys, "_base_executable", None) or sys.executable
    clean = {name: value for name, value in os.environ.items() if name not in _NOT_INHERITED}
    subprocess.run([base, "-m", "venv", str(home)], check=True, env=clean)
    installed = subprocess.run(
        [str(home / "bin" / "python"), "-m", "pip", "install", "--quiet", "--no-compile",
         "--disable-pip-version-check", *pip_options, *requirements],
        capture_output=True, text=True, check=False, env=clean)  # fmt: skip
    if installed.returncode != 0:
        raise ClusterError(f"pip install {' '.join(requirements)} failed:\n"
                           f"{installed.stderr.strip()[-2000:]}")  # fmt: skip
    return home / "bin" / "python"


def pack_environment(environment: str | os.PathLike[str],
                     archive: str | os.PathLike[str]) -> Path:  # fmt: skip
    """The virtual environment ``environment`` packed as ``archive``, for ``--archives``.

    ``archive`` ends in ``.tar.gz`` or ``.tgz``: Spark unpacks those with
    ``tar``, which keeps the environment's link to its interpreter (a plain
    ``.tar`` it unpacks itself, refusing that link).  The archive unpacks
    into the environment's top directory (``bin/python`` at its root), as
    ``--archives ARCHIVE#env`` with ``spark.pyspark.python=./env/bin/python``
    expects.
    """
    home, target = Path(environment), Path(archive)
    if not target.name.endswith((".tar.gz", ".tgz")):
        raise ValueError(f"not a .tar.gz or .tgz archive: {str(target)!r}")
    if not (home / "pyvenv.cfg").is_file():
        raise ValueError(f"not a virtual environment: {str(home)!r} has no pyvenv.cfg")
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_name(target.name + ".partial")
    with tarfile.open(partial, "w:gz", compresslevel=1) as packed:
        for entry in sorted(home.iterdir()):
            packed.add(entry, arcname=entry.name)
    partial.replace(target)
    return target
