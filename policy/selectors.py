"""Which nodes a pod may go to by their labels and taints, over many nodes at once.

kube-scheduler's NodeAffinity and TaintToleration filters as far as they read
a pod's ``spec.nodeSelector``, its required node affinity and its
tolerations. Contract of :func:`allowed`, ``(n,)`` booleans over a
:class:`NodeTable`:

* ``nodeSelector``: every key is a label with exactly that value;
* required node affinity (``nodeSelectorTerms``): the terms are ORed, the
  requirements inside a term ANDed. ``matchExpressions`` on labels with
  ``In``, ``NotIn``, ``Exists``, ``DoesNotExist``, ``Gt``, ``Lt``; ``NotIn``
  and ``DoesNotExist`` also match nodes without the label; ``Gt``/``Lt``
  compare the label read as an integer with the one integer value given.
  ``matchFields`` on ``metadata.name`` with ``In``/``NotIn``. No terms means
  no restriction; a term without requirements, an unknown operator or
  malformed values match no node (the API server refuses such pods; matching
  nothing is the safe reading);
* taints with effect ``NoSchedule`` or ``NoExecute`` keep the pod off unless
  a toleration matches: its effect empty or equal, and its key empty with
  ``Exists`` (every taint), or equal with ``Exists`` (any value) or ``Equal``
  (the default; same value). ``PreferNoSchedule`` is a preference, ignored;
* ``spec.unschedulable`` counts as the taint
  ``node.kubernetes.io/unschedulable:NoSchedule`` (the node lifecycle
  controller adds it to cordoned nodes).

The work is one pass over the nodes per label key or taint a pod names, then
numpy over the nodes; no pod is matched node by node.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

HARD_EFFECTS = ("NoSchedule", "NoExecute")
UNSCHEDULABLE = "node.kubernetes.io/unschedulable"


class Taint(NamedTuple):
    key: str
    value: str
    effect: str


def _object(value) -> dict:
    return value if isinstance(value, dict) else {}


def labels_of(node: dict) -> dict:
    """A v1 Node's labels with string keys and values."""
    labels = _object(_object(_object(node).get("metadata")).get("labels"))
    return {k: v for k, v in labels.items() if isinstance(k, str) and isinstance(v, str)}


def taints_of(node: dict) -> tuple:
    """The :class:`Taint` s of a v1 Node that keep pods off (NoSchedule, NoExecute), in order."""
    spec = _object(_object(node).get("spec"))
    taints = spec.get("taints")
    found = []
    for taint in taints if isinstance(taints, list) else ():
        taint = _object(taint)
        key, effect = taint.get("key"), taint.get("effect")
        if isinstance(key, str) and key and effect in HARD_EFFECTS:
            value = taint.get("value")
            found.append(Taint(key, value if isinstance(value, str) else "", effect))
    if spec.get("unschedulable") is True and not any(t.key == UNSCHEDULABLE for t in found):
        found.append(Taint(UNSCHEDULABLE, "", "NoSchedule"))
    return tuple(found)


def tolerates(tolerations: list, taint: Taint) -> bool:
    """Whether any of ``tolerations`` (as in ``spec.tolerations``) matches ``taint``."""
    for toleration in tolerations:
        toleration = _object(toleration)
        effect = toleration.get("effect") or ""
        if effect and effect != taint.effect:
            continue
        key = toleration.get("key") or ""
        operator = toleration.get("operator") or "Equal"
        if operator == "Exists" and (not key or key == taint.key):
            return True
        if operator == "Equal" and key and key == taint.key and (toleration.get("value") or "") == taint.value:
            return True
    return False


