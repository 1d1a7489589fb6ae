"""The fragmentation measure: hand-computed cases, and growth = Frag(after) − Frag(before)."""

import dataclasses
import types

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from policy.fragmentation.cache import PartsCache
from policy.fragmentation.growth import after_parts, chosen_parts, growth_on, growth_per_gpu
from policy.fragmentation.measure import distinct_gpus, fragmentation, idle
from policy.fragmentation.pressure import ModelPressure
from policy.fragmentation.shapes import Shapes
from policy.names import BINPACK, MODE_CORE, MODE_MEMORY, UNLIMITED_PODS
from policy.node import NodeSpec
from policy.request import host_request, simple_request
from policy.state import ClusterState

GPU = 1000  # memory units per GPU: one unit = 1/1000 GPU, as in the milli mapping


def milli_node(name, gpus=2, cpu=32_000, model="", memory=2**36):
    return NodeSpec(name, MODE_MEMORY, gpus, GPU, 0, BINPACK, UNLIMITED_PODS, cpu=cpu, host_memory=memory,
                    model=model)


def state_of(*nodes, usage=()):
    state = ClusterState()
    for spec in nodes:
        state.set_node(spec)
    for name, gpu, amount in usage:
        state.add_usage(name, {gpu: amount}, {}, False)
    return state


def view_of(state, names=None):
    names = names or [n for n in state.names if n is not None]
    return state.view(state.rows(names))


SHARE = simple_request(500)
WHOLE = simple_request(GPU, whole_device=True)
TWO = simple_request(2 * GPU, gpu_count=2, whole_device=True)


def test_hand_computed_node():
    # GPU 0 idle, GPU 1 with 0.3 idle. 500 cannot use GPU 1 (0.3 stranded), a whole GPU neither (0.3),
    # two whole GPUs cannot run at all (all 1.3 stranded).
    state = state_of(milli_node("n"), usage=[("n", 1, 700)])
    shapes = Shapes.of([SHARE, WHOLE, TWO], [5, 3, 2])
    assert idle(view_of(state))[0, :2] == pytest.approx([1.0, 0.3])
    assert fragmentation(view_of(state), shapes)[0] == pytest.approx(0.5 * 0.3 + 0.3 * 0.3 + 0.2 * 1.3)


def test_a_shape_that_fits_every_idle_gpu_strands_nothing():
    state = state_of(milli_node("n"), usage=[("n", 1, 200)])
    assert fragmentation(view_of(state), Shapes.of([simple_request(100)], [1]))[0] == 0.0


def test_cpu_memory_and_model_make_a_shape_unable_to_run_anywhere_on_the_node():
    state = state_of(milli_node("n", cpu=8_000, model="G2"), usage=[("n", 0, 400)])
    state.add_host_usage("n", 4_000, 0)
    total = 1.6
    assert fragmentation(view_of(state), Shapes.of([simple_request(100, cpu=6_000)], [1]))[0] == pytest.approx(total)
    assert fragmentation(view_of(state), Shapes.of([simple_request(100, cpu=4_000)], [1]))[0] == 0.0
    big = simple_request(100, host_memory=2**37)
    assert fragmentation(view_of(state), Shapes.of([big], [1]))[0] == pytest.approx(total)
    t4_only = simple_request(100, models=frozenset({"T4"}))
    assert fragmentation(view_of(state), Shapes.of([t4_only], [1]))[0] == pytest.approx(total)
    g2_or_t4 = simple_request(100, models=frozenset({"T4", "G2"}))
    assert fragmentation(view_of(state), Shapes.of([g2_or_t4], [1]))[0] == 0.0


def test_pods_without_gpu_strand_only_when_they_cannot_run():
    state = state_of(milli_node("n", cpu=8_000), usage=[("n", 0, 400)])
    assert fragmentation(view_of(state), Shapes.of([host_request(8_000)], [1]))[0] == 0.0
    assert fragmentation(view_of(state), Shapes.of([host_request(9_000)], [1]))[0] == pytest.approx(1.6)


def test_unknown_cpu_never_blocks():
    state = state_of(milli_node("n", cpu=0))
    assert fragmentation(view_of(state), Shapes.of([simple_request(100, cpu=10**9)], [1]))[0] == 0.0


