"""The fingerprint in Python: golden vectors, independent oracles, invariants."""

from __future__ import annotations

import json
import random
import subprocess
import sys
import unicodedata
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import xxhash
from hypothesis import given, settings
from hypothesis import strategies as st

import nearsim
from nearsim.core import _xxh64, bits, fingerprint
from nearsim.core import text as core_text

from cases import CASES, WORDS, expand

ROOT = Path(__file__).resolve().parents[2]
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
    assert nearsim.simhash(word) == bits.to_signed(expected)


@given(st.lists(st.from_regex(r"[a-z]{1,8}", fullmatch=True), min_size=2, max_size=2))
def test_two_word_document_is_one_feature(words: list[str]) -> None:
    text = " ".join(words)
    assert nearsim.simhash(text) == bits.to_signed(xxhash.xxh64_intdigest(text.encode()))


@given(st.lists(st.from_regex(r"[a-z]{1,8}", fullmatch=True), min_size=5, max_size=5))
def test_three_features_vote_by_majority(words: list[str]) -> None:
    a, b, c = (xxhash.xxh64_intdigest(" ".join(words[i : i + 3]).encode()) for i in range(3))
    majority = (a & b) | (a & c) | (b & c)
    assert nearsim.simhash(" ".join(words)) == bits.to_signed(majority)


@given(st.lists(st.from_regex(r"[a-z]{1,6}", fullmatch=True), min_size=3, max_size=40))
def test_vote_matches_a_plain_loop(words: list[str]) -> None:
    features = [" ".join(words[i : i + 3]) for i in range(len(words) - 2)]
    votes = [0] * 64
    for feature in features:
        h = xxhash.xxh64_intdigest(feature.encode())
        for i in range(64):
            votes[i] += 1 if h >> i & 1 else -1
    expected = sum(1 << i for i in range(64) if votes[i] > 0)
    assert nearsim.simhash(" ".join(words)) == bits.to_signed(expected)
    assert list(nearsim.shingles(" ".join(words))) == features


def test_ties_give_zero_bits() -> None:
    # "a b" repeated: features alternate between two shingles; with an even
    # count every bit where they differ ties and must be 0.
    first = xxhash.xxh64_intdigest(b"x y x")
    second = xxhash.xxh64_intdigest(b"y x y")
    assert nearsim.simhash("x y x y") == bits.to_signed(first & second)


# Invariants.

@settings(max_examples=300, deadline=None)
@given(st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=200))
def test_pieces_do_not_change_the_result(text: str) -> None:
    whole = nearsim.simhash(text)
    with pytest.MonkeyPatch.context() as m:
        m.setattr(core_text, "PIECE_CHARS", 3)
        assert nearsim.simhash(text) == whole
        assert list(nearsim.tokens(text)) == list(_tokens_in_one_piece(text))


def _tokens_in_one_piece(text: str) -> list[str]:
    return core_text.separated(text).split()


# Letters of several scripts (and ideographs, kana, Hangul, astral ones) with
# any characters between them: stretches that need no normalisation take
# separated_quickly's tables, the others the steps per character.
_LETTERS = "".join(chr(cp) for cp in range(0x41, 0x800) if chr(cp).isalpha()) + (
    "\u4e00\u5b57\u3042\u30a2\uac00\u1100\u0915\u0e01\u13a0\uff21\U00020000")
_MIXED_TEXT = st.lists(
    st.one_of(
        st.text(alphabet=st.sampled_from(_LETTERS), min_size=1, max_size=40),
        st.text(alphabet=st.characters(), max_size=3),
        st.sampled_from((" ", ", ", "\n", "\u2026", "e\u0301", "\u00a0", "\ufb01")),
    ),
    max_size=40,
).map("".join)


@contextmanager
def _stretches_always() -> Iterator[None]:
    """separated_quickly taking the stretches however many there are (text with
    many is otherwise normalised whole)."""
    kept = core_text._CHARS_PER_STRETCH
    core_text._CHARS_PER_STRETCH = 0
    try:
        yield
    finally:
        core_text._CHARS_PER_STRETCH = kept


@settings(max_examples=300, deadline=None)
@given(_MIXED_TEXT)
def test_separated_quickly_is_separated(text: str) -> None:
    expected = core_text.separated(text)
    assert core_text.separated_quickly(text) == expected
    with _stretches_always():
        assert core_text.separated_quickly(text) == expected


