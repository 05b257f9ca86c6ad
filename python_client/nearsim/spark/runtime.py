"""A Spark session for nearsim: the caller's master or local threads, quiet, sized, stoppable.

:func:`session` starts (or joins) the session the jobs run in.  When it
starts the driver's JVM itself (not under spark-submit, no session yet),
it also decides what can only be decided before that JVM starts:

- **Logging**: the driver logs with nearsim's log4j2 configuration
  (``log4j2.properties`` next to this module), at level ``ERROR`` unless
  ``log_level`` asks for more, so a normal run shows no Spark or Java log
  lines (no spill or memory warnings); the console progress bar is shown
  only on a terminal.
- **Memory**: ``driver_memory`` (``spark.driver.memory``), by default for
  a local master :func:`local_driver_memory`, a third of the machine's
  memory; the JVM's heap is fixed when it starts, so it is passed to the
  JVM's launch, never set later.  ``executor_memory``
  (``spark.executor.memory``) is for the executors of a cluster: in local
  mode the tasks run in the driver's JVM, whose memory is the driver's.

:func:`stop` ends the session and, when this process started the JVM,
waits for that JVM to exit (and kills it if it does not), so nothing is
left running after a command ends or is interrupted.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pyspark import SparkContext
from pyspark.sql import SparkSession

__all__ = ["LOG_LEVELS", "SHUFFLE_PARTITIONS_PER_LOCAL_CORE", "jvm_running", "local_cores",
           "local_driver_memory", "memory_size", "parse_conf", "session", "stop",
           "submitted_master"]  # fmt: skip

LOG_LEVELS = ("off", "fatal", "error", "warn", "info", "debug", "trace", "all")
DEFAULT_LOG_LEVEL = "error"
LOG_CONFIG = Path(__file__).resolve().with_name("log4j2.properties")

MIN_DRIVER_GIB = 1
MAX_DRIVER_GIB = 32
"""Above 32 GiB the JVM loses compressed object pointers: more memory holds less."""

JVM_EXIT_SECONDS = 30

SHUFFLE_PARTITIONS_PER_LOCAL_CORE = 4
"""A local master's shuffle partitions per core, unless set: Spark's 200 are
made for clusters, and on one machine each costs a task per stage (200
documents took 106 s on ``local[1]`` with 200 partitions, 40 s with 4)."""

_LOCAL = re.compile(r"^local(?:\[(\*|\d+)(?:,\s*\d+)?\])?$")

_SIZE = re.compile(r"^\s*(\d+)\s*([kmgtp]?)b?\s*$", re.IGNORECASE)


def memory_size(value: str) -> str:
    """``value`` as Spark takes a memory size (``512m``, ``4g``), or ValueError naming it."""
    match = _SIZE.match(value)
    if match is None or int(match.group(1)) == 0:
        raise ValueError(f"not a memory size: {value!r} (give a number and a unit, as 4g or"
                         " 512m)")
    return f"{int(match.group(1))}{(match.group(2) or 'b').lower()}"


def parse_conf(settings: list[str] | tuple[str, ...]) -> dict[str, str]:
    """``KEY=VALUE`` settings as a dict, or ValueError naming the one without ``=``."""
    config: dict[str, str] = {}
    for setting in settings:
        key, equals, value = setting.partition("=")
        if not equals or not key.strip():
            raise ValueError(f"not KEY=VALUE: {setting!r}")
        config[key.strip()] = value
    return config


def _physical_memory() -> int | None:
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return None


def local_driver_memory(physical: int | None = None) -> str:
    """The driver memory of a local master: a third of the machine's physical memory,
    in whole GiB, at least 1 and at most 32 (``1g`` when it cannot be told)."""
    total = _physical_memory() if physical is None else physical
    if not total:
        return f"{MIN_DRIVER_GIB}g"
    gib = total // 3 // (1 << 30)
    return f"{max(MIN_DRIVER_GIB, min(MAX_DRIVER_GIB, gib))}g"


def local_cores(master: str) -> int | None:
    """The cores of a local master (``local``: 1, ``local[N]`` and ``local[N,F]``: N,
    ``local[*]``: this machine's); None for any other master."""
    match = _LOCAL.match(master.strip())
    if match is None:
        return None
    if match.group(1) is None:
        return 1
    if match.group(1) == "*":
        return os.cpu_count() or 1
    return max(int(match.group(1)), 1)


def jvm_running() -> bool:
    """Whether this process has a JVM for Spark already (a session, or spark-submit's)."""
    return SparkContext._gateway is not None or "PYSPARK_GATEWAY_PORT" in os.environ


def _submit_args() -> str:
    return os.environ.get("PYSPARK_SUBMIT_ARGS", "")


def submitted_master(arguments: str | None = None) -> str | None:
    """The master that ``PYSPARK_SUBMIT_ARGS`` (or ``arguments``) names, if any.

    PySpark starts the driver's JVM with spark-submit and these arguments
    (``--master spark://host:7077 --archives env.tar.gz#env pyspark-shell``),
    so a master given there is the session's unless another is asked for.
    """
    try:
        words = shlex.split(_submit_args() if arguments is None else arguments)
    except ValueError:
        return None
    found: str | None = None
    for index, word in enumerate(words):
        following = words[index + 1] if index + 1 < len(words) else None
        if word == "--master" and following is not None:
            found = following
        elif word.startswith("--master="):
            found = word.partition("=")[2]
        elif word == "--conf" and following is not None and following.startswith(
                "spark.master="):  # fmt: skip
            found = following.partition("=")[2]
    return found or None


def _java_options(config: Mapping[str, str], level: str) -> str:
    """spark.driver.extraJavaOptions with nearsim's logging and signals (the caller's kept).

    ``-Xrs``: the JVM leaves SIGINT as PySpark launches it, ignored, instead
    of running its shutdown under the job at a terminal's Ctrl-C (which
    reaches the whole process group); this process cancels the jobs and
    stops the JVM itself (:func:`stop`).
    """
    given = config.get("spark.driver.extraJavaOptions", "")
    options = [given] if given else []
    if "-Xrs" not in given.split():
        options.append("-Xrs")
    if "log4j.configurationFile" not in given and "log4j2.configurationFile" not in given:
        options.append(f"-Dlog4j.configurationFile=file:{LOG_CONFIG}"
                       f" -Dnearsim.spark.log.level={level}")  # fmt: skip
    return " ".join(options)


def session(master: str | None = None, app_name: str = "nearsim",
            config: Mapping[str, str] | None = None, *, driver_memory: str | None = None,
            executor_memory: str | None = None,
            log_level: str | None = None) -> SparkSession:  # fmt: skip
    """The active session, or a new one on ``master``.

    Without ``master`` (nor ``spark.master`` in ``config``), the master is
    spark-submit's when this program runs under spark-submit, else the one
    ``PYSPARK_SUBMIT_ARGS`` names (``--master URL``), else ``local[*]``.

    Python workers run the interpreter this program runs in unless
    ``PYSPARK_PYTHON`` says otherwise, so that a local session finds the
    ``nearsim`` package of this environment.  ``config`` is any Spark
    settings; ``driver_memory`` and ``executor_memory`` are
    ``spark.driver.memory`` and ``spark.executor.memory`` (``config``'s own
    win over the defaults, the arguments over ``config``).  ``log_level``
    (one of :data:`LOG_LEVELS`, by default ``error``) is the level of the
    driver's log lines on stderr.  A local master started here gets
    :data:`SHUFFLE_PARTITIONS_PER_LOCAL_CORE` shuffle partitions per core
    unless ``spark.sql.shuffle.partitions`` is given.

    Memory and logging of the driver are set when this call starts its JVM;
    a JVM that runs already (an earlier session, spark-submit's) keeps its
    own memory (give ``--driver-memory`` to spark-submit), and only its log
    level is changed.
    """
    level = (log_level or DEFAULT_LOG_LEVEL).lower()
    if level not in LOG_LEVELS:
        raise ValueError(f"unknown log level {log_level!r}: use one of {', '.join(LOG_LEVELS)}")
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    settings = dict(config or {})
    if driver_memory is not None:
        settings["spark.driver.memory"] = memory_size(driver_memory)
    if executor_memory is not None:
        settings["spark.executor.memory"] = memory_size(executor_memory)
    starting = not jvm_running()
    under_submit = "PYSPARK_GATEWAY_PORT" in os.environ
    submitted = None if under_submit else submitted_master()
    if master is None and "spark.master" not in settings and not under_submit:
        if submitted is None:
            master = "local[*]"  # else spark-submit's, or PYSPARK_SUBMIT_ARGS's
    chosen = master or settings.get("spark.master") or submitted or ""
    if starting:
        arguments = _submit_args()
        if (chosen.startswith("local") and "spark.driver.memory" not in settings
                and "--driver-memory" not in arguments
                and "spark.driver.memory" not in arguments):  # fmt: skip
            settings["spark.driver.memory"] = local_driver_memory()
        cores = local_cores(chosen)
        if (cores is not None and "spark.sql.shuffle.partitions" not in settings
                and "spark.sql.shuffle.partitions" not in arguments):  # fmt: skip
            settings["spark.sql.shuffle.partitions"] = str(SHUFFLE_PARTITIONS_PER_LOCAL_CORE
                                                           * cores)
        settings["spark.driver.extraJavaOptions"] = _java_options(settings, level)
        settings.setdefault("spark.ui.showConsoleProgress",
                            "true" if sys.stderr.isatty() else "false")
    builder = SparkSession.builder.appName(app_name)
    if master is not None:
        builder = builder.master(master)
    for name, value in settings.items():
        builder = builder.config(name, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel(level.upper())
    return spark


def stop(spark: SparkSession | None = None, timeout: float = JVM_EXIT_SECONDS,
         interrupted: bool = False) -> None:  # fmt: skip
    """Stop the session (its running jobs cancelled) and the JVM this process started.

    ``interrupted``: the main thread was interrupted in a call to the JVM
    (Ctrl-C), whose connection is then unusable (PySpark pins one to each
    thread): the jobs are cancelled from a thread of its own, and the JVM
    ends, stopping its context, when its standard input closes.  Under
    spark-submit, the JVM is spark-submit's and is left to it.
    """
    context = SparkContext._active_spark_context
    try:
        if interrupted:
            _quiet_accumulator_server(context)
            _cancel_aside(context, timeout)
        elif spark is not None:
            spark.stop()
        elif context is not None:
            context.stop()
    finally:
        _stop_jvm(timeout)


def _cancel_aside(context: SparkContext | None, timeout: float) -> None:
    """Silence the JVM's logging, then cancel every job of ``context``, from another
    thread (another connection).

    After Ctrl-C nothing the JVM logs is the user's concern: cancelled tasks,
    and work the interrupted call left running (a broadcast being stored)
    failing as the context stops, would otherwise print ERROR lines after the
    user pressed Ctrl-C.
    """
    if context is None:
        return

    def silence() -> None:
        context.setLogLevel("OFF")

    def cancel() -> None:
        for step in (silence, context.cancelAllJobs):
            try:
                step()
            except Exception:
                pass

    thread = threading.Thread(target=cancel, name="nearsim-cancel", daemon=True)
    thread.start()
    thread.join(timeout)


def _quiet_accumulator_server(context: SparkContext | None) -> None:
    """The driver's server of accumulator updates, whose client (the JVM) is about to go,
    not to print the end of the connection as an error with its traceback."""
    server: Any = getattr(context, "_accumulatorServer", None)
    if server is not None:
        server.handle_error = lambda request, address: None


def _stop_jvm(timeout: float) -> None:
    gateway: Any = SparkContext._gateway
    if gateway is None:
        return
    process: subprocess.Popen[bytes] | None = getattr(gateway, "proc", None)
    SparkContext._gateway = None
    SparkContext._jvm = None
    if process is None:
        return
    if process.stdin is not None:
        try:
            process.stdin.close()  # the driver's JVM exits at the end of its stdin
        except OSError:
            pass
    try:
        process.wait(timeout)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()
