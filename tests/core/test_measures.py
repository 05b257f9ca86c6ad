"""Exact similarity measures and MinHash: the seeds' worked numbers, properties."""

from __future__ import annotations

import itertools
import random
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from nearsim.core.fingerprint import shingles
from nearsim.core.measures import (
    DEFAULT_MIN_CHUNK_WORDS,
    EMPTY_SIGNATURE_VALUE,
    Chunk,
    _mul_mod_mersenne,
    _row_ids,
    compare,
    containment,
    minhash_estimate,
    minhash_signature,
    multiset_jaccard,
    repetition_similarity,
    resemblance,
    word_shingles,
)


def words(prefix: str, count: int) -> list[str]:
    """``count`` distinct words that no other prefix produces."""
    return [f"{prefix}{i}" for i in range(count)]


def text(*parts: list[str]) -> str:
    return " ".join(word for part in parts for word in part)


def seed_sr(c: int, n: int, w: int, longer: int, shorter: int) -> float:
    """Seed 001's S_R in terms of C, n chunks, shingle size w, L and S."""
    return (c - n * (w - 1)) / (longer + shorter - c + (n - 2) * (w - 1))


# --------------------------------------------------------------------------
# Seed 001's worked examples


def test_seed_001_uses_five_word_chunks() -> None:
    assert DEFAULT_MIN_CHUNK_WORDS == 5


def test_example_1() -> None:
    """L = 100, S = 97, C = 85 in two chunks split by one changed word ("too"/"to").

    Seed 001 does not print the texts, so they are built from distinct
    words with exactly that structure.  S_R is then determined by it: with no
    shingle repeated, the seed's formula gives (85 - 8) / 112 = 68.75 %,
    the seed's "69 %".
    """
    first, second = words("c", 40), words("d", 45)
    longer = text(words("x", 7), first, ["too"], second, words("y", 7))
    shorter = text(words("u", 5), first, ["to"], second, words("v", 6))
    result = compare(longer, shorter, shingle_words=5)
    assert (result.longer, result.shorter, result.common) == (100, 97, 85)
    assert result.chunks == (Chunk(7, 5, 40), Chunk(48, 46, 45))
    assert result.s_l == pytest.approx(0.85)
    assert result.s_j == pytest.approx(85 / 112)  # 0.759, the seed's 76 %
    assert round(result.s_j * 100) == 76
    assert result.s_r == pytest.approx(77 / 112)
    assert result.s_r == pytest.approx(seed_sr(85, 2, 5, 100, 97))
    assert round(result.s_r * 100) == 69
    # No repeated text and each chunk matched once: both matchings agree.
    assert result.information_common == 85
    assert result.information_s_j == result.s_j
    # With the fingerprint's 3-word shingles the same structure gives 81 / 112.
    assert compare(longer, shorter).s_r == pytest.approx(seed_sr(85, 2, 3, 100, 97))


def test_example_4_email_and_reply() -> None:
    """A 5-word e-mail and a reply that adds one word: S_R 1/2, S_J 5/6."""
    email = "Did you take the money"
    reply = email + " yes"
    result = compare(email, reply, shingle_words=5)
    assert (result.longer, result.shorter, result.common) == (6, 5, 5)
    assert result.s_r == pytest.approx(1 / 2)
    assert result.s_j == pytest.approx(5 / 6)
    assert result.s_l == pytest.approx(5 / 6)
    assert resemblance(email, reply, shingle_words=5) == pytest.approx(1 / 2)


def test_example_2_document_pasted_twice() -> None:
    """16 words (12 five-word shingles) against two copies of them."""
    sentence = text(words("p", 16))
    doubled = sentence + " " + sentence
    assert len(word_shingles(sentence, 5)) == 12
    assert len(set(word_shingles(doubled, 5)) - set(word_shingles(sentence, 5))) == 4
    result = compare(sentence, doubled, shingle_words=5)
    assert result.s_r == pytest.approx(12 / 16)
    # Literal matching: only one copy matches, "50 % similar".
    assert (result.common, result.s_l, result.s_j) == (16, 0.5, 0.5)
    assert result.chunks == (Chunk(0, 0, 16),)
    # Information matching: the second copy adds nothing, "100 % match".
    assert result.information_longer == 16
    assert (result.information_s_l, result.information_s_j) == (1.0, 1.0)
    # The seed's own counterexample to S_R <= S_J under literal matching.
    assert result.s_r > result.s_j


