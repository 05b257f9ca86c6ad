"""A reproducible evaluation corpus of real texts and their edited copies.

    .venv/bin/python -m benchmarks.corpus --size full --output corpus.jsonl [--seed 3]

Originals come from what any Debian 12 machine can install:

* the 1,189 chapters of the King James Bible (package ``bible-kjv``,
  :func:`nearsim.client.samples.kjv_chapters`);
* the license texts in /usr/share/common-licenses (package ``base-files``),
  long ones split into sections;
* the manual pages of the packages ``manpages`` and ``manpages-dev``, rendered
  to plain text with groff (long pages split into sections).  Rendering takes
  about a minute, so the texts are cached under benchmarks/.cache/, keyed by
  the packages' versions.

Edited copies follow two seeds.  Seed 003's protocol: every original has a
50 % chance of being modified, half the time by an *insertion* (a random
substring of the same file, up to 80 % of its size, inserted at a random
position) and half the time by a *deletion* of a random substring of up to
80 %.  Then, until the corpus has the wanted size, the edits e-discovery sees
(seed 001) and more seed-003 edits, applied to a random original or, one time
in five, to an already edited copy (copies of copies): ``typos`` (a copy with a
few typing errors; the original is the fixed version), ``reply`` (a short
message above the original quoted with "> "), ``forward`` (a forwarded-message
header above the original), ``ocr`` (OCR-like character noise) and
``syndication`` (publisher boilerplate at the top and/or bottom).

Every document records its ``origin`` (the original it descends from, None for
an original), its ``parent`` (the document it was made from), the ``edits``
applied since the original and their ``amounts``: the fraction of the edited
document's characters that the edit inserted, deleted or changed (for
insertions and deletions: the substring's length over the file's length).

Everything is drawn from one ``random.Random(seed)`` in a fixed order over
inputs listed in a machine-independent order, so the same seed gives the same
corpus on any Debian 12 machine with the same package versions (the corpus
records them).

Sizes are nested.  ``large`` (100,000 documents) has the originals of
``full`` and is built the same way, only with more filling edits (so more
copies, and copies of copies, per original).  The draws never depend on the
size wanted, which only says when to stop, so the first N documents of a
larger corpus are exactly the corpus built with ``documents=N`` and the same
seed: ``full`` is the first 20,500 documents of ``large``, and the cost
curve's sizes (:data:`CURVE_SIZES`) are prefixes of it.  A prefix never cuts
a family below its ancestors: every document comes after its parent and its
original, so each holds every document's parent and original; a family only
has fewer copies at a smaller size, as it would have if the corpus were built
at that size.  :func:`nested_corpus` builds them.
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import json
import os
import random
import re
import subprocess
import sys
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from functools import partial
from pathlib import Path

from nearsim.client.samples import kjv_chapters

__all__ = [
    "CURVE_SIZES",
    "EDIT_KINDS",
    "SEED_003_KINDS",
    "SIZES",
    "Document",
    "build_corpus",
    "license_sections",
    "manpage_sections",
    "nested_corpus",
    "original_documents",
    "read_jsonl",
    "translated_manpages",
    "write_jsonl",
]

LICENSE_DIRECTORY = Path("/usr/share/common-licenses")
MANPAGE_PACKAGES = ("manpages", "manpages-dev")
CACHE_DIRECTORY = Path(__file__).resolve().parent / ".cache"

SEED_003_KINDS = ("insertion", "deletion")
EDIT_KINDS = (*SEED_003_KINDS, "typos", "reply", "forward", "ocr", "syndication")

MAX_SEED_003_FRACTION = 0.8
"""Seed 003: inserted or deleted substrings are up to 80 % of the file."""

SECTION_CHARS = 8000
"""Long licenses and manual pages are cut into sections of about this size
(at paragraph breaks), so that no few documents dominate the corpus."""

MIN_WORDS = 40
"""Shorter sections (a title, a stub page) are left out."""

SIZES = {"small": 400, "full": 20_500, "large": 100_000, "million": 1_000_000}
"""Documents in each corpus size; ``full`` is about seed 003's 20,476 files,
``large`` the same originals with about five times as many edited copies,
``million`` (benchmarks/minhash.py; about 4.3 GB of text) fifty times as many."""

CURVE_SIZES = (10_000, SIZES["full"], 50_000, SIZES["large"])
"""The sizes of the cost curve: prefixes of ``large``, ``full`` among them."""

# ``small`` uses every SMALL_KJV_STEP-th chapter and the licenses: a few
# hundred documents, built in a second, for the test suite.
SMALL_KJV_STEP = 12

# Fraction of the filling edits applied to an edited copy instead of an original.
COPY_OF_COPY_SHARE = 0.2


@dataclass(frozen=True)
class Document:
    """One document of the corpus."""

    id: str
    text: str
    origin: str | None
    """The original this document descends from; None for an original."""
    parent: str | None = None
    """The document it was made from (the origin, or an edited copy)."""
    edits: tuple[str, ...] = ()
    """Edit kinds applied since the original, first to last."""
    amounts: tuple[float, ...] = ()
    """The fraction of text each edit inserted, deleted or changed, in [0, 1]."""
    source: str = ""
    """Where the original text comes from: kjv, license or man."""

    @property
    def kind(self) -> str | None:
        """The last edit (the one that made this document from its parent)."""
        return self.edits[-1] if self.edits else None

    @property
    def amount(self) -> float:
        """The last edit's amount (0.0 for an original)."""
        return self.amounts[-1] if self.amounts else 0.0


