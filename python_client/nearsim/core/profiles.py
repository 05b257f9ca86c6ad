"""Feature profiles: which features of a text its fingerprint votes on.

The default profile (``default/1``, see :mod:`nearsim.core.fingerprint`) votes on
word 3-shingles of every word.  Other profiles keep its normalisation and
tokens (steps 1 to 3) and its hashing and vote (steps 5 and 6) and change
the features in between.  A profile is written as features, options and a
version::

    words:3/1                        word 3-shingles (the default profile)
    words:1-3/1                      word 1-, 2- and 3-grams (seed 002's min..max)
    chars:5/1                        character 5-grams
    words:3+stop:english+stem:english/1
    words:3+stop:auto+stem:auto/1    stop words and stemmer of the detected language

Options, applied in this order to the tokens of the text:

``stop:LANG``
    Tokens that are stop words of LANG are removed.  The lists are
    PostgreSQL's (``tsearch_data/LANG.stop``, from the Snowball project),
    shipped with nearsim so that client and server use the same words; an
    entry is normalised and tokenised like a text.
``stem:LANG``
    Each token is replaced by its Snowball stem (the ``snowballstemmer``
    library, version 2.2.0 exactly: another version may stem differently).
``stop:auto``, ``stem:auto``
    LANG is the language that ``langdetect`` 1.0.9 (seeded, so always the
    same answer) finds in the first 1,000 tokens of the text; a language
    without a list or stemmer gets none, as does a text it cannot place.
``soundex``
    Each token that holds an ASCII letter is replaced by its American
    Soundex code (seed 000's best stream); other tokens, numbers for
    instance, stay as they are.
``novowels``
    The vowels a, e, i, o, u (also accented: any character whose canonical
    decomposition starts with one of them) are removed from each token; a
    token left empty is removed.
``unique-words``
    Only the first occurrence of each token stays (seed 000's "duplicate
    words removed").

Then the features: ``words:N`` or ``words:N-M`` are the runs of N (to M)
consecutive tokens joined by a space; ``chars:N`` or ``chars:N-M`` are the
runs of N (to M) consecutive characters of the tokens joined by a space.  A
text shorter than N has one feature, all of it.  Every occurrence of a
feature votes, unless the option ``unique`` is given: then features with the
same hash vote once (seed 004's repetition factor left out).

The version is the tokenisation (:mod:`nearsim.core.text`): version 1, or
version 2, which also cuts the letters of Thai, Lao, Myanmar, Khmer and the
other scripts written without spaces one to a token (``default/2``,
``english/2``...).  For text without those scripts the two versions give
the same fingerprint.  A name without ``/version`` means version 1.  The
short names ``default``, ``english``, ``auto``, ``soundex``, ``chars`` and
``set`` stand for the specifications in :data:`ALIASES`; a profile's
canonical name is its short name if it has one, else its specification with
the options in the order above.
"""

from __future__ import annotations

import importlib
import importlib.metadata
import re
import unicodedata
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from functools import cache, lru_cache
from typing import Any, Literal

import numpy as np
import numpy.typing as npt

from . import fingerprint
from ._xxh64 import PADDING, xxh64_ranges
from .data import STOP_WORDS_DIR
from .interrupts import LimitExceeded, checkpoint
from .soundex import soundex
from .text import TOKENISATIONS, token_batches, tokens

VERSION = 1
"""The version of a profile named without one."""
VERSIONS = TOKENISATIONS
"""The profile versions this nearsim computes: version N uses tokenisation N."""

ALIASES = {
    "default": "words:3",
    "english": "words:3+stop:english+stem:english",
    "auto": "words:3+stop:auto+stem:auto",
    "soundex": "words:3+stop:english+soundex",
    "chars": "chars:5",
    "set": "words:3+unique",
}
"""Short names of common profiles and the specification each stands for."""

