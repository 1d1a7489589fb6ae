from fractions import Fraction

import pytest
from hypothesis import given
from hypothesis import strategies as st

from policy.quantity import QuantityError, parse_quantity, parse_whole


@pytest.mark.parametrize("text, value", [
    ("8", 8), ("1k", 1000), ("2e3", 2000), ("1Ki", 1024), ("1Gi", 2**30), ("1500m", Fraction(3, 2)),
    ("1.5", Fraction(3, 2)), ("+4", 4), ("0", 0), ("1E2", 100), ("5e-1", Fraction(1, 2)), (".5", Fraction(1, 2)),
    ("1M", 10**6), ("3", 3), (7, 7), (2.0, 2),
])
def test_parses_kubernetes_forms(text, value):
    assert parse_quantity(text) == value


@pytest.mark.parametrize("text", ["", "1K", "abc", "1 Gi", "1.2.3", "Ki", "1ki", None, True, [], {}, "1e", "--1"])
def test_rejects_what_kubernetes_rejects(text):
    with pytest.raises(QuantityError):
        parse_quantity(text)


@pytest.mark.parametrize("text", ["1.5", "100m", "-1", "1e-3"])
def test_whole_rejects_fractions_and_negatives(text):
    with pytest.raises(QuantityError):
        parse_whole(text)


@given(st.integers(0, 10**6), st.sampled_from(["", "k", "M", "Ki", "Mi", "Gi", "e0", "e2", "E3"]))
def test_suffix_scales_exactly(number, suffix):
    scale = {"": 1, "k": 10**3, "M": 10**6, "Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "e0": 1, "e2": 100, "E3": 1000}
    assert parse_whole(f"{number}{suffix}") == number * scale[suffix]
