"""The ``nearsim-load`` command (also ``nearsim load``): arguments in, load_paths out."""

from __future__ import annotations

import json
import signal
import sys
import threading
import time
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


def _rate(documents: int, seconds: float) -> str:
    """Documents per second as the bar and the summary show it: 0 only when
    none were done (one 50 MB document in 3.3 s is 0.3 docs/s)."""
    if documents == 0:
        return "0"
    if seconds <= 0:
        return "-"
    rate = documents / seconds
    return f"{rate:,.0f}" if rate >= 10 else f"{rate:.2g}"


class _CtrlC:
    """SIGINT for the command, outside the load (the loader has its own in it).

    Before the load begins, Ctrl-C stops the command (KeyboardInterrupt:
    nothing is half done).  Once it has begun, whatever came after it is
    decided (every batch committed or rolled back) and the summary is on its
    way: Ctrl-C is ignored.  A KeyboardInterrupt there could stop the command
    before the summary, or land in a finalizer while connections close, where
    Python prints it and drops it.
    """

    # Set by the entry points: the process ends with the command, and after
    # the load the handler stays, so that a Ctrl-C while Python exits is
    # ignored too.
    process_ends_with_command = False

    def __init__(self) -> None:
        self.load_began = False

    def __call__(self, signum: int, frame: object) -> None:
        if not self.load_began:
            raise KeyboardInterrupt


def the_process_ends_with_the_command() -> None:
    """Called by the entry points: a Ctrl-C after the load is ignored until the exit."""
    _CtrlC.process_ends_with_command = True


class _ConsoleReporter(Reporter):
    """Failures on stderr (and to --errors); progress in a bar, when there is one.

    The bar moves as the loader's workers finish documents, by the bytes read
    for them; its rate is the documents done over the time since the load
    began, as the summary's is.
    """

    def __init__(self, errors: IO[str] | None, ctrl_c: _CtrlC, bar: Any | None = None,
                 encodings: dict[str, str] | None = None) -> None:  # fmt: skip
        self.errors = errors
        self.encodings = encodings  # source -> encoding, collected for --json
        self.ctrl_c = ctrl_c
        self.bar = bar
        # no total until the inputs are measured (never with paths on stdin)
        self.task = TaskID(0) if bar is None else bar.add_task("load", total=None, done=0, rate="0")
        self.done = 0
        self.began = time.perf_counter()

    def started(self) -> None:
        self.began = time.perf_counter()
        self.ctrl_c.load_began = True

    def _print(self, line: str) -> None:
        if self.bar is not None:
            self.bar.console.print(line, markup=False, highlight=False)
        else:
            click.echo(line, err=True)

    def warning(self, message: str) -> None:
        self._print(f"warning: {message}")

    def decoded(self, source: str, encoding: str) -> None:
        if self.encodings is not None:
            self.encodings[source] = encoding

    def failure(self, failure: Failure) -> None:
        self._print(f"{failure.source}: {failure.message} [{failure.reason}]")
        if self.errors is not None:
            self.errors.write(json.dumps(asdict(failure), ensure_ascii=False) + "\n")

    def progress(self, documents: int, size: int) -> None:
        if self.bar is None:
            return
        self.done += documents
        rate = _rate(self.done, time.perf_counter() - self.began)
        self.bar.update(self.task, advance=size, done=self.done, rate=rate)

    def finish(self, summary: LoadSummary) -> None:
        """The bar's last state: the summary's figures; full when the load ended."""
        if self.bar is None:
            return
        task = self.bar.tasks[0]
        completed = (
            task.total
            if task.total is not None and not (summary.interrupted or summary.error)
            else task.completed
        )
        self.bar.update(self.task, completed=completed, done=summary.documents,
                        rate=_rate(summary.documents, summary.seconds))  # fmt: skip


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
    for item in iter_inputs(paths, replace(options, records="none", mail=False)):
        if isinstance(item, FileInput):
            total += item.size
    return total


def _field_column(value: str) -> tuple[str, str]:
    """--column FIELD=COLUMN: split at the first '=' (a column's name may hold one)."""
    record_field, equals, column = value.partition("=")
    if not (record_field and equals and column):
        raise click.BadParameter(f"{value!r} is not FIELD=COLUMN", param_hint="--column")
    return record_field, column


