"""The ``nearsim`` and ``nearsim-load`` commands.

Each command parses its arguments, calls the library (documents.py,
loader.py) and prints the result; library errors become one-line messages
with exit code 2.
"""

from __future__ import annotations

import json
import os
import re
import sys
from collections.abc import Callable, Iterable, Iterator
from contextlib import closing, contextmanager
from dataclasses import asdict, replace
from functools import partial
from typing import IO, TYPE_CHECKING, Any, ClassVar, TypeVar

import click
import psycopg
from rich.console import Console
from rich.progress import (
    BarColumn,
    DownloadColumn,
    Progress,
    TaskID,
    TaskProgressColumn,
    TextColumn,
    TimeRemainingColumn,
    TransferSpeedColumn,
)  # fmt: skip

from .. import __version__
from ..core import calibration, measures
from ..core.bands import MAX_BANDS, MIN_BANDS
from ..core.bits import BITS, bits, hamming
from ..core.fingerprint import PROFILE
from ..core.measures import VERIFIED_MEASURES
from ..core.profiles import ProfileError, canonical, simhash
from . import report as html_report
from .connect import ConnectionFailed, ProfileMismatch, connect, ensure_extension
from .documents import DEFAULT_TABLE, DocumentTable, TableError
from .extract import InputError, check_encoding, read_text
from .loader import DEFAULT_MAX_BYTES, LoadOptions, LoadSummary, Reporter, load_paths
from .sources import Failure, FileInput, RecordFormat, SourceOptions, iter_inputs

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
def _errors() -> Iterator[None]:
    """Library errors as one line on stderr."""
    try:
        yield
    except (ConnectionFailed, TableError, ProfileMismatch) as error:
        raise Fatal(str(error)) from error
    except psycopg.OperationalError as error:
        raise Fatal(f"database connection lost: {str(error).strip().splitlines()[0]}") from error
    except psycopg.Error as error:
        raise Fatal(f"database error: {_one_line(error)}") from error


def _one_line(error: psycopg.Error) -> str:
    """The server's message and hint, without PL/Python's class prefix or traceback."""
    message = re.sub(r"^(plpy\.Error|spiexceptions\.\w+): ", "",
                     error.diag.message_primary or str(error).strip().splitlines()[0])
    hint = error.diag.message_hint
    return f"{message} ({hint})" if hint else message


def _database_options(function: F) -> F:
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


def _profile_option(help_text: str) -> Callable[[F], F]:
    return click.option("--profile", "-p", type=ProfileName(), metavar="PROFILE",
                        help=help_text)  # fmt: skip


def _json_option(function: F) -> F:
    return click.option("--json", "as_json", is_flag=True, help="Print JSON for scripts.")(
        function
    )


def _verified_options(function: F) -> F:
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


def _radius(ctx: click.Context, max_distance: int) -> int | None:
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
            " give -k to choose the radius yourself", param_hint="--min-similarity")
    return max_distance if given else None


def _distance_option(function: F) -> F:
    return click.option(
        "-k", "--max-distance", type=click.IntRange(0, BITS), default=6, show_default=True,
        help="Largest Hamming distance in bits (6 is about 90% similar).",
    )(function)  # fmt: skip


def _open(
    dsn: str | None, table: str, create_extension: bool = False
) -> tuple[psycopg.Connection[Any], DocumentTable]:
    conn = connect(dsn, autocommit=True)
    if create_extension:
        ensure_extension(conn)
    return conn, DocumentTable(conn, table)


def _print_json(value: Any) -> None:
    click.echo(json.dumps(value, ensure_ascii=False, indent=2))


def _print_json_array(items: Iterable[dict[str, Any]]) -> None:
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
        unit = text[len(number):].strip()
        try:
            size = int(float(number) * self.UNITS[unit])
        except (KeyError, ValueError):
            self.fail(f"{value!r} is not a size such as 1000000, 64MB or 1GiB", param, ctx)
        if size <= 0:
            self.fail(f"{value!r} must be positive", param, ctx)
        return size


