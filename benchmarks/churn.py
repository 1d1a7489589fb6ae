"""The openb trace replayed with churn: pods arrive and leave in time order and wait when they fit nowhere.

Events in time order (:mod:`benchmarks.timeline` makes the workload): at one
instant, departures first, then arrivals, then a pod that leaves the instant
it arrives, then the defragmentation step.

* **arrival**: the pod goes through kube-scheduler and the extender exactly
  as in the paper's replay (:class:`benchmarks.placer.Placer`); where it fits
  nowhere it waits (:class:`benchmarks.waiting.WaitingPods`: priority, then
  age) instead of being dropped;
* **departure** (at the pod's deletion time, placed or not): a placed pod is
  deleted (the ledger forgets it, kube-scheduler's cache drops it); a waiting
  pod leaves the queue never placed. Once every departure of the instant is
  done, the waiting pods are retried in queue order on each node a pod left —
  the only nodes where room grew, so the only ones where a waiting pod can
  newly fit (every other node only filled since each waiting pod last failed);
* **defragmentation step** (every ``Defrag.every`` seconds, only while pods
  wait): the planner gets the ledger, the placed GPU pods, the waiting pods
  and at most the moves the hourly budget has left (moves in the last hour ≤ ``per_hour``);
  each move of its plan evicts a pod and places its replacement, which keeps
  the pod's departure time, on the named GPUs of the named node — recorded as
  the informer would report the replacement bound there, after the filter's
  own check that those GPUs take it and kube-scheduler's that the node's CPU
  and memory do (a move that fails either is refused, and the plan's later
  moves with it); then the waiting pods are retried on every node a move
  emptied room on.

The record (:class:`ChurnRun`) holds, after every event, the GPU share
allocated (the trace's own demand of the placed pods) and waiting, each pod's
placement time, and every move; :mod:`benchmarks.churn_stats` reads it.
``audit=True`` checks after every event that no GPU holds more than it has
and that every departure frees exactly what its pod held.
"""

from __future__ import annotations

import time
from collections import deque
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from typing import Callable, Sequence

import numpy as np

from benchmarks.kube import KubeScheduler
from benchmarks.mapping import MIB, make_mapping
from benchmarks.placer import NOWHERE, Placer, bound_pod
from benchmarks.timeline import Workload
from benchmarks.trace import Nodes
from benchmarks.waiting import WaitingPods
from extender.ledger import annotations as A
from extender.ledger.ledger import Ledger
from extender.ledger.records import PodRef
from policy.allocation import split
from policy.placement import gpu_fit
from policy.reasons import FITS
from policy.request import GPURequest
from policy.scoring import make_strategy
from policy.state import ClusterState

ASSUME_NS = 1_700_000_000_000_000_000
EPOCH = datetime(2023, 1, 1, tzinfo=timezone.utc)  # time 0 of the replay, for start times
NAMESPACE = "trace"
HOUR = 3600.0
DEPART, ARRIVE, DEPART_AT_ARRIVAL, STEP = 0, 1, 2, 3


@dataclass(frozen=True)
class Move:
    """Evict pod ``uid``; its replacement goes to ``gpus`` of ``node``."""

    uid: str
    node: str
    gpus: tuple


@dataclass(frozen=True)
class Waiting:
    """A waiting pod as a planner sees it."""

    uid: str
    request: GPURequest  # CPU and host memory included
    priority: int
    start: str  # RFC 3339 arrival: earlier is older
    spec: str  # GPU models it may use, joined by "|"; "" = any


@dataclass(frozen=True)
class Held:
    """A placed GPU pod as a planner sees it (its shares per GPU: ``ledger.allocation(uid)``)."""

    uid: str
    node: str
    request: GPURequest  # what its replacement asks for
    priority: int
    spec: str


Planner = Callable[[Ledger, list, list, int], Sequence[Move]]


@dataclass
class Defrag:
    """The defragmentation hook: ``planner(ledger, held, waiting, max_moves) → moves`` (``held``: every
    placed GPU pod, ``waiting`` in queue order), run every ``every`` seconds with at most ``per_hour``
    moves in any hour."""

    planner: Planner
    per_hour: int
    every: float = 300.0


