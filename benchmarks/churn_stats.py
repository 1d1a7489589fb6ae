"""What a churn replay's record says: unallocated GPU share over time, how long pods wait, what moves bought.

Shares are of the cluster's GPU capacity, from the trace's own demand of the
placed pods (as in the paper's metric). The cluster's state after an event
holds until the next event, so a time-weighted mean over ``[t0, t1]`` is the
integral of that step function over the window divided by its length.

* **offered load**: GPU demand of the pods arrived and not departed, placed
  or waiting — the workload's, the same for every policy; it rises through
  the replay as long-lived pods accumulate;
* **window**: from the first arrival that brings the offered load to
  :data:`WINDOW_FROM` (75 %) of capacity until the last arrival
  (:func:`loaded_window`); below that hardly a pod waits;
* **bands**: around each of :data:`LEVELS` of capacity, from the first arrival
  that brings the offered load to the level − :data:`BAND` until the first
  that brings it to the level + :data:`BAND` (the last arrival if none):
  the time-weighted means there read like the paper's curve against arrived
  workload;
* **waits**: GPU pods only (CPU-only pods never wait for a GPU); a pod's
  wait is its first placement minus its arrival; a pod still waiting at its
  deletion time is *never placed* and counted apart, not in the waits; also
  by kind: sharing, whole-GPU and multi-GPU pods.
"""

from __future__ import annotations

import numpy as np

from benchmarks.churn import ChurnRun
from benchmarks.timeline import Workload

LEVELS = (0.8, 0.9, 1.0, 1.1, 1.2)
BAND = 0.05
WINDOW_FROM = 0.75


def first_at(work: Workload, capacity: int, level: float) -> float | None:
    """The first arrival after which the offered load is at least ``level`` × capacity; None if never."""
    offered = work.offered(work.arrive)
    reached = np.flatnonzero(offered >= level * capacity)
    return float(work.arrive[reached[0]]) if len(reached) else None


def loaded_window(work: Workload, capacity: int) -> tuple[float, float]:
    """``(t0, t1)``: offered load first at WINDOW_FROM of capacity (else the first arrival) until the last
    arrival."""
    start = first_at(work, capacity, WINDOW_FROM)
    first = float(work.arrive.min()) if len(work) else 0.0
    return (first if start is None else start), work.end


def band(work: Workload, capacity: int, level: float) -> tuple[float, float] | None:
    """``(t0, t1)`` of the band around ``level`` (see module doc); None when the load never reaches it."""
    start = first_at(work, capacity, level - BAND)
    if start is None:
        return None
    end = first_at(work, capacity, level + BAND)
    return start, max(start, work.end if end is None else end)


def step_at(t: np.ndarray, values: np.ndarray, at) -> np.ndarray:
    """The step function's value at each time of ``at`` (0 before the first event)."""
    i = np.searchsorted(t, np.asarray(at, dtype=np.float64), side="right") - 1
    return np.where(i >= 0, values[np.maximum(i, 0)], 0)


def time_mean(t: np.ndarray, values: np.ndarray, t0: float, t1: float) -> float:
    """Time-weighted mean of the step function over ``[t0, t1]`` (its value at t0 when the window is empty)."""
    if t1 <= t0:
        return float(step_at(t, values, [t0])[0])
    inside = (t > t0) & (t < t1)
    edges = np.concatenate(([t0], t[inside], [t1]))
    levels = step_at(t, values, edges[:-1])
    return float((levels * np.diff(edges)).sum() / (t1 - t0))


def unallocated(run: ChurnRun) -> np.ndarray:
    """Unallocated GPU % after each event."""
    return 100.0 - 100.0 * run.allocated / run.capacity


def summary(run: ChurnRun, work: Workload) -> dict:
    """The figures of one run (see module doc); JSON-ready."""
    t0, t1 = loaded_window(work, run.capacity)
    free = unallocated(run)
    gpu = run.demand > 0
    placed = ~np.isnan(run.placed_at)
    waits = (run.placed_at - run.arrive)[gpu & placed]
    bands = {}
    for level in LEVELS:
        span = band(work, run.capacity, level)
        bands[f"{round(100 * level)}"] = None if span is None else {
            "t": list(span), "unallocated": time_mean(run.t, free, *span),
            "waiting": 100.0 * time_mean(run.t, run.waiting, *span) / run.capacity}
    return {
        "label": run.label, "seed": run.seed, "window": [t0, t1],
        "unallocated_mean": time_mean(run.t, free, t0, t1),
        "waiting_mean": 100.0 * time_mean(run.t, run.waiting, t0, t1) / run.capacity,
        "bands": bands,
        "gpu_pods": int(gpu.sum()), "waited": int((waits > 0).sum()),
        "wait_mean": float(waits.mean()) if len(waits) else 0.0,
        "wait_p50": float(np.percentile(waits, 50)) if len(waits) else 0.0,
        "wait_p95": float(np.percentile(waits, 95)) if len(waits) else 0.0,
        "wait_max": float(waits.max()) if len(waits) else 0.0,
        "never_placed": int((gpu & ~placed).sum()),
        "never_placed_demand": float(100.0 * run.demand[gpu & ~placed].sum() / run.capacity),
        "moves": len(run.moves), "moves_by_last_arrival": sum(1 for m in run.moves if m[0] <= t1),
        "steps": len(run.steps), "placed_after_moves": int(sum(s[4] for s in run.steps)),
        "moves_refused": int(sum(min(planned, allowed) - applied for _, allowed, planned, applied, _ in run.steps)),
        "kinds": {name: _waits(run, mask & gpu, placed) for name, mask in _kinds(run).items()},
        "consistent": run.consistent, "seconds": run.seconds,
        "series": _series(run, t1),
    }


def _kinds(run: ChurnRun) -> dict:
    """Sharing pods (a share of one GPU), whole-GPU pods and multi-GPU pods (by demand: 1000 milli a GPU)."""
    return {"share": run.demand < 1000, "whole": run.demand == 1000, "multi": run.demand > 1000}


def _waits(run: ChurnRun, mask: np.ndarray, placed: np.ndarray) -> dict:
    waits = (run.placed_at - run.arrive)[mask & placed]
    return {"pods": int(mask.sum()), "waited": int((waits > 0).sum()),
            "wait_mean": float(waits.mean()) if len(waits) else 0.0, "never_placed": int((mask & ~placed).sum())}


def _series(run: ChurnRun, t1: float, points: int = 97) -> dict:
    """Unallocated and waiting GPU % at evenly spaced times from 0 to the last arrival."""
    at = np.linspace(0.0, t1, points)
    return {"t": at.tolist(), "unallocated": step_at(run.t, unallocated(run), at).round(3).tolist(),
            "waiting": (100.0 * step_at(run.t, run.waiting, at) / run.capacity).round(3).tolist()}
