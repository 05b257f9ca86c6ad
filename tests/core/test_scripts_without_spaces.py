"""Steps 1 to 3 by tables on whole texts: Khmer and Thai with zero-width spaces and
combining marks, Chinese with full-width punctuation, and what must not take
that path."""

from __future__ import annotations

import re

from hypothesis import given, settings
from hypothesis import strategies as st

from nearsim.core import _unicode14
from nearsim.core import text as core_text

# Characters whose neighbours decide whether a text can be normalised by
# tables: zero-width and other ignorables, full-width and half-width forms,
# compatibility forms of several code points, combining marks that compose
# with what comes before (or with a compatibility form), letters that they
# compose with, Khmer and Thai letters and marks, an unassigned code point.
_TRICKY = (
    "ក ខ ង ្ ា ិ ៍ ៗ ។ ก ข า ั ่ ํ ำ \u200b \u200c \u200d \u00ad \ufeff \u2060 ， 。 ： （ ） ！"
    " … ‥ Ａ ａ ｶ ﾞ ﾟ ガ \u3099 \u0301 \u0338 \u0327 \u0323 < = > e E ſ ß ﬁ ㍻ ㋿ 字 ー \u00a0"
    " \u3000 \u2028 \u0378 \u1100 \u1161 \u11a8 가 , . a 1 １ ² ½ Ω Ω K"
).split(" ")
_TRICKY += [" ", "\n", "\u200b"]


@settings(max_examples=400, deadline=None)
@given(st.lists(st.sampled_from(_TRICKY), min_size=64, max_size=400).map("".join))
def test_whole_texts_by_tables_are_separated_as_by_the_steps(text: str) -> None:
    assert core_text.separated_quickly(text) == core_text.separated(text)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.sampled_from(["ក", "ខ", "្", "ា", "\u200b", " ", "។", "ก", "่", "，", "字",
                                 "\u0301", "Ａ", "…"]), min_size=64, max_size=300).map("".join))
def test_khmer_thai_and_chinese_mixtures_are_separated_as_by_the_steps(text: str) -> None:
    assert core_text.separated_quickly(text) == core_text.separated(text)


def _whole(text: str) -> str | None:
    return core_text._separated_whole(core_text._code_points(text))


def test_zero_width_spaces_and_coeng_take_the_whole_text_path() -> None:
    khmer = "បង្កើត\u200bការ\u200bបំបែក\u200bតក្ក\u200bវិជ្ជា OR លើ\u200bកន្សោម\u200bពីរ ។ " * 4
    assert _whole(khmer) == core_text.separated(khmer)
    assert core_text.separated(khmer).split()[0] == "បង្កើតការបំបែកតក្កវិជ្ជា"


def test_full_width_punctuation_takes_the_whole_text_path() -> None:
    chinese = "兰叶春葳蕤，桂华秋皎洁。欣欣此生意，自尔为佳节……（张九龄）１２３：" * 4
    assert _whole(chinese) == core_text.separated(chinese)


def test_a_compatibility_form_before_a_combining_mark_takes_the_steps() -> None:
    # "＜" normalises to "<", which composes with U+0338 into "≮": not by tables
    text = "a" * 70 + "＜\u0338"
    assert _whole(text) is None
    assert core_text.separated_quickly(text) == core_text.separated(text)


def test_an_ignorable_between_a_letter_and_a_mark_vanishes_before_they_compose() -> None:
    text = "x" * 70 + "e\u200b\u0301 "
    assert core_text.separated_quickly(text) == core_text.separated(text)
    assert "é" in core_text.separated_quickly(text)


def _clusters_by_pattern(separated_text: str) -> str:
    """Tokenisation 2 as its definition says it: each letter of CLUSTERED with the
    marks after it set apart by spaces (a regular expression, slow but plain)."""
    def character_class(table: str) -> str:
        return "".join(f"\\U{a:08x}" if a == b else f"\\U{a:08x}-\\U{b:08x}"
                       for a, b in zip(*core_text._parse_table(table), strict=True))
    pattern = re.compile(f"[{character_class(_unicode14.CLUSTERED)}]"
                         f"[{character_class(_unicode14.MARKS)}]*")
    return pattern.sub(r" \g<0> ", separated_text)


# Letters of CLUSTERED (Khmer, Thai, Lao, Myanmar, Tai Tham, Ahom above U+FFFF),
# marks (theirs, Latin, and above U+FFFF), and what ends their tokens
_CLUSTER_PIECES = ["ក", "ខ", "្", "ា", "ិ", "៉", "១", "ก", "ำ", "่", "ั", "ໜ", "ၐ", "\u1039",
                   "\u1a20", "\u1a60", "\U00011700", "\U0001171d", "\u0301", "\U0001d167",
                   "a", "1", "字", "\u200b", " ", "。", "_", "\U00020000"]


@settings(max_examples=400, deadline=None)
@given(st.lists(st.sampled_from(_CLUSTER_PIECES), max_size=80).map("".join))
def test_tokenisation_2_sets_apart_each_letter_with_its_marks(text: str) -> None:
    separated = core_text.separated(text)
    assert core_text.clusters_apart(separated).split() == _clusters_by_pattern(separated).split()
    assert list(core_text.tokens(text, 2)) == _clusters_by_pattern(separated).split()
