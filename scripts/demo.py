"""nearsim demo: load the King James Bible's chapters and find near-duplicates.

    .venv/bin/python scripts/demo.py --dsn "host=... dbname=nearsim"

Every chapter is stored with its 64-bit SimHash fingerprint, computed in the
database by ``simhash(body)``.  The demo then runs the seeds' query, asks for
the nearest chapters to chapters that have known parallels elsewhere in the
Bible, looks for all near-duplicate pairs, and ends on the recommended
query, whose similarity is measured on the texts.  Running it again reuses the
table: the load is skipped when it is complete and was fingerprinted with
the same profile.
"""

from __future__ import annotations

import argparse
import os
import shlex
import sys
import textwrap
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import psycopg
from psycopg import sql
from psycopg.conninfo import conninfo_to_dict, make_conninfo
from psycopg.rows import TupleRow

import nearsim
from nearsim.client.connect import ProfileMismatch, ensure_extension
from nearsim.client.output import format_table, one_line
from nearsim.client.samples import KJV_BOOKS, SampleUnavailable, kjv_chapters

BITS = 64
KJV_CHAPTERS = sum(count for _, count in KJV_BOOKS)  # 1,189
COMPARE_RADIUS = 12
NEAREST = 5
LISTED_PAIRS = 20
# Chapters of the KJV that repeat, nearly word for word, another chapter.
PARALLELS = {
    "Psalms 14": "Psalms 53",
    "2 Kings 19": "Isaiah 37",
    "2 Samuel 22": "Psalms 18",
    "Ezra 2": "Nehemiah 7",
    "2 Kings 18": "Isaiah 36",
}
QUERY_CHAPTERS = ("Psalms 14", "2 Kings 19", "2 Samuel 22", "Ezra 2")
SEED_CHAPTER = "Psalms 14"
CHANCE_MATCH = ("Numbers 32", "Ezra 2")
# The table comment marks a table made by this script and names the profile
# of its fingerprints.
COMMENT_PREFIX = "nearsim demo: King James Bible chapters"
COMMENT = f"{COMMENT_PREFIX}; si = simhash(body), profile {nearsim.PROFILE}"
INDENT = "    "


class DemoError(Exception):
    """A problem to report in one line, with the exit status to use."""

    def __init__(self, message: str, status: int = 1) -> None:
        super().__init__(message)
        self.status = status


@dataclass
class Demo:
    conn: psycopg.Connection[TupleRow]
    table: str  # as given
    name: str  # as written in SQL shown to the user: quoted only if needed

    @property
    def ident(self) -> sql.Identifier:
        return sql.Identifier(self.table)

    def query(self, template: str, **literals: object) -> sql.Composed:
        """``template`` with {t} the table and other {names} SQL literals."""
        values = {key: sql.Literal(value) for key, value in literals.items()}
        return sql.SQL(template).format(t=self.ident, **values)

    def show(self, query: sql.Composable) -> None:
        """Print a query as the user would type it."""
        text = query.as_string(self.conn).replace(self.ident.as_string(self.conn), self.name)
        print(textwrap.indent(text, INDENT))

    def fetchone(self, query: sql.Composed | str, params: Sequence[Any] = ()) -> TupleRow:
        row = self.conn.execute(query, params).fetchone()
        if row is None:
            raise DemoError(f"no result from {query!r}")
        return row


def plural(count: int, noun: str) -> str:
    return f"{count:,} {noun}{'' if count == 1 else 's'}"


def say(text: str) -> None:
    """Print a paragraph wrapped for an 80-column terminal."""
    print(textwrap.fill(text, 78, initial_indent=INDENT, subsequent_indent=INDENT))


def print_table(header: Sequence[str], rows: Sequence[Sequence[Any]], align: str) -> None:
    print(format_table(header, rows, align, INDENT))


def print_bits(labels: Sequence[str], bit_strings: Sequence[str]) -> None:
    """Two fingerprints one above the other, with ^ under each differing bit."""
    width = max(map(len, labels))
    for label, bits in zip(labels, bit_strings, strict=True):
        print(f"{INDENT}{label:<{width}}  {bits}")
    marks = "".join("^" if a != b else " " for a, b in zip(*bit_strings, strict=True))
    if marks.strip():
        print(f"{INDENT}{'':<{width}}  {marks.rstrip()}")
    print(f"{INDENT}{'':<{width}}  {marks.count('^')} of {BITS} bits differ")


def known(a: str, b: str) -> str:
    return "<- known parallel" if b == PARALLELS.get(a) or a == PARALLELS.get(b) else ""


