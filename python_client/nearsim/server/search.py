"""Verified search, pairs and groups: what the C routes leave to PL/Python.

All pairs and groups within a distance are C (``nearsim_pairs`` and
``nearsim_clusters``, src/pairs.c), and so is verified search by S_R and
containment under the default profile (src/verified.c).  Here: the other
measures and profiles, whose candidates come from those C routes (the pairs
of ``nearsim_pairs`` within the radius, or the rotation index for one
query) and are kept when their exact measure of the texts passes
(:mod:`nearsim.core.measures`).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from itertools import islice
from typing import Any

import numpy as np

from ..core import calibration, measures, profiles
from ..core.bits import BITS
from ..core.groups import connected_components, pivot_groups
from ..core.interrupts import checkpoint
from . import bucket_tables
from .catalog import Enabled, check_table_profile, lookup, simhash_sql
from .database import Session

METHODS = ("components", "pivot")


def check_distance(session: Session, max_distance: int) -> None:
    if not 0 <= max_distance <= BITS:
        session.fail(f"max_distance must be between 0 and {BITS}, not {max_distance}")


def _check_method(session: Session, method: str, hint: str) -> None:
    session.require(method, "method")
    if method not in METHODS:
        session.fail(f"unknown clustering method {method!r}", hint=hint)


def named_groups(
    keys: list[str], groups: np.ndarray, method: str, min_size: int
) -> Iterator[tuple[str, str, str | None]]:
    """``(key, cluster, pivot)`` of each member of a group of at least ``min_size``.

    ``groups[i]`` is the group (its root or pivot position) of ``keys[i]``.  A
    group is named after its smallest key (keys are in key order), so its id
    does not depend on the order the rows were read in.
    """
    smallest = np.full(len(keys), len(keys), dtype=np.int64)
    np.minimum.at(smallest, groups, np.arange(len(keys), dtype=np.int64))
    sizes = np.bincount(groups, minlength=len(keys))
    return (
        (keys[member], keys[int(smallest[group])], keys[group] if method == "pivot" else None)
        for member, group in enumerate(groups.tolist())
        if sizes[group] >= min_size
    )


def _tokenisation(enabled: Enabled) -> int:
    """The tokenisation of the table's profile: its words for every measure."""
    return profiles.Profile.named(enabled.registration.profile).version


def _verified_radius(session: Session, min_similarity: float, measure: str,
                     max_distance: int | None, profile: str) -> int:
    """Check a verified search's arguments; the radius to take candidates from."""
    session.require(measure, "measure")
    if measure not in measures.VERIFIED_MEASURES:
        session.fail(f"unknown measure {measure!r}",
                     hint=f"Use one of {', '.join(measures.VERIFIED_MEASURES)}.")
    session.require(min_similarity, "min_similarity")
    if not 0 <= min_similarity <= 1:
        session.fail(f"min_similarity must be between 0 and 1, not {min_similarity}")
    if max_distance is not None:
        check_distance(session, max_distance)
        return max_distance
    try:
        return calibration.radius_for(min_similarity, profile)
    except (ValueError, calibration.NotCalibrated) as error:
        session.fail(str(error), hint="Pass max_distance to choose the radius yourself.")