def test_example_3_overlapping_chunks() -> None:
    """Two 5-word chunks that share a word of the left document (L=15, S=9)."""
    left = "I will need money and cigars for the mayor"
    right = "and cigars for the mayor are due friday so I will need money and soon"
    result = compare(left, right, shingle_words=5)
    assert (result.longer, result.shorter) == (15, 9)
    assert result.common == 5  # literal: the second chunk keeps only 4 words
    assert result.information_common == 9  # information: all of the left
    assert result.s_r == pytest.approx(2 / (5 + 11 - 2))  # the seed's 14 %


# --------------------------------------------------------------------------
# Seed 004's Table 1: D1 = abcdhk, D2 = ababmh, D3 = ababol, 2-shingles

D1, D2, D3 = "a b c d h k", "a b a b m h", "a b a b o l"


@pytest.mark.parametrize(
    ("first", "second", "without_repetition", "with_repetition"),
    [(D2, D1, 0.125, 0.3), (D3, D1, 0.125, 0.3), (D3, D2, 1 / 3, 0.6)],
)
def test_seed_004_table_1(
    first: str, second: str, without_repetition: float, with_repetition: float
) -> None:
    assert resemblance(first, second, 2) == pytest.approx(without_repetition)
    assert repetition_similarity(first, second, 2) == pytest.approx(with_repetition)
    result = compare(first, second, shingle_words=2)
    assert result.s_r == pytest.approx(without_repetition)
    assert result.repetition_similarity == pytest.approx(with_repetition)


def test_multiset_jaccard_on_table_1() -> None:
    """Sum of min counts / sum of max counts, which Table 1 does not use.

    D2 and D1 share "a b" once (min 1); the maxima add up to 2 + 7 = 9.
    D3 and D2 share "a b" twice and "b a" once; the maxima add up to 7.
    """
    assert multiset_jaccard(D2, D1, 2) == pytest.approx(1 / 9)
    assert multiset_jaccard(D3, D1, 2) == pytest.approx(1 / 9)
    assert multiset_jaccard(D3, D2, 2) == pytest.approx(3 / 7)
    assert multiset_jaccard("x y x y", "x y", 2) == pytest.approx(1 / 3)
    assert resemblance("x y x y", "x y", 2) == pytest.approx(1 / 2)


# --------------------------------------------------------------------------
# Details


def test_shingles_agree_with_the_fingerprint() -> None:
    for sample in ["", "one", "one two", "One, two three.", "a b c d e f a b c"]:
        assert word_shingles(sample) == list(shingles(sample))


def test_containment() -> None:
    quote = text(words("q", 20))
    reply = text(words("r", 30), words("q", 20))
    assert containment(quote, reply) == 1.0
    assert containment(reply, quote) == pytest.approx(18 / 48)
    result = compare(reply, quote)
    assert result.containment == 1.0
    assert (result.containment_a_in_b, result.containment_b_in_a) == (
        pytest.approx(18 / 48),
        1.0,
    )


def test_short_document_matches_only_whole() -> None:
    """Fewer than w words: the whole short document is one chunk (if contained)."""
    result = compare("the cat sat", "yesterday the cat sat down")
    assert (result.common, result.min_chunk_words) == (3, 3)
    assert result.chunks == (Chunk(0, 1, 3),)
    assert compare("the cat", "the dog and the cat").common == 2
    assert compare("cat sat", "the cat and sat").common == 0


def test_empty_documents() -> None:
    for pair in [("", ""), ("", "some words here"), ("!!!", "...")]:
        result = compare(*pair)
        assert result.s_l == result.s_j == result.s_r == result.multiset_jaccard == 0.0
        assert result.information_s_j == result.containment == 0.0
    empty = minhash_signature("")
    assert np.all(empty == EMPTY_SIGNATURE_VALUE)
    assert minhash_estimate(empty, empty) == (0.0, 0.0, 0.0, 200)
    assert minhash_estimate(empty, minhash_signature("a b c")).value == 0.0


