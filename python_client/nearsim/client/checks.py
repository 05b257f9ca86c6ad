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
from .extract import InputError, check_text, read_text
from .loader import DEFAULT_MAX_BYTES

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

    @property
    def checked(self) -> bool:
        return self.near_duplicates is not None


def read_query(name: str, stdin: TextIO | None = None,
               max_bytes: int = DEFAULT_MAX_BYTES) -> str:  # fmt: skip
    """The text of the query document ``name`` (``-``: the standard input); InputError
    for one that cannot be read or has no text, as the loader would refuse it."""
    if name == STDIN:
        return check_text((stdin or sys.stdin).read(), max_bytes=max_bytes)
    return read_text(name, max_bytes=max_bytes)


def check_files(
    documents: DocumentTable, files: Iterable[str], *, by_bits: bool = False,
    min_similarity: float = measures.DEFAULT_MIN_SIMILARITY,
    measure: str = measures.DEFAULT_MEASURE, max_distance: int | None = None,
    stdin: TextIO | None = None,
) -> Iterator[FileCheck]:  # fmt: skip
    """Each file's near-duplicates in ``documents``, file by file, in the order given.

    As :meth:`DocumentTable.similar_verified` finds them (at least
    ``min_similarity`` similar by ``measure``, candidates within
    ``max_distance`` bits or the calibrated radius), or with ``by_bits`` as
    :meth:`DocumentTable.similar` does (within ``max_distance`` bits).  A file
    that cannot be checked gets a :class:`FileCheck` without near-duplicates
    and with its problem; errors of the database or the search itself (a
    lost connection, a threshold the server refuses) are raised.
    """
    if by_bits and max_distance is None:
        raise ValueError("a search by bits needs max_distance")
    repertoire = Repertoire(documents.conn)
    for name in files:
        try:
            text = read_query(name, stdin)
        except InputError as error:
            yield FileCheck(name, None, f"{name}: {error.message}: not checked")
            continue
        shingles = len(measures.Shingled(text).shingles)
        if not shingles:
            yield FileCheck(name, None, f"{name}: no words, so no fingerprint to compare:"
                                        " not checked")  # fmt: skip
            continue
        problem = unstorable_query(repertoire, name, text)
        if problem is not None:
            yield FileCheck(name, None, problem, shingles)
            continue
        found: list[Match] | list[VerifiedMatch]
        if by_bits:
            assert max_distance is not None
            found = documents.similar(text, max_distance)
        else:
            found = documents.similar_verified(text, min_similarity, measure, max_distance)
        yield FileCheck(name, found, None, shingles)
