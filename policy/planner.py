"""The autoscaling plan: where the pending shared-GPU pods can go — room that exists, or new nodes.

cluster-autoscaler simulates scheduling with kube-scheduler's own plugins,
never with extenders, so it sees ``aliyun.com/gpu-mem`` as one number per
node. This plan places the pods with the extender's rules instead. Contract
of :func:`plan`:

* inputs: ``state`` (a :class:`~policy.state.ClusterState`, left unchanged:
  the plan works on a copy), ``nodes`` (name → v1 Node: labels, taints),
  ``pools`` (name → :class:`~policy.pools.Pool`), the pending ``pods`` (each
  with ``ref``, ``request`` — a :class:`~policy.request.GPURequest` or the
  exception that made it invalid —, ``node_selector``, ``node_affinity`` (the
  required ``nodeSelectorTerms``), ``tolerations`` and ``nominated_node``),
  and a ``row_local`` scoring ``strategy`` (default ``ack``: the plan keeps
  each request's evaluation of the existing nodes and refreshes only the rows
  its placements changed, :mod:`policy.rowcache`);
* pods are placed one at a time, largest first (GiB per GPU × GPUs, then
  compute, then the order given), with :func:`policy.placement.evaluate`
  (the extender's fit rules and GPU choice), only on nodes their selector,
  required affinity and tolerations allow (:mod:`policy.selectors`):

  1. the pod's nominated node, if it fits there now;
  2. the existing node it fits that ``strategy`` scores highest (ties: the
     lowest row) — the pod *fits now*;
  3. a new node this plan already opened (same rule);
  4. a new node of a pool that allows it, whose template it fits and that is
     below its max size; of several, the pool with the smallest GPUs that fit
     (then the fewest GPUs, then the name);
  5. else it is *unplaceable*, with why: its request is invalid, no pool
     allows it, no pool that does can take it (too large for its GPUs,
     another sharing mode), or those it fits are at their max size;

* every placement is recorded on the copy before the next pod is placed, so
  no two pods are given the same room, and a pod in ``fits_now`` fits the
  node as it is after the pods placed before it;
* identical single-GPU pods (or pods whose GPU count divides the node's) on
  identical empty GPUs need ``ceil(pods / pods per node)`` new nodes: a node
  is opened only when no opened node has room, and the GPU choice fills each
  GPU to what it can hold.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

import numpy as np

from policy import reasons as R
from policy.allocation import per_gpu, split
from policy.names import MODE_NAMES
from policy.placement import evaluate
from policy.pools import Pool
from policy.request import GPURequest
from policy.rowcache import RowCache
from policy.scoring.ack import Ack
from policy.selectors import NodeTable, allowed, labels_of, taints_of
from policy.state import ClusterState


@dataclass(frozen=True)
class Placement:
    pod: str  # namespace/name
    node: str  # an existing node, or a new node's name (new_node_name)
    gpus: tuple  # GPU indices on that node
    pool: str | None = None  # the pool of a new node
    new_node: int = -1  # which of the pool's new nodes (0, 1, ...)


@dataclass
class PoolPlan:
    pool: Pool
    nodes_needed: int = 0
    placements: list = field(default_factory=list)


@dataclass
class Plan:
    pending: int
    fits_now: list  # [Placement] in the order they were placed
    pools: dict  # pool name → PoolPlan, for the pools that need new nodes
    unplaceable: list  # [(pod ref, reason)] in the order of the pods given


def new_node_name(pool: str, index: int) -> str:
    """A new node's name in a plan (a colon is never in a real node's name)."""
    return f"new:{pool}:{index}"


def node_shape(pool: Pool) -> str:
    """``4 x 15 GiB, memory``: a new node's GPUs and sharing mode (or why it shares none)."""
    spec = pool.spec
    return spec.problem or f"{spec.gpu_count} x {spec.memory_per_gpu} GiB, {MODE_NAMES[spec.mode]}"


def describe(pool: Pool) -> str:
    """``np-a10 (4 x 15 GiB, memory)``: the pool and its nodes' GPUs."""
    return f"{pool.name} ({node_shape(pool)})"


def signature(pod) -> str:
    """The pod's selector, required affinity and tolerations as one key (pods equal in it go to the same nodes)."""
    return json.dumps([pod.node_selector, pod.node_affinity, pod.tolerations], sort_keys=True, default=str)


