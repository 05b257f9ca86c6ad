"""Regenerate extension/src/unicode14_tables.h, the character tables of the C
implementation of the default fingerprint profile (extension/src/fingerprint.c).

Every table is computed from the Python reference itself (nearsim.core.fingerprint
and the Unicode 14.0.0 database of Python 3.11), code point by code point, so
the C code classifies each character exactly as the Python does.  The output
is committed; a test checks that it still matches this script's output when
the test runs on a Python with Unicode 14.0.0.

    python tools/gen_c_tables.py > ../extension/src/unicode14_tables.h
"""

from __future__ import annotations

import sys
import unicodedata
from bisect import bisect_right
from collections.abc import Callable, Iterator
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from nearsim.core import _unicode14, fingerprint, text

PINNED_VERSION = "14.0.0"
MAX_CODE_POINT = 0x10FFFF
# PostgreSQL text holds neither NUL nor surrogates.
SURROGATES = range(0xD800, 0xE000)
# Kinds of the range tables (the C code names them).
IGNORABLE, UNASSIGNED = 1, 2
JOINED, SOLO, CLUSTERED, MARK = 1, 2, 3, 4
CASEFOLD_MAX = 3
# small_table: the code points of one or two UTF-8 bytes, looked up directly.
SMALL_CODE_POINTS = 0x800
SMALL_BOUNDARY, SMALL_JOINED, SMALL_SOLO, SMALL_FOLDS, SMALL_MARK = 1, 2, 4, 8, 16


def code_points() -> Iterator[int]:
    for cp in range(1, MAX_CODE_POINT + 1):
        if cp not in SURROGATES:
            yield cp


def pinned_kind(cp: int) -> int:
    """Step 1 as the reference does it: 1 removed, 2 made a space, 0 kept."""
    return (IGNORABLE, UNASSIGNED, 0)[text._PINNED._find(cp)]


_CLUSTERED = text._CharMap(_unicode14.CLUSTERED)
_MARKS = text._CharMap(_unicode14.MARKS)


def word_kind(cp: int) -> int:
    """Step 3 as the reference does it: 1 joins a word, 2 a word alone, 0 a space;
    of the characters that join, 3 a letter that tokenisation 2 makes start a
    token (text.clusters_apart) and 4 a combining mark, which continues it."""
    kind = (JOINED, SOLO, 0)[text._SEPARATORS._find(cp)]
    if kind == JOINED and _CLUSTERED._find(cp) == 0:
        return CLUSTERED
    if kind == JOINED and _MARKS._find(cp) == 0:
        return MARK
    return kind


def boundary_predicate() -> Callable[[int], bool]:
    """Whether a text may be cut just before the code point without changing
    steps 1 to 3: the reference's table of stable code points (kept by step 1,
    starters in NFKC form that nothing composes with)."""
    starts, ends = text._parse_table(_unicode14.STABLE)

    def boundary(cp: int) -> bool:
        i = bisect_right(starts, cp) - 1
        return i >= 0 and cp <= ends[i]

    return boundary


def ranges(kind: Callable[[int], int]) -> Iterator[tuple[int, int, int]]:
    """Maximal ranges of code points of one non-zero kind (surrogates are of none)."""
    start, current = 0, 0
    for cp in range(1, MAX_CODE_POINT + 2):
        value = kind(cp) if cp <= MAX_CODE_POINT and cp not in SURROGATES else 0
        if value != current:
            if current:
                yield start, cp - 1, current
            start, current = cp, value


def range_table(name: str, doc: str, kind: Callable[[int], int]) -> list[str]:
    rows = [f"\t{{0x{a:04X}, 0x{b:04X}, {k}}}," for a, b, k in ranges(kind)]
    return [
        f"/* {doc} */",
        f"static const UnicodeRange {name}[{len(rows)}] = {{",
        *rows,
        "};",
    ]


def casefold_table() -> list[str]:
    rows = []
    for cp in code_points():
        folded = chr(cp).casefold()
        if folded == chr(cp):
            continue
        if len(folded) > CASEFOLD_MAX:
            raise SystemExit(f"U+{cp:04X} folds to {len(folded)} characters")
        targets = [ord(c) for c in folded] + [0] * (CASEFOLD_MAX - len(folded))
        rows.append(f"\t{{0x{cp:04X}, {{{', '.join(f'0x{t:04X}' for t in targets)}}}}},")
    return [
        "/* str.casefold() of every code point it changes; 0 ends a shorter result. */",
        f"static const CaseFolding casefold_table[{len(rows)}] = {{",
        *rows,
        "};",
    ]


