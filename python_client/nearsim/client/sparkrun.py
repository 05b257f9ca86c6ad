"""What every ``nearsim spark`` command shares: the session's options, its end, Ctrl-C.

:func:`session_options` adds ``--driver-memory``, ``--executor-memory``,
``--spark-conf KEY=VALUE`` (repeatable) and ``--spark-log-level`` to a
command; :func:`spark_session` starts the session they describe and always
ends it: on success, on an error (Spark's own errors as one line, without
a Java stack trace) and on Ctrl-C, where the running jobs are cancelled,
the driver's JVM is stopped and the command ends with the one line
``interrupted`` and status 130, as every ``nearsim`` command does.
"""

from __future__ import annotations

import logging
import signal
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar

import click

from .clitools import Fatal

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

F = TypeVar("F", bound=Callable[..., Any])

__all__ = ["SessionOptions", "session_options", "spark_error", "spark_session"]

_META = "nearsim.spark.session"


@dataclass
class SessionOptions:
    """The Spark settings a command was given."""

    driver_memory: str | None = None
    executor_memory: str | None = None
    conf: dict[str, str] = field(default_factory=dict)
    log_level: str | None = None


def _options(ctx: click.Context) -> SessionOptions:
    found = ctx.meta.get(_META)
    if not isinstance(found, SessionOptions):
        found = SessionOptions()
        ctx.meta[_META] = found
    return found


def _memory(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    if value is None:
        return None
    from ..spark.runtime import memory_size

    try:
        size = memory_size(value)
    except ValueError as error:
        raise click.BadParameter(str(error), ctx, param) from error
    if param.name == "driver_memory":
        _options(ctx).driver_memory = size
    else:
        _options(ctx).executor_memory = size
    return size


def _conf(ctx: click.Context, param: click.Parameter, value: tuple[str, ...]) -> None:
    from ..spark.runtime import parse_conf

    try:
        _options(ctx).conf.update(parse_conf(value))
    except ValueError as error:
        raise click.BadParameter(str(error), ctx, param) from error


def _log_level(ctx: click.Context, param: click.Parameter, value: str | None) -> None:
    _options(ctx).log_level = value


LOG_LEVEL_CHOICES = ("off", "fatal", "error", "warn", "info", "debug", "trace", "all")


def session_options(command: F) -> F:
    """The options of the Spark session, for a ``nearsim spark`` command.

    They do not reach the command's function: :func:`spark_session` reads them.
    """
    decorators = [
        click.option("--driver-memory", metavar="SIZE", callback=_memory, expose_value=False,
                     help="Memory of the driver's JVM (spark.driver.memory), e.g. 8g. In local"
                     " mode the tasks run in it. [default: local masters: a third of this"
                     " machine's memory, 1g to 32g; else Spark's]"),
        click.option("--executor-memory", metavar="SIZE", callback=_memory,
                     expose_value=False,
                     help="Memory of each executor of a cluster (spark.executor.memory); local"
                     " masters have none but the driver."),
        click.option("--spark-conf", metavar="KEY=VALUE", multiple=True, callback=_conf,
                     expose_value=False,
                     help="Any Spark setting, e.g. spark.sql.shuffle.partitions=64; repeatable."),
        click.option("--spark-log-level", type=click.Choice(LOG_LEVEL_CHOICES,
                                                            case_sensitive=False),
                     callback=_log_level, expose_value=False,
                     help="Show the driver's Spark and Java log lines of this level and above"
                     " (warn shows spill and memory warnings). [default: error]"),
    ]
    for decorator in reversed(decorators):
        command = decorator(command)
    return command


def spark_error(error: BaseException) -> str | None:
    """The first line of one of Spark's own errors (None for any other error)."""
    if type(error).__module__.startswith(("pyspark", "py4j")):
        lines = str(error).strip().splitlines()
        return lines[0] if lines else type(error).__name__
    return None


@contextmanager
def _no_interrupts() -> Iterator[None]:
    """Ctrl-C ignored while the session ends (a second one must not leave the JVM behind)."""
    try:
        previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    except ValueError:  # not the main thread: signals are not ours to handle
        yield
        return
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


@contextmanager
def _interrupts_to_this_thread() -> Iterator[None]:
    """SIGINT blocked in the threads started in the block (PySpark's and Py4J's).

    The kernel gives a signal to any thread that does not block it; Python
    runs its handler in the main thread only when that thread next runs
    Python code, so a SIGINT taken by another thread while the main thread
    waits for a Spark job would be acted on only when the job ends.
    """
    try:
        signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    except (AttributeError, ValueError, OSError):  # no POSIX threads' masks here
        yield
        return
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})


