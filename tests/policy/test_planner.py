"""The autoscaling planner (policy.planner): room that exists first, then new pool nodes, with reasons."""

from __future__ import annotations

import math
from hypothesis import given
from hypothesis import strategies as st

from clusters import clusters, reference_place, requests
from plans import POOL_KEY, SCALER, TOLERATE_SCALER, Pending, full_pool, gpu_node, node_object, pods, pool
from policy.allocation import per_gpu, split
from policy.names import BINPACK, MODE_CORE, MODE_MEMORY, SPREAD, UNLIMITED_PODS
from policy.node import parse_node
from policy.planner import new_node_name, plan
from policy.request import InvalidRequest, simple_request
from policy.selectors import taints_of, tolerates
from policy.state import ClusterState

# -- the cases the issue names -------------------------------------------------------------------


def test_full_pool_of_4x15_gib_nodes_needs_two_nodes_for_ten_6_gib_pods():
    state, objects, pools = full_pool(used_per_gpu=15)
    result = plan(state, objects, pools, pods(10, 6, node_selector={POOL_KEY: "np-a"}))
    assert result.pending == 10 and result.fits_now == [] and result.unplaceable == []
    assert result.pools["np-a"].nodes_needed == 2
    assert sorted(p.pod for p in result.pools["np-a"].placements) == sorted(f"default/p{i}" for i in range(10))


def test_pods_pending_only_because_of_per_gpu_fragmentation_need_new_nodes():
    # 5 GiB free on each of 16 GPUs (80 GiB in all, 20 per node): by node totals a 6 GiB pod fits
    # every node, by GPUs none.
    state, objects, pools = full_pool(used_per_gpu=10)
    result = plan(state, objects, pools, pods(10, 6))
    assert result.fits_now == [] and result.pools["np-a"].nodes_needed == 2
    # a 5 GiB pod does fit the room that is there
    result = plan(state, objects, pools, pods(3, 5))
    assert [p.node for p in result.fits_now] == ["np-a-0"] * 3 and result.pools == {}


def test_pod_larger_than_every_pools_gpus_is_unplaceable_with_a_reason():
    state, objects, pools = full_pool()
    result = plan(state, objects, pools, pods(1, 16, prefix="huge"))
    (ref, reason), = result.unplaceable
    assert ref == "default/huge0" and result.pools == {}
    assert "nor a new node of any pool it may use" in reason and "np-a (4 x 15 GiB, memory)" in reason
    assert "GPU memory request is larger than the node's GPUs" in reason


def test_max_size_bounds_the_new_nodes():
    state, objects, pools = full_pool(used_per_gpu=15)
    pools["np-a"] = pool("np-a", gpu_node("t"), nodes=4, max_size=5)
    result = plan(state, objects, pools, pods(10, 6))
    assert result.pools["np-a"].nodes_needed == 1 and len(result.pools["np-a"].placements) == 8
    assert len(result.unplaceable) == 2
    assert all("at its max size: np-a (max size 5, 4 nodes)" in reason for _, reason in result.unplaceable)


def test_invalid_requests_are_unplaceable_with_their_message():
    state, objects, pools = full_pool()
    bad = Pending("default/bad", InvalidRequest("aliyun.com/gpu-mem must be at least 1 GiB"))
    result = plan(state, objects, pools, [bad])
    assert result.unplaceable == [("default/bad", "invalid request: aliyun.com/gpu-mem must be at least 1 GiB")]


def test_taints_and_selectors_pick_the_pool():
    state = ClusterState()
    pools = {"gpu": pool("gpu", gpu_node("t1"), 0, taints=SCALER, labels={"gpu-spec": "A10"}),
             "big": pool("big", gpu_node("t2", gib=40), 0, labels={"gpu-spec": "A100"})}
    untolerated = plan(state, {}, {"gpu": pools["gpu"]}, pods(1, 6))
    assert untolerated.unplaceable == [("default/p0", "fits no node now, and no node pool admits it "
                                                      "(nodeSelector, node affinity, tolerations)")]
    # both admit it: the smallest GPUs that fit
    result = plan(state, {}, pools, pods(1, 6, tolerations=TOLERATE_SCALER))
    assert list(result.pools) == ["gpu"]
    # affinity on the model leaves only the big pool
    terms = [{"matchExpressions": [{"key": "gpu-spec", "operator": "In", "values": ["A100"]}]}]
    result = plan(state, {}, pools, pods(1, 6, tolerations=TOLERATE_SCALER, node_affinity=terms))
    assert list(result.pools) == ["big"]
    # too big for the small pool, which it may use: the big one
    result = plan(state, {}, pools, pods(1, 20, tolerations=TOLERATE_SCALER))
    assert list(result.pools) == ["big"]


