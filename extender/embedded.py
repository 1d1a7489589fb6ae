"""The embedded cluster: nodes and pods held in memory, no API server.

It serves the built-in demo or a cluster file. Binding records the pod as
bound with its annotations, so :meth:`EmbeddedCluster.objects` is a dump a
new process can be started from (it rebuilds the same ledger). The Pod
objects that bind needs come from the preceding filter call (the service
caches them by UID) or from unbound pods in the file.
"""

from __future__ import annotations

import copy
import threading

from extender.ledger import Ledger


class EmbeddedCluster:
    kind = "embedded"

    def __init__(self, objects: list, source: str = "demo"):
        self.source = source
        self._lock = threading.Lock()
        self._nodes = [o for o in objects if o.get("kind") == "Node"]
        self._configmaps = [o for o in objects if o.get("kind") == "ConfigMap"]
        self._pods = {}
        for pod in (o for o in objects if o.get("kind") == "Pod"):
            meta = pod.get("metadata") or {}
            self._pods[meta.get("uid") or f"{meta.get('namespace', 'default')}/{meta['name']}"] = pod
        self._ready = False
        self._ledger: Ledger | None = None

    def start(self, ledger: Ledger) -> None:
        """Load everything into ``ledger``; ready when done."""
        self._ledger = ledger
        for node in self._nodes:
            ledger.observe_node(node)
        for configmap in self._configmaps:
            ledger.observe_configmap(configmap)
        for pod in self._pods.values():
            ledger.observe_pod(pod)
        self._ready = True

    def stop(self) -> None:
        pass

    def ready(self) -> bool:
        return self._ready

    def get_pod(self, namespace: str, name: str, uid: str) -> dict | None:
        """An unbound pod from the cluster file, if it has this UID."""
        pod = self._pods.get(uid)
        return pod if pod is not None and not (pod.get("spec") or {}).get("nodeName") else None

    def pod_node(self, namespace: str, name: str, uid: str) -> str | None:
        """The node the pod with this UID is bound to, None if unbound or unknown."""
        with self._lock:
            pod = self._pods.get(uid)
        return ((pod or {}).get("spec") or {}).get("nodeName")

    def bind(self, pod: dict, node: str, annotations: dict) -> None:
        """Record ``pod`` as bound to ``node`` carrying ``annotations``."""
        bound = copy.deepcopy(pod)
        bound.setdefault("apiVersion", "v1")
        bound["kind"] = "Pod"
        meta = bound.setdefault("metadata", {})
        meta.setdefault("namespace", "default")
        meta["annotations"] = {**(meta.get("annotations") or {}), **annotations}
        bound.setdefault("spec", {})["nodeName"] = node
        bound["status"] = {**(bound.get("status") or {}), "phase": "Pending"}
        with self._lock:
            self._pods[meta.get("uid") or f"{meta['namespace']}/{meta.get('name')}"] = bound
        if self._ledger is not None:
            self._ledger.observe_pod(bound)  # the embedded "API" shows the binding at once

    def delete_pod(self, namespace: str, name: str) -> str | None:
        """Delete a pod as the API server would; returns its UID, None if there is no such pod."""
        with self._lock:
            for key, pod in list(self._pods.items()):
                meta = pod.get("metadata") or {}
                if (meta.get("namespace") or "default", meta.get("name")) == (namespace, name):
                    del self._pods[key]
                    break
            else:
                return None
        uid = meta.get("uid") or ""
        if self._ledger is not None:
            self._ledger.forget_pod(uid)
        return uid

    def objects(self) -> list:
        """Every node, ConfigMap and pod as it stands now (a replayable dump)."""
        with self._lock:
            return copy.deepcopy(self._nodes + self._configmaps + list(self._pods.values()))
