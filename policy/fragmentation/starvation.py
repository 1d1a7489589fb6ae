"""Starved GPU: idle GPU its node's CPU and host memory cannot feed at the workload's usual appetite.

    Starved(node) = max(0, idle(node) − min(cpu_free(node) / c̄, host_free(node) / h̄))      (GPUs)

    c̄ = Σ_m n(m) · cpu(m) / Σ_m n(m) · d(m)      CPU a GPU of demand comes with, over the GPU shapes m
    h̄ = the same with host memory
    d(m) = GPUs m asks for: k for k whole GPUs, per-GPU memory / the node's GPU memory for a share of one
    n(m) = pods of shape m seen

``idle(node)`` is the node's idle GPU share (1 per idle GPU, as Frag counts
it); c̄ and h̄ depend on the node only through its GPU memory. A node whose
free CPU would feed ``cpu_free / c̄`` GPUs of the usual demand and has more idle GPU than that will, on average, see that
excess stay idle once its CPU is gone, whichever pods come; a pod that eats
the CPU of a node with idle GPU (a CPU-only pod above all) grows it, a pod
that takes idle GPU with little CPU shrinks it. Where the CPU or memory
allocatable is not known (0) it feeds any number of GPUs.

The fragmentation measure sees only the shapes that could no longer run
*after* the next pod; this term sees the CPU the node's idle GPUs will need
over the pods to come. Without it, CPU-only pods, which change no shape's fit
while CPU is plentiful, settle on nodes whose idle GPUs later go unfed.
Where the cluster's free CPU is short, c̄ grows by the CPU-only pods' share
that will land beside idle GPUs (:mod:`policy.fragmentation.spillover`).
"""

from __future__ import annotations

import numpy as np

from policy.fragmentation.shapes import Shapes
from policy.request import GPURequest
from policy.state import NodesView


def appetite(shapes: Shapes, pods_per_weight: np.ndarray, gpu_memory) -> tuple[np.ndarray, np.ndarray]:
    """(c̄, h̄) for nodes whose GPUs have ``gpu_memory`` each (an array: one pair per value): CPU and host
    memory per GPU of demand over the GPU shapes; 0 where there is no demand.

    ``pods_per_weight`` turns each shape's popularity weight into its pod count."""
    return rates(shapes, pods_per_weight, gpu_memory, cpu_only=False)


def rates(shapes: Shapes, pods_per_weight: np.ndarray, gpu_memory, cpu_only: bool = True) -> tuple[np.ndarray, ...]:
    """(c̄, h̄, r, r_h): :func:`appetite`, and the CPU and host memory of the CPU-only pods per GPU of
    demand (:mod:`policy.fragmentation.spillover`), per value of ``gpu_memory``; 0 where there is no demand.
    ``cpu_only=False``: (c̄, h̄) alone."""
    gpu_memory = np.asarray(gpu_memory, dtype=np.float64)
    zero = np.zeros(gpu_memory.shape)
    gpu = shapes.count > 0
    if not gpu.any():
        return (zero, zero.copy(), zero.copy(), zero.copy())[:4 if cpu_only else 2]
    pods = shapes.weight * pods_per_weight
    share = ((shapes.count[gpu] == 1) & ~shapes.whole[gpu])[:, None]
    per_gpu = np.where(gpu_memory > 0, gpu_memory, np.inf)
    demand = np.where(share, np.minimum(shapes.memory[gpu][:, None] / per_gpu, 1.0), shapes.count[gpu][:, None])
    total = pods[gpu] @ demand  # GPUs of demand, per memory value
    sums = [np.dot(pods[gpu], shapes.cpu[gpu]), np.dot(pods[gpu], shapes.host_memory[gpu])]
    if cpu_only:
        others = ~gpu
        sums += [np.dot(pods[others], shapes.cpu[others]), np.dot(pods[others], shapes.host_memory[others])]
    return tuple(np.divide(amount, total, out=zero.copy(), where=total > 0) for amount in sums)


def feedable(free: np.ndarray, known: np.ndarray, per_gpu) -> np.ndarray:
    """GPUs of usual demand ``free`` CPU (or memory) feeds; unbounded where not known or not needed."""
    needed = known & (np.asarray(per_gpu) > 0)
    return np.divide(np.maximum(free, 0), per_gpu, out=np.full(np.shape(needed), np.inf), where=needed)


def starved(idle_gpus: np.ndarray, cpu_free: np.ndarray, host_free: np.ndarray, cpu_known: np.ndarray,
            host_known: np.ndarray, cpu_per_gpu, host_per_gpu) -> np.ndarray:
    """Starved(node) for the given idle GPUs, free CPU and host memory, and appetite (per node or one for all)."""
    return _unfed(idle_gpus, _fed(cpu_free, host_free, cpu_known, host_known, cpu_per_gpu, host_per_gpu))


def _unfed(idle_gpus, fed) -> np.ndarray:
    return np.maximum(idle_gpus - fed, 0.0)


def _fed(cpu_free, host_free, cpu_known, host_known, cpu_per_gpu, host_per_gpu) -> np.ndarray:
    """GPUs of usual demand the free CPU and host memory feed."""
    return np.minimum(feedable(cpu_free, cpu_known, cpu_per_gpu), feedable(host_free, host_known, host_per_gpu))


def starved_growth(view: NodesView, rows: np.ndarray, idle_before: np.ndarray, idle_after: np.ndarray,
                   request: GPURequest, appetite_: tuple[np.ndarray, np.ndarray]) -> np.ndarray:
    """Starved with the pod − Starved without, for nodes ``rows`` of ``view`` whose idle GPUs go from
    ``idle_before`` to ``idle_after`` with the pod on them; the pod takes its CPU and host memory.
    ``appetite_`` holds (c̄, h̄) for every node of ``view``."""
    cpu_known, host_known = view.cpu_total > 0, view.host_mem_total > 0
    cpu_free = view.cpu_total - view.cpu_used
    host_free = view.host_mem_total - view.host_mem_used
    # per node, then per row asked about (a node's candidate GPUs share its CPU and memory)
    before = _fed(cpu_free, host_free, cpu_known, host_known, *appetite_)
    after = _fed(cpu_free - request.cpu, host_free - request.host_memory, cpu_known, host_known, *appetite_)
    return _unfed(idle_after, after.take(rows)) - _unfed(idle_before, before.take(rows))
