"""The built-in demo cluster, as the v1 objects a real cluster would hold.

| node            | mode                   | GPUs      | already there                    |
|-----------------|------------------------|-----------|----------------------------------|
| gpu-core-a      | core_mem, binpack      | 4 × 15GiB | train-a: 4 GiB + 20 % on GPU 1   |
| gpu-core-b      | core_mem, binpack      | 4 × 15GiB | nothing                          |
| gpu-core-full   | core_mem, binpack      | 2 × 15GiB | 14 GiB + 40 % on each GPU        |
| gpu-cgpu-a      | cgpu, spread           | 2 × 22GiB | infer-a: 6 GiB on GPU 0 (V1 keys)|
| gpu-share-a     | share                  | 1 × 15GiB | nothing                          |
| gpu-whole-a     | not shared             | 2 whole   | nothing                          |

A 2 GiB + 30 % pod fits gpu-core-a (binpack puts it on GPU 1, beside
train-a, and scores that node highest) and gpu-core-b; every other node says
why not. Every node is Ready and labelled with its GPU model (Tesla-T4; the
cgpu node NVIDIA-A10, the whole-GPU node NVIDIA-A100-SXM4-80GB).
"""

from __future__ import annotations

from extender.ledger import annotations as A
from policy.names import GPU_CORE, GPU_COUNT, GPU_MEM, GPU_MODEL_LABEL, NODE_PLACEMENT, NODE_SCHEDULE, WHOLE_GPU

ASSUME_NS = 1_700_000_000_000_000_000


def _node(name: str, schedule: str | None, gpus: int, gib: int, placement: str = "binpack",
          model: str = "Tesla-T4") -> dict:
    labels = {"kubernetes.io/hostname": name, GPU_MODEL_LABEL: model}
    allocatable = {"cpu": "32", "memory": "128Gi", "pods": "110"}
    if schedule:
        labels[NODE_SCHEDULE] = schedule
        labels[NODE_PLACEMENT] = placement
        allocatable.update({GPU_MEM: str(gpus * gib), GPU_COUNT: str(gpus)})
        if schedule == "core_mem":
            allocatable[GPU_CORE] = str(100 * gpus)
    else:
        allocatable[WHOLE_GPU] = str(gpus)
    return {
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": name, "labels": labels},
        "status": {"allocatable": allocatable, "capacity": dict(allocatable),
                   "conditions": [{"type": "Ready", "status": "True"}]},
    }


def _pod(name: str, node: str, gib: int, core: int, annotations: dict) -> dict:
    limits = {GPU_MEM: str(gib)}
    if core:
        limits[GPU_CORE] = str(core)
    return {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": "default", "uid": f"demo-{name}", "annotations": annotations},
        "spec": {"nodeName": node, "schedulerName": "default-scheduler",
                 "containers": [{"name": "main", "image": "registry.example/cuda-sample:latest",
                                 "resources": {"limits": limits, "requests": dict(limits)}}]},
        "status": {"phase": "Running"},
    }


def demo_objects() -> list:
    """Nodes and bound pods of the demo cluster (see module doc)."""
    nodes = [
        _node("gpu-core-a", "core_mem", 4, 15),
        _node("gpu-core-b", "core_mem", 4, 15),
        _node("gpu-core-full", "core_mem", 2, 15),
        _node("gpu-cgpu-a", "cgpu", 2, 22, placement="spread", model="NVIDIA-A10"),
        _node("gpu-share-a", "share", 1, 15),
        _node("gpu-whole-a", None, 2, 0, model="NVIDIA-A100-SXM4-80GB"),
    ]
    for i, node in enumerate(nodes):
        node["status"]["addresses"] = [{"type": "InternalIP", "address": f"192.0.2.{10 + i}"}]
    pods = [
        _pod("train-a", "gpu-core-a", 4, 20, A.write({0: {1: 4}}, {0: {1: 20}}, 15, ASSUME_NS)),
        _pod("full-0", "gpu-core-full", 14, 40, A.write({0: {0: 14}}, {0: {0: 40}}, 15, ASSUME_NS)),
        _pod("full-1", "gpu-core-full", 14, 40, A.write({0: {1: 14}}, {0: {1: 40}}, 15, ASSUME_NS)),
        _pod("infer-a", "gpu-cgpu-a", 6, 0, {
            A.V1_INDEX: "0", A.V1_POD: "6", A.V1_DEVICE: "22", A.V1_ASSIGNED: "true",
            A.V1_ASSUME_TIME: str(ASSUME_NS)}),
    ]
    return nodes + pods
