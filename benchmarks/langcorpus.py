"""Evaluation sets in scripts without spaces between words: Chinese, Japanese, Khmer.

    .venv/bin/python -m benchmarks.langcorpus --language zh [--documents N] [--output set.jsonl]

Each set is built like the English corpus of benchmarks/corpus.py, with the
same kinds of edits drawn in the same way (:func:`benchmarks.corpus.build_corpus`
with the edits below in place of the English ones), from texts that Debian
packages ship:

* ``zh``: the Simplified Chinese manual pages (``manpages-zh``, the zh_CN
  pages, rendered with groff; the zh_TW pages are the same text in
  traditional characters and are left out), and the Chinese fortunes
  (``fortunes-zh``: the Debian code of conduct and tips, 300 Tang poems, 100
  Song lyrics), ten fortunes in a row to a document;
* ``ja``: the Japanese manual pages (``manpages-ja``);
* ``km``: the Khmer help of LibreOffice (``libreoffice-help-km``), the pages
  that are mostly Khmer.  Khmer, like Thai, writes words without spaces
  (spaces end phrases); this translation puts a zero-width space between
  words, which Unicode normalisation removes (step 1 of
  :mod:`nearsim.core.text`), as most Khmer and Thai text has none.

Texts are cut into sections as the English ones are (at blank lines, about
8,000 characters at most, at least 40 tokens).

The edits, one per kind of :data:`benchmarks.corpus.EDIT_KINDS`, each with
its amount measured as in English (the share of the characters it inserts,
deletes or changes):

* ``insertion``, ``deletion``: the English ones (characters, whatever the
  script);
* ``typos``: 1 to 5 "words" mistyped as in English (a letter swapped with the
  next, dropped, doubled, or replaced), where a word is a run of 2 to 4
  letters of the script (CJK words are one to four characters long; runs of
  the script are cut into such pieces) or an English word of the pages; a
  replaced letter becomes another letter of the same script drawn from the
  text (an input method picking the wrong character) or, in English words,
  a neighbouring key;
* ``ocr``: the English noise rate and draws; at a letter of the script a
  substitution happens as often as one of the English substitutions applies
  at an English letter (:data:`OCR_LETTER_MATCHES`), to a character that
  looks alike (:data:`CONFUSABLES`) or another letter of the script, and
  spaces are dropped or added as in English (which splits or joins Khmer
  phrases, and changes no CJK token);
* ``reply``, ``forward``, ``syndication``: the English layout (quoted lines,
  the header block, dates, names, addresses) with every English sentence of
  the edit replaced by 1 to 3 sentences of the same language drawn from the
  set's originals, of about the length of the English ones.
"""

from __future__ import annotations

import argparse
import hashlib
import html
import random
import re
import subprocess
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial
from pathlib import Path

from nearsim.core.text import tokens

from .corpus import (
    _NAMES,
    _OCR_SUBSTITUTIONS,
    CACHE_DIRECTORY,
    Document,
    Edit,
    _address,
    _date,
    _deletion,
    _insertion,
    _keyboard_neighbour,
    _manpage_texts,
    _sections,
    _typo,
    _typos,
    build_corpus,
    write_jsonl,
)

__all__ = [
    "CONFUSABLES", "LANGUAGES", "OCR_LETTER_MATCHES", "Language", "language_corpus",
    "language_edits", "originals",
]  # fmt: skip

OCR_LETTER_MATCHES = 0.41
"""How many of the 12 English OCR substitutions apply, on average, at a letter
of the King James Bible: an English OCR event at a letter changes it with
probability 0.41 / 15 (one of 15 draws), a script's letter the same."""

# Pairs of characters that OCR confuses, both ways.
CONFUSABLES_PAIRS = (
    "未末 己已 已巳 土士 日曰 人入 大太 太犬 天夭 王玉 玉主 刀力 千干 今令 幻幼 鸟乌 戊戌 戌戍"
    " 免兔 贝见 折拆 候侯 壁璧 拔拨 汩汨 析折 徒徙 辨辩 辩辫 即既 末未 白自 目日 田由 由甲"
    " 甲申 口囗 问间 间闻 仑仓 书韦 ソン シツ ロ口 カ力 エ工 ニ二 ハ八 ト卜 タ夕 へヘ ー一"
    " ぱば ぴび ぷぶ ぺべ ぽぼ ねれ れわ めぬ はほ るろ ウワ クケ"
)
CONFUSABLES: dict[str, str] = {}
for _pair in CONFUSABLES_PAIRS.split():
    CONFUSABLES.setdefault(_pair[0], "")
    CONFUSABLES.setdefault(_pair[1], "")
    CONFUSABLES[_pair[0]] += _pair[1]
    CONFUSABLES[_pair[1]] += _pair[0]