Edit = Callable[[random.Random, str], tuple[str, float]]
"""An edit: takes the rng and a text, returns the edited text and its amount."""


@dataclass
class _Builder:
    rng: random.Random
    documents: list[Document] = field(default_factory=list)
    counter: int = 0
    edits: Mapping[str, Edit] = field(default_factory=dict)

    def derive(self, parent: Document, kind: str) -> Document:
        text, amount = (self.edits or _EDITS)[kind](self.rng, parent.text)
        origin = parent.origin or parent.id
        self.counter += 1
        document = Document(
            id=f"{origin}~{self.counter}",
            text=text,
            origin=origin,
            parent=parent.id,
            edits=(*parent.edits, kind),
            amounts=(*parent.amounts, round(amount, 6)),
            source=parent.source,
        )
        self.documents.append(document)
        return document


# --------------------------------------------------------------------------
# Originals


def _space_words(text: str) -> int:
    return len(text.split())


def _sections(text: str, limit: int = SECTION_CHARS,
              words: Callable[[str], int] = _space_words) -> list[str]:
    """``text`` cut at blank lines into pieces of at most about ``limit`` characters,
    those of fewer than :data:`MIN_WORDS` ``words`` left out."""
    paragraphs = [p.strip("\n") for p in re.split(r"\n\s*\n", text) if p.strip()]
    pieces: list[str] = []
    current: list[str] = []
    size = 0
    for paragraph in paragraphs:
        if current and size + len(paragraph) > limit:
            pieces.append("\n\n".join(current) + "\n")
            current, size = [], 0
        current.append(paragraph)
        size += len(paragraph) + 2
    if current:
        pieces.append("\n\n".join(current) + "\n")
    return [p for p in pieces if words(p) >= MIN_WORDS]


def license_sections(directory: Path = LICENSE_DIRECTORY) -> list[tuple[str, str]]:
    """(id, text) of every license text, long ones in sections, sorted by file name.

    Symbolic links (GPL -> GPL-3, ...) are left out: they would be exact
    duplicates of their targets.
    """
    result: list[tuple[str, str]] = []
    for path in sorted(directory.iterdir(), key=lambda p: p.name):
        if path.is_symlink() or not path.is_file():
            continue
        text = path.read_text(encoding="utf-8", errors="replace")
        for number, section in enumerate(_sections(text), start=1):
            result.append((f"license:{path.name}#{number}", section))
    return result


def _package_version(package: str) -> str:
    return subprocess.run(
        ["dpkg-query", "-W", "-f=${Version}", package], check=True, capture_output=True,
        text=True,
    ).stdout.strip()


def _manpage_files(packages: Sequence[str] = MANPAGE_PACKAGES) -> list[str]:
    """The packages' own manual page files (no symlinks, no ``.so`` stubs), sorted."""
    listed = subprocess.run(
        ["dpkg", "-L", *packages], check=True, capture_output=True, text=True
    ).stdout.split("\n")
    files = []
    for name in sorted(set(listed)):
        if not re.search(r"/share/man/([^/]+/)?man[^/]+/[^/]+\.gz$", name):
            continue  # pages are in man/man1/, translations in man/de/man1/...
        path = Path(name)
        if path.is_symlink() or not path.is_file():
            continue
        with gzip.open(path, "rt", encoding="utf-8", errors="replace") as source:
            head = source.read(200)
        if head.lstrip().startswith(".so "):
            continue  # an alias page that includes another one
        files.append(name)
    return files


