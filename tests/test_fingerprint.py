"""The fingerprint in Python: golden vectors, independent oracles, invariants."""

from __future__ import annotations

import json
import subprocess
import sys
import unicodedata
from pathlib import Path
from typing import Any

import pytest
import xxhash
from hypothesis import given, settings
from hypothesis import strategies as st

import nearsim
from nearsim import fingerprint

from cases import CASES, expand

ROOT = Path(__file__).resolve().parents[1]
GOLDEN = ROOT / "tests" / "golden" / "simhash-default-1.jsonl"

MIN64 = -(1 << 63)
MAX64 = (1 << 63) - 1
fingerprints = st.integers(min_value=MIN64, max_value=MAX64)


def golden_cases() -> list[dict[str, Any]]:
    return [json.loads(line) for line in GOLDEN.read_text(encoding="utf-8").splitlines()]


def test_golden_file_covers_what_the_profile_promises() -> None:
    cases = golden_cases()
    names = {c["name"] for c in cases}
    assert len(cases) >= 200
    assert names == {c["name"] for c in CASES}, "cases.py and the golden file disagree"
    for needed in ("empty", "one-word", "two-words", "punctuation-only", "ws-crlf"):
        assert needed in names
    for prefix in ("ascii", "latin", "greek", "cyrillic", "cjk", "arabic", "hebrew", "emoji",
                   "combining", "compat", "ws", "long"):
        assert any(n.startswith(prefix) for n in names), prefix
    assert max(len(expand(c).encode()) for c in cases) >= 1_000_000


@pytest.mark.parametrize("case", golden_cases(), ids=lambda c: c["name"])
def test_golden_vector(case: dict[str, Any]) -> None:
    value = nearsim.simhash(expand(case))
    assert value == case["simhash"]
    if value is not None:
        assert nearsim.bits(value) == case["bits"]


def test_profile_is_named() -> None:
    assert nearsim.PROFILE == "default/1"
    assert fingerprint.PROFILE == nearsim.PROFILE


# Oracles that do not go through the vote.

@given(st.from_regex(r"[a-z]{1,12}", fullmatch=True))
def test_one_feature_document_is_the_hash_of_its_feature(word: str) -> None:
    expected = xxhash.xxh64_intdigest(word.encode())
    assert nearsim.simhash(word) == fingerprint.to_signed(expected)


@given(st.lists(st.from_regex(r"[a-z]{1,8}", fullmatch=True), min_size=2, max_size=2))
def test_two_word_document_is_one_feature(words: list[str]) -> None:
    text = " ".join(words)
    assert nearsim.simhash(text) == fingerprint.to_signed(xxhash.xxh64_intdigest(text.encode()))


@given(st.lists(st.from_regex(r"[a-z]{1,8}", fullmatch=True), min_size=5, max_size=5))
def test_three_features_vote_by_majority(words: list[str]) -> None:
    a, b, c = (xxhash.xxh64_intdigest(" ".join(words[i : i + 3]).encode()) for i in range(3))
    majority = (a & b) | (a & c) | (b & c)
    assert nearsim.simhash(" ".join(words)) == fingerprint.to_signed(majority)


@given(st.lists(st.from_regex(r"[a-z]{1,6}", fullmatch=True), min_size=3, max_size=40))
def test_vote_matches_a_plain_loop(words: list[str]) -> None:
    features = [" ".join(words[i : i + 3]) for i in range(len(words) - 2)]
    votes = [0] * 64
    for feature in features:
        h = xxhash.xxh64_intdigest(feature.encode())
        for i in range(64):
            votes[i] += 1 if h >> i & 1 else -1
    expected = sum(1 << i for i in range(64) if votes[i] > 0)
    assert nearsim.simhash(" ".join(words)) == fingerprint.to_signed(expected)
    assert list(nearsim.shingles(" ".join(words))) == features


def test_ties_give_zero_bits() -> None:
    # "a b" repeated: features alternate between two shingles; with an even
    # count every bit where they differ ties and must be 0.
    first = xxhash.xxh64_intdigest(b"x y x")
    second = xxhash.xxh64_intdigest(b"y x y")
    assert nearsim.simhash("x y x y") == fingerprint.to_signed(first & second)


# Invariants.

@settings(max_examples=300, deadline=None)
@given(st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=200))
def test_pieces_do_not_change_the_result(text: str) -> None:
    whole = nearsim.simhash(text)
    with pytest.MonkeyPatch.context() as m:
        m.setattr(fingerprint, "_PIECE_CHARS", 3)
        assert nearsim.simhash(text) == whole
        assert list(nearsim.tokens(text)) == list(_tokens_in_one_piece(text))


