"""benchmarks/langcorpus.py and benchmarks/languages.py: the sets in scripts without
spaces are edited as they say, and the client finds their near-duplicates."""

from __future__ import annotations

import difflib
import random
import re
import uuid
from pathlib import Path

import pytest
from click.testing import CliRunner

import nearsim

# The repository root, the working directory of `python -m pytest tests`,
# where the benchmarks package is importable.
from benchmarks import corpus, defaults, docs, langcorpus, languages
from nearsim.client.cli import cli
from nearsim.core import calibration, measures
from nearsim.core.bits import hamming

CHINESE = langcorpus.LANGUAGES["zh"]
KHMER = langcorpus.LANGUAGES["km"]


def _originals(language: langcorpus.Language) -> list[corpus.Document]:
    try:
        if language.code == "zh":
            return langcorpus._fortune_documents()
        return langcorpus.originals(language)
    except (OSError, RuntimeError) as error:
        pytest.fail(f"{error}: apt-get install {' '.join(language.packages)}"
                    " (scripts/install.sh installs them)")


@pytest.fixture(scope="module")
def chinese() -> list[corpus.Document]:
    """A Chinese set: 30 documents of fortunes (Tang poems, Song lyrics...) and their copies."""
    originals = _originals(CHINESE)
    return langcorpus.language_corpus(CHINESE, 30, 120, seed=4, base=originals)


@pytest.fixture(scope="module")
def khmer() -> list[corpus.Document]:
    originals = _originals(KHMER)
    return langcorpus.language_corpus(KHMER, 30, 120, seed=4, base=originals)


def _changes(parent: str, child: str) -> tuple[int, str]:
    """How many characters are inserted, deleted or replaced between two texts that
    differ in a few lines, and those characters (before and after): a diff of the
    lines, then of the characters of the lines that differ."""
    before, after = parent.splitlines(keepends=True), child.splitlines(keepends=True)
    changed, edited = 0, []
    lines = difflib.SequenceMatcher(None, before, after, autojunk=False)
    for tag, i1, i2, j1, j2 in lines.get_opcodes():
        if tag == "equal":
            continue
        old, new = "".join(before[i1:i2]), "".join(after[j1:j2])
        characters = difflib.SequenceMatcher(None, old, new, autojunk=False)
        for op, c1, c2, d1, d2 in characters.get_opcodes():
            if op != "equal":
                changed += max(c2 - c1, d2 - d1)
                edited += (old[c1:c2], new[d1:d2])
    return changed, "".join(edited)


@pytest.mark.parametrize("name", ["chinese", "khmer"])
def test_each_copy_changes_as_many_characters_as_its_edit_says(
    name: str, request: pytest.FixtureRequest,
) -> None:  # fmt: skip
    documents: list[corpus.Document] = request.getfixturevalue(name)
    language = CHINESE if name == "chinese" else KHMER
    by_id = {d.id: d for d in documents}
    script = re.compile(f"[{language.letters}]")
    kinds = set()
    in_place: list[int] = []  # characters changed by each typos and ocr edit
    for copy in documents:
        if copy.parent is None:
            continue
        parent = by_id[copy.parent].text
        kind, amount = copy.kind, copy.amount
        kinds.add(kind)
        if kind in ("insertion", "deletion"):
            assert abs(len(copy.text) - len(parent)) == round(amount * len(parent))
            assert amount <= corpus.MAX_SEED_003_FRACTION
        elif kind in ("reply", "forward", "syndication"):
            assert len(copy.text) - len(parent) == round(amount * len(copy.text))
            added = copy.text.replace("> ", "").replace(">", "")
            assert any(len(script.findall(line)) >= 3 for line in added.splitlines()
                       if line and line not in parent)  # the message is in the language
        else:  # typos, ocr: a few characters changed, no more than the amount says
            changed, edited = _changes(parent, copy.text)
            assert changed <= round(amount * len(parent))  # amounts have 6 decimals
            in_place.append(changed)
            assert amount <= (0.05 if kind == "typos" else 0.03)
            if kind == "typos":  # mistyped words: letters of the script or English ones
                assert all(script.match(c) or (c.isascii() and c.isalpha())
                           for c in edited), edited
    assert kinds == set(corpus.EDIT_KINDS)
    # a typo may swap two equal characters, OCR noise miss a short text: seldom
    assert sum(changed > 0 for changed in in_place) >= 0.8 * len(in_place)


