"""Other scripts: verified-pair F1 and fingerprint speed in Chinese, Japanese and Khmer.

    .venv/bin/python -m benchmarks.languages [--dsn DSN] [--originals N] [--documents N]
        [--output-dir DIR]

**Sets.**  One set per language of benchmarks/langcorpus.py (Chinese,
Japanese, Khmer: scripts without spaces between words) and, in the same run,
an English set built the same way from the originals of benchmarks/corpus.py
(King James Bible, licenses, manual pages): each ``--originals`` originals
drawn at random and edited copies up to ``--documents`` documents, with the
same kinds of edits in the same proportions.

**F1 of verified pairs**, as benchmarks/defaults.py scores the defaults:
the positives are the *light* pairs of each family (edits on their
family-tree path change at most 15 % of the text), pairs changed by 15 to 30
% are not scored, heavier pairs and pairs of different families are
negatives.  The predicted pairs are those the client's verified pairs
(``Documents.pairs_verified()``, ``nearsim pairs --verified``) return with
its defaults: S_R at least :data:`~nearsim.core.measures.CANDIDATE_RESEMBLANCE`
(the server's exact join), then :data:`~nearsim.core.measures.DEFAULT_MEASURE`
at least :data:`~nearsim.core.measures.DEFAULT_MIN_SIMILARITY`, measured
here on the texts with the same code.  Each language's F1 is compared with
the English set's (target: within :data:`F1_TOLERANCE`).  Per edit kind, the
recall of each document against its parent shows where a language loses.

**Profile version 2.**  The same scoring with the words of tokenisation 2
(profile ``default/2``), which makes each letter of Thai, Lao, Myanmar,
Khmer... a word with its marks: the profile docs/GUIDE.md tells users of
those scripts to enable their tables with.  A set in which no text has such
letters has the same words, so the same pairs, under both: its figures are
taken over.

**Speed.**  ``nearsim.simhash`` in this process, and with ``--dsn`` the
server's ``simhash(text)`` in one backend, over each set's originals against
the English King James Bible (ASCII) in the same run: MB/s and the ratio to
English.

Writes ``languages.json`` and ``languages.md`` (the section "Other scripts"
of docs/BENCHMARKS.md) into the output directory (default
benchmarks/results/).
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import platform
import random
import secrets
import sys
import time
from collections import defaultdict
from collections.abc import Collection, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np
import psycopg
from psycopg import sql

import nearsim
from nearsim.client.samples import kjv_chapters
from nearsim.core.calibration import radius_for
from nearsim.core.measures import (
    CANDIDATE_RESEMBLANCE,
    DEFAULT_MEASURE,
    DEFAULT_MIN_SIMILARITY,
    compare,
)
from nearsim.core.profiles import Profile
from nearsim.core.text import tokens

from .common import MB, best_of, run_main
from .corpus import Document, build_corpus, original_documents
from .defaults import LIGHT, UNRELATED, candidates, family_pairs, kind_of
from .docsets import popcount
from .langcorpus import LANGUAGES, fingerprint_of_set, language_corpus

__all__ = ["F1_TOLERANCE", "Scored", "evaluate", "markdown", "radius_recall", "score_set"]

F1_TOLERANCE = 0.02
"""How far below the English F1 a language may be."""
DEFAULT_OUTPUT = Path(__file__).resolve().parent / "results"
SPEED_REPEAT = 3
SEED = 3


def log(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


# --------------------------------------------------------------------------
# Sets


def english_set(originals: int, documents: int, seed: int = SEED) -> list[Document]:
    """The English set: ``originals`` originals of the full corpus drawn at random, edited
    copies up to ``documents``."""
    every = original_documents("full")
    chosen = sorted(random.Random(seed).sample(range(len(every)), min(originals, len(every))))
    return build_corpus(seed=seed, originals=[every[i] for i in chosen], documents=documents)


# --------------------------------------------------------------------------
# Edit sizes in tokens instead of characters

_SIZE_EDITS = ("insertion", "deletion", "reply", "forward", "syndication")
"""The edits whose amount is the size of text added or removed (the others change a
few characters in place)."""


def in_tokens(documents: Sequence[Document]) -> list[Document]:
    """The set with the amount of each edit that adds or removes text counted in tokens
    (the share of the tokens added or removed) instead of characters."""
    counts = {d.id: sum(1 for _ in tokens(d.text)) for d in documents}
    result: dict[str, Document] = {}
    for document in documents:  # a parent always comes before its copies
        if document.parent is None:
            result[document.id] = document
            continue
        parent = result[document.parent]
        amount = document.amount
        if document.kind in _SIZE_EDITS:
            before, after = counts[document.parent], counts[document.id]
            if document.kind == "insertion":
                amount = (after - before) / before if before else 0.0
            elif document.kind == "deletion":
                amount = (before - after) / before if before else 0.0
            else:
                amount = (after - before) / after if after else 0.0
        result[document.id] = replace(document, amounts=(*parent.amounts, max(amount, 0.0)))
    return list(result.values())


# --------------------------------------------------------------------------
# F1 of the client's verified pairs


@dataclass(frozen=True)
class Scored:
    """F1 of the verified pairs of one set, and where its light pairs were lost."""

    documents: int
    light: int
    between: int
    predicted: int
    true_positives: int
    false_positives: int
    precision: float
    recall: float
    f1: float
    by_edit: dict[str, dict[str, float]]
    """Per edit kind: (document, parent) light pairs, their recall, median S_R and S_L."""
    seconds: float

    def as_json(self) -> dict[str, Any]:
        return dict(self.__dict__)


_TEXTS: Sequence[str] = ()
_TOKENISATION = 1


def _measure(pair: tuple[int, int]) -> float:
    found = compare(_TEXTS[pair[0]], _TEXTS[pair[1]], tokenisation=_TOKENISATION)
    return float(getattr(found, DEFAULT_MEASURE))


def _measure_all(texts: Sequence[str], pairs: Sequence[tuple[int, int]], jobs: int,
                 tokenisation: int) -> list[float]:  # fmt: skip
    global _TEXTS, _TOKENISATION
    _TEXTS, _TOKENISATION = texts, tokenisation
    try:
        if jobs > 1:  # fork: the workers see the texts without pickling them
            with multiprocessing.get_context("fork").Pool(jobs) as pool:
                return pool.map(_measure, pairs, chunksize=16)
        return [_measure(pair) for pair in pairs]
    finally:
        _TEXTS, _TOKENISATION = (), 1


def score_set(documents: Sequence[Document], jobs: int = 1, tokenisation: int = 1,
              measured: dict[tuple[int, int], float] | None = None) -> Scored:
    """Precision, recall and F1 of the client's default verified pairs on a set
    (module docstring), with the words of ``tokenisation`` (2: profile default/2);
    ``measured``: the measure of pairs of these texts already known, and filled in."""
    started = time.perf_counter()
    texts = [d.text for d in documents]
    changes = family_pairs(documents)
    kinds = {pair: kind_of(change) for pair, change in changes.items()}
    light = {pair for pair, kind in kinds.items() if kind == LIGHT}
    found = candidates(texts, tokenisation=tokenisation)
    screened = found.s_r >= CANDIDATE_RESEMBLANCE - 1e-12
    pairs = list(zip(found.first[screened].tolist(), found.second[screened].tolist(),
                     strict=True))  # fmt: skip
    s_r = dict(zip(pairs, found.s_r[screened].tolist(), strict=True))
    position = {d.id: i for i, d in enumerate(documents)}
    parent_pairs = {}
    for i, document in enumerate(documents):
        if document.parent is not None:
            j = position[document.parent]
            parent_pairs[(min(i, j), max(i, j))] = document.kind or ""
    wanted = sorted(set(pairs) | {p for p in parent_pairs if kinds.get(p) == LIGHT})
    values = {} if measured is None else measured
    missing = [pair for pair in wanted if pair not in values]
    values.update(zip(missing, _measure_all(texts, missing, jobs, tokenisation), strict=True))
    predicted = {p for p in pairs if values[p] >= DEFAULT_MIN_SIMILARITY - 1e-12}
    true_positives = len(predicted & light)
    false_positives = sum(kinds.get(p, UNRELATED) not in (LIGHT, "between") for p in predicted)
    scored = true_positives + false_positives
    precision = true_positives / scored if scored else 1.0
    recall = true_positives / len(light) if light else 1.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    groups: dict[str, list[tuple[int, int]]] = defaultdict(list)
    for pair, kind in parent_pairs.items():
        if kinds[pair] == LIGHT:
            groups[kind].append(pair)
    by_edit = {}
    for kind, members in sorted(groups.items()):
        by_edit[kind] = {
            "pairs": len(members),
            "recall": sum(p in predicted for p in members) / len(members),
            "s_r_median": float(np.median([s_r.get(p, 0.0) for p in members])),
            "s_l_median": float(np.median([values[p] for p in members])),
        }
    return Scored(len(documents), len(light), sum(k == "between" for k in kinds.values()),
                  len(predicted), true_positives, false_positives, precision, recall, f1,
                  by_edit, time.perf_counter() - started)


# --------------------------------------------------------------------------
# The calibrated radius on each script

RADIUS_THRESHOLDS = (0.5, 0.8)
"""The S_R thresholds whose calibrated radius is checked on each set."""
CALIBRATED_RECALL = 0.99
"""The share of the calibration pairs at or above a threshold that its radius holds."""


def radius_recall(documents: Sequence[Document], profile: str) -> dict[str, dict[str, Any]]:
    """For each of :data:`RADIUS_THRESHOLDS`: the set's pairs with S_R at least that
    (exact, on the words of ``profile``), and how many of them have fingerprints within
    the radius calibrated for it, the candidates a verified search takes from the
    rotation index.  The radii come from edited English texts (the KJV); this says
    whether they hold on another script."""
    texts = [d.text for d in documents]
    found = candidates(texts, tokenisation=Profile.named(profile).version)
    values = nearsim.simhash_many(texts, profile)
    fingerprints = np.array([0 if v is None else v for v in values], dtype=np.int64)
    distances = popcount(fingerprints[found.first] ^ fingerprints[found.second])
    result = {}
    for threshold in RADIUS_THRESHOLDS:
        radius = radius_for(threshold, profile)
        reaching = found.s_r >= threshold - 1e-12
        within = int((distances[reaching] <= radius).sum())
        pairs = int(reaching.sum())
        result[f"{threshold:g}"] = {"radius": radius, "pairs": pairs, "within": within,
                                    "recall": within / pairs if pairs else 1.0}
    return result


def radius_lines(results: dict[str, Any]) -> list[str]:
    """The table of the calibrated radii on each set, and what it says."""
    radii = results.get("radius")
    if not radii:
        return []
    names = results["names"]
    header = "| set | profile |" + "".join(
        f" S_R >= {t:g}: pairs | within the radius |" for t in RADIUS_THRESHOLDS)
    lines = ["", "The radii calibrated on edited English texts (the King James Bible), on each"
             " set's pairs: of the pairs with S_R at least a threshold (exact, on the words of"
             " the profile), those whose fingerprints lie within the threshold's radius, the"
             " candidates `nearsim_similar_verified` takes from the rotation index (calibrated"
             f" to hold {CALIBRATED_RECALL:.0%} of them):", "", header,
             "|---|---|" + "---:|---:|" * len(RADIUS_THRESHOLDS)]
    short = []
    for code, profiles in radii.items():
        for profile, by_threshold in profiles.items():
            cells = ""
            for threshold in RADIUS_THRESHOLDS:
                row = by_threshold[f"{threshold:g}"]
                cells += (f" {row['pairs']:,} | {row['recall']:.4f} ({row['radius']} bits)"
                          " |")
                if row["recall"] < CALIBRATED_RECALL:
                    short.append(f"{names[code]} ({profile}) at {threshold:g}:"
                                 f" {row['recall']:.4f}")
            lines.append(f"| {names[code]} | {profile} |{cells}")
    holding = []
    for code, profiles in radii.items():
        recalls = [row["recall"] for row in profiles.get("default/2", {}).values()]
        if recalls and min(recalls) >= CALIBRATED_RECALL:
            holding.append(f"{names[code]} ({' and '.join(f'{r:.4f}' for r in recalls)})")
    lines += ["", "Every radius holds at least its calibrated share on every set." if not short
              else "Below the calibrated share: " + "; ".join(short) + "."]
    if short and holding:
        lines[-1] += (" With default/2, which GUIDE tells users of Thai, Lao, Khmer and Burmese"
                      " text to enable with, the radii hold on the pairs of "
                      + ", ".join(holding) + ": its calibration, taken over from default/1's,"
                      " holds for that text too.")
    return lines


# --------------------------------------------------------------------------
# Speed


@dataclass(frozen=True)
class Texts:
    name: str
    texts: list[str]
    profile: str = "default/1"

    @property
    def nbytes(self) -> int:
        return sum(len(t.encode("utf-8")) for t in self.texts)


def _token_count(texts: Texts) -> int:
    """The tokens of the texts, with their profile's tokenisation."""
    version = Profile.named(texts.profile).version
    return sum(sum(1 for _ in tokens(text, version)) for text in texts.texts)