def table_state(demo: Demo) -> str:
    """ "missing", "foreign" (not made by this script), "stale" or "complete"."""
    exists, comment = demo.fetchone(
        "SELECT to_regclass(quote_ident(%s)) IS NOT NULL,"
        " obj_description(to_regclass(quote_ident(%s)), 'pg_class')",
        (demo.table, demo.table),
    )
    if not exists:
        return "missing"
    if not (comment or "").startswith(COMMENT_PREFIX):
        return "foreign"
    if comment != COMMENT:
        return "stale"
    counts = demo.fetchone(demo.query("SELECT count(*), count(si) FROM {t}"))
    return "complete" if counts == (KJV_CHAPTERS, KJV_CHAPTERS) else "stale"


def load(demo: Demo, state: str) -> None:
    try:
        started = time.perf_counter()
        chapters = kjv_chapters()
        seconds = time.perf_counter() - started
    except SampleUnavailable as error:
        raise DemoError(f"cannot read the sample text: {error}", status=2) from None
    megabytes = sum(len(chapter.text.encode()) for chapter in chapters) / 1e6
    print(f"  read {len(chapters):,} chapters ({megabytes:.1f} MB) with `bible` in {seconds:.2f} s")

    with demo.conn.transaction():
        if state == "stale":
            print(f"  {demo.name} is incomplete or has another profile's fingerprints: reloading")
            demo.conn.execute(demo.query("DROP TABLE {t} CASCADE"))
        demo.conn.execute(
            demo.query(
                "CREATE TABLE {t} (id int PRIMARY KEY, ref text UNIQUE NOT NULL,"
                " book text NOT NULL, chapter int NOT NULL, body text NOT NULL, si bigint)"
            )
        )
        started = time.perf_counter()
        with demo.conn.cursor() as cur:
            copy_sql = demo.query("COPY {t} (id, ref, book, chapter, body) FROM STDIN")
            with cur.copy(copy_sql) as copy:
                for number, ch in enumerate(chapters, start=1):
                    copy.write_row((number, ch.ref, ch.book, ch.chapter, ch.text))
        print(f"  COPY into {demo.name}: {time.perf_counter() - started:.2f} s")

        update = demo.query("UPDATE {t} SET si = simhash(body)")
        started = time.perf_counter()
        demo.conn.execute(update)
        seconds = time.perf_counter() - started
        print("  fingerprints computed in the database:")
        demo.show(update)
        print(
            f"{INDENT}{len(chapters):,} chapters, {megabytes:.1f} MB in {seconds:.2f} s"
            f" = {megabytes / seconds:.1f} MB/s for the whole UPDATE (reading the texts,"
            f"\n{INDENT}writing every row); `make bench` times simhash() alone, over 100 MB/s"
            " per core"
        )
        demo.conn.execute(demo.query("COMMENT ON TABLE {t} IS {c}", c=COMMENT))
        demo.conn.execute(demo.query("ANALYZE {t}"))


def seed_query(demo: Demo, radius: int) -> None:
    print(f"\n1. The seeds' query, with the text of {SEED_CHAPTER} as its parameter %s\n")
    query = demo.query(
        "SELECT ref, hamming(si, simhash(%s)) AS distance FROM {t}\n"
        "WHERE hamming(si, simhash(%s)) <= {radius} ORDER BY distance",
        radius=radius,
    )
    demo.show(query)
    print()
    (text,) = demo.fetchone(demo.query("SELECT body FROM {t} WHERE ref = %s"), (SEED_CHAPTER,))
    rows = demo.conn.execute(query, (text, text)).fetchall()
    print_table(["ref", "distance"], rows, "<>")

    parallel = PARALLELS[SEED_CHAPTER]
    (distance,) = demo.fetchone(
        demo.query("SELECT hamming(si, simhash(%s)) FROM {t} WHERE ref = %s"), (text, parallel)
    )
    if distance > radius:
        print()
        say(
            f"{parallel} is nearly the same psalm, yet {distance} bits away, so the query"
            f" misses it: a few reworded phrases change many word 3-shingles, and a 64-bit"
            f" SimHash puts some real near-duplicates beyond {radius} bits."
        )


