"""What the ``nearsim`` commands share: exit codes, one-line errors, options, output."""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar, TypeVar

import click
import psycopg

from ..core.bits import BITS
from ..core.measures import (
    DEFAULT_MEASURE,
    DEFAULT_MIN_SIMILARITY,
    SET_DEFAULT_MIN_SIMILARITY,
    VERIFIED_MEASURES,
)
from ..core.profiles import ProfileError, canonical
from .connect import ConnectionFailed, ProfileMismatch, connect, ensure_extension
from .database_encoding import Repertoire, unstorable_query
from .documents import DEFAULT_TABLE, DocumentTable, TableError
from .groups import GroupNotFound

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


class Commands(click.Group):
    """A group whose commands end on Ctrl-C with status 130 and one line.

    click's own ending for it ("Aborted!", status 1) would say to a script
    that `nearsim check` found a near-duplicate, or that `nearsim stats`
    found the index in need of repair: 1 means that.  130 is the shell's
    status for a command ended by SIGINT.  A query running at that moment is
    cancelled by psycopg before the KeyboardInterrupt reaches here.
    """

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except KeyboardInterrupt:
            click.echo("interrupted", err=True)
            ctx.exit(EXIT_INTERRUPTED)


@contextmanager
def database_errors() -> Iterator[None]:
    """Library errors as one line on stderr."""
    try:
        yield
    except (ConnectionFailed, TableError, ProfileMismatch, GroupNotFound) as error:
        raise Fatal(str(error)) from error
    except psycopg.OperationalError as error:
        raise Fatal(f"database connection lost: {str(error).strip().splitlines()[0]}") from error
    except psycopg.errors.UntranslatableCharacter as error:
        raise Fatal(f"database error: {one_line(error)}: the database cannot hold this text;"
                    " a database in UTF8 holds any text") from error
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


def encoding_option(function: F) -> F:
    """--encoding of the files read, as nearsim-load takes it."""
    return click.option(
        "--encoding", default="utf-8", show_default=True, callback=_checked_encoding,
        help="Encoding of text files, or 'auto' to detect it per file (as nearsim-load).",
    )(function)


def _checked_encoding(_ctx: click.Context, _param: click.Parameter, value: str) -> str:
    from .extract import check_encoding

    try:
        return check_encoding(value)
    except ValueError as error:
        raise click.BadParameter(str(error), param_hint="--encoding") from error


def json_option(function: F) -> F:
    return click.option("--json", "as_json", is_flag=True, help="Print JSON for scripts.")(function)


SIMILARITY = click.FloatRange(0, 1, min_open=True)
"""What -s takes: any similarity above 0 (everything is at least 0 similar), up to 1.
Whether a search can answer it is the library's or the server's to say: the
server gives a radius only for 0.5 to 0.95 and otherwise asks for -k, but
its exact join of pairs by S_R needs no radius at all."""
MEASURE_LABELS = {"s_r": "S_R", "s_l": "S_L", "s_j": "S_J", "containment": "containment",
                  "information_s_l": "S_L(info)", "information_s_j": "S_J(info)"}
"""How the commands name each measure of VERIFIED_MEASURES in their text output."""
DEFAULT_MAX_DISTANCE = 6
"""The Hamming distance of ``--hamming`` unless told otherwise."""


def search_options(function: F) -> F:
    """-s, --measure, -k and --hamming: the verified search by default, bits on request."""
    return _search_options(function, DEFAULT_MEASURE, DEFAULT_MIN_SIMILARITY)


def set_search_options(function: F) -> F:
    """The same options with the defaults of a whole collection's dedup (S_R at 0.8).

    ``nearsim dedup`` and ``nearsim spark dedup`` group a whole table or
    crawl: S_R's pairs come from an exact join of the shingle sets, at any
    size, where a word measure would be measured pair by pair; and the two
    routes give the same groups.
    """
    return _search_options(function, "s_r", SET_DEFAULT_MIN_SIMILARITY)