def similar_verified(
    session: Session, tbl: str, query: str | None, min_similarity: float, measure: str,
    max_distance: int | None,
) -> list[tuple[str, int, float, bool]]:
    """``nearsim_similar_verified``: candidates kept if their exact ``measure`` passes.

    The radius comes from the calibration (the distance within which 99% of
    the calibration pairs at least ``min_similarity`` similar fall) unless
    ``max_distance`` is given.  ``short`` marks a pair where either text is
    short (see :data:`nearsim.core.measures.SHORT_SHINGLES`): so few features
    make the fingerprint jumpy, so such documents may be missed at any radius.
    """
    enabled = lookup(session, tbl)
    reg = enabled.registration
    if _by_words(measure, min_similarity, max_distance) and reg.bucket_table is None:
        return [] if query is None else _similar_by_words(session, enabled, query, measure,
                                                           min_similarity)
    radius = _verified_radius(session, min_similarity, measure, max_distance, reg.profile)
    if query is None:
        return []
    if measure in SET_MEASURES and reg.bucket_table is None:
        # The set measures have one route, in C (src/verified.c); it came
        # here for the radius of another profile's calibration.
        rows = session.execute(
            f"SELECT v.key, v.distance, v.similarity, v.short"
            f" FROM {session.ext}.nearsim_similar_verified("
            f"{enabled.table.oid}::pg_catalog.oid::pg_catalog.regclass, $1::pg_catalog.text,"
            " $2::pg_catalog.float8, $3::pg_catalog.text, $4::pg_catalog.int4) AS v",
            query, float(min_similarity), measure, int(radius))
        return [(r["key"], int(r["distance"]), r["similarity"], r["short"]) for r in rows]
    # Other measures, and tables that keep a bucket table from before 0.4.0
    # until nearsim_rebuild (every measure), are measured here.
    if len(query) > measures.MAX_MEASURED_CHARS:
        session.fail(f"the query has {len(query):,} characters, more than the"
                     f" {measures.MAX_MEASURED_CHARS:,} measure {measure} takes", sqlstate="54000",
                     hint="Measures s_r and containment take queries of any length.")
    tokenisation = _tokenisation(enabled)
    asked = measures.Shingled(query, tokenisation)
    _notice_short_query(session, len(asked.shingles))
    rows = session.execute(
        f"SELECT c.key, c.body, c.distance FROM {_candidates(session, enabled, radius)}",
        query, enabled.table.qualified, enabled.registration.hash_column)
    found = []
    for row in rows:
        candidate = measures.Shingled(row["body"] or "", tokenisation)
        value = measures.verified_measure(measure, asked, candidate)
        if value >= min_similarity:
            found.append((row["key"], int(row["distance"]), value,
                          asked.short or candidate.short))  # fmt: skip
    found.sort(key=lambda match: (-match[2], match[1], match[0]))
    return found


def _by_words(measure: str, min_similarity: float | None, max_distance: int | None) -> bool:
    """Whether a verified search by a word measure takes its candidates by S_R.

    From :data:`~nearsim.core.measures.CANDIDATE_RESEMBLANCE` up, without a
    radius given, a word measure (S_L and its kin) measures the documents at
    least that similar by S_R, whatever their distance: the radius calibrated
    for S_R at the threshold misses light edits, which lower S_R about three
    times as much as S_L.  The command line and the library ask these
    functions too: one route, so SQL and the command line agree.
    """
    return (measure in measures.WORD_MEASURES and max_distance is None
            and min_similarity is not None
            and measures.CANDIDATE_RESEMBLANCE <= min_similarity <= 1)  # fmt: skip


def _texts(session: Session, enabled: Enabled, keys: list[str]) -> dict[str, measures.Shingled]:
    """The texts of the rows of these keys (as text) that the caller sees, shingled."""
    key = session.ident(enabled.table.key_column)
    text = session.ident(enabled.registration.text_column)
    key_type = enabled.table.key_type.split(" COLLATE ")[0]
    tokenisation = _tokenisation(enabled)
    texts = {}
    for row in session.execute(
            f"SELECT {key}::text AS key, {text}::text AS body FROM ONLY {enabled.table.qualified}"
            f" WHERE {key} = ANY ($1::pg_catalog.text[]::{key_type}[])", keys):
        texts[row["key"]] = measures.Shingled(row["body"] or "", tokenisation)
        checkpoint()
    return texts


