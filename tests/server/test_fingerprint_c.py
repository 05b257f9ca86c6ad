"""The C ``simhash(text)`` against the Python reference, bit for bit.

The database's ``simhash(text)`` is the C implementation of profile
``default/1`` (extension/src/fingerprint.c); ``nearsim.core.fingerprint.simhash``
and ``simhash(text, 'default/1')`` (PL/Python) are the reference it must
equal on every text.
"""

from __future__ import annotations

import json
import random
import subprocess
import sys
import unicodedata
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import psycopg
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from psycopg.conninfo import make_conninfo

from nearsim.core import fingerprint

from cases import expand, golden_path

ROOT = Path(__file__).resolve().parents[2]
GOLDEN = [json.loads(line) for line in golden_path("default/1").read_text().splitlines()]
HUGE = 1_100_000  # characters: more than one piece of the Python and of the C code


def sql_simhashes(conn: psycopg.Connection[Any], texts: Sequence[str]) -> list[int | None]:
    """``simhash(t)`` of each text, in one round trip."""
    rows = conn.execute(
        "SELECT simhash(t) FROM unnest(%s::text[]) WITH ORDINALITY AS u(t, i) ORDER BY i",
        (list(texts),),
    ).fetchall()
    return [row[0] for row in rows]


def assert_same_as_python(conn: psycopg.Connection[Any], texts: Sequence[str]) -> None:
    got = sql_simhashes(conn, texts)
    for text, value in zip(texts, got, strict=True):
        assert value == fingerprint.simhash(text), ascii(text[:200])


# -- the golden vectors ------------------------------------------------------


@pytest.mark.parametrize("case", GOLDEN, ids=[case["name"] for case in GOLDEN])
def test_golden_vector(conn: psycopg.Connection[Any], case: dict[str, Any]) -> None:
    text = expand(case)
    c_value, reference = conn.execute(
        "SELECT simhash(%s), simhash(%s, 'default/1')", (text, text)
    ).fetchone() or (None, None)
    assert c_value == case["simhash"]
    assert reference == case["simhash"]


def test_simhash_text_is_the_c_function(conn: psycopg.Connection[Any]) -> None:
    language = conn.execute(
        "SELECT l.lanname FROM pg_proc p JOIN pg_language l ON l.oid = p.prolang"
        " WHERE p.oid = 'simhash(text)'::regprocedure"
    ).fetchone()
    assert language == ("c",)


def test_null_and_textless(conn: psycopg.Connection[Any]) -> None:
    row = conn.execute("SELECT simhash(NULL::text), simhash(''), simhash(' .,;- ')").fetchone()
    assert row == (None, None, None)


# -- generated texts ------------------------------------------------------------

# Characters where an implementation can go wrong: combining marks that
# reorder and compose, Hangul jamo, compatibility characters, default
# ignorables, unassigned code points (among them U+0FDC and U+ABFB, which the
# reference's pinned table leaves as they are), ideographs and kana, case
# foldings to several characters, Greek sigma and iota subscript, Cherokee.
TRICKY = (
    "aAzZ09_'-.,!? \t\n\r\x0b\x0c\x01\x7f"
    "\u0300\u0301\u0308\u0323\u0327\u031b\u0345\u05b0\u0f71\u0f72\u0f73\u0f77\u093c\u0915"
    "\u3099\u309a\u309b\u304b\u30ab\u1100\u1161\u11a8\u1175\u11c2\uac00\uac01\u3131\uffa1"
    "\ufb00\ufb01\uff26\uff35\u2460\u00b2\u2075\u338f\u00bd\ufdfa\u017f\u212a\u2126\u212b"
    "\u00ad\u200b\u200c\u200d\ufe0f\u034f\U000e0001\U0001d173\u180e\u2060\ufeff\u3164"
    "\u0378\u0fdb\u0fdc\u0fff\uabfb\U0002fffe\U0010ffff\ufdd0\U000e0fff"
    "\u4e00\u5b57\uf900\ufa10\u3042\u3093\u30a2\uff71\U00020000\U0002f800\u3005\u3007"
    "\u00df\u1e9e\u0149\u01f0\u0390\u03b0\u0130\u0131\u1f80\u1fb3\u1fbc\u0587\ufb13"
    "\u03a3\u03c3\u03c2\u0391\u03ac\u1f71"
    "\u13a0\u13f5\u13f8\uab70\uabbf"
    "\u00a0\u3000\u2028\u0663\u00e9\u00c5\u1e0a\u0130\u0387\u037e\u1fef\u0958\u2126\ua7ae"
)
tricky_text = st.text(alphabet=st.sampled_from(TRICKY), max_size=40)
any_text = st.text(
    alphabet=st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"),
    max_size=60,
)
ASCII_WORDS = ("The", "fool", "hath", "said", "in", "his", "HEART", "there", "is", "no", "God")
# Mostly English with a few odd characters: the C code takes the general
# steps only around them.
mostly_ascii_text = st.lists(
    st.one_of(
        st.sampled_from(ASCII_WORDS),
        st.sampled_from((" ", " ", " ", "  ", "\n", ", ", ". ", "\t")),
        st.text(alphabet=st.sampled_from(TRICKY), min_size=1, max_size=3),
    ),
    max_size=60,
).map("".join)

