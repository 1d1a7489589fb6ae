"""The defragmentation planner on hand-made clusters: the cases the issue names, each rule in turn."""

from __future__ import annotations

import numpy as np
import pytest

from policy.defrag import Limits, Placement, Resident, Waiting, plan
from policy.defrag.movable import NOT_CONTROLLED, OPTED_OUT, SYSTEM, why_immovable, within_budgets
from policy.names import MODE_CORE, MODE_MEMORY
from policy.node import NodeSpec
from policy.request import simple_request
from policy.state import ClusterState

HEURISTIC = Limits(exact_movers=-1)


class Cluster:
    """A state and its residents, built pod by pod."""

    def __init__(self):
        self.state = ClusterState(rows=2, gpus=2)
        self.residents = []

    def node(self, name, gpus=2, gib=24, mode=MODE_MEMORY, unhealthy=(), cpu=0):
        self.state.set_node(NodeSpec(name, mode, gpus, gib, 100 if mode == MODE_CORE else 0, max_pod=20,
                                     unhealthy=frozenset(unhealthy), cpu=cpu))
        return self

    def pod(self, name, node, gpu, gib, core=0, priority=0, movable=True, why_not="", budgets=(), allowed=None,
            gpus=None, cpu=0):
        gpus = tuple(gpus or (gpu,))
        request = simple_request(gib * len(gpus), core, gpu_count=len(gpus), cpu=cpu)
        memory = {g: gib for g in gpus}
        cores = {g: core for g in gpus} if core else {}
        self.state.add_usage(node, memory, cores, bool(core))
        if cpu:
            self.state.add_host_usage(node, cpu, 0)
        self.residents.append(Resident(f"default/{name}", node, memory, cores, request, priority, movable, why_not,
                                       budgets, allowed))
        return self

    def plan(self, *pending, max_moves=5, budgets=None, limits=Limits()):
        return plan(self.state, self.residents, list(pending), max_moves, budgets=budgets, limits=limits)


def wait(name, gib, core=0, priority=0, gpus=1, whole=False, allowed=None, cpu=0):
    return Waiting(f"default/{name}", simple_request(gib * gpus, core, gpu_count=gpus, whole_device=whole, cpu=cpu),
                   priority, allowed)


def thirds() -> Cluster:
    """The issue's case: after churn every GPU of two nodes is a third full; a pod wants a whole GPU."""
    c = Cluster().node("a").node("b")
    for node in "ab":
        for g in range(2):
            c.pod(f"{node}{g}", node, g, 8)
    return c


@pytest.mark.parametrize("limits", [Limits(), HEURISTIC], ids=["exact", "heuristic"])
def test_a_whole_gpu_from_thirds_takes_one_move(limits):
    result = thirds().plan(wait("whole", 24), limits=limits)
    assert result.unblocks == ("default/whole",)
    (move,) = result.moves
    assert move.from_node == move.to_node and move.gpus != move.from_gpus  # onto its neighbour GPU: 16 of 24
    spot = result.placements["default/whole"]
    assert (spot.node, spot.gpus) == (move.from_node, move.from_gpus)
    assert result.whole_gpus_freed == 1 and result.exact == (limits is not HEURISTIC)
    assert result.reasons["pending"]["default/whole"] == "gets room through 1 move"


def test_two_whole_gpus_take_two_moves_and_say_so():
    result = thirds().plan(wait("w1", 24), wait("w2", 24))
    assert result.unblocks == ("default/w1", "default/w2") and len(result.moves) == 2
    assert result.whole_gpus_freed == 2 and result.reasons["summary"] == "2 moves let 2 pending pods in"


def test_max_moves_bounds_the_plan():
    result = thirds().plan(wait("w1", 24), wait("w2", 24), max_moves=1)
    assert result.unblocks == ("default/w1",) and len(result.moves) == 1
    assert "no plan of at most 1 moves" in result.reasons["pending"]["default/w2"]


def test_no_moves_no_plan_when_the_pod_already_fits():
    result = thirds().plan(wait("small", 8))
    assert result.moves == () and result.unblocks == () and result.reasons["summary"] == "no pending pod needs moves"
    assert result.placements["default/small"].node in ("a", "b")


def test_an_empty_plan_names_the_reason():
    c = thirds()
    assert c.plan(wait("huge", 30)).reasons["pending"]["default/huge"].startswith("fits no node even with every GPU")
    assert "no pending" in c.plan().reasons["summary"]
    full = Cluster().node("a")
    full.pod("x", "a", 0, 20).pod("y", "a", 1, 20)
    assert full.plan(wait("w", 24)).reasons["pending"]["default/w"].startswith("no plan of at most 5 moves")


@pytest.mark.parametrize("limits", [Limits(), HEURISTIC], ids=["exact", "heuristic"])
def test_budgets_forbid_moves_and_are_counted_across_the_plan(limits):
    c = Cluster().node("a").node("b")
    for node in "ab":
        for g in range(2):
            c.pod(f"{node}{g}", node, g, 8, budgets=("default/web",))
    blocked = c.plan(wait("w", 24), budgets={"default/web": 0}, limits=limits)
    assert blocked.moves == () and blocked.reasons["pending"]["default/w"] == \
        "PodDisruptionBudgets allow none of the evictions it needs"
    one = c.plan(wait("w1", 24), wait("w2", 24), budgets={"default/web": 1}, limits=limits)
    assert len(one.moves) == 1 and one.unblocks == ("default/w1",)