STOP_WORD_LANGUAGES = (
    "danish", "dutch", "english", "finnish", "french", "german", "hungarian", "italian",
    "nepali", "norwegian", "portuguese", "russian", "spanish", "swedish", "turkish",
)  # fmt: skip
STEMMER_LANGUAGES = (
    "arabic", "armenian", "basque", "catalan", "danish", "dutch", "english", "finnish",
    "french", "german", "greek", "hindi", "hungarian", "indonesian", "irish", "italian",
    "lithuanian", "nepali", "norwegian", "porter", "portuguese", "romanian", "russian",
    "serbian", "spanish", "swedish", "tamil", "turkish", "yiddish",
)  # fmt: skip
# The languages langdetect reports (ISO 639-1) that have a list or a stemmer.
DETECTED_LANGUAGES = {
    "ar": "arabic", "ca": "catalan", "da": "danish", "de": "german", "el": "greek",
    "en": "english", "es": "spanish", "fi": "finnish", "fr": "french", "hi": "hindi",
    "hu": "hungarian", "id": "indonesian", "it": "italian", "lt": "lithuanian",
    "ne": "nepali", "nl": "dutch", "no": "norwegian", "pt": "portuguese", "ro": "romanian",
    "ru": "russian", "sv": "swedish", "ta": "tamil", "tr": "turkish",
}  # fmt: skip
PINNED_LIBRARIES = {"snowballstemmer": "2.2.0", "langdetect": "1.0.9"}
"""Exact versions of the libraries profiles use: another may give other features."""

MAX_WORDS = 16
MAX_CHARS = 64
DETECTION_TOKENS = 1000

FLAGS = ("soundex", "novowels", "unique-words", "unique")
_VOWELS = frozenset("aeiou")
_SPACE = ord(" ")


class ProfileError(ValueError):
    """A profile name that does not name a profile this nearsim computes."""