def test_text_unstable_every_few_characters_is_normalised_whole(
        monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
    """A stretch costs a Python call: 64,000 of them in a megabyte took seconds."""
    calls: list[int] = []
    whole = core_text.separated

    def counted(text: str) -> str:
        calls.append(len(text))
        return whole(text)

    monkeypatch.setattr(core_text, "separated", counted)
    text = "Crème brûlée Straße nai\u0308ve\r\n" * 500
    assert core_text.separated_quickly(text) == whole(text)
    assert calls == [len(text)]


def test_separated_quickly_on_every_code_point_below_u10000() -> None:
    """Each in runs of its neighbours, alone between spaces, and after a letter."""
    characters = "".join(chr(cp) for cp in range(1, 0x10000) if not 0xD800 <= cp < 0xE000)
    for start in range(0, len(characters), 500):
        chunk = characters[start : start + 500]
        for text in (chunk, " ".join(chunk), "".join("a" + c for c in chunk), chunk.upper()):
            expected = core_text.separated(text)
            assert core_text.separated_quickly(text) == expected, start
            with _stretches_always():
                assert core_text.separated_quickly(text) == expected, start


def test_huge_text_is_cut_into_pieces_alike(monkeypatch: pytest.MonkeyPatch) -> None:
    text = ("Crème brûlée ΣΊΣΥΦΟΣ 東京タワー ﬁne\r\n" * 50) + "tail"
    whole = nearsim.simhash(text)
    monkeypatch.setattr(core_text, "PIECE_CHARS", 17)
    assert len(list(core_text.pieces(text))) > 10
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
        core_text._check_unicode_database()


@pytest.mark.skipif(unicodedata.unidata_version != "14.0.0", reason="needs Unicode 14.0.0")
def test_unicode_tables_are_what_the_generator_makes() -> None:
    generated = subprocess.run(
        [sys.executable, str(ROOT / "python_client" / "tools" / "gen_unicode_tables.py")],
        check=True, capture_output=True, text=True,
    ).stdout
    assert (ROOT / "python_client" / "nearsim" / "core" / "_unicode14.py").read_text() == generated


def test_non_text_is_a_type_error() -> None:
    with pytest.raises(TypeError, match="needs a str"):
        nearsim.simhash(b"bytes")  # type: ignore[arg-type]


# The fast implementation (numpy XXH64 over byte ranges, bit counting) against
# plain code: the library's xxh64 and the profile written out loop by loop.

@contextmanager
def numpy_hashing(few: int = 1, block: int = _xxh64._BLOCK) -> Iterator[None]:
    """Hash with numpy even a handful of ranges, ``block`` ranges at a time."""
    with pytest.MonkeyPatch.context() as m:
        m.setattr(_xxh64, "_FEW", few)
        m.setattr(_xxh64, "_BLOCK", block)
        yield


def numpy_xxh64(inputs: list[bytes], seed: int = 0) -> list[int]:
    """``xxh64_ranges`` of ``inputs`` laid out at random offsets in one buffer."""
    rng = random.Random(seed)
    buffer, starts = bytearray(), []
    for data in inputs:
        buffer += rng.randbytes(rng.randrange(9))  # vary the alignment
        starts.append(len(buffer))
        buffer += data
    buffer += rng.randbytes(_xxh64.PADDING)
    return _xxh64.xxh64_ranges(
        np.frombuffer(bytes(buffer), dtype=np.uint8),
        np.array(starts, dtype=np.intp),
        np.array([len(data) for data in inputs], dtype=np.intp),
    ).tolist()


def test_numpy_xxh64_is_xxh64_at_every_length() -> None:
    rng = random.Random(64)
    inputs = [rng.randbytes(n) for n in range(65) for _ in range(20)]
    inputs += [rng.randbytes(rng.randrange(200)) for _ in range(500)]
    inputs += [rng.randbytes(n) for n in (255, 256, 257, 300, 1000)]  # the library's
    inputs += [bytes([0xFF]) * n for n in range(65)] + [bytes(n) for n in range(65)]
    rng.shuffle(inputs)
    expected = [xxhash.xxh64_intdigest(data) for data in inputs]
    long_inputs = sum(len(data) >= 32 for data in inputs)
    for few, block in [(1, _xxh64._BLOCK), (1, 7), (long_inputs + 1, _xxh64._BLOCK), (10**9, 1)]:
        # 1: stripes in numpy; long_inputs + 1: the long inputs by the library;
        # 10**9: every input by the library.
        with numpy_hashing(few, block):
            assert numpy_xxh64(inputs) == expected, (few, block)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.binary(max_size=200), min_size=1, max_size=40), st.integers(0, 99))