FORTUNES = ("chinese", "tang300", "song100")
FORTUNE_DIRECTORY = Path("/usr/share/games/fortunes")
FORTUNES_PER_DOCUMENT = 10
KHMER_HELP = Path("/usr/share/libreoffice/help/km/text")
SENTENCE_CHARS = (6, 40)
"""Sentences of the pool (reply messages, boilerplate) are this many characters long."""


@dataclass(frozen=True)
class Language:
    """One evaluation set: its script's letters and where its texts come from."""

    code: str
    name: str
    letters: str
    """A regular expression character class (without brackets) of the script's letters."""
    packages: tuple[str, ...]
    """The Debian packages its texts come from."""
    joiner: str = ""
    """Between sentences of the pool (CJK: none)."""


HAN = "\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff"
KANA = "\u3041-\u3096\u309d-\u309f\u30a1-\u30fa\u30fc-\u30ff"
LANGUAGES = {
    "zh": Language("zh", "Chinese", HAN, ("manpages-zh", "fortunes-zh")),
    "ja": Language("ja", "Japanese", HAN + KANA, ("manpages-ja",)),
    "km": Language("km", "Khmer", "\u1780-\u17b3\u17b6-\u17d3\u17dd", ("libreoffice-help-km",),
                   joiner=" "),
}


def _token_count(text: str) -> int:
    return sum(1 for _ in tokens(text))


def _install_hint(language: Language) -> str:
    return f"apt-get install {' '.join(language.packages)} groff-base"


# --------------------------------------------------------------------------
# Originals


def _manpage_sections(package: str, directory: str, source_id: str) -> list[Document]:
    pages = _manpage_texts(CACHE_DIRECTORY, (package,), utf8_source=True)
    result = []
    for path, text in pages:
        if f"/{directory}/" not in path:
            continue
        name = "/".join(Path(path).parts[-2:])
        for number, section in enumerate(_sections(text, words=_token_count), start=1):
            result.append(Document(f"{source_id}:{name}#{number}", section, None,
                                   source="man"))
    return result


_ESCAPE = re.compile(r"\x1b\[[0-9;]*m")


def _fortune_documents() -> list[Document]:
    """The Chinese fortunes, :data:`FORTUNES_PER_DOCUMENT` in a row to a document."""
    result = []
    for name in FORTUNES:
        text = (FORTUNE_DIRECTORY / name).read_text(encoding="utf-8")
        fortunes = [_ESCAPE.sub("", f).strip() for f in text.split("\n%\n")]
        fortunes = [f for f in fortunes if f]
        for start in range(0, len(fortunes), FORTUNES_PER_DOCUMENT):
            body = "\n\n".join(fortunes[start : start + FORTUNES_PER_DOCUMENT]) + "\n"
            result.append(Document(f"fortune:{name}#{start // FORTUNES_PER_DOCUMENT + 1}",
                                   body, None, source="fortune"))
    return result


_BLOCK = re.compile(r"(?i)</?(p|h[1-6]|li|ul|ol|div|br|tr|table|pre)\b[^>]*>")
_TAG = re.compile(r"<[^>]+>")


def help_page_text(page: str) -> str:
    """The text of the display area of a LibreOffice help page (HTML)."""
    start = page.find('<div id="DisplayArea"')
    end = page.find('<div id="SearchFrame"', max(start, 0))
    body = page[max(start, 0) : end if end >= 0 else len(page)]
    body = re.sub(r"(?is)<(script|style)\b.*?</\1>", "", body)
    body = _TAG.sub("", _BLOCK.sub("\n\n", body))
    lines = (" ".join(line.split()) for line in html.unescape(body).splitlines())
    return re.sub(r"\n{3,}", "\n\n", "\n".join(lines)).strip() + "\n"


def _khmer_documents(language: Language) -> list[Document]:
    """The help pages that are mostly Khmer (twice as many Khmer letters as Latin ones)."""
    letters = re.compile(f"[{language.letters}]")
    result = []
    for path in sorted(KHMER_HELP.rglob("*.html")):
        text = help_page_text(path.read_text(encoding="utf-8", errors="replace"))
        khmer = len(letters.findall(text))
        latin = sum(c.isascii() and c.isalpha() for c in text)
        if khmer < 2 * latin:
            continue
        name = path.relative_to(KHMER_HELP).as_posix()
        for number, section in enumerate(_sections(text, words=_token_count), start=1):
            result.append(Document(f"help:{name}#{number}", section, None, source="help"))
    return result