@dataclass
class ChurnRun:
    """What one replay produced; per-pod arrays follow the workload's arrival order."""

    label: str
    seed: int
    capacity: int  # milli-GPU
    arrive: np.ndarray
    depart: np.ndarray
    demand: np.ndarray  # milli-GPU asked by each pod
    priority: np.ndarray
    placed_at: np.ndarray  # first placement time, NaN for a pod never placed
    t: np.ndarray  # event times
    allocated: np.ndarray  # milli-GPU allocated after each event
    waiting: np.ndarray  # milli-GPU asked by the waiting pods after each event
    moves: list = field(default_factory=list)  # (time, pod index, from node, to node)
    steps: list = field(default_factory=list)  # (time, moves allowed, planned, applied, placed after)
    consistent: bool = True  # ledger's CPU/memory counts equal kube-scheduler's at the end
    audit: list = field(default_factory=list)  # what audit=True found wrong
    seconds: float = 0.0  # wall time of the replay
    extra: dict = field(default_factory=dict)


def start_time(seconds: float) -> str:
    return (EPOCH + timedelta(seconds=float(seconds))).strftime("%Y-%m-%dT%H:%M:%SZ")


class _Replay:
    def __init__(self, nodes: Nodes, work: Workload, strategy, mapping: str, setting: str, seed: int,
                 defrag: Defrag | None, audit: bool):
        self.mapper = make_mapping(mapping, nodes)
        self.ledger = Ledger(ClusterState(rows=len(nodes)), strategy)
        for i in range(len(nodes)):
            self.ledger.observe_node(self.mapper.node(nodes, i))
        self.kube = KubeScheduler(nodes, setting, np.random.default_rng(seed))
        self.names = np.array(nodes.name, dtype=object)
        self.placer = Placer(self.ledger, self.kube, self.names)
        self.nodes, self.work, self.defrag, self.audit = nodes, work, defrag, audit
        pods = work.pods
        self.cpu, self.mib, self.spec = pods.cpu.tolist(), pods.memory.tolist(), pods.gpu_spec.tolist()
        self.demand = pods.demand
        self.uid = [f"{name}-{j}" for j, name in enumerate(pods.name)]
        self.index = {uid: j for j, uid in enumerate(self.uid)}
        self.node = np.full(len(work), NOWHERE, dtype=np.int64)
        self.placed_at = np.full(len(work), np.nan)
        self.queue = WaitingPods()
        self.allocated = self.waiting = 0
        self.moves: list = []
        self.recent: deque = deque()  # times of the moves of the last hour
        self.steps: list = []
        self.problems: list = []
        self.freed: list = []  # nodes departures left, until the instant's departures are done

    # -- placing ---------------------------------------------------------------
    def request(self, j: int) -> GPURequest:
        return self.mapper.request(self.work.pods, j)

    def kind(self, j: int) -> tuple:
        pods = self.work.pods
        return (int(pods.cpu[j]), int(pods.memory[j]), int(pods.num_gpu[j]), int(pods.gpu_milli[j]), pods.gpu_spec[j])

    def place(self, j: int, now: float, new: bool, only: int | None = None) -> bool:
        node, _ = self.placer.place(self.request(j), self.cpu[j], self.mib[j], self.spec[j],
                                    PodRef(self.uid[j], NAMESPACE, self.work.pods.name[j]), ASSUME_NS + j,
                                    new=new, only=only, priority=int(self.work.priority[j]),
                                    start=start_time(self.work.arrive[j]))
        if node == NOWHERE:
            return False
        self.node[j] = node
        if np.isnan(self.placed_at[j]):
            self.placed_at[j] = now
        self.allocated += int(self.demand[j])
        if self.audit:
            self.check_capacity(node)
        return True

    def arrive(self, j: int, now: float) -> None:
        if not self.place(j, now, new=True):
            self.queue.add(j, int(self.work.priority[j]), float(self.work.arrive[j]), self.kind(j))
            self.waiting += int(self.demand[j])

    def depart(self, j: int, now: float) -> None:
        if self.queue.remove(j):
            self.waiting -= int(self.demand[j])
            return
        node = int(self.node[j])
        if node == NOWHERE:
            return
        before = self.usage(node) if self.audit else None
        held = self.ledger.allocation(self.uid[j])
        self.placer.remove(self.uid[j], node, self.cpu[j], self.mib[j])
        self.node[j] = NOWHERE
        self.allocated -= int(self.demand[j])
        if self.audit:
            self.check_freed(j, node, before, held)
        if node not in self.freed:
            self.freed.append(node)

    def flush(self, now: float) -> None:
        """Retry the waiting pods on the nodes the departures of this instant left."""
        freed, self.freed = self.freed, []
        for node in freed:
            self.retry(node, now)

    def retry(self, node: int, now: float) -> None:
        """Waiting pods, in queue order, on ``node`` (see module doc)."""
        if not len(self.queue):
            return
        failed: set = set()
        kinds = self.queue.kinds()
        room = self.room(node)
        for j in self.queue.ordered():
            kind = self.queue.kind(j)
            if kind in failed:
                continue
            request = self.request(j)
            if not self.kube.fits_on(node, self.cpu[j], self.mib[j], self.spec[j]) \
                    or not room(request) or not self.place(j, now, new=False, only=node):
                failed.add(kind)
                if len(failed) == kinds:
                    return
                continue
            self.queue.remove(j)
            self.waiting -= int(self.demand[j])
            kinds = self.queue.kinds()
            room = self.room(node)

    def room(self, node: int) -> Callable[[GPURequest], bool]:
        """A quick test that a request may fit the node's GPUs: necessary, not sufficient (the filter decides)."""
        state = self.ledger.state
        row = state.index[self.names[node]]
        healthy = state.array("healthy")[row]
        mem_free = state.array("mem_free")[row][healthy].tolist()
        core_free = state.array("core_free")[row][healthy].tolist()

        def may_fit(request: GPURequest) -> bool:
            if not request.gpu_count:
                return True
            mem, core = request.memory_per_gpu, request.core_per_gpu
            return sum(1 for m, c in zip(mem_free, core_free) if m >= mem and c >= core) >= request.gpu_count

        return may_fit

    # -- defragmentation -------------------------------------------------------
    def step(self, now: float) -> None:
        defrag = self.defrag
        while self.recent and self.recent[0] <= now - HOUR:
            self.recent.popleft()
        allowed = defrag.per_hour - len(self.recent)
        if allowed <= 0 or not len(self.queue):
            return
        waiting = [Waiting(self.uid[j], self.request(j), int(self.work.priority[j]),
                           start_time(self.work.arrive[j]), self.spec[j]) for j in self.queue.ordered()]
        held = [Held(self.uid[j], self.names[self.node[j]], self.request(j), int(self.work.priority[j]),
                     self.spec[j]) for j in np.flatnonzero((self.node != NOWHERE) & (self.demand > 0)).tolist()]
        plan = list(defrag.planner(self.ledger, held, waiting, allowed))
        applied, emptied = 0, []
        for move in plan[:allowed]:
            source = self.apply(move, now)
            if source is None:
                break
            applied += 1
            if source not in emptied:
                emptied.append(source)
        placed_before = int(np.count_nonzero(~np.isnan(self.placed_at)))
        self.freed = emptied
        self.flush(now)
        self.steps.append((now, allowed, len(plan), applied,
                           int(np.count_nonzero(~np.isnan(self.placed_at))) - placed_before))

    def apply(self, move: Move, now: float) -> int | None:
        """Carry out one move; the node it left, or None when refused (nothing changed)."""
        j = self.index.get(move.uid)
        target = self.ledger.state.index[move.node]
        if j is None or self.node[j] == NOWHERE or target < 0:
            return None
        source, held = int(self.node[j]), self.ledger.allocation(move.uid)
        if held is None:  # a pod that holds no GPU: nothing a move is for
            return None
        to = int(np.flatnonzero(self.names == move.node)[0])
        pod = PodRef(self.uid[j], NAMESPACE, self.work.pods.name[j])
        self.placer.remove(self.uid[j], source, self.cpu[j], self.mib[j])
        request = self.request(j)
        fit, reason = gpu_fit(self.ledger.state.view(np.array([target])), request)
        gpus = sorted(int(g) for g in move.gpus)
        if reason[0] != FITS or len(set(gpus)) != request.gpu_count or not all(fit[0, g] for g in gpus) \
                or not self.kube.fits_on(to, self.cpu[j], self.mib[j], self.spec[j]):
            self.bind_on(j, pod, source, held.memory, held.core, held.gpu_memory)  # put back as it was
            return None
        memory, core = split(request, gpus)
        self.bind_on(j, pod, to, memory, core, self.ledger.state.specs[move.node].memory_per_gpu)
        self.moves.append((now, j, source, to))
        self.recent.append(now)
        if self.audit:
            self.check_capacity(to)
        return source

    def bind_on(self, j: int, pod: PodRef, node: int, memory: dict, core: dict, gpu_memory: int) -> None:
        """The pod bound to ``node`` with this allocation, as the informer reports it."""
        annotations = A.write(memory, core, gpu_memory, ASSUME_NS + j)
        self.ledger.observe_pod(bound_pod(pod, self.names[node], self.cpu[j], self.mib[j], annotations,
                                          priority=int(self.work.priority[j]), start=start_time(self.work.arrive[j])))
        self.kube.bind(node, self.cpu[j], self.mib[j])
        self.node[j] = node

    # -- audit -----------------------------------------------------------------
    def usage(self, node: int) -> tuple:
        state, row = self.ledger.state, self.ledger.state.index[self.names[node]]
        return tuple(state.array(f)[row].copy() for f in ("mem_used", "core_used", "pods", "cpu_used",
                                                           "host_mem_used"))

    def check_capacity(self, node: int) -> None:
        state, row = self.ledger.state, self.ledger.state.index[self.names[node]]
        if (state.array("mem_used")[row] > state.array("mem_total")[row]).any() \
                or (state.array("core_used")[row] > state.array("core_total")[row]).any() \
                or self.kube.cpu_used[node] > self.kube.cpu_total[node] \
                or self.kube.mem_used[node] > self.kube.mem_total[node]:
            self.problems.append(f"node {self.names[node]} over capacity")

    def check_freed(self, j: int, node: int, before: tuple, held) -> None:
        after = self.usage(node)
        memory = np.zeros_like(before[0])
        core, pods = np.zeros_like(before[1]), np.zeros_like(before[2])
        if held is not None:
            for g, amount in held.memory_per_gpu.items():
                memory[g] += amount
                pods[g] += 1
            for g, amount in held.core_per_gpu.items():
                core[g] += amount
        expected = (memory, core, pods, self.cpu[j], self.mib[j] * MIB)
        if not all(np.array_equal(b - a, e) for b, a, e in zip(before, after, expected)):
            self.problems.append(f"pod {self.uid[j]} freed other than it held on {self.names[node]}")


