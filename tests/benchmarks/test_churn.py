"""The replay with churn: capacity never exceeded, departures free what arrivals took, the queue's order,
retries only where room grew, and the defragmentation hook's budget."""

import numpy as np
import pytest
from hypothesis import given, strategies as st

import churn_cases as C
from benchmarks import churn as churn_module
from benchmarks.churn import Defrag, Move, churn
from benchmarks.churn_stats import step_at
from extender.ledger.ledger import Ledger

GPU_POLICIES = ["binpack", "fragmentation"]


def assert_clean(run):
    assert run.audit == [] and run.consistent


@pytest.mark.parametrize("policy", GPU_POLICIES)
@given(seed=st.integers(0, 2**16), count=st.integers(1, 40))
def test_no_gpu_over_capacity_and_every_departure_frees_what_its_arrival_took(policy, seed, count):
    rng = np.random.default_rng(seed)
    run = churn(C.nodes([1, 2, 4]), C.random_work(rng, count), policy, seed, audit=True)
    assert_clean(run)
    ledger = run.extra["ledger"]
    assert ledger.allocations() == []  # everyone left: nothing is held
    for field in ("mem_used", "core_used", "pods", "cpu_used", "host_mem_used"):
        assert not ledger.state.array(field).any()
    assert run.allocated[-1] == 0 and run.waiting[-1] == 0
    assert (run.allocated <= run.capacity).all()


def test_the_audit_sees_a_departure_that_frees_nothing(monkeypatch):
    monkeypatch.setattr(Ledger, "forget_pod", lambda self, uid: None)
    run = churn(C.nodes([1]), C.work([(0, 10, 1, 500, 0)]), "binpack", 1, audit=True)
    assert run.audit and "freed other than it held" in run.audit[0]


def test_waiting_pods_are_placed_by_priority_then_age():
    work = C.work([(0, 10, 1, 1000, 0),  # holds the only GPU until t=10
                   (1, 30, 1, 1000, 0),  # low priority, the oldest waiting
                   (2, 20, 1, 1000, 2),  # high priority
                   (3, 40, 1, 1000, 2)])  # high priority, younger
    run = churn(C.nodes([1]), work, "binpack", 0, audit=True)
    assert_clean(run)
    # t=10: the GPU goes to the older high-priority pod; t=20: to the other high-priority one;
    # the low-priority pod is deleted at t=30 still waiting
    assert run.placed_at.tolist()[2:] == [10.0, 20.0] and run.placed_at[0] == 0.0 and np.isnan(run.placed_at[1])


def test_at_equal_priority_the_oldest_goes_first():
    work = C.work([(0, 10, 1, 1000, 1), (1, 100, 1, 1000, 1), (2, 100, 1, 1000, 1)])
    run = churn(C.nodes([1]), work, "binpack", 0)
    # the GPU is held by the older one until both leave at t=100: the younger is deleted still waiting
    assert run.placed_at[1] == 10.0 and np.isnan(run.placed_at[2])


def test_a_pod_deleted_while_waiting_is_never_placed_and_leaves_the_queue():
    run = churn(C.nodes([1]), C.work([(0, 50, 1, 1000, 0), (1, 20, 1, 1000, 2)]), "binpack", 0)
    assert np.isnan(run.placed_at[1]) and run.waiting.tolist() == [0, 1000, 0, 0]


def test_a_share_pod_takes_the_room_a_whole_gpu_pod_cannot_use():
    work = C.work([(0, 10, 1, 600, 0), (1, 100, 1, 1000, 2), (2, 100, 1, 300, 0), (10, 100, 1, 400, 0)])
    run = churn(C.nodes([1]), work, "binpack", 0)
    # the whole-GPU pod waits from t=1; the 300 share fits at once beside the 600; at t=10 the 600 leaves,
    # the GPU is not idle (300 on it), so the 400 arriving then goes beside the 300
    assert run.placed_at.tolist()[2:] == [2.0, 10.0] and np.isnan(run.placed_at[1])


class EveryNode(churn_module._Replay):
    """The reference: on every departure, every waiting pod retried on every node."""

    def retry(self, node, now):
        for j in self.queue.ordered():
            if self.place(j, now, new=False):
                self.queue.remove(j)
                self.waiting -= int(self.demand[j])


@pytest.mark.parametrize("policy", GPU_POLICIES)
@given(seed=st.integers(0, 2**16), count=st.integers(1, 40))
def test_retrying_only_where_room_grew_places_as_retrying_everywhere(policy, seed, count):
    work = C.random_work(np.random.default_rng(seed), count, horizon=300.0)
    nodes = C.nodes([1, 2, 2], hosts=[(8_000, 65_536), (16_000, 65_536), (4_000, 16_384)])
    fast = churn(nodes, work, policy, seed)
    with pytest.MonkeyPatch.context() as m:
        m.setattr(churn_module, "_Replay", EveryNode)
        slow = churn(nodes, work, policy, seed)
    assert np.array_equal(fast.placed_at, slow.placed_at, equal_nan=True)
    assert np.array_equal(fast.extra["node"], slow.extra["node"])


def never_called(*_):
    raise AssertionError("a budget of 0 must never ask the planner")


