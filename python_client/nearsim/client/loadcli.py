"""The ``nearsim-load`` command (also ``nearsim load``): arguments in, load_paths out."""

from __future__ import annotations

import json
import sys
from dataclasses import asdict, replace
from functools import partial
from typing import IO, Any

import click
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

from ..core.bands import MAX_BANDS, MIN_BANDS
from .clitools import (
    EXIT_FAILURES,
    EXIT_INTERRUPTED,
    ByteSize,
    Fatal,
    database_errors,
    database_options,
    human_bytes,
    print_json,
    profile_option,
)  # fmt: skip
from .extract import check_encoding
from .loader import DEFAULT_MAX_BYTES, LoadOptions, LoadSummary, Reporter, load_paths
from .sources import Failure, FileInput, RecordFormat, SourceOptions, iter_inputs

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
    line = (f"{', '.join(parts)}: {human_bytes(summary.bytes)} in {summary.seconds:.1f} s"
            f" ({rate:,.0f} docs/s)")  # fmt: skip
    if summary.failed:
        line += "\nfailed: " + ", ".join(
            f"{reason} {count:,}" for reason, count in sorted(summary.failed.items())
        )
    if summary.interrupted:
        line += "\ninterrupted: run the same command again to load the rest"
    return line


@click.command("load", context_settings={"help_option_names": ["-h", "--help"]})
@click.argument("paths", nargs=-1, required=True, metavar="PATH...")
@database_options
@click.option("--create", is_flag=True, help="Create and enable the table if it is missing.")
@click.option(
    "--include",
    multiple=True,
    metavar="GLOB",
    help="Only files matching (path below the directory, or name); repeatable.",
)
@click.option("--exclude", multiple=True, metavar="GLOB", help="Skip matching files; repeatable.")
@click.option("--hidden", is_flag=True, help="Also walk files and directories named .*")
@click.option(
    "--format",
    "records",
    default="auto",
    show_default=True,
    type=click.Choice(["auto", "files", "jsonl", "csv"]),
    help="auto: *.jsonl/*.ndjson and *.csv/*.tsv hold one document per record.",
)
@click.option(
    "--id-field",
    default="id",
    show_default=True,
    help="Record field with the document's key (missing: file:line).",
)
@click.option(
    "--text-field", default="text", show_default=True, help="Record field with the document's text."
)
@click.option(
    "--encoding",
    default="utf-8",
    show_default=True,
    help="Encoding of text files, or 'auto' to detect it.",
)
@click.option(
    "--max-bytes",
    type=ByteSize(),
    default=DEFAULT_MAX_BYTES,
    show_default=True,
    help="Larger documents are reported and skipped, before sending.",
)
@click.option(
    "--server-side", is_flag=True, help="Let the database compute the fingerprints (slower)."
)
@click.option(
    "--workers",
    type=click.IntRange(1, 256),
    help="Processes that read and fingerprint [default: one per CPU].",
)
@click.option(
    "--batch-rows",
    type=click.IntRange(1),
    default=2000,
    show_default=True,
    help="Documents per transaction.",
)
@click.option(
    "--errors",
    "errors_file",
    type=click.File("w", encoding="utf-8", lazy=False),
    help="Write the failures to this file as JSON Lines.",
)
@click.option(
    "--bands", type=click.IntRange(MIN_BANDS, MAX_BANDS), help="Bucket index layout with --create."
)
@profile_option(
    "Fingerprint profile [default: the table's; default/1 for a table --create"
    " makes]; an existing table's must be this one."
)
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
    loading = partial(
        load_paths,
        paths,
        table,
        dsn=dsn,
        create=create,
        bands=bands,
        source_options=source_options,
        options=options,
        stdin=sys.stdin,
    )
    try:
        with database_errors():
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
        print_json(summary.as_dict())
    if not (
        summary.loaded
        or summary.updated
        or summary.unchanged
        or summary.failures
        or summary.interrupted
        or summary.error
    ):
        click.echo(
            "warning: no documents found in "
            + ", ".join(paths)
            + (" (check --include and --exclude)" if include or exclude else ""),
            err=True,
        )
    if summary.error is not None:
        raise Fatal(
            f"{summary.error} ({_summary_line(summary)}); run the same command again"
            " to finish the load"
        )
    click.echo(_summary_line(summary), err=True)
    if summary.interrupted:
        sys.exit(EXIT_INTERRUPTED)
    if summary.failures:
        sys.exit(EXIT_FAILURES)
