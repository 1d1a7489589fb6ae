"""The paper's protocol: arrival sequence (top-up or drop to 130 %), arrived workload, the metric."""

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from benchmarks import protocol
from benchmarks.trace import Pods


def pods_of(demands) -> Pods:
    demands = np.asarray(demands, dtype=np.int64)
    n = len(demands)
    whole = demands >= 1000
    return Pods([f"p{i}" for i in range(n)], np.full(n, 1000), np.full(n, 1024),
                np.where(demands == 0, 0, np.where(whole, demands // 1000, 1)),
                np.where(whole, 1000, demands), np.array([""] * n, dtype=object))


@given(st.lists(st.sampled_from([0, 100, 500, 1000, 2000]), min_size=1, max_size=30).filter(lambda d: sum(d) > 0),
       st.integers(1, 20), st.integers(0, 2**16))
def test_topped_up_or_dropped_to_just_under_the_target(demands, gpus, seed):
    pods = pods_of(demands)
    capacity = 1000 * gpus
    order = protocol.arrivals(pods, capacity, seed)
    total = int(pods.demand[order].sum())
    assert total <= protocol.RATIO * capacity
    if pods.demand.sum() < protocol.RATIO * capacity:
        assert sorted(order[: len(pods)]) == list(range(len(pods)))  # every pod once, then the draws
    else:
        assert len(set(order.tolist())) == len(order)  # only drops, no repeats


def test_top_up_stops_before_the_draw_that_would_pass_the_target():
    pods = pods_of([1000])
    order = protocol.arrivals(pods, 10_000, seed=1)
    assert len(order) == 13  # 13 GPUs = 130 % of 10; a 14th would pass it


def test_drop_removes_random_pods_until_at_or_below_the_target():
    pods = pods_of([1000] * 20)
    order = protocol.arrivals(pods, 10_000, seed=3)
    assert len(order) == 13 and len(set(order.tolist())) == 13


def test_same_seed_same_sequence_other_seed_other_order():
    pods = pods_of([100 * (i % 10 + 1) for i in range(50)])
    a, b = protocol.arrivals(pods, 20_000, 42), protocol.arrivals(pods, 20_000, 42)
    assert np.array_equal(a, b)
    assert not np.array_equal(a, protocol.arrivals(pods, 20_000, 43))


def test_metric_counts_failed_pods_as_arrived_and_reads_at_the_level():
    demand = np.array([500, 1000, 500, 1000, 1000])  # capacity 3000: 100 % after the 4th pod
    placed = np.array([True, False, True, True, True])
    assert protocol.arrived(demand, 3000).tolist() == pytest.approx([1 / 6, 0.5, 2 / 3, 1.0, 4 / 3])
    assert protocol.unallocated_at(demand, placed, 3000) == pytest.approx(100 - 100 * 2000 / 3000)
    assert protocol.unallocated_at(demand, placed, 3000, level=0.5) == pytest.approx(100 - 100 * 500 / 3000)
    assert protocol.unallocated(np.where(placed, demand, 0), 3000)[-1] == pytest.approx(100 - 100 * 3000 / 3000)


def test_a_pod_list_without_gpu_demand_is_refused():
    with pytest.raises(ValueError):
        protocol.arrivals(pods_of([0, 0]), 1000, 1)
