"""Node pools: nodes grouped by a label, and what a new node of each pool is like.

Contract:

* a node's pool is the value of the first of the pool label keys it carries
  (:data:`DEFAULT_POOL_LABELS` unless configured); a node with none of them
  is in no pool (its free room still counts, but nothing can add nodes like it);
* a pool's template is one of its nodes: the first by name that shares GPUs,
  else the first by name. A new node is that node as it joins: its capacity,
  labels (its own ``kubernetes.io/hostname`` left out) and taints (taints
  the cluster puts on and takes off nodes by their state — ``node.kubernetes.io/*``,
  the cloud provider's ``uninitialized``, cluster-autoscaler's deletion
  marks — left out), every GPU healthy and free;
* a pool with no nodes gets its template from an :class:`Entry` (a templates
  file); an entry's ``max_size`` applies whether the pool has nodes or not;
* the template node's labels always carry the pool label, so a pod that
  selects the pool matches its new nodes.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from policy.names import MODE_NONE
from policy.node import NodeSpec, parse_node
from policy.selectors import labels_of, taints_of

DEFAULT_POOL_LABELS = (
    "alibabacloud.com/nodepool-id",  # ACK node pools
    "karpenter.sh/nodepool",
    "cloud.google.com/gke-nodepool",
    "eks.amazonaws.com/nodegroup",
    "kubernetes.azure.com/agentpool",
)
HOSTNAME_LABEL = "kubernetes.io/hostname"
STATE_TAINT_PREFIXES = ("node.kubernetes.io/", "node.cloudprovider.kubernetes.io/uninitialized",
                        "ToBeDeletedByClusterAutoscaler", "DeletionCandidateOfClusterAutoscaler")


@dataclass(frozen=True)
class Entry:
    """What a templates file says of one pool: its max size and, for a pool at zero nodes, a v1 Node."""

    max_size: int | None = None
    node: dict | None = None


@dataclass(frozen=True)
class Pool:
    """A pool, its size now and the node it grows by."""

    name: str
    label: str  # the pool label key its nodes carry
    nodes: int  # nodes in the pool now
    max_size: int | None  # None: not known
    template: dict  # the v1 Node a new node of the pool is (labels, taints, allocatable)
    spec: NodeSpec  # parse_node(template)

    @property
    def room(self) -> int | None:
        """How many nodes the pool may still add (None: no known bound)."""
        return None if self.max_size is None else max(self.max_size - self.nodes, 0)

    def new_node(self, name: str) -> NodeSpec:
        """The template's spec under a new node's name."""
        return replace(self.spec, name=name, unhealthy=frozenset(), warnings=())


def pool_of(labels: dict, keys=DEFAULT_POOL_LABELS) -> tuple[str, str] | None:
    """``(key, pool)`` of the first pool label key present in ``labels``; None when there is none."""
    for key in keys:
        value = labels.get(key)
        if isinstance(value, str) and value:
            return key, value
    return None


def pool_name(labels: dict, keys=DEFAULT_POOL_LABELS) -> str:
    """The node's pool by its labels (:func:`pool_of`), ``""`` when it is in none."""
    found = pool_of(labels, keys)
    return found[1] if found is not None else ""


def _name(node: dict) -> str:
    return str((node.get("metadata") or {}).get("name") or "")


def _state_taint(key: str) -> bool:
    return key.startswith(STATE_TAINT_PREFIXES)


def as_template(node: dict, key: str, pool: str) -> dict:
    """``node`` as a new node of ``pool`` would join: labels, kept taints and allocatable only."""
    labels = {k: v for k, v in labels_of(node).items() if k != HOSTNAME_LABEL}
    labels[key] = pool
    taints = [{"key": t.key, "value": t.value, "effect": t.effect} for t in taints_of(node) if not _state_taint(t.key)]
    allocatable = ((node.get("status") or {}).get("allocatable") or {}) if isinstance(node, dict) else {}
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": f"{pool} (template)", "labels": labels},
            "spec": {"taints": taints}, "status": {"allocatable": dict(allocatable)}}


def pools_of(nodes, keys=DEFAULT_POOL_LABELS, entries=None, specs=None) -> dict:
    """Every pool of the v1 Nodes ``nodes`` and of the templates file's ``entries`` (pool → :class:`Entry`).

    Returns pool name → :class:`Pool`. An entry without a node for a pool that
    has no nodes gives no pool (nothing says what its nodes are like).
    ``specs`` (name → :class:`NodeSpec`, e.g. a state's) saves parsing the nodes again.
    """
    entries = entries or {}
    specs = specs or {}
    members: dict = {}
    for node in nodes:
        found = pool_of(labels_of(node), keys)
        if found is not None:
            members.setdefault(found[1], (found[0], []))[1].append(node)
    pools = {}
    for name, (key, group) in members.items():
        group.sort(key=_name)
        parsed = [specs.get(_name(n)) or parse_node(n) for n in group]
        chosen = next((n for n, s in zip(group, parsed) if s.mode != MODE_NONE and s.problem is None), group[0])
        template = as_template(chosen, key, name)
        pools[name] = Pool(name, key, len(group), entries.get(name, Entry()).max_size, template,
                           parse_node(template))
    for name, entry in entries.items():
        if name in pools or entry.node is None:
            continue
        found = pool_of(labels_of(entry.node), keys)
        key = found[0] if found is not None else keys[0]
        template = as_template(entry.node, key, name)
        pools[name] = Pool(name, key, 0, entry.max_size, template, parse_node(template))
    return pools
