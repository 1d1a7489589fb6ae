"""The allocation ledger: which pod holds which share of which GPU.

The ledger owns a :class:`~policy.state.ClusterState` and the allocation
records behind its usage arrays. Its contract:

* usage arrays always equal the sum of the recorded allocations on each
  known node (a node that disappears keeps its records; they count again if
  it comes back);
* :meth:`Ledger.reserve` re-checks the fit and records the allocation under
  the node's lock, so concurrent binds never over-allocate a GPU; it is
  idempotent for a pod already reserved on the same node and refuses one
  reserved elsewhere;
* :meth:`Ledger.observe_pod` rebuilds allocations from bound pods'
  annotations (V2, else V1); a bound shared-GPU pod without them is kept as
  *unaccounted* and reported, never silently dropped;
* failed checks raise :class:`BindRejected` and change nothing;
* allocation records and the arrays change together under the state's lock,
  so :meth:`Ledger.snapshot` (the autoscaling plan's copy of the state) sees
  them agree;
* every unbound shared-GPU pod it observes is kept in ``pending``
  (:mod:`extender.pending`) until it is bound, reserved, finished or deleted;
* every pod bound to a node (shared-GPU or not, until it finishes or is
  deleted) has its CPU and host-memory requests counted on that node, for
  strategies that weigh them; :meth:`Ledger.reserve` counts them at once;
* :meth:`Ledger.hold_back` (filter, prioritize, bind) applies the room held
  for preemptors (:mod:`extender.nominations`) and for defragmentation moves
  (``defrag_holds``, :mod:`extender.defrag.holds`); each allocation keeps
  what defragmentation reads of its pod (``facts``, :mod:`extender.defrag.facts`).
"""

from __future__ import annotations

import sys
import threading
from collections import defaultdict
from dataclasses import dataclass, field

import numpy as np

from extender import annotations as A
from extender.logs import fields, get_logger
from extender.malformed import MalformedObjects
from extender.defrag.facts import facts_of
from extender.defrag.holds import DefragHolds
from extender.nominations import Nominations
from extender.podinfo import labels_of, priority_and_start
from extender.pending import PendingPods, pod_key
from policy.allocation import per_gpu, split
from policy.names import MODE_CORE, MODE_NAMES, MODE_NONE, PLACEMENT_NAMES, UNLIMITED_PODS
from policy.node import NodeSpec, parse_node, parse_unhealthy_gpus, unhealthy_configmap_node
from policy.placement import Evaluation, evaluate, gpu_fit
from policy.pools import DEFAULT_POOL_LABELS, pool_name
from policy.reasons import MESSAGES
from policy.rowcache import RowCache
from policy.reasons import UNKNOWN_NODE as REASON_UNKNOWN
from policy.echo import shown
from policy.request import GPURequest, InvalidRequest, asks_for_shared_gpu, host_requests, parse_pod_request
from policy.state import Mark

TERMINAL_PHASES = ("Succeeded", "Failed")


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
        self.facts = None  # extender.defrag.facts.PodFacts: may it move, where may its replacement go

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
        return per_gpu(self.memory)

    @property
    def core_per_gpu(self) -> dict:
        return per_gpu(self.core)

    @property
    def annotations(self) -> dict:
        """The annotations the pod carries for this allocation (V1 keys only if that is all it had)."""
        return A.write(self.memory, self.core, self.gpu_memory, self.assume_ns, self.assigned,
                       v1_only=self.source == "v1")

    def __repr__(self) -> str:
        return f"Allocation({self.pod}, node={self.node}, shares={self.shares}, source={self.source})"


@dataclass(frozen=True, slots=True)
class HostUse:
    """A bound pod's CPU (millicores) and host-memory (bytes) requests on its node."""

    node: str
    cpu: int
    memory: int