def client_speed(sets: Sequence[Texts], repeat: int = SPEED_REPEAT) -> dict[str, float]:
    """MB/s of ``nearsim.simhash`` (with each set's profile) over each set's texts in this
    process (best of ``repeat``)."""
    result = {}
    for texts in sets:
        for text in texts.texts:  # warm-up
            nearsim.simhash(text, texts.profile)

        def run(items: list[str] = texts.texts, profile: str = texts.profile) -> None:
            for text in items:
                nearsim.simhash(text, profile)

        result[texts.name] = texts.nbytes / MB / min(best_of(repeat, run))
    return result


def server_speed(dsn: str, sets: Sequence[Texts],
                 repeat: int = SPEED_REPEAT) -> dict[str, float]:  # fmt: skip
    """MB/s of the server's ``simhash(text)`` (``simhash(text, 'default/2')`` for a set of
    that profile, also C) over each set's texts in one backend, after a check that it
    gives the client's fingerprints (best of ``repeat``)."""
    schema = f"nearsim_languages_{secrets.token_hex(4)}"
    result = {}
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("CREATE EXTENSION IF NOT EXISTS nearsim CASCADE")
        conn.execute("SET max_parallel_workers_per_gather = 0")
        conn.execute("SET jit = off")
        conn.execute(sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(schema)))
        try:
            for number, texts in enumerate(sets):
                table = sql.Identifier(schema, f"set_{number}")
                conn.execute(sql.SQL("CREATE UNLOGGED TABLE {} (id int PRIMARY KEY,"
                                     " body text NOT NULL)").format(table))
                with conn.cursor() as cursor, cursor.copy(
                        sql.SQL("COPY {} (id, body) FROM STDIN").format(table)) as copy:
                    for key, text in enumerate(texts.texts):
                        copy.write_row((key, text))
                conn.execute(sql.SQL("VACUUM ANALYZE {}").format(table))
                fingerprint = (sql.SQL("simhash(body)") if texts.profile == "default/1" else
                               sql.SQL("simhash(body, {})").format(texts.profile))
                query = sql.SQL("SELECT count(*), sum({}) FROM {}").format(fingerprint, table)
                row = conn.execute(query).fetchone()
                expected = sum(p or 0 for p in nearsim.simhash_many(texts.texts, texts.profile))
                if row is None or int(row[1] or 0) != expected:
                    raise RuntimeError(f"{texts.name}: the server's fingerprints are not the"
                                       " client's")

                def run(statement: sql.Composed = query) -> None:
                    conn.execute(statement).fetchone()

                result[texts.name] = texts.nbytes / MB / min(best_of(repeat, run))
        finally:
            conn.execute(sql.SQL("DROP SCHEMA {} CASCADE").format(sql.Identifier(schema)))
    return result