def _size(request: GPURequest) -> tuple:
    return (request.memory_per_gpu * request.gpu_count, request.core, request.gpu_count)


class _Planner:
    """One plan's working state: the existing nodes (a copy) and the new nodes it opens (a state of
    their own), each with its evaluations cached per request and refreshed where a placement changed
    a row."""

    def __init__(self, state: ClusterState, nodes, pools: dict, strategy):
        self.existing = state.copy()
        self.cache = RowCache(self.existing)
        self.new = ClusterState()
        self.new_cache = RowCache(self.new)
        self.new_pool = np.zeros(0, dtype=np.int64)  # pool index of each row of self.new
        self.strategy = strategy
        self.table = NodeTable.of(list(self.existing.names), nodes)
        self.pools = [pools[p] for p in sorted(pools)]
        templates = [p.template for p in self.pools]
        self.pool_table = NodeTable([p.name for p in self.pools], [labels_of(t) for t in templates],
                                    [taints_of(t) for t in templates])
        self.templates = ClusterState(rows=max(len(self.pools), 1))
        for pool in self.pools:
            self.templates.set_node(pool.new_node(new_node_name(pool.name, -1)))
        self.template_rows = self.templates.rows([new_node_name(p.name, -1) for p in self.pools])
        self.pool_plans: dict = {}
        self._allowed: dict = {}  # signature → (existing rows allowed, pools allowed)
        self._template_fit: dict = {}  # placement_key → reason per pool
        self._no_room_now: set = set()  # (placement_key, signature) that fit no existing node

    # -- where a pod may go --------------------------------------------------------
    def allowed(self, pod) -> tuple[np.ndarray, np.ndarray]:
        key = signature(pod)
        found = self._allowed.get(key)
        if found is None:
            args = (pod.node_selector, pod.node_affinity, pod.tolerations)
            found = (np.flatnonzero(allowed(self.table, *args)), allowed(self.pool_table, *args))
            self._allowed[key] = found
        return found

    def template_reasons(self, request: GPURequest) -> np.ndarray:
        reasons = self._template_fit.get(request.placement_key)
        if reasons is None:
            reasons = evaluate(self.templates.view(self.template_rows), request, self.strategy, score=False).reason
            self._template_fit[request.placement_key] = reasons
        return reasons

    # -- placing -------------------------------------------------------------------
    def _evaluator(self, request: GPURequest):
        def compute(view):
            result = evaluate(view, request, self.strategy)
            return result.reason, result.gpus, result.raw

        return compute

    @staticmethod
    def _best(rows: np.ndarray, reason: np.ndarray, gpus: np.ndarray, raw: np.ndarray):
        """``(row, gpus)`` of the highest-scored row that fits (the first of equals), or None."""
        feasible = np.flatnonzero(reason == R.FITS)
        if not len(feasible):
            return None
        i = feasible[np.argmax(raw[feasible])]
        return int(rows[i]), tuple(int(g) for g in gpus[i])

    def best_existing(self, rows: np.ndarray, request: GPURequest):
        if not len(rows):
            return None
        return self._best(rows, *self.cache.take(request.placement_key, self._evaluator(request), rows))

    def best_new(self, rows: np.ndarray, request: GPURequest):
        if not len(rows):
            return None
        return self._best(rows, *self.new_cache.take(request.placement_key, self._evaluator(request), rows))

    @staticmethod
    def record(state: ClusterState, row: int, gpus: tuple, request: GPURequest) -> str:
        name = state.names[row]
        memory, core = split(request, gpus)
        state.add_usage(name, per_gpu(memory), per_gpu(core), request.wants_core)
        return name

    def place(self, pod, request: GPURequest):
        """A :class:`Placement` for the pod, or the reason it has none."""
        rows, pools_allowed = self.allowed(pod)
        nominated = self.existing.index.get(pod.nominated_node, -1) if pod.nominated_node else -1
        found = self.best_existing(np.array([nominated]), request) if nominated in rows else None
        key = (request.placement_key, signature(pod))
        if found is None and key not in self._no_room_now:
            found = self.best_existing(rows, request)
            if found is None:
                self._no_room_now.add(key)  # existing rows only fill up as the plan goes on
        if found is not None:
            return Placement(pod.ref, self.record(self.existing, *found, request), found[1])
        found = self.best_new(np.flatnonzero(pools_allowed[self.new_pool]), request)
        if found is None:
            return self.open(pod, request, pools_allowed)
        return self._placed_new(pod, request, found)

    def _placed_new(self, pod, request, found) -> Placement:
        name = self.record(self.new, *found, request)
        pool_plan = self.pool_plans[self.pools[self.new_pool[found[0]]].name]
        placement = Placement(pod.ref, name, found[1], pool_plan.pool.name, int(name.rsplit(":", 1)[1]))
        pool_plan.placements.append(placement)
        return placement

    def open(self, pod, request: GPURequest, pools_allowed: np.ndarray):
        """Open a new node of the best pool for the pod; the reason when there is none."""
        if not self.pools:
            return ("fits no node now, and no node pool is known that could grow (no node carries a pool label: "
                    "see --pool-label)")
        if not pools_allowed.any():
            return "fits no node now, and no node pool admits it (nodeSelector, node affinity, tolerations)"
        reasons = self.template_reasons(request)
        fitting = [i for i in np.flatnonzero(pools_allowed) if reasons[i] == R.FITS]
        if not fitting:
            refused = [f"{describe(self.pools[i])}: {R.MESSAGES[int(reasons[i])]}"
                       for i in np.flatnonzero(pools_allowed)]
            return "fits no node now, nor a new node of any pool it may use: " + "; ".join(refused[:3]) + \
                (f"; and {len(refused) - 3} more" if len(refused) > 3 else "")
        with_room = [i for i in fitting if self.pools[i].room is None or self._needed(i) < self.pools[i].room]
        if not with_room:
            full = [f"{self.pools[i].name} (max size {self.pools[i].max_size}, {self.pools[i].nodes} nodes)"
                    for i in fitting]
            return "fits no node now, and every pool it fits is at its max size: " + ", ".join(full[:3])
        i = min(with_room, key=lambda i: (self.pools[i].spec.memory_per_gpu, self.pools[i].spec.gpu_count,
                                          self.pools[i].name))
        pool = self.pools[i]
        pool_plan = self.pool_plans.setdefault(pool.name, PoolPlan(pool))
        row = self.new.set_node(pool.new_node(new_node_name(pool.name, pool_plan.nodes_needed)))
        pool_plan.nodes_needed += 1
        self.new_pool = np.append(self.new_pool, i)
        found = self.best_new(np.array([row]), request)
        if found is None:  # the template fits, so its empty twin does: never expected
            return f"fits no node now, nor a new node of {describe(pool)}"
        return self._placed_new(pod, request, found)

    def _needed(self, pool_index: int) -> int:
        pool_plan = self.pool_plans.get(self.pools[pool_index].name)
        return pool_plan.nodes_needed if pool_plan is not None else 0


