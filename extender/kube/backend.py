"""The Kubernetes backend: the ledger fed by the API server, bindings written to it.

:class:`KubernetesCluster` implements the backend protocol of
:mod:`extender.cluster`. Contract:

* three :class:`~extender.kube.reflector.Reflector` threads list and watch
  Nodes, Pods (all namespaces) and the ConfigMaps of ``kube-system`` and feed
  the ledger through the same ``observe_*``/``forget_*`` calls the embedded
  cluster uses; those calls take only a node's lock, briefly, so the watches
  never hold up filter, prioritize or bind;
* ``ready()`` is False until all three have completed their first list;
* after every pod list, an allocation the ledger held before the list was
  issued whose pod is not in the list is released (its pod is gone: a
  deletion the watch missed, or a bind whose pod vanished);
* a pod that becomes *unaccounted* (bound, requests shared GPU, carries no
  allocation) gets a Warning event ``UnaccountedGPUShare``, and a pod this
  extender binds with a GPU share a Normal event ``GPUShareAllocated`` naming
  the node, GPU(s), memory and compute; defragmentation notes its moves
  through :meth:`KubernetesCluster.note` on the same path. Events are best effort: queued
  (at most 1,000 waiting; more are dropped and counted) and sent from a
  thread of their own, so neither the watch nor a bind ever waits on one or
  fails with one; a burst goes in one pipelined write (the thread waits
  0.2 s after an event for others to join it, unless a full batch waits);
* ``bind`` creates a Binding (with the UID the scheduler named) that carries
  the allocation annotations: the API server sets the pod's node and merges
  the annotations in one update, so bind is one write (a merge patch first
  only where the pod carries keys of ours this allocation does not use). A
  bind of a pod already on that node patches the annotations and succeeds
  (bind is idempotent). On a failed Binding the pod is read back: bound to
  that node after all means success (its annotations made this
  allocation's); otherwise nothing was written and :class:`ClusterError` is
  raised. If the pod cannot be read back, the error is marked ``ambiguous``;
* ``evict`` posts a policy/v1 Eviction with the pod's UID as precondition:
  the API server checks the PodDisruptionBudgets and answers 429 for one that
  allows no disruption (``evict`` returns False then).
"""

from __future__ import annotations

import functools
import os
import queue
import threading
import time
from collections import defaultdict

import orjson

from extender import annotations as A
from extender.cluster import ClusterError
from extender.kube.reflector import Backoff, Reflector, api_status
from extender.kube.api import RawApi
from extender.logs import fields, get_logger
from policy.allocation import per_gpu
from policy.node import UNHEALTHY_CONFIGMAP_NAMESPACE

ALLOCATED, UNACCOUNTED = "GPUShareAllocated", "UnaccountedGPUShare"  # the reasons of the events we record
NORMAL_REASONS = {ALLOCATED, "GPUDefragEvicted"}  # the others are Warnings (extender.defrag.executor adds its own)
EVENT_GATHER_SECONDS = 0.2  # an event waits this long for others to go with it in one write
EVENT_BATCH = 64  # most events in one pipelined write
# a batch's replies are read this long after its write, together: the API server answers a
# connection's requests one by one, and read as they came each woke the events thread (5,000
# nodes, kube benchmark: 1.4 wake-ups of that thread per pod)
EVENT_REPLIES_AFTER_SECONDS = 0.05


def _name(obj: dict) -> str:
    return (obj.get("metadata") or {}).get("name") or ""


def _uid(obj: dict) -> str:
    return (obj.get("metadata") or {}).get("uid") or ""


def _ours(annotations: dict) -> dict:
    """Every allocation key of ours, ``None`` (removed, in a merge patch) where ``annotations`` lacks it."""
    return {k: annotations.get(k) for k in A.ALL_KEYS}


def _namespaced_name(obj: dict) -> str:
    meta = obj.get("metadata") or {}
    return f"{meta.get('namespace') or ''}/{meta.get('name') or ''}"


def _node_name(pod: dict) -> str | None:
    """What the pod store keeps of a pod: the node it is bound to."""
    return (pod.get("spec") or {}).get("nodeName")


def _trim(obj: dict) -> dict:
    """Drop what the extender never reads and a big cluster would pay for in memory."""
    meta = obj.get("metadata")
    if meta and "managedFields" in meta:
        obj["metadata"] = {k: v for k, v in meta.items() if k != "managedFields"}
    return obj