# --------------------------------------------------------------------------
# The run


def build_sets(originals: int, documents: int, languages: Sequence[str],
               seed: int) -> tuple[dict[str, list[Document]], dict[str, str]]:  # fmt: skip
    """The English set and each language's, by code; and their names."""
    sets = {"en": english_set(originals, documents, seed)}
    for code in languages:
        log(f"building the {LANGUAGES[code].name} set")
        sets[code] = language_corpus(LANGUAGES[code], originals, documents, seed)
    return sets, {"en": "English", **{code: LANGUAGES[code].name for code in languages}}


def words_differ(sets: dict[str, list[Document]]) -> set[str]:
    """The codes of the sets whose texts tokenisation 2 gives other words than
    tokenisation 1 (some text has letters it cuts); under profile default/2 the other
    sets have the same words, so the same pairs."""
    return {code for code, documents in sets.items()
            if any(list(tokens(d.text)) != list(tokens(d.text, 2)) for d in documents)}


def radii(sets: dict[str, list[Document]], names: dict[str, str],
          differ: Collection[str]) -> dict[str, Any]:  # fmt: skip
    """:func:`radius_recall` of each set with default/1, and with default/2 for the sets
    whose words differ under it (``differ``, by code)."""
    result: dict[str, dict[str, Any]] = {}
    for code, documents_of in sets.items():
        log(f"{names[code]}: the calibrated radii")
        result[code] = {"default/1": radius_recall(documents_of, "default/1")}
        if code in differ:
            result[code]["default/2"] = radius_recall(documents_of, "default/2")
    return result