@contextmanager
def spark_session(ctx: click.Context, master: str | None) -> Iterator[SparkSession]:
    """The session the command's options ask for; stopped, with its JVM, when the block ends.

    Spark's own errors in the block become one line (:class:`Fatal`);
    Ctrl-C (KeyboardInterrupt) cancels the jobs, stops the session and
    goes on to the command group, which prints ``interrupted`` and ends
    with status 130.
    """
    try:
        from ..spark.runtime import jvm_running, session, stop
    except ImportError as error:
        raise Fatal(f"{error}: install the Spark extra: pip install 'nearsim[spark]'") from error
    options = _options(ctx)
    if options.driver_memory is not None and jvm_running():
        click.echo("warning: --driver-memory cannot change the memory of a JVM that runs"
                   " already: give it to spark-submit", err=True)  # fmt: skip
    owned = not jvm_running()  # else a session of the caller's, or spark-submit's
    spark = None
    ctrl_c = _CtrlC()
    with _py4j_connection_logs_hidden():
        try:
            with _interrupts_to_this_thread():
                spark = session(master, config=options.conf,
                                driver_memory=options.driver_memory,
                                executor_memory=options.executor_memory,
                                log_level=options.log_level)  # fmt: skip
            with ctrl_c.watching():
                yield spark
        except KeyboardInterrupt:
            with _no_interrupts():
                _quietly_stop(stop, spark, owned, interrupted=True)
            raise
        except Exception as error:
            line = spark_error(error)
            with _no_interrupts():
                _quietly_stop(stop, spark, owned, interrupted=ctrl_c.pressed)
            if ctrl_c.pressed:  # what failed after Ctrl-C failed because of it
                raise KeyboardInterrupt from error
            if line is not None:  # Spark's own: one line, not a Java stack trace
                raise Fatal(line) from error
            raise
        else:
            with _no_interrupts():
                _quietly_stop(stop, spark, owned)


class _CtrlC:
    """SIGINT while jobs run: remember it and raise KeyboardInterrupt in the main thread.

    Python runs a signal's handler in the main thread, when that thread next
    runs Python code; the kernel gives a process's signal to any thread that
    does not block it, so one taken by another thread (Py4J's, PySpark's)
    while the main thread waits for a Spark job would be acted on when the
    job ends.  So SIGINT is blocked in every thread, and a thread of its own
    waits for it (``sigwait``) and sends the main thread SIGUSR1, whose
    handler raises KeyboardInterrupt there at once, in the middle of the wait.

    (PySpark's own handler would cancel the jobs through the connection to
    the JVM that the interrupted call holds, PySpark pinning one connection
    to each thread, and fail with a Py4J traceback instead of the interrupt:
    the jobs are cancelled afterwards, from another thread, by
    :func:`nearsim.spark.stop` with ``interrupted``.)
    """

    def __init__(self) -> None:
        self.pressed = False

    @contextmanager
    def watching(self) -> Iterator[None]:
        if threading.current_thread() is not threading.main_thread():
            yield
            return

        def raise_here(signum: int, frame: object) -> None:
            self.pressed = True
            raise KeyboardInterrupt

        main = threading.get_ident()
        done = threading.Event()

        def wait() -> None:
            while True:
                signal.sigwait({signal.SIGINT})
                if done.is_set():
                    return
                self.pressed = True
                signal.pthread_kill(main, signal.SIGUSR1)

        blocked = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
        previous = signal.signal(signal.SIGUSR1, raise_here)
        waiter = threading.Thread(target=wait, name="nearsim-ctrl-c", daemon=True)
        waiter.start()  # with SIGINT blocked, as every thread started from here on
        py4j = logging.getLogger("py4j")
        level = py4j.level
        # Py4J logs the connections it closes after an interrupt as errors, with
        # tracebacks; its failures reach the command as exceptions all the same.
        py4j.setLevel(logging.CRITICAL)
        try:
            yield
        finally:
            py4j.setLevel(level)
            done.set()
            if waiter.ident is not None and waiter.is_alive():
                try:
                    signal.pthread_kill(waiter.ident, signal.SIGINT)  # ends its wait
                except ProcessLookupError:
                    pass  # it ended on a SIGINT of its own meanwhile
            waiter.join(5)
            signal.signal(signal.SIGUSR1, previous)
            signal.pthread_sigmask(signal.SIG_SETMASK, blocked)


@contextmanager
def _py4j_connection_logs_hidden() -> Iterator[None]:
    """Py4J logs, on the root logger and with a traceback, the interrupt of a call and
    a call whose connection broke: not shown while the session lives, nor while it
    and its JVM stop (a Java object's garbage collector may call a JVM that is
    going).  A call that failed raises in the command all the same (one line),
    and one retried or made for the garbage collector is no news to the user."""
    root = logging.getLogger()
    root.addFilter(_not_a_py4j_connection_log)
    try:
        yield
    finally:
        root.removeFilter(_not_a_py4j_connection_log)


def _not_a_py4j_connection_log(record: logging.LogRecord) -> bool:
    return not str(record.msg).startswith(("KeyboardInterrupt while sending command",
                                           "Exception while sending command"))


def _quietly_stop(stop: Callable[..., None], spark: Any, owned: bool,
                  interrupted: bool = False) -> None:  # fmt: skip
    """Stop the session and its JVM if this command started them, else cancel its jobs;
    what goes wrong then is no news to the user."""
    try:
        if owned:
            stop(spark, interrupted=interrupted)
        elif spark is not None and not interrupted:
            spark.sparkContext.cancelAllJobs()
    except Exception:
        pass
