"""One run of the paper's protocol through the extender's own decision code.

For each arriving pod (order from :func:`benchmarks.protocol.arrivals`):
kube-scheduler's filters and the extender's path exactly as the service drives
it (:class:`benchmarks.placer.Placer`: ``strategy.observe(request)`` once for
the new pod, filter, prioritize, kube-scheduler's choice among the top totals,
bind). A pod that fits nowhere is dropped. Only JSON is skipped. Decision time
is the wall time of the ledger path of one pod.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from benchmarks import protocol
from benchmarks.kube import KubeScheduler
from benchmarks.mapping import MIB, make_mapping
from benchmarks.placer import NOWHERE, Placer
from benchmarks.trace import Nodes, Pods
from extender.ledger.ledger import Ledger
from extender.ledger.records import PodRef
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
    kube = KubeScheduler(nodes, setting, np.random.default_rng(seed))
    placer = Placer(ledger, kube, np.array(nodes.name, dtype=object))

    capacity = nodes.gpu_capacity
    order = protocol.arrivals(pods, capacity, seed)
    seq = pods.take(order)
    demand = seq.demand
    limit = protocol.last_at_or_below(protocol.arrived(demand, capacity), stop_at) + 1
    placed = np.zeros(limit, dtype=bool)
    timings = []
    for j in range(limit):
        node, elapsed = placer.place(mapper.request(seq, j), int(seq.cpu[j]), int(seq.memory[j]), seq.gpu_spec[j],
                                     PodRef(f"{seq.name[j]}-{j}", "trace", seq.name[j]), ASSUME_NS + j)
        if elapsed is not None:
            timings.append(elapsed)
        placed[j] = node != NOWHERE

    consistent = bool((ledger.state.array("cpu_used")[ledger.state.rows(nodes.name)] == kube.cpu_used).all()
                      and (ledger.state.array("host_mem_used")[ledger.state.rows(nodes.name)]
                           == kube.mem_used * MIB).all())
    shapes = list(zip(seq.num_gpu[:limit].tolist(), seq.gpu_milli[:limit].tolist()))
    return Run(policy, mapping, setting, seed, capacity, demand[:limit], placed, shapes,
               np.array(timings, dtype=np.int64), consistent, extra={"ledger": ledger, "kube": kube})
