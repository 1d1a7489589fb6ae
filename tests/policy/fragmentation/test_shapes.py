"""Shapes and the popularity learned online."""

import types

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from policy.fragmentation.shapes import Shapes, ShapeMix
from policy.request import host_request, simple_request

REQUESTS = [simple_request(250, cpu=4_000), simple_request(500, cpu=8_000, models=frozenset({"T4"})),
            simple_request(1000, whole_device=True, cpu=2_000, host_memory=2**30),
            simple_request(2000, gpu_count=2, whole_device=True), host_request(6_000)]


def tables_equal(a: Shapes, b: Shapes) -> bool:
    (cpu_a, mem_a, t_a), (cpu_b, mem_b, t_b) = a.host_table, b.host_table
    return (cpu_a == cpu_b).all() and (mem_a == mem_b).all() and np.allclose(t_a, t_b)


@given(st.lists(st.tuples(st.integers(0, len(REQUESTS) - 1), st.floats(0.1, 10)), max_size=12))
def test_updating_in_place_equals_rebuilding(updates):
    weights = np.ones(len(REQUESTS))
    shapes = Shapes.of(REQUESTS, weights)
    shapes.host_table  # noqa: B018 - build, so plus() must update it
    for i, w in updates:
        shapes = shapes.plus(i, w)
        weights[i] += w
    assert tables_equal(shapes, Shapes.of(REQUESTS, weights))
    assert shapes.weight == pytest.approx(weights)


def test_table_counts_the_shapes_a_node_lets_run():
    shapes = Shapes.of(REQUESTS[:1] + [simple_request(250, cpu=8_000)], [1, 3])
    cpu, memory, table = shapes.host_table
    assert cpu.tolist() == [4_000, 8_000]
    # one class (250 milli), one model group; ≤ 4 cores: 1, ≤ 8 cores: 1 + 3
    assert table[0, :, -1, 0].tolist() == [0, 1, 4]


def test_mix_counts_a_pod_once_per_gpu_it_asks_for():
    mix = ShapeMix()
    for request in (REQUESTS[0], REQUESTS[0], REQUESTS[3], host_request(1_000)):
        mix.observe(request)
    shapes = mix.shapes()
    assert sorted(shapes.weight.tolist()) == [1, 2, 2]
    pods = ShapeMix(weighting="pods")
    for request in (REQUESTS[0], REQUESTS[3]):
        pods.observe(request)
    assert pods.shapes().weight.tolist() == [1, 1]


def test_mix_is_empty_until_it_sees_a_pod_and_can_forget_cpu():
    mix = ShapeMix(host_aware=False)
    assert mix.shapes() is None
    assert mix.alone(REQUESTS[0]).cpu.tolist() == [0]
    mix.observe(REQUESTS[0])
    mix.observe(simple_request(250, cpu=9_000))  # the same shape once CPU is forgotten
    assert len(mix) == 1 and mix.shapes().weight.tolist() == [2]


def test_mix_keeps_at_most_max_shapes_dropping_the_least_popular():
    mix = ShapeMix(max_shapes=2)
    for request in (REQUESTS[0], REQUESTS[0], REQUESTS[1], REQUESTS[2]):
        mix.observe(request)
    shapes = mix.shapes()
    assert len(shapes) == 2 and set(shapes.memory.tolist()) == {250, 1000}


def test_half_life_makes_recent_pods_weigh_more():
    mix = ShapeMix(half_life=1)
    mix.observe(REQUESTS[0])
    mix.observe(REQUESTS[1])
    first, second = mix.shapes().weight
    assert second == pytest.approx(2 * first)


@pytest.mark.parametrize("bad", [dict(max_shapes=0), dict(half_life=-1), dict(weighting="gpu")])
def test_bad_options_are_refused(bad):
    with pytest.raises(ValueError):
        ShapeMix(**bad)


def _rows_by_hand(shapes, model):
    return [None if codes is None else np.flatnonzero(np.isin(model, codes)).tolist() for codes in shapes.model_groups()]


@given(st.lists(st.lists(st.sampled_from(["T4", "A10", "V100", ""]), min_size=1, max_size=6), min_size=1, max_size=5))
def test_model_rows_follow_each_view_asked_about(views):
    from policy.node import model_code
    shapes = Shapes.of([simple_request(250), simple_request(500, models=frozenset({"T4"})),
                        simple_request(500, models=frozenset({"T4", "A10"}))], [1, 1, 1])
    for models in views:  # one Shapes asked about view after view (it remembers the last one's answer)
        view = types.SimpleNamespace(model=np.array([model_code(m) for m in models], dtype=np.int64))
        for _ in range(2):
            rows = shapes.model_rows(view)
            assert [None if r is None else r.tolist() for r in rows] == _rows_by_hand(shapes, view.model)
            member, index = shapes.model_members(view)
            for g, expected in enumerate(rows):
                uses = member[index, g]
                assert uses.tolist() == ([True] * len(models) if expected is None
                                         else np.isin(np.arange(len(models)), expected).tolist())


@given(st.lists(st.integers(0, 11), min_size=1, max_size=30), st.integers(3, 8))
def test_a_mix_asked_between_pods_keeps_the_tables_a_rebuild_would_give(picks, max_shapes):
    requests = [simple_request(memory, cpu=cpu, models=models) for memory in (250, 500)
                for cpu in (2_000, 4_000) for models in (None, frozenset({"T4"}), frozenset({"T4", "A10"}))]
    mix = ShapeMix(max_shapes=max_shapes)
    for pick in picks:  # new shapes join the built table in place when its axes have their values
        mix.observe(requests[pick])
        shapes = mix.shapes()
        shapes.under_pressure(np.full(len(shapes.model_groups()), 2.0))  # builds the table, as a decision does
        rebuilt = Shapes.from_rows(list(mix._rows), mix._weights.copy())
        assert tables_equal(shapes, rebuilt) and np.array_equal(shapes.host_table[2], rebuilt.host_table[2])
        assert [c.tolist() for c in shapes.classes] == [c.tolist() for c in rebuilt.classes]
        assert shapes._classes[1].tolist() == rebuilt._classes[1].tolist()
        assert [None if c is None else c.tolist() for c in shapes.model_groups()] == \
               [None if c is None else c.tolist() for c in rebuilt.model_groups()]
        assert shapes._groups[1].tolist() == rebuilt._groups[1].tolist()
