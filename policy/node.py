"""What a node offers for GPU sharing, read from a v1 Node.

Contract of :func:`parse_node`: always returns a :class:`NodeSpec`. A node that
cannot share GPUs has ``mode == MODE_NONE`` and ``problem`` says why; label
values that are malformed fall back to their default and are listed in
``warnings`` (a node's labels are not a request that can be refused).

* mode from label ``ack.node.gpu.schedule``: cgpu/share/mps share memory,
  core_mem shares memory and compute, anything else shares nothing;
* per-GPU capacity = ``status.allocatable`` total / ``aliyun.com/gpu-count``;
* GPU choice from ``ack.node.gpu.placement`` (binpack unless ``spread``);
* per-GPU pod limit from ``ack.node.gpu.max-pod`` (default 20 on cgpu and
  core_mem nodes, no limit on share and mps nodes);
* unhealthy GPU indices come from the ``kube-system/unhealthy-gpu-<node>``
  ConfigMap (:func:`parse_unhealthy_gpus`);
* CPU (millicores) and host memory (bytes) from ``status.allocatable``, 0 when
  absent or malformed, and the GPU model from label ``aliyun.accelerator/nvidia_name``
  (strategies may weigh them; placement never checks them).
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass, field

from policy.names import (
    BINPACK,
    DEFAULT_MAX_POD,
    GPU_CORE,
    GPU_COUNT,
    GPU_MEM,
    GPU_MODEL_LABEL,
    MODE_CORE,
    MODE_NONE,
    MODES_BY_LABEL,
    MAX_CORE_PER_GPU,
    MAX_GIB_PER_GPU,
    MAX_GPUS_PER_NODE,
    MAX_PODS_LABEL,
    NODE_MAX_POD,
    NODE_PLACEMENT,
    NODE_SCHEDULE,
    PLACEMENTS_BY_LABEL,
    UNLIMITED_PODS,
)
from policy.echo import shown
from policy.quantity import QuantityError, count_label, parse_quantity, parse_whole

UNHEALTHY_CONFIGMAP_PREFIX = "unhealthy-gpu-"
UNHEALTHY_CONFIGMAP_NAMESPACE = "kube-system"


@dataclass(frozen=True)
class NodeSpec:
    name: str
    mode: int = MODE_NONE
    gpu_count: int = 0
    memory_per_gpu: int = 0  # GiB
    core_per_gpu: int = 0  # compute units as advertised (only core_mem nodes share them)
    placement: int = BINPACK
    max_pod: int = UNLIMITED_PODS
    unhealthy: frozenset = frozenset()
    schedule_label: str = ""
    problem: str | None = None
    warnings: tuple = field(default=(), compare=False)
    cpu: int = 0  # allocatable millicores
    host_memory: int = 0  # allocatable bytes
    model: str = ""  # GPU model label, "" when not labelled


def model_code(model: str) -> int:
    """A stable integer for a GPU model name (0 for none), for the state's arrays."""
    return zlib.crc32(model.encode()) + 1 if model else 0


def parse_unhealthy_gpus(configmap: dict) -> frozenset:
    """GPU indices listed in an unhealthy-GPU ConfigMap's ``data.gpus`` ("0,2")."""
    raw = ((configmap or {}).get("data") or {}).get("gpus", "")
    indices = set()
    for part in str(raw)[:4096].replace(" ", "").split(","):
        index = count_label(part, MAX_GPUS_PER_NODE)
        if index is not None:
            indices.add(index)
    return frozenset(indices)


def unhealthy_configmap_node(configmap: dict) -> str | None:
    """The node an unhealthy-GPU ConfigMap speaks for, or None if it is not one."""
    meta = (configmap or {}).get("metadata") or {}
    name = meta.get("name") or ""
    if meta.get("namespace") == UNHEALTHY_CONFIGMAP_NAMESPACE and name.startswith(UNHEALTHY_CONFIGMAP_PREFIX):
        return name[len(UNHEALTHY_CONFIGMAP_PREFIX):] or None
    return None