BATCH = 25
PROPERTY_SETTINGS = settings(
    max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)


@PROPERTY_SETTINGS
@given(texts=st.lists(any_text, min_size=BATCH, max_size=BATCH))
def test_any_unicode_text(conn: psycopg.Connection[Any], texts: list[str]) -> None:
    assert_same_as_python(conn, texts)


@PROPERTY_SETTINGS
@given(texts=st.lists(tricky_text, min_size=BATCH, max_size=BATCH))
def test_tricky_characters(conn: psycopg.Connection[Any], texts: list[str]) -> None:
    assert_same_as_python(conn, texts)


@PROPERTY_SETTINGS
@given(texts=st.lists(mostly_ascii_text, min_size=BATCH, max_size=BATCH))
def test_mostly_ascii_text(conn: psycopg.Connection[Any], texts: list[str]) -> None:
    assert_same_as_python(conn, texts)


@pytest.mark.parametrize("alphabet", ["\u00df\u0149\u01f0\u0390\ufb00", "\u03a3\u03c3\u03c2 ",
                                      "\u13a0\u13f8\uab70 ", "\u1100\u1161\u11a8 "])
def test_each_character_and_pairs(conn: psycopg.Connection[Any], alphabet: str) -> None:
    texts = [a + b + c for a in alphabet for b in alphabet for c in alphabet]
    assert_same_as_python(conn, [*texts, " ".join(texts)])


def test_every_character_alone_and_in_words(conn: psycopg.Connection[Any]) -> None:
    """Every code point PostgreSQL text can hold, in a word and between words."""
    characters = [chr(cp) for cp in range(1, sys.maxunicode + 1) if not 0xD800 <= cp < 0xE000]
    texts = []
    for start in range(0, len(characters), 2000):
        chunk = characters[start : start + 2000]
        texts.append("".join("x" + c + "y " for c in chunk))
        texts.append("".join(c + " " for c in chunk))
        texts.append("".join(chunk))
    assert_same_as_python(conn, texts)


# -- text that is its own NFKC ------------------------------------------------------
# Text made only of ASCII and of code points that NFKC keeps and that nothing
# composes with is not normalised by the C code; code points below U+10000
# are looked up in a direct table (the letters below U+0800 are Latin, Greek,
# Cyrillic, Armenian, Hebrew, Arabic..., of two UTF-8 bytes).  A combining
# mark or a compatibility character in a piece makes the C code normalise the
# whole piece.

