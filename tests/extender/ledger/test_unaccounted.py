"""Unaccounted pods (bound, asking for shared GPU, no allocation annotation) are held
back on every GPU of their node, and a malformed object never stops the extender:
it is skipped (or held, if it is a bound GPU pod), logged and listed in inspect."""

import orjson
import yaml

from builders import node, pod
from extender.cluster.embedded import EmbeddedCluster
from extender.serving.app import build_extender, create_app
from extender.serving.config import Config

PREFIX = "/cgpu-scheduler"
MEM, CORE = "aliyun.com/gpu-mem", "aliyun.com/gpu-core.percentage"


def client_of(objects):
    return create_app(Config(), extender=build_extender(Config(), cluster=EmbeddedCluster(objects, "test"))) \
        .test_client()


def filter_(client, p, names):
    reply = client.post(f"{PREFIX}/filter", data=orjson.dumps({"Pod": p, "NodeNames": names}),
                        content_type="application/json")
    assert reply.status_code == 200
    return orjson.loads(reply.data)


def bind(client, p, node_name):
    meta = p["metadata"]
    reply = client.post(f"{PREFIX}/bind", data=orjson.dumps({"PodName": meta["name"], "PodNamespace": meta["namespace"],
                                                             "PodUID": meta["uid"], "Node": node_name}),
                        content_type="application/json")
    return orjson.loads(reply.data)["Error"]


def inspect(client):
    return orjson.loads(client.get(f"{PREFIX}/inspect").data)


def test_an_unaccounted_pod_is_held_on_every_gpu_so_the_node_is_never_overfilled():
    # 4 GPUs × 15 GiB; a 12 GiB pod runs on one of them, we do not know which
    client = client_of([node("a", "cgpu", gpus=4, gib=15), pod("rogue", mem=12, node_name="a")])
    gpus = inspect(client)["nodes"][0]["gpus"]
    assert [g["memory"]["used"] for g in gpus] == [12, 12, 12, 12]
    bound = []
    for i in range(10):  # 3 GiB pods: each GPU takes one beside the rogue's 12, whichever GPU it is on
        p = pod(f"p{i}", mem=3)
        if filter_(client, p, ["a"])["NodeNames"] == ["a"]:
            assert bind(client, p, "a") == ""
            bound.append(p)
    assert len(bound) == 4
    assert all(g["memory"]["used"] <= g["memory"]["total"] for g in inspect(client)["nodes"][0]["gpus"])
    assert filter_(client, pod("more", mem=1), ["a"])["NodeNames"] == []


def test_a_memory_only_unaccounted_pod_keeps_compute_pods_off_its_node():
    client = client_of([node("a", "core_mem", gpus=2, gib=15), pod("rogue", mem=2, node_name="a")])
    reply = filter_(client, pod("both", mem=2, core=30), ["a"])
    assert reply["NodeNames"] == [] and "another GPU-sharing mode" in str(reply["FailedNodes"]) + str(
        reply["FailedAndUnresolvableNodes"])


def test_the_hold_goes_when_the_pod_is_annotated_or_gone():
    rogue = pod("rogue", mem=12, node_name="a")
    cluster = EmbeddedCluster([node("a", "cgpu", gpus=2, gib=15), rogue], "test")
    extender = build_extender(Config(), cluster=cluster)
    extender.ledger.forget_pod(rogue["metadata"]["uid"])
    assert extender.ledger.state.array("mem_used")[0, :2].tolist() == [0, 0]
    assert extender.ledger.unaccounted() == []


def test_one_malformed_object_of_each_kind_does_not_stop_the_server(tmp_path):
    bad_count = pod("bad-count", mem=4, node_name="a")
    bad_count["metadata"]["labels"]["aliyun.com/gpu-count"] = "²"
    bad_cpu = pod("bad-cpu", mem=2, node_name="a")
    bad_cpu["spec"]["containers"][0]["resources"]["limits"]["cpu"] = "9" * 5000
    bad_annotation = pod("bad-annotation", mem=2, node_name="b")
    bad_annotation["metadata"]["annotations"] = {"ALIYUN_COM_GPU_MEM_IDX": "²", "ALIYUN_COM_GPU_MEM_POD": "2",
                                                 "aliyun.com/gpu-mem-allocation": '{"0": {"100000": 2}}'}
    spec_list = pod("spec-a-list", mem=2, node_name="a")
    spec_list["spec"] = ["not", "an", "object"]
    huge_node = node("huge", "cgpu", gpus=1, gib=15)
    huge_node["status"]["allocatable"]["aliyun.com/gpu-count"] = str(10**12)
    nameless = node("x", "cgpu")
    nameless["metadata"]["name"] = ["x"]
    labels_string = node("labels-string", "cgpu")
    labels_string["metadata"]["labels"] = "a=b"
    objects = [node("a", "cgpu", gpus=2, gib=15), node("b", "cgpu", gpus=2, gib=15), huge_node, nameless,
               labels_string, bad_count, bad_cpu, bad_annotation, spec_list]
    path = tmp_path / "cluster.yaml"
    path.write_text(yaml.safe_dump({"apiVersion": "v1", "kind": "List", "items": objects}))
    client = create_app(Config(cluster_file=str(path))).test_client()
    assert client.get(f"{PREFIX}/readyz").status_code == 200
    report = inspect(client)
    names = {n["name"]: n for n in report["nodes"]}
    assert "count" not in names and names["huge"]["problem"].startswith("node advertises more GPU")
    held = {u["name"]: u for n in report["nodes"] for u in n["unaccounted"]}
    assert held["bad-count"]["memory"] is None  # unreadable request: each GPU held whole
    # a: bad-count held whole (15 per GPU) and bad-cpu's 2 GiB (its CPU request counts 0) on each GPU
    assert [g["memory"]["used"] for g in names["a"]["gpus"]] == [17, 17]
    assert held["bad-annotation"]["node"] == "b"  # annotation out of range: held as unaccounted
    malformed = {(m["kind"], m["name"]) for m in report["malformedObjects"]}
    assert ("Pod", "default/spec-a-list") in malformed and ("Node", "?") in malformed  # the nameless node
    assert ("Node", "labels-string") in malformed or "labels-string" in names
    assert filter_(client, pod("new", mem=1), ["a", "b"])["NodeNames"] == ["b"]  # a is held whole
