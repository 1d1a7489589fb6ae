"""Pods that ask for shared GPU and are not bound yet, as the cluster shows them.

Preemption holds room for a nominated pod until it binds; the autoscaling
planner places the pods still waiting. Both read this store. Contract:

* the ledger feeds it from every pod it observes: an unbound pod that is not
  finished (``Succeeded``/``Failed``) nor being deleted (``deletionTimestamp``)
  and asks for shared GPU, validly or not, is *pending*; any other state of
  the pod (bound, finished, deleted, no shared-GPU request) removes it;
* a pod reserved by bind leaves the store at once (it is being bound; the
  cluster will show it bound);
* of a pod it keeps only what scheduling reads: identity, the parsed request
  (or the :class:`~policy.request.InvalidRequest`), priority, nominated node,
  scheduler name, node selector, required node affinity terms, tolerations and
  creation time; the raw selector, affinity and tolerations are kept as the
  API gives them (interpreting them is the reader's job);
* reads return snapshots; every method is safe from any thread.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from datetime import datetime

from policy.request import GPURequest, InvalidRequest, parse_pod_request

TERMINAL_PHASES = ("Succeeded", "Failed")


@dataclass(frozen=True, slots=True)
class PendingPod:
    uid: str
    namespace: str
    name: str
    request: GPURequest | InvalidRequest
    priority: int  # spec.priority (0 when absent, as the API server defaults it without a PriorityClass)
    nominated_node: str | None  # status.nominatedNodeName: where preemption made room for it
    scheduler_name: str  # spec.schedulerName ("default-scheduler" when absent)
    node_selector: dict  # spec.nodeSelector
    node_affinity: list  # spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms
    tolerations: list  # spec.tolerations
    created: str  # metadata.creationTimestamp, RFC 3339 ("" when absent)

    @property
    def ref(self) -> str:
        return f"{self.namespace}/{self.name}"


def _object(value) -> dict:
    return value if isinstance(value, dict) else {}


def _list(value) -> list:
    return value if isinstance(value, list) else []


def pod_key(pod: dict) -> str:
    """The pod's UID, or ``namespace/name`` for a pod without one (a hand-written cluster file)."""
    meta = _object(pod.get("metadata"))
    uid = meta.get("uid")
    return uid if isinstance(uid, str) and uid else f"{meta.get('namespace') or 'default'}/{meta.get('name') or ''}"


def pending_of(pod: dict) -> PendingPod | None:
    """The pod as a :class:`PendingPod`, or None when it is not pending (see module doc)."""
    meta, spec, status = _object(pod.get("metadata")), _object(pod.get("spec")), _object(pod.get("status"))
    if spec.get("nodeName") or status.get("phase") in TERMINAL_PHASES or meta.get("deletionTimestamp"):
        return None
    try:
        request = parse_pod_request(pod)
    except InvalidRequest as exc:
        request = exc
    if request is None:
        return None
    affinity = _object(_object(_object(spec.get("affinity")).get("nodeAffinity"))
                       .get("requiredDuringSchedulingIgnoredDuringExecution"))
    priority, nominated = spec.get("priority"), status.get("nominatedNodeName")
    selector = _object(spec.get("nodeSelector"))
    return PendingPod(
        uid=pod_key(pod), namespace=str(meta.get("namespace") or "default"),
        name=str(meta.get("name") or ""), request=request,
        priority=priority if isinstance(priority, int) and not isinstance(priority, bool) else 0,
        nominated_node=nominated if isinstance(nominated, str) and nominated else None,
        scheduler_name=str(spec.get("schedulerName") or "default-scheduler"),
        node_selector={k: v for k, v in selector.items() if isinstance(k, str) and isinstance(v, str)},
        node_affinity=[t for t in _list(affinity.get("nodeSelectorTerms")) if isinstance(t, dict)],
        tolerations=[t for t in _list(spec.get("tolerations")) if isinstance(t, dict)],
        created=str(meta.get("creationTimestamp") or ""),
    )


def oldest_age(pods, now: float) -> float:
    """Seconds since the oldest of ``pods`` was created, at ``now`` (Unix seconds); 0 for no pod.
    A pod whose ``created`` is absent or not RFC 3339 has no age and is left out; one created
    after ``now`` (clock skew) counts as 0."""
    oldest = None
    for pod in pods:
        try:
            created = datetime.fromisoformat(pod.created.replace("Z", "+00:00")).timestamp()
        except ValueError:
            continue
        oldest = created if oldest is None else min(oldest, created)
    return 0.0 if oldest is None else max(now - oldest, 0.0)


class PendingPods:
    """uid → :class:`PendingPod` (see module doc)."""

    def __init__(self):
        self._pods: dict[str, PendingPod] = {}
        self._lock = threading.Lock()

    def observe(self, pod: dict) -> PendingPod | None:
        """Record the pod's current state; returns it when it is pending."""
        pending = pending_of(pod)
        with self._lock:
            if pending is None:
                self._pods.pop(pod_key(pod), None)
            else:
                self._pods[pending.uid] = pending
        return pending

    def forget(self, uid: str) -> None:
        with self._lock:
            self._pods.pop(uid, None)

    def get(self, uid: str) -> PendingPod | None:
        with self._lock:
            return self._pods.get(uid)

    def all(self) -> list:
        """Every pending pod, oldest first (then by namespace/name)."""
        with self._lock:
            pods = list(self._pods.values())
        return sorted(pods, key=lambda p: (p.created, p.namespace, p.name))

    def __len__(self) -> int:
        with self._lock:
            return len(self._pods)