def _summary_line(summary: LoadSummary) -> str:
    rate = _rate(summary.documents, summary.seconds)  # as the bar counts: every input done
    parts = [
        f"{summary.loaded:,} loaded", f"{summary.updated:,} updated",
        f"{summary.unchanged:,} unchanged", f"{summary.failures:,} failed",
    ]  # fmt: skip
    line = (f"{', '.join(parts)}: {human_bytes(summary.bytes)} in {summary.seconds:.1f} s"
            f" ({rate} docs/s)")  # fmt: skip
    if summary.skipped or summary.recorded:
        line += (f"\nnear-duplicates: {summary.skipped:,} skipped,"
                 f" {summary.recorded:,} written and recorded")
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
    type=click.Choice(["auto", "files", "jsonl", "csv", "parquet"]),
    help="auto: *.jsonl/*.ndjson, *.csv/*.tsv and *.parquet hold one document per record"
    " (Parquet needs pyarrow: nearsim[spark]).",
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
    help="Encoding of text files, or 'auto' to detect it per file (a file that is valid"
    " UTF-8 is read as UTF-8 whatever is named, with a warning; e-mail parts go by their"
    " charset).",
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
    "--bands", type=click.IntRange(MIN_BANDS, MAX_BANDS),
    help="Bands of the rotation index with --create (default: 3).",
)
@click.option(
    "--replace",
    "replace_stored",
    is_flag=True,
    help="Replace documents whose key is stored from another file (else each is a failure).",
)
@click.option(
    "--key-column",
    metavar="COLUMN",
    help="A table of your own: the column the key goes to [default: the table's primary key].",
)
@click.option(
    "--text-column",
    metavar="COLUMN",
    help="A table of your own: the column the text goes to [default: the one it is enabled with].",
)
@click.option(
    "--column",
    "columns",
    multiple=True,
    metavar="FIELD=COLUMN",
    callback=lambda _ctx, _param, values: tuple(map(_field_column, values)),
    help="A table of your own: load record field FIELD into COLUMN; repeatable.",
)
@click.option(
    "--on-near-duplicate",
    type=click.Choice(["error", "skip", "record"]),
    help="A document within --near-distance bits of a stored one (or of an earlier one of"
    " this load): a near-duplicate failure (error), left out and counted (skip), or written"
    " and linked in <table>_nearsim_links (record). Checked one loader or guarded writer at a"
    " time, as nearsim_guard checks.",
)
@click.option(
    "--near-distance", type=click.IntRange(0, 64), default=3, show_default=True, metavar="K",
    help="Bits within which --on-near-duplicate counts a document a near-duplicate.",
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
    replace_stored: bool, key_column: str | None, text_column: str | None,
    columns: tuple[tuple[str, str], ...], on_near_duplicate: str | None, near_distance: int,
    profile: str | None, quiet: bool, as_json: bool,
) -> None:  # fmt: skip
    """Load documents from files, directories, JSON Lines or CSV.

    PATH is a file, a directory (walked recursively) or - for a list of paths
    on stdin. Text, Markdown, HTML, PDF, Word (.docx) and e-mail (.eml, .mbox,
    .msg: each message and attachment a document) files are read; each
    file that cannot be loaded is reported with the reason and skipped. Loading
    the same files again adds nothing and updates what changed; an interrupted
    load is finished by running it again. A key stored from another file is
    not replaced unless --replace is given.

    A table of your own, enabled with nearsim_enable, takes the key and text
    into the columns it is enabled with (or --key-column, --text-column) and
    other record fields with --column; see docs/LOADING.md.

    Exit status: 0 all loaded, 1 some inputs failed, 2 usage or connection
    error, 130 interrupted.

    \b
    Examples:
        nearsim-load --create ~/review-set
        find /srv/docs -name '*.pdf' | nearsim-load -
        nearsim-load --format jsonl --id-field url --text-field body crawl.jsonl
        nearsim-load --table articles --column title=title articles.jsonl
        nearsim-load --on-near-duplicate skip --near-distance 3 inbox/
    """
    try:
        check_encoding(encoding)
    except ValueError as error:
        raise click.BadParameter(str(error), param_hint="--encoding") from error
    if create and (key_column or text_column or columns):
        raise click.UsageError("--create makes a table of nearsim-load's own columns;"
                               " --key-column, --text-column and --column load into a table"
                               " of your own that exists")  # fmt: skip
    formats: dict[str, RecordFormat] = {"auto": "auto", "files": "none", "jsonl": "jsonl",
                                        "csv": "csv", "parquet": "parquet"}  # fmt: skip
    record_format = formats[records]
    source_options = SourceOptions(
        include=include, exclude=exclude, hidden=hidden, records=record_format,
        id_field=id_field, text_field=text_field, encoding=encoding, max_bytes=max_bytes,
    )  # fmt: skip
    options = LoadOptions(
        max_bytes=max_bytes, encoding=encoding, batch_rows=batch_rows, workers=workers,
        server_side=server_side, profile=profile, replace=replace_stored, key_column=key_column,
        text_column=text_column, columns=columns, on_near_duplicate=on_near_duplicate,
        near_distance=near_distance,
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
    ctrl_c = _CtrlC()
    encodings: dict[str, str] | None = {} if as_json else None
    main_thread = threading.current_thread() is threading.main_thread()  # or no signals
    previous = signal.signal(signal.SIGINT, ctrl_c) if main_thread else None
    try:
        try:
            with database_errors():
                if show_progress:
                    with _progress_bar() as bar:
                        reporter = _ConsoleReporter(errors_file, ctrl_c, bar, encodings)
                        if "-" not in paths:
                            bar.update(reporter.task, total=_scan_size(paths, source_options))
                        summary = loading(reporter=reporter)
                        reporter.finish(summary)
                else:
                    summary = loading(reporter=_ConsoleReporter(errors_file, ctrl_c,
                                                                encodings=encodings))
        except KeyboardInterrupt:
            # Ctrl-C before the load began (connecting, creating the table):
            # nothing half done; one line, 130.
            click.echo("interrupted: no batch was open; run the same command again", err=True)
            sys.exit(EXIT_INTERRUPTED)
        if as_json:
            print_json({**summary.as_dict(), "encodings": dict(sorted((encodings or {}).items()))})
        if not (
            summary.loaded
            or summary.updated
            or summary.unchanged
            or summary.skipped
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
        if not as_json:  # with --json the summary is on stdout, once
            click.echo(_summary_line(summary), err=True)
        if summary.interrupted:
            sys.exit(EXIT_INTERRUPTED)
        if summary.failures:
            sys.exit(EXIT_FAILURES)
    finally:
        if main_thread and not (ctrl_c.load_began and _CtrlC.process_ends_with_command):
            signal.signal(signal.SIGINT, previous)