class KubernetesCluster:
    kind = "kubernetes"

    def __init__(self, api_client, *, source: str = "kubernetes", namespace: str = UNHEALTHY_CONFIGMAP_NAMESPACE,
                 backoff: Backoff | None = None, watch_timeout: int = 300, request_timeout: float = 5.0,
                 page_size: int = 500):
        from kubernetes import client

        self.api = client.CoreV1Api(api_client)
        self.raw = RawApi(api_client, request_timeout)  # bind's writes, without the client's model layer
        self.policy = client.PolicyV1Api(api_client)
        self.source = source
        self.namespace = namespace
        self.backoff = backoff or Backoff()
        self.watch_timeout = watch_timeout
        self.request_timeout = request_timeout
        self.page_size = page_size
        self.reflectors: list[Reflector] = []
        self._pods: Reflector | None = None
        self._events: queue.Queue = queue.Queue(maxsize=1000)  # (reason, pod metadata, node, annotations)
        self._events_thread: threading.Thread | None = None
        self._on_stop: list = []
        self._event_counts: dict = defaultdict(int)  # (reason, "sent" | "failed" | "dropped") → events
        self._event_counts_lock = threading.Lock()
        self.log = get_logger()

    @classmethod
    def from_configuration(cls, configuration, **options) -> "KubernetesCluster":
        from kubernetes import client

        return cls(client.ApiClient(configuration), **options)

    # -- protocol: lifecycle --------------------------------------------------------
    def start(self, ledger) -> None:
        common = dict(backoff=self.backoff, watch_timeout=self.watch_timeout, transform=_trim,
                      page_size=self.page_size)
        nodes = Reflector("nodes", self.api.list_node, _name, ledger.observe_node,
                          lambda name, _kept: ledger.forget_node(name), keep=lambda _obj: None, **common)
        self._pods = Reflector("pods", self.api.list_pod_for_all_namespaces, _uid,
                               functools.partial(self._observe_pod, ledger),
                               lambda uid, _node: ledger.forget_pod(uid),
                               before_list=lambda: [a.pod.uid for a in ledger.allocations()],
                               keep=_node_name, **common)
        configmaps = Reflector("configmaps", functools.partial(self.api.list_namespaced_config_map, self.namespace),
                               _namespaced_name, ledger.observe_configmap,
                               lambda _key, obj: ledger.observe_configmap(obj, deleted=True), **common)
        self.reflectors = [nodes, self._pods, configmaps]
        for reflector in self.reflectors:
            reflector.start()
        self._events_thread = threading.Thread(target=self._send_events, name="events", daemon=True)
        self._events_thread.start()

    def ready(self) -> bool:
        return bool(self.reflectors) and all(r.synced.is_set() for r in self.reflectors)

    def on_stop(self, callback) -> None:
        """Call ``callback()`` when the backend stops (e.g. to end a loop that uses its client)."""
        self._on_stop.append(callback)

    def stop(self) -> None:
        for callback in self._on_stop:
            callback()
        for reflector in self.reflectors:
            reflector.stop()
        if self._events_thread is not None:
            self._events.put(None)
            self._events_thread.join(5)

    # -- events: Warning for unaccounted pods, Normal for a GPU share allocated at bind ---------------
    def _observe_pod(self, ledger, pod: dict) -> None:
        seen = ledger.counters.unaccounted_seen
        ledger.observe_pod(pod)
        if ledger.counters.unaccounted_seen > seen:
            self._event(UNACCOUNTED, pod.get("metadata") or {}, (pod.get("spec") or {}).get("nodeName"), None)

    def note(self, reason: str, meta: dict, message: str) -> None:
        """Record an Event ``reason`` with ``message`` on the pod of ``meta`` (queued, best effort)."""
        self._event(reason, meta, None, message)

    def _event(self, reason: str, meta: dict, node: str | None, annotations: dict | str | None) -> None:
        """Queue an event for the events thread; never blocks (a full queue drops it: the log line and
        the counters still tell)."""
        try:
            self._events.put_nowait((reason, meta, node, annotations))
        except queue.Full:
            self._count_event(reason, "dropped")

    def _count_event(self, reason: str, result: str) -> None:
        with self._event_counts_lock:
            self._event_counts[(reason, result)] += 1

    def event_counts(self) -> dict:
        """``(reason, result) → events``, result ``sent``, ``failed`` or ``dropped``."""
        with self._event_counts_lock:
            return dict(self._event_counts)

    def _send_events(self) -> None:
        """The events thread: after the first event of a burst it waits :data:`EVENT_GATHER_SECONDS`
        (unless a batch is queued already) and sends what has queued by then, at most
        :data:`EVENT_BATCH`, as one pipelined write, whose replies it reads together
        :data:`EVENT_REPLIES_AFTER_SECONDS` later. Each wake-up of this thread costs the
        process about as much CPU as the event itself (measured: see benchmarks/RESULTS.md)."""
        while (first := self._events.get()) is not None:
            if self._events.qsize() < EVENT_BATCH - 1:
                time.sleep(EVENT_GATHER_SECONDS)
            batch = [first]
            while len(batch) < EVENT_BATCH and batch[-1] is not None:
                try:
                    batch.append(self._events.get_nowait())
                except queue.Empty:
                    break
            stop = batch[-1] is None
            batch = batch[:-1] if stop else batch
            try:
                self._send_batch(batch)
            except Exception as exc:  # noqa: BLE001 - a fault here must not end the thread: later events still go
                self.log.error("could not send events", exc_info=exc)
                for reason, *_ in batch:
                    self._count_event(reason, "failed")
            if stop:
                return

    def _send_batch(self, batch: list) -> None:
        now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        instance = os.environ.get("HOSTNAME", "cgpu-extender")
        events = [_event_body(reason, meta, node, annotations, now, instance)
                  for reason, meta, node, annotations in batch]
        try:
            replies = self.raw.create_events([(event["metadata"]["namespace"], event) for event in events],
                                             settle=EVENT_REPLIES_AFTER_SECONDS)
        except Exception as exc:  # noqa: BLE001 - e.g. the auth hook failed: every event of the batch failed
            replies = [exc] * len(events)
        failed = []
        for event, reply in zip(events, replies):
            self._count_event(event["reason"], "failed" if isinstance(reply, Exception) else "sent")
            if isinstance(reply, Exception):
                failed.append((event, reply))
        if failed:  # one line per batch: an API server down must not flood the log with one per event
            event, reply = failed[0]
            pod = event["involvedObject"]
            self.log.warning("could not record events", extra=fields(
                failed=len(failed), of=len(events), pod=f"{pod['namespace']}/{pod['name']}",
                reason=event["reason"], error=str(_cluster_error(reply))))

    def status(self) -> dict:
        """Per watched resource: synced, resourceVersion, list/watch/event/error counts."""
        return {r.name: {"synced": r.synced.is_set(), "resourceVersion": r.resource_version, **r.stats}
                for r in self.reflectors}

    # -- protocol: pods ---------------------------------------------------------------
    def get_pod(self, namespace: str, name: str, uid: str) -> dict | None:
        """The pod from the API (the watch keeps no pod bodies); None unless its UID is ``uid``."""
        try:
            pod = self._read_pod(namespace, name)
        except ClusterError:
            return None
        return pod if pod is not None and _uid(pod) == uid else None

    def disruption_budgets(self) -> list:
        """Every PodDisruptionBudget, read now (preemption is rare; no watch is kept for it).
        [] when they cannot be read: violations are then not counted, and the log says so."""
        try:
            return self._call(self.policy.list_pod_disruption_budget_for_all_namespaces).get("items") or []
        except ClusterError as exc:
            self.log.warning("PodDisruptionBudgets unreadable; preemption counts no violations",
                             extra=fields(error=str(exc)))
            return []

    def bound_node(self, uid: str) -> str | None:
        """The node the watch last saw the pod bound to, if any."""
        return self._pods.store.get(uid) if self._pods is not None else None

    def bind(self, pod: dict, node: str, annotations: dict) -> None:
        meta = pod.get("metadata") or {}
        name, namespace, uid = meta.get("name") or "", meta.get("namespace") or "default", meta.get("uid") or ""
        holder = self.bound_node(uid)
        if holder and holder != node:
            raise ClusterError(f"pod is already bound to node {holder}")
        if holder == node:  # a repeated bind: the pod is there; make it carry this allocation
            if annotations:
                self._patch_annotations(namespace, name, uid, _ours(annotations))
            return
        # The API server merges a Binding's annotations into the pod in the same
        # update that sets its node (pods/binding), so one write binds and annotates:
        # no window where the pod carries an allocation it does not have, or the
        # reverse. A merge cannot remove keys, so keys of ours this allocation does
        # not use (left by an earlier attempt or another writer) are cleared first.
        stale = [k for k in A.ALL_KEYS if k not in annotations and k in (meta.get("annotations") or {})]
        if stale:
            self._patch_annotations(namespace, name, uid, dict.fromkeys(stale))
        binding = {"apiVersion": "v1", "kind": "Binding",
                   "metadata": {"name": name, "namespace": namespace, "uid": uid,
                                **({"annotations": dict(annotations)} if annotations else {})},
                   "target": {"apiVersion": "v1", "kind": "Node", "name": node}}
        try:
            self._write(self.raw.create_binding, namespace, name, binding)
        except ClusterError as failure:
            try:
                current = self._read_pod(namespace, name)
            except ClusterError:
                failure.ambiguous = True  # the Binding may exist; leave everything as it is
                raise failure from None
            bound_to = (current.get("spec") or {}).get("nodeName") if current and _uid(current) == uid else None
            if bound_to != node:
                raise failure
            # the Binding exists after all (a reply lost after the write, or an earlier
            # attempt's): the pod must carry this allocation, not that attempt's
            if not annotations or _ours((current.get("metadata") or {}).get("annotations") or {}) == _ours(annotations):
                return  # nothing new to say: the pod is where, and as, this bind wants it
            self._patch_annotations(namespace, name, uid, _ours(annotations))
        if annotations:
            self._event(ALLOCATED, meta, node, annotations)

    def evict(self, namespace: str, name: str, uid: str) -> bool:
        """Evict the pod of ``uid`` through the Eviction API: True when it is evicted, False when a
        PodDisruptionBudget forbids it now (429); :class:`ClusterError` for any other failure."""
        body = {"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": name, "namespace": namespace},
                "deleteOptions": {"preconditions": {"uid": uid}}}
        try:
            self._write(self.raw.create_eviction, namespace, name, body)
        except ClusterError as exc:
            if exc.status == 429:
                return False
            raise
        return True

    def pod_node(self, namespace: str, name: str, uid: str) -> str | None:
        """The node the API shows the pod bound to now (None: unbound or gone)."""
        current = self._read_pod(namespace, name)
        if current is None or _uid(current) != uid:
            return None
        return (current.get("spec") or {}).get("nodeName")

    # -- API calls --------------------------------------------------------------------
    def _patch_annotations(self, namespace: str, name: str, uid: str, values: dict) -> None:
        # with the UID in it, the patch is invalid (422) on a pod recreated under the same name
        body = {"metadata": {"uid": uid, "annotations": values}}
        self._write(self.raw.patch_pod, namespace, name, body)

    def _read_pod(self, namespace: str, name: str) -> dict | None:
        """The pod as the API has it now; None if it does not exist."""
        try:
            return self._call(self.api.read_namespaced_pod, name, namespace)
        except ClusterError as exc:
            if exc.status == 404:
                return None
            raise

    def _call(self, method, *args, **kwargs) -> dict:
        """A generated client call, its reply as JSON; every failure as a :class:`ClusterError`."""
        try:
            response = method(*args, _preload_content=False, _request_timeout=self.request_timeout, **kwargs)
            try:
                return orjson.loads(response.data or b"{}")
            finally:
                response.release_conn()
        except Exception as exc:  # noqa: BLE001 - the client raises many types; all mean "failed"
            raise _cluster_error(exc) from None

    def _write(self, method, *args) -> dict:
        """A :class:`RawApi` write, its reply as JSON; every failure as a :class:`ClusterError`."""
        try:
            return method(*args)
        except Exception as exc:  # noqa: BLE001 - sockets, TLS and the API raise many types; all mean "failed"
            raise _cluster_error(exc) from None

    call = _call  # for loops that share this client and its error handling (extender.kube.placeholders)