def evaluate(originals: int, documents: int, jobs: int, dsn: str | None,
             languages: Sequence[str] = tuple(LANGUAGES), seed: int = SEED,
             repeat: int = SPEED_REPEAT) -> dict[str, Any]:
    """Every number of the section."""
    started = time.perf_counter()
    sets, names = build_sets(originals, documents, languages, seed)
    quality, by_tokens = {}, {}
    for code, documents_of in sets.items():
        log(f"{names[code]}: {len(documents_of)} documents, scoring")
        measured: dict[tuple[int, int], float] = {}
        quality[code] = score_set(documents_of, jobs, measured=measured).as_json()
        by_tokens[code] = score_set(in_tokens(documents_of), jobs,
                                    measured=measured).as_json()
        log(f"{names[code]}: F1 {quality[code]['f1']:.3f}, with edit sizes in tokens"
            f" {by_tokens[code]['f1']:.3f}")
    version_2: dict[str, Any] = {}
    differ = words_differ(sets)
    for code, documents_of in sets.items():
        same = code not in differ
        log(f"{names[code]}: profile default/2" + (" (the same words)" if same else ""))
        version_2[code] = (quality[code] if same
                           else score_set(documents_of, jobs, tokenisation=2).as_json())
    radius = radii(sets, names, differ)
    speed_sets = [Texts("English (KJV, ASCII)", [c.text for c in kjv_chapters()])]
    speed_sets += [Texts(names[code], [d.text for d in sets[code] if d.origin is None])
                   for code in languages]
    speed_sets += [Texts(f"{names[code]}, default/2", [d.text for d in sets[code]
                                                      if d.origin is None], "default/2")
                   for code in languages if version_2[code] is not quality[code]]
    log("client speed")
    load = [os.getloadavg()[0]]
    client = client_speed(speed_sets, repeat)
    server = None
    if dsn:
        log("server speed")
        server = server_speed(dsn, speed_sets, repeat)
    load.append(os.getloadavg()[0])
    return {
        "originals": originals, "documents": documents, "seed": seed, "jobs": jobs,
        "measure": DEFAULT_MEASURE, "min_similarity": DEFAULT_MIN_SIMILARITY,
        "candidate_resemblance": CANDIDATE_RESEMBLANCE, "tolerance": F1_TOLERANCE,
        "names": names,
        "sets": {code: {"documents": len(d), "hash": fingerprint_of_set(d),
                        "characters": sum(len(x.text) for x in d if x.origin is None),
                        "tokens": sum(sum(1 for _ in tokens(x.text))
                                      for x in d if x.origin is None)}
                 for code, d in sets.items()},
        "quality": quality, "quality_by_tokens": by_tokens, "version_2": version_2,
        "radius": radius,
        "repeat": repeat,
        "speed": {"texts": {t.name: {"documents": len(t.texts), "bytes": t.nbytes,
                                     "tokens": _token_count(t)} for t in speed_sets},
                  "client": client, "server": server, "python": platform.python_version(),
                  "cores": os.cpu_count(), "load": load},
        "seconds": time.perf_counter() - started,
    }