def test_numpy_xxh64_is_xxh64(inputs: list[bytes], seed: int) -> None:
    expected = [xxhash.xxh64_intdigest(data) for data in inputs]
    with numpy_hashing(block=seed % 5 + 1):
        assert numpy_xxh64(inputs, seed) == expected
    with numpy_hashing(few=sum(len(data) >= 32 for data in inputs) + 1):
        assert numpy_xxh64(inputs, seed) == expected


def _simhash_reference(text: str, tokenisation: int = 1) -> int | None:
    """The profile written plainly: shingle strings, xxhash, a vote per bit."""
    votes = [0] * 64
    features = 0
    for feature in fingerprint.shingles(text, tokenisation):
        features += 1
        value = xxhash.xxh64_intdigest(feature.encode("utf-8"))
        for i in range(64):
            votes[i] += 1 if value >> i & 1 else -1
    if not features:
        return None
    return bits.to_signed(sum(1 << i for i in range(64) if votes[i] > 0))


word_texts = st.lists(
    st.tuples(
        st.sampled_from([*WORDS, "Crème", "ΣΊΣΥΦΟΣ", "東京", "ﬁne", "a" * 40, "é" * 30]),
        st.sampled_from([" ", "  ", ", ", "\n", "—", "\u00ad", ""]),
    ),
    max_size=60,
).map(lambda pairs: "".join(word + separator for word, separator in pairs))


@pytest.mark.parametrize("path", ["library", "numpy"])
@settings(max_examples=200, deadline=None)
@given(st.one_of(st.text(), word_texts))
def test_simhash_is_the_plain_profile(path: str, text: str) -> None:
    with numpy_hashing(few=1 if path == "numpy" else _xxh64._FEW):
        assert nearsim.simhash(text) == _simhash_reference(text)


@pytest.mark.parametrize("piece_chars", [1, 40, 1000])
def test_simhash_of_long_texts_across_pieces_is_the_plain_profile(piece_chars: int) -> None:
    rng = random.Random(piece_chars)
    english = " ".join(rng.choice(WORDS) for _ in range(20_000))
    mixed = "".join(
        rng.choice([*WORDS, "Crème", "Straße", "ΣΊΣΥΦΟΣ", "東京タワー", "👍🏽", "x" * 50])
        + rng.choice([" ", "\r\n", ". ", " — ", "\t"])
        for _ in range(5_000)
    )
    with pytest.MonkeyPatch.context() as m, numpy_hashing(block=1000):
        m.setattr(core_text, "PIECE_CHARS", piece_chars)
        assert len(list(core_text.pieces(english))) > 50
        for text in (english, mixed, english[:9] + "\n" + english[9:30]):
            assert nearsim.simhash(text) == _simhash_reference(text)


def test_ascii_shortcut_separates_tokens_like_the_general_path() -> None:
    ascii_text = "".join(map(chr, range(128))) * 2
    general = core_text.separated(ascii_text)
    assert fingerprint._separated_utf8(ascii_text, 1) == general.encode()
    assert fingerprint._separated_utf8(ascii_text, 2) == general.encode()


# Mostly ASCII text, with characters that normalisation or the separators
# change, join or split, next to spaces and inside words.
odd_characters = st.sampled_from(
    ["\u2019", "\u201c", "\u2014", "\u00a0", "\u0301", "\u00ad", "\u200b", "\ufeff", "é",
     "ﬁ", "東", "𠀀", "\U00031350", "\ud800", "İ", "ß", "\u3000", "\u0085", "Ａ", "½", "👍🏽",
     "ក", "្", "ា", "ก", "ำ", "่", "ၐ", "\u1a60"]
)
mostly_ascii_texts = st.lists(
    st.tuples(st.text(st.characters(max_codepoint=127), max_size=30), odd_characters),
    max_size=12,
).map(lambda pairs: "".join(ascii + odd for ascii, odd in pairs))


@pytest.mark.parametrize("share", [0.0, float("inf")])  # never / always by stretches
@settings(max_examples=300, deadline=None)
@given(st.one_of(mostly_ascii_texts, st.text(), word_texts))
def test_stretches_around_non_ascii_separate_like_the_whole(share: float, text: str) -> None:
    general = core_text.separated(text)
    with pytest.MonkeyPatch.context() as m:
        m.setattr(fingerprint, "_NON_ASCII_SHARE", share)
        assert fingerprint._separated_utf8(text, 1) == general.encode()
        assert nearsim.simhash(text) == _simhash_reference(text)
        # tokenisation 2: the same, then each letter of CLUSTERED with its marks apart
        assert (fingerprint._separated_utf8(text, 2).split()
                == core_text.clusters_apart(general).encode().split())
        assert fingerprint.simhash(text, 2) == _simhash_reference(text, 2)


