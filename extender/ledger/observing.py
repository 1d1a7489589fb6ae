"""The ledger fed by the cluster: Nodes, Pods and unhealthy-GPU ConfigMaps as they are added, change and go.

Every backend (embedded, Kubernetes) calls these ``observe_*``/``forget_*``
methods of :class:`~extender.ledger.ledger.Ledger` (they are its methods: the
class mixes :class:`Observing` in). Each takes only a node's lock, briefly, so
the watches never hold up filter, prioritize or bind. An object that cannot
be read is noted (:mod:`extender.ledger.malformed`) and skipped, never fatal.
"""

from __future__ import annotations

from extender.ledger import annotations as A
from extender.ledger.defrag_facts import facts_of
from extender.ledger.hosts import HostUse
from extender.ledger.nodefacts import kept_conditions
from extender.ledger.podinfo import labels_of, priority_and_start
from extender.ledger.records import Allocation, PodRef
from policy.echo import shown
from policy.node import NodeSpec, parse_node, parse_unhealthy_gpus, unhealthy_configmap_node
from policy.request import InvalidRequest, asks_for_shared_gpu, host_requests, parse_pod_request

TERMINAL_PHASES = ("Succeeded", "Failed")


class Observing:
    """The ledger's ``observe_*``/``forget_*`` methods (a mixin of :class:`~extender.ledger.ledger.Ledger`,
    whose records they change)."""

    def observe_node(self, node: dict) -> NodeSpec | None:
        """A node was added or changed: rebuild its row, keep counting its pods. A Node
        this cannot read is logged, listed in inspect and skipped (None)."""
        self.changes += 1
        meta = node.get("metadata") if isinstance(node, dict) else None
        name = meta.get("name") if isinstance(meta, dict) else None
        if not isinstance(name, str) or not name or len(name) > 253:
            self._note_malformed("Node", node, "metadata.name is not a name")
            return None
        try:
            kept = _kept(node)
        except (TypeError, ValueError, AttributeError) as exc:
            self._note_malformed("Node", node, f"{type(exc).__name__}: {shown(str(exc), 200)}")
            return None
        with self.node_lock(name):
            self._nodes[name] = kept
            return self._set_node(name)

    def _set_node(self, name: str) -> NodeSpec:
        spec = parse_node(self._nodes[name], self._unhealthy.get(name, frozenset()))
        with self.state.lock:  # a returning node's row and its records' usage appear together
            is_new = name not in self.state.index
            self.state.set_node(spec)
            if is_new:
                for allocation in self._by_node.get(name, {}).values():
                    self._apply(allocation, +1)
                self._hosts.restore(name)
            self._unaccounted.reapply(name, is_new)
        return spec

    def node_objects(self) -> list:
        """Every known Node, as much of it as the ledger keeps (name, labels, taints, allocatable, addresses)."""
        return list(self._nodes.values())

    def forget_node(self, name: str) -> None:
        """A node disappeared: drop its row; its pods' records wait for it. A strategy that
        remembers rows across decisions (``forget_row``) is told the row is gone."""
        self.changes += 1
        with self.node_lock(name):
            self._nodes.pop(name, None)
            row = self.state.index.get(name)
            self.state.remove_node(name)
        forget = getattr(self.strategy, "forget_row", None)
        if forget is not None and row is not None:
            forget(row)

    def observe_configmap(self, configmap: dict, deleted: bool = False) -> None:
        """An unhealthy-GPU ConfigMap changed; other ConfigMaps are ignored."""
        self.changes += 1
        node = unhealthy_configmap_node(configmap)
        if node is None:
            return
        with self.node_lock(node):
            if deleted:
                self._unhealthy.pop(node, None)
            else:
                self._unhealthy[node] = parse_unhealthy_gpus(configmap)
            if node in self._nodes:
                self._set_node(node)

    def observe_pod(self, pod: dict) -> None:
        """A pod was added or changed: count it, confirm it, or release it.

        A pod this cannot read (a field of the wrong type, a value out of any
        node's range) is logged and listed in inspect (``malformedObjects``),
        never fatal; if it is bound and asks for shared GPU it is held back
        as unaccounted, whole GPUs when its request is unreadable."""
        self.changes += 1
        if not isinstance(pod, dict) or not isinstance(pod.get("metadata") or {}, dict) \
                or not isinstance(pod.get("spec") or {}, dict) or not isinstance(pod.get("status") or {}, dict):
            self._note_malformed("Pod", pod, "metadata, spec or status is not an object")
            return
        name = (pod.get("metadata") or {}).get("name")
        if not isinstance(name, str) or not name:
            self._note_malformed("Pod", pod, "metadata.name is not a name")
            return
        try:
            self._observe_pod(pod)
        except (TypeError, ValueError, AttributeError, KeyError, OverflowError, RecursionError) as exc:
            self._note_malformed("Pod", pod, f"{type(exc).__name__}: {shown(str(exc), 200)}")

    def _note_malformed(self, kind: str, item, problem: str) -> None:
        self._malformed.note(kind, item, problem)

    def malformed(self) -> list:
        """The objects that could not be read, latest last (:mod:`extender.ledger.malformed`)."""
        return self._malformed.listed()

    def _observe_pod(self, pod: dict) -> None:
        ref = PodRef.of(pod)
        spec = pod.get("spec") or {}
        status = pod.get("status") or {}
        node = spec.get("nodeName")
        self.pending.observe(pod)
        if status.get("phase") in TERMINAL_PHASES:
            self._nominations.forget(ref.uid)
            self.release(ref.uid)
            return
        if not node:
            self._nominations.observe(ref.uid, pod, status.get("nominatedNodeName"))
            return
        self._nominations.forget(ref.uid)
        existing = self._allocations.get(ref.uid)
        if existing is not None and existing.node != node:
            self.release(ref.uid)
            existing = None
        cpu, memory = host_requests(pod)
        self._hosts.count(ref.uid, HostUse(node, cpu, memory))
        if existing is not None:
            existing.confirmed = True
            existing.priority, existing.start = priority_and_start(pod)
            existing.labels = labels_of(pod)
            existing.facts = facts_of(pod)
            return
        invalid = None
        try:
            request = parse_pod_request(pod)
        except InvalidRequest as exc:
            request, invalid = None, str(exc)
        annotations = (pod.get("metadata") or {}).get("annotations")
        recovered = A.read(annotations if isinstance(annotations, dict) else None, request)
        if recovered is None:
            if (request is not None or invalid is not None and asks_for_shared_gpu(pod)) \
                    and ref.uid not in self._unaccounted:
                self._hold(ref, node, request, invalid)
            return
        self._unaccounted.unhold(ref.uid)
        if request is not None:
            wants_core = request.wants_core
        else:
            wants_core = any(v for per in recovered.core.values() for v in per.values())
        listed = spec.get("containers") if isinstance(spec, dict) else None
        used = set(recovered.memory) | set(recovered.core)
        names = self._container_names((i, c["name"]) for i, c in enumerate(listed if isinstance(listed, list) else ())
                                      if i in used and isinstance(c, dict) and isinstance(c.get("name"), str))
        with self.node_lock(node):
            if ref.uid in self._allocations:
                return
            spec = self.state.specs.get(node)
            gpu_memory = recovered.gpu_memory or (spec.memory_per_gpu if spec else 0)
            allocation = Allocation(ref, node, recovered.memory, recovered.core, wants_core, gpu_memory,
                                    recovered.assume_ns, recovered.source, recovered.assigned, confirmed=True,
                                    containers=names)
            allocation.priority, allocation.start = priority_and_start(pod)
            allocation.labels = labels_of(pod)
            allocation.facts = facts_of(pod)
            self._record(allocation)
            self.counters.recovered += 1

    def confirm(self, uid: str, node: str) -> bool:
        """The pod reserved on ``node`` is seen bound there, its requests as reserved
        (what :meth:`observe_pod` would conclude, for a caller that knows it); False
        when no such reservation exists."""
        self.changes += 1
        existing = self._allocations.get(uid)
        if existing is None or existing.node != node or self._hosts.get(uid) is None:
            return False
        existing.confirmed = True
        return True

    def forget_pod(self, uid: str) -> None:
        """A pod was deleted."""
        self.changes += 1
        self._nominations.forget(uid)
        self.pending.forget(uid)
        self.release(uid)
        self._unaccounted.unhold(uid)


def _kept(node: dict) -> dict:
    """What the ledger keeps of a Node: all that parse_node, inspect and the autoscaling plan
    read (taints, cordon, the Ready condition's status), none of its images, other conditions
    or managedFields (tens of KiB on a real node)."""
    meta = node.get("metadata") or {}
    spec = node.get("spec") if isinstance(node.get("spec"), dict) else {}
    status = node.get("status") or {}
    kept_spec = {k: spec[k] for k in ("taints", "unschedulable") if spec.get(k)}
    return {"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": meta.get("name"), "labels": dict(meta.get("labels") or {})},
            **({"spec": kept_spec} if kept_spec else {}),
            "status": {"allocatable": dict(status.get("allocatable") or {}),
                       "addresses": list(status.get("addresses") or []),
                       **({"conditions": ready} if (ready := kept_conditions(status)) else {})}}