@dataclass(frozen=True)
class Profile:
    """A feature profile; make one with :meth:`named`.

    >>> english = Profile.named("english")
    >>> english.name
    'english/1'
    >>> english.simhash("Sheep grazing on the hills") == english.simhash("sheep grazed on the hill")
    True
    """

    unit: Literal["words", "chars"] = "words"
    min_size: int = 3
    max_size: int = 3
    stop: str | None = None
    stem: str | None = None
    soundex: bool = False
    novowels: bool = False
    unique_words: bool = False
    unique: bool = False
    version: int = VERSION

    @staticmethod
    def named(name: str) -> Profile:
        """The profile called ``name``; :class:`ProfileError` if there is none."""
        return _parse(name)

    @property
    def spec(self) -> str:
        """The specification without version, options in canonical order."""
        size = f"{self.min_size}" if self.min_size == self.max_size else (
            f"{self.min_size}-{self.max_size}")  # fmt: skip
        parts = [f"{self.unit}:{size}"]
        if self.stop:
            parts.append(f"stop:{self.stop}")
        if self.stem:
            parts.append(f"stem:{self.stem}")
        parts += [flag for flag in FLAGS if getattr(self, flag.replace("-", "_"))]
        return "+".join(parts)

    @property
    def name(self) -> str:
        """The canonical name: short name or specification, and version."""
        short = next((alias for alias, spec in ALIASES.items() if spec == self.spec), None)
        return f"{short or self.spec}/{self.version}"

    @property
    def detects_language(self) -> bool:
        return "auto" in (self.stop, self.stem)

    def check_libraries(self) -> None:
        """Raise ``RuntimeError`` if a library the profile needs is missing or another version."""
        needed = (["snowballstemmer"] if self.stem else []) + (
            ["langdetect"] if self.detects_language else [])  # fmt: skip
        for library in needed:
            _check_library(library, self.name)

    # -- tokens -----------------------------------------------------------------

    def language(self, text: str) -> str | None:
        """The language whose stop words and stemmer ``auto`` chooses for ``text``."""
        if not self.detects_language:
            return None
        return detect_language(text)

    def transform(self, tokens: list[str], language: str | None,
                  seen: set[str] | None = None) -> list[str]:  # fmt: skip
        """The options applied to some tokens of a text whose language is ``language``.

        ``seen`` holds the tokens of the text so far for ``unique-words``.
        """
        stop = language if self.stop == "auto" else self.stop
        if stop:
            words = stop_words(stop) if stop in STOP_WORD_LANGUAGES else frozenset()
            tokens = [t for t in tokens if t not in words]
        stem = language if self.stem == "auto" else self.stem
        if stem and stem in STEMMER_LANGUAGES:
            tokens = _mapped(tokens, _stems(stem), _stemmer(stem))
        if self.soundex:
            tokens = _mapped(tokens, _SOUNDEX, lambda ts: [soundex(t) or t for t in ts])
        if self.novowels:
            tokens = [t for t in _mapped(tokens, _NO_VOWELS, _without_vowels) if t]
        if self.unique_words:
            if seen is None:
                seen = set()
            fresh = []
            for t in tokens:
                if t not in seen:
                    seen.add(t)
                    fresh.append(t)
            tokens = fresh
        return tokens

    def tokens(self, text: str) -> list[str]:
        """The tokens of ``text`` after the options."""
        language = self.language(text)
        seen: set[str] = set()
        return [t for batch in token_batches(text, self.version)
                for t in self.transform(batch, language, seen)]  # fmt: skip

    def features(self, text: str) -> list[str]:
        """The features of ``text``, with repetitions (``unique`` is left to the hashes)."""
        tokens = self.tokens(text)
        units: Sequence[str] = tokens if self.unit == "words" else " ".join(tokens)
        glue = " " if self.unit == "words" else ""
        if 0 < len(units) < self.min_size:
            return [glue.join(units)]
        return [glue.join(units[i : i + n]) for n in range(self.min_size, self.max_size + 1)
                for i in range(len(units) - n + 1)]  # fmt: skip

    # -- the fingerprint -----------------------------------------------------------

    def simhash(self, text: str) -> int | None:
        """The fingerprint of ``text`` under this profile (``None``: no features)."""
        if not isinstance(text, str):
            raise TypeError(f"simhash() needs a str, not {type(text).__name__}")
        self.check_libraries()
        if self.spec == ALIASES["default"]:
            return fingerprint.simhash(text, self.version)
        hashes = self._feature_hashes(text)
        if self.unique:
            hashes = iter(_distinct_hashes(hashes, self.name))
        return fingerprint.vote(hashes)

    def _feature_hashes(self, text: str) -> Iterator[npt.NDArray[np.uint64]]:
        """The hashes of the features of ``text``, a piece of the text at a time.

        Like the default profile, features are byte ranges of one UTF-8
        buffer per piece; ``carry`` holds the end of the previous pieces
        that features of the next may start in.
        """
        language = self.language(text)
        seen: set[str] = set()
        carry = ""  # words: up to max_size - 1 tokens; chars: up to max_size - 1 characters
        carried = 0  # units in carry
        total = 0  # units so far
        for batch in token_batches(text, self.version):
            batch = self.transform(batch, language, seen)
            if not batch:
                continue
            glue = " " if carry else ""
            stream = carry + glue + " ".join(batch)
            data, bounds = self._units(stream)
            count = len(bounds) - 1
            total += count - carried
            for n in range(self.min_size, self.max_size + 1):
                checkpoint()
                first = max(0, carried - n + 1)  # features ending after the carried units
                if count - n >= first:
                    starts = bounds[first : count - n + 1]
                    ends = bounds[first + n : count + 1] - (1 if self.unit == "words" else 0)
                    yield xxh64_ranges(data, starts, ends - starts)
            kept = min(count, self.max_size - 1)
            carry = self._tail(stream, data, bounds, kept)
            carried = kept
        if 0 < total < self.min_size:
            whole = carry.encode()
            yield xxh64_ranges(np.frombuffer(whole + bytes(PADDING), dtype=np.uint8),
                               np.array([0]), np.array([len(whole)]))  # fmt: skip

    def _units(self, stream: str) -> tuple[npt.NDArray[np.uint8], npt.NDArray[np.intp]]:
        """The UTF-8 bytes of ``stream`` (padded) and the byte offsets where its units start.

        The last offset is where a unit after the last would start: for
        words one byte after the final space that ends the buffer.
        """
        if self.unit == "words":
            raw = (stream + " ").encode()
            data = np.frombuffer(raw + bytes(PADDING), dtype=np.uint8)
            spaces = np.flatnonzero(data[: len(raw)] == _SPACE)
            return data, np.concatenate(([0], spaces + 1))
        raw = stream.encode()
        data = np.frombuffer(raw + bytes(PADDING), dtype=np.uint8)
        # A character starts at every byte that is not a UTF-8 continuation byte.
        starts = np.flatnonzero((data[: len(raw)] & 0xC0) != 0x80)
        return data, np.concatenate((starts, [len(raw)]))

    def _tail(self, stream: str, data: npt.NDArray[np.uint8],
              bounds: npt.NDArray[np.intp], kept: int) -> str:  # fmt: skip
        """The last ``kept`` units of ``stream``, as the start of the next stream."""
        if kept == 0:
            return ""
        count = len(bounds) - 1
        end = int(bounds[-1]) - (1 if self.unit == "words" else 0)
        return bytes(data[int(bounds[count - kept]) : end]).decode()


MAX_UNIQUE_FEATURES = 1 << 25
"""The most distinct features a ``+unique`` profile holds for one text (8 bytes
each, 256 MB): a text with more is refused.  Without ``unique`` the features
are counted as they come and nothing grows with the text."""


