"""Kubernetes resource quantities, parsed exactly.

A quantity is ``<sign><number><suffix>`` as defined by
``k8s.io/apimachinery/pkg/api/resource``: the suffix is a binary SI unit
(``Ki`` .. ``Ei``), a decimal SI unit (``n u m "" k M G T P E``) or a decimal
exponent (``e3``, ``E-2``).  Values are returned as :class:`fractions.Fraction`
so that ``"1.5"`` and ``"1500m"`` compare equal and nothing is rounded.
"""

from __future__ import annotations

import functools
import re
from fractions import Fraction

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


class QuantityError(ValueError):
    """A value that is not a Kubernetes quantity, or not the kind asked for."""


def parse_quantity(value: object) -> Fraction:
    """Return the exact value of a quantity given as a string or a JSON number.

    Raises :class:`QuantityError` for anything else (booleans, ``None``, free
    text, a suffix Kubernetes does not know such as ``"1K"``).
    """
    if isinstance(value, bool):
        raise QuantityError(f"{value!r} is not a quantity")
    if isinstance(value, int):
        return Fraction(value)
    if isinstance(value, float):
        if value != value or value in (float("inf"), float("-inf")):
            raise QuantityError(f"{value!r} is not a quantity")
        return Fraction(value)
    if not isinstance(value, str):
        raise QuantityError(f"{value!r} is not a quantity")
    return _parse_text(value)


@functools.lru_cache(maxsize=4096)  # pods repeat a few values ("2", "8Gi") over and over
def _parse_text(value: str) -> Fraction:
    if value.isdigit() and value.isascii():
        return Fraction(int(value))  # the common case, "2", without the regular expression
    match = _QUANTITY.fullmatch(value.strip())
    if match is None:
        raise QuantityError(f"{value!r} is not a quantity")
    number = Fraction(match["number"])
    if match["exponent"] is not None:
        return number * Fraction(10) ** int(match["exponent"][1:])
    suffix = match["suffix"]
    if suffix in _BINARY:
        return number * _BINARY[suffix]
    return number * _DECIMAL[suffix]


def parse_whole(value: object) -> int:
    """Parse a quantity that must be a whole, non-negative number."""
    exact = parse_quantity(value)
    if exact.denominator != 1:
        raise QuantityError(f"{value!r} is not a whole number")
    if exact < 0:
        raise QuantityError(f"{value!r} is negative")
    return int(exact)