def test_chunks_are_positions_in_the_arguments_order() -> None:
    shared = words("s", 8)
    a = text(words("a", 3), shared)
    b = text(shared, words("b", 10))
    assert compare(a, b).chunks == (Chunk(3, 0, 8),)
    assert compare(b, a).chunks == (Chunk(0, 3, 8),)


def test_literal_matching_is_one_to_one_and_longest_first() -> None:
    block, other = words("k", 12), words("m", 6)
    a = text(block, other)
    b = text(other, block, block[:7])
    result = compare(a, b)
    assert result.chunks == (Chunk(0, 6, 12), Chunk(12, 0, 6))
    assert result.common == 18
    used_a = [p for c in result.chunks for p in range(c.start_a, c.start_a + c.length)]
    assert len(used_a) == len(set(used_a))


def test_mul_mod_mersenne_matches_python_integers() -> None:
    prime = (1 << 61) - 1
    rng = random.Random(5)
    a = [rng.randrange(prime) for _ in range(500)] + [prime - 1, 0, 1]
    x = [rng.randrange(prime) for _ in range(500)] + [prime - 1, prime - 1, 1]
    got = _mul_mod_mersenne(np.array(a, dtype=np.uint64), np.array(x, dtype=np.uint64))
    assert got.tolist() == [p * q % prime for p, q in zip(a, x, strict=True)]


# --------------------------------------------------------------------------
# Properties

VOCABULARY = ["alpha", "beta", "gamma", "delta", "eps", "zeta", "eta"]
small_texts = st.lists(st.sampled_from(VOCABULARY), min_size=0, max_size=40).map(" ".join)
nonempty_texts = st.lists(st.sampled_from(VOCABULARY), min_size=1, max_size=40).map(" ".join)
chunk_sizes = st.integers(min_value=1, max_value=6)


@given(nonempty_texts, chunk_sizes, st.integers(min_value=1, max_value=5))
def test_identical_texts_give_one(sample: str, w: int, k: int) -> None:
    result = compare(sample, sample, min_chunk_words=w, shingle_words=k)
    assert result.s_l == result.s_j == result.s_r == 1.0
    assert result.information_s_l == result.information_s_j == 1.0
    assert result.multiset_jaccard == result.containment == result.repetition_similarity == 1.0


@given(small_texts, small_texts, chunk_sizes, st.integers(min_value=1, max_value=5))
def test_disjoint_vocabularies_give_zero(first: str, second: str, w: int, k: int) -> None:
    other = " ".join("other" + word for word in second.split())
    result = compare(first, other, min_chunk_words=w, shingle_words=k)
    assert result.s_l == result.s_j == result.s_r == result.multiset_jaccard == 0.0
    assert result.information_s_l == result.information_s_j == result.containment == 0.0


@given(small_texts, small_texts, chunk_sizes, st.integers(min_value=1, max_value=5))
def test_symmetry_and_ranges(first: str, second: str, w: int, k: int) -> None:
    forward = compare(first, second, min_chunk_words=w, shingle_words=k)
    backward = compare(second, first, min_chunk_words=w, shingle_words=k)
    for name in [
        "common", "s_l", "s_j", "s_r", "multiset_jaccard", "repetition_similarity",
        "information_common", "information_s_l", "information_s_j", "containment",
    ]:  # fmt: skip
        assert getattr(forward, name) == getattr(backward, name), name
    assert forward.chunks == tuple(sorted(Chunk(b, a, n) for a, b, n in backward.chunks))
    assert forward.containment_a_in_b == backward.containment_b_in_a
    # S_J <= S_L always, under both matchings; C is at most S.
    assert 0 <= forward.s_j <= forward.s_l <= 1
    assert 0 <= forward.information_s_j <= forward.information_s_l <= 1
    assert forward.common <= forward.shorter
    assert forward.information_common <= forward.information_shorter
    assert forward.multiset_jaccard <= 1 and forward.s_r <= 1
    # The chunks are one-to-one and really common.
    words_a, words_b = first.split(), second.split()
    for chunk in forward.chunks:
        assert chunk.length >= forward.min_chunk_words
        assert (
            words_a[chunk.start_a : chunk.start_a + chunk.length]
            == words_b[chunk.start_b : chunk.start_b + chunk.length]
        )