SMALL_LETTERS = "".join(
    chr(cp) for cp in range(0x80, 0x800)
    if chr(cp).isalpha() and unicodedata.normalize("NFKC", chr(cp)) == chr(cp)
    and not unicodedata.combining(chr(cp))
)
OTHER_LETTERS = "\u4e00\u5b57\u3042\u30a2\u0915\u0e01\u10d0\u1200\uac00\u13a0\U00020000"
own_nfkc_text = st.lists(
    st.one_of(
        st.text(alphabet=st.sampled_from(SMALL_LETTERS), min_size=1, max_size=12),
        st.text(alphabet=st.sampled_from(SMALL_LETTERS + OTHER_LETTERS), min_size=1, max_size=4),
        st.sampled_from((" ", " ", "  ", "\n", ", ", ". ", "x", "Ab1")),
    ),
    max_size=60,
).map("".join)
mixed_nfkc_text = st.tuples(own_nfkc_text, st.text(alphabet=st.sampled_from(TRICKY), max_size=2),
                            own_nfkc_text).map("".join)


@PROPERTY_SETTINGS
@given(texts=st.lists(own_nfkc_text, min_size=BATCH, max_size=BATCH))
def test_text_that_is_its_own_nfkc(conn: psycopg.Connection[Any], texts: list[str]) -> None:
    assert_same_as_python(conn, texts)


@PROPERTY_SETTINGS
@given(texts=st.lists(mixed_nfkc_text, min_size=BATCH, max_size=BATCH))
def test_such_text_with_a_character_to_normalise(conn: psycopg.Connection[Any],
                                                 texts: list[str]) -> None:  # fmt: skip
    assert_same_as_python(conn, texts)


def test_every_letter_below_u0800_in_words_of_both_cases(conn: psycopg.Connection[Any]) -> None:
    """Each letter in words of its own script's neighbours, as typed and upper-cased
    (case foldings to several characters among them), then a combining mark after each."""
    words = [SMALL_LETTERS[i : i + 7] for i in range(0, len(SMALL_LETTERS), 7)]
    texts = [" ".join(words), " ".join(words).upper(), " ".join(w.upper() for w in words[::2]),
             "".join(words), " ".join(c + "\u0301" for c in SMALL_LETTERS),
             " ".join(c + "\u0308x" for c in SMALL_LETTERS)]
    texts += [" ".join(words[i : i + 20]) for i in range(0, len(words), 20)]
    assert_same_as_python(conn, texts)


# -- the ASCII path -----------------------------------------------------------------
# ASCII text takes its own way through the C code: a bit mask of the word
# characters of 64 bytes at a time, tokens copied lower-cased 16 bytes at a
# time, shingles hashed in batches of one length by its own xxh64 for
# shorter than 32 bytes.

ASCII = "".join(chr(c) for c in range(1, 128))


def test_every_ascii_character(conn: psycopg.Connection[Any]) -> None:
    """Each ASCII character alone, in a word, between words, and repeated."""
    texts = []
    for c in ASCII:
        texts += [c, f"x{c}y", f"Ab{c}Cd eF gh {c}", f"{c} {c}{c} {c}{c}{c} x", c * 70]
    texts += [ASCII, ASCII * 3, " ".join(ASCII), ASCII.upper() + ASCII.lower()]
    assert_same_as_python(conn, texts)


def test_ascii_shingles_of_every_length(conn: psycopg.Connection[Any]) -> None:
    """Shingles of 5 to 70 bytes: every branch of xxh64 for short inputs, and
    the long ones, in batches of one length and mixed."""
    rng = random.Random(7)
    letters = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_"

    def word(size: int) -> str:
        return "".join(rng.choice(letters) for _ in range(size))

    texts = []
    for size in range(1, 24):
        texts.append(" ".join(word(size) for _ in range(200)))  # shingles of 3 * size + 2
        texts.append(", ".join(word(rng.randint(1, size)) for _ in range(300)))
    texts.append(" ".join(word(rng.randint(1, 30)) for _ in range(5000)))
    assert_same_as_python(conn, texts)


def test_ascii_tokens_across_blocks(conn: psycopg.Connection[Any]) -> None:
    """Texts of every length around the 64-byte blocks, and tokens that start
    or end at their edges, or span several of them."""
    base = "The Fool_hath SAID in his heart, there is no God 1611. "
    texts = [(base * 4)[:size] for size in range(0, 200)]
    for offset in range(0, 70):
        texts.append("." * offset + "x" * 65 + " y z")
        texts.append("ab " * offset + "Q" * (64 - offset % 64) + ", w v")
    texts += ["w" * 200, "w " * 200, ("z" * 17 + " ") * 50, "a" * 63 + " b" * 3]
    assert_same_as_python(conn, texts)


