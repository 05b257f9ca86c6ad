"""The KJV sample corpus read from Debian's bible-kjv."""

from __future__ import annotations

import pytest

import nearsim
from nearsim.client.samples import SampleUnavailable, kjv_chapters


def test_all_chapters_in_order_without_verse_numbers() -> None:
    chapters = kjv_chapters()
    assert len(chapters) == 1189
    assert chapters[0].ref == "Genesis 1" and chapters[-1].ref == "Revelation 22"
    assert chapters[0].text.startswith("In the beginning God created the heaven and the earth.\n")
    by_ref = {c.ref: c for c in chapters}
    assert len(by_ref) == 1189
    psalm = by_ref["Psalms 14"]
    assert (psalm.book, psalm.chapter) == ("Psalms", 14)
    assert psalm.text.count("\n") == 7  # seven verses, one a line
    assert not any(line[:1].isdigit() for line in psalm.text.splitlines())


def test_books_can_be_chosen() -> None:
    chapters = kjv_chapters(["Jude", "Obadiah"])
    assert [c.ref for c in chapters] == ["Obadiah 1", "Jude 1"]


def test_natural_near_duplicates_are_near() -> None:
    chapters = kjv_chapters(["2 Kings", "Isaiah", "Genesis"])
    si = {c.ref: nearsim.simhash(c.text) or 0 for c in chapters}
    near = nearsim.hamming(si["2 Kings 19"], si["Isaiah 37"])
    far = nearsim.hamming(si["2 Kings 19"], si["Genesis 1"])
    assert near <= 10 < 20 <= far


def test_unknown_book_is_an_error() -> None:
    with pytest.raises(ValueError, match="unknown KJV books"):
        kjv_chapters(["Maccabees"])


def test_missing_program_is_reported(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", "/nonexistent")
    with pytest.raises(SampleUnavailable, match="apt-get install bible-kjv"):
        kjv_chapters(["Jude"])
