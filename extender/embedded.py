"""The embedded cluster: nodes and pods held in memory, no API server.

It serves the built-in demo or a cluster file. Contract:

* ``start`` feeds every Node, unhealthy-GPU ConfigMap and Pod to the ledger
  and keeps the PodDisruptionBudgets (:meth:`disruption_budgets`: preemption
  and defragmentation count them, as the file gives their
  ``disruptionsAllowed``);
  bound pods are then only the ledger's records: no pod body is kept, so a
  dump of 10^5 pods costs what its allocations cost;
* unbound pods of the file are kept, for bind (the Pods bind needs otherwise
  come from the preceding filter call, which the service caches by UID);
* ``bind`` shows the binding to the ledger at once (the allocation is
  confirmed); ``delete_pod`` deletes as the API server would;
* :meth:`EmbeddedCluster.objects` is a replayable dump: the nodes, the
  ConfigMaps, the unbound pods, and a Pod rendered from every ledger record
  (allocation, unaccounted pod, bound pod without GPU) with the annotations
  and requests that rebuild the same ledger, and the budgets.
"""

from __future__ import annotations

import threading

from policy.names import GPU_CORE, GPU_MEM


class EmbeddedCluster:
    kind = "embedded"

    def __init__(self, objects, source: str = "demo"):
        """``objects``: any iterable of v1 objects (a list, or a file being streamed)."""
        self.source = source
        self._lock = threading.Lock()
        self._objects = iter(objects)  # consumed by start()
        self._configmaps: list = []
        self._budgets: list = []  # PodDisruptionBudgets, as the file gives them
        self._pending: dict = {}  # uid → unbound Pod
        self._plain: dict = {}  # uid → (namespace, name, node) of bound pods that hold no GPU share
        self._ready = False
        self._ledger = None

    def start(self, ledger) -> None:
        """Feed every object to ``ledger``, in the order given (pods may precede their node); ready when done."""
        self._ledger = ledger
        objects, self._objects = self._objects, iter(())
        for obj in objects:
            kind = obj.get("kind") if isinstance(obj, dict) else None
            if kind == "Node":
                ledger.observe_node(obj)
            elif kind == "ConfigMap":
                self._configmaps.append(obj)
                ledger.observe_configmap(obj)
            elif kind == "Pod":
                self._start_pod(ledger, obj)
            elif kind == "PodDisruptionBudget":
                self._budgets.append(obj)
        for record in ledger.unaccounted():
            self._plain.pop(record.pod.uid, None)  # the ledger holds these itself
        self._ready = True

    def _start_pod(self, ledger, pod: dict) -> None:
        if not all(isinstance(pod.get(k) or {}, dict) for k in ("metadata", "spec", "status")):
            ledger.observe_pod(pod)  # the ledger lists it as malformed
            return
        meta = pod.get("metadata") or {}
        uid = meta.get("uid") or f"{meta.get('namespace') or 'default'}/{meta.get('name')}"
        node = (pod.get("spec") or {}).get("nodeName")
        if not node:
            self._pending[uid] = pod
            ledger.observe_pod(pod)  # the ledger keeps unbound shared-GPU pods as pending
            return
        ledger.observe_pod(pod)
        finished = (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed")
        if ledger.allocation(uid) is None and not finished:
            self._plain[uid] = (meta.get("namespace") or "default", meta.get("name") or "", node)

    def stop(self) -> None:
        pass

    def ready(self) -> bool:
        return self._ready

    def disruption_budgets(self) -> list:
        """The PodDisruptionBudgets of the file."""
        return list(self._budgets)

    def get_pod(self, namespace: str, name: str, uid: str) -> dict | None:
        """An unbound pod from the cluster file, if it has this UID."""
        return self._pending.get(uid)

    def pod_node(self, namespace: str, name: str, uid: str) -> str | None:
        """The node the pod with this UID is bound to, None if unbound or unknown."""
        allocation = self._ledger.allocation(uid) if self._ledger is not None else None
        if allocation is not None and (allocation.confirmed or allocation.committed):
            return allocation.node
        plain = self._plain.get(uid)
        return plain[2] if plain else None

    def bind(self, pod: dict, node: str, annotations: dict) -> None:
        """Bind ``pod`` to ``node``; the ledger sees it bound with ``annotations`` at once."""
        meta = pod.get("metadata") or {}
        uid = meta.get("uid") or ""
        namespace, name = meta.get("namespace") or "default", meta.get("name") or ""
        with self._lock:
            self._pending.pop(uid, None)
            if not annotations:
                self._plain[uid] = (namespace, name, node)
        if self._ledger is None:
            return
        if annotations and self._ledger.confirm(uid, node):  # reserved by bind, CPU and memory counted with it
            return
        self._ledger.observe_pod({  # pods without annotations too: the ledger counts every pod's CPU and memory
            "metadata": {"name": name, "namespace": namespace, "uid": uid, "annotations": annotations},
            "spec": {"nodeName": node, "containers": (pod.get("spec") or {}).get("containers") or []},
            "status": {"phase": "Pending"},
        })

    def delete_pod(self, namespace: str, name: str) -> str | None:
        """Delete a pod as the API server would; returns its UID, None if there is no such pod."""
        uid = self._find(namespace, name)
        if uid is None:
            return None
        with self._lock:
            self._pending.pop(uid, None)
            self._plain.pop(uid, None)
        if self._ledger is not None:
            self._ledger.forget_pod(uid)
        return uid

    def _find(self, namespace: str, name: str) -> str | None:
        for uid, pod in list(self._pending.items()):
            meta = pod.get("metadata") or {}
            if (meta.get("namespace") or "default", meta.get("name")) == (namespace, name):
                return uid
        for uid, (ns, n, _node) in list(self._plain.items()):
            if (ns, n) == (namespace, name):
                return uid
        if self._ledger is not None:
            for record in self._ledger.allocations() + self._ledger.unaccounted():
                if (record.pod.namespace, record.pod.name) == (namespace, name):
                    return record.pod.uid
        return None

    def objects(self) -> list:
        """Nodes, ConfigMaps and pods as they stand now: a dump that rebuilds the same ledger."""
        ledger = self._ledger
        pods = list(self._pending.values())
        if ledger is not None:
            pods += [_rendered(a.pod, a.node, a.memory, a.core, a.annotations) for a in ledger.allocations()]
            pods += [_rendered(u.pod, u.node, {0: {0: u.memory}}, {0: {0: u.core}} if u.core else {}, {})
                     for u in ledger.unaccounted()]
        pods += [{"apiVersion": "v1", "kind": "Pod",
                  "metadata": {"name": name, "namespace": namespace, "uid": uid},
                  "spec": {"nodeName": node, "containers": [{"name": "main"}]}, "status": {"phase": "Running"}}
                 for uid, (namespace, name, node) in self._plain.items()]
        nodes = ledger.node_objects() if ledger is not None else []
        return nodes + self._configmaps + self._budgets + pods


def _rendered(pod, node: str, memory: dict, core: dict, annotations: dict) -> dict:
    """A bound Pod whose containers request ``memory``/``core`` (container → GPU → amount)."""
    count = max(list(memory) + list(core), default=0) + 1
    containers = [{"name": f"c{i}"} for i in range(count)]
    for index in range(count):
        limits = {}
        if index in memory:
            limits[GPU_MEM] = str(sum(memory[index].values()))
        if index in core and any(core[index].values()):
            limits[GPU_CORE] = str(sum(core[index].values()))
        if limits:
            containers[index]["resources"] = {"limits": limits}
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": pod.name, "namespace": pod.namespace, "uid": pod.uid, "annotations": annotations},
            "spec": {"nodeName": node, "containers": containers}, "status": {"phase": "Running"}}