def nearest(demo: Demo) -> None:
    query = demo.query(
        "SELECT b.ref, hamming(a.si, b.si) AS distance,\n"
        "       simhash_bits(a.si), simhash_bits(b.si), a.body = b.body AS same_text\n"
        "FROM {t} a JOIN {t} b ON b.id <> a.id\n"
        "WHERE a.ref = %s\n"
        "ORDER BY distance, b.id LIMIT {n}",
        n=NEAREST,
    )
    print(f"\n2. The {NEAREST} nearest chapters to chapters with a known parallel\n")
    demo.show(query)
    for ref in QUERY_CHAPTERS:
        rows = demo.conn.execute(query, (ref,)).fetchall()
        print(f"\n  {ref} (known parallel: {PARALLELS[ref]})\n")
        print_table(
            ["ref", "distance", "bits in common", ""],
            [(b, d, f"{100 * (1 - d / BITS):.0f}%", known(ref, b)) for b, d, *_ in rows],
            "<>><",
        )
        if rows:
            top, distance, query_bits, top_bits, same_text = rows[0]
            print()
            print_bits([ref, top], [query_bits, top_bits])
            if distance == 0 and not same_text:
                say(
                    "Distance 0, yet the texts differ: a fingerprint keeps only the"
                    " majority vote for each bit, and here every vote came out the same."
                )


def all_pairs(demo: Demo, radius: int) -> None:
    (chapters,) = demo.fetchone(demo.query("SELECT count(*) FROM {t}"))
    print(
        f"\n3. All pairs of chapters within {radius} bits: a self-join that compares"
        f" all {chapters * (chapters - 1) // 2:,} pairs\n"
    )
    query = demo.query(
        "SELECT a.ref, b.ref, hamming(a.si, b.si) AS distance\n"
        "FROM {t} a JOIN {t} b ON a.id < b.id\n"
        "WHERE hamming(a.si, b.si) <= {radius}\n"
        "ORDER BY distance, a.id, b.id",
        radius=radius,
    )
    demo.show(query)
    print()
    started = time.perf_counter()
    rows = demo.conn.execute(query).fetchall()
    seconds = time.perf_counter() - started
    listed = [(a, b, d, known(a, b)) for a, b, d in rows[:LISTED_PAIRS]]
    print_table(["ref", "ref", "distance", ""], listed, "<<><")
    first = f", the first {LISTED_PAIRS} listed" if len(rows) > LISTED_PAIRS else ""
    print()
    say(
        f"{plural(len(rows), 'pair')} within {radius} bits{first}. The self-join took"
        f" {seconds:.2f} s: without an index, every pair is compared."
    )

    # How the radius trades off: pairs found against known parallels found.
    parallels = demo.conn.execute(
        demo.query(
            "SELECT hamming(a.si, b.si) FROM unnest(%s::text[], %s::text[]) AS p(a, b)"
            " JOIN {t} a ON a.ref = p.a JOIN {t} b ON b.ref = p.b"
        ),
        (list(PARALLELS), list(PARALLELS.values())),
    ).fetchall()
    distances = sorted(d for (d,) in parallels)
    radii = sorted({radius, COMPARE_RADIUS, distances[-1]} if distances else {radius})
    counts: dict[int, int] = dict(
        demo.conn.execute(
            demo.query(
                "SELECT hamming(a.si, b.si), count(*) FROM {t} a JOIN {t} b ON a.id < b.id"
                " WHERE hamming(a.si, b.si) <= {r} GROUP BY 1",
                r=radii[-1],
            )
        ).fetchall()
    )
    print(
        f"\n  The radius trades missed parallels for chance matches; the {len(PARALLELS)} known"
        f"\n  parallels are at distances {', '.join(map(str, distances))}:\n"
    )
    print_table(
        ["radius", "pairs", "known parallels found"],
        [
            (r, sum(n for d, n in counts.items() if d <= r), sum(d <= r for d in distances))
            for r in radii
        ],
        ">>>",
    )
    # A chance match: every occurrence of a shingle votes, so a phrase that a
    # chapter repeats dozens of times can outweigh the rest of its text.
    a, b = CHANCE_MATCH
    distance, text_a, text_b = demo.fetchone(
        demo.query(
            "SELECT hamming(a.si, b.si), a.body, b.body FROM {t} a, {t} b"
            " WHERE a.ref = %s AND b.ref = %s"
        ),
        CHANCE_MATCH,
    )
    shingles_a, shingles_b = set(nearsim.shingles(text_a)), set(nearsim.shingles(text_b))
    shared = len(shingles_a & shingles_b) / len(shingles_a | shingles_b)
    print()
    say(
        f"Wider radii also match chapters that share little text but repeat one phrase"
        f" many times (each occurrence of a shingle votes): {a} and {b} are {distance} bits"
        f" apart, yet only {shared:.1%} of their distinct 3-shingles are shared; both say"
        f' "the children of" over and over.'
    )


