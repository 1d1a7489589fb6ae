"""Defragmentation's holds through filter, prioritize and bind (embedded cluster): the replacement is
steered to its node and planned GPUs, the held room is kept from other pods of its priority or lower,
a pod of higher priority is not held back, and holds end when their pod binds or their time is up."""

from __future__ import annotations

import orjson

from builders import node, pod, running_pod
from defrag_cases import owned
from extender.app import build_extender
from extender.config import Config
from extender.defrag.holds import DefragHolds, Hold
from extender.embedded import EmbeddedCluster
from policy.request import simple_request

NODES = ["gpu-a", "gpu-b"]
HELD = "room for this pod is held on another node (defragmentation)"


class Clock:
    def __init__(self):
        self.now = 1000.0

    def __call__(self):
        return self.now


def extender_of(clock):
    objects = [node("gpu-a", "cgpu", gpus=4, gib=24), node("gpu-b", "cgpu", gpus=4, gib=24),
               running_pod("busy", "gpu-a", 0, 12, 0, gpu_memory=24)]
    extender = build_extender(Config(), cluster=EmbeddedCluster(objects, "test"))
    extender.ledger.defrag_holds = DefragHolds(clock)
    return extender


def ask(extender, verb, p, names=NODES):
    body = orjson.dumps({"Pod": p, "Nodes": None, "NodeNames": names})
    return orjson.loads(getattr(extender, verb)(body))


def bind(extender, p, node_name):
    meta = p["metadata"]
    return orjson.loads(extender.bind(orjson.dumps({"PodName": meta["name"], "PodNamespace": meta["namespace"],
                                                    "PodUID": meta["uid"], "Node": node_name})))["Error"]


def hold_for_the_web_replacement(extender, clock, gpus=(2,), seconds=60.0):
    """What the executor holds after evicting web-old: GPU 2 of gpu-a for web's next pod, and GPU 3
    (being freed) for the pending pod 'whole'."""
    extender.ledger.defrag_holds.add([
        Hold("gpu-a", gpus, simple_request(8 * len(gpus), gpu_count=len(gpus)), 0, "c1", clock.now + seconds,
             owner="default/rs-web",
             evicted="uid-web-old"),
        Hold("gpu-a", (3,), simple_request(24), 0, "c1", clock.now + seconds, uid="uid-whole")])


def test_the_replacement_goes_to_its_node_and_planned_gpu_not_where_binpack_would_put_it():
    clock = Clock()
    extender = extender_of(clock)
    hold_for_the_web_replacement(extender, clock)
    new = owned(pod("web-new", mem=8))
    reply = ask(extender, "filter", new)
    assert reply["NodeNames"] == ["gpu-a"] and reply["FailedNodes"] == {"gpu-b": HELD}
    assert [h["Host"] for h in ask(extender, "prioritize", new, ["gpu-a"])] == ["gpu-a"]
    assert bind(extender, new, "gpu-a") == ""
    # binpack alone would take GPU 0 (12 of 24 used, the fullest that fits): the plan said GPU 2
    assert sorted(extender.ledger.allocation("uid-web-new").memory_per_gpu) == [2]
    holds = extender.ledger.defrag_holds.current()
    assert [h.uid for h in holds] == ["uid-whole"]  # the replacement's hold did its work


def test_held_room_is_kept_from_other_pods_of_that_priority_or_lower_but_not_higher():
    clock = Clock()
    extender = extender_of(clock)
    hold_for_the_web_replacement(extender, clock, gpus=(1, 2))
    big = pod("big", mem=20)
    # gpu-a: GPU 0 has 12 used, GPUs 1 and 2 held for the replacement, GPU 3 for "whole"
    assert ask(extender, "filter", big)["NodeNames"] == ["gpu-b"]
    assert "no longer fits" in bind(extender, big, "gpu-a")
    urgent = pod("urgent", mem=20)
    urgent["spec"]["priority"] = 100
    assert ask(extender, "filter", urgent)["NodeNames"] == NODES  # kube-scheduler's rule for nominated room
    whole = pod("whole", mem=24)
    assert ask(extender, "filter", whole)["NodeNames"] == NODES  # its own room is not held from it
    assert bind(extender, whole, "gpu-a") == ""
    assert sorted(extender.ledger.allocation("uid-whole").memory_per_gpu) == [3]  # where the plan put it
    # the evicted pod itself (same owner) is not the replacement: not steered, and held back
    old = owned(pod("web-old", mem=8))
    assert ask(extender, "filter", old)["NodeNames"] == NODES
    assert bind(extender, old, "gpu-a") == ""
    assert sorted(extender.ledger.allocation("uid-web-old").memory_per_gpu) == [0]


def test_holds_expire_and_then_steer_and_hold_nothing():
    clock = Clock()
    extender = extender_of(clock)
    hold_for_the_web_replacement(extender, clock, seconds=30)
    new = owned(pod("web-new", mem=8))
    assert ask(extender, "filter", new)["NodeNames"] == ["gpu-a"]
    clock.now += 31
    assert ask(extender, "filter", new)["NodeNames"] == NODES
    assert ask(extender, "filter", pod("big", mem=24))["NodeNames"] == NODES
    assert len(extender.ledger.defrag_holds.expire()) == 2 and not extender.ledger.defrag_holds


def test_without_holds_filter_reads_no_owner():
    clock = Clock()
    extender = extender_of(clock)
    calls = []
    import extender.service as service

    original = service.controller_key
    service.controller_key = lambda p: calls.append(p) or original(p)
    try:
        ask(extender, "filter", owned(pod("web-x", mem=8)))
        assert calls == []
        hold_for_the_web_replacement(extender, clock)
        ask(extender, "filter", owned(pod("web-y", mem=8)))
        assert len(calls) == 1
    finally:
        service.controller_key = original