def _human_bytes(size: float) -> str:
    for unit in ("B", "kB", "MB", "GB"):
        if size < 1000 or unit == "GB":
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1000
    raise AssertionError("unreachable")


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="nearsim")
def cli() -> None:
    """Find near-duplicate documents in PostgreSQL.

    \b
    Example:
        nearsim init
        nearsim load ~/contracts
        nearsim similar --file draft.docx
    """


# -- init ------------------------------------------------------------------------


@cli.command()
@_database_options
@click.option("--bands", type=click.IntRange(MIN_BANDS, MAX_BANDS),
              help="Bucket index layout (default: by size).")
@_profile_option("Fingerprint profile: a short name (default, english, auto, soundex, chars,"
                 " set) or e.g. words:1-3+stem:german [default: default/1 for a new table;"
                 " an enabled table keeps its own, and another given is an error].")
def init(dsn: str | None, table: str, bands: int | None, profile: str | None) -> None:
    """Create the extension and a documents table, and enable it.

    Does nothing that is already done.

    \b
    Examples:
        nearsim init --table docs
        nearsim init --table mail --profile english
    """
    with _errors():
        conn, documents = _open(dsn, table, create_extension=True)
        with conn:
            created = documents.create(bands, profile)
            registration = documents.require_enabled()
    click.echo(f"{'created' if created else 'kept'} table {documents.name}, enabled for nearsim"
               f" with profile {registration.profile} and {registration.bands} bands")


# -- load ------------------------------------------------------------------------


class _ConsoleReporter(Reporter):
    """Failures on stderr (and to --errors); progress in a bar, when there is one."""

    def __init__(self, errors: IO[str] | None, bar: Any | None = None) -> None:
        self.errors = errors
        self.bar = bar
        self.task = TaskID(0) if bar is None else bar.add_task("load", done=0, rate="0")
        self.done = 0

    def failure(self, failure: Failure) -> None:
        line = f"{failure.source}: {failure.message} [{failure.reason}]"
        if self.bar is not None:
            self.bar.console.print(line, markup=False, highlight=False)
        else:
            click.echo(line, err=True)
        if self.errors is not None:
            self.errors.write(json.dumps(asdict(failure), ensure_ascii=False) + "\n")

    def progress(self, documents: int, size: int) -> None:
        if self.bar is None:
            return
        self.done += documents
        elapsed = self.bar.tasks[0].elapsed or 0.0
        rate = f"{self.done / elapsed:,.0f}" if elapsed > 0 else "0"
        self.bar.update(self.task, advance=size, done=self.done, rate=rate)


def _progress_bar() -> Progress:
    return Progress(
        TextColumn("{task.fields[done]:,} documents"),
        BarColumn(),
        TaskProgressColumn(),
        DownloadColumn(binary_units=False),
        TransferSpeedColumn(),
        TextColumn("{task.fields[rate]} docs/s"),
        TimeRemainingColumn(),
        console=Console(stderr=True),
        transient=False,
    )


def _scan_size(paths: tuple[str, ...], options: SourceOptions) -> int:
    """Bytes to read, for the progress bar's estimate (records files count whole)."""
    total = 0
    for item in iter_inputs(paths, replace(options, records="none")):
        if isinstance(item, FileInput):
            total += item.size
    return total


def _summary_line(summary: LoadSummary) -> str:
    rate = (summary.loaded + summary.updated) / summary.seconds if summary.seconds else 0.0
    parts = [
        f"{summary.loaded:,} loaded", f"{summary.updated:,} updated",
        f"{summary.unchanged:,} unchanged", f"{summary.failures:,} failed",
    ]  # fmt: skip
    line = (f"{', '.join(parts)}: {_human_bytes(summary.bytes)} in {summary.seconds:.1f} s"
            f" ({rate:,.0f} docs/s)")  # fmt: skip
    if summary.failed:
        line += "\nfailed: " + ", ".join(
            f"{reason} {count:,}" for reason, count in sorted(summary.failed.items())
        )
    if summary.interrupted:
        line += "\ninterrupted: run the same command again to load the rest"
    return line