def _render(path: str, utf8_source: bool = False) -> str:
    """One manual page as plain text (no overstriking, no colour, no hyphenation).

    ``utf8_source``: the page is UTF-8 (translations), which groff reads
    through preconv; the English pages are rendered as they always were.
    """
    with gzip.open(path, "rb") as source:
        roff = source.read()
    environment = {**os.environ, "LC_ALL": "C.UTF-8", "MANWIDTH": "80"}
    preconv = ["-k", "-Kutf-8"] if utf8_source else []
    rendered = subprocess.run(
        ["groff", *preconv, "-man", "-Tutf8", "-P-c", "-P-b", "-P-u", "-rHY=0"],
        input=roff, capture_output=True, check=False, env=environment,
    ).stdout.decode("utf-8", errors="replace")
    # Page headers and footers repeat the page's name and date: keep the body.
    lines = rendered.splitlines()
    if len(lines) > 2:
        lines = lines[1:-1]
    return "\n".join(line.rstrip() for line in lines).strip() + "\n"


def _manpage_texts(cache_directory: Path = CACHE_DIRECTORY,
                   packages: Sequence[str] = MANPAGE_PACKAGES, limit: int | None = None,
                   utf8_source: bool = False) -> list[tuple[str, str]]:
    """(file, rendered text) of every manual page (the first ``limit``), rendered
    once and cached (see :func:`_render` for ``utf8_source``)."""
    versions: dict[str, str | int] = {p: _package_version(p) for p in (*packages, "groff-base")}
    if limit is not None:
        versions["limit"] = limit
    key = hashlib.sha256(json.dumps(versions, sort_keys=True).encode()).hexdigest()[:16]
    cache = cache_directory / f"manpages-{key}.json"
    if cache.exists():
        cached: list[tuple[str, str]] = [tuple(x) for x in json.loads(cache.read_text())]
        return cached
    files = _manpage_files(packages)[:limit]
    with ThreadPoolExecutor(max_workers=os.cpu_count() or 1) as pool:
        texts = list(pool.map(partial(_render, utf8_source=utf8_source), files))
    result = list(zip(files, texts, strict=True))
    cache_directory.mkdir(parents=True, exist_ok=True)
    temporary = cache.with_suffix(".tmp")
    temporary.write_text(json.dumps(result))
    temporary.replace(cache)
    return result


def manpage_sections(cache_directory: Path = CACHE_DIRECTORY) -> list[tuple[str, str]]:
    """(id, text) of every manual page section, e.g. ``man:man2/open.2.gz#1``."""
    result: list[tuple[str, str]] = []
    for path, text in _manpage_texts(cache_directory):
        name = "/".join(Path(path).parts[-2:])
        for number, section in enumerate(_sections(text), start=1):
            result.append((f"man:{name}#{number}", section))
    return result


def translated_manpages(package: str, limit: int | None = None,
                        cache_directory: Path = CACHE_DIRECTORY) -> list[str]:
    """The rendered manual pages of a translation package (``manpages-de``...), in
    order (the first ``limit``)."""
    try:
        return [text for _, text in _manpage_texts(cache_directory, (package,), limit,
                                                   utf8_source=True)]
    except (OSError, subprocess.CalledProcessError) as error:
        raise RuntimeError(f"cannot read the manual pages of {package} (apt-get install"
                           f" {package} groff-base): {error}") from None


def original_documents(size: str) -> list[Document]:
    """The originals of a corpus size, in a fixed order."""
    if size not in SIZES:
        raise ValueError(f"unknown corpus size {size!r}; use one of {sorted(SIZES)}")
    chapters = kjv_chapters()
    if size == "small":
        chapters = chapters[::SMALL_KJV_STEP]
    originals = [Document(f"kjv:{c.ref}", c.text, None, source="kjv") for c in chapters]
    originals += [Document(i, t, None, source="license") for i, t in license_sections()]
    if size != "small":
        originals += [Document(i, t, None, source="man") for i, t in manpage_sections()]
    return originals


