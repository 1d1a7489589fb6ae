"""Clusters the defragmentation tests share, as v1 objects: pods owned by controllers, budgets."""

from __future__ import annotations

from builders import node, pod, running_pod


def owned(p: dict, owner: str = "web", kind: str = "ReplicaSet") -> dict:
    """``p`` owned by the controller ``owner`` (uid ``rs-<owner>``), labelled ``app=<owner>``."""
    p["metadata"]["ownerReferences"] = [{"apiVersion": "apps/v1", "kind": kind, "name": owner,
                                         "uid": f"rs-{owner}", "controller": True}]
    p["metadata"].setdefault("labels", {})["app"] = owner
    return p


def resident(name: str, node_name: str, gpu: int, gib: int, owner: str = "web", **kwargs) -> dict:
    return owned(running_pod(name, node_name, gpu, gib, 0, gpu_memory=24, **kwargs), owner)


def waiting(name: str, gib: int, created: str = "2026-11-22T03:00:00Z", priority: int = 0) -> dict:
    p = pod(name, mem=gib)
    p["metadata"]["creationTimestamp"] = created
    p["spec"]["priority"] = priority
    return p


def budget(allowed: int, app: str = "web", name: str = "web") -> dict:
    return {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
            "metadata": {"name": name, "namespace": "default"},
            "spec": {"selector": {"matchLabels": {"app": app}}}, "status": {"disruptionsAllowed": allowed}}


def thirds(budget_allowed: int | None = None) -> list:
    """Two cgpu nodes of 2 x 24 GiB, every GPU a third full with a web replica; a pod wants a whole GPU."""
    objects = [node("gpu-a", "cgpu", gpus=2, gib=24), node("gpu-b", "cgpu", gpus=2, gib=24)]
    objects += [resident(f"web-{n}{g}", f"gpu-{n}", g, 8) for n in "ab" for g in range(2)]
    objects.append(waiting("whole", 24))
    if budget_allowed is not None:
        objects.append(budget(budget_allowed))
    return objects
