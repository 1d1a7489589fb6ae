"""Synthetic clusters and pods for the load benchmark, as v1 objects.

A cluster of ``nodes`` nodes × ``gpus`` GPUs with a realistic mix: half core_mem
(memory and compute shared), a quarter cgpu, a tenth share, the rest whole-GPU
nodes that share nothing; GPU models of 15, 16, 22, 32 and 80 GiB; a fifth of
the sharing nodes spread, the rest binpack. Every sharing GPU is already
partly used by bound pods carrying V2/V1 annotations (a uniform fill between
empty and nearly full), so filter has real work to do on every node.
Deterministic for a seed.
"""

from __future__ import annotations

import numpy as np

from extender import annotations as A
from policy.names import GPU_CORE, GPU_COUNT, GPU_MEM, NODE_PLACEMENT, NODE_SCHEDULE, WHOLE_GPU

GPU_SIZES = (15, 16, 22, 32, 80)
MODES = ("core_mem", "cgpu", "share", None)
MODE_WEIGHTS = (0.5, 0.25, 0.1, 0.15)

# Pod shapes the driver schedules: (GiB, core %, gpu-count label or None).
POD_SHAPES = ((2, 30, None), (4, 50, None), (1, 10, None), (8, 25, None), (6, None, None), (3, None, None),
              (12, None, None), (8, None, 2))


def cluster_objects(nodes: int, gpus: int = 8, seed: int = 0) -> list:
    rng = np.random.default_rng(seed)
    objects = []
    pods = []
    for i in range(nodes):
        name = f"node-{i:05d}"
        mode = MODES[rng.choice(len(MODES), p=MODE_WEIGHTS)]
        size = int(rng.choice(GPU_SIZES))
        labels = {"kubernetes.io/hostname": name, "gpu-spec": f"gpu-{size}g"}
        allocatable = {"cpu": "96", "memory": "768Gi", "pods": "256"}
        if mode:
            labels[NODE_SCHEDULE] = mode
            labels[NODE_PLACEMENT] = "spread" if rng.random() < 0.2 else "binpack"
            allocatable.update({GPU_MEM: str(size * gpus), GPU_COUNT: str(gpus)})
            if mode == "core_mem":
                allocatable[GPU_CORE] = str(100 * gpus)
        else:
            allocatable[WHOLE_GPU] = str(gpus)
        objects.append({"apiVersion": "v1", "kind": "Node",
                        "metadata": {"name": name, "labels": labels, "resourceVersion": str(1000 + i)},
                        "status": {"allocatable": allocatable, "capacity": dict(allocatable)}})
        if not mode:
            continue
        for gpu in range(gpus):
            free_mem, free_core = size, 100
            target = rng.random()  # how full this GPU ends up
            while (size - free_mem) / size < target:
                mem = int(rng.integers(1, max(2, size // 3)))
                core = int(rng.integers(1, 6)) * 5 if mode == "core_mem" else 0
                if mem > free_mem or core > free_core:
                    break
                free_mem -= mem
                free_core -= core
                pods.append(_bound_pod(f"{name}-g{gpu}-{len(pods)}", name, gpu, size, mem, core))
    return objects + pods


def _bound_pod(name: str, node: str, gpu: int, size: int, mem: int, core: int) -> dict:
    limits = {GPU_MEM: str(mem)}
    if core:
        limits[GPU_CORE] = str(core)
    notes = A.write({0: {gpu: mem}}, {0: {gpu: core}} if core else {}, size, 1_700_000_000_000_000_000)
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": "load", "uid": f"uid-{name}", "annotations": notes},
            "spec": {"nodeName": node, "containers": [{"name": "main", "resources": {"limits": limits}}]},
            "status": {"phase": "Running"}}


def pending_pod(i: int, seed: int = 0) -> dict:
    """The i-th pod the driver schedules: a Job pod as kube-scheduler sends it."""
    mem, core, count = POD_SHAPES[(i * 7 + seed) % len(POD_SHAPES)]
    limits = {GPU_MEM: str(mem), "cpu": "2", "memory": "8Gi"}
    if core:
        limits[GPU_CORE] = str(core)
    labels = {"app": "load", "batch.kubernetes.io/job-name": f"load-{i}"}
    if count:
        labels["aliyun.com/gpu-count"] = str(count)
    name = f"load-{i:07d}"
    return {
        "metadata": {
            "name": name, "namespace": "load", "uid": f"uid-load-{seed}-{i:07d}", "labels": labels,
            "resourceVersion": str(50000 + i), "creationTimestamp": "2026-11-22T03:00:00Z",
            "managedFields": [{"manager": "kube-controller-manager", "operation": "Update", "apiVersion": "v1",
                               "fieldsType": "FieldsV1", "fieldsV1": {"f:metadata": {"f:labels": {}}}}],
        },
        "spec": {"containers": [{"name": "main", "image": "registry.example/train:1",
                                 "resources": {"limits": limits, "requests": dict(limits)}}],
                 "restartPolicy": "Never", "schedulerName": "default-scheduler", "priority": 0},
        "status": {"phase": "Pending", "qosClass": "Guaranteed"},
    }
