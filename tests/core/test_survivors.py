"""The survivor policy both routes of nearsim dedup rank a group by."""

from __future__ import annotations

import pytest

from nearsim.core.survivors import Keep, KeepError, SortTerm, survivor


def test_policies_parse_and_print_back() -> None:
    for value in ("first", "longest", "newest:fetched", "newest:a:b c"):
        assert str(Keep.parse(value)) == value
    assert Keep.parse("newest:a:b c").field == "a:b c"


@pytest.mark.parametrize("value", ["", "last", "newest", "newest:", "First"])
def test_an_unknown_policy_is_refused_naming_the_policies(value: str) -> None:
    with pytest.raises(KeepError, match="use first, longest or newest:FIELD"):
        Keep.parse(value)


def test_every_policy_ends_with_the_key_ascending() -> None:
    for value in ("first", "longest", "newest:x"):
        assert Keep.parse(value).terms()[-1] == SortTerm("key", False)


def test_first_is_the_smallest_key_by_type() -> None:
    records = [{"id": 10, "text": "a"}, {"id": 9, "text": "b"}]
    assert survivor(Keep(), records, "id", "text")["id"] == 9
    assert survivor(Keep(), [{"id": "10"}, {"id": "9"}], "id", "text")["id"] == "10"


def test_longest_counts_characters_and_breaks_ties_by_key() -> None:
    records = [{"id": 3, "text": "ééé"}, {"id": 2, "text": "abc"}, {"id": 1, "text": None}]
    assert survivor(Keep.parse("longest"), records, "id", "text")["id"] == 2


def test_newest_puts_missing_and_null_values_last() -> None:
    records = [{"id": 1}, {"id": 2, "at": None}, {"id": 3, "at": "2024-01-01"},
               {"id": 4, "at": "2023-12-31"}]
    assert survivor(Keep.parse("newest:at"), records, "id", "text")["id"] == 3
    assert survivor(Keep.parse("newest:at"), records[:2], "id", "text")["id"] == 1


def test_newest_compares_numbers_as_numbers_and_ties_by_key() -> None:
    records = [{"id": "b", "n": 10}, {"id": "a", "n": 9}, {"id": "c", "n": 10}]
    assert survivor(Keep.parse("newest:n"), records, "id", "text")["id"] == "b"
