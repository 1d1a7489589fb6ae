"""Node pools and their templates (policy.pools)."""

from builders import node
from policy.names import MODE_MEMORY
from policy.pools import DEFAULT_POOL_LABELS, Entry, pool_of, pools_of
from policy.state import ClusterState


def pooled(name, pool, key="alibabacloud.com/nodepool-id", taints=(), **options):
    n = node(name, **options)
    n["metadata"]["labels"][key] = pool
    n["spec"] = {"taints": [dict(t) for t in taints]}
    return n


def test_the_first_pool_label_present_names_the_pool():
    labels = {"karpenter.sh/nodepool": "kp", "eks.amazonaws.com/nodegroup": "ng"}
    assert pool_of(labels) == ("karpenter.sh/nodepool", "kp")
    assert pool_of(labels, ("eks.amazonaws.com/nodegroup",)) == ("eks.amazonaws.com/nodegroup", "ng")
    assert pool_of({"team": "x"}) is None and len(DEFAULT_POOL_LABELS) == 5


def test_template_is_a_sharing_node_as_it_joins():
    taints = [{"key": "scaler", "value": "gpu", "effect": "NoSchedule"},
              {"key": "node.kubernetes.io/not-ready", "effect": "NoExecute"},
              {"key": "ToBeDeletedByClusterAutoscaler", "value": "1", "effect": "NoSchedule"}]
    nodes = [pooled("a-0", "np", schedule=None), pooled("a-1", "np", "alibabacloud.com/nodepool-id", taints,
                                                        schedule="cgpu", gpus=2, gib=24),
             pooled("b-0", "other", "cloud.google.com/gke-nodepool")]
    pools = pools_of(nodes)
    assert set(pools) == {"np", "other"}
    np_pool = pools["np"]
    assert (np_pool.nodes, np_pool.max_size, np_pool.room, np_pool.label) == (2, None, None,
                                                                             "alibabacloud.com/nodepool-id")
    assert (np_pool.spec.mode, np_pool.spec.gpu_count, np_pool.spec.memory_per_gpu) == (MODE_MEMORY, 2, 24)
    labels = np_pool.template["metadata"]["labels"]
    assert "kubernetes.io/hostname" not in labels and labels["alibabacloud.com/nodepool-id"] == "np"
    assert np_pool.template["spec"]["taints"] == [{"key": "scaler", "value": "gpu", "effect": "NoSchedule"}]
    new = np_pool.new_node("new:np:0")
    assert new.name == "new:np:0" and new.unhealthy == frozenset()
    state = ClusterState()
    state.set_node(new)
    assert state.array("healthy")[state.index["new:np:0"], :2].all()


def test_entries_give_max_sizes_and_templates_for_pools_at_zero_nodes():
    nodes = [pooled("a-0", "np", schedule="cgpu")]
    entries = {"np": Entry(max_size=3, node=pooled("ignored", "np", schedule="cgpu", gib=80)),
               "zero": Entry(max_size=5, node=node("tmpl", "core_mem", gpus=8, gib=40)),
               "unknown": Entry(max_size=2)}
    pools = pools_of(nodes, entries=entries)
    assert set(pools) == {"np", "zero"}
    assert (pools["np"].max_size, pools["np"].room, pools["np"].spec.memory_per_gpu) == (3, 2, 15)
    zero = pools["zero"]
    assert (zero.nodes, zero.room, zero.spec.gpu_count, zero.spec.memory_per_gpu) == (0, 5, 8, 40)
    assert zero.template["metadata"]["labels"][DEFAULT_POOL_LABELS[0]] == "zero"