@cli.command("load", context_settings={"help_option_names": ["-h", "--help"]})
@click.argument("paths", nargs=-1, required=True, metavar="PATH...")
@_database_options
@click.option("--create", is_flag=True, help="Create and enable the table if it is missing.")
@click.option("--include", multiple=True, metavar="GLOB",
              help="Only files matching (path below the directory, or name); repeatable.")
@click.option("--exclude", multiple=True, metavar="GLOB", help="Skip matching files; repeatable.")
@click.option("--hidden", is_flag=True, help="Also walk files and directories named .*")
@click.option("--format", "records", default="auto", show_default=True,
              type=click.Choice(["auto", "files", "jsonl", "csv"]),
              help="auto: *.jsonl/*.ndjson and *.csv/*.tsv hold one document per record.")
@click.option("--id-field", default="id", show_default=True,
              help="Record field with the document's key (missing: file:line).")
@click.option("--text-field", default="text", show_default=True,
              help="Record field with the document's text.")
@click.option("--encoding", default="utf-8", show_default=True,
              help="Encoding of text files, or 'auto' to detect it.")
@click.option("--max-bytes", type=ByteSize(), default=DEFAULT_MAX_BYTES, show_default=True,
              help="Larger documents are reported and skipped, before sending.")
@click.option("--server-side", is_flag=True,
              help="Let the database compute the fingerprints (slower).")
@click.option("--workers", type=click.IntRange(1, 256),
              help="Processes that read and fingerprint [default: one per CPU].")
@click.option("--batch-rows", type=click.IntRange(1), default=2000, show_default=True,
              help="Documents per transaction.")
@click.option("--errors", "errors_file", type=click.File("w", encoding="utf-8", lazy=False),
              help="Write the failures to this file as JSON Lines.")
@click.option("--bands", type=click.IntRange(MIN_BANDS, MAX_BANDS),
              help="Bucket index layout with --create.")
@_profile_option("Fingerprint profile [default: the table's; default/1 for a table --create"
                 " makes]; an existing table's must be this one.")
@click.option("--quiet", "-q", is_flag=True, help="No progress bar.")
@click.option("--json", "as_json", is_flag=True, help="Print the summary as JSON on stdout.")
def load_command(
    paths: tuple[str, ...], dsn: str | None, table: str, create: bool,
    include: tuple[str, ...], exclude: tuple[str, ...], hidden: bool, records: str,
    id_field: str, text_field: str, encoding: str, max_bytes: int, server_side: bool,
    workers: int | None, batch_rows: int, errors_file: IO[str] | None, bands: int | None,
    profile: str | None, quiet: bool, as_json: bool,
) -> None:  # fmt: skip
    """Load documents from files, directories, JSON Lines or CSV.

    PATH is a file, a directory (walked recursively) or - for a list of paths
    on stdin. Text, Markdown, HTML, PDF and Word (.docx) files are read; each
    file that cannot be loaded is reported with the reason and skipped. Loading
    the same files again adds nothing; an interrupted load is finished by
    running it again.

    Exit status: 0 all loaded, 1 some inputs failed, 2 usage or connection
    error, 130 interrupted.

    \b
    Examples:
        nearsim-load --create ~/review-set
        find /srv/docs -name '*.pdf' | nearsim-load -
        nearsim-load --format jsonl --id-field url --text-field body crawl.jsonl
    """
    try:
        check_encoding(encoding)
    except ValueError as error:
        raise click.BadParameter(str(error), param_hint="--encoding") from error
    formats: dict[str, RecordFormat] = {"auto": "auto", "files": "none", "jsonl": "jsonl",
                                        "csv": "csv"}  # fmt: skip
    record_format = formats[records]
    source_options = SourceOptions(
        include=include, exclude=exclude, hidden=hidden, records=record_format,
        id_field=id_field, text_field=text_field, encoding=encoding, max_bytes=max_bytes,
    )  # fmt: skip
    options = LoadOptions(
        max_bytes=max_bytes, encoding=encoding, batch_rows=batch_rows, workers=workers,
        server_side=server_side, profile=profile,
    )  # fmt: skip
    show_progress = not quiet and sys.stderr.isatty()
    loading = partial(load_paths, paths, table, dsn=dsn, create=create, bands=bands,
                      source_options=source_options, options=options, stdin=sys.stdin)
    try:
        with _errors():
            if show_progress:
                with _progress_bar() as bar:
                    reporter = _ConsoleReporter(errors_file, bar)
                    if "-" not in paths:
                        bar.update(reporter.task, total=_scan_size(paths, source_options))
                    summary = loading(reporter=reporter)
            else:
                summary = loading(reporter=_ConsoleReporter(errors_file))
    except KeyboardInterrupt:
        # Ctrl-C before the load began or after it ended (connecting,
        # creating the table, closing): nothing half done; one line, 130.
        click.echo("interrupted: no batch was open; run the same command again", err=True)
        sys.exit(EXIT_INTERRUPTED)
    if as_json:
        _print_json(summary.as_dict())
    if not (summary.loaded or summary.updated or summary.unchanged or summary.failures
            or summary.interrupted or summary.error):
        click.echo("warning: no documents found in " + ", ".join(paths)
                   + (" (check --include and --exclude)" if include or exclude else ""), err=True)
    if summary.error is not None:
        raise Fatal(f"{summary.error} ({_summary_line(summary)}); run the same command again"
                    " to finish the load")
    click.echo(_summary_line(summary), err=True)
    if summary.interrupted:
        sys.exit(EXIT_INTERRUPTED)
    if summary.failures:
        sys.exit(EXIT_FAILURES)