def rotation_index(demo: Demo, radius: int) -> None:
    print("\n4. The same questions through the rotation index\n")
    enabled = demo.conn.execute(
        "SELECT similar_function FROM nearsim_tables WHERE tbl = to_regclass(%s)", (demo.name,)
    ).fetchone()
    if enabled is None:
        enable = demo.query("SELECT nearsim_enable({name}, 'body')", name=demo.name)
        demo.show(enable)
        demo.conn.execute(enable)
        (function,) = demo.fetchone(
            "SELECT similar_function FROM nearsim_tables WHERE tbl = to_regclass(%s)",
            (demo.name,),
        )
    else:
        (function,) = enabled
        print(f"  {demo.name} is already enabled")
    similar = sql.Identifier(function)
    query = sql.SQL(
        "SELECT (doc).ref, distance FROM {f}(%s, {r}) ORDER BY distance, (doc).id"
    ).format(f=similar, r=sql.Literal(COMPARE_RADIUS))
    print()
    demo.show(query)
    (text,) = demo.fetchone(demo.query("SELECT body FROM {t} WHERE ref = %s"), (SEED_CHAPTER,))
    started = time.perf_counter()
    rows = demo.conn.execute(query, (text,)).fetchall()
    seconds = time.perf_counter() - started
    print()
    print_table(["ref", "distance"], [(r, d) for r, d in rows], "<>")
    plan = [
        line.strip() for (line,) in demo.conn.execute(
            sql.SQL("EXPLAIN (COSTS OFF) ") + query, (text,)
        )
        if "Scan" in line
    ]
    seed = demo.conn.execute(
        demo.query(
            "SELECT ref, hamming(si, simhash(%s)) FROM {t} WHERE hamming(si, simhash(%s)) <= {r}"
            " ORDER BY 2, id", r=COMPARE_RADIUS),
        (text, text),
    ).fetchall()
    same = "exactly the rows" if seed == rows else "NOT the rows"
    print()
    say(
        f"{plural(len(rows), 'chapter')} within {COMPARE_RADIUS} bits in {seconds * 1000:.1f} ms,"
        f" {same} of the seeds' query at that radius. The plan:"
    )
    for line in plan:
        print(f"{INDENT}  {line.removeprefix('->  ')}")
    if not any("nearsim rotation index" in line for line in plan):
        say(
            "With only a thousand rows the planner reads the small table whole; on larger"
            " tables it reads the rotation index, one range of keys per band value within"
            " the radius (benchmarks/README.md)."
        )

    pairs = sql.SQL("SELECT a, b, distance FROM nearsim_pairs({t}, {r})").format(
        t=sql.Literal(demo.name), r=sql.Literal(radius))
    clusters = sql.SQL(
        "SELECT cluster, count(*) FROM nearsim_clusters({t}, {r}, 'pivot')"
        " GROUP BY cluster ORDER BY count(*) DESC, cluster"
    ).format(t=sql.Literal(demo.name), r=sql.Literal(radius))
    print()
    demo.show(pairs)
    started = time.perf_counter()
    found = demo.conn.execute(pairs).fetchall()
    seconds = time.perf_counter() - started
    groups = demo.conn.execute(clusters).fetchall()
    (joined,) = demo.fetchone(demo.query(
        "SELECT count(*) FROM {t} a JOIN {t} b ON a.id < b.id WHERE hamming(a.si, b.si) <= {r}",
        r=radius))
    same = "as many as" if joined == len(found) else f"but {joined} from"
    print()
    say(
        f"{plural(len(found), 'pair')} within {radius} bits in {seconds * 1000:.0f} ms, {same}"
        f" the self-join above; nearsim_clusters groups them into"
        f" {plural(len(groups), 'group')} around pivots (every member within the radius of its"
        " pivot)."
    )


def verified(demo: Demo) -> None:
    print("\n5. The recommended query: similar texts, measured on the texts\n")
    query = demo.query(
        "SELECT c.ref, v.distance, v.similarity\n"
        "FROM nearsim_similar_verified({table}, %s, min_similarity => 0.6, measure => 's_l')"
        " AS v\n"
        "JOIN {t} AS c ON c.id = v.key::int\n"
        "WHERE c.ref <> %s ORDER BY v.similarity DESC",
        table=demo.table,
    )
    demo.show(query)
    print()
    rows = []
    for ref in QUERY_CHAPTERS:
        (text,) = demo.fetchone(demo.query("SELECT body FROM {t} WHERE ref = %s"), (ref,))
        found = demo.conn.execute(query, (text, ref)).fetchall()
        rows += [(ref, other, d, f"{value:.1%}", known(ref, other)) for other, d, value in found]
        if not found:
            rows.append((ref, "(none)", "", "", ""))
    print_table(["query", "found", "distance", "S_L", ""], rows, "<<>><")
    print()
    say(
        "S_L is the share of the longer text that the shorter contains, in passages of at"
        " least 5 words. The candidates are the documents at least 50% similar by S_R, from"
        " the rotation index within the radius calibrated for that (nearsim_radius(0.5));"
        " the texts decide. Every known parallel is found, also those the seeds' query missed"
        " at 6 bits, and nothing else."
    )


