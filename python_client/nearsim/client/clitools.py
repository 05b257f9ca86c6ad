"""What the ``nearsim`` commands share: exit codes, one-line errors, options, output."""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, ClassVar, TypeVar

import click
import psycopg

from ..core import calibration
from ..core.bits import BITS
from ..core.measures import VERIFIED_MEASURES
from ..core.profiles import ProfileError, canonical
from .connect import ConnectionFailed, ProfileMismatch, connect, ensure_extension
from .documents import DEFAULT_TABLE, DocumentTable, TableError

F = TypeVar("F", bound=Callable[..., Any])

if TYPE_CHECKING:  # click 8.2+ types its ParamType; older ones are not generic
    _IntParamType = click.ParamType[int, Any]
    _StrParamType = click.ParamType[str, Any]
else:
    _IntParamType = _StrParamType = click.ParamType

EXIT_FAILURES = 1
EXIT_USAGE = 2
EXIT_INTERRUPTED = 130


class Fatal(click.ClickException):
    """A usage, connection or table error: exit code 2, like click's usage errors."""

    exit_code = EXIT_USAGE


@contextmanager
def database_errors() -> Iterator[None]:
    """Library errors as one line on stderr."""
    try:
        yield
    except (ConnectionFailed, TableError, ProfileMismatch) as error:
        raise Fatal(str(error)) from error
    except psycopg.OperationalError as error:
        raise Fatal(f"database connection lost: {str(error).strip().splitlines()[0]}") from error
    except psycopg.Error as error:
        raise Fatal(f"database error: {one_line(error)}") from error


def one_line(error: psycopg.Error) -> str:
    """The server's message and hint, without PL/Python's class prefix or traceback."""
    message = re.sub(
        r"^(plpy\.Error|spiexceptions\.\w+): ",
        "",
        error.diag.message_primary or str(error).strip().splitlines()[0],
    )
    hint = error.diag.message_hint
    return f"{message} ({hint})" if hint else message


def database_options(function: F) -> F:
    function = click.option(
        "--table", "-t", default=DEFAULT_TABLE, show_default=True, metavar="NAME",
        help="The documents table, as in SQL: docs, archive.mail, '\"Odd Name\"'.",
    )(function)  # fmt: skip
    return click.option(
        "--dsn", metavar="DSN", envvar="NEARSIM_DSN", show_envvar=True,
        help="PostgreSQL connection string. Default: NEARSIM_DSN, then the PG* environment "
        "variables, then the local cluster that `make demo` starts.",
    )(function)  # fmt: skip


class ProfileName(_StrParamType):
    """A fingerprint profile name, given back in canonical form."""

    name = "profile"

    def convert(self, value: Any, param: click.Parameter | None,
                ctx: click.Context | None) -> str:  # fmt: skip
        try:
            return canonical(str(value))
        except ProfileError as error:
            self.fail(str(error), param, ctx)


def profile_option(help_text: str) -> Callable[[F], F]:
    return click.option("--profile", "-p", type=ProfileName(), metavar="PROFILE",
                        help=help_text)  # fmt: skip


def json_option(function: F) -> F:
    return click.option("--json", "as_json", is_flag=True, help="Print JSON for scripts.")(function)


def verified_options(function: F) -> F:
    function = click.option(
        "--measure", type=click.Choice(VERIFIED_MEASURES), default="s_r", show_default=True,
        help="The exact measure for --min-similarity.",
    )(function)  # fmt: skip
    return click.option(
        "--min-similarity", "-s", type=click.FloatRange(0, 1), metavar="S",
        help="Verified: only documents at least S similar, measured on the texts (0.5 to 0.95"
        " picks the radius from the calibration unless -k is given).",
    )(function)  # fmt: skip


DEFAULT_MIN_SIMILARITY = 0.8
"""The measured similarity above which `nearsim compare` calls two texts near-duplicates."""


def radius(ctx: click.Context, max_distance: int) -> int | None:
    """-k if the user gave it; else None, for the calibrated radius.

    A --min-similarity outside the calibration needs -k: said here, before
    any work, rather than by the server.
    """
    given = ctx.get_parameter_source("max_distance") is not click.core.ParameterSource.DEFAULT
    wanted = ctx.params.get("min_similarity")
    low, high = calibration.THRESHOLDS[0], calibration.THRESHOLDS[-1]
    if not given and wanted is not None and not low <= wanted <= high:
        raise click.BadParameter(
            f"{wanted} is outside {low} to {high}, where the calibration gives the radius;"
            " give -k to choose the radius yourself",
            param_hint="--min-similarity",
        )
    return max_distance if given else None


def distance_option(function: F) -> F:
    return click.option(
        "-k", "--max-distance", type=click.IntRange(0, BITS), default=6, show_default=True,
        help="Largest Hamming distance in bits (6 is about 90% similar).",
    )(function)  # fmt: skip


def open_table(
    dsn: str | None, table: str, create_extension: bool = False
) -> tuple[psycopg.Connection[Any], DocumentTable]:
    conn = connect(dsn, autocommit=True)
    if create_extension:
        ensure_extension(conn)
    return conn, DocumentTable(conn, table)


def print_json(value: Any) -> None:
    click.echo(json.dumps(value, ensure_ascii=False, indent=2))


def print_json_array(items: Iterable[dict[str, Any]]) -> None:
    """A JSON array written as it is produced (pairs can be many)."""
    click.echo("[", nl=False)
    for index, item in enumerate(items):
        click.echo(("," if index else "") + "\n  " + json.dumps(item, ensure_ascii=False), nl=False)
    click.echo("\n]")


class ByteSize(_IntParamType):
    """A number of bytes: 1000000, 64MB, 1.5GiB, 512k."""

    name = "size"
    UNITS: ClassVar[dict[str, int]] = {
        "": 1, "b": 1, "k": 10**3, "kb": 10**3, "kib": 2**10, "m": 10**6, "mb": 10**6,
        "mib": 2**20, "g": 10**9, "gb": 10**9, "gib": 2**30,
    }  # fmt: skip

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> int:
        if isinstance(value, int):
            return value
        text = str(value).strip().lower()
        number = text.rstrip("abcdefghijklmnopqrstuvwxyz")
        unit = text[len(number) :].strip()
        try:
            size = int(float(number) * self.UNITS[unit])
        except (KeyError, ValueError):
            self.fail(f"{value!r} is not a size such as 1000000, 64MB or 1GiB", param, ctx)
        if size <= 0:
            self.fail(f"{value!r} must be positive", param, ctx)
        return size


def human_bytes(size: float) -> str:
    for unit in ("B", "kB", "MB", "GB"):
        if size < 1000 or unit == "GB":
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1000
    raise AssertionError("unreachable")
