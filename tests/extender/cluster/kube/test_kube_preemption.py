"""Preemption against the fake API: PodDisruptionBudgets counted from the API, and the
room a nominated preemptor waits for held from lower- and equal-priority pods."""

import orjson

from builders import node, pod, running_pod
from fakekube import wait_until
from kubesteps import bind, create_pending, filter_, synced, used


def running(name, gpu, gib, priority, labels=None):
    return running_pod(name, "gpu-a", gpu, gib, priority, labels=labels)


def pending(name, gib, priority, nominated=None):
    p = pod(name, mem=gib)
    p["spec"]["priority"] = priority
    if nominated:
        p["status"]["nominatedNodeName"] = nominated
    return p


def preempt(extender, preemptor, victims):
    body, status = extender.preempt(orjson.dumps({"Pod": preemptor, "NodeNameToMetaVictims": victims}))
    assert status == 200
    return orjson.loads(body)["NodeNameToMetaVictims"]


def test_a_budget_that_allows_no_disruption_steers_the_victims_and_is_counted(kube, started):
    residents = [running("guarded", 0, 20, 0, labels={"app": "db"}),
                 running("a", 1, 10, 10, labels={"app": "web"}), running("b", 1, 10, 10, labels={"app": "web"})]
    kube.create("poddisruptionbudgets", {"metadata": {"name": "db", "namespace": "default"},
                                         "spec": {"selector": {"matchLabels": {"app": "db"}}},
                                         "status": {"disruptionsAllowed": 0}})
    extender, _ = synced(started, kube, [node("gpu-a", "cgpu", gpus=2, gib=22)], residents)
    wait_until(lambda: len(extender.ledger.allocations()) == 3, what="the residents")
    urgent = pending("urgent", 20, 1000)
    victims = preempt(extender, urgent, {"gpu-a": {"Pods": [], "NumPDBViolations": 0}})["gpu-a"]
    assert {v["UID"] for v in victims["Pods"]} == {"uid-a", "uid-b"} and victims["NumPDBViolations"] == 0
    # a preemptor above the guarded pod only (priority 0 < 5 < 10): it is named, its violation counted
    victims = preempt(extender, pending("urgent2", 20, 5), {"gpu-a": {"Pods": [], "NumPDBViolations": 0}})
    assert victims["gpu-a"] == {"Pods": [{"UID": "uid-guarded"}], "NumPDBViolations": 1}
    assert ("GET", "/apis/policy/v1/poddisruptionbudgets") in kube.requests


def test_the_freed_room_is_held_for_the_nominated_preemptor(kube, started):
    extender, _ = synced(started, kube, [node("gpu-a", "cgpu", gpus=1, gib=22)], [running("victim", 0, 20, 0)])
    wait_until(lambda: len(extender.ledger.allocations()) == 1, what="the victim")
    urgent = create_pending(kube, "urgent", mem=20)
    urgent["spec"]["priority"] = 1000
    urgent["status"]["nominatedNodeName"] = "gpu-a"  # what kube-scheduler sets after preempting
    kube.update("pods", urgent)
    kube.delete("pods", "victim")
    wait_until(lambda: used(extender, "gpu-a")[0] == [0] and extender.ledger.nominations(), what="victim gone")
    for name, priority in (("sneaky", 0), ("peer", 1000)):  # lower and equal priority: kept off the room
        other = create_pending(kube, name, mem=4)
        other["spec"]["priority"] = priority
        reply = filter_(extender, other, ["gpu-a"])
        assert reply["NodeNames"] == [] and reply["FailedNodes"] == {"gpu-a": "insufficient free GPU memory"}
        assert "no longer fits" in bind(extender, other, "gpu-a")
    higher = create_pending(kube, "higher", mem=2)
    higher["spec"]["priority"] = 2000  # a higher-priority pod is not held back (kube-scheduler's rule)
    assert filter_(extender, higher, ["gpu-a"])["NodeNames"] == ["gpu-a"]
    assert filter_(extender, urgent, ["gpu-a"])["NodeNames"] == ["gpu-a"]
    assert bind(extender, urgent, "gpu-a") == ""
    assert extender.ledger.nominations() == {}
    assert used(extender, "gpu-a")[0] == [20]