class NodeTable:
    """Nodes' names, labels and hard taints, with label columns built on first use.

    ``labels[i]`` and ``taints[i]`` belong to ``names[i]``; a row whose name is
    None is no node (a free row of a :class:`~policy.state.ClusterState`) and
    is never allowed.
    """

    def __init__(self, names: list, labels: list, taints: list):
        self.names = np.array(names, dtype=object)
        self.present = np.array([n is not None for n in names], dtype=bool)
        self._labels = labels
        self._columns: dict = {}
        self._numbers: dict = {}
        self.taint_kinds = sorted({t for ts in taints for t in ts})
        where = {t: j for j, t in enumerate(self.taint_kinds)}
        self.has_taint = np.zeros((len(names), len(self.taint_kinds)), dtype=bool)
        for i, ts in enumerate(taints):
            for t in ts:
                self.has_taint[i, where[t]] = True

    @classmethod
    def of(cls, names: list, nodes) -> "NodeTable":
        """The table of ``names`` (None allowed), labels and taints read from ``nodes[name]``, v1 Nodes."""
        objects = [nodes.get(n) if n is not None else None for n in names]
        return cls(names, [labels_of(o) for o in objects], [taints_of(o) for o in objects])

    def __len__(self) -> int:
        return len(self.names)

    def column(self, key: str) -> np.ndarray:
        """Every node's value of label ``key``, None where it has none."""
        column = self._columns.get(key)
        if column is None:
            column = np.array([labels.get(key) for labels in self._labels], dtype=object)
            self._columns[key] = column
        return column

    def number(self, key: str) -> np.ndarray:
        """Every node's label ``key`` as an integer, NaN where absent or not an integer."""
        column = self._numbers.get(key)
        if column is None:
            column = np.array([_integer(v) for v in self.column(key)], dtype=float)
            self._numbers[key] = column
        return column


def _integer(value) -> float:
    try:
        return float(int(value, 10)) if isinstance(value, str) else np.nan
    except ValueError:
        return np.nan


def _equals_any(column: np.ndarray, values: list) -> np.ndarray:
    match = np.zeros(len(column), dtype=bool)
    for value in values:
        match |= column == value
    return match


def _requirement(table: NodeTable, requirement, field: bool) -> np.ndarray:
    """Nodes meeting one ``matchExpressions`` (or ``matchFields``) entry; none if it is malformed."""
    nothing = np.zeros(len(table), dtype=bool)
    requirement = _object(requirement)
    key, operator, values = requirement.get("key"), requirement.get("operator"), requirement.get("values")
    values = values if isinstance(values, list) and all(isinstance(v, str) for v in values) else None
    if not isinstance(key, str) or not key:
        return nothing
    if field:
        if key != "metadata.name" or operator not in ("In", "NotIn") or not values:
            return nothing
        column = table.names
    else:
        column = table.column(key)
    if operator in ("In", "NotIn"):
        if not values:
            return nothing
        inside = _equals_any(column, values)
        return inside if operator == "In" else ~inside
    if operator in ("Exists", "DoesNotExist"):
        if values:
            return nothing
        exists = column != None  # noqa: E711 - elementwise over an object array
        return exists if operator == "Exists" else ~exists
    if operator in ("Gt", "Lt"):
        if not values or len(values) != 1 or np.isnan(bound := _integer(values[0])):
            return nothing
        number = table.number(key)
        with np.errstate(invalid="ignore"):
            return number > bound if operator == "Gt" else number < bound
    return nothing


def _term(table: NodeTable, term) -> np.ndarray:
    term = _object(term)
    expressions, fields = term.get("matchExpressions"), term.get("matchFields")
    requirements = [(r, False) for r in (expressions if isinstance(expressions, list) else ())]
    requirements += [(r, True) for r in (fields if isinstance(fields, list) else ())]
    if not requirements:
        return np.zeros(len(table), dtype=bool)
    match = np.ones(len(table), dtype=bool)
    for requirement, field in requirements:
        match &= _requirement(table, requirement, field)
    return match


def allowed(table: NodeTable, node_selector: dict, terms: list, tolerations: list) -> np.ndarray:
    """``(n,)`` True where the pod's selector, required affinity and tolerations let it in (module doc)."""
    match = table.present.copy()
    for key, value in (node_selector or {}).items():
        match &= table.column(key) == value
    if terms:
        any_term = np.zeros(len(table), dtype=bool)
        for term in terms:
            any_term |= _term(table, term)
        match &= any_term
    if table.taint_kinds:
        untolerated = [j for j, t in enumerate(table.taint_kinds) if not tolerates(tolerations or [], t)]
        if untolerated:
            match &= ~table.has_taint[:, untolerated].any(axis=1)
    return match