def churn(nodes: Nodes, work: Workload, policy: str, seed: int, mapping: str = "milli", setting: str = "shipped",
          options: dict | None = None, defrag: Defrag | None = None, audit: bool = False,
          label: str | None = None) -> ChurnRun:
    """Replay ``work`` on ``nodes`` (see module doc)."""
    started = time.perf_counter()
    strategy = make_strategy(policy, seed=seed, **(options or {}))
    replay = _Replay(nodes, work, strategy, mapping, setting, seed, defrag, audit)
    n = len(work)
    times = [work.arrive, work.depart]
    kinds = [np.full(n, ARRIVE), np.where(work.depart > work.arrive, DEPART, DEPART_AT_ARRIVAL)]
    pods = [np.arange(n), np.arange(n)]
    if defrag is not None and n:
        ticks = np.arange(defrag.every, float(work.depart.max()) + defrag.every, defrag.every)
        times.append(ticks), kinds.append(np.full(len(ticks), STEP)), pods.append(np.full(len(ticks), -1))
    t, kind, pod = (np.concatenate(a) for a in (times, kinds, pods))
    order = np.lexsort((pod, kind, t))
    t, kind, pod = t[order], kind[order], pod[order]
    last = np.ones(len(t), dtype=bool)  # the last event of its instant and kind
    last[:-1] = (t[1:] != t[:-1]) | (kind[1:] != kind[:-1])
    t_out, allocated, waiting = np.empty(len(t)), np.empty(len(t), dtype=np.int64), np.empty(len(t), dtype=np.int64)
    for i, (now, k, j, ends) in enumerate(zip(t.tolist(), kind.tolist(), pod.tolist(), last.tolist())):
        if k == ARRIVE:
            replay.arrive(j, now)
        elif k == STEP:
            replay.step(now)
        else:
            replay.depart(j, now)
            if ends:
                replay.flush(now)
        t_out[i], allocated[i], waiting[i] = now, replay.allocated, replay.waiting
    ledger, kube = replay.ledger, replay.kube
    rows = ledger.state.rows(nodes.name)
    consistent = bool((ledger.state.array("cpu_used")[rows] == kube.cpu_used).all()
                      and (ledger.state.array("host_mem_used")[rows] == kube.mem_used * MIB).all())
    return ChurnRun(label or policy, seed, nodes.gpu_capacity, work.arrive, work.depart, replay.demand,
                    work.priority, replay.placed_at, t_out, allocated, waiting, replay.moves, replay.steps,
                    consistent, replay.problems, time.perf_counter() - started,
                    extra={"ledger": ledger, "kube": kube, "node": replay.node})
