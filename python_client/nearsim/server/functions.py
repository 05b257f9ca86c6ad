"""The PL/Python functions of the extension, one Python function each.

Each SQL body in ``extension/sql/nearsim.sql`` is one line that calls the
function of the same name here with ``plpy`` and the SQL arguments, e.g.::

    return functions.nearsim_enable(plpy, tbl, text_column, ...)

so that argument checks and the mapping of errors to SQLSTATEs live in code
that linters and type checkers read, and the SQL file holds only
signatures.  ``plpy`` is PL/Python's module; everything below goes through
:class:`~nearsim.server.database.Session`.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy

from ..core import calibration, measures, profiles
from ..core.bits import BITS
from ..core.fingerprint import PROFILE
from ..core.interrupts import LimitExceeded
from ..core.text import TOKENISATIONS
from . import catalog, maintenance, search
from .database import Plpy, Session, check_interrupts

TOKENISATION_HINT = ("Tokenisation 2, that of profiles of version 2 (default/2...), makes each"
                     " letter of Thai, Lao, Myanmar, Khmer... a word.")


def _session(plpy: Any) -> Session:
    check_interrupts(plpy)
    return Session(Plpy(plpy))


# -- fingerprints and profiles ------------------------------------------------


def simhash(plpy: Any, document: str, profile: str) -> int | None:
    """``simhash(text, profile)``: the fingerprint with any feature profile."""
    session = _session(plpy)
    try:
        return profiles.simhash(document, catalog.named_profile(session, profile).name)
    except LimitExceeded as error:
        session.fail(str(error), hint=error.hint, sqlstate="54000")


def nearsim_profile(plpy: Any, profile: str) -> str:
    """``nearsim_profile(profile)``: the canonical name of a profile."""
    try:
        return profiles.canonical(profile)
    except profiles.ProfileError as error:
        _session(plpy).fail(str(error), hint=catalog.PROFILES_HINT)


def nearsim_profiles(plpy: Any) -> list[tuple[str, str]]:
    """``nearsim_profiles()``: short names and the specifications they stand for."""
    return [(profiles.canonical(f"{alias}/{version}"), f"{spec}/{version}")
            for version in profiles.VERSIONS for alias, spec in profiles.ALIASES.items()]


def simhash_profile(plpy: Any) -> str:
    """``simhash_profile()``: the profile of ``simhash(text)``."""
    return PROFILE


def nearsim_check_profile(plpy: Any, tbl: str, profile: str) -> bool:
    """``nearsim_check_profile``: true, or an error if this server cannot compute profile."""
    catalog.check_table_profile(_session(plpy), tbl, profile)
    return True


# -- exact measures -----------------------------------------------------------


def _require_tokenisation(session: Session, tokenisation: int) -> None:
    """Refuse a tokenisation other than 1 and 2 (as nearsim_tokenisation_arg does in C)."""
    if tokenisation not in TOKENISATIONS:
        session.fail(f"tokenisation {tokenisation} is unknown to this nearsim, which"
                     " computes 1 and 2", hint=TOKENISATION_HINT)


def nearsim_compare(plpy: Any, a: str, b: str, min_chunk_words: int, shingle_words: int,
                    tokenisation: int) -> tuple[Any, ...]:
    """``nearsim_compare``: the exact measures of two texts."""
    for name, value in (("min_chunk_words", min_chunk_words), ("shingle_words", shingle_words)):
        if value < 1:
            _session(plpy).fail(f"{name} must be at least 1, not {value}")
    _require_tokenisation(_session(plpy), tokenisation)
    for name, text in (("a", a), ("b", b)):
        if len(text) > measures.MAX_MEASURED_CHARS:
            _session(plpy).fail(
                f"{name} has {len(text):,} characters, more than the"
                f" {measures.MAX_MEASURED_CHARS:,} nearsim_compare measures", sqlstate="54000",
                hint="nearsim_resemblance and nearsim_containment measure texts of any length.")
    try:
        c = measures.compare(a, b, min_chunk_words=min_chunk_words, shingle_words=shingle_words,
                             tokenisation=tokenisation)
    except LimitExceeded as error:
        _session(plpy).fail(str(error), hint=error.hint, sqlstate="54000")
    return (c.longer, c.shorter, c.common, c.s_l, c.s_j, c.information_s_l, c.information_s_j,
            c.s_r, c.containment, c.multiset_jaccard)


def nearsim_minhash(plpy: Any, document: str, hashes: int,
                    tokenisation: int = 1) -> list[int] | None:  # fmt: skip
    """``nearsim_minhash``: a MinHash signature; NULL for a text without words."""
    session = _session(plpy)
    if not 1 <= hashes <= measures.MAX_HASHES:
        session.fail(f"hashes must be between 1 and {measures.MAX_HASHES} (the limit of"
                     f" nearsim_minhash), not {hashes}",
                     sqlstate="54000" if hashes > 0 else "22023",
                     hint="200 hashes estimate S_R within about 0.07, 10000 within about 0.01.")
    _require_tokenisation(session, tokenisation)
    try:
        signature = measures.minhash_signature(document, hashes, tokenisation=tokenisation)
    except LimitExceeded as error:
        session.fail(str(error), hint=error.hint, sqlstate="54000")
    if signature[0] == measures.EMPTY_SIGNATURE_VALUE:
        return None  # no words, no shingles
    values: list[int] = signature.tolist()
    return values


def nearsim_minhash_estimate(plpy: Any, a: list[int | None],
                             b: list[int | None]) -> tuple[float, float, float]:
    """``nearsim_minhash_estimate``: S_R from two signatures, with its 95% interval."""
    session = _session(plpy)
    if len(a) != len(b) or not a:
        session.fail(f"signatures of {len(a)} and {len(b)} hashes cannot be compared",
                     hint="make both with nearsim_minhash and the same number of hashes")
    if any(v is None or v < 0 for v in a) or any(v is None or v < 0 for v in b):
        session.fail("not a nearsim_minhash signature: NULL or negative values")
    e = measures.minhash_estimate(numpy.array(a, dtype=numpy.uint64),
                                  numpy.array(b, dtype=numpy.uint64))
    return (e.value, e.low, e.high)


def nearsim_estimate(plpy: Any, distance: int, profile: str) -> tuple[Any, ...]:
    """``nearsim_estimate``: S_R of calibration pairs at a distance."""
    session = _session(plpy)
    if not 0 <= distance <= BITS:
        session.fail(f"distance must be between 0 and {BITS}, not {distance}")
    try:
        e = calibration.estimate(distance, profiles.canonical(profile))
    except (profiles.ProfileError, calibration.NotCalibrated) as error:
        session.fail(str(error))
    return (e.pairs, e.mean, e.low, e.high)


def nearsim_radius(plpy: Any, min_similarity: float, profile: str) -> int:
    """``nearsim_radius``: the calibrated radius for a minimum similarity."""
    try:
        return calibration.radius_for(min_similarity, profiles.canonical(profile))
    except (ValueError, calibration.NotCalibrated) as error:
        _session(plpy).fail(str(error))


# -- enabled tables -----------------------------------------------------------


def nearsim_enable(plpy: Any, tbl: str, text_column: str, hash_column: str,
                   bands: int | None, prefix: str | None, batch_size: int,
                   profile: str) -> None:
    maintenance.enable(_session(plpy), tbl, text_column, hash_column, bands, prefix,
                       batch_size, profile)


def nearsim_disable(plpy: Any, tbl: str) -> None:
    maintenance.disable(_session(plpy), tbl)


def nearsim_verify(plpy: Any, tbl: str, fingerprints: bool | None) -> dict[str, Any]:
    return maintenance.verify(_session(plpy), tbl, fingerprints)


def nearsim_rebuild(plpy: Any, tbl: str, bands: int | None, fingerprints: bool | None,
                    batch_size: int, profile: str | None) -> dict[str, Any]:
    # batch_size is accepted for compatibility: the rebuild works in one
    # statement per step.
    return maintenance.rebuild(_session(plpy), tbl, bands, fingerprints, profile)


# -- searches over a table ----------------------------------------------------


def nearsim_similar_verified(plpy: Any, tbl: str, query: str | None, min_similarity: float,
                             measure: str, max_distance: int | None) -> list[tuple[Any, ...]]:
    return list(search.similar_verified(_session(plpy), tbl, query, min_similarity, measure,
                                        max_distance))


def nearsim_pairs_verified(plpy: Any, tbl: str, min_similarity: float, measure: str,
                           max_distance: int | None) -> Iterable[tuple[Any, ...]]:
    return search.pairs_verified(_session(plpy), tbl, min_similarity, measure, max_distance)


def nearsim_clusters_verified(plpy: Any, tbl: str, min_similarity: float, measure: str,
                              max_distance: int | None, method: str,
                              min_size: int) -> list[tuple[Any, ...]]:
    return list(search.clusters_verified(_session(plpy), tbl, min_similarity, measure,
                                         max_distance, method, min_size))

