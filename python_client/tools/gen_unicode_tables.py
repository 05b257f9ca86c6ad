"""Regenerate nearsim/core/_unicode14.py, the character classes frozen into the
default fingerprint profile.

The profile pins Unicode 14.0.0 (the database that Python 3.11 ships), so
this script refuses to run under any other Unicode version.  The output is
committed; a test checks that it still matches this script's output when the
test runs on a Python with Unicode 14.0.0.

    python tools/gen_unicode_tables.py > nearsim/core/_unicode14.py
"""

from __future__ import annotations

import sys
import textwrap
import unicodedata
from collections.abc import Callable, Iterator

PINNED_VERSION = "14.0.0"

# Scripts written without spaces between words whose characters are each a
# word of their own (UAX #29 gives them no word-break property, so every
# character is a segment).  Recognised by character name.
SOLO_NAME_PREFIXES = (
    "CJK UNIFIED IDEOGRAPH",
    "CJK COMPATIBILITY IDEOGRAPH",
    "HIRAGANA ",
    "IDEOGRAPHIC ",
    "TANGUT ",
    "NUSHU ",
    "KHITAN SMALL SCRIPT ",
)


# Default_Ignorable_Code_Point of Unicode 14.0.0 (DerivedCoreProperties.txt);
# Python's database does not carry this property.
IGNORABLE_RANGES = (
    (0x00AD, 0x00AD), (0x034F, 0x034F), (0x061C, 0x061C), (0x115F, 0x1160),
    (0x17B4, 0x17B5), (0x180B, 0x180F), (0x200B, 0x200F), (0x202A, 0x202E),
    (0x2060, 0x206F), (0x3164, 0x3164), (0xFE00, 0xFE0F), (0xFEFF, 0xFEFF),
    (0xFFA0, 0xFFA0), (0xFFF0, 0xFFF8), (0x1BCA0, 0x1BCA3), (0x1D173, 0x1D17A),
    (0xE0000, 0xE0FFF),
)  # fmt: skip


def is_ignorable(ch: str) -> bool:
    cp = ord(ch)
    return any(a <= cp <= b for a, b in IGNORABLE_RANGES)


def is_unassigned(ch: str) -> bool:
    return unicodedata.category(ch) == "Cn"


def is_word(ch: str) -> bool:
    category = unicodedata.category(ch)
    return category[0] in "LMN" or category == "Pc"


# Tangut ideographs have no names in Python's database; take their blocks.
SOLO_BLOCKS = ((0x17000, 0x187FF), (0x18D00, 0x18D7F))


def is_solo(ch: str) -> bool:
    if unicodedata.category(ch)[0] not in "LN":
        return False
    cp = ord(ch)
    return unicodedata.name(ch, "").startswith(SOLO_NAME_PREFIXES) or any(
        a <= cp <= b for a, b in SOLO_BLOCKS
    )


# Blocks of the scripts written without spaces between words whose words only a
# dictionary finds (Line_Break SA in UAX #14): Thai, Lao, Myanmar, Khmer, Tai
# Le, New Tai Lue, Tai Tham, Myanmar Extended-B and -A, Tai Viet, Ahom.
CLUSTERED_BLOCKS = (
    (0x0E00, 0x0E7F), (0x0E80, 0x0EFF), (0x1000, 0x109F), (0x1780, 0x17FF),
    (0x1950, 0x197F), (0x1980, 0x19DF), (0x1A20, 0x1AAF), (0xA9E0, 0xA9FF),
    (0xAA60, 0xAA7F), (0xAA80, 0xAADF), (0x11700, 0x1174F),
)  # fmt: skip


def is_clustered(ch: str) -> bool:
    """A letter that tokenisation 2 makes the start of a token of its own."""
    cp = ord(ch)
    return unicodedata.category(ch)[0] == "L" and any(a <= cp <= b for a, b in CLUSTERED_BLOCKS)