def _search_options(function: F, measure: str, min_similarity: float) -> F:
    function = click.option(
        "--hamming", "by_bits", is_flag=True,
        help=f"Unverified: by fingerprint distance only, within -k bits [default:"
        f" {DEFAULT_MAX_DISTANCE}]; fast, but bits apart are not a similarity of the texts.",
    )(function)  # fmt: skip
    function = click.option(
        "-k", "--max-distance", type=click.IntRange(0, BITS), metavar="K",
        help="With --hamming, the largest Hamming distance in bits; otherwise the radius in"
        " which candidates are looked for [default: none by s_l and the other word measures"
        " from -s 0.5 up (the candidates are the documents at least 0.5 similar by S_R), nor"
        " for pairs, clusters and report by s_r; otherwise the radius calibrated for -s, from"
        " 0.5 to 0.95 (outside, give -k)].",
    )(function)  # fmt: skip
    function = click.option(
        "--measure", type=click.Choice(VERIFIED_MEASURES), default=measure,
        show_default=True,
        help="The exact measure of -s: s_l, the share of the longer text also found in the"
        " shorter (passages of 5 words or more); s_r, the resemblance of the 3-word shingle"
        " sets (computed in the server's C code; pairs, clusters and report find its pairs"
        " by an exact join); containment, the share of the shorter text's shingles in the"
        " longer; s_j and the information forms as `nearsim compare` shows them.",
    )(function)  # fmt: skip
    return click.option(
        "--min-similarity", "-s", type=SIMILARITY, metavar="S",
        default=min_similarity, show_default=True,
        help="Only documents at least S similar, measured on the texts (verified search:"
        " candidates from the rotation index, then the texts decide).",
    )(function)  # fmt: skip


def method_option(function: F) -> F:
    """--method of the groups, for the commands that number them alike (clusters, report)."""
    return click.option(
        "--method", type=click.Choice(["components", "pivot"]), default="components",
        show_default=True,
        help="components: linked through any chain of pairs; pivot: every member paired with"
        " the group's pivot.",
    )(function)  # fmt: skip


@dataclass(frozen=True)
class Search:
    """What a query command was asked for: verified (the default) or by bits."""

    hamming: bool
    max_distance: int | None  # by bits: the distance; verified: the radius, None = calibrated
    min_similarity: float
    measure: str

    def describe(self) -> str:
        if self.hamming:
            return f"within {self.max_distance} bits (unverified)"
        return f"{self.measure} >= {self.min_similarity:g}"


def given(ctx: click.Context, name: str) -> bool:
    """Whether the option ``name`` came from the command line, not its default."""
    return ctx.get_parameter_source(name) is not click.core.ParameterSource.DEFAULT


def search_of(ctx: click.Context) -> Search:
    """The search the options ask for, checked before any work.

    -s or --measure with --hamming is a contradiction.  A -s the server has
    no radius for is not refused here: pairs by S_R need none, and where one
    is needed the server's own error says so (one line, with its hint).
    """
    params = ctx.params
    if params["by_bits"]:
        for name, option in (("min_similarity", "--min-similarity"), ("measure", "--measure")):
            if given(ctx, name):
                raise click.UsageError(f"{option} measures the texts and --hamming does not:"
                                       " give one of them")  # fmt: skip
        distance = params["max_distance"]
        return Search(True, DEFAULT_MAX_DISTANCE if distance is None else distance,
                      params["min_similarity"], params["measure"])  # fmt: skip
    return Search(False, params["max_distance"], params["min_similarity"], params["measure"])


def open_table(
    dsn: str | None, table: str, create_extension: bool = False
) -> tuple[psycopg.Connection[Any], DocumentTable]:
    conn = connect(dsn, autocommit=True)
    if create_extension:
        ensure_extension(conn)
    return conn, DocumentTable(conn, table)


def require_storable(conn: psycopg.Connection[Any], name: str, text: str) -> None:
    """Fatal, naming ``name``, if the database's encoding cannot hold ``text``
    (the server would refuse the statement that sends it)."""
    problem = unstorable_query(Repertoire(conn), name, text)
    if problem is not None:
        raise Fatal(problem)


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
