"""Stranded fragments (policy.fragmentation.fragments): hand-computed cases, a plain-Python reference,
never an untouched GPU."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from clusters import clusters, requests
from policy.fragmentation.fragments import stranded_gpus, stranded_share
from policy.fragmentation.measure import fragmentation
from policy.fragmentation.shapes import Shapes
from policy.names import BINPACK, MODE_CORE, MODE_MEMORY, MODE_NONE, UNLIMITED_PODS
from policy.node import NodeSpec
from policy.request import host_request, simple_request
from policy.state import ClusterState


def node(name, mode=MODE_MEMORY, gpus=2, gib=15, cpu=0, model="", unhealthy=frozenset()):
    return NodeSpec(name, mode, gpus, gib, 100 if mode == MODE_CORE else 0, BINPACK, UNLIMITED_PODS,
                    unhealthy=unhealthy, cpu=cpu, host_memory=2**36 if cpu else 0, model=model)


def state_of(*nodes, usage=()):
    """``usage``: (node, gpu, GiB, compute) each counted as one pod."""
    state = ClusterState()
    for spec in nodes:
        state.set_node(spec)
    for name, gpu, memory, core in usage:
        state.add_usage(name, {gpu: memory}, {gpu: core} if core else {}, bool(core))
    return state


def view_of(state):
    return state.view_all()[1]


def stranded(state, *requests, weights=None):
    shapes = Shapes.of(list(requests), weights or [1] * len(requests))
    return stranded_gpus(view_of(state), shapes)[0]


def test_one_gib_left_where_every_pod_asks_for_two_is_stranded_and_the_untouched_gpu_beside_it_is_not():
    state = state_of(node("n"), usage=[("n", 0, 14, 0)])
    assert stranded(state, simple_request(2))[0, :2].tolist() == [True, False]
    per_node, _, unallocated = stranded_share(view_of(state), Shapes.of([simple_request(2)], [1]))
    assert per_node[0] == pytest.approx(1 / 15) and unallocated[0] == pytest.approx(1 + 1 / 15)


def test_a_node_whose_mode_no_shape_takes_strands_nothing_though_fgd_counts_all_its_idle_share():
    # the demo's case: only memory+compute pods were seen; the memory-only node's GPUs, untouched or not,
    # are not lost to fragments (repacking would not free anything for those pods)
    state = state_of(node("memory-only"), usage=[("memory-only", 0, 6, 0)])
    core_pod = simple_request(2, 30)
    assert not stranded(state, core_pod).any()
    shapes = Shapes.of([core_pod], [1])
    assert fragmentation(view_of(state), shapes)[0] == pytest.approx(2 - 6 / 15)  # FGD's Frag: everything idle


def test_a_shape_larger_than_the_gpus_strands_no_fragment():
    state = state_of(node("n", gib=15), usage=[("n", 0, 10, 0)])
    assert not stranded(state, simple_request(20)).any()


def test_another_gpu_model_strands_nothing_and_the_same_model_does():
    state = state_of(node("a10", model="A10"), usage=[("a10", 0, 14, 0)])
    assert not stranded(state, simple_request(2, models=frozenset({"T4"}))).any()
    assert stranded(state, simple_request(2, models=frozenset({"A10"})))[0, :2].tolist() == [True, False]


def test_cpu_used_up_strands_the_fragments_but_never_an_untouched_gpu():
    state = state_of(node("n", cpu=8_000), usage=[("n", 0, 4, 0)])
    state.add_host_usage("n", 8_000, 0)
    assert stranded(state, simple_request(2, cpu=1_000))[0, :2].tolist() == [True, False]
    assert not stranded(state, simple_request(2)).any()  # a shape that needs no CPU still fits


def test_a_multi_gpu_shape_needs_k_gpus_taking_it():
    # GPU 0 has 5 GiB free, GPU 1 is full: a 2 x 4 GiB pod cannot use GPU 0's fragment
    state = state_of(node("n"), usage=[("n", 0, 10, 0), ("n", 1, 15, 0)])
    assert stranded(state, simple_request(8, gpu_count=2))[0, :2].tolist() == [True, False]
    assert not stranded(state, simple_request(8, gpu_count=2), simple_request(4)).any()  # a 4 GiB pod fits


def test_a_pod_that_asks_for_no_gpu_does_not_use_a_fragment():
    state = state_of(node("n"), usage=[("n", 0, 14, 0)])
    assert stranded(state, simple_request(2), host_request(cpu=100))[0, 0]


def test_an_unhealthy_gpu_is_never_stranded():
    state = state_of(node("n", unhealthy=frozenset({0})), usage=[("n", 0, 14, 0)])
    assert not stranded(state, simple_request(2)).any()


def test_core_mem_fragment_limited_by_compute():
    # 10 GiB free but only 10 % compute left: a 2 GiB + 30 % pod cannot use it
    state = state_of(node("c", MODE_CORE), usage=[("c", 0, 5, 90)])
    assert stranded(state, simple_request(2, 30))[0, :2].tolist() == [True, False]
    assert not stranded(state, simple_request(2, 30), simple_request(2, 10)).any()


def takes(spec, used_mem, used_core, pods, g, shape) -> bool:
    """Plain-Python restatement: GPU g of ``spec`` with this usage takes one GPU's part of ``shape``."""
    m, c, _ = shape.shape
    if g in spec.unhealthy or pods >= spec.max_pod or spec.memory_per_gpu - used_mem < m:
        return False
    if c and spec.core_per_gpu - used_core < c:
        return False
    if shape.whole_device:
        size_ok = spec.memory_per_gpu == m and (c == 0 or spec.core_per_gpu == c)
        return size_ok and used_mem == 0 and used_core == 0 and pods == 0
    return True