def test_typos_in_chinese_replace_characters_by_others_of_the_script() -> None:
    text = "兰叶春葳蕤，桂华秋皎洁。欣欣此生意，自尔为佳节。谁知林栖者，闻风坐相悦。" * 3
    edits = langcorpus.language_edits(CHINESE, [text])
    seen = set()
    for seed in range(40):
        copy, amount = edits["typos"](random.Random(seed), text)
        assert copy != text and 0 < amount <= 0.25  # 5 words of 4 characters at most
        seen |= set(copy) - set(text)
    assert not seen  # every character a typo brings is one of the text's own


def test_profile_version_2_cuts_khmer_letters_into_words(khmer: list[corpus.Document]) -> None:
    words = list(nearsim.tokens("បង្កើត\u200bការ ។", 2))
    assert words == ["ប", "ង្", "កើ", "ត", "កា", "រ"]  # each letter with its marks
    assert list(nearsim.tokens("បង្កើត\u200bការ ។")) == ["បង្កើតការ"]
    by_phrases, by_letters = languages.score_set(khmer), languages.score_set(khmer,
                                                                             tokenisation=2)
    assert by_letters.light == by_phrases.light
    assert by_letters.recall > by_phrases.recall
    assert by_letters.f1 > by_phrases.f1


def test_verified_search_finds_planted_chinese_and_khmer_copies(
    database: str, tmp_path: Path, chinese: list[corpus.Document],
    khmer: list[corpus.Document],
) -> None:  # fmt: skip
    planted = []
    for documents, language in ((chinese, CHINESE), (khmer, KHMER)):
        originals = [d for d in documents if d.origin is None][:6]
        edits = langcorpus.language_edits(language, [d.text for d in originals])
        copy, _ = edits["typos"](random.Random(1), originals[0].text)
        assert measures.compare(originals[0].text, copy).s_l >= measures.DEFAULT_MIN_SIMILARITY
        for number, original in enumerate(originals):
            (tmp_path / f"{language.code}-{number}.txt").write_text(original.text)
        planted.append((language.code, copy))
    table = f"scripts_{uuid.uuid4().hex[:8]}"
    loaded = CliRunner().invoke(cli, ["load", str(tmp_path), "--dsn", database, "--table",
                                      table, "--create", "--quiet"])  # fmt: skip
    assert loaded.exit_code == 0, loaded.output
    with nearsim.connect(database, autocommit=True) as conn:
        documents = nearsim.DocumentTable(conn, table)
        for code, copy in planted:
            found = documents.similar_verified(copy)
            assert [Path(m.key).name for m in found] == [f"{code}-0.txt"]
            assert found[0].similarity >= measures.DEFAULT_MIN_SIMILARITY
        for code, copy in planted:
            (tmp_path / f"{code}-copy.txt").write_text(copy)
        again = CliRunner().invoke(cli, ["load", str(tmp_path), "--dsn", database, "--table",
                                         table, "--quiet"])  # fmt: skip
        assert again.exit_code == 0, again.output
        pairs = {tuple(sorted(Path(k).name for k in (p.a, p.b)))
                 for p in documents.pairs_verified()}
        assert pairs == {("zh-0.txt", "zh-copy.txt"), ("km-0.txt", "km-copy.txt")}


def test_edit_sizes_in_tokens_are_shares_of_the_tokens(chinese: list[corpus.Document]) -> None:
    counted = {d.id: d for d in languages.in_tokens(chinese)}
    by_id = {d.id: d for d in chinese}
    seen = set()
    for copy in chinese:
        if copy.parent is None:
            assert counted[copy.id] == copy
            continue
        tokens_of = (len(list(nearsim.tokens(by_id[copy.parent].text))),
                     len(list(nearsim.tokens(copy.text))))
        before, after = tokens_of
        amount = counted[copy.id].amount
        assert counted[copy.id].amounts[:-1] == counted[copy.parent].amounts
        if copy.kind == "insertion":
            assert amount == pytest.approx((after - before) / before)
        elif copy.kind == "deletion":
            assert amount == pytest.approx((before - after) / before)
        elif copy.kind in ("reply", "forward", "syndication"):
            assert amount == pytest.approx((after - before) / after)
        else:
            assert amount == copy.amount  # typos and OCR noise change characters in place
        seen.add(copy.kind)
    assert seen == set(corpus.EDIT_KINDS)


