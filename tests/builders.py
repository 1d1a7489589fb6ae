"""Builders for the v1 objects tests feed the extender, shaped as the API server sends them."""

from __future__ import annotations

import itertools

from policy.names import GPU_CORE, GPU_COUNT, GPU_MEM

_uids = itertools.count()


def node(name: str, schedule: str | None = "core_mem", gpus: int = 4, gib: int = 15, placement: str | None = None,
         max_pod: str | None = None, core_per_gpu: int = 100) -> dict:
    labels = {"kubernetes.io/hostname": name}
    allocatable = {"cpu": "32", "memory": "128Gi", "pods": "110"}
    if schedule is not None:
        labels["ack.node.gpu.schedule"] = schedule
        allocatable[GPU_MEM] = str(gpus * gib)
        allocatable[GPU_COUNT] = str(gpus)
        if schedule == "core_mem":
            allocatable[GPU_CORE] = str(core_per_gpu * gpus)
    if placement is not None:
        labels["ack.node.gpu.placement"] = placement
    if max_pod is not None:
        labels["ack.node.gpu.max-pod"] = max_pod
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": labels},
            "status": {"allocatable": allocatable, "capacity": dict(allocatable)}}


def container(name: str = "main", mem=None, core=None, requests: bool = True) -> dict:
    limits = {}
    if mem is not None:
        limits[GPU_MEM] = mem if isinstance(mem, str) else str(mem)
    if core is not None:
        limits[GPU_CORE] = core if isinstance(core, str) else str(core)
    resources = {"limits": limits}
    if requests:
        resources["requests"] = dict(limits)
    return {"name": name, "image": "registry.example/cuda:12", "resources": resources}


def pod(name: str = None, mem=2, core=None, containers: list | None = None, labels: dict | None = None,
        uid: str | None = None, namespace: str = "default", node_name: str | None = None) -> dict:
    name = name or f"pod-{next(_uids)}"
    return {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace, "uid": uid or f"uid-{name}", "labels": labels or {}},
        "spec": {"containers": containers if containers is not None else [container(mem=mem, core=core)],
                 **({"nodeName": node_name} if node_name else {})},
        "status": {"phase": "Pending"},
    }


def scheduler_pod(name: str = "cuda-sample-7x9kq", uid: str = "6c2f8d0e-5b1a-4c3e-9f7d-2a8b4c6d1e0f") -> dict:
    """A Pod exactly as kube-scheduler serialises it: managedFields, init containers, defaults filled in."""
    return {
        "metadata": {
            "name": name, "generateName": "cuda-sample-", "namespace": "default", "uid": uid,
            "resourceVersion": "48213", "creationTimestamp": "2026-11-22T03:00:00Z",
            "labels": {"app": "cuda-sample", "batch.kubernetes.io/job-name": "cuda-sample"},
            "ownerReferences": [{"apiVersion": "batch/v1", "kind": "Job", "name": "cuda-sample",
                                 "uid": "0b7d", "controller": True, "blockOwnerDeletion": True}],
            "managedFields": [{"manager": "kube-controller-manager", "operation": "Update", "apiVersion": "v1",
                               "time": "2026-11-22T03:00:00Z", "fieldsType": "FieldsV1",
                               "fieldsV1": {"f:metadata": {"f:labels": {".": {}, "f:app": {}}}}}],
        },
        "spec": {
            "initContainers": [{"name": "fetch", "image": "busybox",
                                "resources": {"limits": {"cpu": "100m"}, "requests": {"cpu": "100m"}}}],
            "containers": [{
                "name": "cuda-sample", "image": "registry.example/cuda-sample:vectoradd",
                "command": ["vectorAdd"],
                "resources": {"limits": {GPU_MEM: "2", GPU_CORE: "30", "cpu": "1", "memory": "1Gi"},
                              "requests": {GPU_MEM: "2", GPU_CORE: "30", "cpu": "1", "memory": "1Gi"}},
                "terminationMessagePath": "/dev/termination-log", "terminationMessagePolicy": "File",
                "imagePullPolicy": "IfNotPresent"}],
            "restartPolicy": "Never", "terminationGracePeriodSeconds": 30, "dnsPolicy": "ClusterFirst",
            "serviceAccountName": "default", "schedulerName": "default-scheduler",
            "tolerations": [{"key": "scaler", "operator": "Equal", "value": "gpu", "effect": "NoSchedule"}],
            "priority": 0, "enableServiceLinks": True, "preemptionPolicy": "PreemptLowerPriority",
        },
        "status": {"phase": "Pending", "qosClass": "Burstable"},
    }


def run_interleaved(target, arguments: list, switch: float = 1e-6) -> None:
    """Run ``target(*args)`` for each of ``arguments`` in threads started together, switching
    between threads as often as the interpreter allows (interleavings a default run
    would rarely meet), and wait for all."""
    import sys
    import threading

    threads = [threading.Thread(target=target, args=args) for args in arguments]
    interval = sys.getswitchinterval()
    sys.setswitchinterval(switch)
    try:
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    finally:
        sys.setswitchinterval(interval)


def running_pod(name: str, node_name: str, gpu: int, gib: int, priority: int, gpu_memory: int = 22,
                created: str = "2026-01-01T00:00:00Z", labels: dict | None = None) -> dict:
    """A running pod holding ``gib`` on GPU ``gpu`` of ``node_name`` (V2 annotations), with a priority."""
    from extender.ledger import annotations as A

    p = pod(name, mem=gib, node_name=node_name, labels=labels)
    p["metadata"]["annotations"] = A.write({0: {gpu: gib}}, {}, gpu_memory, 1)
    p["metadata"]["creationTimestamp"] = created
    p["spec"]["priority"] = priority
    p["status"] = {"phase": "Running", "startTime": created}
    return p
