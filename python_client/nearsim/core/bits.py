"""Fingerprints as numbers: 64 bits stored as a signed bigint, and their distance."""

from __future__ import annotations

BITS = 64
"""Bits in a fingerprint."""

_MASK = (1 << BITS) - 1
_SIGN = 1 << (BITS - 1)


def to_signed(value: int) -> int:
    """The signed bigint with the same 64 bits as ``value``."""
    _check_range(value)
    value &= _MASK
    return value - (1 << BITS) if value & _SIGN else value


def to_unsigned(value: int) -> int:
    """The unsigned 64-bit value with the same bits as ``value``."""
    _check_range(value)
    return value & _MASK


def _check_range(value: int) -> None:
    if not isinstance(value, int) or isinstance(value, bool):
        raise TypeError(f"a fingerprint is an int, not {type(value).__name__}")
    if not -_SIGN <= value <= _MASK:
        raise ValueError(f"{value} does not fit in 64 bits")


def hamming(a: int, b: int) -> int:
    """The number of bits in which two fingerprints differ (0..64)."""
    return (to_unsigned(a) ^ to_unsigned(b)).bit_count()


def bits(value: int) -> str:
    """The 64-character 0/1 string of a fingerprint, most significant bit first."""
    return format(to_unsigned(value), "064b")


def from_bits(text: str) -> int:
    """The signed fingerprint written by :func:`bits`; rejects anything else."""
    if len(text) != BITS or text.strip("01"):
        bad = next((c for c in text if c not in "01"), None)
        reason = f"character {bad!r}" if bad is not None else f"length {len(text)}"
        raise ValueError(
            f"invalid fingerprint bit string {text[:80]!r}: expected {BITS} characters "
            f"'0' or '1', found {reason}"
        )
    return to_signed(int(text, 2))