def test_scores_count_the_light_pairs_the_search_finds(chinese: list[corpus.Document]) -> None:
    scored = languages.score_set(chinese)
    kinds = [defaults.kind_of(change) for change in defaults.family_pairs(chinese).values()]
    assert scored.light == kinds.count("light") > 0
    assert scored.true_positives + scored.false_positives <= scored.predicted
    assert scored.recall == pytest.approx(scored.true_positives / scored.light)
    assert 0.8 < scored.f1 <= 1.0
    assert set(scored.by_edit) <= set(corpus.EDIT_KINDS)


def test_the_calibrated_radii_are_checked_on_each_sets_pairs(
        khmer: list[corpus.Document]) -> None:
    checked = languages.radius_recall(khmer, "default/2")
    texts = [d.text for d in khmer]
    fingerprints = nearsim.simhash_many(texts, "default/2")
    # every pair, one at a time, on the words of tokenisation 2
    shingles = [set(measures.word_shingles(text, tokenisation=2)) for text in texts]
    every = [(measures.set_resemblance(shingles[i], shingles[j]),
              hamming(fingerprints[i], fingerprints[j]))
             for i in range(len(texts)) for j in range(i + 1, len(texts))]
    for threshold in languages.RADIUS_THRESHOLDS:
        row = checked[f"{threshold:g}"]
        assert row["radius"] == calibration.radius_for(threshold, "default/2")
        reaching = [distance for s_r, distance in every if s_r >= threshold - 1e-12]
        pairs = len(reaching)
        within = sum(distance <= row["radius"] for distance in reaching)
        assert pairs > 0
        assert (row["pairs"], row["within"]) == (pairs, within)
        assert row["recall"] == within / pairs
    page = languages.radius_lines({"names": {"km": "Khmer"},
                                   "radius": {"km": {"default/2": checked}}})
    assert "| Khmer | default/2 |" in page[5]
    failing = {key: {**row, "recall": 0.5} for key, row in checked.items()}
    page = languages.radius_lines({"names": {"km": "Khmer"},
                                   "radius": {"km": {"default/2": failing}}})
    assert page[-1].startswith("Below the calibrated share: Khmer (default/2) at 0.5: 0.5000")
    assert "With default/2" not in page[-1]
    holding = {key: {**row, "recall": 0.995} for key, row in checked.items()}
    page = languages.radius_lines({"names": {"km": "Khmer"},
                                   "radius": {"km": {"default/1": failing,
                                                     "default/2": holding}}})
    assert page[-1].startswith("Below the calibrated share: Khmer (default/1) at 0.5: 0.5000")
    assert page[-1].endswith("the radii hold on the pairs of Khmer (0.9950 and 0.9950): its"
                             " calibration, taken over from default/1's, holds for that text too.")
    assert languages.radius_lines({"names": {}}) == []  # results from before the check


def test_radii_only_prints_the_check_of_each_set(capsys: pytest.CaptureFixture[str]) -> None:
    assert languages.main(["--radii-only", "--originals", "10", "--documents", "30",
                           "--languages", "km"]) == 0
    printed = capsys.readouterr().out
    assert "| English | default/1 |" in printed
    assert "| Khmer | default/1 |" in printed and "| Khmer | default/2 |" in printed
    assert "| English | default/2 |" not in printed  # its words are the same


def test_the_other_scripts_section_comes_from_its_results(tmp_path: Path) -> None:
    assert "No results of `make bench-languages`" in docs.languages_page(tmp_path)
    (tmp_path / "languages.md").write_text("the section\n")
    assert docs.languages_page(tmp_path) == "the section\n"