def test_bit_counts_count_bits() -> None:
    rng = random.Random(8)
    for count in (1, 254, 255, 256, 600, 10_000):
        values = [rng.getrandbits(64) for _ in range(count)]
        counts = fingerprint._bit_counts(np.array(values, dtype=np.uint64))
        assert counts.tolist() == [sum(v >> i & 1 for v in values) for i in range(64)]


SYSTEM_PYTHON = Path("/usr/bin/python3")

GOLDEN_UNDER_SYSTEM_PYTHON = """
import json, sys
sys.path[:0] = sys.argv[1:3]
import numpy
import nearsim
from nearsim.core import _xxh64, bits, fingerprint, profiles
from nearsim.core import text as core_text
from cases import GOLDEN_PROFILES, expand, golden_path
assert nearsim.__file__.startswith(sys.argv[1]), nearsim.__file__
cases = [json.loads(line) for line in open(sys.argv[3], encoding="utf-8")]
for few in (_xxh64._FEW, 1):  # as it comes, then numpy for every text
    _xxh64._FEW = few
    for case in cases:
        got = fingerprint.simhash(expand(case))
        assert got == case["simhash"], (few, case["name"], got, case["simhash"])
# the other profiles, with Debian's snowballstemmer and langdetect
texts = {case["name"]: expand(case) for case in cases}
for profile in GOLDEN_PROFILES:
    for line in open(golden_path(profile), encoding="utf-8"):
        case = json.loads(line)
        got = profiles.simhash(texts[case["name"]], profile)
        assert got == case["simhash"], (profile, case["name"], got, case["simhash"])
print(numpy.__version__, len(cases))
"""


def test_golden_vectors_under_the_servers_python() -> None:
    # PL/Python runs the fingerprint with Debian's python3 and its numpy
    # (1.x on bookworm), snowballstemmer and langdetect, which
    # scripts/install.sh installs.
    assert SYSTEM_PYTHON.exists(), "scripts/install.sh installs python3 with numpy and xxhash"
    result = subprocess.run(
        [
            str(SYSTEM_PYTHON), "-c", GOLDEN_UNDER_SYSTEM_PYTHON,
            str(ROOT / "python_client"), str(ROOT / "tests" / "golden"), str(GOLDEN),
        ],
        capture_output=True, text=True, check=False,
    )
    assert result.returncode == 0, result.stderr
    numpy_version, cases = result.stdout.split()
    assert int(cases) == len(golden_cases()), numpy_version


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


# simhash_many: the same fingerprints as simhash, one text at a time.
short_texts = st.one_of(
    st.text(max_size=60), word_texts, mostly_ascii_texts,
    st.sampled_from(["", " ", "one", "two words", "three words here", "\x01", "a \x01 b c",
                     "\x00 x y z", "...", "東京"]),
)  # fmt: skip


@settings(max_examples=200, deadline=None)
@given(st.lists(short_texts, max_size=40))
def test_simhash_many_is_simhash_of_each(texts: list[str]) -> None:
    assert fingerprint.simhash_many(texts) == [nearsim.simhash(t) for t in texts]


def test_simhash_many_with_long_texts_and_small_batches(monkeypatch: pytest.MonkeyPatch) -> None:
    rng = random.Random(5)
    texts = [" ".join(rng.choice(WORDS) for _ in range(rng.randrange(0, 400)))
             for _ in range(300)]  # fmt: skip
    texts[7] = " ".join(rng.choice(WORDS) for _ in range(5000))  # in pieces
    expected = [nearsim.simhash(t) for t in texts]
    assert fingerprint.simhash_many(texts) == expected
    monkeypatch.setattr(fingerprint, "_MANY_CHARS", 500)  # many batches
    monkeypatch.setattr(core_text, "PIECE_CHARS", 2000)
    assert fingerprint.simhash_many(texts) == [nearsim.simhash(t) for t in texts] == expected
    with numpy_hashing(few=1):  # every shingle hashed with numpy
        assert fingerprint.simhash_many(texts) == expected
    with pytest.raises(TypeError, match="needs a str"):
        fingerprint.simhash_many(["fine", b"bytes"])  # type: ignore[list-item]