def originals(language: Language) -> list[Document]:
    """Every original of a language's set, in a fixed order."""
    try:
        if language.code == "zh":
            return (_manpage_sections("manpages-zh", "zh_CN", "man")
                    + _fortune_documents())  # fmt: skip
        if language.code == "ja":
            return _manpage_sections("manpages-ja", "ja", "man")
        if not KHMER_HELP.is_dir():
            raise FileNotFoundError(KHMER_HELP)
        return _khmer_documents(language)
    except (OSError, subprocess.CalledProcessError) as error:
        raise RuntimeError(f"cannot read the {language.name} texts ({_install_hint(language)}):"
                           f" {error}") from None


# --------------------------------------------------------------------------
# Edits


def _script_letter(language: Language) -> re.Pattern[str]:
    return re.compile(f"[{language.letters}]")


# Sentence ends (new line, ideographic full stop, full-width ! ? ;, ASCII ! ?, Khmer
# khan and bariyoosan), and commas left at a sentence's edges.
_SENTENCE_END = re.compile("[\n\u3002\uff01\uff1f\uff1b!?\u17d4\u17d5]+")
_SENTENCE_EDGES = " ,\uff0c\u3001\u3002"


def sentence_pool(language: Language, texts: Sequence[str]) -> list[str]:
    """Sentences of the texts, mostly of the script, of :data:`SENTENCE_CHARS` characters,
    sorted and without repeats: the words of the added messages and boilerplate."""
    letter = _script_letter(language)
    low, high = SENTENCE_CHARS
    pool = set()
    for text in texts:
        for sentence in _SENTENCE_END.split(text):
            sentence = " ".join(sentence.split()).strip(_SENTENCE_EDGES)
            if low <= len(sentence) <= high and 2 * len(letter.findall(sentence)) >= len(
                    sentence):
                pool.add(sentence)
    if not pool:
        raise RuntimeError(f"no {language.name} sentences to draw messages from")
    return sorted(pool)


@dataclass(frozen=True)
class _Words:
    """What the edits of one language draw from."""

    language: Language
    pool: Sequence[str]

    def sentences(self, rng: random.Random, low: int = 1, high: int = 3) -> str:
        return self.language.joiner.join(rng.choice(self.pool)
                                         for _ in range(rng.randint(low, high)))


def _script_neighbour(letter_pattern: re.Pattern[str], text_letters: str,
                      rng: random.Random, letter: str) -> str:
    """A replaced letter: a neighbouring key in English words, else a letter of the
    script from the text."""
    if letter.isascii() or not letter_pattern.match(letter):
        return _keyboard_neighbour(rng, letter)
    return rng.choice(text_letters)


def _language_typos(words: _Words, rng: random.Random, text: str) -> tuple[str, float]:
    letters = words.language.letters
    letter = _script_letter(words.language)
    text_letters = "".join(letter.findall(text)) or "e"
    pattern = re.compile(f"[{letters}]{{2,4}}|[A-Za-z]{{3,}}")
    typo = partial(_typo, neighbour=partial(_script_neighbour, letter, text_letters))
    return _typos(rng, text, pattern, typo)


def _language_ocr(words: _Words, rng: random.Random, text: str) -> tuple[str, float]:
    """benchmarks.corpus._ocr with the script's letters changed as often as English ones."""
    letter = _script_letter(words.language)
    text_letters = "".join(letter.findall(text)) or "e"
    rate = rng.uniform(0.005, 0.03)
    pieces: list[str] = []
    position = 0
    changed = 0
    length = len(text)
    while position < length:
        if rng.random() < rate:
            draw = rng.randrange(len(_OCR_SUBSTITUTIONS))
            source, target = _OCR_SUBSTITUTIONS[draw]
            character = text[position]
            if source and letter.match(character):
                if rng.random() < OCR_LETTER_MATCHES / 12:  # 12 substitutions of 15 draws
                    pieces.append(rng.choice(CONFUSABLES.get(character) or text_letters))
                    position += 1
                    changed += 1
                    continue
            elif source == "" and character.isalpha():
                pieces.append(target)
                changed += 1
            elif source and text.startswith(source, position):
                pieces.append(target)
                position += len(source)
                changed += max(len(source), len(target))
                continue
        pieces.append(text[position])
        position += 1
    return "".join(pieces), min(1.0, changed / length)


def _language_reply(words: _Words, rng: random.Random, text: str) -> tuple[str, float]:
    """benchmarks.corpus._reply with a message in the language."""
    writer, sender = rng.sample(_NAMES, 2)
    message = words.sentences(rng)
    quoted = "\n".join("> " + line if line else ">" for line in text.splitlines())
    header = f"{message}\n\n{writer.split()[0]}\n\nOn {_date(rng)}, {sender} wrote:\n"
    result = header + quoted + "\n"
    return result, (len(result) - len(text)) / len(result)


