"""nearsim_literal_similarity (C) gives exactly the reference's S_L, nearsim.core.measures.compare.

Random texts over small vocabularies (words repeat, so chunks overlap and
compete), edited chapters, scripts without spaces, case folding and
normalisation, texts of fewer than five words, and texts that repeat a line
so often that the pairs of equal windows exceed the budget and are paired
by rank: in each, the C measure equals the Python one to the last bit.
"""

from __future__ import annotations

import random
from collections.abc import Iterator

import psycopg
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from nearsim.client.samples import kjv_chapters
from nearsim.core import measures

FIXTURE = [HealthCheck.function_scoped_fixture]  # the session is shared on purpose
WORDS = ["the", "lord", "said", "unto", "moses", "and", "he", "went", "up", "to", "mount"]


@pytest.fixture(scope="module")
def session(database: str) -> Iterator[psycopg.Connection]:
    with psycopg.connect(database, autocommit=True) as conn:
        yield conn


def literal(conn: psycopg.Connection, a: str, b: str) -> float:
    row = conn.execute("SELECT nearsim_literal_similarity(%s, %s)", [a, b]).fetchone()
    assert row is not None
    return float(row[0])


def assert_reference(conn: psycopg.Connection, a: str, b: str) -> None:
    expected = measures.compare(a, b).s_l
    assert literal(conn, a, b) == expected, (a[:60], b[:60])
    assert literal(conn, b, a) == expected, (b[:60], a[:60])


texts = st.lists(st.sampled_from(WORDS), max_size=120).map(" ".join)


@settings(max_examples=300, deadline=None, suppress_health_check=FIXTURE)
@given(a=texts, b=texts)
def test_random_texts_over_a_small_vocabulary(session: psycopg.Connection, a: str, b: str) -> None:
    assert_reference(session, a, b)


@settings(max_examples=150, deadline=None, suppress_health_check=FIXTURE)
@given(words=st.lists(st.sampled_from(WORDS), min_size=1, max_size=200), data=st.data())
def test_a_text_and_its_edit(session: psycopg.Connection, words: list[str],
                             data: st.DataObject) -> None:  # fmt: skip
    """Deletions, insertions and moved passages of one text."""
    edited = list(words)
    for _ in range(data.draw(st.integers(0, 6))):
        at = data.draw(st.integers(0, len(edited)))
        kind = data.draw(st.sampled_from(["delete", "insert", "move"]))
        if kind == "delete":
            del edited[at : at + data.draw(st.integers(1, 10))]
        elif kind == "insert":
            edited[at:at] = data.draw(st.lists(st.sampled_from(WORDS), max_size=10))
        else:
            piece = edited[at : at + data.draw(st.integers(1, 20))]
            del edited[at : at + len(piece)]
            edited[data.draw(st.integers(0, len(edited))) : 0] = piece
    assert_reference(session, " ".join(words), " ".join(edited))


def test_edited_chapters(session: psycopg.Connection) -> None:
    rng = random.Random(5)
    chapters = [c.text for c in kjv_chapters(["Genesis", "Ruth"])][:30]
    for text in chapters:
        words = text.split()
        cut = rng.randrange(len(words))
        edited = words[:cut] + words[cut + rng.randrange(1, 40):]
        edited[rng.randrange(len(edited))] = "SELAH"
        assert_reference(session, text, " ".join(edited))
        assert_reference(session, text, rng.choice(chapters))


@pytest.mark.parametrize(("a", "b"), [
    ("", ""),
    ("", "one two three four five"),
    ("!!! ... ???", "words at last, five of them"),
    ("one", "one"),
    ("one two", "two one"),
    ("a b c d", "a b c d e"),
    ("a b c d e", "e d c b a"),
    ("Straße im Süden, STRASSE IM SÜDEN", "strasse im süden strasse im süden"),
    ("ﬁne ﬁnal ﬁt", "fine final fit"),
    ("北京是中国的首都北京是中国的首都", "北京是中国的首都上海是中国的城市"),
    ("ひらがなとカタカナのぶん", "ひらがなとカタカナのぶんしょう"),
    ("same words same words", "words same words same"),
])
def test_edge_cases(session: psycopg.Connection, a: str, b: str) -> None:
    assert_reference(session, a, b)


@pytest.mark.parametrize(("copies_a", "copies_b"), [(600, 500), (1500, 1400), (3000, 200)])
def test_repeated_lines_past_the_pair_budget(session: psycopg.Connection, copies_a: int,
                                            copies_b: int) -> None:  # fmt: skip
    """Thousands of copies of a line give more pairs of equal windows than the
    budget: both pair the copies by rank in the same band, and agree."""
    line = "this line is repeated over and over again"
    a = " ".join([line] * copies_a + ["an ending of its own"])
    b = " ".join(["a beginning"] + [line] * copies_b)
    comparison = measures.compare(a, b)
    if copies_a * copies_b * 8 > 1 << 21:
        assert not comparison.exact
    assert_reference(session, a, b)


def test_null_gives_null(session: psycopg.Connection) -> None:
    row = session.execute("SELECT nearsim_literal_similarity(NULL, 'a b c')").fetchone()
    assert row == (None,)


TIE_VOCABULARY = "alpha beta gamma delta epsilon zeta eta theta iota kappa lambda mu".split()


def repeated_lines(seed: int) -> tuple[str, str]:
    """Two texts of a few short lines repeated hundreds of times, a word now and
    then between them: past the pair budget, with windows of as many pairs."""
    rng = random.Random(seed)
    lines = [" ".join(rng.choice(TIE_VOCABULARY) for _ in range(rng.randint(5, 9)))
             for _ in range(rng.randint(1, 3))]  # fmt: skip

    def text(copies: int) -> str:
        out = []
        for _ in range(copies):
            out.append(rng.choice(lines))
            if rng.random() < 0.05:
                out.append(rng.choice(TIE_VOCABULARY))
        return " ".join(out)

    return text(rng.randint(250, 600)), text(rng.randint(250, 600))


@pytest.mark.parametrize("seed", [1151])
def test_ties_past_the_pair_budget_are_broken_as_the_reference_breaks_them(
    session: psycopg.Connection, seed: int
) -> None:  # fmt: skip
    """Windows with as many pairs keep all their pairs in the order of their words
    (np.unique's numbering); with seed 1151 numbering them by first occurrence
    instead gives another S_L."""
    a, b = repeated_lines(seed)
    assert not measures.compare(a, b).exact
    assert_reference(session, a, b)