def is_mark(ch: str) -> bool:
    return unicodedata.category(ch)[0] == "M"


def composes_with_previous() -> set[int]:
    """Code points that canonical composition can join to the character before.

    The second characters of the primary composites, plus Hangul vowel and
    trailing consonant jamo (NFKC_Quick_Check = Maybe).
    """
    found = set(range(0x1161, 0x1176)) | set(range(0x11A8, 0x11C3))
    for cp in range(1, sys.maxunicode + 1):
        decomposition = unicodedata.decomposition(chr(cp))
        if not decomposition or decomposition.startswith("<"):
            continue
        parts = [int(p, 16) for p in decomposition.split()]
        if len(parts) != 2:
            continue
        if unicodedata.normalize("NFC", chr(parts[0]) + chr(parts[1])) == chr(cp):
            found.add(parts[1])
    return found


def stable_predicate() -> Callable[[str], bool]:
    """Whether step 1 keeps the character and it is a starter in NFKC form that
    nothing composes with: text made of such characters is its own NFKC, and
    a text may be cut before one without changing steps 1 to 3."""
    maybe = composes_with_previous()

    def stable(ch: str) -> bool:
        return (not is_ignorable(ch) and not is_unassigned(ch) and not 0xD800 <= ord(ch) < 0xE000
                and unicodedata.combining(ch) == 0
                and unicodedata.normalize("NFKC", ch) == ch and ord(ch) not in maybe)

    return stable


def ranges(predicate: Callable[[str], bool]) -> Iterator[tuple[int, int]]:
    start = None
    for cp in range(sys.maxunicode + 2):
        inside = cp <= sys.maxunicode and predicate(chr(cp))
        if inside and start is None:
            start = cp
        elif not inside and start is not None:
            yield start, cp - 1
            start = None


def encode(predicate: Callable[[str], bool]) -> str:
    parts = [f"{a:x}" if a == b else f"{a:x}-{b:x}" for a, b in ranges(predicate)]
    # Never break inside a range: "fdb-fff" must stay one item.
    return "\n".join(textwrap.wrap(" ".join(parts), 76, break_on_hyphens=False))


def render() -> str:
    if unicodedata.unidata_version != PINNED_VERSION:
        raise SystemExit(
            f"this Python has Unicode {unicodedata.unidata_version}; "
            f"the tables must be generated with Unicode {PINNED_VERSION} (Python 3.11)"
        )
    blocks = [
        '"""Character classes of Unicode 14.0.0, frozen for the fingerprint.',
        "",
        "Generated by tools/gen_unicode_tables.py; do not edit.  Each table is a",
        "space-separated list of hexadecimal code points and ranges.",
        '"""',
        "",
        f'UNICODE_VERSION = "{PINNED_VERSION}"',
    ]
    for name, doc, predicate in (
        (
            "IGNORABLE",
            "Default_Ignorable_Code_Point (soft hyphen, zero-width characters, "
            "variation selectors...).",
            is_ignorable,
        ),
        ("UNASSIGNED", "General category Cn, default ignorables excepted.",
         lambda ch: is_unassigned(ch) and not is_ignorable(ch)),
        (
            "JOINED",
            "Word characters (general category L*, M*, N* or Pc) that join into runs.",
            lambda ch: is_word(ch) and not is_solo(ch),
        ),
        ("SOLO", "Word characters that form a token on their own (ideographs, kana).", is_solo),
        ("CLUSTERED", "Letters that tokenisation 2 cuts one to a token (Thai, Lao, Khmer...).",
         is_clustered),
        ("MARKS", "Combining marks (general category M*).", is_mark),
        ("STABLE", "Their own NFKC, kept by step 1, nothing composes with them: cuts before"
         " them are safe.",
         stable_predicate()),
    ):
        blocks += ["", f"# {doc}", f'{name} = """', encode(predicate), '"""']
    return "\n".join(blocks) + "\n"


if __name__ == "__main__":
    sys.stdout.write(render())