def reference(state: ClusterState, shapes: list) -> dict:
    """(node, gpu) → stranded, one GPU and one shape at a time (see policy.fragmentation.fragments' doc)."""
    out = {}
    for name, spec in state.specs.items():
        row = state.index[name]
        used = {f: state.array(f)[row] for f in ("mem_used", "core_used", "pods")}
        memory_pods, core_pods = state.array("memory_pods")[row], state.array("core_pods")[row]

        def mode_ok(shape):
            if shape.wants_core:
                return spec.mode == MODE_CORE and memory_pods == 0
            return spec.mode == MODE_MEMORY and core_pods == 0

        for g in range(spec.gpu_count):
            mem, core, pods = (int(used[f][g]) for f in ("mem_used", "core_used", "pods"))
            idle = 0.0 if g in spec.unhealthy else (spec.memory_per_gpu - mem) / spec.memory_per_gpu
            if spec.mode == MODE_CORE and g not in spec.unhealthy:
                idle = min(idle, (spec.core_per_gpu - core) / spec.core_per_gpu)
            fragment = (mem or core or pods) and idle > 0
            wanted = usable = False
            for shape in shapes:
                if not mode_ok(shape):
                    continue
                k = shape.gpu_count
                empty = [takes(spec, 0, 0, 0, h, shape) for h in range(spec.gpu_count)]
                now = [takes(spec, int(used["mem_used"][h]), int(used["core_used"][h]), int(used["pods"][h]), h,
                             shape) for h in range(spec.gpu_count)]
                wanted |= empty[g] and sum(empty) >= k
                usable |= now[g] and sum(now) >= k
            out[(name, g)] = bool(fragment and wanted and not usable)
    return out


@settings(max_examples=150, deadline=None)
@given(clusters(), st.lists(requests(), min_size=1, max_size=4))
def test_the_vectorised_measure_is_the_plain_reference_and_never_marks_an_untouched_gpu(state, shapes):
    names, view = state.view_all()
    got, share = stranded_gpus(view, Shapes.of(shapes, [1] * len(shapes)))
    expected = reference(state, shapes)
    for i, name in enumerate(names):
        spec = state.specs[name]
        for g in range(view.healthy.shape[1]):
            if g >= spec.gpu_count:
                assert not got[i, g]
                continue
            assert got[i, g] == expected[(name, g)], (name, g)
            if got[i, g]:
                assert 0 < share[i, g] < 1
        untouched = (view.mem_used[i] == 0) & (view.core_used[i] == 0) & (view.pods[i] == 0)
        assert not (got[i] & untouched).any()
    if any(s.mode == MODE_NONE for s in state.specs.values()):
        rows = [i for i, n in enumerate(names) if state.specs[n].mode == MODE_NONE]
        assert not got[rows].any()
