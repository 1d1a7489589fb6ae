"""Victim selection (policy.victims): the set returned makes the pod fit by filter's own
rules, has no strict subset that does, is the first such set by the stated order,
and never holds a pod of the preemptor's priority or higher."""

import itertools

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from policy.node import parse_node
from policy.placement import gpu_fit
from policy.reasons import FITS
from policy.request import simple_request
from policy.state import ClusterState
from policy.victims import Resident, keep_proposal, room_after, select
from builders import node


def row_of(gpus, gib, residents, schedule="cgpu"):
    state = ClusterState()
    state.set_node(parse_node(node("n", schedule, gpus=gpus, gib=gib)))
    for r in residents:
        state.add_usage("n", r.memory, r.core, r.wants_core)
    return state.view(np.array([0]))


def pod(uid, priority, gpu, gib, start="2026-11-01T00:00:00Z", core=0, pdb=False):
    return Resident(uid, priority, start, {gpu: gib}, {gpu: core} if core else {}, bool(core), pdb)


def fits(row, request, residents, uids):
    chosen = np.array([[r.uid in uids for r in residents]], dtype=bool)
    return gpu_fit(room_after(row, residents, chosen), request)[1][0] == FITS


def test_the_issues_example_frees_both_pods_of_one_gpu_not_the_two_10_gib_pods():
    # 2 GPUs × 22 GiB; GPU 0: 12 (old) + 10, GPU 1: 12 (old) + 10; a 20 GiB pod of higher priority
    residents = [pod("a12", 0, 0, 12, "2026-01-01T00:00:00Z"), pod("a10", 0, 0, 10, "2026-06-01T00:00:00Z"),
                 pod("b12", 0, 1, 12, "2026-01-01T00:00:00Z"), pod("b10", 0, 1, 10, "2026-06-01T00:00:00Z")]
    row = row_of(2, 22, residents)
    request = simple_request(20)
    assert keep_proposal(row, request, residents, ["a10", "b10"]) is None  # kube's totals-based choice frees nothing
    victims = select(row, request, 1000, residents)
    assert set(victims) in ({"a12", "a10"}, {"b12", "b10"})
    assert set(victims) == {"a12", "a10"}  # tie broken by the lowest GPU index


def test_only_lower_priority_pods_are_victims_and_none_when_they_cannot_make_room():
    residents = [pod("high", 100, 0, 10), pod("same", 50, 0, 10), pod("low", 10, 1, 20)]
    row = row_of(2, 22, residents)
    assert select(row, simple_request(12), 50, residents) == ("low",)
    assert select(row, simple_request(22), 50, [r for r in residents if r.uid != "low"]) is None


def test_a_pod_that_fits_needs_no_victims():
    residents = [pod("x", 0, 0, 10)]
    assert select(row_of(2, 22, residents), simple_request(5), 10, residents) == ()


def test_fewer_budget_violations_win_over_fewer_pods():
    residents = [pod("guarded", 0, 0, 20, pdb=True), pod("a", 0, 1, 10), pod("b", 0, 1, 10)]
    assert set(select(row_of(2, 22, residents), simple_request(20), 10, residents)) == {"a", "b"}


def test_the_youngest_goes_first_among_equals():
    residents = [pod("old", 0, 0, 20, "2026-01-01T00:00:00Z"), pod("young", 0, 1, 20, "2026-09-01T00:00:00Z")]
    assert select(row_of(2, 22, residents), simple_request(20), 10, residents) == ("young",)


def test_compute_and_mixing_rules_hold_after_eviction():
    # core_mem node: a memory-only pod blocks compute pods (no mixing) until it goes
    residents = [pod("memonly", 0, 0, 2), pod("both", 0, 1, 4, core=50)]
    row = row_of(2, 15, residents, schedule="core_mem")
    request = simple_request(2, 60)
    assert select(row, request, 10, residents) == ("memonly",)


def key(residents, uids):
    chosen = [r for r in residents if r.uid in uids]
    ranks = {s: i for i, s in enumerate(sorted({r.start for r in residents}))}
    return (sum(r.disrupts_budget for r in chosen), max(r.priority for r in chosen), len(chosen),
            sum(r.priority for r in chosen), -min(ranks[r.start] for r in chosen),
            min(min(r.memory) for r in chosen))


residents_strategy = st.lists(
    st.tuples(st.integers(-5, 5), st.integers(0, 3), st.integers(1, 12), st.integers(0, 3), st.booleans()),
    min_size=1, max_size=7)


@settings(max_examples=150, deadline=None)
@given(residents_strategy, st.integers(1, 22), st.integers(-5, 6))
def test_the_set_makes_room_is_minimal_and_first_by_the_order(spec, want, priority):
    residents = [Resident(f"p{i}", p, f"2026-0{s + 1}-01T00:00:00Z", {g: gib}, {}, False, pdb)
                 for i, (p, g, gib, s, pdb) in enumerate(spec)]
    state_ok = [r for r in residents]
    used = np.zeros(4, dtype=int)
    for r in residents:
        used[next(iter(r.memory))] += next(iter(r.memory.values()))
    if (used > 22).any():
        return  # not a state filter could have made
    row = row_of(4, 22, state_ok)
    request = simple_request(want)
    victims = select(row, request, priority, residents)
    lower = [r for r in residents if r.priority < priority]
    every = [set(c) for n in range(1, len(lower) + 1) for c in itertools.combinations([r.uid for r in lower], n)]
    making_room = [c for c in every if fits(row, request, residents, c)]
    if victims is None:
        assert not making_room and not fits(row, request, residents, set())
        return
    if victims == ():
        assert fits(row, request, residents, set())
        return
    assert all(r.priority < priority for r in residents if r.uid in victims)
    assert fits(row, request, residents, set(victims))
    assert not any(c < set(victims) for c in making_room)  # no strict subset makes room
    assert key(residents, set(victims)) == min(key(residents, c) for c in making_room)


def greedy_one_at_a_time(row, request, candidates):
    """The greedy pass written plainly: add pods in the set order until the pod fits, then drop
    each victim the pod can spare, last added first, one evaluation at a time."""
    from policy.victims import _order

    ranked = [candidates[i] for i in _order(candidates)]
    chosen = []
    for r in ranked:
        chosen.append(r.uid)
        if fits(row, request, ranked, set(chosen)):
            break
    else:
        return None
    for uid in reversed(list(chosen)):
        if fits(row, request, ranked, set(chosen) - {uid}):
            chosen.remove(uid)
    return tuple(chosen)


@settings(max_examples=100, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 3), st.integers(1, 6), st.integers(0, 3), st.integers(0, 8)),
                min_size=13, max_size=30),
       st.integers(1, 24))
def test_the_batched_greedy_decides_as_the_one_at_a_time_greedy_does(spec, want):
    """Past twelve candidates select() is greedy, batched: every prefix at once, drops a round per drop."""
    from policy.victims import _greedy

    residents = [Resident(f"u{i:02d}", priority, f"2026-0{1 + day}-01T00:00:00Z", {gpu: gib}, {}, False, False)
                 for i, (gpu, gib, priority, day) in enumerate(spec)]
    row = row_of(4, 24, residents)
    request = simple_request(want)
    assert _greedy(row, request, residents) == greedy_one_at_a_time(row, request, residents)
