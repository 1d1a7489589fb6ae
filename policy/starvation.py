"""Starved GPU: idle GPU its node's CPU and host memory cannot feed at the workload's usual appetite.

    Starved(node) = max(0, idle(node) − min(cpu_free(node) / c̄, host_free(node) / h̄))      (GPUs)

    c̄ = Σ_m n(m) · cpu(m) / Σ_m n(m) · d(m)      CPU a GPU of demand comes with, over the GPU shapes m
    h̄ = the same with host memory
    d(m) = GPUs m asks for: k for k whole GPUs, per-GPU memory / mean GPU memory for a share of one
    n(m) = pods of shape m seen

``idle(node)`` is the node's idle GPU share (1 per idle GPU, as Frag counts it). A node whose free CPU would feed ``cpu_free / c̄`` GPUs of
the usual demand and has more idle GPU than that will, on average, see that
excess stay idle once its CPU is gone, whichever pods come; a pod that eats
the CPU of a node with idle GPU (a CPU-only pod above all) grows it, a pod
that takes idle GPU with little CPU shrinks it. Where the CPU or memory
allocatable is not known (0) it feeds any number of GPUs.

The fragmentation measure sees only the shapes that could no longer run
*after* the next pod; this term sees the CPU the node's idle GPUs will need
over the pods to come. Without it, CPU-only pods, which change no shape's fit
while CPU is plentiful, settle on nodes whose idle GPUs later go unfed.
"""

from __future__ import annotations

import numpy as np

from policy.request import GPURequest
from policy.shapes import Shapes
from policy.state import NodesView


def appetite(shapes: Shapes, pods_per_weight: np.ndarray, gpu_memory: float) -> tuple[float, float]:
    """(c̄, h̄): CPU and host memory per GPU of demand over the GPU shapes; 0, 0 when there are none.

    ``pods_per_weight`` turns each shape's popularity weight into its pod count."""
    gpu = shapes.count > 0
    if not gpu.any() or gpu_memory <= 0:
        return 0.0, 0.0
    pods = shapes.weight[gpu] * pods_per_weight[gpu]
    share = (shapes.count[gpu] == 1) & ~shapes.whole[gpu]
    demand = np.where(share, np.minimum(shapes.memory[gpu] / gpu_memory, 1.0), shapes.count[gpu])
    total = (pods * demand).sum()
    if total <= 0:
        return 0.0, 0.0
    return float((pods * shapes.cpu[gpu]).sum() / total), float((pods * shapes.host_memory[gpu]).sum() / total)


def feedable(free: np.ndarray, known: np.ndarray, per_gpu: float) -> np.ndarray:
    """GPUs of usual demand ``free`` CPU (or memory) feeds; unbounded where not known or not needed."""
    if per_gpu <= 0:
        return np.full(np.shape(free), np.inf)
    return np.where(known, np.maximum(free, 0) / per_gpu, np.inf)


def starved(idle_gpus: np.ndarray, cpu_free: np.ndarray, host_free: np.ndarray, cpu_known: np.ndarray,
            host_known: np.ndarray, cpu_per_gpu: float, host_per_gpu: float) -> np.ndarray:
    """Starved(node) for the given idle GPUs and free CPU and host memory."""
    fed = np.minimum(feedable(cpu_free, cpu_known, cpu_per_gpu), feedable(host_free, host_known, host_per_gpu))
    return np.maximum(idle_gpus - fed, 0.0)


def starved_growth(view: NodesView, rows: np.ndarray, idle_before: np.ndarray, idle_after: np.ndarray,
                   request: GPURequest, appetite_: tuple[float, float]) -> np.ndarray:
    """Starved with the pod − Starved without, for nodes ``rows`` of ``view`` whose idle GPUs go from
    ``idle_before`` to ``idle_after`` with the pod on them; the pod takes its CPU and host memory."""
    cpu_per_gpu, host_per_gpu = appetite_
    if cpu_per_gpu <= 0 and host_per_gpu <= 0:
        return np.zeros(len(rows))
    cpu_known, host_known = view.cpu_total[rows] > 0, view.host_mem_total[rows] > 0
    cpu_free = view.cpu_total[rows] - view.cpu_used[rows]
    host_free = view.host_mem_total[rows] - view.host_mem_used[rows]
    before = starved(idle_before, cpu_free, host_free, cpu_known, host_known, cpu_per_gpu, host_per_gpu)
    after = starved(idle_after, cpu_free - request.cpu, host_free - request.host_memory, cpu_known, host_known,
                    cpu_per_gpu, host_per_gpu)
    return after - before