@given(seed=st.integers(0, 2**16))
def test_a_move_budget_of_zero_is_plain_fragmentation(seed):
    work = C.random_work(np.random.default_rng(seed), 30, horizon=300.0)
    nodes = C.nodes([1, 2])
    plain = churn(nodes, work, "fragmentation", seed)
    zero = churn(nodes, work, "fragmentation", seed, defrag=Defrag(never_called, per_hour=0, every=10.0))
    assert np.array_equal(plain.placed_at, zero.placed_at, equal_nan=True)
    assert np.array_equal(step_at(plain.t, plain.allocated, plain.t), step_at(zero.t, zero.allocated, plain.t))
    assert zero.moves == [] and zero.steps == []
    assert np.array_equal(plain.extra["node"], zero.extra["node"])


@pytest.mark.parametrize("per_hour", [1, 3, 7])
@given(seed=st.integers(0, 2**16))
def test_moves_never_exceed_the_hourly_budget(per_hour, seed):
    rng = np.random.default_rng(seed)
    work = C.random_work(rng, 40, horizon=4 * 3600.0)
    run = churn(C.nodes([1, 2, 4]), work, "fragmentation", seed, audit=True,
                defrag=Defrag(C.shuffling_planner(rng), per_hour=per_hour, every=600.0))
    assert_clean(run)
    times = np.array([m[0] for m in run.moves])
    for t in times:  # every hour that ends at a move
        assert ((times > t - 3600.0) & (times <= t)).sum() <= per_hour
    assert all(allowed <= per_hour and applied <= allowed for _, allowed, _, applied, _ in run.steps)


def test_the_budget_is_spent_when_a_planner_asks_for_more():
    # three share pods to shuffle; a three-GPU pod waits all along (no node has three GPUs)
    work = C.work([(0, 10_000, 1, 300, 0), (0, 10_000, 1, 300, 0), (0, 10_000, 1, 300, 0),
                   (5, 10_000, 3, 1000, 0)])
    run = churn(C.nodes([2, 2]), work, "binpack", 0, audit=True,
                defrag=Defrag(C.shuffling_planner(np.random.default_rng(0)), per_hour=2, every=60.0))
    assert_clean(run)
    assert [m[0] for m in run.moves] == [60.0, 60.0, 3660.0, 3660.0, 7260.0, 7260.0]


def other_node(allocation):
    return "n-1" if allocation.node == "n-0" else "n-0"


def test_a_move_makes_room_and_the_waiting_pod_takes_it():
    # pod 0 (500) and a filler (500) fill one GPU, so pod 2 (400) goes to the other node's; the filler
    # leaves and a whole-GPU pod waits though 1100 milli are free
    work = C.work([(0, 1000, 1, 500, 0), (0, 0.5, 1, 500, 0), (0.2, 1000, 1, 400, 0), (1, 1000, 1, 1000, 2)])

    def planner(ledger, held, waiting, max_moves):
        assert [w.uid for w in waiting] == ["p3-3"] and max_moves == 6
        assert sorted(h.uid for h in held) == ["p0-0", "p2-2"] and waiting[0].request.gpu_count == 1
        (pod,) = [a for a in ledger.allocations() if a.pod.uid == "p2-2"]
        return [Move(pod.pod.uid, other_node(pod), (0,))]

    run = churn(C.nodes([1, 1]), work, "binpack", 0, audit=True, defrag=Defrag(planner, per_hour=6, every=30.0))
    assert_clean(run)
    assert run.placed_at[3] == 30.0 and len(run.moves) == 1 and run.moves[0][:2] == (30.0, 2)
    assert run.steps == [(30.0, 6, 1, 1, 1)] and run.moves[0][2] != run.moves[0][3]
    assert step_at(run.t, run.allocated, [30.0]).tolist() == [1900]


def test_a_move_that_does_not_fit_is_refused_and_changes_nothing():
    work = C.work([(0, 1000, 1, 700, 0), (0, 1000, 1, 400, 0), (1, 1000, 1, 1000, 2)])

    seen = []

    def planner(ledger, held, waiting, max_moves):
        used = ledger.state.array("mem_used")[:2, 0].tolist()
        seen.append(({a.pod.uid: (a.node, a.memory_per_gpu) for a in ledger.allocations()}, used))
        (pod,) = [a for a in ledger.allocations() if a.memory_per_gpu == {0: 400}]
        return [Move(pod.pod.uid, other_node(pod), (0,)), Move("nobody", "n-0", (0,))]

    run = churn(C.nodes([1, 1]), work, "binpack", 0, audit=True, defrag=Defrag(planner, per_hour=6, every=30.0))
    assert_clean(run)
    assert run.moves == [] and np.isnan(run.placed_at[2])
    assert run.steps[:2] == [(30.0, 6, 2, 0, 0), (60.0, 6, 2, 0, 0)]
    assert seen[0] == seen[1] and sorted(seen[0][1]) == [400, 700]  # the next step finds all as it was


def test_a_move_of_a_pod_that_holds_no_gpu_is_refused():
    work = C.work([(0, 1000, 0, 0, 0), (0, 1000, 1, 1000, 0), (1, 1000, 1, 1000, 0)])
    moves = lambda ledger, held, waiting, max_moves: [Move("p0-0", "n-0", (0,))]  # noqa: E731
    run = churn(C.nodes([1]), work, "binpack", 0, audit=True, defrag=Defrag(moves, per_hour=6, every=30.0))
    assert_clean(run)
    assert run.moves == [] and run.steps[0] == (30.0, 6, 1, 0, 0)
