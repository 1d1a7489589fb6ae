import types

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from helpers import build, raw_and_scores
from policy.fragmentation.measure import fragmentation
from policy.names import BINPACK, MODE_MEMORY, UNLIMITED_PODS
from policy.node import NodeSpec
from policy.placement import evaluate
from policy.request import host_request, simple_request
from policy.scoring import make_strategy
from policy.scoring.fragmentation import Fragmentation


def node(name, gpus=2, cpu=32_000):
    return NodeSpec(name, MODE_MEMORY, gpus, 1000, 0, BINPACK, UNLIMITED_PODS, cpu=cpu, host_memory=2**36)


def learned(*requests):
    strategy = Fragmentation()
    for r in requests:
        strategy.observe(r)
    return strategy


WHOLE = simple_request(1000, whole_device=True)


def test_score_is_minus_the_growth_of_the_measure_then_node_fullness():
    state = build({"gap": (node("gap"), [(0, 810, 0)]), "idle": (node("idle"), [])})
    strategy = learned(simple_request(190), WHOLE, WHOLE)
    raw, scores = raw_and_scores(state, simple_request(190), strategy)
    shapes = strategy.mix.shapes()
    names = ["gap", "idle"]
    before = fragmentation(state.view(state.rows(names)), shapes)
    # on "gap" the 190 fills GPU 0 exactly: the 0.19 that the whole-GPU pods could not use is gone
    state.add_usage("gap", {0: 190}, {}, False)
    after = fragmentation(state.view(state.rows(["gap"])), shapes)[0]
    assert raw["gap"] == pytest.approx(-(after - before[0]), abs=1e-6)
    assert scores == {"gap": 10, "idle": 0}


def test_single_gpu_pods_take_the_gpu_that_grows_the_measure_least():
    state = build({"n": (node("n", gpus=3), [(0, 500, 0), (1, 810, 0)])})
    strategy = learned(simple_request(190), WHOLE, simple_request(500))
    result = evaluate(state.view(state.rows(["n"])), simple_request(190), strategy)
    assert result.gpus.tolist() == [[1]]  # the 0.19 gap, not the 0.5 a 500 could still use


def test_equal_growth_goes_to_the_fuller_node():
    state = build({"a": (node("a", gpus=4), [(0, 1000, 0)]), "b": (node("b", gpus=4), []),
                   "c": (node("c", gpus=4), [(0, 1000, 0), (1, 1000, 0)])})
    raw, scores = raw_and_scores(state, WHOLE, learned(WHOLE))
    assert raw["c"] > raw["a"] > raw["b"] and raw["c"] - raw["b"] < 2**-20  # below the growths' resolution
    assert scores["c"] == 10


def test_equal_growth_and_gpu_fullness_go_to_the_node_with_the_fuller_host():
    # Identical GPUs, so the whole-GPU pod grows the measure alike on both; "packed" has less CPU and memory left
    # once the pod is on it. Left as a tie, kube-scheduler's LeastAllocated would pick "loose".
    state = build({"packed": (node("packed", gpus=4), [(0, 1000, 0)]),
                   "loose": (node("loose", gpus=4), [(0, 1000, 0)])})
    state.add_host_usage("packed", 16_000, 2**34)
    raw, scores = raw_and_scores(state, WHOLE, learned(WHOLE))
    assert raw["packed"] > raw["loose"] and scores == {"packed": 10, "loose": 0}
    blind = Fragmentation(starved=False)  # nothing keeps the CPU idle GPUs need: packing the host would strand them
    blind.observe(WHOLE)
    raw, _ = raw_and_scores(state, WHOLE, blind)
    assert raw["packed"] == raw["loose"]


def test_gpu_fullness_orders_before_the_host():
    state = build({"gpus": (node("gpus", gpus=4), [(0, 1000, 0), (1, 1000, 0)]),
                   "host": (node("host", gpus=4), [(0, 1000, 0)])})
    state.add_host_usage("host", 30_000, 2**35)
    raw, _ = raw_and_scores(state, WHOLE, learned(WHOLE))
    assert raw["gpus"] > raw["host"]


def test_cpu_hungry_pods_keep_away_from_nodes_whose_gpus_they_would_strand():
    # "tight" would keep 4 cores for its idle GPU, which every learned shape needs 8 of.
    state = build({"tight": (node("tight", cpu=16_000), []), "roomy": (node("roomy", cpu=64_000), [])})
    strategy = learned(simple_request(1000, whole_device=True, cpu=8_000), host_request(12_000))
    raw, _ = raw_and_scores(state, host_request(12_000), strategy)
    assert raw["roomy"] > raw["tight"]


def test_pods_keep_away_from_using_up_the_cpu_a_half_used_gpu_needs():
    # "lone" holds a 470 pod on GPU 0 and 14 of its 24 cores are free; a whole-GPU pod with 11 cores would leave 3,
    # and no learned pod that fits GPU 0's 0.53 could use it again. On "fresh" it only stops a two-GPU pod.
    half = simple_request(470, cpu=10_000)
    whole = simple_request(1000, whole_device=True, cpu=11_000)
    two = simple_request(2000, gpu_count=2, whole_device=True, cpu=4_000)
    state = build({"lone": (node("lone", cpu=24_000), [(0, 470, 0)]), "fresh": (node("fresh"), [])})
    state.add_host_usage("lone", 10_000, 0)
    mix = [half] + [whole] * 8 + [two]
    fgd = Fragmentation(stranded=False)
    for r in mix:
        fgd.observe(r)
    raw, _ = raw_and_scores(state, whole, fgd)
    assert raw["lone"] > raw["fresh"]  # FGD: 0.53 × p(470) is less than 1 × p(two GPUs)
    raw, scores = raw_and_scores(state, whole, learned(*mix))
    assert raw["fresh"] > raw["lone"] and scores["fresh"] == 10  # the stranded 0.53 counts in full


