"""``nearsim spark``: nearsim's questions over files, on Apache Spark (nearsim.spark)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from ..core.bits import BITS
from ..core.measures import SET_DEFAULT_MIN_SIMILARITY, VERIFIED_MEASURES
from ..core.survivors import Keep
from .clitools import (
    DEFAULT_MAX_DISTANCE,
    SIMILARITY,
    Commands,
    Fatal,
    ProfileName,
    print_json,
    search_of,
)
from .connect import ConnectionFailed, resolve_dsn
from .dedupcli import KEEP_HELP, KeepPolicy
from .sparkrun import session_options, spark_session

FORMATS = ("parquet", "jsonl", "csv", "text")


@click.group("spark", cls=Commands)
def spark_group() -> None:
    """Near-duplicates of collections too large for one machine, on Apache Spark.

    The same groups as nearsim clusters, from files instead of a table.
    Needs pip install 'nearsim[spark]' and a Java runtime; see docs/SPARK.md.
    Only errors are logged (--spark-log-level warn shows Spark's warnings);
    local masters get a third of this machine's memory (--driver-memory).
    Ctrl-C cancels the job, stops Spark and ends with status 130.

    \b
    Example:
      nearsim spark dedup crawl.jsonl --key-column url --text-column body -o groups.parquet
    """


@spark_group.command("dedup")
@click.argument("inputs", nargs=-1, required=True, metavar="INPUT...")
@click.option("--format", "input_format", type=click.Choice(FORMATS),
              help="The input's format [default: from the file names].")
@click.option("--key-column", metavar="KEY",
              help="The column (field) of the documents' keys [text files: path].")
@click.option("--text-column", metavar="TEXT",
              help="The column (field) of the documents' texts [text files: text].")
@click.option("--min-similarity", "-s", type=SIMILARITY, metavar="S",
              default=SET_DEFAULT_MIN_SIMILARITY, show_default=True,
              help="Group documents at least S similar, measured on the texts.")
@click.option("--measure", type=click.Choice(VERIFIED_MEASURES), default="s_r",
              show_default=True, help="The exact measure of -s.")
@click.option("-k", "--max-distance", type=click.IntRange(0, BITS), metavar="K",
              help="With --hamming, the largest Hamming distance in bits; otherwise the radius"
              " in which candidates are looked for [default: none for s_r, whose pairs are"
              " found by an exact join of the shingle sets; calibrated for -s otherwise].")
@click.option("--hamming", "by_bits", is_flag=True,
              help=f"Unverified: by fingerprint distance only, within -k bits [default:"
              f" {DEFAULT_MAX_DISTANCE}].")
@click.option("--method", type=click.Choice(["components", "pivot"]), default="components",
              show_default=True,
              help="components: linked through any chain of pairs; pivot: every member "
              "paired with the group's pivot.")
@click.option("--profile", "-p", type=ProfileName(), default="default/1", show_default=True,
              metavar="PROFILE", help="The fingerprint profile.")
@click.option("--output", "-o", metavar="PATH",
              help="Where to write the groups (a Parquet directory).")
@click.option("--into-table", metavar="TABLE",
              help="Also write the survivors (each group's survivor by --keep and every document"
              " without a near-duplicate) with their fingerprints into this nearsim-enabled"
              " table, by COPY from the executors.")
@click.option("--on-conflict", type=click.Choice(["error", "skip", "replace"]), default="error",
              show_default=True,
              help="With --into-table, a survivor whose key is stored already: error fails"
              " its partition; skip leaves the stored row; replace replaces its text and"
              " fingerprint. skip and replace make a failed run safe to run again.")
@click.option("--dsn", metavar="DSN", envvar="NEARSIM_DSN", show_envvar=True,
              help="PostgreSQL connection string for --into-table, used by the executors as"
              " given. Default: NEARSIM_DSN, then the PG* environment variables.")
@click.option("--keep", type=KeepPolicy(), default="first", show_default=True,
              metavar="first|longest|newest:FIELD", help=KEEP_HELP + " As nearsim dedup does.")
@click.option("--survivors", metavar="PATH",
              help="Write the survivors (one document per group by --keep, and every good"
              " document without a near-duplicate) with all of the input's columns: Parquet,"
              " or JSON Lines or CSV for a PATH ending in .jsonl or .csv (a directory).")
@click.option("--mapping", metavar="PATH",
              help="Write removed -> kept, one row per removed document (columns removed and"
              " kept), in the format its suffix names as for --survivors.")
@click.option("--overwrite", is_flag=True, help="Replace the output if it exists.")
@click.option("--master", metavar="URL",
              help="Spark master, e.g. spark://host:7077 [default: spark-submit's, else the"
              " --master of PYSPARK_SUBMIT_ARGS, else local[*]].")
@click.option("--json", "as_json", is_flag=True, help="Print the summary as JSON.")
@session_options
@click.pass_context
def dedup_command(ctx: click.Context, inputs: tuple[str, ...], input_format: str | None,
                  key_column: str | None, text_column: str | None, min_similarity: float,
                  measure: str, max_distance: int | None, by_bits: bool, method: str,
                  profile: str,
                  output: str | None, into_table: str | None, on_conflict: str,
                  dsn: str | None, overwrite: bool, master: str | None, as_json: bool,
                  keep: Keep, survivors: str | None, mapping: str | None) -> None:
    """Group the near-duplicates among INPUT files (Parquet, JSON Lines, CSV or text).

    Writes one row per document that has a near-duplicate: its key (under
    the key column's name and type), cluster (the group's smallest key) and
    pivot (the key of the group's pivot with --method pivot, else NULL), the
    groups of nearsim clusters with the same options.  Bad rows (no key, a
    duplicate key, no text, a text that is not a string, a broken record)
    are counted in the summary and left out.  The survivors (one document
    of each group, chosen by --keep as nearsim dedup chooses it, and every
    good document without a near-duplicate) go with all of the input's
    columns to --survivors, removed -> kept to --mapping, and with their
    fingerprints into a nearsim-enabled table with --into-table.

    \b
    Examples:
      nearsim spark dedup crawl.jsonl --key-column url --text-column body -o groups.parquet
      nearsim spark dedup crawl.jsonl --key-column id --text-column text --keep newest:fetched \\
          --survivors corpus.jsonl --mapping removed.csv
      nearsim spark dedup mail.parquet --key-column id --text-column body --hamming -k 3 \\
          --method pivot -o groups.parquet --master local[2]
      nearsim spark dedup crawl/ --format jsonl --key-column url --text-column body \\
          --into-table pages --on-conflict skip --dsn "host=db dbname=crawl"
    """
    search = search_of(ctx)
    if output is None and into_table is None and survivors is None and mapping is None:
        raise click.UsageError("give --output, --survivors, --mapping or --into-table")
    if on_conflict != "error" and into_table is None:
        raise click.UsageError("--on-conflict is for --into-table")
    try:
        from ..spark import dedup
        from ..spark.database import WriteError
        from ..spark.documents import DocumentsError
    except ImportError as error:
        raise Fatal(f"{error}: install the Spark extra: pip install 'nearsim[spark]'") from error
    resolved = None
    if into_table is not None:
        try:
            resolved = resolve_dsn(dsn)
        except ConnectionFailed as error:
            raise Fatal(str(error)) from error
    with spark_session(ctx, master) as spark:
        try:
            _, summary = dedup(
                spark, list(inputs), output, key_column=key_column, text_column=text_column,
                format=input_format,
                min_similarity=None if search.hamming else search.min_similarity,
                max_distance=search.max_distance, measure=search.measure, profile=profile,
                overwrite=overwrite, method=method, into_table=into_table, dsn=resolved,
                on_conflict=on_conflict, keep=keep, survivors=survivors,
                mapping=mapping)  # fmt: skip
        except (DocumentsError, ValueError, WriteError) as error:
            raise Fatal(str(error)) from error
    report: dict[str, Any] = summary.as_dict()
    if as_json:
        print_json(report)
    else:
        for line in summary.lines():
            click.echo(line, err=True)


@spark_group.command("job-file")
def job_file_command() -> None:
    """Print the path of the program to give spark-submit.

    spark-submit runs it as the job's driver, with its own master and
    options; the arguments after it are those of nearsim spark.

    \b
    Example:
      spark-submit --master yarn --deploy-mode cluster "$(nearsim spark job-file)" \\
          dedup hdfs:///crawl/ --key-column url --text-column body -o hdfs:///groups
    """
    click.echo(str(Path(__file__).resolve().parent.parent / "spark" / "job.py"))


__all__ = ["dedup_command", "job_file_command", "spark_group"]