def test_core_mem_gpus_count_their_smaller_free_share():
    spec = NodeSpec("c", MODE_CORE, 1, 20, 100, BINPACK, 20)
    state = state_of(spec)
    state.add_usage("c", {0: 5}, {0: 50}, True)
    assert idle(view_of(state))[0, 0] == pytest.approx(0.5)
    shapes = Shapes.of([simple_request(4, 60)], [1])  # memory would fit, compute does not
    assert fragmentation(view_of(state), shapes)[0] == pytest.approx(0.5)
    assert fragmentation(view_of(state), Shapes.of([simple_request(4)], [1]))[0] == pytest.approx(0.5)  # wrong mode


def test_a_shape_the_popularity_ignores_changes_nothing():
    state = state_of(milli_node("n"), usage=[("n", 1, 700)])
    one = fragmentation(view_of(state), Shapes.of([SHARE], [1]))
    assert fragmentation(view_of(state), Shapes.of([SHARE, WHOLE], [1, 0])) == pytest.approx(one)


def test_stranded_is_the_idle_share_of_gpus_the_node_cpu_or_memory_shuts_every_fitting_gpu_shape_out_of():
    # GPU 0 has 0.53 free, GPU 1 is idle; 6 of 16 cores are free.
    state = state_of(milli_node("n", cpu=16_000), usage=[("n", 0, 470)])
    state.add_host_usage("n", 10_000, 0)
    view = view_of(state)

    def stranded(requests):
        shapes = Shapes.of(requests, [1] * len(requests))
        return fragmentation(view, shapes, stranded=True)[0] - fragmentation(view, shapes)[0]

    assert stranded([simple_request(470, cpu=8_000), simple_request(GPU, whole_device=True, cpu=8_000)]) \
        == pytest.approx(1.53)  # neither GPU can be used again
    assert stranded([simple_request(470, cpu=6_000)]) == 0.0  # the cores fit
    assert stranded([simple_request(470, cpu=8_000), simple_request(100, cpu=2_000)]) == 0.0  # a small pod fits both
    assert stranded([simple_request(470, cpu=8_000), simple_request(GPU, whole_device=True, cpu=2_000)]) \
        == pytest.approx(0.53)  # only GPU 0
    assert stranded([simple_request(600, cpu=8_000)]) == pytest.approx(1.0)  # GPU 0 fits no shape anyway
    assert stranded([simple_request(470, cpu=8_000), host_request(1_000)]) == pytest.approx(1.53)  # pods without GPU
    # do not use a GPU
    assert stranded([simple_request(470, host_memory=2**37)]) == pytest.approx(1.53)  # host memory too
    assert stranded([simple_request(470, cpu=8_000, models=frozenset({"T4"}))]) == 0.0  # never ran on this model


def test_model_pressure_is_the_scarcity_of_usable_idle_capacity_in_every_node_seen():
    state = state_of(milli_node("t4", model="T4"), milli_node("g2", gpus=6, model="G2"), usage=[("t4", 0, 500)])
    shapes = Shapes.of([SHARE, simple_request(100, models=frozenset({"T4"}))], [1, 1])
    labels = [None if g is None else "T4" for g in shapes.model_groups()]
    pressure = ModelPressure()
    pressure.see(view_of(state, ["t4"]))
    pressure.see(view_of(state, ["g2"]))  # the T4 node is remembered from the first view
    assert dict(zip(labels, pressure.of(shapes))) == pytest.approx({None: 1.0, "T4": 7.5 / 1.5})
    state.add_usage("t4", {1: 1000}, {}, False)
    pressure.see(view_of(state, ["t4"]))
    assert dict(zip(labels, pressure.of(shapes))) == pytest.approx({None: 1.0, "T4": 6.5 / 0.5})