def test_cpu_only_pods_leave_the_cpu_idle_gpus_will_need():
    # Every learned GPU pod takes one GPU and 8 cores. "hungry" has 3 idle GPUs and 24 free cores: an 8-core
    # CPU-only pod changes no shape's fit there, but leaves CPU for only two of them; "roomy" has CPU to spare.
    gpu_pod = simple_request(1000, whole_device=True, cpu=8_000)
    state = build({"hungry": (node("hungry", gpus=4, cpu=32_000), [(0, 1000, 0)]),
                   "roomy": (node("roomy", gpus=2, cpu=104_000), [])})
    state.add_host_usage("hungry", 8_000, 0)
    strategy = learned(gpu_pod, gpu_pod, host_request(8_000))
    raw, scores = raw_and_scores(state, host_request(8_000), strategy)
    assert raw["hungry"] == pytest.approx(-1.0 + 1e-8 * 0.25, abs=1e-6)  # one idle GPU left unfed
    assert scores["roomy"] == 10
    raw, _ = raw_and_scores(state, host_request(8_000), Fragmentation(starved=False))
    assert raw["hungry"] > raw["roomy"]  # without it the fuller node wins the tie


def test_multi_gpu_pods_use_the_placement_label_choice():
    state = build({"n": (node("n", gpus=4), [(2, 300, 0)])})
    two = simple_request(2000, gpu_count=2, whole_device=True)
    result = evaluate(state.view(state.rows(["n"])), two, learned(two))
    assert result.gpus.tolist() == [[0, 1]]


def test_before_any_pod_is_seen_the_pod_itself_is_the_mix():
    state = build({"a": (node("a"), [(0, 500, 0)]), "b": (node("b"), [])})
    fresh = make_strategy("fragmentation")
    raw, _ = raw_and_scores(state, simple_request(500), fresh)
    assert raw == raw_and_scores(state, simple_request(500), learned(simple_request(500)))[0]
    assert fresh.mix.shapes() is None  # scoring does not learn


def test_same_decisions_with_or_without_the_per_node_cache():
    usage = [(0, 300, 0), (1, 810, 0)]
    state = build({f"n{i}": (node(f"n{i}", gpus=3), usage[: i % 3]) for i in range(6)})
    mix = [simple_request(190), WHOLE, simple_request(300), host_request(4_000)]
    view = state.view(state.rows([f"n{i}" for i in range(6)]))
    a, b = learned(*mix), learned(*mix)
    for _ in range(2):  # the second pass answers from the cache
        first, second = evaluate(view, simple_request(300), a), evaluate(view, simple_request(300), b)
        assert np.array_equal(first.raw, second.raw) and np.array_equal(first.gpus, second.gpus)


@settings(max_examples=50, deadline=None)
@given(st.lists(st.lists(st.sampled_from([0, 1000, 16 * 1024, 24 * 1024, 80 * 1024]), min_size=1, max_size=5),
                min_size=1, max_size=4))
def test_appetite_per_node_follows_the_gpu_sizes_of_each_view(views):
    from policy.fragmentation.starvation import appetite
    strategy = learned(simple_request(250, cpu=4_000), simple_request(1000, cpu=16_000, host_memory=2**34))
    shapes = strategy.mix.shapes()
    per_pod = 1.0 / np.maximum(shapes.count, 1)
    for sizes in views:  # sizes seen so far are remembered; a new one joins them
        view = types.SimpleNamespace(mem_total=np.array(sizes, dtype=np.float64)[:, None].repeat(2, axis=1))
        cpu, host = strategy._appetite(view)
        memory, node = np.unique(view.mem_total[:, 0], return_inverse=True)
        want_cpu, want_host = appetite(shapes, per_pod, memory)
        assert cpu.tolist() == pytest.approx(want_cpu[node.reshape(-1)].tolist())
        assert host.tolist() == pytest.approx(want_host[node.reshape(-1)].tolist())


class _EveryRow:
    """NodeStates' interface, every row its own state: the strategy then works on every node."""

    def alike(self, view):
        return np.arange(len(view)), np.arange(len(view))


@settings(max_examples=40, deadline=None)
@given(st.lists(st.lists(st.sampled_from([0, 190, 500, 1000]), min_size=2, max_size=2), min_size=1, max_size=8),
       st.lists(st.sampled_from([0, 2_000, 30_000]), min_size=8, max_size=8),
       st.sampled_from([simple_request(190), simple_request(500, cpu=4_000), simple_request(1000, gpu_count=2),
                        host_request(8_000)]))
def test_working_once_per_node_state_answers_as_working_on_every_node(usage, cpu, request):
    nodes = {f"n{i}": (node(f"n{i}"), [(g, m, 0) for g, m in enumerate(gpus) if m]) for i, gpus in enumerate(usage)}
    state = build(nodes)
    for i, name in enumerate(nodes):
        state.add_host_usage(name, cpu[i], 0)
    mix = [simple_request(190, cpu=2_000), simple_request(500, cpu=4_000), WHOLE, simple_request(1000, gpu_count=2)]
    once, every = learned(*mix), learned(*mix)
    every._states = _EveryRow()
    view = state.view(state.rows(list(nodes)))
    a, b = evaluate(view, request, once), evaluate(view, request, every)
    assert a.reason.tolist() == b.reason.tolist() and a.gpus.tolist() == b.gpus.tolist()
    assert np.array_equal(a.raw, b.raw)
