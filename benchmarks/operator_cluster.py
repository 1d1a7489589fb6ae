"""A cluster as an operator's GPU map sees it: pools, GPU models, readiness, cordons, pending pods.

The load benchmark's synthetic cluster (``benchmarks.synthetic``: nodes × 8
GPUs, partly used by bound pods shaped after the openb trace), with each node
in one of ``pools_per_model`` node pools of its GPU model
(``alibabacloud.com/nodepool-id``), labelled with the GPU model of its GPU size, Ready but for one in 50 (NotReady) and
one in 70 cordoned, plus ``pending`` unbound pods: small ones that fit now,
whole-node ones of a pool that need a new node, and a few that no pool can
take. Deterministic for a seed. What the GPU map's browser test renders and
``benchmarks.mapfeed`` measures.
"""

from __future__ import annotations

import numpy as np

from benchmarks.synthetic import cluster_objects
from policy.names import GPU_COUNT, GPU_MEM, GPU_MODEL_LABEL, NODE_SCHEDULE

POOL_LABEL = "alibabacloud.com/nodepool-id"
MODELS = {15: "Tesla-T4", 16: "Tesla-V100-SXM2-16GB", 22: "NVIDIA-A10", 32: "Tesla-V100-SXM2-32GB",
          80: "NVIDIA-A100-SXM4-80GB"}
POOLS = {15: "t4", 16: "v100-16g", 22: "a10", 32: "v100-32g", 80: "a100"}


def operator_objects(nodes: int, pending: int = 40, pools_per_model: int = 2, seed: int = 1) -> list:
    """Nodes, bound pods and ``pending`` pods (see module doc)."""
    objects = cluster_objects(nodes, seed=seed)
    rng = np.random.default_rng(seed)
    pool_nodes: dict = {}
    for obj in objects:
        if obj["kind"] != "Node":
            continue
        labels, status = obj["metadata"]["labels"], obj["status"]
        index = int(obj["metadata"]["name"].split("-")[1])
        size = int(labels["gpu-spec"][4:-1])
        pool = f"np-{POOLS[size]}-{index % pools_per_model}"
        labels[POOL_LABEL] = pool
        labels[GPU_MODEL_LABEL] = MODELS[size]
        status["conditions"] = [{"type": "Ready", "status": "False" if index % 50 == 7 else "True",
                                 "lastHeartbeatTime": "2026-11-22T03:00:00Z"}]
        if index % 70 == 3:
            obj["spec"] = {"unschedulable": True}
        if labels.get(NODE_SCHEDULE):
            pool_nodes.setdefault(pool, (labels[NODE_SCHEDULE], int(obj["status"]["allocatable"][GPU_MEM]),
                                         int(obj["status"]["allocatable"][GPU_COUNT])))
    memory_pools = sorted(p for p, (mode, _, _) in pool_nodes.items() if mode != "core_mem")
    for i in range(pending):
        kind = i % 8
        minute = 59 - (i * 37) % 60
        if kind < 5:  # small: fits some node now
            limits = {GPU_MEM: str(int(rng.choice([1, 2, 3, 4, 6])))}
            selector = None
        elif kind < 7 and memory_pools:  # a whole node of a memory pool: a new node of that pool
            pool = memory_pools[i % len(memory_pools)]
            _, memory, count = pool_nodes[pool]
            limits = {GPU_MEM: str(memory)}
            selector = {POOL_LABEL: pool}
            extra = {"aliyun.com/gpu-count": str(count)}
        else:  # larger than any GPU: unplaceable
            limits = {GPU_MEM: "96"}
            selector = None
        name = f"job-{i:04d}"
        meta = {"name": name, "namespace": f"team-{i % 4}", "uid": f"uid-{name}",
                "creationTimestamp": f"2026-11-22T02:{minute:02d}:00Z"}
        if kind in (5, 6) and memory_pools:
            meta["labels"] = extra
        spec = {"schedulerName": "default-scheduler",
                "containers": [{"name": "main", "resources": {"limits": limits, "requests": dict(limits)}}]}
        if selector:
            spec["nodeSelector"] = selector
        objects.append({"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec,
                        "status": {"phase": "Pending"}})
    return objects


def write_cluster(path, objects: list) -> str:
    """A cluster file (JSON, which ``serve --cluster`` reads as YAML, faster) of ``objects``; its path."""
    import orjson

    path.write_bytes(orjson.dumps({"apiVersion": "v1", "kind": "List", "items": objects}))
    return str(path)


def learn_mix(url: str, shapes: int = 8) -> list:
    """Filter the load driver's first ``shapes`` pod shapes over every node of the extender at ``url`` (so it
    learns the workload's mix and measures what is stranded); the node names."""
    import json
    import urllib.request

    from benchmarks.synthetic import pending_pod

    with urllib.request.urlopen(f"{url}/inspect?compact=1", timeout=60) as reply:
        names = [n["name"] for n in json.loads(reply.read())["nodes"]]
    for i in range(shapes):
        body = json.dumps({"Pod": pending_pod(i), "Nodes": None, "NodeNames": names}).encode()
        request = urllib.request.Request(f"{url}/filter", data=body, headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(request, timeout=60) as reply:
            reply.read()
    return names
