"""A placement turned into amounts: container → GPU → GiB (and compute).

Contract of :func:`split`: a single-GPU pod puts every container on its one
GPU; a pod with ``gpu-count = N`` gives each container ``amount / N`` on each
of its N GPUs. :func:`per_gpu` sums the containers for the ledger's arrays.
:func:`guess` says where a pod whose GPUs are not recorded most likely holds
its share: the fullest GPU with room for all of it (binpack's choice), else
the GPUs from the fullest on, each giving what it has free; never more than a
GPU has free.
"""

from __future__ import annotations

import numpy as np

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


def guess(mem_free: np.ndarray, core_free: np.ndarray, full: np.ndarray, memory: int, core: int) -> tuple[dict, dict]:
    """``(memory, core)`` as GPU index → amount for a share of ``memory`` GiB and ``core`` compute on one
    node whose GPUs have ``mem_free``/``core_free`` left and fullness ``full`` (see module doc)."""
    order = sorted(range(len(mem_free)), key=lambda g: (-full[g], g))
    whole = [g for g in order if mem_free[g] >= memory and core_free[g] >= core]
    if whole:
        return {whole[0]: memory}, ({whole[0]: core} if core else {})
    taken_mem, taken_core = {}, {}
    for g in order:
        if memory > 0 and mem_free[g] > 0:
            taken_mem[g] = int(min(mem_free[g], memory))
            memory -= taken_mem[g]
        if core > 0 and core_free[g] > 0:
            taken_core[g] = int(min(core_free[g], core))
            core -= taken_core[g]
    return taken_mem, taken_core