# -- queries -----------------------------------------------------------------------


def _warn_if_short(query: str) -> None:
    """A query without words finds nothing; one of few shingles has a jumpy fingerprint."""
    shingles = len(measures.Shingled(query).shingles)
    if not shingles:
        click.echo("warning: the query has no words: it has no fingerprint and finds nothing",
                   err=True)
    elif shingles < measures.SHORT_SHINGLES:
        click.echo(f"warning: the query has {shingles} shingle(s): a fingerprint of fewer than"
                   f" {measures.SHORT_SHINGLES} is unreliable, near-duplicates may be missed",
                   err=True)  # fmt: skip


def _query_text(text: str | None, file: str | None) -> str:
    if (text is None) == (file is None):
        raise click.UsageError("give either TEXT or --file FILE")
    if file == "-":  # the query document on standard input, as nearsim-load reads paths
        return sys.stdin.read()
    if file is not None:
        try:
            return read_text(file, max_bytes=DEFAULT_MAX_BYTES)
        except InputError as error:
            raise Fatal(f"{file}: {error.message}") from error
    assert text is not None
    return text


@cli.command()
@click.argument("text", required=False)
@click.option("--file", "-f", metavar="FILE",
              help="Take the query document from a file (- for standard input).")
@_distance_option
@_verified_options
@click.option("--limit", type=click.IntRange(1), help="At most this many documents.")
@_database_options
@_json_option
@click.pass_context
def similar(
    ctx: click.Context, text: str | None, file: str | None, max_distance: int,
    min_similarity: float | None, measure: str, limit: int | None,
    dsn: str | None, table: str, as_json: bool,
) -> None:  # fmt: skip
    """Stored documents similar to TEXT or to a file.

    By Hamming distance (nearest first), or with --min-similarity by the
    exact similarity of the texts (most similar first), which is what
    "90% similar" means; documents with fewer than 10 shingles are marked
    short: their fingerprints are unreliable.

    \b
    Examples:
        nearsim similar "In the beginning God created the heaven and the earth"
        nearsim similar --file contract-v2.pdf -k 10 --json
        nearsim similar --file memo.docx --min-similarity 0.8
    """
    query = _query_text(text, file)
    _warn_if_short(query)
    with _errors():
        conn, documents = _open(dsn, table)
        with conn:
            if min_similarity is not None:
                verified = documents.similar_verified(
                    query, min_similarity, measure, _radius(ctx, max_distance), limit)
            else:
                matches = documents.similar(query, max_distance, limit)
    if min_similarity is not None:
        if as_json:
            _print_json([asdict(match) for match in verified])
            return
        for found in verified:
            short = "  (short)" if found.short else ""
            click.echo(f"{found.similarity:6.1%}  {found.distance:2d}  {found.key}{short}")
        return
    if as_json:
        _print_json([asdict(match) for match in matches])
        return
    for match in matches:
        source = f"  {match.source}" if match.source and match.source != match.key else ""
        click.echo(f"{match.distance:2d}  {match.key}{source}")


