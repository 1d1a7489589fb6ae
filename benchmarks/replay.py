"""One run of the paper's protocol through the extender's own decision code.

For each arriving pod (order from :func:`benchmarks.protocol.arrivals`):
kube-scheduler's filters (:mod:`benchmarks.kube`), then the extender's path
exactly as the service drives it — ``strategy.observe(request)`` once for the
new pod, ``Ledger.lookup`` + ``Ledger.check_rows`` (filter),
``Ledger.evaluate_rows(...).scores()`` (prioritize, integers 0..10),
kube-scheduler's choice among the top totals,
and ``Ledger.reserve`` (bind: GPU choice and allocation). A pod that fits
nowhere is dropped. A CPU-only pod is bound by the cluster, which the ledger
learns as it would from its informer (``Ledger.observe_pod``). Only JSON is
skipped. Decision time is the wall time of the ledger path of one pod.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from itertools import compress

import numpy as np

from benchmarks import protocol
from benchmarks.kube import KubeScheduler, all_pods_through_extender
from benchmarks.mapping import MIB, make_mapping
from benchmarks.trace import Nodes, Pods
from extender.ledger.ledger import Ledger
from extender.ledger.records import PodRef
from policy.reasons import FITS
from policy.scoring import make_strategy
from policy.state import ClusterState

ASSUME_NS = 1_700_000_000_000_000_000


@dataclass
class Run:
    """What one seed produced; arrays follow the arrival order."""

    policy: str
    mapping: str
    setting: str
    seed: int
    capacity: int
    demand: np.ndarray  # milli-GPU asked by each arriving pod
    placed: np.ndarray  # bool
    shapes: list  # (num_gpu, gpu_milli) of each arriving pod
    decision_ns: np.ndarray  # per pod that reached the extender
    consistent: bool = True  # ledger's CPU/memory counts equal kube-scheduler's at the end
    extra: dict = field(default_factory=dict)

    def unallocated_at(self, level: float = 1.0) -> float:
        return protocol.unallocated_at(self.demand, self.placed, self.capacity, level)

    def curve(self) -> tuple[np.ndarray, np.ndarray]:
        """(arrived %, unallocated GPU %) after each pod."""
        return (100.0 * protocol.arrived(self.demand, self.capacity),
                protocol.unallocated(np.where(self.placed, self.demand, 0), self.capacity))

    def failed_by_shape(self, level: float = 1.0) -> dict:
        """(num_gpu, gpu_milli) → pods dropped until the arrived workload reaches ``level``."""
        last = protocol.last_at_or_below(protocol.arrived(self.demand, self.capacity), level)
        failed: dict = {}
        for i in np.flatnonzero(~self.placed[: last + 1]):
            failed[self.shapes[i]] = failed.get(self.shapes[i], 0) + 1
        return failed


def replay(nodes: Nodes, pods: Pods, policy: str, seed: int, mapping: str = "milli", setting: str = "paper",
           stop_at: float = protocol.RATIO, options: dict | None = None) -> Run:
    """Run one seed (see module doc); stop once the arrived workload passes ``stop_at``."""
    mapper = make_mapping(mapping, nodes)
    strategy = make_strategy(policy, seed=seed, **(options or {}))
    ledger = Ledger(ClusterState(rows=len(nodes)), strategy)
    for i in range(len(nodes)):
        ledger.observe_node(mapper.node(nodes, i))
    names = np.array(nodes.name, dtype=object)
    kube = KubeScheduler(nodes, setting, np.random.default_rng(seed))
    every_pod = all_pods_through_extender(setting)
    observe = getattr(strategy, "observe", None)

    capacity = nodes.gpu_capacity
    order = protocol.arrivals(pods, capacity, seed)
    seq = pods.take(order)
    demand = seq.demand
    limit = protocol.last_at_or_below(protocol.arrived(demand, capacity), stop_at) + 1
    placed = np.zeros(limit, dtype=bool)
    timings = []
    for j in range(limit):
        request = mapper.request(seq, j)
        cpu, mib = int(seq.cpu[j]), int(seq.memory[j])
        candidates = kube.filter(cpu, mib, seq.gpu_spec[j])
        asks_gpu = request.gpu_count > 0
        uid = f"{seq.name[j]}-{j}"
        extender = None
        if asks_gpu or every_pod:
            start = time.perf_counter_ns()
            if observe is not None:
                observe(request)
            if asks_gpu and len(candidates):
                candidates = _filter(ledger, request, names[candidates].tolist(), candidates)
            if len(candidates):
                rows, _ = ledger.lookup(names[candidates].tolist())
                extender = ledger.evaluate_rows(request, rows).scores()
            elapsed = time.perf_counter_ns() - start
        if not len(candidates):
            if asks_gpu or every_pod:
                timings.append(elapsed)
            continue
        node = kube.pick(candidates, kube.total_scores(candidates, extender, cpu, mib))
        if asks_gpu:
            start = time.perf_counter_ns()
            ledger.reserve(PodRef(uid, "trace", seq.name[j]), request, names[node], ASSUME_NS + j)
            elapsed += time.perf_counter_ns() - start
        else:
            ledger.observe_pod(_bound_pod(uid, seq.name[j], names[node], cpu, mib))
        if asks_gpu or every_pod:
            timings.append(elapsed)
        kube.bind(node, cpu, mib)
        placed[j] = True

    consistent = bool((ledger.state.array("cpu_used")[ledger.state.rows(nodes.name)] == kube.cpu_used).all()
                      and (ledger.state.array("host_mem_used")[ledger.state.rows(nodes.name)]
                           == kube.mem_used * MIB).all())
    shapes = list(zip(seq.num_gpu[:limit].tolist(), seq.gpu_milli[:limit].tolist()))
    return Run(policy, mapping, setting, seed, capacity, demand[:limit], placed, shapes,
               np.array(timings, dtype=np.int64), consistent, extra={"ledger": ledger, "kube": kube})


def _filter(ledger: Ledger, request, asked: list, candidates: np.ndarray) -> np.ndarray:
    """The extender's filter as the service runs it: rows by name, check, and the passed rows remembered."""
    rows, layout = ledger.lookup(asked)
    passed = ledger.check_rows(request, rows) == FITS
    ledger.state.remember(list(compress(asked, passed)), rows[passed], layout)
    return candidates[passed]


def _bound_pod(uid: str, name: str, node: str, cpu: int, mib: int) -> dict:
    """A CPU-only pod as the informer reports it once bound."""
    return {"metadata": {"uid": uid, "name": name, "namespace": "trace"},
            "spec": {"nodeName": node, "containers": [
                {"name": "main", "resources": {"requests": {"cpu": f"{cpu}m", "memory": f"{mib}Mi"}}}]},
            "status": {"phase": "Running"}}