def _cluster_error(exc: Exception) -> ClusterError:
    code = api_status(exc)
    if code is None:
        first_line = (str(exc).splitlines() or [""])[0]
        error = ClusterError(f"Kubernetes API unreachable: {type(exc).__name__}: {first_line[:200]}")
    else:
        message = getattr(exc, "reason", "") or ""
        try:
            message = orjson.loads(getattr(exc, "body", None) or b"{}").get("message") or message
        except (orjson.JSONDecodeError, AttributeError):
            pass
        error = ClusterError(f"Kubernetes API answered {code}: {message}")
    error.status = code
    return error


def _event_body(reason: str, meta: dict, node: str | None, annotations: dict | str | None, now: str,
                instance: str) -> dict:
    namespace = meta.get("namespace") or "default"
    return {
        "apiVersion": "v1", "kind": "Event",
        "metadata": {"generateName": f"{meta.get('name')}.", "namespace": namespace},
        "involvedObject": {"apiVersion": "v1", "kind": "Pod", "name": meta.get("name"),
                           "namespace": namespace, "uid": meta.get("uid")},
        "type": "Normal" if reason in NORMAL_REASONS else "Warning", "reason": reason,
        "message": _event_message(reason, node, annotations),
        "source": {"component": "cgpu-extender"}, "reportingComponent": "cgpu-extender",
        "reportingInstance": instance, "firstTimestamp": now, "lastTimestamp": now, "count": 1,
    }


def _event_message(reason: str, node: str | None, annotations: dict | str | None) -> str:
    if isinstance(annotations, str):  # a message given whole (KubernetesCluster.note)
        return annotations
    if reason == UNACCOUNTED:
        return (f"pod is bound to node {node} and requests shared GPU but carries no GPU allocation annotation: "
                "its GPU use is not counted")
    recovered = A.read(annotations, None)
    memory, core = (per_gpu(recovered.memory), per_gpu(recovered.core)) if recovered else ({}, {})
    shares = ", ".join(f"GPU {gpu}: {gib} GiB" + (f" + {core[gpu]} % compute" if core.get(gpu) else "")
                       for gpu, gib in sorted(memory.items()))
    return f"allocated {shares} on node {node}"