def test_model_pressure_forgets_a_removed_nodes_row():
    state = state_of(milli_node("t4", model="T4"), milli_node("g2", gpus=6, model="G2"), usage=[("t4", 0, 500)])
    shapes = Shapes.of([SHARE, simple_request(100, models=frozenset({"T4"}))], [1, 1])
    labels = [None if g is None else "T4" for g in shapes.model_groups()]
    pressure = ModelPressure()
    pressure.see(view_of(state, ["t4", "g2"]))
    pressure.forget(state.index["g2"])  # only the T4 node's idle share is left: nothing scarcer than it
    assert dict(zip(labels, pressure.of(shapes))) == pytest.approx({None: 1.0, "T4": 1.0})
    pressure.forget(99)  # a row never seen: nothing to do


def test_distinct_gpus_keeps_one_gpu_per_state():
    state = state_of(milli_node("n", gpus=4), usage=[("n", 1, 300), ("n", 3, 300)])
    assert distinct_gpus(view_of(state))[0, :4].tolist() == [True, True, False, False]


@settings(max_examples=100, deadline=None)
@given(st.lists(st.lists(st.tuples(st.sampled_from([0, 1, 2**40]), st.integers(0, 2), st.integers(0, 2),
                                   st.booleans()), min_size=6, max_size=6), min_size=1, max_size=4))
def test_distinct_gpus_marks_the_first_gpu_of_each_state_in_each_node(rows):
    # usage values up to 2**40 make the packed state inexact, so the field-by-field path runs too
    n = len(rows)
    columns = [np.array([[gpu[f] for gpu in row] for row in rows]) for f in range(4)]
    view = types.SimpleNamespace(mem_used=columns[0], core_used=columns[1], pods=columns[2],
                                 healthy=columns[3].astype(bool))
    expected = [[row[g] not in row[:g] for g in range(6)] for row in rows]
    assert distinct_gpus(view).tolist() == expected and len(expected) == n


# -- growth equals the difference of the measure, on random clusters ------------------------------------------

@st.composite
def clusters(draw):
    state = ClusterState()
    for i in range(draw(st.integers(1, 4))):
        gpus = draw(st.integers(1, 4))
        spec = milli_node(f"n{i}", gpus, cpu=16_000, model=draw(st.sampled_from(["T4", "G2"])))
        if draw(st.booleans()):
            spec = dataclasses.replace(spec, unhealthy=frozenset({0}))
        state.set_node(spec)
        for _ in range(draw(st.integers(0, 5))):
            gpu, amount = draw(st.integers(0, gpus - 1)), draw(st.sampled_from([100, 250, 500, 1000]))
            if state.array("mem_used")[state.index[spec.name], gpu] + amount <= GPU:
                state.add_usage(spec.name, {gpu: amount}, {}, False)
        state.add_host_usage(spec.name, draw(st.integers(0, 16_000)), 0)
    return state


MIX = Shapes.of([simple_request(250, cpu=4_000), simple_request(500, cpu=8_000, models=frozenset({"T4"})),
                 simple_request(GPU, whole_device=True, cpu=2_000), TWO, host_request(6_000)], [3, 2, 4, 1, 2])


def _frag_after(state, name, gpus, request, stranded=False):
    for g in gpus:
        state.add_usage(name, {g: request.memory_per_gpu}, {}, False)
    state.add_host_usage(name, request.cpu, 0)
    after = fragmentation(view_of(state, [name]), MIX, stranded=stranded)[0]
    for g in gpus:
        state.add_usage(name, {g: request.memory_per_gpu}, {}, False, -1)
    state.add_host_usage(name, request.cpu, 0, -1)
    return after


@pytest.mark.parametrize("stranded", [False, True])
@settings(max_examples=40)
@given(clusters(), st.sampled_from([simple_request(250, cpu=4_000), simple_request(500, cpu=1_000)]))
def test_growth_per_gpu_is_the_difference_of_the_measure(stranded, state, request):
    view = view_of(state)
    candidates = view.healthy & (view.mem_total - view.mem_used >= request.memory_per_gpu)
    growth = growth_per_gpu(view, MIX, request, candidates, stranded=stranded)
    before = fragmentation(view, MIX, stranded=stranded)
    names = [n for n in state.names if n is not None]
    for i, name in enumerate(names):
        for g in range(view.healthy.shape[1]):
            if candidates[i, g]:
                after = _frag_after(state, name, [g], request, stranded)
                assert growth[i, g] == pytest.approx(after - before[i], abs=1e-9)
            else:
                assert growth[i, g] == np.inf


