"""The allocation ledger: which pod holds which share of which GPU.

:class:`Ledger` is this module's fit checks and reservations, with the
watch's ``observe_*``/``forget_*`` (:mod:`extender.ledger.observing`) and the
inspect report (:mod:`extender.ledger.report`) mixed in; unaccounted pods
(:mod:`extender.ledger.unaccounted`) and host counts
(:mod:`extender.ledger.hosts`) are kept by objects of their own.

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
  (:mod:`extender.ledger.pending`) until it is bound, reserved, finished or deleted;
* every pod bound to a node (shared-GPU or not, until it finishes or is
  deleted) has its CPU and host-memory requests counted on that node, for
  strategies that weigh them; :meth:`Ledger.reserve` counts them at once;
* :meth:`Ledger.hold_back` (filter, prioritize, bind) applies the room held
  for preemptors (:mod:`extender.ledger.nominations`) and for defragmentation moves
  (``defrag_holds``, :mod:`extender.ledger.defrag_holds`); each allocation keeps
  what defragmentation reads of its pod (``facts``, :mod:`extender.ledger.defrag_facts`).
"""

from __future__ import annotations

import sys
import threading
from collections import defaultdict
from dataclasses import dataclass, field

import numpy as np

from extender.ledger.defrag_holds import DefragHolds
from extender.ledger.hosts import HostCounts, HostUse
from extender.ledger.malformed import MalformedObjects
from extender.ledger.nominations import Nominations
from extender.ledger.observing import Observing
from extender.ledger.pending import PendingPods
from extender.ledger.records import Allocation, BindRejected, PodRef
from extender.ledger.report import Reporting
from extender.ledger.unaccounted import UnaccountedPods
from policy.allocation import split
from policy.placement import Evaluation, evaluate, gpu_fit
from policy.pools import DEFAULT_POOL_LABELS
from policy.reasons import MESSAGES
from policy.reasons import UNKNOWN_NODE as REASON_UNKNOWN
from policy.request import GPURequest
from policy.rowcache import RowCache
from policy.state import Mark


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


class Ledger(Observing, Reporting):
    """Allocation records and the arrays they sum to (see module doc)."""

    def __init__(self, state, strategy, pool_labels=DEFAULT_POOL_LABELS):
        self.changes = 0  # bumped by every change the cluster or a verb makes (a hint for caches; racy, only grows)
        self.state = state
        self.strategy = strategy
        self.pool_labels = tuple(pool_labels)  # a node's pool in inspect and metrics (as plan groups them)
        self._allocations: dict[str, Allocation] = {}
        self._by_node: dict[str, dict[str, Allocation]] = defaultdict(dict)
        self._unaccounted = UnaccountedPods(state, self.node_lock)  # held on every GPU of their node
        self._nominations = Nominations()  # preemptors' holds
        self.defrag_holds = DefragHolds()  # rooms a defragmentation move holds (extender.ledger.defrag_holds)
        self._malformed = MalformedObjects()
        self.pending = PendingPods()
        self._hosts = HostCounts(state)  # bound pods' CPU and host memory
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
        self.changes += 1
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
            self._hosts.count(pod.uid, HostUse(node, request.cpu, request.host_memory))
            self.counters.reserved += 1
            return allocation, True

    def release(self, uid: str) -> Allocation | None:
        """Forget a pod's allocation (deleted, finished, or its bind failed)."""
        self.changes += 1
        self._hosts.count(uid, None)
        allocation = self._allocations.get(uid)
        if allocation is None:
            self._unaccounted.unhold(uid)
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

    def _apply(self, allocation: Allocation, sign: int) -> None:
        self.state.add_usage(allocation.node, allocation.memory_per_gpu, allocation.core_per_gpu,
                             allocation.wants_core, sign)

    # -- the autoscaling plan's copy ---------------------------------------------
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

    # -- nominated pods: room held for preemptors ------------------------------
    def nominations(self) -> dict:
        """uid → (node, priority, GPURequest) of the pods nominated to a node."""
        return self._nominations.all()

    def hold_back(self, request: GPURequest, rows: np.ndarray, result, priority: int, uid: str | None,
                  score: bool = True, owner: str | None = None):
        """``result`` with the nodes that hold room for a preemptor
        (:meth:`extender.ledger.nominations.Nominations.hold_back`) or for a defragmentation
        move (:meth:`extender.ledger.defrag_holds.DefragHolds.hold_back`) re-evaluated."""
        result = self._nominations.hold_back(self.state, self.strategy, request, rows, result, priority, uid, score)
        return self.defrag_holds.hold_back(
            self.state, self.strategy, request, rows, result, priority, uid, owner, score,
            lambda row: self._nominations.held_row(self.state, self.strategy, row, priority, uid))

    # -- unaccounted pods and host counts -----------------------------------------
    def _hold(self, ref: PodRef, node: str, request: GPURequest | None, invalid: str | None) -> None:
        """Hold an unaccounted pod on every GPU of its node (:meth:`UnaccountedPods.hold`), counted."""
        self.counters.unaccounted_seen += 1
        self._unaccounted.hold(ref, node, request, invalid)

    def host_use(self, uid: str) -> HostUse | None:
        """The CPU and host memory counted for a pod, if any."""
        return self._hosts.get(uid)
