"""What every section of ``benchmarks.run`` shares.

The connection and its session settings, the corpus of texts to
fingerprint, one line of the summary, the error that ends a run with an exit
status, and the printing and timing helpers: kept in one place so that every
section prints its tables and numbers the same way.  Also what the
benchmarks against the exact truth (quality.py, verified.py, minhash.py)
share: a timer, a log line, a timed ``nearsim_enable`` and a scratch schema.
"""

from __future__ import annotations

import os
import platform
import secrets
import sys
import textwrap
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import numpy as np
import psycopg
from psycopg import sql

from nearsim.client.clitools import one_line as server_message
from nearsim.client.connect import ProfileMismatch, ensure_extension
from nearsim.client.output import format_table, one_line

Connection = psycopg.Connection[tuple[Any, ...]]

MB = 1_000_000  # MB here means 10^6 bytes

# Settings for every measurement: one core (no parallel workers) and no JIT
# compilation, whose cost and benefit depend on plan cost estimates.
SESSION_SETTINGS = {"max_parallel_workers_per_gather": "0", "jit": "off"}

PREPARE_WHEN_ASKED = 1 << 30  # psycopg prepare_threshold: only prepare=True statements


class BenchError(Exception):
    """A problem to report in one line, with the exit status to use."""

    def __init__(self, message: str, status: int = 1) -> None:
        super().__init__(message)
        self.status = status


@dataclass(frozen=True)
class Corpus:
    """Texts to fingerprint, with the fingerprints the client computes for them."""

    name: str
    texts: list[str]
    fingerprints: list[int | None]

    @property
    def nbytes(self) -> int:
        return sum(len(text.encode()) for text in self.texts)


@dataclass(frozen=True)
class Row:
    """One line of the summary table."""

    measurement: str
    value: str
    baseline: str
    ratio: str
    target: str
    met: str


def print_table(header: Sequence[str], rows: Sequence[Sequence[str]], align: str,
                indent: str = "   ") -> None:
    print(format_table(header, rows, align, indent))


def wrap(text: str, indent: str = "   ", width: int = 92) -> None:
    """Print ``text`` as a paragraph of lines at most ``width`` characters long."""
    print(textwrap.fill(text, width, initial_indent=indent, subsequent_indent=indent))


def best_of(repeat: int, action: Callable[[], object]) -> list[float]:
    """Wall-clock seconds of ``repeat`` calls of ``action``."""
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        action()
        times.append(time.perf_counter() - started)
    return times


def yes_no(met: bool) -> str:
    return "yes" if met else "no"


def cpu_model() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as cpuinfo:
            for line in cpuinfo:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown CPU"


def load_average() -> float | None:
    """The machine's load average over the last minute (None where it is unknown)."""
    try:
        return os.getloadavg()[0]
    except OSError:
        return None


def connect(dsn: str) -> Connection:
    try:
        conn = psycopg.connect(dsn, autocommit=True)
    except psycopg.OperationalError as error:
        raise BenchError(f"cannot connect to the database: {one_line(error)}", status=2) from None
    # Every statement is planned afresh, as a one-off query would be.
    conn.prepare_threshold = None
    # The benchmark's fingerprints are made up: declared as the tables'
    # profile, the triggers keep them as they keep a loader's.
    conn.execute("SET nearsim.profile = 'default/1'")
    return conn


def prepare_session(conn: Connection) -> str:
    """Install the extension if needed; return the PostgreSQL version."""
    try:
        ensure_extension(conn)
    except ProfileMismatch as error:
        raise BenchError(str(error)) from None
    row = conn.execute("SELECT current_setting('server_version')").fetchone()
    version = row[0] if row else "?"
    for name, value in SESSION_SETTINGS.items():
        conn.execute("SELECT set_config(%s, %s, false)", (name, value))
    return str(version)


def prewarm_table(conn: Connection, schema: str, table: str) -> str:
    """Load ``table`` into shared buffers with pg_prewarm if possible; say what was done.

    A sequential scan of a table bigger than a quarter of shared_buffers reads
    through a small ring of buffers, so scanning it does not keep it cached;
    pages already in shared buffers are used as they are.
    """
    row = conn.execute(
        "SELECT e.extnamespace::regnamespace::text FROM pg_extension e"
        " WHERE e.extname = 'pg_prewarm'"
    ).fetchone()
    if row is None:
        available = conn.execute(
            "SELECT 1 FROM pg_available_extensions WHERE name = 'pg_prewarm'"
        ).fetchone()
        if available is None:
            return "pg_prewarm is not available, so it is only read once before timing"
        # Made in the scratch schema, it goes when the schema is dropped.
        conn.execute(
            sql.SQL("CREATE EXTENSION pg_prewarm SCHEMA {}").format(sql.Identifier(schema))
        )
        prewarm_schema = schema
    else:
        prewarm_schema = str(row[0])
    function = sql.Identifier(prewarm_schema, "pg_prewarm")
    conn.execute(sql.SQL("SELECT {}({}::regclass)").format(function, sql.Literal(table)))
    return "pg_prewarm loaded it into shared buffers"


