"""extender.ledger.nodefacts: what inspect says of a Node beside its GPUs, from whatever the Node holds."""

import pytest

from extender.ledger.nodefacts import facts, kept_conditions
from policy.node import parse_node


def read(node: dict) -> dict:
    return facts(node, parse_node(node))


def named(**parts) -> dict:
    return {"metadata": {"name": "n", "labels": parts.pop("labels", {})}, **parts}


@pytest.mark.parametrize("conditions, ready", [
    ([{"type": "Ready", "status": "True"}], True),
    ([{"type": "DiskPressure", "status": "True"}, {"type": "Ready", "status": "False"}], False),
    ([{"type": "Ready", "status": "Unknown"}], None),
    ([], None),
    ("Ready", None),
    ([None, 7, {"type": "Ready"}, {"type": "Ready", "status": 1}], None),
])
def test_readiness_is_the_ready_conditions_status(conditions, ready):
    assert read(named(status={"conditions": conditions}))["ready"] is ready


def test_a_heartbeat_changes_nothing_kept():
    beat = [{"type": "Ready", "status": "True", "lastHeartbeatTime": t, "message": "kubelet is posting ready status"}
            for t in ("2025-01-01T00:00:00Z", "2025-01-01T00:00:40Z")]
    assert kept_conditions({"conditions": beat[:1]}) == kept_conditions({"conditions": beat[1:]}) == [
        {"type": "Ready", "status": "True"}]


@pytest.mark.parametrize("allocatable, whole", [({"nvidia.com/gpu": "8"}, 8), ({}, 0), ({"nvidia.com/gpu": "x"}, 0),
                                                ({"nvidia.com/gpu": "1e30"}, 0), ({"nvidia.com/gpu": "0.5"}, 0),
                                                ({"nvidia.com/gpu": ["8"]}, 0)])
def test_whole_gpus_are_a_count_or_zero(allocatable, whole):
    assert read(named(status={"allocatable": allocatable}))["wholeGpus"] == whole


def test_cordon_and_model():
    node = named(spec={"unschedulable": True}, labels={"aliyun.accelerator/nvidia_name": "NVIDIA-A10"})
    assert read(node) == {"ready": None, "unschedulable": True, "model": "NVIDIA-A10", "wholeGpus": 0}
    assert read(named(spec={"unschedulable": "yes"}))["unschedulable"] is False
    assert read({}) == {"ready": None, "unschedulable": False, "model": None, "wholeGpus": 0}
