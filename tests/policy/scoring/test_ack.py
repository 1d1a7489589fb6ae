from helpers import build, raw_and_scores
from policy.names import BINPACK, MODE_CORE, SPREAD
from policy.node import NodeSpec
from policy.request import simple_request
from policy.scoring.ack import Ack
from policy.scoring.binpack import Binpack


def test_each_node_follows_its_own_placement_label():
    nodes = {
        "pack-used": (NodeSpec("pack-used", MODE_CORE, 1, 15, 100, BINPACK, 20), [(0, 6, 30)]),
        "pack-empty": (NodeSpec("pack-empty", MODE_CORE, 1, 15, 100, BINPACK, 20), []),
        "spread-used": (NodeSpec("spread-used", MODE_CORE, 1, 15, 100, SPREAD, 20), [(0, 6, 30)]),
    }
    raw, scores = raw_and_scores(build(nodes), simple_request(2, 30), Ack())
    assert raw["spread-used"] == 1 - raw["pack-used"]
    assert scores["pack-used"] == 10
    assert scores["pack-empty"] < 10 and scores["spread-used"] < 10


def test_equals_binpack_when_every_node_is_binpack():
    nodes = {n: (NodeSpec(n, MODE_CORE, 2, 15, 100, BINPACK, 20), [(0, u, 5 * u)]) for n, u in
             [("a", 1), ("b", 5), ("c", 9)]}
    state = build(nodes)
    assert raw_and_scores(state, simple_request(3, 20), Ack()) == raw_and_scores(state, simple_request(3, 20), Binpack())
