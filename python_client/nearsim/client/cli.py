"""The ``nearsim`` and ``nearsim-load`` commands.

Each command parses its arguments, calls the library (documents.py,
loader.py) and prints the result; library errors become one-line messages
with exit code 2.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Generator, Iterable, Iterator
from contextlib import closing
from dataclasses import asdict
from typing import Any

import click
import psycopg

from .. import __version__
from ..core import measures
from ..core.bands import MAX_BANDS, MIN_BANDS
from ..core.bits import BITS, bits, hamming
from ..core.fingerprint import PROFILE
from ..core.profiles import Profile, simhash
from . import report as html_report
from .checks import FileCheck, check_files
from .clitools import (
    EXIT_FAILURES,
    EXIT_USAGE,
    MEASURE_LABELS,
    Commands,
    Fatal,
    Search,
    database_errors,
    database_options,
    encoding_option,
    given,
    human_bytes,
    json_option,
    method_option,
    open_table,
    print_json,
    print_json_array,
    profile_option,
    require_storable,
    search_of,
    search_options,
)  # fmt: skip
from .dedupcli import dedup_command
from .documents import Cluster, DocumentTable
from .extract import InputError
from .groups import choose_group, numbered
from .loadcli import load_command, the_process_ends_with_the_command
from .loader import DEFAULT_MAX_BYTES
from .reading import is_file_name, read_named
from .sparkcli import spark_group


@click.group(cls=Commands, context_settings={"help_option_names": ["-h", "--help"]})
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
@database_options
@click.option(
    "--bands",
    type=click.IntRange(MIN_BANDS, MAX_BANDS),
    help="Bands of the rotation index (default: 3; see docs/GUIDE.md).",
)
@profile_option(
    "Fingerprint profile: a short name (default, english, auto, soundex, chars,"
    " set) or e.g. words:1-3+stem:german [default: default/1 for a new table;"
    " an enabled table keeps its own, and another given is an error]."
)
@click.option(
    "--sketch-index", is_flag=True,
    help="Also create the sketch index (about 280 bytes per document): the verified"
    " search by S_R from 0.5 up then finds similar documents at any distance of their"
    " fingerprints, not only within the calibrated radius (docs/GUIDE.md).",
)
def init(dsn: str | None, table: str, bands: int | None, profile: str | None,
         sketch_index: bool) -> None:
    """Create the extension and a documents table, and enable it.

    Does nothing that is already done.

    \b
    Examples:
        nearsim init --table docs
        nearsim init --table mail --profile english
        nearsim init --table memos --sketch-index
    """
    with database_errors():
        conn, documents = open_table(dsn, table, create_extension=True)
        with conn:
            created = documents.create(bands, profile, sketch_index=sketch_index)
            registration = documents.require_enabled()
            sketch = documents.sketch_index()
    click.echo(
        f"{'created' if created else 'kept'} table {documents.name}, enabled for nearsim"
        f" with profile {registration.profile} and {registration.bands} bands"
        + (f", sketch index {sketch.name}" if sketch is not None and sketch.usable else "")
    )


# -- queries -----------------------------------------------------------------------


def _warn_if_short(query: str, profile: str) -> None:
    """A query without words finds nothing; one of few shingles has a jumpy fingerprint
    (its shingles counted with the words of the table's profile)."""
    shingles = len(measures.Shingled(query, Profile.named(profile).version).shingles)
    if not shingles:
        click.echo(
            "warning: the query has no words: it has no fingerprint and finds nothing", err=True
        )
    elif shingles < measures.SHORT_SHINGLES:
        click.echo(f"warning: the query has {shingles} shingle(s): a fingerprint of fewer than"
                   f" {measures.SHORT_SHINGLES} is unreliable, near-duplicates may be missed",
                   err=True)  # fmt: skip


def _query_text(text: str | None, file: str | None, encoding: str) -> str:
    if (text is None) == (file is None):
        raise click.UsageError("give either TEXT or --file FILE")
    if file == "-":  # the query document on standard input, as nearsim-load reads paths
        return sys.stdin.read()
    if file is not None:
        try:
            return _read_file(file, encoding)[0]
        except InputError as error:
            raise Fatal(f"{file}: {error.message}") from error
    assert text is not None
    return text


def _shown_measures(measure: str) -> list[str]:
    """The measures a verified match is shown with: the one that selected it, S_L, S_R."""
    return [measure, *(m for m in ("s_l", "s_r") if m != measure)]


def _side_values(match: dict[str, Any], shown: list[str]) -> list[float | None]:
    return [match["similarity"], *(match[m] for m in shown[1:])]


def _percent(value: float | None) -> str:
    return "-" if value is None else f"{value:.1%}"


@cli.command()
@click.argument("text", required=False)
@click.option("--file", "-f", metavar="FILE",
              help="Take the query document from a file (- for standard input).")
@search_options
@click.option("--nearest", type=click.IntRange(1), metavar="N",
              help="Instead: the N documents nearest by fingerprint (within -k bits if given),"
              " exactly, nearest first, ties by key; no similarity measured.")
@click.option("--limit", type=click.IntRange(1), help="At most this many documents.")
@database_options
@encoding_option
@json_option
@click.pass_context
def similar(
    ctx: click.Context, text: str | None, file: str | None, min_similarity: float,
    measure: str, max_distance: int | None, by_bits: bool, nearest: int | None,
    limit: int | None, dsn: str | None, table: str, as_json: bool, encoding: str,
) -> None:  # fmt: skip
    """Stored documents similar to TEXT or to a file, most similar first.

    Verified: the documents at least 0.87 (-s) similar to the query,
    measured on the texts (S_L, the share of the longer text that the other
    also holds in passages of 5 words or more, or another --measure): a
    text with 4% of its words changed is about 93% similar. The candidates
    are the documents at least 0.5 similar by S_R (by --measure s_r or
    containment, those of the sketch index or within the calibrated
    radius). Each match shows S_L and S_R side by side, whichever selected
    it. Documents of fewer than 10 shingles are marked short: their
    fingerprints are unreliable. With --hamming, every document whose
    fingerprint is within -k bits, nearest first, with no similarity
    measured; with --nearest N, the N nearest by fingerprint, exactly (ties
    by key).

    \b
    Examples:
        nearsim similar "In the beginning God created the heaven and the earth"
        nearsim similar --file contract-v2.pdf -s 0.9 --json
        nearsim similar --file memo.docx --hamming -k 10
        nearsim similar --file memo.docx --nearest 5
    """
    if nearest is not None:
        for name, option in (("min_similarity", "-s"), ("measure", "--measure"),
                             ("by_bits", "--hamming"), ("limit", "--limit")):  # fmt: skip
            if given(ctx, name):
                raise click.UsageError(f"--nearest finds documents by bits and counts them:"
                                       f" {option} does not go with it")  # fmt: skip
        search = Search(True, BITS if max_distance is None else max_distance, 0.0, measure)
    else:
        search = search_of(ctx)
    query = _query_text(text, file, encoding)
    with database_errors():
        conn, documents = open_table(dsn, table)
        with conn:
            _warn_if_short(query, documents.require_enabled().profile)
            require_storable(conn, "the query" if file is None else file, query)
            if nearest is not None:
                assert search.max_distance is not None
                matches = documents.nearest(query, nearest, search.max_distance)
            elif search.hamming:
                assert search.max_distance is not None
                matches = documents.similar(query, search.max_distance, limit)
            else:
                verified = documents.similar_verified(
                    query, search.min_similarity, search.measure, search.max_distance, limit)
    if not search.hamming:
        if as_json:
            print_json([asdict(match) for match in verified])
            return
        shown = _shown_measures(search.measure)
        if verified:
            click.echo("".join(f"{MEASURE_LABELS[m]:>10}  " for m in shown) + "distance  key")
        for found in verified:
            short = "  (short)" if found.short else ""
            values = "".join(f"{_percent(v):>10}  " for v in _side_values(asdict(found), shown))
            click.echo(f"{values}{found.distance:8d}  {found.key}{short}")
        return
    if as_json:
        print_json([asdict(match) for match in matches])
        return
    if matches:
        click.echo("distance  key")
    for match in matches:
        source = f"  {match.source}" if match.source and match.source != match.key else ""
        click.echo(f"{match.distance:8d}  {match.key}{source}")


@cli.command()
@click.argument("files", nargs=-1, required=True, metavar="FILE...")
@search_options
@database_options
@encoding_option
@json_option
@click.pass_context
def check(
    ctx: click.Context, files: tuple[str, ...], min_similarity: float, measure: str,
    max_distance: int | None, by_bits: bool, dsn: str | None, table: str, as_json: bool,
    encoding: str,
) -> None:  # fmt: skip
    """Whether the table already holds a near-duplicate of each FILE.

    For a CI job or a pre-commit hook: exit status 1 when any file has a
    near-duplicate (each listed with the stored documents like it, as
    `nearsim similar` finds them: at least 0.87 (-s) similar by S_L, shown
    with S_R, or within -k bits with --hamming), 0 when every file was
    checked and none has, 2 on an error, or when a file could not be
    checked and no other has a near-duplicate. A file that cannot be read,
    or has no words (empty, only whitespace or punctuation: no fingerprint
    to compare), is named on stderr and the other files are checked all the
    same (with --json, its entry has near_duplicates null and the error).
    130 after Ctrl-C. Nothing is written. Files are read as nearsim-load
    reads them: an e-mail file is answered for each message and attachment
    (thread.eml, thread.eml#2:contract.pdf), and --json gives each file's
    encoding.

    \b
    Examples:
        nearsim check contract-v2.pdf memo.docx
        nearsim check --hamming -k 3 --json drafts/*.txt
    """
    search = search_of(ctx)
    answers: list[FileCheck] = []
    with database_errors():
        conn, documents = open_table(dsn, table)
        with conn:
            found = check_files(documents, files, by_bits=search.hamming,
                                min_similarity=search.min_similarity, measure=search.measure,
                                max_distance=search.max_distance, encoding=encoding)  # fmt: skip
            entries = _check_entries(found, answers)
            if as_json:  # whole, or not at all: the search may fail at the first file
                print_json(list(entries))
            else:
                for entry in entries:
                    _print_check(entry, search)
    if any(answer.near_duplicates for answer in answers):
        sys.exit(EXIT_FAILURES)  # found: whatever else could not be checked
    if not all(answer.checked for answer in answers):
        sys.exit(EXIT_USAGE)


def _check_entries(found: Iterable[FileCheck],
                   answers: list[FileCheck]) -> Iterator[dict[str, Any]]:  # fmt: skip
    """Each file's answer as JSON, as it comes, noted in ``answers`` for the exit status.

    A file that could not be checked is named on stderr then, and a query
    of few shingles warned of.
    """
    for answer in found:
        answers.append(answer)
        if answer.note is not None:
            click.echo(f"warning: {answer.file}: {answer.note}", err=True)
        if answer.problem is not None:
            click.echo(f"Error: {answer.problem}", err=True)
        elif answer.shingles < measures.SHORT_SHINGLES:
            click.echo(f"warning: {answer.file} has {answer.shingles} shingle(s): a fingerprint"
                       f" of fewer than {measures.SHORT_SHINGLES} is unreliable, near-duplicates"
                       " may be missed", err=True)  # fmt: skip
        matches = answer.near_duplicates
        yield {"file": answer.file,
               "near_duplicates": None if matches is None else [asdict(m) for m in matches],
               "error": answer.problem, "encoding": answer.encoding or None}  # fmt: skip


def _print_check(entry: dict[str, Any], search: Search) -> None:
    name, matches = entry["file"], entry["near_duplicates"]
    if matches is None:
        return  # named on stderr
    if not matches:
        click.echo(f"{name}: no near-duplicate")
        return
    click.echo(f"{name}: {len(matches)} near-duplicate{'s' if len(matches) > 1 else ''}")
    for match in matches:
        if search.hamming:
            click.echo(f"  {match['distance']:3d} bits  {match['key']}")
        else:
            shown = _shown_measures(search.measure)
            values = "  ".join(f"{MEASURE_LABELS[m]} {_percent(v)}"
                               for m, v in zip(shown, _side_values(match, shown), strict=True))
            click.echo(f"  {values}  {match['distance']:3d} bits  {match['key']}")


@cli.command()
@search_options
@database_options
@json_option
@click.pass_context
def pairs(
    ctx: click.Context, min_similarity: float, measure: str, max_distance: int | None,
    by_bits: bool, dsn: str | None, table: str, as_json: bool,
) -> None:  # fmt: skip
    """Every pair of stored documents at least 0.87 (-s) similar.

    Measured on the texts, as in `nearsim similar`: by S_L, among the pairs
    at least 0.5 similar by S_R (an exact join in the server; S_L is then
    measured on their texts, a few ms a pair: --measure s_r is much faster); with
    --hamming, every pair whose fingerprints are within -k bits,
    unverified. One pair per line: similarity, distance in bits, the two
    keys.

    \b
    Examples:
        nearsim pairs --json > pairs.json
        nearsim pairs -s 0.9 --measure containment
        nearsim pairs --hamming -k 3
    """
    search = search_of(ctx)
    with database_errors():
        conn, documents = open_table(dsn, table)
        with conn:
            # closing: a reader that stops early (| head) ends the query at
            # once; a suspended stream would hold the connection's lock
            if not search.hamming:
                with closing(documents.pairs_verified(search.min_similarity, search.measure,
                                                      search.max_distance)) as verified:
                    if as_json:
                        print_json_array(asdict(pair) for pair in verified)
                        return
                    for found in verified:
                        short = "  (short)" if found.short else ""
                        click.echo(f"{found.similarity:6.1%}  {found.distance:2d}  {found.a}  "
                                   f"{found.b}{short}")  # fmt: skip
                return
            assert search.max_distance is not None
            with closing(documents.pairs(search.max_distance)) as plain:
                if as_json:
                    print_json_array(asdict(pair) for pair in plain)
                else:
                    for pair in plain:
                        click.echo(f"{pair.distance:2d}  {pair.a}  {pair.b}")


def _groups(documents: DocumentTable, search: Search, method: str,
            min_size: int = 2) -> Generator[Cluster, None, None]:  # fmt: skip
    """The groups a search asks for: of verified pairs, or of pairs within the distance."""
    if search.hamming:
        assert search.max_distance is not None
        return documents.clusters(search.max_distance, method, min_size)
    return documents.clusters_verified(search.min_similarity, search.measure,
                                       search.max_distance, method, min_size)  # fmt: skip


@cli.command()
@search_options
@method_option
@click.option("--min-size", type=click.IntRange(1), default=2, show_default=True,
              help="Only groups of at least this many documents.")
@database_options
@json_option
@click.pass_context
def clusters(
    ctx: click.Context, min_similarity: float, measure: str, max_distance: int | None,
    by_bits: bool, method: str, min_size: int, dsn: str | None, table: str, as_json: bool,
) -> None:  # fmt: skip
    """Groups of near-duplicate documents, largest first, numbered from 1.

    Groups of the pairs `nearsim pairs` finds with the same options: by
    default pairs at least 0.87 (-s) similar by S_L; with
    --hamming, pairs within -k bits. `nearsim report --cluster N` shows
    group N of the same options side by side.

    \b
    Examples:
        nearsim clusters --method pivot
        nearsim clusters -s 0.9 --min-size 3 --json
        nearsim clusters --hamming -k 3
    """
    search = search_of(ctx)
    with database_errors():
        conn, documents = open_table(dsn, table)
        with conn, closing(_groups(documents, search, method, min_size)) as found:  # see pairs
            if as_json:
                print_json_array({"number": group.number, **asdict(group.cluster)}
                                 for group in numbered(found))  # fmt: skip
                return
            for group in numbered(found):
                cluster = group.cluster
                click.echo(f"cluster {group.number}: {len(cluster.members)} documents")
                for member in cluster.members:
                    click.echo(f"  {member}{'  (pivot)' if member == cluster.pivot else ''}")


class _OnDemand:
    """The documents table, connected to only when first asked for (files need no database)."""

    def __init__(self, dsn: str | None, table: str) -> None:
        self.dsn, self.table = dsn, table
        self.opened: tuple[psycopg.Connection[Any], DocumentTable] | None = None

    def __call__(self) -> DocumentTable:
        if self.opened is None:
            self.opened = open_table(self.dsn, self.table)
        return self.opened[1]

    def __enter__(self) -> _OnDemand:
        return self

    def __exit__(self, *exc: object) -> None:
        if self.opened is not None:
            self.opened[0].close()


def _comparison_profile(names: Iterable[str], asked: str | None,
                        documents: Callable[[], DocumentTable]) -> str:  # fmt: skip
    """The profile to compare with: the table's if a document is stored, else --profile."""
    if all(is_file_name(name) for name in names):
        return asked or PROFILE
    table = documents()
    profile = table.require_enabled().profile
    if asked is not None and asked != profile:
        raise Fatal(f"table {table} holds fingerprints of profile {profile}, not {asked}")
    return profile


def _read_file(name: str, encoding: str) -> tuple[str, str]:
    """The text of the file (or e-mail part) ``name`` and the encoding it was read in,
    as nearsim-load reads it; a warning if it was read as UTF-8 against --encoding."""
    named = read_named(name, max_bytes=DEFAULT_MAX_BYTES, encoding=encoding)
    assert not isinstance(named.read, InputError)
    if named.note is not None:
        click.echo(f"warning: {name}: {named.note}", err=True)
    return named.read.text, named.read.encoding


def _document_of(
    name: str, documents: Callable[[], DocumentTable], profile: str | None = None,
    encoding: str = "utf-8",
) -> tuple[dict[str, Any], str, int | None]:
    """A file's text and fingerprint (with ``profile``, if given), or else a stored document's.

    A file (or a part of an e-mail file, .reading) is read as nearsim-load reads it."""
    if is_file_name(name):
        try:
            text, used = _read_file(name, encoding)
        except InputError as error:
            raise Fatal(f"{name}: {error.message}") from error
        try:
            fingerprint = None if profile is None else simhash(text, profile)
        except RuntimeError as error:  # a library the profile needs
            raise Fatal(str(error)) from error
        info = {"name": name, "kind": "file", "bytes": len(text.encode()), "encoding": used}
        return info, text, fingerprint
    table = documents()
    stored = table.document(name)
    if stored is None:
        raise Fatal(f"{name} is neither a file nor the key of a document in {table}")
    text = stored.text or ""  # a NULL text has no words
    info = {"name": name, "kind": "document", "table": str(table), "bytes": len(text.encode())}
    return info, text, stored.fingerprint


def _measured(text_a: str, text_b: str, tokenisation: int) -> dict[str, Any]:
    """The exact measures of a pair and the MinHash estimate of its resemblance."""
    exact = measures.compare(text_a, text_b, tokenisation=tokenisation)
    estimate = measures.minhash_estimate(
        measures.minhash_signature(text_a, tokenisation=tokenisation),
        measures.minhash_signature(text_b, tokenisation=tokenisation))
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
@search_options
@profile_option("Fingerprint profile for files [default: default/1; the table's for stored"
                " documents].")
@database_options
@encoding_option
@json_option
@click.pass_context
def compare(
    ctx: click.Context, a: str, b: str, min_similarity: float, measure: str,
    max_distance: int | None, by_bits: bool, profile: str | None, dsn: str | None, table: str,
    as_json: bool, encoding: str,
) -> None:  # fmt: skip
    """Compare two documents: files, or keys of stored documents.

    Prints both fingerprints as bits with the differing ones marked and the
    Hamming distance (bits apart, not a similarity); then what the texts
    really share: S_L (the share of the longer text found in the shorter),
    S_J (common words over all words of the pair), both with literal and
    with information matching of passages of at least 5 words; S_R (the
    Jaccard coefficient of the 3-word shingle sets), containment, and the
    MinHash estimate of S_R with its 95% interval. The verdict is measured:
    near-duplicates when S_L (--measure) is at least 0.87 (-s); with
    --hamming, when the fingerprints are at most -k bits apart.

    \b
    Examples:
        nearsim compare draft-1.docx draft-2.docx
        nearsim compare draft-1.docx draft-2.docx -s 0.9 --measure containment
        nearsim compare /srv/docs/a.txt /srv/docs/b.txt --hamming -k 3 --json
    """
    search = search_of(ctx)
    if not search.hamming and search.max_distance is not None:
        raise click.UsageError("compare measures the two texts themselves: -k goes with"
                               " --hamming")  # fmt: skip
    with database_errors(), _OnDemand(dsn, table) as documents:
        used = _comparison_profile((a, b), profile, documents)
        first, first_text, first_fp = _document_of(a, documents, used, encoding)
        second, second_text, second_fp = _document_of(b, documents, used, encoding)
    result: dict[str, Any] = {"a": first, "b": second, "profile": used}
    for side, fingerprint in ((first, first_fp), (second, second_fp)):
        side["fingerprint"] = fingerprint
        side["bits"] = None if fingerprint is None else bits(fingerprint)
    distance = None if first_fp is None or second_fp is None else hamming(first_fp, second_fp)
    result["distance"] = distance
    # the words of the profile's tokenisation (version 2: Thai, Khmer... a letter a word)
    tokenisation = Profile.named(used).version
    result["measures"] = _measured(first_text, second_text, tokenisation)
    measure, threshold = search.measure, search.min_similarity
    measured = float(measures.verified_measure(measure, measures.Shingled(first_text, tokenisation),
                                               measures.Shingled(second_text, tokenisation)))
    result["similarity"] = round(measured, 4)  # measured on the texts
    result["measure"] = measure
    result["s_l"], result["s_r"] = result["measures"]["s_l"], result["measures"]["s_r"]
    if search.hamming:
        assert search.max_distance is not None
        result["max_distance"] = search.max_distance
        result["near_duplicates"] = distance is not None and distance <= search.max_distance
    else:
        result["min_similarity"] = threshold
        result["near_duplicates"] = measured >= threshold
    if as_json:
        print_json(result)
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
    if search.hamming:
        click.echo(f"{verdict} at -k {search.max_distance} (bits apart, not a measured"
                   " similarity)")  # fmt: skip
    else:
        relation = ">=" if result["near_duplicates"] else "<"
        click.echo(f"{verdict}: {measure} {measured:.1%} {relation} {threshold:.0%}"
                   f"  (S_L {result['s_l']:.1%}, S_R {result['s_r']:.1%})")
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
@click.option("--cluster", metavar="N|KEY",
              help="Instead of A B...: a group as `nearsim clusters` gives it with the same"
              " options, by the number it prints or by a member (a stored document's key, or a"
              " loaded file by any path to it); the group's first member (the pivot with"
              " --method pivot) is shown next to each of the others.")
@click.option("--output", "-o", type=click.Path(dir_okay=False, writable=True), required=True,
              help="The HTML file to write.")
@search_options
@method_option
@database_options
@click.pass_context
def report(
    ctx: click.Context, names: tuple[str, ...], cluster: str | None, output: str,
    min_similarity: float, measure: str, max_distance: int | None, by_bits: bool, method: str,
    dsn: str | None, table: str,
) -> None:  # fmt: skip
    """Write an HTML page of documents side by side, common passages marked.

    A B...: files or keys of stored documents; each of B... is shown next
    to A. The page is self-contained (no scripts, nothing to download).
    --cluster 3 -s 0.9 is group 3 of `nearsim clusters -s 0.9`. A number
    that is also a stored document's key is taken as the group's number (a
    warning says which group holds that document).

    \b
    Examples:
        nearsim report draft-1.docx draft-2.docx -o drafts.html
        nearsim report --cluster 3 -s 0.9 -o group-3.html
        nearsim report --cluster memo.txt --method pivot -o memo-group.html
    """
    search = search_of(ctx)
    if (cluster is None) == (not names) or (cluster is None and len(names) < 2):
        raise click.UsageError("give two or more documents A B..., or --cluster N|KEY")
    directory = os.path.dirname(os.path.abspath(output))
    if not os.path.isdir(directory):  # before the work, not after it
        raise click.BadParameter(f"directory {directory} does not exist", param_hint="--output")
    with database_errors(), _OnDemand(dsn, table) as documents:
        if cluster is not None:
            names = _cluster_members(documents(), cluster, search, method)
        texts = [html_report.Document(name, _document_of(name, documents)[1]) for name in names]
    page = html_report.report(texts[0], texts[1:])
    try:
        with open(output, "w", encoding="utf-8") as file:
            file.write(page)
    except OSError as error:
        raise Fatal(f"cannot write {output}: {error.strerror or error}") from error
    click.echo(f"wrote {output}: {texts[0].name} and {len(texts) - 1} other document(s)",
               err=True)  # fmt: skip


def _cluster_members(documents: DocumentTable, wanted: str, search: Search,
                     method: str) -> tuple[str, ...]:  # fmt: skip
    """The members of the group ``wanted`` names, as ``nearsim clusters`` lists them."""
    with closing(_groups(documents, search, method)) as found:  # the rest is not needed
        chosen = choose_group(documents, found, wanted, search.describe())
    if chosen.warning is not None:
        click.echo(f"warning: {chosen.warning}", err=True)
    return tuple(chosen.group.cluster.members)


@cli.command()
@click.option(
    "--check-fingerprints",
    is_flag=True,
    help="Recompute every stored fingerprint (reads all texts), not only a"
    " sample of about 1,000 rows.",
)
@database_options
@json_option
def stats(check_fingerprints: bool, dsn: str | None, table: str, as_json: bool) -> None:
    """Documents, fingerprint profile, index size and health of a table.

    Exit status 1 when the index needs repair (nearsim_rebuild).

    \b
    Example:
        nearsim stats --table docs --json
    """
    with database_errors():
        conn, documents = open_table(dsn, table)
        with conn:
            result = documents.stats(True if check_fingerprints else None)
    if as_json:
        print_json(result)
    else:
        click.echo(f"table          {result['table']}")
        click.echo(f"documents      {result['documents']:,}")
        click.echo(f"fingerprinted  {result['fingerprinted']:,}")
        click.echo(f"profile        {result['profile']}")
        click.echo(f"size           {human_bytes(result['table_bytes'] or 0)}")
        index_bytes = result["index_bytes"] or 0
        per_document = (f", {index_bytes / result['fingerprinted']:.0f} bytes per document"
                        if result["fingerprinted"] else "")
        click.echo(f"index          {result['bands']} bands, {human_bytes(index_bytes)}"
                   f"{per_document}, "
                   f"{'healthy' if result['health']['ok'] else 'NEEDS REPAIR'}")  # fmt: skip
        sketch = result["sketch_index"]
        if sketch is None:
            click.echo("sketch index   none (verified searches take their candidates within"
                       " the calibrated radius; nearsim init --sketch-index adds one)")
        else:
            per_document = (f", {sketch['bytes'] / result['documents']:.0f} bytes per document"
                            if result["documents"] else "")
            click.echo(f"sketch index   {sketch['name']}, {human_bytes(sketch['bytes'])}"
                       f"{per_document}, {'usable' if sketch['usable'] else 'NOT VALID'}")
        for line in _faults(result["health"]):
            click.echo(f"  {line}")
        if not result["health"]["ok"]:
            click.echo(
                f"repair with: SELECT nearsim_rebuild({_sql_literal(result['table'])});"
                " see nearsim_verify for what it found"
            )
    if not result["health"]["ok"]:
        sys.exit(EXIT_FAILURES)


def _faults(health: dict[str, Any]) -> list[str]:
    """Every fault nearsim_verify reports, one line each (counts, failed checks, keys)."""
    lines = []
    for name, value in health.items():
        if name in ("ok", "bands", "documents", "fingerprinted", "indexed"):
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
cli.add_command(dedup_command)
cli.add_command(spark_group)


def main() -> None:
    """Entry point of ``nearsim``."""
    the_process_ends_with_the_command()
    cli(prog_name="nearsim")


def load_main() -> None:
    """Entry point of ``nearsim-load`` (the same as ``nearsim load``)."""
    the_process_ends_with_the_command()
    load_command(prog_name="nearsim-load")


__all__ = ["cli", "load_command", "load_main", "main"]


if __name__ == "__main__":
    main()