# --------------------------------------------------------------------------
# Edits: each takes the rng and a text, returns the edited text and its amount


def _insertion(rng: random.Random, text: str) -> tuple[str, float]:
    """Seed 003: a random substring of the same text, inserted at a random position."""
    length = len(text)
    amount = rng.uniform(0.0, MAX_SEED_003_FRACTION)
    size = max(1, round(amount * length))
    start = rng.randrange(0, length - size + 1)
    at = rng.randrange(0, length + 1)
    return text[:at] + text[start : start + size] + text[at:], size / length


def _deletion(rng: random.Random, text: str) -> tuple[str, float]:
    """Seed 003: a random substring of up to 80 % of the text removed."""
    length = len(text)
    amount = rng.uniform(0.0, MAX_SEED_003_FRACTION)
    size = max(1, round(amount * length))
    start = rng.randrange(0, length - size + 1)
    return text[:start] + text[start + size :], size / length


_KEYBOARD_NEIGHBOURS = {
    "a": "qsz", "b": "vn", "c": "xv", "d": "sf", "e": "wr", "f": "dg", "g": "fh",
    "h": "gj", "i": "uo", "j": "hk", "k": "jl", "l": "k", "m": "n", "n": "bm",
    "o": "ip", "p": "o", "q": "w", "r": "et", "s": "ad", "t": "ry", "u": "yi",
    "v": "cb", "w": "qe", "x": "zc", "y": "tu", "z": "x",
}  # fmt: skip


def _keyboard_neighbour(rng: random.Random, letter: str) -> str:
    return rng.choice(_KEYBOARD_NEIGHBOURS.get(letter, "e"))


def _typo(rng: random.Random, word: str,
          neighbour: Callable[[random.Random, str], str] = _keyboard_neighbour) -> str:
    """One typing error in ``word``: swapped, dropped or doubled letters, or a
    letter replaced by ``neighbour`` (a neighbouring key)."""
    position = rng.randrange(len(word))
    letter = word[position].lower()
    choice = rng.randrange(4)
    if choice == 0 and len(word) > 1 and position + 1 < len(word):  # swapped letters
        return word[:position] + word[position + 1] + word[position] + word[position + 2 :]
    if choice == 1 and len(word) > 2:  # dropped letter
        return word[:position] + word[position + 1 :]
    if choice == 2:  # doubled letter
        return word[: position + 1] + word[position] + word[position + 1 :]
    return word[:position] + neighbour(rng, letter) + word[position + 1 :]


_ENGLISH_WORD = re.compile(r"[A-Za-z]{3,}")


def _typos(rng: random.Random, text: str, word: re.Pattern[str] = _ENGLISH_WORD,
           typo: Callable[[random.Random, str], str] = _typo) -> tuple[str, float]:
    """Seed 001's "fixed typos": 1 to 5 words mistyped (the parent is the fixed text).

    ``word`` finds the words that may be mistyped, ``typo`` mistypes one."""
    words = list(word.finditer(text))
    if not words:
        return text, 0.0
    chosen = sorted(rng.sample(range(len(words)), min(len(words), rng.randint(1, 5))))
    pieces: list[str] = []
    end = 0
    changed = 0
    for index in chosen:
        match = words[index]
        pieces.append(text[end : match.start()])
        mistyped = typo(rng, match.group())
        changed += max(len(mistyped), len(match.group()))
        pieces.append(mistyped)
        end = match.end()
    pieces.append(text[end:])
    return "".join(pieces), changed / len(text)


_NAMES = ("Alice Martin", "Bob Chen", "Carla Diaz", "David Okafor", "Eva Novak", "Farid Haddad",
          "Grace Kim", "Hugo Lindqvist", "Ines Moreau", "Jonas Weber")  # fmt: skip
_REPLIES = (
    "Thanks, see below.", "Please review the text below before Friday.",
    "Can you confirm this is the final version?", "Looping in legal.",
    "Agreed with most of it; comments to follow.", "FYI.",
    "This is the version we discussed in the meeting.", "See my note on the third paragraph.",
    "Please do not forward outside the team.", "Sending again in case you missed it.",
)
_MONTHS = ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec")


def _date(rng: random.Random) -> str:
    return (f"{rng.randint(1, 28)} {rng.choice(_MONTHS)} {rng.randint(1998, 2024)}"
            f" {rng.randint(0, 23):02d}:{rng.randint(0, 59):02d}")