def _similar_by_words(session: Session, enabled: Enabled, query: str, measure: str,
                      min_similarity: float) -> list[tuple[str, int, float, bool]]:
    """The documents at least CANDIDATE_RESEMBLANCE similar to query by S_R (C: the
    sketch index or the calibrated radius), kept when their word measure passes."""
    if len(query) > measures.MAX_MEASURED_CHARS:
        session.fail(f"the query has {len(query):,} characters, more than the"
                     f" {measures.MAX_MEASURED_CHARS:,} measure {measure} takes", sqlstate="54000",
                     hint="Measures s_r and containment take queries of any length.")
    candidates = session.execute(
        f"SELECT v.key, v.distance FROM {session.ext}.nearsim_similar_verified("
        f"{enabled.table.oid}::pg_catalog.oid::pg_catalog.regclass, $1::pg_catalog.text,"
        " $2::pg_catalog.float8, 's_r') AS v", query, measures.CANDIDATE_RESEMBLANCE)
    distances = {row["key"]: int(row["distance"]) for row in candidates}
    asked = measures.Shingled(query, _tokenisation(enabled))
    found = []
    for key, candidate in _texts(session, enabled, sorted(distances)).items():
        value = measures.verified_measure(measure, asked, candidate)
        if value >= min_similarity:
            found.append((key, distances[key], value, asked.short or candidate.short))
    found.sort(key=lambda match: (-match[2], match[1], match[0]))
    return found


def _candidates(session: Session, enabled: Enabled, radius: int) -> str:
    """SQL ``(...) AS c``: key, text and distance of the rows within ``radius`` of the
    query text $1, of the table $2 (its name) by its fingerprint column $3.

    Through the rotation index (``nearsim_search``), read with the caller's
    rights, and never through the table's generated ``<prefix>_similar``:
    those belong to the table's owner, who may replace them, and would run
    the owner's code with the caller's rights.
    """
    reg, table = enabled.registration, enabled.table
    check_table_profile(session, table.qualified, reg.profile)
    ext = session.ext
    key, text = session.ident(table.key_column), session.ident(reg.text_column)
    fp = session.ident(reg.hash_column)
    fingerprint = simhash_sql(session, "$1::pg_catalog.text", reg.profile)
    if reg.bucket_table is None:
        within = (f"d.ctid OPERATOR(pg_catalog.=) ANY ({ext}.nearsim_search("
                  "$2::pg_catalog.regclass, $3::pg_catalog.name, q.si,"
                  f" {int(radius)}::pg_catalog.int4))")
    else:  # a table enabled before 0.4.0, until nearsim_rebuild
        within = bucket_tables.within(session, enabled, radius)
    return (f"(SELECT d.{key}::pg_catalog.text AS key, d.{text}::pg_catalog.text AS body,"
            f" {ext}.hamming(d.{fp}, q.si) AS distance"
            f" FROM (SELECT {fingerprint} AS si) AS q, ONLY {table.qualified} AS d"
            f" WHERE {within}"
            f" AND {ext}.hamming(d.{fp}, q.si) OPERATOR(pg_catalog.<=) {int(radius)}) AS c")


# Measures of shingle sets, computed in C (src/resemblance.c); verified search
# by them is src/verified.c's
SET_MEASURES = {"s_r": "nearsim_resemblance", "containment": "nearsim_containment"}


def _notice_short_query(session: Session, shingles: int) -> None:
    if shingles < measures.SHORT_SHINGLES:
        session.notice(f"the query has {shingles} shingles: a fingerprint of"
                       f" fewer than {measures.SHORT_SHINGLES} is unreliable, near-duplicates"
                       " may be missed")


def pairs_verified(
    session: Session, tbl: str, min_similarity: float, measure: str, max_distance: int | None
) -> Iterable[tuple[str, str, int, float, bool]]:
    """``nearsim_pairs_verified``: pairs within the radius at least ``min_similarity`` similar.

    The texts of the documents in a piece of candidate pairs are read once
    per piece, by key.
    """
    enabled = lookup(session, tbl)
    reg = enabled.registration
    if measure == "s_r" and max_distance is None and min_similarity is not None \
            and 0 < min_similarity <= 1:
        return _resemblance_pairs(session, enabled, min_similarity)
    if _by_words(measure, min_similarity, max_distance):
        # the pairs at least CANDIDATE_RESEMBLANCE similar by S_R, whatever
        # their distance (the exact join, C), measured by words
        return _verified_pieces(
            session, enabled, _resemblance_rows(session, enabled, measures.CANDIDATE_RESEMBLANCE),
            measure, min_similarity)
    radius = _verified_radius(session, min_similarity, measure, max_distance, reg.profile)
    # The candidates: the pairs within the radius, from the C search of
    # nearsim_pairs, read a piece at a time
    candidates = session.rows(
        f"SELECT p.a, p.b, p.distance FROM {session.ext}.nearsim_pairs("
        f"{enabled.table.oid}::pg_catalog.oid::pg_catalog.regclass, $1::pg_catalog.int4) AS p",
        radius, batch=CANDIDATES)
    return _verified_pieces(session, enabled, candidates, measure, min_similarity)