@cli.command()
@_distance_option
@_verified_options
@_database_options
@_json_option
@click.pass_context
def pairs(
    ctx: click.Context, max_distance: int, min_similarity: float | None, measure: str,
    dsn: str | None, table: str, as_json: bool,
) -> None:  # fmt: skip
    """Every pair of stored documents within the distance.

    With --min-similarity, the pairs whose texts are at least that similar.

    \b
    Examples:
        nearsim pairs -k 3 --json > pairs.json
        nearsim pairs --min-similarity 0.9
    """
    with _errors():
        conn, documents = _open(dsn, table)
        with conn:
            if min_similarity is not None:
                verified = documents.pairs_verified(min_similarity, measure,
                                                    _radius(ctx, max_distance))  # fmt: skip
                if as_json:
                    _print_json_array(asdict(pair) for pair in verified)
                else:
                    for found in verified:
                        short = "  (short)" if found.short else ""
                        click.echo(f"{found.similarity:6.1%}  {found.distance:2d}  {found.a}  "
                                   f"{found.b}{short}")  # fmt: skip
                return
            # closing: a reader that stops early (| head) ends the query at
            # once; a suspended stream would hold the connection's lock
            with closing(documents.pairs(max_distance)) as plain:
                if as_json:
                    _print_json_array(asdict(pair) for pair in plain)
                else:
                    for pair in plain:
                        click.echo(f"{pair.distance:2d}  {pair.a}  {pair.b}")


@cli.command()
@_distance_option
@click.option("--method", type=click.Choice(["components", "pivot"]), default="components",
              show_default=True,
              help="components: linked through any chain of pairs; pivot: every member "
              "within the distance of the group's pivot.")
@click.option("--min-size", type=click.IntRange(1), default=2, show_default=True,
              help="Only groups of at least this many documents.")
@_verified_options
@_database_options
@_json_option
@click.pass_context
def clusters(
    ctx: click.Context, max_distance: int, method: str, min_size: int,
    min_similarity: float | None, measure: str, dsn: str | None, table: str, as_json: bool,
) -> None:  # fmt: skip
    """Groups of near-duplicate documents, largest first.

    With --min-similarity, groups linked by pairs whose texts are at least
    that similar.

    \b
    Examples:
        nearsim clusters -k 6 --method pivot
        nearsim clusters --min-similarity 0.8 --json
    """
    with _errors():
        conn, documents = _open(dsn, table)
        with conn:
            groups = (documents.clusters(max_distance, method, min_size)
                      if min_similarity is None else documents.clusters_verified(
                          min_similarity, measure, _radius(ctx, max_distance), method, min_size))
            with closing(groups) as found:  # see pairs
                if as_json:
                    _print_json_array(asdict(cluster) for cluster in found)
                    return
                for number, cluster in enumerate(found, 1):
                    click.echo(f"cluster {number}: {len(cluster.members)} documents")
                    for member in cluster.members:
                        click.echo(f"  {member}{'  (pivot)' if member == cluster.pivot else ''}")


class _OnDemand:
    """The documents table, connected to only when first asked for (files need no database)."""

    def __init__(self, dsn: str | None, table: str) -> None:
        self.dsn, self.table = dsn, table
        self.opened: tuple[psycopg.Connection[Any], DocumentTable] | None = None

    def __call__(self) -> DocumentTable:
        if self.opened is None:
            self.opened = _open(self.dsn, self.table)
        return self.opened[1]

    def __enter__(self) -> _OnDemand:
        return self

    def __exit__(self, *exc: object) -> None:
        if self.opened is not None:
            self.opened[0].close()