def test_existing_room_is_used_only_where_the_pod_may_go():
    state = ClusterState()
    state.set_node(gpu_node("tainted"))
    state.set_node(gpu_node("other"))
    objects = {"tainted": node_object({POOL_KEY: "gpu"}, SCALER), "other": node_object({"team": "x"})}
    pools = {"gpu": pool("gpu", gpu_node("t"), 1, taints=SCALER)}
    result = plan(state, objects, pools, pods(1, 6, node_selector={POOL_KEY: "gpu"}))
    assert result.fits_now == [] and "no node pool admits it" in result.unplaceable[0][1]  # all tainted
    result = plan(state, objects, pools, pods(1, 6, node_selector={POOL_KEY: "gpu"}, tolerations=TOLERATE_SCALER))
    assert [p.node for p in result.fits_now] == ["tainted"]
    result = plan(state, objects, pools, pods(1, 6))
    assert [p.node for p in result.fits_now] == ["other"]


def test_a_nominated_pod_goes_to_its_node_first():
    state = ClusterState()
    for name in ("a", "b"):
        state.set_node(gpu_node(name))
    state.add_usage("a", {0: 10}, {}, False)  # binpack would pick a
    result = plan(state, {"a": node_object({}), "b": node_object({})}, {}, pods(1, 4, nominated_node="b"))
    assert [p.node for p in result.fits_now] == ["b"]


def test_a_pool_at_zero_nodes_grows_from_its_template():
    result = plan(ClusterState(), {}, {"np-z": pool("np-z", gpu_node("t", gpus=2, gib=24), 0, max_size=3)},
                  pods(7, 12))
    assert result.pools["np-z"].nodes_needed == 2 and len(result.pools["np-z"].placements) == 7
    assert {p.node for p in result.pools["np-z"].placements} == {new_node_name("np-z", 0), new_node_name("np-z", 1)}


def test_without_any_pool_a_pod_that_does_not_fit_is_unplaceable():
    state, objects, _ = full_pool(used_per_gpu=15)
    result = plan(state, objects, {}, pods(1, 2))
    assert result.unplaceable == [("default/p0", "fits no node now, and no node pool is known that could grow "
                                                 "(no node carries a pool label: see --pool-label)")]


def test_the_state_given_is_left_unchanged():
    state, objects, pools = full_pool(used_per_gpu=5)
    before = state.array("mem_used").copy()
    plan(state, objects, pools, pods(30, 6))
    assert (state.array("mem_used") == before).all() and set(state.index) == set(objects)


def test_a_pool_whose_nodes_do_not_share_gpus_says_so():
    spec = parse_node({"metadata": {"name": "t", "labels": {}}, "status": {"allocatable": {"nvidia.com/gpu": "8"}}})
    result = plan(ClusterState(), {}, {"whole": pool("whole", spec, 2)}, pods(1, 2))
    (_, reason), = result.unplaceable
    assert "whole (node does not share GPUs): node does not share GPUs" in reason


# -- properties ----------------------------------------------------------------------------------

LABELS = st.fixed_dictionaries({}, optional={"zone": st.sampled_from(["z1", "z2"]),
                                             "gpu-spec": st.sampled_from(["A10", "T4"])})
TAINTS = st.lists(st.sampled_from([{"key": "scaler", "value": "gpu", "effect": "NoSchedule"},
                                   {"key": "team", "value": "ml", "effect": "NoExecute"}]), max_size=2, unique_by=str)


@st.composite
def pending_pods(draw, count=st.integers(0, 12)):
    made = []
    for i in range(draw(count)):
        selector = draw(st.fixed_dictionaries({}, optional={"zone": st.sampled_from(["z1", "z2"])}))
        tolerations = draw(st.sampled_from([[], TOLERATE_SCALER, [{"operator": "Exists"}]]))
        made.append(Pending(f"ns/p{i}", draw(requests()), node_selector=selector, tolerations=tolerations))
    return made


@st.composite
def planning_inputs(draw):
    state = draw(clusters())
    names = [n for n in state.names if n is not None]
    objects = {n: node_object(draw(LABELS), draw(TAINTS)) for n in names}
    pools = {}
    for i in range(draw(st.integers(0, 3))):
        spec = gpu_node(f"t{i}", gpus=draw(st.integers(1, 8)), gib=draw(st.sampled_from([8, 16, 24, 40])),
                        mode=draw(st.sampled_from([MODE_MEMORY, MODE_CORE])),
                        placement=draw(st.sampled_from([BINPACK, SPREAD])),
                        max_pod=draw(st.sampled_from([2, 20, UNLIMITED_PODS])))
        pools[f"pool-{i}"] = pool(f"pool-{i}", spec, draw(st.integers(0, 3)),
                                  draw(st.one_of(st.none(), st.integers(0, 6))), draw(LABELS), draw(TAINTS))
    return state, objects, pools, draw(pending_pods())


