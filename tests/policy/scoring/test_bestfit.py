import pytest

from helpers import build, raw_and_scores
from policy.names import BINPACK, MODE_MEMORY, UNLIMITED_PODS
from policy.node import NodeSpec
from policy.request import host_request, simple_request
from policy.scoring.bestfit import BestFit


def node(name, gpus, cpu):
    return NodeSpec(name, MODE_MEMORY, gpus, 1000, 0, BINPACK, UNLIMITED_PODS, cpu=cpu)


def test_formula_cpu_and_gpu_left_after_placement():
    state = build({"a": (node("a", 8, 64_000), [(0, 500, 0)]), "b": (node("b", 2, 16_000), [])})
    state.add_host_usage("a", 32_000, 0)
    raw, scores = raw_and_scores(state, simple_request(500, cpu=4_000), BestFit())
    # a: 28 cores and 7 GPUs left; b: 12 cores and 1.5 GPUs left
    assert raw["a"] == pytest.approx(1 - (0.5 * 28 / 128 + 0.5 * 7 / 8))
    assert raw["b"] == pytest.approx(1 - (0.5 * 12 / 128 + 0.5 * 1.5 / 8))
    assert scores == {"a": 0, "b": 10}


def test_pods_without_gpu_count_cpu_only_and_unknown_cpu_counts_nothing():
    state = build({"a": (node("a", 2, 16_000), []), "b": (node("b", 2, 0), [])})
    raw, _ = raw_and_scores(state, host_request(8_000), BestFit())
    assert raw["a"] == pytest.approx(1 - (0.5 * 8 / 128 + 0.5 * 2 / 8))
    assert raw["b"] == pytest.approx(1 - 0.5 * 2 / 8)
