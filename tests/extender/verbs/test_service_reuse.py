"""What the service keeps between calls never makes a reply differ from a fresh one."""

import orjson

import extender.verbs.service as service_module
from builders import node, pod
from extender.cluster.embedded import EmbeddedCluster
from extender.serving.app import build_extender
from extender.serving.config import Config

NODES = ["a", "b"]


def extender_with(*nodes):
    return build_extender(Config(), cluster=EmbeddedCluster(list(nodes), source="test"), clock=lambda: 1)


def ask(extender, verb, p, names=NODES):
    return orjson.loads(getattr(extender, verb)(orjson.dumps({"Pod": p, "Nodes": None, "NodeNames": names})))


def bind(extender, p, target):
    return orjson.loads(extender.bind(orjson.dumps({"PodName": p["metadata"]["name"], "PodNamespace": "default",
                                                    "PodUID": p["metadata"]["uid"], "Node": target})))["Error"]


def test_a_pod_is_parsed_once_per_uid_and_version_and_once_per_workload(monkeypatch):
    calls = []
    real = service_module.parse_pod_request
    monkeypatch.setattr(service_module, "parse_pod_request", lambda p: calls.append(1) or real(p))
    extender = extender_with(node("a", gpus=1, gib=16), node("b", gpus=1, gib=16))
    p = pod("job-0", mem=4, core=30)
    p["metadata"]["resourceVersion"] = "7"
    ask(extender, "filter", p)
    ask(extender, "prioritize", p)
    assert bind(extender, p, "a") == ""
    assert len(calls) == 1
    replica = pod("job-1", mem=4, core=30)  # another pod of the same workload
    replica["metadata"]["resourceVersion"] = "8"
    assert ask(extender, "filter", replica)["NodeNames"] == ["a", "b"]
    assert len(calls) == 1
    replica["metadata"]["resourceVersion"] = "9"  # e.g. its gpu-count label was edited
    replica["metadata"]["labels"] = {"aliyun.com/gpu-count": "3"}
    reply = ask(extender, "filter", replica)
    assert len(calls) == 2  # parsed again: now it asks for GPU-count with compute
    assert reply["NodeNames"] == [] and "cannot be combined" in reply["FailedAndUnresolvableNodes"]["a"]


def test_replies_follow_every_change_between_pods_of_one_shape():
    extender = extender_with(node("a", gpus=1, gib=16), node("b", gpus=1, gib=16))
    first, second, third = (pod(f"rep-{i}", mem=10, core=50) for i in range(3))
    assert ask(extender, "filter", first)["NodeNames"] == NODES
    assert bind(extender, first, "a") == ""
    reply = ask(extender, "filter", second)  # same shape, same node list: only a's fit changed
    assert reply["NodeNames"] == ["b"] and reply["FailedNodes"] == {"a": "insufficient free GPU memory"}
    assert bind(extender, second, "b") == ""
    assert ask(extender, "filter", third)["NodeNames"] == []
    extender.cluster.delete_pod("default", "rep-0")
    assert ask(extender, "filter", third)["NodeNames"] == ["a"]


def test_prioritize_after_filter_reads_the_remembered_list_and_scores_the_change():
    extender = extender_with(*(node(n, gpus=2, gib=16) for n in "abc"))
    names = ["a", "b", "c"]
    p = pod("x", mem=4, core=10)
    assert ask(extender, "filter", p, names)["NodeNames"] == names
    assert {s["Score"] for s in ask(extender, "prioritize", p, names)} == {10}  # all empty: all tie
    assert bind(extender, p, "b") == ""
    q = pod("y", mem=4, core=10)
    assert ask(extender, "filter", q, names)["NodeNames"] == names
    scores = {s["Host"]: s["Score"] for s in ask(extender, "prioritize", q, names)}
    assert scores["b"] == 10 and scores["a"] == scores["c"] < 10  # binpack: b now the fullest
