"""PodDisruptionBudgets, as preemption counts their violations and defragmentation its moves.

A victim violates a budget when the budget selects it (same namespace, its
label selector matches the pod's labels; an empty selector selects nothing)
and the budget allows no more disruptions: each victim a budget selects uses
one of ``status.disruptionsAllowed``, in the order the victims are given (as
kube-scheduler's preemption counts them). Defragmentation asks which budgets
select a pod (:func:`selecting`, the same matching) and how many disruptions
each allows (:func:`allowances`), and counts them across its plan.
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


def budget_key(budget: dict) -> str:
    """``namespace/name`` of a PodDisruptionBudget."""
    meta = budget.get("metadata") if isinstance(budget.get("metadata"), dict) else {}
    return f"{meta.get('namespace') or 'default'}/{meta.get('name') or ''}"


def allowances(budgets: list) -> dict:
    """``namespace/name`` → ``status.disruptionsAllowed`` (0 when absent or not a number) of each budget."""
    result = {}
    for budget in budgets:
        if not isinstance(budget, dict):
            continue
        status = budget.get("status") if isinstance(budget.get("status"), dict) else {}
        count = status.get("disruptionsAllowed")
        result[budget_key(budget)] = count if isinstance(count, int) and not isinstance(count, bool) else 0
    return result


def selecting(namespace: str, labels: dict | None, budgets: list) -> tuple:
    """Keys of the budgets that select a pod of ``namespace`` with ``labels`` (as :func:`violations` matches)."""
    found = []
    for budget in budgets:
        if not isinstance(budget, dict):
            continue
        meta = budget.get("metadata") if isinstance(budget.get("metadata"), dict) else {}
        spec = budget.get("spec") if isinstance(budget.get("spec"), dict) else {}
        if meta.get("namespace") == namespace and _matches(spec.get("selector"), labels or {}):
            found.append(budget_key(budget))
    return tuple(found)