def closing(demo: Demo, dsn: str) -> None:
    params = {k: v for k, v in conninfo_to_dict(dsn).items() if k != "password"}
    conninfo = shlex.quote(make_conninfo("", **params))
    query = (
        f"SELECT key, distance, similarity FROM nearsim_similar_verified('{demo.name}',"
        " 'your text here')"
    )
    for char in '\\"$`':  # escaped for the shell's double quotes
        query = query.replace(char, "\\" + char)
    print("\nTry your own text, in psql or with the nearsim command:\n")
    say(
        "SimHash compares whole documents: paste a text of about a chapter's length; a single"
        " verse is not near the chapter that contains it."
    )
    print()
    print(f'{INDENT}psql {conninfo} -c "{query}"')
    table = shlex.quote(demo.table)
    print(f"{INDENT}.venv/bin/nearsim similar --dsn {conninfo} --table {table} -s 0.8"
          " --file chapter.txt")
    print(f"{INDENT}.venv/bin/nearsim pairs --dsn {conninfo} --table {table} -s 0.8")
    first, second = (demo.fetchone(demo.query("SELECT id FROM {t} WHERE ref = %s"), (ref,))[0]
                     for ref in (SEED_CHAPTER, PARALLELS[SEED_CHAPTER]))
    print(f"{INDENT}.venv/bin/nearsim compare --dsn {conninfo} --table {table} {first} {second}"
          f" --measure s_l -s 0.6   # {SEED_CHAPTER} and {PARALLELS[SEED_CHAPTER]}")


def run(dsn: str, table: str, radius: int) -> None:
    try:
        conn = psycopg.connect(dsn, autocommit=True)
    except psycopg.OperationalError as error:
        raise DemoError(f"cannot connect to the database: {one_line(error)}", status=2) from None
    with conn:
        try:
            ensure_extension(conn)
        except ProfileMismatch as error:
            raise DemoError(str(error)) from None
        (name,) = conn.execute("SELECT quote_ident(%s)", (table,)).fetchone() or (table,)
        demo = Demo(conn, table, name)
        print(f"nearsim {nearsim.__version__} demo, fingerprint profile {nearsim.PROFILE}\n")
        state = table_state(demo)
        if state == "foreign":
            raise DemoError(f"table {name} exists and was not made by this demo; use --table")
        if state == "complete":
            print(
                f"Table {name} already holds the King James Bible's {KJV_CHAPTERS:,} chapters,"
                f" fingerprinted\nwith profile {nearsim.PROFILE}: load skipped"
                f" (DROP TABLE {name} to load again)"
            )
        else:
            print(f"Loading the King James Bible into table {name}")
            load(demo, state)
        seed_query(demo, radius)
        nearest(demo)
        all_pairs(demo, radius)
        rotation_index(demo, radius)
        verified(demo)
        closing(demo, dsn)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument(
        "--dsn",
        default=os.environ.get("NEARSIM_DSN"),
        help="libpq connection string (default: $NEARSIM_DSN)",
    )
    parser.add_argument(
        "--table", default="kjv_chapters", help="table for the chapters (default: %(default)s)"
    )
    parser.add_argument(
        "--radius",
        type=int,
        default=6,
        help="largest distance in bits that counts as a near-duplicate"
        ' (default: %(default)s, the seeds\' "90%% similar")',
    )
    args = parser.parse_args()
    if not args.dsn:
        parser.error("no database: pass --dsn or set NEARSIM_DSN")
    if not 0 <= args.radius <= BITS:
        parser.error(f"--radius must be between 0 and {BITS}")
    try:
        run(args.dsn, args.table, args.radius)
    except DemoError as error:
        print(f"demo: {error}", file=sys.stderr)
        sys.exit(error.status)
    except psycopg.Error as error:
        message = error.diag.message_primary or one_line(error)
        print(f"demo: database error: {message}", file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
