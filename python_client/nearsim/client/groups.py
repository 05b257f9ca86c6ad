"""Groups of near-duplicates by number, as ``nearsim clusters`` prints them, or by member.

``nearsim clusters`` numbers the groups from 1, largest first (ties in the
order the server gives them); ``nearsim report --cluster`` takes that
number, or a member: the key of a stored document, or a file, found as the
loader keys files (:meth:`~nearsim.client.documents.DocumentTable.key_of_file`).
Both number the same stream of groups with :func:`numbered`, so that the
same table and options give the same numbers.  A smaller ``min_size`` only
adds groups at the end (the groups come largest first): the numbers of the
others stay.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from .documents import Cluster, DocumentTable
from .sources import file_key

__all__ = ["ChosenGroup", "GroupNotFound", "NumberedGroup", "choose_group", "numbered"]


class GroupNotFound(LookupError):
    """No group is the one asked for; the message says why, in one line."""


@dataclass(frozen=True)
class NumberedGroup:
    number: int  # from 1, largest first, as nearsim clusters prints it
    cluster: Cluster


def numbered(groups: Iterable[Cluster]) -> Iterator[NumberedGroup]:
    """The groups with the numbers ``nearsim clusters`` prints (they come largest first)."""
    for number, cluster in enumerate(groups, 1):
        yield NumberedGroup(number, cluster)


@dataclass(frozen=True)
class ChosenGroup:
    group: NumberedGroup
    warning: str | None  # what the other reading of an ambiguous value would have given


_NUMBER = re.compile(r"[0-9]+")


def choose_group(documents: DocumentTable, groups: Iterable[Cluster], wanted: str,
                 search: str) -> ChosenGroup:  # fmt: skip
    """The group ``wanted`` names among ``groups``: by its number, or by a member.

    ``wanted`` is a number as ``nearsim clusters`` prints it, or a member: the
    key of a stored document, or a file named as the loader keys files
    (relative to the current directory, or by any other path to the file
    that was loaded).  A number that is also a member's key (a
    table keyed by integers) is taken as the number, which always works;
    the warning then says which group holds the document of that key.
    ``search`` describes the search the groups come from, for the messages.
    """
    number = int(wanted) if _NUMBER.fullmatch(wanted) and int(wanted) > 0 else None
    key = wanted if documents.has_document(wanted) else documents.key_of_file(wanted)
    within = f"of near-duplicates ({search}) in {documents}"
    if number is None and key is None:  # before the groups are computed
        if os.path.isfile(wanted):
            raise GroupNotFound(f"{wanted} is a file that was not loaded into {documents}: no"
                                f" document has the key {file_key(wanted)} or another path"
                                " to it")
        raise GroupNotFound(f"{wanted} is neither the number of a group {within} nor a file or"
                            " the key of a document")
    by_number = by_key = None
    count = 0
    for group in numbered(groups):
        count = group.number
        if group.number == number:
            by_number = group
        if key is not None and by_key is None and key in group.cluster.members:
            by_key = group
        if (number is None or by_number) and (key is None or by_key):
            break  # the groups after it are not needed
    if by_number is not None:
        warning = None
        if key is not None and by_key is not by_number:
            where = "in no group" if by_key is None else f"in group {by_key.number}"
            warning = (f"{wanted} is taken as the number of group {number}; the document"
                       f" {key} is {where}")
        return ChosenGroup(by_number, warning)
    if by_key is not None:
        return ChosenGroup(by_key, None)
    if key is not None:
        raise GroupNotFound(f"{key} is in no group {within}")
    raise GroupNotFound(f"there is no group {number}: {count} group{'' if count == 1 else 's'}"
                        f" {within}, and no document has the key {wanted}")
