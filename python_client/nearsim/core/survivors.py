"""Which document of a group of near-duplicates survives a dedup: the ``--keep`` policy.

Both routes of ``nearsim dedup`` (PostgreSQL: :mod:`nearsim.client.dedup`;
Spark: :mod:`nearsim.spark.survivors`) rank a group's members by the same
terms, which :meth:`Keep.terms` lists, and keep the first:

- ``first``: the smallest key;
- ``longest``: the longest text (in characters), ties by the smallest key;
- ``newest:FIELD``: the largest value of FIELD, ties by the smallest key.

Values compare by type: numbers as numbers, strings by code point (so ISO
dates and times compare in time order), false before true; a missing or
NULL value (or text) comes last.  Every policy ends with the key, so the
survivor is one document, whatever order the rows come in.

:func:`survivor` is the reference: the same choice over Python values, as
the routes' tests check them.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

__all__ = ["KEEP_POLICIES", "Keep", "KeepError", "SortTerm", "ranking", "survivor"]

KEEP_POLICIES = ("first", "longest", "newest:FIELD")


class KeepError(ValueError):
    """A ``--keep`` value that names no policy; the message says which there are."""


@dataclass(frozen=True)
class SortTerm:
    """One term of a ranking: ``what`` is ``"key"``, ``"length"`` (of the text) or
    ``"field"`` (the value of :attr:`Keep.field`); the largest first if ``descending``.
    A NULL is always last."""

    what: Literal["key", "length", "field"]
    descending: bool


@dataclass(frozen=True)
class Keep:
    """A survivor policy: ``first``, ``longest`` or ``newest`` (with ``field``)."""

    policy: Literal["first", "longest", "newest"] = "first"
    field: str | None = None

    @classmethod
    def parse(cls, value: str) -> Keep:
        """``first``, ``longest`` or ``newest:FIELD`` (FIELD as the record or column names it).

        >>> Keep.parse("newest:fetched")
        Keep(policy='newest', field='fetched')
        """
        if value in ("first", "longest"):
            return cls(value)  # type: ignore[arg-type]
        match = re.fullmatch(r"newest:(.+)", value, re.DOTALL)
        if match is None:
            raise KeepError(f"unknown survivor policy {value!r}: use first, longest or"
                            " newest:FIELD")  # fmt: skip
        return cls("newest", match[1])

    def __str__(self) -> str:
        return self.policy if self.field is None else f"{self.policy}:{self.field}"

    def terms(self) -> tuple[SortTerm, ...]:
        """The ranking, best first; the last term is always the key, ascending."""
        key = SortTerm("key", False)
        if self.policy == "longest":
            return (SortTerm("length", True), key)
        if self.policy == "newest":
            return (SortTerm("field", True), key)
        return (key,)


# -- the reference ---------------------------------------------------------------------


def _typed(value: Any) -> tuple[int, Any]:
    """A value in an order across types: booleans, then numbers, then strings, then
    anything else by its text; the rank is only to make mixed values comparable."""
    if isinstance(value, bool):
        return (0, value)
    if isinstance(value, (int, float)):
        return (1, value)
    if isinstance(value, str):
        return (2, value)  # Python compares str by code point
    return (3, repr(value))


def ranking(keep: Keep, key: Callable[[Any], Any], text: Callable[[Any], str | None],
            field: Callable[[Any], Any]) -> Callable[[Any], tuple[Any, ...]]:  # fmt: skip
    """A sort key for documents (whatever they are: ``key``, ``text`` and ``field``
    read them) that puts the survivor first."""

    def rank(document: Any) -> tuple[Any, ...]:
        parts: list[Any] = []
        for term in keep.terms():
            if term.what == "key":
                value: Any = key(document)
            elif term.what == "length":
                found = text(document)
                value = None if found is None else len(found)
            else:
                value = field(document)
            if value is None:
                parts.append((1,))  # NULLs last, whichever the direction
                continue
            typed = _typed(value)
            if term.descending:
                parts.append((0, _Reversed(typed)))
            else:
                parts.append((0, typed))
        return tuple(parts)

    return rank


class _Reversed:
    """A value that sorts in the opposite order."""

    __slots__ = ("value",)

    def __init__(self, value: Any) -> None:
        self.value = value

    def __lt__(self, other: _Reversed) -> bool:
        return bool(other.value < self.value)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _Reversed) and bool(self.value == other.value)

    def __hash__(self) -> int:
        return hash(self.value)


def survivor(keep: Keep, records: Iterable[Mapping[str, Any]], key_field: str,
             text_field: str) -> Mapping[str, Any]:  # fmt: skip
    """The record of a group that ``keep`` keeps (records as dicts; a missing field is NULL).

    >>> survivor(Keep.parse("longest"), [{"id": 2, "text": "ab"}, {"id": 1, "text": "a"}],
    ...          "id", "text")["id"]
    2
    """
    rank = ranking(keep, lambda r: r.get(key_field), lambda r: r.get(text_field),
                   lambda r: r.get(keep.field) if keep.field is not None else None)
    return min(records, key=rank)