def _address(name: str) -> str:
    return name.lower().replace(" ", ".") + "@example.com"


def _reply(rng: random.Random, text: str) -> tuple[str, float]:
    """An e-mail reply: a short message, then the original quoted with "> "."""
    writer, sender = rng.sample(_NAMES, 2)
    message = " ".join(rng.sample(_REPLIES, rng.randint(1, 3)))
    quoted = "\n".join("> " + line if line else ">" for line in text.splitlines())
    header = f"{message}\n\n{writer.split()[0]}\n\nOn {_date(rng)}, {sender} wrote:\n"
    result = header + quoted + "\n"
    return result, (len(result) - len(text)) / len(result)


def _forward(rng: random.Random, text: str) -> tuple[str, float]:
    """A forwarded message: a header block above the original."""
    sender, recipient = rng.sample(_NAMES, 2)
    note = rng.choice(("", "FYI\n\n", "See below.\n\n", "Forwarding as requested.\n\n"))
    header = (f"{note}---------- Forwarded message ---------\nFrom: {sender}"
              f" <{_address(sender)}>\nDate: {_date(rng)}\nSubject: Fwd: document"
              f" {rng.randint(100, 9999)}\nTo: {recipient} <{_address(recipient)}>\n\n")
    result = header + text
    return result, len(header) / len(result)


# OCR confusions, both directions where they are plausible.
_OCR_SUBSTITUTIONS = (
    ("rn", "m"), ("m", "rn"), ("l", "1"), ("I", "l"), ("O", "0"), ("o", "0"),
    ("e", "c"), ("cl", "d"), ("h", "b"), ("S", "5"), ("vv", "w"), ("i", "í"),
    (" ", ""), (" ", ""),  # merged words (dropped spaces) twice as likely
    ("", " "),  # a split word
)  # fmt: skip


def _ocr(rng: random.Random, text: str) -> tuple[str, float]:
    """OCR-like noise: confusable characters and dropped or added spaces at 0.5-3 %."""
    rate = rng.uniform(0.005, 0.03)
    pieces: list[str] = []
    position = 0
    changed = 0
    length = len(text)
    while position < length:
        if rng.random() < rate:
            source, target = _OCR_SUBSTITUTIONS[rng.randrange(len(_OCR_SUBSTITUTIONS))]
            if source == "" and text[position].isalpha():
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


_OUTLETS = ("The Daily Ledger", "Morning Courier", "Riverside Gazette", "Metro Wire",
            "Northern Review", "Coastal Times")  # fmt: skip
_HEADERS = (
    "{outlet} | {date}\nReprinted with permission.\n\n",
    "ARCHIVE COPY - {outlet}\nRetrieved {date}. Page {page}.\n\n",
    "From the pages of {outlet}. Distributed by Metro Wire Syndicate on {date}.\n\n",
)
_FOOTERS = (
    "\n\n--\nCopyright {year} {outlet}. All rights reserved. This material may not be"
    " published, broadcast, rewritten or redistributed without permission.\n",
    "\n\nSubscribe to {outlet} for more stories like this. To unsubscribe, reply STOP."
    " Terms and privacy policy apply.\n",
    "\n\n[Document ends. {outlet} archive reference {page}-{year}.]\n",
)


def _syndication(rng: random.Random, text: str) -> tuple[str, float]:
    """Publisher boilerplate added at the top, the bottom or both."""
    fields = {"outlet": rng.choice(_OUTLETS), "date": _date(rng),
              "page": rng.randint(1, 400), "year": rng.randint(1998, 2024)}  # fmt: skip
    where = rng.choice(("top", "bottom", "both"))
    header = rng.choice(_HEADERS).format(**fields) if where != "bottom" else ""
    footer = rng.choice(_FOOTERS).format(**fields) if where != "top" else ""
    result = header + text + footer
    return result, (len(header) + len(footer)) / len(result)


_EDITS = {
    "insertion": _insertion, "deletion": _deletion, "typos": _typos, "reply": _reply,
    "forward": _forward, "ocr": _ocr, "syndication": _syndication,
}  # fmt: skip


# --------------------------------------------------------------------------
# The corpus


