"""Room held for nominated pods: what a node looks like to a pod once the preemptors
nominated to it have their share.

After preemption kube-scheduler sets the preemptor's ``status.nominatedNodeName``
and deletes the victims; until the preemptor binds, a pod of lower or equal
priority must not take the GPU share the victims free (kube-scheduler does the
same for its in-tree resources). :func:`held` places each such nominee on its
node's row as bind would (its GPU choice by the strategy), highest priority
first, and returns the row with their shares counted; a nominee that does not
fit yet (its victims still terminating) holds nothing until it does.
:func:`held_at` counts room held on named GPUs (defragmentation's holds).
"""

from __future__ import annotations

import numpy as np

from policy.allocation import per_gpu, split
from policy.placement import evaluate
from policy.request import GPURequest
from policy.state import NodesView, with_usage


def held(row: NodesView, nominees: list, strategy) -> NodesView:
    """The one-row ``row`` with each ``(priority, GPURequest)`` of ``nominees`` placed on it."""
    for _, request in sorted(nominees, key=lambda n: -n[0]):
        result = evaluate(row, request, strategy, score=False)
        if not result.feasible[0]:
            continue
        row = _add(row, request, result.gpus[0])
    return row


def held_at(row: NodesView, placed: list) -> NodesView:
    """The one-row ``row`` with each ``(GPURequest, gpus)`` of ``placed`` counted on exactly those GPUs
    (a defragmentation move's held room; a GPU may go past its capacity, and then takes nothing)."""
    for request, gpus in placed:
        row = _add(row, request, gpus)
    return row


def _add(row: NodesView, request: GPURequest, gpus) -> NodesView:
    memory, core = split(request, gpus)
    mem_used, core_used, pods = row.mem_used.copy(), row.core_used.copy(), row.pods.copy()
    for g, amount in per_gpu(memory).items():
        mem_used[0, g] += amount
        pods[0, g] += 1
    for g, amount in per_gpu(core).items():
        core_used[0, g] += amount
    wants = int(request.wants_core)
    return with_usage(row, mem_used, core_used, pods, row.memory_pods + (1 - wants), row.core_pods + wants)


def rows_held(rows: np.ndarray, nominated_rows: dict, priority: int, uid: str) -> list:
    """Positions in ``rows`` of nodes holding room for a nominee that ``uid`` (of ``priority``)
    must leave alone: another pod, of ``priority`` or higher. ``nominated_rows``: row →
    [(uid, priority, request), ...]."""
    return [i for i, r in enumerate(rows.tolist())
            if any(n_uid != uid and n_priority >= priority for n_uid, n_priority, _ in nominated_rows.get(r, ()))]