@pytest.mark.parametrize("stranded", [False, True])
@settings(max_examples=30)
@given(clusters())
def test_growth_on_chosen_gpus_and_for_pods_without_gpu(stranded, state):
    view = view_of(state)
    names = [n for n in state.names if n is not None]
    before = fragmentation(view, MIX, stranded=stranded)
    idle_gpus = view.healthy & (view.mem_used == 0)
    chosen = np.array([np.flatnonzero(row)[:2].tolist() if row.sum() >= 2 else [-1, -1] for row in idle_gpus])
    growth = growth_on(view, MIX, TWO, chosen, stranded=stranded)
    cpu_only = growth_on(view, MIX, host_request(6_000), np.zeros((len(view), 0), dtype=np.int64), stranded=stranded)
    for i, name in enumerate(names):
        if chosen[i, 0] >= 0:
            after = _frag_after(state, name, chosen[i], TWO, stranded)
            assert growth[i] == pytest.approx(after - before[i], abs=1e-9)
        after = _frag_after(state, name, [], host_request(6_000), stranded)
        assert cpu_only[i] == pytest.approx(after - before[i], abs=1e-9)


@settings(max_examples=20)
@given(clusters(), st.lists(st.tuples(st.integers(0, 3), st.integers(0, 3), st.sampled_from([100, 500])),
                            max_size=6))
def test_the_cache_answers_as_a_fresh_computation_after_any_changes(state, changes):
    cache = PartsCache()
    names = [n for n in state.names if n is not None]
    for node, gpu, amount in changes:
        name = names[node % len(names)]
        assert fragmentation(view_of(state), MIX, cache) == pytest.approx(fragmentation(view_of(state), MIX))
        assert fragmentation(view_of(state), MIX, cache, True) == pytest.approx(fragmentation(view_of(state), MIX,
                                                                                             None, True))
        if gpu < state.specs[name].gpu_count and state.array("mem_used")[state.index[name], gpu] + amount <= GPU:
            state.add_usage(name, {gpu: amount}, {}, False)
    assert fragmentation(view_of(state), MIX, cache) == pytest.approx(fragmentation(view_of(state), MIX))


@settings(max_examples=20)
@given(clusters(), st.lists(st.tuples(st.integers(0, 3), st.integers(0, 3), st.sampled_from([100, 500]),
                                      st.sampled_from([0, 1])), max_size=8), st.sampled_from([0, 6_000, 1 << 20]))
def test_the_kept_parts_with_a_pod_equal_a_fresh_computation_after_any_changes(state, changes, budget):
    cache = PartsCache(after_bytes=budget)  # 0: only the last demand is kept
    names = [n for n in state.names if n is not None]
    demands = [simple_request(250, cpu=4_000), simple_request(500, cpu=1_000)]
    for node, gpu, amount, which in changes:
        name = names[node % len(names)]
        view = view_of(state)
        rows, gpus = np.nonzero(view.healthy)
        if which:  # the parts as they are kept first: the parts with the pod are worked out from them
            cache.parts(view, MIX.classes)
        kept = cache.after(view, MIX.classes, demands[which], rows, gpus)
        for got, fresh in zip(kept, after_parts(view, MIX.classes, demands[which], rows, gpus)):
            assert np.array_equal(got, fresh)
        # a two-GPU pod on GPUs that move with the changes: the rows are kept for the GPUs they were worked out on
        on = (np.argsort(view.mem_used + (np.arange(view.healthy.shape[1]) * (amount + which)) % 3, axis=1)[:, :2]
              if view.healthy.shape[1] >= 2 else np.full((len(view), 2), -1))
        kept = cache.chosen(view, MIX.classes, TWO, on)
        for got, fresh in zip(kept[:4] + (kept[4][np.arange(len(view)), :],), chosen_parts(view, MIX.classes, TWO, on)):
            assert np.array_equal(got, fresh)
        assert cache.kept_bytes <= budget
        if gpu < state.specs[name].gpu_count and state.array("mem_used")[state.index[name], gpu] + amount <= GPU:
            state.add_usage(name, {gpu: amount}, {}, False)