def small_table(boundary: Callable[[int], bool]) -> list[str]:
    """What the range tables and the case foldings say of each code point
    below U+0800 (Latin, Greek, Cyrillic, Hebrew, Arabic...), as bit flags."""
    values = []
    for cp in range(SMALL_CODE_POINTS):
        kind = word_kind(cp) if cp else 0
        flags = (SMALL_BOUNDARY if cp and boundary(cp) else 0) | (
            SMALL_SOLO if kind == SOLO else SMALL_JOINED if kind else 0) | (
            SMALL_MARK if kind == MARK else 0) | (
            SMALL_FOLDS if cp and chr(cp).casefold() != chr(cp) else 0)
        values.append(f"0x{flags:02X},")
    rows = ["\t" + " ".join(values[i : i + 16]) for i in range(0, SMALL_CODE_POINTS, 16)]
    return [
        "/* Code points below SMALL_CODE_POINTS: in boundary_table (SMALL_BOUNDARY), in",
        " * word_table (SMALL_JOINED or SMALL_SOLO; SMALL_MARK too for a WORD_MARK), in",
        " * casefold_table (SMALL_FOLDS). */",
        f"static const uint8 small_table[{SMALL_CODE_POINTS}] = {{",
        *rows,
        "};",
    ]


def ascii_table() -> list[str]:
    """Steps 1 to 3 for ASCII, one byte at a time, as the reference's byte table."""
    values = [f"0x{b:02X}," for b in fingerprint._ASCII_SEPARATED[:128]]
    rows = ["\t" + " ".join(values[i : i + 8]) for i in range(0, 128, 8)]
    return [
        "/* ASCII characters lower-cased, or a space when not part of a word. */",
        "static const unsigned char ascii_table[128] = {",
        *rows,
        "};",
    ]


def render() -> str:
    versions = {unicodedata.unidata_version, _unicode14.UNICODE_VERSION}
    if versions != {PINNED_VERSION}:
        raise SystemExit(
            f"this Python has Unicode {unicodedata.unidata_version}; "
            f"the tables must be generated with Unicode {PINNED_VERSION} (Python 3.11)"
        )
    lines = [
        "/*",
        " * Character tables of the default fingerprint profile, Unicode 14.0.0.",
        " *",
        " * Generated by python_client/tools/gen_c_tables.py from the Python",
        " * reference (nearsim.core.fingerprint); do not edit.  Range tables are sorted",
        " * and disjoint; code points in no range are of kind 0.",
        " */",
        "#ifndef NEARSIM_UNICODE14_TABLES_H",
        "#define NEARSIM_UNICODE14_TABLES_H",
        "",
        "typedef struct UnicodeRange",
        "{",
        "\tuint32\t\tfirst;",
        "\tuint32\t\tlast;",
        "\tuint8\t\tkind;",
        "} UnicodeRange;",
        "",
        "typedef struct CaseFolding",
        "{",
        "\tuint32\t\tcode;",
        f"\tuint32\t\tfolded[{CASEFOLD_MAX}];",
        "} CaseFolding;",
        "",
        f"#define PINNED_IGNORABLE {IGNORABLE}",
        f"#define PINNED_UNASSIGNED {UNASSIGNED}",
        f"#define WORD_JOINED {JOINED}",
        f"#define WORD_SOLO {SOLO}",
        f"#define WORD_CLUSTERED {CLUSTERED}",
        f"#define WORD_MARK {MARK}",
        f"#define CASEFOLD_MAX {CASEFOLD_MAX}",
        f"#define SMALL_CODE_POINTS 0x{SMALL_CODE_POINTS:X}",
        f"#define SMALL_BOUNDARY {SMALL_BOUNDARY}",
        f"#define SMALL_JOINED {SMALL_JOINED}",
        f"#define SMALL_SOLO {SMALL_SOLO}",
        f"#define SMALL_FOLDS {SMALL_FOLDS}",
        f"#define SMALL_MARK {SMALL_MARK}",
        "",
    ]
    lines += [*ascii_table(), ""]
    boundary = boundary_predicate()
    lines += [*small_table(boundary), ""]
    for name, doc, kind in (
        ("pinned_table", "Step 1: removed (default ignorable) or made a space (unassigned).",
         pinned_kind),
        ("word_table", "Step 3: word characters that join into runs, or that are a word alone;"
         " of those that join, letters tokenisation 2 starts a token with, and marks.",
         word_kind),
        ("boundary_table", "Code points a text may be cut before (kind 1) without changing "
         "its normalisation.", lambda cp: int(boundary(cp))),
    ):
        lines += [*range_table(name, doc, kind), ""]
    lines += casefold_table()
    lines += ["", "#endif\t\t\t\t\t\t\t/* NEARSIM_UNICODE14_TABLES_H */"]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    sys.stdout.write(render())