@dataclass(slots=True)
class Unaccounted:
    """A bound pod that asks for shared GPU but says on no annotation which GPU it uses.

    Held back on every GPU of its node (see :meth:`Ledger._hold`): ``memory``
    and ``core`` are per GPU (None: unknown, the pod's request is malformed, so
    each GPU is held whole); ``held`` is what is counted on the node's row now.
    """
    pod: PodRef
    node: str
    memory: int | None
    core: int | None
    wants_core: bool = False
    reason: str = "bound pod requests shared GPU but carries no allocation annotation"
    held: tuple = ()  # ({gpu: GiB}, {gpu: compute}) counted on the row


@dataclass(frozen=True)
class _Choice:
    """A scored evaluation of a strategy that is not ``row_local``, and the state it saw."""
    key: tuple
    mark: Mark
    rows: np.ndarray
    result: Evaluation


@dataclass
class _Counters:
    reserved: int = 0
    rejected: int = 0
    released: int = 0
    recovered: int = 0
    unaccounted_seen: int = 0
    by_reason: dict = field(default_factory=lambda: defaultdict(int))


class Ledger:
    """Allocation records and the arrays they sum to (see module doc)."""

    def __init__(self, state, strategy, pool_labels=DEFAULT_POOL_LABELS):
        self.state = state
        self.strategy = strategy
        self.pool_labels = tuple(pool_labels)  # a node's pool in inspect and metrics (as plan groups them)
        self._allocations: dict[str, Allocation] = {}
        self._by_node: dict[str, dict[str, Allocation]] = defaultdict(dict)
        self._unaccounted: dict[str, Unaccounted] = {}
        self._nominations = Nominations()  # preemptors' holds
        self.defrag_holds = DefragHolds()  # rooms a defragmentation move holds (extender.defrag.holds)
        self._malformed = MalformedObjects()
        self.pending = PendingPods()
        self._host: dict[str, HostUse] = {}
        self._host_by_node: dict[str, dict[str, HostUse]] = defaultdict(dict)
        self._host_lock = threading.Lock()
        self._nodes: dict[str, dict] = {}
        self._names: dict[tuple, tuple] = {}  # container-name tuples, shared (see _container_names)
        self._unhealthy: dict[str, frozenset] = {}
        self._locks: dict[str, threading.Lock] = defaultdict(threading.Lock)
        self._locks_guard = threading.Lock()
        self.counters = _Counters()
        self._row_local = getattr(strategy, "row_local", False)
        self._fits = RowCache(state)
        self._evaluations = RowCache(state)
        self._last: _Choice | None = None

    # -- locking ---------------------------------------------------------------
    def node_lock(self, node: str) -> threading.Lock:
        with self._locks_guard:
            return self._locks[node]

    # -- reading ---------------------------------------------------------------
    def lookup(self, names: list) -> tuple[np.ndarray, int]:
        """``(rows, layout)`` of node names (see :meth:`ClusterState.lookup`)."""
        return self.state.lookup(names)

    def check_rows(self, request: GPURequest, rows: np.ndarray) -> np.ndarray:
        """Reason codes (``FITS`` = fits) for the nodes at ``rows``: the filter's question.

        With a ``row_local`` strategy they come with the full evaluation, which
        prioritize and bind then find current; otherwise from a cache of the fit alone.
        """
        if self._row_local:
            (reason,) = self._evaluations.take(request.placement_key, self._evaluator(request), rows, first=1)
        else:
            (reason,) = self._fits.take(request.fit_key, self._fitter(request), rows, first=1)
        return np.where(rows >= 0, reason, REASON_UNKNOWN).astype(np.int8)

    @staticmethod
    def _fitter(request: GPURequest):
        """``view → (reason, fit)``: what the fit cache keeps for ``request`` (:func:`gpu_fit`'s answer)."""
        def compute(view):
            fit, reason = gpu_fit(view, request)
            return reason, fit

        return compute

    def _evaluator(self, request: GPURequest):
        """``view → (reason, gpus, raw)``: what the evaluation cache keeps for ``request``."""
        def compute(view):
            result = evaluate(view, request, self.strategy)
            return result.reason, result.gpus, result.raw

        return compute

    def evaluate_rows(self, request: GPURequest, rows: np.ndarray, score: bool = True) -> Evaluation:
        """Full evaluation (reasons, GPU choice, raw scores) for the nodes at ``rows``.

        A ``row_local`` strategy's results come from the cache of earlier calls
        for the same request, recomputed where nodes changed; any other
        strategy evaluates now (it may learn from or draw for each call): every
        node in place when most are asked for, else the rows asked for,
        gathered (gathering copies 16 arrays, so reading in place wins from
        about a sixth of all rows up, measured at 5,000 nodes).
        """
        if self._row_local:
            reason, gpus, raw = self._evaluations.take(request.placement_key, self._evaluator(request), rows)
            if not len(rows) or rows.min() >= 0:
                return Evaluation(reason, gpus, raw)
            known = rows >= 0
            return Evaluation(np.where(known, reason, REASON_UNKNOWN).astype(np.int8),
                              np.where(known[:, None], gpus, -1), np.where(known, raw, -np.inf))
        state = self.state
        mark = state.mark()
        subset = 6 * len(rows) < len(state.names)
        # the fit as the filter found it, current (a cache refreshed where rows changed): if nothing was
        # written from the mark until the evaluation ends, it and the view are the state at the mark
        reason, fit = self._fits.take(request.fit_key, self._fitter(request), rows if subset else np.arange(mark.rows))
        view = state.view(rows) if subset else state.view_live()
        aligned = len(view) == len(reason)  # else rows were added or freed since the mark
        if aligned:
            fitted = (fit & view.known[:, None], np.where(view.known, reason, REASON_UNKNOWN).astype(np.int8))
            result = evaluate(view, request, self.strategy, score=score, fitted=fitted)
        if not aligned or not state.settled_since(mark):  # a write came between: again, on a copy read whole
            result = evaluate(state.view(rows) if subset else state.view_whole(), request, self.strategy, score=score)
        if not subset:
            result = result.take(rows)
        if score:
            self._last = _Choice(request.placement_key, mark, rows, result)
        return result

    def _last_choice(self, request: GPURequest, row: int) -> Evaluation | None:
        """The last scored evaluation's answer for ``row``, if it was for this request's
        shape and the row has not changed since: then its fit and GPU choice are exact
        for the row as it is (the choice may have weighed other nodes, as prioritize did)."""
        last = self._last
        if last is None or last.key != request.placement_key:
            return None
        changed = self.state.changed_since(last.mark, self.state.mark())
        if changed is None or row in changed:
            return None
        at = np.flatnonzero(last.rows == row)
        return last.result.take(at[:1]) if len(at) else None

    def check(self, request: GPURequest, names: list) -> np.ndarray:
        """:meth:`check_rows` by node names."""
        return self.check_rows(request, self.state.rows(names))

    def evaluate(self, request: GPURequest, names: list, score: bool = True) -> Evaluation:
        """:meth:`evaluate_rows` by node names."""
        return self.evaluate_rows(request, self.state.rows(names), score)

    def allocation(self, uid: str) -> Allocation | None:
        return self._allocations.get(uid)

    def allocations(self) -> list:
        return list(self._allocations.values())

    def residents(self, node: str) -> tuple | None:
        """``(row view, [Allocation, ...])`` of one node for preemption, read together under
        the state's lock; None when the node is unknown."""
        with self.state.lock:
            row = self.state.index.get(node, -1)
            if row < 0:
                return None
            return self.state.view(np.array([row])), list(self._by_node.get(node, {}).values())

    def unaccounted(self) -> list:
        return list(self._unaccounted.values())

    # -- bind ------------------------------------------------------------------
    def reserve(self, pod: PodRef, request: GPURequest, node: str, assume_ns: int,
                priority: int = 0, start: str = "", owner: str | None = None) -> tuple[Allocation, bool]:
        """Check the fit on ``node`` and record the allocation, atomically per node.

        Returns ``(allocation, created)``; ``created`` is False when the pod was
        already reserved on ``node`` (the existing allocation is returned).
        ``owner``: the pod's controller (``namespace/uid``), for the rooms
        defragmentation holds for a replacement (:meth:`hold_back`).
        """
        existing = self._allocations.get(pod.uid)
        if existing is not None and existing.node != node:
            raise BindRejected(f"pod {pod} is already bound to node {existing.node}")
        with self.node_lock(node):
            existing = self._allocations.get(pod.uid)
            if existing is not None:
                if existing.node == node:
                    return existing, False
                raise BindRejected(f"pod {pod} is already bound to node {existing.node}")
            row = self.state.index.get(node, -1)
            if row < 0:
                self.counters.rejected += 1
                raise BindRejected(f"node {node} is unknown to the GPU-share extender")
            # the row's GPU use cannot change while its lock is held: a cached evaluation is exact
            result = self._last_choice(request, row) if not self._row_local else None
            if result is None:
                result = self.evaluate_rows(request, np.array([row]), score=False)
            result = self.hold_back(request, np.array([row]), result, priority, pod.uid, score=False, owner=owner)
            if not result.feasible[0]:
                self.counters.rejected += 1
                raise BindRejected(f"pod {pod} no longer fits on node {node}: {MESSAGES[int(result.reason[0])]}")
            memory, core = split(request, result.gpus[0])
            spec = self.state.specs[node]
            allocation = Allocation(pod, node, memory, core, request.wants_core, spec.memory_per_gpu, assume_ns,
                                    "bind", containers=self._container_names(
                                        (c.index, c.name) for c in request.containers))
            allocation.priority, allocation.start = priority, start
            self._record(allocation)
            self._nominations.forget(pod.uid)
            self.defrag_holds.bound(pod.uid, owner, node)
            self.pending.forget(pod.uid)
            self._count_host(pod.uid, HostUse(node, request.cpu, request.host_memory))
            self.counters.reserved += 1
            return allocation, True

    def release(self, uid: str) -> Allocation | None:
        """Forget a pod's allocation (deleted, finished, or its bind failed)."""
        self._count_host(uid, None)
        allocation = self._allocations.get(uid)
        if allocation is None:
            self._unhold(uid)
            return None
        with self.node_lock(allocation.node), self.state.lock:
            allocation = self._allocations.pop(uid, None)
            if allocation is None:
                return None
            self._by_node[allocation.node].pop(uid, None)
            self._apply(allocation, -1)
            self.counters.released += 1
            return allocation

    def _record(self, allocation: Allocation) -> None:
        with self.state.lock:  # records and arrays change together (see snapshot)
            self._allocations[allocation.pod.uid] = allocation
            self._by_node[allocation.node][allocation.pod.uid] = allocation
            self._apply(allocation, +1)

    def _container_names(self, pairs) -> tuple:
        """``((index, name), ...)`` as one shared tuple per distinct value (replicas repeat it)."""
        names = tuple((int(i), sys.intern(name)) for i, name in pairs)
        if len(self._names) >= 10000:  # only sharing is lost: allocations keep their own tuples
            self._names.clear()
        return self._names.setdefault(names, names)

    def _count_host(self, uid: str, use: HostUse | None) -> None:
        """Make ``use`` the pod's counted CPU and host memory (None: count nothing)."""
        with self._host_lock:
            old = self._host.get(uid)
            if old == use:
                return
            if old is not None:
                del self._host[uid]
                self._host_by_node[old.node].pop(uid, None)
                self.state.add_host_usage(old.node, old.cpu, old.memory, -1)
            if use is not None:
                self._host[uid] = use
                self._host_by_node[use.node][uid] = use
                self.state.add_host_usage(use.node, use.cpu, use.memory)

    def _apply(self, allocation: Allocation, sign: int) -> None:
        self.state.add_usage(allocation.node, allocation.memory_per_gpu, allocation.core_per_gpu,
                             allocation.wants_core, sign)

    # -- cluster events --------------------------------------------------------
    def observe_node(self, node: dict) -> NodeSpec | None:
        """A node was added or changed: rebuild its row, keep counting its pods. A Node
        this cannot read is logged, listed in inspect and skipped (None)."""
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
                for use in self._host_by_node.get(name, {}).values():
                    self.state.add_host_usage(name, use.cpu, use.memory)
            for item in self._unaccounted.values():
                if item.node == name and (is_new or not item.held):
                    self._apply_hold(item)
        return spec

    def node_objects(self) -> list:
        """Every known Node, as much of it as the ledger keeps (name, labels, taints, allocatable, addresses)."""
        return list(self._nodes.values())

    def snapshot(self, without_namespace: str | None = None):
        """A copy of the cluster state, as if the allocations of pods in ``without_namespace`` were not
        there, with unaccounted pods held as filter holds them (every GPU of their node):
        what the autoscaling plan places pods on.

        Taken under the state's lock, which every change of records and arrays
        holds, so the copy and the records it subtracts agree.
        """
        with self.state.lock:
            copy = self.state.copy()
            if without_namespace is not None:
                for allocation in self._allocations.values():
                    if allocation.pod.namespace == without_namespace:
                        copy.add_usage(allocation.node, allocation.memory_per_gpu, allocation.core_per_gpu,
                                       allocation.wants_core, -1)
                for item in self._unaccounted.values():
                    if item.pod.namespace == without_namespace and item.held:
                        copy.add_usage(item.node, *item.held, item.wants_core, -1)
        return copy

    def forget_node(self, name: str) -> None:
        """A node disappeared: drop its row; its pods' records wait for it. A strategy that
        remembers rows across decisions (``forget_row``) is told the row is gone."""
        with self.node_lock(name):
            self._nodes.pop(name, None)
            row = self.state.index.get(name)
            self.state.remove_node(name)
        forget = getattr(self.strategy, "forget_row", None)
        if forget is not None and row is not None:
            forget(row)

    def observe_configmap(self, configmap: dict, deleted: bool = False) -> None:
        """An unhealthy-GPU ConfigMap changed; other ConfigMaps are ignored."""
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
        """The objects that could not be read, latest last (:mod:`extender.malformed`)."""
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
        self._count_host(ref.uid, HostUse(node, cpu, memory))
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
        self._unhold(ref.uid)
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
        existing = self._allocations.get(uid)
        if existing is None or existing.node != node or self._host.get(uid) is None:
            return False
        existing.confirmed = True
        return True

    def forget_pod(self, uid: str) -> None:
        """A pod was deleted."""
        self._nominations.forget(uid)
        self.pending.forget(uid)
        self.release(uid)
        self._unhold(uid)

    # -- nominated pods: room held for preemptors ------------------------------
    def nominations(self) -> dict:
        """uid → (node, priority, GPURequest) of the pods nominated to a node."""
        return self._nominations.all()

    def hold_back(self, request: GPURequest, rows: np.ndarray, result, priority: int, uid: str | None,
                  score: bool = True, owner: str | None = None):
        """``result`` with the nodes that hold room for a preemptor
        (:meth:`extender.nominations.Nominations.hold_back`) or for a defragmentation
        move (:meth:`extender.defrag.holds.DefragHolds.hold_back`) re-evaluated."""
        result = self._nominations.hold_back(self.state, self.strategy, request, rows, result, priority, uid, score)
        return self.defrag_holds.hold_back(
            self.state, self.strategy, request, rows, result, priority, uid, owner, score,
            lambda row: self._nominations.held_row(self.state, self.strategy, row, priority, uid))

    # -- unaccounted pods: held back on every GPU of their node ---------------
    def _hold(self, ref: PodRef, node: str, request: GPURequest | None, invalid: str | None) -> None:
        """Count an unaccounted pod on its node, conservatively: its per-GPU request
        on *every* GPU of the node (the whole GPU when the request is unreadable),
        each GPU one pod more, and its kind (memory only, or memory and compute)
        for the no-mixing rule. Whichever GPU the pod really uses, the node is then
        never filled past what it has."""
        if request is not None:
            item = Unaccounted(ref, node, request.memory_per_gpu, request.core_per_gpu if request.wants_core else 0,
                               request.wants_core)
        else:
            item = Unaccounted(ref, node, None, None, False,
                               reason=f"bound pod asks for shared GPU with a request that cannot be read "
                                      f"({shown(invalid, 200)}); each GPU of the node is held whole")
        self.counters.unaccounted_seen += 1
        with self.node_lock(node), self.state.lock:
            self._unaccounted[ref.uid] = item
            self._apply_hold(item)
        get_logger().warning("unaccounted GPU use", extra=fields(
            pod=str(ref), uid=ref.uid, node=node, memory=item.memory, core=item.core, reason=item.reason))

    def _apply_hold(self, item: Unaccounted) -> None:
        """Count ``item`` on its node's row as it is now (under the state's lock)."""
        state = self.state
        row = state.index.get(item.node, -1)
        if row < 0:
            item.held = ()
            return
        n = int(state.array("gpu_count")[row])
        totals, cores = state.array("mem_total")[row, :n].tolist(), state.array("core_total")[row, :n].tolist()
        memory = {g: t if item.memory is None else min(item.memory, t) for g, t in enumerate(totals)}
        core = {g: c if item.core is None else min(item.core, c) for g, c in enumerate(cores)
                if item.core is None and c or item.core}
        state.add_usage(item.node, memory, core, item.wants_core)
        item.held = (memory, core)

    def _unhold(self, uid: str) -> None:
        item = self._unaccounted.get(uid)
        if item is None:
            return
        with self.node_lock(item.node), self.state.lock:
            if self._unaccounted.pop(uid, None) is not None and item.held:
                self.state.add_usage(item.node, *item.held, item.wants_core, -1)
                item.held = ()

    def host_use(self, uid: str) -> HostUse | None:
        """The CPU and host memory counted for a pod, if any."""
        return self._host.get(uid)

    # -- inspection ------------------------------------------------------------
    def summary(self) -> dict:
        """Cluster totals, from the arrays alone (cheap enough for every metrics scrape).

        GPU memory counts on sharing nodes and on any node still holding
        allocations; compute counts on core_mem nodes.
        """
        _, view = self.state.view_all()
        memory_used, core_used = view.mem_used.sum(axis=1), view.core_used.sum(axis=1)
        counted = (view.mode != MODE_NONE) | (memory_used > 0)
        core_nodes = view.mode == MODE_CORE
        return {
            "memory": {"used": int(memory_used[counted].sum()), "total": int(view.mem_total[counted].sum())},
            "core": {"used": int(core_used[core_nodes].sum()), "total": int(view.core_total[core_nodes].sum())},
            "allocations": len(self._allocations),
            "unaccountedPods": len(self._unaccounted),
        }

    def inspect(self) -> dict:
        """Every node, every GPU: used/total memory and compute, the pods on it."""
        names, view = self.state.view_all()
        nodes = []
        unaccounted_by_node = defaultdict(list)
        for item in self._unaccounted.values():
            unaccounted_by_node[item.node].append(item)
        for i, name in enumerate(names):
            spec = self.state.specs[name]
            pods_by_gpu = defaultdict(list)
            for allocation in list(self._by_node.get(name, {}).values()):
                memory, core = allocation.memory_per_gpu, allocation.core_per_gpu
                annotations = allocation.annotations
                for g in sorted(set(memory) | set(core)):
                    pods_by_gpu[g].append({
                        "namespace": allocation.pod.namespace, "name": allocation.pod.name,
                        "uid": allocation.pod.uid, "memory": memory.get(g, 0), "core": core.get(g, 0),
                        "source": allocation.source, "confirmed": allocation.confirmed,
                        "annotations": annotations,
                    })
            gpus = [{
                "index": g,
                "healthy": bool(view.healthy[i, g]),
                "memory": {"used": int(view.mem_used[i, g]), "total": int(view.mem_total[i, g])},
                "core": {"used": int(view.core_used[i, g]), "total": int(view.core_total[i, g])},
                "pods": sorted(pods_by_gpu.get(g, []), key=lambda p: (p["namespace"], p["name"])),
            } for g in range(int(view.gpu_count[i]))]
            nodes.append({
                "name": name,
                "address": _internal_ip(self._nodes.get(name)),
                "schedule": spec.schedule_label,
                "pool": pool_name(((self._nodes.get(name) or {}).get("metadata") or {}).get("labels") or {},
                                  self.pool_labels),
                "sharing": MODE_NAMES[spec.mode],
                "placement": PLACEMENT_NAMES[spec.placement],
                "maxPodsPerGPU": None if spec.max_pod == UNLIMITED_PODS else spec.max_pod,
                "problem": spec.problem,
                "warnings": list(spec.warnings),
                "memory": {"used": int(view.mem_used[i].sum()), "total": int(view.mem_total[i].sum())},
                "core": {"used": int(view.core_used[i].sum()), "total": int(view.core_total[i].sum())},
                "gpus": gpus,
                "unaccounted": [_unaccounted_json(u) for u in unaccounted_by_node.pop(name, [])],
            })
        orphans = [
            {"node": a.node, "namespace": a.pod.namespace, "name": a.pod.name, "uid": a.pod.uid,
             "memory": a.memory_per_gpu, "core": a.core_per_gpu}
            for a in list(self._allocations.values()) if a.node not in self.state.index
        ]
        return {
            "nodes": nodes,
            "summary": self.summary(),
            "allocationsOnUnknownNodes": orphans,
            "malformedObjects": self.malformed(),
            "unaccountedOnUnknownNodes": [_unaccounted_json(u) for items in unaccounted_by_node.values()
                                          for u in items],
        }


