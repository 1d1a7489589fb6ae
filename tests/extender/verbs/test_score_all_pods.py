"""score_all_pods: the strategy also scores (and learns from) pods that ask for no shared GPU."""

import copy

import orjson

from builders import node, pod
from extender.cluster.embedded import EmbeddedCluster
from extender.serving.app import build_extender
from extender.serving.config import Config

NODES = [node("busy", "cgpu", gpus=2, gib=16), node("idle", "cgpu", gpus=2, gib=16)]
NAMES = ["busy", "idle"]


def cpu_pod(name: str) -> dict:
    return pod(name, containers=[{"name": "web", "resources": {"requests": {"cpu": "2", "memory": "1Gi"}}}])


def extender(score_all_pods: bool, scoring: str = "binpack"):
    service = build_extender(Config(scoring=scoring, score_all_pods=score_all_pods),
                             cluster=EmbeddedCluster(copy.deepcopy(NODES), source="test"), clock=lambda: 1)
    gpu = pod("gpu", mem=8)
    service.filter(orjson.dumps({"Pod": gpu, "Nodes": None, "NodeNames": NAMES}))
    assert orjson.loads(service.bind(orjson.dumps({"PodName": "gpu", "PodNamespace": "default",
                                                   "PodUID": "uid-gpu", "Node": "busy"}))) == {"Error": ""}
    return service


def verbs(service, p) -> tuple:
    body = orjson.dumps({"Pod": p, "Nodes": None, "NodeNames": NAMES})
    return (orjson.loads(service.filter(body))["NodeNames"],
            {s["Host"]: s["Score"] for s in orjson.loads(service.prioritize(body))})


def test_off_pods_without_gpu_pass_through_unscored():
    assert verbs(extender(False), cpu_pod("web")) == (NAMES, {"busy": 0, "idle": 0})


def test_on_the_strategy_scores_them_and_bind_leaves_their_gpus_alone():
    service = extender(True)
    names, scores = verbs(service, cpu_pod("web"))
    assert names == NAMES and scores == {"busy": 10, "idle": 0}  # binpack: the node whose GPUs are fuller
    reply = service.bind(orjson.dumps({"PodName": "web", "PodNamespace": "default", "PodUID": "uid-web",
                                       "Node": "idle"}))
    assert orjson.loads(reply) == {"Error": ""}
    assert service.ledger.allocation("uid-web") is None
    assert service.ledger.host_use("uid-web").cpu == 2000  # counted from the bound pod


def test_on_a_learning_strategy_sees_them_once():
    service = extender(True, scoring="fragmentation")
    web = cpu_pod("web")
    verbs(service, web)
    verbs(service, web)
    shapes = service.ledger.strategy.mix.shapes()
    assert sorted(shapes.weight.tolist()) == [1, 1]  # the GPU pod and the web pod, each once
    assert 0 in shapes.count.tolist()
