import pytest

from builders import node
from policy.names import BINPACK, MODE_CORE, MODE_MEMORY, MODE_NONE, SPREAD, UNLIMITED_PODS
from policy.node import parse_node, parse_unhealthy_gpus, unhealthy_configmap_node


@pytest.mark.parametrize("label, mode", [("cgpu", MODE_MEMORY), ("share", MODE_MEMORY), ("mps", MODE_MEMORY),
                                          ("core_mem", MODE_CORE), ("topology", MODE_NONE), ("mig", MODE_NONE),
                                          ("disabled", MODE_NONE), ("default", MODE_NONE)])
def test_mode_from_label(label, mode):
    assert parse_node(node("n", label)).mode == mode


def test_capacity_per_gpu_is_total_over_count():
    spec = parse_node(node("n", "core_mem", gpus=4, gib=15))
    assert (spec.gpu_count, spec.memory_per_gpu, spec.core_per_gpu) == (4, 15, 100)


def test_defaults():
    assert parse_node(node("n", "cgpu")).placement == BINPACK
    assert parse_node(node("n", "cgpu")).max_pod == 20
    assert parse_node(node("n", "core_mem")).max_pod == 20
    assert parse_node(node("n", "share")).max_pod == UNLIMITED_PODS
    assert parse_node(node("n", "cgpu", placement="spread", max_pod="3")).placement == SPREAD
    assert parse_node(node("n", "cgpu", max_pod="3")).max_pod == 3


def test_bad_labels_fall_back_with_a_warning():
    spec = parse_node(node("n", "cgpu", placement="diagonal", max_pod="-2"))
    assert (spec.placement, spec.max_pod) == (BINPACK, 20)
    assert len(spec.warnings) == 2 and "diagonal" in spec.warnings[0]


def test_no_label_is_not_sharing_and_says_so():
    spec = parse_node(node("n", None))
    assert spec.mode == MODE_NONE and spec.problem == "node does not share GPUs"


def test_sharing_label_without_capacity_is_a_problem():
    bare = node("n", "cgpu")
    bare["status"]["allocatable"] = {"cpu": "4"}
    spec = parse_node(bare)
    assert spec.mode == MODE_NONE and spec.gpu_count == 0 and "advertises no shared GPU" in spec.problem


def test_core_mem_without_core_resource_takes_nothing():
    spec_core = node("n", "core_mem")
    del spec_core["status"]["allocatable"]["aliyun.com/gpu-core.percentage"]
    spec = parse_node(spec_core)
    assert spec.mode == MODE_NONE and "advertises no aliyun.com/gpu-core.percentage" in spec.problem


def test_unhealthy_configmap():
    cm = {"metadata": {"name": "unhealthy-gpu-node-a", "namespace": "kube-system"}, "data": {"gpus": "0, 2"}}
    assert parse_unhealthy_gpus(cm) == {0, 2}
    assert unhealthy_configmap_node(cm) == "node-a"
    assert unhealthy_configmap_node({"metadata": {"name": "unhealthy-gpu-a", "namespace": "default"}}) is None
    assert parse_node(node("node-a", "cgpu"), parse_unhealthy_gpus(cm)).unhealthy == {0, 2}