def test_ascii_next_to_other_characters(conn: psycopg.Connection[Any]) -> None:
    """ASCII punctuation and letters next to combining marks and other
    non-ASCII characters: only the stretch around them leaves the ASCII path."""
    marks = ["\u0301", "\u0323\u0308", "\u00e9", "\u2019", "\u3042", "\u00ad", "\ufb01", "\u0130"]
    texts = []
    for mark in marks:
        for before in ("e", "E", ".", "_", "9", " ", ",", "x."):
            texts.append(f"The fool {before}{mark}hath said, {before}{mark} in his heart")
            texts.append(f"{before}{mark}")
            texts.append(("word " * 30) + before + mark + (" Word" * 30))
    texts.append("e\u0301" * 40 + " done it " + "a\u0301b " * 20)
    assert_same_as_python(conn, texts)


ascii_text = st.text(alphabet=st.sampled_from(ASCII), max_size=300)
english_text = st.lists(
    st.one_of(
        st.sampled_from(ASCII_WORDS),
        st.text(alphabet=st.sampled_from("aAzZ09_xyQ"), min_size=1, max_size=40),
        st.sampled_from((" ", " ", "  ", "\n", ", ", ". ", "\t", "-", "'", "_")),
    ),
    max_size=120,
).map("".join)


@PROPERTY_SETTINGS
@given(texts=st.lists(ascii_text, min_size=BATCH, max_size=BATCH))
def test_any_ascii_text(conn: psycopg.Connection[Any], texts: list[str]) -> None:
    assert_same_as_python(conn, texts)


@PROPERTY_SETTINGS
@given(texts=st.lists(english_text, min_size=BATCH, max_size=BATCH))
def test_english_like_text(conn: psycopg.Connection[Any], texts: list[str]) -> None:
    assert_same_as_python(conn, texts)


PIECE = 1 << 20  # bytes of a piece in the C code, characters in the reference