def _comparison_profile(names: Iterable[str], asked: str | None,
                        documents: Callable[[], DocumentTable]) -> str:  # fmt: skip
    """The profile to compare with: the table's if a document is stored, else --profile."""
    if all(os.path.exists(name) for name in names):
        return asked or PROFILE
    table = documents()
    profile = table.require_enabled().profile
    if asked is not None and asked != profile:
        raise Fatal(f"table {table} holds fingerprints of profile {profile}, not {asked}")
    return profile


def _document_of(
    name: str, documents: Callable[[], DocumentTable], profile: str | None = None
) -> tuple[dict[str, Any], str, int | None]:
    """A file's text and fingerprint (with ``profile``, if given), or else a stored document's."""
    if os.path.exists(name):
        try:
            text = read_text(name, max_bytes=DEFAULT_MAX_BYTES)
        except InputError as error:
            raise Fatal(f"{name}: {error.message}") from error
        try:
            fingerprint = None if profile is None else simhash(text, profile)
        except RuntimeError as error:  # a library the profile needs
            raise Fatal(str(error)) from error
        return {"name": name, "kind": "file", "bytes": len(text.encode())}, text, fingerprint
    table = documents()
    stored = table.document(name)
    if stored is None:
        raise Fatal(f"{name} is neither a file nor the key of a document in {table}")
    text = stored.text or ""  # a NULL text has no words
    info = {"name": name, "kind": "document", "table": str(table), "bytes": len(text.encode())}
    return info, text, stored.fingerprint


def _measured(text_a: str, text_b: str) -> dict[str, Any]:
    """The exact measures of a pair and the MinHash estimate of its resemblance."""
    exact = measures.compare(text_a, text_b)
    estimate = measures.minhash_estimate(measures.minhash_signature(text_a),
                                         measures.minhash_signature(text_b))  # fmt: skip
    return {
        "words": {"longer": exact.longer, "shorter": exact.shorter, "common": exact.common,
                  "chunks": len(exact.chunks), "min_chunk_words": exact.min_chunk_words},
        "s_l": round(exact.s_l, 4), "s_j": round(exact.s_j, 4),
        "information_s_l": round(exact.information_s_l, 4),
        "information_s_j": round(exact.information_s_j, 4),
        "s_r": round(exact.s_r, 4), "shingle_words": exact.shingle_words,
        "containment": round(exact.containment, 4),
        "multiset_jaccard": round(exact.multiset_jaccard, 4),
        "minhash": {"estimate": round(estimate.value, 4), "low": round(estimate.low, 4),
                    "high": round(estimate.high, 4), "hashes": estimate.hashes},
    }  # fmt: skip


@cli.command()
@click.argument("a")
@click.argument("b")
@_distance_option
@_verified_options
@_profile_option("Fingerprint profile for files [default: default/1; the table's for stored"
                 " documents].")
