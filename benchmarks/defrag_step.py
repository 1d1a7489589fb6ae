"""The churn replay's defragmentation step: :func:`policy.defrag.plan` on the replay's ledger.

:func:`planner` returns the hook :class:`benchmarks.churn.Defrag` calls:
every placed GPU pod becomes a :class:`policy.defrag.Resident` (its shares as
the ledger counts them, its request as its replacement's, its priority, the
nodes its GPU models allow; every trace pod is movable: owned by a
controller, outside ``kube-system``, no opt-out, no PodDisruptionBudget), the
waiting pods :class:`policy.defrag.Waiting` in queue order (the plan takes
them by priority, then in that order) — the first of each kind only (the
same GPU request and GPU models), so that the few pods a plan considers are
not all copies of one that no move can help — and the plan's moves
:class:`benchmarks.churn.Move` in its order. The plan works on a copy of the
ledger's state.
"""

from __future__ import annotations

import numpy as np

from benchmarks.churn import NAMESPACE, Move
from policy.defrag import Limits, Resident, Waiting, plan
from policy.node import model_code


def planner(max_pending: int = 256):
    """The hook (see module doc); a plan considers at most ``max_pending`` waiting pods."""
    limits = Limits(pending=max_pending)
    masks: dict = {}

    def allowed(state, spec: str):
        """(rows,) the nodes whose GPU model the pod may use; None for any."""
        if not spec:
            return None
        key = (spec, state.layout, len(state.names))
        mask = masks.get(key)
        if mask is None:
            codes = [model_code(m) for m in spec.split("|") if m]
            mask = np.isin(state.array("model")[:len(state.names)], codes)
            masks[key] = mask
        return mask

    def step(ledger, held, waiting, max_moves: int) -> list:
        state = ledger.state
        residents = []
        for pod in held:
            allocation = ledger.allocation(pod.uid)
            if allocation is None:
                continue
            residents.append(Resident(f"{NAMESPACE}/{pod.uid}", pod.node, allocation.memory_per_gpu,
                                      allocation.core_per_gpu, pod.request, pod.priority,
                                      allowed=allowed(state, pod.spec)))
        pending, kinds = [], set()
        for w in waiting:
            kind = (w.request.fit_key, w.spec)
            if kind not in kinds:
                kinds.add(kind)
                pending.append(Waiting(f"{NAMESPACE}/{w.uid}", w.request, w.priority, allowed=allowed(state, w.spec)))
        result = plan(state, residents, pending, max_moves, limits=limits, explain=False)
        return [Move(m.pod.split("/", 1)[1], m.to_node, tuple(m.gpus)) for m in result.moves]

    return step