def _distinct_hashes(hashes: Iterator[npt.NDArray[np.uint64]],
                     profile: str) -> list[npt.NDArray[np.uint64]]:  # fmt: skip
    """The distinct values of all ``hashes``, merged as they come, so that memory
    follows the distinct features (at most :data:`MAX_UNIQUE_FEATURES`), not all."""
    held = np.empty(0, dtype=np.uint64)
    waiting: list[npt.NDArray[np.uint64]] = []
    waiting_count = 0
    for batch in hashes:
        distinct = np.unique(batch)
        waiting.append(distinct)
        waiting_count += len(distinct)
        if waiting_count > max(len(held), 1 << 20):
            held = np.unique(np.concatenate([held, *waiting]))
            waiting, waiting_count = [], 0
            if len(held) > MAX_UNIQUE_FEATURES:
                raise LimitExceeded(
                    f"profile {profile}: the text has more than {MAX_UNIQUE_FEATURES:,}"
                    " distinct features, the most a +unique profile holds",
                    hint="Use a profile without +unique, or a narrower range of shingle sizes.")
    if waiting:
        held = np.unique(np.concatenate([held, *waiting]))
        if len(held) > MAX_UNIQUE_FEATURES:
            raise LimitExceeded(
                f"profile {profile}: the text has more than {MAX_UNIQUE_FEATURES:,}"
                " distinct features, the most a +unique profile holds",
                hint="Use a profile without +unique, or a narrower range of shingle sizes.")
    return [held] if len(held) else []


# Words repeat: each distinct token is transformed once, and remembered for
# later texts until a table holds this many.
_REMEMBERED = 1 << 18
_SOUNDEX: dict[str, str] = {}
_NO_VOWELS: dict[str, str] = {}


def _mapped(tokens: list[str], table: dict[str, str],
            transform: Callable[[list[str]], list[str]]) -> list[str]:  # fmt: skip
    """``transform(tokens)``, for a ``transform`` of each token on its own."""
    new = list(set(tokens).difference(table))
    if new:
        if len(table) + len(new) > _REMEMBERED:
            table.clear()
        table.update(zip(new, transform(new), strict=True))
    return list(map(table.__getitem__, tokens))


@cache
def _stems(language: str) -> dict[str, str]:
    return {}


def _without_vowels(tokens: list[str]) -> list[str]:
    return ["".join(c for c in token if _base_letter(c) not in _VOWELS) for token in tokens]


@lru_cache(maxsize=4096)
def _base_letter(char: str) -> str:
    """The first character of the canonical decomposition of ``char``."""
    return unicodedata.normalize("NFD", char)[0]


def _check_library(library: str, profile: str) -> None:
    pinned = PINNED_LIBRARIES[library]
    try:
        found = importlib.metadata.version(library)
    except importlib.metadata.PackageNotFoundError:
        found = None
    if found != pinned:
        have = "it is not installed" if found is None else f"found {found}"
        raise RuntimeError(
            f"fingerprint profile {profile} needs {library} {pinned} exactly ({have}):"
            " another version may give other fingerprints"
        )


@cache
def stop_words(language: str) -> frozenset[str]:
    """The stop words of ``language``, normalised and tokenised like texts."""
    path = STOP_WORDS_DIR / f"{language}.stop"
    text = path.read_text(encoding="utf-8")
    return frozenset(tokens(text))


@cache
def _stemmer(language: str) -> Callable[[list[str]], list[str]]:
    snowball: Any = importlib.import_module("snowballstemmer")
    stemmer = snowball.stemmer(language)

    def stem(tokens: list[str]) -> list[str]:
        return list(stemmer.stemWords(tokens))

    return stem


@cache
def _detector_factory() -> Any:
    factory_module: Any = importlib.import_module("langdetect.detector_factory")
    factory = factory_module.DetectorFactory()
    factory.load_profile(factory_module.PROFILES_DIRECTORY)
    factory.seed = 0  # detection samples at random; seeded, it always answers the same
    return factory


def detect_language(text: str) -> str | None:
    """The language (a Snowball name) langdetect finds in ``text``, if nearsim has it."""
    sample: list[str] = []
    for batch in token_batches(text):
        sample += batch[: DETECTION_TOKENS - len(sample)]
        if len(sample) >= DETECTION_TOKENS:
            break
    if not sample:
        return None
    detector = _detector_factory().create()
    detector.append(" ".join(sample))
    try:
        code = str(detector.detect())
    except Exception as error:  # langdetect raises its own exception when it finds nothing
        if type(error).__name__ == "LangDetectException":
            return None
        raise
    return DETECTED_LANGUAGES.get(code)


