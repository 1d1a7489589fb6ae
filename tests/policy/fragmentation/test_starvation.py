import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from policy.fragmentation.shapes import Shapes
from policy.fragmentation.starvation import appetite, starved, starved_growth
from policy.names import BINPACK, MODE_MEMORY, UNLIMITED_PODS
from policy.node import NodeSpec
from policy.request import host_request, simple_request
from policy.state import ClusterState

GPU = 1000  # memory units per GPU, as in the milli mapping
GIB = 2**30


def node(name, gpus=2, cpu=32_000, memory=64 * GIB):
    return NodeSpec(name, MODE_MEMORY, gpus, GPU, 0, BINPACK, UNLIMITED_PODS, cpu=cpu, host_memory=memory)


def view(*specs, usage=(), host=()):
    state = ClusterState()
    for spec in specs:
        state.set_node(spec)
    for name, gpu, amount in usage:
        state.add_usage(name, {gpu: amount}, {}, False)
    for name, cpu, memory in host:
        state.add_host_usage(name, cpu, memory)
    return state.view(state.rows([s.name for s in specs]))


def test_appetite_is_cpu_and_memory_per_gpu_of_demand_over_the_gpu_shapes():
    # 2 pods of half a GPU with 4 cores, 1 pod of two GPUs with 16 cores, CPU-only pods ignored:
    # 8 + 16 cores for 1 + 2 GPUs = 8 cores per GPU.
    half = simple_request(500, cpu=4_000, host_memory=GIB)
    two = simple_request(2 * GPU, gpu_count=2, whole_device=True, cpu=16_000, host_memory=4 * GIB)
    shapes = Shapes.of([half, two, host_request(50_000, 100 * GIB)], [2, 1, 7])
    cpu, memory = appetite(shapes, np.ones(3), [GPU, 2 * GPU])
    assert cpu.tolist() == pytest.approx([24_000 / 3, 24_000 / 2.5])  # on GPUs twice as big a half is a quarter
    assert memory.tolist() == pytest.approx([6 * GIB / 3, 6 * GIB / 2.5])


def test_appetite_counts_pods_not_popularity_weights():
    two = simple_request(2 * GPU, gpu_count=2, whole_device=True, cpu=16_000)
    one = simple_request(GPU, whole_device=True, cpu=2_000)
    shapes = Shapes.of([two, one], [2, 1])  # weighted by GPUs: one pod each
    cpu, _ = appetite(shapes, 1.0 / np.maximum(shapes.count, 1), [GPU])
    assert cpu.tolist() == pytest.approx([18_000 / 3])


def test_no_gpu_shapes_no_appetite():
    cpu, memory = appetite(Shapes.of([host_request(8_000)], [1]), np.ones(1), [GPU])
    assert (cpu.tolist(), memory.tolist()) == ([0.0], [0.0])


def test_starved_is_the_idle_gpu_beyond_what_free_cpu_or_memory_feeds():
    idle = np.array([3.0, 4.0])
    free_cpu = np.array([8_000, 8_000])
    free_mem = np.array([64 * GIB, 64 * GIB])
    known, unknown = np.array([True, True]), np.array([True, False])
    # first node: 8 cores feed two GPUs at 4 cores each, one idle GPU is starved; the second's CPU is not known
    assert starved(idle, free_cpu, free_mem, unknown, known, 4_000, GIB).tolist() == [1.0, 0.0]
    # memory can be the tighter one: 64 GiB at 32 GiB a GPU feed two
    assert starved(idle, free_cpu * 10, free_mem, known, known, 4_000, 32 * GIB).tolist() == [1.0, 2.0]
    assert starved(idle, free_cpu, free_mem, known, known, 0, 0).tolist() == [0.0, 0.0]  # no appetite


def test_a_cpu_only_pod_grows_starvation_only_where_idle_gpus_need_the_cpu():
    v = view(node("busy", cpu=16_000), node("hungry", cpu=16_000), node("roomy", cpu=96_000))
    idle = np.array([0.0, 2.0, 2.0])
    growth = starved_growth(v, np.arange(3), idle, idle, host_request(8_000), (np.full(3, 6_000), np.zeros(3)))
    # busy: no idle GPU; hungry: 16 cores fed 2 GPUs, 8 feed 1.33; roomy: 88 cores still feed both
    assert growth == pytest.approx([0.0, 2 - 8 / 6, 0.0])


def test_a_gpu_pod_with_little_cpu_relieves_a_starved_node():
    v = view(node("n", gpus=4, cpu=8_000))
    growth = starved_growth(v, np.arange(1), np.array([4.0]), np.array([3.0]),
                            simple_request(GPU, whole_device=True, cpu=0), (np.full(1, 4_000), np.zeros(1)))
    assert growth[0] == pytest.approx(-1.0)  # 4 idle, 2 fed → 3 idle, 2 fed


def test_the_measure_adds_starved_with_the_exact_idle_change_of_each_gpu():
    from policy.fragmentation.growth import growth_on, growth_per_gpu
    v = view(node("n", gpus=2, cpu=12_000), usage=[("n", 0, 500)])
    shapes = Shapes.of([simple_request(500, cpu=4_000)], [1])
    pod = simple_request(250, cpu=4_000)
    candidates = np.zeros(v.healthy.shape, dtype=bool)
    candidates[0, :2] = True
    plain = growth_per_gpu(v, shapes, pod, candidates)
    hungry = growth_per_gpu(v, shapes, pod, candidates, appetite=(np.full(1, 8_000), np.zeros(1)))
    # 1.5 idle, 12 cores feed 1.5 GPUs at 8 → with the pod 1.25 idle, 8 cores feed 1: 0.25 starved either GPU
    assert hungry[0, :2] - plain[0, :2] == pytest.approx([0.25, 0.25])
    cpu_only = host_request(4_000)
    difference = (growth_on(v, shapes, cpu_only, np.zeros((1, 0), dtype=np.int64),
                            appetite=(np.full(1, 8_000), np.zeros(1)))
                  - growth_on(v, shapes, cpu_only, np.zeros((1, 0), dtype=np.int64)))
    assert difference[0] == pytest.approx(0.5)  # 1.5 idle, 8 cores feed 1


@settings(max_examples=200, deadline=None)
@given(idle=st.floats(0, 8), total=st.integers(1_000, 128_000), taken=st.integers(0, 128_000),
       cpu=st.integers(0, 64_000), per_gpu=st.integers(1, 32_000))
def test_cpu_only_pods_never_relieve_and_never_starve_more_than_the_idle_gpus(idle, total, taken, cpu, per_gpu):
    v = view(node("n", cpu=total), host=[("n", min(taken, total), 0)])
    idle_gpus = np.array([idle])
    appetite_ = (np.full(1, per_gpu), np.zeros(1))
    growth = starved_growth(v, np.arange(1), idle_gpus, idle_gpus, host_request(cpu), appetite_)[0]
    assert -1e-9 <= growth <= idle + 1e-9
    more = starved_growth(v, np.arange(1), idle_gpus, idle_gpus, host_request(cpu + 1_000), appetite_)[0]
    assert more >= growth - 1e-9