@st.composite
def edited_pairs(draw: st.DrawFn) -> tuple[str, str]:
    """Seed 001's setting: no word twice in a document, b cut and pasted from a.

    a is a sequence of distinct words; b keeps some of a's pieces, in any
    order, and adds new words between them.
    """
    size = draw(st.integers(min_value=1, max_value=40))
    first = [f"a{i}" for i in range(size)]
    cuts = sorted(draw(st.sets(st.integers(min_value=1, max_value=size - 1), max_size=6))) \
        if size > 1 else []  # fmt: skip
    bounds = [0, *cuts, size]
    pieces = [first[s:e] for s, e in itertools.pairwise(bounds)]
    kept = draw(st.permutations(pieces))
    kept = kept[: draw(st.integers(min_value=0, max_value=len(kept)))]
    second: list[str] = []
    for number, piece in enumerate(kept):
        second += [f"b{number}_{i}" for i in range(draw(st.integers(0, 3)))] + piece
    second += [f"z{i}" for i in range(draw(st.integers(0, 3)))]
    return " ".join(first), " ".join(second)


@given(edited_pairs(), st.integers(min_value=2, max_value=6))
@settings(max_examples=300)
def test_sr_sj_sl_order_in_the_seeds_setting(pair: tuple[str, str], w: int) -> None:
    """S_R <= S_J <= S_L when no word repeats in a document and shingles have w words.

    Seed 001's formula for S_R in terms of C and n then holds exactly.  It
    does not hold in general (see the counterexamples below).
    """
    first, second = pair
    assume(second)
    result = compare(first, second, min_chunk_words=w, shingle_words=w)
    assert result.s_r <= result.s_j + 1e-12
    assert result.s_j <= result.s_l
    if result.shorter >= w:
        expected = seed_sr(result.common, len(result.chunks), w, result.longer, result.shorter)
        assert result.s_r == pytest.approx(expected)


def test_sr_above_sj_counterexamples() -> None:
    """Where S_R <= S_J fails, and why the property above is restricted."""
    # 1. Overlapping chunks (example 3 taken further): b quotes every 5-word
    # window of a separately.  All of a's shingles are common, but literal
    # matching can use a's words once: one chunk, C = 5.
    a = words("a", 9)
    b: list[str] = []
    for start in range(5):
        b += [*a[start : start + 5], f"junk{start}"]
    result = compare(text(a), text(b[:-1]), shingle_words=5)
    assert result.common == 5
    assert Fraction(result.s_j).limit_denominator(100) == Fraction(5, 33)
    assert result.s_r == pytest.approx(5 / 25)
    assert result.s_r > result.s_j
    # 2. Shingles shorter than the chunks: 3- and 4-word matches count for
    # S_R (3-word shingles) but not for S_J (chunks of 5).
    result = compare("a b c d x e f g h", "a b c d y e f g h")
    assert result.common == 0 and result.s_r > 0
    # 3. Repeated text: example 2 (test_example_2_document_pasted_twice).


# --------------------------------------------------------------------------
# MinHash


def random_pair(rng: random.Random) -> tuple[str, str]:
    vocabulary = [f"w{i}" for i in range(400)]
    first = [rng.choice(vocabulary) for _ in range(rng.randint(20, 300))]
    second = list(first)
    for _ in range(rng.randint(0, len(first))):  # random edits
        place = rng.randrange(len(second) + 1)
        if rng.random() < 0.5 and place < len(second):
            del second[place]
        else:
            second.insert(place, rng.choice(vocabulary))
    return " ".join(first), " ".join(second)


def test_minhash_signature_shape_and_determinism() -> None:
    sample = "the quick brown fox jumps over the lazy dog"
    signature = minhash_signature(sample, hashes=64, seed=3)
    assert signature.dtype == np.uint64 and signature.shape == (64,)
    assert np.array_equal(signature, minhash_signature(sample, hashes=64, seed=3))
    assert not np.array_equal(signature, minhash_signature(sample, hashes=64, seed=4))
    assert np.all(signature < (1 << 61) - 1)
    # Only the set of shingles matters, not their repetitions.
    assert np.array_equal(minhash_signature("a b c a b c a"), minhash_signature("a b c a b c a b"))
    same = minhash_estimate(signature, signature)
    assert same.value == 1.0 and same.high == 1.0 and same.low > 0.9