def _language_forward(words: _Words, rng: random.Random, text: str) -> tuple[str, float]:
    """benchmarks.corpus._forward with a note in the language (or none)."""
    sender, recipient = rng.sample(_NAMES, 2)
    note = rng.choice(("", "note", "note", "note"))
    if note:
        note = words.sentences(rng, 1, 1) + "\n\n"
    header = (f"{note}---------- Forwarded message ---------\nFrom: {sender}"
              f" <{_address(sender)}>\nDate: {_date(rng)}\nSubject: Fwd: "
              f"{words.sentences(rng, 1, 1)} {rng.randint(100, 9999)}\nTo: {recipient}"
              f" <{_address(recipient)}>\n\n")
    result = header + text
    return result, len(header) / len(result)


def _language_syndication(words: _Words, rng: random.Random, text: str) -> tuple[str, float]:
    """benchmarks.corpus._syndication: a header and/or footer of sentences in the language."""
    outlet = words.sentences(rng, 1, 1)
    date = _date(rng)
    page, year = rng.randint(1, 400), rng.randint(1998, 2024)
    where = rng.choice(("top", "bottom", "both"))
    headers = (f"{outlet} | {date}\n{words.sentences(rng, 1, 1)}\n\n",
               f"{outlet}\n{date} {page}\n\n",
               f"{outlet}{words.language.joiner}{words.sentences(rng, 1, 2)} {date}\n\n")
    footers = (f"\n\n--\n© {year} {outlet}{words.language.joiner}{words.sentences(rng, 2, 3)}\n",
               f"\n\n{outlet}{words.language.joiner}{words.sentences(rng, 2, 3)}\n",
               f"\n\n[{outlet} {page}-{year}]\n")
    header = rng.choice(headers) if where != "bottom" else ""
    footer = rng.choice(footers) if where != "top" else ""
    result = header + text + footer
    return result, (len(header) + len(footer)) / len(result)


def language_edits(language: Language, texts: Sequence[str]) -> dict[str, Edit]:
    """The edit of each kind for ``language``, drawing sentences from ``texts``."""
    words = _Words(language, sentence_pool(language, texts))
    made: dict[str, Callable[[_Words, random.Random, str], tuple[str, float]]] = {
        "typos": _language_typos, "reply": _language_reply, "forward": _language_forward,
        "ocr": _language_ocr, "syndication": _language_syndication,
    }  # fmt: skip
    edits: dict[str, Edit] = {"insertion": _insertion, "deletion": _deletion}
    edits.update({kind: partial(edit, words) for kind, edit in made.items()})
    return edits


def language_corpus(language: Language, originals_wanted: int, documents: int,
                    seed: int = 3, base: Sequence[Document] | None = None) -> list[Document]:
    """A set of ``documents`` documents from ``originals_wanted`` originals drawn at random
    (``base``: these originals instead, for tests)."""
    every = list(base) if base is not None else originals(language)
    chosen = sorted(random.Random(seed).sample(range(len(every)),
                                               min(originals_wanted, len(every))))
    picked = [every[i] for i in chosen]
    return build_corpus(seed=seed, originals=picked, documents=documents,
                        edits=language_edits(language, [d.text for d in every]))


def fingerprint_of_set(documents: Sequence[Document]) -> str:
    """A short hash of a set's texts (to see that two runs used the same set)."""
    digest = hashlib.sha256()
    for document in documents:
        digest.update(document.text.encode("utf-8", "surrogatepass") + b"\0")
    return digest.hexdigest()[:16]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--language", choices=sorted(LANGUAGES), required=True)
    parser.add_argument("--originals", type=int, default=400)
    parser.add_argument("--documents", type=int, default=1200)
    parser.add_argument("--seed", type=int, default=3)
    parser.add_argument("--output", type=Path, help="write the set here (JSON Lines)")
    args = parser.parse_args(argv)
    try:
        documents = language_corpus(LANGUAGES[args.language], args.originals, args.documents,
                                    args.seed)
    except RuntimeError as error:
        print(f"langcorpus: {error}", file=sys.stderr)
        return 1
    kinds: dict[str, int] = {}
    for document in documents:
        kinds[document.kind or "original"] = kinds.get(document.kind or "original", 0) + 1
    print(f"{len(documents)} documents: " + ", ".join(f"{k} {n}" for k, n in kinds.items()),
          file=sys.stderr)
    if args.output:
        write_jsonl(documents, args.output)
    return 0


if __name__ == "__main__":
    sys.exit(main())
