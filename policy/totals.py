"""What cluster-autoscaler sees of shared GPUs: GPU memory and compute as one free number per node.

cluster-autoscaler simulates kube-scheduler's in-tree plugins, never its
extenders: for ``aliyun.com/gpu-mem`` (and ``gpu-core.percentage``) it
compares a pod's request with the node's allocatable less the requests of the
pods on it, totals over the node's GPUs. :func:`own_scale_up` estimates the
new nodes it adds *by itself* for the pods the plan sends to new nodes:

* the pods are taken in the plan's order; one that fits, by those totals, a
  node it is allowed on (first fit by row, each taking its room) looks
  schedulable to cluster-autoscaler, which adds no node for it — such pods
  are what only placeholders get nodes for;
* the others it scales up for itself: per pool (the one the plan chose),
  first-fit decreasing of their totals on the pool's node,

      nodes(pool) = bins of FFD({(GiB, compute) of its pods}, (GPUs × GiB, GPUs × compute))

  an estimate of its binpacking estimator, which also weighs CPU and memory
  and packs in an order of its own: it may add more nodes than this (extra
  nodes, empty, are scaled down later) or, rarely, fewer (the pods still
  pending when its nodes joined are planned again).
"""

from __future__ import annotations

import numpy as np

from policy.planner import Plan, placement_order, signature
from policy.selectors import NodeTable, allowed
from policy.state import ClusterState


def looks_schedulable(state: ClusterState, nodes, pods) -> set:
    """Refs of the pods cluster-autoscaler's simulation puts on existing nodes by their totals (first fit
    by row over the nodes each pod may use, in the plan's order, each taking its room)."""
    view = state.view_live()
    free_mem = (view.mem_total - view.mem_used).sum(axis=1)
    free_core = (view.core_total - view.core_used).sum(axis=1)
    table = NodeTable.of(list(state.names), nodes)
    admitted: dict = {}
    placed = set()
    for _, pod in placement_order(list(pods)):
        request = pod.request
        key = signature(pod)
        room = admitted.get(key)
        if room is None:
            room = admitted[key] = allowed(table, pod.node_selector, pod.node_affinity, pod.tolerations)
        at = np.flatnonzero(room & (free_mem >= request.memory) & (free_core >= request.core))
        if len(at):
            free_mem[at[0]] -= request.memory
            free_core[at[0]] -= request.core
            placed.add(pod.ref)
    return placed


def own_scale_up(state: ClusterState, nodes, pools: dict, pods, result: Plan) -> dict:
    """pool → new nodes cluster-autoscaler adds by itself for the plan's pods (see module doc)."""
    to_pool = {p.pod: name for name, pool_plan in result.pools.items() for p in pool_plan.placements}
    if not to_pool:
        return {}
    schedulable = looks_schedulable(state, nodes, pods)
    seen: dict = {}  # pool → [(GiB, compute)] of the pods it sees unschedulable
    for _, pod in placement_order(list(pods)):
        if pod.ref in to_pool and pod.ref not in schedulable:
            seen.setdefault(to_pool[pod.ref], []).append((pod.request.memory, pod.request.core))
    return {name: _bins(sizes, pools[name]) for name, sizes in seen.items()}


def _bins(sizes: list, pool) -> int:
    """First-fit decreasing of ``(GiB, compute)`` items into nodes of ``pool`` by their totals."""
    spec = pool.spec
    capacity = (spec.gpu_count * spec.memory_per_gpu, spec.gpu_count * spec.core_per_gpu)
    bins: list = []
    for memory, core in sorted(sizes, reverse=True):
        for room in bins:
            if room[0] >= memory and room[1] >= core:
                room[0] -= memory
                room[1] -= core
                break
        else:
            bins.append([capacity[0] - memory, capacity[1] - core])
    return len(bins)
