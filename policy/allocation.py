"""A placement turned into amounts: container → GPU → GiB (and compute).

Contract of :func:`split`: a single-GPU pod puts every container on its one
GPU; a pod with ``gpu-count = N`` gives each container ``amount / N`` on each
of its N GPUs. :func:`per_gpu` sums the containers for the ledger's arrays.
"""

from __future__ import annotations

from policy.request import GPURequest


def split(request: GPURequest, gpus) -> tuple[dict, dict]:
    """``(memory, core)``: container index → {GPU index → amount}; core is {} when memory-only."""
    gpus = [int(g) for g in gpus]
    n = len(gpus)
    memory = {c.index: {g: c.memory // n for g in gpus} for c in request.containers}
    core = {c.index: {g: c.core // n for g in gpus} for c in request.containers} if request.wants_core else {}
    return memory, core


def per_gpu(by_container: dict) -> dict:
    """GPU index → total amount over all containers."""
    total: dict = {}
    for gpus in by_container.values():
        for gpu, amount in gpus.items():
            total[gpu] = total.get(gpu, 0) + amount
    return total