def pgvector_version(conn: Connection, hint: str = "", extension: str = "vector") -> str:
    """pgvector's version in this database, created if need be. A server without it is
    a BenchError (status 2) saying how to install it, then ``hint`` (another way to run);
    ``extension`` is its name, for tests."""
    if conn.execute("SELECT 1 FROM pg_available_extensions WHERE name = %s", (extension,)
                    ).fetchone() is None:
        raise BenchError("pgvector is not installed in this server: build it from its"
                         " source (https://github.com/pgvector/pgvector, 0.8 or newer) with"
                         " this server's pg_config, install it, and run again"
                         + (f" ({hint})" if hint else ""), status=2)
    conn.execute(sql.SQL("CREATE EXTENSION IF NOT EXISTS {}").format(sql.Identifier(extension)))
    installed = conn.execute("SELECT extversion FROM pg_extension WHERE extname = %s",
                             (extension,)).fetchone()
    return str(installed[0]) if installed else "?"


def percentile_ms(seconds: Sequence[float], q: float) -> float:
    return float(np.percentile(np.array(seconds) * 1000, q))


def ms(value: float) -> str:
    return f"{value:.3f}" if value < 1 else f"{value:.2f}" if value < 10 else f"{value:.1f}"


def times(ratio: float) -> str:
    return f"{ratio:.1f}x" if ratio < 10 else f"{ratio:.0f}x"


def count_rows(rows: int) -> str:
    return f"{rows // 1_000_000}M" if rows % 1_000_000 == 0 else (
        f"{rows // 1000}k" if rows % 1000 == 0 else f"{rows:,}")


@contextmanager
def timer() -> Iterator[Callable[[], float]]:
    started = time.perf_counter()
    finished: list[float] = []
    yield lambda: finished[0] if finished else time.perf_counter() - started
    finished.append(time.perf_counter() - started)


def enable_timed(conn: Any, schema: str, name: str, phases: dict[str, float]) -> None:
    """nearsim_enable of a loaded table, then ANALYZE, each timed into phases."""
    with timer() as elapsed:
        conn.execute("SELECT nearsim_enable(%s::regclass, 'body')", (f"{schema}.{name}",))
    phases["nearsim_enable"] = elapsed()
    with timer() as elapsed:
        conn.execute(sql.SQL("ANALYZE {}").format(sql.Identifier(schema, name)))
    phases["ANALYZE"] = elapsed()


def log(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


# How often a RESET of a tiny statement_timeout is sent before its cancel is let through.
RESET_ATTEMPTS = 100


def reset_statement_timeout(conn: psycopg.Connection) -> None:
    """RESET statement_timeout on an autocommit connection.

    The RESET runs under the timeout it removes, so after a budget of a millisecond a
    busy server can cancel the RESET itself; it is sent again until it lands."""
    for _ in range(RESET_ATTEMPTS - 1):
        try:
            conn.execute("RESET statement_timeout")
            return
        except psycopg.errors.QueryCanceled:
            continue
    conn.execute("RESET statement_timeout")


def run_main(main: Callable[[], int | None]) -> int:
    """Runs a benchmark's main as `python -m benchmarks.NAME` does: an error of
    the database ends it with one line that names the benchmark, the SQLSTATE
    and the server's message (not a traceback), status 1; Ctrl-C with 130."""
    name = os.path.splitext(os.path.basename(sys.argv[0]))[0]
    try:
        return main() or 0
    except psycopg.Error as error:
        state = f" {error.sqlstate}" if error.sqlstate else ""
        print(f"benchmarks.{name}: database error{state}: {server_message(error)}",
              file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print(f"benchmarks.{name}: interrupted", file=sys.stderr)
        return 130


def drop_schema(conn: psycopg.Connection, schema: str) -> None:
    """DROP SCHEMA ... CASCADE of a run's scratch schema; a failure is said, not raised,
    so that it does not hide the error that ended the run."""
    try:
        conn.execute(sql.SQL("DROP SCHEMA {} CASCADE").format(sql.Identifier(schema)))
    except psycopg.Error as error:
        print(f"could not drop {schema}: {error}", file=sys.stderr)


@contextmanager
def scratch_schema(dsn: str) -> Iterator[tuple[psycopg.Connection, str]]:
    schema = f"nearsim_quality_{secrets.token_hex(4)}"
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("CREATE EXTENSION IF NOT EXISTS nearsim CASCADE")
        conn.execute(sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(schema)))
        try:
            yield conn, schema
        finally:
            reset_statement_timeout(conn)
            conn.execute(sql.SQL("DROP SCHEMA {} CASCADE").format(sql.Identifier(schema)))
