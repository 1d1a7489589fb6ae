"""Kubernetes resource quantities, parsed exactly.

A quantity is ``<sign><number><suffix>`` as defined by
``k8s.io/apimachinery/pkg/api/resource``: the suffix is a binary SI unit
(``Ki`` .. ``Ei``), a decimal SI unit (``n u m "" k M G T P E``) or a decimal
exponent (``e3``, ``E-2``).  Values are returned as :class:`fractions.Fraction`
so that ``"1.5"`` and ``"1500m"`` compare equal and nothing is rounded.

Bounded before any arithmetic: a string of more than :data:`MAX_LENGTH`
characters, a decimal exponent beyond ±:data:`MAX_EXPONENT`, or a value whose
magnitude reaches 2^63 (Kubernetes' int64 range) is refused with a specific
message. Only the ASCII grammar is accepted: no whitespace, no other digits
(``"٢"`` and ``"²"`` are not 2).
"""

from __future__ import annotations

import functools
import re
from fractions import Fraction

from policy.echo import shown

_BINARY = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60}
_DECIMAL = {
    "n": Fraction(1, 10**9),
    "u": Fraction(1, 10**6),
    "m": Fraction(1, 10**3),
    "": Fraction(1),
    "k": Fraction(10**3),
    "M": Fraction(10**6),
    "G": Fraction(10**9),
    "T": Fraction(10**12),
    "P": Fraction(10**15),
    "E": Fraction(10**18),
}
_QUANTITY = re.compile(
    r"(?P<number>[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+))"
    r"(?:(?P<exponent>[eE][+-]?[0-9]+)|(?P<suffix>Ki|Mi|Gi|Ti|Pi|Ei|[numkMGTPE]?))"
)


MAX_LENGTH = 64  # characters; "123456789012345678Ei" is 20
MAX_EXPONENT = 30  # |n| of "e<n>": 10^30 is beyond the int64 range already
LIMIT = 2**63  # magnitude: the int64 range Kubernetes keeps quantities in


class QuantityError(ValueError):
    """A value that is not a Kubernetes quantity, or not the kind asked for."""


def parse_quantity(value: object) -> Fraction:
    """Return the exact value of a quantity given as a string or a JSON number.

    Raises :class:`QuantityError` for anything else (booleans, ``None``, free
    text, a suffix Kubernetes does not know such as ``"1K"``) and for values out
    of the bounds in the module doc.
    """
    if isinstance(value, bool):
        raise QuantityError(f"{shown(value)} is not a quantity")
    if isinstance(value, int):
        return _bounded(Fraction(value), value)
    if isinstance(value, float):
        if value != value or value in (float("inf"), float("-inf")):
            raise QuantityError(f"{shown(value)} is not a quantity")
        return _bounded(Fraction(value), value)
    if not isinstance(value, str):
        raise QuantityError(f"{shown(value)} is not a quantity")
    if len(value) > MAX_LENGTH:
        raise QuantityError(f"{shown(value)} is not a quantity: longer than {MAX_LENGTH} characters")
    return _parse_text(value)


def _bounded(exact: Fraction, value: object) -> Fraction:
    if abs(exact) >= LIMIT:
        raise QuantityError(f"{shown(value)} is out of range (at most 2^63 - 1)")
    return exact


@functools.lru_cache(maxsize=4096)  # pods repeat a few values ("2", "8Gi") over and over
def _parse_text(value: str) -> Fraction:
    if value.isascii() and value.isdigit():
        return _bounded(Fraction(int(value)), value)  # the common case, "2", without the regular expression
    match = _QUANTITY.fullmatch(value)
    if match is None:
        raise QuantityError(f"{shown(value)} is not a quantity")
    number = Fraction(match["number"])
    if match["exponent"] is not None:
        exponent = int(match["exponent"][1:])
        if abs(exponent) > MAX_EXPONENT:
            raise QuantityError(f"{shown(value)} is out of range (exponent beyond ±{MAX_EXPONENT})")
        return _bounded(number * Fraction(10) ** exponent, value)
    suffix = match["suffix"]
    if suffix in _BINARY:
        return _bounded(number * _BINARY[suffix], value)
    return _bounded(number * _DECIMAL[suffix], value)


def parse_whole(value: object) -> int:
    """Parse a quantity that must be a whole, non-negative number."""
    exact = parse_quantity(value)
    if exact.denominator != 1:
        raise QuantityError(f"{shown(value)} is not a whole number")
    if exact < 0:
        raise QuantityError(f"{shown(value)} is negative")
    return int(exact)


def count_label(raw: object, most: int) -> int | None:
    """A label's whole number from 0 to ``most`` (ASCII digits only), else None."""
    if not isinstance(raw, str) or not raw.isascii() or not raw.isdigit() or len(raw) > len(str(most)):
        return None
    value = int(raw)
    return value if value <= most else None
