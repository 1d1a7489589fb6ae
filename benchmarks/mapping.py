"""From trace rows to v1 Nodes and extender requests, in one of two mappings.

``milli`` (exact, comparable with the paper): every node shares GPU memory
only (``ack.node.gpu.schedule=share``: memory-only, no per-GPU pod limit) and
advertises 1000 ``aliyun.com/gpu-mem`` units per GPU, so one unit is 1/1000
of a GPU. The placement core treats amounts as opaque integers, so a share
pod asks for ``gpu_milli`` units and memory *is* the GPU share: there is no
second dimension to distort the comparison. A k-GPU pod asks for ``1000·k``
units with ``aliyun.com/gpu-count=k`` and ``require-whole-device`` — valid
ACK: the memory splits evenly over k GPUs, each request equals the GPU's size.

``cgpu`` (what a real ACK cluster would be asked): nodes are ``core_mem``
(compute and memory shared, 100 compute units per GPU, at most 20 pods per
GPU) with each model's memory in whole GiB (:data:`GPU_GIB`, the README's MiB
rounded down). A share pod asks for

    core   = gpu_milli / 10 rounded up to a multiple of 5        (%)
    memory = ceil(gpu_milli / 1000 · min GiB of the models it may use)   (GiB, ≥ 1)

so it fits by memory on every GPU model it may use whenever its share fits
(the smallest model it may use is the binding one; "may use" is its
``gpu_spec``, or every model in the cluster). A whole-GPU pod asks for 100 %
compute (no other pod can then share the GPU) and the smallest model's
memory. ACK's rules cannot express a k ≥ 2 pod on core_mem nodes (gpu-count
splits memory only, and require-whole-device needs the request to equal the
GPU's size, which differs between models), so the replay builds it directly
as k GPUs × 100 % compute (``simple_request``; our parser would refuse it as
a pod). The placement core places it exactly like a whole-GPU request: only
completely idle GPUs have 100 % compute free. This is the one place the cgpu
mapping leaves ACK's pod syntax.

A pod's ``gpu_spec`` becomes a required node affinity on the nodes' GPU model
label (``aliyun.accelerator/nvidia_name``), which kube-scheduler enforces
(:mod:`benchmarks.kube`); the request carries the allowed models as
:func:`policy.request.gpu_models` reads them from such a pod.

CPU-only pods (``num_gpu == 0``) map to a request for no GPU
(:func:`policy.request.host_request`), scored by the extender's strategy only
in the paper's setting (:mod:`benchmarks.kube`).
"""

from __future__ import annotations

import dataclasses
import math

from benchmarks.trace import GPU_MEMORY_MIB, MILLI, Nodes, Pods
from policy.names import GPU_CORE, GPU_COUNT, GPU_MEM, GPU_MODEL_LABEL, NODE_SCHEDULE
from policy.request import GPURequest, host_request, simple_request

GPU_GIB = {model: mib // 1024 for model, mib in GPU_MEMORY_MIB.items()}
MIB = 2**20


def _node_object(name: str, labels: dict, allocatable: dict) -> dict:
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": labels},
            "status": {"allocatable": allocatable, "capacity": dict(allocatable)}}


class Mapping:
    """Turns trace rows into Nodes and requests (see module doc)."""

    name = ""

    def __init__(self, nodes: Nodes):
        self.models = sorted(set(nodes.model))
        unknown = [m for m in self.models if m not in GPU_MEMORY_MIB]
        if unknown:
            raise ValueError(f"GPU model(s) {', '.join(unknown)} have no known memory size")
        self._cache: dict = {}

    def node(self, nodes: Nodes, i: int) -> dict:
        labels = {"kubernetes.io/hostname": nodes.name[i], GPU_MODEL_LABEL: nodes.model[i]}
        allocatable = {"cpu": f"{nodes.cpu[i]}m", "memory": f"{nodes.memory[i]}Mi", "pods": "1000"}
        labels.update(self.node_labels())
        allocatable.update(self.gpu_allocatable(int(nodes.gpus[i]), nodes.model[i]))
        return _node_object(nodes.name[i], labels, allocatable)

    def request(self, pods: Pods, i: int) -> GPURequest:
        """The pod's request; a request for no GPU for CPU-only pods."""
        key = (int(pods.cpu[i]), int(pods.memory[i]), int(pods.num_gpu[i]), int(pods.gpu_milli[i]), pods.gpu_spec[i])
        request = self._cache.get(key)
        if request is None:
            cpu, mib, k, milli, spec = key
            if k == 0:
                request = host_request(cpu, mib * MIB)
            else:
                request = dataclasses.replace(self.gpu_request(k, milli, self.allowed_models(spec), cpu, mib * MIB),
                                              models=frozenset(self.allowed_models(spec)) if spec else None)
            self._cache[key] = request
        return request

    def allowed_models(self, spec: str) -> list:
        return [m for m in spec.split("|") if m] if spec else self.models

    def node_labels(self) -> dict:
        raise NotImplementedError

    def gpu_allocatable(self, gpus: int, model: str) -> dict:
        raise NotImplementedError

    def gpu_request(self, k: int, milli: int, models: list, cpu: int, host_memory: int) -> GPURequest:
        raise NotImplementedError


class MilliMapping(Mapping):
    name = "milli"

    def node_labels(self) -> dict:
        return {NODE_SCHEDULE: "share"}

    def gpu_allocatable(self, gpus: int, model: str) -> dict:
        return {GPU_MEM: str(MILLI * gpus), GPU_COUNT: str(gpus)}

    def gpu_request(self, k, milli, models, cpu, host_memory):
        if milli < MILLI:
            return simple_request(milli, cpu=cpu, host_memory=host_memory)
        return simple_request(MILLI * k, gpu_count=k, whole_device=True, cpu=cpu, host_memory=host_memory)


class CgpuMapping(Mapping):
    name = "cgpu"

    def node_labels(self) -> dict:
        return {NODE_SCHEDULE: "core_mem"}

    def gpu_allocatable(self, gpus: int, model: str) -> dict:
        return {GPU_MEM: str(GPU_GIB[model] * gpus), GPU_COUNT: str(gpus), GPU_CORE: str(100 * gpus)}

    def gpu_request(self, k, milli, models, cpu, host_memory):
        smallest = min((GPU_GIB[m] for m in models if m in GPU_GIB), default=min(GPU_GIB.values()))
        if milli < MILLI:
            core = 5 * math.ceil(milli / 50)
            memory = max(1, math.ceil(milli * smallest / MILLI))
            return simple_request(memory, core, cpu=cpu, host_memory=host_memory)
        return simple_request(smallest * k, 100 * k, gpu_count=k, cpu=cpu, host_memory=host_memory)


MAPPINGS = {m.name: m for m in (MilliMapping, CgpuMapping)}


def make_mapping(name: str, nodes: Nodes) -> Mapping:
    try:
        return MAPPINGS[name](nodes)
    except KeyError:
        raise ValueError(f"unknown mapping {name!r}; known: {', '.join(MAPPINGS)}") from None