# --------------------------------------------------------------------------
# Markdown


def _characters_per_token(results: dict[str, Any], code: str) -> str:
    counts = results["sets"].get(code)
    return f"{counts['characters'] / counts['tokens']:.0f}" if counts else "?"


def findings(results: dict[str, Any]) -> list[str]:
    """What the F1 tables say, a language at a time."""
    names, tolerance = results["names"], results["tolerance"]
    english = results["quality"]["en"]["f1"]
    english_tokens = results["quality_by_tokens"]["en"]["f1"]
    lines = []
    for code, scored in results["quality"].items():
        if code == "en":
            continue
        by_characters = scored["f1"] - english
        by_tokens = results["quality_by_tokens"][code]["f1"] - english_tokens
        line = f"* {names[code]}: F1 {by_characters:+.3f} against English"
        if by_characters >= -tolerance:
            line += f", within {tolerance}."
        elif by_tokens >= -tolerance:
            line += (f"; with edit sizes in tokens {by_tokens:+.3f}, within {tolerance}: the"
                     " miss is in how much text an edit is, not in what the search finds"
                     " (below).")
        else:
            line += f", and {by_tokens:+.3f} with edit sizes in tokens: a miss."
        version_2 = results["version_2"][code]["f1"] - results["version_2"]["en"]["f1"]
        line += (f" With profile default/2: F1 {results['version_2'][code]['f1']:.3f},"
                 f" {version_2:+.3f} against English"
                 + (f", within {tolerance}." if version_2 >= -tolerance else ": a miss."))
        lines.append(line)
    return [
        *lines,
        "",
        "S_L and S_R count tokens, and the edits' sizes are counted in characters. A Chinese or"
        " Japanese character is a token, an English word and its space five or six characters;"
        " spaces, punctuation and the layout of manual pages are characters but no tokens. So"
        " in Chinese and Japanese texts, and more where they mix with English (the manual"
        " pages), an insertion, a deletion or a block of boilerplate of 10 % of the characters"
        " can be 15 to 25 % of the tokens, and S_L falls below the threshold for a pair that"
        " is light by characters. Khmer (like Thai, Lao and Burmese) is another matter: its"
        " words are not separated, so a token is a whole phrase between spaces (about"
        f" {_characters_per_token(results, 'km')} characters here),"
        " a typo or an added space changes the whole phrase and the three phrases of each"
        " shingle around it, and a reply or header line glued to a phrase changes it too."
        " Profile default/2 cuts its letters one to a word with their marks, as ideographs and"
        " hiragana are cut, and Khmer scores as English does (the table above): a table of"
        " Thai, Lao, Khmer or Burmese text is enabled with profile => 'default/2'.",
    ]