@_database_options
@_json_option
@click.pass_context
def compare(
    ctx: click.Context, a: str, b: str, max_distance: int, min_similarity: float | None,
    measure: str, profile: str | None, dsn: str | None, table: str, as_json: bool,
) -> None:  # fmt: skip
    """Compare two documents: files, or keys of stored documents.

    Prints both fingerprints as bits with the differing ones marked and the
    Hamming distance (bits apart, not a similarity); then what the texts
    really share: S_L (the share of the longer text found in the shorter),
    S_J (common words over all words of the pair), both with literal and
    with information matching of passages of at least 5 words; S_R (the
    Jaccard coefficient of the 3-word shingle sets), containment, and the
    MinHash estimate of S_R with its 95% interval. The verdict is measured:
    near-duplicates when S_R (--measure) is at least 0.8 (--min-similarity);
    with -k and no --min-similarity, when the fingerprints are at most -k
    bits apart.

    \b
    Examples:
        nearsim compare draft-1.docx draft-2.docx
        nearsim compare draft-1.docx draft-2.docx -s 0.9 --measure containment
        nearsim compare /srv/docs/a.txt /srv/docs/b.txt -k 3 --json
    """
    by_bits = min_similarity is None and _radius(ctx, max_distance) is not None
    threshold = DEFAULT_MIN_SIMILARITY if min_similarity is None else min_similarity
    with _errors(), _OnDemand(dsn, table) as documents:
        used = _comparison_profile((a, b), profile, documents)
        first, first_text, first_fp = _document_of(a, documents, used)
        second, second_text, second_fp = _document_of(b, documents, used)
    result: dict[str, Any] = {"a": first, "b": second, "profile": used}
    for side, fingerprint in ((first, first_fp), (second, second_fp)):
        side["fingerprint"] = fingerprint
        side["bits"] = None if fingerprint is None else bits(fingerprint)
    distance = None if first_fp is None or second_fp is None else hamming(first_fp, second_fp)
    result["distance"] = distance
    result["measures"] = _measured(first_text, second_text)
    measured = float(measures.verified_measure(measure, measures.Shingled(first_text),
                                               measures.Shingled(second_text)))  # fmt: skip
    result["similarity"] = round(measured, 4)  # measured on the texts
    result["measure"] = measure
    if by_bits:
        result["max_distance"] = max_distance
        result["near_duplicates"] = distance is not None and distance <= max_distance
    else:
        result["min_similarity"] = threshold
        result["near_duplicates"] = measured >= threshold
    if as_json:
        _print_json(result)
        return
    for label, side in (("A", first), ("B", second)):
        click.echo(f"{label} {side['bits'] or '(no words: no fingerprint)'}  {side['name']}")
    if result["distance"] is None:
        click.echo("no distance: a document without words has no fingerprint")
    else:
        marks = "".join("^" if x != y else " " for x, y in zip(first["bits"], second["bits"],
                                                               strict=True))  # fmt: skip
        click.echo(f"  {marks}".rstrip())
        click.echo(f"Hamming distance {result['distance']} of {BITS} bits (profile {used})")
    verdict = "NEAR-DUPLICATES" if result["near_duplicates"] else "not near-duplicates"
    if by_bits:
        click.echo(f"{verdict} at -k {max_distance} (bits apart, not a measured similarity)")
    else:
        relation = ">=" if result["near_duplicates"] else "<"
        click.echo(f"{verdict}: {measure} {measured:.1%} {relation} {threshold:.0%}")
    m = result["measures"]
    words, minhash = m["words"], m["minhash"]
    click.echo(f"words: longer {words['longer']:,}, shorter {words['shorter']:,}, common "
               f"{words['common']:,} in {words['chunks']:,} passages of >= "
               f"{words['min_chunk_words']} words")  # fmt: skip
    click.echo(f"S_L {m['s_l']:.1%}  S_J {m['s_j']:.1%}  (information matching: S_L "
               f"{m['information_s_l']:.1%}, S_J {m['information_s_j']:.1%})")  # fmt: skip
    click.echo(f"S_R {m['s_r']:.1%} (Jaccard of {m['shingle_words']}-word shingles), "
               f"containment {m['containment']:.1%}, MinHash estimate of S_R "
               f"{minhash['estimate']:.1%} [{minhash['low']:.1%}, {minhash['high']:.1%}] "
               f"with {minhash['hashes']} hashes")  # fmt: skip


@cli.command()
@click.argument("names", nargs=-1, metavar="[A B...]")
@click.option("--cluster", metavar="KEY",
              help="Instead of A B...: every member of KEY's group against its pivot"
              " (pivot groups within -k, or of verified pairs with --min-similarity).")
@click.option("--output", "-o", type=click.Path(dir_okay=False, writable=True), required=True,
              help="The HTML file to write.")
