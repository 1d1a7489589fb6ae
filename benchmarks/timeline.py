"""The churn replay's workload: when each pod arrives and leaves, and its priority.

The openb trace gives every pod a ``creation_time`` and ``deletion_time``
(seconds). Replayed at those times on the trace's own 1,213-node cluster the
pods never contend: the GPU demand of the pods alive at once peaks at 1.1 % of
the cluster's GPUs (default trace; 20 GPUs on average over its busy 33 days),
because the 8,152 pods are a sample spread over 149 days. So the workload
keeps what the trace says about each pod — its shape, its lifetime
``deletion − creation``, its QoS, the order and spacing of arrivals — and
raises the arrival rate in two stated ways:

* **window**: the first ``lead`` share of pods (1 %: in the default trace 81
  pods that trickle in over 115 days) arrive when the window opens, the
  others at their creation time; the window spans the rest
  (``span`` = last creation − opening + 1 s);
* **copies**: ``copies`` copies of the trace are laid over one another, copy
  0 as it is and copy k ≥ 1 rotated by a seeded offset drawn uniformly over
  the span (a creation time past the window's end wraps to its start), so
  arrivals stay bursty as the trace's are without k pods arriving at one
  instant;
* **speed-up**: arrival times are divided by ``speedup``; lifetimes are kept,
  so a pod runs as long as it did, and a pod departs at its arrival plus its
  lifetime (its deletion time on the new time axis), placed or not.

With ``copies=1, speedup=1, lead=0`` the workload is the trace at its own
times. A pod's priority comes from its QoS class (:data:`QOS_PRIORITY`); the
replay only orders waiting pods by it (a non-preempting PriorityClass: no
pod is evicted for a higher one).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from benchmarks.trace import Pods, Times

QOS_PRIORITY = {"LS": 2, "Guaranteed": 2, "Burstable": 1, "BE": 0}  # latency-sensitive first; others 0


@dataclass
class Workload:
    """One row per arrival, in arrival order (ties by trace row, then copy)."""

    pods: Pods
    copy: np.ndarray  # which copy of the trace the row is
    row: np.ndarray  # the pod's row in the trace
    arrive: np.ndarray  # seconds (float) from the window's opening
    depart: np.ndarray  # seconds, arrive + lifetime
    priority: np.ndarray  # int

    def __len__(self) -> int:
        return len(self.arrive)

    @property
    def end(self) -> float:
        """The last arrival."""
        return float(self.arrive.max()) if len(self.arrive) else 0.0

    def offered(self, at: np.ndarray) -> np.ndarray:
        """GPU demand (milli) of the pods arrived and not departed at each time of ``at``, placed or waiting."""
        order_a, order_d = np.argsort(self.arrive, kind="stable"), np.argsort(self.depart, kind="stable")
        demand = self.pods.demand
        arrived = np.concatenate(([0], np.cumsum(demand[order_a])))
        departed = np.concatenate(([0], np.cumsum(demand[order_d])))
        return (arrived[np.searchsorted(self.arrive[order_a], at, side="right")]
                - departed[np.searchsorted(self.depart[order_d], at, side="right")])


def workload(pods: Pods, times: Times, copies: int = 1, speedup: float = 1.0, seed: int = 0,
             lead: float = 0.0) -> Workload:
    """The arrivals of ``copies`` copies of the trace (see module doc)."""
    if copies < 1 or speedup <= 0 or not 0 <= lead < 1:
        raise ValueError("copies must be ≥ 1, speedup > 0 and lead in [0, 1)")
    creation = times.creation.astype(np.float64)
    opening = float(np.quantile(creation, lead, method="lower")) if len(creation) else 0.0
    created = np.maximum(creation, opening) - opening
    span = float(created.max()) + 1.0 if len(created) else 1.0
    lifetime = (times.deletion - times.creation).astype(np.float64)
    offsets = np.concatenate(([0.0], np.random.default_rng(seed).uniform(0.0, span, copies - 1)))
    arrive = np.concatenate([np.mod(created + offset, span) for offset in offsets]) / speedup
    n = len(pods)
    row = np.tile(np.arange(n), copies)
    copy = np.repeat(np.arange(copies), n)
    order = np.lexsort((copy, row, arrive))
    priority = np.array([QOS_PRIORITY.get(q, 0) for q in times.qos], dtype=np.int64)
    return Workload(pods.take(row[order]), copy[order], row[order], arrive[order],
                    arrive[order] + lifetime[row[order]], priority[row[order]])
