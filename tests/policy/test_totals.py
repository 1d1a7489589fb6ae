"""What cluster-autoscaler adds by itself, judging shared GPUs by node totals (policy.totals)."""

from plans import POOL_KEY, SCALER, TOLERATE_SCALER, full_pool, gpu_node, node_object, pool
from plans import pods as pending_list
from policy.names import MODE_CORE
from policy.planner import plan
from policy.request import simple_request
from policy.state import ClusterState
from policy.totals import own_scale_up


def scale_up(state, objects, pools, pods) -> tuple[dict, dict]:
    result = plan(state, objects, pools, pods)
    return {n: p.nodes_needed for n, p in result.pools.items()}, own_scale_up(state, objects, pools, pods, result)


def test_pods_pending_for_fragmentation_only_look_schedulable():
    # 5 GiB free on every GPU, 20 GiB per node: by totals each node takes three 6 GiB pods
    needed, own = scale_up(*full_pool(used_per_gpu=10), pending_list(10, 6))
    assert needed == {"np-a": 2} and own == {}
    needed, own = scale_up(*full_pool(used_per_gpu=10), pending_list(14, 6))  # 12 fit the totals
    assert needed == {"np-a": 2} and own == {"np-a": 1}


def test_pods_unschedulable_by_totals_get_nodes_packed_by_totals():
    needed, own = scale_up(*full_pool(used_per_gpu=15), pending_list(10, 6))
    assert needed == {"np-a": 2} and own == {"np-a": 1}  # 60 GiB in one 60 GiB node; per GPU only 8 fit
    needed, own = scale_up(*full_pool(used_per_gpu=15), pending_list(16, 6))
    assert needed == {"np-a": 2} and own == {"np-a": 2}


def test_compute_counts_on_core_mem_nodes():
    state = ClusterState()
    state.set_node(gpu_node("c0", gpus=2, gib=40, mode=MODE_CORE))
    state.add_usage("c0", {0: 1, 1: 1}, {0: 100, 1: 100}, True)  # memory free, compute gone
    pods = [type(p)(p.ref, simple_request(4, 50)) for p in pending_list(4, 4)]
    pools = {"np-a": pool("np-a", gpu_node("t", gpus=2, gib=40, mode=MODE_CORE), 1)}
    needed, own = scale_up(state, {"c0": node_object({POOL_KEY: "np-a"})}, pools, pods)
    assert needed == {"np-a": 1} and own == {"np-a": 1}  # 4 x 50 % = 200 % = one node's compute


def test_nodes_a_pod_may_not_use_do_not_count():
    state = ClusterState()
    state.set_node(gpu_node("free-but-tainted"))
    objects = {"free-but-tainted": node_object({POOL_KEY: "np-a"}, SCALER)}
    pools = {"np-b": pool("np-b", gpu_node("t"), 0)}
    needed, own = scale_up(state, objects, pools, pending_list(2, 6))
    assert needed == own == {"np-b": 1}
    needed, own = scale_up(state, objects, pools, pending_list(2, 6, tolerations=TOLERATE_SCALER))
    assert needed == own == {}  # it fits the tainted node now