@_distance_option
@_verified_options
@_database_options
@click.pass_context
def report(
    ctx: click.Context, names: tuple[str, ...], cluster: str | None, output: str,
    max_distance: int, min_similarity: float | None, measure: str, dsn: str | None, table: str,
) -> None:  # fmt: skip
    """Write an HTML page of documents side by side, common passages marked.

    A B...: files or keys of stored documents; each of B... is shown next
    to A. The page is self-contained (no scripts, nothing to download).

    \b
    Examples:
        nearsim report draft-1.docx draft-2.docx -o drafts.html
        nearsim report --cluster /srv/docs/memo.txt -s 0.8 -o memo-group.html
    """
    if (cluster is None) == (not names) or (cluster is None and len(names) < 2):
        raise click.UsageError("give two or more documents A B..., or --cluster KEY")
    directory = os.path.dirname(os.path.abspath(output))
    if not os.path.isdir(directory):  # before the work, not after it
        raise click.BadParameter(f"directory {directory} does not exist", param_hint="--output")
    with _errors(), _OnDemand(dsn, table) as documents:
        if cluster is not None:
            names = _cluster_members(documents(), cluster, max_distance, min_similarity,
                                     measure, _radius(ctx, max_distance))  # fmt: skip
        texts = [html_report.Document(name, _document_of(name, documents)[1]) for name in names]
    page = html_report.report(texts[0], texts[1:])
    try:
        with open(output, "w", encoding="utf-8") as file:
            file.write(page)
    except OSError as error:
        raise Fatal(f"cannot write {output}: {error.strerror or error}") from error
    click.echo(f"wrote {output}: {texts[0].name} and {len(texts) - 1} other document(s)",
               err=True)  # fmt: skip


def _cluster_members(
    documents: DocumentTable, key: str, max_distance: int, min_similarity: float | None,
    measure: str, radius: int | None,
) -> tuple[str, ...]:
    """The pivot group holding ``key``, its pivot first."""
    groups = (documents.clusters(max_distance, "pivot") if min_similarity is None
              else documents.clusters_verified(min_similarity, measure, radius, "pivot"))
    with closing(groups) as found:  # the rest of the stream is not needed
        for group in found:
            if key in group.members:
                return tuple(group.members)
    raise Fatal(f"{key} is in no group of near-duplicates in {documents}")


@cli.command()
@click.option("--check-fingerprints", is_flag=True,
              help="Recompute every stored fingerprint (reads all texts), not only a"
              " sample of about 1,000 rows.")
@_database_options
@_json_option
def stats(check_fingerprints: bool, dsn: str | None, table: str, as_json: bool) -> None:
    """Documents, fingerprint profile and bucket index health of a table.

    Exit status 1 when the bucket index needs repair (nearsim_rebuild).

    \b
    Example:
        nearsim stats --table docs --json
    """
    with _errors():
        conn, documents = _open(dsn, table)
        with conn:
            result = documents.stats(True if check_fingerprints else None)
    if as_json:
        _print_json(result)
    else:
        click.echo(f"table          {result['table']}")
        click.echo(f"documents      {result['documents']:,}")
        click.echo(f"fingerprinted  {result['fingerprinted']:,}")
        click.echo(f"profile        {result['profile']}")
        click.echo(f"size           {_human_bytes(result['table_bytes'] or 0)}")
        click.echo(f"bucket index   {result['bands']} bands, "
                   f"{'healthy' if result['buckets']['ok'] else 'NEEDS REPAIR'}")  # fmt: skip
        for line in _faults(result["buckets"]):
            click.echo(f"  {line}")
        if not result["buckets"]["ok"]:
            click.echo(f"repair with: SELECT nearsim_rebuild({_sql_literal(result['table'])});"
                       " see nearsim_verify for what it found")
    if not result["buckets"]["ok"]:
        sys.exit(EXIT_FAILURES)


def _faults(health: dict[str, Any]) -> list[str]:
    """Every fault nearsim_verify reports, one line each (counts, failed checks, keys)."""
    lines = []
    for name, value in health.items():
        if name in ("ok", "bands", "documents", "fingerprinted", "buckets"):
            continue
        if isinstance(value, bool):
            if not value:
                lines.append(f"{name}: no")
        elif isinstance(value, int):
            if value:
                lines.append(f"{name}: {value:,}")
        elif isinstance(value, list):
            if value:
                lines.append(f"{name}: {', '.join(map(str, value))}")
        elif value is not None:
            lines.append(f"{name}: {value}")
    return lines


def _sql_literal(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


cli.add_command(load_command)


def main() -> None:
    """Entry point of ``nearsim``."""
    cli(prog_name="nearsim")


def load_main() -> None:
    """Entry point of ``nearsim-load`` (the same as ``nearsim load``)."""
    load_command(prog_name="nearsim-load")


__all__ = ["cli", "load_command", "load_main", "main"]


if __name__ == "__main__":
    main()
