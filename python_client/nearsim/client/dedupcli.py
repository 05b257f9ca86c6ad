"""``nearsim dedup``: the deduplicated corpus out of a table (nearsim.client.dedup)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import click

from ..core.survivors import Keep, KeepError
from .clitools import (
    Fatal,
    database_errors,
    database_options,
    json_option,
    method_option,
    open_table,
    print_json,
    search_of,
    set_search_options,
)  # fmt: skip
from .dedup import DedupError, DedupOptions, dedup
from .records_out import FORMATS, OutputError

if TYPE_CHECKING:  # click 8.2+ types its ParamType; older ones are not generic
    _KeepParamType = click.ParamType[Keep, Any]
else:
    _KeepParamType = click.ParamType


class KeepPolicy(_KeepParamType):
    """first, longest or newest:FIELD."""

    name = "policy"

    def convert(self, value: Any, param: click.Parameter | None,
                ctx: click.Context | None) -> Keep:  # fmt: skip
        if isinstance(value, Keep):
            return value
        try:
            return Keep.parse(str(value))
        except KeepError as error:
            self.fail(str(error), param, ctx)


KEEP_HELP = ("Which document of a group survives: first, the smallest key; longest, the"
             " longest text (ties: the smallest key); newest:FIELD, the largest value of"
             " FIELD (a record field, or a column of your own table; NULLs last, ties: the"
             " smallest key).")


@click.command("dedup")
@click.argument("table_name", required=False, metavar="[TABLE]")
@set_search_options
@method_option
@click.option("--keep", type=KeepPolicy(), default="first", show_default=True,
              metavar="first|longest|newest:FIELD", help=KEEP_HELP)
@click.option("--output", "-o", metavar="PATH",
              help="Write the survivors to this file: JSON Lines, Parquet or CSV, by its"
              " suffix (.jsonl, .parquet, .csv) or --format.")
@click.option("--format", "output_format", type=click.Choice(FORMATS),
              help="The format of --output [default: from its suffix].")
@click.option("--mapping", metavar="PATH",
              help="Write removed -> kept (one row per removed document: its key and the kept"
              " one's) to this file, JSON Lines or CSV by its suffix.")
@click.option("--into-table", metavar="NAME",
              help="Write the survivors into a new plain table made like TABLE, and removed ->"
              " kept into NAME_removed.")
@click.option("--overwrite", is_flag=True,
              help="Replace an existing output, mapping or table (never TABLE itself).")
@click.option("--id-field", default="id", show_default=True, metavar="FIELD",
              help="From nearsim-load's own table: the name of the records' id in the output"
              " (a record without one gets its key).")
@click.option("--text-field", default="text", show_default=True, metavar="FIELD",
              help="From nearsim-load's own table: the name of the text in the output.")
@database_options
@json_option
@click.pass_context
def dedup_command(
    ctx: click.Context, table_name: str | None, min_similarity: float, measure: str,
    max_distance: int | None, by_bits: bool, method: str, keep: Keep, output: str | None,
    output_format: str | None, mapping: str | None, into_table: str | None, overwrite: bool,
    id_field: str, text_field: str, dsn: str | None, table: str, as_json: bool,
) -> None:  # fmt: skip
    """Write the deduplicated corpus: one document of each group, and every other.

    The groups are those `nearsim clusters` finds with the same options;
    by default, as `nearsim spark dedup`, pairs whose S_R is at least 0.8,
    found by an exact join at any size (--measure s_l -s 0.87 for the
    reviewer's default; --hamming, within -k bits). Every document without
    a near-duplicate survives, and one of each group, chosen by --keep; each
    with all of its record's fields (a table of your own: every column but
    the fingerprint). The summary goes
    to stderr (--json: to stdout).

    \b
    Examples:
        nearsim dedup docs -o corpus.jsonl --mapping removed.csv
        nearsim dedup docs --keep newest:fetched -s 0.9 -o corpus.parquet
        nearsim dedup articles --keep longest --into-table articles_dedup
    """
    search = search_of(ctx)
    if table_name is not None and ctx.get_parameter_source("table") \
            is not click.core.ParameterSource.DEFAULT and table_name != table:
        raise click.UsageError(f"two tables: {table_name} and --table {table}")
    if output is None and into_table is None and mapping is None:
        raise click.UsageError("give --output, --into-table or --mapping")
    if output_format is not None and output is None:
        raise click.UsageError("--format is the format of --output")
    options = DedupOptions(keep=keep, min_similarity=search.min_similarity,
                           measure=search.measure, max_distance=search.max_distance,
                           hamming=search.hamming, method=method, id_field=id_field,
                           text_field=text_field)  # fmt: skip
    with database_errors():
        conn, documents = open_table(dsn, table_name or table)
        with conn:
            try:
                summary = dedup(conn, documents, options, output=output,
                                output_format=output_format, mapping=mapping,
                                into_table=into_table, overwrite=overwrite)  # fmt: skip
            except (DedupError, OutputError) as error:
                raise Fatal(str(error)) from error
    if as_json:
        print_json(summary.as_dict())
    else:
        for line in summary.lines():
            click.echo(line, err=True)


__all__ = ["dedup_command"]