_SIZE = re.compile(r"(words|chars):(\d{1,3})(?:-(\d{1,3}))?")


MAX_NAME = 256
"""Longer names are no profile: longer than any specification can be."""


def _shown(value: str, limit: int = 60) -> str:
    """``value`` quoted for an error message, cut if long: a message is one line."""
    return repr(value) if len(value) <= limit else f"{value[:limit]!r}... ({len(value)} characters)"


@lru_cache(maxsize=256)
def _parse(name: str) -> Profile:
    if not isinstance(name, str):
        raise TypeError(f"a profile name is a str, not {type(name).__name__}")
    shown = _shown(name)
    if len(name) > MAX_NAME:
        raise ProfileError(f"profile {shown}: longer than any profile name")
    spec, slash, version_text = name.strip().partition("/")
    if slash:
        if not version_text.isdigit():
            raise ProfileError(f"profile {shown}: the version after '/' must be a number")
        if int(version_text) not in VERSIONS:
            raise ProfileError(
                f"profile {shown}: version {int(version_text)} is unknown to this nearsim,"
                f" which computes versions {' and '.join(map(str, VERSIONS))}"
            )
    spec = ALIASES.get(spec, spec)
    parts = spec.split("+")
    size = _SIZE.fullmatch(parts[0])
    if size is None:
        raise ProfileError(
            f"profile {shown}: expected a short name ({', '.join(ALIASES)}) or features"
            " words:N, words:N-M, chars:N or chars:N-M first"
        )
    unit, low, high = size.group(1), int(size.group(2)), int(size.group(3) or size.group(2))
    limit = MAX_WORDS if unit == "words" else MAX_CHARS
    if not 1 <= low <= high <= limit:
        raise ProfileError(f"profile {shown}: sizes must satisfy 1 <= N <= M <= {limit}")
    options: dict[str, Any] = {}
    for part in parts[1:]:
        key, colon, language = part.partition(":")
        value: str | bool = language
        if key in ("stop", "stem") and colon:
            known = STOP_WORD_LANGUAGES if key == "stop" else STEMMER_LANGUAGES
            if language != "auto" and language not in known:
                raise ProfileError(
                    f"profile {shown}: no {'stop-word list' if key == 'stop' else 'stemmer'}"
                    f" for {_shown(language)}; known: auto, {', '.join(known)}"
                )
        elif key in FLAGS and not colon:
            value = True
        else:
            raise ProfileError(
                f"profile {shown}: unknown option {_shown(part)}; options are stop:LANG,"
                f" stem:LANG, {', '.join(FLAGS)}"
            )
        attribute = key.replace("-", "_")
        if attribute in options:
            raise ProfileError(f"profile {shown}: option {key!r} is given twice")
        options[attribute] = value
    version = int(version_text) if slash else VERSION
    return Profile(unit, low, high, **options, version=version)  # type: ignore[arg-type]


def canonical(name: str) -> str:
    """The canonical name of the profile ``name`` (e.g. ``"words:3"`` -> ``"default/1"``)."""
    return Profile.named(name).name


def simhash(text: str, profile: str | None = None) -> int | None:
    """The fingerprint of ``text`` with a feature profile (by default ``default/1``).

    Returns a signed 64-bit integer (an SQL bigint), or ``None`` when the
    text has no features.  Bit-identical to the server's ``simhash(text)``
    and ``simhash(text, profile)``.

    >>> simhash("In the beginning God created the heaven and the earth.")
    -8749841501232166640
    >>> simhash("In the beginning God created the heaven and the earth.", "english")
    -963174511285151842
    """
    if profile is None or profile == fingerprint.PROFILE:
        return fingerprint.simhash(text)
    return Profile.named(profile).simhash(text)  # default/2 by the fingerprint too


def simhash_many(texts: Sequence[str], profile: str | None = None) -> list[int | None]:
    """``[simhash(t, profile) for t in texts]``, quicker for many short texts."""
    if profile is None or profile == fingerprint.PROFILE:
        return fingerprint.simhash_many(texts)
    named = Profile.named(profile)
    if named.spec == ALIASES["default"]:
        return fingerprint.simhash_many(texts, named.version)
    for text in texts:
        if not isinstance(text, str):
            raise TypeError(f"simhash() needs a str, not {type(text).__name__}")
    return [named.simhash(text) for text in texts]