def _load(speed: dict[str, Any]) -> str:
    """The machine's load while the speed was measured, when it was recorded."""
    if "load" not in speed:
        return ""
    low, high = sorted(speed["load"])
    return (f" (load average {low:.1f} to {high:.1f} on {speed['cores']} cores: other work"
            " ran meanwhile, the ratios matter more than the MB/s)" if high >= 1.5 else "")


def markdown(results: dict[str, Any], command: str = "") -> str:
    names = results["names"]
    quality = results["quality"]
    english = quality["en"]["f1"]
    lines = [
        f"Each set: {results['originals']} originals drawn at random, edited copies up to"
        f" {results['documents']} documents, with the edits of the English evaluation corpus"
        " (benchmarks/langcorpus.py says how each is made for a script without spaces)."
        " Scored as the defaults are: positives are the light pairs (at most 15 % of the"
        " text changed), predicted the pairs the client's verified pairs return with its"
        f" defaults (S_R >= {results['candidate_resemblance']}, then"
        f" {results['measure'].upper()} >= {results['min_similarity']}).",
    ]
    if command:
        lines += ["", f"    {command}"]
    lines += ["", "| set | documents | light pairs | predicted | precision | recall | F1 |"
              " F1 - English |", "|---|---:|---:|---:|---:|---:|---:|---:|"]
    for code, scored in quality.items():
        difference = scored["f1"] - english
        mark = "" if code == "en" else (
            f"{difference:+.3f}" + ("" if difference >= -results["tolerance"] else " (missed)"))
        lines.append(f"| {names[code]} | {scored['documents']:,} | {scored['light']:,} |"
                     f" {scored['predicted']:,} | {scored['precision']:.3f} |"
                     f" {scored['recall']:.3f} | {scored['f1']:.3f} | {mark} |")
    tokens_english = results["quality_by_tokens"]["en"]["f1"]
    lines += ["", "The same pairs scored with each edit's size counted in tokens (the share of"
              " the tokens it adds or removes) instead of characters, which decides which"
              " pairs are light:", "",
              "| set | light pairs | precision | recall | F1 | F1 - English |",
              "|---|---:|---:|---:|---:|---:|"]
    for code, scored in results["quality_by_tokens"].items():
        difference = scored["f1"] - tokens_english
        mark = "" if code == "en" else f"{difference:+.3f}"
        lines.append(f"| {names[code]} | {scored['light']:,} | {scored['precision']:.3f} |"
                     f" {scored['recall']:.3f} | {scored['f1']:.3f} | {mark} |")
    kinds = sorted({k for s in quality.values() for k in s["by_edit"]})
    lines += ["", "Recall of each light copy against its parent, by edit (median S_L of"
              " those pairs in brackets):", "",
              "| edit | " + " | ".join(names[c] for c in quality) + " |",
              "|---|" + "---:|" * len(quality)]
    for kind in kinds:
        cells = []
        for scored in quality.values():
            row = scored["by_edit"].get(kind)
            cells.append(f"{row['recall']:.3f} ({row['s_l_median']:.2f})" if row else "")
        lines.append(f"| {kind} | " + " | ".join(cells) + " |")
    version_2 = results["version_2"]
    lines += ["", "The same sets with the words of profile default/2 (tokenisation 2: each letter"
              " of Thai, Lao, Myanmar, Khmer... a word with its marks; the other scripts' words"
              " are those above):", "",
              "| set | predicted | precision | recall | F1 | F1 - English |",
              "|---|---:|---:|---:|---:|---:|"]
    for code, scored in version_2.items():
        difference = scored["f1"] - version_2["en"]["f1"]
        mark = "" if code == "en" else (
            f"{difference:+.3f}" + ("" if difference >= -results["tolerance"] else " (missed)"))
        lines.append(f"| {names[code]} | {scored['predicted']:,} | {scored['precision']:.3f} |"
                     f" {scored['recall']:.3f} | {scored['f1']:.3f} | {mark} |")
    lines += ["", *findings(results)]
    lines += radius_lines(results)
    speed = results["speed"]
    baseline = next(iter(speed["client"]))
    lines += ["", f"Fingerprint speed over each set's originals (MB = 10^6 bytes of UTF-8; best"
              f" of {results.get('repeat', SPEED_REPEAT)} passes), against {baseline} in the"
              " same run; the client in"
              f" one Python {speed['python']} process, the server's `simhash(text)` in one"
              " backend" + _load(speed) + ":", "",
              "| texts | documents | MB | tokens per KB | client MB/s | vs English | server MB/s |"
              " vs English |", "|---|---:|---:|---:|---:|---:|---:|---:|"]
    for name, size in speed["texts"].items():
        client = speed["client"][name]
        server = speed["server"][name] if speed["server"] else None
        server_cells = (f"{server:.1f} | {server / speed['server'][baseline]:.2f}" if server
                        else "not measured (no --dsn) |")
        lines.append(f"| {name} | {size['documents']:,} | {size['bytes'] / MB:.2f} |"
                     f" {1000 * size['tokens'] / size['bytes']:.0f} | {client:.1f} |"
                     f" {client / speed['client'][baseline]:.2f} |"
                     f" {server_cells} |")
    return "\n".join(lines) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dsn", help="a database with nearsim, for the server's speed")
    parser.add_argument("--originals", type=int, default=400)
    parser.add_argument("--documents", type=int, default=1200)
    parser.add_argument("--jobs", type=int, default=1)
    parser.add_argument("--repeat", type=int, default=SPEED_REPEAT,
                        help=f"timed passes of each speed measurement (default {SPEED_REPEAT})")
    parser.add_argument("--languages", nargs="+", choices=sorted(LANGUAGES),
                        default=list(LANGUAGES))
    parser.add_argument("--output-dir", type=Path, default=DEFAULT_OUTPUT)
    parser.add_argument("--radii-only", action="store_true",
                        help="only check the calibrated radii on each set, and print them")
    args = parser.parse_args(argv)
    if args.radii_only:
        sets, names = build_sets(args.originals, args.documents, args.languages, SEED)
        differ = words_differ(sets)
        print("\n".join(radius_lines({"names": names, "radius": radii(sets, names, differ)})))
        return 0
    try:
        results = evaluate(args.originals, args.documents, args.jobs, args.dsn, args.languages,
                           repeat=args.repeat)
    except RuntimeError as error:  # a database error ends the run through run_main
        print(f"benchmarks.languages: {error}", file=sys.stderr)
        return 1
    command = (f".venv/bin/python -m benchmarks.languages --originals {args.originals}"
               f" --documents {args.documents} --jobs {args.jobs} --repeat {args.repeat}"
               + (" --dsn DSN" if args.dsn else ""))
    if (args.originals, args.documents, args.jobs, args.repeat) == (400, 1200, 2, 7) and args.dsn:
        command += "   # make bench-languages"
    args.output_dir.mkdir(parents=True, exist_ok=True)
    (args.output_dir / "languages.json").write_text(json.dumps(results, indent=1))
    page = markdown(results, command)
    (args.output_dir / "languages.md").write_text(page)
    print(page)
    return 0


if __name__ == "__main__":
    sys.exit(run_main(main))
