"""The shingle sets and fingerprints of many texts at once are those of one text at a time."""

from __future__ import annotations

import random

import numpy as np
import pytest

from nearsim.client.samples import kjv_chapters
from nearsim.core.fingerprint import _feature_hashes
from nearsim.core.profiles import simhash_many
from nearsim.spark.shingles import fingerprints_and_sets, shingle_sets

from khmer import khmer_bodies


def one_at_a_time(text: str, tokenisation: int = 1) -> np.ndarray:
    pieces = list(_feature_hashes(text, tokenisation))
    return np.unique(np.concatenate(pieces)).view(np.int64) if pieces else np.array([], np.int64)


@pytest.mark.parametrize("tokenisation", [1, 2])
def test_many_texts_at_once_give_each_text_its_own_set_and_fingerprint(
        tokenisation: int) -> None:
    chapters = [chapter.text for chapter in kjv_chapters(["Ruth", "Jonah"])]
    texts: list[str | None] = [
        *chapters, None, "", "   ", "one", "two words", "three words here",
        "ça été déjà vu, naïve café", "a\x01b c d", "x " * 10, "日本語のテキスト です ね",
        "Hello, world! Hello, world!", "... !!! ...", "word " * 300_000,  # over one piece
        "ភាសាខ្មែរ គឺជាភាសា", "ทดสอบการตัดคำ ab", "ក", *khmer_bodies(documents=16).values(),
    ]  # fmt: skip
    random.Random(5).shuffle(texts)
    sets = shingle_sets(texts, tokenisation)
    fingerprints, together = fingerprints_and_sets(texts, tokenisation)
    profile = f"default/{tokenisation}"
    assert fingerprints == [None if text is None else simhash_many([text], profile)[0]
                            for text in texts]  # fmt: skip
    for text, alone, with_fingerprint in zip(texts, sets, together, strict=True):
        if text is None:
            assert alone is None and with_fingerprint is None
            continue
        assert alone is not None and with_fingerprint is not None
        expected = one_at_a_time(text, tokenisation)
        assert alone.dtype == np.int64 and np.array_equal(alone, expected), text[:40]
        assert np.array_equal(with_fingerprint, expected), text[:40]