@pytest.mark.parametrize("limits", [Limits(), HEURISTIC], ids=["exact", "heuristic"])
def test_only_pods_of_no_higher_priority_move(limits):
    c = Cluster().node("a")
    c.pod("important", "a", 0, 8, priority=100).pod("other", "a", 1, 8, priority=100)
    assert c.plan(wait("w", 24, priority=10), limits=limits).reasons["pending"]["default/w"] == \
        "the pods in its way have a higher priority than it"
    result = c.plan(wait("w", 24, priority=100), limits=limits)
    assert len(result.moves) == 1 and result.moves[0].priority == 100


def test_pods_that_may_not_move_stay_and_the_reason_says_why():
    c = Cluster().node("a")
    c.pod("x", "a", 0, 8, movable=False, why_not=NOT_CONTROLLED).pod("y", "a", 1, 8, movable=False, why_not=OPTED_OUT)
    reason = c.plan(wait("w", 24)).reasons["pending"]["default/w"]
    assert reason.startswith("the pods in its way may not move") and NOT_CONTROLLED in reason and OPTED_OUT in reason


def test_the_exact_search_finds_a_chain_the_heuristic_does_not():
    # A 24 GiB pod needs a whole GPU; only a's GPU 0 can be emptied, by moving x (10). No GPU has
    # 10 free until y (6) leaves b's GPU 0 for b's GPU 1: a chain of two moves.
    c = Cluster().node("a").node("b")
    c.pod("x", "a", 0, 10).pod("z", "a", 1, 20, movable=False)
    c.pod("w", "b", 0, 10, movable=False).pod("y", "b", 0, 6).pod("v", "b", 1, 16, movable=False)
    exact = c.plan(wait("big", 24))
    assert exact.exact and exact.unblocks == ("default/big",)
    assert [(m.pod, m.to_node, m.gpus) for m in exact.moves] == [("default/y", "b", (1,)), ("default/x", "b", (0,))]
    heuristic = c.plan(wait("big", 24), limits=HEURISTIC)
    assert heuristic.moves == () and heuristic.reasons["pending"]["default/big"].startswith("the heuristic found no")


def test_multi_gpu_and_whole_device_pods():
    c = Cluster().node("a", gpus=4)
    for g in range(4):
        c.pod(f"p{g}", "a", g, 6)
    result = c.plan(wait("pair", 24, gpus=2))  # two whole GPUs: the four pods onto the other two
    assert len(result.moves) == 2 and len(result.placements["default/pair"].gpus) == 2
    whole = c.plan(wait("whole", 24, whole=True))
    assert len(whole.moves) == 1


def test_a_node_left_with_pods_of_another_mode_is_cleared_of_them():
    c = Cluster().node("a", mode=MODE_CORE).node("b", mode=MODE_CORE)
    c.pod("old", "a", 0, 4)  # a memory-only pod left from before the node became core_mem
    c.pod("busy", "b", 0, 20, core=80).pod("busy2", "b", 1, 20, core=80)
    result = c.plan(wait("w", 10, core=50))  # the old pod has nowhere to go: b is core_mem too
    assert result.moves == () and result.reasons["pending"]["default/w"].startswith("no plan")
    c2 = Cluster().node("a", mode=MODE_CORE).node("m")
    c2.pod("old", "a", 0, 4)
    result = c2.plan(wait("w", 10, core=50))
    assert [(m.pod, m.to_node) for m in result.moves] == [("default/old", "m")]
    assert result.placements["default/w"].node == "a"


def test_unhealthy_gpus_selectors_and_host_room_are_respected():
    c = Cluster().node("a", unhealthy=(1,)).node("b")
    c.pod("x", "a", 0, 8).pod("y", "b", 0, 8).pod("z", "b", 1, 8)
    only_a = np.array([True, False])
    result = c.plan(wait("w", 24, allowed=only_a))
    assert result.placements["default/w"] == Placement("a", 0, (0,))
    assert [(m.pod, m.to_node) for m in result.moves] == [("default/x", "b")]  # a's other GPU is unhealthy
    pinned = Cluster().node("a", unhealthy=(1,)).node("b")
    pinned.pod("x", "a", 0, 8, allowed=np.array([True, False])).pod("y", "b", 0, 8)
    assert pinned.plan(wait("w", 24, allowed=only_a)).moves == ()
    no_cpu = Cluster().node("a", unhealthy=(1,)).node("b", cpu=1000)
    no_cpu.pod("x", "a", 0, 8, cpu=2000).pod("y", "b", 0, 8)
    assert no_cpu.plan(wait("w", 24, allowed=only_a)).moves == ()


def test_pending_pods_go_by_priority_then_in_the_order_given():
    c = Cluster().node("a")
    c.pod("x", "a", 0, 8).pod("y", "a", 1, 8)
    result = c.plan(wait("old", 24), wait("urgent", 24, priority=10))
    assert result.unblocks == ("default/urgent",)
    assert "default/old" not in result.placements


def test_movability_rules():
    controller = [{"kind": "ReplicaSet", "name": "web-5d", "uid": "u1", "controller": True}]
    assert why_immovable("default", controller, {}) == ""
    assert why_immovable("kube-system", controller, {}) == SYSTEM
    assert why_immovable("default", controller, {"cgpu.alibabacloud.com/defrag": "false"}) == OPTED_OUT
    assert why_immovable("default", [{**controller[0], "controller": False}], {}) == NOT_CONTROLLED
    assert why_immovable("default", None, None) == NOT_CONTROLLED
    assert "DaemonSet" in why_immovable("default", [{**controller[0], "kind": "DaemonSet"}], {})
    r = Resident("d/p", "a", {0: 1}, {}, simple_request(1), budgets=("d/b",))
    assert within_budgets([r], {"d/b": 1}) and not within_budgets([r, r], {"d/b": 1})
    assert not within_budgets([r], {"d/b": 1}, {"d/b": 1}) and not within_budgets([r], {})
