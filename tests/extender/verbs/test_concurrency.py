"""Concurrency is the normal case: kube-scheduler filters and prioritizes the
next pods while it binds earlier ones. Eight threads of filter, prioritize and
bind against one app, for every scoring strategy: no fault, every score in
0..10, every evaluation whole (a node that fits has a GPU choice and a finite
raw score: what a torn read of a row being written breaks), and no GPU over its
memory, compute or pod limit afterwards."""

import random

import orjson
import numpy as np
import pytest

from builders import container, node, pod, run_interleaved
from extender.cluster.embedded import EmbeddedCluster
from extender.serving.app import build_extender, create_app
from extender.serving.config import Config
from policy.scoring import STRATEGIES

PREFIX = "/cgpu-scheduler"
THREADS = 8
CALLS = 60  # per thread
NODES = 40


def cluster():
    nodes = []
    for i in range(NODES):
        schedule = ("core_mem", "cgpu", "share")[i % 3]
        nodes.append(node(f"n{i:03d}", schedule=schedule, gpus=(1, 2, 4, 8)[i % 4], gib=(15, 22, 80)[i % 3],
                          placement=("binpack", "spread")[i % 2]))
    return nodes


def a_pod(rng, thread, k):
    mem = rng.choice((1, 2, 3, 4, 6, 8, 12))
    core = rng.choice((None, None, 10, 25, 50))
    draw = rng.random()
    if draw < 0.1:
        p = pod(name=f"t{thread}-{k}", containers=[container(mem=mem), container(name="side", mem=1)])
    elif draw < 0.25:  # a multi-GPU pod: its memory on each of two GPUs
        p = pod(name=f"t{thread}-{k}", mem=mem, labels={"aliyun.com/gpu-count": "2"})
    else:
        p = pod(name=f"t{thread}-{k}", mem=mem, core=core)
    return p


def post(client, verb, payload):
    reply = client.post(f"{PREFIX}/{verb}", data=orjson.dumps(payload), content_type="application/json")
    return reply.status_code, orjson.loads(reply.data)


@pytest.mark.parametrize("scoring", sorted(STRATEGIES))
def test_eight_threads_of_filter_prioritize_and_bind(scoring, monkeypatch):
    torn = []
    config = Config(scoring=scoring)
    extender = build_extender(config, cluster=EmbeddedCluster(cluster(), source="test"))
    app = create_app(config, extender=extender)
    evaluate_rows = extender.ledger.evaluate_rows

    def checked(request, rows, score=True):  # what prioritize and bind are given
        result = evaluate_rows(request, rows, score)
        fits = result.feasible
        if (result.gpus[fits, :request.gpu_count] < 0).any() or (score and not np.isfinite(result.raw[fits]).all()):
            torn.append(scoring)
        return result

    monkeypatch.setattr(extender.ledger, "evaluate_rows", checked)
    # fragmentation keeps each node's parts with the pod only over many nodes: here over every view, so that
    # the shared kept rows are read and refreshed from all threads
    monkeypatch.setattr("policy.scoring.fragmentation.KEEP_FROM", 1)
    names = [n["metadata"]["name"] for n in cluster()]
    faults, bad_scores = [], []

    def work(thread):
        rng = random.Random(thread)
        client = app.test_client()
        for k in range(CALLS):
            p = a_pod(rng, thread, k)
            asked = rng.sample(names, rng.randint(1, len(names)))
            status, reply = post(client, "filter", {"Pod": p, "Nodes": None, "NodeNames": asked})
            if status != 200 or reply.get("Error"):
                faults.append(("filter", status, reply))
                continue
            fits = reply.get("NodeNames") or []
            status, scores = post(client, "prioritize", {"Pod": p, "Nodes": None, "NodeNames": asked})
            if status != 200 or not isinstance(scores, list):
                faults.append(("prioritize", status, scores))
                continue
            bad_scores.extend(s for s in scores if not (0 <= s["Score"] <= 10) or s["Host"] not in asked)
            if fits:
                meta = p["metadata"]
                status, reply = post(client, "bind", {"PodName": meta["name"], "PodNamespace": meta["namespace"],
                                                      "PodUID": meta["uid"], "Node": rng.choice(fits)})
                if status != 200:
                    faults.append(("bind", status, reply))

    run_interleaved(work, [(t,) for t in range(THREADS)], switch=1e-5)
    assert faults == []
    assert bad_scores == []
    assert torn == []
    report = orjson.loads(app.test_client().get(f"{PREFIX}/inspect").data)
    bound = 0
    for n in report["nodes"]:
        limit = n["maxPodsPerGPU"]
        for g in n["gpus"]:
            assert g["memory"]["used"] <= g["memory"]["total"], (n["name"], g)
            assert g["core"]["used"] <= g["core"]["total"] or n["sharing"] != "core_mem", (n["name"], g)
            assert limit is None or len(g["pods"]) <= limit
            assert sum(p["memory"] for p in g["pods"]) == g["memory"]["used"]
            bound += len(g["pods"])
    assert bound > THREADS  # the run bound pods, it did not only refuse
