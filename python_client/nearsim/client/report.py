"""A self-contained HTML page: documents side by side, their common passages marked.

Seed 001's advice for review sets: keep near-duplicates together and show
them side by side with the shared text highlighted, so that a reviewer reads
each passage once.  The passages are the literal chunks of
:func:`nearsim.measures.compare` (runs of at least 5 words, one-to-one), so
the page shows exactly what S_L and S_J counted.

The page has no scripts and no external resources: it can be mailed,
archived or opened offline.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from html import escape

from ..core import fingerprint, measures
from ..core.bits import hamming
from ..core.text import separated, tokens

_COLOURS = 6  # passages cycle through this many highlight colours


@dataclass(frozen=True)
class Document:
    name: str
    text: str


def token_spans(text: str) -> list[tuple[int, int]] | None:
    """Character spans in ``text`` of the tokens of :func:`nearsim.core.text.tokens`.

    Each character is classified as the fingerprint would classify it; the
    spans are then checked against the real tokens.  None when they differ
    (normalisation that joins or splits characters across a token boundary,
    which is rare): the page then shows the text without marks rather than
    marks in the wrong place.
    """
    spans: list[tuple[int, int]] = []
    start: int | None = None
    for index, character in enumerate(text):
        mapped = separated(character)
        if not mapped:
            continue  # ignorable: does not end a word
        if mapped.isspace():
            if start is not None:
                spans.append((start, index))
                start = None
        elif mapped.startswith(" "):  # a character that is a token of its own
            if start is not None:
                spans.append((start, index))
                start = None
            spans.append((index, index + 1))
        elif start is None:
            start = index
    if start is not None:
        spans.append((start, len(text)))
    found = [
        separated(text[s:e]).strip()
        for s, e in spans
    ]
    return spans if found == list(tokens(text)) else None


def _marked(text: str, runs: Sequence[tuple[int, int, int]]) -> str:
    """``text`` as HTML with each run ``(first token, tokens, passage)`` in a <mark>."""
    spans = token_spans(text)
    if spans is None or not runs:
        return escape(text)
    parts: list[str] = []
    done = 0
    for first, length, passage in sorted(runs):
        start, end = spans[first][0], spans[first + length - 1][1]
        parts.append(escape(text[done:start]))
        parts.append(f'<mark class="p{passage % _COLOURS}" title="passage {passage + 1},'
                     f' {length} words">{escape(text[start:end])}</mark>')  # fmt: skip
        done = end
    parts.append(escape(text[done:]))
    return "".join(parts)


def _copies_html(names: Sequence[str]) -> str:
    """The names of further documents with the same text, shown once above it."""
    if not names:
        return ""
    listed = "".join(f"<li>{escape(name)}</li>" for name in names)
    return (f'<details class="copies"><summary>and {len(names):,} identical'
            f" cop{'y' if len(names) == 1 else 'ies'}</summary><ul>{listed}</ul></details>")


def _identical_html(reference: Document, names: Sequence[str]) -> str:
    """One section for the documents whose text is the reference's, named only."""
    count = f"{len(names):,} identical cop{'y' if len(names) == 1 else 'ies'}"
    listed = "".join(f"<li>{escape(name)}</li>" for name in names)
    return (f"<section><h2>{count} of {escape(reference.name)}</h2>"
            f'<p class="legend">The same text, character for character; not repeated.</p>'
            f"<ul>{listed}</ul></section>")


def _comparison_html(reference: Document, other: Document, copies: Sequence[str] = ()) -> str:
    """One section: the measures, then the two texts in columns."""
    result = measures.compare(reference.text, other.text)
    left = [(c.start_a, c.length, n) for n, c in enumerate(result.chunks)]
    right = [(c.start_b, c.length, n) for n, c in enumerate(result.chunks)]
    a_fp, b_fp = fingerprint.simhash(reference.text), fingerprint.simhash(other.text)
    distance = "-" if a_fp is None or b_fp is None else str(hamming(a_fp, b_fp))
    facts = (
        ("Hamming distance", distance),
        ("S_L", f"{result.s_l:.1%}"), ("S_J", f"{result.s_j:.1%}"),
        ("S_R", f"{result.s_r:.1%}"), ("containment", f"{result.containment:.1%}"),
        ("common words", f"{result.common:,} of {result.longer:,} and {result.shorter:,}"),
        ("passages", f"{len(result.chunks):,}"),
    )  # fmt: skip
    rows = "".join(f"<tr><th>{name}</th><td>{value}</td></tr>" for name, value in facts)
    return (
        f'<section><table class="facts">{rows}</table><div class="pair">'
        f'<div class="doc"><h2>{escape(reference.name)}</h2>'
        f"<pre>{_marked(reference.text, left)}</pre></div>"
        f'<div class="doc"><h2>{escape(other.name)}</h2>{_copies_html(copies)}'
        f"<pre>{_marked(other.text, right)}</pre></div></div></section>"
    )


_STYLE = """
body { font: 15px/1.45 "DejaVu Sans", sans-serif; margin: 1.5em; color: #222; }
h1 { font-size: 1.3em; } h2 { font-size: 1em; margin: 0 0 .4em; word-break: break-all; }
section { border-top: 2px solid #888; padding-top: 1em; margin-top: 1.5em; }
.pair { display: grid; grid-template-columns: 1fr 1fr; gap: 1.5em; }
.doc pre { white-space: pre-wrap; font: inherit; margin: 0; }
.facts th { text-align: left; padding-right: 1em; font-weight: normal; color: #555; }
.legend { color: #555; } .copies { margin: 0 0 .4em; color: #555; }
mark.p0 { background: #ffe680; } mark.p1 { background: #b3e6ff; }
mark.p2 { background: #c6f0c2; } mark.p3 { background: #ffc8d8; }
mark.p4 { background: #e0ccff; } mark.p5 { background: #ffd9b3; }
"""


def report(reference: Document, others: Sequence[Document], title: str | None = None) -> str:
    """The page comparing ``reference`` with each of ``others`` (a cluster: its pivot first)."""
    heading = title or (f"{reference.name} and {others[0].name}" if len(others) == 1
                        else f"{reference.name} and {len(others)} near-duplicates")  # fmt: skip
    # Identical texts (a review set's many copies of one file) are shown
    # once: those of the reference in a list, the others' beside it once.
    by_text: dict[str, list[Document]] = {}
    for other in others:
        by_text.setdefault(other.text, []).append(other)
    sections = "".join(
        _identical_html(reference, [copy.name for copy in same]) if text == reference.text
        else _comparison_html(reference, same[0], [copy.name for copy in same[1:]])
        for text, same in by_text.items()
    )
    return (
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
        f"<title>{escape(heading)}</title><style>{_STYLE}</style></head><body>"
        f"<h1>{escape(heading)}</h1>"
        '<p class="legend">Marked: passages of at least 5 words that both texts contain'
        " (matched one to one); each passage has its own colour on both sides. S_L: share of"
        " the longer text found in the shorter; S_J: common words over all words; S_R:"
        " Jaccard of the 3-word shingles.</p>"
        f"{sections}</body></html>\n"
    )
