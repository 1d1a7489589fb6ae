"""The FGD paper's experimental protocol (trace README), as pure functions.

* :func:`arrivals`: shuffle the pods with the run's seed; if their GPU demand
  is below ``ratio`` (130 %) of the cluster's GPU capacity, append pods drawn
  uniformly with replacement until the next one would pass it; if above, drop
  random pods until at or below it.
* The pods are then scheduled one at a time in that order; a pod that fits
  nowhere is dropped; pods never leave (:mod:`benchmarks.replay`).
* :func:`unallocated_at`: arrived workload = GPU demand of every pod seen so
  far (failed ones included) / capacity; the headline metric is unallocated
  GPU % = 100 − allocated milli / capacity, read after the last pod with which
  the arrived workload is still at or below the given level (100 %).
"""

from __future__ import annotations

import numpy as np

from benchmarks.trace import Pods

RATIO = 1.3
SEEDS = tuple(range(42, 52))


def arrivals(pods: Pods, capacity: int, seed: int, ratio: float = RATIO) -> np.ndarray:
    """Indices into ``pods`` in arrival order for one run (see module doc)."""
    rng = np.random.default_rng(seed)
    demand = pods.demand
    target = ratio * capacity
    order = list(rng.permutation(len(pods)))
    total = int(demand.sum())
    if total < target:
        if not (demand > 0).any():
            raise ValueError("the pod list asks for no GPU: it can never reach the target demand")
        while True:
            pick = int(rng.integers(len(pods)))
            if total + demand[pick] > target:
                break
            order.append(pick)
            total += int(demand[pick])
    else:
        while total > target:
            drop = int(rng.integers(len(order)))
            total -= int(demand[order.pop(drop)])
    return np.array(order, dtype=np.int64)


def arrived(demand: np.ndarray, capacity: int) -> np.ndarray:
    """Arrived workload (fraction of capacity) after each pod of the sequence."""
    return np.cumsum(demand) / capacity


def unallocated(placed_demand: np.ndarray, capacity: int) -> np.ndarray:
    """Unallocated GPU % after each pod (``placed_demand`` is 0 for failed pods)."""
    return 100.0 - 100.0 * np.cumsum(placed_demand) / capacity


def last_at_or_below(curve: np.ndarray, level: float) -> int:
    """Index of the last pod after which ``curve`` (arrived) is at or below ``level``, -1 if none."""
    return int(np.searchsorted(curve, level + 1e-12, side="right")) - 1


def unallocated_at(demand: np.ndarray, placed: np.ndarray, capacity: int, level: float = 1.0) -> float:
    """Unallocated GPU % once the arrived workload reaches ``level`` (see module doc)."""
    i = last_at_or_below(arrived(demand, capacity), level)
    allocated = float(np.where(placed, demand, 0)[: i + 1].sum())
    return 100.0 - 100.0 * allocated / capacity