def _tokens_in_one_piece(text: str) -> list[str]:
    return fingerprint.normalize(text).translate(fingerprint._SEPARATORS).split()


def test_huge_text_is_cut_into_pieces_alike(monkeypatch: pytest.MonkeyPatch) -> None:
    text = ("Crème brûlée ΣΊΣΥΦΟΣ 東京タワー ﬁne\r\n" * 50) + "tail"
    whole = nearsim.simhash(text)
    monkeypatch.setattr(fingerprint, "_PIECE_CHARS", 17)
    assert len(list(fingerprint._pieces(text))) > 10
    assert nearsim.simhash(text) == whole


@given(st.text(max_size=100))
def test_case_and_compatibility_forms_do_not_matter(text: str) -> None:
    # Only where the round trip stays the same word: dotless ı upper-cases to
    # I, which lower-cases to a different letter, i.
    if text.upper().lower().casefold() == text.lower().casefold():
        assert nearsim.simhash(text.upper().lower()) == nearsim.simhash(text.lower())
    assert nearsim.simhash("ı") != nearsim.simhash("i")
    assert nearsim.simhash(unicodedata.normalize("NFKD", text)) == nearsim.simhash(
        unicodedata.normalize("NFKC", text)
    )


def test_featureless_texts_have_no_fingerprint() -> None:
    for text in ("", " ", "\n\t", "!?.,;:", "😀 🎉", "\u200b\u00ad"):
        assert nearsim.simhash(text) is None


def test_separators_and_tokens() -> None:
    words = ["hello", "world", "it", "s", "fine"]
    assert list(nearsim.tokens("Hello, WORLD!  It's  fine")) == words
    assert list(nearsim.tokens("東京タワーへ")) == ["東", "京", "タワー", "へ"]
    assert list(nearsim.tokens("co\u00adoperate")) == ["cooperate"]
    assert list(nearsim.tokens("snake_case")) == ["snake_case"]


def test_characters_unassigned_in_unicode_14_separate_words() -> None:
    # U+31350 is a CJK ideograph of Unicode 15.0; the profile treats it as
    # Unicode 14.0 did, whatever this Python's database says.
    assert list(nearsim.tokens("before\U00031350after")) == ["before", "after"]
    assert nearsim.simhash("before\U00031350after x") == nearsim.simhash("before after x")


def test_older_unicode_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(unicodedata, "unidata_version", "13.0.0")
    with pytest.raises(RuntimeError, match=r"needs Unicode 14\.0\.0 or newer"):
        fingerprint._check_unicode_database()


@pytest.mark.skipif(unicodedata.unidata_version != "14.0.0", reason="needs Unicode 14.0.0")
def test_unicode_tables_are_what_the_generator_makes() -> None:
    generated = subprocess.run(
        [sys.executable, str(ROOT / "python_client" / "tools" / "gen_unicode_tables.py")],
        check=True, capture_output=True, text=True,
    ).stdout
    assert (ROOT / "python_client" / "nearsim" / "_unicode14.py").read_text() == generated


def test_non_text_is_a_type_error() -> None:
    with pytest.raises(TypeError, match="needs a str"):
        nearsim.simhash(b"bytes")  # type: ignore[arg-type]


# Bits and Hamming distance.

@given(fingerprints, fingerprints)
def test_hamming_is_the_popcount_of_the_unsigned_xor(a: int, b: int) -> None:
    expected = bin((a % (1 << 64)) ^ (b % (1 << 64))).count("1")
    assert nearsim.hamming(a, b) == expected == nearsim.hamming(b, a)


@given(fingerprints)
def test_bits_round_trip(value: int) -> None:
    text = nearsim.bits(value)
    assert len(text) == 64 and set(text) <= {"0", "1"}
    assert nearsim.from_bits(text) == value
    assert int(text, 2) == value % (1 << 64)


def test_bits_most_significant_first() -> None:
    assert nearsim.bits(1) == "0" * 63 + "1"
    assert nearsim.bits(-1) == "1" * 64
    assert nearsim.bits(MIN64) == "1" + "0" * 63
    assert nearsim.bits((1 << 64) - 1) == "1" * 64  # unsigned input accepted


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("0101", "found length 4"),
        ("0" * 63 + "2", "found character '2'"),
        ("0" * 65, "found length 65"),
        ("", "found length 0"),
        (" " + "0" * 63, "found character ' '"),
    ],
)
def test_from_bits_rejects_bad_strings(text: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        nearsim.from_bits(text)


@pytest.mark.parametrize("value", [1 << 64, MIN64 - 1])
def test_out_of_range_fingerprints_are_rejected(value: int) -> None:
    with pytest.raises(ValueError, match="does not fit in 64 bits"):
        nearsim.bits(value)
