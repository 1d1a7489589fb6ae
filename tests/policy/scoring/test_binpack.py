import pytest

from helpers import build, raw_and_scores
from policy.names import BINPACK, MODE_CORE, MODE_MEMORY, SPREAD
from policy.node import NodeSpec
from policy.request import simple_request
from policy.scoring.binpack import Binpack


def core(name, placement=BINPACK):
    return NodeSpec(name, MODE_CORE, 4, 15, 100, placement, 20)


def test_formula_mean_fullness_after_placement():
    state = build({"a": (core("a"), [(1, 4, 20)]), "b": (core("b"), [])})
    raw, scores = raw_and_scores(state, simple_request(2, 30), Binpack())
    assert raw["a"] == pytest.approx(((4 + 2) / 15 + (20 + 30) / 100) / 2)
    assert raw["b"] == pytest.approx((2 / 15 + 30 / 100) / 2)
    assert scores == {"a": 10, "b": 0}


def test_memory_only_nodes_use_memory_fill_and_multi_gpu_the_mean():
    spec = NodeSpec("m", MODE_MEMORY, 4, 16, 0, BINPACK, 20)
    state = build({"m": (spec, [(0, 8, 0)])})
    raw, _ = raw_and_scores(state, simple_request(8, gpu_count=2), Binpack())
    assert raw["m"] == pytest.approx(((8 + 4) / 16 + 4 / 16) / 2)


def test_scores_the_gpu_the_node_label_chose():
    # The spread node puts the pod on an empty GPU, so it scores like the empty binpack node.
    state = build({"a": (core("a", SPREAD), [(0, 10, 50)]), "b": (core("b"), [])})
    raw, scores = raw_and_scores(state, simple_request(2, 30), Binpack())
    assert raw["a"] == raw["b"] and scores == {"a": 10, "b": 10}
