"""The defragmentation plan as the service sees it: the ledger's pods through policy.defrag, and its JSON.

Contract of :func:`defrag_of`:

* the pending pods are those of the autoscaling plan (:mod:`extender.planning`):
  this extender's schedulers' (``schedulerName``), not placeholders, with a
  valid shared-GPU request; oldest first (the planner then orders them by
  priority);
* the cluster is the ledger's snapshot with placeholders' shares free (they
  give way to any real pod), and the residents are the ledger's allocations
  but the placeholders'; a resident may move when its facts say so
  (:mod:`extender.defrag.facts`), its binding is done (confirmed or
  committed) and it is not being deleted; the PodDisruptionBudgets selecting
  it are matched as preemption matches them (:mod:`extender.budgets`), with
  the ``disruptionsAllowed`` of ``budgets`` (v1 PodDisruptionBudget objects);
* a pod, pending or moved, may only go to nodes its ``nodeSelector``,
  required node affinity and tolerations allow (:mod:`policy.selectors`);
* its replacement asks for what the pod holds: the same GiB (and compute) on
  as many GPUs, whole devices if its label asks for them, its CPU and memory.

:func:`defrag_json` is the reply of ``GET {prefix}/defrag`` and ``defrag --json``::

    {"moves": [{"pod": "ns/name", "from": node, "to": node, "gpus": [i, ...]}, ...],
     "unblocks": ["ns/name", ...], "wholeGPUsFreed": n,
     "reasons": {"summary": ..., "search": ..., "bound": ..., "maxMoves": n, "pending": {ref: why},
                 "movable": {why: count}, "placements": {ref: {"node": node, "gpus": [i]}}, ...}}
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field

from extender.budgets import allowances, selecting
from policy.defrag import DEFAULT_MAX_MOVES, DefragPlan, Limits, Resident, Waiting, plan
from policy.names import POD_PLACEMENT, REQUIRE_WHOLE_DEVICE
from policy.request import GPURequest, simple_request
from policy.selectors import NodeTable, allowed

BEING_BOUND = "its binding is not confirmed yet"
NOT_KNOWN = "not known to be owned by a controller"


@dataclass
class Defragged:
    """A plan and what it was made of: the residents' allocations and the pending pods, by key."""

    plan: DefragPlan
    allocations: dict = field(default_factory=dict)  # "ns/name" → the ledger's Allocation
    residents: dict = field(default_factory=dict)  # "ns/name" → the planner's Resident (its replacement's request)
    pending: dict = field(default_factory=dict)  # "ns/name" → the PendingPod
    cpu_seconds: float = 0.0


def _replacement(allocation, host) -> GPURequest:
    memory, core = allocation.memory_per_gpu, allocation.core_per_gpu
    gpus = len(set(memory) | set(core))
    whole = (allocation.labels or {}).get(POD_PLACEMENT) == REQUIRE_WHOLE_DEVICE
    cpu, host_memory = (host.cpu, host.memory) if host is not None else (0, 0)
    return simple_request(sum(memory.values()), sum(core.values()) if allocation.wants_core else 0, gpu_count=gpus,
                          whole_device=whole, cpu=cpu, host_memory=host_memory)


def defrag_of(ledger, settings, budgets: list, max_moves: int = DEFAULT_MAX_MOVES, limits: Limits = Limits(),
              explain: bool = True) -> Defragged:
    """The plan for the ledger's cluster as it is now (see module doc). ``settings``: the autoscaling
    plan's (:class:`extender.planning.PlanSettings`)."""
    started = time.thread_time()
    served = set(settings.scheduler_names)
    pending = [p for p in ledger.pending.all() if p.namespace != settings.placeholder_namespace
               and p.scheduler_name in served and isinstance(p.request, GPURequest) and p.request.gpu_count > 0]
    with ledger.state.lock:  # the records and the arrays change together under it: the copy and they agree
        state = ledger.snapshot(settings.placeholder_namespace)
        records = ledger.allocations()
    nodes = {n["metadata"]["name"]: n for n in ledger.node_objects()}
    table = NodeTable.of(list(state.names), nodes)
    masks: dict = {}

    def mask(selector, terms, tolerations):
        key = json.dumps([selector, terms, tolerations], sort_keys=True, default=str)
        if key not in masks:
            masks[key] = allowed(table, selector, terms, tolerations)
        return masks[key]

    allocations, residents = {}, []
    for a in records:
        if a.pod.namespace == settings.placeholder_namespace or a.node not in state.index:
            continue
        facts = a.facts
        why = (facts.why_not if facts is not None else NOT_KNOWN) or \
            ("" if a.confirmed or a.committed else BEING_BOUND)
        key = str(a.pod)
        allocations[key] = a
        residents.append(Resident(key, a.node, a.memory_per_gpu, a.core_per_gpu,
                                  _replacement(a, ledger.host_use(a.pod.uid)), a.priority, not why, why,
                                  selecting(a.pod.namespace, a.labels, budgets),
                                  mask(*facts.constraints) if facts is not None else None))
    waiting = [Waiting(p.ref, p.request, p.priority, mask(p.node_selector, p.node_affinity, p.tolerations))
               for p in pending]
    result = plan(state, residents, waiting, max_moves, budgets=allowances(budgets), limits=limits, explain=explain)
    return Defragged(result, allocations, {r.key: r for r in residents}, {p.ref: p for p in pending},
                     time.thread_time() - started)


def defrag_json(defragged: Defragged) -> dict:
    """The plan's JSON form (see module doc)."""
    result = defragged.plan
    reasons = dict(result.reasons)
    reasons["placements"] = {key: {"node": p.node, "gpus": list(p.gpus)} for key, p in result.placements.items()}
    return {
        "moves": [{"pod": m.pod, "from": m.from_node, "to": m.to_node, "gpus": list(m.gpus)} for m in result.moves],
        "unblocks": list(result.unblocks),
        "wholeGPUsFreed": result.whole_gpus_freed,
        "reasons": reasons,
    }
