"""The defragmentation planner against a brute-force reference on small random clusters.

Every plan: each move is allowed (a movable pod, once, within its budgets, of
a priority no higher than the pod it serves) and fits where it goes when it
goes; nothing is overfilled; every pod the plan places fits where it says;
the whole GPUs it claims to free are freed. An exact plan uses no more moves
than the fewest the reference finds for the same pods, and a lone pending pod
gets room exactly when the reference finds moves for it.
"""

from __future__ import annotations

import copy

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from defrag_reference import RefNode, RefResident, count, fewest_moves, fits_at, place, within_capacity
from policy.defrag import Limits, Resident, Waiting, plan
from policy.names import BINPACK, MODE_CORE, MODE_MEMORY
from policy.node import NodeSpec
from policy.request import simple_request
from policy.state import ClusterState


@st.composite
def requests_for(draw, mode: int, gpus: int, memory: int, big: bool = False):
    """A request some node of this shape could take; ``big``: half a GPU or more (a pending pod)."""
    wants_core = mode == MODE_CORE
    n = draw(st.sampled_from([1, 1, 1, 2])) if gpus >= 2 and not wants_core else 1
    if draw(st.integers(0, 9)) == 0:
        return simple_request(memory * n, 100 if wants_core else 0, gpu_count=n, whole_device=True)
    per = draw(st.integers(memory // 2, memory) if big else st.integers(1, memory // 2))
    core = draw(st.sampled_from([50, 70, 100] if big else [10, 30, 50])) if wants_core else 0
    return simple_request(per * n, core, gpu_count=n)


@st.composite
def cases(draw, max_nodes: int = 3, max_gpus: int = 2, max_residents: int = 5, max_pending: int = 2):
    nodes = []
    for i in range(draw(st.integers(min(2, max_nodes), max_nodes))):
        mode = draw(st.sampled_from([MODE_MEMORY, MODE_MEMORY, MODE_CORE]))
        gpus = draw(st.integers(1, max_gpus))
        unhealthy = frozenset(draw(st.sets(st.integers(0, gpus - 1), max_size=1))) if draw(st.integers(0, 5)) == 0 \
            else frozenset()
        nodes.append(RefNode(f"n{i}", mode, gpus, draw(st.sampled_from([8, 16])), 100 if mode == MODE_CORE else 0,
                             draw(st.sampled_from([2, 20, 20])), unhealthy))
    masks = st.lists(st.booleans(), min_size=len(nodes), max_size=len(nodes)).filter(any)
    residents = []
    for j in range(draw(st.integers(max_residents // 2, max_residents)) * 2):
        if len(residents) == max_residents:
            break
        node = draw(st.integers(0, len(nodes) - 1))
        n = nodes[node]
        request = draw(requests_for(n.mode, n.gpus, n.memory))
        gpus = tuple(sorted(draw(st.permutations(range(n.gpus)))[:request.gpu_count]))
        if not fits_at(nodes, request, node, gpus):
            continue
        place(nodes, request, node, gpus)
        per_mem, per_core = request.memory_per_gpu, request.core_per_gpu
        residents.append(dict(
            key=f"default/r{j}", node=node, memory={g: per_mem for g in gpus},
            core={g: per_core for g in gpus} if request.wants_core else {}, request=request,
            priority=draw(st.sampled_from([0, 0, 5])), movable=draw(st.integers(0, 5)) > 0,
            budgets=draw(st.sampled_from([(), (), ("b1",), ("b2",)])),
            allowed=draw(masks) if draw(st.integers(0, 5)) == 0 else None))
    pending = []
    for k in range(draw(st.integers(1, max_pending))):
        n = nodes[draw(st.integers(0, len(nodes) - 1))]  # a shape some node could take
        pending.append(dict(key=f"default/q{k}", request=draw(requests_for(n.mode, n.gpus, n.memory)),
                            priority=draw(st.sampled_from([0, 5])),
                            allowed=draw(masks) if draw(st.integers(0, 5)) == 0 else None))
    allowances = {"b1": draw(st.integers(0, 2)), "b2": draw(st.integers(0, 1))}
    return nodes, residents, pending, allowances, draw(st.sampled_from([0, 1, 2, 2, 3]))


@st.composite
def fragmented(draw, max_pending: int = 2):
    """Two or three nodes of 2 GPUs, each GPU a few small pods: room in sum, little on any one GPU."""
    mode = draw(st.sampled_from([MODE_MEMORY, MODE_MEMORY, MODE_CORE]))
    core = 100 if mode == MODE_CORE else 0
    nodes = [RefNode(f"n{i}", mode, 2, 16, core, 20) for i in range(draw(st.integers(2, 3)))]
    residents = []
    for node, n in enumerate(nodes):
        for g in range(2):
            for _ in range(draw(st.integers(1, 2))):
                request = simple_request(draw(st.integers(4, 7)), draw(st.sampled_from([10, 20, 30])) if core else 0)
                if fits_at(nodes, request, node, (g,)):
                    place(nodes, request, node, (g,))
                    j = len(residents)
                    residents.append(dict(key=f"default/r{j}", node=node, memory={g: request.memory},
                                          core={g: request.core} if core else {}, request=request,
                                          priority=draw(st.sampled_from([0, 0, 5])),
                                          movable=draw(st.integers(0, 6)) > 0,
                                          budgets=draw(st.sampled_from([(), (), ("b1",)])), allowed=None))
    pending = [dict(key=f"default/q{k}", request=simple_request(draw(st.integers(13, 16)),
                                                                 draw(st.sampled_from([50, 80])) if core else 0),
                    priority=draw(st.sampled_from([0, 5, 5])), allowed=None)
               for k in range(draw(st.integers(1, max_pending)))]
    allowances = {"b1": draw(st.sampled_from([0, 1, 2])), "b2": 0}
    return nodes, residents, pending, allowances, draw(st.sampled_from([1, 2, 3]))


def planner_inputs(nodes, residents, pending):
    state = ClusterState(rows=2, gpus=2)
    for n in nodes:
        state.set_node(NodeSpec(n.name, n.mode, n.gpus, n.memory, n.core, BINPACK, n.max_pod, n.unhealthy))
    for r in residents:
        state.add_usage(nodes[r["node"]].name, r["memory"], r["core"], r["request"].wants_core)
    mask = lambda m: None if m is None else np.array(m, dtype=bool)  # noqa: E731
    made = [Resident(r["key"], nodes[r["node"]].name, r["memory"], r["core"], r["request"], r["priority"],
                     r["movable"], "" if r["movable"] else "not owned by a controller", r["budgets"],
                     mask(r["allowed"]))
            for r in residents]
    waiting = [Waiting(w["key"], w["request"], w["priority"], mask(w["allowed"])) for w in pending]
    return state, made, waiting


def ref_movers(residents, floor):
    return [RefResident(r["key"], r["node"], r["memory"], r["core"], r["request"], r["allowed"], r["budgets"])
            for r in residents if r["movable"] and r["priority"] <= floor]


def idle(nodes) -> int:
    return sum(1 for n in nodes for g in range(n.gpus) if g not in n.unhealthy and n.pods[g] == 0)


def check_plan(case, result) -> list:
    """Replay ``result`` on the reference cluster; the reference cluster after the moves."""
    nodes, residents, pending, allowances, max_moves = case
    nodes = copy.deepcopy(nodes)
    by_key = {r["key"]: r for r in residents}
    waiting = {w["key"]: w for w in pending}
    index = {n.name: i for i, n in enumerate(nodes)}
    assert not result.reasons["summary"].startswith("internal check failed")
    assert len(result.moves) <= max_moves
    assert len({m.pod for m in result.moves}) == len(result.moves), "a pod moves at most once"
    used: dict = {}
    before = idle(nodes)
    for m in result.moves:
        r = by_key[m.pod]
        assert r["movable"]
        assert m.serves in result.unblocks
        assert r["priority"] <= waiting[m.serves]["priority"]
        for b in r["budgets"]:
            used[b] = used.get(b, 0) + 1
            assert used[b] <= allowances[b], "a budget allows fewer disruptions"
        assert (index[m.from_node], m.from_gpus) == (r["node"], tuple(sorted(set(r["memory"]) | set(r["core"]))))
        count(nodes, r["node"], r["memory"], r["core"], r["request"].wants_core, -1)
        assert (index[m.to_node], m.gpus) != (r["node"], m.from_gpus)
        assert fits_at(nodes, r["request"], index[m.to_node], m.gpus, r["allowed"]), m
        place(nodes, r["request"], index[m.to_node], m.gpus)
        assert within_capacity(nodes)
    assert result.whole_gpus_freed == idle(nodes) - before
    after_moves = copy.deepcopy(nodes)
    assert set(result.unblocks) <= set(result.placements)
    for key, spot in result.placements.items():
        w = waiting[key]
        assert fits_at(nodes, w["request"], index[spot.node], spot.gpus, w["allowed"]), (key, spot)
        place(nodes, w["request"], index[spot.node], spot.gpus)
    assert within_capacity(nodes)
    return after_moves


SMALL = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@SMALL
@given(st.one_of(cases(), fragmented()))
def test_an_exact_plan_is_allowed_fits_and_uses_no_more_moves_than_the_fewest(case):
    nodes, residents, pending, allowances, max_moves = case
    result = plan(*planner_inputs(nodes, residents, pending), max_moves, budgets=allowances)
    check_plan(case, result)
    assert result.exact
    kept = [pending[int(key[len("default/q"):])] for key in result.placements]
    if kept and result.moves:
        floor = min(w["priority"] for w in kept)
        fewest = fewest_moves(nodes, ref_movers(residents, floor), [(w["request"], w["allowed"]) for w in kept],
                              len(result.moves), allowances)
        assert fewest == len(result.moves)


@SMALL
@given(st.one_of(cases(max_pending=1), fragmented(max_pending=1)))
def test_a_lone_pending_pod_gets_room_exactly_when_moves_can_make_it(case):
    nodes, residents, pending, allowances, max_moves = case
    (w,) = pending
    result = plan(*planner_inputs(nodes, residents, pending), max_moves, budgets=allowances)
    fewest = fewest_moves(nodes, ref_movers(residents, w["priority"]), [(w["request"], w["allowed"])], max_moves,
                          allowances)
    if fewest is None:
        assert result.moves == () and result.placements == {} and result.unblocks == ()
        reason = result.reasons["pending"][w["key"]]
        assert reason and not reason.startswith(("gets room", "fits without"))
    else:
        assert w["key"] in result.placements and len(result.moves) == fewest
        assert (w["key"] in result.unblocks) == (fewest > 0)


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(cases(max_nodes=6, max_gpus=4, max_residents=14, max_pending=4))
def test_a_heuristic_plan_is_allowed_and_fits(case):
    nodes, residents, pending, allowances, max_moves = case
    result = plan(*planner_inputs(nodes, residents, pending), max_moves, budgets=allowances,
                  limits=Limits(exact_movers=-1))  # the heuristic even where no pod could move
    check_plan(case, result)
    assert (result.reasons["search"], result.exact) == ("heuristic", False) or result.moves == ()  # none may move
    for w in pending:
        assert w["key"] in result.placements or result.reasons["pending"][w["key"]]
