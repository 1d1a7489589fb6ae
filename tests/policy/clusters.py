"""Hypothesis strategies for random clusters and requests, and a per-node reference placer.

The reference restates the placement rules one node and one GPU at a time, in
plain Python, so the vectorised core can be checked against it.
"""

from __future__ import annotations

from dataclasses import dataclass

from hypothesis import strategies as st

from policy import reasons as R
from policy.names import BINPACK, MODE_CORE, MODE_MEMORY, MODE_NONE, SPREAD, UNLIMITED_PODS
from policy.node import NodeSpec
from policy.request import simple_request
from policy.state import ClusterState


@dataclass
class GpuUse:
    memory: int
    core: int
    pods: int


@st.composite
def node_specs(draw, name: str) -> NodeSpec:
    mode = draw(st.sampled_from([MODE_MEMORY, MODE_CORE, MODE_CORE, MODE_NONE]))
    gpus = draw(st.integers(1, 8))
    return NodeSpec(
        name=name, mode=mode, gpu_count=gpus, memory_per_gpu=draw(st.sampled_from([8, 15, 16, 22, 32])),
        core_per_gpu=100 if mode == MODE_CORE else 0,
        placement=draw(st.sampled_from([BINPACK, SPREAD])),
        max_pod=draw(st.sampled_from([2, 3, 20, UNLIMITED_PODS])),
        unhealthy=frozenset(draw(st.sets(st.integers(0, gpus - 1), max_size=2))),
    )


@st.composite
def clusters(draw, max_nodes: int = 6) -> ClusterState:
    """A state with random nodes and random usage already counted (possibly of the other kind)."""
    state = ClusterState(rows=2, gpus=2)  # small, so growth is exercised
    for i in range(draw(st.integers(1, max_nodes))):
        spec = draw(node_specs(f"node-{i}"))
        state.set_node(spec)
        for _ in range(draw(st.integers(0, 4))):
            gpu = draw(st.integers(0, spec.gpu_count - 1))
            mem = draw(st.integers(1, spec.memory_per_gpu))
            wants_core = spec.mode == MODE_CORE
            if draw(st.integers(0, 9)) == 0:
                wants_core = not wants_core  # left over from a mode switch
            core = draw(st.sampled_from([5, 10, 30, 50])) if wants_core else 0
            if (state.array("mem_used")[state.index[spec.name], gpu] + mem > spec.memory_per_gpu
                    or state.array("pods")[state.index[spec.name], gpu] >= spec.max_pod):
                continue
            state.add_usage(spec.name, {gpu: mem}, {gpu: core} if core else {}, wants_core)
    return state


@st.composite
def requests(draw):
    whole = draw(st.integers(0, 9)) == 0
    if draw(st.booleans()):
        n = draw(st.integers(2, 4))
        per = draw(st.integers(1, 16))
        return simple_request(per * n, 0, gpu_count=n, whole_device=whole)
    core = draw(st.sampled_from([0, 0, 5, 30, 50, 100]))
    memory = draw(st.sampled_from([1, 2, 4, 8, 15, 16, 22, 40]))
    return simple_request(memory, core, whole_device=whole)


def reference_place(state: ClusterState, name: str, request) -> tuple[bool, list]:
    """(fits, GPUs the node's placement picks) for one node, rule by rule."""
    row = state.index[name]
    spec = state.specs[name]
    a = {f: state.array(f)[row] for f in ("mem_total", "mem_used", "core_total", "core_used", "pods", "healthy")}
    if spec.mode == MODE_NONE:
        return False, []
    if request.wants_core != (spec.mode == MODE_CORE):
        return False, []
    other_kind = state.array("memory_pods" if request.wants_core else "core_pods")[row]
    if other_kind > 0:
        return False, []
    m, c, n = request.shape
    if request.whole_device and (spec.memory_per_gpu != m or (c and spec.core_per_gpu != c)):
        return False, []
    fitting = []
    for g in range(spec.gpu_count):
        ok = (a["healthy"][g] and a["mem_total"][g] - a["mem_used"][g] >= m and a["pods"][g] < spec.max_pod
              and (c == 0 or a["core_total"][g] - a["core_used"][g] >= c))
        if request.whole_device:
            ok = ok and a["mem_used"][g] == 0 and a["core_used"][g] == 0 and a["pods"][g] == 0
        if ok:
            fitting.append(g)
    if len(fitting) < n:
        return False, []

    def full(g):
        mem = a["mem_used"][g] / a["mem_total"][g]
        if spec.mode == MODE_CORE:
            return (mem + a["core_used"][g] / a["core_total"][g]) / 2
        return mem

    direction = -1 if spec.placement == BINPACK else 1
    return True, sorted(sorted(fitting, key=lambda g: (direction * full(g), g))[:n])


__all__ = ["clusters", "requests", "reference_place", "R"]
