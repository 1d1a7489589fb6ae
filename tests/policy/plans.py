"""Inputs for the planner's tests: pending pods, node objects, pools, a pool of full nodes."""

from __future__ import annotations

from dataclasses import dataclass, field

from policy.names import BINPACK, MODE_CORE, MODE_MEMORY
from policy.node import NodeSpec
from policy.pools import Pool
from policy.request import simple_request
from policy.state import ClusterState

POOL_KEY = "alibabacloud.com/nodepool-id"
SCALER = [{"key": "scaler", "value": "gpu", "effect": "NoSchedule"}]
TOLERATE_SCALER = [{"key": "scaler", "operator": "Equal", "value": "gpu", "effect": "NoSchedule"}]


@dataclass
class Pending:
    ref: str
    request: object
    node_selector: dict = field(default_factory=dict)
    node_affinity: list = field(default_factory=list)
    tolerations: list = field(default_factory=list)
    nominated_node: str | None = None


def node_object(labels: dict, taints: list | None = None) -> dict:
    return {"metadata": {"labels": labels}, "spec": {"taints": taints or []}}


def pool(name: str, spec: NodeSpec, nodes: int, max_size=None, labels=None, taints=None) -> Pool:
    template = node_object({POOL_KEY: name, **(labels or {})}, taints)
    return Pool(name, POOL_KEY, nodes, max_size, template, spec)


def gpu_node(name, gpus=4, gib=15, mode=MODE_MEMORY, placement=BINPACK, max_pod=20) -> NodeSpec:
    return NodeSpec(name=name, mode=mode, gpu_count=gpus, memory_per_gpu=gib,
                    core_per_gpu=100 if mode == MODE_CORE else 0, placement=placement, max_pod=max_pod)


def full_pool(name="np-a", nodes=4, used_per_gpu=10, **spec_options):
    """A pool of ``nodes`` 4 × 15 GiB nodes with ``used_per_gpu`` GiB taken on every GPU."""
    state = ClusterState()
    objects = {}
    for i in range(nodes):
        spec = gpu_node(f"{name}-{i}", **spec_options)
        state.set_node(spec)
        for g in range(spec.gpu_count):
            state.add_usage(spec.name, {g: used_per_gpu}, {}, False)
        objects[spec.name] = node_object({POOL_KEY: name})
    return state, objects, {name: pool(name, gpu_node(f"{name}-template", **spec_options), nodes)}


def pods(count, memory, prefix="p", **options):
    """``count`` pending pods ``default/{prefix}{i}`` of ``memory`` GiB on one GPU."""
    return [Pending(f"default/{prefix}{i}", simple_request(memory), **options) for i in range(count)]
