"""Which pods a plan may move, and how many moves the PodDisruptionBudgets leave it.

A pod may move (:func:`why_immovable` answers ``""``) when

* a controller owns it (an ``ownerReferences`` entry with ``controller:
  true``), so that evicting it brings a replacement — but not a DaemonSet,
  whose replacement comes back to the same node, nor a Node (a static
  pod's mirror);
* it is not in ``kube-system``;
* it does not carry the annotation ``cgpu.alibabacloud.com/defrag: "false"``.

The planner adds two rules of its own: the pod's priority is no higher than
that of the pending pod a move is made for, and the PodDisruptionBudgets that
select it allow one more disruption, counted across the whole plan
(:func:`within_budgets`: each move uses one of ``disruptionsAllowed`` of
every budget selecting the pod).
"""

from __future__ import annotations

from collections import Counter
from typing import Mapping

DEFRAG_ANNOTATION = "cgpu.alibabacloud.com/defrag"
SYSTEM_NAMESPACE = "kube-system"
_NO_REPLACEMENT_ELSEWHERE = {"DaemonSet": "owned by a DaemonSet (its replacement returns to the same node)",
                             "Node": "a static pod (its mirror is owned by the node)"}

NOT_CONTROLLED = "not owned by a controller"
SYSTEM = "in kube-system"
OPTED_OUT = 'opted out (cgpu.alibabacloud.com/defrag: "false")'


def controller_of(owner_references) -> dict | None:
    """The ``ownerReferences`` entry with ``controller: true``, or None."""
    if not isinstance(owner_references, list):
        return None
    for ref in owner_references:
        if isinstance(ref, dict) and ref.get("controller") is True:
            return ref
    return None


def why_immovable(namespace: str, owner_references, annotations) -> str:
    """``""`` when the pod may move, else why it may not (see module doc)."""
    if namespace == SYSTEM_NAMESPACE:
        return SYSTEM
    if isinstance(annotations, dict) and str(annotations.get(DEFRAG_ANNOTATION, "")).strip().lower() == "false":
        return OPTED_OUT
    owner = controller_of(owner_references)
    if owner is None:
        return NOT_CONTROLLED
    return _NO_REPLACEMENT_ELSEWHERE.get(owner.get("kind"), "")


def budget_use(residents) -> Counter:
    """Disruptions the eviction of ``residents`` takes from each budget."""
    return Counter(key for r in residents for key in r.budgets)


def within_budgets(residents, allowances: Mapping[str, int], used: Mapping[str, int] | None = None) -> bool:
    """True when evicting ``residents`` (after ``used`` disruptions already planned) stays within
    every budget's ``disruptionsAllowed`` (a budget not in ``allowances`` allows none)."""
    used = used or {}
    return all(used.get(key, 0) + n <= allowances.get(key, 0) for key, n in budget_use(residents).items())
