"""The evaluation corpus on disk, in COPY text format, read back one text at a time.

A million documents of benchmarks/corpus.py are about 4.3 GB of text: the
file is written once (``corpus-<originals>-seed<N>-<documents>.copy`` and a
``.json`` beside it saying what it holds) and every later step streams it,
so no step holds the texts twice.  Each line is ``position<TAB>text`` with
the text escaped as PostgreSQL's COPY text format wants (backslash, newline,
carriage return and tab), so the file goes into a table by ``COPY ... FROM
STDIN`` unchanged, and :func:`read_texts` gives back the texts exactly.

Sizes are nested (benchmarks/corpus.py): the first N lines of the file of
the largest size are the corpus built at size N, so one file serves every size.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import psycopg
from psycopg import sql

from .corpus import _package_version, iter_corpus

__all__ = ["CorpusFile", "copy_into", "corpus_file", "escape", "read_texts", "unescape"]

PACKAGES = ("bible-kjv", "base-files", "manpages", "manpages-dev")
"""The packages the originals come from: their versions are part of the file's identity."""

COPY_BLOCK = 8 << 20
"""Bytes sent to COPY at a time."""


@dataclass(frozen=True)
class CorpusFile:
    path: Path
    documents: int
    megabytes: float
    """Of the file (of its first ``documents`` lines, estimated, for a larger file)."""
    seconds: float
    """Seconds it took to build and write (0 when it was there already)."""
    reused: bool


def escape(text: str) -> str:
    """``text`` as a field of COPY's text format."""
    return (text.replace("\\", "\\\\").replace("\n", "\\n").replace("\r", "\\r")
            .replace("\t", "\\t"))


def unescape(field: str) -> str:
    """The text of a field :func:`escape` wrote."""
    if "\\" not in field:
        return field
    # An escaped backslash first: what is left of a piece is a single escape.
    return "\\".join(piece.replace("\\n", "\n").replace("\\r", "\r").replace("\\t", "\t")
                     for piece in field.split("\\\\"))


def _identity(originals: str, seed: int, documents: int) -> dict[str, object]:
    return {"originals": originals, "seed": seed, "documents": documents,
            "packages": {p: _package_version(p) for p in PACKAGES}}


def corpus_file(directory: Path, documents: int, seed: int = 3,
                originals: str = "large") -> CorpusFile:
    """The file of the first ``documents`` documents of the corpus, written if it is not there.

    ``originals`` is the corpus size whose originals are used (``small`` or
    ``large``: every larger size has the same originals).
    """
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"corpus-{originals}-seed{seed}-{documents}.copy"
    meta = path.with_suffix(".json")
    identity = _identity(originals, seed, documents)
    # A file of more documents serves as well: its first lines are this corpus.
    for other in sorted(directory.glob(f"corpus-{originals}-seed{seed}-*.json")):
        known = json.loads(other.read_text(encoding="utf-8"))
        held = known.get("identity", {})
        if (held.get("documents", -1) >= documents and other.with_suffix(".copy").exists()
                and {**held, "documents": documents} == identity):
            megabytes = known["bytes"] / 1e6 * documents / held["documents"]
            return CorpusFile(other.with_suffix(".copy"), documents, megabytes, 0.0, True)
    started = time.perf_counter()
    written = 0
    partial = path.with_suffix(".partial")
    with partial.open("w", encoding="utf-8", newline="\n") as out:
        for position, document in enumerate(iter_corpus(originals, seed, documents=documents)):
            if position >= documents:
                break
            line = f"{position}\t{escape(document.text)}\n"
            written += len(line.encode("utf-8"))
            out.write(line)
    partial.replace(path)
    seconds = time.perf_counter() - started
    meta.write_text(json.dumps({"identity": identity, "bytes": written, "seconds": seconds}),
                    encoding="utf-8")
    return CorpusFile(path, documents, written / 1e6, seconds, False)


def read_texts(path: Path, documents: int | None = None) -> Iterator[str]:
    """The texts of the first ``documents`` lines (all by default), in order."""
    with path.open(encoding="utf-8", newline="\n") as source:
        for count, line in enumerate(source):
            if documents is not None and count >= documents:
                return
            _, _, field = line.rstrip("\n").partition("\t")
            yield unescape(field)


def copy_into(conn: psycopg.Connection, table: sql.Composable, path: Path,
              documents: int) -> int:
    """``COPY table (id, body)`` from the first ``documents`` lines of the file: bytes sent."""
    with path.open("rb") as source, conn.cursor() as cursor, cursor.copy(
        sql.SQL("COPY {} (id, body) FROM STDIN").format(table)
    ) as copy:
        block: list[bytes] = []
        size = sent = 0
        for count, line in enumerate(source):
            if count >= documents:
                break
            block.append(line)
            size += len(line)
            sent += len(line)
            if size >= COPY_BLOCK:
                copy.write(b"".join(block))
                block, size = [], 0
        if block:
            copy.write(b"".join(block))
    return sent