def placement_order(pods: list) -> list:
    """``(index, pod)`` of the pods with a valid request, largest first (then in the order given)."""
    valid = [(i, p) for i, p in enumerate(pods) if isinstance(p.request, GPURequest)]
    return sorted(valid, key=lambda item: tuple(-v for v in _size(item[1].request)) + (item[0],))


def plan(state: ClusterState, nodes, pools: dict, pods, strategy=None) -> Plan:
    """Place ``pods`` on existing room, then on new pool nodes (see module doc)."""
    pods = list(pods)
    if not pods:
        return Plan(pending=0, fits_now=[], pools={}, unplaceable=[])
    planner = _Planner(state, nodes, pools, strategy or Ack())
    fits_now, unplaceable = [], {}
    for i, pod in placement_order(pods):
        outcome = planner.place(pod, pod.request)
        if isinstance(outcome, str):
            unplaceable[i] = outcome
        elif outcome.pool is None:
            fits_now.append(outcome)
    for i, pod in enumerate(pods):
        if not isinstance(pod.request, GPURequest):
            unplaceable[i] = f"invalid request: {pod.request}"
    return Plan(pending=len(pods), fits_now=fits_now, pools=planner.pool_plans,
                unplaceable=[(pods[i].ref, unplaceable[i]) for i in sorted(unplaceable)])
