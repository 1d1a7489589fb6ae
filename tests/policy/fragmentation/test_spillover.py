import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import policy.fragmentation.spillover as spillover
from policy.fragmentation.measure import idle
from policy.fragmentation.shapes import Shapes
from policy.fragmentation.spillover import Spillover
from policy.fragmentation.starvation import appetite, rates
from policy.names import BINPACK, MODE_MEMORY, UNLIMITED_PODS
from policy.node import NodeSpec
from policy.request import host_request, simple_request
from policy.state import ClusterState, WRITING

GPU = 1000  # memory units per GPU, as in the milli mapping
GIB = 2**30


@pytest.fixture(autouse=True)
def every_view(monkeypatch):
    monkeypatch.setattr(spillover, "LOOK_EVERY", 1)  # the tests look at every view unless they say otherwise


def node(name, gpus=2, cpu=32_000, memory=64 * GIB, gpu_memory=GPU):
    return NodeSpec(name, MODE_MEMORY, gpus, gpu_memory, 0, BINPACK, UNLIMITED_PODS, cpu=cpu, host_memory=memory)


def cluster(*specs):
    state = ClusterState()
    for spec in specs:
        state.set_node(spec)
    return state


def whole(state):
    return state.view(state.rows(sorted(state.index)))


def shortfall(spill, cpu, rate, host=0.0, host_rate=0.0, size=GPU):
    sizes = np.array([float(size)])
    return spill.shortfall(sizes, np.array([cpu]), np.array([host]), np.array([rate]), np.array([host_rate]))


def test_k_is_the_share_of_the_cpu_only_pods_to_come_that_the_free_cpu_cannot_hold():
    # 4 idle GPUs, 64 cores free; GPU pods want 8 cores a GPU (32), CPU-only pods 4 more a GPU (16)
    spill = Spillover()
    spill.see(whole(cluster(node("a"), node("b"))))
    assert shortfall(spill, 8_000, 4_000)[0] == 0.0  # 48 wanted, 64 free
    assert shortfall(spill, 14_000, 4_000)[0] == pytest.approx((72 - 64) / 16)  # 72 wanted: 8 short of 16
    assert shortfall(spill, 16_000, 4_000)[0] == 1.0  # the GPU pods alone want all 64
    assert shortfall(spill, 20_000, 4_000)[0] == 1.0
    assert shortfall(spill, 20_000, 0.0)[0] == 0.0  # no CPU-only pods: nothing spills


def test_cpu_on_nodes_without_idle_gpu_holds_cpu_only_pods():
    state = cluster(node("full", cpu=64_000), node("n"))
    state.add_usage("full", {0: GPU, 1: GPU}, {}, False)
    spill = Spillover()
    spill.see(whole(state))
    # 2 idle GPUs want 2 × (14 + 4) = 36 cores; 96 free, 64 of them beside no idle GPU
    assert shortfall(spill, 14_000, 4_000)[0] == 0.0
    state.add_host_usage("full", 60_000, 0)
    spill.see(whole(state))
    assert shortfall(spill, 14_000, 4_000)[0] == pytest.approx((36 - 36) / 8)
    state.add_host_usage("full", 4_000, 0)
    spill.see(whole(state))
    assert shortfall(spill, 14_000, 4_000)[0] == pytest.approx((36 - 32) / 8)


def test_host_memory_has_its_own_k_and_unknown_allocatable_counts_for_neither():
    spill = Spillover()
    spill.see(whole(cluster(node("a", memory=32 * GIB), node("unknown", cpu=0, memory=0))))
    k_cpu, k_host = shortfall(spill, 8_000, 4_000, host=12 * GIB, host_rate=8 * GIB)
    assert k_cpu == 0.0  # node a: 2 GPUs want 24 cores of 32
    assert k_host == pytest.approx((40 - 32) / 16)  # 2 × 20 GiB wanted, 32 free
    # a size the caller does not list counts for nothing
    assert shortfall(spill, 100_000, 4_000, size=2 * GPU) == (0.0, 0.0)


def test_a_changed_row_is_read_again_and_the_others_are_kept():
    state = cluster(node("a"), node("b"))
    spill = Spillover()
    spill.see(whole(state))
    state.add_usage("a", {0: GPU}, {}, False)
    state.add_host_usage("a", 20_000, 0)
    spill.see(state.view(state.rows(["a"])))  # a view of one node is enough for that node
    # 3 idle GPUs want 3 × 16 = 48 cores, 44 free: 4 short of the 12 the CPU-only pods want
    assert shortfall(spill, 12_000, 4_000)[0] == pytest.approx(4 / 12)


def test_a_row_read_while_written_is_not_kept():
    state = cluster(node("a"))
    view = whole(state)
    view.version = np.full(1, WRITING)
    spill = Spillover()
    spill.see(view)
    assert shortfall(spill, 32_000, 4_000) == (0.0, 0.0)  # nothing kept: nothing known
    spill.see(whole(state))
    assert shortfall(spill, 32_000, 4_000)[0] == 1.0