def _internal_ip(node: dict | None) -> str | None:
    addresses = ((node or {}).get("status") or {}).get("addresses") or []
    return next((a.get("address") for a in addresses if a.get("type") == "InternalIP"), None)


def _kept(node: dict) -> dict:
    """What the ledger keeps of a Node: all that parse_node, inspect and the autoscaling plan
    read (taints, cordon), none of its images, conditions or managedFields (tens of KiB on a
    real node)."""
    meta = node.get("metadata") or {}
    spec = node.get("spec") if isinstance(node.get("spec"), dict) else {}
    status = node.get("status") or {}
    kept_spec = {k: spec[k] for k in ("taints", "unschedulable") if spec.get(k)}
    return {"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": meta.get("name"), "labels": dict(meta.get("labels") or {})},
            **({"spec": kept_spec} if kept_spec else {}),
            "status": {"allocatable": dict(status.get("allocatable") or {}),
                       "addresses": list(status.get("addresses") or [])}}


def _unaccounted_json(item: Unaccounted) -> dict:
    """``memory``/``core``: the pod's request per GPU (null: unreadable); ``held``: what is
    counted for it on each GPU of its node (GPU index → amount)."""
    memory, core = item.held or ({}, {})
    return {"namespace": item.pod.namespace, "name": item.pod.name, "uid": item.pod.uid, "node": item.node,
            "memory": item.memory, "core": item.core, "reason": item.reason,
            "held": {"memory": {str(g): v for g, v in memory.items()}, "core": {str(g): v for g, v in core.items()}}}
