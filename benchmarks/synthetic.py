"""Synthetic clusters and pods for the load benchmark, as v1 objects.

A cluster of ``nodes`` nodes × ``gpus`` GPUs with a realistic mix: half core_mem
(memory and compute shared), a quarter cgpu, a tenth share, the rest whole-GPU
nodes that share nothing; GPU models of 15, 16, 22, 32 and 80 GiB; a fifth of
the sharing nodes spread, the rest binpack. Sharing GPUs are already partly used
by bound pods carrying V2/V1 annotations, shaped after the openb trace
(Alibaba GPU cluster trace v2023, default pod list): there, at 100 % arrived
workload, there are 1.16 GPU pods per GPU, 58 % of them whole-GPU pods, and
sharing pods ask for 0.56 of a GPU on average (histogram below). Here each
sharing GPU is empty (20 %), holds one whole-GPU pod (25 %), one sharing pod
(40 %) or two (15 %), a second one only where it still fits: about 0.86 pods
per sharing GPU. Deterministic for a seed.
"""

from __future__ import annotations

import numpy as np

from extender.ledger import annotations as A
from policy.names import GPU_CORE, GPU_COUNT, GPU_MEM, NODE_PLACEMENT, NODE_SCHEDULE, WHOLE_GPU

GPU_SIZES = (15, 16, 22, 32, 80)
MODES = ("core_mem", "cgpu", "share", None)
MODE_WEIGHTS = (0.5, 0.25, 0.1, 0.15)

# Sharing pods' share of one GPU in openb's default pod list, by tenths (counts).
SHARE_TENTHS = np.array([1, 2, 3, 4, 5, 6, 8])
SHARE_WEIGHTS = np.array([99, 207, 388, 899, 147, 253, 1078]) / 3071
OCCUPANCY = ((0, 0.20), ("whole", 0.25), (1, 0.40), (2, 0.15))

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
        kinds = [k for k, _ in OCCUPANCY]
        for gpu in range(gpus):
            kind = kinds[rng.choice(len(OCCUPANCY), p=[p for _, p in OCCUPANCY])]
            if kind == "whole":
                shares = [10]
            else:
                shares = rng.choice(SHARE_TENTHS, size=kind, p=SHARE_WEIGHTS).tolist()
                while sum(shares) > 10:
                    shares.pop()
            free = size
            for tenths in shares:
                mem = max(1, -(-size * tenths // 10))
                if mem > free:
                    break
                free -= mem
                core = tenths * 10 if mode == "core_mem" else 0
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
