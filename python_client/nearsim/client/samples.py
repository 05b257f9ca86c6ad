"""Sample corpora built from texts that any Debian machine can install.

The King James Bible (Debian package ``bible-kjv``) is split into its 1,189
chapters.  It has natural near-duplicates: Psalms 14 and 53, 2 Kings 19 and
Isaiah 37, 2 Samuel 22 and Psalms 18, Psalms 40:13-17 and Psalms 70, Ezra 2
and Nehemiah 7.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from collections.abc import Iterable, Iterator
from typing import NamedTuple

# (book, chapters) in canonical order, as the `bible` program names them.
KJV_BOOKS: tuple[tuple[str, int], ...] = (
    ("Genesis", 50), ("Exodus", 40), ("Leviticus", 27), ("Numbers", 36),
    ("Deuteronomy", 34), ("Joshua", 24), ("Judges", 21), ("Ruth", 4),
    ("1 Samuel", 31), ("2 Samuel", 24), ("1 Kings", 22), ("2 Kings", 25),
    ("1 Chronicles", 29), ("2 Chronicles", 36), ("Ezra", 10), ("Nehemiah", 13),
    ("Esther", 10), ("Job", 42), ("Psalms", 150), ("Proverbs", 31),
    ("Ecclesiastes", 12), ("Song of Solomon", 8), ("Isaiah", 66), ("Jeremiah", 52),
    ("Lamentations", 5), ("Ezekiel", 48), ("Daniel", 12), ("Hosea", 14),
    ("Joel", 3), ("Amos", 9), ("Obadiah", 1), ("Jonah", 4), ("Micah", 7),
    ("Nahum", 3), ("Habakkuk", 3), ("Zephaniah", 3), ("Haggai", 2),
    ("Zechariah", 14), ("Malachi", 4), ("Matthew", 28), ("Mark", 16),
    ("Luke", 24), ("John", 21), ("Acts", 28), ("Romans", 16),
    ("1 Corinthians", 16), ("2 Corinthians", 13), ("Galatians", 6),
    ("Ephesians", 6), ("Philippians", 4), ("Colossians", 4),
    ("1 Thessalonians", 5), ("2 Thessalonians", 3), ("1 Timothy", 6),
    ("2 Timothy", 4), ("Titus", 3), ("Philemon", 1), ("Hebrews", 13),
    ("James", 5), ("1 Peter", 5), ("2 Peter", 3), ("1 John", 5), ("2 John", 1),
    ("3 John", 1), ("Jude", 1), ("Revelation", 22),
)  # fmt: skip

_VERSE = re.compile(r"^\s+(\d+) (.*)$")


class Chapter(NamedTuple):
    """One chapter of the KJV: ``ref`` is e.g. ``"Psalms 14"``."""

    ref: str
    book: str
    chapter: int
    text: str


class SampleUnavailable(RuntimeError):
    """A sample corpus cannot be read on this machine."""


def _bible_program() -> str:
    program = shutil.which("bible")
    if program is None:
        raise SampleUnavailable(
            "the KJV sample needs the `bible` program: apt-get install bible-kjv"
        )
    return program


def _parse(output: str) -> Iterator[tuple[str, list[str]]]:
    """(heading, verses) for each chapter in the output of ``bible``."""
    heading: str | None = None
    verses: list[str] = []
    for line in output.splitlines():
        verse = _VERSE.match(line)
        if verse:
            verses.append(verse.group(2).strip())
        elif line.strip():
            if heading is not None:
                yield heading, verses
            heading, verses = line.strip(), []
    if heading is not None:
        yield heading, verses


def _book_chapters(program: str, book: str, chapters: Iterable[int]) -> Iterator[Chapter]:
    numbers = list(chapters)
    # The program wants the book name without spaces ("1Samuel") and clamps
    # chapter numbers out of range, so every heading is checked.
    query = book.replace(" ", "")
    specs = [f"{query} {n}:1-999" for n in numbers]
    output = subprocess.run(
        [program, "-l100000", *specs], check=True, capture_output=True, text=True
    ).stdout
    parsed = list(_parse(output))
    if len(parsed) != len(numbers):
        raise SampleUnavailable(
            f"`bible` returned {len(parsed)} chapters of {book}, not {len(numbers)}"
        )
    for number, (heading, verses) in zip(numbers, parsed, strict=True):
        ref = f"{book} {number}"
        if heading != ref or not verses:
            raise SampleUnavailable(f"`bible` returned {heading!r} when asked for {ref!r}")
        yield Chapter(ref, book, number, "\n".join(verses) + "\n")


def kjv_chapters(books: Iterable[str] | None = None) -> list[Chapter]:
    """The chapters of the King James Bible, verse numbers removed, one verse a line.

    ``books`` limits the result to the named books (in canonical order).
    """
    program = _bible_program()
    wanted = None if books is None else set(books)
    known = {name for name, _ in KJV_BOOKS}
    if wanted is not None and not wanted <= known:
        raise ValueError(f"unknown KJV books: {sorted(wanted - known)}")
    result: list[Chapter] = []
    for book, count in KJV_BOOKS:
        if wanted is None or book in wanted:
            result.extend(_book_chapters(program, book, range(1, count + 1)))
    return result
