import pytest

from helpers import build, raw_and_scores
from policy.names import BINPACK, MODE_CORE
from policy.node import NodeSpec
from policy.request import simple_request
from policy.scoring.spread import Spread


def test_formula_one_minus_fullness_after_placement():
    spec_a = NodeSpec("a", MODE_CORE, 1, 15, 100, BINPACK, 20)
    spec_b = NodeSpec("b", MODE_CORE, 1, 15, 100, BINPACK, 20)
    state = build({"a": (spec_a, [(0, 4, 20)]), "b": (spec_b, [])})
    raw, scores = raw_and_scores(state, simple_request(2, 30), Spread())
    assert raw["a"] == pytest.approx(1 - ((4 + 2) / 15 + (20 + 30) / 100) / 2)
    assert raw["b"] == pytest.approx(1 - (2 / 15 + 30 / 100) / 2)
    assert scores == {"a": 0, "b": 10}