def _ascii_at_piece_boundary() -> dict[str, str]:
    """ASCII runs that end at, just before or just after the first cut, with
    non-ASCII text or a huge token after them; a token across 64 KB chunks."""
    words = "In the beginning God created the Heaven and the Earth. " * (PIECE // 50)
    texts = {}
    for shift in (-2, -1, 0, 1, 2):
        ascii_run = words[: PIECE + shift].rstrip(" ") + " "
        ascii_run = ascii_run.ljust(PIECE + shift, "x")
        texts[f"ascii-then-accents-{shift}"] = ascii_run + " caf\u00e9 na\u00efve e\u0301" * 2000
        texts[f"ascii-then-combining-{shift}"] = ascii_run + "\u0301\u0323 word " * 3000
        texts[f"ascii-then-cyrillic-no-space-{shift}"] = ascii_run.rstrip() + "\u0436\u0434" * 3000
    texts["accents-then-ascii"] = "\u00e9t\u00e9 " * (PIECE // 4) + words[:200_000]
    texts["token-across-chunks"] = "ab " * 21845 + "Q" * 70_000 + " end of it" + " x" * 600_000
    return texts


BOUNDARY_TEXTS = _ascii_at_piece_boundary()


@pytest.mark.parametrize("name", list(BOUNDARY_TEXTS))
def test_ascii_at_piece_boundary(conn: psycopg.Connection[Any], name: str) -> None:
    text = BOUNDARY_TEXTS[name]
    assert sql_simhashes(conn, [text]) == [fingerprint.simhash(text)]


# -- long texts -------------------------------------------------------------------


def _words(rng: random.Random, alphabet: str, count: int) -> Iterator[str]:
    for _ in range(count):
        yield "".join(rng.choice(alphabet) for _ in range(rng.randint(1, 9)))


def _huge_texts() -> dict[str, str]:
    rng = random.Random(14)
    latin = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJ"
    cyrillic = "абвгдеёжзийклмнопрстуфхцчшщъыьэюяАБВГДЕЁ\u0306\u0308"
    separators = [" ", " ", " ", "\n", ", ", ". ", "\t", "  "]

    def joined(alphabet: str, separated: Sequence[str]) -> str:
        parts, size = [], 0
        for word in _words(rng, alphabet, HUGE):
            parts += [word, rng.choice(separated)]
            size += len(word) + 1
            if size > HUGE:
                break
        return "".join(parts)

    return {
        "ascii-words": joined(latin, separators),
        "ascii-rare-non-ascii": joined(latin + "\u2019\u00e9", separators),
        "cyrillic-words": joined(cyrillic, separators),
        "ascii-no-whitespace": joined(latin, [",", ";", ".", "-"]),
        "cyrillic-no-ascii": joined(cyrillic, ["\u2014", "\u00a0", "\u3000"]),
        "one-ascii-token": "Ab" * (HUGE // 2 + 1000),
        "one-decomposed-token": "e\u0301\u0323o\u0308" * (HUGE // 5 + 1000),
        "one-hangul-jamo-token": "\u1100\u1161\u11a8\u1100\u1161" * (HUGE // 5 + 1000),
        "ideographs-no-whitespace": "日本語の文章、ひらがな。\uff21\uff22" * (HUGE // 13 + 1000),
        "two-huge-tokens": "x" * HUGE + " " + "\u00e9" * HUGE,
        "ignorables-between-pieces": ("ab\u00adcd\u200b " * (HUGE // 7 + 1000)),
    }


HUGE_TEXTS = _huge_texts()


@pytest.mark.parametrize("name", list(HUGE_TEXTS))
def test_huge_text(conn: psycopg.Connection[Any], name: str) -> None:
    text = HUGE_TEXTS[name]
    assert len(text) > 1_000_000
    assert sql_simhashes(conn, [text]) == [fingerprint.simhash(text)]


# -- tokenisation 2 (default/2): letters of Thai, Lao, Khmer... one to a token ------------

# Letters that start a token, marks that continue it (Khmer, Thai, Myanmar,
# Tai Tham, a Latin accent), a Thai letter NFKC splits into a mark and a
# letter, and what ends such a token: ASCII, a Thai digit, an ideograph, a
# zero-width space (removed), a space.
CLUSTER_PIECES = ("ក", "ខ", "្", "ា", "ិ", "៍", "ก", "ข", "ั", "่", "ำ", "๑", "ၐ", "\u1039",
                  "\u1a20", "\u1a60", "\u0301", "a", "1", "字", "\u200b", " ", "。", "_")
cluster_text = st.text(alphabet=st.sampled_from(CLUSTER_PIECES), max_size=60)


def assert_tokenisation_2_as_python(conn: psycopg.Connection[Any], texts: Sequence[str]) -> None:
    rows = conn.execute(
        "SELECT simhash(t, 'default/2') FROM unnest(%s::text[]) WITH ORDINALITY AS u(t, i)"
        " ORDER BY i", (list(texts),)).fetchall()
    for text, (value,) in zip(texts, rows, strict=True):
        assert value == fingerprint.simhash(text, 2), ascii(text[:200])


@PROPERTY_SETTINGS
@given(texts=st.lists(cluster_text, min_size=BATCH, max_size=BATCH))
def test_tokenisation_2_of_letters_marks_and_what_ends_them(conn: psycopg.Connection[Any],
                                                              texts: list[str]) -> None:
    assert_tokenisation_2_as_python(conn, texts)


@PROPERTY_SETTINGS
@given(texts=st.lists(st.one_of(any_text, mostly_ascii_text), min_size=BATCH, max_size=BATCH))
def test_tokenisation_2_of_any_text(conn: psycopg.Connection[Any], texts: list[str]) -> None:
    assert_tokenisation_2_as_python(conn, texts)


def test_tokenisation_2_of_every_character(conn: psycopg.Connection[Any]) -> None:
    """Every code point PostgreSQL text can hold, in a word, alone, and before a Khmer and
    a Latin combining mark (which continue a token that a letter of tokenisation 2 starts)."""
    characters = [chr(cp) for cp in range(1, sys.maxunicode + 1) if not 0xD800 <= cp < 0xE000]
    texts = []
    for start in range(0, len(characters), 2000):
        chunk = characters[start : start + 2000]
        texts.append("".join("x" + c + "y " for c in chunk))
        texts.append("".join(c + "\u17b7" + c + "\u0301 " for c in chunk))
        texts.append("".join(chunk))
    assert_tokenisation_2_as_python(conn, texts)


def test_tokenisation_2_of_huge_texts_cut_inside_letters(conn: psycopg.Connection[Any]) -> None:
    # No ASCII: the C code cuts its pieces before a code point of boundary_table,
    # which may be a Khmer vowel sign that continues the letter before the cut.
    khmer = "ព្រះរាជាណាចក្រកម្ពុជា" * (HUGE // 20 + 1000)
    thai = "ภาษาไทยไม่มีการเว้นวรรค ab" * (HUGE // 25 + 1000)
    assert_tokenisation_2_as_python(conn, [khmer, thai, HUGE_TEXTS["cyrillic-no-ascii"]])
    assert fingerprint.simhash(khmer, 2) != fingerprint.simhash(khmer)


# -- another database encoding ------------------------------------------------------

latin1_text = st.text(alphabet=st.characters(min_codepoint=1, max_codepoint=255), max_size=40)


@pytest.fixture(scope="module")
def latin1_dsn(dsn: str) -> Iterator[str]:
    name = "nearsim_latin1_test"
    with psycopg.connect(dsn, autocommit=True) as admin:
        admin.execute(f"DROP DATABASE IF EXISTS {name}")
        admin.execute(
            f"CREATE DATABASE {name} ENCODING 'LATIN1' LC_COLLATE 'C' LC_CTYPE 'C'"
            " TEMPLATE template0"
        )
    latin1 = make_conninfo(dsn, dbname=name)
    try:
        with psycopg.connect(latin1, autocommit=True) as setup:
            setup.execute("CREATE EXTENSION nearsim CASCADE")
        yield latin1
    finally:
        with psycopg.connect(dsn, autocommit=True) as admin:
            admin.execute(f"DROP DATABASE IF EXISTS {name}")


LATIN1_SAMPLES = [
    "Stra\u00dfe \u00c6r\u00f8 \u00c5se \u00bd \u00b2 \u00b5 \u00aa \u00ba \u00ff \u00bf",
    "na\u00efve caf\u00e9 \u00c9COLE \u00a0 soft\u00adhyphen \u00bc\u00be \u00d7\u00f7",
    "".join(chr(c) for c in range(1, 256)),
]


@PROPERTY_SETTINGS
@given(texts=st.lists(latin1_text, min_size=BATCH, max_size=BATCH))
def test_latin1_database(latin1_dsn: str, texts: list[str]) -> None:
    with psycopg.connect(latin1_dsn) as conn:
        assert conn.execute("SHOW server_encoding").fetchone() == ("LATIN1",)
        assert_same_as_python(conn, LATIN1_SAMPLES + texts)
        references = conn.execute(
            "SELECT simhash(t, 'default/1') FROM unnest(%s::text[]) WITH ORDINALITY AS u(t, i)"
            " ORDER BY i",
            (LATIN1_SAMPLES,),
        ).fetchall()
        assert [row[0] for row in references] == sql_simhashes(conn, LATIN1_SAMPLES)


# -- the generated tables -------------------------------------------------------------


def test_c_tables_are_what_the_generator_makes() -> None:
    # The generator asks this Python's Unicode database; the project's Python
    # (3.11) has the pinned 14.0.0.
    assert unicodedata.unidata_version == "14.0.0"
    generated = subprocess.run(
        [sys.executable, str(ROOT / "python_client" / "tools" / "gen_c_tables.py")],
        check=True, capture_output=True, text=True,
    ).stdout  # fmt: skip
    assert (ROOT / "extension" / "src" / "unicode14_tables.h").read_text() == generated
