"""The allocation record on the pod, in the keys ACK's device plugin reads.

:func:`write` produces the V2 keys (JSON maps container index → GPU index →
amount) and, for single-GPU pods, the legacy V1 keys that the open-source
device plugin and inspect tool read. :func:`read` recovers an allocation from
a bound pod's annotations: V2 first, V1 otherwise, ``None`` when neither is
usable (the pod is then *unaccounted*).
"""

from __future__ import annotations

import json
from dataclasses import dataclass

import orjson

from policy.names import MAX_GIB_PER_GPU, MAX_GPUS_PER_NODE
from policy.quantity import count_label
from policy.request import GPURequest

MAX_CONTAINERS = 10_000  # container indices in an allocation annotation

V2_ALLOCATION = "scheduler.framework.gpushare.allocation"
V2_CORE = "gpushare.alibabacloud.com/core-percentage"
V2_DEVICE = "gpushare.alibabacloud.com/device-resource"
V2_ASSIGNED = "scheduler.framework.gpushare.assigned"
V2_ASSUME_TIME = "scheduler.framework.gpushare.assume-time"
V1_INDEX = "ALIYUN_COM_GPU_MEM_IDX"
V1_POD = "ALIYUN_COM_GPU_MEM_POD"
V1_DEVICE = "ALIYUN_COM_GPU_MEM_DEV"
V1_ASSIGNED = "ALIYUN_COM_GPU_MEM_ASSIGNED"
V1_ASSUME_TIME = "ALIYUN_COM_GPU_MEM_ASSUME_TIME"

ALL_KEYS = (V2_ALLOCATION, V2_CORE, V2_DEVICE, V2_ASSIGNED, V2_ASSUME_TIME,
            V1_INDEX, V1_POD, V1_DEVICE, V1_ASSIGNED, V1_ASSUME_TIME)


@dataclass(frozen=True)
class Recovered:
    memory: dict  # container index → {GPU index → GiB}
    core: dict  # container index → {GPU index → units}; {} when memory-only
    source: str  # "v2" or "v1"
    gpu_memory: int = 0  # one GPU's GiB as the record says (0 when it does not)
    assume_ns: int = 0
    assigned: bool = False  # the device plugin has taken the allocation


def _dump(nested: dict) -> str:
    ordered = {str(c): {str(g): int(v) for g, v in sorted(gpus.items())} for c, gpus in sorted(nested.items())}
    return orjson.dumps(ordered).decode()


def write(memory: dict, core: dict, gpu_memory: int, assume_ns: int, assigned: bool = False,
          v1_only: bool = False) -> dict:
    """Annotations for an allocation (``memory``/``core`` as from ``policy.allocation.split``).

    ``gpu_memory`` is one GPU's total GiB on the node; ``assume_ns`` the bind
    time in Unix nanoseconds; ``assigned`` whether the device plugin has taken
    it (never, at bind). ``v1_only`` writes only the legacy keys (for showing a
    pod that carries only those).
    """
    gpus = sorted({g for per in memory.values() for g in per})
    flag = "true" if assigned else "false"
    annotations = {}
    if not v1_only:
        annotations.update({
            V2_ALLOCATION: _dump(memory),
            V2_DEVICE: orjson.dumps({str(g): int(gpu_memory) for g in gpus}).decode(),
            V2_ASSIGNED: flag,
            V2_ASSUME_TIME: str(assume_ns),
        })
        if core:
            annotations[V2_CORE] = _dump(core)
    if len(gpus) == 1:
        annotations.update({
            V1_INDEX: str(gpus[0]),
            V1_POD: str(sum(sum(per.values()) for per in memory.values())),
            V1_DEVICE: str(gpu_memory),
            V1_ASSIGNED: flag,
            V1_ASSUME_TIME: str(assume_ns),
        })
    return annotations


def _load(raw: str | None) -> dict | None:
    """Parse a V2 map; None when absent or malformed."""
    if not raw:
        return None
    try:
        data = json.loads(raw)
        result = {int(c): {int(g): int(v) for g, v in gpus.items()} for c, gpus in data.items()}
    except (ValueError, TypeError, AttributeError):
        return None
    if any(not 0 <= c < MAX_CONTAINERS for c in result) or any(
            not 0 <= g < MAX_GPUS_PER_NODE or not 0 <= v <= MAX_GIB_PER_GPU * 100
            for gpus in result.values() for g, v in gpus.items()):
        return None  # out of any node's range: the pod is held back as unaccounted instead
    return result


def read(annotations: dict | None, request: GPURequest | None) -> Recovered | None:
    """Recover a bound pod's GPU use from its annotations (see module doc).

    V1 holds no compute: a V1-only pod's compute is taken from its request.
    """
    annotations = annotations or {}
    memory = _load(annotations.get(V2_ALLOCATION))
    if memory:
        core = _load(annotations.get(V2_CORE)) or {}
        devices = _load('{"0":' + annotations[V2_DEVICE] + "}") if annotations.get(V2_DEVICE) else None
        gpu_memory = max(devices[0].values(), default=0) if devices else _number(annotations.get(V1_DEVICE))
        return Recovered(memory, core, "v2", gpu_memory, _number(annotations.get(V2_ASSUME_TIME)),
                         annotations.get(V2_ASSIGNED) == "true")
    index, total = annotations.get(V1_INDEX), annotations.get(V1_POD)
    gpu, total = count_label(index, MAX_GPUS_PER_NODE - 1), count_label(total, MAX_GIB_PER_GPU)
    if gpu is None or total is None:
        return None
    first = request.containers[0].index if request else 0
    core = {}
    if request is not None and request.wants_core:
        core = {first: {gpu: request.core}}
    return Recovered({first: {gpu: int(total)}}, core, "v1", _number(annotations.get(V1_DEVICE)),
                     _number(annotations.get(V1_ASSUME_TIME)), annotations.get(V1_ASSIGNED) == "true")


def _number(raw) -> int:
    """A whole number annotation, 0 when absent or malformed."""
    return count_label(raw, 2**63 - 1) or 0
