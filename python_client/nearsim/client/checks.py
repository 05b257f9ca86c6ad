"""Whether a table already holds a near-duplicate of each of some files (``nearsim check``).

Every file gets its own answer, as soon as it is found.  A file that cannot
be checked (it cannot be read, it has no words and so no fingerprint, or it
holds characters the database cannot store) is answered with the reason,
and the other files are checked all the same: one empty file in a
pre-commit hook's list must not hide what the others have.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import TextIO

from ..core import measures
from .database_encoding import Repertoire, unstorable_query
from .documents import DocumentTable, Match, VerifiedMatch
from .extract import FileText, InputError, check_text
from .loader import DEFAULT_MAX_BYTES
from .reading import NamedRead, named_documents, read_named

__all__ = ["FileCheck", "check_files", "read_query"]

STDIN = "-"
"""The file name that stands for the standard input, as for nearsim-load's paths."""


@dataclass(frozen=True)
class FileCheck:
    """The answer for one file: its near-duplicates, or why it was not checked."""

    file: str
    near_duplicates: list[Match] | list[VerifiedMatch] | None  # None: not checked
    problem: str | None = None  # why not, in one line that names the file
    shingles: int = 0  # of its text: a fingerprint of few is unreliable
    encoding: str = ""  # what its text was read in ("" for PDF, Word and stdin)
    note: str | None = None  # about its encoding: valid UTF-8 read against --encoding

    @property
    def checked(self) -> bool:
        return self.near_duplicates is not None


def read_query(name: str, stdin: TextIO | None = None, max_bytes: int = DEFAULT_MAX_BYTES,
               encoding: str = "utf-8") -> str:  # fmt: skip
    """The text of the query document ``name`` (``-``: the standard input); InputError
    for one that cannot be read or has no text, as the loader would refuse it."""
    if name == STDIN:
        return check_text((stdin or sys.stdin).read(), max_bytes=max_bytes)
    read = read_named(name, max_bytes=max_bytes, encoding=encoding).read
    assert not isinstance(read, InputError)
    return read.text


def _queries(names: Iterable[str], stdin: TextIO | None,
             encoding: str) -> Iterator[NamedRead]:  # fmt: skip
    """Each document of the files named, as the loader reads them (an e-mail file is
    its messages and attachments), or why it cannot be read."""
    for name in names:
        if name != STDIN:
            yield from named_documents(name, max_bytes=DEFAULT_MAX_BYTES, encoding=encoding)
            continue
        try:
            text = read_query(name, stdin)
        except InputError as error:
            yield NamedRead(name, error)
        else:
            yield NamedRead(name, FileText(text, b"", ""))


def check_files(
    documents: DocumentTable, files: Iterable[str], *, by_bits: bool = False,
    min_similarity: float = measures.DEFAULT_MIN_SIMILARITY,
    measure: str = measures.DEFAULT_MEASURE, max_distance: int | None = None,
    stdin: TextIO | None = None, encoding: str = "utf-8",
) -> Iterator[FileCheck]:  # fmt: skip
    """Each file's near-duplicates in ``documents``, file by file, in the order given.

    As :meth:`DocumentTable.similar_verified` finds them (at least
    ``min_similarity`` similar by ``measure``, candidates within
    ``max_distance`` bits or the calibrated radius), or with ``by_bits`` as
    :meth:`DocumentTable.similar` does (within ``max_distance`` bits).  A file
    that cannot be checked gets a :class:`FileCheck` without near-duplicates
    and with its problem; errors of the database or the search itself (a
    lost connection, a threshold the server refuses) are raised.  Files are
    read as nearsim-load reads them, in ``encoding``; an e-mail file gets an
    answer for each of its messages and attachments (see .reading).
    """
    if by_bits and max_distance is None:
        raise ValueError("a search by bits needs max_distance")
    repertoire = Repertoire(documents.conn)
    for name, read, note in _queries(files, stdin, encoding):
        if isinstance(read, InputError):
            yield FileCheck(name, None, f"{name}: {read.message}: not checked")
            continue
        text, encoding_read = read.text, read.encoding
        shingles = len(measures.Shingled(text).shingles)
        if not shingles:
            yield FileCheck(name, None, f"{name}: no words, so no fingerprint to compare:"
                                        " not checked", 0, encoding_read)  # fmt: skip
            continue
        problem = unstorable_query(repertoire, name, text)
        if problem is not None:
            yield FileCheck(name, None, problem, shingles, encoding_read)
            continue
        found: list[Match] | list[VerifiedMatch]
        if by_bits:
            assert max_distance is not None
            found = documents.similar(text, max_distance)
        else:
            found = documents.similar_verified(text, min_similarity, measure, max_distance)
        yield FileCheck(name, found, None, shingles, encoding_read, note)