def test_minhash_interval_covers_the_exact_resemblance() -> None:
    rng = random.Random(20240601)
    covered = 0
    pairs = 200
    for number in range(pairs):
        first, second = random_pair(rng)
        exact = resemblance(first, second)
        estimate = minhash_estimate(
            minhash_signature(first, seed=number), minhash_signature(second, seed=number)
        )
        assert estimate.low <= estimate.value <= estimate.high
        covered += estimate.low <= exact <= estimate.high
    assert covered >= 0.9 * pairs


def test_minhash_interval_width_at_200_hashes() -> None:
    """Seed 001: 200 hashes give about +/- 7 % at 95 % confidence."""
    shared = words("s", 100)
    first = text(shared, words("a", 49))
    second = text(shared, words("b", 49))  # S_R = 98 / (98 + 2 * 49)
    assert resemblance(first, second) == pytest.approx(0.5)
    estimate = minhash_estimate(minhash_signature(first), minhash_signature(second))
    assert estimate.hashes == 200
    assert (estimate.high - estimate.low) / 2 == pytest.approx(0.07, abs=0.005)
    assert estimate.low <= 0.5 <= estimate.high


def test_minhash_signatures_must_match() -> None:
    with pytest.raises(ValueError, match="same length"):
        minhash_estimate(minhash_signature("a b c", 10), minhash_signature("a b c", 20))
    with pytest.raises(ValueError, match="at least 1"):
        minhash_signature("a b c", hashes=0)


# --------------------------------------------------------------------------
# Large inputs


def edited_document(rng: random.Random, size_chars: int) -> tuple[str, str]:
    vocabulary = [f"word{i}" for i in range(5000)]
    weights = [1 / (rank + 1) for rank in range(len(vocabulary))]  # Zipf-like
    first: list[str] = []
    length = 0
    while length < size_chars:
        first += rng.choices(vocabulary, weights, k=200)
        length = sum(len(word) + 1 for word in first)
    # Move, delete and insert paragraphs of about 50 words.
    paragraphs = [first[i : i + 50] for i in range(0, len(first), 50)]
    rng.shuffle(paragraphs[: len(paragraphs) // 2])
    second = [w for p in paragraphs if rng.random() > 0.1 for w in p]
    for _ in range(200):
        second.insert(rng.randrange(len(second)), rng.choice(vocabulary))
    return " ".join(first), " ".join(second)


def test_two_100_kb_documents() -> None:
    first, second = edited_document(random.Random(7), 100_000)
    assert len(first) >= 100_000
    result = compare(first, second)
    assert result.exact
    assert 0.5 < result.s_j <= result.s_l < 1
    assert result.s_r <= result.s_j  # true here: long chunks, shingles shorter


def test_repetitive_100_kb_documents() -> None:
    """The same line thousands of times: many w-gram pairs, bounded work."""
    first = "the same line again and again " * 3400
    second = "the same line again and again and " * 3000
    result = compare(first, second)
    assert not result.exact  # 3400 x 3000 pairs per w-gram: paired by rank
    # Each copy of the second line can match at most its first six words
    # ("again and the" never occurs in the first text); all of them do.
    assert (result.common, len(result.chunks)) == (6 * 3000, 3000)
    assert result.information_s_j > 0
    assert compare(first, first).s_j == 1.0


@settings(max_examples=300, deadline=None)
@given(st.integers(1, 6), st.data())
def test_windows_are_numbered_as_numpy_unique_numbers_rows(size: int,
                                                           data: st.DataObject) -> None:
    """The numbering of word windows (a column at a time) equals np.unique over
    the rows, which took seconds for a megabyte of text."""
    values = st.integers(-(2**63), 2**63 - 1) if data.draw(st.booleans()) else st.integers(0, 4)
    flat = data.draw(st.lists(values, min_size=size, max_size=400 * size))
    rows = np.array(flat[: len(flat) // size * size], dtype=np.int64).reshape(-1, size)
    expected = np.unique(rows, axis=0, return_inverse=True)[1].reshape(-1)
    assert np.array_equal(_row_ids(rows), expected)