def test_only_every_look_every_th_view_is_looked_at(monkeypatch):
    monkeypatch.setattr(spillover, "LOOK_EVERY", 3)
    spill = Spillover()
    view = whole(cluster(node("a")))
    for _ in range(2):
        spill.see(view)
        assert shortfall(spill, 32_000, 4_000) == (0.0, 0.0)
    spill.see(view)
    assert shortfall(spill, 32_000, 4_000)[0] == 1.0


def test_a_row_no_view_shows_any_more_is_forgotten(monkeypatch):
    monkeypatch.setattr(spillover, "FORGET_AFTER", 4)
    monkeypatch.setattr(spillover, "_SWEEP", 1)
    state = cluster(node("gone", cpu=1_000), node("here", cpu=64_000))
    spill = Spillover()
    spill.see(whole(state))
    assert shortfall(spill, 16_000, 8_000)[0] == pytest.approx((96 - 65) / 32)
    for _ in range(6):
        spill.see(state.view(state.rows(["here"])))
    assert shortfall(spill, 16_000, 8_000)[0] == 0.0  # here alone: 2 × 24 cores wanted, 64 free
    spill.see(whole(state))  # seen again: counted again
    assert shortfall(spill, 16_000, 8_000)[0] == pytest.approx((96 - 65) / 32)


def test_a_removed_nodes_row_is_dropped_at_once_and_counts_again_when_seen():
    state = cluster(node("gone", cpu=1_000), node("here", cpu=64_000))
    spill = Spillover()
    spill.see(whole(state))
    spill.forget(state.index["gone"])
    assert shortfall(spill, 16_000, 8_000)[0] == 0.0  # here alone: 2 × 24 cores wanted, 64 free
    spill.forget(state.index["gone"])  # twice, or a row never seen: nothing more
    spill.forget(99)
    spill.see(whole(state))
    assert shortfall(spill, 16_000, 8_000)[0] == pytest.approx((96 - 65) / 32)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 3), st.integers(0, 1), st.sampled_from([0, 250, 500, 1000]),
                          st.integers(0, 8_000), st.booleans()), min_size=1, max_size=25))
def test_the_kept_sums_are_the_sums_over_the_rows_as_they_are(writes):
    """After any writes, each seen by some view, the shortfall is the one worked out from scratch."""
    specs = [node("n0"), node("n1", gpus=4, cpu=64_000), node("n2", cpu=0, memory=0),
             node("n3", gpu_memory=2 * GPU, cpu=16_000)]
    state = cluster(*specs)
    spill = Spillover()
    names = [s.name for s in specs]
    for which, gpu, amount, cpu, whole_view in writes:
        name = names[which]
        if amount:
            state.add_usage(name, {gpu: amount}, {}, False)
        if cpu:
            state.add_host_usage(name, cpu, cpu * 2**20)
        spill.see(whole(state) if whole_view else state.view(state.rows([name])))
    spill.see(whole(state))
    view = whole(state)
    share = idle(view).sum(axis=1)
    sizes = np.array([float(GPU), float(2 * GPU)])
    need, rate = np.array([9_000.0, 5_000.0]), np.array([3_000.0, 6_000.0])
    at = np.searchsorted(sizes, view.mem_total[:, 0])
    known = view.cpu_total > 0
    wanted = (rate[at] * share)[known].sum()
    short = ((need[at] + rate[at]) * share)[known].sum() - (view.cpu_total - view.cpu_used)[known].sum()
    expected = float(np.clip(short / wanted, 0, 1)) if wanted > 0 else 0.0
    got = spill.shortfall(sizes, need, np.zeros(2), rate, np.zeros(2))[0]
    assert got == pytest.approx(expected, abs=1e-9)


def test_rates_are_the_appetite_and_the_cpu_only_pods_per_gpu_of_demand():
    half = simple_request(500, cpu=4_000, host_memory=GIB)
    two = simple_request(2 * GPU, gpu_count=2, whole_device=True, cpu=16_000, host_memory=4 * GIB)
    shapes = Shapes.of([half, two, host_request(10_000, 3 * GIB)], [2, 1, 7])
    cpu, host, cpu_rate, host_rate = rates(shapes, np.ones(3), [GPU, 2 * GPU])
    assert (cpu.tolist(), host.tolist()) == tuple(a.tolist() for a in appetite(shapes, np.ones(3), [GPU, 2 * GPU]))
    # 7 CPU-only pods of 10 cores for 3 GPUs of demand (2.5 on GPUs twice as big)
    assert cpu_rate.tolist() == pytest.approx([70_000 / 3, 70_000 / 2.5])
    assert host_rate.tolist() == pytest.approx([21 * GIB / 3, 21 * GIB / 2.5])
    assert rates(Shapes.of([half], [1]), np.ones(1), [GPU])[2].tolist() == [0.0]  # no CPU-only pods