def _host_allocatable(allocatable: dict, resource: str, scale: int) -> int:
    try:
        return max(int(parse_quantity(allocatable.get(resource, 0)) * scale), 0)
    except QuantityError:
        return 0


def _object(value) -> dict:
    return value if isinstance(value, dict) else {}


def parse_node(node: dict, unhealthy: frozenset = frozenset()) -> NodeSpec:
    """Read the sharing capacity of a v1 Node (see module doc)."""
    meta = _object(_object(node).get("metadata"))
    name = meta.get("name") if isinstance(meta.get("name"), str) else ""
    labels = {k: v for k, v in _object(meta.get("labels")).items() if isinstance(v, str)}
    allocatable = _object(_object(_object(node).get("status")).get("allocatable"))
    schedule = labels.get(NODE_SCHEDULE, "")
    mode = MODES_BY_LABEL.get(schedule, MODE_NONE)

    warnings = []
    placement = PLACEMENTS_BY_LABEL.get(labels.get(NODE_PLACEMENT, "binpack"))
    if placement is None:
        warnings.append(f"label {NODE_PLACEMENT}={shown(labels[NODE_PLACEMENT])} is not binpack or spread; "
                        "using binpack")
        placement = BINPACK
    max_pod = DEFAULT_MAX_POD if schedule in ("cgpu", "core_mem") else UNLIMITED_PODS
    if NODE_MAX_POD in labels:
        raw = labels[NODE_MAX_POD]
        value = count_label(raw, MAX_PODS_LABEL)
        if value is not None and value >= 1:
            max_pod = value
        else:
            warnings.append(f"label {NODE_MAX_POD}={shown(raw)} is not a whole number from 1 to {MAX_PODS_LABEL}; "
                            f"using {max_pod}")
    base = dict(name=name, schedule_label=schedule, placement=placement, max_pod=max_pod, unhealthy=unhealthy,
                cpu=_host_allocatable(allocatable, "cpu", 1000), host_memory=_host_allocatable(allocatable, "memory", 1),
                model=labels.get(GPU_MODEL_LABEL, "") if isinstance(labels.get(GPU_MODEL_LABEL), str) else "")

    # Capacity is read on every node, sharing or not, so that pods still bound
    # after a node leaves sharing mode keep being counted and shown.
    try:
        gpus = parse_whole(allocatable.get(GPU_COUNT, 0))
        memory = parse_whole(allocatable.get(GPU_MEM, 0))
        core = parse_whole(allocatable.get(GPU_CORE, 0))
    except QuantityError as exc:
        return NodeSpec(**base, warnings=tuple(warnings), problem=f"node advertises a malformed GPU quantity: {exc}")
    if gpus > MAX_GPUS_PER_NODE or memory > MAX_GIB_PER_GPU * max(gpus, 1) or core > MAX_CORE_PER_GPU * max(gpus, 1):
        return NodeSpec(**base, warnings=tuple(warnings),
                        problem=f"node advertises more GPU than any node has ({gpus} GPUs, {memory} GiB, "
                                f"{core} % compute; at most {MAX_GPUS_PER_NODE} GPUs of {MAX_GIB_PER_GPU} GiB)")
    if gpus < 1 or memory < gpus:
        problem = "node does not share GPUs" if mode == MODE_NONE else f"node advertises no shared GPU ({GPU_MEM})"
        return NodeSpec(**base, warnings=tuple(warnings), problem=problem)
    if memory % gpus:
        warnings.append(f"{GPU_MEM} {memory} does not divide over {gpus} GPUs; each counts {memory // gpus}")
    capacity = dict(gpu_count=gpus, memory_per_gpu=memory // gpus, core_per_gpu=core // gpus)
    problem = None
    if mode == MODE_NONE:
        problem = "node does not share GPUs"
    elif mode == MODE_CORE and core < gpus:
        problem = f"core_mem node advertises no {GPU_CORE}"
        mode = MODE_NONE
    return NodeSpec(**base, **capacity, mode=mode, warnings=tuple(warnings), problem=problem)
