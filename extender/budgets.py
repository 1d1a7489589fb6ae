"""PodDisruptionBudgets, as preemption counts their violations.

A victim violates a budget when the budget selects it (same namespace, its
label selector matches the pod's labels; an empty selector selects nothing)
and the budget allows no more disruptions: each victim a budget selects uses
one of ``status.disruptionsAllowed``, in the order the victims are given (as
kube-scheduler's preemption counts them).
"""

from __future__ import annotations


def _matches(selector: dict, labels: dict) -> bool:
    if not isinstance(selector, dict) or not (selector.get("matchLabels") or selector.get("matchExpressions")):
        return False
    for key, value in (selector.get("matchLabels") or {}).items():
        if labels.get(key) != value:
            return False
    for expression in selector.get("matchExpressions") or []:
        if not isinstance(expression, dict):
            return False
        key, operator, values = expression.get("key"), expression.get("operator"), expression.get("values") or []
        present = key in labels
        if operator == "In" and not (present and labels[key] in values):
            return False
        if operator == "NotIn" and present and labels[key] in values:
            return False
        if operator == "Exists" and not present:
            return False
        if operator == "DoesNotExist" and present:
            return False
        if operator not in ("In", "NotIn", "Exists", "DoesNotExist"):
            return False
    return True


def violations(victims: list, budgets: list) -> list:
    """For each ``(namespace, labels)`` victim, whether evicting it (after the ones before it)
    violates one of ``budgets`` (v1 PodDisruptionBudget objects)."""
    allowed = []
    for budget in budgets:
        status = budget.get("status") if isinstance(budget.get("status"), dict) else {}
        count = status.get("disruptionsAllowed")
        allowed.append(count if isinstance(count, int) else 0)
    result = []
    for namespace, labels in victims:
        violating = False
        for i, budget in enumerate(budgets):
            meta = budget.get("metadata") if isinstance(budget.get("metadata"), dict) else {}
            spec = budget.get("spec") if isinstance(budget.get("spec"), dict) else {}
            if meta.get("namespace") != namespace or not _matches(spec.get("selector"), labels or {}):
                continue
            if allowed[i] <= 0:
                violating = True
            allowed[i] -= 1
        result.append(violating)
    return result