# Candidate pairs measured per read of their texts
CANDIDATES = 100_000


def _verified_pieces(
    session: Session, enabled: Enabled, candidates: Iterator[dict[str, Any]], measure: str,
    min_similarity: float,
) -> Iterator[tuple[str, str, int, float, bool]]:
    """The candidate pairs that pass, a piece of candidates at a time: rows are
    passed on as they are found, never all held.  Each pair of texts is
    measured once a piece: a crawl's copies make many pairs of the same two
    texts."""
    while piece := list(islice(candidates, CANDIDATES)):
        texts = _texts(session, enabled,
                       sorted({*(pair["a"] for pair in piece), *(pair["b"] for pair in piece)}))
        measured: dict[tuple[str, str], float] = {}
        for pair in piece:
            a, b, d = pair["a"], pair["b"], int(pair["distance"])
            if a not in texts or b not in texts:
                continue  # deleted since the fingerprints were read
            both = (texts[a].text, texts[b].text)
            value = measured.get(both)
            if value is None:
                value = measured[both] = measures.verified_measure(measure, texts[a], texts[b])
            if value >= min_similarity:
                yield a, b, d, value, texts[a].short or texts[b].short


def _resemblance_pairs(session: Session, enabled: Enabled,
                       min_similarity: float) -> Iterator[tuple[str, str, int, float, bool]]:
    """Every pair at least ``min_similarity`` similar in S_R, exactly, whatever its distance.

    The set-similarity join of ``nearsim_resemblance_pairs`` (C) reads every
    text once and compares the shingle sets that a prefix filter leaves:
    no candidate radius, so no pair is missed.  Its rows are passed on as
    they are read: a corpus of many copies has millions of pairs.
    """
    rows = _resemblance_rows(session, enabled, min_similarity)
    return ((r["a"], r["b"], r["distance"], r["similarity"], r["short"]) for r in rows)


def _resemblance_rows(session: Session, enabled: Enabled,
                      min_similarity: float) -> Iterator[dict[str, Any]]:
    """The rows of nearsim_resemblance_pairs for the table, read a piece at a time."""
    reg = enabled.registration
    return session.rows(
        f"SELECT a, b, distance, similarity, short FROM {session.ext}.nearsim_resemblance_pairs("
        "$1::pg_catalog.regclass, $2::pg_catalog.name, $3::pg_catalog.name, $4::pg_catalog.name,"
        " $5::pg_catalog.float8, $6::pg_catalog.int4)",
        enabled.table.qualified, enabled.table.key_column, reg.text_column, reg.hash_column,
        float(min_similarity), _tokenisation(enabled), batch=CANDIDATES)


def clusters_verified(
    session: Session, tbl: str, min_similarity: float, measure: str, max_distance: int | None,
    method: str, min_size: int,
) -> list[tuple[str, str, str | None]]:
    """``nearsim_clusters_verified``: clusters over the verified pairs."""
    _check_method(session, method, hint="Use 'components' or 'pivot'.")
    session.require(min_size, "min_size")
    if min_size < 1:
        session.fail(f"min_size must be at least 1, not {min_size}")
    found = list(pairs_verified(session, tbl, min_similarity, measure, max_distance))
    keys = sorted({k for a, b, *_ in found for k in (a, b)})
    position = {k: i for i, k in enumerate(keys)}
    first = np.array([position[a] for a, *_ in found], dtype=np.int64)
    second = np.array([position[b] for _, b, *_ in found], dtype=np.int64)
    grouping = connected_components if method == "components" else pivot_groups
    return list(named_groups(keys, grouping(len(keys), first, second), method, min_size))
