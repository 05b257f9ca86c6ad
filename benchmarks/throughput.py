"""Sections 1 and 2 of the benchmarks: fingerprint throughput.

1. ``simhash(text)`` in the database, and ``simhash(body, 'default/1')``,
   the PL/Python reference implementation of the same profile, over the King
   James Bible in one backend (MB/s);
2. ``nearsim.simhash`` in the benchmark's own Python process over the same
   texts (MB/s, one core).

Both run on the KJV chapters and on the same text joined into documents of
about 400 KB, so that per-document costs and per-byte costs show apart, and
on text that is not ASCII: the German and the Russian manual pages of Debian
(packages manpages-de and manpages-ru, rendered with groff).
"""

from __future__ import annotations

import platform
from collections.abc import Sequence

from psycopg import sql

import nearsim
from nearsim.client.samples import Chapter, SampleUnavailable, kjv_chapters

from .common import MB, BenchError, Connection, Corpus, best_of, print_table, wrap
from .corpus import translated_manpages

SEED_JAVA_MBPS = 3.3  # the seed paper's Java implementation, MB/s
TARGET_MBPS = 50.0  # target for simhash(text) in the database, MB/s per core
LONG_DOC_BYTES = 400_000  # size of one "long document"
# Real text that is not ASCII: (corpus name, Debian package of manual pages)
TRANSLATED_MANPAGES = (("German manual pages", "manpages-de"),
                       ("Russian manual pages", "manpages-ru"))
QUICK_MANPAGES = 40  # pages of each in a quick run


def read_corpora(quick: bool = False) -> list[Corpus]:
    """The KJV corpora (:func:`kjv_corpora`), then the German and the Russian manual
    pages (their first QUICK_MANPAGES in a ``quick`` run)."""
    corpora = kjv_corpora()
    for name, package in TRANSLATED_MANPAGES:
        try:
            pages = translated_manpages(package, QUICK_MANPAGES if quick else None)
        except RuntimeError as error:
            raise BenchError(str(error), status=1) from None
        corpora.append(Corpus(name, pages, [nearsim.simhash(t) for t in pages]))
    return corpora


def kjv_corpora() -> list[Corpus]:
    """The KJV chapters, and the same text cut into documents of about 400 KB."""
    try:
        chapters: list[Chapter] = kjv_chapters()
    except SampleUnavailable as error:
        raise BenchError(f"cannot read the sample corpus: {error}", status=1) from None
    texts = [chapter.text for chapter in chapters]
    total = sum(len(text.encode()) for text in texts)
    count = max(1, round(total / LONG_DOC_BYTES))
    # Whole chapters, in order, into `count` documents of about total/count bytes.
    long_texts: list[str] = []
    current: list[str] = []
    size = 0
    for text in texts:
        current.append(text)
        size += len(text.encode())
        if size >= total * (len(long_texts) + 1) / count and len(long_texts) < count - 1:
            long_texts.append("".join(current))
            current = []
    if current:
        long_texts.append("".join(current))
    # The client's fingerprints, to check that the database computes the same;
    # this is also the client's warm-up pass.
    return [
        Corpus("KJV chapters", texts, [nearsim.simhash(t) for t in texts]),
        Corpus("long documents", long_texts, [nearsim.simhash(t) for t in long_texts]),
    ]


def load_corpus(conn: Connection, table: sql.Composable, corpus: Corpus) -> int:
    """Copy the texts into ``table``; return their size in bytes as the database counts it."""
    conn.execute(
        sql.SQL("CREATE UNLOGGED TABLE {} (id int PRIMARY KEY, body text NOT NULL)").format(table)
    )
    copy_sql = sql.SQL("COPY {} (id, body) FROM STDIN").format(table)
    with conn.cursor() as cur, cur.copy(copy_sql) as copy:
        for number, text in enumerate(corpus.texts, start=1):
            copy.write_row((number, text))
    conn.execute(sql.SQL("VACUUM ANALYZE {}").format(table))
    row = conn.execute(sql.SQL("SELECT sum(octet_length(body)) FROM {}").format(table)).fetchone()
    nbytes = int(row[0]) if row and row[0] is not None else 0
    if nbytes != corpus.nbytes:
        raise BenchError(f"{corpus.name}: the database holds {nbytes} bytes of text, the client"
                         f" sent {corpus.nbytes}")
    return nbytes


