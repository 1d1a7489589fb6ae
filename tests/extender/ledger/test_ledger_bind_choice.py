"""Bind takes the GPUs the last scored evaluation chose for its node, while that node is unchanged.

A strategy that is not ``row_local`` may weigh the whole cluster when it
chooses a node's GPUs (fragmentation learns from every pod), so the same
question asked twice can be answered differently. Bind keeps prioritize's
answer when it is still exact, and asks again when the node changed.
"""

import numpy as np
import pytest

from builders import node, pod
from extender.ledger.ledger import Ledger
from extender.ledger.records import BindRejected, PodRef
from policy.request import parse_pod_request
from policy.state import ClusterState


class Alternating:
    """Not row-local: the 1st, 3rd, ... evaluation picks each node's lowest fitting GPU, the others its highest."""

    name = "alternating"

    def __init__(self):
        self.calls = 0

    def choose(self, candidates):
        self.calls += 1
        fit = candidates.fit
        lowest = np.argmax(fit, axis=1)
        highest = fit.shape[1] - 1 - np.argmax(fit[:, ::-1], axis=1)
        return (lowest if self.calls % 2 else highest)[:, None]

    def score(self, candidates):
        return np.zeros(len(candidates.feasible))


def ledger_of(*nodes) -> tuple:
    strategy = Alternating()
    ledger = Ledger(ClusterState(), strategy)
    for n in nodes:
        ledger.observe_node(n)
    return ledger, strategy


def gpus_of(allocation) -> list:
    return sorted(allocation.memory_per_gpu)


def test_bind_keeps_the_gpus_prioritize_chose_on_an_unchanged_node():
    ledger, strategy = ledger_of(node("a", "cgpu", gpus=4, gib=16), node("b", "cgpu", gpus=4, gib=16))
    p = pod("p", mem=4)
    request = parse_pod_request(p)
    chosen = ledger.evaluate(request, ["a", "b"]).gpus
    assert chosen[:, 0].tolist() == [0, 0] and strategy.calls == 1
    allocation, _ = ledger.reserve(PodRef.of(p), request, "b", 1)
    assert gpus_of(allocation) == [0] and strategy.calls == 1  # asked again, it would say GPU 3


def test_bind_asks_again_when_the_node_changed_since():
    ledger, strategy = ledger_of(node("a", "cgpu", gpus=2, gib=16))
    first, second = pod("first", mem=10), pod("second", mem=10)
    request = parse_pod_request(first)
    assert ledger.evaluate(request, ["a"]).gpus[0, 0] == 0
    ledger.reserve(PodRef.of(second), parse_pod_request(second), "a", 1)  # no evaluation of its own: takes GPU 0
    allocation, _ = ledger.reserve(PodRef.of(first), request, "a", 1)
    assert gpus_of(allocation) == [1]  # GPU 0 has 6 GiB left: prioritize's answer is stale, bind chose anew


def test_a_node_that_filled_up_since_prioritize_rejects_the_bind():
    ledger, _ = ledger_of(node("a", "cgpu", gpus=1, gib=16))
    first, second = pod("first", mem=10), pod("second", mem=10)
    request = parse_pod_request(first)
    assert ledger.evaluate(request, ["a"]).feasible.tolist() == [True]
    ledger.reserve(PodRef.of(second), parse_pod_request(second), "a", 1)
    with pytest.raises(BindRejected, match="no longer fits"):
        ledger.reserve(PodRef.of(first), request, "a", 1)
    assert ledger.allocation(PodRef.of(first).uid) is None


def test_another_request_shape_is_evaluated_afresh():
    ledger, strategy = ledger_of(node("a", "cgpu", gpus=4, gib=16))
    small, large = pod("small", mem=2), pod("large", mem=8)
    ledger.evaluate(parse_pod_request(small), ["a"])
    allocation, _ = ledger.reserve(PodRef.of(large), parse_pod_request(large), "a", 1)
    assert strategy.calls == 2 and gpus_of(allocation) == [3]