def build_corpus(size: str = "small", seed: int = 3,
                 originals: Sequence[Document] | None = None,
                 documents: int | None = None,
                 edits: Mapping[str, Edit] | None = None) -> list[Document]:
    """The corpus: originals first, then their edited copies, in creation order.

    ``originals`` and ``documents`` (the total wanted) override the size's
    defaults (for tests and other languages); ``edits`` replaces the edit of
    each kind of :data:`EDIT_KINDS` (for other scripts, see
    ``benchmarks/langcorpus.py``).
    """
    return list(iter_corpus(size, seed, originals, documents, edits))


def iter_corpus(size: str = "small", seed: int = 3,
                originals: Sequence[Document] | None = None,
                documents: int | None = None,
                edits: Mapping[str, Edit] | None = None) -> Iterator[Document]:
    """The documents of :func:`build_corpus`, one at a time as they are made.

    The builder keeps every document it made (any copy may be edited again),
    so the texts are held once, here, and a caller that writes them out as
    they come holds no second copy: a million documents are about 4 GB of text.
    """
    base = list(originals) if originals is not None else original_documents(size)
    target = documents if documents is not None else SIZES[size]
    builder = _Builder(random.Random(seed), list(base), edits=edits or {})
    rng = builder.rng
    yield from base
    # Seed 003: each original is modified with probability 1/2, by an
    # insertion or a deletion with equal probability.  The originals and this
    # pass are made whatever the size (so the smallest corpus is larger than
    # a ``documents`` below their number).
    for original in base:
        if rng.random() < 0.5:
            yield builder.derive(original, rng.choice(SEED_003_KINDS))
    derived = builder.documents[len(base) :]
    while len(builder.documents) < target:
        if derived and rng.random() < COPY_OF_COPY_SHARE:
            parent = rng.choice(derived)
        else:
            parent = rng.choice(base)
        made = builder.derive(parent, rng.choice(EDIT_KINDS))
        derived.append(made)
        yield made


def nested_corpus(size: str = "large", sizes: Sequence[int] = CURVE_SIZES,
                  seed: int = 3) -> tuple[list[Document], list[int]]:
    """The corpus of the largest of ``sizes`` and the sizes, ascending.

    Its first ``n`` documents are ``build_corpus(size, seed, documents=n)``
    for each ``n`` of ``sizes`` (see the module's docstring); ``size`` says
    which originals (``small`` or the others').
    """
    ordered = sorted(set(sizes))
    if not ordered:
        raise ValueError("no sizes")
    documents = build_corpus(size, seed, documents=ordered[-1])
    originals = [d for d in documents if d.origin is None]
    # The originals and seed 003's first pass are made whatever the size.
    smallest = len(build_corpus(originals=originals, documents=0, seed=seed))
    if ordered[0] < smallest:
        raise ValueError(f"sizes start at {smallest:,} documents (the originals and seed"
                         f" 003's first pass), not {ordered[0]:,}")
    return documents, ordered


def write_jsonl(documents: Iterable[Document], path: Path) -> None:
    with path.open("w", encoding="utf-8") as out:
        for document in documents:
            out.write(json.dumps(asdict(document), ensure_ascii=False) + "\n")


def read_jsonl(path: Path) -> list[Document]:
    documents = []
    with path.open(encoding="utf-8") as source:
        for line in source:
            row = json.loads(line)
            row["edits"] = tuple(row["edits"])
            row["amounts"] = tuple(row["amounts"])
            documents.append(Document(**row))
    return documents


def _summary(documents: Sequence[Document]) -> Iterator[str]:
    yield f"{len(documents)} documents"
    originals = [d for d in documents if d.origin is None]
    yield f"{len(originals)} originals: " + ", ".join(
        f"{s} {sum(d.source == s for d in originals)}" for s in ("kjv", "license", "man"))
    for kind in EDIT_KINDS:
        yield f"  {kind}: {sum(d.kind == kind for d in documents)}"
    yield f"  copies of copies: {sum(len(d.edits) > 1 for d in documents)}"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--size", choices=sorted(SIZES), default="small")
    parser.add_argument("--seed", type=int, default=3)
    parser.add_argument("--output", type=Path, help="write the corpus here (JSON Lines)")
    args = parser.parse_args(argv)
    documents = build_corpus(args.size, args.seed)
    for line in _summary(documents):
        print(line, file=sys.stderr)
    if args.output:
        write_jsonl(documents, args.output)
    return 0


if __name__ == "__main__":
    sys.exit(main())