def database_simhash(conn: Connection, schema: str, corpora: Sequence[Corpus],
                     repeat: int) -> tuple[list[tuple[Corpus, float]], list[tuple[Corpus, float]]]:
    """Best seconds of one pass of simhash(body) over each corpus in one backend,
    and of the PL/Python reference simhash(body, 'default/1')."""
    print("\n1. simhash(text) in the database: one backend, one core\n")
    tables = [sql.Identifier(schema, f"corpus_{i}") for i in range(len(corpora))]
    query = sql.SQL("SELECT count(*), sum(simhash(body)) FROM {}")
    print("   SELECT count(*), sum(simhash(body)) FROM <corpus table>\n")
    wrap(
        "The texts are COPYed into an unlogged table (one row per document; PostgreSQL"
        " stores them compressed, TOAST) and fingerprinted by one backend with"
        " max_parallel_workers_per_gather = 0 and jit = off. The first call of the PL/Python"
        " reference in a session imports numpy, so a warm-up call and one untimed pass over"
        " each table run"
        " first; that pass also checks that the database's fingerprints are the client's"
        f" (the sum of all). Time: best of {repeat} passes, wall clock in this client, so it"
        " includes reading and decompressing the rows and one round trip. MB = 10^6 bytes of"
        " UTF-8 text (octet_length). Seed paper's Java: 3.3 MB/s; target: >= 50 MB/s per core."
        " Then the same passes with simhash(body, 'default/1'): the PL/Python reference"
        " implementation of the same profile, which must give the same sum."
    )
    conn.execute("SELECT simhash('warm up', 'default/1')")  # imports numpy
    results = []
    references = []
    reference = sql.SQL("SELECT count(*), sum(simhash(body, 'default/1')) FROM {}")
    for corpus, table in zip(corpora, tables, strict=True):
        load_corpus(conn, table, corpus)
        expected = (len(corpus.texts), sum(f for f in corpus.fingerprints if f is not None))
        timings = []
        for statement in (query.format(table), reference.format(table)):

            def run(statement: sql.Composed = statement, expected: tuple[int, int] = expected,
                    name: str = corpus.name) -> None:
                row = conn.execute(statement).fetchone()
                got = (int(row[0]), int(row[1])) if row else None
                if got != expected:
                    raise BenchError(f"{name}: the database's {statement.as_string(conn)} gave"
                                     f" (count, sum) {got}, the client's nearsim.simhash"
                                     f" {expected}")

            run()  # untimed: warm-up and check
            timings.append(min(best_of(repeat, run)))
        results.append((corpus, timings[0]))
        references.append((corpus, timings[1]))
    print_throughput(results)
    print("\n   The PL/Python reference, simhash(body, 'default/1'):")
    print_throughput(references)
    return results, references


def client_simhash(corpora: Sequence[Corpus], repeat: int) -> list[tuple[Corpus, float]]:
    """Best seconds of one pass of nearsim.simhash over each corpus in this process."""
    print("\n2. nearsim.simhash in this Python process: one core\n")
    print("   for text in texts: nearsim.simhash(text)\n")
    wrap(
        f"Python {platform.python_version()}, the same texts as in 1, already in memory as"
        " str. The pass that computed the reference fingerprints for 1 was the warm-up."
        f" Time: best of {repeat} passes (time.perf_counter)."
    )
    results = []
    for corpus in corpora:
        texts = corpus.texts

        def run(texts: list[str] = texts) -> None:
            for text in texts:
                nearsim.simhash(text)

        results.append((corpus, min(best_of(repeat, run))))
    print_throughput(results)
    return results


def print_throughput(results: Sequence[tuple[Corpus, float]]) -> None:
    rows = []
    for corpus, seconds in results:
        sizes = [len(t.encode()) for t in corpus.texts]
        mbps = corpus.nbytes / MB / seconds
        rows.append([
            corpus.name,
            f"{len(corpus.texts):,}",
            f"{min(sizes) / 1000:,.1f}-{max(sizes) / 1000:,.1f}",
            f"{corpus.nbytes / MB:.2f}",
            f"{seconds:.3f}",
            f"{mbps:.1f}",
            f"{mbps / SEED_JAVA_MBPS:.2f}x",
            f"{mbps / TARGET_MBPS:.2f}x",
        ])
    print()
    print_table(
        ["corpus", "docs", "KB per doc", "MB", "best s", "MB/s", "vs 3.3 MB/s", "vs 50 MB/s"],
        rows, "<>>>>>>>",
    )