def replay(state: ClusterState, placements, requests_by_ref) -> None:
    """Each placement fits the node as the earlier ones left it, on the GPUs its placement rule picks."""
    for placement in placements:
        request = requests_by_ref[placement.pod]
        fits, gpus = reference_place(state, placement.node, request)
        assert fits and tuple(gpus) == placement.gpus, placement
        memory, core = split(request, placement.gpus)
        state.add_usage(placement.node, per_gpu(memory), per_gpu(core), request.wants_core)


@given(planning_inputs())
def test_every_pod_is_accounted_once_and_every_placement_really_fits(inputs):
    state, objects, pools, pending = inputs
    result = plan(state, objects, pools, pending)
    placed = [p.pod for p in result.fits_now] + [p.pod for pp in result.pools.values() for p in pp.placements]
    refs = placed + [ref for ref, _ in result.unplaceable]
    assert result.pending == len(pending) and sorted(refs) == sorted(p.ref for p in pending)
    by_ref = {p.ref: p.request for p in pending}
    replay(state.copy(), result.fits_now, by_ref)  # never two pods on the same room
    for name, pool_plan in result.pools.items():
        template = pools[name]
        assert pool_plan.nodes_needed >= 1 and (template.room is None or pool_plan.nodes_needed <= template.room)
        fresh = ClusterState()
        for k in range(pool_plan.nodes_needed):
            fresh.set_node(template.new_node(new_node_name(name, k)))
        replay(fresh, pool_plan.placements, by_ref)  # kept in the order they were placed
        assert {p.new_node for p in pool_plan.placements} == set(range(pool_plan.nodes_needed))


def admits(node: dict, pod: Pending) -> bool:
    """The pod's nodeSelector and tolerations against one node, restated label by label, taint by taint."""
    labels = node["metadata"]["labels"]
    return (all(labels.get(k) == v for k, v in pod.node_selector.items())
            and all(tolerates(pod.tolerations, taint) for taint in taints_of(node)))


@given(planning_inputs())
def test_selectors_and_taints_are_respected(inputs):
    state, objects, pools, pending = inputs
    result = plan(state, objects, pools, pending)
    by_ref = {p.ref: p for p in pending}
    for placement in result.fits_now:
        assert admits(objects[placement.node], by_ref[placement.pod]), placement
    for name, pool_plan in result.pools.items():
        for placement in pool_plan.placements:
            assert admits(pools[name].template, by_ref[placement.pod]), placement


@given(gpus=st.integers(1, 8), gib=st.sampled_from([8, 15, 16, 24, 40]), memory=st.integers(1, 24),
       core=st.sampled_from([0, 5, 30, 50, 100]), split_over=st.integers(1, 4), count=st.integers(1, 60),
       max_pod=st.sampled_from([1, 3, 20]), placement=st.sampled_from([BINPACK, SPREAD]),
       existing=st.integers(0, 3))
def test_identical_pods_on_identical_gpus_need_the_fewest_nodes(gpus, gib, memory, core, split_over, count,
                                                                max_pod, placement, existing):
    if split_over > 1:  # a multi-GPU pod is memory only, and its GPU count divides the node's
        core = 0
        split_over = split_over if gpus % split_over == 0 else 1
    mode = MODE_CORE if core else MODE_MEMORY
    options = dict(gpus=gpus, gib=gib, mode=mode, placement=placement, max_pod=max_pod)
    state = ClusterState()
    objects = {}
    for i in range(existing):  # full nodes of the pool: no room
        spec = gpu_node(f"n{i}", **options)
        state.set_node(spec)
        for g in range(gpus):
            state.add_usage(spec.name, {g: gib}, {g: 100} if core else {}, bool(core))
        objects[spec.name] = node_object({POOL_KEY: "np"})
    request = simple_request(memory * split_over, core, gpu_count=split_over)
    pending = [Pending(f"ns/p{i}", request) for i in range(count)]
    result = plan(state, objects, {"np": pool("np", gpu_node("t", **options), existing)}, pending)
    per_gpu_room = min(gib // memory, max_pod, 100 // core if core else max_pod)
    per_node = (gpus // split_over) * per_gpu_room
    if per_node == 0:
        assert len(result.unplaceable) == count and result.pools == {}
    else:
        assert result.pools["np"].nodes_needed == math.ceil(count / per_node)
        assert result.unplaceable == [] and result.fits_now == []
