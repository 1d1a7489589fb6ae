"""The ledger's records: a pod's reference, its share of a node's GPUs, and the refusal a bind gets.

:class:`Allocation` is kept compact (a large cluster holds ~10^5 of them); the
maps and the annotations it is written with are derived on demand
(:mod:`extender.ledger.annotations`).
"""

from __future__ import annotations

import sys
from dataclasses import dataclass

from extender.ledger import annotations as A
from extender.ledger.pending import pod_key


class BindRejected(Exception):
    """A bind the ledger refuses; ``str()`` is the reply's ``Error``."""


@dataclass(frozen=True, slots=True)
class PodRef:
    uid: str
    namespace: str
    name: str

    @classmethod
    def of(cls, pod: dict) -> "PodRef":
        """The pod's reference; a pod without a UID (a hand-written cluster file) is keyed by
        ``namespace/name``, as the pending store and the embedded cluster key it."""
        meta = pod.get("metadata") or {}
        namespace, name = (v if isinstance(v, str) else "" for v in (meta.get("namespace"), meta.get("name")))
        return cls(pod_key(pod), sys.intern(namespace or "default"), name)

    def __str__(self) -> str:
        return f"{self.namespace}/{self.name}"


class Allocation:
    """One pod's share of one node's GPUs.

    A large cluster holds ~10^5 of these, so the record is compact: the shares
    as one tuple of ``(container, gpu, GiB, compute)`` and the annotation
    fields it was written or read with; the maps and the annotations are
    derived on demand.
    """

    __slots__ = ("pod", "node", "shares", "wants_core", "gpu_memory", "assume_ns", "source", "assigned",
                 "confirmed", "committed", "containers", "priority", "start", "labels", "facts")

    def __init__(self, pod: PodRef, node: str, memory: dict, core: dict, wants_core: bool, gpu_memory: int,
                 assume_ns: int, source: str, assigned: bool = False, confirmed: bool = False,
                 containers: tuple = ()):
        cells = sorted({(c, g) for c, gpus in memory.items() for g in gpus} |
                       {(c, g) for c, gpus in core.items() for g in gpus})
        self.pod = pod
        self.node = sys.intern(node)
        self.shares = tuple((c, g, memory.get(c, {}).get(g, 0), core.get(c, {}).get(g, 0)) for c, g in cells)
        self.wants_core = wants_core
        self.gpu_memory = gpu_memory  # one GPU's GiB on the node, for device-resource
        self.assume_ns = assume_ns
        self.source = source  # "bind", "v2" or "v1"
        self.assigned = assigned  # the device plugin has taken it
        self.confirmed = confirmed  # the cluster has shown the pod bound to ``node``
        self.committed = False  # the cluster accepted our binding to ``node``
        self.containers = containers  # ((container index, name), ...), one tuple shared by a workload's pods
        self.priority = 0  # the pod's spec.priority (preemption)
        self.start = ""  # its status.startTime, else creationTimestamp (RFC 3339; preemption evicts the youngest)
        self.labels = None  # its labels (PodDisruptionBudgets select by them), None when it has none
        self.facts = None  # extender.ledger.defrag_facts.PodFacts: may it move, where may its replacement go

    def container_name(self, index: int) -> str:
        """The name of the pod's container at ``index`` (its index as text when not known)."""
        return next((name for i, name in self.containers if i == index), str(index))

    @property
    def memory(self) -> dict:
        """container index → {GPU index → GiB}"""
        result: dict = {}
        for c, g, mem, _ in self.shares:
            result.setdefault(c, {})[g] = mem
        return result

    @property
    def core(self) -> dict:
        """container index → {GPU index → compute}; {} for a memory-only pod"""
        result: dict = {}
        if any(core for *_, core in self.shares):
            for c, g, _, core in self.shares:
                result.setdefault(c, {})[g] = core
        return result

    @property
    def memory_per_gpu(self) -> dict:
        """GPU index → GiB over all containers (``per_gpu(self.memory)``, without the nested maps)."""
        total: dict = {}
        for _, g, mem, _ in self.shares:
            total[g] = total.get(g, 0) + mem
        return total

    @property
    def core_per_gpu(self) -> dict:
        """GPU index → compute over all containers; {} for a memory-only pod (``per_gpu(self.core)``)."""
        total: dict = {}
        if any(core for *_, core in self.shares):
            for _, g, _, core in self.shares:
                total[g] = total.get(g, 0) + core
        return total

    @property
    def annotations(self) -> dict:
        """The annotations the pod carries for this allocation (V1 keys only if that is all it had)."""
        return A.write(self.memory, self.core, self.gpu_memory, self.assume_ns, self.assigned,
                       v1_only=self.source == "v1")

    def __repr__(self) -> str:
        return f"Allocation({self.pod}, node={self.node}, shares={self.shares}, source={self.source})"
